package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/term"
)

func newConsoleCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "console", Short: "The web console's logins (the console is served under /ui/ on http.listen)"}
	hash := &cobra.Command{
		Use:   "hash-password",
		Short: "Print the bcrypt hash of a password, for console.users[].password_hash",
		Long: `hash-password reads a password (without echo on a terminal, else the first line of stdin)
and prints its bcrypt hash, to put in the configuration as a console user's password_hash.`,
		Example: `  controller console hash-password
  printf '%s\n' "$PASSWORD" | controller console hash-password`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var pw []byte
			if fd := int(os.Stdin.Fd()); term.IsTerminal(fd) {
				fmt.Fprint(cmd.ErrOrStderr(), "password: ")
				b, err := term.ReadPassword(fd)
				fmt.Fprintln(cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				pw = b
			} else {
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if err != nil && line == "" {
					return usageError(errors.New("no password on stdin"))
				}
				pw = []byte(strings.TrimRight(line, "\r\n"))
			}
			if len(pw) < 8 {
				return usageError(errors.New("a console password must have at least 8 characters"))
			}
			h, err := bcrypt.GenerateFromPassword(pw, bcrypt.DefaultCost)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(h))
			return nil
		},
	}
	cmd.AddCommand(hash)
	return cmd
}

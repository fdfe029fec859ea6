//go:build !linux

package stub

import "os"

// Exec fails: Landlock is Linux's, and nothing starts the step elsewhere.
func Exec([]string) {
	os.Stderr.WriteString(Name + ": confinement is only available on Linux\n")
	os.Exit(ExitCannotRun)
}

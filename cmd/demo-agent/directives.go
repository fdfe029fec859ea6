package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Exit codes. A non-zero @exit uses its own code.
const (
	exitOK       = 0
	exitFailed   = 1 // a directive failed while running (I/O, git)
	exitUsage    = 2 // bad flags or an invalid prompt; nothing was executed
	exitRequired = 3 // @require found its file missing
)

// directive is one parsed "@name args" line of the prompt.
type directive struct {
	line int    // 1-based line in the prompt, for messages
	name string // without the "@"
	path string // @write, @append, @delete, @require, @prompt: cleaned, relative
	text string // @write/@append content (escapes expanded), @commit message, @stdout/@stderr text, @case name
	num  int64  // @exit code, @flood byte count
	dur  time.Duration
	when attemptCond // from an @on-attempt or @after-attempt prefix
}

// attemptCond limits a directive to some attempts of a task: attempt n
// (@on-attempt n), every attempt after n (@after-attempt n), or those that
// run before a time (@before UNIX, a provider's window of rate limits
// shared by every attempt). The zero value means every attempt.
type attemptCond struct {
	n      int
	after  bool
	before int64 // Unix seconds; 0: any time
}

func (c attemptCond) applies(attempt int, now time.Time) bool {
	switch {
	case c.before != 0:
		return now.Unix() < c.before
	case c.n == 0:
		return true
	case c.after:
		return attempt > c.n
	}
	return attempt == c.n
}

// attemptNumber is the attempt number in a Drover attempt id,
// <flow>_<task>_<n>: n after the last underscore. Outside Drover (no id)
// or with an id it cannot read, the run is attempt 1.
func attemptNumber(id string) int {
	i := strings.LastIndexByte(id, '_')
	if i < 0 {
		return 1
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n < 1 || strings.HasPrefix(id[i+1:], "+") {
		return 1
	}
	return n
}

// forAttempt returns the directives that apply to the given attempt, run
// now.
func forAttempt(ds []directive, attempt int, now time.Time) []directive {
	var out []directive
	for _, d := range ds {
		if d.when.applies(attempt, now) {
			out = append(out, d)
		}
	}
	return out
}

// usageError is an invalid prompt. The whole prompt is parsed before
// anything runs, so a typo on line 10 does not leave lines 1–9 applied.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitError ends the run with a specific exit code after the result line.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// cutSpace splits s at its first run of blanks.
func cutSpace(s string) (head, tail string) {
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t")
}

// parse extracts the directives of a prompt, in order. Lines whose first
// non-blank character is "@" are directives; everything else is free text
// (so feedback quoted as "> @write x" is inert). Directives meant for other
// attempts are parsed and checked too, and kept: forAttempt selects.
func parse(prompt string) ([]directive, error) {
	var out []directive
	for i, line := range strings.Split(prompt, "\n") {
		line = strings.TrimLeft(strings.TrimRight(line, "\r"), " \t")
		if !strings.HasPrefix(line, "@") {
			continue
		}
		name, rest := cutSpace(line[1:])
		d, err := parseDirective(i+1, name, rest)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func parseDirective(line int, name, rest string) (directive, error) {
	d := directive{line: line, name: name}
	bad := func(format string, args ...any) (directive, error) {
		return directive{}, usagef("line %d: @%s: %s", line, name, fmt.Sprintf(format, args...))
	}
	arg := strings.TrimSpace(rest)
	switch name {
	case "write", "append":
		path, content := cutSpace(rest)
		p, err := localPath(path)
		if err != nil {
			return bad("%v", err)
		}
		d.path, d.text = p, expandEscapes(content)
	case "delete", "require", "prompt":
		if len(strings.Fields(arg)) != 1 {
			return bad("want exactly one PATH")
		}
		p, err := localPath(arg)
		if err != nil {
			return bad("%v", err)
		}
		d.path = p
	case "commit":
		if arg == "" {
			return bad("want a MESSAGE")
		}
		d.text = rest
	case "stdout", "stderr":
		d.text = rest
	case "sleep":
		dur, err := time.ParseDuration(arg)
		if err != nil || dur < 0 {
			return bad("want a Go duration such as 500ms, got %q", arg)
		}
		d.dur = dur
	case "exit":
		code, err := strconv.Atoi(arg)
		if err != nil || code < 0 || code > 255 {
			return bad("want an exit code 0-255, got %q", arg)
		}
		d.num = int64(code)
	case "flood":
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || n < 0 {
			return bad("want a byte count, got %q", arg)
		}
		d.num = n
	case "case":
		if arg == "" || arg == "." || arg == ".." || strings.ContainsAny(arg, "/\\ \t") {
			return bad("want one recording NAME such as success, fail-401 or fail-429, got %q", arg)
		}
		d.text = arg
	case "hang", "ignore-sigterm", "spawn-grandchild", "call-model":
		if arg != "" {
			return bad("takes no arguments")
		}
	case "on-attempt", "after-attempt", "before":
		num, inner := cutSpace(rest)
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n < 1 || strings.HasPrefix(num, "+") || name != "before" && n > math.MaxInt32 {
			if name == "before" {
				return bad("want a time in Unix seconds and a directive, got %q", arg)
			}
			return bad("want an attempt number N >= 1 and a directive, got %q", arg)
		}
		if !strings.HasPrefix(inner, "@") {
			return bad("want a directive after %d, such as @case fail-429, got %q", n, strings.TrimSpace(inner))
		}
		innerName, innerRest := cutSpace(inner[1:])
		if innerName == "on-attempt" || innerName == "after-attempt" || innerName == "before" {
			return bad("@%s cannot be nested", innerName)
		}
		// Checked now even when it is for another attempt: a typo fails
		// every attempt, not just the one it was meant for.
		nested, err := parseDirective(line, innerName, innerRest)
		if err != nil {
			return directive{}, err
		}
		switch name {
		case "before":
			nested.when = attemptCond{before: n}
		default:
			nested.when = attemptCond{n: int(n), after: name == "after-attempt"}
		}
		return nested, nil
	default:
		return directive{}, usagef("unknown directive @%s", name)
	}
	return d, nil
}

// localPath accepts only relative paths that stay inside the working
// directory and out of .git: a demo agent should model good behaviour. This
// is the lexical check; a symlink pointing outside is refused when the file
// is opened, because all file access goes through an os.Root.
func localPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("want a PATH")
	case filepath.IsAbs(p):
		return "", fmt.Errorf("%s: absolute paths are not allowed", p)
	case !filepath.IsLocal(p):
		return "", fmt.Errorf("%s: path escapes the working directory", p)
	}
	clean := filepath.Clean(p)
	if clean == "." {
		return "", fmt.Errorf("%s: names the working directory itself", p)
	}
	if first, _, _ := strings.Cut(filepath.ToSlash(clean), "/"); first == ".git" {
		return "", fmt.Errorf("%s: .git is off limits", p)
	}
	return clean, nil
}

// expandEscapes turns \n and \t into newline and tab, and \\ into one
// backslash (so a literal backslash-n can still be written). Any other
// backslash is kept as is.
func expandEscapes(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			if r, ok := map[byte]byte{'n': '\n', 't': '\t', '\\': '\\'}[s[i+1]]; ok {
				b.WriteByte(r)
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// execute runs one directive. A returned *exitError ends the run with its
// code; any other error ends it with exitFailed.
func (a *agent) execute(d directive) error {
	switch d.name {
	case "write":
		return a.writeFile(d.path, d.text+"\n", false)
	case "append":
		return a.writeFile(d.path, d.text+"\n", true)
	case "delete":
		return a.deleteFile(d.path)
	case "prompt":
		return a.writeFile(d.path, a.prompt, false)
	case "require":
		if _, err := a.root.Stat(d.path); err != nil {
			return &exitError{code: exitRequired, msg: fmt.Sprintf("@require %s: %v", d.path, unwrapPath(err))}
		}
	case "commit":
		return a.commit(d.text)
	case "stdout":
		a.out.raw([]byte(d.text + "\n"))
	case "stderr":
		fmt.Fprintln(a.stderr, d.text)
	case "sleep":
		time.Sleep(d.dur)
	case "exit":
		return &exitError{code: int(d.num), msg: fmt.Sprintf("@exit %d", d.num)}
	case "hang":
		for {
			time.Sleep(time.Hour)
		}
	case "ignore-sigterm":
		signal.Ignore(syscall.SIGTERM)
	case "flood":
		a.flood(d.num)
	case "spawn-grandchild":
		return a.spawnGrandchild()
	case "case":
		return a.replay()
	case "call-model":
		return a.callModel()
	}
	return nil
}

// writeFile creates, overwrites or appends to path and reports it as a
// Write tool call carrying the file's full new content, which is what the
// file looks like afterwards whichever way it was changed.
func (a *agent) writeFile(path, content string, appendTo bool) error {
	_, statErr := a.root.Stat(path)
	existed := statErr == nil
	if dir := filepath.Dir(path); dir != "." {
		if err := a.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appendTo {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := a.root.OpenFile(path, flags, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	full := content
	if appendTo {
		b, err := a.root.ReadFile(path)
		if err != nil {
			return err
		}
		full = string(b)
	}
	abs := filepath.Join(a.cwd, path)
	id := a.out.toolUse("Write", writeInput{FilePath: abs, Content: full})
	if existed {
		a.out.toolResult(id, fmt.Sprintf("The file %s has been updated.", abs))
	} else {
		a.out.toolResult(id, "File created successfully at: "+abs)
	}
	verb := "wrote"
	if appendTo {
		verb = "appended to"
	}
	a.did(verb + " " + filepath.ToSlash(path))
	return nil
}

func (a *agent) deleteFile(path string) error {
	fi, err := a.root.Lstat(path)
	if err != nil {
		return err
	}
	cmd := "rm -- " + shellQuote(filepath.ToSlash(path))
	if fi.IsDir() {
		cmd = "rm -r -- " + shellQuote(filepath.ToSlash(path))
	}
	id := a.out.toolUse("Bash", bashInput{Command: cmd, Description: "Delete " + filepath.ToSlash(path)})
	if err := a.root.RemoveAll(path); err != nil {
		return err
	}
	a.out.toolResult(id, "")
	a.did("deleted " + filepath.ToSlash(path))
	return nil
}

// commit stages everything and commits as the runtime itself would, with a
// fixed identity and no signing (the user's signing setup is not ours to
// use). Nothing staged is not an error: there is just nothing to commit.
func (a *agent) commit(msg string) error {
	git, err := findTool("git")
	if err != nil {
		return err
	}
	gitCmd := func(args ...string) ([]byte, error) {
		base := []string{"-c", "user.name=demo-agent", "-c", "user.email=demo-agent@localhost", "-c", "commit.gpgsign=false"}
		c := exec.Command(git, append(base, args...)...)
		c.Dir = a.cwd
		out, err := c.CombinedOutput()
		if err != nil {
			return out, fmt.Errorf("git %s: %w\n%s", args[0], err, bytes.TrimSpace(out))
		}
		return out, nil
	}
	id := a.out.toolUse("Bash", bashInput{
		Command:     "git add -A && git commit -m " + shellQuote(msg),
		Description: "Commit the changes",
	})
	if _, err := gitCmd("add", "-A"); err != nil {
		return err
	}
	if _, err := gitCmd("diff", "--cached", "--quiet"); err == nil {
		a.out.toolResult(id, "nothing to commit, working tree clean")
		fmt.Fprintln(a.stderr, "demo-agent: @commit: nothing to commit")
		return nil
	}
	out, err := gitCmd("commit", "-q", "-m", msg)
	if err != nil {
		return err
	}
	a.out.toolResult(id, strings.TrimSpace(string(out)))
	a.did(fmt.Sprintf("committed %q", msg))
	return nil
}

// flood prints n bytes of text lines as fast as it can, ending with a
// newline so that later JSON lines start on a line of their own.
func (a *agent) flood(n int64) {
	const line = "flood flood flood flood flood flood flood flood flood flood flood\n"
	chunk := []byte(strings.Repeat(line, (64<<10)/len(line)))
	for n > 1 {
		k := min(n-1, int64(len(chunk)))
		a.out.raw(chunk[:k])
		n -= k
	}
	if n == 1 {
		a.out.raw([]byte("\n"))
	}
}

// spawnGrandchild starts "sleep 1000" in the agent's own process group and
// leaves it running with the agent's stdout and stderr: the misbehaving
// child a supervisor has to clean up (and must not wait for).
func (a *agent) spawnGrandchild() error {
	sleep, err := findTool("sleep")
	if err != nil {
		return err
	}
	c := exec.Command(sleep, "1000")
	// Hand over the real descriptors (not a copying goroutine) so the
	// grandchild holds the very pipes the supervisor reads.
	if f, ok := a.out.w.(*os.File); ok {
		c.Stdout = f
	}
	if f, ok := a.stderr.(*os.File); ok {
		c.Stderr = f
	}
	if err := c.Start(); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "grandchild pid %d\n", c.Process.Pid)
	return c.Process.Release() // deliberately never waited for
}

// findTool looks name up in PATH, then in the usual system directories: a
// supervised run may get a minimal environment without PATH.
func findTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH, /usr/local/bin, /usr/bin or /bin", name)
}

// shellQuote quotes s for display in a Bash tool call.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// unwrapPath drops the *PathError wrapper so messages show the path once.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

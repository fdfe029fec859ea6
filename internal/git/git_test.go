package git

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/git/gittest"
)

func newTestGit(t testing.TB) *Git {
	t.Helper()
	g, err := New(Options{Logger: gittest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGitErrorStderrBounded(t *testing.T) {
	t.Parallel()
	g := newTestGit(t)
	// git echoes the bad revision into its error message.
	long := strings.Repeat("x", 3*MaxStderr)
	_, err := g.Run(context.Background(), Cmd{Dir: t.TempDir(), Args: []string{"--git-dir=/nonexistent", "rev-parse", long + "\nlast line"}})
	var ge *Error
	if !errors.As(err, &ge) {
		t.Fatalf("err = %v, want *Error", err)
	}
	if len(ge.Stderr) > MaxStderr {
		t.Errorf("len(Stderr) = %d, want <= %d", len(ge.Stderr), MaxStderr)
	}
	if ge.ExitCode != 128 {
		t.Errorf("ExitCode = %d, want 128", ge.ExitCode)
	}
	if !strings.HasPrefix(ge.Error(), "git: --git-dir=/nonexistent rev-parse") {
		t.Errorf("Error() = %.80q", ge.Error())
	}
}

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	b := &tailBuffer{limit: 10}
	b.Write([]byte("12345"))
	if b.String() != "12345" {
		t.Errorf("short = %q", b.String())
	}
	b.Write([]byte("6789\nabcdef"))
	if got := b.String(); got != "...abcdef" {
		t.Errorf("tail = %q, want ...abcdef", got)
	}
	b = &tailBuffer{limit: 4}
	b.Write([]byte(strings.Repeat("z", 100)))
	if len(b.buf) != 4 {
		t.Errorf("kept %d bytes, want 4", len(b.buf))
	}
}

func TestLimitedBuffer(t *testing.T) {
	t.Parallel()
	b := &limitedBuffer{limit: 5}
	for _, s := range []string{"ab", "cdef", "gh"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; must report success so git is not killed", s, n, err)
		}
	}
	if b.buf.String() != "abcde" || !b.truncated {
		t.Errorf("buf = %q, truncated = %v", b.buf.String(), b.truncated)
	}
}

func TestGitAtLeast(t *testing.T) {
	for v, want := range map[string]bool{
		"git version 2.39.5":               true,
		"git version 2.38.0":               true,
		"git version 2.37.7":               false,
		"git version 3.0.0":                true,
		"git version 1.99.0":               false,
		"git version 2.40.1.windows.1":     true,
		"git version 2.34.1 (Apple Git-1)": false,
		"git version":                      false,
		"garbage":                          false,
		"git version x.y":                  false,
	} {
		if got := gitAtLeast(v, 2, 38); got != want {
			t.Errorf("gitAtLeast(%q, 2, 38) = %v, want %v", v, got, want)
		}
	}
}

func TestNewOptions(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{Git: "/no/such/git"}); err == nil {
		t.Error("New with a missing git binary succeeded")
	}
	if _, err := New(Options{Env: []string{"NOEQUALS"}}); err == nil {
		t.Error("New with a malformed Env entry succeeded")
	}
	g, err := New(Options{}) // nil Logger is fine
	if err != nil {
		t.Fatal(err)
	}
	if name, email := g.Identity(); name != DefaultAuthorName || email != DefaultAuthorEmail {
		t.Errorf("defaults not applied: %q %q", name, email)
	}
}

func TestErrorMessages(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&Error{Args: []string{"fetch"}, ExitCode: -1, Err: context.Canceled},
		ErrOutputTooLarge,
	} {
		if !strings.HasPrefix(err.Error(), "git: ") {
			t.Errorf("%T message %q lacks the package prefix", err, err.Error())
		}
	}
	if !errors.Is(&Error{Err: context.Canceled}, context.Canceled) {
		t.Error("GitError does not unwrap to its cause")
	}
}

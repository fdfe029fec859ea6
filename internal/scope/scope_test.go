package scope

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/checkout"
	"github.com/drover-dev/drover/internal/flow"
)

func TestCheckScope(t *testing.T) {
	e := newEnv(t)
	writeFile(t, e.path("src/new.go"), "package main\n")
	writeFile(t, e.path("src/app.go"), "package main\n// changed\n")
	writeFile(t, e.path("src/secret/key.pem"), "k\n")
	writeFile(t, e.path("README.md"), "changed\n")
	if err := os.Remove(e.path("docs/guide.md")); err != nil {
		t.Fatal(err)
	}
	ch := e.observe(t)

	if v := Check(e.wt.Path, ch, nil); len(v) != 0 {
		t.Errorf("nil scope: %q", v)
	}
	if v := Check(e.wt.Path, ch, &flow.Scope{Allow: []string{"**"}}); len(v) != 0 {
		t.Errorf("allow all: %q", v)
	}
	got := Check(e.wt.Path, ch, &flow.Scope{Allow: []string{"src/**"}, Deny: []string{"src/secret/**"}})
	want := []string{
		"README.md: " + ReasonNotAllowed,
		"docs/guide.md: " + ReasonNotAllowed,
		"src/secret/key.pem: " + ReasonDenied,
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations\n got %q\nwant %q", got, want)
	}
	// Deny alone.
	got = Check(e.wt.Path, ch, &flow.Scope{Deny: []string{"*.md"}})
	if !slices.Equal(got, []string{"README.md: " + ReasonDenied}) {
		t.Errorf("deny only: %q", got)
	}
}

func TestCheckSymlinks(t *testing.T) {
	e := newEnv(t)
	outside := filepath.Join(e.root, "outside")
	writeFile(t, filepath.Join(outside, "x"), "x\n")
	links := map[string]string{
		"passwd":             "/etc/passwd",
		"src/up":             "../../x",       // lexically outside
		"src/ok":             "app.go",        // inside
		"src/ok-dir":         "../docs",       // inside
		"src/dangling-in":    "nothing/there", // inside, dangling
		"src/dangling-out":   "../../../../../../no/such/file",
		"src/hop":            "../outlink/x", // through an inside link that leads out
		"outlink":            outside,
		"src/self-loop":      "self-loop", // leads nowhere, not out
		"docs/abs-in-the-wt": e.path("README.md"),
	}
	for name, target := range links {
		if err := os.Symlink(target, e.path(name)); err != nil {
			t.Fatal(err)
		}
	}
	ch := e.observe(t)
	for _, s := range []*flow.Scope{nil, {Allow: []string{"**"}}} {
		got := Check(e.wt.Path, ch, s)
		var bad []string
		for _, v := range got {
			p, _, _ := strings.Cut(v, ": ")
			bad = append(bad, p)
		}
		want := []string{"outlink", "passwd", "src/dangling-out", "src/hop", "src/up"}
		if !slices.Equal(bad, want) {
			t.Errorf("scope %v: violations %q\nwant paths %q", s, got, want)
		}
		for _, v := range got {
			if !strings.Contains(v, ReasonSymlinkOut) {
				t.Errorf("reason: %q", v)
			}
		}
	}
}

func TestCheckGitPaths(t *testing.T) {
	ch := &checkout.Changes{Created: []string{".git", "a/.git/config", "ok.txt"}, Deleted: []string{".git/hooks/x"}}
	got := Check(t.TempDir(), ch, nil)
	want := []string{".git/hooks/x: " + ReasonGitInternal, ".git: " + ReasonGitInternal, "a/.git/config: " + ReasonGitInternal}
	if !slices.Equal(got, want) {
		t.Errorf("got %q want %q", got, want)
	}
	if Check("/", nil, nil) != nil {
		t.Error("nil changes")
	}
}

func TestCheckAgentGit(t *testing.T) {
	got := Check(t.TempDir(), &checkout.Changes{AgentGit: "worktree: the agent's commits: unpack into the cache: bad object"}, nil)
	if len(got) != 1 || !strings.HasPrefix(got[0], ".git: "+ReasonAgentGit+": ") {
		t.Errorf("%q", got)
	}
}

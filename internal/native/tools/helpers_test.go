package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/drover-dev/drover/internal/flow"
)

// fixture is a worktree with every kind of escape route in it, next to an
// "outside" directory holding a secret.
type fixture struct {
	base, wt, outside string
	set               *Set
}

func newFixture(t testing.TB, sc *flow.Scope) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{base: base, wt: filepath.Join(base, "wt"), outside: filepath.Join(base, "outside")}
	mk := func(p, content string) {
		t.Helper()
		full := filepath.Join(base, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(base, p)); err != nil {
			t.Fatal(err)
		}
	}
	mk("outside/secret", "TOP SECRET\n")
	mk("wt/README.md", "# hello\nline two\nline three\n")
	mk("wt/src/main.go", "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n")
	mk("wt/src/util.go", "package main\n\nfunc util() int { return 42 }\n")
	mk("wt/docs/guide.md", "Guide\nTODO: write it\n")
	mk("wt/.git/config", "[core]\n")
	mk("wt/vendor/lib/.git/HEAD", "ref: x\n")
	mk("wt/bin.dat", "abc\x00def")
	link("../outside", "wt/out")
	link(f.outside, "wt/abs")
	link("loop", "wt/loop")
	link("src", "wt/srclink")
	link("src/main.go", "wt/mainlink")
	link(".git/config", "wt/gitlink")
	link("../outside/new.txt", "wt/dangling")
	link("docs/guide.md", "wt/guidelink")
	if err := os.Link(filepath.Join(f.outside, "secret"), filepath.Join(f.wt, "hard")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(f.wt, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := New(Config{Worktree: f.wt, Scope: sc, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + base}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	f.set = set
	return f
}

func (f *fixture) call(t testing.TB, tool string, args map[string]any) Outcome {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return f.set.Call(context.Background(), tool, b)
}

// outsideUnchanged checks that the outside directory holds exactly the
// secret, unchanged, and that nothing was created beside the worktree.
func (f *fixture) outsideUnchanged(t testing.TB) {
	t.Helper()
	ents, err := os.ReadDir(f.outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "secret" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("outside holds %v, want only secret", names)
	}
	b, err := os.ReadFile(filepath.Join(f.outside, "secret"))
	if err != nil || string(b) != "TOP SECRET\n" {
		t.Fatalf("outside/secret = %q, %v", b, err)
	}
	top, _ := os.ReadDir(f.base)
	if len(top) != 2 {
		t.Fatalf("the worktree's parent holds %d entries, want wt and outside", len(top))
	}
	if g, _ := os.ReadFile(filepath.Join(f.wt, ".git/config")); string(g) != "[core]\n" {
		t.Fatalf(".git/config changed: %q", g)
	}
}

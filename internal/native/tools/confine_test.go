package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/flow"
)

// Every way out of the worktree, for every tool that takes a path: each is
// refused with its reason, recorded as a Refusal, and changes nothing.
func TestEscapesAreRefused(t *testing.T) {
	f := newFixture(t, nil)
	escapes := []struct {
		path, reason string
	}{
		{"../outside/secret", ReasonOutside},
		{"..", ReasonOutside},
		{"/etc/passwd", ReasonOutside},
		{filepath.Join(f.wt, "../outside/secret"), ReasonOutside},
		{"src/../../outside/secret", ReasonOutside},
		{"out/secret", ReasonSymlinkOut},
		{"abs/secret", ReasonSymlinkOut},
		{"dangling", ReasonSymlinkOut},
		{"out/new.txt", ReasonSymlinkOut},
		{".git/config", ReasonGit},
		{".git", ReasonGit},
		{"src/../.git/config", ReasonGit},
		{"vendor/lib/.git/HEAD", ReasonGit},
		{"gitlink", ReasonGit},
		{"loop", ReasonSymlinkLoop},
		{"a\x00b", ReasonInvalid},
	}
	for _, e := range escapes {
		for _, tool := range []string{"read_file", "write_file", "edit_file", "list_dir", "glob", "grep"} {
			args := map[string]any{"path": e.path}
			switch tool {
			case "write_file":
				args["content"] = "pwned"
			case "edit_file":
				args["old_string"], args["new_string"] = "TOP", "pwned"
			case "glob":
				args["pattern"] = "**"
			case "grep":
				args["pattern"] = "SECRET"
			}
			o := f.call(t, tool, args)
			if !o.IsError || o.Refusal == nil {
				t.Errorf("%s %q: not refused: %s", tool, e.path, o.Content)
				continue
			}
			// The loop is only found by following links: a tool that
			// needs the path to exist may see it first, both are fine.
			if o.Refusal.Reason != e.reason {
				t.Errorf("%s %q: reason %q, want %q", tool, e.path, o.Refusal.Reason, e.reason)
			}
			if o.Refusal.Tool != tool || !strings.Contains(o.Content, "refused") {
				t.Errorf("%s %q: refusal %+v / %q", tool, e.path, o.Refusal, o.Content)
			}
			if strings.Contains(o.Content, "TOP SECRET") {
				t.Errorf("%s %q leaked the secret: %s", tool, e.path, o.Content)
			}
		}
	}
	f.outsideUnchanged(t)
}

// JSON cannot carry invalid UTF-8 (it arrives as U+FFFD), but resolution
// refuses it anyway, as it refuses NUL.
func TestInvalidPathBytes(t *testing.T) {
	f := newFixture(t, nil)
	for _, p := range []string{"bad\xffutf8", "a\x00b", "/x\x00"} {
		if _, why := f.set.lexical(p); why != ReasonInvalid {
			t.Errorf("lexical(%q) = %q, want %q", p, why, ReasonInvalid)
		}
	}
}

func TestFilesThatAreNotPlainAreRefused(t *testing.T) {
	f := newFixture(t, nil)
	for _, c := range []struct{ path, reason string }{{"hard", ReasonHardLinked}, {"fifo", ReasonNotRegular}} {
		for _, tool := range []string{"read_file", "write_file", "edit_file"} {
			o := f.call(t, tool, map[string]any{"path": c.path, "content": "x", "old_string": "TOP", "new_string": "x"})
			if o.Refusal == nil || o.Refusal.Reason != c.reason {
				t.Errorf("%s %s: %+v %q", tool, c.path, o.Refusal, o.Content)
			}
		}
	}
	f.outsideUnchanged(t)
}

func TestScopeRefusesChangesNotReads(t *testing.T) {
	sc := &flow.Scope{Allow: []string{"src/**", "guidelink"}, Deny: []string{"src/secret*"}}
	f := newFixture(t, sc)
	// Reading outside the scope is fine: the scope is about changes.
	if o := f.call(t, "read_file", map[string]any{"path": "docs/guide.md"}); o.IsError {
		t.Fatalf("read outside scope: %s", o.Content)
	}
	for _, c := range []struct{ path, reason string }{
		{"docs/guide.md", ReasonNotAllowed},
		{"README.md", ReasonNotAllowed},
		{"src/secret.go", ReasonDenied},
		// In scope by name, but the file it leads to is not.
		{"guidelink", ReasonNotAllowed},
		// Out of scope by name, though it leads into the scope.
		{"mainlink", ReasonNotAllowed},
	} {
		for _, tool := range []string{"write_file", "edit_file"} {
			o := f.call(t, tool, map[string]any{"path": c.path, "content": "x", "old_string": "Guide", "new_string": "x"})
			if o.Refusal == nil || o.Refusal.Reason != c.reason {
				t.Errorf("%s %s: %+v %q", tool, c.path, o.Refusal, o.Content)
				continue
			}
			if !strings.Contains(o.Content, `paths matching ["src/**","guidelink"] except those matching ["src/secret*"]`) {
				t.Errorf("%s %s: the error does not say what is allowed: %s", tool, c.path, o.Content)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(f.wt, "docs/guide.md")); string(b) != "Guide\nTODO: write it\n" {
		t.Errorf("guide changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(f.wt, "src/secret.go")); err == nil {
		t.Error("src/secret.go was created")
	}
	if o := f.call(t, "write_file", map[string]any{"path": "src/new/file.go", "content": "package new\n"}); o.IsError {
		t.Errorf("write in scope: %s", o.Content)
	}
	// Through a directory symlink into the scope: the change lands in src/.
	if o := f.call(t, "edit_file", map[string]any{"path": "srclink/util.go", "old_string": "42", "new_string": "43"}); o.Refusal == nil {
		t.Errorf("srclink is not in scope by name, yet the edit went through: %s", o.Content)
	}
}

// Absolute paths work when they name the worktree as configured or as its
// symlinks resolve; the model may use either.
func TestAbsolutePathsInside(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.MkdirAll(filepath.Join(real, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "d/f.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(base, "via")); err != nil {
		t.Fatal(err)
	}
	set, err := New(Config{Worktree: filepath.Join(base, "via")})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	for _, p := range []string{filepath.Join(base, "via/d/f.txt"), filepath.Join(real, "d/f.txt"), "d/f.txt", "./d//f.txt"} {
		o := set.Call(t.Context(), "read_file", []byte(`{"path":`+quote(p)+`}`))
		if o.IsError || !strings.Contains(o.Content, "one") {
			t.Errorf("read %s: %s", p, o.Content)
		}
	}
}

func quote(s string) string {
	b := []byte{'"'}
	for _, r := range s {
		if r == '"' || r == '\\' {
			b = append(b, '\\')
		}
		b = append(b, string(r)...)
	}
	return string(append(b, '"'))
}

// FuzzConfine checks the resolution's invariants on any path: what is not
// refused is a clean relative path inside the worktree, outside .git, and
// resolving it again gives the same.
func FuzzConfine(f *testing.F) {
	for _, s := range []string{"", ".", "..", "../x", "/etc/passwd", "a/../../b", ".git", "x/.git/y", "out/secret",
		"abs/secret", "srclink/main.go", "loop", "dangling", "a\x00", "//", "./././", "src/../..", "src/./main.go", "~/.ssh"} {
		f.Add(s)
	}
	fx := newFixture(f, &flow.Scope{Allow: []string{"src/**"}})
	f.Fuzz(func(t *testing.T, p string) {
		rel, why := fx.set.lexical(p)
		if why != "" {
			return
		}
		checkRel(t, p, rel)
		canon, why := fx.set.canonical(rel)
		if why != "" {
			return
		}
		checkRel(t, p, canon)
		if again, why := fx.set.canonical(canon); why != "" || again != canon {
			t.Fatalf("%q: canonical %q resolves again to %q (%s)", p, canon, again, why)
		}
		full := filepath.Join(fx.wt, filepath.FromSlash(canon))
		if r, err := filepath.EvalSymlinks(full); err == nil {
			realWT, _ := filepath.EvalSymlinks(fx.wt)
			if rr, _ := filepath.Rel(realWT, r); rr == ".." || strings.HasPrefix(rr, "../") {
				t.Fatalf("%q: canonical %q is really %s, outside", p, canon, r)
			}
		}
	})
}

func checkRel(t *testing.T, p, rel string) {
	t.Helper()
	if rel == "" || filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") || filepath.ToSlash(filepath.Clean(rel)) != rel {
		t.Fatalf("%q resolved to %q: not a clean relative path inside", p, rel)
	}
	if inGit(rel) {
		t.Fatalf("%q resolved to %q, inside .git", p, rel)
	}
}

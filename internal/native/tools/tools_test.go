package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/supervise"
)

func TestReadFile(t *testing.T) {
	f := newFixture(t, nil)
	long := strings.Repeat("x", 5000)
	var many strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&many, "line %d\n", i)
	}
	os.WriteFile(filepath.Join(f.wt, "long.txt"), []byte("a\n"+long+"\nb"), 0o644)
	os.WriteFile(filepath.Join(f.wt, "many.txt"), []byte(many.String()), 0o644)
	os.WriteFile(filepath.Join(f.wt, "empty.txt"), nil, 0o644)
	os.WriteFile(filepath.Join(f.wt, "crlf.txt"), []byte("one\r\ntwo\r\n"), 0o644)
	cases := []struct {
		args        map[string]any
		want, wantN string
		isErr       bool
	}{
		{map[string]any{"path": "README.md"}, "     1\t# hello\n     2\tline two\n     3\tline three\n", "", false},
		{map[string]any{"path": "README.md", "offset": 2, "limit": 1}, "     2\tline two\n[showing lines 2-2; the file goes on: read again with offset 3]", "", false},
		{map[string]any{"path": "README.md", "offset": "3"}, "     3\tline three\n", "", false},
		{map[string]any{"path": "README.md", "offset": 9}, "", "has 3 lines; offset 9 is past the end", true},
		{map[string]any{"path": "README.md", "offset": -1}, "", "offset must be 1 or more", true},
		{map[string]any{"path": "README.md", "limit": 0}, "", "limit at least 1", true},
		{map[string]any{"path": "README.md", "limit": 1.5}, "", `argument "limit" must be an integer`, true},
		{map[string]any{"path": "empty.txt"}, "(the file is empty)", "", false},
		{map[string]any{"path": "bin.dat"}, "", "binary file (7 bytes)", true},
		{map[string]any{"path": "nope.txt"}, "", "nope.txt does not exist", true},
		{map[string]any{"path": "src"}, "", "is a directory", true},
		{map[string]any{"path": "crlf.txt"}, "     1\tone\n     2\ttwo\n", "", false},
		{map[string]any{"path": "long.txt", "offset": 2, "limit": 1}, "     2\t" + strings.Repeat("x", 2000) + " … [line cut]\n[showing lines 2-2; the file goes on: read again with offset 3]", "", false},
		{map[string]any{"path": "mainlink"}, "     1\tpackage main\n", "", false},
		{map[string]any{}, "", `argument "path" is required`, true},
	}
	for _, c := range cases {
		o := f.call(t, "read_file", c.args)
		if o.IsError != c.isErr {
			t.Errorf("%v: IsError %v: %s", c.args, o.IsError, o.Content)
			continue
		}
		if c.want != "" && !strings.HasPrefix(o.Content, c.want) {
			t.Errorf("%v:\n got %q\nwant %q", c.args, o.Content, c.want)
		}
		if c.wantN != "" && !strings.Contains(o.Content, c.wantN) {
			t.Errorf("%v: %q does not say %q", c.args, o.Content, c.wantN)
		}
	}
	o := f.call(t, "read_file", map[string]any{"path": "many.txt"})
	if !strings.HasSuffix(o.Content, "  2000\tline 2000\n[showing lines 1-2000; the file goes on: read again with offset 2001]") {
		t.Errorf("a long file is not cut at 2000 lines: …%s", o.Content[len(o.Content)-120:])
	}
}

func TestReadFileByteLimit(t *testing.T) {
	base := t.TempDir()
	os.WriteFile(filepath.Join(base, "f"), []byte(strings.Repeat(strings.Repeat("y", 99)+"\n", 100)), 0o644)
	set, err := New(Config{Worktree: base, Limits: Limits{ReadBytes: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	o := set.Call(t.Context(), "read_file", []byte(`{"path":"f"}`))
	if o.IsError || !strings.Contains(o.Content, "[output limit reached after line 9: read again with offset 10]") || len(o.Content) > 1100 {
		t.Errorf("byte limit: %d bytes, %q", len(o.Content), o.Content[len(o.Content)-80:])
	}
}

func TestWriteFile(t *testing.T) {
	f := newFixture(t, nil)
	o := f.call(t, "write_file", map[string]any{"path": "a/b/c.txt", "content": "new\n"})
	if o.IsError || o.Content != "created a/b/c.txt (4 bytes)" || len(o.Changed) != 1 || o.Changed[0] != "a/b/c.txt" {
		t.Fatalf("create: %+v", o)
	}
	o = f.call(t, "write_file", map[string]any{"path": filepath.Join(f.wt, "README.md"), "content": "short"})
	if o.IsError || o.Content != "overwrote README.md (5 bytes)" {
		t.Fatalf("overwrite: %+v", o)
	}
	if b, _ := os.ReadFile(filepath.Join(f.wt, "README.md")); string(b) != "short" {
		t.Fatalf("README.md = %q (a longer old content must not survive)", b)
	}
	// Through a symlink inside the worktree: the target changes, the link stays.
	o = f.call(t, "write_file", map[string]any{"path": "mainlink", "content": "package main\n"})
	if o.IsError || o.Changed[0] != "src/main.go" {
		t.Fatalf("via link: %+v", o)
	}
	if fi, _ := os.Lstat(filepath.Join(f.wt, "mainlink")); fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the link was replaced")
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": "x"}, `argument "content" is required`},
		{map[string]any{"path": "x", "content": 5}, `argument "content" must be a string`},
		{map[string]any{"path": ".", "content": "x"}, "the worktree itself is a directory"},
		{map[string]any{"path": "src", "content": "x"}, "is a directory"},
		{map[string]any{"path": "README.md/x", "content": "x"}, "cannot create the directory"},
	} {
		o := f.call(t, "write_file", c.args)
		if !o.IsError || !strings.Contains(o.Content, c.want) {
			t.Errorf("%v: %+v, want an error saying %q", c.args, o, c.want)
		}
	}
	set, _ := New(Config{Worktree: f.wt, Limits: Limits{WriteBytes: 10}})
	defer set.Close()
	if o := set.Call(t.Context(), "write_file", []byte(`{"path":"big","content":"0123456789a"}`)); !o.IsError || !strings.Contains(o.Content, "the limit is 10") {
		t.Errorf("oversized write: %+v", o)
	}
	f.outsideUnchanged(t)
}

func TestEditFile(t *testing.T) {
	f := newFixture(t, nil)
	os.WriteFile(filepath.Join(f.wt, "e.txt"), []byte("alpha beta alpha\ngamma\n"), 0o600)
	for _, c := range []struct {
		args  map[string]any
		want  string
		isErr bool
		after string
	}{
		{map[string]any{"path": "e.txt", "old_string": "alpha", "new_string": "A"}, "occurs 2 times in e.txt", true, "alpha beta alpha\ngamma\n"},
		{map[string]any{"path": "e.txt", "old_string": "delta", "new_string": "D"}, "was not found", true, "alpha beta alpha\ngamma\n"},
		{map[string]any{"path": "e.txt", "old_string": "", "new_string": "D"}, "old_string is empty", true, "alpha beta alpha\ngamma\n"},
		{map[string]any{"path": "e.txt", "old_string": "gamma", "new_string": "gamma"}, "are the same", true, "alpha beta alpha\ngamma\n"},
		{map[string]any{"path": "e.txt", "old_string": "beta", "new_string": "BETA"}, "replaced 1 occurrence(s) in e.txt", false, "alpha BETA alpha\ngamma\n"},
		{map[string]any{"path": "e.txt", "old_string": "alpha", "new_string": "", "replace_all": "true"}, "replaced 2 occurrence(s)", false, " BETA \ngamma\n"},
		{map[string]any{"path": "e.txt", "old_string": "x", "new_string": "y", "replace_all": "maybe"}, `argument "replace_all" must be true or false`, true, " BETA \ngamma\n"},
		{map[string]any{"path": "nope", "old_string": "x", "new_string": "y"}, "nope does not exist", true, " BETA \ngamma\n"},
	} {
		o := f.call(t, "edit_file", c.args)
		if o.IsError != c.isErr || !strings.Contains(o.Content, c.want) {
			t.Errorf("%v: %+v, want %q", c.args, o, c.want)
		}
		if b, _ := os.ReadFile(filepath.Join(f.wt, "e.txt")); string(b) != c.after {
			t.Errorf("%v: e.txt = %q, want %q", c.args, b, c.after)
		}
	}
	if st, _ := os.Stat(filepath.Join(f.wt, "e.txt")); st.Mode().Perm() != 0o600 {
		t.Errorf("edit changed the mode to %v", st.Mode().Perm())
	}
}

func TestListGlobGrep(t *testing.T) {
	f := newFixture(t, nil)
	o := f.call(t, "list_dir", map[string]any{})
	for _, want := range []string{"README.md\t28 bytes\n", "src/\n", "out -> ../outside\n", "docs/\n"} {
		if !strings.Contains(o.Content, want) {
			t.Errorf("list_dir lacks %q:\n%s", want, o.Content)
		}
	}
	if strings.Contains("\n"+o.Content, "\n.git") {
		t.Errorf("list_dir shows .git:\n%s", o.Content)
	}
	if o := f.call(t, "list_dir", map[string]any{"path": "README.md"}); !o.IsError {
		t.Errorf("list_dir of a file: %+v", o)
	}
	o = f.call(t, "glob", map[string]any{"pattern": "**/*.go"})
	if o.Content != "src/main.go\nsrc/util.go\n" {
		t.Errorf("glob **/*.go = %q", o.Content)
	}
	o = f.call(t, "glob", map[string]any{"pattern": "*.go", "path": "src"})
	if o.Content != "src/main.go\nsrc/util.go\n" {
		t.Errorf("glob in src = %q", o.Content)
	}
	o = f.call(t, "glob", map[string]any{"pattern": "**/HEAD"})
	if !strings.HasPrefix(o.Content, "no files match") {
		t.Errorf("glob finds files under .git: %q", o.Content)
	}
	if o := f.call(t, "glob", map[string]any{"pattern": "[", "path": "."}); !o.IsError {
		t.Errorf("bad glob: %+v", o)
	}
	if o := f.call(t, "glob", map[string]any{"pattern": "/etc/*"}); !o.IsError {
		t.Errorf("absolute glob: %+v", o)
	}
	o = f.call(t, "grep", map[string]any{"pattern": "func \\w+"})
	if o.Content != "src/main.go:3:func main() {\nsrc/util.go:3:func util() int { return 42 }\n" {
		t.Errorf("grep = %q", o.Content)
	}
	o = f.call(t, "grep", map[string]any{"pattern": "todo", "ignore_case": true})
	if o.Content != "docs/guide.md:2:TODO: write it\n" {
		t.Errorf("grep -i = %q", o.Content)
	}
	o = f.call(t, "grep", map[string]any{"pattern": "main", "glob": "*.md"})
	if o.Content != "no matches" {
		t.Errorf("grep glob filter = %q", o.Content)
	}
	o = f.call(t, "grep", map[string]any{"pattern": "package", "files_only": true})
	if o.Content != "src/main.go\nsrc/util.go\n" {
		t.Errorf("grep files_only = %q", o.Content)
	}
	o = f.call(t, "grep", map[string]any{"pattern": ".", "path": "README.md", "max_results": 2})
	if !strings.HasPrefix(o.Content, "README.md:1:# hello\nREADME.md:2:line two\n[stopped at 2 matches") {
		t.Errorf("grep max_results on a file = %q", o.Content)
	}
	o = f.call(t, "grep", map[string]any{"pattern": "SECRET|core|ref:"})
	if o.Content != "no matches" {
		t.Errorf("grep reached the outside, .git or a hard link through a symlink: %q", o.Content)
	}
	if o := f.call(t, "grep", map[string]any{"pattern": "(a"}); !o.IsError || !strings.Contains(o.Content, "RE2") {
		t.Errorf("bad regexp: %+v", o)
	}
}

func TestSearchBudget(t *testing.T) {
	base := t.TempDir()
	for i := range 30 {
		os.WriteFile(filepath.Join(base, fmt.Sprintf("f%02d.txt", i)), []byte("hit\n"), 0o644)
	}
	set, _ := New(Config{Worktree: base, Limits: Limits{SearchFiles: 10, Entries: 5}})
	defer set.Close()
	o := set.Call(t.Context(), "glob", []byte(`{"pattern":"*.txt"}`))
	if !strings.Contains(o.Content, "[… 5 more matches not shown") || !strings.Contains(o.Content, "the search stopped after 10 files") {
		t.Errorf("glob limits: %q", o.Content)
	}
	o = set.Call(t.Context(), "grep", []byte(`{"pattern":"hit","files_only":true}`))
	if strings.Count(o.Content, "\n") < 10 || !strings.Contains(o.Content, "the search stopped after 10 files") {
		t.Errorf("grep limits: %q", o.Content)
	}
}

func TestArguments(t *testing.T) {
	f := newFixture(t, nil)
	for _, c := range []struct{ input, want string }{
		{`[1,2]`, "must be a JSON object, got an array"},
		{`"x"`, "must be a JSON object, got a string"},
		{`{"path":`, "not valid JSON"},
		{`{"path":"README.md"} {"x":1}`, "single JSON object"},
		{`{"path":["a"]}`, `argument "path" must be a string, got an array`},
		{`{"path":"README.md","offset":{}}`, `argument "offset" must be an integer`},
		{`null`, `argument "path" is required`},
		{``, `argument "path" is required`},
	} {
		o := f.set.Call(t.Context(), "read_file", json.RawMessage(c.input))
		if !o.IsError || !strings.Contains(o.Content, c.want) {
			t.Errorf("read_file %s: %q, want %q", c.input, o.Content, c.want)
		}
	}
	// Extra keys and numbers as strings are accepted: models send them.
	if o := f.set.Call(t.Context(), "read_file", []byte(`{"path":"README.md","offset":"2","limit":1.0,"why":"x"}`)); o.IsError || !strings.HasPrefix(o.Content, "     2\t") {
		t.Errorf("lenient args: %+v", o)
	}
	if o := f.set.Call(t.Context(), "rm_rf", []byte(`{}`)); !o.IsError || !strings.Contains(o.Content, `unknown tool "rm_rf"; the tools are: bash, edit_file, glob, grep, list_dir, read_file, write_file`) {
		t.Errorf("unknown tool: %+v", o)
	}
}

func TestDefs(t *testing.T) {
	f := newFixture(t, &flow.Scope{Allow: []string{"src/**"}})
	defs := f.set.Defs()
	if len(defs) != len(Names()) {
		t.Fatalf("%d defs for %d tools", len(defs), len(Names()))
	}
	for _, d := range defs {
		var s struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(d.Schema, &s); err != nil || s.Type != "object" {
			t.Errorf("%s: schema %s: %v", d.Name, d.Schema, err)
		}
		for _, r := range s.Required {
			if _, ok := s.Properties[r]; !ok {
				t.Errorf("%s: required %q has no property", d.Name, r)
			}
		}
		if len(d.Description) < 80 {
			t.Errorf("%s: description too thin for a model: %q", d.Name, d.Description)
		}
	}
	if !strings.Contains(defs[1].Description, `paths matching ["src/**"]`) {
		t.Errorf("write_file does not tell the scope: %s", defs[1].Description)
	}
}

func TestBash(t *testing.T) {
	f := newFixture(t, nil)
	o := f.call(t, "bash", map[string]any{"command": "pwd; echo out; echo err >&2; echo $HOME; echo ${SECRET_KEY:-unset}; exit 3"})
	want := f.wt + "\nout\nerr\n" + f.base + "\nunset\n[exit code 3]"
	if !o.IsError || o.Content != want || o.Command.ExitCode != 3 || o.Command.Outcome != "exited" {
		t.Errorf("bash:\n got %q\nwant %q (%+v)", o.Content, want, o.Command)
	}
	o = f.call(t, "bash", map[string]any{"command": "true"})
	if o.IsError || o.Content != "[exit code 0]" {
		t.Errorf("true: %+v", o)
	}
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"command": "  "}, "the command is empty"},
		{map[string]any{"command": "true", "timeout": 0}, "must be at least 1"},
		{map[string]any{}, `argument "command" is required`},
	} {
		if o := f.call(t, "bash", c.args); !o.IsError || !strings.Contains(o.Content, c.want) {
			t.Errorf("%v: %+v", c.args, o)
		}
	}
}

func TestBashOutputBounded(t *testing.T) {
	base := t.TempDir()
	set, _ := New(Config{Worktree: base, Env: []string{"PATH=/usr/bin:/bin"}, Limits: Limits{CommandOutput: 1000}})
	defer set.Close()
	o := set.Call(t.Context(), "bash", []byte(`{"command":"yes 0123456789 | head -c 100000; echo; echo END"}`))
	if len(o.Content) > 1300 || !strings.HasSuffix(o.Content, "END\n[exit code 0] [output cut: 100005 bytes in all, the middle left out]") {
		t.Errorf("bounded output: %d bytes: %q", len(o.Content), o.Content)
	}
}

func TestBashTimeoutKillsTheGroup(t *testing.T) {
	base := t.TempDir()
	set, _ := New(Config{Worktree: base, Env: []string{"PATH=/usr/bin:/bin"}, Limits: Limits{Grace: 100 * time.Millisecond}})
	defer set.Close()
	start := time.Now()
	o := set.Call(t.Context(), "bash", []byte(`{"command":"(sleep 30; touch late) & echo started; sleep 30","timeout":1}`))
	if !o.IsError || !strings.Contains(o.Content, "started\n[timed out after 1s") || o.Command.Outcome != "timed_out" {
		t.Fatalf("timeout: %+v", o)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %s", d)
	}
	pidsAlive(t, base)
}

// pidsAlive fails if a process still has base as its working directory.
func pidsAlive(t *testing.T, dir string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, p := range procs {
		if target, err := os.Readlink(p); err == nil && target == dir {
			t.Errorf("a process still runs in %s: %s", dir, p)
		}
	}
}

func TestBashCancelledMidCommand(t *testing.T) {
	base := t.TempDir()
	set, _ := New(Config{Worktree: base, Env: []string{"PATH=/usr/bin:/bin"}, Limits: Limits{Grace: 100 * time.Millisecond}})
	defer set.Close()
	ctx, cancel := context.WithCancelCause(t.Context())
	os.WriteFile(filepath.Join(base, "go"), nil, 0o644)
	done := make(chan Outcome)
	go func() { done <- set.Call(ctx, "bash", []byte(`{"command":"touch running; sleep 60 & sleep 60"}`)) }()
	// Wait for the command to run, on a signal it leaves.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(base, "running")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
	}
	start := time.Now()
	cancel(errors.New("operator cancelled"))
	o := <-done
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("cancel took %s", d)
	}
	if !o.IsError || o.Command.Outcome != "stopped" || !strings.Contains(o.Content, "[stopped") {
		t.Errorf("cancelled: %+v", o)
	}
	pidsAlive(t, base)
}

type recordingSandbox struct {
	seen []string
	err  error
}

func (r *recordingSandbox) Wrap(spec *supervise.Spec) error {
	r.seen = append(r.seen, spec.Args[len(spec.Args)-1])
	if r.err != nil {
		return r.err
	}
	// A sandbox may rewrite the command: here it prefixes an env var.
	spec.Env = append(spec.Env, "SANDBOXED=yes")
	return nil
}

func TestBashSandboxSeam(t *testing.T) {
	base := t.TempDir()
	sb := &recordingSandbox{}
	set, _ := New(Config{Worktree: base, Env: []string{"PATH=/usr/bin:/bin"}, Sandbox: sb})
	defer set.Close()
	o := set.Call(t.Context(), "bash", []byte(`{"command":"echo $SANDBOXED"}`))
	if o.Content != "yes\n[exit code 0]" || len(sb.seen) != 1 {
		t.Errorf("sandboxed: %+v, %v", o, sb.seen)
	}
	sb.err = errors.New("landlock unavailable")
	o = set.Call(t.Context(), "bash", []byte(`{"command":"touch ran"}`))
	if !o.IsError || !strings.Contains(o.Content, "could not be sandboxed, so it did not run: landlock unavailable") {
		t.Errorf("sandbox failure: %+v", o)
	}
	if _, err := os.Stat(filepath.Join(base, "ran")); err == nil {
		t.Error("the command ran without its sandbox")
	}
}

// FuzzToolInput feeds any input to every tool: none may panic, and none
// may change anything outside the worktree or in .git, whatever it is told.
func FuzzToolInput(f *testing.F) {
	for _, s := range []string{`{"path":"../outside/secret","content":"x"}`, `{"path":"out/x","content":"x"}`,
		`{"path":"fuzz/a","content":"x"}`, `{"path":"README.md","old_string":"hello","new_string":"bye"}`,
		`{"pattern":"**","path":"out"}`, `{"pattern":"(?i)secret","path":".."}`, `{"path":"gitlink"}`, `[]`, `{"offset":"1e9","path":"README.md"}`,
		`{"path":"README.md","limit":-5}`, `{"path":"\u0000"}`, `{"pattern":"a{1000}{1000}"}`} {
		for _, tool := range []string{"read_file", "write_file", "edit_file", "list_dir", "glob", "grep"} {
			f.Add(tool, s)
		}
	}
	fx := newFixture(f, &flow.Scope{Allow: []string{"fuzz/**", "README.md"}})
	f.Fuzz(func(t *testing.T, tool, input string) {
		if tool == "bash" {
			return // a shell command is not confined by the tools, by design
		}
		o := fx.set.Call(context.Background(), tool, json.RawMessage(input))
		if o.Refusal != nil && !o.IsError {
			t.Fatalf("a refusal that is not an error: %+v", o)
		}
		for _, c := range o.Changed {
			if !strings.HasPrefix(c, "fuzz/") && c != "README.md" {
				t.Fatalf("%s %s changed %q, outside the scope", tool, input, c)
			}
		}
		fx.outsideUnchanged(t)
	})
}

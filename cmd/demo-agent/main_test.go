package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// agentBin is the demo-agent binary built once for all tests: the tests
// exercise the real program (exit codes, signals, stdio), not run().
// personaDir holds a symlink to it under each persona's name.
var agentBin, personaDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "demo-agent-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentBin = filepath.Join(dir, "demo-agent")
	// go test puts its own go command first in PATH.
	if out, err := exec.Command("go", "build", "-o", agentBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building demo-agent: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	personaDir = filepath.Join(dir, "personas")
	if err := os.Mkdir(personaDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for name := range personas {
		if err := os.Symlink(agentBin, filepath.Join(personaDir, name)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// agentEnv isolates git from the user's configuration.
func agentEnv(t *testing.T) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
	}
}

type outcome struct {
	code           int
	stdout, stderr string
	events         []map[string]any // the JSON lines of stdout
	other          []string         // stdout lines that are not JSON
}

// runAgent runs the binary in dir with the given stdin and arguments.
func runAgent(t *testing.T, dir, stdin string, args ...string) outcome {
	t.Helper()
	return runAgentEnv(t, dir, nil, stdin, args...)
}

// runAgentEnv is runAgent with env added to agentEnv.
func runAgentEnv(t *testing.T, dir string, env []string, stdin string, args ...string) outcome {
	t.Helper()
	cmd := exec.Command(agentBin, args...)
	cmd.Dir = dir
	cmd.Env = append(agentEnv(t), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	o := outcome{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		o.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running demo-agent: %v", err)
	}
	o.events, o.other = splitStream(t, stdout.Bytes())
	return o
}

func splitStream(t *testing.T, out []byte) (events []map[string]any, other []string) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("{")) {
			other = append(other, sc.Text())
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("bad JSON line %q: %v", line, err)
		}
		events = append(events, ev)
	}
	return events, other
}

// checkStream asserts the overall shape: init first, result last, every
// tool_use answered by a tool_result, and the result's error flag.
func checkStream(t *testing.T, o outcome, dir string, wantError bool) map[string]any {
	t.Helper()
	if len(o.events) < 2 {
		t.Fatalf("want at least init and result lines, got %q", o.stdout)
	}
	init, res := o.events[0], o.events[len(o.events)-1]
	if init["type"] != "system" || init["subtype"] != "init" || init["model"] != "demo" || init["session_id"] == "" {
		t.Errorf("init line %v", init)
	}
	if real, _ := filepath.EvalSymlinks(dir); init["cwd"] != real && init["cwd"] != dir {
		t.Errorf("init cwd %v, want %s", init["cwd"], dir)
	}
	if fmt.Sprint(init["tools"]) != "[Write Edit Bash]" {
		t.Errorf("init tools %v", init["tools"])
	}
	wantSub := "success"
	if wantError {
		wantSub = "error_during_execution"
	}
	if res["type"] != "result" || res["subtype"] != wantSub || res["is_error"] != wantError || res["session_id"] != init["session_id"] {
		t.Errorf("result line %v, want subtype %s", res, wantSub)
	}
	if _, ok := res["usage"].(map[string]any)["output_tokens"]; !ok {
		t.Errorf("result without usage: %v", res)
	}
	if prev := o.events[len(o.events)-2]; prev["type"] != "assistant" || blocks(prev)[0]["type"] != "text" {
		t.Errorf("want an assistant text line before the result, got %v", prev)
	}
	pending := map[any]bool{}
	turns := 0
	for _, ev := range o.events[1 : len(o.events)-1] {
		for _, b := range blocks(ev) {
			switch b["type"] {
			case "tool_use":
				pending[b["id"]] = true
			case "tool_result":
				if !pending[b["tool_use_id"]] {
					t.Errorf("tool_result for unknown id %v", b["tool_use_id"])
				}
				delete(pending, b["tool_use_id"])
			}
		}
		if ev["type"] == "assistant" {
			turns++
		}
	}
	if res["num_turns"] != float64(turns) {
		t.Errorf("num_turns %v, want %d", res["num_turns"], turns)
	}
	return res
}

func blocks(ev map[string]any) []map[string]any {
	msg, _ := ev["message"].(map[string]any)
	raw, _ := msg["content"].([]any)
	var out []map[string]any
	for _, b := range raw {
		out = append(out, b.(map[string]any))
	}
	return out
}

// toolUses lists the tool_use blocks of the stream.
func toolUses(o outcome) []map[string]any {
	var out []map[string]any
	for _, ev := range o.events {
		for _, b := range blocks(ev) {
			if b["type"] == "tool_use" {
				out = append(out, b)
			}
		}
	}
	return out
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestVersion(t *testing.T) {
	t.Parallel()
	o := runAgent(t, t.TempDir(), "", "--version")
	if o.code != 0 || o.stdout != "demo-agent 1.0.0\n" {
		t.Fatalf("--version: code %d stdout %q", o.code, o.stdout)
	}
}

func TestPromptDelivery(t *testing.T) {
	t.Parallel()
	const prompt = "Please write a file.\n@write f.txt hello\n"
	promptFile := filepath.Join(t.TempDir(), "prompt.txt")
	if err := os.WriteFile(promptFile, []byte(prompt), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		stdin string
		args  []string
	}{
		"stdin":         {stdin: prompt},
		"prompt-file":   {args: []string{"--prompt-file", promptFile}},
		"-p":            {args: []string{"-p", prompt}},
		"last argument": {args: []string{"--verbose", "ignored first", prompt}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			o := runAgent(t, dir, tc.stdin, tc.args...)
			if o.code != 0 {
				t.Fatalf("exit %d, stderr %q", o.code, o.stderr)
			}
			checkStream(t, o, dir, false)
			if got := readFile(t, filepath.Join(dir, "f.txt")); got != "hello\n" {
				t.Errorf("f.txt = %q", got)
			}
		})
	}
	t.Run("two sources", func(t *testing.T) {
		t.Parallel()
		o := runAgent(t, t.TempDir(), "", "-p", prompt, "--prompt-file", promptFile)
		if o.code != exitUsage || !strings.Contains(o.stderr, "one way only") {
			t.Errorf("exit %d stderr %q", o.code, o.stderr)
		}
	})
}

func TestWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := runAgent(t, dir, `  @write a/b/c.txt one\ntwo\tcol  \\n  end`)
	if o.code != 0 {
		t.Fatalf("exit %d, stderr %q", o.code, o.stderr)
	}
	checkStream(t, o, dir, false)
	want := "one\ntwo\tcol  \\n  end\n"
	if got := readFile(t, filepath.Join(dir, "a", "b", "c.txt")); got != want {
		t.Errorf("c.txt = %q, want %q", got, want)
	}
	uses := toolUses(o)
	if len(uses) != 1 || uses[0]["name"] != "Write" || uses[0]["id"] != "toolu_1" {
		t.Fatalf("tool uses %v", uses)
	}
	input := uses[0]["input"].(map[string]any)
	if !filepath.IsAbs(input["file_path"].(string)) || !strings.HasSuffix(input["file_path"].(string), "a/b/c.txt") || input["content"] != want {
		t.Errorf("Write input %v", input)
	}
}

func TestAppend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := runAgent(t, dir, "@append log.txt first\n@append log.txt second")
	if o.code != 0 {
		t.Fatalf("exit %d, stderr %q", o.code, o.stderr)
	}
	checkStream(t, o, dir, false)
	if got := readFile(t, filepath.Join(dir, "log.txt")); got != "first\nsecond\n" {
		t.Errorf("log.txt = %q", got)
	}
	// The tool call shows the file as it is after the change.
	if uses := toolUses(o); len(uses) != 2 || uses[1]["input"].(map[string]any)["content"] != "first\nsecond\n" {
		t.Errorf("tool uses %v", uses)
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gone.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := runAgent(t, dir, "@delete gone.txt")
	if o.code != 0 {
		t.Fatalf("exit %d, stderr %q", o.code, o.stderr)
	}
	checkStream(t, o, dir, false)
	if _, err := os.Stat(filepath.Join(dir, "gone.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gone.txt still there: %v", err)
	}
	if uses := toolUses(o); len(uses) != 1 || uses[0]["name"] != "Bash" {
		t.Errorf("tool uses %v", uses)
	}

	o = runAgent(t, dir, "@delete gone.txt")
	if o.code != exitFailed || !strings.Contains(o.stderr, "@delete") {
		t.Errorf("deleting a missing file: exit %d stderr %q", o.code, o.stderr)
	}
	checkStream(t, o, dir, true)
}

func TestRequire(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dep.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if o := runAgent(t, dir, "@require dep.txt\n@write out.txt ok"); o.code != 0 {
		t.Fatalf("present: exit %d stderr %q", o.code, o.stderr)
	}
	o := runAgent(t, dir, "@require missing.txt\n@write never.txt x")
	if o.code != exitRequired || !strings.Contains(o.stderr, "missing.txt") {
		t.Fatalf("missing: exit %d stderr %q", o.code, o.stderr)
	}
	checkStream(t, o, dir, true)
	if _, err := os.Stat(filepath.Join(dir, "never.txt")); err == nil {
		t.Error("directives after a failed @require ran")
	}
}

func TestCommit(t *testing.T) {
	t.Parallel()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not available")
	}
	dir := t.TempDir()
	gitOut := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(git, args...)
		cmd.Dir, cmd.Env = dir, agentEnv(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	gitOut("init", "-q")
	o := runAgent(t, dir, "@write x.txt hi\n@commit add x.txt and more")
	if o.code != 0 {
		t.Fatalf("exit %d stderr %q", o.code, o.stderr)
	}
	checkStream(t, o, dir, false)
	if got := gitOut("log", "-1", "--format=%s|%an|%ae"); got != "add x.txt and more|demo-agent|demo-agent@localhost" {
		t.Errorf("last commit %q", got)
	}
	if got := gitOut("status", "--porcelain"); got != "" {
		t.Errorf("tree not clean after commit: %q", got)
	}
	// Nothing to commit is not an error.
	if o := runAgent(t, dir, "@commit again"); o.code != 0 || !strings.Contains(o.stderr, "nothing to commit") {
		t.Errorf("empty commit: exit %d stderr %q", o.code, o.stderr)
	}
}

func TestStdoutStderr(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := runAgent(t, dir, "@stdout hello on stdout\n@stderr hello on stderr")
	if o.code != 0 {
		t.Fatalf("exit %d", o.code)
	}
	checkStream(t, o, dir, false)
	if len(o.other) != 1 || o.other[0] != "hello on stdout" || o.stderr != "hello on stderr\n" {
		t.Errorf("stdout extra lines %q, stderr %q", o.other, o.stderr)
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if o := runAgent(t, dir, "@sleep 10ms\n@write after.txt x"); o.code != 0 {
		t.Fatalf("exit %d stderr %q", o.code, o.stderr)
	}
	if o := runAgent(t, dir, "@sleep soon"); o.code != exitUsage {
		t.Errorf("bad duration: exit %d", o.code)
	}
}

func TestExit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := runAgent(t, dir, "@write before.txt x\n@exit 5\n@write after.txt x")
	if o.code != 5 || o.stderr != "" {
		t.Fatalf("exit %d stderr %q", o.code, o.stderr)
	}
	checkStream(t, o, dir, true)
	if _, err := os.Stat(filepath.Join(dir, "after.txt")); err == nil {
		t.Error("directive after @exit ran")
	}
	o = runAgent(t, dir, "@exit 0\n@write after.txt x")
	if o.code != 0 {
		t.Fatalf("@exit 0: exit %d", o.code)
	}
	checkStream(t, o, dir, false)
	if o := runAgent(t, dir, "@exit 256"); o.code != exitUsage {
		t.Errorf("@exit 256: exit %d", o.code)
	}
}

func TestFlood(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 1_000_003
	o := runAgent(t, dir, fmt.Sprintf("@flood %d\n@write after.txt x", n))
	if o.code != 0 {
		t.Fatalf("exit %d", o.code)
	}
	checkStream(t, o, dir, false)
	total := 0
	for _, l := range o.other {
		total += len(l) + 1
	}
	if total != n {
		t.Errorf("flood printed %d bytes, want %d", total, n)
	}
}

func TestInvalidPromptRunsNothing(t *testing.T) {
	t.Parallel()
	for prompt, want := range map[string]string{
		"@frobnicate now":           "demo-agent: unknown directive @frobnicate",
		"@write ../x.txt escape":    "escapes the working directory",
		"@write a/../../x.txt no":   "escapes the working directory",
		"@write /tmp/x.txt no":      "absolute paths are not allowed",
		"@delete .":                 "working directory itself",
		"@append .git/config x":     ".git is off limits",
		"@require":                  "want exactly one PATH",
		"@hang please":              "takes no arguments",
		"@flood lots":               "want a byte count",
		"@commit":                   "want a MESSAGE",
		"@spawn-grandchild x":       "takes no arguments",
		"@ignore-sigterm forever":   "takes no arguments",
		"@stdout fine\n@sleep -1s":  "want a Go duration",
		"@write ok.txt x\n@bogus y": "unknown directive @bogus",
	} {
		t.Run(prompt, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			o := runAgent(t, dir, prompt)
			if o.code != exitUsage || !strings.Contains(o.stderr, want) {
				t.Fatalf("exit %d stderr %q, want exit 2 and %q", o.code, o.stderr, want)
			}
			checkStream(t, o, dir, true)
			if entries, _ := os.ReadDir(dir); len(entries) != 0 || len(o.other) != 0 {
				t.Errorf("an invalid prompt executed something: files %v, stdout %q", entries, o.other)
			}
		})
	}
}

func TestSymlinkEscapeIsRefused(t *testing.T) {
	t.Parallel()
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Skip(err)
	}
	o := runAgent(t, dir, "@write link/x.txt escaped")
	if o.code != exitFailed {
		t.Errorf("exit %d stderr %q", o.code, o.stderr)
	}
	if _, err := os.Stat(filepath.Join(outside, "x.txt")); err == nil {
		t.Error("wrote through a symlink out of the working directory")
	}
}

func TestNoDirectivesWritesDemoNote(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := runAgent(t, dir, "\n  Add a README for the project  \nwith details\n")
	if o.code != 0 {
		t.Fatalf("exit %d stderr %q", o.code, o.stderr)
	}
	checkStream(t, o, dir, false)
	first := readFile(t, filepath.Join(dir, "DEMO.md"))
	if !strings.Contains(first, "- Add a README for the project\n") {
		t.Errorf("DEMO.md = %q", first)
	}
	// The same prompt again still changes the tree.
	runAgent(t, dir, "Add a README for the project")
	if second := readFile(t, filepath.Join(dir, "DEMO.md")); second == first || !strings.HasPrefix(second, first) {
		t.Errorf("second run: DEMO.md = %q", second)
	}
	// An empty prompt still does something.
	empty := t.TempDir()
	if o := runAgent(t, empty, ""); o.code != 0 || !strings.Contains(readFile(t, filepath.Join(empty, "DEMO.md")), "(empty prompt)") {
		t.Errorf("empty prompt: exit %d", o.code)
	}
}

func TestPrompt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prompt := "Fix the review.\n@prompt seen/prompt.txt\n> @write quoted.txt never\n"
	if o := runAgent(t, dir, prompt); o.code != 0 {
		t.Fatalf("exit %d stderr %q", o.code, o.stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "seen", "prompt.txt"))
	if err != nil || string(b) != prompt {
		t.Fatalf("prompt file %q, %v; want %q", b, err, prompt)
	}
	if _, err := os.Stat(filepath.Join(dir, "quoted.txt")); err == nil {
		t.Error("a quoted directive ran")
	}
	if o := runAgent(t, dir, "@prompt ../out.txt"); o.code != exitUsage {
		t.Errorf("a path outside: exit %d", o.code)
	}
}

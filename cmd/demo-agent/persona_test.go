package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The persona tests run the binary under each CLI's name (a symlink) with
// the argv of the real recorded runs, and compare with the recordings.

const recordedPrompt = "create hello.txt containing hi"

var cases = []string{"success", "fail-401", "fail-429"}

func transcriptsPath(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("..", "..", "testdata", "transcripts"))
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

type meta struct {
	Argv    []string `json:"argv"`
	Exit    int      `json:"exit"`
	File    string   `json:"file"`
	Seconds float64  `json:"seconds"`
}

func readMeta(t *testing.T, cli, name string) meta {
	t.Helper()
	var m meta
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(transcriptsPath(t), cli, name, "meta.json"))), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// withPrompt returns argv with the recorded prompt replaced by prompt.
func withPrompt(t *testing.T, argv []string, prompt string) []string {
	t.Helper()
	i := slices.Index(argv, recordedPrompt)
	if i < 0 {
		t.Fatalf("no prompt in %q", argv)
	}
	out := slices.Clone(argv)
	out[i] = prompt
	return out
}

// cliRun is one run of a persona: argv[0] names it.
type cliRun struct {
	argv  []string
	dir   string    // working directory; a fresh one if empty
	stdin io.Reader // nil: /dev/null
	env   []string  // on top of personaEnv
	bin   string    // the binary, if not the persona symlink
}

type cliOutcome struct {
	code           int
	stdout, stderr string
	dir, tmp       string
}

// personaEnv is a clean environment that finds the recordings; the tests
// run as root in CI containers, hence IS_SANDBOX for claude.
func personaEnv(t *testing.T, tmp string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"TMPDIR=" + tmp,
		"IS_SANDBOX=1",
		"DEMO_AGENT_TRANSCRIPTS=" + transcriptsPath(t),
	}
}

// realTempDir is a temp dir without symlinks in its path, so that the
// agent's os.Getwd and the test agree on it.
func realTempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func runCLI(t *testing.T, ctx context.Context, r cliRun) cliOutcome {
	t.Helper()
	o := cliOutcome{dir: r.dir, tmp: realTempDir(t)}
	if o.dir == "" {
		o.dir = realTempDir(t)
	}
	bin := r.bin
	if bin == "" {
		bin = filepath.Join(personaDir, r.argv[0])
	}
	cmd := exec.CommandContext(ctx, bin, r.argv[1:]...)
	cmd.Dir = o.dir
	cmd.Env = append(personaEnv(t, o.tmp), r.env...)
	cmd.Stdin = r.stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	o.stdout, o.stderr = stdout.String(), stderr.String()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		o.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %s: %v", r.argv[0], err)
	}
	return o
}

// recorded is what a recording should replay as in o's directories.
func recorded(t *testing.T, cli, name string, o cliOutcome) (stdout, stderr string) {
	t.Helper()
	sub := func(file string) string {
		s := readFile(t, filepath.Join(transcriptsPath(t), cli, name, file))
		s = strings.ReplaceAll(s, "$RUN/repo", o.dir)
		s = strings.ReplaceAll(s, "$RUN", filepath.Dir(o.dir))
		return strings.ReplaceAll(s, "$TMPDIR", o.tmp)
	}
	return sub("stdout.txt"), sub("stderr.txt")
}

// checkReplay asserts that o replayed the recording cli/name exactly.
func checkReplay(t *testing.T, cli, name string, o cliOutcome) {
	t.Helper()
	m := readMeta(t, cli, name)
	wantOut, wantErr := recorded(t, cli, name, o)
	if o.code != m.Exit {
		t.Errorf("exit %d, want %d (stderr %.300q)", o.code, m.Exit, o.stderr)
	}
	if o.stdout != wantOut {
		t.Errorf("stdout differs from the recording:\n got %.300q\nwant %.300q", o.stdout, wantOut)
	}
	if o.stderr != wantErr {
		t.Errorf("stderr differs from the recording:\n got %.300q\nwant %.300q", o.stderr, wantErr)
	}
	checkHello(t, o.dir, m.File == "created")
}

func checkHello(t *testing.T, dir string, want bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "hello.txt"))
	switch {
	case want && err != nil:
		t.Errorf("hello.txt not created: %v", err)
	case want && string(b) != "hi\n":
		t.Errorf("hello.txt = %q", b)
	case !want && err == nil:
		t.Error("hello.txt created, but the recorded run did not create it")
	}
}

func TestPersonaReplaysRecordings(t *testing.T) {
	t.Parallel()
	for cli := range personas {
		for _, name := range cases {
			t.Run(cli+"/"+name, func(t *testing.T) {
				t.Parallel()
				argv := withPrompt(t, readMeta(t, cli, name).Argv, recordedPrompt+"\n@case "+name)
				checkReplay(t, cli, name, runCLI(t, t.Context(), cliRun{argv: argv}))
			})
		}
	}
}

func TestPersonaFlag(t *testing.T) {
	t.Parallel()
	// The same run through demo-agent --persona NAME.
	for _, form := range [][]string{{"--persona", "pi"}, {"--persona=pi"}} {
		argv := append(append([]string{"demo-agent"}, form...), readMeta(t, "pi", "success").Argv[1:]...)
		o := runCLI(t, t.Context(), cliRun{argv: argv, bin: agentBin})
		checkReplay(t, "pi", "success", o)
	}
	o := runCLI(t, t.Context(), cliRun{argv: []string{"demo-agent", "--persona", "aider"}, bin: agentBin})
	if o.code != exitUsage || !strings.Contains(o.stderr, "wants one of claude, codex") {
		t.Errorf("unknown persona: exit %d stderr %q", o.code, o.stderr)
	}
}

func TestPersonaRejectsBadArgv(t *testing.T) {
	t.Parallel()
	for cli := range personas {
		argv := readMeta(t, cli, "success").Argv
		for name, bad := range map[string]struct {
			argv []string
			want string
		}{
			"unknown flag":  {append(slices.Clone(argv), "--bogus-flag"), "unknown option '--bogus-flag'"},
			"unknown short": {append([]string{cli, "-Z"}, argv[1:]...), "unknown option '-Z'"},
			"missing value": {append(slices.Clone(argv), "--model"), "option '--model' argument missing"},
		} {
			t.Run(cli+"/"+name, func(t *testing.T) {
				t.Parallel()
				o := runCLI(t, t.Context(), cliRun{argv: bad.argv})
				if o.code != exitUsage || !strings.Contains(o.stderr, bad.want) || !strings.Contains(o.stderr, "Usage: "+cli) || o.stdout != "" {
					t.Errorf("exit %d stdout %q stderr %q, want exit 2 and %q", o.code, o.stdout, o.stderr, bad.want)
				}
				checkHello(t, o.dir, false)
			})
		}
	}
	for name, tc := range map[string]struct {
		argv []string
		want string
	}{
		"bad choice":       {[]string{"claude", "-p", "x", "--output-format", "yaml"}, "argument 'yaml' is invalid; allowed choices are text, json, stream-json"},
		"bool with value":  {[]string{"claude", "-p", "x", "--verbose=yes"}, "option '--verbose' takes no value"},
		"two prompts":      {[]string{"pi", "-p", "--mode", "json", "one", "two"}, "unexpected argument 'two'"},
		"positional":       {[]string{"copilot", "-p", "x", "--output-format", "json", "extra"}, "unexpected argument 'extra'"},
		"not headless":     {[]string{"claude", "x", "--output-format", "stream-json", "--verbose"}, "pass -p/--print"},
		"no subcommand":    {[]string{"codex", "--json", "x"}, "codex exec [OPTIONS] [PROMPT]"},
		"unrecorded":       {[]string{"codex", "exec", "--skip-git-repo-check", "x"}, "only `--json` output was recorded"},
		"unrecorded mode":  {[]string{"pi", "-p", "x"}, "only `--mode json` output was recorded"},
		"no prompt":        {[]string{"gemini", "-o", "stream-json", "--skip-trust"}, "no prompt"},
		"bad case":         {[]string{"opencode", "run", "--format", "json", "@case fail-500"}, "no recording"},
		"two cases":        {[]string{"opencode", "run", "--format", "json", "@case success\n@case fail-401"}, "only one @case"},
		"invalid prompt":   {[]string{"opencode", "run", "--format", "json", "@write ../x y"}, "escapes the working directory"},
		"wrong subcommand": {[]string{"kilo", "exec"}, "kilo run [message..]"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := runCLI(t, t.Context(), cliRun{argv: tc.argv})
			if o.code != exitUsage || !strings.Contains(o.stderr, tc.want) || o.stdout != "" {
				t.Errorf("exit %d stdout %q stderr %q, want exit 2 and %q", o.code, o.stdout, o.stderr, tc.want)
			}
		})
	}
}

func TestPersonaPromptOnStdin(t *testing.T) {
	t.Parallel()
	takesFlag := map[string]bool{"gemini": true, "copilot": true} // -p TEXT rather than a positional
	for cli := range personas {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			argv := readMeta(t, cli, "fail-401").Argv
			i := slices.Index(argv, recordedPrompt)
			if takesFlag[cli] {
				argv = slices.Delete(slices.Clone(argv), i-1, i+1)
			} else {
				argv = slices.Delete(slices.Clone(argv), i, i+1)
			}
			o := runCLI(t, t.Context(), cliRun{argv: argv, stdin: strings.NewReader(recordedPrompt + "\n@case fail-401\n")})
			checkReplay(t, cli, "fail-401", o)
		})
	}
	t.Run("codex -", func(t *testing.T) {
		t.Parallel()
		argv := withPrompt(t, readMeta(t, "codex", "fail-429").Argv, "-")
		checkReplay(t, "codex", "fail-429", runCLI(t, t.Context(), cliRun{argv: argv, stdin: strings.NewReader("@case fail-429")}))
	})
	t.Run("gemini -p appended to stdin", func(t *testing.T) {
		t.Parallel()
		argv := withPrompt(t, readMeta(t, "gemini", "fail-401").Argv, "@case fail-401")
		o := runCLI(t, t.Context(), cliRun{argv: argv, stdin: strings.NewReader("@stderr from stdin")})
		_, wantErr := recorded(t, "gemini", "fail-401", o)
		if o.code != 145 || o.stderr != "from stdin\n"+wantErr {
			t.Errorf("exit %d stderr %.200q", o.code, o.stderr)
		}
	})
}

func TestPersonaVersion(t *testing.T) {
	t.Parallel()
	for cli, want := range map[string]string{
		"claude":   "2.1.197 (Claude Code)\n",
		"codex":    "codex-cli 0.169.0\n",
		"opencode": "1.18.33\n",
		"kilo":     "7.7.7\n",
		"gemini":   "0.61.0\n",
		"pi":       "0.73.1\n",
		"copilot":  "GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check for updates.\n",
	} {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			o := runCLI(t, t.Context(), cliRun{argv: []string{cli, "--version"}})
			if o.code != 0 || o.stdout != want || o.stderr != "" {
				t.Errorf("exit %d stdout %q stderr %q, want %q", o.code, o.stdout, o.stderr, want)
			}
		})
	}
}

func TestPersonaHang(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		prompt  string
		replays bool
	}{
		"before any output":   {"@hang", false},
		"after the recording": {"@case success\n@hang", true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			argv := withPrompt(t, readMeta(t, "codex", "success").Argv, tc.prompt)
			start := time.Now()
			o := runCLI(t, ctx, cliRun{argv: argv})
			if ctx.Err() == nil || o.code != -1 {
				t.Fatalf("exit %d after %v: did not hang", o.code, time.Since(start))
			}
			wantOut, wantErr := recorded(t, "codex", "success", o)
			if !tc.replays {
				wantOut, wantErr = "", ""
			}
			if o.stdout != wantOut || o.stderr != wantErr {
				t.Errorf("stdout %.200q stderr %.200q", o.stdout, o.stderr)
			}
			checkHello(t, o.dir, tc.replays)
		})
	}
}

func TestPersonaDirectives(t *testing.T) {
	t.Parallel()
	argv := withPrompt(t, readMeta(t, "copilot", "fail-429").Argv,
		"Do it.\n@write notes/a.txt x\n@stdout raw line\n@case fail-429\n@stderr after")
	o := runCLI(t, t.Context(), cliRun{argv: argv})
	wantOut, wantErr := recorded(t, "copilot", "fail-429", o)
	// @write's Claude-style report is not printed: stdout is the recording.
	if o.code != 1 || o.stdout != "raw line\n"+wantOut || o.stderr != wantErr+"after\n" {
		t.Errorf("exit %d stdout %.200q stderr %q", o.code, o.stdout, o.stderr)
	}
	if got := readFile(t, filepath.Join(o.dir, "notes", "a.txt")); got != "x\n" {
		t.Errorf("a.txt = %q", got)
	}

	// @exit before the replay: nothing replayed, its code.
	o = runCLI(t, t.Context(), cliRun{argv: withPrompt(t, readMeta(t, "pi", "success").Argv, "@exit 7")})
	if o.code != 7 || o.stdout != "" || o.stderr != "" {
		t.Errorf("@exit 7: exit %d stdout %q stderr %q", o.code, o.stdout, o.stderr)
	}
	checkHello(t, o.dir, false)

	// @exit after the replay overrides the recorded code.
	o = runCLI(t, t.Context(), cliRun{argv: withPrompt(t, readMeta(t, "pi", "success").Argv, "@case success\n@exit 3")})
	if o.code != 3 {
		t.Errorf("@exit 3 after the replay: exit %d", o.code)
	}
	checkHello(t, o.dir, true)

	// @case means nothing to the plain demo agent.
	if o := runAgent(t, t.TempDir(), "@case success"); o.code != exitUsage || !strings.Contains(o.stderr, "persona mode") {
		t.Errorf("@case without a persona: exit %d stderr %q", o.code, o.stderr)
	}
}

func TestPersonaPace(t *testing.T) {
	t.Parallel()
	argv := readMeta(t, "codex", "success").Argv
	start := time.Now()
	o := runCLI(t, t.Context(), cliRun{argv: argv, env: []string{"DEMO_AGENT_PACE=20ms"}})
	checkReplay(t, "codex", "success", o)
	// 2 stderr and 7 stdout lines: 8 pauses.
	if elapsed := time.Since(start); elapsed < 160*time.Millisecond {
		t.Errorf("paced replay took %v, want at least 160ms", elapsed)
	}
	o = runCLI(t, t.Context(), cliRun{argv: argv, env: []string{"DEMO_AGENT_PACE=soon"}})
	if o.code != exitUsage || !strings.Contains(o.stderr, "DEMO_AGENT_PACE") {
		t.Errorf("bad pace: exit %d stderr %q", o.code, o.stderr)
	}
}

func TestPersonaFindsTranscripts(t *testing.T) {
	t.Parallel()
	argv := readMeta(t, "kilo", "success").Argv
	// Unset: found upward from the working directory...
	repo := realTempDir(t)
	work := filepath.Join(repo, "sub", "dir")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(repo, "testdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(transcriptsPath(t), filepath.Join(repo, "testdata", "transcripts")); err != nil {
		t.Fatal(err)
	}
	o := runCLI(t, t.Context(), cliRun{argv: argv, dir: work, env: []string{"DEMO_AGENT_TRANSCRIPTS="}})
	checkReplay(t, "kilo", "success", o)
	// ...and nowhere to be found: a clear error.
	o = runCLI(t, t.Context(), cliRun{argv: argv, env: []string{"DEMO_AGENT_TRANSCRIPTS="}})
	if o.code != exitUsage || !strings.Contains(o.stderr, "set DEMO_AGENT_TRANSCRIPTS") {
		t.Errorf("no transcripts: exit %d stderr %q", o.code, o.stderr)
	}
}

func TestPersonaWorkingDirFlag(t *testing.T) {
	t.Parallel()
	for cli, flag := range map[string]string{"codex": "-C", "opencode": "--dir", "copilot": "-C"} {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			target := realTempDir(t)
			at := 1 // after the subcommand, if any
			if personas[cli].command != "" {
				at = 2
			}
			argv := slices.Insert(readMeta(t, cli, "success").Argv, at, flag, target)
			o := runCLI(t, t.Context(), cliRun{argv: argv})
			checkHello(t, o.dir, false)
			o.dir = target // the run happened there
			checkReplay(t, cli, "success", o)
		})
	}
}

// lastLine returns the last line of s, a JSON object, decoded.
func lastLine(t *testing.T, s string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(s), "\n")
	var v map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &v); err != nil {
		t.Fatalf("last line of %.200q: %v", s, err)
	}
	return v
}

func TestPersonaQuirks(t *testing.T) {
	t.Parallel()
	claude := func(flags ...string) []string {
		return append([]string{"claude", "-p", recordedPrompt, "--output-format", "stream-json", "--verbose"}, flags...)
	}
	t.Run("claude as root without IS_SANDBOX", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() != 0 {
			t.Skip("not root")
		}
		for _, flags := range [][]string{{"--dangerously-skip-permissions"}, {"--permission-mode", "bypassPermissions"}} {
			o := runCLI(t, t.Context(), cliRun{argv: claude(flags...), env: []string{"IS_SANDBOX="}})
			want := "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons\n"
			if o.code != 1 || o.stderr != want || o.stdout != "" {
				t.Errorf("%v: exit %d stdout %q stderr %q", flags, o.code, o.stdout, o.stderr)
			}
			checkHello(t, o.dir, false)
		}
	})
	t.Run("claude without a permission flag", func(t *testing.T) {
		t.Parallel()
		o := runCLI(t, t.Context(), cliRun{argv: claude()})
		if o.code != 0 {
			t.Fatalf("exit %d stderr %q", o.code, o.stderr)
		}
		checkHello(t, o.dir, false) // the Write was denied
		first := strings.SplitN(o.stdout, "\n", 2)[0]
		if !strings.Contains(first, `"permissionMode":"default"`) {
			t.Errorf("init line %.300s", first)
		}
		res := lastLine(t, o.stdout)
		denials, _ := res["permission_denials"].([]any)
		if res["is_error"] != false || len(denials) != 1 || denials[0].(map[string]any)["tool_name"] != "Write" {
			t.Errorf("result line %v", res)
		}
		input := denials[0].(map[string]any)["tool_input"].(map[string]any)
		if input["file_path"] != filepath.Join(o.dir, "hello.txt") {
			t.Errorf("denied input %v", input)
		}
	})
	t.Run("claude acceptEdits", func(t *testing.T) {
		t.Parallel()
		o := runCLI(t, t.Context(), cliRun{argv: claude("--permission-mode", "acceptEdits"), env: []string{"IS_SANDBOX="}})
		if o.code != 0 || !strings.Contains(o.stdout, `"permissionMode":"acceptEdits"`) {
			t.Errorf("exit %d stderr %q", o.code, o.stderr)
		}
		checkHello(t, o.dir, true)
	})
	t.Run("claude stream-json without --verbose", func(t *testing.T) {
		t.Parallel()
		o := runCLI(t, t.Context(), cliRun{argv: []string{"claude", "-p", "x", "--output-format", "stream-json", "--dangerously-skip-permissions"}})
		if o.code != 1 || o.stderr != "Error: When using --print, --output-format=stream-json requires --verbose\n" || o.stdout != "" {
			t.Errorf("exit %d stdout %q stderr %q", o.code, o.stdout, o.stderr)
		}
	})
	t.Run("claude json and text", func(t *testing.T) {
		t.Parallel()
		for format, want := range map[string]func(stream string) string{
			"json": func(s string) string {
				lines := strings.SplitAfter(strings.TrimSpace(s), "\n")
				return lines[len(lines)-1] + "\n"
			},
			"text": func(s string) string { return lastLine(t, s)["result"].(string) + "\n" },
		} {
			argv := []string{"claude", "--print", "--output-format", format, "--dangerously-skip-permissions", recordedPrompt + "\n@case fail-401"}
			o := runCLI(t, t.Context(), cliRun{argv: argv})
			stream, _ := recorded(t, "claude", "fail-401", o)
			if o.code != 1 || o.stdout != want(stream) {
				t.Errorf("%s: exit %d stdout %q, want %q", format, o.code, o.stdout, want(stream))
			}
		}
	})
	t.Run("gemini untrusted", func(t *testing.T) {
		t.Parallel()
		argv := readMeta(t, "gemini", "success").Argv
		untrusted := slices.DeleteFunc(slices.Clone(argv), func(a string) bool { return a == "--skip-trust" })
		o := runCLI(t, t.Context(), cliRun{argv: untrusted})
		if o.code != 55 || !strings.Contains(o.stderr, "Gemini CLI is not running in a trusted directory") || o.stdout != "" {
			t.Errorf("exit %d stdout %q stderr %q", o.code, o.stdout, o.stderr)
		}
		checkHello(t, o.dir, false)
		o = runCLI(t, t.Context(), cliRun{argv: untrusted, env: []string{"GEMINI_CLI_TRUST_WORKSPACE=true"}})
		checkReplay(t, "gemini", "success", o)
	})
	t.Run("codex outside a git repo", func(t *testing.T) {
		t.Parallel()
		dir := realTempDir(t)
		if _, ok := findUp(dir, ".git"); ok {
			t.Skip("the temp dir is inside a git repository")
		}
		argv := []string{"codex", "exec", "--json", recordedPrompt}
		o := runCLI(t, t.Context(), cliRun{argv: argv, dir: dir})
		if o.code != 1 || o.stderr != "Not inside a trusted directory and --skip-git-repo-check was not specified.\n" {
			t.Errorf("exit %d stderr %q", o.code, o.stderr)
		}
		if err := os.Mkdir(filepath.Join(dir, ".git"), 0o755); err != nil {
			t.Fatal(err)
		}
		checkReplay(t, "codex", "success", runCLI(t, t.Context(), cliRun{argv: argv, dir: dir}))
	})
}

// modelServer records the requests a persona makes to it.
type modelServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []string // "METHOD PATH AUTHORIZATION"
}

func newModelServer(t *testing.T) *modelServer {
	m := &modelServer{}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.reqs = append(m.reqs, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		m.mu.Unlock()
		w.WriteHeader(http.StatusNotImplemented) // any answer: the endpoint was reached
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *modelServer) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// closedPort is a loopback URL nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	return url
}

// @call-model: codex and pi reach the endpoint their own configuration
// names, where the real CLI reads it, then play on; a connection that
// fails is retried as the CLI retries it, saying what the CLI said when
// its sandbox refused the port.
func TestPersonaCallModel(t *testing.T) {
	t.Parallel()
	m := newModelServer(t)
	codexConf := func(url string) string {
		return "model = \"mock-model\"\nmodel_provider = \"mock\"\n[model_providers.mock]\nbase_url = \"" + url +
			"/v1\"\nenv_key = \"MOCK_API_KEY\"\nwire_api = \"responses\"\n"
	}
	home := t.TempDir()
	writeTestFile(t, filepath.Join(home, ".codex", "config.toml"), codexConf(m.srv.URL))
	codex := withPrompt(t, readMeta(t, "codex", "success").Argv, "@call-model")
	o := runCLI(t, t.Context(), cliRun{argv: codex, env: []string{"HOME=" + home, "MOCK_API_KEY=sk-mock"}})
	checkReplay(t, "codex", "success", o)
	// CODEX_HOME moves it.
	moved := t.TempDir()
	writeTestFile(t, filepath.Join(moved, "config.toml"), codexConf(m.srv.URL+"/moved"))
	o = runCLI(t, t.Context(), cliRun{argv: codex, env: []string{"CODEX_HOME=" + moved}})
	checkReplay(t, "codex", "success", o)

	piHome := t.TempDir()
	writeTestFile(t, filepath.Join(piHome, ".pi", "agent", "models.json"),
		`{"providers":{"mock":{"baseUrl":"`+m.srv.URL+`/v1","api":"openai-completions","apiKey":"MOCK_API_KEY","models":[{"id":"mock-model"}]}}}`)
	pi := withPrompt(t, readMeta(t, "pi", "success").Argv, "@call-model")
	o = runCLI(t, t.Context(), cliRun{argv: pi, env: []string{"HOME=" + piHome, "MOCK_API_KEY=sk-pi"}})
	checkReplay(t, "pi", "success", o)

	want := []string{"POST /v1/responses Bearer sk-mock", "POST /moved/v1/responses ", "POST /v1/chat/completions Bearer sk-pi"}
	if got := m.requests(); !slices.Equal(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}

	// Refused: codex retries for ever, pi three times and gives up, exit 0.
	writeTestFile(t, filepath.Join(home, ".codex", "config.toml"), codexConf(closedPort(t)))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	o = runCLI(t, ctx, cliRun{argv: codex, env: []string{"HOME=" + home, "DEMO_AGENT_PACE=recorded/100"}})
	retry := `{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}`
	if o.code != -1 || strings.Count(o.stdout, retry+"\n") < 3 || strings.Trim(strings.ReplaceAll(o.stdout, retry, ""), "\n") != "" {
		t.Errorf("codex refused: exit %d stdout %.300q", o.code, o.stdout)
	}
	writeTestFile(t, filepath.Join(piHome, ".pi", "agent", "models.json"),
		`{"providers":{"mock":{"baseUrl":"`+closedPort(t)+`/v1","apiKey":"k","models":[{"id":"mock-model"}]}}}`)
	o = runCLI(t, t.Context(), cliRun{argv: pi, env: []string{"HOME=" + piHome, "DEMO_AGENT_PACE=recorded/100"}})
	if o.code != 0 || strings.Count(o.stdout, `"type":"auto_retry_start"`) != 3 || !strings.HasSuffix(o.stdout,
		`{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"Connection error."}`+"\n") {
		t.Errorf("pi refused: exit %d stdout %q", o.code, o.stdout)
	}
	checkHello(t, o.dir, false)

	// Only codex and pi; and no configuration is an error.
	claude := withPrompt(t, readMeta(t, "claude", "success").Argv, "@call-model")
	if o := runCLI(t, t.Context(), cliRun{argv: claude}); o.code != exitUsage || !strings.Contains(o.stderr, "makes no model requests") {
		t.Errorf("claude: exit %d stderr %q", o.code, o.stderr)
	}
	if o := runCLI(t, t.Context(), cliRun{argv: codex}); o.code != exitFailed || !strings.Contains(o.stderr, "config.toml") {
		t.Errorf("codex without config.toml: exit %d stderr %q", o.code, o.stderr)
	}
	if o := runAgent(t, t.TempDir(), "@call-model"); o.code != exitUsage || !strings.Contains(o.stderr, "persona mode") {
		t.Errorf("@call-model without a persona: exit %d stderr %q", o.code, o.stderr)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

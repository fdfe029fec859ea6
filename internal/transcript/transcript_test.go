package transcript_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/transcript"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const recordings = "../../testdata/transcripts"

// formatOf is the format each recorded CLI was run with (meta.json argv).
var formatOf = map[string]drovertype.OutputFormat{
	"claude":   drovertype.FormatClaudeStreamJSON,
	"codex":    drovertype.FormatCodexJSON,
	"opencode": drovertype.FormatOpenCodeJSON,
	"kilo":     drovertype.FormatOpenCodeJSON,
	"gemini":   drovertype.FormatGeminiStreamJSON,
	"pi":       drovertype.FormatPiJSON,
	"copilot":  drovertype.FormatCopilotJSON,
}

var clis = []string{"claude", "codex", "opencode", "kilo", "gemini", "pi", "copilot"}
var cases = []string{"success", "fail-401", "fail-429"}

type meta struct {
	CLI  string   `json:"cli"`
	Argv []string `json:"argv"`
	Exit int      `json:"exit"`
	File string   `json:"file"`
}

type recording struct {
	meta           meta
	stdout, stderr []byte
}

func load(t testing.TB, cli, c string) recording {
	t.Helper()
	dir := filepath.Join(recordings, cli, c)
	var r recording
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r.meta); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	if r.stdout, err = os.ReadFile(filepath.Join(dir, "stdout.txt")); err != nil {
		t.Fatal(err)
	}
	if r.stderr, err = os.ReadFile(filepath.Join(dir, "stderr.txt")); err != nil {
		t.Fatal(err)
	}
	return r
}

// run parses a recording: stdout through a LineWriter in odd-sized chunks
// (so lines are split across writes), stderr line by line.
func run(t testing.TB, f drovertype.OutputFormat, r recording) *transcript.Summary {
	t.Helper()
	p := transcript.NewParser(f)
	w := transcript.NewLineWriter(p, transcript.Stdout)
	for b := r.stdout; len(b) > 0; {
		n := min(len(b), 997)
		if _, err := w.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(r.stderr)) {
		p.Line(transcript.Stderr, []byte(strings.TrimSuffix(line, "\n")))
	}
	return p.Summary(r.meta.Exit)
}

// want is what each recording must give. The figures are read off the files.
type want struct {
	class      drovertype.ErrorClass // "" = no Failure
	status     int
	retryAfter time.Duration
	final      string
	usage      string // usageString of the Summary's Usage; "" for a failure: not compared
	file       string // a Files entry must end with it
}

const done = "Done. Created hello.txt."

var wants = map[string]want{
	// claude/success: result.usage input_tokens 38432, output_tokens 24, total_cost_usd 0.19276, modelUsage "claude-opus-4-8[1m]"
	"claude/success": {final: done, file: "/repo/hello.txt",
		usage: "claude-opus-4-8[1m] in=38432 out=24 cache_read=0 cache_write=0 cost=0.19276"},
	// claude/fail-401: result api_error_status 401; not retryable, so no wait. The result
	// text is claude's final text even on errors.
	"claude/fail-401": {class: drovertype.ClassAuthFailed, status: 401, final: "Invalid API key · Fix external API key"},
	// claude/fail-429: result api_error_status 429; last api_retry retry_delay_ms 39672.83051244048
	"claude/fail-429": {class: drovertype.ClassRateLimited, status: 429, retryAfter: 39673 * time.Millisecond,
		final: "API Error: Request rejected (429) · Number of requests has exceeded your per-minute rate limit (mockllm)"},

	// codex/success: turn.completed usage input_tokens 19912, output_tokens 24; the edit was a shell command, no file reported
	"codex/success":  {final: done, usage: " in=19912 out=24 cache_read=0 cache_write=0 cost=?"},
	"codex/fail-401": {class: drovertype.ClassAuthFailed, status: 401},
	"codex/fail-429": {class: drovertype.ClassRateLimited, status: 429},
	// codex/missing-env: turn.failed "Missing environment variable: `MOCK_API_KEY`." (TestCodexMissingEnv)
	"codex/missing-env": {class: drovertype.ClassAuthFailed},
	// */sandbox-denied: the model's port refused by the sandbox; the output says only that it
	// could not connect, a RUNTIME_ERROR, which package attempt reads with what the sandbox
	// refused (SANDBOX_DENIED). codex: its latest "Reconnecting... waiting for network
	// (Connection failed: …)" (killed by timeout, exit 124); pi: "Connection error." (exit 0);
	// opencode and kilo: "Cannot connect to API", retryable, with the URL in its metadata.
	"codex/sandbox-denied":    {class: drovertype.ClassRuntimeError},
	"pi/sandbox-denied":       {class: drovertype.ClassRuntimeError},
	"opencode/sandbox-denied": {class: drovertype.ClassRuntimeError},
	"kilo/sandbox-denied":     {class: drovertype.ClassRuntimeError},

	// opencode/success: step_finish tokens input 7690 + 7765, output 12 + 12
	"opencode/success":  {final: done, file: "/repo/hello.txt", usage: " in=15455 out=24 cache_read=0 cache_write=0 cost=0"},
	"opencode/fail-401": {class: drovertype.ClassAuthFailed, status: 401},
	// opencode/fail-429: responseHeaders "retry-after":"1"
	"opencode/fail-429": {class: drovertype.ClassRateLimited, status: 429, retryAfter: time.Second},

	// kilo/success: step_finish tokens input 12648 + 12723, output 12 + 12
	"kilo/success":  {final: done, file: "/repo/hello.txt", usage: " in=25371 out=24 cache_read=0 cache_write=0 cost=0"},
	"kilo/fail-401": {class: drovertype.ClassAuthFailed, status: 401},
	"kilo/fail-429": {class: drovertype.ClassRateLimited, status: 429, retryAfter: time.Second},

	// gemini/success: result stats input_tokens 25030, output_tokens 36, models {"gemini-mock"}; write_file file_path "hello.txt"
	"gemini/success":  {final: done, file: "hello.txt", usage: "gemini-mock in=25030 out=36 cache_read=0 cache_write=? cost=?"},
	"gemini/fail-401": {class: drovertype.ClassAuthFailed, status: 401},
	// gemini/fail-429: "retryDelayMs: undefined" on stderr: no wait stated
	"gemini/fail-429": {class: drovertype.ClassRateLimited, status: 429},

	// pi/success: message_end usage input 1409 + 1492, output 12 + 12, model "mock-model"
	"pi/success":  {final: done, file: "/repo/hello.txt", usage: "mock-model in=2901 out=24 cache_read=0 cache_write=0 cost=0"},
	"pi/fail-401": {class: drovertype.ClassAuthFailed, status: 401},
	// pi/fail-429: finalError "429 ... Please try again in 1s."
	"pi/fail-429": {class: drovertype.ClassRateLimited, status: 429, retryAfter: time.Second},

	// copilot/success: no token counts in the stream; model from assistant.message
	"copilot/success":  {final: done, file: "/repo/hello.txt", usage: "mock-model in=? out=? cache_read=? cache_write=? cost=?"},
	"copilot/fail-401": {class: drovertype.ClassAuthFailed, status: 401},
	// copilot/fail-429: "... Last error: 429 ... Please try again in 1s."
	"copilot/fail-429": {class: drovertype.ClassRateLimited, status: 429, retryAfter: time.Second},
}

func TestRecordings(t *testing.T) {
	var matrix strings.Builder
	fmt.Fprintf(&matrix, "\n%-9s %-9s %4s  %-13s %6s  %-18s %-12s %s\n", "cli", "case", "exit", "class", "status", "retry", "usage in/out", "message")
	for _, cli := range clis {
		for _, c := range cases {
			name := cli + "/" + c
			r := load(t, cli, c)
			s := run(t, formatOf[cli], r)
			w, ok := wants[name]
			if !ok {
				t.Fatalf("%s: no expectation", name)
			}
			class, status, retry, msg := "-", "-", "-", ""
			if f := s.Failure; f != nil {
				class, status, retry, msg = string(f.Class), fmt.Sprint(f.Status), fmt.Sprint(f.Retryable), f.Message
				if f.RetryAfter > 0 {
					retry += " after " + f.RetryAfter.String()
				}
				if len(msg) > 70 {
					msg = msg[:70] + "…"
				}
			}
			fmt.Fprintf(&matrix, "%-9s %-9s %4d  %-13s %6s  %-18s %-12s %q\n", cli, c, r.meta.Exit, class, status, retry,
				count(s.Usage.InputTokens)+"/"+count(s.Usage.OutputTokens), msg)

			t.Run(name, func(t *testing.T) {
				check(t, s, w)
				if s.Lines == 0 || s.Unparsed != 0 {
					t.Errorf("Lines = %d, Unparsed = %d; want lines and none unparsed", s.Lines, s.Unparsed)
				}
				if r.meta.File == "created" && c != "success" || r.meta.File != "created" && c == "success" {
					t.Errorf("recording says file=%s", r.meta.File)
				}
				// The exit code alone is not enough (docs/runtimes.md): the output decides
				// a failure whatever the exit code, and a failed exit fails a clean run.
				p := run(t, formatOf[cli], recording{meta: meta{Exit: 0}, stdout: r.stdout, stderr: r.stderr})
				if w.class != "" && (p.Failure == nil || p.Failure.Class != w.class || p.Failure.Status != w.status) {
					t.Errorf("with exit 0: Failure = %+v, want %s/%d", p.Failure, w.class, w.status)
				}
				p = run(t, formatOf[cli], recording{meta: meta{Exit: 1}, stdout: r.stdout, stderr: r.stderr})
				if w.class == "" && (p.Failure == nil || p.Failure.Class != drovertype.ClassRuntimeError) {
					t.Errorf("with exit 1: Failure = %+v, want %s", p.Failure, drovertype.ClassRuntimeError)
				}
			})
		}
	}
	t.Log(matrix.String())
}

func check(t *testing.T, s *transcript.Summary, w want) {
	t.Helper()
	f := s.Failure
	switch {
	case w.class == "" && f != nil:
		t.Fatalf("Failure = %+v, want none", f)
	case w.class != "" && f == nil:
		t.Fatalf("no Failure, want %s", w.class)
	case f != nil:
		if f.Class != w.class || f.Status != w.status {
			t.Errorf("Failure = %s/%d, want %s/%d (%q)", f.Class, f.Status, w.class, w.status, f.Message)
		}
		if wantRetry := w.class == drovertype.ClassRateLimited; f.Retryable != wantRetry {
			t.Errorf("Retryable = %v, want %v", f.Retryable, wantRetry)
		}
		if f.RetryAfter != w.retryAfter {
			t.Errorf("RetryAfter = %v, want %v", f.RetryAfter, w.retryAfter)
		}
		if f.Message == "" || len(f.Message) > transcript.MaxMessage {
			t.Errorf("Message = %q", f.Message)
		}
		if !f.ResetAt.IsZero() {
			t.Errorf("ResetAt = %v; no recording states one", f.ResetAt)
		}
	}
	if s.FinalText != w.final {
		t.Errorf("FinalText = %q, want %q", s.FinalText, w.final)
	}
	if got := usageString(s.Usage); got != w.usage && w.class == "" {
		t.Errorf("Usage = %s, want %s", got, w.usage)
	}
	if w.file != "" && !slices.ContainsFunc(s.Files, func(p string) bool { return strings.HasSuffix(p, w.file) }) {
		t.Errorf("Files = %q, want one ending in %q", s.Files, w.file)
	}
	if w.file == "" && len(s.Files) > 0 {
		t.Errorf("Files = %q, want none", s.Files)
	}
	if w.class == "" && !hasKind(s, transcript.KindToolCall) {
		t.Errorf("no tool_call event in %v", kinds(s))
	}
}

func hasKind(s *transcript.Summary, k transcript.Kind) bool {
	return slices.ContainsFunc(s.Events, func(e transcript.Event) bool { return e.Kind == k })
}

func kinds(s *transcript.Summary) []transcript.Kind {
	var out []transcript.Kind
	for _, e := range s.Events {
		out = append(out, e.Kind)
	}
	return out
}

// TestRecordingsComplete fails when a recording is added that the table
// above does not cover, or one it covers is gone.
func TestRecordingsComplete(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(recordings, "*", "*", "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range dirs {
		rel, _ := filepath.Rel(recordings, filepath.Dir(d))
		got = append(got, filepath.ToSlash(rel))
	}
	var want []string
	for k := range wants {
		want = append(want, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("recordings %v\nexpectations %v", got, want)
	}
}

// TestRecordingsArgv checks each recording was made with the flags its
// format expects, so formatOf is not a guess.
func TestRecordingsArgv(t *testing.T) {
	flag := map[string]string{
		"claude": "stream-json", "codex": "--json", "opencode": "json", "kilo": "json",
		"gemini": "stream-json", "pi": "json", "copilot": "json",
	}
	for _, cli := range clis {
		for _, c := range cases {
			r := load(t, cli, c)
			if r.meta.CLI != cli || !slices.Contains(r.meta.Argv, flag[cli]) {
				t.Errorf("%s/%s: argv %q", cli, c, r.meta.Argv)
			}
		}
	}
}

// usageString renders a Usage with "?" for what the output never stated:
// unknown is not 0.
func usageString(u transcript.Usage) string {
	cost := "?"
	if u.CostUSD != nil {
		cost = fmt.Sprint(*u.CostUSD)
	}
	return fmt.Sprintf("%s in=%s out=%s cache_read=%s cache_write=%s cost=%s", u.Model, count(u.InputTokens),
		count(u.OutputTokens), count(u.CacheReadTokens), count(u.CacheWriteTokens), cost)
}

func count(n *int64) string {
	if n == nil {
		return "?"
	}
	return fmt.Sprint(*n)
}

// codex/missing-env: a provider whose env_key names a variable codex does
// not see fails before any request; the key is missing, so AUTH_FAILED
// (it was a RUNTIME_ERROR when Drover passed no such variable through).
func TestCodexMissingEnv(t *testing.T) {
	r := load(t, "codex", "missing-env")
	s := run(t, drovertype.FormatCodexJSON, r)
	if f := s.Failure; f == nil || f.Class != drovertype.ClassAuthFailed || f.Retryable || !strings.Contains(f.Message, "MOCK_API_KEY") {
		t.Fatalf("Failure = %+v", s.Failure)
	}
	// And while it runs, at the first error line.
	p := transcript.NewParser(drovertype.FormatCodexJSON)
	for line := range strings.Lines(string(r.stdout)) {
		p.Line(transcript.Stdout, []byte(strings.TrimSuffix(line, "\n")))
		if strings.HasPrefix(line, `{"type":"error"`) {
			break
		}
	}
	if v := p.Verdict(); v.Failure == nil || v.Failure.Class != drovertype.ClassAuthFailed {
		t.Errorf("Verdict = %+v", v)
	}
	// Text mode says it on stderr.
	s = feed(drovertype.FormatCodexJSON, "", "ERROR: Missing environment variable: `MOCK_API_KEY`.\n", 1)
	if s.Failure == nil || s.Failure.Class != drovertype.ClassAuthFailed {
		t.Errorf("text mode: %+v", s.Failure)
	}
}

// While a recorded run is fed line by line (stderr first, as the fake CLI
// replays it), Verdict never shows a failure for a success, and for each
// failure shows the recording's class by the end; the runs that retry show
// it as retrying first, the CLI's own retries.
func TestVerdictWhileRunning(t *testing.T) {
	for _, cli := range clis {
		for _, c := range cases {
			name := cli + "/" + c
			r := load(t, cli, c)
			p := transcript.NewParser(formatOf[cli])
			var first *transcript.Verdict
			feedAll := func(s transcript.Stream, text string) {
				for line := range strings.Lines(text) {
					p.Line(s, []byte(strings.TrimSuffix(line, "\n")))
					if v := p.Verdict(); v.Failure != nil && first == nil {
						first = &v
					}
				}
			}
			feedAll(transcript.Stderr, string(r.stderr))
			feedAll(transcript.Stdout, string(r.stdout))
			end := p.Verdict()
			switch w := wants[name]; {
			case c == "success":
				if first != nil {
					t.Errorf("%s: a success showed %+v", name, first.Failure)
				}
			case end.Failure == nil || end.Failure.Class != w.class:
				t.Errorf("%s: Verdict at the end %+v, want %s", name, end, w.class)
			default:
				t.Logf("%s: first %s (retrying %v), last %s (retrying %v)", name, first.Failure.Class, first.Retrying, end.Failure.Class, end.Retrying)
			}
		}
	}
	// The CLIs that retry a 429 say so before they give up.
	for _, name := range []string{"claude/fail-429", "codex/fail-429", "gemini/fail-429", "pi/fail-429", "copilot/fail-429"} {
		cli, c, _ := strings.Cut(name, "/")
		r := load(t, cli, c)
		p := transcript.NewParser(formatOf[cli])
		lines := append(strings.SplitAfter(string(r.stderr), "\n"), strings.SplitAfter(string(r.stdout), "\n")...)
		retrying := false
		for i, line := range lines {
			s := transcript.Stdout
			if i < strings.Count(string(r.stderr), "\n")+1 {
				s = transcript.Stderr
			}
			p.Line(s, []byte(strings.TrimSuffix(line, "\n")))
			if v := p.Verdict(); v.Failure != nil && v.Failure.Class == drovertype.ClassRateLimited && v.Retrying {
				retrying = true
				break
			}
		}
		if !retrying {
			t.Errorf("%s: never showed a rate limit being retried", name)
		}
	}
}

// A transient retry notice the CLI gets past is no failure while it runs,
// and plain text is never judged while it runs.
func TestVerdictProgress(t *testing.T) {
	p := transcript.NewParser(drovertype.FormatGeminiStreamJSON)
	p.Line(transcript.Stderr, []byte("Attempt 1 failed with status 429. Retrying with backoff... _ApiError: {\"error\":{\"code\":429}}"))
	if v := p.Verdict(); v.Failure == nil || v.Failure.Class != drovertype.ClassRateLimited || !v.Retrying {
		t.Fatalf("after the notice: %+v", v)
	}
	p.Line(transcript.Stdout, []byte(`{"type":"message","role":"assistant","content":"on it","delta":true}`))
	if v := p.Verdict(); v.Failure != nil {
		t.Errorf("after progress: %+v", v)
	}
	text := transcript.NewParser(drovertype.FormatText)
	text.Line(transcript.Stdout, []byte("429 Too Many Requests: Invalid API key"))
	if v := text.Verdict(); v.Failure != nil {
		t.Errorf("plain text judged: %+v", v)
	}
	// pi's failed message is retried: a rate limit, retrying, until pi says
	// it gave up.
	pi := transcript.NewParser(drovertype.FormatPiJSON)
	pi.Line(transcript.Stdout, []byte(`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"429 Rate limit reached"}}`))
	if v := pi.Verdict(); v.Failure == nil || !v.Retrying {
		t.Errorf("pi's failed message: %+v", v)
	}
	pi.Line(transcript.Stdout, []byte(`{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"429 Rate limit reached"}`))
	if v := pi.Verdict(); v.Failure == nil || v.Retrying {
		t.Errorf("pi gave up: %+v", v)
	}
}

// Progress counts what moved a run on: every recorded success made some
// (its tool call at least), a run that only retried and failed made none,
// and plain text never says.
func TestProgress(t *testing.T) {
	for _, cli := range clis {
		for _, c := range cases {
			p := transcript.NewParser(formatOf[cli])
			r := load(t, cli, c)
			for line := range strings.Lines(string(r.stdout)) {
				p.Line(transcript.Stdout, []byte(strings.TrimSuffix(line, "\n")))
			}
			pr := p.(transcript.ProgressCounter).Progress()
			if !pr.Judged || (c == "success") != (pr.Moved > 0) || pr.Relayed < pr.Moved {
				t.Errorf("%s/%s: progress %+v", cli, c, pr)
			}
		}
	}
	p := transcript.NewParser(drovertype.FormatText)
	p.Line(transcript.Stdout, []byte("Wrote hello.txt"))
	if pr := p.(transcript.ProgressCounter).Progress(); pr != (transcript.Progress{}) {
		t.Errorf("text: %+v", pr)
	}
}

// The CLIs whose model port the sandbox refused classify as their wants
// say, and made no progress.
func TestSandboxDeniedRecordings(t *testing.T) {
	for _, cli := range []string{"codex", "pi", "opencode", "kilo"} {
		r := load(t, cli, "sandbox-denied")
		p := transcript.NewParser(formatOf[cli])
		w := transcript.NewLineWriter(p, transcript.Stdout)
		_, _ = w.Write(r.stdout)
		_ = w.Close()
		for line := range strings.Lines(string(r.stderr)) {
			p.Line(transcript.Stderr, []byte(strings.TrimSuffix(line, "\n")))
		}
		s := p.Summary(r.meta.Exit)
		if f, w := s.Failure, wants[cli+"/sandbox-denied"]; f == nil || f.Class != w.class {
			t.Errorf("%s: failure %+v, want %s", cli, f, w.class)
		}
		if pr := p.(transcript.ProgressCounter).Progress(); pr.Moved != 0 {
			t.Errorf("%s: progress %+v", cli, pr)
		}
	}
}

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
	usage      transcript.Usage
	file       string // a Files entry must end with it
}

const done = "Done. Created hello.txt."

var wants = map[string]want{
	// claude/success: result.usage input_tokens 38432, output_tokens 24, total_cost_usd 0.19276, modelUsage "claude-opus-4-8[1m]"
	"claude/success": {final: done, file: "/repo/hello.txt",
		usage: transcript.Usage{Model: "claude-opus-4-8[1m]", InputTokens: 38432, OutputTokens: 24, CostUSD: 0.19276}},
	// claude/fail-401: result api_error_status 401; not retryable, so no wait. The result
	// text is claude's final text even on errors.
	"claude/fail-401": {class: drovertype.ClassAuthFailed, status: 401, final: "Invalid API key · Fix external API key"},
	// claude/fail-429: result api_error_status 429; last api_retry retry_delay_ms 39672.83051244048
	"claude/fail-429": {class: drovertype.ClassRateLimited, status: 429, retryAfter: 39673 * time.Millisecond,
		final: "API Error: Request rejected (429) · Number of requests has exceeded your per-minute rate limit (mockllm)"},

	// codex/success: turn.completed usage input_tokens 19912, output_tokens 24; the edit was a shell command, no file reported
	"codex/success":  {final: done, usage: transcript.Usage{InputTokens: 19912, OutputTokens: 24}},
	"codex/fail-401": {class: drovertype.ClassAuthFailed, status: 401},
	"codex/fail-429": {class: drovertype.ClassRateLimited, status: 429},

	// opencode/success: step_finish tokens input 7690 + 7765, output 12 + 12
	"opencode/success":  {final: done, file: "/repo/hello.txt", usage: transcript.Usage{InputTokens: 15455, OutputTokens: 24}},
	"opencode/fail-401": {class: drovertype.ClassAuthFailed, status: 401},
	// opencode/fail-429: responseHeaders "retry-after":"1"
	"opencode/fail-429": {class: drovertype.ClassRateLimited, status: 429, retryAfter: time.Second},

	// kilo/success: step_finish tokens input 12648 + 12723, output 12 + 12
	"kilo/success":  {final: done, file: "/repo/hello.txt", usage: transcript.Usage{InputTokens: 25371, OutputTokens: 24}},
	"kilo/fail-401": {class: drovertype.ClassAuthFailed, status: 401},
	"kilo/fail-429": {class: drovertype.ClassRateLimited, status: 429, retryAfter: time.Second},

	// gemini/success: result stats input_tokens 25030, output_tokens 36, models {"gemini-mock"}; write_file file_path "hello.txt"
	"gemini/success":  {final: done, file: "hello.txt", usage: transcript.Usage{Model: "gemini-mock", InputTokens: 25030, OutputTokens: 36}},
	"gemini/fail-401": {class: drovertype.ClassAuthFailed, status: 401},
	// gemini/fail-429: "retryDelayMs: undefined" on stderr: no wait stated
	"gemini/fail-429": {class: drovertype.ClassRateLimited, status: 429},

	// pi/success: message_end usage input 1409 + 1492, output 12 + 12, model "mock-model"
	"pi/success":  {final: done, file: "/repo/hello.txt", usage: transcript.Usage{Model: "mock-model", InputTokens: 2901, OutputTokens: 24}},
	"pi/fail-401": {class: drovertype.ClassAuthFailed, status: 401},
	// pi/fail-429: finalError "429 ... Please try again in 1s."
	"pi/fail-429": {class: drovertype.ClassRateLimited, status: 429, retryAfter: time.Second},

	// copilot/success: no token counts in the stream; model from assistant.message
	"copilot/success":  {final: done, file: "/repo/hello.txt", usage: transcript.Usage{Model: "mock-model"}},
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
				fmt.Sprintf("%d/%d", s.Usage.InputTokens, s.Usage.OutputTokens), msg)

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
	if s.Usage != w.usage && w.class == "" {
		t.Errorf("Usage = %+v, want %+v", s.Usage, w.usage)
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

package transcript_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/transcript"
)

var allFormats = []drovertype.OutputFormat{
	drovertype.FormatClaudeStreamJSON, drovertype.FormatCodexJSON, drovertype.FormatOpenCodeJSON,
	drovertype.FormatGeminiStreamJSON, drovertype.FormatPiJSON, drovertype.FormatCopilotJSON, drovertype.FormatText,
}

// feed parses stdout and stderr texts line by line.
func feed(f drovertype.OutputFormat, stdout, stderr string, exit int) *transcript.Summary {
	p := transcript.NewParser(f)
	for line := range strings.Lines(stdout) {
		p.Line(transcript.Stdout, []byte(strings.TrimSuffix(line, "\n")))
	}
	for line := range strings.Lines(stderr) {
		p.Line(transcript.Stderr, []byte(strings.TrimSuffix(line, "\n")))
	}
	return p.Summary(exit)
}

func wantFailure(t *testing.T, s *transcript.Summary, class drovertype.ErrorClass, status int, retryable bool) {
	t.Helper()
	f := s.Failure
	if f == nil {
		t.Fatalf("no Failure, want %s/%d", class, status)
	}
	if f.Class != class || f.Status != status || f.Retryable != retryable {
		t.Errorf("Failure = %s/%d retryable=%v (%q), want %s/%d retryable=%v", f.Class, f.Status, f.Retryable, f.Message, class, status, retryable)
	}
}

func stdoutOf(t *testing.T, cli, c string) string { return string(load(t, cli, c).stdout) }
func stderrOf(t *testing.T, cli, c string) string { return string(load(t, cli, c).stderr) }

// withoutLast drops the last n lines.
func withoutLast(s string, n int) string {
	lines := strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n")
	return strings.Join(lines[:len(lines)-n], "")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// edit rewrites the JSON object of a real line.
func edit(t *testing.T, line string, change func(m map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]drovertype.OutputFormat{
		"claude-stream-json": drovertype.FormatClaudeStreamJSON, "claude": drovertype.FormatClaudeStreamJSON,
		"codex-json": drovertype.FormatCodexJSON, "opencode-json": drovertype.FormatOpenCodeJSON, "kilo": drovertype.FormatOpenCodeJSON,
		"gemini-stream-json": drovertype.FormatGeminiStreamJSON, "pi-json": drovertype.FormatPiJSON, " Copilot-JSON ": drovertype.FormatCopilotJSON,
		"text": drovertype.FormatText, "": drovertype.FormatText,
	} {
		if got, err := drovertype.ParseOutputFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := drovertype.ParseOutputFormat("yaml"); !errors.Is(err, drovertype.ErrUnknownFormat) {
		t.Errorf("ParseFormat(yaml) error = %v", err)
	}
}

func TestGarbageLines(t *testing.T) {
	garbage := "garbage\n{not json\n[1,2]\n\x00\xff\xfe binary\n{\"type\":\n"
	for _, f := range allFormats {
		t.Run(string(f), func(t *testing.T) {
			s := feed(f, garbage+"{}\nnull\n{\"type\":42}\n\n", "", 1)
			if f != drovertype.FormatText && s.Unparsed != 6 {
				t.Errorf("Unparsed = %d, want 6", s.Unparsed)
			}
			if s.Lines != 9 {
				t.Errorf("Lines = %d, want 9", s.Lines)
			}
			for _, e := range s.Events[:5] {
				if e.Kind != transcript.KindText || e.Stream != transcript.Stdout {
					t.Errorf("event %+v, want stdout text", e)
				}
			}
			wantFailure(t, s, drovertype.ClassRuntimeError, 0, false)
		})
	}
}

func TestHugeLine(t *testing.T) {
	huge := `{"type":"result","result":"` + strings.Repeat("x", 5<<20) + `"}`
	for _, f := range allFormats {
		t.Run(string(f), func(t *testing.T) {
			p := transcript.NewParser(f)
			w := transcript.NewLineWriter(p, transcript.Stdout)
			for b := []byte(huge + "\n"); len(b) > 0; {
				n := min(len(b), 64<<10)
				w.Write(b[:n])
				b = b[n:]
			}
			w.Write([]byte("after\n"))
			w.Close()
			p.Line(transcript.Stdout, []byte(huge)) // straight in, no writer
			s := p.Summary(0)
			if s.Lines != 3 {
				t.Errorf("Lines = %d, want 3", s.Lines)
			}
			if f != drovertype.FormatText && s.Unparsed != 3 {
				t.Errorf("Unparsed = %d, want 3 (truncated JSON does not parse)", s.Unparsed)
			}
			for _, e := range s.Events {
				if len(e.Text) > transcript.MaxText {
					t.Errorf("event text %d bytes", len(e.Text))
				}
			}
			if len(s.FinalText) > transcript.MaxFinal {
				t.Errorf("FinalText %d bytes", len(s.FinalText))
			}
			if s.Events[1].Text != "after" {
				t.Errorf("line after the huge one = %q", s.Events[1].Text)
			}
		})
	}
}

func TestTruncatedFinalLine(t *testing.T) {
	for _, cli := range []string{"claude", "codex", "gemini", "copilot"} {
		t.Run(cli, func(t *testing.T) {
			out := stdoutOf(t, cli, "success")
			last := lastLine(out)
			cut := withoutLast(out, 1) + last[:len(last)/2] // no newline: the process died mid-write
			p := transcript.NewParser(formatOf[cli])
			w := transcript.NewLineWriter(p, transcript.Stdout)
			w.Write([]byte(cut))
			w.Close()
			s := p.Summary(0)
			if s.Unparsed != 1 {
				t.Errorf("Unparsed = %d, want 1", s.Unparsed)
			}
			wantFailure(t, s, drovertype.ClassOutputMalformed, 0, true)
		})
	}
}

func TestInterleavedStderr(t *testing.T) {
	r := load(t, "gemini", "fail-429")
	want := run(t, drovertype.FormatGeminiStreamJSON, r)
	for range 20 {
		p := transcript.NewParser(drovertype.FormatGeminiStreamJSON)
		var wg sync.WaitGroup
		for _, x := range []struct {
			s transcript.Stream
			b []byte
		}{{transcript.Stdout, r.stdout}, {transcript.Stderr, r.stderr}} {
			wg.Go(func() {
				w := transcript.NewLineWriter(p, x.s)
				for b := x.b; len(b) > 0; {
					n := min(len(b), 100)
					w.Write(b[:n])
					b = b[n:]
				}
				w.Close()
			})
		}
		wg.Wait()
		got := p.Summary(r.meta.Exit)
		if *got.Failure != *want.Failure || got.Lines != want.Lines || got.Unparsed != 0 || len(got.Events)+got.Dropped != len(want.Events)+want.Dropped {
			t.Fatalf("interleaved: %+v\nsequential: %+v", got.Failure, want.Failure)
		}
	}
}

func TestEmptyOutput(t *testing.T) {
	for _, f := range allFormats {
		t.Run(string(f), func(t *testing.T) {
			s := feed(f, "", "", 0)
			switch f {
			case drovertype.FormatOpenCodeJSON, drovertype.FormatText: // no final line promised
				if s.Failure != nil {
					t.Errorf("exit 0: Failure = %+v, want none", s.Failure)
				}
			default:
				wantFailure(t, s, drovertype.ClassOutputMalformed, 0, true)
			}
			s = feed(f, "", "", 1)
			wantFailure(t, s, drovertype.ClassRuntimeError, 0, false)
			if s.Failure.Message != "exit code 1" {
				t.Errorf("Message = %q", s.Failure.Message)
			}
		})
	}
}

// gemini exits 0 on SIGTERM, with no result line (docs/runtimes.md#gemini).
func TestGeminiSIGTERM(t *testing.T) {
	out := stdoutOf(t, "gemini", "success")
	s := feed(drovertype.FormatGeminiStreamJSON, withoutLast(out, 1), stderrOf(t, "gemini", "success"), 0)
	wantFailure(t, s, drovertype.ClassOutputMalformed, 0, true)
	if s.FinalText != "Done. Created hello.txt." {
		t.Errorf("FinalText = %q: what came before the cut is kept", s.FinalText)
	}
	// Killed while retrying 429s: the retry notices on stderr name the cause.
	out = stdoutOf(t, "gemini", "fail-429")
	s = feed(drovertype.FormatGeminiStreamJSON, withoutLast(out, 1), stderrOf(t, "gemini", "fail-429"), 0)
	wantFailure(t, s, drovertype.ClassRateLimited, 429, true)
}

func TestStderrOnlyFailures(t *testing.T) {
	for _, tc := range []struct {
		name           string
		f              drovertype.OutputFormat
		stdout, stderr string
		exit           int
		class          drovertype.ErrorClass
		status         int
		retry          bool
	}{
		// docs/runtimes.md#claude, permissions
		{"claude root", drovertype.FormatClaudeStreamJSON, "", "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons\n", 1, drovertype.ClassRuntimeError, 0, false},
		// docs/runtimes.md: failures told only on stderr or by the exit code
		{"gemini no auth", drovertype.FormatGeminiStreamJSON, "", "Please set an Auth method in your /h/.gemini/settings.json or specify one of the following environment variables before running: GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA\n", 41, drovertype.ClassAuthFailed, 0, false},
		{"gemini exit 41", drovertype.FormatGeminiStreamJSON, "", "", 41, drovertype.ClassAuthFailed, 0, false},
		{"gemini exit 145", drovertype.FormatGeminiStreamJSON, "", "", 145, drovertype.ClassAuthFailed, 401, false},
		{"gemini exit 173", drovertype.FormatGeminiStreamJSON, "", "", 173, drovertype.ClassRateLimited, 429, true},
		{"gemini untrusted", drovertype.FormatGeminiStreamJSON, "", "Gemini CLI is not running in a trusted directory. To proceed, ...\n", 55, drovertype.ClassRuntimeError, 0, false},
		{"pi no key", drovertype.FormatPiJSON, `{"type":"session","version":3,"id":"x","cwd":"/r"}` + "\n", "No API key found for the selected model.\n", 1, drovertype.ClassAuthFailed, 0, false},
		{"copilot no auth", drovertype.FormatCopilotJSON, "", "Error: No authentication information found.\n\nCopilot can be authenticated with GitHub using an OAuth Token or a Fine-Grained Personal Access Token.\n", 1, drovertype.ClassAuthFailed, 0, false},
		{"codex config", drovertype.FormatCodexJSON, "", "Error loading config.toml: wire_api = \"chat\" is no longer supported.\n", 1, drovertype.ClassRuntimeError, 0, false},
		// kilo/fail-429/stderr.txt alone (no stdout): a hint, used because the exit failed
		{"kilo stderr", drovertype.FormatOpenCodeJSON, "", "\x1b[91m\x1b[1mError: \x1b[0mRate limit reached for requests (mockllm). Please try again in 1s.\n", 1, drovertype.ClassRateLimited, 429, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := feed(tc.f, tc.stdout, tc.stderr, tc.exit)
			wantFailure(t, s, tc.class, tc.status, tc.retry)
		})
	}
}

func TestKiloStderrANSI(t *testing.T) {
	s := feed(drovertype.FormatOpenCodeJSON, "", stderrOf(t, "kilo", "fail-401"), 0)
	if len(s.Events) != 1 || s.Events[0].Text != "Error: Incorrect API key provided: mock****. (mockllm)" || s.Events[0].Stream != transcript.Stderr {
		t.Errorf("events = %+v", s.Events)
	}
	if s.Failure != nil {
		t.Errorf("exit 0 with only a stderr hint: Failure = %+v", s.Failure)
	}
}

// With no permission flag the Write is denied, exit 0, is_error false
// (docs/runtimes.md#claude).
func TestClaudePermissionDenied(t *testing.T) {
	out := stdoutOf(t, "claude", "success")
	res := edit(t, lastLine(out), func(m map[string]any) {
		m["permission_denials"] = []any{map[string]any{"tool_name": "Write", "tool_use_id": "toolu_1", "tool_input": map[string]any{}}}
	})
	s := feed(drovertype.FormatClaudeStreamJSON, withoutLast(out, 1)+res+"\n", "", 0)
	wantFailure(t, s, drovertype.ClassRuntimeError, 0, false)
	if !strings.Contains(s.Failure.Message, "Write") {
		t.Errorf("Message = %q, want the denied tool", s.Failure.Message)
	}
}

// claude 500/529 with CLAUDE_CODE_MAX_RETRIES=0: "API Error: 500 ...",
// "error":"server_error" (docs/runtimes.md#claude).
func TestClaudeServerError(t *testing.T) {
	out := stdoutOf(t, "claude", "fail-429")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	asst := edit(t, lines[len(lines)-2], func(m map[string]any) { m["error"] = "server_error" })
	res := edit(t, lines[len(lines)-1], func(m map[string]any) {
		m["api_error_status"] = 529
		m["result"] = "API Error: 529 Overloaded"
	})
	s := feed(drovertype.FormatClaudeStreamJSON, lines[0]+"\n"+asst+"\n"+res+"\n", "", 1)
	wantFailure(t, s, drovertype.ClassRuntimeError, 529, true)
}

// Without credentials: "Not logged in · Please run /login", result is_error
// with no status (docs/runtimes.md#claude).
func TestClaudeNotLoggedIn(t *testing.T) {
	res := edit(t, lastLine(stdoutOf(t, "claude", "fail-401")), func(m map[string]any) {
		m["api_error_status"] = nil
		m["result"] = "Not logged in · Please run /login"
	})
	s := feed(drovertype.FormatClaudeStreamJSON, res+"\n", "", 1)
	wantFailure(t, s, drovertype.ClassAuthFailed, 0, false)
}

// Claude killed during its own retries (no result line): the api_retry notices name the cause.
func TestClaudeKilledWhileRetrying(t *testing.T) {
	out := withoutLast(stdoutOf(t, "claude", "fail-429"), 2)
	s := feed(drovertype.FormatClaudeStreamJSON, out, "", 143)
	wantFailure(t, s, drovertype.ClassRateLimited, 429, true)
	if s.Failure.RetryAfter != 39673*time.Millisecond {
		t.Errorf("RetryAfter = %v", s.Failure.RetryAfter)
	}
}

// pi retries on its own; a later good answer clears the error.
func TestPiRecovers(t *testing.T) {
	fail := strings.Split(stdoutOf(t, "pi", "fail-429"), "\n")
	ok := stdoutOf(t, "pi", "success")
	var b strings.Builder
	for _, l := range fail[:10] { // session .. auto_retry_start attempt 1
		b.WriteString(l + "\n")
	}
	if !strings.Contains(fail[9], "auto_retry_start") {
		t.Fatalf("line 10 is %q", fail[9])
	}
	b.WriteString(`{"type":"auto_retry_end","success":true,"attempt":1}` + "\n")
	b.WriteString(ok)
	s := feed(drovertype.FormatPiJSON, b.String(), "", 0)
	if s.Failure != nil {
		t.Errorf("Failure = %+v, want none", s.Failure)
	}
	if s.FinalText != done {
		t.Errorf("FinalText = %q", s.FinalText)
	}
}

// opencode error with a Retry-After date instead of seconds.
func TestOpenCodeRetryAfterDate(t *testing.T) {
	line := edit(t, lastLine(stdoutOf(t, "opencode", "fail-429")), func(m map[string]any) {
		d := m["error"].(map[string]any)["data"].(map[string]any)
		d["responseHeaders"].(map[string]any)["retry-after"] = "Sun, 22 Nov 2026 04:00:00 GMT"
		d["message"] = "Rate limit reached for requests (mockllm)."
	})
	s := feed(drovertype.FormatOpenCodeJSON, line+"\n", "", 1)
	wantFailure(t, s, drovertype.ClassRateLimited, 429, true)
	if want := time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC); !s.Failure.ResetAt.Equal(want) || s.Failure.RetryAfter != 0 {
		t.Errorf("ResetAt = %v, RetryAfter = %v; want %v, 0", s.Failure.ResetAt, s.Failure.RetryAfter, want)
	}
}

// A field of an unexpected type loses that field, not the line.
func TestTypeDrift(t *testing.T) {
	res := edit(t, lastLine(stdoutOf(t, "claude", "success")), func(m map[string]any) { m["duration_ms"] = "fast"; m["num_turns"] = []int{} })
	s := feed(drovertype.FormatClaudeStreamJSON, res+"\n", "", 0)
	if s.Failure != nil || s.Unparsed != 0 || count(s.Usage.InputTokens) != "38432" {
		t.Errorf("Failure = %+v, Unparsed = %d, Usage = %+v", s.Failure, s.Unparsed, s.Usage)
	}
}

func TestText(t *testing.T) {
	// Exit 0 is success whatever the text says: gemini prints "Attempt 1 failed with
	// status 429" and then succeeds (docs/runtimes.md#what-holds-for-all-seven).
	s := feed(drovertype.FormatText, "Done.\n", "ERROR: exceeded retry limit, last status: 429 Too Many Requests\n", 0)
	if s.Failure != nil || s.FinalText != "Done." {
		t.Errorf("exit 0: Failure = %+v, FinalText = %q", s.Failure, s.FinalText)
	}
	s = feed(drovertype.FormatText, "", "ERROR: exceeded retry limit, last status: 429 Too Many Requests\n", 1)
	wantFailure(t, s, drovertype.ClassRateLimited, 429, true)
	s = feed(drovertype.FormatText, "", "ERROR: unexpected status 401 Unauthorized: Incorrect API key provided\n", 1)
	wantFailure(t, s, drovertype.ClassAuthFailed, 401, false)
	s = feed(drovertype.FormatText, "", "something broke\nat line 3\n", 2)
	wantFailure(t, s, drovertype.ClassRuntimeError, 0, false)
	if s.Failure.Message != "exit code 2: at line 3" {
		t.Errorf("Message = %q", s.Failure.Message)
	}
	// The text rows do not fire on a status number alone.
	s = feed(drovertype.FormatText, "", "GET /items returned 429 in the test fixture\n", 1)
	wantFailure(t, s, drovertype.ClassRuntimeError, 0, false)
}

func TestEventsBounded(t *testing.T) {
	p := transcript.NewParser(drovertype.FormatText)
	for i := range 1000 {
		p.Line(transcript.Stdout, []byte("line "+strconv.Itoa(i)))
	}
	s := p.Summary(0)
	if len(s.Events) != 2*transcript.KeepEvents || s.Dropped != 1000-2*transcript.KeepEvents {
		t.Fatalf("Events %d, Dropped %d", len(s.Events), s.Dropped)
	}
	if s.Events[0].Text != "line 0" || s.Events[199].Text != "line 199" || s.Events[200].Text != "line 800" || s.Events[399].Text != "line 999" {
		t.Errorf("kept %q %q %q %q", s.Events[0].Text, s.Events[199].Text, s.Events[200].Text, s.Events[399].Text)
	}
	if !strings.HasSuffix(s.FinalText, "line 999") {
		t.Errorf("FinalText ends %q", s.FinalText[max(0, len(s.FinalText)-20):])
	}
}

func TestInputBounded(t *testing.T) {
	big := edit(t, strings.Split(stdoutOf(t, "claude", "success"), "\n")[2], func(m map[string]any) {
		c := m["message"].(map[string]any)["content"].([]any)[0].(map[string]any)
		c["input"].(map[string]any)["content"] = strings.Repeat("y", 8<<10)
	})
	s := feed(drovertype.FormatClaudeStreamJSON, big+"\n", "", 0)
	if len(s.Events) != 1 || s.Events[0].Kind != transcript.KindToolCall || s.Events[0].Tool != "Write" || s.Events[0].Input != nil {
		t.Errorf("events = %+v", s.Events)
	}
}

func TestLineWriter(t *testing.T) {
	var got []string
	p := &recorder{lines: &got}
	w := transcript.NewLineWriter(p, transcript.Stderr)
	for _, chunk := range []string{"ab", "c\nde", "f\r\n\n", "g", "h\ni\nj"} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	want := []string{"abc", "def\r", "", "gh", "i", "j"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", got, want)
	}
	if _, err := w.Write([]byte("x\n")); !errors.Is(err, transcript.ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	// A long line is cut at MaxLine; the next line is whole.
	got = got[:0]
	w = transcript.NewLineWriter(p, transcript.Stdout)
	long := bytes.Repeat([]byte("z"), transcript.MaxLine+10)
	w.Write(long[:100])
	w.Write(long[100:])
	w.Write([]byte("\nnext\n"))
	w.Close()
	if len(got) != 2 || len(got[0]) != transcript.MaxLine || got[1] != "next" {
		t.Errorf("got %d lines, first %d bytes", len(got), len(got[0]))
	}
}

type recorder struct{ lines *[]string }

func (r *recorder) Line(_ transcript.Stream, b []byte) { *r.lines = append(*r.lines, string(b)) }
func (r *recorder) Summary(int) *transcript.Summary    { return nil }
func (r *recorder) Verdict() transcript.Verdict        { return transcript.Verdict{} }

// With only the first request failing with 429, every CLI retried on its
// own and succeeded (docs/runtimes.md#what-holds-for-all-seven). The retry
// notice must not decide.
func TestRetriedThenSucceeded(t *testing.T) {
	ok := strings.SplitAfter(stdoutOf(t, "claude", "success"), "\n")
	retry := strings.SplitAfter(stdoutOf(t, "claude", "fail-429"), "\n")[1] // system/api_retry 429
	out := ok[0] + retry + strings.Join(ok[1:], "")
	if s := feed(drovertype.FormatClaudeStreamJSON, out, "", 0); s.Failure != nil {
		t.Errorf("exit 0: Failure = %+v", s.Failure)
	}
	s := feed(drovertype.FormatClaudeStreamJSON, out, "", 1)
	wantFailure(t, s, drovertype.ClassRuntimeError, 0, false)

	// The same for gemini's stderr notice and copilot's model.call_failure.
	gerr := "Attempt 1 failed with status 429. Retrying with backoff... _ApiError: {\"error\":{\"code\":429}}\n"
	if s := feed(drovertype.FormatGeminiStreamJSON, stdoutOf(t, "gemini", "success"), gerr, 0); s.Failure != nil {
		t.Errorf("gemini: Failure = %+v", s.Failure)
	}
	cok := strings.SplitAfter(stdoutOf(t, "copilot", "success"), "\n")
	cfail := strings.SplitAfter(stdoutOf(t, "copilot", "fail-429"), "\n")
	var callFailure string
	for _, l := range cfail {
		if strings.Contains(l, `"type":"model.call_failure"`) {
			callFailure = l
			break
		}
	}
	out = strings.Join(cok[:6], "") + callFailure + strings.Join(cok[6:], "")
	if s := feed(drovertype.FormatCopilotJSON, out, "", 0); s.Failure != nil || s.FinalText != done {
		t.Errorf("copilot: Failure = %+v, FinalText %q", s.Failure, s.FinalText)
	}
}

package transcript_test

import (
	"bytes"
	"testing"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/transcript"
)

// One fuzz target per format, seeded with that format's recordings. Lines
// that start with '!' also go to stderr, so both paths are exercised.

func FuzzClaude(f *testing.F)   { fuzzFormat(f, drovertype.FormatClaudeStreamJSON, "claude") }
func FuzzCodex(f *testing.F)    { fuzzFormat(f, drovertype.FormatCodexJSON, "codex") }
func FuzzOpenCode(f *testing.F) { fuzzFormat(f, drovertype.FormatOpenCodeJSON, "opencode", "kilo") }
func FuzzGemini(f *testing.F)   { fuzzFormat(f, drovertype.FormatGeminiStreamJSON, "gemini") }
func FuzzPi(f *testing.F)       { fuzzFormat(f, drovertype.FormatPiJSON, "pi") }
func FuzzCopilot(f *testing.F)  { fuzzFormat(f, drovertype.FormatCopilotJSON, "copilot") }
func FuzzText(f *testing.F)     { fuzzFormat(f, drovertype.FormatText, "codex", "gemini") }

func fuzzFormat(f *testing.F, format drovertype.OutputFormat, clis ...string) {
	for _, cli := range clis {
		for _, c := range cases {
			r := load(f, cli, c)
			f.Add(r.stdout, r.meta.Exit)
			f.Add(prefixLines(r.stderr, '!'), r.meta.Exit)
		}
	}
	f.Add([]byte("{\"type\":\"result\"\n\x1b[91mError: \x1b[0m429\n!Error: 401 Unauthorized\r\n"), 0)
	// Quota messages, whose waits each format's table reads (wait.go).
	for _, q := range quotaSeeds {
		f.Add([]byte(q), 1)
	}
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, data []byte, exit int) {
		p := transcript.NewParser(format)
		w := transcript.NewLineWriter(p, transcript.Stdout)
		// Odd chunks, so lines straddle writes.
		for b, n := data, 1; len(b) > 0; n = n*3 + 1 {
			k := min(len(b), n)
			w.Write(b[:k])
			b = b[k:]
		}
		w.Close()
		for line := range bytes.Lines(data) {
			if line[0] == '!' {
				p.Line(transcript.Stderr, bytes.TrimSuffix(line[1:], []byte("\n")))
			}
		}
		// While it runs: plain text is never judged, and a verdict is a
		// classified failure, bounded like the Summary's.
		if v := p.Verdict(); v.Failure != nil {
			if format == drovertype.FormatText || !v.Failure.Class.Known() || len(v.Failure.Message) > transcript.MaxMessage {
				t.Fatalf("%s: Verdict %+v", format, v)
			}
		}
		checkSummary(t, format, p.Summary(exit), exit)
	})
}

// quotaSeeds are quota and usage-limit messages in each format's error
// shape, and as plain text on stderr.
var quotaSeeds = []string{
	`{"type":"result","subtype":"success","is_error":true,"result":"Claude AI usage limit reached|1749924000"}` + "\n",
	`{"type":"result","subtype":"success","is_error":true,"result":"You've hit your session limit · resets 12:50am (America/Los_Angeles)"}` + "\n",
	`{"type":"turn.failed","error":{"message":"You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 5 days 22 hours 11 minutes."}}` + "\n",
	`{"type":"turn.failed","error":{"message":"You've hit your usage limit. or try again at Jul 5th, 2026 8:19 PM."}}` + "\n",
	`{"type":"result","status":"error","error":{"type":"x","message":"[API Error: {\"error\":{\"code\":429,\"details\":[{\"retryDelay\":\"38s\"}]}}] Please retry in 47.43s."}}` + "\n",
	`{"type":"session.error","data":{"errorType":"rate_limit","statusCode":429,"message":"Please try again in 15 hours 23 minutes."}}` + "\n",
	`{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"Cloud Code Assist API error (429): Your quota will reset after 12h34m16s."}` + "\n",
	"!Sorry, you've hit a rate limit that restricts the number of Copilot model requests. Please try again in 2 hours.\n",
	"!{\"error\":{\"type\":\"usage_limit_reached\",\"resets_at\":1775317531,\"resets_in_seconds\":602705}}\n",
}

func prefixLines(b []byte, c byte) []byte {
	var out []byte
	for line := range bytes.Lines(b) {
		out = append(out, c)
		out = append(out, line...)
	}
	return out
}

// checkSummary asserts what holds for any input: bounds, and a Failure
// that is well formed.
func checkSummary(t *testing.T, format drovertype.OutputFormat, s *transcript.Summary, exit int) {
	t.Helper()
	if len(s.Events) > 2*transcript.KeepEvents {
		t.Fatalf("%d events", len(s.Events))
	}
	for _, e := range s.Events {
		if len(e.Text) > transcript.MaxText || len(e.Input) > transcript.MaxInput || len(e.Tool) > transcript.MaxText {
			t.Fatalf("event out of bounds: text %d, input %d", len(e.Text), len(e.Input))
		}
	}
	if len(s.FinalText) > transcript.MaxFinal || len(s.Files) > transcript.MaxFiles {
		t.Fatalf("FinalText %d bytes, %d files", len(s.FinalText), len(s.Files))
	}
	if s.Unparsed > s.Lines || s.Dropped < 0 {
		t.Fatalf("Unparsed %d > Lines %d, Dropped %d", s.Unparsed, s.Lines, s.Dropped)
	}
	f := s.Failure
	if f == nil {
		if exit != 0 {
			t.Fatalf("exit %d without a Failure", exit)
		}
		return
	}
	switch f.Class {
	case drovertype.ClassAuthFailed, drovertype.ClassRateLimited, drovertype.ClassRuntimeError, drovertype.ClassOutputMalformed:
	default:
		t.Fatalf("class %q", f.Class)
	}
	if len(f.Message) > transcript.MaxMessage || f.Message == "" {
		t.Fatalf("Message %q", f.Message)
	}
	if f.RetryAfter < 0 || f.RetryAfter > 0 && !f.Retryable {
		t.Fatalf("RetryAfter %v, Retryable %v", f.RetryAfter, f.Retryable)
	}
	if format == drovertype.FormatText && exit == 0 {
		t.Fatalf("Text with exit 0 failed: %+v", f)
	}
}

package transcript_test

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/transcript"
)

// waitNow is the clock the quota messages below are read against:
// 2026-07-04 18:30:00 UTC, 11:30 in Los Angeles.
var waitNow = time.Date(2026, 7, 4, 18, 30, 0, 0, time.UTC)

// feedAt parses stdout with the clock at waitNow and local times in loc.
func feedAt(f drovertype.OutputFormat, stdout, stderr string, exit int, loc *time.Location) *transcript.Summary {
	p := transcript.NewParserWith(f, transcript.Options{Now: func() time.Time { return waitNow }, Location: loc})
	for line := range strings.Lines(stdout) {
		p.Line(transcript.Stdout, []byte(strings.TrimSuffix(line, "\n")))
	}
	for line := range strings.Lines(stderr) {
		p.Line(transcript.Stderr, []byte(strings.TrimSuffix(line, "\n")))
	}
	return p.Summary(exit)
}

// TestQuotaWaits reads each CLI's quota and usage-limit messages, in the
// shape of its recorded error lines with the words its documentation and
// users' reports show (docs/runtimes.md#quota-messages): the class, and the
// wait or reset time they state.
func TestQuotaWaits(t *testing.T) {
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	claudeResult := func(text string) string {
		return edit(t, lastLine(stdoutOf(t, "claude", "fail-429")), func(m map[string]any) {
			m["result"] = text
			delete(m, "api_error_status")
		})
	}
	codexFailed := func(text string) string {
		return `{"type":"turn.failed","error":{"message":` + quote(text) + `}}`
	}
	geminiResult := func(text string) string {
		return edit(t, lastLine(stdoutOf(t, "gemini", "fail-429")), func(m map[string]any) {
			m["error"].(map[string]any)["message"] = text
		})
	}
	copilotError := func(text string) string {
		for line := range strings.Lines(stdoutOf(t, "copilot", "fail-429")) {
			if strings.Contains(line, `"session.error"`) {
				return edit(t, strings.TrimSpace(line), func(m map[string]any) { m["data"].(map[string]any)["message"] = text })
			}
		}
		t.Fatal("no session.error in copilot/fail-429")
		return ""
	}
	piEnd := func(text string) string {
		return edit(t, lastLine(stdoutOf(t, "pi", "fail-429")), func(m map[string]any) { m["finalError"] = text })
	}
	openCodeError := func(text string) string {
		return edit(t, lastLine(stdoutOf(t, "opencode", "fail-429")), func(m map[string]any) {
			d := m["error"].(map[string]any)["data"].(map[string]any)
			d["message"] = text
			delete(d["responseHeaders"].(map[string]any), "retry-after")
		})
	}
	for _, c := range []struct {
		name   string
		format drovertype.OutputFormat
		stdout string
		stderr string
		loc    *time.Location
		wait   time.Duration
		reset  time.Time
	}{
		{name: "claude epoch", format: drovertype.FormatClaudeStreamJSON,
			stdout: claudeResult("Claude AI usage limit reached|1749924000"),
			reset:  time.Date(2025, 6, 14, 18, 0, 0, 0, time.UTC)},
		{name: "claude reset at, zone with an offset name", format: drovertype.FormatClaudeStreamJSON,
			stdout: claudeResult("Claude usage limit reached. Your limit will reset at 1pm (Etc/GMT+5)."),
			// Etc/GMT+5 is UTC-5: 1pm there was 18:00 UTC, half an hour ago, so the next is tomorrow's.
			reset: time.Date(2026, 7, 5, 18, 0, 0, 0, time.UTC)},
		{name: "claude session limit, later today", format: drovertype.FormatClaudeStreamJSON,
			stdout: claudeResult("You've hit your session limit · resets 12:50pm (America/Los_Angeles)"),
			reset:  time.Date(2026, 7, 4, 19, 50, 0, 0, time.UTC)},
		{name: "claude session limit, after midnight", format: drovertype.FormatClaudeStreamJSON,
			stdout: claudeResult("You've hit your limit · resets 1:30am (Asia/Dhaka)"),
			// 18:30 UTC is 00:30 in Dhaka (UTC+6): 1:30 is in an hour.
			reset: time.Date(2026, 7, 4, 19, 30, 0, 0, time.UTC)},
		{name: "claude unknown zone", format: drovertype.FormatClaudeStreamJSON,
			stdout: claudeResult("You've hit your session limit · resets 3pm (Mars/Olympus_Mons)")},
		{name: "codex words", format: drovertype.FormatCodexJSON,
			stdout: codexFailed("You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 5 days 22 hours 11 minutes."),
			wait:   5*24*time.Hour + 22*time.Hour + 11*time.Minute},
		{name: "codex date in the host's zone", format: drovertype.FormatCodexJSON, loc: newYork,
			stdout: codexFailed("You've hit your usage limit. Upgrade to Plus to continue using Codex (https://chatgpt.com/explore/plus), or try again at Jul 5th, 2026 8:19 PM."),
			reset:  time.Date(2026, 7, 6, 0, 19, 0, 0, time.UTC)},
		{name: "codex date in year 0", format: drovertype.FormatCodexJSON,
			stdout: codexFailed("You've hit your usage limit. Try again at Jul 1 0000 0:00AM.")},
		{name: "codex usage_limit_reached body", format: drovertype.FormatCodexJSON,
			stdout: codexFailed(`unexpected status 429 Too Many Requests: {"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"free","resets_at":1775317531,"resets_in_seconds":602705}}`),
			wait:   602705 * time.Second, reset: time.Unix(1775317531, 0).UTC()},
		{name: "gemini retry in", format: drovertype.FormatGeminiStreamJSON,
			stdout: geminiResult("[API Error: You exceeded your current quota, please check your plan and billing details.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_paid_tier_input_token_count, limit: 4000000\nPlease retry in 47.434392449s.]"),
			wait:   47435 * time.Millisecond},
		{name: "gemini RetryInfo", format: drovertype.FormatGeminiStreamJSON,
			stdout: geminiResult(`[API Error: {"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"38s"}]}}]`),
			wait:   38 * time.Second},
		{name: "copilot hours", format: drovertype.FormatCopilotJSON,
			stdout: copilotError("Sorry, you've hit a rate limit that restricts the number of Copilot model requests you can make within a specific time period. Please try again in 15 hours 23 minutes. Please review our Terms of Service (https://docs.github.com/site-policy/github-terms/github-terms-of-service)."),
			wait:   15*time.Hour + 23*time.Minute},
		{name: "pi with Code Assist", format: drovertype.FormatPiJSON,
			stdout: piEnd("Cloud Code Assist API error (429): You have exhausted your capacity on this model. Your quota will reset after 12h34m16s."),
			wait:   12*time.Hour + 34*time.Minute + 16*time.Second},
		{name: "opencode, a claude subscription", format: drovertype.FormatOpenCodeJSON,
			stdout: openCodeError("Claude AI usage limit reached|1749924000"),
			reset:  time.Date(2025, 6, 14, 18, 0, 0, 0, time.UTC)},
		{name: "text, copilot's words", format: drovertype.FormatText,
			stderr: "✗ Sorry, you've hit a rate limit that restricts the number of Copilot model requests you can make within a specific time period. Please try again in 2 hours.",
			wait:   2 * time.Hour},
		{name: "text, claude's words", format: drovertype.FormatText,
			stdout: "You've hit your session limit · resets 12:50pm (America/Los_Angeles)",
			reset:  time.Date(2026, 7, 4, 19, 50, 0, 0, time.UTC)},
	} {
		t.Run(c.name, func(t *testing.T) {
			exit := 1
			s := feedAt(c.format, c.stdout+"\n", c.stderr, exit, c.loc)
			wantFailure(t, s, drovertype.ClassRateLimited, 429, true)
			f := s.Failure
			if f.RetryAfter != c.wait || !f.ResetAt.Equal(c.reset) {
				t.Errorf("RetryAfter = %v, ResetAt = %v; want %v, %v (message %q)", f.RetryAfter, f.ResetAt, c.wait, c.reset, f.Message)
			}
		})
	}
}

// A wait in words that are not a rate limit's is not read: only a
// classified failure carries one.
func TestWaitOnlyOnFailures(t *testing.T) {
	s := feedAt(drovertype.FormatText, "I will try again in 5 minutes\n", "", 1, nil)
	if s.Failure == nil || s.Failure.Class != drovertype.ClassRuntimeError || s.Failure.RetryAfter != 0 || !s.Failure.ResetAt.IsZero() {
		t.Errorf("Failure = %+v, want a RUNTIME_ERROR without a wait", s.Failure)
	}
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

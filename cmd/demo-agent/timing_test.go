package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func loadFor(t *testing.T, cli, name string) *recording {
	t.Helper()
	rec, err := loadRecording(transcriptsPath(t), cli, name, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func sum(ws []time.Duration) time.Duration {
	var s time.Duration
	for _, w := range ws {
		s += w
	}
	return s
}

// At the recorded pace a failed run lasts as long as the recorded one, and
// waits where the CLI waited: gemini's backoff after each retry notice.
func TestRecordedTimeline(t *testing.T) {
	t.Setenv("CLAUDE_CODE_MAX_RETRIES", "") // not a number: no cap
	for _, cli := range []string{"claude", "codex", "opencode", "kilo", "gemini", "pi", "copilot"} {
		for _, cs := range []string{"fail-401", "fail-429"} {
			rec := loadFor(t, cli, cs)
			lines, waits := timeline(cli, rec, 1)
			if len(lines) != len(waits) || len(lines) != strings.Count(rec.stdout+rec.stderr, "\n") {
				t.Errorf("%s/%s: %d lines, %d waits", cli, cs, len(lines), len(waits))
			}
			got, want := sum(waits).Seconds(), readMeta(t, cli, cs).Seconds
			// gemini's source waits (5 s doubling to 30 s) came to less than
			// its recorded time; the rest is spread. Never more, never less.
			if math.Abs(got-want) > 0.01 {
				t.Errorf("%s/%s replays in %.2fs, recorded %.2fs", cli, cs, got, want)
			}
		}
	}
	lines, waits := timeline("gemini", loadFor(t, "gemini", "fail-429"), 1)
	var backoff []time.Duration
	for i, l := range lines[:len(lines)-1] {
		if strings.HasPrefix(l.text, "Attempt ") && strings.Contains(l.text, "Retrying with backoff") {
			backoff = append(backoff, waits[i+1])
		}
	}
	if len(backoff) < 4 || backoff[0] < 5*time.Second || backoff[1] < 10*time.Second || backoff[3] < 30*time.Second {
		t.Errorf("gemini waits after its notices %v, want at least 5s, 10s, 20s, 30s", backoff)
	}
	// N times faster.
	_, fast := timeline("gemini", loadFor(t, "gemini", "fail-429"), 100)
	if got, want := sum(fast), sum(waits)/100; got < want-time.Millisecond || got > want+time.Millisecond {
		t.Errorf("recorded/100 takes %v, want %v", got, want)
	}
}

// CLAUDE_CODE_MAX_RETRIES caps the fake's retries as it caps claude's.
func TestRecordedTimelineClaudeCap(t *testing.T) {
	t.Setenv("CLAUDE_CODE_MAX_RETRIES", "1")
	lines, waits := timeline("claude", loadFor(t, "claude", "fail-429"), 1)
	retries := 0
	for _, l := range lines {
		if strings.Contains(l.text, `"subtype":"api_retry"`) {
			retries++
			if !strings.Contains(l.text, `"max_retries":1,`) {
				t.Errorf("retry line %s", l.text)
			}
		}
	}
	// One retry: its 1 s wait, and one try's share of the rest (1.6 s).
	if total := sum(waits); retries != 1 || total < 2*time.Second || total > 4*time.Second {
		t.Errorf("%d retries in %v, want 1 in about 2.6s", retries, total)
	}
	t.Setenv("CLAUDE_CODE_MAX_RETRIES", "0")
	if lines, _ := timeline("claude", loadFor(t, "claude", "fail-429"), 1); strings.Contains(lines[1].text, "api_retry") {
		t.Errorf("CLAUDE_CODE_MAX_RETRIES=0 still retries: %s", lines[1].text)
	}
}

func TestParsePace(t *testing.T) {
	for v, want := range map[string]struct {
		pace  time.Duration
		scale float64
	}{"10ms": {pace: 10 * time.Millisecond}, "0s": {}, "recorded": {scale: 1}, "recorded/20": {scale: 20}, "recorded/2.5": {scale: 2.5}} {
		pace, scale, err := parsePace(v)
		if err != nil || pace != want.pace || scale != want.scale {
			t.Errorf("parsePace(%q) = %v, %v, %v", v, pace, scale, err)
		}
	}
	for _, v := range []string{"soon", "-1s", "recorded/0", "recorded/0.5", "recorded/x", "recorded20", "recorded/", "recorded/+Inf", "recorded/NaN"} {
		if _, _, err := parsePace(v); err == nil || !strings.Contains(err.Error(), "DEMO_AGENT_PACE") {
			t.Errorf("parsePace(%q): %v", v, err)
		}
	}
}

// The whole persona at the recorded pace, 200 times faster: pi's 429 run
// (23.3 s recorded) takes at least 116 ms.
func TestPersonaRecordedPace(t *testing.T) {
	t.Parallel()
	argv := withPrompt(t, readMeta(t, "pi", "fail-429").Argv, recordedPrompt+"\n@case fail-429")
	start := time.Now()
	o := runCLI(t, t.Context(), cliRun{argv: argv, env: []string{"DEMO_AGENT_PACE=recorded/200"}})
	checkReplay(t, "pi", "fail-429", o)
	if elapsed := time.Since(start); elapsed < 116*time.Millisecond {
		t.Errorf("replay took %v, want at least 116ms", elapsed)
	}
}

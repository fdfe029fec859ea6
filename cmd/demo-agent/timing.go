package main

// Replay at the recorded CLI's pace (DEMO_AGENT_PACE=recorded): a fake
// that retries like the real CLI, for minutes where the real one did, so
// that a test can prove Drover stops it (docs/runtimes.md#their-own-retries).
// The recordings keep each run's wall time (meta.json "seconds") but not
// when each line came; the waits below are what the lines themselves say,
// or what the CLI's source says it waits, and the rest of the recorded
// time is spread before the retry notices.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// line is one line of a replay, stderr's first, as replay plays them.
type line struct {
	text   string
	stderr bool
}

// pacing is one CLI's retry behaviour on a persistent 401 or 429.
type pacing struct {
	// notice reports whether a line is one of the CLI's retry notices.
	notice func(l line) bool
	// after is how long the CLI waits after a line before going on, when
	// the line or the CLI's source says (0: nothing known).
	after func(l line) time.Duration
	// cap drops retry notices past the CLI's own retry limit, when its
	// environment sets one, as the real CLI would make fewer tries.
	cap func(lines []line) []line
	// stamps: the gaps between the lines' ISO timestamps are waits (only
	// where every line has one: gemini's stdout stamps span its stderr's
	// retries, which the replay plays first).
	stamps bool
}

var pacings = map[string]pacing{
	// claude/fail-*/stdout.txt: each api_retry says the wait it chose in
	// retry_delay_ms; CLAUDE_CODE_MAX_RETRIES=N makes N retries (docs/runtimes.md#claude).
	"claude": {
		notice: func(l line) bool { return strings.Contains(l.text, `"subtype":"api_retry"`) },
		after: func(l line) time.Duration {
			return msField(l.text, "retry_delay_ms")
		},
		cap: claudeMaxRetries,
	},
	// codex/fail-*/stdout.txt: "Reconnecting... n/5" errors; no waits stated.
	"codex": {
		notice: func(l line) bool { return strings.Contains(l.text, `"type":"error"`) },
	},
	// opencode and kilo print nothing while they retry: the whole recorded
	// time passes before their error line.
	"opencode": {notice: func(line) bool { return false }},
	"kilo":     {notice: func(line) bool { return false }},
	// gemini/fail-429/stderr.txt: "Attempt N failed with status 429. Retrying
	// with backoff..."; gemini-cli's retryWithBackoff waits 5 s, doubling,
	// at most 30 s (packages/core/src/utils/retry.ts, jitter left out).
	"gemini": {
		notice: func(l line) bool { return l.stderr && geminiAttempt.MatchString(l.text) },
		after: func(l line) time.Duration {
			m := geminiAttempt.FindStringSubmatch(l.text)
			if m == nil || !strings.Contains(l.text, "Retrying with backoff") {
				return 0
			}
			n, _ := strconv.Atoi(m[1])
			return min(5*time.Second*time.Duration(math.Pow(2, float64(min(n, 8)-1))), 30*time.Second)
		},
	},
	// pi/fail-429/stdout.txt: auto_retry_start says its wait in delayMs.
	"pi": {
		notice: func(l line) bool { return strings.Contains(l.text, `"type":"auto_retry_start"`) },
		after:  func(l line) time.Duration { return msField(l.text, "delayMs") },
	},
	// copilot/fail-*/stdout.txt: every line carries its ISO timestamp.
	"copilot": {
		notice: func(l line) bool { return strings.Contains(l.text, `"type":"model.call_failure"`) },
		stamps: true,
	},
}

var geminiAttempt = regexp.MustCompile(`^Attempt (\d+) failed`)

// msField reads a number of milliseconds from a JSON line's field.
func msField(text, field string) time.Duration {
	var m map[string]any
	if json.Unmarshal([]byte(text), &m) != nil {
		return 0
	}
	ms, ok := m[field].(float64)
	if !ok || !(ms > 0) || ms > 3600e3 {
		return 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// claudeMaxRetries keeps the first CLAUDE_CODE_MAX_RETRIES api_retry
// lines, saying so in their max_retries.
func claudeMaxRetries(lines []line) []line {
	v, ok := os.LookupEnv("CLAUDE_CODE_MAX_RETRIES")
	n, err := strconv.Atoi(v)
	if !ok || err != nil || n < 0 {
		return lines
	}
	var out []line
	kept := 0
	for _, l := range lines {
		if strings.Contains(l.text, `"subtype":"api_retry"`) {
			if kept == n {
				continue
			}
			kept++
			l.text = maxRetries.ReplaceAllString(l.text, `"max_retries":`+strconv.Itoa(n))
		}
		out = append(out, l)
	}
	return out
}

var maxRetries = regexp.MustCompile(`"max_retries":\d+`)

// isoStamp finds a line's ISO timestamp (copilot, gemini's stdout).
var isoStamp = regexp.MustCompile(`"timestamp":"(\d{4}-\d\d-\d\dT[0-9:.]+Z)"`)

// timeline returns the replay's lines, capped as the CLI's environment
// says, and the wait before each: what the lines and the CLI say, the
// gaps between their timestamps, and the rest of the recorded seconds
// spread evenly before the retry notices (before the first line when the
// CLI prints none: it printed nothing until it gave up). scale divides
// every wait.
func timeline(cli string, rec *recording, scale float64) ([]line, []time.Duration) {
	var lines []line
	for l := range strings.Lines(rec.stderr) {
		lines = append(lines, line{text: l, stderr: true})
	}
	for l := range strings.Lines(rec.stdout) {
		lines = append(lines, line{text: l})
	}
	p, ok := pacings[cli]
	if !ok || len(lines) == 0 {
		return lines, make([]time.Duration, len(lines))
	}
	total := time.Duration(rec.seconds * float64(time.Second))
	known, notices := waits(p, lines)
	var sum time.Duration
	for _, w := range known {
		sum += w
	}
	rest := max(total-sum, 0)
	if p.cap != nil {
		// The rest is the time each try took; a capped CLI makes fewer.
		perNotice := rest
		if notices > 0 {
			perNotice = rest / time.Duration(notices)
		}
		lines = p.cap(lines)
		known, notices = waits(p, lines)
		rest = perNotice * time.Duration(max(notices, 1))
	}
	out := make([]time.Duration, len(lines))
	copy(out, known)
	switch {
	case notices == 0:
		// kilo/fail-*: its stderr "Error:" and stdout error line come together, at the end.
		out[0] += rest
	default:
		for i, l := range lines {
			if p.notice(l) {
				out[i] += rest / time.Duration(notices)
			}
		}
	}
	if scale > 1 {
		for i := range out {
			out[i] = time.Duration(float64(out[i]) / scale)
		}
	}
	return lines, out
}

// waits is the known wait before each line, and the number of notices.
func waits(p pacing, lines []line) ([]time.Duration, int) {
	out := make([]time.Duration, len(lines))
	notices := 0
	var last time.Time
	for i, l := range lines {
		if p.notice(l) {
			notices++
		}
		if m := isoStamp.FindStringSubmatch(l.text); p.stamps && m != nil {
			if t, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
				if !last.IsZero() && t.After(last) {
					out[i] += t.Sub(last)
				}
				last = t
			}
		}
		if p.after != nil && i+1 < len(lines) {
			out[i+1] += p.after(l)
		}
	}
	return out, notices
}

// parsePace reads DEMO_AGENT_PACE: a Go duration between lines, or
// "recorded" (the recorded CLI's pace), optionally "recorded/N", N times
// faster.
func parsePace(v string) (pace time.Duration, scale float64, err error) {
	if rest, ok := strings.CutPrefix(v, "recorded"); ok {
		scale = 1
		if rest != "" {
			n, err := strconv.ParseFloat(strings.TrimPrefix(rest, "/"), 64)
			if !strings.HasPrefix(rest, "/") || err != nil || !(n >= 1) || math.IsInf(n, 0) {
				return 0, 0, fmt.Errorf("DEMO_AGENT_PACE=%s: want recorded or recorded/N with N ≥ 1", v)
			}
			scale = n
		}
		return 0, scale, nil
	}
	pace, err = time.ParseDuration(v)
	if err != nil || pace < 0 {
		return 0, 0, fmt.Errorf("DEMO_AGENT_PACE=%s: want a Go duration such as 10ms, or recorded", v)
	}
	return pace, 0, nil
}

package attempt

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

// Bounds of a review prompt and of a verdict.
const (
	maxDiffInReview   = 64 << 10
	maxCheckInReview  = 8 << 10
	maxTaskInReview   = 32 << 10
	maxVerdictReasons = 20
	maxVerdictReason  = 500
)

// ReviewPrompt is what a validator runtime is asked: the task, the output
// of the checks that ran, and the attempt's diff. The task and the check
// output are quoted with "> " on every line, so nothing in them starts a
// line of the prompt (the demo agent, for one, acts on lines starting with
// '@'); the diff is given raw inside a diff fence, cut to its head and
// tail when long. The answer format is stated before the material.
func ReviewPrompt(task, diff string, checks []event.CommandResult) string {
	var b strings.Builder
	b.WriteString(`You are reviewing the work another coding agent did on a task in this repository (your working directory holds its result). Do not change any file: only read, and judge.

Decide whether the change accomplishes the task correctly and completely, and does nothing harmful or unrelated.

## Answer format

End your answer with a line that is exactly ` + "`VERDICT: PASS`" + ` or exactly ` + "`VERDICT: FAIL`" + ` (without the backticks), followed by one line per reason, each starting with "- " (at most 20 reasons, one line each). Nothing else may follow the reasons.

## The task

`)
	b.WriteString(quote(clipMiddle(task, maxTaskInReview)))
	b.WriteString("\n## Checks\n\n")
	if len(checks) == 0 {
		b.WriteString("No verification commands were run.\n")
	}
	for _, c := range checks {
		status := fmt.Sprintf("exited %d", c.ExitCode)
		if c.TimedOut {
			status = "timed out"
		}
		fmt.Fprintf(&b, "Command %s %s. Its output:\n\n", quoteInline(c.Command), status)
		out := c.Output
		if strings.TrimSpace(out) == "" {
			out = "(no output)"
		}
		b.WriteString(quote(clipMiddle(out, maxCheckInReview)))
		b.WriteString("\n")
	}
	b.WriteString("## The change (unified diff against the starting point)\n\n")
	if strings.TrimSpace(diff) == "" {
		b.WriteString("The change is empty: no file was changed.\n")
		return b.String()
	}
	d := clipMiddle(diff, maxDiffInReview)
	if !strings.HasSuffix(d, "\n") {
		d += "\n"
	}
	fence := "```"
	for strings.Contains(d, fence) {
		fence += "`"
	}
	b.WriteString(fence + "diff\n" + d + fence + "\n")
	return b.String()
}

// quote prefixes every line of s with "> ".
func quote(s string) string {
	s = strings.TrimRight(s, "\n")
	var b strings.Builder
	for line := range strings.Lines(s + "\n") {
		b.WriteString("> " + line)
	}
	return b.String()
}

// quoteInline puts a one-line command between backticks.
func quoteInline(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	return fence + s + fence
}

// clipMiddle keeps the head and tail of s within n bytes, on line
// boundaries where it can.
func clipMiddle(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head, tail := s[:n/2], s[len(s)-n/2:]
	if i := strings.LastIndexByte(head, '\n'); i > 0 {
		head = head[:i+1]
	}
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
		tail = tail[i+1:]
	}
	head, tail = strings.ToValidUTF8(head, ""), strings.ToValidUTF8(tail, "")
	if !strings.HasSuffix(head, "\n") {
		head += "\n"
	}
	return fmt.Sprintf("%s[… %d bytes omitted …]\n%s", head, len(s)-len(head)-len(tail), tail)
}

var verdictLine = regexp.MustCompile(`(?i)^\s*VERDICT:\s*(PASS|FAIL)\s*$`)

// ErrNoVerdict is returned by ParseVerdict for an answer without a verdict.
var ErrNoVerdict = errors.New("the validator's answer has no VERDICT: PASS or VERDICT: FAIL line")

// ParseVerdict reads a validator's answer: the LAST line that is
// "VERDICT: PASS" or "VERDICT: FAIL" (any case, blanks around) decides, and
// the lines after it starting with "- " are the reasons (at most 20, each
// cut to 500 bytes). An answer without a verdict line is an error.
func ParseVerdict(text string) (passed bool, reasons []string, err error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	at := -1
	for i := len(lines) - 1; i >= 0; i-- {
		if m := verdictLine.FindStringSubmatch(lines[i]); m != nil {
			at, passed = i, strings.EqualFold(m[1], "PASS")
			break
		}
	}
	if at < 0 {
		return false, nil, ErrNoVerdict
	}
	for _, l := range lines[at+1:] {
		l = strings.TrimSpace(l)
		r, ok := strings.CutPrefix(l, "- ")
		if !ok {
			continue
		}
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		if len(reasons) == maxVerdictReasons {
			break
		}
		reasons = append(reasons, clipBytes(r, maxVerdictReason))
	}
	return passed, reasons, nil
}

// clipBytes cuts s to at most n bytes without splitting a rune.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

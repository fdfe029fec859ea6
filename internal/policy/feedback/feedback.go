package feedback

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/drover-dev/drover/internal/drovertype"
)

// MaxSection bounds what ComposePrompt appends to the prompt, in bytes.
const MaxSection = 16 << 10

// Bounds of the single-line parts of the section, so that the quoted blocks
// always keep most of MaxSection.
const (
	maxName     = 128 // runtime names, the class
	maxInline   = 512 // a one-line error message kept on its line
	maxCommand  = 200 // a verification command
	maxCommands = 10  // failed verification commands shown
	minBlock    = 256 // the least a quoted block is given
)

// Feedback is what a failed attempt tells the next one.
type Feedback struct {
	// N is the failed attempt's number, Runtime the runtime it ran on.
	N       int
	Runtime string
	// Class and Message are its classified error.
	Class   drovertype.ErrorClass
	Message string
	// StderrTail is the end of the CLI's stderr.
	StderrTail string
	// Verification is what the checks after the run found, if any ran.
	Verification *event.Verification
	// ScopeViolations are changed paths outside the task's scope.
	ScopeViolations []string
}

// FeedbackFrom builds Feedback from a failed attempt's number, runtime, its
// classified error (may be nil: the report's error is used) and report (may
// be nil). The Verification is shared with the report, not copied.
func FeedbackFrom(n int, runtime string, e *event.ErrorInfo, r *event.Report) Feedback {
	fb := Feedback{N: n, Runtime: runtime}
	if e == nil && r != nil {
		e = r.Error
	}
	if e != nil {
		fb.Class, fb.Message = e.Class, e.Message
	}
	if r != nil {
		fb.StderrTail = r.StderrTail
		fb.Verification = r.Verification
		var fromVerify []string
		if r.Verification != nil {
			fromVerify = r.Verification.ScopeViolations
		}
		fb.ScopeViolations = union(r.ScopeViolations, fromVerify)
	}
	return fb
}

// union is a followed by the elements of b not in a, without duplicates.
func union(a, b []string) []string {
	var out []string
	seen := make(map[string]bool, len(a)+len(b))
	for _, s := range slices.Concat(a, b) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// ComposePrompt returns the task prompt, unchanged, followed by a section
// about the previous attempt:
//
//	<prompt>
//
//	## Feedback from attempt 1 (claude)
//	The previous attempt failed: VERIFICATION_FAILED: `go test ./...` exited 1
//	Verification output of `go test ./...` (exit 1):
//	> --- FAIL: TestX ...
//	Scope violations (changes outside the allowed paths were discarded):
//	> secrets/key.txt
//	Review by codex: FAIL
//	> - missing tests
//	Stderr (tail):
//	> ...
//	Fix these problems; start again from the task above.
//
// Only fb is described: the caller passes the latest failure. Every line of
// quoted material is prefixed with "> "; every other line starts with fixed
// text. The section is at most MaxSection bytes: a quoted block too long for
// its share keeps its head and tail around a "… N bytes elided …" line. A
// nil fb returns prompt unchanged.
func ComposePrompt(prompt string, fb *Feedback) string {
	if fb == nil {
		return prompt
	}
	var s section

	head := "## Feedback from attempt " + strconv.Itoa(fb.N)
	if fb.Runtime != "" {
		head += " (" + oneLine(fb.Runtime, maxName) + ")"
	}
	s.line(head)

	failed := "The previous attempt failed"
	if fb.Class != "" {
		failed += ": " + oneLine(string(fb.Class), maxName)
	}
	msg := trimNewlines(clean(fb.Message))
	switch {
	case msg == "":
		s.line(failed + ".")
	case !strings.Contains(msg, "\n") && len(msg) <= maxInline:
		s.line(failed + ": " + msg)
	default:
		s.line(failed + ":")
		s.quote(msg)
	}

	v := fb.Verification
	if v == nil {
		v = &event.Verification{}
	}
	var shown, more int
	for _, c := range v.Commands {
		if c.ExitCode == 0 && !c.TimedOut {
			continue
		}
		if shown == maxCommands {
			more++
			continue
		}
		shown++
		how := "exit " + strconv.Itoa(c.ExitCode)
		if c.TimedOut {
			how = "timed out"
		}
		s.line("Verification output of `" + oneLine(c.Command, maxCommand) + "` (" + how + "):")
		s.quote(cmp.Or(trimNewlines(clean(c.Output)), "(no output)"))
	}
	if more > 0 {
		s.line(strconv.Itoa(more) + " more failed verification commands are not shown.")
	}
	if paths := union(fb.ScopeViolations, v.ScopeViolations); len(paths) > 0 {
		s.line("Scope violations (changes outside the allowed paths were discarded):")
		s.quote(trimNewlines(clean(strings.Join(paths, "\n"))))
	}
	if rv := v.Review; rv != nil {
		who := "Review"
		if rv.Runtime != "" {
			who += " by " + oneLine(rv.Runtime, maxName)
		}
		switch {
		case rv.Error != "":
			s.line(who + ": no verdict")
			s.quote(trimNewlines(clean(rv.Error)))
		case !rv.Passed:
			s.line(who + ": FAIL")
			if len(rv.Reasons) > 0 {
				var b strings.Builder
				for i, r := range rv.Reasons {
					if i > 0 {
						b.WriteByte('\n')
					}
					// Continuation lines of a reason are indented under
					// its bullet.
					b.WriteString("- " + strings.ReplaceAll(trimNewlines(clean(r)), "\n", "\n  "))
				}
				s.quote(b.String())
			}
		}
	}
	if tail := trimNewlines(clean(fb.StderrTail)); strings.TrimSpace(tail) != "" {
		s.line("Stderr (tail):")
		s.quote(tail)
	}
	s.line("Fix these problems; start again from the task above.")

	sep := "\n" // a blank line between the prompt and the section
	if !strings.HasSuffix(prompt, "\n") {
		sep = "\n\n"
	}
	return prompt + sep + s.render(MaxSection-len(sep))
}

// section is the feedback as fixed lines and quoted blocks, in order.
type section struct {
	parts []part
}

type part struct {
	text  string // a fixed line, or a block's content before quoting
	quote bool
}

func (s *section) line(text string)  { s.parts = append(s.parts, part{text: text}) }
func (s *section) quote(text string) { s.parts = append(s.parts, part{text: text, quote: true}) }

// render writes the section in at most budget bytes: the fixed lines as
// they are (they are bounded), and each quoted block in its share of the
// rest.
func (s *section) render(budget int) string {
	var blocks []int // indexes of the quoted parts
	for i, p := range s.parts {
		if p.quote {
			blocks = append(blocks, i)
		} else {
			budget -= len(p.text) + 1
		}
	}
	quotas := share(budget, blocks, func(i int) int { return quotedSize(s.parts[i].text) })
	var b strings.Builder
	for i, p := range s.parts {
		if !p.quote {
			b.WriteString(p.text)
			b.WriteByte('\n')
			continue
		}
		for line := range strings.SplitSeq(fit(p.text, quotas[i]), "\n") {
			b.WriteString("> ")
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// share divides budget among the blocks: blocks that fit in an equal share
// keep all they need, and the rest split what is left equally. Ties break
// by position, so the division is deterministic.
func share(budget int, blocks []int, size func(int) int) map[int]int {
	quotas := make(map[int]int, len(blocks))
	order := slices.Clone(blocks)
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(size(a), size(b)) })
	for n, i := range order {
		fair := max(budget/(len(order)-n), minBlock)
		q := min(size(i), fair)
		quotas[i] = q
		budget -= q
	}
	return quotas
}

// quotedSize is the length of s once every line is prefixed with "> " and
// ended with "\n".
func quotedSize(s string) int {
	lines := strings.Count(s, "\n") + 1
	return len(s) + 2*lines + 1
}

// fit returns s, or s with its middle replaced by an elision line, so that
// it quotes to at most quota bytes (quota is never below minBlock).
func fit(s string, quota int) string {
	if quotedSize(s) <= quota {
		return s
	}
	keep := min(quota, len(s))
	for keep > 0 {
		e := elide(s, keep)
		size := quotedSize(e)
		if size <= quota {
			return e
		}
		// Scale keep down by the overflow, less a small margin for the
		// marker's digits: this strictly decreases keep and fits in a
		// round or two both text with few newlines and text that is
		// mostly newlines, whose quoting triples it.
		keep = int(int64(keep)*int64(quota)/int64(size)) - 2
	}
	return marker(len(s))
}

// elide keeps about keep bytes of s, half from its head and half from its
// tail, cut at rune boundaries, around a marker line.
func elide(s string, keep int) string {
	h := keep / 2
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	t := max(len(s)-(keep-keep/2), h)
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return s[:h] + "\n" + marker(t-h) + "\n" + s[t:]
}

func marker(n int) string { return "… " + strconv.Itoa(n) + " bytes elided …" }

// clean makes untrusted text safe to quote: valid UTF-8, without '\r' and
// NUL, with the Unicode line and paragraph separators (and NEL) turned into
// '\n' so that a reader splitting on them still sees every line quoted, and
// vertical tabs and form feeds turned into spaces.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '\r', 0:
			return -1
		case '\u2028', '\u2029', '\u0085':
			return '\n'
		case '\v', '\f':
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// trimNewlines drops blank lines at both ends of s.
func trimNewlines(s string) string {
	s = strings.TrimRight(s, " \t\n")
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 || strings.TrimLeft(s[:i], " \t") != "" {
			return s
		}
		s = s[i+1:]
	}
}

// oneLine is untrusted text for a fixed line: cleaned, on one line, and at
// most max bytes (cut at a rune boundary, marked with "…").
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(clean(s)), " ")
	if len(s) <= max {
		return s
	}
	n := max - len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

package feedback

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

// Round is what a review round tells its task: the pull request, the
// reviews that requested changes with their line comments, the checks of
// its head that failed with their logs, and an operator's words. Like a
// retry's feedback, all of it is untrusted text.
type Round struct {
	N      int    // the round
	Number int    // the pull request's number
	URL    string // its page
	// Files limits the review comments to those on these paths (a round
	// split by file); nil keeps them all.
	Files    []string
	Reviews  []event.ReviewFeedback
	Checks   []event.CheckFeedback
	Operator []string
}

// maxComments bounds the review comments shown.
const maxComments = 50

// ComposeRound returns a round task's prompt: instructions (the flow's
// iterate.prompt, as written) and a fixed introduction, then the feedback
// section, built and bounded as ComposePrompt builds a retry's:
//
//	This branch is pull request #7 (https://…). Make the changes its
//	review and checks ask for on this branch; commit them.
//
//	## Feedback on pull request #7, round 1
//	Review by dave: changes requested
//	> not yet
//	Comment by dave on internal/x/x.go line 42:
//	> handle the error
//	Check test: failure
//	> 2 tests failed
//	Log of test (tail):
//	> --- FAIL: TestX
//	Address each point above; start from the branch as it is.
func ComposeRound(instructions string, r *Round) string {
	var s section
	s.line("## Feedback on pull request #" + strconv.Itoa(r.Number) + ", round " + strconv.Itoa(r.N))
	comments := 0
	for _, rv := range r.Reviews {
		s.line("Review by " + cmp.Or(oneLine(rv.Author, maxName), "a reviewer") + ": changes requested")
		if body := trimNewlines(clean(rv.Body)); strings.TrimSpace(body) != "" {
			s.quote(body)
		}
		for _, c := range rv.Comments {
			if r.Files != nil && !slices.Contains(r.Files, c.Path) {
				continue
			}
			if comments == maxComments {
				comments++
				continue
			}
			comments++
			s.line(commentLine(c))
			s.quote(cmp.Or(trimNewlines(clean(c.Body)), "(empty)"))
		}
	}
	if comments > maxComments {
		s.line(strconv.Itoa(comments-maxComments) + " more review comments are not shown.")
	}
	for _, c := range r.Checks {
		s.line("Check " + cmp.Or(oneLine(c.Name, maxCommand), "(unnamed)") + ": " + cmp.Or(oneLine(c.Conclusion, maxName), "failed"))
		if sum := trimNewlines(clean(c.Summary)); strings.TrimSpace(sum) != "" {
			s.quote(sum)
		}
		if tail := trimNewlines(clean(c.LogTail)); strings.TrimSpace(tail) != "" {
			s.line("Log of " + cmp.Or(oneLine(c.Name, maxCommand), "the check") + " (tail):")
			s.quote(tail)
		}
	}
	for _, m := range r.Operator {
		if msg := trimNewlines(clean(m)); strings.TrimSpace(msg) != "" {
			s.line("From the operator:")
			s.quote(msg)
		}
	}
	s.line("Address each point above; start from the branch as it is.")

	var b strings.Builder
	if in := strings.TrimRight(instructions, "\n"); in != "" {
		b.WriteString(in)
		b.WriteString("\n\n")
	}
	b.WriteString("This branch is pull request #" + strconv.Itoa(r.Number))
	if r.URL != "" {
		b.WriteString(" (" + oneLine(r.URL, maxInline) + ")")
	}
	b.WriteString(". Make the changes its review and checks ask for on this branch; commit them.\n\n")
	return b.String() + s.render(MaxSection)
}

// commentLine is the fixed line before a review comment: who, which file
// and line.
func commentLine(c event.ReviewComment) string {
	line := "Comment"
	if c.Author != "" {
		line += " by " + oneLine(c.Author, maxName)
	}
	if c.Path != "" {
		line += " on " + oneLine(c.Path, maxCommand)
		if c.Line > 0 {
			line += " line " + strconv.Itoa(c.Line)
		}
	}
	return line + ":"
}

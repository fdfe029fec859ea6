package main

// Review mode (--review): demo-agent plays a validator. The prompt Drover
// gives a validator holds the task, the attempt's diff and the output of
// its checks; the answer is a "VERDICT: PASS" or "VERDICT: FAIL" line
// followed by reason lines starting with "- ". The verdict is decided by
// the diff alone, deterministically, so tests can script it:
//
//   - no "diff --git" line at all: FAIL, the change is empty;
//   - REJECT anywhere after the first "diff --git" line: FAIL, naming the
//     file of the diff it appears in;
//   - otherwise PASS, counting the files changed.
//
// Directives are not run: the prompt quotes the task, directives and all.
// The answer is printed as plain text (the demo-review runtime reads its
// output as text), or as stream-json with --output-format stream-json.

import (
	"fmt"
	"strings"
)

// rejectToken in the diff makes the review fail.
const rejectToken = "REJECT"

// reviewAnswer is the validator's whole answer to prompt: a sentence of
// preamble, as a model would write, then the verdict and its reasons.
func reviewAnswer(prompt string) string {
	pass, reasons := reviewVerdict(prompt)
	verdict := "FAIL"
	if pass {
		verdict = "PASS"
	}
	var b strings.Builder
	b.WriteString("Reviewed the change.\n\nVERDICT: " + verdict + "\n")
	for _, r := range reasons {
		b.WriteString("- " + r + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// reviewVerdict judges the diff in prompt; reasons come without the "- ".
func reviewVerdict(prompt string) (pass bool, reasons []string) {
	files := 0     // "diff --git" lines seen
	file := ""     // the file of the diff being read
	rejectAt := "" // where REJECT was first seen
	found := false
	for line := range strings.Lines(prompt) {
		line = strings.TrimLeft(strings.TrimRight(line, "\r\n"), " \t")
		inDiff := files > 0
		switch {
		case strings.HasPrefix(line, "diff --git"):
			files++
			file = diffGitPath(line)
		case strings.HasPrefix(line, "+++ b/"):
			file = plusPath(line)
		}
		if inDiff && !found && strings.Contains(line, rejectToken) {
			found, rejectAt = true, file
		}
	}
	switch {
	case files == 0:
		return false, []string{"the change is empty"}
	case found:
		if rejectAt == "" {
			rejectAt = "an unknown file"
		}
		return false, []string{"the diff contains " + rejectToken + " at " + rejectAt}
	}
	return true, []string{fmt.Sprintf("looks good: %d files changed", files)}
}

// diffGitPath is the new path of a "diff --git a/OLD b/NEW" line, or "".
func diffGitPath(line string) string {
	if i := strings.LastIndex(line, " b/"); i >= 0 {
		return strings.TrimSpace(line[i+len(" b/"):])
	}
	return ""
}

// plusPath is the path of a "+++ b/PATH" line; git ends it with a tab when
// the path has blanks.
func plusPath(line string) string {
	p, _, _ := strings.Cut(strings.TrimPrefix(line, "+++ b/"), "\t")
	return strings.TrimSpace(p)
}

// reviewRun prints the answer to a review prompt: as plain text, or with
// streamJSON as a Claude stream-json run (init, one assistant text holding
// the answer, and a result line whose "result" is the answer too). A FAIL
// verdict is still a successful run: exit 0.
func reviewRun(out *stream, cwd, prompt, model string, streamJSON bool) int {
	answer := reviewAnswer(prompt)
	if !streamJSON {
		out.raw([]byte(answer + "\n"))
		return exitOK
	}
	out.emit(initEvent{
		Type: "system", Subtype: "init", CWD: cwd, SessionID: out.session,
		Model: model, Tools: []string{"Write", "Edit", "Bash"},
	})
	out.inputBytes = len(prompt)
	out.text(answer)
	out.result(false, answer)
	return exitOK
}

package feedback

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/drover-dev/drover/internal/drovertype"
)

// checkSafe fails unless out is prompt followed by a section in which no
// line starts with optional whitespace and then '@', the section is valid
// UTF-8 without '\r' or NUL, and it is at most MaxSection bytes.
func checkSafe(t testing.TB, prompt, out string) {
	t.Helper()
	if !strings.HasPrefix(out, prompt) {
		t.Fatalf("output does not start with the prompt %q:\n%s", prompt, out)
	}
	sec := out[len(prompt):]
	if len(sec) > MaxSection {
		t.Errorf("section is %d bytes, more than %d", len(sec), MaxSection)
	}
	if !utf8.ValidString(sec) {
		t.Errorf("section is not valid UTF-8")
	}
	if strings.ContainsAny(sec, "\r\x00") {
		t.Errorf("section contains \\r or NUL")
	}
	if utf8.ValidString(prompt) && !utf8.ValidString(out) {
		t.Errorf("output is not valid UTF-8")
	}
	for i, line := range strings.Split(sec, "\n") {
		if strings.HasPrefix(strings.TrimLeftFunc(line, unicode.IsSpace), "@") {
			t.Fatalf("section line %d starts with '@': %q\nsection:\n%s", i, line, sec)
		}
		// Lines split by any Unicode line break are safe too.
		for _, sub := range strings.FieldsFunc(line, func(r rune) bool { return r == '\u2028' || r == '\u2029' || r == '\u0085' || r == '\v' || r == '\f' }) {
			if strings.HasPrefix(strings.TrimLeftFunc(sub, unicode.IsSpace), "@") && sub != line {
				t.Fatalf("section line %d hides an '@' line after a Unicode line break: %q", i, line)
			}
		}
	}
}

func TestComposePromptGolden(t *testing.T) {
	fb := FeedbackFrom(1, "claude",
		&event.ErrorInfo{Class: "VERIFICATION_FAILED", Message: "`go test ./...` exited 1"},
		&event.Report{
			StderrTail:      "warning: something\r\n@exit 3\n",
			ScopeViolations: []string{"secrets/key.txt"},
			Verification: &event.Verification{
				Commands: []event.CommandResult{
					{Command: "go vet ./...", ExitCode: 0, Output: "ok"},
					{Command: "go test ./...", ExitCode: 1, Output: "--- FAIL: TestX (0.00s)\n    x_test.go:9: got 1\nFAIL\n"},
					{Command: "make lint", TimedOut: true, ExitCode: -1},
				},
				Review:          &event.ReviewResult{Runtime: "codex", Reasons: []string{"missing tests", "error handling\n@exit 3"}},
				ScopeViolations: []string{"secrets/key.txt", "bin/tool"},
			},
		})
	const want = "Fix the parser.\n" +
		"\n" +
		"## Feedback from attempt 1 (claude)\n" +
		"The previous attempt failed: VERIFICATION_FAILED: `go test ./...` exited 1\n" +
		"Verification output of `go test ./...` (exit 1):\n" +
		"> --- FAIL: TestX (0.00s)\n" +
		">     x_test.go:9: got 1\n" +
		"> FAIL\n" +
		"Verification output of `make lint` (timed out):\n" +
		"> (no output)\n" +
		"Scope violations (changes outside the allowed paths were discarded):\n" +
		"> secrets/key.txt\n" +
		"> bin/tool\n" +
		"Review by codex: FAIL\n" +
		"> - missing tests\n" +
		"> - error handling\n" +
		">   @exit 3\n" +
		"Stderr (tail):\n" +
		"> warning: something\n" +
		"> @exit 3\n" +
		"Fix these problems; start again from the task above.\n"
	got := ComposePrompt("Fix the parser.\n", &fb)
	if got != want {
		t.Errorf("ComposePrompt:\n%s\nwant:\n%s", got, want)
	}
	checkSafe(t, "Fix the parser.\n", got)
	// A prompt without a final newline gets one, then the blank line.
	if got := ComposePrompt("Fix the parser.", &fb); got != want[:len("Fix the parser.")]+want[len("Fix the parser."):] {
		t.Errorf("without final newline:\n%s", got)
	}
	if again := ComposePrompt("Fix the parser.\n", &fb); again != got {
		t.Error("ComposePrompt is not deterministic")
	}
}

func TestComposePromptSmall(t *testing.T) {
	tests := []struct {
		name string
		fb   Feedback
		want string // the section after "P\n\n"
	}{
		{"bare", Feedback{N: 2}, "## Feedback from attempt 2\nThe previous attempt failed.\nFix these problems; start again from the task above.\n"},
		{"class only", Feedback{N: 1, Runtime: "codex", Class: "RUNTIME_CRASHED"},
			"## Feedback from attempt 1 (codex)\nThe previous attempt failed: RUNTIME_CRASHED.\nFix these problems; start again from the task above.\n"},
		{"multi-line message is quoted", Feedback{N: 1, Class: "RUNTIME_ERROR", Message: "exit 2\n@exit 3\n\n"},
			"## Feedback from attempt 1\nThe previous attempt failed: RUNTIME_ERROR:\n> exit 2\n> @exit 3\nFix these problems; start again from the task above.\n"},
		{"message without class", Feedback{N: 1, Message: "boom"},
			"## Feedback from attempt 1\nThe previous attempt failed: boom\nFix these problems; start again from the task above.\n"},
		{"hostile names stay on their line", Feedback{N: 1, Runtime: "cl\naude\n@exit 3", Class: "X\n@exit 3"},
			"## Feedback from attempt 1 (cl aude @exit 3)\nThe previous attempt failed: X @exit 3.\nFix these problems; start again from the task above.\n"},
		{"review without verdict", Feedback{N: 3, Class: "VERIFICATION_FAILED", Verification: &event.Verification{Review: &event.ReviewResult{Runtime: "codex", Error: "validator crashed\n@exit 1"}}},
			"## Feedback from attempt 3\nThe previous attempt failed: VERIFICATION_FAILED.\nReview by codex: no verdict\n> validator crashed\n> @exit 1\nFix these problems; start again from the task above.\n"},
		{"passed review and commands are not mentioned", Feedback{N: 1, Class: "SCOPE_VIOLATION", ScopeViolations: []string{"a"}, Verification: &event.Verification{
			Commands: []event.CommandResult{{Command: "true", Output: "fine"}}, Review: &event.ReviewResult{Runtime: "codex", Passed: true, Reasons: []string{"nice"}}, ScopeViolations: []string{"a", "b"}}},
			"## Feedback from attempt 1\nThe previous attempt failed: SCOPE_VIOLATION.\nScope violations (changes outside the allowed paths were discarded):\n> a\n> b\nFix these problems; start again from the task above.\n"},
		{"blank stderr is dropped", Feedback{N: 1, StderrTail: " \n\r\n"}, "## Feedback from attempt 1\nThe previous attempt failed.\nFix these problems; start again from the task above.\n"},
		{"control and invalid bytes", Feedback{N: 1, StderrTail: "a\x00b\rc\xffd\u2028@exit 3\ve\ff"},
			"## Feedback from attempt 1\nThe previous attempt failed.\nStderr (tail):\n> abc\uFFFDd\n> @exit 3 e f\nFix these problems; start again from the task above.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ComposePrompt("P", &tt.fb)
			if got != "P\n\n"+tt.want {
				t.Errorf("got:\n%s\nwant:\nP\n\n%s", got, tt.want)
			}
			checkSafe(t, "P", got)
		})
	}
	if got := ComposePrompt("P\n@exit 3", nil); got != "P\n@exit 3" {
		t.Errorf("nil feedback changed the prompt: %q", got)
	}
}

// hostile is text full of directive lines in every disguise.
func hostile(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "@exit 3\n  @exit 3\n\t@exit %d\r\n\r@exit 3\n\x00@exit 3\n\u2028@exit 3\n\u00a0@exit 3\n", i)
	}
	return b.String()
}

func TestComposePromptAtLinesAreQuoted(t *testing.T) {
	h := hostile(20)
	prompt := "Do the thing.\n@exit 0\n" // the prompt's own directives are kept
	var cmds []event.CommandResult
	for i := range 15 {
		cmds = append(cmds, event.CommandResult{Command: "@exit 3\n@exit 4", ExitCode: i + 1, Output: h})
	}
	fb := Feedback{
		N: 1, Runtime: "@exit 3\n@exit 3", Class: "@exit 3\n@exit 3", Message: h,
		StderrTail:      h,
		ScopeViolations: strings.Split(h, "\n"),
		Verification: &event.Verification{
			Commands:        cmds,
			Review:          &event.ReviewResult{Runtime: "\n@exit 3", Reasons: strings.Split(h, "\n")},
			ScopeViolations: []string{"@exit 9", "\n@exit 9"},
		},
	}
	out := ComposePrompt(prompt, &fb)
	checkSafe(t, prompt, out)
	if !strings.Contains(out, "> @exit 3\n") {
		t.Errorf("directives were not quoted (or were dropped):\n%s", out)
	}
	if !strings.Contains(out, "5 more failed verification commands are not shown.") {
		t.Error("the failed commands past the tenth are not counted")
	}
	// With the review's error instead.
	fb.Verification.Review = &event.ReviewResult{Runtime: "codex", Error: h}
	checkSafe(t, prompt, ComposePrompt(prompt, &fb))
}

func TestComposePromptBound(t *testing.T) {
	head, tail := "HEAD-OF-STDERR\n", "\nTAIL-OF-STDERR"
	big := head + strings.Repeat("lorem ipsum dolor sit amet ", 20000) + tail
	out := ComposePrompt("P", &Feedback{N: 1, Class: "RUNTIME_ERROR", StderrTail: big})
	checkSafe(t, "P", out)
	sec := out[1:]
	if len(sec) < MaxSection-200 {
		t.Errorf("a single big block uses only %d of %d bytes", len(sec), MaxSection)
	}
	for _, want := range []string{"> HEAD-OF-STDERR\n", "> TAIL-OF-STDERR\n", " bytes elided …\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("bounded output lacks %q", want)
		}
	}

	// Every block big, many of them, some mostly newlines (quoting triples
	// them) or multi-byte runes (cuts must fall between runes).
	var cmds []event.CommandResult
	for range 12 {
		cmds = append(cmds, event.CommandResult{Command: strings.Repeat("c", 1000), ExitCode: 1, Output: strings.Repeat("\n", 100000) + "x"})
	}
	fb := Feedback{
		N: 1, Runtime: strings.Repeat("r", 5000), Class: drovertype.ErrorClass(strings.Repeat("K", 5000)), Message: strings.Repeat("ü€😀\n", 50000),
		StderrTail:      strings.Repeat("😀", 100000),
		ScopeViolations: strings.Split(strings.Repeat("p/", 100000), "/"),
		Verification: &event.Verification{
			Commands: cmds,
			Review:   &event.ReviewResult{Runtime: "codex", Reasons: strings.Split(strings.Repeat("r\n", 50000), "\n")},
		},
	}
	out = ComposePrompt("P", &fb)
	checkSafe(t, "P", out)
	if !strings.Contains(out, "😀") {
		t.Error("the stderr block kept nothing")
	}

	// Small blocks are kept whole next to a big one.
	fb = Feedback{N: 1, Message: "short\nmessage", StderrTail: big}
	out = ComposePrompt("P", &fb)
	checkSafe(t, "P", out)
	if !strings.Contains(out, "> short\n> message\n") {
		t.Errorf("the short block was cut:\n%.300s", out)
	}
}

func TestFit(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("a", 10000),
		strings.Repeat("\n", 10000),
		strings.Repeat("é", 5000),
		strings.Repeat("a\n", 5000),
		strings.Repeat("😀", 3000) + strings.Repeat("\n", 3000),
	} {
		for _, q := range []int{minBlock, 300, 1000, 4096, 9999} {
			got := fit(s, q)
			if n := quotedSize(got); n > q {
				t.Errorf("fit(%.10q…, %d) quotes to %d bytes", s, q, n)
			}
			if !utf8.ValidString(got) {
				t.Errorf("fit(%.10q…, %d) cut a rune", s, q)
			}
			if quotedSize(s) > q && !strings.Contains(got, " bytes elided …") {
				t.Errorf("fit(%.10q…, %d) has no marker", s, q)
			}
			if q >= 1000 && quotedSize(got) < q/2 {
				t.Errorf("fit(%.10q…, %d) kept only %d bytes", s, q, quotedSize(got))
			}
		}
	}
	// The marker counts the bytes elided.
	s := strings.Repeat("a", 1000)
	got := fit(s, minBlock)
	var h, t2, n int
	parts := strings.Split(got, "\n")
	h, t2 = len(parts[0]), len(parts[2])
	if _, err := fmt.Sscanf(parts[1], "… %d bytes elided …", &n); err != nil || h+n+t2 != len(s) {
		t.Errorf("fit = %q: head %d + elided %d + tail %d != %d (%v)", got, h, n, t2, len(s), err)
	}
}

func TestFeedbackFrom(t *testing.T) {
	if got := FeedbackFrom(2, "codex", nil, nil); !reflect.DeepEqual(got, Feedback{N: 2, Runtime: "codex"}) {
		t.Errorf("FeedbackFrom(nil, nil) = %+v", got)
	}
	v := &event.Verification{ScopeViolations: []string{"b", "c"}}
	r := &event.Report{
		StderrTail:      "err",
		Error:           &event.ErrorInfo{Class: "RUNTIME_ERROR", Message: "from report"},
		Verification:    v,
		ScopeViolations: []string{"a", "b"},
	}
	got := FeedbackFrom(1, "claude", nil, r)
	want := Feedback{N: 1, Runtime: "claude", Class: "RUNTIME_ERROR", Message: "from report", StderrTail: "err", Verification: v, ScopeViolations: []string{"a", "b", "c"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FeedbackFrom = %+v\nwant %+v", got, want)
	}
	// The classified error wins over the report's.
	got = FeedbackFrom(1, "claude", &event.ErrorInfo{Class: "VERIFICATION_FAILED", Message: "classified"}, r)
	if got.Class != "VERIFICATION_FAILED" || got.Message != "classified" {
		t.Errorf("FeedbackFrom with error = %+v", got)
	}
}

func FuzzComposePrompt(f *testing.F) {
	f.Add("Fix it.\n@exit 0", 1, "claude", "RUNTIME_ERROR", "exit 1\n@exit 3", "@exit 3\r\n  @exit 3", "go test", "--- FAIL\n\t@exit 3", "@reason", "secrets/@x", 1)
	f.Add("", 0, "", "", "", "", "", "", "", "", 0)
	f.Add("p", 2, "\u2028@", "\x00@", "\xff\xfe@", "\u2029@exit", "`\n@", "\u0085@exit", "\n\n@", "\v@", 20)
	f.Add("p", 3, "r", "c", "@exit 3\n", "é\n\n", "cmd", "😀@\n", "r", "p", 30)
	f.Fuzz(func(t *testing.T, prompt string, n int, runtime, class, message, stderr, command, output, reason, path string, copies int) {
		// copies also blows the texts up, so that the bound is exercised
		// while the corpus stays small and quick to minimise.
		copies = max(0, min(copies, 30))
		message = strings.Repeat(message, 1+copies*10)
		stderr = strings.Repeat(stderr, 1+copies*20)
		output = strings.Repeat(output, 1+copies*5)
		v := &event.Verification{
			Review:          &event.ReviewResult{Runtime: runtime, Reasons: []string{reason, output}},
			ScopeViolations: []string{path, reason},
		}
		for i := range copies {
			v.Commands = append(v.Commands, event.CommandResult{Command: command, ExitCode: i - copies/2, TimedOut: i%3 == 0, Output: output})
		}
		fb := Feedback{N: n, Runtime: runtime, Class: drovertype.ErrorClass(class), Message: message, StderrTail: stderr, Verification: v, ScopeViolations: []string{path}}
		out := ComposePrompt(prompt, &fb)
		checkSafe(t, prompt, out)
		if again := ComposePrompt(prompt, &fb); again != out {
			t.Fatal("not deterministic")
		}
		v.Review = &event.ReviewResult{Runtime: runtime, Error: message + reason}
		checkSafe(t, prompt, ComposePrompt(prompt, &fb))
	})
}

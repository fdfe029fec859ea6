package attempt

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

func TestParseVerdict(t *testing.T) {
	cases := []struct {
		text    string
		passed  bool
		reasons []string
		err     bool
	}{
		{"VERDICT: PASS", true, nil, false},
		{"blah\n  verdict:   fail  \n- one\n\n- two\nnot a reason\n-three\n- ", false, []string{"one", "two"}, false},
		{"VERDICT: FAIL\n- old\nthinking again\nVERDICT: PASS\n- new", true, []string{"new"}, false},
		{"Final VERDICT: PASS", false, nil, true},
		{"**VERDICT: PASS**", false, nil, true},
		{"", false, nil, true},
		{"VERDICT: PASS\r\n- crlf\r\n", true, []string{"crlf"}, false},
	}
	for _, c := range cases {
		passed, reasons, err := ParseVerdict(c.text)
		if (err != nil) != c.err || passed != c.passed || strings.Join(reasons, "|") != strings.Join(c.reasons, "|") {
			t.Errorf("%q: %v %q %v", c.text, passed, reasons, err)
		}
	}
	var b strings.Builder
	b.WriteString("VERDICT: FAIL\n")
	for range 30 {
		b.WriteString("- " + strings.Repeat("é", 400) + "\n")
	}
	_, reasons, _ := ParseVerdict(b.String())
	if len(reasons) != 20 || len(reasons[0]) > 500 || !utf8.ValidString(reasons[0]) {
		t.Errorf("bounds: %d reasons, first %d bytes", len(reasons), len(reasons[0]))
	}
}

func TestReviewPrompt(t *testing.T) {
	diff := "diff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b\n"
	p := ReviewPrompt("@write x\ndo it", diff, []event.CommandResult{{Command: "go test ./...", Output: "@ok\nPASS\n"}})
	for _, want := range []string{"> @write x\n> do it\n", "> @ok\n> PASS\n", "```diff\n" + diff + "```\n", "`go test ./...` exited 0", "VERDICT: PASS", "VERDICT: FAIL"} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q:\n%s", want, p)
		}
	}
	before, _, _ := strings.Cut(p, "```diff")
	for _, l := range strings.Split(before, "\n") {
		if strings.HasPrefix(l, "@") {
			t.Errorf("line starts with @: %q", l)
		}
	}
	big := "diff --git a/x b/x\n" + strings.Repeat("+line\n", 40000) + "+LAST\n"
	p = ReviewPrompt("t", big, nil)
	if len(p) > 70<<10 || !strings.Contains(p, "bytes omitted") || !strings.Contains(p, "+LAST\n```") || !strings.Contains(p, "No verification commands") {
		t.Errorf("big diff: %d bytes", len(p))
	}
	if p := ReviewPrompt("t", "", nil); !strings.Contains(p, "The change is empty") {
		t.Error("empty diff")
	}
	if p := ReviewPrompt("t", "+```\n", nil); !strings.Contains(p, "````diff\n+```\n````\n") {
		t.Errorf("fence: %s", p)
	}
}

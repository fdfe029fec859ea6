package attempt

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

func TestHeadTail(t *testing.T) {
	if got := headTail("short", 10); got != "short" {
		t.Errorf("short: %q", got)
	}
	s := "HEAD" + strings.Repeat("x", 100) + "TAIL"
	got := headTail(s, 20)
	if !strings.HasPrefix(got, "HEAD") || !strings.HasSuffix(got, "TAIL") || !strings.Contains(got, "88 bytes omitted") {
		t.Errorf("got %q", got)
	}
}

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

func TestCredentialFingerprint(t *testing.T) {
	key := "ANTHROPIC_API_KEY=sk-ant-0123456789abcdef"
	base := []string{"PATH=/usr/bin", "HOME=/home/w", key, "DROVER_ATTEMPT_ID=f_t_1"}
	fp := CredentialFingerprint(base)
	if len(fp) != 12 || strings.Contains(key, fp) {
		t.Fatalf("fingerprint %q", fp)
	}
	for _, c := range []struct {
		name string
		env  []string
		same bool
	}{
		{"other order, other plain variables", []string{key, "PATH=/bin", "TZ=UTC"}, true},
		{"another key", []string{"ANTHROPIC_API_KEY=sk-ant-fedcba9876543210"}, false},
		{"the same value under another name", []string{"OPENAI_API_KEY=sk-ant-0123456789abcdef"}, false},
		{"one more key", []string{key, "GH_TOKEN=ghp_abcdefabcdef"}, false},
		{"an empty key counts as none", []string{key, "GH_TOKEN="}, true},
	} {
		if got := CredentialFingerprint(c.env); (got == fp) != c.same {
			t.Errorf("%s: %q against %q, want same=%v", c.name, got, fp, c.same)
		}
	}
	if got := CredentialFingerprint([]string{"PATH=/bin", "HOME=/h", "GH_TOKEN="}); got != "" {
		t.Errorf("no credentials: %q", got)
	}
}

package adapter

import (
	"strings"
	"testing"
)

func TestHeadTail(t *testing.T) {
	if got := HeadTail("short", 10); got != "short" {
		t.Errorf("short: %q", got)
	}
	s := "HEAD" + strings.Repeat("x", 100) + "TAIL"
	got := HeadTail(s, 20)
	if !strings.HasPrefix(got, "HEAD") || !strings.HasSuffix(got, "TAIL") || !strings.Contains(got, "88 bytes omitted") {
		t.Errorf("got %q", got)
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

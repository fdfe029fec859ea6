package redact

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestRedactor(t *testing.T) {
	r := New("sk-ant-secret-123", "sk-ant-secret-123-longer", "short", "")
	in := "key=sk-ant-secret-123-longer and sk-ant-secret-123, short stays"
	want := "key=[REDACTED] and [REDACTED], short stays"
	if got := r.String(in); got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := string(r.Bytes([]byte(in))); got != want {
		t.Errorf("Bytes = %q", got)
	}
	if r.MaxLen() != len("sk-ant-secret-123-longer") {
		t.Errorf("MaxLen = %d", r.MaxLen())
	}
	var none *Redactor
	if none.String("x") != "x" || !none.Empty() || string(none.Bytes([]byte("y"))) != "y" {
		t.Error("nil redactor changed text")
	}
}

func TestFromEnvAndNames(t *testing.T) {
	t.Setenv("MY_API_KEY", "abcdef123456")
	r := FromEnv([]string{"MY_API_KEY", "UNSET_VAR"}, []string{"OTHER_TOKEN=zyxwvu987"})
	if got := r.String("abcdef123456 zyxwvu987"); got != "[REDACTED] [REDACTED]" {
		t.Errorf("got %q", got)
	}
	for name, want := range map[string]bool{"ANTHROPIC_API_KEY": true, "GH_TOKEN": true, "DB_PASSWORD": true, "PATH": false, "HOME": false, "LANG": false} {
		if IsSecretName(name) != want {
			t.Errorf("IsSecretName(%s) = %v", name, !want)
		}
	}
}

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewTextHandler(&buf, nil), New("hunter2-secret")))
	log.With("token", "hunter2-secret").Info("using hunter2-secret", "err", errors.New("bad key hunter2-secret"),
		slog.Group("g", "v", "x hunter2-secret"))
	if strings.Contains(buf.String(), "hunter2") {
		t.Errorf("secret in log line: %s", buf.String())
	}
	if strings.Count(buf.String(), Mask) != 4 {
		t.Errorf("want 4 masks: %s", buf.String())
	}
}

// TestWriter: a secret split across writes, at every split point, is masked.
func TestWriter(t *testing.T) {
	const secret = "sk-split-secret-42"
	r := New(secret)
	text := "before " + secret + " middle " + secret + " after"
	for cut := 0; cut <= len(text); cut++ {
		for cut2 := cut; cut2 <= len(text); cut2 += 3 {
			var out bytes.Buffer
			w := Writer(&out, r)
			for _, part := range []string{text[:cut], text[cut:cut2], text[cut2:]} {
				if _, err := w.Write([]byte(part)); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if want := "before [REDACTED] middle [REDACTED] after"; out.String() != want {
				t.Fatalf("cuts %d,%d: %q", cut, cut2, out.String())
			}
		}
	}
}

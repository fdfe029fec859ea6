package queue

import (
	"errors"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/drovertype"
)

func TestCancelSignalRoundTrip(t *testing.T) {
	sig := CancelSignal{Attempt: "f-1_a_2", Reason: "cancelled by the operator: bad\x1b[31m idea\n", By: CancelByOperator}
	data, err := sig.encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCancelSignal(CancelSubject(sig.Attempt), data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempt != sig.Attempt || got.By != sig.By || got.Reason != "cancelled by the operator: bad [31m idea " {
		t.Errorf("decoded %+v", got)
	}
	if _, err := (CancelSignal{Attempt: "f_x", By: CancelByOperator}).encode(); err == nil {
		t.Error("a signal for no attempt was encoded")
	}
}

func TestCancelSignalRefused(t *testing.T) {
	subject := CancelSubject("f_a_1")
	for _, c := range []struct{ subject, body, want string }{
		{subject, ``, "unexpected EOF"},
		{subject, `null`, `names attempt "" on the subject of "f_a_1"`},
		{subject, `{"attempt":"f_a_2","by":"operator"}`, `names attempt "f_a_2" on the subject of "f_a_1"`},
		{subject, `{"attempt":"f_a_1"}`, `asked by ""`},
		{subject, `{"attempt":"f_a_1","by":"operator","extra":1}`, `unknown object member name "extra"`},
		{subject, `{"attempt":"f_a_1","by":"operator","reason":"a\nb"}`, "not one line of text"},
		{subject, `{"attempt":"f_a_1","by":"operator","reason":"` + strings.Repeat("x", 1001) + `"}`, "not one line of text"},
		{subject, strings.Repeat(" ", maxCancelSignal+1), "4097 bytes"},
		{CancelSubject("f__integrate_1"), `{"attempt":"f__integrate_1","by":"operator"}`, "integration branch"},
		{CancelSubject("f.a"), `{"attempt":"f.a","by":"operator"}`, "is not an attempt id"},
		{"drover.other.f_a_1", `{"attempt":"f_a_1","by":"operator"}`, "subject"},
	} {
		_, err := DecodeCancelSignal(c.subject, []byte(c.body))
		if !errors.Is(err, ErrBadCancelSignal) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %.60q: %v, want an error with %q", c.subject, c.body, err, c.want)
		}
	}
}

// FuzzDecodeCancelSignal: whatever arrives on a cancel subject, what is
// obeyed names that subject's attempt, a task's, and is one line of text.
func FuzzDecodeCancelSignal(f *testing.F) {
	f.Add("f_a_1", []byte(`{"attempt":"f_a_1","reason":"why","by":"operator"}`))
	f.Add("f_a_1", []byte(`{"attempt":"f_a_1","by":"operator","by":"x"}`))
	f.Add("f__integrate_1", []byte(`{"attempt":"f__integrate_1","by":"operator"}`))
	f.Add("x", []byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, attempt string, body []byte) {
		sig, err := DecodeCancelSignal(CancelSubject(attempt), body)
		if err != nil {
			if !errors.Is(err, ErrBadCancelSignal) {
				t.Fatalf("error %v does not wrap ErrBadCancelSignal", err)
			}
			return
		}
		_, task, _, perr := drovertype.ParseAttemptID(sig.Attempt)
		if sig.Attempt != attempt || perr != nil || task == "" || sig.By != CancelByOperator || strings.ContainsAny(sig.Reason, "\n\r\x1b") {
			t.Fatalf("obeyed %+v on the subject of %q", sig, attempt)
		}
		data, err := sig.encode()
		if err != nil {
			t.Fatalf("an obeyed signal does not encode: %v", err)
		}
		if again, err := DecodeCancelSignal(CancelSubject(attempt), data); err != nil || again != sig {
			t.Fatalf("round trip: %+v, %v", again, err)
		}
	})
}

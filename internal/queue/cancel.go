package queue

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"

	"github.com/drover-dev/drover/internal/drovertype"
)

// A stop signal is core NATS: anyone who may publish on
// drover.control.cancel.* can send one (without authentication, anyone who
// reaches the server). So it carries a body saying which attempt, why and
// who asked, and a worker obeys only one that decodes and names the
// attempt of its subject: 128 random bytes stop nothing, and what an
// attempt reports when it is stopped is what the signal said.

// CancelSignal is the body of a stop signal.
type CancelSignal struct {
	// Attempt is the attempt to stop; it must be the subject's.
	Attempt string `json:"attempt"`
	// Reason says why, for the attempt's report: "cancelled by the
	// operator: wrong prompt".
	Reason string `json:"reason"`
	// By is who asked: CancelByOperator.
	By string `json:"by"`
}

// CancelByOperator is a signal sent because an operator cancelled the
// attempt's task or flow (controller cancel); the controller sends it.
const CancelByOperator = "operator"

// Bounds of a stop signal.
const (
	maxCancelSignal = 4 << 10
	maxCancelReason = 1000
)

// ErrBadCancelSignal is wrapped by every refusal of a stop signal.
var ErrBadCancelSignal = errors.New("queue: bad cancel signal")

// SignalCancel tells whichever worker holds sig.Attempt to stop its CLI;
// epoch is the leader epoch of the controller that sends it (0: none).
func SignalCancel(nc *nats.Conn, sig CancelSignal, epoch uint64) error {
	data, err := sig.encode()
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: CancelSubject(sig.Attempt), Data: data, Header: nats.Header{}}
	stampEpoch(msg, epoch)
	if err := nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("queue: signal cancel %s: %w", sig.Attempt, err)
	}
	return nil
}

func (sig CancelSignal) encode() ([]byte, error) {
	// The reason comes from an operator: one line of text, whatever it was.
	sig.Reason = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\t' {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(sig.Reason, "?"))
	sig.Reason = truncateUTF8(sig.Reason, maxCancelReason)
	if err := sig.check(); err != nil {
		return nil, err
	}
	data, err := jsonv2.Marshal(sig)
	if err != nil {
		return nil, fmt.Errorf("queue: encode cancel signal: %w", err)
	}
	return data, nil
}

// DecodeCancelSignal reads a stop signal received on subject. It refuses
// what a worker must not obey: a body that is not a signal, one naming
// another attempt than the subject's, a build of an integration branch,
// anyone but the operator as the asker, a reason that is not one line of
// text.
func DecodeCancelSignal(subject string, data []byte) (CancelSignal, error) {
	var sig CancelSignal
	attempt, ok := strings.CutPrefix(subject, cancelPrefix)
	if !ok {
		return sig, fmt.Errorf("%w: subject %.100q", ErrBadCancelSignal, subject)
	}
	if len(data) > maxCancelSignal {
		return sig, fmt.Errorf("%w: %d bytes", ErrBadCancelSignal, len(data))
	}
	if err := jsonv2.Unmarshal(data, &sig, jsonv2.RejectUnknownMembers(true)); err != nil {
		return CancelSignal{}, fmt.Errorf("%w: %v", ErrBadCancelSignal, err)
	}
	if sig.Attempt != attempt {
		return CancelSignal{}, fmt.Errorf("%w: names attempt %.100q on the subject of %.100q", ErrBadCancelSignal, sig.Attempt, attempt)
	}
	if err := sig.check(); err != nil {
		return CancelSignal{}, err
	}
	return sig, nil
}

func (sig CancelSignal) check() error {
	_, task, _, err := drovertype.ParseAttemptID(sig.Attempt)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrBadCancelSignal, err)
	case task == "":
		return fmt.Errorf("%w: %s is a build of an integration branch, which is not cancelled", ErrBadCancelSignal, sig.Attempt)
	case sig.By != CancelByOperator:
		return fmt.Errorf("%w: asked by %.40q", ErrBadCancelSignal, sig.By)
	case len(sig.Reason) > maxCancelReason || !utf8.ValidString(sig.Reason) ||
		strings.IndexFunc(sig.Reason, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }) >= 0:
		return fmt.Errorf("%w: the reason is not one line of text of at most %d bytes", ErrBadCancelSignal, maxCancelReason)
	}
	return nil
}

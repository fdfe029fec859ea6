package queue

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestWatchCancels: a stop signal sent reaches the watcher as sent, with
// the sender's epoch; after stop, one sent later does not, while a signal
// on another subject never did.
func TestWatchCancels(t *testing.T) {
	ns := startServer(t)
	nc, _ := connect(t, ns)
	got := make(chan *nats.Msg, 4)
	stop, err := NewCancels(nc).WatchCancels(func(m *nats.Msg) { got <- m })
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("drover.control.other", []byte("x")); err != nil {
		t.Fatal(err)
	}
	sig := CancelSignal{Attempt: "f_a_1", Reason: "wrong prompt", By: CancelByOperator}
	if err := SignalCancel(nc, sig, 7); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		back, err := DecodeCancelSignal(m.Subject, m.Data)
		epoch, eerr := LeaderEpoch(m.Header)
		if err != nil || eerr != nil || back != sig || epoch != 7 {
			t.Errorf("received %+v (%v), epoch %d (%v); want %+v, epoch 7", back, err, epoch, eerr, sig)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no signal received")
	}

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := SignalCancel(nc, sig, 8); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // the server has had the signal, and delivers in order
		t.Fatal(err)
	}
	select {
	case m := <-got:
		t.Errorf("received %s after stop", m.Subject)
	default:
	}
}

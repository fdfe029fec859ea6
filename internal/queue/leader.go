package queue

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

// A leader's epoch travels with everything it publishes: in the envelope of
// its events (event.Event.LeaderEpoch, which the fold fences by), and in a
// header of its jobs and cancel signals, which workers fence by. A header,
// not the body: a job's and a signal's bodies are read strictly by workers
// of every version, and the epoch is about who sent them, not what they ask.

// LeaderEpochHeader carries the epoch of the leader that published a job or
// a cancel signal.
const LeaderEpochHeader = "Drover-Leader-Epoch"

// ErrBadLeaderEpoch is a leader epoch header that is not a number.
var ErrBadLeaderEpoch = errors.New("queue: bad leader epoch header")

// LeaderEpoch reads the leader epoch of a job or a cancel signal: 0 when it
// has none (sent by no leader), an error when the header is not a decimal
// number as Drover writes one.
func LeaderEpoch(h nats.Header) (uint64, error) {
	v := h.Get(LeaderEpochHeader)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || v[0] == '0' || v[0] == '+' {
		return 0, fmt.Errorf("%w: %.40q", ErrBadLeaderEpoch, v)
	}
	return n, nil
}

// stampEpoch sets msg's leader epoch header; 0 sets none.
func stampEpoch(msg *nats.Msg, epoch uint64) {
	if epoch > 0 {
		msg.Header.Set(LeaderEpochHeader, strconv.FormatUint(epoch, 10))
	}
}

// msgID is the Nats-Msg-Id of a decision or a job: its id, and the epoch of
// the leader that published it, if any. Within a term a republish is
// deduplicated as before. Across terms it is not: what a paused leader
// published under an id after its term ended is refused (by the fold, by
// the workers), and the same decision by the next leader, under the same
// id, must still reach the stream rather than be dropped as its duplicate.
// The fold's own dedup by event id keeps a decision made in two terms from
// counting twice.
func msgID(id string, epoch uint64) string {
	if epoch == 0 {
		return id
	}
	return id + "@" + strconv.FormatUint(epoch, 10)
}

// IDOfMsgID is the event or job id a Nats-Msg-Id names (msgID).
func IDOfMsgID(msgID string) string {
	i := strings.LastIndexByte(msgID, '@')
	if i < 0 {
		return msgID
	}
	if _, err := strconv.ParseUint(msgID[i+1:], 10, 64); err != nil {
		return msgID
	}
	return msgID[:i]
}

// eventMsgID is ev's Nats-Msg-Id.
func eventMsgID(ev *event.Event) string { return msgID(ev.ID, ev.LeaderEpoch) }

// EpochFence is a worker's memory of the latest leader epoch it has seen,
// by which it refuses what an older leader sends. It learns epochs only
// from jobs, which only the controller role may publish: anyone who may
// send a cancel signal could otherwise raise it out of reach and have
// every real job refused. It is safe for concurrent use; its zero value
// has seen no epoch.
type EpochFence struct{ latest atomic.Uint64 }

// Job reports whether a job of epoch may run: not older than the latest
// epoch seen, which it raises to epoch.
func (f *EpochFence) Job(epoch uint64) bool {
	for {
		cur := f.latest.Load()
		if epoch < cur {
			return false
		}
		if epoch == cur || f.latest.CompareAndSwap(cur, epoch) {
			return true
		}
	}
}

// Cancel reports whether a cancel signal of epoch may be obeyed: not older
// than the latest epoch a job showed.
func (f *EpochFence) Cancel(epoch uint64) bool { return epoch >= f.latest.Load() }

// Latest is the latest leader epoch seen.
func (f *EpochFence) Latest() uint64 { return f.latest.Load() }

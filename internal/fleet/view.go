package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/queue"
)

// View is the fleet as the drover-workers bucket tells it: the live
// registrations, each with when it was last seen changing on the reader's
// clock. A registration is live until it is deleted (a worker that stops
// deregisters) or goes unrenewed for staleAfter its renewal interval, on
// the reader's clock: the bucket ages a dead worker's key out after
// RegistrationTTL without telling its watchers, and a worker's own clock
// is never compared with the reader's. Safe for concurrent use.
type View struct {
	mu    sync.Mutex
	regs  map[string]*seenReg
	ready bool
}

type seenReg struct {
	reg  *Registration
	seen time.Time
}

// staleAfter is how many renewal intervals a registration may miss before
// a View counts its worker as gone.
const staleAfter = 3

// NewView returns an empty view that is not ready: nothing has been read.
func NewView() *View { return &View{regs: map[string]*seenReg{}} }

// Put records a registration as seen at at.
func (v *View) Put(r *Registration, at time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.regs[r.ID] = &seenReg{reg: r, seen: at}
}

// Delete forgets a worker that deregistered.
func (v *View) Delete(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.regs, id)
}

// SetReady says whether the view holds everything the bucket held when it
// was read: until then it says nothing (Live returns false).
func (v *View) SetReady(ready bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ready = ready
}

// Refresh counts every registration as seen at at: after a reconnect to
// NATS renewals made meanwhile arrive late, and a worker must not look
// gone for what the reader could not hear.
func (v *View) Refresh(at time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range v.regs {
		s.seen = at
	}
}

// Reset empties the view and makes it not ready, for a new read.
func (v *View) Reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	clear(v.regs)
	v.ready = false
}

// Live returns the registrations of the workers live at now, by id, and
// whether the view is ready; not ready, it returns nothing.
func (v *View) Live(now time.Time) ([]*Registration, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.ready {
		return nil, false
	}
	out := make([]*Registration, 0, len(v.regs))
	for _, s := range v.regs {
		if now.Sub(s.seen) < lifetime(s.reg) {
			out = append(out, s.reg)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, true
}

// lifetime is how long a registration counts as live unrenewed.
func lifetime(r *Registration) time.Duration {
	if r.RenewMS <= 0 {
		return RegistrationTTL
	}
	return min(max(staleAfter*time.Duration(r.RenewMS)*time.Millisecond, 3*time.Second), RegistrationTTL)
}

// Follow keeps v up to date with the bucket until ctx ends or the watch
// fails (its error; nil when ctx ended): it resets v, puts every
// registration the bucket holds, makes v ready, then applies each change as
// it comes, calling changed after each (and once ready). now stamps what
// it sees. A registration that does not decode is left out, as Workers
// leaves it out.
func Follow(ctx context.Context, js jetstream.JetStream, v *View, now func() time.Time, changed func()) error {
	kv, err := js.KeyValue(ctx, queue.WorkersBucket)
	if err != nil {
		return fmt.Errorf("fleet: open %s: %w", queue.WorkersBucket, err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("fleet: watch %s: %w", queue.WorkersBucket, err)
	}
	defer func() { _ = w.Stop() }()
	v.Reset()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errWatchEnded
			}
			switch {
			case e == nil: // every value the bucket held has come
				v.SetReady(true)
			case e.Operation() != jetstream.KeyValuePut:
				v.Delete(e.Key())
			default:
				var r Registration
				if json.Unmarshal(e.Value(), &r) != nil || r.ID != e.Key() {
					v.Delete(e.Key())
					continue
				}
				r.Raw = e.Value()
				v.Put(&r, now())
			}
			changed()
		}
	}
}

// errWatchEnded is a watch of the registry that ended by itself.
var errWatchEnded = errors.New("fleet: the registry's watch ended")

// Serving is what the live fleet says about one runtime in one pool.
type Serving struct {
	Pool    string `json:"pool"`
	Runtime string `json:"runtime"`
	// Live counts the live workers in the pool; Serving those of them
	// that take the runtime's jobs now (claiming, the runtime healthy).
	Live    int `json:"live"`
	Serving int `json:"serving"`
	// Unavailable are the workers in the pool that list the runtime but
	// take none of its jobs now, by reason (its health check's error, or
	// why the worker claims nothing).
	Unavailable []Unavailable `json:"unavailable,omitempty"`
}

// Unavailable is one reason workers that list a runtime do not serve it.
type Unavailable struct {
	Reason  string   `json:"reason"`
	Workers []string `json:"workers"`
}

// Bounds of what Why says, whatever the workers report: it goes into
// events and onto every screen that shows a waiting task.
const (
	maxReasons   = 4
	maxReasonLen = 200
)

// Place says how the live workers regs serve runtime in pool.
func Place(regs []*Registration, pool, runtime string) Serving {
	s := Serving{Pool: pool, Runtime: runtime}
	why := map[string][]string{}
	for _, r := range regs {
		if r.Pool != pool {
			continue
		}
		s.Live++
		var h *RuntimeHealth
		for i := range r.Runtimes {
			if r.Runtimes[i].Name == runtime {
				h = &r.Runtimes[i]
			}
		}
		switch {
		case h == nil:
		case r.NotClaiming != "":
			why["not claiming: "+r.NotClaiming] = append(why["not claiming: "+r.NotClaiming], r.ID)
		case !h.Healthy:
			reason := h.Error
			if reason == "" {
				reason = "unhealthy"
			}
			why[reason] = append(why[reason], r.ID)
		default:
			s.Serving++
		}
	}
	for reason, ids := range why {
		sort.Strings(ids)
		s.Unavailable = append(s.Unavailable, Unavailable{Reason: oneLine(reason, maxReasonLen), Workers: ids})
	}
	sort.Slice(s.Unavailable, func(i, j int) bool {
		a, b := s.Unavailable[i], s.Unavailable[j]
		return len(a.Workers) > len(b.Workers) || len(a.Workers) == len(b.Workers) && a.Reason < b.Reason
	})
	return s
}

// Why says why no live worker serves the runtime, "" when one does:
// "no live worker serves claude-code in pool default: 2 workers: claude
// not in PATH". It depends only on the fleet's state, not on when it was
// read, so that it changes only when the fleet does.
func (s Serving) Why() string {
	if s.Serving > 0 {
		return ""
	}
	head := fmt.Sprintf("no live worker serves %s in pool %s: ", s.Runtime, s.Pool)
	if s.Live == 0 {
		return head + "no worker is live in the pool"
	}
	var parts []string
	listing := 0
	for i, u := range s.Unavailable {
		listing += len(u.Workers)
		if i < maxReasons {
			parts = append(parts, fmt.Sprintf("%s: %s", workers(len(u.Workers)), u.Reason))
		}
	}
	if n := len(s.Unavailable) - maxReasons; n > 0 {
		parts = append(parts, fmt.Sprintf("%d more reasons", n))
	}
	if rest := s.Live - listing; rest > 0 {
		verb := "do not"
		if rest == 1 {
			verb = "does not"
		}
		parts = append(parts, fmt.Sprintf("%s of %d %s list it", workers(rest), s.Live, verb))
	}
	return head + strings.Join(parts, "; ")
}

func workers(n int) string {
	if n == 1 {
		return "1 worker"
	}
	return fmt.Sprintf("%d workers", n)
}

// oneLine is s on one line, cut to n bytes on a rune boundary.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

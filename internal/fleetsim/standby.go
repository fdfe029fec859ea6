package fleetsim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/queue"
)

// StandbyResult is what the simulation measured of one standby
// controller: a second `controller serve` on the same NATS, folding the
// same log, ready to lead.
type StandbyResult struct {
	ID string
	// CPU is its CPU time over the run; RSS its resident set at the end.
	CPU time.Duration
	RSS int64
	// Lag is how far behind the log it kept while the flows ran.
	Lag Lag
	// CaughtUp is from the flows' completion to its registration saying
	// it had folded the log as it stood then; -1 if it had not within a
	// minute.
	CaughtUp time.Duration
	// Role is what it said it was at the end: a standby, or the leader if
	// it had taken over.
	Role string
}

// Lag is how many events of the log a controller had not folded yet,
// from its registration (renewed every 2 s), sampled every second while
// the flows ran: the median and the most of the samples.
type Lag struct {
	P50, Max uint64
	Samples  int
}

// lagOf summarises samples.
func lagOf(samples []uint64) Lag {
	s := slices.Clone(samples)
	slices.Sort(s)
	if len(s) == 0 {
		return Lag{}
	}
	return Lag{P50: s[len(s)/2], Max: s[len(s)-1], Samples: len(s)}
}

// standbys are the standby controllers a simulation started.
type standbys struct {
	procs  []*Process
	ids    []string // each one's controller id, from its data dir
	leader string   // the first controller's id
	mu     sync.Mutex
	lags   map[string][]uint64
	cpu0   []time.Duration
}

// startStandbys starts n controllers beside the leader, on its server,
// each in a data dir of its own. They start once the leader answers, so
// that the leader is the first controller.
func startStandbys(ctx context.Context, o *Options, leader *Process, n int) (*standbys, error) {
	id, err := waitControllerID(ctx, leader)
	if err != nil {
		return nil, err
	}
	sb := &standbys{leader: id, lags: map[string][]uint64{}}
	url := leader.URL
	for i := range n {
		dir := filepath.Join(o.DataDir, fmt.Sprintf("standby-%d", i+1))
		p, err := StartController(ctx, ProcessOptions{Binary: o.ControllerBinary, DataDir: dir, NATSURL: url, Env: o.ControllerEnv, What: "standby controller"})
		if err != nil {
			sb.stop()
			return nil, err
		}
		sb.procs = append(sb.procs, p)
	}
	for _, p := range sb.procs {
		id, err := waitControllerID(ctx, p)
		if err != nil {
			sb.stop()
			return nil, err
		}
		sb.ids = append(sb.ids, id)
	}
	return sb, nil
}

// waitControllerID reads the id a started controller made for itself.
func waitControllerID(ctx context.Context, p *Process) (string, error) {
	var id string
	err := p.waitReady(ctx, func() bool {
		b, err := os.ReadFile(filepath.Join(p.DataDir, "controller-id"))
		id = strings.TrimSpace(string(b))
		return err == nil && id != ""
	})
	return id, err
}

// alive reports the first standby that exited.
func (sb *standbys) alive() error {
	if sb == nil {
		return nil
	}
	for _, p := range sb.procs {
		if err := p.Alive(); err != nil {
			return err
		}
	}
	return nil
}

func (sb *standbys) stop() {
	if sb == nil {
		return
	}
	for _, p := range sb.procs {
		p.Stop()
	}
}

// begin notes their CPU time as the flows are submitted.
func (sb *standbys) begin() error {
	for _, p := range sb.procs {
		c, err := CPU(p.Pid())
		if err != nil {
			return err
		}
		sb.cpu0 = append(sb.cpu0, c)
	}
	return nil
}

// sample records their lag every second until ctx ends.
func (sb *standbys) sample(ctx context.Context, js jetstream.JetStream) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		regs, err := controllers(ctx, js)
		if err != nil {
			continue
		}
		sb.mu.Lock()
		for _, id := range append([]string{sb.leader}, sb.ids...) {
			if r := regs[id]; r != nil {
				sb.lags[id] = append(sb.lags[id], r.Lag)
			}
		}
		sb.mu.Unlock()
	}
}

// leaderLag is how far behind the log the first controller kept.
func (sb *standbys) leaderLag() Lag {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return lagOf(sb.lags[sb.leader])
}

// finish measures them once the flows completed, at ended: how long each
// takes to have folded the log as it stands now, its CPU and its memory.
func (sb *standbys) finish(ctx context.Context, js jetstream.JetStream, ended time.Time) ([]StandbyResult, error) {
	s, err := js.Stream(ctx, queue.EventsStream)
	if err != nil {
		return nil, fmt.Errorf("fleetsim: %w", err)
	}
	last := s.CachedInfo().State.LastSeq
	res := make([]StandbyResult, len(sb.procs))
	for i, id := range sb.ids {
		res[i] = StandbyResult{ID: id, CaughtUp: -1}
	}
	deadline := time.Now().Add(time.Minute)
	for pending := len(res); pending > 0 && time.Now().Before(deadline); {
		if regs, err := controllers(ctx, js); err == nil {
			pending = 0
			for i := range res {
				r := regs[res[i].ID]
				switch {
				case res[i].CaughtUp >= 0:
				case r != nil && r.Applied >= last && r.Seen.After(ended):
					res[i].CaughtUp, res[i].Role = r.Seen.Sub(ended), r.Role
				default:
					pending++
				}
			}
		}
		if err := sleepUntil(ctx, time.Now().Add(200*time.Millisecond)); err != nil {
			return nil, err
		}
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for i, p := range sb.procs {
		c, err := CPU(p.Pid())
		if err != nil {
			return nil, err
		}
		res[i].CPU = c - sb.cpu0[i]
		if res[i].RSS, _, err = Memory(p.Pid()); err != nil {
			return nil, err
		}
		res[i].Lag = lagOf(sb.lags[res[i].ID])
	}
	return res, nil
}

// controllers is the controllers' registrations by id.
func controllers(ctx context.Context, js jetstream.JetStream) (map[string]*fleet.Controller, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := fleet.Controllers(cctx, js)
	if err != nil {
		return nil, err
	}
	regs := make(map[string]*fleet.Controller, len(list))
	for _, c := range list {
		regs[c.ID] = c
	}
	return regs, nil
}

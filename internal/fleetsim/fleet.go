package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/natsconn"
	"github.com/drover-dev/drover/internal/objstore"
	"github.com/drover-dev/drover/internal/worker"
)

// FleetOptions says what fleet to start.
type FleetOptions struct {
	// URL is the NATS server the workers connect to.
	URL string
	// Workers and Slots: how many workers, and attempts each runs at once.
	Workers, Slots int
	// Runtime is the runtime every worker serves; the controller must
	// know it (the built-in "demo" does).
	Runtime string
	// Config is the base configuration (config.Load's): NATS credentials,
	// queue timings, the runtime's entry. Each worker gets a copy with its
	// own id and work dir, the sandbox off (nothing runs) and no disk floor.
	Config *config.Config
	// WorkDir holds the workers' work dirs (each empty: nothing is
	// checked out).
	WorkDir string
	Runner  *Runner
	Log     *slog.Logger
	// ClaimTimes, if set, is told the times of every claim
	// (worker.WithClaimTimes).
	ClaimTimes func(worker.ClaimTimes)
}

// Fleet is a set of real workers (package worker) in this process, each
// with its own NATS connection, registration and claims, whose attempts a
// simulated Runner plays.
type Fleet struct {
	mu      sync.Mutex
	workers []*worker.Worker
	conns   []*nats.Conn
}

// StartFleet starts o.Workers workers, a few at a time, and returns once
// every one of them claims.
func StartFleet(ctx context.Context, o FleetOptions) (*Fleet, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("fleetsim: %w", err)
	}
	f := &Fleet{}
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	errs := make([]error, o.Workers)
	for i := range o.Workers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f.startOne(ctx, o, i+1, exe)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.Stop()
		return nil, err
	}
	return f, nil
}

// startOne starts the worker sim-NNNN.
func (f *Fleet) startOne(ctx context.Context, o FleetOptions, n int, exe string) error {
	wc := *o.Config
	wc.Worker.ID = fmt.Sprintf("sim-%04d", n)
	wc.Worker.Slots = o.Slots
	wc.Worker.Runtimes = []string{o.Runtime}
	wc.Worker.WorkDir = filepath.Join(o.WorkDir, wc.Worker.ID)
	wc.Worker.Sandbox = config.SandboxOff
	wc.Worker.MinFreeDisk = 0
	// The runtime's binary must be found for the worker to call it
	// healthy; this one is, and no version command runs.
	wc.Runtimes = maps.Clone(o.Config.Runtimes)
	rt := wc.Runtimes[o.Runtime]
	rt.Binary, rt.VersionArgs, rt.MinVersion = exe, nil, ""
	wc.Runtimes[o.Runtime] = rt
	co := natsconn.ClientFor(&wc, "drover-"+wc.Worker.ID, natsconn.RoleWorker, wc.Worker.ID)
	co.URL, co.Reconnect, co.Logger = o.URL, true, o.Log
	nc, err := natsconn.Connect(co)
	if err != nil {
		return fmt.Errorf("fleetsim: worker %s: %w", wc.Worker.ID, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return fmt.Errorf("fleetsim: worker %s: %w", wc.Worker.ID, err)
	}
	r := *o.Runner
	r.Artifacts = objstore.NewArtifacts(js)
	opts := []worker.Option{worker.WithRunner(&r)}
	if o.ClaimTimes != nil {
		opts = append(opts, worker.WithClaimTimes(o.ClaimTimes))
	}
	w, err := worker.New(&wc, o.Log, opts...)
	if err == nil {
		err = w.Start(ctx, nc, nil)
	}
	if err != nil {
		nc.Close()
		return fmt.Errorf("fleetsim: worker %s: %w", wc.Worker.ID, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.workers = append(f.workers, w)
	f.conns = append(f.conns, nc)
	return nil
}

// Stop hands every worker's running attempts back, waits for the workers
// and closes their connections.
func (f *Fleet) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.workers {
		w.HandBack()
	}
	for _, w := range f.workers {
		w.Wait()
	}
	for _, nc := range f.conns {
		nc.Close()
	}
	f.workers, f.conns = nil, nil
}

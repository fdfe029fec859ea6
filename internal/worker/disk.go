package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drover-dev/drover/internal/config"
)

// diskCheckEvery bounds how often the free space is measured: the claim
// loops ask before every fetch.
const diskCheckEvery = 2 * time.Second

// diskGate keeps a worker from claiming attempts it has no room for. Below
// worker.min_free_disk it first sweeps kept worktrees, oldest first; if that
// is not enough, the worker stops claiming until space is freed.
type diskGate struct {
	dir   string
	min   config.ByteSize
	free  func(dir string) (uint64, error)
	sweep func(ctx context.Context, short func() bool) error
	now   func() time.Time

	mu      sync.Mutex
	checked time.Time
	err     error // why the worker may not claim, or nil
}

func freeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("worker: free disk of %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// check returns nil when there is room to claim, else the reason there is
// not. It measures at most every diskCheckEvery.
func (g *diskGate) check(ctx context.Context) error {
	if g.min <= 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now := g.now(); now.Sub(g.checked) >= diskCheckEvery || g.checked.IsZero() {
		g.checked = now
		g.err = g.measure(ctx)
	}
	return g.err
}

func (g *diskGate) measure(ctx context.Context) error {
	short := func() bool {
		free, err := g.free(g.dir)
		return err == nil && free < uint64(g.min)
	}
	free, err := g.free(g.dir)
	if err != nil {
		return err
	}
	if free >= uint64(g.min) {
		return nil
	}
	if g.sweep != nil {
		_ = g.sweep(ctx, short) // its own failures are logged by the next sweep
		if free, err = g.free(g.dir); err != nil {
			return err
		}
		if free >= uint64(g.min) {
			return nil
		}
	}
	return fmt.Errorf("free disk %s in %s is below worker.min_free_disk %s",
		config.ByteSize(free), g.dir, g.min)
}

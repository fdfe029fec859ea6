package repocache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// Repo is one cached repository: a bare clone of one URL. Everything that
// runs git in it or changes its files holds its lock: the cache's fetches
// and sweeps, and a checkout's worktree add, move and remove, and push.
type Repo struct {
	cache *Cache
	url   string
	dir   string
	sem   chan struct{} // capacity 1: a mutex that respects context cancellation
	gen   atomic.Uint64 // how many times it was quarantined

	// Guarded by sem.
	ready     bool      // exists on disk and verified this process
	fetchedAt time.Time // when the last successful fetch (or clone) started
	fetched   refspecs  // what it fetched
}

// Lock waits for the repository, or for ctx to end.
func (r *Repo) Lock(ctx context.Context) error {
	select {
	case r.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Unlock releases the repository.
func (r *Repo) Unlock() { <-r.sem }

// URL is the repository's URL, normalized: where a checkout pushes.
func (r *Repo) URL() string { return r.url }

// Dir is the bare repository: the git common dir of every checkout of it.
func (r *Repo) Dir() string { return r.dir }

// Generation changes when the repository is quarantined (check.go): what
// was made in it before, a parked checkout among them, went with it.
func (r *Repo) Generation() uint64 { return r.gen.Load() }

// ParkDir is where checkouts of the repository may be parked between
// attempts. The cache's sweep removes what it finds there that its
// caller does not keep (Tidy), and a quarantine takes it along.
func (r *Repo) ParkDir() string { return filepath.Join(r.dir, parkDir) }

// parkDir names ParkDir inside a repository.
const parkDir = "drover-idle"

// SHA256 reports whether the repository's objects are named by SHA-256.
func (r *Repo) SHA256() bool {
	b, err := os.ReadFile(filepath.Join(r.dir, "config"))
	return err == nil && bytes.Contains(b, []byte("objectformat = sha256"))
}

// Commit returns the full id of rev^{commit}, or "" if it names no commit.
// The caller holds the lock.
func (r *Repo) Commit(ctx context.Context, rev string) (string, error) {
	return r.cache.resolveCommit(ctx, r.dir, rev)
}

// Check checks the repository at the end of an attempt: one that changed
// is quarantined (and logged) now, rather than at its next use (check.go).
// The caller holds the lock.
func (r *Repo) Check(ctx context.Context) {
	c := r.cache
	if err := c.checkCache(ctx, r); err != nil && !errors.Is(err, ErrCacheTampered) {
		c.log.WarnContext(ctx, "check repo cache", "dir", r.dir, "err", err)
	}
}

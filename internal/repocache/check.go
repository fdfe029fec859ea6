package repocache

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Verifying caches. Git runs what a repository's config and hooks say:
// fsmonitor, hooks, filters, ssh commands, remote helpers, upload-pack
// programs, includes of other files, alternates that read another
// repository's objects. Agents run confined and cannot write a cache, and
// Drover's own git commands override what they can (internal/git); still, a
// cache whose config, hooks or info changed since Drover made it was
// changed by something that should not have, and the next command could
// run what it planted. So before every use (a Resolve, a Tidy) and after
// every attempt (Repo.Check), the files that steer git are compared with
// the digest taken when the cache was cloned; a cache that changed is moved aside
// into quarantine/, never used again, and cloned anew. A cache made before
// digests existed is trusted when first seen (its digest taken then).

// ErrCacheTampered means a cache's config, hooks or info changed since it
// was cloned; it has been quarantined.
var ErrCacheTampered = errors.New("repocache: repo cache changed behind Drover's back")

const (
	digestFile    = "drover-digest"
	quarantineDir = "quarantine"
)

// steering are the paths of a repository that steer git, as opposed to
// its content (objects, refs), which commands change as they should.
var steering = []string{"config", "hooks", "info", "objects/info/alternates", "objects/info/http-alternates", "commondir", "shallow"}

// digestOf lists what steers git in a repository, one "HASH PATH" line per
// entry, sorted. A symlink is recorded by its target, a directory as one.
func digestOf(dir string) ([]string, error) {
	var out []string
	for _, top := range steering {
		err := filepath.WalkDir(filepath.Join(dir, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			h := sha256.New()
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				t, err := os.Readlink(p)
				if err != nil {
					return err
				}
				fmt.Fprintf(h, "symlink %s", t)
			case d.IsDir():
				fmt.Fprint(h, "dir")
			case d.Type().IsRegular():
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				info, _ := f.Stat()
				fmt.Fprintf(h, "file %o ", info.Mode().Perm()&0o111)
				_, err = io.Copy(h, f)
				f.Close()
				if err != nil {
					return err
				}
			default:
				fmt.Fprintf(h, "special %s", d.Type())
			}
			out = append(out, hex.EncodeToString(h.Sum(nil))+" "+filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("repocache: digest of %s: %w", dir, err)
		}
	}
	slices.Sort(out)
	return out, nil
}

// recordDigest takes a cache's digest.
func recordDigest(dir string) error {
	d, err := digestOf(dir)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, digestFile+".tmp")
	if err := os.WriteFile(tmp, []byte(strings.Join(d, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("repocache: record digest: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, digestFile))
}

// checkCache compares r's cache with its digest and quarantines it when it
// changed, returning ErrCacheTampered with what changed. A cache that does
// not exist is fine. Caller holds r's lock.
func (c *Cache) checkCache(ctx context.Context, r *Repo) error {
	if _, err := os.Lstat(r.dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	now, err := digestOf(r.dir)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(r.dir, digestFile))
	if errors.Is(err, fs.ErrNotExist) {
		c.log.InfoContext(ctx, "repo cache has no digest yet; taking it now", "dir", r.dir)
		return recordDigest(r.dir)
	}
	if err != nil {
		return fmt.Errorf("repocache: read digest of %s: %w", r.dir, err)
	}
	var was []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			was = append(was, l)
		}
	}
	changes := digestChanges(was, now)
	if len(changes) == 0 {
		return nil
	}
	where, qerr := c.quarantine(r)
	if qerr != nil {
		return fmt.Errorf("%w: %s (%s); moving it aside failed: %w", ErrCacheTampered, r.dir, strings.Join(changes, ", "), qerr)
	}
	c.log.ErrorContext(ctx, "repo cache changed behind Drover's back: quarantined, it will be cloned again",
		"url", r.url, "changed", changes, "quarantined", where)
	return fmt.Errorf("%w: %s (%s); moved to %s", ErrCacheTampered, r.url, strings.Join(changes, ", "), where)
}

// digestChanges names what differs between two digests ("config
// modified", "hooks/post-checkout created").
func digestChanges(was, now []string) []string {
	index := func(lines []string) map[string]string {
		m := map[string]string{}
		for _, l := range lines {
			if h, p, ok := strings.Cut(l, " "); ok {
				m[p] = h
			}
		}
		return m
	}
	a, b := index(was), index(now)
	var out []string
	for p, h := range a {
		switch nh, ok := b[p]; {
		case !ok:
			out = append(out, p+" deleted")
		case nh != h:
			out = append(out, p+" modified")
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out = append(out, p+" created")
		}
	}
	slices.Sort(out)
	return out
}

// quarantine moves r's cache aside, never to be used again, and forgets
// everything about it: the checkouts parked in it go with it (its
// Generation changes). Caller holds r's lock.
func (c *Cache) quarantine(r *Repo) (string, error) {
	dir := filepath.Join(c.dir, quarantineDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	dst := filepath.Join(dir, fmt.Sprintf("%s-%s-%s", filepath.Base(r.dir), time.Now().UTC().Format("20060102T150405Z"), hex.EncodeToString(b[:])))
	if err := os.Rename(r.dir, dst); err != nil {
		return "", err
	}
	r.gen.Add(1)
	r.ready, r.fetchedAt, r.fetched = false, time.Time{}, refspecs{}
	return dst, nil
}

// verifyURL checks the cache of a repository (see above), quarantining it
// if it changed. Resolve, Tidy and a checkout's Check check the caches
// they use themselves.
func (c *Cache) verifyURL(ctx context.Context, repoURL string) error {
	r, err := c.repoFor(repoURL)
	if err != nil {
		return err
	}
	if err := r.Lock(ctx); err != nil {
		return err
	}
	defer r.Unlock()
	return c.checkCache(ctx, r)
}

package repocache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/git"
)

// fetchRefspecs are the refspecs of a fetch of everything. Remote branches
// go to refs/remotes/origin/* so a fetch never writes a refs/heads/*
// branch that some live worktree has checked out (git refuses that, and it
// would clobber attempt branches).
var fetchRefspecs = []string{
	"+refs/heads/*:refs/remotes/origin/*",
	"+refs/tags/*:refs/tags/*",
}

// resultBranches is where the attempts' result branches are on the remote
// (drovertype.AttemptBranch names them drover/<flow>/...).
const resultBranches = "refs/heads/drover/"

// cloneRefspecs is what a clone fetches: every branch and tag but the
// result branches, which a remote that served flows holds by the
// thousand, one per attempt. A clone fetched them all, with their
// objects, and kept a ref for each, which every later fetch's
// connectivity check walked until the sweep deleted them: at 10,000
// results the first Prepare of a new worker took a minute and the next
// ones seconds each (BenchmarkRefsOnRemote). A Prepare fetches the
// results it merges by name. Git before 2.29 has no negative refspecs:
// there a clone fetches everything, as before.
func (c *Cache) cloneRefspecs(ctx context.Context) ([]string, refspecs) {
	if !c.git.AtLeast(ctx, 2, 29) {
		return fetchRefspecs, everything
	}
	return append(slices.Clone(fetchRefspecs), "^"+resultBranches+"*"), refspecs{allButResults: true, headOfRemote: true}
}

// sync makes sure the bare clone exists and is at least as up to date as
// the remote was at asked: a fetch that started since then, for anyone,
// is as fresh as one started now, so concurrent callers share it.
// Caller holds r's lock.
func (c *Cache) sync(ctx context.Context, r *Repo, asked time.Time, want refspecs) error {
	if err := c.checkCache(ctx, r); err != nil && !errors.Is(err, ErrCacheTampered) {
		return err // a tampered cache is gone now: cloned anew below
	}
	if r.ready && fetchedSince(r.fetchedAt, asked) && r.fetched.covers(want) {
		return nil
	}
	start := time.Now()
	if dir, ok := LocalPath(r.url); ok {
		// A local repository that is not there: say so plainly, and
		// never retry it (git would say it is no repository).
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return &RepoNotFoundError{RepoURL: r.url, Err: err}
		}
	}
	if !r.ready {
		_, err := os.Stat(r.dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			specs, fetchedSpecs := c.cloneRefspecs(ctx)
			fetched, err := c.clone(ctx, r, specs)
			if err != nil {
				return err
			}
			r.ready = true
			if !fetched {
				break // another process's clone: fetched what, and when, is unknown
			}
			r.fetchedAt, r.fetched = start, fetchedSpecs
			if fetchedSpecs.covers(want) {
				return nil // freshly fetched
			}
		case err != nil:
			return fmt.Errorf("repocache: stat cache %s: %w", r.dir, err)
		default:
			if err := c.verifyOrigin(ctx, r); err != nil {
				return err
			}
			r.ready = true
		}
	}
	if want.all {
		want = everything // the remote's default branch is not known yet
	} else if want.headOfRemote {
		branch, ok := remoteDefaultBranch(r.dir)
		if !ok {
			want = everything
		} else {
			want.specs = append(slices.Clone(want.specs), branchRefspec(branch))
			want.sort()
		}
	}
	if err := c.fetchRefspecs(ctx, r, r.dir, want.list()); err != nil {
		return err
	}
	r.fetchedAt, r.fetched = start, want
	return nil
}

// remoteDefaultBranch reads the remote's default branch from the symbolic
// ref `git remote set-head` wrote (refs/remotes/origin/HEAD, a loose file
// "ref: refs/remotes/origin/<branch>"; git never packs symbolic refs).
func remoteDefaultBranch(gitDir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(gitDir, "refs", "remotes", "origin", "HEAD"))
	if err != nil {
		return "", false
	}
	branch, ok := strings.CutPrefix(strings.TrimSuffix(string(b), "\n"), "ref: refs/remotes/origin/")
	if !ok || !git.PlainBranch(branch) {
		return "", false
	}
	return branch, true
}

// fetchedSince reports whether a fetch that started at fetchedAt saw the
// remote as it was at asked or later.
func fetchedSince(fetchedAt, asked time.Time) bool {
	return !fetchedAt.IsZero() && !fetchedAt.Before(asked)
}

// verifyOrigin checks an existing cache directory belongs to r's URL, so a
// hash collision or a hand-edited cache cannot push to the wrong place.
func (c *Cache) verifyOrigin(ctx context.Context, r *Repo) error {
	got, err := c.git.Output(ctx, git.In(c.dir, "--git-dir="+r.dir, "config", "--get", "remote.origin.url"))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCacheCorrupt, r.dir, err)
	}
	if got != r.url {
		return fmt.Errorf("%w: %s has origin %q, want %q", ErrCacheCorrupt, r.dir, got, r.url)
	}
	return nil
}

// clone creates the bare cache under a temporary name and renames it into
// place, so a crash mid-clone never leaves a half cache that later gets used.
// fetched is false when another process's clone won the race and is used
// instead: when that one fetched is unknown.
//
// It is init + fetch rather than `git clone --bare`: clone --bare copies the
// remote's branches into refs/heads/*, where they would collide with attempt
// branches of the same name; we want them in refs/remotes/origin/* only.
func (c *Cache) clone(ctx context.Context, r *Repo, specs []string) (fetched bool, err error) {
	c.log.InfoContext(ctx, "cloning repository into cache", "url", r.url, "dir", r.dir)
	tmp, err := os.MkdirTemp(c.dir, cloneTempPrefix+filepath.Base(r.dir)+"-")
	if err != nil {
		return false, fmt.Errorf("repocache: clone temp dir: %w", err)
	}
	defer func() {
		if err != nil {
			if rmErr := os.RemoveAll(tmp); rmErr != nil {
				c.log.WarnContext(ctx, "removing failed clone", "dir", tmp, "err", rmErr)
			}
		}
	}()
	if _, err := c.git.Run(ctx, git.Cmd{Dir: tmp, Args: []string{"init", "--quiet", "--bare", "--template="}}); err != nil {
		return false, err
	}
	gd := "--git-dir=" + tmp
	if _, err := c.git.Run(ctx, git.In(c.dir, gd, "remote", "add", "origin", r.url)); err != nil {
		return false, err
	}
	if err := c.fetchRefspecs(ctx, r, tmp, specs); err != nil {
		return false, err
	}
	// Record the remote's default branch once, for Base "HEAD". An empty
	// remote has none yet; resolve retries later.
	if _, err := c.git.Run(ctx, git.In(c.dir, gd, "remote", "set-head", "origin", "--auto")); err != nil {
		c.log.DebugContext(ctx, "remote has no default branch yet", "url", r.url, "err", err)
	}
	if err := recordDigest(tmp); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, r.dir); err != nil {
		// Another process may have won the race; use its clone if it is ours.
		if _, statErr := os.Stat(r.dir); statErr == nil {
			if vErr := c.verifyOrigin(ctx, r); vErr == nil {
				_ = os.RemoveAll(tmp)
				return false, nil
			}
		}
		return false, fmt.Errorf("repocache: move clone into place: %w", err)
	}
	return true, nil
}

func (c *Cache) fetchRefspecs(ctx context.Context, r *Repo, gitDir string, specs []string) error {
	args := []string{"--git-dir=" + gitDir, "fetch", "--quiet", "--prune", "--no-write-fetch-head",
		"--no-recurse-submodules", "origin"}
	args = append(args, specs...)
	if _, err := c.git.Run(ctx, git.In(c.dir, args...)); err != nil {
		if err := classifyFetch(r.url, err); errors.Is(err, ErrRepoNotFound) {
			return err
		}
		return fmt.Errorf("repocache: fetch %s: %w", r.url, err)
	}
	return nil
}

package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Default identity for commits and merges Drover makes.
const (
	DefaultAuthorName  = "Drover"
	DefaultAuthorEmail = "drover@localhost"
)

// cloneTempPrefix names clones in progress inside the cache directory.
const cloneTempPrefix = ".clone-"

// DefaultMaxDiffBytes bounds Changes.Diff unless CacheOptions says otherwise.
const DefaultMaxDiffBytes = 8 << 20

// fetchRefspecs are the refspecs of every fetch. Remote branches go to refs/remotes/origin/*
// so a fetch never writes a refs/heads/* branch that some live worktree has
// checked out (git refuses that, and it would clobber attempt branches).
var fetchRefspecs = []string{
	"+refs/heads/*:refs/remotes/origin/*",
	"+refs/tags/*:refs/tags/*",
}

// CacheOptions configures a Cache.
type CacheOptions struct {
	Dir    string       // required: where bare clones live; created if missing
	Git    string       // git binary; defaults to "git" from PATH
	Logger *slog.Logger // defaults to discarding

	// Identity used for the checkpoint commits and merges Drover makes.
	AuthorName, AuthorEmail string // default "Drover", "drover@localhost"

	// Env is extra environment for git, as KEY=VALUE (e.g. SSH_AUTH_SOCK or
	// GIT_SSH_COMMAND for private remotes). Everything else but PATH and
	// HOME is withheld from git.
	Env []string

	// MaxDiffBytes bounds Changes.Diff; longer diffs are cut and flagged.
	// Defaults to DefaultMaxDiffBytes.
	MaxDiffBytes int64

	// IdleWorktrees is how many released checkouts the cache keeps for
	// later Prepares to reuse (see Release); 0 keeps none.
	IdleWorktrees int

	// Confine, if set, makes cmd run confined, reading nothing but the
	// system's programs and the given paths, writing nothing: the git
	// commands Drover runs in an agent's repository (agentgit.go) go
	// through it. The returned func is called once cmd has run.
	Confine func(cmd *exec.Cmd, read []string) (done func(), err error)

	// BatchMerges is the fewest results a Prepare must merge for it to try
	// merging them in one batch (batchmerge.go) before git merges the rest
	// one by one; negative never batches. Defaults to 3: the batch costs
	// three git processes, a merge on its own two.
	BatchMerges int
}

// Cache keeps one bare clone per repository URL and prepares worktrees from
// them. It is safe for concurrent use: operations on one repository are
// serialized (git's own lock files would otherwise make concurrent fetches
// and worktree adds fail); different repositories proceed in parallel.
type Cache struct {
	dir         string
	gitBin      string
	log         *slog.Logger
	authorName  string
	authorEmail string
	extraEnv    []string
	maxDiff     int64
	maxIdle     int
	confine     func(cmd *exec.Cmd, read []string) (func(), error)

	batchFrom     int // Prepare tries batchMerges from this many results
	mergeTreeOnce sync.Once
	mergeTree     bool // git has `merge-tree --write-tree` (2.38)

	mu    sync.Mutex
	repos map[string]*repo // by cache directory
	idle  []*idleWorktree  // parked checkouts, oldest first
}

// repo is the in-process state of one cached repository.
type repo struct {
	url string
	dir string
	sem chan struct{} // capacity 1: a mutex that respects context cancellation

	// Guarded by sem.
	ready     bool      // exists on disk and verified this process
	fetchedAt time.Time // when the last successful fetch (or clone) started
	fetched   refspecs  // what it fetched
}

func (r *repo) lock(ctx context.Context) error {
	select {
	case r.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *repo) unlock() { <-r.sem }

// NewCache validates opts and creates the cache directory if needed.
func NewCache(opts CacheOptions) (*Cache, error) {
	if opts.Dir == "" {
		return nil, errors.New("worktree: CacheOptions.Dir is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("worktree: cache dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("worktree: create cache dir: %w", err)
	}
	// Resolve symlinks once so the "worktree inside cache" check compares
	// like with like.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	gitName := opts.Git
	if gitName == "" {
		gitName = "git"
	}
	gitBin, err := exec.LookPath(gitName)
	if err != nil {
		return nil, fmt.Errorf("worktree: git binary: %w", err)
	}
	for _, kv := range opts.Env {
		if !strings.Contains(kv, "=") {
			return nil, fmt.Errorf("worktree: CacheOptions.Env entry %q is not KEY=VALUE", kv)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cache{
		dir:         dir,
		gitBin:      gitBin,
		log:         log,
		authorName:  opts.AuthorName,
		authorEmail: opts.AuthorEmail,
		extraEnv:    append([]string(nil), opts.Env...),
		maxDiff:     opts.MaxDiffBytes,
		maxIdle:     max(opts.IdleWorktrees, 0),
		confine:     opts.Confine,
		batchFrom:   opts.BatchMerges,
		repos:       make(map[string]*repo),
	}
	if c.authorName == "" {
		c.authorName = DefaultAuthorName
	}
	if c.authorEmail == "" {
		c.authorEmail = DefaultAuthorEmail
	}
	if c.maxDiff <= 0 {
		c.maxDiff = DefaultMaxDiffBytes
	}
	switch {
	case c.batchFrom == 0:
		c.batchFrom = minBatchMerges
	case c.batchFrom < 0:
		c.batchFrom = math.MaxInt
	}
	c.removeStaleClones()
	return c, nil
}

// staleCloneAge is how old an unfinished clone must be before it is taken
// as left by a crashed process rather than one still cloning.
const staleCloneAge = 24 * time.Hour

// removeStaleClones deletes temporary clone directories left by crashes.
// Best effort: they are never used, only wasting disk.
func (c *Cache) removeStaleClones() {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		c.log.Warn("listing cache dir", "dir", c.dir, "err", err)
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), cloneTempPrefix) {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < staleCloneAge {
			continue
		}
		p := filepath.Join(c.dir, e.Name())
		if err := os.RemoveAll(p); err != nil {
			c.log.Warn("removing stale clone", "dir", p, "err", err)
			continue
		}
		c.log.Info("removed stale clone", "dir", p)
	}
}

// Dir returns the absolute cache directory.
func (c *Cache) Dir() string { return c.dir }

// RepoDir returns the bare clone directory used for a repository URL
// (whether or not it exists yet).
func (c *Cache) RepoDir(repoURL string) (string, error) {
	u, err := normalizeURL(repoURL)
	if err != nil {
		return "", err
	}
	return filepath.Join(c.dir, repoDirName(u)), nil
}

// repoFor returns the shared state for a URL, creating it on first use.
func (c *Cache) repoFor(repoURL string) (*repo, error) {
	u, err := normalizeURL(repoURL)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.dir, repoDirName(u))
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.repos[dir]
	if !ok {
		r = &repo{url: u, dir: dir, sem: make(chan struct{}, 1)}
		c.repos[dir] = r
	}
	if r.url == "" {
		r.url = u // first seen by a sweep, which knows only its directory
	}
	return r, nil
}

// normalizeURL accepts URLs (scheme://..., scp-like user@host:path) and
// absolute local paths. Relative paths are refused: git would resolve them
// against whatever directory it happens to run in.
func normalizeURL(u string) (string, error) {
	if u == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidRepoURL)
	}
	if strings.HasPrefix(u, "-") || strings.ContainsAny(u, "\x00\n\r") {
		return "", fmt.Errorf("%w: %q", ErrInvalidRepoURL, u)
	}
	// <transport>::<address> makes git run the remote helper
	// git-remote-<transport> (ext:: runs any command); git checks for it
	// before anything else. GIT_ALLOW_PROTOCOL (see baseEnv) refuses it too.
	if helperSyntax.MatchString(u) {
		return "", fmt.Errorf("%w: %q uses git's transport::address (remote helper) syntax", ErrInvalidRepoURL, u)
	}
	if strings.Contains(u, "://") {
		return u, nil
	}
	if filepath.IsAbs(u) {
		return filepath.Clean(u), nil
	}
	// scp-like syntax: a colon before the first slash.
	if i := strings.IndexByte(u, ':'); i > 0 && !strings.Contains(u[:i], "/") {
		return u, nil
	}
	return "", fmt.Errorf("%w: %q is neither a URL nor an absolute path", ErrInvalidRepoURL, u)
}

// LocalPath returns the directory a repository URL names on this host (an
// absolute path or a file:// URL), cleaned and with symlinks resolved;
// ok is false for a remote repository.
func LocalPath(repoURL string) (dir string, ok bool) {
	switch {
	case strings.HasPrefix(strings.ToLower(repoURL), "file://"):
		u, err := url.Parse(repoURL)
		if err != nil || u.Host != "" && u.Host != "localhost" {
			return "", false
		}
		dir = u.Path
	case filepath.IsAbs(repoURL):
		dir = repoURL
	default:
		return "", false
	}
	dir = filepath.Clean(dir)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return dir, true
}

var helperSyntax = regexp.MustCompile(`^[A-Za-z0-9+.-]*::`)

// repoDirName is a hash of the URL (unique) plus its last path element
// (readable when someone looks at the disk).
func repoDirName(u string) string {
	sum := sha256.Sum256([]byte(u))
	base := strings.TrimRight(u, "/")
	if i := strings.LastIndexAny(base, "/:\\"); i >= 0 {
		base = base[i+1:]
	}
	base = strings.TrimSuffix(base, ".git")
	var b strings.Builder
	for _, r := range base {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	name := strings.Trim(b.String(), ".")
	if name == "" {
		name = "repo"
	}
	return hex.EncodeToString(sum[:8]) + "-" + name + ".git"
}

// sync makes sure the bare clone exists and is at least as up to date as
// the remote was at asked: a fetch that started since then, for anyone,
// is as fresh as one started now, so concurrent callers share it.
// Caller holds r's lock.
func (c *Cache) sync(ctx context.Context, r *repo, asked time.Time, want refspecs) error {
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
			fetched, err := c.clone(ctx, r)
			if err != nil {
				return err
			}
			r.ready = true
			if fetched {
				r.fetchedAt, r.fetched = start, everything
			}
			return nil // freshly fetched
		case err != nil:
			return fmt.Errorf("worktree: stat cache %s: %w", r.dir, err)
		}
		if err := c.verify(ctx, r); err != nil {
			return err
		}
		r.ready = true
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

// fetchedSince reports whether a fetch that started at fetchedAt saw the
// remote as it was at asked or later.
func fetchedSince(fetchedAt, asked time.Time) bool {
	return !fetchedAt.IsZero() && !fetchedAt.Before(asked)
}

// verify checks an existing cache directory belongs to r's URL, so a hash
// collision or a hand-edited cache cannot push to the wrong place.
func (c *Cache) verify(ctx context.Context, r *repo) error {
	got, err := c.out(ctx, gitRun{args: []string{"--git-dir=" + r.dir, "config", "--get", "remote.origin.url"}})
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
func (c *Cache) clone(ctx context.Context, r *repo) (fetched bool, err error) {
	c.log.InfoContext(ctx, "cloning repository into cache", "url", r.url, "dir", r.dir)
	tmp, err := os.MkdirTemp(c.dir, cloneTempPrefix+filepath.Base(r.dir)+"-")
	if err != nil {
		return false, fmt.Errorf("worktree: clone temp dir: %w", err)
	}
	defer func() {
		if err != nil {
			if rmErr := os.RemoveAll(tmp); rmErr != nil {
				c.log.WarnContext(ctx, "removing failed clone", "dir", tmp, "err", rmErr)
			}
		}
	}()
	if _, err := c.run(ctx, gitRun{dir: tmp, args: []string{"init", "--quiet", "--bare", "--template="}}); err != nil {
		return false, err
	}
	gd := "--git-dir=" + tmp
	if _, err := c.run(ctx, gitRun{args: []string{gd, "remote", "add", "origin", r.url}}); err != nil {
		return false, err
	}
	if err := c.fetch(ctx, r, tmp); err != nil {
		return false, err
	}
	// Record the remote's default branch once, for Base "HEAD". An empty
	// remote has none yet; resolve retries later.
	if _, err := c.run(ctx, gitRun{args: []string{gd, "remote", "set-head", "origin", "--auto"}}); err != nil {
		c.log.DebugContext(ctx, "remote has no default branch yet", "url", r.url, "err", err)
	}
	if err := recordDigest(tmp); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, r.dir); err != nil {
		// Another process may have won the race; use its clone if it is ours.
		if _, statErr := os.Stat(r.dir); statErr == nil {
			if vErr := c.verify(ctx, r); vErr == nil {
				_ = os.RemoveAll(tmp)
				return false, nil
			}
		}
		return false, fmt.Errorf("worktree: move clone into place: %w", err)
	}
	return true, nil
}

func (c *Cache) fetch(ctx context.Context, r *repo, gitDir string) error {
	return c.fetchRefspecs(ctx, r, gitDir, fetchRefspecs)
}

func (c *Cache) fetchRefspecs(ctx context.Context, r *repo, gitDir string, specs []string) error {
	args := []string{"--git-dir=" + gitDir, "fetch", "--quiet", "--prune", "--no-write-fetch-head",
		"--no-recurse-submodules", "origin"}
	args = append(args, specs...)
	if _, err := c.run(ctx, gitRun{args: args}); err != nil {
		if err := classifyFetch(r.url, err); errors.Is(err, ErrRepoNotFound) {
			return err
		}
		return fmt.Errorf("worktree: fetch %s: %w", r.url, err)
	}
	return nil
}

// resolveCommit returns the full sha of rev^{commit}, or "" if it does not
// name a commit.
func (c *Cache) resolveCommit(ctx context.Context, gitDir, rev string) (string, error) {
	out, err := c.out(ctx, gitRun{args: []string{"--git-dir=" + gitDir, "rev-parse", "--verify", "--quiet", rev + "^{commit}"}})
	if err != nil {
		if exitCode(err) == 1 { // --quiet: 1 is "no such commit"; 128 is a broken repo
			return "", nil
		}
		return "", err
	}
	return out, nil
}

// resolveCommits resolves each rev^{commit} in one git process: the full
// sha, or "" where rev names no commit. Anything but those two answers is
// an error, and the caller asks rev-parse instead.
func (c *Cache) resolveCommits(ctx context.Context, gitDir string, revs ...string) ([]string, error) {
	var in strings.Builder
	for _, rev := range revs {
		if strings.ContainsAny(rev, "\n\x00") {
			return nil, fmt.Errorf("worktree: revision %q", rev)
		}
		in.WriteString(rev + "^{commit}\n")
	}
	res, err := c.run(ctx, gitRun{args: []string{"--git-dir=" + gitDir, "cat-file", "--batch-check=%(objectname) %(objecttype)"},
		stdin: in.String()})
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(res.stdout), "\n"), "\n")
	if len(lines) != len(revs) {
		return nil, fmt.Errorf("worktree: cat-file answered %d lines for %d revisions", len(lines), len(revs))
	}
	shas := make([]string, len(revs))
	for i, line := range lines {
		switch sha, typ, _ := strings.Cut(line, " "); {
		case line == revs[i]+"^{commit} missing":
		case typ == "commit" && isObjectID(sha):
			shas[i] = sha
		default:
			return nil, fmt.Errorf("worktree: cat-file answered %q for %s", line, revs[i])
		}
	}
	return shas, nil
}

// resolveBaseAndBranch is resolveBase, and resolveCommit of the attempt
// branch (which must not exist yet), in one process when the base is a
// branch of the remote, its first candidate; otherwise as those two do.
// Caller holds r's lock.
func (c *Cache) resolveBaseAndBranch(ctx context.Context, r *repo, base, branch string) (baseSHA, branchSHA string, err error) {
	if ref := baseBranchRef(base); ref != "" {
		shas, err := c.resolveCommits(ctx, r.dir, ref, "refs/heads/"+branch)
		if err == nil && shas[0] != "" {
			return shas[0], shas[1], nil
		}
		if ctx.Err() != nil {
			return "", "", context.Cause(ctx)
		}
	}
	if baseSHA, err = c.resolveBase(ctx, r, base); err != nil {
		return "", "", err
	}
	branchSHA, err = c.resolveCommit(ctx, r.dir, "refs/heads/"+branch)
	return baseSHA, branchSHA, err
}

// baseBranchRef is the remote-tracking ref resolveBase tries first for
// base, "" when it would try none (a tag, or a revision it refuses).
func baseBranchRef(base string) string {
	switch {
	case base == "" || base == "HEAD":
		return "refs/remotes/origin/HEAD"
	case checkRevision(base) != nil || strings.HasPrefix(base, "refs/tags/"):
		return ""
	case strings.HasPrefix(base, "refs/heads/"):
		return "refs/remotes/origin/" + strings.TrimPrefix(base, "refs/heads/")
	}
	return "refs/remotes/origin/" + base
}

// resolveBase resolves a base revision: "HEAD" is the remote's default
// branch; otherwise a remote branch, then a tag, then a raw commit sha.
// Caller holds r's lock.
func (c *Cache) resolveBase(ctx context.Context, r *repo, base string) (string, error) {
	notFound := &RevisionNotFoundError{RepoURL: r.url, Revision: base, Base: true}
	if base == "" || base == "HEAD" {
		base = "HEAD"
		notFound.Revision = base
		sha, err := c.resolveCommit(ctx, r.dir, "refs/remotes/origin/HEAD")
		if err != nil || sha != "" {
			return sha, err
		}
		// The default branch was unknown at clone time (empty remote) or
		// has since been deleted; ask the remote again.
		if _, err := c.run(ctx, gitRun{args: []string{"--git-dir=" + r.dir, "remote", "set-head", "origin", "--auto"}}); err != nil {
			return "", fmt.Errorf("%w: %w", notFound, err)
		}
		sha, err = c.resolveCommit(ctx, r.dir, "refs/remotes/origin/HEAD")
		if err != nil {
			return "", err
		}
		if sha == "" {
			return "", notFound
		}
		return sha, nil
	}
	if err := checkRevision(base); err != nil {
		return "", err
	}
	var candidates []string
	switch {
	case strings.HasPrefix(base, "refs/heads/"):
		candidates = []string{"refs/remotes/origin/" + strings.TrimPrefix(base, "refs/heads/")}
	case strings.HasPrefix(base, "refs/tags/"):
		candidates = []string{base}
	default:
		candidates = []string{"refs/remotes/origin/" + base, "refs/tags/" + base}
	}
	for _, ref := range candidates {
		sha, err := c.resolveCommit(ctx, r.dir, ref)
		if err != nil {
			return "", err
		}
		if sha != "" {
			return sha, nil
		}
	}
	if !isHex(base) {
		return "", notFound
	}
	return c.resolveSHA(ctx, r, base, notFound)
}

// resolveSHA resolves a (possibly abbreviated) hex commit id. A commit not
// reachable from any branch or tag is fetched by id as a last resort.
func (c *Cache) resolveSHA(ctx context.Context, r *repo, sha string, notFound error) (string, error) {
	if !isHex(sha) {
		return "", notFound
	}
	got, err := c.resolveCommit(ctx, r.dir, sha)
	if err != nil || got != "" {
		return got, err
	}
	if len(sha) == 40 || len(sha) == 64 {
		// Servers may refuse want-by-sha; failure just means "not found".
		if _, err := c.run(ctx, gitRun{args: []string{"--git-dir=" + r.dir, "fetch", "--quiet", "--no-write-fetch-head", "origin", sha}}); err != nil {
			c.log.DebugContext(ctx, "fetch by sha failed", "sha", sha, "err", err)
		}
		got, err = c.resolveCommit(ctx, r.dir, sha)
		if err != nil || got != "" {
			return got, err
		}
	}
	return "", notFound
}

// checkRevision rejects strings that could be read as options or that
// contain characters no ref or sha has.
func checkRevision(rev string) error {
	if strings.HasPrefix(rev, "-") || strings.ContainsAny(rev, " \t\n\r\x00:") {
		return fmt.Errorf("%w: %q", ErrInvalidRevision, rev)
	}
	return nil
}

func isHex(s string) bool {
	if len(s) < 4 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b >= '0' && b <= '9', b >= 'a' && b <= 'f':
		default:
			return false
		}
	}
	return true
}

// checkBranch validates a branch name, and refuses names git would expand
// (like @{-1}) rather than take literally. Plain names are checked here;
// git itself judges the rest.
func (c *Cache) checkBranch(ctx context.Context, branch string) error {
	if branch == "" || strings.HasPrefix(branch, "-") {
		return fmt.Errorf("%w: %q", ErrInvalidBranch, branch)
	}
	if plainBranch(branch) {
		return nil
	}
	return c.checkBranchGit(ctx, branch)
}

// checkBranchGit asks `git check-ref-format --branch`.
func (c *Cache) checkBranchGit(ctx context.Context, branch string) error {
	out, err := c.out(ctx, gitRun{args: []string{"check-ref-format", "--branch", branch}})
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("%w: %q: %w", ErrInvalidBranch, branch, err)
	}
	if out != branch {
		return fmt.Errorf("%w: %q expands to %q", ErrInvalidBranch, branch, out)
	}
	return nil
}

// plainBranch reports whether git certainly accepts branch as a branch name
// and takes it literally: only ASCII letters, digits and "._-/" (so nothing
// git expands, like @{-1}), and git's ref rules hold. False means "ask git",
// not "invalid": it also refuses some names git accepts.
func plainBranch(branch string) bool {
	if branch == "" || branch == "HEAD" || strings.HasSuffix(branch, ".") || strings.Contains(branch, "..") {
		return false
	}
	for i := 0; i < len(branch); i++ {
		switch b := branch[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '.', b == '_', b == '-', b == '/':
		default:
			return false
		}
	}
	for comp := range strings.SplitSeq(branch, "/") {
		if comp == "" || comp[0] == '.' || comp[0] == '-' || strings.HasSuffix(comp, ".lock") {
			return false
		}
	}
	return true
}

// mergeTreeWorks reports whether git can merge without a worktree
// (`git merge-tree --write-tree`, git 2.38), asking git once.
func (c *Cache) mergeTreeWorks(ctx context.Context) bool {
	c.mergeTreeOnce.Do(func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		v, err := c.out(cctx, gitRun{args: []string{"version"}})
		c.mergeTree = err == nil && gitAtLeast(v, 2, 38)
	})
	return c.mergeTree
}

// gitAtLeast reports whether `git version` output v is major.minor or
// later ("git version 2.39.5", "git version 2.40.1.windows.1").
func gitAtLeast(v string, major, minor int) bool {
	f := strings.Fields(v)
	if len(f) < 3 {
		return false
	}
	parts := strings.SplitN(f[2], ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

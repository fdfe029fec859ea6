package repocache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/git"
)

// cloneTempPrefix names clones in progress inside the cache directory.
const cloneTempPrefix = ".clone-"

// Options configures a Cache.
type Options struct {
	// Dir is where the bare clones live; created if missing. Required.
	Dir string
	// Git runs every git command of the cache, and of the checkouts made
	// from it. Defaults to git.New with Logger.
	Git *git.Git
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Cache keeps one bare clone per repository URL. It is safe for concurrent
// use: operations on one repository are serialized by its lock (git's own
// lock files would otherwise make concurrent fetches and worktree adds
// fail); different repositories proceed in parallel.
type Cache struct {
	dir string
	git *git.Git
	log *slog.Logger

	mu    sync.Mutex
	repos map[string]*Repo // by cache directory
}

// New validates opts and creates the cache directory if needed.
func New(opts Options) (*Cache, error) {
	if opts.Dir == "" {
		return nil, errors.New("repocache: Options.Dir is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("repocache: cache dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("repocache: create cache dir: %w", err)
	}
	// Resolve symlinks once so that a checkout's "inside the cache" check
	// compares like with like.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := opts.Git
	if g == nil {
		if g, err = git.New(git.Options{Logger: log}); err != nil {
			return nil, fmt.Errorf("repocache: %w", err)
		}
	}
	c := &Cache{dir: dir, git: g, log: log, repos: make(map[string]*Repo)}
	c.removeStaleClones()
	return c, nil
}

// Dir is the absolute cache directory, symlinks resolved.
func (c *Cache) Dir() string { return c.dir }

// Git is what runs git for the cache: the checkouts made from it use it
// too.
func (c *Cache) Git() *git.Git { return c.git }

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
func (c *Cache) repoFor(repoURL string) (*Repo, error) {
	u, err := normalizeURL(repoURL)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.dir, repoDirName(u))
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.repos[dir]
	if !ok {
		r = &Repo{cache: c, url: u, dir: dir, sem: make(chan struct{}, 1)}
		c.repos[dir] = r
	}
	if r.url == "" {
		r.url = u // first seen by a sweep, which knows only its directory
	}
	return r, nil
}

// repoAt returns the shared state of the cached repository in dir, whose
// URL may not be known to this process yet.
func (c *Cache) repoAt(dir string) *Repo {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.repos[dir]
	if !ok {
		r = &Repo{cache: c, dir: dir, sem: make(chan struct{}, 1)}
		c.repos[dir] = r
	}
	return r
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
	// before anything else. GIT_ALLOW_PROTOCOL (internal/git) refuses it
	// too.
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

var helperSyntax = regexp.MustCompile(`^[A-Za-z0-9+.-]*::`)

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

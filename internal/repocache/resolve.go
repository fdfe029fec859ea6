package repocache

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/git"
)

// Resolved is a repository brought up to date for a Request, with the
// Request's revisions resolved. Its Repo is locked: the caller makes its
// checkout and unlocks it.
type Resolved struct {
	Repo *Repo
	// Base is the commit Request.Base names.
	Base string
	// Merge are the commits of Request.Merge, in order; "" where merging
	// changes nothing: a result at the base commit, or at one merged
	// before it.
	Merge []string
}

// Resolve validates req, brings the repository's cache up to date for it
// (cloning it on first use, fetching what req needs unless a fetch that
// started since Resolve was called brought it) and resolves the base, the
// results to merge, and the new branch, which must not exist. It returns
// with the repository locked; on error, nothing is locked.
func (c *Cache) Resolve(ctx context.Context, req Request) (_ *Resolved, err error) {
	r, err := c.check(ctx, req)
	if err != nil {
		return nil, err
	}
	asked := time.Now() // before waiting: a fetch made meanwhile will do
	if err := r.Lock(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			r.Unlock()
		}
	}()
	if err := c.sync(ctx, r, asked, wantedRefspecs(req.Base, req.Merge)); err != nil {
		return nil, err
	}
	base, branch, err := c.resolveBaseAndBranch(ctx, r, req.Base, req.Branch)
	if err != nil {
		return nil, err
	}
	if branch != "" {
		return nil, fmt.Errorf("%w: %s (at %s)", ErrBranchExists, req.Branch, git.ShortID(branch))
	}
	merge, err := c.resolveMerges(ctx, r, base, req.Merge)
	if err != nil {
		return nil, err
	}
	return &Resolved{Repo: r, Base: base, Merge: merge}, nil
}

// resolveMerges resolves the results to merge into base. A result at the
// base commit, or at one merged before it, changes nothing and is neither
// resolved nor merged (its sha stays ""): a task that commits nothing
// reports its base as its result, and a flow of 10,000 such tasks would
// otherwise have its integration run 10,000 merges that do nothing, and
// twice as many rev-parses.
func (c *Cache) resolveMerges(ctx context.Context, r *Repo, base string, merges []Ref) ([]string, error) {
	shas := make([]string, len(merges))
	done := map[string]bool{base: true}
	var listed map[string]string
	if len(merges) >= listRefsFrom {
		var err error
		if listed, err = c.remoteCommits(ctx, r); err != nil {
			return nil, err
		}
	}
	for i, m := range merges {
		if done[m.Commit] {
			continue
		}
		sha, ok := listed[m.Branch]
		if !ok || (m.Commit != "" && m.Commit != sha) {
			var err error
			if sha, err = c.resolveMergeRef(ctx, r, m); err != nil {
				return nil, err
			}
		}
		if !done[sha] {
			done[sha], shas[i] = true, sha
		}
	}
	return shas, nil
}

// listRefsFrom is how many results a Resolve must merge for their branches
// to be read in one `git for-each-ref` rather than two `git rev-parse`
// each: an integration build merges every result of its flow.
const listRefsFrom = 8

// remoteCommits maps the cache's remote branches that point at commits to
// their commits, in one git process. Caller holds r's lock.
func (c *Cache) remoteCommits(ctx context.Context, r *Repo) (map[string]string, error) {
	res, err := c.git.Run(ctx, git.In(c.dir, "--git-dir="+r.dir, "for-each-ref",
		"--format=%(objectname) %(objecttype) %(refname)", "refs/remotes/origin/"))
	if err != nil {
		return nil, fmt.Errorf("repocache: list result branches: %w", err)
	}
	refs := map[string]string{}
	for line := range strings.Lines(string(res.Stdout)) {
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 3)
		if len(f) != 3 || f[1] != "commit" || !git.IsObjectID(f[0]) {
			continue // a tag or anything odd: resolveMergeRef decides
		}
		if branch, ok := strings.CutPrefix(f[2], "refs/remotes/origin/"); ok {
			refs[branch] = f[0]
		}
	}
	return refs, nil
}

// resolveMergeRef finds a result branch under refs/remotes/origin and
// checks it is where the caller expects. Caller holds r's lock.
func (c *Cache) resolveMergeRef(ctx context.Context, r *Repo, m Ref) (string, error) {
	sha, err := c.resolveCommit(ctx, r.dir, "refs/remotes/origin/"+m.Branch)
	if err != nil {
		return "", err
	}
	if sha == "" {
		return "", fmt.Errorf("repocache: merge ref: %w", &RevisionNotFoundError{RepoURL: r.url, Revision: m.Branch})
	}
	if m.Commit == "" {
		return sha, nil
	}
	want, err := c.resolveCommit(ctx, r.dir, m.Commit)
	if err != nil {
		return "", err
	}
	if want != sha {
		if want == "" {
			want = m.Commit
		}
		return "", &RefMismatchError{Branch: m.Branch, Want: want, Got: sha}
	}
	return sha, nil
}

// resolveCommit returns the full sha of rev^{commit}, or "" if it does not
// name a commit.
func (c *Cache) resolveCommit(ctx context.Context, gitDir, rev string) (string, error) {
	out, err := c.git.Output(ctx, git.In(c.dir, "--git-dir="+gitDir, "rev-parse", "--verify", "--quiet", rev+"^{commit}"))
	if err != nil {
		if git.ExitCode(err) == 1 { // --quiet: 1 is "no such commit"; 128 is a broken repo
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
			return nil, fmt.Errorf("repocache: revision %q", rev)
		}
		in.WriteString(rev + "^{commit}\n")
	}
	cmd := git.In(c.dir, "--git-dir="+gitDir, "cat-file", "--batch-check=%(objectname) %(objecttype)")
	cmd.Stdin = strings.NewReader(in.String())
	res, err := c.git.Run(ctx, cmd)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(res.Stdout), "\n"), "\n")
	if len(lines) != len(revs) {
		return nil, fmt.Errorf("repocache: cat-file answered %d lines for %d revisions", len(lines), len(revs))
	}
	shas := make([]string, len(revs))
	for i, line := range lines {
		switch sha, typ, _ := strings.Cut(line, " "); {
		case line == revs[i]+"^{commit} missing":
		case typ == "commit" && git.IsObjectID(sha):
			shas[i] = sha
		default:
			return nil, fmt.Errorf("repocache: cat-file answered %q for %s", line, revs[i])
		}
	}
	return shas, nil
}

// resolveBaseAndBranch is resolveBase, and resolveCommit of the attempt
// branch (which must not exist yet), in one process when the base is a
// branch of the remote, its first candidate; otherwise as those two do.
// Caller holds r's lock.
func (c *Cache) resolveBaseAndBranch(ctx context.Context, r *Repo, base, branch string) (baseSHA, branchSHA string, err error) {
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
func (c *Cache) resolveBase(ctx context.Context, r *Repo, base string) (string, error) {
	notFound := &RevisionNotFoundError{RepoURL: r.url, Revision: base, Base: true}
	if base == "" || base == "HEAD" {
		notFound.Revision = "HEAD"
		return c.resolveRemoteHead(ctx, r, notFound)
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
	if !git.IsHex(base) {
		return "", notFound
	}
	return c.resolveSHA(ctx, r, base, notFound)
}

// resolveRemoteHead resolves the remote's default branch.
func (c *Cache) resolveRemoteHead(ctx context.Context, r *Repo, notFound *RevisionNotFoundError) (string, error) {
	sha, err := c.resolveCommit(ctx, r.dir, "refs/remotes/origin/HEAD")
	if err != nil || sha != "" {
		return sha, err
	}
	// The default branch was unknown at clone time (empty remote) or
	// has since been deleted; ask the remote again.
	if _, err := c.git.Run(ctx, git.In(c.dir, "--git-dir="+r.dir, "remote", "set-head", "origin", "--auto")); err != nil {
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

// resolveSHA resolves a (possibly abbreviated) hex commit id. A commit not
// reachable from any branch or tag is fetched by id as a last resort.
func (c *Cache) resolveSHA(ctx context.Context, r *Repo, sha string, notFound error) (string, error) {
	if !git.IsHex(sha) {
		return "", notFound
	}
	got, err := c.resolveCommit(ctx, r.dir, sha)
	if err != nil || got != "" {
		return got, err
	}
	if len(sha) == 40 || len(sha) == 64 {
		// Servers may refuse want-by-sha; failure just means "not found".
		if _, err := c.git.Run(ctx, git.In(c.dir, "--git-dir="+r.dir, "fetch", "--quiet", "--no-write-fetch-head", "origin", sha)); err != nil {
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

package checkout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/git"
)

// The agent's git dir. A `git worktree add` checkout shares its repository
// with every other worktree of the cache: a commit writes objects into the
// cache's object store and its branch into the cache's refs, so an agent
// that may commit may also rewrite the cache's refs, hooks and config, and
// replace objects other attempts read. Instead, each worktree's .git is a
// repository of the agent's own (Prepare makes it; Checkpoint makes it
// again at the checkpoint), whose objects dir borrows the cache's
// read-only (objects/info/alternates) and holds whatever the agent
// commits, with the attempt's branch, HEAD and a copy of Drover's index.
// The agent's git never reads the cache's config, refs or hooks, and a
// confined agent may read only the cache's objects.
//
// Drover's own git commands never use it: they run with GIT_DIR set to the
// worktree's private git dir in the cache (`git worktree add`'s, here the
// "admin dir"), whose config, hooks and refs no agent can write. After the
// agent ran, Observe brings its commits over: where the agent's HEAD points
// is read from its files, then the commits and what they reference are
// packed by git in the agent's repository, under the sandbox when the
// checkouts have one (Options.Confine: then the agent's config and
// alternates cannot make git read another repository's objects), and
// unpacked into the cache by `git unpack-objects --strict`, which hashes
// every object and checks what it references, so nothing the agent wrote
// enters the cache under a name it does not hash to.
//
// Before git moves or removes the checkout (Release, Remove), the .git file
// git wrote is put back.

// agentConfig is the agent's repository config. Its commits get the
// Drover identity unless the agent's own git says otherwise.
const agentConfig = `[core]
	repositoryformatversion = %d
	filemode = true
	bare = false
	logallrefupdates = true
%s[user]
	name = %s
	email = %s
`

// makeAgentGitDir makes the worktree's .git the agent's repository, with
// the attempt's branch at head and a copy of the admin dir's index. It
// writes only beneath a directory it made itself, through descriptors,
// never following a name a process of the agent (one still running) may
// have swapped for a symlink since (newDirAt).
func (w *Checkout) makeAgentGitDir(head string) error {
	if err := os.RemoveAll(filepath.Join(w.Path, ".git")); err != nil {
		return fmt.Errorf("checkout: agent git dir: %w", err)
	}
	version, ext := 0, ""
	if w.repo.SHA256() {
		version, ext = 1, "[extensions]\n\tobjectformat = sha256\n"
	}
	name, email := w.cs.git.Identity()
	index, err := os.ReadFile(filepath.Join(w.gitDir, "index"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checkout: agent git dir: %w", err)
	}
	files := map[string][]byte{
		"HEAD":                    []byte("ref: refs/heads/" + w.Branch + "\n"),
		"refs/heads/" + w.Branch:  []byte(head + "\n"),
		"objects/info/alternates": []byte(filepath.Join(w.repo.Dir(), "objects") + "\n"),
		"config":                  fmt.Appendf(nil, agentConfig, version, ext, name, email),
		"objects/pack/":           nil,
		"refs/tags/":              nil,
	}
	if index != nil {
		files["index"] = index
	}
	if err := newDirAt(w.Path, ".git", files); err != nil {
		return fmt.Errorf("checkout: agent git dir: %w", err)
	}
	w.agentHead = head
	return nil
}

// restoreGitFile puts back the .git file `git worktree add` wrote, which
// git reads to move or remove the checkout.
func (w *Checkout) restoreGitFile() error {
	if !w.agentGit {
		return nil
	}
	if err := os.RemoveAll(filepath.Join(w.Path, ".git")); err != nil {
		return fmt.Errorf("checkout: restore .git file: %w", err)
	}
	if err := newFileAt(w.Path, ".git", []byte("gitdir: "+w.gitDir+"\n")); err != nil {
		return fmt.Errorf("checkout: restore .git file: %w", err)
	}
	return nil
}

// agentGitTimeout bounds each git command in the agent's repository.
const agentGitTimeout = 2 * time.Minute

// ErrAgentGit wraps what went wrong bringing the agent's commits over.
var ErrAgentGit = errors.New("checkout: the agent's commits")

// importAgentCommits brings the commits the agent made in its repository
// into the cache and moves the attempt's branch to where the agent's HEAD
// points (see the top of this file). Nothing to do when it points where it
// did.
func (w *Checkout) importAgentCommits(ctx context.Context) error {
	if !w.agentGit {
		return nil
	}
	head, err := w.readAgentHead(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAgentGit, err)
	}
	if head == "" || head == w.agentHead {
		return nil // nothing committed (or an unborn branch: no commits to take)
	}
	if err := w.transferObjects(ctx, head); err != nil {
		return fmt.Errorf("%w: %w", ErrAgentGit, err)
	}
	if _, err := w.run(ctx, w.cmd("update-ref", "-m", "drover: the agent's commits", "refs/heads/"+w.Branch, head)); err != nil {
		return fmt.Errorf("%w: %w", ErrAgentGit, err)
	}
	w.agentHead = head
	return nil
}

// readAgentHead returns the commit the agent's HEAD points at, "" when
// there is none (no repository, an unborn branch). The files are read
// first, none of them followed through a symlink or waited on (a FIFO): a
// HEAD or branch that is not a plain file is refused. What plain files
// leave open (a packed ref, a symbolic ref git would resolve further) is
// asked of git, confined and bounded in time.
func (w *Checkout) readAgentHead(ctx context.Context) (string, error) {
	if info, err := os.Lstat(filepath.Join(w.Path, ".git")); err != nil || !info.IsDir() {
		// Deleted, or replaced by a file or a link: there is no
		// repository of the agent's to take commits from (scope.Guard
		// reports a replaced .git).
		return "", nil
	}
	b, err := readBeneath(w.Path, ".git/HEAD", 4096)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", nil // no repository any more: nothing committed in it
	case errors.Is(err, errNoOpenat2):
		return w.agentRevParse(ctx)
	case err != nil:
		return "", fmt.Errorf(".git/HEAD: %w", err)
	}
	s := strings.TrimSuffix(string(b), "\n")
	ref, symbolic := strings.CutPrefix(s, "ref: ")
	if !symbolic {
		if git.IsObjectID(s) {
			return s, nil
		}
		return w.agentRevParse(ctx)
	}
	branch, ok := strings.CutPrefix(ref, "refs/heads/")
	if !ok || !git.PlainBranch(branch) {
		return w.agentRevParse(ctx)
	}
	b, err = readBeneath(w.Path, ".git/refs/heads/"+branch, 4096)
	switch {
	case err == nil && git.IsObjectID(strings.TrimSuffix(string(b), "\n")):
		return strings.TrimSuffix(string(b), "\n"), nil
	case errors.Is(err, os.ErrNotExist):
		if _, perr := readBeneath(w.Path, ".git/packed-refs", 1); errors.Is(perr, os.ErrNotExist) {
			return "", nil // unborn
		}
	case err != nil && !errors.Is(err, errNoOpenat2):
		return "", fmt.Errorf(".git/refs/heads/%s: %w", branch, err)
	}
	return w.agentRevParse(ctx)
}

// agentRevParse asks git, in the agent's repository, what HEAD is.
func (w *Checkout) agentRevParse(ctx context.Context) (string, error) {
	var out bytes.Buffer
	err := w.agentGitCmd(ctx, []string{"rev-parse", "--verify", "--quiet", "HEAD^{commit}"}, nil, &out)
	sha := strings.TrimSpace(out.String())
	switch {
	case err == nil && git.IsObjectID(sha):
		return sha, nil
	case git.ExitCode(err) == 1:
		return "", nil // no commit at HEAD
	case err == nil:
		return "", fmt.Errorf("git rev-parse HEAD printed %q", sha)
	}
	return "", err
}

// transferObjects packs what head adds to the cache, in the agent's
// repository, and unpacks it into the cache.
func (w *Checkout) transferObjects(ctx context.Context, head string) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	unpackErr := make(chan error, 1)
	go func() {
		defer pr.Close()
		cmd := git.In(w.cs.cache.Dir(), "--git-dir="+w.repo.Dir(), "unpack-objects", "-q", "--strict")
		cmd.Stdin = pr
		_, err := w.cs.git.Run(ctx, cmd)
		unpackErr <- err
	}()
	revs := head + "\n^" + w.agentBase() + "\n"
	err = w.agentGitCmd(ctx, []string{"pack-objects", "--revs", "--stdout", "-q"}, strings.NewReader(revs), pw)
	pw.Close()
	if uerr := <-unpackErr; err == nil && uerr != nil {
		err = fmt.Errorf("unpack into the cache: %w", uerr)
	}
	return err
}

// agentBase is what the agent's repository started at: the objects it
// already had through the cache.
func (w *Checkout) agentBase() string {
	if w.checkpoint != "" {
		return w.checkpoint
	}
	return w.Baseline
}

// agentGitCmd runs git in the agent's repository: its config may say
// anything, so it runs with GIT_DIR naming that repository, as every
// Drover git command runs (internal/git: among others, it fetches nothing
// it lacks, as a promisor remote would), bounded in time, and confined when
// the checkouts have a sandbox, reading only that repository and the
// cache's objects.
func (w *Checkout) agentGitCmd(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	// The agent may have left a FIFO where git expects a file.
	ctx, cancel := context.WithTimeout(ctx, agentGitTimeout)
	defer cancel()
	gitDir := filepath.Join(w.Path, ".git")
	cmd := git.Cmd{Dir: w.Path, GitDir: gitDir, Args: args, Stdin: stdin, Stdout: stdout}
	if confine := w.cs.confine; confine != nil {
		read := []string{gitDir, filepath.Join(w.repo.Dir(), "objects")}
		cmd.Confine = func(c *exec.Cmd) (func(), error) { return confine(c, read) }
	}
	_, err := w.cs.git.Run(ctx, cmd)
	return err
}

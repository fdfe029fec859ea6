package checkout

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/drover-dev/drover/internal/sandbox"
)

// agentGit runs git in the worktree as an agent does: no GIT_DIR, so git
// finds the worktree's .git.
func agentGit(t *testing.T, w *Checkout, args ...string) string {
	t.Helper()
	return gitT(t, w.Path, args...)
}

func objectsIn(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	_ = filepath.WalkDir(filepath.Join(dir, "objects"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out[rel] = true
		}
		return nil
	})
	return out
}

// TestAgentCommitsStayInItsRepository: the agent commits in a repository
// of its own; nothing reaches the cache's refs or objects until Observe
// brings its commits over, and then they are pushed with the checkpoint.
func TestAgentCommitsStayInItsRepository(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/agent/a/1"})
	rd := w.CommonDir()
	if st := agentGit(t, w, "status", "--porcelain"); st != "" {
		t.Fatalf("a fresh checkout is not clean to the agent's git: %q", st)
	}
	if got := agentGit(t, w, "rev-parse", "HEAD", "--abbrev-ref", "HEAD"); got != w.Baseline+"\n"+w.Branch {
		t.Fatalf("the agent's HEAD: %q", got)
	}
	objectsBefore := objectsIn(t, rd)
	branchBefore := gitT(t, "", "--git-dir="+rd, "rev-parse", "refs/heads/"+w.Branch)

	writeFile(t, filepath.Join(w.Path, "agent.txt"), "by the agent\n", 0o644)
	agentGit(t, w, "add", "agent.txt")
	agentGit(t, w, "commit", "-q", "-m", "agent work")
	agentHead := agentGit(t, w, "rev-parse", "HEAD")
	writeFile(t, filepath.Join(w.Path, "uncommitted.txt"), "left over\n", 0o644)

	if after := objectsIn(t, rd); len(after) != len(objectsBefore) {
		t.Errorf("the agent's commit wrote the cache's objects: %d → %d", len(objectsBefore), len(after))
	}
	if got := gitT(t, "", "--git-dir="+rd, "rev-parse", "refs/heads/"+w.Branch); got != branchBefore {
		t.Errorf("the agent's commit moved the cache's branch: %s → %s", branchBefore, got)
	}

	ch, err := w.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Commits) != 1 || ch.Commits[0].SHA != agentHead || ch.Commits[0].Subject != "agent work" {
		t.Errorf("Commits = %+v, want the agent's", ch.Commits)
	}
	assertStrings(t, "Created", ch.Created, []string{"agent.txt", "uncommitted.txt"})
	sha, err := w.Checkpoint(ctx, "checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if parent := gitT(t, "", "--git-dir="+rd, "rev-parse", sha+"^"); parent != agentHead {
		t.Errorf("the checkpoint's parent is %s, want the agent's commit %s", parent, agentHead)
	}
	// The agent's repository follows the checkpoint: a validator sees it
	// committed and the tree clean.
	if got := agentGit(t, w, "rev-parse", "HEAD"); got != sha {
		t.Errorf("the agent's HEAD after Checkpoint = %s, want %s", got, sha)
	}
	if st := agentGit(t, w, "status", "--porcelain"); st != "" {
		t.Errorf("status after Checkpoint = %q", st)
	}
	if pushed, err := w.Push(ctx); err != nil || pushed != sha {
		t.Fatalf("Push = %s, %v", pushed, err)
	}
	assertStrings(t, "pushed", o.lsTree(t, sha), []string{".gitignore", "README.md", "agent.txt", "notes.txt", "script.sh", "src/app.go", "uncommitted.txt"})
}

// TestAgentConfigNeverRunsForDrover: whatever the agent's repository's
// config says (hooks, fsmonitor, filters its .gitattributes names, an
// upload-pack program, an alternate refs command), Drover's own git
// commands run none of it.
func TestAgentConfigNeverRunsForDrover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/agent/cfg/1"})
	marker := filepath.Join(t.TempDir(), "ran")
	planted := "touch " + marker
	hooks := filepath.Join(t.TempDir(), "hooks")
	for _, h := range []string{"pre-commit", "post-commit", "reference-transaction", "post-checkout", "pre-push", "post-index-change"} {
		writeFile(t, filepath.Join(hooks, h), "#!/bin/sh\n"+planted+"\n", 0o755)
	}
	for _, kv := range [][2]string{
		{"core.fsmonitor", planted}, {"core.hooksPath", hooks}, {"filter.evil.clean", planted},
		{"filter.evil.smudge", planted}, {"filter.evil.required", "true"}, {"diff.evil.textconv", planted},
		{"core.alternateRefsCommand", planted}, {"uploadpack.packObjectsHook", planted},
		{"core.sshCommand", planted}, {"credential.helper", "!" + planted},
	} {
		agentGit(t, w, "config", kv[0], kv[1])
	}
	writeFile(t, filepath.Join(w.Path, ".gitattributes"), "* filter=evil diff=evil\n", 0o644)
	writeFile(t, filepath.Join(w.Path, "a.txt"), "a\n", 0o644)
	agentGit(t, w, "-c", "filter.evil.clean=cat", "-c", "filter.evil.smudge=cat", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
		"add", "a.txt")
	agentGit(t, w, "-c", "filter.evil.clean=cat", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "agent")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the test's own git ran the planted command")
	}

	if _, err := w.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Checkpoint(ctx, "checkpoint"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Push(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("Drover's git ran a command the agent's config planted")
	}
}

// TestAgentObjectsAreVerified: an object the agent wrote under a name its
// content does not hash to never enters the cache, and the attempt fails
// to observe rather than publish it.
func TestAgentObjectsAreVerified(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/agent/forged/1"})
	writeFile(t, filepath.Join(w.Path, "real.txt"), "the real content\n", 0o644)
	agentGit(t, w, "add", "real.txt")
	agentGit(t, w, "commit", "-q", "-m", "agent")
	blob := agentGit(t, w, "rev-parse", "HEAD:real.txt")
	// Swap the blob's file for another object's bytes.
	forged := filepath.Join(w.Path, ".git", "objects", blob[:2], blob[2:])
	evil := filepath.Join(t.TempDir(), "evil")
	writeFile(t, evil, "forged content\n", 0o644)
	evilID := gitT(t, w.Path, "hash-object", "-w", evil)
	bytes := readFile(t, filepath.Join(w.Path, ".git", "objects", evilID[:2], evilID[2:]))
	if err := os.Chmod(forged, 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, forged, bytes, 0o444)

	ch, err := w.Observe(ctx)
	if err != nil || ch.AgentGit == "" || len(ch.Commits) != 0 {
		t.Fatalf("Observe = %+v, %v; want the agent's commits refused", ch, err)
	}
	assertStrings(t, "Created", ch.Created, []string{"real.txt"})
	if _, err := gitE("", "--git-dir="+w.CommonDir(), "cat-file", "-e", blob); err == nil {
		if got := gitT(t, "", "--git-dir="+w.CommonDir(), "cat-file", "blob", blob); got != "the real content" {
			t.Errorf("the cache holds %s as %q", blob, got)
		}
	}
}

// TestAgentHeadIsReadSafely: a HEAD that is a symlink to a secret, a FIFO,
// a detached commit or an unborn branch neither leaks, hangs nor fails.
func TestAgentHeadIsReadSafely(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCache(t)
	secret := filepath.Join(t.TempDir(), "secret")
	writeFile(t, secret, strings.Repeat("a", 40)+"\n", 0o600)
	for name, tc := range map[string]struct {
		spoil   func(w *Checkout)
		commits int
	}{
		"HEAD a symlink": {func(w *Checkout) {
			head := filepath.Join(w.Path, ".git/HEAD")
			os.Remove(head)
			os.Symlink(secret, head)
		}, -1},
		"HEAD a FIFO": {func(w *Checkout) {
			head := filepath.Join(w.Path, ".git/HEAD")
			os.Remove(head)
			if err := syscall.Mkfifo(head, 0o644); err != nil {
				t.Fatal(err)
			}
		}, -1},
		"git dir a symlink": {func(w *Checkout) {
			os.RemoveAll(filepath.Join(w.Path, ".git"))
			os.Symlink(filepath.Join(o.Seed, ".git"), filepath.Join(w.Path, ".git"))
		}, -1},
		"detached": {func(w *Checkout) {
			writeFile(t, filepath.Join(w.Path, "d.txt"), "d\n", 0o644)
			agentGit(t, w, "add", "d.txt")
			agentGit(t, w, "commit", "-q", "-m", "d")
			agentGit(t, w, "checkout", "-q", "--detach")
		}, 1},
		"unborn": {func(w *Checkout) { agentGit(t, w, "checkout", "-q", "--orphan", "fresh") }, 0},
	} {
		t.Run(name, func(t *testing.T) {
			w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/agent/head/" + strings.ReplaceAll(name, " ", "-")})
			tc.spoil(w)
			ch, err := w.Observe(ctx)
			switch {
			case err != nil:
				t.Fatal(err)
			case tc.commits < 0 && len(ch.Commits) > 0:
				t.Errorf("commits %+v from a HEAD Drover should not have followed", ch.Commits)
			case tc.commits < 0 && strings.Contains(ch.AgentGit, strings.Repeat("a", 40)):
				t.Errorf("the secret leaked: %q", ch.AgentGit)
			case tc.commits >= 0 && (len(ch.Commits) != tc.commits || ch.AgentGit != ""):
				t.Errorf("commits %+v (%q), want %d", ch.Commits, ch.AgentGit, tc.commits)
			}
		})
	}
}

// TestReusedCheckoutGetsAFreshAgentRepository: a parked checkout's next
// user does not inherit the last agent's repository (its config, its
// objects).
func TestReusedCheckoutGetsAFreshAgentRepository(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c := newTestCacheWith(t, testOptions{IdleWorktrees: 1})
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/agent/reuse/1"})
	agentGit(t, w, "config", "core.fsmonitor", "touch /tmp/never")
	writeFile(t, filepath.Join(w.Path, ".git", "objects", "info", "alternates"), "/elsewhere/objects\n", 0o644)
	if _, err := w.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Checkpoint(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, w); err != nil || c.Idle() != 1 {
		t.Fatalf("Release = %v, idle %d", err, c.Idle())
	}
	w2 := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/agent/reuse/2"})
	if c.Idle() != 0 {
		t.Fatal("the parked checkout was not reused")
	}
	if got, err := gitE(w2.Path, "config", "--get", "core.fsmonitor"); err == nil {
		t.Errorf("the last agent's config survived: %q", got)
	}
	if got := readFile(t, filepath.Join(w2.Path, ".git", "objects", "info", "alternates")); got != filepath.Join(w2.CommonDir(), "objects")+"\n" {
		t.Errorf("alternates = %q", got)
	}
}

// TestAgentImportIsConfined: with a sandbox, git in the agent's repository
// reads nothing but it and the cache's objects, so alternates the agent
// points at another repository cannot pull that repository's objects into
// this one's cache (and from there into a push).
func TestAgentImportIsConfined(t *testing.T) {
	t.Parallel()
	sb, err := sandbox.New(sandbox.Probe())
	if err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	ctx := context.Background()
	o, secretRepo := newOrigin(t), newOrigin(t)
	gitT(t, secretRepo.Seed, "branch", "private", mainBranch)
	secret := secretRepo.pushNew(t, "private", "secret.txt", "another repository's secret\n")
	c := newTestCacheWith(t, testOptions{Confine: func(cmd *exec.Cmd, read []string) (func(), error) {
		p := sandbox.Policy{Exec: cmd.Path, PATH: []string{"/usr/bin", "/bin"}}
		for _, r := range read {
			p.Own = append(p.Own, sandbox.Grant{Path: r})
		}
		conf, err := sb.Compile(p)
		if err != nil {
			return nil, err
		}
		return conf.Cmd(cmd)
	}})
	w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/agent/confined/1"})
	// The agent names a commit of the other repository and borrows its objects.
	alt := filepath.Join(w.Path, ".git", "objects", "info", "alternates")
	writeFile(t, alt, filepath.Join(w.CommonDir(), "objects")+"\n"+filepath.Join(secretRepo.URL, "objects")+"\n", 0o644)
	writeFile(t, filepath.Join(w.Path, ".git", "refs", "heads", w.Branch), secret+"\n", 0o644)

	ch, err := w.Observe(ctx)
	if err != nil || ch.AgentGit == "" || len(ch.Commits) != 0 {
		t.Fatalf("Observe = %+v, %v; want the agent's commits refused", ch, err)
	}
	if _, err := gitE("", "--git-dir="+w.CommonDir(), "cat-file", "-e", secret); err == nil {
		t.Error("the other repository's commit reached this one's cache")
	}

	// An honest commit goes through the confined path.
	w2 := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/agent/confined/2"})
	writeFile(t, filepath.Join(w2.Path, "ok.txt"), "ok\n", 0o644)
	agentGit(t, w2, "add", "ok.txt")
	agentGit(t, w2, "commit", "-q", "-m", "ok")
	if ch, err := w2.Observe(ctx); err != nil || len(ch.Commits) != 1 {
		t.Fatalf("Observe = %+v, %v", ch, err)
	}
}

// BenchmarkAgentRepo times the file work the agent's own repository adds
// to an attempt: making it in Prepare. The cache's digest taken and
// checked around every attempt is repocache's BenchmarkDigest; importing
// the agent's commits is git's work (three processes, and none when it
// made no commit).
func BenchmarkAgentRepo(b *testing.B) {
	c := newTestCache(b)
	w := prepare(b, c, PrepareOptions{RepoURL: newOrigin(b).URL, Base: mainBranch, Branch: "drover/bench"})
	b.Run("make", func(b *testing.B) {
		for b.Loop() {
			if err := w.makeAgentGitDir(w.agentHead); err != nil {
				b.Fatal(err)
			}
		}
	})
}

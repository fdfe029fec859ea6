package attempt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/drovertype"
)

// TestRepoInsideWorkDirRefused: a flow cannot point a worker at a
// repository inside its own work dir (the repo caches, other attempts'
// worktrees), neither by path, nor by file:// URL, nor through a symlink;
// nothing runs and nothing is pushed there.
func TestRepoInsideWorkDirRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	work := h.runner.WorkDir
	inside := filepath.Join(work, "worktrees", "other_attempt-e1")
	if err := os.MkdirAll(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, inside, "init", "--quiet", "--bare")
	link := filepath.Join(t.TempDir(), "innocent.git")
	if err := os.Symlink(inside, link); err != nil {
		t.Fatal(err)
	}
	for _, repo := range []string{inside, "file://" + inside, link, filepath.Join(work, "repos", "..", "worktrees", "other_attempt-e1"), work} {
		job := h.job("echo ran > ran.txt")
		job.Repo = repo
		rep, _ := h.run(job, nil)
		if rep.Success || rep.Error == nil || rep.Error.Class != drovertype.ClassPrepareFailed || rep.Error.Recoverable ||
			!strings.Contains(rep.Error.Message, "inside the worker's work dir") {
			t.Errorf("repo %s: report %+v, want a PREPARE_FAILED refusal", repo, rep.Error)
		}
	}
	if out := gitT(t, "", "--git-dir="+inside, "for-each-ref"); out != "" {
		t.Errorf("something was pushed into the work dir: %s", out)
	}
	// Outside the work dir, local repositories work as before.
	if rep, _ := h.run(h.job("echo ok > ok.txt"), nil); !rep.Success {
		t.Errorf("local origin outside the work dir: %+v", rep.Error)
	}
}

package checkout

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestResetToIgnoresWhatTheChecksPlanted: after an attempt's checks ran in
// its checkout (a verification command, a validator: an agent's code, run
// unconfined when the sandbox is off), the checkout is put back to the
// checkpoint by git commands that nothing the checks wrote steers — not
// the agent's repository's config, hooks, fsmonitor or filter drivers,
// nor a .gitattributes naming them, nor a .git leading elsewhere, nor the
// replace refs or hooks planted in the cache itself. Attempts ran these
// commands with four of git's settings before internal/git (a replace ref
// had the reset check out the planted commit's files).
func TestResetToIgnoresWhatTheChecksPlanted(t *testing.T) {
	t.Parallel()
	o := newOrigin(t)
	for name, plant := range map[string]func(t *testing.T, w *Checkout, marker string){
		"the agent's repository steers git": func(t *testing.T, w *Checkout, marker string) {
			dir := t.TempDir()
			script := filepath.Join(dir, "evil.sh")
			writeFile(t, script, "#!/bin/sh\necho \"$0 $*\" >> '"+marker+"'\ncat\n", 0o755)
			writeHooks(t, filepath.Join(dir, "hooks"), marker)
			agent := filepath.Join(w.Path, ".git")
			for _, kv := range [][2]string{
				{"core.hooksPath", filepath.Join(dir, "hooks")},
				{"core.fsmonitor", script},
				{"filter.evil.clean", script},
				{"filter.evil.smudge", script},
				{"filter.evil.required", "true"},
				{"diff.evil.textconv", script},
				{"core.worktree", t.TempDir()},
			} {
				gitT(t, "", "--git-dir="+agent, "config", kv[0], kv[1])
			}
			writeFile(t, filepath.Join(w.Path, ".gitattributes"), "* filter=evil diff=evil\n", 0o644)
		},
		"a .git leading to another repository": func(t *testing.T, w *Checkout, marker string) {
			other := newOrigin(t)
			if err := os.RemoveAll(filepath.Join(w.Path, ".git")); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(w.Path, ".git"), "gitdir: "+filepath.Join(other.Seed, ".git")+"\n", 0o644)
			t.Cleanup(func() {
				if got := gitT(t, other.Seed, "rev-parse", "HEAD"); got != other.C2 {
					t.Errorf("the other repository's HEAD moved to %s", got)
				}
				if got := gitT(t, other.Seed, "status", "--porcelain"); got != "" {
					t.Errorf("the other repository changed:\n%s", got)
				}
			})
		},
		"replace refs and hooks in the cache": func(t *testing.T, w *Checkout, marker string) {
			writeHooks(t, filepath.Join(w.CommonDir(), "hooks"), marker)
			// Every commit of the attempt's branch reads as the base's.
			gitT(t, "", "--git-dir="+w.CommonDir(), "-c", "core.hooksPath=/dev/null", "replace", w.checkpoint, o.C1)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := newTestCache(t) // one planting in the cache spoils it for the others
			w := prepare(t, c, PrepareOptions{RepoURL: o.URL, Base: mainBranch, Branch: "drover/reset/" + filepath.Base(t.Name()) + "/1"})
			writeFile(t, filepath.Join(w.Path, "result.txt"), "the result\n", 0o644)
			if _, err := w.Observe(ctx); err != nil {
				t.Fatal(err)
			}
			sha, err := w.Checkpoint(ctx, "result")
			if err != nil {
				t.Fatal(err)
			}
			// The checks build, change the result, commit, and plant.
			writeFile(t, filepath.Join(w.Path, "result.txt"), "changed by the checks\n", 0o644)
			writeFile(t, filepath.Join(w.Path, "build", "out.o"), "built\n", 0o644)
			marker := filepath.Join(t.TempDir(), "ran")
			plant(t, w, marker)

			if err := w.ResetTo(ctx, sha); err != nil {
				t.Fatalf("ResetTo: %v", err)
			}
			if got := readFile(t, filepath.Join(w.Path, "result.txt")); got != "the result\n" {
				t.Errorf("result.txt = %q after the reset, want the checkpoint's", got)
			}
			for _, f := range []string{"src/app.go", "script.sh"} {
				if _, err := os.Stat(filepath.Join(w.Path, f)); err != nil {
					t.Errorf("%s of the checkpoint is missing: %v", f, err)
				}
			}
			assertNotExist(t, filepath.Join(w.Path, "build"))
			assertNotExist(t, filepath.Join(w.Path, ".gitattributes"))
			if got := gitT(t, "", "--git-dir="+w.CommonDir(), "rev-parse", "refs/heads/"+w.Branch); got != sha {
				t.Errorf("branch at %s, want the checkpoint %s", got, sha)
			}
			if b, err := os.ReadFile(marker); err == nil {
				t.Errorf("a planted program ran: %s", b)
			}
		})
	}
}

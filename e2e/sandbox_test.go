package e2e

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/natstest"
	"github.com/drover-dev/drover/internal/sandbox"
)

// hostileRuntime is a runtime whose "agent" runs its prompt as a shell
// script: whatever an injected prompt could make a real agent do.
var hostileRuntime = []string{
	"DROVER_RUNTIMES_HOSTILE_BINARY=/bin/sh",
	"DROVER_RUNTIMES_HOSTILE_VERSION_ARGS=-c,echo hostile 1.0",
}

// TestHostileAgentIsContained runs an agent that tries every way out of its
// worktree a worker has, on a worker with the sandbox on (the default).
// Each attempt must fail with nothing written, be named in the report, and
// leave the worker, its caches and its secrets as they were: a later
// innocent flow on the same worker and repository runs as usual and runs
// nothing the agent tried to plant.
//
// Before it, the worker has served the same repository (two checkouts
// parked for reuse, a failed attempt's worktree kept for inspection) and
// another one (a second repo cache). Its NATS credential is an NKey seed
// in a directory the hostile runtime's configuration asks to read, beside
// the worker's configuration file: sibling expansion must keep both out of
// reach while the rest of that directory stays readable.
func TestHostileAgentIsContained(t *testing.T) {
	t.Parallel()
	if err := sandbox.Probe().Usable(); err != nil {
		t.Skipf("this kernel cannot confine: %v", err)
	}
	dir := t.TempDir()
	seed, pub := natstest.NKeyUser(t)
	conf := filepath.Join(dir, "etc-drover")
	if err := os.MkdirAll(filepath.Join(workerHome0(dir)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(conf, "worker.nk"), seed)
	writeTestFile(t, filepath.Join(conf, "worker.yaml"), "# canary-config-4f1d\nworker:\n  keep_failed_worktrees: 24h\n")
	writeTestFile(t, filepath.Join(conf, "public.txt"), "public-ok")
	serverConf := filepath.Join(dir, "server.conf")
	writeTestFile(t, serverConf, `authorization {
  users = [
    {user: controller, password: "ctrl-pass-0123456789"}
    {nkey: `+pub+`}
    {user: operator, password: "op-pass-0123456789"}
  ]
}
`)
	c := startController(t, append(slices.Clone(hostileRuntime), "DROVER_NATS_SERVER_CONFIG="+serverConf,
		"DROVER_NATS_USER=controller", "DROVER_NATS_PASSWORD=ctrl-pass-0123456789")...)
	c.cliEnv = []string{"DROVER_NATS_USER=operator", "DROVER_NATS_PASSWORD=op-pass-0123456789"}
	u, err := url.Parse(c.url)
	if err != nil {
		t.Fatal(err)
	}
	workerHome := workerHome0(dir)
	writeTestFile(t, filepath.Join(workerHome, ".bashrc"), "# the worker's\n")
	work := filepath.Join(dir, "work")
	c.startWorkerIn("worker-1", work, 3, append(slices.Clone(hostileRuntime),
		"DROVER_RUNTIMES_HOSTILE_SANDBOX_READ="+conf,
		"DROVER_CONFIG="+filepath.Join(conf, "worker.yaml"), "DROVER_NATS_NKEY_FILE="+filepath.Join(conf, "worker.nk"),
		"DROVER_WORKER_RUNTIMES=hostile,demo", "HOME="+workerHome, "WORKER_ENV_CANARY=canary-env-9b2e")...)

	// What the worker holds before the agent comes.
	repoA, repoB := newRepo(t), newRepo(t)
	run := func(name, repo, tasks string, wantCode int) *flowResult {
		t.Helper()
		out, errOut, code := c.cli("submit", writeFlow(t, "name: "+name+"\nrepo: "+repo+"\nbase: main\nretry: {max_attempts: 1}\ntasks:\n"+tasks), "--watch")
		if code != wantCode {
			t.Fatalf("flow %s: exit %d, want %d\n%s\n%s", name, code, wantCode, out, errOut)
		}
		st := c.status(submittedID(t, out))
		r := &flowResult{tasks: map[string]*projection.Task{}, attempts: map[string]*projection.Attempt{}}
		for _, task := range st.Detail.Tasks {
			r.tasks[task.ID] = task
		}
		for _, a := range st.Detail.Attempts {
			r.attempts[a.Task] = a
		}
		return r
	}
	run("before", repoA, "  - {id: a, runtime: demo, prompt: '@write a.txt a'}\n  - {id: b, runtime: demo, prompt: '@write b.txt b'}\n"+
		"  - {id: broken, runtime: demo, prompt: '@exit 1'}\n", 1)
	run("other-repo", repoB, "  - {id: c, runtime: demo, prompt: '@write c.txt c'}\n", 0)
	cacheA, cacheB := repoCache(t, work, repoA), repoCache(t, work, repoB)
	kept, _ := filepath.Glob(filepath.Join(work, "worktrees", "before-*_broken_1-e1"))
	parked, _ := filepath.Glob(filepath.Join(cacheA, "drover-idle", "*"))
	if len(kept) != 1 || len(parked) != 2 {
		t.Fatalf("kept worktrees %v, parked checkouts %v: want one and two", kept, parked)
	}
	before := snapshotFiles(t, filepath.Join(cacheA, "config"), filepath.Join(cacheB, "config"),
		filepath.Join(cacheA, "packed-refs"), filepath.Join(cacheA, "refs", "remotes", "origin", "main"),
		filepath.Join(parked[0], "README.md"), filepath.Join(parked[1], "README.md"), filepath.Join(workerHome, ".bashrc"))
	marker := filepath.Join(dir, "planted-ran")
	tmpEscape := filepath.Join(os.TempDir(), "drover-hostile-"+filepath.Base(dir))
	t.Cleanup(func() { os.Remove(tmpEscape) })

	// The agent: one line per way out, each printing what it got.
	script := strings.Join([]string{
		"set +e",
		"echo x > ../escape-parent.txt",
		"echo x > ../../escape-workdir.txt",
		"echo x > " + filepath.Join(kept[0], "pwned.txt"),
		"echo '[core] fsmonitor = touch " + marker + "' >> " + filepath.Join(cacheB, "config"),
		"echo x > " + tmpEscape,
		"echo x > " + filepath.Join(workerHome, "escape.txt"),
		"echo x >> " + filepath.Join(workerHome, ".bashrc"),
		"ln -s " + filepath.Join(cacheA, "config") + " config-link && echo '[core] hooksPath = /tmp' >> config-link",
		"printf '[core]\\n\\tfsmonitor = touch " + marker + "\\n\\thooksPath = /tmp\\n[extensions]\\n\\tworktreeConfig = true\\n' >> " + filepath.Join(cacheA, "config"),
		"git --git-dir=" + cacheA + " config core.fsmonitor 'touch " + marker + "'",
		"mkdir -p " + filepath.Join(cacheA, "hooks") + " " + filepath.Join(cacheA, "info"),
		"echo /elsewhere/objects > " + filepath.Join(cacheA, "objects", "info", "alternates"),
		"echo 0000000000000000000000000000000000000000 > " + filepath.Join(cacheA, "refs", "remotes", "origin", "main"),
		"echo x >> " + filepath.Join(cacheA, "packed-refs"),
		"echo x > " + filepath.Join(parked[0], "README.md"),
		"echo x > " + filepath.Join(parked[1], "README.md"),
		"cat " + filepath.Join(conf, "worker.nk"),
		"cat " + filepath.Join(conf, "worker.yaml"),
		"cat " + filepath.Join(conf, "public.txt") + "; echo",
		"tr '\\0' '\\n' < /proc/$PPID/environ | grep CANARY",
		fmt.Sprintf("bash -c 'echo hi > /dev/tcp/127.0.0.1/%s'", u.Port()),
		"sh -c 'echo child > " + filepath.Join(kept[0], "child.txt") + "'",
		"rm -rf .git && echo \"gitdir: " + filepath.Join(cacheA, "worktrees") + "/$(basename $PWD)\" > .git && git config core.hooksPath /tmp",
		"echo inside > inside.txt",
		"true",
	}, "\n")
	hostile := run("hostile", repoA, "  - id: h\n    runtime: hostile\n    prompt: |\n      "+strings.ReplaceAll(script, "\n", "\n      ")+"\n", 1)

	a := hostile.attempts["h"]
	if a == nil || a.Report == nil || hostile.tasks["h"].Error == nil {
		t.Fatalf("no report: %+v", a)
	}
	rep := c.report(a.ID)
	t.Logf("hostile attempt: %s\nsandbox: %s\ndenied:\n  %s\nscope violations:\n  %s\nstdout:\n%s\nstderr:\n%s",
		rep.Error.Class, rep.Sandbox, strings.Join(rep.SandboxDenied, "\n  "), strings.Join(rep.ScopeViolations, "\n  "), rep.StdoutTail, rep.StderrTail)
	if rep.Error.Class != "SCOPE_VIOLATION" || !strings.HasPrefix(rep.Sandbox, "landlock ABI") {
		t.Errorf("class %s, sandbox %q", rep.Error.Class, rep.Sandbox)
	}

	// Nothing got through.
	for _, p := range []string{filepath.Join(work, "worktrees", "escape-parent.txt"), filepath.Join(work, "escape-workdir.txt"),
		filepath.Join(kept[0], "pwned.txt"), filepath.Join(kept[0], "child.txt"), tmpEscape, filepath.Join(workerHome, "escape.txt"),
		filepath.Join(cacheA, "hooks"), filepath.Join(cacheA, "info"), filepath.Join(cacheA, "objects", "info", "alternates"), marker} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists", p)
		}
	}
	// One parked checkout became the hostile attempt's worktree: the
	// other must be as it was.
	stillParked := slices.DeleteFunc(slices.Clone(parked), func(p string) bool { _, err := os.Stat(p); return err != nil })
	if len(stillParked) != 1 {
		t.Fatalf("parked checkouts left: %v", stillParked)
	}
	for _, p := range parked {
		if !slices.Contains(stillParked, p) {
			delete(before, filepath.Join(p, "README.md"))
		}
	}
	if after := snapshotFiles(t, keys(before)...); !equalFiles(before, after) {
		t.Errorf("files changed:\n before %q\n after  %q", before, after)
	}
	if q, _ := filepath.Glob(filepath.Join(work, "repos", "quarantine", "*")); len(q) != 0 {
		t.Errorf("a cache was quarantined (so it changed): %v", q)
	}
	out := rep.StdoutTail + rep.StderrTail
	for _, secret := range []string{"SUA", "canary-config-4f1d", "canary-env-9b2e", "[REDACTED]"} {
		if strings.Contains(out, secret) {
			t.Errorf("the agent read %q", secret)
		}
	}
	if !strings.Contains(rep.StdoutTail, "public-ok") {
		t.Error("the agent could not read what its runtime may: the secret's sibling")
	}

	// Every refusal that its program printed is named.
	var denied []string
	for _, d := range rep.SandboxDenied {
		denied = append(denied, strings.SplitN(d, ": ", 2)[0])
	}
	for _, want := range []string{
		filepath.Join(work, "worktrees", "escape-parent.txt"), filepath.Join(work, "escape-workdir.txt"),
		filepath.Join(kept[0], "pwned.txt"), filepath.Join(cacheB, "config"), tmpEscape,
		filepath.Join(workerHome, "escape.txt"), filepath.Join(workerHome, ".bashrc"),
		filepath.Join(cacheA, "config"), filepath.Join(cacheA, "hooks"), filepath.Join(cacheA, "objects", "info", "alternates"),
		filepath.Join(cacheA, "refs", "remotes", "origin", "main"), filepath.Join(cacheA, "packed-refs"),
		filepath.Join(stillParked[0], "README.md"),
		filepath.Join(conf, "worker.nk"), filepath.Join(conf, "worker.yaml"), "tcp/" + u.Port(),
		filepath.Join(kept[0], "child.txt"),
	} {
		if !slices.Contains(denied, want) {
			t.Errorf("the report does not name %s as denied", want)
		}
	}
	if !slices.ContainsFunc(denied, func(d string) bool { return strings.HasSuffix(d, "/environ") }) {
		t.Error("the report does not name the worker's environment as denied")
	}
	for _, want := range []string{"`.git` modified", "config-link: symlink points outside the worktree"} {
		if !slices.ContainsFunc(rep.ScopeViolations, func(v string) bool { return strings.Contains(v, want) }) {
			t.Errorf("scope violations %q lack %q", rep.ScopeViolations, want)
		}
	}
	exited := ofType(c.events(hostile.tasks["h"].Flow), event.RuntimeExited, "h")
	if len(exited) != 1 || !bytes.Contains(exited[0].Data, []byte(`"denied":[`)) {
		t.Errorf("runtime_exited does not carry the denials: %v", exited)
	}

	// The same worker and repository, afterwards: an innocent flow runs
	// from the caches and checkouts the agent attacked, and nothing it
	// planted runs.
	after := run("after", repoA, "  - {id: d, runtime: demo, prompt: '@write d.txt d'}\n  - {id: e, runtime: demo, prompt: '@write e.txt e'}\n", 0)
	for _, id := range []string{"d", "e"} {
		if got := show(t, repoA, after.tasks[id].ResultBranch, id+".txt"); got != id {
			t.Errorf("%s.txt = %q", id, got)
		}
	}
	run("other-after", repoB, "  - {id: f, runtime: demo, prompt: '@write f.txt f'}\n", 0)
	if _, err := os.Stat(marker); err == nil {
		t.Error("a command the agent planted ran")
	}
}

// repoCache finds the worker's cache of a repository by its origin URL.
func repoCache(t *testing.T, work, repo string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(work, "repos", "*.git"))
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "config")); err == nil && bytes.Contains(b, []byte("url = "+repo+"\n")) {
			return d
		}
	}
	t.Fatalf("no cache of %s in %v", repo, dirs)
	return ""
}

// snapshotFiles reads files ("" for a missing one).
func snapshotFiles(t *testing.T, paths ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	return out
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func equalFiles(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func workerHome0(dir string) string { return filepath.Join(dir, "worker-home") }

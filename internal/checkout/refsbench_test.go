package checkout

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/exectest"
	"github.com/drover-dev/drover/internal/git"
	"github.com/drover-dev/drover/internal/git/gittest"
)

// BenchmarkRefsOnRemote: what an attempt's git costs against a remote
// holding 100, 1,000 and 10,000 other result branches, as a remote does
// late in a flow of that many tasks (a branch per attempt), side by side.
// Each iteration is one attempt: Prepare (the repo cache's fetch of the
// base, then the checkout), a file written, Checkpoint, Push, Remove;
// prepare_ms and push_ms are the first and the fourth; first_prepare_ms
// is the Prepare before them, which clones the repository. The remote is kept
// as a git host keeps one: its refs packed and a commit-graph written.
//
// Two ways to the same bare repository: "local", its path, as the scale
// benchmark and `controller dev` use it (Drover's git runs the remote's
// receive-pack itself), and "ssh", through an ssh that runs the command
// it is given on this machine, as a remote Drover cannot configure
// (GitHub, GitLab, Gitea over SSH or HTTPS) is reached: git's own
// protocol, whose receive-pack Drover does not start.
//
//	go test -run '^$' -bench 'BenchmarkRefsOnRemote' -benchtime 20x ./internal/checkout/
func BenchmarkRefsOnRemote(b *testing.B) {
	for _, via := range []string{"local", "ssh"} {
		for _, refs := range []int{100, 1000, 10000} {
			b.Run(fmt.Sprintf("via=%s/refs=%d", via, refs), func(b *testing.B) {
				benchAttemptsAgainst(b, via, refs)
			})
		}
	}
}

func benchAttemptsAgainst(b *testing.B, via string, refs int) {
	ctx := context.Background()
	o := newOrigin(b)
	addResultBranches(b, o.URL, "drover/other", refs)
	url, opts := o.URL, testOptions{Logger: slog.New(slog.DiscardHandler)}
	if via == "ssh" {
		url = "ssh://bench.invalid" + o.URL
		opts.Env = []string{"GIT_SSH_COMMAND=" + fakeSSH(b)}
	}
	c := newTestCacheWith(b, opts)
	var prep, push time.Duration
	attempt := func(i int) {
		branch := fmt.Sprintf("drover/bench/t%d/1", i+1)
		began := time.Now()
		w, err := c.Prepare(ctx, PrepareOptions{RepoURL: url, Base: mainBranch, Branch: branch, Path: wtPath(b)})
		if err != nil {
			b.Fatal(err)
		}
		prep += time.Since(began)
		writeFile(b, filepath.Join(w.Path, "out.txt"), fmt.Sprintf("attempt %d\n", i), 0o644)
		if _, err := w.Checkpoint(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		began = time.Now()
		if _, err := w.Push(ctx); err != nil {
			b.Fatal(err)
		}
		push += time.Since(began)
		if err := c.Remove(ctx, w); err != nil {
			b.Fatal(err)
		}
		// The remote keeps the number of branches it started with.
		o.git(b, "update-ref", "-d", "refs/heads/"+branch)
	}
	attempt(-1) // the first, which clones the repository into the cache
	clone := prep
	prep, push = 0, 0
	b.ResetTimer()
	for i := range b.N {
		attempt(i)
	}
	b.StopTimer()
	b.ReportMetric(ms(prep)/float64(b.N), "prepare_ms")
	b.ReportMetric(ms(push)/float64(b.N), "push_ms")
	b.ReportMetric(ms(clone), "first_prepare_ms")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// addResultBranches gives the bare repository at dir n branches
// prefix/t<i>/1, each a commit of its own on main adding a file, as
// attempts leave them, in one git fast-import; then packs its refs and
// writes a commit-graph, as a git host does.
func addResultBranches(tb testing.TB, dir, prefix string, n int) {
	tb.Helper()
	var in strings.Builder
	for i := range n {
		msg, body := fmt.Sprintf("attempt %d", i), fmt.Sprintf("result %d\n", i)
		fmt.Fprintf(&in, "commit refs/heads/%s/t%d/1\ncommitter Tester <tester@example.com> %d +0000\ndata %d\n%s\nfrom refs/heads/%s^0\nM 100644 inline out%d.txt\ndata %d\n%s\n",
			prefix, i, 1700000000+i, len(msg), msg, mainBranch, i, len(body), body)
	}
	gitStdin(tb, dir, in.String(), "fast-import", "--quiet")
	gittest.Run(tb, "", "--git-dir="+dir, "pack-refs", "--all")
	gittest.Run(tb, "", "--git-dir="+dir, "commit-graph", "write", "--reachable")
}

// gitStdin runs git in the bare repository dir with input on its stdin.
func gitStdin(tb testing.TB, dir, input string, args ...string) {
	tb.Helper()
	g, err := git.New(git.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	cmd := git.In("/", append([]string{"--git-dir=" + dir}, args...)...)
	cmd.Stdin = strings.NewReader(input)
	if _, err := g.Run(context.Background(), cmd); err != nil {
		tb.Fatal(err)
	}
}

// fakeSSH is an ssh for GIT_SSH_COMMAND that runs the command git asks
// the remote host to run (git-upload-pack 'PATH', git-receive-pack
// 'PATH') on this machine, passing GIT_PROTOCOL on as ssh's SendEnv
// would. It is named ssh, so git takes it for OpenSSH and speaks
// protocol v2 through it where it can.
func fakeSSH(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "ssh")
	script := `#!/bin/sh
# options (-o X, -p N, -4, -6), then the host, then the command
while [ $# -gt 0 ]; do
	case "$1" in
	-o|-p) shift 2 ;;
	-*) shift ;;
	*) break ;;
	esac
done
shift
exec sh -c "$*"
`
	if err := exectest.WriteExecutable(p, []byte(script)); err != nil {
		tb.Fatal(err)
	}
	return p
}

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStart starts /bin/true and waits for it, plainly and confined
// (a fresh ruleset from a compiled policy, the re-exec step, then the
// exec): the difference is what the sandbox adds to every process it
// starts. The policy is an attempt's: its worktree, TMPDIR, HOME and
// repository objects, a few denied secrets, the system paths.
// docs/benchmarks.md has the figures, with and without cgo (the step is a
// C constructor with it, a Go init without). DROVER_BENCH_STEP names
// another binary to run the step as, e.g. bin/worker: the step's cost
// grows with the inits that run before it.
func BenchmarkStart(b *testing.B) {
	b.Run("plain", func(b *testing.B) {
		cpu := childCPU()
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(childCPU()-cpu)/1e3/float64(b.N), "child_cpu_us/op")
	})
	b.Run("confined", func(b *testing.B) {
		sb := mustSandbox(b)
		if exe := os.Getenv("DROVER_BENCH_STEP"); exe != "" {
			sb.exe = exe
		}
		root := b.TempDir()
		dirs := []string{"wt", "tmp", "home", "repo.git/objects"}
		for _, d := range dirs {
			if err := mkdirAll(filepath.Join(root, d)); err != nil {
				b.Fatal(err)
			}
		}
		c, err := sb.Compile(Policy{
			Own: []Grant{{Path: filepath.Join(root, "wt"), Write: true}, {Path: filepath.Join(root, "tmp"), Write: true},
				{Path: filepath.Join(root, "home"), Write: true}, {Path: filepath.Join(root, "repo.git/objects")}},
			Deny:    []string{root, "/etc/drover", filepath.Join(root, "worker.creds")},
			Exec:    "/bin/true",
			PATH:    []string{"/usr/local/bin", "/usr/bin", "/bin"},
			Connect: []uint16{443},
		})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		cpu := childCPU()
		for b.Loop() {
			cmd := exec.Command("/bin/true")
			done, err := c.Cmd(cmd)
			if err != nil {
				b.Fatal(err)
			}
			err = cmd.Run()
			done()
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(childCPU()-cpu)/1e3/float64(b.N), "child_cpu_us/op")
	})
}

// childCPU is the CPU time, user and system, of the children this process
// has waited for: what a start costs whatever the machine's load.
func childCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package sandbox

import (
	"path/filepath"
	"testing"
)

// attemptPolicy is an attempt's policy over a scratch tree.
func attemptPolicy(b *testing.B) Policy {
	root := b.TempDir()
	for _, d := range []string{"wt", "tmp", "home", "repo.git/objects"} {
		if err := mkdirAll(filepath.Join(root, d)); err != nil {
			b.Fatal(err)
		}
	}
	return Policy{
		Own: []Grant{{Path: filepath.Join(root, "wt"), Write: true}, {Path: filepath.Join(root, "tmp"), Write: true},
			{Path: filepath.Join(root, "home"), Write: true}, {Path: filepath.Join(root, "repo.git/objects")}},
		Deny:    []string{root, "/etc/drover"},
		Exec:    "/bin/true",
		PATH:    []string{"/usr/local/bin", "/usr/bin", "/bin"},
		Connect: []uint16{443},
	}
}

// BenchmarkCompile compiles an attempt's policy, once per attempt (its
// CLI, its checks) and once for its validator.
func BenchmarkCompile(b *testing.B) {
	sb := mustSandbox(b)
	p := attemptPolicy(b)
	for b.Loop() {
		if _, err := sb.Compile(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRuleset makes the ruleset of an attempt's policy, as every
// confined launch does: the part of BenchmarkStart's difference that is
// not the re-exec step.
func BenchmarkRuleset(b *testing.B) {
	sb := mustSandbox(b)
	c, err := sb.Compile(attemptPolicy(b))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		f, err := c.ruleset()
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	b.ReportMetric(float64(len(c.rules)), "rules")
}

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/exitcode"
)

// The problems only the controller can find in a flow file — a runtime or
// a project it does not have — are reported at their line and column, as
// the file's other problems are (docs/flows.md), by submit and by runtime
// resolve, and nothing is recorded.
func TestSubmitPlacesTheControllersProblems(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	c := startController(t)
	file := writeTemp(t, "flow.yaml", "name: f\nproject: nosuch\nrepo: "+t.TempDir()+"\nruntime: demo\ntasks:\n"+
		"  - id: a\n    prompt: p\n"+
		"  - id: b\n    prompt: q\n    runtime: nope\n")
	r := cli(t, context.Background(), nil, nil, "submit", file, "--data-dir", c.dir)
	want := []string{
		file + `:2:10: project: unknown project "nosuch": it is not configured`,
		file + `:10:14: tasks[1].runtime: unknown runtime "nope": it is not configured`,
	}
	if r.code != exitcode.Usage || strings.Count(r.stderr, file+":") != 2 ||
		!strings.Contains(r.stderr, want[0]) || !strings.Contains(r.stderr, want[1]) {
		t.Errorf("exit %d, stderr:\n%s\nwant %d and:\n%s", r.code, r.stderr, exitcode.Usage, strings.Join(want, "\n"))
	}
	if r := cli(t, context.Background(), nil, nil, "status", "--data-dir", c.dir); r.code != 0 || strings.Contains(r.stdout, "f-") {
		t.Errorf("a refused flow left state: exit %d\n%s", r.code, r.stdout)
	}
	// runtime resolve of the file says the same of its project.
	r = cli(t, context.Background(), nil, nil, "runtime", "resolve", "--flow", file, "--data-dir", c.dir)
	if r.code != exitcode.Usage || !strings.Contains(r.stderr, want[0]) {
		t.Errorf("resolve: exit %d, stderr:\n%s\nwant %d and:\n%s", r.code, r.stderr, exitcode.Usage, want[0])
	}
}

package codecheck

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/drover-dev/drover/"

// layerRules: a package (the key) and the packages it must not depend on,
// directly or through others. The event schema is read by every part of
// the system and by tools: were it to depend on the packages that decide,
// a change of a decision could change the wire format, and reading the log
// would pull in the controller.
var layerRules = map[string][]string{
	"internal/eventlog/event": {"internal/policy", "internal/controller"},
}

// forbiddenDeps returns the packages of banned found in deps, the import
// paths a package depends on (as go list -deps lists them).
func forbiddenDeps(deps, banned []string) []string {
	var found []string
	for _, b := range banned {
		for _, d := range deps {
			if d == module+b || strings.HasPrefix(d, module+b+"/") {
				found = append(found, d)
			}
		}
	}
	return found
}

func TestLayersDoNotDependOnDecisions(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("listing dependencies needs the go command: %v", err)
	}
	for pkg, banned := range layerRules {
		cmd := exec.Command(goBin, "list", "-deps", "./"+pkg)
		cmd.Dir = moduleRoot(t)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.String())
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, module+pkg) {
			t.Fatalf("go list -deps ./%s did not list the package itself: %q", pkg, deps)
		}
		if found := forbiddenDeps(deps, banned); len(found) > 0 {
			t.Errorf("%s depends on %v: it must not depend on %v", pkg, found, banned)
		}
	}
}

// TestForbiddenDepsFindsEachWay: a banned package is found itself and by
// its subpackages, and a package whose name only starts alike is not.
func TestForbiddenDepsFindsEachWay(t *testing.T) {
	banned := []string{"internal/policy", "internal/controller"}
	deps := []string{"fmt", module + "internal/flow", module + "internal/policy", module + "internal/controller/x",
		module + "internal/policyx"}
	want := []string{module + "internal/policy", module + "internal/controller/x"}
	if got := forbiddenDeps(deps, banned); !slices.Equal(got, want) {
		t.Errorf("forbiddenDeps = %v, want %v", got, want)
	}
	if got := forbiddenDeps([]string{"fmt", module + "internal/plan"}, banned); got != nil {
		t.Errorf("forbiddenDeps of clean deps = %v", got)
	}
}

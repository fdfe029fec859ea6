package policy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/policy"
)

// TestClassesMatchAdapter keeps policy.Classes equal to the error classes
// package adapter declares.
func TestClassesMatchAdapter(t *testing.T) {
	want := []string{
		adapter.ClassCrashed,
		adapter.ClassTimeout,
		adapter.ClassConnectionFailed,
		adapter.ClassOutputMalformed,
		adapter.ClassRuntimeError,
		adapter.ClassRateLimited,
		adapter.ClassAuthFailed,
		adapter.ClassPrepareFailed,
		adapter.ClassMergeConflict,
		adapter.ClassObserveFailed,
		adapter.ClassVerificationFailed,
		adapter.ClassScopeViolation,
		adapter.ClassCancelled,
		adapter.ClassWorkerLost,
		adapter.ClassTurnBudgetExhausted,
		adapter.ClassTokenBudgetExhausted,
		adapter.ClassTimeBudgetExhausted,
	}
	if !slices.Equal(policy.Classes, want) {
		t.Errorf("policy.Classes = %v\nadapter declares %v", policy.Classes, want)
	}

	// The list above is written by hand; read adapter's source too, so a
	// class added there and forgotten here fails this test.
	files, err := filepath.Glob("../adapter/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("adapter sources: %v (%d files)", err, len(files))
	}
	var declared []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "Class") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					declared = append(declared, v)
				}
			}
		}
	}
	slices.Sort(declared)
	got := slices.Sorted(slices.Values(policy.Classes))
	if !slices.Equal(got, declared) {
		t.Errorf("policy.Classes (sorted) = %v\nadapter source declares %v", got, declared)
	}
}

func TestDefaultRetryClassesKnown(t *testing.T) {
	for _, c := range policy.DefaultRetry().RetryOn {
		if !slices.Contains(policy.Classes, c) {
			t.Errorf("DefaultRetry retries unknown class %q", c)
		}
	}
}

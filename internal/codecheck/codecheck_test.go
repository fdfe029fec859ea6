package codecheck

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// maxFuncLines is the longest a function in internal/ or cmd/ may be,
// from its func keyword to its closing brace: a long procedure reads as one
// short method per step (internal/attempt's phases).
const maxFuncLines = 100

// moduleRoot is the directory of go.mod, above this package's.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// sourceFile is a parsed non-test Go file.
type sourceFile struct {
	path string // relative to the module root
	file *ast.File
}

// packages parses the non-test Go files under dir, by directory.
func packages(t *testing.T, root, dir string, fset *token.FileSet) map[string][]sourceFile {
	t.Helper()
	pkgs := map[string][]sourceFile{}
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		pkgs[filepath.Dir(rel)] = append(pkgs[filepath.Dir(rel)], sourceFile{rel, f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// testSupport reports whether a package is test support: one of its files
// imports package testing. Only tests may import such a package
// (TestBinariesDoNotLinkTesting), so its code is test code.
func testSupport(files []sourceFile) bool {
	for _, f := range files {
		for _, imp := range f.file.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == "testing" {
				return true
			}
		}
	}
	return false
}

// longFuncs lists the functions of files longer than max lines, and counts
// the functions it measured.
func longFuncs(fset *token.FileSet, files []sourceFile, max int) (long []string, n int) {
	for _, f := range files {
		for _, decl := range f.file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n++
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			if lines := end.Line - start.Line + 1; lines > max {
				long = append(long, fmt.Sprintf("%s:%d: %s is %d lines", f.path, start.Line, funcName(fn), lines))
			}
		}
	}
	return long, n
}

// funcName is fn's name with its receiver's type, as in (*Runner).Run.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if idx, ok := typ.(*ast.IndexExpr); ok { // a generic receiver
		typ = idx.X
	}
	switch r := typ.(type) {
	case *ast.StarExpr:
		if id, ok := r.X.(*ast.Ident); ok {
			return "(*" + id.Name + ")." + fn.Name.Name
		}
	case *ast.Ident:
		return r.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

func TestFunctionsFitOnAScreen(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var long []string
	for _, dir := range []string{"internal", "cmd"} {
		n := 0
		for _, files := range packages(t, root, dir, fset) {
			if testSupport(files) {
				continue
			}
			l, m := longFuncs(fset, files, maxFuncLines)
			long, n = append(long, l...), n+m
		}
		// The walk must have found the code, or the rule holds of nothing.
		if min := map[string]int{"internal": 500, "cmd": 100}[dir]; n < min {
			t.Fatalf("measured only %d functions under %s/", n, dir)
		}
	}
	slices.Sort(long)
	for _, l := range long {
		t.Errorf("%s, more than %d: split it into steps of their own", l, maxFuncLines)
	}
}

// The check itself: a function one line too long is found, with its name;
// test support is told apart by its import of testing.
func TestLongFuncsFindsOneLineTooMany(t *testing.T) {
	body := strings.Repeat("\t_ = 0\n", maxFuncLines-2)
	src := "package p\n\nimport \"fmt\"\n\ntype T struct{}\n\n" +
		"func (t *T) Fits() {\n" + body + "}\n\n" +
		"func TooLong() {\n" + body + "\t_ = fmt.Sprint()\n}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	files := []sourceFile{{"p/p.go", f}}
	long, n := longFuncs(fset, files, maxFuncLines)
	if n != 2 || len(long) != 1 || !strings.Contains(long[0], "TooLong is 101 lines") {
		t.Errorf("measured %d functions, long %q; want TooLong of 101 lines only", n, long)
	}
	if testSupport(files) {
		t.Error("a package importing fmt taken for test support")
	}
	tf, err := parser.ParseFile(fset, "q.go", "package q\n\nimport \"testing\"\n\nvar _ testing.TB\n", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !testSupport(append(files, sourceFile{"p/q.go", tf})) {
		t.Error("a package importing testing not taken for test support")
	}
}

// Production binaries never link package testing, nor any test support
// package: it would ship its code and register its flags in the daemons.
func TestBinariesDoNotLinkTesting(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("listing the binaries' dependencies needs the go command: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./cmd/...")
	cmd.Dir = moduleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	deps := map[string]bool{}
	var importers []string
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		deps[fields[0]] = true
		if slices.Contains(fields[1:], "testing") {
			importers = append(importers, fields[0])
		}
	}
	for _, daemon := range []string{"cmd/controller", "cmd/worker"} {
		if !deps["github.com/drover-dev/drover/"+daemon] {
			t.Errorf("go list ./cmd/... did not list %s", daemon)
		}
	}
	if deps["testing"] {
		t.Errorf("a binary under cmd/ links package testing, imported by %v: move what imports it to a test support package", importers)
	}
}

// docLinkRE finds a link from code to a section of the docs.
var docLinkRE = regexp.MustCompile(`docs/([a-z0-9-]+\.md)#([a-z0-9-]+)`)

// anchors are the sections of a Markdown file, as GitHub names them: the
// heading in lower case, without punctuation, spaces as hyphens.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		a := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, strings.TrimSpace(title))
		out[a] = true
	}
	return out
}

// Every docs/FILE.md#section a comment or message names is a section the
// docs have: a renamed heading leaves no link to nowhere.
func TestDocLinksResolve(t *testing.T) {
	root := moduleRoot(t)
	docs := map[string]map[string]bool{}
	links := 0
	for _, dir := range []string{"internal", "cmd", "e2e"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range docLinkRE.FindAllStringSubmatch(string(b), -1) {
				links++
				if docs[m[1]] == nil {
					docs[m[1]] = anchors(t, filepath.Join(root, "docs", m[1]))
				}
				if !docs[m[1]][m[2]] {
					rel, _ := filepath.Rel(root, p)
					t.Errorf("%s: %s: docs/%s has no section %q", rel, m[0], m[1], m[2])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if links < 20 {
		t.Fatalf("found only %d links to the docs", links)
	}
}

// The check itself: GitHub's anchor of a heading.
func TestAnchors(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.md")
	if err := os.WriteFile(p, []byte("# Top\n## Budgets and pricing\n### What holds for all seven\nnot # a heading\n#### `worker.sandbox`: off?\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := anchors(t, p)
	for _, want := range []string{"top", "budgets-and-pricing", "what-holds-for-all-seven", "workersandbox-off"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if len(got) != 4 {
		t.Errorf("anchors %v, want 4", got)
	}
}

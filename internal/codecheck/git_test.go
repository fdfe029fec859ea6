package codecheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The rule: git is started in one place, internal/git, which hardens every
// command (no hooks, no fsmonitor, no helpers, no system or global config,
// no replace objects, its own transports only, a repository named or found
// in the command's own directory). Anywhere else in the code of internal/
// and cmd/, naming the git binary to start it is a second way to run git,
// one an agent's repository could steer.
//
// What counts as naming git: the string "git" or a path ending in "/git"
// passed to any call (exec.Command, exec.LookPath, a helper that looks a
// tool up), given as a Path field (exec.Cmd{Path: …}) or assigned to one,
// directly or through a constant or variable of the same package; and a
// command line starting "git " passed to exec.Command or
// exec.CommandContext (a shell told to run git).
//
// Where git may still be started directly:
//   - _test.go files, and test support packages (those importing package
//     testing, which no binary links: TestBinariesDoNotLinkTesting), such
//     as internal/git/gittest: tests make their fixture repositories as a
//     user would, and plant in them, unhardened, what the hardened git
//     must ignore;
//   - the packages of gitExempt below, each with its reason.
var gitExempt = map[string]string{
	"internal/git": "the one hardened way to run git",
	"cmd/demo-agent": "the stand-in for a third-party coding agent: its git is the agent's own, " +
		"run in the agent's repository as a real CLI runs it, which is what the hardening guards against",
}

// gitStarts lists where files start git (see above).
func gitStarts(fset *token.FileSet, files []sourceFile) (starts []string) {
	for _, f := range files {
		names := stringNames(f.file)
		namesGit := func(e ast.Expr, cmdline bool) bool {
			for _, v := range stringValues(e, names) {
				if v == "git" || strings.HasSuffix(v, "/git") || cmdline && strings.HasPrefix(v, "git ") {
					return true
				}
			}
			return false
		}
		report := func(n ast.Node, how string) {
			starts = append(starts, fmt.Sprintf("%s:%d: %s", f.path, fset.Position(n.Pos()).Line, how))
		}
		execName := importName(f.file, "os/exec")
		ast.Inspect(f.file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if stdOnly(f.file, n) {
					return true // fmt.Println("git …"), slog.Info("git"): no process
				}
				cmdline := isCall(n, execName, "Command", "CommandContext")
				for _, arg := range n.Args {
					if namesGit(arg, cmdline) {
						report(n, "a call naming git: "+exprString(n.Fun))
						break
					}
				}
			case *ast.KeyValueExpr:
				if id, ok := n.Key.(*ast.Ident); ok && id.Name == "Path" && namesGit(n.Value, false) {
					report(n, "a Path naming git")
				}
			case *ast.AssignStmt:
				for i, lhs := range n.Lhs {
					if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "Path" && i < len(n.Rhs) && namesGit(n.Rhs[i], false) {
						report(n, "a Path naming git")
					}
				}
			}
			return true
		})
	}
	return starts
}

// stringNames maps the names of a file's constants and variables to the
// string literals they are given anywhere in it (scopes are not told
// apart: a name given "git" anywhere counts wherever it is used).
func stringNames(f *ast.File) map[string][]string {
	names := map[string][]string{}
	add := func(lhs []ast.Expr, rhs []ast.Expr) {
		for i, l := range lhs {
			id, ok := l.(*ast.Ident)
			if !ok || i >= len(rhs) {
				continue
			}
			if lit, ok := rhs[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil {
					names[id.Name] = append(names[id.Name], v)
				}
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			lhs := make([]ast.Expr, len(n.Names))
			for i, id := range n.Names {
				lhs[i] = id
			}
			add(lhs, n.Values)
		case *ast.AssignStmt:
			add(n.Lhs, n.Rhs)
		}
		return true
	})
	return names
}

// stringValues is what string e may be: a literal, a name given literals,
// or a concatenation (of what its operands may be; of the one known, when
// the other is not: where a command line begins, or how a path ends).
func stringValues(e ast.Expr, names map[string][]string) []string {
	switch e := e.(type) {
	case *ast.BasicLit:
		if v, err := strconv.Unquote(e.Value); err == nil && e.Kind == token.STRING {
			return []string{v}
		}
	case *ast.Ident:
		return names[e.Name]
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return nil
		}
		xs, ys := stringValues(e.X, names), stringValues(e.Y, names)
		switch {
		case len(xs) == 0:
			return ys // how a path ends
		case len(ys) == 0:
			return xs // how a command line begins
		}
		var out []string
		for _, x := range xs {
			for _, y := range ys {
				out = append(out, x+y)
			}
		}
		return out
	case *ast.ParenExpr:
		return stringValues(e.X, names)
	}
	return nil
}

// importName is the name a file refers to an import path by, "" if it does
// not import it.
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return filepath.Base(path)
		}
	}
	return ""
}

// stdOnly reports whether call is to a function of the standard library
// that starts no process (fmt, log/slog, strings, ...): anything but os,
// os/exec and syscall.
func stdOnly(f *ast.File, call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok {
		return false
	}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := filepath.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name == id.Name {
			first, _, _ := strings.Cut(p, "/")
			return !strings.Contains(first, ".") && !slices.Contains([]string{"os", "os/exec", "syscall"}, p)
		}
	}
	return false
}

// isCall reports whether call calls pkg.fn for one of fns.
func isCall(call *ast.CallExpr, pkg string, fns ...string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || pkg == "" {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg && slices.Contains(fns, sel.Sel.Name)
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return fmt.Sprintf("%T", e)
}

func TestGitRunsOnlyThroughInternalGit(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var starts []string
	found := false // the hardened way itself is seen, or the check sees nothing
	for _, dir := range []string{"internal", "cmd"} {
		for pkg, files := range packages(t, root, dir, fset) {
			s := gitStarts(fset, files)
			switch {
			case pkg == "internal/git":
				found = len(s) > 0
			case gitExempt[pkg] != "", testSupport(files):
			default:
				starts = append(starts, s...)
			}
		}
	}
	if !found {
		t.Fatal("internal/git starts no git the check can see: the check is blind")
	}
	slices.Sort(starts)
	for _, s := range starts {
		t.Errorf("%s: git runs through internal/git only (git.New, Git.Run)", s)
	}
}

// The check itself: each way of naming git to start it is found, with its
// line; what only mentions git is not.
func TestGitStartsFindsEachWay(t *testing.T) {
	src := `package p

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	ex "os/exec"
)

const gitName = "git"

func starts(ctx context.Context) {
	ex.Command("git", "status")
	ex.CommandContext(ctx, "/usr/bin/git", "fetch")
	ex.LookPath(gitName)
	bin := "/opt/git/bin/git"
	_ = &ex.Cmd{Path: bin}
	var c ex.Cmd
	c.Path = "git"
	os.StartProcess("/usr/bin/"+"git", nil, nil)
	ex.Command("sh", "-c", "git add -A && git commit -m x")
	findTool("git")
}

func mentions() {
	ex.Command("sh", "-c", "echo ok")
	fmt.Println("git is a tool")
	slog.Info("git", "args", 1)
	schemes := []string{"https", "git"}
	_ = schemes
}

func findTool(string) {}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := gitStarts(fset, []sourceFile{{"p/p.go", f}})
	var lines []int
	for _, s := range got {
		var line int
		if _, err := fmt.Sscanf(strings.TrimPrefix(s, "p/p.go:"), "%d:", &line); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		lines = append(lines, line)
	}
	// Each line of starts() but its two declarations; none of mentions().
	if want := []int{14, 15, 16, 18, 20, 21, 22, 23}; !slices.Equal(lines, want) {
		t.Errorf("found git started on lines %v, want %v:\n%s", lines, want, strings.Join(got, "\n"))
	}
}

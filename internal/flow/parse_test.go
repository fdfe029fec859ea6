package flow

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
)

// testOptions is what the bad and good flows are checked against: a
// controller with two runtimes and one project configured, which knows the
// error classes retry_on names in the examples and docs.
var testOptions = Options{
	KnownRuntime: func(name string) bool {
		return name == "demo" || name == "demo-review" || name == "claude-code"
	},
	KnownProject: func(name string) bool { return name == "web" },
}

// wantRE matches an expectation in a bad flow's comment header:
//
//	# want LINE: SUBSTRING
//
// One line per expected problem; LINE 0 means the problem has no position.
var wantRE = regexp.MustCompile(`(?m)^# want (\d+): (.*)$`)

type want struct {
	line int
	msg  string
}

// TestParseBadFlows parses every testdata/bad/*.yaml file and checks that it
// reports exactly the problems its "# want" header lists. To add a case, add
// a file.
func TestParseBadFlows(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("found %d bad flows, want at least 20", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var wants []want
			for _, m := range wantRE.FindAllStringSubmatch(string(data), -1) {
				line, _ := strconv.Atoi(m[1])
				wants = append(wants, want{line, m[2]})
			}
			if len(wants) == 0 {
				t.Fatalf("%s has no '# want LINE: MESSAGE' header", file)
			}

			spec, err := Parse(file, data, testOptions)
			if err == nil {
				t.Fatalf("Parse accepted the flow: %+v", spec)
			}
			if spec != nil {
				t.Errorf("Parse returned a spec along with the error")
			}
			checkInvalid(t, err, file)

			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("error is %T, want *ValidationError", err)
			}
			if len(verr.Errors) != len(wants) {
				t.Errorf("got %d problems, want %d:\n%v", len(verr.Errors), len(wants), err)
			}
			for _, w := range wants {
				if !slices.ContainsFunc(verr.Errors, func(e *Error) bool {
					return e.Line == w.line && strings.Contains(e.Error(), w.msg)
				}) {
					t.Errorf("no problem on line %d containing %q; got:\n%v", w.line, w.msg, err)
				}
			}
		})
	}
}

// checkInvalid asserts what every Parse error promises callers.
func checkInvalid(t *testing.T, err error, file string) {
	t.Helper()
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) = false for %v", err)
	}
	var fe *Error
	if !errors.As(err, &fe) {
		t.Errorf("errors.As(err, *Error) = false for %T", err)
	} else if fe.File != file {
		t.Errorf("first error's File = %q, want %q", fe.File, file)
	}
	if !strings.Contains(err.Error(), filepath.Base(file)) {
		t.Errorf("message does not name the file %s: %v", file, err)
	}
}

// The limits are tested on generated input to keep megabytes out of the
// repository.
func TestParseLimits(t *testing.T) {
	header := "name: big\nrepo: ./repo.git\nruntime: demo\ntasks:\n"
	manyTasks := func(n int) string {
		var b strings.Builder
		b.WriteString(header)
		for i := range n {
			fmt.Fprintf(&b, "  - {id: t%d, prompt: p}\n", i)
		}
		return b.String()
	}
	tests := []struct {
		name string
		data string
		line int
		msg  string
	}{
		{"file too large", header + "  - id: a\n    prompt: " + strings.Repeat("x", MaxFileSize) + "\n", 0, "bytes; the limit is 8388608"},
		{"too many tasks", manyTasks(MaxTasks + 1), 5, "tasks: 100001 tasks; the limit is 100000"},
		{"prompt too long", header + "  - id: a\n    prompt: " + strings.Repeat("x", MaxPromptSize+1) + "\n", 6, "tasks[0].prompt: 262145 bytes; the limit is 262144"},
		{"deeply nested", strings.TrimSuffix(header, "\n") + " " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000), 4, "exceeded max depth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("big.yaml", []byte(tt.data), testOptions)
			if err == nil {
				t.Fatal("Parse accepted the flow")
			}
			checkInvalid(t, err, "big.yaml")
			var fe *Error
			if errors.As(err, &fe); fe.Line != tt.line || !strings.Contains(fe.Error(), tt.msg) {
				t.Errorf("got %v (line %d), want line %d containing %q", err, fe.Line, tt.line, tt.msg)
			}
		})
	}

	t.Run("at the limits", func(t *testing.T) {
		spec, err := Parse("big.yaml", []byte(manyTasks(MaxTasks)), testOptions)
		if err != nil {
			t.Fatal(err)
		}
		if len(spec.Tasks) != MaxTasks {
			t.Errorf("got %d tasks", len(spec.Tasks))
		}
		data := header + "  - id: a\n    prompt: " + strings.Repeat("x", MaxPromptSize) + "\n"
		if _, err := Parse("big.yaml", []byte(data), testOptions); err != nil {
			t.Error(err)
		}
	})
}

func TestParseOptions(t *testing.T) {
	data := []byte("name: f\nrepo: ./repo.git\nruntime: other\ntasks:\n  - id: a\n    prompt: p\n")

	t.Run("nil KnownRuntime accepts any runtime", func(t *testing.T) {
		if _, err := Parse("f.yaml", data, Options{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("RepoOverride replaces the repo", func(t *testing.T) {
		spec, err := Parse("dir/f.yaml", data, Options{RepoOverride: "https://example.com/r.git"})
		if err != nil {
			t.Fatal(err)
		}
		if spec.Repo != "https://example.com/r.git" {
			t.Errorf("Repo = %q", spec.Repo)
		}
	})
	t.Run("relative RepoOverride resolves against the working directory", func(t *testing.T) {
		spec, err := Parse("dir/f.yaml", data, Options{RepoOverride: "other.git"})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := filepath.Abs("other.git")
		if spec.Repo != want {
			t.Errorf("Repo = %q, want %q", spec.Repo, want)
		}
	})
	t.Run("DefaultRuntime satisfies a missing runtime without being recorded", func(t *testing.T) {
		noRuntime := []byte("name: f\nrepo: r\ntasks:\n  - {id: a, prompt: p}\n  - {id: b, prompt: p, runtime: claude-code}\n")
		if _, err := Parse("f.yaml", noRuntime, testOptions); err == nil {
			t.Fatal("a flow without runtime and no default: no error")
		}
		opts := testOptions
		opts.DefaultRuntime = "demo"
		spec, err := Parse("f.yaml", noRuntime, opts)
		if err != nil {
			t.Fatal(err)
		}
		if spec.Runtime != "" || spec.RuntimeFor(&spec.Tasks[1]) != "claude-code" {
			t.Errorf("runtimes: flow %q, tasks %q %q", spec.Runtime, spec.Tasks[0].Runtime, spec.Tasks[1].Runtime)
		}
	})
	t.Run("invalid RepoOverride has no line", func(t *testing.T) {
		_, err := Parse("f.yaml", data, Options{RepoOverride: "-x"})
		var fe *Error
		if !errors.As(err, &fe) || fe.Field != "repo" || fe.Line != 0 {
			t.Fatalf("got %#v", err)
		}
		if got, want := err.Error(), `f.yaml: repo: "-x" starts with '-'; git would read it as an option`; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

func TestParseDefaultsAndValues(t *testing.T) {
	data := []byte(`
name: 42
repo: /abs/../abs/repo
tasks:
  - id: 7
    runtime: demo
    prompt: |
      line one
      line two
    depends_on: []
    timeout: 0
`)
	spec, err := Parse("f.yaml", data, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Name != "42" || spec.Tasks[0].ID != "7" {
		t.Errorf("numbers are not read as written: name %q, id %q", spec.Name, spec.Tasks[0].ID)
	}
	if spec.Base != DefaultBase {
		t.Errorf("Base = %q, want %q", spec.Base, DefaultBase)
	}
	if spec.Repo != "/abs/repo" {
		t.Errorf("Repo = %q, want it cleaned", spec.Repo)
	}
	if spec.Tasks[0].DependsOn != nil {
		t.Errorf("DependsOn = %#v, want nil for an empty list", spec.Tasks[0].DependsOn)
	}
	if spec.Tasks[0].Prompt != "line one\nline two\n" {
		t.Errorf("Prompt = %q", spec.Tasks[0].Prompt)
	}
}

func TestRepoKinds(t *testing.T) {
	tests := []struct {
		repo string
		kind repoKind
		ok   bool
	}{
		{"https://github.com/drover-dev/drover.git", repoURL, true},
		{"ssh://git@github.com/drover-dev/drover.git", repoURL, true},
		{"file:///srv/git/r.git", repoURL, true},
		{"git@github.com:drover-dev/drover.git", repoSCP, true},
		{"host:repo.git", repoSCP, true},
		{"./repo.git", repoPath, true},
		{"../a:b/repo", repoPath, true},
		{"/srv/my repo", repoPath, true}, // spaces are fine in a path
		{"repo", repoPath, true},
		{"https://", repoURL, false},
		{"https://host/a b", repoURL, false},
		{"git@:path", repoSCP, false},
		{":path", repoSCP, false},
		{"host:", repoSCP, false},
		{"-oProxyCommand=x", repoPath, false},
		{"repo\x00", repoPath, false},
		{"", repoPath, false},
	}
	for _, tt := range tests {
		if got := kindOf(tt.repo); got != tt.kind {
			t.Errorf("kindOf(%q) = %d, want %d", tt.repo, got, tt.kind)
		}
		p := &problems{}
		checkRepo(p, tt.repo)
		if ok := len(p.errs) == 0; ok != tt.ok {
			t.Errorf("checkRepo(%q) ok = %v, want %v (%v)", tt.repo, ok, tt.ok, p.errs)
		}
	}
}

// BenchmarkParseHostile parses a maximal file whose every node is a problem,
// the most expensive input a submitter controls.
func BenchmarkParseHostile(b *testing.B) {
	data := []byte("name: x\nrepo: r\nruntime: demo\ntasks:\n- id: a\n  prompt: p\n  depends_on: [" +
		strings.Repeat("b,", MaxFileSize/2-100) + "]\n- {id: b, prompt: p}\n")
	for b.Loop() {
		if _, err := Parse("x.yaml", data, testOptions); err == nil {
			b.Fatal("accepted")
		}
	}
}

// policiesFlow sets every field of the file format, in each of its forms.
// FuzzParse starts from it too.
const policiesFlow = `
name: policies
project: web
runtime:
  name: claude-code
  model: opus
  args: [--max-turns, "30"]
validator: demo-review
review: true
max_parallel: 0x4
retry:
  max_attempts: 3
  initial_backoff: 10s
  coefficient: 2
  max_backoff: 5m
  jitter: 0.2
  retry_on: [RATE_LIMITED, AUTH_FAILED]
  fallback: [demo]
scope:
  allow: ["src/**", "*.md"]
  deny: ["src/gen/**"]
timeout: 20m
tasks:
  - id: a
    prompt: do a
    runtime: demo
    validator: {name: claude-code, model: haiku, args: []}
    review: false
    retry: {max_attempts: 1, coefficient: 1.5, jitter: 0, retry_on: [], fallback: null}
    verify: go test ./...
    verify_timeout: 5m
    scope: {}
  - id: b
    prompt: do b
    runtime: {name: demo, args: []}
    validator: null
    review: null
    retry: {}
    verify: [make lint, "make test"]
    scope: {deny: [vendor/**]}
  - id: c
    prompt: do c
    verify: []
    scope: null
`

func TestParsePolicies(t *testing.T) {
	spec, err := Parse("dir/policies.yaml", []byte(policiesFlow), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	ptr := func(v int) *int { return &v }
	fptr := func(v float64) *float64 { return &v }
	dptr := func(d time.Duration) *Duration { v := Duration(d); return &v }
	yes, no := true, false
	want := &Spec{
		Name:        "policies",
		Base:        DefaultBase,
		Project:     "web",
		Runtime:     "claude-code",
		Model:       "opus",
		Args:        []string{"--max-turns", "30"},
		Validator:   &RuntimeRef{Name: "demo-review"},
		Review:      &yes,
		MaxParallel: 4,
		Retry: &RetrySpec{
			MaxAttempts:    ptr(3),
			InitialBackoff: dptr(10 * time.Second),
			Coefficient:    fptr(2),
			MaxBackoff:     dptr(5 * time.Minute),
			Jitter:         fptr(0.2),
			RetryOn:        []drovertype.ErrorClass{"RATE_LIMITED", "AUTH_FAILED"},
			Fallback:       []string{"demo"},
		},
		Scope:   &Scope{Allow: []string{"src/**", "*.md"}, Deny: []string{"src/gen/**"}},
		Timeout: Duration(20 * time.Minute),
		Tasks: []Task{
			{
				ID: "a", Prompt: "do a", Runtime: "demo",
				Validator:     &RuntimeRef{Name: "claude-code", Model: "haiku"},
				Review:        &no,
				Retry:         &RetrySpec{MaxAttempts: ptr(1), Coefficient: fptr(1.5), Jitter: fptr(0)},
				Verify:        []string{"go test ./..."},
				VerifyTimeout: Duration(5 * time.Minute),
				Scope:         &Scope{},
			},
			{
				ID: "b", Prompt: "do b", Runtime: "demo",
				Retry:  &RetrySpec{},
				Verify: []string{"make lint", "make test"},
				Scope:  &Scope{Deny: []string{"vendor/**"}},
			},
			{ID: "c", Prompt: "do c"},
		},
	}
	if !reflect.DeepEqual(spec, want) {
		got, _ := json.MarshalIndent(spec, "", "  ")
		exp, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("got\n%s\nwant\n%s\n(or a nil/empty difference)", got, exp)
	}
	if spec.Repo != "" {
		t.Errorf("Repo = %q: with a project and no repo it must stay empty for the controller to fill", spec.Repo)
	}
	if sc := spec.ScopeFor(&spec.Tasks[0]); sc != spec.Tasks[0].Scope || !sc.Allows("vendor/x.go") {
		t.Errorf("task a: its empty scope must replace the flow's")
	}
	if sc := spec.ScopeFor(&spec.Tasks[1]); sc.Allows("vendor/x.go") || !sc.Allows("src/gen/x.go") {
		t.Errorf("task b: its scope must replace the flow's as a whole")
	}
	if sc := spec.ScopeFor(&spec.Tasks[2]); sc != spec.Scope {
		t.Errorf("task c: want the flow's scope")
	}
}

func TestParseProject(t *testing.T) {
	const tasks = "runtime: demo\ntasks:\n  - {id: a, prompt: p}\n"
	tests := []struct {
		name, data string
		opts       Options
		repo       string // want, when no error
		err        string // want, exactly
	}{
		{"project replaces repo", "name: f\nproject: web\n" + tasks, testOptions, "", ""},
		{"project supplies the runtime", "name: f\nproject: web\ntasks:\n  - {id: a, prompt: p}\n", testOptions, "", ""},
		{"project with a repo", "name: f\nproject: web\nrepo: /srv/r.git\n" + tasks, testOptions, "/srv/r.git", ""},
		{"any project without KnownProject", "name: f\nproject: other\n" + tasks, Options{}, "", ""},
		{"RepoOverride with a project", "name: f\nproject: web\n" + tasks, Options{RepoOverride: "/srv/o.git"}, "/srv/o.git", ""},
		{"unknown project", "name: f\nproject: api\n" + tasks, testOptions, "",
			`f.yaml:2:10: project: unknown project "api": it is not configured`},
		{"null project still needs a repo", "name: f\nproject:\n" + tasks, testOptions, "",
			"f.yaml:1:1: repo: required: a git URL or a local path"},
		{"project is an id", "name: f\nproject: a/b\n" + tasks, Options{}, "",
			`f.yaml:2:10: project: "a/b" contains '/'; only ASCII letters, digits and '-' are allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := Parse("f.yaml", []byte(tt.data), tt.opts)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Errorf("got %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if spec.Repo != tt.repo {
				t.Errorf("Repo = %q, want %q", spec.Repo, tt.repo)
			}
			if err := spec.Validate(tt.opts); err != nil {
				t.Errorf("does not re-validate: %v", err)
			}
		})
	}
}

// TestParseFieldLimits checks the bound on every list and string of the new
// fields, just past and at the limit.
func TestParseFieldLimits(t *testing.T) {
	list := func(n int, item string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+", ", n), ", ") + "]"
	}
	flow := func(flowLevel, taskLevel string) string {
		return "name: f\nrepo: r\nruntime: demo\n" + flowLevel + "tasks:\n  - id: a\n    prompt: p\n" + taskLevel
	}
	tests := []struct {
		name     string
		over, at string
		line     int
		msg      string
	}{
		{"args", flow("", "    runtime: {name: demo, args: "+list(MaxArgs+1, "x")+"}\n"),
			flow("", "    runtime: {name: demo, args: "+list(MaxArgs, "x")+"}\n"),
			7, "tasks[0].runtime.args: 65 entries; the limit is 64"},
		{"arg length", flow("", "    runtime: {name: demo, args: ["+strings.Repeat("x", MaxArgLen+1)+"]}\n"),
			flow("", "    runtime: {name: demo, args: ["+strings.Repeat("x", MaxArgLen)+"]}\n"),
			7, "tasks[0].runtime.args[0]: 4097 bytes; the limit is 4096"},
		{"model length", flow("validator: {name: demo, model: "+strings.Repeat("m", MaxModelLen+1)+"}\n", ""),
			flow("validator: {name: demo, model: "+strings.Repeat("m", MaxModelLen)+"}\n", ""),
			4, "validator.model: \"mmmmmmmmmmmmmmmmmmmm\"... is 201 bytes long; the limit is 200"},
		{"verify", flow("", "    verify: "+list(MaxVerify+1, "make")+"\n"),
			flow("", "    verify: "+list(MaxVerify, "make")+"\n"),
			7, "tasks[0].verify: 51 entries; the limit is 50"},
		{"verify length", flow("", "    verify: "+strings.Repeat("x", MaxVerifyLen+1)+"\n"),
			flow("", "    verify: "+strings.Repeat("x", MaxVerifyLen)+"\n"),
			7, "tasks[0].verify[0]: 8193 bytes; the limit is 8192"},
		{"globs", flow("scope: {deny: "+list(MaxGlobs+1, "a/*")+"}\n", ""),
			flow("scope: {deny: "+list(MaxGlobs, "a/*")+"}\n", ""),
			4, "scope.deny: 201 entries; the limit is 200"},
		{"glob length", flow("", "    scope: {allow: ["+strings.Repeat("g", MaxGlobLen+1)+"]}\n"),
			flow("", "    scope: {allow: ["+strings.Repeat("g", MaxGlobLen)+"]}\n"),
			7, "tasks[0].scope.allow[0]: \"gggggggggggggggggggg\"... is 1025 bytes long; the limit is 1024"},
		{"glob alternatives", flow("scope: {allow: [\"{a,b}/{a,b}/{a,b}/{a,b}/{a,b}/{a,b}/{a,b}\"]}\n", ""),
			flow("scope: {allow: [\"{a,b}/{a,b}/{a,b}/{a,b}/{a,b}/{a,b}\"]}\n", ""),
			4, "expand to more than 64 patterns"},
		{"retry_on", flow("retry: {retry_on: "+list(MaxRetryOn+1, "X")+"}\n", ""),
			flow("retry: {retry_on: [RATE_LIMITED]}\n", ""),
			4, "retry.retry_on: 65 entries; the limit is 64"},
		{"fallback", flow("", "    retry: {fallback: "+list(MaxFallback+1, "demo")+"}\n"),
			flow("", "    retry: {fallback: [demo, claude-code]}\n"),
			7, "tasks[0].retry.fallback: 17 entries; the limit is 16"},
		{"max_attempts", flow("retry: {max_attempts: 101}\n", ""), flow("retry: {max_attempts: 100}\n", ""),
			4, "retry.max_attempts: 101 is out of range: want 1 to 100"},
		{"coefficient", flow("retry: {coefficient: 100.5}\n", ""), flow("retry: {coefficient: 100}\n", ""),
			4, "retry.coefficient: 100.5 is out of range"},
		{"jitter", flow("retry: {jitter: -0.1}\n", ""), flow("retry: {jitter: 1}\n", ""),
			4, "retry.jitter: -0.1 is out of range"},
		{"infinite coefficient", flow("retry: {coefficient: .inf}\n", ""), flow("retry: {coefficient: 1}\n", ""),
			4, "retry.coefficient: +Inf is out of range"},
		{"max_parallel", flow("max_parallel: 10001\n", ""), flow("max_parallel: 10000\n", ""),
			4, "max_parallel: 10001 is out of range"},
		{"backoffs", flow("retry: {initial_backoff: 2m, max_backoff: 1m}\n", ""),
			flow("retry: {initial_backoff: 1m, max_backoff: 1m}\n", ""),
			4, "retry.initial_backoff: 2m0s is longer than max_backoff 1m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tt.over), testOptions)
			var verr *ValidationError
			if !errors.As(err, &verr) || len(verr.Errors) != 1 {
				t.Fatalf("want one problem, got %v", err)
			}
			if e := verr.Errors[0]; e.Line != tt.line || !strings.Contains(e.Error(), tt.msg) {
				t.Errorf("got %v (line %d), want line %d containing %q", e, e.Line, tt.line, tt.msg)
			}
			if _, err := Parse("f.yaml", []byte(tt.at), testOptions); err != nil {
				t.Errorf("at the limit: %v", err)
			}
		})
	}
}

func TestParseUnknownClass(t *testing.T) {
	data := []byte("name: f\nrepo: r\nruntime: demo\nretry: {retry_on: [MY_CLASS]}\ntasks:\n  - {id: a, prompt: p}\n")
	_, err := Parse("f.yaml", data, Options{})
	if err == nil || err.Error() != `f.yaml:4:20: retry.retry_on[0]: unknown error class "MY_CLASS"` {
		t.Errorf("got %v", err)
	}
}

func TestParseBudget(t *testing.T) {
	spec, err := Parse("budget.yaml", []byte(`name: b
repo: ./repo.git
runtime: demo
budget: {tokens: 5000000000, cost_usd: 12.5, running: finish}
tasks:
  - {id: a, prompt: a, budget: {tokens: 1000}}
  - {id: b, prompt: b, budget: {cost_usd: 0.25}}
  - {id: c, prompt: c, budget: null}
`), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	if b := spec.Budget; *b != (Budget{Tokens: 5_000_000_000, CostUSD: 12.5, Running: BudgetFinish}) || !b.Limited() || b.Stops() {
		t.Errorf("flow budget %+v", b)
	}
	if b := spec.Tasks[0].Budget; *b != (Budget{Tokens: 1000}) || !b.Stops() {
		t.Errorf("task a budget %+v", b)
	}
	if b := spec.Tasks[1].Budget; *b != (Budget{CostUSD: 0.25}) {
		t.Errorf("task b budget %+v", b)
	}
	if spec.Tasks[2].Budget != nil || (*Budget)(nil).Limited() || (&Budget{Running: "stop"}).Limited() {
		t.Errorf("task c budget %+v, or an empty budget limits something", spec.Tasks[2].Budget)
	}
	if err := CheckBudget(&Budget{CostUSD: math.NaN()}); err == nil || !strings.Contains(err.Error(), "budget.cost_usd") {
		t.Errorf("CheckBudget(NaN) = %v", err)
	}
	if err := CheckBudget(&Budget{Tokens: 7, Running: BudgetStop}); err != nil {
		t.Errorf("CheckBudget = %v", err)
	}
}

// TestLocate: problems the controller finds in a parsed file's spec (its
// runtimes and project, which only it knows) are placed in the file as
// Parse places its own, each at its field or the closest enclosing one,
// in the order of the file; and they render as docs/flows.md shows them.
func TestLocate(t *testing.T) {
	const file = "name: f\nproject: api\nrepo: /srv/r.git\nruntime: demo\ntasks:\n" +
		"  - id: a\n    prompt: p\n" +
		"  - id: b\n    prompt: q\n    runtime: nope\n"
	spec, err := Parse("flow.yaml", []byte(file), Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = spec.Validate(Options{
		KnownRuntime: func(n string) bool { return n == "demo" },
		KnownProject: func(string) bool { return false },
		Complete:     true,
	})
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate: %v", err)
	}
	errs := append(ve.Errors, &Error{Field: "tasks[1].scope.allow[3]", Msg: "deep"}, nil, &Error{Field: "nosuch", Msg: "elsewhere"})
	got := Locate("flow.yaml", []byte(file), errs)
	want := "flow.yaml:1:1: nosuch: elsewhere\n" +
		"flow.yaml:2:10: project: unknown project \"api\": it is not configured\n" +
		"flow.yaml:8:5: tasks[1].scope.allow[3]: deep\n" +
		"flow.yaml:10:14: tasks[1].runtime: unknown runtime \"nope\": it is not configured"
	if got == nil || got.Error() != want {
		t.Errorf("Locate:\n%v\nwant:\n%s", got, want)
	}
	if !errors.Is(got, ErrInvalid) {
		t.Errorf("%v is not ErrInvalid", got)
	}
	if err := Locate("flow.yaml", []byte(file), nil); err != nil {
		t.Errorf("no problems located: %v", err)
	}
	// A file that no longer parses still gets its problems, without lines.
	if got := Locate("flow.yaml", []byte("[\n"), ve.Errors[:1]); got == nil || !strings.HasPrefix(got.Error(), "flow.yaml: ") {
		t.Errorf("a broken file: %v", got)
	}
}

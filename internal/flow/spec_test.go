package flow

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	yaml "go.yaml.in/yaml/v3"
)

// TestParseExamples parses every example flow, so the examples in the
// repository cannot rot, and checks the two the docs lean on in detail.
func TestParseExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]*Spec{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := Parse(file, data, testOptions)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if err := spec.Validate(testOptions); err != nil {
			t.Errorf("%s: parsed spec does not re-validate: %v", file, err)
		}
		specs[filepath.Base(file)] = spec
	}

	wantRepo, err := filepath.Abs("../../examples/repo.git")
	if err != nil {
		t.Fatal(err)
	}

	hello := specs["hello.yaml"]
	if hello == nil {
		t.Fatal("examples/hello.yaml did not parse")
	}
	if hello.Name != "hello" || len(hello.Tasks) != 1 || hello.Repo != wantRepo || hello.Base != "HEAD" {
		t.Errorf("hello = %+v", hello)
	}

	d := specs["diamond.yaml"]
	if d == nil {
		t.Fatal("examples/diamond.yaml did not parse")
	}
	if d.Repo != wantRepo {
		t.Errorf("Repo = %q, want %q: a relative repo resolves against the flow file's directory", d.Repo, wantRepo)
	}
	if got, want := d.TopoOrder(), []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("TopoOrder = %v, want %v", got, want)
	}
	wantDeps := map[string][]string{"a": {"c"}, "b": {"c"}, "c": {"d"}, "d": nil}
	if got := d.Dependents(); !reflect.DeepEqual(got, wantDeps) {
		t.Errorf("Dependents = %v, want %v", got, wantDeps)
	}
	for i := range d.Tasks {
		if got := d.RuntimeFor(&d.Tasks[i]); got != "demo" {
			t.Errorf("RuntimeFor(%s) = %q", d.Tasks[i].ID, got)
		}
	}
	if dt, ok := d.Task("d"); !ok || dt.Timeout != Duration(2*time.Minute) || !slices.Equal(dt.DependsOn, []string{"c"}) {
		t.Errorf("Task(d) = %+v, %v", dt, ok)
	}
	if d.Timeout != Duration(5*time.Minute) {
		t.Errorf("Timeout = %v", d.Timeout)
	}
	if !strings.Contains(d.Tasks[0].Prompt, "@write greeting.txt Hello from task a") {
		t.Errorf("task a prompt = %q", d.Tasks[0].Prompt)
	}
	if d.Validator != nil || d.Review != nil || d.Retry != nil || d.Scope != nil || d.Tasks[0].Verify != nil {
		t.Errorf("diamond sets no policy, got %+v", d)
	}

	c := specs["checked.yaml"]
	if c == nil {
		t.Fatal("examples/checked.yaml did not parse")
	}
	if c.Validator == nil || c.Validator.Name != "demo-review" || c.Review == nil || !*c.Review || c.MaxParallel != 2 {
		t.Errorf("checked: validator %+v, review %v, max_parallel %d", c.Validator, c.Review, c.MaxParallel)
	}
	if r := c.Retry; r == nil || *r.MaxAttempts != 2 || *r.InitialBackoff != Duration(time.Second) ||
		!slices.Equal(r.RetryOn, []drovertype.ErrorClass{"VERIFICATION_FAILED", "RUNTIME_TIMEOUT"}) || r.Fallback != nil {
		t.Errorf("checked: retry %+v", c.Retry)
	}
	notes, greeting, summary := &c.Tasks[0], &c.Tasks[1], &c.Tasks[2]
	if !slices.Equal(notes.Verify, []string{`grep -q "Release notes" docs/notes.md`}) {
		t.Errorf("notes: verify %q", notes.Verify)
	}
	if greeting.Runtime != "demo" || !slices.Equal(greeting.Args, []string{"--verbose"}) ||
		len(greeting.Verify) != 2 || greeting.VerifyTimeout != Duration(time.Minute) {
		t.Errorf("greeting = %+v", greeting)
	}
	if !c.ScopeFor(notes).Allows("docs/notes.md") || c.ScopeFor(notes).Allows("docs/private/x") ||
		c.ScopeFor(notes).Allows("src/main.go") || !c.ScopeFor(greeting).Allows("greeting.txt") {
		t.Error("checked: the flow's scope is not applied")
	}
	if sc := c.ScopeFor(summary); !sc.Allows("SUMMARY.md") || sc.Allows("greeting.txt") {
		t.Errorf("summary: scope %+v", sc)
	}
	if summary.Review == nil || *summary.Review || *summary.Retry.MaxAttempts != 1 {
		t.Errorf("summary = %+v", summary)
	}
}

func TestSpecJSONRoundTrip(t *testing.T) {
	s := diamond()
	s.Timeout = Duration(90 * time.Second)
	s.Tasks[3].Timeout = Duration(10 * time.Minute)
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"timeout":"1m30s"`, `"timeout":"10m0s"`, `"depends_on":["a","b"]`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON %s lacks %s", data, want)
		}
	}
	if strings.Contains(string(data), `"runtime":""`) {
		t.Errorf("JSON %s has an empty task runtime; it should be omitted", data)
	}
	for _, absent := range []string{"project", "model", "args", "validator", "review", "retry", "max_parallel", "scope", "verify"} {
		if strings.Contains(string(data), `"`+absent+`"`) {
			t.Errorf("JSON %s has %q; unset policy fields should be omitted", data, absent)
		}
	}
	var back Spec
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, s) {
		t.Errorf("round trip changed the spec:\n got %+v\nwant %+v", back, *s)
	}

	t.Run("every field", func(t *testing.T) {
		s := withPolicies()
		data, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"project":"web"`, `"model":"opus"`, `"args":["--max-turns","30"]`,
			`"validator":{"name":"demo-review"}`, `"review":true`, `"review":false`, `"max_parallel":4`,
			`"retry":{"max_attempts":3,"initial_backoff":"10s","coefficient":2,"max_backoff":"5m0s","jitter":0.2,"retry_on":["RATE_LIMITED"],"fallback":["demo"]}`,
			`"retry":{}`, `"scope":{"allow":["src/**"],"deny":["src/gen/**"]}`, `"scope":{}`,
			`"verify":["go test ./..."]`, `"verify_timeout":"5m0s"`} {
			if !strings.Contains(string(data), want) {
				t.Errorf("JSON %s lacks %s", data, want)
			}
		}
		var back Spec
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&back, s) {
			t.Errorf("round trip changed the spec:\n got %+v\nwant %+v", back, *s)
		}
	})

	t.Run("parsed file", func(t *testing.T) {
		spec, err := Parse("f.yaml", []byte(policiesFlow), testOptions)
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		var back Spec
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&back, spec) {
			t.Errorf("round trip changed the spec:\n got %+v\nwant %+v", back, *spec)
		}
	})
}

// withPolicies is diamond with every policy field set, at both levels.
func withPolicies() *Spec {
	s := diamond()
	three, one := 3, 1
	two, fifth := 2.0, 0.2
	initial, max := Duration(10*time.Second), Duration(5*time.Minute)
	yes, no := true, false
	s.Project = "web"
	s.Runtime, s.Model, s.Args = "claude-code", "opus", []string{"--max-turns", "30"}
	s.Validator = &RuntimeRef{Name: "demo-review"}
	s.Review = &yes
	s.Retry = &RetrySpec{MaxAttempts: &three, InitialBackoff: &initial, Coefficient: &two, MaxBackoff: &max,
		Jitter: &fifth, RetryOn: []drovertype.ErrorClass{"RATE_LIMITED"}, Fallback: []string{"demo"}}
	s.MaxParallel = 4
	s.Scope = &Scope{Allow: []string{"src/**"}, Deny: []string{"src/gen/**"}}
	a := &s.Tasks[0]
	a.Runtime, a.Model, a.Args = "demo", "big", []string{"-v"}
	a.Validator = &RuntimeRef{Name: "claude-code", Model: "haiku", Args: []string{"--quick"}}
	a.Review = &no
	a.Retry = &RetrySpec{MaxAttempts: &one}
	a.Verify = []string{"go test ./..."}
	a.VerifyTimeout = Duration(5 * time.Minute)
	a.Scope = &Scope{}
	s.Tasks[1].Retry = &RetrySpec{}
	return s
}

func TestDuration(t *testing.T) {
	for _, d := range []Duration{0, Duration(time.Nanosecond), Duration(90 * time.Second), Duration(26 * time.Hour)} {
		data, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := json.Unmarshal(data, &back); err != nil || back != d {
			t.Errorf("%v -> %s -> %v, %v", d, data, back, err)
		}
	}

	var d Duration
	if err := json.Unmarshal([]byte(`"10m"`), &d); err != nil || d != Duration(10*time.Minute) {
		t.Errorf(`"10m" -> %v, %v`, d, err)
	}
	d = 7
	if err := json.Unmarshal([]byte(`null`), &d); err != nil || d != 7 {
		t.Errorf("null -> %v, %v; want unchanged", d, err)
	}
	for _, bad := range []string{`"-1s"`, `"abc"`, `"90"`, `90`, `{}`} {
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}

	var cfg struct {
		Timeout Duration `yaml:"timeout"`
	}
	if err := yaml.Unmarshal([]byte("timeout: 2m30s\n"), &cfg); err != nil || cfg.Timeout != Duration(150*time.Second) {
		t.Errorf("yaml: %v, %v", cfg.Timeout, err)
	}
	for _, bad := range []string{"timeout: -2s\n", "timeout: [1]\n", "timeout: soon\n"} {
		if err := yaml.Unmarshal([]byte(bad), &cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("yaml %q: got %v, want ErrInvalid", bad, err)
		}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil || string(out) != "timeout: 2m30s\n" {
		t.Errorf("yaml.Marshal = %q, %v", out, err)
	}
}

// diamond is examples/diamond.yaml built in code.
func diamond() *Spec {
	return &Spec{
		Name:    "diamond",
		Repo:    "/srv/repo.git",
		Base:    "main",
		Runtime: "demo",
		Tasks: []Task{
			{ID: "a", Prompt: "do a"},
			{ID: "b", Prompt: "do b", Runtime: "claude-code"},
			{ID: "c", Prompt: "do c", DependsOn: []string{"a", "b"}},
			{ID: "d", Prompt: "do d", DependsOn: []string{"c"}},
		},
	}
}

func TestGraph(t *testing.T) {
	s := diamond()
	if got := s.RuntimeFor(&s.Tasks[1]); got != "claude-code" {
		t.Errorf("RuntimeFor(b) = %q, want the task's own runtime", got)
	}
	if got := s.RuntimeFor(&s.Tasks[0]); got != "demo" {
		t.Errorf("RuntimeFor(a) = %q, want the flow default", got)
	}
	if _, ok := s.Task("zz"); ok {
		t.Error("Task(zz) found a task")
	}
	if task, ok := s.Task("c"); !ok || task != &s.Tasks[2] {
		t.Error("Task(c) does not point into the spec")
	}

	tests := []struct {
		name  string
		tasks []Task
		order []string
		deps  map[string][]string
	}{
		{
			name: "ties keep file order",
			tasks: []Task{
				{ID: "late", DependsOn: []string{"x"}},
				{ID: "x"},
				{ID: "y"},
				{ID: "early", DependsOn: []string{"y"}},
			},
			// x is the first ready task; once it is done, late (index 0)
			// precedes y (index 2).
			order: []string{"x", "late", "y", "early"},
			deps:  map[string][]string{"late": nil, "x": {"late"}, "y": {"early"}, "early": nil},
		},
		{
			name: "chain listed backwards",
			tasks: []Task{
				{ID: "c", DependsOn: []string{"b"}},
				{ID: "b", DependsOn: []string{"a"}},
				{ID: "a"},
			},
			order: []string{"a", "b", "c"},
			deps:  map[string][]string{"a": {"b"}, "b": {"c"}, "c": nil},
		},
		{
			name: "dependents in file order",
			tasks: []Task{
				{ID: "z", DependsOn: []string{"root"}},
				{ID: "root"},
				{ID: "a", DependsOn: []string{"root"}},
			},
			order: []string{"root", "z", "a"},
			deps:  map[string][]string{"root": {"z", "a"}, "z": nil, "a": nil},
		},
		{
			// Invalid specs must not make the helpers panic or lose tasks.
			name: "invalid: cycle, unknown, self and repeated dependencies",
			tasks: []Task{
				{ID: "a", DependsOn: []string{"b", "b", "nope"}},
				{ID: "b", DependsOn: []string{"a"}},
				{ID: "c", DependsOn: []string{"c"}},
			},
			order: []string{"c", "a", "b"},
			deps:  map[string][]string{"a": {"b"}, "b": {"a"}, "c": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Spec{Tasks: tt.tasks}
			if got := s.TopoOrder(); !slices.Equal(got, tt.order) {
				t.Errorf("TopoOrder = %v, want %v", got, tt.order)
			}
			if got := s.Dependents(); !reflect.DeepEqual(got, tt.deps) {
				t.Errorf("Dependents = %v, want %v", got, tt.deps)
			}
		})
	}
}

// TestValidate checks a Spec built in code: errors name the field but carry
// no file or line.
func TestValidate(t *testing.T) {
	if err := diamond().Validate(testOptions); err != nil {
		t.Fatalf("diamond: %v", err)
	}
	empty := diamond()
	empty.Base = ""
	if err := empty.Validate(testOptions); err != nil {
		t.Errorf("an empty base means HEAD: %v", err)
	}

	tests := []struct {
		name   string
		mutate func(s *Spec)
		want   []string // each problem's Error(), in order
	}{
		{"empty spec", func(s *Spec) { *s = Spec{} }, []string{
			"name: required: give the flow an id-like name",
			"repo: required: a git URL or a local path",
			"tasks: at least one task is required",
		}},
		{"depends on unknown task", func(s *Spec) { s.Tasks[2].DependsOn[1] = "x" }, []string{
			`tasks[2].depends_on[1]: unknown task "x"`,
		}},
		{"duplicate id", func(s *Spec) { s.Tasks[3].ID = "a" }, []string{
			`tasks[3].id: duplicate task id "a" (first defined at tasks[0].id)`,
		}},
		{"cycle", func(s *Spec) { s.Tasks[0].DependsOn = []string{"d"} }, []string{
			"tasks[2].depends_on[0]: dependency cycle: a -> d -> c -> a",
		}},
		{"negative timeouts", func(s *Spec) { s.Timeout = -1; s.Tasks[0].Timeout = Duration(-time.Second) }, []string{
			"timeout: negative duration -1ns",
			"tasks[0].timeout: negative duration -1s",
		}},
		{"no runtime", func(s *Spec) { s.Runtime = "" }, []string{
			"tasks[0].runtime: no runtime: set runtime on the task or a default runtime for the flow",
			"tasks[2].runtime: no runtime: set runtime on the task or a default runtime for the flow",
			"tasks[3].runtime: no runtime: set runtime on the task or a default runtime for the flow",
		}},
		{"bad strings", func(s *Spec) {
			s.Runtime = "de mo"
			s.Tasks[0].Prompt = "a\x00b"
			s.Tasks[1].Prompt = "\xff"
			s.Tasks[1].Runtime = "nope"
		}, []string{
			`runtime: runtime "de mo" contains whitespace or control characters`,
			"tasks[0].prompt: contains a NUL byte",
			"tasks[1].prompt: not valid UTF-8",
			`tasks[1].runtime: unknown runtime "nope": it is not configured`,
		}},
		{"too many tasks", func(s *Spec) { s.Tasks = make([]Task, MaxTasks+1) }, []string{
			"tasks: 100001 tasks; the limit is 100000",
		}},
		{"project replaces repo", func(s *Spec) { s.Repo = ""; s.Project = "nope" }, []string{
			`project: unknown project "nope": it is not configured`,
		}},
		{"invalid project", func(s *Spec) { s.Project = "-p" }, []string{
			`project: "-p" starts with '-'; an id must start with a letter or digit`,
		}},
		{"model and args without a runtime", func(s *Spec) {
			// A Spec built in code may change the model of the runtime a
			// lower level chooses; a file cannot (its mapping needs a name).
			s.Model = "opus"
			s.Tasks[1].Runtime, s.Tasks[1].Args = "", []string{"-v"}
			s.Tasks[2].Validator = &RuntimeRef{Model: "haiku"}
			s.Runtime = ""
			s.Tasks[0].Runtime, s.Tasks[2].Runtime, s.Tasks[3].Runtime = "demo", "demo", "demo"
		}, []string{
			"tasks[1].runtime: no runtime: set runtime on the task or a default runtime for the flow",
		}},
		{"bad runtime settings", func(s *Spec) {
			s.Model = "a\nb"
			s.Args = []string{"ok", "\xff", strings.Repeat("x", MaxArgLen+1)}
			s.Tasks[0].Model = "\xff"
			s.Tasks[0].Runtime = "demo"
			s.Tasks[1].Args = make([]string, MaxArgs+1)
		}, []string{
			`runtime.model: model "a\nb" contains control characters`,
			"runtime.args[1]: not valid UTF-8",
			"runtime.args[2]: 4097 bytes; the limit is 4096",
			"tasks[0].runtime.model: not valid UTF-8",
			"tasks[1].runtime.args: 65 arguments; the limit is 64",
		}},
		{"validators", func(s *Spec) {
			s.Validator = &RuntimeRef{Model: "-m"}
			s.Tasks[0].Validator = &RuntimeRef{Name: "gone", Args: []string{"a\x00"}}
		}, []string{
			`validator.model: model "-m" starts with '-'; the runtime's CLI would read it as an option`,
			`tasks[0].validator: unknown runtime "gone": it is not configured`,
			`tasks[0].validator.args[0]: argument "a\x00" contains control characters`,
		}},
		{"retry", func(s *Spec) {
			zero, nan, neg := 0, math.NaN(), Duration(-1)
			s.Retry = &RetrySpec{MaxAttempts: &zero, Coefficient: &nan, Jitter: &nan, MaxBackoff: &neg,
				RetryOn: []drovertype.ErrorClass{"", "WORKER_LOST", "WORKER_LOST", "X"}, Fallback: []string{"demo", "nope", "demo", "sp ace"}}
			s.Tasks[0].Retry = &RetrySpec{RetryOn: make([]drovertype.ErrorClass, MaxRetryOn+1), Fallback: make([]string, MaxFallback+1)}
		}, []string{
			"retry.max_attempts: 0 is out of range: want 1 to 100 (1 means no retry)",
			"retry.max_backoff: negative duration -1ns",
			"retry.coefficient: NaN is out of range: want 1 to 100 (1 keeps the backoff constant)",
			"retry.jitter: NaN is out of range: want 0 to 1 (a fraction of the backoff)",
			`retry.retry_on[0]: "" is not an error class: want upper-case letters, digits and '_', like RATE_LIMITED`,
			`retry.retry_on[2]: duplicate class "WORKER_LOST" (also retry_on[1])`,
			`retry.retry_on[3]: unknown error class "X"`,
			`retry.fallback[1]: unknown runtime "nope": it is not configured`,
			`retry.fallback[2]: duplicate runtime "demo" (also fallback[0])`,
			`retry.fallback[3]: runtime "sp ace" contains whitespace or control characters`,
			"tasks[0].retry.retry_on: 65 classes; the limit is 64",
			"tasks[0].retry.fallback: 17 runtimes; the limit is 16",
		}},
		{"max_parallel", func(s *Spec) { s.MaxParallel = -1 }, []string{
			"max_parallel: -1 is out of range: want 0 to 10000 (0 means the configured default)",
		}},
		{"verify", func(s *Spec) {
			s.Tasks[0].Verify = []string{"make", " \t\n", "a\x00b", "\xff", strings.Repeat("x", MaxVerifyLen+1)}
			s.Tasks[0].VerifyTimeout = -1
			s.Tasks[1].Verify = make([]string, MaxVerify+1)
		}, []string{
			"tasks[0].verify[1]: blank command",
			"tasks[0].verify[2]: contains a NUL byte",
			"tasks[0].verify[3]: not valid UTF-8",
			"tasks[0].verify[4]: 8193 bytes; the limit is 8192",
			"tasks[0].verify_timeout: negative duration -1ns",
			"tasks[1].verify: 51 commands; the limit is 50",
		}},
		{"scope", func(s *Spec) {
			s.Scope = &Scope{Allow: []string{"ok/**", "a//b", "x/./y", "c\x7f"}, Deny: make([]string, MaxGlobs+1)}
			s.Tasks[0].Scope = &Scope{Deny: []string{"{,a/..}/x", "\xff", "a/[b"}}
		}, []string{
			`scope.allow[1]: glob "a//b" contains '//'`,
			`scope.allow[2]: glob "x/./y" contains a '.' element; write paths from the repository root without './'`,
			`scope.allow[3]: glob "c\x7f" contains control characters`,
			"scope.deny: 201 globs; the limit is 200",
			`tasks[0].scope.deny[0]: glob "{,a/..}/x" contains '..'; scopes cannot reach outside the repository`,
			"tasks[0].scope.deny[1]: not valid UTF-8",
			`tasks[0].scope.deny[2]: glob "a/[b" is malformed (check its [ ] and { } pairs and '\' escapes)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := diamond()
			tt.mutate(s)
			err := s.Validate(testOptions)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("got %T", err)
			}
			var got []string
			for _, e := range verr.Errors {
				if e.File != "" || e.Line != 0 || e.Column != 0 {
					t.Errorf("code-built spec error has a position: %#v", e)
				}
				got = append(got, e.Error())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}

func TestScopeAllows(t *testing.T) {
	tests := []struct {
		name  string
		scope *Scope
		path  string
		want  bool
	}{
		{"nil allows everything", nil, "any/path.go", true},
		{"nil allows even escapes", nil, "../x", true},
		{"empty allows everything", &Scope{}, "any/path.go", true},
		{"allow match", &Scope{Allow: []string{"src/**"}}, "src/a/b.go", true},
		{"allow ** matches the directory itself", &Scope{Allow: []string{"src/**"}}, "src", true},
		{"allow miss", &Scope{Allow: []string{"src/**"}}, "docs/a.md", false},
		{"allow prefix is not a match", &Scope{Allow: []string{"src/**"}}, "srcx/a.go", false},
		{"one of several", &Scope{Allow: []string{"docs/*.md", "src/**"}}, "docs/a.md", true},
		{"* stays in its directory", &Scope{Allow: []string{"docs/*.md"}}, "docs/sub/a.md", false},
		{"** in the middle", &Scope{Allow: []string{"**/testdata/**"}}, "a/b/testdata/x.yaml", true},
		{"** at the start matches the root too", &Scope{Allow: []string{"**/*.go"}}, "main.go", true},
		{"alternatives", &Scope{Allow: []string{"{cmd,internal}/**"}}, "internal/flow/spec.go", true},
		{"character class", &Scope{Allow: []string{"v[0-9].txt"}}, "v7.txt", true},
		{"deny wins", &Scope{Allow: []string{"src/**"}, Deny: []string{"src/gen/**"}}, "src/gen/x.go", false},
		{"deny alone", &Scope{Deny: []string{"secrets/**", "*.pem"}}, "key.pem", false},
		{"deny alone allows the rest", &Scope{Deny: []string{"secrets/**"}}, "src/x.go", true},
		{"matching is case-sensitive", &Scope{Allow: []string{"src/**"}}, "SRC/x.go", false},
		{"dotfiles match *", &Scope{Allow: []string{"*"}}, ".env", true},
		{"path is cleaned", &Scope{Deny: []string{"secrets/**"}}, "src/../secrets/k", false},
		{"path is cleaned for allow", &Scope{Allow: []string{"src/*.go"}}, "./src//a.go", true},
		{"escape is never allowed", &Scope{Deny: []string{"x"}}, "../outside", false},
		{"escape after cleaning", &Scope{Allow: []string{"**"}}, "a/../../outside", false},
		{"absolute is never allowed", &Scope{Allow: []string{"**"}}, "/etc/passwd", false},
		{"invalid allow glob allows nothing", &Scope{Allow: []string{"src/[", "docs/**"}}, "src/[", false},
		{"invalid deny glob denies everything", &Scope{Deny: []string{"a/["}}, "b/c", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.scope.Allows(tt.path); got != tt.want {
				t.Errorf("%+v.Allows(%q) = %v, want %v", tt.scope, tt.path, got, tt.want)
			}
		})
	}
}

func TestScopeFor(t *testing.T) {
	s := diamond()
	if s.ScopeFor(&s.Tasks[0]) != nil {
		t.Error("no scope anywhere: want nil")
	}
	flow := &Scope{Allow: []string{"src/**"}}
	own := &Scope{Deny: []string{"x"}}
	s.Scope, s.Tasks[1].Scope = flow, own
	if s.ScopeFor(&s.Tasks[0]) != flow || s.ScopeFor(&s.Tasks[1]) != own {
		t.Error("a task's own scope must replace the flow's, and the flow's apply otherwise")
	}
}

func TestGlobAlternatives(t *testing.T) {
	tests := []struct {
		glob string
		want int
	}{
		{"src/**", 1},
		{"{a,b}", 2},
		{"{a,b,c}/{d,e}", 6},
		{"{a,{b,c}}", 4}, // an overestimate of 3
		{`\{a,b}`, 1},
		{"[{,}]", 1},
		{`[\]{,]`, 1},
		{"{}", 1},
	}
	for _, tt := range tests {
		if got := globAlternatives(tt.glob); got != tt.want {
			t.Errorf("globAlternatives(%q) = %d, want %d", tt.glob, got, tt.want)
		}
	}
	if got := globAlternatives(strings.Repeat("{a,b}", 1000)); got > 2*MaxGlobAlternatives {
		t.Errorf("counting does not stop past the limit: %d", got)
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		err  Error
		want string
	}{
		{Error{File: "f.yaml", Line: 3, Column: 7, Field: "name", Msg: "m"}, "f.yaml:3:7: name: m"},
		{Error{File: "f.yaml", Line: 3, Field: "name", Msg: "m"}, "f.yaml:3: name: m"},
		{Error{File: "f.yaml", Field: "name", Msg: "m"}, "f.yaml: name: m"},
		{Error{File: "f.yaml", Msg: "m"}, "f.yaml: m"},
		{Error{Line: 3, Column: 7, Msg: "m"}, "3:7: m"},
		{Error{Field: "tasks[1].id", Msg: "m"}, "tasks[1].id: m"},
		{Error{Msg: "m"}, "m"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%#v: got %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestValidationError(t *testing.T) {
	err := newValidationError([]*Error{
		{Msg: "no position"},
		{Line: 9, Column: 1, Msg: "c"},
		{Line: 2, Column: 5, Msg: "b"},
		{Line: 2, Column: 3, Msg: "a"},
	}, 0)
	if got, want := err.Error(), "2:3: a\n2:5: b\n9:1: c\nno position"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	var fe *Error
	if !errors.As(err, &fe) || fe.Msg != "a" {
		t.Errorf("errors.As found %v, want the first problem", fe)
	}
	if newValidationError(nil, 0) != nil {
		t.Error("no problems must mean a nil error")
	}

	// A file with a huge number of problems records MaxProblems of them.
	var b strings.Builder
	b.WriteString("name: many\nrepo: r\nruntime: demo\ntasks:\n")
	for range MaxProblems + 20 {
		b.WriteString("  - {id: a.b, prompt: p}\n")
	}
	_, err = Parse("many.yaml", []byte(b.String()), testOptions)
	var verr *ValidationError
	if !errors.As(err, &verr) || len(verr.Errors) != MaxProblems || verr.More != 20 {
		t.Fatalf("got %d problems and %d more, want %d and 20", len(verr.Errors), verr.More, MaxProblems)
	}
	if !strings.HasSuffix(err.Error(), "\n(and 20 more problems)") {
		t.Errorf("message does not say problems were left out: ...%s", err.Error()[len(err.Error())-60:])
	}
}

// TestDocsExamples keeps docs/flows.md honest: every complete flow in it
// parses, and the diamond and checked flows it shows are the examples.
func TestDocsExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/flows.md")
	if err != nil {
		t.Fatal(err)
	}
	var flows []string
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block = block[:strings.Index(block, "```")]
		if strings.HasPrefix(block, "name:") {
			flows = append(flows, block)
		}
	}
	if len(flows) < 2 {
		t.Fatalf("found %d complete flows in docs/flows.md", len(flows))
	}
	for _, f := range flows {
		if _, err := Parse("docs/flows.md", []byte(f), testOptions); err != nil {
			t.Errorf("%v\n%s", err, f)
		}
	}

	for _, example := range []string{"diamond.yaml", "checked.yaml"} {
		file, err := os.ReadFile("../../examples/" + example)
		if err != nil {
			t.Fatal(err)
		}
		body := string(file[strings.Index(string(file), "name:"):]) // without the comment header
		if !slices.Contains(flows, body) {
			t.Errorf("docs/flows.md does not show examples/%s as it is", example)
		}
	}
}

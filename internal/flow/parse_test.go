package flow

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// testOptions is what the bad and good flows are checked against: a
// controller with two runtimes configured.
var testOptions = Options{KnownRuntime: func(name string) bool {
	return name == "demo" || name == "claude-code"
}}

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
		{"file too large", header + "  - id: a\n    prompt: " + strings.Repeat("x", MaxFileSize) + "\n", 0, "bytes; the limit is 1048576"},
		{"too many tasks", manyTasks(MaxTasks + 1), 5, "tasks: 10001 tasks; the limit is 10000"},
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
	t.Run("DefaultRuntime fills in a missing flow runtime", func(t *testing.T) {
		noRuntime := []byte("name: f\nrepo: r\ntasks:\n  - {id: a, prompt: p}\n  - {id: b, prompt: p, runtime: claude-code}\n")
		opts := testOptions
		opts.DefaultRuntime = "demo"
		spec, err := Parse("f.yaml", noRuntime, opts)
		if err != nil {
			t.Fatal(err)
		}
		if spec.Runtime != "demo" || spec.RuntimeFor(&spec.Tasks[0]) != "demo" || spec.RuntimeFor(&spec.Tasks[1]) != "claude-code" {
			t.Errorf("runtimes: flow %q, tasks %q %q", spec.Runtime, spec.Tasks[0].Runtime, spec.Tasks[1].Runtime)
		}
		opts.DefaultRuntime = "gone"
		_, err = Parse("f.yaml", noRuntime, opts)
		if err == nil || err.Error() != `f.yaml: runtime: unknown runtime "gone": it is not configured` {
			t.Errorf("unknown default runtime: got %v", err)
		}
		spec, err = Parse("f.yaml", data, Options{DefaultRuntime: "demo"})
		if err != nil || spec.Runtime != "other" {
			t.Errorf("the file's runtime must win: %v, %v", spec, err)
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

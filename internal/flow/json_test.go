package flow

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeJSONRoundTrip: what Parse accepts, sent as controller submit
// sends it, decodes to the same Spec.
func TestDecodeJSONRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	inputs := map[string][]byte{"policiesFlow": []byte(policiesFlow)}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		inputs[file] = data
	}
	for name, data := range inputs {
		spec, err := Parse(name, data, testOptions)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wire, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeJSON(wire, testOptions)
		if err != nil {
			t.Errorf("%s: the wire form of a parsed flow is refused: %v\n%s", name, err, wire)
			continue
		}
		if !reflect.DeepEqual(got, spec) {
			t.Errorf("%s: decoded\n%#v\nwant\n%#v", name, got, spec)
		}
	}
}

// TestDecodeJSONRefuses: each case is a flow as a careless or hostile
// client of the submit API might send it, and the exact problems the
// controller answers with.
func TestDecodeJSONRefuses(t *testing.T) {
	ok := `"name":"f","repo":"/srv/r.git","base":"main","runtime":"demo"`
	task := `{"id":"a","prompt":"p"}`
	known := "known fields: id, prompt, depends_on, runtime, model, args, validator, review, retry, timeout, placement_timeout, verify, verify_timeout, scope, budget"
	cases := []struct {
		name, in string
		want     []string
	}{
		{"misspelt field", `{` + ok + `,"tasks":[` + task + `,{"id":"b","prompt":"p","depend_on":["a"]}]}`,
			[]string{"tasks[1].depend_on: unknown field (" + known + ")"}},
		{"no base", `{"name":"f","repo":"/srv/r.git","runtime":"demo","tasks":[` + task + `]}`,
			[]string{"base: required: the revision tasks start from (a flow file without one gets HEAD)"}},
		{"empty base", `{"name":"f","repo":"/srv/r.git","base":"","runtime":"demo","tasks":[` + task + `]}`,
			[]string{"base: required: the revision tasks start from (a flow file without one gets HEAD)"}},
		{"relative repo", `{"name":"f","repo":"repo.git","base":"main","runtime":"demo","tasks":[` + task + `]}`,
			[]string{`repo: local path "repo.git" is relative; send it absolute (controller submit does)`}},
		{"unknown top field", `{` + ok + `,"taks":[]}`, []string{
			"taks: unknown field (known fields: name, repo, base, project, runtime, model, args, validator, review, retry, max_parallel, scope, timeout, placement_timeout, budget, tasks, publish)",
			"tasks: at least one task is required"}},
		{"field twice", `{` + ok + `,"name":"g","tasks":[` + task + `]}`, []string{"name: field is set twice"}},
		{"no tasks", `{` + ok + `,"tasks":[]}`, []string{"tasks: at least one task is required"}},
		{"bad task id", `{` + ok + `,"tasks":[{"id":"a.b","prompt":"p"}]}`,
			[]string{`tasks[0].id: "a.b" contains '.'; only ASCII letters, digits and '-' are allowed`}},
		{"task id a number", `{` + ok + `,"tasks":[{"id":1,"prompt":"p"}]}`,
			[]string{"tasks[0].id: must be a string, got a number"}},
		{"unknown dependency", `{` + ok + `,"tasks":[{"id":"a","prompt":"p","depends_on":["b"]}]}`,
			[]string{`tasks[0].depends_on[0]: unknown task "b"`}},
		{"cycle", `{` + ok + `,"tasks":[{"id":"a","prompt":"p","depends_on":["b"]},{"id":"b","prompt":"p","depends_on":["a"]}]}`,
			[]string{"tasks[1].depends_on[0]: dependency cycle: a -> b -> a"}},
		{"unknown runtime", `{"name":"f","repo":"/srv/r.git","base":"main","runtime":"nosuch","tasks":[` + task + `]}`,
			[]string{`runtime: unknown runtime "nosuch": it is not configured`}},
		{"tasks not a list", `{` + ok + `,"tasks":{"id":"a"}}`, []string{"tasks: must be a list of tasks, got a mapping"}},
		{"task not a mapping", `{` + ok + `,"tasks":["a"]}`, []string{"tasks[0]: must be a mapping with id and prompt, got a string"}},
		{"review a string", `{` + ok + `,"review":"yes","tasks":[` + task + `]}`, []string{`review: must be true or false, got a string ("yes")`}},
		{"fractional max_parallel", `{` + ok + `,"max_parallel":2.5,"tasks":[` + task + `]}`,
			[]string{`max_parallel: must be a whole number, got a number ("2.5")`}},
		{"huge max_parallel", `{` + ok + `,"max_parallel":1e400,"tasks":[` + task + `]}`,
			[]string{`max_parallel: must be a whole number, got a number ("1e400")`}},
		{"duration without unit", `{` + ok + `,"timeout":"90","tasks":[` + task + `]}`,
			[]string{`timeout: invalid duration "90": want a Go duration like "90s" or "10m"`}},
		{"duration a number", `{` + ok + `,"timeout":90,"tasks":[` + task + `]}`, []string{"timeout: must be a string, got a number"}},
		{"unknown retry field", `{` + ok + `,"retry":{"max_attemps":2},"tasks":[` + task + `]}`,
			[]string{"retry.max_attemps: unknown field (known fields: max_attempts, initial_backoff, coefficient, max_backoff, jitter, retry_on, fallback, rate_limit_wait)"}},
		{"unknown class", `{` + ok + `,"retry":{"retry_on":["SOMETIMES"]},"tasks":[` + task + `]}`,
			[]string{`retry.retry_on[0]: unknown error class "SOMETIMES"`}},
		{"empty allow", `{` + ok + `,"scope":{"allow":[]},"tasks":[` + task + `]}`,
			[]string{"scope.allow: an empty allow list would allow every path; list at least one glob or leave allow out"}},
		{"validator a string", `{` + ok + `,"validator":"demo","tasks":[` + task + `]}`,
			[]string{"validator: must be a mapping with name, model and args, got a string"}},
		{"option as repo", `{"name":"f","repo":"--upload-pack=x","base":"main","runtime":"demo","tasks":[` + task + `]}`,
			[]string{`repo: "--upload-pack=x" starts with '-'; git would read it as an option`}},
		{"not an object", `[1,2]`, []string{"a flow must be a mapping of fields (name, repo, tasks, ...), got a list"}},
		{"null", `null`, []string{"the flow is null; send a mapping of fields (name, repo, tasks, ...)"}},
		{"trailing data", `{` + ok + `,"tasks":[` + task + `]} {}`, []string{"invalid JSON: more after the flow's mapping"}},
		{"truncated", `{` + ok + `,"tasks":[`, []string{`invalid JSON: unexpected EOF within "/tasks" after offset 72`}},
		{"invalid UTF-8", "{\"name\":\"f\xff\"}", []string{"invalid JSON: invalid UTF-8 within \"/name\" after offset 10"}},
		{"too many args", `{` + ok + `,"args":[` + strings.TrimSuffix(strings.Repeat(`"x",`, MaxArgs+1), ",") + `],"tasks":[` + task + `]}`,
			[]string{fmt.Sprintf("args: %d entries; the limit is %d", MaxArgs+1, MaxArgs)}},
	}
	opts := Options{KnownRuntime: func(n string) bool { return n == "demo" }}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := DecodeJSON([]byte(tc.in), opts)
			if err == nil {
				t.Fatalf("accepted: %+v", spec)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v does not wrap ErrInvalid", err)
			}
			if got, want := err.Error(), strings.Join(tc.want, "\n"); got != want {
				t.Errorf("problems:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestDecodeJSONSameAsParse: a problem both forms can hold is told in the
// same words, with the same field, by the CLI and by the API.
func TestDecodeJSONSameAsParse(t *testing.T) {
	cases := []struct{ yaml, json string }{
		{"name: f\nrepo: /r\nruntime: demo\ntasks:\n  - id: a\n    prompt: p\n    depends_on: [a]\n",
			`{"name":"f","repo":"/r","base":"HEAD","runtime":"demo","tasks":[{"id":"a","prompt":"p","depends_on":["a"]}]}`},
		{"name: f\nrepo: /r\nruntime: demo\nmax_parallel: -1\ntasks:\n  - id: a\n    prompt: p\n",
			`{"name":"f","repo":"/r","base":"HEAD","runtime":"demo","max_parallel":-1,"tasks":[{"id":"a","prompt":"p"}]}`},
		{"name: f\nrepo: /r\nruntime: demo\ntasks:\n  - id: a\n    prompt: \" \"\n",
			`{"name":"f","repo":"/r","base":"HEAD","runtime":"demo","tasks":[{"id":"a","prompt":" "}]}`},
		{"name: f_g\nrepo: /r\nruntime: demo\ntasks:\n  - id: a\n    prompt: p\n    retry: {jitter: 2}\n",
			`{"name":"f_g","repo":"/r","base":"HEAD","runtime":"demo","tasks":[{"id":"a","prompt":"p","retry":{"jitter":2}}]}`},
		{"name: f\nrepo: /r\nruntime: demo\ntasks:\n  - id: a\n    prompt: p\n    review: yes\n",
			`{"name":"f","repo":"/r","base":"HEAD","runtime":"demo","tasks":[{"id":"a","prompt":"p","review":"yes"}]}`},
	}
	for _, tc := range cases {
		_, perr := Parse("f.yaml", []byte(tc.yaml), Options{})
		_, jerr := DecodeJSON([]byte(tc.json), Options{})
		var pv, jv *ValidationError
		if !errors.As(perr, &pv) || !errors.As(jerr, &jv) {
			t.Fatalf("%q: errors %v / %v", tc.yaml, perr, jerr)
		}
		if len(pv.Errors) != len(jv.Errors) {
			t.Fatalf("Parse: %v\nDecodeJSON: %v", perr, jerr)
		}
		for i := range pv.Errors {
			if p, j := pv.Errors[i], jv.Errors[i]; p.Field != j.Field || p.Msg != j.Msg {
				t.Errorf("Parse says %s: %s; DecodeJSON says %s: %s", p.Field, p.Msg, j.Field, j.Msg)
			}
		}
	}
}

func TestDecodeJSONLimits(t *testing.T) {
	big := make([]byte, MaxJSONSize+1)
	_, err := DecodeJSON(big, Options{})
	if err == nil || err.Error() != fmt.Sprintf("flow is %d bytes of JSON; the limit is %d", MaxJSONSize+1, MaxJSONSize) {
		t.Errorf("oversized: %v", err)
	}
	var b strings.Builder
	b.WriteString(`{"name":"f","repo":"/r","base":"HEAD","runtime":"demo","tasks":[`)
	for i := range MaxTasks + 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"t%d","prompt":"p"}`, i)
	}
	b.WriteString(`]}`)
	_, err = DecodeJSON([]byte(b.String()), Options{})
	if err == nil || err.Error() != fmt.Sprintf("tasks: %d entries; the limit is %d", MaxTasks+2, MaxTasks) {
		t.Errorf("too many tasks: %v", err)
	}
}

// FuzzDecodeJSON: whatever a client sends, DecodeJSON does not panic, its
// errors wrap ErrInvalid, and what it accepts is complete, re-validates
// and comes back the same through its own wire form.
func FuzzDecodeJSON(f *testing.F) {
	for _, src := range []string{policiesFlow} {
		spec, err := Parse("seed.yaml", []byte(src), Options{})
		if err != nil {
			f.Fatal(err)
		}
		wire, _ := json.Marshal(spec)
		f.Add(wire)
	}
	f.Add([]byte(`{"name":"f","repo":"/r","base":"HEAD","runtime":"demo","tasks":[{"id":"a","prompt":"p","depend_on":["b"]}]}`))
	f.Add([]byte(`{"name":"f","name":"g"}`))
	f.Add([]byte(`[{"a":1e999}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := DecodeJSON(data, Options{})
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if spec.Base == "" {
			t.Fatalf("accepted a spec without a base: %+v", spec)
		}
		if err := spec.Validate(Options{Complete: true}); err != nil {
			t.Fatalf("accepted spec does not re-validate: %v", err)
		}
		wire, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeJSON(wire, Options{})
		if err != nil {
			t.Fatalf("its own wire form is refused: %v\n%s", err, wire)
		}
		if !reflect.DeepEqual(back, spec) {
			t.Fatalf("wire round trip changed the spec:\n got %#v\nwant %#v", back, spec)
		}
	})
}

// TestDecodeJSONReadsJSON: the wire form is read as JSON, not as YAML,
// though both go through one node tree: what JSON allows and YAML's parser
// refuses is taken, what YAML allows and JSON does not is refused, and a
// request too large to become a tree is refused before it is one.
func TestDecodeJSONReadsJSON(t *testing.T) {
	ok := `"name":"f","repo":"/srv/r.git","base":"main","runtime":"demo"`
	opts := Options{KnownRuntime: func(n string) bool { return n == "demo" }}
	spec, err := DecodeJSON([]byte(`{`+ok+`,"tasks":[{"id":"a","prompt":"\ud83d\ude00 \u0085"}]}`), opts)
	if err != nil {
		t.Fatalf("an escaped surrogate pair is refused: %v", err)
	}
	if got := spec.Tasks[0].Prompt; got != "😀 \u0085" {
		t.Errorf("prompt %q", got)
	}
	cases := []struct{ name, in, want string }{
		{"yaml flow style", `{name: f}`, `invalid JSON: invalid character 'a' in literal null (expecting 'u') after offset 2`},
		{"single quotes", `{'name': 'f'}`, `invalid JSON: invalid character '\'' at start of value after offset 1`},
		{"a comment", "{\"name\":\"f\" # x\n}", `invalid JSON: invalid character '#' after object value (expecting ',' or '}') after offset 12`},
		{"null task", `{` + ok + `,"tasks":[null]}`, "tasks[0]: must be a mapping with id and prompt, got nothing (null)"},
		{"boolean count", `{` + ok + `,"max_parallel":true,"tasks":[{"id":"a","prompt":"p"}]}`, "max_parallel: must be a whole number, got a boolean"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeJSON([]byte(tc.in), opts)
			if err == nil || err.Error() != tc.want || !errors.Is(err, ErrInvalid) {
				t.Errorf("got %v\nwant %s", err, tc.want)
			}
		})
	}

	r := newJSONReader([]byte(`{"args":[0,0]}`))
	r.limit = 3
	_, err = r.value()
	if want := fmt.Sprintf("more than %d values; a flow file of %d bytes holds fewer", maxJSONValues, MaxFileSize); err == nil || jsonError(err).Msg != want {
		t.Errorf("4 values with a limit of 3: %v", err)
	}
}

package flow

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParse checks that Parse never panics, that every error it returns is an
// ErrInvalid naming the file, and that every Spec it accepts re-validates,
// survives a JSON round trip unchanged (it travels inside events) and has a
// complete topological order. The seeds are the bad flows, the examples and
// policiesFlow, so they hold every field of the format.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"testdata/bad/*.yaml", "../../examples/*.yaml"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	// Every field in each of its forms (the files above cover the problems).
	f.Add([]byte(policiesFlow))

	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := Parse("fuzz.yaml", data, Options{})
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			var fe *Error
			if !errors.As(err, &fe) || fe.File != "fuzz.yaml" || fe.Line < 0 || fe.Column < 0 {
				t.Fatalf("bad first problem %#v in %v", fe, err)
			}
			return
		}

		if err := spec.Validate(Options{}); err != nil {
			t.Fatalf("accepted spec does not re-validate: %v\n%+v", err, spec)
		}
		encoded, err := json.Marshal(spec)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var back Spec
		if err := json.Unmarshal(encoded, &back); err != nil {
			t.Fatalf("unmarshal %s: %v", encoded, err)
		}
		if !reflect.DeepEqual(&back, spec) {
			t.Fatalf("JSON round trip changed the spec:\n got %#v\nwant %#v", back, *spec)
		}

		for i := range spec.Tasks {
			// Validated globs must match without error or blow-up.
			spec.ScopeFor(&spec.Tasks[i]).Allows("src/a/b/c.go")
		}

		order := spec.TopoOrder()
		if len(order) != len(spec.Tasks) {
			t.Fatalf("TopoOrder has %d ids for %d tasks", len(order), len(spec.Tasks))
		}
		done := map[string]bool{}
		for _, id := range order {
			task, ok := spec.Task(id)
			if !ok || done[id] {
				t.Fatalf("TopoOrder %v: unknown or repeated %q", order, id)
			}
			for _, dep := range task.DependsOn {
				if !done[dep] {
					t.Fatalf("TopoOrder %v: %q comes before its dependency %q", order, id, dep)
				}
			}
			done[id] = true
		}
	})
}

// FuzzLocate checks that Locate, given any file and any problems by field
// (a controller's answer, outside input too), never panics and returns
// each problem once, in the file, at a position the file has.
func FuzzLocate(f *testing.F) {
	f.Add([]byte(policiesFlow), "tasks[1].runtime", "unknown runtime")
	f.Add([]byte("name: f\ntasks:\n  - id: a\n"), "tasks[0].id", "x")
	f.Add([]byte("[\n"), "", "")
	f.Add([]byte("a: [1, {b: c}]\n"), "a[1].b", "x")
	f.Fuzz(func(t *testing.T, data []byte, field, msg string) {
		err := Locate("fuzz.yaml", data, []*Error{{Field: field, Msg: msg}, {Field: "name", Msg: msg}})
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Errors) != 2 || !errors.Is(err, ErrInvalid) {
			t.Fatalf("Locate: %v", err)
		}
		lines := bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r")) + 1 // YAML breaks lines at either
		for _, e := range ve.Errors {
			if e.File != "fuzz.yaml" || e.Line < 0 || e.Line > lines || e.Column < 0 {
				t.Fatalf("problem %#v outside the file of %d lines", e, lines)
			}
		}
	})
}

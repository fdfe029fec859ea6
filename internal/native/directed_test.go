package native_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/native"
	"github.com/drover-dev/drover/internal/native/model"
	"github.com/drover-dev/drover/internal/native/nativetest"
)

// The directed model reads the same conversation the same way on every
// wire and in process: the turn's number, the task, and the last answer's
// tool results; a run by its directives writes, reads and finishes.
func TestDirectedOnEveryWire(t *testing.T) {
	const prompt = "Make a greeting.\n@usage 50 5\n@write greet.txt hello\\nworld\n@read greet.txt\n@say All done."
	check := func(t *testing.T, rt *native.Runtime, turns func() []*nativetest.Turn) {
		e := newEnv(t)
		res, err := rt.Run(t.Context(), e.input(prompt), e.out)
		if err != nil || res.Outcome != native.Completed || res.Turns != 3 || res.FinalText != "All done." {
			t.Fatalf("%+v %v\n%s", res, err, e.out.Bytes())
		}
		if got := e.read(t, "greet.txt"); got != "hello\nworld\n" {
			t.Errorf("greet.txt %q", got)
		}
		if res.Usage.InputTokens != 150 || res.Usage.OutputTokens != 15 {
			t.Errorf("usage %+v", res.Usage)
		}
		if turns == nil {
			return
		}
		ts := turns()
		if len(ts) != 3 {
			t.Fatalf("%d turns", len(ts))
		}
		for i, tu := range ts {
			if tu.N != i+1 || tu.Prompt != prompt {
				t.Errorf("turn %d read as %+v", i+1, tu)
			}
		}
		if r := ts[2].Results; len(r) != 1 || !strings.Contains(r[0].Content, "hello") || r[0].CallID != "call_2" {
			t.Errorf("the third turn's results: %+v", r)
		}
		if len(ts[0].Results) != 0 {
			t.Errorf("the first turn has results %+v", ts[0].Results)
		}
	}
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []*nativetest.Turn
			srv := p.new(t, "k").RespondWith(func(tu *nativetest.Turn) nativetest.Reply {
				mu.Lock()
				seen = append(seen, tu)
				mu.Unlock()
				return nativetest.Directed(tu)
			})
			rt := native.NewRuntime("d", native.Config{Provider: p.name, Model: srv.ModelID}, clientFor(t, p, srv, "k"))
			check(t, rt, func() []*nativetest.Turn {
				mu.Lock()
				defer mu.Unlock()
				return seen
			})
		})
	}
	t.Run("in-process", func(t *testing.T) {
		check(t, native.NewRuntime("d", native.Config{Provider: "directed", Model: "m"}, nativetest.DirectedClient{}), nil)
	})
}

// The directives' failures reach the loop as a provider's would; a loop
// never finishes; a typo is refused.
func TestDirectedFailures(t *testing.T) {
	for _, p := range append(providers, provider{name: "in-process"}) {
		t.Run(p.name, func(t *testing.T) {
			client := model.Client(nativetest.DirectedClient{})
			if p.new != nil {
				srv := p.new(t, "").RespondWith(nativetest.Directed)
				client = clientFor(t, p, srv, "")
			}
			rt := native.NewRuntime("d", native.Config{Provider: p.name, Model: "test-model", MaxRetries: 1, Budget: native.Budget{Turns: 4}}, client)
			for _, c := range []struct {
				prompt string
				class  drovertype.ErrorClass
				check  func(*native.Result) bool
			}{
				{"@write a.txt a\n@fail 429 7", drovertype.ClassRateLimited, func(r *native.Result) bool { return r.Error.RetryAfter.Seconds() == 7 && r.Turns == 1 }},
				{"@fail 401", drovertype.ClassAuthFailed, func(r *native.Result) bool { return r.Error.Status == 401 }},
				{"@loop", drovertype.ClassTurnBudgetExhausted, func(r *native.Result) bool { return r.Turns == 4 && r.ToolCalls["list_dir"] == 3 }},
				{"@writ a.txt a", drovertype.ClassRuntimeError, func(r *native.Result) bool { return strings.Contains(r.Error.Message, "unknown directive @writ") }},
			} {
				e := newEnv(t)
				res, err := rt.Run(t.Context(), e.input(c.prompt), e.out)
				if err != nil || res.Error == nil || res.Error.Class != c.class || !c.check(res) {
					t.Errorf("%q: %+v %+v %v", c.prompt, res, res.Error, err)
				}
			}
		})
	}
}

package policy

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
)

func ptr[T any](v T) *T { return &v }

func ref(name, model string, args ...string) flow.RuntimeRef {
	return flow.RuntimeRef{Name: name, Model: model, Args: args}
}

func allFrom(l Level) map[string]Level {
	m := map[string]Level{}
	for _, f := range retryFields {
		m[f] = l
	}
	return m
}

func TestResolveRuntime(t *testing.T) {
	tests := []struct {
		name   string
		layers []Layer
		want   Choice
	}{
		{"none", nil, Choice{From: LevelBuiltin}},
		{"global only", []Layer{{Level: LevelTask}, {Level: LevelFlow}, {Level: LevelGlobal, Runtime: ref("claude", "opus", "--x")}},
			Choice{Name: "claude", Model: "opus", Args: []string{"--x"}, From: LevelGlobal}},
		{"task beats flow", []Layer{{Level: LevelTask, Runtime: ref("codex", "")}, {Level: LevelFlow, Runtime: ref("claude", "")}},
			Choice{Name: "codex", From: LevelTask}},
		{"lower model belongs to another runtime", []Layer{{Level: LevelTask, Runtime: ref("codex", "")}, {Level: LevelFlow, Runtime: ref("claude", "opus", "--verbose")}},
			Choice{Name: "codex", From: LevelTask}},
		{"lower model of the same name is still ignored", []Layer{{Level: LevelTask, Runtime: ref("claude", "")}, {Level: LevelGlobal, Runtime: ref("claude", "opus")}},
			Choice{Name: "claude", From: LevelTask}},
		{"higher model applies to a lower runtime", []Layer{{Level: LevelTask, Runtime: ref("", "sonnet")}, {Level: LevelFlow, Runtime: ref("claude", "opus")}},
			Choice{Name: "claude", Model: "sonnet", From: LevelFlow}},
		{"higher args apply to a lower runtime", []Layer{{Level: LevelTask, Runtime: ref("", "", "--fast")}, {Level: LevelFlow, Runtime: ref("claude", "opus", "--slow")}},
			Choice{Name: "claude", Model: "opus", Args: []string{"--fast"}, From: LevelFlow}},
		{"model above, args at the naming layer", []Layer{{Level: LevelTask, Runtime: ref("", "haiku")}, {Level: LevelFlow}, {Level: LevelProject, Runtime: ref("claude", "opus", "--a")}, {Level: LevelGlobal, Runtime: ref("codex", "o3", "--b")}},
			Choice{Name: "claude", Model: "haiku", Args: []string{"--a"}, From: LevelProject}},
		{"model between naming layer and top", []Layer{{Level: LevelTask}, {Level: LevelFlow, Runtime: ref("", "sonnet")}, {Level: LevelProject, Runtime: ref("claude", "")}, {Level: LevelGlobal, Runtime: ref("", "opus")}},
			Choice{Name: "claude", Model: "sonnet", From: LevelProject}},
		{"no name anywhere: model still resolves", []Layer{{Level: LevelFlow, Runtime: ref("", "opus")}, {Level: LevelGlobal, Runtime: ref("", "haiku", "--z")}},
			Choice{Model: "opus", Args: []string{"--z"}, From: LevelBuiltin}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Resolve(tt.layers...)
			if !reflect.DeepEqual(got.Worker, tt.want) {
				t.Errorf("Worker = %+v, want %+v", got.Worker, tt.want)
			}
		})
	}
}

func TestResolveValidator(t *testing.T) {
	v := func(name, model string) *flow.RuntimeRef { return &flow.RuntimeRef{Name: name, Model: model} }
	tests := []struct {
		name   string
		layers []Layer
		want   *Choice
	}{
		{"none", []Layer{{Level: LevelTask}, {Level: LevelFlow}}, nil},
		{"model without a name is no validator", []Layer{{Level: LevelTask, Validator: v("", "o3")}}, nil},
		{"global", []Layer{{Level: LevelTask}, {Level: LevelGlobal, Validator: v("codex", "o3")}}, &Choice{Name: "codex", Model: "o3", From: LevelGlobal}},
		{"task model over global name", []Layer{{Level: LevelTask, Validator: v("", "o4")}, {Level: LevelGlobal, Validator: v("codex", "o3")}}, &Choice{Name: "codex", Model: "o4", From: LevelGlobal}},
		{"flow name drops global model", []Layer{{Level: LevelFlow, Validator: v("claude", "")}, {Level: LevelGlobal, Validator: v("codex", "o3")}}, &Choice{Name: "claude", From: LevelFlow}},
		{"independent of the worker", []Layer{{Level: LevelTask, Runtime: ref("claude", "opus")}, {Level: LevelProject, Validator: v("codex", "")}}, &Choice{Name: "codex", From: LevelProject}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Resolve(tt.layers...)
			if !reflect.DeepEqual(got.Validator, tt.want) {
				t.Errorf("Validator = %+v, want %+v", got.Validator, tt.want)
			}
		})
	}
}

func TestResolveScalars(t *testing.T) {
	scopeA := &flow.Scope{Allow: []string{"src/**"}}
	scopeB := &flow.Scope{Allow: []string{"**"}, Deny: []string{"secrets/**"}}
	tests := []struct {
		name        string
		layers      []Layer
		review      bool
		timeout     time.Duration
		timeoutFrom Level
		scope       *flow.Scope
		scopeFrom   Level
	}{
		{"defaults", nil, false, 0, "", nil, ""},
		{"global sets all", []Layer{{Level: LevelTask}, {Level: LevelGlobal, Review: ptr(true), Timeout: flow.Duration(time.Hour), Scope: scopeB}},
			true, time.Hour, LevelGlobal, scopeB, LevelGlobal},
		{"flow false beats global true", []Layer{{Level: LevelTask}, {Level: LevelFlow, Review: ptr(false)}, {Level: LevelGlobal, Review: ptr(true)}},
			false, 0, "", nil, ""},
		{"task true beats flow false", []Layer{{Level: LevelTask, Review: ptr(true)}, {Level: LevelFlow, Review: ptr(false)}},
			true, 0, "", nil, ""},
		{"timeout from the highest setter", []Layer{{Level: LevelTask}, {Level: LevelFlow, Timeout: flow.Duration(5 * time.Minute)}, {Level: LevelProject, Timeout: flow.Duration(10 * time.Minute)}},
			false, 5 * time.Minute, LevelFlow, nil, ""},
		{"scope as a whole", []Layer{{Level: LevelTask, Scope: scopeA}, {Level: LevelFlow, Scope: scopeB}},
			false, 0, "", scopeA, LevelTask},
		{"empty scope still sets", []Layer{{Level: LevelProject, Scope: &flow.Scope{}}, {Level: LevelGlobal, Scope: scopeB}},
			false, 0, "", &flow.Scope{}, LevelProject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Resolve(tt.layers...)
			if got.Review != tt.review {
				t.Errorf("Review = %v, want %v", got.Review, tt.review)
			}
			if time.Duration(got.Timeout) != tt.timeout || got.TimeoutFrom != tt.timeoutFrom {
				t.Errorf("Timeout = %v from %q, want %v from %q", got.Timeout, got.TimeoutFrom, tt.timeout, tt.timeoutFrom)
			}
			if !reflect.DeepEqual(got.Scope, tt.scope) || got.ScopeFrom != tt.scopeFrom {
				t.Errorf("Scope = %+v from %q, want %+v from %q", got.Scope, got.ScopeFrom, tt.scope, tt.scopeFrom)
			}
			if got.Scope != nil && got.Scope == tt.scope {
				t.Error("Scope shares the layer's pointer")
			}
		})
	}
}

func TestResolveRetry(t *testing.T) {
	tests := []struct {
		name   string
		layers []Layer
		want   Retry
		from   map[string]Level
	}{
		{"builtin", nil, DefaultRetry(), allFrom(LevelBuiltin)},
		{"empty specs set nothing", []Layer{{Level: LevelTask, Retry: &flow.RetrySpec{RetryOn: []drovertype.ErrorClass{}}}, {Level: LevelFlow, Retry: &flow.RetrySpec{}}},
			DefaultRetry(), allFrom(LevelBuiltin)},
		{"each field from the highest setter", []Layer{
			{Level: LevelTask, Retry: &flow.RetrySpec{MaxAttempts: ptr(5)}},
			{Level: LevelFlow, Retry: &flow.RetrySpec{MaxAttempts: ptr(4), Jitter: ptr(0.0)}},
			{Level: LevelProject, Retry: &flow.RetrySpec{RetryOn: []drovertype.ErrorClass{drovertype.ClassTimeout}, Jitter: ptr(0.5), InitialBackoff: ptr(flow.Duration(time.Second))}},
			{Level: LevelGlobal, Retry: &flow.RetrySpec{Fallback: []string{"codex"}, InitialBackoff: ptr(flow.Duration(time.Minute)), MaxBackoff: ptr(flow.Duration(time.Hour)), Coefficient: ptr(3.0)}},
		}, Retry{
			MaxAttempts:    5,
			InitialBackoff: flow.Duration(time.Second),
			Coefficient:    3,
			MaxBackoff:     flow.Duration(time.Hour),
			Jitter:         0,
			RetryOn:        []drovertype.ErrorClass{drovertype.ClassTimeout},
			Fallback:       []string{"codex"},
			RateLimitWait:  flow.Duration(DefaultRateLimitWait),
		}, map[string]Level{
			fieldMaxAttempts:    LevelTask,
			fieldInitialBackoff: LevelProject,
			fieldCoefficient:    LevelGlobal,
			fieldMaxBackoff:     LevelGlobal,
			fieldJitter:         LevelFlow,
			fieldRetryOn:        LevelProject,
			fieldFallback:       LevelGlobal,
			fieldRateLimitWait:  LevelBuiltin,
		}},
		{"task fallback replaces global's", []Layer{
			{Level: LevelTask, Retry: &flow.RetrySpec{Fallback: []string{"gemini"}}},
			{Level: LevelGlobal, Retry: &flow.RetrySpec{Fallback: []string{"codex", "aider"}}},
		}, with(func(r *Retry) { r.Fallback = []string{"gemini"} }), func() map[string]Level {
			m := allFrom(LevelBuiltin)
			m[fieldFallback] = LevelTask
			return m
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Resolve(tt.layers...)
			if !reflect.DeepEqual(got.Retry, tt.want) {
				t.Errorf("Retry = %+v\nwant    %+v", got.Retry, tt.want)
			}
			if !maps.Equal(got.RetryFrom, tt.from) {
				t.Errorf("RetryFrom = %v\nwant        %v", got.RetryFrom, tt.from)
			}
		})
	}
}

func TestResolvePlacementTimeout(t *testing.T) {
	tests := []struct {
		name   string
		layers []Layer
		want   time.Duration
		from   Level
	}{
		{"built in", []Layer{{Level: LevelTask}, {Level: LevelGlobal}}, DefaultPlacementTimeout, LevelBuiltin},
		{"global", []Layer{{Level: LevelTask}, {Level: LevelGlobal, PlacementTimeout: dur(time.Hour)}}, time.Hour, LevelGlobal},
		{"project over global", []Layer{{Level: LevelFlow}, {Level: LevelProject, PlacementTimeout: dur(time.Minute)}, {Level: LevelGlobal, PlacementTimeout: dur(time.Hour)}}, time.Minute, LevelProject},
		{"task over flow", []Layer{{Level: LevelTask, PlacementTimeout: dur(5 * time.Second)}, {Level: LevelFlow, PlacementTimeout: dur(time.Minute)}}, 5 * time.Second, LevelTask},
	}
	for _, tt := range tests {
		got := Resolve(tt.layers...)
		if time.Duration(got.PlacementTimeout) != tt.want || got.PlacementTimeoutFrom != tt.from || got.Placement() != tt.want {
			t.Errorf("%s: %s from %s (Placement %s), want %s from %s", tt.name, got.PlacementTimeout, got.PlacementTimeoutFrom, got.Placement(), tt.want, tt.from)
		}
	}
	// A plan recorded before the field existed has the built-in one.
	var old *Resolved
	if old.Placement() != DefaultPlacementTimeout || (&Resolved{}).Placement() != DefaultPlacementTimeout {
		t.Error("a plan without a placement timeout has none")
	}
}

func TestResolveDoesNotAlias(t *testing.T) {
	task := Layer{
		Level:     LevelTask,
		Runtime:   ref("claude", "opus", "--a"),
		Validator: &flow.RuntimeRef{Name: "codex", Args: []string{"--b"}},
		Retry:     &flow.RetrySpec{RetryOn: []drovertype.ErrorClass{drovertype.ClassTimeout}, Fallback: []string{"codex"}},
		Scope:     &flow.Scope{Allow: []string{"src/**"}},
	}
	got := Resolve(task)
	got.Worker.Args[0] = "X"
	got.Validator.Args[0] = "X"
	got.Retry.RetryOn[0] = "X"
	got.Retry.Fallback[0] = "X"
	got.Scope.Allow[0] = "X"
	if task.Runtime.Args[0] != "--a" || task.Validator.Args[0] != "--b" || task.Retry.RetryOn[0] != drovertype.ClassTimeout ||
		task.Retry.Fallback[0] != "codex" || task.Scope.Allow[0] != "src/**" {
		t.Errorf("Resolve's result aliases its layers: %+v", task)
	}
	// DefaultRetry is a fresh value each time.
	r := Resolve()
	r.Retry.RetryOn[0] = "X"
	if DefaultRetry().RetryOn[0] == "X" {
		t.Error("DefaultRetry shares its RetryOn")
	}
}

func TestResolvedJSON(t *testing.T) {
	got := Resolve(
		Layer{Level: LevelTask, Runtime: ref("claude", "opus"), Timeout: flow.Duration(90 * time.Second)},
		Layer{Level: LevelFlow, Validator: &flow.RuntimeRef{Name: "codex"}, Review: ptr(true), Retry: &flow.RetrySpec{Fallback: []string{"codex"}}},
	)
	raw, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"timeout":"1m30s"`, `"initial_backoff":"10s"`, `"max_backoff":"5m0s"`, `"timeout_from":"task"`, `"fallback":"flow"`, `"from":"task"`,
		`"placement_timeout":"10m0s"`, `"placement_timeout_from":"builtin"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("JSON %s lacks %s", raw, want)
		}
	}
	var back Resolved
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, got) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, got)
	}
}

func TestOverlay(t *testing.T) {
	base := DefaultRetry()
	if got, set := overlay(base, nil); !reflect.DeepEqual(got, base) || set != nil {
		t.Errorf("Overlay(nil) = %+v, %v", got, set)
	}
	if got, set := overlay(base, &flow.RetrySpec{RetryOn: []drovertype.ErrorClass{}, Fallback: []string{}}); !reflect.DeepEqual(got, base) || set != nil {
		t.Errorf("Overlay(empty lists) = %+v, %v", got, set)
	}

	full := &flow.RetrySpec{
		MaxAttempts:    ptr(0),
		InitialBackoff: ptr(flow.Duration(0)),
		Coefficient:    ptr(1.5),
		MaxBackoff:     ptr(flow.Duration(time.Minute)),
		Jitter:         ptr(0.0),
		RetryOn:        []drovertype.ErrorClass{drovertype.ClassCrashed},
		Fallback:       []string{"codex"},
		RateLimitWait:  ptr(flow.Duration(time.Minute)),
	}
	got, set := overlay(base, full)
	want := Retry{Coefficient: 1.5, MaxBackoff: flow.Duration(time.Minute), RetryOn: []drovertype.ErrorClass{drovertype.ClassCrashed}, Fallback: []string{"codex"},
		RateLimitWait: flow.Duration(time.Minute)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Overlay(full) = %+v, want %+v (zero values through pointers are set)", got, want)
	}
	if !slices.Equal(set, retryFields) {
		t.Errorf("set = %v, want %v", set, retryFields)
	}

	got, set = overlay(base, &flow.RetrySpec{Jitter: ptr(0.5), Fallback: []string{"gemini"}})
	if got.Jitter != 0.5 || !slices.Equal(got.Fallback, []string{"gemini"}) || got.MaxAttempts != 3 || !slices.Equal(got.RetryOn, base.RetryOn) {
		t.Errorf("partial overlay = %+v", got)
	}
	if !slices.Equal(set, []string{"jitter", "fallback"}) {
		t.Errorf("set = %v", set)
	}
	// No aliasing of either side.
	full.RetryOn[0] = "X"
	got, _ = overlay(base, full)
	got.RetryOn[0] = "Y"
	if full.RetryOn[0] != "X" {
		t.Error("Overlay's result aliases the spec")
	}
	got, _ = overlay(base, nil)
	got.RetryOn[0] = "Y"
	if base.RetryOn[0] == "Y" {
		t.Error("Overlay's result aliases the receiver")
	}
}

func TestRetryJSONFieldNames(t *testing.T) {
	// retryFields are Retry's JSON names, in order: RetryFrom and Overlay
	// rely on it.
	typ := reflect.TypeFor[Retry]()
	var names []string
	for f := range typ.Fields() {
		names = append(names, strings.Split(f.Tag.Get("json"), ",")[0])
	}
	if !slices.Equal(names, retryFields) {
		t.Errorf("Retry JSON names %v, retryFields %v", names, retryFields)
	}
	// And flow.RetrySpec uses the same names.
	names = nil
	for f := range reflect.TypeFor[flow.RetrySpec]().Fields() {
		names = append(names, strings.Split(f.Tag.Get("json"), ",")[0])
	}
	if !slices.Equal(names, retryFields) {
		t.Errorf("flow.RetrySpec JSON names %v, retryFields %v", names, retryFields)
	}
	raw, _ := json.Marshal(DefaultRetry())
	const want = `{"max_attempts":3,"initial_backoff":"10s","coefficient":2,"max_backoff":"5m0s","jitter":0.2,"retry_on":["RATE_LIMITED","RUNTIME_TIMEOUT","RUNTIME_CONNECTION_FAILED","WORKER_LOST","VERIFICATION_FAILED","PREPARE_FAILED","OBSERVE_FAILED"],"rate_limit_wait":"2h0m0s"}`
	if string(raw) != want {
		t.Errorf("DefaultRetry JSON\n got %s\nwant %s", raw, want)
	}
}

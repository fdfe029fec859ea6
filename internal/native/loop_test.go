package native_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/native"
	"github.com/drover-dev/drover/internal/native/model"
	"github.com/drover-dev/drover/internal/native/nativetest"
)

func TestLoopDoesTheWork(t *testing.T) {
	e := newEnv(t)
	mock := nativetest.NewMock(
		nativetest.Calls(usage(100, 20), nativetest.Call("c1", "read_file", map[string]any{"path": "main.go"}), nativetest.Call("c2", "glob", map[string]any{"pattern": "**/*.md"})),
		nativetest.Calls(usage(150, 30), nativetest.Call("c3", "edit_file", map[string]any{"path": filepath.Join(e.wt, "main.go"), "old_string": "helo", "new_string": "hello"})),
		nativetest.Calls(usage(200, 10), nativetest.Call("c4", "bash", map[string]any{"command": "grep -c hello main.go; echo $DROVER_TASK_ID; echo ${SECRET_KEY:-no-key}"})),
		nativetest.Text("Fixed the typo in main.go.", usage(220, 12)),
	)
	t.Setenv("SECRET_KEY", "should-not-be-seen")
	rt := e.runtime(native.Config{APIKeyEnv: "SECRET_KEY", EnvPassthrough: []string{"SECRET_KEY"}, Price: native.Price{Input: 3, Output: 15}}, mock)
	res, err := rt.Run(t.Context(), e.input("Fix the typo."), e.out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != native.Completed || res.Error != nil || res.FinalText != "Fixed the typo in main.go." || res.Turns != 4 {
		t.Fatalf("result: %+v %v", res, res.Error)
	}
	if res.Usage != usage(670, 72) || fmt.Sprintf("%.6f", res.CostUSD) != "0.003090" {
		t.Errorf("usage %+v cost %f", res.Usage, res.CostUSD)
	}
	if !maps(res.ToolCalls, map[string]int{"read_file": 1, "glob": 1, "edit_file": 1, "bash": 1}) || res.Commands != 1 || !slices.Equal(res.Changed, []string{"main.go"}) {
		t.Errorf("tool calls %v commands %d changed %v", res.ToolCalls, res.Commands, res.Changed)
	}
	if got := e.read(t, "main.go"); !strings.Contains(got, "hello") {
		t.Errorf("main.go = %q", got)
	}
	reqs := mock.Requests()
	if len(reqs) != 4 || len(reqs[0].Messages) != 1 || reqs[0].Messages[0].Text != "Fix the typo." || len(reqs[0].Tools) != 7 {
		t.Fatalf("first request: %+v", reqs[0])
	}
	if !strings.Contains(reqs[0].System, e.wt) {
		t.Errorf("the system prompt does not name the worktree: %s", reqs[0].System)
	}
	last := reqs[1].Messages[2]
	if last.Role != model.User || len(last.ToolResults) != 2 || last.ToolResults[0].CallID != "c1" || !strings.Contains(last.ToolResults[0].Content, "helo") ||
		last.ToolResults[1].Content != "README.md\n" {
		t.Errorf("tool results sent back: %+v", last)
	}
	bash := reqs[3].Messages[6].ToolResults[0]
	if bash.Content != "1\nt1\nno-key\n[exit code 0]" || bash.IsError {
		t.Errorf("bash result (the API key's variable must not reach commands): %q", bash.Content)
	}
	want := []string{"native_started", "model_request", "model_response", "tool_call", "tool_result", "tool_call", "tool_result",
		"model_request", "model_response", "tool_call", "tool_result", "model_request", "model_response", "tool_call", "tool_result",
		"model_request", "model_response", "native_finished"}
	evs := e.events(t)
	if !slices.Equal(types(evs), want) {
		t.Errorf("events:\n got %v\nwant %v", types(evs), want)
	}
	fin := evs[len(evs)-1]
	if fin.Outcome != native.Completed || fin.Turns != 4 || fin.Usage.OutputTokens != 72 || fin.State != "done" {
		t.Errorf("finished event: %+v", fin)
	}
	if evs[0].Model != "mock-model" || len(evs[0].Tools) != 7 {
		t.Errorf("started event: %+v", evs[0])
	}
}

func maps(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestTurnBudgetAtItsEdge(t *testing.T) {
	step := func(i int) nativetest.Step {
		return nativetest.Calls(usage(1, 1), nativetest.Call(fmt.Sprintf("c%d", i), "write_file", map[string]any{"path": fmt.Sprintf("f%d.txt", i), "content": "x"}))
	}
	// Exactly three turns, the last one answering: done.
	e := newEnv(t)
	mock := nativetest.NewMock(step(1), step(2), nativetest.Text("done", usage(1, 1)))
	res, _ := e.runtime(native.Config{Budget: native.Budget{Turns: 3}}, mock).Run(t.Context(), e.input("go"), e.out)
	if res.Outcome != native.Completed || res.Turns != 3 {
		t.Fatalf("3 turns within a budget of 3: %+v %v", res, res.Error)
	}
	// A third answer that still calls a tool: its call is not run.
	e = newEnv(t)
	mock = nativetest.NewMock(step(1), step(2), step(3), nativetest.Text("never asked", usage(1, 1)))
	res, _ = e.runtime(native.Config{Budget: native.Budget{Turns: 3}}, mock).Run(t.Context(), e.input("go"), e.out)
	if res.Outcome != native.Failed || res.Error.Class != drovertype.ClassTurnBudgetExhausted || res.Turns != 3 || res.Error.Recoverable {
		t.Fatalf("past the turn budget: %+v %+v", res, res.Error)
	}
	if len(mock.Requests()) != 3 || mock.Left() != 1 {
		t.Errorf("the model was called %d times, want 3", len(mock.Requests()))
	}
	if e.read(t, "f2.txt") != "x" || !strings.HasPrefix(e.read(t, "f3.txt"), "<") {
		t.Errorf("the last turn's tool call ran: f3.txt = %q", e.read(t, "f3.txt"))
	}
	if !strings.Contains(res.Error.Message, "3 of 3 turns") {
		t.Errorf("message: %s", res.Error.Message)
	}
}

func TestTokenBudgetsAtTheirEdge(t *testing.T) {
	write := func(name string, u model.Usage) nativetest.Step {
		return nativetest.Calls(u, nativetest.Call(name, "write_file", map[string]any{"path": name, "content": "x"}))
	}
	cases := []struct {
		name    string
		budget  native.Budget
		steps   []nativetest.Step
		class   drovertype.ErrorClass // "" for success
		calls   int
		maxOuts []int64 // each request's max_output_tokens
		written []string
	}{
		{"total exactly reached", native.Budget{Tokens: 100}, []nativetest.Step{write("a", usage(40, 10)), nativetest.Text("ok", usage(45, 5))}, "", 2, []int64{100, 50}, []string{"a"}},
		{"total passed by one", native.Budget{Tokens: 100}, []nativetest.Step{write("a", usage(40, 10)), write("b", usage(46, 5))}, drovertype.ClassTokenBudgetExhausted, 2, []int64{100, 50}, []string{"a"}},
		{"total reached by a turn that calls tools", native.Budget{Tokens: 100}, []nativetest.Step{write("a", usage(40, 10)), write("b", usage(45, 5))}, drovertype.ClassTokenBudgetExhausted, 2, []int64{100, 50}, []string{"a", "b"}},
		{"output caps each turn", native.Budget{OutputTokens: 50}, []nativetest.Step{write("a", usage(10, 30)), nativetest.Text("ok", usage(10, 20))}, "", 2, []int64{50, 20}, []string{"a"}},
		{"output spent, no call made", native.Budget{OutputTokens: 50}, []nativetest.Step{write("a", usage(10, 50)), nativetest.Text("never", usage(1, 1))}, drovertype.ClassTokenBudgetExhausted, 1, []int64{50}, []string{"a"}},
		{"input exactly reached then needed again", native.Budget{InputTokens: 100}, []nativetest.Step{write("a", usage(100, 5)), nativetest.Text("never", usage(1, 1))}, drovertype.ClassTokenBudgetExhausted, 1, []int64{16384}, []string{"a"}},
		{"input exactly reached at the end", native.Budget{InputTokens: 100}, []nativetest.Step{nativetest.Text("ok", usage(100, 5))}, "", 1, []int64{16384}, nil},
		{"input passed: the turn's tools do not run", native.Budget{InputTokens: 100}, []nativetest.Step{write("a", usage(101, 5))}, drovertype.ClassTokenBudgetExhausted, 1, []int64{16384}, nil},
		{"cached input counts", native.Budget{InputTokens: 100}, []nativetest.Step{write("a", model.Usage{InputTokens: 10, CacheReadTokens: 80, CacheWriteTokens: 11})}, drovertype.ClassTokenBudgetExhausted, 1, []int64{16384}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			mock := nativetest.NewMock(c.steps...)
			res, _ := e.runtime(native.Config{Budget: c.budget}, mock).Run(t.Context(), e.input("go"), e.out)
			var class drovertype.ErrorClass
			if res.Error != nil {
				class = res.Error.Class
			}
			if class != c.class || (c.class == "") != (res.Outcome == native.Completed) {
				t.Fatalf("outcome %s class %q (%v), want %q", res.Outcome, class, res.Error, c.class)
			}
			reqs := mock.Requests()
			var outs []int64
			for _, r := range reqs {
				outs = append(outs, r.MaxOutputTokens)
			}
			if len(reqs) != c.calls || !slices.Equal(outs, c.maxOuts) {
				t.Errorf("calls %d max_output_tokens %v, want %d %v", len(reqs), outs, c.calls, c.maxOuts)
			}
			for _, f := range []string{"a", "b"} {
				if got := e.read(t, f) == "x"; got != slices.Contains(c.written, f) {
					t.Errorf("%s written: %v", f, got)
				}
			}
		})
	}
}

// advance is a step that moves the clock by d while the model "thinks",
// then answers with r, unless the attempt was cut in the meantime.
func advance(clock *nativetest.FakeClock, d time.Duration, r nativetest.Step) nativetest.Step {
	return nativetest.Step{Do: func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		clock.Advance(d)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		resp := *r.Response
		return &resp, nil
	}}
}

func TestTimeBudgetAtItsEdge(t *testing.T) {
	for _, c := range []struct {
		name   string
		budget time.Duration
		first  time.Duration
		second time.Duration
		class  drovertype.ErrorClass
	}{
		{"a nanosecond to spare", 10 * time.Second, 4 * time.Second, 6*time.Second - 1, ""},
		{"exactly at the budget", 10 * time.Second, 4 * time.Second, 6 * time.Second, drovertype.ClassTimeBudgetExhausted},
		{"spent by the first call", 10 * time.Second, 11 * time.Second, 0, drovertype.ClassTimeBudgetExhausted},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			mock := nativetest.NewMock(
				advance(e.clock, c.first, nativetest.Calls(usage(1, 1), nativetest.Call("a", "write_file", map[string]any{"path": "a", "content": "x"}))),
				advance(e.clock, c.second, nativetest.Text("done", usage(1, 1))),
			)
			res, _ := e.runtime(native.Config{Budget: native.Budget{Time: c.budget}}, mock).Run(t.Context(), e.input("go"), e.out)
			var class drovertype.ErrorClass
			if res.Error != nil {
				class = res.Error.Class
			}
			if class != c.class {
				t.Fatalf("class %q (%v), want %q", class, res.Error, c.class)
			}
			if c.class != "" && (res.Outcome != native.Failed || res.StopCause != nil) {
				t.Errorf("a spent time budget: %+v", res)
			}
			if d := res.Duration(); c.class == "" && d != c.first+c.second {
				t.Errorf("duration %s", d)
			}
		})
	}
}

func TestAttemptTimeoutIsARuntimeTimeout(t *testing.T) {
	e := newEnv(t)
	mock := nativetest.NewMock(advance(e.clock, 5*time.Second, nativetest.Text("late", usage(1, 1))))
	in := e.input("go")
	in.Timeout = 5 * time.Second
	res, _ := e.runtime(native.Config{Timeout: time.Hour, Budget: native.Budget{Time: time.Hour}}, mock).Run(t.Context(), in, e.out)
	if res.Outcome != native.TimedOut || res.Error.Class != drovertype.ClassTimeout || !res.Error.Recoverable {
		t.Fatalf("timeout: %+v %+v", res, res.Error)
	}
}

func TestCancelMidModelCall(t *testing.T) {
	e := newEnv(t)
	entered := make(chan struct{})
	mock := nativetest.NewMock(nativetest.Step{Do: func(ctx context.Context, _ *model.Request) (*model.Response, error) {
		close(entered)
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan *native.Result)
	go func() {
		res, _ := e.runtime(native.Config{}, mock).Run(ctx, e.input("go"), e.out)
		done <- res
	}()
	<-entered
	cause := errors.New("operator cancelled the attempt")
	cancel(cause)
	res := <-done
	if res.Outcome != native.Stopped || !errors.Is(res.StopCause, cause) || res.Error.Class != drovertype.ClassCancelled {
		t.Fatalf("cancelled: %+v", res)
	}
	if evs := e.events(t); evs[len(evs)-1].Outcome != native.Stopped {
		t.Errorf("last event: %+v", evs[len(evs)-1])
	}
}

func TestCancelMidCommand(t *testing.T) {
	e := newEnv(t)
	mock := nativetest.NewMock(nativetest.Calls(usage(1, 1), nativetest.Call("c1", "bash", map[string]any{"command": "touch started; sleep 60 & sleep 60"})), nativetest.Text("never", usage(1, 1)))
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan *native.Result)
	go func() {
		res, _ := e.runtime(native.Config{Grace: 200 * time.Millisecond}, mock).Run(ctx, e.input("go"), e.out)
		done <- res
	}()
	waitFile(t, filepath.Join(e.wt, "started"))
	start := time.Now()
	cause := errors.New("worker shutting down")
	cancel(cause)
	res := <-done
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stopping took %s", d)
	}
	if res.Outcome != native.Stopped || !errors.Is(res.StopCause, cause) || len(mock.Requests()) != 1 {
		t.Fatalf("cancelled mid-command: %+v", res)
	}
	noProcessIn(t, e.wt)
}

// The time budget cuts a command too, on the real clock.
func TestTimeBudgetCutsACommand(t *testing.T) {
	e := newEnv(t)
	mock := nativetest.NewMock(nativetest.Calls(usage(1, 1), nativetest.Call("c1", "bash", map[string]any{"command": "sleep 60"})), nativetest.Text("never", usage(1, 1)))
	rt := native.NewRuntime("t", native.Config{Provider: "mock", Model: "m", Grace: 200 * time.Millisecond, Budget: native.Budget{Time: 300 * time.Millisecond}}, mock)
	start := time.Now()
	res, _ := rt.Run(t.Context(), e.input("go"), e.out)
	if res.Error == nil || res.Error.Class != drovertype.ClassTimeBudgetExhausted {
		t.Fatalf("result: %+v %v", res, res.Error)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
	noProcessIn(t, e.wt)
}

func waitFile(t *testing.T, p string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(p); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", p)
		}
	}
}

func noProcessIn(t *testing.T, dir string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cwd")
	for _, p := range procs {
		if target, err := os.Readlink(p); err == nil && target == dir {
			t.Errorf("a process still runs in %s: %s", dir, p)
		}
	}
}

func TestTransientFailuresRetriedBounded(t *testing.T) {
	overloaded := func(wait time.Duration) *model.Error {
		return &model.Error{Kind: model.KindTransient, Provider: "mock", Status: 529, Type: "overloaded_error", Message: "Overloaded", RetryAfter: wait}
	}
	t.Run("recovers", func(t *testing.T) {
		e := newEnv(t)
		mock := nativetest.NewMock(nativetest.Fail(overloaded(3*time.Second)), nativetest.Fail(overloaded(0)), nativetest.Fail(overloaded(time.Hour)), nativetest.Text("ok", usage(1, 1)))
		res, _ := e.runtime(native.Config{MaxRetries: 3}, mock).Run(t.Context(), e.input("go"), e.out)
		if res.Outcome != native.Completed || res.Turns != 1 {
			t.Fatalf("%+v %v", res, res.Error)
		}
		// Backoff 1s, 2s, 4s; the provider's Retry-After wins when longer; 30s caps all.
		if got := e.clock.Sleeps(); !slices.Equal(got, []time.Duration{3 * time.Second, 2 * time.Second, 30 * time.Second}) {
			t.Errorf("waits %v", got)
		}
		var errs []native.Event
		for _, ev := range e.events(t) {
			if ev.Type == native.EventModelError {
				errs = append(errs, ev)
			}
		}
		if len(errs) != 3 || errs[0].Try != 1 || errs[0].WaitMS != 3000 || errs[2].Try != 3 || errs[0].Status != 529 || errs[0].Kind != model.KindTransient {
			t.Errorf("model_error events: %+v", errs)
		}
	})
	t.Run("gives up", func(t *testing.T) {
		e := newEnv(t)
		mock := nativetest.NewMock(nativetest.Fail(overloaded(0)), nativetest.Fail(overloaded(0)), nativetest.Fail(overloaded(0)), nativetest.Text("never", usage(1, 1)))
		res, _ := e.runtime(native.Config{MaxRetries: 2}, mock).Run(t.Context(), e.input("go"), e.out)
		if res.Outcome != native.Failed || res.Error.Class != drovertype.ClassConnectionFailed || !res.Error.Recoverable || res.Error.Status != 529 ||
			!strings.Contains(res.Error.Message, "after 3 tries") || len(mock.Requests()) != 3 || res.Turns != 0 {
			t.Fatalf("%+v %+v", res, res.Error)
		}
	})
	t.Run("no retries", func(t *testing.T) {
		e := newEnv(t)
		mock := nativetest.NewMock(nativetest.Fail(overloaded(0)))
		res, _ := e.runtime(native.Config{MaxRetries: 0}, mock).Run(t.Context(), e.input("go"), e.out)
		if res.Error.Class != drovertype.ClassConnectionFailed || len(e.clock.Sleeps()) != 0 {
			t.Fatalf("%+v", res.Error)
		}
	})
	t.Run("a retry wait counts against the time budget", func(t *testing.T) {
		e := newEnv(t)
		mock := nativetest.NewMock(nativetest.Fail(overloaded(20*time.Second)), nativetest.Text("never", usage(1, 1)))
		res, _ := e.runtime(native.Config{MaxRetries: 3, Budget: native.Budget{Time: 10 * time.Second}}, mock).Run(t.Context(), e.input("go"), e.out)
		if res.Error.Class != drovertype.ClassTimeBudgetExhausted || len(mock.Requests()) != 1 {
			t.Fatalf("%+v, %d calls", res.Error, len(mock.Requests()))
		}
	})
}

func TestProviderRefusalsAreClassified(t *testing.T) {
	reset := epoch.Add(time.Minute)
	for _, c := range []struct {
		err         *model.Error
		class       drovertype.ErrorClass
		recoverable bool
	}{
		{&model.Error{Kind: model.KindRateLimited, Status: 429, RetryAfter: 17 * time.Second, ResetAt: reset}, drovertype.ClassRateLimited, true},
		{&model.Error{Kind: model.KindAuth, Status: 401}, drovertype.ClassAuthFailed, false},
		{&model.Error{Kind: model.KindRequest, Status: 400, Message: "prompt is too long"}, drovertype.ClassRuntimeError, false},
		{&model.Error{Kind: model.KindMalformed, Message: "bad event"}, drovertype.ClassOutputMalformed, false},
	} {
		e := newEnv(t)
		mock := nativetest.NewMock(nativetest.Fail(c.err), nativetest.Text("never", usage(1, 1)))
		res, _ := e.runtime(native.Config{MaxRetries: 5}, mock).Run(t.Context(), e.input("go"), e.out)
		if res.Error.Class != c.class || res.Error.Recoverable != c.recoverable || res.Error.Status != c.err.Status ||
			res.Error.RetryAfter != c.err.RetryAfter || !res.Error.ResetAt.Equal(c.err.ResetAt) || len(mock.Requests()) != 1 {
			t.Errorf("%s: %+v after %d calls", c.err.Kind, res.Error, len(mock.Requests()))
		}
	}
}

// Every refused path is recorded and does not end the attempt: the model
// reads the refusal and goes on.
func TestRefusalsRecordedNotFatal(t *testing.T) {
	e := newEnv(t)
	os.MkdirAll(filepath.Join(e.wt, "src"), 0o755)
	os.Symlink(filepath.Join(e.dir, "outside"), filepath.Join(e.wt, "src/link"))
	mock := nativetest.NewMock(
		nativetest.Calls(usage(1, 1),
			nativetest.Call("a", "write_file", map[string]any{"path": "../outside/secret", "content": "pwned"}),
			nativetest.Call("b", "edit_file", map[string]any{"path": "src/link/secret", "old_string": "s3cret", "new_string": "pwned"}),
			nativetest.Call("c", "read_file", map[string]any{"path": "/etc/hostname"}),
			nativetest.Call("d", "write_file", map[string]any{"path": "docs/x.md", "content": "out of scope"}),
			nativetest.Call("e", "write_file", map[string]any{"path": "src/ok.go", "content": "package src\n"}),
		),
		nativetest.Text("done", usage(1, 1)),
	)
	in := e.input("go")
	in.Scope = &flow.Scope{Allow: []string{"src/**"}}
	res, _ := e.runtime(native.Config{}, mock).Run(t.Context(), in, e.out)
	if res.Outcome != native.Completed || len(res.Refusals) != 4 {
		t.Fatalf("%+v", res)
	}
	var reasons []string
	for _, r := range res.Refusals {
		reasons = append(reasons, r.Tool+" "+r.Reason)
	}
	want := []string{"write_file outside the worktree", "edit_file symlink points outside the worktree",
		"read_file outside the worktree", "write_file outside the task's scope (matches no allow pattern)"}
	if !slices.Equal(reasons, want) {
		t.Errorf("refusals:\n got %q\nwant %q", reasons, want)
	}
	if b, _ := os.ReadFile(filepath.Join(e.dir, "outside/secret")); string(b) != "s3cret\n" {
		t.Errorf("outside changed: %q", b)
	}
	if e.read(t, "src/ok.go") != "package src\n" || !strings.HasPrefix(e.read(t, "docs/x.md"), "<") {
		t.Error("scope not applied")
	}
	refused := 0
	for _, ev := range e.events(t) {
		if ev.Type == native.EventToolResult && ev.Refusal != nil {
			refused++
		}
		if ev.Type == native.EventFinished && ev.Refusals != 4 {
			t.Errorf("finished: %+v", ev)
		}
	}
	if refused != 4 {
		t.Errorf("%d refusals in the log", refused)
	}
	if got := mock.Requests()[1].Messages[2].ToolResults[0]; !got.IsError || !strings.Contains(got.Content, "refused") {
		t.Errorf("the model was not told: %+v", got)
	}
}

func TestCutAnswerContinues(t *testing.T) {
	e := newEnv(t)
	mock := nativetest.NewMock(
		nativetest.Step{Response: &model.Response{Text: "First half", StopReason: model.StopMaxTokens, Usage: usage(1, 1)}},
		nativetest.Text("second half.", usage(1, 1)),
	)
	res, _ := e.runtime(native.Config{}, mock).Run(t.Context(), e.input("go"), e.out)
	if res.Outcome != native.Completed || res.FinalText != "second half." {
		t.Fatalf("%+v", res)
	}
	msgs := mock.Requests()[1].Messages
	if len(msgs) != 3 || msgs[1].Text != "First half" || msgs[2].Role != model.User || !strings.Contains(msgs[2].Text, "cut off") {
		t.Errorf("continuation: %+v", msgs)
	}
}

func TestOddToolCalls(t *testing.T) {
	e := newEnv(t)
	many := []model.ToolCall{{Name: "list_dir", Input: []byte(`{}`)}, {ID: "x", Name: "no_such_tool", Input: []byte(`{}`)},
		{ID: "y", Name: "read_file", Input: []byte(`{"path": "main.g`)}}
	for i := range 64 {
		many = append(many, model.ToolCall{ID: fmt.Sprintf("m%d", i), Name: "list_dir", Input: []byte(`{}`)})
	}
	mock := nativetest.NewMock(nativetest.Calls(usage(1, 1), many...), nativetest.Text("ok", usage(1, 1)))
	res, _ := e.runtime(native.Config{}, mock).Run(t.Context(), e.input("go"), e.out)
	if res.Outcome != native.Completed {
		t.Fatalf("%+v", res)
	}
	results := mock.Requests()[1].Messages[2].ToolResults
	if len(results) != 67 || results[0].CallID != "call_1_0" {
		t.Fatalf("%d results, first id %q (a missing id is given one)", len(results), results[0].CallID)
	}
	if !strings.Contains(results[1].Content, `unknown tool "no_such_tool"`) || !strings.Contains(results[2].Content, "not valid JSON") {
		t.Errorf("odd calls: %q / %q", results[1].Content, results[2].Content)
	}
	if !results[66].IsError || !strings.Contains(results[66].Content, "at most 64 tool calls") || results[63].IsError {
		t.Errorf("calls past the limit: %q / %q", results[63].Content, results[66].Content)
	}
	if mock.Requests()[1].Messages[1].ToolCalls[0].ID != "call_1_0" {
		t.Error("the assistant message sent back lacks the assigned id")
	}
}

func TestModelOverride(t *testing.T) {
	e := newEnv(t)
	mock := nativetest.NewMock(nativetest.Text("ok", model.Usage{}))
	in := e.input("go")
	in.Model = "bigger-model"
	res, _ := e.runtime(native.Config{}, mock).Run(t.Context(), in, e.out)
	if mock.Requests()[0].Model != "bigger-model" || e.events(t)[0].Model != "bigger-model" || res.Model != "mock-model" {
		t.Errorf("request model %q, result model %q", mock.Requests()[0].Model, res.Model)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	rt := e.runtime(native.Config{}, nativetest.NewMock())
	for _, in := range []*native.Input{nil, {}, {Worktree: filepath.Join(e.dir, "nope")}, {Worktree: filepath.Join(e.wt, "main.go")}} {
		if _, err := rt.Run(t.Context(), in, nil); !errors.Is(err, native.ErrInput) {
			t.Errorf("%+v: %v", in, err)
		}
	}
}

func TestScriptRunsOut(t *testing.T) {
	e := newEnv(t)
	res, _ := e.runtime(native.Config{}, nativetest.NewMock()).Run(t.Context(), e.input("go"), nil)
	if res.Error == nil || res.Error.Class != drovertype.ClassRuntimeError {
		t.Errorf("%+v", res.Error)
	}
}

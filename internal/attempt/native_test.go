package attempt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/native"
	"github.com/drover-dev/drover/internal/native/model"
	"github.com/drover-dev/drover/internal/native/nativetest"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/supervise"
)

// nativeAgent makes the harness's runtime a native one answering from mock.
func (h *harness) nativeAgent(mock *nativetest.MockModelClient, budget native.Budget) {
	cfg := native.Config{Provider: "mock", Model: "mock-model", BaseURL: "http://mock.invalid", Budget: budget}
	h.agent = native.AdapterOf(native.NewRuntime("native-agent", cfg, mock))
}

func write(id, path, content string) model.ToolCall {
	return nativetest.Call(id, "write_file", map[string]any{"path": path, "content": content})
}

var u = model.Usage{InputTokens: 100, OutputTokens: 10}

// memStore is an ArtifactStore in memory.
type memStore struct {
	mu   sync.Mutex
	objs map[string][]byte
}

func (m *memStore) Put(_ context.Context, name string, r io.Reader) (int64, error) {
	b, err := io.ReadAll(r)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objs == nil {
		m.objs = map[string][]byte{}
	}
	m.objs[name] = b
	return int64(len(b)), err
}

// lines collects what reached the output sink, one Write per event.
type lines struct {
	mu  sync.Mutex
	got []string
}

func (l *lines) sink(s supervise.Stream, p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s == supervise.Stdout {
		l.got = append(l.got, string(p))
	}
}

// An in-process runtime runs where a CLI would: its events are the
// attempt's output, one line per event, and its log; git says what changed;
// the report has its turns, usage and tool calls; the stored log replays.
func TestRunInProcess(t *testing.T) {
	h := newHarness(t)
	store := &memStore{}
	h.runner.Artifacts = store
	mock := nativetest.NewMock(
		nativetest.Calls(u, write("a", "hello.txt", "hi\n"), nativetest.Call("b", "bash", map[string]any{"command": "echo \"$DROVER_TASK_ID\" > task.txt"})),
		nativetest.Text("Wrote hello.txt.", u),
	)
	h.nativeAgent(mock, native.Budget{Turns: 5})
	job := h.job("Write hello.txt.")
	job.Verify = []string{`test "$DROVER_TASK_ID" = t && test -f hello.txt`}
	out := &lines{}
	rep, rec := h.run(job, out.sink)
	if !rep.Success {
		t.Fatalf("report %+v", rep.Error)
	}
	if got := h.remoteFiles(job.Branch); !strings.Contains(got, "hello.txt") || !strings.Contains(got, "task.txt") {
		t.Errorf("branch files %q", got)
	}
	if rep.Turns != 2 || rep.ToolCalls["write_file"] != 1 || rep.ToolCalls["bash"] != 1 || rep.FinalText != "Wrote hello.txt." ||
		rep.Usage == nil || rep.Usage.InputTokens == nil || *rep.Usage.InputTokens != 200 || rep.Usage.CacheReadTokens == nil ||
		rep.Usage.CostUSD != nil || rep.Usage.Model != "mock-model" || rep.ExitCode != 0 {
		t.Errorf("report %+v usage %+v", rep, rep.Usage)
	}
	if !strings.Contains(rep.StdoutTail, `"type":"native_finished"`) {
		t.Errorf("stdout tail %q", rep.StdoutTail)
	}
	if v := verification(t, rec); !v.Passed {
		t.Errorf("verification with the runtime's environment: %+v", v)
	}
	// The lifecycle's events, in order: capabilities before the start.
	var types []string
	for _, e := range rec.events {
		types = append(types, string(e.typ))
	}
	if got := strings.Join(types, ","); !strings.HasPrefix(got, "adapter_initialized,prepare_completed,runtime_capabilities_evaluated,runtime_started,runtime_exited,file_modified") {
		t.Errorf("events %s", got)
	}
	var caps event.RuntimeCapabilitiesEvaluatedData
	mustUnmarshal(t, rec.find(event.RuntimeCapabilitiesEvaluated)[0].data, &caps)
	if caps.Adapter != "native" || caps.ScopeEnforcement != "prevented" || caps.Provider != "mock" || caps.Model != "mock-model" ||
		len(caps.Tools) == 0 || caps.Budget == nil || caps.Budget.Turns != 5 {
		t.Errorf("capabilities %+v", caps)
	}
	var started event.RuntimeStartedData
	mustUnmarshal(t, rec.find(event.RuntimeStarted)[0].data, &started)
	if started.Pid != 0 || strings.Join(started.Argv, " ") != "native mock http://mock.invalid mock-model" {
		t.Errorf("runtime_started %+v", started)
	}
	var exited event.RuntimeExitedData
	mustUnmarshal(t, rec.find(event.RuntimeExited)[0].data, &exited)
	if exited.Outcome != "completed" {
		t.Errorf("runtime_exited %+v", exited)
	}
	// Each write to the sink is one whole event.
	for _, l := range out.got {
		if !strings.HasSuffix(l, "\n") || strings.Count(l, "\n") != 1 || !json.Valid([]byte(l)) {
			t.Errorf("output chunk is not one JSON line: %q", l)
		}
	}
	if len(out.got) < 6 {
		t.Errorf("%d events streamed", len(out.got))
	}
	// The stored log is the event log: it replays, call for call.
	log := store.objs[rep.LogObject]
	recd, err := native.ReadLog(bytes.NewReader(log))
	if err != nil || len(recd.Calls) != 2 {
		t.Fatalf("log %q: %v, %+v", rep.LogObject, err, recd)
	}
	h.nativeAgent(nativetest.Replay(recd), native.Budget{Turns: 5})
	again, _ := h.run(h.job("Write hello.txt."), nil)
	if !again.Success || again.Turns != 2 || again.FinalText != rep.FinalText || strings.Join(again.FilesCreated, ",") != strings.Join(rep.FilesCreated, ",") {
		t.Errorf("replay: %+v, first run %+v", again, rep)
	}
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// A write outside the task's scope is refused to the model and never
// happens: the attempt succeeds with what it may change, and the report
// lists the refusal.
func TestRunInProcessScopeRefused(t *testing.T) {
	h := newHarness(t)
	mock := nativetest.NewMock(
		nativetest.Calls(u, write("a", "README.md", "overwritten\n"), write("b", "src/new.go", "package main\n")),
		nativetest.Text("Done what I may.", u),
	)
	h.nativeAgent(mock, native.Budget{})
	job := h.job("Change things.")
	job.Scope = &flow.Scope{Allow: []string{"src/**"}}
	rep, rec := h.run(job, nil)
	if !rep.Success {
		t.Fatalf("report %+v", rep.Error)
	}
	if len(rep.Refusals) != 1 || !strings.Contains(rep.Refusals[0], "write_file README.md") {
		t.Errorf("refusals %q", rep.Refusals)
	}
	if got := gitT(t, "", "--git-dir="+h.origin, "show", job.Branch+":README.md"); got != "hello" {
		t.Errorf("README.md on the branch: %q", got)
	}
	if !strings.Contains(h.remoteFiles(job.Branch), "src/new.go") {
		t.Error("the allowed write is not on the branch")
	}
	if v := verification(t, rec); !v.Passed || len(v.ScopeViolations) != 0 {
		t.Errorf("verification %+v", v)
	}
	// The model read the refusal as its tool's result.
	reqs := mock.Requests()
	if res := reqs[1].Messages[len(reqs[1].Messages)-1].ToolResults; len(res) != 2 || !res[0].IsError || res[1].IsError {
		t.Errorf("tool results %+v", res)
	}
}

// The operator's cancel stops a model call in flight at once: CANCELLED,
// nothing pushed.
func TestRunInProcessCancel(t *testing.T) {
	h := newHarness(t)
	calling := make(chan struct{})
	mock := nativetest.NewMock(
		nativetest.Calls(u, write("a", "partial.txt", "x\n")),
		nativetest.Step{Do: func(ctx context.Context, _ *model.Request) (*model.Response, error) {
			close(calling)
			<-ctx.Done()
			return nil, ctx.Err()
		}},
	)
	h.nativeAgent(mock, native.Budget{})
	job := h.job("Work.")
	cancel := make(chan struct{})
	job.Cancel = cancel
	go func() {
		<-calling
		close(cancel)
	}()
	start := time.Now()
	rep, rec := h.run(job, nil)
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("cancel took %s", took)
	}
	wantClass(t, rep, drovertype.ClassCancelled)
	if rep.Error.Message != "cancelled" || rep.Turns != 1 {
		t.Errorf("report %+v, %+v", rep, rep.Error)
	}
	if h.remoteBranch(job.Branch) != "" {
		t.Error("a cancelled attempt was pushed")
	}
	var exited event.RuntimeExitedData
	mustUnmarshal(t, rec.find(event.RuntimeExited)[0].data, &exited)
	if exited.Outcome != "stopped" {
		t.Errorf("runtime_exited %+v", exited)
	}
}

// A lost claim ends the run with no report; the model call is cut.
func TestRunInProcessContextCancelled(t *testing.T) {
	h := newHarness(t)
	lost := errors.New("claim lost")
	ctx, cancel := context.WithCancelCause(context.Background())
	mock := nativetest.NewMock(nativetest.Step{Do: func(c context.Context, _ *model.Request) (*model.Response, error) {
		cancel(lost)
		<-c.Done()
		return nil, c.Err()
	}})
	h.nativeAgent(mock, native.Budget{})
	rep, err := h.runner.Run(ctx, h.job("Work."), h.agent, &recorder{}, nil)
	if rep != nil || !errors.Is(err, lost) {
		t.Fatalf("rep %+v, err %v", rep, err)
	}
}

// The provider's failures are the attempt's, classified as a CLI's are.
func TestRunInProcessFailures(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		name  string
		steps []nativetest.Step
		class drovertype.ErrorClass
		check func(*event.ErrorInfo) bool
	}{
		{"rate limited", []nativetest.Step{nativetest.Fail(&model.Error{Kind: model.KindRateLimited, Status: 429, RetryAfter: 7 * time.Second, Message: "slow down"})},
			drovertype.ClassRateLimited, func(e *event.ErrorInfo) bool { return e.Recoverable && e.RetryAfterMS == 7000 && e.Status == 429 }},
		{"key refused", []nativetest.Step{nativetest.Fail(&model.Error{Kind: model.KindAuth, Status: 401, Message: "invalid x-api-key"})},
			drovertype.ClassAuthFailed, func(e *event.ErrorInfo) bool { return !e.Recoverable && e.Status == 401 }},
		{"turns spent", []nativetest.Step{nativetest.Calls(u, write("a", "a.txt", "a")), nativetest.Calls(u, write("b", "b.txt", "b"))},
			drovertype.ClassTurnBudgetExhausted, func(e *event.ErrorInfo) bool { return strings.Contains(e.Message, "2 of 2 turns") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			h.nativeAgent(nativetest.NewMock(c.steps...), native.Budget{Turns: 2})
			job := h.job("Work.")
			job.Verify = []string{"true"}
			rep, rec := h.run(job, nil)
			wantClass(t, rep, c.class)
			if !c.check(rep.Error) {
				t.Errorf("error %+v", rep.Error)
			}
			if len(rec.find(event.VerificationCompleted)) != 0 {
				t.Error("checks ran after the runtime failed")
			}
		})
	}
}

// A native validator reviews without changing anything: its file tools
// may change no path.
func TestRunInProcessValidator(t *testing.T) {
	h := newHarness(t)
	job := h.job("echo hi > hello.txt")
	vmock := nativetest.NewMock(
		nativetest.Calls(u, nativetest.Call("r", "read_file", map[string]any{"path": "hello.txt"}), write("w", "hello.txt", "changed by the reviewer\n")),
		nativetest.Text("It is right.\nVERDICT: PASS\n- hello.txt holds hi", u),
	)
	job.Review = &queue.Review{Runtime: "native-validator"}
	job.Validator = native.AdapterOf(native.NewRuntime("native-validator", native.Config{Provider: "mock", Model: "m"}, vmock))
	rep, rec := h.run(job, nil)
	if !rep.Success {
		t.Fatalf("report %+v", rep.Error)
	}
	v := verification(t, rec)
	if v.Review == nil || !v.Review.Passed || len(v.Review.Reasons) != 1 {
		t.Errorf("review %+v", v.Review)
	}
	if got := gitT(t, "", "--git-dir="+h.origin, "show", job.Branch+":hello.txt"); got != "hi" {
		t.Errorf("hello.txt on the branch: %q", got)
	}
	reqs := vmock.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[0].Messages[0].Text, "VERDICT: PASS") {
		t.Fatalf("the validator was asked %+v", reqs)
	}
	if res := reqs[1].Messages[len(reqs[1].Messages)-1].ToolResults; len(res) != 2 || res[0].IsError || !res[1].IsError {
		t.Errorf("the validator's tool results %+v", res)
	}
}

package native_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/native"
	"github.com/drover-dev/drover/internal/native/model"
	"github.com/drover-dev/drover/internal/native/nativetest"
)

// A recorded attempt replays: its log holds every model call (errors
// included), so a mock built from it drives the same loop to the same
// worktree and the same log, event for event.
func TestRecordedAttemptReplays(t *testing.T) {
	script := func(e *env) []nativetest.Step {
		return []nativetest.Step{
			nativetest.Fail(&model.Error{Kind: model.KindTransient, Provider: "mock", Status: 503, Message: "unavailable"}),
			nativetest.Calls(usage(10, 5), nativetest.Call("a", "write_file", map[string]any{"path": "notes/plan.md", "content": "1. fix\n2. test\n"}),
				nativetest.Call("b", "read_file", map[string]any{"path": "main.go", "offset": 3})),
			nativetest.Calls(usage(20, 5), nativetest.Call("c", "edit_file", map[string]any{"path": "main.go", "old_string": "helo", "new_string": "hello, \"world\""}),
				nativetest.Call("d", "write_file", map[string]any{"path": "../escape", "content": "x"})),
			nativetest.Calls(usage(30, 5), nativetest.Call("e", "bash", map[string]any{"command": "cat main.go | wc -l; exit 2"})),
			nativetest.Text("All done — ünïcode too.", usage(40, 9)),
		}
	}
	e1 := newEnv(t)
	res1, err := e1.runtime(native.Config{MaxRetries: 2}, nativetest.NewMock(script(e1)...)).Run(t.Context(), e1.input("go"), e1.out)
	if err != nil || res1.Outcome != native.Completed {
		t.Fatalf("recording run: %+v %v", res1, err)
	}
	rec, err := native.ReadLog(bytes.NewReader(e1.out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Calls) != 5 || rec.Calls[0].Err == nil || rec.Calls[0].Err.Status != 503 || rec.Final == nil || rec.Final.Outcome != native.Completed {
		t.Fatalf("recording: %+v", rec)
	}
	// Replay into a fresh, identical worktree.
	e2 := newEnv(t)
	replay := nativetest.Replay(rec)
	res2, err := e2.runtime(native.Config{MaxRetries: 2}, replay).Run(t.Context(), e2.input("go"), e2.out)
	if err != nil || replay.Left() != 0 {
		t.Fatalf("replay: %v, %d calls left", err, replay.Left())
	}
	if res2.Outcome != res1.Outcome || res2.FinalText != res1.FinalText || res2.Usage != res1.Usage || !reflect.DeepEqual(res2.ToolCalls, res1.ToolCalls) ||
		!reflect.DeepEqual(res2.Refusals, res1.Refusals) {
		t.Errorf("results differ:\n%+v\n%+v", res1, res2)
	}
	for _, f := range []string{"main.go", "notes/plan.md"} {
		if a, b := e1.read(t, f), e2.read(t, f); a != b {
			t.Errorf("%s differs: %q vs %q", f, a, b)
		}
	}
	a, b := normalise(t, e1, e1.out.Bytes()), normalise(t, e2, e2.out.Bytes())
	if a != b {
		t.Errorf("logs differ:\n%s\n---\n%s", a, b)
	}
}

// normalise drops what legitimately differs between two runs: durations
// and the worktree's path.
func normalise(t *testing.T, e *env, log []byte) string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "duration_ms")
		b, _ := json.Marshal(m)
		out = append(out, strings.ReplaceAll(string(b), e.dir, "DIR"))
	}
	return strings.Join(out, "\n")
}

func TestReadLogRefusesWhatCannotReplay(t *testing.T) {
	ok := `{"type":"native_started","provider":"anthropic","model":"m"}
some unrelated line the attempt's log interleaved
{"type":"model_response","turn":1,"response":{"text":"hi","stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}}
`
	rec, err := native.ReadLog(strings.NewReader(ok))
	if err != nil || len(rec.Calls) != 1 || rec.Provider != "anthropic" || rec.Calls[0].Response.Text != "hi" {
		t.Fatalf("%+v %v", rec, err)
	}
	for name, log := range map[string]string{
		"cut response":    `{"type":"model_response","turn":1,"truncated":true,"response":{"text":"…"}}`,
		"turn skipped":    `{"type":"model_response","turn":2,"response":{"text":"x"}}`,
		"turn repeated":   `{"type":"model_response","turn":1,"response":{}}` + "\n" + `{"type":"model_response","turn":1,"response":{}}`,
		"error too early": `{"type":"model_error","turn":3,"kind":"transient"}`,
		"error kindless":  `{"type":"model_error","turn":1}`,
		"broken event":    `{"type":"model_response","turn":1,"response":{"text":5}}`,
		"no response":     `{"type":"model_response","turn":1}`,
	} {
		if _, err := native.ReadLog(strings.NewReader(log)); !errors.Is(err, native.ErrNotReplayable) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzReadLog(f *testing.F) {
	e := newEnv(f)
	rt := e.runtime(native.Config{}, nativetest.NewMock(
		nativetest.Calls(usage(1, 1), nativetest.Call("a", "list_dir", map[string]any{})),
		nativetest.Fail(&model.Error{Kind: model.KindTransient, Status: 500}),
		nativetest.Text("ok", usage(1, 1))))
	rt.Run(f.Context(), e.input("go"), e.out)
	f.Add(e.out.Bytes())
	f.Add([]byte(`{"type":"model_error","turn":1,"kind":"auth","retry_after_ms":-5}`))
	f.Add([]byte("{\n{\"type\":\"native_finished\"}\n\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := native.ReadLog(bytes.NewReader(b))
		if err != nil {
			return
		}
		turn := 0
		for _, c := range rec.Calls {
			if (c.Response == nil) == (c.Err == nil) {
				t.Fatalf("a call with both or neither: %+v", c)
			}
			if c.Response != nil {
				if c.Turn != turn+1 {
					t.Fatalf("turns out of order: %d after %d", c.Turn, turn)
				}
				turn = c.Turn
			}
		}
		// Whatever ReadLog accepts must drive a replay without panicking.
		nativetest.Replay(rec)
	})
}

func TestResponseEventIsBounded(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("é", native.MaxResponseEvent)
	mock := nativetest.NewMock(nativetest.Text(big, usage(1, 1)))
	res, _ := e.runtime(native.Config{}, mock).Run(t.Context(), e.input("go"), e.out)
	if res.FinalText != big {
		t.Error("the result lost the text")
	}
	for _, ev := range e.events(t) {
		if ev.Type == native.EventResponse && (!ev.Truncated || len(ev.Response.Text) > native.MaxResponseEvent/2) {
			t.Errorf("response event of %d bytes, truncated %v", len(ev.Response.Text), ev.Truncated)
		}
	}
	if _, err := native.ReadLog(bytes.NewReader(e.out.Bytes())); !errors.Is(err, native.ErrNotReplayable) {
		t.Errorf("a cut log replays: %v", err)
	}
}

func TestLogWriteFailureDoesNotStopTheRun(t *testing.T) {
	e := newEnv(t)
	mock := nativetest.NewMock(nativetest.Calls(usage(1, 1), nativetest.Call("a", "write_file", map[string]any{"path": "x", "content": "y"})), nativetest.Text("ok", usage(1, 1)))
	res, _ := e.runtime(native.Config{}, mock).Run(t.Context(), e.input("go"), failingWriter{})
	if res.Outcome != native.Completed || res.LogErr == nil || e.read(t, "x") != "y" {
		t.Errorf("%+v", res)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

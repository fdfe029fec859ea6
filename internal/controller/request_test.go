package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/store"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/objstore"
)

// TestAPIRefusesBadRequests sends each API subject what a careless or
// hostile client might, as raw bytes past the Client's own checks, and
// checks the controller's answer word for word, and that nothing was
// recorded: the stream has no new event and the projection is unchanged.
func TestAPIRefusesBadRequests(t *testing.T) {
	h := newHarness(t)
	h.start(filepath.Join(t.TempDir(), "state"))
	id, att := h.submitOne()
	h.waitFor("the attempt to be scheduled", func(st *projection.State) bool { return st.Attempts[att] != nil })
	for deadline := time.Now().Add(10 * time.Second); h.jobs() != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job was not published")
		}
	}

	good := func(mutate func(m map[string]any)) string {
		task := map[string]any{"id": "a", "prompt": "p"}
		spec := map[string]any{"name": "f", "repo": "/srv/repo.git", "base": "main", "runtime": "demo",
			"tasks": []any{task}}
		if mutate != nil {
			mutate(spec)
		}
		b, _ := json.Marshal(map[string]any{"spec": spec})
		return string(b)
	}
	taskFields := "id, prompt, depends_on, runtime, model, args, validator, review, retry, timeout, placement_timeout, verify, verify_timeout, scope, budget"
	long := strings.Repeat("x", maxReason+1)
	cases := []struct {
		name, subject, body string
		header              nats.Header
		want                string
	}{
		// submit: the flow is read as Parse reads a file.
		{"submit misspelt field", SubjectSubmit, good(func(m map[string]any) {
			m["tasks"] = []any{map[string]any{"id": "a", "prompt": "p"}, map[string]any{"id": "b", "prompt": "p", "depend_on": []string{"a"}}}
		}), nil, "tasks[1].depend_on: unknown field (known fields: " + taskFields + ")"},
		{"submit without base", SubjectSubmit, good(func(m map[string]any) { delete(m, "base") }), nil,
			"base: required: the revision tasks start from (a flow file without one gets HEAD)"},
		{"submit unknown runtime", SubjectSubmit, good(func(m map[string]any) { m["runtime"] = "nosuch" }), nil,
			`runtime: unknown runtime "nosuch": it is not configured`},
		{"submit bad task id", SubjectSubmit, good(func(m map[string]any) {
			m["tasks"] = []any{map[string]any{"id": "a.b", "prompt": "p"}}
		}), nil, `tasks[0].id: "a.b" contains '.'; only ASCII letters, digits and '-' are allowed`},
		{"submit invalid name", SubjectSubmit, good(func(m map[string]any) { m["name"] = "../x" }), nil,
			`name: "../x" contains '.'; only ASCII letters, digits and '-' are allowed`},
		{"submit relative repo", SubjectSubmit, good(func(m map[string]any) { m["repo"] = "repo.git" }), nil,
			`repo: local path "repo.git" is relative; send it absolute (controller submit does)`},
		{"submit several problems", SubjectSubmit, good(func(m map[string]any) {
			delete(m, "base")
			m["max_parallel"] = 2.5
		}), nil, `max_parallel: must be a whole number, got a number ("2.5")` + "\n" +
			"base: required: the revision tasks start from (a flow file without one gets HEAD)"},
		{"submit unknown member", SubjectSubmit, `{"spec":{},"priority":1}`, nil,
			`submit request: "priority": unknown field (known fields: spec, strict)`},
		{"submit strict not a bool", SubjectSubmit, `{"spec":{},"strict":"yes"}`, nil, "submit request: strict: must be true or false, got a string"},
		{"submit no spec", SubjectSubmit, `{}`, nil, "submit request: spec: required: the flow to submit"},
		{"submit not JSON", SubjectSubmit, `spec: {}`, nil, "submit request: invalid JSON: invalid character 's' at start of value"},
		{"submit a list", SubjectSubmit, `[]`, nil, "submit request: must be a JSON object, got a list"},
		{"submit bogus transfer", SubjectSubmit, ``, nats.Header{objstore.TransferHeader: {"../../etc/passwd"}},
			`request body: objstore: "../../etc/passwd" is not a transfer name`},
		{"submit missing transfer", SubjectSubmit, ``, nats.Header{objstore.TransferHeader: {strings.Repeat("ab", 16)}},
			"request body: objstore: get transfer " + strings.Repeat("ab", 16) + ": nats: object not found"},

		// status
		{"status bad flow", SubjectStatus, `{"flow":"a.b"}`, nil,
			`status request: flow: invalid id: "a.b" contains '.'; only ASCII letters, digits and '-' are allowed`},
		{"status wildcard", SubjectStatus, `{"flow":"*"}`, nil,
			`status request: flow: invalid id: "*" contains '*'; only ASCII letters, digits and '-' are allowed`},
		{"status flow a number", SubjectStatus, `{"flow":7}`, nil, "status request: flow: must be a string, got a number"},
		{"status unknown member", SubjectStatus, `{"flw":"x"}`, nil, `status request: "flw": unknown field (known fields: flow, limit, after, states, tasks)`},
		{"status twice", SubjectStatus, `{"flow":"a","flow":"b"}`, nil, "status request: flow: field is set twice"},
		{"status trailing", SubjectStatus, `{} {}`, nil, "status request: invalid JSON: more after the request's object"},
		{"status by transfer", SubjectStatus, ``, nats.Header{objstore.TransferHeader: {strings.Repeat("ab", 16)}},
			fmt.Sprintf("this request is at most %d bytes and is not sent by transfer", maxRequestSize)},
		{"status too large", SubjectStatus, `{"flow":"` + strings.Repeat("a", maxRequestSize) + `"}`, nil,
			fmt.Sprintf("request of %d bytes; the limit is %d", maxRequestSize+11, maxRequestSize)},

		// status pages
		{"status limit zero", SubjectStatus, `{"flow":"` + id + `","limit":0}`, nil, "status request: limit: 0; a page holds 1 to 1000 tasks"},
		{"status limit negative", SubjectStatus, `{"flow":"` + id + `","limit":-5}`, nil, "status request: limit: -5; a page holds 1 to 1000 tasks"},
		{"status limit too large", SubjectStatus, `{"flow":"` + id + `","limit":1001}`, nil, "status request: limit: 1001; a page holds 1 to 1000 tasks"},
		{"status limit a fraction", SubjectStatus, `{"flow":"` + id + `","limit":2.5}`, nil,
			"status request: limit: must be a whole number within 64 bits, got 2.5"},
		{"status limit huge", SubjectStatus, `{"flow":"` + id + `","limit":99999999999999999999}`, nil,
			"status request: limit: must be a whole number within 64 bits, got 99999999999999999999"},
		{"status limit a string", SubjectStatus, `{"flow":"` + id + `","limit":"10"}`, nil, "status request: limit: must be a number, got a string"},
		{"status limit without flow", SubjectStatus, `{"limit":10}`, nil, "status request: limit: only with flow (the list of flows is not paged)"},
		{"status after without limit", SubjectStatus, `{"flow":"` + id + `","after":"` + id + `/a"}`, nil,
			"status request: after: only with limit (a page of the flow's tasks)"},
		{"status garbage cursor", SubjectStatus, `{"flow":"` + id + `","limit":5,"after":"bm90IGEgY3Vyc29y"}`, nil,
			`status request: after: "bm90IGEgY3Vyc29y" is not a cursor (FLOW/TASK, a page's next)`},
		{"status cursor of another flow", SubjectStatus, `{"flow":"` + id + `","limit":5,"after":"other-abc123/a"}`, nil,
			`status request: after: "other-abc123/a" is a cursor of flow other-abc123, not of ` + id},
		{"status cursor of no task", SubjectStatus, `{"flow":"` + id + `","limit":5,"after":"` + id + `/nosuch"}`, nil,
			"status request: after: flow " + id + " has no task nosuch"},
		{"status cursor with a wildcard", SubjectStatus, `{"flow":"` + id + `","limit":5,"after":"` + id + `/>"}`, nil,
			`status request: after: task: invalid id: ">" contains '>'; only ASCII letters, digits and '-' are allowed`},
		{"status cursor an attempt", SubjectStatus, `{"flow":"` + id + `","limit":5,"after":"` + att + `"}`, nil,
			`status request: after: "` + att + `" is not a cursor (FLOW/TASK, a page's next)`},
		{"status unknown state", SubjectStatus, `{"flow":"` + id + `","limit":5,"states":["broken"]}`, nil,
			`status request: states: "broken" is not a task state (pending, scheduled, running, retrying, succeeded, failed, blocked, cancelled or waiting)`},
		{"status state twice", SubjectStatus, `{"flow":"` + id + `","limit":5,"states":["failed","failed"]}`, nil,
			"status request: states: failed is listed twice"},
		{"status states a string", SubjectStatus, `{"flow":"` + id + `","limit":5,"states":"failed"}`, nil,
			"status request: states: must be a list of strings, got a string"},
		{"status states with a number", SubjectStatus, `{"flow":"` + id + `","limit":5,"states":["failed",3]}`, nil,
			"status request: states: must be a list of strings, got a number in it"},
		{"status too many states", SubjectStatus, `{"flow":"` + id + `","limit":5,"states":["a","b","c","d","e","f","g","h","i","j"]}`, nil,
			"status request: states: 10 entries; at most 9"},
		{"status bad task id", SubjectStatus, `{"flow":"` + id + `","limit":5,"tasks":["a","../b"]}`, nil,
			`status request: tasks: invalid id: "../b" contains '.'; only ASCII letters, digits and '-' are allowed`},
		{"status too many tasks", SubjectStatus, `{"flow":"` + id + `","limit":5,"tasks":[` + strings.Repeat(`"a",`, MaxPageLimit) + `"a"]}`, nil,
			"status request: tasks: 1001 entries; at most 1000"},
		{"status tasks broken", SubjectStatus, `{"flow":"` + id + `","limit":5,"tasks":["a",}`, nil,
			"status request: invalid JSON: invalid character '}' at start of value within \"/tasks/1\" after offset 44"},

		// rebuild
		{"rebuild with a field", SubjectRebuild, `{"force":true}`, nil, `rebuild request: "force": unknown field (the request has no fields)`},

		// operator requests
		{"cancel bad attempt", SubjectCancel, `{"target":"` + id + `_a_0"}`, nil,
			`cancel request: target: invalid id: "` + id + `_a_0" is not an attempt id: the attempt number is not a number from 1 (an attempt id is FLOW_TASK_N)`},
		{"cancel integration", SubjectCancel, `{"target":"` + drovertype.IntegrationID(id, 1) + `"}`, nil,
			`cancel request: target: "` + drovertype.IntegrationID(id, 1) + `" is a build of the flow's integration branch, not an attempt of a task`},
		{"cancel no target", SubjectCancel, `{"reason":"x"}`, nil, "cancel request: target: required: FLOW, FLOW/TASK or an attempt id"},
		{"cancel subject wildcard", SubjectCancel, `{"target":"` + id + `/>"}`, nil,
			`cancel request: target: task id ">": invalid id: ">" contains '>'; only ASCII letters, digits and '-' are allowed`},
		{"cancel long reason", SubjectCancel, `{"target":"` + id + `","reason":"` + long + `"}`, nil,
			fmt.Sprintf("cancel request: reason: %d bytes; the limit is %d", maxReason+1, maxReason)},
		{"cancel escape in reason", SubjectCancel, `{"target":"` + id + `","reason":"ok\u001b[2J"}`, nil,
			"cancel request: reason: contains control characters; write one line of text"},
		{"cancel reason a list", SubjectCancel, `{"target":"` + id + `","reason":["x"]}`, nil,
			"cancel request: reason: must be a string, got a list"},
		{"retry misspelt member", SubjectRetry, `{"targt":"` + id + `/a"}`, nil,
			`retry request: "targt": unknown field (known fields: target, reason)`},
		{"pause twice", SubjectPause, `{"target":"` + id + `","target":"x"}`, nil, "pause request: target: field is set twice"},
		{"resume not JSON", SubjectResume, "\xff", nil, "resume request: invalid JSON: invalid character '\\xff' at start of value"},

		// report
		{"report of a flow", SubjectReport, `{"attempt":"` + id + `"}`, nil,
			`report request: attempt: "` + id + `" is not an attempt id (FLOW_TASK_N)`},
		{"report no attempt", SubjectReport, `{}`, nil, "report request: attempt: required: an attempt id (FLOW_TASK_N)"},

		// resolve
		{"resolve nothing", SubjectResolve, `{"task":"a"}`, nil, "resolve request: flow or spec: required: a submitted flow's id or a flow"},
		{"resolve both", SubjectResolve, `{"flow":"` + id + `","spec":` + strings.TrimSuffix(strings.TrimPrefix(good(nil), `{"spec":`), "}") + `}`, nil,
			"resolve request: flow and spec are both set: resolve one or the other"},
		{"resolve bad spec", SubjectResolve, strings.Replace(good(func(m map[string]any) { m["timeout"] = "90" }), `"spec"`, `"spec"`, 1), nil,
			`timeout: invalid duration "90": want a Go duration like "90s" or "10m"`},
		// budget: each sent as it is, not through the Client's own check
		{"budget no limit", SubjectBudget, `{"target":"` + id + `","reason":"x"}`, nil,
			"budget request: give --tokens, --cost-usd or both (0 removes a limit)"},
		{"budget negative", SubjectBudget, `{"target":"` + id + `","tokens":-1}`, nil,
			"budget request: budget.tokens: -1 is out of range: want 0 to 1000000000000000 (0 means no limit)"},
		// In the API's own words: the JSON library's differ from one run to
		// the next.
		{"budget fraction of a token", SubjectBudget, `{"target":"` + id + `","tokens":1.5}`, nil,
			"budget request: tokens: must be a whole number within 64 bits, got 1.5"},
		{"budget of an exponent of tokens", SubjectBudget, `{"target":"` + id + `","tokens":1e3}`, nil,
			"budget request: tokens: must be a whole number within 64 bits, got 1e3"},
		{"budget of too many tokens", SubjectBudget, `{"target":"` + id + `","tokens":9223372036854775808}`, nil,
			"budget request: tokens: must be a whole number within 64 bits, got 9223372036854775808"},
		{"budget of too many dollars", SubjectBudget, `{"target":"` + id + `","cost_usd":1e999}`, nil,
			"budget request: cost_usd: number 1e999 is out of range"},
		{"budget tokens as a string", SubjectBudget, `{"target":"` + id + `","tokens":"5"}`, nil,
			"budget request: tokens: must be a number, got a string"},
		{"budget of an attempt", SubjectBudget, `{"target":"` + drovertype.AttemptID(id, "a", 1) + `","tokens":5}`, nil,
			"budget request: target: takes FLOW or FLOW/TASK, not an attempt"},

		// publish and iterate
		{"publish a task", SubjectPublish, `{"target":"` + id + `/a"}`, nil, "publish request: target: takes a flow id"},
		{"publish dry_run a string", SubjectPublish, `{"target":"` + id + `","dry_run":"yes"}`, nil,
			"publish request: dry_run: must be true or false, got a string"},
		{"publish unknown member", SubjectPublish, `{"target":"` + id + `","force":true}`, nil,
			`publish request: "force": unknown field (known fields: target, reason, dry_run)`},
		{"iterate escape in reason", SubjectIterate, `{"target":"` + id + `","reason":"a\u0007"}`, nil,
			"iterate request: reason: contains control characters; write one line of text"},

		{"resolve bad task", SubjectResolve, `{"flow":"` + id + `","task":"a/b"}`, nil,
			`resolve request: task: invalid id: "a/b" contains '/'; only ASCII letters, digits and '-' are allowed`},
	}

	before, seq := h.snapshot()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := nats.NewMsg(tc.subject)
			msg.Data = []byte(tc.body)
			for k, v := range tc.header {
				msg.Header[k] = v
			}
			reply, err := h.nc.RequestMsg(msg, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if code := reply.Header.Get(micro.ErrorCodeHeader); code != CodeBadRequest {
				t.Errorf("code %q (%s), want %s", code, reply.Header.Get(micro.ErrorHeader), CodeBadRequest)
			}
			if got := string(reply.Data); got != tc.want {
				t.Errorf("answer:\n%s\nwant:\n%s", got, tc.want)
			}
			after, afterSeq := h.snapshot()
			if afterSeq != seq {
				t.Errorf("the events stream went from sequence %d to %d", seq, afterSeq)
			}
			if after != before {
				t.Errorf("the projection changed")
			}
		})
	}
}

// snapshot returns the committed projection, dumped, and the events
// stream's last sequence.
func (h *harness) snapshot() (string, uint64) {
	h.t.Helper()
	last := h.applied()
	if err := h.store.Commit(); err != nil {
		h.t.Fatal(err)
	}
	snap, _ := h.store.Snapshot()
	defer snap.Close()
	dump, err := store.Dump(snap)
	if err != nil {
		h.t.Fatal(err)
	}
	return dump, last
}

// TestClientChecksFirst: the Client refuses what the controller would, in
// its words, without sending anything.
func TestClientChecksFirst(t *testing.T) {
	cl := &Client{} // no connection: nothing may be sent
	ctx := context.Background()
	check := func(err error, want string) {
		t.Helper()
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Code != CodeBadRequest || apiErr.Message != want {
			t.Errorf("got %v, want a bad request %q", err, want)
		}
	}
	_, err := cl.Cancel(ctx, "f_t_x", "")
	check(err, `cancel request: target: invalid id: "f_t_x" is not an attempt id: the attempt number is not a number from 1 (an attempt id is FLOW_TASK_N)`)
	_, err = cl.Pause(ctx, "f", "bad\x00reason")
	check(err, "pause request: reason: contains control characters; write one line of text")
	_, err = cl.Status(ctx, "f.>")
	check(err, `status request: flow: invalid id: "f.>" contains '.'; only ASCII letters, digits and '-' are allowed`)
	_, err = cl.Report(ctx, "f/t")
	check(err, `report request: attempt: "f/t" is not an attempt id (FLOW_TASK_N)`)
	_, err = cl.Submit(ctx, &flow.Spec{Name: "f", Repo: "/r", Runtime: "demo", Tasks: []flow.Task{{ID: "a", Prompt: "p"}}})
	check(err, "base: required: the revision tasks start from (a flow file without one gets HEAD)")
	_, err = cl.Resolve(ctx, ResolveRequest{})
	check(err, "resolve request: flow or spec: required: a submitted flow's id or a flow")
}

// FuzzAPIRequests feeds every request decoder the same bytes: none panics,
// each refusal is a bad request, and whatever is accepted holds only valid
// ids (they become subjects and keys) and, for a flow, a complete one.
func FuzzAPIRequests(f *testing.F) {
	for _, s := range []string{
		`{"spec":{"name":"f","repo":"/r","base":"HEAD","runtime":"demo","tasks":[{"id":"a","prompt":"p"}]}}`,
		`{"flow":"f"}`, `{"target":"f_a_1","reason":"x"}`, `{"target":"f/a"}`, `{"attempt":"f_a_1"}`,
		`{"flow":"f","task":"a"}`, `{"target":"f/a","tokens":5,"cost_usd":0.5}`, `{"target":"f","dry_run":true}`, `{}`, ``, `{"target":"f__integrate_1"}`, `{"a":1,"a":2}`, "\xff",
	} {
		f.Add([]byte(s))
	}
	opts := flow.Options{KnownRuntime: func(n string) bool { return n == "demo" }}
	bad := func(t *testing.T, err error) {
		var re *requestError
		if !errors.As(err, &re) {
			t.Fatalf("refusal %v (%T) is not a bad request", err, err)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if spec, _, err := decodeSubmit(body, opts); err != nil {
			bad(t, err)
		} else if err := spec.Validate(flow.Options{Complete: true}); err != nil {
			t.Fatalf("accepted spec does not validate: %v", err)
		}
		if r, err := decodeStatus(body); err != nil {
			bad(t, err)
		} else if r.Flow != "" && drovertype.ValidID(r.Flow) != nil {
			t.Fatalf("status of %q accepted", r.Flow)
		}
		if err := decodeRebuild(body); err != nil {
			bad(t, err)
		}
		if r, tg, err := decodePublish(body); err != nil {
			bad(t, err)
		} else if drovertype.ValidID(tg.Flow) != nil || tg.Task != "" || tg.Attempt != "" || len(r.Reason) > maxReason {
			t.Fatalf("publish of %+v accepted", r)
		}
		for _, what := range []string{"cancel", "retry", "pause", "resume", "iterate"} {
			r, tg, err := decodeOperator(what, body)
			if err != nil {
				bad(t, err)
				continue
			}
			if drovertype.ValidID(tg.Flow) != nil || tg.Task != "" && drovertype.ValidID(tg.Task) != nil || len(r.Reason) > maxReason {
				t.Fatalf("%s of %+v accepted", what, r)
			}
			if tg.Attempt != "" {
				if fl, task, _, err := drovertype.ParseAttemptID(tg.Attempt); err != nil || fl != tg.Flow || task != tg.Task {
					t.Fatalf("attempt target %+v", tg)
				}
			}
		}
		if r, err := decodeReport(body); err != nil {
			bad(t, err)
		} else if _, task, _, err := drovertype.ParseAttemptID(r.Attempt); err != nil || task == "" {
			t.Fatalf("report of %q accepted", r.Attempt)
		}
		if r, tg, err := decodeBudget(body); err != nil {
			bad(t, err)
		} else if drovertype.ValidID(tg.Flow) != nil || tg.Attempt != "" || checkBudgetLimits(&r) != nil {
			t.Fatalf("budget %+v accepted", r)
		}
		if r, err := decodeResolve(body, opts); err != nil {
			bad(t, err)
		} else if (r.Flow == "") == (r.Spec == nil) {
			t.Fatalf("resolve %+v accepted", r)
		}
	})
}

// What a reply says of a flow's problems is outside input: anything but a
// list of at most flow.MaxProblems of them is left out.
func TestProblemsIn(t *testing.T) {
	many := "[" + strings.Repeat(`{"msg":"x"},`, flow.MaxProblems) + `{"msg":"x"}]`
	for _, tc := range []struct {
		header string
		want   int
	}{
		{`[{"field":"runtime","msg":"unknown"},null]`, 1},
		{"", 0},
		{"junk", 0},
		{`{"field":"runtime"}`, 0},
		{many, 0},
	} {
		if got := problemsIn(tc.header); len(got) != tc.want {
			t.Errorf("problemsIn(%.40q) = %d problems, want %d", tc.header, len(got), tc.want)
		}
	}
}

// FuzzProblemsIn: any header decodes to at most flow.MaxProblems problems,
// none nil, or to none, without a panic.
func FuzzProblemsIn(f *testing.F) {
	f.Add(`[{"field":"runtime","msg":"unknown"},null]`)
	f.Add(`[{"field":"]","line":-1}]`)
	f.Fuzz(func(t *testing.T, h string) {
		ps := problemsIn(h)
		if len(ps) > flow.MaxProblems || slices.Contains(ps, nil) {
			t.Fatalf("problemsIn(%q) = %v", h, ps)
		}
	})
}

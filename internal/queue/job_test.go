package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
)

func newJob(flowID, task string, n int, pool, runtime string) *Job {
	return &Job{
		Attempt: drovertype.AttemptID(flowID, task, n), Flow: flowID, Task: task, N: n,
		Pool: pool, Runtime: runtime,
		Repo: "https://example.com/r.git", Base: "main", Branch: drovertype.AttemptBranch(flowID, task, n),
		Prompt: "do it",
	}
}

func publishJob(t testing.TB, js jetstream.JetStream, j *Job) {
	t.Helper()
	if err := PublishJob(testCtx(t), js, j); err != nil {
		t.Fatalf("PublishJob %s: %v", j.Attempt, err)
	}
}

func attemptConsumer(t testing.TB, js jetstream.JetStream, pool, runtime string, ackWait time.Duration) jetstream.Consumer {
	t.Helper()
	c, err := EnsureAttemptConsumer(testCtx(t), js, pool, runtime, ConsumerOptions{AckWait: ackWait})
	if err != nil {
		t.Fatalf("EnsureAttemptConsumer %s/%s: %v", pool, runtime, err)
	}
	return c
}

// next waits up to wait for one job.
func next(t testing.TB, c jetstream.Consumer, wait time.Duration) jetstream.Msg {
	t.Helper()
	m, err := c.Next(jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatalf("no job within %s: %v", wait, err)
	}
	return m
}

// expectNone asserts that nothing is delivered for the whole of wait.
func expectNone(t testing.TB, c jetstream.Consumer, wait time.Duration, why string) {
	t.Helper()
	b, err := c.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	for m := range b.Messages() {
		md, _ := m.Metadata()
		t.Fatalf("%s, but got %s (delivery %d)", why, m.Data(), md.NumDelivered)
	}
	if err := b.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		t.Fatalf("fetch: %v", err)
	}
}

func attemptOf(t testing.TB, m jetstream.Msg) string {
	t.Helper()
	j, err := DecodeJob(m.Data())
	if err != nil {
		t.Fatalf("delivered job does not decode: %v", err)
	}
	return j.Attempt
}

func TestPublishJobDedup(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)

	j := newJob("f1", "t1", 1, "default", "claude")
	publishJob(t, js, j)
	publishJob(t, js, j) // the controller re-decides after a crash
	if n := streamMsgs(t, js, AttemptsStream); n != 1 {
		t.Fatalf("same attempt published twice: %d jobs queued, want 1", n)
	}
	publishJob(t, js, newJob("f1", "t1", 2, "default", "claude"))
	if n := streamMsgs(t, js, AttemptsStream); n != 2 {
		t.Fatalf("two attempts: %d jobs queued, want 2", n)
	}

	m := getMsg(t, js, AttemptsStream, 1)
	if m.Subject != "drover.attempts.default.claude" {
		t.Errorf("subject %q, want drover.attempts.default.claude", m.Subject)
	}
	back, err := DecodeJob(m.Data)
	if err != nil {
		t.Fatalf("queued job does not decode: %v", err)
	}
	if back.V != JobVersion || !reflect.DeepEqual(back, j) {
		t.Errorf("queued job %+v, want %+v", back, j)
	}

	// Once a worker has acked the job (removing it from the work queue), a
	// republish inside the dedup window still does not queue it again.
	c := attemptConsumer(t, js, "default", "claude", 0)
	for range 2 {
		if err := next(t, c, 5*time.Second).DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	publishJob(t, js, j)
	if n := streamMsgs(t, js, AttemptsStream); n != 0 {
		t.Errorf("republishing an acked attempt queued it again (%d jobs)", n)
	}
}

func TestAttemptConsumerReceivesOnlyItsSubject(t *testing.T) {
	t.Parallel()
	_, js := setup(t)

	// Pool and runtime ids may contain '-', so these pairs must not share a
	// consumer.
	pairs := [][2]string{
		{"default", "claude"}, {"default", "codex"}, {"gpu", "claude"},
		{"gpu", "large-claude"}, {"gpu-large", "claude"},
	}
	want := map[[2]string][]string{}
	for i, p := range pairs {
		for n := 1; n <= 2; n++ {
			j := newJob(fmt.Sprintf("f%d", i), "t", n, p[0], p[1])
			publishJob(t, js, j)
			want[p] = append(want[p], j.Attempt)
		}
	}
	cons := map[[2]string]jetstream.Consumer{}
	for _, p := range pairs {
		cons[p] = attemptConsumer(t, js, p[0], p[1], 0)
	}
	for _, p := range pairs {
		b, err := cons[p].FetchNoWait(10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for m := range b.Messages() {
			if m.Subject() != AttemptSubject(p[0], p[1]) {
				t.Errorf("%v received a job on %s", p, m.Subject())
			}
			got = append(got, attemptOf(t, m))
			if err := m.DoubleAck(testCtx(t)); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(got, want[p]) {
			t.Errorf("consumer %v received %v, want %v", p, got, want[p])
		}
	}
	if n := streamMsgs(t, js, AttemptsStream); n != 0 {
		t.Errorf("%d jobs left after every consumer acked its own", n)
	}
}

func TestAttemptConsumerNamesAreUnique(t *testing.T) {
	ids := []string{"a", "b", "a-b", "b-a", "a-b-c", "c", "b-c"}
	seen := map[string][2]string{}
	for _, p := range ids {
		for _, r := range ids {
			name := AttemptConsumerName(p, r)
			if prev, dup := seen[name]; dup {
				t.Errorf("pool %q runtime %q and pool %q runtime %q share consumer %q", prev[0], prev[1], p, r, name)
			}
			seen[name] = [2]string{p, r}
			if strings.ContainsAny(name, ". *>/\\") {
				t.Errorf("consumer name %q is not a valid durable name", name)
			}
		}
	}
}

func TestEnsureAttemptConsumerConfig(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	c := attemptConsumer(t, js, "default", "claude", 0)
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.Config
	if cfg.Durable == "" || cfg.AckPolicy != jetstream.AckExplicitPolicy || cfg.AckWait != 30*time.Second ||
		cfg.MaxDeliver != -1 || cfg.MaxAckPending != 10000 || cfg.FilterSubject != "drover.attempts.default.claude" {
		t.Errorf("defaults: %+v", cfg)
	}
	// A second worker with other options updates the same durable consumer.
	c2, err := EnsureAttemptConsumer(ctx, js, "default", "claude", ConsumerOptions{AckWait: 5 * time.Second, MaxAckPending: 3})
	if err != nil {
		t.Fatal(err)
	}
	info, err = c2.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != cfg.Durable || info.Config.AckWait != 5*time.Second || info.Config.MaxAckPending != 3 {
		t.Errorf("update: %+v", info.Config)
	}
	if _, err := js.Consumer(ctx, AttemptsStream, "nope"); !IsNotFound(err) {
		t.Errorf("IsNotFound(%v) = false", err)
	}
	if _, err := js.Stream(ctx, "NOPE"); !IsNotFound(err) {
		t.Errorf("IsNotFound(%v) = false", err)
	}
}

// shortAckWait, 1s, is the shortest queue.ack_wait the configuration
// accepts.
const shortAckWait = time.Second

func TestJobRedeliveredAfterAckWait(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	c := attemptConsumer(t, js, "default", "claude", shortAckWait)
	publishJob(t, js, newJob("f1", "t1", 1, "default", "claude"))

	m1 := next(t, c, 5*time.Second)
	delivered := time.Now()
	// The worker died: no ack, no heartbeat.
	m2 := next(t, c, 5*time.Second)
	if waited := time.Since(delivered); waited < shortAckWait*8/10 {
		t.Errorf("redelivered after %s, before AckWait %s", waited, shortAckWait)
	}
	md1, _ := m1.Metadata()
	md2, err := m2.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if md2.Sequence.Stream != md1.Sequence.Stream || md2.NumDelivered != 2 {
		t.Errorf("redelivery: stream seq %d delivery %d, want seq %d delivery 2", md2.Sequence.Stream, md2.NumDelivered, md1.Sequence.Stream)
	}
	if err := m2.DoubleAck(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestInProgressPreventsRedelivery(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	c := attemptConsumer(t, js, "default", "claude", shortAckWait)
	publishJob(t, js, newJob("f1", "t1", 1, "default", "claude"))

	m := next(t, c, 5*time.Second)
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		tick := time.NewTicker(shortAckWait / 4)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- nil
				return
			case <-tick.C:
				if err := m.InProgress(); err != nil {
					done <- err
					return
				}
			}
		}
	}()
	// Heartbeating for well over two AckWaits keeps the job with its worker.
	expectNone(t, c, 5*shortAckWait/2, "a heartbeated job must not be redelivered")
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("InProgress: %v", err)
	}
	// Once the heartbeats stop, the job does come back: the heartbeats were
	// what held it.
	m2 := next(t, c, 5*time.Second)
	if md, _ := m2.Metadata(); md.NumDelivered != 2 {
		t.Errorf("delivery %d, want 2", md.NumDelivered)
	}
	if err := m2.DoubleAck(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestTermNeverRedelivered(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	c := attemptConsumer(t, js, "default", "claude", shortAckWait)
	poison := []byte(`{"v":1,"attempt":"nonsense"}`)
	if _, err := js.Publish(ctx, AttemptSubject("default", "claude"), poison); err != nil {
		t.Fatal(err)
	}
	m := next(t, c, 5*time.Second)
	if !bytes.Equal(m.Data(), poison) {
		t.Fatalf("got %s", m.Data())
	}
	if err := m.TermWithReason("poison"); err != nil {
		t.Fatal(err)
	}
	expectNone(t, c, 5*shortAckWait/2, "a terminated job must never be redelivered")
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.NumPending != 0 || info.NumRedelivered != 0 {
		t.Errorf("after Term: pending %d, ack pending %d, redelivered %d", info.NumPending, info.NumAckPending, info.NumRedelivered)
	}
}

func TestAckRemovesJobFromWorkQueue(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	c := attemptConsumer(t, js, "default", "claude", 0)
	publishJob(t, js, newJob("f1", "t1", 1, "default", "claude"))
	publishJob(t, js, newJob("f1", "t2", 1, "default", "claude"))
	if n := streamMsgs(t, js, AttemptsStream); n != 2 {
		t.Fatalf("%d jobs queued, want 2", n)
	}
	m := next(t, c, 5*time.Second)
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	// DoubleAck returns once the server processed the ack; on a work queue
	// that removes the message.
	info := streamInfo(t, js, AttemptsStream)
	if info.State.Msgs != 1 {
		t.Fatalf("%d jobs left after one ack, want 1", info.State.Msgs)
	}
	md, _ := m.Metadata()
	s, err := js.Stream(ctx, AttemptsStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetMsg(ctx, md.Sequence.Stream); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Errorf("acked job still stored: %v", err)
	}
}

func validJobJSON(t testing.TB) map[string]any {
	t.Helper()
	j := newJob("flow-1", "task-a", 3, "gpu", "claude-code")
	j.V = JobVersion
	j.Timeout = flow.Duration(90 * time.Second)
	j.Merge = []event.DepResult{{Task: "dep", Branch: "drover/flow-1/dep/1", Commit: "abc"}}
	raw, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDecodeJob(t *testing.T) {
	t.Parallel()
	with := func(edit func(m map[string]any)) []byte {
		m := validJobJSON(t)
		edit(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	set := func(k string, v any) []byte { return with(func(m map[string]any) { m[k] = v }) }
	// setID changes an id and keeps the attempt id consistent with it, so
	// only the id itself can be what is refused.
	setID := func(k, v string) []byte {
		return with(func(m map[string]any) {
			m[k] = v
			m["attempt"] = drovertype.AttemptID(m["flow"].(string), m["task"].(string), int(m["n"].(float64)))
			m["branch"] = drovertype.AttemptBranch(m["flow"].(string), m["task"].(string), int(m["n"].(float64)))
			m["merge"] = []map[string]any{{"task": "dep", "branch": drovertype.AttemptBranch(m["flow"].(string), "dep", 1), "commit": "abc"}}
		})
	}

	oversized := with(func(m map[string]any) { m["prompt"] = strings.Repeat("p", MaxJobSize) })

	tests := []struct {
		name string
		raw  []byte
		ok   bool
	}{
		{"valid", with(func(map[string]any) {}), true},
		{"valid minimal", []byte(`{"v":1,"attempt":"f_t_1","flow":"f","task":"t","n":1,"pool":"p","runtime":"r","repo":"/srv/x","base":"main","branch":"drover/f/t/1"}`), true},
		{"valid integration", []byte(`{"v":1,"kind":"integrate","attempt":"f__integrate_2","flow":"f","n":2,"pool":"p","runtime":"r","repo":"/srv/x","base":"main","branch":"drover/f/integration-2","merge":[{"task":"t","branch":"drover/f/t/1"}]}`), true},
		// A later build of a published flow pushes to the pull request's
		// branch, an earlier integration branch of its own; never a later
		// one, nor another flow's.
		{"integration on its pull request's branch", []byte(`{"v":1,"kind":"integrate","attempt":"f__integrate_3","flow":"f","n":3,"pool":"p","runtime":"r","repo":"/srv/x","base":"drover/f/integration","branch":"drover/f/integration"}`), true},
		{"integration on a later build's branch", []byte(`{"v":1,"kind":"integrate","attempt":"f__integrate_2","flow":"f","n":2,"pool":"p","runtime":"r","repo":"/srv/x","base":"main","branch":"drover/f/integration-3"}`), false},
		{"integration on another flow's branch", []byte(`{"v":1,"kind":"integrate","attempt":"f__integrate_2","flow":"f","n":2,"pool":"p","runtime":"r","repo":"/srv/x","base":"main","branch":"drover/g/integration"}`), false},
		// What reaches git: the repo, the base, the branch pushed, the
		// branches merged, the scope.
		{"ext transport", set("repo", "ext::sh -c touch% /tmp/pwned"), false},
		{"fd transport", set("repo", "fd::3"), false},
		{"upload-pack option", set("repo", "--upload-pack=touch /tmp/pwned"), false},
		{"unknown scheme", set("repo", "evil://host/r"), false},
		{"ssh host option", set("repo", "ssh://-oProxyCommand=x/r"), false},
		{"base option", set("base", "--upload-pack=x"), false},
		{"base with space", set("base", "main x"), false},
		{"branch main", set("branch", "main"), false},
		{"branch of another attempt", set("branch", drovertype.AttemptBranch("flow-1", "task-a", 2)), false},
		{"branch option", set("branch", "--force"), false},
		{"integration branch on a task", set("branch", drovertype.IntegrationBranch("flow-1", 3)), false},
		{"merge main", set("merge", []map[string]any{{"task": "dep", "branch": "main"}}), false},
		{"merge another flow", set("merge", []map[string]any{{"task": "dep", "branch": "drover/flow-2/dep/1"}}), false},
		{"merge path escape", set("merge", []map[string]any{{"task": "dep", "branch": "drover/flow-1/../x/1"}}), false},
		{"merge n zero", set("merge", []map[string]any{{"task": "dep", "branch": "drover/flow-1/dep/01"}}), false},
		{"scope escape", set("scope", map[string]any{"allow": []string{"../**"}}), false},
		{"scope absolute", set("scope", map[string]any{"deny": []string{"/etc/**"}}), false},
		// What reaches the CLI's argv after its model flag.
		{"a model", set("model", "claude-sonnet-4-5"), true},
		{"model option", set("model", "--yolo"), false},
		{"review model option", set("review", map[string]any{"runtime": "demo", "model": "-x"}), false},
		{"model with a newline", set("model", "a\nb"), false},
		{"valid 63-byte ids", setID("flow", strings.Repeat("f", 63)), true},
		{"bad json", []byte(`{"v":1,`), false},
		{"not an object", []byte(`[1,2]`), false},
		{"empty", nil, false},
		{"wrong type", set("n", "3"), false},
		{"bad timeout", set("timeout", "-5s"), false},
		{"version 0", set("v", 0), false},
		{"version 2", set("v", 2), false},
		{"no version", with(func(m map[string]any) { delete(m, "v") }), false},
		{"attempt of another task", set("attempt", drovertype.AttemptID("flow-1", "task-b", 3)), false},
		{"attempt of another n", set("attempt", drovertype.AttemptID("flow-1", "task-a", 4)), false},
		{"attempt of another flow", set("attempt", drovertype.AttemptID("flow-2", "task-a", 3)), false},
		{"empty attempt", set("attempt", ""), false},
		{"n zero", with(func(m map[string]any) { m["n"] = 0; m["attempt"] = "flow-1_task-a_0" }), false},
		{"n negative", with(func(m map[string]any) { m["n"] = -1; m["attempt"] = "flow-1_task-a_-1" }), false},
		{"missing repo", set("repo", ""), false},
		{"missing base", set("base", ""), false},
		{"missing branch", with(func(m map[string]any) { delete(m, "branch") }), false},
		{"oversized", oversized, false},
		{"64-byte flow id", setID("flow", strings.Repeat("f", 64)), false},
	}
	for _, field := range []string{"flow", "task", "pool", "runtime"} {
		for _, bad := range []string{"", "a.b", "a/b", "..", "../x", "a b", " a", "a_b", "-a", "a*", "a>", "é", "a\x00"} {
			tests = append(tests, struct {
				name string
				raw  []byte
				ok   bool
			}{fmt.Sprintf("%s %q", field, bad), setID(field, bad), false})
		}
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := DecodeJob(tc.raw)
			if tc.ok {
				if err != nil {
					t.Fatalf("DecodeJob: %v", err)
				}
				if j.Kind == drovertype.JobAttempt && j.Attempt != drovertype.AttemptID(j.Flow, j.Task, j.N) {
					t.Errorf("accepted inconsistent attempt %+v", j)
				}
				return
			}
			if err == nil {
				t.Fatalf("DecodeJob accepted %.200s as %+v", tc.raw, j)
			}
			if !errors.Is(err, ErrBadJob) {
				t.Errorf("error %v does not wrap ErrBadJob", err)
			}
			if j != nil {
				t.Errorf("a job returned with an error")
			}
		})
	}

	// The valid fixture decodes to exactly what was encoded.
	j, err := DecodeJob(with(func(map[string]any) {}))
	if err != nil {
		t.Fatal(err)
	}
	want := newJob("flow-1", "task-a", 3, "gpu", "claude-code")
	want.V = JobVersion
	want.Timeout = flow.Duration(90 * time.Second)
	want.Merge = []event.DepResult{{Task: "dep", Branch: "drover/flow-1/dep/1", Commit: "abc"}}
	if !reflect.DeepEqual(j, want) {
		t.Errorf("decoded %+v, want %+v", j, want)
	}
}

// FuzzDecodeJob checks that DecodeJob never panics, that every refusal wraps
// ErrBadJob, and that every accepted job is safe to route (its ids are
// subject tokens) and survives an encode/decode round trip unchanged.
func FuzzDecodeJob(f *testing.F) {
	good, _ := json.Marshal(newJob("f", "t", 1, "p", "r"))
	f.Add(good)
	f.Add([]byte(`{"v":1,"attempt":"f_t_1","flow":"f","task":"t","n":1,"pool":"p","runtime":"r","repo":"x","base":"main","branch":"b","timeout":"1m","merge":[]}`))
	f.Add([]byte(`{"v":1,"attempt":"f_t_1","flow":"f","task":"t","n":1,"pool":"p","runtime":"r","repo":"x","base":"main","branch":"b","timeout":null,"merge":null,"Flow":"f"}`))
	f.Add([]byte(`{"v":1,"attempt":"f_t_1","flow":"f","task":"t","n":1,"pool":"p","runtime":"r","repo":"ext::sh","base":"main","branch":"drover/f/t/1","merge":[{"task":"d","branch":"drover/f/d/1"}]}`))
	f.Add([]byte(`{"v":1,"attempt":"a.b_t_1","flow":"a.b","task":"t","n":1,"pool":"p","runtime":"r","repo":"x","base":"m","branch":"b"}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"v":1,"n":1e3}`))

	f.Fuzz(func(t *testing.T, raw []byte) {
		j, err := DecodeJob(raw)
		if err != nil {
			if !errors.Is(err, ErrBadJob) || j != nil {
				t.Fatalf("refusal %v (job %v) must wrap ErrBadJob and return no job", err, j)
			}
			return
		}
		for _, id := range []string{j.Flow, j.Task, j.Pool, j.Runtime} {
			if drovertype.ValidID(id) != nil || strings.ContainsAny(id, ".*> _/") {
				t.Fatalf("accepted unsafe id %q", id)
			}
		}
		if j.V != JobVersion || j.N < 1 || j.Attempt != drovertype.AttemptID(j.Flow, j.Task, j.N) || j.Repo == "" || j.Base == "" || j.Branch == "" {
			t.Fatalf("accepted invalid job %+v", j)
		}
		// What reaches git cannot be an option, a remote helper or a
		// branch other than the attempt's own.
		if flow.ValidRepo(j.Repo) != nil || strings.HasPrefix(j.Base, "-") || j.Branch != drovertype.AttemptBranch(j.Flow, j.Task, j.N) {
			t.Fatalf("accepted a job git would misread: %+v", j)
		}
		for _, m := range j.Merge {
			if !strings.HasPrefix(m.Branch, "drover/"+j.Flow+"/") || strings.Contains(m.Branch, "..") {
				t.Fatalf("accepted merge branch %q", m.Branch)
			}
		}
		enc, err := json.Marshal(j)
		if err != nil {
			t.Fatalf("encode accepted job: %v", err)
		}
		back, err := DecodeJob(enc)
		if err != nil {
			t.Fatalf("re-encoded job %s is refused: %v", enc, err)
		}
		// encoding/json folds an empty merge list to an omitted one.
		if len(j.Merge) == 0 {
			j.Merge = nil
		}
		if !reflect.DeepEqual(back, j) {
			t.Fatalf("round trip changed the job:\n got %+v\nwant %+v", back, j)
		}
	})
}

// TestAttemptConsumerHoldsAFleetOfFetches: a pool of more workers than
// JetStream's default of 512 waiting fetches has every one of them wait
// for a job; beyond the limit JetStream drops a fetch without a word.
func TestAttemptConsumerHoldsAFleetOfFetches(t *testing.T) {
	t.Parallel()
	ns, js := setup(t)
	c := attemptConsumer(t, js, "default", "claude", 0)
	const fleet = 600
	nc, _ := connect(t, ns)
	cons, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := cons.Consumer(testCtx(t), AttemptsStream, AttemptConsumerName("default", "claude"))
	if err != nil {
		t.Fatal(err)
	}
	var results []jetstream.MessageBatch
	for range fleet {
		b, err := pc.Fetch(1, jetstream.FetchMaxWait(15*time.Second), jetstream.FetchHeartbeat(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Info(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if info.NumWaiting >= fleet {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d fetches waiting, want %d (max_waiting %d)", info.NumWaiting, fleet, info.Config.MaxWaiting)
		}
		time.Sleep(20 * time.Millisecond)
	}
	nc.Close() // the fetches end with their connection
	for _, b := range results {
		for range b.Messages() {
		}
	}
}

// TestAttemptConsumerKeepsItsMaxWaiting: JetStream cannot change a
// consumer's max_waiting, so one made before the limit was raised keeps
// its own, and workers still start.
func TestAttemptConsumerKeepsItsMaxWaiting(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	name := AttemptConsumerName("default", "claude")
	if _, err := js.CreateConsumer(ctx, AttemptsStream, jetstream.ConsumerConfig{
		Durable: name, FilterSubject: AttemptSubject("default", "claude"), AckPolicy: jetstream.AckExplicitPolicy,
	}); err != nil {
		t.Fatal(err)
	}
	c, err := EnsureAttemptConsumer(ctx, js, "default", "claude", ConsumerOptions{})
	if err != nil {
		t.Fatalf("ensure over an older consumer: %v", err)
	}
	if info, err := c.Info(ctx); err != nil || info.Config.MaxWaiting != 512 || info.Config.MaxAckPending != 10000 {
		t.Errorf("kept max_waiting 512 and updated the rest? %+v, %v", info.Config, err)
	}
	fresh := attemptConsumer(t, js, "default", "codex", 0)
	if info, err := fresh.Info(ctx); err != nil || info.Config.MaxWaiting != 10000 {
		t.Errorf("a new consumer: max_waiting %d, %v; want 10000", info.Config.MaxWaiting, err)
	}
}

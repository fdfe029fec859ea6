package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/forge"
	"github.com/drover-dev/drover/internal/forge/forgetest"
)

const (
	testToken  = "ghp-test-token-0123456789"
	testSecret = "hook-secret-0123456789"
	testHead   = "drover/f-1/integration"
)

// forgeWorld is a forge runner over an in-memory projection: what it
// records is folded at once, as the controller folds what it publishes.
type forgeWorld struct {
	t    *testing.T
	mu   sync.Mutex
	st   *projection.State
	seq  uint64
	evs  []*event.Event
	now  time.Time
	fake *forgetest.Fake
	r    *forgeRunner
}

func newForgeWorld(t *testing.T, kind forge.Kind, repo string) *forgeWorld {
	t.Helper()
	w := &forgeWorld{t: t, st: projection.NewState(), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	w.fake = forgetest.New(t, kind, repo, testToken)
	t.Setenv("TEST_FORGE_TOKEN", testToken)
	t.Setenv("TEST_FORGE_SECRET", testSecret)
	w.r = w.runner(&config.Config{Forges: map[string]config.Forge{"gh": {Type: string(kind), BaseURL: w.fake.URL,
		TokenEnv: "TEST_FORGE_TOKEN", WebhookSecretEnv: "TEST_FORGE_SECRET"}}})
	return w
}

// runner is a new runner over the world, as after a controller restart.
func (w *forgeWorld) runner(cfg *config.Config) *forgeRunner {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return newForges(cfg, log, func() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.now },
		func(fn func(st *projection.State)) { w.mu.Lock(); defer w.mu.Unlock(); fn(w.st) },
		func(_ context.Context, ev *event.Event) error {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.seq++
			if err := w.st.Apply(w.seq, ev); err != nil {
				w.t.Errorf("the runner recorded poison: %v", err)
			}
			w.evs = append(w.evs, ev)
			return nil
		})
}

// ended is a flow that ended with its integration built and its first
// publish request waiting.
func (w *forgeWorld) ended(repo string, iterate *flow.IterateSpec) {
	w.mu.Lock()
	defer w.mu.Unlock()
	req := event.PullRequestRequestedData{N: 1, Forge: "gh", Repo: repo, Head: testHead, Title: "f", Body: "the body",
		Labels: []string{"drover"}}
	w.st.Flows["f-1"] = &projection.Flow{ID: "f-1", State: drovertype.FlowSucceeded,
		Publish:     &flow.Publish{PullRequest: &flow.PullRequestSpec{Forge: "gh", Repo: repo}, Iterate: iterate},
		Integration: &projection.Integration{N: 1, State: drovertype.IntegrationSucceeded, Branch: testHead, Commit: "i1"},
		PR:          &projection.PullRequest{Forge: "gh", Repo: repo, Head: testHead, Requests: 1, Pending: &req}}
}

func (w *forgeWorld) pr() *projection.PullRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	pr := *w.st.Flows["f-1"].PR
	return &pr
}

func (w *forgeWorld) recorded() []*event.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*event.Event(nil), w.evs...)
}

func (w *forgeWorld) advance(d time.Duration) {
	w.mu.Lock()
	w.now = w.now.Add(d)
	w.mu.Unlock()
}

// TestForgePublish: a waiting request opens the pull request; a
// controller that died before recording the answer finds it by its head
// and updates it rather than opening another.
func TestForgePublish(t *testing.T) {
	for _, k := range forge.Kinds {
		t.Run(string(k), func(t *testing.T) {
			repo := "acme/app"
			w := newForgeWorld(t, k, repo)
			w.fake.SetHead(testHead, "c0ffee")
			w.fake.SetLabels("drover")
			w.ended(repo, nil)
			w.r.step(context.Background())
			pr := w.pr()
			if pr.Number != 1 || pr.State != "open" || pr.Pending != nil || pr.Base != "main" || pr.HeadSHA != "c0ffee" {
				t.Fatalf("after publishing: %+v", pr)
			}
			if prs := w.fake.PRs(); len(prs) != 1 || prs[0].Body != "the body" || len(prs[0].Labels) != 1 {
				t.Fatalf("the forge holds %+v", prs)
			}
			// The answer is lost: the request waits again, for a new
			// controller.
			w.mu.Lock()
			req := event.PullRequestRequestedData{N: 2, Forge: "gh", Repo: repo, Head: testHead, Title: "f", Body: "the body, again",
				Comment: "round 1 done"}
			w.st.Flows["f-1"].PR.Requests, w.st.Flows["f-1"].PR.Pending = 2, &req
			w.mu.Unlock()
			for range 2 { // and a second one, that records it
				w.r = w.runner(w.r.cfg)
				w.r.step(context.Background())
			}
			prs := w.fake.PRs()
			if len(prs) != 1 || prs[0].Body != "the body, again" || len(prs[0].Comments) != 1 || !strings.HasPrefix(prs[0].Comments[0], "round 1 done") {
				t.Fatalf("after publishing again: %+v", prs)
			}
			if pr := w.pr(); pr.Requests != 2 || pr.Pending != nil || pr.Number != 1 {
				t.Fatalf("the second request: %+v", pr)
			}
		})
	}
}

// TestForgePublishRefused: a token the forge refuses, or none at all, ends
// the publish with AUTH_FAILED and a message naming the variable, never
// the token; the flow stays succeeded. A forge that does not answer is
// asked again later and nothing is recorded meanwhile.
func TestForgePublishRefused(t *testing.T) {
	w := newForgeWorld(t, forge.GitHub, "acme/app")
	w.ended("acme/app", nil)
	t.Setenv("TEST_FORGE_TOKEN", "wrong-token-0123456789")
	w.r = w.runner(w.r.cfg)
	w.r.step(context.Background())
	pr := w.pr()
	if pr.Error == nil || pr.Error.Class != drovertype.ClassAuthFailed || !strings.Contains(pr.Error.Message, "$TEST_FORGE_TOKEN") ||
		strings.Contains(pr.Error.Message, "wrong-token") || pr.Number != 0 || pr.Pending != nil {
		t.Fatalf("a refused token: %+v %+v", pr, pr.Error)
	}
	if w.st.Flows["f-1"].State != drovertype.FlowSucceeded || len(w.fake.PRs()) != 0 {
		t.Fatal("the flow or the forge changed")
	}

	w = newForgeWorld(t, forge.GitLab, "group/app")
	w.ended("group/app", nil)
	t.Setenv("TEST_FORGE_TOKEN", "")
	w.r = w.runner(w.r.cfg)
	w.r.step(context.Background())
	if pr := w.pr(); pr.Error == nil || pr.Error.Class != drovertype.ClassAuthFailed || !strings.Contains(pr.Error.Message, "$TEST_FORGE_TOKEN is not set") {
		t.Fatalf("no token: %+v", pr.Error)
	}

	w = newForgeWorld(t, forge.Gitea, "acme/app")
	w.ended("acme/app", nil)
	cfg := *w.r.cfg
	cfg.Forges = map[string]config.Forge{"gh": {Type: "gitea", BaseURL: "http://127.0.0.1:1/", TokenEnv: "TEST_FORGE_TOKEN"}}
	w.r = w.runner(&cfg)
	w.r.step(context.Background())
	if pr := w.pr(); pr.Pending == nil || pr.Error != nil || len(w.recorded()) != 0 {
		t.Fatalf("a forge that does not answer: %+v", pr)
	}
	w.r.step(context.Background()) // held back: not asked again at once
	if n := len(w.recorded()); n != 0 {
		t.Fatalf("%d events", n)
	}
}

// TestForgeFollow: an open pull request is read; what changed is
// observed, each review that requests changes and each failed check of
// the head is recorded once, however often the pull request is read.
func TestForgeFollow(t *testing.T) {
	for _, k := range forge.Kinds {
		t.Run(string(k), func(t *testing.T) {
			repo := "acme/app"
			w := newForgeWorld(t, k, repo)
			w.fake.SetHead(testHead, "c0ffee0001")
			w.ended(repo, &flow.IterateSpec{On: []string{flow.IterateChangesRequested, flow.IterateChecksFailed}, MaxRounds: 2,
				PollInterval: flow.Duration(30 * time.Second)})
			ctx := context.Background()
			w.r.step(ctx) // publishes, and reads it at once
			w.fake.AddReview(1, forge.Review{Author: "dave", State: forge.ChangesRequested, Body: "not yet",
				Comments: []forge.Comment{{Path: "x.go", Line: 42, Body: "handle the error " + testToken, Author: "dave"}}})
			w.fake.SetChecks("c0ffee0001", forge.Check{Name: "test", Status: forge.CheckFailed, Summary: "1 failed", LogTail: "--- FAIL: TestX"},
				forge.Check{Name: "lint", Status: forge.CheckPassed})
			w.advance(time.Minute)
			w.r.step(ctx)
			pr := w.pr()
			if pr.Checks == nil || pr.Checks.Failed != 1 || pr.Checks.Passed != 1 || len(pr.Feedback) != 2 {
				t.Fatalf("after reading: %+v checks %+v", pr, pr.Checks)
			}
			for _, fb := range pr.Feedback {
				if fb.Review != nil && (len(fb.Review.Comments) != 1 || fb.Review.Comments[0].Path != "x.go" || fb.Review.Comments[0].Line != 42 ||
					strings.Contains(fb.Review.Comments[0].Body, testToken)) {
					t.Fatalf("review feedback %+v", fb.Review)
				}
			}
			before := len(w.recorded())
			for range 3 {
				w.advance(time.Hour)
				w.r.step(ctx)
			}
			if n := len(w.recorded()); n != before {
				t.Fatalf("reading again recorded %d more events", n-before)
			}
			// Merged on the forge: recorded once, then no longer followed.
			w.fake.SetState(1, forge.Merged)
			w.advance(time.Hour)
			w.r.step(ctx)
			if pr := w.pr(); pr.State != string(forge.Merged) {
				t.Fatalf("after the merge the pull request is %q", pr.State)
			}
			before = len(w.recorded())
			for range 3 {
				w.advance(time.Hour)
				w.r.step(ctx)
			}
			if n := len(w.recorded()); n != before {
				t.Fatalf("a merged pull request is still followed: %d more events", n-before)
			}
		})
	}
}

// TestForgeBackoff: while nothing changes the pull request is read half as
// often each time, up to 16 intervals; a webhook brings the next read
// forward.
func TestForgeBackoff(t *testing.T) {
	w := newForgeWorld(t, forge.GitHub, "acme/app")
	w.ended("acme/app", &flow.IterateSpec{On: []string{flow.IterateChangesRequested}, MaxRounds: 1, PollInterval: flow.Duration(10 * time.Second)})
	ctx := context.Background()
	w.r.step(ctx)
	reads := func() int {
		n := 0
		for _, c := range w.fake.Calls() {
			if strings.HasSuffix(c, "/pulls/1") {
				n++
			}
		}
		return n
	}
	var gaps []int
	last, since := reads(), 0
	for range 400 {
		w.advance(time.Second)
		w.r.step(ctx)
		since++
		if n := reads(); n != last {
			gaps, last, since = append(gaps, since), n, 0
		}
	}
	// Read at once once published, then after its interval (it changed:
	// the first observation), then twice as long each time, up to 16
	// intervals.
	want := []int{1, 10, 20, 40, 80, 160, 160}
	if len(gaps) < len(want)-1 || !slices.Equal(gaps[:len(want)-1], want[:len(want)-1]) {
		t.Fatalf("seconds between reads: %v; want %v", gaps, want)
	}
	w.r.wakeFlow("f-1")
	w.r.step(ctx)
	if reads() != last+1 {
		t.Fatal("a webhook did not bring the next read forward")
	}
}

func post(t *testing.T, srv *httptest.Server, path string, h forgetest.Webhook) int {
	t.Helper()
	code, err := h.Post(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// TestForgeWebhooks: a delivery signed with the forge's secret about a
// followed pull request makes it read at once; unsigned, wrongly signed,
// another repository's and replayed deliveries are refused.
func TestForgeWebhooks(t *testing.T) {
	for _, k := range forge.Kinds {
		t.Run(string(k), func(t *testing.T) {
			repo := "acme/app"
			w := newForgeWorld(t, k, repo)
			w.fake.SetHead(testHead, "c0ffee0002")
			w.ended(repo, &flow.IterateSpec{On: []string{flow.IterateChangesRequested}, MaxRounds: 1, PollInterval: flow.Duration(time.Hour)})
			ctx := context.Background()
			w.r.step(ctx) // publishes
			w.r.step(ctx) // reads it, and follows it
			srv := httptest.NewServer(w.r)
			t.Cleanup(srv.Close)
			hook := func(delivery, secret string) forgetest.Webhook {
				switch k {
				case forge.GitHub:
					return w.fake.GitHubWebhook("pull_request_review", delivery, 1, secret)
				case forge.GitLab:
					return w.fake.GitLabWebhook("Merge Request Hook", delivery, 1, secret)
				}
				return w.fake.GiteaWebhook("pull_request_review_rejected", delivery, 1, secret)
			}
			path := HookPrefix + "gh/webhook"
			if c := post(t, srv, path, hook("d-1", "")); c != http.StatusUnauthorized {
				t.Errorf("unsigned: %d", c)
			}
			if c := post(t, srv, path, hook("d-2", "not-the-secret")); c != http.StatusUnauthorized {
				t.Errorf("wrongly signed: %d", c)
			}
			if c := post(t, srv, HookPrefix+"nosuch/webhook", hook("d-3", testSecret)); c != http.StatusNotFound {
				t.Errorf("another forge: %d", c)
			}
			other := forgetest.New(t, k, "evil/app", testToken)
			other.SetHead(testHead, "bad")
			var wrong forgetest.Webhook
			switch k {
			case forge.GitHub:
				wrong = other.GitHubWebhook("pull_request_review", "d-4", 1, testSecret)
			case forge.GitLab:
				wrong = other.GitLabWebhook("Merge Request Hook", "d-4", 1, testSecret)
			default:
				wrong = other.GiteaWebhook("pull_request_review_rejected", "d-4", 1, testSecret)
			}
			if c := post(t, srv, path, wrong); c != http.StatusNotFound {
				t.Errorf("another repository's: %d", c)
			}
			// Nothing refused brought the read forward.
			w.r.mu.Lock()
			next := w.r.follows["f-1"].next
			w.r.mu.Unlock()
			if !next.After(w.now) {
				t.Fatal("a refused delivery woke the pull request")
			}
			if c := post(t, srv, path, hook("d-5", testSecret)); c != http.StatusAccepted {
				t.Fatalf("a good delivery: %d", c)
			}
			w.r.mu.Lock()
			next = w.r.follows["f-1"].next
			w.r.mu.Unlock()
			if !next.IsZero() {
				t.Fatal("a good delivery did not bring the read forward")
			}
			if c := post(t, srv, path, hook("d-5", testSecret)); c != http.StatusConflict {
				t.Errorf("a replay: %d", c)
			}
			get, _ := http.Get(srv.URL + path)
			if get.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("GET: %d", get.StatusCode)
			}
			get.Body.Close()
		})
	}
}

func TestReplays(t *testing.T) {
	now := time.Unix(0, 0)
	p := newReplays(time.Hour, 3)
	if !p.first("a", now) || p.first("a", now) {
		t.Fatal("a replay within the window")
	}
	if !p.first("a", now.Add(2*time.Hour)) {
		t.Fatal("the window did not pass")
	}
	for _, id := range []string{"b", "c", "d"} {
		p.first(id, now.Add(2*time.Hour))
	}
	if len(p.seen) > 3 {
		t.Fatalf("%d remembered, bound 3", len(p.seen))
	}
}

// TestForgeWebhookOnAStandby: a standby follows no pull request, so a
// verified delivery it receives is relayed to the leader, whose runner reads
// now; when no leader takes it, the forge is told to deliver it again (503),
// and the delivery again is taken, not refused as a replay.
func TestForgeWebhookOnAStandby(t *testing.T) {
	repo := "acme/app"
	w := newForgeWorld(t, forge.GitHub, repo)
	w.fake.SetHead(testHead, "c0ffee0002")
	w.ended(repo, &flow.IterateSpec{On: []string{flow.IterateChangesRequested}, MaxRounds: 1, PollInterval: flow.Duration(time.Hour)})
	ctx := context.Background()
	w.r.step(ctx)
	w.r.step(ctx)
	var relayed [][]string
	var down bool
	w.r.leading = func() bool { return false }
	w.r.relay = func(_ context.Context, flows []string) error {
		if down {
			return errors.New("no responders")
		}
		relayed = append(relayed, flows)
		return nil
	}
	srv := httptest.NewServer(w.r)
	t.Cleanup(srv.Close)
	path := HookPrefix + "gh/webhook"
	down = true
	if c := post(t, srv, path, w.fake.GitHubWebhook("pull_request_review", "d-1", 1, testSecret)); c != http.StatusServiceUnavailable {
		t.Fatalf("no leader: %d, want 503", c)
	}
	down = false
	if c := post(t, srv, path, w.fake.GitHubWebhook("pull_request_review", "d-1", 1, testSecret)); c != http.StatusAccepted {
		t.Fatalf("delivered again with a leader: %d, want 202", c)
	}
	if len(relayed) != 1 || len(relayed[0]) != 1 || relayed[0][0] != "f-1" {
		t.Fatalf("relayed %v, want [[f-1]]", relayed)
	}
	w.r.mu.Lock()
	next := w.r.follows["f-1"].next
	w.r.mu.Unlock()
	if next.IsZero() {
		t.Error("the standby's own runner was woken: it must not read the forge")
	}
	if c := post(t, srv, path, w.fake.GitHubWebhook("pull_request_review", "d-1", 1, testSecret)); c != http.StatusConflict {
		t.Errorf("a replay of a relayed delivery: %d, want 409", c)
	}
}

// TestForgeWakeReachesTheLeader: a standby's relay is answered by the
// leader alone, on its own subject.
func TestForgeWakeReachesTheLeader(t *testing.T) {
	h := newHarness(t)
	h.cfg.Controller.ID = "ctl-a"
	h.start(filepath.Join(t.TempDir(), "a"))
	waitCond(t, "ctl-a to lead", h.leads)
	b := h.peer("ctl-b")
	if b.leads() {
		t.Fatal("both lead")
	}
	if err := b.ctrl.relayForgeWake(context.Background(), []string{"f-1"}); err != nil {
		t.Fatalf("relay to the leader: %v", err)
	}
}

// TestDecodeForgeWake: a relayed wake names between one and maxForgeWake
// valid flow ids, and nothing else.
func TestDecodeForgeWake(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"flows":["f-1","g-2"]}`:           true,
		`{"flows":[]}`:                      false,
		`{}`:                                false,
		`{"flows":"f-1"}`:                   false,
		`{"flows":[1]}`:                     false,
		`{"flows":["../x"]}`:                false,
		`{"flows":["f-1"],"extra":1}`:       false,
		`{"flows":["f-1"],"flows":["g-2"]}`: false,
		`[`:                                 false,
	} {
		if _, err := decodeForgeWake([]byte(body)); (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%v", body, err, ok)
		}
	}
}

func FuzzDecodeForgeWake(f *testing.F) {
	f.Add([]byte(`{"flows":["f-1"]}`))
	f.Add([]byte(`{"flows":[""]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeForgeWake(body)
		if err != nil {
			return
		}
		if len(req.Flows) == 0 || len(req.Flows) > maxForgeWake {
			t.Fatalf("accepted %d flows", len(req.Flows))
		}
		for _, id := range req.Flows {
			if drovertype.ValidID(id) != nil {
				t.Fatalf("accepted flow id %q", id)
			}
		}
	})
}

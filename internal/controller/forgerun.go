package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/nats-io/nats.go/micro"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/forge"
	"github.com/drover-dev/drover/internal/forge/forges"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/redact"
)

// The forge runner carries out what the decisions about pull requests ask
// of the forges, and follows the pull requests it opened: the one place
// where the controller calls a forge. It runs beside the decision loop, in
// the process that decides (with several controllers, the leader alone,
// like publishing jobs), reads the projection, and records everything the
// forges answer as events:
//
//   - a pending pull_request_requested: look the pull request up by its
//     head branch (so a controller that died mid-publish finds the one it
//     opened rather than opening another), open or update it, comment,
//     and record pull_request_published — or retry later when the forge
//     did not answer, or record the refusal (AUTH_FAILED for a refused
//     token) when asking again cannot help;
//   - an open pull request: read it, its reviews and its head's checks
//     every poll_interval, backing off while nothing changes, at once when
//     a verified webhook says something did, and record what changed
//     (pull_request_observed) and each new review that requests changes
//     or failed check (pull_request_feedback, keyed by the forge's ids).
//
// Tokens and webhook secrets are read from the controller's environment
// once, held here, and masked in everything recorded or logged.
type forgeRunner struct {
	cfg  *config.Config
	log  *slog.Logger
	red  *redact.Redactor
	now  func() time.Time
	read func(fn func(st *projection.State))
	emit func(ctx context.Context, ev *event.Event) error
	// leading says whether this controller decides now: only the leader
	// calls the forges (nil: always, a runner of its own in tests).
	leading func() bool
	// relay hands the flows a verified webhook concerns to the leader,
	// when this controller stands by (ForgeWakeRequest).
	relay func(ctx context.Context, flows []string) error
	open  func(cfg forge.Config) (forge.Forge, error)
	wakeC chan struct{}

	mu      sync.Mutex
	clients map[string]forge.Forge // by forge name, opened at first use
	follows map[string]*follow     // by flow
	retries map[string]*follow     // publish requests that will be tried again, by flow
	replays *replays
}

// follow is when a pull request is read next, and how long after that.
type follow struct {
	next     time.Time
	interval time.Duration
}

// maxBackoff bounds how far polling backs off while nothing changes, as a
// multiple of the poll interval, and in time.
const (
	maxBackoffFactor = 16
	maxBackoff       = 30 * time.Minute
)

func newForgeRunner(c *Controller) *forgeRunner {
	var read func(fn func(st *projection.State))
	if c.store != nil {
		read = c.store.Read
	}
	r := newForges(c.cfg, c.log, func() time.Time { return c.now() }, read, func(ctx context.Context, ev *event.Event) error {
		if _, err := c.publish(ctx, ev); err != nil {
			return err
		}
		c.poke()
		return nil
	})
	r.leading = func() bool { _, err := c.leading(); return err == nil }
	r.relay = c.relayForgeWake
	return r
}

// SubjectForgeWake is where the leader takes, from a standby, the flows a
// verified webhook delivery concerns: its forge runner reads their pull
// requests at once, as it would for a delivery of its own.
const SubjectForgeWake = queue.APIPrefix + ".forge-wake"

// ForgeWakeRequest names the flows whose pull requests to read now.
type ForgeWakeRequest struct {
	Flows []string `json:"flows"`
}

// maxForgeWake bounds the flows of one wake request.
const maxForgeWake = 1000

// relayForgeWake asks the leader to read the flows' pull requests now.
func (c *Controller) relayForgeWake(ctx context.Context, flows []string) error {
	if len(flows) > maxForgeWake {
		flows = flows[:maxForgeWake]
	}
	b, err := json.Marshal(ForgeWakeRequest{Flows: flows})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	reply, err := c.js.Conn().RequestWithContext(rctx, LeaderSubject(SubjectForgeWake), b)
	if err != nil {
		return fmt.Errorf("controller: relay a webhook to the leader: %w", err)
	}
	if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
		return fmt.Errorf("controller: relay a webhook to the leader: %s %s", code, reply.Header.Get(micro.ErrorHeader))
	}
	return nil
}

// handleForgeWake wakes the forge runner for the flows a standby relayed.
func (c *Controller) handleForgeWake(ctx context.Context, r micro.Request) {
	body, err := c.requestBody(ctx, r, maxRequestSize)
	if err == nil {
		var req ForgeWakeRequest
		if req, err = decodeForgeWake(body); err == nil {
			for _, id := range req.Flows {
				c.forges.wakeFlow(id)
			}
			_ = r.Respond([]byte("{}"))
			return
		}
	}
	c.refuse(r, "forge-wake", err)
}

// decodeForgeWake reads a forge wake: {"flows": [FLOW...]}, at least one
// flow id and at most maxForgeWake.
func decodeForgeWake(body []byte) (ForgeWakeRequest, error) {
	const what = "forge-wake"
	var req ForgeWakeRequest
	m, err := members(what, body, maxRequestSize, "flows")
	if err != nil {
		return req, err
	}
	raw, ok := m["flows"]
	if !ok || raw.Kind() != '[' {
		return req, badRequest("%s request: flows: must be a list of flow ids", what)
	}
	if err := json.Unmarshal(raw, &req.Flows); err != nil {
		return req, badRequest("%s request: flows: must be a list of flow ids", what)
	}
	if len(req.Flows) == 0 || len(req.Flows) > maxForgeWake {
		return req, badRequest("%s request: flows: %d ids; between 1 and %d", what, len(req.Flows), maxForgeWake)
	}
	for _, id := range req.Flows {
		if err := drovertype.ValidID(id); err != nil {
			return req, badRequest("%s request: flows: %q: %v", what, id, err)
		}
	}
	return req, nil
}

// newForges is a forge runner reading the projection with read and
// recording events with emit.
func newForges(cfg *config.Config, log *slog.Logger, now func() time.Time, read func(fn func(st *projection.State)),
	emit func(ctx context.Context, ev *event.Event) error) *forgeRunner {
	r := &forgeRunner{
		cfg: cfg, now: now, read: read, emit: emit, open: forges.Open, wakeC: make(chan struct{}, 1),
		clients: map[string]forge.Forge{}, follows: map[string]*follow{}, retries: map[string]*follow{},
		replays: newReplays(replayWindow, maxReplays),
	}
	var secrets []string
	for _, f := range cfg.Forges {
		secrets = append(secrets, os.Getenv(f.TokenEnv))
		if f.WebhookSecretEnv != "" {
			secrets = append(secrets, os.Getenv(f.WebhookSecretEnv))
		}
	}
	r.red = redact.New(secrets...)
	r.log = slog.New(redact.Handler(log.With("component", "forges").Handler(), r.red))
	return r
}

// wake asks for a step now.
func (r *forgeRunner) wake() {
	select {
	case r.wakeC <- struct{}{}:
	default:
	}
}

// run steps every second, and when woken, until ctx ends.
func (r *forgeRunner) run(ctx context.Context) {
	if len(r.cfg.Forges) == 0 {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if r.leading == nil || r.leading() {
			r.step(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wakeC:
		}
	}
}

// step publishes what waits to be published and reads the pull requests
// whose time has come.
func (r *forgeRunner) step(ctx context.Context) {
	var pubs []publishWork
	var polls []pollWork
	now := r.now()
	r.read(func(st *projection.State) { pubs, polls = r.work(st, now) })
	for _, w := range pubs {
		if ctx.Err() != nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, forgeCallTimeout)
		r.publish(cctx, w)
		cancel()
	}
	for _, w := range polls {
		if ctx.Err() != nil {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, forgeCallTimeout)
		r.poll(cctx, w)
		cancel()
	}
}

// forgeCallTimeout bounds one publish, or one read of a pull request,
// with all the calls it makes.
const forgeCallTimeout = 2 * time.Minute

// work is what is due now: publish requests the forge has not answered,
// and the open pull requests whose poll is due, in the order of their
// flows' ids.
func (r *forgeRunner) work(st *projection.State, now time.Time) ([]publishWork, []pollWork) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id, f := range st.Flows {
		if f.PR != nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var pubs []publishWork
	var polls []pollWork
	live := map[string]bool{}
	for _, id := range ids {
		f := st.Flows[id]
		pr := f.PR
		if pr.Pending != nil {
			if w := r.retries[id]; w == nil || !now.Before(w.next) {
				pubs = append(pubs, publishWork{flow: id, req: *pr.Pending})
			}
			continue
		}
		delete(r.retries, id)
		if pr.Number == 0 || pr.State != string(forge.Open) {
			continue
		}
		live[id] = true
		fo := r.follows[id]
		if fo == nil {
			fo = &follow{next: now, interval: pollInterval(f)}
			r.follows[id] = fo
		}
		if !now.Before(fo.next) {
			polls = append(polls, pollOf(st, f))
		}
	}
	for id := range r.follows {
		if !live[id] {
			delete(r.follows, id) // closed, merged, or gone
		}
	}
	return pubs, polls
}

func pollInterval(f *projection.Flow) time.Duration {
	if it := f.Publish.Iterate; it != nil && it.PollInterval > 0 {
		return time.Duration(it.PollInterval)
	}
	return time.Duration(30 * time.Second)
}

// wakeFlow makes a flow's pull request due for a poll now, at its first
// interval again (a webhook said something changed).
func (r *forgeRunner) wakeFlow(id string) {
	r.mu.Lock()
	if fo := r.follows[id]; fo != nil {
		fo.next = time.Time{}
		fo.interval = 0
	}
	r.mu.Unlock()
	r.wake()
}

// polled sets when a pull request is read next: its interval again after a
// change, twice as long (up to the bounds) after nothing or a failure.
func (r *forgeRunner) polled(id string, base time.Duration, changed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fo := r.follows[id]
	if fo == nil {
		return
	}
	switch {
	case changed || fo.interval == 0:
		fo.interval = base
	default:
		fo.interval = min(2*fo.interval, maxBackoffFactor*base, max(maxBackoff, base))
	}
	fo.next = r.now().Add(fo.interval)
}

// retryLater holds a publish request back after the forge did not answer.
func (r *forgeRunner) retryLater(id string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.retries[id]
	if w == nil {
		w = &follow{interval: 5 * time.Second}
		r.retries[id] = w
	} else {
		w.interval = min(2*w.interval, 10*time.Minute)
	}
	w.next = r.now().Add(w.interval)
	return w.interval
}

// client is the forge client of a configured forge, opened once. A token
// variable that is unset is a refusal: nothing will publish until the
// controller is started with it.
func (r *forgeRunner) client(name string) (forge.Forge, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[name]; ok {
		return c, nil
	}
	fc, ok := r.cfg.Forges[name]
	if !ok {
		// Configured at submission, gone from the configuration since.
		return nil, &forge.Error{Kind: forge.Kind(""), Op: "open", Status: http.StatusUnprocessableEntity,
			Err: fmt.Errorf("no forge %q is configured (forges: %v)", name, r.cfg.ForgeNames())}
	}
	token := os.Getenv(fc.TokenEnv)
	if token == "" {
		return nil, &forge.Error{Kind: fc.Kind(), Op: "open", Status: http.StatusUnauthorized,
			Err: fmt.Errorf("forges.%s.token_env: $%s is not set in the controller's environment", name, fc.TokenEnv)}
	}
	c, err := r.open(forge.Config{Kind: fc.Kind(), BaseURL: fc.BaseURL, Token: token})
	if err != nil {
		return nil, err
	}
	r.clients[name] = c
	return c, nil
}

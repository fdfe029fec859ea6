package controller

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/eventlog/store"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/queue"
)

// API subjects.
const (
	SubjectSubmit  = queue.APIPrefix + ".submit"
	SubjectStatus  = queue.APIPrefix + ".status"
	SubjectRebuild = queue.APIPrefix + ".rebuild"
)

// SubmitRequest asks the controller to accept a flow.
type SubmitRequest struct {
	Spec flow.Spec `json:"spec"`
	// Strict refuses the flow (CodeNoWorker) when no live worker serves
	// a runtime it needs, rather than accepting it with a warning.
	Strict bool `json:"strict,omitempty"`
}

// SubmitResponse names the accepted flow, and warns of what it needs that
// no live worker serves now (placement.go).
type SubmitResponse struct {
	Flow     string   `json:"flow"`
	Warnings []string `json:"warnings,omitempty"`
}

// StatusRequest asks for one flow, or a summary of all when Flow is empty.
// With a Limit, it asks for one page of the flow's tasks (statuspage.go):
// up to Limit of them after the cursor After (FLOW/TASK, a page's Next),
// those in one of States (task states, or FilterWaiting) and, when Tasks
// is set, among those ids. Without one, every task (what a client older
// than pages asks for).
type StatusRequest struct {
	Flow   string   `json:"flow,omitempty"`
	Limit  int      `json:"limit,omitempty"`
	After  string   `json:"after,omitempty"`
	States []string `json:"states,omitempty"`
	Tasks  []string `json:"tasks,omitempty"`
}

// FlowSummary is one line of `controller status`.
type FlowSummary struct {
	ID          string                       `json:"id"`
	Name        string                       `json:"name"`
	State       drovertype.FlowState         `json:"state"`
	Tasks       map[drovertype.TaskState]int `json:"tasks"`
	SubmittedAt time.Time                    `json:"submitted_at"`
	CompletedAt time.Time                    `json:"completed_at,omitzero"`
	// Spend is what the flow spent against its budget (limitsapi.go).
	Spend *SpendStatus `json:"spend,omitempty"`
}

// FlowDetail is one flow with its tasks and attempts.
type FlowDetail struct {
	Flow     *projection.Flow      `json:"flow"`
	Tasks    []*projection.Task    `json:"tasks"`
	Attempts []*projection.Attempt `json:"attempts"`
	// Spend is the flow's spend against its budget, TaskSpend each task's
	// that has spent anything or has a budget (limitsapi.go).
	Spend     *SpendStatus            `json:"spend,omitempty"`
	TaskSpend map[string]*SpendStatus `json:"task_spend,omitempty"`
	// Waiting says why each task that waits does, by task id: a cooldown
	// in its way, or no live worker serving its runtime (placement.go).
	Waiting map[string]*WaitStatus `json:"waiting,omitempty"`
	// Page is set when the request asked for a page (statuspage.go):
	// then Tasks, Attempts, TaskSpend and Waiting are the page's tasks',
	// Flow.Spec.Tasks their specs, and Flow.Order is left out; Page says
	// what the whole flow holds and where the next page starts.
	Page *TaskPage `json:"page,omitempty"`

	// raw, in a detail the controller read, holds Flow, Tasks and
	// Attempts encoded under the projection's lock (encode.go): what is
	// sent, in their place.
	raw *rawRecords
}

// StatusResponse answers a StatusRequest.
type StatusResponse struct {
	Flows   []FlowSummary `json:"flows,omitempty"`
	Detail  *FlowDetail   `json:"detail,omitempty"`
	Applied uint64        `json:"applied_seq"`
	Poisons int           `json:"poison_events,omitempty"`
	// Cooldowns are the limits holding back runtimes, models and
	// credentials fleet-wide now (limitsapi.go).
	Cooldowns []CooldownStatus `json:"cooldowns,omitempty"`
	// Unserved are the pools' runtimes no live worker serves, with why,
	// for which an attempt was queued (placement.go).
	Unserved []PlacementStatus `json:"unserved,omitempty"`
	// Controller is the controller that answered, from its own
	// projection; Leadership the latest election it has folded: who
	// leads, in which epoch, and how many stale decisions the fold has
	// ignored.
	Controller string                 `json:"controller,omitempty"`
	Leadership *projection.Leadership `json:"leadership,omitempty"`

	// whole is the whole flow a page was cut from, when the controller
	// did not page (StatusPage).
	whole *StatusResponse
}

// RebuildResponse reports whether replaying the stream gives the live state.
type RebuildResponse struct {
	Equal      bool     `json:"equal"`
	LiveSeq    uint64   `json:"live_seq"`
	RebuiltSeq uint64   `json:"rebuilt_seq"`
	Events     int      `json:"events"`
	Records    int      `json:"records"`
	Diffs      []string `json:"diffs,omitempty"`
	Millis     int64    `json:"millis"`
}

// API error codes, as micro service error codes.
const (
	CodeBadRequest = "400"
	CodeNotFound   = "404"
	CodeInternal   = "500"
	// CodeNoWorker refuses a strict submission some runtime of which no
	// live worker serves: the flow is valid, the fleet cannot run it now.
	CodeNoWorker = "412"
	// CodeUnavailable: no controller leads now (a handover), or the one
	// asked stopped leading before the request took effect. Nothing was
	// recorded: the request may be sent again.
	CodeUnavailable = "503"
)

// apiEndpoint is one verb of the operator API.
type apiEndpoint struct {
	name, subject string
	fn            func(context.Context, micro.Request)
	// write: only the leader answers it; any other controller forwards
	// it to the leader (writes.go).
	write bool
}

// endpoints is the operator API's table.
func (c *Controller) endpoints() []apiEndpoint {
	return []apiEndpoint{
		{"submit", SubjectSubmit, c.handleSubmit, true},
		{"status", SubjectStatus, c.handleStatus, false},
		{"rebuild", SubjectRebuild, c.handleRebuild, false},
		{"cancel", SubjectCancel, c.handleCancel, true},
		{"retry", SubjectRetry, c.handleRetry, true},
		{"pause", SubjectPause, c.handlePause(false), true},
		{"resume", SubjectResume, c.handlePause(true), true},
		{"resolve", SubjectResolve, c.handleResolve, false},
		{"report", SubjectReport, c.handleReport, false},
		{"budget", SubjectBudget, c.handleBudget, true},
		{"publish", SubjectPublish, c.handlePublish, true},
		{"iterate", SubjectIterate, c.handleIterate, true},
		{"forge-wake", SubjectForgeWake, c.handleForgeWake, true},
	}
}

// ServeAPI registers the operator API on nc: every controller answers the
// reads from its own projection, and the writes when it leads (else it
// forwards them to the leader); the reads are also answered on this
// controller's own subjects (ControllerSubject). Stop the returned service
// to stop.
func (c *Controller) ServeAPI(ctx context.Context, nc *nats.Conn, known func(string) bool) (micro.Service, error) {
	c.known = known
	svc, err := micro.AddService(nc, micro.Config{
		Name: "drover-controller", Version: "0.1.0", Description: "Drover operator API",
	})
	if err != nil {
		return nil, fmt.Errorf("controller: api: %w", err)
	}
	var eps []apiEndpoint
	for _, e := range c.endpoints() {
		if e.write {
			e.fn = c.writeHere(e.subject, e.fn)
		} else {
			eps = append(eps, apiEndpoint{name: "controller-" + e.name, subject: ControllerSubject(c.id, e.subject), fn: e.fn})
		}
		eps = append(eps, e)
	}
	for _, e := range eps {
		if err := svc.AddEndpoint(e.name, micro.ContextHandler(ctx, e.fn), micro.WithEndpointSubject(e.subject)); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("controller: api %s: %w", e.name, err)
		}
	}
	return svc, nil
}

func (c *Controller) handleSubmit(ctx context.Context, r micro.Request) {
	known := c.known
	body, err := c.requestBody(ctx, r, maxSpecRequestSize)
	if err != nil {
		c.refuse(r, "submit", err)
		return
	}
	spec, strict, err := decodeSubmit(body, c.flowOptions(known))
	if err != nil {
		c.refuse(r, "submit", err)
		return
	}
	data, err := Accept(c.cfg, spec)
	if err != nil {
		c.refuse(r, "submit", &requestError{msg: err.Error()})
		return
	}
	warnings := c.unservedNeeds(spec, data.Plan)
	if strict && len(warnings) > 0 {
		_ = r.Error(CodeNoWorker, "refused (--strict): "+strings.Join(warnings, "\n"), nil)
		return
	}
	id := newFlowID(spec.Name)
	evs, err := flowEvents(id, c.now(), data)
	if err != nil {
		c.refuse(r, "submit", &requestError{msg: err.Error()})
		return
	}
	// The parts of a large flow first, each stored before the next; the
	// flow_submitted that completes them last.
	for _, ev := range evs[:len(evs)-1] {
		if _, err := c.publishPatiently(ctx, ev); err != nil {
			c.writeFailed(r, err)
			return
		}
	}
	if err := c.record(ctx, evs[len(evs)-1]); err != nil {
		c.writeFailed(r, err)
		return
	}
	c.log.Info("flow submitted", "flow", id, "tasks", len(spec.Tasks), "events", len(evs), "warnings", len(warnings))
	c.respondJSON(ctx, r, SubmitResponse{Flow: id, Warnings: warnings})
}

// flowOptions are the controller's rules for a flow's runtimes and
// project, with which a flow is validated on arrival.
func (c *Controller) flowOptions(known func(string) bool) flow.Options {
	return flow.Options{
		KnownRuntime:   known,
		KnownProject:   func(name string) bool { _, ok := c.cfg.Projects[name]; return ok },
		DefaultRuntime: c.cfg.Defaults.Runtime,
	}
}

// Accept resolves a validated spec into what flow_submitted records: the
// spec with its project's repo filled in, and every task's resolution.
func Accept(cfg *config.Config, spec *flow.Spec) (event.FlowSubmittedData, error) {
	res, err := Resolve(cfg, spec)
	if err != nil {
		return event.FlowSubmittedData{}, err
	}
	s := *spec
	s.Repo = res.Repo
	return event.FlowSubmittedData{Spec: s, Plan: res.Tasks, MaxParallel: res.MaxParallel, Budget: res.Budget,
		Publish: res.Publish, RoundPlan: res.RoundPlan}, nil
}

// An operator's write waits longer for JetStream's acknowledgement than
// a publish's default 5 s, and asks again when none came: a busy server
// (a fleet's writes, each with an fsync) can take longer to store a large
// flow's part, and the submission failed although the part may well have
// been stored. Asking again is safe: the event's Nats-Msg-Id makes a
// stored one answer as a duplicate, with its sequence.
const (
	writeAckWait  = 30 * time.Second
	writeAttempts = 3
)

// publishPatiently publishes ev as publish does, each try waiting up to
// writeAckWait for the acknowledgement, up to writeAttempts tries.
func (c *Controller) publishPatiently(ctx context.Context, ev *event.Event) (uint64, error) {
	for try := 1; ; try++ {
		pctx, cancel := context.WithTimeout(ctx, writeAckWait)
		seq, err := c.publish(pctx, ev)
		cancel()
		lost := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
		if err == nil || !lost || try == writeAttempts || ctx.Err() != nil {
			return seq, err
		}
		c.log.Warn("no acknowledgement of a write; asking again", "event", ev.ID, "try", try, "err", err)
	}
}

// record publishes an event the API accepted, as the leader, and waits (up
// to 10s) until it is folded, so that a read right after the answer sees
// it. One folded as stale is errFenced: a newer election came first.
func (c *Controller) record(ctx context.Context, ev *event.Event) error {
	seq, err := c.publishPatiently(ctx, ev)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.waitApplied(wctx, seq); err != nil {
		c.log.Warn("recorded event not folded yet", "type", ev.Type, "flow", ev.Flow, "err", err)
		c.poke()
		return nil
	}
	var folded bool
	c.store.Read(func(st *projection.State) { folded = st.Seen[ev.ID] == seq })
	if !folded {
		return errFenced
	}
	c.poke()
	return nil
}

// newFlowID makes a flow id from its name and a random suffix; it stays a
// valid id (the name is at most 63 characters, the id is cut to fit).
func newFlowID(name string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [6]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	if len(name) > 56 {
		name = strings.TrimRight(name[:56], "-")
	}
	return name + "-" + string(b[:])
}

func (c *Controller) handleStatus(ctx context.Context, r micro.Request) {
	body, err := c.requestBody(ctx, r, maxRequestSize)
	if err != nil {
		c.refuse(r, "status", err)
		return
	}
	req, err := decodeStatus(body)
	if err != nil {
		c.refuse(r, "status", err)
		return
	}
	resp, found, err := c.readStatus(req)
	if !found && c.catchUp(ctx) {
		// A flow submitted through another controller a moment ago: this
		// one may not have folded it yet.
		resp, found, err = c.readStatus(req)
	}
	if err != nil {
		c.refuse(r, "status", err)
		return
	}
	if !found {
		_ = r.Error(CodeNotFound, "no flow "+req.Flow, nil)
		return
	}
	c.respondJSON(ctx, r, resp)
}

// catchUpWait bounds how long a read waits for this controller's fold to
// reach the log's end before it answers that something does not exist.
const catchUpWait = 5 * time.Second

// catchUp waits, up to catchUpWait, until the fold has applied the log as
// far as it went when asked, and reports whether there was anything to
// wait for: a standby answers reads from its own projection, which may be
// a few events behind the leader that recorded a write.
func (c *Controller) catchUp(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, catchUpWait)
	defer cancel()
	last, err := c.streamLast(ctx)
	if err != nil || last <= c.store.Applied() {
		return false
	}
	return c.waitApplied(ctx, last) == nil
}

// readStatus reads the status a request asks for from the projection;
// found is false for a flow it does not hold; err refuses a page's cursor.
func (c *Controller) readStatus(req StatusRequest) (resp *StatusResponse, found bool, err error) {
	resp, found = &StatusResponse{}, true
	c.store.Read(func(st *projection.State) {
		resp.Poisons = st.PoisonCount
		resp.Cooldowns = cooldowns(st, c.now())
		resp.Unserved = placements(st)
		resp.Controller = c.id
		if st.Leadership != nil {
			l := *st.Leadership
			resp.Leadership = &l
		}
		if req.Flow == "" {
			resp.Flows = flowSummaries(c.cfg, st)
			return
		}
		f := st.Flows[req.Flow]
		if f == nil {
			found = false
			return
		}
		if req.Paged() {
			resp.Detail, err = flowPage(c.cfg, st, f, req)
			return
		}
		resp.Detail = flowDetail(c.cfg, st, f)
	})
	resp.Applied = c.store.Applied()
	return resp, found, err
}

// flowSummaries is every flow's line of `controller status`, oldest first.
func flowSummaries(cfg *config.Config, st *projection.State) []FlowSummary {
	var out []FlowSummary
	for _, f := range st.Flows {
		s := FlowSummary{ID: f.ID, Name: f.Spec.Name, State: f.State, Tasks: map[drovertype.TaskState]int{},
			SubmittedAt: f.SubmittedAt, CompletedAt: f.CompletedAt,
			Spend: spendStatus(cfg, "the flow's", f.Budget, f.Spend)}
		for _, t := range st.OrderedTasks(f) {
			s.Tasks[t.State]++
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.SubmittedAt.Before(b.SubmittedAt) || a.SubmittedAt.Equal(b.SubmittedAt) && a.ID < b.ID
	})
	return out
}

// flowDetail is one flow with its tasks and attempts, copied out of the
// projection.
func flowDetail(cfg *config.Config, st *projection.State, f *projection.Flow) *FlowDetail {
	d := &FlowDetail{Spend: spendStatus(cfg, "the flow's", f.Budget, f.Spend), raw: &rawRecords{}}
	d.raw.flow = encode(f)
	tasks := st.FlowTasks(f)
	d.Waiting = waits(st, tasks)
	var attempts []*projection.Attempt
	for _, t := range tasks {
		d.raw.tasks = append(d.raw.tasks, encode(t))
		if s := spendStatus(cfg, "the task's", t.Budget, t.Spend); s != nil {
			if d.TaskSpend == nil {
				d.TaskSpend = map[string]*SpendStatus{}
			}
			d.TaskSpend[t.ID] = s
		}
	}
	for _, a := range st.Attempts {
		if a.Flow == f.ID {
			attempts = append(attempts, a)
		}
	}
	sort.Slice(attempts, func(i, j int) bool { return attempts[i].ID < attempts[j].ID })
	for _, a := range attempts {
		d.raw.attempts = append(d.raw.attempts, encode(a))
	}
	return d
}

// handleRebuild replays the EVENTS stream into an empty store, up to the
// sequence the live store has committed, and compares the two byte for byte.
func (c *Controller) handleRebuild(ctx context.Context, r micro.Request) {
	body, err := c.requestBody(ctx, r, maxRequestSize)
	if err == nil {
		err = decodeRebuild(body)
	}
	if err != nil {
		c.refuse(r, "rebuild", err)
		return
	}
	resp, err := c.Rebuild(ctx)
	if err != nil {
		_ = r.Error(CodeInternal, err.Error(), nil)
		return
	}
	c.respondJSON(ctx, r, resp)
}

// Rebuild is the work behind `controller rebuild`.
func (c *Controller) Rebuild(ctx context.Context) (*RebuildResponse, error) {
	began := time.Now()
	if err := c.store.Commit(); err != nil {
		return nil, err
	}
	snap, liveSeq := c.store.Snapshot()
	defer snap.Close()
	dir, err := os.MkdirTemp(c.cfg.DataDir, "rebuild-")
	if err != nil {
		return nil, fmt.Errorf("controller: rebuild: %w", err)
	}
	defer os.RemoveAll(dir)
	fresh, err := store.Open(filepath.Join(dir, "state"), store.Options{})
	if err != nil {
		return nil, err
	}
	defer fresh.Close()
	resp := &RebuildResponse{LiveSeq: liveSeq}
	if liveSeq > 0 {
		cons, err := c.js.OrderedConsumer(ctx, queue.EventsStream, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return nil, fmt.Errorf("controller: rebuild consumer: %w", err)
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(1024))
		if err != nil {
			return nil, fmt.Errorf("controller: rebuild consumer: %w", err)
		}
		// Read and decoded as the fold reads, several events at once.
		events := readEvents(it)
		defer events.Stop()
		staged := 0
		for resp.RebuiltSeq < liveSeq {
			m, ok := events.Next()
			switch {
			case !ok:
				m.err = errors.New("the events reader ended")
			case m.err == nil && m.md == nil:
				m.err = m.mdErr
			}
			if m.err != nil {
				return nil, fmt.Errorf("controller: rebuild read: %w", m.err)
			}
			if m.md.Sequence.Stream > liveSeq {
				break
			}
			fresh.StageDecoded(m.md.Sequence.Stream, m.ev)
			resp.RebuiltSeq = m.md.Sequence.Stream
			resp.Events++
			// Committed as the fold loop commits while it catches up:
			// one batch of a whole large log held every record at once.
			if staged++; staged >= foldEvents || staged%foldCheck == 0 && fresh.Changed() >= foldRecords {
				if err := fresh.Commit(); err != nil {
					return nil, err
				}
				staged = 0
			}
		}
	}
	if err := fresh.Commit(); err != nil {
		return nil, err
	}
	fsnap, _ := fresh.Snapshot()
	defer fsnap.Close()
	diffs, err := store.Compare(snap, fsnap, 20)
	if err != nil {
		return nil, err
	}
	if resp.Records, err = store.Count(fsnap); err != nil {
		return nil, err
	}
	resp.Diffs, resp.Equal = diffs, len(diffs) == 0
	resp.Millis = time.Since(began).Milliseconds()
	return resp, nil
}

// APIError is an error answered by the controller.
type APIError struct {
	Code    string
	Message string
	// Problems are those of a flow refused for them, by field, when the
	// request carried one: Message lists them too, but a client that has
	// the flow's file places these in it (flow.Locate).
	Problems []*flow.Error
}

// ProblemsHeader carries a refused flow's problems, as JSON, in the
// answer to its request.
const ProblemsHeader = "Drover-Problems"

// problemsIn decodes ProblemsHeader's value; what does not decode, or
// lists more problems than a flow is reported with, is left out.
func problemsIn(h string) []*flow.Error {
	var ps []*flow.Error
	if h == "" || json.Unmarshal([]byte(h), &ps) != nil || len(ps) > flow.MaxProblems {
		return nil
	}
	return slices.DeleteFunc(ps, func(p *flow.Error) bool { return p == nil })
}

func (e *APIError) Error() string { return e.Message }

// ErrNoController means nothing answered on the API subjects.
var ErrNoController = errors.New("controller: no controller is answering (is `controller serve` running, and is nats.url right?)")

// Client calls the operator API.
type Client struct {
	NC      *nats.Conn
	Timeout time.Duration
	// Controller, when set, sends the reads (status, rebuild, resolve,
	// report) to that controller alone, to be answered from its own
	// projection; any controller answers them otherwise. Writes always go
	// to the leader.
	Controller string
}

// read is where a read verb's request goes.
func (cl *Client) read(subject string) string {
	if cl.Controller == "" {
		return subject
	}
	return ControllerSubject(cl.Controller, subject)
}

func (cl *Client) call(ctx context.Context, subject string, req, resp any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	timeout := cl.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req2, err := cl.message(ctx, subject, data)
	if err != nil {
		return err
	}
	msg, err := cl.request(ctx, req2)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return ErrNoController
		}
		return fmt.Errorf("controller: %s: %w", subject, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		text := msg.Header.Get(micro.ErrorHeader)
		var problems []*flow.Error
		if code == CodeBadRequest && len(msg.Data) > 0 && len(msg.Data) <= maxRequestSize {
			text = string(msg.Data) // with its line breaks
			problems = problemsIn(msg.Header.Get(ProblemsHeader))
		}
		return &APIError{Code: code, Message: text, Problems: problems}
	}
	body, err := cl.replyBody(ctx, msg)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, resp)
}

// request sends req and returns the reply. A write answered unavailable
// (no controller led, or the one that answered stopped leading before the
// write took effect; nothing was recorded) is sent again until ctx ends:
// a handover takes a few seconds.
func (cl *Client) request(ctx context.Context, req *nats.Msg) (*nats.Msg, error) {
	pause := 200 * time.Millisecond
	for {
		msg, err := cl.NC.RequestMsgWithContext(ctx, req)
		if err != nil || msg.Header.Get(micro.ErrorCodeHeader) != CodeUnavailable {
			return msg, err
		}
		select {
		case <-ctx.Done():
			return msg, nil
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// Submit sends a flow. The controller validates it again, against its own
// runtimes and projects.
func (cl *Client) Submit(ctx context.Context, spec *flow.Spec) (string, error) {
	resp, err := cl.SubmitFlow(ctx, SubmitRequest{Spec: *spec})
	return resp.Flow, err
}

// SubmitFlow submits a flow and returns the controller's answer, with its
// warnings.
func (cl *Client) SubmitFlow(ctx context.Context, req SubmitRequest) (*SubmitResponse, error) {
	var resp SubmitResponse
	if err := req.Spec.Validate(flow.Options{Complete: true, RuntimesResolved: true}); err != nil {
		return &resp, refusedHere(err)
	}
	err := cl.call(ctx, SubjectSubmit, req, &resp)
	return &resp, err
}

// Status asks for one flow or all.
func (cl *Client) Status(ctx context.Context, flowID string) (*StatusResponse, error) {
	if err := (StatusRequest{Flow: flowID}).check(); err != nil {
		return nil, refusedHere(err)
	}
	var resp StatusResponse
	err := cl.call(ctx, cl.read(SubjectStatus), StatusRequest{Flow: flowID}, &resp)
	return &resp, err
}

// Rebuild asks for a rebuild comparison.
func (cl *Client) Rebuild(ctx context.Context) (*RebuildResponse, error) {
	var resp RebuildResponse
	cl2 := *cl
	if cl2.Timeout == 0 {
		cl2.Timeout = 10 * time.Minute
	}
	err := cl2.call(ctx, cl.read(SubjectRebuild), struct{}{}, &resp)
	return &resp, err
}

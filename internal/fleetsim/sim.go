package fleetsim

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/natsconn"
	"github.com/drover-dev/drover/internal/worker"
)

// Options says what to simulate.
type Options struct {
	// URL is the NATS of a running controller; "" starts one
	// (ControllerBinary, in DataDir) as a process of its own, and its
	// nats-server as another (NATSBinary's hidden nats-server command),
	// unless Embedded.
	URL              string
	ControllerBinary string
	NATSBinary       string
	// Embedded has the started controller run its embedded nats-server,
	// as `controller dev` does: the controller's CPU and memory then
	// include the server's, which stores every write of the fleet.
	Embedded bool
	// NATSSync is the started nats-server's sync interval, as
	// nats.sync_interval says it (default "always").
	NATSSync string
	// DataDir holds the started controller's data dir and the workers'
	// (empty) work dirs. "" makes a temporary one, removed at the end.
	DataDir string
	// ControllerPid, with URL, is the controller whose CPU and memory
	// are measured; 0 measures none.
	ControllerPid int
	// ControllerEnv is added to a started controller's environment.
	ControllerEnv []string
	// Standbys starts that many more controllers on the started
	// nats-server once the first leads, each measured (StandbyResult).
	Standbys int
	Workers  int
	Slots    int
	Plan     Plan
	Mix      Mix
	// Config is the workers' base configuration and the client's NATS
	// credentials (config.Load).
	Config *config.Config
	Log    *slog.Logger
	// SubmitEvery paces the submissions: flow i is submitted no sooner
	// than i × SubmitEvery after the first. 0 submits them at once, which
	// saturates the fleet; paced, the fleet polls between submissions and
	// the claims' waits are the queue's latency at that offered load
	// (tasks per flow / SubmitEvery), not a backlog's.
	SubmitEvery time.Duration
	// Timeout bounds the wait for the flows to complete.
	Timeout time.Duration
	// CPUProfile, if set, is where the started controller's CPU profile
	// goes, taken over ProfileSeconds from the first submission;
	// HeapProfile its heap once the flows completed; NATSCPUProfile the
	// started nats-server's, over the same seconds, and NATSHeapProfile
	// its heap once the flows completed.
	CPUProfile      string
	ProfileSeconds  int
	HeapProfile     string
	NATSCPUProfile  string
	NATSHeapProfile string
	// Progress receives a line every ProgressEvery (default 30s) while
	// the flows run; nil says nothing.
	Progress      io.Writer
	ProgressEvery time.Duration
}

// Result is what a simulation measured and found.
type Result struct {
	Workers, Slots, Flows, Tasks int
	// Wall is from the first submission to the last flow's completion.
	Wall time.Duration
	// ControllerCPU is the controller's CPU time over Wall; measured
	// says whether there was a controller process to measure.
	ControllerCPU time.Duration
	Measured      bool
	// NATSCPU is the nats-server's CPU time over Wall, when it runs as a
	// process the simulator started (NATSMeasured).
	NATSCPU      time.Duration
	NATSMeasured bool
	// FleetCPU is the simulator's own CPU time over Wall: its simulated
	// workers, which share the machine with the controller and server.
	FleetCPU time.Duration
	// ClaimP50 and ClaimP99 are the claims' waits (Log.ClaimWaits);
	// Claims counts them. ClaimParts splits them (Log.ClaimParts).
	ClaimP50, ClaimP99 time.Duration
	Claims             int
	ClaimParts         []ClaimPart
	// RSS is the controller's resident set once the flows completed,
	// holding them; PeakRSS its highest.
	RSS, PeakRSS int64
	Runs         int // simulated runs in all
	Events       int // events in the log
	// Writes counts the messages each stream stored over Wall (its last
	// sequence's growth): every one of them an fsync with the embedded
	// server's sync_interval always.
	Writes  map[string]uint64
	Verdict Verdict
	// Resubmitted counts flows stored again by a submission the
	// simulator repeated (an answer lost): their tasks ran twice, and
	// the figures count work that was not asked for.
	Resubmitted int
	Rebuild     *controller.RebuildResponse
	// Standbys are the standby controllers' figures (Options.Standbys),
	// LeaderLag how far behind the log the first controller kept, for
	// comparison (measured only with standbys).
	Standbys  []StandbyResult
	LeaderLag Lag
}

// Line is the simulator's one-line summary.
func (r *Result) Line() string {
	cpu, rss, ncpu := "n/a", "n/a", "n/a"
	if r.Measured {
		cpu = r.perTask(r.ControllerCPU)
		rss = fmt.Sprintf("%.1f", float64(r.RSS)/(1<<20))
	}
	if r.NATSMeasured {
		ncpu = r.perTask(r.NATSCPU)
	}
	return fmt.Sprintf("fleet: workers=%d tasks=%d wall_s=%.2f controller_cpu_ms_per_task=%s claim_p99_ms=%.2f controller_rss_mb=%s lost=%d doubled=%d nats_cpu_ms_per_task=%s",
		r.Workers, r.Tasks, r.Wall.Seconds(), cpu, float64(r.ClaimP99)/float64(time.Millisecond), rss, r.Verdict.Lost, r.Verdict.Doubled, ncpu)
}

// perTask is d over the tasks, in milliseconds.
func (r *Result) perTask(d time.Duration) string {
	return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)/float64(r.Tasks))
}

// OK reports whether nothing was lost or doubled, no flow stored twice,
// and the controller's projection is the fold of its log.
func (r *Result) OK() bool {
	return r.Verdict.Lost == 0 && r.Verdict.Doubled == 0 && r.Resubmitted == 0 && r.Rebuild != nil && r.Rebuild.Equal
}

// sim is one simulation on its way.
type sim struct {
	o      Options
	ctrl   *Process  // nil with an external controller
	nats   *Process  // the started nats-server, nil when there is none
	sb     *standbys // the started standby controllers, nil when none
	pid    int
	nc     *nats.Conn
	js     jetstream.JetStream
	client *controller.Client
	ledger *Ledger
	watch  *watch
	fleet  *Fleet
	hung   chan Hung
	wg     sync.WaitGroup // the canceller of hung runs
	flows  []string       // the submitted flows' ids
	// removeDir is the temporary data dir the simulation made.
	removeDir string
	// up is when the fleet was claiming, every slot free.
	up time.Time
	// stopCancels ends the cancels of hanging runs still trying.
	stopCancels context.CancelFunc
	said        time.Time // when progress last spoke
	// claimTimes are the times of the fleet's claims, as its workers
	// report them.
	claimMu    sync.Mutex
	claimTimes []worker.ClaimTimes
}

// Run runs a simulation: a controller (started, or at o.URL), a fleet of
// simulated workers, o.Plan's flows submitted at once and followed to
// their end, then the check of what they came to.
func Run(ctx context.Context, o Options) (res *Result, err error) {
	if err := o.Mix.Validate(); err != nil {
		return nil, err
	}
	if o.Standbys > 0 && (o.URL != "" || o.Embedded) {
		return nil, fmt.Errorf("%w: standby controllers need the nats-server fleetsim starts apart (neither --nats-url nor --embedded)", config.ErrInvalid)
	}
	s := &sim{o: o, ledger: NewLedger(), hung: make(chan Hung, 1024)}
	defer s.close()
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	if err := s.startFleet(ctx); err != nil {
		return nil, err
	}
	res, err = s.measure(ctx)
	if err != nil {
		return nil, err
	}
	return res, s.check(ctx, res)
}

// connect starts the controller (or finds it) and connects the simulator's
// own client.
func (s *sim) connect(ctx context.Context) error {
	o := &s.o
	if o.DataDir == "" {
		dir, err := os.MkdirTemp("", "fleetsim-")
		if err != nil {
			return fmt.Errorf("fleetsim: %w", err)
		}
		o.DataDir, s.removeDir = dir, dir
	}
	url, pid := o.URL, o.ControllerPid
	if url == "" {
		var err error
		if url, pid, err = s.start(ctx); err != nil {
			return err
		}
	}
	s.o.URL, s.pid = url, pid
	co := natsconn.ClientFor(o.Config, "drover-fleetsim", natsconn.RoleOperator, "")
	co.URL, co.Reconnect, co.Logger = url, true, o.Log
	nc, err := natsconn.Connect(co)
	if err != nil {
		return fmt.Errorf("fleetsim: %w", err)
	}
	s.nc = nc
	if s.js, err = jetstream.New(nc); err != nil {
		return fmt.Errorf("fleetsim: %w", err)
	}
	s.client = &controller.Client{NC: nc, Timeout: 2 * time.Minute}
	if err := s.waitAnswering(ctx); err != nil {
		return err
	}
	if o.Standbys > 0 {
		if s.sb, err = startStandbys(ctx, o, s.ctrl, o.Standbys); err != nil {
			return err
		}
	}
	return nil
}

// start starts the controller, and its nats-server unless it embeds one,
// and returns its NATS URL and pid.
func (s *sim) start(ctx context.Context) (url string, pid int, err error) {
	o := &s.o
	po := ProcessOptions{Binary: o.ControllerBinary, DataDir: filepath.Join(o.DataDir, "controller"),
		Pprof: o.CPUProfile != "" || o.HeapProfile != "", Env: o.ControllerEnv}
	if !o.Embedded {
		sync := o.NATSSync
		if sync == "" {
			sync = "always"
		}
		no := NATSOptions{Binary: o.NATSBinary, Dir: filepath.Join(o.DataDir, "nats"), Sync: sync,
			CPUProfile: o.NATSCPUProfile, ProfileSeconds: o.ProfileSeconds, HeapProfile: o.NATSHeapProfile}
		if s.nats, err = StartNATS(ctx, no); err != nil {
			return "", 0, err
		}
		po.NATSURL = s.nats.URL
	}
	if s.ctrl, err = StartController(ctx, po); err != nil {
		return "", 0, err
	}
	return s.ctrl.URL, s.ctrl.Pid(), nil
}

// waitAnswering waits up to two minutes for a controller to answer on the
// simulator's connection.
func (s *sim) waitAnswering(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.client.Status(tctx, "")
		cancel()
		if err == nil {
			return nil
		}
		if aerr := s.alive(); aerr != nil {
			return aerr
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("fleetsim: no controller answers: %w", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startFleet starts the workers, the watch of the events and the
// canceller of hanging runs.
func (s *sim) startFleet(ctx context.Context) error {
	w, err := newWatch(s.nc)
	if err != nil {
		return err
	}
	s.watch = w
	s.o.Plan = s.o.Plan.WithDefaults()
	runner := &Runner{Mix: s.o.Mix, Ledger: s.ledger, Hung: s.hung}
	f, err := StartFleet(ctx, FleetOptions{URL: s.o.URL, Workers: s.o.Workers, Slots: s.o.Slots, Runtime: s.o.Plan.Runtime,
		Config: s.o.Config, WorkDir: filepath.Join(s.o.DataDir, "workers"), Runner: runner, Log: s.o.Log,
		ClaimTimes: func(t worker.ClaimTimes) {
			s.claimMu.Lock()
			defer s.claimMu.Unlock()
			s.claimTimes = append(s.claimTimes, t)
		}})
	if err != nil {
		return err
	}
	s.fleet, s.up = f, time.Now()
	cctx, stop := context.WithCancel(ctx)
	s.stopCancels = stop
	s.wg.Go(func() { s.cancelHung(cctx) })
	return nil
}

// cancelHung cancels the task of every hanging run, as an operator would,
// trying again until the controller answers (it may be restarting).
func (s *sim) cancelHung(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for h := range s.hung {
		wg.Go(func() {
			wait := 100 * time.Millisecond
			for {
				_, err := s.client.Cancel(ctx, h.Flow+"/"+h.Task, "fleetsim: its runtime hangs")
				if err == nil || ctx.Err() != nil {
					return
				}
				s.o.Log.Warn("cancel a hanging run", "attempt", h.Attempt, "err", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				wait = min(2*wait, 5*time.Second)
			}
		})
	}
}

// close stops what the simulation started, in reverse.
func (s *sim) close() {
	if s.fleet != nil {
		s.fleet.Stop()
	}
	if s.stopCancels != nil {
		s.stopCancels()
	}
	close(s.hung)
	s.wg.Wait()
	if s.watch != nil {
		s.watch.stop()
	}
	if s.nc != nil {
		s.nc.Close()
	}
	s.sb.stop()
	if s.ctrl != nil {
		s.ctrl.Stop()
	}
	if s.nats != nil {
		s.nats.Stop()
	}
	if s.removeDir != "" {
		_ = os.RemoveAll(s.removeDir)
	}
}

// measure submits the flows, waits for them to complete and measures the
// controller over that time.
func (s *sim) measure(ctx context.Context) (*Result, error) {
	specs, err := s.o.Plan.Specs()
	if err != nil {
		return nil, err
	}
	res := &Result{Workers: s.o.Workers, Slots: s.o.Slots, Flows: len(specs), Tasks: s.o.Plan.Tasks, Measured: s.pid != 0, NATSMeasured: s.nats != nil}
	cpu0, err := s.cpu()
	if err != nil {
		return nil, err
	}
	ncpu0, err := s.natsCPU()
	if err != nil {
		return nil, err
	}
	fcpu0, err := CPU(os.Getpid())
	if err != nil {
		return nil, err
	}
	seq0, err := s.lastSeqs(ctx)
	if err != nil {
		return nil, err
	}
	stopSampling, err := s.sampleStandbys(ctx)
	if err != nil {
		return nil, err
	}
	defer stopSampling()
	began := time.Now()
	profiled := s.profile(ctx)
	for i, spec := range specs {
		if err := sleepUntil(ctx, began.Add(time.Duration(i)*s.o.SubmitEvery)); err != nil {
			return nil, err
		}
		id, err := s.submit(ctx, spec)
		if err != nil {
			return nil, err
		}
		s.flows = append(s.flows, id)
	}
	if err := s.waitFlows(ctx, began); err != nil {
		return nil, err
	}
	res.Wall = time.Since(began)
	stopSampling()
	cpu1, err := s.cpu()
	if err != nil {
		return nil, err
	}
	res.ControllerCPU = cpu1 - cpu0
	ncpu1, err := s.natsCPU()
	if err != nil {
		return nil, err
	}
	res.NATSCPU = ncpu1 - ncpu0
	fcpu1, err := CPU(os.Getpid())
	if err != nil {
		return nil, err
	}
	res.FleetCPU = fcpu1 - fcpu0
	seq1, err := s.lastSeqs(ctx)
	if err != nil {
		return nil, err
	}
	res.Writes = map[string]uint64{}
	for name, n := range seq1 {
		res.Writes[name] = n - seq0[name]
	}
	// After the rest is measured: waiting for the standbys to catch up
	// must not count in the leader's, the server's or the fleet's figures.
	if s.sb != nil {
		if res.Standbys, err = s.sb.finish(ctx, s.js, began.Add(res.Wall)); err != nil {
			return nil, err
		}
		res.LeaderLag = s.sb.leaderLag()
	}
	if s.pid != 0 {
		if res.RSS, res.PeakRSS, err = Memory(s.pid); err != nil {
			return nil, err
		}
	}
	res.Runs = s.ledger.Runs()
	if err := profiled(); err != nil {
		s.o.Log.Warn("CPU profile", "err", err)
	}
	if s.o.HeapProfile != "" && s.ctrl != nil {
		if err := s.ctrl.Profile(ctx, "heap", s.o.HeapProfile); err != nil {
			s.o.Log.Warn("heap profile", "err", err)
		}
	}
	if s.o.NATSHeapProfile != "" && s.nats != nil {
		if err := s.natsHeap(ctx); err != nil {
			s.o.Log.Warn("nats-server heap profile", "err", err)
		}
	}
	return res, nil
}

// natsHeap has the started nats-server save its heap profile (SIGUSR2)
// and waits, a minute at most, for the file.
func (s *sim) natsHeap(ctx context.Context) error {
	_ = os.Remove(s.o.NATSHeapProfile)
	if err := s.nats.Signal(syscall.SIGUSR2); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if _, err := os.Stat(s.o.NATSHeapProfile); err == nil {
			return nil
		}
		if err := sleepUntil(ctx, time.Now().Add(100*time.Millisecond)); err != nil {
			return fmt.Errorf("no profile in %s: %w", s.o.NATSHeapProfile, err)
		}
	}
}

// sleepUntil waits until t, or ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// submit submits a flow. A controller whose NATS the running flows keep
// busy may answer too late: then the flow is submitted again unless it was
// stored (its name is the simulation's own: the watch sees its
// flow_submitted, which a lagging projection may not show yet), up to five
// times.
func (s *sim) submit(ctx context.Context, spec *flow.Spec) (string, error) {
	var err error
	for try := range 5 {
		var id string
		if id, err = s.client.Submit(ctx, spec); err == nil {
			return id, nil
		}
		s.o.Log.Warn("submit", "flow", spec.Name, "try", try+1, "err", err)
		if id := s.stored(ctx, spec.Name); id != "" {
			return id, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return "", fmt.Errorf("fleetsim: submit %s: %w", spec.Name, err)
}

// storedWait bounds the wait for a submission that was not answered to
// show in the log.
const storedWait = time.Minute

// stored returns the id a flow named name was stored under, waiting up to
// storedWait for its flow_submitted; "" if none came.
func (s *sim) stored(ctx context.Context, name string) string {
	deadline := time.Now().Add(storedWait)
	for {
		if ids := s.watch.submittedAs(name); len(ids) > 0 {
			return ids[0]
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return ""
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cpu is the measured controller's CPU time so far, 0 without one.
func (s *sim) cpu() (time.Duration, error) {
	if s.pid == 0 {
		return 0, nil
	}
	return CPU(s.pid)
}

// natsCPU is the started nats-server's CPU time so far, 0 without one.
func (s *sim) natsCPU() (time.Duration, error) {
	if s.nats == nil {
		return 0, nil
	}
	return CPU(s.nats.Pid())
}

// profile takes the started controller's CPU profile in the background,
// when asked, and has the started nats-server start its own (SIGUSR1:
// cmd/fleetsim's nats-server profiles itself for as long); the returned
// func waits for the controller's.
func (s *sim) profile(ctx context.Context) func() error {
	if s.o.NATSCPUProfile != "" && s.nats != nil {
		if err := s.nats.Signal(syscall.SIGUSR1); err != nil {
			s.o.Log.Warn("nats-server CPU profile", "err", err)
		}
	}
	if s.o.CPUProfile == "" || s.ctrl == nil {
		return func() error { return nil }
	}
	secs := max(s.o.ProfileSeconds, 1)
	errc := make(chan error, 1)
	go func() { errc <- s.ctrl.Profile(ctx, fmt.Sprintf("profile?seconds=%d", secs), s.o.CPUProfile) }()
	return func() error { return <-errc }
}

// waitFlows waits until every submitted flow has completed: told by its
// flow_completed event, or, should one be missed, by the controller's
// status, asked every 5 s.
func (s *sim) waitFlows(ctx context.Context, began time.Time) error {
	deadline := time.NewTimer(s.o.Timeout)
	defer deadline.Stop()
	poll := time.NewTicker(min(5*time.Second, max(s.o.ProgressEvery, 100*time.Millisecond)))
	defer poll.Stop()
	for {
		done := s.watch.done(s.flows)
		if len(done) == len(s.flows) {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-deadline.C:
			return fmt.Errorf("fleetsim: %d of %d flows completed within %s", len(done), len(s.flows), s.o.Timeout)
		case <-s.watch.kick:
		case <-poll.C:
			if err := s.alive(); err != nil {
				return err
			}
			s.progress(began, len(done))
			if s.statusDone(ctx) {
				return nil
			}
		}
	}
}

// alive fails once a started controller or nats-server has exited.
func (s *sim) alive() error {
	if s.nats != nil {
		if err := s.nats.Alive(); err != nil {
			return err
		}
	}
	if err := s.sb.alive(); err != nil {
		return err
	}
	if s.ctrl == nil {
		return nil
	}
	return s.ctrl.Alive()
}

// sampleStandbys notes the standbys' CPU and samples their lag until the
// returned func is called (once or more).
func (s *sim) sampleStandbys(ctx context.Context) (stop func(), err error) {
	if s.sb == nil {
		return func() {}, nil
	}
	if err := s.sb.begin(); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.sb.sample(sctx, s.js) })
	return func() { cancel(); wg.Wait() }, nil
}

// statusWait bounds each status request of the wait for the flows.
const statusWait = 10 * time.Second

// statusDone asks the controller whether every submitted flow has ended.
func (s *sim) statusDone(ctx context.Context) bool {
	// Bounded well below the client's 2 minutes: a request made as the
	// nats-server dies waits in the reconnect buffer, and the wait's loop
	// must come back to see which process exited.
	ctx, cancel := context.WithTimeout(ctx, statusWait)
	defer cancel()
	st, err := s.client.Status(ctx, "")
	if err != nil {
		return false
	}
	ended := map[string]bool{}
	for _, f := range st.Flows {
		ended[f.ID] = f.State.Terminal()
	}
	for _, id := range s.flows {
		if !ended[id] {
			return false
		}
	}
	return true
}

// progress says how far the flows are, every ProgressEvery at most.
func (s *sim) progress(began time.Time, done int) {
	every := s.o.ProgressEvery
	if every == 0 {
		every = 30 * time.Second
	}
	if s.o.Progress == nil || time.Since(s.said) < every {
		return
	}
	s.said = time.Now()
	fmt.Fprintf(s.o.Progress, "fleetsim: %s: %d runs, %d of %d flows completed\n",
		time.Since(began).Round(time.Second), s.ledger.Runs(), done, len(s.flows))
}

// check folds the log and compares it and the ledger with what the
// runtimes dictated, and asks the controller to rebuild its projection.
func (s *sim) check(ctx context.Context, res *Result) error {
	l, err := FoldLog(ctx, s.js)
	if err != nil {
		return err
	}
	res.Events = l.Events
	waits := l.ClaimWaits(s.o.Workers*s.o.Slots, s.up)
	res.ClaimP50, res.ClaimP99, res.Claims = percentile(waits, 50), percentile(waits, 99), len(waits)
	s.claimMu.Lock()
	res.ClaimParts = l.ClaimParts(s.claimTimes)
	s.claimMu.Unlock()
	res.Verdict = Check(l.State, s.flows, s.o.Mix, s.o.Plan.MaxAttempts, s.ledger)
	specs, err := s.o.Plan.Specs()
	if err != nil {
		return err
	}
	for _, spec := range specs {
		if ids := s.watch.submittedAs(spec.Name); len(ids) > 1 {
			res.Resubmitted += len(ids) - 1
			res.Verdict.Problems = append(res.Verdict.Problems, fmt.Sprintf("flow %s was stored %d times (%s): its tasks ran that many times over", spec.Name, len(ids), strings.Join(ids, ", ")))
		}
	}
	rb, err := s.client.Rebuild(ctx)
	if err != nil {
		return fmt.Errorf("fleetsim: rebuild: %w", err)
	}
	res.Rebuild = rb
	return nil
}

// lastSeqs returns each stream's last sequence.
func (s *sim) lastSeqs(ctx context.Context) (map[string]uint64, error) {
	out := map[string]uint64{}
	l := s.js.ListStreams(ctx)
	for info := range l.Info() {
		out[info.Config.Name] = info.State.LastSeq
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("fleetsim: list streams: %w", err)
	}
	return out, nil
}

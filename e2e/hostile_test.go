package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/queue"
)

// hostileBurst is how many junk events the RSS bound is measured over.
const hostileBurst = 20_000

// maxRSSGrowth bounds what that many junk events may add to the
// controller's resident memory: the fold keeps a count and the last
// projection.MaxPoisons poison records, so junk must not grow it (before,
// 20,000 junk events grew it by 57 MB, kept forever). Measured on NATS of
// its own: 2 to 3.5 MB each, the Go heap flat (heap profiles after each
// of six bursts), the rest Pebble's memtables and caches filling.
const maxRSSGrowth = 8 << 20

// TestHostileMessages sends what anyone who reaches an unauthenticated NATS
// can send, on every subject the default setup exposes, while a flow runs:
// events with wrong subjects, invalid ids, contradictions, random bytes and
// oversized messages on drover.events.*; junk jobs on drover.attempts.*;
// random bytes and signals for other attempts on drover.control.cancel.*;
// junk requests on drover.api.*. The running flow and a flow submitted
// afterwards succeed, nothing the junk said is applied, every junk event is
// poison, a rebuild equals the live projection, and once a first burst
// has warmed it, 20,000 more junk events grow the controller's resident
// memory by less than maxRSSGrowth.
func TestHostileMessages(t *testing.T) {
	t.Parallel()
	// GOGC=25 keeps the Go heap's headroom small, so that what the junk
	// leaves behind is not lost in when the collector happened to run.
	// NATS runs as a process of its own: what it keeps of the junk it
	// stored (its indexes of subjects and blocks) is the server's, bounded
	// by the streams' limits, and would hide what the controller keeps.
	ns := startNATS(t)
	c := startControllerBinOn(t, controllerAsShipped(t), ns.url(), "GOGC=25")
	w := c.startWorker("worker-1", 2, "DROVER_WORKER_RUNTIMES=demo")
	repo := newRepo(t)

	nc, err := nats.Connect(c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256), jetstream.WithPublishAsyncTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// A flow whose task runs while the stop signals come, and one whose
	// task waits for a runtime no worker serves, which the junk events
	// contradict for as long as the test runs.
	slow := writeFlow(t, "name: slow\nrepo: "+repo+"\nruntime: demo\ntasks:\n  - id: a\n    prompt: |\n      @sleep 15s\n      @write slow.txt survived\n")
	held := writeFlow(t, "name: held\nrepo: "+repo+"\nruntime: codex\ntasks:\n  - id: a\n    prompt: never runs\n")
	var ids []string
	for _, file := range []string{slow, held} {
		out, errOut, code := c.cli("submit", file)
		if code != 0 {
			t.Fatalf("submit: exit %d\n%s%s", code, out, errOut)
		}
		ids = append(ids, submittedID(t, out))
	}
	slowID, heldID := ids[0], ids[1]
	waitFor(t, time.Minute, "the slow task to run", func() bool {
		st := c.status(slowID)
		return len(st.Detail.Tasks) == 1 && st.Detail.Tasks[0].State == drovertype.TaskRunning
	})
	waitFor(t, time.Minute, "the held task's attempt to be scheduled", func() bool {
		return len(c.status(heldID).Detail.Attempts) == 1
	})

	rng := rand.New(rand.NewPCG(19, 2025))
	h := &hostile{t: t, ctx: ctx, js: js, rng: rng, flow: heldID, attempt: drovertype.AttemptID(heldID, "a", 1)}
	if l := c.status("").Leadership; l != nil {
		h.leader = l.Epoch
	}

	// Every subject but the events: what comes there is refused or ignored.
	h.cancelSignals(nc, drovertype.AttemptID(slowID, "a", 1), 500)
	h.jobs(300)
	h.api(nc, 30)

	// A first burst of junk events takes the controller to what such a
	// burst needs at its peak (NATS's block caches and buffer pools, the
	// Go heap, Pebble's memtables); each later burst is measured once
	// NATS's caches have expired (10 s idle). What the junk kept for good
	// shows as growth in both measured bursts; a cache or memtable first
	// touched late shows in one only, so the smaller growth is the bound's.
	settle := func() int {
		h.waitFolded(c)
		time.Sleep(12 * time.Second)
		return rss(t, c.ctrl.cmd.Process.Pid)
	}
	h.events(hostileBurst)
	rss0 := settle()
	h.events(hostileBurst)
	rss1 := settle()
	h.events(hostileBurst)
	rss2 := settle()
	growth := min(rss1-rss0, rss2-rss1)
	t.Logf("controller RSS %d KiB after a first %d junk events, then %d KiB and %d KiB after as many more each (least growth %+d KiB); %d junk events in all",
		rss0>>10, hostileBurst, rss1>>10, rss2>>10, growth>>10, h.stored)
	if growth > maxRSSGrowth {
		t.Errorf("each %d junk events grew the controller by %d KiB at least, more than %d KiB", hostileBurst, growth>>10, maxRSSGrowth>>10)
	}

	// Every junk event is poison, counted; the projection keeps the last
	// records only. The junk made no flow and changed neither.
	st := c.status("")
	if st.Poisons != h.stored {
		t.Errorf("%d poison events counted, %d junk events stored", st.Poisons, h.stored)
	}
	if len(st.Flows) != 2 {
		t.Errorf("the junk made flows: %+v", st.Flows)
	}
	if d := c.status(heldID).Detail; d.Flow.State != drovertype.FlowRunning || d.Tasks[0].State != drovertype.TaskScheduled ||
		len(d.Attempts) != 1 || d.Attempts[0].Epoch != 0 {
		t.Errorf("the held flow after the junk: flow %s, task %s, attempts %+v", d.Flow.State, d.Tasks[0].State, d.Attempts)
	}

	// The slow flow was not stopped by the junk signals.
	waitFor(t, 2*time.Minute, "the slow flow to end", func() bool { return c.status(slowID).Detail.Flow.State.Terminal() })
	d := c.status(slowID).Detail
	if d.Flow.State != drovertype.FlowSucceeded || d.Tasks[0].State != drovertype.TaskSucceeded || len(d.Attempts) != 1 {
		t.Errorf("the slow flow after the junk: flow %s, task %s, %d attempts, error %+v", d.Flow.State, d.Tasks[0].State,
			len(d.Attempts), d.Tasks[0].Error)
	}
	w.waitLog(30*time.Second, "cancel signal ignored")
	// No flow exists that the controller fails to decide on every second.
	if c.ctrl.logged("msg=decide ") {
		t.Error("the controller failed to decide after the junk: see its log")
	}

	// A good flow after it all, and a rebuild that agrees.
	good := writeFlow(t, "name: good\nrepo: "+repo+"\nruntime: demo\ntasks:\n  - id: a\n    prompt: \"@write good.txt fine\"\n")
	if out, errOut, code := c.cli("submit", good, "--watch"); code != 0 {
		t.Fatalf("a good flow after the junk: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := c.cli("rebuild"); code != 0 || !strings.Contains(out, "equal") {
		t.Errorf("rebuild: exit %d\n%s%s", code, out, errOut)
	}
}

// hostile sends junk.
type hostile struct {
	t       *testing.T
	ctx     context.Context
	js      jetstream.JetStream
	rng     *rand.Rand
	flow    string // the held flow, which junk events contradict
	attempt string // its attempt, scheduled and never claimed
	stored  int    // junk events the EVENTS stream stored
	n       int
	// leader is the leader epoch of the day, which the junk decisions
	// carry as a forger who reads the log would stamp them: judged by
	// the fold's rules, not ignored as a stale leader's.
	leader uint64
}

// events publishes n junk events on drover.events.*, every one of which
// the fold must refuse, and counts those the stream stored.
func (h *hostile) events(n int) {
	t := h.t
	var acks []jetstream.PubAckFuture
	for range n {
		h.n++
		subject, data := h.junkEvent()
		f, err := h.js.PublishAsync(subject, data, jetstream.WithStallWait(time.Minute))
		if err != nil {
			if strings.Contains(err.Error(), "maximum payload exceeded") {
				continue // refused by NATS before the stream
			}
			t.Fatalf("publish %s: %v", subject, err)
		}
		acks = append(acks, f)
	}
	select {
	case <-h.js.PublishAsyncComplete():
	case <-h.ctx.Done():
		t.Fatal("junk events not acknowledged")
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
			h.stored++
		case err := <-f.Err():
			t.Fatalf("junk event refused by the stream: %v", err)
		}
	}
}

// junkEvent returns one junk event: each kind is refused by the fold for
// another rule.
func (h *hostile) junkEvent() (string, []byte) {
	i, f, a := h.n, h.flow, h.attempt
	env := func(id, typ, flowID, task, att string, epoch uint64, data string) []byte {
		var leader uint64
		if epoch == 0 {
			leader = h.leader // a decision: a worker's events carry a claim's epoch
		}
		return []byte(fmt.Sprintf(`{"v":1,"id":%q,"type":%q,"time":"2025-01-01T00:00:00Z","flow":%q,"task":%q,"attempt":%q,"epoch":%d,"leader_epoch":%d,"data":%s}`,
			id, typ, flowID, task, att, epoch, leader, data))
	}
	sub := func(flowID, typ string) string { return "drover.events." + flowID + "." + typ }
	switch i % 12 {
	case 0: // the held flow's pause, on another flow's subject (a long one)
		return sub(fmt.Sprintf("other-%d-%s", i, strings.Repeat("o", 200)), "flow_paused"),
			env(fmt.Sprintf("flow_paused:%d", i), "flow_paused", f, "", "", 0, `{}`)
	case 1: // its pause on the subject of a resume
		return sub(f, "flow_resumed"), env(fmt.Sprintf("flow_paused:%d", i), "flow_paused", f, "", "", 0, `{}`)
	case 2: // an id that is not TYPE:KEY
		return sub(f, "flow_paused"), env(fmt.Sprintf("junk-%d", i), "flow_paused", f, "", "", 0, `{}`)
	case 3: // a flow id no subject may carry
		return sub("bad_flow", "flow_paused"), env("flow_paused:x", "flow_paused", "bad_flow", "", "", 0, `{}`)
	case 4: // completing the held flow: its task is not done
		return sub(f, "flow_completed"), env("flow_completed:"+f, "flow_completed", f, "", "", 0, `{"state":"succeeded"}`)
	case 5: // claiming an attempt nobody scheduled
		att := drovertype.AttemptID(f, "a", 2+i)
		return sub(f, "attempt_claimed"), env(drovertype.ClaimEventID("attempt_claimed", att, 1), "attempt_claimed", f, "a", att, 1, `{"worker":"w"}`)
	case 6: // the held attempt's report, from a claim never made
		return sub(f, "attempt_reported"), env(drovertype.ClaimEventID("attempt_reported", a, 99), "attempt_reported", f, "a", a, 99,
			`{"success":true,"branch":"drover/`+f+`/a/1","commit":"bad"}`)
	case 7: // cancelling a task the flow does not have
		return sub(f, "cancel_requested"), env(fmt.Sprintf("cancel_requested:%d", i), "cancel_requested", f, "nope", "", 0, `{"scope":"task"}`)
	case 8: // a flow that does not validate, in many ways
		var tasks []string
		for k := range 12 {
			tasks = append(tasks, fmt.Sprintf(`{"id":"t.%d","prompt":"x","depends_on":["ghost-%d"]}`, k, i))
		}
		return sub("bad", "flow_submitted"), env("flow_submitted:bad", "flow_submitted", "bad", "", "", 0,
			`{"spec":{"name":"bad","repo":"/r","base":"HEAD","runtime":"demo","tasks":[`+strings.Join(tasks, ",")+`]}}`)
	case 9: // a type nobody writes
		return sub(f, "flow_deleted"), env(fmt.Sprintf("flow_deleted:%d", i), "flow_deleted", f, "", "", 0, `{}`)
	case 10: // random bytes
		b := make([]byte, 1+h.rng.IntN(2048))
		for k := range b {
			b[k] = byte(h.rng.UintN(256))
		}
		return sub("x"+strconv.Itoa(i), "y"), b
	default: // large junk, once in a while one NATS itself refuses
		size := 1 + h.rng.IntN(4096)
		if i%1200 == 11 {
			size = (1 << 20) - 4096
		}
		if i%2400 == 11 {
			size = 2 << 20
		}
		return sub(f, "attempt_reported"), []byte(`{"v":1,"data":"` + strings.Repeat("A", size))
	}
}

// waitFolded waits until the controller has folded the whole stream.
func (h *hostile) waitFolded(c *cluster) {
	s, err := h.js.Stream(h.ctx, queue.EventsStream)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	waitFor(h.t, 5*time.Minute, "the controller to fold the junk", func() bool {
		return c.status("").Applied >= info.State.LastSeq
	})
}

// cancelSignals sends junk stop signals for the running attempt: random
// bytes, signals naming other attempts, askers and reasons a worker must
// not take.
func (h *hostile) cancelSignals(nc *nats.Conn, attempt string, n int) {
	for i := range n {
		var body []byte
		switch i % 5 {
		case 0:
			body = make([]byte, 128)
			for k := range body {
				body[k] = byte(h.rng.UintN(256))
			}
		case 1:
			body = []byte(`{"attempt":"` + h.attempt + `","reason":"x","by":"operator"}`)
		case 2:
			body = []byte(`{"attempt":"` + attempt + `","reason":"x","by":"mallory"}`)
		case 3:
			body = []byte(`{"attempt":"` + attempt + `","reason":"\u001b]0;pwned\u0007","by":"operator"}`)
		case 4:
			body = nil
		}
		if err := nc.Publish(queue.CancelSubject(attempt), body); err != nil {
			h.t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		h.t.Fatal(err)
	}
}

// jobs queues junk jobs for the worker's pool: each is parked, none runs.
func (h *hostile) jobs(n int) {
	for i := range n {
		var body []byte
		switch i % 3 {
		case 0:
			body = make([]byte, 1+h.rng.IntN(512))
			for k := range body {
				body[k] = byte(h.rng.UintN(256))
			}
		case 1:
			body = []byte(`{"v":1,"kind":"attempt","attempt":"../../etc","flow":"f","task":"t","n":1,"pool":"default","runtime":"demo","repo":"/r","base":"main","branch":"main"}`)
		case 2:
			att := drovertype.AttemptID(h.flow, "a", 1)
			body = []byte(`{"v":1,"kind":"attempt","attempt":"` + att + `","flow":"` + h.flow + `","task":"a","n":1,"pool":"default","runtime":"demo","repo":"--upload-pack=touch /tmp/pwned","base":"main","branch":"drover/` + h.flow + `/a/1"}`)
		}
		if _, err := h.js.Publish(h.ctx, queue.AttemptSubject("default", "demo"), body); err != nil {
			h.t.Fatal(err)
		}
	}
}

// api sends n junk requests on every API subject: each is refused as a
// bad request.
func (h *hostile) api(nc *nats.Conn, n int) {
	for _, subject := range apiSubjects(h.t, nc) {
		for i := range n {
			var body []byte
			switch i % 4 {
			case 0:
				body = append([]byte{0xff}, make([]byte, h.rng.IntN(256))...)
			case 1:
				body = []byte(`{"target":"` + h.flow + `","spec":{"name":"x"},"flow":"*","attempt":"` + h.attempt + `","extra":1}`)
			case 2:
				body = []byte(`{"target":"` + h.flow + `.>","flow":"` + h.flow + `.>","attempt":"../x","spec":{"depend_on":[]}}`)
			case 3: // a status page's members, each wrong
				body = []byte(`{"flow":"` + h.flow + `","limit":-1,"after":"` + h.flow + `/../x","states":["x",null],"tasks":[1,{}]}`)
			}
			reply, err := nc.Request(subject, body, 30*time.Second)
			if err != nil {
				h.t.Fatalf("%s: %v", subject, err)
			}
			if code := reply.Header.Get(micro.ErrorCodeHeader); code != controller.CodeBadRequest {
				h.t.Fatalf("%s %q: answered %q %s, want a bad request", subject, body, code, reply.Data)
			}
		}
	}
}

// apiSubjects asks the controller's API services for their endpoints, as
// anyone on NATS can ($SRV.INFO): every controller's, and the leader's,
// which answers the writes the others forward to it. An endpoint added
// later is sent junk too. The ones a test of this file knows must be
// among them.
func apiSubjects(t *testing.T, nc *nats.Conn) []string {
	t.Helper()
	var subjects []string
	for _, svc := range []string{"drover-controller", "drover-leader"} {
		reply, err := nc.Request("$SRV.INFO."+svc, nil, 30*time.Second)
		if err != nil {
			t.Fatalf("the API service's info: %v", err)
		}
		var info micro.Info
		if err := json.Unmarshal(reply.Data, &info); err != nil {
			t.Fatalf("the API service's info: %v: %s", err, reply.Data)
		}
		for _, e := range info.Endpoints {
			subjects = append(subjects, e.Subject)
		}
	}
	for _, want := range []string{controller.SubjectSubmit, controller.SubjectStatus, controller.SubjectCancel, controller.SubjectBudget,
		controller.LeaderSubject(controller.SubjectSubmit), controller.LeaderSubject(controller.SubjectBudget)} {
		if !slices.Contains(subjects, want) {
			t.Fatalf("the API service does not list %s: %v", want, subjects)
		}
	}
	return subjects
}

// rss reads a process's resident set size from /proc.
func rss(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// controllerAsShipped is the controller binary as users run it: bin's,
// or under the race detector one built without it, once for the package.
// The hostile test measures its memory: ThreadSanitizer's shadow memory
// and allocator grow with the volume allocated, not with what the program
// keeps (under it, the controller's RSS grew by some 100 MB over a burst
// that grows the shipped binary by nothing). The fleet simulation needs
// its speed: under the race detector it takes eight times the CPU.
func controllerAsShipped(t *testing.T) string {
	t.Helper()
	if !raceEnabled {
		return ""
	}
	shippedOnce.Do(func() {
		out := filepath.Join(bin, "shipped", "controller")
		cmd := exec.Command("go", "build", "-o", out, "../cmd/controller")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if shippedErr = cmd.Run(); shippedErr == nil {
			shipped = out
		}
	})
	if shippedErr != nil {
		t.Fatalf("build the controller without the race detector: %v", shippedErr)
	}
	return shipped
}

var (
	shippedOnce sync.Once
	shipped     string
	shippedErr  error
)

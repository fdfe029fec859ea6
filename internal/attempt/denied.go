package attempt

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/sandbox"
	"github.com/drover-dev/drover/internal/transcript"
)

// A CLI that meets a sandbox denial often retries it on its own: codex
// 0.169.0 reconnects to a model port it may not reach until its timeout
// ("Reconnecting... waiting for network"). What it was refused is read from
// its output (sandbox.Denials); a denialWatch stops it, class
// SANDBOX_DENIED, once it is stuck: the same port or path refused at least
// twice, with nothing else done in between (no answer, tool call or tool
// result that is not itself refused, no file changed in its worktree), over
// the runtime's own_retry_timeout (15 s by default: the attempt ends within
// 30 s). A CLI that tries something once and moves on is never stopped.

// settle is how long after a refusal the watch waits before it stops
// the CLI: the CLI's stdout and stderr are read apart, and what it did
// just before the refusal (on the other stream) may still be on its way.
const settle = time.Second

// deniedStop is the cause a CLI stuck on a refusal is stopped with.
type deniedStop struct {
	sandbox.Stuck
	For time.Duration // how long it had been stuck
}

func (e *deniedStop) Error() string {
	return fmt.Sprintf("Drover stopped the CLI stuck on %s, refused by the sandbox %d times in %s", e.What, e.Times, e.For.Round(time.Second))
}

// tap feeds each line of the CLI's output to its parser, then to the
// sandbox's denial reader, and tells progress from refusals: a line that
// moved the run on (the parser says so; for plain text, any line that
// says nothing of a denial or a failed connection) and was refused
// nothing is progress, which ends the CLI's streak of refusals. A line relaying the agent's words or a tool's (an answer, a
// tool call or result, failed or not) is not the CLI's own: a connection
// failure in it is put on no configured endpoint.
type tap struct {
	transcript.Parser
	den     *sandbox.Denials
	counter transcript.ProgressCounter // nil: the parser does not count

	mu sync.Mutex // the two streams' lines, one at a time
}

func (t *tap) Line(s transcript.Stream, line []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	before := t.progress()
	t.Parser.Line(s, line)
	after := t.progress()
	heard := t.den.Line(line, after.Relayed == before.Relayed)
	switch {
	case heard == sandbox.HeardRefusal:
	case after.Moved > before.Moved,
		!after.Judged && heard == sandbox.HeardNothing && strings.TrimSpace(string(line)) != "":
		t.den.Progress()
	}
}

func (t *tap) progress() transcript.Progress {
	if t.counter == nil {
		return transcript.Progress{}
	}
	return t.counter.Progress()
}

// denialWatch stops the CLI once its output shows it stuck on what the
// sandbox refuses (see above). After each piece of output, check arms a
// timer for a streak of at least two refusals: at own_retry_timeout after
// the first of them, and no sooner than settle after the one that armed
// it. The timer judges (judge): still the same streak, and no file of the
// worktree changed since it began, the CLI is stopped.
type denialWatch struct {
	den    *sandbox.Denials
	limit  time.Duration
	settle time.Duration
	// changed reports whether a file in the worktree changed since t.
	changed func(t time.Time) bool
	now     func() time.Time
	// after runs f after d: time.AfterFunc.
	after func(d time.Duration, f func()) stopper
	stop  chan error // buffered: the cause, once

	mu    sync.Mutex
	timer stopper
	armed time.Time // the Since of the streak the timer judges
	done  bool
}

// stopper is a timer that can be stopped.
type stopper interface{ Stop() bool }

func newDenialWatch(den *sandbox.Denials, limit time.Duration, changed func(time.Time) bool, now func() time.Time) *denialWatch {
	if limit <= 0 {
		limit = config.DefaultOwnRetryTimeout
	}
	den.SetClock(now)
	return &denialWatch{den: den, limit: limit, settle: settle, changed: changed, now: now, stop: make(chan error, 1),
		after: func(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }}
}

// check arms the timer for the current streak of refusals, or disarms it
// when there is none.
func (w *denialWatch) check() {
	if w == nil {
		return
	}
	s, stuck := w.den.Stuck()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.done:
	case !stuck || s.Times < 2:
		w.disarm()
	case !w.armed.Equal(s.Since):
		due := s.Since.Add(w.limit)
		if settled := s.Last.Add(w.settle); settled.After(due) {
			due = settled
		}
		w.disarm()
		w.armed, w.timer = s.Since, w.after(max(due.Sub(w.now()), 0), w.judge)
	}
}

// judge stops the CLI if it is still stuck on the streak the timer was
// armed for.
func (w *denialWatch) judge() {
	s, stuck := w.den.Stuck()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || !stuck || s.Times < 2 || !w.armed.Equal(s.Since) {
		return // it moved on meanwhile; check arms again for a new streak
	}
	w.armed, w.timer = time.Time{}, nil
	if w.changed != nil && w.changed(s.Since) {
		w.den.Progress() // it did something after all: a new streak
		return
	}
	w.done = true
	w.stop <- &deniedStop{Stuck: s, For: w.now().Sub(s.Since)}
}

func (w *denialWatch) disarm() {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timer, w.armed = nil, time.Time{}
}

// close stops watching; the CLI has ended.
func (w *denialWatch) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	w.disarm()
}

// stops is the channel a stop's cause arrives on; nil, which never
// delivers, without a watch.
func (w *denialWatch) stops() <-chan error {
	if w == nil {
		return nil
	}
	return w.stop
}

// maxWalk bounds the entries changedSince looks at.
const maxWalk = 200_000

// changedSince reports whether anything in the worktree dir (git's
// internals aside) was changed at or after t, by its modification time;
// a removed file changes its directory's. It looks at no more than
// maxWalk entries, and says no change when it found none among them.
func changedSince(dir string) func(t time.Time) bool {
	return func(t time.Time) bool {
		n, changed := 0, false
		_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if n++; n > maxWalk {
				return filepath.SkipAll
			}
			if e.Name() == ".git" && p != dir {
				if e.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if info, err := e.Info(); err == nil && !info.ModTime().Before(t) {
				changed = true
				return filepath.SkipAll
			}
			return nil
		})
		return changed
	}
}

// sandboxEndpoints are the endpoints the CLI is configured to reach, as
// the denial reader takes them: a connection failure that names no port
// is put on those the sandbox refuses.
func sandboxEndpoints(eps []adapter.Endpoint) []sandbox.Endpoint {
	out := make([]sandbox.Endpoint, 0, len(eps))
	for _, e := range eps {
		addr := net.JoinHostPort("", strconv.Itoa(int(e.Port)))
		if u, err := url.Parse(e.URL); err == nil && u.Hostname() != "" {
			addr = net.JoinHostPort(u.Hostname(), strconv.Itoa(int(e.Port)))
		}
		src := e.Source
		if !e.Opened {
			src += ", which attempts can write, so it opens no port"
		}
		out = append(out, sandbox.Endpoint{Addr: addr, Port: e.Port, Source: src})
	}
	return out
}

// deniedFailure is the attempt's SANDBOX_DENIED failure: what the CLI was
// stuck on, and what would let it through. then is how the run ended
// otherwise ("" when Drover stopped it).
func deniedFailure(runtime string, c *sandbox.Confinement, s sandbox.Stuck, took time.Duration, then string) *adapter.Error {
	var msg string
	if p, ok := strings.CutPrefix(s.What, "tcp/"); ok {
		addr := s.Addr
		if addr == "" || strings.HasPrefix(addr, ":") {
			addr = "port " + p
		}
		msg = fmt.Sprintf("connect to %s refused by the sandbox: add the port to runtimes.%s.sandbox.connect", addr, runtime)
		if s.Source != "" {
			msg += "; named by " + s.Source
		}
	} else {
		switch {
		case c != nil && c.Denied(s.What):
			msg = fmt.Sprintf("%s refused by the sandbox: it is the worker's own, which no runtime may reach", s.What)
		case c != nil && c.Readable(s.What):
			msg = fmt.Sprintf("writing %s refused by the sandbox: add it to runtimes.%s.sandbox.write", s.What, runtime)
		default:
			msg = fmt.Sprintf("%s refused by the sandbox: add it to runtimes.%s.sandbox.read (or .write)", s.What, runtime)
		}
	}
	msg += fmt.Sprintf("; refused %d times", s.Times)
	if took > 0 {
		msg += fmt.Sprintf(" in %s with nothing else done, then Drover stopped the CLI", took.Round(time.Second))
	}
	if then != "" {
		msg += ", and then the CLI failed: " + then
	}
	msg += "; first: " + s.Line
	return &adapter.Error{Class: drovertype.ClassSandboxDenied, Category: drovertype.CategoryInfrastructure, Message: msg}
}

// stuckClasses are the failures a CLI that was refused something, and
// did nothing since, is taken to have met because of it: it gave up, ran
// out of time, or stopped mid-way. A rate limit or refused credentials
// name their own cause. A refusal read within settle of the CLI's last
// progress is not taken so: which came first is not known (its two
// streams are read apart), and the sandbox is blamed only when sure.
var stuckClasses = []drovertype.ErrorClass{drovertype.ClassRuntimeError, drovertype.ClassTimeout, drovertype.ClassOutputMalformed}

// denied is the run's failure read with what the sandbox refused: the
// watch's stop, or a failure the CLI met stuck on a refusal; else failure
// as it is.
func (a *run) denied(failure *adapter.Error) *adapter.Error {
	if a.box == nil || failure == nil {
		return failure
	}
	var stop *deniedStop
	if errors.As(a.exit.StopCause, &stop) {
		return deniedFailure(a.ad.Name(), a.box.c, stop.Stuck, stop.For, "")
	}
	s, stuck := a.box.den.Stuck()
	stuck = stuck && (s.After.IsZero() || s.Since.Sub(s.After) > settle)
	for _, c := range stuckClasses {
		if stuck && failure.Class == c {
			return deniedFailure(a.ad.Name(), a.box.c, s, 0, string(failure.Class)+": "+failure.Message)
		}
	}
	return failure
}

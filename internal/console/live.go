package console

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/queue"
)

// Live pages are server-sent events. Every payload is JSON, which has no
// raw newline to break the stream's framing and escapes <, > and & so that
// no payload reads as markup whatever a page does with it; the page's
// script puts text in with textContent only (static/console.js).

// sse writes one page's event stream.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// heartbeat keeps idle streams open through proxies that close quiet
// connections.
const heartbeat = 15 * time.Second

func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	_, _ = io.WriteString(w, "retry: 3000\n\n")
	_ = s.rc.Flush()
	return s
}

// send writes one event; an error means the browser is gone.
func (s *sse) send(name string, v any) error {
	data, err := json.Marshal(cleaned(v))
	if err != nil {
		return err
	}
	var b bytes.Buffer
	b.WriteString("event: ")
	b.WriteString(name)
	b.WriteString("\ndata: ")
	b.Write(data)
	b.WriteString("\n\n")
	_ = s.rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.w.Write(b.Bytes()); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sse) ping() error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(s.w, ": ping\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

// rowsMsg updates a table: rows replace those of the same key (or are
// added, at the top with Prepend), Remove drops rows, Replace drops every
// row not sent, Order sorts them.
type rowsMsg struct {
	Table   string   `json:"t"`
	Rows    []row    `json:"rows,omitempty"`
	Remove  []string `json:"remove,omitempty"`
	Replace bool     `json:"replace,omitempty"`
	Prepend bool     `json:"prepend,omitempty"`
	// Order, when set, is every row's key in the order the table shows
	// them: rows that moved are put in place.
	Order []string `json:"order,omitempty"`
}

// rowDiff remembers the rows a page was sent, to send only changes.
type rowDiff map[string]string

// changed returns the rows that differ from those sent, and the keys sent
// before that are no longer there.
func (d rowDiff) changed(rows []row) (out []row, gone []string) {
	seen := make(map[string]bool, len(rows))
	for _, r := range rows {
		seen[r.Key] = true
		b, _ := json.Marshal(withoutAges(r))
		if d[r.Key] != string(b) {
			d[r.Key] = string(b)
			out = append(out, r)
		}
	}
	for k := range d {
		if !seen[k] {
			gone = append(gone, k)
			delete(d, k)
		}
	}
	slices.Sort(gone)
	return out, gone
}

// withoutAges is a row without the text of its ages, which the page
// keeps current itself: a row whose age alone changed is not sent again.
func withoutAges(r row) row {
	cells := make([]cell, len(r.Cells))
	for i, c := range r.Cells {
		if c.Since != 0 || c.Until != 0 {
			c.Text = ""
		}
		cells[i] = c
	}
	r.Cells = cells
	return r
}

// fieldDiff does the same for a page's fields.
type fieldDiff map[string]string

func (d fieldDiff) changed(fields map[string]cell) map[string]cell {
	out := map[string]cell{}
	for k, v := range fields {
		b, _ := json.Marshal(v)
		if d[k] != string(b) {
			d[k] = string(b)
			out[k] = v
		}
	}
	return out
}

// follow streams a live page: update runs at once and again after folds
// (wake), at most once per LiveInterval, until the browser leaves or the
// console closes. update returns false to end the stream.
func (c *Console) follow(w http.ResponseWriter, r *http.Request, wake <-chan struct{}, update func(s *sse) (bool, error)) {
	if !c.enter() {
		http.Error(w, "the console is stopping", http.StatusServiceUnavailable)
		return
	}
	defer c.leave()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	s := startSSE(w)
	if more, err := update(s); err != nil || !more {
		return
	}
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if s.ping() != nil {
				return
			}
			continue
		case <-wake:
		}
		// Folds that arrive while this waits are sent together.
		if wait := c.o.LiveInterval - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		if more, err := update(s); err != nil || !more {
			return
		}
	}
}

func (c *Console) flowsLive(w http.ResponseWriter, r *http.Request) {
	filter, page := flowsParams(r)
	wake, unsub := c.o.Folds.Subscribe()
	defer unsub()
	sent := rowDiff{}
	first := true
	c.follow(w, r, wake, func(s *sse) (bool, error) {
		// The page's flows: a new flow on the first page pushes its last
		// off it (gone).
		rows, _, _ := c.flowsOnPage(filter, page, c.o.Now())
		changed, gone := sent.changed(rows)
		if len(changed) == 0 && len(gone) == 0 && !first {
			return true, nil
		}
		first = false
		// Newest first, as the page lists them: a new flow goes on top.
		slices.Reverse(changed)
		return true, s.send("rows", rowsMsg{Table: "flows", Rows: changed, Remove: gone, Prepend: true})
	})
}

// tasksMsg is the graph's update: [index, state, attempts, error class]
// per task that changed, all of them at first.
type tasksMsg [][4]any

func (c *Console) flowLive(w http.ResponseWriter, r *http.Request) {
	flowID := r.PathValue("flow")
	filter, pg, _ := pageParams(r)
	wake, unsub := c.o.Folds.Subscribe()
	defer unsub()
	var tasks []taskLive
	rows, fields := rowDiff{}, fieldDiff{}
	c.follow(w, r, wake, func(s *sse) (bool, error) {
		snap := c.cache.flow(flowID)
		if snap == nil {
			return false, s.send("notice", cell{Text: "There is no flow " + flowID + "."})
		}
		if f := fields.changed(flowFields(snap.summary)); len(f) > 0 {
			if err := s.send("fields", f); err != nil {
				return false, err
			}
		}
		var delta tasksMsg
		for i, t := range snap.tasks {
			if tasks == nil || tasks[i] != t {
				delta = append(delta, [4]any{i, t.S, t.A, t.E})
			}
		}
		tasks = snap.tasks
		if len(delta) > 0 {
			if err := s.send("tasks", delta); err != nil {
				return false, err
			}
		}
		now := c.o.Now()
		var page []row
		c.o.Projection.Read(func(st *projection.State) {
			f := st.Flows[flowID]
			if f == nil {
				return
			}
			idx, _ := tablePage(st, f, filter, pg, c.o.PageSize)
			for _, i := range idx {
				if t := st.Task(f.ID, f.Order[i]); t != nil {
					page = append(page, taskRow(st, t, i, now))
				}
			}
		})
		if changed, gone := rows.changed(page); len(changed) > 0 || len(gone) > 0 {
			return true, s.send("rows", rowsMsg{Table: "tasks", Rows: changed, Remove: gone})
		}
		return true, nil
	})
}

func (c *Console) taskLive(w http.ResponseWriter, r *http.Request) {
	flowID, taskID := r.PathValue("flow"), r.PathValue("task")
	wake, unsub := c.o.Folds.Subscribe()
	defer unsub()
	rows, fields := rowDiff{}, fieldDiff{}
	c.follow(w, r, wake, func(s *sse) (bool, error) {
		now := c.o.Now()
		var f map[string]cell
		var attempts []row
		c.o.Projection.Read(func(st *projection.State) {
			t := st.Task(flowID, taskID)
			if t == nil {
				return
			}
			f = taskFields(st, t)
			var prev *projection.Attempt
			for _, a := range taskAttempts(st, t) {
				attempts = append(attempts, attemptRow(a, prev, now))
				prev = a
			}
		})
		if f == nil {
			return false, s.send("notice", cell{Text: "There is no task " + taskID + " in flow " + flowID + "."})
		}
		if ch := fields.changed(f); len(ch) > 0 {
			if err := s.send("fields", ch); err != nil {
				return false, err
			}
		}
		if changed, gone := rows.changed(attempts); len(changed) > 0 || len(gone) > 0 {
			return true, s.send("rows", rowsMsg{Table: "attempts", Rows: changed, Remove: gone})
		}
		return true, nil
	})
}

// outputMsg is a piece of an attempt's output, cleaned (termText).
type outputMsg struct {
	Stream string `json:"s"`
	Text   string `json:"t"`
}

// outputBatch is how long output chunks are gathered into one event.
const outputBatch = 100 * time.Millisecond

// outputQuiet is how long the output stream must stay silent, once the
// attempt has ended, for all of its output to count as sent.
const outputQuiet = 1500 * time.Millisecond

func (c *Console) attemptLive(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("attempt")
	var flowID string
	c.o.Projection.Read(func(st *projection.State) {
		if a := st.Attempts[id]; a != nil {
			flowID = a.Flow
		}
	})
	if flowID == "" {
		http.NotFound(w, r)
		return
	}
	if !c.enter() {
		http.Error(w, "the console is stopping", http.StatusServiceUnavailable)
		return
	}
	defer c.leave()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(c.ctx, cancel)()
	wake, unsub := c.o.Folds.Subscribe()
	defer unsub()
	l := &attemptLive{c: c, id: id, ctx: ctx, fields: fieldDiff{}, sentSeqs: map[uint64]bool{}, first: true}
	if r.URL.Query().Get("output") == "1" && c.o.Artifacts != nil {
		if out, err := c.o.Artifacts.Output(ctx, flowID, id); err == nil {
			defer out.Stop()
			context.AfterFunc(ctx, out.Stop)
			l.chunks = make(chan outputMsg, 64)
			go readOutput(ctx, out, l.chunks)
		}
	}
	l.s = startSSE(w)
	if l.update() != nil {
		return
	}
	l.run(wake)
}

// attemptLive is one page's live stream of an attempt: its phases, its
// fields and, when asked, its output.
type attemptLive struct {
	c        *Console
	id       string
	ctx      context.Context
	s        *sse
	chunks   chan outputMsg // nil once all output is out, or when none is asked
	fields   fieldDiff
	sentSeqs map[uint64]bool
	timeline []timelineEntry
	phaseKey string
	// ended: the attempt has ended; endedAtFirst: it had when the page
	// opened.
	ended, endedAtFirst, first bool
}

// run sends output and updates until the attempt has ended and its output
// is out, or the page goes.
func (l *attemptLive) run(wake <-chan struct{}) {
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	quiet := time.NewTimer(outputQuiet)
	defer quiet.Stop()
	var pending []outputMsg
	var flush <-chan time.Time
	last := time.Now()
	for {
		if l.ended && l.chunks == nil {
			msg := cell{} // a page opened after the end has all there is
			if !l.endedAtFirst {
				msg.Text = "The attempt has ended: reload for its report, diff and stored log."
			}
			_ = l.s.send("end", msg)
			return
		}
		select {
		case <-l.ctx.Done():
			return
		case <-beat.C:
			if l.s.ping() != nil {
				return
			}
		case m, ok := <-l.chunks:
			if !ok {
				l.chunks = nil
				continue
			}
			pending = append(pending, m)
			if flush == nil {
				flush = time.After(outputBatch)
			}
			quiet.Reset(outputQuiet)
		case <-flush:
			flush = nil
			if l.s.send("output", mergeOutput(pending)) != nil {
				return
			}
			pending = pending[:0]
		case <-quiet.C:
			if l.ended && len(pending) == 0 {
				l.chunks = nil // all out: nothing came for a while after the end
			}
			quiet.Reset(outputQuiet)
		case <-wake:
			if !l.c.pace(l.ctx, last) {
				return
			}
			last = time.Now()
			if l.update() != nil {
				return
			}
			if l.ended {
				quiet.Reset(outputQuiet)
			}
		}
	}
}

// pace waits out what is left of the live interval since last; false when
// the page went meanwhile.
func (c *Console) pace(ctx context.Context, last time.Time) bool {
	if wait := c.o.LiveInterval - time.Since(last); wait > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
	return true
}

// update sends what changed of the attempt: new timeline rows and fields.
func (l *attemptLive) update() error {
	a, seqs := l.read()
	if a == nil {
		return nil
	}
	if err := l.sendTimeline(seqs); err != nil {
		return err
	}
	now := l.c.o.Now()
	f := attemptFields(a, now)
	end := now
	if !a.EndedAt.IsZero() {
		end = a.EndedAt
	}
	f["bar"] = cell{Bar: phaseBar(l.timeline, end)}
	if ch := l.fields.changed(f); len(ch) > 0 {
		if err := l.s.send("fields", ch); err != nil {
			return err
		}
	}
	l.ended = a.State.Terminal()
	if l.first {
		l.endedAtFirst, l.first = l.ended, false
	}
	return nil
}

// read copies the attempt and, when it changed, the sequences of its
// events.
func (l *attemptLive) read() (*projection.Attempt, []uint64) {
	var a *projection.Attempt
	var seqs []uint64
	l.c.o.Projection.Read(func(st *projection.State) {
		x := st.Attempts[l.id]
		if x == nil {
			return
		}
		cp := *x
		a = &cp
		// The events are looked for again only when the attempt changed.
		key := string(x.Phase) + "|" + string(x.State) + "|" + x.EndedAt.String()
		if x.Error != nil {
			key += "|" + string(x.Error.Class)
		}
		if key != l.phaseKey {
			l.phaseKey = key
			seqs = attemptEventSeqs(st, l.id, maxTimeline)
		}
	})
	return a, seqs
}

// sendTimeline sends the timeline again when events not sent yet are among
// seqs.
func (l *attemptLive) sendTimeline(seqs []uint64) error {
	var fresh []uint64
	for _, q := range seqs {
		if !l.sentSeqs[q] {
			fresh = append(fresh, q)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
	entries := l.c.readTimeline(rctx, fresh)
	cancel()
	l.timeline = append(l.timeline, entries...)
	slices.SortFunc(l.timeline, func(x, y timelineEntry) int { return int(x.Seq) - int(y.Seq) })
	var start time.Time
	if len(l.timeline) > 0 {
		start = l.timeline[0].Time
	}
	var rows []row
	for _, e := range l.timeline {
		l.sentSeqs[e.Seq] = true
		rows = append(rows, e.row(start))
	}
	return l.s.send("rows", rowsMsg{Table: "timeline", Rows: rows})
}

// readOutput cleans an attempt's output chunks, per stream, into out.
func readOutput(ctx context.Context, in OutputStream, out chan<- outputMsg) {
	defer close(out)
	cleaners := map[string]*termText{}
	for {
		ch, _, err := in.Next()
		if err != nil {
			return
		}
		t := cleaners[ch.Stream]
		if t == nil {
			t = &termText{}
			cleaners[ch.Stream] = t
		}
		text := t.write(ch.Text)
		if text == "" {
			continue
		}
		select {
		case out <- outputMsg{Stream: ch.Stream, Text: text}:
		case <-ctx.Done():
			return
		}
	}
}

// mergeOutput joins consecutive pieces of the same stream.
func mergeOutput(ms []outputMsg) []outputMsg {
	var out []outputMsg
	for _, m := range ms {
		if n := len(out); n > 0 && out[n-1].Stream == m.Stream {
			out[n-1].Text += m.Text
			continue
		}
		out = append(out, m)
	}
	return out
}

// workersRefresh re-reads the registry even without a change, so that a
// worker whose registration lapsed leaves the page.
const workersRefresh = 15 * time.Second

// workersLive follows the registry (its bucket's changes, and every
// workersRefresh) for the workers and runtimes tables, and the fold for
// the cooldowns table. A fold does not re-read the registry: it only
// reads the projection's cooldowns, and sends the rows that changed.
func (c *Console) workersLive(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	wl := &workersStream{c: c, ctx: ctx, wake: make(chan struct{}, 1), cooldowns: rowDiff{}, note: fieldDiff{}}
	defer wl.stopTimer()
	wl.registry.Store(c.o.Fleet != nil)
	folds, unsub := c.o.Folds.Subscribe()
	defer unsub()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-folds:
				wl.poke()
			}
		}
	}()
	if c.o.Fleet != nil {
		if changes, err := c.o.Fleet.WatchWorkers(ctx); err == nil {
			go func() {
				for range changes {
					wl.registry.Store(true)
					wl.poke()
				}
			}()
		}
		go func() {
			t := time.NewTicker(workersRefresh)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					wl.registry.Store(true)
					wl.poke()
				}
			}
		}()
	}
	c.follow(w, r, wl.wake, wl.update)
}

// workersStream is one workers page's live stream.
type workersStream struct {
	c    *Console
	ctx  context.Context
	wake chan struct{}
	// registry: the registry may have changed since it was last read.
	registry  atomic.Bool
	cooldowns rowDiff
	note      fieldDiff
	// timer wakes the stream when the next cooldown ends, for its row to
	// say so; at is when it is set for.
	mu    sync.Mutex
	timer *time.Timer
	at    time.Time
}

func (wl *workersStream) poke() {
	select {
	case wl.wake <- struct{}{}:
	default:
	}
}

func (wl *workersStream) update(s *sse) (bool, error) {
	if wl.registry.Swap(false) {
		rctx, cancel := context.WithTimeout(wl.ctx, 10*time.Second)
		ws, err := wl.c.o.Fleet.Workers(rctx)
		cancel()
		if err == nil { // else keep what is shown; the next change tries again
			workers, runtimes := workerRows(ws, wl.c.o.Now())
			if err := s.send("rows", rowsMsg{Table: "workers", Rows: workers, Replace: true}); err != nil {
				return false, err
			}
			if err := s.send("rows", rowsMsg{Table: "runtimes", Rows: runtimes, Replace: true}); err != nil {
				return false, err
			}
		}
	}
	now := wl.c.o.Now()
	rows, note, next := wl.c.readCooldowns(now)
	wl.wakeAt(next, now)
	if f := wl.note.changed(map[string]cell{"cooldowns-note": note}); len(f) > 0 {
		if err := s.send("fields", f); err != nil {
			return false, err
		}
	}
	changed, gone := wl.cooldowns.changed(rows)
	if len(changed) == 0 && len(gone) == 0 {
		return true, nil
	}
	// A row that changed may move: the order comes along.
	order := make([]string, len(rows))
	for i, r := range rows {
		order[i] = r.Key
	}
	return true, s.send("rows", rowsMsg{Table: "cooldowns", Rows: changed, Remove: gone, Order: order})
}

// wakeAt sets the timer for next, when the next cooldown stops cooling;
// zero for none.
func (wl *workersStream) wakeAt(next, now time.Time) {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if next.Equal(wl.at) {
		return
	}
	if wl.timer != nil {
		wl.timer.Stop()
		wl.timer = nil
	}
	wl.at = next
	if !next.IsZero() {
		wl.timer = time.AfterFunc(max(next.Sub(now), 0)+time.Millisecond, wl.poke)
	}
}

func (wl *workersStream) stopTimer() {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if wl.timer != nil {
		wl.timer.Stop()
	}
}

func (c *Console) deadLettersLive(w http.ResponseWriter, r *http.Request) {
	if c.o.DeadLetters == nil {
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	in, err := c.o.DeadLetters.WatchDeadLetters(ctx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	wake := make(chan struct{}, 1)
	var mu sync.Mutex
	var fresh []queue.DeadLetter
	go func() {
		for d := range in {
			mu.Lock()
			fresh = append(fresh, d)
			mu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	c.follow(w, r, wake, func(s *sse) (bool, error) {
		mu.Lock()
		ds := fresh
		fresh = nil
		mu.Unlock()
		if len(ds) == 0 {
			return true, nil
		}
		now := c.o.Now()
		var rows []row
		for _, d := range ds { // oldest first: each goes on top of the one before
			rows = append(rows, deadLetterRow(d, now))
		}
		return true, s.send("rows", rowsMsg{Table: "deadletters", Rows: rows, Prepend: true})
	})
}

// writeCompressed gzips a response for a browser that takes it.
func writeCompressed(w http.ResponseWriter, r *http.Request, write func(io.Writer) error) {
	if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		_ = write(w)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	w.Header().Add("Vary", "Accept-Encoding")
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	_ = write(zw)
	_ = zw.Close()
}

package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/queue"
)

// flowFilters are the states the flows page filters by.
var flowFilters = []string{"running", "paused", "succeeded", "failed", "cancelled"}

func flowMatches(s flowSummary, filter string) bool {
	switch filter {
	case "":
		return true
	case "paused":
		return s.Paused && !s.Terminal
	case "running":
		return !s.Terminal
	}
	return s.State.Class == "state st-"+filter && s.Terminal
}

type flowsView struct {
	Filter      string
	Filters     []string
	Rows        []row
	Total       int
	Page, Pages int
	Prev, Next  string
}

// flowsParams are the flows page's filter and page number.
func flowsParams(r *http.Request) (filter string, page int) {
	filter = r.URL.Query().Get("state")
	if filter != "" && !slices.Contains(flowFilters, filter) {
		filter = ""
	}
	page, _ = strconv.Atoi(r.URL.Query().Get("page"))
	return filter, max(page, 1)
}

// flowsOnPage is one page of the flows list (newest first), filtered by
// state, with the page it is and the number of pages: a thousand flows
// are not one table.
func (c *Console) flowsOnPage(filter string, page int, now time.Time) (rows []row, pg, pages int) {
	var match []flowSummary
	for _, s := range c.cache.flows() {
		if flowMatches(s, filter) {
			match = append(match, s)
		}
	}
	pages = max(1, (len(match)+c.o.PageSize-1)/c.o.PageSize)
	pg = min(page, pages)
	lo := (pg - 1) * c.o.PageSize
	for _, s := range match[lo:min(lo+c.o.PageSize, len(match))] {
		rows = append(rows, s.row(now))
	}
	return rows, pg, pages
}

// flowsLink is the flows page's address for a filter and a page.
func flowsLink(filter string, page int) string {
	q := url.Values{}
	if filter != "" {
		q.Set("state", filter)
	}
	if page > 1 {
		q.Set("page", strconv.Itoa(page))
	}
	if len(q) == 0 {
		return "/ui/"
	}
	return "/ui/?" + q.Encode()
}

func (c *Console) flowsPage(w http.ResponseWriter, r *http.Request) {
	filter, page := flowsParams(r)
	v := flowsView{Filter: filter, Filters: flowFilters, Total: len(c.cache.flows())}
	v.Rows, v.Page, v.Pages = c.flowsOnPage(filter, page, c.o.Now())
	if v.Page > 1 {
		v.Prev = flowsLink(filter, v.Page-1)
	}
	if v.Page < v.Pages {
		v.Next = flowsLink(filter, v.Page+1)
	}
	p := c.newPage(r, "Flows", "flows")
	p.Live = "/ui/live?" + url.Values{"state": {filter}, "page": {strconv.Itoa(v.Page)}}.Encode()
	p.Content = v
	c.render(w, http.StatusOK, "flows", p)
}

type flowView struct {
	ID, Name, Repo, Base string
	Summary              flowSummary
	Fields               map[string]cell
	Tasks                int
	MaxParallel          int
	Cancel               *projection.Cancel
	Rows                 []row
	Filter               string
	Filters              []string
	Page, Pages          int
	PageLink             func(int) string
	Prev, Next           string
	Graph                string
}

// flowFields are the flow page's live header fields.
func flowFields(s flowSummary) map[string]cell {
	ended := cell{Text: "—"}
	if !s.Ended.IsZero() {
		ended = cell{Text: s.Ended.UTC().Format(time.RFC3339)}
	}
	return map[string]cell{
		"state":        s.State,
		"progress":     s.Counts.bar(),
		"counts":       {Text: s.Counts.text()},
		"spend":        s.Spend,
		"budget":       s.Budget,
		"integration":  s.Integration,
		"pull_request": s.PullRequest,
		"ended":        ended,
	}
}

// tablePage selects one page of a flow's tasks, filtered by state; it
// returns the tasks' indices in the flow's order.
func tablePage(st *projection.State, f *projection.Flow, filter string, page, size int) (idx []int, pages int) {
	var all []int
	for i, id := range f.Order {
		if filter == "" {
			all = append(all, i)
			continue
		}
		if t := st.Task(f.ID, id); t != nil && string(t.State) == filter {
			all = append(all, i)
		}
	}
	pages = max(1, (len(all)+size-1)/size)
	page = min(max(page, 1), pages)
	lo := (page - 1) * size
	return all[lo:min(lo+size, len(all))], pages
}

func pageParams(r *http.Request) (filter string, page int, task string) {
	q := r.URL.Query()
	filter = q.Get("state")
	if filter != "" && !slices.Contains(taskStates, drovertype.TaskState(filter)) {
		filter = ""
	}
	page, _ = strconv.Atoi(q.Get("page"))
	return filter, max(page, 1), q.Get("task")
}

func (c *Console) flowPage(w http.ResponseWriter, r *http.Request) {
	flowID := r.PathValue("flow")
	filter, pg, focus := pageParams(r)
	now := c.o.Now()
	var v *flowView
	c.o.Projection.Read(func(st *projection.State) {
		f := st.Flows[flowID]
		if f == nil {
			return
		}
		if focus != "" { // the page that holds this task
			if i := slices.Index(f.Order, focus); i >= 0 {
				filter, pg = "", i/c.o.PageSize+1
			}
		}
		s := summarize(st, f)
		v = &flowView{ID: f.ID, Name: f.Spec.Name, Repo: f.Spec.Repo, Base: f.Spec.Base, Summary: s,
			Fields: flowFields(s), Tasks: len(f.Order), MaxParallel: f.MaxParallel, Cancel: f.Cancel,
			Filter: filter, Filters: stateNames(), Graph: flowHref(f.ID) + "/graph.json"}
		idx, pages := tablePage(st, f, filter, pg, c.o.PageSize)
		v.Page, v.Pages = min(pg, pages), pages
		for _, i := range idx {
			if t := st.Task(f.ID, f.Order[i]); t != nil {
				v.Rows = append(v.Rows, taskRow(st, t, i, now))
			}
		}
	})
	if v == nil {
		c.notFound(w, r, "no flow "+flowID)
		return
	}
	link := func(page int) string {
		q := url.Values{}
		if v.Filter != "" {
			q.Set("state", v.Filter)
		}
		if page > 1 {
			q.Set("page", strconv.Itoa(page))
		}
		if len(q) == 0 {
			return flowHref(v.ID)
		}
		return flowHref(v.ID) + "?" + q.Encode()
	}
	if v.Page > 1 {
		v.Prev = link(v.Page - 1)
	}
	if v.Page < v.Pages {
		v.Next = link(v.Page + 1)
	}
	p := c.newPage(r, "Flow "+v.ID, "flows")
	q := url.Values{"page": {strconv.Itoa(v.Page)}}
	if v.Filter != "" {
		q.Set("state", v.Filter)
	}
	p.Live = flowHref(v.ID) + "/live?" + q.Encode()
	p.Content = v
	c.render(w, http.StatusOK, "flow", p)
}

func stateNames() []string {
	out := make([]string, len(taskStates))
	for i, s := range taskStates {
		out[i] = string(s)
	}
	return out
}

// graphJSON is the flow's laid-out graph with its tasks' states, in
// columns to stay small for 10,000 tasks.
func (c *Console) graphJSON(w http.ResponseWriter, r *http.Request) {
	flowID := r.PathValue("flow")
	g := c.cache.graph(flowID)
	if g == nil {
		http.NotFound(w, r)
		return
	}
	states := c.cache.flow(flowID)
	type out struct {
		W      int      `json:"w"`
		H      int      `json:"h"`
		NodeW  int      `json:"nw"`
		NodeH  int      `json:"nh"`
		States []string `json:"states"`
		IDs    []string `json:"ids"`
		X      []int    `json:"x"`
		Y      []int    `json:"y"`
		Tasks  [][]any  `json:"tasks"` // [state index, attempts, error class] per task
		Edges  [][]int  `json:"edges"` // from, to, then x, y of each point on the way
		Flow   string   `json:"flow"`
		Href   string   `json:"href"`
	}
	o := out{W: g.layout.Width, H: g.layout.Height, NodeW: NodeW, NodeH: NodeH, States: stateNames(), IDs: g.ids,
		X: g.layout.X, Y: g.layout.Y, Flow: flowID, Href: flowHref(flowID) + "/tasks/"}
	if states != nil {
		o.Tasks = make([][]any, len(states.tasks))
		for i, t := range states.tasks {
			o.Tasks[i] = []any{t.S, t.A, t.E}
		}
	}
	o.Edges = make([][]int, len(g.layout.Edges))
	for i, e := range g.layout.Edges {
		pts := make([]int, 0, 2+2*len(e.Via))
		pts = append(pts, e.From, e.To)
		for _, p := range e.Via {
			pts = append(pts, p.X, p.Y)
		}
		o.Edges[i] = pts
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	o.Tasks = cleaned(o.Tasks) // error classes come from workers
	writeCompressed(w, r, func(wr io.Writer) error { return json.NewEncoder(wr).Encode(o) })
}

type taskView struct {
	Flow, ID        string
	State           cell
	Runtime         string
	Plan            *planView
	Prompt          string
	Error           *event.ErrorInfo
	Retry           *projection.PendingRetry
	DependsOn       []string
	Dependents      []string
	Attempts        []row
	Decisions       []string
	Terminal        bool
	Retryable       bool
	Current         string
	ResultBranch    string
	ResultCommit    string
	Verify          []string
	CancelRequested bool
	Fields          map[string]cell
}

type planView struct {
	Runtime, Validator string
	Fallback           []string
	MaxAttempts        int
	Timeout            string
}

func taskFields(st *projection.State, t *projection.Task) map[string]cell {
	f := map[string]cell{"state": {Text: string(t.State), Class: "state st-" + string(t.State)},
		"wait": waitCell(st, t), "spend": spendCell(t.Spend), "budget": budgetCell(t.Budget, t.Spend, 0)}
	if !t.Budget.Limited() {
		f["budget"] = cell{Text: "none of its own: its flow's applies"}
	}
	if e := taskError(st, t); e != nil {
		f["error"] = cell{Text: string(e.Class) + ": " + oneLine(e.Message, 500), Class: "err"}
	} else {
		f["error"] = cell{Text: "—"}
	}
	f["retry"] = cell{Text: "—"}
	if r := t.Retry; r != nil {
		f["retry"] = cell{Text: string(r.Strategy) + ": attempt " + strconv.Itoa(r.N) + " on " + r.Runtime +
			" at " + r.DueAt.UTC().Format(time.RFC3339) + " (" + oneLine(r.Reason, 300) + ")"}
	}
	return f
}

func (c *Console) taskPage(w http.ResponseWriter, r *http.Request) {
	flowID, taskID := r.PathValue("flow"), r.PathValue("task")
	now := c.o.Now()
	var v *taskView
	var fields map[string]cell
	var recoveries []uint64
	c.o.Projection.Read(func(st *projection.State) {
		f := st.Flows[flowID]
		t := st.Task(flowID, taskID)
		if f == nil || t == nil {
			return
		}
		v = &taskView{Flow: f.ID, ID: t.ID, Runtime: t.Runtime, DependsOn: slices.Clone(t.DependsOn),
			Terminal: t.State.Terminal(), Current: t.Attempt, ResultBranch: t.ResultBranch, ResultCommit: t.ResultCommit,
			Retryable:       t.State == drovertype.TaskFailed || t.State == drovertype.TaskCancelled || t.State == drovertype.TaskBlocked,
			CancelRequested: t.CancelRequested}
		fields = taskFields(st, t)
		for i := range f.Spec.Tasks {
			st := &f.Spec.Tasks[i]
			if st.ID == t.ID {
				v.Prompt, v.Verify = st.Prompt, st.Verify
			}
			if slices.Contains(st.DependsOn, t.ID) {
				v.Dependents = append(v.Dependents, st.ID)
			}
		}
		if p := t.Plan; p != nil {
			pv := &planView{Runtime: p.Worker.Name + modelSuffix(p.Worker.Model)}
			if p.Validator != nil {
				pv.Validator = p.Validator.Name
			}
			pv.Fallback = p.Retry.Fallback
			pv.MaxAttempts = p.Retry.MaxAttempts
			if p.Timeout > 0 {
				pv.Timeout = time.Duration(p.Timeout).String()
			}
			v.Plan = pv
		}
		as := taskAttempts(st, t)
		var prev *projection.Attempt
		for _, a := range as {
			v.Attempts = append(v.Attempts, attemptRow(a, prev, now))
			prev = a
		}
		recoveries = recoverySeqs(st, as)
	})
	if v == nil {
		c.notFound(w, r, "no task "+taskID+" in flow "+flowID)
		return
	}
	if len(recoveries) > 0 && c.o.Artifacts != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		evs, _ := c.o.Artifacts.Events(ctx, recoveries)
		cancel()
		for _, se := range evs {
			v.Decisions = append(v.Decisions, "after "+se.Event.Attempt+": "+summarizeEvent(se.Event))
		}
	}
	p := c.newPage(r, "Task "+v.ID, "flows")
	p.Live = taskHref(v.Flow, v.ID) + "/live"
	v.Fields = fields
	p.Content = v
	c.render(w, http.StatusOK, "task", p)
}

type attemptView struct {
	A             projection.Attempt
	Report        *event.Report
	Fields        map[string]cell
	Prompt        string
	PromptIsRetry bool
	Timeline      []row
	Bar           []barSeg
	Log           string
	LogNote       string
	LiveOutput    bool
	Diff          []diffLine
	DiffNote      string
	Current       bool
	Files         []fileChange
	Usage         *event.Usage
	Cost          string
}

type fileChange struct{ Change, Path string }

func attemptFields(a *projection.Attempt, now time.Time) map[string]cell {
	f := map[string]cell{
		"state":  {Text: string(a.State), Class: "state st-" + string(a.State)},
		"phase":  {Text: string(a.Phase)},
		"worker": {Text: a.Worker},
	}
	switch {
	case !a.EndedAt.IsZero() && !a.ClaimedAt.IsZero():
		f["took"] = cell{Text: durationText(a.EndedAt.Sub(a.ClaimedAt))}
	case !a.ClaimedAt.IsZero():
		f["took"] = ageCell(a.ClaimedAt, now)
	default:
		f["took"] = cell{Text: "—"}
	}
	if a.Error != nil {
		f["error"] = cell{Text: string(a.Error.Class) + ": " + oneLine(a.Error.Message, 500), Class: "err"}
	} else {
		f["error"] = cell{Text: "—"}
	}
	return f
}

// readTimeline reads the events about an attempt.
func (c *Console) readTimeline(ctx context.Context, seqs []uint64) []timelineEntry {
	if c.o.Artifacts == nil || len(seqs) == 0 {
		return nil
	}
	evs, _ := c.o.Artifacts.Events(ctx, seqs)
	var out []timelineEntry
	for _, se := range evs {
		ev := se.Event
		out = append(out, timelineEntry{Seq: se.Seq, Time: ev.Time, Type: string(ev.Type), Summary: summarizeEvent(ev)})
	}
	return out
}

// maxTimeline bounds the events an attempt page shows.
const maxTimeline = 500

// maxShownLog is the most of a log the page holds; the rest is a link away.
const maxShownLog = 1 << 20

func (c *Console) attemptPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("attempt")
	now := c.o.Now()
	var v *attemptView
	var seqs []uint64
	c.o.Projection.Read(func(st *projection.State) {
		a := st.Attempts[id]
		if a == nil {
			return
		}
		v = &attemptView{A: *a, Fields: attemptFields(a, now), Prompt: a.Prompt, PromptIsRetry: a.Prompt != ""}
		if a.Report != nil {
			rep := *a.Report
			v.Report = &rep
		}
		if t := st.Task(a.Flow, a.Task); t != nil {
			v.Current = t.Attempt == a.ID && !a.State.Terminal()
		}
		if v.Prompt == "" {
			if f := st.Flows[a.Flow]; f != nil {
				for i := range f.Spec.Tasks {
					if f.Spec.Tasks[i].ID == a.Task {
						v.Prompt = f.Spec.Tasks[i].Prompt
					}
				}
			}
		}
		seqs = attemptEventSeqs(st, a.ID, maxTimeline)
	})
	if v == nil {
		c.notFound(w, r, "no attempt "+id)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	entries := c.readTimeline(ctx, seqs)
	var start time.Time
	if len(entries) > 0 {
		start = entries[0].Time
	}
	for _, e := range entries {
		v.Timeline = append(v.Timeline, e.row(start))
	}
	end := now
	if !v.A.EndedAt.IsZero() {
		end = v.A.EndedAt
	}
	v.Bar = phaseBar(entries, end)
	v.Fields["bar"] = cell{Bar: v.Bar}
	if rep := v.Report; rep != nil {
		for _, f := range rep.FilesCreated {
			v.Files = append(v.Files, fileChange{"created", f})
		}
		for _, f := range rep.FilesModified {
			v.Files = append(v.Files, fileChange{"modified", f})
		}
		for _, f := range rep.FilesDeleted {
			v.Files = append(v.Files, fileChange{"deleted", f})
		}
		v.Usage = rep.Usage
		c.loadLog(ctx, v)
		c.loadDiff(ctx, v)
	} else {
		v.LiveOutput = true
	}
	p := c.newPage(r, "Attempt "+id, "flows")
	p.Live = attemptHref(id) + "/live"
	if v.LiveOutput {
		p.Live += "?output=1"
	}
	p.Content = v
	c.render(w, http.StatusOK, "attempt", p)
}

// loadLog reads the stored log of an ended attempt, its last
// maxShownLog bytes; without one, the page streams the output instead.
func (c *Console) loadLog(ctx context.Context, v *attemptView) {
	if v.Report.LogObject == "" || c.o.Artifacts == nil {
		v.LiveOutput = true
		return
	}
	rc, err := c.o.Artifacts.Object(ctx, v.Report.LogObject)
	if err != nil {
		v.LogNote = "The stored log cannot be read (" + err.Error() + "); this is the streamed output."
		v.LiveOutput = true
		return
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 64<<20))
	if err != nil {
		v.LogNote = "The stored log could not be read whole: " + err.Error()
	}
	if len(b) > maxShownLog {
		v.LogNote = "The log's last " + strconv.Itoa(maxShownLog>>10) + " KiB; the whole log is a link away."
		b = b[len(b)-maxShownLog:]
	}
	v.Log = cleanTerminal(string(b))
}

func (c *Console) loadDiff(ctx context.Context, v *attemptView) {
	rep := v.Report
	if rep.PatchObject != "" && c.o.Artifacts != nil {
		rc, err := c.o.Artifacts.Object(ctx, rep.PatchObject)
		if err == nil {
			b, rerr := io.ReadAll(io.LimitReader(rc, maxDiffBytes+1))
			rc.Close()
			if rerr == nil {
				var cut bool
				v.Diff, cut = highlightDiff(string(b))
				if cut {
					v.DiffNote = "The patch is cut short here; `controller diff " + v.A.ID + "` prints it whole."
				}
				return
			}
			err = rerr
		}
		v.DiffNote = "The patch cannot be read from the object store (" + err.Error() + "); this is the report's diff stat."
	}
	stat := rep.DiffSummary
	if stat == "" {
		stat = v.A.DiffStat
	}
	if stat == "" && v.DiffNote == "" {
		v.DiffNote = "The attempt changed no file."
	}
	for _, l := range strings.Split(strings.TrimRight(stat, "\n"), "\n") {
		if l != "" {
			v.Diff = append(v.Diff, diffLine{Class: "meta", Segs: []seg{{Text: cleanTerminal(l)}}})
		}
	}
}

// attemptLog serves an attempt's whole log as cleaned plain text: the
// stored log once it has reported, else the output streamed so far.
func (c *Console) attemptLog(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("attempt")
	var a *projection.Attempt
	c.o.Projection.Read(func(st *projection.State) {
		if x := st.Attempts[id]; x != nil {
			cp := *x
			a = &cp
		}
	})
	if a == nil || c.o.Artifacts == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", "inline")
	ctx := r.Context()
	var t termText
	if a.Report != nil && a.Report.LogObject != "" {
		if rc, err := c.o.Artifacts.Object(ctx, a.Report.LogObject); err == nil {
			defer rc.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := rc.Read(buf)
				_, _ = io.WriteString(w, t.write(string(buf[:n])))
				if err != nil {
					break
				}
			}
			_, _ = io.WriteString(w, t.flush())
			return
		}
	}
	out, err := c.o.Artifacts.Output(ctx, a.Flow, a.ID)
	if err != nil {
		http.Error(w, "no output: "+err.Error(), http.StatusNotFound)
		return
	}
	defer out.Stop()
	chunks := make(chan event.OutputChunkData)
	go func() {
		defer close(chunks)
		for {
			ch, pending, err := out.Next()
			if err != nil {
				return
			}
			select {
			case chunks <- ch:
			case <-ctx.Done():
				return
			}
			if pending == 0 {
				return
			}
		}
	}()
	timeout := time.NewTimer(2 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case ch, ok := <-chunks:
			if !ok {
				_, _ = io.WriteString(w, t.flush())
				return
			}
			_, _ = io.WriteString(w, t.write(ch.Text))
		case <-timeout.C: // nothing streamed
			out.Stop()
			_, _ = io.WriteString(w, t.flush())
			return
		}
	}
}

type workersView struct {
	Workers   []row
	Runtimes  []row
	Cooldowns []row
	Note      cell // about the cooldowns table: empty, or how many it leaves out
	Error     string
}

// knownFields are a registration's fields this build shows in columns;
// the others (of newer workers) are shown as they are.
var knownFields = map[string]bool{"id": true, "host": true, "pool": true, "slots": true, "busy": true,
	"started": true, "seen": true, "runtimes": true, "not_claiming": true, "sandbox": true}

var knownRuntimeFields = map[string]bool{"name": true, "adapter": true, "binary": true, "version": true,
	"healthy": true, "error": true, "checked": true, "capabilities": true, "sandbox": true}

// extraFields lists the fields of raw that known does not name, as
// "name: value" with compact JSON values, in name order.
func extraFields(raw json.RawMessage, known map[string]bool) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	var keys []string
	for k := range m {
		if !known[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+": "+oneLine(string(m[k]), 300))
	}
	return strings.Join(parts, "; ")
}

func workerRows(ws []*fleet.Registration, now time.Time) (workers, runtimes []row) {
	for _, w := range ws {
		workers = append(workers, workerRow(w, now))
		runtimes = append(runtimes, runtimeRows(w, now)...)
	}
	return workers, runtimes
}

// workerRow is a worker in the workers table; one whose attempts may run
// unconfined is flagged.
func workerRow(w *fleet.Registration, now time.Time) row {
	healthy := 0
	for _, rt := range w.Runtimes {
		if rt.Healthy {
			healthy++
		}
	}
	load := cell{Text: strconv.Itoa(w.Busy) + "/" + strconv.Itoa(w.Slots), Class: "progress"}
	if w.Finishing > 0 {
		load.Text += " +" + strconv.Itoa(w.Finishing) + " finishing"
	}
	if w.Slots > 0 {
		load.Bar = []barSeg{{Class: "st-running", W: 100 * float64(min(w.Busy, w.Slots)) / float64(w.Slots)}}
	}
	claiming := cell{Text: "claiming", Class: "ok"}
	if w.NotClaiming != "" {
		claiming = cell{Text: w.NotClaiming, Class: "err"}
	}
	box, unconfined := sandboxCell(w.Sandbox)
	r := row{Key: w.ID, Cells: []cell{
		{Text: w.ID}, {Text: w.Host}, {Text: w.Pool}, load,
		{Text: strconv.Itoa(healthy) + "/" + strconv.Itoa(len(w.Runtimes)) + " healthy"},
		claiming, box, ageCell(w.Seen, now), ageCell(w.Started, now),
		{Text: extraFields(w.Raw, knownFields)},
	}}
	if unconfined {
		r.Class = "unconfined"
	}
	return r
}

// runtimeRows are a worker's runtimes in the runtimes table.
func runtimeRows(w *fleet.Registration, now time.Time) []row {
	var rawRuntimes []json.RawMessage
	if len(w.Raw) > 0 {
		var m struct {
			Runtimes []json.RawMessage `json:"runtimes"`
		}
		if json.Unmarshal(w.Raw, &m) == nil {
			rawRuntimes = m.Runtimes
		}
	}
	var out []row
	for i, rt := range w.Runtimes {
		h := cell{Text: "healthy", Class: "ok"}
		if !rt.Healthy {
			h = cell{Text: "unhealthy", Class: "err"}
		}
		extra := ""
		if i < len(rawRuntimes) {
			extra = extraFields(rawRuntimes[i], knownRuntimeFields)
		}
		if len(rt.Capabilities) > 0 && string(rt.Capabilities) != "null" {
			extra = strings.TrimPrefix(extra+"; capabilities: "+oneLine(string(rt.Capabilities), 300), "; ")
		}
		box, unconfined := sandboxCell(rt.Sandbox)
		r := row{Key: w.ID + "/" + rt.Name, Cells: []cell{
			{Text: w.ID}, {Text: rt.Name}, h, box, {Text: rt.Version}, {Text: rt.Binary},
			ageCell(rt.Checked, now), {Text: oneLine(rt.Error, 300), Class: "err"}, {Text: extra},
		}}
		if unconfined {
			r.Class = "unconfined"
		}
		out = append(out, r)
	}
	return out
}

// readCooldowns reads the cooldowns table and its note, and when the next
// cooldown stops cooling (zero if none cools).
func (c *Console) readCooldowns(now time.Time) (rows []row, note cell, next time.Time) {
	var more int
	c.o.Projection.Read(func(st *projection.State) {
		rows, more = cooldownRows(st, now)
		next = nextCooldownEnd(st, now)
	})
	return rows, cooldownsNote(len(rows), more), next
}

func (c *Console) workersPage(w http.ResponseWriter, r *http.Request) {
	v := workersView{}
	now := c.o.Now()
	if c.o.Fleet == nil {
		v.Error = "This console cannot read the worker registry."
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		ws, err := c.o.Fleet.Workers(ctx)
		cancel()
		if err != nil {
			v.Error = "The worker registry cannot be read: " + err.Error()
		}
		v.Workers, v.Runtimes = workerRows(ws, now)
	}
	v.Cooldowns, v.Note, _ = c.readCooldowns(now)
	p := c.newPage(r, "Workers", "workers")
	p.Live = "/ui/workers/live"
	p.Content = v
	c.render(w, http.StatusOK, "workers", p)
}

// deadLetterLimit is how many dead letters the page lists, newest first.
const deadLetterLimit = 200

func deadLetterRow(d queue.DeadLetter, now time.Time) row {
	prev := d.Data
	if len(prev) > 200 {
		prev = prev[:200]
	}
	return row{Key: strconv.FormatUint(d.Seq, 10), Cells: []cell{
		{Text: strconv.FormatUint(d.Seq, 10)},
		ageCell(d.Time, now),
		{Text: d.Source},
		{Text: strconv.Itoa(d.Size) + " B", Title: strconv.Itoa(len(d.Data)) + " bytes kept"},
		{Text: oneLine(d.Reason, 500), Class: "err"},
		{Text: oneLine(string(prev), 200), Class: "mono"},
	}}
}

func (c *Console) deadLettersPage(w http.ResponseWriter, r *http.Request) {
	var rows []row
	errMsg := ""
	if c.o.DeadLetters == nil {
		errMsg = "This console cannot read the dead-letter stream."
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		dls, err := c.o.DeadLetters.DeadLetters(ctx, deadLetterLimit)
		cancel()
		if err != nil {
			errMsg = "The dead-letter stream cannot be read: " + err.Error()
		}
		now := c.o.Now()
		for i := len(dls) - 1; i >= 0; i-- {
			rows = append(rows, deadLetterRow(dls[i], now))
		}
	}
	p := c.newPage(r, "Dead letters", "dead-letters")
	p.Live = "/ui/dead-letters/live"
	p.Content = struct {
		Rows  []row
		Error string
	}{rows, errMsg}
	c.render(w, http.StatusOK, "deadletters", p)
}

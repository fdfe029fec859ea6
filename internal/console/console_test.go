package console

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/net/html"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/fleet"
	"github.com/drover-dev/drover/internal/queue"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testToken = "a-token-of-twenty-chars"

// serve starts a console over w; auth nil means none configured.
func serve(t *testing.T, w *world, auth *Auth) (*Console, *httptest.Server) {
	t.Helper()
	o := Options{Projection: w, Folds: w, Operator: w, Artifacts: w, Fleet: w, DeadLetters: w,
		Now: w.clock, LiveInterval: 20 * time.Millisecond, PageSize: 3, Listen: "127.0.0.1:0"}
	if auth != nil {
		o.Auth = *auth
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(func() {
		c.Close()
		srv.Close()
	})
	return c, srv
}

func client(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, cl *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := cl.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// demoFlow folds a flow of four tasks: a succeeded; b was rate limited
// and runs again on a fallback runtime; c waits on a and b; d on nothing.
func demoFlow(w *world) (flowID string) {
	flowID = "demo-abc123"
	w.submit(flowID, []string{"a", "b", "c", "d"}, map[string][]string{"b": {"a"}, "c": {"a", "b"}},
		func(id string) string { return "do " + id })
	w.objects["log-a"] = "hello from a\n\x1b[32mgreen\x1b[0m\n"
	w.objects["patch-a"] = "diff --git a/x.go b/x.go\n--- a/x.go\n+++ b/x.go\n@@ -1 +1 @@\n-package x\n+package y // changed\n"
	w.run(flowID, "a", 1, &event.Report{Success: true, Branch: "drover/demo-abc123/a/1", Commit: "c0ffee",
		FilesModified: []string{"x.go"}, LogObject: "log-a", PatchObject: "patch-a",
		Usage: &event.Usage{InputTokens: new(int64(1000)), OutputTokens: new(int64(500)), CostUSD: new(0.25)}})
	b1 := w.run(flowID, "b", 1, &event.Report{Success: false, Error: &event.ErrorInfo{Class: "RATE_LIMITED", Message: "429 slow down"},
		Usage: &event.Usage{InputTokens: new(int64(10)), OutputTokens: new(int64(5))}})
	w.fold(w.ev(event.RuntimeErrorClassified, flowID, "b", b1, 0, event.RuntimeErrorClassifiedData{
		ErrorInfo: event.ErrorInfo{Class: "RATE_LIMITED", Message: "429 slow down"}}))
	w.fold(w.ev(event.RuntimeRecoveryScheduled, flowID, "b", b1, 0, event.RuntimeRecoveryScheduledData{
		Strategy: drovertype.StrategyFallback, N: 2, Runtime: "other", DueAt: w.now, Reason: "rate limited: fall back"}))
	w.run(flowID, "b", 2, nil, "other")
	return flowID
}

func TestPages(t *testing.T) {
	w := newWorld(t)
	flowID := demoFlow(w)
	w.workers = []*fleet.Registration{{ID: "w1", Host: "host-1", Pool: "default", Slots: 4, Busy: 1, Seen: w.now,
		Runtimes: []fleet.RuntimeHealth{{Name: "demo", Healthy: true, Version: "1.0"}, {Name: "claude-code", Error: "not found"}},
		Sandbox:  "landlock ABI 7",
		Raw:      json.RawMessage(`{"id":"w1","cooldowns":{"claude-code":"2026-05-01T13:00:00Z"},"sandbox":"landlock ABI 7","runtimes":[{"name":"demo"},{"name":"claude-code","cooldown_until":"soon"}]}`)}}
	w.dead = []queue.DeadLetter{{Seq: 7, Time: w.now, Source: "events", Reason: "undecodable", Size: 3, Data: []byte("{x")}}
	_, srv := serve(t, w, nil)
	cl := client(t)
	for _, c := range []struct {
		path string
		want []string
	}{
		{"/ui/", []string{flowID, "running", "1/4", "1.5k tok · $0.25", "/repos/x.git @ main", "Read-only: no console.token"}},
		{"/ui/?state=succeeded", []string{"No flows in this state"}},
		{"/ui/flows/" + flowID, []string{`data-src="/ui/flows/` + flowID + `/graph.json"`, "1 succeeded", `data-k="a"`, `data-k="c"`, "page 1 of 2"}},
		{"/ui/flows/" + flowID + "?page=2", []string{`data-k="d"`, "page 2 of 2"}},
		{"/ui/flows/" + flowID + "?state=running", []string{`data-k="b"`, "page 1 of 1"}},
		{"/ui/flows/" + flowID + "?task=d", []string{`data-k="d"`, "page 2 of 2"}},
		{"/ui/flows/" + flowID + "/tasks/b", []string{"fallback from", "429 slow down", "do b", "fallback_runtime: attempt 2 on other", "Depends on"}},
		{"/ui/attempts/" + flowID + "_a_1", []string{"hello from a\ngreen\n", "dl add", `<span class="com">// changed</span>`, "1000 in, 500 out", "x.go", "runtime_started", "pid 42"}},
		{"/ui/attempts/" + flowID + "_b_2", []string{`data-stream="1"`, "streaming", "claimed"}},
		{"/ui/workers", []string{"host-1", "1/4", "1/2 healthy", "cooldowns: {", "landlock ABI 7", "cooldown_until: &#34;soon&#34;", "not found",
			"No runtime, model or credential has met a limit."}},
		{"/ui/dead-letters", []string{"undecodable", "events", "{x"}},
	} {
		code, body := get(t, cl, srv.URL+c.path)
		if code != 200 {
			t.Errorf("%s: %d\n%s", c.path, code, body)
			continue
		}
		for _, want := range c.want {
			if !strings.Contains(body, want) {
				t.Errorf("%s: no %q in\n%s", c.path, want, body)
			}
		}
		checkMarkup(t, c.path, body)
	}
	for _, p := range []string{"/ui/flows/nope", "/ui/flows/" + flowID + "/tasks/zz", "/ui/attempts/x_y_1", "/ui/nowhere", "/ui/flows/nope/graph.json"} {
		if code, _ := get(t, cl, srv.URL+p); code != 404 {
			t.Errorf("%s: %d, want 404", p, code)
		}
	}
}

func TestGraphJSON(t *testing.T) {
	w := newWorld(t)
	flowID := demoFlow(w)
	_, srv := serve(t, w, nil)
	_, body := get(t, client(t), srv.URL+"/ui/flows/"+flowID+"/graph.json")
	var g struct {
		IDs    []string `json:"ids"`
		X, Y   []int
		Tasks  [][]any `json:"tasks"`
		Edges  [][]int `json:"edges"`
		States []string
	}
	if err := json.Unmarshal([]byte(body), &g); err != nil {
		t.Fatal(err, body)
	}
	if strings.Join(g.IDs, ",") != "a,b,d,c" && strings.Join(g.IDs, ",") != "a,d,b,c" && len(g.IDs) != 4 {
		t.Fatalf("ids %v", g.IDs)
	}
	idx := map[string]int{}
	for i, id := range g.IDs {
		idx[id] = i
	}
	if len(g.Edges) != 3 {
		t.Fatalf("edges %v", g.Edges)
	}
	if s := g.States[int(g.Tasks[idx["a"]][0].(float64))]; s != "succeeded" {
		t.Errorf("a is %s", s)
	}
	if a := g.Tasks[idx["b"]][1].(float64); a != 2 {
		t.Errorf("b has %v attempts", a)
	}
	// c waits on a and b: a column after b's.
	if g.X[idx["c"]] <= g.X[idx["b"]] || g.X[idx["b"]] <= g.X[idx["a"]] {
		t.Errorf("x: %v", g.X)
	}
}

// hostile is what an agent, a prompt or a broken worker might put where
// the console shows it.
var hostile = []string{
	`<script>alert("xss")</script>`,
	`"><img src=x onerror=alert(1)>`,
	`</script><script>alert(2)</script>`,
	`javascript:alert(3)`,
	`<svg onload=alert(4)><a href="javascript:alert(5)">x</a></svg>`,
	"\x1b]8;;javascript:alert(6)\x1b\\click\x1b]8;;\x1b\\ \x1b[31mred\x1b[0m",
	`' onmouseover='alert(7)' x='`,
	`<iframe srcdoc="<script>alert(8)</script>"></iframe>`,
}

var hostileText = strings.Join(hostile, " | ")

// hostileWorld puts hostile text everywhere a flow, an agent or a worker
// can: prompts, file names, errors, logs, diffs, registrations, dead
// letters, output.
func hostileWorld(t *testing.T) (*world, string) {
	w := newWorld(t)
	flowID := "evil-abc123"
	w.submit(flowID, []string{"a", "b", "c"}, map[string][]string{"b": {"a"}}, func(string) string { return hostileText })
	w.objects["log"] = hostileText + "\n"
	w.objects["patch"] = "diff --git a/" + hostile[1] + " b/" + hostile[1] + "\n+" + hostileText + "\n"
	a := w.run(flowID, "a", 1, &event.Report{Success: false, FilesCreated: hostile, LogObject: "log", PatchObject: "patch",
		FinalText: hostileText, StderrTail: hostileText, ScopeViolations: hostile, Sandbox: hostileText, SandboxDenied: hostile,
		Error:        &event.ErrorInfo{Class: "UNKNOWN", Message: hostileText},
		Verification: &event.Verification{Commands: []event.CommandResult{{Command: hostileText, Output: hostileText}}},
		Usage:        &event.Usage{Model: hostileText}, ToolCalls: map[string]int{hostileText: 1}})
	w.fold(w.ev(event.RuntimeErrorClassified, flowID, "a", a, 0, event.RuntimeErrorClassifiedData{
		ErrorInfo: event.ErrorInfo{Class: "UNKNOWN", Message: hostileText}}))
	w.fold(w.ev(event.TaskFailed, flowID, "a", a, 0, event.TaskFailedData{Reason: hostileText, Class: "UNKNOWN"}))
	raw, _ := json.Marshal(map[string]any{"id": "w1", "host": hostileText, hostile[0]: hostileText,
		"runtimes": []map[string]any{{"name": "demo", hostile[1]: hostileText}}})
	w.workers = []*fleet.Registration{{ID: "w1", Host: hostileText, Pool: "default", NotClaiming: hostileText, Raw: raw,
		Runtimes: []fleet.RuntimeHealth{{Name: "demo", Version: hostileText, Binary: hostileText, Error: hostileText,
			Capabilities: json.RawMessage(`{"x":"` + strings.ReplaceAll(hostile[0], `"`, `\"`) + `"}`)}}}}
	w.workers[0].Sandbox = "off: " + hostileText
	w.workers[0].Runtimes[0].Sandbox = hostileText
	w.dead = []queue.DeadLetter{{Seq: 1, Source: "events", Reason: hostileText, Data: []byte(hostileText)}}
	// A limit a's attempt met, with hostile words, and c waiting for it.
	w.limit(flowID, "a", a, event.CooldownCredential, hostile[0], w.now, w.now.Add(time.Hour), hostileText, "demo", hostile[1])
	w.wait(flowID, "c", 1, w.now.Add(time.Hour), hostileText, event.CooldownKey(event.CooldownCredential, hostile[0]))
	return w, flowID
}

func TestUntrustedTextIsEscaped(t *testing.T) {
	w, flowID := hostileWorld(t)
	_, srv := serve(t, w, &Auth{Token: testToken})
	cl := client(t)
	login(t, cl, srv.URL)
	for _, p := range []string{"/ui/", "/ui/flows/" + flowID, "/ui/flows/" + flowID + "/tasks/a", "/ui/flows/" + flowID + "/tasks/b",
		"/ui/attempts/" + flowID + "_a_1", "/ui/workers", "/ui/dead-letters", "/ui/login"} {
		code, body := get(t, cl, srv.URL+p)
		if code != 200 {
			t.Fatalf("%s: %d", p, code)
		}
		checkMarkup(t, p, body)
		if p != "/ui/" && p != "/ui/login" && p != "/ui/flows/"+flowID && !strings.Contains(textOf(t, body), hostile[0]) {
			t.Errorf("%s: the hostile text is not shown as text", p)
		}
	}
	// What the sandbox denied the attempt is on its page.
	if _, body := get(t, cl, srv.URL+"/ui/attempts/"+flowID+"_a_1"); !strings.Contains(textOf(t, body), "Denied by the sandbox"+hostile[0]+hostile[1]) {
		t.Errorf("the attempt's page does not show its denials:\n%s", textOf(t, body))
	}
	// The log as text: escape sequences gone, served as plain text.
	resp, err := cl.Get(srv.URL + "/ui/attempts/" + flowID + "_a_1/log")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("log served as %q, nosniff %q", ct, resp.Header.Get("X-Content-Type-Options"))
	}
	if strings.Contains(string(b), "\x1b") {
		t.Errorf("escape sequence in the log: %q", b)
	}
	// And the CSP would stop an inline script even if one got through.
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q", csp)
	}
}

// allowedTags are the elements the console's templates make.
var allowedTags = map[string]bool{"html": true, "head": true, "meta": true, "title": true, "link": true, "script": true,
	"body": true, "header": true, "a": true, "nav": true, "div": true, "span": true, "form": true, "input": true,
	"button": true, "p": true, "main": true, "h1": true, "h2": true, "h3": true, "dl": true, "dt": true, "dd": true,
	"section": true, "table": true, "thead": true, "tbody": true, "tr": true, "th": true, "td": true, "svg": true,
	"rect": true, "pre": true, "ul": true, "li": true, "code": true, "label": true, "br": true}

// checkMarkup parses a page and fails on anything the templates do not
// make: an unknown element, an event handler attribute, a script that is
// not one of the console's files, a link or form leaving the console, or
// a URL with a scheme.
func checkMarkup(t *testing.T, where, body string) {
	t.Helper()
	z := html.NewTokenizer(strings.NewReader(body))
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if z.Err() != io.EOF {
				t.Errorf("%s: %v", where, z.Err())
			}
			return
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			if !allowedTags[tok.Data] {
				t.Errorf("%s: element <%s> %v", where, tok.Data, tok.Attr)
			}
			for _, a := range tok.Attr {
				if strings.HasPrefix(strings.ToLower(a.Key), "on") || a.Key == "style" || a.Key == "srcdoc" {
					t.Errorf("%s: <%s %s=%q>", where, tok.Data, a.Key, a.Val)
				}
				switch a.Key {
				case "href", "src", "action", "data-src", "data-live":
					if a.Val != "" && !strings.HasPrefix(a.Val, "/ui/") {
						t.Errorf("%s: <%s %s=%q> leaves the console", where, tok.Data, a.Key, a.Val)
					}
				}
			}
			if tok.Data == "script" {
				src := ""
				for _, a := range tok.Attr {
					if a.Key == "src" {
						src = a.Val
					}
				}
				if !strings.HasPrefix(src, "/ui/static/") {
					t.Errorf("%s: inline or foreign script %v", where, tok.Attr)
				}
			}
		case html.TextToken:
			if strings.ContainsRune(string(z.Text()), 0x1b) {
				t.Errorf("%s: an escape sequence in the page", where)
			}
		}
	}
}

// textOf is a page's text as a browser shows it.
func textOf(t *testing.T, body string) string {
	z := html.NewTokenizer(strings.NewReader(body))
	var b strings.Builder
	for {
		switch z.Next() {
		case html.ErrorToken:
			return b.String()
		case html.TextToken:
			b.Write(z.Text())
		}
	}
}

// sseReader reads a live page's events.
type sseReader struct {
	t    *testing.T
	body io.ReadCloser
	sc   *bufio.Scanner
}

type sseEvent struct{ name, data string }

func openSSE(t *testing.T, cl *http.Client, u string) *sseReader {
	t.Helper()
	resp, err := cl.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s: %d %s", u, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	r := &sseReader{t: t, body: resp.Body, sc: bufio.NewScanner(resp.Body)}
	r.sc.Buffer(make([]byte, 1<<20), 16<<20)
	t.Cleanup(func() { resp.Body.Close() })
	return r
}

// next returns the next event, or fails after timeout.
func (r *sseReader) next(timeout time.Duration) sseEvent {
	r.t.Helper()
	done := make(chan sseEvent, 1)
	go func() {
		var ev sseEvent
		for r.sc.Scan() {
			line := r.sc.Text()
			switch {
			case line == "" && ev.name != "":
				done <- ev
				return
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[len("data: "):]
			}
		}
		done <- sseEvent{}
	}()
	select {
	case ev := <-done:
		if ev.name == "" {
			r.t.Fatalf("stream ended: %v", r.sc.Err())
		}
		return ev
	case <-time.After(timeout):
		r.body.Close()
		<-done
		r.t.Fatalf("no event in %s", timeout)
		return sseEvent{}
	}
}

// until reads events until one named name satisfies ok.
func (r *sseReader) until(name string, timeout time.Duration, ok func(data string) bool) string {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ev := r.next(time.Until(deadline))
		if ev.name == name && ok(ev.data) {
			return ev.data
		}
	}
}

func TestLiveFlowUpdates(t *testing.T) {
	w := newWorld(t)
	flowID := demoFlow(w)
	_, srv := serve(t, w, nil)
	r := openSSE(t, client(t), srv.URL+"/ui/flows/"+flowID+"/live?page=1")
	// At first: every field, every task, the page's rows.
	fields := r.until("fields", 5*time.Second, func(string) bool { return true })
	if !strings.Contains(fields, `"state"`) || !strings.Contains(fields, `"progress"`) {
		t.Fatalf("fields %s", fields)
	}
	tasks := r.until("tasks", 5*time.Second, func(string) bool { return true })
	var all [][]any
	_ = json.Unmarshal([]byte(tasks), &all)
	if len(all) != 4 {
		t.Fatalf("first tasks update %s", tasks)
	}
	// The first update's rows too, before anything changes: else the
	// change may be in them already.
	r.until("rows", 5*time.Second, func(string) bool { return true })
	// b's second attempt succeeds: its state, the progress and its row
	// change, and only b is sent.
	w.fold(w.ev(event.AttemptReported, flowID, "b", drovertype.AttemptID(flowID, "b", 2), 1, &event.Report{Success: true}))
	var delta [][]any
	r.until("tasks", 5*time.Second, func(d string) bool { _ = json.Unmarshal([]byte(d), &delta); return true })
	if len(delta) != 1 || delta[0][1].(float64) != 0 {
		t.Fatalf("delta %v", delta)
	}
	rows := r.until("rows", 5*time.Second, func(d string) bool { return strings.Contains(d, `"k":"b"`) })
	if !strings.Contains(rows, "succeeded") || strings.Contains(rows, `"k":"a"`) {
		t.Fatalf("rows %s", rows)
	}
}

func TestLiveCoalescesBursts(t *testing.T) {
	w := newWorld(t)
	flowID := "burst-abc123"
	var ids []string
	for i := range 300 {
		ids = append(ids, fmt.Sprintf("t%d", i))
	}
	w.submit(flowID, ids, nil, func(string) string { return "x" })
	_, srv := serve(t, w, nil)
	r := openSSE(t, client(t), srv.URL+"/ui/flows/"+flowID+"/live")
	r.until("tasks", 5*time.Second, func(string) bool { return true })
	// 300 commits in a burst, one task scheduled each.
	for i, id := range ids {
		w.fold(w.ev(event.AttemptScheduled, flowID, id, drovertype.AttemptID(flowID, id, 1), 0, event.AttemptScheduledData{N: 1, Runtime: "demo", Pool: "default", Branch: drovertype.AttemptBranch(flowID, id, 1)}))
		_ = i
	}
	seen := map[int]bool{}
	updates := 0
	for len(seen) < len(ids) {
		var d [][]any
		r.until("tasks", 5*time.Second, func(s string) bool { return json.Unmarshal([]byte(s), &d) == nil })
		updates++
		for _, x := range d {
			if x[1].(float64) == float64(stateIndex(drovertype.TaskScheduled)) {
				seen[int(x[0].(float64))] = true
			}
		}
	}
	// Each update waits LiveInterval (20ms) after the one before: far fewer
	// than 300 whatever the machine's speed, unless folding 300 events took
	// 300 intervals.
	if updates > 150 {
		t.Fatalf("%d updates for a burst of 300 folds", updates)
	}
	t.Logf("%d updates for 300 folds", updates)
}

func TestLiveAttemptOutput(t *testing.T) {
	w := newWorld(t)
	flowID := demoFlow(w)
	a := drovertype.AttemptID(flowID, "b", 2)
	_, srv := serve(t, w, nil)
	r := openSSE(t, client(t), srv.URL+"/ui/attempts/"+a+"/live?output=1")
	out := w.output(a)
	out <- event.OutputChunkData{Stream: "stdout", Text: "one \x1b[31mred"}
	out <- event.OutputChunkData{Stream: "stdout", Text: "\x1b[0m two\n" + hostile[0]}
	out <- event.OutputChunkData{Stream: "stderr", Text: "err \x1b]0;title"}
	out <- event.OutputChunkData{Stream: "stderr", Text: "\x07 line\n"}
	var got strings.Builder
	for !strings.Contains(got.String(), "err  line") {
		data := r.until("output", 5*time.Second, func(string) bool { return true })
		if strings.Contains(data, "<") {
			t.Fatalf("raw < in an SSE payload: %s", data)
		}
		var ms []outputMsg
		if err := json.Unmarshal([]byte(data), &ms); err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			got.WriteString(m.Text)
		}
	}
	if want := "one red two\n" + hostile[0] + "err  line\n"; got.String() != want {
		t.Fatalf("output %q, want %q", got.String(), want)
	}
	// The timeline grows as the attempt goes on, and the end is said once
	// the output has been quiet.
	w.fold(w.ev(event.AttemptReported, flowID, "b", a, 1, &event.Report{Success: true}))
	r.until("rows", 5*time.Second, func(d string) bool { return strings.Contains(d, "attempt_reported") })
	r.until("end", 10*time.Second, func(string) bool { return true })
}

func TestLiveStreamsEndWithTheConsole(t *testing.T) {
	w := newWorld(t)
	flowID := demoFlow(w)
	c, srv := serve(t, w, nil)
	cl := client(t)
	for _, p := range []string{"/ui/live", "/ui/flows/" + flowID + "/live", "/ui/flows/" + flowID + "/tasks/b/live",
		"/ui/attempts/" + flowID + "_b_2/live?output=1", "/ui/workers/live", "/ui/dead-letters/live"} {
		r := openSSE(t, cl, srv.URL+p)
		if p != "/ui/dead-letters/live" {
			r.next(5 * time.Second)
		}
	}
	c.Close() // every stream ends; goleak checks their goroutines
	deadline := time.Now().Add(5 * time.Second)
	for w.subscribers() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := w.subscribers(); n > 0 {
		t.Fatalf("%d fold subscriptions left", n)
	}
}

func TestLiveDeadLetters(t *testing.T) {
	w := newWorld(t)
	_, srv := serve(t, w, nil)
	r := openSSE(t, client(t), srv.URL+"/ui/dead-letters/live")
	w.deadCh <- queue.DeadLetter{Seq: 9, Source: "attempts", Reason: hostile[0], Data: []byte("x")}
	data := r.until("rows", 5*time.Second, func(string) bool { return true })
	if !strings.Contains(data, `"k":"9"`) || strings.Contains(data, "<script") {
		t.Fatalf("rows %s", data)
	}
}

// login logs cl in with the token.
func login(t *testing.T, cl *http.Client, base string) {
	t.Helper()
	code, body := postForm(t, cl, base, "/ui/login", url.Values{"token": {testToken}, "back": {"/ui/"}})
	if code != http.StatusSeeOther {
		t.Fatalf("login: %d\n%s", code, body)
	}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// postForm posts a form the way the page's own form would: with the CSRF
// token of the page it came from (the login page's for /ui/login).
func postForm(t *testing.T, cl *http.Client, base, path string, form url.Values) (int, string) {
	t.Helper()
	page := "/ui/"
	if path == "/ui/login" {
		page = "/ui/login"
	}
	_, body := get(t, cl, base+page)
	if m := csrfRE.FindStringSubmatch(body); m != nil && form.Get("csrf") == "" {
		form.Set("csrf", html.UnescapeString(m[1]))
	}
	return post(t, cl, base+path, form, nil)
}

func post(t *testing.T, cl *http.Client, u string, form url.Values, hdr http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestReadOnlyWithoutLogins(t *testing.T) {
	w := newWorld(t)
	flowID := demoFlow(w)
	_, srv := serve(t, w, nil)
	cl := client(t)
	_, body := get(t, cl, srv.URL+"/ui/flows/"+flowID)
	if !strings.Contains(body, "Read-only: no console.token or console.users is configured") || strings.Contains(body, "/ui/actions/") {
		t.Fatalf("page offers actions or does not say it is read-only:\n%s", body)
	}
	if code, _ := post(t, cl, srv.URL+"/ui/actions/cancel", url.Values{"target": {flowID}}, nil); code != http.StatusForbidden {
		t.Fatalf("cancel without logins: %d", code)
	}
	if code, _ := postForm(t, cl, srv.URL, "/ui/login", url.Values{"token": {"anything-at-all-here"}}); code != http.StatusForbidden {
		t.Fatalf("login without logins: %d", code)
	}
	if len(w.actions()) != 0 {
		t.Fatalf("actions taken: %v", w.actions())
	}
}

func TestTokenLoginAndActions(t *testing.T) {
	w := newWorld(t)
	flowID := demoFlow(w)
	_, srv := serve(t, w, &Auth{Token: testToken})
	cl := client(t)
	_, body := get(t, cl, srv.URL+"/ui/flows/"+flowID)
	if !strings.Contains(body, "Read-only until you log in") || strings.Contains(body, "/ui/actions/") {
		t.Fatal("actions offered before login")
	}
	if code, _ := postForm(t, cl, srv.URL, "/ui/login", url.Values{"token": {testToken + "x"}}); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}
	// A login form without its CSRF cookie's token is refused.
	if code, _ := post(t, cl, srv.URL+"/ui/login", url.Values{"token": {testToken}, "csrf": {"forged"}}, nil); code != http.StatusForbidden {
		t.Fatalf("login with a forged CSRF token: %d", code)
	}
	resp := func() *http.Response {
		_, body := get(t, cl, srv.URL+"/ui/login")
		form := url.Values{"token": {testToken}, "back": {"https://evil.example/"}, "csrf": {html.UnescapeString(csrfRE.FindStringSubmatch(body)[1])}}
		req, _ := http.NewRequest("POST", srv.URL+"/ui/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r
	}()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("login: %d to %q (an outside back must not be followed)", resp.StatusCode, resp.Header.Get("Location"))
	}
	var sess *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			sess = c
		}
	}
	if sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Path != "/ui/" || sess.Secure {
		t.Fatalf("session cookie %+v", sess)
	}
	_, body = get(t, cl, srv.URL+"/ui/flows/"+flowID)
	if !strings.Contains(body, `action="/ui/actions/cancel"`) || !strings.Contains(body, `action="/ui/actions/pause"`) {
		t.Fatal("no actions after login")
	}
	csrf := html.UnescapeString(csrfRE.FindStringSubmatch(body)[1])
	// Without the CSRF token, with a wrong one, or from another origin: refused.
	for _, c := range []struct {
		form url.Values
		hdr  http.Header
	}{
		{url.Values{"target": {flowID}}, nil},
		{url.Values{"target": {flowID}, "csrf": {csrf + "x"}}, nil},
		{url.Values{"target": {flowID}, "csrf": {csrf}}, http.Header{"Origin": {"https://evil.example"}}},
		{url.Values{"target": {flowID}, "csrf": {csrf}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}},
	} {
		if code, _ := post(t, cl, srv.URL+"/ui/actions/cancel", c.form, c.hdr); code != http.StatusForbidden {
			t.Errorf("forged cancel %v %v: %d", c.form, c.hdr, code)
		}
	}
	if len(w.actions()) != 0 {
		t.Fatalf("forged actions taken: %v", w.actions())
	}
	code, _ := post(t, cl, srv.URL+"/ui/actions/cancel", url.Values{"target": {flowID}, "csrf": {csrf}, "reason": {"enough"},
		"back": {"/ui/flows/" + flowID}}, nil)
	if code != http.StatusSeeOther || len(w.actions()) != 1 || w.actions()[0] != "cancel "+flowID+" enough" {
		t.Fatalf("cancel: %d, %v", code, w.actions())
	}
	// The API's answer is shown once on the next page.
	_, body = get(t, cl, srv.URL+"/ui/flows/"+flowID)
	if !strings.Contains(body, "done: cancel "+flowID) {
		t.Fatal("no flash after the action")
	}
	if _, body = get(t, cl, srv.URL+"/ui/flows/"+flowID); strings.Contains(body, "done: cancel") {
		t.Fatal("flash shown twice")
	}
	// An error of the API is shown, not hidden.
	w.actErr = fmt.Errorf("flow %s has already ended", flowID)
	post(t, cl, srv.URL+"/ui/actions/retry", url.Values{"target": {flowID + "/a"}, "csrf": {csrf}}, nil)
	if _, body = get(t, cl, srv.URL+"/ui/"); !strings.Contains(body, "retry "+flowID+"/a failed: flow "+flowID+" has already ended") {
		t.Fatalf("no error shown:\n%s", body)
	}
	if code, _ := post(t, cl, srv.URL+"/ui/actions/delete", url.Values{"target": {flowID}, "csrf": {csrf}}, nil); code != 404 {
		t.Fatalf("unknown action: %d", code)
	}
	// Logging out ends the session.
	if code, _ := post(t, cl, srv.URL+"/ui/logout", url.Values{"csrf": {csrf}}, nil); code != http.StatusSeeOther {
		t.Fatalf("logout: %d", code)
	}
	if code, _ := post(t, cl, srv.URL+"/ui/actions/pause", url.Values{"target": {flowID}, "csrf": {csrf}}, nil); code != http.StatusForbidden {
		t.Fatalf("pause after logout: %d", code)
	}
}

func TestUserLoginAndThrottle(t *testing.T) {
	w := newWorld(t)
	hash, _ := bcrypt.GenerateFromPassword([]byte("correct horse"), bcrypt.MinCost)
	c, srv := serve(t, w, &Auth{Users: []User{{Name: "ann", PasswordHash: string(hash)}}})
	now := w.now
	c.throttle.now = func() time.Time { return now }
	cl := client(t)
	if code, _ := postForm(t, cl, srv.URL, "/ui/login", url.Values{"name": {"ann"}, "password": {"correct horse"}}); code != http.StatusSeeOther {
		t.Fatalf("right password: %d", code)
	}
	other := client(t)
	for i := range 5 {
		if code, _ := postForm(t, other, srv.URL, "/ui/login", url.Values{"name": {"ann"}, "password": {fmt.Sprint("guess", i)}}); code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, code)
		}
	}
	// The sixth try is refused, even with the right password, until time passes.
	if code, _ := postForm(t, other, srv.URL, "/ui/login", url.Values{"name": {"ann"}, "password": {"correct horse"}}); code != http.StatusTooManyRequests {
		t.Fatalf("after 5 failures: %d", code)
	}
	if code, _ := postForm(t, other, srv.URL, "/ui/login", url.Values{"name": {"bob"}, "password": {"x"}}); code != http.StatusTooManyRequests {
		t.Fatalf("another name after 5 failures: %d", code)
	}
	now = now.Add(13 * time.Second)
	if code, _ := postForm(t, other, srv.URL, "/ui/login", url.Values{"name": {"ann"}, "password": {"correct horse"}}); code != http.StatusSeeOther {
		t.Fatalf("after waiting: %d", code)
	}
	// Each failure is one more wait for everyone at that address.
	// An unknown name, an empty password and a token (none configured) fail.
	now = now.Add(time.Hour)
	for _, f := range []url.Values{{"name": {"bob"}, "password": {"correct horse"}}, {"name": {"ann"}, "password": {""}},
		{"token": {"correct horse"}}} {
		if code, _ := postForm(t, client(t), srv.URL, "/ui/login", f); code != http.StatusUnauthorized {
			t.Errorf("%v: %d", f, code)
		}
	}
}

func TestSessionsExpire(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newSessions(time.Hour, func() time.Time { return now })
	id, _ := s.create("ann")
	r := httptest.NewRequest("GET", "/ui/", nil)
	r.AddCookie(&http.Cookie{Name: sessionCookie, Value: id})
	if s.get(r) == nil {
		t.Fatal("no session")
	}
	now = now.Add(time.Hour)
	if s.get(r) != nil {
		t.Fatal("session outlived its TTL")
	}
}

func TestSafeBack(t *testing.T) {
	for in, want := range map[string]string{"/ui/flows/x": "/ui/flows/x", "https://evil/": "/ui/", "//evil/ui/": "/ui/",
		"/ui/\r\nSet-Cookie: x": "/ui/", "/uix": "/ui/", "": "/ui/", `/ui/\evil`: "/ui/"} {
		if got := safeBack(in); got != want {
			t.Errorf("safeBack(%q) = %q", in, got)
		}
	}
	if !isLoopback("127.0.0.1:8080") || !isLoopback("[::1]:80") || !isLoopback("localhost:1") ||
		isLoopback(":8080") || isLoopback("0.0.0.0:80") || isLoopback("10.0.0.1:80") {
		t.Fatal("isLoopback")
	}
}

func TestStaticAssets(t *testing.T) {
	w := newWorld(t)
	c, srv := serve(t, w, nil)
	for name, u := range c.assets {
		code, body := get(t, client(t), srv.URL+u)
		if code != 200 || len(body) == 0 {
			t.Errorf("%s: %d", name, code)
		}
		// The script never builds markup from strings.
		if strings.HasSuffix(name, ".js") && (strings.Contains(body, "innerHTML") || strings.Contains(body, "insertAdjacentHTML") ||
			strings.Contains(body, "document.write") || strings.Contains(body, "eval(")) {
			t.Errorf("%s builds markup from strings", name)
		}
	}
	if code, _ := get(t, client(t), srv.URL+"/ui/static/..%2fconsole.go"); code != 404 {
		t.Errorf("path escape: %d", code)
	}
}

// TestFlowsListPages: the flows list shows a page of flows, newest first,
// with links to the others, and its live stream sends only its page's
// rows: a new flow pushes the first page's last flow off it.
func TestFlowsListPages(t *testing.T) {
	w := newWorld(t)
	for i := range 7 {
		w.submit(fmt.Sprintf("f%d-abc123", i), []string{"a"}, nil, func(string) string { return "p" })
	}
	_, srv := serve(t, w, nil) // 3 a page
	cl := client(t)
	for path, want := range map[string][]string{
		"/ui/":                      {"f6-abc123", "f5-abc123", "f4-abc123", "page 1 of 3", `href="/ui/?page=2" rel="next"`},
		"/ui/?page=2":               {"f3-abc123", "f1-abc123", `href="/ui/" rel="prev"`, `href="/ui/?page=3" rel="next"`},
		"/ui/?page=3":               {"f0-abc123", "page 3 of 3"},
		"/ui/?page=99":              {"f0-abc123", "page 3 of 3"},
		"/ui/?page=-1":              {"f6-abc123", "page 1 of 3"},
		"/ui/?state=running&page=2": {"f3-abc123", `href="/ui/?page=3&amp;state=running" rel="next"`},
	} {
		code, body := get(t, cl, srv.URL+path)
		if code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
		for _, s := range want {
			if !strings.Contains(body, s) {
				t.Errorf("%s: no %q in\n%s", path, s, body)
			}
		}
		if n := strings.Count(body, `<tr data-k=`); n > 3 {
			t.Errorf("%s: %d rows on a page of 3", path, n)
		}
	}
	r := openSSE(t, cl, srv.URL+"/ui/live?page=1")
	first := r.until("rows", 5*time.Second, func(string) bool { return true })
	if !strings.Contains(first, "f6-abc123") || strings.Contains(first, "f3-abc123") {
		t.Fatalf("the first page's first rows: %s", first)
	}
	w.submit("f7-abc123", []string{"a"}, nil, func(string) string { return "p" })
	next := r.until("rows", 5*time.Second, func(d string) bool { return strings.Contains(d, "f7-abc123") })
	if !strings.Contains(next, `"remove":["f4-abc123"]`) {
		t.Errorf("a new flow on the first page: %s, want f4-abc123 removed", next)
	}
}

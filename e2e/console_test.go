package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/console/browsertest"
	"github.com/drover-dev/drover/internal/drovertype"
)

const consoleToken = "e2e-console-token-0123456789"

// freeAddr is a loopback address with a port free now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// consoleCluster starts a controller serving the console with a login
// token, and two workers.
func consoleCluster(t *testing.T) (*cluster, string) {
	addr := freeAddr(t)
	c := startController(t, "DROVER_HTTP_LISTEN="+addr, "DROVER_CONSOLE_TOKEN="+consoleToken)
	c.startWorker("w1", 3)
	c.startWorker("w2", 3)
	base := "http://" + addr
	waitFor(t, 30*time.Second, "the console", func() bool {
		resp, err := httpGet(base + "/ui/")
		return err == nil && resp == 200
	})
	return c, base
}

func httpGet(u string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestConsoleLiveFlow drives a live flow from the console in Chromium:
// the graph shows the tasks, their states change without a reload, a
// running agent's output streams in, and a cancel from the console (after
// logging in) cancels the flow.
func TestConsoleLiveFlow(t *testing.T) {
	b := browsertest.New(t) // skips without chromium
	c, base := consoleCluster(t)
	repo := newRepo(t)
	flowFile := writeFlow(t, fmt.Sprintf(`name: console
repo: %s
base: main
runtime: demo
tasks:
  - id: first
    prompt: |
      @sleep 3s
      @write first.txt one
  - id: second
    depends_on: [first]
    prompt: "@write second.txt two"
  - id: slow
    prompt: |
      @stdout tick-1
      @sleep 1s
      @stdout tick-2
      @sleep 1s
      @stdout tick-3
      @sleep 10m
`, repo))
	out, errOut, code := c.cli("submit", flowFile)
	if code != 0 {
		t.Fatalf("submit: %d %s", code, errOut)
	}
	flowID := submittedID(t, out)

	// The graph shows every task; states change in place.
	if err := b.Do(30*time.Second, chromedp.Navigate(base+"/ui/flows/"+flowID)); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitTrue(30*time.Second, `document.querySelectorAll('#graph-svg g.node').length === 3`); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"first", "second", "slow"} {
		if err := b.WaitTrue(5*time.Second, `!!document.querySelector('#graph-svg g.node[data-task="`+id+`"]')`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := browsertest.Eval[bool](b, `window.droverMark = 1, true`); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitTrue(60*time.Second, `document.querySelector('#graph-svg g.node[data-task="second"]').dataset.state === 'succeeded'`); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitTrue(5*time.Second, `document.querySelector('#tasks tr[data-k="first"] td.state').textContent === 'succeeded'`); err != nil {
		t.Fatal(err)
	}
	if mark, _ := browsertest.Eval[bool](b, `window.droverMark === 1`); !mark {
		t.Fatal("the page was reloaded: states must change live")
	}

	// The running agent's output streams into its attempt's page.
	slow := drovertype.AttemptID(flowID, "slow", 1)
	if err := b.Do(30*time.Second, chromedp.Navigate(base+"/ui/attempts/"+slow)); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitTrue(60*time.Second, `document.getElementById('output').textContent.includes('tick-3')`); err != nil {
		t.Fatal(err)
	}
	if st, _ := browsertest.Eval[string](b, `document.querySelector('[data-f="state"]').textContent`); st != "claimed" {
		t.Fatalf("the attempt is %q while its output streams, want claimed", st)
	}
	if err := b.WaitTrue(10*time.Second, `document.querySelectorAll('#timeline tbody tr').length >= 4`); err != nil {
		t.Fatal(err)
	}

	// Read-only until logged in; then a cancel from the console cancels.
	if err := b.Do(30*time.Second, chromedp.Navigate(base+"/ui/flows/"+flowID)); err != nil {
		t.Fatal(err)
	}
	if n, _ := browsertest.Eval[int](b, `document.querySelectorAll('form[action^="/ui/actions/"]').length`); n != 0 {
		t.Fatalf("%d action forms before logging in", n)
	}
	if err := b.Do(60*time.Second,
		chromedp.Navigate(base+"/ui/login?back=/ui/flows/"+flowID),
		chromedp.SendKeys(`input[name="token"]`, consoleToken),
		chromedp.Click(`#login-token button`),
		chromedp.WaitVisible(`button[data-action="cancel"]`),
		chromedp.SendKeys(`form[action="/ui/actions/cancel"] input[name="reason"]`, "stopped from the console"),
		chromedp.Click(`button[data-action="cancel"]`),
		chromedp.WaitVisible(`#flash`),
	); err != nil {
		t.Fatal(err)
	}
	flash, _ := browsertest.Eval[string](b, `document.getElementById('flash').textContent`)
	if !strings.Contains(flash, "cancelling flow "+flowID) {
		t.Fatalf("flash %q", flash)
	}
	if err := b.WaitTrue(60*time.Second, `document.querySelector('[data-f="state"]').textContent === 'cancelled'`); err != nil {
		t.Fatal(err)
	}
	st := c.status(flowID)
	if st.Detail.Flow.State != drovertype.FlowCancelled || st.Detail.Flow.Cancel == nil || st.Detail.Flow.Cancel.Reason != "stopped from the console" {
		t.Fatalf("flow %s, cancel %+v", st.Detail.Flow.State, st.Detail.Flow.Cancel)
	}
	for _, task := range st.Detail.Tasks {
		if task.ID == "slow" && task.State != drovertype.TaskCancelled {
			t.Fatalf("slow is %s", task.State)
		}
	}
	if d := b.Dialogs(); len(d) > 0 {
		t.Errorf("dialogs: %q", d)
	}
	if e := b.Errors(); len(e) > 0 {
		t.Errorf("script errors: %q", e)
	}
}

// TestConsoleScreenshots takes the screenshots of docs/console.md from a
// live flow: `make screenshots` runs it with DROVER_SCREENSHOTS set to
// where they go.
func TestConsoleScreenshots(t *testing.T) {
	dir := os.Getenv("DROVER_SCREENSHOTS")
	if dir == "" {
		t.Skip("DROVER_SCREENSHOTS is not set (make screenshots)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := browsertest.New(t)
	c, base := consoleCluster(t)
	repo := newRepo(t)
	var tasks strings.Builder
	// A graph of 24 tasks in layers: a fan-out, joins, a task whose check
	// fails once (retried with the check's output), one that fails for good
	// (blocking its dependents), and one still running.
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&tasks, "  - id: parse-%d\n    prompt: \"@write src/p%d.go package p // parsed %d\"\n", i, i, i)
	}
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(&tasks, "  - id: check-%d\n    depends_on: [parse-%d, parse-%d]\n    prompt: \"@append src/p%d.go // checked\"\n", i, i, i%6+1, i)
	}
	tasks.WriteString(`  - id: flaky
    depends_on: [check-1, check-2]
    prompt: |
      @on-attempt 1 @write flaky.txt wrong
      @after-attempt 1 @write flaky.txt right
    verify: ["grep -q right flaky.txt || { echo flaky.txt says $(cat flaky.txt); exit 1; }"]
  - id: broken
    depends_on: [check-3]
    prompt: "@exit 3"
    retry: {max_attempts: 1}
  - id: after-broken
    depends_on: [broken]
    prompt: "@write never.txt x"
  - id: report
    depends_on: [flaky, check-4, check-5]
    prompt: |
      @stdout writing the report
      @write REPORT.md # Report\n\nAll checks passed.
  - id: long-running
    depends_on: [check-6]
    prompt: |
      @stdout step 1: reading the code
      @sleep 1s
      @stdout step 2: writing tests
      @stderr warning: tests are slow
      @sleep 1s
      @stdout step 3: running them
      @sleep 10m
`)
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&tasks, "  - id: docs-%d\n    depends_on: [report]\n    prompt: \"@write docs/d%d.md # Page %d\"\n", i, i, i)
	}
	flowFile := writeFlow(t, "name: release\nrepo: "+repo+"\nbase: main\nruntime: demo\nretry: {initial_backoff: 1s}\ntasks:\n"+tasks.String())
	out, errOut, code := c.cli("submit", flowFile)
	if code != 0 {
		t.Fatalf("submit: %s", errOut)
	}
	flowID := submittedID(t, out)
	done := writeFlow(t, "name: hello\nrepo: "+repo+"\nbase: main\nruntime: demo\ntasks:\n  - id: greet\n    prompt: \"@write hello.txt hi\"\n")
	if _, errOut, code := c.cli("submit", done, "--watch"); code != 0 {
		t.Fatalf("submit: %s", errOut)
	}
	waitFor(t, 120*time.Second, "the flow to reach its running task", func() bool {
		for _, task := range c.status(flowID).Detail.Tasks {
			if task.ID == "long-running" && task.State == drovertype.TaskRunning {
				return true
			}
		}
		return false
	})
	// A dead letter: an undecodable event.
	nc, err := nats.Connect(c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, "drover.events.junk.flow_submitted", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the running task's output and the live updates settle
	if err := b.Do(60*time.Second,
		chromedp.Navigate(base+"/ui/login"),
		chromedp.SendKeys(`input[name="token"]`, consoleToken),
		chromedp.Click(`#login-token button`),
		chromedp.WaitVisible(`form[action="/ui/logout"]`),
	); err != nil {
		t.Fatal(err)
	}
	shots := []struct{ name, path, ready string }{
		{"flows", "/ui/", "#flows tbody tr"},
		{"flow", "/ui/flows/" + flowID, "#graph-svg g.node"},
		{"task", "/ui/flows/" + flowID + "/tasks/flaky", "#attempts tbody tr"},
		{"attempt-running", "/ui/attempts/" + drovertype.AttemptID(flowID, "long-running", 1), "#output span"},
		{"attempt", "/ui/attempts/" + drovertype.AttemptID(flowID, "flaky", 1), "#diff"},
		{"workers", "/ui/workers", "#workers tbody tr"},
		{"dead-letters", "/ui/dead-letters", "#deadletters tbody tr"},
	}
	for _, s := range shots {
		if err := b.Do(60*time.Second, chromedp.Navigate(base+s.path), chromedp.WaitVisible(s.ready)); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		time.Sleep(700 * time.Millisecond) // live updates and the graph's first frame
		if err := b.Screenshot(filepath.Join(dir, s.name+".png")); err != nil {
			t.Fatal(err)
		}
	}
}

package console

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/drover-dev/drover/internal/console/browsertest"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// injected lists what an injection would have added to a page: elements
// the console never makes, event handler attributes, inline or foreign
// scripts, script URLs.
const injected = `(() => {
  const bad = [];
  for (const e of document.querySelectorAll('img, iframe, object, embed, svg svg, script:not([src]), a[href^="javascript:" i], [srcdoc]'))
    bad.push(e.outerHTML.slice(0, 120));
  for (const e of document.querySelectorAll('*'))
    for (const a of e.attributes) if (/^on/i.test(a.name) || a.name === 'style') bad.push(e.tagName + ' ' + a.name + '=' + a.value);
  for (const s of document.scripts) if (!new URL(s.src, location.href).pathname.startsWith('/ui/static/')) bad.push('script ' + s.src);
  return JSON.stringify(bad);
})()`

func checkInjected(t *testing.T, b *browsertest.Browser, where string) {
	t.Helper()
	out, err := browsertest.Eval[string](b, injected)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	var bad []string
	_ = json.Unmarshal([]byte(out), &bad)
	if len(bad) > 0 {
		t.Errorf("%s: injected %q", where, bad)
	}
	if d := b.Dialogs(); len(d) > 0 {
		t.Fatalf("%s: dialogs opened: %q", where, d)
	}
}

// TestBrowserShowsHostileTextAsText opens every page of a world full of
// hostile text in Chromium, logged in, and streams hostile output into a
// running attempt's page: no dialog opens, no element or handler appears,
// and the text is there as text.
func TestBrowserShowsHostileTextAsText(t *testing.T) {
	if testing.Short() {
		t.Skip("a browser test")
	}
	w, flowID := hostileWorld(t)
	running := w.run(flowID, "c", 1, nil)
	_, srv := serve(t, w, &Auth{Token: testToken})
	b := browsertest.New(t)
	if err := b.Do(30*time.Second,
		chromedp.Navigate(srv.URL+"/ui/login"),
		chromedp.SendKeys(`input[name="token"]`, testToken),
		chromedp.Click(`#login-token button`),
		chromedp.WaitVisible(`form[action="/ui/logout"]`),
	); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/ui/", "/ui/flows/" + flowID, "/ui/flows/" + flowID + "/tasks/a", "/ui/attempts/" + flowID + "_a_1",
		"/ui/workers", "/ui/dead-letters"} {
		if err := b.Do(30*time.Second, chromedp.Navigate(srv.URL+p), chromedp.WaitReady("main")); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if strings.Contains(p, "/flows/") && !strings.Contains(p, "/tasks/") {
			if err := b.WaitTrue(20*time.Second, `document.getElementById('graph').dataset.ready === '1'`); err != nil {
				t.Fatal(err)
			}
		}
		// Let the live stream's first update land too (or its end, for an
		// attempt that has ended).
		if err := b.WaitTrue(10*time.Second, `document.getElementById('live-state').title !== 'live updates'`); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		checkInjected(t, b, p)
		if p != "/ui/" && p != "/ui/flows/"+flowID {
			has, _ := browsertest.Eval[bool](b, `document.body.innerText.includes(`+jsString(hostile[0])+`)`)
			if !has {
				t.Errorf("%s: the hostile text is not shown", p)
			}
		}
	}
	// Live: hostile output into the running attempt's page.
	if err := b.Do(30*time.Second, chromedp.Navigate(srv.URL+"/ui/attempts/"+running), chromedp.WaitReady("#output")); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitTrue(10*time.Second, `document.getElementById('live-state').classList.contains('on')`); err != nil {
		t.Fatal(err)
	}
	out := w.output(running)
	for _, h := range hostile {
		out <- event.OutputChunkData{Stream: "stdout", Text: h + "\n"}
	}
	out <- event.OutputChunkData{Stream: "stderr", Text: "the end\n"}
	if err := b.WaitTrue(20*time.Second, `document.getElementById('output').textContent.includes('the end')`); err != nil {
		t.Fatal(err)
	}
	text, _ := browsertest.Eval[string](b, `document.getElementById('output').textContent`)
	for _, h := range hostile[:5] {
		if !strings.Contains(text, h) {
			t.Errorf("output lacks %q:\n%s", h, text)
		}
	}
	if strings.Contains(text, "\x1b") {
		t.Errorf("escape sequence in the output: %q", text)
	}
	// A live row with hostile text (a dead letter) and a live field.
	w.deadCh <- deadLetterOf(hostileText)
	w.fold(w.ev(event.AttemptReported, flowID, "c", running, 1, &event.Report{ExitCode: 1,
		Error: &event.ErrorInfo{Class: drovertype.ClassRuntimeError, Message: "exit 1"}}))
	w.fold(w.ev(event.RuntimeErrorClassified, flowID, "c", running, 0, event.RuntimeErrorClassifiedData{
		ErrorInfo: event.ErrorInfo{Class: drovertype.ErrorClass(hostile[1]), Message: hostileText}}))
	if err := b.WaitTrue(20*time.Second, `document.querySelector('[data-f="error"]').textContent.includes('onerror')`); err != nil {
		t.Fatal(err)
	}
	checkInjected(t, b, "the attempt page, live")
	if err := b.Do(30*time.Second, chromedp.Navigate(srv.URL+"/ui/dead-letters"), chromedp.WaitReady("main")); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitTrue(10*time.Second, `document.getElementById('live-state').classList.contains('on')`); err != nil {
		t.Fatal(err)
	}
	w.deadCh <- deadLetterOf(hostileText)
	if err := b.WaitTrue(20*time.Second, `document.querySelectorAll('#deadletters tbody tr').length >= 2`); err != nil {
		t.Fatal(err)
	}
	checkInjected(t, b, "the dead letters page, live")
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("script errors: %q", errs)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestBrowserFlowsListPages follows the flows list's links from page to
// page in Chromium: each page is a page of flows, the live stream keeps
// to it.
func TestBrowserFlowsListPages(t *testing.T) {
	if testing.Short() {
		t.Skip("a browser test")
	}
	w := newWorld(t)
	for _, id := range []string{"f0-abc123", "f1-abc123", "f2-abc123", "f3-abc123", "f4-abc123"} {
		w.submit(id, []string{"a"}, nil, func(string) string { return "p" })
	}
	_, srv := serve(t, w, nil) // 3 a page
	b := browsertest.New(t)
	rows := `Array.from(document.querySelectorAll('#flows tbody tr')).map(r => r.dataset.k).join(' ')`
	if err := b.Do(30*time.Second, chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitReady("main")); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitTrue(10*time.Second, rows+` === 'f4-abc123 f3-abc123 f2-abc123'`); err != nil {
		t.Fatal(err)
	}
	if err := b.Do(30*time.Second, chromedp.Click(`a[rel="next"]`), chromedp.WaitReady("main")); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitTrue(10*time.Second, rows+` === 'f1-abc123 f0-abc123' && document.querySelector('p.pages').textContent.includes('page 2 of 2')`); err != nil {
		got, _ := browsertest.Eval[string](b, rows)
		t.Fatalf("page 2: %v (rows %s)", err, got)
	}
	// Its live stream: a new flow goes on the first page, f2 comes down.
	if err := b.WaitTrue(10*time.Second, `document.getElementById('live-state').title !== 'live updates'`); err != nil {
		t.Fatal(err)
	}
	w.submit("f5-abc123", []string{"a"}, nil, func(string) string { return "p" })
	if err := b.WaitTrue(10*time.Second, rows+` === 'f2-abc123 f1-abc123 f0-abc123'`); err != nil {
		got, _ := browsertest.Eval[string](b, rows)
		t.Fatalf("page 2 after a new flow: %v (rows %s)", err, got)
	}
	checkInjected(t, b, "/ui/?page=2")
}

// Package browsertest starts headless Chromium for the console's browser
// tests (internal/console, e2e, bench) through chromedp: the
// distribution's chromium with the flags that keep it offline and quiet,
// a fresh profile each time, and a watch on JavaScript dialogs, so that a
// test can prove no alert fired. A test without chromium is skipped with
// the reason; `make test` and .ci/run install it.
//
// It must not know the console's pages: tests drive them.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Path finds the browser: $DROVER_CHROMIUM, else chromium or
// chromium-browser in PATH, else "".
func Path() string {
	if p := os.Getenv("DROVER_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Browser is one headless Chromium with one tab.
type Browser struct {
	Ctx     context.Context
	cancel  func()
	mu      sync.Mutex
	dialogs []string
	errors  []string
}

// New starts Chromium for tb, or skips tb when there is none. The browser
// is closed when tb ends.
func New(tb testing.TB) *Browser {
	tb.Helper()
	path := Path()
	if path == "" {
		tb.Skip("no chromium: install Debian's chromium package (make test does when it can) or set DROVER_CHROMIUM")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // as root in containers and CI
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &Browser{}
	var ctx context.Context
	listen := func(ev any) {
		switch e := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			b.mu.Lock()
			b.dialogs = append(b.dialogs, string(e.Type)+": "+e.Message)
			b.mu.Unlock()
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}()
		case *runtime.EventExceptionThrown:
			b.mu.Lock()
			b.errors = append(b.errors, e.ExceptionDetails.Text+" "+e.ExceptionDetails.URL)
			b.mu.Unlock()
		}
	}
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithListener(listen))
	b.Ctx, b.cancel = ctx, func() { cancelCtx(); cancelAlloc() }
	// The first action starts the browser, which lives as long as the
	// context it ran with: not one with a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		b.cancel()
		tb.Fatalf("start chromium %s: %v", path, err)
	}
	tb.Cleanup(b.cancel)
	return b
}

// Do runs actions with a timeout.
func (b *Browser) Do(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.Ctx, timeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// Eval evaluates a JavaScript expression.
func Eval[T any](b *Browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// Dialogs are the JavaScript dialogs (alert, confirm, prompt) opened so far.
func (b *Browser) Dialogs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialogs...)
}

// Errors are the uncaught script exceptions so far.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// WaitTrue polls a JavaScript expression until it is true.
func (b *Browser) WaitTrue(timeout time.Duration, expr string) error {
	ctx, cancel := context.WithTimeout(b.Ctx, timeout)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", expr, err)
	}
	return nil
}

// Screenshot saves the tab as a PNG.
func (b *Browser) Screenshot(path string) error {
	ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}

package natsconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/natstest"
	"github.com/drover-dev/drover/internal/startup"
)

// waiter is a startup.Waiter whose sleeps call onSleep (with the number of
// sleeps so far) instead of waiting, logging to the returned buffer.
func waiter(onSleep func(n int)) (*startup.Waiter, *syncBuf) {
	buf := &syncBuf{}
	n := 0
	return startup.New(slog.New(slog.NewTextHandler(buf, nil)), startup.Options{
		Sleep: func(ctx context.Context, _ time.Duration) error {
			n++
			if onSleep != nil {
				onSleep(n)
			}
			return ctx.Err()
		},
	}), buf
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freeServerPort is a port a server listened on and no longer does.
func freeServerPort(t *testing.T) (int, string) {
	t.Helper()
	ns := startServer(t)
	port, url := serverPort(t, ns), ns.ClientURL()
	stopServer(ns)
	return port, url
}

// TestConnectWaitForALateServer: nothing listens at the URL until the
// third try; ConnectWait waits, logging the reason once, and connects.
func TestConnectWaitForALateServer(t *testing.T) {
	t.Parallel()
	port, url := freeServerPort(t)
	w, log := waiter(func(n int) {
		if n == 2 {
			startServerAt(t, t.TempDir(), port)
		}
	})
	nc, err := ConnectWait(testCtx(t), w, func() ClientOptions { return ClientOptions{URL: url, Timeout: time.Second} })
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !nc.IsConnected() {
		t.Fatal("not connected")
	}
	out := log.String()
	if strings.Count(out, `msg="waiting for NATS"`) != 1 || !strings.Contains(out, "is unreachable") ||
		!strings.Contains(out, `msg="NATS ready"`) || !strings.Contains(out, "tries=3") {
		t.Fatalf("log:\n%s", out)
	}
}

// TestConnectWaitRereadsTheOptions: the URL a try uses is the one the
// options say then (a local controller's nats.url written later).
func TestConnectWaitRereadsTheOptions(t *testing.T) {
	t.Parallel()
	_, dead := freeServerPort(t)
	live := startServer(t).ClientURL()
	tries := 0
	w, _ := waiter(nil)
	nc, err := ConnectWait(testCtx(t), w, func() ClientOptions {
		tries++
		if tries == 1 {
			return ClientOptions{URL: dead, Timeout: time.Second}
		}
		return ClientOptions{URL: live}
	})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if tries != 2 {
		t.Fatalf("%d tries, want 2", tries)
	}
}

// TestConnectWaitExitsOnConfigErrors: refused credentials, TLS that does not
// match and invalid options end the wait at the first try, as they are.
func TestConnectWaitExitsOnConfigErrors(t *testing.T) {
	t.Parallel()
	authed, _ := startConfigured(t, `authorization { user: a, password: "the-password" }`, -1)
	plain := startServer(t)
	p := natstest.NewPKI(t, t.TempDir())
	for _, tc := range []struct {
		name string
		o    ClientOptions
		want string
	}{
		{"no credentials", ClientOptions{URL: authed.ClientURL()}, "authorization violation"},
		{"wrong password", ClientOptions{URL: authed.ClientURL(), User: "a", Password: "wrong"}, "authorization violation"},
		{"TLS not offered", ClientOptions{URL: plain.ClientURL(), TLS: ClientTLS{CAFile: p.CA}}, "does not offer TLS"},
		{"invalid options", ClientOptions{URL: plain.ClientURL(), User: "a"}, "nats.password: is required with nats.user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, log := waiter(func(int) { t.Error("waited on a configuration error") })
			nc, err := ConnectWait(testCtx(t), w, func() ClientOptions { return tc.o })
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !IsConfigError(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a configuration error saying %q", err, tc.want)
			}
			if strings.Contains(log.String(), "waiting") {
				t.Fatalf("logged a wait:\n%s", log)
			}
			if cerr := w.Check(context.Background()); cerr == nil || !strings.Contains(cerr.Error(), tc.want) {
				t.Fatalf("readiness %v, want the error", cerr)
			}
		})
	}
}

func TestConnectWaitStops(t *testing.T) {
	t.Parallel()
	_, dead := freeServerPort(t)
	ctx, cancel := context.WithCancelCause(testCtx(t))
	w, _ := waiter(func(n int) {
		if n == 3 {
			cancel(errors.New("SIGTERM"))
		}
	})
	nc, err := ConnectWait(ctx, w, func() ClientOptions { return ClientOptions{URL: dead, Timeout: time.Second} })
	if nc != nil || !errors.Is(err, startup.ErrStopped) || !strings.Contains(err.Error(), "SIGTERM") {
		t.Fatalf("ConnectWait = %v, %v; want ErrStopped with the cause", nc, err)
	}
}

func TestIsConfigError(t *testing.T) {
	t.Parallel()
	_, dead := freeServerPort(t)
	_, err := Connect(ClientOptions{URL: dead, Timeout: time.Second})
	if err == nil || IsConfigError(err) {
		t.Fatalf("unreachable server: %v is a configuration error", err)
	}
	if IsConfigError(nil) || IsConfigError(errors.New("other")) || IsConfigError(fmt.Errorf("x: %w", &ConnectError{What: "did not answer in time"})) {
		t.Fatal("IsConfigError of what is not one")
	}
	if !IsConfigError(fmt.Errorf("worker: %w", &OptionError{Key: "nats.url", Problem: "no server URL"})) {
		t.Fatal("an invalid option is a configuration error")
	}
}

// TestDeniedEndsTheWait: a start step the user's permissions deny gets no
// answer from NATS, only the connection hears why; Denied turns the
// timed-out try into a fatal error naming the subject.
func TestDeniedEndsTheWait(t *testing.T) {
	t.Parallel()
	ns, _ := startConfigured(t, `authorization { users = [
  {user: a, password: "pw-0123456", permissions: {publish: {allow: ["nothing.here"]}, subscribe: {allow: ["_INBOX_drover.>"]}}}
  {user: b, password: "pw-6543210"}
] }`, -1)
	ctx := testCtx(t)
	allowed, err := Connect(ClientOptions{URL: ns.ClientURL(), User: "b", Password: "pw-6543210", Role: RoleWorker})
	if err != nil {
		t.Fatal(err)
	}
	defer allowed.Close()
	plain := errors.New("no answer")
	if Denied(allowed, nil) != nil || Denied(allowed, plain) != plain {
		t.Fatal("Denied changed the error of a connection no permission refused")
	}

	nc, err := Connect(ClientOptions{URL: ns.ClientURL(), User: "a", Password: "pw-0123456", Role: RoleWorker})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	w := startup.New(nil, startup.Options{Backoff: startup.Backoff{TryTimeout: 500 * time.Millisecond},
		Sleep: func(context.Context, time.Duration) error { t.Error("waited on a denied step"); return nil }})
	err = w.Wait(ctx, "JetStream", func(ctx context.Context) error {
		_, err := nc.RequestWithContext(ctx, "$JS.API.INFO", nil)
		return Denied(nc, err)
	})
	if !startup.IsFatal(err) || !strings.Contains(err.Error(), `Permissions Violation for Publish to "$JS.API.INFO"`) ||
		!strings.Contains(err.Error(), "see docs/security.md") {
		t.Fatalf("err = %v, want a fatal error naming the denied subject", err)
	}
}

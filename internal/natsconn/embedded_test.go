package natsconn

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/queue"
)

func TestStartEmbedded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ns := startServerAt(t, dir, -1)
	addr, ok := ns.Addr().(*net.TCPAddr)
	if !ok || !addr.IP.IsLoopback() || addr.Port <= 0 {
		t.Errorf("listening on %v, want a free loopback port", ns.Addr())
	}
	if !ns.JetStreamEnabled() {
		t.Fatal("JetStream not enabled")
	}
	if got := ns.JetStreamConfig().StoreDir; !strings.HasPrefix(got, dir) {
		t.Errorf("store dir %s, want under %s", got, dir)
	}
	_, js := connect(t, ns)
	if err := queue.Ensure(testCtx(t), js, queue.StreamOptions{}); err != nil {
		t.Fatalf("Ensure on the embedded server: %v", err)
	}
}

func TestStartEmbeddedFailsFast(t *testing.T) {
	t.Parallel()
	if _, err := StartEmbedded(EmbeddedOptions{Port: -1}); err == nil {
		t.Error("started without a store dir")
	}

	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	busy := startServer(t)

	for name, o := range map[string]EmbeddedOptions{
		"store dir is a file": {StoreDir: notDir, Port: -1},
		"port in use":         {StoreDir: t.TempDir(), Port: serverPort(t, busy)},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			ns, err := StartEmbedded(o)
			if err == nil {
				stopServer(ns)
				t.Fatal("started")
			}
			// The server's own cause is reported at once, not after the
			// 30 s readiness timeout.
			if !errors.Is(err, ErrNotReady) || strings.HasSuffix(err.Error(), "no error logged") {
				t.Errorf("error %v: want ErrNotReady with the server's cause", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("failed after %s", d)
			}
			t.Log(err)
		})
	}
}

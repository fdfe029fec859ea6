package controller

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/dirlock"
)

func serveConfig(t *testing.T, listen, serverConf string, insecure bool) *config.Config {
	t.Helper()
	cfg := &config.Config{DataDir: t.TempDir(), InsecureListen: insecure}
	cfg.NATS.Listen, cfg.NATS.ServerConfig = listen, serverConf
	return cfg
}

// TestCheckListen: an embedded server beyond loopback must authenticate,
// or be opened on purpose.
func TestCheckListen(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	users := write("users.conf", "authorization { users = [{user: a, password: b}] }\n")
	token := write("token.conf", "authorization { token: s3cret }\n")
	noAuthUser := write("noauth.conf", "accounts { A { users = [{user: a, password: b}] } }\nno_auth_user: a\n")
	limitsOnly := write("limits.conf", "max_payload: 2MB\n")
	for _, tc := range []struct {
		name, listen, conf string
		insecure, refused  bool
	}{
		{"loopback", "127.0.0.1:4222", "", false, false},
		{"localhost", "localhost:4222", "", false, false},
		{"empty host is loopback to natsconn", ":4222", "", false, false},
		{"every interface", "0.0.0.0:4222", "", false, true},
		{"an address", "10.0.0.1:4222", "", false, true},
		{"IPv6 any", "[::]:4222", "", false, true},
		{"a file without auth", "0.0.0.0:4222", limitsOnly, false, true},
		{"no_auth_user lets anyone in", "0.0.0.0:4222", noAuthUser, false, true},
		{"users", "0.0.0.0:4222", users, false, false},
		{"token", "0.0.0.0:4222", token, false, false},
		{"insecure on purpose", "0.0.0.0:4222", "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := serveConfig(t, tc.listen, tc.conf, tc.insecure)
			err := CheckListen(cfg)
			if !tc.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "nats.listen: "+tc.listen+" takes connections from other hosts") ||
				!strings.Contains(err.Error(), "--insecure-listen") {
				t.Errorf("%v, want a refusal naming nats.listen and the switch", err)
			}
		})
	}
	// An external server is not ours to check.
	cfg := serveConfig(t, "0.0.0.0:4222", "", false)
	cfg.NATS.URL = "nats://elsewhere:4222"
	if err := CheckListen(cfg); err != nil {
		t.Errorf("with nats.url: %v", err)
	}
}

// TestServeRefusesHeldDataDir: a second controller on a locked data dir
// stops before anything else, and leaves the owner's nats.url alone.
func TestServeRefusesHeldDataDir(t *testing.T) {
	cfg := serveConfig(t, "127.0.0.1:-1", "", false)
	l, err := dirlock.Acquire(cfg.DataDir, "the first controller")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	url := filepath.Join(cfg.DataDir, "nats.url")
	if err := os.WriteFile(url, []byte("nats://127.0.0.1:4222\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = Serve(context.Background(), cfg, nil, ServeOptions{})
	if !errors.Is(err, dirlock.ErrHeld) || !strings.Contains(err.Error(), "the first controller") {
		t.Fatalf("Serve on a held data dir: %v", err)
	}
	if b, err := os.ReadFile(url); err != nil || string(b) != "nats://127.0.0.1:4222\n" {
		t.Errorf("nats.url after the refusal: %q, %v", b, err)
	}
	entries, _ := os.ReadDir(cfg.DataDir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "LOCK,nats.url" {
		t.Errorf("the refused Serve left %v in the data dir", names)
	}
}

// TestStreamOptionsFromConfig: the streams get the configured dedup
// window, JetStream's 2 minutes unless set; the server keeps each id of
// the window in memory.
func TestStreamOptionsFromConfig(t *testing.T) {
	cfg, err := config.Load(config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := streamOptions(cfg); o.DedupWindow != 2*time.Minute || o.Replicas != 1 {
		t.Errorf("default stream options %+v, want a 2m dedup window and 1 replica", o)
	}
	t.Setenv("DROVER_NATS_DEDUP_WINDOW", "7m")
	t.Setenv("DROVER_NATS_REPLICAS", "3")
	if cfg, err = config.Load(config.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	if o := streamOptions(cfg); o.DedupWindow != 7*time.Minute || o.Replicas != 3 {
		t.Errorf("stream options %+v, want the configured 7m dedup window and 3 replicas", o)
	}
}

package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/drover-dev/drover/internal/natsconn"

	"github.com/drover-dev/drover/internal/store"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/queue"
)

// ServeOptions hooks into a serving controller.
type ServeOptions struct {
	// Ready is called once NATS, the streams, the store and the API are up,
	// with the client URL. What it starts it stops through the returned func.
	Ready func(ctx context.Context, url string) (stop func(), err error)
	// Mount serves a handler under a path prefix of the HTTP listener
	// (telemetry.Server.Mount); nil when http.listen is off, and then the
	// console is not served.
	Mount func(prefix string, h http.Handler) (unmount func())
}

// Serve runs a controller until ctx ends: the embedded nats-server unless
// nats.url is set, the streams, the Pebble store, the fold, the decisions
// and the API.
func Serve(ctx context.Context, cfg *config.Config, log *slog.Logger, o ServeOptions) (err error) {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("controller: data dir: %w", err)
	}
	// A connection closed for good (a server that stopped accepting the
	// credentials) stops the controller with that cause.
	ctx, stopServe := context.WithCancelCause(ctx)
	defer stopServe(nil)
	url := cfg.NATS.URL
	if url != "" && cfg.NATS.ServerConfig != "" {
		log.Warn("nats.server_config is ignored: nats.url is set, so no server is embedded", "server_config", cfg.NATS.ServerConfig)
	}
	if url == "" {
		ns, err := startEmbedded(cfg)
		if err != nil {
			return err
		}
		defer func() {
			ns.Shutdown()
			ns.WaitForShutdown()
		}()
		url = ns.ClientURL()
		log.Info("embedded nats-server ready", "url", url, "store", filepath.Join(cfg.DataDir, "nats"),
			"server_config", cfg.NATS.ServerConfig)
	}
	co := natsconn.ClientFor(cfg, "drover-controller", natsconn.RoleController, "")
	co.URL, co.Reconnect, co.Logger = url, true, log
	co.Closed = func(err error) { stopServe(err) }
	nc, err := natsconn.Connect(co)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = queue.Ensure(ectx, js, queue.StreamOptions{Replicas: cfg.NATS.Replicas})
	cancel()
	if err != nil {
		return err
	}
	// Local clients find the server only once its streams and buckets exist.
	if cfg.NATS.URL == "" {
		if err := writeFileAtomic(cfg.NATSURLFile(), []byte(url+"\n")); err != nil {
			return err
		}
		defer os.Remove(cfg.NATSURLFile())
	}
	store, err := store.Open(filepath.Join(cfg.DataDir, "state"), store.Options{})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	ctrl := New(cfg, js, store, log)
	svc, err := ctrl.ServeAPI(ctx, nc, func(name string) bool { _, ok := cfg.Runtimes[name]; return ok })
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	if o.Mount != nil && cfg.Console.Enabled {
		con, err := newConsole(cfg, ctrl, nc, js, store, log)
		if err != nil {
			return err
		}
		defer con.Close()
		defer o.Mount("/ui/", con)()
	}
	if o.Ready != nil {
		stop, err := o.Ready(ctx, url)
		if err != nil {
			return err
		}
		defer stop()
	}
	log.Info("controller serving", "data_dir", cfg.DataDir, "applied_seq", store.Applied())
	err = ctrl.Run(ctx)
	if cause := context.Cause(ctx); natsconn.IsAuthError(cause) {
		return fmt.Errorf("controller: %w", cause)
	}
	return err
}

func startEmbedded(cfg *config.Config) (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(cfg.NATS.Listen)
	if err != nil {
		return nil, fmt.Errorf("controller: nats.listen: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("controller: nats.listen: %w", err)
	}
	o := natsconn.EmbeddedOptions{StoreDir: filepath.Join(cfg.DataDir, "nats"), Host: host, Port: port, ConfigFile: cfg.NATS.ServerConfig}
	switch s := cfg.NATS.SyncInterval; s {
	case "default", "":
	case "always":
		o.SyncAlways = true
	default:
		o.SyncInterval, _ = time.ParseDuration(s) // validated by config
	}
	return natsconn.StartEmbedded(o)
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	return nil
}

// Connect dials the NATS server a CLI command should talk to, as the
// operator role, with the configured credentials and TLS.
func Connect(cfg *config.Config) (*nats.Conn, error) {
	co := natsconn.ClientFor(cfg, "drover-cli", natsconn.RoleOperator, "")
	co.Timeout = 5 * time.Second
	nc, err := natsconn.Connect(co)
	if err != nil {
		if ce := (*natsconn.ConnectError)(nil); errors.As(err, &ce) && ce.Hint == "" {
			ce.Hint = "is `controller serve` running? set nats.url or --data-dir"
		}
		return nil, fmt.Errorf("controller: %w", err)
	}
	return nc, nil
}

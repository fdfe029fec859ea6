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
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/natsconn"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/dirlock"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/store"
	"github.com/drover-dev/drover/internal/queue"
	"github.com/drover-dev/drover/internal/startup"
	"github.com/drover-dev/drover/internal/telemetry"
)

// ServeOptions hooks into a serving controller.
type ServeOptions struct {
	// Ready is called once NATS, the streams, the store and the API are up,
	// with the client URL. What it starts it stops through the returned func.
	Ready func(ctx context.Context, url string) (stop func(), err error)
	// Lock is the data dir's lock when the caller took it already (to hold
	// it before its own listeners start); Serve takes it when nil.
	Lock *dirlock.Lock
	// Mount serves a handler under a path prefix of the HTTP listener
	// (telemetry.Server.Mount); nil when http.listen is off, and then the
	// console is not served.
	Mount func(prefix string, h http.Handler) (unmount func())
}

// LockDataDir makes this process the one owner of the data dir, or returns
// an error matching dirlock.ErrHeld that names the process that owns it.
// command describes this process in the lock file; it must hold no secret.
func LockDataDir(dir, command string) (*dirlock.Lock, error) {
	l, err := dirlock.Acquire(dir, command)
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	return l, nil
}

// Serve runs a controller until ctx ends: the embedded nats-server unless
// nats.url is set, the streams, the Pebble store, the fold, the decisions
// and the API.
func Serve(ctx context.Context, cfg *config.Config, log *slog.Logger, o ServeOptions) (err error) {
	if err := CheckListen(cfg); err != nil {
		return err
	}
	// The lock comes before anything touches the data dir: a second
	// controller must not start a nats-server on the live store, nor remove
	// the running one's nats.url on its way out.
	if o.Lock == nil {
		l, err := LockDataDir(cfg.DataDir, "controller")
		if err != nil {
			return err
		}
		defer l.Release()
	}
	// A connection closed for good (a server that stopped accepting the
	// credentials) stops the controller with that cause.
	ctx, stopServe := context.WithCancelCause(ctx)
	defer stopServe(nil)
	// /readyz says what the controller waits for until it serves.
	wait := startup.New(log, startup.Options{})
	defer telemetry.AddCheck("startup", wait.Check)()
	url, stopEmbedded, err := embedNATS(cfg, log)
	if err != nil {
		return err
	}
	defer stopEmbedded()
	co := natsconn.ClientFor(cfg, "drover-controller", natsconn.RoleController, "")
	co.URL, co.Reconnect, co.Logger = url, true, log
	co.Closed = func(err error) { stopServe(err) }
	nc, js, err := connectAndEnsure(ctx, wait, co, streamOptions(cfg))
	if errors.Is(err, startup.ErrStopped) && !natsconn.IsAuthError(err) {
		log.Info("controller stopped while starting", "reason", err)
		return nil
	}
	if err != nil {
		return err
	}
	defer nc.Close()
	// The lease on a connection of its own: a renewal must not wait behind
	// a round of decisions on the main one.
	co.Name = "drover-controller-lease"
	lnc, err := natsconn.Connect(co)
	if err != nil {
		return fmt.Errorf("controller: lease connection: %w", err)
	}
	defer lnc.Close()
	ljs, err := jetstream.New(lnc)
	if err != nil {
		return fmt.Errorf("controller: lease connection: %w", err)
	}
	// Local clients find the server only once its streams and buckets exist.
	if cfg.NATS.URL == "" {
		if err := writeFileAtomic(cfg.NATSURLFile(), []byte(url+"\n")); err != nil {
			return err
		}
		defer os.Remove(cfg.NATSURLFile())
	}
	id, err := controllerID(cfg)
	if err != nil {
		return err
	}
	// The id is this process's for its life: set once, before anything
	// reads the configuration concurrently.
	cfg.Controller.ID = id
	store, err := openProjection(ctx, filepath.Join(cfg.DataDir, "state"), js, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	ctrl := New(cfg, js, store, log)
	ctrl.leaseJS = ljs
	svc, err := ctrl.ServeAPI(ctx, nc, func(name string) bool { _, ok := cfg.Runtimes[name]; return ok })
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	unmount, err := mountHTTP(o, cfg, ctrl, nc, js, store, log)
	if err != nil {
		return err
	}
	defer unmount()
	if o.Ready != nil {
		stop, err := o.Ready(ctx, url)
		if err != nil {
			return err
		}
		defer stop()
	}
	wait.Done()
	log.Info("controller serving", "controller", id, "data_dir", cfg.DataDir, "applied_seq", store.Applied())
	err = ctrl.Run(ctx)
	if cause := context.Cause(ctx); natsconn.IsAuthError(cause) {
		return fmt.Errorf("controller: %w", cause)
	}
	return err
}

// mountHTTP serves on the HTTP listener, when there is one, the forges'
// webhooks and the console; the returned func takes them down.
func mountHTTP(o ServeOptions, cfg *config.Config, ctrl *Controller, nc *nats.Conn, js jetstream.JetStream, st *store.Store,
	log *slog.Logger) (func(), error) {
	var undo []func()
	unmount := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	if o.Mount != nil && len(cfg.Forges) > 0 {
		undo = append(undo, o.Mount(HookPrefix, ctrl.forges))
	}
	if o.Mount != nil && cfg.Console.Enabled {
		con, err := newConsole(cfg, ctrl, nc, js, st, log)
		if err != nil {
			unmount()
			return nil, err
		}
		undo = append(undo, con.Close, o.Mount("/ui/", con))
	}
	return unmount, nil
}

// embedNATS starts the embedded nats-server unless nats.url is set, and
// returns the URL to connect to and what stops the server.
func embedNATS(cfg *config.Config, log *slog.Logger) (url string, stop func(), err error) {
	url = cfg.NATS.URL
	if url != "" && cfg.NATS.ServerConfig != "" {
		log.Warn("nats.server_config is ignored: nats.url is set, so no server is embedded", "server_config", cfg.NATS.ServerConfig)
	}
	if open, _ := openListen(cfg); open {
		log.Warn("INSECURE: the embedded nats-server listens beyond loopback and authenticates nobody (insecure_listen): "+
			"anyone who reaches it can submit flows, forge events and run code on the workers", "listen", cfg.NATS.Listen)
	}
	if url != "" {
		return url, func() {}, nil
	}
	// A controller killed before it could clean up left its URL: no
	// server answers there now.
	if err := os.Remove(cfg.NATSURLFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", nil, fmt.Errorf("controller: %w", err)
	}
	ns, err := startEmbedded(cfg)
	if err != nil {
		return "", nil, err
	}
	url = ns.ClientURL()
	log.Info("embedded nats-server ready", "url", url, "store", filepath.Join(cfg.DataDir, "nats"),
		"server_config", cfg.NATS.ServerConfig)
	return url, func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	}, nil
}

// CheckListen refuses an embedded nats-server that would take connections
// from other hosts without authenticating them (no authorization, accounts,
// operator or verified client certificates in nats.server_config), unless
// insecure_listen says the operator means it. With no authentication,
// whoever reaches the port can submit flows, forge events and so run code
// on every worker.
func CheckListen(cfg *config.Config) error {
	open, err := openListen(cfg)
	if err != nil || !open || cfg.InsecureListen {
		return err
	}
	return fmt.Errorf("%w: nats.listen: %s takes connections from other hosts, and the embedded nats-server authenticates nobody: "+
		"anyone who reaches it can submit flows and run code on the workers. Give it users in nats.server_config (docs/security.md), "+
		"listen on 127.0.0.1, or pass --insecure-listen (insecure_listen: true) to run it open on purpose", config.ErrInvalid, cfg.NATS.Listen)
}

// openListen reports whether the embedded server would listen beyond
// loopback without authentication.
func openListen(cfg *config.Config) (bool, error) {
	if cfg.NATS.URL != "" {
		return false, nil // no server embedded
	}
	o, err := embeddedOptions(cfg)
	if err != nil {
		return false, err
	}
	if config.Loopback(o.Host) {
		return false, nil
	}
	so, err := natsconn.ServerOptions(o)
	if err != nil {
		return false, fmt.Errorf("%w: nats.server_config: %w", config.ErrInvalid, err)
	}
	return !authenticates(so), nil
}

// authenticates reports whether a server with these options refuses
// clients that present no credentials.
func authenticates(o *server.Options) bool {
	if o.NoAuthUser != "" {
		return false // clients without credentials are let in as that user
	}
	return o.Username != "" || o.Authorization != "" || len(o.Users) > 0 || len(o.Nkeys) > 0 ||
		len(o.TrustedOperators) > 0 || len(o.TrustedKeys) > 0 || o.TLSVerify || o.AuthCallout != nil
}

func embeddedOptions(cfg *config.Config) (natsconn.EmbeddedOptions, error) {
	host, portStr, err := net.SplitHostPort(cfg.NATS.Listen)
	if err != nil {
		return natsconn.EmbeddedOptions{}, fmt.Errorf("%w: nats.listen: %w", config.ErrInvalid, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return natsconn.EmbeddedOptions{}, fmt.Errorf("%w: nats.listen: %w", config.ErrInvalid, err)
	}
	if host == "" {
		host = "127.0.0.1" // natsconn's default: an empty host is not every interface
	}
	return natsconn.EmbeddedOptions{StoreDir: filepath.Join(cfg.DataDir, "nats"), Host: host, Port: port, ConfigFile: cfg.NATS.ServerConfig}, nil
}

func startEmbedded(cfg *config.Config) (*server.Server, error) {
	o, err := embeddedOptions(cfg)
	if err != nil {
		return nil, err
	}
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

// Connect dials the NATS server a CLI command should talk to
// (config.OperatorURL), as the operator role, with the configured
// credentials and TLS.
func Connect(cfg *config.Config) (*nats.Conn, error) {
	url, err := cfg.OperatorURL()
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	co := natsconn.ClientFor(cfg, "drover-cli", natsconn.RoleOperator, "")
	co.URL, co.Timeout = url, 5*time.Second
	nc, err := natsconn.Connect(co)
	if err != nil {
		if ce := (*natsconn.ConnectError)(nil); errors.As(err, &ce) && ce.Hint == "" {
			ce.Hint = "is `controller serve` running? set nats.url or --data-dir"
		}
		return nil, fmt.Errorf("controller: %w", err)
	}
	return nc, nil
}

// controllerIDFile keeps a controller's id in its data dir, so that it is
// the same controller after a restart.
const controllerIDFile = "controller-id"

// controllerID is the id this controller goes by: controller.id if set,
// else the one its data dir keeps, made at the first start from the host
// name and a random suffix (two controllers on one host, in two data dirs,
// are two controllers).
func controllerID(cfg *config.Config) (string, error) {
	if cfg.Controller.ID != "" {
		return cfg.Controller.ID, nil
	}
	path := filepath.Join(cfg.DataDir, controllerIDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if err := drovertype.ValidID(id); err != nil {
			return "", fmt.Errorf("controller: %s: %w (remove the file to make a new id, or set controller.id)", path, err)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("controller: %w", err)
	}
	host, _ := os.Hostname()
	id := config.SanitizeID(host)
	if len(id) > 56 {
		id = strings.TrimRight(id[:56], "-")
	}
	id += "-" + randomSuffix()[:6]
	if err := writeFileAtomic(path, []byte(id+"\n")); err != nil {
		return "", err
	}
	return id, nil
}

// streamOptions is how the controller makes Drover's streams, from cfg.
func streamOptions(cfg *config.Config) queue.StreamOptions {
	return queue.StreamOptions{Replicas: cfg.NATS.Replicas, DedupWindow: cfg.NATS.DedupWindow}
}

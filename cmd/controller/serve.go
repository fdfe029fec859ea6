package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/natsconn"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/telemetry"
	"github.com/drover-dev/drover/internal/tracing"
	"github.com/drover-dev/drover/internal/worker"
)

func newServe() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the controller (with an embedded nats-server unless nats.url is set)",
		Example: `  controller serve --data-dir /var/lib/drover
  controller serve --nats-url nats://nats:4222`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			return serve(cmd, cfg, controller.ServeOptions{})
		},
	}
	serveFlags(cmd)
	return cmd
}

// serveFlags are the flags serve and dev share.
func serveFlags(cmd *cobra.Command) {
	cmd.Flags().String("nats-listen", "", "host:port of the embedded nats-server (port -1 picks a free one)")
	cmd.Flags().String("http-listen", "", "host:port serving /metrics, /healthz, /readyz and the console under /ui/ (default off)")
	cmd.Flags().Bool("insecure-listen", false, "allow the embedded nats-server beyond loopback without authentication, and http.pprof beyond loopback (insecure_listen)")
}

// serve runs the controller as serve and dev do: the data dir's lock first,
// then the listeners, then the controller.
func serve(cmd *cobra.Command, cfg *config.Config, o controller.ServeOptions) error {
	if err := controller.CheckListen(cfg); err != nil {
		return err
	}
	lock, err := controller.LockDataDir(cfg.DataDir, commandLine(cmd))
	if err != nil {
		return err
	}
	defer lock.Release()
	o.Lock = lock
	log := cfg.Log.Logger(os.Stderr)
	log.Debug("garbage collector", "gogc", setGCPercent(cfg))
	mount, stop, err := startTelemetry(cmd.Context(), cfg, log)
	if err != nil {
		return err
	}
	defer stop()
	o.Mount = mount
	return controller.Serve(cmd.Context(), cfg, log, o)
}

// commandLine describes the command for the data dir's lock file: its
// path and the flags set, with the credentials of any URL hidden.
func commandLine(cmd *cobra.Command) string {
	args := []string{cmd.CommandPath()}
	cmd.Flags().Visit(func(f *pflag.Flag) {
		args = append(args, "--"+f.Name+"="+natsconn.RedactURL(f.Value.String()))
	})
	return strings.Join(args, " ")
}

func newDev() *cobra.Command {
	var workers int
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the controller, an embedded nats-server and local workers in one process",
		Long: `dev is serve plus N workers in the same process, each with its own work directory
under the data dir, as if they ran on separate hosts. It is for trying Drover on one machine.`,
		Example: `  controller dev --workers 2 --data-dir /tmp/drover`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if workers < 0 || workers > maxDevWorkers {
				return usageError(fmt.Errorf("--workers must be 0..%d (got %d): dev runs every worker in this process, with its own NATS connection and work dir", maxDevWorkers, workers))
			}
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			return serve(cmd, cfg, controller.ServeOptions{
				Ready: func(ctx context.Context, url string) (func(), error) {
					return startLocalWorkers(ctx, cfg, url, workers)
				},
			})
		},
	}
	cmd.Flags().IntVar(&workers, "workers", 2, fmt.Sprintf("number of local workers, 0..%d", maxDevWorkers))
	cmd.Flags().Int("slots", 0, "attempts each worker runs at once")
	serveFlags(cmd)
	return cmd
}

// maxDevWorkers bounds `controller dev --workers`: dev is for one machine,
// and each worker is a NATS connection, a registration and a work dir.
const maxDevWorkers = 64

// setGCPercent sets the garbage collector's target to controller.gc_percent
// unless the GOGC variable chose one, and says which it is.
func setGCPercent(cfg *config.Config) int {
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		// The runtime read it at start; reading it back leaves it as is.
		n := debug.SetGCPercent(100)
		debug.SetGCPercent(n)
		return n
	}
	debug.SetGCPercent(cfg.Controller.GCPercent)
	return cfg.Controller.GCPercent
}

// startTelemetry serves metrics and health on http.listen, if set, and
// exports spans when tracing is on; the returned func shuts both down,
// exporting the spans still queued (bounded: 5s). mount serves more on
// http.listen (the console), nil when it is off.
func startTelemetry(ctx context.Context, cfg *config.Config, log *slog.Logger) (mount func(string, http.Handler) func(), stop func(), err error) {
	warnInsecureHTTP(cfg, log)
	srv, err := telemetry.Start(cfg.HTTP.Listen, log, telemetry.WithPprof(cfg.HTTP.Pprof))
	if err != nil {
		return nil, nil, err
	}
	tp, err := tracing.Setup(ctx, cfg.Tracing, tracing.Process{Service: "drover-controller"}, log)
	if err != nil {
		_ = srv.Shutdown(context.Background())
		return nil, nil, err
	}
	if srv != nil {
		mount = srv.Mount
	}
	return mount, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing", "err", err)
		}
	}, nil
}

// warnInsecureHTTP says, loudly, that the profiler is open beyond loopback
// (allowed only by insecure_listen).
func warnInsecureHTTP(cfg *config.Config, log *slog.Logger) {
	if cfg.InsecureHTTP() {
		log.Warn("INSECURE: http.pprof is served beyond loopback (insecure_listen): anyone who reaches it sees this process's stacks and memory",
			"listen", cfg.HTTP.Listen)
	}
}

// startLocalWorkers starts n workers with separate work dirs and connections.
func startLocalWorkers(ctx context.Context, cfg *config.Config, url string, n int) (func(), error) {
	var started []*worker.Worker
	var conns []*nats.Conn
	stop := func() {
		// The controller stops with its local workers: hand their attempts
		// back at once rather than drain, they retry when it restarts.
		for _, w := range started {
			w.HandBack()
		}
		for _, w := range started {
			w.Wait()
		}
		for _, nc := range conns {
			nc.Close()
		}
	}
	for i := 1; i <= n; i++ {
		wc := *cfg
		wc.Worker.ID = fmt.Sprintf("dev-worker-%d", i)
		wc.Worker.WorkDir = filepath.Join(cfg.DataDir, fmt.Sprintf("worker-%d", i))
		log := cfg.Log.Logger(os.Stderr)
		// The controller's own credentials: these workers are part of it.
		co := natsconn.ClientFor(cfg, "drover-"+wc.Worker.ID, natsconn.RoleWorker, wc.Worker.ID)
		co.URL, co.Reconnect, co.Logger = url, true, log
		nc, err := natsconn.Connect(co)
		if err != nil {
			stop()
			return nil, err
		}
		conns = append(conns, nc)
		// On a kernel that cannot confine, dev runs CLIs unconfined and
		// says so, rather than claim nothing: `make demo` works everywhere.
		w, err := worker.New(&wc, log, worker.Dev())
		if err == nil {
			// The controller has created the layout: nothing to wait for.
			err = w.Start(ctx, nc, nil)
		}
		if err != nil {
			stop()
			return nil, err
		}
		started = append(started, w)
	}
	return stop, nil
}

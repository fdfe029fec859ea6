package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/queue"
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
			log := cfg.Log.Logger(os.Stderr)
			log.Debug("garbage collector", "gogc", setGCPercent(cfg))
			stop, err := startTelemetry(cmd.Context(), cfg, log)
			if err != nil {
				return err
			}
			defer stop()
			return controller.Serve(cmd.Context(), cfg, log, controller.ServeOptions{})
		},
	}
	cmd.Flags().String("nats-listen", "", "host:port of the embedded nats-server (port -1 picks a free one)")
	cmd.Flags().String("http-listen", "", "host:port serving /metrics, /healthz and /readyz (default off)")
	return cmd
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
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			if workers < 0 {
				return &exitError{2, fmt.Errorf("--workers must not be negative")}
			}
			log := cfg.Log.Logger(os.Stderr)
			log.Debug("garbage collector", "gogc", setGCPercent(cfg))
			stop, err := startTelemetry(cmd.Context(), cfg, log)
			if err != nil {
				return err
			}
			defer stop()
			return controller.Serve(cmd.Context(), cfg, log, controller.ServeOptions{
				Ready: func(ctx context.Context, url string) (func(), error) {
					return startLocalWorkers(ctx, cfg, url, workers)
				},
			})
		},
	}
	cmd.Flags().IntVar(&workers, "workers", 2, "number of local workers")
	cmd.Flags().Int("slots", 0, "attempts each worker runs at once")
	cmd.Flags().String("nats-listen", "", "host:port of the embedded nats-server (port -1 picks a free one)")
	cmd.Flags().String("http-listen", "", "host:port serving /metrics, /healthz and /readyz (default off)")
	return cmd
}

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
// exporting the spans still queued (bounded: 5s).
func startTelemetry(ctx context.Context, cfg *config.Config, log *slog.Logger) (func(), error) {
	srv, err := telemetry.Start(cfg.HTTP.Listen, log, telemetry.WithPprof(cfg.HTTP.Pprof))
	if err != nil {
		return nil, err
	}
	tp, err := tracing.Setup(ctx, cfg.Tracing, tracing.Process{Service: "drover-controller"}, log)
	if err != nil {
		_ = srv.Shutdown(context.Background())
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing", "err", err)
		}
	}, nil
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
		co := cfg.NATSClient("drover-"+wc.Worker.ID, queue.RoleWorker, wc.Worker.ID)
		co.URL, co.Reconnect, co.Logger = url, true, log
		nc, err := queue.Connect(co)
		if err != nil {
			stop()
			return nil, err
		}
		conns = append(conns, nc)
		// On a kernel that cannot confine, dev runs CLIs unconfined and
		// says so, rather than claim nothing: `make demo` works everywhere.
		w, err := worker.New(&wc, nc, log, worker.Dev())
		if err == nil {
			err = w.Start(ctx)
		}
		if err != nil {
			stop()
			return nil, err
		}
		started = append(started, w)
	}
	return stop, nil
}

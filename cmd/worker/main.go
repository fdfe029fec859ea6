// Command worker is Drover's stateless worker daemon.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/drover-dev/drover/internal/natsconn"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/exitcode"
	"github.com/drover-dev/drover/internal/readlimit"
	"github.com/drover-dev/drover/internal/sandbox"
	"github.com/drover-dev/drover/internal/startup"
	"github.com/drover-dev/drover/internal/telemetry"
	"github.com/drover-dev/drover/internal/tracing"
	"github.com/drover-dev/drover/internal/worker"
)

func main() {
	// The sandbox's re-exec step, where package stub could not run it
	// before main (it normally has, and the worker never gets here).
	sandbox.Main()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns its exit code (docs/cli.md).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return exitcode.Run(ctx, newRoot(), args, stdin, stdout, stderr, exitCode)
}

// exitCode maps the errors of Drover's packages to the exit code table
// of internal/exitcode: the one place the worker CLI decides its codes.
func exitCode(err error) int {
	var connErr *natsconn.ConnectError
	switch {
	case errors.Is(err, config.ErrInvalid), errors.Is(err, readlimit.ErrTooLarge), errors.Is(err, readlimit.ErrNotRegular):
		return exitcode.Usage
	case errors.As(err, &connErr) && connErr.Unreachable:
		return exitcode.Unreachable
	}
	return exitcode.Failed
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "worker",
		Short:         "Drover worker: claims attempts and runs coding-agent CLIs in git worktrees",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.String("config", "", "config file (YAML); also $DROVER_CONFIG")
	pf.String("data-dir", "", "data directory, used to find a local controller's NATS URL (default ~/.drover)")
	pf.String("nats-url", "", "NATS server URL")
	pf.String("log-level", "", "log level: debug, info, warn, error")
	pf.String("log-format", "", "log format: text or json")
	root.AddCommand(newRun(), newRuntime())
	return root
}

func newRun() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Claim and run attempts until stopped",
		Long: `run connects to NATS, serves every configured runtime whose binary is healthy on this
host, and claims attempt jobs of its pool when a slot is free. It waits for NATS and for
the buckets the controller creates, however late they come; it exits at once only when
no runtime is usable or NATS refuses its credentials, TLS settings or permissions.
SIGTERM or SIGINT stops claiming and lets running attempts finish for up to
worker.drain_timeout (30s), then hands the rest back for another worker to take over at
once; a second signal hands them back without waiting.`,
		Example: `  worker run --nats-url nats://controller:4222 --slots 4 --work-dir /var/lib/drover-worker
  DROVER_WORKER_POOL=gpu worker run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runWorker(cmd) },
	}
	f := cmd.Flags()
	f.String("id", "", "worker id (default hostname-pid)")
	f.String("pool", "", "pool to claim jobs from (default \"default\")")
	f.Int("slots", 0, "attempts run at once (default 2)")
	f.String("work-dir", "", "repo caches and worktrees (default DATA_DIR/worker)")
	f.StringSlice("runtimes", nil, "runtimes to serve (default all configured)")
	f.Duration("drain-timeout", 0, "on SIGTERM, how long running attempts may finish before they are handed back (default 30s)")
	f.String("http-listen", "", "host:port serving /metrics, /healthz and /readyz (default off)")
	f.Bool("insecure-listen", false, "allow http.pprof beyond loopback (insecure_listen)")
	return cmd
}

// runWorker is `worker run`: the worker started, serving until a signal, then
// drained.
func runWorker(cmd *cobra.Command) error {
	cfg, err := loadConfig(cmd)
	if err != nil {
		return err
	}
	log := cfg.Log.Logger(os.Stderr)
	stopTelemetry, err := observe(cmd.Context(), cfg, log)
	if err != nil {
		return err
	}
	defer stopTelemetry()
	// A connection closed for good (the server stopped accepting
	// the credentials) stops the worker with that cause.
	ctx, stopRun := context.WithCancelCause(cmd.Context())
	defer stopRun(nil)
	w, err := worker.New(cfg, log)
	if err != nil {
		return err
	}
	if err := w.CheckRuntimes(ctx); err != nil {
		return err
	}
	// NATS and the controller's buckets may come later: wait for
	// them, saying so in the log and on /readyz.
	wait := startup.New(log, startup.Options{})
	defer telemetry.AddCheck("worker_startup", wait.Check)()
	nc, err := natsconn.ConnectWait(ctx, wait, func() natsconn.ClientOptions {
		// Read again each try: a local controller writes its URL
		// to the data dir once its server is up.
		co := natsconn.ClientFor(cfg, "drover-worker-"+cfg.Worker.ID, natsconn.RoleWorker, cfg.Worker.ID)
		co.Reconnect, co.Logger = true, log
		co.Closed = func(err error) { stopRun(err) }
		return co
	})
	if err != nil {
		err = fmt.Errorf("worker: %w", err)
	} else {
		defer nc.Close()
		err = w.Start(ctx, nc, wait)
	}
	if errors.Is(err, startup.ErrStopped) && !natsconn.IsAuthError(err) {
		log.Info("worker stopped while starting", "reason", err)
		return nil
	}
	if err != nil {
		return err
	}
	wait.Done()
	log.Info("worker running", "id", cfg.Worker.ID, "pool", cfg.Worker.Pool, "slots", cfg.Worker.Slots, "work_dir", cfg.Worker.WorkDir)
	<-ctx.Done()
	return stopWorker(ctx, cfg, log, w)
}

// observe serves /metrics, /healthz and /readyz on http.listen and starts
// tracing; the returned func stops both.
func observe(ctx context.Context, cfg *config.Config, log *slog.Logger) (func(), error) {
	if cfg.InsecureHTTP() {
		log.Warn("INSECURE: http.pprof is served beyond loopback (insecure_listen): anyone who reaches it sees this process's stacks and memory",
			"listen", cfg.HTTP.Listen)
	}
	srv, err := telemetry.Start(cfg.HTTP.Listen, log, telemetry.WithPprof(cfg.HTTP.Pprof))
	if err != nil {
		return nil, err
	}
	shutdown := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	tp, err := tracing.Setup(ctx, cfg.Tracing, tracing.Process{Service: "drover-worker", Instance: cfg.Worker.ID}, log)
	if err != nil {
		shutdown()
		return nil, err
	}
	return func() {
		// The spans of the attempts handed back on the way out go too.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing", "err", err)
		}
		shutdown()
	}, nil
}

// stopWorker ends a worker whose run ctx has ended: at once when NATS closed the
// connection for good, else draining, which a second signal cuts short.
func stopWorker(ctx context.Context, cfg *config.Config, log *slog.Logger, w *worker.Worker) error {
	if cause := context.Cause(ctx); natsconn.IsAuthError(cause) {
		// Nothing can be reported any more: hand back at once.
		log.Error("worker stopping: NATS closed the connection", "err", cause)
		w.HandBack()
		w.Wait()
		return fmt.Errorf("worker: %w", cause)
	}
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	log.Info("worker stopping: draining", "drain_timeout", cfg.Worker.DrainTimeout)
	w.Stop()
	done := make(chan struct{})
	go func() {
		w.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-again:
		log.Warn("second signal: handing running attempts back now")
		w.HandBack()
		<-done
	}
	return nil
}

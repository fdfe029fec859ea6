// Command fleetsim runs a fleet of simulated workers against a real
// controller and reports what the controller cost per task
// (docs/benchmarks.md, the fleet). Its workers are package worker's,
// speaking the real protocol over real NATS connections; only their
// attempts are simulated (package fleetsim).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/exitcode"
	"github.com/drover-dev/drover/internal/fleetsim"
	"github.com/drover-dev/drover/internal/natsconn"
	"github.com/drover-dev/drover/internal/termsafe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := exitcode.Run(ctx, newRoot(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, exitCode)
	stop()
	os.Exit(code)
}

// exitCode maps errors to the exit codes of internal/exitcode.
func exitCode(err error) int {
	var connErr *natsconn.ConnectError
	switch {
	case errors.Is(err, config.ErrInvalid), errors.Is(err, fleetsim.ErrMix):
		return exitcode.Usage
	case errors.As(err, &connErr) && connErr.Unreachable:
		return exitcode.Unreachable
	}
	return exitcode.Failed
}

// flags are the command line's.
type flags struct {
	o                         fleetsim.Options
	logLevel, configFile, ctl string
	selfProfile               string
}

func newRoot() *cobra.Command {
	var f flags
	cmd := &cobra.Command{
		Use:   "fleetsim",
		Short: "Run simulated workers against a real controller and measure its cost per task",
		Long: `fleetsim starts N workers in this process — Drover's own worker code, each with its own
NATS connection, registration, claims, heartbeats and events — whose attempts run no CLI
and no git: a simulated runtime decides each run's duration, outcome and output, from a
seed. Without --nats-url it starts a nats-server (the one the controller embeds, with
its settings) and a controller (controller serve) each as a process of its own, as a
fleet runs them, so that the controller's CPU time and memory are measured apart from
the server's, which stores every write of the fleet; --embedded has the controller run
its embedded server instead, as controller dev does.
It submits the flows at once (or one every --submit-every, to measure the claim's
latency at a load the fleet keeps up with), waits for them to complete, checks that every task ended
as its runs dictated (nothing lost, no attempt run twice, no task merged twice) and
that the controller's projection is the fold of its log (rebuild), and ends with one
line of figures. Exit 0 only when all of that holds.`,
		Example: `  fleetsim --workers 50 --slots 2 --tasks 2000 --flows 20
  fleetsim --workers 1000 --slots 4 --tasks 2000 --flows 400 --submit-every 100ms
  fleetsim --workers 1000 --slots 4 --tasks 10000 --cpuprofile ctrl.pprof --profile-seconds 60
  fleetsim --workers 100 --slots 4 --tasks 1000 --nats-url nats://127.0.0.1:4222 --controller-pid 4242`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), &f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&f.o.Workers, "workers", 50, "simulated workers")
	fs.IntVar(&f.o.Slots, "slots", 4, "attempts each worker runs at once")
	fs.IntVar(&f.o.Plan.Tasks, "tasks", 2000, "tasks in all")
	fs.IntVar(&f.o.Plan.Flows, "flows", 1, "flows the tasks are spread over, submitted at once")
	fs.StringVar(&f.o.URL, "nats-url", "", "NATS of a running controller (default: start one, as controller dev does)")
	fs.IntVar(&f.o.ControllerPid, "controller-pid", 0, "with --nats-url: the controller process to measure")
	fs.BoolVar(&f.o.Embedded, "embedded", false, "without --nats-url: the controller runs its embedded nats-server (its CPU includes the server's)")
	fs.IntVar(&f.o.Standbys, "standbys", 0, "without --nats-url: start this many standby controllers beside the first, and measure how far behind its fold each keeps")
	fs.StringVar(&f.o.NATSSync, "nats-sync", "always", "without --nats-url: the nats-server's sync interval, as nats.sync_interval says it")
	fs.StringVar(&f.ctl, "controller", "", "the controller binary to start (default: the one beside fleetsim, else in PATH)")
	fs.StringVar(&f.o.DataDir, "data-dir", "", "where the started controller and the workers keep their files (default: a temporary dir, removed)")
	fs.StringVar(&f.o.Plan.Runtime, "runtime", "demo", "the runtime of every task; the workers serve it (the controller must know it)")
	fs.IntVar(&f.o.Plan.MaxAttempts, "max-attempts", 3, "the flows' retry max_attempts")
	fs.DurationVar(&f.o.SubmitEvery, "submit-every", 0, "pace the flows: submit one every this long (0: all at once, saturating the fleet); the offered load is tasks per flow over it")
	fs.DurationVar(&f.o.Timeout, "timeout", time.Hour, "how long to wait for the flows to complete")
	fs.DurationVar(&f.o.ProgressEvery, "progress", 30*time.Second, "how often to say how far the flows are (stderr)")
	mixFlags(cmd, &f.o.Mix)
	fs.StringVar(&f.o.CPUProfile, "cpuprofile", "", "save the started controller's CPU profile to this file")
	fs.IntVar(&f.o.ProfileSeconds, "profile-seconds", 30, "how long the CPU profile runs, from the first submission")
	fs.StringVar(&f.o.HeapProfile, "heapprofile", "", "save the started controller's heap profile, once the flows completed, to this file")
	fs.StringVar(&f.o.NATSCPUProfile, "nats-cpuprofile", "", "save the started nats-server's CPU profile, over --profile-seconds from the first submission, to this file")
	fs.StringVar(&f.o.NATSHeapProfile, "nats-heapprofile", "", "save the started nats-server's heap profile, once the flows completed, to this file")
	fs.StringVar(&f.selfProfile, "self-cpuprofile", "", "save fleetsim's own CPU profile (its workers') to this file")
	fs.StringVar(&f.logLevel, "log-level", "error", "the workers' log level: debug, info, warn, error")
	fs.StringVar(&f.configFile, "config", "", "the workers' base config file (YAML); also $DROVER_CONFIG")
	cmd.AddCommand(newNATSServer())
	return cmd
}

// mixFlags are the simulated runtime's.
func mixFlags(cmd *cobra.Command, m *fleetsim.Mix) {
	fs := cmd.Flags()
	fs.Uint64Var(&m.Seed, "seed", 1, "the seed every run's outcome is drawn from")
	fs.DurationVar(&m.DurationMedian, "duration-median", 50*time.Millisecond, "a run's median duration (log-normal)")
	fs.DurationVar(&m.DurationP99, "duration-p99", 500*time.Millisecond, "a run's 99th-percentile duration")
	fs.Float64Var(&m.Fail, "fail", 0.02, "fraction of runs failing with a retried class")
	fs.Float64Var(&m.Fatal, "fatal", 0.002, "fraction of runs failing their task at once")
	fs.Float64Var(&m.RateLimit, "rate-limit", 0, "fraction of runs meeting a rate limit (the runtime cools down fleet-wide)")
	fs.DurationVar(&m.RateLimitWait, "rate-limit-wait", 500*time.Millisecond, "the wait a rate limit asks for")
	fs.Float64Var(&m.Hang, "hang", 0.002, "fraction of runs that hang until fleetsim cancels their task")
	fs.IntVar(&m.OutputMedian, "output-median", 2<<10, "a run's median output, in bytes (log-normal)")
	fs.IntVar(&m.OutputP99, "output-p99", 64<<10, "a run's 99th-percentile output, in bytes")
	fs.IntVar(&m.Files, "files", 2, "files each run changes")
}

// maxStandbys bounds --standbys: each is a whole controller, folding the
// whole log on the same machine.
const maxStandbys = 8

func run(ctx context.Context, f *flags, stdout, stderr io.Writer) error {
	o := &f.o
	if o.Workers < 1 || o.Slots < 1 || o.Plan.Tasks < 1 || o.Plan.Flows < 1 {
		return exitcode.With(exitcode.Usage, errors.New("--workers, --slots, --tasks and --flows must be at least 1"))
	}
	if o.Standbys < 0 || o.Standbys > maxStandbys {
		return exitcode.With(exitcode.Usage, fmt.Errorf("--standbys %d: must be 0..%d", o.Standbys, maxStandbys))
	}
	if o.Standbys > 0 && (o.URL != "" || o.Embedded) {
		return exitcode.With(exitcode.Usage, errors.New("--standbys needs the nats-server fleetsim starts apart: not with --nats-url or --embedded"))
	}
	if o.SubmitEvery < 0 {
		return exitcode.With(exitcode.Usage, fmt.Errorf("--submit-every %s: must not be negative", o.SubmitEvery))
	}
	cfg, err := config.Load(config.LoadOptions{File: f.configFile})
	if err != nil {
		return err
	}
	cfg.Log.Level = f.logLevel
	if err := cfg.Validate(); err != nil {
		return err
	}
	o.Config, o.Log, o.Progress = cfg, cfg.Log.Logger(stderr), stderr
	if o.URL == "" {
		if o.ControllerBinary, err = controllerBinary(f.ctl); err != nil {
			return err
		}
		// Refused here, not by the server process in a data dir removed
		// when the run ends.
		if err := setSync(&natsconn.EmbeddedOptions{}, o.NATSSync); err != nil {
			return err
		}
		if o.NATSBinary, err = os.Executable(); err != nil {
			return fmt.Errorf("fleetsim: %w", err)
		}
	}
	if f.selfProfile != "" {
		stop, err := selfProfile(f.selfProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	res, err := fleetsim.Run(ctx, *o)
	if err != nil {
		return err
	}
	report(stdout, res)
	if !res.OK() {
		return exitcode.With(exitcode.Failed, errors.New("fleetsim: the fleet lost or doubled work, a flow was stored twice, or the projection is not the fold of the log"))
	}
	return nil
}

// selfProfile profiles this process's CPU into file until stop.
func selfProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// controllerBinary is the controller to start: the flag's, else the one
// beside this binary, else controller in PATH.
func controllerBinary(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if exe, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(exe), "controller")
		if _, err := os.Stat(beside); err == nil {
			return beside, nil
		}
	}
	return "controller", nil
}

// report prints the figures, the problems found, and the summary line last.
func report(w io.Writer, r *fleetsim.Result) {
	fmt.Fprintf(w, "fleetsim: %d flows, %d runs, %d events; tasks %v\n", r.Flows, r.Runs, r.Events, r.Verdict.States)
	fmt.Fprintf(w, "fleetsim: lapsed leases: %d attempts declared lost, %d tasks ended otherwise than their runs dictated for it\n",
		r.Verdict.LapsedAttempts, r.Verdict.Lapsed)
	fmt.Fprintf(w, "fleetsim: claim wait p50 %.2f ms, p99 %.2f ms over %d claims\n",
		ms(r.ClaimP50), ms(r.ClaimP99), r.Claims)
	for _, p := range r.ClaimParts {
		fmt.Fprintf(w, "fleetsim: claim wait, %s: p50 %.2f ms, p99 %.2f ms\n", p.Name, ms(p.P50), ms(p.P99))
	}
	if r.Measured {
		fmt.Fprintf(w, "fleetsim: controller CPU %.1f s, RSS %.1f MB (peak %.1f MB)\n",
			r.ControllerCPU.Seconds(), float64(r.RSS)/(1<<20), float64(r.PeakRSS)/(1<<20))
	}
	if r.NATSMeasured {
		fmt.Fprintf(w, "fleetsim: nats-server CPU %.1f s\n", r.NATSCPU.Seconds())
	}
	if len(r.Standbys) > 0 {
		l := r.LeaderLag
		fmt.Fprintf(w, "fleetsim: the first controller's fold behind p50 %d events, max %d (%d samples)\n", l.P50, l.Max, l.Samples)
	}
	for _, sb := range r.Standbys {
		caught := "not caught up within a minute"
		if sb.CaughtUp >= 0 {
			caught = fmt.Sprintf("caught up %.1f s after the flows completed", sb.CaughtUp.Seconds())
		}
		fmt.Fprintf(w, "fleetsim: standby %s (%s at the end): CPU %.1f s, %.3f ms a task, RSS %.1f MB; behind p50 %d events, max %d (%d samples); %s\n",
			termsafe.Text(sb.ID), sb.Role, sb.CPU.Seconds(), ms(sb.CPU)/float64(r.Tasks), float64(sb.RSS)/(1<<20), sb.Lag.P50, sb.Lag.Max, sb.Lag.Samples, caught)
	}
	fmt.Fprintf(w, "fleetsim: the simulated workers' CPU %.1f s, %.3f ms a task\n",
		r.FleetCPU.Seconds(), ms(r.FleetCPU)/float64(r.Tasks))
	var names []string
	for name, n := range r.Writes {
		if n > 0 {
			names = append(names, fmt.Sprintf("%s %.2f", name, float64(n)/float64(r.Tasks)))
		}
	}
	sort.Strings(names)
	fmt.Fprintf(w, "fleetsim: writes per task: %s\n", strings.Join(names, ", "))
	if rb := r.Rebuild; rb != nil {
		fmt.Fprintf(w, "fleetsim: rebuild equal=%v (%d events, %d records, %d ms)\n", rb.Equal, rb.Events, rb.Records, rb.Millis)
		for _, d := range rb.Diffs {
			fmt.Fprintf(w, "fleetsim: rebuild: %s\n", termsafe.Text(d))
		}
	}
	for _, p := range r.Verdict.Problems {
		fmt.Fprintf(w, "fleetsim: %s\n", termsafe.Line(p))
	}
	fmt.Fprintln(w, r.Line())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

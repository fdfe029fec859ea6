// Package bench measures what Drover costs on top of the work it cannot
// avoid, and where its limits are. Its benchmarks start real processes —
// the controller with its embedded nats-server, worker processes, the demo
// agent as the CLI, real git repositories — and report custom metrics
// (ratios, seconds, events/s, latency percentiles, peak RSS) for
// `make bench`, which runs each several times and prints the median, min and
// max of every metric (bench/summarize). docs/benchmarks.md has the figures
// and what each scenario measures.
//
// The binaries are built once, without the race detector, and only when a
// benchmark runs (`go test -bench`): `make test` compiles this package and
// runs nothing. Every benchmark is skipped under -short.
//
// Sizes can be scaled down for development with DROVER_BENCH_* variables
// (see each benchmark); the defaults are the scenarios.
// DROVER_BENCH_KEEP_LOGS=1 keeps every process's log (the path is logged;
// run with -v), DROVER_BENCH_LOG_LEVEL=debug makes them say more (every git
// command and how long it took); a failed run keeps them anyway.
// DROVER_BENCH_WORKDIR=DIR puts repositories, worktrees and repo caches
// there (the controller's data dir stays in TMPDIR).
// DROVER_BENCH_ENV=K=V,K=V adds configuration to every Drover process, for
// experiments (DROVER_NATS_SYNC_INTERVAL=default, say).
// DROVER_BENCH_PPROF=DIR takes a CPU profile of the controller and each
// worker during the measured flow of BenchmarkEndToEnd and BenchmarkScale
// (DROVER_BENCH_PPROF_SECONDS, default 20), through the opt-in
// /debug/pprof of http.listen (config http.pprof).
// BenchmarkNativeEndToEnd takes DROVER_BENCH_NATIVE_TASKS (20) and
// DROVER_BENCH_NATIVE_HELD (20); the native runtime's in-process figures are
// BenchmarkTurnOverhead and BenchmarkMemoryPerAttempt in internal/native.
// BenchmarkFold, in internal/controller, takes DROVER_BENCH_FOLD_EVENTS and
// DROVER_BENCH_FOLD_PROFILE=FILE, a CPU profile of the fold alone.
package bench

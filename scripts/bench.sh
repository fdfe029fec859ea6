#!/usr/bin/env bash
# Runs every scenario of docs/benchmarks.md, each several times, and prints
# the median, min and max of each figure with its target (bench/summarize).
# `make bench` runs it. The raw `go test -bench` output goes to
# $BENCH_OUT (default bin/bench.txt), so the summary can be made again:
#
#   go run ./bench/summarize bin/bench.txt
#
# Counts and the scale scenario's size can be changed:
#   BENCH_COUNT_E2E (3) BENCH_COUNT_FOLD (5) BENCH_COUNT_CLAIM (3)
#   BENCH_COUNT_FLOOD (3) BENCH_COUNT_SCALE (2) BENCH_SCALE_TASKS (1000)
#   BENCH_COUNT_CONSOLE (3) BENCH_COUNT_NATIVE (3) BENCH_COUNT_NATIVE_E2E (2) BENCH_COUNT_SANDBOX (3)
#   BENCH_COUNT_STANDBY (3) BENCH_COUNT_FAILOVER (1: 20 kills each) BENCH_COUNT_STATUS (3)
# and each scenario's size by its DROVER_BENCH_* variable (see bench/doc.go).
# BENCH_ONLY="scale e2e" runs only those scenarios (fold, standby, failover,
# claim, flood, scale, e2e, console, status, native, sandbox, micro); `make bench-scale` runs the scale scenario as the issue
# specifies it, 10,000 vs 1,000 tasks, which takes longer than the rest.
#
# Repositories, repo caches and worktrees go to BENCH_WORKDIR, by default
# /dev/shm/drover-bench (tmpfs) when there is one; BENCH_WORKDIR= (empty)
# keeps them in TMPDIR with everything else. The controller's data dir
# (JetStream with fsync on every write, Pebble) is always in TMPDIR, on disk.
# Why: on a virtual disk, creating the 2,000 files of a worktree can cost
# 0.2-1.5 s of kernel time depending on what the disk did just before,
# which swamps what BenchmarkEndToEnd compares (docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
out=${BENCH_OUT:-bin/bench.txt}
began=$(date +%s)
mkdir -p "$(dirname "$out")"
: >"$out"

# The binaries the process benchmarks start, built once, without -race.
bindir=$(mktemp -d)
trap 'rm -rf "$bindir"' EXIT
"$GO" build -o "$bindir/" ./cmd/controller ./cmd/worker ./cmd/demo-agent
ln -s "$bindir/demo-agent" "$bindir/claude"
export DROVER_BENCH_BIN=$bindir
# The sandbox's re-exec step is timed as the worker binary it really is
# (internal/sandbox BenchmarkStart).
export DROVER_BENCH_STEP=$bindir/worker
if [ -z "${BENCH_WORKDIR+set}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
	BENCH_WORKDIR=/dev/shm/drover-bench
fi
export DROVER_BENCH_WORKDIR=${BENCH_WORKDIR:-}
[ -z "$DROVER_BENCH_WORKDIR" ] || mkdir -p "$DROVER_BENCH_WORKDIR"

only=" ${BENCH_ONLY:-fold standby failover claim flood scale e2e console status native sandbox micro} "
want() { [[ "$only" == *" $1 "* ]]; }

bench() { # PATTERN COUNT PACKAGE; BENCHTIME (default 1x) as go test takes it
	echo "== $1 ×$2 ($3)" >&2
	"$GO" test -v -run '^$' -bench "$1" -benchtime "${BENCHTIME:-1x}" -count "$2" -timeout 90m "$3" | tee -a "$out"
}

{
	echo "nproc: $(nproc)"
	echo "go: $("$GO" env GOVERSION)"
	echo "disk: $(df -h "${TMPDIR:-/tmp}" | awk 'NR==2 {print $1, $2}') ($(findmnt -no FSTYPE,OPTIONS -T "${TMPDIR:-/tmp}" 2>/dev/null | head -1 | tr -s ' ' || echo '?'))"
	echo "workdir: ${DROVER_BENCH_WORKDIR:-TMPDIR} ($(findmnt -no FSTYPE -T "${DROVER_BENCH_WORKDIR:-${TMPDIR:-/tmp}}" 2>/dev/null | head -1 || echo '?'))"
} | tee -a "$out"
want fold && bench 'BenchmarkFold$' "${BENCH_COUNT_FOLD:-5}" ./internal/controller/
# A standby's fold under the fold benchmark's load, and the leader killed
# 20 times among three controllers.
want standby && bench 'BenchmarkStandbyLag$' "${BENCH_COUNT_STANDBY:-3}" ./internal/controller/
# What an operator's reads of a 10,000-task flow among 110,000 tasks cost.
want status && bench 'BenchmarkStatusPages$' "${BENCH_COUNT_STATUS:-3}" ./internal/controller/
want failover && bench 'BenchmarkFailover$' "${BENCH_COUNT_FAILOVER:-1}" ./bench/
want claim && bench 'BenchmarkClaimLatency$' "${BENCH_COUNT_CLAIM:-3}" ./bench/
want flood && bench 'BenchmarkOutputFlood$' "${BENCH_COUNT_FLOOD:-3}" ./bench/
# 1,000 vs 100 tasks by default: 10,000 vs 1,000 take some 10 minutes
# here on their own (docs/benchmarks.md, `make bench-scale`).
want scale && DROVER_BENCH_SCALE_TASKS=${BENCH_SCALE_TASKS:-1000} bench 'BenchmarkScale$' "${BENCH_COUNT_SCALE:-2}" ./bench/
want e2e && bench 'BenchmarkEndToEnd$' "${BENCH_COUNT_E2E:-3}" ./bench/
# The console with a 10,000-task flow: the server's rendering and layout,
# then the page in headless Chromium and its live updates (skipped, saying
# why, without chromium: make bench installs it).
want console && bench 'BenchmarkFlowPage10k$|BenchmarkConsoleBrowser10k$' "${BENCH_COUNT_CONSOLE:-3}" ./internal/console/
# The native runtime: what it adds to each turn and what each attempt
# holds, in process against a test server per wire protocol (20 attempts of
# 10 turns per run), then through a worker process.
if want native; then
	BENCHTIME=20x bench 'BenchmarkTurnOverhead$' "${BENCH_COUNT_NATIVE:-3}" ./internal/native/
	bench 'BenchmarkMemoryPerAttempt$' "${BENCH_COUNT_NATIVE:-3}" ./internal/native/
	bench 'BenchmarkNativeEndToEnd$' "${BENCH_COUNT_NATIVE_E2E:-2}" ./bench/
fi
want sandbox && bench 'BenchmarkSandbox$' "${BENCH_COUNT_SANDBOX:-3}" ./bench/
# The packages' micro-benchmarks (publishing and fsync, tracing, parsing,
# planning), at go test's default benchtime.
if want micro; then
	echo "== micro-benchmarks" >&2
	"$GO" test -run '^$' -bench . -skip 'BenchmarkFold$|BenchmarkStandbyLag$|BenchmarkStatusPages$|BenchmarkFlowPage10k$|BenchmarkConsoleBrowser10k$|BenchmarkTurnOverhead$|BenchmarkMemoryPerAttempt$' -benchmem -count 1 ./internal/... | tee -a "$out"
fi

echo
"$GO" run ./bench/summarize \
	-target 'EndToEnd:ratio<=1.10' \
	-target 'Fold:events/s>=50000' -target 'Fold:ratio>=0.5' \
	-target 'Failover:failover_max_s<=5' \
	-target 'ClaimLatency:p50_ms<=2' -target 'ClaimLatency:p99_ms<=10' \
	-target 'Scale:peak_rss_MB<=256' -target 'Scale:ratio<=11' \
	-target 'OutputFlood:rss_growth_MB<=64' \
	-target 'ConsoleBrowser10k:load_ms<=2000' -target 'ConsoleBrowser10k:lag_ms<=2000' \
	-target 'TurnOverhead:ms/turn<=5' -target 'MemoryPerAttempt:MB/attempt<=5' \
	-target 'NativeEndToEnd:turn_ms<=5' -target 'NativeEndToEnd:rss_per_attempt_MB<=5' \
	-target 'Sandbox:attempt_delta_ms<=5' \
	"$out"
echo
echo "make bench took $(($(date +%s) - began)) s; raw output in $out"

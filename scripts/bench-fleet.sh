#!/usr/bin/env bash
# Runs the fleet simulator (bin/fleetsim, docs/benchmarks.md#the-fleet) at
# the sizes of issue 29, one after the other, each against a controller of
# its own: 1,000 workers × 4 slots with 1,000, 10,000 and 100,000 tasks in
# one flow (100,000 is the most a flow may have), and 1,000 flows of 100
# tasks; then the claim's latency with the fleet polling: 2,000
# tasks in flows of 5, one flow every 100 ms (50 tasks a second, a third of
# what the saturated runs get through here). `make bench-fleet` runs it after `make build`. The
# output goes to $BENCH_OUT (default bin/bench-fleet.txt); each run ends
# with its `fleet:` line, and the script with the ratio of the 100,000-task
# run's wall time to the 10,000-task one's.
#
#   FLEET_ONLY="1k 10k"   runs only those sizes (1k 10k 100k flows poll;
#                         100kx10, 100,000 tasks in ten flows of 10,000, as
#                         the figures before a flow could hold 100,000, runs
#                         only when named)
#   FLEET_PPROF=DIR       keeps CPU profiles of the controller and of the
#                         nats-server over each run's first
#                         FLEET_PPROF_SECONDS (default 120) and the
#                         controller's heap at the end, in DIR
#   FLEET_ARGS="…"        adds fleetsim flags to every run (--seed 2, say)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
out=${BENCH_OUT:-bin/bench-fleet.txt}
only=" ${FLEET_ONLY:-1k 10k 100k flows poll} "
mkdir -p "$(dirname "$out")"
: >"$out"
began=$(date +%s)

run() { # NAME FLAGS…
	local name=$1
	shift
	[[ "$only" == *" $name "* ]] || return 0
	local prof=()
	if [ -n "${FLEET_PPROF:-}" ]; then
		mkdir -p "$FLEET_PPROF"
		prof=(--cpuprofile "$FLEET_PPROF/fleet-$name-cpu.pprof" --profile-seconds "${FLEET_PPROF_SECONDS:-120}"
			--heapprofile "$FLEET_PPROF/fleet-$name-heap.pprof" --nats-cpuprofile "$FLEET_PPROF/fleet-$name-nats-cpu.pprof")
	fi
	local t0
	t0=$(date +%s)
	echo "== $name: fleetsim $* (load average $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$out"
	# shellcheck disable=SC2086
	"$BIN/fleetsim" "$@" "${prof[@]}" ${FLEET_ARGS:-} | tee -a "$out"
	echo "== $name took $(($(date +%s) - t0)) s" | tee -a "$out"
}

run 1k --workers 1000 --slots 4 --tasks 1000 --timeout 2h
run 10k --workers 1000 --slots 4 --tasks 10000 --timeout 2h
run 100k --workers 1000 --slots 4 --tasks 100000 --timeout 6h
run 100kx10 --workers 1000 --slots 4 --tasks 100000 --flows 10 --timeout 6h
run flows --workers 1000 --slots 4 --tasks 100000 --flows 1000 --timeout 6h
run poll --workers 1000 --slots 4 --tasks 2000 --flows 400 --submit-every 100ms --timeout 30m

wall() { grep -A100 "^== $1:" "$out" | grep -m1 '^fleet:' | sed -E 's/.* wall_s=([0-9.]+) .*/\1/'; }
if [[ "$only" == *" 10k "* && "$only" == *" 100k "* ]]; then
	echo "time(100,000 tasks) / time(10,000 tasks) = $(awk -v a="$(wall 100k)" -v b="$(wall 10k)" 'BEGIN { printf "%.2f", a / b }')" | tee -a "$out"
fi
echo "make bench-fleet took $(($(date +%s) - began)) s; output in $out"

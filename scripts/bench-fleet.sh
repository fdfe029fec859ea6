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
#   FLEET_PAIRS=N         runs the 10k and 100k sizes N times, alternating
#                         (default 1): a run's wall time moves by ±10 % with
#                         the shared machine, so the ratio is that of the
#                         medians, each pair's printed beside it
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
for _ in $(seq "${FLEET_PAIRS:-1}"); do
	run 10k --workers 1000 --slots 4 --tasks 10000 --timeout 2h
	run 100k --workers 1000 --slots 4 --tasks 100000 --timeout 6h
done
run 100kx10 --workers 1000 --slots 4 --tasks 100000 --flows 10 --timeout 6h
run flows --workers 1000 --slots 4 --tasks 100000 --flows 1000 --timeout 6h
run poll --workers 1000 --slots 4 --tasks 2000 --flows 400 --submit-every 100ms --timeout 30m

# walls NAME prints the wall time of each run of that size, in order.
walls() {
	awk -v name="$1" '/^== / { cur = $2 } /^fleet:/ && cur == name":" { sub(/.* wall_s=/, ""); sub(/ .*/, ""); print }' "$out"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
if [[ "$only" == *" 10k "* && "$only" == *" 100k "* ]]; then
	small=$(walls 10k | median)
	big=$(walls 100k | median)
	pairs=$(paste <(walls 10k) <(walls 100k) | awk '{ printf "%s%.2f", sep, $2 / $1; sep = " " }')
	echo "time(100,000 tasks) / time(10,000 tasks) = $(awk -v a="$big" -v b="$small" 'BEGIN { printf "%.2f", a / b }')" \
		"(medians $big / $small s; each pair: $pairs)" | tee -a "$out"
fi
echo "make bench-fleet took $(($(date +%s) - began)) s; output in $out"

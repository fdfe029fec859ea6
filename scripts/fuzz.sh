#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 30s).
# `make fuzz` runs it; CI runs it briefly (FUZZTIME=3s).
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-30s}
mintime=${FUZZMINTIME:-10s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pkg in $(go list ./...); do
  for f in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "== $pkg $f ($fuzztime)"
    for try in 1 2 3; do
      if go test -run '^$' -fuzz "^$f\$" -fuzztime "$fuzztime" -fuzzminimizetime "$mintime" "$pkg" >"$log" 2>&1; then
        tail -n 2 "$log"
        break
      fi
      cat "$log"
      # A crash writes its input under testdata/fuzz and fails. The fuzzing
      # coordinator itself sometimes gives up with "context deadline
      # exceeded" and no input (often, at CI's 3 s): that is not a finding,
      # so run it again, up to three times in all.
      if [ "$try" -lt 3 ] && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
        echo "(the fuzzing coordinator timed out without a finding; running $f again)"
        continue
      fi
      exit 1
    done
  done
done

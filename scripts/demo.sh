#!/usr/bin/env bash
# The demo flow: a throwaway git repo, a controller with embedded NATS and two
# local workers (`controller dev`), the bundled demo agent, and the result.
set -euo pipefail
BIN=${BIN:-bin}
BIN=$(cd "$BIN" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/drover-demo.XXXXXX")
dev_pid=
cleanup() {
  if [ -n "$dev_pid" ]; then kill "$dev_pid" 2>/dev/null || true; wait "$dev_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

git_() { git -c user.name=demo -c user.email=demo@localhost -c init.defaultBranch=main "$@"; }

echo "==> a throwaway repository at $tmp/repo.git"
git_ init -q --bare "$tmp/repo.git"
git_ init -q "$tmp/seed"
printf '# Demo project\n\nA tiny project for the Drover demo.\n' > "$tmp/seed/README.md"
git_ -C "$tmp/seed" add -A
git_ -C "$tmp/seed" commit -q -m "initial commit"
git_ -C "$tmp/seed" push -q "$tmp/repo.git" HEAD:refs/heads/main
base=$(git_ -C "$tmp/seed" rev-parse HEAD)

echo "==> controller dev: embedded NATS, controller, 2 workers (log: $tmp/dev.log)"
"$BIN/controller" dev --data-dir "$tmp/data" --nats-listen 127.0.0.1:-1 --workers 2 --log-level warn >"$tmp/dev.log" 2>&1 &
dev_pid=$!
for _ in $(seq 1 100); do
  [ -s "$tmp/data/nats.url" ] && break
  kill -0 "$dev_pid" 2>/dev/null || { cat "$tmp/dev.log"; exit 1; }
  sleep 0.1
done
[ -s "$tmp/data/nats.url" ] || { echo "controller did not start"; cat "$tmp/dev.log"; exit 1; }

echo "==> controller submit examples/demo.yaml --watch"
"$BIN/controller" submit "$here/examples/demo.yaml" --repo "$tmp/repo.git" --data-dir "$tmp/data" --watch | tee "$tmp/submit.out"
flow=$(sed -n 's/^submitted flow \([^ ]*\).*/\1/p' "$tmp/submit.out")

echo
echo "==> controller status $flow"
"$BIN/controller" status "$flow" --data-dir "$tmp/data"

echo
echo "==> controller status $flow --task farewell (the retry's prompt carries the failed check)"
"$BIN/controller" status "$flow" --task farewell --data-dir "$tmp/data"

branch=$("$BIN/controller" status "$flow" --data-dir "$tmp/data" | awk '$1 == "integration" {print $2}')
echo
echo "==> the result: git diff main..$branch (the flow's integration branch: every task's work)"
git --git-dir "$tmp/repo.git" --no-pager diff --stat "$base" "$branch"
git --git-dir "$tmp/repo.git" --no-pager diff "$base" "$branch"

echo
echo "==> controller rebuild (replay the event log, compare with the live state)"
"$BIN/controller" rebuild --data-dir "$tmp/data"
echo
echo "demo finished: flow $flow succeeded"

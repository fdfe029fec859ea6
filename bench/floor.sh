#!/usr/bin/env bash
# The floor of BenchmarkEndToEnd: the work of running coding-agent tasks that
# nothing can avoid, with nothing else — per task, a worktree from a local
# cache, the CLI in it, a commit of what it changed, and the diff.
#
#   floor.sh CACHE BASE TASKS LANES PROMPTS OUT -- CLI [ARGS...]
#
# CACHE is a bare clone of the repository (made beforehand), BASE the
# revision tasks start from, PROMPTS a directory holding one file per task
# (0, 1, …), OUT where worktrees, transcripts and diffs go. The CLI runs as
# `CLI ARGS... PROMPT` in the task's worktree, the command line Drover's
# runtime builds. Tasks run in LANES parallel lanes (xargs -P).
set -euo pipefail

if [ "${1:-}" = "--task" ]; then
	i=$2
	shift 2
	wt="$FLOOR_OUT/wt-$i"
	git --git-dir="$FLOOR_CACHE" worktree add --quiet -b "floor/$i" "$wt" "$FLOOR_BASE"
	cd "$wt"
	"$@" "$(cat "$FLOOR_PROMPTS/$i")" >"$FLOOR_OUT/$i.jsonl"
	git add -A
	git commit --quiet -m "task $i"
	git diff "$FLOOR_BASE"..HEAD >"$FLOOR_OUT/$i.diff"
	exit 0
fi

if [ $# -lt 8 ] || [ "$7" != "--" ]; then
	echo "usage: floor.sh CACHE BASE TASKS LANES PROMPTS OUT -- CLI [ARGS...]" >&2
	exit 2
fi
mkdir -p "$6"
# Absolute: each task works from inside its worktree.
FLOOR_CACHE=$(realpath "$1") FLOOR_BASE=$2 FLOOR_PROMPTS=$(realpath "$5") FLOOR_OUT=$(realpath "$6")
export FLOOR_CACHE FLOOR_BASE FLOOR_PROMPTS FLOOR_OUT
tasks=$3 lanes=$4
shift 7
seq 0 $((tasks - 1)) | xargs -P "$lanes" -I{} "$0" --task {} "$@"

#!/usr/bin/env bash
# The no-flake proof (RELIABILITY.md): runs scripts/test.sh N times in a row (default 10) while `stress-ng --cpu 2`
# keeps both cores busy, and prints one line per run with its time and result. Stops at the first failing run
# (its output is kept in the log directory). Run it from a fresh clone; the first run includes the build.
#   scripts/loaded-runs.sh [N]          PREFETCH_SKIP_FUZZ=1 passes through (the fuzzers decide nothing by time)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
case "$runs" in '' | *[!0-9]*) echo "loaded-runs: N must be a positive integer, not '$runs'" >&2; exit 2 ;; esac
[ "$runs" -ge 1 ] || { echo "loaded-runs: N must be at least 1" >&2; exit 2; }
if ! command -v stress-ng >/dev/null; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine has no package lists yet: without the update, apt cannot find stress-ng.
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends stress-ng >/dev/null
fi
logs=$(mktemp -d /tmp/prefetch-loaded-runs.XXXXXX)
stress-ng --cpu 2 --quiet >/dev/null 2>&1 &
stress=$!
trap 'kill -TERM "$stress" 2>/dev/null || true; wait "$stress" 2>/dev/null || true' EXIT
echo "loaded-runs: $runs runs of scripts/test.sh beside stress-ng --cpu 2 (pid $stress) on $(nproc) cores; logs in $logs"
for run in $(seq 1 "$runs"); do
  SECONDS=0
  if scripts/test.sh >"$logs/run-$run.log" 2>&1; then
    echo "loaded-runs: run $run/$runs passed in $SECONDS s ($(grep -h '^test.sh: layer' "$logs/run-$run.log" | sed 's/^test.sh: layer //' | paste -sd ';' -))"
  else
    echo "loaded-runs: run $run/$runs FAILED after $SECONDS s; its output: $logs/run-$run.log" >&2
    grep -E '✘|failed' "$logs/run-$run.log" | head -20 >&2 || true
    exit 1
  fi
done
echo "loaded-runs: $runs of $runs passed in a row under load"

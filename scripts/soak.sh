#!/usr/bin/env bash
# Soak test (not part of CI): runs `prefetch serve` (random free port on 127.0.0.1) against a local
# `prefetch-upstream` for N minutes at a fixed rate of mixed triggers and reads with random upstream faults,
# samples RSS, open file descriptors, threads and store bytes every 30 s, and fails unless they stay flat
# (second-half max within the tolerance of the first-half max) and the service is healthy at the end.
#
# Usage: scripts/soak.sh [--minutes 10] [--rate 40] [--interval 30] [--tolerance 10] [--store-bytes 16777216]
#                        [--seed N] [--release] [--json FILE]
# It builds the two executables first (debug by default; --release for the optimized build).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=10 rate=40 interval=30 tolerance=10 store_bytes=$((16 * 1024 * 1024)) seed="" config=debug json=""
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --tolerance) tolerance=$2; shift 2 ;;
    --store-bytes) store_bytes=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --release) config=release; shift ;;
    *) sed -n '2,10p' "$0" >&2; exit 2 ;;
  esac
done

scripts/ensure-deps.sh build
swift build -c "$config" --product prefetch >&2
swift build -c "$config" --product prefetch-upstream >&2
bin=$(swift build -c "$config" --show-bin-path)

. scripts/lib-processes.sh

"$bin/prefetch-upstream" --port 0 --threads 2 >"$work/upstream.out" 2>&1 &
pids+=($!)
upstream="http://127.0.0.1:$(wait_port "$work/upstream.out" "listening on" 600)"

# `ok` and `post` forward only `i` (always healthy); `fault` forwards the whole page query, so each trigger
# picks its fault (see FAULTS in bench/soak/load.py).
cat >"$work/prefetch.json" <<JSON
{"code": 200, "data": {"name": "prefetchConfig", "version": "soak", "config": [
  {"url": "$upstream/pages/soak", "interfaces": [
    {"name": "ok", "api": "$upstream/soak/ok", "method": "GET", "urlParam": true, "params": ["i"], "ttl": 30},
    {"name": "post", "api": "$upstream/soak/post", "method": "POST", "bodyParam": true, "params": ["i"], "body": {"k": 1}, "ttl": 20},
    {"name": "fault", "api": "$upstream/soak/fault", "method": "GET", "urlParam": true, "timeout": 500, "ttl": 10}
  ]}
]}}
JSON

# The soak fires many triggers from one client: the per-caller trigger rate limit is off for it.
"$bin/prefetch" serve --config "$work/prefetch.json" --port 0 --admin-port 0 --trigger-rate 0 --store-bytes "$store_bytes" \
  --log-level error >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
pids+=("$serve_pid")
port=$(wait_port "$work/serve.out" "prefetch listening on" 600)
admin_port=$(wait_port "$work/serve.out" "prefetch operator surface on" 600)
echo "soak: serve pid $serve_pid on 127.0.0.1:$port ($config build), upstream $upstream, store budget $store_bytes bytes" >&2
echo "soak: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

args=(--port "$port" --admin-port "$admin_port" --pid "$serve_pid" --page "$upstream/pages/soak" --minutes "$minutes" --rate "$rate"
  --interval "$interval" --tolerance "$tolerance" --budget "$store_bytes")
[ -n "$seed" ] && args+=(--seed "$seed")
[ -n "$json" ] && args+=(--json "$json")
status=0
python3 bench/soak/load.py "${args[@]}" || status=$?
if ! kill -0 "$serve_pid" 2>/dev/null; then
  echo "soak: prefetch serve died:" >&2
  tail -50 "$work/serve.err" >&2
  exit 1
fi
exit "$status"

#!/usr/bin/env bash
# Where the fan-out's CPU goes: `perf record` (cpu-clock sampling: this VM exposes no hardware counters) of the
# service while pages of 8 interfaces, all on ONE upstream origin (the common case), are opened BENCH_PROFILE_PAGES
# times (default 3000) with BENCH_CONCURRENCY in flight (default 8), every page distinct. Prints the CPU the
# service used per upstream request over the measured pages and the top symbols, with callers' share (children)
# and without (self).
#
# valgrind's callgrind would give repeatable instruction counts, but Debian 12's valgrind 3.19 cannot read the
# toolchain's DWARF 5 and, with a DWARF 4 build, dies of SIGSEGV inside libdispatch's start-up: sampling it is.
# Env: BENCH_PROFILE_STORE=memory|redis (default memory), BENCH_PROFILE_ARGS (extra `prefetch serve` flags),
# BENCH_PROFILE_DATA (a file to keep the samples in).
source "$(dirname "$0")/lib.sh"

CONCURRENCY="${BENCH_CONCURRENCY:-8}"
PAGES="${BENCH_PROFILE_PAGES:-3000}"
STORE="${BENCH_PROFILE_STORE:-memory}"
DELAY=5
CLIENT="$BENCH_DIR/clients/fanout-client.js"

ensure_apt linux-perf
ensure_node
build_release

start_upstream 2
cat >"$WORK/config.json" <<JSON
{"code": 200, "data": {"name": "bench-profile", "version": "1", "config": [
  {"url": "https://bench.example.com/fan1/{n}", "interfaces": [$(for k in 0 1 2 3 4 5 6 7; do
    [ "$k" = 0 ] || printf ', '
    printf '{"name": "i%d", "api": "http://127.0.0.1:%s/i%d?delay=%d", "method": "GET", "urlParam": true}' "$k" "$UPSTREAM_PORT" "$k" "$DELAY"
  done)]}
]}}
JSON

STORE_ARGS=()
if [ "$STORE" = redis ]; then
  ensure_apt redis-server
  REDIS_PORT="$(free_port)"
  start redis 'Ready to accept connections' redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no
  STORE_ARGS=(--store "redis://127.0.0.1:$REDIS_PORT" --identity-key "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')")
fi

# shellcheck disable=SC2086 # BENCH_PROFILE_ARGS is a list of flags
start_service "$WORK/config.json" --trigger-rate 0 --log-level warning "${STORE_ARGS[@]}" ${BENCH_PROFILE_ARGS:-}

log "warm-up"
node "$CLIENT" service "$SERVICE_URL" "$CONCURRENCY" 0 300 "" 1 "$DELAY" "https://bench.example.com/fan1/w" >/dev/null
log "profiled: $PAGES page opens, $CONCURRENCY in flight"
perf record -F 999 -g -p "$SERVICE_PID" -o "$WORK/perf.data" >/dev/null 2>"$WORK/perf.err" &
PERF_PID=$!
node "$CLIENT" service "$SERVICE_URL" "$CONCURRENCY" 0 "$PAGES" "server=$SERVICE_PID" 2 "$DELAY" "https://bench.example.com/fan1/p" >"$WORK/client.json"
kill -INT "$PERF_PID"
wait "$PERF_PID" || true
stop "$SERVICE_PID"
# BENCH_PROFILE_DATA=FILE keeps the samples for `perf report -i FILE` (call graphs: `-g caller --no-children`).
[ -z "${BENCH_PROFILE_DATA:-}" ] || cp "$WORK/perf.data" "$BENCH_PROFILE_DATA"

symbols() { # perf report options
  perf report -i "$WORK/perf.data" --sort symbol --stdio -g none "$@" 2>/dev/null \
    | grep -E '^ +[0-9]' | awk 'NR <= 45' | swift demangle --simplified | cut -c1-180
}
{
  echo "## profile-fanout"
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "store $STORE, $PAGES page opens x 8 interfaces on one origin, $CONCURRENCY in flight, upstream delay $DELAY ms"
  node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    console.log(`service cpu per upstream request ${(r.cpuSeconds.server / r.upstreamRequests * 1e6).toFixed(1)} us; overhead p50 ${r.overheadMs.p50.toFixed(2)} ms p99 ${r.overheadMs.p99.toFixed(2)} ms; errors ${r.errors}`);
  ' "$WORK/client.json"
  echo "### with callees (children), top 45"
  symbols --children
  echo "### self, top 45"
  symbols --no-children
} | report profile-fanout

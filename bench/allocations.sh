#!/usr/bin/env bash
# Allocations per upstream request: the fan-out's page opens (8 interfaces on one origin answering after 50 ms,
# CONCURRENCY in flight, every page distinct) against the service, counted at the C allocator (glibc's malloc,
# calloc, realloc, posix_memalign and aligned_alloc, through perf uprobes (a `realloc` of nothing is counted twice, as
# realloc and as the malloc it calls): every Swift object, buffer and box, every libcurl
# allocation and every NIO buffer ends there), and the same transfers made by the C libcurl floor
# (bench/peers/curl-floor.c) counted the same way. Allocation counts do not depend on the machine's speed, so
# this can run on a loaded machine.
#
# Then where the service's allocations come from: the call stacks of every allocation of 40 page opens (`perf
# record --call-graph dwarf` on the probes: the release build keeps no frame pointers, so the stacks are unwound
# from DWARF), each charged to its first frame outside the allocator and the Swift runtime's allocation entry
# points, as a table of the top sites.
# Needs root (uprobes). Env: BENCH_CONCURRENCY (default 16), BENCH_PAGES (default 2000), BENCH_BIN as in fanout.sh.
source "$(dirname "$0")/lib.sh"

CONCURRENCY="${BENCH_CONCURRENCY:-16}"
PAGES="${BENCH_PAGES:-2000}"
DELAY=50
CLIENT="$BENCH_DIR/clients/fanout-client.js"
[ "$(id -u)" -eq 0 ] || { echo "allocations.sh: needs root for perf's uprobes on libc" >&2; exit 1; }

ensure_apt linux-perf
ensure_node
build_release
command -v cc >/dev/null || ensure_apt gcc
FLOOR="$WORK/curl-floor"
cc -O2 -Wall -o "$FLOOR" "$BENCH_DIR/peers/curl-floor.c" -lcurl

LIBC="$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ {print $NF; exit}')"
[ -n "$LIBC" ] || { echo "allocations.sh: libc.so.6 not found" >&2; exit 1; }
EVENTS=()
PROBES="$(perf probe -l 2>/dev/null || true)"
for function in malloc calloc realloc posix_memalign aligned_alloc; do
  grep -q "probe_libc:$function " <<<"$PROBES" || perf probe -q -x "$LIBC" "$function" >/dev/null
  EVENTS+=("probe_libc:$function")
done
# The probes this run added go when it ends (those that were there before stay).
ADDED=()
for event in "${EVENTS[@]}"; do grep -q "$event " <<<"$PROBES" || ADDED+=("$event"); done
trap 'for event in "${ADDED[@]}"; do perf probe -q -d "$event" >/dev/null 2>&1 || true; done; cleanup' EXIT
EVENT_LIST="$(IFS=,; echo "${EVENTS[*]}")"

# allocations FILE: the sum of the probes' counts in a `perf stat -x,` output.
allocations() { awk -F, '$3 ~ /^probe_libc:/ { sum += $1 } END { print sum + 0 }' "$1"; }

start_upstream 1
BASES="$(for k in 0 1 2 3 4 5 6 7; do printf 'http://127.0.0.1:%s/i%d?delay=%d,' "$UPSTREAM_PORT" "$k" "$DELAY"; done)"
BASES="${BASES%,}"
INTERFACES="$(for k in 0 1 2 3 4 5 6 7; do
  printf '%s{"name": "i%d", "api": "http://127.0.0.1:%s/i%d?delay=%d", "method": "GET", "urlParam": true}' \
    "$([ "$k" -eq 0 ] || echo ', ')" "$k" "$UPSTREAM_PORT" "$k" "$DELAY"
done)"
cat >"$WORK/config.json" <<EOF
{"code": 200, "data": {"name": "bench-allocations", "version": "1", "config": [
  {"url": "https://bench.example.com/fan/{n}", "interfaces": [$INTERFACES]}
]}}
EOF

# The service: warmed up by one run, then counted over a second (pages numbered apart, so nothing is cached).
start_service "$WORK/config.json" --trigger-rate 0 --log-level warning
log "allocations: service warm-up"
node "$CLIENT" service "$SERVICE_URL" "$CONCURRENCY" 0 300 "" 1 "$DELAY" >/dev/null
log "allocations: service, $PAGES page opens counted"
perf stat -x, -e "$EVENT_LIST" -p "$SERVICE_PID" -o "$WORK/service.stat" &
PERF=$!
sleep 0.5 # perf attaches its probes to the running process before the first counted page (a late attach only undercounts)
node "$CLIENT" service "$SERVICE_URL" "$CONCURRENCY" 0 "$PAGES" "" 2 "$DELAY" >"$WORK/service.json"
kill -INT "$PERF"
wait "$PERF" || true
SERVICE_ALLOCATIONS="$(allocations "$WORK/service.stat")"
SERVICE_ERRORS="$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).errors)' "$WORK/service.json")"

# Where they come from: a sample of call stacks over a shorter run.
log "allocations: service, call stacks of 40 page opens"
perf record -q -e "$EVENT_LIST" \
  --call-graph dwarf,16384 -p "$SERVICE_PID" -o "$WORK/service.data" 2>/dev/null &
PERF=$!
sleep 0.5
node "$CLIENT" service "$SERVICE_URL" "$CONCURRENCY" 0 40 "" 3 "$DELAY" >/dev/null
kill -INT "$PERF"
wait "$PERF" || true
stop "$SERVICE_PID"
perf script -i "$WORK/service.data" -F ip,sym 2>/dev/null | python3 "$BENCH_DIR/allocation-sites.py" 20 >"$WORK/sites.txt"

# The floor: the same transfers from one C process on the same libcurl, counted whole (its start-up allocations
# are a few hundred, against tens of thousands of transfers).
log "allocations: curl floor, $PAGES page opens counted"
perf stat -x, -e "$EVENT_LIST" -o "$WORK/floor.stat" -- "$FLOOR" socket "$BASES" "$CONCURRENCY" 0 "$PAGES" 4 "$DELAY" >/dev/null
FLOOR_ALLOCATIONS="$(allocations "$WORK/floor.stat")"

TRANSFERS=$((PAGES * 8))
{
  echo "## allocations"
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit $(git -C "$REPO_DIR" rev-parse --short HEAD)"
  echo "machine $(machine_line)"
  echo "workload $PAGES page opens of 8 interfaces on one origin, $CONCURRENCY in flight, upstream delay ${DELAY} ms ($TRANSFERS upstream requests); service errors: $SERVICE_ERRORS"
  echo "counted malloc, calloc, realloc, posix_memalign, aligned_alloc (perf uprobes on $LIBC)"
  awk -v s="$SERVICE_ALLOCATIONS" -v f="$FLOOR_ALLOCATIONS" -v t="$TRANSFERS" -v p="$PAGES" 'BEGIN {
    printf "service allocations per upstream request %.1f (per page open %.0f; %d in all)\n", s / t, s / p, s
    printf "curl floor allocations per transfer %.1f (%d in all)\n", f / t, f
    if (f > 0) printf "ratio service/floor %.2fx\n", s / f
  }'
  echo "top allocation sites of the service (first frame outside malloc and the Swift runtime's allocation entry points), share of sampled allocations:"
  cat "$WORK/sites.txt"
} | report allocations

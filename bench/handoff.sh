#!/usr/bin/env bash
# Handoff: a stored 1 KiB JSON response read through GET /v1/prefetch/{ticket}/data?api=... under wrk, against
# nginx (one worker, the same bytes as a static file) and a Node.js http server answering from a Map. The service
# answers the read on the event loop of its one page pipeline (`PageChannel`, `FastHandoff`). A third peer is the floor of any server on SwiftNIO: `prefetch-upstream --answer-file`, the same bytes answered
# through NIO's own HTTP/1 server pipeline and one handler (no routing, no store, no checks), on as many event loops
# as the service has.
#
# Every server gets the very same request URL and answers the very same 1,024 body bytes. wrk runs with one
# thread (BENCH_WRK_THREADS) and 50 connections: `wrk -t1 -c50`. Two placements are measured:
#   shared  nothing pinned: server and wrk share both cores (how a 2-core box would run them);
#   split   the server pinned to CPU 0 and wrk to CPU 1 (taskset): one core per side, so single-threaded
#           nginx and Node are compared per core with the multi-threaded service.
# Env: BENCH_DURATION (seconds per measurement, default 10), BENCH_WARMUP (default 3), BENCH_PLACEMENTS
# (default "shared split"), BENCH_PROFILE=1 (perf record -g of the service during the first measurement; the
# top symbols are printed after the figures; BENCH_PROFILE_DATA=FILE keeps the samples).
source "$(dirname "$0")/lib.sh"

DURATION="${BENCH_DURATION:-10}"
WARMUP="${BENCH_WARMUP:-3}"
PLACEMENTS="${BENCH_PLACEMENTS:-shared split}"
CONNECTIONS=50
THREADS="${BENCH_WRK_THREADS:-1}"

ensure_apt wrk nginx-light curl
[ -z "${BENCH_PROFILE:-}" ] || ensure_apt linux-perf
ensure_node
build_release

start_upstream 1
API="http://127.0.0.1:$UPSTREAM_PORT/handoff.json"
PAGE="https://bench.example.com/handoff"
cat >"$WORK/config.json" <<EOF
{"code": 200, "data": {"name": "bench-handoff", "version": "1", "config": [
  {"url": "$PAGE", "interfaces": [{"name": "handoff", "api": "$API", "method": "GET", "urlParam": true, "ttl": 86400}]}
]}}
EOF
start_service "$WORK/config.json"

API_QUERY="$(node -p 'encodeURIComponent(process.argv[1])' "$API")"

# trigger PAD_LENGTH: triggers the page with a padding parameter and prints the ticket. The padded page URL must
# stay under the service's 8 KiB limit for page URLs (414 beyond it).
trigger() { # PAD_LENGTH [SERVICE_URL]
  local pad url="${2:-$SERVICE_URL}"
  [ "$1" -ge 0 ] && [ $((${#PAGE} + 5 + $1)) -lt 8192 ] || { echo "padding of $1 bytes does not fit a page URL under 8 KiB" >&2; exit 1; }
  pad="$(head -c "$1" /dev/zero | tr '\0' 'x')"
  curl -sf -X POST "$url/v1/prefetch" -H 'Content-Type: application/json' -d "{\"url\": \"$PAGE?pad=$pad\"}" | node -e \
    'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).ticket))'
}

# The upstream echoes the request as JSON; the padding makes that echo exactly 1,024 bytes of valid JSON.
ticket="$(trigger 100)"
first="$(curl -sf "$SERVICE_URL/v1/prefetch/$ticket/data?api=$API_QUERY&wait=5000" | wc -c)"
ticket="$(trigger $((100 + 1024 - first)))"
PATH_QUERY="/v1/prefetch/$ticket/data?api=$API_QUERY"
curl -sf -o /dev/null "$SERVICE_URL$PATH_QUERY&wait=5000"
mkdir -p "$WORK/www"
curl -sf -D "$WORK/service.headers" -o "$WORK/www/handoff.json" "$SERVICE_URL$PATH_QUERY"
size="$(wc -c <"$WORK/www/handoff.json")"
grep -qi '^X-Prefetch: hit' "$WORK/service.headers" || { echo "service did not answer X-Prefetch: hit" >&2; cat "$WORK/service.headers" >&2; exit 1; }
grep -q '^HTTP/1.1 200' "$WORK/service.headers" || { echo "service did not answer 200" >&2; exit 1; }
[ "$size" -eq 1024 ] || { echo "stored body is $size bytes, expected 1024" >&2; exit 1; }
node -e 'JSON.parse(require("fs").readFileSync(process.argv[1]))' "$WORK/www/handoff.json"
log "service: 200, X-Prefetch: hit, 1024 bytes of JSON"

# nginx: one worker, the same bytes as a static file under the same URL, tuned as a team would.
chmod 755 "$WORK" "$WORK/www"
chmod 644 "$WORK/www/handoff.json"
NGINX_PORT="$(free_port)"
cat >"$WORK/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx-tmp;
  proxy_temp_path $WORK/nginx-tmp;
  fastcgi_temp_path $WORK/nginx-tmp;
  uwsgi_temp_path $WORK/nginx-tmp;
  scgi_temp_path $WORK/nginx-tmp;
  types { }
  default_type application/json;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_timeout 65;
  keepalive_requests 1000000;
  open_file_cache max=16 inactive=60s;
  open_file_cache_valid 60s;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    root $WORK/www;
    location /v1/prefetch/ { try_files /handoff.json =404; }
  }
}
EOF
mkdir -p "$WORK/nginx-tmp"

measure() { # NAME URL PLACEMENT PID -> sets RPS P99_MS CPU_PER_K
  local name="$1" url="$2" placement="$3" pid="$4" wrk_cmd=(wrk) out before after
  if [ "$placement" = split ]; then
    taskset -a -p -c 0 "$pid" >/dev/null
    wrk_cmd=(taskset -c 1 wrk)
  fi
  "${wrk_cmd[@]}" -t"$THREADS" -c"$CONNECTIONS" -d"${WARMUP}s" "$url" >/dev/null
  before="$(cpu_seconds "$pid")"
  out="$("${wrk_cmd[@]}" -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "$url")"
  after="$(cpu_seconds "$pid")"
  echo "$out" >"$WORK/wrk-$name-$placement.txt"
  if grep -q 'Non-2xx' <<<"$out"; then echo "$name answered non-2xx under load:" >&2; echo "$out" >&2; exit 1; fi
  RPS="$(awk '/Requests\/sec/ {printf "%.0f", $2}' <<<"$out")"
  P99_MS="$(awk '$1 == "99%" { v = $2; if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms/, "", v) } else if (v ~ /s$/) { sub(/s/, "", v); v *= 1000 }; printf "%.2f", v }' <<<"$out")"
  local requests
  requests="$(awk '/requests in/ {print $1}' <<<"$out")"
  CPU_PER_K="$(awk -v a="$after" -v b="$before" -v n="$requests" 'BEGIN { printf "%.3f", (a - b) / n * 1000 }')"
  if [ "$placement" = split ]; then taskset -a -p -c 0-$(($(nproc) - 1)) "$pid" >/dev/null; fi
}

check_peer() { # NAME URL
  local headers="$WORK/$1.headers" body="$WORK/$1.body"
  curl -sf -D "$headers" -o "$body" "$2" || { echo "$1 did not answer $2" >&2; exit 1; }
  cmp -s "$body" "$WORK/www/handoff.json" || { echo "$1 answered other bytes" >&2; exit 1; }
}

nginx -c "$WORK/nginx.conf" -p "$WORK" -e "$WORK/nginx-error.log" >"$WORK/nginx.out" 2>&1 &
BENCH_PIDS+=($!)
for _ in $(seq 1 100); do curl -sf -o /dev/null "http://127.0.0.1:$NGINX_PORT$PATH_QUERY" && break; sleep 0.05; done
check_peer nginx "http://127.0.0.1:$NGINX_PORT$PATH_QUERY"
# nginx's work is done by its one worker (the master only supervises): CPU and pinning apply to the worker.
NGINX_WORKER="$(pgrep -P "$(cat "$WORK/nginx.pid")" | head -1)"
start node 'listening on ' node "$BENCH_DIR/peers/map-server.js" "$WORK/www/handoff.json" "$ticket" "$API"
NODE_PID=$STARTED_PID
NODE_PORT="${STARTED_LINE##*:}"
check_peer node "http://127.0.0.1:$NODE_PORT$PATH_QUERY"
start nio 'listening on ' "$UPSTREAM" --threads "$(nproc)" --answer-file "$WORK/www/handoff.json"
NIO_PID=$STARTED_PID
NIO_PORT="${STARTED_LINE##*:}"
check_peer nio "http://127.0.0.1:$NIO_PORT$PATH_QUERY"

{
  echo "## handoff"
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine $(machine_line)"
  echo "load_before $(load_line)"
  echo "wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s --latency (after a ${WARMUP}s warm-up), body 1024 bytes JSON"
  for placement in $PLACEMENTS; do
    if [ -n "${BENCH_PROFILE:-}" ] && [ ! -e "$WORK/perf.data" ]; then
      perf record -F 999 -g -p "$SERVICE_PID" -o "$WORK/perf.data" -- sleep "$((WARMUP + DURATION))" >/dev/null 2>&1 &
      PERF_PID=$!
    fi
    measure service "$SERVICE_URL$PATH_QUERY" "$placement" "$SERVICE_PID"
    s_rps=$RPS s_p99=$P99_MS s_cpu=$CPU_PER_K
    measure nginx "http://127.0.0.1:$NGINX_PORT$PATH_QUERY" "$placement" "$NGINX_WORKER"
    n_rps=$RPS n_p99=$P99_MS n_cpu=$CPU_PER_K
    measure node "http://127.0.0.1:$NODE_PORT$PATH_QUERY" "$placement" "$NODE_PID"
    o_rps=$RPS o_p99=$P99_MS o_cpu=$CPU_PER_K
    measure nio "http://127.0.0.1:$NIO_PORT$PATH_QUERY" "$placement" "$NIO_PID"
    f_rps=$RPS f_p99=$P99_MS f_cpu=$CPU_PER_K
    printf '%-8s %-8s %10s %10s %14s\n' placement server "req/s" "p99 ms" "cpu s/1k req"
    printf '%-8s %-8s %10s %10s %14s\n' "$placement" service "$s_rps" "$s_p99" "$s_cpu"
    printf '%-8s %-8s %10s %10s %14s\n' "$placement" nginx "$n_rps" "$n_p99" "$n_cpu"
    printf '%-8s %-8s %10s %10s %14s\n' "$placement" node "$o_rps" "$o_p99" "$o_cpu"
    printf '%-8s %-8s %10s %10s %14s\n' "$placement" nio-floor "$f_rps" "$f_p99" "$f_cpu"
    awk -v p="$placement" -v s="$s_rps" -v n="$n_rps" -v o="$o_rps" -v f="$f_rps" \
      'BEGIN { printf "ratio %s service/nginx %.2fx  service/node %.2fx  (target: >= 0.8x nginx, > 1.5x node); nio-floor/nginx %.2fx  service/nio-floor %.2fx\n", p, s / n, s / o, f / n, s / f }'
  done
  if [ -n "${PERF_PID:-}" ]; then
    wait "$PERF_PID" || true
    [ -z "${BENCH_PROFILE_DATA:-}" ] || cp "$WORK/perf.data" "$BENCH_PROFILE_DATA"
    echo "profile of the service (fast handoff), first placement, top symbols by self time:"
    perf report -i "$WORK/perf.data" --sort symbol --stdio -g none --no-children 2>/dev/null | grep -E '^ +[0-9]' | awk 'NR <= 30' \
      | swift demangle --simplified | cut -c1-160
    echo "by thread:"
    perf report -i "$WORK/perf.data" --sort comm --stdio -g none --no-children 2>/dev/null | grep -E '^ +[0-9]' | awk 'NR <= 8'
  fi
  echo "load_after $(load_line)"
} | report handoff

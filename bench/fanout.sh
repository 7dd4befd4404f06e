#!/usr/bin/env bash
# Fan-out: pages of 8 interfaces against local upstreams that answer after 50 ms, CONCURRENCY page opens in
# flight, every page distinct (nothing cached). Measures, from one Node load client (bench/clients/fanout-client.js):
#   - time from trigger until all 8 results are settled, as overhead above the 50 ms upstream (p50, p99);
#   - server-side settle overhead where the target reports it;
#   - CPU seconds of the serving process per 1,000 upstream requests (utime+stime from /proc/PID/stat);
#   - context switches per page open of each process (voluntary + nonvoluntary, /proc/PID/task/*/status).
# Targets: direct (the client calls the upstreams itself: the latency floor), the service (POST /v1/prefetch, then
# GET /v1/prefetch/{ticket}?wait=10000), and a Node.js BFF (bench/peers/bff.js) with fetch and with node:http.
# The upstream side's CPU floor: bench/peers/curl-floor.c, a C program on the same libcurl making the same
# transfers at the same pages in flight (a fresh easy handle and options per transfer, keep-alive), driven by
# curl_multi_socket_action on epoll as the service drives libcurl ("socket") and by curl_multi_poll ("poll"); it
# measures its own CPU (getrusage) and context switches. Built with `cc -O2 ... -lcurl` into the run's temp dir.
#
# Topology: 8 upstream processes, one per interface (a page's interfaces usually live on several backends).
# A second service run puts all 8 interfaces on ONE upstream origin (the common case: the seed's own config),
# where a per-host connection limit below the transfer limit would queue them (--max-connections-per-host).
# HTTPS rows: the one-origin page against an HTTPS upstream speaking HTTP/1.1, and against one offering HTTP/2
# by ALPN (`prefetch-upstream-tls --http2`), where the page's requests multiplex over one connection per host. The
# Node BFFs are measured over plain HTTP only, so the HTTPS rows compare with each other, not with them.
# Env: BENCH_CONCURRENCY (default 32), BENCH_PAGES (measured page opens per target, default 3000),
# BENCH_WARMUP_PAGES (default 300), BENCH_BIN (a directory holding prefetch, prefetch-upstream and
# prefetch-upstream-tls: used as they are, nothing built).
source "$(dirname "$0")/lib.sh"

CONCURRENCY="${BENCH_CONCURRENCY:-32}"
PAGES="${BENCH_PAGES:-3000}"
WARMUP_PAGES="${BENCH_WARMUP_PAGES:-300}"
DELAY=50
CLIENT="$BENCH_DIR/clients/fanout-client.js"

ensure_apt curl openssl
ensure_node
build_release
command -v cc >/dev/null || ensure_apt gcc
FLOOR="$WORK/curl-floor"
cc -O2 -Wall -o "$FLOOR" "$BENCH_DIR/peers/curl-floor.c" -lcurl

UPSTREAM_PORTS=()
for k in 0 1 2 3 4 5 6 7; do
  start "upstream$k" 'listening on ' "$UPSTREAM" --port 0 --threads 1
  UPSTREAM_PORTS+=("${STARTED_LINE##*:}")
done

# A throwaway CA and a certificate for 127.0.0.1, for the HTTPS upstreams.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$WORK/ca.key" -out "$WORK/ca.pem" \
  -days 2 -subj "/CN=Bench CA" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$WORK/leaf.key" -out "$WORK/leaf.csr" -subj "/CN=127.0.0.1" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$WORK/leaf.ext"
openssl x509 -req -in "$WORK/leaf.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial -days 2 \
  -extfile "$WORK/leaf.ext" -out "$WORK/leaf.pem" 2>/dev/null
start upstream_https11 'listening on ' "$UPSTREAM_TLS" --port 0 --threads 1 --tls-cert "$WORK/leaf.pem" --tls-key "$WORK/leaf.key"
HTTPS11_PORT="${STARTED_LINE##*:}"
start upstream_https2 'listening on ' "$UPSTREAM_TLS" --port 0 --threads 1 --tls-cert "$WORK/leaf.pem" --tls-key "$WORK/leaf.key" --http2
HTTPS2_PORT="${STARTED_LINE##*:}"

interfaces() { # ORIGINS: many|one|https11|https2
  local k base sep=""
  for k in 0 1 2 3 4 5 6 7; do
    case "$1" in
      many) base="http://127.0.0.1:${UPSTREAM_PORTS[$k]}" ;;
      one) base="http://127.0.0.1:${UPSTREAM_PORTS[0]}" ;;
      https11) base="https://127.0.0.1:$HTTPS11_PORT" ;;
      https2) base="https://127.0.0.1:$HTTPS2_PORT" ;;
    esac
    printf '%s{"name": "i%d", "api": "%s/i%d?delay=%d", "method": "GET", "urlParam": true}' "$sep" "$k" "$base" "$k" "$DELAY"
    sep=", "
  done
}
cat >"$WORK/config.json" <<EOF
{"code": 200, "data": {"name": "bench-fanout", "version": "1", "config": [
  {"url": "https://bench.example.com/fan/{n}", "interfaces": [$(interfaces many)]},
  {"url": "https://bench.example.com/fan1/{n}", "interfaces": [$(interfaces one)]},
  {"url": "https://bench.example.com/fans11/{n}", "interfaces": [$(interfaces https11)]},
  {"url": "https://bench.example.com/fans2/{n}", "interfaces": [$(interfaces https2)]}
]}}
EOF
BASES="$(for k in 0 1 2 3 4 5 6 7; do printf 'http://127.0.0.1:%s/i%d?delay=%d,' "${UPSTREAM_PORTS[$k]}" "$k" "$DELAY"; done)"
BASES="${BASES%,}"
BASES_ONE="$(for k in 0 1 2 3 4 5 6 7; do printf 'http://127.0.0.1:%s/i%d?delay=%d,' "${UPSTREAM_PORTS[0]}" "$k" "$DELAY"; done)"
BASES_ONE="${BASES_ONE%,}"

# The plan sends what the BFF sends: /iK?delay=50&n=ID.
"$PREFETCH" plan 'https://bench.example.com/fan/7' --config "$WORK/config.json" --json | grep -q "/i7?delay=$DELAY&n=7" \
  || { echo "unexpected plan:"; "$PREFETCH" plan 'https://bench.example.com/fan/7' --config "$WORK/config.json"; exit 1; } >&2

RUN=0
RESULTS="$WORK/results.jsonl"
: >"$RESULTS"
client() { # LABEL MODE TARGET PIDS [PAGE_PREFIX]
  RUN=$((RUN + 1))
  log "fan-out: $1"
  node "$CLIENT" "$2" "$3" "$CONCURRENCY" "$WARMUP_PAGES" "$PAGES" "$4" "$RUN" "$DELAY" "${5:-}" \
    | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const o=JSON.parse(s);o.label=process.argv[1];console.log(JSON.stringify(o))})' "$1" \
    >>"$RESULTS"
}

# floor LABEL MODE BASES: the C libcurl floor's own run, in the load client's JSON shape (its process is "floor").
floor() {
  RUN=$((RUN + 1))
  log "fan-out: $1"
  "$FLOOR" "$2" "$3" "$CONCURRENCY" "$WARMUP_PAGES" "$PAGES" "$RUN" "$DELAY" \
    | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const o=JSON.parse(s);o.label=process.argv[1];console.log(JSON.stringify(o))})' "$1" \
    >>"$RESULTS"
}

LOAD_BEFORE="$(load_line)"
client "direct (client -> upstreams, floor)" direct "$BASES" ""
floor "curl floor, socket (8 origins)" socket "$BASES"
floor "curl floor, poll (8 origins)" poll "$BASES"
floor "curl floor, socket (1 origin)" socket "$BASES_ONE"
floor "curl floor, poll (1 origin)" poll "$BASES_ONE"

# One load client fires every trigger from 127.0.0.1: the per-caller trigger rate limit is off.
start_service "$WORK/config.json" --trigger-rate 0 --ca-bundle "$WORK/ca.pem"
client "service (8 origins)" service "$SERVICE_URL" "server=$SERVICE_PID"
client "service (1 origin)" service "$SERVICE_URL" "server=$SERVICE_PID" "https://bench.example.com/fan1/"
client "service (1 origin, HTTPS, HTTP/1.1)" service "$SERVICE_URL" "server=$SERVICE_PID" "https://bench.example.com/fans11/"
client "service (1 origin, HTTPS, HTTP/2)" service "$SERVICE_URL" "server=$SERVICE_PID" "https://bench.example.com/fans2/"
HTTPS_CONNECTIONS="HTTP/1.1 $(curl -s --cacert "$WORK/ca.pem" "https://127.0.0.1:$HTTPS11_PORT/__connections"), HTTP/2 $(curl -s --cacert "$WORK/ca.pem" "https://127.0.0.1:$HTTPS2_PORT/__connections")"
stop "$SERVICE_PID"

start_service "$WORK/config.json" --trigger-rate 0 --log-level warning
client "service, log-level warning (8 origins)" service "$SERVICE_URL" "server=$SERVICE_PID"
stop "$SERVICE_PID"

# The Redis store: the same 8-origin fan-out through `--store redis://` (a redis-server of its own, no persistence;
# replicas sharing Redis need an identity key). Its CPU is the service's plus redis-server's; the ratios against the
# memory store's "service (8 origins)" row (target: within 1.2x) are printed with the report.
ensure_apt redis-server
REDIS_PORT="$(free_port)"
start redis 'Ready to accept connections' redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no
REDIS_PID=$STARTED_PID
IDENTITY_KEY="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
start_service "$WORK/config.json" --trigger-rate 0 --store "redis://127.0.0.1:$REDIS_PORT" --identity-key "$IDENTITY_KEY"
client "service, redis store (8 origins)" service "$SERVICE_URL" "server=$SERVICE_PID,redis=$REDIS_PID"
stop "$SERVICE_PID"
stop "$REDIS_PID"
node -e '
  const fs = require("fs");
  const [path, out] = process.argv.slice(1);
  const rows = fs.readFileSync(path, "utf8").trim().split("\n").map(JSON.parse);
  const redis = rows.find((r) => r.label === "service, redis store (8 origins)");
  const memory = rows.find((r) => r.label === "service (8 origins)");
  // The table counts one process per row: the Redis row counts the service and redis-server together.
  const { server, redis: redisServer } = redis.cpuSeconds;
  redis.cpuSeconds = { server: server + redisServer, service: server, redis: redisServer };
  fs.writeFileSync(path, rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
  const perK = (seconds, r) => (seconds / r.upstreamRequests) * 1000;
  const ratio = (a, b) => `${(a / b).toFixed(2)}x`;
  const [p50, p99] = [redis.overheadMs.p50, redis.overheadMs.p99];
  const cpu = perK(redis.cpuSeconds.server, redis), cpuMemory = perK(memory.cpuSeconds.server, memory);
  fs.writeFileSync(out, [
    `ratio redis/memory store (8 origins; target <= 1.2x): overhead p50 ${p50.toFixed(2)}/${memory.overheadMs.p50.toFixed(2)} ms = ${ratio(p50, memory.overheadMs.p50)}, p99 ${p99.toFixed(2)}/${memory.overheadMs.p99.toFixed(2)} ms = ${ratio(p99, memory.overheadMs.p99)}`,
    `ratio redis/memory store cpu s / 1k upstream req: (service ${perK(server, redis).toFixed(3)} + redis-server ${perK(redisServer, redis).toFixed(3)}) / ${cpuMemory.toFixed(3)} = ${ratio(cpu, cpuMemory)}`,
  ].join("\n") + "\n");
' "$RESULTS" "$WORK/redis-store.txt"

start bff_fetch 'listening on ' node "$BENCH_DIR/peers/bff.js" "$BASES" fetch
client "node bff, fetch/undici (8 origins)" bff "http://127.0.0.1:${STARTED_LINE##*:}" "server=$STARTED_PID"
stop "$STARTED_PID"

start bff_http 'listening on ' node "$BENCH_DIR/peers/bff.js" "$BASES" http
client "node bff, node:http agent (8 origins)" bff "http://127.0.0.1:${STARTED_LINE##*:}" "server=$STARTED_PID"
stop "$STARTED_PID"

{
  echo "## fanout"
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine $(machine_line)"
  echo "load_before $LOAD_BEFORE"
  echo "load_after $(load_line)"
  echo "concurrency $CONCURRENCY page opens, 8 interfaces each, upstream delay ${DELAY} ms, $PAGES measured pages per target after $WARMUP_PAGES warm-up"
  node -e '
    const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
    const f = (v) => (v === null || v === undefined ? "-" : v.toFixed(2));
    // The serving process (the C floor: itself); the Redis row counts the service and redis-server together.
    const cpuOf = (r) => r.cpuSeconds.server ?? r.cpuSeconds.floor;
    const cpuPerK = (r) => (cpuOf(r) === undefined ? null : (cpuOf(r) / r.upstreamRequests) * 1000);
    // Context switches per page open, all measured processes of the row together.
    const switches = (r) => Object.values(r.contextSwitches ?? {});
    const switchesPerPage = (r) => (switches(r).length ? switches(r).reduce((a, c) => a + c.total, 0) / r.pages : null);
    console.log(["target", "overhead p50", "overhead p99", "server settle p50", "server settle p99", "cpu s / 1k upstream req", "ctx switches / page open", "pages/s", "errors"].join(" | "));
    for (const r of rows) {
      const s = r.serverSettleOverheadMs;
      console.log([r.label, f(r.overheadMs.p50), f(r.overheadMs.p99), s ? f(s.p50) : "-", s ? f(s.p99) : "-", f(cpuPerK(r)), f(switchesPerPage(r)), r.pagesPerSecond, r.errors].join(" | "));
    }
    const by = (p) => rows.find((r) => r.label === p);
    const bffs = rows.filter((r) => r.label.startsWith("node bff"));
    const best = bffs.reduce((a, b) => (cpuPerK(a) <= cpuPerK(b) ? a : b));
    const bestP99 = Math.min(...bffs.map((b) => b.overheadMs.p99));
    const direct = by("direct (client -> upstreams, floor)");
    for (const label of ["service (1 origin)", "service (8 origins)"]) {
      const service = by(label);
      console.log(`ratio cpu ${label}/best-bff ${(cpuPerK(service) / cpuPerK(best)).toFixed(2)}x (best bff: ${best.label}; target <= 0.5x)`);
      console.log(`overhead p99 ${label} ${f(service.overheadMs.p99)} ms, floor ${f(direct.overheadMs.p99)} ms, best bff ${f(bestP99)} ms (target: below both bffs)`);
    }
    // The upstream side: CPU per upstream request (the C floor: per transfer) against the C libcurl floor and both
    // Node BFFs, and context switches per page open of each process.
    const us = (r) => cpuPerK(r) * 1000;
    const bffFetch = by("node bff, fetch/undici (8 origins)"), bffHttp = by("node bff, node:http agent (8 origins)");
    for (const origins of ["8 origins", "1 origin"]) {
      const service = by(`service (${origins})`);
      const socket = by(`curl floor, socket (${origins})`), poll = by(`curl floor, poll (${origins})`);
      const lowest = us(socket) <= us(poll) ? socket : poll;
      const x = (a, b) => `${(us(a) / us(b)).toFixed(2)}x`;
      console.log(`floor ${origins}: cpu us / upstream req: service ${us(service).toFixed(1)}, C libcurl floor socket ${us(socket).toFixed(1)}, poll ${us(poll).toFixed(1)}; node bff fetch ${us(bffFetch).toFixed(1)}, node:http ${us(bffHttp).toFixed(1)}`);
      console.log(`ratio cpu service (${origins})/floor ${x(service, lowest)} (${lowest.label}; target <= 2x), /floor socket ${x(service, socket)}, /floor poll ${x(service, poll)}, /bff fetch ${x(service, bffFetch)}, /bff node:http ${x(service, bffHttp)} (target <= 0.5x); bff node:http/floor ${x(bffHttp, lowest)}, bff fetch/floor ${x(bffFetch, lowest)}`);
    }
    const perProcess = rows.flatMap((r) => Object.entries(r.contextSwitches ?? {}).map(([name, c]) => {
      const gone = c.threadsGone ? `, exited uncounted: ${c.threadsGone}` : "";
      const threads = c.threads === undefined ? "" : `, threads ${c.threads}${gone}`;
      const per = (n) => (n / r.pages).toFixed(2);
      return `${r.label}${name === "server" || name === "floor" ? "" : ` [${name}]`} ${per(c.total)} (v ${per(c.voluntary)} + nv ${per(c.nonvoluntary)}${threads})`;
    }));
    // Nonvoluntary switches are preemptions: they grow with the load on the machine; voluntary ones come from the design.
    console.log(`ctx switches / page open (voluntary + nonvoluntary, every thread; service target <= 6): ${perProcess.join("; ")}`);
    // The same, by thread name (digits dropped: the threads of a pool together), for the service rows.
    for (const r of rows.filter((r) => r.label.startsWith("service"))) {
      for (const [name, c] of Object.entries(r.contextSwitches ?? {})) {
        const parts = Object.entries(c.byThread ?? {})
          .map(([thread, t]) => [thread, (t.voluntary + t.nonvoluntary) / r.pages, t])
          .filter(([, perPage]) => perPage >= 0.05)
          .sort((a, b) => b[1] - a[1])
          .map(([thread, perPage, t]) => `${thread} x${t.threads} ${f(perPage)} (v ${f(t.voluntary / r.pages)})`);
        console.log(`ctx switches / page open by thread, ${r.label}${name === "server" ? "" : " [" + name + "]"}: ${parts.join("; ")}`);
      }
    }
    const h11 = by("service (1 origin, HTTPS, HTTP/1.1)"), h2 = by("service (1 origin, HTTPS, HTTP/2)");
    console.log(`https one origin: HTTP/2 / HTTP/1.1 cpu ${(cpuPerK(h2) / cpuPerK(h11)).toFixed(2)}x, overhead p99 ${f(h2.overheadMs.p99)} vs ${f(h11.overheadMs.p99)} ms`);
    console.log(`https upstream connections: ${process.argv[2]}`);
    for (const r of rows) if (r.errors) console.log(`errors ${r.label}: ${r.errors} first: ${r.firstError}`);
  ' "$RESULTS" "$HTTPS_CONNECTIONS"
  cat "$WORK/redis-store.txt"
} | report fanout

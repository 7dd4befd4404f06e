#!/usr/bin/env bash
# Scale-out: two service instances sharing one Redis store (`prefetch serve --store redis://127.0.0.1:PORT`),
# next to one instance with the in-memory store.
#   1. single flight across instances: the same 200 pages triggered on both instances at once; the upstream must
#      see each request once;
#   2. cross-instance handoff: a response fetched through instance A, read through instance B with
#      GET /v1/data?page=...&api=... under wrk (-t2 -c50), against the same read from a memory-store instance;
#   3. fan-out through a Redis-backed instance (bench/clients/fanout-client.js, 8 interfaces, 50 ms upstream),
#      against the memory store: overhead p50/p99 and CPU of the service plus redis-server per 1,000 requests;
#   4. Redis Cluster against the single redis-server: two fresh replicas on a 3-primary cluster
#      (`--store redis-cluster://...`, Debian's redis-server, cluster-enabled nodes on free ports, no replicas) and
#      two fresh replicas on the single redis-server take the same load (bench/clients/fanout-client.js over both: page opens
#      of 8 interfaces, 50 ms upstream, BENCH_CLUSTER_CONCURRENCY in flight, page N on replica N mod 2), in
#      BENCH_CLUSTER_ROUNDS rounds whose order alternates; page opens per second, CPU per page open of the two
#      services plus every redis-server of the store (utime+stime from /proc over the timed pages, as in 3.), and
#      the ratios cluster/single over all rounds, and the busiest primary's CPU per page open against the single
#      redis-server's (what one Redis machine carries, and so the fleet's rate at which its core is saturated), and
#      the read events and commands redis-server handled per page open (INFO stats, summed over the store's servers);
#   5. Sentinel failover: two instances on a Sentinel-managed primary (a replica, three sentinels with
#      down-after-milliseconds 1000); the primary is killed, and the time until the sentinels name the replica
#      and until a page triggered through A is again a cross-instance hit on B is measured.
# The script stops with "not run" when this build has no --store option (and skips 4. when it has no
# redis-cluster:// store).
# Env: BENCH_DURATION (wrk seconds, default 10), BENCH_CONCURRENCY (default 32), BENCH_PAGES (default 2000, also the
# measured pages of each row of 4.), BENCH_CLUSTER (default 1; 0 skips 4.), BENCH_CLUSTER_CONCURRENCY (page opens in
# flight in 4., default 64), BENCH_CLUSTER_ROUNDS (default 2), BENCH_BIN_DIR (a directory with release builds of
# prefetch and prefetch-upstream to use instead of building: e.g. one built with --scratch-path; default: build, or
# with BENCH_BUILT=1 take `swift build -c release --show-bin-path`).
source "$(dirname "$0")/lib.sh"

DURATION="${BENCH_DURATION:-10}"
CONCURRENCY="${BENCH_CONCURRENCY:-32}"
PAGES="${BENCH_PAGES:-2000}"
CLUSTER="${BENCH_CLUSTER:-1}"
CLUSTER_CONCURRENCY="${BENCH_CLUSTER_CONCURRENCY:-64}"
CLUSTER_ROUNDS="${BENCH_CLUSTER_ROUNDS:-2}"
DELAY=50

ensure_apt redis-server wrk curl
ensure_node
if [ -n "${BENCH_BIN_DIR:-}" ]; then
  # Prebuilt binaries (this script needs no prefetch-upstream-tls, which build_release insists on).
  "$REPO_DIR/scripts/ensure-deps.sh" build
  BIN="$(cd "$BENCH_BIN_DIR" && pwd)"
  PREFETCH="$BIN/prefetch"
  UPSTREAM="$BIN/prefetch-upstream"
  if [ ! -x "$PREFETCH" ] || [ ! -x "$UPSTREAM" ]; then echo "prefetch or prefetch-upstream missing in $BIN" >&2; exit 1; fi
else
  build_release
fi

if ! "$PREFETCH" serve --help 2>&1 | grep -q -- '--store '; then
  {
    echo "## scaleout"
    echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "status not run: this build of prefetch serve has no --store option (the Redis store is not wired into the CLI yet)"
  } | report scaleout
  exit 0
fi

REDIS_PORT="$(free_port)"
start redis 'Ready to accept connections' redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no
REDIS_PID=$STARTED_PID
REDIS_URL="redis://127.0.0.1:$REDIS_PORT"

UPSTREAM_PORTS=()
for k in 0 1 2 3 4 5 6 7; do
  start "upstream$k" 'listening on ' "$UPSTREAM" --port 0 --threads 1
  UPSTREAM_PORTS+=("${STARTED_LINE##*:}")
done
interfaces="$(sep=""; for k in 0 1 2 3 4 5 6 7; do
  printf '%s{"name": "i%d", "api": "http://127.0.0.1:%s/i%d?delay=%d", "method": "GET", "urlParam": true, "ttl": 3600}' "$sep" "$k" "${UPSTREAM_PORTS[$k]}" "$k" "$DELAY"
  sep=", "; done)"
cat >"$WORK/config.json" <<EOF
{"code": 200, "data": {"name": "bench-scaleout", "version": "1", "config": [
  {"url": "https://bench.example.com/fan/{n}", "interfaces": [$interfaces]}
]}}
EOF

# Replicas sharing Redis need one identity key (the same secret on every replica); the load comes from one
# address, so the per-caller trigger rate limit is off; every instance gets its own operator port.
IDENTITY_KEY="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
start_serve service_a "$PREFETCH" serve --config "$WORK/config.json" --store "$REDIS_URL" --identity-key "$IDENTITY_KEY" --trigger-rate 0
A_PID=$STARTED_PID A_URL="$PAGE_URL"
start_serve service_b "$PREFETCH" serve --config "$WORK/config.json" --store "$REDIS_URL" --identity-key "$IDENTITY_KEY" --trigger-rate 0
B_PID=$STARTED_PID B_URL="$PAGE_URL"
start_serve service_m "$PREFETCH" serve --config "$WORK/config.json" --trigger-rate 0
M_PID=$STARTED_PID M_URL="$PAGE_URL"

hits() { # total scripted hits over the 8 upstreams
  local total=0 k n
  for k in 0 1 2 3 4 5 6 7; do
    n="$(curl -sf "http://127.0.0.1:${UPSTREAM_PORTS[$k]}/__hits?path=/i$k" | node -p 'JSON.parse(require("fs").readFileSync(0)).hits')"
    total=$((total + n))
  done
  echo "$total"
}

# 1. Single flight across instances.
before="$(hits)"
node -e '
  const [a, b] = process.argv.slice(1);
  const post = (base, n) => fetch(`${base}/v1/prefetch`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ url: `https://bench.example.com/fan/${n}` }) }).then(async (r) => {
    if (r.status !== 202) throw new Error(`trigger on ${base} answered ${r.status}: ${await r.text()}`);
    return r.json();
  });
  (async () => {
    const tickets = await Promise.all(Array.from({ length: 200 }, (_, n) => [post(a, 900000 + n), post(b, 900000 + n)]).flat());
    await Promise.all(tickets.map((t, i) => fetch(`${i % 2 ? b : a}/v1/prefetch/${t.ticket}?wait=10000`).then((r) => r.text())));
  })();
' "$A_URL" "$B_URL"
SINGLE_FLIGHT_HITS=$(($(hits) - before))

# 2. Cross-instance handoff: fetched through A, read through B; the same read from the memory-store instance.
PAGE="https://bench.example.com/fan/777"
API="http://127.0.0.1:${UPSTREAM_PORTS[0]}/i0?delay=$DELAY"
QUERY="page=$(node -p 'encodeURIComponent(process.argv[1])' "$PAGE")&api=$(node -p 'encodeURIComponent(process.argv[1])' "$API")"
curl -sf -X POST "$A_URL/v1/prefetch" -H 'Content-Type: application/json' -d "{\"url\": \"$PAGE\"}" >/dev/null
curl -sf -X POST "$M_URL/v1/prefetch" -H 'Content-Type: application/json' -d "{\"url\": \"$PAGE\"}" >/dev/null
curl -sf -o /dev/null "$A_URL/v1/data?$QUERY&wait=5000"
curl -sf -o /dev/null "$M_URL/v1/data?$QUERY&wait=5000"
curl -sfi "$B_URL/v1/data?$QUERY" | grep -qi '^X-Prefetch: hit' || { echo "instance B did not serve A's response as a hit" >&2; exit 1; }

wrk_run() { # URL -> "RPS P99_MS"
  wrk -t2 -c50 -d3s "$1" >/dev/null
  wrk -t2 -c50 -d"${DURATION}s" --latency "$1" | awk '
    /Requests\/sec/ { rps = $2 }
    $1 == "99%" { v = $2; if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms/, "", v) } else if (v ~ /s$/) { sub(/s/, "", v); v *= 1000 }; p99 = v }
    /Non-2xx/ { bad = 1 }
    END { if (bad) print "non-2xx"; else printf "%.0f %.2f\n", rps, p99 }'
}
read -r B_RPS B_P99 <<<"$(wrk_run "$B_URL/v1/data?$QUERY")"
read -r M_RPS M_P99 <<<"$(wrk_run "$M_URL/v1/data?$QUERY")"

# 3. Fan-out through a Redis-backed instance and through the memory store.
node "$BENCH_DIR/clients/fanout-client.js" service "$A_URL" "$CONCURRENCY" 300 "$PAGES" "server=$A_PID,redis=$REDIS_PID" 11 "$DELAY" >"$WORK/fan-redis.json"
node "$BENCH_DIR/clients/fanout-client.js" service "$M_URL" "$CONCURRENCY" 300 "$PAGES" "server=$M_PID" 12 "$DELAY" >"$WORK/fan-memory.json"

# 4. Two replicas on a 3-primary Redis Cluster against two replicas on the single redis-server, same load.
# The instances of 1.-3. are stopped first: every replica on the single redis-server subscribes to its
# announcements, so an idle A or B would take messages (and redis-server CPU) the measured pair causes.
stop "$A_PID"
stop "$B_PID"
stop "$M_PID"
CLUSTER_STATUS=""
if [ "$CLUSTER" = 0 ]; then
  CLUSTER_STATUS="not run (BENCH_CLUSTER=0)"
elif ! "$PREFETCH" serve --help 2>&1 | grep -q 'redis-cluster://'; then
  CLUSTER_STATUS="not run: this build of prefetch serve has no redis-cluster:// store"
else
  TAKEN_PORTS=("$REDIS_PORT")
  fresh_port() { # sets FRESH_PORT: a free port none of this script's cluster nodes was given (client or bus port)
    local port
    while :; do
      port="$(free_port)"
      [[ " ${TAKEN_PORTS[*]} " == *" $port "* ]] || break
    done
    TAKEN_PORTS+=("$port")
    FRESH_PORT="$port"
  }
  # Each node gets a bus port of its own (--cluster-port): the default, the client port + 10000, does not exist
  # for a client port above 55535.
  CLUSTER_PORTS=() CLUSTER_PIDS=()
  for k in 1 2 3; do
    fresh_port
    port="$FRESH_PORT"
    fresh_port
    mkdir -p "$WORK/cluster$k"
    start "cluster$k" 'Ready to accept connections' redis-server --port "$port" --bind 127.0.0.1 --save '' \
      --appendonly no --daemonize no --cluster-enabled yes --cluster-port "$FRESH_PORT" \
      --cluster-config-file "$WORK/cluster$k/nodes.conf" --dir "$WORK/cluster$k" --cluster-node-timeout 2000
    CLUSTER_PORTS+=("$port")
    CLUSTER_PIDS+=("$STARTED_PID")
  done
  CLUSTER_STARTED="$(date +%s%N)"
  timeout 30 redis-cli --cluster create "${CLUSTER_PORTS[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes \
    >"$WORK/cluster-create.out" 2>&1 || { echo "redis-cli --cluster create failed:" >&2; tail -20 "$WORK/cluster-create.out" >&2; exit 1; }
  # Formed: every node says cluster_state:ok with all 16384 slots and 3 nodes, and all show the same slot owners.
  cluster_formed() {
    local port info slots="" view
    for port in "${CLUSTER_PORTS[@]}"; do
      info="$(redis-cli -h 127.0.0.1 -p "$port" cluster info 2>/dev/null | tr -d '\r')"
      grep -qx 'cluster_state:ok' <<<"$info" && grep -qx 'cluster_slots_assigned:16384' <<<"$info" &&
        grep -qx 'cluster_known_nodes:3' <<<"$info" || return 1
      view="$(redis-cli -h 127.0.0.1 -p "$port" cluster slots 2>/dev/null | md5sum)"
      [ -z "$slots" ] || [ "$slots" = "$view" ] || return 1
      slots="$view"
    done
  }
  formed=0
  for _ in $(seq 1 200); do
    if cluster_formed; then formed=1; break; fi
    sleep 0.1
  done
  [ "$formed" = 1 ] || { echo "the cluster on ports ${CLUSTER_PORTS[*]} did not form within 20 s; redis-cli said:" >&2; tail -20 "$WORK/cluster-create.out" >&2; exit 1; }
  CLUSTER_FORM_MS=$((($(date +%s%N) - CLUSTER_STARTED) / 1000000))
  CLUSTER_URL="redis-cluster://$(IFS=,; echo "${CLUSTER_PORTS[*]/#/127.0.0.1:}")"

  start_serve single_1 "$PREFETCH" serve --config "$WORK/config.json" --store "$REDIS_URL" --identity-key "$IDENTITY_KEY" --trigger-rate 0
  S1_PID=$STARTED_PID S1_URL="$PAGE_URL"
  start_serve single_2 "$PREFETCH" serve --config "$WORK/config.json" --store "$REDIS_URL" --identity-key "$IDENTITY_KEY" --trigger-rate 0
  S2_PID=$STARTED_PID S2_URL="$PAGE_URL"
  start_serve cluster_1 "$PREFETCH" serve --config "$WORK/config.json" --store "$CLUSTER_URL" --identity-key "$IDENTITY_KEY" --trigger-rate 0
  C1_PID=$STARTED_PID C1_URL="$PAGE_URL"
  start_serve cluster_2 "$PREFETCH" serve --config "$WORK/config.json" --store "$CLUSTER_URL" --identity-key "$IDENTITY_KEY" --trigger-rate 0
  C2_PID=$STARTED_PID C2_URL="$PAGE_URL"
  SINGLE_PIDS="service1=$S1_PID,service2=$S2_PID,redis=$REDIS_PID"
  CLUSTER_PIDS_ARG="service1=$C1_PID,service2=$C2_PID,redis1=${CLUSTER_PIDS[0]},redis2=${CLUSTER_PIDS[1]},redis3=${CLUSTER_PIDS[2]}"
  redis_work() { # PORT...: "reads commands", the sums of total_reads_processed and total_commands_processed
    local port
    for port in "$@"; do redis-cli -h 127.0.0.1 -p "$port" info stats | tr -d '\r'; done |
      awk -F: '$1 == "total_reads_processed" { r += $2 } $1 == "total_commands_processed" { c += $2 } END { print r, c }'
  }
  replicas_row() { # KIND ROUND: one measured row (300 warm-up pages, then PAGES) into $WORK/KIND-ROUND.json, and
    # the store's reads (the read events redis-server handled: about one per pipeline it was sent) and commands
    # over the row, warm-up included, into $WORK/KIND-ROUND.work
    local targets pids run_id ports before after
    if [ "$1" = single ]; then targets="$S1_URL,$S2_URL" pids="$SINGLE_PIDS" run_id=$((20 + 2 * $2)) ports=("$REDIS_PORT")
    else targets="$C1_URL,$C2_URL" pids="$CLUSTER_PIDS_ARG" run_id=$((21 + 2 * $2)) ports=("${CLUSTER_PORTS[@]}"); fi
    log "store comparison round $2: $1"
    before="$(redis_work "${ports[@]}")"
    node "$BENCH_DIR/clients/fanout-client.js" service "$targets" "$CLUSTER_CONCURRENCY" 300 "$PAGES" "$pids" "$run_id" "$DELAY" >"$WORK/$1-$2.json"
    after="$(redis_work "${ports[@]}")"
    echo "$before $after" | awk -v pages=$((300 + PAGES)) '{ printf "%.1f %.1f\n", ($3 - $1) / pages, ($4 - $2) / pages }' >"$WORK/$1-$2.work"
  }
  for round in $(seq 1 "$CLUSTER_ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then replicas_row single "$round"; replicas_row cluster "$round"
    else replicas_row cluster "$round"; replicas_row single "$round"; fi
  done
  CLUSTER_KEYS="$(for port in "${CLUSTER_PORTS[@]}"; do redis-cli -h 127.0.0.1 -p "$port" dbsize; done | paste -sd/)"
  for pid in "$S1_PID" "$S2_PID" "$C1_PID" "$C2_PID" "${CLUSTER_PIDS[@]}"; do stop "$pid"; done
fi

# 5. Sentinel failover.
PRIMARY_PORT="$(free_port)"
start sentinel_primary 'Ready to accept connections' redis-server --port "$PRIMARY_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no
PRIMARY_PID=$STARTED_PID
REPLICA_PORT="$(free_port)"
start sentinel_replica 'MASTER <-> REPLICA sync: Finished with success' redis-server --port "$REPLICA_PORT" --bind 127.0.0.1 --save '' \
  --appendonly no --daemonize no --replicaof 127.0.0.1 "$PRIMARY_PORT"
SENTINEL_PORTS=()
for k in 1 2 3; do
  port="$(free_port)"
  mkdir -p "$WORK/sentinel$k"
  printf 'port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor bench 127.0.0.1 %s 2\nsentinel down-after-milliseconds bench 1000\nsentinel failover-timeout bench 5000\n' \
    "$port" "$WORK/sentinel$k" "$PRIMARY_PORT" >"$WORK/sentinel$k/sentinel.conf"
  start "sentinel$k" 'Sentinel ID is' redis-server "$WORK/sentinel$k/sentinel.conf" --sentinel
  SENTINEL_PORTS+=("$port")
done
sentinel_field() { # PORT FIELD: a field of SENTINEL master bench
  redis-cli -p "$1" sentinel master bench 2>/dev/null | awk -v f="$2" 'found { print; exit } $0 == f { found = 1 }'
}
for _ in $(seq 1 600); do
  ready=1
  for port in "${SENTINEL_PORTS[@]}"; do
    [ "$(sentinel_field "$port" num-slaves)" = 1 ] && [ "$(sentinel_field "$port" num-other-sentinels)" = 2 ] || ready=0
  done
  [ "$ready" = 1 ] && break
  sleep 0.1
done
[ "$ready" = 1 ] || { echo "the sentinels never saw the replica and each other" >&2; exit 1; }
SENTINEL_URL="redis-sentinel://$(IFS=,; echo "${SENTINEL_PORTS[*]/#/127.0.0.1:}")/bench"
start_serve sentinel_a "$PREFETCH" serve --config "$WORK/config.json" --store "$SENTINEL_URL" --identity-key "$IDENTITY_KEY" --trigger-rate 0
SA_URL="$PAGE_URL"
start_serve sentinel_b "$PREFETCH" serve --config "$WORK/config.json" --store "$SENTINEL_URL" --identity-key "$IDENTITY_KEY" --trigger-rate 0
SB_URL="$PAGE_URL"
cross_hit() { # N: page N triggered through A, read through B; succeeds on a cross-instance hit
  local page="https://bench.example.com/fan/$1" query
  query="page=$(node -p 'encodeURIComponent(process.argv[1])' "$page")&api=$(node -p 'encodeURIComponent(process.argv[1])' "$API")"
  curl -sf -m 2 -X POST "$SA_URL/v1/prefetch" -H 'Content-Type: application/json' -d "{\"url\": \"$page\"}" >/dev/null || return 1
  curl -sf -m 2 -o /dev/null "$SA_URL/v1/data?$query&wait=1000" || return 1
  curl -sfi -m 2 "$SB_URL/v1/data?$query" | grep -qi '^X-Prefetch: hit'
}
n=500000
until cross_hit "$n"; do n=$((n + 1)); sleep 0.1; [ "$n" -lt 500100 ] || { echo "no cross-instance hit through Sentinel" >&2; exit 1; }; done
KILLED_AT="$(date +%s%N)"
{ kill -9 "$PRIMARY_PID" && wait "$PRIMARY_PID"; } 2>/dev/null || true
PROMOTED_MS="" RECOVERED_MS=""
while [ -z "$RECOVERED_MS" ]; do
  now="$(date +%s%N)"
  [ $(((now - KILLED_AT) / 1000000)) -lt 60000 ] || { echo "the fleet did not recover within 60 s of the primary's death" >&2; exit 1; }
  if [ -z "$PROMOTED_MS" ] && [ "$(redis-cli -p "${SENTINEL_PORTS[0]}" sentinel get-master-addr-by-name bench 2>/dev/null | tail -1)" = "$REPLICA_PORT" ]; then
    PROMOTED_MS=$(((now - KILLED_AT) / 1000000))
  fi
  n=$((n + 1))
  if cross_hit "$n"; then RECOVERED_MS=$((($(date +%s%N) - KILLED_AT) / 1000000)); else sleep 0.05; fi
done
[ -n "$PROMOTED_MS" ] || PROMOTED_MS="$RECOVERED_MS"

{
  echo "## scaleout"
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine $(machine_line)"
  echo "load_after $(load_line)"
  echo "single flight: 200 pages x 8 interfaces triggered on both instances at once -> $SINGLE_FLIGHT_HITS upstream requests (ideal 1600)"
  echo "cross-instance handoff (GET /v1/data on B, fetched through A; wrk -t2 -c50 -d${DURATION}s): $B_RPS req/s, p99 $B_P99 ms"
  echo "same read, memory store, one instance: $M_RPS req/s, p99 $M_P99 ms"
  node -e '
    const [redis, memory] = process.argv.slice(1).map((p) => JSON.parse(require("fs").readFileSync(p, "utf8")));
    const perK = (r, names) => (names.reduce((s, n) => s + r.cpuSeconds[n], 0) / r.upstreamRequests * 1000).toFixed(2);
    console.log(`fan-out redis store: overhead p50 ${redis.overheadMs.p50} ms p99 ${redis.overheadMs.p99} ms, cpu s/1k upstream req service ${perK(redis, ["server"])} + redis ${perK(redis, ["redis"])}, errors ${redis.errors}`);
    console.log(`fan-out memory store: overhead p50 ${memory.overheadMs.p50} ms p99 ${memory.overheadMs.p99} ms, cpu s/1k upstream req ${perK(memory, ["server"])}, errors ${memory.errors}`);
  ' "$WORK/fan-redis.json" "$WORK/fan-memory.json"
  if [ -n "$CLUSTER_STATUS" ]; then
    echo "store comparison, redis cluster / single redis-server: $CLUSTER_STATUS"
  else
    echo "store comparison: 2 replicas on a 3-primary redis cluster (formed in $CLUSTER_FORM_MS ms) / 2 replicas on the single redis-server; page opens of 8 interfaces (${DELAY} ms upstream), page N on replica N mod 2, $CLUSTER_CONCURRENCY in flight, 300 warm-up + $PAGES measured pages per row, $CLUSTER_ROUNDS rounds (order alternating)"
    node -e '
      const fs = require("fs");
      const [work, rounds] = [process.argv[1], Number(process.argv[2])];
      const sum = (o, prefix) => Object.entries(o.cpuSeconds).filter(([n]) => n.startsWith(prefix)).reduce((s, [, v]) => s + v, 0);
      const perPage = (v, r) => (v / r.pages * 1000).toFixed(3);
      const totals = { single: { pages: 0, seconds: 0, service: 0, redis: 0 }, cluster: { pages: 0, seconds: 0, service: 0, redis: 0 } };
      const primaries = { redis1: 0, redis2: 0, redis3: 0 };
      for (let round = 1; round <= rounds; round++) {
        for (const kind of ["single", "cluster"]) {
          const r = JSON.parse(fs.readFileSync(`${work}/${kind}-${round}.json`, "utf8"));
          const t = totals[kind];
          t.pages += r.pages; t.seconds += r.seconds; t.service += sum(r, "service"); t.redis += sum(r, "redis");
          if (kind === "cluster") for (const n of Object.keys(primaries)) primaries[n] += r.cpuSeconds[n];
          const perPrimary = kind === "cluster" ? ` = ${["redis1", "redis2", "redis3"].map((n) => perPage(r.cpuSeconds[n], r)).join(" / ")} per primary` : "";
          const label = kind === "single" ? "single redis-server" : "redis cluster, 3 primaries";
          const [reads, commands] = fs.readFileSync(`${work}/${kind}-${round}.work`, "utf8").trim().split(" ");
          console.log(`round ${round} ${label}: ${r.pagesPerSecond} page opens/s, cpu ms per page open ${perPage(sum(r, "service") + sum(r, "redis"), r)} (services ${perPage(sum(r, "service"), r)} + redis ${perPage(sum(r, "redis"), r)}${perPrimary}), overhead p50 ${r.overheadMs.p50} ms p99 ${r.overheadMs.p99} ms, redis reads ${reads} and commands ${commands} per page open, errors ${r.errors}${r.firstError ? ` (${r.firstError})` : ""}`);
        }
      }
      const rate = (t) => t.pages / t.seconds;
      const cpu = (t, f) => f(t) / t.pages * 1000;
      const [s, c] = [totals.single, totals.cluster];
      const all = (t) => t.service + t.redis;
      const x = (a, b) => (a / b).toFixed(2) + "x";
      console.log(`all rounds: single ${rate(s).toFixed(0)} page opens/s, cpu ${cpu(s, all).toFixed(3)} ms per page open (services ${cpu(s, (t) => t.service).toFixed(3)} + redis ${cpu(s, (t) => t.redis).toFixed(3)}); cluster ${rate(c).toFixed(0)} page opens/s, cpu ${cpu(c, all).toFixed(3)} ms per page open (services ${cpu(c, (t) => t.service).toFixed(3)} + redis ${cpu(c, (t) => t.redis).toFixed(3)})`);
      console.log(`ratio cluster/single: page opens/s ${x(rate(c), rate(s))}, cpu per page open ${x(cpu(c, all), cpu(s, all))} (services ${x(cpu(c, (t) => t.service), cpu(s, (t) => t.service))}, redis ${x(cpu(c, (t) => t.redis), cpu(s, (t) => t.redis))})`);
      // What one Redis machine carries: the busiest primary against the single redis-server, per page open of the
      // fleet; and the page opens per second of the fleet at which the core of that server would be saturated.
      const busiest = Math.max(...Object.values(primaries)) / c.pages * 1000;
      const single = cpu(s, (t) => t.redis);
      console.log(`busiest primary / single redis-server: ${busiest.toFixed(3)} / ${single.toFixed(3)} ms cpu per page open = ${x(busiest, single)}; a redis core saturated at ${(1000 / busiest).toFixed(0)} fleet page opens/s on the cluster against ${(1000 / single).toFixed(0)} on the single server (${x(single, busiest)})`);
    ' "$WORK" "$CLUSTER_ROUNDS"
    echo "redis cluster keys per primary at the end: $CLUSTER_KEYS"
  fi
  echo "sentinel failover (primary killed, down-after-milliseconds 1000): sentinels named the replica after $PROMOTED_MS ms; cross-instance hits again after $RECOVERED_MS ms"
} | report scaleout

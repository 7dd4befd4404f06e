#!/usr/bin/env bash
# Memory under overfill: the service runs with --store-bytes BUDGET (default 64 MiB); distinct pages whose five
# interfaces answer 1 KiB, 8 KiB, 32 KiB, 128 KiB and 256 KiB bodies are opened (16 at a time, each response
# read back through the data endpoint) until three times the budget has been fetched; that is repeated ROUNDS
# times. Reports the idle RSS baseline, peak RSS (VmHWM) against the budget, and the store's own accounted bytes
# (prefetch_store_bytes from the operator surface's /metrics, sampled every 100 ms and at the end).
# Two variants: the service as shipped (glibc malloc defaults), and the same binary with
# MALLOC_MMAP_THRESHOLD_=131072 (glibc's dynamic mmap threshold off), which separates heap fragmentation from
# what the service holds.
# Env: BENCH_STORE_BYTES (default 67108864), BENCH_CONCURRENCY (default 16), BENCH_ROUNDS (default 3).
source "$(dirname "$0")/lib.sh"

BUDGET="${BENCH_STORE_BYTES:-67108864}"
CONCURRENCY="${BENCH_CONCURRENCY:-16}"
ROUNDS="${BENCH_ROUNDS:-3}"
SIZES="1024,8192,32768,131072,262144"

ensure_apt curl
ensure_node
build_release

start_upstream 2
interfaces="$(IFS=,; k=0; sep=""; for size in $SIZES; do
  printf '%s{"name": "s%d", "api": "http://127.0.0.1:%s/s%d?bytes=%d&contentType=application/json", "method": "GET", "urlParam": true, "ttl": 3600}' \
    "$sep" "$k" "$UPSTREAM_PORT" "$k" "$size"
  sep=", "; k=$((k + 1)); done)"
cat >"$WORK/config.json" <<EOF2
{"code": 200, "data": {"name": "bench-memory", "version": "1", "config": [
  {"url": "https://bench.example.com/mem/{n}", "interfaces": [$interfaces]}
]}}
EOF2

LOAD_BEFORE="$(load_line)"
VARIANTS=()
# run_variant LABEL [NAME=VALUE...]: a fresh service, its idle RSS, then ROUNDS overfills of 3x the budget each.
run_variant() {
  local label="$1" round
  shift
  SERVICE_ENV=("$@")
  # One load client fires every trigger from 127.0.0.1: the per-caller trigger rate limit is off.
  start_service "$WORK/config.json" --store-bytes "$BUDGET" --trigger-rate 0
  sleep 2
  echo "{\"label\": \"$label\", \"idleRssKiB\": $(status_kb "$SERVICE_PID" VmRSS), \"idleHwmKiB\": $(status_kb "$SERVICE_PID" VmHWM)}" >"$WORK/$label.idle.json"
  for round in $(seq 1 "$ROUNDS"); do
    log "memory ($label): overfill $round of $ROUNDS (3x budget)"
    node "$BENCH_DIR/clients/overfill.js" "$SERVICE_URL" "$ADMIN_URL" "$SERVICE_PID" "$CONCURRENCY" $((BUDGET * 3)) $((round * 1000000)) "$SIZES" \
      >"$WORK/$label.round$round.json"
  done
  stop "$SERVICE_PID"
  VARIANTS+=("$label")
}
run_variant default
run_variant mmap-threshold-128k MALLOC_MMAP_THRESHOLD_=131072

{
  echo "## memory"
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine $(machine_line)"
  echo "load_before $LOAD_BEFORE"
  echo "load_after $(load_line)"
  echo "store budget $BUDGET bytes ($((BUDGET / 1048576)) MiB); interface bodies $SIZES bytes; $CONCURRENCY pages at a time; $ROUNDS rounds of 3x the budget"
  node -e '
    const fs = require("fs");
    const [work, budgetText, roundsText, ...labels] = process.argv.slice(1);
    const budget = Number(budgetText);
    const mib = (kib) => (kib / 1024).toFixed(1);
    const mibB = (b) => (b / 1048576).toFixed(1);
    console.log("variant | round | fetched MiB | peak RSS (VmHWM) MiB | RSS at end MiB | store bytes max sampled MiB | store bytes at end MiB | entries | evictions | errors");
    const summaries = [];
    for (const label of labels) {
      const idle = JSON.parse(fs.readFileSync(`${work}/${label}.idle.json`, "utf8"));
      console.log(`${label} | idle | 0 | ${mib(idle.idleHwmKiB)} | ${mib(idle.idleRssKiB)} | 0 | 0 | 0 | 0 | 0`);
      const rounds = Array.from({ length: Number(roundsText) }, (_, i) => JSON.parse(fs.readFileSync(`${work}/${label}.round${i + 1}.json`, "utf8")));
      rounds.forEach((r, i) => console.log([label, i + 1, mibB(r.fetchedBytes), mib(r.vmHWMKiB), mib(r.vmRSSKiB), mibB(r.maxSampledStoreBytes), mibB(r.storeBytes), r.storeEntries, r.evictions, r.errors].join(" | ")));
      const last = rounds[rounds.length - 1];
      const peak = last.vmHWMKiB * 1024;
      const storeMax = Math.max(...rounds.map((r) => r.maxSampledStoreBytes));
      summaries.push(`${label}: peak RSS ${mibB(peak)} MiB = idle ${mib(idle.idleRssKiB)} MiB + budget ${mibB(budget)} MiB + ${mibB(peak - idle.idleRssKiB * 1024 - budget)} MiB; ${(peak / budget).toFixed(2)}x the budget; store accounted max ${mibB(storeMax)} MiB (within budget: ${storeMax <= budget})`);
      for (const r of rounds) if (r.errors) summaries.push(`${label} errors: ${r.errors} first: ${r.firstError}`);
    }
    for (const s of summaries) console.log(s);
  ' "$WORK" "$BUDGET" "$ROUNDS" "${VARIANTS[@]}"
} | report memory

#!/usr/bin/env bash
# Planning: plans composed per second for a generated 10,000-page config (70% exact pages, 20% `{id}` patterns,
# 10% `*` patterns), in process (bench/planning, a separate Swift package using PrefetchCore's public API:
# ConfigLoader.parse and Plan.make), and the wall time of one `prefetch plan` process (hyperfine), next to the
# same command against the 3-page sample config (the cost of starting the process at all), and next to Node.js
# merely running `JSON.parse` on the same config file (the floor a whole `prefetch plan` process is held to).
# Env: BENCH_PAGES_IN_CONFIG (default 10000), BENCH_SECONDS (in-process seconds per measurement, default 2),
# BENCH_BASELINE_BIN (a directory with `prefetch` and `planning-bench` built from another commit: measured in the
# same run, in the same way, for before/after figures).
source "$(dirname "$0")/lib.sh"

COUNT="${BENCH_PAGES_IN_CONFIG:-10000}"
SECONDS_EACH="${BENCH_SECONDS:-2}"

ensure_apt hyperfine
ensure_node
build_release
log "swift build -c release (bench/planning)"
(cd "$BENCH_DIR/planning" && swift build -c release >&2)
HARNESS="$(cd "$BENCH_DIR/planning" && swift build -c release --show-bin-path)/planning-bench"

node "$BENCH_DIR/clients/gen-config.js" "$COUNT" "$WORK/config.json" "$WORK/pages.txt"
"$PREFETCH" validate --config "$WORK/config.json" >&2

exact="$(awk -F'\t' '$1 == "exact" { print $2; exit }' "$WORK/pages.txt")"
capture="$(awk -F'\t' '$1 == "capture" { print $2; exit }' "$WORK/pages.txt")"
small_page='https://m.example.com/help/new?id=163&itemId=126'
LOAD_BEFORE="$(load_line)"
"$HARNESS" "$WORK/config.json" "$WORK/pages.txt" "$SECONDS_EACH" >"$WORK/inprocess.txt"
baseline_rows=()
BASELINE="${BENCH_BASELINE_BIN:-}"
if [ -n "$BASELINE" ]; then
  "$BASELINE/planning-bench" "$WORK/config.json" "$WORK/pages.txt" "$SECONDS_EACH" >"$WORK/inprocess-baseline.txt"
  baseline_rows=(-n "baseline: plan, $COUNT-page config, exact page" "$BASELINE/prefetch plan '$exact' --config $WORK/config.json")
fi
hyperfine --shell=none --warmup 3 --runs 30 --export-json "$WORK/hyperfine.json" \
  -n "plan, $COUNT-page config, exact page" "$PREFETCH plan '$exact' --config $WORK/config.json" \
  -n "plan, $COUNT-page config, {id} page" "$PREFETCH plan '$capture' --config $WORK/config.json" \
  -n "plan, 3-page sample config" "$PREFETCH plan '$small_page' --config $REPO_DIR/configs/prefetch.json" \
  -n "node JSON.parse, $COUNT-page config" "node -e 'JSON.parse(require(\"fs\").readFileSync(process.argv[1]))' $WORK/config.json" \
  "${baseline_rows[@]}" >&2

{
  echo "## planning"
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine $(machine_line)"
  echo "load_before $LOAD_BEFORE"
  echo "load_after $(load_line)"
  echo "in-process (bench/planning, release):"
  sed 's/^/  /' "$WORK/inprocess.txt"
  if [ -n "$BASELINE" ]; then
    echo "in-process, baseline ($BASELINE):"
    sed 's/^/  /' "$WORK/inprocess-baseline.txt"
  fi
  echo "per process (hyperfine --warmup 3 --runs 30):"
  node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).results;
    for (const x of r) console.log(`  ${x.command}: mean ${(x.mean * 1000).toFixed(1)} ms +- ${(x.stddev * 1000).toFixed(1)} ms (min ${(x.min * 1000).toFixed(1)}, max ${(x.max * 1000).toFixed(1)})`);
    const row = (prefix) => r.find((x) => x.command.startsWith(prefix));
    const big = row("plan, "), small = row("plan, 3-page"), node = row("node JSON.parse"), base = row("baseline: ");
    console.log(`  config load share: ${((big.mean - small.mean) * 1000).toFixed(1)} ms of ${(big.mean * 1000).toFixed(1)} ms`);
    console.log(`  prefetch plan / node JSON.parse: ${(big.mean / node.mean).toFixed(2)}x (target <= 1.00x)`);
    if (base) console.log(`  baseline / prefetch plan: ${(base.mean / big.mean).toFixed(2)}x`);
  ' "$WORK/hyperfine.json"
} | report planning

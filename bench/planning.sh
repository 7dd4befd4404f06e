#!/usr/bin/env bash
# Planning: plans composed per second for a generated 10,000-page config (70% exact pages, 20% `{id}` patterns,
# 10% `*` patterns), in process (bench/planning, a separate Swift package using PrefetchCore's public API:
# ConfigLoader.parse and Plan.make), and the wall time of one `prefetch plan` process (hyperfine), next to the
# same command against the 3-page sample config (the cost of starting the process at all).
# Env: BENCH_PAGES_IN_CONFIG (default 10000), BENCH_SECONDS (in-process seconds per measurement, default 2).
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
hyperfine --shell=none --warmup 3 --runs 30 --export-json "$WORK/hyperfine.json" \
  -n "plan, $COUNT-page config, exact page" "$PREFETCH plan '$exact' --config $WORK/config.json" \
  -n "plan, $COUNT-page config, {id} page" "$PREFETCH plan '$capture' --config $WORK/config.json" \
  -n "plan, 3-page sample config" "$PREFETCH plan '$small_page' --config $REPO_DIR/configs/prefetch.json" >&2

{
  echo "## planning"
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine $(machine_line)"
  echo "load_before $LOAD_BEFORE"
  echo "load_after $(load_line)"
  echo "in-process (bench/planning, release):"
  sed 's/^/  /' "$WORK/inprocess.txt"
  echo "per process (hyperfine --warmup 3 --runs 30):"
  node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).results;
    for (const x of r) console.log(`  ${x.command}: mean ${(x.mean * 1000).toFixed(1)} ms +- ${(x.stddev * 1000).toFixed(1)} ms (min ${(x.min * 1000).toFixed(1)}, max ${(x.max * 1000).toFixed(1)})`);
    console.log(`  config load share: ${((r[0].mean - r[2].mean) * 1000).toFixed(1)} ms of ${(r[0].mean * 1000).toFixed(1)} ms`);
  ' "$WORK/hyperfine.json"
} | report planning

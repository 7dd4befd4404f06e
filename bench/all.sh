#!/usr/bin/env bash
# Runs every benchmark once, in one go, and writes their figures (with date, machine and load) to
# bench/results/<UTC date-time>/summary.md, ready to paste into BENCHMARKS.md.
# Usage: bench/all.sh [NAME...]   (default: handoff fanout memory planning scaleout)
set -euo pipefail
BENCH_DIR="$(cd "$(dirname "$0")" && pwd)"
REPO_DIR="$(cd "$BENCH_DIR/.." && pwd)"
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(handoff fanout memory planning scaleout)

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
export BENCH_OUT="$BENCH_DIR/results/$stamp"
mkdir -p "$BENCH_OUT"

"$REPO_DIR/scripts/ensure-deps.sh" build
echo "# swift build -c release --static-swift-stdlib (prefetch, prefetch-upstream, prefetch-upstream-tls, linked as the image ships them)" >&2
(cd "$REPO_DIR" && for product in prefetch prefetch-upstream prefetch-upstream-tls; do
  scripts/build-static.sh -c release --product "$product" >&2 || exit 1
done)
export BENCH_BUILT=1

status=0
for name in "${names[@]}"; do
  echo "# ===== $name (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  if ! "$BENCH_DIR/$name.sh"; then
    echo "## $name" >"$BENCH_OUT/$name.txt.failed"
    echo "status failed (see the output above)" >>"$BENCH_OUT/$name.txt.failed"
    status=1
  fi
done

{
  echo "- Run of $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$REPO_DIR" rev-parse --short HEAD)"
  echo "- Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')), $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr)"
  echo "- Swift: $(swift --version 2>/dev/null | head -1); Node $(node --version); $(nginx -v 2>&1); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2); $(hyperfine --version)"
  echo "- Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  for name in "${names[@]}"; do
    echo '```'
    cat "$BENCH_OUT/$name.txt" 2>/dev/null || cat "$BENCH_OUT/$name.txt.failed"
    echo '```'
    echo
  done
} >"$BENCH_OUT/summary.md"
cat "$BENCH_OUT/summary.md"
echo "# written to $BENCH_OUT/summary.md" >&2
exit $status

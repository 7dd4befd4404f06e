#!/usr/bin/env bash
# Offline package: the page load (the `load` event, PerformanceNavigationTiming.loadEventStart) of a small site (a
# page, a stylesheet, two scripts, an image) in headless Chromium, against an origin that answers every static file
# after 100 ms, with and without the offline package. With it, DevTools `Fetch` hands each request to the shell
# emulator (Clients/PrefetchShell's prefetch-shell-offline: the SDK's offline cache, synced from `prefetch serve
# --resources` before the loads), which answers from its cache; without it, every request goes to the origin
# (Chromium's cache disabled, as on a first open). Alternating loads after one warm-up load each
# (scripts/offline-browser.py bench). Everything on 127.0.0.1, stopped on exit.
# Env: BENCH_RUNS (loads per mode, default 20), BENCH_DELAY_MS (the origin's delay, default 100), PREFETCH_BIN and
# PREFETCH_SHELL_OFFLINE_BIN (binaries to use as they are; default: debug builds of this checkout, built if needed).
set -euo pipefail
REPO_DIR="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO_DIR"
RUNS="${BENCH_RUNS:-20}"
DELAY="${BENCH_DELAY_MS:-100}"
if [ -z "${PREFETCH_BIN:-}" ]; then
  swift build --product prefetch >&2
  PREFETCH_BIN="$(swift build --show-bin-path)/prefetch"
fi
if [ -z "${PREFETCH_SHELL_OFFLINE_BIN:-}" ]; then
  swift build --package-path Clients/PrefetchShell --product prefetch-shell-offline >&2
  PREFETCH_SHELL_OFFLINE_BIN="$(swift build --package-path Clients/PrefetchShell --show-bin-path)/prefetch-shell-offline"
fi
echo "## offline package: page load against an origin answering after ${DELAY} ms"
echo "machine $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit $(git rev-parse --short HEAD)"
python3 scripts/offline-browser.py bench --prefetch "$PREFETCH_BIN" --shell-offline "$PREFETCH_SHELL_OFFLINE_BIN" \
  --runs "$RUNS" --delay-ms "$DELAY"

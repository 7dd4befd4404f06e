#!/usr/bin/env bash
# The main job. Without arguments: builds the service (a debug build, the quickest first run) and serves the
# offline demo (configs/demo.json), whose page's interfaces are answered by the project's own demo upstream
# (prefetch-upstream on 127.0.0.1:9090, started and stopped with it): open http://127.0.0.1:8080/ and follow the
# link. Page surface 127.0.0.1:8080, operator surface (/ui, /metrics) 127.0.0.1:8081, in-memory store.
# With arguments: runs that `prefetch` subcommand instead. `serve` (the production command,
# `scripts/run.sh serve --config configs/prefetch.json`) gets a release build, as the image ships it; the tools
# (`plan`, `validate`, `fetch`, ...) reuse the demo's debug build, e.g.
# `scripts/run.sh plan 'https://m.example.com/help/new?id=163&itemId=126'`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-deps.sh build
if [ "${1:-}" = serve ]; then
  # The production command: a release build, as the image ships it.
  scripts/build-static.sh -c release --product prefetch
  exec .build/release/prefetch "$@"
fi
# The demo's and the tools' debug build carries no debug information (`-debug-info-format none`): nothing here runs
# a debugger, and writing it is a tenth of the first run's compile time. A developer's own `swift build` keeps it.
debug_build=(swift build -debug-info-format none)
if [ $# -gt 0 ]; then
  "${debug_build[@]}" --product prefetch
  exec .build/debug/prefetch "$@"
fi

# The demo: a debug build of the two binaries it runs, the quickest first run (README.md's Quick start).
"${debug_build[@]}" --product prefetch
"${debug_build[@]}" --product prefetch-upstream
.build/debug/prefetch-upstream --port 9090 >/dev/null &
upstream=$!
trap 'kill -TERM "$upstream" 2>/dev/null || true' EXIT
.build/debug/prefetch serve --demo --config configs/demo.json --port 8080 --admin-port 8081 &
serve=$!
trap 'kill -TERM "$serve" 2>/dev/null || true' INT TERM
echo "demo: open http://127.0.0.1:8080/ (the demo shell opens a page whose data is prefetched), then http://127.0.0.1:8081/ui" >&2
status=0
wait "$serve" || status=$?
# A signal interrupts `wait`: let the service finish its graceful shutdown before the upstream goes.
while kill -0 "$serve" 2>/dev/null; do wait "$serve" || status=$?; done
exit "$status"

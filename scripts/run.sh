#!/usr/bin/env bash
# The main job: builds the service and serves the HTTP API on the sample config (configs/prefetch.json),
# in-memory store, on 127.0.0.1:8080. Extra arguments replace the default subcommand, e.g.
# `scripts/run.sh plan 'https://m.example.com/help/new?id=163&itemId=126'`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-deps.sh build
swift build -c release --product prefetch
if [ $# -eq 0 ]; then
  set -- serve
fi
exec .build/release/prefetch "$@"

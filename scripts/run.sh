#!/usr/bin/env bash
# The main job: builds the service and runs it on the sample config (configs/prefetch.json).
# Extra arguments replace the default subcommand, e.g. `scripts/run.sh validate`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-deps.sh build
swift build -c release --product prefetch
if [ $# -eq 0 ]; then
  set -- plan 'https://m.example.com/help/new?id=163&itemId=126'
fi
exec .build/release/prefetch "$@"

#!/usr/bin/env bash
# Builds everything and runs every test suite, then fuzzes the HTTP API against openapi.yaml.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-deps.sh test
scripts/lint.sh
swift build --build-tests
swift test --skip-build "$@"
# PREFETCH_SKIP_FUZZ=1 skips the API fuzzing (a quicker local run).
[ "${PREFETCH_SKIP_FUZZ:-0}" = "1" ] || scripts/fuzz-api.sh

#!/usr/bin/env bash
# Builds everything and runs every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-deps.sh test
scripts/lint.sh
swift build --build-tests
swift test --skip-build "$@"

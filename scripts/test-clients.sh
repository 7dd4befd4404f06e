#!/usr/bin/env bash
# Builds and tests the client packages under Clients/ (Clients/PrefetchShell, the Swift package a native web shell
# links) against this checkout's service. The client's live tests start `prefetch serve` and `prefetch-upstream` as
# processes; they find them through PREFETCH_BIN and PREFETCH_UPSTREAM_BIN, which this script sets to the root
# package's build (built first if needed) unless both are already set. The client's HTTP layer is generated from its copy
# of openapi.yaml (scripts/generate-shell-api.sh), and a live test fails when the page listener serves a different one.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PREFETCH_BIN:-}" ] || [ -z "${PREFETCH_UPSTREAM_BIN:-}" ]; then
  # With PREFETCH_BUILD_FLAGS, as scripts/test.sh builds, so the objects are reused (test.sh itself passes its
  # binaries: asking for the products after a test build relinks them).
  read -r -a build_flags <<<"${PREFETCH_BUILD_FLAGS:-}"
  swift build "${build_flags[@]}" --product prefetch
  swift build "${build_flags[@]}" --product prefetch-upstream
  bin=$(swift build --show-bin-path)
  export PREFETCH_BIN="$bin/prefetch" PREFETCH_UPSTREAM_BIN="$bin/prefetch-upstream"
fi
swift test --package-path Clients/PrefetchShell "$@"

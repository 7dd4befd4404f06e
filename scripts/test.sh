#!/usr/bin/env bash
# Builds everything and runs every test suite, then fuzzes the byte parsers (libFuzzer with AddressSanitizer, 5 s a
# target: scripts/fuzz.sh) and the HTTP API against openapi.yaml (schemathesis: scripts/fuzz-api.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-deps.sh test
scripts/lint.sh
# No compiler warning in this repository's own sources (dependencies' warnings are theirs): a build's output is
# kept and any `warning:` of a file under Sources, Tests or Clients fails the run. An incremental build shows only
# what it recompiled; CI builds from scratch, so there every file is checked.
build_without_warnings() {
  local log
  log="$(mktemp)"
  if ! swift build "$@" 2>&1 | tee "$log"; then rm -f "$log"; return 1; fi
  if grep -E "^$PWD/(Sources|Tests|Clients/PrefetchShell/(Sources|Tests))/[^:]+:[0-9]+:[0-9]+: warning:" "$log" >&2; then
    rm -f "$log"
    echo "test.sh: the build above has compiler warnings in this repository's sources (listed); fix them" >&2
    return 1
  fi
  rm -f "$log"
}
build_without_warnings --build-tests
# The browser tests inject the read key with the shell SDK's own script: its command, built first.
build_without_warnings --package-path Clients/PrefetchShell --product prefetch-shell-script
PREFETCH_SHELL_SCRIPT_BIN="$(swift build --package-path Clients/PrefetchShell --show-bin-path)/prefetch-shell-script"
export PREFETCH_SHELL_SCRIPT_BIN
# The suites that start whole Redis deployments (a cluster of three to six nodes, a primary with a replica and three
# sentinels, two prefetch serve processes on each) run after the rest, on their own: beside the rest on 2 cores their
# dozen processes starve the tests that time short TTLs and lock ages. With arguments (a --filter), one run as asked.
deployments='ClusterTests|SentinelFailoverTests|ServeReplicaTests|DifferentialKeyingTests'
# A crash (of the test process or of a child it started) fails the run; its backtrace is not worth the minutes of a
# core that symbolicating a debug build takes, starving every test still running.
export SWIFT_BACKTRACE=enable=no
# At most 6 tests at a time: with every test at once, 2 cores starve the tests that time short TTLs and deadlines
# (8 of them failed in a fresh-clone run; 6 at a time took the same 80 s).
width=(--experimental-maximum-parallelization-width 6)
if [ $# -eq 0 ]; then
  swift test --skip-build --skip "$deployments" "${width[@]}"
  swift test --skip-build --filter "$deployments" "${width[@]}"
  # The operators' view: a real Prometheus scraping live services, the rules and every dashboard query (docs/operations.md).
  PREFETCH_BIN_DIR="$(swift build --show-bin-path)" scripts/operators-view-test.py
else
  swift test --skip-build "$@"
fi
scripts/test-clients.sh
# The fuzzers run short here, as a check that every target builds, starts and survives its corpus and a few seconds
# of mutation, and schemathesis with 25 examples per operation (every operation, both listeners, three configs);
# longer runs are on demand (docs/testing.md): PREFETCH_FUZZ_SECONDS and FUZZ_MAX_EXAMPLES set them here.
# PREFETCH_SKIP_FUZZ=1 skips both fuzzing runs (a quicker local run).
[ "${PREFETCH_SKIP_FUZZ:-0}" = "1" ] || scripts/fuzz.sh "${PREFETCH_FUZZ_SECONDS:-5}"
[ "${PREFETCH_SKIP_FUZZ:-0}" = "1" ] || FUZZ_MAX_EXAMPLES="${FUZZ_MAX_EXAMPLES:-25}" scripts/fuzz-api.sh

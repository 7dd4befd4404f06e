#!/usr/bin/env bash
# Builds everything and runs the Swift tests layer by layer, by what they need (docs/testing.md): unit (in process:
# no child process, no listener of the service), service (one live service: on a socket, one prefetch serve or CLI
# process, one redis-server), deployments (several processes: replicas on Redis cluster, sentinel and replica
# deployments), browser (headless Chromium). The first layer that fails stops the run; each prints one line,
# `test.sh: layer <name>: <N> tests passed in <S> s`. Then the operators' view, the shell SDK's tests, and the
# fuzzers: the byte parsers (libFuzzer with AddressSanitizer, 3 s a target: scripts/fuzz.sh) and the HTTP API
# against openapi.yaml (schemathesis: scripts/fuzz-api.sh).
#   scripts/test.sh --quick       the build and the unit layer alone (no dependency check, no lint)
#   scripts/test.sh --filter X    lint, build, then one `swift test` run with these arguments, the SDK tests, the fuzzers
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then
  [ $# -eq 1 ] || { echo "test.sh: --quick takes no other arguments" >&2; exit 2; }
  quick=1
fi
# One line per phase with its time, like the layers' (the run's summary: grep '^test.sh:').
phase() { echo "test.sh: $1 in $(($(date +%s) - $2)) s"; }
started=$(date +%s)
# The jobs this run starts beside another step (lint, the fuzzers), each in a process group of its own: stopped with
# everything they started when the run ends early (a failure, Ctrl-C, CI's timeout), and their logs removed.
lint_pid=""
lint_log=""
fuzz_pid=""
fuzz_log=""
stop_background() {
  for pid in "$lint_pid" "$fuzz_pid"; do
    [ -z "$pid" ] || kill -- -"$pid" 2>/dev/null || true
  done
  [ -z "$lint_log" ] || rm -f "$lint_log" "$lint_log.seconds"
  [ -z "$fuzz_log" ] || rm -f "$fuzz_log" "$fuzz_log.seconds"
}
trap stop_background EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ $quick -eq 0 ]; then
  scripts/ensure-deps.sh test
  phase "dependencies checked" "$started"
  # Lint beside the build: the build keeps both cores busy, lint mostly waits (on PyPI for its checkers, on redis-server
  # and promtool), so the two together take little more than the build alone. Its output is shown when it ends; a
  # failing lint fails the run after the build.
  lint_log="$(mktemp)"
  setsid bash -c 'started=$(date +%s); scripts/lint.sh >"$1" 2>&1; status=$?; echo $(($(date +%s) - started)) >"$1.seconds"; exit $status' \
    lint "$lint_log" &
  lint_pid=$!
fi
# Waits for lint (started above) and shows its output; fails the run when it failed.
finish_lint() {
  [ -n "$lint_pid" ] || return 0
  local status=0
  wait "$lint_pid" || status=$?
  lint_pid=""
  cat "$lint_log"
  if [ "$status" -ne 0 ]; then
    echo "test.sh: lint failed (above); the tests did not run" >&2
    exit "$status"
  fi
  echo "test.sh: lint passed in $(cat "$lint_log.seconds") s (beside the build)"
}
# No compiler warning in this repository's own sources (dependencies' warnings are theirs): a build's output is
# kept and any `warning:` of a file under Sources, Tests or Clients fails the run. An incremental build shows only
# what it recompiled; CI builds from scratch, so there every file is checked.
build_without_warnings() {
  local log
  log="$(mktemp)"
  if ! swift build "$@" 2>&1 | tee "$log"; then rm -f "$log"; return 1; fi
  # (The shell SDK's generated client is the generator's, like a dependency's: with Swift 6.3 it warns of package
  # imports only its other files use, which its `@diagnose` marks silence from Swift 6.4 on.)
  if grep -E "^$PWD/(Sources|Tests|Clients/PrefetchShell/(Sources|Tests))/[^:]+:[0-9]+:[0-9]+: warning:" "$log" |
    grep -v "^$PWD/Clients/PrefetchShell/Sources/PrefetchShellAPI/Generated/" >&2; then
    rm -f "$log"
    echo "test.sh: the build above has compiler warnings in this repository's sources (listed); fix them" >&2
    return 1
  fi
  rm -f "$log"
}
# Extra `swift build` flags for this build (word-split): .ci/run sets `-debug-info-format none`, since nothing in CI
# reads debug information; a developer's run keeps it. (Not --disable-index-store: the test build's discovery of
# the tests on Linux reads the index.) scripts/verify-runtime.sh
# links its binary from these objects with the same flags (other flags would compile everything again).
read -r -a build_flags <<<"${PREFETCH_BUILD_FLAGS:-}"
# Objects a static link left compiled against the static Swift runtime (scripts/build-static.sh, e.g. a
# `VERIFY_BUILD=debug scripts/verify-runtime.sh` before) name archives a dynamic link cannot find (`-lCoreFoundation`,
# `-l_FoundationCShims`, `-l_FoundationCollections`, `-l_FoundationICU`: an object may name some and not others),
# and the driver does not recompile them on its own: removed, so this build compiles them again.
# (grep finding nothing is the usual case, not an error.)
if [ -d .build/debug ]; then
  { find -L .build/debug/ -name '*.o' -print0 2>/dev/null |
    xargs -0 -r grep -l -a -Z -e '-lCoreFoundation' -e '-l_FoundationCShims' -e '-l_FoundationCollections' \
      -e '-l_FoundationICU' || true; } | xargs -0 -r rm -f --
fi
build_started=$(date +%s)
build_status=0
build_without_warnings --build-tests "${build_flags[@]}" || build_status=$?
[ "$build_status" -ne 0 ] || phase "build (debug, tests included)" "$build_started"
finish_lint
[ "$build_status" -eq 0 ] || exit "$build_status"
# A crash (of the test process or of a child it started) fails the run; its backtrace is not worth the minutes of a
# core that symbolicating a debug build takes, starving every test still running.
export SWIFT_BACKTRACE=enable=no
# At most 6 tests at a time: with every test at once, 2 cores starve the tests that time short TTLs and deadlines
# (8 of them failed in a fresh-clone run; 6 at a time took the same 80 s).
width=(--experimental-maximum-parallelization-width 6)
# The layers: `swift test` filters (regular expressions on Module.Suite/test; the modules are the test targets).
# RedisStoreTests is the one target in two layers: its Redis Cluster and Sentinel failover suites are deployments.
redis_deployments='RedisStoreTests.(ClusterTests|SentinelFailoverTests)'
layer_unit=(--filter 'DigestsTests|PrefetchCoreTests|PrefetchStoreTests|ConfigUpdaterTests|ResourceProviderTests|TelemetryTests|ServiceUnitTests')
layer_service=(--filter 'PrefetchFetcherTests|PrefetchDNSTests|RendererPoolTests|RedisStoreTests|ServiceSocketTests'
  --skip "$redis_deployments")
layer_deployments=(--filter "DeploymentTests|$redis_deployments")
layer_browser=(--filter 'BrowserTests')
# Runs one layer: `run_layer NAME ARGS...` runs `swift test --skip-build ARGS...` and prints its summary line;
# a failing layer ends the run.
run_layer() {
  local name=$1 log status count
  shift
  log="$(mktemp)"
  SECONDS=0
  set +e
  swift test --skip-build "${build_flags[@]}" "$@" "${width[@]}" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  set -e
  count=$(grep -oE 'Test run with [0-9]+ tests?' "$log" | tail -1 | grep -oE '[0-9]+' || true)
  rm -f "$log"
  if [ "$status" -eq 0 ]; then
    echo "test.sh: layer $name: ${count:-0} tests passed in $SECONDS s"
  else
    echo "test.sh: layer $name: failed (${count:-?} tests) in $SECONDS s; the layers after it did not run" >&2
    exit "$status"
  fi
}
if [ $quick -eq 1 ]; then
  run_layer unit "${layer_unit[@]}"
  exit 0
fi
# The browser tests inject the read key with the shell SDK's own script: its command, built first.
sdk_started=$(date +%s)
build_without_warnings --package-path Clients/PrefetchShell --product prefetch-shell-script
phase "build of the shell SDK's script" "$sdk_started"
PREFETCH_SHELL_SCRIPT_BIN="$(swift build --package-path Clients/PrefetchShell --show-bin-path)/prefetch-shell-script"
export PREFETCH_SHELL_SCRIPT_BIN
# The fuzzers (docs/testing.md) start here, beside the layers and the SDK's tests (after the SDK's build, which they
# would only slow): their build (the fuzz targets with AddressSanitizer, unoptimised here: half the CPU time of the
# optimised build `scripts/fuzz.sh` makes by default, for runs of 3 s a target; PREFETCH_FUZZ_CONFIGURATION=release
# for longer ones) and their runs take the cores the tests leave idle while they wait on processes, sockets, Redis
# and a browser. The tests do not
# mind the company: they pass beside `stress-ng --cpu 2` (RELIABILITY.md). Their output is shown, and a failure
# fails the run, after schemathesis below. PREFETCH_SKIP_FUZZ=1 skips them and schemathesis (a quicker local run).
fuzz_run=0
[ "${PREFETCH_SKIP_FUZZ:-0}" = "1" ] || fuzz_run=1
if [ $fuzz_run -eq 1 ]; then
  fuzz_log="$(mktemp)"
  FUZZ_CONFIGURATION=${PREFETCH_FUZZ_CONFIGURATION:-debug} setsid bash -c \
    'started=$(date +%s); scripts/fuzz.sh "$2" >"$1" 2>&1; status=$?; echo $(($(date +%s) - started)) >"$1.seconds"; exit $status' \
    fuzz "$fuzz_log" "${PREFETCH_FUZZ_SECONDS:-3}" &
  fuzz_pid=$!
fi
# The layers in order, one at a time (the fuzzers beside them are one build and one process at a time). With arguments (a --filter), one run as asked.
if [ $# -eq 0 ]; then
  run_layer unit "${layer_unit[@]}"
  run_layer service "${layer_service[@]}"
  run_layer deployments "${layer_deployments[@]}"
  run_layer browser "${layer_browser[@]}"
  # The operators' view: a real Prometheus scraping live services, the rules and every dashboard query (docs/operations.md).
  PREFETCH_BIN_DIR="$(swift build --show-bin-path)" scripts/operators-view-test.py
else
  swift test --skip-build "${build_flags[@]}" "$@" "${width[@]}"
fi
clients_started=$(date +%s)
# The SDK's live tests run the binaries this build made (test-clients.sh would otherwise ask for the products again,
# which relinks them: the test build's executables are linked for testing).
bin_dir="$(swift build --show-bin-path)"
PREFETCH_BIN="$bin_dir/prefetch" PREFETCH_UPSTREAM_BIN="$bin_dir/prefetch-upstream" scripts/test-clients.sh
phase "shell SDK tests" "$clients_started"
# The fuzzers run short here, as a check that every target builds, starts and survives its corpus and a few seconds
# of mutation (3 s a target, started above), and schemathesis with 20 examples per operation on the page listener
# with two configs (`fuzz`, whose interfaces also fail and time out, and `demo`, which serves the demo's files too)
# and the operator listener with the first of them; longer runs are on demand (docs/testing.md):
# PREFETCH_FUZZ_SECONDS, FUZZ_MAX_EXAMPLES, FUZZ_CONFIGS and FUZZ_OPERATOR_CONFIGS set them here.
if [ $fuzz_run -eq 1 ]; then
  api_started=$(date +%s)
  fuzz_configs=${FUZZ_CONFIGS:-fuzz demo}
  api_status=0
  FUZZ_MAX_EXAMPLES="${FUZZ_MAX_EXAMPLES:-20}" FUZZ_CONFIGS="$fuzz_configs" \
    FUZZ_OPERATOR_CONFIGS="${FUZZ_OPERATOR_CONFIGS:-${fuzz_configs%% *}}" scripts/fuzz-api.sh || api_status=$?
  [ "$api_status" -ne 0 ] || phase "schemathesis" "$api_started"
  # The fuzzers' result is shown whatever schemathesis found: a crash input is named in their output.
  fuzz_status=0
  wait "$fuzz_pid" || fuzz_status=$?
  fuzz_pid=""
  cat "$fuzz_log"
  [ "$api_status" -eq 0 ] || { echo "test.sh: schemathesis failed (above)" >&2; exit "$api_status"; }
  [ "$fuzz_status" -eq 0 ] || { echo "test.sh: the fuzzers failed (above)" >&2; exit "$fuzz_status"; }
  echo "test.sh: fuzzers passed in $(cat "$fuzz_log.seconds") s (beside the tests, from the SDK's build's end)"
fi
phase "whole run" "$started"

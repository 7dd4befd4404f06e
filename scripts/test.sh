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
sdk_pid=""
sdk_log=""
side_pid=""
side_log=""
fuzz_pid=""
fuzz_log=""
stop_background() {
  for pid in "$lint_pid" "$sdk_pid" "$side_pid" "$fuzz_pid"; do
    [ -z "$pid" ] || kill -- -"$pid" 2>/dev/null || true
  done
  for log in "$lint_log" "$sdk_log" "$side_log" "$fuzz_log"; do
    [ -z "$log" ] || rm -f "$log" "$log.seconds"
  done
}
# Starts `NAME LOG COMMAND...` in a session of its own (stopped with everything it started when the run ends), its
# output in LOG and its time in LOG.seconds; sets background_pid. With BACKGROUND_NICE=N the job runs at that
# niceness, as a scheduling group: Linux's autogroups give each session an equal share of the CPU whatever its
# processes' own niceness, so the session's group is niced (/proc/self/autogroup) as well as the job.
start_background() {
  local name=$1 log=$2
  shift 2
  setsid bash -c 'log=$1; shift
    if [ -n "${BACKGROUND_NICE:-}" ]; then
      { echo "$BACKGROUND_NICE" >/proc/self/autogroup; } 2>/dev/null || true
      renice -n "$BACKGROUND_NICE" -p $$ >/dev/null 2>&1 || true
    fi
    started=$(date +%s); "$@" >"$log" 2>&1; status=$?; echo $(($(date +%s) - started)) >"$log.seconds"; exit $status' \
    "$name" "$log" "$@" &
  background_pid=$!
}
# Waits for a job start_background started and shows its output; `finish_background PID LOG WHAT` fails the run,
# saying WHAT failed, when the job failed, and prints `test.sh: WHAT passed in S s (beside ...)` otherwise.
finish_background() {
  local pid=$1 log=$2 what=$3 status=0
  wait "$pid" || status=$?
  cat "$log"
  if [ "$status" -ne 0 ]; then
    echo "test.sh: $what failed (above)" >&2
    exit "$status"
  fi
  echo "test.sh: $what passed in $(cat "$log.seconds") s (beside other steps)"
}
trap stop_background EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# No compiler warning in this repository's own sources (dependencies' warnings are theirs): a build's output is
# kept and any `warning:` of a file under Sources, Tests or Clients fails the run. An incremental build shows only
# what it recompiled; CI builds from scratch, so there every file is checked.
build_without_warnings() {
  local log
  log="$(mktemp)"
  if ! swift build "$@" 2>&1 | tee "$log"; then rm -f "$log"; return 1; fi
  # (The shell SDK's generated client too: scripts/generate-shell-api.sh makes the package imports its files do not
  # use internal ones, which Swift 6.3 would warn of.)
  if grep -E "^$PWD/(Sources|Tests|Clients/PrefetchShell/(Sources|Tests))/[^:]+:[0-9]+:[0-9]+: warning:" "$log" >&2; then
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
# (Exported: the shell SDK's build below runs it in a job of its own.)
export -f build_without_warnings
fuzz_run=0
[ $quick -eq 1 ] || [ "${PREFETCH_SKIP_FUZZ:-0}" = "1" ] || fuzz_run=1
if [ $quick -eq 0 ]; then
  scripts/ensure-deps.sh test
  phase "dependencies checked" "$started"
  # Beside the build, each a job of its own whose output is shown when it ends: lint (it mostly waits, on PyPI for its
  # checkers, on redis-server and promtool) and the shell SDK's script, which the browser tests inject the read key
  # with (its own package: it fills the cores the build's links and its last modules leave idle). A failing one
  # fails the run after the build.
  lint_log="$(mktemp)"
  start_background lint "$lint_log" scripts/lint.sh
  lint_pid=$background_pid
  sdk_log="$(mktemp)"
  start_background sdk "$sdk_log" build_without_warnings --package-path Clients/PrefetchShell --product prefetch-shell-script
  sdk_pid=$background_pid
  # The fuzzers, from the start and at the lowest priority (they take the CPU the build and the tests leave idle, so
  # they lengthen neither): their build (the fuzz targets with AddressSanitizer, unoptimised here: half the CPU time
  # of the optimised build `scripts/fuzz.sh` makes by default, for runs of 3 s a target;
  # PREFETCH_FUZZ_CONFIGURATION=release for longer ones) and runs, a check that every target builds,
  # starts and survives its corpus and a few seconds of mutation; two targets at a time, one a core, since the
  # layers have ended by then. Their output is shown, and a failure fails the run,
  # at the end. PREFETCH_SKIP_FUZZ=1 skips them and schemathesis (a quicker local run).
  if [ $fuzz_run -eq 1 ]; then
    fuzz_log="$(mktemp)"
    FUZZ_CONFIGURATION=${PREFETCH_FUZZ_CONFIGURATION:-debug} FUZZ_PARALLEL=2 BACKGROUND_NICE=19 \
      start_background fuzz "$fuzz_log" scripts/fuzz.sh "${PREFETCH_FUZZ_SECONDS:-3}"
    fuzz_pid=$background_pid
  fi
fi
build_started=$(date +%s)
build_status=0
build_without_warnings --build-tests "${build_flags[@]}" || build_status=$?
[ "$build_status" -ne 0 ] || phase "build (debug, tests included)" "$build_started"
if [ -n "$lint_pid" ]; then
  pid=$lint_pid
  lint_pid=""
  finish_background "$pid" "$lint_log" lint
fi
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
# The shell SDK's script (built beside the build, above): the browser tests inject the read key with it.
pid=$sdk_pid
sdk_pid=""
finish_background "$pid" "$sdk_log" "build of the shell SDK's script"
PREFETCH_SHELL_SCRIPT_BIN="$(swift build --package-path Clients/PrefetchShell --show-bin-path)/prefetch-shell-script"
export PREFETCH_SHELL_SCRIPT_BIN
bin_dir="$(swift build --show-bin-path)"
# Beside the layers, a job of its own (the layers spend most of their time waiting on processes, sockets, Redis and a
# browser, and pass beside `stress-ng --cpu 2`: RELIABILITY.md), with the fuzzers (started with the build, above):
# - the shell SDK's tests (its live tests run the binaries this build made: test-clients.sh would otherwise ask for
#   the products again, which relinks them, since the test build's executables are linked for testing), then
#   schemathesis with 20 examples per operation on the page listener with two configs (`fuzz`, whose interfaces also
#   fail and time out, and `demo`, which serves the demo's files too) and the operator listener with the first.
# Longer runs are on demand (docs/testing.md): PREFETCH_FUZZ_SECONDS, FUZZ_MAX_EXAMPLES, FUZZ_CONFIGS and
# FUZZ_OPERATOR_CONFIGS set them here. Its output is shown, and a failure fails the run, after the layers.
# The SDK's tests, then schemathesis (when the fuzzers run): one job, so at most three things run at once.
side() {
  local status=0
  PREFETCH_BIN="$bin_dir/prefetch" PREFETCH_UPSTREAM_BIN="$bin_dir/prefetch-upstream" scripts/test-clients.sh || status=$?
  [ "$status" -eq 0 ] || { echo "test.sh: the shell SDK's tests failed (above)"; return "$status"; }
  [ "$fuzz_run" -eq 1 ] || return 0
  local fuzz_configs=${FUZZ_CONFIGS:-fuzz demo}
  FUZZ_MAX_EXAMPLES="${FUZZ_MAX_EXAMPLES:-20}" FUZZ_CONFIGS="$fuzz_configs" \
    FUZZ_OPERATOR_CONFIGS="${FUZZ_OPERATOR_CONFIGS:-${fuzz_configs%% *}}" scripts/fuzz-api.sh ||
    { status=$?; echo "test.sh: schemathesis failed (above)"; return "$status"; }
}
export -f side
export bin_dir fuzz_run
side_log="$(mktemp)"
start_background side "$side_log" side
side_pid=$background_pid
# The layers in order, one at a time. With arguments (a --filter), one run as asked.
if [ $# -eq 0 ]; then
  run_layer unit "${layer_unit[@]}"
  run_layer service "${layer_service[@]}"
  run_layer deployments "${layer_deployments[@]}"
  run_layer browser "${layer_browser[@]}"
  # The operators' view: a real Prometheus scraping live services, the rules and every dashboard query (docs/operations.md).
  PREFETCH_BIN_DIR="$bin_dir" scripts/operators-view-test.py
else
  swift test --skip-build "${build_flags[@]}" "$@" "${width[@]}"
fi
pid=$side_pid
side_pid=""
what="the shell SDK's tests"
[ "$fuzz_run" -eq 0 ] || what="the shell SDK's tests and schemathesis"
finish_background "$pid" "$side_log" "$what"
# CI's container rehearsal (PREFETCH_REHEARSE_RUNTIME=1, set by .ci/run): the runtime image's layout rebuilt from this
# build's objects (scripts/verify-runtime.sh). It relinks `prefetch`, so it runs once nothing else runs the binaries:
# here, beside the fuzzers' last runs, which use a build of their own.
if [ "${PREFETCH_REHEARSE_RUNTIME:-0}" = "1" ]; then
  rehearsal_started=$(date +%s)
  VERIFY_BUILD=debug scripts/verify-runtime.sh
  phase "container rehearsal" "$rehearsal_started"
fi
if [ $fuzz_run -eq 1 ]; then
  pid=$fuzz_pid
  fuzz_pid=""
  finish_background "$pid" "$fuzz_log" fuzzers
fi
phase "whole run" "$started"

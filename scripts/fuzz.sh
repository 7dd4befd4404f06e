#!/usr/bin/env bash
# Builds the libFuzzer targets of Fuzz/ (AddressSanitizer, debug preconditions on) and runs each for a bounded time on
# a copy of its seed corpus, one after another (or FUZZ_PARALLEL at once). Fails on any crash, sanitizer report or
# broken invariant (every target runs), and prints where the input that did it was saved.
#
# Usage: scripts/fuzz.sh [seconds-per-target] [target...]   (default 20 s; all targets: FuzzJSON FuzzConfig FuzzTape
#        FuzzURL FuzzPlan FuzzTemplate FuzzRedisCodec FuzzRESP)
# Environment: FUZZ_OUT (where corpora and crash inputs go; default a new temp dir, kept), FUZZ_JOBS (libFuzzer
#        -jobs/-workers per target, default 1), FUZZ_KEEP_CORPUS=1 merges what the runs found back into Fuzz/Corpus,
#        FUZZ_CONFIGURATION (release, the default: optimised, about 4 times the inputs a second; debug: unoptimised,
#        built in half the CPU time, for the few seconds a target that scripts/test.sh gives it), FUZZ_PARALLEL (how
#        many targets run at once, default 1; scripts/test.sh runs all 8 together for its 3 s).
# Needs only the Swift toolchain (it ships libFuzzer and the sanitizer runtimes). Scratch path: .build-fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-20}
shift || true
all=(FuzzJSON FuzzConfig FuzzTape FuzzURL FuzzPlan FuzzTemplate FuzzRedisCodec FuzzRESP)
[ "$#" -gt 0 ] && targets=("$@") || targets=("${all[@]}")
jobs=${FUZZ_JOBS:-1}
at_once=${FUZZ_PARALLEL:-1}
case "$at_once" in '' | *[!0-9]* | 0) echo "fuzz: FUZZ_PARALLEL is a number of targets at once (1 or more), not $at_once" >&2; exit 2 ;; esac
out=${FUZZ_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/prefetch-fuzz.XXXXXX")}
mkdir -p "$out"

configuration=${FUZZ_CONFIGURATION:-release}
case "$configuration" in release | debug) ;; *) echo "fuzz: FUZZ_CONFIGURATION is release or debug, not $configuration" >&2; exit 2 ;; esac
build_started=$SECONDS
swift build --package-path Fuzz --scratch-path .build-fuzz -c "$configuration" >"$out/build.log" 2>&1 || {
  tail -40 "$out/build.log" >&2
  echo "fuzz: the build failed (log: $out/build.log)" >&2
  exit 2
}
bin=$(swift build --package-path Fuzz --scratch-path .build-fuzz -c "$configuration" --show-bin-path)
echo "fuzz: built ($configuration) in $((SECONDS - build_started)) s; ${seconds} s per target; output in $out"

# A broken invariant is a fatalError: the Swift backtracer would race ASan's report, so libFuzzer reports it alone.
export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:symbolize=1}

# One target's run: its corpus copied, libFuzzer for the given time, the verdict in $out/$target/verdict (its lines
# are printed in the targets' order once every run ended, so runs side by side do not mix their output).
run_target() {
  local target=$1 corpus="$out/$1/corpus" artifacts="$out/$1/crashes/" started=$SECONDS status=0 runs parallel=()
  mkdir -p "$corpus" "$artifacts"
  cp Fuzz/Corpus/"$target"/* "$corpus"/
  [ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")
  (cd "$out/$target" && "$bin/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 "${parallel[@]}" -artifact_prefix="$artifacts" "$corpus" >"$out/$target/log" 2>&1) || status=$?
  runs=$(cat "$out/$target/log" "$out/$target"/fuzz-*.log 2>/dev/null | grep -o 'stat::number_of_executed_units: *[0-9]*' | awk '{s += $2} END {print s + 0}' || true)
  if [ "$status" -ne 0 ] || ls "$artifacts" | grep -q .; then
    {
      echo "fuzz: $target FAILED after $((SECONDS - started)) s (exit $status):"
      grep -E 'invariant broken|ERROR: |SUMMARY: ' "$out/$target/log" | head -5 || true
      for input in "$artifacts"*; do [ -e "$input" ] && echo "  input: $input"; done
      echo "  log:   $out/$target/log"
      echo "  replay: $bin/$target <input>   (minimise: $bin/$target -minimize_crash=1 -runs=100000 <input>)"
    } >"$out/$target/failed"
    return
  fi
  echo "fuzz: $target ok: $runs runs in $((SECONDS - started)) s, corpus $(ls "$corpus" | wc -l) inputs" >"$out/$target/verdict"
  if [ "${FUZZ_KEEP_CORPUS:-0}" = "1" ]; then
    "$bin/$target" -merge=1 Fuzz/Corpus/"$target" "$corpus" >/dev/null 2>&1 || true
  fi
}

# FUZZ_PARALLEL targets at a time (default 1: each has the machine to itself for its time).
running=0
for target in "${targets[@]}"; do
  rm -f "$out/$target/verdict" "$out/$target/failed"
  run_target "$target" &
  running=$((running + 1))
  if [ "$running" -ge "$at_once" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
failed=0
for target in "${targets[@]}"; do
  if [ -f "$out/$target/verdict" ]; then
    cat "$out/$target/verdict"
  else
    failed=1
    if [ -f "$out/$target/failed" ]; then cat "$out/$target/failed" >&2; else echo "fuzz: $target FAILED: its run left no verdict (log: $out/$target/log)" >&2; fi
  fi
done
exit $failed

#!/usr/bin/env bash
# Builds the libFuzzer targets of Fuzz/ (AddressSanitizer, debug preconditions on) and runs each for a bounded time on
# a copy of its seed corpus, one after another. Fails on the first crash, sanitizer report or broken invariant, and
# prints where the input that did it was saved.
#
# Usage: scripts/fuzz.sh [seconds-per-target] [target...]   (default 20 s; all targets: FuzzJSON FuzzConfig FuzzTape
#        FuzzURL FuzzPlan FuzzTemplate FuzzRedisCodec FuzzRESP)
# Environment: FUZZ_OUT (where corpora and crash inputs go; default a new temp dir, kept), FUZZ_JOBS (libFuzzer
#        -jobs/-workers per target, default 1), FUZZ_KEEP_CORPUS=1 merges what the runs found back into Fuzz/Corpus,
#        FUZZ_CONFIGURATION (release, the default: optimised, about 4 times the inputs a second; debug: unoptimised,
#        built in half the CPU time, for the few seconds a target that scripts/test.sh gives it).
# Needs only the Swift toolchain (it ships libFuzzer and the sanitizer runtimes). Scratch path: .build-fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-20}
shift || true
all=(FuzzJSON FuzzConfig FuzzTape FuzzURL FuzzPlan FuzzTemplate FuzzRedisCodec FuzzRESP)
[ "$#" -gt 0 ] && targets=("$@") || targets=("${all[@]}")
jobs=${FUZZ_JOBS:-1}
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

failed=0
for target in "${targets[@]}"; do
  corpus="$out/$target/corpus"
  artifacts="$out/$target/crashes/"
  mkdir -p "$corpus" "$artifacts"
  cp Fuzz/Corpus/"$target"/* "$corpus"/
  started=$SECONDS
  status=0
  parallel=()
  [ "$jobs" -gt 1 ] && parallel=(-jobs="$jobs" -workers="$jobs")
  (cd "$out/$target" && "$bin/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 "${parallel[@]}" -artifact_prefix="$artifacts" "$corpus" >"$out/$target/log" 2>&1) || status=$?
  runs=$(cat "$out/$target/log" "$out/$target"/fuzz-*.log 2>/dev/null | grep -o 'stat::number_of_executed_units: *[0-9]*' | awk '{s += $2} END {print s + 0}' || true)
  if [ "$status" -ne 0 ] || ls "$artifacts" | grep -q .; then
    failed=1
    echo "fuzz: $target FAILED after $((SECONDS - started)) s (exit $status):" >&2
    grep -E 'invariant broken|ERROR: |SUMMARY: ' "$out/$target/log" | head -5 >&2 || true
    for input in "$artifacts"*; do [ -e "$input" ] && echo "  input: $input" >&2; done
    echo "  log:   $out/$target/log" >&2
    echo "  replay: $bin/$target <input>   (minimise: $bin/$target -minimize_crash=1 -runs=100000 <input>)" >&2
    continue
  fi
  echo "fuzz: $target ok: $runs runs in $((SECONDS - started)) s, corpus $(ls "$corpus" | wc -l) inputs"
  if [ "${FUZZ_KEEP_CORPUS:-0}" = "1" ]; then
    "$bin/$target" -merge=1 Fuzz/Corpus/"$target" "$corpus" >/dev/null 2>&1 || true
  fi
done
exit $failed

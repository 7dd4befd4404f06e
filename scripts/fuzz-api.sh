#!/usr/bin/env bash
# Fuzzes both HTTP surfaces with schemathesis against a live `prefetch serve` (random free ports on 127.0.0.1, an
# admin token), once per config, the configs side by side: `fuzz` (the spec's example page and a pattern page on a
# local `prefetch-upstream`, with interfaces that fail and time out), `sample` (configs/prefetch.json as shipped: its api hosts are not on this
# machine, so every fetch fails) and `demo` (configs/demo.json, its upstream address pointed at the local
# `prefetch-upstream`). Each listener is fuzzed with the document it serves at its own /openapi.yaml (the page
# listener's operations tagged `page`, the operator listener's those tagged `operator`, with the bearer token), both
# checked to be exactly their parts of openapi.yaml. Phases examples, coverage and fuzzing, plus stateful (the spec's
# links) on the page surface; `--checks all` with no per-operation expectations (one setting, below). Fails when any
# response is an undocumented 5xx, does not conform to the spec (status code, content type, headers, body schema),
# refuses schema-valid input or accepts schema-invalid input, or ignores the token, or when the service is not
# alive and well afterwards.
#
# Usage: scripts/fuzz-api.sh [--max-examples N] [--seed N] [--config fuzz|sample|demo]...   (expects a built tree: swift build)
# Environment: FUZZ_MAX_EXAMPLES (default 100 per operation), FUZZ_SEED (default: random, printed),
# FUZZ_CONFIGS (default "fuzz sample demo"; --config replaces it), FUZZ_OPERATOR_CONFIGS (the configs whose
# operator surface is fuzzed too; default all of them: the page surface is fuzzed with every config).
set -euo pipefail
cd "$(dirname "$0")/.."

max_examples=${FUZZ_MAX_EXAMPLES:-100}
seed=${FUZZ_SEED:-$((RANDOM * 32768 + RANDOM))}
read -r -a configs <<<"${FUZZ_CONFIGS:-fuzz sample demo}"
given=()
while [ $# -gt 0 ]; do
  case "$1" in
    --max-examples) max_examples=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --config) given+=("$2"); shift 2 ;;
    *) echo "usage: $0 [--max-examples N] [--seed N] [--config fuzz|sample|demo]..." >&2; exit 2 ;;
  esac
done
[ ${#given[@]} -eq 0 ] || configs=("${given[@]}")
for index in "${!configs[@]}"; do
  name=${configs[$index]}
  case "$name" in fuzz | sample | demo) ;; *) echo "fuzz-api: unknown config $name (fuzz, sample or demo)" >&2; exit 2 ;; esac
  # The configs run side by side, each in a directory named for it: a config named twice would share it.
  for earlier in "${configs[@]:0:$index}"; do
    [ "$earlier" != "$name" ] || { echo "fuzz-api: config $name is named twice" >&2; exit 2; }
  done
done
# The configs whose operator surface is fuzzed: each must be one of the configs run, and at least one is.
read -r -a operator_configs <<<"${FUZZ_OPERATOR_CONFIGS:-${configs[*]}}"
[ ${#operator_configs[@]} -gt 0 ] || { echo "fuzz-api: FUZZ_OPERATOR_CONFIGS names no config" >&2; exit 2; }
for name in "${operator_configs[@]}"; do
  [[ " ${configs[*]} " == *" $name "* ]] || {
    echo "fuzz-api: FUZZ_OPERATOR_CONFIGS names $name, which is not one of the configs run (${configs[*]})" >&2
    exit 2
  }
done

if ! python3 -c "import schemathesis" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check "schemathesis>=4.3,<5"
fi
# Through the interpreter that has the package (no dependence on a console script being on PATH).
schemathesis() {
  python3 -c 'import sys; from schemathesis.cli import schemathesis; sys.argv[0] = "schemathesis"; schemathesis()' "$@"
}

bin=$(swift build --show-bin-path)
for exe in prefetch prefetch-upstream; do
  [ -x "$bin/$exe" ] || { echo "fuzz-api: $bin/$exe is missing; run swift build first" >&2; exit 2; }
done

. scripts/lib-processes.sh

"$bin/prefetch-upstream" --port 0 >"$work/upstream.out" 2>&1 &
pids+=($!)
up=$(wait_port "$work/upstream.out" "listening on")
upstream="http://127.0.0.1:$up"

# The spec's example page (its example interface name is xx.get) and a pattern page, both answered by the
# local upstream; some interfaces misbehave so fuzzed reads also meet failures.
cat >"$work/fuzz.json" <<JSON
{"code": 200, "data": {"name": "prefetchConfig", "version": "fuzz", "config": [
  {"url": "https://m.example.com/help/new", "interfaces": [
    {"name": "xx.get", "api": "$upstream/xx.json", "method": "GET", "urlParam": true, "credentials": "include"},
    {"name": "xx.post", "api": "$upstream/xx.json", "method": "POST", "bodyParam": true, "body": {"cityId": 123456}, "credentials": "include"},
    {"name": "xx.down", "api": "$upstream/down?status=503", "method": "GET", "timeout": 1000},
    {"name": "xx.slow", "api": "$upstream/slow?delay=3000", "method": "GET", "timeout": 300}
  ]},
  {"url": "https://m.example.com/item/{id}.html", "interfaces": [
    {"api": "$upstream/item.json", "method": "GET", "urlParam": true}
  ]}
]}}
JSON
# The shipped sample, as it is; and the demo with its upstream (127.0.0.1:9090 in scripts/run.sh) on the local one.
cp configs/prefetch.json "$work/sample.json"
sed "s#http://127.0.0.1:9090#$upstream#g" configs/demo.json >"$work/demo.json"
cat >"$work/renderers.json" <<JSON
{"renderers": {
  "main": {"minIdle": 1, "maxSize": 64, "acquireTimeout": 200, "createMs": 5, "leaseTimeout": 5},
  "plain": {"minIdle": 1, "maxSize": 64, "acquireTimeout": 200, "createMs": 5, "leaseTimeout": 5}
}}
JSON

# No per-operation expectations and no hook: every check runs as schemathesis ships it, with these settings.
# - not_a_server_error also accepts 503: the documented answer of a renderer pool or a service that is busy (RFC
#   9110 15.6.4), which the fuzz config provokes on purpose (it leases renderers and never releases them); any
#   other 5xx fails. An upstream's failure or slowness is a `404` miss of a data read, never a 5xx.
# - The data checks also accept 413 and 431: a body over its operation's limit (256 KiB on the page surface, 4 KiB
#   on the operator surface) is `413 too-large`, a request head over 128 KiB `431 too-large`, both documented per
#   operation in the API's JSON error shape on both listeners. No schema can bound a request's size in bytes, and
#   strings of escaped 4-byte characters or thousands of percent-encoded ones reach either limit. Every other
#   check still runs on those answers (their status, content type and body are checked against the document).
cat >"$work/schemathesis.toml" <<'TOML'
[checks.not_a_server_error]
expected-statuses = ["2xx", "3xx", "4xx", "503"]

[checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "413", "429", "431", "5xx"]

[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "431", "5xx"]
TOML

# One run per surface, each on the document its listener serves. From the config's scratch directory ($dir), so
# schemathesis' own cache (.schemathesis/) stays out of the work tree and apart from the other configs' runs.
fuzz() {
  local surface=$1 url=$2 phases=$3
  shift 3
  echo "fuzz-api: config $config, $surface surface"
  (cd "$dir" && schemathesis --no-color --config-file "$work/schemathesis.toml" run "$dir/$surface.yaml" \
    --url "$url" \
    "$@" \
    --checks all \
    --max-examples "$max_examples" \
    --seed "$seed" \
    --workers 1 \
    --request-timeout 15 \
    --max-redirects 0 \
    --phases "$phases" \
    --suppress-health-check all \
    --generation-database none \
    --warnings off)
}

# Starts `prefetch serve` with config $1 (its ports in $api, $admin; its pid in $serve_pid) and checks that each
# listener serves its part of openapi.yaml.
serve() {
  local config=$1
  # A fresh admin token per run (32 URL-safe characters). The trigger rate limit is off so that fuzzed
  # triggers meet the real answers rather than 429 after the first burst (the limit has its own Swift tests).
  token=$(head -c 24 /dev/urandom | base64 | tr '+/' '-_')
  # A serve that did not come up is reported with its own words and started once more, so one slow start on a
  # loaded machine is told apart from a service that cannot start.
  port=""
  for attempt in 1 2; do
    "$bin/prefetch" serve --config "$work/$config.json" --renderers "$work/renderers.json" \
      --port 0 --admin-port 0 --admin-token "$token" --trigger-rate 0 \
      --log-level warning >"$dir/serve.out" 2>"$dir/serve.err" &
    serve_pid=$!
    pids+=("$serve_pid")
    if port=$(wait_port "$dir/serve.out" "prefetch listening on" 600 2>/dev/null) \
      && admin_port=$(wait_port "$dir/serve.out" "prefetch operator surface on" 600 2>/dev/null); then
      break
    fi
    echo "fuzz-api: prefetch serve did not report its ports (attempt $attempt); running: $(kill -0 "$serve_pid" 2>/dev/null && echo yes || echo no)" >&2
    cat "$dir/serve.out" "$dir/serve.err" >&2
    kill "$serve_pid" 2>/dev/null || true
    port=""
  done
  [ -n "$port" ] || return 1
  api="http://127.0.0.1:$port"
  admin="http://127.0.0.1:$admin_port"
  echo "fuzz-api: config $config: page surface $api, operator surface $admin, upstream $upstream, seed $seed, $max_examples examples per operation"

  # Each listener serves its own document, cut from openapi.yaml (the operations tagged with the surface, its server
  # and tag); schemathesis runs each surface against the document that surface serves. Together they must be
  # openapi.yaml exactly, or the run tests a spec the repository does not hold.
  curl -sf "$api/openapi.yaml" >"$dir/page.yaml"
  curl -sf -H "Authorization: Bearer $token" "$admin/openapi.yaml" >"$dir/operator.yaml"
  if ! python3 - "$dir/page.yaml" "$dir/operator.yaml" <<'PY'
import sys, yaml
source = yaml.safe_load(open("openapi.yaml"))
served = {surface: yaml.safe_load(open(path)) for surface, path in zip(["page", "operator"], sys.argv[1:])}
for surface, document in served.items():
    for key in source:
        if key not in ("servers", "tags", "paths") and document.get(key) != source[key]:
            sys.exit(f"the {surface} document's {key} differs from openapi.yaml's")
    for path, item in source["paths"].items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "tags" not in operation:
                continue
            held = method in document["paths"].get(path, {})
            if held != (surface in operation["tags"]):
                sys.exit(f"{method.upper()} {path} is {'in' if held else 'missing from'} the {surface} document")
PY
  then
    echo "fuzz-api: a listener's /openapi.yaml is not its part of openapi.yaml; rebuild prefetch (swift build --product prefetch)" >&2
    return 2
  fi
}

# The service must have survived the fuzzing, still answer, and still want its token.
healthy() {
  if ! kill -0 "$serve_pid" 2>/dev/null; then
    echo "fuzz-api: prefetch serve died during the run:" >&2
    cat "$dir/serve.err" >&2
    return 1
  fi
  local health unauthorized
  health=$(curl -s -o /dev/null -w '%{http_code}' "$api/healthz" || true)
  if [ "$health" != "200" ]; then
    echo "fuzz-api: /healthz answered $health after the run" >&2
    return 1
  fi
  unauthorized=$(curl -s -o /dev/null -w '%{http_code}' "$admin/metrics" || true)
  if [ "$unauthorized" != "401" ]; then
    echo "fuzz-api: the operator surface answered $unauthorized without the token after the run" >&2
    return 1
  fi
}

# Every surface of one config: its service, schemathesis on the page surface (and on the operator surface when
# asked), then the health check. Run in a subshell of its own, beside the other configs' (each config has its own
# service, scratch directory and log; a run is mostly one Python process and a lightly loaded service, so the
# configs side by side take about the time of the longest on 2 cores); it stops its own service on exit.
run_config() {
  config=$1
  dir="$work/$config"
  pids=()
  trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done' EXIT
  serve "$config" || exit $?
  local status=0
  # The page surface also runs the stateful phase, following the spec's links (a trigger's ticket to its reads, a
  # lease to its release); the operator surface has no links.
  fuzz page "$api" examples,coverage,fuzzing,stateful || status=$?
  if [[ " ${operator_configs[*]} " == *" $config "* ]]; then
    fuzz operator "$admin" examples,coverage,fuzzing -H "Authorization: Bearer $token" || status=$?
  fi
  healthy || exit 1
  exit "$status"
}

# A background subshell ignores SIGINT (no job control), and so would the schemathesis it starts: on exit (a failure,
# Ctrl-C, a timeout's TERM) every process each config's run started is stopped here, its children first.
kill_tree() {
  local stat line ppid
  for stat in /proc/[0-9]*/stat; do
    line=$(cat "$stat" 2>/dev/null) || continue
    # The fields after the command's name (which may hold spaces): state, then the parent's pid.
    read -r _ ppid _ <<<"${line##*) }"
    if [ "$ppid" = "$1" ]; then
      ppid=${stat#/proc/}
      kill_tree "${ppid%/stat}"
    fi
  done
  kill "$1" 2>/dev/null || true
}
runs=()
trap 'for run in "${runs[@]}"; do kill_tree "$run"; done; cleanup' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
started=$SECONDS
status=0
for config in "${configs[@]}"; do
  mkdir -p "$work/$config"
  (run_config "$config") >"$work/$config/log" 2>&1 &
  runs+=($!)
done
# Each config's output in order, once its run has ended; the first failing config's status is the script's.
for index in "${!configs[@]}"; do
  run_status=0
  wait "${runs[$index]}" || run_status=$?
  cat "$work/${configs[$index]}/log"
  [ "$run_status" -eq 0 ] || [ "$status" -ne 0 ] || status=$run_status
done
if [ "$status" -ne 0 ]; then
  echo "fuzz-api: a config's run failed (its output above: schemathesis' findings, a service that did not start or serve its document, or one not healthy afterwards; seed $seed, replay with FUZZ_SEED=$seed)" >&2
  exit "$status"
fi
echo "fuzz-api: no server error or spec violation on the page surface with configs ${configs[*]}, the operator surface with ${operator_configs[*]} (seed $seed, $((SECONDS - started)) s); the service is healthy"

#!/usr/bin/env bash
# Fuzzes the HTTP API with schemathesis, generated from openapi.yaml, against a live `prefetch serve` (random
# free port on 127.0.0.1) whose config points at a local `prefetch-upstream`. Fails when any response is a 5xx
# or does not conform to the spec (status code, content type, headers, body schema), or when the service is
# not alive and well afterwards.
#
# Usage: scripts/fuzz-api.sh [--max-examples N] [--seed N]   (expects a built tree: swift build)
# Environment: FUZZ_MAX_EXAMPLES (default 300 per operation, about a minute), FUZZ_SEED (default: random, printed).
#
# Checks: all, except positive_data_acceptance, which assumes every schema-valid request succeeds. Here a page
# URL is a string in the schema, yet the service answers 400 for one that is not an absolute http(s) URL and
# 404 no-config for a page the config does not know, and the data endpoints need `api` or `name` (OpenAPI 3.0
# cannot say "one of two parameters"). Refused input is held to the spec by negative_data_rejection and to
# the Swift tests (documented in RELIABILITY.md).
set -euo pipefail
cd "$(dirname "$0")/.."

max_examples=${FUZZ_MAX_EXAMPLES:-300}
seed=${FUZZ_SEED:-$((RANDOM * 32768 + RANDOM))}
while [ $# -gt 0 ]; do
  case "$1" in
    --max-examples) max_examples=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "usage: $0 [--max-examples N] [--seed N]" >&2; exit 2 ;;
  esac
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

# The spec's example page and a pattern page, both answered by the local upstream; some interfaces misbehave
# so fuzzed reads also meet failures.
cat >"$work/prefetch.json" <<JSON
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
cat >"$work/renderers.json" <<JSON
{"renderers": {
  "main": {"minIdle": 1, "maxSize": 64, "acquireTimeout": 200, "createMs": 5, "leaseTimeout": 5},
  "plain": {"minIdle": 1, "maxSize": 64, "acquireTimeout": 200, "createMs": 5, "leaseTimeout": 5}
}}
JSON

"$bin/prefetch" serve --config "$work/prefetch.json" --renderers "$work/renderers.json" --port 0 \
  --log-level error >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
pids+=("$serve_pid")
port=$(wait_port "$work/serve.out" "prefetch listening on")
api="http://127.0.0.1:$port"
echo "fuzz-api: serve on $api, upstream on $upstream, seed $seed, $max_examples examples per operation"

# The data endpoints answer 502 (the upstream failed) and 504 (still pending at the deadline) by design: both
# are documented misses the page falls back from, not server errors. Every other 5xx fails the run.
cat >"$work/schemathesis.toml" <<'TOML'
[[operations]]
include-path-regex = "^/v1/(data|prefetch/\\{ticket\\}/data)$"
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "502", "504"]

# An acquire answers 503 when every renderer stays leased past acquireTimeout (documented): the fuzzer leases
# without releasing.
[[operations]]
include-path = "/v1/renderers/acquire"
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "503"]
TOML

status=0
spec=$(pwd)/openapi.yaml
# From the scratch directory, so schemathesis' own cache (.schemathesis/) stays out of the work tree.
cd "$work"
schemathesis --no-color --config-file "$work/schemathesis.toml" run "$spec" \
  --url "$api" \
  --checks all \
  --exclude-checks positive_data_acceptance \
  --max-examples "$max_examples" \
  --seed "$seed" \
  --workers 1 \
  --request-timeout 15 \
  --phases examples,coverage,fuzzing \
  --suppress-health-check all \
  --generation-database none \
  --warnings off \
  || status=$?

# The service must have survived the fuzzing and still answer.
if ! kill -0 "$serve_pid" 2>/dev/null; then
  echo "fuzz-api: prefetch serve died during the run:" >&2
  cat "$work/serve.err" >&2
  exit 1
fi
health=$(curl -s -o /dev/null -w '%{http_code}' "$api/healthz" || true)
if [ "$health" != "200" ]; then
  echo "fuzz-api: /healthz answered $health after the run" >&2
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "fuzz-api: schemathesis found failures (seed $seed; replay with FUZZ_SEED=$seed)" >&2
  exit "$status"
fi
echo "fuzz-api: no server error or spec violation (seed $seed); the service is healthy"

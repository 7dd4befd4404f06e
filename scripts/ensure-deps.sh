#!/usr/bin/env bash
# Installs the system packages the build and the tests need, when they are missing.
# Usage: scripts/ensure-deps.sh [build|test]
set -euo pipefail
# libssl-dev: the digests come from the system's libcrypto (OpenSSL 3; the Digests target through CCrypto).
want=(libcurl4-openssl-dev libhiredis-dev libssl-dev pkg-config)
if [ "${1:-build}" = "test" ]; then
  # Real parts the tests start: redis-server, openssl (test CA and certificates), curl, and chromium
  # (with python3's websocket-client) for the real-browser tests (scripts/webshell-browser.py).
  # prometheus: promtool for the rules' unit tests (lint) and a real Prometheus for scripts/operators-view-test.py.
  want+=(curl redis-server openssl chromium prometheus)
fi
missing=()
for package in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "${1:-build}" = "test" ] && ! python3 -c 'import websocket' 2>/dev/null; then
  echo "installing: websocket-client (PyPI)" >&2
  python3 -m pip install --quiet --disable-pip-version-check websocket-client
fi
# The OTLP test's receiver (scripts/otlp-receiver.py) decodes the export requests with the protocol's own messages.
if [ "${1:-build}" = "test" ] && ! python3 -c 'import opentelemetry.proto.collector.trace.v1.trace_service_pb2' 2>/dev/null; then
  echo "installing: opentelemetry-proto (PyPI)" >&2
  python3 -m pip install --quiet --disable-pip-version-check opentelemetry-proto
fi

#!/usr/bin/env bash
# The shell SDK's generated HTTP client (Clients/PrefetchShell/Sources/PrefetchShellAPI/Generated), made from the
# SDK's copy of the page surface's document (openapi.yaml beside it) by swift-openapi-generator with
# openapi-generator-config.yaml, and committed, so an app that links the SDK builds no generator. The generator is
# built from Clients/PrefetchShell/Generator, a package of its own (its first build takes a few minutes).
# Clients/PrefetchShell/Generator/generated.sha256 records the inputs and outputs of the last generation; the
# generator's version is pinned exactly in Generator/Package.swift.
#   scripts/generate-shell-api.sh           regenerates the client and the record (after copying a new document over)
#   scripts/generate-shell-api.sh --check   fails when the document, the config or a file under Generated/ changed
#                                           since the last generation (lint runs it; no build, seconds)
set -euo pipefail
cd "$(dirname "$0")/../Clients/PrefetchShell"
api=Sources/PrefetchShellAPI
record=Generator/generated.sha256
inputs=("$api/openapi.yaml" "$api/openapi-generator-config.yaml")
if [ "${1:-}" = "--check" ]; then
  [ $# -eq 1 ] || { echo "generate-shell-api: --check takes no other arguments" >&2; exit 2; }
  listed=$(awk '{print $2}' "$record" | sort)
  present=$({ printf '%s\n' "${inputs[@]}"; find "$api/Generated" -type f; } | sort)
  if [ "$listed" != "$present" ] || ! sha256sum --check --quiet --strict "$record" >/dev/null 2>&1; then
    echo "generate-shell-api: the shell SDK's generated client, its document or its config changed since the last generation:" >&2
    sha256sum --check --quiet "$record" 2>&1 | sed 's/^/  /' >&2 || true
    diff <(echo "$listed") <(echo "$present") | sed 's/^/  /' >&2 || true
    echo "  run scripts/generate-shell-api.sh after changing $api/openapi.yaml (never edit Generated/ by hand)" >&2
    exit 1
  fi
  echo "generate-shell-api: the shell SDK's generated client, document and config are those of the last generation"
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: scripts/generate-shell-api.sh [--check]" >&2; exit 2; }
swift build --package-path Generator -c release --product swift-openapi-generator
generator="$(swift build --package-path Generator -c release --show-bin-path)/swift-openapi-generator"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$generator" generate "$api/openapi.yaml" --config "$api/openapi-generator-config.yaml" --output-directory "$out" \
  --additional-file-comment "swift-format-ignore-file"
rm -rf "$api/Generated"
mkdir "$api/Generated"
# The generator writes an empty Server.swift even when asked for no server.
for file in "$out"/*.swift; do
  [ -s "$file" ] && cp "$file" "$api/Generated/"
done
# The generator imports Foundation and OpenAPIRuntime with `package import` in every file; the compiler warns for
# each file whose package declarations use neither. Those imports become internal ones (the compiler names each),
# and a second build must then print no warning of the generated files.
generated_warnings() {
  local log
  log=$(swift build --target PrefetchShellAPI 2>&1) || { echo "$log" >&2; echo "generate-shell-api: the generated client does not build" >&2; return 1; }
  echo "$log" | grep -E "^$PWD/$api/Generated/[^:]+:[0-9]+:[0-9]+: warning: " || true
}
touch "$api"/Generated/*.swift
warnings=$(generated_warnings)
echo "$warnings" | sed -n "s/^\([^:]*\):\([0-9]*\):[0-9]*: warning: package import of '.*' was not used in package declarations$/\1 \2/p" |
  sort -u | while read -r file line; do
    sed -i "${line}s/package import /import /" "$file"
  done
touch "$api"/Generated/*.swift
left=$(generated_warnings) || exit 1
if [ -n "$left" ]; then
  echo "generate-shell-api: the generated client still builds with warnings:" >&2
  echo "$left" >&2
  exit 1
fi
sha256sum "${inputs[@]}" "$api"/Generated/*.swift >"$record"
echo "generate-shell-api: $(ls "$api/Generated" | wc -l) files in $api/Generated; record in Clients/PrefetchShell/$record"

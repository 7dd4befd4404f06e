#!/usr/bin/env bash
# Rehearses the Dockerfile's runtime stage without a Docker engine: builds the release binary as the build
# stage does, creates a Debian bookworm minbase root with debootstrap, installs exactly the runtime stage's
# packages, copies the binary, its resources and the configs as the Dockerfile does, and inside it (chroot,
# as the image's non-root user) runs `prefetch validate`, starts `serve`, checks /healthz and a plan, and
# stops it. Needs root (debootstrap, chroot) and Debian's package archive (debootstrap and apt find their
# mirror themselves).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "verify-runtime.sh must run as root (debootstrap and chroot)" >&2; exit 1; }

scripts/ensure-deps.sh build
command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
dpkg -s libhiredis-dev libssl-dev >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libhiredis-dev libssl-dev >/dev/null

# The Dockerfile builds release; VERIFY_BUILD=debug (CI, after the test run's debug build) links the same objects the
# tests ran against with the static Swift runtime instead: the binary's shared libraries, which are what the runtime
# stage must provide, are the same in both.
build=${VERIFY_BUILD:-release}
case "$build" in release | debug) ;; *) echo "verify-runtime: VERIFY_BUILD must be release or debug, not $build" >&2; exit 2 ;; esac
# A debug build takes PREFETCH_BUILD_FLAGS as scripts/test.sh does, so it links the objects the tests built.
build_flags=()
[ "$build" = release ] || read -r -a build_flags <<<"${PREFETCH_BUILD_FLAGS:-}"
echo "== $build build (--static-swift-stdlib${build_flags[*]:+, ${build_flags[*]}})"
scripts/build-static.sh -c "$build" "${build_flags[@]}" --product prefetch
bin=$(swift build -c "$build" --show-bin-path)

root=${VERIFY_ROOT:-/var/tmp/prefetch-runtime-root}
if [ ! -x "$root/usr/bin/apt-get" ]; then
  echo "== debootstrap bookworm minbase into $root"
  rm -rf "$root"
  debootstrap --variant=minbase bookworm "$root" >/dev/null
fi

cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true
  mountpoint -q "$root/proc" && umount "$root/proc" || true
}
trap cleanup EXIT
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
cp /etc/resolv.conf "$root/etc/resolv.conf"

echo "== runtime packages, exactly the Dockerfile's"
# The runtime stage is the one starting at the last FROM.
packages=$(awk '/^FROM /{stage++} {print stage "\t" $0}' Dockerfile | awk -F'\t' -v last="$(grep -c '^FROM ' Dockerfile)" '$1==last{print $2}' | sed -n 's/.*apt-get install -y --no-install-recommends \(.*\) \\$/\1/p')
[ -n "$packages" ] || { echo "could not read the runtime packages from the Dockerfile" >&2; exit 1; }
chroot "$root" /bin/sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages >/dev/null"
chroot "$root" /bin/sh -c "id prefetch >/dev/null 2>&1 || useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin prefetch"

echo "== copy the binary, its resources and the configs as the Dockerfile does"
rm -rf "$root/usr/local/bin/prefetch" "$root/usr/local/bin/prefetch_PageAPI.resources" "$root/app"
cp "$bin/prefetch" "$root/usr/local/bin/"
cp -R "$bin/prefetch_PageAPI.resources" "$root/usr/local/bin/"
mkdir -p "$root/app"
cp -R configs "$root/app/configs"

run() { chroot --userspec=10001:10001 "$root" /usr/bin/env -i HOME=/app PATH=/usr/local/bin:/usr/bin:/bin /bin/sh -c "cd /app && $*"; }

echo "== prefetch validate"
run prefetch validate
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
admin=$(free_port)
echo "== prefetch serve on 127.0.0.1:$port (operator surface on 127.0.0.1:$admin)"
chroot --userspec=10001:10001 "$root" /usr/bin/env -i HOME=/app PATH=/usr/local/bin:/usr/bin:/bin \
  /bin/sh -c "cd /app && exec prefetch serve --host 127.0.0.1 --port $port --admin-port $admin" > /tmp/verify-runtime-serve.log 2>&1 &
pid=$!
for _ in $(seq 1 50); do
  run prefetch healthcheck --url "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.2
done
run prefetch healthcheck --url "http://127.0.0.1:$port/healthz"
plan=$(curl -sf "http://127.0.0.1:$admin/v1/plan?url=https%3A%2F%2Fm.example.com%2Fhelp%2Fnew%3Fid%3D163%26itemId%3D126")
echo "$plan" | grep -q '"url":"https://m.example.com/xx.json?id=163&itemId=126"' || { echo "unexpected plan: $plan" >&2; exit 1; }
# Read the whole answer before looking at it: `curl | head` fails under pipefail when head closes the pipe first.
spec=$(curl -sf "http://127.0.0.1:$port/openapi.yaml")
case "$spec" in openapi:*) ;; *) echo "openapi.yaml is not served from the resource bundle" >&2; exit 1 ;; esac
kill -TERM "$pid"
wait "$pid"
status=$?
pid=""
[ "$status" -eq 0 ] || { echo "serve exited $status after SIGTERM" >&2; cat /tmp/verify-runtime-serve.log >&2; exit 1; }
echo "verify-runtime: the runtime image layout validates, serves /healthz, a plan and /openapi.yaml, and stops cleanly"

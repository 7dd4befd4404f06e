# Shared helpers for the benchmark scripts (sourced, not run).
#
# Every benchmark starts its processes on 127.0.0.1 with ports the kernel picks, records their pids, and
# stops exactly those pids on exit. Figures go to stdout as `key value` lines under a heading, and to
# $BENCH_OUT/<name>.txt when BENCH_OUT is set (bench/all.sh collects them).

set -euo pipefail

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$BENCH_DIR/.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/prefetch-bench.XXXXXX")"
BENCH_PIDS=()

cleanup() {
  local pid
  for pid in "${BENCH_PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${BENCH_PIDS[@]}"; do
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || continue 2
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [ -z "${BENCH_KEEP:-}" ]; then rm -rf "$WORK"; else echo "kept $WORK" >&2; fi
}
trap cleanup EXIT

log() { echo "# $*" >&2; }

# Installs Debian packages that are missing (we run as root on the bench machine; sudo elsewhere).
ensure_apt() {
  local missing=() package
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing: ${missing[*]}"
  local sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

ensure_node() {
  command -v node >/dev/null || ensure_apt nodejs
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  [ "$major" -ge 18 ] || { echo "node $major is too old (need 18+ for built-in fetch)" >&2; exit 1; }
}

# Builds the release binaries once per invocation of bench/all.sh (BENCH_BUILT=1 skips). BENCH_BIN=DIR takes them
# from DIR as they are (no build, no `swift build` call at all: for a machine where another build holds .build).
build_release() {
  "$REPO_DIR/scripts/ensure-deps.sh" build
  if [ -n "${BENCH_BIN:-}" ]; then
    BIN="$BENCH_BIN"
  elif [ -z "${BENCH_BUILT:-}" ]; then
    log "swift build -c release --static-swift-stdlib (prefetch, prefetch-upstream, prefetch-upstream-tls, linked as the image ships them)"
    (cd "$REPO_DIR" && for product in prefetch prefetch-upstream prefetch-upstream-tls; do
      scripts/build-static.sh -c release --product "$product" >&2 || exit 1
    done)
  fi
  [ -n "${BENCH_BIN:-}" ] || BIN="$(cd "$REPO_DIR" && swift build -c release --show-bin-path)"
  PREFETCH="$BIN/prefetch"
  UPSTREAM="$BIN/prefetch-upstream"
  # The HTTPS and HTTP/2 upstream (the plain one builds without TLS).
  UPSTREAM_TLS="$BIN/prefetch-upstream-tls"
  [ -x "$PREFETCH" ] && [ -x "$UPSTREAM" ] && [ -x "$UPSTREAM_TLS" ] || { echo "release binaries missing in $BIN" >&2; exit 1; }
}

# start NAME PATTERN CMD...: runs CMD in the background with stdout/stderr in $WORK/NAME.{out,err}, waits
# (at most 60 s) for a stdout line matching the extended regex PATTERN, and sets STARTED_PID and STARTED_LINE.
start() {
  local name="$1" pattern="$2"
  shift 2
  # Emptied first: a restarted server must not be taken for ready on its predecessor's line.
  : >"$WORK/$name.out"
  # From $WORK, so no configs/ of the caller's directory is picked up (renderers: the built-in profiles).
  (cd "$WORK" && exec "$@") >"$WORK/$name.out" 2>"$WORK/$name.err" &
  STARTED_PID=$!
  BENCH_PIDS+=("$STARTED_PID")
  wait_line "$name" "$pattern"
}

# wait_line NAME PATTERN: waits (at most 60 s) until $WORK/NAME.out, written by STARTED_PID, has a line matching
# the extended regex PATTERN, and sets STARTED_LINE to the first such line.
wait_line() {
  local name="$1" pattern="$2" waited=0
  while ! grep -Eq "$pattern" "$WORK/$name.out" 2>/dev/null; do
    if ! kill -0 "$STARTED_PID" 2>/dev/null; then
      echo "$name exited before it was ready:" >&2
      tail -20 "$WORK/$name.err" "$WORK/$name.out" >&2
      exit 1
    fi
    sleep 0.05
    waited=$((waited + 1))
    [ "$waited" -lt 1200 ] || { echo "$name not ready after 60 s" >&2; exit 1; }
  done
  STARTED_LINE="$(grep -Em1 "$pattern" "$WORK/$name.out")"
}

# stop PID: SIGTERM, then wait for it to exit (at most 15 s).
# The pid leaves the list cleaned up on exit, so a reused pid is never signalled.
stop() {
  local pid="$1" kept=() other
  for other in "${BENCH_PIDS[@]}"; do [ "$other" = "$pid" ] || kept+=("$other"); done
  BENCH_PIDS=("${kept[@]}")
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 150); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

# A port that was free a moment ago (for servers that cannot bind port 0 and report it, like nginx).
free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# start_upstream [THREADS]: the scriptable upstream; sets UPSTREAM_PID and UPSTREAM_PORT.
start_upstream() {
  start upstream 'listening on ' "$UPSTREAM" --port 0 --threads "${1:-1}"
  UPSTREAM_PID=$STARTED_PID
  UPSTREAM_PORT="${STARTED_LINE##*:}"
}

# start_serve NAME CMD...: a `prefetch serve` command line (without ports) started with `--port 0 --admin-port 0`,
# so several instances fit on one machine; waits for both listeners and sets STARTED_PID, PAGE_URL (the page
# surface) and ADMIN_URL (the operator surface: /metrics, /v1/plan, /v1/config, /v1/debug).
start_serve() {
  local name="$1"
  shift
  start "$name" 'prefetch listening on ' "$@" --port 0 --admin-port 0
  PAGE_URL="$(grep -Eo 'http://127\.0\.0\.1:[0-9]+' <<<"$STARTED_LINE")"
  wait_line "$name" 'prefetch operator surface on '
  ADMIN_URL="$(grep -Eo 'http://127\.0\.0\.1:[0-9]+' <<<"$STARTED_LINE")"
}

# start_service CONFIG [ARGS...]: `prefetch serve` on free ports; sets SERVICE_PID, SERVICE_PORT, SERVICE_URL (page
# surface) and ADMIN_URL (operator surface). SERVICE_ENV (an array of NAME=VALUE) is added to its environment.
SERVICE_ENV=()
start_service() {
  local config="$1"
  shift
  start_serve service env "${SERVICE_ENV[@]}" "$PREFETCH" serve --config "$config" "$@"
  SERVICE_PID=$STARTED_PID
  SERVICE_URL="$PAGE_URL"
  SERVICE_PORT="${SERVICE_URL##*:}"
}

# CPU seconds (user + system) a process has used so far, from /proc/PID/stat.
cpu_seconds() {
  local ticks
  ticks="$(getconf CLK_TCK)"
  # Fields after the command name (which may contain spaces): utime is the 12th, stime the 13th.
  sed -E 's/^.*\) //' "/proc/$1/stat" | awk -v hz="$ticks" '{ printf "%.2f\n", ($12 + $13) / hz }'
}

# status_kb PID FIELD: a /proc/PID/status field (VmRSS, VmHWM, ...) in KiB.
status_kb() {
  awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"
}

machine_line() {
  echo "$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')), $(free -g | awk '/Mem:/ {print $2}') GiB"
}

load_line() { cut -d' ' -f1-3 /proc/loadavg; }

# report NAME: copies stdin to stdout and to $BENCH_OUT/NAME.txt when bench/all.sh collects results.
report() {
  if [ -n "${BENCH_OUT:-}" ]; then tee "$BENCH_OUT/$1.txt"; else cat; fi
}

#!/usr/bin/env bash
# Browser: when the demo page's data is ready in headless Chromium, with and without prefetch. The measurement the
# browser tests (Tests/BrowserTests/WebShellBrowserTests.swift) no longer make: they check what the page
# saw (its data, its reads, the waterfall), this measures how much sooner it saw it.
#
# `prefetch serve --demo` with a config naming the demo page (BASE/demo/page.html) and the scriptable upstream
# (`prefetch-upstream`) answering the page's interfaces after 300 ms. scripts/webshell-browser.py `compare` loads
# the page alternately with and without a trigger (after one warm-up load each), every load a fresh user (a cookie
# of its own), and reads the page's own `data-ready` mark (ms since navigation start). The page asks for its data
# 200 ms after navigation starts, so the best a prefetch can do is max(200, 300) = 300 ms against 200 + 300 = 500.
# Two pages:
#   independent  one interface, `demo.data` (300 ms);
#   dependent    `demo.user` (300 ms) and `demo.orders` (300 ms) made with a value from demo.user's answer: the
#                page waits for one answer and then the other; the service fetched both from the tap.
# Prints, per page, the medians of both modes and their ratio (plain / prefetch), then one markdown block.
# Env: BENCH_RUNS (loads per mode, default 15), BENCH_BIN (a directory holding prefetch and prefetch-upstream: used
# as they are, nothing built), PREFETCH_SHELL_SCRIPT_BIN (Clients/PrefetchShell's prefetch-shell-script: the read
# key is injected with the shell SDK's own script; without it, with a plain assignment, the same for timing).
source "$(dirname "$0")/lib.sh"

RUNS="${BENCH_RUNS:-15}"

"$REPO_DIR/scripts/ensure-deps.sh" test >&2
build_release

start_upstream 1
UPSTREAM_BASE="http://127.0.0.1:$UPSTREAM_PORT"
DATA="$UPSTREAM_BASE/demo/data?delay=300"
USER_JSON="$(python3 -c 'import urllib.parse; print(urllib.parse.quote("{\"data\":{\"uid\":\"u-42 7\"}}", safe=""))')"
USER="$UPSTREAM_BASE/demo/user?delay=300&contentType=application%2Fjson&body=$USER_JSON"
ORDERS="$UPSTREAM_BASE/demo/orders?delay=300"
THEN="demo.orders|$ORDERS|$ORDERS&uid={}|/data/uid"

# serve_page KIND: `prefetch serve --demo` whose config gives the demo page the KIND page's interfaces (independent:
# demo.data; dependent: demo.user and demo.orders), stopping the previous one; sets BASE. The config names the page
# by its real URL, so the page port is chosen first (a port free a moment ago).
SERVICE_PID=""
serve_page() {
  [ -z "$SERVICE_PID" ] || stop "$SERVICE_PID"
  local port
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
  BASE="http://127.0.0.1:$port"
  python3 - "$1" "$WORK/config-$1.json" "$BASE/demo/page.html" "$DATA" "$USER" "$ORDERS" <<'PY'
import json, sys
kind, path, page, data, user, orders = sys.argv[1:]
if kind == "independent":
    interfaces = [{"name": "demo.data", "api": data, "method": "GET", "urlParam": True, "params": ["run"]}]
else:
    interfaces = [
        {"name": "demo.user", "api": user, "method": "GET", "urlParam": True, "params": ["run"]},
        {"name": "demo.orders", "api": orders, "method": "GET", "urlParam": True, "params": ["run"],
         "query": {"uid": "${demo.user:/data/uid}"}},
    ]
config = {"code": 200, "data": {"name": "bench-browser", "version": "1", "config": [{"url": page, "interfaces": interfaces}]}}
json.dump(config, open(path, "w"))
PY
  start "service-$1" 'prefetch listening on ' "$PREFETCH" serve --demo --config "$WORK/config-$1.json" --port "$port" --admin-port 0
  SERVICE_PID=$STARTED_PID
}

SCRIPT_ARGS=()
if [ -n "${PREFETCH_SHELL_SCRIPT_BIN:-}" ]; then
  SCRIPT_ARGS=(--read-key-script "$PREFETCH_SHELL_SCRIPT_BIN")
else
  log "PREFETCH_SHELL_SCRIPT_BIN unset: the read key is injected with a plain assignment"
fi

# compare NAME ARGS...: one harness run; its result (the last stdout line) goes to $WORK/NAME.json.
compare() {
  local name="$1"
  shift
  log "browser: $name page, $RUNS loads per mode"
  python3 "$REPO_DIR/scripts/webshell-browser.py" compare --base "$BASE" --runs "$RUNS" --out "$WORK/$name" \
    "${SCRIPT_ARGS[@]}" "$@" >"$WORK/$name.out"
  sed '$d' "$WORK/$name.out" >&2
  tail -1 "$WORK/$name.out" >"$WORK/$name.json"
}
STARTED_AT="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
LOAD_BEFORE="$(load_line)"
serve_page independent
compare independent --api "$DATA"
serve_page dependent
compare dependent --api "$USER" --then "$THEN"

COMMIT="$(cd "$REPO_DIR" && git rev-parse --short HEAD)"
{
  echo "## browser"
  echo "date $STARTED_AT"
  echo "commit $COMMIT"
  echo "machine $(machine_line)"
  echo "binaries $BIN"
  echo "load_before $LOAD_BEFORE"
  python3 - "$WORK/independent.json" "$WORK/dependent.json" "$RUNS" <<'PY'
import json, sys
pages = [("independent", json.load(open(sys.argv[1]))), ("dependent", json.load(open(sys.argv[2])))]
runs = sys.argv[3]
chromium = pages[0][1]["chromium"]
for name, result in pages:
    median = result["medianDataReadyMs"]
    print("%s plain_median_ms %.0f prefetch_median_ms %.0f ratio %.2fx saving_ms %.0f" % (
        name, median["plain"], median["prefetch"], median["plain"] / median["prefetch"], median["plain"] - median["prefetch"]))
print()
print("| page | runs per mode | plain median (ms) | prefetch median (ms) | plain / prefetch | saving (ms) |")
print("|---|---|---|---|---|---|")
for name, result in pages:
    median = result["medianDataReadyMs"]
    print("| %s | %s | %.0f | %.0f | %.2fx | %.0f |" % (
        name, runs, median["plain"], median["prefetch"], median["plain"] / median["prefetch"],
        median["plain"] - median["prefetch"]))
print()
print("data-ready mark, ms since navigation start, headless %s; upstream answers in 300 ms, the page asks at 200 ms" % chromium)
PY
  echo "load_after $(load_line)"
} | report browser
stop "$SERVICE_PID"

#!/usr/bin/env python3
"""Headless Chromium as a web shell with an offline package (issue 39): the harness plays the shell.

A small site (a page, a stylesheet, two scripts, an image) is served by a static origin on 127.0.0.1; `prefetch
serve --resources` publishes its resource map; the shell emulator (Clients/PrefetchShell's prefetch-shell-offline,
the SDK's offline cache as a command) syncs from the provider. Chromium's DevTools `Fetch` domain then pauses every
request of the page and the harness hands it to the emulator, which answers from the offline cache
(`Fetch.fulfillRequest`) or says it has nothing (then the request goes to the network, or fails in `render`).

  render  syncs, then STOPS the origin and the provider, loads the page and checks it rendered: the text its script
          set, its stylesheet's effect, every resource answered by the emulator. The last stdout line is JSON.
  bench   an origin that answers every file after --delay-ms (100); loads the page alternately without the offline
          package (Chromium's cache disabled: every open goes to the origin) and with it, after one warm-up load
          each, and reports the `load` event's time (PerformanceNavigationTiming.loadEventStart) for each. The last
          stdout line is JSON.
  origin  the static origin alone: serves --root after --delay-ms, prints `listening on 127.0.0.1:PORT`.

Every process is on 127.0.0.1 on a free port and stopped on exit. Needs chromium and python3's websocket-client.
"""
import argparse
import base64
import importlib.util
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

_spec = importlib.util.spec_from_file_location("webshell_browser", os.path.join(os.path.dirname(__file__), "webshell-browser.py"))
_browser = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_browser)

SITE = {
    "index.html": ("text/html; charset=utf-8", """<!doctype html>
<html><head><meta charset="utf-8"><title>offline package</title>
<link rel="stylesheet" href="app.css">
</head><body>
<h1>Shop</h1>
<p id="out">not rendered</p>
<img id="logo" src="logo.svg" alt="logo">
<script src="lib.js"></script>
<script src="app.js"></script>
</body></html>
"""),
    "app.css": ("text/css", "#out { color: rgb(0, 128, 0); }\nbody { background: rgb(1, 2, 3); }\n"),
    "lib.js": ("application/javascript", "window.shopLib = { greet: function (who) { return 'rendered for ' + who; } };\n"),
    "app.js": ("application/javascript",
               "document.getElementById('out').textContent = window.shopLib.greet('the offline package');\n"),
    "logo.svg": ("image/svg+xml",
                 '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20" fill="#0a0"/></svg>\n'),
}


def die_with_parent():
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


# --- the origin -------------------------------------------------------------------------------------------------

def serve_origin(root, delay_ms):
    class Handler(SimpleHTTPRequestHandler):
        extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".js": "application/javascript", ".svg": "image/svg+xml"}

        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=root, **kwargs)

        def log_message(self, *args):
            pass

        def send_head(self):
            if delay_ms:
                time.sleep(delay_ms / 1000.0)  # the origin's latency (the benchmark's subject)
            return super().send_head()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print("listening on 127.0.0.1:%d" % server.server_address[1], flush=True)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    server.server_close()


class Child:
    """A child process whose output goes to a file; stop() ends it (SIGTERM, then SIGKILL)."""

    def __init__(self, arguments, directory, name, stdin=subprocess.DEVNULL, stdout=None):
        self.log = os.path.join(directory, name + ".log")
        self.log_handle = open(self.log, "wb")
        self.process = subprocess.Popen(arguments, stdin=stdin, stdout=stdout or self.log_handle, stderr=self.log_handle,
                                        preexec_fn=die_with_parent)

    def output(self):
        with open(self.log, errors="replace") as handle:
            return handle.read()

    def port(self, prefix, deadline_s=60):
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            for line in self.output().splitlines():
                if prefix in line:
                    return int("".join(c for c in line.split(prefix, 1)[1][:6] if c.isdigit()))
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError("%s reported no port: %s" % (self.process.args[0], self.output()))

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log_handle.close()


def refused(port):
    """Whether a connection to 127.0.0.1:port is refused (nothing listens)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True


# --- the service and the shell emulator -------------------------------------------------------------------------

class Stack:
    """The origin, the provider and the synced shell emulator."""

    def __init__(self, prefetch, emulator, delay_ms):
        self.work = tempfile.mkdtemp(prefix="prefetch-offline-browser-")
        self.children = []
        self.emulator = None
        try:
            self._start_all(prefetch, emulator, delay_ms)
        except BaseException:
            self.close()
            raise

    def _start_all(self, prefetch, emulator, delay_ms):
        root = os.path.join(self.work, "origin", "site")
        os.makedirs(root)
        for name, (_, body) in SITE.items():
            with open(os.path.join(root, name), "w") as handle:
                handle.write(body)
        self.origin = self._start([sys.executable, os.path.abspath(__file__), "origin", "--root",
                                   os.path.join(self.work, "origin"), "--delay-ms", str(delay_ms)], "origin")
        self.origin_port = self.origin.port("listening on 127.0.0.1:")
        self.site = "http://127.0.0.1:%d/site/" % self.origin_port
        self.page = self.site + "index.html"
        manifest = os.path.join(self.work, "resources.json")
        with open(manifest, "w") as handle:
            json.dump({"allowHosts": ["127.0.0.1:%d" % self.origin_port],
                       "pages": {self.page: [self.site + name for name in SITE]}}, handle)
        config = os.path.join(self.work, "prefetch.json")
        with open(config, "w") as handle:
            json.dump({"code": 200, "data": {"name": "offline", "version": "1", "config": [
                {"url": "http://127.0.0.1/offline", "interfaces": [
                    {"name": "none", "api": "http://127.0.0.1:9/none", "method": "GET", "credentials": "omit"}]}]}}, handle)
        state = os.path.join(self.work, "state")
        os.makedirs(state)
        self.provider = self._start([prefetch, "serve", "--config", config, "--port", "0", "--admin-port", "0",
                                     "--log-level", "warning", "--state-dir", state, "--resources", manifest], "provider")
        self.provider_port = self.provider.port("prefetch listening on http://127.0.0.1:")
        self.provider_url = "http://127.0.0.1:%d" % self.provider_port
        self.version = self._wait_for_map()
        directory = os.path.join(self.work, "shell")
        self.emulator = subprocess.Popen([emulator, "--directory", directory, "--provider", self.provider_url],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=die_with_parent)
        self.sync = json.loads(self.emulator.stdout.readline() or "null")
        if not self.sync or self.sync.get("pending") != 0 or self.sync.get("downloads") != len(SITE):
            raise RuntimeError("the shell emulator did not sync the %d resources: %s" % (len(SITE), self.sync))

    def _start(self, arguments, name):
        child = Child(arguments, self.work, name)
        self.children.append(child)
        return child

    def _wait_for_map(self, deadline_s=60):
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.provider_url + "/v1/resources", timeout=10) as response:
                    data = json.load(response)["data"]
                if len(data.get("resourcemap") or {}) == len(SITE):
                    return str(data["version"])
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("the provider published no map of %d resources: %s" % (len(SITE), self.provider.output()))

    def lookup(self, url):
        self.emulator.stdin.write((url + "\n").encode())
        self.emulator.stdin.flush()
        answer = json.loads(self.emulator.stdout.readline())
        if answer.get("url") != url:
            raise RuntimeError("the shell emulator answered another request: %s" % answer)
        return answer

    def close(self):
        if self.emulator is not None:
            self.emulator.stdin.close()
            try:
                self.emulator.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.emulator.kill()
                self.emulator.wait(timeout=10)
        for child in self.children:
            child.stop()
        shutil.rmtree(self.work, ignore_errors=True)


# --- the browser as the shell -----------------------------------------------------------------------------------

class Shell:
    """Chromium driven over DevTools, its requests handed to the offline package when `offline` is on."""

    def __init__(self, browser, stack):
        self.browser = browser
        self.stack = stack
        self.socket = browser.socket
        self.next_id = 10_000
        self.served = []
        self.missed = []

    def send(self, method, **params):
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        return self.next_id

    def call(self, method, **params):
        wanted = self.send(method, **params)
        while True:
            message = self.receive()
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError("%s failed: %s" % (method, message["error"]))
                return message.get("result", {})

    def receive(self):
        """One message; a paused request is answered on the way (so no call waits behind one)."""
        message = json.loads(self.socket.recv())
        if message.get("method") == "Fetch.requestPaused":
            self.answer(message["params"])
        return message

    def answer(self, paused):
        url = paused["request"]["url"]
        found = self.stack.lookup(url)
        if found["hit"]:
            self.served.append(url)
            self.send("Fetch.fulfillRequest", requestId=paused["requestId"], responseCode=200,
                      responseHeaders=[{"name": "Content-Type", "value": found["ctype"]},
                                       {"name": "Cache-Control", "value": "no-store"}],
                      body=found["body"])
        else:
            self.missed.append(url)
            if self.fail_misses:
                self.send("Fetch.failRequest", requestId=paused["requestId"], errorReason="ConnectionRefused")
            else:
                self.send("Fetch.continueRequest", requestId=paused["requestId"])

    def setup(self):
        self.call("Page.enable")
        self.call("Network.enable")
        # Every open goes to the origin or the package, never to Chromium's own cache.
        self.call("Network.setCacheDisabled", cacheDisabled=True)

    def load(self, url, offline, fail_misses=False, timeout_s=30):
        """Opens `url` (with the offline package answering, or not); returns the load event's time in ms."""
        self.fail_misses = fail_misses
        self.call("Fetch.disable")
        self.call("Page.navigate", url="about:blank")
        self.wait_event("Page.loadEventFired", timeout_s)
        if offline:
            self.call("Fetch.enable", patterns=[{"urlPattern": "*", "requestStage": "Request"}])
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired", timeout_s)
        timing = self.evaluate("JSON.stringify(performance.getEntriesByType('navigation')[0].toJSON())")
        self.call("Fetch.disable")
        entry = json.loads(timing)
        if entry.get("name") != url:
            raise RuntimeError("the load measured another page: %s" % entry.get("name"))
        return entry["loadEventStart"]

    def wait_event(self, method, timeout_s):
        deadline = time.monotonic() + timeout_s
        self.socket.settimeout(timeout_s)
        while time.monotonic() < deadline:
            if self.receive().get("method") == method:
                return
        raise RuntimeError("no %s within %.0f s" % (method, timeout_s))

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")


def render(arguments):
    stack = Stack(arguments.prefetch, arguments.shell_offline, delay_ms=0)
    browser = None
    try:
        # The origin and the provider stop: the page's resources can come from the offline package alone.
        for child in (stack.origin, stack.provider):
            child.stop()
        origin_refused = refused(stack.origin_port)
        provider_refused = refused(stack.provider_port)
        browser = _browser.Browser(arguments.chromium)
        shell = Shell(browser, stack)
        shell.setup()
        load_ms = shell.load(stack.page, offline=True, fail_misses=True)
        result = {
            "page": stack.page, "version": stack.version, "sync": stack.sync,
            "originRefused": origin_refused, "providerRefused": provider_refused,
            "text": shell.evaluate("document.getElementById('out').textContent"),
            "color": shell.evaluate("getComputedStyle(document.getElementById('out')).color"),
            "background": shell.evaluate("getComputedStyle(document.body).backgroundColor"),
            "imageWidth": shell.evaluate("document.getElementById('logo').naturalWidth"),
            "served": sorted(set(shell.served)), "missed": sorted(set(shell.missed)),
            "loadEventMs": load_ms, "chromium": browser.version,
        }
    finally:
        if browser is not None:
            browser.close()
        stack.close()
    print(json.dumps(result, sort_keys=True))


def bench(arguments):
    stack = Stack(arguments.prefetch, arguments.shell_offline, delay_ms=arguments.delay_ms)
    browser = None
    try:
        browser = _browser.Browser(arguments.chromium)
        shell = Shell(browser, stack)
        shell.setup()
        times = {"network": [], "offline": []}
        shell.load(stack.page, offline=False)  # warm-up: Chromium's and the origin's first connections
        shell.load(stack.page, offline=True)
        shell.served, shell.missed = [], []
        for run in range(arguments.runs):
            for mode in (("network", "offline") if run % 2 == 0 else ("offline", "network")):
                times[mode].append(shell.load(stack.page, offline=(mode == "offline")))
        missed = [url for url in shell.missed if not url.endswith("/favicon.ico")]  # not the page's: the browser's own
        if missed:
            raise RuntimeError("the offline package missed %s" % sorted(set(missed)))
        summary = {mode: {"median": statistics.median(values), "p90": sorted(values)[int(0.9 * (len(values) - 1))],
                          "min": min(values), "max": max(values), "runs": len(values)} for mode, values in times.items()}
        result = {"delayMs": arguments.delay_ms, "resources": len(SITE), "runs": arguments.runs,
                  "network": summary["network"], "offline": summary["offline"],
                  "savedMedianMs": summary["network"]["median"] - summary["offline"]["median"],
                  "chromium": browser.version, "cpus": os.cpu_count(),
                  "raw": {mode: [round(v, 1) for v in values] for mode, values in times.items()}}
    finally:
        if browser is not None:
            browser.close()
        stack.close()
    for mode in ("network", "offline"):
        figures = result[mode]
        print("%-8s load event median %.1f ms, p90 %.1f ms, min %.1f, max %.1f (%d runs)"
              % (mode, figures["median"], figures["p90"], figures["min"], figures["max"], figures["runs"]))
    print(json.dumps(result, sort_keys=True))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("render", "bench"):
        command = commands.add_parser(name)
        command.add_argument("--prefetch", required=True, help="the service's binary (prefetch)")
        command.add_argument("--shell-offline", required=True, help="Clients/PrefetchShell's prefetch-shell-offline")
        command.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
        if name == "bench":
            command.add_argument("--runs", type=int, default=20)
            command.add_argument("--delay-ms", type=int, default=100)
    origin = commands.add_parser("origin")
    origin.add_argument("--root", required=True)
    origin.add_argument("--delay-ms", type=int, default=0)
    arguments = parser.parse_args()
    if arguments.command == "origin":
        serve_origin(arguments.root, arguments.delay_ms)
    elif arguments.command == "render":
        render(arguments)
    else:
        bench(arguments)


if __name__ == "__main__":
    main()

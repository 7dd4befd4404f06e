#!/usr/bin/env python3
"""Drives headless Chromium over the DevTools protocol against a running prefetch service.

  compare  loads the demo page with and without prefetch (alternating, after one warm-up load each), reads the
           page's own timing marks and what it shows of its data, and prints the figures; the last stdout line is
           the result as JSON (bench/browser.sh reports its medians; the browser tests check what each load saw). Every load
           is a fresh user: a cookie of its own (`prefetch-compare`, set in the browser and sent with the load's
           trigger), so a plain load finds nothing an earlier load stored and a prefetch load reads what its own
           trigger fetched. A plain load that reads a prefetched response (an interface whose entries the cookie
           does not key: `credentials: omit`, or an api host off the page's site) fails the run rather than
           report a saving that is not one.
  ui       makes one real page open (trigger, inject the read key, navigate), loads /ui from the operator
           surface (--admin), and writes a screenshot (ui.png) and the DOM (ui.html) into --out; the last stdout
           line is JSON. With --same-site the shell injects no key: the trigger carries the user's cookie, the
           browser holds it, and the page reads with `page=` and its cookies (the same-site deployment).

The service must serve /demo/page.html and have a config entry for BASE/demo/page.html whose interfaces are the
given --api URLs. Times are real (no virtual time). Chromium is always stopped; everything stays on 127.0.0.1.
Needs the websocket-client package (scripts/ensure-deps.sh test installs it).
"""
import argparse
import base64
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid

import websocket  # websocket-client


def _die_with_parent():
    """Chromium gets SIGTERM if this harness dies, so no browser outlives a killed test."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Browser:
    """A headless Chromium with one page target, driven by CDP calls."""

    def __init__(self, binary, flags=(), preferences=None):
        self.profile = tempfile.mkdtemp(prefix="prefetch-chromium-")
        if preferences:
            # The profile's Preferences file, read at start: settings with no command-line flag.
            os.makedirs(os.path.join(self.profile, "Default"))
            with open(os.path.join(self.profile, "Default", "Preferences"), "w") as handle:
                json.dump(preferences, handle)
        self.process = subprocess.Popen(
            [binary, "--headless=new", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             "--user-data-dir=" + self.profile, "--no-first-run", "--no-default-browser-check", "--no-sandbox",
             "--disable-gpu", "--disable-extensions", "--disable-background-networking",
             "--disable-background-timer-throttling", "--disable-renderer-backgrounding", *flags, "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        self.socket = None
        try:
            port = self._devtools_port(deadline=time.monotonic() + 30)
            targets = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=10))
            page = next(t for t in targets if t.get("type") == "page")
            self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=15, suppress_origin=True)
            self.next_id = 0
            self.version = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json/version" % port, timeout=10))["Browser"]
        except BaseException:
            self.close()
            raise

    def _devtools_port(self, deadline):
        path = os.path.join(self.profile, "DevToolsActivePort")
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("chromium exited with %s before opening its DevTools port" % self.process.returncode)
            try:
                with open(path) as handle:
                    first = handle.readline().strip()
                if first:
                    return int(first)
            except (FileNotFoundError, ValueError):
                pass
            time.sleep(0.05)
        raise RuntimeError("chromium did not open its DevTools port within 30 s")

    def call(self, method, **params):
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError("%s failed: %s" % (method, message["error"]))
                return message.get("result", {})

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def wait_for(self, expression, timeout=60.0):
        """Polls until `expression` is truthy in the page; returns its value. The timeout only bounds a page that
        never gets there: on 2 cores shared with the rest of the test suite a page's loads can take many seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.02)
        raise RuntimeError("timed out after %.0f s waiting for %s" % (timeout, expression))

    def close(self):
        if self.socket is not None:
            try:
                self.socket.close()
            except Exception:
                pass
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)


THEN = None  # --then: a request the demo page makes with a value from the first answer
READ_KEY_SCRIPT = None  # --read-key-script: the shell SDK's command printing the document-start script


def page_url(base, apis, run):
    query = [("api", api) for api in apis] + [("run", str(run))]
    if THEN:
        query.append(("then", THEN))
    return base + "/demo/page.html?" + urllib.parse.urlencode(query)


def trigger(base, page, cookie=None):
    """POST /v1/prefetch as a shell does on tap, with the user's `cookie` when given; returns the answer (ticket,
    readKey, ...)."""
    body = {"url": page}
    if cookie:
        body["headers"] = {"Cookie": cookie}
    request = urllib.request.Request(base + "/v1/prefetch", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def read_key_source(read_key, target):
    """The document-start script handing the page its read key: the shell SDK's own (PrefetchShell's
    ReadKeyScript, through --read-key-script), or a plain assignment without one."""
    if READ_KEY_SCRIPT is None:
        return "window.__PREFETCH_READ_KEY__ = %s;" % json.dumps(read_key)
    made = subprocess.run([READ_KEY_SCRIPT, read_key, target], capture_output=True, text=True, timeout=10)
    if made.returncode != 0:
        raise RuntimeError("%s failed: %s" % (READ_KEY_SCRIPT, made.stderr.strip()))
    return made.stdout.strip()


def open_page(browser, target, read_key):
    """Navigates as a shell does: the read key is injected at document start (the JS bridge), never in the URL."""
    browser.call("Page.enable")
    injected = None
    if read_key:
        injected = browser.call("Page.addScriptToEvaluateOnNewDocument",
                                source=read_key_source(read_key, target))["identifier"]
    browser.call("Page.navigate", url=target)
    return injected


def new_user(browser, base):
    """A fresh identity: a cookie of its own for the service's host, in the browser; returns it as a header value."""
    value = uuid.uuid4().hex
    browser.call("Network.enable")
    browser.call("Network.setCookie", name="prefetch-compare", value=value, url=base)
    return "prefetch-compare=" + value


def load(browser, base, apis, run, prefetch):
    """One page open by a fresh user; returns the page's marks (ms since navigation start)."""
    browser.call("Page.navigate", url="about:blank")
    target = page_url(base, apis, run)
    cookie = new_user(browser, base)
    read_key = trigger(base, target, cookie)["readKey"] if prefetch else None
    injected = open_page(browser, target, read_key)
    text = browser.wait_for(
        "location.href === %s && document.getElementById('marks') && document.getElementById('marks').textContent"
        % json.dumps(target))
    if injected:
        browser.call("Page.removeScriptToEvaluateOnNewDocument", identifier=injected)
    marks = json.loads(text)
    if "error" in marks:
        raise RuntimeError("the demo page failed: %s" % marks["error"])
    marks["mode"] = "prefetch" if prefetch else "plain"
    marks["url"] = target
    marks["run"] = run
    # What the page shows of its answers (each one's first 300 characters, a line each), read after its marks.
    marks["data"] = browser.evaluate("document.getElementById('data').textContent")
    if not prefetch:
        served = [r["api"] for r in marks["results"] if r["source"] != "miss"]
        if served:
            raise RuntimeError("a plain load read prefetched responses of %s although its user triggered nothing: their "
                               "entries are not keyed by the user's cookie (credentials omit, or an api host off the "
                               "page's site), so plain loads would not measure a page without prefetch" % served)
    return marks


def compare(browser, args):
    load(browser, args.base, args.api, 0, prefetch=False)  # warm-up: client.js cached, connections open
    load(browser, args.base, args.api, 1, prefetch=True)
    runs = []
    for index in range(args.runs):
        for prefetch in (index % 2 == 0, index % 2 != 0):
            runs.append(load(browser, args.base, args.api, 10 + len(runs), prefetch=prefetch))
    by_mode = {mode: [r for r in runs if r["mode"] == mode] for mode in ("prefetch", "plain")}
    median = {mode: statistics.median(r["data-ready"] for r in rows) for mode, rows in by_mode.items()}
    rendered = {mode: statistics.median(r["data-rendered"] for r in rows) for mode, rows in by_mode.items()}
    # The page asks at `ask` ms; the upstream takes `delay` ms. Without prefetch the data is ready at
    # ask + delay; with a prefetch started at tap time it is ready at max(ask, delay).
    ask, delay = args.ask_ms, args.delay_ms
    best = {"plain": ask + delay, "prefetch": max(ask, delay), "saving": ask + delay - max(ask, delay)}
    saving = median["plain"] - median["prefetch"]
    result = {"chromium": browser.version, "runsPerMode": args.runs, "medianDataReadyMs": median,
              "medianDataRenderedMs": rendered, "savingMs": saving, "theoreticalBestMs": best,
              "savingOfBest": round(saving / best["saving"], 2) if best["saving"] else None, "runs": runs}
    print("data-ready, ms since navigation start (%s, %d runs each):" % (browser.version, args.runs))
    for mode in ("plain", "prefetch"):
        values = ", ".join(str(r["data-ready"]) for r in by_mode[mode])
        print("  %-9s median %5.0f  (%s; sources %s)" % (
            mode, median[mode], values, sorted({x["source"] for r in by_mode[mode] for x in r["results"]})))
    print("  saving    median %5.0f ms; theoretical best %d ms (own request done at %d, prefetched data at %d)" % (
        saving, best["saving"], best["plain"], best["prefetch"]))
    return result


def ui(browser, args):
    target = page_url(args.base, args.api, 1)
    cookie = new_user(browser, args.base) if args.same_site else None
    answer = trigger(args.base, target, cookie)
    ticket = answer["ticket"]
    injected = open_page(browser, target, None if args.same_site else answer["readKey"])
    marks = json.loads(browser.wait_for(
        "location.href === %s && document.getElementById('marks').textContent" % json.dumps(target)))
    if injected:
        browser.call("Page.removeScriptToEvaluateOnNewDocument", identifier=injected)
    browser.call("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)
    browser.call("Page.navigate", url=args.admin + "/ui?limit=5")
    browser.wait_for("document.body && document.body.getAttribute('data-loaded') === 'true'")
    time.sleep(0.3)  # let layout settle before the picture
    os.makedirs(args.out, exist_ok=True)
    png = os.path.join(args.out, "ui.png")
    dom = os.path.join(args.out, "ui.html")
    with open(png, "wb") as handle:
        handle.write(base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"]))
    with open(dom, "w") as handle:
        handle.write(browser.evaluate("document.documentElement.outerHTML"))
    print("screenshot %s, DOM %s" % (png, dom))
    return {"ticket": ticket, "marks": marks, "screenshot": png, "dom": dom, "chromium": browser.version}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["compare", "ui"])
    parser.add_argument("--base", required=True, help="the service, e.g. http://127.0.0.1:8080")
    parser.add_argument("--admin", help="the operator surface, e.g. http://127.0.0.1:8081 (ui)")
    parser.add_argument("--api", action="append", required=True, help="the demo page's interface (repeatable)")
    parser.add_argument("--then", help="NAME|API|URL|POINTER: a request needing the first answer's value (compare)")
    parser.add_argument("--runs", type=int, default=5, help="loads per mode (compare)")
    parser.add_argument("--ask-ms", type=int, default=200, help="when the demo page asks for its data")
    parser.add_argument("--delay-ms", type=int, default=300, help="the upstream's answer time")
    parser.add_argument("--out", default=".build/test-output", help="where the result (and ui's files) go")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    parser.add_argument("--same-site", action="store_true", help="ui: the page reads with page= and the user's cookie "
                        "(no read key injected)")
    parser.add_argument("--read-key-script", help="a command printing the document-start script for KEY URL "
                        "(Clients/PrefetchShell's prefetch-shell-script: the shell SDK's own)")
    args = parser.parse_args()
    global THEN, READ_KEY_SCRIPT
    THEN = args.then
    READ_KEY_SCRIPT = args.read_key_script
    # SIGTERM (a test that gave up) unwinds through the finally below, which stops chromium.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    browser = Browser(args.chromium)
    try:
        result = compare(browser, args) if args.command == "compare" else ui(browser, args)
    finally:
        browser.close()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "webshell-%s.json" % args.command), "w") as handle:
        json.dump(result, handle, indent=1)
    print(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())

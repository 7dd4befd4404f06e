#!/usr/bin/env python3
"""Asks headless Chromium what a browser does with cookies: the oracle of the shell SDK's and the service's rules.

Two questions, each a JSON document on stdin, answered as JSON on stdout:

  accept  [{"url": U, "setCookie": [line, ...], "existing": [cookie, ...]}, ...]
          -> [[cookie, ...], ...]: for each case, every cookie Chromium holds after navigating to U, whose answer
             carries each line as its own Set-Cookie header, starting from `existing` (Network.setCookie).
  send    [{"jar": [cookie, ...], "page": U, "targets": [U, ...]}, ...]
          -> [{target: "the Cookie header Chromium sent" or null, ...}, ...]: for each case, the jar set in an empty
             store, U opened, and a fetch(target, {credentials: "include"}) made from it for each target.

A cookie is {"name", "value", "domain", "hostOnly", "path", "secure", "httpOnly", "sameSite", "session",
"expires"}: `domain` without a leading dot, `sameSite` "strict", "lax", "none" or null (unspecified).

URLs carry no port: every host resolves to this process's own origin (Chromium's --host-resolver-rules), http to
its plain listener and https to its TLS listener, whose throw-away self-signed certificate Chromium accepts by its
public key alone (--ignore-certificate-errors-spki-list names that key; no other certificate is excused).
With --third-party-cookies, Chromium runs with third-party cookies allowed (its settings' "Allow third-party
cookies", the profile preference `profile.cookie_controls_mode` 0); without it, as shipped (blocked).

Everything is on 127.0.0.1 and stopped on exit. Needs chromium, openssl and python3's websocket-client.
"""
import base64
import hashlib
import importlib.util
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_spec = importlib.util.spec_from_file_location("webshell_browser", os.path.join(os.path.dirname(__file__), "webshell-browser.py"))
_browser = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_browser)


class Origin:
    """The one origin behind every host: answers a case's Set-Cookie lines, and records each request's Cookie."""

    def __init__(self):
        self.lines = {}
        self.received = {}
        self.lock = threading.Lock()
        origin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                with origin.lock:
                    # Only the case's own navigation gets its lines (never the favicon request that follows it,
                    # whose path would give the cookies another default path, or a later case).
                    path = urllib.parse.urlsplit(self.path).path
                    lines = origin.lines.pop(self.headers.get("X-Oracle-Case"), []) if path != "/favicon.ico" else []
                    if "oracle-target" in query:
                        origin.received[query["oracle-target"][0]] = self.headers.get("Cookie")
                body = b"<!doctype html><title>oracle</title>"
                self.send_response(200)
                for line in lines:
                    self.send_header("Set-Cookie", line)
                self.send_header("Content-Type", "text/html")
                self.send_header("Access-Control-Allow-Origin", self.headers.get("Origin") or "*")
                self.send_header("Access-Control-Allow-Credentials", "true")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.directory = tempfile.mkdtemp(prefix="prefetch-cookie-oracle-")
        key = os.path.join(self.directory, "key.pem")
        cert = os.path.join(self.directory, "cert.pem")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
             "-subj", "/CN=cookie-oracle"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        public = subprocess.run(["openssl", "x509", "-in", cert, "-pubkey", "-noout"], check=True, capture_output=True).stdout
        der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=public, check=True, capture_output=True).stdout
        self.spki = base64.b64encode(hashlib.sha256(der).digest()).decode()
        self.plain = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.tls = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.tls.socket = context.wrap_socket(self.tls.socket, server_side=True)
        for server in (self.plain, self.tls):
            threading.Thread(target=server.serve_forever, daemon=True).start()

    def url(self, url):
        """`url` (no port) pointed at this origin's listener for its scheme."""
        parts = urllib.parse.urlsplit(url)
        port = (self.tls if parts.scheme == "https" else self.plain).server_address[1]
        return urllib.parse.urlunsplit((parts.scheme, "%s:%d" % (parts.hostname, port), parts.path or "/", parts.query, ""))

    def close(self):
        for server in (self.plain, self.tls):
            server.shutdown()
            server.server_close()
        shutil.rmtree(self.directory, ignore_errors=True)


def normalized(cookie):
    domain = cookie["domain"]
    same_site = cookie.get("sameSite")
    return {
        "name": cookie["name"], "value": cookie["value"], "domain": domain.lstrip("."),
        "hostOnly": not domain.startswith("."), "path": cookie["path"], "secure": cookie["secure"],
        "httpOnly": cookie["httpOnly"], "sameSite": same_site.lower() if same_site else None,
        "session": cookie["session"], "expires": None if cookie["session"] else cookie["expires"],
    }


def set_cookie(browser, origin, cookie):
    """`cookie` into Chromium's store as a cookie store holds it: host-only through its URL, else by domain."""
    scheme = "https" if cookie.get("secure") else "http"
    params = {"name": cookie["name"], "value": cookie["value"], "path": cookie.get("path", "/"),
              "secure": bool(cookie.get("secure")), "httpOnly": bool(cookie.get("httpOnly"))}
    if cookie.get("hostOnly", True):
        params["url"] = origin.url("%s://%s%s" % (scheme, cookie["domain"], params["path"]))
    else:
        params["domain"] = "." + cookie["domain"]
    if cookie.get("sameSite"):
        params["sameSite"] = cookie["sameSite"].capitalize()
    if cookie.get("expires") is not None:
        params["expires"] = cookie["expires"]
    if not browser.call("Network.setCookie", **params).get("success", True):
        raise RuntimeError("chromium refused the jar's cookie %s" % json.dumps(cookie))


def navigate(browser, url):
    browser.call("Page.navigate", url=url)
    browser.wait_for("document.readyState === 'complete' && location.href === %s" % json.dumps(url))


def accept(browser, origin, cases):
    answers = []
    for number, case in enumerate(cases):
        browser.call("Network.clearBrowserCookies")
        for cookie in case.get("existing", []):
            set_cookie(browser, origin, cookie)
        with origin.lock:
            origin.lines[str(number)] = case["setCookie"]
        browser.call("Network.setExtraHTTPHeaders", headers={"X-Oracle-Case": str(number)})
        navigate(browser, origin.url(case["url"]))
        browser.call("Network.setExtraHTTPHeaders", headers={})
        answers.append([normalized(c) for c in browser.call("Network.getAllCookies")["cookies"]])
    return answers


def send(browser, origin, cases):
    answers = []
    for number, case in enumerate(cases):
        browser.call("Network.clearBrowserCookies")
        for cookie in case["jar"]:
            set_cookie(browser, origin, cookie)
        navigate(browser, origin.url(case["page"]))
        targets = {}
        for index, target in enumerate(case["targets"]):
            parts = urllib.parse.urlsplit(origin.url(target))
            tag = "%d-%d" % (number, index)
            query = (parts.query + "&" if parts.query else "") + "oracle-target=" + tag
            targets[tag] = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))
        script = "Promise.all(%s.map(u => fetch(u, {credentials: 'include'}).then(r => r.status, e => String(e))))" % (
            json.dumps(list(targets.values())))
        browser.call("Runtime.evaluate", expression=script, awaitPromise=True, returnByValue=True)
        with origin.lock:
            answers.append({target: origin.received.get(tag) for tag, target in zip(targets, case["targets"])})
    return answers


def main():
    arguments = sys.argv[1:]
    third_party = "--third-party-cookies" in arguments
    if third_party:
        arguments.remove("--third-party-cookies")
    if len(arguments) != 1 or arguments[0] not in ("accept", "send"):
        sys.exit("usage: cookie-oracle.py [--third-party-cookies] accept|send < cases.json")
    cases = json.load(sys.stdin)
    binary = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not binary:
        sys.exit("cookie-oracle.py: no chromium on PATH (scripts/ensure-deps.sh test installs it)")
    origin = Origin()
    browser = None
    try:
        browser = _browser.Browser(binary, flags=[
            "--host-resolver-rules=MAP * 127.0.0.1", "--ignore-certificate-errors-spki-list=" + origin.spki,
            # Navigations stay on the scheme asked for (no automatic https upgrade of http pages).
            "--disable-features=HttpsUpgrades,HttpsFirstBalancedModeAutoEnable"],
            # Third-party cookies allowed (Settings > Third-party cookies > Allow), as an app that enables them in
            # its webview has them; Chromium as shipped blocks them.
            preferences={"profile": {"cookie_controls_mode": 0}} if third_party else None)
        browser.call("Network.enable")
        answers = (accept if arguments[0] == "accept" else send)(browser, origin, cases)
        json.dump({"browser": browser.version, "answers": answers}, sys.stdout)
    finally:
        if browser is not None:
            browser.close()
        origin.close()


if __name__ == "__main__":
    main()

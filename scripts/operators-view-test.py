#!/usr/bin/env python3
"""The operators' view tested against the real thing: a real Prometheus (Debian's `prometheus`) scrapes three live
`prefetch serve` processes (one on its memory store, two replicas sharing a real redis-server) with the admin token,
loads deploy/prometheus/prefetch-rules.yaml, and this script drives page opens against them through the test
upstream: hits (every page open's `ops.read` response is read), misses (reads of pages never opened), waste
(`ops.unread` is never read), an upstream failure (`ops.fail` answers 500) and a Redis outage (the redis-server is
killed while the replicas serve). Then, through Prometheus' HTTP API, it asserts that

- every recording rule returns series, with plausible values (ratios within 0..1, durations and rates >= 0);
- every query of every panel of deploy/grafana/prefetch.json returns series, with values within its unit's range
  (0..1 for a ratio, 0..100 for percent, >= 0 for the rest);
- every metric a rule or a panel names is one the service exports (what Prometheus scraped from it), or a
  recording rule that reads only such: a name the service does not export fails the test as soon as everything
  else holds, even where an `or` would hide it;
- the limits and the config version the service exports hold what it was started with: the store budget
  (`--store-bytes` on the memory replica, a non-default value; the local fallback's budget on the Redis
  replicas), the ticket and in-flight budgets, the numeric active version and its fingerprint on every replica
  (NaN for the candidate role, which no config holds), one distinct active version per job;
- the alerts of the injected faults reach `firing` (PrefetchWasteHigh, PrefetchUpstreamFailing for `ops.fail`,
  PrefetchStoreDegraded for both Redis replicas); no other alert ever fires, and at the end none is even pending
  (its condition holding).

For the test only, the rules are a rewritten copy: every `for:` is 5 s (the evaluation interval 1 s, scrapes every
second); expressions and thresholds are the file's own. No sleep decides an outcome: the script polls Prometheus
until every condition holds, and fails only at an overall deadline (120 s).

Usage: scripts/operators-view-test.py [--rules FILE] [--extra-query PROMQL]   (passes in about 15 s)
  PREFETCH_BIN_DIR  where `prefetch` and `prefetch-upstream` are (default .build/debug)
  --rules FILE      test another rule file in place of deploy/prometheus/prefetch-rules.yaml (a mutation)
  --extra-query Q   one more dashboard query to require series from (a mutation)
Needs prometheus, redis-server (Debian) and PyPI's PyYAML; everything listens on 127.0.0.1 on free ports and is
stopped at exit."""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
DEADLINE_SECONDS = 120
TOKEN = "operators-view-test-admin-token"
CONFIG_VERSION = "41"
# The memory replica's --store-bytes: not the default, so a budget ratio dividing by an assumed default shows.
MEMORY_STORE_BYTES = 48 * 1024 * 1024
# What the service's defaults make of the other limits (a Redis replica's local fallback store has 16 MiB).
EXPECTED_LIMITS = {
    "prefetch_store_budget_bytes": {"memory": MEMORY_STORE_BYTES, "replica-1": 16 << 20, "replica-2": 16 << 20},
    "prefetch_ticket_budget_bytes": {name: 16 << 20 for name in ("memory", "replica-1", "replica-2")},
    "prefetch_in_flight_budget_bytes": {name: 64 << 20 for name in ("memory", "replica-1", "replica-2")},
}
EXPECTED_FIRING = {
    ("PrefetchWasteHigh", ""),
    ("PrefetchUpstreamFailing", "ops.fail"),
    ("PrefetchStoreDegraded", "replica-1"),
    ("PrefetchStoreDegraded", "replica-2"),
}
processes = []
work = tempfile.mkdtemp(prefix="prefetch-operators-view-")


def log(message):
    print(f"operators-view-test: {message}", file=sys.stderr, flush=True)


def fail(message):
    log(f"FAILED: {message}")
    sys.exit(1)


def cleanup():
    for process in reversed(processes):
        if process.poll() is None:
            process.terminate()
    for process in reversed(processes):
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    shutil.rmtree(work, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(name, argv, env=None):
    out = open(os.path.join(work, f"{name}.out"), "w")
    process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                               cwd=work, start_new_session=True)
    processes.append(process)
    return process


def wait_for_line(name, process, pattern, seconds=60):
    """The first match of `pattern` in the process's output (polled until it appears, the process dies, or the
    time is up)."""
    path = os.path.join(work, f"{name}.out")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        match = re.search(pattern, open(path).read())
        if match:
            return match
        if process.poll() is not None:
            break
        time.sleep(0.05)
    fail(f"{name} did not print /{pattern}/:\n{open(path).read()[-3000:]}")


def try_http(method, url, body=None, headers=None):
    """`http` for the traffic: a refused or broken connection is a status of 0 (a replica whose store is being
    taken away keeps serving, but the traffic must not die with the one request that raced the shutdown)."""
    try:
        return http(method, url, body, headers)
    except (OSError, urllib.error.URLError) as error:
        return 0, str(error).encode()


def http(method, url, body=None, headers=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={
        **({"Content-Type": "application/json"} if data else {}), **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def prometheus_query(base, expr):
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    status, body = http("GET", url)
    answer = json.loads(body)
    if status != 200 or answer.get("status") != "success":
        fail(f"Prometheus refused the query {expr!r}: {answer.get('error', body[:300])}")
    return answer["data"]["result"]


def metric_names(expr, recorded):
    """The series names an expression reads: identifiers outside label matchers and strings that are not
    functions, keywords, label names or durations."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "{}", text)
    text = re.sub(r"\[[^\]]*\]", "[]", text)  # range and subquery durations
    text = re.sub(r"\$\w+", "", text)  # dashboard variables
    text = re.sub(r"\boffset\s+-?\w+", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        word = match.group(0)
        after = text[match.end():].lstrip()
        if after.startswith("("):
            continue  # a function or aggregation
        if word in ("and", "or", "unless", "bool", "by", "without", "group_left", "group_right", "inf", "nan", "le"):
            continue
        names.add(word)
    return names


def fnv1a32(text):
    """The 32-bit FNV-1a hash of `text`'s UTF-8 bytes: what prefetch_config_version_fingerprint exports."""
    value = 2166136261
    for byte in text.encode():
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value


def check_exported_values(base):
    """The limits and the config version, as Prometheus scraped them from each replica, against what the replicas
    were started with; a list of what differs."""
    wrong = []

    def by_replica(expr):
        return {s["metric"].get("replica", "?"): float(s["value"][1]) for s in prometheus_query(base, expr)}

    for name, expected in EXPECTED_LIMITS.items():
        got = by_replica(name)
        if got != {replica: float(value) for replica, value in expected.items()}:
            wrong.append(f"{name} is {got}, expected {expected}")
    in_flight = by_replica("prefetch_in_flight_bytes")
    if len(in_flight) != 3 or not all(0 <= v <= 64 << 20 for v in in_flight.values()):
        wrong.append(f"prefetch_in_flight_bytes is {in_flight}, expected one value in 0..64 MiB per replica")
    for name, active in (("prefetch_config_version", float(CONFIG_VERSION)),
                         ("prefetch_config_version_fingerprint", float(fnv1a32(CONFIG_VERSION)))):
        for role, expected in (("active", active), ("candidate", None)):
            got = by_replica(f'{name}{{config="{role}"}}')
            ok = len(got) == 3 and all((v != v) if expected is None else v == expected for v in got.values())
            if not ok:
                wrong.append(f"{name}{{config=\"{role}\"}} is {got}, expected {expected or 'NaN'} on each replica")
    versions = [float(s["value"][1]) for s in prometheus_query(base, "job:prefetch_config_active_versions:count")]
    if versions != [1.0]:
        wrong.append(f"job:prefetch_config_active_versions:count is {versions}, expected [1] (one job, one version)")
    return wrong


def exported(name, families, recorded):
    if ":" in name:
        return name in recorded
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in families:
            return True
    return name in families


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rules", default=os.path.join(ROOT, "deploy/prometheus/prefetch-rules.yaml"))
    parser.add_argument("--extra-query", action="append", default=[])
    options = parser.parse_args()
    began = time.monotonic()

    # Absolute: the processes run in the work directory.
    bins = os.path.abspath(os.environ.get("PREFETCH_BIN_DIR", os.path.join(ROOT, ".build/debug")))
    prefetch, upstream_bin = os.path.join(bins, "prefetch"), os.path.join(bins, "prefetch-upstream")
    for path in (prefetch, upstream_bin):
        if not os.access(path, os.X_OK):
            fail(f"{path} is missing: build it (swift build) or point PREFETCH_BIN_DIR at the binaries")
    for tool, package in (("prometheus", "prometheus"), ("redis-server", "redis-server"), ("redis-cli", "redis-tools")):
        if not shutil.which(tool):
            fail(f"{tool} is missing: apt-get install {package}")

    # The test upstream and the config: one page, three interfaces; `i` makes every page open fetch anew.
    upstream = start("upstream", [upstream_bin, "--port", "0"])
    upstream_url = "http://127.0.0.1:" + wait_for_line("upstream", upstream, r"listening on 127\.0\.0\.1:(\d+)").group(1)
    page = f"{upstream_url}/pages/ops"
    config = {"code": 200, "data": {"name": "prefetchConfig", "version": CONFIG_VERSION, "config": [{"url": page, "interfaces": [
        {"name": "ops.read", "api": f"{upstream_url}/ops/read?delay=20", "method": "GET", "urlParam": True,
         "params": ["i"], "ttl": 2, "timeout": 1000},
        {"name": "ops.unread", "api": f"{upstream_url}/ops/unread?delay=10", "method": "GET", "urlParam": True,
         "params": ["i"], "ttl": 2, "timeout": 1000},
        {"name": "ops.fail", "api": f"{upstream_url}/ops/fail?status=500", "method": "GET", "urlParam": True,
         "params": ["i"], "ttl": 2, "timeout": 1000},
    ]}]}}
    config_path = os.path.join(work, "prefetch.json")
    json.dump(config, open(config_path, "w"))

    redis_port = free_port()
    redis = start("redis", ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "no", "--dir", work])
    wait_for_line("redis", redis, r"Ready to accept connections")

    replicas = []
    for name, store in (("memory", None), ("replica-1", f"redis://127.0.0.1:{redis_port}/0"),
                        ("replica-2", f"redis://127.0.0.1:{redis_port}/0")):
        env = {"PREFETCH_ADMIN_TOKEN": TOKEN, "PREFETCH_IDENTITY_KEY": "operators-view-test-identity-key-0123456789"}
        if store:
            env["PREFETCH_STORE"] = store
        argv = [prefetch, "serve", "--config", config_path, "--port", "0", "--admin-port", "0", "--trigger-rate", "0",
                "--log-level", "warning"]
        if not store:
            argv += ["--store-bytes", str(MEMORY_STORE_BYTES)]
        process = start(name, argv, env)
        replicas.append({"name": name, "process": process})
    for replica in replicas:
        name, process = replica["name"], replica["process"]
        replica["page"] = "http://127.0.0.1:" + wait_for_line(name, process, r"prefetch listening on (?:http://)?127\.0\.0\.1:(\d+)").group(1)
        replica["admin"] = "127.0.0.1:" + wait_for_line(name, process, r"operator surface on (?:http://)?127\.0\.0\.1:(\d+)").group(1)

    # The service must answer /metrics with the admin token (as Prometheus will).
    status, _ = http("GET", f"http://{replicas[1]['admin']}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    if status != 200:
        fail(f"/metrics answered {status} with the admin token")

    # The rules as written, but every `for:` 5 s.
    rules = yaml.safe_load(open(options.rules))
    recorded = {}
    alerts = set()
    for group in rules["groups"]:
        group["interval"] = "1s"
        for rule in group["rules"]:
            if "record" in rule:
                recorded[rule["record"]] = rule["expr"]
            else:
                alerts.add(rule["alert"])
                if "for" in rule:
                    rule["for"] = "5s"
    rules_path = os.path.join(work, "rules.yaml")
    yaml.safe_dump(rules, open(rules_path, "w"), sort_keys=False)

    queries = [json.loads(line) for line in subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts/generate-monitoring.py"), "--queries"],
        check=True, capture_output=True, text=True).stdout.splitlines()]
    queries += [{"panel": "(extra)", "refId": "X", "expr": expr} for expr in options.extra_query]
    for query in queries:
        query["expr"] = (query["expr"].replace("$__rate_interval", "1m").replace("$namespace", ".*")
                         .replace("$job", ".*"))

    # Every series name a rule, an alert or a panel reads, by what reads it.
    readers = ([(f"rule {name}", f"rule {name}", expr) for name, expr in recorded.items()]
               + [(f"alert {r['alert']}", None, r["expr"]) for g in rules["groups"] for r in g["rules"] if "alert" in r]
               + [(f"panel {q['panel']!r} query {q['refId']}", f"panel {q['panel']} {q['refId']}", q["expr"])
                  for q in queries])

    def unknown_names(families):
        """What reads a name the service does not export (going by what Prometheus scraped from it), directly or
        through a recording rule that does."""
        found, broken = {}, set()
        while True:
            usable = {name: expr for name, expr in recorded.items() if name not in broken}
            for what, key, expr in readers:
                for name in sorted(metric_names(expr, recorded)):
                    if not exported(name, families, usable):
                        why = "which the service does not export" if name not in recorded else "a rule reading one"
                        message = f"{what} names {name}, {why}"
                        if message not in found.get(key, []):
                            found.setdefault(key, []).append(message)
            now_broken = {key[len("rule "):] for key in found if key and key.startswith("rule ")}
            if now_broken <= broken:
                return found
            broken |= now_broken

    prometheus_port = free_port()
    targets = [replica["admin"] for replica in replicas]
    scrape = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "rule_files": [rules_path],
              "scrape_configs": [{"job_name": "prefetch", "metrics_path": "/metrics",
                                  "authorization": {"type": "Bearer", "credentials": TOKEN},
                                  "static_configs": [{"targets": [t], "labels": {"replica": r["name"]}}
                                                     for t, r in zip(targets, replicas)]}]}
    # The replica label stands for the pod's name; the test names alerts' instances by it.
    prometheus_config = os.path.join(work, "prometheus.yml")
    yaml.safe_dump(scrape, open(prometheus_config, "w"))
    check = subprocess.run(["promtool", "check", "config", prometheus_config], capture_output=True, text=True)
    if check.returncode != 0:
        fail(f"promtool check config: {check.stdout}{check.stderr}")
    prometheus = start("prometheus", ["prometheus", f"--config.file={prometheus_config}",
                                      f"--storage.tsdb.path={os.path.join(work, 'tsdb')}",
                                      f"--web.listen-address=127.0.0.1:{prometheus_port}"])
    base = f"http://127.0.0.1:{prometheus_port}"
    wait_for_line("prometheus", prometheus, r"Server is ready to receive web requests")

    # Traffic: page opens on every replica, each reading its ops.read response on the replica that triggered it
    # (so a Redis outage keeps them hits); every fourth reading a page never opened (a miss).
    stop = threading.Event()
    counts = {"opens": 0, "reads": 0, "errors": 0}

    def drive(replica, offset):
        n = offset
        while not stop.is_set():
            n += 3
            status, body = try_http("POST", f"{replica['page']}/v1/prefetch", {"url": f"{page}?i={n}"})
            if not 200 <= status < 300:
                counts["errors"] += 1
                time.sleep(0.05)
                continue
            counts["opens"] += 1
            ticket = json.loads(body)["ticket"]
            # The page's first read may join the running fetch; every other page reads again (a hit).
            for _ in range(1 if n % 2 else 2):
                try_http("GET", f"{replica['page']}/v1/prefetch/{ticket}/data?name=ops.read&wait=2000")
                counts["reads"] += 1
            if n % 4 == 0:
                query = urllib.parse.urlencode({"page": f"{page}?i=never-{n}", "name": "ops.read"})
                try_http("GET", f"{replica['page']}/v1/data?{query}")
            # Once per replica, a refused page open (a page the config does not have) and a read from a foreign
            # origin: the refusal panels need series, and the refusal alerts must stay quiet.
            if n == offset + 3:
                try_http("POST", f"{replica['page']}/v1/prefetch", {"url": f"{upstream_url}/pages/unknown?i={n}"})
                query = urllib.parse.urlencode({"page": f"{page}?i={n}", "name": "ops.read"})
                try_http("GET", f"{replica['page']}/v1/data?{query}", headers={"Origin": "https://foreign.invalid"})
            time.sleep(0.1)

    threads = [threading.Thread(target=drive, args=(replica, index), daemon=True) for index, replica in enumerate(replicas)]
    for thread in threads:
        thread.start()

    # The Redis outage, once Prometheus has seen both replicas reach Redis.
    deadline = time.monotonic() + DEADLINE_SECONDS
    redis_down = False
    pending = {}
    unexpected = set()
    implausible, last_values = {}, {}
    try:
        while True:
            if time.monotonic() > deadline:
                fail(f"after {DEADLINE_SECONDS} s, still unmet:\n  " + "\n  ".join(pending.values()) +
                     f"\n(traffic: {counts})")
            pending = {}
            if not redis_down:
                up = prometheus_query(base, "prefetch_store_redis_up == 1")
                if len(up) == 2 and counts["opens"] > 30:
                    redis.terminate()
                    redis.wait()
                    redis_down = True
                    log(f"killed the redis-server under both replicas after {counts['opens']} page opens")
                else:
                    pending["redis"] = "both Redis replicas scraped up before the outage"
            for name, expr in recorded.items():
                result = prometheus_query(base, name)
                values = [float(s["value"][1]) for s in result]
                finite = [v for v in values if v == v and abs(v) != float("inf")]
                if not finite:
                    pending[f"rule {name}"] = f"recording rule {name} returns no series with a value ({len(values)} NaN or none)"
                    continue
                low, high = (0.0, 1.0) if "ratio" in name or "budget_use" in name else (0.0, float("inf"))
                wrong = [v for v in finite if not low <= v <= high]
                if wrong:
                    implausible[name] = f"recording rule {name} has implausible values {wrong} (expected {low}..{high})"
                else:
                    implausible.pop(name, None)
                    last_values[name] = finite
            for query in queries:
                key = f"panel {query['panel']} {query['refId']}"
                result = prometheus_query(base, query["expr"])
                values = [float(s["value"][1]) for s in result]
                finite = [v for v in values if v == v and abs(v) != float("inf")]
                if not finite:
                    pending[key] = (f"panel {query['panel']!r} query {query['refId']} returns no series with a value "
                                    f"({len(values)} NaN or none): {query['expr']}")
                    continue
                high = {"percentunit": 1.0, "percent": 100.0}.get(query.get("unit"), float("inf"))
                wrong = [v for v in finite if not 0 <= v <= high]
                if wrong:
                    implausible[key] = (f"panel {query['panel']!r} query {query['refId']} has implausible values "
                                        f"{wrong} (expected 0..{high}): {query['expr']}")
                else:
                    implausible.pop(key, None)
            status, body = http("GET", f"{base}/api/v1/alerts")
            firing = set()
            for alert in json.loads(body)["data"]["alerts"]:
                labels = alert["labels"]
                key = (labels["alertname"], labels.get("interface") or labels.get("replica", "")
                       if labels["alertname"] in ("PrefetchUpstreamFailing", "PrefetchStoreDegraded") else "")
                if alert["state"] != "firing":
                    # Pending: its condition holds now and only the shortened `for:` keeps it from firing. Once
                    # everything else holds, no alert but the expected may be even that.
                    if key not in EXPECTED_FIRING:
                        pending[f"quiet {key}"] = f"alert {key[0]} {key[1]} is pending: its condition holds"
                    continue
                firing.add(key)
                if key not in EXPECTED_FIRING and key not in unexpected:
                    unexpected.add(key)
                    log(f"unexpected alert firing: {labels}")
            if unexpected:
                fail(f"alerts fired that no injected fault explains: {sorted(unexpected)}")
            for key in EXPECTED_FIRING - firing:
                pending[f"alert {key}"] = f"alert {key[0]} {key[1]} not firing yet"
            status, body = http("GET", f"{base}/api/v1/label/__name__/values")
            families = set(json.loads(body)["data"])
            unknown = unknown_names(families)
            if not pending:
                if implausible:
                    fail("\n  " + "\n  ".join(implausible.values()))
                if unknown:  # a name an `or` or an `and` hid from the series checks
                    fail("\n  " + "\n  ".join(m for ms in unknown.values() for m in ms))
                wrong = check_exported_values(base)
                if wrong:
                    fail("\n  " + "\n  ".join(wrong))
                break
            # Everything else holds and what is still missing reads names the service does not export: those
            # will never come.
            if all(key in unknown for key in pending):
                fail("\n  " + "\n  ".join(m for key in pending for m in unknown[key]))
            time.sleep(0.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=15)
    silent = sorted(alerts - {name for name, _ in EXPECTED_FIRING})
    log(f"every recording rule ({len(recorded)}) and every panel query ({len(queries)}) returns series; firing: "
        f"{sorted(EXPECTED_FIRING)}; never fired: {', '.join(silent)}")
    for name, values in last_values.items():
        log(f"  {name} = {', '.join(f'{v:.4g}' for v in values)}")
    log(f"limits and config version as started: store budgets {EXPECTED_LIMITS['prefetch_store_budget_bytes']}, "
        f"version {CONFIG_VERSION} (fingerprint {fnv1a32(CONFIG_VERSION)}) on every replica")
    log(f"passed in {time.monotonic() - began:.0f} s ({counts['opens']} page opens, {counts['reads']} reads)")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        main()
    finally:
        cleanup()

#!/usr/bin/env python3
"""Soak load and judge for a running `prefetch serve` (started by scripts/soak.sh).

Sends a fixed rate of mixed operations (triggers of random users and random upstream faults, data reads by
ticket and by page, results, junk input, plan and metrics) over fresh connections, samples the process every
`--interval` seconds (RSS, open file descriptors, threads, store bytes from /metrics) and at the end judges
that each stayed flat: the maximum over the second half of the samples must not exceed the maximum over the
first half by more than `--tolerance` percent plus a small absolute slack. Also fails on any answer the API
does not document (any 5xx: an upstream's fault is a 404 miss; a dropped connection) and when /healthz is not 200 at the end.

Standard library only. Exit codes: 0 flat and healthy, 1 not flat or unhealthy, 2 usage.
"""
import argparse
import asyncio
import json
import os
import random
import sys
import time
import urllib.parse
from collections import Counter, deque

# Faults chosen per trigger through the page query (forwarded to the `fault` interface by urlParam).
FAULTS = [
    ("none", "", 40),
    ("fast", "delay=100", 10),
    ("timeout", "delay=900", 6),
    ("hang", "hang=1", 4),
    ("reset", "reset=50", 6),
    ("short", "short=50", 6),
    ("5xx", "status=503", 6),
    ("404", "status=404", 4),
    ("garbage", "garbage=1", 4),
    ("drip", "bytes=64&drip=30", 4),
    ("large", "bytes=100000", 4),
    ("no-store", "cacheControl=no-store", 4),
    ("too-large", "bytes=2200000", 2),
]
INTERFACES = ["ok", "post", "fault"]


async def request(port, method, target, headers=None, body=None, timeout=20.0):
    """One HTTP/1.1 request on a fresh connection (Connection: close); returns (status, body bytes)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        lines = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
        for name, value in (headers or {}).items():
            lines.append(f"{name}: {value}")
        payload = body or b""
        if body is not None:
            lines.append("Content-Type: application/json")
            lines.append(f"Content-Length: {len(payload)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(-1), timeout)
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except Exception:
            pass
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split(b" ")
    if len(status_line) < 2:
        raise ConnectionError(f"no HTTP answer: {data[:80]!r}")
    return int(status_line[1]), rest


class Load:
    def __init__(self, args, rng):
        self.args = args
        self.rng = rng
        self.statuses = Counter()
        self.kinds = Counter()
        self.unexpected = []
        self.tickets = deque(maxlen=500)
        self.in_flight = 0
        self.skipped = 0
        self.users = [f"sid=u{n}-{rng.randrange(1 << 30)}" for n in range(args.users)]

    def page(self):
        name, fault, _ = self.rng.choices(FAULTS, weights=[w for _, _, w in FAULTS])[0]
        query = f"i={self.rng.randrange(self.args.keys)}"
        if fault:
            query += "&" + fault
        return f"{self.args.page}?{query}"

    def record(self, kind, status, expected):
        self.statuses[status] += 1
        self.kinds[kind] += 1
        if status not in expected and len(self.unexpected) < 50:
            self.unexpected.append(f"{kind}: {status}")

    async def operation(self):
        port = self.args.port
        roll = self.rng.random()
        wait = self.rng.choice([0, 0, 200, 1000])
        data_ok = {200, 404, 403, 400}
        if roll < 0.35 or not self.tickets:
            user = self.rng.choice(self.users)
            page = self.page()
            body = json.dumps({"url": page, "headers": {"Cookie": user}}).encode()
            status, text = await request(port, "POST", "/v1/prefetch", body=body)
            self.record("trigger", status, {202})
            if status == 202:
                self.tickets.append((json.loads(text)["ticket"], page, user))
        elif roll < 0.65:
            ticket, _, user = self.rng.choice(self.tickets)
            name = self.rng.choice(INTERFACES)
            # A ticket triggered with credentials answers only the same credentials: without any, 401.
            if self.rng.random() < 0.5:
                status, _ = await request(port, "GET", f"/v1/prefetch/{ticket}/data?name={name}&wait={wait}", {"Cookie": user})
                self.record("ticket-data", status, data_ok | {404})
            else:
                # Only a ticket already gone may answer otherwise: 404 unknown-ticket. Any other 404 would mean
                # the access check let an anonymous reader through.
                status, text = await request(port, "GET", f"/v1/prefetch/{ticket}/data?name={name}&wait={wait}")
                if status == 404 and error_code(text) != "unknown-ticket":
                    status = f"404 {error_code(text)}"
                self.record("ticket-data-anonymous", status, {401, 404})
        elif roll < 0.80:
            _, page, user = self.rng.choice(self.tickets)
            name = self.rng.choice(INTERFACES)
            target = f"/v1/data?page={urllib.parse.quote(page, safe='')}&name={name}&wait={wait}"
            status, _ = await request(port, "GET", target, {"Cookie": user})
            self.record("page-data", status, data_ok)
        elif roll < 0.90:
            ticket, _, user = self.rng.choice(self.tickets)
            status, _ = await request(port, "GET", f"/v1/prefetch/{ticket}?wait={wait}", {"Cookie": user})
            self.record("results", status, {200, 404})
        elif roll < 0.95:
            junk = self.rng.choice([
                ("POST", "/v1/prefetch", b'{"url": '),
                ("POST", "/v1/prefetch", b"[" * 5000),
                ("GET", "/v1/prefetch/AAAAAAAAAAAAAAAAAAAAAA/data?name=ok", None),
                ("GET", "/v1/data?page=%0d%0a&name=ok&wait=-5", None),
                ("GET", "/v1/plan?url=http%3A%2F%2Fevil%40127.0.0.1%2F", None),
                ("GET", "/v1/prefetch/x?wait=99999999999999999999", None),
            ])
            status, _ = await request(port, junk[0], junk[1], body=junk[2])
            self.record("junk", status, {400, 404, 413})
        else:
            # /healthz is on the page surface; /metrics and /v1/plan on the operator surface.
            target = self.rng.choice(["/healthz", "/metrics", f"/v1/plan?url={urllib.parse.quote(self.page(), safe='')}"])
            status, _ = await request(port if target == "/healthz" else self.args.admin_port, "GET", target)
            self.record("ops", status, {200})

    async def guarded(self):
        self.in_flight += 1
        try:
            await self.operation()
        except Exception as error:  # a dropped connection or a hung answer is a failure of the service
            self.statuses["error"] += 1
            if len(self.unexpected) < 50:
                self.unexpected.append(f"connection: {type(error).__name__}: {error}")
        finally:
            self.in_flight -= 1

    async def run(self, deadline):
        interval = 1.0 / self.args.rate
        next_at = time.monotonic()
        tasks = set()
        while time.monotonic() < deadline:
            if self.in_flight < self.args.max_in_flight:
                task = asyncio.create_task(self.guarded())
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            else:
                self.skipped += 1
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                next_at = time.monotonic()
        if tasks:
            await asyncio.wait(tasks, timeout=30)


def error_code(body):
    """The `error` code of a JSON error body, or None."""
    try:
        return json.loads(body).get("error")
    except (ValueError, AttributeError):
        return None


def proc_sample(pid):
    with open(f"/proc/{pid}/status") as status:
        rss = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
    return rss, len(os.listdir(f"/proc/{pid}/fd")), len(os.listdir(f"/proc/{pid}/task"))


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


async def sampler(args, load, start, deadline, samples):
    while True:
        now = time.monotonic()
        rss, fds, threads = proc_sample(args.pid)
        try:
            status, body = await request(args.admin_port, "GET", "/metrics")
            store = metric(body.decode(), "prefetch_store_bytes") if status == 200 else None
        except Exception:
            store = None
        sample = {
            "t": round(now - start), "rss_kib": rss // 1024, "fds": fds, "threads": threads,
            "store_bytes": int(store) if store is not None else -1,
            "ops": sum(load.kinds.values()), "errors": load.statuses["error"], "in_flight": load.in_flight,
            "load1": os.getloadavg()[0],
        }
        samples.append(sample)
        print("\t".join(str(sample[k]) for k in COLUMNS), flush=True)
        if now >= deadline:
            return
        await asyncio.sleep(min(args.interval, max(0.0, deadline - time.monotonic())))


COLUMNS = ["t", "rss_kib", "fds", "threads", "store_bytes", "ops", "errors", "in_flight", "load1"]
# Absolute slack per metric on top of the relative tolerance: small counts jitter by a few, and the store's
# bytes move by whole responses (up to 100 KB each here), so they get a tenth of the budget.
SLACK = {"rss_kib": 8 * 1024, "fds": 16, "threads": 4}


def judge(samples, tolerance, budget):
    slack = dict(SLACK, store_bytes=max(256 * 1024, budget // 10))
    problems = []
    if len(samples) < 4:
        return [f"only {len(samples)} samples: run longer than 2 intervals"]
    # The first sample is the idle process before any load; judge the samples taken under load.
    loaded = samples[1:]
    half = len(loaded) // 2
    first, second = loaded[:half], loaded[half:]
    for key in ["rss_kib", "fds", "threads", "store_bytes"]:
        before = max(s[key] for s in first)
        after = max(s[key] for s in second)
        limit = before * (1 + tolerance / 100) + slack[key]
        verdict = "flat" if after <= limit else "GROWING"
        print(f"{key}: first-half max {before}, second-half max {after}, limit {int(limit)}: {verdict}")
        if after > limit:
            problems.append(f"{key} grew: {before} -> {after} (limit {int(limit)})")
    return problems


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True, help="the page surface")
    parser.add_argument("--admin-port", type=int, default=8081, help="the operator surface (/metrics, /v1/plan)")
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--page", required=True, help="the soak page URL (its query picks the fault)")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--rate", type=float, default=40, help="operations per second")
    parser.add_argument("--interval", type=float, default=30, help="seconds between samples")
    parser.add_argument("--tolerance", type=float, default=10, help="percent growth allowed")
    parser.add_argument("--budget", type=int, required=True, help="the store byte budget")
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--keys", type=int, default=3000, help="distinct page queries")
    parser.add_argument("--max-in-flight", type=int, default=200)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", default=None, help="write the samples and summary here")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    rng = random.Random(seed)
    print(f"soak: {args.minutes} min at {args.rate} ops/s, sample every {args.interval} s, seed {seed}", flush=True)
    print("\t".join(COLUMNS), flush=True)

    load = Load(args, rng)
    samples = []
    start = time.monotonic()
    deadline = start + args.minutes * 60
    await asyncio.gather(sampler(args, load, start, deadline, samples), load.run(deadline))
    # The answers of the last operations are in: take a final sample after they settle.
    await asyncio.sleep(1)

    print(f"operations: {dict(load.kinds)}")
    print(f"statuses: {dict(sorted(load.statuses.items(), key=str))}; skipped (over {args.max_in_flight} in flight): {load.skipped}")
    problems = judge(samples, args.tolerance, args.budget)
    if load.unexpected:
        problems.append(f"{len(load.unexpected)}+ undocumented answers, first: {load.unexpected[:10]}")
    over = [s for s in samples if s["store_bytes"] > args.budget]
    if over:
        problems.append(f"store bytes over the budget {args.budget}: {over[:3]}")
    try:
        health, _ = await request(args.port, "GET", "/healthz")
    except Exception as error:
        health = f"error {error}"
    if health != 200:
        problems.append(f"/healthz answered {health} after the soak")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"seed": seed, "samples": samples, "statuses": {str(k): v for k, v in load.statuses.items()},
                       "operations": dict(load.kinds), "problems": problems}, out, indent=1)
    if problems:
        print("soak: FAILED", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    print("soak: RSS, file descriptors, threads and store bytes stayed flat; the service is healthy")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

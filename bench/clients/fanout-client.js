// Load client for the fan-out benchmark: keeps CONCURRENCY page opens in flight and times each from the
// trigger until all of the page's results are settled. The same client drives every target.
//
// Usage: node fanout-client.js MODE TARGET CONCURRENCY WARMUP PAGES PIDS [RUN_ID] [DELAY_MS] [PAGE_PREFIX]
//   MODE service  POST TARGET/v1/prefetch {"url": "PAGE_PREFIX + ID"} (default https://bench.example.com/fan/), then
//                 GET TARGET/v1/prefetch/{ticket}?wait=10000 (answers once all results are settled); TARGET may be
//                 comma-separated service replicas: page ID then opens on replica ID mod their count, trigger and
//                 read alike, as a round-robin balancer with affinity per page open would send it
//   MODE bff      GET TARGET/page?n=ID (answers once Promise.all settled)
//   MODE direct   the client itself fires the page's requests at the upstream bases (TARGET: comma-separated
//                 base URLs) with Promise.all: the floor, with no hop in between
//   PIDS          comma-separated name=pid whose CPU (utime+stime from /proc) and context switches (voluntary +
//                 nonvoluntary, summed over /proc/PID/task/*/status) are measured over the timed pages
// Prints one JSON object with client-side total and overhead (total - DELAY_MS) percentiles, server-side settle
// percentiles where the target reports them, CPU seconds and context switches per process, and errors.
"use strict";
const http = require("node:http");
const fs = require("node:fs");

const [mode, target, concurrencyText, warmupText, pagesText, pidsText, runIdText, delayText, pagePrefixText] = process.argv.slice(2);
const pagePrefix = pagePrefixText || "https://bench.example.com/fan/";
const concurrency = Number(concurrencyText);
const warmup = Number(warmupText);
const pages = Number(pagesText);
const runId = Number(runIdText || 1);
const delay = Number(delayText || 50);
const interfaces = 8;
const pids = (pidsText || "").split(",").filter(Boolean).map((p) => p.split("="));
const ticks = 100; // CLK_TCK on Linux

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 4096 });

function request(method, url, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers: body ? { "Content-Type": "application/json" } : {} }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

function cpu(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / ticks;
}

// Context switches so far of each thread of a process: tid -> [voluntary, nonvoluntary, name]. The name is the
// thread's comm with its digits dropped, so the threads of a pool count together (NIO-ELT-0-#0 and NIO-ELT-0-#1 as
// NIO-ELT--#).
function threadSwitches(pid) {
  const threads = new Map();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    let status;
    try {
      status = fs.readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8");
    } catch {
      continue; // the thread exited while the directory was read
    }
    const field = (name) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(status)[1]);
    const name = (/^Name:\s+(.*)$/m.exec(status)?.[1] ?? "?").replace(/[0-9]+/g, "");
    threads.set(tid, [field("voluntary_ctxt_switches"), field("nonvoluntary_ctxt_switches"), name]);
  }
  return threads;
}

// The switches between two snapshots. A thread that exited in between takes its switches with it (counted in
// threadsGone, so an undercount shows); a thread started in between counts from zero.
function switchesBetween(before, after) {
  let voluntary = 0, nonvoluntary = 0;
  const byThread = {};
  for (const [tid, [v, n, name]] of after) {
    const [v0, n0] = before.get(tid) ?? [0, 0];
    voluntary += v - v0;
    nonvoluntary += n - n0;
    const entry = (byThread[name] ??= { voluntary: 0, nonvoluntary: 0, threads: 0 });
    entry.voluntary += v - v0;
    entry.nonvoluntary += n - n0;
    entry.threads += 1;
  }
  const threadsGone = [...before.keys()].filter((tid) => !after.has(tid)).length;
  return { voluntary, nonvoluntary, total: voluntary + nonvoluntary, threads: after.size, threadsGone, byThread };
}

// One page open; returns { total, settle } in ms (settle: server-side, or null).
async function open(id) {
  const started = process.hrtime.bigint();
  let settle = null;
  if (mode === "service") {
    const replicas = target.split(",");
    const replica = replicas[id % replicas.length];
    const trigger = await request("POST", `${replica}/v1/prefetch`, JSON.stringify({ url: `${pagePrefix}${id}` }));
    if (trigger.status !== 202) throw new Error(`trigger on ${replica} answered ${trigger.status}: ${trigger.text.slice(0, 200)}`);
    const ticket = JSON.parse(trigger.text).ticket;
    const read = await request("GET", `${replica}/v1/prefetch/${ticket}?wait=10000`);
    const results = JSON.parse(read.text).results;
    if (results.length !== interfaces) throw new Error(`expected ${interfaces} results, got ${results.length}`);
    for (const r of results) {
      if (r.state !== "ready" || r.status !== 200) throw new Error(`result ${r.name}: ${r.state} ${r.status} ${r.error}`);
    }
    // Server-side: the slowest request's elapsedMs (whole milliseconds, truncated by the service).
    settle = Math.max(...results.map((r) => r.elapsedMs));
  } else if (mode === "bff") {
    const read = await request("GET", `${target}/page?n=${id}`);
    if (read.status !== 200) throw new Error(`bff answered ${read.status}`);
    const results = JSON.parse(read.text).results;
    for (const r of results) if (r.status !== 200) throw new Error(`bff result ${r.status} ${r.error}`);
    settle = Number(/dur=([0-9.]+)/.exec(read.headers["server-timing"])[1]);
  } else {
    const bases = target.split(",");
    const results = await Promise.all(bases.map((b) => request("GET", `${b}&n=${id}`)));
    for (const r of results) {
      if (r.status !== 200) throw new Error(`upstream answered ${r.status}`);
      JSON.parse(r.text);
    }
  }
  return { total: Number(process.hrtime.bigint() - started) / 1e6, settle };
}

async function run(count, base, samples) {
  let next = 0;
  let errors = 0;
  const firstError = [];
  async function worker() {
    while (next < count) {
      const id = base + next++;
      try {
        const s = await open(id);
        if (samples) samples.push(s);
      } catch (e) {
        errors++;
        if (firstError.length === 0) firstError.push(String(e));
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { errors, firstError: firstError[0] };
}

function pct(sorted, q) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

function summary(values) {
  const s = [...values].sort((a, b) => a - b);
  const r = (v) => (v === null ? null : Math.round(v * 1000) / 1000);
  return { p50: r(pct(s, 0.5)), p90: r(pct(s, 0.9)), p99: r(pct(s, 0.99)), max: r(s[s.length - 1]) };
}

(async () => {
  const base = runId * 10_000_000;
  const warm = await run(warmup, base, null);
  // A target that fails more than 1% of its warm-up pages is misconfigured; rarer failures are the target's own
  // and are counted in the measured run's errors.
  if (warm.errors > warmup / 100) throw new Error(`warm-up errors: ${warm.errors} (${warm.firstError})`);
  const switchesBefore = Object.fromEntries(pids.map(([name, pid]) => [name, threadSwitches(pid)]));
  const before = Object.fromEntries(pids.map(([name, pid]) => [name, cpu(pid)]));
  const samples = [];
  const started = process.hrtime.bigint();
  const measured = await run(pages, base + warmup, samples);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const after = Object.fromEntries(pids.map(([name, pid]) => [name, cpu(pid)]));
  const contextSwitches = Object.fromEntries(
    pids.map(([name, pid]) => [name, switchesBetween(switchesBefore[name], threadSwitches(pid))]),
  );
  const cpuSeconds = Object.fromEntries(pids.map(([name]) => [name, Math.round((after[name] - before[name]) * 100) / 100]));
  const settles = samples.map((s) => s.settle).filter((v) => v !== null);
  console.log(JSON.stringify({
    mode,
    concurrency,
    pages: samples.length,
    upstreamRequests: samples.length * interfaces,
    seconds: Math.round(seconds * 100) / 100,
    pagesPerSecond: Math.round(samples.length / seconds),
    totalMs: summary(samples.map((s) => s.total)),
    overheadMs: summary(samples.map((s) => s.total - delay)),
    serverSettleOverheadMs: settles.length ? summary(settles.map((v) => v - delay)) : null,
    cpuSeconds,
    contextSwitches,
    errors: measured.errors,
    firstError: measured.firstError ?? null,
  }));
})().catch((e) => {
  console.error(String(e.stack || e));
  process.exit(1);
});

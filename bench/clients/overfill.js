// Load client for the memory benchmark: opens distinct pages (CONCURRENCY at a time) until TARGET_BYTES of
// upstream responses have been fetched, reading every response back through the data endpoint as the page
// would. Samples the service's RSS (/proc/PID/status) and `prefetch_store_bytes` (/metrics) while it runs.
//
// Usage: node overfill.js SERVICE_URL ADMIN_URL PID CONCURRENCY TARGET_BYTES FIRST_PAGE SIZES
//   SERVICE_URL  the page surface (triggers and reads); ADMIN_URL the operator surface (/metrics)
//   SIZES  comma-separated body sizes of the page's interfaces, in config order (named s0, s1, ...)
// Prints one JSON object.
"use strict";
const http = require("node:http");
const fs = require("node:fs");

const [service, admin, pid, concurrencyText, targetText, firstText, sizesText] = process.argv.slice(2);
const concurrency = Number(concurrencyText);
const target = Number(targetText);
const first = Number(firstText);
const sizes = sizesText.split(",").map(Number);
const perPage = sizes.reduce((a, b) => a + b, 0);
const pages = Math.ceil(target / perPage);
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

function request(method, url, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers: body ? { "Content-Type": "application/json" } : {} }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

function statusKiB(field) {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m[1]);
}

async function storeMetrics() {
  const answer = await request("GET", `${admin}/metrics`);
  if (answer.status !== 200) throw new Error(`GET ${admin}/metrics answered ${answer.status}`);
  const text = answer.body.toString("utf8");
  const value = (name) => {
    const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+]+)$`, "m").exec(text);
    return m ? Number(m[1]) : null;
  };
  return { bytes: value("prefetch_store_bytes"), entries: value("prefetch_store_entries"), evictions: value("prefetch_store_evictions_total") };
}

(async () => {
  let maxRss = 0;
  let maxStore = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      maxRss = Math.max(maxRss, statusKiB("VmRSS"));
      const m = await storeMetrics();
      maxStore = Math.max(maxStore, m.bytes ?? 0);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  let next = 0;
  let fetched = 0;
  let errors = 0;
  let firstError = null;
  async function worker() {
    while (next < pages) {
      const id = first + next++;
      try {
        const trigger = await request("POST", `${service}/v1/prefetch`, JSON.stringify({ url: `https://bench.example.com/mem/${id}` }));
        if (trigger.status !== 202) throw new Error(`trigger ${trigger.status}`);
        const ticket = JSON.parse(trigger.body).ticket;
        const reads = await Promise.all(sizes.map((_, k) => request("GET", `${service}/v1/prefetch/${ticket}/data?name=s${k}&wait=10000`)));
        reads.forEach((r, k) => {
          if (r.status !== 200 || r.body.length !== sizes[k]) throw new Error(`s${k}: ${r.status}, ${r.body.length} bytes`);
          fetched += r.body.length;
        });
      } catch (e) {
        errors++;
        firstError ??= String(e);
      }
    }
  }
  const started = Date.now();
  await Promise.all(Array.from({ length: concurrency }, worker));
  sampling = false;
  await sampler;
  const end = await storeMetrics();
  console.log(JSON.stringify({
    pages, perPageBytes: perPage, fetchedBytes: fetched, seconds: (Date.now() - started) / 1000,
    maxSampledRssKiB: maxRss, vmHWMKiB: statusKiB("VmHWM"), vmRSSKiB: statusKiB("VmRSS"),
    maxSampledStoreBytes: maxStore, storeBytes: end.bytes, storeEntries: end.entries, evictions: end.evictions,
    errors, firstError,
  }));
})().catch((e) => {
  console.error(String(e.stack || e));
  process.exit(1);
});

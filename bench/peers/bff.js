// Fan-out peer: a Node.js backend-for-frontend that does what the service does for one page open, the way a
// competent team would write it: fire the page's 8 upstream requests at once, Promise.all, keep-alive
// connections, parse each JSON body and answer one aggregated JSON document.
//
// Usage: node bff.js UPSTREAM_BASES [fetch|http]
//   UPSTREAM_BASES  comma-separated base URLs, one per interface (`http://127.0.0.1:PORT/i0?delay=50`, ...)
//   fetch           built-in fetch (undici) on a keep-alive dispatcher (Node's default global Agent keeps
//                   connections alive, no per-origin connection limit)
//   http            node:http with an http.Agent({ keepAlive: true }) (no per-origin socket limit)
// GET /page?n=ID fans out to every base with `&n=ID` appended and answers when all settled. The time from the
// first request to the last settlement is in `Server-Timing: settle;dur=MS`.
// Prints `listening on 127.0.0.1:PORT`.
"use strict";
const http = require("node:http");

const bases = process.argv[2].split(",");
const mode = process.argv[3] || "fetch";
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 1024 });

function getWithHttp(url) {
  return new Promise((resolve) => {
    const req = http.get(url, { agent }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        resolve({ status: res.statusCode, body: JSON.parse(text) });
      });
      res.on("error", (e) => resolve({ status: 0, error: String(e) }));
    });
    req.on("error", (e) => resolve({ status: 0, error: String(e) }));
  });
}

async function getWithFetch(url) {
  try {
    const res = await fetch(url);
    return { status: res.status, body: await res.json() };
  } catch (e) {
    return { status: 0, error: String(e) };
  }
}

const get = mode === "http" ? getWithHttp : getWithFetch;

const server = http.createServer(async (req, res) => {
  const mark = req.url.indexOf("?");
  const n = mark < 0 ? null : new URLSearchParams(req.url.slice(mark + 1)).get("n");
  if (!req.url.startsWith("/page") || n === null) {
    res.writeHead(404).end();
    return;
  }
  const started = process.hrtime.bigint();
  const results = await Promise.all(bases.map((base) => get(`${base}&n=${encodeURIComponent(n)}`)));
  const settle = Number(process.hrtime.bigint() - started) / 1e6;
  const body = JSON.stringify({ page: n, results });
  res.writeHead(200, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(body),
    "Server-Timing": `settle;dur=${settle.toFixed(3)}`,
  });
  res.end(body);
});
server.keepAliveTimeout = 65_000;
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`listening on 127.0.0.1:${server.address().port}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));

// Handoff peer: a Node.js `http` server answering stored responses from a Map, the way a team would
// hand prefetched data to a page without this service. One process (Node's usual deployment unit per
// core). Keys are `ticket + "\n" + api`, like the service's ticket data endpoint.
//
// Usage: node map-server.js BODY_FILE TICKET API   (prints `listening on 127.0.0.1:PORT`)
"use strict";
const http = require("node:http");
const fs = require("node:fs");

const [bodyFile, ticket, api] = process.argv.slice(2);
const store = new Map();
store.set(ticket + "\n" + api, {
  body: fs.readFileSync(bodyFile),
  headers: { "Content-Type": "application/json" },
});

const prefix = "/v1/prefetch/";
const server = http.createServer((req, res) => {
  const url = req.url;
  const mark = url.indexOf("?");
  const path = mark < 0 ? url : url.slice(0, mark);
  // /v1/prefetch/{ticket}/data?api=...
  if (!path.startsWith(prefix) || !path.endsWith("/data")) {
    res.writeHead(404).end();
    return;
  }
  const id = path.slice(prefix.length, path.length - 5);
  const wanted = mark < 0 ? null : new URLSearchParams(url.slice(mark + 1)).get("api");
  const entry = store.get(id + "\n" + wanted);
  if (entry === undefined) {
    res.writeHead(404, { "X-Prefetch-Reason": "not-triggered" }).end();
    return;
  }
  res.writeHead(200, {
    ...entry.headers,
    "Content-Length": entry.body.length,
    "X-Prefetch": "hit",
  });
  res.end(entry.body);
});
server.keepAliveTimeout = 65_000;
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`listening on 127.0.0.1:${server.address().port}\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));

// Generates the planning benchmark's config and page list, deterministically.
//
// Usage: node gen-config.js PAGES CONFIG_OUT PAGES_OUT
// The config has PAGES entries across 20 hosts: 70% exact pages, 20% `{id}` capture patterns (half with a
// literal suffix, `{id}.html`), 10% `*` patterns; 2-4 interfaces each, mixing GET/POST, urlParam, bodyParam,
// bodies and params allow-lists. The page list holds 4,000 page URLs with queries: 60% exact pages, 25% capture
// pages, 10% `*` pages, 5% pages no entry matches. Each line is `KIND<TAB>URL`.
"use strict";
const fs = require("node:fs");

const [countText, configOut, pagesOut] = process.argv.slice(2);
const count = Number(countText);
let seed = 42;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const pick = (n) => Math.floor(rand() * n);

const hosts = Array.from({ length: 20 }, (_, h) => `m${h}.example.com`);
const entries = [];
const exact = [];
const captures = [];
const stars = [];
for (let i = 0; i < count; i++) {
  const host = hosts[i % hosts.length];
  const r = i % 10;
  let url;
  if (r < 7) {
    url = `https://${host}/act/${i}/index.html`;
    exact.push(url);
  } else if (r < 9) {
    url = i % 2 ? `https://${host}/cat${i}/item/{id}.html` : `https://${host}/cat${i}/item/{id}`;
    captures.push(url);
  } else {
    url = `https://${host}/shop${i}/*/detail`;
    stars.push(url);
  }
  const interfaces = [];
  const n = 2 + (i % 3);
  for (let k = 0; k < n; k++) {
    const api = `https://api${k}.example.com/v${1 + (k % 2)}/page${i}/data${k}.json`;
    const iface = { api, method: k % 2 ? "POST" : "GET", urlParam: true };
    if (k % 2) {
      iface.bodyParam = true;
      iface.body = { cityId: 123456, visitRecord: {} };
    }
    if (k === 3) iface.params = ["id", "itemId"];
    interfaces.push(iface);
  }
  entries.push({ url, interfaces });
}
fs.writeFileSync(configOut, JSON.stringify({ code: 200, data: { name: "bench-planning", version: "1", config: entries } }));

const lines = [];
const query = () => `?id=${pick(100000)}&itemId=${pick(1000)}&from=push&utm_source=app`;
for (let j = 0; j < 4000; j++) {
  const r = j % 20;
  if (r < 12) {
    lines.push(`exact\t${exact[pick(exact.length)]}${query()}`);
  } else if (r < 17) {
    const p = captures[pick(captures.length)];
    lines.push(`capture\t${p.replace("{id}", String(pick(1000000)))}${query()}`);
  } else if (r < 19) {
    const p = stars[pick(stars.length)];
    lines.push(`star\t${p.replace("*", "s" + pick(1000))}${query()}`);
  } else {
    lines.push(`miss\thttps://${hosts[pick(20)]}/nowhere/${pick(100000)}/index.html${query()}`);
  }
}
fs.writeFileSync(pagesOut, lines.join("\n") + "\n");

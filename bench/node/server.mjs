// The Node.js comparator: the five workloads on node:http, with node:crypto for the token and
// sharp (libvips) for the image. Started by `edgegate bench`; settings come from:
//   EDGEGATE_BENCH_PORT      the loopback port to listen on
//   EDGEGATE_BENCH_SECRET    the HS256 secret
//   EDGEGATE_BENCH_PROFILES  a JSON file of { key: value } for the db-lookup store
//   EDGEGATE_BENCH_CATALOG   the json-transform catalog, KV seed lines (NDJSON)
//   EDGEGATE_BENCH_TLS_PORT, EDGEGATE_BENCH_TLS_CERT, EDGEGATE_BENCH_TLS_KEY
//                            optional: serve the same over node:https on that port, with that
//                            certificate chain and key (PEM files)
//
// GET /__lab/gc answers with the garbage-collection pauses since the last such request, as V8
// reported them to perf_hooks: { count, major, total_ms, max_ms }.
import http from 'node:http';
import https from 'node:https';
import { readFileSync } from 'node:fs';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import sharp from 'sharp';
import { makeApp } from './workloads.mjs';

let gc = { count: 0, major: 0, total_ms: 0, max_ms: 0 };
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    gc.count += 1;
    if (entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) gc.major += 1;
    gc.total_ms += entry.duration;
    gc.max_ms = Math.max(gc.max_ms, entry.duration);
  }
}).observe({ entryTypes: ['gc'] });

// No result cache: every request does its own work, as in the other runtimes.
sharp.cache(false);

const handle = makeApp({
  secret: process.env.EDGEGATE_BENCH_SECRET,
  profiles: JSON.parse(readFileSync(process.env.EDGEGATE_BENCH_PROFILES, 'utf8')),
  catalog: readFileSync(process.env.EDGEGATE_BENCH_CATALOG, 'utf8'),
  resize: (jpeg) =>
    sharp(jpeg).resize(640, 480, { fit: 'fill', kernel: 'linear' }).jpeg({ quality: 80 }).toBuffer(),
});

const serve = (req, res) => {
  if (req.url === '/__lab/gc') {
    const out = JSON.stringify(gc);
    gc = { count: 0, major: 0, total_ms: 0, max_ms: 0 };
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': out.length });
    res.end(out);
    return;
  }
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', async () => {
    const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    const r = await handle(req.method, req.url, req.headers.authorization, body);
    const out = typeof r.body === 'string' ? Buffer.from(r.body) : r.body;
    res.writeHead(r.status, { 'content-type': r.type, 'content-length': out.length });
    res.end(out);
  });
};
const server = http.createServer(serve);
server.keepAliveTimeout = 60_000;
if (process.env.EDGEGATE_BENCH_TLS_PORT) {
  // node:https resumes sessions by ticket (TLS 1.3 and 1.2) and by id, as it does by default.
  const tls = https.createServer(
    {
      cert: readFileSync(process.env.EDGEGATE_BENCH_TLS_CERT),
      key: readFileSync(process.env.EDGEGATE_BENCH_TLS_KEY),
      ALPNProtocols: ['http/1.1'],
    },
    serve,
  );
  tls.keepAliveTimeout = 60_000;
  tls.listen(Number(process.env.EDGEGATE_BENCH_TLS_PORT), '127.0.0.1');
}
const port = Number(process.env.EDGEGATE_BENCH_PORT || 0);
server.listen(port, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});

// The workerd comparator: the five workloads as a module worker, on Cloudflare's open-source
// V8 isolate runtime. The same logic as the Node.js server (workloads.mjs); the image is
// resized in pure JavaScript (resize-js.mjs), as workerd has no native image library.
import { makeApp } from './workloads.mjs';
import { resize } from './resize-js.mjs';
import profiles from './profiles.json';
import catalog from './catalog.ndjson';

let handle;

export default {
  async fetch(request, env) {
    handle ??= makeApp({ secret: env.SECRET, profiles, catalog, resize });
    const url = new URL(request.url);
    const body = new Uint8Array(await request.arrayBuffer());
    const r = await handle(request.method, url.pathname, request.headers.get('authorization'), body);
    return new Response(r.status === 204 ? null : r.body, { status: r.status, headers: { 'content-type': r.type } });
  },
};

// The five workloads, as plain JavaScript shared by the Node.js server (server.mjs) and the
// workerd module worker (worker.mjs): the same logic, and the same answers, as edgegate's
// workers and the native Rust server (see crates/bench/src/workload.rs).
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Buffer } from 'node:buffer';

export const ISSUER = 'edgegate-bench';
const ROUTES = ['service-a', 'service-b'];
const LEEWAY = 60;
const MAX_TOKEN = 8192;

// As the json-transform worker (workers/json-transform/src/order.rs).
const MAX_ITEMS = 64;
const MAX_SKU = 64;

const json = (status, value) => ({ status, type: 'application/json', body: JSON.stringify(value) });
const text = (body) => Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');

// The json-transform catalog, from KV seed lines ({"key": SKU, "value": product}): a Map of
// objects, kept in the heap as a Node.js service would keep it.
function loadCatalog(ndjson) {
  const catalog = new Map();
  for (const line of ndjson.split('\n')) {
    if (line) {
      const { key, value } = JSON.parse(line);
      catalog.set(key, value);
    }
  }
  return catalog;
}

// makeApp({ secret, profiles, catalog, resize }) → handle(method, path, authorization, body)
//   profiles: { key: value-as-string }; catalog: NDJSON text; resize: async (Uint8Array) →
//   Uint8Array (a JPEG). handle returns { status, type, body }, body a string or a Uint8Array.
export function makeApp({ secret, profiles, catalog: catalogText, resize }) {
  const store = new Map(Object.entries(profiles));
  const catalog = loadCatalog(catalogText);
  const key = Buffer.from(secret);

  function verify(token) {
    if (token.length > MAX_TOKEN) return null;
    const parts = token.split('.');
    if (parts.length !== 3) return null;
    const [h, p, s] = parts;
    let header;
    try {
      header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8'));
    } catch {
      return null;
    }
    if (header === null || typeof header !== 'object' || header.alg !== 'HS256') return null;
    const expected = createHmac('sha256', key).update(`${h}.${p}`).digest();
    const given = Buffer.from(s, 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
    let claims;
    try {
      claims = JSON.parse(Buffer.from(p, 'base64url').toString('utf8'));
    } catch {
      return null;
    }
    if (claims === null || typeof claims !== 'object') return null;
    const now = Date.now() / 1000;
    if (typeof claims.exp !== 'number' || now > claims.exp + LEEWAY) return null;
    if (claims.nbf !== undefined && (typeof claims.nbf !== 'number' || now + LEEWAY < claims.nbf)) return null;
    if (claims.iss !== ISSUER || claims.sub === undefined) return null;
    return claims;
  }

  function auth(authorization) {
    const token = authorization && authorization.startsWith('Bearer ') ? authorization.slice(7) : '';
    const claims = verify(token);
    if (!claims) return json(401, { error: 'invalid_token' });
    const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
    const upstream = audiences.find((a) => ROUTES.includes(a));
    if (!upstream) return json(403, { error: 'unknown_audience' });
    const set = {};
    if (typeof claims.sub === 'string') set['x-jwt-sub'] = claims.sub;
    if (typeof claims.scope === 'string') set['x-jwt-scope'] = claims.scope;
    return json(200, { upstream, set });
  }

  // Prices an order: its lines from the catalog, totals per line and per category (sorted).
  function summary(body) {
    const invalid = json(400, { error: 'invalid_order' });
    let order;
    try {
      order = JSON.parse(text(body));
    } catch {
      return invalid;
    }
    if (order === null || typeof order !== 'object') return invalid;
    const { items } = order;
    if (!Number.isSafeInteger(order.order) || order.order < 0) return invalid;
    if (typeof order.currency !== 'string' || !Array.isArray(items)) return invalid;
    // In the worker's order: the shape of every line, then the count, then the SKUs' lengths.
    for (const item of items) {
      if (item === null || typeof item !== 'object' || typeof item.sku !== 'string') return invalid;
      if (!Number.isInteger(item.qty) || item.qty < 0 || item.qty > 0xffffffff) return invalid;
    }
    if (items.length > MAX_ITEMS) return json(422, { error: 'too_many_items' });
    if (items.some(({ sku }) => sku.length === 0 || Buffer.byteLength(sku) > MAX_SKU)) return invalid;
    const lines = [];
    const categories = new Map();
    let units = 0;
    let total = 0;
    for (const { sku, qty } of items) {
      const product = catalog.get(sku);
      if (product === undefined) return json(422, { error: 'unknown_sku', sku });
      const line = product.price * qty;
      const c = categories.get(product.category) ?? { units: 0, total: 0 };
      c.units += qty;
      c.total += line;
      categories.set(product.category, c);
      units += qty;
      total += line;
      lines.push({ sku, total: line });
    }
    if (!Number.isSafeInteger(total)) return invalid;
    const names = [...categories.keys()].sort();
    return json(200, {
      order: order.order,
      currency: order.currency,
      items: items.length,
      units,
      lines,
      categories: names.map((name) => ({ name, units: categories.get(name).units, total: categories.get(name).total })),
      total,
    });
  }

  return async function handle(method, path, authorization, body) {
    if (path === '/echo' && method === 'POST') {
      try {
        return json(200, JSON.parse(text(body)));
      } catch {
        return json(400, { error: 'invalid_json' });
      }
    }
    if (path === '/orders/summary' && method === 'POST') return summary(body);
    if (path.startsWith('/auth/')) return auth(authorization);
    if (path.startsWith('/kv/')) {
      const k = path.slice(4);
      if (method === 'GET') {
        const value = store.get(k);
        return value === undefined ? json(404, { error: 'not_found' }) : { status: 200, type: 'application/json', body: value };
      }
      if (method === 'PUT') {
        store.set(k, Buffer.from(body).toString('utf8'));
        return { status: 204, type: 'application/json', body: '' };
      }
      return json(405, { error: 'method_not_allowed' });
    }
    if (path === '/resize' && method === 'POST') {
      try {
        return { status: 200, type: 'image/jpeg', body: await resize(body) };
      } catch {
        return json(400, { error: 'invalid_image' });
      }
    }
    return json(404, { error: 'no_route' });
  };
}

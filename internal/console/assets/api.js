// The public operator API, called with the browser's own credentials (same origin): the
// console has no other source of data.

export class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function call(method, path, body) {
  const init = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  // Absolute, on the origin: a page opened as http://user:pw@host/console/ has the credentials in
  // its base URL, and a request resolved against it cannot be constructed.
  const resp = await fetch(new URL(path, location.origin), init);
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!resp.ok) {
    const why = (data && (data.error || data.description || data.message)) || text || resp.statusText;
    throw new APIError(resp.status, `${method} ${path}: ${resp.status} ${why}`);
  }
  return data;
}

export const get = (path) => call('GET', path);
export const put = (path, body) => call('PUT', path, body);

// query builds "?a=1&b=2" from an object, leaving out empty values.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

// Calls to the query API. Errors carry the API's own message, for the views to show.
// Answers are parsed so that integers past 2^53 keep their digits (`parseJson`). With a
// server that has a token, the UI asks for it on a 401 and keeps it in localStorage; the
// static files themselves are served without it.

const TOKEN_KEY = "causeway.token";

/** An API answer that was not a success, with the server's message. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** GETs `path` (with `params`, empty values left out) and returns the JSON body. */
export async function get(path, params) {
  const query = params ? encode(params) : "";
  return send("GET", query ? `${path}?${query}` : path);
}

/** Sends `body` as JSON with `method` (POST, DELETE) and returns the JSON answer. */
export async function send(method, path, body) {
  const headers = authorization();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let resp;
  try {
    resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, `cannot reach the server: ${e.message}`);
  }
  const text = await resp.text();
  let json = null;
  try {
    json = text ? parseJson(text) : null;
  } catch {
    // A proxy's HTML page or a plain-text error: shown as it came.
  }
  if (!resp.ok) {
    if (resp.status === 401) askToken();
    throw new ApiError(resp.status, `${resp.status}: ${json && json.error ? json.error : text || resp.statusText}`);
  }
  return json;
}

/** The token's header, when the server has one. */
function authorization() {
  const token = localStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/**
 * GETs `path` (with the token, which a plain link cannot carry) and saves the answer as
 * the file `name`.
 */
export async function download(path, name) {
  let resp;
  try {
    resp = await fetch(path, { headers: authorization() });
  } catch (e) {
    throw new ApiError(0, `cannot reach the server: ${e.message}`);
  }
  if (!resp.ok) {
    if (resp.status === 401) askToken();
    throw new ApiError(resp.status, `${resp.status}: ${(await resp.text()) || resp.statusText}`);
  }
  const url = URL.createObjectURL(await resp.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  // The click has handed the file to the browser; the URL is let go a little later.
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** Whether API calls carry a token (EventSource cannot send one). */
export function hasToken() {
  return !!localStorage.getItem(TOKEN_KEY);
}

/**
 * JSON.parse, except that an integer beyond 2^53 (a block id, a 64-bit counter) comes back
 * as its digits in a string rather than rounded to the nearest double.
 */
export function parseJson(text) {
  return JSON.parse(text, (key, value, context) =>
    typeof value === "number" && !Number.isSafeInteger(value) && context && /^-?\d+$/.test(context.source)
      ? context.source
      : value);
}

/** A query string of the non-empty entries of `params` (an object or URLSearchParams). */
export function encode(params) {
  const out = new URLSearchParams();
  const entries = params instanceof URLSearchParams ? params.entries() : Object.entries(params);
  for (const [k, v] of entries) if (v != null && v !== "") out.append(k, v);
  return out.toString();
}

function askToken() {
  const token = prompt("This server needs an access token (--token). Token:");
  if (token) {
    localStorage.setItem(TOKEN_KEY, token);
    location.reload();
  }
}

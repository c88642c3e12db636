// Formatting and DOM helpers shared by the views.

/** A duration in nanoseconds as text with a unit that keeps 3 significant digits. */
export function duration(ns) {
  if (ns == null || Number.isNaN(ns)) return "–";
  const sign = ns < 0 ? "−" : "";
  // Rounded to 3 digits before the unit is chosen: 9,999,999.7 ns is "10.0 ms", not
  // "10.00 ms", and 999,999 ns "1.00 ms", not "1000 µs".
  const v = Number(Math.abs(ns).toPrecision(3));
  const fix = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
  if (v < 1e3) return `${sign}${v.toFixed(0)} ns`;
  if (v < 1e6) return `${sign}${fix(v / 1e3)} µs`;
  if (v < 1e9) return `${sign}${fix(v / 1e6)} ms`;
  if (v < 6e10) return `${sign}${fix(v / 1e9)} s`;
  return `${sign}${(v / 6e10).toFixed(1)} min`;
}

/** A Unix-nanosecond instant as local date and time with milliseconds. */
export function instant(ns) {
  if (!ns) return "–";
  const d = new Date(ns / 1e6);
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** A count with thousands separators. */
export function count(n) {
  return n == null ? "–" : Number(n).toLocaleString("en-US");
}

/**
 * Builds an element: `h("a.link", {href}, "text", child)`. Attributes starting with "on"
 * are listeners; `class` and `dataset`-style `data-*` are set as attributes.
 */
export function h(spec, attrs = {}, ...children) {
  const [tag, ...classes] = spec.split(".");
  const e = document.createElement(tag || "div");
  if (classes.length) e.className = classes.join(" ");
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = [e.className, v].filter(Boolean).join(" ");
    else if (k === "style" && typeof v === "object") {
      for (const [p, x] of Object.entries(v)) {
        if (p.startsWith("--")) e.style.setProperty(p, x);
        else e.style[p] = x;
      }
    }
    else if (k === "value") e.value = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  append(e, children);
  return e;
}

/** Replaces an element's children (nested arrays flattened, null and false left out). */
export function fill(e, ...children) {
  e.replaceChildren();
  append(e, children);
  return e;
}

function append(e, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(e, c);
    else e.append(c instanceof Node ? c : String(c));
  }
}

const SVG = "http://www.w3.org/2000/svg";

/** Builds an SVG element with attributes. */
export function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c == null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/** A stable colour per service, so one service looks the same on every page. */
export function serviceColor(name) {
  let hash = 2166136261;
  for (let i = 0; i < name.length; i++) {
    hash ^= name.charCodeAt(i);
    hash = Math.imul(hash, 16777619);
  }
  const hue = (hash >>> 0) % 360;
  return `hsl(${hue} 55% 52%)`;
}

/** The loading, empty and error states every view shows the same way. */
export function state(kind, message) {
  return h(`p.state.${kind}`, { role: kind === "error" ? "alert" : "status" }, message);
}

/** The time-window choices offered on every page that reads a window. */
export const LOOKBACKS = [
  ["5m", "last 5 minutes"],
  ["15m", "last 15 minutes"],
  ["1h", "last hour"],
  ["6h", "last 6 hours"],
  ["24h", "last 24 hours"],
  ["168h", "last 7 days"],
  ["", "all time"],
];

/** A select for the lookback window, set to `value`. */
export function lookbackSelect(value) {
  return h("select", { name: "lookback", "aria-label": "time window" },
    LOOKBACKS.map(([v, label]) => h("option", { value: v, selected: v === (value ?? "") }, label)));
}

/**
 * A trace id as it was sent: a 64-bit id (Zipkin's, old Jaeger's) is kept in 128 bits with
 * its high half zero, and shown in its own 16 digits, not behind sixteen zeros.
 */
export function traceIdText(id) {
  const text = String(id);
  return text.length === 32 && text.startsWith("0000000000000000") ? text.slice(16) : text;
}

/** Short form of a long hex id (a trace id in the form it was sent). */
export function shortId(id) {
  const text = traceIdText(id);
  return text.length > 12 ? text.slice(0, 8) + "…" : text;
}

/** The sources a span can come from, as the API's `source` filters name them. */
export const SOURCES = { instrumented: "instrumented", imported: "other tracers", inferred: "inferred (capture)", logs: "stitched from logs" };

/** The query of a page over a window that defaults to all time: `lookback`, else from 0. */
export function windowQuery(params, limit) {
  const q = { limit: String(limit) };
  if (params.get("lookback")) q.lookback = params.get("lookback");
  else q.start = "0";
  return q;
}

// Monitor: requests per second, error share and p50/p90/p99 duration over the window, per
// service, or per operation of one service (Jaeger's Monitor tab), from the stored traces
// with nothing to set up. A click on a chart (or Enter on it, after moving along with the
// arrow keys) lists the traces of that service or operation in that point's time.

import { get } from "./api.js";
import { go, link } from "./app.js";
import { h, svg, duration, count, instant, state, serviceColor } from "./format.js";

const W = 300;
const H = 90;
const PAD = { left: 46, right: 6, top: 6, bottom: 16 };
/** Windows offered: a time series needs both ends, so "all time" is not among them. */
const WINDOWS = [["15m", "last 15 minutes"], ["1h", "last hour"], ["6h", "last 6 hours"], ["24h", "last 24 hours"], ["168h", "last 7 days"]];

export async function render(_id, params) {
  const lookback = params.get("lookback") || "1h";
  const service = params.get("service") || "";
  const [body, services] = await Promise.all([
    get("/api/monitor", { lookback, service, limit: 40 }),
    get("/api/services"),
  ]);
  const page = h("section.monitor");
  const f = h("form.filters", { "aria-label": "monitor" },
    h("label", {}, "Service", h("select", { name: "service" }, h("option", { value: "" }, "every service"),
      (services.services || []).map((s) => h("option", { value: s, selected: s === service }, s)))),
    h("label", {}, "Window", h("select", { name: "lookback", "aria-label": "time window" },
      WINDOWS.map(([v, label]) => h("option", { value: v, selected: v === lookback }, label)))));
  for (const el of f.elements) el.addEventListener("change", () => go("monitor", null, { service: f.elements.service.value, lookback: f.elements.lookback.value }));
  page.append(f, h("p.summary", {},
    `Requests are entry spans (a root, or a span whose parent is in another service), in buckets of ${duration(body.step)}`,
    ` · ${count(body.window.spansScanned)} spans scanned`,
    body.untracked ? ` · ${count(body.untracked)} requests of rarer operations not counted (the memory bound)` : ""));
  if (!body.series.length) {
    page.append(state("empty", "No requests in this window."));
    return page;
  }
  const seconds = body.step / 1e9;
  const rows = body.series.map((s) => {
    const name = s.operation == null ? s.service : `${s.service} ${s.operation}`;
    const traces = (k) => {
      const start = String(body.starts[k]);
      const end = String(Number(body.starts[k]) + body.step);
      go("search", null, { service: s.service, operation: s.operation || "", start, end, tab: "traces", order: "-duration" });
    };
    const rate = s.requests.map((n) => n / seconds);
    const errorShare = s.requests.map((n, k) => (n ? s.errors[k] / n * 100 : 0));
    return h("div.monitor-row", { "data-series": name },
      h("h3", {}, h("span.dot", { style: { background: serviceColor(s.service) } }),
        s.operation == null
          ? h("a", { href: link("monitor", null, { service: s.service, lookback }) }, h("b", {}, s.service))
          : [h("b", {}, s.service), " ", s.operation],
        h("small", {}, ` ${count(s.total)} requests · ${count(s.totalErrors)} errors`)),
      h("div.charts", {},
        chart("Requests per second", body.starts, [{ values: rate, cls: "rate" }], (v) => v.toFixed(v < 10 ? 2 : 0), traces, "rate"),
        chart("Errors, % of requests", body.starts, [{ values: errorShare, cls: "errors" }], (v) => `${v.toFixed(0)}%`, traces, "errors"),
        // A point without requests has no duration: a gap, not a zero.
        chart("Duration p50 · p90 · p99", body.starts, [
          { values: gaps(s.p99, s.requests), cls: "p99" }, { values: gaps(s.p90, s.requests), cls: "p90" },
          { values: gaps(s.p50, s.requests), cls: "p50" }], duration, traces, "latency")));
  });
  page.append(h("div.monitor-rows", {}, rows));
  return page;
}

/** `values` with null where no request was counted. */
function gaps(values, requests) {
  return values.map((v, k) => (requests[k] ? v : null));
}

/** The runs of consecutive non-null values: `[[k, v], ...]` each. */
function segments(values) {
  const out = [];
  let run = null;
  values.forEach((v, k) => {
    if (v == null) run = null;
    else {
      if (!run) out.push(run = []);
      run.push([k, v]);
    }
  });
  return out;
}

/**
 * A small line chart of `lines` (each `{ values, cls }`) over the buckets, its y axis
 * from 0 to the largest value. A click or Enter on it opens `open(bucket)`; the arrow keys
 * move the chosen bucket.
 */
function chart(title, starts, lines, fmt, open, kind) {
  const n = starts.length;
  const top = Math.max(0, ...lines.flatMap((l) => l.values.filter((v) => v != null).map(Number)));
  const x = (k) => PAD.left + (n > 1 ? k / (n - 1) : 0.5) * (W - PAD.left - PAD.right);
  const y = (v) => PAD.top + (1 - (top ? Number(v) / top : 0)) * (H - PAD.top - PAD.bottom);
  let at = -1;
  const cursor = svg("line", { class: "cursor", y1: PAD.top, y2: H - PAD.bottom, visibility: "hidden" });
  const readout = svg("text", { class: "readout", x: W - PAD.right, y: PAD.top + 8, "text-anchor": "end" });
  const show = (k) => {
    at = Math.max(0, Math.min(n - 1, k));
    cursor.setAttribute("x1", x(at));
    cursor.setAttribute("x2", x(at));
    cursor.setAttribute("visibility", "visible");
    readout.textContent = lines.map((l) => (l.values[at] == null ? "–" : fmt(Number(l.values[at])))).join(" · ");
    el.setAttribute("aria-valuetext", `${readout.textContent} at point ${at + 1} of ${n}`);
  };
  const bucketAt = (ev) => {
    const r = el.getBoundingClientRect();
    const px = (ev.clientX - r.left) / r.width * W;
    return Math.round((px - PAD.left) / (W - PAD.left - PAD.right) * (n - 1));
  };
  const el = svg("svg", {
    class: `metric-chart ${kind}`, viewBox: `0 0 ${W} ${H}`, tabindex: "0", role: "img", "data-chart": kind,
    "aria-label": `${title}; arrow keys move along, Enter lists the traces of that time`,
    onmousemove: (ev) => show(bucketAt(ev)),
    onclick: (ev) => open(Math.max(0, Math.min(n - 1, bucketAt(ev)))),
    onkeydown: (ev) => {
      if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") {
        ev.preventDefault();
        show(at < 0 ? n - 1 : at + (ev.key === "ArrowRight" ? 1 : -1));
      } else if (ev.key === "Enter" && at >= 0) open(at);
    },
  },
  svg("line", { class: "axis", x1: PAD.left, x2: W - PAD.right, y1: H - PAD.bottom, y2: H - PAD.bottom }),
  svg("text", { class: "tick", x: PAD.left - 4, y: PAD.top + 8, "text-anchor": "end" }, fmt(top)),
  svg("text", { class: "tick", x: PAD.left - 4, y: H - PAD.bottom, "text-anchor": "end" }, fmt(0)),
  svg("text", { class: "tick", x: PAD.left, y: H - 3 }, hhmm(starts[0])),
  svg("text", { class: "tick", x: W - PAD.right, y: H - 3, "text-anchor": "end" }, hhmm(starts[n - 1])),
  // A run of one point is a dot: a line needs two.
  lines.flatMap((l) => segments(l.values).map((run) => run.length === 1
    ? svg("circle", { class: `dot ${l.cls}`, cx: x(run[0][0]).toFixed(1), cy: y(run[0][1]).toFixed(1), r: 1.6 })
    : svg("polyline", { class: `line ${l.cls}`, points: run.map(([k, v]) => `${x(k).toFixed(1)},${y(v).toFixed(1)}`).join(" ") }))),
  cursor, readout);
  return h("figure.metric", {}, h("figcaption", {}, title), el);
}

/** A bucket's start as local hours and minutes. */
function hhmm(ns) {
  return instant(Number(ns)).slice(11, 16);
}

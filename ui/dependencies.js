// The service dependency graph of a window: services as nodes, calls between them as
// edges with counts, errors and latency. An edge's width follows its share of the caller's
// calls, so a caller that sends everything to one replica stands out. Grouped by host
// (`group=host`), a node is a service on one host, and each host is a column of its own.

import { get } from "./api.js";
import { go } from "./app.js";
import { h, svg, duration, count, state, serviceColor, lookbackSelect, SOURCES } from "./format.js";

const NODE_W = 150;
const NODE_H = 46;
const COL = 270;
const ROW_GAP = 30;

let shown = null; // the graph on screen: its query, data and drawn parts, for in-place updates

/** The API query of a view's parameters (the chosen edge is the page's own state). */
function queryOf(params) {
  const query = Object.fromEntries(params);
  delete query.edge;
  if (!query.lookback && !query.start) query.start = "0";
  return query;
}

/** An edge chosen in the same window redraws the graph and table in place. */
export function update(params) {
  if (!params.has("lookback") && !params.has("start")) params.set("lookback", "1h");
  if (!shown || !shown.graph.isConnected || JSON.stringify(queryOf(params)) !== shown.query) return false;
  const graphEl = graph(shown.g, shown.shares, params.get("edge"));
  const tableEl = edgeTable(shown.g.edges, shown.shares, params);
  shown.graph.replaceWith(graphEl);
  shown.table.replaceWith(tableEl);
  Object.assign(shown, { graph: graphEl, table: tableEl });
  return true;
}

export async function render(_id, params) {
  if (!params.has("lookback") && !params.has("start")) params.set("lookback", "1h");
  const query = queryOf(params);
  const g = await get("/api/dependencies", query);
  const page = h("section.dependencies");
  const byHost = params.get("group") === "host";
  const f = h("form.filters", {}, h("label", {}, "Window", lookbackSelect(params.get("lookback"))),
    h("label", {}, "Nodes", h("select", { name: "group" },
      h("option", { value: "" }, "services"), h("option", { value: "host", selected: byHost }, "services on each host"))),
    h("label", { title: "only the calls that spans of this source show" }, "Source", h("select", { name: "source" },
      h("option", { value: "" }, "any source"),
      Object.entries(SOURCES).map(([v, l]) => h("option", { value: v, selected: v === params.get("source") }, l)))));
  const refilter = () => {
    const v = f.elements.lookback.value;
    const q = v ? { lookback: v } : { start: "0" };
    for (const k of ["group", "source"]) if (f.elements[k].value) q[k] = f.elements[k].value;
    go("dependencies", null, q);
  };
  for (const k of ["lookback", "group", "source"]) f.elements[k].addEventListener("change", refilter);
  page.append(f);
  page.append(h("p.summary", {},
    `${count(g.nodes.length)} ${byHost ? "services on hosts" : "services"} · ${count(g.edges.length)} edges · from ${count(g.traces)} traces (${count(g.window.spansScanned)} spans)`));
  if (!g.nodes.length) {
    page.append(state("empty", "No calls between services in this window."));
    return page;
  }
  const shares = shareOfCaller(g.edges);
  const graphEl = graph(g, shares, params.get("edge"));
  const tableEl = edgeTable(g.edges, shares, params);
  page.append(graphEl);
  if (!byHost) page.append(replicas(g.nodes) || "");
  page.append(h("h2", {}, "Edges"));
  page.append(tableEl);
  shown = { g, shares, graph: graphEl, table: tableEl, query: JSON.stringify(query) };
  return page;
}

function key(e) {
  return `${e.caller}→${e.callee}`;
}

function shareOfCaller(edges) {
  const out = new Map();
  for (const e of edges) out.set(e.caller, (out.get(e.caller) || 0) + e.calls);
  return new Map(edges.map((e) => [key(e), e.calls / (out.get(e.caller) || 1)]));
}

/**
 * Columns by distance from the entry services (those nobody calls), rows in order. Nodes
 * with hosts: a column per host instead (in the order of its nearest node), each boxed.
 */
function layout(nodes, edges) {
  const callees = new Map(nodes.map((n) => [n.id, []]));
  for (const e of edges) if (e.caller !== e.callee && callees.has(e.caller)) callees.get(e.caller).push(e.callee);
  const level = new Map();
  const entry = nodes.filter((n) => !edges.some((e) => e.callee === n.id && e.caller !== n.id));
  const queue = (entry.length ? entry : nodes.slice(0, 1)).map((n) => n.id);
  for (const s of queue) level.set(s, 0);
  while (queue.length) {
    const s = queue.shift();
    for (const c of callees.get(s) || []) {
      if (!level.has(c)) {
        level.set(c, level.get(s) + 1);
        queue.push(c);
      }
    }
  }
  for (const n of nodes) if (!level.has(n.id)) level.set(n.id, 0);
  const byHost = nodes.some((n) => n.host);
  const columns = byHost ? hostColumns(nodes, level) : [];
  if (!byHost) {
    for (const n of nodes) {
      const l = level.get(n.id);
      (columns[l] = columns[l] || []).push(n.id);
    }
  }
  // Each column in the mean order of its callers in earlier columns, so edges cross less.
  const rank = new Map();
  columns.forEach((col, x) => {
    if (x === 0 || byHost) col.sort((a, b) => level.get(a) - level.get(b) || a.localeCompare(b));
    else {
      const score = (s) => {
        const from = edges.filter((e) => e.callee === s && rank.has(e.caller)).map((e) => rank.get(e.caller));
        return from.length ? from.reduce((a, b) => a + b, 0) / from.length : Infinity;
      };
      col.sort((a, b) => score(a) - score(b) || a.localeCompare(b));
    }
    col.forEach((s, y) => rank.set(s, y));
  });
  const pos = new Map();
  const tallest = Math.max(...columns.map((c) => (c || []).length));
  columns.forEach((col, x) => {
    const pad = (tallest - col.length) * (NODE_H + ROW_GAP) / 2;
    col.forEach((s, y) => pos.set(s, { x: 20 + x * COL, y: 20 + pad + y * (NODE_H + ROW_GAP) }));
  });
  const hostOf = new Map(nodes.map((n) => [n.id, n.host]));
  const boxes = byHost ? columns.filter((col) => hostOf.get(col[0])).map((col) => {
    const first = pos.get(col[0]), last = pos.get(col[col.length - 1]);
    return { host: hostOf.get(col[0]), x: first.x - 8, y: first.y - 22, w: NODE_W + 16, h: last.y - first.y + NODE_H + 30 };
  }) : [];
  const top = byHost ? 16 : 0;
  for (const p of pos.values()) p.y += top;
  for (const b of boxes) b.y += top;
  return { pos, boxes, width: 40 + (columns.length - 1) * COL + NODE_W, height: 40 + top + tallest * (NODE_H + ROW_GAP) };
}

/** One column per host, in the order of its nearest node to the entry; nodes without a
 * host (peers named by an attribute) a column each. */
function hostColumns(nodes, level) {
  const groups = new Map();
  for (const n of nodes) {
    const k = n.host ? `host:${n.host}` : `node:${n.id}`;
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(n.id);
  }
  const nearest = (col) => Math.min(...col.map((id) => level.get(id)));
  return [...groups.entries()].sort(([ka, a], [kb, b]) => nearest(a) - nearest(b) || ka.localeCompare(kb)).map(([, col]) => col);
}

function graph(g, shares, chosen) {
  const { pos, boxes, width, height } = layout(g.nodes, g.edges);
  const edges = g.edges.map((e) => {
    const a = pos.get(e.caller), b = pos.get(e.callee);
    if (!a || !b) return null;
    const share = shares.get(key(e));
    const cls = ["dep-edge", e.kind, e.errors ? "has-errors" : "", key(e) === chosen ? "chosen" : ""].join(" ");
    let d, lx, ly;
    if (e.caller === e.callee) {
      d = `M${a.x + NODE_W - 20},${a.y} c 30,-40 50,-10 20,10`;
      [lx, ly] = [a.x + NODE_W, a.y - 30];
    } else {
      const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2;
      const mid = (x1 + x2) / 2;
      d = `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`;
      // Labels sit past the middle, where edges from one caller have fanned out.
      [lx, ly] = bezier(0.6, [x1, y1], [mid, y1], [mid, y2], [x2, y2]);
      ly -= 4;
    }
    const label = `${count(e.calls)} calls${e.errors ? ` · ${count(e.errors)} err` : ""} · p50 ${duration(e.latency.p50)}`;
    const params = new URLSearchParams(location.hash.split("?")[1] || "");
    params.set("edge", key(e));
    return svg("g", { class: cls, "data-edge": key(e), tabindex: "0", role: "button", "aria-label": `${e.caller} to ${e.callee}: ${label}`,
      onclick: () => go("dependencies", null, params, { replace: true }) },
      svg("path", { d, "stroke-width": 1.5 + share * 7, "marker-end": "url(#arrow)" }),
      svg("text", { x: lx, y: ly, "text-anchor": "middle" }, label),
      svg("title", {}, `${e.caller} → ${e.callee} (${e.kind})\n${count(e.calls)} calls, ${Math.round(share * 100)}% of ${e.caller}'s\n${count(e.errors)} errors\np50 ${duration(e.latency.p50)}, p99 ${duration(e.latency.p99)}`));
  });
  const hosts = boxes.map((b) => svg("g", { class: "dep-host", "data-host": b.host },
    svg("rect", { x: b.x, y: b.y, width: b.w, height: b.h, rx: 6 }),
    svg("text", { x: b.x + 8, y: b.y + 14 }, b.host)));
  const nodes = g.nodes.map((n) => {
    const p = pos.get(n.id);
    return svg("g", { class: "dep-node", transform: `translate(${p.x},${p.y})`, "data-service": n.id },
      svg("rect", { width: NODE_W, height: NODE_H, rx: 5 }),
      svg("rect", { width: 5, height: NODE_H, fill: serviceColor(n.service) }),
      svg("text", { x: 12, y: 19, class: "svc" }, n.service),
      svg("text", { x: 12, y: 36, class: "stat" }, `in ${count(n.callsIn)}${n.errorsIn ? ` (${count(n.errorsIn)} err)` : ""} · out ${count(n.callsOut)}`));
  });
  // Edge labels never overlap: in order, each moves down past the labels already placed
  // (10px text: about 6px a character, 12px a line).
  const placed = [];
  let bottom = height;
  for (const e of edges) {
    if (!e) continue;
    const t = e.querySelector("text");
    const x = Number(t.getAttribute("x")), w = t.textContent.length * 6 + 6, lh = 12;
    let y = Number(t.getAttribute("y"));
    while (placed.some((p) => Math.abs(p.x - x) * 2 < p.w + w && Math.abs(p.y - y) < lh)) y += lh;
    t.setAttribute("y", y);
    placed.push({ x, y, w });
    bottom = Math.max(bottom, y + lh);
  }
  return h("div.graph", {}, svg("svg", { width, height: bottom, class: "dep-graph" },
    svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto" },
      svg("path", { d: "M0,0 L10,5 L0,10 z" }))),
    hosts, edges, nodes));
}

function bezier(t, p0, p1, p2, p3) {
  const u = 1 - t;
  const at = (k) => u * u * u * p0[k] + 3 * u * u * t * p1[k] + 3 * u * t * t * p2[k] + t * t * t * p3[k];
  return [at(0), at(1)];
}

/**
 * Services named alike but for a number (storage-1, storage-2, ...) are taken as replicas
 * of one service; their share of the calls shows a client that favours one of them.
 */
function replicas(nodes) {
  const groups = new Map();
  for (const n of nodes) {
    const m = /^(.*?)[-_.]?(\d+)$/.exec(n.service);
    if (!m) continue;
    if (!groups.has(m[1])) groups.set(m[1], []);
    groups.get(m[1]).push(n);
  }
  const sets = [...groups.entries()].filter(([, g]) => g.length > 1);
  if (!sets.length) return null;
  return h("div.replicas", {}, h("h2", {}, "Load across replicas ", h("small", {}, "services named alike but for a number")),
    sets.map(([stem, g]) => {
      const total = g.reduce((a, n) => a + n.callsIn, 0) || 1;
      const max = Math.max(...g.map((n) => n.callsIn)), min = Math.min(...g.map((n) => n.callsIn));
      const uneven = max > 2 * Math.max(min, 1);
      return h("div.replica-set", { "data-stem": stem, class: uneven ? "uneven" : "" },
        h("p", {}, h("b", {}, stem), uneven ? h("span.warn", {}, ` uneven: the busiest replica takes ${Math.round(max / total * 100)}% of the calls`) : " balanced"),
        g.map((n) => h("div.replica", {}, h("span.name", {}, n.service),
          h("span.share", { style: { "--share": `${Math.round(n.callsIn / total * 100)}%` } }, `${count(n.callsIn)} calls (${Math.round(n.callsIn / total * 100)}%)`))));
    }));
}

function edgeTable(edges, shares, params) {
  const chosen = params.get("edge");
  const rows = [...edges].sort((a, b) => a.caller.localeCompare(b.caller) || b.calls - a.calls);
  return h("table.grid.edges", {},
    h("thead", {}, h("tr", {}, ["Caller", "Callee", "Kind", "Calls", "Share of caller's calls", "Errors", "p50", "p90", "p99", "Mean"].map((c, i) => h("th", { class: i >= 3 ? "num" : "" }, c)))),
    h("tbody", {}, rows.map((e) => h("tr", { "data-edge": key(e), class: key(e) === chosen ? "chosen" : "" },
      h("td", {}, e.caller), h("td", {}, e.callee), h("td", {}, e.kind),
      h("td.num", {}, count(e.calls)),
      h("td.num", {}, h("span.share", { style: { "--share": `${Math.round(shares.get(key(e)) * 100)}%` } }, `${Math.round(shares.get(key(e)) * 100)}%`)),
      h("td.num", { class: e.errors ? "err" : "" }, count(e.errors)),
      h("td.num", {}, duration(e.latency.p50)), h("td.num", {}, duration(e.latency.p90)),
      h("td.num", {}, duration(e.latency.p99)), h("td.num", {}, duration(e.latency.mean))))));
}


// One execution pattern: its graph with mean delays on nodes and edges, and its latency
// histogram whose buckets list example traces. What sets the pattern apart from the rest
// of the window (`apart=pattern`), or a bar's traces from the rest of the pattern
// (`apart=bucket`), is asked of /api/differences and shown under them.

import { get } from "./api.js";
import { go, link } from "./app.js";
import { h, svg, duration, count, state, serviceColor, shortId } from "./format.js";
import { differencesPanel } from "./differences.js";

const NODE_W = 230;
const NODE_H = 54;
const GAP_X = 120;
const GAP_Y = 14;

let shown = null; // the pattern on screen: its query, data and histogram, for in-place updates

/** The API query of a view's parameters (the chosen bucket is the page's own state). */
function queryOf(params) {
  const query = Object.fromEntries(params);
  delete query.bucket;
  delete query.apart;
  if (!query.lookback && !query.start) query.start = "0";
  return query;
}

/** A bar chosen on the same pattern redraws the histogram in place: no fetch, no jump. */
export function update(params) {
  if (!shown || !shown.el.isConnected || JSON.stringify(queryOf(params)) !== shown.query) return false;
  const el = histogram(shown.p.histogram, params, shown.id);
  shown.el.replaceWith(el);
  shown.el = el;
  return compareInto(shown.apart, shown.id, shown.p, params);
}

/** The comparison the URL asks for (`apart=`), drawn into `slot`. */
async function compareInto(slot, id, p, params) {
  const window = queryOf(params);
  const b = p.histogram[Number(params.get("bucket"))];
  let sel = null, filters = window;
  if (params.get("apart") === "pattern") sel = { pattern: id };
  else if (params.get("apart") === "bucket" && b) {
    sel = { minDuration: String(b.lowNs), maxDuration: String(b.highNs) };
    filters = { ...window, pattern: id };
  }
  if (!sel) {
    slot.replaceChildren();
    return;
  }
  slot.setAttribute("aria-busy", "true");
  try {
    slot.replaceChildren(await differencesPanel(sel, filters));
  } catch (e) {
    slot.replaceChildren(state("error", `Comparing failed: ${e.message || e}`));
  }
  slot.removeAttribute("aria-busy");
}

export async function render(id, params) {
  const query = queryOf(params);
  const p = await get(`/api/patterns/${encodeURIComponent(id)}`, query);
  const page = h("section.pattern");
  const back = new URLSearchParams(params);
  back.delete("bucket");
  page.append(h("p.crumbs", {}, h("a", { href: link("search", null, back) }, "← patterns")));
  page.append(h("h1", {}, h("b", {}, p.rootService), " ", p.rootOperation, " ", h("code.id", {}, p.id)));
  page.append(h("p.summary", {},
    `${count(p.count)} traces · ${count(p.errors)} with errors · ${count(p.spans)} spans each · `,
    `mean ${duration(p.latency.mean)} · p50 ${duration(p.latency.p50)} · p99 ${duration(p.latency.p99)} · max ${duration(p.latency.max)}`));
  page.append(h("p.explore-tools", {},
    h("a.button", { href: link("pattern", id, withApart(params, "pattern")), "data-apart": "pattern" }, "What sets this pattern apart"),
    " from the other traces of the window"));
  page.append(h("h2", {}, "Graph ", h("small", {}, "mean duration (self time) per node; mean delay from the parent's start and network time per edge")));
  page.append(graph(p.nodes));
  page.append(h("h2", {}, "Latency ", h("small", {}, "click a bar for example traces")));
  const el = histogram(p.histogram, params, id);
  const slot = h("div.differences-slot");
  page.append(el, slot);
  shown = { id, p, el, apart: slot, query: JSON.stringify(query) };
  await compareInto(slot, id, p, params);
  return page;
}

/** Lays the tree out left to right: x by depth, y by the order leaves are reached. */
function layout(nodes) {
  const children = nodes.map(() => []);
  for (const n of nodes) if (n.parent != null) children[n.parent].push(n.index);
  const pos = new Array(nodes.length);
  let row = 0;
  const place = (i, depth) => {
    const kids = children[i];
    if (!kids.length) {
      pos[i] = { x: depth, y: row++ };
      return;
    }
    for (const k of kids) place(k, depth + 1);
    pos[i] = { x: depth, y: (pos[kids[0]].y + pos[kids[kids.length - 1]].y) / 2 };
  };
  for (const n of nodes) if (n.parent == null) place(n.index, 0);
  return { pos, rows: row };
}

function graph(nodes) {
  if (!nodes.length) return state("empty", "This pattern has no nodes.");
  const { pos, rows } = layout(nodes);
  const depth = Math.max(...pos.map((p) => p.x)) + 1;
  const px = (p) => 10 + p.x * (NODE_W + GAP_X);
  const py = (p) => 10 + p.y * (NODE_H + GAP_Y);
  const width = 20 + depth * (NODE_W + GAP_X) - GAP_X;
  const height = 20 + rows * (NODE_H + GAP_Y) - GAP_Y;
  const edges = [];
  const boxes = [];
  for (const n of nodes) {
    const p = pos[n.index];
    if (n.parent != null) {
      const q = pos[n.parent];
      const x1 = px(q) + NODE_W, y1 = py(q) + NODE_H / 2, x2 = px(p), y2 = py(p) + NODE_H / 2;
      const mid = (x1 + x2) / 2;
      edges.push(svg("path", { class: "edge", d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}` }));
      const label = [];
      if (n.meanStartOffsetNs != null) label.push(`+${duration(n.meanStartOffsetNs)}`);
      if (n.meanNetworkNs != null) label.push(`net ${duration(n.meanNetworkNs)}`);
      label.reverse();
      if (label.length) edges.push(svg("text", { class: "edge-label", x: x2 - 4, y: y2 - 4, "text-anchor": "end" }, label.join(" · ")));
    }
    const times = n.count > 1 ? `×${n.count} · ` : "";
    boxes.push(svg("g", { class: `node kind-${n.kind}`, transform: `translate(${px(p)},${py(p)})`, "data-index": n.index },
      svg("rect", { width: NODE_W, height: NODE_H, rx: 4 }),
      svg("rect", { width: 5, height: NODE_H, fill: serviceColor(n.service) }),
      svg("text", { x: 12, y: 17, class: "svc" }, n.service, svg("tspan", { class: "kind" }, `  ${n.kind}`)),
      svg("text", { x: 12, y: 33 }, clip(n.operation, 30)),
      svg("text", { x: 12, y: 48, class: "stat" }, `${times}${duration(n.meanDurationNs)} (self ${duration(n.meanSelfNs)})`),
      svg("title", {}, `${n.service} ${n.operation}\n${count(n.instances)} spans\nmean ${duration(n.meanDurationNs)}, self ${duration(n.meanSelfNs)}`)));
  }
  return h("div.graph", {}, svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "pattern-graph" }, edges, boxes));
}

function clip(text, n) {
  return text.length > n ? text.slice(0, n - 1) + "…" : text;
}

function withApart(params, value) {
  const p = new URLSearchParams(params);
  p.set("apart", value);
  return p;
}

function histogram(buckets, params, id) {
  if (!buckets.length) return state("empty", "No latencies recorded.");
  const chosen = params.get("bucket");
  const max = Math.max(...buckets.map((b) => b.count));
  const W = 28, H = 140, X0 = 50;
  const bars = buckets.map((b, i) => {
    const hgt = Math.max(2, (b.count / max) * H);
    const p = new URLSearchParams(params);
    p.set("bucket", String(i));
    return svg("g", { class: `bar${String(i) === chosen ? " chosen" : ""}`, "data-bucket": i, tabindex: "0", role: "button",
      "aria-label": `${count(b.count)} traces from ${duration(b.lowNs)}`,
      onclick: () => go("pattern", id, p, { replace: true }) },
      svg("rect", { x: X0 + i * W + 2, y: H - hgt + 14, width: W - 4, height: hgt }),
      svg("text", { x: X0 + i * W + W / 2, y: H - hgt + 10, "text-anchor": "middle", class: "n" }, count(b.count)),
      svg("text", { x: X0 + i * W + W / 2, y: H + 28, "text-anchor": "end", class: "lo", transform: `rotate(-45 ${X0 + i * W + W / 2} ${H + 28})` }, duration(b.lowNs)),
      svg("title", {}, `${duration(b.lowNs)} – ${duration(b.highNs)}: ${count(b.count)} traces`));
  });
  const box = h("div.histogram", {}, svg("svg", { width: X0 + buckets.length * W + 10, height: H + 80 }, bars));
  const b = chosen != null ? buckets[Number(chosen)] : null;
  if (b) {
    box.append(h("div.examples", {},
      h("p", {}, `${duration(b.lowNs)} – ${duration(b.highNs)}: ${count(b.count)} traces. `,
        h("a", { href: link("pattern", id, withApart(params, "bucket")), "data-apart": "bucket" }, "What sets them apart"),
        " from the rest of the pattern. Examples:"),
      h("ul", {}, b.examples.map((t) => h("li", {}, h("a", { href: link("trace", t, {}) }, h("code", {}, shortId(t))))))));
  }
  return box;
}

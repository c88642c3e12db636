// Paths inferred from black-box messages (`causeway capture` + `causeway infer`), as WAP5
// draws them: the patterns with their count and expected count, one pattern as a
// timeline (a lane per node, a box for the time a node held the request, an arrow per
// message with its network delay, a diamond for a node that was not captured), and each
// node's delay histogram. It reads `GET /api/inferred` (causeway_analysis::inferred): a box
// runs from a message's receipt to the last send it caused (labelled with that delay),
// an arrow per message carries its network delay, and the hops are placed by their mean
// send and receive offsets from the path's first message.

import { get } from "./api.js";
import { go, link } from "./app.js";
import { h, svg, duration, count, state, lookbackSelect, shortId, serviceColor, windowQuery } from "./format.js";

const SORTS = {
  expected: ["expected count", (p) => p.expected],
  confidence: ["expected ÷ count", (p) => p.expected / Math.max(1, p.count)],
  sqrt: ["expected ÷ √count", (p) => p.expected / Math.sqrt(Math.max(1, p.count))],
};

export async function render(_id, params) {
  const data = await get("/api/inferred", windowQuery(params, 50));
  const page = h("section.inferred");
  const sort = SORTS[params.get("sort")] ? params.get("sort") : "expected";
  const f = h("form.filters", {},
    h("label", {}, "Window", lookbackSelect(params.get("lookback") || "")),
    h("label", {}, "Sort by", h("select", { name: "sort", "aria-label": "sort patterns by" },
      Object.entries(SORTS).map(([k, [label]]) => h("option", { value: k, selected: k === sort }, label)))));
  f.addEventListener("change", () => {
    const p = new URLSearchParams();
    if (f.elements.lookback.value) p.set("lookback", f.elements.lookback.value);
    p.set("sort", f.elements.sort.value);
    go("inferred", null, p);
  });
  page.append(f);
  if (!data.traces) {
    page.append(state("empty",
      "No inferred paths in this window. Capture a system with `causeway capture --out DIR -- COMMAND`, " +
      "then send what `causeway infer DIR --collector URL` infers to this server."));
    return page;
  }
  page.append(h("p.summary", {},
    `${count(data.traces)} inferred traces · ${count(data.patternCount)} patterns` +
    (data.patternCount > data.patterns.length ? ` (the ${data.patterns.length} most expected listed)` : "")));
  const key = SORTS[sort][1];
  const patterns = [...data.patterns].sort((a, b) => key(b) - key(a) || a.shape.localeCompare(b.shape));
  const chosen = Math.min(Number(params.get("pattern") || 0), patterns.length - 1);
  page.append(table(patterns, chosen, params));
  const p = patterns[chosen];
  page.append(h("h2", {}, "Timeline"));
  page.append(h("p.pattern-head", {},
    h("code.shape", {}, p.shape), " ",
    `${count(p.count)} instances, expected ${p.expected.toFixed(2)}, most probable ${p.maxProbability.toFixed(2)}`,
    p.example ? [" · ", h("a.example", { href: link("trace", p.example, {}) }, `most probable instance ${shortId(p.example)}`)] : null));
  page.append(timeline(p));
  page.append(h("h2", {}, "Node delays"));
  page.append(h("p.hint", {}, "Per node, the time from a message's receipt to a message it caused, over every inferred trace of the window."));
  page.append(h("div.node-delays", {}, data.nodes.map(nodeHistogram)));
  return page;
}

function table(patterns, chosen, params) {
  return h("table.grid.inferred-patterns", {},
    h("thead", {}, h("tr", {}, ["Expected", "Count", "Exp ÷ count", "Exp ÷ √count", "Pattern"].map((c, i) => h("th", { class: i < 4 ? "num" : "" }, c)))),
    h("tbody", {}, patterns.map((p, i) => {
      const next = new URLSearchParams(params);
      next.set("pattern", String(i));
      return h("tr.row-link", { "data-pattern": i, class: i === chosen ? "chosen" : "", tabindex: "0",
        onclick: () => go("inferred", null, next, { replace: true }) },
        h("td.num", {}, p.expected.toFixed(2)),
        h("td.num", {}, count(p.count)),
        h("td.num", {}, (p.expected / Math.max(1, p.count)).toFixed(3)),
        h("td.num", {}, (p.expected / Math.sqrt(Math.max(1, p.count))).toFixed(3)),
        h("td", {}, h("code", { title: p.shape }, p.shape.length > 140 ? p.shape.slice(0, 139) + "…" : p.shape)));
    })));
}

/** A pattern's hops on lanes, one per node, left to right in mean time. */
function timeline(p) {
  const lanes = [];
  for (const hop of p.hops) {
    for (const n of [hop.src, hop.dst]) if (!lanes.includes(n)) lanes.push(n);
  }
  const LANE = 64, LEFT = 150, WIDTH = 900, TOP = 20;
  // Times: a hop's send, else its receipt; a receiver not captured sits halfway between
  // the call and the answer it sent back.
  const at = (hop, key) => hop[key] ?? hop.sendOffsetNs ?? hop.recvOffsetNs ?? 0;
  const times = p.hops.flatMap((hop) => [at(hop, "sendOffsetNs"), at(hop, "recvOffsetNs")]);
  const span = Math.max(1, ...times);
  const x = (t) => LEFT + (t / span) * (WIDTH - LEFT - 40);
  const y = (node) => TOP + lanes.indexOf(node) * LANE + LANE / 2;
  const parts = [];
  lanes.forEach((n, i) => {
    parts.push(svg("line", { x1: LEFT - 10, x2: WIDTH - 20, y1: y(n), y2: y(n), class: "lane" }));
    parts.push(svg("text", { x: 8, y: TOP + i * LANE + LANE / 2 + 4, class: "lane-name" }, n));
  });
  // Boxes: from a message's receipt to the last send made for it, with the mean delay.
  const diamondX = new Map(); // where an uncaptured receiver is drawn: its answers start there
  p.hops.forEach((hop, i) => {
    const kids = p.hops.filter((k) => k.parent === i);
    if (hop.untraced) {
      const t = kids.length ? (at(hop, "sendOffsetNs") + at(kids[kids.length - 1], "sendOffsetNs")) / 2 : at(hop, "sendOffsetNs");
      const cx = x(t), cy = y(hop.dst);
      diamondX.set(i, cx);
      parts.push(svg("g", { class: "untraced", "data-hop": i },
        svg("polygon", { points: `${cx},${cy - 12} ${cx + 12},${cy} ${cx},${cy + 12} ${cx - 12},${cy}`, fill: serviceColor(hop.dst) }),
        svg("title", {}, `${hop.dst}: not captured`)));
      return;
    }
    const start = at(hop, "recvOffsetNs");
    const end = kids.length ? Math.max(...kids.map((k) => at(k, "sendOffsetNs"))) : start;
    const delay = kids.length ? end - start : null;
    parts.push(svg("g", { class: "node-box", "data-hop": i },
      svg("rect", { x: x(start), y: y(hop.dst) - 14, width: Math.max(4, x(end) - x(start)), height: 28, rx: 3, fill: serviceColor(hop.dst) }),
      delay != null ? svg("text", { x: x(start) + 4, y: y(hop.dst) + 26, class: "delay" }, duration(delay)) : null,
      svg("title", {}, `${hop.dst}: ${delay != null ? duration(delay) + " from the receipt to the last message sent for it" : "nothing sent for it"}`)));
  });
  // Arrows: one per message, labelled with its mean network delay.
  p.hops.forEach((hop, i) => {
    const fromDiamond = hop.sendOffsetNs == null && diamondX.has(hop.parent);
    const x1 = fromDiamond ? diamondX.get(hop.parent) : x(at(hop, "sendOffsetNs"));
    const x2 = hop.untraced && diamondX.has(i) ? diamondX.get(i) : x(at(hop, "recvOffsetNs"));
    const y1 = y(hop.src), y2 = y(hop.dst);
    const label = hop.networkNs != null ? duration(hop.networkNs) : "";
    parts.push(svg("g", { class: "hop", "data-hop": i },
      svg("line", { x1, y1, x2, y2, "marker-end": "url(#arrow)" }),
      label ? svg("text", { x: (x1 + x2) / 2 + 4, y: (y1 + y2) / 2, class: "network" }, label) : null,
      svg("title", {}, `${hop.src} → ${hop.dst}${label ? `: network ${label}` : ""}${hop.nodeDelayNs != null ? `, sent ${duration(hop.nodeDelayNs)} after its cause arrived` : ""}`)));
  });
  const height = TOP + lanes.length * LANE + 10;
  return h("div.timeline-box", {}, svg("svg", { width: WIDTH, height, class: "timeline", viewBox: `0 0 ${WIDTH} ${height}` },
    svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" },
      svg("path", { d: "M 0 0 L 10 5 L 0 10 z" }))),
    parts));
}

function nodeHistogram(n) {
  const max = Math.max(1, ...n.buckets.map((b) => b.count));
  const W = 22, H = 70, X0 = 8;
  const bars = n.buckets.map((b, i) => {
    const hgt = b.count ? Math.max(2, (b.count / max) * H) : 0;
    return svg("g", { class: "bar" },
      svg("rect", { x: X0 + i * W + 1, y: H - hgt + 4, width: W - 2, height: hgt }),
      svg("title", {}, `${duration(b.lowNs)} – ${duration(b.highNs)}: ${count(b.count)}`));
  });
  const first = n.buckets[0], last = n.buckets[n.buckets.length - 1];
  return h("div.node-delay", { "data-node": n.node },
    h("p", {}, h("b", {}, n.node), ` ${count(n.count)} delays, ${duration(first.lowNs)} – ${duration(last.highNs)}`),
    svg("svg", { width: X0 + n.buckets.length * W + 8, height: H + 8, class: "delay-histogram" }, bars));
}

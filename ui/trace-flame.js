// The flame graph of a trace: every stack of (service, span name) from a root down, its
// spans merged, as an icicle. A frame's width is the self time of its spans and of all
// below them, so the widths add up and the widest frames are where the time was spent;
// its own self time is in its title. A click (or Enter) zooms into a frame; the top
// frame zooms out. Frames under a pixel are not drawn, so a huge trace draws as fast as
// its distinct stacks allow.

import { h, duration, count, serviceColor } from "./format.js";

const FRAME = 22; // px per stack level

/**
 * Stacks of a trace's spans: `{ nodes, root }`, each node `{ service, name, self, total,
 * spans, errors, depth, parent, kids }` with `kids` sorted widest first; node 0 is the
 * whole trace. `children` and `roots` are span indices, `selfOf(i)` a span's self time.
 */
export function stacks(spans, children, roots, selfOf) {
  const nodes = [{ service: "", name: "all spans", self: 0, total: 0, spans: 0, errors: 0, depth: 0, parent: -1, kids: [], byKey: new Map() }];
  const stack = roots.map((r) => [r, 0]);
  const seen = new Uint8Array(spans.length);
  while (stack.length) {
    const [i, parent] = stack.pop();
    if (seen[i]) continue;
    seen[i] = 1;
    const s = spans[i];
    const key = `${s.service}\u0000${s.name}`;
    let n = nodes[parent].byKey.get(key);
    if (n === undefined) {
      n = nodes.length;
      nodes.push({ service: s.service, name: s.name, self: 0, total: 0, spans: 0, errors: 0, depth: nodes[parent].depth + 1, parent, kids: [], byKey: new Map() });
      nodes[parent].byKey.set(key, n);
      nodes[parent].kids.push(n);
    }
    const node = nodes[n];
    node.self += selfOf(i);
    node.spans += 1;
    if (s.status && s.status.code === "error") node.errors += 1;
    for (const c of children[i]) stack.push([c, n]);
  }
  // Children come after their parent, so a backward pass adds each total into its parent.
  for (let k = nodes.length - 1; k >= 0; k--) {
    const n = nodes[k];
    n.total += n.self;
    if (n.parent >= 0) nodes[n.parent].total += n.total;
    delete n.byKey;
  }
  for (const n of nodes) n.kids.sort((a, b) => nodes[b].total - nodes[a].total || nodes[a].name.localeCompare(nodes[b].name));
  return nodes;
}

/** The frames in sight when `focus` fills the width: `[{ node, x, w }]`, x and w in 0..1. */
export function layout(nodes, focus, minWidth) {
  const out = [];
  // The focused frame's ancestors are drawn full width above it, so the way back is there.
  for (let a = nodes[focus].parent; a >= 0; a = nodes[a].parent) out.push({ node: a, x: 0, w: 1 });
  const whole = nodes[focus].total || 1;
  const stack = [[focus, 0, 1]];
  while (stack.length) {
    const [n, x, w] = stack.pop();
    out.push({ node: n, x, w });
    let at = x;
    for (const k of nodes[n].kids) {
      const kw = nodes[k].total / whole;
      if (kw >= minWidth) stack.push([k, at, kw]);
      at += kw;
    }
  }
  return out;
}

/**
 * The flame graph element. `focus` is the zoomed frame (0: the whole trace), `choose(k)`
 * zooms, `find(node)` shows a frame's spans on the time line.
 */
export function flameGraph(nodes, focus, { choose, find }) {
  const f = nodes[focus] ? focus : 0;
  const frames = layout(nodes, f, 0.002);
  const depth = frames.reduce((d, fr) => Math.max(d, nodes[fr.node].depth), 0) + 1;
  const all = nodes[0].total || 1;
  const graph = h("div.flame", { style: { height: `${depth * FRAME}px` }, role: "group", "aria-label": "flame graph" });
  for (const { node, x, w } of frames) {
    const n = nodes[node];
    const title = node === 0
      ? `all spans: ${duration(n.total)} of self time`
      : `${n.service} ${n.name}: self ${duration(n.self)}, with what it called ${duration(n.total)} (${(n.total / all * 100).toFixed(1)}%), ${count(n.spans)} span${n.spans === 1 ? "" : "s"}`;
    graph.append(h("div.frame", {
      role: "button", tabindex: "0", "data-frame": String(node), title,
      class: [node === f && "focus", n.errors && "error", nodes[f].depth > n.depth && "above"].filter(Boolean).join(" "),
      style: { left: `${x * 100}%`, width: `${w * 100}%`, top: `${n.depth * FRAME}px`, "--c": node === 0 ? "#8a8f98" : serviceColor(n.service) },
      onclick: () => choose(node === f ? n.parent : node),
      onkeydown: (ev) => {
        if (ev.key === "Enter" || ev.key === " ") {
          ev.preventDefault();
          choose(node === f ? n.parent : node);
        }
      },
    }, node === 0 ? "all spans" : [h("b", {}, n.service), " ", n.name]));
  }
  const n = nodes[f];
  return h("div.flame-view", {},
    h("p.hint", {}, "Width is self time, of a stack's spans and all below them. Click a frame to zoom in, the top frame to zoom out."),
    graph,
    f === 0 ? "" : h("p.flame-focus", {},
      h("b", {}, n.service), ` ${n.name} · ${count(n.spans)} spans · self ${duration(n.self)} · with what it called ${duration(n.total)} (${(n.total / all * 100).toFixed(1)}% of all self time) `,
      h("button", { type: "button", onclick: () => find(n) }, "Show these spans on the time line")));
}

// The trace view: a global time line of nested, collapsible spans; server time and
// network time drawn differently on each RPC; the critical path; events and attributes of
// the chosen span; skew-corrected times with the offsets shown. Only the rows in sight
// are in the DOM, so a trace of 10K spans opens and scrolls as fast as a small one; a
// trace of more than WHOLE spans is not sent whole but outlined (trace-outline.js).
// Beside the time line, the same trace as a flame graph and as a span table (`view=`);
// on it, in-trace search (`find=`, trace-find.js) marks the spans that match, dims the
// rest or hides them (`only=1`), and steps from one match to the next.

import { get, download } from "./api.js";
import { go, link } from "./app.js";
import { h, fill, duration, count, instant, state, serviceColor, traceIdText } from "./format.js";
import { compile, quoted } from "./trace-find.js";
import { stacks, flameGraph } from "./trace-flame.js";
import { groups, spanTable } from "./trace-table.js";
import { outlinePage, outlineMounted, OUTLINE_ROWS } from "./trace-outline.js";

const ROW = 24; // px per row
const OVERSCAN = 15; // rows drawn beyond the visible ones
const PATH_LIST = 200; // critical-path steps listed at once
const LINES_LISTED = 1000; // log lines listed under the time line
const WHOLE = 20000; // spans a trace may have to be sent whole
/** The views of a trace, by their `view=` names (the time line has none). */
const VIEWS = [["", "Timeline"], ["flame", "Flame graph"], ["table", "Span table"]];

let view = null; // the trace on screen: data, derived structure and the elements

export async function render(id, params) {
  const started = performance.now();
  const adjust = params.get("adjust") !== "none";
  // One request: a trace of at most WHOLE spans comes whole with its critical path; a
  // bigger one as an outline (trace-outline.js).
  // An outline cut by service (`tree=services`) is the same trace: the kept one will do.
  const tree = params.get("tree") === "services" ? { tree: "services", reuse: "1" } : {};
  const answer = await get(`/api/traces/${encodeURIComponent(id)}/outline`,
    { whole: WHOLE, rows: OUTLINE_ROWS, ...(adjust ? { adjust: "skew" } : {}), ...tree });
  if (!answer.whole) return outlinePage(id, params, answer, started);
  const body = answer.whole, critical = answer.criticalPath;
  // The page is built with its own view, which becomes the one that clicks act on only
  // when the router mounts it: a render whose answer came after the user moved on to
  // another trace is dropped and must not take over the trace on screen.
  const previous = view;
  view = build(body, critical, adjust);
  try {
    const page = construct(id, params, started);
    page.traceView = view;
    return page;
  } finally {
    view = previous;
  }
}

function construct(id, params, started) {
  view.started = started;
  view.id = id;
  const page = h("section.trace");
  if (!view.spans.length) {
    page.append(state("empty", "This trace has no spans."));
    return page;
  }
  view.page = page;
  view.params = params;
  page.append(header(view));
  const rows = h("div.rows-inner", { style: { height: `${view.spans.length * ROW}px` } });
  const scroller = h("div.rows", { tabindex: "0", "aria-label": "spans" }, rows);
  scroller.addEventListener("scroll", () => schedule());
  rows.addEventListener("click", onRowClick);
  const lane = h("div.axis");
  const minimap = h("canvas.minimap", { height: 48, title: "drag to zoom; double-click to see all" });
  view.el = { rows, scroller, axis: lane, minimap, detail: h("aside.detail"), path: h("div.path"), find: findBar(params) };
  view.el.timeline = h("div.trace-body", {},
    h("div.timeline", {},
      view.el.find,
      h("div.overview", {}, h("div.label-head", {}, "Service and span"), h("div.lane-head", {}, minimap, lane)),
      scroller),
    h("div.side", {}, view.el.path, view.el.detail));
  view.el.other = h("div.trace-other");
  page.append(view.el.timeline, view.el.other);
  const lines = logLines(view);
  if (lines.length) page.append(view.el.linesPanel = linesPanel(lines));
  zoomByDragging(minimap);
  apply(params);
  return page;
}

export function mounted(page) {
  if (page && page.outline) {
    view = null;
    outlineMounted(page);
    return;
  }
  if (page && page.traceView) view = page.traceView;
  if (!view || !view.el) return;
  drawAll();
  scrollToSelected();
  requestAnimationFrame(() => {
    // How long opening took, from the request to the first drawn rows (BENCHMARKS.md).
    window.causewayTiming = { trace: view.id, spans: view.spans.length, openMs: performance.now() - view.started };
  });
}

export function update(params) {
  if (!view || !view.el || (params.get("adjust") !== "none") !== view.adjust) return false;
  apply(params);
  drawAll();
  scrollToSelected();
  return true;
}

// "/" goes to the find box, as in most pages that have one.
document.addEventListener("keydown", (ev) => {
  if (ev.key !== "/" || !view || !view.el || !view.page.isConnected || view.show) return;
  if (ev.target instanceof Element && ev.target.matches("input, textarea, select")) return;
  ev.preventDefault();
  view.el.find.elements.find.focus();
});

/** Indexes the spans: children in start order, depth, the RPC server under each client. */
function build(body, critical, adjust) {
  const spans = body.spans || [];
  const byId = new Map();
  spans.forEach((s, i) => byId.set(s.span_id, i));
  const children = spans.map(() => []);
  const roots = [];
  // The server's roots include the span where it broke a cycle of parent links.
  const serverRoots = new Set(body.roots || []);
  spans.forEach((s, i) => {
    const p = s.parent_id != null ? byId.get(s.parent_id) : undefined;
    if (p === undefined || p === i || serverRoots.has(s.span_id)) roots.push(i);
    else children[p].push(i);
  });
  const byStart = (a, b) => spans[a].start - spans[b].start || spans[a].end - spans[b].end;
  for (const c of children) c.sort(byStart);
  // Whatever the links say, every span is drawn once: a span no root reaches (a cycle the
  // answer did not break) becomes a root, and a span reached twice is drawn once.
  const reached = new Uint8Array(spans.length);
  const walk = (r) => {
    const stack = [r];
    while (stack.length) {
      const i = stack.pop();
      if (reached[i]) continue;
      reached[i] = 1;
      for (const c of children[i]) if (!reached[c]) stack.push(c);
    }
  };
  roots.forEach(walk);
  spans.forEach((_, i) => {
    if (!reached[i]) {
      roots.push(i);
      walk(i);
    }
  });
  const isRoot = new Uint8Array(spans.length);
  for (const r of roots) isRoot[r] = 1;
  for (let i = 0; i < children.length; i++) children[i] = children[i].filter((c) => !isRoot[c]);
  roots.sort(byStart);
  let t0 = Infinity, t1 = -Infinity;
  for (const s of spans) {
    t0 = Math.min(t0, s.start);
    t1 = Math.max(t1, s.end);
  }
  // The server span that answered each client span: its child in another process.
  const server = spans.map((s, i) => {
    if (s.kind !== "client" && s.kind !== "producer") return -1;
    return children[i].find((c) => (spans[c].kind === "server" || spans[c].kind === "consumer")) ?? -1;
  });
  const offsets = new Map((critical.clockOffsets || []).map((o) => [o.host, o.offsetNs]));
  // Critical sections come on corrected times; on raw times each moves back by its host's offset.
  const sections = (critical.sections || []).map((c) => {
    const i = byId.get(c.spanId);
    const shift = adjust || i === undefined ? 0 : offsets.get(spans[i].host) || 0;
    return { span: i, start: c.start - shift, end: c.end - shift };
  }).filter((c) => c.span !== undefined);
  const onPath = spans.map(() => []);
  for (const c of sections) onPath[c.span].push(c);
  const selfNs = new Map((critical.selfTimes || []).map((s) => [s.spanId, s.selfNs]));
  const depth = new Int32Array(spans.length);
  const placed = new Uint8Array(spans.length);
  const stack = roots.map((r) => [r, 0]);
  while (stack.length) {
    const [i, d] = stack.pop();
    if (placed[i]) continue;
    placed[i] = 1;
    depth[i] = d;
    for (const c of children[i]) stack.push([c, d + 1]);
  }
  return {
    body, adjust, spans, byId, children, roots, depth, server, t0, t1, flame: null, groups: null,
    findKey: null, isMatch: new Uint8Array(spans.length), matches: [],
    sections, onPath, selfNs, criticalNs: critical.durationNs,
    offsets: body.clockOffsets || critical.clockOffsets || [],
    collapsed: new Set(), selected: -1, showPath: true, zoom: [0, 1], visible: [],
  };
}

/** Reads the URL's state into the view. */
function apply(params) {
  view.params = params;
  view.collapsed = new Set((params.get("collapsed") || "").split(",").filter((s) => view.byId.has(s)).map((s) => view.byId.get(s)));
  const sel = params.get("span");
  view.selected = sel && view.byId.has(sel) ? view.byId.get(sel) : -1;
  view.showPath = params.get("cp") !== "0";
  const z = (params.get("zoom") || "").split(",").map(Number);
  view.zoom = z.length === 2 && z[0] >= 0 && z[1] <= 1 && z[0] < z[1] ? z : [0, 1];
  // A chosen span is shown even inside a folded subtree.
  if (view.selected >= 0) {
    let p = parentOf(view.selected);
    while (p >= 0) {
      view.collapsed.delete(p);
      p = parentOf(p);
    }
  }
  view.show = VIEWS.some(([k]) => k && k === params.get("view")) ? params.get("view") : "";
  findMatches(params);
  view.visible = flatten();
  if (view.only) view.visible = view.visible.filter((i) => view.keep[i]);
  view.el.rows.style.height = `${view.visible.length * ROW}px`;
  for (const b of view.page.querySelectorAll("[data-toggle]")) {
    b.setAttribute("aria-pressed", String(b.dataset.toggle === "cp" ? view.showPath : view.adjust));
  }
}

/**
 * Which spans the find box matches, in the order of the rows (the whole tree, folded or
 * not), and which rows stay when only matches are shown: each match and its ancestors.
 * Worked out again only when the find changes, not on every click.
 */
function findMatches(params) {
  const key = `${params.get("find") || ""}\u0000${params.get("errors") === "1"}`;
  view.only = params.get("only") === "1";
  if (key === view.findKey) return;
  view.findKey = key;
  view.find = compile(params.get("find"), params.get("errors") === "1");
  const n = view.spans.length;
  view.isMatch = new Uint8Array(n);
  view.keep = new Uint8Array(n);
  view.matches = [];
  if (!view.find.active) {
    view.keep.fill(1);
    return;
  }
  // Every span in row order, as if nothing were folded.
  for (const i of flatten(new Set())) {
    if (!view.find.test(view.spans[i])) continue;
    view.isMatch[i] = 1;
    view.matches.push(i);
    for (let a = i; a >= 0 && !view.keep[a]; a = parentOf(a)) view.keep[a] = 1;
  }
}

/** The find box over the time line: the text, errors only, only matches, and the steps. */
function findBar(params) {
  const form = h("form.find", { role: "search", "aria-label": "find spans in this trace" },
    h("input", { name: "find", type: "search", value: params.get("find") || "", spellcheck: "false",
      placeholder: "find spans: text, service:web, name:GET, http.status_code=500, >10ms  (press /)",
      "aria-label": "find spans" }),
    h("label.check", {}, h("input", { type: "checkbox", name: "errors", checked: params.get("errors") === "1" }), "errors only"),
    h("label.check", {}, h("input", { type: "checkbox", name: "only", checked: params.get("only") === "1" }), "only matches"),
    h("span.find-count", { "aria-live": "polite" }),
    h("button", { type: "button", "data-match": "prev", title: "previous match (shift+Enter)", onclick: () => stepMatch(-1) }, "◀"),
    h("button", { type: "button", "data-match": "next", title: "next match (Enter)", onclick: () => stepMatch(1) }, "▶"));
  const submit = () => set({
    find: form.elements.find.value.trim(), errors: form.elements.errors.checked ? "1" : "",
    only: form.elements.only.checked ? "1" : "",
  });
  let typing = null;
  form.elements.find.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(submit, 250);
  });
  // Enter in the box goes to the next match once the find is in the URL.
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    clearTimeout(typing);
    if ((view.params.get("find") || "") !== form.elements.find.value.trim()) submit();
    else stepMatch(1);
  });
  form.elements.find.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && ev.shiftKey) {
      ev.preventDefault();
      stepMatch(-1);
    }
  });
  for (const box of [form.elements.errors, form.elements.only]) box.addEventListener("change", submit);
  return form;
}

/** Chooses the next (or previous) match after the chosen span, wrapping around. */
function stepMatch(by) {
  const m = view.matches;
  if (!m.length) return;
  const at = m.indexOf(view.selected);
  const k = at < 0 ? (by > 0 ? 0 : m.length - 1) : (at + by + m.length) % m.length;
  set({ span: view.spans[m[k]].span_id, step: "" });
}

/** "3 of 12 matches", or why the find cannot be read. */
function drawFindCount() {
  const out = view.el.find.querySelector(".find-count");
  const f = view.find;
  out.classList.toggle("err", !!f.error);
  if (f.error) out.textContent = f.error;
  else if (!f.active) out.textContent = "";
  else {
    const at = view.matches.indexOf(view.selected);
    out.textContent = `${at >= 0 ? `${count(at + 1)} of ` : ""}${count(view.matches.length)} match${view.matches.length === 1 ? "" : "es"}`;
  }
  for (const b of view.el.find.querySelectorAll("[data-match]")) b.disabled = !view.matches.length;
}

/** The chosen view: the time line, or the flame graph or span table in its place. */
function drawOther() {
  const timeline = !view.show;
  view.el.timeline.hidden = !timeline;
  if (view.el.linesPanel) view.el.linesPanel.hidden = !timeline;
  for (const b of view.page.querySelectorAll("[data-view]")) b.setAttribute("aria-pressed", String(b.dataset.view === view.show));
  if (timeline) {
    view.el.other.replaceChildren();
    return;
  }
  const selfOf = (i) => view.selfNs.get(view.spans[i].span_id) ?? view.spans[i].end - view.spans[i].start;
  // Both stay valid for the view's life: the trace on screen does not change under them.
  const showSpans = (g) => set({ view: "", find: `${quoted("service:", g.service)} ${quoted("name:", g.name)}`, only: "", span: "" });
  if (view.show === "flame") {
    view.flame ||= stacks(view.spans, view.children, view.roots, selfOf);
    const focus = Number(view.params.get("frame")) || 0;
    fill(view.el.other, flameGraph(view.flame, focus, { choose: (k) => set({ frame: k > 0 ? String(k) : "" }), find: showSpans }));
  } else {
    view.groups ||= groups(view.spans, selfOf);
    fill(view.el.other, spanTable(view.groups, view.params.get("sort") || "-self", { sortBy: (o) => set({ sort: o }), find: showSpans }));
  }
}

function parentOf(i) {
  const p = view.spans[i].parent_id;
  return p != null && view.byId.has(p) ? view.byId.get(p) : -1;
}

/** The rows in order: a depth-first walk that skips the subtrees in `folded`. */
function flatten(folded = view.collapsed) {
  const out = [];
  const stack = [...view.roots].reverse();
  const seen = new Uint8Array(view.spans.length);
  while (stack.length) {
    const i = stack.pop();
    if (seen[i]) continue;
    seen[i] = 1;
    out.push(i);
    if (folded.has(i)) continue;
    const kids = view.children[i];
    for (let k = kids.length - 1; k >= 0; k--) stack.push(kids[k]);
  }
  return out;
}

/** Changes URL state; the router calls `update`, which redraws without a fetch. */
function set(changes) {
  const p = new URLSearchParams(view.params);
  for (const [k, v] of Object.entries(changes)) {
    if (v == null || v === "") p.delete(k);
    else p.set(k, v);
  }
  go("trace", view.id, p, { replace: true });
}

function header(v) {
  const root = v.spans[v.roots[0]];
  const services = new Set(v.spans.map((s) => s.service));
  const errors = v.spans.filter((s) => s.status && s.status.code === "error").length;
  const maxDepth = v.depth.reduce((a, b) => Math.max(a, b), 0) + 1;
  const toggle = (key, label, on, title) => h("button.toggle", { type: "button", "data-toggle": key, "aria-pressed": String(on), title,
    onclick: () => key === "cp" ? set({ cp: v.showPath ? "0" : "" }) : set({ adjust: v.adjust ? "none" : "", zoom: "" }) }, label);
  const offsets = v.adjust
    ? (v.offsets.some((o) => o.offsetNs !== 0)
      ? ["Clock offsets applied: ", v.offsets.filter((o) => o.offsetNs !== 0).map((o) => h("span.offset", { title: `from ${o.edges} edge(s) into this host` },
          `${o.host} ${o.offsetNs >= 0 ? "+" : ""}${duration(o.offsetNs)}`, o.reason ? h("span.why", {}, ` because ${o.reason}`) : ""))]
      : ["Clocks agree: no offset applied."])
    : ["Raw times, as each host's clock recorded them."];
  return h("div.trace-head", {},
    h("h1", {}, h("b", {}, root.service), " ", root.name, " ", h("code.id", {}, traceIdText(v.body.trace_id || v.id))),
    h("p.summary", {},
      `${instant(v.t0)} · `, h("span.durations", {}, durations(v)), ` · ${count(v.spans.length)} spans · ${services.size} services · depth ${maxDepth}`,
      errors ? h("span.err", {}, ` · ${count(errors)} errors`) : "",
      v.body.orphans && v.body.orphans.length ? ` · ${v.body.orphans.length} spans whose parent is missing` : "",
      inferredNote(v.spans)),
    h("div.toolbar", {},
      toggle("cp", "Critical path", v.showPath, "highlight the spans that the request waited on"),
      toggle("skew", "Correct clock skew", v.adjust, "shift each host's times by its estimated clock offset"),
      h("button", { type: "button", onclick: () => set({ collapsed: "" }) }, "Expand all"),
      h("button", { type: "button", onclick: () => set({ collapsed: v.spans.map((s, i) => v.depth[i] === 1 && v.children[i].length ? s.span_id : null).filter(Boolean).join(",") }) }, "Collapse to services"),
      h("button", { type: "button", onclick: () => set({ zoom: "" }), disabled: false }, "Whole trace"),
      h("a.button", { href: link("compare", null, { a: v.id }) }, "Compare with…"),
      h("span.legend", {}, h("i.solid"), "server time ", h("i.hatched"), "network and queueing ", h("i.cp-key"), "critical path")),
    h("div.toolbar", {},
      h("span.views", { role: "group", "aria-label": "view" }, VIEWS.map(([k, label]) =>
        h("button.toggle", { type: "button", "data-view": k, "aria-pressed": String(k === (v.params.get("view") || "")), onclick: () => set({ view: k }) }, label))),
      downloads(v)),
    h("p.offsets", {}, offsets),
    // Where an expectation stopped matching, when the link came from the Expectations page.
    v.params && v.params.get("note") ? h("p.note", { role: "note" }, v.params.get("note")) : "");
}

/**
 * The trace's duration on the times shown, and on the other clock when skew correction
 * changes it: "99 ms skew-corrected (162 ms as recorded)". Raw time = corrected time less
 * its host's offset.
 */
function durations(v) {
  const shown = duration(v.t1 - v.t0);
  const offsets = new Map(v.offsets.map((o) => [o.host, o.offsetNs]));
  const sign = v.adjust ? -1 : 1;
  let a = Infinity, b = -Infinity;
  // (Times past 2^53 come as digit strings: see api.js.)
  for (const s of v.spans) {
    const shift = sign * (offsets.get(s.host) || 0);
    a = Math.min(a, Number(s.start) + shift);
    b = Math.max(b, Number(s.end) + shift);
  }
  if (b - a === v.t1 - v.t0) return shown;
  return v.adjust
    ? `${shown} skew-corrected (${duration(b - a)} as recorded)`
    : `${shown} as recorded (${duration(b - a)} skew-corrected)`;
}

/** The trace as a file: Jaeger's JSON (what Jaeger UI downloads) or OTLP's, as stored. */
function downloads(v) {
  const out = h("span.downloads", {}, "Download ");
  const id = traceIdText(v.body.trace_id || v.id);
  const save = (format, name) => async () => {
    out.querySelector(".state")?.remove();
    try {
      await download(`/api/traces/${encodeURIComponent(id)}/export?format=${format}`, name);
    } catch (e) {
      out.append(state("error", `Download failed: ${e.message || e}`));
    }
  };
  out.append(
    h("button", { type: "button", "data-download": "jaeger", onclick: save("jaeger", `trace-${id}.jaeger.json`) }, "Jaeger JSON"), " ",
    h("button", { type: "button", "data-download": "otlp-json", onclick: save("otlp-json", `trace-${id}.otlp.json`) }, "OTLP JSON"));
  return out;
}

/** Where the spans came from, when not from instrumentation: black-box inference (with
 * the path's probability) or logs. */
function inferredNote(spans) {
  const inferred = spans.filter((s) => s.source && s.source.type === "inferred");
  if (inferred.length) {
    const p = Math.min(...inferred.map((s) => s.source.confidence));
    return h("span.inferred", { title: "causal path inferred from socket calls (WAP5): each span is a message at its receiver" },
      ` · inferred from black-box messages, probability ${p.toFixed(2)}`);
  }
  return spans.some((s) => s.source && s.source.type === "logs") ? h("span.inferred", {}, " · stitched from logs") : "";
}

/** How sure a span's parent link is: recorded by the span's own source, or inferred with
 * its path's probability (a span placed in an instrumented trace by the join says so). */
function parentLinkText(s) {
  const placed = (s.attributes || []).find((a) => a.key === "causeway.parent.confidence");
  if (placed) return `inferred (probability ${Number(placed.value).toFixed(2)})`;
  if (s.source && s.source.type === "inferred") return `inferred (probability ${s.source.confidence.toFixed(2)})`;
  if (s.source && s.source.type === "logs") return "stitched from logs";
  return "recorded";
}

/** A span's source, as the detail panel shows it. */
function sourceText(source) {
  if (!source || source.type === "instrumented") return "instrumented";
  return source.type === "inferred" ? `inferred (probability ${source.confidence.toFixed(2)})` : source.type;
}

let pending = false;
function schedule() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    drawRows();
  });
}

function drawAll() {
  drawOther();
  drawFindCount();
  drawRows();
  drawAxis();
  drawMinimap();
  drawDetail();
  drawPath();
  markLines();
}

/** x of a time in the lane, as a percentage. */
function pct(t) {
  const [z0, z1] = view.zoom;
  const span = view.t1 - view.t0 || 1;
  return ((t - view.t0) / span - z0) / (z1 - z0) * 100;
}

function drawRows() {
  const { scroller, rows } = view.el;
  const first = Math.max(0, Math.floor(scroller.scrollTop / ROW) - OVERSCAN);
  const last = Math.min(view.visible.length, Math.ceil((scroller.scrollTop + scroller.clientHeight) / ROW) + OVERSCAN);
  const out = [];
  for (let r = first; r < last; r++) out.push(row(view.visible[r], r));
  rows.replaceChildren(...out);
}

function row(i, r) {
  const s = view.spans[i];
  const v = view;
  const kids = v.children[i].length;
  const error = s.status && s.status.code === "error";
  const critical = v.onPath[i].length > 0;
  const el = h("div.row", {
    "data-span": s.span_id, "data-index": i, role: "row", tabindex: "0",
    class: [i === v.selected && "selected", error && "error", v.showPath && critical && "critical",
      v.find.active && (v.isMatch[i] ? "match" : "dim")].filter(Boolean).join(" "),
    style: { top: `${r * ROW}px` },
  });
  const label = h("div.label", { style: { paddingLeft: `${4 + v.depth[i] * 14}px` } },
    kids ? h("button.fold", { type: "button", "data-fold": s.span_id, "aria-expanded": String(!v.collapsed.has(i)), title: `${kids} children` }, v.collapsed.has(i) ? "▸" : "▾") : h("span.leaf"),
    h("span.dot", { style: { background: serviceColor(s.service) } }),
    h("span.svc", {}, s.service), " ", h("span.op", {}, s.name === "causeway.log_records" ? "log lines (their span not received)" : s.name),
    v.collapsed.has(i) ? h("span.hidden-count", {}, ` +${descendants(i)}`) : "");
  const lane = h("div.lane");
  const left = pct(s.start), right = pct(s.end);
  const bar = h(`div.bar.kind-${s.kind}`, { style: { left: `${left}%`, width: `max(1px, ${right - left}%)`, "--c": serviceColor(s.service) } });
  const srv = v.server[i];
  if (srv >= 0) {
    // The client's bar is hatched (network and queueing); the part its server spent is solid.
    bar.classList.add("rpc");
    const t = v.spans[srv];
    const w = s.end - s.start || 1;
    const a = Math.max(0, (t.start - s.start) / w * 100), b = Math.min(100, (t.end - s.start) / w * 100);
    bar.append(h("div.server-part", { style: { left: `${a}%`, width: `${Math.max(0, b - a)}%` } }));
  }
  lane.append(bar);
  if (v.showPath) {
    for (const c of v.onPath[i]) {
      const a = pct(c.start), b = pct(c.end);
      lane.append(h("div.cp", { style: { left: `${a}%`, width: `max(1px, ${b - a}%)` } }));
    }
  }
  for (const e of s.events || []) lane.append(h(isLogLine(e) ? "span.event.log" : "span.event", { style: { left: `${pct(e.time)}%` }, title: e.name }));
  lane.append(durationLabel(left, right, duration(s.end - s.start)));
  el.append(label, lane);
  return el;
}

/**
 * A bar's duration, where it fits whole: after the bar, else before it, else inside it at
 * its start (over a backing that keeps it legible). Never across the lane's edge, which
 * would clip "7 ms" to "ms".
 */
function durationLabel(left, right, text) {
  if (right <= 85) return h("span.dur", { style: { left: `${Math.max(0, right)}%` } }, text);
  if (left >= 15) return h("span.dur", { style: { right: `${100 - left}%` } }, text);
  return h("span.dur.inside", { style: { left: `${Math.max(0, left)}%` } }, text);
}

function descendants(i) {
  let n = 0;
  const stack = [...view.children[i]];
  while (stack.length) {
    const c = stack.pop();
    n++;
    stack.push(...view.children[c]);
  }
  return n;
}

function onRowClick(ev) {
  const fold = ev.target.closest("[data-fold]");
  if (fold) {
    const i = view.byId.get(fold.dataset.fold);
    const c = new Set(view.collapsed);
    if (c.has(i)) c.delete(i);
    else c.add(i);
    set({ collapsed: [...c].map((k) => view.spans[k].span_id).join(","), span: c.has(i) && isUnder(view.selected, i) ? "" : view.params.get("span") });
    return;
  }
  const r = ev.target.closest(".row");
  if (r) set({ span: r.dataset.span === view.params.get("span") ? "" : r.dataset.span, step: "" });
}

function isUnder(i, ancestor) {
  for (let p = i >= 0 ? parentOf(i) : -1; p >= 0; p = parentOf(p)) if (p === ancestor) return true;
  return false;
}

function scrollToSelected() {
  if (view.selected < 0) return;
  const r = view.visible.indexOf(view.selected);
  const { scroller } = view.el;
  const top = r * ROW;
  if (top < scroller.scrollTop || top + ROW > scroller.scrollTop + scroller.clientHeight) {
    scroller.scrollTop = Math.max(0, top - scroller.clientHeight / 3);
    drawRows();
  }
}

/** Tick marks at a round step, labelled from the trace's start. */
function drawAxis() {
  const [z0, z1] = view.zoom;
  const total = view.t1 - view.t0;
  const from = total * z0, to = total * z1;
  const span = to - from || 1;
  const raw = span / 6;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const ticks = [];
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) {
    ticks.push(h("span.tick", { style: { left: `${(t - from) / span * 100}%` } }, duration(t)));
  }
  view.el.axis.replaceChildren(...ticks);
}

/** Every span as a line, the zoomed part boxed: where the time went at a glance. */
function drawMinimap() {
  const c = view.el.minimap;
  const width = c.parentElement.clientWidth || 800;
  c.width = width;
  const ctx = c.getContext("2d");
  ctx.clearRect(0, 0, c.width, c.height);
  const n = view.visible.length;
  const total = view.t1 - view.t0 || 1;
  const rowH = c.height / Math.max(n, 1);
  for (let r = 0; r < n; r++) {
    const s = view.spans[view.visible[r]];
    ctx.fillStyle = view.showPath && view.onPath[view.visible[r]].length ? "#d0342c" : serviceColor(s.service);
    const x = (s.start - view.t0) / total * width;
    ctx.fillRect(x, r * rowH, Math.max(1, (s.end - s.start) / total * width), Math.max(1, rowH));
  }
  const [z0, z1] = view.zoom;
  if (z0 > 0 || z1 < 1) {
    ctx.fillStyle = "rgba(0,0,0,0.12)";
    ctx.fillRect(0, 0, z0 * width, c.height);
    ctx.fillRect(z1 * width, 0, width - z1 * width, c.height);
  }
}

function zoomByDragging(c) {
  let from = null;
  const at = (ev) => Math.min(1, Math.max(0, (ev.clientX - c.getBoundingClientRect().left) / c.clientWidth));
  c.addEventListener("mousedown", (ev) => { from = at(ev); });
  c.addEventListener("mouseup", (ev) => {
    if (from == null) return;
    const to = at(ev);
    const [a, b] = [Math.min(from, to), Math.max(from, to)];
    from = null;
    if (b - a > 0.005) set({ zoom: `${a.toFixed(4)},${b.toFixed(4)}` });
  });
  c.addEventListener("dblclick", () => set({ zoom: "" }));
}

function drawDetail() {
  const d = view.el.detail;
  if (view.selected < 0) {
    d.replaceChildren(h("p.hint", {}, "Click a span for its attributes, events and timing."));
    return;
  }
  const i = view.selected;
  const s = view.spans[i];
  const rel = (t) => `+${duration(t - view.t0)}`;
  const self = view.selfNs.get(s.span_id);
  const onPath = view.onPath[i].reduce((a, c) => a + (c.end - c.start), 0);
  const rows = [
    ["Service", s.service], ["Span", s.name], ["Kind", s.kind],
    ["Host", `${s.host || "–"} · pid ${s.pid || "–"} · thread ${s.execution_unit ?? "–"}`],
    ["Start", `${rel(s.start)} (${instant(s.start)})`], ["Duration", duration(s.end - s.start)],
    ["Self time", self != null ? duration(self) : "–"],
    ["On the critical path", onPath ? duration(onPath) : "no"],
    ["Status", s.status ? s.status.code + (s.status.message ? `: ${s.status.message}` : "") : "unset"],
    ["Source", sourceText(s.source)],
  ];
  if (s.parent_id) rows.push(["Parent link", parentLinkText(s)]);
  const srv = view.server[i];
  if (srv >= 0) {
    const t = view.spans[srv];
    const server = t.end - t.start, all = s.end - s.start;
    rows.push(["Server time", `${duration(server)} in ${t.service}`], ["Network and queueing", duration(Math.max(0, all - server))]);
  }
  const offset = view.offsets.find((o) => o.host === s.host);
  if (offset && offset.offsetNs !== 0 && view.adjust) {
    rows.push(["Clock offset", `${duration(offset.offsetNs)} added to ${s.host}'s times${offset.reason ? `, because ${offset.reason}` : ""}`]);
  }
  const kv = (list) => h("table.kv", {}, list.map(({ key, value }) => h("tr", {}, h("th", {}, key), h("td", {}, text(value)))));
  fill(d,
    h("h3", {}, s.name),
    h("table.kv", {}, rows.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, v)))),
    s.attributes && s.attributes.length ? [h("h4", {}, "Attributes"), kv(s.attributes)] : h("p.hint", {}, "No attributes."),
    eventTable("Events", (s.events || []).filter((e) => !isLogLine(e)), rel),
    eventTable("Logs", (s.events || []).filter(isLogLine), rel),
    s.messages && s.messages.length ? [h("h4", {}, "Messages"), h("table.kv", {}, s.messages.map((m) => h("tr", {},
      h("th", {}, rel(m.time)), h("td", {}, `${m.direction} ${m.peer ? "to/from " + m.peer : ""} (${m.size ?? "?"} bytes)`))))] : "",
    s.links && s.links.length ? [h("h4", {}, "Links"), h("ul", {}, s.links.map((l) => h("li", {}, h("a", { href: link("trace", l.trace_id, { span: l.span_id }) }, `${traceIdText(l.trace_id)}/${l.span_id}`))))] : "",
    h("p.ids", {}, `span ${s.span_id}`, s.parent_id ? ` · parent ${s.parent_id}` : ""));
}

/** Every log line of the trace in time order, each with its span: a request stitched
 * from logs reads as its services wrote it, one after another. (A span stitched from
 * logs holds nothing but its lines.) */
function logLines(v) {
  const out = [];
  v.spans.forEach((s, i) => {
    const stitched = s.source && s.source.type === "logs";
    for (const e of s.events || []) if (stitched || isLogLine(e)) out.push({ span: i, e });
  });
  return out.sort((a, b) => a.e.time - b.e.time || a.span - b.span);
}

/** The trace's log lines in order (the first LINES_LISTED), each opening its span. */
function linesPanel(lines) {
  const shown = lines.slice(0, LINES_LISTED);
  const open = (i) => set({ span: view.spans[i].span_id, step: "" });
  view.el.lines = h("tbody", {}, shown.map(({ span, e }) => {
    const s = view.spans[span];
    const level = (e.attributes || []).find((a) => a.key === "level");
    return h("tr.row-link", { "data-span": s.span_id, tabindex: "0", onclick: () => open(span),
      onkeydown: (ev) => { if (ev.key === "Enter") open(span); } },
      h("td.num", {}, `+${duration(e.time - view.t0)}`),
      h("td.svc", {}, h("span.dot", { style: { background: serviceColor(s.service) } }), s.service),
      h("td", {}, level ? h(`span.level.level-${String(level.value).toLowerCase()}`, {}, String(level.value)) : ""),
      h("td.line", {}, h("code", {}, e.name)));
  }));
  return h("section.trace-lines", {},
    h("h2", {}, "Log lines in order ", h("small", {},
      lines.length > shown.length ? `the first ${count(shown.length)} of ${count(lines.length)}` : `${count(lines.length)} lines`)),
    h("p.hint", {}, "Every line of the request as its services wrote it; a click opens the line's span."),
    h("table.grid.lines", {}, h("thead", {}, h("tr", {}, ["At", "Service", "Level", "Line"].map((c, k) => h("th", { class: k === 0 ? "num" : "" }, c)))), view.el.lines));
}

/** Marks the lines of the chosen span. */
function markLines() {
  if (!view.el.lines) return;
  const chosen = view.selected >= 0 ? String(view.spans[view.selected].span_id) : null;
  for (const tr of view.el.lines.children) tr.classList.toggle("chosen", tr.dataset.span === chosen);
}

/** Whether an event is a log record attached to the span (OTLP logs, log lines with ids). */
function isLogLine(e) {
  return (e.attributes || []).some((a) => a.key === "causeway.source" && a.value === "logs");
}

/** A titled table of events: time, name (a log line's level first), attributes. */
function eventTable(title, events, rel) {
  if (!events.length) return "";
  const shown = (a) => a.key !== "level" && a.key !== "causeway.source";
  return [h("h4", {}, title), h("table.kv", {}, events.map((e) => {
    const level = (e.attributes || []).find((a) => a.key === "level");
    return h("tr", {},
      h("th", {}, rel(e.time)),
      h("td", {},
        level ? h(`span.level.level-${String(level.value).toLowerCase()}`, {}, String(level.value)) : "",
        h("span.event-name", {}, e.name),
        (e.attributes || []).filter(shown).map((a) => h("div.sub", {}, `${a.key} = ${text(a.value)}`))));
  }))];
}

function text(value) {
  return typeof value === "object" && value !== null ? JSON.stringify(value) : String(value);
}

/** The critical path as a list to follow, step by step. */
function drawPath() {
  const p = view.el.path;
  if (!view.showPath) {
    p.replaceChildren();
    return;
  }
  // Consecutive sections of one span are one step, and so are those of an RPC's client
  // span and the server span that answered it: one call, named by its server, the
  // client's share (network and queueing) said apart. Else each call would read as three
  // steps of one name.
  const callOf = (i) => (i >= 0 && view.server[i] >= 0 ? view.server[i] : i);
  const steps = [];
  for (const c of view.sections) {
    const span = callOf(c.span);
    const network = span === c.span ? 0 : c.end - c.start;
    const last = steps[steps.length - 1];
    if (last && last.span === span) {
      last.ns += c.end - c.start;
      last.network += network;
    } else steps.push({ span, ns: c.end - c.start, network, start: c.start });
  }
  // A span can be on the path more than once (before and after a call): the step taken
  // is in the URL, the first of the span's steps otherwise.
  const chosen = callOf(view.selected);
  const step = Number(view.params.get("step"));
  const at = steps[step] && steps[step].span === chosen ? step : steps.findIndex((s) => s.span === chosen);
  const goTo = (k) => set({ span: view.spans[steps[k].span].span_id, step: String(k) });
  fill(p,
    h("h3", {}, "Critical path ", h("small", {}, `${steps.length} steps · ${duration(view.criticalNs)}`)),
    h("div.path-nav", {},
      h("button", { type: "button", "data-step": "prev", disabled: at <= 0, onclick: () => goTo(at - 1) }, "◀ previous"),
      h("button", { type: "button", "data-step": "next", disabled: at >= steps.length - 1, onclick: () => goTo(at + 1) }, at < 0 ? "start ▶" : "next ▶")),
    // A long path lists the steps around the current one; the buttons walk all of them.
    h("ol.steps", { start: window0(at, steps.length) + 1 }, steps.slice(window0(at, steps.length), window0(at, steps.length) + PATH_LIST).map((st, j) => {
      const k = window0(at, steps.length) + j;
      const s = view.spans[st.span];
      return h("li", { class: k === at ? "current" : "", "data-span": s.span_id, tabindex: "0", onclick: () => goTo(k) },
        h("span.dot", { style: { background: serviceColor(s.service) } }), `${s.service} `, h("b", {}, s.name),
        h("span.ns", {}, duration(st.ns), st.network ? h("span.net", {}, ` (network ${duration(st.network)})`) : ""));
    })),
    steps.length > PATH_LIST ? h("p.hint", {}, `${count(PATH_LIST)} of ${count(steps.length)} steps listed`) : "");
}

/** The first step listed: the list shows PATH_LIST steps with the current one near its top. */
function window0(at, n) {
  return Math.max(0, Math.min(n - PATH_LIST, at - 20));
}


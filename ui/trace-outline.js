// A trace too big to send whole (GET /api/traces/{id}/outline): its summary, the first
// steps of its critical path, and an outline of its tree. Each closed row stands for its
// subtree (how many spans, until when, how many failed); opening it fetches the rows
// under it, and a cut list ends in a row that fetches the next of them. Only the rows in
// sight are in the DOM, and only the rows fetched are in memory, so a trace of a million
// spans opens as fast as the server reads it.

import { get } from "./api.js";
import { go } from "./app.js";
import { h, fill, duration, count, instant, state, serviceColor, traceIdText } from "./format.js";
import { spanTable } from "./trace-table.js";

const ROW = 24; // px per row, as the time line's
const OVERSCAN = 15;
/** Rows asked for at once: what a few screens show, and a server answer of a few 100 KB. */
export const OUTLINE_ROWS = 2000;

/** The page of an outline answer; `page.outline` is the state its handlers act on. */
export function outlinePage(id, params, answer, started) {
  const sum = answer.summary;
  const adjust = params.get("adjust") !== "none";
  const byService = params.get("tree") === "services";
  const o = {
    id, adjust, byService, started, sum,
    t0: Number(sum.start), t1: Number(sum.end),
    rows: answer.rows.map(prepare), selected: -1, busy: false, el: {},
  };
  const page = h("section.trace.outline");
  page.outline = o;
  const root = o.rows.find((r) => r.span);
  const errors = Number(sum.errors);
  page.append(h("div.trace-head", {},
    h("h1", {}, root ? [h("b", {}, root.span.service), " ", root.span.name, " "] : "", h("code.id", {}, traceIdText(answer.traceId || id))),
    h("p.summary", {}, `${instant(o.t0)} · ${duration(o.t1 - o.t0)}${adjust ? " skew-corrected" : " as recorded"} · ${count(Number(sum.spans))} spans · ${sum.services.length} services · depth ${sum.depth}`,
      errors ? h("span.err", {}, ` · ${count(errors)} errors`) : ""),
    h("p.note", { role: "note" }, `A trace this big is shown as an outline: ${count(o.rows.length)} of its rows now, each closed one standing for the spans under it. Open a row (click ▸, or → on the keyboard) to see them.`,
      byService ? " Collapsed to services: each row is where a service's work begins, its own spans below it folded in." : ""),
    h("div.toolbar", {},
      h("button.toggle", { type: "button", "data-toggle": "skew", "aria-pressed": String(adjust), title: "shift each host's times by its estimated clock offset",
        onclick: () => go("trace", id, withChange(params, "adjust", adjust ? "none" : "")) }, "Correct clock skew"),
      h("button.toggle", { type: "button", "data-toggle": "services", "aria-pressed": String(byService),
        title: "each row a service's entry, its own spans below it folded in",
        onclick: () => go("trace", id, withChange(params, "tree", byService ? "" : "services")) }, "Collapse to services"))));
  const rows = h("div.rows-inner");
  const scroller = h("div.rows", { tabindex: "0", "aria-label": "spans" }, rows);
  o.el = { rows, scroller, detail: h("aside.detail", {}, h("p.hint", {}, "Click a span for its attributes and timing.")) };
  scroller.addEventListener("scroll", () => requestAnimationFrame(() => draw(o)));
  rows.addEventListener("click", (ev) => onClick(o, ev));
  scroller.addEventListener("keydown", (ev) => onKey(o, ev));
  page.append(h("div.trace-body", {},
    h("div.timeline", {}, h("div.overview", {}, h("div.label-head", {}, "Service and span"), h("div.lane-head", {}, duration(o.t1 - o.t0))), scroller),
    h("div.side", {}, pathList(o, answer.criticalPath), servicesTable(sum.services), o.el.detail)));
  page.append(groupsSection(sum));
  return page;
}

/** Draws the rows in sight once the page is in the document. */
export function outlineMounted(page) {
  const o = page.outline;
  draw(o);
  requestAnimationFrame(() => {
    // How long opening took, from the request to the first drawn rows (BENCHMARKS.md).
    window.causewayTiming = { trace: o.id, spans: Number(o.sum.spans), rows: o.rows.length, openMs: performance.now() - o.started };
  });
}

function withChange(params, key, value) {
  const p = new URLSearchParams(params);
  if (value) p.set(key, value);
  else p.delete(key);
  return p;
}

function prepare(r) {
  if (r.span) {
    r.span.start = Number(r.span.start);
    r.span.end = Number(r.span.end);
    r.subtreeEnd = Number(r.subtreeEnd);
  }
  return r;
}

function pct(o, t) {
  return (t - o.t0) / (o.t1 - o.t0 || 1) * 100;
}

function draw(o) {
  const { scroller, rows } = o.el;
  rows.style.height = `${o.rows.length * ROW}px`;
  const first = Math.max(0, Math.floor(scroller.scrollTop / ROW) - OVERSCAN);
  const last = Math.min(o.rows.length, Math.ceil((scroller.scrollTop + scroller.clientHeight) / ROW) + OVERSCAN);
  const out = [];
  for (let k = first; k < last; k++) out.push(rowElement(o, o.rows[k], k));
  rows.replaceChildren(...out);
}

function rowElement(o, r, k) {
  const top = { top: `${k * ROW}px` };
  if (r.more != null) {
    return h("div.row.more", { "data-row": k, role: "row", style: top },
      h("div.label", { style: { paddingLeft: `${4 + r.depth * 14}px` } },
        h("button.more", { type: "button", "data-more": k }, `${count(Number(r.more))} more here: show the next ${count(Math.min(Number(r.more), OUTLINE_ROWS))}`)),
      h("div.lane"));
  }
  const s = r.span;
  const error = s.status && s.status.code === "error";
  const el = h("div.row", {
    "data-span": s.span_id, "data-row": k, role: "row", tabindex: "-1",
    class: [k === o.selected && "selected", error && "error", !r.open && r.descendants > 0 && "closed"].filter(Boolean).join(" "),
    style: top,
  });
  const hidden = r.open ? "" : Number(r.descendants);
  el.append(
    h("div.label", { style: { paddingLeft: `${4 + r.depth * 14}px` } },
      r.children > 0
        ? h("button.fold", { type: "button", "data-fold": k, "aria-expanded": String(r.open), title: `${count(r.children)} children` }, r.open ? "▾" : "▸")
        : h("span.leaf"),
      h("span.dot", { style: { background: serviceColor(s.service) } }),
      h("span.svc", {}, s.service), " ", h("span.op", {}, s.name),
      hidden ? h("span.hidden-count", { title: "spans under this one" }, ` +${count(hidden)}`) : "",
      hidden && r.subtreeErrors > 0 ? h("span.err", {}, ` ${count(r.subtreeErrors)} failed`) : ""));
  const lane = h("div.lane");
  const left = pct(o, s.start), right = pct(o, s.end);
  if (hidden && r.subtreeEnd > s.end) {
    // A closed subtree that outlasts its span: how far it reaches, faintly.
    lane.append(h("div.subtree-extent", { style: { left: `${left}%`, width: `${pct(o, r.subtreeEnd) - left}%` } }));
  }
  lane.append(h(`div.bar.kind-${s.kind}`, { style: { left: `${left}%`, width: `max(1px, ${right - left}%)`, "--c": serviceColor(s.service) } }));
  const label = duration(s.end - s.start);
  lane.append(right <= 85
    ? h("span.dur", { style: { left: `${Math.max(0, right)}%` } }, label)
    : h("span.dur", { style: { right: `${100 - Math.min(left, 85)}%` } }, label));
  el.append(lane);
  return el;
}

async function onClick(o, ev) {
  const fold = ev.target.closest("button.fold");
  const more = ev.target.closest("button.more");
  if (fold) return toggle(o, Number(fold.dataset.fold));
  if (more) return showMore(o, Number(more.dataset.more));
  const row = ev.target.closest(".row[data-span]");
  if (row) select(o, Number(row.dataset.row));
}

function onKey(o, ev) {
  const k = o.selected;
  const r = o.rows[k];
  if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
    ev.preventDefault();
    select(o, Math.min(o.rows.length - 1, Math.max(0, k + (ev.key === "ArrowDown" ? 1 : -1))));
  } else if (r && r.span && ((ev.key === "ArrowRight" && !r.open) || (ev.key === "ArrowLeft" && r.open)) && r.children > 0) {
    ev.preventDefault();
    toggle(o, k);
  } else if (r && r.more != null && ev.key === "Enter") {
    ev.preventDefault();
    showMore(o, k);
  }
}

function select(o, k) {
  o.selected = k;
  const r = o.rows[k];
  const { scroller } = o.el;
  if (k * ROW < scroller.scrollTop) scroller.scrollTop = k * ROW;
  else if ((k + 1) * ROW > scroller.scrollTop + scroller.clientHeight) scroller.scrollTop = (k + 1) * ROW - scroller.clientHeight;
  draw(o);
  if (r && r.span) detail(o, r);
}

/** Fetches rows under a span (from its `from`th child on). */
async function fetchRows(o, under, from) {
  const params = { rows: OUTLINE_ROWS, ...(o.adjust ? { adjust: "skew" } : {}), ...(o.byService ? { tree: "services", reuse: "1" } : {}),
    ...(from ? { from } : {}), ...(under ? { under } : {}) };
  const answer = await get(`/api/traces/${encodeURIComponent(o.id)}/outline`, params);
  return answer.rows.map(prepare);
}

/** Opens a closed row (its rows fetched) or closes an open one (its rows dropped). */
async function toggle(o, k) {
  const r = o.rows[k];
  if (!r || !r.span || o.busy) return;
  if (r.open) {
    let end = k + 1;
    while (end < o.rows.length && o.rows[end].depth > r.depth) end++;
    o.rows.splice(k + 1, end - k - 1);
    r.open = false;
  } else {
    o.busy = true;
    try {
      const below = await fetchRows(o, r.span.span_id, 0);
      o.rows.splice(k + 1, 0, ...below);
      r.open = true;
    } catch (e) {
      o.el.detail.replaceChildren(state("error", `Could not open the row: ${e.message || e}`));
    } finally {
      o.busy = false;
    }
  }
  if (o.selected > k && !r.open) o.selected = k;
  draw(o);
}

/** Replaces a "more" row by the next rows of its list. */
async function showMore(o, k) {
  const r = o.rows[k];
  if (!r || r.more == null || o.busy) return;
  o.busy = true;
  try {
    const next = await fetchRows(o, r.parent, r.from);
    o.rows.splice(k, 1, ...next);
  } catch (e) {
    o.el.detail.replaceChildren(state("error", `Could not list more: ${e.message || e}`));
  } finally {
    o.busy = false;
  }
  draw(o);
}

function detail(o, r) {
  const s = r.span;
  const rows = [
    ["Service", s.service], ["Span", s.name], ["Kind", s.kind], ["Host", s.host || "–"],
    ["Start", `+${duration(s.start - o.t0)} (${instant(s.start)})`], ["Duration", duration(s.end - s.start)],
    ["Status", s.status ? s.status.code + (s.status.message ? `: ${s.status.message}` : "") : "unset"],
    ["Below it", `${count(Number(r.descendants))} spans in ${count(r.children)} ${o.byService ? "calls into other services" : "children"}, until +${duration(r.subtreeEnd - o.t0)}, ${count(Number(r.subtreeErrors))} failed`],
  ];
  const kv = (list) => h("table.kv", {}, list.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, String(v)))));
  fill(o.el.detail,
    h("h3", {}, s.name),
    kv(rows),
    s.attributes && s.attributes.length
      ? [h("h4", {}, "Attributes"), kv(s.attributes.map(({ key, value }) => [key, typeof value === "object" ? JSON.stringify(value) : value]))]
      : h("p.hint", {}, "No attributes."),
    h("p.ids", {}, `span ${s.span_id}`, s.parent_id ? ` · parent ${s.parent_id}` : ""));
}

/** The critical path's first steps, as the server listed them. */
function pathList(o, cp) {
  const steps = cp.sections || [];
  const total = Number(cp.sectionCount || 0);
  return h("div.path", {},
    h("h3", {}, `Critical path: ${duration(Number(cp.durationNs || 0))} in ${count(total)} steps`),
    h("ol.steps", {}, steps.map((c) => h("li", {},
      h("span.dot", { style: { background: serviceColor(c.service) } }), `${c.service} ${c.name} `,
      h("span.dur", {}, duration(Number(c.end) - Number(c.start)))))),
    total > steps.length ? h("p.hint", {}, `The first ${count(steps.length)} of ${count(total)} steps.`) : "");
}

/** The span table over the whole trace, from the server's groups; sorted in place. */
function groupsSection(sum) {
  const allSelf = sum.groups.reduce((a, g) => a + Number(g.selfNs), 0);
  const list = sum.groups.map((g) => ({
    service: g.service, name: g.name, count: Number(g.count), errors: Number(g.errors),
    self: Number(g.selfNs), total: Number(g.totalNs), max: Number(g.maxNs),
    selfShare: allSelf ? Number(g.selfNs) / allSelf : 0,
  }));
  const section = h("section.outline-groups", {}, h("h2", {}, "Spans by service and name"));
  const draw = (order) => {
    section.querySelector(".span-table")?.remove();
    section.append(spanTable(list, order, { sortBy: draw, find: null }));
    if (Number(sum.groupsOmitted)) section.querySelector(".span-table .hint").append(` The ${count(list.length)} with the most self time are listed; ${count(Number(sum.groupsOmitted))} more are not.`);
  };
  draw("-self");
  return section;
}

/** Every service of the trace: what the rows not fetched hold. */
function servicesTable(services) {
  return h("div.outline-services", {},
    h("h3", {}, "Services"),
    h("table.services", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Service"), h("th.num", {}, "Spans"), h("th.num", {}, "Errors"), h("th.num", {}, "Self time"))),
      h("tbody", {}, services.map((s) => h("tr", { "data-service": s.service },
        h("td", {}, h("span.dot", { style: { background: serviceColor(s.service) } }), s.service),
        h("td.num", {}, count(Number(s.spans))), h("td.num", {}, count(Number(s.errors))), h("td.num", {}, duration(Number(s.selfNs))))))));
}

// Search and patterns, Dapper's workflow: choose a service, a window, optional span name
// and attribute filters and a cost metric; see the execution patterns (or the traces)
// that match, and open one. Sorting a table redraws it in place: the patterns are sorted
// in the browser, the traces by the server over the whole window (`order=`), the page
// saying "N of M" and paging through the rest (`offset=`). Above both, the window's
// duration scatter: a region dragged on it (`sel=`), the slowest 5% or the errors
// (`selErrors=1`) is compared with the rest of the window (differences.js), in place.

import { get } from "./api.js";
import { go, link } from "./app.js";
import { h, fill, duration, count, instant, lookbackSelect, state, serviceColor, shortId, SOURCES } from "./format.js";
import { scatterChart, slowest } from "./scatter.js";
import { selectionOf, selParam, differencesPanel } from "./differences.js";

/** The parameters the form owns; the rest of the URL (tab, order) is the table's. */
const FILTERS = ["service", "operation", "tags", "lookback", "start", "end", "minDuration", "maxDuration", "error", "source", "traceMinDuration", "traceMaxDuration"];

/** The patterns tab's cost metrics, by their API names. */
const COSTS = { count: "count", total: "total time", tail: "tail latency (p99)" };

/** The traces tab's order when the URL names none: newest first, as the index answers. */
const TRACES_ORDER = "-start";

/**
 * The results on the page: what they were fetched for (everything but the order), and how
 * to sort them anew. A click on a column head changes only the order, and re-sorts the
 * table in place: the patterns in the browser, the traces on the server (the whole window).
 */
let shown = null;
let sorts = 0;
/** The scatter and the comparison on the page, redrawn in place for a new selection. */
let explored = null;

/** What the page was fetched for: the URL less what is changed in place. */
function shownKey(params) {
  const p = new URLSearchParams(params);
  for (const k of ["order", "offset", "sel", "selErrors"]) p.delete(k);
  p.sort();
  return p.toString();
}

/** The table's order and page. */
function sortKey(params) {
  return `${params.get("order") || ""}@${params.get("offset") || ""}`;
}

/** The selection compared. */
function selKey(params) {
  return `${params.get("sel") || ""}@${params.get("selErrors") || ""}`;
}

/** The page's defaults filled in: the last hour when the URL names no window. */
function withDefaults(params) {
  if (!params.has("lookback") && !params.has("start")) params.set("lookback", "1h");
  return params;
}

export function update(params) {
  withDefaults(params);
  if (!shown || !shown.results.isConnected || shownKey(params) !== shown.key) return false;
  const work = [];
  if (explored && explored.el.isConnected && selKey(params) !== explored.selKey) work.push(explored.reselect(params));
  if (sortKey(params) !== shown.sortKey) {
    shown.sortKey = sortKey(params);
    work.push(shown.resort(params));
  }
  return work.length ? Promise.all(work) : true;
}

export async function render(_id, params) {
  shown = null;
  explored = null;
  withDefaults(params);
  const tab = params.get("tab") === "traces" ? "traces" : "patterns";
  const services = (await get("/api/services")).services || [];
  const service = params.get("service") || "";
  const operations = service
    ? (await get(`/api/services/${encodeURIComponent(service)}/operations`)).operations || []
    : [];
  const page = h("section.search");
  page.append(form(params, services, operations));
  page.append(h("div.tabs", { role: "tablist" },
    ["patterns", "traces"].map((t) => h("a", {
      href: link("search", null, withParam(params, "tab", t === "patterns" ? "" : t)),
      class: t === tab ? "active" : "", role: "tab", "data-tab": t,
    }, t === "patterns" ? "Patterns" : "Traces"))));
  const results = h("div.results");
  page.append(results);
  if (!services.length) {
    results.append(state("empty", "No traces stored yet. Send some (see the README), or run `causeway demo`."));
    return page;
  }
  const explore = h("section.explore", { "aria-label": "duration scatter" });
  page.insertBefore(explore, page.querySelector(".tabs"));
  await Promise.all([
    drawExplore(explore, params),
    tab === "patterns" ? patterns(results, params) : traces(results, params),
  ]);
  if (shown) shown.sortKey = sortKey(params);
  return page;
}

/** The scatter of the window, and the comparison of the selection when there is one. */
async function drawExplore(el, params) {
  const filters = apiWindow(params);
  let body;
  try {
    body = await get("/api/scatter", { ...filters, limit: 2000 });
  } catch (e) {
    // The list below still answers; the chart says why it is missing.
    el.replaceChildren(state("error", `The duration scatter failed: ${e.message || e}`));
    return;
  }
  const choose = (changes) => go("search", null, withParams(params, changes), { replace: true });
  const chart = scatterChart(body, selectionOf(params), {
    select: (region) => choose({ sel: selParam(region), selErrors: "" }),
    open: (id) => go("trace", id, {}),
  });
  const slow = slowest(body, 0.05);
  const tools = h("div.explore-tools", {},
    h("button", { type: "button", "data-select": "slowest", disabled: slow == null,
      onclick: () => choose({ sel: selParam({ minDuration: slow }), selErrors: "" }) }, "Compare the slowest 5%"),
    h("button", { type: "button", "data-select": "errors", onclick: () => choose({ sel: "", selErrors: "1" }) }, "Compare the errors"),
    h("button", { type: "button", "data-select": "clear", onclick: () => choose({ sel: "", selErrors: "" }) }, "Clear the selection"));
  const panel = h("div.differences-slot");
  el.replaceChildren(chart, tools, panel);
  const compare = async (p) => {
    const sel = selectionOf(p);
    tools.querySelector("[data-select=clear]").disabled = !sel;
    chart.querySelector(".scatter-wrap").setSelection?.(sel);
    if (!sel) {
      panel.replaceChildren();
      return;
    }
    panel.setAttribute("aria-busy", "true");
    try {
      panel.replaceChildren(await differencesPanel(sel, filters));
    } catch (e) {
      panel.replaceChildren(state("error", `Comparing failed: ${e.message || e}`));
    }
    panel.removeAttribute("aria-busy");
  };
  explored = {
    el, selKey: selKey(params),
    reselect(p) {
      this.selKey = selKey(p);
      return compare(p);
    },
  };
  await compare(params);
}

function withParams(params, changes) {
  let p = new URLSearchParams(params);
  for (const [k, v] of Object.entries(changes)) p = withParam(p, k, v);
  return p;
}

function withParam(params, key, value) {
  const p = new URLSearchParams(params);
  if (value) p.set(key, value);
  else p.delete(key);
  return p;
}

function filterParams(params) {
  const out = {};
  for (const k of FILTERS) if (params.get(k)) out[k] = params.get(k);
  return out;
}

function form(params, services, operations) {
  const val = (k) => params.get(k) || "";
  const f = h("form.filters", { "aria-label": "search" },
    h("label", {}, "Service",
      h("select", { name: "service" }, h("option", { value: "" }, "any service"),
        services.map((s) => h("option", { value: s, selected: s === val("service") }, s)))),
    h("label", {}, "Span name",
      h("select", { name: "operation" }, h("option", { value: "" }, "any span"),
        operations.map((o) => h("option", { value: o, selected: o === val("operation") }, o)))),
    h("label", {}, "Attributes",
      h("input", { name: "tags", value: val("tags"), placeholder: "key=value key2=value2", spellcheck: "false", list: "attribute-suggestions", autocomplete: "off" }),
      h("datalist", { id: "attribute-suggestions" })),
    h("label", {}, "Window", lookbackSelect(params.get("lookback"))),
    h("label", {}, "Min duration", h("input", { name: "minDuration", value: val("minDuration"), placeholder: "e.g. 100ms", size: 8 })),
    h("label", {}, "Max duration", h("input", { name: "maxDuration", value: val("maxDuration"), placeholder: "e.g. 2s", size: 8 })),
    h("label", {}, "Source",
      h("select", { name: "source" }, h("option", { value: "" }, "any source"),
        Object.entries(SOURCES).map(([v, l]) => h("option", { value: v, selected: v === val("source") }, l)))),
    h("label.check", {}, h("input", { type: "checkbox", name: "error", value: "true", checked: val("error") === "true" }), "errors only"),
    // A selection's traces listed (What is different → List them): the whole trace's
    // duration, kept through the form; unticked, the bound goes.
    ["traceMinDuration", "traceMaxDuration"].filter((k) => val(k)).map((k) =>
      h("label.check.trace-bound", {}, h("input", { type: "checkbox", name: k, value: val(k), checked: true }),
        `trace ${k === "traceMinDuration" ? "at least" : "at most"} ${/^\d+(ns)?$/.test(val(k)) ? duration(Number(val(k).replace(/ns$/, ""))) : val(k)}`)),
    h("label", {}, "Cost",
      h("select", { name: "sort", "aria-label": "cost metric" },
        Object.entries(COSTS).map(([v, l]) =>
          h("option", { value: v, selected: v === (val("sort") || "count") }, l)))),
    h("button", { type: "submit" }, "Search"));
  suggestAttributes(f.elements.tags, f.querySelector("datalist"), params);
  // A new service has other span names: reload the form with it.
  f.elements.service.addEventListener("change", () => submit(f, params, { operation: "" }));
  f.addEventListener("submit", (ev) => {
    ev.preventDefault();
    submit(f, params, {});
  });
  return f;
}

/**
 * Attribute autocomplete: while the word typed has no `=`, the window's keys (of the
 * service chosen) most common first; after `key=`, that key's values. Each answer is
 * asked for once per page.
 */
function suggestAttributes(input, list, params) {
  const asked = new Map();
  // The page's window and filters (the API reads the window and the service of them).
  const scope = apiWindow(params);
  const offer = async () => {
    const text = input.value;
    const cut = text.lastIndexOf(" ") + 1;
    const before = text.slice(0, cut), word = text.slice(cut);
    const eq = word.indexOf("=");
    const key = eq > 0 ? word.slice(0, eq) : "";
    if (!asked.has(key)) asked.set(key, get("/api/attributes", { ...scope, limit: 50, ...(key ? { key } : {}) }).catch(() => ({ seen: [] })));
    const answer = await asked.get(key);
    if (input.value !== text) return; // typed on meanwhile: that input's answer fills it
    // A value with a space cannot be typed in this form (the words are split on spaces).
    const options = (answer.seen || []).filter((s) => !/\s/.test(s.text))
      .map((s) => h("option", { value: key ? `${before}${key}=${s.text}` : `${before}${s.text}=` }, `${count(s.spans)} spans`));
    list.replaceChildren(...options);
    list.dataset.key = key;
  };
  input.addEventListener("focus", offer);
  input.addEventListener("input", offer);
}

function submit(f, params, overrides) {
  const data = { ...Object.fromEntries(new FormData(f).entries()), ...overrides };
  if (!data.lookback) {
    // "all time", or the explicit window a shared link came with.
    data.start = params.get("start") || "0";
    data.end = params.get("end") || "";
  }
  go("search", null, { ...data, tab: params.get("tab") });
}

/** API parameters for a window: "all time" is start=0. */
function apiWindow(params) {
  const p = filterParams(params);
  if (!p.lookback && !p.start) p.start = "0";
  return p;
}

async function patterns(results, params) {
  const body = await get("/api/patterns", { ...apiWindow(params), sort: params.get("sort") || "count", limit: 200 });
  const list = body.patterns || [];
  const total = body.total ?? list.length;
  results.append(h("p.summary", {},
    `${count(body.traces)} traces in ${count(total)} patterns`,
    total > list.length ? ` (the ${count(list.length)} first by ${COSTS[params.get("sort") || "count"]} listed)` : "",
    body.untrackedTraces ? ` (${count(body.untrackedTraces)} traces of rarer shapes not grouped: the memory bound was reached)` : "",
    ` · ${count(body.window.spansScanned)} spans scanned`));
  if (!list.length) {
    results.append(state("empty", "No traces match these filters in this window."));
    return;
  }
  const filters = filterParams(params);
  // Patterns of one root are told apart by what differs from the most common of them.
  const perRoot = new Map();
  for (const p of list) perRoot.set(`${p.rootService} ${p.rootOperation}`, (perRoot.get(`${p.rootService} ${p.rootOperation}`) || 0) + 1);
  const shapeNote = (p) => {
    if (p.distinct && p.distinct.length) return h("span.distinct", {}, p.distinct.map((d) => h("span.change", {}, d)));
    return perRoot.get(`${p.rootService} ${p.rootOperation}`) > 1 ? h("span.distinct.usual", {}, "the usual shape") : "";
  };
  const patternColumns = [
    { key: "pattern", label: "Pattern", value: (p) => `${p.rootService} ${p.rootOperation} ${(p.distinct || []).join(" ")}`,
      cell: (p) => [h("a", { href: link("pattern", p.id, filters) }, h("b", {}, p.rootService), " ", p.rootOperation), shapeNote(p)] },
    { key: "services", label: "Services", value: (p) => p.services.length, cell: (p) => chips(p.services) },
    { key: "spans", label: "Spans", value: (p) => p.spans, num: true },
    { key: "count", label: "Traces", value: (p) => p.count, num: true },
    { key: "errors", label: "Errors", value: (p) => p.errors, num: true },
    { key: "total", label: "Total time", value: (p) => p.totalNs, fmt: duration, num: true },
    { key: "p50", label: "p50", value: (p) => p.latency.p50, fmt: duration, num: true },
    { key: "p99", label: "p99", value: (p) => p.latency.p99, fmt: duration, num: true },
    { key: "max", label: "Max", value: (p) => p.latency.max, fmt: duration, num: true },
  ];
  const draw = (order) => table(patternColumns, sortRows(patternColumns, list, order), order, params, (p) => p.id, "patterns");
  let el = draw(params.get("order") || "");
  results.append(el);
  shown = {
    key: shownKey(params),
    results,
    resort(next) {
      const fresh = draw(next.get("order") || "");
      el.replaceWith(fresh);
      el = fresh;
      return true;
    },
  };
}

/** The traces tab: the whole window sorted on the server, a page of it listed. */
async function traces(results, params) {
  const order = params.get("order") || TRACES_ORDER;
  const fetchPage = (o, offset) => get("/api/search", { ...apiWindow(params), order: o, limit: pageSize(params), offset });
  const body = await fetchPage(order, params.get("offset") || "");
  if (!(body.traces || []).length) {
    results.append(state("empty", "No traces match these filters in this window."));
    return;
  }
  let summary = tracesSummary(body, params);
  let el = tracesTable(body.traces, order, params);
  results.append(summary, el);
  fillCorrected(el, body.traces);
  shown = {
    key: shownKey(params),
    results,
    async resort(next) {
      const o = next.get("order") || TRACES_ORDER;
      const offset = next.get("offset") || "";
      const mine = ++sorts;
      el.setAttribute("aria-busy", "true");
      results.querySelector(".state.error")?.remove();
      try {
        const fresh = await fetchPage(o, offset);
        if (mine !== sorts || !el.isConnected) return;
        const s = tracesSummary(fresh, next), t = tracesTable(fresh.traces || [], o, next);
        summary.replaceWith(s);
        el.replaceWith(t);
        summary = s;
        el = t;
        fillCorrected(el, fresh.traces || []);
      } catch (e) {
        if (mine !== sorts) return;
        el.removeAttribute("aria-busy");
        // Beside the table it could not sort; the table stays as it was.
        results.insertBefore(state("error", `Sorting failed: ${e.message || e}`), el);
      }
    },
  };
}

const TRACE_COLUMNS = [
  { key: "trace", label: "Trace", value: (t) => t.traceId,
    cell: (t) => h("a", { href: link("trace", t.traceId, {}) }, h("code", {}, shortId(t.traceId))) },
  { key: "root", label: "Root", value: (t) => `${t.rootService} ${t.rootOperation}`,
    cell: (t) => t.rootMissing
      // Its root has not been received: name the earliest span, marked as such.
      ? h("span.arriving", { title: "no span of this trace without a parent has arrived yet" },
        h("i", {}, "still arriving: "), h("b", {}, t.rootService), " ", t.rootOperation)
      : [h("b", {}, t.rootService), " ", t.rootOperation] },
  { key: "start", label: "Start", value: (t) => t.start, fmt: instant },
  // The list reads the stored times: a trace page may show less once clock skew is corrected.
  { key: "duration", label: "Duration", title: "as recorded, before clock-skew correction", value: (t) => t.duration, fmt: duration, num: true },
  // Filled in after the list (GET /api/durations): what the trace page shows.
  { key: "corrected", label: "Skew-corrected", title: "after clock-skew correction, as the trace page shows it", fixed: true, num: true,
    cell: () => h("span.corrected", { "aria-busy": "true" }, "…") },
  { key: "spans", label: "Spans", value: (t) => t.spanCount, num: true },
  { key: "errors", label: "Errors", value: (t) => t.errorCount, num: true },
  { key: "services", label: "Services", value: (t) => t.services.length, cell: (t) => chips(t.services.map((s) => s.name)) },
];

/** Each listed trace's skew-corrected duration, asked for once the list is drawn. */
async function fillCorrected(el, list) {
  let body;
  try {
    body = await get("/api/durations", { ids: list.map((t) => t.traceId).join(",") });
  } catch (e) {
    for (const c of el.querySelectorAll(".corrected")) fill(c, "?");
    return;
  }
  const corrected = new Map(body.durations.map((d) => [d.traceId, d]));
  for (const row of el.querySelectorAll("tbody tr[data-id]")) {
    const cell = row.querySelector(".corrected");
    const d = corrected.get(row.dataset.id);
    cell.removeAttribute("aria-busy");
    if (!d || d.corrected == null) fill(cell, "–");
    else if (Number(d.corrected) === Number(d.recorded)) fill(cell, h("span.same", { title: "the clocks agree" }, "same"));
    else fill(cell, duration(Number(d.corrected)));
  }
}

function tracesTable(list, order, params) {
  // The server sorted them: its order is kept as it came.
  return table(TRACE_COLUMNS, list, order, params, (t) => t.traceId, "traces");
}

function chips(names) {
  return h("span.chips", {}, names.map((n) => h("span.chip", { style: { borderColor: serviceColor(n) } }, n)));
}

/** Traces listed a page at a time. */
function pageSize(params) {
  return Number(params.get("limit")) || 100;
}

/** "101–200 of 1,234 traces in the window", and the links to the pages beside. */
function tracesSummary(body, params) {
  const n = (body.traces || []).length;
  const from = body.offset || 0;
  const size = pageSize(params);
  const page = (offset, label, key) => h("a.button", {
    href: link("search", null, withParam(params, "offset", offset > 0 ? String(offset) : "")), "data-page": key,
  }, label);
  const shown = from > 0 || n < body.total
    ? `${count(from + 1)}–${count(from + n)} of ${count(body.total)} traces in the window`
    : `${count(body.total)} traces in the window`;
  return h("p.summary", {},
    shown,
    `, sorted by ${describeOrder(body.order)}`,
    " · sorted on durations as recorded",
    ` · ${count(body.window.spansScanned)} spans scanned`,
    from > 0 || from + n < body.total ? h("span.pages", {},
      from > 0 ? page(Math.max(0, from - size), `◀ previous ${count(size)}`, "previous") : "",
      from + n < body.total ? page(from + size, `next ${count(Math.min(size, body.total - from - n))} ▶`, "next") : "") : "");
}

/** "duration (longest first)" for `-duration`. */
function describeOrder(order) {
  const desc = order.startsWith("-");
  const key = order.replace(/^-/, "");
  const col = TRACE_COLUMNS.find((c) => c.key === key);
  const [up, down] = {
    start: ["oldest first", "newest first"],
    duration: ["shortest first", "longest first"],
    root: ["A to Z", "Z to A"],
    trace: ["A to Z", "Z to A"],
  }[key] || ["fewest first", "most first"];
  return `${col ? col.label.toLowerCase() : key} (${desc ? down : up})`;
}

/** `rows` sorted in the browser by the column named in `order` (`-key` for descending). */
function sortRows(columns, rows, order) {
  const desc = order.startsWith("-");
  const col = columns.find((c) => c.key === order.replace(/^-/, ""));
  if (!col) return rows;
  return [...rows].sort((a, b) => {
    const x = col.value(a), y = col.value(b);
    const c = x < y ? -1 : x > y ? 1 : 0;
    return desc ? -c : c;
  });
}

/**
 * A table of `rows` as given, its column heads links to the other orders (`order` names the
 * current one, `-key` for descending), with a check box per row to pick two for Compare.
 */
function table(columns, rows, order, params, idOf, kind) {
  const desc = order.startsWith("-");
  const col = columns.find((c) => c.key === order.replace(/^-/, ""));
  const picked = new Set();
  const compare = h("button.compare", { type: "button", disabled: true, onclick: () => {
    const [a, b] = [...picked];
    go("compare", null, { a, b });
  } }, "Compare the two checked");
  const head = h("tr", {}, h("th", {}, ""), columns.map((c) => {
    // A column filled in afterwards is not one the server sorts by.
    if (c.fixed) return h("th", { class: c.num ? "num" : "", title: c.title }, c.label);
    // A number's first click sorts the largest first: people look for the slowest.
    const next = col === c ? (desc ? c.key : `-${c.key}`) : c.num ? `-${c.key}` : c.key;
    const mark = col === c ? (desc ? " ▼" : " ▲") : "";
    return h("th", { class: c.num ? "num" : "", "aria-sort": col === c ? (desc ? "descending" : "ascending") : "none" },
      // A new order starts from its first page.
      h("a", { href: link("search", null, withParam(withParam(params, "order", next), "offset", "")), "data-order": next, title: c.title }, c.label + mark));
  }));
  const body = h("tbody", {}, rows.map((r) => h("tr", { "data-id": idOf(r) },
    h("td", {}, h("input", { type: "checkbox", "aria-label": "pick for compare", onchange: (ev) => {
      if (ev.target.checked) picked.add(idOf(r));
      else picked.delete(idOf(r));
      compare.disabled = picked.size !== 2;
    } })),
    columns.map((c) => h("td", { class: c.num ? "num" : "" },
      c.cell ? c.cell(r) : c.fmt ? c.fmt(c.value(r)) : count(c.value(r)))))));
  return h("div.sortable", {}, h("table", { class: `grid ${kind}` }, h("thead", {}, head), body), compare);
}

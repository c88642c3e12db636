// Pivot Tracing: write or pick a query, install it, see which processes acknowledged it,
// and follow its results live as a pivot table: rows and columns chosen from the group
// keys, totals, and a sparkline of each cell over the last intervals (the paper's
// Figure 2c). A cell links to a sampled trace where the query's tracepoints ran.
//
// `#/pivot` lists the installed queries with how many connected processes acknowledged
// each, an editor with the paper's queries as examples (/ui/paper-queries.pivot), Explain
// and Install, and the catalog. `#/pivot/{id}?rows=&cols=&value=` shows who runs the query
// (polled each interval) and its results: the URL chooses the row keys and the column
// keys (each key one or the other; several make combined labels `A · B`) and the
// aggregate. Cells fold the groups they cover (COUNT and SUM add, MIN and MAX compare, an
// AVERAGE over several groups shows `–`), with row, column and grand totals, a sparkline
// of the last 60 intervals of `series`, and a link to an example trace. Results follow
// `/stream` (EventSource), or are polled when a token is needed, since EventSource cannot
// send one.

import { ApiError, get, send, hasToken, parseJson } from "./api.js";
import { go, link } from "./app.js";
import { h, svg, count, state, fill } from "./format.js";

const TEXT_KEY = "causeway.pivot.text";
const AGGREGATE = /^(COUNT|SUM|MIN|MAX|AVERAGE)\b/i;
/** Intervals a sparkline shows, the most recent last. */
const SPARK_POINTS = 60;

/** The query being followed: its results and how they arrive. */
let live = null;

export async function render(id, params) {
  stop();
  return id == null ? index() : queryPage(id, params);
}

export function mounted(page) {
  if (live && live.page === page) follow();
}

export function update(params) {
  if (!live) return false;
  live.params = params;
  draw();
  return true;
}

// ---- The list of queries, the editor and the catalog.

async function index() {
  const [installed, catalog, examples] = await Promise.all([
    get("/api/pivot/queries"),
    get("/api/pivot/tracepoints"),
    fetch("/ui/paper-queries.pivot").then((r) => (r.ok ? r.text() : "")),
  ]);
  const page = h("section.pivot");
  const named = namedQueries(examples);
  const editor = h("textarea.pivot-query", { name: "query", rows: 8, spellcheck: "false", "aria-label": "query" });
  editor.value = localStorage.getItem(TEXT_KEY) ?? (named[0] ? named[0].text : "");
  const pick = h("select", { name: "example", "aria-label": "example query" },
    h("option", { value: "" }, "Pick an example…"),
    named.map((q, i) => h("option", { value: String(i) }, q.name)));
  pick.addEventListener("change", () => {
    const q = named[Number(pick.value)];
    if (q) editor.value = q.text;
  });
  const out = h("div.pivot-answer");
  const act = async (what) => {
    localStorage.setItem(TEXT_KEY, editor.value);
    fill(out);
    try {
      if (what === "install") {
        const r = await send("POST", "/api/pivot/queries", { query: editor.value });
        go("pivot", String(r.id), {});
      } else {
        const r = await send("POST", "/api/pivot/explain", { query: editor.value });
        fill(out, h("h2", {}, "Advice"), h("pre.explain", {}, r.explain));
      }
    } catch (e) {
      fill(out, h("pre.error.form-error", { role: "alert" }, e.message || String(e)));
    }
  };
  const form = h("form.filters.pivot-form", {},
    h("label.wide", {}, "Query (`From x In TRACEPOINT … Select …`)", editor),
    h("label", {}, "Examples (the paper's Q1–Q7)", pick),
    h("button", { type: "submit" }, "Install"),
    h("button.explain", { type: "button", onclick: () => act("explain") }, "Explain"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    act("install");
  });
  page.append(form, out);

  page.append(h("h2", {}, "Installed queries"));
  if (!installed.queries.length) {
    page.append(state("empty", "No query is installed. Write one above, or pick one of the paper's."));
  } else {
    page.append(h("table.grid.pivot-queries", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Query"), h("th", {}, "Text"), h("th", {}, "Processes"), h("th", {}, ""))),
      h("tbody", {}, installed.queries.map((q) => {
        const acked = q.processes.filter((p) => p.acknowledged).length;
        const failed = q.processes.filter((p) => p.error).length;
        return h("tr", { "data-query": q.id },
          h("td", {}, h("a", { href: link("pivot", String(q.id), {}) }, q.name || `#${q.id}`)),
          h("td", {}, h("code", {}, q.query.split("\n")[0] + (q.query.includes("\n") ? " …" : ""))),
          h("td", { class: failed ? "err" : "" }, `${acked} of ${q.processes.length} acknowledged`, failed ? ` · ${failed} failed` : ""),
          h("td", {}, h("button.uninstall", { type: "button", onclick: () => uninstall(q.id) }, "Uninstall")));
      }))));
  }

  page.append(h("h2", {}, "Tracepoints"));
  page.append(h("details.catalog", {},
    h("summary", {}, `${catalog.definitions.length} definitions · ${catalog.total ?? catalog.callsites.length} callsites registered by connected processes` +
      (catalog.total > catalog.callsites.length ? ` (the first ${catalog.callsites.length} listed)` : "")),
    catalog.definitions.map((d) => h("pre.definition", { "data-tracepoint": d.name }, d.text)),
    h("table.grid.callsites", {},
      h("thead", {}, h("tr", {}, ["Kind", "Target", "Name", "Fields", "Processes", "Tracepoints"].map((c) => h("th", {}, c)))),
      h("tbody", {}, catalog.callsites.map((c) => h("tr", {},
        h("td", {}, c.kind), h("td", {}, h("code", {}, c.target)), h("td", {}, c.name),
        h("td", {}, c.fields.join(", ")), h("td", {}, c.processes.join(", ")), h("td", {}, c.tracepoints.join(", "))))))));
  return page;
}

async function uninstall(id) {
  try {
    await send("DELETE", `/api/pivot/queries/${id}`);
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 404) throw e;
  }
  go("pivot", null, {}, { replace: true });
}

/** The named queries of a file: `Name : From ...` or `Name = From ...` blocks. */
function namedQueries(text) {
  const out = [];
  for (const block of text.split(/\n\s*\n/)) {
    const body = block.split("\n").filter((l) => !l.trim().startsWith("--")).join("\n").trim();
    const m = body.match(/^(\w+)\s*[:=]\s*From\b/i);
    if (m) out.push({ name: m[1], text: body });
  }
  return out;
}

// ---- One query: who runs it, and its results.

async function queryPage(id, params) {
  const [q, results] = await Promise.all([
    get(`/api/pivot/queries/${encodeURIComponent(id)}`),
    get(`/api/pivot/queries/${encodeURIComponent(id)}/results`),
  ]);
  const page = h("section.pivot.pivot-view", { "data-query": q.id });
  page.append(h("h1", {}, q.name || `Query ${q.id}`,
    " ", h("button.uninstall", { type: "button", onclick: () => uninstall(q.id) }, "Uninstall")));
  page.append(h("pre.query-text", {}, q.query));
  page.append(h("details", {}, h("summary", {}, "Advice"), h("pre.explain", {}, q.explain)));
  const acks = h("div.pivot-acks");
  page.append(h("h2", {}, "Processes"), acks);
  drawAcks(acks, q);
  const controls = h("form.filters.pivot-controls");
  const table = h("div.pivot-results");
  page.append(h("h2", {}, "Results"), controls, table);
  live = { id: q.id, page, acks, controls, table, results, params, source: null, timer: null, acksTimer: null };
  draw();
  return page;
}

/** Which processes run the query: acknowledged, failed (with why), or not yet. */
function drawAcks(into, q) {
  fill(into, q.processes.length
    ? h("ul.acks", {}, q.processes.map((p) => h("li", {
      "data-proc": p.procName,
      class: p.error ? "err" : p.acknowledged ? "ok" : "pending",
    }, p.error ? "✗ " : p.acknowledged ? "✓ " : "… ", h("b", {}, p.procName), ` (${p.host}, pid ${p.pid})`,
    p.error ? ` — ${p.error}` : p.acknowledged ? "" : " — not yet acknowledged")))
    : state("empty", "No process is connected. Processes report to the hub when CAUSEWAY_PIVOT_HUB names it."));
}

/**
 * Starts following the query: its results by the stream when the browser can open it
 * (else polled), and which processes acknowledged it, polled each interval.
 */
function follow() {
  const mine = live;
  const every = () => Math.max(mine.results.intervalMs || 1000, 250);
  const acks = async () => {
    if (live !== mine || !mine.page.isConnected) return;
    try {
      drawAcks(mine.acks, await get(`/api/pivot/queries/${mine.id}`));
    } catch {
      // Uninstalled or unreachable: the next render says so.
    }
    mine.acksTimer = setTimeout(acks, every());
  };
  mine.acksTimer = setTimeout(acks, every());
  const apply = (r) => {
    if (live !== mine) return;
    if (!mine.page.isConnected) {
      stop();
      return;
    }
    mine.results = r;
    draw();
  };
  if (!hasToken() && typeof EventSource === "function") {
    const source = new EventSource(`/api/pivot/queries/${mine.id}/stream`);
    source.addEventListener("results", (ev) => apply(parseJson(ev.data)));
    mine.source = source;
    return;
  }
  const poll = async () => {
    if (live !== mine) return;
    if (!mine.page.isConnected) {
      stop();
      return;
    }
    try {
      apply(await get(`/api/pivot/queries/${mine.id}/results`));
    } catch {
      // Uninstalled or unreachable: the next render says so.
    }
    mine.timer = setTimeout(poll, every());
  };
  mine.timer = setTimeout(poll, every());
}

function stop() {
  if (!live) return;
  if (live.source) live.source.close();
  clearTimeout(live.timer);
  clearTimeout(live.acksTimer);
  live = null;
}

/** The group keys and aggregates of the result columns. */
function columnsOf(r) {
  const keys = r.columns.filter((c) => !AGGREGATE.test(c));
  const aggs = r.columns.filter((c) => AGGREGATE.test(c));
  return { keys, aggs };
}

/** What the URL chose (`rows` and `cols`: comma-separated group keys), with defaults: all
 * keys but the last as rows, the last as columns. A key is a row or a column, not both. */
function choice(r, params) {
  const { keys, aggs } = columnsOf(r);
  const listed = (name) => (params.get(name) || "").split(",").filter((k) => keys.includes(k));
  const cols = params.has("cols") ? listed("cols") : keys.length > 1 ? [keys[keys.length - 1]] : [];
  const rows = (params.has("rows") ? listed("rows") : keys).filter((k) => !cols.includes(k));
  const value = aggs.includes(params.get("value")) ? params.get("value") : aggs[0];
  return { rows, cols, value };
}

function draw() {
  const { results: r, params, controls, table } = live;
  const { keys, aggs } = columnsOf(r);
  const c = choice(r, params);
  const set = (changes) => {
    const next = { rows: c.rows.join(","), cols: c.cols.join(","), value: c.value, ...changes };
    go("pivot", String(live.id), next, { replace: true });
  };
  // Checking a key on one side takes it off the other.
  const toggle = (side, other, name) => (k) => h("label.check", {},
    h("input", {
      type: "checkbox", name, value: k, checked: c[side].includes(k),
      onchange: (ev) => set({
        [side]: (ev.target.checked ? [...c[side], k] : c[side].filter((x) => x !== k)).join(","),
        [other]: c[other].filter((x) => x !== k).join(","),
      }),
    }), k);
  fill(controls,
    keys.length ? h("fieldset.pivot-rows", {}, h("legend", {}, "Rows"), keys.map(toggle("rows", "cols", "row"))) : null,
    keys.length ? h("fieldset.pivot-cols", {}, h("legend", {}, "Columns"), keys.map(toggle("cols", "rows", "col"))) : null,
    aggs.length > 1 ? h("label", {}, "Value", h("select", { name: "value", onchange: (ev) => set({ value: ev.target.value }) },
      aggs.map((a) => h("option", { value: a, selected: a === c.value }, a)))) : null);
  const summary = h("p.summary", {},
    `${count(r.rows.length)} groups`,
    r.lastResultAt ? ` · last result ${new Date(r.lastResultAt).toLocaleTimeString()}` : " · no result yet",
    ` · every ${r.intervalMs} ms`,
    r.overflow ? h("span.err", {}, ` · ${count(r.overflow)} beyond the group limit`) : "");
  if (!r.rows.length) {
    fill(table, summary, state("empty", "No results yet: they arrive each interval once processes run the query's tracepoints."));
    return;
  }
  fill(table, summary, aggs.length ? pivotTable(r, c) : plainTable(r));
}

/** A query without aggregates: its rows as they are. */
function plainTable(r) {
  return h("table.grid.pivot-table", {},
    h("thead", {}, h("tr", {}, r.columns.map((c) => h("th", {}, c)), h("th", {}, "Example"))),
    h("tbody", {}, r.rows.map((row, i) => h("tr", {}, row.map((v) => h("td", {}, text(v))), h("td", {}, exampleLink(r.examples && r.examples[i]))))));
}

function text(v) {
  if (v == null) return "null";
  if (Array.isArray(v)) return v.map(text).join(", ");
  return typeof v === "number" ? count(v) : String(v);
}

/** Folds values of one aggregate: sums add, extremes compare; averages only stand alone. */
function fold(func) {
  return {
    func,
    add(cell, v) {
      cell.n += 1;
      if (v == null) return;
      if (cell.v == null) cell.v = v;
      else if (func === "COUNT" || func === "SUM") cell.v += v;
      else if (func === "MIN") cell.v = Math.min(cell.v, v);
      else if (func === "MAX") cell.v = Math.max(cell.v, v);
    },
    value(cell) {
      // An average of several groups needs their counts, which the results do not carry.
      return func === "AVERAGE" && cell.n > 1 ? null : cell.v;
    },
  };
}

function pivotTable(r, c) {
  const at = (name) => r.columns.indexOf(name);
  const vi = at(c.value);
  const f = fold(c.value.match(AGGREGATE)[1].toUpperCase());
  const label = (row, names) => names.map((k) => text(row[at(k)])).join(" · ");
  const rowLabels = [];
  const colLabels = [];
  const cells = new Map();
  const cellOf = (rk, ck) => {
    const key = `${rk}\u0000${ck}`;
    if (!cells.has(key)) cells.set(key, { n: 0, v: null, example: null, spark: new Map() });
    return cells.get(key);
  };
  const rowTotals = new Map();
  const colTotals = new Map();
  const grand = { n: 0, v: null };
  r.rows.forEach((row, i) => {
    const rk = label(row, c.rows);
    const ck = label(row, c.cols);
    if (!rowLabels.includes(rk)) rowLabels.push(rk);
    if (!colLabels.includes(ck)) colLabels.push(ck);
    const cell = cellOf(rk, ck);
    f.add(cell, row[vi]);
    cell.example = cell.example || (r.examples && r.examples[i]) || null;
    if (!rowTotals.has(rk)) rowTotals.set(rk, { n: 0, v: null });
    if (!colTotals.has(ck)) colTotals.set(ck, { n: 0, v: null });
    f.add(rowTotals.get(rk), row[vi]);
    f.add(colTotals.get(ck), row[vi]);
    f.add(grand, row[vi]);
  });
  // Each cell's value in each interval of the series, for its sparkline.
  const series = (r.series || []).slice(-SPARK_POINTS);
  series.forEach((point, t) => {
    for (const row of point.rows) {
      const cell = cells.get(`${label(row, c.rows)}\u0000${label(row, c.cols)}`);
      if (!cell) continue;
      if (!cell.spark.has(t)) cell.spark.set(t, { n: 0, v: null });
      f.add(cell.spark.get(t), row[vi]);
    }
  });
  const sort = (a, b) => a.localeCompare(b, "en", { numeric: true });
  rowLabels.sort(sort);
  colLabels.sort(sort);
  const show = (cell) => {
    const v = cell ? f.value(cell) : null;
    return v == null ? "–" : text(Math.round(v * 1000) / 1000);
  };
  const corner = `${c.rows.join(" · ") || "all"}${c.cols.length ? " \\ " + c.cols.join(" · ") : ""}`;
  return h("table.grid.pivot-table", { "data-value": c.value },
    h("thead", {}, h("tr", {}, h("th", {}, corner), colLabels.map((ck) => h("th.num", { "data-col": ck }, c.cols.length ? ck : c.value)), colLabels.length > 1 ? h("th.num", {}, "Total") : null)),
    h("tbody", {}, rowLabels.map((rk) => h("tr", { "data-row": rk }, h("th", {}, rk || "all"),
      colLabels.map((ck) => {
        const cell = cells.get(`${rk}\u0000${ck}`);
        return h("td.num.cell", { "data-col": ck },
          cell ? h("span.value", {}, show(cell)) : "–",
          cell ? sparkline(cell, series.length, f) : null,
          cell && cell.example ? exampleLink(cell.example) : null);
      }),
      colLabels.length > 1 ? h("td.num.total", {}, show(rowTotals.get(rk))) : null))),
    h("tfoot", {}, h("tr", {}, h("th", {}, "Total"),
      colLabels.map((ck) => h("td.num.total", { "data-col": ck }, show(colTotals.get(ck)))),
      colLabels.length > 1 ? h("td.num.total.grand", {}, show(grand)) : null)));
}

/** The cell's value over the intervals of the series, scaled to its own range. */
function sparkline(cell, points, f) {
  if (points < 2) return null;
  const W = 64, H = 16;
  const values = [];
  for (let t = 0; t < points; t++) {
    const p = cell.spark.get(t);
    // An interval without tuples counted nothing.
    values.push(p ? f.value(p) : f.func === "COUNT" || f.func === "SUM" ? 0 : null);
  }
  const known = values.filter((v) => v != null);
  if (!known.length) return null;
  const lo = Math.min(...known), hi = Math.max(...known);
  const y = (v) => (hi === lo ? H / 2 : H - 1 - ((v - lo) / (hi - lo)) * (H - 2));
  const pts = values.map((v, t) => (v == null ? null : `${((t / (points - 1)) * (W - 2) + 1).toFixed(1)},${y(v).toFixed(1)}`)).filter(Boolean);
  return svg("svg", { class: "spark", width: W, height: H, "aria-label": `over the last ${points} intervals` },
    svg("polyline", { points: pts.join(" ") }));
}

function exampleLink(trace) {
  if (!trace) return null;
  return h("a.example", { href: link("trace", trace, {}), title: "a sampled trace where the query's tracepoints ran" }, "trace");
}

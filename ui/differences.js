// "What is different about these": for a selection of the search page's window (a region
// of the scatter, the slowest, the errors), the services, span names, errors and
// attribute values most over-represented in it, each with its share of the selection and
// of the rest, and a link to the search it implies.

import { get } from "./api.js";
import { link } from "./app.js";
import { h, count, duration, instant, state } from "./format.js";

/** The selection in the URL (`sel=startFrom,startTo,minDuration,maxDuration`, ns; empty
 * parts unbounded; `selErrors=1`), or null. */
export function selectionOf(params) {
  const parts = (params.get("sel") || "").split(",");
  const num = (i) => (parts[i] && /^\d+$/.test(parts[i]) ? parts[i] : null);
  const sel = { startFrom: num(0), startTo: num(1), minDuration: num(2), maxDuration: num(3), errors: params.get("selErrors") === "1" };
  return sel.startFrom || sel.startTo || sel.minDuration || sel.maxDuration || sel.errors ? sel : null;
}

/** The URL's form of a region. */
export function selParam(region) {
  const n = (v) => (v == null ? "" : String(Math.max(0, Math.round(Number(v)))));
  return [n(region.startFrom), n(region.startTo), n(region.minDuration), n(region.maxDuration)].join(",");
}

/** The selection in words: "started 10:01:02–10:03:00, 120 ms – 2.1 s, with errors". */
export function describe(sel) {
  const out = [];
  if (sel.startFrom || sel.startTo) out.push(`started ${sel.startFrom ? instant(Number(sel.startFrom)).slice(11) : "…"}–${sel.startTo ? instant(Number(sel.startTo)).slice(11) : "…"}`);
  if (sel.minDuration && sel.maxDuration) out.push(`lasting ${duration(Number(sel.minDuration))} – ${duration(Number(sel.maxDuration))}`);
  else if (sel.minDuration) out.push(`lasting at least ${duration(Number(sel.minDuration))}`);
  else if (sel.maxDuration) out.push(`lasting at most ${duration(Number(sel.maxDuration))}`);
  if (sel.errors) out.push("with an error");
  if (sel.pattern) out.push(`of pattern ${sel.pattern}`);
  return out.join(", ");
}

/** The search filters that list the selection's traces. */
export function listParams(sel) {
  const p = {};
  if (sel.startFrom) p.start = sel.startFrom;
  if (sel.startTo) p.end = sel.startTo;
  // The trace's own duration, as the selection reads it (minDuration would be a span's).
  if (sel.minDuration) p.traceMinDuration = `${sel.minDuration}ns`;
  if (sel.maxDuration) p.traceMaxDuration = `${sel.maxDuration}ns`;
  if (sel.errors) p.error = "true";
  return p;
}

/** A difference in words, and the search filters it implies. */
function what(d) {
  switch (d.kind) {
    case "service": return [[h("b", {}, d.service), " (a span of it)"], { service: d.service }];
    case "span": return [[h("b", {}, d.service), " ", d.name], { service: d.service, operation: d.name }];
    case "error": return [["an error in ", h("b", {}, d.service)], { service: d.service, error: "true" }];
    default: return [[h("code", {}, `${d.key}=${d.value}`)], { tags: `${d.key}=${d.value}` }];
  }
}

function share(v) {
  return h("span.share", { style: { "--share": `${(v * 100).toFixed(1)}%` } }, `${(v * 100).toFixed(1)}%`);
}

/**
 * The panel for `sel`, filled once the comparison answers. `filters` are the search's
 * own (the window among them), kept in every link.
 */
export async function differencesPanel(sel, filters) {
  const q = { ...filters, limit: 30 };
  if (sel.startFrom) q.selStart = sel.startFrom;
  if (sel.startTo) q.selEnd = sel.startTo;
  if (sel.minDuration) q.selMinDuration = sel.minDuration;
  if (sel.maxDuration) q.selMaxDuration = sel.maxDuration;
  if (sel.errors) q.selErrors = "true";
  if (sel.pattern) q.selPattern = sel.pattern;
  const body = await get("/api/differences", q);
  // A pattern's traces are listed on its page, where its comparisons are shown (the
  // search has no filter for a shape).
  const ofPattern = Boolean(sel.pattern || filters.pattern);
  const panel = h("section.differences", { "aria-label": "what is different about the selection" },
    h("h2", {}, `What sets these ${count(body.selected)} traces apart`,
      h("small", {}, ` from the other ${count(body.rest)} of the ${filters.pattern ? "pattern" : "window"}`)),
    h("p.hint", {}, `Traces ${describe(sel)}. `,
      ofPattern ? "" : h("a", { href: link("search", null, { ...filters, ...listParams(sel), tab: "traces", order: "-duration" }), "data-list": "selection" }, "List them"),
      body.crowdedKeys.length ? ` · Not compared, a value per trace: ${body.crowdedKeys.join(", ")}` : ""));
  if (!body.selected) {
    panel.append(state("empty", "No trace of the window is in the selection."));
    return panel;
  }
  if (!body.differences.length) {
    panel.append(state("empty", "Nothing is more common in the selection than in the rest."));
    return panel;
  }
  // A shape is not a search filter: the search a line implies is over the window.
  const searchFilters = { ...filters };
  delete searchFilters.pattern;
  panel.append(h("table.grid.differences", {},
    h("thead", {}, h("tr", {}, h("th", {}, "What the traces hold"), h("th.num", {}, "Of the selection"), h("th.num", {}, "Of the rest"), h("th", {}, ""))),
    h("tbody", {}, body.differences.map((d) => {
      const [words, search] = what(d);
      // An attribute is searched beside the attributes already asked for.
      if (search.tags && searchFilters.tags) search.tags = `${searchFilters.tags} ${search.tags}`;
      return h("tr", { "data-kind": d.kind },
        h("td", {}, words),
        h("td.num", {}, share(d.selectedShare), ` ${count(d.selected)}`),
        h("td.num", {}, share(d.restShare), ` ${count(d.rest)}`),
        h("td", {}, h("a", { href: link("search", null, { ...searchFilters, ...search, tab: "traces" }) }, "search")));
    }))));
  return panel;
}

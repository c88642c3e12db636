// The span table of a trace: its spans grouped by service and name, with how many, how
// long, how much of it their own (self) time, and errors; sorted by any column (a head's
// click, in the URL), self time first. A row shows its spans on the time line.

import { h, duration, count, serviceColor } from "./format.js";

const COLUMNS = [
  { key: "name", label: "Service and span", value: (g) => `${g.service} ${g.name}` },
  { key: "count", label: "Spans", value: (g) => g.count, num: true, fmt: count },
  { key: "errors", label: "Errors", value: (g) => g.errors, num: true, fmt: count },
  { key: "self", label: "Self time", value: (g) => g.self, num: true, fmt: duration },
  { key: "selfShare", label: "Self %", value: (g) => g.selfShare, num: true, fmt: (v) => `${(v * 100).toFixed(1)}%` },
  { key: "total", label: "Total duration", value: (g) => g.total, num: true, fmt: duration },
  { key: "avg", label: "Average", value: (g) => g.total / g.count, num: true, fmt: duration },
  { key: "max", label: "Longest", value: (g) => g.max, num: true, fmt: duration },
];

/** The spans grouped by service and name, each group's counts and times. */
export function groups(spans, selfOf) {
  const by = new Map();
  let allSelf = 0;
  spans.forEach((s, i) => {
    const key = `${s.service}\u0000${s.name}`;
    let g = by.get(key);
    if (!g) {
      g = { service: s.service, name: s.name, count: 0, errors: 0, self: 0, total: 0, max: 0 };
      by.set(key, g);
    }
    const d = s.end - s.start;
    g.count++;
    if (s.status && s.status.code === "error") g.errors++;
    g.self += selfOf(i);
    g.total += d;
    g.max = Math.max(g.max, d);
    allSelf += selfOf(i);
  });
  const out = [...by.values()];
  for (const g of out) g.selfShare = allSelf ? g.self / allSelf : 0;
  return out;
}

/**
 * The table element, sorted by `order` (`-self` descending, the default). `sortBy(order)`
 * changes the order, `find(group)` (if given) shows a group's spans on the time line.
 */
export function spanTable(list, order, { sortBy, find }) {
  const o = COLUMNS.some((c) => c.key === order.replace(/^-/, "")) ? order : "-self";
  const desc = o.startsWith("-");
  const col = COLUMNS.find((c) => c.key === o.replace(/^-/, ""));
  const rows = [...list].sort((a, b) => {
    const x = col.value(a), y = col.value(b);
    const c = x < y ? -1 : x > y ? 1 : 0;
    return (desc ? -c : c) || a.service.localeCompare(b.service) || a.name.localeCompare(b.name);
  });
  // A column's first click sorts the larger values first, as people look for the most.
  const head = h("tr", {}, COLUMNS.map((c) => {
    const next = col === c ? (desc ? c.key : `-${c.key}`) : (c.num ? `-${c.key}` : c.key);
    return h("th", { class: c.num ? "num" : "", "aria-sort": col === c ? (desc ? "descending" : "ascending") : "none" },
      h("button.sort", { type: "button", "data-order": next, onclick: () => sortBy(next) }, c.label + (col === c ? (desc ? " ▼" : " ▲") : "")));
  }));
  const body = h("tbody", {}, rows.map((g) => h(find ? "tr.row-link" : "tr", {
    "data-group": `${g.service} ${g.name}`,
    // Enter and Space click it (app.js), as every choosable row.
    ...(find ? { tabindex: "0", title: "show these spans on the time line", onclick: () => find(g) } : {}),
  }, COLUMNS.map((c) => h("td", { class: c.num ? "num" : "" },
    c.key === "name"
      ? [h("span.dot", { style: { background: serviceColor(g.service) } }), h("b", {}, g.service), " ", g.name]
      : c.fmt(c.value(g)))))));
  return h("div.span-table", {},
    h("p.hint", {}, `${count(list.length)} kinds of span. Self time is a span's duration less the time its children ran.`),
    h("table.grid.span-groups", {}, h("thead", {}, head), body));
}

// Two traces or patterns side by side: their span trees aligned, with what is missing,
// extra, slower or faster in B.

import { get } from "./api.js";
import { go, link } from "./app.js";
import { h, duration, count, state, serviceColor } from "./format.js";

const CHANGES = { same: "same", slower: "slower in B", faster: "faster in B", missing: "only in A", extra: "only in B" };

export async function render(_id, params) {
  const a = params.get("a") || "", b = params.get("b") || "";
  const page = h("section.compare");
  const f = h("form.filters", {},
    h("label", {}, "A", h("input", { name: "a", value: a, placeholder: "trace id or pattern id", size: 34, spellcheck: "false" })),
    h("label", {}, "B", h("input", { name: "b", value: b, placeholder: "trace id or pattern id", size: 34, spellcheck: "false" })),
    h("button", { type: "submit" }, "Compare"));
  f.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const data = Object.fromEntries(new FormData(f).entries());
    go("compare", null, { ...Object.fromEntries(params), a: data.a.trim(), b: data.b.trim() });
  });
  page.append(f);
  if (!a || !b) {
    page.append(state("empty", "Give two trace ids or pattern ids (pattern ids start with p), or tick two rows on the Search page."));
    return page;
  }
  const query = Object.fromEntries(params);
  if (!query.lookback && !query.start) query.start = "0";
  const c = await get("/api/compare", query);
  const open = (id) => link(id.startsWith("p") ? "pattern" : "trace", id, {});
  page.append(h("div.sides", {},
    side("A", c.a, c.latencyANs, open(a)),
    side("B", c.b, c.latencyBNs, open(b)),
    h("div.side-sum", {},
      h("div.big", { class: c.latencyBNs > c.latencyANs ? "slower" : "faster" }, `${c.latencyBNs >= c.latencyANs ? "+" : ""}${duration(c.latencyBNs - c.latencyANs)}`),
      h("div", {}, `${c.slower} slower · ${c.faster} faster · ${c.missing} only in A · ${c.extra} only in B`))));
  page.append(h("table.grid.comparison", {},
    h("thead", {}, h("tr", {}, h("th", {}, "Span"), h("th.num", {}, "A count"), h("th.num", {}, "A mean"),
      h("th.num", {}, "B count"), h("th.num", {}, "B mean"), h("th.num", {}, "B − A"), h("th", {}, "Change"))),
    h("tbody", {}, c.rows.map((r) => h("tr", { class: `change-${r.change}` },
      h("td", { style: { paddingLeft: `${6 + r.depth * 16}px` } },
        h("span.dot", { style: { background: serviceColor(r.service) } }), h("b", {}, r.service), " ", r.operation, h("small", {}, ` ${r.kind}`)),
      h("td.num", {}, r.a ? num(r.a.count) : "–"), h("td.num", {}, r.a ? duration(r.a.meanNs) : "–"),
      h("td.num", {}, r.b ? num(r.b.count) : "–"), h("td.num", {}, r.b ? duration(r.b.meanNs) : "–"),
      h("td.num", {}, r.deltaNs ? `${r.deltaNs > 0 ? "+" : ""}${duration(r.deltaNs)}` : "0"),
      h("td", {}, h("span.badge", {}, CHANGES[r.change] || r.change)))))));
  return page;
}

function num(n) {
  return Number.isInteger(n) ? count(n) : n.toFixed(2);
}

function side(label, name, latency, href) {
  return h("div.side-card", {}, h("div.side-name", {}, label), h("a", { href }, h("code", {}, name)), h("div.big", {}, duration(latency)));
}

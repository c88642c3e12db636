// Requests stitched from logs (`causeway logs --collector`), as lprof's table shows
// them: the log-point sequences with their counts and latency histograms, a sequence's
// example requests opening in the trace view (its lines are the spans' events), and the
// latest stitching's identifier ranking and links with their evidence.

import { get } from "./api.js";
import { go, link } from "./app.js";
import { h, svg, duration, count, state, lookbackSelect, shortId, serviceColor, windowQuery } from "./format.js";

export async function render(_id, params) {
  const data = await get("/api/logs", windowQuery(params, 50));
  const page = h("section.logs");
  const f = h("form.filters", {}, h("label", {}, "Window", lookbackSelect(params.get("lookback") || "")));
  f.addEventListener("change", () => {
    const p = new URLSearchParams();
    if (f.elements.lookback.value) p.set("lookback", f.elements.lookback.value);
    go("logs", null, p);
  });
  page.append(f);
  if (!data.traces) {
    page.append(state("empty",
      "No requests stitched from logs in this window. Run `causeway logs DIR --collector URL` " +
      "on a directory of log files (a file per node) to send them here."));
  } else {
    page.append(h("p.summary", {},
      `${count(data.traces)} requests stitched from logs · ${count(data.sequenceCount)} log-point sequences` +
      (data.sequenceCount > data.sequences.length ? ` (the ${data.sequences.length} most frequent listed)` : "")));
    const chosen = Math.min(Number(params.get("sequence") || 0), data.sequences.length - 1);
    page.append(table(data.sequences, chosen, params));
    const s = data.sequences[chosen];
    page.append(h("h2", {}, "Latency"));
    page.append(h("p.pattern-head", {}, `${count(s.count)} requests, p50 ${duration(s.latency.p50)}, ` +
      `p90 ${duration(s.latency.p90)}, max ${duration(s.latency.max)}, ${s.meanLines.toFixed(1)} lines each`));
    page.append(histogram(s.histogram));
    page.append(h("h2", {}, "Sequence"));
    page.append(sequence(s));
  }
  page.append(h("h2", {}, "Request identifiers"));
  page.append(report(data.report));
  return page;
}

// A sequence's name: its first log point that not every listed sequence has (so two kinds
// of request that begin alike are told apart), as its node and an example line.
function distinctive(sequences) {
  const key = (g, p) => `${g.node}\u0000${p}`;
  const having = new Map();
  for (const s of sequences) {
    for (const k of new Set(s.segments.flatMap((g) => g.points.map((p) => key(g, p))))) having.set(k, (having.get(k) || 0) + 1);
  }
  return sequences.map((s) => {
    const at = [];
    s.segments.forEach((g, i) => g.points.forEach((p, j) => at.push([g, p, (s.exampleLines?.[i] || [])[j]])));
    const found = at.find(([g, p]) => having.get(key(g, p)) < sequences.length) || at[0];
    return found ? { node: found[0].node, point: found[1], line: found[2] || found[1] } : null;
  });
}

// A log point as a line it printed, its template shown on hover and on a click.
function pointLine(point, line, n) {
  const example = line || point;
  const code = h("code.point-line", { title: point, tabindex: "0" }, n ? clip(example, n) : example);
  let showing = "example";
  const flip = () => {
    showing = showing === "example" ? "template" : "example";
    const text = showing === "example" ? example : point;
    code.textContent = n ? clip(text, n) : text;
    code.dataset.showing = showing;
  };
  code.addEventListener("click", (e) => { e.stopPropagation(); flip(); });
  code.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.stopPropagation(); flip(); } });
  return code;
}

function table(sequences, chosen, params) {
  const names = distinctive(sequences);
  return h("table.grid.log-sequences", {},
    h("thead", {}, h("tr", {}, ["Requests", "p50", "p90", "Lines", "Flow: its first distinctive log point (a line it printed)"].map((c, i) => h("th", { class: i < 4 ? "num" : "" }, c)))),
    h("tbody", {}, sequences.map((s, i) => {
      const next = new URLSearchParams(params);
      next.set("sequence", String(i));
      return h("tr.row-link", { "data-sequence": i, class: i === chosen ? "chosen" : "", tabindex: "0",
        onclick: () => go("logs", null, next, { replace: true }),
        onkeydown: (e) => { if (e.key === "Enter") go("logs", null, next, { replace: true }); } },
        h("td.num", {}, count(s.count)),
        h("td.num", {}, duration(s.latency.p50)),
        h("td.num", {}, duration(s.latency.p90)),
        h("td.num", {}, s.meanLines.toFixed(1)),
        h("td", {}, names[i] ? h("span.segment", {},
          h("span.node", { style: `border-color: ${serviceColor(names[i].node)}` }, names[i].node), ": ",
          pointLine(names[i].point, names[i].line, 90)) : ""));
    })));
}

function histogram(buckets) {
  if (!buckets.length) return state("empty", "No latencies recorded.");
  const max = Math.max(...buckets.map((b) => b.count));
  const W = 28, H = 120, X0 = 20;
  const bars = buckets.map((b, i) => {
    const hgt = Math.max(2, (b.count / max) * H);
    const example = b.examples[0];
    const bar = svg("g", { class: "bar", "data-bucket": i },
      svg("rect", { x: X0 + i * W + 2, y: H - hgt + 14, width: W - 4, height: hgt }),
      svg("text", { x: X0 + i * W + W / 2, y: H - hgt + 10, "text-anchor": "middle", class: "n" }, count(b.count)),
      svg("text", { x: X0 + i * W + W / 2, y: H + 28, "text-anchor": "end", class: "lo", transform: `rotate(-45 ${X0 + i * W + W / 2} ${H + 28})` }, duration(b.lowNs)),
      svg("title", {}, `${duration(b.lowNs)} – ${duration(b.highNs)}: ${count(b.count)} requests`));
    return example ? svg("a", { href: link("trace", example, {}), "aria-label": `a request of ${duration(b.lowNs)} or more` }, bar) : bar;
  });
  const examples = buckets.flatMap((b) => b.examples.map((t) => [b, t])).slice(0, 12);
  return h("div.histogram", {},
    svg("svg", { width: X0 + buckets.length * W + 10, height: H + 80 }, bars),
    h("div.examples", {}, h("p", {}, "Requests (open one to see its lines as events):"),
      h("ul", {}, examples.map(([b, t]) => h("li", {},
        h("a.example", { href: link("trace", t, {}) }, h("code", {}, shortId(t))), ` ${duration(b.lowNs)} – ${duration(b.highNs)}`)))));
}

function sequence(s) {
  return h("div", {},
    h("p.hint", {}, "Each log point as a line one of these requests printed; click a line for its template."),
    h("ol.log-sequence", {}, s.segments.map((g, i) => h("li", {},
      h("span.node", { style: `border-color: ${serviceColor(g.node)}` }, g.node),
      h("ol", {}, g.points.map((p, j) => h("li", {}, pointLine(p, (s.exampleLines?.[i] || [])[j], 0))))))));
}

function report(r) {
  if (!r || !Array.isArray(r.identifiers)) {
    return state("empty", "No stitching report yet: `causeway logs --collector URL` sends one with the requests.");
  }
  const box = h("div.log-report");
  box.append(h("p.hint", {},
    `Latest stitching: ${count(r.lines)} lines of ${count(r.files)} files into ${count(r.requests)} requests. ` +
    "A variable is a log point's parameter; its evidence: distinct values, their share also printed at another log point " +
    "and on several nodes, and how many separate bursts a value comes back in (1 for a request id; an entity id, such as a user, recurs). " +
    "A variable named as loggers name a request's id (request_id, http.req.id, X-Request-ID, correlation_id) ranks first whatever its timing."));
  box.append(h("table.grid.log-identifiers", {},
    h("thead", {}, h("tr", {}, ["Taken", "Score", "Name", "Values", "Lines", "Shared", "Nodes", "Bursts", "Lifetime", "Log point", "Examples"]
      .map((c, i) => h("th", { class: i >= 1 && i <= 8 ? "num" : "" }, c)))),
    h("tbody", {}, r.identifiers.map((e) => h("tr", { class: e.taken ? "taken" : "" },
      h("td", {}, e.taken ? "✓" : ""),
      h("td.num", {}, Number(e.score).toFixed(3)),
      h("td", {}, h("code", {}, e.name || "–"), e.named_request_id ? h("span.badge.named-id", { title: "named as a request id" }, " by name") : ""),
      h("td.num", {}, count(e.distinct)),
      h("td.num", {}, count(e.lines)),
      h("td.num", {}, Number(e.shared).toFixed(2)),
      h("td.num", {}, Number(e.on_several_nodes).toFixed(2)),
      h("td.num", {}, Number(e.bursts).toFixed(1)),
      h("td.num", {}, duration(e.lifetime_ms * 1e6)),
      h("td", {}, h("code", { title: e.log_point || "" }, clip(`#${e.parameter} of ${e.log_point || ""}`, 70))),
      h("td", {}, h("code", {}, (e.examples || []).slice(0, 2).join(", "))))))));
  if (Array.isArray(r.links) && r.links.length) {
    box.append(h("h3", {}, "Links learned"));
    box.append(h("p.hint", {}, "A value printed at one log point and soon after at another, more often than chance would: " +
      "the window it does so within, and the share of its matches chance does not explain."));
    box.append(h("table.grid.log-links", {},
      h("thead", {}, h("tr", {}, ["Precision", "Matches", "Window", "From", "To"].map((c, i) => h("th", { class: i < 3 ? "num" : "" }, c)))),
      h("tbody", {}, r.links.map((l) => h("tr", {},
        h("td.num", {}, Number(l.precision).toFixed(3)),
        h("td.num", {}, count(l.matches)),
        h("td.num", {}, duration(l.window_ms * 1e6)),
        h("td", {}, end(l.from)),
        h("td", {}, end(l.to)))))));
  }
  return box;
}

function end(e) {
  return h("span", {}, h("span.node", { style: `border-color: ${serviceColor(e.file)}` }, e.file), " ",
    h("code", { title: e.log_point || "" }, clip(`#${e.parameter} of ${e.log_point || ""}`, 60)));
}

function clip(text, n) {
  return text.length > n ? text.slice(0, n - 1) + "…" : text;
}

// Expectations (Pip): check every path of a window against expectations written in
// Pip's language; see recognizers with their counts, unexpected paths (each opening the
// trace at the event where the closest validator stopped), failed assertions, and a
// metric of the paths of each recognizer side by side.

import { ApiError, send } from "./api.js";
import { go, link } from "./app.js";
import { h, svg, duration, count, state, lookbackSelect, traceIdText } from "./format.js";

const TEXT_KEY = "causeway.expect.text";
const METRICS = ["REAL_TIME", "CPU_TIME", "DEPTH", "MESSAGES", "THREADS", "HOSTS"];

export async function render(_id, params) {
  const page = h("section.expect");
  let text = localStorage.getItem(TEXT_KEY);
  if (text == null) {
    // First visit: the demo's expectations as an example.
    text = await (await fetch("/ui/example.pip")).text();
  }
  const editor = h("textarea.pip", { name: "text", rows: 18, spellcheck: "false", "aria-label": "expectations" });
  editor.value = text;
  // Parameters the text names in its comments (`--param REPLICAS=3`, as the demo's file
  // does) fill the field until the URL has its own, so the example runs as it is.
  const suggested = [...text.matchAll(/--param\s+(\w+=\S+)/g)].map((m) => m[1]).join(" ");
  const given = params.has("params") ? params.get("params") : suggested;
  const f = h("form.filters.expect-form", {},
    h("label.wide", {}, "Expectations (Pip's language)", editor),
    h("label", {}, "Parameters", h("input", { name: "params", value: given, placeholder: "REPLICAS=3 QUORUM=2" })),
    h("label", {}, "Service", h("input", { name: "service", value: params.get("service") || "", placeholder: "any" })),
    h("label", {}, "Window", lookbackSelect(params.get("lookback"))),
    h("label", {}, "Plot", h("select", { name: "plot" }, METRICS.map((m) => h("option", { value: m, selected: m === (params.get("plot") || "REAL_TIME") }, m)))),
    h("button", { type: "submit" }, "Check"));
  f.addEventListener("submit", (ev) => {
    ev.preventDefault();
    localStorage.setItem(TEXT_KEY, editor.value);
    const data = Object.fromEntries(new FormData(f).entries());
    delete data.text;
    // A new run even when nothing in the URL changed (the text lives outside it).
    go("expect", null, { ...data, lookback: data.lookback || "", start: data.lookback ? "" : "0", run: String(Date.now() % 100000) });
  });
  page.append(f);
  const results = h("div.results");
  page.append(results);
  if (!params.has("run")) {
    results.append(state("empty", "Write or paste expectations and press Check: every path of the window is checked against them."));
    return page;
  }
  // A failed check is shown beside the form, which keeps what was typed.
  try {
    const body = { text: editor.value, limit: 100, plot: params.get("plot") || "REAL_TIME", params: {} };
    for (const kv of given.split(/\s+/).filter(Boolean)) {
      const [k, v] = kv.split("=");
      if (v === undefined || Number.isNaN(Number(v))) throw new ApiError(400, `Parameters: ${kv} is not NAME=NUMBER`);
      body.params[k.replace(/^\$/, "")] = Number(v);
    }
    if (params.get("service")) body.service = params.get("service");
    if (params.get("lookback")) body.lookback = params.get("lookback");
    else body.start = params.get("start") || "0";
    const r = await send("POST", "/api/expect/check", body);
    results.append(report(r, params));
  } catch (e) {
    results.append(h("p.error.form-error", { role: "alert" }, inUiTerms(e.message || String(e))));
  }
  return page;
}

/** A server message in the page's terms: the command line's flags become the fields here. */
function inUiTerms(message) {
  return message
    .replace(/--param (\w+)=/g, "the Parameters field: $1=")
    .replace(/--service\b/g, "the Service field")
    .replace(/--lookback\b/g, "the Window field");
}

function report(r, params) {
  const out = h("div.report");
  out.append(h("p.summary", {},
    `${count(r.paths)} paths: `, h("b.ok", {}, `${count(r.expected)} expected`), ", ",
    h("b", { class: r.unexpected ? "err" : "" }, `${count(r.unexpected)} unexpected`),
    r.undecided ? ` (${count(r.undecided)} undecided: a recognizer ran out of steps)` : "",
    r.pathsWithProblems ? ` · the reconciler found problems in ${count(r.pathsWithProblems)} paths` : ""));
  out.append(h("table.grid.recognizers", {},
    h("thead", {}, h("tr", {}, h("th", {}, "Recognizer"), h("th", {}, "Role"), h("th.num", {}, "Paths matched"))),
    h("tbody", {}, r.recognizers.map((x) => h("tr", { "data-recognizer": x.name }, h("td", {}, x.name), h("td", {}, x.role), h("td.num", {}, count(x.matched)))))));
  if (r.failedAssertions.length) {
    out.append(h("h2", {}, "Failed assertions"));
    out.append(h("ul.failed", {}, r.failedAssertions.map((a) => h("li", {}, `line ${a.line}: `, h("code", {}, a.text), ` — ${a.why}`))));
  }
  if (r.distributions && r.distributions.some((d) => d.values.length)) {
    out.append(h("h2", {}, `${params.get("plot") || "REAL_TIME"} of the paths each recognizer matched`));
    out.append(plot(r.distributions.filter((d) => d.values.length)));
  }
  out.append(h("h2", {}, "Unexpected paths"));
  if (!r.unexpectedPaths.length) {
    out.append(state("empty", "Every path is expected."));
  } else {
    out.append(h("ul.unexpected", {}, r.unexpectedPaths.map((p) => {
      const m = p.closest;
      const note = m ? `${m.recognizer} stopped here: expected ${m.expected}` : "";
      const href = link("trace", p.traceId, m && m.spanId ? { span: m.spanId, note } : {});
      return h("li", { "data-trace": p.traceId },
        h("a", { href }, h("code", {}, traceIdText(p.traceId))),
        p.invalidatedBy.length ? h("span.err", {}, ` matches invalidator ${p.invalidatedBy.join(", ")}`) : "",
        m ? h("div.miss", {}, `closest: ${m.recognizer} (${Math.round(m.closeness * 100)}% matched)`,
          m.thread ? ` in ${m.thread}${m.pattern ? " as " + m.pattern : ""}` : "",
          h("div", {}, "found ", h("b", {}, m.found)), h("div", {}, "expected ", h("b", {}, m.expected))) : "",
        p.undecided.length ? h("div.hint", {}, `undecided: ${p.undecided.join(", ")}`) : "");
    })));
  }
  return out;
}

/** One column per recognizer: each path a dot, the median a bar. */
function plot(dists) {
  const W = 150, H = 240, PAD = 50;
  const metric = dists[0].metric;
  const time = ["REAL_TIME", "CPU_TIME"].includes(metric);
  const max = Math.max(...dists.flatMap((d) => d.values), 1);
  const y = (v) => H - 10 - (v / max) * (H - 30);
  const label = (v) => (time ? duration(v) : count(Math.round(v)));
  const cols = dists.map((d, i) => {
    const x0 = PAD + i * W;
    const sorted = [...d.values].sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)];
    return svg("g", { class: "col", "data-recognizer": d.recognizer },
      d.values.map((v, k) => svg("circle", { cx: x0 + 20 + ((k * 37) % (W - 60)), cy: y(v), r: 2.5 })),
      svg("line", { class: "median", x1: x0 + 10, x2: x0 + W - 30, y1: y(median), y2: y(median) }),
      svg("text", { x: x0 + (W - 20) / 2, y: H + 14, "text-anchor": "middle" }, d.recognizer),
      svg("text", { x: x0 + (W - 20) / 2, y: H + 28, "text-anchor": "middle", class: "n" }, `${count(d.count)} paths · median ${label(median)}`));
  });
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => svg("text", { x: PAD - 6, y: y(max * f) + 3, "text-anchor": "end", class: "n" }, label(max * f)));
  return h("div.graph", {}, svg("svg", { width: PAD + dists.length * W, height: H + 36, class: "metric-plot" }, ticks, cols));
}

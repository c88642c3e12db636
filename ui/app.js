// The router: every view's state lives in the URL's hash (`#/view/id?params`), so any
// page can be shared as a link and restored by the back button.
//
// The UI is a single-page app of plain ES modules, served from the binary
// (crates/server/src/ui.rs). Its views: search (patterns and traces tabs), pattern, trace
// (virtual rows, critical path, skew correction with each offset's reason; in-trace find,
// flame graph and span table beside it: trace-find.js, trace-flame.js, trace-table.js),
// monitor (rate, errors and duration over time), dependencies,
// compare, expectations (the demo's shop.pip is served as example.pip), pivot, inferred
// and logs. It only calls the query API (api.js).
//
// A view builds its page detached, and only the page the router mounts becomes the one
// clicks act on, so a slow answer for a trace the user has left cannot take over. Spans,
// critical-path steps, histogram bars and graph edges can be chosen with the keyboard too
// (Enter or Space), and the focus returns to the chosen element once its view has
// redrawn. Choosing within a page (a span, a histogram bar, a graph edge) updates it in
// place, without a fetch or a scroll; so does sorting a search table. A view's `update`
// that fetches returns a promise, and the view's state is `updating` until it settles.

import * as search from "./search.js";
import * as pattern from "./pattern.js";
import * as trace from "./trace.js";
import * as dependencies from "./dependencies.js";
import * as compare from "./compare.js";
import * as expect from "./expect.js";
import * as pivot from "./pivot.js";
import * as inferred from "./inferred.js";
import * as logs from "./logs.js";
import * as monitor from "./monitor.js";
import { state } from "./format.js";

const VIEWS = { search, pattern, trace, monitor, dependencies, compare, expect, pivot, inferred, logs };

const main = document.getElementById("view");
let current = null; // { name, id }
let renders = 0;
let updates = 0;
let refocus = null; // what the keyboard chose, to focus again once redrawn

/** The parsed hash: view name, optional id, parameters. */
export function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = hash.split("?");
  const [name = "search", ...rest] = path.split("/").filter(Boolean);
  return { name, id: rest.length ? decodeURIComponent(rest.join("/")) : null, params: new URLSearchParams(query) };
}

/** The hash for a view, id and parameters (empty values left out). */
export function link(name, id, params) {
  const q = new URLSearchParams();
  for (const [k, v] of params instanceof URLSearchParams ? params : Object.entries(params || {})) {
    if (v != null && v !== "") q.append(k, v);
  }
  const qs = q.toString();
  return `#/${name}${id ? "/" + encodeURIComponent(id) : ""}${qs ? "?" + qs : ""}`;
}

/** Goes to a view; `replace` rewrites the current history entry (for small changes). */
export function go(name, id, params, { replace = false } = {}) {
  const hash = link(name, id, params);
  if (replace) {
    history.replaceState(null, "", hash);
    render();
  } else {
    location.hash = hash;
  }
}

async function render() {
  const { name, id, params } = route();
  const view = VIEWS[name];
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.dataset.view === name || (name === "pattern" && a.dataset.view === "search"));
  }
  if (!view) {
    main.replaceChildren(state("error", `There is no page "${name}". Try Search.`));
    main.dataset.state = "error";
    current = null;
    return;
  }
  // The same view on the same object updates in place (a trace is not fetched again to
  // select a span or fold a subtree; a table is sorted anew where it stands). An update
  // that fetches answers a promise, and the view is "updating" until it settles.
  if (current && current.name === name && current.id === id && view.update) {
    const updated = view.update(params);
    if (updated !== false) {
      const mine = ++updates;
      const settle = () => {
        if (mine === updates && current && current.name === name) main.dataset.state = "ready";
      };
      if (updated instanceof Promise) {
        main.dataset.state = "updating";
        updated.then(settle, settle);
      } else settle();
      return;
    }
  }
  current = { name, id };
  updates++;
  const generation = ++renders;
  main.dataset.view = name;
  main.dataset.state = "loading";
  main.replaceChildren(state("loading", "Loading…"));
  try {
    // Views build their page detached; a page whose data came after the user moved on
    // is dropped.
    const page = await view.render(id, params);
    if (generation !== renders) return;
    main.replaceChildren(page);
    if (view.mounted) view.mounted(page);
    restoreFocus();
    main.dataset.state = page.dataset.state || "ready";
  } catch (e) {
    if (generation !== renders) return;
    main.replaceChildren(state("error", e.message || String(e)));
    main.dataset.state = "error";
  }
}

document.getElementById("jump").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const id = new FormData(ev.target).get("id").trim();
  if (!id) return;
  go(/^p[0-9a-f]{16}$/i.test(id) ? "pattern" : "trace", id, {});
});

// What can be chosen with the mouse can be chosen with the keyboard: Tab to it, Enter or
// Space to choose. Views redraw what was chosen, so the focus follows the element that
// stands for the same thing in the new drawing.
const CHOOSABLE = ".row, ol.steps li, g.bar, g.dep-edge, tr.row-link";
const IDENTITY = ["data-span", "data-bucket", "data-edge", "data-pattern"];
document.addEventListener("keydown", (ev) => {
  if ((ev.key !== "Enter" && ev.key !== " ") || !(ev.target instanceof Element) || !ev.target.matches(CHOOSABLE)) return;
  ev.preventDefault();
  const el = ev.target;
  const attr = IDENTITY.find((a) => el.hasAttribute(a));
  refocus = attr ? `${el.tagName.toLowerCase()}[${attr}="${CSS.escape(el.getAttribute(attr))}"]` : null;
  const before = renders;
  el.dispatchEvent(new MouseEvent("click", { bubbles: true }));
  // A view that redraws in place does so within a frame or two; one that renders anew
  // takes the focus over when it is mounted (see `render`).
  if (renders === before) requestAnimationFrame(() => requestAnimationFrame(restoreFocus));
});

/** Puts the focus back on what was chosen with the keyboard, once it is on the page. */
function restoreFocus() {
  const found = refocus && document.querySelector(refocus);
  if (found) {
    found.focus();
    refocus = null;
  }
}

window.addEventListener("hashchange", render);
render();

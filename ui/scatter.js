// The duration scatter of the search page, as Jaeger's: one dot per trace, start time
// across, duration up (on a log scale, so fast and slow both show), errors red. Dragging
// a region selects the traces in it; a click on a dot opens its trace. The keyboard has
// the same reach through the buttons beside it (the slowest 5%, the errors).

import { h, duration, instant, count } from "./format.js";

const HEIGHT = 170;
const PAD = { left: 64, right: 12, top: 8, bottom: 22 };

/**
 * The chart for `body` (the answer of /api/scatter). `selection` is the region chosen
 * (`{ startFrom, startTo, minDuration, maxDuration }`, ns) or null; `select(region)` is
 * called with a new one, `open(traceId)` on a click on a dot.
 */
export function scatterChart(body, selection, { select, open }) {
  // Times past 2^53 arrive as digit strings (api.js): drawn as doubles, close enough.
  const pts = (body.points || []).map((p) => ({ id: p.traceId, x: Number(p.start), y: Math.max(1, Number(p.duration)), error: p.error }));
  const canvas = h("canvas.scatter", { height: HEIGHT, tabindex: "-1", "aria-hidden": "true" });
  const box = h("div.scatter-region");
  const wrap = h("div.scatter-wrap", {}, canvas, box);
  let scale = null;

  const draw = () => {
    // Drawn in CSS pixels, once the chart is on the page and has its width.
    const width = wrap.clientWidth;
    if (!width) return;
    canvas.width = width;
    const ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, width, HEIGHT);
    if (!pts.length) return;
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const p of pts) {
      x0 = Math.min(x0, p.x);
      x1 = Math.max(x1, p.x);
      y0 = Math.min(y0, p.y);
      y1 = Math.max(y1, p.y);
    }
    if (x1 === x0) x1 = x0 + 1;
    const ly0 = Math.floor(Math.log10(y0)), ly1 = Math.max(ly0 + 1, Math.ceil(Math.log10(y1)));
    const plotW = width - PAD.left - PAD.right, plotH = HEIGHT - PAD.top - PAD.bottom;
    scale = {
      x: (t) => PAD.left + (t - x0) / (x1 - x0) * plotW,
      y: (d) => PAD.top + plotH - (Math.log10(d) - ly0) / (ly1 - ly0) * plotH,
      t: (px) => x0 + (px - PAD.left) / plotW * (x1 - x0),
      d: (py) => 10 ** (ly0 + (PAD.top + plotH - py) / plotH * (ly1 - ly0)),
    };
    ctx.font = "10px system-ui, sans-serif";
    ctx.fillStyle = "#66707a";
    ctx.strokeStyle = "#eceef1";
    for (let e = ly0; e <= ly1; e++) {
      const y = scale.y(10 ** e);
      ctx.beginPath();
      ctx.moveTo(PAD.left, y);
      ctx.lineTo(width - PAD.right, y);
      ctx.stroke();
      ctx.fillText(duration(10 ** e), 4, y + 3);
    }
    for (const f of [0, 0.5, 1]) {
      const t = x0 + f * (x1 - x0);
      const text = instant(t).slice(11, 19);
      ctx.fillText(text, Math.min(width - 50, Math.max(PAD.left, scale.x(t) - 20)), HEIGHT - 6);
    }
    // Errors last, so they show over the rest.
    for (const error of [false, true]) {
      ctx.fillStyle = error ? "rgba(198, 40, 40, .85)" : "rgba(34, 96, 196, .55)";
      for (const p of pts) {
        if (p.error !== error) continue;
        ctx.beginPath();
        ctx.arc(scale.x(p.x), scale.y(p.y), 2.5, 0, 2 * Math.PI);
        ctx.fill();
      }
    }
    drawSelection();
  };

  const drawSelection = () => {
    if (!selection || !scale) {
      box.hidden = true;
      return;
    }
    const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));
    const width = canvas.width;
    const left = selection.startFrom != null ? clamp(scale.x(selection.startFrom), PAD.left, width - PAD.right) : PAD.left;
    const right = selection.startTo != null ? clamp(scale.x(selection.startTo), PAD.left, width - PAD.right) : width - PAD.right;
    const top = selection.maxDuration != null ? clamp(scale.y(selection.maxDuration), PAD.top, HEIGHT - PAD.bottom) : PAD.top;
    const bottom = selection.minDuration != null ? clamp(scale.y(Math.max(1, selection.minDuration)), PAD.top, HEIGHT - PAD.bottom) : HEIGHT - PAD.bottom;
    box.hidden = false;
    Object.assign(box.style, { left: `${left}px`, top: `${top}px`, width: `${Math.max(1, right - left)}px`, height: `${Math.max(1, bottom - top)}px` });
  };

  // Drag to select; a click (no drag) opens the nearest dot.
  let from = null;
  const at = (ev) => {
    const r = canvas.getBoundingClientRect();
    return [ev.clientX - r.left, ev.clientY - r.top];
  };
  canvas.addEventListener("pointerdown", (ev) => {
    from = at(ev);
    canvas.setPointerCapture(ev.pointerId);
    ev.preventDefault();
  });
  canvas.addEventListener("pointermove", (ev) => {
    if (!from || !scale) return;
    const [x, y] = at(ev);
    box.hidden = false;
    Object.assign(box.style, { left: `${Math.min(x, from[0])}px`, top: `${Math.min(y, from[1])}px`, width: `${Math.abs(x - from[0])}px`, height: `${Math.abs(y - from[1])}px` });
  });
  canvas.addEventListener("pointerup", (ev) => {
    if (!from || !scale) return;
    const [x, y] = at(ev);
    const start = from;
    from = null;
    if (Math.abs(x - start[0]) < 4 && Math.abs(y - start[1]) < 4) {
      drawSelection();
      const near = nearest(pts, scale, x, y);
      if (near) open(near.id);
      return;
    }
    const [xa, xb] = [Math.min(x, start[0]), Math.max(x, start[0])];
    const [ya, yb] = [Math.min(y, start[1]), Math.max(y, start[1])];
    select({
      startFrom: Math.floor(scale.t(xa)), startTo: Math.ceil(scale.t(xb)),
      minDuration: Math.floor(scale.d(yb)), maxDuration: Math.ceil(scale.d(ya)),
    });
  });
  // Drawn when it is laid out, and again whenever its width changes.
  new ResizeObserver(() => draw()).observe(wrap);
  // A new selection (from the URL, the buttons beside) is drawn without drawing the dots.
  wrap.setSelection = (sel) => {
    selection = sel && (sel.startFrom || sel.startTo || sel.minDuration || sel.maxDuration) ? {
      startFrom: sel.startFrom && Number(sel.startFrom), startTo: sel.startTo && Number(sel.startTo),
      minDuration: sel.minDuration && Number(sel.minDuration), maxDuration: sel.maxDuration && Number(sel.maxDuration),
    } : null;
    drawSelection();
  };
  return h("div.scatter-chart", {},
    h("p.hint", {}, body.total > pts.length
      ? `${count(pts.length)} of ${count(body.total)} traces drawn (an even sample, and the longest all); drag a region to select traces, click a dot to open one`
      : `${count(body.total)} traces; drag a region to select traces, click a dot to open one`),
    wrap);
}

/** The dot nearest (x, y), within 8 px. */
function nearest(pts, scale, x, y) {
  let best = null, bestD = 64;
  for (const p of pts) {
    const dx = scale.x(p.x) - x, dy = scale.y(p.y) - y;
    const d = dx * dx + dy * dy;
    if (d < bestD) {
      bestD = d;
      best = p;
    }
  }
  return best;
}

/** The duration above which the slowest `share` of the points lie. */
export function slowest(body, share) {
  const ds = (body.points || []).map((p) => Number(p.duration)).sort((a, b) => a - b);
  if (!ds.length) return null;
  return ds[Math.min(ds.length - 1, Math.floor(ds.length * (1 - share)))];
}

// In-trace search: what the find box of the trace page says, as a test of a span.
//
// Terms are separated by spaces and must all hold; a phrase in double quotes is one term.
//   word             the service, span name, an attribute's key or value, or an event (a
//                    log line) contains it, in any case
//   service:NAME     the span's service is NAME (any case)
//   name:TEXT        the span's name contains TEXT (any case)
//   key=value        an attribute `key` whose value is `value` (`key=*`: has the key)
//   >10ms  >=2s      the span lasted longer than (at least) that: ns, us, µs, ms, s, m
// The "errors only" box adds: the span's status is error.

/** How far apart two instants' difference can be from the true one, as doubles. */
const SLACK_NS = 512;
const UNITS = { ns: 1, us: 1e3, "µs": 1e3, ms: 1e6, s: 1e9, m: 6e10, min: 6e10 };

/** Splits `text` into terms: runs of non-spaces, a quoted phrase kept whole (quotes off). */
function terms(text) {
  const out = [];
  const re = /(?:[^\s"]+|"[^"]*"?)+/g;
  for (const m of text.matchAll(re)) out.push(m[0].replace(/"/g, ""));
  return out.filter((t) => t.length);
}

/** A duration like `10ms` or `1.5 s` in nanoseconds (the unit is needed); null when it is not one. */
export function parseDuration(text) {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m|min)\s*$/.exec(text);
  return m ? Number(m[1]) * UNITS[m[2]] : null;
}

function text(value) {
  return typeof value === "object" && value !== null ? JSON.stringify(value) : String(value);
}

/** The test of one term, or an error saying which term cannot be read and why. */
function term(t) {
  const lower = t.toLowerCase();
  const dur = /^(>=?)(.*)$/.exec(t);
  if (dur) {
    const ns = parseDuration(dur[2]);
    if (ns == null) return { error: `"${t}": not a duration (write >10ms, >=1.5s)` };
    // Unix nanoseconds are past what a double holds exactly (a step of 256 ns today): a
    // duration within that of the bound counts as equal to it.
    return dur[1] === ">=" ? (s) => s.end - s.start + SLACK_NS >= ns : (s) => s.end - s.start - SLACK_NS > ns;
  }
  if (lower.startsWith("service:")) {
    const want = lower.slice(8);
    return (s) => s.service.toLowerCase() === want;
  }
  if (lower.startsWith("name:")) {
    const want = lower.slice(5);
    return (s) => s.name.toLowerCase().includes(want);
  }
  const eq = t.indexOf("=");
  if (eq > 0) {
    const key = t.slice(0, eq), value = t.slice(eq + 1);
    return (s) => (s.attributes || []).some((a) => a.key === key && (value === "*" || text(a.value) === value));
  }
  return (s) => s.service.toLowerCase().includes(lower) || s.name.toLowerCase().includes(lower) ||
    (s.attributes || []).some((a) => a.key.toLowerCase().includes(lower) || text(a.value).toLowerCase().includes(lower)) ||
    (s.events || []).some((e) => e.name.toLowerCase().includes(lower));
}

/**
 * The find box's text and the errors box as one test: `{ active, test, error }`. `active`
 * is false when nothing is asked (every span matches, none is marked); `error` names the
 * first term that cannot be read, and then nothing matches.
 */
export function compile(find, errorsOnly) {
  const tests = [];
  for (const t of terms(find || "")) {
    const made = term(t);
    if (made.error) return { active: true, test: () => false, error: made.error };
    tests.push(made);
  }
  if (errorsOnly) tests.push((s) => s.status != null && s.status.code === "error");
  return { active: tests.length > 0, test: (s) => tests.every((f) => f(s)), error: null };
}

/** A find term for an exact value, quoted when it holds a space. */
export function quoted(prefix, value) {
  return /[\s"]/.test(value) ? `${prefix}"${value.replace(/"/g, "")}"` : `${prefix}${value}`;
}

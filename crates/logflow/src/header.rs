//! The usual prefix of a log line, told from its message: timestamps (ISO 8601, `date
//! time` with `,` or `.` before the fraction, syslog's `Jan 29 08:42:09`, a time of day
//! alone), a level, a thread (`[main]`, `ThreadId(02)`) and a logger (`t.c.Travel#122`,
//! `demo::cart:`). What is not recognised stays in the message: a line with no prefix
//! is all message.
//!
//! `tracing`'s fmt layout is read too: a thread name, the span scope
//! (`read block{block=19}:`, which stays in the message because it names the request),
//! then the target. Several timestamps may lead, as a collector's and the program's (the
//! first is the line's), and CRI's stream and tag (`stdout F`) may follow them. JSON and
//! logfmt lines are read by `structured`.
//!
//! All of it is hand-written, with no regular expressions: an ISO timestamp's fields are
//! read at their fixed places, two digits at a time, and a level word is upper-cased into
//! one 64-bit number and compared with the names' packed forms. Finding the `tracing`
//! layout (about a thousand instructions a line) is done once per kind of line:
//! `LayoutMemo` keeps, for the last eight layouts found in a file, the bytes the search
//! looked at (through the space after the target's colon), and a line whose rest starts
//! with the same bytes has the same layout at the same offsets (`parse_with`; a property
//! test and the `log_lines` fuzz target check it against reading anew).

/// A line's severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Fine-grained tracing, below debug.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected that the program survived.
    Warn,
    /// A failed operation.
    Error,
    /// A failure the program cannot go on from.
    Fatal,
}

/// Level names as lines spell them (in any case).
const LEVEL_NAMES: [(&str, Level); 18] = [
    ("TRACE", Level::Trace),
    ("FINEST", Level::Trace),
    ("FINER", Level::Trace),
    ("DEBUG", Level::Debug),
    ("FINE", Level::Debug),
    ("INFO", Level::Info),
    ("NOTICE", Level::Info),
    ("WARN", Level::Warn),
    ("WARNING", Level::Warn),
    ("ERROR", Level::Error),
    ("ERR", Level::Error),
    ("SEVERE", Level::Error),
    ("FATAL", Level::Fatal),
    ("CRITICAL", Level::Fatal),
    ("CRIT", Level::Fatal),
    ("PANIC", Level::Fatal),
    ("EMERG", Level::Fatal),
    ("ALERT", Level::Fatal),
];

impl Level {
    pub(crate) fn parse(word: &str) -> Option<Level> {
        // Each name packed (see `pack_upper`) with its length.
        const PACKED: [(u64, usize, Level); LEVEL_NAMES.len()] = {
            let mut packed = [(0, 0, Level::Trace); LEVEL_NAMES.len()];
            let mut i = 0;
            while i < LEVEL_NAMES.len() {
                let name = LEVEL_NAMES[i].0.as_bytes();
                packed[i] = (pack_upper(name), name.len(), LEVEL_NAMES[i].1);
                i += 1;
            }
            packed
        };
        // `word.trim_start_matches('[').trim_end_matches([']', ':'])`, by byte (the marks
        // are ASCII), as every line's second word is tried.
        let b = word.as_bytes();
        let start = b.iter().position(|&c| c != b'[').unwrap_or(b.len());
        let end = b
            .iter()
            .rposition(|&c| c != b']' && c != b':')
            .map_or(start, |last| (last + 1).max(start));
        let word = &b[start..end];
        // The names are 3 to 8 letters long: the word's letters upper-cased, packed in
        // a number, are compared with each name's at once.
        if !(3..=8).contains(&word.len()) {
            return None;
        }
        let packed = pack_upper(word);
        PACKED
            .iter()
            .find(|&&(name, len, _)| name == packed && len == word.len())
            .map(|&(_, _, level)| level)
    }
}

/// Up to eight bytes, ASCII letters upper-cased, as one number (the length told apart
/// by the caller).
const fn pack_upper(word: &[u8]) -> u64 {
    let mut packed = 0u64;
    let mut i = 0;
    while i < word.len() && i < 8 {
        packed = packed << 8 | word[i].to_ascii_uppercase() as u64;
        i += 1;
    }
    packed
}

/// A line's prefix and message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header<'a> {
    /// The first full timestamp, in nanoseconds since the Unix epoch (UTC, or the
    /// offset the line gives); syslog's, with no year, in 1970.
    pub time_ns: Option<i64>,
    /// A time of day with no date (nanoseconds since midnight), when that is all the
    /// line has.
    pub time_of_day_ns: Option<i64>,
    /// The level, when the line names one.
    pub level: Option<Level>,
    /// The thread name (`main` of `[main]`), when the line names one.
    pub thread: Option<&'a str>,
    /// The logger or module (`t.c.Travel#122`, `demo::cart`), when the line names one.
    pub logger: Option<&'a str>,
    /// What is left: the message the program wrote.
    pub message: &'a str,
}

/// Splits `line` into its prefix and message.
pub fn parse(line: &str) -> Header<'_> {
    parse_by(line, |rest| layout_at(rest).map(|at| at.read(rest)))
}

/// [`parse`], for the lines of one file in turn: `memo` keeps what the `tracing` layout
/// of a line was found to be, and a line that starts as that one did is read by it.
pub fn parse_with<'a>(line: &'a str, memo: &mut LayoutMemo) -> Header<'a> {
    parse_by(line, |rest| memo.layout(rest))
}

/// [`parse`], with the `tracing` layout found by `tracing_layout`.
fn parse_by<'a>(
    line: &'a str,
    tracing_layout: impl FnOnce(&'a str) -> Option<TracingLayout<'a>>,
) -> Header<'a> {
    let mut h = Header {
        message: line,
        ..Header::default()
    };
    let mut rest = trim_start(line);
    // Timestamps first (a collector's and the program's own may both be there).
    loop {
        // Each form starts with a digit, or (syslog's month) a capital.
        if !rest
            .as_bytes()
            .first()
            .is_some_and(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
        {
            break;
        }
        if let Some((ns, after)) = datetime(rest) {
            h.time_ns.get_or_insert(ns);
            rest = trim_start(after);
        } else if let Some((ns, after)) = syslog_time(rest) {
            h.time_ns.get_or_insert(ns);
            rest = trim_start(after);
        } else if let Some((ns, after)) = time_of_day(rest) {
            h.time_of_day_ns.get_or_insert(ns);
            rest = trim_start(after);
        } else {
            break;
        }
    }
    if h.time_ns.is_some() {
        rest = after_cri_tag(rest);
    }
    // Each field is the next word; a word that is not the field looked for is the
    // next one's candidate, split once.
    let (mut word, mut after) = split_word(rest);
    if let Some(level) = Level::parse(word) {
        h.level = Some(level);
        rest = trim_start(after);
        (word, after) = split_word(rest);
    }
    // A thread in brackets, or tracing's ThreadId(N).
    let bracketed = word.starts_with('[')
        && word.ends_with(']')
        && word.len() > 2
        && !word.as_bytes()[1..].contains(&b'[');
    if bracketed || (word.starts_with("ThreadId(") && word.ends_with(')')) {
        h.thread = Some(if bracketed {
            &word[1..word.len() - 1]
        } else {
            word
        });
        rest = trim_start(after);
        (word, after) = split_word(rest);
    }
    // A logger: a dotted or `::` path, with `#line` or a trailing `:`, or followed by `-`
    // (the ends looked at first: they are quicker to rule out).
    let path = word.trim_end_matches(':');
    let ends_as_logger = word.ends_with(':')
        || word.bytes().any(|c| c == b'#')
        || trim_start(after).starts_with("- ");
    let looks_like_logger = ends_as_logger
        && !path.is_empty()
        && (path.bytes().any(|c| c == b'.') || path.as_bytes().windows(2).any(|w| w == b"::"))
        && path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b':' | b'_' | b'#' | b'$'))
        && path.bytes().next().is_some_and(|b| b.is_ascii_alphabetic());
    if looks_like_logger {
        h.logger = Some(path);
        rest = trim_start(after);
        if let Some(r) = rest.strip_prefix("- ") {
            rest = r;
        }
    } else if let Some(layout) = tracing_layout(rest) {
        h.thread = h.thread.or(layout.thread);
        h.logger = Some(layout.target);
        rest = layout.message;
    }
    h.message = rest;
    h
}

/// The `tracing` layouts last found in a file's lines: for each, the bytes of the line's
/// rest that decided it (up to the space after the target's colon), and where in them
/// the thread, the target and the span scope are. Every byte the search looks at before
/// it finds the target is among those, so a line whose rest starts with the same bytes
/// has the same layout; lines of one file mostly do, a few threads and targets taking
/// turns, and the search costs about a thousand instructions.
#[derive(Clone, Debug, Default)]
pub struct LayoutMemo(Vec<(Vec<u8>, LayoutAt)>);

impl LayoutMemo {
    /// Layouts kept: enough for a service's few threads and targets taking turns.
    const KEPT: usize = 8;

    fn layout<'a>(&mut self, rest: &'a str) -> Option<TracingLayout<'a>> {
        let bytes = rest.as_bytes();
        if let Some((_, at)) = self.0.iter().find(|(seen, _)| bytes.starts_with(seen)) {
            return Some(at.read(rest));
        }
        let at = layout_at(rest)?;
        // With no space after the colon (the line ends there), the next line's byte
        // there decides too; such a layout is not kept. The oldest kept makes room,
        // its buffer taken for the newest.
        if let Some(seen) = bytes.get(..at.colon + 2) {
            let mut buffer = if self.0.len() == Self::KEPT {
                self.0.remove(0).0
            } else {
                Vec::new()
            };
            buffer.clear();
            buffer.extend_from_slice(seen);
            self.0.push((buffer, at.clone()));
        }
        Some(at.read(rest))
    }
}

/// Where [`layout_at`] found a layout in a line's rest.
#[derive(Clone, Debug)]
struct LayoutAt {
    thread: Option<std::ops::Range<usize>>,
    target: std::ops::Range<usize>,
    /// The target's colon.
    colon: usize,
    /// Where the message starts when it is the span scope, else none: it is after the
    /// colon.
    scope: Option<usize>,
}

impl LayoutAt {
    fn read<'a>(&self, rest: &'a str) -> TracingLayout<'a> {
        TracingLayout {
            thread: self.thread.clone().and_then(|r| rest.get(r)),
            target: rest.get(self.target.clone()).unwrap_or_default(),
            message: match self.scope {
                Some(at) => rest.get(at..).unwrap_or_default(),
                None => trim_start(rest.get(self.colon + 1..).unwrap_or_default()),
            },
        }
    }
}

/// What follows the level in `tracing`'s fmt output.
struct TracingLayout<'a> {
    thread: Option<&'a str>,
    target: &'a str,
    /// From the span scope (`read block{block=19}:`) when there is one, which names the
    /// request's context (and so stays, target and all), else from after the target.
    message: &'a str,
}

/// `[thread-name] [ThreadId(N)] [span{fields}:...] target: message`: the target is the
/// first `::` path followed by `: ` outside the spans' braces.
fn layout_at(rest: &str) -> Option<LayoutAt> {
    let b = rest.as_bytes();
    let is_path_byte = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut depth = 0usize;
    // Prefixes are short: a target further in is not one. Only braces and colons
    // matter, found by memchr rather than byte by byte.
    for i in memchr::memchr3_iter(b'{', b'}', b':', &b[..b.len().min(512)]) {
        match b[i] {
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            b':' if depth == 0
                && b.get(i + 1).is_none_or(|&c| c == b' ')
                && i > 0
                && b[i - 1] != b':' =>
            {
                let start = b[..i]
                    .iter()
                    .rposition(|&c| !is_path_byte(c))
                    .map_or(0, |j| j + 1);
                if start > 0 && b[start - 1] != b' ' {
                    continue;
                }
                let target = &rest[start..i];
                let valid = is_rust_path(target);
                if !valid {
                    continue;
                }
                let mut prefix = rest[..start].trim_end();
                let mut thread = None;
                let (first, more) = split_word(prefix);
                let is_name = !first.is_empty()
                    && !first
                        .bytes()
                        .any(|c| matches!(c, b'{' | b'}' | b':' | b'='))
                    && (more.trim().is_empty()
                        || first == "main"
                        || first.bytes().any(|c| c == b'-' || c == b'_')
                        || first.bytes().any(|c| c.is_ascii_digit()));
                if is_name {
                    thread = Some(first);
                    prefix = more.trim_start();
                }
                let (id, more) = split_word(prefix);
                if id.starts_with("ThreadId(") && id.ends_with(')') {
                    thread = thread.or(Some(id));
                    prefix = more.trim_start();
                }
                // Offsets in `rest`, of which these are slices.
                let offset = |s: &str| s.as_ptr() as usize - rest.as_ptr() as usize;
                return Some(LayoutAt {
                    thread: thread.map(|t| offset(t)..offset(t) + t.len()),
                    target: start..i,
                    colon: i,
                    // The scope to the end of the line.
                    scope: (!prefix.is_empty()).then(|| offset(prefix)),
                });
            }
            _ => {}
        }
    }
    None
}

/// `a::b::c`: two or more segments joined by `::`, each starting with a letter or `_`
/// and holding no other `:` (what `target.split("::")` would check, without setting up
/// a substring search per line).
fn is_rust_path(target: &str) -> bool {
    let b = target.as_bytes();
    let mut at = 0;
    let mut segments = 0;
    loop {
        if !b
            .get(at)
            .is_some_and(|&c| c.is_ascii_alphabetic() || c == b'_')
        {
            return false;
        }
        let end = b[at..]
            .iter()
            .position(|&c| c == b':')
            .map_or(b.len(), |p| at + p);
        segments += 1;
        if end == b.len() {
            return segments >= 2;
        }
        if b.get(end + 1) != Some(&b':') {
            return false;
        }
        at = end + 2;
    }
}

/// A collector's or container runtime's prefix before a program's own line: the first
/// of its leading timestamps, and the rest after them and after CRI's stream and tag
/// (`stdout F`).
pub fn collector_prefix(line: &str) -> (Option<i64>, &str) {
    let mut rest = trim_start(line);
    let mut first = None;
    while rest.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        let Some((ns, after)) = datetime(rest) else {
            break;
        };
        first.get_or_insert(ns);
        rest = trim_start(after);
    }
    (first, after_cri_tag(rest))
}

/// True when a program's line, after any collector's prefix, continues the record before
/// it as a stack trace's lines do (the shapes log shippers' multi-line rules know):
/// Java's and Node.js's frames (`\tat ...`, `    at ...`, `\t... 3 more`, `Caused by: `,
/// `Suppressed: `), Python's (`Traceback (most recent call last):`, `  File "..."`) and
/// Go's (a tab-indented place). A collector gives each such line a time of its own, so
/// the time alone does not tell.
pub fn continues_record(line: &str) -> bool {
    let program = after_cri_tag_exactly(after_collector_times(line));
    // By its first byte: most lines are told at once.
    match program.as_bytes().first() {
        Some(b'\t') => true,
        Some(b' ') => {
            let trimmed = program.trim_start_matches([' ', '\t']);
            trimmed.starts_with("at ")
                || trimmed.starts_with("... ")
                || trimmed.starts_with("File \"")
        }
        Some(b'C') => program.starts_with("Caused by: "),
        Some(b'S') => program.starts_with("Suppressed: "),
        Some(b'T') => program.starts_with("Traceback (most recent call last):"),
        _ => false,
    }
}

/// `line` after the RFC 3339 timestamps a collector put before it, each followed by one
/// space, with the program's own indentation kept (checked byte by byte: most lines
/// fail at once).
fn after_collector_times(mut line: &str) -> &str {
    loop {
        let b = line.as_bytes();
        let stamped = b.len() > 20
            && b[..4].iter().all(u8::is_ascii_digit)
            && b[4] == b'-'
            && b[7] == b'-'
            && b[10] == b'T';
        if !stamped {
            return line;
        }
        // An ASCII space is never inside a longer character.
        match memchr::memchr(b' ', b) {
            Some(end) => line = &line[end + 1..],
            None => return line,
        }
    }
}

/// `rest` after CRI's stream and tag and the one space after them, if it starts with
/// them.
fn after_cri_tag_exactly(rest: &str) -> &str {
    if !rest.starts_with('s') {
        return rest;
    }
    ["stdout F ", "stderr F ", "stdout P ", "stderr P "]
        .iter()
        .find_map(|tag| rest.strip_prefix(tag))
        .unwrap_or(rest)
}

/// `rest` after CRI's stream and tag (`stdout F `, `stderr P `), if it starts with them.
fn after_cri_tag(rest: &str) -> &str {
    let Some(after) = rest
        .strip_prefix("stdout ")
        .or_else(|| rest.strip_prefix("stderr "))
    else {
        return rest;
    };
    after
        .strip_prefix("F ")
        .or_else(|| after.strip_prefix("P "))
        .map_or(rest, trim_start)
}

/// A full timestamp at the start of `s` (as [`parse`] reads one), in nanoseconds since
/// the Unix epoch.
pub(crate) fn datetime_ns(s: &str) -> Option<i64> {
    datetime(s).map(|(ns, _)| ns)
}

/// The first whitespace-separated word and what follows it.
fn split_word(s: &str) -> (&str, &str) {
    // By byte: an ASCII space is never part of a longer character.
    let end = s
        .bytes()
        .position(|b| b.is_ascii_whitespace())
        .unwrap_or(s.len());
    (&s[..end], &s[end..])
}

/// `s` without its leading whitespace, as `str::trim_start` has it: ASCII whitespace
/// is skipped by byte (it is all there is between a line's fields), and only a line
/// with other whitespace goes to the full test.
fn trim_start(s: &str) -> &str {
    let at = s
        .bytes()
        .position(|b| !matches!(b, b'\t'..=b'\r' | b' '))
        .unwrap_or(s.len());
    match s.as_bytes().get(at) {
        Some(b) if !b.is_ascii() => s[at..].trim_start(),
        _ => &s[at..],
    }
}

/// `n` ASCII digits at the start of `s`, as a number, and the rest.
fn digits(s: &str, n: usize) -> Option<(i64, &str)> {
    let mut v = 0i64;
    // In one pass: every line's timestamp is read by it, digit by digit.
    for &c in s.as_bytes().get(..n)? {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + i64::from(d);
    }
    Some((v, &s[n..]))
}

/// Two ASCII digits at `at` in `b`, as a number.
fn two_digits(b: &[u8], at: usize) -> Option<i64> {
    let (tens, ones) = (
        b.get(at)?.wrapping_sub(b'0'),
        b.get(at + 1)?.wrapping_sub(b'0'),
    );
    (tens < 10 && ones < 10).then(|| i64::from(tens * 10 + ones))
}

/// `HH:MM:SS` with an optional `.fraction` or `,fraction`: nanoseconds since midnight.
fn clock(s: &str) -> Option<(i64, &str)> {
    // Its fields at their fixed places, every line's timestamp read by it.
    let b = s.as_bytes();
    if b.len() < 8 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    let (h, m, sec) = (two_digits(b, 0)?, two_digits(b, 3)?, two_digits(b, 6)?);
    if h > 23 || m > 59 || sec > 60 {
        return None;
    }
    // The eight bytes before are ASCII.
    let mut s = &s[8..];
    let mut frac = 0i64;
    if let Some(f) = s.strip_prefix('.').or_else(|| s.strip_prefix(',')) {
        // Its digits counted and the first nine read in one pass.
        let (mut n, mut v) = (0usize, 0i64);
        for &c in f.as_bytes() {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            if n < 9 {
                v = v * 10 + i64::from(d);
            }
            n += 1;
        }
        if n == 0 {
            return None;
        }
        frac = v * 10i64.pow(9 - n.min(9) as u32);
        s = &f[n..];
    }
    Some((((h * 60 + m) * 60 + sec) * 1_000_000_000 + frac, s))
}

/// Days from 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DD[T ]HH:MM:SS[.frac][Z|±HH:MM]` followed by a space or the end.
fn datetime(s: &str) -> Option<(i64, &str)> {
    // The date's fields at their fixed places, as the clock's.
    let b = s.as_bytes();
    if b.len() < 11 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b' ') {
        return None;
    }
    let y = two_digits(b, 0)? * 100 + two_digits(b, 2)?;
    let (mo, d) = (two_digits(b, 5)?, two_digits(b, 8)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    // The eleven bytes before are ASCII.
    let (tod, mut s) = clock(&s[11..])?;
    let mut offset = 0i64;
    if let Some(r) = s.strip_prefix('Z') {
        s = r;
    } else if let Some(sign) = s
        .strip_prefix('+')
        .map(|r| (1, r))
        .or_else(|| s.strip_prefix('-').map(|r| (-1, r)))
    {
        let (hh, r) = digits(sign.1, 2)?;
        let r = r.strip_prefix(':').unwrap_or(r);
        let (mm, r) = digits(r, 2)?;
        offset = sign.0 * (hh * 60 + mm) * 60 * 1_000_000_000;
        s = r;
    }
    if !s.is_empty() && !s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let ns = days_from_civil(y, mo, d) * 86_400 * 1_000_000_000 + tod - offset;
    Some((ns, s))
}

/// syslog's `Mmm dd HH:MM:SS` (no year: placed in 1970).
fn syslog_time(s: &str) -> Option<(i64, &str)> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    // The space first: after a timestamp, the next word (a level) is tried too.
    let (name, s) = (s.get(..3)?, s.get(3..)?.strip_prefix(' ')?);
    let month = MONTHS.iter().position(|m| *m == name)? as i64 + 1;
    let s = s.strip_prefix(' ').unwrap_or(s);
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    if n == 0 || n > 2 {
        return None;
    }
    let (d, s) = digits(s, n)?;
    let s = s.strip_prefix(' ')?;
    let (tod, s) = clock(s)?;
    Some((
        days_from_civil(1970, month, d) * 86_400 * 1_000_000_000 + tod,
        s,
    ))
}

/// A time of day alone, followed by a space or the end.
fn time_of_day(s: &str) -> Option<(i64, &str)> {
    let (tod, rest) = clock(s)?;
    (rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_whitespace())).then_some((tod, rest))
}

/// `ns` since the epoch as ISO 8601 in UTC with nanoseconds (for tests).
#[cfg(test)]
pub(crate) fn format_iso(ns: i64) -> String {
    let (secs, nanos) = (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
    let days = secs.div_euclid(86_400);
    // Civil date from days (the inverse of days_from_civil).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let tod = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        tod / 3600,
        tod / 60 % 60,
        tod % 60
    )
}

/// A timestamp that is all of `text`: nanoseconds, and whether it is a time of day
/// only (for prefixes given as a pattern).
pub(crate) fn timestamp(text: &str) -> Option<(i64, bool)> {
    let whole = |(ns, rest): (i64, &str)| rest.trim().is_empty().then_some(ns);
    datetime(text)
        .and_then(whole)
        .or_else(|| syslog_time(text).and_then(whole))
        .map(|ns| (ns, false))
        .or_else(|| time_of_day(text).and_then(whole).map(|ns| (ns, true)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn a_stack_traces_lines_continue_their_record_behind_a_collectors_prefix() {
        for frame in [
            "2022-08-23T13:28:31.390164372Z \tat hipstershop.AdService.getAds(AdService.java:121)",
            "2022-08-23T13:28:31.390164372Z stdout F \t... 12 more",
            "2022-08-23T13:28:31.39Z stdout F Caused by: java.io.IOException: reset",
            "2022-08-23T13:28:31.39Z     at Server.charge (/app/charge.js:42:11)",
            "2022-08-23T13:28:31.39Z Traceback (most recent call last):",
            "2022-08-23T13:28:31.39Z   File \"/app/email.py\", line 88, in send",
            "\t/go/src/cart/cart.go:42 +0x1d",
        ] {
            assert!(continues_record(frame), "{frame}");
        }
        for record in [
            "2022-08-23T13:28:11.195594836Z  GetCartAsync called with userId=bb6881dc",
            "2022-08-23T13:28:31.390164372Z 13:28:31.389 INFO  - Received ad request",
            "2022-08-23T13:28:31.39Z stdout F {\"msg\":\"at ease\"}",
            "2022-08-23T13:28:31.39Z at the gate",
            "INFO Caused by nothing",
        ] {
            assert!(!continues_record(record), "{record}");
        }
    }

    #[test]
    fn a_collector_timestamp_then_the_programs_own_prefix() {
        let h = parse(
            "2023-01-29T08:42:09.939519801Z 16:42:09.939 INFO  t.c.TravelController#122 [query][Query TripResponse]",
        );
        assert_eq!(h.time_ns, Some(1_674_981_729 * S + 939_519_801));
        assert_eq!(
            h.time_of_day_ns,
            Some((16 * 3600 + 42 * 60 + 9) * S + 939_000_000)
        );
        assert_eq!(h.level, Some(Level::Info));
        assert_eq!(h.logger, Some("t.c.TravelController#122"));
        assert_eq!(h.message, "[query][Query TripResponse]");
    }

    #[test]
    fn tracing_log4j_and_syslog_prefixes() {
        let h = parse("2026-11-26T06:51:24.123456Z  WARN ThreadId(02) demo::cart: reserved item=3");
        assert_eq!(h.level, Some(Level::Warn));
        assert_eq!(h.thread, Some("ThreadId(02)"));
        assert_eq!(h.logger, Some("demo::cart"));
        assert_eq!(h.message, "reserved item=3");
        assert_eq!(h.time_ns.map(|t| t % S), Some(123_456_000));

        let h = parse(
            "2026-11-26T09:53:08.878475Z  INFO tokio-rt-worker read block{block=2}: demo::catalog: reading block=2",
        );
        assert_eq!(h.thread, Some("tokio-rt-worker"));
        assert_eq!(h.logger, Some("demo::catalog"));
        assert_eq!(
            h.message,
            "read block{block=2}: demo::catalog: reading block=2"
        );
        let h = parse("2026-11-26T09:53:08Z  INFO main ThreadId(01) demo::cart: item: 3");
        assert_eq!(
            (h.thread, h.logger, h.message),
            (Some("main"), Some("demo::cart"), "item: 3")
        );
        let h = parse("2026-11-26T09:53:08Z  INFO tokio-rt-worker a::b: x");
        assert_eq!(
            (h.thread, h.logger, h.message),
            (Some("tokio-rt-worker"), Some("a::b"), "x")
        );
        let h = parse("2023-01-29 08:42:09,939 ERROR [http-nio-8080-exec-1] com.x.OrderService - order 7 failed");
        assert_eq!(h.time_ns, Some(1_674_981_729 * S + 939_000_000));
        assert_eq!(h.level, Some(Level::Error));
        assert_eq!(h.thread, Some("http-nio-8080-exec-1"));
        assert_eq!(h.logger, Some("com.x.OrderService"));
        assert_eq!(h.message, "order 7 failed");

        let h = parse("2023-01-29T10:42:09+02:00 db started");
        assert_eq!(h.time_ns, Some(1_674_981_729 * S));
        assert_eq!(h.message, "db started");

        let h = parse("Jan 29 08:42:09 host sshd[42]: Accepted key");
        assert_eq!(h.time_ns, Some((28 * 86_400 + 8 * 3600 + 42 * 60 + 9) * S));
        assert_eq!(h.message, "host sshd[42]: Accepted key");
    }

    #[test]
    fn a_line_with_no_prefix_is_all_message() {
        let line = "    at org.x.Y.z(Y.java:42)";
        let h = parse(line);
        assert_eq!(
            h,
            Header {
                message: line.trim_start(),
                ..Header::default()
            }
        );
        // Not a date: month 13; not a time: minute 61.
        assert_eq!(parse("2023-13-01 00:00:00 x").time_ns, None);
        assert_eq!(parse("12:61:00 x").time_of_day_ns, None);
    }

    #[test]
    fn a_layout_is_read_by_the_line_before_only_up_to_the_space_after_its_colon() {
        let mut memo = LayoutMemo::default();
        let lines = [
            "2024-05-01T00:00:00Z INFO main shop::log: paid",
            "2024-05-01T00:00:00Z INFO main shop::log:paid",
            "2024-05-01T00:00:00Z INFO main shop::log: paid",
            "2024-05-01T00:00:00Z INFO main shop::log::paid: x",
            "2024-05-01T00:00:00Z INFO main shop::log:",
            "2024-05-01T00:00:00Z INFO main shop::log:x: y",
        ];
        for line in lines {
            assert_eq!(parse_with(line, &mut memo), parse(line), "{line}");
        }
        assert_eq!(parse_with(lines[1], &mut memo).logger, None);
    }

    /// A line in `tracing`'s layout, or near it, from parts: most lines share a few
    /// threads and targets, as a file's do.
    fn layout_line() -> impl Strategy<Value = String> {
        let thread = prop::sample::select(vec!["", "main ", "tokio-rt-worker ", "ThreadId(02) "]);
        let span = prop::sample::select(vec!["", "req{id=7}: ", "a{x={y}}:b: ", "{: "]);
        let target = prop::sample::select(vec!["shop::log", "a::b::c", "x", "a::b:c", "::a"]);
        let colon = prop::sample::select(vec![": ", ":", " : ", "::", ":\t", ":: "]);
        (
            thread,
            span,
            target,
            colon,
            "[a-z :{}=]{0,12}",
            any::<bool>(),
        )
            .prop_map(|(thread, span, target, colon, message, leveled)| {
                let level = if leveled { " INFO " } else { "" };
                format!("2024-05-01T00:00:00Z{level}{thread}{span}{target}{colon}{message}")
            })
    }

    proptest! {
        #[test]
        fn leading_whitespace_goes_as_str_trim_start_takes_it(
            s in "[ \t\n\x0b\x0c\r\u{85}\u{a0}\u{2003}\u{3000}a-c:]{0,12}"
        ) {
            prop_assert_eq!(trim_start(&s), s.trim_start());
        }

        #[test]
        fn a_layout_read_by_the_line_before_it_is_the_one_found_anew(
            lines in prop::collection::vec(prop_oneof![layout_line(), "\\PC{0,40}"], 1..30)
        ) {
            let mut memo = LayoutMemo::default();
            for line in &lines {
                prop_assert_eq!(parse_with(line, &mut memo), parse(line), "{:?}", line);
            }
        }

        #[test]
        fn iso_timestamps_read_back_as_the_instant_they_print(secs in 0i64..4_000_000_000, nanos in 0i64..1_000_000_000) {
            let line = format!("{} message", format_iso(secs * S + nanos));
            let h = parse(&line);
            prop_assert_eq!(h.time_ns, Some(secs * S + nanos));
            prop_assert_eq!(h.message, "message");
        }

        #[test]
        fn a_timestamp_with_a_field_digit_or_mark_changed_reads_as_no_timestamp(
            secs in 0i64..4_000_000_000,
            at in 0usize..19,
            with in "[^0-9]",
        ) {
            // `YYYY-MM-DDTHH:MM:SS`: every byte of it is checked, digit or mark.
            let iso = format_iso(secs * S);
            let mut changed = iso[..at].to_string();
            changed.push_str(&with);
            changed.push_str(&iso[at + 1..]);
            prop_assume!(changed.as_bytes()[at] != iso.as_bytes()[at]);
            prop_assume!(!(at == 10 && with == " "));
            prop_assert_eq!(datetime(&changed), None, "{}", changed);
        }

        #[test]
        fn levels_are_read_as_their_names_compared_ignoring_case(
            name in 0..LEVEL_NAMES.len(),
            upper in any::<u8>(),
            before in "\\[{0,2}",
            after in "[\\]:]{0,2}",
            other in "\\PC{0,9}",
        ) {
            // A name with its letters' case flipped by `upper`'s bits, in brackets; and
            // any word.
            let cased: String = LEVEL_NAMES[name].0.chars().enumerate()
                .map(|(i, c)| if upper >> (i % 8) & 1 == 1 { c } else { c.to_ascii_lowercase() })
                .collect();
            for word in [format!("{before}{cased}{after}"), other] {
                let trimmed = word.trim_start_matches('[').trim_end_matches([']', ':']);
                let by_name = LEVEL_NAMES
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(trimmed))
                    .map(|(_, level)| *level);
                prop_assert_eq!(Level::parse(&word), by_name, "{:?}", word);
            }
        }

        #[test]
        fn rust_paths_are_told_as_split_tells_them(target in "[a-z_:1]{0,12}") {
            let by_split = target.contains("::")
                && target.split("::").all(|seg| {
                    seg.bytes()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
                        && !seg.contains(':')
                });
            prop_assert_eq!(is_rust_path(&target), by_split, "{}", target);
        }

        #[test]
        fn any_line_parses_and_its_message_is_a_suffix(line in "\\PC{0,60}") {
            let h = parse(&line);
            prop_assert!(line.ends_with(h.message));
        }
    }
}

//! Structured log lines: a JSON object per line, as the JSON formatters of Go (zap,
//! logrus, zerolog), Node.js (pino, bunyan, winston), Python (structlog,
//! python-json-logger), .NET (Serilog), Java (logback, log4j2) and `tracing` write, and
//! OpenTelemetry's log data model; and logfmt (`time=... level=info msg="..." k=v`). Each
//! may follow what a collector or container runtime put before the program's own line:
//! timestamps, and CRI's stream and tag (`stdout F`).
//!
//! The time, level, thread, logger and message are found by their usual field names (the
//! program's own time preferred to the collector's); every other scalar field, and those
//! of the objects loggers nest their fields in (`fields`, `attributes`, `Properties`,
//! ...), is appended to the message as `key=value`, so that a request id logged as a
//! field is a value named by its field, as in a line of text.

use serde_json::{Map, Value};

use crate::header::{self, Level};

/// How a line was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LineFormat {
    /// A JSON object.
    Json,
    /// `key=value` pairs.
    Logfmt,
    /// Text: a prefix (`header::parse`) and a message.
    Text,
}

impl LineFormat {
    /// The name reports use.
    pub fn name(self) -> &'static str {
        match self {
            LineFormat::Json => "json",
            LineFormat::Logfmt => "logfmt",
            LineFormat::Text => "text",
        }
    }
}

/// A structured line's fields.
#[derive(Clone, Debug, PartialEq)]
pub struct StructuredLine {
    /// JSON or logfmt.
    pub format: LineFormat,
    /// The time, in nanoseconds since the Unix epoch: the program's own, else the
    /// collector's.
    pub time_ns: Option<i64>,
    /// The level field.
    pub level: Option<Level>,
    /// The thread field.
    pub thread: Option<String>,
    /// The logger (or target, or source place) field.
    pub logger: Option<String>,
    /// The message field, with the other scalar fields appended as `key=value`.
    pub message: String,
}

const TIME_FIELDS: [&str; 11] = [
    "timestamp",
    "time",
    "ts",
    "@timestamp",
    "datetime",
    "@t",
    "Timestamp",
    "asctime",
    "time_unix_nano",
    "timeUnixNano",
    "observed_time_unix_nano",
];
const LEVEL_FIELDS: [&str; 10] = [
    "level",
    "severity",
    "lvl",
    "log.level",
    "@l",
    "Level",
    "levelname",
    "severity_text",
    "severityText",
    "loglevel",
];
const THREAD_FIELDS: [&str; 6] = [
    "thread",
    "threadName",
    "thread_name",
    "threadId",
    "thread.name",
    "tid",
];
const LOGGER_FIELDS: [&str; 8] = [
    "logger",
    "logger_name",
    "loggerName",
    "log.logger",
    "SourceContext",
    "target",
    "caller",
    "name",
];
/// Rendered messages before templates (Serilog's `@m` before `@mt`).
const MESSAGE_FIELDS: [&str; 10] = [
    "message",
    "msg",
    "@message",
    "@m",
    "RenderedMessage",
    "body",
    "event",
    "short_message",
    "@mt",
    "MessageTemplate",
];
/// Objects whose fields are the event's own (`tracing`'s, OpenTelemetry's, Serilog's).
const NESTED_FIELDS: [&str; 5] = ["fields", "attributes", "Properties", "@x", "extra"];

/// The line the program wrote, and the time the wrapper gave it, when `line` is Docker's
/// json-file driver's (`{"log":"<the line>\n","stream":"stdout","time":"..."}`); `None`
/// for any other line, after one comparison for most.
pub fn docker_json_file(line: &str) -> Option<(String, Option<i64>)> {
    // The driver writes `log` first, always.
    let line = line.trim_start();
    if !line.starts_with(r#"{"log":"#) {
        return None;
    }
    let line = line.trim_end();
    let Value::Object(mut fields) = serde_json::from_str(line).ok()? else {
        return None;
    };
    if !fields.contains_key("stream") {
        return None;
    }
    let Some(Value::String(mut log)) = fields.remove("log") else {
        return None;
    };
    while log.ends_with(['\n', '\r']) {
        log.pop();
    }
    let time = match fields.get("time") {
        Some(Value::String(t)) => header::datetime_ns(t),
        _ => None,
    };
    Some((log, time))
}

/// The length of a JSON object pretty-printed over several lines at the start of
/// `bytes` (its first line a lone `{`, as `JSON.stringify(v, null, 2)`, Python's
/// `json.dumps(indent=...)` and serde's `to_string_pretty` write it), through the end of
/// the line that closes it; `None` when `bytes` does not start so, when the object does
/// not close within `limit` bytes, or when what closes is not JSON. Braces inside
/// strings are read as the strings' (escapes too); depth is a count, not recursion.
pub fn pretty_json_len(bytes: &[u8], limit: usize) -> Option<usize> {
    let end = closing_brace(bytes, limit)?;
    let line_end = memchr::memchr(b'\n', &bytes[end..]).map_or(bytes.len(), |n| end + n);
    let object = bytes[..line_end]
        .strip_suffix(b"\r")
        .unwrap_or(&bytes[..line_end]);
    let parsed: Value = serde_json::from_slice(object).ok()?;
    (line_end <= limit && parsed.is_object()).then_some(object.len())
}

/// Where the last JSON object pretty-printed over lines in `bytes` begins when it has
/// not closed by their end (a lone `{` line in the last `limit` bytes whose object
/// runs past them): a file read while such an object is being written ends so.
pub fn unclosed_pretty_json(bytes: &[u8], limit: usize) -> Option<usize> {
    let from = bytes.len().saturating_sub(limit);
    // The first line that starts at or after `from`.
    let mut at = if from == 0 || bytes.get(from - 1) == Some(&b'\n') {
        from
    } else {
        from + memchr::memchr(b'\n', &bytes[from..])? + 1
    };
    while at < bytes.len() {
        let end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |n| at + n + 1);
        let line = &bytes[at..end];
        if line.len() <= 8 && line.trim_ascii() == b"{" {
            match closing_brace(&bytes[at..], limit) {
                Some(close) => at += close + 1,
                None => return Some(at),
            }
        } else {
            at = end;
        }
    }
    None
}

/// The offset of the brace that closes the object opened by `bytes`' first line, a lone
/// `{`, within `limit` bytes. Braces inside strings are read as the strings' (escapes
/// too); depth is a count, not recursion.
fn closing_brace(bytes: &[u8], limit: usize) -> Option<usize> {
    let first_end = memchr::memchr(b'\n', bytes)?;
    if bytes[..first_end].trim_ascii() != b"{" {
        return None;
    }
    let mut depth = 0usize;
    let (mut in_string, mut escaped) = (false, false);
    bytes.iter().take(limit).position(|&b| {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            return false;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                return depth == 0;
            }
            _ => {}
        }
        false
    })
}

/// Reads `line` as a structured line, after any collector's prefix; `None` when it is
/// text.
pub fn parse(line: &str) -> Option<StructuredLine> {
    // Most text lines have neither, and are ruled out by one vectorised scan.
    memchr::memchr2(b'{', b'=', line.as_bytes())?;
    let (collected, rest) = header::collector_prefix(line);
    let mut s = json(rest).or_else(|| logfmt(rest))?;
    s.time_ns = s.time_ns.or(collected);
    Some(s)
}

/// Reads a JSON object line.
fn json(line: &str) -> Option<StructuredLine> {
    let line = line.trim();
    if !line.starts_with('{') {
        return None;
    }
    // serde_json refuses nesting past 128 levels with an error, not a deep stack.
    let Value::Object(mut fields) = serde_json::from_str(line).ok()? else {
        return None;
    };
    for nested in NESTED_FIELDS {
        if let Some(Value::Object(inner)) = fields.remove(nested) {
            for (k, v) in inner {
                fields.entry(k).or_insert(v);
            }
        }
    }
    Some(fields_line(LineFormat::Json, fields))
}

/// The usual fields, by role: time, level, thread, logger, message; each role's names
/// in the order preferred.
const ROLES: [&[&str]; 5] = [
    &TIME_FIELDS,
    &LEVEL_FIELDS,
    &THREAD_FIELDS,
    &LOGGER_FIELDS,
    &MESSAGE_FIELDS,
];

/// The role a field named `key` plays, and its name's rank among the role's names.
fn role_of(key: &str) -> Option<(usize, usize)> {
    ROLES.iter().enumerate().find_map(|(role, names)| {
        names
            .iter()
            .position(|name| *name == key)
            .map(|rank| (role, rank))
    })
}

/// The line `fields` make, the usual ones taken out: of each role, the field whose name
/// comes first; the others, as every other field, appended. Sorted out in one pass over
/// the fields, as looking each usual name up costs four times as much.
fn fields_line(format: LineFormat, fields: Map<String, Value>) -> StructuredLine {
    let mut usual: [Option<(usize, String, Value)>; ROLES.len()] = Default::default();
    let mut rest: Vec<(String, Value)> = Vec::new();
    for (k, v) in fields {
        let Some((role, rank)) = role_of(&k) else {
            rest.push((k, v));
            continue;
        };
        // `role` indexes ROLES, as `usual` does.
        let slot = &mut usual[role];
        match slot {
            Some((kept, _, _)) if *kept < rank => rest.push((k, v)),
            _ => {
                if let Some((_, displaced, value)) = slot.replace((rank, k, v)) {
                    rest.push((displaced, value));
                }
            }
        }
    }
    let [time, level, thread, logger, message] = usual.map(|u| u.map(|(_, _, v)| v));
    let text = |v: Value| match v {
        Value::String(s) => s,
        other => other.to_string(),
    };
    let time_ns = time.and_then(|v| match v {
        Value::String(s) => header::datetime_ns(&s).or_else(|| epoch_ns(&s)),
        Value::Number(n) => epoch_ns(&n.to_string()),
        _ => None,
    });
    let level = level.and_then(|v| match v {
        Value::Number(n) => n.as_u64().and_then(numbered_level),
        v => Level::parse(&text(v)),
    });
    let thread = thread.map(text);
    let logger = logger.map(text);
    let mut message = message.map(text).unwrap_or_default();
    rest.sort_by(|a, b| a.0.cmp(&b.0));
    for (k, v) in rest {
        if matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_)) {
            message.push(' ');
            message.push_str(&k);
            message.push('=');
            message.push_str(&text(v));
        }
    }
    StructuredLine {
        format,
        time_ns,
        level,
        thread,
        logger,
        message,
    }
}

/// pino's and bunyan's numbered levels.
fn numbered_level(n: u64) -> Option<Level> {
    Some(match n {
        10 => Level::Trace,
        20 => Level::Debug,
        30 => Level::Info,
        40 => Level::Warn,
        50 => Level::Error,
        60 => Level::Fatal,
        _ => return None,
    })
}

/// An epoch timestamp written as a decimal number, in seconds, milliseconds, microseconds
/// or nanoseconds (told by its size), in nanoseconds; read digit by digit, as a float
/// would lose the nanoseconds of a time in seconds.
fn epoch_ns(t: &str) -> Option<i64> {
    let (whole, fraction) = t.split_once('.').unwrap_or((t, ""));
    if whole.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let whole: i64 = whole.parse().ok()?;
    // Digits of a nanosecond each unit holds.
    let digits = match whole {
        w if w < 100_000_000_000 => 9,
        w if w < 100_000_000_000_000 => 6,
        w if w < 100_000_000_000_000_000 => 3,
        _ => 0,
    };
    let mut ns = whole.checked_mul(10i64.pow(digits))?;
    for (k, d) in fraction.bytes().take(digits as usize).enumerate() {
        ns = ns.checked_add(i64::from(d - b'0') * 10i64.pow(digits - 1 - k as u32))?;
    }
    Some(ns)
}

/// Reads a logfmt line: nothing but `key=value` pairs (a value quoted when it holds
/// spaces), at least two, one of them a message or a level; `None` otherwise, so that
/// text with a `key=value` in it stays text.
fn logfmt(line: &str) -> Option<StructuredLine> {
    let mut fields = Map::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        // The key ends at its `=`: a space first is text (found without scanning on).
        let eq = rest
            .bytes()
            .position(|b| b == b'=' || b.is_ascii_whitespace())
            .filter(|&at| rest.as_bytes()[at] == b'=')?;
        let key = &rest[..eq];
        if key.is_empty()
            || !key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b'@'))
        {
            return None;
        }
        let after = &rest[eq + 1..];
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let (value, len) = quoted_value(quoted)?;
            (value, &quoted[len..])
        } else {
            let end = after
                .bytes()
                .position(|b| b.is_ascii_whitespace())
                .unwrap_or(after.len());
            if after[..end].contains('"') {
                return None;
            }
            (after[..end].to_string(), &after[end..])
        };
        if !next.is_empty() && !next.starts_with(|c: char| c.is_ascii_whitespace()) {
            return None;
        }
        fields.insert(key.to_string(), Value::String(value));
        rest = next.trim_start();
    }
    let named = |names: &[&str]| names.iter().any(|n| fields.contains_key(*n));
    if fields.len() < 2 || !(named(&MESSAGE_FIELDS) || named(&LEVEL_FIELDS)) {
        return None;
    }
    Some(fields_line(LineFormat::Logfmt, fields))
}

/// A quoted logfmt value (after its opening quote), unescaped, and the bytes it took
/// with its closing quote; `None` when it is not closed.
fn quoted_value(s: &str) -> Option<(String, usize)> {
    let mut value = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, i + 1)),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                't' => value.push('\t'),
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn json_lines_give_their_fields_and_the_rest_as_key_values() {
        let tracing = r#"{"timestamp":"2023-01-29T08:42:09.939Z","level":"INFO","fields":{"message":"order placed","order_id":"4d2a46c7","items":3},"target":"shop::orders","threadName":"tokio-1"}"#;
        let j = parse(tracing).expect("a JSON line");
        assert_eq!(j.format, LineFormat::Json);
        assert_eq!(j.time_ns, Some(1_674_981_729 * S + 939_000_000));
        assert_eq!(j.level, Some(Level::Info));
        assert_eq!(j.thread.as_deref(), Some("tokio-1"));
        assert_eq!(j.logger.as_deref(), Some("shop::orders"));
        assert_eq!(j.message, "order placed items=3 order_id=4d2a46c7");
        let epoch = parse(r#"{"ts": 1674981729.5, "msg": "x", "nested": {"a": 1}}"#).expect("JSON");
        assert_eq!(epoch.time_ns, Some(1_674_981_729 * S + 500_000_000));
        assert_eq!(epoch.message, "x");
        assert_eq!(
            parse(r#"{"ts": 1674981729500}"#).and_then(|j| j.time_ns),
            Some(1_674_981_729 * S + 500_000_000)
        );
        assert_eq!(parse("[1, 2]"), None);
        assert_eq!(parse("{not json"), None);
        assert_eq!(parse("plain text"), None);
    }

    #[test]
    fn json_after_a_collectors_timestamp_is_json_with_the_programs_own_time() {
        // OnlineBoutique's frontend, as Kubernetes keeps it.
        let line = r#"2022-08-23T13:28:10.374603135Z {"http.req.id":"c52c4058","http.req.method":"GET","http.req.path":"/","message":" Request started","session":"bb6881dc","severity":"info","timestamp":"2022-08-23T13:28:10.374600000Z"}"#;
        let j = parse(line).expect("JSON after a timestamp");
        assert_eq!(j.time_ns, Some(1_661_261_290 * S + 374_600_000));
        assert_eq!(j.level, Some(Level::Info));
        assert_eq!(
            j.message,
            " Request started http.req.id=c52c4058 http.req.method=GET http.req.path=/ session=bb6881dc"
        );
        // With no time of its own, the collector's; CRI's stream and tag skipped.
        let cri = r#"2022-08-23T13:28:10.5Z stdout F {"msg":"paid","level":30,"pid":1}"#;
        let j = parse(cri).expect("JSON after CRI's prefix");
        assert_eq!(j.time_ns, Some(1_661_261_290 * S + 500_000_000));
        assert_eq!(
            (j.level, j.message.as_str()),
            (Some(Level::Info), "paid pid=1")
        );
    }

    #[test]
    fn dockers_json_file_lines_give_the_programs_line_and_dockers_time() {
        let text = r#"{"log":"13:28:31.389 INFO  - Received ad request\n","stream":"stdout","time":"2022-08-23T13:28:31.390164372Z"}"#;
        assert_eq!(
            docker_json_file(text),
            Some((
                "13:28:31.389 INFO  - Received ad request".to_string(),
                Some(1_661_261_311 * S + 390_164_372)
            ))
        );
        // The program's own JSON, escaped in the driver's string.
        let json = r#"{"log":"{\"msg\":\"paid\",\"order_id\":\"o-1\"}\n","stream":"stderr","time":"2022-08-23T13:28:31Z"}"#;
        let (inner, _) = docker_json_file(json).expect("Docker's line");
        assert_eq!(
            parse(&inner).expect("JSON inside").message,
            "paid order_id=o-1"
        );
        // A logger's own field named `log`, without the driver's `stream`; not JSON.
        for other in [
            r#"{"log":"x","msg":"y"}"#,
            r#"{"log":"cut"#,
            r#"{"msg":"x","log":"y","stream":"stdout"}"#,
        ] {
            assert_eq!(docker_json_file(other), None, "{other}");
        }
    }

    #[test]
    fn the_common_loggers_fields_are_found_by_their_names() {
        // Serilog's compact JSON, OpenTelemetry's log record, structlog, zap.
        let serilog = r#"{"@t":"2024-05-01T00:00:00Z","@mt":"Cart {CartId} read","@l":"Warning","CartId":"c-9","SourceContext":"Shop.Cart"}"#;
        let j = parse(serilog).expect("Serilog");
        assert_eq!(j.level, Some(Level::Warn));
        assert_eq!(j.logger.as_deref(), Some("Shop.Cart"));
        assert_eq!(j.message, "Cart {CartId} read CartId=c-9");
        let otel = r#"{"time_unix_nano":1714521600000000000,"severity_text":"ERROR","body":"charge failed","attributes":{"order.id":"o-7"}}"#;
        let j = parse(otel).expect("OpenTelemetry");
        assert_eq!(j.time_ns, Some(1_714_521_600 * S));
        assert_eq!(j.level, Some(Level::Error));
        assert_eq!(j.message, "charge failed order.id=o-7");
        let structlog = r#"{"event":"user logged in","user_id":42,"level":"info","timestamp":"2024-05-01T00:00:00Z"}"#;
        assert_eq!(
            parse(structlog).expect("structlog").message,
            "user logged in user_id=42"
        );
        let zap = r#"{"level":"debug","ts":1714521600.25,"caller":"cart/cart.go:42","msg":"read","cart":"c-1"}"#;
        let j = parse(zap).expect("zap");
        assert_eq!(j.logger.as_deref(), Some("cart/cart.go:42"));
        assert_eq!(j.time_ns, Some(1_714_521_600 * S + 250_000_000));
        // Past what nanoseconds can hold, or not a number: no time.
        for ts in [
            "99999999999999999999",
            "9223372036854775.808",
            "-1",
            "1e9",
            ".",
        ] {
            assert_eq!(epoch_ns(ts), None, "{ts}");
        }
    }

    proptest::proptest! {
        /// A line of fields written as logfmt or as JSON reads back as the same
        /// message: the message field, then every other field as `key=value` by key.
        #[test]
        fn fields_written_as_logfmt_or_json_read_back_alike(
            msg in "[ -~]{0,30}",
            fields in proptest::collection::btree_map("[a-z][a-z0-9_.]{0,8}", "[ -~]{0,12}", 0..6),
        ) {
            let fields: Vec<(String, String)> = fields
                .into_iter()
                .filter(|(k, _)| ![&TIME_FIELDS[..], &LEVEL_FIELDS, &THREAD_FIELDS, &LOGGER_FIELDS, &MESSAGE_FIELDS, &NESTED_FIELDS]
                    .iter()
                    .any(|names| names.contains(&k.as_str())))
                .collect();
            let mut expected = msg.clone();
            for (k, v) in &fields {
                expected.push_str(&format!(" {k}={v}"));
            }
            let quote = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
            let mut logfmt = format!("level=info msg={}", quote(&msg));
            let mut json = serde_json::Map::new();
            json.insert("msg".into(), msg.clone().into());
            for (k, v) in &fields {
                logfmt.push_str(&format!(" {k}={}", quote(v)));
                json.insert(k.clone(), v.clone().into());
            }
            let read = parse(&logfmt).expect("logfmt reads");
            proptest::prop_assert_eq!((read.format, &read.message), (LineFormat::Logfmt, &expected));
            let json = serde_json::Value::Object(json).to_string();
            let read = parse(&json).expect("JSON reads");
            proptest::prop_assert_eq!((read.format, &read.message), (LineFormat::Json, &expected));
        }

        /// An object pretty-printed over lines (strings holding braces, brackets,
        /// quotes and line breaks; objects and arrays inside) is found whole, and not
        /// when cut or past the limit.
        #[test]
        fn an_object_pretty_printed_is_found_whole_and_never_when_cut(
            fields in proptest::collection::btree_map("[ -~]{0,6}", "[ -~{}\\[\\]\"\n]{0,12}", 0..6),
            nested in proptest::collection::vec("[{}\\[\\]\"a]{0,4}", 0..4),
            cut_at in 0.0..1.0f64,
        ) {
            let mut object = serde_json::Map::new();
            for (k, v) in fields {
                object.insert(k, v.into());
            }
            object.insert("nested".into(), serde_json::json!({"list": nested, "empty": {}}));
            let pretty = serde_json::to_string_pretty(&serde_json::Value::Object(object))
                .expect("a map of strings is written");
            let text = format!("{pretty}\n{{\"next\": 1}}\n");
            proptest::prop_assert_eq!(pretty_json_len(text.as_bytes(), 1 << 20), Some(pretty.len()));
            proptest::prop_assert_eq!(pretty_json_len(text.as_bytes(), pretty.len() - 1), None);
            let cut = &pretty.as_bytes()[..pretty.len() - 1];
            proptest::prop_assert_eq!(pretty_json_len(cut, 1 << 20), None);
            // Read while being written: a whole object, then one cut anywhere after its
            // first line, is found unclosed where the cut one begins; whole, none is.
            proptest::prop_assert_eq!(unclosed_pretty_json(text.as_bytes(), 1 << 20), None);
            let k = 2 + ((pretty.len() - 3) as f64 * cut_at) as usize;
            let writing = format!("{pretty}\n{}", &text[..k]);
            proptest::prop_assert_eq!(
                unclosed_pretty_json(writing.as_bytes(), 1 << 20),
                Some(pretty.len() + 1)
            );
        }
    }

    #[test]
    fn of_two_fields_of_one_role_the_name_preferred_is_taken_and_the_other_kept() {
        // No name plays two roles, so the order the fields come in decides nothing.
        let mut names: Vec<&str> = ROLES.iter().flat_map(|r| r.iter().copied()).collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all);
        for line in [
            r#"{"msg":"second","message":"first","time":"2023-01-29T08:42:09Z","ts":"x"}"#,
            r#"{"ts":"x","time":"2023-01-29T08:42:09Z","message":"first","msg":"second"}"#,
        ] {
            let j = parse(line).expect("JSON");
            assert_eq!(j.message, "first msg=second ts=x", "{line}");
            assert_eq!(j.time_ns, Some(1_674_981_729 * S), "{line}");
        }
        let levels =
            parse(r#"{"severity":"warn","level":"error","lvl":"debug","msg":"m"}"#).expect("JSON");
        assert_eq!(levels.level, Some(Level::Error));
        assert_eq!(levels.message, "m lvl=debug severity=warn");
    }

    #[test]
    fn logfmt_is_key_value_pairs_only_with_a_message_or_level() {
        let line =
            r#"time=2024-05-01T00:00:00Z level=info msg="order placed" order_id=o-1 items=3"#;
        let l = parse(line).expect("logfmt");
        assert_eq!(l.format, LineFormat::Logfmt);
        assert_eq!(l.time_ns, Some(1_714_521_600 * S));
        assert_eq!(l.level, Some(Level::Info));
        assert_eq!(l.message, "order placed items=3 order_id=o-1");
        let escaped = parse(r#"level=warn msg="said \"no\"""#).expect("escaped quotes");
        assert_eq!(escaped.message, r#"said "no""#);
        // Text with a pair in it, pairs with neither message nor level, an open quote.
        for text in [
            "GetCartAsync called with userId=bb6881dc",
            "a=1 b=2",
            r#"level=info msg="unclosed"#,
            "level=info",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }
}

//! W3C Trace Context (`traceparent`, `tracestate`) and W3C Baggage, parsed and written
//! exactly as the specifications say. An invalid `traceparent` means "no parent": the
//! receiver starts a new trace and ignores `tracestate`. Nothing here panics on input.
//!
//! `tracestate` keeps at most 32 members, with keys as Trace Context Level 2 has them (`@`
//! allowed after the first character). `baggage` keeps at most 180 members and 8 KiB, and is
//! split with `memchr`, since a Pivot Tracing bag puts a kilobyte in it. The entry points an
//! application uses are in `crate::context` (`inject`, `extract`, `in_current_span` for
//! threads and pools) and `crate::message` (one-way messages).

use std::fmt::Write as _;
use std::sync::Arc;

use causeway_model::{SpanId, TraceId};

/// The `traceparent` header name.
pub const TRACEPARENT: &str = "traceparent";
/// The `tracestate` header name.
pub const TRACESTATE: &str = "tracestate";
/// The `baggage` header name.
pub const BAGGAGE: &str = "baggage";

const MAX_TRACESTATE_MEMBERS: usize = 32;
const MAX_BAGGAGE_MEMBERS: usize = 180;
const MAX_BAGGAGE_BYTES: usize = 8192;

/// The sampled bit of the trace flags.
pub const FLAG_SAMPLED: u8 = 0x01;

/// The part of a span's identity that crosses process boundaries.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanContext {
    /// The trace.
    pub trace_id: TraceId,
    /// The span (the parent, seen from the receiver).
    pub span_id: SpanId,
    /// W3C trace flags; bit 0 is "sampled".
    pub flags: u8,
    /// The `tracestate` list, already validated.
    pub trace_state: TraceState,
    /// True when the context came from another process.
    pub remote: bool,
}

impl SpanContext {
    /// True when the sampled flag is set.
    pub fn is_sampled(&self) -> bool {
        self.flags & FLAG_SAMPLED != 0
    }

    /// The `traceparent` value (always version 00).
    pub fn traceparent(&self) -> String {
        let mut s = String::with_capacity(55);
        let _ = write!(
            s,
            "00-{}-{}-{:02x}",
            self.trace_id, self.span_id, self.flags
        );
        s
    }
}

fn is_lower_hex(b: &[u8]) -> bool {
    b.iter()
        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

fn hex_u128(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |acc, c| {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            _ => c - b'a' + 10,
        };
        (acc << 4) | d as u128
    })
}

/// Parses one `traceparent` value. `None` for anything the specification calls invalid:
/// a version other than two lower-case hex digits or `ff`, wrong lengths, upper-case or
/// other non-hex characters, all-zero ids, or (for version 00) trailing data. A future
/// version's trailing data after a `-` is allowed and ignored, and only its sampled flag
/// is kept.
pub fn parse_traceparent(value: &str) -> Option<(TraceId, SpanId, u8)> {
    let v = value.trim_matches([' ', '\t']).as_bytes();
    if v.len() < 55 {
        return None;
    }
    let (version, trace, span, flags) = (&v[0..2], &v[3..35], &v[36..52], &v[53..55]);
    if v[2] != b'-' || v[35] != b'-' || v[52] != b'-' {
        return None;
    }
    if !is_lower_hex(version) || version == b"ff" {
        return None;
    }
    if !is_lower_hex(trace) || !is_lower_hex(span) || !is_lower_hex(flags) {
        return None;
    }
    let mut flags = hex_u128(flags) as u8;
    if version == b"00" {
        if v.len() != 55 {
            return None;
        }
    } else {
        if v.len() > 55 && v[55] != b'-' {
            return None;
        }
        flags &= FLAG_SAMPLED;
    }
    let trace_id = TraceId::new(hex_u128(trace))?;
    let span_id = SpanId::new(hex_u128(span) as u64)?;
    Some((trace_id, span_id, flags))
}

/// A validated W3C `tracestate` list, in order (left-most is the most recent vendor).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceState(Option<Arc<[(String, String)]>>);

/// A tracestate key as Trace Context Level 2 has it: 1 to 256 characters, the first a
/// lower-case letter or a digit, the rest also `_ - * / @` (Level 1's tenant@system split,
/// with its 241 and 14 character parts, is gone; every Level 1 key is still valid).
fn valid_key(k: &str) -> bool {
    let b = k.as_bytes();
    let rest_ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || b"_-*/@".contains(c);
    matches!(b.first(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && b.len() <= 256
        && b[1..].iter().all(rest_ok)
}

fn valid_value(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= 256
        && b.iter()
            .all(|&c| (0x20..=0x7e).contains(&c) && c != b',' && c != b'=')
        && b[b.len() - 1] != b' '
}

impl TraceState {
    /// Parses the `tracestate` header values, in header order, combined as one list.
    /// Any invalid member, a duplicated key or more than 32 members discards the whole
    /// list, as the specification asks; empty members are allowed and skipped.
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> TraceState {
        let mut members: Vec<(String, String)> = Vec::new();
        for value in values {
            for member in value.split(',') {
                let member = member.trim_matches([' ', '\t']);
                if member.is_empty() {
                    continue;
                }
                let Some((k, v)) = member.split_once('=') else {
                    return TraceState::default();
                };
                if !valid_key(k) || !valid_value(v) || members.iter().any(|(mk, _)| mk == k) {
                    return TraceState::default();
                }
                members.push((k.to_owned(), v.to_owned()));
                if members.len() > MAX_TRACESTATE_MEMBERS {
                    return TraceState::default();
                }
            }
        }
        if members.is_empty() {
            TraceState::default()
        } else {
            TraceState(Some(members.into()))
        }
    }

    /// The members, left to right.
    pub fn members(&self) -> &[(String, String)] {
        self.0.as_deref().unwrap_or_default()
    }

    /// The value of a key.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.members()
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// True when there are no members.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The header value; members that would take it past 512 bytes are left off from the
    /// right, longest (over 128 bytes) first, as the specification suggests.
    pub fn header(&self) -> String {
        let mut members: Vec<&(String, String)> = self.members().iter().collect();
        let len = |m: &[&(String, String)]| {
            m.iter().map(|(k, v)| k.len() + v.len() + 1).sum::<usize>() + m.len().saturating_sub(1)
        };
        while len(&members) > 512 {
            match members
                .iter()
                .rposition(|(k, v)| k.len() + v.len() + 1 > 128)
            {
                Some(i) => {
                    members.remove(i);
                }
                None => {
                    members.pop();
                }
            }
        }
        let mut s = String::new();
        for (i, (k, v)) in members.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(k);
            s.push('=');
            s.push_str(v);
        }
        s
    }
}

/// W3C Baggage: application key-values that travel with the request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Baggage {
    entries: Vec<(String, String, String)>,
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
}

/// The pieces of `text` between ASCII bytes `sep`, as `str::split` gives them, found by
/// `memchr`'s vectorised iterator: a header's kilobyte of baggage is split on every
/// request that carries it.
pub(crate) fn split_byte(text: &str, sep: u8) -> impl Iterator<Item = &str> {
    debug_assert!(sep.is_ascii());
    let mut start = 0;
    let mut ends = memchr::memchr_iter(sep, text.as_bytes());
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        // An ASCII byte is a character boundary on both of its sides.
        let piece = match ends.next() {
            Some(at) => {
                let p = text.get(start..at);
                start = at + 1;
                p
            }
            None => {
                done = true;
                text.get(start..)
            }
        };
        Some(piece.unwrap_or_default())
    })
}

/// `text` split at the first ASCII byte `sep`.
fn split_once_byte(text: &str, sep: u8) -> Option<(&str, &str)> {
    let at = memchr::memchr(sep, text.as_bytes())?;
    Some((text.get(..at)?, text.get(at + 1..)?))
}

fn percent_decode(s: &str) -> Option<String> {
    // Most values (a Pivot Tracing bag's base64url among them) have nothing encoded.
    if memchr::memchr(b'%', s.as_bytes()).is_none() {
        return Some(s.to_owned());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let h = s.get(i + 1..i + 3)?;
            if !h.bytes().all(|c| c.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// baggage-octet: printable ASCII except space, '"', ',', ';', '\', and '%' (encoded so
/// that decoding is unambiguous). A table: a bag's kilobyte of base64 is scanned on
/// every request that carries it.
const PLAIN: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0x21;
    while c <= 0x7e {
        t[c] = !matches!(c as u8, b'"' | b',' | b';' | b'\\' | b'%');
        c += 1;
    }
    t
};

/// Whether `s` is all baggage-octets, in a few vectorised passes: a Pivot Tracing bag's
/// kilobyte of base64url is, and goes into every outgoing request's header.
fn all_plain(s: &str) -> bool {
    let b = s.as_bytes();
    // Printable ASCII, a chunk at a time without an early exit inside it, so that the
    // compiler vectorises the test.
    let printable = |chunk: &[u8]| {
        chunk
            .iter()
            .fold(true, |ok, &c| ok & (c.wrapping_sub(0x21) < 0x5e))
    };
    b.chunks(32).all(printable)
        && memchr::memchr3(b'"', b',', b';', b).is_none()
        && memchr::memchr2(b'\\', b'%', b).is_none()
}

fn percent_encode(s: &str, out: &mut String) {
    if all_plain(s) {
        out.push_str(s);
        return;
    }
    let plain = |c: u8| PLAIN[usize::from(c)];
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        // A plain run goes in at once (most values are all plain); it starts and ends
        // at ASCII bytes, so at character boundaries.
        let end = b[i..]
            .iter()
            .position(|&c| !plain(c))
            .map_or(b.len(), |p| i + p);
        if end > i {
            out.push_str(&s[i..end]);
        }
        if let Some(&c) = b.get(end) {
            let _ = write!(out, "%{c:02X}");
        }
        i = end + 1;
    }
}

impl Baggage {
    /// An empty baggage.
    pub fn new() -> Baggage {
        Baggage::default()
    }

    /// Parses `baggage` header values. Invalid members are skipped, never fatal; members
    /// past 180 or past 8192 bytes are dropped.
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> Baggage {
        let mut b = Baggage::default();
        let mut bytes = 0;
        for value in values {
            for member in split_byte(value, b',') {
                let member = member.trim_matches([' ', '\t']);
                if member.is_empty() {
                    continue;
                }
                let (kv, props) = match split_once_byte(member, b';') {
                    Some((kv, p)) => (kv, p.trim_matches([' ', '\t'])),
                    None => (member, ""),
                };
                let Some((k, v)) = split_once_byte(kv, b'=') else {
                    continue;
                };
                let k = k.trim_matches([' ', '\t']);
                let v = v.trim_matches([' ', '\t']);
                let Some(v) = percent_decode(v) else {
                    continue;
                };
                if !is_token(k) {
                    continue;
                }
                bytes += member.len() + 1;
                if b.entries.len() >= MAX_BAGGAGE_MEMBERS || bytes > MAX_BAGGAGE_BYTES {
                    return b;
                }
                b.set_with_properties(k, &v, props);
            }
        }
        b
    }

    /// Sets a key (replacing an earlier value).
    pub fn set(&mut self, key: &str, value: &str) {
        self.set_with_properties(key, value, "");
    }

    fn set_with_properties(&mut self, key: &str, value: &str, props: &str) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.0 == key) {
            e.1 = value.to_owned();
            e.2 = props.to_owned();
        } else {
            self.entries
                .push((key.to_owned(), value.to_owned(), props.to_owned()));
        }
    }

    /// Removes a key; its value, if it was there.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let at = self.entries.iter().position(|e| e.0 == key)?;
        Some(self.entries.remove(at).1)
    }

    /// The value of a key.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.0 == key)
            .map(|e| e.1.as_str())
    }

    /// The entries as (key, value).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|e| (e.0.as_str(), e.1.as_str()))
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The header value, percent-encoding values.
    pub fn header(&self) -> String {
        let mut s = String::new();
        self.write_header(None, 0, &mut s);
        s
    }

    /// Appends the header value to `out`, leaving out member `skip`, with room for
    /// `extra` bytes more.
    fn write_header(&self, skip: Option<&str>, extra: usize, out: &mut String) {
        let members = || self.entries.iter().filter(|e| Some(e.0.as_str()) != skip);
        let plain_len: usize = members()
            .map(|(k, v, p)| k.len() + v.len() + p.len() + 2)
            .sum();
        out.reserve(plain_len + extra);
        for (k, v, p) in members() {
            if !out.is_empty() {
                out.push(',');
            }
            out.push_str(k);
            out.push('=');
            percent_encode(v, out);
            if !p.is_empty() {
                out.push(';');
                out.push_str(p);
            }
        }
    }
}

/// Reads headers from a carrier (HTTP headers, gRPC metadata, a message's properties).
pub trait Extractor {
    /// Every value of a header, in order; names are case-insensitive.
    fn get_all(&self, name: &str) -> Vec<&str>;
}

/// Writes headers into a carrier.
pub trait Injector {
    /// Sets a header, replacing earlier values.
    fn set(&mut self, name: &str, value: String);
}

impl Extractor for http::HeaderMap {
    fn get_all(&self, name: &str) -> Vec<&str> {
        // UTF-8 checked (vectorised for ASCII), not `to_str`'s byte-by-byte visible-ASCII
        // test: a baggage header can hold a kilobyte. The parsers check what they read.
        http::HeaderMap::get_all(self, name)
            .iter()
            .filter_map(|v| std::str::from_utf8(v.as_bytes()).ok())
            .collect()
    }
}

impl Injector for http::HeaderMap {
    fn set(&mut self, name: &str, value: String) {
        // From the `String`, the value's bytes are not copied again.
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::try_from(value),
        ) {
            self.insert(n, v);
        }
    }
}

impl Extractor for std::collections::HashMap<String, String> {
    fn get_all(&self, name: &str) -> Vec<&str> {
        self.iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

impl Injector for std::collections::HashMap<String, String> {
    fn set(&mut self, name: &str, value: String) {
        self.insert(name.to_owned(), value);
    }
}

/// What arrived with a request: its parent context (if the `traceparent` was valid) and
/// its baggage (kept even when the `traceparent` was not).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extracted {
    /// The remote parent, if any.
    pub parent: Option<SpanContext>,
    /// The baggage.
    pub baggage: Baggage,
}

/// Extracts the W3C context from a carrier. Exactly one valid `traceparent` header makes
/// a parent; two or more are invalid.
pub fn extract(carrier: &impl Extractor) -> Extracted {
    let tp = carrier.get_all(TRACEPARENT);
    let parent = match tp.as_slice() {
        [one] => parse_traceparent(one).map(|(trace_id, span_id, flags)| SpanContext {
            trace_id,
            span_id,
            flags,
            trace_state: TraceState::parse(carrier.get_all(TRACESTATE)),
            remote: true,
        }),
        _ => None,
    };
    Extracted {
        parent,
        baggage: Baggage::parse(carrier.get_all(BAGGAGE)),
    }
}

/// Writes a context (and baggage, when not empty) into a carrier.
pub fn inject_context(ctx: &SpanContext, baggage: Option<&Baggage>, carrier: &mut impl Injector) {
    inject_context_with_member(ctx, baggage, None, carrier);
}

/// [`inject_context`] with one more baggage member, in place of any of its key, whose
/// value is already baggage-octets and needs no percent-encoding (a Pivot Tracing bag's
/// base64url): written last, straight into the header, not copied into a [`Baggage`]
/// and scanned again on every request.
pub(crate) fn inject_context_with_member(
    ctx: &SpanContext,
    baggage: Option<&Baggage>,
    member: Option<(&str, &str)>,
    carrier: &mut impl Injector,
) {
    carrier.set(TRACEPARENT, ctx.traceparent());
    if !ctx.trace_state.is_empty() {
        carrier.set(TRACESTATE, ctx.trace_state.header());
    }
    let baggage = baggage.filter(|b| !b.is_empty());
    let Some((key, value)) = member else {
        if let Some(b) = baggage {
            carrier.set(BAGGAGE, b.header());
        }
        return;
    };
    debug_assert!(value.bytes().all(|c| PLAIN[usize::from(c)]), "{value}");
    let mut header = String::new();
    let extra = key.len() + value.len() + 2;
    match baggage {
        Some(b) => b.write_header(Some(key), extra, &mut header),
        None => header.reserve(extra),
    }
    if !header.is_empty() {
        header.push(',');
    }
    header.push_str(key);
    header.push('=');
    header.push_str(value);
    carrier.set(BAGGAGE, header);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TP: &str = "00-12345678901234567890123456789012-1234567890123456-01";

    #[test]
    fn accepts_valid_and_ows_wrapped_traceparents() {
        let (t, s, f) = parse_traceparent(TP).unwrap();
        assert_eq!(t.to_string(), "12345678901234567890123456789012");
        assert_eq!(s.to_string(), "1234567890123456");
        assert_eq!(f, 1);
        for v in [
            format!(" {TP}"),
            format!("\t{TP}"),
            format!("{TP} "),
            format!("\t {TP} \t"),
        ] {
            assert!(parse_traceparent(&v).is_some(), "{v:?}");
        }
    }

    #[test]
    fn future_versions_allow_trailing_data_after_a_dash() {
        let cc = "cc-12345678901234567890123456789012-1234567890123456-01";
        assert!(parse_traceparent(cc).is_some());
        assert!(parse_traceparent(&format!("{cc}-what-the-future-will-be-like")).is_some());
        assert!(parse_traceparent(&format!("{cc}.what-the-future-will-be-like")).is_none());
        // only the sampled bit of an unknown version's flags is trusted
        let (_, _, f) =
            parse_traceparent("cc-12345678901234567890123456789012-1234567890123456-ff").unwrap();
        assert_eq!(f, 1);
    }

    #[test]
    fn rejects_every_invalid_traceparent_of_the_w3c_suite() {
        for bad in [
            "00-12345678901234567890123456789012-1234567890123456-01.",
            "00-12345678901234567890123456789012-1234567890123456-01-what-the-future-will-be-like",
            "ff-12345678901234567890123456789012-1234567890123456-01",
            ".0-12345678901234567890123456789012-1234567890123456-01",
            "0.-12345678901234567890123456789012-1234567890123456-01",
            "000-12345678901234567890123456789012-1234567890123456-01",
            "0000-12345678901234567890123456789012-1234567890123456-01",
            "0-12345678901234567890123456789012-1234567890123456-01",
            "00-00000000000000000000000000000000-1234567890123456-01",
            "00-.2345678901234567890123456789012-1234567890123456-01",
            "00-1234567890123456789012345678901.-1234567890123456-01",
            "00-123456789012345678901234567890123-1234567890123456-01",
            "00-1234567890123456789012345678901-1234567890123456-01",
            "00-12345678901234567890123456789012-0000000000000000-01",
            "00-12345678901234567890123456789012-.234567890123456-01",
            "00-12345678901234567890123456789012-123456789012345.-01",
            "00-12345678901234567890123456789012-12345678901234567-01",
            "00-12345678901234567890123456789012-123456789012345-01",
            "00-12345678901234567890123456789012-1234567890123456-.0",
            "00-12345678901234567890123456789012-1234567890123456-0.",
            "00-12345678901234567890123456789012-1234567890123456-001",
            "00-12345678901234567890123456789012-1234567890123456-1",
            "00-1234567890ABCDEF1234567890123456-1234567890123456-01",
            "00-12345678901234567890123456789012-1234567890ABCDEF-01",
            "",
            "00",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn duplicated_traceparent_headers_make_no_parent() {
        let mut h = http::HeaderMap::new();
        h.append(TRACEPARENT, TP.parse().unwrap());
        h.append(TRACEPARENT, TP.replace("9012-", "9011-").parse().unwrap());
        assert!(extract(&h).parent.is_none());
    }

    fn ts(values: &[&str]) -> TraceState {
        TraceState::parse(values.iter().copied())
    }

    #[test]
    fn tracestate_combines_headers_in_order_and_handles_ows() {
        let t = ts(&["foo=1,bar=2", "rojo=1,congo=2", "baz=3"]);
        assert_eq!(t.header(), "foo=1,bar=2,rojo=1,congo=2,baz=3");
        let t = ts(&["foo=1 \t , \t bar=2, \t baz=3"]);
        assert_eq!(t.header(), "foo=1,bar=2,baz=3");
        assert_eq!(ts(&["", "foo=1"]).get("foo"), Some("1"));
        assert_eq!(ts(&["foo=1", ""]).get("foo"), Some("1"));
        assert!(ts(&[""]).is_empty());
    }

    #[test]
    fn tracestate_accepts_every_allowed_character() {
        let key = "abcdefghijklmnopqrstuvwxyz0123456789_-*/";
        let value: String = (0x20u8..=0x7e)
            .filter(|c| *c != b',' && *c != b'=')
            .map(|c| c as char)
            .collect();
        assert_eq!(
            ts(&[&format!("{key}={value}")]).get(key),
            Some(value.as_str())
        );
        let vendor = format!("{key}@a-z0-9_-*/");
        assert_eq!(
            ts(&[&format!("{vendor}={value}")]).get(&vendor),
            Some(value.as_str())
        );
    }

    #[test]
    fn invalid_tracestate_is_discarded_whole() {
        for bad in [
            vec!["foo=1,foo=1"],
            vec!["foo=1,foo=2"],
            vec!["foo=1", "foo=2"],
            vec!["foo =1"],
            vec!["FOO=1"],
            vec!["foo.bar=1"],
            vec!["@foo=1,bar=2"],
            vec!["_foo=1,bar=2"],
            vec!["foo=bar=baz"],
            vec!["foo=,bar=3"],
        ] {
            assert!(ts(&bad).is_empty(), "{bad:?}");
        }
        let z256 = format!("{}=1", "z".repeat(256));
        let z257 = format!("{}=1", "z".repeat(257));
        assert_eq!(ts(&["foo=1", &z256]).get("foo"), Some("1"));
        assert!(ts(&["foo=1", &z257]).is_empty());
        let at256 = format!("{}@{}=1", "t".repeat(241), "v".repeat(14));
        assert_eq!(ts(&["foo=1", &at256]).get("foo"), Some("1"));
        let at257 = format!("{}@{}=1", "t".repeat(242), "v".repeat(14));
        assert!(ts(&["foo=1", &at257]).is_empty());
    }

    /// Trace Context Level 2 (the current Candidate Recommendation) has one key rule:
    /// `(lcalpha / DIGIT) 0*255(keychar)` with `@` among the keychars.
    #[test]
    fn tracestate_keys_follow_level_2() {
        for key in [
            "1foo",
            "foo@",
            "foo@@bar",
            "foo@bar@baz",
            "0@1",
            "a@9x",
            &format!("{}@v", "t".repeat(242)),
            &format!("t@{}", "v".repeat(15)),
            &format!("{}@{}", "a".repeat(200), "b".repeat(55)),
        ] {
            let t = ts(&[&format!("{key}=1,bar=2")]);
            assert_eq!(t.get(key), Some("1"), "{key}");
            assert_eq!(t.get("bar"), Some("2"), "{key}");
        }
    }

    #[test]
    fn tracestate_allows_32_members_and_discards_33() {
        let m32: Vec<String> = (1..=32).map(|i| format!("bar{i:02}={i:02}")).collect();
        let t = ts(&[&m32.join(",")]);
        assert_eq!(t.members().len(), 32);
        let m33 = format!("{},bar33=33", m32.join(","));
        assert!(ts(&[&m33]).is_empty());
    }

    #[test]
    fn oversized_tracestate_is_cut_to_512_bytes_when_written() {
        let members: Vec<String> = (0..20)
            .map(|i| format!("k{i:02}={}", "v".repeat(40)))
            .collect();
        let t = ts(&[&members.join(",")]);
        let h = t.header();
        assert!(h.len() <= 512, "{}", h.len());
        assert!(h.starts_with("k00="));
    }

    #[test]
    fn baggage_round_trips_with_percent_encoding_and_skips_bad_members() {
        let b = Baggage::parse([
            "userId=alice, serverNode=DF%2028 ; ttl=3, bad member, =x,isProduction=false",
        ]);
        assert_eq!(b.get("userId"), Some("alice"));
        assert_eq!(b.get("serverNode"), Some("DF 28"));
        assert_eq!(b.get("isProduction"), Some("false"));
        assert_eq!(b.iter().count(), 3);
        let again = Baggage::parse([b.header().as_str()]);
        assert_eq!(again, b);
    }

    /// A sampled local context.
    fn sampled(trace_state: TraceState) -> SpanContext {
        SpanContext {
            trace_id: TraceId::new(0xabc).unwrap(),
            span_id: SpanId::new(0xdef).unwrap(),
            flags: 1,
            trace_state,
            remote: false,
        }
    }

    #[test]
    fn inject_then_extract_gives_back_the_context() {
        let ctx = sampled(ts(&["congo=t61rcWkgMzE"]));
        let mut b = Baggage::new();
        b.set("tenant", "a b,c");
        let mut h = http::HeaderMap::new();
        inject_context(&ctx, Some(&b), &mut h);
        let e = extract(&h);
        let p = e.parent.unwrap();
        assert_eq!(
            (p.trace_id, p.span_id, p.flags),
            (ctx.trace_id, ctx.span_id, 1)
        );
        assert!(p.remote);
        assert_eq!(p.trace_state, ctx.trace_state);
        assert_eq!(e.baggage.get("tenant"), Some("a b,c"));
    }

    #[test]
    fn a_member_written_straight_in_replaces_one_of_its_key() {
        let ctx = sampled(TraceState::default());
        let header = |b: Option<&Baggage>| {
            let mut h = http::HeaderMap::new();
            inject_context_with_member(&ctx, b, Some(("cw-pt", "AQID_-x")), &mut h);
            h.get(BAGGAGE).map(|v| v.to_str().unwrap().to_owned())
        };
        assert_eq!(header(None).as_deref(), Some("cw-pt=AQID_-x"));
        let mut b = Baggage::new();
        b.set("tenant", "a b");
        b.set("cw-pt", "old");
        b.set("zone", "z");
        assert_eq!(
            header(Some(&b)).as_deref(),
            Some("tenant=a%20b,zone=z,cw-pt=AQID_-x")
        );
        let back = Baggage::parse([header(Some(&b)).unwrap().as_str()]);
        assert_eq!(back.get("cw-pt"), Some("AQID_-x"));
        assert_eq!(back.get("tenant"), Some("a b"));
    }

    proptest! {
        #[test]
        fn the_fast_plain_check_agrees_with_the_table(text in "[!-~ \t\"\\\\%,;é]{0,12}") {
            let by_table = text.bytes().all(|c| PLAIN[usize::from(c)]);
            prop_assert_eq!(all_plain(&text), by_table);
        }

        #[test]
        fn splitting_on_a_byte_is_str_split(text in "[a-c,;=é ]{0,40}", sep in "[,;=]") {
            let sep = sep.as_bytes()[0];
            let ours: Vec<&str> = split_byte(&text, sep).collect();
            let std: Vec<&str> = text.split(char::from(sep)).collect();
            prop_assert_eq!(ours, std);
            prop_assert_eq!(split_once_byte(&text, sep), text.split_once(char::from(sep)));
        }

        #[test]
        fn traceparents_round_trip(t in 1u128.., s in 1u64.., f in any::<u8>()) {
            let ctx = SpanContext {
                trace_id: TraceId::new(t).unwrap(),
                span_id: SpanId::new(s).unwrap(),
                flags: f,
                trace_state: TraceState::default(),
                remote: false,
            };
            prop_assert_eq!(parse_traceparent(&ctx.traceparent()), Some((ctx.trace_id, ctx.span_id, f)));
        }

        #[test]
        fn header_parsers_never_panic(s in "\\PC{0,80}") {
            let _ = parse_traceparent(&s);
            let _ = TraceState::parse([s.as_str()]);
            let _ = Baggage::parse([s.as_str()]);
        }

        #[test]
        fn any_baggage_value_round_trips_through_the_header(v in "\\PC{0,40}|[ -~]{0,40}|[a-zA-Z0-9_-]{0,300}") {
            let mut b = Baggage::new();
            b.set("k", &v);
            let header = b.header();
            prop_assert!(header.bytes().all(|c| (0x21..=0x7e).contains(&c)), "{}", header);
            let again = Baggage::parse([header.as_str()]);
            prop_assert_eq!(again.get("k"), Some(v.as_str()));
        }

        #[test]
        fn parsed_tracestate_writes_back_to_itself(members in proptest::collection::vec(("[a-z][a-z0-9_]{0,8}", "[!-+\\--<>-~]{1,10}"), 1..10)) {
            let mut seen = std::collections::HashSet::new();
            let members: Vec<_> = members.into_iter().filter(|(k, _)| seen.insert(k.clone())).collect();
            let header = members.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
            let t = TraceState::parse([header.as_str()]);
            prop_assert_eq!(t.header(), header);
        }
    }
}

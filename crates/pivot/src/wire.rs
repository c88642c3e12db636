//! Bags on the wire: a compact binary form, carried as base64url (no padding) in one
//! member of the W3C `baggage` header on requests and in a header of its own on
//! responses, so services in other languages forward it untouched.
//!
//! ```text
//! baggage := version:u8 (=1) bag* [overflow:u8 (=0xFF)]
//! bag     := query:uvarint bag:uvarint kind:u8 body
//!   kind 0, grouped:     segments:uvarint { id:u64le version:uvarint tuples:uvarint { count:uvarint values } }
//!   kind 1, First(n):    n:uvarint tuples:uvarint { ts:uvarint origin:u64le values }
//!   kind 2, MostRecent:  as kind 1
//! values  := count:uvarint value*
//! value   := 0 null | 1 false | 2 true | 3 int:zigzag-uvarint | 4 f64le | 5 len:uvarint utf8
//! ```
//! The W3C member is `cw-pt`. Encoding writes every bag into one buffer, so that cutting
//! to the limit is a truncation, and keeps the baggage under a byte limit (`MAX_BYTES`,
//! 2048 by default, under OpenTelemetry's 4096 per member once in base64) by dropping
//! whole bags, the highest query ids first, and marking the overflow. Decoding refuses
//! text over 8192 characters, checks every count against the bytes left before it
//! allocates, reports the field and byte offset of the first fault, and re-sorts and cuts a
//! First/MostRecent bag from another writer; a bad bag is never half-applied.

use std::sync::Arc;

use base64::Engine;
use causeway_model::codec::native::put_varint;

use smallvec::SmallVec;

use crate::bag::{
    Bag, BagKey, Bags, EncodedText, Grouped, HeldSegment, InlineValues, Segment, Stamped, Temporal,
};
use crate::small_map::SmallMap;
pub use crate::tuple_bytes::WireError;
use crate::tuple_bytes::{put_values, values_into, Check, Reader};

/// The version this code writes and reads.
pub const VERSION: u8 = 1;
/// The default limit on encoded bytes (before base64): under OpenTelemetry's 4096 bytes
/// per baggage member once base64 has grown it by a third.
pub const MAX_BYTES: usize = 2048;
/// The longest base64 text decoded; longer is refused unread.
pub const MAX_TEXT: usize = 8192;
/// The key of the W3C `baggage` member that carries the bags.
pub const BAGGAGE_MEMBER: &str = "cw-pt";

const OVERFLOW: u8 = 0xFF;

/// Encodes `baggage`, dropping whole bags (the highest query ids first) until the result
/// is at most `max_bytes`; dropped bags set the overflow mark.
pub fn encode(baggage: &Bags, max_bytes: usize) -> Vec<u8> {
    encode_cut(baggage, max_bytes).0
}

/// [`encode`], and whether bags were dropped to fit.
fn encode_cut(baggage: &Bags, max_bytes: usize) -> (Vec<u8>, bool) {
    // One buffer for every bag, sized for a request's usual few small bags: a cut drops
    // bags from the end, so it is a truncation.
    let mut out = Vec::with_capacity(256);
    out.push(VERSION);
    let mut ends: SmallVec<[usize; 8]> = SmallVec::new();
    for (k, b) in &baggage.bags {
        put_bag(&mut out, *k, b);
        ends.push(out.len());
    }
    let upto = |kept: usize| if kept == 0 { 1 } else { ends[kept - 1] };
    let mut kept = ends.len();
    let mut overflowed = baggage.overflowed;
    while kept > 0 && upto(kept) + usize::from(overflowed) > max_bytes {
        kept -= 1;
        overflowed = true;
    }
    out.truncate(upto(kept));
    if overflowed {
        out.push(OVERFLOW);
    }
    (out, kept < ends.len())
}

/// [`encode`] as base64url text, or `None` when the baggage is empty (no header needed).
pub fn encode_text(baggage: &Bags, max_bytes: usize) -> Option<String> {
    encode_text_cut(baggage, max_bytes).map(|(text, _)| text)
}

/// [`encode_text`], and whether bags were dropped to fit (for the overflow counter).
pub fn encode_text_cut(baggage: &Bags, max_bytes: usize) -> Option<(String, bool)> {
    if baggage.is_empty() && !baggage.overflowed {
        return None;
    }
    let (bytes, cut) = encode_cut(baggage, max_bytes);
    Some((
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes),
        cut,
    ))
}

/// [`encode_text_cut`] shared: the text is kept with the baggage until its bags change,
/// so sending the same bags again (a request's second call) encodes nothing.
pub fn encode_text_shared(baggage: &Bags, max_bytes: usize) -> Option<(Arc<str>, bool)> {
    let fresh = || EncodedText {
        max_bytes,
        overflowed: baggage.overflowed,
        text: encode_text_cut(baggage, max_bytes).map(|(t, cut)| (Arc::from(t), cut)),
    };
    let kept = baggage.text.get_or_init(fresh);
    if kept.max_bytes == max_bytes && kept.overflowed == baggage.overflowed {
        kept.text.clone()
    } else {
        fresh().text
    }
}

/// Decodes base64url text from a header.
pub fn decode_text(text: &str) -> Result<Bags, WireError> {
    if text.len() > MAX_TEXT {
        return Err(WireError {
            field: "text",
            offset: 0,
            reason: format!("{} characters, more than {MAX_TEXT}", text.len()),
        });
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim())
        .map_err(|e| WireError {
            field: "text",
            offset: 0,
            reason: format!("not base64url: {e}"),
        })?;
    decode(&bytes)
}

/// Decodes the binary form.
pub fn decode(bytes: &[u8]) -> Result<Bags, WireError> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let version = r.u8("version")?;
    if version != VERSION {
        return Err(r.err_at(
            "version",
            0,
            format!("version {version}, this reader knows {VERSION}"),
        ));
    }
    let mut baggage = Bags::default();
    while r.pos < bytes.len() {
        if bytes[r.pos] == OVERFLOW && r.pos + 1 == bytes.len() {
            baggage.overflowed = true;
            break;
        }
        let at = r.pos;
        let query = u32::try_from(r.varint("bag.query")?)
            .map_err(|_| r.err_at("bag.query", at, "does not fit 32 bits".into()))?;
        let at = r.pos;
        let bag = u16::try_from(r.varint("bag.index")?)
            .map_err(|_| r.err_at("bag.index", at, "does not fit 16 bits".into()))?;
        let key = BagKey { query, bag };
        let at = r.pos;
        let body = match r.u8("bag.kind")? {
            0 => Bag::Grouped(grouped(&mut r)?),
            k @ (1 | 2) => Bag::Temporal(temporal(&mut r, k == 1)?),
            k => return Err(r.err_at("bag.kind", at, format!("unknown kind {k}"))),
        };
        if baggage.bags.insert(key, body).is_some() {
            return Err(r.err_at("bag.query", at, "a bag twice".into()));
        }
    }
    Ok(baggage)
}

fn grouped(r: &mut Reader<'_>) -> Result<Grouped, WireError> {
    let n = r.count("grouped.segments", 9)?;
    let mut segments = SmallMap::default();
    for _ in 0..n {
        let at = r.pos;
        let id = u64::from_le_bytes(r.array("segment.id")?);
        let version = r.varint("segment.version")?;
        let tuples = r.count("segment.tuples", 2)?;
        let mut seg = Segment::new(version, tuples);
        for _ in 0..tuples {
            let count = r.varint("tuple.count")?;
            seg.push_decoded(count, |out| {
                let start = r.pos;
                // Checked now, decoded only when advice reads them.
                values_into(r, &mut Check)?;
                out.extend_from_slice(&r.buf[start..r.pos]);
                Ok(())
            })?;
        }
        if segments
            .insert(
                id,
                HeldSegment {
                    arrived: 0,
                    segment: Arc::new(seg),
                },
            )
            .is_some()
        {
            return Err(r.err_at("segment.id", at, "a segment twice".into()));
        }
    }
    Ok(Grouped {
        open: None,
        segments,
    })
}

fn temporal(r: &mut Reader<'_>, first: bool) -> Result<Temporal, WireError> {
    let at = r.pos;
    let n = u32::try_from(r.varint("temporal.n")?)
        .map_err(|_| r.err_at("temporal.n", at, "does not fit 32 bits".into()))?;
    let count = r.count("temporal.tuples", 10)?;
    let mut t = Temporal {
        first,
        n,
        tuples: SmallVec::with_capacity(count),
    };
    for _ in 0..count {
        let ts = r.varint("tuple.ts")?;
        let origin = u64::from_le_bytes(r.array("tuple.origin")?);
        t.tuples.push(Stamped {
            ts,
            origin,
            values: {
                let mut v = InlineValues::new();
                values_into(r, &mut v)?;
                v
            },
            arrived: false,
        });
    }
    // Another writer's order and count are not trusted: sorted, deduplicated and cut
    // as a local pack would leave them.
    t.trim();
    Ok(t)
}

fn put_bag(out: &mut Vec<u8>, key: BagKey, bag: &Bag) {
    put_varint(out, key.query.into());
    put_varint(out, key.bag.into());
    match bag {
        Bag::Grouped(g) => {
            out.push(0);
            put_varint(out, g.segments.len() as u64);
            for (id, held) in &g.segments {
                let seg = &held.segment;
                out.extend_from_slice(&id.to_le_bytes());
                put_varint(out, seg.version);
                put_varint(out, seg.len() as u64);
                for (bytes, count) in seg.encoded() {
                    put_varint(out, count);
                    out.extend_from_slice(bytes);
                }
            }
        }
        Bag::Temporal(t) => {
            out.push(if t.first { 1 } else { 2 });
            put_varint(out, t.n.into());
            put_varint(out, t.tuples.len() as u64);
            for s in &t.tuples {
                put_varint(out, s.ts);
                out.extend_from_slice(&s.origin.to_le_bytes());
                put_values(out, s.values.iter());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> + Clone {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::Int),
            any::<f64>().prop_map(Value::Float),
            "\\PC{0,12}".prop_map(|s| Value::from(s.as_str())),
        ]
    }

    #[derive(Debug, Clone)]
    enum Pack {
        Grouped(u32, u16, Vec<Value>, u64),
        Temporal(u32, u16, bool, u32, u64, u64, Vec<Value>),
        Branch,
    }

    fn packs() -> impl Strategy<Value = Vec<Pack>> {
        let values = prop::collection::vec(value(), 0..4);
        prop::collection::vec(
            prop_oneof![
                (0u32..3, 0u16..2, values.clone(), 1u64..5)
                    .prop_map(|(q, b, v, w)| Pack::Grouped(q, b, v, w)),
                (
                    3u32..5,
                    0u16..2,
                    any::<bool>(),
                    1u32..4,
                    any::<u64>(),
                    any::<u64>(),
                    values
                )
                    .prop_map(|(q, b, f, n, ts, o, v)| Pack::Temporal(q, b, f, n, ts, o, v)),
                Just(Pack::Branch),
            ],
            0..30,
        )
    }

    fn apply(b: &mut Bags, p: &Pack, ids: &mut dyn FnMut() -> u64) {
        match p {
            Pack::Grouped(q, i, v, w) => b.pack_grouped(
                BagKey { query: *q, bag: *i },
                std::iter::once((v.iter(), *w)),
                ids,
            ),
            // One mode per key, as compiled queries do.
            Pack::Temporal(q, i, f, n, ts, o, v) => {
                b.pack_temporal(BagKey { query: *q, bag: *i }, *f, *n, *ts, *o, v.clone())
            }
            Pack::Branch => *b = b.branch(),
        }
    }

    fn build(packs: &[Pack]) -> Bags {
        let mut next = 0u64;
        let mut ids = || {
            next += 1;
            next
        };
        let mut b = Bags::default();
        for p in packs {
            apply(&mut b, p, &mut ids);
        }
        b.branch()
    }

    proptest! {
        /// The kept text is always what encoding the bags now gives, for the limit and
        /// overflow mark asked, and a second send of unchanged bags reuses it.
        #[test]
        fn the_kept_text_follows_every_change(packs in packs(), max in 8usize..200) {
            let mut b = Bags::default();
            let mut next = 0u64;
            let mut ids = || {
                next += 1;
                next
            };
            let fresh = |b: &Bags, max: usize| {
                encode_text_cut(b, max).map(|(t, cut)| (Arc::<str>::from(t), cut))
            };
            for p in &packs {
                apply(&mut b, p, &mut ids);
                if matches!(p, Pack::Branch) {
                    // A merge changes the bags too.
                    let mut other = b.branch();
                    let one = [Value::Int(1)];
                    other.pack_grouped(BagKey { query: 9, bag: 0 }, std::iter::once((one.iter(), 1)), &mut ids);
                    b.merge(&other);
                }
                let first = encode_text_shared(&b, max);
                prop_assert_eq!(&first, &fresh(&b, max));
                let again = encode_text_shared(&b, max);
                if let (Some((a, _)), Some((c, _))) = (&first, &again) {
                    prop_assert!(Arc::ptr_eq(a, c), "encoded again");
                }
                prop_assert_eq!(encode_text_shared(&b, usize::MAX), fresh(&b, usize::MAX));
                b.overflowed = !b.overflowed;
                prop_assert_eq!(encode_text_shared(&b, max), fresh(&b, max));
                b.overflowed = !b.overflowed;
            }
        }

        #[test]
        fn baggage_round_trips(packs in packs()) {
            let b = build(&packs);
            let text = encode_text(&b, usize::MAX);
            prop_assert_eq!(text.is_none(), b.is_empty());
            let back = decode(&encode(&b, usize::MAX)).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&back, &b);
            if let Some(t) = text {
                prop_assert_eq!(decode_text(&t).map_err(|e| TestCaseError::fail(e.to_string()))?, b);
            }
        }

        #[test]
        fn the_limit_drops_whole_bags_and_marks_it(packs in packs(), max in 2usize..200) {
            let b = build(&packs);
            let bytes = encode(&b, max);
            prop_assert!(bytes.len() <= max || b.bags.is_empty());
            let back = decode(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
            // What survives is a prefix of the bags, intact.
            for (k, bag) in &back.bags {
                prop_assert_eq!(Some(bag), b.bags.get(k));
            }
            prop_assert_eq!(back.overflowed, back.bags.len() < b.bags.len());
        }

        #[test]
        fn any_bytes_decode_or_fail_without_panicking(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(b) = decode(&bytes) {
                // Whatever decodes encodes to bytes that decode to the same baggage.
                prop_assert_eq!(decode(&encode(&b, usize::MAX)).ok(), Some(b));
            }
        }

        #[test]
        fn a_damaged_byte_is_an_error_or_other_baggage_never_a_panic(packs in packs(), at in any::<usize>(), byte in any::<u8>()) {
            let mut bytes = encode(&build(&packs), usize::MAX);
            let i = at % bytes.len();
            bytes[i] = byte;
            let _ = decode(&bytes);
            bytes.truncate(i);
            let _ = decode(&bytes);
        }
    }

    #[test]
    fn faults_name_their_field_and_offset() {
        let e = decode(&[]).unwrap_err();
        assert_eq!((e.field, e.offset), ("version", 0));
        let e = decode(&[2]).unwrap_err();
        assert!(e.reason.contains("version 2"), "{e}");
        // query 1, bag 0, kind 7.
        let e = decode(&[1, 1, 0, 7]).unwrap_err();
        assert_eq!((e.field, e.offset), ("bag.kind", 3));
        // A grouped bag claiming a million segments in three bytes.
        let e = decode(&[1, 1, 0, 0, 0xC0, 0x84, 0x3D]).unwrap_err();
        assert_eq!(e.field, "grouped.segments");
        // A grouped bag with two empty segments of one id.
        let segment = [7, 0, 0, 0, 0, 0, 0, 0, 1, 0];
        let bytes = [&[1, 1, 0, 0, 2][..], &segment, &segment].concat();
        let e = decode(&bytes).unwrap_err();
        assert_eq!((e.field, e.offset), ("segment.id", 15), "{e}");
        // A First(1) bag whose one tuple holds a string that is not UTF-8.
        let mut b = vec![
            1, 1, 0, 1, 1, 1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 1, 5, 2, 0xC3, 0x28,
        ];
        let e = decode(&b).unwrap_err();
        assert_eq!((e.field, e.offset), ("value.str", 18), "{e}");
        b.truncate(19);
        let e = decode(&b).unwrap_err();
        assert_eq!((e.field, e.offset), ("value.str", 17), "{e}");
        assert!(
            e.reason.contains("count 2 cannot fit the 1 bytes left"),
            "{e}"
        );
        // One First(1) tuple cannot fit in the four bytes after its count.
        b.truncate(9);
        let e = decode(&b).unwrap_err();
        assert_eq!((e.field, e.offset), ("temporal.tuples", 5), "{e}");
        let e = decode_text(&"A".repeat(MAX_TEXT + 1)).unwrap_err();
        assert_eq!(e.field, "text");
        let e = decode_text("not base64!").unwrap_err();
        assert!(e.reason.contains("base64"), "{e}");
    }

    #[test]
    fn a_temporal_bag_from_another_writer_is_cut_to_its_n() {
        // First(1) with two tuples, the later one first.
        let bytes = [
            1, 4, 0, 1, 1, 2, 9, 2, 0, 0, 0, 0, 0, 0, 0, 0, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        let b = decode(&bytes).unwrap();
        let tuples = b.unpack(BagKey { query: 4, bag: 0 });
        assert_eq!(tuples.len(), 1);
        assert!(tuples[0].0.is_empty());
        let Some(Bag::Temporal(t)) = b.bags.values().next() else {
            panic!()
        };
        assert_eq!(t.tuples[0].ts, 5);
    }
}

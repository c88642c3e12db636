//! Trace and span identifiers in their W3C forms.
//!
//! `TraceId` (128 bits) and `SpanId` (64 bits) wrap non-zero integers, so the all-zero id W3C
//! reserves as invalid cannot be represented. Text is lower-case hex out and either case in;
//! a 16-digit trace id (Zipkin's, old Jaeger's) is the id with its high 64 bits zero. Bytes
//! are big-endian, the OTLP form. A parse error (`IdError`) says which fault it was: the
//! length, a non-hex character and its position, an all-zero id, or a wrong byte count.

use std::fmt;
use std::num::{NonZeroU128, NonZeroU64};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a trace or span id could not be parsed or built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The text had the wrong number of hex digits.
    #[error("invalid {kind} {value:?}: expected {expected} hex digits, found {found} characters")]
    Length {
        /// "trace id" or "span id".
        kind: &'static str,
        /// The text that was rejected (cut to 64 characters).
        value: String,
        /// How many digits are accepted, e.g. "32 (or 16)".
        expected: &'static str,
        /// How many characters were given.
        found: usize,
    },
    /// The text had a character that is not a hex digit.
    #[error("invalid {kind} {value:?}: {found:?} at position {position} is not a hex digit")]
    NotHex {
        /// "trace id" or "span id".
        kind: &'static str,
        /// The text that was rejected (cut to 64 characters).
        value: String,
        /// The offending character.
        found: char,
        /// Its position, counting from 0.
        position: usize,
    },
    /// All digits were zero, which W3C Trace Context reserves as invalid.
    #[error("invalid {kind}: all zeros is not a valid id")]
    Zero {
        /// "trace id" or "span id".
        kind: &'static str,
    },
    /// A binary id had the wrong number of bytes.
    #[error("invalid {kind}: expected {expected} bytes, found {found}")]
    Bytes {
        /// "trace id" or "span id".
        kind: &'static str,
        /// The accepted byte length.
        expected: usize,
        /// The given byte length.
        found: usize,
    },
}

fn cut(s: &str) -> String {
    s.chars().take(64).collect()
}

fn parse_hex(kind: &'static str, s: &str) -> Result<u128, IdError> {
    let mut v: u128 = 0;
    for (position, c) in s.chars().enumerate() {
        let d = c.to_digit(16).ok_or_else(|| IdError::NotHex {
            kind,
            value: cut(s),
            found: c,
            position,
        })?;
        v = (v << 4) | d as u128;
    }
    Ok(v)
}

/// A 128-bit trace id; never zero. Printed as 32 lower-case hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceId(NonZeroU128);

impl TraceId {
    /// Builds an id from its integer value; `None` for zero.
    pub const fn new(v: u128) -> Option<Self> {
        match NonZeroU128::new(v) {
            Some(n) => Some(TraceId(n)),
            None => None,
        }
    }
    /// The integer value.
    pub const fn get(self) -> u128 {
        self.0.get()
    }
    /// The 16 big-endian bytes (the OTLP form).
    pub fn to_bytes(self) -> [u8; 16] {
        self.0.get().to_be_bytes()
    }
    /// Reads the 16 big-endian bytes of the OTLP form.
    pub fn from_bytes(b: &[u8]) -> Result<Self, IdError> {
        let arr: [u8; 16] = b.try_into().map_err(|_| IdError::Bytes {
            kind: "trace id",
            expected: 16,
            found: b.len(),
        })?;
        TraceId::new(u128::from_be_bytes(arr)).ok_or(IdError::Zero { kind: "trace id" })
    }
    /// Parses 32 hex digits, either case; 16 digits (Zipkin's and old Jaeger's
    /// 64-bit ids) mean the id with zero high bits.
    pub fn parse(s: &str) -> Result<Self, IdError> {
        if s.len() != 32 && s.len() != 16 {
            return Err(IdError::Length {
                kind: "trace id",
                value: cut(s),
                expected: "32 (or 16)",
                found: s.chars().count(),
            });
        }
        TraceId::new(parse_hex("trace id", s)?).ok_or(IdError::Zero { kind: "trace id" })
    }
    /// True when the high 64 bits are zero, so the id fits Zipkin's short form.
    pub fn is_short(self) -> bool {
        self.get() >> 64 == 0
    }
}

/// A 64-bit span id; never zero. Printed as 16 lower-case hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpanId(NonZeroU64);

impl SpanId {
    /// Builds an id from its integer value; `None` for zero.
    pub const fn new(v: u64) -> Option<Self> {
        match NonZeroU64::new(v) {
            Some(n) => Some(SpanId(n)),
            None => None,
        }
    }
    /// The integer value.
    pub const fn get(self) -> u64 {
        self.0.get()
    }
    /// The 8 big-endian bytes (the OTLP form).
    pub fn to_bytes(self) -> [u8; 8] {
        self.0.get().to_be_bytes()
    }
    /// Reads the 8 big-endian bytes of the OTLP form.
    pub fn from_bytes(b: &[u8]) -> Result<Self, IdError> {
        let arr: [u8; 8] = b.try_into().map_err(|_| IdError::Bytes {
            kind: "span id",
            expected: 8,
            found: b.len(),
        })?;
        SpanId::new(u64::from_be_bytes(arr)).ok_or(IdError::Zero { kind: "span id" })
    }
    /// Parses 16 hex digits, either case.
    pub fn parse(s: &str) -> Result<Self, IdError> {
        if s.len() != 16 {
            return Err(IdError::Length {
                kind: "span id",
                value: cut(s),
                expected: "16",
                found: s.chars().count(),
            });
        }
        SpanId::new(parse_hex("span id", s)? as u64).ok_or(IdError::Zero { kind: "span id" })
    }
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.get())
    }
}
impl fmt::Debug for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceId({self})")
    }
}
impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.get())
    }
}
impl fmt::Debug for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SpanId({self})")
    }
}
impl FromStr for TraceId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        TraceId::parse(s)
    }
}
impl FromStr for SpanId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        SpanId::parse(s)
    }
}

macro_rules! hex_serde {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                <$t>::parse(&s).map_err(serde::de::Error::custom)
            }
        }
    };
}
hex_serde!(TraceId);
hex_serde!(SpanId);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prints_lower_case_and_parses_either_case() {
        let t = TraceId::parse("5B8EFFF798038103D269B633813FC60C").unwrap();
        assert_eq!(t.to_string(), "5b8efff798038103d269b633813fc60c");
        let s = SpanId::parse("eee19b7ec3c1b174").unwrap();
        assert_eq!(s.to_string(), "eee19b7ec3c1b174");
    }

    #[test]
    fn short_trace_ids_mean_zero_high_bits() {
        let t = TraceId::parse("a03ee8fff1dcd9b9").unwrap();
        assert_eq!(t.get(), 0xa03ee8fff1dcd9b9);
        assert!(t.is_short());
        assert_eq!(t.to_string(), "0000000000000000a03ee8fff1dcd9b9");
    }

    #[test]
    fn rejects_zero_and_malformed_ids_with_reasons() {
        assert_eq!(
            TraceId::parse(&"0".repeat(32)),
            Err(IdError::Zero { kind: "trace id" })
        );
        assert_eq!(
            SpanId::parse(&"0".repeat(16)),
            Err(IdError::Zero { kind: "span id" })
        );
        let e = SpanId::parse("00f067aa0ba902bx").unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid span id \"00f067aa0ba902bx\": 'x' at position 15 is not a hex digit"
        );
        let e = TraceId::parse("abc").unwrap_err();
        assert!(
            e.to_string().contains("expected 32 (or 16) hex digits"),
            "{e}"
        );
        assert!(SpanId::from_bytes(&[0; 8]).is_err());
        assert!(TraceId::from_bytes(&[1; 15]).is_err());
        assert!(TraceId::parse("+bcdef0123456789").is_err());
    }

    proptest! {
        #[test]
        fn trace_ids_round_trip_through_text_and_bytes(v in 1u128..) {
            let t = TraceId::new(v).unwrap();
            prop_assert_eq!(TraceId::parse(&t.to_string()).unwrap(), t);
            prop_assert_eq!(TraceId::parse(&t.to_string().to_uppercase()).unwrap(), t);
            prop_assert_eq!(TraceId::from_bytes(&t.to_bytes()).unwrap(), t);
        }

        #[test]
        fn span_ids_round_trip_through_text_and_bytes(v in 1u64..) {
            let s = SpanId::new(v).unwrap();
            prop_assert_eq!(SpanId::parse(&s.to_string()).unwrap(), s);
            prop_assert_eq!(SpanId::from_bytes(&s.to_bytes()).unwrap(), s);
        }

        #[test]
        fn parsing_arbitrary_text_never_panics(s in ".{0,40}") {
            let _ = TraceId::parse(&s);
            let _ = SpanId::parse(&s);
        }
    }
}

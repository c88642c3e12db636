//! A tuple's values as bytes (`count value*`, see `wire`): how a bag holds its tuples
//! in memory and how baggage carries them, one form for both; and the checked reader
//! every field of baggage is read with.

use causeway_model::codec::native::{put_varint, unzigzag, zigzag};
use smallvec::SmallVec;

use crate::value::Value;

/// Why bytes are not baggage: the field and the byte offset where reading stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid pivot baggage: {reason} in field {field} at byte {offset}")]
pub struct WireError {
    /// The field being read.
    pub field: &'static str,
    /// The byte offset.
    pub offset: usize,
    /// What was wrong.
    pub reason: String,
}

/// A value as read, borrowing a string from the bytes.
pub(crate) enum Raw<'a> {
    Value(Value),
    Str(&'a str),
}

/// Where read values go: kept as values, or only checked.
pub(crate) trait ValueSink {
    fn take(&mut self, raw: Raw<'_>);
}

impl<A: smallvec::Array<Item = Value>> ValueSink for SmallVec<A> {
    fn take(&mut self, raw: Raw<'_>) {
        self.push(match raw {
            Raw::Value(v) => v,
            Raw::Str(s) => Value::Str(smol_str::SmolStr::new(s)),
        });
    }
}

/// Values checked and not kept (a segment that arrived keeps its bytes).
pub(crate) struct Check;

impl ValueSink for Check {
    fn take(&mut self, _: Raw<'_>) {}
}

/// Reads a tuple's values, as [`put_values`] writes them, from bytes already checked.
pub(crate) struct ValuesReader<'a>(Reader<'a>);

impl<'a> ValuesReader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> ValuesReader<'a> {
        ValuesReader(Reader { buf: bytes, pos: 0 })
    }

    /// Appends the values to `out`.
    pub(crate) fn values_into(&mut self, out: &mut impl ValueSink) -> Result<(), WireError> {
        values_into(&mut self.0, out)
    }
}

/// Reads a tuple's values into `out`.
pub(crate) fn values_into(r: &mut Reader<'_>, out: &mut impl ValueSink) -> Result<(), WireError> {
    let n = r.count("tuple.values", 1)?;
    for _ in 0..n {
        let at = r.pos;
        out.take(match r.u8("value.tag")? {
            0 => Raw::Value(Value::Null),
            1 => Raw::Value(Value::Bool(false)),
            2 => Raw::Value(Value::Bool(true)),
            3 => Raw::Value(Value::Int(unzigzag(r.varint("value.int")?))),
            4 => Raw::Value(Value::Float(f64::from_le_bytes(r.array("value.float")?))),
            5 => {
                let len = r.count("value.str", 1)?;
                let at = r.pos;
                let b = r.take("value.str", len)?;
                Raw::Str(
                    std::str::from_utf8(b)
                        .map_err(|_| r.err_at("value.str", at, "invalid UTF-8".into()))?,
                )
            }
            t => return Err(r.err_at("value.tag", at, format!("unknown tag {t}"))),
        });
    }
    Ok(())
}

/// Reads baggage's fields, each error naming the field and its byte offset.
pub(crate) struct Reader<'a> {
    pub(crate) buf: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn err_at(&self, field: &'static str, offset: usize, reason: String) -> WireError {
        WireError {
            field,
            offset,
            reason,
        }
    }

    pub(crate) fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], WireError> {
        if self.buf.len() - self.pos < n {
            return Err(self.err_at(
                field,
                self.pos,
                format!("needs {n} bytes, {} left", self.buf.len() - self.pos),
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, WireError> {
        Ok(self.take(field, 1)?[0])
    }

    pub(crate) fn array<const N: usize>(
        &mut self,
        field: &'static str,
    ) -> Result<[u8; N], WireError> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(field, N)?);
        Ok(a)
    }

    /// A varint; most are one byte (counts, lengths, small values).
    #[inline]
    pub(crate) fn varint(&mut self, field: &'static str) -> Result<u64, WireError> {
        match self.buf.get(self.pos) {
            Some(&b) if b < 0x80 => {
                self.pos += 1;
                Ok(u64::from(b))
            }
            _ => self.varint_long(field),
        }
    }

    pub(crate) fn varint_long(&mut self, field: &'static str) -> Result<u64, WireError> {
        let start = self.pos;
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8(field)?;
            if shift == 63 && b > 1 {
                return Err(self.err_at(field, start, "varint overflows 64 bits".into()));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(self.err_at(field, start, "varint longer than 10 bytes".into()))
    }

    /// A count of elements each at least `min_len` bytes long: larger than what is left
    /// can hold is refused before anything is allocated for it.
    pub(crate) fn count(
        &mut self,
        field: &'static str,
        min_len: usize,
    ) -> Result<usize, WireError> {
        let at = self.pos;
        let n = self.varint(field)?;
        let left = (self.buf.len() - self.pos) as u64;
        if n > left / min_len as u64 {
            return Err(self.err_at(
                field,
                at,
                format!("count {n} cannot fit the {left} bytes left"),
            ));
        }
        Ok(n as usize)
    }
}

/// Writes a tuple's values (`count value*`). Equal values always write equal bytes, so a
/// segment finds a tuple packed before by its bytes.
pub(crate) fn put_values<'v>(out: &mut Vec<u8>, values: impl ExactSizeIterator<Item = &'v Value>) {
    put_varint(out, values.len() as u64);
    for v in values {
        match v {
            Value::Null => out.push(0),
            Value::Bool(false) => out.push(1),
            Value::Bool(true) => out.push(2),
            Value::Int(i) => {
                out.push(3);
                put_varint(out, zigzag(*i));
            }
            Value::Float(f) => {
                out.push(4);
                out.extend_from_slice(&f.to_le_bytes());
            }
            Value::Str(s) => {
                out.push(5);
                put_varint(out, s.len() as u64);
                out.extend_from_slice(s.as_bytes());
            }
        }
    }
}

//! ClickHouse's RowBinary format: rows of columns end to end, integers little-endian,
//! strings and arrays with a LEB128 length before them.

use std::io::{self, BufRead};

/// Longest string or array accepted from a server (a span's payload is at most 16 MiB).
const MAX_LEN: u64 = 64 << 20;

/// Rows being written.
#[derive(Default)]
pub struct RowWriter {
    /// The rows so far.
    pub bytes: Vec<u8>,
}

impl RowWriter {
    /// A `UInt8`.
    pub fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }
    /// A `UInt16` (a `Date` is one: days since 1970-01-01).
    pub fn u16(&mut self, v: u16) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    /// A `UInt32`.
    pub fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    /// A `UInt64`.
    pub fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    /// A `FixedString(N)` of these bytes.
    pub fn fixed(&mut self, v: &[u8]) {
        self.bytes.extend_from_slice(v);
    }
    /// A `String`.
    pub fn string(&mut self, v: &[u8]) {
        self.len(v.len());
        self.bytes.extend_from_slice(v);
    }
    /// The length before an array's elements.
    pub fn len(&mut self, mut n: usize) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.bytes.push(byte);
                return;
            }
            self.bytes.push(byte | 0x80);
        }
    }
}

/// Rows being read from an answer, in the order the select names the columns.
pub struct RowReader<R> {
    input: R,
    /// Bytes read so far, for error messages.
    offset: u64,
}

impl<R: BufRead> RowReader<R> {
    /// Reads rows from `input`.
    pub fn new(input: R) -> RowReader<R> {
        RowReader { input, offset: 0 }
    }

    /// True when the answer has no more rows.
    pub fn at_end(&mut self) -> io::Result<bool> {
        Ok(self.input.fill_buf()?.is_empty())
    }

    /// A `UInt8`.
    pub fn u8(&mut self, column: &'static str) -> io::Result<u8> {
        let mut b = [0u8; 1];
        self.exact(column, &mut b)?;
        Ok(b[0])
    }

    /// A `UInt64`.
    pub fn u64(&mut self, column: &'static str) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.exact(column, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// A `FixedString(16)`.
    pub fn fixed16(&mut self, column: &'static str) -> io::Result<[u8; 16]> {
        let mut b = [0u8; 16];
        self.exact(column, &mut b)?;
        Ok(b)
    }

    /// A `String`, its bytes replacing `into`'s.
    pub fn string_into(&mut self, column: &'static str, into: &mut Vec<u8>) -> io::Result<()> {
        let n = self.len(column)?;
        into.clear();
        into.resize(n, 0);
        self.exact(column, into)
    }

    /// A `String` that must be UTF-8.
    pub fn text(&mut self, column: &'static str) -> io::Result<String> {
        let mut bytes = Vec::new();
        self.string_into(column, &mut bytes)?;
        let at = self.offset;
        String::from_utf8(bytes).map_err(|_| bad(column, at, "not UTF-8".into()))
    }

    /// The length before a string or an array.
    pub fn len(&mut self, column: &'static str) -> io::Result<usize> {
        let mut n: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.u8(column)?;
            n |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                if n > MAX_LEN {
                    return Err(bad(column, self.offset, format!("length {n} is too long")));
                }
                return Ok(n as usize);
            }
        }
        Err(bad(column, self.offset, "length runs past 64 bits".into()))
    }

    fn exact(&mut self, column: &'static str, into: &mut [u8]) -> io::Result<()> {
        self.input.read_exact(into).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                bad(column, self.offset, "the answer ends inside the row".into())
            } else {
                e
            }
        })?;
        self.offset += into.len() as u64;
        Ok(())
    }
}

fn bad(column: &'static str, offset: u64, reason: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("column {column} at answer byte {offset}: {reason}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn written_rows_read_back(rows in proptest::collection::vec(
            (any::<u8>(), any::<u64>(), any::<[u8; 16]>(), proptest::collection::vec(any::<u8>(), 0..300)),
            0..20,
        )) {
            let mut w = RowWriter::default();
            for (a, b, c, d) in &rows {
                w.u8(*a);
                w.u64(*b);
                w.fixed(c);
                w.string(d);
            }
            let mut r = RowReader::new(&w.bytes[..]);
            let mut s = Vec::new();
            for (a, b, c, d) in &rows {
                prop_assert_eq!(r.u8("a").unwrap(), *a);
                prop_assert_eq!(r.u64("b").unwrap(), *b);
                prop_assert_eq!(&r.fixed16("c").unwrap(), c);
                r.string_into("d", &mut s).unwrap();
                prop_assert_eq!(&s, d);
            }
            prop_assert!(r.at_end().unwrap());
        }

        #[test]
        fn cut_or_garbled_answers_are_errors_not_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut r = RowReader::new(&bytes[..]);
            let mut s = Vec::new();
            while !r.at_end().unwrap() {
                if r.u64("x").is_err() || r.string_into("y", &mut s).is_err() {
                    break;
                }
            }
        }
    }

    #[test]
    fn an_answer_cut_inside_a_row_names_the_column() {
        let mut w = RowWriter::default();
        w.string(b"hello");
        let mut r = RowReader::new(&w.bytes[..3]);
        let e = r.text("service").unwrap_err();
        assert!(e.to_string().contains("column service"), "{e}");
    }

    #[test]
    fn lengths_are_leb128() {
        let mut w = RowWriter::default();
        w.len(300);
        assert_eq!(w.bytes, [0xac, 0x02]);
    }
}

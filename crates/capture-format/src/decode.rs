//! Records decoded from a log's bytes; a log cut short stops at its damage.

use std::fmt;

use crate::{tag, Call, Direction, Endpoint, Origin, Record, Stamp, MAGIC};

/// Why a log could not be read further.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// The byte offset in the log where the damage starts.
    pub offset: u64,
    /// What is wrong there.
    pub what: &'static str,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset, self.what)
    }
}

/// Reads fields of one record body; `None` when it ends early.
struct In<'a> {
    buf: &'a [u8],
}

impl<'a> In<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.buf.len() {
            return None;
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Some(head)
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.array()?))
    }
    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.array()?))
    }
    fn str16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
    fn stamp(&mut self) -> Option<Stamp> {
        Some(Stamp {
            tid: self.u32()?,
            mono_ns: self.u64()?,
            wall_ns: self.u64()?,
        })
    }
    fn call(&mut self) -> Option<Call> {
        Call::from_u8(self.u8()?)
    }
    fn endpoint(&mut self) -> Option<Endpoint<'a>> {
        Some(match self.u8()? {
            0 => Endpoint::None,
            4 => Endpoint::V4(self.array()?, self.u16()?),
            6 => Endpoint::V6(self.array()?, self.u16()?),
            1 => {
                let n = self.u8()?;
                Endpoint::Unix(self.take(usize::from(n))?)
            }
            _ => return None,
        })
    }
}

/// Decodes one record body (the bytes after its length).
fn decode_body(body: &[u8]) -> Option<Record<'_>> {
    let mut i = In { buf: body };
    let record = match i.u8()? {
        tag::PROCESS => Record::Process {
            pid: i.u32()?,
            ppid: i.u32()?,
            origin: match i.u8()? {
                0 => Origin::Start,
                1 => Origin::Fork,
                _ => return None,
            },
            at: i.stamp()?,
            host: i.str16()?,
            exe: i.str16()?,
            args: i.str16()?,
        },
        tag::SOCKET => Record::Socket {
            at: i.stamp()?,
            call: i.call()?,
            fd: i.i32()?,
            domain: i.u16()?,
            kind: i.u16()?,
            errno: i.u16()?,
        },
        tag::BIND => Record::Bind {
            at: i.stamp()?,
            call: i.call()?,
            fd: i.i32()?,
            local: i.endpoint()?,
            errno: i.u16()?,
        },
        tag::CONNECTION => Record::Connection {
            at: i.stamp()?,
            call: i.call()?,
            fd: i.i32()?,
            conn: i.u64()?,
            kind: i.u16()?,
            local: i.endpoint()?,
            peer: i.endpoint()?,
            peer_pid: i.u32()?,
            errno: i.u16()?,
            mid_stream: match i.u8()? {
                0 => false,
                1 => true,
                _ => return None,
            },
        },
        tag::DATA => {
            let at = i.stamp()?;
            let call = i.call()?;
            let fd = i.i32()?;
            let conn = i.u64()?;
            let flags = i.u8()?;
            if flags > 3 {
                return None;
            }
            Record::Data {
                at,
                call,
                fd,
                conn,
                direction: if flags & 1 == 1 {
                    Direction::Recv
                } else {
                    Direction::Send
                },
                peek: flags & 2 == 2,
                bytes: i.u64()?,
                errno: i.u16()?,
                offset: i.u64()?,
                peer: i.endpoint()?,
                checksum: i.u32()?,
            }
        }
        tag::CLOSE => Record::Close {
            at: i.stamp()?,
            call: i.call()?,
            fd: i.i32()?,
            conn: i.u64()?,
            how: i.u8()?,
            errno: i.u16()?,
        },
        tag::DUP => Record::Dup {
            at: i.stamp()?,
            call: i.call()?,
            old: i.i32()?,
            new: i.i32()?,
        },
        tag::FORK => Record::Fork {
            at: i.stamp()?,
            call: i.call()?,
            child: i.i32()?,
            errno: i.u16()?,
        },
        tag::EXEC => Record::Exec {
            at: i.stamp()?,
            path: i.str16()?,
        },
        tag::FRAMES => Record::Frames {
            at: i.stamp()?,
            conn: i.u64()?,
            direction: match i.u8()? {
                0 => Direction::Send,
                1 => Direction::Recv,
                _ => return None,
            },
            offset: i.u64()?,
            frames: i.str16().filter(|f| f.len() % crate::Frame::LEN == 0)?,
        },
        tag::WARNING => Record::Warning {
            at: i.stamp()?,
            code: i.u16()?,
            count: i.u64()?,
            detail: i.str16()?,
        },
        _ => return None,
    };
    // A record with bytes left over is not one this version wrote.
    i.buf.is_empty().then_some(record)
}

/// Iterates over the records of one log, in file order; after the last whole record,
/// [`Reader::damage`] says whether and where the log was cut or corrupt.
pub struct Reader<'a> {
    log: &'a [u8],
    at: usize,
    damage: Option<Damage>,
}

impl<'a> Reader<'a> {
    /// A reader over a whole log; a log that does not start with [`MAGIC`] is damaged at 0.
    pub fn new(log: &'a [u8]) -> Reader<'a> {
        if log.starts_with(MAGIC) {
            Reader {
                log,
                at: MAGIC.len(),
                damage: None,
            }
        } else {
            Reader {
                log,
                at: log.len(),
                damage: Some(Damage {
                    offset: 0,
                    what: "not a capture log (no CWSOCK01 header)",
                }),
            }
        }
    }

    /// Where reading stopped early, if it did.
    pub fn damage(&self) -> Option<&Damage> {
        self.damage.as_ref()
    }

    /// The byte offset of the next record.
    pub fn offset(&self) -> u64 {
        self.at as u64
    }

    fn stop(&mut self, what: &'static str) -> Option<Record<'a>> {
        self.damage = Some(Damage {
            offset: self.at as u64,
            what,
        });
        self.at = self.log.len();
        None
    }
}

impl<'a> Iterator for Reader<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        let rest = self.log.get(self.at..)?;
        if rest.is_empty() {
            return None;
        }
        let Some(len) = rest.get(..2) else {
            return self.stop("the log ends inside a record's length");
        };
        let len = usize::from(u16::from_le_bytes([len[0], len[1]]));
        let Some(body) = rest.get(2..2 + len) else {
            return self.stop("the log ends inside a record (cut short)");
        };
        match decode_body(body) {
            Some(record) => {
                self.at += 2 + len;
                Some(record)
            }
            None => self.stop("a record that does not decode (corrupt log)"),
        }
    }
}

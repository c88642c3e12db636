//! Records encoded into a caller's fixed buffer, without allocating (the preload
//! library encodes inside intercepted calls).

use crate::{tag, Direction, Endpoint, Origin, Record, Stamp};

/// A data record without a peer address, length prefix included.
const DATA_LEN: usize = 60;

/// Writes little-endian fields into a fixed buffer; `None` once it is full.
struct Out<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl Out<'_> {
    fn bytes(&mut self, b: &[u8]) -> Option<()> {
        let end = self.len.checked_add(b.len())?;
        self.buf.get_mut(self.len..end)?.copy_from_slice(b);
        self.len = end;
        Some(())
    }
    fn u8(&mut self, v: u8) -> Option<()> {
        self.bytes(&[v])
    }
    fn u16(&mut self, v: u16) -> Option<()> {
        self.bytes(&v.to_le_bytes())
    }
    fn u32(&mut self, v: u32) -> Option<()> {
        self.bytes(&v.to_le_bytes())
    }
    fn i32(&mut self, v: i32) -> Option<()> {
        self.bytes(&v.to_le_bytes())
    }
    fn u64(&mut self, v: u64) -> Option<()> {
        self.bytes(&v.to_le_bytes())
    }
    /// A string of at most `u16::MAX` bytes, cut to fit.
    fn str16(&mut self, s: &[u8]) -> Option<()> {
        let s = &s[..s.len().min(usize::from(u16::MAX))];
        self.u16(s.len() as u16)?;
        self.bytes(s)
    }
    fn stamp(&mut self, s: &Stamp) -> Option<()> {
        self.u32(s.tid)?;
        self.u64(s.mono_ns)?;
        self.u64(s.wall_ns)
    }
    fn endpoint(&mut self, e: &Endpoint<'_>) -> Option<()> {
        match e {
            Endpoint::None => self.u8(0),
            Endpoint::V4(a, p) => {
                self.u8(4)?;
                self.bytes(a)?;
                self.u16(*p)
            }
            Endpoint::V6(a, p) => {
                self.u8(6)?;
                self.bytes(a)?;
                self.u16(*p)
            }
            Endpoint::Unix(path) => {
                let path = &path[..path.len().min(255)];
                self.u8(1)?;
                self.u8(path.len() as u8)?;
                self.bytes(path)
            }
        }
    }
}

impl Record<'_> {
    /// Encodes the record (its length prefix included) at the start of `buf`; the bytes
    /// written, or `None` when it does not fit.
    pub fn encode(&self, buf: &mut [u8]) -> Option<usize> {
        if let Record::Data {
            at,
            call,
            fd,
            conn,
            direction,
            bytes,
            errno,
            offset,
            peer: Endpoint::None,
            checksum,
            peek,
        } = self
        {
            // The preload library's hot path (a stream's send or receive): every field at
            // a fixed place, one bounds check. The same bytes as the general path below.
            let out = buf.get_mut(..DATA_LEN)?;
            let mut r = [0u8; DATA_LEN];
            r[0..2].copy_from_slice(&(DATA_LEN as u16 - 2).to_le_bytes());
            r[2] = tag::DATA;
            r[3..7].copy_from_slice(&at.tid.to_le_bytes());
            r[7..15].copy_from_slice(&at.mono_ns.to_le_bytes());
            r[15..23].copy_from_slice(&at.wall_ns.to_le_bytes());
            r[23] = *call as u8;
            r[24..28].copy_from_slice(&fd.to_le_bytes());
            r[28..36].copy_from_slice(&conn.to_le_bytes());
            r[36] = u8::from(*direction == Direction::Recv) | (u8::from(*peek) << 1);
            r[37..45].copy_from_slice(&bytes.to_le_bytes());
            r[45..47].copy_from_slice(&errno.to_le_bytes());
            r[47..55].copy_from_slice(&offset.to_le_bytes());
            r[55] = 0; // Endpoint::None
            r[56..60].copy_from_slice(&checksum.to_le_bytes());
            out.copy_from_slice(&r);
            return Some(DATA_LEN);
        }
        let mut o = Out { buf, len: 2 };
        match self {
            Record::Process {
                pid,
                ppid,
                origin,
                at,
                host,
                exe,
                args,
            } => {
                o.u8(tag::PROCESS)?;
                o.u32(*pid)?;
                o.u32(*ppid)?;
                o.u8(match origin {
                    Origin::Start => 0,
                    Origin::Fork => 1,
                })?;
                o.stamp(at)?;
                o.str16(host)?;
                o.str16(exe)?;
                o.str16(args)?;
            }
            Record::Socket {
                at,
                call,
                fd,
                domain,
                kind,
                errno,
            } => {
                o.u8(tag::SOCKET)?;
                o.stamp(at)?;
                o.u8(*call as u8)?;
                o.i32(*fd)?;
                o.u16(*domain)?;
                o.u16(*kind)?;
                o.u16(*errno)?;
            }
            Record::Bind {
                at,
                call,
                fd,
                local,
                errno,
            } => {
                o.u8(tag::BIND)?;
                o.stamp(at)?;
                o.u8(*call as u8)?;
                o.i32(*fd)?;
                o.endpoint(local)?;
                o.u16(*errno)?;
            }
            Record::Connection {
                at,
                call,
                fd,
                conn,
                kind,
                local,
                peer,
                peer_pid,
                errno,
                mid_stream,
            } => {
                o.u8(tag::CONNECTION)?;
                o.stamp(at)?;
                o.u8(*call as u8)?;
                o.i32(*fd)?;
                o.u64(*conn)?;
                o.u16(*kind)?;
                o.endpoint(local)?;
                o.endpoint(peer)?;
                o.u32(*peer_pid)?;
                o.u16(*errno)?;
                o.u8(u8::from(*mid_stream))?;
            }
            Record::Data {
                at,
                call,
                fd,
                conn,
                direction,
                bytes,
                errno,
                offset,
                peer,
                checksum,
                peek,
            } => {
                o.u8(tag::DATA)?;
                o.stamp(at)?;
                o.u8(*call as u8)?;
                o.i32(*fd)?;
                o.u64(*conn)?;
                let flags = u8::from(*direction == Direction::Recv) | (u8::from(*peek) << 1);
                o.u8(flags)?;
                o.u64(*bytes)?;
                o.u16(*errno)?;
                o.u64(*offset)?;
                o.endpoint(peer)?;
                o.u32(*checksum)?;
            }
            Record::Close {
                at,
                call,
                fd,
                conn,
                how,
                errno,
            } => {
                o.u8(tag::CLOSE)?;
                o.stamp(at)?;
                o.u8(*call as u8)?;
                o.i32(*fd)?;
                o.u64(*conn)?;
                o.u8(*how)?;
                o.u16(*errno)?;
            }
            Record::Dup { at, call, old, new } => {
                o.u8(tag::DUP)?;
                o.stamp(at)?;
                o.u8(*call as u8)?;
                o.i32(*old)?;
                o.i32(*new)?;
            }
            Record::Fork {
                at,
                call,
                child,
                errno,
            } => {
                o.u8(tag::FORK)?;
                o.stamp(at)?;
                o.u8(*call as u8)?;
                o.i32(*child)?;
                o.u16(*errno)?;
            }
            Record::Exec { at, path } => {
                o.u8(tag::EXEC)?;
                o.stamp(at)?;
                o.str16(path)?;
            }
            Record::Frames {
                at,
                conn,
                direction,
                offset,
                frames,
            } => {
                o.u8(tag::FRAMES)?;
                o.stamp(at)?;
                o.u64(*conn)?;
                o.u8(u8::from(*direction == Direction::Recv))?;
                o.u64(*offset)?;
                o.str16(frames)?;
            }
            Record::Warning {
                at,
                code,
                count,
                detail,
            } => {
                o.u8(tag::WARNING)?;
                o.stamp(at)?;
                o.u16(*code)?;
                o.u64(*count)?;
                o.str16(detail)?;
            }
        }
        let body = u16::try_from(o.len - 2).ok()?;
        o.buf.get_mut(..2)?.copy_from_slice(&body.to_le_bytes());
        Some(o.len)
    }
}

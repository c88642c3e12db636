//! Reconciliation (WAP5 §4): capture logs become messages, each with its sender and
//! receiver node and endpoint, its send and receive time (either missing when that side
//! was not captured) and its size.
//!
//! What the paper leaves open, decided here:
//! - The two ends of a TCP connection are the records whose address pairs mirror each
//!   other, paired in time order (a port reused later is another connection); Unix stream
//!   sockets pair by path and the two processes' pids.
//! - A message is a run of bytes in one direction with nothing sent the other way between:
//!   on the sender's side, consecutive sends with no receive between them (WAP5's fat
//!   messages coalesced); on the receiver's side when the sender was not captured. Its
//!   send time is the first send's, its receive time the completion of the read that
//!   delivered its last byte (stream offsets map one side's bytes to the other's calls).
//! - On a connection the capture found framed as HTTP/2 (`Record::Frames`), a message is a
//!   stream's frames in one direction instead, from its first HEADERS to the frame ending
//!   the stream, so calls multiplexed on one connection are messages of their own. Its
//!   endpoints name the stream (`127.0.0.1:40000#3`; [`connection_of`] gives the
//!   connection's), so a reply pairs with its own request and linking takes each stream
//!   for a connection; its size counts the recorded frames (HEADERS and the last DATA).
//! - A datagram is a message of its own, matched to its receipt by checksum and size,
//!   the nearest in time.
//! - Times are wall-clock nanoseconds as each host's clock read them.
//! - Nodes are `program[pid]@host` with what tells alike programs apart after the program
//!   (`crate::naming`: an interpreter's script, a listening port), or what a names file
//!   (`causeway infer --names`: `NAME = TEXT` lines, matched against the command line)
//!   calls them; an end that was not captured is a node named by its host's address when
//!   it connected (a client: its ports are its many connections), and by its address and
//!   port when the captured process connected to it (a server there).
//!
//! At WAP5's CoDeeN scale (`causeway-bench infer-scale`) memory is the cost that matters.
//! Names are interned (`ustr`: one copy each, compared and hashed as a pointer); capture
//! logs are read several at a time (`Captured::read`, parts appended in file order); the
//! two ends of a TCP connection are paired through their address pair, the ends under one
//! key chained in index order; a connection's calls are freed once its messages are made,
//! and its endpoint names are made (formatted and interned) a block of pairs at a time on
//! every core; connection ends are dropped once the messages are made. A missing time is
//! `i64::MIN` (`MaybeNs`), not an `Option`. Reconciled messages are numbered 1..n, so
//! `MessageIndex` finds one by position (a map only for ids given in `--messages`).
//! `leave_out_ports` (`causeway infer --ignore-port`) drops traffic such as span exports.

use foldhash::{HashMap, HashSet};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::format::{sock, Direction, Endpoint, Frame, Reader, Record};

/// A socket address, owned.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ep {
    /// Unknown or not applicable (as [`Endpoint::None`]).
    None,
    /// An IPv4 or IPv6 address and port.
    Inet(SocketAddr),
    /// A Unix socket's path (empty when unnamed).
    Unix(Vec<u8>),
}

impl From<Endpoint<'_>> for Ep {
    fn from(e: Endpoint<'_>) -> Ep {
        match e {
            Endpoint::None => Ep::None,
            Endpoint::V4(a, p) => Ep::Inet(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(a)), p)),
            Endpoint::V6(a, p) => Ep::Inet(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(a)), p)),
            Endpoint::Unix(p) => Ep::Unix(p.to_vec()),
        }
    }
}

impl fmt::Display for Ep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ep::None => f.write_str("-"),
            Ep::Inet(a) => write!(f, "{a}"),
            Ep::Unix(p) => Endpoint::Unix(p).fmt(f),
        }
    }
}

impl Ep {
    /// The node an uncaptured end stands for: its host's address (its ports are the
    /// host's many connections), or a Unix socket's path.
    fn host(&self) -> Name {
        match self {
            Ep::Inet(a) => Name::from(a.ip().to_string().as_str()),
            other => other.name(),
        }
    }

    fn name(&self) -> Name {
        Name::from(self.to_string().as_str())
    }
}

/// Connection pairs whose names are made at once (on every core) before their messages.
const PAIRS_PER_BLOCK: usize = 1 << 15;

/// What a connection end is found by: its local and peer addresses (a Unix stream's
/// path and its client's and server's pids).
type PairKey<'a> = (&'a Ep, &'a Ep, u32, u32);

/// A captured process: one log.
#[derive(Clone, Debug, Serialize)]
pub struct Process {
    /// The node's name: program, pid and host (`python3.11[4242]@web1`).
    pub node: String,
    /// The host it ran on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// The executable's file name (the last part of its path).
    pub program: String,
    /// Its command line, arguments separated by spaces.
    pub command: String,
    /// The log file it wrote.
    pub log: PathBuf,
    /// Whether a names file named it (`causeway infer --names`).
    #[serde(skip)]
    pub named: bool,
}

/// A message's id as the reconciled-message format has it: any JSON number or string
/// (interned, so that an id fits in 16 bytes).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageId {
    /// A number (reconciliation numbers messages from 1).
    Int(i64),
    /// A string.
    Text(Name),
}

/// Messages found by their ids: by position when each id is its message's number (as
/// reconciliation numbers them: no table for millions of messages), else through a map.
pub struct MessageIndex<'a> {
    len: usize,
    map: Option<HashMap<&'a MessageId, usize>>,
}

impl<'a> MessageIndex<'a> {
    /// Indexes `messages` (by position when their ids are 1, 2, 3, ... in order).
    pub fn of(messages: &'a [Message]) -> MessageIndex<'a> {
        let numbered = messages
            .iter()
            .enumerate()
            .all(|(i, m)| m.id == MessageId::Int(i as i64 + 1));
        MessageIndex {
            len: messages.len(),
            map: (!numbered).then(|| {
                messages
                    .iter()
                    .enumerate()
                    .map(|(i, m)| (&m.id, i))
                    .collect()
            }),
        }
    }

    /// The index of the message with `id`.
    pub fn get(&self, id: &MessageId) -> Option<usize> {
        match (&self.map, id) {
            (Some(map), _) => map.get(id).copied(),
            (None, MessageId::Int(k)) => usize::try_from(k - 1).ok().filter(|&i| i < self.len),
            (None, MessageId::Text(_)) => None,
        }
    }
}

/// A node's or an endpoint's name, interned: millions of messages name a few million
/// endpoints and a few thousand nodes, each kept once (for the life of the process),
/// compared and hashed as a pointer.
pub type Name = ustr::Ustr;

/// How many names are interned, and the bytes their strings take (reserved, used).
pub fn names_interned() -> (usize, usize, usize) {
    (
        ustr::num_entries(),
        ustr::total_capacity(),
        ustr::total_allocated(),
    )
}

/// One message, in the reconciled-message format (`causeway infer --messages`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// The message's id.
    pub id: MessageId,
    /// The sending node.
    pub src: Name,
    /// The sender's endpoint (address and port, or Unix path).
    pub src_ep: Name,
    /// The receiving node.
    pub dst: Name,
    /// The receiver's endpoint.
    pub dst_ep: Name,
    /// When it was sent (its first send was called), wall-clock ns on the sender's host;
    /// none when the sender was not captured.
    pub send_ns: MaybeNs,
    /// When it was received (the read that delivered its last byte returned), wall-clock
    /// ns on the receiver's host; none when the receiver was not captured.
    pub recv_ns: MaybeNs,
    /// Its size in bytes.
    pub bytes: u64,
}

/// A time in nanoseconds, or none, in 8 bytes where an `Option<i64>` takes 16 (millions
/// of messages have two): `i64::MIN`, a time no clock reads, is none. It reads and writes
/// as an `Option<i64>` (JSON's integer or null), and orders as one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(from = "Option<i64>", into = "Option<i64>")]
pub struct MaybeNs(i64);

impl MaybeNs {
    /// No time.
    pub const NONE: MaybeNs = MaybeNs(i64::MIN);

    /// The time, or `None` for [`MaybeNs::NONE`].
    pub fn get(self) -> Option<i64> {
        (self != MaybeNs::NONE).then_some(self.0)
    }
}

impl From<Option<i64>> for MaybeNs {
    fn from(t: Option<i64>) -> MaybeNs {
        t.map_or(MaybeNs::NONE, MaybeNs)
    }
}

impl From<MaybeNs> for Option<i64> {
    fn from(t: MaybeNs) -> Option<i64> {
        t.get()
    }
}

/// Leaves out the messages to or from any of `ports` (traffic that is not the
/// system's requests, such as span or metric exports); returns how many.
pub fn leave_out_ports(messages: &mut Vec<Message>, ports: &[u16]) -> usize {
    let before = messages.len();
    let on = |ep: &str| port(ep).is_some_and(|p| ports.contains(&p));
    messages.retain(|m| !on(&m.src_ep) && !on(&m.dst_ep));
    before - messages.len()
}

/// What reconciliation saw and could not use.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Logs read.
    pub logs: usize,
    /// Logs read only up to damage (cut short, corrupt).
    pub damaged_logs: usize,
    /// Connections seen, once per captured end (connected datagram sockets included).
    pub connections: usize,
    /// Connections whose other end was captured too.
    pub connections_paired: usize,
    /// Datagrams sent by captured processes.
    pub datagrams_sent: usize,
    /// Datagrams whose receipt (or sending) was not captured.
    pub datagrams_unmatched: usize,
    /// Data records of a connection seen mid-stream (its offsets are not positions).
    pub mid_stream_connections: usize,
    /// Clocks that went backwards within one log.
    pub clock_reversals: usize,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.logs += other.logs;
        self.damaged_logs += other.damaged_logs;
        self.connections += other.connections;
        self.connections_paired += other.connections_paired;
        self.datagrams_sent += other.datagrams_sent;
        self.datagrams_unmatched += other.datagrams_unmatched;
        self.mid_stream_connections += other.mid_stream_connections;
        self.clock_reversals += other.clock_reversals;
    }
}

/// One data call on a connection end.
#[derive(Clone, Debug)]
struct Call {
    direction: Direction,
    mono_ns: u64,
    offset: u64,
    bytes: u64,
    wall_ns: u64,
    checksum: u32,
    /// A datagram's other end (streams have none: most calls, so it is boxed).
    peer: Option<Box<Ep>>,
}

/// No endpoint.
static NO_EP: Ep = Ep::None;

impl Call {
    fn peer(&self) -> &Ep {
        self.peer.as_deref().unwrap_or(&NO_EP)
    }
}

/// One end of a connection (or a datagram socket) in one process.
#[derive(Clone, Debug)]
struct End {
    process: usize,
    kind: u16,
    local: Ep,
    peer: Ep,
    /// This process's pid and its Unix peer's.
    pid: u32,
    peer_pid: u32,
    at_wall: u64,
    mid_stream: bool,
    calls: Vec<Call>,
    /// HTTP/2 frames its calls moved (those that delimit a stream's messages).
    frames: Vec<Framed>,
}

/// An HTTP/2 frame a call moved, with the call's direction and time.
#[derive(Clone, Debug)]
struct Framed {
    direction: Direction,
    wall_ns: u64,
    frame: Frame,
}

/// Capture logs read into processes and connection ends.
#[derive(Default)]
pub struct Captured {
    /// The captured processes, one per log, in the order the logs were added.
    pub processes: Vec<Process>,
    ends: Vec<End>,
    /// What reconciliation saw and could not use.
    pub counts: Counts,
    /// The ports each process listened on (its node name to the ports).
    pub listening: HashMap<String, HashSet<u16>>,
    /// Each damaged log and where its damage starts.
    pub damage: Vec<(PathBuf, String)>,
}

fn program_name(exe: &[u8]) -> String {
    let exe = String::from_utf8_lossy(exe);
    exe.rsplit('/').next().unwrap_or_default().to_string()
}

impl Captured {
    /// Reads the logs `files`, several at a time; the result is the same as adding them
    /// one by one in order.
    pub fn read(files: &[PathBuf]) -> std::io::Result<Captured> {
        let read_part = |files: &[PathBuf]| -> std::io::Result<Captured> {
            let mut part = Captured::default();
            for file in files {
                let bytes = std::fs::read(file).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("reading {}: {e}", file.display()))
                })?;
                part.add_log(file, &bytes);
            }
            Ok(part)
        };
        let parts = crate::parallel::map_chunks(files, read_part);
        let mut all = Captured::default();
        for part in parts {
            all.append(part?);
        }
        Ok(all)
    }

    /// Appends `other`'s logs after these.
    fn append(&mut self, other: Captured) {
        let base = self.processes.len();
        self.processes.extend(other.processes);
        self.ends.extend(other.ends.into_iter().map(|mut e| {
            e.process += base;
            e
        }));
        self.counts.add(&other.counts);
        for (node, ports) in other.listening {
            self.listening.entry(node).or_default().extend(ports);
        }
        self.damage.extend(other.damage);
    }

    /// Adds one log's bytes (`path` names it in reports).
    pub fn add_log(&mut self, path: &Path, log: &[u8]) {
        let mut reader = Reader::new(log);
        // Threads write their buffers out in any order: a connection's data can come
        // before the record of the accept that made it, so data is read in a second pass.
        let records: Vec<Record<'_>> = reader.by_ref().collect();
        let process = self.processes.len();
        let mut by_conn: HashMap<u64, usize> = HashMap::default();
        let mut last_mono: HashMap<u32, u64> = HashMap::default();
        let mut pid = 0;
        for record in &records {
            let at = record.at();
            // Within one thread calls follow each other: an earlier time is a clock that
            // went backwards.
            let last = last_mono.entry(at.tid).or_insert(0);
            if at.mono_ns < *last {
                self.counts.clock_reversals += 1;
            }
            *last = (*last).max(at.mono_ns);
            match *record {
                Record::Process {
                    pid: p,
                    host,
                    exe,
                    args,
                    ..
                } => {
                    pid = p;
                    let host = String::from_utf8_lossy(host).into_owned();
                    let program = program_name(exe);
                    let command = args
                        .split(|b| *b == 0)
                        .map(String::from_utf8_lossy)
                        .collect::<Vec<_>>()
                        .join(" ");
                    self.processes.push(Process {
                        node: format!("{program}[{p}]@{host}"),
                        host,
                        pid: p,
                        program,
                        command,
                        log: path.to_path_buf(),
                        named: false,
                    });
                }
                Record::Bind {
                    call: crate::format::Call::Listen,
                    local: Endpoint::V4(_, port) | Endpoint::V6(_, port),
                    errno: 0,
                    ..
                } => {
                    if let Some(p) = self.processes.get(process) {
                        self.listening
                            .entry(p.node.clone())
                            .or_default()
                            .insert(port);
                    }
                }
                Record::Connection {
                    conn,
                    kind,
                    local,
                    peer,
                    peer_pid,
                    mid_stream,
                    ..
                } => {
                    if self.processes.len() == process {
                        continue; // no header: not a log this version wrote
                    }
                    self.counts.connections += 1;
                    self.counts.mid_stream_connections += usize::from(mid_stream);
                    by_conn.insert(conn, self.ends.len());
                    self.ends.push(End {
                        process,
                        kind,
                        local: local.into(),
                        peer: peer.into(),
                        pid,
                        peer_pid,
                        at_wall: at.wall_ns,
                        mid_stream,
                        calls: Vec::new(),
                        frames: Vec::new(),
                    });
                }
                _ => {}
            }
        }
        for record in &records {
            if let Record::Frames {
                at,
                conn,
                direction,
                frames,
                ..
            } = *record
            {
                if let Some(end) = by_conn.get(&conn).and_then(|i| self.ends.get_mut(*i)) {
                    end.frames
                        .extend(Frame::read_all(frames).map(|frame| Framed {
                            direction,
                            wall_ns: at.wall_ns,
                            frame,
                        }));
                }
                continue;
            }
            let Record::Data {
                at,
                conn,
                direction,
                bytes,
                errno,
                offset,
                peer,
                checksum,
                peek,
                ..
            } = *record
            else {
                continue;
            };
            // Failed calls and peeks moved nothing; a zero-byte read is an EOF.
            if errno != 0 || peek || bytes == 0 {
                continue;
            }
            if let Some(end) = by_conn.get(&conn).and_then(|i| self.ends.get_mut(*i)) {
                end.calls.push(Call {
                    direction,
                    mono_ns: at.mono_ns,
                    offset,
                    bytes,
                    wall_ns: at.wall_ns,
                    checksum,
                    peer: (peer != Endpoint::None).then(|| Box::new(peer.into())),
                });
            }
        }
        // Most connections carry a few calls: no room left over, across millions of them.
        for &i in by_conn.values() {
            if let Some(end) = self.ends.get_mut(i) {
                end.calls.shrink_to_fit();
                end.frames.shrink_to_fit();
            }
        }
        self.counts.logs += 1;
        if let Some(d) = reader.damage() {
            self.counts.damaged_logs += 1;
            self.damage.push((path.to_path_buf(), d.to_string()));
        }
    }

    /// Names nodes by rules `(name, text)`: a process whose command line contains `text`
    /// becomes the node `name` (the first rule that matches; processes given one name are
    /// one node). Processes no rule matches keep `program[pid]@host`.
    pub fn name_nodes(&mut self, rules: &[(String, String)]) {
        for p in &mut self.processes {
            if let Some((name, _)) = rules
                .iter()
                .find(|(_, text)| p.command.contains(text.as_str()))
            {
                if let Some(ports) = self.listening.remove(&p.node) {
                    self.listening
                        .entry(name.clone())
                        .or_default()
                        .extend(ports);
                }
                p.node = name.clone();
                p.named = true;
            }
        }
    }

    /// Reconciles everything added into messages, numbered from 1 in send (else receive)
    /// time order. The connection ends are used up: a second call finds none.
    pub fn messages(&mut self) -> Vec<Message> {
        self.name_distinctly();
        // A log holds each thread's records in the order its buffers were written: the
        // calls of one connection are put back in the order they returned.
        for end in &mut self.ends {
            end.calls.sort_by_key(|c| c.mono_ns);
            end.frames
                .sort_by_key(|f| (f.direction == Direction::Recv, f.frame.start));
        }
        // At most a message per call: reserved, not touched, so it costs no memory
        // (and growing it would copy millions of messages).
        let mut out = Vec::with_capacity(self.ends.iter().map(|e| e.calls.len()).sum());
        let streams: Vec<usize> = (0..self.ends.len())
            .filter(|i| self.ends[*i].kind == sock::STREAM)
            .collect();
        let pairs = self.pair_streams(&streams);
        self.counts.connections_paired = 2 * pairs.iter().filter(|(_, b)| b.is_some()).count();
        // Each process's node name interned once, each pair's endpoints once.
        let nodes: Vec<Name> = self
            .processes
            .iter()
            .map(|p| Name::from(p.node.as_str()))
            .collect();
        let node = |e: &End| nodes.get(e.process).copied().unwrap_or_default();
        // Names take longest to make: a block of pairs' at a time on every core.
        for block in pairs.chunks(PAIRS_PER_BLOCK) {
            let names = crate::parallel::map_chunks(block, |pairs| {
                pairs
                    .iter()
                    .map(|&(a, b)| self.pair_names(a as usize, b.map(|b| b as usize)))
                    .collect::<Vec<_>>()
            });
            for (&(a, b), [local, peer, b_local, b_peer]) in
                block.iter().zip(names.into_iter().flatten())
            {
                let (a, b) = (a as usize, b.map(|b| b as usize));
                let sa = &self.ends[a];
                match b {
                    Some(b) => {
                        let sb = &self.ends[b];
                        let names_a = (node(sa), node(sb), local, peer);
                        let names_b = (node(sb), node(sa), b_local, b_peer);
                        self.stream_messages(a, Some(b), names_a, &mut out);
                        self.stream_messages(b, Some(a), names_b, &mut out);
                        self.ends[b].calls = Vec::new();
                    }
                    None => {
                        let names = (node(sa), b_local, local, peer);
                        self.stream_messages(a, None, names, &mut out);
                    }
                }
                // A connection's calls are done with once its messages are made: freed
                // as they go, they make room for the messages.
                self.ends[a].calls = Vec::new();
            }
        }
        self.datagram_messages(&mut out);
        // The ends are done with: their memory goes before linking needs its own.
        self.ends = Vec::new();
        // In place: a stable sort would want half the messages again.
        out.sort_unstable_by_key(|m| {
            (
                m.send_ns.get().or(m.recv_ns.get()),
                m.recv_ns.get(),
                m.bytes,
            )
        });
        for (i, m) in out.iter_mut().enumerate() {
            m.id = MessageId::Int(i as i64 + 1);
        }
        out
    }

    /// The key under which an end's other end is found: its own key mirrored.
    fn keys<'e>(e: &'e End) -> Option<(PairKey<'e>, PairKey<'e>)> {
        match (&e.local, &e.peer) {
            (Ep::Inet(_), Ep::Inet(_)) => {
                Some(((&e.local, &e.peer, 0, 0), (&e.peer, &e.local, 0, 0)))
            }
            // A Unix stream: the named path and the two pids, client first.
            (Ep::Unix(l), Ep::Unix(_)) => {
                let (path, client, server) = if l.is_empty() {
                    (&e.peer, e.pid, e.peer_pid)
                } else {
                    (&e.local, e.peer_pid, e.pid)
                };
                let own = (path, &NO_EP, client, server);
                Some((own, own))
            }
            _ => None,
        }
    }

    /// Each stream end with its other end when that was captured, in time order per
    /// address pair.
    fn pair_streams(&self, streams: &[usize]) -> Vec<(u32, Option<u32>)> {
        // The ends under each key's hash, in index order: the first, and each one's next
        // (a list per key would be millions of allocations; the keys themselves, with
        // their addresses, three times the room). Ends whose keys only share a hash are
        // told apart by their keys.
        const END: u32 = u32::MAX;
        let hasher = foldhash::fast::RandomState::default();
        let hash = |key: &PairKey| std::hash::BuildHasher::hash_one(&hasher, key);
        let mut first: HashMap<u64, u32> =
            HashMap::with_capacity_and_hasher(streams.len(), Default::default());
        let mut next: Vec<u32> = vec![END; self.ends.len()];
        for &i in streams.iter().rev() {
            if let Some((own, _)) = Self::keys(&self.ends[i]) {
                if let Some(after) = first.insert(hash(&own), i as u32) {
                    next[i] = after;
                }
            }
        }
        let mut paired = vec![false; self.ends.len()];
        let mut out = Vec::new();
        for &i in streams {
            if paired[i] {
                continue;
            }
            let e = &self.ends[i];
            let other = Self::keys(e).and_then(|(_, mirror)| {
                std::iter::successors(first.get(&hash(&mirror)).copied(), |&j| {
                    Some(next[j as usize]).filter(|&k| k != END)
                })
                .map(|j| j as usize)
                .filter(|&j| Self::keys(&self.ends[j]).is_some_and(|(own, _)| own == mirror))
                .filter(|&j| j != i && !paired[j] && self.ends[j].process != e.process)
                .min_by_key(|&j| self.ends[j].at_wall.abs_diff(e.at_wall))
            });
            paired[i] = true;
            if let Some(j) = other {
                paired[j] = true;
            }
            out.push((i as u32, other.map(|j| j as u32)));
        }
        out
    }

    /// A pair's endpoint names: the first end's local and peer, then the second end's
    /// (or, the second end not captured, its host's and nothing).
    fn pair_names(&self, a: usize, b: Option<usize>) -> [Name; 4] {
        let sa = &self.ends[a];
        let (local, peer) = (sa.local.name(), sa.peer.name());
        let Some(b) = b else {
            // The uncaptured end of a connection this process made is a server: its port
            // tells it apart from the other programs of its host (a client there too).
            let accepted = match &sa.local {
                Ep::Inet(addr) => self
                    .processes
                    .get(sa.process)
                    .and_then(|p| self.listening.get(&p.node))
                    .is_some_and(|ports| ports.contains(&addr.port())),
                _ => true,
            };
            let node = if accepted { sa.peer.host() } else { peer };
            return [local, peer, node, Name::default()];
        };
        let sb = &self.ends[b];
        // Mirrored addresses: one end's local is the other's peer.
        if matches!((&sb.local, &sb.peer), (Ep::Inet(_), Ep::Inet(_))) {
            [local, peer, peer, local]
        } else {
            [local, peer, sb.local.name(), sb.peer.name()]
        }
    }

    fn node(&self, end: &End) -> Name {
        Name::from(
            self.processes
                .get(end.process)
                .map_or("", |p| p.node.as_str()),
        )
    }

    /// The messages `sender` sent on a stream (or, when `receiver` is `None`, also those
    /// it received from the uncaptured other end).
    /// `names`: the sender's and the receiver's nodes and endpoints.
    fn stream_messages(
        &self,
        sender: usize,
        receiver: Option<usize>,
        names: (Name, Name, Name, Name),
        out: &mut Vec<Message>,
    ) {
        let s = &self.ends[sender];
        let r = receiver.map(|i| &self.ends[i]);
        // On HTTP/2, a message per stream and direction.
        let framed = |d: Direction| s.frames.iter().any(|f| f.direction == d);
        if framed(Direction::Recv) && r.is_none() {
            framed_messages(s, None, Direction::Recv, names, out);
        }
        if framed(Direction::Send) {
            framed_messages(s, r, Direction::Send, names, out);
        } else {
            sent_runs(s, r, names, out);
        }
        let (src, dst, local, peer) = names;
        if r.is_none() && !framed(Direction::Recv) {
            // What the uncaptured end sent: runs of receives with no send between them.
            let mut runs: Vec<(u64, u64, u64)> = Vec::new(); // (bytes, first offset, last read time)
            let mut open = false;
            for c in &s.calls {
                match c.direction {
                    Direction::Recv => {
                        match runs.last_mut() {
                            Some(run) if open => {
                                run.0 += c.bytes;
                                run.2 = c.wall_ns;
                            }
                            _ => runs.push((c.bytes, c.offset, c.wall_ns)),
                        }
                        open = true;
                    }
                    Direction::Send => open = false,
                }
            }
            for (bytes, _, received) in runs {
                out.push(Message {
                    id: MessageId::Int(0),
                    src: dst,
                    src_ep: peer,
                    dst: src,
                    dst_ep: local,
                    send_ns: MaybeNs::NONE,
                    recv_ns: Some(received as i64).into(),
                    bytes,
                });
            }
        }
    }

    /// Datagrams: each send matched to the receipt with its checksum and size, nearest
    /// in time; unmatched sends and receipts are messages with one time.
    fn datagram_messages(&mut self, out: &mut Vec<Message>) {
        // (checksum, bytes) -> receipts not yet matched: (end, call index).
        let mut receipts: HashMap<(u32, u64), Vec<(usize, usize)>> = HashMap::default();
        for (i, e) in self
            .ends
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind != sock::STREAM)
        {
            for (k, c) in e.calls.iter().enumerate() {
                if c.direction == Direction::Recv {
                    receipts
                        .entry((c.checksum, c.bytes))
                        .or_default()
                        .push((i, k));
                }
            }
        }
        // Receipts matched (end, call): a set, not a flag per call of every end (streams'
        // ends are millions).
        let mut used: HashSet<(usize, usize)> = HashSet::default();
        for (i, e) in self
            .ends
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind != sock::STREAM)
        {
            for c in e.calls.iter().filter(|c| c.direction == Direction::Send) {
                self.counts.datagrams_sent += 1;
                let dst_ep = match c.peer() {
                    Ep::None => e.peer.clone(),
                    p => p.clone(),
                };
                let found = receipts.get(&(c.checksum, c.bytes)).and_then(|list| {
                    list.iter()
                        .copied()
                        .filter(|&(j, k)| {
                            let r = &self.ends[j];
                            !used.contains(&(j, k)) && j != i && ports_match(&r.local, &dst_ep)
                        })
                        .min_by_key(|&(j, k)| self.ends[j].calls[k].wall_ns.abs_diff(c.wall_ns))
                });
                let (dst, recv_ns) = match found {
                    Some((j, k)) => {
                        used.insert((j, k));
                        (
                            self.node(&self.ends[j]),
                            Some(self.ends[j].calls[k].wall_ns as i64),
                        )
                    }
                    None => {
                        self.counts.datagrams_unmatched += 1;
                        (dst_ep.host(), None)
                    }
                };
                out.push(Message {
                    id: MessageId::Int(0),
                    src: self.node(e),
                    src_ep: e.local.name(),
                    dst,
                    dst_ep: dst_ep.name(),
                    send_ns: Some(c.wall_ns as i64).into(),
                    recv_ns: recv_ns.into(),
                    bytes: c.bytes,
                });
            }
        }
        for (j, e) in self
            .ends
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind != sock::STREAM)
        {
            for (k, c) in e.calls.iter().enumerate() {
                if c.direction == Direction::Recv && !used.contains(&(j, k)) {
                    self.counts.datagrams_unmatched += 1;
                    out.push(Message {
                        id: MessageId::Int(0),
                        src: c.peer().host(),
                        src_ep: c.peer().name(),
                        dst: self.node(e),
                        dst_ep: e.local.name(),
                        send_ns: MaybeNs::NONE,
                        recv_ns: Some(c.wall_ns as i64).into(),
                        bytes: c.bytes,
                    });
                }
            }
        }
    }
}

/// Whether a socket bound to `local` receives what is sent to `to` (a wildcard address
/// matches any).
/// An `ip:port` endpoint's port.
pub(crate) fn port(endpoint: &str) -> Option<u16> {
    connection_of(endpoint).rsplit_once(':')?.1.parse().ok()
}

/// The messages `s` sent on a stream, as runs of sends with no receive between them, each
/// received by `r`'s read of its last byte when `r` was captured. `names`: the sender's
/// and the receiver's nodes and endpoints.
fn sent_runs(s: &End, r: Option<&End>, names: (Name, Name, Name, Name), out: &mut Vec<Message>) {
    // Runs of sends with no receive between them.
    let mut runs: Vec<(u64, u64, u64)> = Vec::new(); // (first offset, end offset, first send time)
    let mut open = false;
    for c in &s.calls {
        match c.direction {
            Direction::Send => {
                let end = c.offset + c.bytes;
                match runs.last_mut() {
                    Some(run) if open && c.offset == run.1 => run.1 = end,
                    _ => runs.push((c.offset, end, c.wall_ns)),
                }
                open = true;
            }
            Direction::Recv => open = false,
        }
    }
    let (src, dst, local, peer) = names;
    for (start, end, sent) in runs {
        // The read that delivered the message's last byte (not knowable when either end
        // was first seen mid-stream: its offsets are not positions in the stream).
        let received = r.filter(|r| !r.mid_stream && !s.mid_stream).and_then(|r| {
            r.calls
                .iter()
                .find(|c| {
                    c.direction == Direction::Recv && c.offset < end && end <= c.offset + c.bytes
                })
                .map(|c| c.wall_ns)
        });
        out.push(Message {
            id: MessageId::Int(0),
            src,
            src_ep: local,
            dst,
            dst_ep: peer,
            send_ns: Some(sent as i64).into(),
            recv_ns: received.map(|t| t as i64).into(),
            bytes: end - start,
        });
    }
}

/// The connection's endpoint of a stream's (`127.0.0.1:40000#3` is stream 3 of
/// `127.0.0.1:40000`): every other endpoint is its own.
pub fn connection_of(endpoint: &str) -> &str {
    endpoint
        .split_once('#')
        .map_or(endpoint, |(connection, _)| connection)
}

/// The endpoint of stream `stream` on the connection endpoint `endpoint`.
fn stream_endpoint(endpoint: Name, stream: u32) -> Name {
    Name::from(format!("{endpoint}#{stream}").as_str())
}

/// The HTTP/2 messages `end` moved in `direction`, one per stream (its frames from the
/// first to the one ending the stream), each between that stream's endpoints so that a
/// reply answers its own request. Sent: received by `receiver` (the read that took the
/// message's last byte), when captured. Received (`Direction::Recv`): from the uncaptured
/// other end. `names`: the end's node, the other node, the end's and the other's
/// endpoints.
fn framed_messages(
    end: &End,
    receiver: Option<&End>,
    direction: Direction,
    (own, other, local, peer): (Name, Name, Name, Name),
    out: &mut Vec<Message>,
) {
    /// A stream's message so far: its first frame's time, its end offset, its bytes.
    struct Open {
        first_ns: u64,
        end: u64,
        bytes: u64,
    }
    // The read of `end`'s or `receiver`'s that took the byte before `offset`.
    let read_at = |e: &End, offset: u64| -> Option<u64> {
        e.calls
            .iter()
            .find(|c| {
                c.direction == Direction::Recv && c.offset < offset && offset <= c.offset + c.bytes
            })
            .map(|c| c.wall_ns)
    };
    let mut open: HashMap<u32, Open> = HashMap::default();
    let finish = |stream: u32, m: Open, out: &mut Vec<Message>| {
        let (src_ep, dst_ep) = (
            stream_endpoint(local, stream),
            stream_endpoint(peer, stream),
        );
        let message = match direction {
            Direction::Send => {
                let received = receiver
                    .filter(|r| !r.mid_stream && !end.mid_stream)
                    .and_then(|r| read_at(r, m.end));
                Message {
                    id: MessageId::Int(0),
                    src: own,
                    src_ep,
                    dst: other,
                    dst_ep,
                    send_ns: Some(m.first_ns as i64).into(),
                    recv_ns: received.map(|t| t as i64).into(),
                    bytes: m.bytes,
                }
            }
            Direction::Recv => Message {
                id: MessageId::Int(0),
                src: other,
                src_ep: dst_ep,
                dst: own,
                dst_ep: src_ep,
                send_ns: MaybeNs::NONE,
                recv_ns: Some(read_at(end, m.end).unwrap_or(m.first_ns) as i64).into(),
                bytes: m.bytes,
            },
        };
        out.push(message);
    };
    for f in end.frames.iter().filter(|f| f.direction == direction) {
        let frame = &f.frame;
        let frame_end = frame.start + 9 + u64::from(frame.length);
        let m = open.entry(frame.stream).or_insert(Open {
            first_ns: f.wall_ns,
            end: frame_end,
            bytes: 0,
        });
        m.end = m.end.max(frame_end);
        m.bytes += 9 + u64::from(frame.length);
        if frame.ends_stream() {
            if let Some(m) = open.remove(&frame.stream) {
                finish(frame.stream, m, out);
            }
        }
    }
    // Streams the capture saw no end of (cut short): what was seen of them.
    let mut left: Vec<(u32, Open)> = open.into_iter().collect();
    left.sort_by_key(|(stream, _)| *stream);
    for (stream, m) in left {
        finish(stream, m, out);
    }
}

fn ports_match(local: &Ep, to: &Ep) -> bool {
    match (local, to) {
        (Ep::Inet(l), Ep::Inet(t)) => {
            l.port() == t.port() && (l.ip().is_unspecified() || l.ip() == t.ip())
        }
        (a, b) => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Call;
    use causeway_testkit::capture_logs::{log, process, stamp, stream_data, tcp_connection};

    const MS: u64 = 1_000_000;

    /// A data call and the frames it moved.
    fn call_with_frames<'a>(
        ns: u64,
        direction: Direction,
        offset: u64,
        bytes: u64,
        frames: &'a [u8],
    ) -> [Record<'a>; 2] {
        [
            stream_data(ns, 1, direction, offset, bytes),
            Record::Frames {
                at: stamp(ns),
                conn: 1,
                direction,
                offset,
                frames,
            },
        ]
    }

    fn frames(list: &[(u64, u32, u32, u8, u8)]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(start, length, stream, kind, flags) in list {
            let mut one = [0u8; Frame::LEN];
            Frame {
                start,
                length,
                stream,
                kind,
                flags,
            }
            .write(&mut one);
            out.extend_from_slice(&one);
        }
        out
    }

    #[test]
    fn calls_multiplexed_on_one_http2_connection_are_messages_of_their_own_streams() {
        let end = Frame::END_STREAM | 0x4;
        // Two requests in one write, their replies in two, the second's first.
        let requests = frames(&[
            (40, 20, 1, Frame::HEADERS, end),
            (69, 20, 3, Frame::HEADERS, end),
        ]);
        let reply_3 = frames(&[
            (9, 10, 3, Frame::HEADERS, 0x4),
            (28, 5, 3, Frame::DATA, Frame::END_STREAM),
        ]);
        let reply_1 = frames(&[(60, 20, 1, Frame::HEADERS, end)]);
        let t = 1_000 * MS;
        let client = [
            vec![
                process(1, b"client", t),
                tcp_connection(t, 1, Call::Connect, 40_000, 50_051),
            ],
            call_with_frames(t + MS, Direction::Send, 0, 100, &requests).to_vec(),
            call_with_frames(t + 6 * MS, Direction::Recv, 0, 60, &reply_3).to_vec(),
            call_with_frames(t + 9 * MS, Direction::Recv, 60, 40, &reply_1).to_vec(),
        ]
        .concat();
        let server = [
            vec![
                process(2, b"server", t),
                tcp_connection(t, 1, Call::Accept, 50_051, 40_000),
            ],
            call_with_frames(t + 2 * MS, Direction::Recv, 0, 100, &requests).to_vec(),
            call_with_frames(t + 5 * MS, Direction::Send, 0, 60, &reply_3).to_vec(),
            call_with_frames(t + 8 * MS, Direction::Send, 60, 40, &reply_1).to_vec(),
        ]
        .concat();
        let mut captured = Captured::default();
        captured.add_log(Path::new("c"), &log(&client));
        captured.add_log(Path::new("s"), &log(&server));
        let messages = captured.messages();
        let seen: Vec<(&str, &str, Option<i64>, Option<i64>)> = messages
            .iter()
            .map(|m| (&*m.src_ep, &*m.dst_ep, m.send_ns.get(), m.recv_ns.get()))
            .collect();
        let at = |ms: u64| Some((t + ms * MS) as i64);
        assert_eq!(
            seen,
            [
                ("127.0.0.1:40000#1", "127.0.0.1:50051#1", at(1), at(2)),
                ("127.0.0.1:40000#3", "127.0.0.1:50051#3", at(1), at(2)),
                ("127.0.0.1:50051#3", "127.0.0.1:40000#3", at(5), at(6)),
                ("127.0.0.1:50051#1", "127.0.0.1:40000#1", at(8), at(9)),
            ]
        );
        assert_eq!(port("127.0.0.1:50051#3"), Some(50051));
        assert_eq!(connection_of("127.0.0.1:50051#3"), "127.0.0.1:50051");
    }

    #[test]
    fn an_http2_request_whose_answer_the_capture_missed_is_still_one_message() {
        // The server alone captured: its received frames are the client's messages.
        let requests = frames(&[
            (40, 20, 1, Frame::HEADERS, Frame::END_STREAM | 0x4),
            (69, 20, 3, Frame::HEADERS, 0x4),
            (98, 2, 3, Frame::DATA, Frame::END_STREAM),
        ]);
        let t = 1_000 * MS;
        let server = [
            vec![
                process(2, b"server", t),
                tcp_connection(t, 1, Call::Accept, 50_051, 40_000),
            ],
            call_with_frames(
                t + 2 * MS,
                Direction::Recv,
                0,
                80,
                &requests[..2 * Frame::LEN],
            )
            .to_vec(),
            call_with_frames(
                t + 3 * MS,
                Direction::Recv,
                80,
                31,
                &requests[2 * Frame::LEN..],
            )
            .to_vec(),
        ]
        .concat();
        let mut captured = Captured::default();
        captured.add_log(Path::new("s"), &log(&server));
        let messages = captured.messages();
        let seen: Vec<(&str, Option<i64>)> = messages
            .iter()
            .map(|m| (&*m.src_ep, m.recv_ns.get()))
            .collect();
        // Stream 3's last byte (offset 108) came in the second read.
        assert_eq!(
            seen,
            [
                ("127.0.0.1:40000#1", Some((t + 2 * MS) as i64)),
                ("127.0.0.1:40000#3", Some((t + 3 * MS) as i64)),
            ]
        );
    }

    #[test]
    fn missing_times_read_write_and_order_as_options() {
        let line = r#"{"id":1,"src":"a","src_ep":"1.1.1.1:1","dst":"b","dst_ep":"2.2.2.2:2","send_ns":null,"recv_ns":-5,"bytes":3}"#;
        let m: Message = serde_json::from_str(line).expect("a message");
        assert_eq!((m.send_ns.get(), m.recv_ns.get()), (None, Some(-5)));
        assert_eq!(serde_json::to_string(&m).expect("written"), line);
        let times = [Some(3), None, Some(i64::MAX), Some(-1)];
        let mut as_options = times.to_vec();
        as_options.sort();
        let mut packed: Vec<MaybeNs> = times.iter().map(|&t| t.into()).collect();
        packed.sort();
        let unpacked: Vec<Option<i64>> = packed.into_iter().map(MaybeNs::get).collect();
        assert_eq!(unpacked, as_options);
        assert_eq!(std::mem::size_of::<MaybeNs>(), 8);
    }

    #[test]
    fn messages_are_found_by_id_by_position_or_through_a_map() {
        let m = |id: MessageId| Message {
            id,
            src: "a".into(),
            src_ep: "a:1".into(),
            dst: "b".into(),
            dst_ep: "b:2".into(),
            send_ns: Some(0).into(),
            recv_ns: MaybeNs::NONE,
            bytes: 1,
        };
        let numbered = [m(MessageId::Int(1)), m(MessageId::Int(2))];
        let index = MessageIndex::of(&numbered);
        assert!(index.map.is_none());
        assert_eq!(index.get(&MessageId::Int(2)), Some(1));
        assert_eq!(index.get(&MessageId::Int(3)), None);
        assert_eq!(index.get(&MessageId::Int(0)), None);
        assert_eq!(index.get(&MessageId::Text("1".into())), None);
        let given = [m(MessageId::Int(7)), m(MessageId::Text("x".into()))];
        let index = MessageIndex::of(&given);
        assert_eq!(index.get(&MessageId::Text("x".into())), Some(1));
        assert_eq!(index.get(&MessageId::Int(7)), Some(0));
        assert_eq!(index.get(&MessageId::Int(1)), None);
    }

    #[test]
    fn messages_on_ignored_ports_are_left_out_and_counted() {
        let m = |id: i64, src_ep: &str, dst_ep: &str| Message {
            id: MessageId::Int(id),
            src: "a".into(),
            src_ep: src_ep.into(),
            dst: "b".into(),
            dst_ep: dst_ep.into(),
            send_ns: Some(0).into(),
            recv_ns: MaybeNs::NONE,
            bytes: 1,
        };
        let mut messages = vec![
            m(1, "10.0.0.1:5000", "10.0.0.2:80"),
            m(2, "10.0.0.1:5001", "10.0.0.9:4318"),
            m(3, "10.0.0.9:4318", "10.0.0.1:5001"),
            m(4, "[::1]:5002", "[::1]:4318"),
        ];
        assert_eq!(leave_out_ports(&mut messages, &[4318]), 3);
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0].id, MessageId::Int(1));
    }
}

//! Capture logs followed while their processes write them, inferred a window at a time
//! (`causeway agent --captures DIR`): each pass reads what the logs gained, infers the
//! paths of the messages of the last [`CONTEXT_NS`] and what came after, and hands over
//! those whose first message falls in the window since the last pass. What is held is
//! bounded by the window: each log's header and its open connections (the records
//! inference needs to read its data), and the data records of the last passes; older
//! data and connections closed before the window are let go.
//!
//! Held records are kept as the log's own bytes and put back together as a log for
//! [`Captured::add_log`] each pass, so what is inferred is what `causeway infer` would
//! infer from the same records. A log fed from elsewhere is taken up after a restart
//! from its header and open connections ([`CaptureTail::held_logs`], then
//! [`CaptureTail::resume`]): its sender sends again only from the first data still held.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};

use causeway_model::Span;

use crate::format::{Reader, Record, MAGIC};
use crate::infer::{infer_captured, Options};
use crate::logs::{log_files, LogError};
use crate::reconcile::Captured;

/// How much before the window the messages linked start: a path's earlier messages, so
/// a message in the window is linked to its cause, not taken for a new path's first.
pub const CONTEXT_NS: u64 = 10_000_000_000;

/// Bytes read from one log per read call; a log longer than this is read in steps.
const READ_BLOCK: usize = 8 << 20;

/// The longest record the format allows, with its length.
const MAX_RECORD: usize = 2 + u16::MAX as usize;

/// Passes a log fed from elsewhere ([`CaptureTail::feed`]) is held without being fed:
/// past them it is let go (its process ended, or its sender went away); a later piece of
/// it is refused with offset 0, so its sender starts it over.
pub const FED_IDLE_PASSES: u32 = 300;

/// Capture directories followed, with what each log's window holds.
pub struct CaptureTail {
    dirs: Vec<PathBuf>,
    names: Vec<(String, String)>,
    options: Options,
    logs: BTreeMap<PathBuf, LogTail>,
    /// Paths whose first message came before this (ns) were handed over already.
    from: u64,
    passes: u64,
}

/// One log's held records.
#[derive(Default)]
struct LogTail {
    /// Bytes of the file taken (whole records).
    read: u64,
    /// Bytes after the last whole record: the start of one being written.
    partial: Vec<u8>,
    /// Whether the log's header (its first bytes, [`MAGIC`]) was read.
    started: bool,
    /// The process record and its listens, as the log holds them.
    head: Vec<u8>,
    /// Each connection's record, and when it was last used and whether it was closed.
    connections: HashMap<u64, Connection>,
    /// Data records, a run per read, each with the latest time in it and the offset in
    /// the log the bytes it came from started at.
    data: Vec<(u64, Vec<u8>, u64)>,
    /// Where the log became unreadable (bytes that are not records): it is followed no
    /// further.
    damage: Option<String>,
    /// For a log fed from elsewhere: the host its process record is given in place of
    /// the one it names, and the passes since it was last fed.
    fed: Option<Fed>,
    /// Data records stamped before the window when they arrived.
    late: Late,
}

/// A log's data records stamped before the window when they arrived, so no path they
/// begin is handed over: its host's clock is behind (or its sender fell behind) by more
/// than the time a path is given to settle, or the log was sent again (from its start,
/// or from where a restart took it up: [`CaptureTail::resume`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Late {
    /// Kept as context for later messages' paths.
    pub records: u64,
    /// Older than the window's context: not kept.
    pub skipped: u64,
    /// How far before the window the latest late record was stamped (ns).
    pub behind_ns: u64,
}

#[derive(Default)]
struct Fed {
    host: Option<String>,
    idle_passes: u32,
}

struct Connection {
    record: Vec<u8>,
    last_ns: u64,
    closed: bool,
}

/// Bytes of a log fed past what was taken of it: the offset the next bytes must start at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a gap in the log: its bytes from offset {expected} are needed first")]
pub struct Gap {
    /// The offset expected.
    pub expected: u64,
}

/// What a log fed from elsewhere needs to be taken up after a restart without its sender
/// starting it over: its header and open connections' records, and the offset its bytes
/// are needed from again (those of the data still held: the window's and its context).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldLog {
    /// The log's name.
    pub name: PathBuf,
    /// The host its sender names.
    pub host: Option<String>,
    /// The offset its bytes are needed from.
    pub offset: u64,
    /// Its header and open connections' records, as a log.
    pub records: Vec<u8>,
}

/// The paths one pass handed over.
pub struct Window {
    /// Their spans (a client and a server span per request and reply, as
    /// [`crate::infer::Inference::spans`] makes them).
    pub spans: Vec<Span>,
    /// When each path's first message was sent (ns), one per path.
    pub starts: Vec<u64>,
    /// Messages linked this pass (the window and its context).
    pub messages: usize,
    /// Logs found unreadable this pass (the log and where; those found damaged are
    /// followed no further) or that could not be read this time.
    pub damaged: Vec<(PathBuf, String)>,
}

impl CaptureTail {
    /// Follows the logs in `dirs`, naming nodes by `names` (as `causeway infer --names`),
    /// handing over the paths that begin at `from` (ns since the epoch) or later; data
    /// records older than [`CONTEXT_NS`] before it are skipped as they are read.
    pub fn new(
        dirs: Vec<PathBuf>,
        names: Vec<(String, String)>,
        options: Options,
        from: u64,
    ) -> CaptureTail {
        CaptureTail {
            dirs,
            names,
            options,
            logs: BTreeMap::new(),
            from,
            passes: 0,
        }
    }

    /// Where the next window starts: paths that began before it were handed over.
    pub fn from(&self) -> u64 {
        self.from
    }

    /// Takes the window from `from` (ns) again on the next pass: the last one's paths
    /// were not delivered. What a window needs is held for [`CONTEXT_NS`] after it.
    pub fn rewind(&mut self, from: u64) {
        self.from = self.from.min(from);
    }

    /// Bytes of records held.
    pub fn held_bytes(&self) -> usize {
        self.logs
            .values()
            .map(|t| {
                t.head.len()
                    + t.partial.len()
                    + t.connections
                        .values()
                        .map(|c| c.record.len())
                        .sum::<usize>()
                    + t.data.iter().map(|(_, run, _)| run.len()).sum::<usize>()
            })
            .sum()
    }

    /// Reads what the logs gained, infers, and hands over the paths whose first message
    /// came before `to` (ns) and since the last window; lets go of what is older than
    /// the next window's context. None when `to` is not past the window's start.
    pub fn settle(&mut self, to: u64) -> Result<Option<Window>, LogError> {
        let damaged = self.read()?;
        if to <= self.from {
            return Ok(None);
        }
        self.passes += 1;
        let mut captured = Captured::default();
        let mut log = Vec::new();
        for (path, tail) in &self.logs {
            if tail.head.is_empty() {
                continue;
            }
            tail.assemble(&mut log);
            captured.add_log(path, &log);
        }
        if !self.names.is_empty() {
            captured.name_nodes(&self.names);
        }
        let inference = infer_captured(captured, &self.options);
        // Each pass numbers its paths afresh: its own salt keeps their ids apart.
        let spans = inference.spans(self.from ^ self.passes.rotate_left(48));
        let mut first: HashMap<_, u64> = HashMap::new();
        for s in &spans {
            let start = first.entry(s.trace_id).or_insert(u64::MAX);
            *start = (*start).min(s.start);
        }
        let window = self.from..to;
        let spans: Vec<Span> = spans
            .into_iter()
            .filter(|s| first.get(&s.trace_id).is_some_and(|t| window.contains(t)))
            .collect();
        let starts = first.into_values().filter(|t| window.contains(t)).collect();
        self.from = to;
        let horizon = to.saturating_sub(CONTEXT_NS);
        for tail in self.logs.values_mut() {
            tail.let_go(horizon);
        }
        self.logs.retain(|_, t| {
            t.fed.as_mut().is_none_or(|f| {
                f.idle_passes += 1;
                f.idle_passes <= FED_IDLE_PASSES
            })
        });
        Ok(Some(Window {
            spans,
            starts,
            messages: inference.messages.len(),
            damaged,
        }))
    }

    /// Takes `bytes`, the bytes of the log `name` from `offset` on, as though read from
    /// a file: what a log's bytes arriving some other way (sent by another host's agent)
    /// add to the window; with `host`, its process is taken to run on that host (as the
    /// sender names it) whatever host the log names. Bytes already taken are skipped; a
    /// gap (an offset past what was taken, or a log first seen past its start) is refused
    /// with the offset expected. A log fed so and not fed for [`FED_IDLE_PASSES`] passes
    /// is let go.
    pub fn feed(
        &mut self,
        name: &Path,
        host: Option<&str>,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), Gap> {
        let (window, keep_after) = (self.from, self.from.saturating_sub(CONTEXT_NS));
        let tail = match self.logs.get_mut(name) {
            Some(tail) => tail,
            None if offset == 0 => self
                .logs
                .entry(name.to_path_buf())
                .or_insert_with(|| LogTail {
                    fed: Some(Fed {
                        host: host.map(str::to_string),
                        idle_passes: 0,
                    }),
                    ..LogTail::default()
                }),
            None => return Err(Gap { expected: 0 }),
        };
        if let Some(fed) = tail.fed.as_mut() {
            fed.idle_passes = 0;
        }
        if offset > tail.read {
            return Err(Gap {
                expected: tail.read,
            });
        }
        let skip = usize::try_from(tail.read - offset).unwrap_or(usize::MAX);
        let Some(new) = bytes.get(skip..).filter(|b| !b.is_empty()) else {
            return Ok(());
        };
        if tail.damage.is_none() {
            tail.take(new, tail.read, keep_after, window);
        }
        tail.read += new.len() as u64;
        Ok(())
    }

    /// The logs fed from elsewhere, readable, as [`CaptureTail::resume`] takes them up.
    pub fn held_logs(&self) -> Vec<HeldLog> {
        self.logs
            .iter()
            .filter(|(_, t)| t.damage.is_none() && !t.head.is_empty())
            .filter_map(|(name, t)| {
                let fed = t.fed.as_ref()?;
                // Sent again from the first bytes whose data is still held: the window's
                // paths and their context are read anew. From the start, it is sent whole.
                let taken = t.read - t.partial.len() as u64;
                let offset = t.data.iter().map(|(_, _, at)| *at).fold(taken, u64::min);
                if offset == 0 {
                    return None;
                }
                let mut records = t.head.clone();
                for c in t.connections.values().filter(|c| !c.closed) {
                    records.extend_from_slice(&c.record);
                }
                Some(HeldLog {
                    name: name.clone(),
                    host: fed.host.clone(),
                    offset,
                    records,
                })
            })
            .collect()
    }

    /// Takes up a log fed from elsewhere where [`CaptureTail::held_logs`] left it (before
    /// a restart): its next bytes are taken from `log.offset`. A log whose records do not
    /// read is not taken up (its sender starts it over).
    pub fn resume(&mut self, log: HeldLog) {
        let mut tail = LogTail {
            fed: Some(Fed {
                host: log.host,
                idle_passes: 0,
            }),
            ..LogTail::default()
        };
        // Its records are a header and connections: no data to keep, none late.
        tail.take(&log.records, 0, u64::MAX, 0);
        if tail.damage.is_some() || !tail.partial.is_empty() || tail.head.is_empty() {
            return;
        }
        tail.read = log.offset;
        self.logs.insert(log.name, tail);
    }

    /// Whether the log `name` is held.
    pub fn holds(&self, name: &Path) -> bool {
        self.logs.contains_key(name)
    }

    /// Logs held.
    pub fn logs(&self) -> usize {
        self.logs.len()
    }

    /// Adds rules naming nodes (as `causeway infer --names`) to those given at the start;
    /// a rule held already is not added twice.
    pub fn add_names(&mut self, rules: &[(String, String)]) {
        for rule in rules {
            if !self.names.contains(rule) {
                self.names.push(rule.clone());
            }
        }
    }

    /// Rules naming nodes in force.
    pub fn names(&self) -> &[(String, String)] {
        &self.names
    }

    /// The logs with data records that arrived stamped before the window, and how many.
    pub fn late(&self) -> impl Iterator<Item = (&Path, Late)> {
        self.logs
            .iter()
            .filter(|(_, t)| t.late.records + t.late.skipped > 0)
            .map(|(p, t)| (p.as_path(), t.late))
    }

    /// Where each log that became unreadable did.
    pub fn damaged(&self) -> impl Iterator<Item = (&Path, &str)> {
        self.logs
            .iter()
            .filter_map(|(p, t)| Some((p.as_path(), t.damage.as_deref()?)))
    }

    /// Reads what each log gained; returns the logs newly found damaged, or not read.
    fn read(&mut self) -> Result<Vec<(PathBuf, String)>, LogError> {
        if self.dirs.is_empty() {
            return Ok(Vec::new());
        }
        let mut files = Vec::new();
        for dir in &self.dirs {
            match log_files(dir) {
                Ok(found) => files.extend(found),
                // A directory not made yet: its processes have not started.
                Err(LogError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        // A log removed (rotated away by its owner) is let go.
        let present: std::collections::HashSet<&PathBuf> = files.iter().collect();
        let dirs = &self.dirs;
        self.logs
            .retain(|path, _| present.contains(path) || !dirs.iter().any(|d| path.starts_with(d)));
        let (window, keep_after) = (self.from, self.from.saturating_sub(CONTEXT_NS));
        let mut damaged = Vec::new();
        for path in files {
            let tail = self.logs.entry(path.clone()).or_default();
            if tail.damage.is_some() {
                continue;
            }
            if let Err(e) = tail.read(&path, keep_after, window) {
                // Read again next pass (the file may be being replaced); said meanwhile.
                damaged.push((path, format!("not read this pass: {e}")));
                continue;
            }
            if let Some(d) = &tail.damage {
                damaged.push((path, d.clone()));
            }
        }
        Ok(damaged)
    }
}

impl LogTail {
    /// Reads the file's new bytes, keeping the records inference reads; data records sent
    /// before `keep_after` (ns) are skipped, and those before `from` (the window) counted
    /// late.
    fn read(&mut self, path: &Path, keep_after: u64, from: u64) -> std::io::Result<()> {
        let mut file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        if len < self.read {
            // A shorter file under the same name is another log: start over.
            *self = LogTail::default();
        }
        file.seek(SeekFrom::Start(self.read))?;
        let mut block = Vec::new();
        loop {
            block.clear();
            let n = file
                .by_ref()
                .take(READ_BLOCK as u64)
                .read_to_end(&mut block)?;
            if n == 0 {
                return Ok(());
            }
            self.read += n as u64;
            self.take(&block, self.read - n as u64, keep_after, from);
            if self.damage.is_some() {
                return Ok(());
            }
        }
    }

    /// Takes the records of `bytes` (the log's next bytes, from offset `at`), counting
    /// the data records stamped before `from` late.
    fn take(&mut self, bytes: &[u8], at: u64, keep_after: u64, from: u64) {
        // Where the bytes not yet made into records start.
        let run_offset = at - self.partial.len() as u64;
        let mut unread = std::mem::take(&mut self.partial);
        unread.extend_from_slice(bytes);
        if !self.started {
            if unread.len() < MAGIC.len() && MAGIC.starts_with(&unread) {
                self.partial = unread;
                return;
            }
            if !unread.starts_with(MAGIC) {
                self.damage = Some("at byte 0: not a capture log (no CWSOCK01 header)".into());
                return;
            }
            self.started = true;
            unread.drain(..MAGIC.len());
        }
        // The reader wants a whole log: the header, then the bytes not read yet.
        let mut buf = Vec::with_capacity(MAGIC.len() + unread.len());
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&unread);
        drop(unread);
        let mut reader = Reader::new(&buf);
        let mut offset = reader.offset() as usize;
        let mut data = Vec::new();
        let mut latest = 0;
        while let Some(record) = reader.next() {
            let end = reader.offset() as usize;
            let raw = &buf[offset..end];
            offset = end;
            match record {
                Record::Process {
                    pid,
                    ppid,
                    origin,
                    at,
                    exe,
                    args,
                    ..
                } if self.fed.as_ref().is_some_and(|f| f.host.is_some()) => {
                    let host = self.fed.as_ref().and_then(|f| f.host.as_deref());
                    let renamed = Record::Process {
                        pid,
                        ppid,
                        origin,
                        at,
                        host: host.unwrap_or_default().as_bytes(),
                        exe,
                        args,
                    };
                    let mut out = vec![0; MAX_RECORD];
                    // A host name long enough not to fit keeps the record as it was.
                    let raw = match renamed.encode(&mut out) {
                        Some(n) => &out[..n],
                        None => raw,
                    };
                    if self.head.is_empty() {
                        self.head.extend_from_slice(MAGIC);
                    }
                    self.head.extend_from_slice(raw);
                }
                // Of the binds, inference reads the listens (a server's ports); others
                // would pile up in a process that binds a socket per call.
                Record::Process { .. }
                | Record::Bind {
                    call: crate::format::Call::Listen,
                    ..
                } => {
                    if self.head.is_empty() {
                        self.head.extend_from_slice(MAGIC);
                    }
                    self.head.extend_from_slice(raw);
                }
                Record::Connection { conn, at, .. } => {
                    self.connections.insert(
                        conn,
                        Connection {
                            record: raw.to_vec(),
                            last_ns: at.wall_ns,
                            closed: false,
                        },
                    );
                }
                Record::Data { conn, at, .. } => {
                    if let Some(c) = self.connections.get_mut(&conn) {
                        c.last_ns = c.last_ns.max(at.wall_ns);
                    }
                    if at.wall_ns >= keep_after {
                        data.extend_from_slice(raw);
                        latest = latest.max(at.wall_ns);
                    }
                    if at.wall_ns < from {
                        if at.wall_ns >= keep_after {
                            self.late.records += 1;
                        } else {
                            self.late.skipped += 1;
                        }
                        self.late.behind_ns = from - at.wall_ns;
                    }
                }
                // A call's HTTP/2 frames go with its data record.
                Record::Frames { at, .. } if at.wall_ns >= keep_after => {
                    data.extend_from_slice(raw);
                    latest = latest.max(at.wall_ns);
                }
                Record::Close {
                    conn,
                    call: crate::format::Call::Close,
                    at,
                    ..
                } => {
                    if let Some(c) = self.connections.get_mut(&conn) {
                        c.closed = true;
                        c.last_ns = c.last_ns.max(at.wall_ns);
                    }
                }
                _ => {}
            }
        }
        if !data.is_empty() {
            self.data.push((latest, data, run_offset));
        }
        let rest = &buf[offset..];
        match reader.damage() {
            // A record still being written: kept for the next read.
            _ if rest.len() < MAX_RECORD && is_cut(rest) => self.partial = rest.to_vec(),
            Some(d) => {
                self.damage = Some(d.to_string());
                self.partial.clear();
            }
            None => self.partial.clear(),
        }
    }

    /// Writes the held records as one log into `out`.
    fn assemble(&self, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&self.head);
        for c in self.connections.values() {
            out.extend_from_slice(&c.record);
        }
        for (_, run, _) in &self.data {
            out.extend_from_slice(run);
        }
    }

    /// Lets go of data sent before `horizon` (ns) and of connections closed before it.
    fn let_go(&mut self, horizon: u64) {
        self.data.retain(|(latest, _, _)| *latest >= horizon);
        self.connections
            .retain(|_, c| !(c.closed && c.last_ns < horizon));
    }
}

/// Whether `rest` (what follows the last whole record) is the start of a record not yet
/// all written: its length says more bytes are to come.
fn is_cut(rest: &[u8]) -> bool {
    match rest {
        [] => true,
        [_] => true,
        [a, b, body @ ..] => body.len() < usize::from(u16::from_le_bytes([*a, *b])),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::io::Write as _;

    use super::*;
    use crate::format::{Call, Direction, Origin};
    use crate::infer::{infer, Inputs};
    use causeway_testkit::capture_logs::{
        loopback as local, records as encode, stamp, stream_data as data,
        tcp_connection as connection,
    };

    const S: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;
    /// When the made-up captures begin (ns since the epoch).
    const T0: u64 = 1_000_000 * S;
    const EVERY: u64 = 100 * MS;

    /// A client calling a server, which calls a backend nobody captured, a request every
    /// [`EVERY`]: each log's records of requests `range`, in the order their processes
    /// wrote them (the logs' headers with the first request).
    struct Shop {
        client: Vec<u8>,
        server: Vec<u8>,
    }

    fn shop(range: std::ops::Range<u64>) -> Shop {
        let mut client = Vec::new();
        let mut server = Vec::new();
        if range.start == 0 {
            client.extend_from_slice(MAGIC);
            server.extend_from_slice(MAGIC);
            client.extend(encode(&[
                Record::Process {
                    pid: 1,
                    ppid: 0,
                    origin: Origin::Start,
                    at: stamp(T0),
                    host: b"h",
                    exe: b"/bin/client",
                    args: b"client",
                },
                connection(T0, 1, Call::Connect, 40_000, 80),
            ]));
            server.extend(encode(&[
                Record::Process {
                    pid: 2,
                    ppid: 0,
                    origin: Origin::Start,
                    at: stamp(T0),
                    host: b"h",
                    exe: b"/bin/server",
                    args: b"server",
                },
                Record::Bind {
                    at: stamp(T0),
                    call: Call::Listen,
                    fd: 3,
                    local: local(80),
                    errno: 0,
                },
                connection(T0, 1, Call::Accept, 80, 40_000),
                connection(T0, 2, Call::Connect, 40_001, 90),
            ]));
        }
        for i in range {
            let t = T0 + S + i * EVERY;
            client.extend(encode(&[
                data(t, 1, Direction::Send, i * 100, 100),
                data(t + 1_300_000, 1, Direction::Recv, i * 60, 60),
            ]));
            server.extend(encode(&[
                data(t + 100_000, 1, Direction::Recv, i * 100, 100),
                data(t + 200_000, 2, Direction::Send, i * 50, 50),
                data(t + 1_000_000, 2, Direction::Recv, i * 20, 20),
                data(t + 1_200_000, 1, Direction::Send, i * 60, 60),
            ]));
        }
        Shop { client, server }
    }

    /// A directory of its own for a test, removed after.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new() -> Scratch {
            static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir =
                std::env::temp_dir().join(format!("causeway-tail-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("scratch dir");
            Scratch(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The server's log of `requests` requests.
    pub(super) fn shop_log(requests: u64) -> Vec<u8> {
        shop(0..requests).server
    }

    fn append(path: &Path, bytes: &[u8]) {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open")
            .write_all(bytes)
            .expect("append");
    }

    #[test]
    fn records_stamped_before_the_window_are_counted_late_and_begin_no_path() {
        // A host whose clock is behind: its records arrive stamped 1-21 s after T0 when
        // the window has reached T0 + 15 s.
        let mut tail = CaptureTail::new(vec![], vec![], Options::default(), T0 + 15 * S);
        let part = shop(0..200);
        let (client, server) = (Path::new("c.sockcap"), Path::new("s.sockcap"));
        tail.feed(client, None, 0, &part.client).expect("client");
        tail.feed(server, None, 0, &part.server).expect("server");
        let late: BTreeMap<&Path, Late> = tail.late().collect();
        // Before T0 + 5 s (the window's context): requests 0-39, skipped; the rest before
        // T0 + 15 s, requests 40-139, kept as context. Two data records a request in the
        // client's log, four in the server's.
        assert_eq!((late[client].skipped, late[client].records), (80, 200));
        assert_eq!((late[server].skipped, late[server].records), (160, 400));
        assert!(late[client].behind_ns > 0 && late[client].behind_ns < S);
        let window = tail.settle(T0 + 30 * S).expect("pass").expect("a window");
        // Only the paths begun in the window: requests 140-199.
        assert_eq!(window.starts.len(), 60);
        assert!(window.starts.iter().all(|&t| t >= T0 + 15 * S));
    }

    /// Each path as the set of its spans' (service, kind, name), so paths made in
    /// different passes (their ids differ) compare.
    fn shapes(spans: &[Span]) -> Vec<BTreeSet<String>> {
        let mut by_trace: BTreeMap<_, BTreeSet<String>> = BTreeMap::new();
        for s in spans {
            by_trace
                .entry(s.trace_id)
                .or_default()
                .insert(format!("{} {:?} {}", s.service, s.kind, s.name));
        }
        let mut all: Vec<_> = by_trace.into_values().collect();
        all.sort();
        all
    }

    #[test]
    fn paths_are_handed_over_once_each_as_a_whole_capture_infers_them() {
        let dir = Scratch::new();
        let (client, server) = (dir.path().join("c.sockcap"), dir.path().join("s.sockcap"));
        let mut tail = CaptureTail::new(vec![dir.path().into()], vec![], Options::default(), 0);
        let mut handed = Vec::new();
        let mut starts = Vec::new();
        // 40 s of requests written 5 s at a time, each write cut inside a record, the
        // rest of it written before the next pass; a pass 3 s behind the writes.
        let per_write = 5 * S / EVERY;
        for w in 0..8 {
            let part = shop(w * per_write..(w + 1) * per_write);
            for (path, bytes) in [(&client, &part.client), (&server, &part.server)] {
                let cut = bytes.len() - 5;
                append(path, &bytes[..cut]);
                // The pass before the record is whole keeps its start for the next.
                if w == 3 {
                    tail.settle(T0).expect("pass");
                }
                append(path, &bytes[cut..]);
            }
            let written_to = T0 + S + (w + 1) * per_write * EVERY;
            if let Some(window) = tail.settle(written_to - 3 * S).expect("pass") {
                assert!(window.damaged.is_empty(), "{:?}", window.damaged);
                handed.extend(window.spans);
                starts.extend(window.starts);
            }
        }
        let last = tail.settle(u64::MAX).expect("pass").expect("a last window");
        handed.extend(last.spans);
        starts.extend(last.starts);

        let whole = infer(
            &Inputs {
                capture_dirs: vec![dir.path().into()],
                ..Inputs::default()
            },
            &Options::default(),
            |_| {},
        )
        .expect("infer");
        let expected = whole.spans(1);
        assert_eq!(starts.len(), 8 * per_write as usize);
        assert_eq!(
            starts.iter().collect::<BTreeSet<_>>().len(),
            starts.len(),
            "a path handed over twice"
        );
        assert_eq!(shapes(&handed), shapes(&expected));
        // Each path: the client's call, the server's span, its call to the backend and
        // the backend's span.
        assert!(
            shapes(&handed).iter().all(|p| p.len() == 4),
            "{:?}",
            shapes(&handed).first()
        );
    }

    #[test]
    fn what_is_held_stays_within_the_window_however_long_it_runs() {
        let dir = Scratch::new();
        let (client, server) = (dir.path().join("c.sockcap"), dir.path().join("s.sockcap"));
        let mut tail = CaptureTail::new(vec![dir.path().into()], vec![], Options::default(), 0);
        let per_write = S / EVERY;
        let mut held = Vec::new();
        let mut paths = 0;
        for w in 0..120 {
            let part = shop(w * per_write..(w + 1) * per_write);
            append(&client, &part.client);
            append(&server, &part.server);
            let written_to = T0 + S + (w + 1) * per_write * EVERY;
            if let Some(window) = tail.settle(written_to - 3 * S).expect("pass") {
                paths += window.starts.len();
                held.push((window.messages, tail.held_bytes()));
            }
        }
        // A request is 4 messages; the window's context is 10 s, then the 3 s settling
        // and the second just written: 14 s of 10 requests a second.
        let most = held.iter().map(|h| h.0).max().unwrap_or(0);
        assert_eq!(most, 4 * 10 * 14, "{held:?}");
        let late = &held[held.len() / 2..];
        let bytes = late.iter().map(|h| h.1);
        assert!(
            bytes.clone().max().unwrap_or(0) <= bytes.min().unwrap_or(0) + 4096,
            "{late:?}"
        );
        assert_eq!(paths as u64, 117 * per_write);
    }

    #[test]
    fn a_damaged_log_is_named_once_and_the_others_still_infer() {
        let dir = Scratch::new();
        let part = shop(0..50);
        // The header arrives a few bytes at a time.
        let (client, server) = (dir.path().join("c.sockcap"), dir.path().join("s.sockcap"));
        let mut tail = CaptureTail::new(vec![dir.path().into()], vec![], Options::default(), 0);
        append(&client, &part.client[..3]);
        append(&server, &part.server);
        assert!(tail.settle(0).expect("pass").is_none());
        append(&client, &part.client[3..]);
        let garbled = dir.path().join("g.sockcap");
        append(&garbled, MAGIC);
        // A whole record of an unknown kind: more bytes cannot make it readable.
        append(&garbled, &[4, 0, 0xee, 1, 2, 3, 9, 9, 9]);
        let other = dir.path().join("x.sockcap");
        append(&other, b"GET / HTTP/1.1\r\n");
        let window = tail.settle(T0 + 60 * S).expect("pass").expect("a window");
        let damaged: Vec<&Path> = window.damaged.iter().map(|d| d.0.as_path()).collect();
        assert_eq!(damaged, [garbled.as_path(), other.as_path()]);
        assert!(window.damaged[1].1.contains("not a capture log"));
        assert_eq!(window.starts.len(), 50);
        let again = tail.settle(T0 + 61 * S).expect("pass").expect("a window");
        assert!(again.damaged.is_empty() && again.starts.is_empty());
        // A directory not made yet is no error: its processes have not started.
        let mut early = CaptureTail::new(
            vec![dir.path().join("later")],
            vec![],
            Options::default(),
            0,
        );
        assert!(early
            .settle(T0)
            .expect("pass")
            .expect("window")
            .spans
            .is_empty());
    }

    #[test]
    fn fed_bytes_infer_as_read_ones_and_a_gap_is_refused() {
        let part = shop(0..100);
        let mut tail = CaptureTail::new(vec![], vec![], Options::default(), 0);
        let (client, server) = (Path::new("h/c.sockcap"), Path::new("h/s.sockcap"));
        // A log first seen past its start cannot be read: its header is needed.
        assert_eq!(
            tail.feed(client, None, 10, &part.client[10..]),
            Err(Gap { expected: 0 })
        );
        let cut = part.client.len() / 2 + 3;
        tail.feed(client, None, 0, &part.client[..cut])
            .expect("fed");
        // Sent again with more (a retry after a lost answer): the new part is taken.
        tail.feed(client, None, 0, &part.client[..cut + 7])
            .expect("fed");
        assert_eq!(
            tail.feed(client, None, cut as u64 + 20, &part.client[cut + 20..]),
            Err(Gap {
                expected: cut as u64 + 7
            })
        );
        tail.feed(client, None, cut as u64 + 7, &part.client[cut + 7..])
            .expect("fed");
        tail.feed(server, None, 0, &part.server).expect("fed");
        let window = tail.settle(u64::MAX).expect("pass").expect("a window");
        assert_eq!(window.starts.len(), 100);
        assert!(shapes(&window.spans).iter().all(|p| p.len() == 4));
        assert_eq!(tail.damaged().count(), 0);
        tail.feed(Path::new("h/x.sockcap"), None, 0, b"GET / HTTP/1.1\r\n")
            .expect("fed");
        let named: Vec<_> = tail.damaged().map(|(p, _)| p.to_path_buf()).collect();
        assert_eq!(named, [Path::new("h/x.sockcap")]);
    }

    #[test]
    fn a_fed_log_runs_on_the_host_its_sender_names() {
        let part = shop(0..10);
        let mut tail = CaptureTail::new(vec![], vec![], Options::default(), 0);
        tail.feed(Path::new("c.sockcap"), Some("web-7"), 0, &part.client)
            .expect("fed");
        tail.feed(Path::new("s.sockcap"), None, 0, &part.server)
            .expect("fed");
        let window = tail.settle(u64::MAX).expect("pass").expect("a window");
        let hosts = |pid: u32| -> BTreeSet<String> {
            window
                .spans
                .iter()
                .filter(|s| s.pid == pid)
                .map(|s| s.host.to_string())
                .collect()
        };
        // The client's host renamed by its sender; the server's as its log names it.
        assert_eq!(hosts(1), BTreeSet::from(["web-7".to_string()]));
        assert_eq!(hosts(2), BTreeSet::from(["h".to_string()]));
    }

    #[test]
    fn a_fed_log_no_longer_fed_is_let_go_and_then_started_over() {
        let part = shop(0..10);
        let mut tail = CaptureTail::new(vec![], vec![], Options::default(), 0);
        let (client, server) = (Path::new("c.sockcap"), Path::new("s.sockcap"));
        tail.feed(client, None, 0, &part.client).expect("fed");
        tail.feed(server, None, 0, &part.server).expect("fed");
        let end = part.server.len() as u64;
        for pass in 0..FED_IDLE_PASSES {
            tail.settle(T0 + u64::from(pass) + 1).expect("pass");
            // The server's sender still sends (nothing new).
            tail.feed(server, None, end, &[]).expect("fed");
        }
        assert_eq!(tail.logs(), 2);
        tail.settle(T0 + S).expect("pass");
        assert_eq!(tail.logs(), 1, "the client's log, idle, is let go");
        assert_eq!(
            tail.feed(client, None, part.client.len() as u64, b"more"),
            Err(Gap { expected: 0 })
        );
    }

    #[test]
    fn a_window_not_delivered_is_taken_again() {
        let dir = Scratch::new();
        let part = shop(0..100);
        append(&dir.path().join("c.sockcap"), &part.client);
        append(&dir.path().join("s.sockcap"), &part.server);
        let mut tail = CaptureTail::new(vec![dir.path().into()], vec![], Options::default(), 0);
        let first = tail.settle(T0 + 6 * S).expect("pass").expect("a window");
        assert_eq!(first.starts.len(), 50);
        // The collector was down: the same paths again, then the rest.
        tail.rewind(0);
        let again = tail.settle(T0 + 7 * S).expect("pass").expect("a window");
        assert_eq!(again.starts.len(), 60);
        let mut firsts = first.starts.clone();
        firsts.sort_unstable();
        let mut agains = again.starts[..].to_vec();
        agains.sort_unstable();
        assert_eq!(firsts[..], agains[..50]);
    }

    #[test]
    fn a_fed_log_taken_up_after_a_restart_goes_on_from_where_it_was_taken() {
        let part = shop(0..600);
        let (client, server) = (Path::new("c.sockcap"), Path::new("s.sockcap"));
        // As agents send them: in pieces.
        let feed_all = |tail: &mut CaptureTail, c: &[u8], s: &[u8], at: (u64, u64)| {
            for (name, host, log, at) in [(client, None, c, at.0), (server, Some("db-1"), s, at.1)]
            {
                for (k, piece) in log.chunks(1000).enumerate() {
                    let offset = at + 1000 * k as u64;
                    tail.feed(name, host, offset, piece).expect("fed");
                }
            }
        };
        // Cut inside a record: its start waits for the rest.
        let (c_cut, s_cut) = (part.client.len() / 2 + 5, part.server.len() / 2 + 5);
        let mut before = CaptureTail::new(vec![], vec![], Options::default(), 0);
        feed_all(
            &mut before,
            &part.client[..c_cut],
            &part.server[..s_cut],
            (0, 0),
        );
        let first = before.settle(T0 + 20 * S).expect("pass").expect("a window");
        let held = before.held_logs();
        assert_eq!(held.len(), 2);
        let offsets: Vec<u64> = held.iter().map(|l| l.offset).collect();
        assert!(offsets[0] < c_cut as u64 && offsets[1] < s_cut as u64);
        // Headers and open connections only: a few hundred bytes, not the data.
        assert!(held.iter().all(|l| l.records.len() < 400), "{held:?}");
        assert_eq!(held[1].host.as_deref(), Some("db-1"));

        let mut after = CaptureTail::new(vec![], vec![], Options::default(), before.from());
        for log in held {
            after.resume(log);
        }
        assert_eq!(after.logs(), 2);
        // A sender sending on from its end is told where the server's take ends.
        assert_eq!(
            after.feed(client, None, c_cut as u64, &part.client[c_cut..]),
            Err(Gap {
                expected: offsets[0]
            })
        );
        let (c_at, s_at) = (offsets[0] as usize, offsets[1] as usize);
        feed_all(
            &mut after,
            &part.client[c_at..],
            &part.server[s_at..],
            (offsets[0], offsets[1]),
        );
        let rest = after.settle(u64::MAX).expect("pass").expect("a window");
        // Every request once, each path whole, on the hosts their senders named.
        assert_eq!(first.starts.len() + rest.starts.len(), 600);
        assert!(shapes(&rest.spans).iter().all(|p| p.len() == 4));
        assert!(rest.spans.iter().all(|s| s.pid != 2 || &*s.host == "db-1"));
    }

    #[test]
    fn a_log_whose_held_records_do_not_read_is_started_over() {
        let mut tail = CaptureTail::new(vec![], vec![], Options::default(), 0);
        tail.resume(HeldLog {
            name: "x.sockcap".into(),
            host: None,
            offset: 1000,
            records: b"CWSOCK01 and then not records".to_vec(),
        });
        assert_eq!(tail.logs(), 0);
        assert_eq!(
            tail.feed(Path::new("x.sockcap"), None, 1000, b"more"),
            Err(Gap { expected: 0 })
        );
    }

    #[test]
    fn a_restart_skips_what_came_before_its_window() {
        let dir = Scratch::new();
        let part = shop(0..600);
        append(&dir.path().join("c.sockcap"), &part.client);
        append(&dir.path().join("s.sockcap"), &part.server);
        // Resumed at 40 s: the first 30 s are not held, the last 20 are handed over.
        let from = T0 + S + 40 * S;
        let mut tail = CaptureTail::new(vec![dir.path().into()], vec![], Options::default(), from);
        let window = tail.settle(u64::MAX).expect("pass").expect("a window");
        assert_eq!(window.starts.len(), 200);
        assert!(window.starts.iter().all(|s| *s >= from));
        assert_eq!(window.messages, 4 * 300);
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// However a log's bytes arrive, what is held is what the whole log holds; bytes
        /// that are not a log never panic and are named.
        #[test]
        fn a_log_read_in_any_pieces_holds_what_it_holds_whole(
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
            junk in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let log = tests::shop_log(40);
            let mut whole = LogTail::default();
            whole.take(&log, 0, 0, 0);
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(log.len() + 1)).collect();
            at.sort_unstable();
            at.push(log.len());
            let mut pieces = LogTail::default();
            let mut from = 0;
            for to in at {
                pieces.take(&log[from..to], from as u64, 0, 0);
                from = to;
            }
            prop_assert!(pieces.damage.is_none() && pieces.partial.is_empty());
            prop_assert_eq!(&whole.head, &pieces.head);
            let data = |t: &LogTail| t.data.iter().flat_map(|(_, run, _)| run.clone()).collect::<Vec<u8>>();
            prop_assert_eq!(data(&whole), data(&pieces));
            let connections = |t: &LogTail| {
                let mut c: Vec<Vec<u8>> = t.connections.values().map(|c| c.record.clone()).collect();
                c.sort();
                c
            };
            prop_assert_eq!(connections(&whole), connections(&pieces));
            let mut garbled = LogTail::default();
            garbled.take(&junk, 0, 0, 0);
            garbled.take(&junk, junk.len() as u64, 0, 0);
            prop_assert!(garbled.partial.len() < MAX_RECORD);
        }
    }
}

//! Logs read as a run of time windows of bounded size, so that memory is bounded by a
//! window and the requests open across its end, not by the logs.
//!
//! The files are read as streams (gzip through its decoder), a line ahead each, and merged
//! by time; a window takes whole lines (a line with its untimed continuation) until it
//! holds its bytes (`--window-mb`, 64 MiB), then cuts before the next later time. Its last
//! stretch, the overlap (the last 10 s, at most half a window; one time for every file, so
//! that each node's stretch is the same), is read again at the start of the next window as
//! context: the stitching walk reads lines in time order and decides from the past alone,
//! so a line of the next window sees the requests it may continue, and a request seen in
//! both windows keeps one id (see [`Window::context`]). Each window is read, ranked,
//! linked and stitched on its own; the walk is given the context lines' requests (each a
//! request of its own in the walk, so later lines tie to them as they would have), and
//! `Numbering` carries request numbers across: a window's request takes the number of its
//! context lines, else the next one, in order of its first new line. Requests longer than
//! the overlap are split. Logs that fit in one window are read whole, in parallel per
//! file.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, BufRead};

use foldhash::{HashMap, HashSet};

use crate::corpus::{line_time, Corpus, FileFormats, ReadCounts, MAX_LINE};
use crate::format::Format;

/// A file read as a stream.
pub struct Stream {
    /// The name reported for the file.
    pub name: String,
    /// The file's lines, decompressed.
    pub reader: Box<dyn BufRead + Send>,
}

/// How windows are cut.
#[derive(Clone, Copy, Debug)]
pub struct WindowOptions {
    /// A window's bytes, its context included.
    pub max_bytes: usize,
    /// How far back in time the next window re-reads.
    pub overlap_ns: i64,
}

/// Every file's lines of one window.
#[derive(Debug, Default)]
pub struct Window {
    /// Each file's name and its lines in this window (every file, in the streams' order).
    pub files: Vec<(String, Vec<u8>)>,
    /// The number of each file's first line here.
    pub first_lines: Vec<u32>,
    /// Each file's first line new in this window: the lines before it were read by the
    /// window before too (the overlap), which gave them their requests.
    pub new_from: Vec<u32>,
    /// Each file's first line the next window reads again (past the last: none).
    pub overlap_from: Vec<u32>,
    /// What went wrong reading (a stream cut short): read up to there.
    pub warnings: Vec<String>,
    /// What reading found in the new lines (none: the window is the whole of the logs,
    /// and its corpus counts them).
    pub counts: Option<ReadCounts>,
}

impl Window {
    /// True if line `number` of file `file` is context: read by the window before, not
    /// new here.
    pub fn context(&self, file: u32, number: u32) -> bool {
        self.new_from
            .get(file as usize)
            .is_some_and(|&from| number < from)
    }

    /// True if line `number` of file `file` is read again by the next window.
    pub fn overlapped(&self, file: u32, number: u32) -> bool {
        self.overlap_from
            .get(file as usize)
            .is_some_and(|&from| number >= from)
    }
}

/// A line with the lines without a time after it (its continuation, such as a stack
/// trace's frames): what a window takes or leaves whole.
struct Group {
    bytes: Vec<u8>,
    time: Option<i64>,
    first_line: u32,
    lines: u32,
}

/// One file's stream, read a group ahead.
struct FileState {
    name: String,
    reader: Box<dyn BufRead + Send>,
    /// The number of the next line read.
    next_line: u32,
    had_time: bool,
    /// The next group, whole.
    head: Option<Group>,
    /// A line read past the head group (the start of the one after).
    ahead: Option<Group>,
    done: bool,
    /// This window's lines so far: bytes, and each group's (start, time, first line).
    bytes: Vec<u8>,
    groups: Vec<(usize, Option<i64>, u32)>,
    first_line: u32,
    /// The number of the line after the last one a window took.
    taken_through: u32,
    /// How the lines read since the last window were written.
    formats: FileFormats,
}

/// Windows over merged streams.
pub struct Windows {
    files: Vec<FileState>,
    format: Option<Format>,
    options: WindowOptions,
    line: Vec<u8>,
    warnings: Vec<String>,
    counts: ReadCounts,
    /// Files with a head, by its time (untimed first) then file order: the merge.
    queue: BinaryHeap<Reverse<(i64, usize)>>,
    started: bool,
    finished: bool,
}

impl Windows {
    /// Windows over `streams`, their lines read with `format` where the detection does not know them.
    pub fn new(streams: Vec<Stream>, format: Option<Format>, options: WindowOptions) -> Windows {
        Windows {
            files: streams
                .into_iter()
                .map(|s| FileState {
                    name: s.name,
                    reader: s.reader,
                    next_line: 1,
                    had_time: false,
                    head: None,
                    ahead: None,
                    done: false,
                    bytes: Vec::new(),
                    groups: Vec::new(),
                    first_line: 1,
                    taken_through: 1,
                    formats: FileFormats::default(),
                })
                .collect(),
            format,
            options,
            line: Vec::new(),
            warnings: Vec::new(),
            counts: ReadCounts::default(),
            queue: BinaryHeap::new(),
            started: false,
            finished: false,
        }
    }

    /// Reads file `f`'s next line into a group of its own; none at the end.
    fn read_line(&mut self, f: usize) -> Option<Group> {
        let file = &mut self.files[f];
        if file.done {
            return None;
        }
        self.line.clear();
        match read_capped(&mut file.reader, &mut self.line, MAX_LINE + 1) {
            Ok(0) => {
                file.done = true;
                return None;
            }
            Ok(_) => {}
            Err(e) => {
                self.warnings
                    .push(format!("{}: {e}: read up to the damage", file.name));
                file.done = true;
                return None;
            }
        }
        if self.line.last() != Some(&b'\n') {
            self.line.push(b'\n');
        }
        let content = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
        let content = content.strip_suffix(b"\r").unwrap_or(content);
        let time = if content.is_empty() {
            None
        } else {
            self.counts.lines += 1;
            if content.len() > MAX_LINE {
                self.counts.cut += 1;
            }
            let text = String::from_utf8_lossy(&content[..content.len().min(MAX_LINE)]);
            if matches!(text, std::borrow::Cow::Owned(_)) {
                self.counts.lossy += 1;
            }
            let (time, format) = line_time(&text, self.format.as_ref());
            // As the corpus counts it: an untimed line continues the one before once
            // the file has shown a time.
            file.formats.count(format, time.is_some() || file.had_time);
            time
        };
        let number = file.next_line;
        file.next_line = file.next_line.saturating_add(1);
        Some(Group {
            bytes: self.line.clone(),
            time,
            first_line: number,
            lines: 1,
        })
    }

    /// Makes file `f`'s head a whole group: its line and the untimed lines after it.
    fn fill(&mut self, f: usize) {
        if self.files[f].head.is_some() {
            return;
        }
        let mut head = match self.files[f].ahead.take() {
            Some(g) => g,
            None => match self.read_line(f) {
                Some(g) => g,
                None => return,
            },
        };
        self.files[f].had_time |= head.time.is_some();
        // As the corpus reads them: an untimed line continues the line before once the
        // file has shown a time.
        while self.files[f].had_time {
            match self.read_line(f) {
                Some(next) if next.time.is_none() => {
                    if next.bytes.iter().any(|&b| b != b'\n' && b != b'\r') {
                        self.counts.continuations += 1;
                    }
                    head.bytes.extend_from_slice(&next.bytes);
                    head.lines += 1;
                }
                next => {
                    self.files[f].ahead = next;
                    break;
                }
            }
        }
        self.files[f].head = Some(head);
    }

    /// The file whose head comes first in time (untimed lines first, then file order).
    fn earliest(&mut self) -> Option<usize> {
        if !self.started {
            self.started = true;
            for f in 0..self.files.len() {
                self.queue_head(f);
            }
        }
        self.queue.peek().map(|&Reverse((_, f))| f)
    }

    /// Reads file `f`'s next group and queues the file by its time.
    fn queue_head(&mut self, f: usize) {
        self.fill(f);
        if let Some(head) = &self.files[f].head {
            self.queue.push(Reverse((head.time.unwrap_or(i64::MIN), f)));
        }
    }

    /// The next window; none once every stream is read.
    pub fn next_window(&mut self) -> Option<Window> {
        if self.finished {
            return None;
        }
        let context: usize = self.files.iter().map(|f| f.bytes.len()).sum();
        let new_from: Vec<u32> = self.files.iter().map(|f| f.taken_through).collect();
        let mut taken = 0usize;
        let mut latest: Option<i64> = None;
        let last = loop {
            let Some(f) = self.earliest() else {
                break true;
            };
            let Some(head) = self.files[f].head.as_ref() else {
                break true;
            };
            // Cut when full, before a later time: lines of one time stay together (lines
            // with none, of a file that shows none, are cut anywhere). A window takes at
            // least half its bytes anew, so that a long overlap cannot stall the run.
            let full =
                taken >= self.options.max_bytes / 2 && context + taken >= self.options.max_bytes;
            let later = match (head.time, latest) {
                (Some(t), Some(l)) => t > l,
                _ => true,
            };
            if full && later {
                break false;
            }
            let Some(head) = self.files[f].head.take() else {
                break true;
            };
            self.queue.pop();
            taken += head.bytes.len();
            self.files[f].taken_through = head.first_line.saturating_add(head.lines);
            if head.time.is_some() {
                latest = latest.max(head.time);
            }
            let file = &mut self.files[f];
            if file.bytes.is_empty() {
                file.first_line = head.first_line;
            }
            file.groups
                .push((file.bytes.len(), head.time, head.first_line));
            file.bytes.extend_from_slice(&head.bytes);
            self.queue_head(f);
        };
        self.finished = last;
        // The overlap: the lines within `overlap_ns` of the window's latest time, at
        // most half a window's bytes.
        let mut overlap_from = vec![u32::MAX; self.files.len()];
        let mut carried: Vec<usize> = self.files.iter().map(|f| f.groups.len()).collect();
        if !last {
            // One time for every file, so that the next window sees the same stretch of
            // each: the latest groups, across files, that fit in half a window.
            let mut latest_first: Vec<(i64, usize)> = self
                .files
                .iter()
                .flat_map(|file| {
                    file.groups
                        .iter()
                        .enumerate()
                        .filter_map(|(k, &(start, time, _))| {
                            let end = file.groups.get(k + 1).map_or(file.bytes.len(), |g| g.0);
                            time.map(|t| (t, end - start))
                        })
                })
                .collect();
            latest_first.sort_unstable_by_key(|g| std::cmp::Reverse(g.0));
            let mut since = latest.map_or(i64::MAX, |l| l.saturating_sub(self.options.overlap_ns));
            let mut size = 0;
            for (k, &(t, bytes)) in latest_first.iter().enumerate() {
                size += bytes;
                if t < since {
                    break;
                }
                if size > self.options.max_bytes / 2 {
                    // Past the budget: from the time after this one (a time is never split).
                    since = latest_first[..k]
                        .iter()
                        .rev()
                        .find(|g| g.0 > t)
                        .map_or(i64::MAX, |g| g.0);
                    break;
                }
            }
            for (f, file) in self.files.iter().enumerate() {
                // The file's lines from its first at or after `since`.
                let k = file
                    .groups
                    .iter()
                    .position(|g| g.1.is_some_and(|t| t >= since))
                    .unwrap_or(file.groups.len());
                if let Some(&(_, _, first)) = file.groups.get(k) {
                    overlap_from[f] = first;
                }
                carried[f] = k;
            }
        }
        for file in &mut self.files {
            self.counts
                .add_formats(&file.name, &std::mem::take(&mut file.formats));
        }
        let mut window = Window {
            warnings: std::mem::take(&mut self.warnings),
            counts: Some(std::mem::take(&mut self.counts)),
            new_from,
            overlap_from,
            ..Window::default()
        };
        for (file, k) in self.files.iter_mut().zip(carried) {
            let (keep, first) = match file.groups.get(k) {
                Some(&(start, _, first)) => (file.bytes[start..].to_vec(), first),
                None => (Vec::new(), file.taken_through),
            };
            let base = file.groups.get(k).map_or(0, |g| g.0);
            let groups: Vec<(usize, Option<i64>, u32)> = file.groups[k..]
                .iter()
                .map(|&(start, time, line)| (start - base, time, line))
                .collect();
            window.first_lines.push(file.first_line);
            window
                .files
                .push((file.name.clone(), std::mem::replace(&mut file.bytes, keep)));
            file.groups = groups;
            file.first_line = first;
        }
        Some(window)
    }
}

/// Requests numbered across windows: a window's request takes the number its lines read
/// again from the window before were given there, else the next number, in order of its
/// first new line.
#[derive(Default)]
pub struct Numbering {
    next: u32,
    /// The overlapped lines of the window before: (file, line) -> request.
    carried: HashMap<(u32, u32), u32>,
}

impl Numbering {
    /// The requests the window before gave the lines `window` reads again: what
    /// [`crate::stitch::stitch_after`] is given.
    pub fn given(&self, window: &Window, corpus: &Corpus) -> Vec<Option<u32>> {
        corpus
            .lines
            .iter()
            .map(|l| {
                window
                    .context(l.file, l.number)
                    .then(|| self.carried.get(&(l.file, l.number)).copied())
                    .flatten()
            })
            .collect()
    }

    /// Each line's request across windows (none for a line read before: it has one
    /// already), from `requests`, each line's request within `window`; and the requests
    /// the next window may add to.
    pub fn number(
        &mut self,
        window: &Window,
        corpus: &Corpus,
        requests: &[u32],
    ) -> (Vec<Option<u32>>, HashSet<u32>) {
        let mut across: HashMap<u32, u32> = HashMap::default();
        for i in corpus.timeline().iter().map(|m| m.line) {
            let (Some(line), Some(&r)) = (corpus.lines.get(i), requests.get(i)) else {
                continue;
            };
            if let Some(&given) = self.carried.get(&(line.file, line.number)) {
                across.entry(r).or_insert(given);
            }
        }
        let mut out = vec![None; corpus.lines.len()];
        let mut carried = HashMap::default();
        for i in corpus.timeline().iter().map(|m| m.line) {
            let (Some(line), Some(&r)) = (corpus.lines.get(i), requests.get(i)) else {
                continue;
            };
            let key = (line.file, line.number);
            let given = if window.context(line.file, line.number) {
                self.carried.get(&key).copied()
            } else {
                let next = &mut self.next;
                let given = *across.entry(r).or_insert_with(|| {
                    *next += 1;
                    *next - 1
                });
                out[i] = Some(given);
                Some(given)
            };
            if let Some(given) = given.filter(|_| window.overlapped(line.file, line.number)) {
                carried.insert(key, given);
            }
        }
        self.carried = carried;
        let open = self.carried.values().copied().collect();
        (out, open)
    }
}

/// Reads a line (through its `\n`) into `out`, keeping at most `max` bytes of it and
/// skipping the rest, so that a file with no line breaks cannot fill the memory. The
/// bytes read, 0 at the end.
fn read_capped(reader: &mut dyn BufRead, out: &mut Vec<u8>, max: usize) -> io::Result<usize> {
    let mut read = 0;
    loop {
        let buf = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(read);
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let room = max.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = chunk.len();
        reader.consume(used);
        read += used;
        if done {
            return Ok(read);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(name: &str, text: String) -> Stream {
        Stream {
            name: name.into(),
            reader: Box::new(io::Cursor::new(text.into_bytes())),
        }
    }

    /// Lines at `times` seconds, each `ms` milliseconds after, named `what`.
    fn log(what: &str, seconds: impl Iterator<Item = u32>, ms: u32) -> String {
        seconds
            .map(|s| {
                format!(
                    "1970-01-01T00:{:02}:{:02}.{ms:03}Z INFO {what} {s}\n",
                    s / 60,
                    s % 60
                )
            })
            .collect()
    }

    #[test]
    fn every_line_is_new_in_one_window_and_the_overlap_is_read_again() {
        let mut web = log("web", 0..200, 0);
        // A stack trace continues line 11: its frames stay with it.
        let at = web.match_indices('\n').nth(10).map_or(0, |(i, _)| i + 1);
        web.insert_str(at, "\tat a.B(C.java:1)\n\tat d.E(F.java:2)\n");
        let db = log("db", (0..200).filter(|s| s % 2 == 0), 500);
        let mut windows = Windows::new(
            vec![stream("web.log", web.clone()), stream("db.log", db.clone())],
            None,
            WindowOptions {
                max_bytes: 2_000,
                overlap_ns: 3_000_000_000,
            },
        );
        let mut new: Vec<Vec<u32>> = vec![Vec::new(), Vec::new()];
        let mut all = Vec::new();
        let mut overlapped_before: Option<Window> = None;
        let mut context = 0;
        while let Some(w) = windows.next_window() {
            assert!(w.files.iter().map(|f| f.1.len()).sum::<usize>() <= 2_000 + 100);
            for (f, (_, bytes)) in w.files.iter().enumerate() {
                let text = std::str::from_utf8(bytes).expect("utf-8");
                for (n, line) in text.lines().enumerate() {
                    let number = w.first_lines[f] + n as u32;
                    // The slice's lines are the file's lines of those numbers.
                    let whole = if f == 0 { &web } else { &db };
                    assert_eq!(whole.lines().nth(number as usize - 1), Some(line));
                    if w.context(f as u32, number) {
                        context += 1;
                        let before = overlapped_before.as_ref().expect("a window before");
                        assert!(before.overlapped(f as u32, number), "{f}:{number}");
                    } else {
                        new[f].push(number);
                    }
                }
                // A window cuts at no continuation.
                assert!(!text.starts_with('\t'), "{text}");
            }
            all.push(w.files.iter().map(|f| f.1.len()).sum::<usize>());
            overlapped_before = Some(w);
        }
        assert!(all.len() >= 5, "{all:?}");
        // About 3 s of both files again in each window after the first.
        assert!(context >= 4 * (all.len() - 1), "{context}");
        assert_eq!(new[0], (1..=202).collect::<Vec<u32>>());
        assert_eq!(new[1], (1..=100).collect::<Vec<u32>>());
        // The last window has nothing to carry.
        let last = overlapped_before.expect("a window");
        assert!(last.overlap_from.iter().all(|&f| f == u32::MAX));
    }

    #[test]
    fn a_log_with_no_times_is_cut_into_windows_too() {
        let text: String = (0..1_000)
            .map(|k| format!("request {k} served\n"))
            .collect();
        let mut windows = Windows::new(
            vec![stream("plain.log", text)],
            None,
            WindowOptions {
                max_bytes: 4_000,
                overlap_ns: 1,
            },
        );
        let mut lines = 0;
        let mut count = 0;
        while let Some(w) = windows.next_window() {
            let bytes = &w.files[0].1;
            assert!(bytes.len() <= 4_000 + 30, "{}", bytes.len());
            assert_eq!(w.first_lines[0], lines + 1);
            lines += bytes.iter().filter(|&&b| b == b'\n').count() as u32;
            count += 1;
        }
        assert_eq!(lines, 1_000);
        assert!(count >= 4, "{count}");
    }

    #[test]
    fn a_line_with_no_break_is_kept_only_to_the_limit() {
        let mut reader = io::Cursor::new(vec![b'x'; 10_000]);
        let mut out = Vec::new();
        assert_eq!(
            read_capped(&mut reader, &mut out, 100).expect("read"),
            10_000
        );
        assert_eq!(out.len(), 100);
        out.clear();
        assert_eq!(read_capped(&mut reader, &mut out, 100).expect("read"), 0);
    }
}

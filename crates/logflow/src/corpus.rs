//! Log files read into lines: each line's file, number, time, thread, template, log point
//! and parameter values. Templates are mined over every line first, then each line's
//! values are read against the final templates (they generalise as lines come).
//!
//! Frames without a timestamp (a stack trace's) join the line before and keep their line
//! numbers; long lines are cut and bad UTF-8 read lossily, all counted; a file that is
//! UTF-8 throughout is checked once, its lines then slices of it.
//!
//! Each line's tokens are kept between the two passes as positions in its message
//! (`tokens::KeptTokens`: start, length and kind in 4 bytes a token, where a `Token` takes
//! 24; a message past 64 KiB or with a token past 4 KiB keeps none and is tokenized
//! again). The second pass looks for a line's template in the leaf the first pass put it
//! in; when that leaf holds only the template the line joined, that is its template with
//! no comparison, and its values are read straight from its kept positions.
//!
//! Every line's values are kept end to end in one string (`Corpus::values`) and thread
//! names are numbered, since an allocation per value was 12% of a run. The keys of every
//! value (the value, and `43` of `product-43`) are numbered once (`Corpus::keys_at`), so
//! that learning links and the walk index arrays by key number rather than hash each
//! value's text again in each pass. Ranking, learning links, predecessors and the walk all
//! go through the lines in time order, so the corpus keeps that order as one array of what
//! they read (`Corpus::timeline`: each line's time, file, log point, and its (file, log
//! point) numbered densely, so that passes keep what they learn of one in vectors), and the
//! keys in the same order: each pass reads memory straight through instead of jumping
//! between files. The order is (time, line), made by a stable radix sort on time
//! (`radsort`, which skips the bytes every time shares; the lines are in order already, so
//! ties keep it).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

use foldhash::HashMap;

use crate::drain::{LeafId, Miner, Options, Shape, TemplateId};
use crate::format::Format;
use crate::header;
use crate::points::{Point, PointId, Points};
use crate::source::SourceIndex;
use crate::structured::{self, LineFormat};
use crate::tokens::{tokenize, KeptTokens, Kind, Token};

/// Lines longer than this are cut (and counted).
pub const MAX_LINE: usize = 16 * 1024;
/// Bytes of a line's message with its continuations (a stack trace's frames) at most:
/// further continuations still belong to the line but are not part of its message.
pub const MAX_MESSAGE: usize = 64 * 1024;

/// One log line.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// Index into [`Corpus::files`].
    pub file: u32,
    /// 1-based.
    pub number: u32,
    /// Nanoseconds: the line's full timestamp, else its time of day, else none.
    pub time_ns: Option<i64>,
    /// Index into [`Corpus::threads`].
    pub thread: Option<u32>,
    /// The numbers of the lines with no timestamp that followed it (a stack trace's
    /// frames), part of it.
    pub continued: Vec<u32>,
    /// The template mined for it.
    pub template: TemplateId,
    /// Its log point: the template with its URLs' query keys.
    pub point: PointId,
    /// Its values (at the log point's parameters, in order): indices into the
    /// corpus's values, read with [`Corpus::values`].
    pub values: Range<usize>,
    /// Where its message (the line after its prefix) is, read with [`Corpus::message`].
    message: MessageAt,
}

/// Where a line's message is: in its file's bytes, or (a message that is not the file's
/// bytes: decoded lossily, a JSON line's, or one past 4 GiB into a file) in the corpus's
/// own text. Eight bytes, as there is one per line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MessageAt {
    start: u32,
    /// The length, and [`MessageAt::KEPT`] when the message is the corpus's.
    len: u32,
}

impl MessageAt {
    const KEPT: u32 = 1 << 31;

    /// `len` bytes from `start` in the file, if the numbers fit.
    fn in_file(start: usize, len: usize) -> Option<MessageAt> {
        Some(MessageAt {
            start: u32::try_from(start).ok()?,
            len: u32::try_from(len).ok().filter(|&l| l < Self::KEPT)?,
        })
    }

    /// `message`, appended to `kept` (the corpus's text). Lines are cut at MAX_LINE, far
    /// below either limit; past 4 GiB of such messages, a message is left empty.
    fn kept(message: &str, kept: &mut String) -> MessageAt {
        match MessageAt::in_file(kept.len(), message.len()) {
            Some(at) => {
                kept.push_str(message);
                MessageAt {
                    len: at.len | Self::KEPT,
                    ..at
                }
            }
            None => MessageAt {
                start: 0,
                len: Self::KEPT,
            },
        }
    }

    /// The message run on through a line that continues it (a stack trace's frame), up
    /// to [`MAX_MESSAGE`] bytes: to `end` in its file, or, kept, with `line` appended
    /// after a line break (when `kept` ends with the message: the last one kept).
    fn run_on(&mut self, end: usize, line: &str, kept: &mut String) {
        let len = if self.len & Self::KEPT == 0 {
            end.saturating_sub(self.start as usize)
        } else if self.range().end == kept.len() {
            (self.len & !Self::KEPT) as usize + 1 + line.len()
        } else {
            return;
        };
        if len > MAX_MESSAGE {
            return;
        }
        if self.len & Self::KEPT != 0 {
            kept.push('\n');
            kept.push_str(line);
        }
        // MAX_MESSAGE < KEPT.
        self.len = (self.len & Self::KEPT) | len as u32;
    }

    fn range(self) -> std::ops::Range<usize> {
        let start = self.start as usize;
        start..start + (self.len & !Self::KEPT) as usize
    }
}

/// `bytes` split at each line feed, as `bytes.split(|b| *b == b'\n')` splits it, found
/// by `memchr` rather than byte by byte.
fn split_lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    let mut ends = memchr::memchr_iter(b'\n', bytes).chain(std::iter::once(bytes.len()));
    std::iter::from_fn(move || {
        let end = ends.next()?;
        let line = bytes.get(start..end)?;
        start = end + 1;
        Some(line)
    })
}

/// What reading found that it could not use as is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadCounts {
    /// Lines read (a continuation line counted with the line it continues).
    pub lines: usize,
    /// Lines cut at [`MAX_LINE`].
    pub cut: usize,
    /// Lines with no timestamp attached to the line before (a stack trace's frames).
    pub continuations: usize,
    /// Lines that are not valid UTF-8, read lossily.
    pub lossy: usize,
    /// How each file's lines were written, by file name.
    pub formats: BTreeMap<String, FileFormats>,
}

impl ReadCounts {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &ReadCounts) {
        self.lines += other.lines;
        self.cut += other.cut;
        self.continuations += other.continuations;
        self.lossy += other.lossy;
        for (file, f) in &other.formats {
            self.add_formats(file, f);
        }
    }

    /// Adds `formats`, of the file named `file`.
    pub fn add_formats(&mut self, file: &str, formats: &FileFormats) {
        if formats.lines == 0 {
            return;
        }
        let mine = self.formats.entry(file.to_string()).or_default();
        mine.lines += formats.lines;
        mine.json += formats.json;
        mine.logfmt += formats.logfmt;
        mine.timed_text += formats.timed_text;
    }
}

/// How a file's lines were written: of its lines, how many were JSON, logfmt, and text
/// whose prefix gave a time or that continues such a line (a stack trace's frames); the
/// rest are text whose prefix was not understood.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FileFormats {
    /// Lines read.
    pub lines: usize,
    /// JSON objects.
    pub json: usize,
    /// logfmt pairs.
    pub logfmt: usize,
    /// Text with a time, or continuing a line with one.
    pub timed_text: usize,
}

impl FileFormats {
    /// Counts a line read as `format`, with a time or not.
    pub fn count(&mut self, format: LineFormat, timed: bool) {
        self.lines += 1;
        match format {
            LineFormat::Json => self.json += 1,
            LineFormat::Logfmt => self.logfmt += 1,
            LineFormat::Text => self.timed_text += usize::from(timed),
        }
    }

    /// The format most of the file's lines are in, and the share of its lines read so.
    pub fn detected(&self) -> (LineFormat, f64) {
        let (format, parsed) = [
            (LineFormat::Json, self.json),
            (LineFormat::Logfmt, self.logfmt),
            (LineFormat::Text, self.timed_text),
        ]
        .into_iter()
        .max_by_key(|&(_, n)| n)
        .unwrap_or((LineFormat::Text, 0));
        (format, parsed as f64 / self.lines.max(1) as f64)
    }
}

/// Lines of several files, with their log points.
pub struct Corpus {
    /// Each file's name as reported.
    pub files: Vec<String>,
    /// Every line of every file, in file order.
    pub lines: Vec<Line>,
    /// Thread names, by [`Line::thread`].
    pub threads: Vec<Box<str>>,
    /// Every line's values end to end, and where each ends: one allocation for all
    /// rather than one per value.
    value_text: String,
    value_ends: Vec<usize>,
    /// The messages that are not their files' bytes (see [`MessageAt`]), end to end.
    kept_text: String,
    /// Each line's values' keys (see [`keys`]) as numbers, `(slot, key)`,
    /// line after line in time order (`keys[key_starts[at]..key_starts[at + 1]]` for
    /// the line at `at` in the timeline); a value's own text is the first key of its
    /// slot. Numbered once, so that learning links and the walk
    /// index by number instead of hashing each value's text again.
    keys: Vec<(u32, u32)>,
    key_starts: Vec<usize>,
    key_count: usize,
    /// The templates mined from the messages.
    pub miner: Miner,
    points: Points,
    /// What reading found that it could not use as is.
    pub counts: ReadCounts,
    /// The lines in time order, sorted once: links, ranking, predecessors and the walk
    /// all read the lines in this order.
    timeline: Vec<Moment>,
    node_point_count: usize,
}

/// A line in time order: what the passes over time read of it, side by side, so that
/// they read one array in order rather than lines across every file in turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moment {
    /// [`Corpus::time`] of the line.
    pub time: i64,
    /// Index into [`Corpus::lines`].
    pub line: usize,
    /// Index into [`Corpus::files`].
    pub file: u32,
    /// The line's log point.
    pub point: PointId,
    /// Its (file, log point) numbered densely (see [`Corpus::node_point_count`]), so
    /// that passes keep what they learn of one in a vector rather than a hash map.
    pub node_point: u32,
}

/// A line while reading: its text (borrowed from the file unless it was not UTF-8), where
/// its message starts, and what its prefix said.
struct Raw<'a> {
    file: u32,
    number: u32,
    text: Cow<'a, str>,
    message_at: usize,
    /// Where the message is kept for the corpus.
    kept_at: MessageAt,
    time_ns: Option<i64>,
    thread: Option<u32>,
}

impl Raw<'_> {
    fn message(&self) -> &str {
        self.text.get(self.message_at..).unwrap_or_default()
    }
}

impl Corpus {
    /// Line `i`'s time, or, for a line with none, its index (file order) to order by.
    pub fn time(&self, i: usize) -> i64 {
        self.lines
            .get(i)
            .and_then(|l| l.time_ns)
            .unwrap_or(i as i64)
    }

    /// `line`'s values, at its log point's parameters, in order.
    pub fn values<'a>(&'a self, line: &Line) -> impl ExactSizeIterator<Item = &'a str> + Clone {
        line.values.clone().map(|k| {
            let start = k.checked_sub(1).map_or(0, |before| self.value_ends[before]);
            &self.value_text[start..self.value_ends[k]]
        })
    }

    /// `line`'s message as printed (after its prefix), from `files`, the files the corpus
    /// was read from.
    pub fn message<'a>(&'a self, line: &Line, files: &'a [(String, Vec<u8>)]) -> Cow<'a, str> {
        let at = line.message;
        if at.len & MessageAt::KEPT != 0 {
            return Cow::Borrowed(self.kept_text.get(at.range()).unwrap_or_default());
        }
        files
            .get(line.file as usize)
            .and_then(|(_, bytes)| bytes.get(at.range()))
            .map_or(Cow::Borrowed(""), String::from_utf8_lossy)
    }

    /// `line`'s thread's name.
    pub fn thread(&self, line: &Line) -> Option<&str> {
        line.thread
            .and_then(|t| self.threads.get(t as usize))
            .map(|t| &**t)
    }

    /// Log point `point`'s slots.
    pub fn point_shape(&self, point: PointId) -> Shape<'_> {
        self.points
            .all()
            .get(point as usize)
            .map_or(Shape(&[]), |p| p.shape(self.miner.templates()))
    }

    /// The log points, by [`PointId`].
    pub fn points(&self) -> &[Point] {
        self.points.all()
    }

    /// The lines in time order (file order among equal times).
    pub fn timeline(&self) -> &[Moment] {
        &self.timeline
    }

    /// How many (file, log point) pairs have lines: [`Moment::node_point`] is below it.
    pub fn node_point_count(&self) -> usize {
        self.node_point_count
    }

    /// Reads `(name, bytes)` of each file. A line without a timestamp after one with
    /// a timestamp continues it (its line number is kept with it), as a stack trace's
    /// frames do.
    pub fn read(files: &[(String, Vec<u8>)], options: Options) -> Corpus {
        Corpus::read_with(files, options, None, None)
    }

    /// [`Corpus::read`], with lines' prefixes read by `format` where it matches, and the
    /// log points of `sources` taken before any are mined.
    pub fn read_with(
        files: &[(String, Vec<u8>)],
        options: Options,
        format: Option<&Format>,
        sources: Option<&SourceIndex>,
    ) -> Corpus {
        Corpus::read_numbered(files, &[], options, format, sources)
    }

    /// [`Corpus::read_with`], with each file's bytes starting at the line whose number
    /// `first_lines` gives (1 for a file it gives none for): a window of a longer log.
    pub fn read_numbered(
        files: &[(String, Vec<u8>)],
        first_lines: &[u32],
        options: Options,
        format: Option<&Format>,
        sources: Option<&SourceIndex>,
    ) -> Corpus {
        let mut counts = ReadCounts::default();
        // Sized at once: grown by doubling, the vector would be copied to fresh memory
        // each time, and the pages touched cost more than counting line breaks.
        let line_breaks: usize = files
            .iter()
            .map(|(_, b)| memchr::memchr_iter(b'\n', b).count() + 1)
            .sum();
        let mut raws: Vec<Raw<'_>> = Vec::with_capacity(line_breaks);
        // The lines with no timestamp that continue another: (its index, their number),
        // kept apart from `raws` (an empty vector in each took 24 bytes a line).
        let mut continuations: Vec<(usize, u32)> = Vec::new();
        let mut kept_text = String::new();
        let mut threads: Vec<Box<str>> = Vec::new();
        let mut thread_ids: HashMap<Box<str>, u32> = HashMap::default();
        let mut intern = |name: &str| match thread_ids.get(name) {
            Some(&id) => id,
            None => {
                let id = threads.len() as u32;
                threads.push(name.into());
                thread_ids.insert(name.into(), id);
                id
            }
        };
        for (f, (_, bytes)) in files.iter().enumerate() {
            let first_line = first_lines.get(f).copied().unwrap_or(1);
            let mut had_time = false;
            // A file's lines mostly share their layout.
            let mut memo = header::LayoutMemo::default();
            let mut file_formats = FileFormats::default();
            // A file that is UTF-8 throughout (most are) is checked once rather than
            // line by line: its lines, cut at line feeds, are then UTF-8 too.
            let file_text = std::str::from_utf8(bytes).ok();
            // Where a JSON object pretty-printed over several lines ends: the lines
            // before that are its own.
            let mut record_end = 0;
            for (n, line) in split_lines(bytes).enumerate() {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                if line.is_empty() {
                    continue;
                }
                counts.lines += 1;
                // Where the line starts in the file (a slice of `bytes`).
                let offset = line.as_ptr() as usize - bytes.as_ptr() as usize;
                if offset < record_end {
                    if let Some(at) = raws.len().checked_sub(1) {
                        counts.continuations += 1;
                        file_formats.count(LineFormat::Json, true);
                        continuations.push((at, first_line + n as u32));
                    }
                    continue;
                }
                let line = if line.len() > MAX_LINE {
                    counts.cut += 1;
                    &line[..MAX_LINE]
                } else if line.len() <= 8 && line.trim_ascii() == b"{" {
                    // The object read whole, as one line.
                    match structured::pretty_json_len(&bytes[offset..], MAX_LINE) {
                        Some(len) => {
                            record_end = offset + len;
                            &bytes[offset..record_end]
                        }
                        None => line,
                    }
                } else {
                    line
                };
                let whole = file_text.and_then(|t| t.get(offset..offset + line.len()));
                let text = match whole.map_or_else(|| std::str::from_utf8(line), Ok) {
                    Ok(t) => Cow::Borrowed(t),
                    Err(_) => {
                        counts.lossy += 1;
                        String::from_utf8_lossy(line)
                    }
                };
                let (text, message_at, time_ns, thread, line_format) =
                    read_header(text, format, &mut memo, &mut intern);
                // A line with no time of its own, or a stack trace's line that a
                // collector gave one, continues the record before it.
                let continues = time_ns.is_none()
                    || (line_format == LineFormat::Text && header::continues_record(&text));
                if continues && had_time {
                    let before = raws.len().checked_sub(1);
                    if let Some((at, last)) = before
                        .zip(raws.last_mut())
                        .filter(|(_, r)| r.file == f as u32)
                    {
                        counts.continuations += 1;
                        // Read as the line it continues.
                        file_formats.count(line_format, true);
                        continuations.push((at, first_line + n as u32));
                        // The line's message runs on through its continuations, which
                        // follow it in the file.
                        last.kept_at
                            .run_on(offset + line.len(), &text, &mut kept_text);
                        continue;
                    }
                }
                had_time |= time_ns.is_some();
                file_formats.count(line_format, time_ns.is_some());
                let message = text.get(message_at..).unwrap_or_default();
                let kept_at = match &text {
                    // A slice of `bytes`, so the offset is the pointers' difference.
                    Cow::Borrowed(t) => MessageAt::in_file(
                        t.as_ptr() as usize - bytes.as_ptr() as usize + message_at,
                        message.len(),
                    ),
                    Cow::Owned(_) => None,
                }
                .unwrap_or_else(|| MessageAt::kept(message, &mut kept_text));
                raws.push(Raw {
                    file: f as u32,
                    number: first_line + n as u32,
                    message_at,
                    kept_at,
                    time_ns,
                    thread,
                    text,
                });
            }
            counts.add_formats(&files[f].0, &file_formats);
        }
        // Each line's continuations (a vector that holds none allocates nothing).
        let mut continued: Vec<Vec<u32>> = (0..raws.len()).map(|_| Vec::new()).collect();
        for (at, number) in continuations {
            if let Some(c) = continued.get_mut(at) {
                c.push(number);
            }
        }
        // Tokens are kept for the second pass as positions (see `KeptTokens`): kept as
        // they are, they took several times the log's bytes, and the memory cost more
        // than tokenizing again.
        let mut miner = Miner::new(options);
        // A line a source log point printed starts with a word naming that log point
        // (its place in the source), so that Drain mines it with that log point's lines
        // only: log points the text alone would merge stay apart.
        let places: Vec<String> = sources.map_or_else(Vec::new, |s| {
            s.points()
                .iter()
                .map(|p| format!("{}:{}", p.file, p.line))
                .collect()
        });
        // Each line's source log point, by line; empty with no sources.
        let point_of: Vec<Option<usize>> = sources.map_or_else(Vec::new, |s| {
            raws.iter()
                .map(|raw| s.find(raw.message()).map(|(p, _)| p))
                .collect()
        });
        let point_of = |i: usize| point_of.get(i).copied().flatten();
        let place = |point: Option<usize>| point.and_then(|p| places.get(p)).map(String::as_str);
        let mut line_tokens = Vec::new();
        let message_bytes = raws.iter().map(|r| r.message().len()).sum();
        let mut kept_tokens = KeptTokens::with_capacity(raws.len(), message_bytes);
        let joined: Vec<(TemplateId, LeafId)> = raws
            .iter()
            .enumerate()
            .map(|(i, raw)| {
                tokenize(raw.message(), &mut line_tokens);
                kept_tokens.push(raw.message(), &line_tokens);
                after_place(place(point_of(i)), &mut line_tokens);
                miner.add_in_leaf(&line_tokens)
            })
            .collect();
        let mut points = Points::default();
        // Values are slices of the messages, at most a value per token (for all but a
        // URL's query, rare): room made at once, as for the kept tokens.
        let mut value_text = String::with_capacity(message_bytes);
        let mut value_ends = Vec::with_capacity(kept_tokens.token_count());
        let mut values = Vec::new();
        let lines = raws
            .iter()
            .zip(continued)
            .zip(joined)
            .enumerate()
            .map(|(i, ((raw, continued), (joined, leaf)))| {
                let point = point_of(i);
                // The template it matches now in its leaf; else (templates generalised
                // past it) the one it joined, which is also the answer when it is the
                // leaf's only one: then its values are read straight from its kept
                // tokens (with no word before them naming a place in the source).
                let only = miner.leaf_templates(leaf) == [joined];
                let texts = (only && place(point).is_none())
                    .then(|| kept_tokens.texts(i, raw.message()))
                    .flatten();
                let template = match texts {
                    Some(texts) => {
                        miner.values_of(joined, texts, &mut values);
                        joined
                    }
                    None => {
                        kept_tokens.read(i, raw.message(), &mut line_tokens);
                        after_place(place(point), &mut line_tokens);
                        let template = if only {
                            joined
                        } else {
                            miner.find_in_leaf(leaf, &line_tokens).unwrap_or(joined)
                        };
                        miner.values(template, &line_tokens, &mut values);
                        template
                    }
                };
                // Both ids are the miner's own.
                let point =
                    points.point(template, &miner.templates()[template as usize], &mut values);
                let first = value_ends.len();
                for v in &values {
                    value_text.push_str(v);
                    value_ends.push(value_text.len());
                }
                Line {
                    file: raw.file,
                    number: raw.number,
                    time_ns: raw.time_ns,
                    continued,
                    template,
                    point,
                    values: first..value_ends.len(),
                    thread: raw.thread,
                    message: raw.kept_at,
                }
            })
            .collect();
        let mut corpus = Corpus {
            files: files.iter().map(|(name, _)| name.clone()).collect(),
            lines,
            threads,
            value_text,
            value_ends,
            kept_text,
            miner,
            points,
            counts,
            timeline: Vec::new(),
            node_point_count: 0,
            keys: Vec::new(),
            key_starts: Vec::new(),
            key_count: 0,
        };
        // Sorted by (time, index): by time in a stable radix sort, the indices being in
        // order already (a comparison sort took 300 instructions a line; times span
        // a few of the key's bytes, and the sort skips the bytes all keys share).
        let mut keyed: Vec<(i64, usize)> = (0..corpus.lines.len())
            .map(|i| (corpus.time(i), i))
            .collect();
        radsort::sort_by_key(&mut keyed, |&(time, _)| time);
        let mut node_points: HashMap<(u32, PointId), u32> = HashMap::default();
        corpus.timeline = keyed
            .into_iter()
            .map(|(time, line)| {
                let (file, point) = (corpus.lines[line].file, corpus.lines[line].point);
                let next = node_points.len() as u32;
                Moment {
                    time,
                    line,
                    file,
                    point,
                    node_point: *node_points.entry((file, point)).or_insert(next),
                }
            })
            .collect();
        corpus.node_point_count = node_points.len();
        corpus.number_keys();
        corpus
    }

    /// Numbers the keys of every line's values (see [`Corpus::keys_at`]), kept in time
    /// order: the passes over time read them straight through.
    fn number_keys(&mut self) {
        // In file order, each value's text read where it lies ...
        let mut ids: HashMap<&str, u32> = HashMap::default();
        let mut by_line = Vec::with_capacity(self.value_ends.len() + self.value_ends.len() / 4);
        let mut line_starts = Vec::with_capacity(self.lines.len() + 1);
        for line in &self.lines {
            line_starts.push(by_line.len());
            for (slot, value) in self.values(line).enumerate() {
                for key in keys(value) {
                    let next = ids.len() as u32;
                    by_line.push((slot as u32, *ids.entry(key).or_insert(next)));
                }
            }
        }
        line_starts.push(by_line.len());
        // ... then put in time order.
        let mut keys = Vec::with_capacity(by_line.len());
        let mut starts = Vec::with_capacity(self.timeline.len() + 1);
        for m in &self.timeline {
            starts.push(keys.len());
            if let (Some(&a), Some(&b)) = (line_starts.get(m.line), line_starts.get(m.line + 1)) {
                keys.extend_from_slice(&by_line[a..b]);
            }
        }
        starts.push(keys.len());
        self.key_count = ids.len();
        self.keys = keys;
        self.key_starts = starts;
    }

    /// The values' keys, as numbers, of the line at `at` in the [`Corpus::timeline`]:
    /// `(slot, key)` in slot order; a value's own text is its slot's first key. Two
    /// keys are one number exactly when their texts are equal.
    pub fn keys_at(&self, at: usize) -> &[(u32, u32)] {
        match (self.key_starts.get(at), self.key_starts.get(at + 1)) {
            (Some(&a), Some(&b)) => &self.keys[a..b],
            _ => &[],
        }
    }

    /// The values' own keys (each value's text as a key number), in slot order, of the
    /// line at `at` in the timeline.
    pub fn value_keys_at(&self, at: usize) -> impl Iterator<Item = u32> + '_ {
        let keys = self.keys_at(at);
        keys.iter()
            .enumerate()
            .filter(|&(k, _)| own_key(keys, k))
            .map(|(_, &(_, key))| key)
    }

    /// How many distinct keys [`Corpus::keys_at`] numbers.
    pub fn key_count(&self) -> usize {
        self.key_count
    }
}

/// True if `keys[k]` (a line's keys, as [`Corpus::keys_at`] gives them) is its value's
/// own text: the first key of its slot.
pub fn own_key(keys: &[(u32, u32)], k: usize) -> bool {
    k == 0 || keys.get(k - 1).map(|p| p.0) != keys.get(k).map(|p| p.0)
}

/// A line's text (its message alone when it is JSON or logfmt), where its message
/// starts, its time, its thread (as `thread` numbers its name) and how it was written:
/// by `format` where it matches, else detected.
fn read_header<'a>(
    text: Cow<'a, str>,
    format: Option<&Format>,
    memo: &mut header::LayoutMemo,
    thread: impl FnOnce(&str) -> u32,
) -> (Cow<'a, str>, usize, Option<i64>, Option<u32>, LineFormat) {
    // Docker's json-file driver wraps the program's line, with a time of its own: the
    // program's full time is preferred, then the driver's, then a time of day.
    let (text, wrapper_time) = match structured::docker_json_file(&text) {
        Some((line, time)) => (Cow::Owned(line), time),
        None => (text, None),
    };
    if let Some(s) = structured::parse(&text) {
        let id = s.thread.as_deref().map(thread);
        return (
            Cow::Owned(s.message),
            0,
            s.time_ns.or(wrapper_time),
            id,
            s.format,
        );
    }
    let (at, time_ns, id) = {
        let h = format
            .and_then(|f| f.apply(&text))
            .unwrap_or_else(|| header::parse_with(&text, memo));
        (
            text.len() - h.message.len(),
            h.time_ns.or(wrapper_time).or(h.time_of_day_ns),
            h.thread.map(thread),
        )
    };
    (text, at, time_ns, id, LineFormat::Text)
}

/// A line's time as [`Corpus::read_with`] reads it (its full timestamp, else its time
/// of day), or none, and how it was written.
pub fn line_time(text: &str, format: Option<&Format>) -> (Option<i64>, LineFormat) {
    let (_, _, time, _, line_format) =
        read_header(Cow::Borrowed(text), format, &mut Default::default(), |_| 0);
    (time, line_format)
}

/// A message's `tokens` put after a word naming its log point's place in the source, if
/// it has one.
fn after_place<'a>(place: Option<&'a str>, tokens: &mut Vec<Token<'a>>) {
    if let Some(place) = place {
        tokens.insert(
            0,
            Token {
                text: place,
                kind: Kind::Word,
            },
        );
    }
}

/// The keys a value matches by: itself, and the number at its end after a `-` or `_`
/// when the rest is a name, letters joined by `-` or `_` (`product-43` also as `43`;
/// not `block-65@storage-1`, two values in one).
pub fn keys(value: &str) -> impl Iterator<Item = &str> {
    // By byte: both are ASCII, so never part of a longer character.
    let suffix = value
        .bytes()
        .rposition(|b| b == b'-' || b == b'_')
        .and_then(|at| {
            let (head, tail) = (&value[..at], &value[at + 1..]);
            (!tail.is_empty()
                && tail.bytes().all(|b| b.is_ascii_digit())
                && head.bytes().any(|b| b.is_ascii_alphabetic())
                && head
                    .bytes()
                    .all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_'))
            .then_some(tail)
        });
    std::iter::once(value).chain(suffix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_matches_by_itself_and_by_its_numbered_suffix() {
        assert_eq!(keys("product-43").collect::<Vec<_>>(), ["product-43", "43"]);
        assert_eq!(keys("rec_7").collect::<Vec<_>>(), ["rec_7", "7"]);
        assert_eq!(keys("43").collect::<Vec<_>>(), ["43"]);
        assert_eq!(keys("12-34").collect::<Vec<_>>(), ["12-34"]);
        assert_eq!(keys("x-").collect::<Vec<_>>(), ["x-"]);
        assert_eq!(
            keys("block-65@storage-1").collect::<Vec<_>>(),
            ["block-65@storage-1"]
        );
    }

    #[test]
    fn each_files_format_is_counted_with_the_share_of_lines_read_so() {
        let json = "2022-08-23T13:28:23.1Z {\"message\":\"Start PlaceOrder user_id=u-1\",\"severity\":\"info\"}\n\
                    2022-08-23T13:28:23.2Z {\"message\":\"Get OrderID 7\",\"severity\":\"info\"}\n\
                    2022-08-23T13:28:23.3Z {\"message\":\"cut\n";
        let text = "2022-08-23T13:28:23.1Z INFO GetCartAsync called with userId=u-1\n\
                    \tat Cart.Get()\n\
                    2022-08-23T13:28:23.1Z stdout F \tat Cart.Main()\n";
        let logfmt = "time=2022-08-23T13:28:23.4Z level=info msg=\"paid\" order=7\n";
        // Docker's json-file driver around a program's text (a time of day) and JSON.
        let docker = r#"{"log":"13:28:31.389 INFO  - Received ad request\n","stream":"stdout","time":"2022-08-23T13:28:31.390164372Z"}
{"log":"{\"msg\":\"ads chosen\",\"level\":\"info\"}\n","stream":"stdout","time":"2022-08-23T13:28:31.5Z"}
{"log":"{\"msg\":\"ads sent\",\"level\":\"info\"}\n","stream":"stdout","time":"2022-08-23T13:28:31.6Z"}
"#;
        let files: Vec<(String, Vec<u8>)> = [
            ("checkout.log", json),
            ("cart.log", text),
            ("payment.log", logfmt),
            ("ads.log", docker),
        ]
        .map(|(name, lines)| (name.to_string(), lines.as_bytes().to_vec()))
        .into();
        let corpus = Corpus::read(&files, Options::default());
        let detected = |file: &str| {
            let f = &corpus.counts.formats[file];
            let (format, share) = f.detected();
            (format, (share * 100.0).round() as u32, f.lines)
        };
        // The cut JSON line is read as text, with its collector's time.
        assert_eq!(detected("checkout.log"), (LineFormat::Json, 67, 3));
        // Stack frames, with a collector's time or none, are read as the line they
        // continue, and are part of it.
        assert_eq!(detected("cart.log"), (LineFormat::Text, 100, 3));
        let cart = corpus
            .lines
            .iter()
            .find(|l| l.file == 1)
            .expect("cart's line");
        assert_eq!(cart.continued, [2, 3]);
        assert_eq!(detected("payment.log"), (LineFormat::Logfmt, 100, 1));
        assert_eq!(detected("ads.log"), (LineFormat::Json, 67, 3));
        let ads: Vec<&Line> = corpus.lines.iter().filter(|l| l.file == 3).collect();
        // The program's time of day gives way to the driver's full time.
        assert_eq!(ads[0].time_ns, Some(1_661_261_311_390_164_372));
        assert!(corpus
            .message(ads[0], &files)
            .ends_with("Received ad request"));
        assert_eq!(corpus.message(ads[1], &files), "ads chosen");
        // A JSON line's message is its message field, its other fields appended.
        assert_eq!(
            corpus.message(&corpus.lines[0], &files),
            "Start PlaceOrder user_id=u-1"
        );
    }

    #[test]
    fn json_pretty_printed_over_lines_is_one_line_and_a_brace_in_a_string_does_not_close_it() {
        let log = "{\n  \"time\": \"2023-01-29T08:42:09.1Z\",\n  \"msg\": \"order {7} placed\",\n  \"order_id\": \"o-7\",\n  \"ctx\": {\"user\": \"ann\", \"tags\": [\"}\", \"\\\"]\"]}\n}\n\
                   {\n  \"time\": \"2023-01-29T08:42:09.3Z\",\n  \"msg\": \"order {8} paid\"\n}\n\
                   {\"time\": \"2023-01-29T08:42:09.4Z\", \"msg\": \"order 9 sent\"}\n\
                   {\n  not json\n}\n";
        let files = [("a.log".to_string(), log.as_bytes().to_vec())];
        let corpus = Corpus::read(&files, Options::default());
        assert_eq!(corpus.counts.lines, 14);
        let numbers: Vec<u32> = corpus.lines.iter().map(|l| l.number).collect();
        // The object that is not JSON is read line by line, as before (its lines with no
        // time of their own continue the line before).
        assert_eq!(numbers, [1, 7, 11]);
        assert_eq!(corpus.lines[0].continued, [2, 3, 4, 5, 6]);
        assert_eq!(corpus.lines[2].continued, [12, 13, 14]);
        assert_eq!(corpus.lines[1].time_ns, Some(1_674_981_729_300_000_000));
        assert!(corpus
            .message(&corpus.lines[0], &files)
            .starts_with("order {7} placed"));
        assert_eq!(corpus.message(&corpus.lines[1], &files), "order {8} paid");
        assert_eq!(
            corpus.counts.formats["a.log"].detected(),
            (LineFormat::Json, 11.0 / 14.0)
        );
    }

    #[test]
    fn lines_get_their_log_point_values_and_frames_join_their_line() {
        let a = "2023-01-29T08:42:09.100Z INFO [main] order 7 placed by ann\n\
                 2023-01-29T08:42:09.200Z ERROR [main] order 8 failed\n\
                 \tat x.Y.z(Y.java:1)\n\
                 \n\
                 2023-01-29T08:42:09.300Z INFO [io] order 9 placed by bob\n";
        let b = b"08:42:09.150 INFO order 7 paid \xff\n".to_vec();
        let corpus = Corpus::read(
            &[("a.log".into(), a.as_bytes().to_vec()), ("b.log".into(), b)],
            Options::default(),
        );
        assert_eq!(corpus.counts.lines, 5);
        assert_eq!(corpus.counts.continuations, 1);
        assert_eq!(corpus.counts.lossy, 1);
        let numbers: Vec<(u32, u32)> = corpus.lines.iter().map(|l| (l.file, l.number)).collect();
        assert_eq!(numbers, vec![(0, 1), (0, 2), (0, 5), (1, 1)]);
        assert_eq!(corpus.lines[1].continued, vec![3]);
        let placed = &corpus.lines[0];
        assert_eq!(placed.template, corpus.lines[2].template);
        let values = |l: &Line| corpus.values(l).collect::<Vec<_>>();
        assert_eq!(values(placed), ["7", "ann"]);
        assert_eq!(corpus.thread(placed), Some("main"));
        assert_eq!(values(&corpus.lines[2]), ["9", "bob"]);
        assert_eq!(corpus.thread(&corpus.lines[2]), Some("io"));
        assert_eq!(values(&corpus.lines[3]), ["7"]);
        assert_eq!(corpus.thread(&corpus.lines[3]), None);
        assert_eq!(
            corpus.lines[3].time_ns,
            Some(((8 * 60 + 42) * 60 + 9) * 1_000_000_000 + 150_000_000)
        );
    }

    #[test]
    fn a_line_cut_inside_a_character_of_a_utf8_file_is_decoded_lossily() {
        // The file is UTF-8 throughout, but the cut leaves half an `é` at the end.
        let long = format!("x{}", "é".repeat(MAX_LINE));
        let text =
            format!("2023-01-29T08:42:09.100Z INFO {long}\n2023-01-29T08:42:09.200Z INFO ok\n");
        let files = [("a.log".to_string(), text.into_bytes())];
        let corpus = Corpus::read(&files, Options::default());
        assert_eq!((corpus.counts.cut, corpus.counts.lossy), (1, 1));
        let message = corpus.message(&corpus.lines[0], &files);
        assert!(
            message.starts_with("xé") && message.ends_with('\u{FFFD}'),
            "{message:?}"
        );
        assert_eq!(corpus.message(&corpus.lines[1], &files), "ok");
    }

    #[test]
    fn equal_keys_get_one_number_and_a_name_with_a_number_is_also_the_number() {
        let log = "2023-01-29T08:00:00Z get item product-43 for 7\n\
                   2023-01-29T08:00:01Z get item product-44 for 43\n\
                   2023-01-29T08:00:02Z put 43\n";
        let corpus = Corpus::read(&[("a.log".into(), log.into())], Options::default());
        // One file in time order: the timeline is the file's order.
        let keys: Vec<&[(u32, u32)]> = (0..3).map(|i| corpus.keys_at(i)).collect();
        // `product-43` is slot 0's value and `43`; `7` is slot 1's.
        assert_eq!(keys[0].len(), 3, "{keys:?}");
        assert_eq!((keys[0][0].0, keys[0][1].0, keys[0][2].0), (0, 0, 1));
        let (product_43, number_43) = (keys[0][0].1, keys[0][1].1);
        assert_ne!(product_43, number_43);
        // Line 2's `43` and line 3's are the number `product-43` ends with.
        assert_eq!(keys[1].last().map(|k| k.1), Some(number_43));
        assert_eq!(keys[2].iter().map(|k| k.1).collect::<Vec<_>>(), [number_43]);
        assert_ne!(keys[1][0].1, product_43);
        assert_eq!(corpus.key_count(), 5);
    }

    #[test]
    fn log_points_read_from_sources_keep_apart_what_drain_would_merge() {
        use crate::source::{log_points, SourceIndex};
        let source = "fn f() {\n    info!(\"user {} logged in\", id);\n    info!(\"user {} logged out\", id);\n}\n";
        let index = SourceIndex::new(log_points("src/auth.rs", source));
        let log = "2023-01-29T08:00:00Z user 7 logged in\n\
                   2023-01-29T08:00:01Z user 7 logged out\n\
                   2023-01-29T08:00:02Z user 8 logged in\n";
        let files = [("auth.log".to_string(), log.as_bytes().to_vec())];
        let texts = |c: &Corpus| -> Vec<String> {
            c.lines
                .iter()
                .map(|l| c.miner.templates()[l.template as usize].text())
                .collect()
        };
        let mined = Corpus::read(&files, Options::default());
        assert_eq!(
            mined.lines[0].template,
            mined.lines[1].template,
            "{:?}",
            texts(&mined)
        );
        let read = Corpus::read_with(&files, Options::default(), None, Some(&index));
        assert_eq!(
            texts(&read),
            [
                "src/auth.rs:2 user <NUM> logged in",
                "src/auth.rs:3 user <NUM> logged out",
                "src/auth.rs:2 user <NUM> logged in",
            ]
        );
        let values: Vec<&str> = read
            .lines
            .iter()
            .filter_map(|l| read.values(l).next())
            .collect();
        assert_eq!(values, ["7", "7", "8"]);
    }

    proptest::proptest! {
        #[test]
        fn lines_split_as_the_standard_split_does(
            bytes in proptest::collection::vec(proptest::prop_oneof![
                proptest::strategy::Just(b'\n'),
                proptest::strategy::Just(b'\r'),
                proptest::prelude::any::<u8>(),
            ], 0..200),
        ) {
            let ours: Vec<&[u8]> = split_lines(&bytes).collect();
            let standard: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
            proptest::prop_assert_eq!(ours, standard);
        }

        #[test]
        fn the_timeline_is_the_lines_by_time_then_index(
            files in proptest::collection::vec(
                proptest::collection::vec(proptest::option::of(-3i64..3), 0..30),
                1..4,
            ),
        ) {
            // Seconds around the epoch, many equal, some lines with none (they take their
            // index as their time).
            let files: Vec<(String, Vec<u8>)> = files
                .iter()
                .enumerate()
                .map(|(f, times)| {
                    let text: String = times
                        .iter()
                        .map(|t| match t {
                            Some(t) => format!("{} INFO x {f}\n", header::format_iso(t * 1_000_000_000)),
                            None => format!("no time {f}\n"),
                        })
                        .collect();
                    (format!("{f}.log"), text.into_bytes())
                })
                .collect();
            let corpus = Corpus::read(&files, Options::default());
            let mut expected: Vec<(i64, usize)> =
                (0..corpus.lines.len()).map(|i| (corpus.time(i), i)).collect();
            expected.sort_unstable();
            let timeline: Vec<(i64, usize)> =
                corpus.timeline().iter().map(|m| (m.time, m.line)).collect();
            proptest::prop_assert_eq!(timeline, expected);
        }
    }
}

//! Span-log segment files (Dapper's local logs): one directory per process, files of
//! native records rotated by size. A new writer never appends to an old file, so a file
//! torn by a crash stays torn only at its end, where readers detect and skip it.
//!
//! Files are `<span-log dir>/<service>-<pid>/<sequence, 20 digits>.cwlog`, rotated at
//! `Config::segment_bytes` (64 MiB). A writer that hits a write error also starts a new
//! file, so a torn record can only be at a file's end. `causeway agent` ships the files.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use causeway_model::codec::native::{self, Problem};
use causeway_model::Span;

use crate::pipeline::SpanSink;

/// The extension of segment files.
pub const SEGMENT_EXTENSION: &str = "cwlog";

/// Writes native records into rotating segment files.
pub struct SegmentWriter {
    dir: PathBuf,
    max_bytes: u64,
    seq: u64,
    file: Option<BufWriter<File>>,
    written: u64,
    buf: Vec<u8>,
    errors: u64,
}

fn dir_name(service: &str, pid: u32) -> String {
    let clean: String = service
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{clean}-{pid}")
}

/// The segment files of a directory, oldest first.
pub fn segment_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files: Vec<(u64, PathBuf)> = fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let p = e.path();
            if p.extension()? != SEGMENT_EXTENSION {
                return None;
            }
            let seq = p.file_stem()?.to_str()?.parse().ok()?;
            Some((seq, p))
        })
        .collect();
    files.sort();
    Ok(files.into_iter().map(|(_, p)| p).collect())
}

impl SegmentWriter {
    /// Opens `<root>/<service>-<pid>/` and starts a new segment after any already there.
    pub fn open(root: &Path, service: &str, pid: u32, max_bytes: u64) -> io::Result<SegmentWriter> {
        let dir = root.join(dir_name(service, pid));
        fs::create_dir_all(&dir)?;
        let seq = segment_files(&dir)?
            .last()
            .and_then(|p| p.file_stem()?.to_str()?.parse::<u64>().ok())
            .map_or(1, |s| s + 1);
        Ok(SegmentWriter {
            dir,
            max_bytes: max_bytes.max(1),
            seq,
            file: None,
            written: 0,
            buf: Vec::with_capacity(64 << 10),
            errors: 0,
        })
    }

    /// The process's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn current(&mut self) -> io::Result<&mut BufWriter<File>> {
        if self.file.is_none() {
            let path = self
                .dir
                .join(format!("{:020}.{SEGMENT_EXTENSION}", self.seq));
            let f = fs::OpenOptions::new()
                .create_new(true)
                .write(true)
                .open(path)?;
            self.file = Some(BufWriter::with_capacity(256 << 10, f));
            self.written = 0;
        }
        // just set above when missing
        self.file
            .as_mut()
            .ok_or_else(|| io::Error::other("no segment file"))
    }

    fn rotate(&mut self) -> io::Result<()> {
        if let Some(mut f) = self.file.take() {
            self.seq += 1;
            self.written = 0;
            f.flush()?;
        }
        Ok(())
    }

    fn write_buf(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let n = self.buf.len() as u64;
        let buf = std::mem::take(&mut self.buf);
        let r = self.current().and_then(|f| f.write_all(&buf));
        self.buf = buf;
        self.buf.clear();
        r?;
        self.written += n;
        Ok(())
    }

    fn report(&mut self, e: io::Error) {
        self.errors += 1;
        // Report the first failure and then every thousandth, not one line per span.
        if self.errors == 1 || self.errors.is_multiple_of(1000) {
            tracing::warn!(target: "causeway", dir = %self.dir.display(), error = %e, errors = self.errors, "span-log write failed");
        }
        // Start afresh in a new file: the failed one may end in a torn record.
        self.buf.clear();
        if self.file.take().is_some() {
            self.seq += 1;
            self.written = 0;
        }
    }
}

impl SpanSink for SegmentWriter {
    fn write(&mut self, spans: &[Span]) {
        // Coalesce a batch's records into one buffer: one write call, not one per span.
        for s in spans {
            let before = self.buf.len();
            native::encode(s, &mut self.buf);
            let record = self.buf.len() - before;
            let in_file = self.written + before as u64;
            if in_file > 0 && in_file + record as u64 > self.max_bytes {
                // This record would cross the rotation size: it opens the next file.
                let rest = self.buf.split_off(before);
                let result = self.write_buf().and_then(|_| self.rotate());
                if let Err(e) = result {
                    self.report(e);
                }
                self.buf = rest;
            }
        }
        if let Err(e) = self.write_buf() {
            self.report(e);
        }
    }

    fn flush(&mut self) {
        if let Some(f) = self.file.as_mut() {
            if let Err(e) = f.flush() {
                self.report(e);
            }
        }
    }
}

/// What reading segment files produced.
#[derive(Debug, Default)]
pub struct ReadSegments {
    /// Every span in every good record, oldest file first.
    pub spans: Vec<Span>,
    /// Damage found and skipped, with its file.
    pub problems: Vec<(PathBuf, Problem)>,
}

/// Reads every segment file of a process directory, skipping and reporting damage.
pub fn read_dir(dir: &Path) -> io::Result<ReadSegments> {
    let mut out = ReadSegments::default();
    for path in segment_files(dir)? {
        let bytes = fs::read(&path)?;
        let d = native::decode_stream(&bytes);
        out.spans.extend(d.spans);
        out.problems
            .extend(d.problems.into_iter().map(|p| (path.clone(), p)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_model::{SpanId, TraceId};

    fn span(i: u64) -> Span {
        let mut s = Span::new(
            TraceId::new(i as u128 + 1).unwrap(),
            SpanId::new(i + 1).unwrap(),
            None,
            format!("op{i}"),
            "svc",
            i,
            i + 10,
        );
        s.attributes
            .push(causeway_model::KeyValue::new("k", "v".repeat(50)));
        s
    }

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("causeway-seg-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn rotates_by_size_and_reads_back_every_span_in_order() {
        let root = tempdir("rotate");
        let mut w = SegmentWriter::open(&root, "my svc", 42, 2_000).unwrap();
        let spans: Vec<Span> = (0..100).map(span).collect();
        for chunk in spans.chunks(7) {
            w.write(chunk);
        }
        w.flush();
        assert!(w.dir().ends_with("my_svc-42"));
        let files = segment_files(w.dir()).unwrap();
        assert!(files.len() > 3, "{} files", files.len());
        for f in &files {
            assert!(fs::metadata(f).unwrap().len() <= 2_000 + 200);
        }
        let r = read_dir(w.dir()).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.spans, spans);
        // a second writer starts a new file after the last one
        let w2 = SegmentWriter::open(&root, "my svc", 42, 2_000).unwrap();
        assert_eq!(w2.seq, files.len() as u64 + 1);
        let _ = fs::remove_dir_all(root);
    }

    #[test]
    fn a_truncated_last_record_is_skipped_and_reported() {
        let root = tempdir("torn");
        let mut w = SegmentWriter::open(&root, "svc", 1, 1 << 20).unwrap();
        let spans: Vec<Span> = (0..10).map(span).collect();
        w.write(&spans);
        w.flush();
        let file = segment_files(w.dir()).unwrap().pop().unwrap();
        let len = fs::metadata(&file).unwrap().len();
        let f = fs::OpenOptions::new().write(true).open(&file).unwrap();
        f.set_len(len - 5).unwrap();
        let r = read_dir(w.dir()).unwrap();
        assert_eq!(r.spans, spans[..9]);
        assert_eq!(r.problems.len(), 1);
        assert!(
            matches!(r.problems[0].1, Problem::TornTail { .. }),
            "{:?}",
            r.problems
        );
        let _ = fs::remove_dir_all(root);
    }
}

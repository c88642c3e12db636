//! `causeway logs`' input: the files named, read whole (parallel per file) when they fit
//! in one window, else as streams cut into windows; gzip read decompressed, binary files
//! skipped.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use causeway_logflow::format::Format;
use causeway_logflow::window::{Stream, Window, WindowOptions, Windows};
use indicatif::ProgressBar;

/// Bytes looked at to tell a binary file from a log.
const SNIFF: usize = 8192;

/// How a gzip file starts (it is read decompressed, whatever its name).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The files `paths` name, each with the name reported for it.
fn files(paths: &[PathBuf]) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found = Vec::new();
            walk(path, &mut found)?;
            found.sort();
            for f in found {
                let name = f
                    .strip_prefix(path)
                    .unwrap_or(&f)
                    .to_string_lossy()
                    .into_owned();
                out.push((name, f));
            }
        } else if path.is_file() {
            out.push((path.to_string_lossy().into_owned(), path.clone()));
        } else {
            match std::fs::metadata(path) {
                Ok(m) => bail!(
                    "{}: not a log file or a directory of them (it is {})",
                    path.display(),
                    kind_of(&m.file_type())
                ),
                Err(e) => bail!("{}: {e}", path.display()),
            }
        }
    }
    Ok(out)
}

/// What a path that is neither a file nor a directory is, in words.
fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a named pipe"
    } else if t.is_socket() {
        "a socket"
    } else {
        "neither a file nor a directory"
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// A log file read: the name reported for it, and its bytes.
pub type LogFile = (String, Vec<u8>);

/// The logs at `paths` read, and the names of binary files skipped (with a warning).
pub fn read_paths(paths: &[PathBuf]) -> Result<(Vec<LogFile>, Vec<String>)> {
    read_files(files(paths)?)
}

/// The logs `files` name read whole, and the names of binary files skipped.
fn read_files(files: Vec<(String, PathBuf)>) -> Result<(Vec<LogFile>, Vec<String>)> {
    let progress = crate::progress::bar(files.len() as u64, "files read");
    // Files are read (and decompressed) on every core, a file at a time; the results and
    // warnings come out in file order.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len().max(1));
    let mut read: Vec<Option<Result<FileRead>>> = (0..files.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((name, path)) = files.get(i) else {
                            break;
                        };
                        done.push((i, read_one(name, path)));
                        progress.inc(1);
                    }
                    done
                })
            })
            .collect();
        for h in handles {
            for (i, r) in h.join().unwrap_or_default() {
                read[i] = Some(r);
            }
        }
    });
    progress.finish_and_clear();
    let mut logs = Vec::new();
    let mut skipped = Vec::new();
    for ((name, _), r) in files.into_iter().zip(read) {
        let (bytes, warnings) = r.context("a file was not read")??;
        for w in warnings {
            eprintln!("warning: {name}: {w}");
        }
        match bytes {
            Some(bytes) => logs.push((name, bytes)),
            None => skipped.push(name),
        }
    }
    Ok((logs, skipped))
}

/// One file's bytes (decompressed), or none for a binary file, and what to warn of.
type FileRead = (Option<Vec<u8>>, Vec<String>);

fn read_one(name: &str, path: &Path) -> Result<FileRead> {
    let mut warnings = Vec::new();
    let mut bytes = std::fs::read(path).with_context(|| format!("reading {name}"))?;
    if bytes.starts_with(&GZIP_MAGIC) {
        let mut plain = Vec::new();
        if let Err(e) = flate2::read::MultiGzDecoder::new(&bytes[..]).read_to_end(&mut plain) {
            warnings.push(format!(
                "gzip data cut short or corrupt ({e}): read up to the damage"
            ));
        }
        bytes = plain;
    }
    if bytes[..bytes.len().min(SNIFF)].contains(&0) {
        warnings.push("not a log (binary), skipped".to_string());
        return Ok((None, warnings));
    }
    Ok((Some(bytes), warnings))
}

/// The logs as windows: one, read whole, when they fit in one; else read as streams.
pub enum Input {
    Whole(Option<Window>),
    Streamed(Windows, ProgressBar),
}

impl Input {
    pub fn next_window(&mut self) -> Option<Window> {
        match self {
            Input::Whole(w) => w.take(),
            Input::Streamed(windows, bar) => {
                let w = windows.next_window();
                if w.is_none() {
                    bar.finish_and_clear();
                }
                w
            }
        }
    }
}

/// The logs at `paths` as windows of `options`, the names of the files read (in the
/// windows' order) and of the binary files skipped.
pub fn open(
    paths: &[PathBuf],
    options: WindowOptions,
    format: Option<Format>,
) -> Result<(Input, Vec<String>, Vec<String>)> {
    let files = files(paths)?;
    let mut size = 0u64;
    let mut compressed = false;
    for (name, path) in &files {
        let mut start = [0u8; 2];
        let mut f = File::open(path).with_context(|| format!("opening {name}"))?;
        let n = f
            .read(&mut start)
            .with_context(|| format!("reading {name}"))?;
        compressed |= start[..n] == GZIP_MAGIC;
        size += f.metadata().map_or(0, |m| m.len());
    }
    if !compressed && size <= options.max_bytes as u64 {
        let (logs, skipped) = read_files(files)?;
        let names = logs.iter().map(|(name, _)| name.clone()).collect();
        let window = Window {
            first_lines: vec![1; logs.len()],
            new_from: vec![1; logs.len()],
            overlap_from: vec![u32::MAX; logs.len()],
            files: logs,
            warnings: Vec::new(),
            counts: None,
        };
        return Ok((Input::Whole(Some(window)), names, skipped));
    }
    let bar = crate::progress::bytes_bar(size, "read");
    let mut streams = Vec::new();
    let mut skipped = Vec::new();
    for (name, path) in files {
        match stream(&name, &path, &bar)? {
            Some(reader) => streams.push(Stream { name, reader }),
            None => {
                eprintln!("warning: {name}: not a log (binary), skipped");
                skipped.push(name);
            }
        }
    }
    let names = streams.iter().map(|s| s.name.clone()).collect();
    Ok((
        Input::Streamed(Windows::new(streams, format, options), bar),
        names,
        skipped,
    ))
}

/// A file read as it goes, counting the bytes read off the disk.
struct Counted {
    file: File,
    bar: ProgressBar,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        self.bar.inc(n as u64);
        Ok(n)
    }
}

/// A decompressing reader whose errors say that the compressed data is at fault.
struct GzipErrors<R>(R);

impl<R: Read> Read for GzipErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf).map_err(|e| {
            std::io::Error::new(e.kind(), format!("gzip data cut short or corrupt ({e})"))
        })
    }
}

/// File `path` as a stream of its lines (decompressed), or none if it is binary.
fn stream(name: &str, path: &Path, bar: &ProgressBar) -> Result<Option<Box<dyn BufRead + Send>>> {
    let file = File::open(path).with_context(|| format!("opening {name}"))?;
    let mut raw = BufReader::new(Counted {
        file,
        bar: bar.clone(),
    });
    let gzip = raw
        .fill_buf()
        .with_context(|| format!("reading {name}"))?
        .starts_with(&GZIP_MAGIC);
    let mut reader: Box<dyn BufRead + Send> = if gzip {
        Box::new(BufReader::new(GzipErrors(
            flate2::read::MultiGzDecoder::new(raw),
        )))
    } else {
        Box::new(raw)
    };
    // The start, to tell a binary file.
    let mut start = Vec::with_capacity(SNIFF);
    let damaged = (&mut reader)
        .take(SNIFF as u64)
        .read_to_end(&mut start)
        .err();
    if start.contains(&0) {
        return Ok(None);
    }
    if let Some(e) = damaged {
        eprintln!("warning: {name}: {e}: read up to the damage");
        return Ok(Some(Box::new(std::io::Cursor::new(start))));
    }
    Ok(Some(Box::new(std::io::Cursor::new(start).chain(reader))))
}

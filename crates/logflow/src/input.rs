//! Logs read from files: the files named (directories walked), read whole (parallel per
//! file) when they fit in one window, else as streams cut into windows; gzip read
//! decompressed, binary files skipped.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::format::Format;
use crate::window::{Stream, Window, WindowOptions, Windows};

/// Why logs could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A path named is neither a file nor a directory.
    #[error("{}: not a log file or a directory of them (it is {kind})", path.display())]
    NotALog {
        /// The path.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// A file or directory could not be read.
    #[error("{what}: {source}")]
    Io {
        /// What was being read, named as reported.
        what: String,
        /// What failed.
        source: std::io::Error,
    },
}

fn io(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> InputError {
    move |source| InputError::Io {
        what: what.to_string(),
        source,
    }
}

type Result<T> = std::result::Result<T, InputError>;

/// What reading tells as it goes (a progress bar, say): files read whole, or bytes
/// read off the disk from streams.
pub trait Progress: Send + Sync {
    /// Reading begins: `total` files, or bytes when `bytes`.
    fn begin(&self, total: u64, bytes: bool);
    /// `n` more files or bytes read.
    fn advance(&self, n: u64);
    /// Reading is over.
    fn end(&self);
}

/// Progress told to no one.
pub struct Quiet;

impl Progress for Quiet {
    fn begin(&self, _: u64, _: bool) {}
    fn advance(&self, _: u64) {}
    fn end(&self) {}
}

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
            return Err(match std::fs::metadata(path) {
                Ok(m) => InputError::NotALog {
                    path: path.clone(),
                    kind: kind_of(&m.file_type()),
                },
                Err(source) => InputError::Io {
                    what: path.display().to_string(),
                    source,
                },
            });
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
    let listing = |source| InputError::Io {
        what: format!("reading {}", dir.display()),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(listing)? {
        let path = entry.map_err(listing)?.path();
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

/// Logs read whole, the names of binary files skipped, and what to warn of (`name: why`).
pub struct LogsRead {
    /// The logs, in the order named (a directory's files sorted).
    pub files: Vec<LogFile>,
    /// Binary files, left out.
    pub skipped: Vec<String>,
    /// Damage read up to, files skipped, each `name: why`.
    pub warnings: Vec<String>,
}

/// The logs at `paths` read whole.
pub fn read_paths(paths: &[PathBuf], progress: &dyn Progress) -> Result<LogsRead> {
    read_files(files(paths)?, progress)
}

/// The logs `files` name read whole.
fn read_files(files: Vec<(String, PathBuf)>, progress: &dyn Progress) -> Result<LogsRead> {
    progress.begin(files.len() as u64, false);
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
                        progress.advance(1);
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
    progress.end();
    let mut out = LogsRead {
        files: Vec::new(),
        skipped: Vec::new(),
        warnings: Vec::new(),
    };
    for ((name, path), r) in files.into_iter().zip(read) {
        // A reader thread that panicked leaves its files unread.
        let (bytes, warnings) = r.unwrap_or_else(|| {
            Err(InputError::Io {
                what: path.display().to_string(),
                source: std::io::Error::other("not read"),
            })
        })?;
        out.warnings
            .extend(warnings.into_iter().map(|w| format!("{name}: {w}")));
        match bytes {
            Some(bytes) => out.files.push((name, bytes)),
            None => out.skipped.push(name),
        }
    }
    Ok(out)
}

/// One file's bytes (decompressed), or none for a binary file, and what to warn of.
type FileRead = (Option<Vec<u8>>, Vec<String>);

fn read_one(name: &str, path: &Path) -> Result<FileRead> {
    let mut warnings = Vec::new();
    let mut bytes = std::fs::read(path).map_err(io(format_args!("reading {name}")))?;
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

/// Logs as windows: one, read whole, when they fit in one; else read as streams.
pub struct Input {
    windows: Windowed,
    progress: Arc<dyn Progress>,
    /// The files read, in the windows' order.
    pub names: Vec<String>,
    /// Binary files, left out.
    pub skipped: Vec<String>,
    /// What opening found to warn of, each `name: why`.
    pub warnings: Vec<String>,
}

enum Windowed {
    Whole(Option<Window>),
    Streamed(Windows),
}

impl Input {
    /// The next window of lines, or none at the end.
    pub fn next_window(&mut self) -> Option<Window> {
        match &mut self.windows {
            Windowed::Whole(w) => w.take(),
            Windowed::Streamed(windows) => {
                let w = windows.next_window();
                if w.is_none() {
                    self.progress.end();
                }
                w
            }
        }
    }
}

/// The logs at `paths` as windows of `options`.
pub fn open(
    paths: &[PathBuf],
    options: WindowOptions,
    format: Option<Format>,
    progress: Arc<dyn Progress>,
) -> Result<Input> {
    let files = files(paths)?;
    let mut size = 0u64;
    let mut compressed = false;
    for (name, path) in &files {
        let mut start = [0u8; 2];
        let mut f = File::open(path).map_err(io(format_args!("opening {name}")))?;
        let n = f
            .read(&mut start)
            .map_err(io(format_args!("reading {name}")))?;
        compressed |= start[..n] == GZIP_MAGIC;
        size += f.metadata().map_or(0, |m| m.len());
    }
    if !compressed && size <= options.max_bytes as u64 {
        let read = read_files(files, progress.as_ref())?;
        let names = read.files.iter().map(|(name, _)| name.clone()).collect();
        let window = Window {
            first_lines: vec![1; read.files.len()],
            new_from: vec![1; read.files.len()],
            overlap_from: vec![u32::MAX; read.files.len()],
            files: read.files,
            warnings: Vec::new(),
            counts: None,
        };
        return Ok(Input {
            windows: Windowed::Whole(Some(window)),
            progress,
            names,
            skipped: read.skipped,
            warnings: read.warnings,
        });
    }
    progress.begin(size, true);
    let mut streams = Vec::new();
    let mut skipped = Vec::new();
    let mut warnings = Vec::new();
    for (name, path) in files {
        match stream(&name, &path, &progress, &mut warnings)? {
            Some(reader) => streams.push(Stream { name, reader }),
            None => {
                warnings.push(format!("{name}: not a log (binary), skipped"));
                skipped.push(name);
            }
        }
    }
    let names = streams.iter().map(|s| s.name.clone()).collect();
    Ok(Input {
        windows: Windowed::Streamed(Windows::new(streams, format, options)),
        progress,
        names,
        skipped,
        warnings,
    })
}

/// A file read as it goes, counting the bytes read off the disk.
struct Counted {
    file: File,
    progress: Arc<dyn Progress>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        self.progress.advance(n as u64);
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
fn stream(
    name: &str,
    path: &Path,
    progress: &Arc<dyn Progress>,
    warnings: &mut Vec<String>,
) -> Result<Option<Box<dyn BufRead + Send>>> {
    let file = File::open(path).map_err(io(format_args!("opening {name}")))?;
    let mut raw = BufReader::new(Counted {
        file,
        progress: progress.clone(),
    });
    let gzip = raw
        .fill_buf()
        .map_err(io(format_args!("reading {name}")))?
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
        warnings.push(format!("{name}: {e}: read up to the damage"));
        return Ok(Some(Box::new(std::io::Cursor::new(start))));
    }
    Ok(Some(Box::new(std::io::Cursor::new(start).chain(reader))))
}

//! Capture logs read back: each file's process, its records counted, what the capture
//! warned about, and where a damaged log stops.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::format::{warning, Call, Direction, Origin, Reader, Record, LOG_SUFFIX};
use serde::Serialize;

/// Why capture logs could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A file or directory could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// One process's log, summarised.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LogSummary {
    /// The log file.
    pub path: PathBuf,
    /// The host the process ran on.
    pub host: String,
    /// The process's id.
    pub pid: u32,
    /// Its parent's process id.
    pub ppid: u32,
    /// `start` (loaded at program start or exec) or `fork`.
    pub origin: &'static str,
    /// The executable's path.
    pub exe: String,
    /// The command line, one string per argument (its first KiB).
    pub args: Vec<String>,
    /// Records read (up to the damage, if any).
    pub records: u64,
    /// Connections made, accepted or found in use.
    pub connections: u64,
    /// Bytes the process sent on its sockets.
    pub bytes_sent: u64,
    /// Bytes it received on its sockets (peeks not counted).
    pub bytes_received: u64,
    /// HTTP/2 frame headers recorded (those that delimit a stream's messages).
    pub http2_frames: u64,
    /// Records per libc function.
    pub calls: BTreeMap<&'static str, u64>,
    /// What the capture warned about, in log order.
    pub warnings: Vec<LogWarning>,
    /// Where the log stops being readable (a cut or corrupt log), if it does.
    pub damage: Option<String>,
}

/// Something the capture could not see in a process.
#[derive(Clone, Debug, Serialize)]
pub struct LogWarning {
    /// The warning: `dropped`, `io_uring`, `static_exec`, `table_full` or `unknown`.
    pub what: &'static str,
    /// How many (records dropped, for `dropped`; otherwise 1).
    pub count: u64,
    /// The capture's text about it (for `static_exec`, the program's path).
    pub detail: String,
}

fn warning_name(code: u16) -> &'static str {
    match code {
        warning::DROPPED => "dropped",
        warning::IO_URING => "io_uring",
        warning::STATIC_EXEC => "static_exec",
        warning::TABLE_FULL => "table_full",
        _ => "unknown",
    }
}

/// Summarises one log's bytes (`path` only names it).
pub fn summarize(path: &Path, log: &[u8]) -> LogSummary {
    let mut s = LogSummary {
        path: path.to_path_buf(),
        ..LogSummary::default()
    };
    let mut reader = Reader::new(log);
    for record in reader.by_ref() {
        s.records += 1;
        let call = match &record {
            Record::Process {
                pid,
                ppid,
                origin,
                host,
                exe,
                args,
                ..
            } => {
                s.pid = *pid;
                s.ppid = *ppid;
                s.origin = match origin {
                    Origin::Start => "start",
                    Origin::Fork => "fork",
                };
                s.host = String::from_utf8_lossy(host).into_owned();
                s.exe = String::from_utf8_lossy(exe).into_owned();
                s.args = args
                    .split(|b| *b == 0)
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                None
            }
            Record::Socket { call, .. }
            | Record::Bind { call, .. }
            | Record::Close { call, .. }
            | Record::Dup { call, .. }
            | Record::Fork { call, .. } => Some(*call),
            Record::Connection { call, .. } => {
                s.connections += 1;
                Some(*call)
            }
            Record::Data {
                call,
                direction,
                bytes,
                peek,
                ..
            } => {
                if !peek {
                    match direction {
                        Direction::Send => s.bytes_sent = s.bytes_sent.saturating_add(*bytes),
                        Direction::Recv => {
                            s.bytes_received = s.bytes_received.saturating_add(*bytes)
                        }
                    }
                }
                Some(*call)
            }
            Record::Exec { .. } => Some(Call::Execve),
            Record::Frames { frames, .. } => {
                s.http2_frames += (frames.len() / crate::format::Frame::LEN) as u64;
                None
            }
            Record::Warning {
                code,
                count,
                detail,
                ..
            } => {
                s.warnings.push(LogWarning {
                    what: warning_name(*code),
                    count: *count,
                    detail: String::from_utf8_lossy(detail).into_owned(),
                });
                None
            }
        };
        if let Some(call) = call {
            *s.calls.entry(call.name()).or_default() += 1;
        }
    }
    s.damage = reader.damage().map(|d| d.to_string());
    s
}

/// The capture logs in `dir` (not recursive), in name order.
pub fn log_files(dir: &Path) -> Result<Vec<PathBuf>, LogError> {
    let io = |source| LogError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_str().is_some_and(|s| s.ends_with(LOG_SUFFIX)))
        .collect();
    files.sort();
    Ok(files)
}

/// The log files `paths` name: files as given, directories' logs in name order.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LogError> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            files.extend(log_files(path)?);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// Summaries of the logs at `paths` (files, or directories of logs).
pub fn summarize_paths(paths: &[PathBuf]) -> Result<Vec<LogSummary>, LogError> {
    let mut out = Vec::new();
    for file in expand(paths)? {
        let bytes = std::fs::read(&file).map_err(|source| LogError::Io {
            path: file.clone(),
            source,
        })?;
        out.push(summarize(&file, &bytes));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Endpoint, Stamp, MAGIC};

    fn encode(records: &[Record<'_>]) -> Vec<u8> {
        let mut log = MAGIC.to_vec();
        let mut buf = [0u8; 4096];
        for r in records {
            let n = r.encode(&mut buf).expect("fits");
            log.extend_from_slice(&buf[..n]);
        }
        log
    }

    #[test]
    fn a_summary_counts_what_the_log_holds_and_where_it_is_cut() {
        let at = Stamp::default();
        let data = |direction, bytes, peek| Record::Data {
            at,
            call: Call::Write,
            fd: 5,
            conn: 1,
            direction,
            bytes,
            errno: 0,
            offset: 0,
            peer: Endpoint::None,
            checksum: 0,
            peek,
        };
        let log = encode(&[
            Record::Process {
                pid: 42,
                ppid: 1,
                origin: Origin::Fork,
                at,
                host: b"h",
                exe: b"/bin/x",
                args: b"x\0-v",
            },
            Record::Connection {
                at,
                call: Call::Connect,
                fd: 5,
                conn: 1,
                kind: 1,
                local: Endpoint::V4([127, 0, 0, 1], 40000),
                peer: Endpoint::V4([127, 0, 0, 1], 80),
                peer_pid: 0,
                errno: 0,
                mid_stream: false,
            },
            data(Direction::Send, 100, false),
            data(Direction::Recv, 7, true),
            data(Direction::Recv, 300, false),
            Record::Warning {
                at,
                code: warning::IO_URING,
                count: 1,
                detail: b"io_uring in use",
            },
        ]);
        let whole = summarize(Path::new("x.sockcap"), &log);
        assert_eq!((whole.pid, whole.ppid, whole.origin), (42, 1, "fork"));
        assert_eq!(whole.args, ["x", "-v"]);
        assert_eq!((whole.records, whole.connections), (6, 1));
        assert_eq!((whole.bytes_sent, whole.bytes_received), (100, 300));
        assert_eq!(whole.calls.get("write"), Some(&3));
        assert_eq!(whole.warnings.len(), 1);
        assert_eq!(whole.warnings[0].what, "io_uring");
        assert!(whole.damage.is_none());

        let cut = summarize(Path::new("x.sockcap"), &log[..log.len() - 5]);
        assert_eq!(cut.records, 5);
        let damage = cut.damage.expect("a cut log is damaged");
        assert!(damage.contains("cut short"), "{damage}");
    }
}

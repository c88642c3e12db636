//! Application log files followed by the agent: each pass reads what was appended since the
//! last, up to its last whole line, and ships the lines that name a trace
//! (`causeway_logflow::context`) as log records of their spans, in native batches.
//!
//! A file is known by its device and inode, not its path: logrotate's rename keeps the
//! position of the renamed file (give a glob that matches the rotated names too, such as
//! `app.log*`, to read the last lines written before the rename), and the new file starts
//! at its beginning. A file shorter than its position was truncated (copytruncate): read
//! from the start. Positions are saved in the checkpoint once the collector has taken a
//! file's records, so a restart neither loses nor re-sends lines; files gone are forgotten.
//! At most 16 MiB of a file is read per pass. With `join`, what a file gained goes to its
//! tail (`super::plain`) when none of it named a trace.

use std::collections::HashSet;
use std::io::{Read as _, Seek as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use causeway_logflow::context::LogRecords;
use serde::{Deserialize, Serialize};

use super::{io, Agent, AgentError, PassStats};

/// Bytes of one file read in one pass at most.
const MAX_READ: u64 = 16 << 20;

/// How far one log file has been read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Position {
    /// Where it was last seen.
    path: PathBuf,
    /// Bytes read.
    offset: u64,
    /// Lines read.
    lines: u32,
}

/// The files the globs match now.
fn matched(globs: &[String]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = globs
        .iter()
        .filter_map(|g| glob::glob(g).ok())
        .flat_map(|paths| paths.flatten())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out.dedup();
    out
}

impl Agent {
    /// Reads what each followed log file gained and ships its lines that name a trace.
    pub(super) fn ship_logs(&mut self, stats: &mut PassStats) -> Result<(), AgentError> {
        if self.config.logs.is_empty() {
            return Ok(());
        }
        let mut seen = HashSet::new();
        for path in matched(&self.config.logs) {
            let Ok(meta) = std::fs::metadata(&path) else {
                continue; // gone since it was matched
            };
            let key = format!("{}:{}", meta.dev(), meta.ino());
            seen.insert(key.clone());
            let mut position = self.checkpoint.logs.get(&key).cloned().unwrap_or_default();
            position.path = path.clone();
            if meta.len() < position.offset {
                position = Position {
                    path: path.clone(),
                    ..Position::default()
                };
            }
            if meta.len() == position.offset {
                self.checkpoint.logs.insert(key, position);
                continue;
            }
            let (lines, consumed, plain) = self.ship_lines(&path, &position, stats)?;
            if let (Some(plain), true) = (plain, self.config.join.is_some()) {
                let name = path.file_name().map_or_else(
                    || path.display().to_string(),
                    |n| n.to_string_lossy().into_owned(),
                );
                self.tail_lines(&key, &name, position.lines + 1, plain);
            }
            position.offset += consumed;
            position.lines += lines;
            self.checkpoint.logs.insert(key, position);
            self.save()?;
        }
        self.tails.retain(|key, _| seen.contains(key));
        let before = self.checkpoint.logs.len();
        self.checkpoint.logs.retain(|key, _| seen.contains(key));
        if self.checkpoint.logs.len() != before {
            self.save()?;
        }
        Ok(())
    }

    /// Ships the whole lines of `path` after `from`; the lines read, the bytes they took,
    /// and those bytes when no line named a trace.
    fn ship_lines(
        &self,
        path: &Path,
        from: &Position,
        stats: &mut PassStats,
    ) -> Result<(u32, u64, Option<Vec<u8>>), AgentError> {
        let mut file = std::fs::File::open(path).map_err(io("open log file", path))?;
        file.seek(std::io::SeekFrom::Start(from.offset))
            .map_err(io("read log file", path))?;
        let mut bytes = Vec::new();
        file.take(MAX_READ)
            .read_to_end(&mut bytes)
            .map_err(io("read log file", path))?;
        // A line still being written is read on a later pass.
        let whole = match bytes.iter().rposition(|&b| b == b'\n') {
            Some(end) => end + 1,
            None if bytes.len() as u64 == MAX_READ => bytes.len(),
            None => return Ok((0, 0, None)),
        };
        let text = String::from_utf8_lossy(&bytes[..whole]);
        let name = path.display().to_string();
        let mut records = LogRecords::default();
        let mut lines = 0u32;
        for line in text.lines() {
            lines += 1;
            records.read_line(&name, from.lines + lines, line);
        }
        self.ship_spans(&records.take_carriers(), stats)?;
        stats.log_lines += u64::from(lines);
        stats.log_records += (records.lines - records.untimed) as u64;
        let plain = (records.lines == 0).then(|| {
            bytes.truncate(whole);
            bytes
        });
        Ok((lines, whole as u64, plain))
    }
}

//! `causeway capture -- CMD ARGS...`: runs a program with the socket-capture library
//! preloaded (it and every descendant write a log each), and `causeway capture-log`,
//! which prints logs record by record.
//!
//! This is WAP5's first step: what unmodified programs do with their sockets, one log per
//! process. The preload library is embedded in the binary (`crates/cli/build.rs` builds
//! `crates/sockcap` in a target directory of its own); `capture` writes it to
//! `$TMPDIR/causeway/libcauseway_sockcap-VERSION-CRC.so`, runs CMD with it in `LD_PRELOAD`
//! and `CAUSEWAY_CAPTURE_DIR` set, and waits (Ctrl-C goes to the program; the command stays
//! to report). It then summarises the new logs: processes, connections, records, the
//! library's warnings, damaged logs. Its exit status is the program's. It warns before the
//! run when CMD is a static ELF (no `PT_INTERP`: `LD_PRELOAD` cannot reach it).
//! `capture-log PATH...` prints logs record by record, or `--summary` / `--json`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use causeway_blackbox::elf;
use causeway_blackbox::format::{Reader, Record, DIR_VAR};
use causeway_blackbox::logs::{self, LogSummary};
use clap::Args;

/// The preload library, built by this crate's build script.
const LIBRARY: &[u8] = include_bytes!(env!("CAUSEWAY_SOCKCAP_LIBRARY"));

/// `causeway capture`: run a program with its socket calls captured.
#[derive(Args)]
pub struct CaptureArgs {
    /// Directory for the logs (one per process); created if missing.
    #[arg(long, default_value = "causeway-capture")]
    out: PathBuf,
    /// Print the summary as JSON on standard output.
    #[arg(long)]
    json: bool,
    /// The program to run, and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<String>,
}

/// `causeway capture-log`: print capture logs record by record, or summarised.
#[derive(Args)]
pub struct CaptureLogArgs {
    /// Capture logs, or directories of them.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Only a summary per log, not every record.
    #[arg(long)]
    summary: bool,
    /// JSON output (the summaries).
    #[arg(long)]
    json: bool,
}

/// Writes the library where the loader can map it, once per build of it.
pub fn library_file() -> Result<PathBuf> {
    let crc = causeway_blackbox::format::crc32c(LIBRARY);
    let dir = std::env::temp_dir().join("causeway");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!(
        "libcauseway_sockcap-{}-{crc:08x}.so",
        env!("CARGO_PKG_VERSION")
    ));
    let current = std::fs::read(&path).is_ok_and(|b| b == LIBRARY);
    if !current {
        // Written aside and renamed, so a concurrent capture never maps half a file.
        let partial = dir.join(format!(".sockcap-{}.partial", std::process::id()));
        std::fs::write(&partial, LIBRARY)
            .with_context(|| format!("writing {}", partial.display()))?;
        std::fs::rename(&partial, &path).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(path)
}

/// Where `program` is, as the shell would find it.
fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Why the library would not see `program`'s sockets, if it would not.
fn unseen_reason(program: &str) -> Option<String> {
    let path = which(program)?;
    let mut head = vec![0u8; elf::HEAD];
    let n = std::fs::File::open(&path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .ok()?;
    (elf::is_static(&head[..n]) == Some(true)).then(|| {
        format!(
            "{} is statically linked: LD_PRELOAD does not reach it, so its own socket calls are not captured (its peers' are)",
            path.display()
        )
    })
}

/// Runs `causeway capture`; its exit status is the program's.
pub fn capture(a: CaptureArgs) -> Result<()> {
    let Some((program, args)) = a.command.split_first() else {
        bail!("no command to run (give it after --)");
    };
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let out =
        std::fs::canonicalize(&a.out).with_context(|| format!("resolving {}", a.out.display()))?;
    let before: Vec<PathBuf> = logs::log_files(&out)?;
    let library = library_file()?;
    if let Some(reason) = unseen_reason(program) {
        eprintln!("warning: {reason}");
    }
    let preload = match std::env::var_os("LD_PRELOAD") {
        Some(existing) if !existing.is_empty() => {
            let mut v = library.clone().into_os_string();
            v.push(" ");
            v.push(existing);
            v
        }
        _ => library.clone().into_os_string(),
    };
    // Ctrl-C reaches the whole process group: the program decides what it does, and
    // this command waits for it and reports. (A handler, not SIG_IGN, which the program
    // would inherit.)
    extern "C" fn ignore(_: libc::c_int) {}
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installing a handler that does nothing.
        unsafe {
            libc::signal(
                sig,
                ignore as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
    }
    let status = Command::new(program)
        .args(args)
        .env("LD_PRELOAD", preload)
        .env(DIR_VAR, &out)
        .status()
        .with_context(|| format!("running {program}"))?;
    let new: Vec<PathBuf> = logs::log_files(&out)?
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    let summaries = logs::summarize_paths(&new)?;
    report(&out, &summaries, a.json)?;
    // The program's own status is the command's (a signal as a shell reports it).
    let code = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt as _;
        128 + status.signal().unwrap_or(0)
    });
    if code != 0 {
        std::process::exit(code);
    }
    Ok(())
}

/// What the capture wrote, on standard error (or as JSON on standard output).
fn report(out: &Path, summaries: &[LogSummary], json: bool) -> Result<()> {
    if json {
        let value = serde_json::json!({
            "dir": out,
            "processes": summaries,
        });
        outln!("{}", serde_json::to_string(&value)?);
        return Ok(());
    }
    let records: u64 = summaries.iter().map(|s| s.records).sum();
    let connections: u64 = summaries.iter().map(|s| s.connections).sum();
    eprintln!(
        "captured {} processes, {connections} connections, {records} records in {}",
        summaries.len(),
        out.display()
    );
    if summaries.is_empty() {
        eprintln!("warning: no process wrote a log: was the program statically linked, or did it clear LD_PRELOAD?");
    }
    for s in summaries {
        for w in &s.warnings {
            eprintln!(
                "warning: {} (pid {}): {} ({}): {}",
                s.exe, s.pid, w.what, w.count, w.detail
            );
        }
        if let Some(d) = &s.damage {
            eprintln!("warning: {}: read up to the damage {d}", s.path.display());
        }
    }
    Ok(())
}

/// Runs `causeway capture-log`.
pub fn capture_log(a: CaptureLogArgs) -> Result<()> {
    if a.summary || a.json {
        let summaries = logs::summarize_paths(&a.paths)?;
        if a.json {
            for s in &summaries {
                outln!("{}", serde_json::to_string(s)?);
            }
        } else {
            for s in &summaries {
                outln!(
                    "{}: pid {} ({}) {} records, {} connections, {} B sent, {} B received{}",
                    s.path.display(),
                    s.pid,
                    s.exe,
                    s.records,
                    s.connections,
                    s.bytes_sent,
                    s.bytes_received,
                    s.damage
                        .as_deref()
                        .map(|d| format!(", damaged {d}"))
                        .unwrap_or_default()
                );
            }
        }
        return Ok(());
    }
    let files = logs::expand(&a.paths)?;
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    for file in files {
        let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
        writeln!(w, "== {}", file.display())?;
        let mut reader = Reader::new(&bytes);
        for record in reader.by_ref() {
            writeln!(w, "{}", line(&record))?;
        }
        if let Some(d) = reader.damage() {
            writeln!(w, "!! damaged {d}")?;
        }
    }
    w.flush()?;
    Ok(())
}

/// One record as a line of text.
fn line(r: &Record<'_>) -> String {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match r {
        Record::Process { pid, ppid, origin, at, host, exe, .. } => {
            format!("{} process pid={pid} ppid={ppid} origin={origin:?} host={} exe={}", at.mono_ns, text(host), text(exe))
        }
        Record::Socket { at, call, fd, domain, kind, .. } => {
            format!("{} {} tid={} fd={fd} domain={domain} type={kind}", at.mono_ns, call.name(), at.tid)
        }
        Record::Bind { at, call, fd, local, errno } => {
            format!("{} {} tid={} fd={fd} local={local} errno={errno}", at.mono_ns, call.name(), at.tid)
        }
        Record::Connection { at, call, fd, conn, local, peer, peer_pid, errno, mid_stream, .. } => format!(
            "{} {} tid={} fd={fd} conn={conn} {local} -> {peer} peer_pid={peer_pid} errno={errno} mid_stream={mid_stream}",
            at.mono_ns,
            call.name(),
            at.tid
        ),
        Record::Data { at, call, fd, conn, direction, bytes, errno, offset, peer, checksum, peek } => format!(
            "{} {} tid={} fd={fd} conn={conn} {direction:?} bytes={bytes} offset={offset} errno={errno} peer={peer} checksum={checksum:08x}{}",
            at.mono_ns,
            call.name(),
            at.tid,
            if *peek { " peek" } else { "" }
        ),
        Record::Close { at, call, fd, conn, how, errno } => {
            format!("{} {} tid={} fd={fd} conn={conn} how={how} errno={errno}", at.mono_ns, call.name(), at.tid)
        }
        Record::Dup { at, call, old, new } => format!("{} {} tid={} {old} -> {new}", at.mono_ns, call.name(), at.tid),
        Record::Fork { at, call, child, errno } => {
            format!("{} {} tid={} child={child} errno={errno}", at.mono_ns, call.name(), at.tid)
        }
        Record::Exec { at, path } => format!("{} execve tid={} {}", at.mono_ns, at.tid, text(path)),
        Record::Frames { at, conn, direction, offset, frames } => {
            let listed: Vec<String> = causeway_blackbox::format::Frame::read_all(frames)
                .map(|f| format!("stream={} type={} flags={:#x} at={} len={}", f.stream, f.kind, f.flags, f.start, f.length))
                .collect();
            format!("{} http2-frames tid={} conn={conn} {direction:?} offset={offset} {}", at.mono_ns, at.tid, listed.join(", "))
        }
        Record::Warning { at, code, count, detail } => {
            format!("{} warning code={code} count={count} {}", at.mono_ns, text(detail))
        }
    }
}

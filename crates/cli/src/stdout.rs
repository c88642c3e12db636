//! Writing to standard output. `println!` panics when the reader has gone (`causeway
//! search | head`): a command's output ends the process quietly instead, as ripgrep
//! does, and a long-running command's status lines are dropped, so that it goes on
//! serving and still shuts down cleanly.

use std::io::Write;

/// `print!` that exits quietly when stdout's reader has gone.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdout::write(format_args!($($arg)*), false) };
}

/// `println!` that exits quietly when stdout's reader has gone.
#[macro_export]
macro_rules! outln {
    () => { $crate::stdout::write(format_args!(""), true) };
    ($($arg:tt)*) => { $crate::stdout::write(format_args!($($arg)*), true) };
}

/// `println!` for a status line of a long-running command (`serve`, `demo`): a failed
/// write is ignored.
#[macro_export]
macro_rules! statusln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// Writes to stdout; on a closed pipe exits with status 0 (the reader took what it
/// wanted), on any other failure reports it and exits with status 1.
pub fn write(args: std::fmt::Arguments<'_>, newline: bool) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout.write_fmt(args).and_then(|()| {
        if newline {
            stdout.write_all(b"\n")
        } else {
            Ok(())
        }
    });
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("error: writing to standard output: {e}");
            std::process::exit(1);
        }
    }
}

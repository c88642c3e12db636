//! Socket-call capture for black-box inference (WAP5's LibSockCap): the `LD_PRELOAD`
//! library. It interposes libc's socket calls in every process it is loaded into, and
//! records each call (never its payload; on HTTP/2 connections, the headers of the frames
//! that delimit each stream's messages, `h2`) in that process's capture log, in the format
//! of `causeway-capture-format`, which `causeway-blackbox` reads back with. Why it is
//! carried inside the `causeway` binary and writes a log of its own:
//! `docs/decisions/007-embedded-preload-library-and-its-log.md`.
#![warn(missing_docs)]

// Named as the library's own modules, for the hooks (not compiled into the tests).
#[cfg(not(test))]
use causeway_capture_format as format;
#[cfg(not(test))]
use causeway_capture_format::elf;

mod h2;

// Not in the unit-test harness: there, the hooks would interpose the test binary's calls.
#[cfg(not(test))]
mod preload;

//! Socket-call capture for black-box inference (WAP5's LibSockCap): the `LD_PRELOAD`
//! library. It interposes libc's socket calls in every process it is loaded into, and
//! records each call (never its payload) in that process's capture log, in the format
//! of [`format`].
//!
//! `format` and `elf` are also compiled into `causeway-blackbox` (by path), which reads
//! the logs: one definition of the format, and a library whose only dependency is libc.

#![allow(dead_code)] // `format` carries the reader too, which only causeway-blackbox uses.

pub mod elf;
pub mod format;

// Not in the unit-test harness: there, the hooks would interpose the test binary's calls.
#[cfg(not(test))]
mod preload;

//! Black-box inference (WAP5): the socket calls captured from unmodified programs, read
//! back per process, reconciled into messages, linked into causal paths, and where those
//! paths spend their time. [`infer::infer`] is the front door: inputs and options in,
//! paths out.
//!
//! The steps: [`logs`] summarises capture logs; [`reconcile`] turns them into messages
//! (WAP5 §4); [`link`] scores each message's candidate causes and builds path instances and
//! patterns (WAP5 §5.1), by default with what a capture knows of connections
//! (`connections`, `slots`); [`delays`] measures where paths spend their time (§5.2);
//! [`traces`] makes spans of the common model; [`tail`] follows capture logs as they are
//! written and infers them a window at a time; [`join`] puts them in the instrumented traces
//! of the same requests; [`score`] and [`truth`] measure the result
//! against ground truth. Where linking departs from the paper, and why:
//! `docs/decisions/009-where-wap5-departs-from-the-paper.md`.
//!
//! Linking keeps its per-message lists (candidate causes, the messages each may have caused,
//! per-node timelines) as rows of flat tables (`rows`), numbers nodes and endpoints once
//! (`numbers`), and spreads what is independent over the cores (`parallel`: one contiguous
//! range per core, results in order, so the output is the same as from one thread): the
//! latest candidates, the causes of each round, and the instances of a block of roots,
//! applied in root order. Memory is held to what each step reads: what only weighing causes
//! reads is freed before instances are found, each message's best placement is a packed
//! 20-byte slot, and path shapes are runs of name numbers in one arena (`shapes`), rendered
//! as text only when reported. `causeway infer` (`crates/cli/src/infer.rs`) has mimalloc
//! return freed memory at once (its purge delay set to 0), as each step frees tables of a
//! different shape than the next allocates.
//!
//! `causeway infer` and `causeway-bench infer` (`crates/bench/src/infer.rs`) drive it;
//! `causeway-bench infer-demo` runs the demo under capture and scores the three modes
//! (`link::Mode`) against its own traces, with clock offsets injected into the captured
//! times; `causeway-bench infer-scale` writes CoDeeN-shaped capture logs and measures
//! `causeway infer` on them as a child process (wall time, peak RSS).
#![warn(missing_docs)]

mod connections;
pub mod delays;
// The capture log format and the ELF check, shared with the preload library.
pub use causeway_capture_format as format;
pub use causeway_capture_format::elf;
pub mod infer;
pub mod join;
pub mod link;
pub mod logs;
mod naming;
mod numbers;
mod parallel;
pub mod reconcile;
pub mod roles;
mod rows;
pub mod score;
mod shapes;
mod slots;
pub mod tail;
pub mod traces;
pub mod truth;

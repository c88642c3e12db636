//! The interposed libc functions. Each calls the real one, then records what it did.
//!
//! By what they act on: sockets made and named (`sockets`), data (`data`), descriptors
//! closed and duplicated (`descriptors`), processes (`processes`).

mod data;
mod descriptors;
mod processes;
mod sockets;

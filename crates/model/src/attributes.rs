//! The attribute names Causeway's sources write and its analyses read, defined once, as
//! the OpenTelemetry semantic conventions define theirs. OpenTelemetry's own name is used
//! where one exists.

/// The sender of the message a span received (OpenTelemetry's network convention): a
/// node name, for inferred spans.
pub const NET_PEER_NAME: &str = "net.peer.name";
/// The sender's endpoint (`host:port`, or a socket path).
pub const NET_SOCK_PEER_ADDR: &str = "net.sock.peer.addr";
/// The receiver's endpoint.
pub const NET_SOCK_HOST_ADDR: &str = "net.sock.host.addr";
/// The thread a span ran on (OpenTelemetry's `thread.name`).
pub const THREAD_NAME: &str = "thread.name";

/// An inferred span's message size in bytes.
pub const MESSAGE_BYTES: &str = "message.bytes";
/// When an inferred span's message was sent, in nanoseconds since the Unix epoch (the
/// span starts when it was received).
pub const MESSAGE_SEND_NS: &str = "message.send_ns";
/// `true` on an inferred span whose receiver was not captured: its start is the send.
pub const UNTRACED: &str = "causeway.untraced";
/// The span id of the inferred span whose message caused this one's (WAP5's cause: the
/// message after which this one was sent), where that differs from the parent. A call's
/// client span stands for its reply's receipt.
pub const CAUSE: &str = "causeway.cause";
/// On an inferred server span: when its reply was sent (the server's clock), in
/// nanoseconds since the Unix epoch.
pub const REPLY_SEND_NS: &str = "message.reply.send_ns";
/// On an inferred server span: when its caller received the reply (the caller's clock).
pub const REPLY_RECV_NS: &str = "message.reply.recv_ns";
/// On an inferred server span: the reply's size in bytes.
pub const REPLY_BYTES: &str = "message.reply.bytes";
/// On an inferred server span: the span id of what caused the reply (see [`CAUSE`]).
pub const REPLY_CAUSE: &str = "causeway.reply.cause";

/// The log file (node) a stitched span's lines came from.
pub const LOG_FILE: &str = "log.file";
/// On a stitched span's event: the line's number in its file.
pub const LOG_LINE: &str = "log.line";
/// On a stitched span's event: the line's log point (its template).
pub const LOG_POINT: &str = "log.point";

/// On a span placed in an instrumented trace by joining another source to it (an inferred
/// span, a node's stitched log lines): how sure its parent link is, from 0 to 1.
pub const PARENT_CONFIDENCE: &str = "causeway.parent.confidence";
/// On a log record placed on a span by joining stitched lines to instrumented traces: how
/// sure the placement is, from 0 to 1.
pub const LOG_CONFIDENCE: &str = "causeway.log.confidence";

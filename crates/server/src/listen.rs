//! Accepting connections. Each listener holds at most its cap of connections (more are
//! answered 503 and closed, counted, and logged), every connection is closed once no byte
//! has moved either way for the idle timeout (unless a request on it is being answered),
//! and an HTTP/1 request's headers must arrive within the header timeout (which is also
//! how long a keep-alive connection waits for its next request).
//!
//! The three listeners accept here rather than through `axum::serve`. Each has a `Gate`, a
//! semaphore of `--max-connections` (query) or `--max-ingest-connections` (each ingest
//! listener) places; past it the connection gets a canned 503 and is closed, counted, and
//! logged at most every 10 s. Each connection is a `Guarded` stream that records when a byte
//! last moved and fails reads and writes once nothing has moved for `--idle-timeout` while
//! no request on it is being answered; a stalled write fails whatever is in progress, since
//! the client stopped reading. HTTP/1 connections are served by hyper with
//! `--header-timeout`; gRPC connections are fed to tonic as a stream of guarded connections.
//!
//! The caps are sized to the process's file descriptors at start, so that a flood of
//! connections to one listener cannot take the descriptors another needs: the descriptor
//! limit is raised to its hard limit and the caps shrunk to fit under it, 512 descriptors
//! kept back.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use futures_util::Stream;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

/// The three listeners, in the order their counters are kept.
pub(crate) const LISTENERS: [&str; 3] = ["query", "ingest", "grpc"];

/// Descriptors kept back from the listeners' caps: the store's files, ClickHouse
/// connections, the blocking pool's work.
const RESERVED_DESCRIPTORS: u64 = 512;

/// How long a stopping listener lets the requests being answered finish (a live stream
/// of Pivot results never does).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Least time between two warnings that a listener is at its cap.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// One listener's cap on open connections, with its counters.
pub(crate) struct Gate {
    role: &'static str,
    slots: Arc<Semaphore>,
    max: usize,
    /// Connections refused at the cap since start.
    pub(crate) refused: AtomicU64,
    /// Milliseconds since `born` of the last warning.
    warned_at: AtomicU64,
    born: std::time::Instant,
}

impl Gate {
    pub(crate) fn new(role: &'static str, max: usize) -> Gate {
        let max = max.max(1);
        Gate {
            role,
            slots: Arc::new(Semaphore::new(max)),
            max,
            refused: AtomicU64::new(0),
            warned_at: AtomicU64::new(0),
            born: std::time::Instant::now(),
        }
    }

    /// The most connections this listener holds.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Connections open now.
    pub(crate) fn open(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    /// A place for a new connection, or none at the cap (counted, and logged at most once
    /// per [`WARN_EVERY`]).
    fn admit(&self) -> Option<OwnedSemaphorePermit> {
        if let Ok(slot) = self.slots.clone().try_acquire_owned() {
            return Some(slot);
        }
        let refused = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        self.warn_now(|| {
            tracing::warn!(
                listener = self.role,
                max_connections = self.max,
                refused_since_start = refused,
                "listener at its connection cap; new connections are refused"
            );
        });
        None
    }

    /// Runs `warn` unless a warning ran within [`WARN_EVERY`].
    fn warn_now(&self, warn: impl FnOnce()) {
        let now = self.born.elapsed().as_millis() as u64;
        let last = self.warned_at.load(Ordering::Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= WARN_EVERY.as_millis() as u64;
        if due
            && self
                .warned_at
                .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            warn();
        }
    }

    /// Accepts the next connection this gate admits; connections over the cap are
    /// answered by `refuse` and closed, and accept errors (out of descriptors) are logged
    /// and waited out briefly rather than spun on.
    async fn accept(
        &self,
        listener: &TcpListener,
        refuse: fn(&TcpStream),
    ) -> (TcpStream, OwnedSemaphorePermit) {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => match self.admit() {
                    Some(slot) => return (stream, slot),
                    None => refuse(&stream),
                },
                Err(e) => {
                    self.warn_now(|| {
                        tracing::warn!(listener = self.role, error = %e, "cannot accept a connection");
                    });
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

/// What an HTTP client over the cap is told before its connection is closed.
fn refuse_http(stream: &TcpStream) {
    const BODY: &str =
        r#"{"error":"the server holds as many connections as it allows; retry shortly"}"#;
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    // Best effort: a socket that cannot take it at once is closed without it.
    let _ = stream.try_write(answer.as_bytes());
}

/// A gRPC client over the cap is closed without an answer (HTTP/2 needs a handshake).
fn refuse_silently(_: &TcpStream) {}

/// The connection caps and timeouts of the listeners.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections the query API holds at once.
    pub max_query: usize,
    /// Connections each ingest listener (OTLP/HTTP and OTLP/gRPC) holds at once.
    pub max_ingest: usize,
    /// Longest time an HTTP/1 request's headers may take to arrive, counted from when
    /// the connection waits for them (so also how long a kept-alive connection stays
    /// open between requests).
    pub header_timeout: Duration,
    /// A connection on which no byte moved for this long, and no request is being
    /// answered, is closed.
    pub idle_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_query: 512,
            max_ingest: 2048,
            header_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

impl ConnectionLimits {
    /// Raises the process's descriptor limit to its hard limit, then shrinks the caps
    /// (in proportion) if the three listeners' caps and a reserve would not fit in it.
    pub(crate) fn fit_to_descriptors(&mut self) {
        let available = match rlimit::increase_nofile_limit(u64::MAX) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the file descriptor limit");
                return;
            }
        };
        let wanted = (self.max_query + 2 * self.max_ingest) as u64;
        let room = available.saturating_sub(RESERVED_DESCRIPTORS);
        if wanted <= room {
            return;
        }
        let scale = |n: usize| ((n as u64 * room / wanted).max(16)) as usize;
        let (query, ingest) = (scale(self.max_query), scale(self.max_ingest));
        tracing::warn!(
            descriptors = available,
            max_query_connections = query,
            max_ingest_connections = ingest,
            "the file descriptor limit is below the connection caps; caps lowered to fit \
             (raise `ulimit -n` to keep them)"
        );
        self.max_query = query;
        self.max_ingest = ingest;
    }
}

/// The gates of the three listeners.
pub(crate) struct Gates {
    pub(crate) query: Gate,
    pub(crate) ingest: Gate,
    pub(crate) grpc: Gate,
}

impl Gates {
    pub(crate) fn new(limits: &ConnectionLimits) -> Gates {
        Gates {
            query: Gate::new(LISTENERS[0], limits.max_query),
            ingest: Gate::new(LISTENERS[1], limits.max_ingest),
            grpc: Gate::new(LISTENERS[2], limits.max_ingest),
        }
    }

    /// The gates in [`LISTENERS`] order.
    pub(crate) fn all(&self) -> [&Gate; 3] {
        [&self.query, &self.ingest, &self.grpc]
    }
}

/// A connection holding its place under the cap, closed once idle.
pub(crate) struct Guarded<T> {
    io: T,
    timer: Pin<Box<Sleep>>,
    /// When a byte last moved.
    last: Instant,
    idle: Duration,
    /// Requests on this connection being answered; a connection is not idle while one is.
    busy: Arc<AtomicUsize>,
    _slot: OwnedSemaphorePermit,
}

impl<T> Guarded<T> {
    fn new(io: T, slot: OwnedSemaphorePermit, idle: Duration, busy: Arc<AtomicUsize>) -> Self {
        let now = Instant::now();
        Guarded {
            io,
            timer: Box::pin(tokio::time::sleep_until(now + idle)),
            last: now,
            idle,
            busy,
            _slot: slot,
        }
    }

    /// True once nothing has moved for the idle timeout and, unless `stalled_write`, no
    /// request is being answered; otherwise the timer is set to wake the task when that
    /// could next be so.
    fn idle_expired(&mut self, stalled_write: bool, cx: &mut Context<'_>) -> bool {
        loop {
            let due = self.last + self.idle;
            if self.timer.deadline() != due {
                self.timer.as_mut().reset(due);
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return false;
            }
            // A client that stops reading what it is sent is idle whatever it asked.
            if stalled_write || self.busy.load(Ordering::Relaxed) == 0 {
                return true;
            }
            self.last = Instant::now();
        }
    }

    /// `poll` of a write, noting progress and judging a stall.
    fn wrote(
        &mut self,
        polled: Poll<io::Result<usize>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        match polled {
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    self.last = Instant::now();
                }
                Poll::Ready(Ok(n))
            }
            Poll::Pending if self.idle_expired(true, cx) => Poll::Ready(Err(idle_error())),
            other => other,
        }
    }
}

fn idle_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "connection idle past the idle timeout",
    )
}

impl<T: AsyncRead + Unpin> AsyncRead for Guarded<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.last = Instant::now();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending if this.idle_expired(false, cx) => Poll::Ready(Err(idle_error())),
            other => other,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Guarded<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.wrote(polled, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.wrote(polled, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for Guarded<TcpStream> {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

/// Marks a request as being answered for as long as it lives.
struct Answering(Arc<AtomicUsize>);

impl Answering {
    fn start(busy: &Arc<AtomicUsize>) -> Answering {
        busy.fetch_add(1, Ordering::Relaxed);
        Answering(busy.clone())
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves `app` over HTTP/1 on `listener` under `gate` until `stop` turns true; then stops
/// accepting and lets each connection finish the request it is answering.
pub(crate) async fn serve_http(
    listener: TcpListener,
    app: Router,
    state: Arc<crate::AppState>,
    gate: fn(&Gates) -> &Gate,
    mut stop: watch::Receiver<bool>,
) {
    let limits = state.config.limits.connections;
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = gate(&state.gates).accept(&listener, refuse_http) => accepted,
            _ = stop.wait_for(|s| *s) => break,
        };
        let (stream, slot) = accepted;
        let _ = stream.set_nodelay(true);
        let busy = Arc::new(AtomicUsize::new(0));
        let io = TokioIo::new(Guarded::new(
            stream,
            slot,
            limits.idle_timeout,
            busy.clone(),
        ));
        let app = app.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let answering = Answering::start(&busy);
            let mut app = app.clone();
            async move {
                let response = app.call(req.map(Body::new)).await;
                drop(answering);
                response
            }
        });
        let mut stop = stop.clone();
        connections.spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(io, service);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = stop.wait_for(|s| *s) => {}
            }
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        });
        // Reap the connections that ended, so the set holds only open ones.
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    let finished = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(SHUTDOWN_GRACE, finished)
        .await
        .is_err()
    {
        tracing::warn!(
            "requests still being answered {}s after the stop; their connections are closed",
            SHUTDOWN_GRACE.as_secs()
        );
    }
}

/// The connections `gate` admits on `listener`, guarded, for tonic's server.
pub(crate) fn incoming(
    listener: TcpListener,
    state: Arc<crate::AppState>,
) -> impl Stream<Item = Result<Guarded<TcpStream>, Infallible>> {
    futures_util::stream::unfold((listener, state), |(listener, state)| async move {
        let (stream, slot) = state.gates.grpc.accept(&listener, refuse_silently).await;
        let _ = stream.set_nodelay(true);
        let idle = state.config.limits.connections.idle_timeout;
        let guarded = Guarded::new(stream, slot, idle, Arc::new(AtomicUsize::new(0)));
        Some((Ok(guarded), (listener, state)))
    })
}

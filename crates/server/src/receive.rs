//! Receiving request bodies. A body must arrive within the body timeout, and every byte
//! of it, as it arrives, is counted against a budget of bytes being received that the
//! request keeps until it is answered: slow senders hold only what they sent, for a
//! bounded time, and no number of them can hold what complete requests need.
//!
//! Past `--body-timeout` the answer is 408; a body over `--max-body` is 413 (a larger
//! declared `Content-Length` is refused before reading). The budget (`Budget`) is
//! `--max-receiving-bytes` for ingest, shared by HTTP and gRPC, and
//! `--max-query-receiving-bytes` for the query API, whose middleware `receive_first` reads
//! every request body before its handler runs; a frame that finds no room is 429. The bytes,
//! gunzipped ones too, are held until the request is answered. Only a whole body then takes
//! an in-flight place (`--max-inflight`, 429 at once when there is none), so a slow sender
//! holds a few bytes of the budget for at most the body timeout, and nothing a complete
//! request needs.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use prost::bytes::Buf;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

use crate::ApiError;

/// Bytes of request bodies held at once, shared by the requests of one kind.
pub(crate) struct Budget {
    bytes: Arc<Semaphore>,
    max: usize,
    /// What the budget is for, and the flag that sets it.
    what: &'static str,
}

impl Budget {
    pub(crate) fn new(max: usize, what: &'static str) -> Budget {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        Budget {
            bytes: Arc::new(Semaphore::new(max)),
            max,
            what,
        }
    }

    /// Bytes held now.
    pub(crate) fn held(&self) -> usize {
        self.max - self.bytes.available_permits()
    }

    /// Takes `n` more bytes into `held`, or refuses when the budget has no room.
    pub(crate) fn grow(&self, held: &mut Held, n: usize) -> Result<(), Refusal> {
        if n == 0 {
            return Ok(());
        }
        let permit = u32::try_from(n)
            .ok()
            .and_then(|n| self.bytes.clone().try_acquire_many_owned(n).ok())
            .ok_or(Refusal::OverBudget {
                max: self.max,
                what: self.what,
            })?;
        match &mut held.0 {
            Some(p) => p.merge(permit),
            none => *none = Some(permit),
        }
        Ok(())
    }
}

/// Bytes a request holds of a [`Budget`], given back when it is dropped.
#[derive(Default)]
pub(crate) struct Held(Option<OwnedSemaphorePermit>);

/// Why a body was not received.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// More than the size limit.
    TooLarge { limit: usize },
    /// Not all of it arrived within the body timeout.
    TimedOut { timeout: Duration },
    /// The budget of bytes being received is spent.
    OverBudget { max: usize, what: &'static str },
    /// The client broke off or sent a malformed body.
    Broken(String),
}

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> ApiError {
        match r {
            Refusal::TooLarge { limit } => {
                ApiError::PayloadTooLarge(format!("request body is over the {limit}-byte limit"))
            }
            Refusal::TimedOut { timeout } => ApiError::Timeout(format!(
                "request body not received within {} (--body-timeout)",
                humantime::format_duration(timeout)
            )),
            Refusal::OverBudget { max, what } => ApiError::TooManyRequests(format!(
                "request bodies being received already hold {max} bytes, the most allowed ({what}); retry shortly"
            )),
            Refusal::Broken(e) => ApiError::BadRequest(format!("cannot read the request body: {e}")),
        }
    }
}

/// One ingest request's place among the `max_inflight` allowed, taken once its body has
/// arrived and held until the store has answered, so that the bodies gunzipped and
/// decoded at once are bounded (a body still arriving holds none). None free: 429 at once.
pub(crate) fn admit(state: &crate::AppState) -> Result<tokio::sync::SemaphorePermit<'_>, ApiError> {
    state.inflight.try_acquire().map_err(|_| {
        crate::metrics::add(&state.metrics.refused_inflight, 1);
        ApiError::TooManyRequests(format!(
            "more than {} ingest requests in flight; retry shortly",
            state.config.limits.max_inflight
        ))
    })
}

impl crate::AppState {
    /// A refused ingest body, counted by reason.
    pub(crate) fn refused(&self, r: Refusal) -> ApiError {
        let m = &self.metrics;
        let counter = match r {
            Refusal::TooLarge { .. } => Some(&m.refused_too_large),
            Refusal::TimedOut { .. } => Some(&m.refused_body_timeout),
            Refusal::OverBudget { .. } => Some(&m.refused_receive_budget),
            Refusal::Broken(_) => None,
        };
        if let Some(c) = counter {
            crate::metrics::add(c, 1);
        }
        r.into()
    }
}

/// A body received whole, holding its bytes of the budget.
pub(crate) struct Received {
    pub(crate) bytes: Bytes,
    pub(crate) held: Held,
}

/// How bodies are received: the size limit, the time limit and the budget.
#[derive(Clone, Copy)]
pub(crate) struct Rules<'a> {
    pub(crate) limit: usize,
    pub(crate) timeout: Duration,
    pub(crate) budget: &'a Budget,
}

/// Reads `body` whole under `rules`. A declared length over the limit is refused before
/// any of the body is read.
pub(crate) async fn receive(
    headers: &HeaderMap,
    body: Body,
    rules: Rules<'_>,
) -> Result<Received, Refusal> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > rules.limit as u64) {
        return Err(Refusal::TooLarge { limit: rules.limit });
    }
    let timeout = rules.timeout;
    let read = async {
        let mut held = Held::default();
        let mut body = body;
        let mut parts: Vec<Bytes> = Vec::new();
        let mut size = 0usize;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| Refusal::Broken(e.to_string()))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            size += data.len();
            if size > rules.limit {
                return Err(Refusal::TooLarge { limit: rules.limit });
            }
            rules.budget.grow(&mut held, data.len())?;
            parts.push(data);
        }
        let bytes = match parts.len() {
            0 => Bytes::new(),
            1 => parts.pop().unwrap_or_default(),
            _ => {
                let mut all = Vec::with_capacity(size);
                for p in &parts {
                    all.extend_from_slice(p);
                }
                Bytes::from(all)
            }
        };
        Ok(Received { bytes, held })
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or(Err(Refusal::TimedOut { timeout }))
}

/// A request whose headers say it has a body.
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

/// Middleware of the query API: a request's body is received whole under the API's
/// rules before its handler runs, and holds its bytes of the budget until the handler
/// answers.
pub(crate) async fn receive_first(
    State(state): State<Arc<crate::AppState>>,
    req: Request,
    next: Next,
) -> Response {
    if !has_body(req.headers()) {
        return next.run(req).await;
    }
    let limits = &state.config.limits;
    let rules = Rules {
        limit: limits.max_body_bytes,
        timeout: limits.body_timeout,
        budget: &state.api_receiving,
    };
    let (parts, body) = req.into_parts();
    let received = match receive(&parts.headers, body, rules).await {
        Ok(r) => r,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let response = next
        .run(Request::from_parts(parts, Body::from(received.bytes)))
        .await;
    drop(received.held);
    response
}

pin_project_lite::pin_project! {
    /// A streamed body (gRPC's) under the body timeout and a budget: each frame's bytes
    /// are held as it arrives, until the body is dropped.
    pub(crate) struct Budgeted<B> {
        #[pin]
        inner: B,
        #[pin]
        deadline: Sleep,
        timeout: Duration,
        state: Arc<crate::AppState>,
        held: Held,
    }
}

impl<B> Budgeted<B> {
    pub(crate) fn new(inner: B, state: Arc<crate::AppState>) -> Self {
        let timeout = state.config.limits.body_timeout;
        Budgeted {
            inner,
            deadline: tokio::time::sleep_until(Instant::now() + timeout),
            timeout,
            state,
            held: Held::default(),
        }
    }
}

impl<B> HttpBody for Budgeted<B>
where
    B: HttpBody,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = B::Data;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        match this.inner.poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let n = frame.data_ref().map_or(0, |d| d.remaining());
                if let Err(r) = this.state.ingest_receiving.grow(this.held, n) {
                    return Poll::Ready(Some(Err(this.state.refused(r).into())));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(tonic::Status::invalid_argument(
                format!("cannot read the request: {}", e.into()),
            )))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.deadline.poll(cx) {
                Poll::Ready(()) => {
                    let timeout = *this.timeout;
                    let refused = this.state.refused(Refusal::TimedOut { timeout });
                    Poll::Ready(Some(Err(refused.into())))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_refuses_what_it_has_no_room_for_and_takes_it_back_when_dropped() {
        let budget = Budget::new(100, "--max-receiving");
        let mut a = Held::default();
        budget.grow(&mut a, 60).unwrap();
        budget.grow(&mut a, 30).unwrap();
        assert_eq!(budget.held(), 90);
        let mut b = Held::default();
        let refused = budget.grow(&mut b, 11).unwrap_err();
        assert!(matches!(refused, Refusal::OverBudget { max: 100, .. }));
        budget.grow(&mut b, 10).unwrap();
        drop(a);
        assert_eq!(budget.held(), 10);
        budget.grow(&mut b, 90).unwrap();
        assert_eq!(budget.held(), 100);
    }
}

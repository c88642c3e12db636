//! One error type for every server answer, mapped to both an HTTP status and a gRPC code
//! so REST and gRPC clients hear the same thing.
//!
//! `ApiError` maps to 400 (saying what and where: a JSON line and column stated once, a
//! field path, a parameter name), 401, 404, 408 (the SQL or scan time limit), 409 (a Pivot
//! hub limit), 413, 415 (content type or encoding), 429 and 503 (both with
//! `Retry-After: 1`) and 500 (logged). The body is `{"error": "..."}`, cut at 4 KiB
//! (`clip`). Syntax errors show their line around the column only
//! (`causeway_model::source::SyntaxError::render`).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use causeway_store::StoreError;

/// Why a request was not served.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The request is malformed; the message says what and where.
    #[error("{0}")]
    BadRequest(String),
    /// Nothing by that name or id.
    #[error("{0}")]
    NotFound(String),
    /// The body's content type (or encoding) is not one this endpoint reads.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// The body is over the configured limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The change would pass a limit on what the server keeps; the message names it.
    #[error("{0}")]
    Conflict(String),
    /// Missing or wrong access token.
    #[error("missing or invalid access token")]
    Unauthorized,
    /// Too many requests in flight; retry after the given seconds.
    #[error("{0}")]
    TooManyRequests(String),
    /// The store cannot take data right now; retry after the given seconds.
    #[error("{0}")]
    Unavailable(String),
    /// A query ran out of time.
    #[error("{0}")]
    Timeout(String),
    /// Anything else: the server's fault.
    #[error("{0}")]
    Internal(String),
}

/// Seconds a client should wait before retrying a shed request.
pub const RETRY_AFTER_SECS: u64 = 1;

/// Longest error message answered; longer ones (which quote what the client sent) are
/// cut, saying how much was left out.
pub const MAX_ERROR_BYTES: usize = 4096;

/// `text` cut to [`MAX_ERROR_BYTES`] on a character boundary, saying how much was cut.
pub fn clip(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= MAX_ERROR_BYTES {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut at = MAX_ERROR_BYTES;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    std::borrow::Cow::Owned(format!(
        "{}... ({} more bytes cut)",
        &text[..at],
        text.len() - at
    ))
}

impl ApiError {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Timeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn retryable(&self) -> bool {
        matches!(
            self,
            ApiError::TooManyRequests(_) | ApiError::Unavailable(_)
        )
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            // A store node down or failing: the request may succeed once it is back.
            StoreError::Busy | StoreError::SqlBusy(_) | StoreError::Remote { .. } => {
                ApiError::Unavailable(e.to_string())
            }
            StoreError::Sql(m) => ApiError::BadRequest(format!("sql: {m}")),
            StoreError::SqlLimit(m) => ApiError::BadRequest(format!(
                "sql: {m} (the server's SQL limits: --sql-memory, --sql-timeout)"
            )),
            StoreError::SqlTimeout(_) => ApiError::Timeout(e.to_string()),
            other => ApiError::Internal(other.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(m) = &self {
            tracing::error!(error = %m, "request failed");
        }
        let status = self.status();
        let retry = self.retryable();
        let mut resp = (
            status,
            axum::Json(serde_json::json!({ "error": clip(&self.to_string()) })),
        )
            .into_response();
        if retry {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        }
        if matches!(self, ApiError::Unauthorized) {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

impl From<ApiError> for tonic::Status {
    fn from(e: ApiError) -> Self {
        let msg = clip(&e.to_string()).into_owned();
        match e {
            ApiError::BadRequest(_) => tonic::Status::invalid_argument(msg),
            ApiError::NotFound(_) => tonic::Status::not_found(msg),
            ApiError::UnsupportedMediaType(_) => tonic::Status::invalid_argument(msg),
            ApiError::PayloadTooLarge(_) => tonic::Status::resource_exhausted(msg),
            ApiError::Conflict(_) => tonic::Status::failed_precondition(msg),
            ApiError::Unauthorized => tonic::Status::unauthenticated(msg),
            ApiError::TooManyRequests(_) => tonic::Status::resource_exhausted(msg),
            ApiError::Unavailable(_) => tonic::Status::unavailable(msg),
            ApiError::Timeout(_) => tonic::Status::deadline_exceeded(msg),
            ApiError::Internal(_) => tonic::Status::internal(msg),
        }
    }
}

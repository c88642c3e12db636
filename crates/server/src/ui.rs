//! The web UI: static HTML, CSS and JavaScript modules from `ui/`, compiled into the binary
//! so the server is one file. The pages hold no data, so they are served without the
//! token; the API calls they make carry it.

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

/// Each file of `ui/`: name, content type, text.
const FILES: &[(&str, &str, &str)] = &[
    ("index.html", HTML, include_str!("../../../ui/index.html")),
    ("style.css", CSS, include_str!("../../../ui/style.css")),
    ("app.js", JS, include_str!("../../../ui/app.js")),
    ("api.js", JS, include_str!("../../../ui/api.js")),
    ("format.js", JS, include_str!("../../../ui/format.js")),
    ("search.js", JS, include_str!("../../../ui/search.js")),
    ("scatter.js", JS, include_str!("../../../ui/scatter.js")),
    (
        "differences.js",
        JS,
        include_str!("../../../ui/differences.js"),
    ),
    ("pattern.js", JS, include_str!("../../../ui/pattern.js")),
    ("trace.js", JS, include_str!("../../../ui/trace.js")),
    (
        "trace-find.js",
        JS,
        include_str!("../../../ui/trace-find.js"),
    ),
    (
        "trace-flame.js",
        JS,
        include_str!("../../../ui/trace-flame.js"),
    ),
    (
        "trace-table.js",
        JS,
        include_str!("../../../ui/trace-table.js"),
    ),
    (
        "trace-outline.js",
        JS,
        include_str!("../../../ui/trace-outline.js"),
    ),
    (
        "dependencies.js",
        JS,
        include_str!("../../../ui/dependencies.js"),
    ),
    ("compare.js", JS, include_str!("../../../ui/compare.js")),
    ("expect.js", JS, include_str!("../../../ui/expect.js")),
    ("pivot.js", JS, include_str!("../../../ui/pivot.js")),
    ("inferred.js", JS, include_str!("../../../ui/inferred.js")),
    ("logs.js", JS, include_str!("../../../ui/logs.js")),
    ("monitor.js", JS, include_str!("../../../ui/monitor.js")),
    // The demo's expectations, offered as an example on the Expectations page.
    (
        "example.pip",
        TEXT,
        include_str!("../../../demo/expectations/shop.pip"),
    ),
    // The paper's queries, offered as examples on the Pivot page.
    (
        "paper-queries.pivot",
        TEXT,
        include_str!("../../../demo/tracepoints/paper-queries.pivot"),
    ),
];

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

pub(crate) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { file("index.html") }))
        .route(
            "/ui/{name}",
            get(|Path(name): Path<String>| async move { file(&name) }),
        )
}

fn file(name: &str) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, text)) => (
            [
                (header::CONTENT_TYPE, *content_type),
                // Small files; revalidating each load keeps a rebuilt server's UI current.
                (header::CACHE_CONTROL, "no-cache"),
            ],
            *text,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, format!("no UI file {name}")).into_response(),
    }
}

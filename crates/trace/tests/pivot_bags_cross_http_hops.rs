//! Pivot Tracing bags over real HTTP hops (axum servers with `TraceLayer`, reqwest
//! clients with `send_traced`, on loopback): a client calls a middle service, which
//! calls a backend.
//!
//! - A service whose advice does not run in a request forwards the bag it received
//!   byte for byte, and its response carries nothing back.
//! - A response carries back only what the server's advice added, never the tuples that
//!   arrived with the request, and the client's later join counts each tuple once.

mod common;

use std::net::SocketAddr;
use std::sync::Mutex;

use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use causeway::middleware::reqwest::TracedRequest;
use causeway::middleware::tower::TraceLayer;
use causeway::testing::Recorder;
use causeway::Baggage;
use causeway_pivot::bag::{BagKey, Bags};
use causeway_pivot::value::Value;
use causeway_pivot::wire::{decode_text, BAGGAGE_MEMBER};

const TRACEPOINTS: &str = r#"
Tracepoint Op = span(target = "app::client", name = "op") Export user
Tracepoint Lookup = span.close(target = "app::backend", name = "lookup")
  Export replicas = explode(replicas, ",")
Tracepoint Read = event(target = "app::client", field = "delta") Export delta
"#;

/// The Pivot Tracing member of each `baggage` header seen, by where it was seen.
static SEEN: Mutex<Vec<(&'static str, Option<String>)>> = Mutex::new(Vec::new());

fn member(headers: &HeaderMap) -> Option<String> {
    let values = headers
        .get_all("baggage")
        .iter()
        .filter_map(|v| v.to_str().ok());
    Baggage::parse(values)
        .get(BAGGAGE_MEMBER)
        .map(str::to_owned)
}

fn seen(at: &'static str, headers: &HeaderMap) {
    SEEN.lock().unwrap().push((at, member(headers)));
}

fn take_seen() -> Vec<(&'static str, Option<String>)> {
    std::mem::take(&mut *SEEN.lock().unwrap())
}

/// Serves `app` with each response's member noted as `at` (outside `TraceLayer`, so
/// after it added the bags).
async fn serve(app: Router, at: &'static str) -> SocketAddr {
    let app = app
        .layer(TraceLayer::new())
        .layer(axum::middleware::map_response(
            move |r: Response| async move {
                seen(at, r.headers());
                r
            },
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

async fn backend() -> SocketAddr {
    let lookup = |headers: HeaderMap| async move {
        seen("backend request", &headers);
        let _l = tracing::info_span!(target: "app::backend", "lookup", replicas = "A,B").entered();
        "ok"
    };
    serve(Router::new().route("/b", get(lookup)), "backend response").await
}

async fn middle(backend: SocketAddr) -> SocketAddr {
    let http = reqwest::Client::new();
    let call = move |headers: HeaderMap| {
        let http = http.clone();
        async move {
            seen("middle request", &headers);
            http.get(format!("http://{backend}/b"))
                .send_traced()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    serve(Router::new().route("/m", get(call)), "middle response").await
}

/// One request: the op span, the call through the middle to the backend, then a read.
async fn request(middle: SocketAddr, user: &str) {
    use tracing::Instrument;
    let op = tracing::info_span!(target: "app::client", "op", user = user);
    async {
        reqwest::Client::new()
            .get(format!("http://{middle}/m"))
            .send_traced()
            .await
            .unwrap()
            .error_for_status()
            .unwrap();
        tracing::info!(target: "app::client", delta = 5i64, "read");
    }
    .instrument(op)
    .await;
}

fn install(pivot: &causeway::Pivot, id: u32, query: &str) {
    common::install(pivot, id, TRACEPOINTS, query);
}

fn rows(pivot: &causeway::Pivot) -> Vec<(u32, Vec<Vec<String>>)> {
    common::rows_of(pivot.take_results())
}

/// Every tuple of query `query`'s bags in `bags`, as strings.
fn tuples(bags: &Bags, query: u32) -> Vec<Vec<String>> {
    (0..8)
        .flat_map(|bag| bags.unpack(BagKey { query, bag }))
        .map(|(values, _)| values.iter().map(Value::to_string).collect())
        .collect()
}

fn strings(rows: &[&[&str]]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| r.iter().map(|s| s.to_string()).collect())
        .collect()
}

#[test]
fn bags_go_out_whole_and_come_back_as_what_the_server_added() {
    let rec =
        Recorder::with_config(causeway::testing::config("test").with_process_name("p")).unwrap();
    let pivot = rec.pivot();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rec.in_scope(|| {
        runtime.block_on(async {
            let middle = middle(backend().await).await;

            // The client packs the op's user; only the client's read unpacks it.
            install(
                &pivot,
                1,
                "From r In Read Join op In Op On op -> r GroupBy op.user \
                 Select op.user, SUM(r.delta)",
            );
            request(middle, "u1").await;
            let seen = take_seen();
            let at = |place: &str| {
                seen.iter()
                    .find(|(p, _)| *p == place)
                    .unwrap_or_else(|| panic!("nothing seen at {place}: {seen:?}"))
                    .1
                    .clone()
            };
            let sent = at("middle request").expect("the request carries the op's bag");
            assert_eq!(
                at("backend request").as_deref(),
                Some(sent.as_str()),
                "the middle runs no advice in the request: it forwards the bag untouched"
            );
            assert_eq!(at("backend response"), None, "{seen:?}");
            assert_eq!(at("middle response"), None, "{seen:?}");
            assert_eq!(tuples(&decode_text(&sent).unwrap(), 1), strings(&[&["u1"]]));
            assert_eq!(rows(&pivot), [(1, strings(&[&["u1", "5"]]))]);

            // The backend's lookup joins the op's user and packs its replicas for the
            // client's read: the response carries back those, and not the op's bag.
            install(
                &pivot,
                2,
                "From r In Read Join l In Lookup On l -> r Join op In Op On op -> l \
                 GroupBy op.user, l.replicas Select op.user, l.replicas, COUNT",
            );
            request(middle, "u2").await;
            let seen = take_seen();
            let back = |place: &str| {
                let text = seen
                    .iter()
                    .find(|(p, _)| *p == place)
                    .and_then(|(_, m)| m.clone())
                    .unwrap_or_else(|| panic!("no bag back at {place}: {seen:?}"));
                decode_text(&text).unwrap()
            };
            for place in ["backend response", "middle response"] {
                let bags = back(place);
                assert_eq!(tuples(&bags, 1), Vec::<Vec<String>>::new(), "{place}");
                assert_eq!(
                    tuples(&bags, 2),
                    strings(&[&["u2", "A"], &["u2", "B"]]),
                    "{place}"
                );
            }
            let mut got = rows(&pivot);
            got.sort();
            assert_eq!(
                got,
                [
                    (1, strings(&[&["u2", "5"]])),
                    (2, strings(&[&["u2", "A", "1"], &["u2", "B", "1"]])),
                ]
            );
        })
    });
}

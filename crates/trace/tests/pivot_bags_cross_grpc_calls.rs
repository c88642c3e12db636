//! Pivot Tracing bags over a real gRPC call (a tonic server with `TraceLayer`, a tonic
//! client over a channel wrapped in `ClientTraceLayer`, on loopback): the request's bag
//! reaches the server's advice in the call's metadata, and what the server's advice
//! packed comes back in the response's metadata to a later join on the client.

mod common;

use std::time::Duration;

use causeway::testing::Recorder;
use tonic_health::pb::HealthCheckRequest;
use tracing::Instrument;

/// The client's call, the server span the tower layer opens for each gRPC request, and
/// an event on the client once the answer is in.
const TRACEPOINTS: &str = r#"
Tracepoint Call = span(target = "app", name = "call") Export user
Tracepoint Served = span(name = "HTTP request", field = "url.path") Export path = "url.path"
Tracepoint Done = event(target = "app", field = "done") Export done
"#;

/// Joins the client's event to the server span before it, and that to the client's call
/// before it: the server packs (user, path), which only the response can bring back.
const QUERY: &str = "From d In Done Join s In Served On s -> d Join c In Call On c -> s \
                     GroupBy c.user, s.path Select c.user, s.path, COUNT";

#[test]
fn a_bag_goes_out_in_grpc_metadata_and_the_servers_tuples_come_back() {
    let rec =
        Recorder::with_config(causeway::testing::config("grpc").with_process_name("p")).unwrap();
    let pivot = rec.pivot();
    common::install(&pivot, 1, TRACEPOINTS, QUERY);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rec.in_scope(|| {
        runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(20), async {
                let mut client = common::traced_health_client().await;
                for user in ["u1", "u2", "u1"] {
                    async {
                        let resp = client
                            .check(HealthCheckRequest {
                                service: String::new(),
                            })
                            .await
                            .unwrap();
                        assert_eq!(resp.into_inner().status, 1); // SERVING
                        tracing::info!(target: "app", done = true, "answered");
                    }
                    .instrument(tracing::info_span!(target: "app", "call", user = user))
                    .await;
                }
            })
            .await
            .expect("the calls finished in time");
        })
    });
    let mut rows = common::rows_of(pivot.take_results());
    for (_, r) in &mut rows {
        r.sort();
    }
    let path = "/grpc.health.v1.Health/Check";
    let row = |user: &str, n: &str| vec![user.to_string(), path.to_string(), n.to_string()];
    assert_eq!(rows, [(1, vec![row("u1", "2"), row("u2", "1")])]);
    assert_eq!(pivot.counters().bags_malformed, 0);
}

//! Span logs written by the `causeway` library travel through the agent to the server:
//! resumable from the checkpoint without loss or re-sending, tolerant of a torn last
//! record, sampled whole-trace, and cleaned up after retention.

use crate::common;

use std::time::Duration;

use causeway_model::codec::native;
use causeway_server::agent::{keeps, Agent, AgentConfig};
use causeway_testkit::TempDir;
use common::TestServer;

fn write_span_logs(dir: &std::path::Path, requests: usize) {
    let config = causeway::testing::config("checkout-svc").with_span_log_dir(dir);
    let (dispatch, guard) = causeway::dispatch(config).unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        for i in 0..requests {
            let root = tracing::info_span!("handle request", request = i);
            let _g = root.enter();
            let child = tracing::info_span!("query db", table = "orders");
            let _c = child.enter();
            tracing::info!(rows = 3, "fetched");
        }
    });
    assert!(guard.flush());
    drop(guard);
}

fn count_spans(server: &TestServer) -> u64 {
    server.server().store.stats().head_spans + server.server().store.stats().block_spans
}

fn agent(
    server: &TestServer,
    dir: &std::path::Path,
    checkpoint: &std::path::Path,
    keep: f64,
) -> Agent {
    Agent::new(AgentConfig {
        dirs: vec![dir.to_path_buf()],
        collector: server.ingest_url(""),
        checkpoint: checkpoint.to_path_buf(),
        keep,
        retention: Duration::from_secs(3600),
        ..AgentConfig::default()
    })
    .unwrap()
}

fn segments(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for d in std::fs::read_dir(dir).unwrap().flatten() {
        for f in std::fs::read_dir(d.path()).unwrap().flatten() {
            out.push(f.path());
        }
    }
    out.sort();
    out
}

#[test]
fn spans_travel_once_even_across_agent_restarts_and_torn_records() {
    let server = TestServer::start("agent");
    let files = TempDir::new("agent-files");
    let logs = files.join("logs");
    let checkpoint = files.join("checkpoint");
    write_span_logs(&logs, 50);

    let stats = agent(&server, &logs, &checkpoint, 1.0).run_once().unwrap();
    assert_eq!(stats.shipped, 100, "{stats:?}");
    assert_eq!(count_spans(&server), 100);
    let (_, found) = server.get("/api/search?service=checkout-svc&operation=query%20db&limit=100");
    assert_eq!(found["traces"].as_array().unwrap().len(), 50);

    // A restarted agent (new process, same checkpoint) sends nothing twice.
    let stats = agent(&server, &logs, &checkpoint, 1.0).run_once().unwrap();
    assert_eq!(stats.shipped, 0);
    assert_eq!(count_spans(&server), 100);

    // A torn record at the end of the newest segment waits; completing it ships it.
    let seg = segments(&logs).pop().unwrap();
    let extra = {
        let t = 1_700_000_000_000_000_000u64;
        causeway_model::Span::new(
            causeway_model::TraceId::new(0x77).unwrap(),
            causeway_model::SpanId::new(1).unwrap(),
            None,
            "late",
            "checkout-svc",
            t,
            t + 5,
        )
    };
    let record = native::encode_all([&extra]);
    let (head, tail) = record.split_at(record.len() / 2);
    append(&seg, head);
    let mut a = agent(&server, &logs, &checkpoint, 1.0);
    assert_eq!(a.run_once().unwrap().shipped, 0);
    append(&seg, tail);
    assert_eq!(a.run_once().unwrap().shipped, 1);
    assert_eq!(count_spans(&server), 101);
}

fn append(path: &std::path::Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn second_stage_sampling_keeps_whole_traces() {
    let server = TestServer::start("agent-keep");
    let files = TempDir::new("agent-keep-files");
    let logs = files.join("logs");
    let checkpoint = files.join("checkpoint");
    write_span_logs(&logs, 400);

    let stats = agent(&server, &logs, &checkpoint, 0.25).run_once().unwrap();
    assert_eq!(stats.shipped + stats.sampled_out, 800);
    // 400 traces at 0.25: about 100 kept (standard deviation 8.7).
    assert!((60..=140).contains(&(stats.shipped / 2)), "{stats:?}");
    // Every trace is there whole (2 spans) or not at all, as the hash decides.
    let done = std::sync::Mutex::new(Vec::new());
    server
        .server()
        .store
        .scan(causeway_store::TimeWindow::ALL, &|t| {
            done.lock().unwrap().push((t.trace_id, t.spans.len()))
        })
        .unwrap();
    let done = done.into_inner().unwrap();
    assert_eq!(done.len() as u64 * 2, stats.shipped);
    for (id, n) in done {
        assert_eq!(n, 2);
        assert!(keeps(id, 0.25));
    }
}

#[test]
fn shipped_segments_are_deleted_after_retention_and_a_down_collector_loses_nothing() {
    let server = TestServer::start("agent-retain");
    let files = TempDir::new("agent-retain-files");
    let logs = files.join("logs");
    let checkpoint = files.join("checkpoint");
    write_span_logs(&logs, 10);

    // Collector down: the pass fails and the position does not move.
    let mut down = Agent::new(AgentConfig {
        dirs: vec![logs.clone()],
        collector: "http://127.0.0.1:9".into(),
        checkpoint: checkpoint.clone(),
        ..AgentConfig::default()
    })
    .unwrap();
    assert!(down
        .run_once()
        .unwrap_err()
        .to_string()
        .contains("127.0.0.1:9"));

    let mut a = Agent::new(AgentConfig {
        dirs: vec![logs.clone()],
        collector: server.ingest_url(""),
        checkpoint: checkpoint.clone(),
        retention: Duration::ZERO,
        ..AgentConfig::default()
    })
    .unwrap();
    let before = segments(&logs).len();
    assert!(before > 0);
    let stats = a.run_once().unwrap();
    assert_eq!(stats.shipped, 20);
    assert_eq!(stats.deleted as usize, before);
    assert!(segments(&logs).is_empty());
}

#[test]
fn log_files_are_followed_across_rotation_and_restarts() {
    use std::io::Write as _;
    let server = TestServer::start("agent-logs");
    let files = TempDir::new("agent-logs-files");
    let logs = files.join("applogs");
    let checkpoint = files.join("logs-checkpoint");
    std::fs::create_dir_all(&logs).unwrap();
    // The instrumented request the lines are of.
    const TRACE: &str = "5b8efff798038103d269b633813fc60c";
    let base = std::time::SystemTime::now() - Duration::from_secs(5);
    let ns = |ms: u64| {
        (base + Duration::from_millis(ms))
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let mut b = causeway_testkit::TraceBuilder::new(u128::from_str_radix(TRACE, 16).unwrap());
    b.span(
        None,
        "orders",
        "app-2",
        causeway_model::SpanKind::Server,
        "checkout",
        ns(0),
        ns(1_000),
    );
    let (status, _, _) = server.post(
        "/v1/traces",
        &[("content-type", "application/json")],
        &causeway_model::codec::otlp::encode_json(&b.spans()),
    );
    assert_eq!(status, 200);
    let line = |ms: u64, text: &str| {
        format!(
            "{} INFO {text} trace_id={TRACE} span_id=0000000000000001\n",
            humantime::format_rfc3339_millis(base + Duration::from_millis(ms))
        )
    };
    let current = logs.join("orders.log");
    std::fs::write(
        &current,
        format!(
            "{}{}a line of no trace\n{}",
            line(100, "basket read"),
            line(200, "basket priced"),
            // Still being written: read once it ends.
            line(300, "quorum reached").trim_end(),
        ),
    )
    .unwrap();
    let agent = || {
        Agent::new(AgentConfig {
            logs: vec![format!("{}/orders.log*", logs.display())],
            collector: server.ingest_url(""),
            checkpoint: checkpoint.clone(),
            ..AgentConfig::default()
        })
        .unwrap()
    };
    let events = || -> Vec<String> {
        let (_, trace) = server.get(&format!("/api/traces/{TRACE}"));
        let spans = trace["spans"].as_array().unwrap().clone();
        assert_eq!(spans.len(), 1, "{trace}");
        spans[0]["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    };
    let stats = agent().run_once().unwrap();
    assert_eq!((stats.log_lines, stats.log_records), (3, 2));
    assert_eq!(events().len(), 2);

    // The line ends, the file is rotated (renamed), a new one started; the agent restarts.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&current)
        .unwrap();
    f.write_all(b"\n").unwrap();
    drop(f);
    std::fs::rename(&current, logs.join("orders.log.1")).unwrap();
    std::fs::write(&current, line(400, "order placed")).unwrap();
    let stats = agent().run_once().unwrap();
    assert_eq!((stats.log_lines, stats.log_records), (2, 2));
    let names = events();
    assert_eq!(names.len(), 4, "{names:?}");
    for (name, want) in names.iter().zip([
        "basket read",
        "basket priced",
        "quorum reached",
        "order placed",
    ]) {
        assert!(name.contains(want), "{names:?}");
    }
    // Nothing new: nothing sent.
    let stats = agent().run_once().unwrap();
    assert_eq!((stats.log_lines, stats.batches), (0, 0));
    assert_eq!(events().len(), 4);
}

#[test]
fn lines_without_ids_join_their_requests_traces_once_settled() {
    let server = TestServer::start("agent-join");
    let files = TempDir::new("agent-join-files");
    let logs = files.join("plainlogs");
    let checkpoint = files.join("join-checkpoint");
    std::fs::create_dir_all(&logs).unwrap();
    // Two checkouts on orders at once, an order each in its URL, begun 10 s ago; their
    // service's log prints no ids.
    let base = std::time::SystemTime::now() - Duration::from_secs(10);
    let (traces, requests) = causeway_testkit::plain_logs::interleaved_checkouts(base);
    for spans in traces {
        let (status, _, _) = server.post(
            "/v1/traces",
            &[("content-type", "application/json")],
            &causeway_model::codec::otlp::encode_json(&spans),
        );
        assert_eq!(status, 200);
    }
    std::fs::write(
        logs.join("orders.log"),
        causeway_testkit::plain_logs::interleaved_checkouts_log(base),
    )
    .unwrap();
    let mut agent = Agent::new(AgentConfig {
        logs: vec![format!("{}/orders.log*", logs.display())],
        collector: server.ingest_url(""),
        checkpoint: checkpoint.clone(),
        join: Some(server.api_url("")),
        ..AgentConfig::default()
    })
    .unwrap();
    let stats = agent.run_once().unwrap();
    assert_eq!((stats.log_lines, stats.log_records), (6, 0));
    // Six lines are too few to learn that the order identifies a request: stitching may
    // give them as one; each line still goes to the trace whose URL holds its order.
    assert_eq!(stats.plain_lines_placed, 6, "{stats:?}");
    assert_eq!(
        agent.take_join_delays().len() as u64,
        stats.plain_requests,
        "a delay per request shipped"
    );
    for (trace, order) in requests {
        let (_, body) = server.get(&format!("/api/traces/{trace:032x}"));
        let spans = body["spans"].as_array().unwrap();
        assert_eq!(spans.len(), 1, "{body}");
        let events = spans[0]["events"].as_array().unwrap();
        assert_eq!(events.len(), 3, "{body}");
        for e in events {
            let text = e["name"].as_str().unwrap();
            assert!(text.contains(&format!("order {order}")), "{text}");
        }
    }
    // The Logs page has the stitching report beside the joined requests.
    let (_, flows) = server.get("/api/logs?start=0");
    assert!(flows["report"]["requests"].as_u64() > Some(0), "{flows}");
    // Nothing new: nothing joined again.
    let stats = agent.run_once().unwrap();
    assert_eq!(stats.plain_requests, 0);
}

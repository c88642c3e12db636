//! The black-box pipeline on common servers nobody instrumented: nginx (a master and two
//! workers, keep-alive to its upstream) in front of Python's threaded http.server, driven
//! by curl, all under `causeway capture`; `causeway infer` finds each request's whole path,
//! curl → nginx → python → nginx → curl; sent to the server, each request and its reply is
//! one call in the dependency graph. CI installs nginx (.ci/run).

mod common;

use std::process::Command;

use common::{temp, BIN};

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `command` (a `causeway` command line, `what`), which must succeed.
fn succeed(command: &mut Command, what: &str) -> std::process::Output {
    let out = command.output().expect(what);
    assert!(
        out.status.success(),
        "{what}: {:?} {} {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Two free loopback ports.
/// Runs `sh -c SCRIPT` under `causeway capture`, its logs in WORK/caps (returned).
fn capture_script(work: &std::path::Path, script: &str) -> std::path::PathBuf {
    let caps = work.join("caps");
    succeed(
        Command::new(BIN)
            .args(["capture", "--out"])
            .arg(&caps)
            .args(["--", "sh", "-c", script]),
        "causeway capture",
    );
    caps
}

fn two_ports() -> (u16, u16) {
    let a = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let b = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    (
        a.local_addr().expect("addr").port(),
        b.local_addr().expect("addr").port(),
    )
}

#[test]
fn each_request_through_nginx_to_python_is_one_inferred_path() {
    for program in ["nginx", "python3", "curl"] {
        assert!(have(program), "{program} is needed (.ci/run installs it)");
    }
    let work = temp("nginx-python");
    std::fs::create_dir_all(&work).expect("dir");
    let (front, back) = two_ports();
    let conf =
        causeway_testkit::nginx::reverse_proxy_conf(&work, 2, front, back, 4).expect("nginx.conf");
    let w = work.display();
    let script = format!(
        "cd {w} && python3 -m http.server {back} --bind 127.0.0.1 >/dev/null 2>&1 & P=$!; \
         nginx -c {conf} -p {w} 2>/dev/null & N=$!; \
         for i in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:{front}/ && break; sleep 0.1; done; \
         for i in 1 2 3 4 5 6 7 8; do curl -s -o /dev/null http://127.0.0.1:{front}/; done; \
         kill $N $P; wait",
        conf = conf.display()
    );
    let caps = capture_script(&work, &script);
    let out = succeed(
        Command::new(BIN)
            .arg("infer")
            .arg(&caps)
            .args(["--json", "--top", "200"]),
        "causeway infer",
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    // Every request curl made once both servers were up, each with its whole path (the
    // tries before, answered by nginx alone or not at all, are paths of their own).
    // curl never listens: it is CLIENT, and the paths of all its runs aggregate.
    let whole: u64 = summary["patterns"]
        .as_array()
        .expect("patterns")
        .iter()
        .filter(|p| {
            p["shape"].as_str().is_some_and(|s| {
                s.starts_with("CLIENT>nginx[")
                    && s.contains(">python3")
                    && s.matches(">CLIENT").count() == 1
            })
        })
        .filter_map(|p| p["count"].as_u64())
        .sum();
    assert!(whole >= 8, "{whole} whole paths: {:#}", summary["patterns"]);

    // In the store, a request and its reply are one RPC: nginx calls python once per
    // request that reached it, and python calls nobody.
    let reached: u64 = summary["patterns"]
        .as_array()
        .expect("patterns")
        .iter()
        .filter_map(|p| {
            // Only nginx calls python; python's replies are `python3...>nginx...`.
            let hops = p["shape"].as_str()?.matches(">python3").count() as u64;
            Some(hops * p["count"].as_u64()?)
        })
        .sum();
    let data = temp("nginx-python-data");
    let serve = common::Serve::start(&data, &[]);
    succeed(
        Command::new(BIN)
            .arg("infer")
            .arg(&caps)
            .args(["--collector", &serve.ingest]),
        "causeway infer --collector",
    );
    assert!(!serve.search_service("nginx").is_empty());
    let deps: serde_json::Value = ureq::get(&format!("{}/api/dependencies", serve.api))
        .call()
        .expect("dependencies")
        .body_mut()
        .read_json()
        .expect("JSON");
    // Services are programs (`nginx`, `python3.11`).
    let calls = |caller: &str, callee: &str| {
        let named =
            |v: &serde_json::Value, prefix: &str| v.as_str().is_some_and(|n| n.starts_with(prefix));
        deps["edges"]
            .as_array()
            .expect("edges")
            .iter()
            .filter(|e| named(&e["caller"], caller) && named(&e["callee"], callee))
            .map(|e| e["calls"].as_u64().expect("calls"))
            .sum::<u64>()
    };
    assert_eq!(calls("nginx", "python3"), reached, "{deps:#}");
    assert!(reached >= 8, "{reached}: {:#}", summary["patterns"]);
    assert_eq!(calls("python3", "nginx"), 0, "a reply is no call: {deps:#}");
    // Python's server is named by its module, apart from any other Python program.
    let python = deps["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["service"].as_str())
        .find(|s| s.starts_with("python3"))
        .expect("python's node");
    assert!(python.ends_with(":http.server"), "{python}");
    let _ = std::fs::remove_dir_all(work);
}

/// GET on the server's query API.
fn api_get(serve: &common::Serve, path: &str) -> serde_json::Value {
    ureq::get(&format!("{}{path}", serve.api))
        .call()
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .body_mut()
        .read_json()
        .expect("JSON")
}

/// nginx in front of an instrumented replica of the demo's storage, eight reads through
/// it, all captured.
fn nginx_before_an_instrumented_replica(name: &str) -> Captured {
    for program in ["nginx", "curl"] {
        assert!(have(program), "{program} is needed (.ci/run installs it)");
    }
    let work = temp(name);
    std::fs::create_dir_all(&work).expect("dir");
    let data = temp(&format!("{name}-data"));
    let serve = common::Serve::start(&data, &[]);
    let ingest_port = serve.ingest.rsplit(':').next().expect("a port").to_string();
    let (front, back) = two_ports();
    let conf =
        causeway_testkit::nginx::reverse_proxy_conf(&work, 2, front, back, 4).expect("nginx.conf");
    let w = work.display();
    // A replica of the demo's storage, instrumented, exporting to the server; nginx in
    // front of it. The replica runs until its stdin (a FIFO the shell writes) ends, and
    // flushes its spans then.
    let script = format!(
        "cd {w} && mkfifo hold; \
         CAUSEWAY_DEMO_TOPOLOGY=storage-1=127.0.0.1:{back} \
         CAUSEWAY_OTLP_ENDPOINT={ingest}/v1/traces {BIN} demo-node storage-1 <hold & S=$!; exec 3>hold; \
         nginx -c {conf} -p {w} 2>/dev/null & N=$!; \
         for i in $(seq 100); do curl -sf -o /dev/null 'http://127.0.0.1:{front}/read?block=0' && break; sleep 0.1; done; \
         for i in 1 2 3 4 5 6 7 8; do curl -s -o /dev/null \"http://127.0.0.1:{front}/read?block=$i\"; done; \
         kill $N; exec 3>&-; wait",
        ingest = serve.ingest,
        conf = conf.display()
    );
    let caps = capture_script(&work, &script);
    assert!(
        !serve.search_service("storage-1").is_empty(),
        "the replica's spans arrived"
    );
    Captured {
        serve,
        work,
        _data: data,
        caps,
        ingest_port,
    }
}

/// What [`nginx_before_an_instrumented_replica`] made: the server holding the replica's
/// spans, the directories, and the server's ingest port.
struct Captured {
    serve: common::Serve,
    work: common::TempDir,
    _data: common::TempDir,
    caps: std::path::PathBuf,
    ingest_port: String,
}

#[test]
fn a_request_through_nginx_to_an_instrumented_service_is_one_trace() {
    let Captured {
        serve,
        work,
        caps,
        ingest_port,
        ..
    } = nginx_before_an_instrumented_replica("nginx-instrumented");
    let out = succeed(
        Command::new(BIN)
            .arg("infer")
            .arg(&caps)
            .args(["--ignore-port", &ingest_port, "--collector", &serve.ingest])
            .args(["--join", &serve.api, "--json"]),
        "causeway infer --join",
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let join = &summary["join"];
    assert!(join["joined"].as_u64() >= Some(8), "{join}");
    assert_eq!(join["split"], 0, "{join}");

    each_request_is_one_trace_from_curl(&serve);
    let _ = std::fs::remove_dir_all(work);
}

#[test]
fn the_agent_joins_what_it_captured_once() {
    let Captured {
        serve, work, caps, ..
    } = nginx_before_an_instrumented_replica("nginx-agent");
    let checkpoint = work.join("agent.checkpoint");
    let agent = || {
        agent_once(
            &serve,
            &caps,
            &checkpoint,
            &["--join", &serve.api, "--infer-here"],
        )
    };
    let first = agent();
    assert!(first["inferred_paths"].as_u64() >= Some(8), "{first}");
    assert!(
        first["inferred_paths_joined"].as_u64() >= Some(8),
        "{first}"
    );
    each_request_is_one_trace_from_curl(&serve);
    // Run again, it remembers where its windows reached: nothing is shipped twice.
    let again = agent();
    assert_eq!(again["inferred_paths"], 0, "{again}");
    assert_eq!(again["shipped"], 0, "{again}");
    let _ = std::fs::remove_dir_all(work);
}

#[test]
fn the_server_joins_the_captures_an_agent_sends() {
    let Captured {
        serve, work, caps, ..
    } = nginx_before_an_instrumented_replica("nginx-server-join");
    let checkpoint = work.join("agent.checkpoint");
    let agent = || agent_once(&serve, &caps, &checkpoint, &[]);
    let first = agent();
    assert!(first["capture_bytes"].as_u64() > Some(0), "{first}");
    assert_eq!(first["inferred_paths"], 0, "the server infers: {first}");
    // The server's passes take each path once it is 3 s old.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        let status = api_get(&serve, "/api/captures");
        if status["pathsJoined"].as_u64() >= Some(8) || std::time::Instant::now() > deadline {
            break status;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    };
    assert!(status["pathsJoined"].as_u64() >= Some(8), "{status}");
    assert!(status["logs"].as_u64() >= Some(2), "{status}");
    assert_eq!(status["damaged"], serde_json::json!([]), "{status}");
    each_request_is_one_trace_from_curl(&serve);
    // Run again: the server took every byte, nothing is sent twice.
    let again = agent();
    assert_eq!(again["capture_bytes"], 0, "{again}");
    let _ = std::fs::remove_dir_all(work);
}

/// One pass of `causeway agent --captures CAPS` (with `extra` arguments) to `serve`; its
/// counts.
fn agent_once(
    serve: &common::Serve,
    caps: &std::path::Path,
    checkpoint: &std::path::Path,
    extra: &[&str],
) -> serde_json::Value {
    let out = succeed(
        Command::new(BIN)
            .arg("agent")
            .arg("--captures")
            .arg(caps)
            .args(["--collector", &serve.ingest])
            .args(extra)
            .arg("--checkpoint")
            .arg(checkpoint)
            .args(["--once", "--json"]),
        "causeway agent --captures",
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// Each request read through nginx is one trace: curl's and nginx's inferred spans, and
/// under nginx's call the replica's instrumented server span with its own children.
fn each_request_is_one_trace_from_curl(serve: &common::Serve) {
    let found = api_get(serve, "/api/search?service=storage-1&limit=100");
    let traces = found["traces"].as_array().expect("traces");
    let mut whole = 0;
    let mut last = String::new();
    for t in traces {
        let body = api_get(
            serve,
            &format!("/api/traces/{}", t["traceId"].as_str().expect("id")),
        );
        let spans = body["spans"].as_array().expect("spans");
        let by_id = |id: &serde_json::Value| spans.iter().find(|s| &s["span_id"] == id);
        let roots: Vec<&serde_json::Value> =
            spans.iter().filter(|s| s["parent_id"].is_null()).collect();
        let replica = spans
            .iter()
            .find(|s| s["service"] == "storage-1" && s["kind"] == "server")
            .expect("the replica's server span");
        assert_eq!(replica["source"]["type"], "instrumented");
        let caller = by_id(&replica["parent_id"]);
        last = spans
            .iter()
            .map(|s| {
                format!(
                    "{} {} {} {} {} <- {}\n",
                    s["service"],
                    s["kind"],
                    s["name"],
                    s["source"]["type"],
                    s["span_id"],
                    s["parent_id"]
                )
            })
            .collect();
        // curl's call (a client: its process never listened), nginx's server span and
        // its call, the replica's instrumented server span.
        let parent = |s: &serde_json::Value| by_id(&s["parent_id"]);
        let nginx_server = caller.and_then(parent);
        if roots.len() == 1
            && roots[0]["service"] == "curl"
            && caller.is_some_and(|c| {
                c["service"] == "nginx" && c["kind"] == "client" && c["name"] == "to storage-1"
            })
            && nginx_server.is_some_and(|s| s["service"] == "nginx" && s["kind"] == "server")
            && nginx_server.and_then(parent).is_some_and(|r| r == roots[0])
        {
            whole += 1;
        }
    }
    assert!(
        whole >= 8,
        "{whole} of {} traces start at curl through nginx; the last:\n{last}",
        traces.len()
    );
}

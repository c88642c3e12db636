//! `causeway infer` on a capture and on reconciled messages: patterns, assignments, the
//! messages exported and read back, and a malformed line skipped with its file:line.

mod common;

use std::process::Command;

use common::{capture_echo, temp, BIN};

fn infer(args: &[&str]) -> (serde_json::Value, String) {
    let out = Command::new(BIN)
        .arg("infer")
        .args(args)
        .args(["--json"])
        .output()
        .expect("running causeway infer");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "infer failed: {stderr}");
    (serde_json::from_slice(&out.stdout).expect("JSON"), stderr)
}

#[test]
fn a_captured_echo_is_one_pattern_of_request_and_reply() {
    let (dir, _) = capture_echo("infer-echo", "--rounds 30 --size 500 --transport tcp");
    let work = temp("infer-echo-out");
    std::fs::create_dir_all(&work).expect("dir");
    let assignments = work.join("assignments.jsonl");
    let exported = work.join("messages.jsonl");
    let (summary, _) = infer(&[
        dir.to_str().expect("utf-8"),
        "--assignments",
        assignments.to_str().expect("utf-8"),
        "--export-messages",
        exported.to_str().expect("utf-8"),
    ]);
    assert_eq!(summary["messages"], 60, "{summary}");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&assignments)
        .expect("assignments")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 60);
    assert!(lines
        .iter()
        .all(|l| l["trace"].is_u64() && l["probability"].is_f64()));
    // The server listened, so the client is CLIENT: one pattern, request then reply.
    let top = summary["patterns"][0]["shape"]
        .as_str()
        .expect("a pattern")
        .to_string();
    assert!(
        top.starts_with(&format!("CLIENT>{}[", common::ECHO_PROGRAM)),
        "{top}"
    );
    // The server's delay, from each request's receipt to its reply, once per request.
    let nodes = summary["nodes"].as_array().expect("node delays");
    let server = nodes
        .iter()
        .find(|n| n["count"] == 30)
        .unwrap_or_else(|| panic!("a node that answered 30 requests: {nodes:?}"));
    assert!(server["mean_ns"].as_f64().is_some_and(|m| m >= 0.0));
    assert_eq!(
        server["histogram"]
            .as_array()
            .map_or(0, |h| h.iter().filter_map(|c| c.as_u64()).sum::<u64>()),
        30
    );
    // The client's requests to a server each start a path.
    assert_eq!(summary["traces"], 30, "{summary}");
    assert_eq!(summary["patterns"][0]["count"], 30, "{summary}");
    // The exported messages read back. (Messages alone do not say who listened: with
    // one client neither port has peers enough to be fixed, so both nodes are clients,
    // named alike, and nothing says who asks: whether the closed-loop client's next
    // request counts as caused by the reply before it depends on the timing.)
    let (again, _) = infer(&["--messages", exported.to_str().expect("utf-8")]);
    assert_eq!(again["messages"], 60);
    let traces = again["traces"].as_u64().expect("a count");
    assert!((1..=30).contains(&traces), "{again}");
    // Whether a request and its reply make one instance depends on that timing too (a
    // chain of all 60 is a few instances, each counted once, the root alone among them):
    // what is certain is that every node in every pattern is a client.
    let patterns = again["patterns"].as_array().expect("patterns");
    assert!(!patterns.is_empty(), "{again}");
    for p in patterns {
        let shape = p["shape"].as_str().expect("a pattern");
        assert!(shape.starts_with("CLIENT>CLIENT"), "{shape}");
        assert!(
            !shape.contains(&format!("{}[", common::ECHO_PROGRAM)),
            "{shape}"
        );
    }
    // The connections mode and an ignored port: the server's port leaves nothing.
    let exported_lines: Vec<serde_json::Value> = std::fs::read_to_string(&exported)
        .expect("exported messages")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let port_of = |ep: &serde_json::Value| ep.as_str()?.rsplit_once(':')?.1.parse::<u16>().ok();
    // The server's port is in every message; the client's only in its connection's.
    let port = [&exported_lines[0]["src_ep"], &exported_lines[0]["dst_ep"]]
        .into_iter()
        .filter_map(port_of)
        .find(|p| {
            exported_lines
                .iter()
                .all(|m| port_of(&m["src_ep"]) == Some(*p) || port_of(&m["dst_ep"]) == Some(*p))
        })
        .expect("the server's port");
    let (connected, _) = infer(&[dir.to_str().expect("utf-8"), "--mode", "connections"]);
    assert_eq!(connected["traces"], 30, "{connected}");
    let (ignored, stderr) = infer(&[
        dir.to_str().expect("utf-8"),
        "--ignore-port",
        &port.to_string(),
    ]);
    assert_eq!(ignored["messages"], 0, "{ignored}");
    assert!(stderr.contains("left out 60 messages"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(work);
}

#[test]
fn a_malformed_messages_line_is_reported_and_skipped() {
    let work = temp("infer-bad-line");
    std::fs::create_dir_all(&work).expect("dir");
    let file = work.join("m.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"id": "a", "src": "CLIENT", "src_ep": "1.1.1.1:4000", "dst": "web", "dst_ep": "2.2.2.2:80", "send_ns": null, "recv_ns": 1000, "bytes": 10}"#,
            "\n{not json\n",
            r#"{"id": "b", "src": "web", "src_ep": "2.2.2.2:80", "dst": "CLIENT", "dst_ep": "1.1.1.1:4000", "send_ns": 5000, "recv_ns": null, "bytes": 20}"#,
            "\n",
            r#"{"id": "c", "src": "CLIENT", "src_ep": "1.1.1.1:4001", "dst": "web", "dst_ep": "2.2.2.2:80", "send_ns": null, "recv_ns": 900000000, "bytes": 10}"#,
            "\n",
            r#"{"id": "d", "src": "web", "src_ep": "2.2.2.2:80", "dst": "CLIENT", "dst_ep": "1.1.1.1:4001", "send_ns": 900005000, "recv_ns": null, "bytes": 20}"#,
            "\n",
            r#"{"id": "e", "src": "CLIENT", "src_ep": "1.1.1.1:4002", "dst": "web", "dst_ep": "2.2.2.2:80", "send_ns": null, "recv_ns": 1800000000, "bytes": 10}"#,
            "\n",
            r#"{"id": "f", "src": "web", "src_ep": "2.2.2.2:80", "dst": "CLIENT", "dst_ep": "1.1.1.1:4002", "send_ns": 1800005000, "recv_ns": null, "bytes": 20}"#,
            "\n",
        ),
    )
    .expect("write");
    let (summary, stderr) = infer(&["--messages", file.to_str().expect("utf-8")]);
    assert_eq!(summary["messages"], 6);
    assert_eq!(summary["skipped_lines"], 1);
    assert!(stderr.contains("m.jsonl:2:"), "{stderr}");
    // web's port 80 talks to three client ports: fixed, so web is a server.
    assert_eq!(summary["patterns"][0]["shape"], "CLIENT>web[web>CLIENT]");
    assert_eq!(summary["patterns"][0]["count"], 3);
    let _ = std::fs::remove_dir_all(work);
}

#[test]
fn inferred_traces_reach_the_store_marked_inferred() {
    let data = temp("infer-collector-data");
    let serve = common::Serve::start(&data, &[]);
    let (dir, _) = capture_echo("infer-collector", "--rounds 5 --size 100 --transport tcp");
    let (summary, _) = infer(&[dir.to_str().expect("utf-8"), "--collector", &serve.ingest]);
    assert_eq!(summary["spans_sent"], 10, "{summary}");
    assert_eq!(summary["spans_rejected"], 0);
    let found = serve.search_service(common::ECHO_PROGRAM);
    assert!(!found.is_empty(), "the inferred traces are searchable");
    let spans = serve.trace_spans(found[0]["traceId"].as_str().expect("an id"));
    assert!(!spans.is_empty());
    for s in spans {
        assert_eq!(s["source"]["type"], "inferred", "{s}");
        assert!(s["source"]["confidence"]
            .as_f64()
            .is_some_and(|c| c > 0.0 && c <= 1.0));
    }
    drop(serve);
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(data);
}

#[test]
fn a_names_file_names_the_nodes_and_a_bad_line_is_an_error_with_its_place() {
    let (dir, _) = capture_echo("infer-names", "--rounds 3 --size 10 --transport tcp");
    let work = temp("infer-names-out");
    std::fs::create_dir_all(&work).expect("dir");
    let names = work.join("names");
    // The shell that started the echo is `sh -c ...`; the echo is `causeway-bench echo-node`.
    std::fs::write(
        &names,
        "# nodes of the echo\nshell = sh -c\necho = echo-node\n",
    )
    .expect("write");
    let (summary, _) = infer(&[
        dir.to_str().expect("utf-8"),
        "--names",
        names.to_str().expect("utf-8"),
    ]);
    let nodes: Vec<&str> = summary["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter_map(|p| p["node"].as_str())
        .collect();
    assert!(
        nodes.contains(&"echo") && nodes.contains(&"shell"),
        "{nodes:?}"
    );
    // Client and server share the command line, so they are one node: its messages go
    // from echo to echo, and the node listened (a server).
    let top = summary["patterns"][0]["shape"].as_str().expect("a pattern");
    assert!(top.starts_with("echo>echo"), "{top}");

    std::fs::write(&names, "echo = echo-node\nno equals sign here\n").expect("write");
    let out = Command::new(BIN)
        .args([
            "infer",
            dir.to_str().expect("utf-8"),
            "--names",
            names.to_str().expect("utf-8"),
        ])
        .output()
        .expect("causeway infer");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("names:2: expected NAME = TEXT"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(work);
}

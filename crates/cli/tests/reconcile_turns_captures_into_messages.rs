//! Reconciliation of real captures (`causeway-bench echo-node` under `causeway capture`): every
//! request and every reply becomes one message with both times, the two ends of each
//! connection pair up, datagrams pair by checksum, and a side that was not captured
//! leaves messages with one time.

mod common;

use std::path::{Path, PathBuf};

use causeway_blackbox::reconcile::{Captured, Message};
use common::capture_echo;

fn logs(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the capture directory")
        .map(|entry| entry.expect("an entry").path())
        .collect();
    files.sort();
    files
}

fn reconcile(dir: &Path, keep: impl Fn(&str) -> bool) -> (Captured, Vec<Message>) {
    let files: Vec<PathBuf> = logs(dir)
        .into_iter()
        .filter(|path| keep(&path.to_string_lossy()))
        .collect();
    let mut captured = Captured::read(&files).expect("the logs");
    let messages = captured.messages();
    (captured, messages)
}

#[test]
fn logs_read_together_reconcile_as_logs_added_one_by_one() {
    let (dir, _) = capture_echo(
        "reconcile-together",
        "--rounds 10 --size 100 --transport tcp",
    );
    let files = logs(&dir);
    assert!(files.len() >= 2, "{files:?}");
    let mut one_by_one = Captured::default();
    for path in &files {
        one_by_one.add_log(path, &std::fs::read(path).expect("a log"));
    }
    let (together, messages) = reconcile(&dir, |_| true);
    let nodes =
        |c: &Captured| -> Vec<String> { c.processes.iter().map(|p| p.node.clone()).collect() };
    assert_eq!(nodes(&together), nodes(&one_by_one));
    assert_eq!(together.counts.logs, files.len());
    assert_eq!(messages, one_by_one.messages());
    assert!(messages.len() >= 20, "{}", messages.len());
    let _ = std::fs::remove_dir_all(dir);
}

/// The echo's client and server nodes (the client is the server's fork).
fn echo_nodes(c: &Captured) -> (String, String) {
    let echo: Vec<_> = c
        .processes
        .iter()
        .filter(|p| p.program == common::ECHO_PROGRAM)
        .collect();
    assert_eq!(echo.len(), 2, "{:?}", c.processes);
    let server = echo.iter().min_by_key(|p| p.pid).expect("two");
    let client = echo.iter().max_by_key(|p| p.pid).expect("two");
    (client.node.clone(), server.node.clone())
}

fn between<'a>(messages: &'a [Message], src: &str, dst: &str) -> Vec<&'a Message> {
    messages
        .iter()
        .filter(|m| *m.src == *src && *m.dst == *dst)
        .collect()
}

#[test]
fn each_request_and_reply_of_a_tcp_echo_is_one_message_with_both_times() {
    let (dir, _) = capture_echo("reconcile-tcp", "--rounds 50 --size 3000 --transport tcp");
    let (c, messages) = reconcile(&dir, |_| true);
    let (client, server) = echo_nodes(&c);
    assert_eq!(c.counts.connections_paired, 2, "{:?}", c.counts);
    let requests = between(&messages, &client, &server);
    assert_eq!(requests.len(), 50, "one message per request");
    for m in &requests {
        assert_eq!(m.bytes, 3000);
        let (sent, received) = (
            m.send_ns.get().expect("sent"),
            m.recv_ns.get().expect("received"),
        );
        assert!(
            sent <= received,
            "one host's clock: sent before received ({m:?})"
        );
    }
    let replies = between(&messages, &server, &client);
    assert_eq!(replies.iter().map(|m| m.bytes).sum::<u64>(), 50 * 3000);
    assert!(replies
        .iter()
        .all(|m| m.send_ns.get() <= m.recv_ns.get() && m.recv_ns.get().is_some()));
    let ids: std::collections::HashSet<_> = messages.iter().map(|m| m.id.clone()).collect();
    assert_eq!(ids.len(), messages.len(), "ids are unique");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn datagrams_pair_by_checksum_and_unix_streams_by_pid() {
    let (dir, _) = capture_echo("reconcile-udp", "--rounds 40 --size 200 --transport udp");
    let (c, messages) = reconcile(&dir, |_| true);
    let (client, server) = echo_nodes(&c);
    assert_eq!(c.counts.datagrams_sent, 80);
    assert_eq!(c.counts.datagrams_unmatched, 0, "{:?}", c.counts);
    assert_eq!(between(&messages, &client, &server).len(), 40);
    assert_eq!(between(&messages, &server, &client).len(), 40);
    let _ = std::fs::remove_dir_all(dir);

    let (dir, _) = capture_echo("reconcile-unix", "--rounds 30 --size 10 --transport unix");
    let (c, messages) = reconcile(&dir, |_| true);
    let (client, server) = echo_nodes(&c);
    assert_eq!(c.counts.connections_paired, 2, "{:?}", c.counts);
    assert_eq!(between(&messages, &client, &server).len(), 30);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_side_not_captured_leaves_one_time_per_message() {
    let (dir, _) = capture_echo("reconcile-half", "--rounds 20 --size 100 --transport tcp");
    // Only the client's log (the server's is the lower pid of the two echo processes).
    let mut all = Captured::default();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("dir") {
        let path = entry.expect("entry").path();
        all.add_log(&path, &std::fs::read(&path).expect("log"));
    }
    for p in all
        .processes
        .iter()
        .filter(|p| p.program == common::ECHO_PROGRAM)
    {
        pids.push((p.pid, p.log.clone()));
    }
    pids.sort();
    let client_log = pids.last().expect("the client").1.clone();
    let (c, messages) = reconcile(&dir, |p| Path::new(p) == client_log);
    assert_eq!(c.processes.len(), 1);
    assert_eq!(c.counts.connections_paired, 0);
    let sent: Vec<_> = messages
        .iter()
        .filter(|m| m.recv_ns.get().is_none())
        .collect();
    let received: Vec<_> = messages
        .iter()
        .filter(|m| m.send_ns.get().is_none())
        .collect();
    assert_eq!(
        sent.len(),
        20,
        "the client's requests: sent, receipt unknown"
    );
    assert_eq!(received.iter().map(|m| m.bytes).sum::<u64>(), 20 * 100);
    // The uncaptured server is a node named by its address and port (the client connected
    // to it), apart from any other uncaptured program of its host.
    assert!(
        received
            .iter()
            .all(|m| m.src == m.src_ep && m.src_ep.starts_with("127.0.0.1:")),
        "{received:?}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

//! Arguments a command cannot use are refused with what is wrong with them, and exit 1:
//! a device given as a log, a blank access token, a ClickHouse that will not start.

mod common;

use std::process::Command;

use common::BIN;

fn refused(args: &[&str]) -> String {
    refused_with(args, &[])
}

fn refused_with(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?}");
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn a_device_given_as_a_log_is_named_for_what_it_is() {
    let e = refused(&["logs", "/dev/urandom"]);
    assert!(e.contains("/dev/urandom: not a log file"), "{e}");
    assert!(e.contains("a character device"), "{e}");
    let e = refused(&["logs", "/no/such/path"]);
    assert!(e.contains("No such file or directory"), "{e}");
}

#[test]
fn a_blank_token_is_not_a_token() {
    let data = common::temp("blank-token");
    for token in [" ", "\t"] {
        let e = refused(&[
            "serve",
            "--token",
            token,
            "--http",
            "0.0.0.0:0",
            "--data",
            data.to_str().unwrap(),
        ]);
        assert!(e.contains("--token is blank"), "{e}");
    }
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn a_local_cluster_that_cannot_start_is_an_error_not_a_panic() {
    for (server, why) in [
        (
            "/no/such/clickhouse-server",
            "starting /no/such/clickhouse-server",
        ),
        ("/bin/false", "node 0 exited"),
    ] {
        let e = refused_with(
            &["ch", "local-cluster"],
            &[("CAUSEWAY_CLICKHOUSE_SERVER", server)],
        );
        assert!(e.contains("a local cluster did not start"), "{e}");
        assert!(e.contains(why), "{e}");
        assert!(!e.contains("panicked"), "{e}");
    }
}

#[test]
fn an_agent_join_with_nothing_to_join_is_named() {
    let e = refused(&[
        "agent",
        "--dir",
        "/tmp",
        "--join",
        "http://127.0.0.1:1",
        "--once",
    ]);
    assert!(
        e.contains(
            "--join joins the lines of --logs, and the paths of --captures with --infer-here"
        ),
        "{e}"
    );
    let e = refused(&[
        "agent",
        "--captures",
        "/tmp",
        "--names",
        "/no/such/names",
        "--once",
    ]);
    assert!(e.contains("/no/such/names"), "{e}");
}

//! Arguments a command cannot use are refused with what is wrong with them, and exit 1:
//! a device given as a log, a blank access token.

mod common;

use std::process::Command;

use common::BIN;

fn refused(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
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

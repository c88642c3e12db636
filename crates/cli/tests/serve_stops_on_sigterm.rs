//! `causeway serve` stops as it does on Ctrl-C when asked with SIGTERM (systemd's,
//! Docker's and Kubernetes' stop), shutting down and exiting 0.
#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn serve_shuts_down_and_exits_0_on_sigterm() {
    let data = std::env::temp_dir().join(format!("causeway-sigterm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let mut serve = Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(["serve", "--data"])
        .arg(&data)
        .args([
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--ingest",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (lines, said) = mpsc::channel();
    let stdout = serve.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let wait_for = |text: &str| loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match said.recv_timeout(left) {
            Ok(line) if line.contains(text) => return,
            Ok(_) => {}
            Err(e) => panic!("no {text:?} from serve: {e}"),
        }
    };
    wait_for("query API and UI");
    let killed = Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    wait_for("stopping");
    let status = loop {
        if let Some(status) = serve.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "serve still running after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(&data);
}

//! Runs the `causeway` binary: a server on free ports, and one-shot commands against it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub use causeway_testkit::TempDir;

pub const BIN: &str = env!("CARGO_BIN_EXE_causeway");

/// The program the capture tests capture: `causeway-bench echo-node`, a loopback echo
/// pair in two processes.
pub const ECHO_PROGRAM: &str = "causeway-bench";

/// `causeway-bench`, built beside `causeway` when the workspace's tests are built.
pub fn echo_bin() -> PathBuf {
    let bin = Path::new(BIN).with_file_name(ECHO_PROGRAM);
    assert!(
        bin.is_file(),
        "no {} (the capture tests run `causeway-bench echo-node`): run the workspace's \
         tests, or cargo build -p causeway-bench",
        bin.display()
    );
    bin
}

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// A fresh directory for test `name`, removed when dropped.
pub fn temp(name: &str) -> TempDir {
    TempDir::new(&format!("cli-{name}"))
}

/// `causeway serve` as a child process on free loopback ports.
pub struct Serve {
    pub child: Child,
    pub ingest: String,
    pub api: String,
    pub grpc: String,
}

impl Serve {
    pub fn start(data: &Path, extra: &[&str]) -> Serve {
        let mut child = Command::new(BIN)
            .args([
                "serve",
                "--grpc",
                "127.0.0.1:0",
                "--ingest",
                "127.0.0.1:0",
                "--http",
                "127.0.0.1:0",
                "--data",
            ])
            .arg(data)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("causeway serve starts");
        let out = BufReader::new(child.stdout.take().unwrap());
        let (mut ingest, mut api, mut grpc) = (None, None, None);
        for line in out.lines() {
            let line = line.unwrap();
            let last = line.split_whitespace().last().unwrap_or("").to_string();
            if line.contains("OTLP/HTTP") {
                ingest = Some(last.trim_end_matches("/v1/traces").to_string());
            } else if line.contains("query API") {
                api = Some(last);
            } else if line.contains("OTLP/gRPC") {
                grpc = Some(last);
            } else if line.contains("Ctrl-C") {
                break;
            }
        }
        Serve {
            child,
            ingest: ingest.expect("ingest address printed"),
            api: api.expect("API address printed"),
            grpc: grpc.expect("gRPC address printed"),
        }
    }

    /// The traces search finds for `service`, waiting up to 20 s for any to be
    /// searchable (the store indexes what it ingests in the background).
    pub fn search_service(&self, service: &str) -> Vec<serde_json::Value> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let body: serde_json::Value = ureq::get(&format!(
                "{}/api/search?service={service}&limit=50",
                self.api
            ))
            .call()
            .expect("search")
            .body_mut()
            .read_json()
            .expect("JSON");
            let traces = body["traces"].as_array().cloned().unwrap_or_default();
            if !traces.is_empty() || std::time::Instant::now() > deadline {
                return traces;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// The spans of the trace `id` (hex), from the query API.
    pub fn trace_spans(&self, id: &str) -> Vec<serde_json::Value> {
        let trace: serde_json::Value = ureq::get(&format!("{}/api/traces/{id}", self.api))
            .call()
            .expect("the trace")
            .body_mut()
            .read_json()
            .expect("JSON");
        trace["spans"].as_array().cloned().expect("spans")
    }

    /// SIGKILL, no chance to clean up.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a command to completion: exit code, stdout, stderr.
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `causeway capture --out DIR -- COMMAND...` (with `--json`, its summary on stdout after
/// the command's own output), which must succeed; its output.
pub fn capture_into<S: AsRef<std::ffi::OsStr>>(
    dir: &Path,
    json: bool,
    command: &[S],
) -> std::process::Output {
    let out = Command::new(BIN)
        .arg("capture")
        .args(json.then_some("--json"))
        .arg("--out")
        .arg(dir)
        .arg("--")
        .args(command)
        .output()
        .expect("running causeway capture");
    assert!(
        out.status.success(),
        "capture failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `causeway capture --json` of `sh -c 'causeway-bench echo-node ARGS'` into a fresh
/// directory: the directory and the command's JSON summary.
pub fn capture_echo(name: &str, echo_args: &str) -> (TempDir, serde_json::Value) {
    let dir = temp(name);
    let script = format!("\"$0\" echo-node {echo_args} > /dev/null");
    let echo = echo_bin();
    let echo = echo.to_str().expect("a UTF-8 path");
    let out = capture_into(&dir, true, &["sh", "-c", &script, echo]);
    let summary = serde_json::from_slice(&out.stdout).expect("the JSON summary");
    (dir, summary)
}

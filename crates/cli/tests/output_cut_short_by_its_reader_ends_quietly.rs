//! `causeway ... | head`: when the reader of standard output goes away, the command ends
//! with status 0 and says nothing, instead of panicking on the broken pipe.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};

#[test]
fn a_reader_that_stops_reading_ends_the_command_quietly() {
    let dir = common::temp("broken-pipe");
    std::fs::create_dir_all(&dir).unwrap();
    // Far more than a pipe holds (64 KiB), so the writer meets the closed pipe.
    let file = dir.join("many.pip");
    let text: String = (0..5000)
        .map(|i| format!("validator V{i} {{ thread T(*, 1) {{ task(\"work\"); }} }}\n"))
        .collect();
    std::fs::write(&file, text).unwrap();
    let mut child = Command::new(common::BIN)
        .args(["expect", "parse"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read a little, as `head -c` would, then hang up.
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 100];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(
        String::from_utf8_lossy(&first).starts_with("validator V0"),
        "{}",
        String::from_utf8_lossy(&first)
    );
    assert_eq!(stderr, "", "stderr: {stderr}");
    assert_eq!(status.code(), Some(0), "{status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

//! What both demo systems share: their processes (each started with a label, waited for
//! until it listens, stopped by closing its stdin), the store's directory, and the
//! address a local client connects to.

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

/// One running demo process.
pub struct NodeProcess {
    /// What it is called in messages (its role, or a node of the replicas system).
    pub label: String,
    /// The running process.
    pub child: Child,
}

/// Waits until each process (by label) accepts connections at its address.
pub fn wait_listening(
    listeners: &[(String, SocketAddr)],
    nodes: &mut [NodeProcess],
    within: Duration,
) -> Result<()> {
    let deadline = Instant::now() + within;
    for (label, addr) in listeners {
        while TcpStream::connect_timeout(addr, Duration::from_millis(200)).is_err() {
            if let Some(node) = nodes.iter_mut().find(|n| n.label == *label) {
                if let Ok(Some(status)) = node.child.try_wait() {
                    bail!("the {label} process exited at start ({status})");
                }
            }
            if Instant::now() > deadline {
                bail!("the {label} process did not listen on {addr} within {within:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(())
}

/// Closes each process's stdin (its signal to finish and flush), then waits for it.
pub fn stop_nodes(mut nodes: Vec<NodeProcess>) {
    for n in &mut nodes {
        drop(n.child.stdin.take());
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    for mut n in nodes {
        loop {
            match n.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    eprintln!("the {} process did not stop; killing it", n.label);
                    let _ = n.child.kill();
                    let _ = n.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

/// `addr`, with an unspecified address (`0.0.0.0`, `::`) replaced by loopback: where a local client connects.
pub fn loopback(addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        SocketAddr::from(([127, 0, 0, 1], addr.port()))
    } else {
        addr
    }
}

/// The store's directory: the one given, or a temporary one (true) removed at the end.
pub fn data_dir(given: Option<PathBuf>) -> (PathBuf, bool) {
    match given {
        Some(d) => (d, false),
        None => (
            std::env::temp_dir().join(format!("causeway-demo-{}", std::process::id())),
            true,
        ),
    }
}

use std::sync::atomic::{AtomicU64, Ordering};
pub(crate) static NS: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];
pub(crate) static N: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];
pub(crate) fn time<R>(slot: usize, f: impl FnOnce() -> R) -> R {
    let t = std::time::Instant::now();
    let r = f();
    NS[slot].fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    N[slot].fetch_add(1, Ordering::Relaxed);
    r
}
pub fn dump(name: &str) {
    let names = ["carry_back_client", "carry_back_server", "move_member(decode)", "inject_bag", "span_tracepoint", "event_fire", "fire", "close_fire"];
    let mut s = String::new();
    for i in 0..8 {
        let n = N[i].load(Ordering::Relaxed);
        if n > 0 {
            s += &format!("{} n={} mean_ns={}\n", names[i], n, NS[i].load(Ordering::Relaxed) / n);
        }
    }
    let _ = std::fs::write(format!("/tmp/diag/{name}-{}", std::process::id()), s);
}

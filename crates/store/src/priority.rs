//! Query work runs behind ingest: the threads that run SQL and bulk scans lower their
//! own scheduling priority, so on a machine whose cores are all busy, spans keep being
//! acknowledged while analyses, exports and queries take what is left.

/// The nice value query threads take (0 is the default; 19 the lowest priority).
const QUERY_NICE: libc::c_int = 10;

/// Lowers the calling thread's priority for good (it cannot be raised again without
/// privilege): call it only on a thread of its own. Threads it starts inherit it.
pub fn run_behind_ingest() {
    // SAFETY: gettid and setpriority take and return plain integers; setpriority with
    // PRIO_PROCESS and a thread id changes only that thread's nice value, and failing
    // (a sandbox forbidding it) leaves the thread as it was, which is harmless.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, QUERY_NICE);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_thread_behind_ingest_has_the_lower_priority_and_others_keep_theirs() {
        let nice = || {
            // SAFETY: getpriority of the calling thread; errno is not consulted, as the
            // values compared are never -1 here.
            unsafe {
                let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                libc::getpriority(libc::PRIO_PROCESS, tid)
            }
        };
        let before = nice();
        let (behind, started) = std::thread::spawn(move || {
            super::run_behind_ingest();
            let behind = nice();
            let started = std::thread::spawn(nice).join().unwrap();
            (behind, started)
        })
        .join()
        .unwrap();
        assert_eq!(behind, super::QUERY_NICE.max(before));
        assert_eq!(started, behind);
        assert_eq!(nice(), before);
    }
}

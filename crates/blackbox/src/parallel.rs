//! Work split across the machine's cores: one contiguous range per core, the results in
//! order, so that what comes out is the same as from one thread.

use std::ops::Range;

/// `f` over `0..n` split into one contiguous range per core; the results in range order.
pub(crate) fn map_ranges<R: Send>(n: usize, f: impl Fn(Range<usize>) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let chunk = n.div_ceil(threads).max(1);
    let f = &f;
    std::thread::scope(|scope| {
        let running: Vec<_> = (0..n)
            .step_by(chunk)
            .map(|start| scope.spawn(move || f(start..(start + chunk).min(n))))
            .collect();
        running
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// `f` over `items` split into one contiguous chunk per core; the results in order.
pub(crate) fn map_chunks<T: Sync, R: Send>(items: &[T], f: impl Fn(&[T]) -> R + Sync) -> Vec<R> {
    map_ranges(items.len(), |range| f(&items[range]))
}

/// `a` and `b` at once, on two threads.
pub(crate) fn join<A: Send, B: Send>(
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    std::thread::scope(|scope| {
        let running = scope.spawn(a);
        let b = b();
        let a = running
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (a, b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_everything_once_in_order() {
        for n in [0, 1, 2, 3, 17] {
            let parts = map_ranges(n, |r| r.collect::<Vec<usize>>());
            let all: Vec<usize> = parts.into_iter().flatten().collect();
            assert_eq!(all, (0..n).collect::<Vec<_>>());
        }
        let sums = map_chunks(&[1, 2, 3, 4, 5], |c| c.iter().sum::<i32>());
        assert_eq!(sums.iter().sum::<i32>(), 15);
        assert_eq!(join(|| 1, || "two"), (1, "two"));
    }
}

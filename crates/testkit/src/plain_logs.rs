//! Two requests at once on one service, and that service's log of them with no ids: what
//! the tests of joining lines without ids to their traces send and write.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use causeway_model::{KeyValue, Span};

use crate::TraceBuilder;

/// Two checkouts on `orders` at once from `base`, orders 7 and 9 (in their URLs), and
/// their ids: (trace id, order).
pub fn interleaved_checkouts(base: SystemTime) -> (Vec<Vec<Span>>, [(u128, u32); 2]) {
    let ns = |ms: u64| {
        (base + Duration::from_millis(ms))
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    };
    let requests = [(0x7a11_u128, 7, 0, 400), (0x9b22_u128, 9, 50, 450)];
    let traces = requests
        .iter()
        .map(|&(trace, order, start, end)| {
            let mut b = TraceBuilder::new(trace);
            let root = b.root("orders", "app-2", "POST /checkout", ns(start), ns(end));
            b.get(root).attributes.push(KeyValue::new(
                "url.full",
                format!("/checkout?order={order}"),
            ));
            b.spans()
        })
        .collect();
    (traces, requests.map(|(trace, order, _, _)| (trace, order)))
}

/// The `orders` service's log of [`interleaved_checkouts`] from `base`: no ids, the two
/// requests' lines interleaved, three each.
pub fn interleaved_checkouts_log(base: SystemTime) -> String {
    [
        (10, "checkout of order 7 started"),
        (60, "checkout of order 9 started"),
        (200, "order 7 charged"),
        (250, "order 9 charged"),
        (390, "checkout of order 7 done"),
        (440, "checkout of order 9 done"),
    ]
    .iter()
    .map(|(ms, text)| {
        format!(
            "{} INFO [main] {text}\n",
            humantime::format_rfc3339_millis(base + Duration::from_millis(*ms))
        )
    })
    .collect()
}

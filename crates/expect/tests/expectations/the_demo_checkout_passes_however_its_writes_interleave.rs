//! The demo's Checkout validator (demo/expectations/shop.pip) on hand-built checkouts: the
//! three replica writes start at once and end as the replicas answer, so a write may end
//! before the next one's span starts. Such a write stays in the order's own flow, and every
//! such schedule is an expected path.

use causeway_expect::check::Checker;
use causeway_expect::lang::parse;
use causeway_expect::path::Path;
use causeway_expect::program::Params;
use causeway_model::{Direction, SpanKind};
use causeway_testkit::TraceBuilder;

const SHOP: &str = include_str!("../../../../demo/expectations/shop.pip");
const MS: u64 = 1_000_000;

/// A checkout whose replica writes run over `writes` (start, end, in ms), the quorum
/// reached at `quorum` ms.
fn checkout(writes: [(u64, u64); 3], quorum: u64) -> Path {
    let mut b = TraceBuilder::new(7);
    let (web, orders) = (("frontend", "web-1"), ("orders", "app-2"));
    let page = b.span(
        None,
        web.0,
        web.1,
        SpanKind::Server,
        "POST /checkout",
        0,
        200 * MS,
    );
    let place = b.rpc(page, web, orders, "POST /orders", MS, 180 * MS, 0);
    b.span(
        Some(page),
        web.0,
        web.1,
        SpanKind::Internal,
        "render receipt",
        185 * MS,
        190 * MS,
    );

    let internal = |b: &mut TraceBuilder, parent, host: (&str, &str), name, start, end| {
        b.span(
            Some(parent),
            host.0,
            host.1,
            SpanKind::Internal,
            name,
            start,
            end,
        )
    };
    internal(&mut b, place, orders, "validate basket", 3 * MS, 5 * MS);
    let write = internal(
        &mut b,
        place,
        orders,
        "quorum write",
        6 * MS,
        quorum * MS + 100,
    );
    for (n, (start, end)) in writes.into_iter().enumerate() {
        let replica = (
            ["storage-1", "storage-2", "storage-3"][n],
            ["disk-1", "disk-2", "disk-3"][n],
        );
        let disk = b.rpc(
            write,
            orders,
            replica,
            "PUT /write",
            start * MS,
            end * MS,
            0,
        );
        internal(
            &mut b,
            disk,
            replica,
            "wait for disk",
            start * MS + 600_000,
            start * MS + 700_000,
        );
        internal(
            &mut b,
            disk,
            replica,
            "disk write",
            start * MS + 700_000,
            end * MS - 600_000,
        );
    }
    b.notice(write, "quorum reached", quorum * MS);

    let at = (quorum + 1) * MS;
    let publish = internal(
        &mut b,
        place,
        orders,
        "publish order-placed",
        at,
        at + 10 * MS,
    );
    b.message(publish, Direction::Send, 99, at + MS, 64);
    b.rpc(
        publish,
        orders,
        ("queue", "mq-1"),
        "POST /publish",
        at + 2 * MS,
        at + 9 * MS,
        0,
    );
    let consume = internal(
        &mut b,
        publish,
        ("queue", "mq-1"),
        "process order-placed",
        at + 10 * MS,
        at + 20 * MS,
    );
    b.message(consume, Direction::Recv, 99, at + 10 * MS, 64);
    internal(
        &mut b,
        consume,
        ("queue", "mq-1"),
        "send confirmation email",
        at + 11 * MS,
        at + 19 * MS,
    );
    Path::of(&b.trace())
}

fn checkout_validator() -> Checker {
    let file = parse(SHOP).unwrap_or_else(|e| panic!("{}", e.render("shop.pip", SHOP)));
    Checker::new(&file, Params::from([("REPLICAS".to_string(), 3.0)])).unwrap()
}

#[test]
fn writes_that_overlap_pass() {
    let path = checkout([(10, 25), (11, 29), (12, 60)], 30);
    let (result, _) = checkout_validator().check(&path);
    assert!(result.expected, "{result:?}");
}

#[test]
fn a_write_that_ended_before_the_next_began_passes() {
    // The first write is answered before the second's span starts: both run in the
    // order's own flow, the third alongside.
    let path = checkout([(10, 15), (16, 25), (17, 60)], 26);
    let (result, _) = checkout_validator().check(&path);
    assert!(result.expected, "{result:?}");
}

#[test]
fn a_quorum_reached_before_any_write_ended_fails() {
    let path = checkout([(10, 40), (11, 45), (12, 60)], 30);
    let (result, _) = checkout_validator().check(&path);
    assert!(!result.expected, "{result:?}");
}

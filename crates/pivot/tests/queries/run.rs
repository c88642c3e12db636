//! Running compiled advice over simulated requests: the paper's Q7 across a client, a
//! NameNode and a DataNode, with the bag going out with the requests and back with the
//! NameNode's response.

use causeway_pivot::aggregate::Aggregator;
use causeway_pivot::bag::{Bags, Hlc};
use causeway_pivot::compile::{compile, Catalog};
use causeway_pivot::lang::ast::Item;
use causeway_pivot::lang::{parse, parse_query};
use causeway_pivot::program::{lower, Context, Lowered, Observed, Program, MAX_FANOUT};
use causeway_pivot::value::Value;

const TRACEPOINTS: &str = include_str!("../../../../demo/tracepoints/replicas.pivot");
const PAPER: &str = include_str!("../../../../demo/tracepoints/paper-queries.pivot");

fn lowered(src: &str, id: u32) -> Lowered {
    let mut catalog = Catalog::default();
    catalog.add(&parse(TRACEPOINTS).unwrap());
    let script = parse(PAPER).unwrap();
    let q = script
        .items
        .iter()
        .find_map(|i| match i {
            Item::Query(q) if q.name.as_ref().is_some_and(|n| n.text == src) => Some(q.clone()),
            _ => None,
        })
        .unwrap_or_else(|| parse_query(src).unwrap());
    lower(&compile(&q.query, &catalog).unwrap(), id, &[])
}

struct World {
    clock: Hlc,
    next_id: u64,
    dropped: u64,
    now: u64,
}

impl World {
    fn new() -> World {
        World {
            clock: Hlc::default(),
            next_id: 0,
            dropped: 0,
            now: 1_000,
        }
    }

    fn hit(
        &mut self,
        q: &Lowered,
        tracepoint: &str,
        observed: &[Observed],
        bag: &mut Bags,
        agg: &mut Aggregator,
    ) {
        self.now += 10;
        let mut next = self.next_id;
        let mut ids = || {
            next += 1;
            next
        };
        let mut cx = Context {
            clock: &mut self.clock,
            now: self.now,
            ids: &mut ids,
            dropped: &mut self.dropped,
            example: None,
        };
        let mut shared = Some(std::sync::Arc::new(std::mem::take(bag)));
        for p in q.programs.iter().filter(|p| p.tracepoint == tracepoint) {
            p.run(observed, &mut shared, agg, &mut cx);
        }
        *bag = shared
            .map(std::sync::Arc::unwrap_or_clone)
            .unwrap_or_default();
        self.next_id = next;
    }
}

fn s(x: &str) -> Value {
    Value::from(x)
}

fn replicas(list: &str) -> Observed {
    Observed::Many(list.split(',').map(s).collect())
}

/// Values for `program`'s observed exports, in the order it reads them.
fn in_observe_order(program: &Program, by_name: &[(&str, Observed)]) -> Vec<Observed> {
    program
        .observe
        .iter()
        .map(|name| {
            by_name
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, o)| o.clone())
                .unwrap_or_else(|| panic!("no value given for {name}"))
        })
        .collect()
}

fn rows(agg: &Aggregator) -> Vec<String> {
    agg.rows()
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// One read: the client's op, a call to the NameNode whose bag comes back on the
/// response, then a call to the DataNode on `dn_host`.
fn read(
    w: &mut World,
    q: &Lowered,
    agg: &mut Aggregator,
    client: &str,
    locations: &str,
    dn_host: &str,
) {
    let mut request = Bags::default();
    w.hit(
        q,
        "StressTest.DoNextOp",
        &[Observed::One(s(client))],
        &mut request,
        agg,
    );
    let mut at_namenode = request.branch();
    w.hit(
        q,
        "NN.GetBlockLocations",
        &[replicas(locations)],
        &mut at_namenode,
        agg,
    );
    request.merge(&at_namenode);
    let mut at_datanode = request.branch();
    w.hit(
        q,
        "DN.DataTransferProtocol",
        &[Observed::One(s(dn_host))],
        &mut at_datanode,
        agg,
    );
}

#[test]
fn q7_counts_each_selected_host_against_the_replicas_offered() {
    let q = lowered("Q7", 7);
    let mut agg = Aggregator::new(&q.funcs);
    let mut w = World::new();
    read(&mut w, &q, &mut agg, "B", "A,C,D", "A");
    read(&mut w, &q, &mut agg, "C", "A,D,E", "A");
    // A local read is filtered out by `st.host != DNop.host`.
    read(&mut w, &q, &mut agg, "A", "A,B,C", "A");
    read(&mut w, &q, &mut agg, "E", "C,D,F", "C");
    assert_eq!(
        rows(&agg),
        ["A A 2", "A C 1", "A D 2", "A E 1", "C C 1", "C D 1", "C F 1"]
    );
}

#[test]
fn advice_with_a_let_step_counts_what_advice_without_one_counts() {
    // Advice without Let steps runs on borrowed values, advice with one on built tuples:
    // the same query written both ways gives the same totals, joins and filter included.
    let plain = lowered("Q7", 7);
    let with_let = lowered(
        "From DNop In DN.DataTransferProtocol \
         Join getloc In NN.GetBlockLocations On getloc -> DNop \
         Join st In StressTest.DoNextOp On st -> getloc \
         Where st.host != DNop.host \
         Let dn = DNop.host \
         GroupBy dn, getloc.replicas \
         Select dn, getloc.replicas, COUNT",
        8,
    );
    let at_datanode = |q: &Lowered| {
        q.programs
            .iter()
            .find(|p| p.tracepoint == "DN.DataTransferProtocol")
            .map(|p| p.steps.iter().any(|(target, _)| target.is_some()))
    };
    assert_eq!(at_datanode(&plain), Some(false));
    assert_eq!(at_datanode(&with_let), Some(true));
    let many: Vec<String> = (0..30).map(|i| format!("r{i}")).collect();
    let reads = [
        ("B", "A,C,D".to_string(), "A"),
        // Local: filtered out.
        ("A", "A,B,C".to_string(), "A"),
        ("E", "C,D,F".to_string(), "C"),
        ("B", many.join(","), "r3"),
    ];
    let mut totals = Vec::new();
    for q in [&plain, &with_let] {
        let mut agg = Aggregator::new(&q.funcs);
        let mut w = World::new();
        for (client, locations, dn) in &reads {
            read(&mut w, q, &mut agg, client, locations, dn);
        }
        totals.push(rows(&agg));
    }
    assert_eq!(totals[0], totals[1]);
    assert_eq!(totals[0].len(), 3 + 3 + 30, "{:?}", totals[0]);
}

#[test]
fn q6_and_q3_count_reads_per_host() {
    let q6 = lowered("Q6", 6);
    let q3 = lowered("Q3", 3);
    let mut a6 = Aggregator::new(&q6.funcs);
    let mut a3 = Aggregator::new(&q3.funcs);
    let mut w = World::new();
    for (client, dn) in [("A", "A"), ("B", "A"), ("B", "D"), ("B", "A")] {
        let mut request = Bags::default();
        w.hit(
            &q6,
            "StressTest.DoNextOp",
            &[Observed::One(s(client))],
            &mut request,
            &mut a6,
        );
        let mut at_dn = request.branch();
        w.hit(
            &q6,
            "DN.DataTransferProtocol",
            &[Observed::One(s(dn))],
            &mut at_dn,
            &mut a6,
        );
        w.hit(
            &q3,
            "DN.DataTransferProtocol",
            &[Observed::One(s(dn))],
            &mut at_dn,
            &mut a3,
        );
    }
    assert_eq!(rows(&a6), ["A A 1", "B A 2", "B D 1"]);
    assert_eq!(rows(&a3), ["A 3", "D 1"]);
}

#[test]
fn q2_joins_the_first_client_protocol_only() {
    let q = lowered("Q2", 2);
    let mut agg = Aggregator::new(&q.funcs);
    let mut w = World::new();
    let mut request = Bags::default();
    w.hit(
        &q,
        "ClientProtocols",
        &[Observed::One(s("mr-sort"))],
        &mut request,
        &mut agg,
    );
    // A nested client call later in the same request does not replace the first.
    let mut inner = request.branch();
    w.hit(
        &q,
        "ClientProtocols",
        &[Observed::One(s("hbase"))],
        &mut inner,
        &mut agg,
    );
    request.merge(&inner);
    let mut at_dn = request.branch();
    for delta in [100i64, 250] {
        w.hit(
            &q,
            "DataNodeMetrics.incrBytesRead",
            &[Observed::One(Value::Int(delta))],
            &mut at_dn,
            &mut agg,
        );
    }
    assert_eq!(rows(&agg), ["mr-sort 350"]);
    // Without a client protocol before it, a read joins nothing.
    let mut lone = Bags::default();
    w.hit(
        &q,
        "DataNodeMetrics.incrBytesRead",
        &[Observed::One(Value::Int(7))],
        &mut lone,
        &mut agg,
    );
    assert_eq!(rows(&agg), ["mr-sort 350"]);
}

#[test]
fn partial_results_merge_to_the_totals_of_one_aggregator() {
    let q = lowered(
        "From d In DN.DataTransferProtocol GroupBy d.host \
         Select d.host, COUNT, SUM(d.pid), MIN(d.pid), MAX(d.pid), AVERAGE(d.pid)",
        9,
    );
    let mut whole = Aggregator::new(&q.funcs);
    let mut parts = [Aggregator::new(&q.funcs), Aggregator::new(&q.funcs)];
    let mut w = World::new();
    for i in 0..10i64 {
        let host = if i % 3 == 0 { "A" } else { "B" };
        let obs = in_observe_order(
            &q.programs[0],
            &[
                ("d.pid", Observed::One(Value::Int(i))),
                ("d.host", Observed::One(s(host))),
            ],
        );
        w.hit(
            &q,
            "DN.DataTransferProtocol",
            &obs,
            &mut Bags::default(),
            &mut whole,
        );
        w.hit(
            &q,
            "DN.DataTransferProtocol",
            &obs,
            &mut Bags::default(),
            &mut parts[(i % 2) as usize],
        );
    }
    let mut merged = parts[0].take();
    merged.merge(&parts[1]);
    assert_eq!(rows(&merged), rows(&whole));
    assert_eq!(rows(&whole), ["A 4 18 0 9 4.5", "B 6 27 1 8 4.5"]);
}

#[test]
fn a_join_larger_than_the_fanout_cap_is_cut_and_counted() {
    let q = lowered("Q5", 5);
    let mut agg = Aggregator::new(&q.funcs);
    let mut w = World::new();
    let mut request = Bags::default();
    for c in 0..40 {
        // Forty distinct client hosts packed in one request.
        w.hit(
            &q,
            "StressTest.DoNextOp",
            &[Observed::One(s(&format!("h{c}")))],
            &mut request,
            &mut agg,
        );
    }
    let list: Vec<String> = (0..10).map(|r| format!("r{r}")).collect();
    let obs = in_observe_order(
        &q.programs[1],
        &[
            ("getloc.replicas", replicas(&list.join(","))),
            ("getloc.src", Observed::One(s("/f"))),
        ],
    );
    w.hit(&q, "NN.GetBlockLocations", &obs, &mut request, &mut agg);
    let total: i64 = agg
        .rows()
        .iter()
        .map(|r| match r.last() {
            Some(Value::Int(n)) => *n,
            _ => 0,
        })
        .sum();
    assert_eq!(total, MAX_FANOUT as i64);
    assert_eq!(w.dropped, 400 - MAX_FANOUT as u64);
}

#[test]
fn an_exploded_field_packed_past_the_fanout_cap_is_cut_and_counted() {
    // The NameNode's advice packs the exploded replicas and joins nothing.
    let q = lowered(
        "From d In DN.DataTransferProtocol Join g In NN.GetBlockLocations On g -> d \
         GroupBy g.replicas Select g.replicas, COUNT",
        9,
    );
    let mut agg = Aggregator::new(&q.funcs);
    let mut w = World::new();
    let mut request = Bags::default();
    let list: Vec<String> = (0..400).map(|r| format!("r{r}")).collect();
    let obs = in_observe_order(&q.programs[0], &[("g.replicas", replicas(&list.join(",")))]);
    w.hit(&q, "NN.GetBlockLocations", &obs, &mut request, &mut agg);
    assert_eq!(w.dropped, 400 - MAX_FANOUT as u64);
    let obs = in_observe_order(&q.programs[1], &[]);
    w.hit(&q, "DN.DataTransferProtocol", &obs, &mut request, &mut agg);
    assert_eq!(agg.rows().len(), MAX_FANOUT);
    assert_eq!(
        w.dropped,
        400 - MAX_FANOUT as u64,
        "the join of 256 is within the cap"
    );
}

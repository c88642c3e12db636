//! Compiling queries to advice: the paper's queries against the paper's tracepoints, and
//! the checks that name what is wrong and where.

use causeway_pivot::compile::{compile, explain, Catalog, End};
use causeway_pivot::lang::ast::{Item, Temporal};
use causeway_pivot::lang::{parse, parse_query};

const TRACEPOINTS: &str = include_str!("../../../../demo/tracepoints/replicas.pivot");
const PAPER: &str = include_str!("../../../../demo/tracepoints/paper-queries.pivot");

fn catalog() -> Catalog {
    let mut c = Catalog::default();
    c.add(&parse(TRACEPOINTS).unwrap());
    c
}

fn explained(name: &str) -> String {
    let script = parse(PAPER).unwrap();
    let q = script
        .items
        .iter()
        .find_map(|i| match i {
            Item::Query(q) if q.name.as_ref().is_some_and(|n| n.text == name) => Some(q),
            _ => None,
        })
        .unwrap();
    explain(&compile(&q.query, &catalog()).unwrap())
}

#[test]
fn every_paper_query_compiles() {
    for i in 1..=7 {
        let text = explained(&format!("Q{i}"));
        assert!(text.contains("EMIT"), "Q{i}: {text}");
    }
}

#[test]
fn a_local_query_is_one_advice_that_emits() {
    assert_eq!(
        explained("Q1"),
        "A0 at DataNodeMetrics.incrBytesRead (incr):\n  OBSERVE incr.host, incr.delta\n  \
         EMIT incr.host, SUM(incr.delta)\n"
    );
}

#[test]
fn q2_packs_the_first_client_name_and_the_datanode_unpacks_it() {
    // The paper's A1 and A2.
    assert_eq!(
        explained("Q2"),
        "A0 at ClientProtocols (cl):\n  OBSERVE cl.procName\n  PACK cl FIRST cl.procName\n\
         A1 at DataNodeMetrics.incrBytesRead (incr):\n  OBSERVE incr.delta\n  \
         UNPACK cl cl.procName\n  EMIT cl.procName, SUM(incr.delta)\n"
    );
}

#[test]
fn q7_chains_two_bags_and_filters_where_both_hosts_are_known() {
    assert_eq!(
        explained("Q7"),
        "A0 at StressTest.DoNextOp (st):\n  OBSERVE st.host\n  PACK st GROUP st.host\n\
         A1 at NN.GetBlockLocations (getloc):\n  OBSERVE getloc.replicas\n  UNPACK st st.host\n  \
         PACK getloc GROUP st.host, getloc.replicas\n\
         A2 at DN.DataTransferProtocol (DNop):\n  OBSERVE DNop.host\n  \
         UNPACK getloc st.host, getloc.replicas\n  FILTER st.host != DNop.host\n  \
         EMIT DNop.host, getloc.replicas, COUNT\n"
    );
}

#[test]
fn where_and_let_go_to_the_earliest_advice_that_has_their_inputs() {
    let q = parse_query(
        "From d In DN.DataTransferProtocol\n\
         Join g In MostRecent(NN.GetBlockLocations) On g -> d\n\
         Join s In StressTest.DoNextOp On s -> g\n\
         Where s.host StartsWith 'A'\n\
         Let local = g.src == s.host\n\
         Let unused = d.pid * 2\n\
         Where d.pid > 0\n\
         Select d.host, g.src, local",
    )
    .unwrap();
    let plan = compile(&q.query, &catalog()).unwrap();
    assert_eq!(
        explain(&plan),
        "A0 at StressTest.DoNextOp (s):\n  OBSERVE s.host\n  FILTER s.host StartsWith \"A\"\n  \
         PACK s GROUP s.host\n\
         A1 at NN.GetBlockLocations (g):\n  OBSERVE g.src\n  UNPACK s s.host\n  \
         LET local = g.src == s.host\n  PACK g MOSTRECENT g.src, local\n\
         A2 at DN.DataTransferProtocol (d):\n  OBSERVE d.pid, d.host\n  UNPACK g g.src, local\n  \
         FILTER d.pid > 0\n  EMIT d.host, g.src, local\n"
    );
    assert!(matches!(
        plan.advice[1].end,
        End::Pack {
            mode: Temporal::MostRecent(1),
            ..
        }
    ));
}

#[test]
fn a_filter_on_a_first_or_most_recent_tuple_runs_after_the_selection() {
    let q = parse_query(
        "From d In DN.DataTransferProtocol\n\
         Join g In MostRecent(NN.GetBlockLocations) On g -> d\n\
         Where g.src == '/f1'\n\
         Select d.host",
    )
    .unwrap();
    assert_eq!(
        explain(&compile(&q.query, &catalog()).unwrap()),
        "A0 at NN.GetBlockLocations (g):\n  OBSERVE g.src\n  PACK g MOSTRECENT g.src\n\
         A1 at DN.DataTransferProtocol (d):\n  OBSERVE d.host\n  UNPACK g g.src\n  \
         FILTER g.src == \"/f1\"\n  EMIT d.host\n"
    );
}

#[test]
fn mistakes_are_named_with_their_place() {
    let cases = [
        ("From x In Nowhere Select x.host", (1, 11), "a tracepoint defined"),
        ("From x In DN.DataTransferProtocol Select x.bytes", (1, 42), "an export of DN.DataTransferProtocol"),
        (
            "From x In DN.DataTransferProtocol\nJoin y In StressTest.DoNextOp On x -> y\nSelect x.host",
            (2, 34),
            "`y`, the joined variable",
        ),
        (
            "From x In DN.DataTransferProtocol\nJoin y In StressTest.DoNextOp On y -> z\nSelect x.host",
            (2, 39),
            "the From variable or a variable joined before",
        ),
        (
            "From x In DN.DataTransferProtocol GroupBy x.host Select x.pid, COUNT",
            (1, 57),
            "a GroupBy key or an aggregate",
        ),
        (
            "From x In DN.DataTransferProtocol Select x.host, COUNT",
            (1, 42),
            "`GroupBy` naming the plain values",
        ),
        (
            "From x In DN.DataTransferProtocol Let x = 1 Select x.host",
            (1, 39),
            "a name not used before",
        ),
        (
            "From x In DN.DataTransferProtocol Select x.duration",
            (1, 42),
            "an export",
        ),
    ];
    for (src, at, expected) in cases {
        let q = parse_query(src).unwrap();
        let e = compile(&q.query, &catalog()).unwrap_err();
        assert_eq!((e.line, e.col), at, "{src}: {e}");
        assert!(e.expected.contains(expected), "{src}: {e}");
    }
    // `duration` is there when every probe is a span's close.
    let q = parse_query("From x In NN.GetBlockLocations Select MAX(x.duration)").unwrap();
    compile(&q.query, &catalog()).unwrap();
}

#[test]
fn too_many_joins_is_an_error() {
    let mut src = String::from("From j0 In DN.DataTransferProtocol");
    for i in 1..=40 {
        src.push_str(&format!(
            " Join j{i} In StressTest.DoNextOp On j{i} -> j{}",
            i - 1
        ));
    }
    src.push_str(" Select j0.host");
    let q = parse_query(&src).unwrap();
    let e = compile(&q.query, &catalog()).unwrap_err();
    assert!(e.expected.contains("at most 32 joins"), "{e}");
}

fn compiled_with(
    definitions: &str,
    query: &str,
) -> Result<String, causeway_model::source::SyntaxError> {
    let mut c = catalog();
    c.add(&parse(definitions).unwrap());
    let q = parse_query(query).unwrap();
    compile(&q.query, &c).map(|p| explain(&p))
}

#[test]
fn a_named_query_joined_brings_its_joins_and_filters_and_only_the_columns_used() {
    let remote = "Remote = From g In NN.GetBlockLocations\n\
                  Join st In StressTest.DoNextOp On st -> g\n\
                  Where g.src StartsWith '/f'\n\
                  Select st.host, g.src";
    let text = compiled_with(
        remote,
        "From d In DN.DataTransferProtocol Join r In Remote On r -> d\n\
         Where r.st.host != d.host GroupBy d.host Select d.host, COUNT",
    )
    .unwrap();
    assert_eq!(
        text,
        "A0 at StressTest.DoNextOp (r/st):\n  OBSERVE r/st.host\n  \
         LET r.st.host = r/st.host\n  PACK r/st GROUP r.st.host\n\
         A1 at NN.GetBlockLocations (r):\n  OBSERVE r.src\n  UNPACK r/st r.st.host\n  \
         FILTER r.src StartsWith \"/f\"\n  PACK r GROUP r.st.host\n\
         A2 at DN.DataTransferProtocol (d):\n  OBSERVE d.host\n  UNPACK r r.st.host\n  \
         FILTER r.st.host != d.host\n  EMIT d.host, COUNT\n"
    );
}

#[test]
fn a_named_query_keeps_its_filter_below_a_first_and_an_outer_filter_runs_after() {
    // Inside `Big`, the filter picks which reads count before First picks one.
    let named = compiled_with(
        "Big = From d In DN.DataTransferProtocol Where d.pid > 10 Select d.host",
        "From op In StressTest.DoNextOp Join b In First(Big) On b -> op Select b.d.host",
    )
    .unwrap();
    assert_eq!(
        named,
        "A0 at DN.DataTransferProtocol (b):\n  OBSERVE b.pid, b.host\n  FILTER b.pid > 10\n  \
         LET b.d.host = b.host\n  PACK b FIRST b.d.host\n\
         A1 at StressTest.DoNextOp (op):\n  OBSERVE -\n  UNPACK b b.d.host\n  EMIT b.d.host\n"
    );
    // The same filter written in the outer query applies to the tuple First picked.
    let own = compiled_with(
        "",
        "From op In StressTest.DoNextOp Join b In First(DN.DataTransferProtocol) On b -> op \
         Where b.pid > 10 Select b.host",
    )
    .unwrap();
    assert_eq!(
        own,
        "A0 at DN.DataTransferProtocol (b):\n  OBSERVE b.pid, b.host\n  PACK b FIRST b.pid, b.host\n\
         A1 at StressTest.DoNextOp (op):\n  OBSERVE -\n  UNPACK b b.pid, b.host\n  \
         FILTER b.pid > 10\n  EMIT b.host\n"
    );
}

#[test]
fn named_queries_nest_and_refuse_cycles_aggregates_and_unknown_columns() {
    let defs = "Loc = From g In NN.GetBlockLocations Join st In StressTest.DoNextOp On st -> g \
                Select st.host, g.src\n\n\
                Reads = From d In DN.DataTransferProtocol Join l In Loc On l -> d Select l.st.host, d.host\n\n\
                Counted = From d In DN.DataTransferProtocol GroupBy d.host Select d.host, COUNT\n\n\
                Ping = From p In Pong Select p.host\n\nPong = From p In Ping Select p.host";
    // Two levels deep: the outermost variable's columns name the inner query's columns.
    let text = compiled_with(
        defs,
        "From x In Reads Where x.l.st.host != x.d.host GroupBy x.host Select x.host, COUNT",
    )
    .unwrap();
    assert!(
        text.contains("A0 at StressTest.DoNextOp (x/l/st)"),
        "{text}"
    );
    assert!(text.contains("FILTER x.l.st.host != x.d.host"), "{text}");

    let cases = [
        (
            "From x In DN.DataTransferProtocol Join c In Counted On c -> x Select x.host",
            "without GroupBy or aggregates",
        ),
        (
            "From x In Ping Select x.host",
            "do not source each other in a cycle",
        ),
        (
            "From x In DN.DataTransferProtocol Join l In Loc On l -> x Select l.g.pid",
            "an export of NN.GetBlockLocations",
        ),
    ];
    for (src, expected) in cases {
        let e = compiled_with(defs, src).unwrap_err();
        assert!(
            e.expected.contains(expected) || e.found.contains(expected),
            "{src}: {e}"
        );
    }
}

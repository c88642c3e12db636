//! `causeway demo replicas --queries FILE --json`: the Pivot Tracing paper's Q1-Q7 run
//! unchanged against the replicated file system's real processes, and their totals equal
//! what a model of the workload says, for several hosts, clients, files, reads and host
//! orders. Under random selection the per-host split varies; the totals that do not
//! depend on it are exact, and the others still add up.

mod common;

use std::collections::BTreeMap;

use serde_json::Value;

const QUERIES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../demo/tracepoints/paper-queries.pivot"
);

struct Workload {
    hosts: Vec<String>,
    order: Vec<String>,
    clients: usize,
    files_per_set: usize,
    reads: usize,
    read_size: i64,
}

/// (client host, file's replicas, the host read from), once per read.
fn reads(w: &Workload) -> Vec<(String, Vec<String>, String)> {
    let mut out = Vec::new();
    let h = &w.hosts;
    for client in h {
        for _ in 0..w.clients {
            for i in 0..h.len() {
                for j in i + 1..h.len() {
                    for k in j + 1..h.len() {
                        let replicas = vec![h[i].clone(), h[j].clone(), h[k].clone()];
                        let first = if replicas.contains(client) {
                            client.clone()
                        } else {
                            w.order
                                .iter()
                                .find(|o| replicas.contains(o))
                                .unwrap()
                                .clone()
                        };
                        for _ in 0..w.files_per_set * w.reads {
                            out.push((client.clone(), replicas.clone(), first.clone()));
                        }
                    }
                }
            }
        }
    }
    out
}

type Table = BTreeMap<Vec<String>, i64>;

fn count(rows: impl IntoIterator<Item = (Vec<String>, i64)>) -> Table {
    let mut t = Table::new();
    for (k, v) in rows {
        *t.entry(k).or_default() += v;
    }
    t
}

/// The rows of query `name` as key columns then the last column.
fn table(out: &Value, name: &str) -> Table {
    let q = out["queries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {out}"));
    q["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let r = r.as_array().unwrap();
            let key = r[..r.len() - 1]
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .collect();
            (key, r[r.len() - 1].as_i64().unwrap())
        })
        .collect()
}

/// Q7 again, its NameNode and client side written as a named query joined by name.
const Q7_BY_NAME: &str = "
Remote : From getloc In NN.GetBlockLocations
Join st In StressTest.DoNextOp On st -> getloc
Select st.host, getloc.replicas

Q7n : From DNop In DN.DataTransferProtocol
Join r In Remote On r -> DNop
Where r.st.host != DNop.host
GroupBy DNop.host, r.getloc.replicas
Select DNop.host, r.getloc.replicas, COUNT
";

fn run(w: &Workload, queries: &str, extra: &[&str]) -> Value {
    let hosts = w.hosts.len().to_string();
    let clients = w.clients.to_string();
    let files = w.files_per_set.to_string();
    let reads = w.reads.to_string();
    let size = w.read_size.to_string();
    let order: String = w.order.concat();
    let mut args = vec![
        "demo",
        "replicas",
        "--hosts",
        &hosts,
        "--clients-per-host",
        &clients,
        "--files-per-set",
        &files,
        "--reads",
        &reads,
        "--read-size",
        &size,
        "--order",
        &order,
        "--queries",
        queries,
        "--json",
        "--http",
        "127.0.0.1:0",
        "--grpc",
        "127.0.0.1:0",
        "--ingest",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = common::run(&args);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn hosts(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| ((b'A' + i as u8) as char).to_string())
        .collect()
}

fn s(x: &str) -> String {
    x.to_string()
}

#[test]
fn first_selection_totals_match_the_model_exactly() {
    let h = hosts(4);
    let w = Workload {
        order: ["D", "C", "B", "A"].map(s).to_vec(),
        hosts: h,
        clients: 2,
        files_per_set: 2,
        reads: 1,
        read_size: 1000,
    };
    let dir = tempfile_dir();
    let queries = dir.join("queries.pivot");
    let text = std::fs::read_to_string(QUERIES).unwrap() + Q7_BY_NAME;
    std::fs::write(&queries, text).unwrap();
    let out = run(&w, queries.to_str().unwrap(), &[]);
    let r = reads(&w);
    assert_eq!(
        table(&out, "Q1"),
        count(r.iter().map(|(_, _, dn)| (vec![dn.clone()], w.read_size)))
    );
    let per_client = (r.len() / (w.hosts.len() * w.clients)) as i64 * w.read_size;
    assert_eq!(
        table(&out, "Q2"),
        count(w.hosts.iter().flat_map(|h| {
            (0..w.clients).map(move |i| (vec![format!("StressTest-{h}-{i}")], per_client))
        }))
    );
    assert_eq!(
        table(&out, "Q3"),
        count(r.iter().map(|(_, _, dn)| (vec![dn.clone()], 1)))
    );
    // Q4 groups by file: each (client host, file) is read clients x reads times.
    let q4 = table(&out, "Q4");
    assert_eq!(q4.len(), w.hosts.len() * 4 * w.files_per_set, "{q4:?}");
    assert!(
        q4.values().all(|c| *c == (w.clients * w.reads) as i64),
        "{q4:?}"
    );
    assert_eq!(
        table(&out, "Q5"),
        count(
            r.iter()
                .flat_map(|(c, reps, _)| reps.iter().map(|x| (vec![c.clone(), x.clone()], 1)))
        )
    );
    assert_eq!(
        table(&out, "Q6"),
        count(r.iter().map(|(c, _, dn)| (vec![c.clone(), dn.clone()], 1)))
    );
    assert_eq!(
        table(&out, "Q7"),
        count(
            r.iter()
                .filter(|(c, _, dn)| c != dn)
                .flat_map(|(_, reps, dn)| reps.iter().map(|x| (vec![dn.clone(), x.clone()], 1)))
        )
    );
    assert_eq!(table(&out, "Q7n"), table(&out, "Q7"));
    let _ = std::fs::remove_dir_all(dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("causeway-replicas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn random_selection_keeps_the_totals_that_do_not_depend_on_it() {
    let h = hosts(5);
    let w = Workload {
        order: h.clone(),
        hosts: h,
        clients: 1,
        files_per_set: 1,
        reads: 2,
        read_size: 64,
    };
    let out = run(&w, QUERIES, &["--selection", "random", "--seed", "7"]);
    let r = reads(&w);
    let total = r.len() as i64;
    assert_eq!(table(&out, "Q3").values().sum::<i64>(), total);
    assert_eq!(table(&out, "Q1").values().sum::<i64>(), total * w.read_size);
    assert_eq!(
        table(&out, "Q5"),
        count(
            r.iter()
                .flat_map(|(c, reps, _)| reps.iter().map(|x| (vec![c.clone(), x.clone()], 1)))
        )
    );
    // Each client reads from its own host whenever it holds a replica, whatever the order.
    let q6 = table(&out, "Q6");
    for c in &w.hosts {
        let local = r
            .iter()
            .filter(|(cl, reps, _)| cl == c && reps.contains(c))
            .count() as i64;
        assert_eq!(
            q6.get(&vec![c.clone(), c.clone()]).copied().unwrap_or(0),
            local,
            "{q6:?}"
        );
        let all: i64 = q6.iter().filter(|(k, _)| k[0] == *c).map(|(_, v)| v).sum();
        assert_eq!(all, r.iter().filter(|(cl, _, _)| cl == c).count() as i64);
    }
}

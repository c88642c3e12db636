//! A generator of realistic traces for benchmarks and tests: a frontend fanning out to
//! mid-tier services that call backends, 10 to 60 spans per trace, 8 to 15 attributes per
//! span with realistic cardinality (a few methods and regions, thousands of users, a
//! unique request id), events, occasional errors, and client spans that enclose their
//! server spans. Deterministic for a seed.

use std::sync::Arc;

use causeway_model::{Event, KeyValue, Span, SpanId, SpanKind, Status, TraceId, Value};

struct Service {
    name: Arc<str>,
    hosts: Vec<Arc<str>>,
    operations: &'static [&'static str],
    calls: &'static [usize],
}

const FRONTEND: usize = 0;

fn services() -> Vec<Service> {
    let defs: [(&str, &[&str], &[usize]); 12] = [
        (
            "frontend",
            &[
                "GET /",
                "GET /product/{id}",
                "POST /cart",
                "POST /checkout",
                "GET /search",
            ],
            &[1, 2, 3, 4, 5],
        ),
        ("cart", &["GetCart", "AddItem", "EmptyCart"], &[6, 7]),
        (
            "catalog",
            &["ListProducts", "GetProduct", "SearchProducts"],
            &[6, 8],
        ),
        ("checkout", &["PlaceOrder"], &[1, 9, 10, 11, 7]),
        ("recommendation", &["ListRecommendations"], &[2, 6]),
        ("search", &["Query", "Suggest"], &[8, 6]),
        ("cache", &["get", "set"], &[]),
        ("users", &["GetUser", "Authenticate"], &[8]),
        (
            "postgres",
            &[
                "SELECT products",
                "SELECT users",
                "INSERT orders",
                "UPDATE stock",
            ],
            &[],
        ),
        ("payments", &["Charge"], &[7]),
        ("shipping", &["GetQuote", "ShipOrder"], &[8]),
        ("email", &["SendConfirmation"], &[]),
    ];
    defs.iter()
        .map(|(name, operations, calls)| Service {
            name: Arc::from(*name),
            hosts: (1..=3)
                .map(|i| Arc::from(format!("{name}-{i}.prod")))
                .collect(),
            operations,
            calls,
        })
        .collect()
}

const REGIONS: [&str; 4] = ["us-east-1", "us-west-2", "eu-west-1", "ap-south-1"];
const VERSIONS: [&str; 3] = ["v1.41.0", "v1.42.0", "v1.42.1"];
const METHODS: [&str; 4] = ["GET", "GET", "POST", "PUT"];
const TIERS: [&str; 3] = ["free", "pro", "enterprise"];
const STATEMENTS: [&str; 6] = [
    "SELECT * FROM products WHERE id = $1",
    "SELECT * FROM users WHERE id = $1",
    "INSERT INTO orders VALUES ($1, $2, $3)",
    "UPDATE stock SET n = n - $1 WHERE id = $2",
    "SELECT id FROM products WHERE name ILIKE $1 LIMIT 20",
    "SELECT * FROM carts WHERE user_id = $1",
];

/// Makes traces; each call to [`Generator::trace`] returns the spans of one new trace,
/// starting `spacing` nanoseconds after the previous one.
pub struct Generator {
    rng: u64,
    request_types: Option<u64>,
    services: Vec<Service>,
    next_start: u64,
    spacing: u64,
}

struct Node {
    service: usize,
    op: &'static str,
    kind: SpanKind,
    parent: Option<usize>,
    children: Vec<usize>,
    self_time: u64,
    parallel: bool,
    start: u64,
    end: u64,
}

impl Generator {
    /// A generator whose first trace starts at `start` (Unix ns) and whose traces start
    /// `spacing` ns apart.
    pub fn new(seed: u64, start: u64, spacing: u64) -> Generator {
        Generator {
            rng: seed ^ 0x9E37_79B9_7F4A_7C15,
            request_types: None,
            services: services(),
            next_start: start,
            spacing,
        }
    }

    /// Makes most traces (97%) follow one of `n` fixed call trees, the first ones more
    /// often than the last, as requests to a real system's endpoints do; the rest take a
    /// random shape. Timing, ids and attributes stay random.
    pub fn with_request_types(mut self, n: u64) -> Generator {
        self.request_types = Some(n.max(1));
        self
    }

    fn next(&mut self) -> u64 {
        // wyrand: fast, and good enough for shaping test data.
        self.rng = self.rng.wrapping_add(0xa076_1d64_78bd_642f);
        let t = (self.rng as u128).wrapping_mul((self.rng ^ 0xe703_7ed1_a0b4_28db) as u128);
        (t >> 64) as u64 ^ t as u64
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    /// Milliseconds-scale latency with a long tail.
    fn latency(&mut self) -> u64 {
        let base = 50_000 + self.below(2_000_000);
        if self.chance(2) {
            base * (5 + self.below(20))
        } else {
            base
        }
    }

    /// The spans of one trace.
    pub fn trace(&mut self) -> Vec<Span> {
        // A request type's shape comes from a generator state of its own.
        let mut saved = None;
        if let Some(n) = self.request_types {
            if !self.chance(3) {
                let kind = self.below(n).min(self.below(n));
                saved = Some(std::mem::replace(
                    &mut self.rng,
                    kind.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ 0x5EED,
                ));
            }
        }
        let target = 10 + self.below(51) as usize;
        let mut nodes = vec![self.node(FRONTEND, None, SpanKind::Server)];
        let mut frontier = 0;
        // Breadth-first fan-out until the trace reaches its size: each call is a client
        // span in the caller and a server span in the callee.
        while nodes.len() < target {
            if nodes.len() + 1 == target {
                let n = self.node(nodes[0].service, Some(0), SpanKind::Internal);
                self.attach(&mut nodes, n);
                break;
            }
            if frontier >= nodes.len() {
                frontier = 0; // the frontend always has callees, so this makes progress
            }
            let caller = frontier;
            frontier += 1;
            let calls = self.services[nodes[caller].service].calls;
            if calls.is_empty() || nodes[caller].kind != SpanKind::Server {
                continue;
            }
            for _ in 0..1 + self.below(3) {
                if nodes.len() + 2 > target {
                    break;
                }
                let callee = self.pick(calls);
                let service = nodes[caller].service;
                let client = self.node(service, Some(caller), SpanKind::Client);
                let c = self.attach(&mut nodes, client);
                let server = self.node(callee, Some(c), SpanKind::Server);
                self.attach(&mut nodes, server);
            }
        }
        if let Some(rng) = saved {
            self.rng = rng;
        }
        let start = self.next_start;
        self.next_start += self.spacing;
        self.place(&mut nodes, 0, start);
        self.spans(&nodes)
    }

    fn node(&mut self, service: usize, parent: Option<usize>, kind: SpanKind) -> Node {
        let ops = self.services[service].operations;
        let op = self.pick(ops);
        let parallel = self.chance(40);
        Node {
            service,
            op,
            kind,
            parent,
            children: Vec::new(),
            self_time: 0,
            parallel,
            start: 0,
            end: 0,
        }
    }

    fn attach(&mut self, nodes: &mut Vec<Node>, node: Node) -> usize {
        let i = nodes.len();
        if let Some(p) = node.parent {
            nodes[p].children.push(i);
        }
        nodes.push(node);
        i
    }

    /// Lays out times: children run one after another or all at once, inside the parent.
    fn place(&mut self, nodes: &mut [Node], i: usize, start: u64) -> u64 {
        nodes[i].self_time = self.latency()
            / if nodes[i].kind == SpanKind::Client {
                20
            } else {
                1
            };
        let gap = if nodes[i].kind == SpanKind::Client {
            80_000 + self.below(200_000)
        } else {
            5_000
        };
        let mut t = start + gap;
        let mut latest = t;
        let children = nodes[i].children.clone();
        for c in children {
            let end = self.place(nodes, c, t);
            latest = latest.max(end);
            t = if nodes[i].parallel {
                // A fan-out issues its calls one after another, microseconds apart, in the
                // order of the code: the same order in every request of one type.
                t + 1_000 + self.below(4_000)
            } else {
                end + self.below(20_000)
            };
        }
        let end = latest + nodes[i].self_time + gap;
        nodes[i].start = start;
        nodes[i].end = end;
        end
    }

    fn spans(&mut self, nodes: &[Node]) -> Vec<Span> {
        let trace_id = loop {
            let v = ((self.next() as u128) << 64) | self.next() as u128;
            if let Some(id) = TraceId::new(v) {
                break id;
            }
        };
        let ids: Vec<SpanId> = nodes
            .iter()
            .map(|_| loop {
                if let Some(id) = SpanId::new(self.next()) {
                    break id;
                }
            })
            .collect();
        let user = format!("user-{}", self.below(20_000));
        let region = self.pick(&REGIONS);
        let tier = self.pick(&TIERS);
        let request = format!("{:016x}", self.next());
        let mut out = Vec::with_capacity(nodes.len());
        // A span runs where its parent runs when they are of one service (a client span in
        // the server that makes the call); a call lands on a replica picked at random.
        let mut replica = vec![0usize; nodes.len()];
        for (i, n) in nodes.iter().enumerate() {
            let h = match n.parent {
                Some(p) if nodes[p].service == n.service => replica[p],
                _ => self.below(self.services[n.service].hosts.len() as u64) as usize,
            };
            replica[i] = h;
            let svc = &self.services[n.service];
            let host = svc.hosts[h].clone();
            let mut s = Span::new(
                trace_id,
                ids[i],
                n.parent.map(|p| ids[p]),
                n.op,
                "",
                n.start,
                n.end,
            );
            s.service = svc.name.clone();
            s.host = host.clone();
            s.pid = 1000 + n.service as u32 * 10 + (host.len() as u32 % 3);
            s.execution_unit = 1 + self.below(16);
            s.kind = n.kind;
            let error = self.chance(1);
            let status_code: i64 = if error {
                500
            } else if self.chance(2) {
                404
            } else {
                200
            };
            let mut attrs = vec![
                KeyValue::new("http.method", self.pick(&METHODS)),
                KeyValue::new("http.route", n.op),
                KeyValue::new("http.status_code", status_code),
                KeyValue::new("net.peer.name", host.to_string()),
                KeyValue::new("user.id", user.clone()),
                KeyValue::new("request.id", request.clone()),
                KeyValue::new("region", region),
                KeyValue::new("deployment.version", self.pick(&VERSIONS)),
            ];
            let extra = self.below(8);
            for k in 0..extra {
                attrs.push(match k {
                    0 => KeyValue::new("customer.tier", tier),
                    1 => KeyValue::new("db.statement", self.pick(&STATEMENTS)),
                    2 => KeyValue::new("cache.hit", self.chance(70)),
                    3 => KeyValue::new("payload.size", self.below(64 * 1024) as i64),
                    4 => KeyValue::new("retry.count", self.below(3) as i64),
                    5 => KeyValue::new(
                        "component",
                        if n.kind == SpanKind::Client {
                            "grpc"
                        } else {
                            "http"
                        },
                    ),
                    _ => KeyValue::new("thread.name", format!("worker-{}", self.below(16))),
                });
            }
            s.attributes = attrs;
            if self.chance(30) {
                let mid = n.start + (n.end - n.start) / 2;
                s.events.push(Event {
                    time: mid,
                    name: if self.chance(50) {
                        "cache miss"
                    } else {
                        "retry"
                    }
                    .into(),
                    attributes: vec![KeyValue::new(
                        "attempt",
                        Value::I64(1 + self.below(3) as i64),
                    )],
                });
            }
            if error {
                s.status = Status::Error("upstream returned 500".into());
                s.events.push(Event {
                    time: n.end,
                    name: "exception".into(),
                    attributes: vec![KeyValue::new("exception.type", "TimeoutError")],
                });
            }
            out.push(s);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_model::Trace;

    #[test]
    fn traces_have_realistic_shape() {
        let mut g = Generator::new(7, 1_700_000_000_000_000_000, 1_000_000);
        for _ in 0..200 {
            let spans = g.trace();
            assert!((10..=60).contains(&spans.len()), "{} spans", spans.len());
            for s in &spans {
                assert!((8..=15).contains(&s.attributes.len()));
                assert!(s.end >= s.start);
            }
            let trace = Trace::assemble(spans[0].trace_id, spans.clone());
            assert_eq!(trace.roots.len(), 1, "one root, no orphans");
            // Every child lies inside its parent.
            for (i, p) in trace.parent.iter().enumerate() {
                if let Some(p) = p {
                    let (c, p) = (&trace.spans[i], &trace.spans[*p]);
                    assert!(c.start >= p.start && c.end <= p.end, "{c:?} outside {p:?}");
                }
            }
        }
    }

    #[test]
    fn the_same_seed_makes_the_same_traces() {
        let a = Generator::new(3, 0, 1).trace();
        let b = Generator::new(3, 0, 1).trace();
        assert_eq!(a, b);
    }
}

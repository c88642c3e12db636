use causeway_expect::check::Checker;
use causeway_expect::path::Path;
use causeway_model::codec::native;
use causeway_model::Trace;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let bytes = std::fs::read(&a[1]).unwrap();
    let d = native::decode_stream(&bytes);
    let traces = Trace::assemble_all(d.spans);
    let text = if a[2] == "self" {
        let paths: Vec<Path> = traces.iter().map(Path::of).collect();
        let f = causeway_expect::generate::generate(
            &paths,
            causeway_expect::generate::Options {
                timings: false,
                any_host: true,
                notices: causeway_expect::generate::Notices::Any,
            },
        );
        f.to_string()
    } else {
        std::fs::read_to_string(&a[2]).unwrap()
    };
    if std::env::var_os("CW_PRINT").is_some() {
        println!("{text}");
    }
    let file = causeway_expect::lang::parse(&text).unwrap();
    let c = Checker::new(&file, Default::default()).unwrap();
    for t in &traces {
        let p = Path::of(t);
        for (i, th) in p.threads.iter().enumerate() {
            let ev: Vec<String> = th
                .events
                .iter()
                .map(|e| {
                    format!(
                        "{:?}{}{}",
                        e.kind,
                        if e.name.is_empty() {
                            String::new()
                        } else {
                            format!("({})", e.name)
                        },
                        e.peer.map_or(String::new(), |p| format!("->{p}"))
                    )
                })
                .collect();
            eprintln!(
                "T{i} {} {} lane: {}",
                th.key.service,
                th.host(),
                ev.join(" ")
            );
        }
        let (r, _) = c.check(&p);
        println!("{} expected={} {:?}", r.trace_id, r.expected, r.closest);
    }
}

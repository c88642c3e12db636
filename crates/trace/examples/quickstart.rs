//! Causeway's library end to end, on one machine: a `shop` service calls an `inventory`
//! service over HTTP on loopback; both are instrumented only through `tracing`, the
//! `causeway` layer and its middleware. Spans go to span-log segment files (and to an
//! OTLP collector if `OTEL_EXPORTER_OTLP_ENDPOINT` is set); at the end the example reads
//! the files back and prints each trace as a tree.
//!
//! `cargo run -p causeway --all-features --example quickstart -- [REQUESTS] [SPAN_LOG_DIR]`

use std::time::Duration;

use axum::extract::Path;
use axum::routing::get;
use axum::Router;
use causeway::middleware::reqwest::TracedRequest;
use causeway::middleware::tower::TraceLayer;
use causeway::model::Trace;
use causeway::sinks::segment;

async fn inventory(Path(sku): Path<String>) -> String {
    let _lookup = tracing::info_span!("stock lookup", sku = %sku).entered();
    let level = sku.bytes().map(u64::from).sum::<u64>() % 20;
    if level < 3 {
        tracing::warn!(level, "low stock");
    }
    level.to_string()
}

async fn shop(inventory_addr: std::net::SocketAddr, Path(basket): Path<String>) -> String {
    let client = reqwest::Client::new();
    let mut lines = Vec::new();
    for sku in basket.split(',') {
        let stock = client
            .get(format!("http://{inventory_addr}/stock/{sku}"))
            .send_traced()
            .await;
        let stock = match stock {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(e) => format!("error: {e}"),
        };
        lines.push(format!("{sku}: {stock}"));
    }
    tracing::info!(items = lines.len(), "priced basket");
    lines.join("\n")
}

fn print_tree(t: &Trace) {
    let (start, end) = t.bounds();
    println!(
        "trace {} ({:.2} ms)",
        t.trace_id,
        (end - start) as f64 / 1e6
    );
    for (i, depth) in t.depth_first() {
        let s = &t.spans[i];
        println!(
            "  {:indent$}{} [{} {}] +{:.3} ms {:.3} ms{}",
            "",
            s.name,
            s.service,
            s.kind.as_str(),
            (s.start - start) as f64 / 1e6,
            s.duration() as f64 / 1e6,
            if s.is_error() { " ERROR" } else { "" },
            indent = depth * 2
        );
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let requests: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(3);
    let dir = std::path::PathBuf::from(args.next().unwrap_or_else(|| "causeway-spans".into()));
    let config = causeway::Config::from_env()?.with_span_log_dir(&dir);
    let service = config.service.clone();
    let pid = config.pid;
    let guard = causeway::init(config)?;

    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let inv = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let inv_addr = inv.local_addr()?;
        let inv_app = Router::new()
            .route("/stock/{sku}", get(inventory))
            .layer(TraceLayer::new());
        tokio::spawn(async move { axum::serve(inv, inv_app).await });
        let shop_l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let shop_addr = shop_l.local_addr()?;
        let shop_app = Router::new()
            .route("/basket/{items}", get(move |p| shop(inv_addr, p)))
            .layer(TraceLayer::new());
        tokio::spawn(async move { axum::serve(shop_l, shop_app).await });
        let client = reqwest::Client::new();
        for i in 0..requests {
            let url = format!("http://{shop_addr}/basket/apple,pear{i},fig");
            let body = tokio::time::timeout(Duration::from_secs(10), async {
                client.get(&url).send().await?.text().await
            })
            .await??;
            println!("GET {url} -> {}", body.replace('\n', "; "));
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    drop(rt);
    let stats = guard.stats();
    drop(guard);

    let proc_dir = segment::read_dir(&dir.join(format!("{service}-{pid}")))?;
    println!(
        "\n{} spans recorded, {} dropped; read back {} from {}",
        stats.recorded,
        stats.dropped,
        proc_dir.spans.len(),
        dir.display()
    );
    for t in Trace::assemble_all(proc_dir.spans) {
        print_tree(&t);
    }
    Ok(())
}

//! The black-box pipeline on common servers nobody instrumented: nginx (a master and two
//! workers, keep-alive to its upstream) in front of Python's threaded http.server, driven
//! by curl, all under `causeway capture`; `causeway infer` finds each request's whole path,
//! curl → nginx → python → nginx → curl; sent to the server, each request and its reply is
//! one call in the dependency graph. CI installs nginx (.ci/run).

mod common;

use std::process::Command;

use common::{temp, BIN};

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn each_request_through_nginx_to_python_is_one_inferred_path() {
    for program in ["nginx", "python3", "curl"] {
        assert!(have(program), "{program} is needed (.ci/run installs it)");
    }
    let work = temp("nginx-python");
    std::fs::create_dir_all(&work).expect("dir");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let (front, back) = (
        listener.local_addr().expect("addr").port(),
        std::net::TcpListener::bind("127.0.0.1:0")
            .expect("a port")
            .local_addr()
            .expect("addr")
            .port(),
    );
    drop(listener);
    let conf = work.join("nginx.conf");
    let w = work.display();
    std::fs::write(
        &conf,
        format!(
            "worker_processes 2; daemon off; pid {w}/nginx.pid; error_log {w}/error.log;\n\
             events {{ worker_connections 64; }}\n\
             http {{ access_log off; client_body_temp_path {w}/body; proxy_temp_path {w}/proxy;\n\
               fastcgi_temp_path {w}/fcgi; uwsgi_temp_path {w}/uwsgi; scgi_temp_path {w}/scgi;\n\
               upstream app {{ server 127.0.0.1:{back}; keepalive 4; }}\n\
               server {{ listen 127.0.0.1:{front};\n\
                 location / {{ proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection \"\"; }} }} }}\n"
        ),
    )
    .expect("nginx.conf");
    let script = format!(
        "cd {w} && python3 -m http.server {back} --bind 127.0.0.1 >/dev/null 2>&1 & P=$!; \
         nginx -c {conf} -p {w} 2>/dev/null & N=$!; \
         for i in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:{front}/ && break; sleep 0.1; done; \
         for i in 1 2 3 4 5 6 7 8; do curl -s -o /dev/null http://127.0.0.1:{front}/; done; \
         kill $N $P; wait",
        conf = conf.display()
    );
    let caps = work.join("caps");
    let out = Command::new(BIN)
        .args(["capture", "--out"])
        .arg(&caps)
        .args(["--", "sh", "-c", &script])
        .output()
        .expect("causeway capture");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(BIN)
        .arg("infer")
        .arg(&caps)
        .args(["--json", "--top", "200"])
        .output()
        .expect("causeway infer");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    // Every request curl made once both servers were up, each with its whole path (the
    // tries before, answered by nginx alone or not at all, are paths of their own).
    // curl never listens: it is CLIENT, and the paths of all its runs aggregate.
    let whole: u64 = summary["patterns"]
        .as_array()
        .expect("patterns")
        .iter()
        .filter(|p| {
            p["shape"].as_str().is_some_and(|s| {
                s.starts_with("CLIENT>nginx[")
                    && s.contains(">python3")
                    && s.matches(">CLIENT").count() == 1
            })
        })
        .filter_map(|p| p["count"].as_u64())
        .sum();
    assert!(whole >= 8, "{whole} whole paths: {:#}", summary["patterns"]);

    // In the store, a request and its reply are one RPC: nginx calls python once per
    // request that reached it, and python calls nobody.
    let reached: u64 = summary["patterns"]
        .as_array()
        .expect("patterns")
        .iter()
        .filter_map(|p| {
            // Only nginx calls python; python's replies are `python3...>nginx...`.
            let hops = p["shape"].as_str()?.matches(">python3").count() as u64;
            Some(hops * p["count"].as_u64()?)
        })
        .sum();
    let data = temp("nginx-python-data");
    let serve = common::Serve::start(&data, &[]);
    let out = Command::new(BIN)
        .arg("infer")
        .arg(&caps)
        .args(["--collector", &serve.ingest])
        .output()
        .expect("causeway infer --collector");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!serve.search_service("nginx").is_empty());
    let deps: serde_json::Value = ureq::get(&format!("{}/api/dependencies", serve.api))
        .call()
        .expect("dependencies")
        .body_mut()
        .read_json()
        .expect("JSON");
    // Services are programs (`nginx`, `python3.11`).
    let calls = |caller: &str, callee: &str| {
        let named =
            |v: &serde_json::Value, prefix: &str| v.as_str().is_some_and(|n| n.starts_with(prefix));
        deps["edges"]
            .as_array()
            .expect("edges")
            .iter()
            .filter(|e| named(&e["caller"], caller) && named(&e["callee"], callee))
            .map(|e| e["calls"].as_u64().expect("calls"))
            .sum::<u64>()
    };
    assert_eq!(calls("nginx", "python3"), reached, "{deps:#}");
    assert!(reached >= 8, "{reached}: {:#}", summary["patterns"]);
    assert_eq!(calls("python3", "nginx"), 0, "a reply is no call: {deps:#}");
    // Python's server is named by its module, apart from any other Python program.
    let python = deps["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["service"].as_str())
        .find(|s| s.starts_with("python3"))
        .expect("python's node");
    assert!(python.ends_with(":http.server"), "{python}");
    let _ = std::fs::remove_dir_all(work);
}

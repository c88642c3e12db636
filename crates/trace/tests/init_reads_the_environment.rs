//! `causeway::init(Config::from_env())` as an application would call it: the service
//! name comes from OTEL_SERVICE_NAME, spans land in segment files under
//! CAUSEWAY_SPAN_LOG_DIR, one directory per process.

use causeway::sinks::segment;

#[test]
fn init_from_the_environment_writes_segment_files() {
    let dir = std::env::temp_dir().join(format!("causeway-init-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // This test binary holds one test, so setting the environment races with nothing.
    std::env::set_var("OTEL_SERVICE_NAME", "inventory");
    std::env::set_var("CAUSEWAY_SPAN_LOG_DIR", &dir);
    let config = causeway::Config::from_env().unwrap();
    assert_eq!(config.service, "inventory");
    let guard = causeway::init(config).unwrap();
    assert!(matches!(
        causeway::init(causeway::Config::new("again")),
        Err(causeway::InitError::AlreadyInstalled(_))
    ));
    {
        let _root = tracing::info_span!("restock", sku = "A-1").entered();
        let _child = tracing::info_span!("write").entered();
    }
    drop(guard);
    let proc_dir = dir.join(format!("inventory-{}", std::process::id()));
    let read = segment::read_dir(&proc_dir).unwrap();
    assert_eq!(read.spans.len(), 2);
    assert!(read.spans.iter().all(|s| &*s.service == "inventory"));
    let _ = std::fs::remove_dir_all(&dir);
}

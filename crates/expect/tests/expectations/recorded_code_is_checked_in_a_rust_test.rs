//! The Rust test API: code runs under the in-memory recorder, then its traces are checked.

use causeway::testing::Recorder;
use causeway_expect::testing::Expectations;

/// Code under test: a checkout that prices each item, then maybe applies a coupon.
fn checkout(items: usize, coupon: bool) {
    let _root = tracing::info_span!("checkout").entered();
    for _ in 0..items {
        let _s = tracing::info_span!("price item").entered();
    }
    if coupon {
        tracing::info!("coupon applied");
    }
}

const EXPECTED: &str = r#"
validator Checkout {
  thread T(*, 1) {
    task("checkout") {
      repeat between 1 and $MAX_ITEMS task("price item");
      maybe notice("coupon applied");
    }
  }
}
"#;

#[test]
fn recorded_paths_pass_and_a_wrong_one_fails_with_where() {
    let recorder = Recorder::new();
    recorder.in_scope(|| {
        checkout(2, false);
        checkout(3, true);
    });
    let traces = recorder.traces();
    assert_eq!(traces.len(), 2);
    Expectations::new(EXPECTED)
        .param("MAX_ITEMS", 3.0)
        .assert_expected(&traces);

    // Four items is more than the parameter allows.
    recorder.clear();
    recorder.in_scope(|| checkout(4, false));
    let outcome = Expectations::new(EXPECTED)
        .param("MAX_ITEMS", 3.0)
        .check(&recorder.traces())
        .unwrap();
    assert!(!outcome.passed());
    let report = outcome.report();
    assert!(report.contains("closest validator Checkout"), "{report}");
    assert!(report.contains("task(\"price item\")"), "{report}");
    let traces = recorder.traces();
    let failure = std::panic::catch_unwind(|| {
        Expectations::new(EXPECTED)
            .param("MAX_ITEMS", 3.0)
            .assert_expected(&traces)
    });
    assert!(failure.is_err());
}

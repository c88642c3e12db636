//! Checking recorded traces against expectations inside a Rust test: run the code under
//! test under `causeway::testing::Recorder`, then check its traces.
//!
//! ```
//! use causeway_expect::testing::Expectations;
//! use causeway_model::{Span, SpanId, Trace, TraceId};
//!
//! let id = TraceId::new(7).unwrap();
//! let span = Span::new(id, SpanId::new(1).unwrap(), None, "checkout", "shop", 0, 5_000_000);
//! let traces = vec![Trace::assemble(id, vec![span])];
//! Expectations::new(r#"validator Checkout { thread T(*, 1) { task("checkout") limit(REAL_TIME, 10ms); } }"#)
//!     .assert_expected(&traces);
//! ```

use causeway_model::Trace;

use crate::check::{Checker, PathFacts, PathReport};
use crate::lang::parse;
use crate::path::Path;
use crate::program::Params;

/// An expectations text with its parameters.
pub struct Expectations {
    text: String,
    params: Params,
}

/// The result of checking a set of traces.
#[derive(Debug)]
pub struct Outcome {
    /// Every path's report.
    pub paths: Vec<PathReport>,
    /// The assertions that failed, as text.
    pub failed_assertions: Vec<String>,
}

impl Outcome {
    /// True when every path is expected and every assertion holds.
    pub fn passed(&self) -> bool {
        self.failed_assertions.is_empty() && self.paths.iter().all(|p| p.expected)
    }

    /// A report of what went wrong, for a test failure.
    pub fn report(&self) -> String {
        let mut out = String::new();
        for p in self.paths.iter().filter(|p| !p.expected) {
            out.push_str(&format!("unexpected path {}", p.trace_id));
            if !p.invalidated_by.is_empty() {
                out.push_str(&format!(
                    ": matches invalidator {}",
                    p.invalidated_by.join(", ")
                ));
            }
            if let Some(m) = &p.closest {
                out.push_str(&format!(
                    ": closest validator {} stopped{} at {}; expected {}",
                    m.recognizer,
                    m.thread
                        .as_ref()
                        .map(|t| format!(" in thread {t}"))
                        .unwrap_or_default(),
                    m.found,
                    m.expected
                ));
            }
            out.push('\n');
        }
        for a in &self.failed_assertions {
            out.push_str(&format!("failed assertion: {a}\n"));
        }
        out
    }
}

impl Expectations {
    /// Expectations in Pip's language.
    pub fn new(text: &str) -> Expectations {
        Expectations {
            text: text.to_string(),
            params: Params::new(),
        }
    }

    /// Sets a `$NAME` parameter.
    pub fn param(mut self, name: &str, value: f64) -> Expectations {
        self.params.insert(name.to_string(), value);
        self
    }

    /// Checks the traces; `Err` when the text does not parse or compile.
    pub fn check(&self, traces: &[Trace]) -> Result<Outcome, String> {
        let file = parse(&self.text).map_err(|e| e.render("expectations", &self.text))?;
        let checker = Checker::new(&file, self.params.clone()).map_err(|e| e.to_string())?;
        let (paths, facts): (Vec<PathReport>, Vec<PathFacts>) =
            traces.iter().map(|t| checker.check(&Path::of(t))).unzip();
        let failed_assertions = checker
            .assertions(&facts)
            .into_iter()
            .map(|f| format!("line {}: {}: {}", f.line, f.text, f.why))
            .collect();
        Ok(Outcome {
            paths,
            failed_assertions,
        })
    }

    /// Panics with the report unless every trace's path is expected and every assertion
    /// holds.
    #[track_caller]
    pub fn assert_expected(&self, traces: &[Trace]) {
        match self.check(traces) {
            Err(e) => panic!("the expectations do not compile:\n{e}"),
            Ok(o) if !o.passed() => panic!("paths are not as expected:\n{}", o.report()),
            Ok(_) => {}
        }
    }
}

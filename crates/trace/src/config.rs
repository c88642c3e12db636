//! Configuration, from code or from the environment.

use std::path::PathBuf;
use std::time::Duration;

use tracing_subscriber::filter::Targets;

use crate::sampling::Sampler;

/// Why a configuration could not be read or a pipeline not started.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// An environment variable had a value that cannot be used.
    #[error("invalid {var}={value:?}: {reason}")]
    Env {
        /// The variable.
        var: String,
        /// Its value.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// The span-log directory could not be created or opened.
    #[error("cannot use span-log directory {path}: {source}")]
    SpanLog {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A global subscriber was already installed.
    #[error("a global tracing subscriber is already installed: {0}")]
    AlreadyInstalled(String),
    /// The background writer thread could not be started.
    #[error("cannot start the span writer thread: {0}")]
    Thread(std::io::Error),
}

/// Which `tracing` subscriber records the spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Causeway's own subscriber, with no `tracing_subscriber::Registry`: the cheapest
    /// spans, but no other layer can sit on it.
    #[default]
    Exclusive,
    /// A Layer on `tracing_subscriber`'s Registry, which other layers (`fmt`, filters)
    /// can share; each span costs the Registry's bookkeeping too.
    Layer,
}

impl Mode {
    /// Reads `exclusive` or `layer`.
    pub fn parse(s: &str) -> Result<Mode, String> {
        match s.trim() {
            "exclusive" => Ok(Mode::Exclusive),
            "layer" => Ok(Mode::Layer),
            _ => Err("expected exclusive or layer".into()),
        }
    }
}

/// How the library records and where it sends spans. Made by [`Config::new`] (defaults)
/// or [`Config::from_env`] (the environment), then changed field by field or with the
/// `with_` methods; new fields will not break code written so.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Which subscriber records spans ([`crate::init`], [`crate::testing::Recorder`]).
    pub mode: Mode,
    /// Which targets and levels are recorded (`RUST_LOG`-style directives, such as
    /// `my_app=trace,hyper=off`); everything when `None`. Callsites left out cost
    /// nothing: `tracing` never calls the subscriber for them.
    pub targets: Option<Targets>,
    /// The service name on every span.
    pub service: String,
    /// The host name on every span.
    pub host: String,
    /// The process id on every span.
    pub pid: u32,
    /// How root spans are sampled.
    pub sampler: Sampler,
    /// Write span-log segment files under this directory (in `<service>-<pid>/`).
    pub span_log_dir: Option<PathBuf>,
    /// Start a new segment file past this many bytes.
    pub segment_bytes: u64,
    /// Export to this OTLP/HTTP traces URL (ending in `/v1/traces`).
    pub otlp_endpoint: Option<String>,
    /// Attributes plus events kept per span (65 535 at most); the rest are counted as
    /// dropped.
    pub max_annotations: usize,
    /// Record each span's thread CPU time (Pip's CPU_TIME); off by default.
    pub cpu_time: bool,
    /// Spans that may wait for the writer before new ones are dropped (and counted). Each
    /// recording thread has its own lane of `4 × queue_spans` entries of 56 bytes, at
    /// most 32 768 (1.75 MiB; a span of a few attributes takes 3 to 4).
    pub queue_spans: usize,
    /// How often buffered spans are handed to the sinks at the latest.
    pub flush_interval: Duration,
    /// The longest a flush or shutdown waits before giving up.
    pub shutdown_timeout: Duration,
    /// The process name Pivot Tracing queries see as `procName` (default: the service;
    /// the `pivot` feature).
    pub process_name: String,
    /// The query API of the `causeway serve` whose Pivot Tracing queries this process
    /// runs (`http://127.0.0.1:7070`); none: queries are installed only through
    /// `Guard::pivot`. Without the `pivot` feature, ignored.
    pub pivot_hub: Option<String>,
    /// How often partial results go to the hub (the hub may ask for another interval).
    pub pivot_interval: Duration,
    /// The bearer token the hub requires, if any.
    pub hub_token: Option<String>,
    /// Sinks of the application's own, beside those above ([`Config::with_sink`]).
    pub(crate) sinks: Vec<crate::pipeline::SharedSink>,
}

/// The kernel's host name (`gethostname`), else `localhost`.
fn default_host() -> String {
    let mut name = [0u8; 256];
    // SAFETY: `gethostname` writes at most `name.len()` bytes into the buffer it is given,
    // which lives for the call.
    let ok = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) } == 0;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    match std::str::from_utf8(&name[..end]) {
        Ok(host) if ok && !host.is_empty() => host.to_owned(),
        _ => "localhost".to_owned(),
    }
}

impl Config {
    /// Defaults for a service: always sample, no sinks, 128 annotations per span, the
    /// exclusive subscriber. Reads no environment variable ([`Config::from_env`] does).
    pub fn new(service: impl Into<String>) -> Config {
        Config {
            mode: Mode::default(),
            targets: None,
            service: service.into(),
            host: default_host(),
            pid: std::process::id(),
            sampler: Sampler::Always,
            span_log_dir: None,
            segment_bytes: 64 << 20,
            otlp_endpoint: None,
            max_annotations: 128,
            cpu_time: false,
            queue_spans: 1 << 16,
            flush_interval: Duration::from_millis(100),
            shutdown_timeout: Duration::from_secs(5),
            process_name: String::new(),
            pivot_hub: None,
            pivot_interval: Duration::from_secs(1),
            hub_token: None,
            sinks: Vec::new(),
        }
    }

    /// The `procName` Pivot Tracing reports: [`Config::process_name`], else the service.
    #[cfg(feature = "pivot")]
    pub(crate) fn proc_name(&self) -> &str {
        if self.process_name.is_empty() {
            &self.service
        } else {
            &self.process_name
        }
    }

    /// Reads the process environment; see [`Config::from_vars`].
    pub fn from_env() -> Result<Config, InitError> {
        Config::from_vars(|k| std::env::var(k).ok())
    }

    /// Reads configuration from variables, `CAUSEWAY_*` first, then OpenTelemetry's:
    ///
    /// | variable | meaning |
    /// |---|---|
    /// | `CAUSEWAY_SERVICE`, else `OTEL_SERVICE_NAME` | service name (default: the executable's name) |
    /// | `CAUSEWAY_SAMPLER`, else `OTEL_TRACES_SAMPLER` (+`_ARG`) | `always`, `never`, `probability:P`, `adaptive:N` |
    /// | `CAUSEWAY_SPAN_LOG_DIR` | write segment files here |
    /// | `CAUSEWAY_SEGMENT_BYTES` | rotation size |
    /// | `CAUSEWAY_OTLP_ENDPOINT`, else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces` | OTLP/HTTP export |
    /// | `CAUSEWAY_MAX_ANNOTATIONS` | attributes + events per span |
    /// | `CAUSEWAY_CPU_TIME` | `true` to record thread CPU time |
    /// | `CAUSEWAY_QUEUE_SPANS` | writer queue bound |
    /// | `CAUSEWAY_HOST` | host name |
    /// | `CAUSEWAY_MODE` | `exclusive` (default) or `layer` |
    /// | `CAUSEWAY_TARGETS` | targets and levels to record: `my_app=trace,hyper=off` |
    /// | `CAUSEWAY_PROCESS_NAME` | the `procName` Pivot Tracing queries see |
    /// | `CAUSEWAY_PIVOT_HUB` | the `causeway serve` query API to take Pivot Tracing queries from |
    /// | `CAUSEWAY_TOKEN` | the bearer token `causeway serve` requires |
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Config, InitError> {
        let non_empty = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let service = non_empty("CAUSEWAY_SERVICE")
            .or_else(|| non_empty("OTEL_SERVICE_NAME"))
            .unwrap_or_else(|| {
                std::env::current_exe()
                    .ok()
                    .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                    .unwrap_or_else(|| "unknown_service".into())
            });
        let mut c = Config::new(service);
        let err = |var: &str, value: &str, reason: String| InitError::Env {
            var: var.into(),
            value: value.into(),
            reason,
        };
        if let Some(v) = non_empty("CAUSEWAY_SAMPLER") {
            c.sampler = Sampler::parse(&v).map_err(|e| err("CAUSEWAY_SAMPLER", &v, e))?;
        } else if let Some(v) = non_empty("OTEL_TRACES_SAMPLER") {
            let arg = non_empty("OTEL_TRACES_SAMPLER_ARG").unwrap_or_else(|| "1.0".into());
            c.sampler = match v.as_str() {
                "always_on" | "parentbased_always_on" => Sampler::Always,
                "always_off" | "parentbased_always_off" => Sampler::Never,
                "traceidratio" | "parentbased_traceidratio" => Sampler::parse(&arg)
                    .map_err(|e| err("OTEL_TRACES_SAMPLER_ARG", &arg, e))?,
                _ => {
                    return Err(err(
                        "OTEL_TRACES_SAMPLER",
                        &v,
                        "expected always_on, always_off or traceidratio (with their parentbased_ forms)".into(),
                    ))
                }
            };
        }
        c.span_log_dir = non_empty("CAUSEWAY_SPAN_LOG_DIR").map(PathBuf::from);
        let number = |var: &str| -> Result<Option<u64>, InitError> {
            match non_empty(var) {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse::<u64>()
                    .map(Some)
                    .map_err(|e| err(var, &v, format!("expected a whole number: {e}"))),
            }
        };
        if let Some(n) = number("CAUSEWAY_SEGMENT_BYTES")? {
            c.segment_bytes = n.max(4096);
        }
        if let Some(n) = number("CAUSEWAY_MAX_ANNOTATIONS")? {
            c.max_annotations = n as usize;
        }
        if let Some(n) = number("CAUSEWAY_QUEUE_SPANS")? {
            c.queue_spans = (n as usize).max(1);
        }
        c.otlp_endpoint = non_empty("CAUSEWAY_OTLP_ENDPOINT")
            .or_else(|| non_empty("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
            .or_else(|| {
                non_empty("OTEL_EXPORTER_OTLP_ENDPOINT")
                    .map(|base| format!("{}/v1/traces", base.trim_end_matches('/')))
            });
        if let Some(v) = non_empty("CAUSEWAY_CPU_TIME") {
            c.cpu_time = match v.as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" => false,
                _ => {
                    return Err(err(
                        "CAUSEWAY_CPU_TIME",
                        &v,
                        "expected true or false".into(),
                    ))
                }
            };
        }
        if let Some(h) = non_empty("CAUSEWAY_HOST") {
            c.host = h;
        }
        if let Some(v) = non_empty("CAUSEWAY_TARGETS") {
            c.targets = Some(
                v.parse::<Targets>()
                    .map_err(|e| err("CAUSEWAY_TARGETS", &v, e.to_string()))?,
            );
        }
        if let Some(v) = non_empty("CAUSEWAY_MODE") {
            c.mode = Mode::parse(&v).map_err(|e| err("CAUSEWAY_MODE", &v, e))?;
        }
        if let Some(v) = non_empty("CAUSEWAY_PROCESS_NAME") {
            c.process_name = v;
        }
        c.pivot_hub = non_empty("CAUSEWAY_PIVOT_HUB");
        c.hub_token = non_empty("CAUSEWAY_TOKEN");
        Ok(c)
    }

    /// Sets the subscriber mode.
    pub fn with_mode(mut self, mode: Mode) -> Config {
        self.mode = mode;
        self
    }

    /// Records only the targets and levels `targets` enables.
    pub fn with_targets(mut self, targets: Targets) -> Config {
        self.targets = Some(targets);
        self
    }

    /// Sets the sampler.
    pub fn with_sampler(mut self, sampler: Sampler) -> Config {
        self.sampler = sampler;
        self
    }

    /// Writes segment files under `dir`.
    pub fn with_span_log_dir(mut self, dir: impl Into<PathBuf>) -> Config {
        self.span_log_dir = Some(dir.into());
        self
    }

    /// Exports to an OTLP/HTTP endpoint. A base URL (`http://host:4318`) gets
    /// `/v1/traces` appended; a URL that already ends in it is used as is.
    pub fn with_otlp_endpoint(mut self, url: impl Into<String>) -> Config {
        let url = url.into();
        self.otlp_endpoint = Some(if url.ends_with("/v1/traces") {
            url
        } else {
            format!("{}/v1/traces", url.trim_end_matches('/'))
        });
        self
    }

    /// Caps attributes plus events per span.
    pub fn with_max_annotations(mut self, n: usize) -> Config {
        self.max_annotations = n;
        self
    }

    /// Records thread CPU time per span.
    pub fn with_cpu_time(mut self, on: bool) -> Config {
        self.cpu_time = on;
        self
    }

    /// Names the process for Pivot Tracing's `procName`.
    pub fn with_process_name(mut self, name: impl Into<String>) -> Config {
        self.process_name = name.into();
        self
    }

    /// Takes Pivot Tracing queries from the `causeway serve` at `url` (its query API).
    pub fn with_pivot_hub(mut self, url: impl Into<String>) -> Config {
        self.pivot_hub = Some(url.into());
        self
    }

    /// Bounds the writer queue.
    pub fn with_queue_spans(mut self, n: usize) -> Config {
        self.queue_spans = n.max(1);
        self
    }

    /// Also writes finished spans to `sink` (a clone of this configuration shares it).
    pub fn with_sink(mut self, sink: impl crate::SpanSink + 'static) -> Config {
        self.sinks
            .push(crate::pipeline::SharedSink::new(Box::new(sink)));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn honours_opentelemetry_variables() {
        let c = Config::from_vars(vars(&[
            ("OTEL_SERVICE_NAME", "checkout"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ]))
        .unwrap();
        assert_eq!(c.service, "checkout");
        assert_eq!(
            c.otlp_endpoint.as_deref(),
            Some("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(c.sampler, Sampler::Probability(0.25));
    }

    #[test]
    fn causeway_variables_win_over_opentelemetry_ones() {
        let c = Config::from_vars(vars(&[
            ("OTEL_SERVICE_NAME", "a"),
            ("CAUSEWAY_SERVICE", "b"),
            ("CAUSEWAY_SAMPLER", "adaptive:50"),
            ("OTEL_TRACES_SAMPLER", "always_off"),
            ("CAUSEWAY_SPAN_LOG_DIR", "/tmp/spans"),
            ("CAUSEWAY_CPU_TIME", "true"),
            ("CAUSEWAY_MAX_ANNOTATIONS", "7"),
        ]))
        .unwrap();
        assert_eq!(c.service, "b");
        assert_eq!(c.sampler, Sampler::Adaptive { per_second: 50.0 });
        assert_eq!(c.span_log_dir, Some(PathBuf::from("/tmp/spans")));
        assert!(c.cpu_time);
        assert_eq!(c.max_annotations, 7);
    }

    #[test]
    fn bad_values_name_the_variable() {
        let e = Config::from_vars(vars(&[("CAUSEWAY_QUEUE_SPANS", "lots")])).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid CAUSEWAY_QUEUE_SPANS=\"lots\""),
            "{e}"
        );
        let e = Config::from_vars(vars(&[("CAUSEWAY_SAMPLER", "2")])).unwrap_err();
        assert!(e.to_string().contains("CAUSEWAY_SAMPLER"), "{e}");
        let e = Config::from_vars(vars(&[("CAUSEWAY_MODE", "registry")])).unwrap_err();
        assert!(e.to_string().contains("CAUSEWAY_MODE"), "{e}");
        let c = Config::from_vars(vars(&[("CAUSEWAY_MODE", "layer")])).unwrap();
        assert_eq!(c.mode, Mode::Layer);
        let e = Config::from_vars(vars(&[("CAUSEWAY_TARGETS", "app=loud")])).unwrap_err();
        assert!(e.to_string().contains("CAUSEWAY_TARGETS"), "{e}");
        let c = Config::from_vars(vars(&[("CAUSEWAY_TARGETS", "app=debug,hyper=off")])).unwrap();
        let t = c.targets.unwrap();
        assert!(t.would_enable("app::db", &tracing::Level::DEBUG));
        assert!(!t.would_enable("app::db", &tracing::Level::TRACE));
        assert!(!t.would_enable("hyper::proto", &tracing::Level::ERROR));
    }

    #[test]
    fn endpoint_from_code_gets_the_traces_path_once() {
        let c = Config::new("x").with_otlp_endpoint("http://h:4318");
        assert_eq!(c.otlp_endpoint.as_deref(), Some("http://h:4318/v1/traces"));
        let c = Config::new("x").with_otlp_endpoint("http://h:4318/v1/traces");
        assert_eq!(c.otlp_endpoint.as_deref(), Some("http://h:4318/v1/traces"));
    }
}

//! Ordinary logs, as real services write them: `tracing`'s fmt output, one file per
//! process, beside the traces. Each line ends with the place of the macro call that
//! wrote it and the ids of the span and trace it was written in (OpenTelemetry's
//! `code.filepath`, `code.lineno` and log correlation), which `causeway-bench
//! logs-demo` strips before stitching and keeps as the ground truth (of requests, and
//! of log points for `causeway-bench templates`). `causeway demo --logs DIR` turns them on.
//! The services [`PLAIN_LOGS_VAR`] names write plain lines, with neither.

use std::fs::File;
use std::path::Path;
use std::sync::Mutex;

use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{Format, Full, Writer};
use tracing_subscriber::fmt::time::SystemTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Layer as _, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::BoxError;

/// The environment variable naming the directory each demo process writes its log to.
pub const LOGS_VAR: &str = "CAUSEWAY_DEMO_LOGS";

/// The environment variable naming the services (comma-separated) whose lines print no
/// id and no place: plain logs, as a service never touched for tracing writes them,
/// which only stitching (`causeway logs --join`) can put in their traces.
pub const PLAIN_LOGS_VAR: &str = "CAUSEWAY_DEMO_PLAIN_LOGS";

/// The key of the trace id each line ends with.
pub const TRACE_ID_KEY: &str = "trace_id=";
/// The key of the span id before it: the span the line was written in.
pub const SPAN_ID_KEY: &str = "span_id=";
/// The keys of the place of the macro call that wrote a line, before its trace id.
pub const FILEPATH_KEY: &str = "code.filepath=";
/// The key of the line number of the macro call that wrote a line.
pub const LINENO_KEY: &str = "code.lineno=";

/// Installs Causeway with a fmt log beside it, written to `dir/<file_name>.log`.
pub(crate) fn init_with_log(
    config: causeway::Config,
    dir: &Path,
    file_name: &str,
) -> Result<causeway::Guard, BoxError> {
    std::fs::create_dir_all(dir)?;
    let file = File::create(dir.join(format!("{file_name}.log")))?;
    let plain = std::env::var(PLAIN_LOGS_VAR)
        .is_ok_and(|services| services.split(',').any(|s| s == file_name));
    let (subscriber, guard) = causeway::subscriber(config)?;
    let log = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_thread_names(true)
        .with_writer(Mutex::new(file))
        .event_format(WithTraceId {
            format: Format::default().with_thread_names(true),
            ids: !plain,
        });
    // What a service logs by default: its own lines at info and above.
    let filter = tracing_subscriber::filter::Targets::new()
        .with_target("causeway_demo", tracing::Level::INFO)
        .with_target(crate::LOG, tracing::Level::INFO);
    let logs = tracing_subscriber::registry().with(log.with_filter(filter));
    tracing::subscriber::set_global_default(subscriber.with_inner(logs))?;
    Ok(guard)
}

/// The fmt layer's full format, with the event's place and the current trace id at the
/// end of the line unless `ids` is false.
struct WithTraceId {
    format: Format<Full, SystemTime>,
    ids: bool,
}

impl<S, N> FormatEvent<S, N> for WithTraceId
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        if !self.ids {
            return self.format.format_event(ctx, writer, event);
        }
        let mut line = String::new();
        self.format
            .format_event(ctx, Writer::new(&mut line), event)?;
        let line = line.trim_end_matches('\n');
        let meta = event.metadata();
        let file = meta.file().unwrap_or("unknown");
        let line_no = meta.line().unwrap_or(0);
        write!(writer, "{line} {FILEPATH_KEY}{file} {LINENO_KEY}{line_no}")?;
        // The global dispatcher is not re-entered here (no scoped dispatchers), so the
        // current span is the one this event was written in.
        match causeway::current_context() {
            Some(context) => writeln!(
                writer,
                " {SPAN_ID_KEY}{} {TRACE_ID_KEY}{}",
                context.span_id, context.trace_id
            ),
            None => writeln!(writer),
        }
    }
}

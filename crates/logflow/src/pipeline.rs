//! The front door of stitching: windows of logs in, requests out. `causeway logs` and the
//! benchmarks call [`stitch_logs`]; each window is read into a corpus, its request
//! identifiers ranked, its links learned, its lines stitched into requests, numbered
//! across windows and gathered into flows, as the modules beside this one do.

use crate::corpus::{Corpus, ReadCounts};
use crate::drain;
use crate::flows::{Flows, Request};
use crate::format::Format;
use crate::ids::{rank, Variable};
use crate::learned::Learned;
use crate::links::{learn, LinkOptions};
use crate::sequences::{Sequence, SequenceTable};
use crate::source::SourceIndex;
use crate::stitch::{identifiers, stitch_after, StitchOptions};
use crate::window::{Numbering, Window, WindowOptions};

/// How far back a window re-reads the one before: longer than the links' longest window
/// (3 s) and than most requests last, so that the window after the cut knows the
/// requests a line may continue.
pub const OVERLAP_NS: i64 = 10_000_000_000;

/// How logs are stitched. The defaults are the ones BENCHMARKS.md measured.
pub struct Options {
    /// Which identifiers and links join lines (`quiet_ns` defaults to 50 ms here).
    pub stitch: StitchOptions,
    /// How large a window is, and how much of the one before it reads again.
    pub window: WindowOptions,
    /// The lines' prefix, where the detection does not know it.
    pub format: Option<Format>,
    /// Log points read from sources, which lines they printed are given.
    pub sources: Option<SourceIndex>,
    /// Keep each line's text and time in the flows, for [`crate::traces`].
    pub keep_lines: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            stitch: StitchOptions {
                quiet_ns: 50_000_000,
                ..StitchOptions::default()
            },
            window: WindowOptions {
                max_bytes: 64 << 20,
                overlap_ns: OVERLAP_NS,
            },
            format: None,
            sources: None,
            keep_lines: false,
        }
    }
}

/// What stitching tells its caller as it goes.
pub trait Sink {
    /// What the caller's own steps fail with.
    type Error;
    /// A window's warnings (damage, lines cut).
    fn warning(&mut self, warning: &str);
    /// Line `number` of file `file` (an index into the names) belongs to `request`; in
    /// order, a continuation line right after the line it continues.
    fn line(&mut self, file: u32, number: u32, request: u32) -> Result<(), Self::Error>;
    /// Requests no later window can add to, with the flows that hold their lines.
    fn closed(&mut self, flows: &Flows, requests: &[Request]) -> Result<(), Self::Error>;
}

/// What stitching found, besides what the sink was told.
pub struct Stitched {
    /// Every request's lines, per node or thread.
    pub flows: Flows,
    /// What the first window taught (templates, identifiers, links).
    pub learned: Learned,
    /// Lines read, cut, continuing the line before, decoded lossily.
    pub counts: ReadCounts,
    /// Requests per log-point sequence, commonest first, with their latency.
    pub sequences: Vec<Sequence>,
    /// Requests found.
    pub requests: u32,
    /// Windows read.
    pub windows: usize,
    /// Lines with no timestamp recognised (placed in file order).
    pub untimed: usize,
}

impl Stitched {
    /// What the Logs page shows beside the requests, why they were stitched so: the first
    /// identifiers with their evidence and the first links (of the first window), of run
    /// `run`, as JSON (`POST /v1/logflow/report`).
    pub fn report(&self, run: u64) -> serde_json::Value {
        const SHOWN: usize = 50;
        let learned = &self.learned;
        serde_json::json!({
            "run": format!("{run:016x}"),
            "files": self.flows.files.len(),
            "lines": self.counts.lines,
            "requests": self.requests,
            "identifiers": learned.identifiers.iter().take(SHOWN).collect::<Vec<_>>(),
            "links": learned.links.iter().take(SHOWN).collect::<Vec<_>>(),
        })
    }
}

/// Stitches the windows `next_window` gives (the files `names`, in the windows' order)
/// into requests.
pub fn stitch_logs<S: Sink>(
    mut next_window: impl FnMut() -> Option<Window>,
    names: Vec<String>,
    options: &Options,
    sink: &mut S,
) -> Result<Stitched, S::Error> {
    let mut flows = Flows::new(names, options.keep_lines);
    let mut table = SequenceTable::default();
    let mut numbering = Numbering::default();
    let mut learned: Option<Learned> = None;
    let mut counts = ReadCounts::default();
    let (mut untimed, mut windows, mut requests_total) = (0, 0, 0);
    while let Some(window) = next_window() {
        windows += 1;
        for w in &window.warnings {
            sink.warning(w);
        }
        let corpus = Corpus::read_numbered(
            &window.files,
            &window.first_lines,
            drain::Options::default(),
            options.format.as_ref(),
            options.sources.as_ref(),
        );
        let c = window.counts.as_ref().unwrap_or(&corpus.counts);
        counts.add(c);
        let ranked = rank(&corpus);
        let links = learn(&corpus, &LinkOptions::default());
        let given = numbering.given(&window, &corpus);
        let requests = stitch_after(&corpus, &ranked, &links, &options.stitch, &given);
        if learned.is_none() {
            learned = Some(Learned::of(&corpus, &ranked, &links, &options.stitch));
        }
        let (numbered, open) = numbering.number(&window, &corpus, &requests);
        for (line, request) in corpus.lines.iter().zip(&numbered) {
            let Some(request) = request else {
                continue;
            };
            untimed += usize::from(line.time_ns.is_none());
            requests_total = requests_total.max(request + 1);
            for number in std::iter::once(line.number).chain(line.continued.iter().copied()) {
                sink.line(line.file, number, *request)?;
            }
        }
        // The request ids its lines print, named as such, for the requests' spans.
        let taken = identifiers(&ranked, &options.stitch);
        let request_ids: Vec<(Variable, &str)> = ranked
            .iter()
            .filter(|e| e.named_request_id && taken.contains(&e.variable))
            .map(|e| (e.variable, e.name.as_str()))
            .collect();
        flows.add(&corpus, &window.files, &numbered, &request_ids);
        drop(corpus);
        let closed = flows.close(|r| open.contains(&r));
        for r in &closed {
            table.add(r);
        }
        sink.closed(&flows, &closed)?;
    }
    let closed = flows.close(|_| false);
    for r in &closed {
        table.add(r);
    }
    sink.closed(&flows, &closed)?;
    Ok(Stitched {
        flows,
        learned: learned.unwrap_or_default(),
        counts,
        sequences: table.finish(),
        requests: requests_total,
        windows,
        untimed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what stitching tells it.
    #[derive(Default)]
    struct Recorder {
        lines: Vec<(u32, u32, u32)>,
        closed: usize,
    }

    impl Sink for Recorder {
        type Error = std::convert::Infallible;

        fn warning(&mut self, _: &str) {}

        fn line(&mut self, file: u32, number: u32, request: u32) -> Result<(), Self::Error> {
            self.lines.push((file, number, request));
            Ok(())
        }

        fn closed(&mut self, _: &Flows, requests: &[Request]) -> Result<(), Self::Error> {
            self.closed += requests.len();
            Ok(())
        }
    }

    /// Stitches the web and app nodes' logs, one window, telling `sink`.
    fn stitch_web_and_app<S: Sink<Error = std::convert::Infallible>>(
        web: String,
        app: String,
        options: &Options,
        sink: &mut S,
    ) -> Stitched {
        let files = vec![
            ("web".to_string(), web.into_bytes()),
            ("app".to_string(), app.into_bytes()),
        ];
        let window = Window {
            first_lines: vec![1; 2],
            new_from: vec![1; 2],
            overlap_from: vec![u32::MAX; 2],
            files,
            warnings: Vec::new(),
            counts: None,
        };
        let mut once = Some(window);
        let names = vec!["web".to_string(), "app".to_string()];
        match stitch_logs(|| once.take(), names, options, sink) {
            Ok(s) => s,
            Err(never) => match never {},
        }
    }

    #[test]
    fn a_request_id_some_lines_print_goes_on_every_span_of_the_request() {
        // The web node prints each request's id, the app node, 5 ms later, no id.
        let (mut web, mut app) = (String::new(), String::new());
        for i in 0..20 {
            let ms = i * 100;
            web.push_str(&format!(
                "{{\"time\":\"2024-01-01T00:00:00.{ms:03}Z\",\"msg\":\"cart shown\",\"request_id\":\"r{i:04}x\"}}\n"
            ));
            app.push_str(&format!(
                "2024-01-01 00:00:00.{:03} INFO cart loaded items={}\n",
                ms + 5,
                i % 3
            ));
        }
        let mut sink = crate::traces::RequestSpans::new(1);
        let options = Options {
            keep_lines: true,
            ..Options::default()
        };
        stitch_web_and_app(web, app, &options, &mut sink);
        assert_eq!(sink.spans.len(), 40);
        let id_of = |span: &causeway_model::Span| {
            span.attributes
                .iter()
                .find(|a| &*a.key == "request_id")
                .map(|a| a.value.to_string())
        };
        for web in sink.spans.iter().filter(|s| &*s.service == "web") {
            let id = id_of(web);
            assert!(id.as_deref().is_some_and(|v| v.starts_with('r')), "{id:?}");
            let app = sink
                .spans
                .iter()
                .find(|s| s.trace_id == web.trace_id && &*s.service == "app");
            assert_eq!(app.map(id_of), Some(id));
        }
    }

    #[test]
    fn lines_of_one_request_on_two_nodes_are_one_request() {
        // Twenty requests, each logged by the web node and then the app node with its id.
        let (mut web, mut app) = (String::new(), String::new());
        for i in 0..20 {
            let ms = i * 100;
            web.push_str(&format!(
                "2024-01-01 00:00:00.{ms:03} INFO request started id=req{i:04} path=/cart\n"
            ));
            app.push_str(&format!(
                "2024-01-01 00:00:00.{:03} INFO loading cart for id=req{i:04}\n",
                ms + 5
            ));
        }
        let mut sink = Recorder::default();
        let stitched = stitch_web_and_app(web, app, &Options::default(), &mut sink);
        assert_eq!((stitched.windows, stitched.counts.lines), (1, 40));
        assert_eq!(stitched.requests, 20);
        assert_eq!(sink.closed, 20);
        assert_eq!(sink.lines.len(), 40);
        // Line n of the web log and line n of the app log are one request, and no
        // other line is in it.
        for n in 1..=20 {
            let of = |file| {
                sink.lines
                    .iter()
                    .find(|l| l.0 == file && l.1 == n)
                    .map(|l| l.2)
            };
            assert_eq!(of(0), of(1), "line {n}");
            let request = of(0).unwrap();
            assert_eq!(sink.lines.iter().filter(|l| l.2 == request).count(), 2);
        }
        assert!(!stitched.learned.identifiers.is_empty());
    }
}

//! A log file followed while it grows, stitched a window at a time: each pass adds the
//! whole lines the file gained, and the requests that began in the window since the last
//! pass (and are settled: no later line will join them) come out as spans, stitched with
//! the lines of the passes before as context. Memory holds [`CONTEXT_PASSES`] passes of one
//! file, at most [`MAX_CONTEXT_BYTES`]. `causeway agent --logs GLOB --join API` and `causeway demo` follow plain logs so.

use std::collections::VecDeque;

use causeway_model::Span;

use crate::corpus::MAX_LINE;
use crate::structured;
use crate::traces::RequestSpans;
use crate::window::Window;
use crate::{stitch_logs, Options, Stitched};

/// Passes kept as context for the next: a request that began in a pass's window may have
/// lines read by the passes before (5 s at the agent's pass a second, 10 s at one every
/// 2 s).
pub const CONTEXT_PASSES: usize = 5;

/// Bytes of context kept at most, whatever the passes read.
pub const MAX_CONTEXT_BYTES: usize = 32 << 20;

/// One file's recent lines.
pub struct Tail {
    name: String,
    /// Each pass's whole lines, and the number of the first.
    passes: VecDeque<(Vec<u8>, u32)>,
    next_line: u32,
    /// Requests that began before this (Unix ns) were given out.
    from: u64,
    pass: u64,
}

/// What a window gave.
pub struct Settled {
    /// The spans of the requests that began in the window ([`crate::traces`]'s shape).
    pub spans: Vec<Span>,
    /// When each of those requests began, Unix ns.
    pub starts: Vec<u64>,
    /// What stitching learned (identifiers and links), for the stitching report.
    pub stitched: Stitched,
    /// The window's run number, which salts its ids.
    pub run: u64,
}

impl Tail {
    /// A file named `name` (its service is its stem), followed from line `first_line`;
    /// requests that began before `from` (Unix ns) are not given out.
    pub fn new(name: impl Into<String>, first_line: u32, from: u64) -> Tail {
        Tail {
            name: name.into(),
            passes: VecDeque::new(),
            next_line: first_line.max(1),
            from,
            pass: 0,
        }
    }

    /// Adds the whole lines the file gained (ending at a newline).
    pub fn push(&mut self, lines: Vec<u8>) {
        let count = lines.iter().filter(|&&b| b == b'\n').count() as u32;
        self.passes.push_back((lines, self.next_line));
        self.next_line = self.next_line.saturating_add(count);
        let mut held: usize = self.passes.iter().map(|p| p.0.len()).sum();
        while self.passes.len() > CONTEXT_PASSES
            || (held > MAX_CONTEXT_BYTES && self.passes.len() > 1)
        {
            held -= self.passes.pop_front().map_or(0, |p| p.0.len());
        }
    }

    /// Stitches the lines held and gives out the requests that began from the last
    /// window's end up to `to` (Unix ns), ids salted per window.
    pub fn settle(&mut self, to: u64) -> Option<Settled> {
        if to <= self.from {
            return None;
        }
        let first_line = self.passes.front()?.1;
        self.pass += 1;
        let mut bytes: Vec<u8> = self
            .passes
            .iter()
            .flat_map(|p| p.0.iter().copied())
            .collect();
        // A JSON object pretty-printed over lines and still being written waits for the
        // next window, which reads it whole: read now, its lines would run on the line
        // before it. (It stays in the passes; written just now, it begins after `to`.)
        if let Some(at) = structured::unclosed_pretty_json(&bytes, MAX_LINE) {
            bytes.truncate(at);
        }
        let window = Window {
            files: vec![(self.name.clone(), bytes)],
            first_lines: vec![first_line],
            new_from: vec![first_line],
            overlap_from: vec![u32::MAX],
            warnings: Vec::new(),
            counts: None,
        };
        let options = Options {
            keep_lines: true,
            ..Options::default()
        };
        let run = self.from ^ self.pass.rotate_left(40);
        let mut requests = RequestSpans::new(run);
        let mut windows = std::iter::once(window);
        let stitched = match stitch_logs(
            || windows.next(),
            vec![self.name.clone()],
            &options,
            &mut requests,
        ) {
            Ok(stitched) => stitched,
            Err(never) => match never {},
        };
        let mut began: foldhash::HashMap<_, u64> = foldhash::HashMap::default();
        for s in &requests.spans {
            let start = began.entry(s.trace_id).or_insert(u64::MAX);
            *start = (*start).min(s.start);
        }
        let window = self.from..to;
        self.from = to;
        let spans: Vec<Span> = requests
            .spans
            .into_iter()
            .filter(|s| window.contains(&began[&s.trace_id]))
            .collect();
        let starts = began.into_values().filter(|t| window.contains(t)).collect();
        Some(Settled {
            spans,
            starts,
            stitched,
            run,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// A line at `at_ms` after the epoch (within its first day).
    fn line(at_ms: u64, text: &str) -> String {
        let (s, ms) = (at_ms / 1000, at_ms % 1000);
        format!(
            "1970-01-01T{:02}:{:02}:{:02}.{ms:03}Z INFO [main] {text}\n",
            s / 3600,
            s / 60 % 60,
            s % 60
        )
    }

    #[test]
    fn a_request_is_given_out_once_whole_when_its_window_settles() {
        let mut tail = Tail::new("orders.log", 1, 100 * S);
        // A request that began before following started is not given out.
        let mut first = line(99_000, "order 5 received");
        first += &line(99_050, "order 5 done");
        first += &line(100_500, "order 7 received");
        first += &line(100_520, "order 7 charged");
        tail.push(first.into_bytes());
        // Its last line comes in the next pass.
        tail.push(line(100_550, "order 7 done").into_bytes());
        let settled = tail.settle(101 * S).expect("a window");
        let lines: Vec<&str> = settled
            .spans
            .iter()
            .flat_map(|s| &s.events)
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(
            lines,
            ["order 7 received", "order 7 charged", "order 7 done"]
        );
        assert_eq!(settled.starts, [100_500_000_000]);
        // Its line numbers are the file's.
        let numbers: Vec<_> = settled.spans[0]
            .events
            .iter()
            .map(|e| e.attributes[0].value.clone())
            .collect();
        assert_eq!(numbers, [3i64.into(), 4i64.into(), 5i64.into()]);
        // The next window does not give it again.
        tail.push(line(102_500, "order 9 received").into_bytes());
        let next = tail.settle(103 * S).expect("a window");
        let again: Vec<&str> = next
            .spans
            .iter()
            .flat_map(|s| &s.events)
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(again, ["order 9 received"]);
        assert!(tail.settle(103 * S).is_none(), "nothing new to settle");
    }

    #[test]
    fn a_json_object_being_written_when_a_window_settles_is_read_whole_in_the_next() {
        let names = |settled: &Settled| -> Vec<String> {
            settled
                .spans
                .iter()
                .flat_map(|s| &s.events)
                .map(|e| e.name.clone())
                .collect()
        };
        let mut tail = Tail::new("orders.log", 1, 100 * S);
        let mut first = line(100_500, "order 7 received");
        first += &line(100_520, "order 7 done");
        // A pretty-printed record whose first lines were written when the pass read.
        first += "{\n  \"time\": \"1970-01-01T00:01:41.600Z\",\n";
        tail.push(first.into_bytes());
        let settled = tail.settle(100_550_000_000).expect("a window");
        assert_eq!(names(&settled), ["order 7 received", "order 7 done"]);
        let mut rest = String::from("  \"level\": \"info\",\n  \"msg\": \"order 8 received\"\n}\n");
        rest += &line(101_620, "order 8 done");
        tail.push(rest.into_bytes());
        let next = tail.settle(102 * S).expect("a window");
        assert_eq!(names(&next), ["order 8 received", "order 8 done"]);
        // Its line numbers are the file's: the object is lines 3 to 7.
        let numbers: Vec<_> = next
            .spans
            .iter()
            .flat_map(|s| &s.events)
            .map(|e| e.attributes[0].value.clone())
            .collect();
        assert_eq!(numbers, [3i64.into(), 8i64.into()]);
    }
}

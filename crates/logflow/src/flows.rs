//! Requests gathered across windows: each line given a request is kept, with its log
//! point's text, until its request is closed (no later window can add to it); then the
//! request goes whole to the sequence table and to traces. Log points and threads are
//! numbered across windows by their text. A line keeps its file, number, time, thread
//! and log point, and its rendered text only when traces are wanted, so memory holds open
//! requests, not the logs. The first window's log points keep the corpus's numbers.

use foldhash::HashMap;

use crate::corpus::Corpus;
use crate::ids::Variable;
use crate::points::PointId;

/// A line of a request, owning what its window's corpus knew of it.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowLine {
    /// Index into [`Flows::files`].
    pub file: u32,
    /// Its line number in the file, from 1.
    pub number: u32,
    /// Its time, in nanoseconds since the Unix epoch, when the line has one.
    pub time_ns: Option<i64>,
    /// See [`Flows::thread`].
    pub thread: Option<u32>,
    /// See [`Flows::point`].
    pub point: u32,
    /// Its message as printed, after its prefix (kept only when asked for: traces need
    /// it, sequences not).
    pub text: Box<str>,
    /// The request id it prints, if a variable named as a request's id is among its
    /// values: the variable's name and the value.
    pub request_id: Option<Box<(Box<str>, Box<str>)>>,
}

/// A request's lines, in the order they were added (time order).
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The request's number.
    pub id: u32,
    /// Its lines, in time order.
    pub lines: Vec<FlowLine>,
}

/// Lines of open requests, and the names they are numbered by.
pub struct Flows {
    /// The files (nodes) lines come from, by number.
    pub files: Vec<String>,
    points: Vec<(String, u64)>,
    point_ids: HashMap<String, u32>,
    threads: Vec<Box<str>>,
    thread_ids: HashMap<Box<str>, u32>,
    open: HashMap<u32, Vec<FlowLine>>,
    keep_text: bool,
}

impl Flows {
    /// Flows over `files` (the windows' files, in their order), keeping each line's text
    /// when `keep_text`.
    pub fn new(files: Vec<String>, keep_text: bool) -> Flows {
        Flows {
            files,
            points: Vec::new(),
            point_ids: HashMap::default(),
            threads: Vec::new(),
            thread_ids: HashMap::default(),
            open: HashMap::default(),
            keep_text,
        }
    }

    /// Log point `point`'s text.
    pub fn point(&self, point: u32) -> &str {
        self.points.get(point as usize).map_or("", |p| p.0.as_str())
    }

    /// Every log point seen: its text and lines.
    pub fn points(&self) -> &[(String, u64)] {
        &self.points
    }

    /// Thread `thread`'s name.
    pub fn thread(&self, thread: u32) -> Option<&str> {
        self.threads.get(thread as usize).map(|t| &**t)
    }

    /// Adds the lines of `corpus`, read from `files`, to the requests `requests` gives
    /// them (none: a line added before, as the window before's). The first corpus added
    /// numbers its log points as it does, so that a single window's ids are the
    /// corpus's.
    ///
    /// `request_ids` are the variables named as a request's id, with their names: a
    /// line's value of one is kept with it.
    pub fn add(
        &mut self,
        corpus: &Corpus,
        files: &[(String, Vec<u8>)],
        requests: &[Option<u32>],
        request_ids: &[(Variable, &str)],
    ) {
        let first = self.points.is_empty();
        let points: Vec<u32> = (0..corpus.points().len() as PointId)
            .map(|p| {
                let text = corpus.point_shape(p).text();
                if first {
                    self.point_ids.entry(text.clone()).or_insert(p);
                    self.points.push((text, 0));
                    return p;
                }
                match self.point_ids.get(&text) {
                    Some(&id) => id,
                    None => {
                        let id = self.points.len() as u32;
                        self.point_ids.insert(text.clone(), id);
                        self.points.push((text, 0));
                        id
                    }
                }
            })
            .collect();
        let threads: Vec<u32> = corpus
            .threads
            .iter()
            .map(|name| match self.thread_ids.get(name) {
                Some(&id) => id,
                None => {
                    let id = self.threads.len() as u32;
                    self.threads.push(name.clone());
                    self.thread_ids.insert(name.clone(), id);
                    id
                }
            })
            .collect();
        for i in corpus.timeline().iter().map(|m| m.line) {
            let (Some(line), Some(&Some(request))) = (corpus.lines.get(i), requests.get(i)) else {
                continue;
            };
            let point = points[line.point as usize];
            self.points[point as usize].1 += 1;
            let text = if self.keep_text {
                corpus.message(line, files).into()
            } else {
                Box::default()
            };
            let request_id = request_ids
                .iter()
                .filter(|((p, _), _)| *p == line.point)
                .find_map(|&((_, slot), name)| {
                    let value = corpus.values(line).nth(slot as usize)?;
                    Some(Box::new((name.into(), value.into())))
                });
            self.open.entry(request).or_default().push(FlowLine {
                file: line.file,
                number: line.number,
                time_ns: line.time_ns,
                thread: line.thread.map(|t| threads[t as usize]),
                point,
                text,
                request_id,
            });
        }
    }

    /// Takes the requests `open` says no later window can add to, by id.
    pub fn close(&mut self, open: impl Fn(u32) -> bool) -> Vec<Request> {
        let ids: Vec<u32> = self.open.keys().copied().filter(|&r| !open(r)).collect();
        let mut closed: Vec<Request> = ids
            .into_iter()
            .filter_map(|id| self.open.remove(&id).map(|lines| Request { id, lines }))
            .collect();
        closed.sort_unstable_by_key(|r| r.id);
        closed
    }

    /// The requests of one corpus, read from `files`, whose every line `requests` gives a
    /// request: the whole of a single window's run.
    pub fn whole(
        corpus: &Corpus,
        files: &[(String, Vec<u8>)],
        requests: &[u32],
        keep_text: bool,
    ) -> (Flows, Vec<Request>) {
        let mut flows = Flows::new(corpus.files.clone(), keep_text);
        let given: Vec<Option<u32>> = requests.iter().copied().map(Some).collect();
        flows.add(corpus, files, &given, &[]);
        let closed = flows.close(|_| false);
        (flows, closed)
    }
}

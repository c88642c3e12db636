//! The front door of black-box inference: capture logs and reconciled messages in, causal
//! paths out. `causeway infer` and the benchmarks call [`infer`]; the steps it runs are
//! the modules beside it (`reconcile`, `link`, `delays`, `traces`).

use std::io::BufRead as _;
use std::path::{Path, PathBuf};

use causeway_model::Span;

use crate::delays::{delays_by_index, Delays};
use crate::link::{link, Assignment, LinkOptions, Linked, Mode};
use crate::logs::{log_files, LogError};
use crate::reconcile::{leave_out_ports, Captured, Message};

/// What inference reads.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// Capture directories (`causeway capture --out`): every capture log in each.
    pub capture_dirs: Vec<PathBuf>,
    /// Reconciled messages as JSON lines, besides or instead of captures.
    pub messages_file: Option<PathBuf>,
    /// Node names: a captured process whose command line contains the text (the second
    /// of a pair) is the node named by the first; the first pair that matches wins.
    pub node_names: Vec<(String, String)>,
}

/// How inference links messages. The defaults are the ones BENCHMARKS.md measured best.
#[derive(Clone, Debug)]
pub struct Options {
    /// How causes are chosen.
    pub mode: Mode,
    /// WAP5's parameters; the ports each process listened on are added from the captures.
    pub link: LinkOptions,
    /// Messages to or from these ports are left out (traffic that is not the system's
    /// requests, such as span exports to a collector).
    pub ignore_ports: Vec<u16>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            mode: Mode::Connections,
            link: LinkOptions::default(),
            ignore_ports: Vec::new(),
        }
    }
}

/// What inference found, with what it was found from.
pub struct Inference {
    /// The captures read: processes, nodes, listening ports, damage found in the logs.
    pub captured: Captured,
    /// Every message linked: the captures' reconciled, then the messages file's.
    pub messages: Vec<Message>,
    /// Each message's place in its path instance, and the patterns.
    pub linked: Linked,
    /// Lines of the messages file that were not messages: `file:line: why`.
    pub skipped_lines: Vec<String>,
    /// Messages left out because of their ports.
    pub ignored: usize,
}

/// Why inference could not run.
#[derive(Debug, thiserror::Error)]
pub enum InferError {
    /// Neither capture directories nor a messages file.
    #[error("nothing to infer from: give capture directories, a messages file, or both")]
    NoInput,
    /// A capture directory could not be listed.
    #[error(transparent)]
    Logs(#[from] LogError),
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// A line of a node-naming file is not `NAME = TEXT`.
    #[error("{}:{line}: expected NAME = TEXT (a name, then text of the command line), found {found:?}", path.display())]
    Names {
        /// The file.
        path: PathBuf,
        /// Its line, from 1.
        line: usize,
        /// What the line held.
        found: String,
    },
}

/// Reads the captures and messages of `inputs`, reconciles and links them. `step` is
/// told as each step ends: `logs read`, `messages reconciled`, `linked`.
pub fn infer(
    inputs: &Inputs,
    options: &Options,
    mut step: impl FnMut(&'static str),
) -> Result<Inference, InferError> {
    if inputs.capture_dirs.is_empty() && inputs.messages_file.is_none() {
        return Err(InferError::NoInput);
    }
    let mut files = Vec::new();
    for dir in &inputs.capture_dirs {
        files.extend(log_files(dir)?);
    }
    let mut captured = Captured::read(&files).map_err(|source| InferError::Read {
        path: inputs.capture_dirs.first().cloned().unwrap_or_default(),
        source,
    })?;
    if !inputs.node_names.is_empty() {
        captured.name_nodes(&inputs.node_names);
    }
    step("logs read");
    let mut messages = captured.messages();
    step("messages reconciled");
    let mut skipped_lines = Vec::new();
    if let Some(path) = &inputs.messages_file {
        skipped_lines = read_messages(path, &mut messages)?;
    }
    Ok(link_messages(
        captured,
        messages,
        skipped_lines,
        options,
        step,
    ))
}

/// Reconciles and links what `captured` holds (its nodes already named): the same steps
/// as [`infer`], for captures read some other way (`crate::tail`, a window at a time).
pub fn infer_captured(mut captured: Captured, options: &Options) -> Inference {
    let messages = captured.messages();
    link_messages(captured, messages, Vec::new(), options, |_| {})
}

fn link_messages(
    captured: Captured,
    mut messages: Vec<Message>,
    skipped_lines: Vec<String>,
    options: &Options,
    mut step: impl FnMut(&'static str),
) -> Inference {
    let ignored = leave_out_ports(&mut messages, &options.ignore_ports);
    let link_options = LinkOptions {
        listening: captured.listening.clone(),
        ..options.link.clone()
    };
    let linked = link(&messages, options.mode, &link_options);
    step("linked");
    Inference {
        captured,
        messages,
        linked,
        skipped_lines,
        ignored,
    }
}

impl Inference {
    /// Each message's trace, parent and cause, with its path's probability, in message
    /// order.
    pub fn assignments(&self) -> Vec<Assignment> {
        self.linked.assignments(&self.messages)
    }

    /// The inferred traces as spans (a client and a server span per request and its reply,
    /// see [`crate::traces`]), marked inferred
    /// with their path's probability; `salt` makes the ids of one run differ from
    /// another's.
    pub fn spans(&self, salt: u64) -> Vec<Span> {
        let mut spans = crate::traces::spans(&self.messages, &self.assignments(), salt);
        // A node named by a rule has no host in its name: its processes' host, when
        // they share one.
        let mut hosts: std::collections::HashMap<&str, Option<&str>> = Default::default();
        for p in self.captured.processes.iter().filter(|p| p.named) {
            let host = hosts.entry(p.node.as_str()).or_insert(Some(&p.host));
            if *host != Some(p.host.as_str()) {
                *host = None;
            }
        }
        for s in spans.iter_mut().filter(|s| s.host.is_empty()) {
            if let Some(Some(host)) = hosts.get(&*s.service) {
                s.host = (*host).into();
            }
        }
        spans
    }

    /// Per node, the delays between a message's receipt and the sends it caused.
    pub fn delays(&self) -> Delays {
        delays_by_index(&self.messages, &self.linked.causes())
    }
}

/// Reads reconciled messages (JSON lines, as `causeway infer --export-messages` writes
/// them) onto `out`; returns the lines that were not messages, each as `file:line: why`.
pub fn read_messages(path: &Path, out: &mut Vec<Message>) -> Result<Vec<String>, InferError> {
    let read_error = |source| InferError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut skipped = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(read_error)?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Message>(&line) {
            // Names are interned as they are read, as reconciled ones are.
            Ok(m) => out.push(m),
            Err(e) => skipped.push(format!("{}:{}: skipped: {e}", path.display(), n + 1)),
        }
    }
    Ok(skipped)
}

/// Reads a node-naming file: `NAME = TEXT` lines, `#` starting a comment.
pub fn read_node_names(path: &Path) -> Result<Vec<(String, String)>, InferError> {
    let text = std::fs::read_to_string(path).map_err(|source| InferError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut rules = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        match line.split_once('=') {
            Some((name, text)) if !name.trim().is_empty() && !text.trim().is_empty() => {
                rules.push((name.trim().to_string(), text.trim().to_string()));
            }
            _ => {
                return Err(InferError::Names {
                    path: path.to_path_buf(),
                    line: n + 1,
                    found: line.to_string(),
                })
            }
        }
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(name: &str, text: &str) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("causeway-blackbox-{name}-{}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn nothing_to_infer_from_is_an_error() {
        let e = infer(&Inputs::default(), &Options::default(), |_| {}).err();
        assert!(matches!(e, Some(InferError::NoInput)), "{e:?}");
    }

    #[test]
    fn messages_are_linked_and_bad_lines_are_named_with_their_place() {
        let request = r#"{"id":1,"src":"client","src_ep":"10.0.0.1:50000","dst":"web","dst_ep":"10.0.0.2:80","send_ns":1000,"recv_ns":2000,"bytes":100}"#;
        let reply = r#"{"id":2,"src":"web","src_ep":"10.0.0.2:80","dst":"client","dst_ep":"10.0.0.1:50000","send_ns":3000,"recv_ns":4000,"bytes":50}"#;
        let path = temp_file("messages", &format!("{request}\nnot json\n\n{reply}\n"));
        let inputs = Inputs {
            messages_file: Some(path.clone()),
            ..Inputs::default()
        };
        let mut steps = Vec::new();
        let found = infer(&inputs, &Options::default(), |s| steps.push(s)).unwrap();
        assert_eq!(steps, ["logs read", "messages reconciled", "linked"]);
        assert_eq!(found.messages.len(), 2);
        assert_eq!(found.skipped_lines.len(), 1);
        assert!(
            found.skipped_lines[0].starts_with(&format!("{}:2: skipped", path.display())),
            "{:?}",
            found.skipped_lines
        );
        // The reply was sent after the request arrived: one path of both.
        let assignments = found.assignments();
        assert_eq!(assignments.len(), 2);
        assert_eq!(assignments[0].trace, assignments[1].trace);
        assert_eq!(found.spans(1).len(), 2);
        let ignoring = Options {
            ignore_ports: vec![80],
            ..Options::default()
        };
        let none = infer(&inputs, &ignoring, |_| {}).unwrap();
        assert_eq!((none.messages.len(), none.ignored), (0, 2));
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_names_file_line_without_equals_is_named_with_its_place() {
        let path = temp_file("names", "# nodes\nweb = nginx\nno equals here\n");
        match read_node_names(&path) {
            Err(InferError::Names { line, found, .. }) => {
                assert_eq!((line, found.as_str()), (3, "no equals here"));
            }
            other => panic!("{other:?}"),
        }
        std::fs::write(&path, "web = nginx # the front\napp=python\n").unwrap();
        assert_eq!(
            read_node_names(&path).unwrap(),
            [
                ("web".to_string(), "nginx".to_string()),
                ("app".to_string(), "python".to_string())
            ]
        );
        let _ = std::fs::remove_file(path);
    }
}

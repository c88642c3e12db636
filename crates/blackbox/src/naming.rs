//! What a captured process is called when no names file names it: its program, and for an
//! interpreter the script or module it runs (`python3.11:http.server`, `node:server`,
//! `java:Main`), so that two Python programs are two services. Servers of one host whose
//! names are still alike but that listen on different ports are told apart by their lowest
//! listening port (`python3.11:app:8001`); a client of the same program keeps the name. Node names keep the pid and host after it:
//! `python3.11:http.server[4242]@web1`.

use foldhash::{HashMap, HashSet};

use crate::reconcile::Captured;

/// Programs that run a script or module named on their command line.
fn is_interpreter(program: &str) -> bool {
    let base = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    matches!(
        base,
        "python"
            | "pypy"
            | "node"
            | "nodejs"
            | "deno"
            | "bun"
            | "ruby"
            | "perl"
            | "php"
            | "java"
            | "bash"
            | "sh"
            | "dash"
            | "zsh"
    )
}

/// Options of these interpreters that take the next argument as their value.
const TAKES_VALUE: [&str; 8] = [
    "-X",
    "-W",
    "-cp",
    "-classpath",
    "--class-path",
    "-r",
    "--require",
    "-I",
];

/// The script or module an interpreter's command line runs: `-m MODULE`, `-jar FILE`, or
/// the first argument that is not an option, as its file name without extension. None for
/// inline code (`-c`, `-e`) or when there is none.
pub(crate) fn script_of(program: &str, command: &str) -> Option<String> {
    if !is_interpreter(program) {
        return None;
    }
    let mut args = command.split(' ').filter(|a| !a.is_empty()).skip(1);
    while let Some(arg) = args.next() {
        match arg {
            "-m" | "-jar" => return args.next().map(file_stem),
            "-c" | "-e" | "--eval" => return None,
            a if TAKES_VALUE.contains(&a) => {
                args.next();
            }
            a if a.starts_with('-') => {}
            a => return Some(file_stem(a)),
        }
    }
    None
}

/// A path's file name without its extension (`/srv/app.py` is `app`); a module path is
/// kept whole (`http.server`).
fn file_stem(arg: &str) -> String {
    let name = arg.rsplit('/').next().unwrap_or(arg);
    for ext in [
        ".py", ".js", ".mjs", ".ts", ".rb", ".pl", ".php", ".jar", ".sh",
    ] {
        if let Some(stem) = name.strip_suffix(ext) {
            return stem.to_string();
        }
    }
    name.to_string()
}

impl Captured {
    /// Names every process no names file named: `program` or `program:script`, with the
    /// lowest listening port after it where processes of one host would share a name.
    pub(crate) fn name_distinctly(&mut self) {
        let base: Vec<Option<String>> = self
            .processes
            .iter()
            .map(|p| {
                (!p.named).then(|| match script_of(&p.program, &p.command) {
                    Some(script) => format!("{}:{script}", p.program),
                    None => p.program.clone(),
                })
            })
            .collect();
        let lowest_port = |node: &str| {
            self.listening
                .get(node)
                .and_then(|ports| ports.iter().min().copied())
        };
        // Per (name, host), the distinct lowest ports its servers listen on (a client of
        // the same program keeps the plain name).
        let mut ports: HashMap<(&str, &str), HashSet<u16>> = HashMap::default();
        for (p, name) in self.processes.iter().zip(&base) {
            if let (Some(name), Some(port)) = (name, lowest_port(&p.node)) {
                ports
                    .entry((name.as_str(), p.host.as_str()))
                    .or_default()
                    .insert(port);
            }
        }
        let names: Vec<Option<String>> = self
            .processes
            .iter()
            .zip(&base)
            .map(|(p, name)| {
                let name = name.as_ref()?;
                let alike = ports
                    .get(&(name.as_str(), p.host.as_str()))
                    .map_or(0, HashSet::len);
                Some(match lowest_port(&p.node) {
                    Some(port) if alike > 1 => format!("{name}:{port}[{}]@{}", p.pid, p.host),
                    _ => format!("{name}[{}]@{}", p.pid, p.host),
                })
            })
            .collect();
        for (p, node) in self.processes.iter_mut().zip(names) {
            let Some(node) = node else { continue };
            if let Some(listened) = self.listening.remove(&p.node) {
                self.listening
                    .entry(node.clone())
                    .or_default()
                    .extend(listened);
            }
            p.node = node;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::Process;

    #[test]
    fn scripts_and_modules_name_interpreted_programs() {
        let cases = [
            (
                "python3.11",
                "python3 -m http.server 8000 --bind 127.0.0.1",
                Some("http.server"),
            ),
            (
                "python3.11",
                "python3 -u /srv/shop/app.py --port 1",
                Some("app"),
            ),
            (
                "python3",
                "python3 -X dev -W ignore worker.py",
                Some("worker"),
            ),
            ("python3", "python3 -c print(1)", None),
            (
                "node",
                "node --enable-source-maps dist/server.js",
                Some("server"),
            ),
            (
                "java",
                "java -Xmx1g -cp lib/* com.shop.Main",
                Some("com.shop.Main"),
            ),
            ("java", "java -jar /opt/orders.jar", Some("orders")),
            ("nginx", "nginx -c /etc/nginx.conf", None),
            ("python3", "python3", None),
        ];
        for (program, command, want) in cases {
            assert_eq!(script_of(program, command).as_deref(), want, "{command}");
        }
    }

    fn process(pid: u32, program: &str, command: &str) -> Process {
        Process {
            node: format!("{program}[{pid}]@h"),
            host: "h".into(),
            pid,
            program: program.into(),
            command: command.into(),
            log: Default::default(),
            named: false,
        }
    }

    #[test]
    fn alike_processes_of_a_host_are_told_apart_by_their_listening_port() {
        let mut c = Captured::default();
        c.processes = vec![
            process(1, "python3.11", "python3 client.py"),
            process(2, "python3.11", "python3 -m http.server 8001"),
            process(3, "python3.11", "python3 -m http.server 8002"),
            process(4, "nginx", "nginx"),
            process(5, "python3.11", "python3 -m http.server 8003"),
            process(6, "python3.11", "python3 -m http.server"),
        ];
        c.processes[4].named = true;
        c.processes[4].node = "backup".into();
        for (node, port) in [("python3.11[2]@h", 8001), ("python3.11[3]@h", 8002)] {
            c.listening.entry(node.into()).or_default().insert(port);
        }
        c.name_distinctly();
        let nodes: Vec<&str> = c.processes.iter().map(|p| p.node.as_str()).collect();
        assert_eq!(
            nodes,
            [
                "python3.11:client[1]@h",
                "python3.11:http.server:8001[2]@h",
                "python3.11:http.server:8002[3]@h",
                "nginx[4]@h",
                "backup",
                "python3.11:http.server[6]@h"
            ]
        );
        assert!(c.listening["python3.11:http.server:8001[2]@h"].contains(&8001));
    }
}

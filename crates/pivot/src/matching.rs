//! Whether a tracepoint's probe stands for a callsite: its kind, and every matcher
//! (exact or a `*`/`?` glob) over the callsite's metadata. The same test runs in each
//! process (on `tracing` metadata) and in the hub (on the callsites processes listed).

use crate::lang::ast::{MatchKey, Matcher, Probe, ProbeKind, TracepointDef};
use crate::protocol::CallsiteInfo;

/// What a probe can test of a callsite.
pub trait CallsiteFacts {
    /// An event's callsite (else a span's).
    fn is_event(&self) -> bool;
    /// The target.
    fn target(&self) -> &str;
    /// The name.
    fn name(&self) -> &str;
    /// The level, any case.
    fn level(&self) -> &str;
    /// The module path.
    fn module(&self) -> Option<&str>;
    /// The source file.
    fn file(&self) -> Option<&str>;
    /// The source line.
    fn line(&self) -> Option<u32>;
    /// Whether a field name passes `test`.
    fn any_field(&self, test: &dyn Fn(&str) -> bool) -> bool;
}

impl CallsiteFacts for CallsiteInfo {
    fn is_event(&self) -> bool {
        self.kind == "event"
    }
    fn target(&self) -> &str {
        &self.target
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn level(&self) -> &str {
        &self.level
    }
    fn module(&self) -> Option<&str> {
        self.module.as_deref()
    }
    fn file(&self) -> Option<&str> {
        self.file.as_deref()
    }
    fn line(&self) -> Option<u32> {
        self.line
    }
    fn any_field(&self, test: &dyn Fn(&str) -> bool) -> bool {
        self.fields.iter().any(|f| test(f))
    }
}

/// `*` matches any run of characters, `?` one; everything else itself. Linear in the
/// text per star backtrack, no recursion.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

fn matcher_holds(m: &Matcher, c: &dyn CallsiteFacts) -> bool {
    let test = |s: &str| {
        if m.key == MatchKey::Level {
            let (v, s) = (m.value.to_ascii_lowercase(), s.to_ascii_lowercase());
            return if m.glob { glob(&v, &s) } else { v == s };
        }
        if m.glob {
            glob(&m.value, s)
        } else {
            m.value == s
        }
    };
    match m.key {
        MatchKey::Target => test(c.target()),
        MatchKey::Name => test(c.name()),
        MatchKey::Level => test(c.level()),
        MatchKey::Module => c.module().is_some_and(test),
        MatchKey::File => c.file().is_some_and(test),
        MatchKey::Line => c.line().is_some_and(|l| test(&l.to_string())),
        MatchKey::Field => c.any_field(&test),
    }
}

/// Whether `probe` fires at callsite `c` (at the moment its kind names).
pub fn probe_matches(probe: &Probe, c: &dyn CallsiteFacts) -> bool {
    let kind = (probe.kind == ProbeKind::Event) == c.is_event();
    kind && probe.matchers.iter().all(|m| matcher_holds(m, c))
}

/// The kinds of moment at which tracepoint `def` fires at callsite `c` (none: it does not).
pub fn moments(def: &TracepointDef, c: &dyn CallsiteFacts) -> Vec<ProbeKind> {
    let mut kinds: Vec<ProbeKind> = Vec::new();
    for p in &def.probes {
        if probe_matches(p, c) && !kinds.contains(&p.kind) {
            kinds.push(p.kind);
        }
    }
    kinds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_stars_and_single_characters() {
        assert!(glob("replicas::*", "replicas::client"));
        assert!(glob("*::client", "replicas::client"));
        assert!(glob("r?plicas*", "replicas"));
        assert!(glob("*", ""));
        assert!(glob("a*b*c", "aXbYbZc"));
        assert!(!glob("a*b*c", "aXbYbZ"));
        assert!(!glob("replicas", "replicas::client"));
        assert!(!glob("?", ""));
    }

    #[test]
    fn probes_test_kind_and_every_matcher() {
        let script = crate::lang::parse(
            r#"Tracepoint T = event(target ~ "app::*", level = "INFO", field = "delta")
               | span.close(name = "read", line = 12)"#,
        )
        .unwrap();
        let crate::lang::ast::Item::Tracepoint(def) = &script.items[0] else {
            panic!("a tracepoint");
        };
        let mut c = CallsiteInfo {
            kind: "event".into(),
            target: "app::dn".into(),
            name: "event src/dn.rs:3".into(),
            level: "info".into(),
            module: None,
            file: None,
            line: Some(12),
            fields: vec!["message".into(), "delta".into()],
        };
        assert_eq!(moments(def, &c), [ProbeKind::Event]);
        c.fields.pop();
        assert!(moments(def, &c).is_empty());
        c.kind = "span".into();
        c.name = "read".into();
        assert_eq!(moments(def, &c), [ProbeKind::SpanClose]);
        c.line = Some(13);
        assert!(moments(def, &c).is_empty());

        // A line by glob: 120 to 129.
        let script = crate::lang::parse(r#"Tracepoint T = span(line ~ "12?")"#).unwrap();
        let crate::lang::ast::Item::Tracepoint(def) = &script.items[0] else {
            panic!("a tracepoint");
        };
        assert!(moments(def, &c).is_empty());
        c.line = Some(125);
        assert_eq!(moments(def, &c), [ProbeKind::Span]);
        // It prints back as it was written.
        let printed = crate::lang::print_script(&script);
        assert!(printed.contains(r#"line ~ "12?""#), "{printed}");
        assert!(crate::lang::parse(r#"Tracepoint T = span(line ~ 12)"#).is_err());
    }
}

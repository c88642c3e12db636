//! What a window of logs taught, as JSON for reports: the templates mined, request
//! identifiers ranked (those taken marked), the links between log points learned.

use std::collections::HashSet;

use serde_json::json;

use crate::corpus::Corpus;
use crate::ids::{Evidence, Variable};
use crate::links::Links;
use crate::points::PointId;
use crate::stitch::StitchOptions;

/// What the first window learned, kept for the report once its corpus is gone.
#[derive(Default)]
pub struct Learned {
    /// The templates mined: id, text, count.
    pub templates: Vec<serde_json::Value>,
    /// The identifier ranking (each `taken` or not).
    pub identifiers: Vec<serde_json::Value>,
    /// The links learned, strongest first.
    pub links: Vec<serde_json::Value>,
    /// The template each of the first window's log points refines.
    pub point_templates: Vec<u32>,
}

impl Learned {
    /// What `corpus` taught: its templates, the ranking, the links.
    pub fn of(
        corpus: &Corpus,
        ranked: &[Evidence],
        links: &Links,
        options: &StitchOptions,
    ) -> Learned {
        let taken: HashSet<Variable> = crate::stitch::identifiers(ranked, options)
            .into_iter()
            .collect();
        Learned {
            templates: corpus
                .miner
                .templates()
                .iter()
                .enumerate()
                .map(|(id, t)| json!({"id": id, "text": t.text(), "count": t.count}))
                .collect(),
            identifiers: identifiers_json(corpus, ranked, &taken, usize::MAX),
            links: links_json(corpus, links, usize::MAX),
            point_templates: corpus.points().iter().map(|p| p.template).collect(),
        }
    }
}

fn point_text(corpus: &Corpus, point: PointId) -> String {
    corpus.point_shape(point).text()
}

/// The template a log point refines.
fn template_of(corpus: &Corpus, point: PointId) -> Option<u32> {
    corpus.points().get(point as usize).map(|p| p.template)
}

/// The identifier ranking as JSON, the first `limit`.
fn identifiers_json(
    corpus: &Corpus,
    ranked: &[Evidence],
    taken: &HashSet<Variable>,
    limit: usize,
) -> Vec<serde_json::Value> {
    ranked
        .iter()
        .take(limit)
        .map(|e| {
            json!({
                "point": e.variable.0,
                "template": template_of(corpus, e.variable.0),
                "parameter": e.variable.1,
                "log_point": point_text(corpus, e.variable.0),
                "name": e.name,
                "taken": taken.contains(&e.variable),
                "score": e.score,
                "lines": e.lines,
                "distinct": e.distinct,
                "shared": e.shared,
                "on_several_nodes": e.on_several_nodes,
                "bursts": e.bursts,
                "lifetime_ms": e.lifetime_ns as f64 / 1e6,
                "named_request_id": e.named_request_id,
                "examples": e.examples,
            })
        })
        .collect()
}

/// The learned links as JSON, strongest first, the first `limit`.
fn links_json(corpus: &Corpus, links: &Links, limit: usize) -> Vec<serde_json::Value> {
    let end = |v: crate::links::Variable| {
        json!({
            "file": corpus.files[v.0 as usize],
            "point": v.1,
            "template": template_of(corpus, v.1),
            "parameter": v.2,
            "log_point": point_text(corpus, v.1),
        })
    };
    links
        .all()
        .into_iter()
        .take(limit)
        .map(|l| {
            json!({
                "from": end(l.from),
                "to": end(l.to),
                "window_ms": l.window_ns as f64 / 1e6,
                "precision": l.precision,
                "matches": l.matches,
            })
        })
        .collect()
}

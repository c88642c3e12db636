//! Accuracy of inferred paths against ground truth: the B-cubed precision, recall and
//! F1 of messages grouped into traces, the share of traces reconstructed exactly, and the
//! shares of messages given their true parent (the request they were sent for) and their
//! true cause (WAP5's: the message after which they were sent). A message with no
//! assignment counts as a trace of its own with no parent.

use foldhash::HashMap;

use serde::{Deserialize, Serialize};

use crate::link::Assignment;
use crate::reconcile::MessageId;

/// One message's true trace, parent and cause (as in [`Assignment`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Truth {
    /// The message's id.
    pub id: MessageId,
    /// Its true trace's id (any JSON value).
    pub trace: serde_json::Value,
    /// The request it was sent for (none for a root).
    pub parent: Option<MessageId>,
    /// Absent in sets that give parents only (`truth::latest_causes` finds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<MessageId>,
}

/// How well inferred paths match the ground truth.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Score {
    /// Messages scored (those in the truth).
    pub messages: usize,
    /// B-cubed precision of the messages' grouping into traces.
    pub precision: f64,
    /// B-cubed recall.
    pub recall: f64,
    /// B-cubed F1 (precision's and recall's harmonic mean).
    pub f1: f64,
    /// The share of true traces reconstructed exactly.
    pub exact_traces: f64,
    /// The share of messages given their true parent.
    pub right_parents: f64,
    /// The share of messages given their true cause.
    pub right_causes: f64,
}

/// Scores `assignments` against `truth` (messages not in `truth` are ignored).
pub fn score(truth: &[Truth], assignments: &[Assignment]) -> Score {
    let predicted: HashMap<&MessageId, &Assignment> =
        assignments.iter().map(|a| (&a.id, a)).collect();
    // Group keys: the true trace, and the predicted one (a message alone when missing).
    let true_key = |t: &Truth| t.trace.to_string();
    let pred_key = |t: &Truth| match predicted.get(&t.id) {
        Some(a) => format!("t{}", a.trace),
        None => format!("alone {:?}", t.id),
    };
    let n = truth.len();
    if n == 0 {
        return Score::default();
    }
    let true_keys: Vec<String> = truth.iter().map(true_key).collect();
    let pred_keys: Vec<String> = truth.iter().map(pred_key).collect();
    let g = causeway_analysis::grouping::bcubed(&true_keys, &pred_keys);
    let (mut parents, mut causes) = (0usize, 0usize);
    for t in truth {
        let parent = predicted.get(&t.id).and_then(|a| a.parent.as_ref());
        parents += usize::from(parent == t.parent.as_ref());
        let cause = predicted.get(&t.id).and_then(|a| a.cause.as_ref());
        causes += usize::from(cause == t.cause.as_ref());
    }
    Score {
        messages: n,
        precision: g.precision,
        recall: g.recall,
        f1: g.f1,
        exact_traces: g.exact_groups,
        right_parents: parents as f64 / n as f64,
        right_causes: causes as f64 / n as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn truth(id: i64, trace: &str, parent: Option<i64>) -> Truth {
        Truth {
            id: MessageId::Int(id),
            trace: serde_json::Value::String(trace.into()),
            parent: parent.map(MessageId::Int),
            cause: parent.map(MessageId::Int),
        }
    }

    fn assigned(id: i64, trace: u64, parent: Option<i64>) -> Assignment {
        Assignment {
            id: MessageId::Int(id),
            trace,
            parent: parent.map(MessageId::Int),
            cause: parent.map(MessageId::Int),
            probability: 1.0,
        }
    }

    #[test]
    fn perfect_split_and_merged_assignments_score_as_b_cubed_says() {
        let t = vec![
            truth(1, "a", None),
            truth(2, "a", Some(1)),
            truth(3, "b", None),
            truth(4, "b", Some(3)),
        ];
        let perfect = vec![
            assigned(1, 7, None),
            assigned(2, 7, Some(1)),
            assigned(3, 8, None),
            assigned(4, 8, Some(3)),
        ];
        let s = score(&t, &perfect);
        assert_eq!(
            (s.precision, s.recall, s.f1, s.exact_traces, s.right_parents),
            (1.0, 1.0, 1.0, 1.0, 1.0)
        );
        // Everything in one trace: recall 1, precision 1/2.
        let merged = vec![
            assigned(1, 7, None),
            assigned(2, 7, Some(1)),
            assigned(3, 7, Some(2)),
            assigned(4, 7, Some(3)),
        ];
        let s = score(&t, &merged);
        assert_eq!(
            (
                s.precision,
                s.recall,
                s.exact_traces,
                s.right_parents,
                s.right_causes
            ),
            (0.5, 1.0, 0.0, 0.75, 0.75)
        );
        // Nothing assigned: each message alone.
        let s = score(&t, &[]);
        assert_eq!((s.precision, s.recall), (1.0, 0.5));
        assert!((s.f1 - 2.0 / 3.0).abs() < 1e-12);
    }
}

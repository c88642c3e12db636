//! Path shapes as numbers, counted: each message its sender's and receiver's name as
//! numbers, its children in brackets. Shapes are rendered into names only when reported:
//! with thousands of uncaptured servers (CoDeeN's origins) there are nearly as many
//! shapes as requests, and as strings they took three times the room.

use std::hash::BuildHasher;

use foldhash::HashMap;

use serde::Serialize;

/// Tokens past any name's number: `[`, `]`, ` + ` between roots, and `[...]` where a
/// tree was cut. Names sort before `[` and `[` before `]`, as they do in text, so that
/// children sort as their rendered names would.
const OPEN: u32 = u32::MAX - 3;
const CLOSE: u32 = u32::MAX - 2;
const PLUS: u32 = u32::MAX - 1;
const CUT: u32 = u32::MAX;

/// Trees are drawn this deep; deeper parts become `[...]`.
const MAX_DEPTH: usize = 64;

/// The names shapes use, numbered in sorted order, and each node's number.
pub(crate) struct ShapeNames<'a> {
    names: Vec<&'a str>,
    of_node: Vec<u32>,
}

impl<'a> ShapeNames<'a> {
    /// Numbers the names of nodes `node_names` (several nodes may share a name: every
    /// client is CLIENT).
    pub(crate) fn of(node_names: &[&'a str]) -> ShapeNames<'a> {
        let mut names: Vec<&str> = node_names.to_vec();
        names.sort_unstable();
        names.dedup();
        let of_node = node_names
            .iter()
            .map(|n| names.binary_search(n).map_or(0, |i| i as u32))
            .collect();
        ShapeNames { names, of_node }
    }

    /// The shape of the tree under `root` in `members` (message, parent), by nodes
    /// `src` and `dst` of each message.
    pub(crate) fn shape(
        &self,
        members: &[(u32, Option<u32>)],
        root: u32,
        src: &[u32],
        dst: &[u32],
    ) -> Vec<u32> {
        let mut kids: HashMap<u32, Vec<u32>> = HashMap::default();
        for &(m, p) in members {
            if let Some(p) = p {
                kids.entry(p).or_default().push(m);
            }
        }
        let mut out = Vec::new();
        self.tree(root, &kids, src, dst, 0, &mut out);
        out
    }

    /// Several roots' shapes as one, sorted, joined by ` + `.
    pub(crate) fn joined(mut shapes: Vec<Vec<u32>>) -> Vec<u32> {
        shapes.sort();
        let mut out = Vec::new();
        for (i, s) in shapes.into_iter().enumerate() {
            if i > 0 {
                out.push(PLUS);
            }
            out.extend(s);
        }
        out
    }

    fn tree(
        &self,
        m: u32,
        kids: &HashMap<u32, Vec<u32>>,
        src: &[u32],
        dst: &[u32],
        depth: usize,
        out: &mut Vec<u32>,
    ) {
        let name = |node: &[u32]| {
            node.get(m as usize)
                .and_then(|&n| self.of_node.get(n as usize))
                .copied()
                .unwrap_or(0)
        };
        out.push(name(src));
        out.push(name(dst));
        if depth > MAX_DEPTH {
            out.push(CUT);
            return;
        }
        let Some(children) = kids.get(&m) else {
            return;
        };
        let mut parts: Vec<Vec<u32>> = children
            .iter()
            .map(|&c| {
                let mut part = Vec::new();
                self.tree(c, kids, src, dst, depth + 1, &mut part);
                part
            })
            .collect();
        parts.sort();
        out.push(OPEN);
        for part in parts {
            out.extend(part);
        }
        out.push(CLOSE);
    }

    /// `shape` in names: `src>dst` per message, children in brackets separated by commas.
    pub(crate) fn render(&self, shape: &[u32]) -> String {
        let name = |t: Option<&u32>| {
            t.and_then(|&t| self.names.get(t as usize))
                .copied()
                .unwrap_or("?")
        };
        let mut s = String::new();
        // Whether a message (or a bracketed group) just ended: a next message is its
        // sibling.
        let mut after_message = false;
        let mut tokens = shape.iter();
        while let Some(&t) = tokens.next() {
            match t {
                OPEN => {
                    s.push('[');
                    after_message = false;
                }
                CLOSE => {
                    s.push(']');
                    after_message = true;
                }
                CUT => {
                    s.push_str("[...]");
                    after_message = true;
                }
                PLUS => {
                    s.push_str(" + ");
                    after_message = false;
                }
                src => {
                    if after_message {
                        s.push(',');
                    }
                    s.push_str(name(Some(&src)));
                    s.push('>');
                    s.push_str(name(tokens.next()));
                    after_message = true;
                }
            }
        }
        s
    }
}

/// How often a shape was seen: instances, the sum of their probabilities, the largest.
#[derive(Clone, Copy, Default)]
struct Tally {
    count: u64,
    expected: f64,
    max_probability: f64,
}

/// A path pattern: path instances of one shape.
#[derive(Clone, Debug, Serialize)]
pub struct Pattern {
    /// The shape: `src>dst` per message, children in brackets.
    pub shape: String,
    /// Path instances of this shape.
    pub count: u64,
    /// The sum of the instances' probabilities.
    pub expected: f64,
    /// The most probable instance's probability.
    pub max_probability: f64,
}

/// Path instances counted by shape, each shape's tokens kept once in one arena (of
/// fewer than 2^32 tokens, as there are fewer than 2^32 messages).
#[derive(Default)]
pub(crate) struct PatternCounts {
    tokens: Vec<u32>,
    /// Each shape's tokens: (start, length) in `tokens`.
    shapes: Vec<(u32, u32)>,
    tallies: Vec<Tally>,
    /// The first shape of each hash (its low 32 bits: the chains tell shapes apart);
    /// shapes whose hashes collide are chained in `next`.
    by_hash: HashMap<u32, u32>,
    next: Vec<u32>,
    hasher: foldhash::fast::FixedState,
}

/// The end of a chain of shapes with one hash.
const NO_SHAPE: u32 = u32::MAX;

impl PatternCounts {
    fn tokens_of(&self, shape: u32) -> &[u32] {
        let (start, len) = self.shapes[shape as usize];
        &self.tokens[start as usize..(start + len) as usize]
    }

    /// Counts one instance of `shape` with its probability.
    pub(crate) fn add(&mut self, shape: &[u32], probability: f64) {
        let hash = self.hasher.hash_one(shape) as u32;
        let mut at = self.by_hash.get(&hash).copied().unwrap_or(NO_SHAPE);
        while at != NO_SHAPE && self.tokens_of(at) != shape {
            at = self.next[at as usize];
        }
        if at == NO_SHAPE {
            at = self.shapes.len() as u32;
            self.shapes
                .push((self.tokens.len() as u32, shape.len() as u32));
            self.tokens.extend_from_slice(shape);
            self.tallies.push(Tally::default());
            // The new shape heads its hash's chain.
            self.next
                .push(self.by_hash.insert(hash, at).unwrap_or(NO_SHAPE));
        }
        let tally = &mut self.tallies[at as usize];
        tally.count += 1;
        tally.expected += probability;
        tally.max_probability = tally.max_probability.max(probability);
    }

    /// The patterns in `names`, the most expected first.
    pub(crate) fn into_sorted(self, names: &ShapeNames<'_>) -> Vec<Pattern> {
        let mut patterns: Vec<Pattern> = (0..self.shapes.len() as u32)
            .map(|s| {
                let tally = self.tallies[s as usize];
                Pattern {
                    shape: names.render(self.tokens_of(s)),
                    count: tally.count,
                    expected: tally.expected,
                    max_probability: tally.max_probability,
                }
            })
            .collect();
        patterns.sort_by(|a, b| {
            b.expected
                .total_cmp(&a.expected)
                .then(a.shape.cmp(&b.shape))
        });
        patterns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Members (message, parent), and each message's sender and receiver.
    type Tree = (Vec<(u32, Option<u32>)>, Vec<u32>, Vec<u32>);

    /// Nodes 0..=3: a client, a front end, two back ends; messages 0-3 form
    /// `client>front[front>b,front>a[a>front]]` (kids given out of order).
    fn tree() -> Tree {
        let members = vec![(0, None), (1, Some(0)), (2, Some(0)), (3, Some(2))];
        let src = vec![0, 1, 1, 3];
        let dst = vec![1, 2, 3, 1];
        (members, src, dst)
    }

    #[test]
    fn shapes_render_with_children_sorted_by_name() {
        let names = ShapeNames::of(&["CLIENT", "front", "b", "a"]);
        let (members, src, dst) = tree();
        let shape = names.shape(&members, 0, &src, &dst);
        assert_eq!(
            names.render(&shape),
            "CLIENT>front[front>a[a>front],front>b]"
        );
        let two = ShapeNames::joined(vec![shape.clone(), names.shape(&members, 1, &src, &dst)]);
        assert_eq!(
            names.render(&two),
            "CLIENT>front[front>a[a>front],front>b] + front>b"
        );
    }

    #[test]
    fn nodes_of_one_name_make_one_shape() {
        // Nodes 0 and 4 are both clients.
        let names = ShapeNames::of(&["CLIENT", "front", "b", "a", "CLIENT"]);
        let members = vec![(0, None)];
        let one = names.shape(&members, 0, &[0], &[1]);
        let other = names.shape(&members, 0, &[4], &[1]);
        assert_eq!(one, other);
        assert_eq!(names.render(&one), "CLIENT>front");
    }

    #[test]
    fn deep_trees_are_cut() {
        let n = 100u32;
        let members: Vec<(u32, Option<u32>)> = (0..n).map(|m| (m, m.checked_sub(1))).collect();
        let src: Vec<u32> = (0..n).map(|m| m % 2).collect();
        let dst: Vec<u32> = (0..n).map(|m| (m + 1) % 2).collect();
        let names = ShapeNames::of(&["a", "b"]);
        let text = names.render(&names.shape(&members, 0, &src, &dst));
        assert_eq!(text.matches('[').count(), MAX_DEPTH + 2);
        let closing = "]".repeat(MAX_DEPTH + 1);
        assert!(text.ends_with(&format!("[...]{closing}")), "{text}");
    }

    #[test]
    fn counts_gather_by_shape_through_hash_chains() {
        let names = ShapeNames::of(&["a", "b", "c"]);
        let mut counts = PatternCounts::default();
        let (ab, ac) = (vec![0, 1], vec![0, 2]);
        counts.add(&ab, 0.5);
        counts.add(&ac, 1.0);
        counts.add(&ab, 0.25);
        // A collision: `ac` filed under `ab`'s hash is still told apart.
        let hash = counts.hasher.hash_one(&ab[..]) as u32;
        let ac_shape = counts.by_hash[&(counts.hasher.hash_one(&ac[..]) as u32)];
        counts.next[ac_shape as usize] = counts.by_hash[&hash];
        counts.by_hash.insert(hash, ac_shape);
        counts.add(&ab, 0.25);
        counts.add(&ac, 0.5);
        let patterns = counts.into_sorted(&names);
        let found: Vec<(&str, u64, f64, f64)> = patterns
            .iter()
            .map(|p| (p.shape.as_str(), p.count, p.expected, p.max_probability))
            .collect();
        assert_eq!(found, vec![("a>c", 2, 1.5, 1.0), ("a>b", 3, 1.0, 0.5)]);
    }
}

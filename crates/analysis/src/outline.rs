//! A trace too big to send whole (100 000 spans, a million), as its page shows it: a
//! summary of all of it and, of the tree, only as many rows as a screen can use. Each row
//! that is not opened stands for its whole subtree: how many spans, until when, how many
//! failed; opening it asks for the rows under it, and a span with more children than the
//! budget shows the first of them and a row saying how many more.
//!
//! Rows are chosen breadth first: the top level, then every node whose children still
//! fit the budget, level after level, so a trace of a few big fan-outs opens on its shape
//! rather than on the first branch taken to its leaves. Where no node of a level fits
//! whole, the first shows what fits of its children and a row for the rest.

use std::collections::{BTreeMap, HashMap};

use causeway_model::Trace;
use serde::Serialize;

use crate::critical::{critical_path, self_times, Section};

/// What is below one span (itself included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subtree {
    /// Spans in it.
    pub spans: u64,
    /// The latest end in it, Unix ns.
    pub end: u64,
    /// Spans in it that ended in error.
    pub errors: u64,
}

/// One service across the whole trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceShare {
    /// The service.
    pub service: String,
    /// Its spans.
    pub spans: u64,
    /// Those of them that ended in error.
    pub errors: u64,
    /// Time its spans spent not waiting on a child, ns.
    pub self_ns: u64,
}

/// The spans of one service and name across the whole trace (a row of the span table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanGroup {
    /// The service.
    pub service: String,
    /// The span name.
    pub name: String,
    /// Spans.
    pub count: u64,
    /// Those that ended in error.
    pub errors: u64,
    /// Their self time, ns.
    pub self_ns: u64,
    /// Their durations added, ns.
    pub total_ns: u64,
    /// The longest, ns.
    pub max_ns: u64,
}

/// Span groups an outline lists at most (most self time first): a trace whose span names
/// carry ids has as many groups as spans.
pub const MOST_GROUPS: usize = 1_000;

/// The whole trace in figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Spans.
    pub spans: u64,
    /// The earliest start, Unix ns.
    pub start: u64,
    /// The latest end, Unix ns.
    pub end: u64,
    /// Spans that ended in error.
    pub errors: u64,
    /// Levels of the tree.
    pub depth: u64,
    /// Per service, most spans first.
    pub services: Vec<ServiceShare>,
    /// Per service and span name, most self time first, at most [`MOST_GROUPS`].
    pub groups: Vec<SpanGroup>,
    /// Groups beyond those listed.
    pub groups_omitted: u64,
}

/// One line of the outline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Row {
    /// The span at this index of the trace; `open` when its children follow.
    Span {
        /// Index into `Trace::spans`.
        index: usize,
        /// Whether its children are rows too.
        open: bool,
    },
    /// Children of `parent` (of the roots when `None`) not listed: `count` of them,
    /// from the `from`th on.
    More {
        /// The span whose children these are.
        parent: Option<usize>,
        /// The first one not listed.
        from: usize,
        /// How many are not.
        count: usize,
    },
}

/// How the outline cuts the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tree {
    /// Every span under its parent.
    Spans,
    /// Collapsed to services: a span's children are the spans below it where another
    /// service's work begins (its own service's spans between are folded into it).
    Services,
}

/// The tree collapsed to services: per span (an entry into its service), its entries
/// below and its level among entries.
#[derive(Debug)]
struct ServiceTree {
    children: Vec<Vec<usize>>,
    depths: Vec<u32>,
}

/// A trace indexed for outlines: subtree figures and depth per span, the critical path.
#[derive(Debug)]
pub struct Outline {
    /// The trace (skew-corrected or not, as it was given).
    pub trace: Trace,
    /// Per span, what is below it.
    pub subtrees: Vec<Subtree>,
    /// Per span, its level (roots 0).
    pub depths: Vec<u32>,
    /// The critical path, on the trace's times.
    pub critical: Vec<Section>,
    /// The clock offsets applied to the trace (none when it is on recorded times).
    pub offsets: Vec<crate::skew::ClockOffset>,
    summary: Summary,
    /// Built when first asked for.
    services: std::sync::OnceLock<ServiceTree>,
}

impl Outline {
    /// Indexes `trace`, shifted by clock `offsets` (empty on recorded times): a few passes
    /// over its spans, no recursion.
    pub fn new(trace: Trace, offsets: Vec<crate::skew::ClockOffset>) -> Outline {
        let n = trace.spans.len();
        // Parents before children: the roots, then each level in turn.
        let mut order: Vec<usize> = Vec::with_capacity(n);
        let mut depths = vec![0u32; n];
        order.extend(&trace.roots);
        let mut k = 0;
        while k < order.len() {
            let i = order[k];
            for &c in &trace.children[i] {
                depths[c] = depths[i] + 1;
                order.push(c);
            }
            k += 1;
        }
        let mut subtrees: Vec<Subtree> = trace
            .spans
            .iter()
            .map(|s| Subtree {
                spans: 1,
                end: s.end,
                errors: u64::from(s.is_error()),
            })
            .collect();
        for &i in order.iter().rev() {
            if let Some(p) = trace.parent[i] {
                let below = subtrees[i];
                let up = &mut subtrees[p];
                up.spans += below.spans;
                up.end = up.end.max(below.end);
                up.errors += below.errors;
            }
        }
        let own = self_times(&trace);
        let mut services: BTreeMap<&str, ServiceShare> = BTreeMap::new();
        let mut groups: HashMap<(&str, &str), SpanGroup> = HashMap::new();
        for (s, &self_ns) in trace.spans.iter().zip(&own) {
            let g = groups
                .entry((&*s.service, s.name.as_str()))
                .or_insert_with(|| SpanGroup {
                    service: s.service.to_string(),
                    name: s.name.clone(),
                    count: 0,
                    errors: 0,
                    self_ns: 0,
                    total_ns: 0,
                    max_ns: 0,
                });
            g.count += 1;
            g.errors += u64::from(s.is_error());
            g.self_ns += self_ns;
            g.total_ns += s.duration();
            g.max_ns = g.max_ns.max(s.duration());
            let e = services.entry(&*s.service).or_insert_with(|| ServiceShare {
                service: s.service.to_string(),
                spans: 0,
                errors: 0,
                self_ns: 0,
            });
            e.spans += 1;
            e.errors += u64::from(s.is_error());
            e.self_ns += self_ns;
        }
        let mut services: Vec<ServiceShare> = services.into_values().collect();
        services.sort_by(|a, b| b.spans.cmp(&a.spans).then(a.service.cmp(&b.service)));
        let mut groups: Vec<SpanGroup> = groups.into_values().collect();
        groups.sort_by(|a, b| {
            (b.self_ns, &a.service, &a.name).cmp(&(a.self_ns, &b.service, &b.name))
        });
        let groups_omitted = groups.len().saturating_sub(MOST_GROUPS) as u64;
        groups.truncate(MOST_GROUPS);
        let (start, end) = trace.bounds();
        let summary = Summary {
            spans: n as u64,
            start,
            end,
            errors: subtrees
                .iter()
                .zip(&trace.parent)
                .filter(|(_, p)| p.is_none())
                .map(|(s, _)| s.errors)
                .sum(),
            depth: depths.iter().max().map_or(0, |d| u64::from(*d) + 1),
            services,
            groups,
            groups_omitted,
        };
        let critical = critical_path(&trace);
        Outline {
            trace,
            subtrees,
            depths,
            critical,
            offsets,
            summary,
            services: std::sync::OnceLock::new(),
        }
    }

    fn service_tree(&self) -> &ServiceTree {
        self.services.get_or_init(|| {
            let t = &self.trace;
            let n = t.spans.len();
            let mut entry_of: Vec<usize> = (0..n).collect();
            let mut children = vec![Vec::new(); n];
            let mut depths = vec![0u32; n];
            let mut queue: std::collections::VecDeque<usize> = t.roots.iter().copied().collect();
            while let Some(i) = queue.pop_front() {
                for &c in &t.children[i] {
                    if t.spans[c].service == t.spans[i].service {
                        entry_of[c] = entry_of[i];
                    } else {
                        let e = entry_of[i];
                        children[e].push(c);
                        depths[c] = depths[e] + 1;
                    }
                    queue.push_back(c);
                }
            }
            for kids in &mut children {
                kids.sort_by_key(|&c| (t.spans[c].start, c));
            }
            ServiceTree { children, depths }
        })
    }

    /// Span `i`'s children in `tree`.
    pub fn children(&self, i: usize, tree: Tree) -> &[usize] {
        match tree {
            Tree::Spans => &self.trace.children[i],
            Tree::Services => &self.service_tree().children[i],
        }
    }

    /// Span `i`'s level in `tree` (roots 0).
    pub fn depth(&self, i: usize, tree: Tree) -> u32 {
        match tree {
            Tree::Spans => self.depths[i],
            Tree::Services => self.service_tree().depths[i],
        }
    }

    /// The whole trace in figures.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// At most `budget` rows (and a [`Row::More`] per cut list) below `under` (the roots
    /// when `None`), its children from the `from`th on, in the order the page draws them:
    /// each span followed by its children when it is open.
    pub fn rows(&self, under: Option<usize>, from: usize, budget: usize, tree: Tree) -> Vec<Row> {
        let t = &self.trace;
        let level: &[usize] = under.map_or(&t.roots, |u| self.children(u, tree));
        let top = &level[from.min(level.len())..];
        let shown = top.len().min(budget.max(1));
        let mut left = budget.saturating_sub(shown);
        // Per span opened, how many of its children are rows.
        let mut open: HashMap<usize, usize> = HashMap::new();
        let mut frontier: Vec<usize> = top[..shown].to_vec();
        while !frontier.is_empty() && left > 0 {
            let mut next = Vec::new();
            for &i in &frontier {
                let kids = self.children(i, tree);
                if !kids.is_empty() && kids.len() <= left {
                    left -= kids.len();
                    open.insert(i, kids.len());
                    next.extend_from_slice(kids);
                }
            }
            if next.is_empty() && left >= 2 {
                // No span of this level fits whole: the first that has children shows
                // what fits of them, and a row for the rest.
                if let Some(&i) = frontier
                    .iter()
                    .find(|&&i| !self.children(i, tree).is_empty())
                {
                    open.insert(i, left - 1);
                    left = 0;
                }
            }
            frontier = next;
        }
        let mut rows = Vec::with_capacity(budget.min(t.spans.len()) + 1);
        let mut stack: Vec<Row> = top[..shown]
            .iter()
            .rev()
            .map(|&index| Row::Span { index, open: false })
            .collect();
        while let Some(row) = stack.pop() {
            let Row::Span { index, .. } = row else {
                rows.push(row);
                continue;
            };
            let kids = self.children(index, tree);
            let listed = open.get(&index).copied().unwrap_or(0);
            rows.push(Row::Span {
                index,
                open: listed > 0,
            });
            if listed < kids.len() && listed > 0 {
                stack.push(Row::More {
                    parent: Some(index),
                    from: listed,
                    count: kids.len() - listed,
                });
            }
            stack.extend(
                kids[..listed]
                    .iter()
                    .rev()
                    .map(|&index| Row::Span { index, open: false }),
            );
        }
        if shown < top.len() {
            rows.push(Row::More {
                parent: under,
                from: from + shown,
                count: top.len() - shown,
            });
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_model::{SpanKind, Status};
    use causeway_testkit::TraceBuilder;

    const MS: u64 = 1_000_000;

    /// A batch of `chunks` chunks, each of `rows` rows, each row an INSERT below it; the
    /// first INSERT of the last chunk fails.
    fn batch(chunks: u64, rows: u64) -> Trace {
        let mut b = TraceBuilder::new(7);
        let root = b.root("batch", "b-1", "import", 0, 1_000 * MS);
        for c in 0..chunks {
            let chunk = b.span(
                Some(root),
                "batch",
                "b-1",
                SpanKind::Internal,
                "chunk",
                c * 10 * MS,
                c * 10 * MS + (rows - 1) * 10_000 + 1_000,
            );
            for r in 0..rows {
                let at = c * 10 * MS + r * 10_000;
                let row = b.span(
                    Some(chunk),
                    "worker",
                    "w-1",
                    SpanKind::Internal,
                    "row",
                    at,
                    at + 5_000,
                );
                let insert = b.span(
                    Some(row),
                    "db",
                    "d-1",
                    SpanKind::Client,
                    "INSERT",
                    at,
                    at + 9_000,
                );
                if c == chunks - 1 && r == 0 {
                    b.get(insert).status = Status::Error("full".into());
                }
            }
        }
        b.trace()
    }

    fn names(o: &Outline, rows: &[Row]) -> Vec<String> {
        names_in(o, rows, Tree::Spans)
    }

    fn names_in(o: &Outline, rows: &[Row], tree: Tree) -> Vec<String> {
        rows.iter()
            .map(|r| match *r {
                Row::Span { index, open } => format!(
                    "{}{}{}",
                    "  ".repeat(o.depth(index, tree) as usize),
                    o.trace.spans[index].name,
                    if open { "" } else { " +" }
                ),
                Row::More { count, from, .. } => format!("{count} more from {from}"),
            })
            .collect()
    }

    #[test]
    fn subtrees_and_the_summary_count_every_span() {
        let o = Outline::new(batch(3, 4), vec![]);
        let root = o.trace.roots[0];
        assert_eq!(o.subtrees[root].spans, 1 + 3 * (1 + 4 * 2));
        assert_eq!(o.subtrees[root].errors, 1);
        let chunk = o.trace.children[root][2];
        // The last chunk's last INSERT ends 8 µs after it: the subtree ends with it.
        assert_eq!(o.subtrees[chunk].end, 20 * MS + 3 * 10_000 + 9_000);
        assert_eq!(o.subtrees[chunk].errors, 1);
        let s = o.summary();
        assert_eq!((s.spans, s.errors, s.depth), (28, 1, 4));
        let shares: Vec<(&str, u64)> = s
            .services
            .iter()
            .map(|v| (v.service.as_str(), v.spans))
            .collect();
        assert_eq!(shares, [("db", 12), ("worker", 12), ("batch", 4)]);
        assert_eq!(s.services[0].errors, 1);
        let groups: Vec<(&str, u64, u64)> = s
            .groups
            .iter()
            .map(|g| (g.name.as_str(), g.count, g.errors))
            .collect();
        assert_eq!(groups.len(), 4);
        assert!(groups.contains(&("INSERT", 12, 1)), "{groups:?}");
        let all_self: u64 = s.groups.iter().map(|g| g.self_ns).sum();
        assert_eq!(all_self, s.services.iter().map(|v| v.self_ns).sum::<u64>());
        assert!(s.groups.windows(2).all(|w| w[0].self_ns >= w[1].self_ns));
    }

    #[test]
    fn the_budget_opens_whole_levels_breadth_first() {
        let o = Outline::new(batch(3, 4), vec![]);
        // Root (1) + chunks (3) + rows (12) fit 16; the INSERTs would not.
        assert_eq!(
            names(&o, &o.rows(None, 0, 16, Tree::Spans))[..4],
            ["import", "  chunk", "    row +", "    row +"]
        );
        let rows = o.rows(None, 0, 16, Tree::Spans);
        assert_eq!(rows.len(), 16);
        // A budget for everything opens everything.
        assert_eq!(o.rows(None, 0, 100, Tree::Spans).len(), 28);
        // A small one: the root and its chunks, closed.
        assert_eq!(
            names(&o, &o.rows(None, 0, 4, Tree::Spans)),
            ["import", "  chunk +", "  chunk +", "  chunk +"]
        );
    }

    #[test]
    fn where_no_fan_out_fits_the_first_shows_what_fits() {
        let o = Outline::new(batch(2, 50), vec![]);
        let rows = o.rows(None, 0, 10, Tree::Spans);
        assert_eq!(
            names(&o, &rows),
            [
                "import",
                "  chunk",
                "    row +",
                "    row +",
                "    row +",
                "    row +",
                "    row +",
                "    row +",
                "44 more from 6",
                "  chunk +"
            ]
        );
        let chunk = o.trace.children[o.trace.roots[0]][0];
        assert!(matches!(rows[8], Row::More { parent: Some(p), .. } if p == chunk));
    }

    #[test]
    fn a_fan_out_beyond_the_budget_is_cut_with_a_row_saying_how_many_more() {
        let o = Outline::new(batch(2, 50), vec![]);
        let chunk = o.trace.children[o.trace.roots[0]][1];
        let rows = o.rows(Some(chunk), 0, 10, Tree::Spans);
        assert_eq!(rows.len(), 11);
        assert_eq!(
            rows[10],
            Row::More {
                parent: Some(chunk),
                from: 10,
                count: 40
            }
        );
        // The next page starts where the cut was and ends the list.
        let rest = o.rows(Some(chunk), 10, 100, Tree::Spans);
        assert_eq!(rest.len(), 40 * 2);
        assert!(
            matches!(rest[0], Row::Span { index, open: true } if o.trace.children[chunk][10] == index)
        );
        // Past the end: nothing.
        assert!(o.rows(Some(chunk), 50, 10, Tree::Spans).is_empty());
    }

    #[test]
    fn collapsed_to_services_a_span_stands_for_its_own_service_below_it() {
        let o = Outline::new(batch(2, 2), vec![]);
        // The chunks are batch's own work, folded into the root; each row is the worker's,
        // each INSERT db's.
        assert_eq!(
            names_in(&o, &o.rows(None, 0, 100, Tree::Services), Tree::Services),
            [
                "import",
                "  row",
                "    INSERT +",
                "  row",
                "    INSERT +",
                "  row",
                "    INSERT +",
                "  row",
                "    INSERT +"
            ]
        );
        let root = o.trace.roots[0];
        assert_eq!(o.children(root, Tree::Services).len(), 4);
        assert_eq!(o.children(root, Tree::Spans).len(), 2);
        // Cut lists and the budget work as over all spans.
        let rows = o.rows(Some(root), 1, 2, Tree::Services);
        assert!(
            matches!(
                rows.last(),
                Some(Row::More {
                    from: 3,
                    count: 1,
                    ..
                })
            ),
            "{rows:?}"
        );
    }

    #[test]
    fn a_chain_deeper_than_any_stack_is_outlined() {
        let mut b = TraceBuilder::new(9);
        let mut parent = b.root("deep", "h", "0", 0, 1_000_000);
        for d in 1..200_000u64 {
            parent = b.span(
                Some(parent),
                "deep",
                "h",
                SpanKind::Internal,
                "d",
                d,
                1_000_000 - d,
            );
        }
        let o = Outline::new(b.trace(), vec![]);
        assert_eq!(o.summary().depth, 200_000);
        assert_eq!(o.subtrees[o.trace.roots[0]].spans, 200_000);
        assert_eq!(o.rows(None, 0, 50, Tree::Spans).len(), 50);
    }
}

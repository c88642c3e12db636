//! Log points as templates, mined as Drain does (He et al., ICWS 2017): a line's tokens
//! go down a tree of fixed depth, first by their count, then by the first few tokens
//! (a value goes to the `<*>` child), to a leaf holding a few templates; the line joins
//! the most similar template if at least `similarity` of its tokens agree, generalising
//! the positions that differ into parameters, else it starts a template of its own.
//!
//! Values typed by `tokens` are parameters from the start (`<UUID>`, `<NUM>`), as
//! Drain3's masks make them. Templates change as lines come, so a line's parameter
//! values are read with [`Miner::parameters`] once every line has been added.
//!
//! The tree goes by token count, then the first `depth - 2` tokens; a full node sends new
//! keys to its `<*>` child. A line goes down to the same leaf whenever it is added or
//! found (children are never removed, a full node stays full), so `add_in_leaf` returns
//! the leaf and `find_in_leaf` looks there; a line that every slot of its template agrees
//! with or takes any value at only adds to the template's count. The tree's nodes live in
//! one vector (`Miner::nodes`), a node's children by their places in it, so going down a
//! level is one hash lookup.

use foldhash::HashMap;

use crate::tokens::{Kind, Mask, Token};

/// Drain's defaults (`logpai/logparser`, Drain.py): tree depth 4 (two tokens of
/// prefix), similarity 0.4, 100 children a node.
#[derive(Clone, Debug)]
pub struct Options {
    /// Depth of the parse tree (two less is the prefix of tokens it branches on).
    pub depth: usize,
    /// Least share of tokens a message must share with a template to join it.
    pub similarity: f64,
    /// Most children a tree node keeps.
    pub max_children: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            depth: 4,
            similarity: 0.4,
            max_children: 100,
        }
    }
}

/// A template's position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The log point's own text.
    Text(Box<str>),
    /// A parameter: a value of one kind, or of any (`None`).
    Param(Option<Mask>),
}

/// A log point.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    /// The template's positions: text, or a parameter.
    pub slots: Vec<Slot>,
    /// Lines it took.
    pub count: u64,
}

impl Template {
    /// Its slots, to read.
    pub fn shape(&self) -> Shape<'_> {
        Shape(&self.slots)
    }

    /// The template as text: see [`Shape::text`].
    pub fn text(&self) -> String {
        self.shape().text()
    }

    /// How many of `tokens` agree with this template, how many parameters it has, and
    /// whether it takes them as it is (every slot agrees or takes any value), so that
    /// [`Template::absorb`] would change nothing.
    fn agreement(&self, tokens: &[Token<'_>]) -> (usize, usize, bool) {
        let mut same = 0;
        let mut params = 0;
        let mut any = 0;
        for (slot, t) in self.slots.iter().zip(tokens) {
            match (slot, t.kind) {
                (Slot::Param(Some(m)), Kind::Value(v)) if *m == v => same += 1,
                (Slot::Param(p), _) => {
                    params += 1;
                    any += usize::from(p.is_none());
                }
                (Slot::Text(text), _) if **text == *t.text => same += 1,
                (Slot::Text(_), _) => {}
            }
        }
        (same, params, same + any == self.slots.len())
    }

    /// Generalises the positions where `tokens` differ into parameters.
    fn absorb(&mut self, tokens: &[Token<'_>]) {
        for (slot, t) in self.slots.iter_mut().zip(tokens) {
            let keep = match (&*slot, t.kind) {
                (Slot::Param(None), _) => true,
                (Slot::Param(Some(m)), Kind::Value(v)) => *m == v,
                (Slot::Text(text), _) => **text == *t.text,
                (Slot::Param(Some(_)), _) => false,
            };
            if !keep {
                *slot = Slot::Param(None);
            }
        }
        self.count += 1;
    }
}

/// A template's (or a log point's) slots, and what is read from them.
#[derive(Clone, Copy, Debug)]
pub struct Shape<'a>(pub &'a [Slot]);

impl<'a> Shape<'a> {
    /// The slots as text: tokens separated by spaces, parameters as `<*>` or a typed
    /// placeholder.
    pub fn text(self) -> String {
        let parts: Vec<&str> = self
            .0
            .iter()
            .map(|s| match s {
                Slot::Text(t) => t,
                Slot::Param(None) => "<*>",
                Slot::Param(Some(m)) => m.placeholder(),
            })
            .collect();
        parts.join(" ")
    }

    /// How many parameters there are.
    pub fn parameters(self) -> usize {
        self.0
            .iter()
            .filter(|s| matches!(s, Slot::Param(_)))
            .count()
    }

    /// Each parameter's name: the last word of the text before it (`orderId` in
    /// `orderId : <UUID>`), empty when none comes before.
    pub fn parameter_names(self) -> Vec<&'a str> {
        let mut last_word = "";
        let mut names = Vec::new();
        for slot in self.0 {
            match slot {
                Slot::Text(t) if t.chars().any(char::is_alphanumeric) => last_word = t,
                Slot::Text(_) => {}
                Slot::Param(_) => names.push(last_word),
            }
        }
        names
    }

    /// The slots with `values` at the parameters, in order (`<*>` where one is
    /// missing): a line as its log point printed it, spaced as tokens.
    pub fn render<'v>(self, values: impl IntoIterator<Item = &'v str>) -> String {
        let mut values = values.into_iter();
        let parts: Vec<&str> = self
            .0
            .iter()
            .map(|s| match s {
                Slot::Text(t) => &**t,
                Slot::Param(_) => values.next().unwrap_or("<*>"),
            })
            .collect();
        parts.join(" ")
    }
}

fn slot_of(t: &Token<'_>) -> Slot {
    match t.kind {
        Kind::Value(m) => Slot::Param(Some(m)),
        _ => Slot::Text(t.text.into()),
    }
}

/// The child a variable token goes to.
const ANY: &str = "<*>";

/// A node of the tree, its children by their places in [`Miner::nodes`]: a child is
/// then found by one lookup, where nodes holding nodes took two (a test, then the
/// borrow to go down).
#[derive(Default)]
struct Node {
    children: HashMap<Box<str>, u32>,
    /// At the tree's depth: its place in [`Miner::leaves`].
    leaf: Option<LeafId>,
}

/// A template's number, in the order templates were made.
pub type TemplateId = u32;

/// A leaf of the tree: the templates of lines of one token count and prefix. A line
/// goes down to the same leaf whenever it is added or found (a node's children are
/// never removed, and a full node stays full), so a second pass over the lines may go
/// straight to the leaf the first pass found.
pub type LeafId = u32;

/// The template miner.
pub struct Miner {
    options: Options,
    /// Each token count's first node, in `nodes`.
    by_length: HashMap<usize, u32>,
    nodes: Vec<Node>,
    templates: Vec<Template>,
    /// Each leaf's templates.
    leaves: Vec<Vec<TemplateId>>,
}

impl Miner {
    /// An empty miner.
    pub fn new(options: Options) -> Miner {
        Miner {
            options,
            by_length: HashMap::default(),
            nodes: Vec::new(),
            templates: Vec::new(),
            leaves: Vec::new(),
        }
    }

    /// A new node's place in `nodes`.
    fn new_node(&mut self) -> u32 {
        self.nodes.push(Node::default());
        self.nodes.len() as u32 - 1
    }

    /// The templates mined so far, by id.
    pub fn templates(&self) -> &[Template] {
        &self.templates
    }

    /// The tokens the tree branches on: the first `depth - 2`.
    fn prefix_len(&self, tokens: usize) -> usize {
        self.options.depth.saturating_sub(2).min(tokens)
    }

    /// Adds a line's tokens; returns the template it joined or started.
    pub fn add(&mut self, tokens: &[Token<'_>]) -> TemplateId {
        self.add_in_leaf(tokens).0
    }

    /// [`Miner::add`], with the leaf the line went to.
    pub fn add_in_leaf(&mut self, tokens: &[Token<'_>]) -> (TemplateId, LeafId) {
        let prefix = self.prefix_len(tokens.len());
        let max_children = self.options.max_children;
        let mut node = match self.by_length.get(&tokens.len()) {
            Some(&node) => node,
            None => {
                let node = self.new_node();
                self.by_length.insert(tokens.len(), node);
                node
            }
        };
        for t in &tokens[..prefix] {
            let key = if t.kind.is_variable() { ANY } else { t.text };
            let children = &self.nodes[node as usize].children;
            // A full node sends a token it has no child for to its variable child.
            let (key, child) = match children.get(key) {
                Some(&child) => (key, Some(child)),
                None if children.len() < max_children => (key, None),
                None => (ANY, children.get(ANY).copied()),
            };
            node = match child {
                Some(child) => child,
                None => {
                    let child = self.new_node();
                    self.nodes[node as usize].children.insert(key.into(), child);
                    child
                }
            };
        }
        let node = &mut self.nodes[node as usize];
        let leaf = *node.leaf.get_or_insert_with(|| {
            self.leaves.push(Vec::new());
            self.leaves.len() as LeafId - 1
        });
        let candidates = &mut self.leaves[leaf as usize];
        let id = match best(&self.templates, candidates, tokens, self.options.similarity) {
            Some((id, fits)) => {
                let template = &mut self.templates[id as usize];
                // Most lines fit their template as it is: nothing to compare again.
                if fits {
                    template.count += 1;
                } else {
                    template.absorb(tokens);
                }
                id
            }
            None => {
                let id = self.templates.len() as TemplateId;
                self.templates.push(Template {
                    slots: tokens.iter().map(slot_of).collect(),
                    count: 1,
                });
                candidates.push(id);
                id
            }
        };
        (id, leaf)
    }

    /// The template a line's tokens match now (without changing any).
    pub fn find(&self, tokens: &[Token<'_>]) -> Option<TemplateId> {
        let mut node = self
            .nodes
            .get(*self.by_length.get(&tokens.len())? as usize)?;
        for t in &tokens[..self.prefix_len(tokens.len())] {
            let key = if t.kind.is_variable() { ANY } else { t.text };
            let child = node.children.get(key).or_else(|| node.children.get(ANY))?;
            node = self.nodes.get(*child as usize)?;
        }
        self.find_in_leaf(node.leaf?, tokens)
    }

    /// The template a line's tokens match now in `leaf`, the one [`Miner::add_in_leaf`]
    /// gave for them.
    pub fn find_in_leaf(&self, leaf: LeafId, tokens: &[Token<'_>]) -> Option<TemplateId> {
        best(
            &self.templates,
            self.leaves.get(leaf as usize)?,
            tokens,
            self.options.similarity,
        )
        .map(|(id, _)| id)
    }

    /// The templates of `leaf`.
    pub fn leaf_templates(&self, leaf: LeafId) -> &[TemplateId] {
        self.leaves.get(leaf as usize).map_or(&[], Vec::as_slice)
    }

    /// The template a line's tokens match and the values at its parameters, in order.
    pub fn parameters<'a>(&self, tokens: &[Token<'a>]) -> Option<(TemplateId, Vec<&'a str>)> {
        let id = self.find(tokens)?;
        let mut values = Vec::new();
        self.values(id, tokens, &mut values);
        Some((id, values))
    }

    /// The values of `tokens` at template `id`'s parameters, in order, into `out`
    /// (cleared first).
    pub fn values<'a>(&self, id: TemplateId, tokens: &[Token<'a>], out: &mut Vec<&'a str>) {
        self.values_of(id, tokens.iter().map(|t| t.text), out);
    }

    /// [`Miner::values`], from the texts of a line's tokens.
    pub fn values_of<'a>(
        &self,
        id: TemplateId,
        texts: impl Iterator<Item = &'a str>,
        out: &mut Vec<&'a str>,
    ) {
        out.clear();
        out.extend(
            self.templates
                .get(id as usize)
                .map_or(&[][..], |t| &t.slots[..])
                .iter()
                .zip(texts)
                .filter(|(s, _)| matches!(s, Slot::Param(_)))
                .map(|(_, text)| text),
        );
    }
}

/// Of `candidates`, the template most like `tokens` (more parameters break ties), if
/// at least `similarity` of the tokens agree, and whether it takes them as it is.
fn best(
    templates: &[Template],
    candidates: &[u32],
    tokens: &[Token<'_>],
    similarity: f64,
) -> Option<(TemplateId, bool)> {
    let mut found: Option<(usize, usize, TemplateId, bool)> = None;
    for &id in candidates {
        let (same, params, fits) = templates[id as usize].agreement(tokens);
        if found.is_none_or(|(s, p, ..)| (same, params) > (s, p)) {
            found = Some((same, params, id, fits));
        }
    }
    let (same, _, id, fits) = found?;
    // An empty line agrees with the empty template.
    let enough = tokens.is_empty() || same as f64 >= similarity * tokens.len() as f64;
    enough.then_some((id, fits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::tokenize;
    use proptest::prelude::*;

    fn mine(lines: &[&str]) -> (Miner, Vec<TemplateId>) {
        let mut miner = Miner::new(Options::default());
        let mut tokens = Vec::new();
        let ids = lines
            .iter()
            .map(|l| {
                tokenize(l, &mut tokens);
                miner.add(&tokens)
            })
            .collect();
        (miner, ids)
    }

    #[test]
    fn lines_of_one_log_point_share_a_template_with_their_values_as_parameters() {
        let lines = [
            "Receiving block blk_1 src: /10.0.0.1:50010 dest: /10.0.0.2:50010",
            "[checkSecurityAboutOrder][Security Info Get][AccountId:4d2a46c7-71cb-4cf1-b5bb-b68406d9da6f]",
            "Receiving block blk_2 src: /10.0.0.3:50010 dest: /10.0.0.4:50010",
            "[checkSecurityAboutOrder][Security Info Get][AccountId:5e3b57d8-82dc-4cf1-b5bb-b68406d9da70]",
            "Verification succeeded for blk_2",
        ];
        let (miner, ids) = mine(&lines);
        assert_eq!(ids, vec![0, 1, 0, 1, 2]);
        assert_eq!(miner.templates().len(), 3);
        assert_eq!(
            miner.templates()[0].text(),
            "Receiving block <*> src : <PATH> : <NUM> dest : <PATH> : <NUM>"
        );
        assert_eq!(miner.templates()[0].count, 2);
        assert_eq!(
            miner.templates()[1].text(),
            "[ checkSecurityAboutOrder ][ Security Info Get ][ AccountId : <UUID> ]"
        );
        let mut tokens = Vec::new();
        tokenize(lines[3], &mut tokens);
        assert_eq!(
            miner.parameters(&tokens),
            Some((1, vec!["5e3b57d8-82dc-4cf1-b5bb-b68406d9da70"]))
        );
        tokenize(lines[0], &mut tokens);
        assert_eq!(
            miner.parameters(&tokens),
            Some((0, vec!["blk_1", "/10.0.0.1", "50010", "/10.0.0.2", "50010"]))
        );
    }

    #[test]
    fn too_different_lines_of_one_length_make_templates_of_their_own() {
        // Two of six tokens agree: under Drain's 0.4.
        let (miner, ids) = mine(&["a b c d e f", "a b x y z w", "a b c d e q"]);
        assert_eq!(ids, vec![0, 1, 0]);
        assert_eq!(miner.templates()[0].text(), "a b c d e <*>");
    }

    #[test]
    fn a_typed_parameter_given_another_kind_of_value_takes_any() {
        // A number, then a word with a digit that is not one, then a number again.
        let (miner, ids) = mine(&["took 5 ms", "took 5x ms", "took 7 ms", "took 0x1f ms"]);
        assert_eq!(ids, vec![0, 0, 0, 0]);
        assert_eq!(miner.templates()[0].text(), "took <*> ms");
        assert_eq!(miner.templates()[0].count, 4);
        let (miner, _) = mine(&["took 5 ms", "took 7 ms"]);
        assert_eq!(miner.templates()[0].text(), "took <NUM> ms");
        assert_eq!(miner.templates()[0].count, 2);
    }

    #[test]
    fn a_full_node_sends_new_prefixes_to_its_wildcard_child() {
        let mut miner = Miner::new(Options {
            max_children: 2,
            ..Options::default()
        });
        let lines: Vec<String> = ["alpha", "beta", "gamma", "delta"]
            .iter()
            .map(|first| format!("{first} started work"))
            .collect();
        let mut tokens = Vec::new();
        for line in &lines {
            tokenize(line, &mut tokens);
            miner.add(&tokens);
        }
        // gamma and delta share the wildcard child, and agree on two of three tokens.
        assert_eq!(miner.templates().len(), 3);
        assert_eq!(miner.templates()[2].text(), "<*> started work");
        tokenize("omega started work", &mut tokens);
        assert_eq!(miner.find(&tokens), Some(2));
    }

    proptest! {
        #[test]
        fn every_line_added_is_found_again_in_a_template_like_it(
            lines in proptest::collection::vec("[a-c0-9 :\\[\\]=.-]{0,30}", 1..40),
            max_children in 1usize..4,
        ) {
            // Few children a node, so that full nodes send lines to `<*>`.
            let mut miner = Miner::new(Options { max_children, ..Options::default() });
            let mut tokens = Vec::new();
            let leaves: Vec<LeafId> = lines
                .iter()
                .map(|l| {
                    tokenize(l, &mut tokens);
                    miner.add_in_leaf(&tokens).1
                })
                .collect();
            for (line, &leaf) in lines.iter().zip(&leaves) {
                tokenize(line, &mut tokens);
                // The leaf a line was added in is where it is found again.
                prop_assert_eq!(miner.find_in_leaf(leaf, &tokens), miner.find(&tokens));
                let (id, values) = miner.parameters(&tokens).expect("a template");
                let template = &miner.templates()[id as usize];
                prop_assert_eq!(template.slots.len(), tokens.len());
                // Templates only generalise, so the one a line joined may lose to another
                // of its leaf later; whichever it finds agrees on enough of it.
                let (same, ..) = template.agreement(&tokens);
                prop_assert!(tokens.is_empty() || same as f64 >= 0.4 * tokens.len() as f64);
                let params = template.slots.iter().filter(|s| matches!(s, Slot::Param(_))).count();
                prop_assert_eq!(values.len(), params);
            }
            let total: u64 = miner.templates().iter().map(|t| t.count).sum();
            prop_assert_eq!(total, lines.len() as u64);
        }
    }
}

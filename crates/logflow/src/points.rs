//! Log points as stitching keys on them: a mined template, told apart further by the
//! query keys of the URLs at its parameters, with each query value a parameter of its own.
//!
//! A web framework's access line (`started processing request uri=/get?key=k`) is one
//! macro call, so one template: a URL is one value to the miner, as it is to Drain. But
//! `/get?key=k` and `/put?key=k&value=v` are different routes, coming at their own places
//! in a request's lines, and a query's values are often what links a request's lines (an
//! order id handed to the next service). So a line's log point is its template with each
//! URL spelled out: the path, then each query key as text and its value as a parameter.
//!
//! What is shown and scored as templates is Drain's (`causeway-bench templates`);
//! `causeway logs --json` lists both, `templates` and `points` with each one's template. A
//! point keeps slots of its own only when it spells out a URL; a plain point reads its
//! template's (`Corpus::point_shape`), since templates can be thousands of slots long.

use std::fmt::Write;

use foldhash::HashMap;

use crate::drain::{Shape, Slot, Template, TemplateId};
use crate::tokens::{classify, Mask};

/// A log point's number, in the order points were first seen.
pub type PointId = u32;

/// A log point: a template with its URLs' query keys.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// The template it refines.
    pub template: TemplateId,
    /// The template's slots with each URL parameter spelled out; none when no parameter
    /// is a URL with a query, the template's slots being the point's (a template can be
    /// thousands of slots long, and most points are plain).
    spelled: Option<Box<[Slot]>>,
    /// Its lines.
    pub count: u64,
}

impl Point {
    /// Its slots, `templates` being those it was made from.
    pub fn shape<'a>(&'a self, templates: &'a [Template]) -> Shape<'a> {
        match &self.spelled {
            Some(slots) => Shape(slots),
            None => Shape(
                templates
                    .get(self.template as usize)
                    .map_or(&[][..], |t| &t.slots[..]),
            ),
        }
    }
}

/// The log points seen so far.
#[derive(Default)]
pub struct Points {
    points: Vec<Point>,
    /// A template's point when no parameter is a URL with a query.
    plain: Vec<Option<PointId>>,
    /// Points with URLs, by template, then by their URLs' query names (the key
    /// [`Points::with_query`] writes).
    with_queries: HashMap<TemplateId, HashMap<String, PointId>>,
    /// The key being written, kept to reuse its allocation.
    key: String,
}

/// A query's part: its name, and its value after `=` if it has one.
type QueryPart<'a> = (&'a str, Option<&'a str>);

/// The path and the query's parts of a parameter's value that is a path with a query
/// string.
fn url(value: &str) -> Option<(&str, impl Iterator<Item = QueryPart<'_>>)> {
    // The slash first: most values are not paths, and it is one byte to look at.
    if !value.starts_with('/') {
        return None;
    }
    let (path, query) = value.split_once('?')?;
    let parts = query.split('&').map(|part| match part.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (part, None),
    });
    Some((path, parts))
}

/// Whether a query's name is a value itself (`?42=x`), a parameter of the log point.
fn name_is_value(name: &str) -> bool {
    classify(name).is_variable()
}

impl Points {
    /// Every log point, by id.
    pub fn all(&self) -> &[Point] {
        &self.points
    }

    /// The point of a line of `template` (number `id`) with `values` at its parameters;
    /// `values` becomes the point's values: each URL's path, then its query's values.
    pub fn point(
        &mut self,
        id: TemplateId,
        template: &Template,
        values: &mut Vec<&str>,
    ) -> PointId {
        let point = if values.iter().any(|v| url(v).is_some()) {
            self.with_query(id, template, values)
        } else {
            let at = id as usize;
            if self.plain.len() <= at {
                self.plain.resize(at + 1, None);
            }
            match self.plain[at] {
                Some(p) => p,
                None => {
                    let p = self.push(id, None);
                    self.plain[at] = Some(p);
                    p
                }
            }
        };
        self.points[point as usize].count += 1;
        point
    }

    fn with_query(
        &mut self,
        id: TemplateId,
        template: &Template,
        values: &mut Vec<&str>,
    ) -> PointId {
        // The key: each URL parameter's number and its query's names. Only compared: a
        // URL token ends at `|` and a name at `&` or `=`, so two keys are equal only
        // for the same names.
        self.key.clear();
        // The values spelled out after the values as given, which then make way: no
        // vector made per line.
        let given = values.len();
        for k in 0..given {
            let value = values[k];
            let Some((path, parts)) = url(value) else {
                values.push(value);
                continue;
            };
            // Into the key's own buffer, rather than a string made per line; a digit
            // as a character, without the formatting machinery.
            match u8::try_from(k).ok().filter(|&k| k < 10) {
                Some(digit) => self.key.push(char::from(b'0' + digit)),
                None => {
                    let _ = write!(self.key, "{k}");
                }
            }
            values.push(path);
            for (name, value) in parts {
                self.key.push('&');
                if name_is_value(name) {
                    self.key.push_str("<*>");
                    values.push(name);
                } else {
                    self.key.push_str(name);
                }
                if let Some(v) = value {
                    self.key.push('=');
                    values.push(v);
                }
            }
            self.key.push('|');
        }
        let known = self
            .with_queries
            .get(&id)
            .and_then(|points| points.get(self.key.as_str()))
            .copied();
        let p = match known {
            Some(p) => p,
            None => {
                let p = self.push(id, Some(spell_out(template, &values[..given]).into()));
                self.with_queries
                    .entry(id)
                    .or_default()
                    .insert(self.key.clone(), p);
                p
            }
        };
        values.drain(..given);
        p
    }

    fn push(&mut self, template: TemplateId, spelled: Option<Box<[Slot]>>) -> PointId {
        let p = self.points.len() as PointId;
        self.points.push(Point {
            template,
            spelled,
            count: 0,
        });
        p
    }
}

/// `template`'s slots with each parameter whose value in `values` is a URL spelled
/// out: the path, then each query name as text (a parameter if it is a value itself)
/// and each query value a parameter.
fn spell_out(template: &Template, values: &[&str]) -> Vec<Slot> {
    let mut slots = Vec::with_capacity(template.slots.len());
    let mut values = values.iter();
    for slot in &template.slots {
        let Some((_, parts)) = matches!(slot, Slot::Param(_))
            .then(|| values.next())
            .flatten()
            .and_then(|v| url(v))
        else {
            slots.push(slot.clone());
            continue;
        };
        slots.push(Slot::Param(Some(Mask::Path)));
        for (n, (name, value)) in parts.enumerate() {
            slots.push(Slot::Text(if n == 0 { "?" } else { "&" }.into()));
            if name_is_value(name) {
                slots.push(Slot::Param(None));
            } else if !name.is_empty() {
                slots.push(Slot::Text(name.into()));
            }
            if value.is_some() {
                slots.push(Slot::Text("=".into()));
                slots.push(Slot::Param(None));
            }
        }
    }
    slots
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain::{Miner, Options};
    use crate::tokens::tokenize;

    /// Each line's template, point, point text and values.
    fn points_of(lines: &[&str]) -> Vec<(TemplateId, PointId, String, Vec<String>)> {
        let mut miner = Miner::new(Options::default());
        let mut tokens = Vec::new();
        for line in lines {
            tokenize(line, &mut tokens);
            miner.add(&tokens);
        }
        let mut points = Points::default();
        lines
            .iter()
            .map(|line| {
                tokenize(line, &mut tokens);
                let (template, mut values) = miner.parameters(&tokens).expect("a template");
                let point =
                    points.point(template, &miner.templates()[template as usize], &mut values);
                let shape = points.all()[point as usize].shape(miner.templates());
                (
                    template,
                    point,
                    shape.text(),
                    values.into_iter().map(String::from).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn one_template_is_a_point_per_route_with_each_query_value_a_parameter() {
        let found = points_of(&[
            "started request method=GET uri=/get?key=product-7",
            "started request method=PUT uri=/put?key=rec-5&value=picks-for-5",
            "started request method=GET uri=/get?key=rec-9",
            "started request method=GET uri=/health",
        ]);
        // One macro call wrote them all: one template.
        assert!(found.iter().all(|f| f.0 == found[0].0));
        let points: Vec<PointId> = found.iter().map(|f| f.1).collect();
        assert_eq!(points, [0, 1, 0, 2]);
        assert_eq!(
            found[0].2,
            "started request method = <*> uri = <PATH> ? key = <*>"
        );
        assert_eq!(found[0].3, ["GET", "/get", "product-7"]);
        assert_eq!(
            found[1].2,
            "started request method = <*> uri = <PATH> ? key = <*> & value = <*>"
        );
        assert_eq!(found[1].3, ["PUT", "/put", "rec-5", "picks-for-5"]);
        assert_eq!(found[3].2, "started request method = <*> uri = <PATH>");
        assert_eq!(found[3].3, ["GET", "/health"]);
    }

    #[test]
    fn query_names_that_are_values_and_bare_flags_keep_their_place() {
        let found = points_of(&["fetch /a?42=x&debug&=y done", "fetch /b?43=z&debug&=w done"]);
        assert_eq!(found[0].1, found[1].1);
        assert_eq!(found[0].2, "fetch <PATH> ? <*> = <*> & debug & = <*> done");
        assert_eq!(found[1].3, ["/b", "43", "z", "w"]);
        // Each value has its parameter.
        assert_eq!(found[0].2.matches('<').count(), found[0].3.len());
    }
}

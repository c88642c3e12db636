//! Log points as stitching keys on them: a mined template, told apart further by the
//! query keys of the URLs at its parameters, with each query value a parameter of its own.
//!
//! A web framework's access line (`started processing request uri=/get?key=k`) is one
//! macro call, so one template: a URL is one value to the miner, as it is to Drain. But
//! `/get?key=k` and `/put?key=k&value=v` are different routes, coming at their own places
//! in a request's lines, and a query's values are often what links a request's lines (an
//! order id handed to the next service). So a line's log point is its template with each
//! URL spelled out: the path, then each query key as text and its value as a parameter.

use foldhash::HashMap;

use crate::drain::{Shape, Slot, Template, TemplateId};
use crate::tokens::{classify, Mask};

/// A log point's number, in the order points were first seen.
pub type PointId = u32;

/// A log point: a template with its URLs' query keys.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
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
    /// Points with URLs, by template and their URLs' query keys.
    with_queries: HashMap<(TemplateId, String), PointId>,
}

/// Whether a parameter's value is a path with a query string.
fn has_query(value: &str) -> bool {
    value.starts_with('/') && value.contains('?')
}

impl Points {
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
        let point = if values.iter().any(|v| has_query(v)) {
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

    fn with_query<'a>(
        &mut self,
        id: TemplateId,
        template: &Template,
        values: &mut Vec<&'a str>,
    ) -> PointId {
        // The key: each URL parameter's number and its query's keys.
        let mut key = String::new();
        let mut spelled: Vec<&'a str> = Vec::with_capacity(values.len() + 4);
        for (k, &value) in values.iter().enumerate() {
            if !has_query(value) {
                spelled.push(value);
                continue;
            }
            key.push_str(&k.to_string());
            let (path, query) = value.split_once('?').unwrap_or((value, ""));
            spelled.push(path);
            key.push('?');
            for (n, part) in query.split('&').enumerate() {
                let (name, value) = match part.split_once('=') {
                    Some((n, v)) => (n, Some(v)),
                    None => (part, None),
                };
                if n > 0 {
                    key.push('&');
                }
                if classify(name).is_variable() {
                    key.push_str("<*>");
                    spelled.push(name);
                } else {
                    key.push_str(name);
                }
                if let Some(v) = value {
                    key.push('=');
                    spelled.push(v);
                }
            }
            key.push('|');
        }
        *values = spelled;
        if let Some(&p) = self.with_queries.get(&(id, key.clone())) {
            return p;
        }
        let slots = spell_out(template, &key);
        let p = self.push(id, Some(slots.into()));
        self.with_queries.insert((id, key), p);
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

/// `template`'s slots with its URL parameters spelled out as `key` (from
/// [`Points::with_query`]) says: `k?name=&name|` per URL, `k` the parameter's number.
/// A URL token ends at `|` and a query name at `&` or `=`, so the key reads back whole.
fn spell_out(template: &Template, key: &str) -> Vec<Slot> {
    let urls: HashMap<usize, &str> = key
        .split('|')
        .filter_map(|url| {
            let at = url.find('?')?;
            Some((url[..at].parse().ok()?, &url[at + 1..]))
        })
        .collect();
    let mut slots = Vec::with_capacity(template.slots.len());
    let mut param = 0;
    for slot in &template.slots {
        let Slot::Param(_) = slot else {
            slots.push(slot.clone());
            continue;
        };
        match urls.get(&param) {
            None => slots.push(slot.clone()),
            Some(query) => {
                slots.push(Slot::Param(Some(Mask::Path)));
                for (n, part) in query.split('&').enumerate() {
                    slots.push(Slot::Text(if n == 0 { "?" } else { "&" }.into()));
                    let (name, value) = match part.strip_suffix('=') {
                        Some(name) => (name, true),
                        None => (part, false),
                    };
                    match name {
                        "" => {}
                        "<*>" => slots.push(Slot::Param(None)),
                        _ => slots.push(Slot::Text(name.into())),
                    }
                    if value {
                        slots.push(Slot::Text("=".into()));
                        slots.push(Slot::Param(None));
                    }
                }
            }
        }
        param += 1;
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

//! What a query may be before it is planned. Planning is not interruptible and grows
//! faster than the query (a 120-way join took 11 s to plan, 2 000 terms of one sum 20 s),
//! so the text (64 KiB), the relations it reads (64) and the expressions it holds (5 000)
//! are bounded first.

use std::ops::ControlFlow;

use datafusion::sql::parser::{DFParser, Statement};
use datafusion::sql::sqlparser::ast::{Expr, ObjectName, Visit, Visitor};
use datafusion::sql::sqlparser::dialect::GenericDialect;

/// Longest query text.
pub(crate) const MAX_QUERY_BYTES: usize = 64 << 10;
/// Most relations (tables and views read, each time read) in one query.
pub(crate) const MAX_RELATIONS: usize = 64;
/// Most expressions (each operator, function, column and literal) in one query.
pub(crate) const MAX_EXPRESSIONS: usize = 5_000;

#[derive(Default)]
struct Counts {
    relations: usize,
    expressions: usize,
}

impl Visitor for Counts {
    type Break = String;

    fn pre_visit_relation(&mut self, _: &ObjectName) -> ControlFlow<String> {
        self.relations += 1;
        if self.relations > MAX_RELATIONS {
            return ControlFlow::Break(format!(
                "the query reads more than {MAX_RELATIONS} relations, the most one may"
            ));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, _: &Expr) -> ControlFlow<String> {
        self.expressions += 1;
        if self.expressions > MAX_EXPRESSIONS {
            return ControlFlow::Break(format!(
                "the query holds more than {MAX_EXPRESSIONS} expressions, the most one may"
            ));
        }
        ControlFlow::Continue(())
    }
}

/// Refuses a query past the bounds, saying which. A query that does not parse passes:
/// the planner says what is wrong with it. Runs on a SQL thread (its deep stack).
pub(crate) fn check(sql: &str) -> Result<(), String> {
    if sql.len() > MAX_QUERY_BYTES {
        return Err(format!(
            "the query is {} bytes, over the {MAX_QUERY_BYTES} one may be",
            sql.len()
        ));
    }
    let Ok(statements) = DFParser::parse_sql_with_dialect(sql, &GenericDialect {}) else {
        return Ok(());
    };
    let mut counts = Counts::default();
    for statement in &statements {
        if let Statement::Statement(s) = statement {
            if let ControlFlow::Break(why) = s.visit(&mut counts) {
                return Err(why);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_past_the_bounds_are_refused_before_planning() {
        // As queries run: on a thread with the SQL threads' stack (a sum of thousands of
        // terms is a tree that deep).
        std::thread::Builder::new()
            .stack_size(super::super::SQL_STACK_BYTES)
            .spawn(bounds_hold)
            .unwrap()
            .join()
            .unwrap();
    }

    fn bounds_hold() {
        assert!(check("SELECT a.x FROM spans a JOIN spans b ON a.x = b.x").is_ok());
        let joins: String = (1..=MAX_RELATIONS)
            .map(|i| format!(", spans t{i}"))
            .collect();
        let e = check(&format!("SELECT 1 FROM spans t0{joins}")).unwrap_err();
        assert!(e.contains("relations"), "{e}");
        let sum = vec!["1"; MAX_EXPRESSIONS].join("+");
        let e = check(&format!("SELECT {sum}")).unwrap_err();
        assert!(e.contains("expressions"), "{e}");
        let e = check(&"x".repeat(MAX_QUERY_BYTES + 1)).unwrap_err();
        assert!(e.contains("bytes"), "{e}");
        // Not SQL: left for the planner to explain.
        assert!(check("SELEKT").is_ok());
    }
}

//! SQL over the `spans` view, passed to ClickHouse read-only and within the same limits
//! as the embedded store's SQL: a row limit, a time limit and a memory limit.
//!
//! The query goes with `database` set (so `spans` is the view), `readonly=2`,
//! `max_execution_time`, `max_result_rows` one past the row limit with
//! `result_overflow_mode=break`, `max_memory_usage`, and `JSONCompact` output with 64-bit
//! integers unquoted; rows past the limit are cut and `truncated` set. ClickHouse's
//! refusals (writes under `readonly`, syntax) come back as `StoreError::Sql` (400 with its
//! message); an unreachable node as `StoreError::Remote` (503 with `Retry-After`).

use causeway_store::sql::{SqlColumn, SqlLimits, SqlResult};
use causeway_store::StoreError;

use crate::store::ClickHouseStore;

impl ClickHouseStore {
    /// Runs one read-only query in ClickHouse's dialect, `spans` naming the view of every
    /// span; rows past `limits.max_rows` are cut and the result says so.
    pub fn sql(&self, query: &str, limits: SqlLimits) -> Result<SqlResult, StoreError> {
        let query = query.trim().trim_end_matches(';');
        if query.is_empty() {
            return Err(StoreError::Sql("the query is empty".into()));
        }
        let seconds = limits.timeout.as_secs().max(1).to_string();
        let rows = (limits.max_rows + 1).to_string();
        let result_bytes = limits.max_result_bytes.to_string();
        let memory = limits.max_memory.to_string();
        let settings = [
            ("database", self.endpoint().database.as_str()),
            // Reads only; settings may still be given per query (2, not 1).
            ("readonly", "2"),
            ("max_execution_time", seconds.as_str()),
            ("max_result_rows", rows.as_str()),
            ("max_result_bytes", result_bytes.as_str()),
            ("result_overflow_mode", "break"),
            ("max_memory_usage", memory.as_str()),
            ("default_format", "JSONCompact"),
            ("output_format_json_quote_64bit_integers", "0"),
        ];
        let answer = self
            .client()
            .run_with(query, &settings)
            .map_err(|e| match e {
                // ClickHouse refused the query: the user's error, with its message.
                StoreError::Remote { reason, .. } if reason.starts_with("HTTP ") => {
                    StoreError::Sql(reason)
                }
                other => other,
            })?;
        parse_answer(&answer, limits.max_rows)
    }
}

#[derive(serde::Deserialize)]
struct Answer {
    meta: Vec<Column>,
    data: Vec<Vec<serde_json::Value>>,
}

#[derive(serde::Deserialize)]
struct Column {
    name: String,
    #[serde(rename = "type")]
    data_type: String,
}

fn parse_answer(answer: &[u8], max_rows: usize) -> Result<SqlResult, StoreError> {
    let answer: Answer = serde_json::from_slice(answer).map_err(|e| {
        StoreError::Sql(format!(
            "the answer is not JSONCompact ({e}); leave out FORMAT in the query"
        ))
    })?;
    let truncated = answer.data.len() > max_rows;
    let mut rows = answer.data;
    rows.truncate(max_rows);
    Ok(SqlResult {
        columns: answer
            .meta
            .into_iter()
            .map(|c| SqlColumn {
                name: c.name,
                data_type: c.data_type,
            })
            .collect(),
        rows,
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_past_the_limit_is_cut_and_says_so() {
        let answer = br#"{"meta":[{"name":"n","type":"UInt64"}],"data":[[1],[2],[3]],"rows":3}"#;
        let r = parse_answer(answer, 2).unwrap();
        assert_eq!(
            r.rows,
            vec![vec![serde_json::json!(1)], vec![serde_json::json!(2)]]
        );
        assert!(r.truncated);
        assert_eq!(r.columns[0].data_type, "UInt64");
        assert!(!parse_answer(answer, 3).unwrap().truncated);
        assert!(parse_answer(b"1\t2\n", 3).is_err());
    }
}

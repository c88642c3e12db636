//! A query's watch, over every operator of its plan: each batch an operator hands on is
//! checked against the query's time limit, its cancellation and a size bound, so a query
//! stops within one batch of its limit (a join producing rows for minutes inside one
//! operator included) and no operator hands on a batch larger than the query may hold.

use std::any::Any;
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures_util::Stream;

/// Why a watched query stops, and how large a batch may be.
#[derive(Debug)]
pub(crate) struct Watch {
    deadline: Instant,
    timeout: Duration,
    cancelled: AtomicBool,
    max_batch_bytes: usize,
}

/// The message of a query stopped at its time limit.
pub(crate) const STOPPED: &str = "the query was stopped at its time limit";

impl Watch {
    pub(crate) fn new(timeout: Duration, max_batch_bytes: usize) -> Watch {
        Watch {
            deadline: Instant::now() + timeout,
            timeout,
            cancelled: AtomicBool::new(false),
            max_batch_bytes,
        }
    }

    /// Stops the query at its next batch (its caller has gone).
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    fn check(&self, batch: Option<&RecordBatch>) -> Result<()> {
        if self.cancelled.load(Ordering::Relaxed) || Instant::now() >= self.deadline {
            self.cancelled.store(true, Ordering::Relaxed);
            return Err(DataFusionError::Execution(format!(
                "{STOPPED} ({:?})",
                self.timeout
            )));
        }
        if let Some(b) = batch {
            let bytes: usize = b.columns().iter().map(|c| logical_bytes(c.as_ref())).sum();
            if bytes > self.max_batch_bytes {
                return Err(DataFusionError::ResourcesExhausted(format!(
                    "an operator made a batch of {bytes} bytes ({} rows), over the {} bytes \
                     one batch may take (an eighth of the SQL memory limit)",
                    b.num_rows(),
                    self.max_batch_bytes
                )));
            }
        }
        Ok(())
    }
}

/// The bytes an array's values take, as a slice sees them (a slice of a large array
/// counts only its own rows).
pub(crate) fn logical_bytes(a: &dyn Array) -> usize {
    let n = a.len();
    match a.data_type() {
        DataType::Utf8 => {
            let s = a.as_string::<i32>();
            let o = s.value_offsets();
            (o[n] - o[0]) as usize + 4 * n
        }
        DataType::LargeUtf8 => {
            let s = a.as_string::<i64>();
            let o = s.value_offsets();
            (o[n] - o[0]) as usize + 8 * n
        }
        DataType::Binary => {
            let s = a.as_binary::<i32>();
            let o = s.value_offsets();
            (o[n] - o[0]) as usize + 4 * n
        }
        DataType::LargeBinary => {
            let s = a.as_binary::<i64>();
            let o = s.value_offsets();
            (o[n] - o[0]) as usize + 8 * n
        }
        // A view's low 32 bits are its value's length.
        DataType::Utf8View => {
            a.as_string_view()
                .views()
                .iter()
                .map(|v| *v as u32 as usize)
                .sum::<usize>()
                + 16 * n
        }
        DataType::BinaryView => {
            a.as_binary_view()
                .views()
                .iter()
                .map(|v| *v as u32 as usize)
                .sum::<usize>()
                + 16 * n
        }
        DataType::List(_) => {
            let l = a.as_list::<i32>();
            let o = l.value_offsets();
            let (from, to) = (o[0] as usize, o[n] as usize);
            logical_bytes(l.values().slice(from, to - from).as_ref()) + 4 * n
        }
        DataType::LargeList(_) => {
            let l = a.as_list::<i64>();
            let o = l.value_offsets();
            let (from, to) = (o[0] as usize, o[n] as usize);
            logical_bytes(l.values().slice(from, to - from).as_ref()) + 8 * n
        }
        DataType::Map(_, _) => {
            let m = a.as_map();
            let o = m.value_offsets();
            let (from, to) = (o[0] as usize, o[n] as usize);
            let entries = m.entries().slice(from, to - from);
            entries
                .columns()
                .iter()
                .map(|c| logical_bytes(c.as_ref()))
                .sum::<usize>()
                + 4 * n
        }
        DataType::Struct(_) => a
            .as_struct()
            .columns()
            .iter()
            .map(|c| logical_bytes(c.as_ref()))
            .sum(),
        other => match other.primitive_width() {
            Some(width) => width * n,
            None => a.get_array_memory_size(),
        },
    }
}

/// Every operator of `plan` under `watch`.
pub(crate) fn watch_plan(
    plan: Arc<dyn ExecutionPlan>,
    watch: &Arc<Watch>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let children = plan
        .children()
        .into_iter()
        .map(|c| watch_plan(c.clone(), watch))
        .collect::<Result<Vec<_>>>()?;
    let plan = if children.is_empty() {
        plan
    } else {
        plan.with_new_children(children)?
    };
    Ok(Arc::new(Watched {
        input: plan,
        watch: watch.clone(),
    }))
}

/// An operator under a watch: it shows, plans and runs as the operator does, and its
/// output is checked batch by batch.
#[derive(Debug)]
struct Watched {
    input: Arc<dyn ExecutionPlan>,
    watch: Arc<Watch>,
}

impl DisplayAs for Watched {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        self.input.fmt_as(t, f)
    }
}

impl ExecutionPlan for Watched {
    fn name(&self) -> &str {
        self.input.name()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn properties(&self) -> &PlanProperties {
        self.input.properties()
    }

    // The operator's own children (each watched): the plan reads as it would unwatched.
    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        self.input.children()
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(Watched {
            input: self.input.clone().with_new_children(children)?,
            watch: self.watch.clone(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        self.watch.check(None)?;
        Ok(Box::pin(WatchedStream {
            input: self.input.execute(partition, context)?,
            watch: self.watch.clone(),
            failed: false,
        }))
    }

    fn metrics(&self) -> Option<datafusion::physical_plan::metrics::MetricsSet> {
        self.input.metrics()
    }
}

struct WatchedStream {
    input: SendableRecordBatchStream,
    watch: Arc<Watch>,
    failed: bool,
}

impl Stream for WatchedStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        if let Err(e) = self.watch.check(None) {
            self.failed = true;
            return Poll::Ready(Some(Err(e)));
        }
        let polled = self.input.as_mut().poll_next(cx);
        if let Poll::Ready(Some(Ok(batch))) = &polled {
            if let Err(e) = self.watch.check(Some(batch)) {
                self.failed = true;
                return Poll::Ready(Some(Err(e)));
            }
        }
        polled
    }
}

impl RecordBatchStream for WatchedStream {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};

    #[test]
    fn a_slice_counts_only_its_own_rows() {
        let big = StringArray::from_iter_values((0..1000).map(|i| format!("value-{i:04}")));
        let all = logical_bytes(&big);
        assert_eq!(all, 1000 * 10 + 4 * 1000);
        assert_eq!(logical_bytes(&big.slice(10, 5)), 5 * 10 + 4 * 5);
        let ints = Int64Array::from_iter_values(0..100);
        assert_eq!(logical_bytes(&ints.slice(0, 10)), 80);
    }
}

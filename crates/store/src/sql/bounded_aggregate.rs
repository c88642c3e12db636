//! Aggregates that build one value from every row of a group (`string_agg`, `array_agg`)
//! run wrapped: once a group's value passes the query's value limit the query is
//! refused. The memory pool sees what they hold, but not the copies their growth makes
//! (a string doubled, the partial results joined), which took several times the pool.

use std::any::Any;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, ReversedUDAF, Signature,
};
use datafusion::prelude::SessionContext;

const WRAPPED: [&str; 2] = ["string_agg", "array_agg"];

/// Registers the wrapped aggregates in place of the originals.
pub(crate) fn register(ctx: &SessionContext, max_value: usize) {
    let functions = ctx.state().aggregate_functions().clone();
    for name in WRAPPED {
        if let Some(inner) = functions.get(name) {
            ctx.register_udaf(AggregateUDF::new_from_impl(BoundedAggregate {
                inner: inner.as_ref().clone(),
                max_value,
            }));
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct BoundedAggregate {
    inner: AggregateUDF,
    max_value: usize,
}

impl BoundedAggregate {
    fn wrap(&self, inner: Arc<dyn AggregateUDFImpl>) -> Arc<dyn AggregateUDFImpl> {
        Arc::new(BoundedAggregate {
            inner: AggregateUDF::new_from_shared_impl(inner),
            max_value: self.max_value,
        })
    }

    fn bounded(&self, inner: Box<dyn Accumulator>) -> Box<dyn Accumulator> {
        Box::new(BoundedAccumulator {
            inner,
            name: self.inner.name().to_string(),
            max_value: self.max_value,
        })
    }
}

impl AggregateUDFImpl for BoundedAggregate {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.inner().return_type(arg_types)
    }

    fn return_field(&self, arg_fields: &[FieldRef]) -> Result<FieldRef> {
        self.inner.inner().return_field(arg_fields)
    }

    fn is_nullable(&self) -> bool {
        self.inner.inner().is_nullable()
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(self.bounded(self.inner.inner().accumulator(args)?))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.inner.inner().state_fields(args)
    }

    // Groups accumulators are left at their default (none): each group gets a bounded
    // accumulator of its own.

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(self.bounded(self.inner.inner().create_sliding_accumulator(args)?))
    }

    fn with_beneficial_ordering(
        self: Arc<Self>,
        beneficial_ordering: bool,
    ) -> Result<Option<Arc<dyn AggregateUDFImpl>>> {
        Ok(self
            .inner
            .inner()
            .clone()
            .with_beneficial_ordering(beneficial_ordering)?
            .map(|inner| self.wrap(inner)))
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.inner.inner().order_sensitivity()
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        match self.inner.inner().reverse_expr() {
            ReversedUDAF::Reversed(udf) => ReversedUDAF::Reversed(Arc::new(
                AggregateUDF::new_from_shared_impl(self.wrap(udf.inner().clone())),
            )),
            other => other,
        }
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.inner().coerce_types(arg_types)
    }

    fn default_value(&self, data_type: &DataType) -> Result<ScalarValue> {
        self.inner.inner().default_value(data_type)
    }

    fn supports_null_handling_clause(&self) -> bool {
        self.inner.inner().supports_null_handling_clause()
    }

    fn supports_within_group_clause(&self) -> bool {
        self.inner.inner().supports_within_group_clause()
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.inner().documentation()
    }
}

#[derive(Debug)]
struct BoundedAccumulator {
    inner: Box<dyn Accumulator>,
    name: String,
    max_value: usize,
}

impl BoundedAccumulator {
    fn check(&self) -> Result<()> {
        let held = self.inner.size();
        if held > self.max_value {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "{}() would make a value of more than {held} bytes, over the {} bytes one \
                 value {}",
                self.name,
                self.max_value,
                super::bounded::WOULD_MAKE
            )));
        }
        Ok(())
    }
}

impl Accumulator for BoundedAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.update_batch(values)?;
        self.check()
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        self.inner.evaluate()
    }

    fn size(&self) -> usize {
        self.inner.size()
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        self.inner.state()
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.inner.merge_batch(states)?;
        self.check()
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.inner.retract_batch(values)
    }

    fn supports_retract_batch(&self) -> bool {
        self.inner.supports_retract_batch()
    }
}

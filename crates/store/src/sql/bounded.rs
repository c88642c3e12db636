//! SQL functions that can make a value far larger than their arguments (`repeat`, `lpad`,
//! `rpad`, `replace`, `regexp_replace`, `overlay`, `concat`, `concat_ws`, `array_repeat`,
//! `array_resize`, `range`, `generate_series`) run wrapped: before one runs, the size of
//! what it would make is worked out from its arguments, row by row, and a value past the
//! query's value limit (or a batch past its batch limit) is refused instead of made.
//! What grows only by adding its inputs (`||`, `array_concat`) is caught a batch later by
//! the watch over every operator ([`super::guard`]).

use std::any::Any;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Int64Type, IntervalUnit, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use datafusion::common::{DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature,
};
use datafusion::prelude::SessionContext;

use super::guard::logical_bytes;

/// Words every refusal of a value or batch limit holds.
pub(crate) const WOULD_MAKE: &str = "may take";

/// How a wrapped function's result grows from its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Growth {
    /// `repeat(text, n)`.
    Repeat,
    /// `lpad`/`rpad(text, n, fill)`: n characters.
    Pad,
    /// `replace(text, from, to)`.
    Replace,
    /// `regexp_replace(text, pattern, replacement, flags)`.
    RegexpReplace,
    /// `overlay(text placing other ...)`.
    Overlay,
    /// `concat(...)`.
    Concat,
    /// `concat_ws(separator, ...)`.
    ConcatWs,
    /// `array_repeat(element, n)`.
    ArrayRepeat,
    /// `array_resize(array, n, fill)`.
    ArrayResize,
    /// `range`/`generate_series(start, stop, step)` as a list.
    Series,
}

const WRAPPED: [(&str, Growth); 11] = [
    ("repeat", Growth::Repeat),
    ("lpad", Growth::Pad),
    ("rpad", Growth::Pad),
    ("replace", Growth::Replace),
    ("regexp_replace", Growth::RegexpReplace),
    ("overlay", Growth::Overlay),
    ("concat", Growth::Concat),
    ("concat_ws", Growth::ConcatWs),
    ("array_repeat", Growth::ArrayRepeat),
    ("array_resize", Growth::ArrayResize),
    ("range", Growth::Series),
];

/// Registers the wrapped versions of the functions that can grow (in place of the
/// originals, under the same names and aliases).
pub(crate) fn register(ctx: &SessionContext, max_value: usize, max_batch: usize) {
    let functions = ctx.state().scalar_functions().clone();
    let series = [("generate_series", Growth::Series)];
    for (name, growth) in WRAPPED.iter().chain(&series) {
        if let Some(inner) = functions.get(*name) {
            ctx.register_udf(ScalarUDF::new_from_impl(Bounded {
                inner: inner.as_ref().clone(),
                growth: *growth,
                max_value,
                max_batch,
            }));
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct Bounded {
    inner: ScalarUDF,
    growth: Growth,
    max_value: usize,
    max_batch: usize,
}

/// A row's value of a text or binary argument, if it is one.
fn text(arg: &ColumnarValue, row: usize) -> Option<std::borrow::Cow<'_, [u8]>> {
    use std::borrow::Cow;
    match arg {
        ColumnarValue::Scalar(s) => match s {
            ScalarValue::Utf8(Some(v))
            | ScalarValue::LargeUtf8(Some(v))
            | ScalarValue::Utf8View(Some(v)) => Some(Cow::Borrowed(v.as_bytes())),
            ScalarValue::Binary(Some(v))
            | ScalarValue::LargeBinary(Some(v))
            | ScalarValue::BinaryView(Some(v)) => Some(Cow::Borrowed(v)),
            _ => None,
        },
        ColumnarValue::Array(a) => {
            let row = row.min(a.len().checked_sub(1)?);
            if a.is_null(row) {
                return None;
            }
            Some(Cow::Borrowed(match a.data_type() {
                DataType::Utf8 => a.as_string::<i32>().value(row).as_bytes(),
                DataType::LargeUtf8 => a.as_string::<i64>().value(row).as_bytes(),
                DataType::Utf8View => a.as_string_view().value(row).as_bytes(),
                DataType::Binary => a.as_binary::<i32>().value(row),
                DataType::LargeBinary => a.as_binary::<i64>().value(row),
                DataType::BinaryView => a.as_binary_view().value(row),
                _ => return None,
            }))
        }
    }
}

/// The bytes a row's value of any argument takes (its text, its list's values, or the
/// width of a number written out).
fn size(arg: &ColumnarValue, row: usize) -> u128 {
    if let Some(t) = text(arg, row) {
        return t.len() as u128;
    }
    match arg {
        ColumnarValue::Scalar(s) if s.is_null() => 0,
        ColumnarValue::Scalar(s) => match s.to_array_of_size(1) {
            Ok(a) => logical_bytes(a.as_ref()).max(20) as u128,
            Err(_) => 20,
        },
        ColumnarValue::Array(a) if a.is_empty() => 0,
        ColumnarValue::Array(a) => {
            let row = row.min(a.len() - 1);
            logical_bytes(a.slice(row, 1).as_ref()).max(20) as u128
        }
    }
}

/// A row's value of an integer, date, timestamp or interval argument, as an integer
/// (dates and times in nanoseconds), if it is one.
fn number(arg: &ColumnarValue, row: usize) -> Option<i128> {
    let array: ArrayRef = match arg {
        ColumnarValue::Scalar(s) => s.to_array_of_size(1).ok()?,
        ColumnarValue::Array(a) => a.clone(),
    };
    let row = match arg {
        ColumnarValue::Scalar(_) => 0,
        ColumnarValue::Array(_) => row.min(array.len().checked_sub(1)?),
    };
    if array.is_null(row) {
        return None;
    }
    const DAY: i128 = 86_400_000_000_000;
    Some(match array.data_type() {
        DataType::Int64 => array.as_primitive::<Int64Type>().value(row) as i128,
        DataType::Date32 => array.as_primitive::<Date32Type>().value(row) as i128 * DAY,
        DataType::Timestamp(unit, _) => match unit {
            TimeUnit::Second => {
                array.as_primitive::<TimestampSecondType>().value(row) as i128 * 1_000_000_000
            }
            TimeUnit::Millisecond => {
                array.as_primitive::<TimestampMillisecondType>().value(row) as i128 * 1_000_000
            }
            TimeUnit::Microsecond => {
                array.as_primitive::<TimestampMicrosecondType>().value(row) as i128 * 1_000
            }
            TimeUnit::Nanosecond => {
                array.as_primitive::<TimestampNanosecondType>().value(row) as i128
            }
        },
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            let v = array
                .as_primitive::<arrow::datatypes::IntervalMonthDayNanoType>()
                .value(row);
            v.months as i128 * 30 * DAY + v.days as i128 * DAY + v.nanoseconds as i128
        }
        DataType::Interval(IntervalUnit::DayTime) => {
            let v = array
                .as_primitive::<arrow::datatypes::IntervalDayTimeType>()
                .value(row);
            v.days as i128 * DAY + v.milliseconds as i128 * 1_000_000
        }
        DataType::Interval(IntervalUnit::YearMonth) => {
            array
                .as_primitive::<arrow::datatypes::IntervalYearMonthType>()
                .value(row) as i128
                * 30
                * DAY
        }
        _ => {
            let v = ScalarValue::try_from_array(&array, row).ok()?;
            match v.cast_to(&DataType::Int64).ok()? {
                ScalarValue::Int64(Some(n)) => n as i128,
                _ => return None,
            }
        }
    })
}

fn count(arg: Option<&ColumnarValue>, row: usize) -> u128 {
    arg.and_then(|a| number(a, row)).unwrap_or(0).max(0) as u128
}

impl Growth {
    /// The most bytes the function makes for `row` of `args`.
    fn bound(self, args: &[ColumnarValue], row: usize) -> u128 {
        let size_of = |i: usize| args.get(i).map_or(0, |a| size(a, row));
        match self {
            Growth::Repeat => size_of(0).saturating_mul(count(args.get(1), row)),
            // n characters of at most 4 bytes each.
            Growth::Pad => count(args.get(1), row).saturating_mul(4),
            Growth::Replace => {
                let (s, from, to) = (size_of(0), size_of(1), size_of(2));
                let matches = s / from.max(1) + 1;
                s.saturating_add(matches.saturating_mul(to))
            }
            Growth::RegexpReplace => {
                let s = size_of(0);
                let replacement = args.get(2).and_then(|a| text(a, row));
                let to = replacement.as_ref().map_or(0, |r| r.len() as u128);
                // Each match may repeat the text it captured as often as the
                // replacement names a group.
                let groups = replacement.as_ref().map_or(0, |r| {
                    r.iter().filter(|&&b| b == b'$' || b == b'\\').count() as u128
                });
                let per_match = to.saturating_add(groups.saturating_mul(s));
                s.saturating_add((s + 1).saturating_mul(per_match))
            }
            Growth::Overlay => size_of(0).saturating_add(size_of(1)),
            Growth::Concat => (0..args.len()).map(size_of).fold(0, u128::saturating_add),
            Growth::ConcatWs => {
                let parts = (1..args.len()).map(size_of).fold(0, u128::saturating_add);
                parts.saturating_add(size_of(0).saturating_mul(args.len() as u128))
            }
            Growth::ArrayRepeat => size_of(0)
                .max(8)
                .saturating_mul(count(args.get(1), row))
                .saturating_add(8),
            Growth::ArrayResize => {
                let element = if args.len() > 2 { size_of(2).max(8) } else { 8 };
                size_of(0).saturating_add(element.saturating_mul(count(args.get(1), row)))
            }
            Growth::Series => {
                let n = |i: usize| args.get(i).and_then(|a| number(a, row));
                let (start, stop, step) = match args.len() {
                    1 => (Some(0), n(0), Some(1)),
                    2 => (n(0), n(1), Some(1)),
                    _ => (n(0), n(1), n(2)),
                };
                match (start, stop, step) {
                    (Some(a), Some(b), Some(s)) if s != 0 => {
                        let values = (b - a).unsigned_abs() / s.unsigned_abs() + 1;
                        values.saturating_mul(8)
                    }
                    _ => 0,
                }
            }
        }
    }
}

impl Bounded {
    /// Refuses a call whose results would pass the limits.
    fn check(&self, args: &ScalarFunctionArgs) -> Result<()> {
        let rows = if args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)))
        {
            1
        } else {
            args.number_rows
        };
        let mut total: u128 = 0;
        for row in 0..rows {
            let bytes = self.growth.bound(&args.args, row);
            if bytes > self.max_value as u128 {
                return Err(DataFusionError::ResourcesExhausted(format!(
                    "{}() would make a value of {bytes} bytes, over the {} bytes one value \
                     may take",
                    self.inner.name(),
                    self.max_value
                )));
            }
            total = total.saturating_add(bytes);
        }
        if total > self.max_batch as u128 {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "{}() would make {total} bytes for {rows} rows, over the {} bytes one batch \
                 may take",
                self.inner.name(),
                self.max_batch
            )));
        }
        Ok(())
    }
}

impl ScalarUDFImpl for Bounded {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn schema_name(&self, args: &[datafusion::prelude::Expr]) -> Result<String> {
        self.inner.inner().schema_name(args)
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.inner().return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<arrow::datatypes::FieldRef> {
        self.inner.inner().return_field_from_args(args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        self.check(&args)?;
        self.inner.inner().invoke_with_args(args)
    }

    // `simplify` is left at its default: the originals simplify into calls of
    // themselves, which would escape the wrapper.

    fn short_circuits(&self) -> bool {
        self.inner.inner().short_circuits()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.inner().coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.inner().documentation()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use std::sync::Arc;

    fn scalar_text(s: &str) -> ColumnarValue {
        ColumnarValue::Scalar(ScalarValue::Utf8(Some(s.into())))
    }

    fn scalar_int(n: i64) -> ColumnarValue {
        ColumnarValue::Scalar(ScalarValue::Int64(Some(n)))
    }

    #[test]
    fn bounds_follow_the_arguments_row_by_row() {
        let texts: ArrayRef = Arc::new(StringArray::from(vec!["ab", "abcd"]));
        let counts: ArrayRef = Arc::new(Int64Array::from(vec![3, -1]));
        let args = [
            ColumnarValue::Array(texts.clone()),
            ColumnarValue::Array(counts),
        ];
        assert_eq!(Growth::Repeat.bound(&args, 0), 6);
        assert_eq!(Growth::Repeat.bound(&args, 1), 0);
        assert_eq!(
            Growth::Repeat.bound(&[scalar_text("x"), scalar_int(1_000_000_000)], 0),
            1_000_000_000
        );
        assert_eq!(
            Growth::Pad.bound(&[scalar_text("x"), scalar_int(10)], 0),
            40
        );
        // Every character matched by an empty pattern gets the replacement.
        assert_eq!(
            Growth::Replace.bound(&[scalar_text("abc"), scalar_text(""), scalar_text("--")], 0),
            3 + 4 * 2
        );
        assert_eq!(
            Growth::Concat.bound(&[ColumnarValue::Array(texts), scalar_text("xyz")], 1),
            7
        );
        assert_eq!(
            Growth::Series.bound(&[scalar_int(0), scalar_int(1_000_000_000_000)], 0),
            8_000_000_000_008
        );
        assert_eq!(
            Growth::Series.bound(&[scalar_int(10), scalar_int(0), scalar_int(-5)], 0),
            3 * 8
        );
        assert_eq!(
            Growth::RegexpReplace.bound(
                &[scalar_text("aaaa"), scalar_text("a"), scalar_text("b")],
                0
            ),
            4 + 5
        );
        assert_eq!(
            Growth::RegexpReplace.bound(
                &[scalar_text("aaaa"), scalar_text("(a)"), scalar_text("$1$1")],
                0
            ),
            4 + 5 * (4 + 2 * 4)
        );
    }
}

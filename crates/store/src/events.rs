//! The `events` column: each span's events as a list of (time, name, attributes), so that
//! a block keeps every event's time, name and attribute in columns of their own. Names of
//! many events then compress together, times by their small steps, attribute keys and
//! repeated values by dictionary; inside the per-span `detail` they did not (a log line
//! stored as an event took 17 bytes in the detail and as search text, 8 here).
//!
//! ```text
//! events := list of struct {
//!     time: i64,          -- ns since the event before (the first: since the span's start)
//!     name: utf8,
//!     attributes: list of struct { key: utf8, text: utf8?, int: i64? },
//! }
//! ```
//!
//! A string attribute has `text`, an integer `int`; an attribute of another type has
//! neither, and its value is kept in the detail (see [`crate::detail`]), keyed by the
//! event's and the attribute's positions.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayBuilder, ArrayRef, AsArray, Int64Array, Int64Builder, ListArray, StringArray,
    StringBuilder, StructArray,
};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, Fields, Int64Type};
use causeway_model::{Event, KeyValue, Span, Value};

/// The column's name.
pub(crate) const COLUMN: &str = "events";
/// Leaves of the column whose values seldom repeat (see the block's writer properties),
/// by their path in the file.
pub(crate) const UNIQUE_LEAVES: [&[&str]; 1] = [&[
    "events",
    "list",
    "item",
    "attributes",
    "list",
    "item",
    "int",
]];
/// Leaves of the column that hold events' times and names: what search and the index
/// leave out.
pub(crate) const TIME_AND_NAME_LEAVES: [&str; 2] = ["time", "name"];
/// Leaves of the column that hold attributes: all that search and the index read, and
/// what reads of spans' paths leave out.
pub(crate) const ATTRIBUTE_LEAVES: [&str; 3] = ["key", "text", "int"];

fn attribute_fields() -> Fields {
    Fields::from(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("text", DataType::Utf8, true),
        Field::new("int", DataType::Int64, true),
    ])
}

fn event_fields() -> Fields {
    Fields::from(vec![
        Field::new("time", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new(
            "attributes",
            DataType::List(list_item(attribute_fields())),
            false,
        ),
    ])
}

/// True when an attribute's value lives in the column (text or integer) rather than the
/// detail.
pub(crate) fn in_column(value: &Value) -> bool {
    matches!(value, Value::Str(_) | Value::I64(_))
}

/// Builds the column for a run of spans.
pub(crate) struct EventsBuilder {
    span_offsets: Vec<i32>,
    time: Vec<i64>,
    name: StringBuilder,
    event_offsets: Vec<i32>,
    key: StringBuilder,
    text: StringBuilder,
    int: Int64Builder,
}

impl EventsBuilder {
    pub fn new() -> EventsBuilder {
        EventsBuilder {
            span_offsets: vec![0],
            time: Vec::new(),
            name: StringBuilder::new(),
            event_offsets: vec![0],
            key: StringBuilder::new(),
            text: StringBuilder::new(),
            int: Int64Builder::new(),
        }
    }

    /// Appends a span's events; with `whole`, none (the detail holds the whole span).
    pub fn push(&mut self, span: &Span, whole: bool) {
        if !whole {
            let mut previous = span.start;
            for e in &span.events {
                self.time.push(e.time.wrapping_sub(previous) as i64);
                previous = e.time;
                self.name.append_value(&e.name);
                for kv in &e.attributes {
                    self.key.append_value(&kv.key);
                    match &kv.value {
                        Value::Str(s) => {
                            self.text.append_value(s);
                            self.int.append_null();
                        }
                        Value::I64(n) => {
                            self.text.append_null();
                            self.int.append_value(*n);
                        }
                        _ => {
                            self.text.append_null();
                            self.int.append_null();
                        }
                    }
                }
                self.event_offsets.push(offset(self.key.len()));
            }
        }
        self.span_offsets.push(offset(self.time.len()));
    }

    /// The column; `spans` rows (the number of spans pushed).
    pub fn finish(mut self, spans: usize) -> Result<ArrayRef, arrow::error::ArrowError> {
        if self.span_offsets.len() != spans + 1 {
            return Err(arrow::error::ArrowError::InvalidArgumentError(format!(
                "events of {} spans for {spans} rows",
                self.span_offsets.len() - 1
            )));
        }
        let attributes = list_of_structs(
            attribute_fields(),
            self.event_offsets,
            vec![
                Arc::new(self.key.finish()),
                Arc::new(self.text.finish()),
                Arc::new(self.int.finish()),
            ],
        )?;
        let events = list_of_structs(
            event_fields(),
            self.span_offsets,
            vec![
                Arc::new(Int64Array::from(self.time)),
                Arc::new(self.name.finish()),
                Arc::new(attributes),
            ],
        )?;
        Ok(Arc::new(events))
    }
}

/// A list whose entries are structs of `fields` with the given columns.
fn list_of_structs(
    fields: Fields,
    offsets: Vec<i32>,
    columns: Vec<ArrayRef>,
) -> Result<ListArray, arrow::error::ArrowError> {
    let entries = StructArray::try_new(fields.clone(), columns, None)?;
    ListArray::try_new(
        list_item(fields),
        OffsetBuffer::new(offsets.into()),
        Arc::new(entries),
        None,
    )
}

fn list_item(fields: Fields) -> Arc<Field> {
    Arc::new(Field::new_list_field(DataType::Struct(fields), false))
}

/// Offsets are i32 in Arrow's lists; a batch holds far fewer entries than that.
fn offset(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The column of one batch as read, with whichever leaves were read: times and names
/// (spans' paths), attributes (search), or all of them.
pub(crate) struct EventColumns<'a> {
    span_offsets: &'a [i32],
    time: Option<&'a Int64Array>,
    name: Option<&'a StringArray>,
    attributes: Option<AttributeColumns<'a>>,
}

struct AttributeColumns<'a> {
    event_offsets: &'a [i32],
    key: &'a StringArray,
    text: &'a StringArray,
    int: &'a arrow::array::PrimitiveArray<Int64Type>,
}

impl<'a> EventColumns<'a> {
    /// The column of `batch`; `None` when the batch has none (blocks written before it
    /// kept events in the detail).
    pub fn of(batch: &'a arrow::array::RecordBatch) -> Result<Option<EventColumns<'a>>, String> {
        let Some(column) = batch.column_by_name(COLUMN) else {
            return Ok(None);
        };
        let list = column.as_list_opt::<i32>().ok_or("events is not a list")?;
        let events = list
            .values()
            .as_struct_opt()
            .ok_or("events' entries are not structs")?;
        let time = match events.column_by_name("time") {
            Some(c) => Some(
                c.as_primitive_opt::<Int64Type>()
                    .ok_or("event times are not i64")?,
            ),
            None => None,
        };
        let name = match events.column_by_name("name") {
            Some(c) => Some(c.as_string_opt::<i32>().ok_or("event names are not text")?),
            None => None,
        };
        let attributes = match events.column_by_name("attributes") {
            Some(c) => {
                let list = c
                    .as_list_opt::<i32>()
                    .ok_or("event attributes are not a list")?;
                let fields = list
                    .values()
                    .as_struct_opt()
                    .ok_or("event attributes are not structs")?;
                let text = |n: &str| {
                    fields
                        .column_by_name(n)
                        .and_then(|c| c.as_string_opt::<i32>())
                        .ok_or_else(|| format!("event attribute {n} is missing or not text"))
                };
                Some(AttributeColumns {
                    event_offsets: list.value_offsets(),
                    key: text("key")?,
                    text: text("text")?,
                    int: fields
                        .column_by_name("int")
                        .and_then(|c| c.as_primitive_opt::<Int64Type>())
                        .ok_or("event attribute int is missing or not i64")?,
                })
            }
            None => None,
        };
        Ok(Some(EventColumns {
            span_offsets: list.value_offsets(),
            time,
            name,
            attributes,
        }))
    }

    fn span_events(&self, row: usize) -> Result<std::ops::Range<usize>, String> {
        let (Some(&a), Some(&b)) = (self.span_offsets.get(row), self.span_offsets.get(row + 1))
        else {
            return Err(format!("row {row} has no events entry"));
        };
        Ok(a.max(0) as usize..b.max(a).max(0) as usize)
    }

    /// The events of row `row`, whose span starts at `start`. Attributes are given only
    /// when they were read; those whose value the column lacks are taken from
    /// `typed(event, attribute)`.
    pub fn events(
        &self,
        row: usize,
        start: u64,
        mut typed: impl FnMut(usize, usize) -> Option<Value>,
    ) -> Result<Vec<Event>, String> {
        let range = self.span_events(row)?;
        let (Some(time), Some(name)) = (self.time, self.name) else {
            return Err("event times or names were not read".into());
        };
        let mut previous = start;
        let mut out = Vec::with_capacity(range.len());
        for (n, k) in range.enumerate() {
            if k >= time.len() || k >= name.len() {
                return Err(format!("row {row}: event {n} is past the column's end"));
            }
            previous = previous.wrapping_add(time.value(k) as u64);
            let mut event = Event {
                time: previous,
                name: name.value(k).to_string(),
                attributes: Vec::new(),
            };
            if let Some(a) = &self.attributes {
                for (j, i) in a.attribute_range(k)?.enumerate() {
                    let value = if !a.text.is_null(i) {
                        Value::Str(a.text.value(i).to_string())
                    } else if !a.int.is_null(i) {
                        Value::I64(a.int.value(i))
                    } else {
                        typed(n, j).ok_or_else(|| {
                            format!("row {row}: event {n}'s attribute {j} has no value")
                        })?
                    };
                    event.attributes.push(KeyValue {
                        key: a.key.value(i).to_string(),
                        value,
                    });
                }
            }
            out.push(event);
        }
        Ok(out)
    }

    /// Calls `f` with each (key, value as text) of row `row`'s event attributes whose
    /// value the column holds (the others are in `nested_attributes`).
    pub fn each_attribute(&self, row: usize, mut f: impl FnMut(&str, &str)) -> Result<(), String> {
        let Some(a) = &self.attributes else {
            return Err("event attributes were not read".into());
        };
        let mut number = itoa::Buffer::new();
        for k in self.span_events(row)? {
            for i in a.attribute_range(k)? {
                if !a.text.is_null(i) {
                    f(a.key.value(i), a.text.value(i));
                } else if !a.int.is_null(i) {
                    f(a.key.value(i), number.format(a.int.value(i)));
                }
            }
        }
        Ok(())
    }
}

impl AttributeColumns<'_> {
    fn attribute_range(&self, event: usize) -> Result<std::ops::Range<usize>, String> {
        let (Some(&a), Some(&b)) = (
            self.event_offsets.get(event),
            self.event_offsets.get(event + 1),
        ) else {
            return Err(format!("event {event} has no attributes entry"));
        };
        let range = a.max(0) as usize..b.max(a).max(0) as usize;
        if range.end > self.key.len() || range.end > self.text.len() || range.end > self.int.len() {
            return Err(format!(
                "event {event}'s attributes are past the column's end"
            ));
        }
        Ok(range)
    }
}

//! The OTLP trace and log messages
//! (`opentelemetry/proto/{collector/trace,collector/logs,trace,logs,common,resource}/v1`),
//! declared here with prost's derive so that an instrumented application links no
//! OpenTelemetry crate (CI checks `causeway`'s dependency tree for one), and with the proto3
//! JSON mapping OTLP/JSON uses: camelCase names, ids as hex (any case), 64-bit integers as
//! decimal strings (numbers accepted), enums as integers (names accepted), bytes as base64,
//! unknown fields ignored.
//!
//! Only the fields Causeway reads or writes are declared; prost skips the others.
// The fields are the .proto's, under its names; its documentation is theirs.
#![allow(missing_docs)]

use serde::{Deserialize, Serialize};

/// `ExportTraceServiceRequest`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExportTraceServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_spans: Vec<ResourceSpans>,
}

/// `ExportTraceServiceResponse`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExportTraceServiceResponse {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_success: Option<ExportTracePartialSuccess>,
}

/// `ExportTracePartialSuccess`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExportTracePartialSuccess {
    #[prost(int64, tag = "1")]
    // Written as a number, as the collectors and SDKs of the JSON world read it.
    #[serde(deserialize_with = "int64::deserialize")]
    pub rejected_spans: i64,
    #[prost(string, tag = "2")]
    pub error_message: String,
}

/// `ResourceSpans`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceSpans {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_spans: Vec<ScopeSpans>,
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub schema_url: String,
}

/// `Resource`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
    #[prost(uint32, tag = "2")]
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_attributes_count: u32,
}

/// `ScopeSpans`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ScopeSpans {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub spans: Vec<Span>,
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub schema_url: String,
}

/// `InstrumentationScope`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstrumentationScope {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<KeyValue>,
}

/// `Span`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Span {
    #[prost(bytes = "vec", tag = "1")]
    #[serde(with = "hex_id")]
    pub trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    #[serde(with = "hex_id")]
    pub span_id: Vec<u8>,
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub trace_state: String,
    #[prost(bytes = "vec", tag = "4")]
    #[serde(with = "hex_id", skip_serializing_if = "Vec::is_empty")]
    pub parent_span_id: Vec<u8>,
    #[prost(fixed32, tag = "16")]
    #[serde(skip_serializing_if = "is_zero")]
    pub flags: u32,
    #[prost(string, tag = "5")]
    pub name: String,
    #[prost(int32, tag = "6")]
    #[serde(with = "span_kind")]
    pub kind: i32,
    #[prost(fixed64, tag = "7")]
    #[serde(with = "uint64")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "8")]
    #[serde(with = "uint64")]
    pub end_time_unix_nano: u64,
    #[prost(message, repeated, tag = "9")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<KeyValue>,
    #[prost(uint32, tag = "10")]
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_attributes_count: u32,
    #[prost(message, repeated, tag = "11")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
    #[prost(uint32, tag = "12")]
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_events_count: u32,
    #[prost(message, repeated, tag = "13")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    #[prost(uint32, tag = "14")]
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_links_count: u32,
    #[prost(message, optional, tag = "15")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
}

/// `Span.Event`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Event {
    #[prost(fixed64, tag = "1")]
    #[serde(with = "uint64")]
    pub time_unix_nano: u64,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<KeyValue>,
    #[prost(uint32, tag = "4")]
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_attributes_count: u32,
}

/// `Span.Link`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Link {
    #[prost(bytes = "vec", tag = "1")]
    #[serde(with = "hex_id")]
    pub trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    #[serde(with = "hex_id")]
    pub span_id: Vec<u8>,
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub trace_state: String,
    #[prost(message, repeated, tag = "4")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<KeyValue>,
    #[prost(uint32, tag = "5")]
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_attributes_count: u32,
    #[prost(fixed32, tag = "6")]
    #[serde(skip_serializing_if = "is_zero")]
    pub flags: u32,
}

/// `Status`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Status {
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[prost(int32, tag = "3")]
    #[serde(with = "status_code")]
    pub code: i32,
}

/// `ExportLogsServiceRequest`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExportLogsServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_logs: Vec<ResourceLogs>,
}

/// `ExportLogsServiceResponse`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExportLogsServiceResponse {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_success: Option<ExportLogsPartialSuccess>,
}

/// `ExportLogsPartialSuccess`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExportLogsPartialSuccess {
    #[prost(int64, tag = "1")]
    #[serde(deserialize_with = "int64::deserialize")]
    pub rejected_log_records: i64,
    #[prost(string, tag = "2")]
    pub error_message: String,
}

/// `ResourceLogs`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceLogs {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_logs: Vec<ScopeLogs>,
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub schema_url: String,
}

/// `ScopeLogs`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ScopeLogs {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub log_records: Vec<LogRecord>,
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub schema_url: String,
}

/// `LogRecord`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LogRecord {
    #[prost(fixed64, tag = "1")]
    #[serde(with = "uint64")]
    pub time_unix_nano: u64,
    #[prost(fixed64, tag = "11")]
    #[serde(with = "uint64")]
    pub observed_time_unix_nano: u64,
    #[prost(int32, tag = "2")]
    #[serde(with = "severity_number")]
    pub severity_number: i32,
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub severity_text: String,
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<AnyValue>,
    #[prost(message, repeated, tag = "6")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<KeyValue>,
    #[prost(uint32, tag = "7")]
    #[serde(skip_serializing_if = "is_zero")]
    pub dropped_attributes_count: u32,
    #[prost(fixed32, tag = "8")]
    #[serde(skip_serializing_if = "is_zero")]
    pub flags: u32,
    #[prost(bytes = "vec", tag = "9")]
    #[serde(with = "hex_id", skip_serializing_if = "Vec::is_empty")]
    pub trace_id: Vec<u8>,
    #[prost(bytes = "vec", tag = "10")]
    #[serde(with = "hex_id", skip_serializing_if = "Vec::is_empty")]
    pub span_id: Vec<u8>,
    #[prost(string, tag = "12")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub event_name: String,
}

/// `KeyValue`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<AnyValue>,
}

/// `AnyValue`: one of its variants, or none.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    #[prost(oneof = "Any", tags = "1, 2, 3, 4, 5, 6, 7")]
    pub value: Option<Any>,
}

/// The variants of [`AnyValue`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Any {
    #[prost(string, tag = "1")]
    String(String),
    #[prost(bool, tag = "2")]
    Bool(bool),
    #[prost(int64, tag = "3")]
    Int(i64),
    #[prost(double, tag = "4")]
    Double(f64),
    #[prost(message, tag = "5")]
    Array(ArrayValue),
    #[prost(message, tag = "6")]
    Kvlist(KeyValueList),
    #[prost(bytes = "vec", tag = "7")]
    Bytes(Vec<u8>),
}

/// `ArrayValue`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ArrayValue {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<AnyValue>,
}

/// `KeyValueList`.
#[derive(Clone, PartialEq, prost::Message, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KeyValueList {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<KeyValue>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Serialize for AnyValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use base64::Engine as _;
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(usize::from(self.value.is_some())))?;
        match &self.value {
            None => {}
            Some(Any::String(v)) => m.serialize_entry("stringValue", v)?,
            Some(Any::Bool(v)) => m.serialize_entry("boolValue", v)?,
            Some(Any::Int(v)) => m.serialize_entry("intValue", &v.to_string())?,
            Some(Any::Double(v)) => m.serialize_entry("doubleValue", v)?,
            Some(Any::Array(v)) => m.serialize_entry("arrayValue", v)?,
            Some(Any::Kvlist(v)) => m.serialize_entry("kvlistValue", v)?,
            Some(Any::Bytes(v)) => m.serialize_entry(
                "bytesValue",
                &base64::engine::general_purpose::STANDARD.encode(v),
            )?,
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for AnyValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AnyValue, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = AnyValue;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an AnyValue object such as {\"stringValue\": \"x\"}")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<AnyValue, A::Error> {
                use base64::Engine as _;
                let mut value = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let v = match &*key {
                        "stringValue" => Any::String(map.next_value()?),
                        "boolValue" => Any::Bool(map.next_value()?),
                        "intValue" => Any::Int(map.next_value::<Int64>()?.0),
                        "doubleValue" => Any::Double(map.next_value::<Double>()?.0),
                        "arrayValue" => Any::Array(map.next_value()?),
                        "kvlistValue" => Any::Kvlist(map.next_value()?),
                        "bytesValue" => {
                            let text: std::borrow::Cow<'de, str> = map.next_value()?;
                            Any::Bytes(
                                base64::engine::general_purpose::STANDARD
                                    .decode(text.as_bytes())
                                    .map_err(|e| {
                                        serde::de::Error::custom(format!(
                                            "bytesValue is not base64: {e}"
                                        ))
                                    })?,
                            )
                        }
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                            continue;
                        }
                    };
                    value = Some(v);
                }
                Ok(AnyValue { value })
            }
        }
        d.deserialize_map(Visit)
    }
}

/// An int64 written as a string or a number.
struct Int64(i64);

impl<'de> Deserialize<'de> for Int64 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Int64, D::Error> {
        int64::deserialize(d).map(Int64)
    }
}

/// A double written as a number, or as "NaN", "Infinity" or "-Infinity".
struct Double(f64);

impl<'de> Deserialize<'de> for Double {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Double, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either<'a> {
            Number(f64),
            Text(std::borrow::Cow<'a, str>),
        }
        match Either::deserialize(d)? {
            Either::Number(n) => Ok(Double(n)),
            Either::Text(t) => match &*t {
                "NaN" => Ok(Double(f64::NAN)),
                "Infinity" => Ok(Double(f64::INFINITY)),
                "-Infinity" => Ok(Double(f64::NEG_INFINITY)),
                other => other.parse().map(Double).map_err(|_| {
                    serde::de::Error::custom(format!("doubleValue {other:?} is not a number"))
                }),
            },
        }
    }
}

/// A 64-bit integer as proto3 JSON writes it: a decimal string, or a plain number.
macro_rules! integer_as_text {
    ($module:ident, $ty:ty, $what:literal) => {
        mod $module {
            use serde::{Deserialize, Deserializer, Serializer};

            // Some fields are read as text or numbers but written as numbers.
            #[allow(dead_code)]
            pub fn serialize<S: Serializer>(n: &$ty, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(n)
            }

            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                #[derive(Deserialize)]
                #[serde(untagged)]
                enum Either<'a> {
                    Number($ty),
                    Text(std::borrow::Cow<'a, str>),
                }
                match Either::deserialize(d)? {
                    Either::Number(n) => Ok(n),
                    Either::Text(t) => t
                        .trim()
                        .parse()
                        .map_err(|_| serde::de::Error::custom(format!("{t:?} is not {}", $what))),
                }
            }
        }
    };
}

integer_as_text!(uint64, u64, "an unsigned 64-bit integer");
integer_as_text!(int64, i64, "a 64-bit integer");

/// An enum as its number or, as proto3 JSON also allows, its name.
macro_rules! enum_number_or_name {
    ($module:ident, $names:expr) => {
        mod $module {
            use serde::{Deserialize, Deserializer, Serializer};

            const NAMES: &[&str] = &$names;

            pub fn serialize<S: Serializer>(n: &i32, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_i32(*n)
            }

            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
                #[derive(Deserialize)]
                #[serde(untagged)]
                enum Either<'a> {
                    Number(i32),
                    Text(std::borrow::Cow<'a, str>),
                }
                match Either::deserialize(d)? {
                    Either::Number(n) => Ok(n),
                    Either::Text(t) => NAMES
                        .iter()
                        .position(|n| *n == t)
                        .map(|i| i as i32)
                        .ok_or_else(|| {
                            serde::de::Error::custom(format!(
                                "{t:?} is not one of {}",
                                NAMES.join(", ")
                            ))
                        }),
                }
            }
        }
    };
}

enum_number_or_name!(
    span_kind,
    [
        "SPAN_KIND_UNSPECIFIED",
        "SPAN_KIND_INTERNAL",
        "SPAN_KIND_SERVER",
        "SPAN_KIND_CLIENT",
        "SPAN_KIND_PRODUCER",
        "SPAN_KIND_CONSUMER"
    ]
);
enum_number_or_name!(
    status_code,
    ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"]
);

enum_number_or_name!(
    severity_number,
    [
        "SEVERITY_NUMBER_UNSPECIFIED",
        "SEVERITY_NUMBER_TRACE",
        "SEVERITY_NUMBER_TRACE2",
        "SEVERITY_NUMBER_TRACE3",
        "SEVERITY_NUMBER_TRACE4",
        "SEVERITY_NUMBER_DEBUG",
        "SEVERITY_NUMBER_DEBUG2",
        "SEVERITY_NUMBER_DEBUG3",
        "SEVERITY_NUMBER_DEBUG4",
        "SEVERITY_NUMBER_INFO",
        "SEVERITY_NUMBER_INFO2",
        "SEVERITY_NUMBER_INFO3",
        "SEVERITY_NUMBER_INFO4",
        "SEVERITY_NUMBER_WARN",
        "SEVERITY_NUMBER_WARN2",
        "SEVERITY_NUMBER_WARN3",
        "SEVERITY_NUMBER_WARN4",
        "SEVERITY_NUMBER_ERROR",
        "SEVERITY_NUMBER_ERROR2",
        "SEVERITY_NUMBER_ERROR3",
        "SEVERITY_NUMBER_ERROR4",
        "SEVERITY_NUMBER_FATAL",
        "SEVERITY_NUMBER_FATAL2",
        "SEVERITY_NUMBER_FATAL3",
        "SEVERITY_NUMBER_FATAL4"
    ]
);

/// Trace and span ids: hex in OTLP/JSON, upper or lower case. The length is judged where
/// the span is read, so a wrong one rejects that span only.
mod hex_id {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(id: &[u8], s: S) -> Result<S::Ok, S::Error> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let text: String = id
            .iter()
            .flat_map(|b| {
                [
                    HEX[(b >> 4) as usize] as char,
                    HEX[(b & 15) as usize] as char,
                ]
            })
            .collect();
        s.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        };
        let bytes = text.as_bytes();
        if bytes.len() % 2 != 0 {
            return Err(serde::de::Error::custom(format!(
                "id {text:?} has an odd number of hex digits"
            )));
        }
        bytes
            .chunks(2)
            .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| serde::de::Error::custom(format!("id {text:?} is not hex")))
    }
}

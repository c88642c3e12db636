//! The wire codecs against real traces, as one binary: public fixtures decode into the
//! spans they hold, and Jaeger's JSON reads and writes as Jaeger's own.

mod spans;

mod fixtures_decode_into_expected_spans;
mod jaeger_json_reads_and_writes_jaegers_traces;

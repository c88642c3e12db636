//! The server's integration tests, as one binary (each links the server, the stores and
//! DataFusion; one link instead of nine). `slow_and_greedy_clients_are_bounded` stays a
//! binary of its own: it installs a global subscriber to count the server's log lines.

mod chromium;
mod common;

mod agent_ships_span_logs_to_the_collector;
mod capture_logs_are_joined_by_the_server;
mod huge_trace_in_chromium;
mod ingest_rejects_bad_input_clearly;
mod jaeger_query_api_answers_as_jaeger_does;
mod monitor_in_chromium;
mod no_request_takes_the_server_down;
mod otel_sdk_exporters_are_stored_and_read_back;
mod otlp_logs_land_on_their_spans;
mod pivot_hub_counts_each_batch_once;
mod pivot_hub_stays_bounded;
mod pivot_page_in_chromium;
mod search_explains_the_slow_in_chromium;
mod trace_views_in_chromium;
mod ui_in_chromium;

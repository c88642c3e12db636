//! The analyses of stored traces, as one binary: critical path, clock skew, and the graphs
//! and patterns over many traces.

mod common;

mod critical_path_follows_what_the_request_waited_on;
mod critical_path_matches_jaegers_published_cases;
mod graphs_and_patterns_over_many_traces;
mod skew_correction_puts_servers_inside_clients;

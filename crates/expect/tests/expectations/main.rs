//! Pip's expectations end to end, as one binary: the language, the checker on hand-built
//! paths, generated recognizers, and the instrumentation library's paths checked.

mod a_run_of_notices_taken_at_once_matches_as_every_count_would;
mod deep_input_is_refused_not_overflowed;
mod every_pip_construct_parses_prints_and_checks;
mod generated_recognizers_match_their_paths;
mod paths_are_checked_as_pip_checks_them;
mod printed_deep_nesting_parses_again;
mod recorded_code_is_checked_in_a_rust_test;
mod the_demo_checkout_passes_however_its_writes_interleave;
mod the_language_parses_and_prints_pip_files;

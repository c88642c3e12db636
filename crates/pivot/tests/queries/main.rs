//! Pivot Tracing's language, compiler and advice, as one binary.

mod compile;
mod lang;
mod run;

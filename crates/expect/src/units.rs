//! Units of quantities: times in nanoseconds, sizes in bytes.

/// What a unit measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    /// Nanoseconds.
    Time,
    /// Bytes.
    Size,
}

/// The dimension of a unit and how many base units (ns, bytes) one of it is.
pub fn scale(unit: &str) -> Option<(Dimension, f64)> {
    Some(match unit {
        "ns" => (Dimension::Time, 1.0),
        "us" => (Dimension::Time, 1e3),
        "ms" => (Dimension::Time, 1e6),
        "s" => (Dimension::Time, 1e9),
        "b" => (Dimension::Size, 1.0),
        "kb" => (Dimension::Size, 1024.0),
        "mb" => (Dimension::Size, 1024.0 * 1024.0),
        _ => return None,
    })
}

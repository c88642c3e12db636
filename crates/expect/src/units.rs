//! Units of quantities: times in nanoseconds, sizes in bytes. Pip's units, in any case:
//! `h m s ms us ns` and `b kb mb gb tb` (sizes in powers of 1024).

/// What a unit measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    /// Nanoseconds.
    Time,
    /// Bytes.
    Size,
}

/// The dimension of a unit and how many base units (ns, bytes) one of it is; the unit's
/// case does not matter (`10MS` is `10ms`), as in Pip.
pub fn scale(unit: &str) -> Option<(Dimension, f64)> {
    const KB: f64 = 1024.0;
    Some(match unit.to_ascii_lowercase().as_str() {
        "ns" => (Dimension::Time, 1.0),
        "us" => (Dimension::Time, 1e3),
        "ms" => (Dimension::Time, 1e6),
        "s" => (Dimension::Time, 1e9),
        "m" => (Dimension::Time, 60e9),
        "h" => (Dimension::Time, 3600e9),
        "b" => (Dimension::Size, 1.0),
        "kb" => (Dimension::Size, KB),
        "mb" => (Dimension::Size, KB * KB),
        "gb" => (Dimension::Size, KB * KB * KB),
        "tb" => (Dimension::Size, KB * KB * KB * KB),
        _ => return None,
    })
}

//! The values tuples hold, and what the query language's operators do with them.
//!
//! Integers and floats compare and add as numbers; a string compares only with a string; an
//! operation on values it does not apply to (or an integer overflow, or a division by zero)
//! gives `Null`, and a filter keeps a tuple only when its condition is `true`.
//!
//! Strings are `SmolStr`: up to 23 bytes held in place, longer ones shared, so capturing,
//! exploding and decoding short strings allocates nothing.

use smol_str::SmolStr;
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

use crate::lang::ast::{BinOp, Lit};

/// One value of a tuple.
#[derive(Debug)]
pub enum Value {
    /// Missing, or the result of an operation that does not apply.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string: up to 23 bytes held in place, longer ones shared between copies.
    Str(SmolStr),
}

/// Copied whole unless it holds a shared string. The derived clone copied an inline
/// string's 23 bytes at an offset of one byte through the stack, which stalls the CPU's
/// store forwarding: PACK FIRST of one string took 78 ns against 63 ns with `Arc<str>`
/// values, for the same instructions (`benches/advice.rs`).
impl Clone for Value {
    #[inline]
    fn clone(&self) -> Value {
        match self {
            Value::Str(s) if s.is_heap_allocated() => Value::Str(s.clone()),
            // SAFETY: every other value holds only plain data: `Null`, `Bool`, `Int` and
            // `Float` are `Copy`, and a `SmolStr` that is not on the heap is its length
            // and bytes in place or a `&'static str` (`SmolStr::clone` itself copies it
            // bit for bit). A bitwise copy owns nothing the original must not drop.
            _ => unsafe { std::ptr::read(self) },
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            // Grouping needs equality to be an equivalence: floats by their bits.
            (Value::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits(),
            (Value::Str(a), Value::Str(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Value {}

impl Hash for Value {
    fn hash<H: Hasher>(&self, h: &mut H) {
        std::mem::discriminant(self).hash(h);
        match self {
            Value::Null => {}
            Value::Bool(b) => b.hash(h),
            Value::Int(i) => i.hash(h),
            Value::Float(f) => f.to_bits().hash(h),
            Value::Str(s) => s.hash(h),
        }
    }
}

/// Hashes a tuple's values by their bytes alone (no length, no variant tag: equality
/// tells apart what collides), the same for owned and borrowed forms of the tuple.
#[inline]
pub(crate) fn hash_values<'a, H: Hasher>(values: impl Iterator<Item = &'a Value>, h: &mut H) {
    for v in values {
        match v {
            Value::Null => h.write_u8(0),
            Value::Bool(b) => h.write_u8(1 + u8::from(*b)),
            Value::Int(i) => h.write_i64(*i),
            Value::Float(f) => h.write_u64(f.to_bits()),
            Value::Str(s) => h.write(s.as_bytes()),
        }
    }
}

impl From<&Lit> for Value {
    fn from(l: &Lit) -> Value {
        match l {
            Lit::Int(i) => Value::Int(*i),
            Lit::Float(f) => Value::Float(*f),
            Lit::Str(s) => Value::Str(SmolStr::new(s)),
            Lit::Bool(b) => Value::Bool(*b),
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(SmolStr::new(s))
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i)
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => f.write_str(s),
        }
    }
}

impl Value {
    /// The number, for arithmetic and aggregates.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// Only `true` is true.
    pub fn is_true(&self) -> bool {
        matches!(self, Value::Bool(true))
    }

    /// The order of two values of comparable kinds.
    pub fn compare(&self, other: &Value) -> Option<Ordering> {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
            (Value::Str(a), Value::Str(b)) => Some(a.cmp(b)),
            (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
            (a, b) => a.as_f64()?.partial_cmp(&b.as_f64()?),
        }
    }

    /// Equality as the language's `==`: numbers by value, otherwise same kind and value.
    pub fn same(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Int(_) | Value::Float(_), Value::Int(_) | Value::Float(_)) => {
                self.compare(other) == Some(Ordering::Equal)
            }
            _ => self == other,
        }
    }
}

/// `a op b`. `And` and `Or` are three-valued (`false And null` is false, `true Or null` true).
pub fn binary(op: BinOp, a: &Value, b: &Value) -> Value {
    use Value::*;
    match op {
        BinOp::And => match (a, b) {
            (Bool(false), _) | (_, Bool(false)) => Bool(false),
            (Bool(true), Bool(true)) => Bool(true),
            _ => Null,
        },
        BinOp::Or => match (a, b) {
            (Bool(true), _) | (_, Bool(true)) => Bool(true),
            (Bool(false), Bool(false)) => Bool(false),
            _ => Null,
        },
        BinOp::Eq | BinOp::Ne if matches!(a, Null) || matches!(b, Null) => Null,
        BinOp::Eq => Bool(a.same(b)),
        BinOp::Ne => Bool(!a.same(b)),
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => match a.compare(b) {
            None => Null,
            Some(o) => Bool(match op {
                BinOp::Lt => o.is_lt(),
                BinOp::Le => o.is_le(),
                BinOp::Gt => o.is_gt(),
                _ => o.is_ge(),
            }),
        },
        BinOp::StartsWith => match (a, b) {
            (Str(a), Str(b)) => Bool(a.starts_with(&**b)),
            _ => Null,
        },
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem => arithmetic(op, a, b),
    }
}

fn arithmetic(op: BinOp, a: &Value, b: &Value) -> Value {
    use Value::*;
    match (a, b) {
        (Int(x), Int(y)) => {
            let r = match op {
                BinOp::Add => x.checked_add(*y),
                BinOp::Sub => x.checked_sub(*y),
                BinOp::Mul => x.checked_mul(*y),
                BinOp::Div => x.checked_div(*y),
                _ => x.checked_rem(*y),
            };
            r.map_or(Null, Int)
        }
        (Str(x), Str(y)) if op == BinOp::Add => Str(smol_str::format_smolstr!("{x}{y}")),
        _ => match (a.as_f64(), b.as_f64()) {
            (Some(x), Some(y)) => {
                let r = match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div => x / y,
                    _ => x % y,
                };
                if r.is_finite() {
                    Float(r)
                } else {
                    Null
                }
            }
            _ => Null,
        },
    }
}

/// `-a`.
pub fn negate(a: &Value) -> Value {
    match a {
        Value::Int(i) => i.checked_neg().map_or(Value::Null, Value::Int),
        Value::Float(f) => Value::Float(-f),
        _ => Value::Null,
    }
}

/// `Not a`.
pub fn not(a: &Value) -> Value {
    match a {
        Value::Bool(b) => Value::Bool(!b),
        _ => Value::Null,
    }
}

/// In JSON: `null`, a boolean, an integer, a number with a fraction or exponent (a float,
/// so that `2.0` stays a float), or a string.
impl serde::Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            // JSON has no NaN or infinity: those travel as null.
            Value::Float(f) if !f.is_finite() => s.serialize_unit(),
            Value::Float(f) => s.serialize_f64(*f),
            Value::Str(t) => s.serialize_str(t),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Value {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Value;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("null, a boolean, a number or a string")
            }
            fn visit_unit<E>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_none<E>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
                Ok(Value::Bool(b))
            }
            fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
                Ok(Value::Int(i))
            }
            fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
                Ok(i64::try_from(u).map_or(Value::Float(u as f64), Value::Int))
            }
            fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
                Ok(Value::Float(f))
            }
            fn visit_str<E>(self, s: &str) -> Result<Value, E> {
                Ok(Value::from(s))
            }
        }
        d.deserialize_any(Visit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_are_equal_and_own_their_strings() {
        let long = "a string longer than twenty-three bytes, on the heap";
        let values = [
            Value::Null,
            Value::Bool(true),
            Value::Int(-7),
            Value::Float(1.5),
            Value::from("short"),
            Value::from(long),
            Value::Str(SmolStr::new_static("static")),
        ];
        let copies: Vec<Value> = values.iter().map(Value::clone).collect();
        assert_eq!(copies, values);
        // The originals dropped first: each copy still holds its string.
        drop(values);
        assert_eq!(copies[4].to_string(), "short");
        assert_eq!(copies[5].to_string(), long);
        assert_eq!(copies[6].to_string(), "static");
    }

    #[test]
    fn operators_follow_the_documented_rules() {
        let s = |x: &str| Value::from(x);
        assert!(binary(BinOp::Eq, &Value::Int(2), &Value::Float(2.0)).is_true());
        assert!(binary(BinOp::Ne, &s("A"), &s("B")).is_true());
        assert!(binary(BinOp::Ne, &s("2"), &Value::Int(2)).is_true());
        assert_eq!(binary(BinOp::Lt, &s("a"), &Value::Int(1)), Value::Null);
        assert!(binary(BinOp::StartsWith, &s("/api/x"), &s("/api")).is_true());
        assert_eq!(
            binary(BinOp::Div, &Value::Int(1), &Value::Int(0)),
            Value::Null
        );
        assert_eq!(
            binary(BinOp::Add, &Value::Int(i64::MAX), &Value::Int(1)),
            Value::Null
        );
        assert_eq!(
            binary(BinOp::Div, &Value::Float(1.0), &Value::Int(0)),
            Value::Null
        );
        assert_eq!(
            binary(BinOp::Add, &Value::Int(1), &Value::Float(0.5)),
            Value::Float(1.5)
        );
        assert_eq!(
            binary(BinOp::And, &Value::Bool(false), &Value::Null),
            Value::Bool(false)
        );
        assert_eq!(
            binary(BinOp::Or, &Value::Bool(true), &Value::Null),
            Value::Bool(true)
        );
        assert_eq!(
            binary(BinOp::And, &Value::Bool(true), &Value::Null),
            Value::Null
        );
        assert_eq!(binary(BinOp::Eq, &Value::Null, &Value::Null), Value::Null);
        assert_eq!(negate(&Value::Int(i64::MIN)), Value::Null);
        assert_eq!(binary(BinOp::Add, &s("a"), &s("b")), s("ab"));
    }
}

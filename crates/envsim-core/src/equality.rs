//! The two notions of "equal" that scoring needs.
//!
//! - **Canonical** equality is `serde_json::Value`'s `==`: object key order is ignored, types are
//!   not: `1`, `1.0` and `true` are three different values. envsim's strict metrics use it.
//! - **Python** equality reproduces what the reference scorer gets from Python's `==` on decoded
//!   JSON: `1 == 1.0 == True`, `0 == False`, containers compared element by element.

use serde_json::{Number, Value};

/// Python `==` on JSON-decoded values.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => match (numeric(a), numeric(b)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
    }
}

/// A number (or bool) as Python would compare it.
#[derive(Debug, Clone, Copy)]
enum Numeric {
    Int(i128),
    Float(f64),
}

impl PartialEq for Numeric {
    fn eq(&self, other: &Self) -> bool {
        match (*self, *other) {
            (Numeric::Int(x), Numeric::Int(y)) => x == y,
            (Numeric::Float(x), Numeric::Float(y)) => x == y,
            (Numeric::Int(i), Numeric::Float(f)) | (Numeric::Float(f), Numeric::Int(i)) => {
                // Python compares int and float exactly, not by rounding the int.
                f.fract() == 0.0 && f.abs() < 1.7e38 && (f as i128) == i
            }
        }
    }
}

fn numeric(v: &Value) -> Option<Numeric> {
    match v {
        Value::Bool(b) => Some(Numeric::Int(i128::from(*b))),
        Value::Number(n) => Some(number(n)),
        _ => None,
    }
}

fn number(n: &Number) -> Numeric {
    if let Some(i) = n.as_i64() {
        Numeric::Int(i128::from(i))
    } else if let Some(u) = n.as_u64() {
        Numeric::Int(i128::from(u))
    } else {
        Numeric::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// True for values Python's reference scripts treat as scalars (anything but dict and list).
pub fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Object(_) | Value::Array(_))
}

/// The numeric difference `after - before` when both are numbers or bools, as the reference's
/// change notes compute it (Python `bool` is an `int`).
pub(crate) fn numeric_delta(before: &Value, after: &Value) -> Option<(bool, String)> {
    let (b, a) = (numeric(before)?, numeric(after)?);
    Some(match (b, a) {
        (Numeric::Int(b), Numeric::Int(a)) => (a >= b, (a - b).abs().to_string()),
        (b, a) => {
            let (b, a) = (as_f64(b), as_f64(a));
            (a >= b, crate::python::repr::py_float_repr((a - b).abs()))
        }
    })
}

fn as_f64(n: Numeric) -> f64 {
    match n {
        Numeric::Int(i) => i as f64,
        Numeric::Float(f) => f,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_equality_merges_numeric_types() {
        assert!(py_eq(&json!(1), &json!(1.0)));
        assert!(py_eq(&json!(true), &json!(1)));
        assert!(py_eq(&json!(false), &json!(0.0)));
        assert!(py_eq(&json!({"a": [1, true]}), &json!({"a": [1.0, 1]})));
        assert!(!py_eq(&json!(null), &json!(0)));
        assert!(!py_eq(&json!("1"), &json!(1)));
        assert!(!py_eq(&json!([1, 2]), &json!([2, 1])));
        assert!(!py_eq(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(py_eq(&json!({"a": 1, "b": 2}), &json!({"b": 2, "a": 1})));
        // 2**53 + 1 is not equal to the nearest float.
        assert!(!py_eq(
            &json!(9007199254740993u64),
            &json!(9007199254740992.0)
        ));
        assert!(py_eq(&json!(u64::MAX), &json!(u64::MAX)));
    }

    #[test]
    fn canonical_equality_keeps_types_apart() {
        assert_ne!(json!(1), json!(1.0));
        assert_ne!(json!(1), json!(true));
        assert_eq!(json!({"a": 1, "b": 2}), json!({"b": 2, "a": 1}));
    }

    #[test]
    fn numeric_notes() {
        assert_eq!(
            numeric_delta(&json!(3), &json!(5)),
            Some((true, "2".into()))
        );
        assert_eq!(
            numeric_delta(&json!(true), &json!(false)),
            Some((false, "1".into()))
        );
        assert_eq!(
            numeric_delta(&json!(1.5), &json!(1)),
            Some((false, "0.5".into()))
        );
        assert_eq!(numeric_delta(&json!("a"), &json!(1)), None);
    }
}

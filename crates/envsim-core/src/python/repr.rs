//! `repr()` and `str()` of [`PyValue`]s, as CPython 3.11 spells them.
//!
//! The reference scorer turns a change's `path` into text with `str()` when
//! it is neither a string nor a list (`str(5)`, `str(('a', 1))`), so the
//! spelling decides which key gets written.

mod json_values;

pub(crate) use json_values::write_code_points_repr;
pub use json_values::{is_printable, py_float_repr, py_str_repr, to_python_repr};

use std::fmt::Write as _;

use super::text;
use super::value::{PyStr, PyValue};

/// `str(value)`: the text itself for a `str`, else [`repr`].
pub fn str_of(value: &PyValue) -> PyStr {
    match value {
        PyValue::Str(s) => s.clone(),
        other => PyStr::from(repr(other)),
    }
}

/// `repr(value)`. Sets print in insertion order (CPython prints hash order).
/// Lone surrogates print as `\udXXX` escapes, so the result is valid UTF-8.
pub fn repr(value: &PyValue) -> String {
    let mut out = String::new();
    write_repr(value, &mut out);
    out
}

/// `repr(s)` for a `str`.
pub fn str_repr(s: &PyStr) -> String {
    let mut out = String::new();
    write_str(s, &mut out);
    out
}

fn write_repr(value: &PyValue, out: &mut String) {
    match value {
        PyValue::None => out.push_str("None"),
        PyValue::Ellipsis => out.push_str("Ellipsis"),
        PyValue::Bool(true) => out.push_str("True"),
        PyValue::Bool(false) => out.push_str("False"),
        PyValue::Int(i) => {
            let _ = write!(out, "{i}");
        }
        PyValue::Float(f) => out.push_str(&py_float_repr(*f)),
        PyValue::Complex { re, im } => write_complex(*re, *im, out),
        PyValue::Str(s) => write_str(s, out),
        PyValue::Bytes(b) => write_bytes(b, out),
        PyValue::List(items) => write_seq(items, "[", "]", out),
        PyValue::Tuple(items) if items.len() == 1 => write_seq(items, "(", ",)", out),
        PyValue::Tuple(items) => write_seq(items, "(", ")", out),
        PyValue::Set(set) if set.is_empty() => out.push_str("set()"),
        PyValue::Set(set) => {
            out.push('{');
            for (i, item) in set.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(item, out);
            }
            out.push('}');
        }
        PyValue::Dict(dict) => {
            out.push('{');
            for (i, (k, v)) in dict.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(k, out);
                out.push_str(": ");
                write_repr(v, out);
            }
            out.push('}');
        }
    }
}

fn write_seq(items: &[PyValue], open: &str, close: &str, out: &mut String) {
    out.push_str(open);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_repr(item, out);
    }
    out.push_str(close);
}

/// A float the way `complex.__repr__` formats its parts: the shortest
/// round-trip digits without the `.0` that `float.__repr__` adds.
fn complex_part(f: f64) -> String {
    let r = py_float_repr(f);
    match r.strip_suffix(".0") {
        Some(stripped) => stripped.to_owned(),
        None => r,
    }
}

fn write_complex(re: f64, im: f64, out: &mut String) {
    let imag = complex_part(im);
    if re == 0.0 && re.is_sign_positive() {
        let _ = write!(out, "{imag}j");
        return;
    }
    let sign = if imag.starts_with('-') { "" } else { "+" };
    let _ = write!(out, "({}{sign}{imag}j)", complex_part(re));
}

fn write_str(s: &PyStr, out: &mut String) {
    let bytes = s.as_bytes();
    write_code_points_repr(
        out,
        text::code_points(bytes),
        bytes.contains(&b'\''),
        bytes.contains(&b'"'),
    );
}

fn write_bytes(b: &[u8], out: &mut String) {
    let quote = if b.contains(&b'\'') && !b.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    out.push('b');
    out.push(char::from(quote));
    for &byte in b {
        match byte {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(char::from(c));
            }
            0x20..=0x7E => out.push(char::from(byte)),
            _ => {
                let _ = write!(out, "\\x{byte:02x}");
            }
        }
    }
    out.push(char::from(quote));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::value::{PyDict, PySet};

    #[test]
    fn spells_like_cpython() {
        let cases: Vec<(PyValue, &str)> = vec![
            (PyValue::None, "None"),
            (PyValue::Ellipsis, "Ellipsis"),
            (PyValue::Float(1.0), "1.0"),
            (PyValue::Complex { re: 0.0, im: 1.0 }, "1j"),
            (PyValue::Complex { re: -0.0, im: -1.0 }, "(-0-1j)"),
            (PyValue::Complex { re: 1.5, im: 2.0 }, "(1.5+2j)"),
            (
                PyValue::Complex {
                    re: 1e20,
                    im: f64::INFINITY,
                },
                "(1e+20+infj)",
            ),
            (PyValue::Tuple(vec![PyValue::str("a")]), "('a',)"),
            (PyValue::Tuple(vec![]), "()"),
            (
                PyValue::Tuple(vec![PyValue::int(1), PyValue::Bool(false)]),
                "(1, False)",
            ),
            (PyValue::str("it's"), "\"it's\""),
            (PyValue::str("a\"b'c"), "'a\"b\\'c'"),
            (PyValue::Bytes(b"\x00a'".as_slice().into()), "b\"\\x00a'\""),
            (PyValue::Set(Box::new(PySet::new())), "set()"),
        ];
        for (value, expected) in cases {
            assert_eq!(repr(&value), expected);
        }
        let mut d = PyDict::new();
        d.insert(PyValue::int(1), PyValue::List(vec![PyValue::None]))
            .unwrap();
        d.insert(PyValue::str("k"), PyValue::Float(0.5)).unwrap();
        assert_eq!(repr(&PyValue::Dict(Box::new(d))), "{1: [None], 'k': 0.5}");
        let mut lone = Vec::new();
        text::encode(0xD800, &mut lone);
        assert_eq!(str_repr(&PyStr::from_wtf(lone)), "'\\ud800'");
        assert_eq!(str_of(&PyValue::str("x.y")).as_str(), Some("x.y"));
    }
}

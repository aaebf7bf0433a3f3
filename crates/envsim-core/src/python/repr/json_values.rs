//! Rendering JSON values the way Python prints the equivalent object.
//!
//! The reference benchmark stores and compares values as the `repr()` (or
//! `str()`, identical for these types) of Python dicts, lists and scalars, so
//! reproducing its texts needs CPython's exact spelling: `None`/`True`/
//! `False`, single-quoted strings with Python's escapes, `': '` and `', '`
//! separators, and CPython's float formatting.
//!
//! The output parses back with [`crate::literal::parse_literal`] in
//! [`crate::literal::Dialect::Python`] to an equal value.

use std::fmt::Write as _;

use serde_json::Value;

/// Formats a float exactly like CPython's `repr(float)`.
///
/// CPython prints the shortest digit string that reads back as the same
/// float (Rust's `{:e}` formatting yields the same digits), written in
/// positional notation with at least one digit after the point when the
/// decimal exponent is moderate, and in scientific notation with a signed,
/// at least two-digit exponent otherwise: `1e+16`, `1e-05`, `1.5e-07`,
/// `1000000000000000.0`, `0.0001`, `-0.0`. Non-finite values print as
/// `inf`, `-inf` and `nan`.
pub fn py_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if f == 0.0 {
        return format!("{sign}0.0");
    }
    let (digits, exponent) = shortest_digits(f.abs());
    // CPython's `decpt`: the value is 0.d1d2...dn × 10^decpt.
    let decpt = exponent + 1;
    let n = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    if decpt <= -4 || decpt > 16 {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let point = if rest.is_empty() { "" } else { "." };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{first}{point}{rest}e{exp_sign}{:02}",
            exponent.unsigned_abs()
        );
    }
    if decpt <= 0 {
        let zeros = "0".repeat(usize::try_from(-decpt).unwrap_or(0));
        format!("{sign}0.{zeros}{digits}")
    } else if decpt < n {
        let (int_part, frac_part) =
            digits.split_at(usize::try_from(decpt).unwrap_or(0).min(digits.len()));
        format!("{sign}{int_part}.{frac_part}")
    } else {
        let zeros = "0".repeat(usize::try_from(decpt - n).unwrap_or(0));
        format!("{sign}{digits}{zeros}.0")
    }
}

/// The shortest decimal digits that read back as `f` (positive, finite),
/// and the decimal exponent of the first digit.
///
/// Rust's `{:e}` finds the shortest digit string, but when the float lies
/// exactly halfway between two shortest candidates it rounds the last digit
/// up, while CPython (David Gay's algorithm) picks the even one:
/// `811212085039910.25` is `811212085039910.2` in Python. Such ties are
/// detected from the float's exact decimal expansion and resolved the
/// Python way.
fn shortest_digits(f: f64) -> (String, i64) {
    let sci = format!("{f:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i64 = exponent.parse().unwrap_or(0);
    match even_tie_digits(f, &digits, exponent) {
        Some(even) => (even, exponent),
        None => (digits, exponent),
    }
}

/// If `f` is exactly halfway between two `digits.len()`-digit decimals that
/// both read back as `f`, returns the one with the even last digit.
fn even_tie_digits(f: f64, digits: &str, exponent: i64) -> Option<String> {
    let n = digits.len();
    let split = |s: &str| -> Option<(String, i64)> {
        let (m, e) = s.split_once('e')?;
        Some((
            m.chars().filter(char::is_ascii_digit).collect(),
            e.parse().ok()?,
        ))
    };
    // Cheap probe first: one digit more than the shortest form.
    let (probe, probe_exp) = split(&format!("{f:.n$e}"))?;
    if probe_exp != exponent || !probe.ends_with('5') {
        return None;
    }
    // A tie needs the exact expansion (at most 767 significant digits for
    // an f64) to end right there.
    let (exact, exact_exp) = split(&format!("{f:.800e}"))?;
    if exact_exp != exponent || exact.trim_end_matches('0') != probe {
        return None;
    }
    let lower = probe.get(..n)?;
    let upper = increment_digits(lower)?;
    let lower_is_even = lower.ends_with(['0', '2', '4', '6', '8']);
    let even = if lower_is_even {
        lower.to_owned()
    } else {
        upper
    };
    if even == digits {
        return None;
    }
    let (first, rest) = even.split_at(1);
    let reads_back = format!("{first}.{rest}e{exponent}").parse::<f64>().ok() == Some(f);
    reads_back.then_some(even)
}

/// Adds one to a decimal digit string of fixed length; `None` on overflow.
fn increment_digits(digits: &str) -> Option<String> {
    let mut bytes = digits.as_bytes().to_vec();
    for d in bytes.iter_mut().rev() {
        if *d == b'9' {
            *d = b'0';
        } else {
            *d += 1;
            return String::from_utf8(bytes).ok();
        }
    }
    None
}

/// Formats a string exactly like CPython's `repr(str)`.
///
/// The quote is `'` unless the string contains `'` and no `"`. Backslashes,
/// the chosen quote, `\n`, `\r` and `\t` are escaped; other non-printable
/// characters become `\xhh`, `\uXXXX` or `\UXXXXXXXX` (lowercase hex). Which
/// characters are printable is an approximation of `str.isprintable()`, see
/// [`is_printable`].
pub fn py_str_repr(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_str_repr(&mut out, s);
    out
}

fn write_str_repr(out: &mut String, s: &str) {
    write_code_points_repr(
        out,
        s.chars().map(u32::from),
        s.contains('\''),
        s.contains('"'),
    );
}

/// Writes `repr()` of a string given as its code points (lone surrogates allowed: they print
/// as `\udXXX` escapes); `has_single` / `has_double` say whether it contains `'` / `"`, which
/// decides the quote.
pub(crate) fn write_code_points_repr(
    out: &mut String,
    code_points: impl Iterator<Item = u32>,
    has_single: bool,
    has_double: bool,
) {
    let quote = if has_single && !has_double { '"' } else { '\'' };
    out.push(quote);
    for cp in code_points {
        match char::from_u32(cp) {
            Some('\\') => out.push_str("\\\\"),
            Some('\n') => out.push_str("\\n"),
            Some('\r') => out.push_str("\\r"),
            Some('\t') => out.push_str("\\t"),
            Some(c) if c == quote => {
                out.push('\\');
                out.push(c);
            }
            Some(c) if is_printable(c) => out.push(c),
            _ => {
                // Writing into a String cannot fail.
                let _ = if cp < 0x100 {
                    write!(out, "\\x{cp:02x}")
                } else if cp < 0x1_0000 {
                    write!(out, "\\u{cp:04x}")
                } else {
                    write!(out, "\\U{cp:08x}")
                };
            }
        }
    }
    out.push(quote);
}

/// Approximates Python's `str.isprintable()` for one character.
///
/// Python calls a character non-printable when its Unicode category is
/// `Cc`, `Cf`, `Cs`, `Co`, `Cn`, `Zl`, `Zp` or `Zs` (other than the ASCII
/// space). This function lists every character of the first seven kinds that
/// is *assigned* in Unicode 14.0 (the database of CPython 3.11): controls,
/// format characters, separators and private use areas. Unassigned code
/// points (`Cn`) would need the full tables; only the noncharacters,
/// U+FFF0–U+FFF8 and the unassigned parts of the tag block are listed, and
/// all other unassigned code points count as printable, so CPython would
/// escape them where this module prints them as they are. Parsing the output
/// back yields the same string either way.
pub fn is_printable(c: char) -> bool {
    let code = u32::from(c);
    let non_printable = matches!(
        code,
        // Controls, separators, private use.
        0x00..=0x1F
            | 0x7F..=0xA0
            | 0x1680
            | 0x2000..=0x200A
            | 0x2028..=0x2029
            | 0x202F
            | 0x205F
            | 0x3000
            | 0xE000..=0xF8FF
            | 0xF0000..=0x10FFFF
            // Format characters.
            | 0xAD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x13438
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE00FF
            // Unassigned: noncharacters and a few well-known gaps.
            | 0xFDD0..=0xFDEF
            | 0xFFF0..=0xFFF8
            | 0xE01F0..=0xE0FFF
    ) || (code & 0xFFFE) == 0xFFFE;
    !non_printable
}

/// Renders a JSON value as Python's `repr()` of the equivalent object.
///
/// `null` → `None`, booleans → `True`/`False`, integers in decimal, floats
/// via [`py_float_repr`], strings via [`py_str_repr`], arrays as lists
/// `[a, b]` and objects as dicts `{'k': v, 'k2': v2}` in insertion order.
///
/// The rendering uses an explicit stack rather than recursion, so values of
/// any depth are handled without risk to the call stack.
pub fn to_python_repr(v: &Value) -> String {
    enum Frame<'a> {
        List(std::slice::Iter<'a, Value>, bool),
        Dict(serde_json::map::Iter<'a>, bool),
    }
    let mut out = String::new();
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut next = Some(v);
    loop {
        if let Some(value) = next.take() {
            match value {
                Value::Array(items) => {
                    out.push('[');
                    stack.push(Frame::List(items.iter(), true));
                }
                Value::Object(map) => {
                    out.push('{');
                    stack.push(Frame::Dict(map.iter(), true));
                }
                scalar => write_scalar(&mut out, scalar),
            }
        }
        let Some(frame) = stack.last_mut() else {
            return out;
        };
        match frame {
            Frame::List(items, first) => match items.next() {
                Some(item) => {
                    if !*first {
                        out.push_str(", ");
                    }
                    *first = false;
                    next = Some(item);
                }
                None => {
                    out.push(']');
                    stack.pop();
                }
            },
            Frame::Dict(entries, first) => match entries.next() {
                Some((key, item)) => {
                    if !*first {
                        out.push_str(", ");
                    }
                    *first = false;
                    write_str_repr(&mut out, key);
                    out.push_str(": ");
                    next = Some(item);
                }
                None => {
                    out.push('}');
                    stack.pop();
                }
            },
        }
    }
}

fn write_scalar(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => out.push_str(&u.to_string()),
            (None, Some(i)) => out.push_str(&i.to_string()),
            (None, None) => out.push_str(&py_float_repr(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => write_str_repr(out, s),
        // Containers are handled by the caller's stack.
        Value::Array(_) | Value::Object(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::literal::{parse_literal, Dialect};
    use serde_json::json;

    #[test]
    fn floats_like_cpython() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123_456_789_012_345_680.0, "1.2345678901234568e+17"),
            (9_999_999_999_999_998.0, "9999999999999998.0"),
            (0.0001, "0.0001"),
            (0.00012345, "0.00012345"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e100, "1e+100"),
            (1e-100, "1e-100"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (1.0 / 3.0, "0.3333333333333333"),
            (123.456, "123.456"),
            // Exact ties between two shortest candidates go to the even digit.
            // (Written as sums: the literals alone would exceed f64 precision.)
            (811_212_085_039_910.0 + 0.25, "811212085039910.2"),
            (-1_929_377_421_321_310.0 - 0.25, "-1929377421321310.2"),
            (1_650_374_396_507_224.0 + 0.25, "1650374396507224.2"),
            (0.125, "0.125"),
            (2.5, "2.5"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ];
        for &(f, expected) in cases {
            assert_eq!(py_float_repr(f), expected, "{f:e}");
        }
    }

    #[test]
    fn strings_like_cpython() {
        let cases: &[(&str, &str)] = &[
            ("", "''"),
            ("abc", "'abc'"),
            ("it's", "\"it's\""),
            ("say \"hi\"", "'say \"hi\"'"),
            ("both ' and \"", "'both \\' and \"'"),
            ("back\\slash", "'back\\\\slash'"),
            ("a\nb\rc\td", "'a\\nb\\rc\\td'"),
            ("\0\u{1}\u{1f}\u{7f}", "'\\x00\\x01\\x1f\\x7f'"),
            ("\u{85}\u{a0}\u{ad}", "'\\x85\\xa0\\xad'"),
            ("é日本😀", "'é日本😀'"),
            ("\u{200b}\u{2028}\u{feff}", "'\\u200b\\u2028\\ufeff'"),
            ("\u{e000}", "'\\ue000'"),
            ("\u{f0000}\u{10ffff}", "'\\U000f0000\\U0010ffff'"),
            ("\u{1fffe}", "'\\U0001fffe'"),
            (
                "\u{600}\u{8e2}\u{1d173}\u{e0001}",
                "'\\u0600\\u08e2\\U0001d173\\U000e0001'",
            ),
            ("\u{34f}\u{115f}\u{3164}", "'\u{34f}\u{115f}\u{3164}'"),
        ];
        for &(s, expected) in cases {
            assert_eq!(py_str_repr(s), expected, "{s:?}");
        }
    }

    #[test]
    fn values_like_cpython() {
        let v = json!({
            "a": null,
            "b": [true, false],
            "c": {"d": 1, "e": -2, "f": 1.5, "g": 2.0},
            "it's": "x",
            "n": [],
            "m": {}
        });
        assert_eq!(
            to_python_repr(&v),
            "{'a': None, 'b': [True, False], 'c': {'d': 1, 'e': -2, 'f': 1.5, 'g': 2.0}, \"it's\": 'x', 'n': [], 'm': {}}"
        );
        assert_eq!(
            to_python_repr(&json!(18_446_744_073_709_551_615u64)),
            "18446744073709551615"
        );
        assert_eq!(to_python_repr(&json!(i64::MIN)), "-9223372036854775808");
        assert_eq!(to_python_repr(&json!("x")), "'x'");
        assert_eq!(to_python_repr(&json!([[[]]])), "[[[]]]");
    }

    #[test]
    fn deep_values_do_not_recurse() {
        let mut v = json!(1);
        for _ in 0..10_000 {
            v = Value::Array(vec![v]);
        }
        let text = to_python_repr(&v);
        assert_eq!(text.len(), 20_001);
        // Dismantle iteratively: dropping a deep value recursively could
        // itself overflow the stack.
        let mut cur = v;
        while let Value::Array(mut items) = cur {
            cur = items.pop().unwrap_or(Value::Null);
        }
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn arb_string() -> impl Strategy<Value = String> {
            prop_oneof![
                any::<String>(),
                "[a-z'\"\\\\ \n\r\t\u{0}\u{7f}\u{85}\u{a0}é日😀\u{200b}\u{feff}\u{e000}]{0,12}",
            ]
        }

        fn arb_json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                any::<u64>().prop_map(Value::from),
                any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
                    .map(Value::Number)),
                prop_oneof![
                    Just(0.0),
                    Just(-0.0),
                    Just(1e16),
                    Just(1e-5),
                    Just(100.0),
                    Just(0.1)
                ]
                .prop_filter_map("finite", |f: f64| serde_json::Number::from_f64(f)
                    .map(Value::Number)),
                arb_string().prop_map(Value::String),
            ];
            leaf.prop_recursive(6, 64, 8, |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                    proptest::collection::vec((arb_string(), inner), 0..8)
                        .prop_map(|entries| Value::Object(entries.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]

            #[test]
            fn repr_parses_back(v in arb_json()) {
                let text = to_python_repr(&v);
                prop_assert_eq!(parse_literal(&text, Dialect::Python), Ok(v));
            }

            #[test]
            fn float_repr_parses_back(f in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
                let text = py_float_repr(f);
                let back: f64 = text.parse().unwrap_or(f64::NAN);
                prop_assert_eq!(back.to_bits(), f.to_bits(), "{}", text);
            }
        }
    }
}

//! Python `int`: exact integers of any size, their comparison with floats,
//! and the `int()` conversions the reference scorer performs.

use num_bigint::{BigInt, Sign};

use super::text;
use super::value::PyValue;

/// CPython 3.11 refuses to convert decimal text of more than 4300 digits to
/// an `int` (`sys.get_int_max_str_digits()`), in `int()`, in `json.loads`
/// and in the compiler alike.
pub const MAX_STR_DIGITS: usize = 4300;

/// An exact integer. `Big` never holds a value that fits `i64`, so equal
/// integers always have the same representation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PyInt {
    /// Fits `i64`.
    Small(i64),
    /// Does not fit `i64`.
    Big(Box<BigInt>),
}

impl PyInt {
    /// Normalises a `BigInt`.
    pub fn from_bigint(b: BigInt) -> PyInt {
        match i64::try_from(&b) {
            Ok(i) => PyInt::Small(i),
            Err(_) => PyInt::Big(Box::new(b)),
        }
    }

    /// Reads ASCII digits in `radix` (no sign, no underscores); `None` when
    /// empty or not all digits.
    pub fn parse_radix(digits: &[u8], radix: u32) -> Option<PyInt> {
        if digits.is_empty() || !digits.iter().all(|&d| char::from(d).is_digit(radix)) {
            return None;
        }
        if let Some(v) = std::str::from_utf8(digits)
            .ok()
            .and_then(|s| i64::from_str_radix(s, radix).ok())
        {
            return Some(PyInt::Small(v));
        }
        BigInt::parse_bytes(digits, radix).map(PyInt::from_bigint)
    }

    /// Reads decimal ASCII digits (for tests and callers that checked the
    /// digit limit themselves).
    pub fn parse_decimal(digits: &str) -> Option<PyInt> {
        PyInt::parse_radix(digits.as_bytes(), 10)
    }

    /// `-x`.
    pub fn neg(&self) -> PyInt {
        match self {
            PyInt::Small(i) => match i.checked_neg() {
                Some(n) => PyInt::Small(n),
                None => PyInt::from_bigint(-BigInt::from(*i)),
            },
            PyInt::Big(b) => PyInt::from_bigint(-(**b).clone()),
        }
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        matches!(self, PyInt::Small(0))
    }

    /// The value as `i64`, if it fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            PyInt::Small(i) => Some(*i),
            PyInt::Big(_) => None,
        }
    }

    /// Whether the value is negative.
    pub fn is_negative(&self) -> bool {
        match self {
            PyInt::Small(i) => *i < 0,
            PyInt::Big(b) => b.sign() == Sign::Minus,
        }
    }

    /// The integer equal to `f`, when `f` is finite and integral.
    pub fn from_integral_f64(f: f64) -> Option<PyInt> {
        if !f.is_finite() || f.fract() != 0.0 {
            return None;
        }
        // The cast is exact: `f` is integral and inside the i64 range.
        if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f) {
            return Some(PyInt::Small(f as i64));
        }
        let bits = f.to_bits();
        let exponent = i64::try_from((bits >> 52) & 0x7FF).unwrap_or(0) - 1075;
        let mantissa = (bits & ((1 << 52) - 1)) | (1 << 52);
        // |f| >= 2^63, so the exponent is positive here.
        let magnitude = BigInt::from(mantissa) << u64::try_from(exponent).unwrap_or(0);
        Some(PyInt::from_bigint(if f < 0.0 {
            -magnitude
        } else {
            magnitude
        }))
    }

    /// Whether the integer equals `f` (Python compares exactly).
    pub fn eq_f64(&self, f: f64) -> bool {
        PyInt::from_integral_f64(f).is_some_and(|i| i == *self)
    }

    /// `float(x)`: correctly rounded (half to even); `None` where Python
    /// raises `OverflowError`.
    pub fn to_f64(&self) -> Option<f64> {
        let big = match self {
            // i64 -> f64 rounds to nearest, ties to even, like CPython.
            PyInt::Small(i) => return Some(*i as f64),
            PyInt::Big(b) => b,
        };
        let (sign, magnitude) = (big.sign(), big.magnitude());
        let bits = magnitude.bits();
        let shift = bits.saturating_sub(64);
        let top: u64 = (magnitude >> shift).iter_u64_digits().next().unwrap_or(0);
        // Bits below the top 64 only matter as a "sticky" bit for rounding;
        // bit 0 of `top` is far below the 53 bits an f64 keeps.
        let sticky = magnitude.trailing_zeros().is_some_and(|tz| tz < shift);
        let top = top | u64::from(sticky);
        let scaled = (top as f64) * 2f64.powi(i32::try_from(shift).unwrap_or(i32::MAX));
        if !scaled.is_finite() {
            return None;
        }
        Some(if sign == Sign::Minus { -scaled } else { scaled })
    }
}

impl std::fmt::Display for PyInt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PyInt::Small(i) => write!(f, "{i}"),
            PyInt::Big(b) => write!(f, "{b}"),
        }
    }
}

/// Python's `int(x)` for the values the reference scorer feeds it (list
/// indices in `apply_change`); `None` wherever Python raises (`ValueError`,
/// `TypeError`, `OverflowError`).
///
/// Strings go through CPython's rules: non-ASCII whitespace counts as a
/// space and any Unicode decimal digit as its ASCII digit, then the text is
/// an optional sign and decimal digits with single underscores between them,
/// surrounded by ASCII whitespace, at most [`MAX_STR_DIGITS`] digits. Bytes
/// are read the same way without the Unicode step. Floats truncate toward
/// zero.
pub fn int_of(value: &PyValue) -> Option<PyInt> {
    match value {
        PyValue::Bool(b) => Some(PyInt::Small(i64::from(*b))),
        PyValue::Int(i) => Some(i.clone()),
        PyValue::Float(f) => PyInt::from_integral_f64(f.trunc()),
        PyValue::Str(s) => {
            let mut ascii = Vec::with_capacity(s.as_bytes().len());
            for cp in text::code_points(s.as_bytes()) {
                if cp < 127 {
                    ascii.push(u8::try_from(cp).ok()?);
                } else if text::is_space(cp) {
                    ascii.push(b' ');
                } else {
                    let digit = text::decimal_value(cp)?;
                    ascii.push(b'0' + u8::try_from(digit).ok()?);
                }
            }
            int_from_ascii(&ascii)
        }
        PyValue::Bytes(b) => int_from_ascii(b),
        _ => None,
    }
}

/// `PyLong_FromString(s, base=10)` on ASCII text.
fn int_from_ascii(text: &[u8]) -> Option<PyInt> {
    let is_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r');
    let start = text.iter().position(|b| !is_space(b))?;
    let end = text.iter().rposition(|b| !is_space(b))? + 1;
    let mut body = text.get(start..end)?;
    let negative = match body.first() {
        Some(b'-') => true,
        Some(b'+') => false,
        _ => {
            return parse_digits(body, false);
        }
    };
    body = body.get(1..)?;
    parse_digits(body, negative)
}

fn parse_digits(body: &[u8], negative: bool) -> Option<PyInt> {
    // Underscores only between digits.
    if body.first() == Some(&b'_')
        || body.last() == Some(&b'_')
        || body.windows(2).any(|w| w == b"__")
    {
        return None;
    }
    let digits: Vec<u8> = body.iter().copied().filter(|&b| b != b'_').collect();
    if digits.len() > MAX_STR_DIGITS {
        return None;
    }
    let value = PyInt::parse_radix(&digits, 10)?;
    Some(if negative { value.neg() } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(s: &str) -> Option<String> {
        int_of(&PyValue::str(s)).map(|i| i.to_string())
    }

    #[test]
    fn int_of_strings_follows_cpython() {
        let cases: &[(&str, Option<&str>)] = &[
            ("\x1c5", None),
            (" 5 ", Some("5")),
            ("\u{3000}5\u{3000}", Some("5")),
            ("\u{663}", Some("3")),
            ("+5", Some("5")),
            ("-0", Some("0")),
            ("5_000", Some("5000")),
            ("_5", None),
            ("5_", None),
            ("5__0", None),
            ("0x10", None),
            ("", None),
            (" ", None),
            ("0005", Some("5")),
            ("1\u{a0}", Some("1")),
            ("\u{663}_\u{663}", Some("33")),
            ("5\0", None),
            ("12\u{85}", Some("12")),
            ("\x7f5", None),
            ("-99999999999999999999", Some("-99999999999999999999")),
        ];
        for (text, expected) in cases {
            assert_eq!(int(text).as_deref(), *expected, "int({text:?})");
        }
        assert!(int_of(&PyValue::str(&"1".repeat(4300))).is_some());
        assert!(int_of(&PyValue::str(&"1".repeat(4301))).is_none());
    }

    #[test]
    fn int_of_other_types() {
        let b = |s: &[u8]| int_of(&PyValue::Bytes(s.into())).map(|i| i.to_string());
        assert_eq!(b(b" 12 ").as_deref(), Some("12"));
        assert_eq!(b(b"1_2").as_deref(), Some("12"));
        assert_eq!(b(b"\xd9\xa3"), None);
        let f = |x: f64| int_of(&PyValue::Float(x)).map(|i| i.to_string());
        assert_eq!(f(2.7).as_deref(), Some("2"));
        assert_eq!(f(-2.7).as_deref(), Some("-2"));
        assert_eq!(f(f64::INFINITY), None);
        assert_eq!(f(f64::NAN), None);
        assert_eq!(f(1e20).as_deref(), Some("100000000000000000000"));
        assert_eq!(int_of(&PyValue::None), None);
        assert_eq!(int_of(&PyValue::Bool(true)), Some(PyInt::Small(1)));
    }

    #[test]
    fn float_conversion_rounds_half_to_even() {
        let big = |s: &str| PyInt::parse_decimal(s).and_then(|i| i.to_f64());
        // 2^64 + 2^11 is halfway between two floats: ties go to the even one.
        assert_eq!(big("18446744073709553664"), Some(18446744073709551616.0));
        // One more and it rounds up.
        assert_eq!(big("18446744073709553665"), Some(18446744073709555712.0));
        assert_eq!(big(&format!("1{}", "0".repeat(309))), None);
        assert_eq!(
            PyInt::parse_decimal("18446744073709551617").and_then(|i| i.neg().to_f64()),
            Some(-18446744073709551616.0)
        );
    }

    #[test]
    fn integral_floats_and_normalisation() {
        assert_eq!(PyInt::from_integral_f64(-0.0), Some(PyInt::Small(0)));
        assert_eq!(PyInt::from_integral_f64(0.5), None);
        assert_eq!(
            PyInt::from_integral_f64(1e19)
                .map(|i| i.to_string())
                .as_deref(),
            Some("10000000000000000000")
        );
        assert_eq!(
            PyInt::Small(i64::MIN).neg().to_string(),
            "9223372036854775808"
        );
        assert_eq!(
            PyInt::parse_decimal("9223372036854775808").map(|i| i.neg()),
            Some(PyInt::Small(i64::MIN))
        );
    }
}

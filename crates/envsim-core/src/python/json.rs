//! CPython 3.11's `json.loads(s)` for a `str`, with the C scanner's exact
//! grammar: what it accepts, what it rejects, and the objects it builds.
//!
//! Differences from RFC 8259 that matter to the reference scorer: `NaN`,
//! `Infinity` and `-Infinity` are accepted; whitespace is only space, tab,
//! line feed and carriage return; raw control characters U+0000–U+001F in
//! strings are errors; `\u` escapes may leave lone surrogates; duplicate
//! keys keep the first key's position and the last value; integers are exact
//! but limited to [`MAX_STR_DIGITS`](super::int::MAX_STR_DIGITS) digits;
//! floats overflow to infinity; a leading byte-order mark is an error. The
//! nesting limit comes from Python's recursion limit and so depends on the
//! call site; callers pass the depth that applies to them.

mod dumps;

pub use dumps::{dumps, DumpOptions};

use super::int::{PyInt, MAX_STR_DIGITS};
use super::text;
use super::value::{PyDict, PyValue};

/// Why `json.loads` raised; the reference only needs *that* it raised, the
/// message is for people.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message} (char offset {offset})")]
pub struct JsonError {
    /// Byte offset in the input.
    pub offset: usize,
    /// Python's message, approximately.
    pub message: &'static str,
}

/// `json.loads(text)`; containers may nest `max_depth` levels deep.
///
/// # Errors
///
/// Wherever Python raises (`JSONDecodeError`, `ValueError` for too many
/// digits, `RecursionError`).
pub fn json_loads(text: &[u8], max_depth: usize) -> Result<PyValue, JsonError> {
    if text.starts_with("\u{feff}".as_bytes()) {
        return Err(JsonError {
            offset: 0,
            message: "Unexpected UTF-8 BOM (decode using utf-8-sig)",
        });
    }
    let mut scanner = Scanner {
        text,
        pos: 0,
        depth: 0,
        max_depth,
    };
    scanner.skip_ws();
    let value = scanner.value()?;
    scanner.skip_ws();
    if scanner.pos != text.len() {
        return Err(scanner.error("Extra data"));
    }
    Ok(value)
}

struct Scanner<'a> {
    text: &'a [u8],
    pos: usize,
    depth: usize,
    max_depth: usize,
}

impl Scanner<'_> {
    fn error(&self, message: &'static str) -> JsonError {
        JsonError {
            offset: self.pos,
            message,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &[u8], value: PyValue) -> Result<PyValue, JsonError> {
        if self.text.get(self.pos..self.pos + word.len()) == Some(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            self.number()
        }
    }

    /// `scan_once`: one value at the current position.
    fn value(&mut self) -> Result<PyValue, JsonError> {
        match self.peek() {
            None => Err(self.error("Expecting value")),
            Some(b'"') => {
                self.pos += 1;
                self.string().map(PyValue::Str)
            }
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'n') => self.literal(b"null", PyValue::None),
            Some(b't') => self.literal(b"true", PyValue::Bool(true)),
            Some(b'f') => self.literal(b"false", PyValue::Bool(false)),
            Some(b'N') => self.literal(b"NaN", PyValue::Float(f64::NAN)),
            Some(b'I') => self.literal(b"Infinity", PyValue::Float(f64::INFINITY)),
            Some(b'-') if self.text.get(self.pos..self.pos + 9) == Some(b"-Infinity") => {
                self.pos += 9;
                Ok(PyValue::Float(f64::NEG_INFINITY))
            }
            Some(_) => self.number(),
        }
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    /// `_match_number_unicode`.
    fn number(&mut self) -> Result<PyValue, JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'1'..=b'9') => self.digits(),
            Some(b'0') => self.pos += 1,
            _ => {
                self.pos = start;
                return Err(self.error("Expecting value"));
            }
        }
        let mut is_float = false;
        if self.peek() == Some(b'.')
            && self
                .text
                .get(self.pos + 1)
                .is_some_and(|b| b.is_ascii_digit())
        {
            is_float = true;
            self.pos += 1;
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            let e_start = self.pos;
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            let digits_start = self.pos;
            self.digits();
            if self.pos > digits_start {
                is_float = true;
            } else {
                self.pos = e_start;
            }
        }
        let literal = self.text.get(start..self.pos).unwrap_or_default();
        let literal = std::str::from_utf8(literal).unwrap_or_default();
        if is_float {
            // Rust's parse is correctly rounded and overflows to infinity, as
            // `float()` does.
            return literal
                .parse::<f64>()
                .map(PyValue::Float)
                .map_err(|_| self.error("could not convert string to float"));
        }
        let (negative, digits) = match literal.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, literal),
        };
        if digits.len() > MAX_STR_DIGITS {
            return Err(self.error("Exceeds the limit (4300 digits) for integer string conversion"));
        }
        let value = PyInt::parse_decimal(digits).ok_or_else(|| self.error("Expecting value"))?;
        Ok(PyValue::Int(if negative { value.neg() } else { value }))
    }

    fn enter(&mut self) -> Result<(), JsonError> {
        if self.depth >= self.max_depth {
            return Err(self.error("maximum recursion depth exceeded while decoding"));
        }
        self.depth += 1;
        Ok(())
    }

    fn object(&mut self) -> Result<PyValue, JsonError> {
        self.enter()?;
        self.pos += 1;
        let mut dict = PyDict::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(PyValue::Dict(Box::new(dict)));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.error("Expecting property name enclosed in double quotes"));
            }
            self.pos += 1;
            let key = self.string()?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.error("Expecting ':' delimiter"));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value()?;
            // A str key is always hashable.
            let _ = dict.insert(PyValue::Str(key), value);
            self.skip_ws();
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(PyValue::Dict(Box::new(dict)));
                }
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                }
                _ => return Err(self.error("Expecting ',' delimiter")),
            }
        }
    }

    fn array(&mut self) -> Result<PyValue, JsonError> {
        self.enter()?;
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(PyValue::List(items));
        }
        loop {
            items.push(self.value()?);
            self.skip_ws();
            match self.peek() {
                Some(b']') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(PyValue::List(items));
                }
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                }
                _ => return Err(self.error("Expecting ',' delimiter")),
            }
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.text.get(at..at + 4)?;
        digits.iter().try_fold(0u32, |acc, &d| {
            char::from(d).to_digit(16).map(|v| (acc << 4) | v)
        })
    }

    /// `scanstring` in strict mode, the opening quote already consumed.
    fn string(&mut self) -> Result<super::value::PyStr, JsonError> {
        let mut out = Vec::new();
        loop {
            let Some(b) = self.peek() else {
                return Err(self.error("Unterminated string starting at"));
            };
            match b {
                b'"' => {
                    self.pos += 1;
                    return Ok(super::value::PyStr::from_wtf(out));
                }
                0x00..=0x1F => return Err(self.error("Invalid control character at")),
                b'\\' => {
                    self.pos += 1;
                    let escaped = match self.peek() {
                        None => return Err(self.error("Unterminated string starting at")),
                        Some(b'"') => b'"',
                        Some(b'\\') => b'\\',
                        Some(b'/') => b'/',
                        Some(b'b') => 0x08,
                        Some(b'f') => 0x0C,
                        Some(b'n') => b'\n',
                        Some(b'r') => b'\r',
                        Some(b't') => b'\t',
                        Some(b'u') => {
                            self.unicode_escape(&mut out)?;
                            continue;
                        }
                        Some(_) => return Err(self.error("Invalid \\escape")),
                    };
                    out.push(escaped);
                    self.pos += 1;
                }
                _ => {
                    out.push(b);
                    self.pos += 1;
                }
            }
        }
    }

    /// `\uXXXX`, the position on the `u`; a high surrogate followed by an
    /// escaped low surrogate makes one code point.
    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> Result<(), JsonError> {
        let Some(first) = self.hex4(self.pos + 1) else {
            return Err(self.error("Invalid \\uXXXX escape"));
        };
        self.pos += 5;
        let mut cp = first;
        if (0xD800..=0xDBFF).contains(&first)
            && self.text.get(self.pos..self.pos + 2) == Some(b"\\u")
        {
            if let Some(second) = self.hex4(self.pos + 2) {
                if (0xDC00..=0xDFFF).contains(&second) {
                    cp = 0x1_0000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                    self.pos += 6;
                }
            }
        }
        text::encode(cp, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::repr::repr;

    fn loads(s: &str) -> Option<String> {
        json_loads(s.as_bytes(), 988).ok().map(|v| repr(&v))
    }

    #[test]
    fn accepts_what_python_accepts() {
        let cases: &[(&str, &str)] = &[
            (
                " {\"a\": [1, 2.5, null, true]} \n",
                "{'a': [1, 2.5, None, True]}",
            ),
            ("NaN", "nan"),
            ("[-Infinity, Infinity]", "[-inf, inf]"),
            ("1e400", "inf"),
            ("-0", "0"),
            ("-0.0", "-0.0"),
            ("{\"a\": 1, \"b\": 2, \"a\": 3}", "{'a': 3, 'b': 2}"),
            ("\"\\ud83d\\ude00\"", "'\u{1f600}'"),
            ("\"\\ud800x\"", "'\\ud800x'"),
            ("\"\\u00e9\\/\"", "'\u{e9}/'"),
            (
                "123456789012345678901234567890",
                "123456789012345678901234567890",
            ),
            ("\"\u{7f}\"", "'\\x7f'"),
        ];
        for (text, expected) in cases {
            assert_eq!(loads(text).as_deref(), Some(*expected), "{text:?}");
        }
    }

    #[test]
    fn rejects_what_python_rejects() {
        for text in [
            "",
            " ",
            "[1,]",
            "{\"a\": 1,}",
            "{'a': 1}",
            "01",
            "1.",
            ".5",
            "1e",
            "+1",
            "-",
            "\"a\nb\"",
            "\"\\x41\"",
            "\"\\u12\"",
            "[1] x",
            "\u{feff}[]",
            "\u{a0}1",
            "True",
            "nan",
            "\"abc",
            "{\"a\" 1}",
        ] {
            assert_eq!(loads(text), None, "{text:?}");
        }
        assert!(loads(&"1".repeat(4300)).is_some());
        assert!(loads(&"1".repeat(4301)).is_none());
    }

    #[test]
    fn depth_limit() {
        let nested = |d: usize| format!("{}{}", "[".repeat(d), "]".repeat(d));
        assert!(json_loads(nested(988).as_bytes(), 988).is_ok());
        assert!(json_loads(nested(989).as_bytes(), 988).is_err());
    }
}

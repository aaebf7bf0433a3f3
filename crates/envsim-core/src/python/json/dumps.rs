//! CPython's `json.dumps`, byte for byte.
//!
//! Published prompts and files of the reference benchmark were produced by Python's `json`
//! module, whose spelling differs from `serde_json`'s: `", "` and `": "` separators, floats as
//! `float.__repr__` (`1e+16`, `1e-05`), `\uXXXX` escapes for every non-ASCII character by
//! default. Reproducing those texts exactly — so that scores stay comparable with published
//! tables — needs this module instead of `serde_json::to_string`.
//!
//! [`dumps`] covers `json.dumps(value, indent=..., ensure_ascii=...)` of CPython 3.8 and later
//! with all other arguments at their defaults (`sort_keys=False`, `allow_nan=True`, default
//! separators). Keys keep their order (`serde_json` is built with `preserve_order`).

use crate::python::repr::py_float_repr;
use serde_json::Value;
use std::fmt::Write as _;

/// Options of [`dumps`], named and defaulted like `json.dumps`'s keyword arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DumpOptions {
    /// `indent=`: `None` writes everything on one line with `", "` between items; `Some(n)`
    /// puts every item on its own line indented by `n` spaces per level, with `","` between
    /// items (`Some(0)` still breaks lines, as in Python).
    pub indent: Option<usize>,
    /// `ensure_ascii=`: escape every non-ASCII character (and DEL, U+007F) as `\uXXXX`;
    /// otherwise such characters are written as they are.
    pub ensure_ascii: bool,
}

impl Default for DumpOptions {
    /// `json.dumps`'s defaults: no indentation, `ensure_ascii=True`.
    fn default() -> Self {
        DumpOptions {
            indent: None,
            ensure_ascii: true,
        }
    }
}

/// Serializes `value` exactly as CPython's `json.dumps(value, indent=options.indent,
/// ensure_ascii=options.ensure_ascii)` does for the equivalent Python object.
///
/// Integers print as they are; other numbers like `float.__repr__` (non-finite ones, which
/// only a hand-built `serde_json::Number` can hold, as `Infinity`, `-Infinity`, `NaN`). Empty
/// arrays and objects stay `[]` and `{}` even when indenting. Works without recursion, so any
/// nesting depth is fine.
pub fn dumps(value: &Value, options: DumpOptions) -> String {
    let mut writer = Writer {
        out: String::new(),
        options,
        indent_unit: " ".repeat(options.indent.unwrap_or(0)),
    };
    // Containers being written, innermost last; each knows whether it has written an item.
    let mut open: Vec<OpenContainer<'_>> = Vec::new();
    writer.start_value(value, &mut open);
    loop {
        let depth = open.len();
        let Some(container) = open.last_mut() else {
            break;
        };
        let next = match container {
            OpenContainer::Array { items, started } => items.next().inspect(|_| {
                writer.item_separator(std::mem::replace(started, true), depth);
            }),
            OpenContainer::Object { entries, started } => entries.next().map(|(key, item)| {
                writer.item_separator(std::mem::replace(started, true), depth);
                writer.string(key);
                writer.out.push_str(": ");
                item
            }),
        };
        match next {
            Some(item) => writer.start_value(item, &mut open),
            None => {
                let closing = match open.pop() {
                    Some(OpenContainer::Array { .. }) => ']',
                    _ => '}',
                };
                writer.newline(depth - 1);
                writer.out.push(closing);
            }
        }
    }
    writer.out
}

/// An array or object whose items are being written.
enum OpenContainer<'a> {
    /// An array and its remaining items.
    Array {
        items: std::slice::Iter<'a, Value>,
        started: bool,
    },
    /// An object and its remaining entries.
    Object {
        entries: serde_json::map::Iter<'a>,
        started: bool,
    },
}

/// The output being built and how to spell it.
struct Writer {
    out: String,
    options: DumpOptions,
    /// One level of indentation.
    indent_unit: String,
}

impl Writer {
    /// Writes a scalar or an empty container whole; opens a non-empty container (writing its
    /// opening bracket) and pushes it onto `open` for the caller to fill.
    fn start_value<'a>(&mut self, value: &'a Value, open: &mut Vec<OpenContainer<'a>>) {
        match value {
            Value::Null => self.out.push_str("null"),
            Value::Bool(true) => self.out.push_str("true"),
            Value::Bool(false) => self.out.push_str("false"),
            Value::Number(number) => self.number(number),
            Value::String(text) => self.string(text),
            Value::Array(items) if items.is_empty() => self.out.push_str("[]"),
            Value::Object(entries) if entries.is_empty() => self.out.push_str("{}"),
            Value::Array(items) => {
                self.out.push('[');
                open.push(OpenContainer::Array {
                    items: items.iter(),
                    started: false,
                });
            }
            Value::Object(entries) => {
                self.out.push('{');
                open.push(OpenContainer::Object {
                    entries: entries.iter(),
                    started: false,
                });
            }
        }
    }

    /// What precedes an item at `depth`: `", "` between items on one line; with indentation,
    /// `","` between items and a newline before each.
    fn item_separator(&mut self, after_another_item: bool, depth: usize) {
        match (self.options.indent.is_some(), after_another_item) {
            (false, true) => self.out.push_str(", "),
            (false, false) => {}
            (true, true) => {
                self.out.push(',');
                self.newline(depth);
            }
            (true, false) => self.newline(depth),
        }
    }

    /// With indentation, a newline and `depth` indentation units; nothing otherwise.
    fn newline(&mut self, depth: usize) {
        if self.options.indent.is_some() {
            self.out.push('\n');
            for _ in 0..depth {
                self.out.push_str(&self.indent_unit);
            }
        }
    }

    /// Integers as they are, floats as `float.__repr__`, non-finite floats the way
    /// `json.dumps` spells them with `allow_nan=True`.
    fn number(&mut self, number: &serde_json::Number) {
        if number.is_i64() || number.is_u64() {
            let _ = write!(self.out, "{number}");
            return;
        }
        match number.as_f64() {
            Some(f) if f.is_nan() => self.out.push_str("NaN"),
            Some(f) if f == f64::INFINITY => self.out.push_str("Infinity"),
            Some(f) if f == f64::NEG_INFINITY => self.out.push_str("-Infinity"),
            Some(f) => self.out.push_str(&py_float_repr(f)),
            None => self.out.push_str("NaN"),
        }
    }

    /// A quoted string with `json`'s escapes: the short forms for `"`, `\\`, `\n`, `\r`, `\t`,
    /// `\b`, `\f`; `\u00XX` for other control characters; with `ensure_ascii`, `\uXXXX`
    /// (lowercase hex; a surrogate pair beyond the BMP) for everything outside `' '..='~'`.
    fn string(&mut self, text: &str) {
        self.out.reserve(text.len() + 2);
        self.out.push('"');
        for c in text.chars() {
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                '\t' => self.out.push_str("\\t"),
                '\u{8}' => self.out.push_str("\\b"),
                '\u{c}' => self.out.push_str("\\f"),
                ' '..='~' => self.out.push(c),
                c if c < ' ' || self.options.ensure_ascii => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        let _ = write!(self.out, "\\u{unit:04x}");
                    }
                }
                // Without `ensure_ascii`, CPython writes DEL and all non-ASCII raw.
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PRETTY: DumpOptions = DumpOptions {
        indent: Some(2),
        ensure_ascii: true,
    };
    const RAW_UNICODE: DumpOptions = DumpOptions {
        indent: None,
        ensure_ascii: false,
    };

    #[test]
    fn defaults_are_json_dumps_defaults() {
        assert_eq!(
            DumpOptions::default(),
            DumpOptions {
                indent: None,
                ensure_ascii: true
            }
        );
    }

    #[test]
    fn compact_output_uses_spaced_separators_and_keeps_key_order() {
        let value = json!({"z": 1, "a": [true, false, null], "m": {"k": "v"}, "e": [], "o": {}});
        assert_eq!(
            dumps(&value, DumpOptions::default()),
            r#"{"z": 1, "a": [true, false, null], "m": {"k": "v"}, "e": [], "o": {}}"#
        );
        assert_eq!(dumps(&json!([]), DumpOptions::default()), "[]");
        assert_eq!(dumps(&json!("x"), DumpOptions::default()), r#""x""#);
    }

    #[test]
    fn indented_output_matches_python() {
        let value = json!({"a": [], "b": {}, "c": [1, {"d": []}]});
        assert_eq!(
            dumps(&value, PRETTY),
            "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    1,\n    {\n      \"d\": []\n    }\n  ]\n}"
        );
        let zero = DumpOptions {
            indent: Some(0),
            ensure_ascii: true,
        };
        assert_eq!(dumps(&json!([1, [2]]), zero), "[\n1,\n[\n2\n]\n]");
        assert_eq!(dumps(&json!({}), PRETTY), "{}");
    }

    #[test]
    fn numbers_are_python_ints_and_float_reprs() {
        let value = json!([1e16, 1.0, 1e-5, 0.0001, -0.0, 0.1, 1.5e300, 123456789.125]);
        assert_eq!(
            dumps(&value, DumpOptions::default()),
            "[1e+16, 1.0, 1e-05, 0.0001, -0.0, 0.1, 1.5e+300, 123456789.125]"
        );
        let ints = json!([0, -1, i64::MIN, u64::MAX]);
        assert_eq!(
            dumps(&ints, DumpOptions::default()),
            "[0, -1, -9223372036854775808, 18446744073709551615]"
        );
    }

    #[test]
    fn strings_use_pythons_escapes() {
        let text = "q\"b\\n\nr\rt\tb\u{8}f\u{c}\u{1}\u{1f}\u{7f}é€😀";
        assert_eq!(
            dumps(&json!(text), DumpOptions::default()),
            r#""q\"b\\n\nr\rt\tb\bf\f\u0001\u001f\u007f\u00e9\u20ac\ud83d\ude00""#
        );
        assert_eq!(
            dumps(&json!(text), RAW_UNICODE),
            "\"q\\\"b\\\\n\\nr\\rt\\tb\\bf\\f\\u0001\\u001f\u{7f}é€😀\""
        );
        assert_eq!(dumps(&json!({"clé": "ü"}), RAW_UNICODE), "{\"clé\": \"ü\"}");
        assert_eq!(
            dumps(&json!({"clé": "ü"}), DumpOptions::default()),
            r#"{"cl\u00e9": "\u00fc"}"#
        );
    }

    #[test]
    fn deep_nesting_does_not_recurse() {
        let mut value = json!(0);
        for _ in 0..100_000 {
            value = Value::Array(vec![value]);
        }
        let text = dumps(&value, DumpOptions::default());
        // Dropping a Value this deep recurses inside serde_json (and a failed assertion would
        // drop it while unwinding), so take it apart level by level before asserting.
        while let Value::Array(mut items) = value {
            value = items.pop().unwrap_or(Value::Null);
        }
        let expected = format!("{}0{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(text == expected, "{}", text.len());
    }
}

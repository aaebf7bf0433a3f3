//! A parser for literal values written as JSON, as Python `repr()` output, or
//! as the loose mixture of both that language models tend to produce.
//!
//! Model outputs and the reference benchmark's recorded data contain values in
//! three notations, so the parser has three [`Dialect`]s that share one
//! implementation:
//!
//! * [`Dialect::Json`]: strict RFC 8259, the same language `serde_json`
//!   accepts.
//! * [`Dialect::Python`]: what CPython 3.11's `ast.literal_eval` accepts for
//!   the value types that occur in the `repr()` of JSON-like data (dicts,
//!   lists, tuples, sets, `str`/`bytes` literals, numbers, `True`/`False`/
//!   `None`), mapped onto JSON values. Like Python, it allows `#` comments
//!   and, inside brackets, line breaks; like `ast.literal_eval`, it rejects
//!   a text whose first line with content is indented after a line break.
//! * [`Dialect::Relaxed`]: the union of the two, plus raw control characters
//!   (newlines, tabs) inside quoted strings.
//!
//! Every result is a [`serde_json::Value`], so some Python values need a
//! mapping, chosen to keep the data rather than reject it:
//!
//! * tuples and sets become arrays, in written order (a set keeps duplicates:
//!   JSON has no set type, and the written order is the only stable one);
//! * `bytes` literals become the string they decode to as UTF-8;
//! * integers that fit `i64`/`u64` become JSON integers and larger ones become
//!   `f64` (the same rule `serde_json` uses), so `1` and `1.0` stay
//!   distinguishable: the first is an integer [`serde_json::Number`], the
//!   second a float;
//! * dictionary keys that are not strings become the text of Python's
//!   `str()` of the key: `1` → `"1"`, `1.5` → `"1.5"`, `True` → `"True"`,
//!   `None` → `"None"` (in [`Dialect::Relaxed`], `true`/`null` keys become
//!   `"True"`/`"None"` too). Container keys cannot be written as JSON object
//!   keys and are rejected with [`LiteralErrorKind::InvalidDictKey`].
//!   Duplicate keys keep the last value at the position of the first, as
//!   Python dicts do.
//!
//! Values JSON cannot hold (NaN, infinities, complex numbers, `Ellipsis`) are
//! rejected with [`LiteralErrorKind::UnsupportedSyntax`] or
//! [`LiteralErrorKind::NumberOutOfRange`] rather than approximated.
//!
//! The parser is a recursive-descent parser whose recursion is bounded by
//! [`MAX_DEPTH`]; it never panics, and on failure reports the byte offset of
//! the problem. Input that ends in the middle of a value always fails with
//! [`LiteralErrorKind::UnexpectedEnd`], which is how callers recognise
//! truncated model output.

mod numbers;
mod parser;
mod strings;
#[cfg(test)]
mod tests;

use std::borrow::Cow;

use serde_json::Value;

use parser::Parser;

/// The deepest nesting of containers the parser accepts: 128 nested
/// lists/dicts/tuples/sets (grouping parentheses count too) parse, the 129th
/// level fails with [`LiteralErrorKind::TooDeep`].
///
/// The limit keeps recursion (and stack use) bounded on hostile input. It is
/// the number `serde_json` uses by default, although `serde_json` counts one
/// level differently and already rejects the 128th level.
pub const MAX_DEPTH: usize = 128;

/// The notation a text is parsed in. See the [module docs](self) for the exact
/// language of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// Strict JSON (RFC 8259).
    Json,
    /// Python literals as accepted by `ast.literal_eval`.
    Python,
    /// JSON and Python literals mixed, for model output.
    Relaxed,
}

impl Dialect {
    /// Whether Python-only syntax (single quotes, tuples, `True`, ...) is on.
    fn python_syntax(self) -> bool {
        !matches!(self, Dialect::Json)
    }

    /// Whether JSON-only syntax (`true`, `\/`, `-0` as a float) is on.
    fn json_syntax(self) -> bool {
        !matches!(self, Dialect::Python)
    }
}

/// Why a text could not be parsed, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} at byte {offset}")]
pub struct LiteralError {
    /// Byte offset into the parsed text where the problem was detected; use
    /// [`locate`] to turn it into a line and column.
    pub offset: usize,
    /// What went wrong.
    pub kind: LiteralErrorKind,
}

/// The kinds of [`LiteralError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiteralErrorKind {
    /// The input ended inside a value; this is how truncated output is
    /// recognised. The offset is the length of the input.
    #[error("unexpected end of input")]
    UnexpectedEnd,
    /// A character that cannot appear at this point.
    #[error("unexpected character {0:?}")]
    UnexpectedChar(char),
    /// A malformed escape sequence in a string (`\x4`, `\U00110000`, or in
    /// JSON any escape outside the JSON set).
    #[error("invalid escape sequence")]
    InvalidEscape,
    /// A malformed number (`01`, `1e`, `0b12`, `1_`).
    #[error("invalid number")]
    InvalidNumber,
    /// A number JSON cannot hold: it overflows `f64`, or is an integer too
    /// long to convert (as CPython refuses to as well).
    #[error("number out of range")]
    NumberOutOfRange,
    /// Containers nested deeper than [`MAX_DEPTH`].
    #[error("nesting deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// Something other than whitespace follows a complete value.
    #[error("trailing characters after the value")]
    TrailingCharacters,
    /// Syntax the dialect knows but JSON values cannot represent, or that is
    /// deliberately not supported: `"NaN"`, `"complex number"`,
    /// ``"name `foo`"``, `"f-string"`, `"\N{...} escape"`, ...
    #[error("unsupported syntax: {0}")]
    UnsupportedSyntax(Cow<'static, str>),
    /// A `\u`/`\U` escape that denotes half of a UTF-16 surrogate pair
    /// without its other half.
    #[error("lone surrogate in escape sequence")]
    LoneSurrogate,
    /// A dictionary key that cannot become a JSON object key (a list, dict,
    /// tuple or set), or in JSON a key that is not a string.
    #[error("dictionary key cannot be represented as a JSON object key")]
    InvalidDictKey,
    /// The input is empty or whitespace only.
    #[error("empty input")]
    EmptyInput,
}

/// Parses the whole of `text` as one value in `dialect`.
///
/// Whitespace around the value is allowed; anything else after it is a
/// [`LiteralErrorKind::TrailingCharacters`] error. In the Python dialects a
/// top-level comma makes a parenthesis-free tuple (`1, 2` → `[1, 2]`), as it
/// does for `ast.literal_eval`.
///
/// # Errors
///
/// Returns the first problem found, with its byte offset.
pub fn parse_literal(text: &str, dialect: Dialect) -> Result<Value, LiteralError> {
    if dialect == Dialect::Python {
        check_leading_indentation(text)?;
    }
    let mut p = Parser::new(text, dialect);
    p.skip_ws_all();
    if p.at_end() {
        return Err(p.error_at(p.pos, LiteralErrorKind::EmptyInput));
    }
    let first = p.parse_value()?;
    let value = if dialect.python_syntax() {
        p.skip_ws();
        if p.peek() == Some(b',') {
            p.parse_bare_tuple(first)?
        } else {
            first.into_value()?
        }
    } else {
        first.into_value()?
    };
    p.skip_ws_all();
    if !p.at_end() {
        return Err(p.error_at(p.pos, LiteralErrorKind::TrailingCharacters));
    }
    if dialect == Dialect::Python {
        check_trailing_indentation(text)?;
    }
    Ok(value)
}

/// Rejects what `ast.literal_eval` rejects as "unexpected indent" at the
/// start of the text: only spaces and tabs are stripped from the front, so
/// when the text starts with a line break, the first line with content must
/// not be indented. Blank and comment-only lines do not count, a form feed
/// resets the indentation, and a line continuation joins the next line.
fn check_leading_indentation(text: &str) -> Result<(), LiteralError> {
    let bytes = text.as_bytes();
    let mut i = bytes
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    loop {
        let mut indent_at = None;
        loop {
            match (bytes.get(i), bytes.get(i + 1), bytes.get(i + 2)) {
                (Some(b' ' | b'\t'), _, _) => {
                    indent_at.get_or_insert(i);
                    i += 1;
                }
                (Some(0x0c), _, _) => {
                    indent_at = None;
                    i += 1;
                }
                (Some(b'\\'), Some(b'\r'), Some(b'\n')) => i += 3,
                (Some(b'\\'), Some(b'\n' | b'\r'), _) => i += 2,
                _ => break,
            }
        }
        match bytes.get(i) {
            // Whitespace only: reported as empty input by the parser.
            None => return Ok(()),
            Some(b'\n' | b'\r') => i += 1,
            Some(b'#') => {
                while bytes.get(i).is_some_and(|&b| b != b'\n' && b != b'\r') {
                    i += 1;
                }
            }
            Some(_) => {
                return match indent_at {
                    Some(at) => Err(indent_error(bytes, at)),
                    None => Ok(()),
                }
            }
        }
    }
}

/// The other half of CPython's "unexpected indent" quirk, checked once a
/// value has been read completely: a last line that consists of spaces or
/// tabs only, without a final line break, counts as indented (`"6\n "`
/// fails, `"6\n \n"` and `"6  "` do not).
fn check_trailing_indentation(text: &str) -> Result<(), LiteralError> {
    let bytes = text.as_bytes();
    let Some(last_break) = text.rfind(['\n', '\r']) else {
        return Ok(());
    };
    let line_start = last_break + 1;
    let last_line = bytes.get(line_start..).unwrap_or_default();
    let indent_start = last_line
        .iter()
        .rposition(|&b| b == 0x0c)
        .map_or(0, |p| p + 1);
    let only_blanks = last_line.iter().all(|&b| matches!(b, b' ' | b'\t' | 0x0c));
    if only_blanks && last_line.len() > indent_start {
        return Err(indent_error(bytes, line_start + indent_start));
    }
    Ok(())
}

fn indent_error(bytes: &[u8], at: usize) -> LiteralError {
    LiteralError {
        offset: at,
        kind: LiteralErrorKind::UnexpectedChar(char::from(bytes.get(at).copied().unwrap_or(b' '))),
    }
}

/// Parses one value at the start of `text` (after optional whitespace) and
/// returns it with the byte offset just past it.
///
/// Used to pick a value out of surrounding text: nothing after the value is
/// looked at, except that in the Python dialects adjacent string literals are
/// joined (`'a' 'b'`), as Python does. A top-level comma does not make a
/// tuple here.
///
/// # Errors
///
/// Returns the first problem found, with its byte offset;
/// [`LiteralErrorKind::EmptyInput`] if `text` holds only whitespace.
pub fn parse_literal_prefix(text: &str, dialect: Dialect) -> Result<(Value, usize), LiteralError> {
    let mut p = Parser::new(text, dialect);
    p.skip_ws_all();
    if p.at_end() {
        return Err(p.error_at(p.pos, LiteralErrorKind::EmptyInput));
    }
    let value = p.parse_value()?.into_value()?;
    Ok((value, p.pos))
}

/// Converts a byte `offset` into `text` into a 1-based line and a 1-based
/// column counted in characters, for error messages meant for people.
///
/// Lines are separated by `\n` (a `\r` before it counts as a character of the
/// line). Offsets past the end are clamped to the end, and an offset inside a
/// multi-byte character refers to that character.
pub fn locate(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = text.get(..end).unwrap_or("");
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let column = before.get(line_start..).unwrap_or("").chars().count() + 1;
    (line, column)
}

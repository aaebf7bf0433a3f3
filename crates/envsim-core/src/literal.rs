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

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

use crate::pyrepr::py_float_repr;

/// The deepest nesting of containers the parser accepts: 128 nested
/// lists/dicts/tuples/sets (grouping parentheses count too) parse, the 129th
/// level fails with [`LiteralErrorKind::TooDeep`].
///
/// The limit keeps recursion (and stack use) bounded on hostile input. It is
/// the number `serde_json` uses by default, although `serde_json` counts one
/// level differently and already rejects the 128th level.
pub const MAX_DEPTH: usize = 128;

/// CPython 3.11 refuses to convert decimal integers with more digits than this
/// (`sys.get_int_max_str_digits()`), so longer decimal literals are rejected
/// as out of range.
const PY_INT_MAX_STR_DIGITS: usize = 4300;

/// Upper bound on the bit length of integers written in base 2, 8 or 16. It
/// is slightly above what [`PY_INT_MAX_STR_DIGITS`] decimal digits can hold,
/// so no integer that Python could turn into a dictionary key is rejected,
/// while the cost of converting a huge literal stays bounded.
const MAX_INT_BITS: usize = 14_400;

/// Longest identifier echoed back in an error message; keeps messages short
/// when the input contains a long run of letters.
const MAX_NAME_IN_MESSAGE: usize = 32;

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

/// A parsed value together with what Python type it came from, which decides
/// whether it can be a dict key or set element and how a key is spelt.
struct Parsed {
    value: Value,
    kind: Kind,
    /// Byte offset where the value starts, for errors found later.
    start: usize,
}

/// The Python type of a parsed value.
enum Kind {
    Str,
    Int(IntRepr),
    Float,
    Bool,
    Null,
    List,
    Tuple { hashable: bool },
    Dict,
    Set,
}

/// How an integer is stored, so that its exact decimal text can be recovered
/// when it is used as a dict key even if its JSON value is an `f64`.
enum IntRepr {
    /// The JSON value is an exact integer.
    Small,
    /// `-0` in the JSON dialects, whose value is the float `-0.0`.
    NegativeZero,
    /// Too large for `i64`/`u64`: the magnitude in base 2^32 limbs, least
    /// significant first. `in_range` is false when even `f64` overflows, in
    /// which case the value can only be used as a dict key.
    Big {
        negative: bool,
        limbs: Vec<u32>,
        in_range: bool,
    },
}

impl Kind {
    /// Whether Python could hash the value (put it in a set or use it as a
    /// dict key).
    fn is_hashable(&self) -> bool {
        match self {
            Kind::Str | Kind::Int(_) | Kind::Float | Kind::Bool | Kind::Null => true,
            Kind::Tuple { hashable } => *hashable,
            Kind::List | Kind::Dict | Kind::Set => false,
        }
    }
}

impl Parsed {
    /// Turns the parsed value into a JSON value, failing for integers that
    /// were only representable as dict keys.
    fn into_value(self) -> Result<Value, LiteralError> {
        match self.kind {
            Kind::Int(IntRepr::Big {
                in_range: false, ..
            }) => Err(LiteralError {
                offset: self.start,
                kind: LiteralErrorKind::NumberOutOfRange,
            }),
            _ => Ok(self.value),
        }
    }

    /// Turns the parsed value into a JSON object key: Python's `str()` of
    /// the key (see the module docs for why).
    fn into_key(self) -> Result<String, LiteralError> {
        let invalid = LiteralError {
            offset: self.start,
            kind: LiteralErrorKind::InvalidDictKey,
        };
        match (self.kind, self.value) {
            (Kind::Str, Value::String(s)) => Ok(s),
            (Kind::Bool, Value::Bool(b)) => Ok(if b { "True" } else { "False" }.to_owned()),
            (Kind::Null, _) => Ok("None".to_owned()),
            (Kind::Float, Value::Number(n)) => Ok(py_float_repr(n.as_f64().unwrap_or(0.0))),
            (Kind::Int(IntRepr::NegativeZero), _) => Ok("0".to_owned()),
            (Kind::Int(IntRepr::Small), Value::Number(n)) => Ok(n.to_string()),
            (
                Kind::Int(IntRepr::Big {
                    negative, limbs, ..
                }),
                _,
            ) => {
                let digits = limbs_to_decimal(&limbs);
                Ok(if negative {
                    format!("-{digits}")
                } else {
                    digits
                })
            }
            _ => Err(invalid),
        }
    }
}

/// Whether a string literal denotes `str` or `bytes`, and whether escapes
/// are processed; derived from its prefix letters.
#[derive(Clone, Copy)]
struct Prefix {
    raw: bool,
    bytes: bool,
    format: bool,
}

/// The contents of a string literal being built.
enum Buf {
    Text(String),
    Bytes(Vec<u8>),
}

impl Buf {
    fn push_char(&mut self, c: char) {
        match self {
            Buf::Text(s) => s.push(c),
            Buf::Bytes(b) => {
                let mut tmp = [0u8; 4];
                b.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
            }
        }
    }

    fn push_str(&mut self, s: &str) {
        match self {
            Buf::Text(t) => t.push_str(s),
            Buf::Bytes(b) => b.extend_from_slice(s.as_bytes()),
        }
    }

    /// Pushes the result of a numeric escape: a code point in `str`, a byte
    /// in `bytes` (Python keeps only the low 8 bits of octal escapes there).
    fn push_code(&mut self, code: u32) {
        match self {
            Buf::Text(s) => s.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER)),
            Buf::Bytes(b) => b.push((code & 0xFF) as u8),
        }
    }

    fn is_bytes(&self) -> bool {
        matches!(self, Buf::Bytes(_))
    }
}

/// Result of lexing a Python number token.
enum PyNumber {
    Int { digits: String, radix: u32 },
    Float(f64),
}

type PResult<T> = Result<T, LiteralError>;

/// Recursive-descent parser state. `pos` is always on a character boundary.
struct Parser<'a> {
    text: &'a str,
    pos: usize,
    dialect: Dialect,
    /// Number of open containers and grouping parentheses.
    depth: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, dialect: Dialect) -> Self {
        Parser {
            text,
            pos: 0,
            dialect,
            depth: 0,
        }
    }

    fn error_at(&self, offset: usize, kind: LiteralErrorKind) -> LiteralError {
        LiteralError { offset, kind }
    }

    fn end_error(&self) -> LiteralError {
        self.error_at(self.text.len(), LiteralErrorKind::UnexpectedEnd)
    }

    /// The error for whatever is at the current position when it is not what
    /// the grammar needs: end of input or an unexpected character.
    fn unexpected_here(&self) -> LiteralError {
        match self.peek_char() {
            None => self.end_error(),
            Some(c) => self.error_at(self.pos, LiteralErrorKind::UnexpectedChar(c)),
        }
    }

    fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.text
            .as_bytes()
            .get(self.pos.saturating_add(ahead))
            .copied()
    }

    fn peek_char(&self) -> Option<char> {
        self.text.get(self.pos..).and_then(|s| s.chars().next())
    }

    fn slice(&self, from: usize, to: usize) -> &'a str {
        self.text.get(from..to).unwrap_or("")
    }

    /// Skips whitespace between tokens. Python only allows line breaks
    /// inside brackets (outside them a line break ends the expression), so
    /// they are skipped there only at depth > 0.
    fn skip_ws(&mut self) {
        let newlines = !matches!(self.dialect, Dialect::Python) || self.depth > 0;
        self.skip_ws_inner(newlines);
    }

    /// Skips whitespace including line breaks: used before the value and at
    /// the end of the text, where every dialect allows them.
    fn skip_ws_all(&mut self) {
        self.skip_ws_inner(true);
    }

    fn skip_ws_inner(&mut self, newlines: bool) {
        let python = self.dialect.python_syntax();
        loop {
            match self.peek() {
                Some(b' ' | b'\t') => self.pos += 1,
                Some(b'\n' | b'\r') if newlines => self.pos += 1,
                Some(0x0c) if python => self.pos += 1,
                // A comment runs to the end of the line.
                Some(b'#') if python => {
                    while self.peek().is_some_and(|b| b != b'\n' && b != b'\r') {
                        self.pos += 1;
                    }
                }
                // Python's explicit line joining: a backslash at the end of a
                // line. A line may not be joined with the end of the text.
                Some(b'\\') if python => {
                    let len = match (self.peek_at(1), self.peek_at(2)) {
                        (Some(b'\r'), Some(b'\n')) => 3,
                        (Some(b'\n' | b'\r'), _) => 2,
                        _ => return,
                    };
                    if self.pos + len >= self.text.len()
                        && self.depth == 0
                        && self.dialect == Dialect::Python
                    {
                        return;
                    }
                    self.pos += len;
                }
                _ => return,
            }
        }
    }

    /// Enters a container or grouping parenthesis at `at`, enforcing
    /// [`MAX_DEPTH`].
    fn enter(&mut self, at: usize) -> PResult<()> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error_at(at, LiteralErrorKind::TooDeep));
        }
        self.depth += 1;
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn parse_value(&mut self) -> PResult<Parsed> {
        let python = self.dialect.python_syntax();
        let Some(b) = self.peek() else {
            return Err(self.end_error());
        };
        match b {
            b'{' => self.parse_brace(),
            b'[' => self.parse_list(),
            b'(' if python => self.parse_paren(),
            b'"' => self.parse_string_value(Prefix {
                raw: false,
                bytes: false,
                format: false,
            }),
            b'\'' if python => self.parse_string_value(Prefix {
                raw: false,
                bytes: false,
                format: false,
            }),
            b'-' | b'0'..=b'9' => self.parse_number_value(),
            b'+' | b'.' if python => self.parse_number_value(),
            _ => {
                let c = self.peek_char().unwrap_or(char::REPLACEMENT_CHARACTER);
                if is_ident_start(c) {
                    if python {
                        if let Some((prefix, len)) = self.string_prefix() {
                            self.pos += len;
                            return self.parse_string_value(prefix);
                        }
                    }
                    self.parse_name()
                } else {
                    Err(self.unexpected_here())
                }
            }
        }
    }

    /// Parses the rest of a top-level tuple written without parentheses
    /// (`1, 2`), the current position being on the comma after `first`.
    fn parse_bare_tuple(&mut self, first: Parsed) -> PResult<Value> {
        let mut items = vec![first.into_value()?];
        while self.peek() == Some(b',') {
            self.pos += 1;
            self.skip_ws();
            let save = self.pos;
            self.skip_ws_all();
            if self.at_end() {
                break;
            }
            self.pos = save;
            items.push(self.parse_value()?.into_value()?);
            self.skip_ws();
        }
        Ok(Value::Array(items))
    }

    fn parse_list(&mut self) -> PResult<Parsed> {
        let start = self.pos;
        self.enter(start)?;
        self.pos += 1;
        let (items, _) = self.parse_seq(b']', false, true)?;
        self.leave();
        Ok(Parsed {
            value: Value::Array(items),
            kind: Kind::List,
            start,
        })
    }

    /// Parses comma-separated values up to and including `close`.
    ///
    /// `require_hashable` rejects unhashable elements (sets); `may_be_empty`
    /// says whether `close` may come before any element. Returns the values
    /// and whether all of them are hashable.
    fn parse_seq(
        &mut self,
        close: u8,
        require_hashable: bool,
        may_be_empty: bool,
    ) -> PResult<(Vec<Value>, bool)> {
        let mut items = Vec::new();
        let mut hashable = true;
        let trailing_comma_ok = self.dialect.python_syntax();
        loop {
            self.skip_ws();
            if self.peek() == Some(close)
                && ((items.is_empty() && may_be_empty) || (!items.is_empty() && trailing_comma_ok))
            {
                self.pos += 1;
                return Ok((items, hashable));
            }
            let item = self.parse_value()?;
            if !item.kind.is_hashable() {
                if require_hashable {
                    return Err(self.error_at(
                        item.start,
                        LiteralErrorKind::UnsupportedSyntax(Cow::Borrowed(
                            "unhashable set element",
                        )),
                    ));
                }
                hashable = false;
            }
            items.push(item.into_value()?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(c) if c == close => {
                    self.pos += 1;
                    return Ok((items, hashable));
                }
                _ => return Err(self.unexpected_here()),
            }
        }
    }

    /// Parses `( ... )`: an empty tuple, a parenthesised expression, or a
    /// tuple (which needs a comma).
    fn parse_paren(&mut self) -> PResult<Parsed> {
        let start = self.pos;
        self.enter(start)?;
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(b')') {
            self.pos += 1;
            self.leave();
            return Ok(Parsed {
                value: Value::Array(Vec::new()),
                kind: Kind::Tuple { hashable: true },
                start,
            });
        }
        let first = self.parse_value()?;
        self.skip_ws();
        match self.peek() {
            Some(b')') => {
                self.pos += 1;
                self.leave();
                Ok(first)
            }
            Some(b',') => {
                self.pos += 1;
                let first_hashable = first.kind.is_hashable();
                let mut items = vec![first.into_value()?];
                let (rest, rest_hashable) = self.parse_seq(b')', false, true)?;
                items.extend(rest);
                self.leave();
                Ok(Parsed {
                    value: Value::Array(items),
                    kind: Kind::Tuple {
                        hashable: first_hashable && rest_hashable,
                    },
                    start,
                })
            }
            _ => Err(self.unexpected_here()),
        }
    }

    /// Parses `{ ... }`: a dict, or in the Python dialects a set.
    fn parse_brace(&mut self) -> PResult<Parsed> {
        let start = self.pos;
        self.enter(start)?;
        self.pos += 1;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            self.leave();
            return Ok(Parsed {
                value: Value::Object(Map::new()),
                kind: Kind::Dict,
                start,
            });
        }
        let first = self.parse_key_or_element()?;
        self.skip_ws();
        match self.peek() {
            Some(b':') => {
                let map = self.parse_dict_rest(first)?;
                self.leave();
                Ok(Parsed {
                    value: Value::Object(map),
                    kind: Kind::Dict,
                    start,
                })
            }
            Some(b',' | b'}') if self.dialect.python_syntax() => {
                if !first.kind.is_hashable() {
                    return Err(self.error_at(
                        first.start,
                        LiteralErrorKind::UnsupportedSyntax(Cow::Borrowed(
                            "unhashable set element",
                        )),
                    ));
                }
                let mut items = vec![first.into_value()?];
                if self.peek() == Some(b',') {
                    self.pos += 1;
                    let (rest, _) = self.parse_seq(b'}', true, true)?;
                    items.extend(rest);
                } else {
                    self.pos += 1;
                }
                self.leave();
                Ok(Parsed {
                    value: Value::Array(items),
                    kind: Kind::Set,
                    start,
                })
            }
            _ => Err(self.unexpected_here()),
        }
    }

    /// Parses a dict key (JSON: a string only) or a set element.
    fn parse_key_or_element(&mut self) -> PResult<Parsed> {
        if !self.dialect.python_syntax() && self.peek() != Some(b'"') {
            return Err(self.unexpected_here());
        }
        self.parse_value()
    }

    /// Parses the rest of a dict whose first key has been read, the current
    /// position being on the colon after it.
    fn parse_dict_rest(&mut self, first_key: Parsed) -> PResult<Map<String, Value>> {
        let mut map = Map::new();
        let mut key = first_key;
        loop {
            // On the ':' after `key`.
            self.pos += 1;
            let key_text = key.into_key()?;
            self.skip_ws();
            let value = self.parse_value()?.into_value()?;
            map.insert(key_text, value);
            self.skip_ws();
            match self.peek() {
                Some(b',') => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b'}') && self.dialect.python_syntax() {
                        self.pos += 1;
                        return Ok(map);
                    }
                    key = self.parse_key_or_element()?;
                    self.skip_ws();
                    if self.peek() != Some(b':') {
                        return Err(self.unexpected_here());
                    }
                }
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(map);
                }
                _ => return Err(self.unexpected_here()),
            }
        }
    }

    /// Recognises a Python string prefix (`r`, `b`, `rb`, `u`, `f`, ...)
    /// directly followed by a quote at the current position. Returns the
    /// prefix and its length in bytes.
    fn string_prefix(&self) -> Option<(Prefix, usize)> {
        let rest = self.text.as_bytes().get(self.pos..)?;
        let letters = rest
            .iter()
            .take(3)
            .take_while(|b| b.is_ascii_alphabetic())
            .count();
        if letters == 0 || letters > 2 {
            return None;
        }
        match rest.get(letters) {
            Some(b'\'' | b'"') => {}
            _ => return None,
        }
        let mut prefix = Prefix {
            raw: false,
            bytes: false,
            format: false,
        };
        let mut seen_u = false;
        for b in rest.get(..letters)? {
            let flag = match b.to_ascii_lowercase() {
                b'r' => &mut prefix.raw,
                b'b' => &mut prefix.bytes,
                b'f' => &mut prefix.format,
                b'u' => &mut seen_u,
                _ => return None,
            };
            if *flag {
                return None;
            }
            *flag = true;
        }
        let valid = if seen_u {
            letters == 1
        } else {
            !(prefix.bytes && prefix.format)
        };
        valid.then_some((prefix, letters))
    }

    /// Parses a string literal and, in the Python dialects, any adjacent
    /// string literals it is concatenated with.
    fn parse_string_value(&mut self, first: Prefix) -> PResult<Parsed> {
        let start = self.pos;
        if first.format {
            return Err(self.error_at(
                start,
                LiteralErrorKind::UnsupportedSyntax(Cow::Borrowed("f-string")),
            ));
        }
        let mut buf = if first.bytes {
            Buf::Bytes(Vec::new())
        } else {
            Buf::Text(String::new())
        };
        self.parse_string_literal(first, &mut buf)?;
        if self.dialect.python_syntax() {
            loop {
                let save = self.pos;
                self.skip_ws();
                let here = self.pos;
                let next = match self.peek() {
                    Some(b'\'' | b'"') => Some((
                        Prefix {
                            raw: false,
                            bytes: false,
                            format: false,
                        },
                        0,
                    )),
                    _ => self.string_prefix(),
                };
                let Some((prefix, len)) = next else {
                    self.pos = save;
                    break;
                };
                if prefix.format {
                    return Err(self.error_at(
                        here,
                        LiteralErrorKind::UnsupportedSyntax(Cow::Borrowed("f-string")),
                    ));
                }
                if prefix.bytes != buf.is_bytes() {
                    return Err(self.error_at(
                        here,
                        LiteralErrorKind::UnsupportedSyntax(Cow::Borrowed(
                            "mixed bytes and str literals",
                        )),
                    ));
                }
                self.pos += len;
                self.parse_string_literal(prefix, &mut buf)?;
            }
        }
        let text = match buf {
            Buf::Text(s) => s,
            Buf::Bytes(b) => String::from_utf8(b).map_err(|_| {
                self.error_at(
                    start,
                    LiteralErrorKind::UnsupportedSyntax(Cow::Borrowed(
                        "bytes literal that is not valid UTF-8",
                    )),
                )
            })?,
        };
        Ok(Parsed {
            value: Value::String(text),
            kind: Kind::Str,
            start,
        })
    }

    /// Parses one quoted literal starting at its opening quote and appends
    /// its contents to `buf`.
    fn parse_string_literal(&mut self, prefix: Prefix, buf: &mut Buf) -> PResult<()> {
        let Some(quote) = self.peek() else {
            return Err(self.end_error());
        };
        let python = self.dialect.python_syntax();
        let triple = python && self.peek_at(1) == Some(quote) && self.peek_at(2) == Some(quote);
        self.pos += if triple { 3 } else { 1 };
        loop {
            // Copy a run of ordinary characters in one go.
            let run_start = self.pos;
            while let Some(b) = self.peek() {
                if b == quote || b == b'\\' || b < 0x20 || (b >= 0x80 && buf.is_bytes()) {
                    break;
                }
                self.pos += 1;
            }
            if self.pos > run_start {
                buf.push_str(self.slice(run_start, self.pos));
            }
            let Some(c) = self.peek_char() else {
                return Err(self.end_error());
            };
            match c {
                _ if c as u32 == u32::from(quote) => {
                    if !triple {
                        self.pos += 1;
                        return Ok(());
                    }
                    if self.peek_at(1) == Some(quote) && self.peek_at(2) == Some(quote) {
                        self.pos += 3;
                        return Ok(());
                    }
                    buf.push_char(c);
                    self.pos += 1;
                }
                '\\' if prefix.raw => {
                    // In raw literals a backslash stays, but still keeps the
                    // next character (a quote, say) from ending the literal.
                    buf.push_char('\\');
                    self.pos += 1;
                    match self.peek() {
                        None => return Err(self.end_error()),
                        Some(b'\r' | b'\n') => self.consume_line_break(buf),
                        Some(b) if b == quote || b == b'\\' => {
                            buf.push_char(char::from(b));
                            self.pos += 1;
                        }
                        Some(_) => {}
                    }
                }
                '\\' => self.parse_escape(buf)?,
                '\n' | '\r' => {
                    if triple {
                        self.consume_line_break(buf);
                    } else if matches!(self.dialect, Dialect::Relaxed) {
                        buf.push_char(c);
                        self.pos += 1;
                    } else {
                        return Err(self.unexpected_here());
                    }
                }
                c if (c as u32) < 0x20 => {
                    let allowed = match self.dialect {
                        Dialect::Json => false,
                        Dialect::Python => c != '\0',
                        Dialect::Relaxed => true,
                    };
                    if !allowed {
                        return Err(self.unexpected_here());
                    }
                    buf.push_char(c);
                    self.pos += 1;
                }
                // Non-ASCII inside a bytes literal.
                _ => return Err(self.unexpected_here()),
            }
        }
    }

    /// Consumes a `\n`, `\r\n` or `\r` line break and appends `\n`, the way
    /// Python's tokenizer normalises line breaks inside literals.
    fn consume_line_break(&mut self, buf: &mut Buf) {
        if self.peek() == Some(b'\r') && self.peek_at(1) == Some(b'\n') {
            self.pos += 2;
        } else {
            self.pos += 1;
        }
        buf.push_char('\n');
    }

    /// Parses an escape sequence at the current backslash.
    fn parse_escape(&mut self, buf: &mut Buf) -> PResult<()> {
        let esc_start = self.pos;
        self.pos += 1;
        let Some(e) = self.peek_char() else {
            return Err(self.end_error());
        };
        let simple = match e {
            '"' => Some('"'),
            '\\' => Some('\\'),
            'b' => Some('\u{8}'),
            'f' => Some('\u{c}'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            '/' if self.dialect.json_syntax() => Some('/'),
            '\'' | 'a' | 'v' if self.dialect.python_syntax() => Some(match e {
                'a' => '\u{7}',
                'v' => '\u{b}',
                other => other,
            }),
            _ => None,
        };
        if let Some(c) = simple {
            buf.push_char(c);
            self.pos += 1;
            return Ok(());
        }
        let invalid = self.error_at(esc_start, LiteralErrorKind::InvalidEscape);
        if !self.dialect.python_syntax() {
            // JSON: only \uXXXX is left.
            if e != 'u' {
                return Err(invalid);
            }
            self.pos += 1;
            let code = self.read_hex(4, esc_start)?;
            return self.push_unicode_escape(code, esc_start, buf);
        }
        match e {
            '\n' | '\r' => {
                // Line continuation: the backslash and the line break vanish.
                let mut scratch = Buf::Text(String::new());
                self.consume_line_break(&mut scratch);
                Ok(())
            }
            '0'..='7' => {
                let mut code = 0u32;
                let mut count = 0;
                while count < 3 {
                    match self.peek() {
                        Some(d @ b'0'..=b'7') => {
                            code = code * 8 + u32::from(d - b'0');
                            self.pos += 1;
                            count += 1;
                        }
                        _ => break,
                    }
                }
                buf.push_code(code);
                Ok(())
            }
            'x' => {
                self.pos += 1;
                let code = self.read_hex(2, esc_start)?;
                buf.push_code(code);
                Ok(())
            }
            'u' | 'U' if !buf.is_bytes() => {
                self.pos += 1;
                let code = self.read_hex(if e == 'u' { 4 } else { 8 }, esc_start)?;
                self.push_unicode_escape(code, esc_start, buf)
            }
            'N' if !buf.is_bytes() => Err(self.error_at(
                esc_start,
                LiteralErrorKind::UnsupportedSyntax(Cow::Borrowed("\\N{...} escape")),
            )),
            _ => {
                // Unknown escapes keep their backslash in Python; the next
                // character is then read as an ordinary one.
                buf.push_char('\\');
                Ok(())
            }
        }
    }

    /// Reads exactly `n` hex digits. Running out of input first is
    /// [`LiteralErrorKind::UnexpectedEnd`] (truncation), a non-hex character
    /// is an invalid escape starting at `esc_start`.
    fn read_hex(&mut self, n: usize, esc_start: usize) -> PResult<u32> {
        let mut code = 0u32;
        for _ in 0..n {
            let Some(b) = self.peek() else {
                return Err(self.end_error());
            };
            let Some(d) = char::from(b).to_digit(16) else {
                return Err(self.error_at(esc_start, LiteralErrorKind::InvalidEscape));
            };
            code = code.saturating_mul(16).saturating_add(d);
            self.pos += 1;
        }
        Ok(code)
    }

    /// Appends the code point of a `\u`/`\U` escape, combining a UTF-16
    /// surrogate pair written as two escapes.
    fn push_unicode_escape(&mut self, code: u32, esc_start: usize, buf: &mut Buf) -> PResult<()> {
        let lone = self.error_at(esc_start, LiteralErrorKind::LoneSurrogate);
        let c = if (0xD800..0xDC00).contains(&code) {
            if self.at_end() {
                return Err(self.end_error());
            }
            let long_ok = self.dialect.python_syntax();
            let width = match (self.peek(), self.peek_at(1)) {
                (Some(b'\\'), Some(b'u')) => 4,
                (Some(b'\\'), Some(b'U')) if long_ok => 8,
                (Some(b'\\'), None) => return Err(self.end_error()),
                _ => return Err(lone),
            };
            let second_start = self.pos;
            self.pos += 2;
            let low = self.read_hex(width, second_start)?;
            if !(0xDC00..0xE000).contains(&low) {
                return Err(lone);
            }
            0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00..0xE000).contains(&code) {
            return Err(lone);
        } else {
            code
        };
        match char::from_u32(c) {
            Some(ch) => {
                buf.push_char(ch);
                Ok(())
            }
            None => Err(self.error_at(esc_start, LiteralErrorKind::InvalidEscape)),
        }
    }

    /// Parses an identifier: a keyword constant, `set()`, or an unsupported
    /// name.
    fn parse_name(&mut self) -> PResult<Parsed> {
        let start = self.pos;
        let name = self.read_ident();
        let python = self.dialect.python_syntax();
        let json = self.dialect.json_syntax();
        let constant = match name {
            "true" if json => Some((Value::Bool(true), Kind::Bool)),
            "false" if json => Some((Value::Bool(false), Kind::Bool)),
            "null" if json => Some((Value::Null, Kind::Null)),
            "True" if python => Some((Value::Bool(true), Kind::Bool)),
            "False" if python => Some((Value::Bool(false), Kind::Bool)),
            "None" if python => Some((Value::Null, Kind::Null)),
            _ => None,
        };
        if let Some((value, kind)) = constant {
            return Ok(Parsed { value, kind, start });
        }
        if python && name == "set" {
            // `ast.literal_eval` special-cases `set()`, the empty set.
            let after_name = self.pos;
            self.skip_ws();
            if self.peek() == Some(b'(') {
                self.pos += 1;
                self.skip_ws();
                if self.peek() == Some(b')') {
                    self.pos += 1;
                    return Ok(Parsed {
                        value: Value::Array(Vec::new()),
                        kind: Kind::Set,
                        start,
                    });
                }
            }
            if self.at_end() {
                return Err(self.end_error());
            }
            self.pos = after_name;
        }
        if self.at_end() && self.is_truncated_constant(name) {
            return Err(self.end_error());
        }
        Err(self.error_at(start, self.name_error(name)))
    }

    fn read_ident(&mut self) -> &'a str {
        let start = self.pos;
        while let Some(c) = self.peek_char() {
            if !is_ident_continue(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
        self.slice(start, self.pos)
    }

    /// Whether `name`, found at the very end of the input, is the beginning
    /// of a constant of this dialect (so the input was cut off).
    fn is_truncated_constant(&self, name: &str) -> bool {
        let json: &[&str] = if self.dialect.json_syntax() {
            &["true", "false", "null"]
        } else {
            &[]
        };
        let python: &[&str] = if self.dialect.python_syntax() {
            &["True", "False", "None", "set"]
        } else {
            &[]
        };
        json.iter()
            .chain(python)
            .any(|k| k.len() > name.len() && k.starts_with(name))
    }

    fn name_error(&self, name: &str) -> LiteralErrorKind {
        let relaxed = matches!(self.dialect, Dialect::Relaxed);
        let text: Cow<'static, str> = match name {
            "NaN" if relaxed => Cow::Borrowed("NaN"),
            "Infinity" if relaxed => Cow::Borrowed("Infinity"),
            "Ellipsis" => Cow::Borrowed("name `Ellipsis`"),
            _ => {
                let shown: String = name.chars().take(MAX_NAME_IN_MESSAGE).collect();
                let more = if shown.len() < name.len() { "..." } else { "" };
                Cow::Owned(format!("name `{shown}{more}`"))
            }
        };
        LiteralErrorKind::UnsupportedSyntax(text)
    }

    /// Parses a number, with the sign rules of the dialect.
    fn parse_number_value(&mut self) -> PResult<Parsed> {
        if self.dialect.python_syntax() {
            self.parse_python_number()
        } else {
            self.parse_json_number()
        }
    }

    fn parse_json_number(&mut self) -> PResult<Parsed> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let int_start = self.pos;
        match self.peek() {
            None => return Err(self.end_error()),
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.skip_digits(),
            Some(_) => return Err(self.error_at(start, LiteralErrorKind::InvalidNumber)),
        }
        let int_end = self.pos;
        if self.peek().is_some_and(|b| b.is_ascii_digit()) {
            // A leading zero followed by more digits.
            return Err(self.error_at(start, LiteralErrorKind::InvalidNumber));
        }
        let mut is_float = false;
        if self.peek() == Some(b'.') {
            is_float = true;
            self.pos += 1;
            self.require_json_digits(start)?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            is_float = true;
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            self.require_json_digits(start)?;
        }
        if is_float {
            let f: f64 = self.slice(start, self.pos).parse().unwrap_or(f64::NAN);
            return self.float_parsed(f, start);
        }
        let digits = self.slice(int_start, int_end);
        self.int_parsed(digits, 10, negative, start)
    }

    fn skip_digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    fn require_json_digits(&mut self, start: usize) -> PResult<()> {
        match self.peek() {
            None => Err(self.end_error()),
            Some(b) if b.is_ascii_digit() => {
                self.skip_digits();
                Ok(())
            }
            Some(_) => Err(self.error_at(start, LiteralErrorKind::InvalidNumber)),
        }
    }

    /// Parses an optionally signed Python number. A sign may be followed by
    /// whitespace and by parentheses around the number (`-(1)`), which
    /// `ast.literal_eval` accepts because parentheses leave no trace in the
    /// syntax tree; a second sign (`--1`) it rejects, and so does this.
    fn parse_python_number(&mut self) -> PResult<Parsed> {
        let start = self.pos;
        let mut negative = false;
        let mut signed = false;
        if let Some(b @ (b'+' | b'-')) = self.peek() {
            negative = b == b'-';
            signed = true;
            self.pos += 1;
            self.skip_ws();
        }
        let mut parens = 0usize;
        if signed {
            while self.peek() == Some(b'(') {
                self.enter(self.pos)?;
                self.pos += 1;
                parens += 1;
                self.skip_ws();
            }
        }
        match self.peek() {
            None => return Err(self.end_error()),
            Some(b'0'..=b'9') => {}
            Some(b'.') => match self.peek_at(1) {
                Some(b'0'..=b'9') => {}
                None => {
                    self.pos += 1;
                    return Err(self.end_error());
                }
                Some(b'.') if self.peek_at(2) == Some(b'.') => {
                    return Err(self.error_at(
                        self.pos,
                        LiteralErrorKind::UnsupportedSyntax(Cow::Borrowed("Ellipsis")),
                    ))
                }
                Some(_) => return Err(self.unexpected_here()),
            },
            Some(_) => {
                let c = self.peek_char().unwrap_or(char::REPLACEMENT_CHARACTER);
                if is_ident_start(c) {
                    let name_start = self.pos;
                    let name = self.read_ident();
                    if self.at_end() && self.is_truncated_constant(name) {
                        return Err(self.end_error());
                    }
                    let special = matches!(name, "inf" | "nan")
                        || (matches!(self.dialect, Dialect::Relaxed)
                            && matches!(name, "NaN" | "Infinity"));
                    if special {
                        return Err(self.error_at(name_start, self.name_error(name)));
                    }
                    return Err(self.error_at(name_start, LiteralErrorKind::UnexpectedChar(c)));
                }
                return Err(self.unexpected_here());
            }
        }
        let number_start = self.pos;
        let number = self.lex_python_number()?;
        for _ in 0..parens {
            self.skip_ws();
            if self.peek() != Some(b')') {
                return Err(self.unexpected_here());
            }
            self.pos += 1;
            self.leave();
        }
        match number {
            PyNumber::Float(f) => self.float_parsed(if negative { -f } else { f }, number_start),
            PyNumber::Int { digits, radix } => self.int_parsed(&digits, radix, negative, start),
        }
    }

    /// Lexes an unsigned Python number token (integer in any base, float, or
    /// imaginary, the last being rejected).
    fn lex_python_number(&mut self) -> PResult<PyNumber> {
        let start = self.pos;
        let invalid = |p: &Self| p.error_at(start, LiteralErrorKind::InvalidNumber);
        let radix = match (self.peek(), self.peek_at(1)) {
            (Some(b'0'), Some(b'x' | b'X')) => Some(16),
            (Some(b'0'), Some(b'o' | b'O')) => Some(8),
            (Some(b'0'), Some(b'b' | b'B')) => Some(2),
            _ => None,
        };
        if let Some(radix) = radix {
            self.pos += 2;
            let mut digits = String::new();
            loop {
                match self.peek() {
                    Some(b'_')
                        if self
                            .peek_at(1)
                            .is_some_and(|d| char::from(d).is_digit(radix)) =>
                    {
                        self.pos += 1
                    }
                    Some(d) if char::from(d).is_digit(radix) => {
                        digits.push(char::from(d));
                        self.pos += 1;
                    }
                    _ => break,
                }
            }
            if digits.is_empty() && self.at_end() {
                return Err(self.end_error());
            }
            if digits.is_empty() || self.ident_char_follows() {
                return Err(invalid(self));
            }
            return Ok(PyNumber::Int { digits, radix });
        }
        let int_part = self.read_digit_part();
        let mut is_float = false;
        let mut frac_part = String::new();
        let mut exp_part = String::new();
        if self.peek() == Some(b'.') {
            is_float = true;
            self.pos += 1;
            frac_part = self.read_digit_part();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            is_float = true;
            self.pos += 1;
            if let Some(sign @ (b'+' | b'-')) = self.peek() {
                exp_part.push(char::from(sign));
                self.pos += 1;
            }
            let digits = self.read_digit_part();
            if digits.is_empty() {
                return Err(if self.at_end() {
                    self.end_error()
                } else {
                    invalid(self)
                });
            }
            exp_part.push_str(&digits);
        }
        if matches!(self.peek(), Some(b'j' | b'J')) {
            return Err(self.error_at(
                start,
                LiteralErrorKind::UnsupportedSyntax(Cow::Borrowed("complex number")),
            ));
        }
        if self.ident_char_follows() {
            return Err(invalid(self));
        }
        if !is_float {
            if int_part.starts_with('0') && int_part.bytes().any(|b| b != b'0') {
                // "leading zeros in decimal integer literals are not permitted"
                return Err(invalid(self));
            }
            return Ok(PyNumber::Int {
                digits: int_part,
                radix: 10,
            });
        }
        let canonical = format!(
            "{}.{}e{}",
            if int_part.is_empty() { "0" } else { &int_part },
            if frac_part.is_empty() {
                "0"
            } else {
                &frac_part
            },
            if exp_part.is_empty() { "0" } else { &exp_part },
        );
        Ok(PyNumber::Float(canonical.parse().unwrap_or(f64::NAN)))
    }

    /// Reads decimal digits with single underscores between them (Python's
    /// `digitpart`), returning the digits without underscores.
    fn read_digit_part(&mut self) -> String {
        let mut digits = String::new();
        loop {
            match self.peek() {
                Some(d @ b'0'..=b'9') => {
                    digits.push(char::from(d));
                    self.pos += 1;
                }
                Some(b'_')
                    if !digits.is_empty()
                        && self.peek_at(1).is_some_and(|d| d.is_ascii_digit()) =>
                {
                    self.pos += 1;
                }
                _ => return digits,
            }
        }
    }

    fn ident_char_follows(&self) -> bool {
        self.peek_char().is_some_and(is_ident_continue)
    }

    fn float_parsed(&self, f: f64, start: usize) -> PResult<Parsed> {
        match Number::from_f64(f) {
            Some(n) if f.is_finite() => Ok(Parsed {
                value: Value::Number(n),
                kind: Kind::Float,
                start,
            }),
            _ => Err(self.error_at(start, LiteralErrorKind::NumberOutOfRange)),
        }
    }

    /// Builds an integer from its digits (no sign, no underscores).
    fn int_parsed(
        &self,
        digits: &str,
        radix: u32,
        negative: bool,
        start: usize,
    ) -> PResult<Parsed> {
        let digits = digits.trim_start_matches('0');
        let too_long = if radix == 10 {
            digits.len() > PY_INT_MAX_STR_DIGITS
        } else {
            digits.len().saturating_mul(radix.trailing_zeros() as usize) > MAX_INT_BITS
        };
        if too_long {
            return Err(self.error_at(start, LiteralErrorKind::NumberOutOfRange));
        }
        let small = if digits.is_empty() {
            Some(0)
        } else {
            u64::from_str_radix(digits, radix).ok()
        };
        let int = |value: Value, repr: IntRepr| Parsed {
            value,
            kind: Kind::Int(repr),
            start,
        };
        let limbs = match small {
            Some(0) if negative && self.dialect.json_syntax() => {
                // JSON's `-0` is the float -0.0, as in serde_json.
                let value = Number::from_f64(-0.0).map_or(Value::Null, Value::Number);
                return Ok(int(value, IntRepr::NegativeZero));
            }
            Some(m) if !negative => return Ok(int(Value::Number(m.into()), IntRepr::Small)),
            Some(m) => match 0i64.checked_sub_unsigned(m) {
                Some(i) => return Ok(int(Value::Number(i.into()), IntRepr::Small)),
                // Magnitude within u64 but beyond i64::MIN.
                None => vec![(m & 0xFFFF_FFFF) as u32, (m >> 32) as u32],
            },
            None => limbs_from_digits(digits.as_bytes(), radix),
        };
        let magnitude = limbs_to_f64(&limbs);
        let f = if negative { -magnitude } else { magnitude };
        let (value, in_range) = match Number::from_f64(f) {
            Some(n) if f.is_finite() => (Value::Number(n), true),
            _ => (Value::Null, false),
        };
        Ok(int(
            value,
            IntRepr::Big {
                negative,
                limbs,
                in_range,
            },
        ))
    }
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Converts digits of `radix` (2, 8, 10 or 16) into base-2^32 limbs, least
/// significant first, working in chunks that fit a `u32` multiplier.
fn limbs_from_digits(digits: &[u8], radix: u32) -> Vec<u32> {
    let chunk = match radix {
        10 => 9,
        16 => 7,
        8 => 10,
        _ => 31,
    };
    let mut limbs: Vec<u32> = Vec::new();
    for group in digits.chunks(chunk) {
        let mut value: u64 = 0;
        let mut multiplier: u64 = 1;
        for &d in group {
            value =
                value * u64::from(radix) + u64::from(char::from(d).to_digit(radix).unwrap_or(0));
            multiplier *= u64::from(radix);
        }
        let mut carry = value;
        for limb in &mut limbs {
            let t = u64::from(*limb) * multiplier + carry;
            *limb = (t & 0xFFFF_FFFF) as u32;
            carry = t >> 32;
        }
        while carry > 0 {
            limbs.push((carry & 0xFFFF_FFFF) as u32);
            carry >>= 32;
        }
    }
    limbs
}

fn bit_length(limbs: &[u32]) -> usize {
    match limbs.iter().rposition(|&l| l != 0) {
        None => 0,
        Some(i) => i * 32 + (32 - limbs.get(i).map_or(32, |l| l.leading_zeros() as usize)),
    }
}

/// Converts a magnitude to the nearest `f64` (ties to even): the top 64 bits
/// are rounded by the hardware conversion, with any lower set bit folded into
/// the lowest bit so that ties are broken correctly.
fn limbs_to_f64(limbs: &[u32]) -> f64 {
    let limb = |i: usize| u128::from(limbs.get(i).copied().unwrap_or(0));
    let bits = bit_length(limbs);
    if bits <= 64 {
        return ((limb(1) << 32) | limb(0)) as f64;
    }
    let shift = bits - 64;
    let (word, bit) = (shift / 32, shift % 32);
    let window = limb(word) | (limb(word + 1) << 32) | (limb(word + 2) << 64);
    let mut top = (window >> bit) as u64;
    let below_mask = (1u32 << bit).wrapping_sub(1);
    let sticky = limbs
        .get(..word)
        .is_some_and(|low| low.iter().any(|&l| l != 0))
        || limbs.get(word).is_some_and(|&l| l & below_mask != 0);
    if sticky {
        top |= 1;
    }
    (top as f64) * 2f64.powi(i32::try_from(shift).unwrap_or(i32::MAX))
}

/// Formats a magnitude in decimal (repeated division by 10^9).
fn limbs_to_decimal(limbs: &[u32]) -> String {
    const BASE: u64 = 1_000_000_000;
    let mut n: Vec<u32> = limbs.to_vec();
    while n.last() == Some(&0) {
        n.pop();
    }
    let mut chunks: Vec<u32> = Vec::new();
    while !n.is_empty() {
        let mut rem: u64 = 0;
        for limb in n.iter_mut().rev() {
            let cur = (rem << 32) | u64::from(*limb);
            *limb = (cur / BASE) as u32;
            rem = cur % BASE;
        }
        chunks.push(rem as u32);
        while n.last() == Some(&0) {
            n.pop();
        }
    }
    let mut out = String::new();
    let mut iter = chunks.iter().rev();
    match iter.next() {
        None => out.push('0'),
        Some(first) => out.push_str(&first.to_string()),
    }
    for chunk in iter {
        out.push_str(&format!("{chunk:09}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn py(text: &str) -> Value {
        match parse_literal(text, Dialect::Python) {
            Ok(v) => v,
            Err(e) => panic!("{text:?} failed in Python: {e}"),
        }
    }

    fn relaxed(text: &str) -> Value {
        match parse_literal(text, Dialect::Relaxed) {
            Ok(v) => v,
            Err(e) => panic!("{text:?} failed in Relaxed: {e}"),
        }
    }

    fn json_ok(text: &str) -> Value {
        match parse_literal(text, Dialect::Json) {
            Ok(v) => v,
            Err(e) => panic!("{text:?} failed in Json: {e}"),
        }
    }

    fn err(text: &str, dialect: Dialect) -> LiteralError {
        match parse_literal(text, dialect) {
            Ok(v) => panic!("{text:?} parsed in {dialect:?} as {v}"),
            Err(e) => e,
        }
    }

    fn kind(text: &str, dialect: Dialect) -> LiteralErrorKind {
        err(text, dialect).kind
    }

    fn unsupported(s: &'static str) -> LiteralErrorKind {
        LiteralErrorKind::UnsupportedSyntax(Cow::Borrowed(s))
    }

    #[test]
    fn json_basics() {
        assert_eq!(
            json_ok(r#" {"a": [1, -2, 3.5, true, false, null], "b": {"c": "d"}} "#),
            json!({"a": [1, -2, 3.5, true, false, null], "b": {"c": "d"}})
        );
        assert_eq!(
            json_ok(r#""\"\\\/\b\f\n\r\t\u00e9""#),
            json!("\"\\/\u{8}\u{c}\n\r\t\u{e9}")
        );
        assert_eq!(json_ok(r#""\ud83d\ude00""#), json!("😀"));
        assert_eq!(json_ok("[]"), json!([]));
        assert_eq!(json_ok("{}"), json!({}));
    }

    #[test]
    fn json_rejects_non_json() {
        use LiteralErrorKind::*;
        assert_eq!(kind("[1,]", Dialect::Json), UnexpectedChar(']'));
        assert_eq!(kind("{'a': 1}", Dialect::Json), UnexpectedChar('\''));
        assert_eq!(kind("01", Dialect::Json), InvalidNumber);
        assert_eq!(kind("1.", Dialect::Json), UnexpectedEnd);
        assert_eq!(kind("1.x", Dialect::Json), InvalidNumber);
        assert_eq!(kind(".5", Dialect::Json), UnexpectedChar('.'));
        assert_eq!(kind("+1", Dialect::Json), UnexpectedChar('+'));
        assert_eq!(kind("True", Dialect::Json), unsupported("name `True`"));
        assert_eq!(kind("NaN", Dialect::Json), unsupported("name `NaN`"));
        assert_eq!(kind(r#""\'""#, Dialect::Json), InvalidEscape);
        assert_eq!(kind("\"a\tb\"", Dialect::Json), UnexpectedChar('\t'));
        assert_eq!(kind("{1: 2}", Dialect::Json), UnexpectedChar('1'));
        assert_eq!(kind("(1)", Dialect::Json), UnexpectedChar('('));
        assert_eq!(kind("1e400", Dialect::Json), NumberOutOfRange);
        assert_eq!(kind(r#""\ud800""#, Dialect::Json), LoneSurrogate);
        assert_eq!(kind(r#""\udc00x""#, Dialect::Json), LoneSurrogate);
        assert_eq!(kind(r#""\ud800\u0041""#, Dialect::Json), LoneSurrogate);
        assert_eq!(kind(r#""a" "b""#, Dialect::Json), TrailingCharacters);
    }

    #[test]
    fn json_numbers_match_serde_json() {
        for text in [
            "0",
            "-0",
            "1",
            "-1",
            "1.0",
            "-0.0",
            "1e5",
            "1E-5",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "123456789012345678901234567890",
            "0.1",
            "4.9e-324",
        ] {
            let expected: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            let got = json_ok(text);
            assert_eq!(got, expected, "{text}");
            assert_eq!(got.is_f64(), expected.is_f64(), "{text}");
            assert_eq!(got.is_i64(), expected.is_i64(), "{text}");
        }
        // serde_json's default float parser is not always correctly rounded
        // (that needs its `float_roundtrip` feature); this parser is, like
        // Python's.
        assert_eq!(json_ok("2.5e-308").as_f64(), Some(2.5e-308));
        assert_eq!(
            json_ok("0.30000000000000004").as_f64(),
            Some(0.300_000_000_000_000_04)
        );
    }

    #[test]
    fn integers_and_floats_stay_distinct() {
        for dialect in [Dialect::Json, Dialect::Python, Dialect::Relaxed] {
            let one = parse_literal("1", dialect).unwrap_or_default();
            let one_f = parse_literal("1.0", dialect).unwrap_or_default();
            assert!(one.is_u64(), "{dialect:?}");
            assert!(one_f.is_f64(), "{dialect:?}");
            assert_ne!(one, one_f);
        }
    }

    #[test]
    fn python_containers() {
        assert_eq!(
            py("{'a': [1, 2,], 'b': (3,), 'c': (), 'd': {1, 2}, 'e': None, 'f': True, 'g': False,}"),
            json!({"a": [1, 2], "b": [3], "c": [], "d": [1, 2], "e": null, "f": true, "g": false})
        );
        assert_eq!(py("(1, 'x')"), json!([1, "x"]));
        assert_eq!(py("(1)"), json!(1));
        assert_eq!(py("((('a')))"), json!("a"));
        assert_eq!(py("set()"), json!([]));
        assert_eq!(py("set ( )"), json!([]));
        assert_eq!(py("{1, 1, 2}"), json!([1, 1, 2]));
        assert_eq!(py("[\n  1,\n  2\n]"), json!([1, 2]));
        assert_eq!(py("{(1, 2), 3}"), json!([[1, 2], 3]));
        assert_eq!(py("1, 2"), json!([1, 2]));
        assert_eq!(py("1,"), json!([1]));
        assert_eq!(py("  {'a': 1}  \n"), json!({"a": 1}));
        assert_eq!(py("[1, \\\n 2]"), json!([1, 2]));
        assert_eq!(py("[1, # one\n 2] # done"), json!([1, 2]));
        assert_eq!(py("# leading comment\n{'a': 1}"), json!({"a": 1}));
        assert_eq!(py("\n\n{'a': 1}\n  \n"), json!({"a": 1}));
        assert_eq!(py("  \t[1]"), json!([1]));
        assert_eq!(py("\n\u{c}[1]"), json!([1]));
    }

    #[test]
    fn python_rejects_what_literal_eval_rejects() {
        use LiteralErrorKind::*;
        assert_eq!(kind("true", Dialect::Python), unsupported("name `true`"));
        assert_eq!(kind("null", Dialect::Python), unsupported("name `null`"));
        assert_eq!(kind("inf", Dialect::Python), unsupported("name `inf`"));
        assert_eq!(kind("-inf", Dialect::Python), unsupported("name `inf`"));
        assert_eq!(kind("nan", Dialect::Python), unsupported("name `nan`"));
        assert_eq!(
            kind("Ellipsis", Dialect::Python),
            unsupported("name `Ellipsis`")
        );
        assert_eq!(kind("...", Dialect::Python), unsupported("Ellipsis"));
        assert_eq!(kind("foo", Dialect::Python), unsupported("name `foo`"));
        assert_eq!(kind("1j", Dialect::Python), unsupported("complex number"));
        assert_eq!(kind("1.5J", Dialect::Python), unsupported("complex number"));
        assert_eq!(kind("f'x'", Dialect::Python), unsupported("f-string"));
        assert_eq!(
            kind("'a' b'b'", Dialect::Python),
            unsupported("mixed bytes and str literals")
        );
        assert_eq!(
            kind(r"'\N{DASH}'", Dialect::Python),
            unsupported("\\N{...} escape")
        );
        assert_eq!(kind("[[1]: 2]", Dialect::Python), UnexpectedChar(':'));
        assert_eq!(kind("{[1]: 2}", Dialect::Python), InvalidDictKey);
        assert_eq!(kind("{(1, 2): 3}", Dialect::Python), InvalidDictKey);
        assert_eq!(
            kind("{[1], 2}", Dialect::Python),
            unsupported("unhashable set element")
        );
        assert_eq!(
            kind("{1, [2]}", Dialect::Python),
            unsupported("unhashable set element")
        );
        assert_eq!(kind("01", Dialect::Python), InvalidNumber);
        assert_eq!(kind("1_", Dialect::Python), InvalidNumber);
        assert_eq!(kind("1__0", Dialect::Python), InvalidNumber);
        assert_eq!(kind("0b102", Dialect::Python), InvalidNumber);
        assert_eq!(kind("0x", Dialect::Python), UnexpectedEnd);
        assert_eq!(kind("0xg", Dialect::Python), InvalidNumber);
        assert_eq!(kind("1e", Dialect::Python), UnexpectedEnd);
        assert_eq!(kind("1ex", Dialect::Python), InvalidNumber);
        assert_eq!(kind("--1", Dialect::Python), UnexpectedChar('-'));
        assert_eq!(kind("-(-1)", Dialect::Python), UnexpectedChar('-'));
        assert_eq!(kind("-True", Dialect::Python), UnexpectedChar('T'));
        assert_eq!(kind("-(1,)", Dialect::Python), UnexpectedChar(','));
        assert_eq!(kind("'a\nb'", Dialect::Python), UnexpectedChar('\n'));
        assert_eq!(kind("'a\0b'", Dialect::Python), UnexpectedChar('\0'));
        assert_eq!(kind("b'\u{e9}'", Dialect::Python), UnexpectedChar('\u{e9}'));
        assert_eq!(
            kind(r"b'\xff'", Dialect::Python),
            unsupported("bytes literal that is not valid UTF-8")
        );
        assert_eq!(kind("[1,,2]", Dialect::Python), UnexpectedChar(','));
        assert_eq!(kind("(,)", Dialect::Python), UnexpectedChar(','));
        assert_eq!(kind("{**a}", Dialect::Python), UnexpectedChar('*'));
        assert_eq!(kind("'a'\n'b'", Dialect::Python), TrailingCharacters);
        assert_eq!(kind("1,\n2", Dialect::Python), UnexpectedChar('\n'));
        assert_eq!(kind(r"'\x4'", Dialect::Python), InvalidEscape);
        assert_eq!(kind(r"'\U00110000'", Dialect::Python), InvalidEscape);
        assert_eq!(kind(r"'\ud800'", Dialect::Python), LoneSurrogate);
        assert_eq!(kind(r"'\U0000dc00'", Dialect::Python), LoneSurrogate);
        assert_eq!(kind("r'\\'", Dialect::Python), UnexpectedEnd);
        assert_eq!(kind("1 + 2j", Dialect::Python), TrailingCharacters);
        // "unexpected indent": only spaces and tabs are stripped up front.
        assert_eq!(
            err("\n  [1]", Dialect::Python),
            LiteralError {
                offset: 1,
                kind: UnexpectedChar(' ')
            }
        );
        assert_eq!(kind(" # c\n\t[1]", Dialect::Python), UnexpectedChar('\t'));
        assert_eq!(kind("\u{c} [1]", Dialect::Python), UnexpectedChar(' '));
        assert_eq!(kind("6\n ", Dialect::Python), UnexpectedChar(' '));
        assert_eq!(kind("6\n\n\t", Dialect::Python), UnexpectedChar('\t'));
        assert_eq!(kind("6\n\u{c} ", Dialect::Python), UnexpectedChar(' '));
        assert_eq!(py("6\n \n"), json!(6));
        assert_eq!(py("6  "), json!(6));
        assert_eq!(py("6\n \u{c}"), json!(6));
        assert_eq!(py("6\n  # c"), json!(6));
        assert_eq!(py("\\\n1"), json!(1));
        assert_eq!(
            err("\\\n 1", Dialect::Python),
            LiteralError {
                offset: 2,
                kind: UnexpectedChar(' ')
            }
        );
        assert_eq!(kind("\n\n  ", Dialect::Python), EmptyInput);
        assert_eq!(kind("[1,\n  ", Dialect::Python), UnexpectedEnd);
        assert_eq!(kind("[1,\\\n", Dialect::Python), UnexpectedEnd);
        assert_eq!(kind("1\\\n", Dialect::Python), TrailingCharacters);
        assert_eq!(kind("[1]\\\r\n", Dialect::Python), TrailingCharacters);
        assert_eq!(py("1\\\n\n"), json!(1));
        assert_eq!(py("6 # x\\\n"), json!(6));
        assert_eq!(relaxed("\n  [1]\n "), json!([1]));
        assert_eq!(relaxed("1\\\n"), json!(1));
        assert_eq!(
            parse_literal_prefix("\n  [1]", Dialect::Python),
            Ok((json!([1]), 6))
        );
    }

    #[test]
    fn python_numbers() {
        assert_eq!(py("1_000"), json!(1000));
        assert_eq!(py("0x_ff"), json!(255));
        assert_eq!(py("0XFF"), json!(255));
        assert_eq!(py("0o17"), json!(15));
        assert_eq!(py("0b1010"), json!(10));
        assert_eq!(py("-5"), json!(-5));
        assert_eq!(py("+5"), json!(5));
        assert_eq!(py("- 5"), json!(-5));
        assert_eq!(py("-(5)"), json!(-5));
        assert_eq!(py("(-5)"), json!(-5));
        assert_eq!(py("-0"), json!(0));
        assert!(py("-0").is_u64());
        assert_eq!(py("00"), json!(0));
        assert_eq!(py("0_0"), json!(0));
        assert_eq!(py("1."), json!(1.0));
        assert_eq!(py(".5"), json!(0.5));
        assert_eq!(py("1e5"), json!(100000.0));
        assert_eq!(py("1.e2"), json!(100.0));
        assert_eq!(py("1_0.5"), json!(10.5));
        assert_eq!(py("01.5"), json!(1.5));
        assert_eq!(py("1e1_0"), json!(1e10));
        assert_eq!(py("-1.5e-3"), json!(-0.0015));
        assert_eq!(py("1e-400"), json!(0.0));
        assert_eq!(
            kind("1e400", Dialect::Python),
            LiteralErrorKind::NumberOutOfRange
        );
        assert_eq!(
            py("18446744073709551615"),
            json!(18_446_744_073_709_551_615u64)
        );
        assert_eq!(py("-9223372036854775808"), json!(i64::MIN));
        let big = py("18446744073709551616");
        assert_eq!(big.as_f64(), Some(18_446_744_073_709_551_616.0));
        let neg_big = py("-18446744073709551615");
        assert_eq!(neg_big.as_f64(), Some(-18_446_744_073_709_551_615.0));
        assert_eq!(py("0x1_0000_0000_0000_0000").as_f64(), Some(2f64.powi(64)));
        // 2^64 + 2^11 + 1 rounds up to 2^64 + 2^12 (above the tie).
        assert_eq!(
            py("0x10000000000000801").as_f64(),
            Some(2f64.powi(64) + 4096.0)
        );
        // 2^64 + 2^11 is a tie and rounds to even (2^64).
        assert_eq!(py("0x10000000000000800").as_f64(), Some(2f64.powi(64)));
        let nines = "9".repeat(400);
        assert_eq!(
            kind(&nines, Dialect::Python),
            LiteralErrorKind::NumberOutOfRange
        );
        assert_eq!(
            kind(&"1".repeat(4301), Dialect::Python),
            LiteralErrorKind::NumberOutOfRange
        );
    }

    #[test]
    fn big_integers_convert_like_python() {
        let digits = "123456789012345678901234567890123456789";
        let v = py(digits);
        let expected: f64 = digits.parse().unwrap_or(0.0);
        assert_eq!(v.as_f64(), Some(expected));
        // As a key its exact text survives.
        assert_eq!(py(&format!("{{{digits}: 1}}")), json!({ digits: 1 }));
        assert_eq!(
            py(&format!("{{-{digits}: 1}}")),
            json!({ format!("-{digits}"): 1 })
        );
        // Too large for f64, fine as a key.
        let huge = "7".repeat(400);
        assert_eq!(py(&format!("{{{huge}: 1}}")), json!({ huge.clone(): 1 }));
        assert_eq!(
            kind(&format!("{{1: {huge}}}"), Dialect::Python),
            LiteralErrorKind::NumberOutOfRange
        );
        assert_eq!(
            py("{0x10000000000000000: 0}"),
            json!({"18446744073709551616": 0})
        );
        assert_eq!(
            py("{-18446744073709551615: 0}"),
            json!({"-18446744073709551615": 0})
        );
        assert_eq!(limbs_to_decimal(&[]), "0");
        assert_eq!(limbs_to_decimal(&[0, 1]), "4294967296");
    }

    #[test]
    fn python_dict_keys_use_str() {
        assert_eq!(
            py("{1: 'a', 1.5: 'b', True: 'c', None: 'd', -2: 'e', 1e16: 'f', -0.0: 'g', 'x': 'h'}"),
            json!({"1": "a", "1.5": "b", "True": "c", "None": "d", "-2": "e", "1e+16": "f", "-0.0": "g", "x": "h"})
        );
        assert_eq!(
            relaxed("{true: 1, null: 2, -0: 3}"),
            json!({"True": 1, "None": 2, "0": 3})
        );
        assert_eq!(py("{b'k': 1}"), json!({"k": 1}));
        assert_eq!(py("{(1): 1}"), json!({"1": 1}));
    }

    #[test]
    fn duplicate_keys_last_wins_in_first_position() {
        let v = py("{'a': 1, 'b': 2, 'a': 3}");
        assert_eq!(v, json!({"a": 3, "b": 2}));
        let keys: Vec<&String> = v
            .as_object()
            .map(|m| m.keys().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(json_ok(r#"{"a": 1, "a": 2}"#), json!({"a": 2}));
    }

    #[test]
    fn python_strings() {
        assert_eq!(py(r#"'it\'s'"#), json!("it's"));
        assert_eq!(py(r#""it's""#), json!("it's"));
        assert_eq!(py(r"'a' 'b'"), json!("ab"));
        assert_eq!(py("'a'\"b\"r'\\c'"), json!("ab\\c"));
        assert_eq!(py("['a'\n 'b']"), json!(["ab"]));
        assert_eq!(
            py(r#"'\\ \' \" \a \b \f \n \r \t \v'"#),
            json!("\\ ' \" \u{7} \u{8} \u{c} \n \r \t \u{b}")
        );
        assert_eq!(py(r"'\101\x41\u0041\U00000041\0'"), json!("AAAA\0"));
        assert_eq!(py(r"'\777'"), json!("\u{1ff}"));
        assert_eq!(py(r"'\d\/\q'"), json!("\\d\\/\\q"));
        assert_eq!(py("'a\\\nb'"), json!("ab"));
        assert_eq!(py("'a\\\r\nb'"), json!("ab"));
        assert_eq!(py(r"r'\n\''"), json!("\\n\\'"));
        assert_eq!(py(r"R'\\'"), json!("\\\\"));
        assert_eq!(py(r"u'x'"), json!("x"));
        assert_eq!(py(r"b'\x41\n'"), json!("A\n"));
        assert_eq!(py(r"b'\u0041'"), json!("\\u0041"));
        assert_eq!(py(r"rb'\x41'"), json!("\\x41"));
        assert_eq!(py(r"b'\xc3\xa9'"), json!("é"));
        assert_eq!(py(r"b'\303\251'"), json!("é"));
        assert_eq!(py("'tab\there'"), json!("tab\there"));
        assert_eq!(py(r"'\ud83d\ude00'"), json!("😀"));
        assert_eq!(py(r"'\U0001F600'"), json!("😀"));
        assert_eq!(py("'日本語 😀'"), json!("日本語 😀"));
        assert_eq!(py("'''a\r\nb'c'''"), json!("a\nb'c"));
        assert_eq!(py("\"\"\"x\"\"\""), json!("x"));
        assert_eq!(py("''"), json!(""));
        assert_eq!(py("'''''' 'x'"), json!("x"));
    }

    #[test]
    fn relaxed_is_a_union() {
        assert_eq!(
            relaxed("{'a': True, \"b\": false, 'c': None, 'd': null, 'e': [1, 2,], 'f': (1,),}"),
            json!({"a": true, "b": false, "c": null, "d": null, "e": [1, 2], "f": [1]})
        );
        assert_eq!(relaxed(r#""a\/b""#), json!("a/b"));
        assert_eq!(relaxed(r"'\d'"), json!("\\d"));
        assert_eq!(
            relaxed("\"line1\nline2\ttab\r\n\""),
            json!("line1\nline2\ttab\r\n")
        );
        assert_eq!(relaxed("'\u{1}'"), json!("\u{1}"));
        assert_eq!(relaxed("{\n'a'\n:\n1\n}"), json!({"a": 1}));
        assert!(relaxed("-0").is_f64());
        assert_eq!(kind("NaN", Dialect::Relaxed), unsupported("NaN"));
        assert_eq!(kind("-Infinity", Dialect::Relaxed), unsupported("Infinity"));
        assert_eq!(
            kind("[Infinity]", Dialect::Relaxed),
            unsupported("Infinity")
        );
        assert_eq!(kind("nan", Dialect::Relaxed), unsupported("name `nan`"));
        assert_eq!(kind("{a: 1}", Dialect::Relaxed), unsupported("name `a`"));
    }

    #[test]
    fn truncation_is_unexpected_end() {
        let cases = [
            r#"{"a": "hello"#,
            r#"{"a": [1, 2"#,
            r#"{"a": [1, 2,"#,
            r#"{"a"#,
            r#"{"a": "#,
            r#"{"a": tr"#,
            r#"{"a": nul"#,
            r#"{"a": 1."#,
            r#"{"a": 1e"#,
            r#"{"a": -"#,
            r#"{"a": "\u12"#,
            r#"{"a": "\ud83d"#,
            r#"{"a": "\ud83d\"#,
            r#"{"a": "x\"#,
            "[",
            "{",
        ];
        for text in cases {
            for dialect in [Dialect::Json, Dialect::Python, Dialect::Relaxed] {
                let text = if dialect == Dialect::Python {
                    text.replace("tr", "Tr").replace("nul", "Non")
                } else {
                    text.to_owned()
                };
                let e = err(&text, dialect);
                assert_eq!(
                    e.kind,
                    LiteralErrorKind::UnexpectedEnd,
                    "{text:?} {dialect:?}"
                );
                assert_eq!(e.offset, text.len(), "{text:?} {dialect:?}");
            }
        }
        assert_eq!(
            kind("{'a': (1, ", Dialect::Python),
            LiteralErrorKind::UnexpectedEnd
        );
        assert_eq!(
            kind("{'a': '''x", Dialect::Python),
            LiteralErrorKind::UnexpectedEnd
        );
        assert_eq!(
            kind("{'a': 0x", Dialect::Relaxed),
            LiteralErrorKind::UnexpectedEnd
        );
    }

    #[test]
    fn error_offsets() {
        let e = err(r#"{"a": 1, "b": x}"#, Dialect::Json);
        assert_eq!(e.offset, 14);
        assert_eq!(e.kind, unsupported("name `x`"));
        assert_eq!(err("[1] x", Dialect::Json).offset, 4);
        assert_eq!(
            err("  ", Dialect::Json),
            LiteralError {
                offset: 2,
                kind: LiteralErrorKind::EmptyInput
            }
        );
        assert_eq!(err("", Dialect::Python).kind, LiteralErrorKind::EmptyInput);
        assert_eq!(err(r#"["\q"]"#, Dialect::Json).offset, 2);
        assert_eq!(err("[1, 2 3]", Dialect::Python).offset, 6);
        assert_eq!(err("'é' x", Dialect::Python).offset, 5);
    }

    #[test]
    fn display_mentions_offset() {
        let e = err("[1, x]", Dialect::Json);
        assert_eq!(e.to_string(), "unsupported syntax: name `x` at byte 4");
        let e = err("[1", Dialect::Json);
        assert_eq!(e.to_string(), "unexpected end of input at byte 2");
        assert_eq!(
            LiteralErrorKind::UnexpectedChar('\'').to_string(),
            "unexpected character '\\''"
        );
        assert_eq!(
            LiteralErrorKind::TooDeep.to_string(),
            "nesting deeper than 128 levels"
        );
    }

    #[test]
    fn prefix_parsing() {
        assert_eq!(
            parse_literal_prefix(r#"  {"a": 1} trailing {"b": 2}"#, Dialect::Json),
            Ok((json!({"a": 1}), 10))
        );
        assert_eq!(
            parse_literal_prefix("1, 2", Dialect::Python),
            Ok((json!(1), 1))
        );
        assert_eq!(
            parse_literal_prefix("'a' 'b' c", Dialect::Python),
            Ok((json!("ab"), 7))
        );
        assert_eq!(
            parse_literal_prefix("'a'\n'b'", Dialect::Python),
            Ok((json!("a"), 3))
        );
        assert_eq!(
            parse_literal_prefix("{}{}", Dialect::Relaxed),
            Ok((json!({}), 2))
        );
        assert_eq!(
            parse_literal_prefix(" \n ", Dialect::Relaxed).map_err(|e| e.kind),
            Err(LiteralErrorKind::EmptyInput)
        );
    }

    #[test]
    fn depth_limit() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        for dialect in [Dialect::Json, Dialect::Python, Dialect::Relaxed] {
            assert!(parse_literal(&ok, dialect).is_ok(), "{dialect:?}");
            let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
            assert_eq!(
                err(&deep, dialect),
                LiteralError {
                    offset: MAX_DEPTH,
                    kind: LiteralErrorKind::TooDeep
                }
            );
        }
        let objects = format!(
            "{}1{}",
            r#"{"a":"#.repeat(MAX_DEPTH + 1),
            "}".repeat(MAX_DEPTH + 1)
        );
        assert_eq!(kind(&objects, Dialect::Json), LiteralErrorKind::TooDeep);
        let parens = format!(
            "{}1{}",
            "(".repeat(MAX_DEPTH + 1),
            ")".repeat(MAX_DEPTH + 1)
        );
        assert_eq!(kind(&parens, Dialect::Python), LiteralErrorKind::TooDeep);
        let signed = format!(
            "-{}1{}",
            "(".repeat(MAX_DEPTH + 1),
            ")".repeat(MAX_DEPTH + 1)
        );
        assert_eq!(kind(&signed, Dialect::Python), LiteralErrorKind::TooDeep);
    }

    #[test]
    fn hundred_thousand_brackets_do_not_overflow_the_stack() {
        let n = 100_000;
        for open in ["[", "{", "(", "{\"a\":", "{'a':[", "-("] {
            let text = open.repeat(n);
            for dialect in [Dialect::Json, Dialect::Python, Dialect::Relaxed] {
                let e = err(&text, dialect);
                assert!(
                    matches!(
                        e.kind,
                        LiteralErrorKind::TooDeep
                            | LiteralErrorKind::UnexpectedChar(_)
                            | LiteralErrorKind::InvalidNumber
                    ),
                    "{open} {dialect:?}: {e}"
                );
            }
        }
        let text = "[".repeat(n) + &"]".repeat(n);
        assert_eq!(kind(&text, Dialect::Relaxed), LiteralErrorKind::TooDeep);
    }

    #[test]
    fn locate_lines_and_columns() {
        let text = "ab\ncé\r\nx";
        assert_eq!(locate(text, 0), (1, 1));
        assert_eq!(locate(text, 2), (1, 3));
        assert_eq!(locate(text, 3), (2, 1));
        assert_eq!(locate(text, 6), (2, 3));
        // Inside the two-byte 'é': refers to it.
        assert_eq!(locate(text, 5), (2, 2));
        assert_eq!(locate(text, 8), (3, 1));
        assert_eq!(locate(text, 1000), (3, 2));
        assert_eq!(locate("", 5), (1, 1));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        const ALL: [Dialect; 3] = [Dialect::Json, Dialect::Python, Dialect::Relaxed];

        /// Value equality that lets floats differ in the last bits, since
        /// serde_json's default float parsing may be off by an ulp or so.
        fn nearly_equal(a: &Value, b: &Value) -> bool {
            match (a, b) {
                (Value::Number(x), Value::Number(y)) if x.is_f64() && y.is_f64() => {
                    let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                    x == y || (x - y).abs() <= x.abs().max(y.abs()) * 1e-15
                }
                (Value::Array(x), Value::Array(y)) => {
                    x.len() == y.len() && x.iter().zip(y).all(|(a, b)| nearly_equal(a, b))
                }
                (Value::Object(x), Value::Object(y)) => {
                    x.len() == y.len()
                        && x.iter()
                            .zip(y)
                            .all(|((ka, va), (kb, vb))| ka == kb && nearly_equal(va, vb))
                }
                _ => a == b,
            }
        }

        fn check_no_panic(text: &str) {
            for dialect in ALL {
                let whole = parse_literal(text, dialect);
                let prefix = parse_literal_prefix(text, dialect);
                if let Err(e) = &whole {
                    assert!(e.offset <= text.len());
                }
                if let Ok((_, end)) = &prefix {
                    assert!(*end <= text.len());
                    assert!(text.is_char_boundary(*end));
                }
                // A complete parse is also a prefix parse of the same value.
                if let Ok(v) = whole {
                    if let Ok((pv, _)) = prefix {
                        if dialect == Dialect::Json {
                            assert_eq!(v, pv);
                        }
                    }
                }
            }
        }

        /// Short strings over the characters the grammars care about, so
        /// that the deeper parser paths are reached often.
        const JSON_LIKE: &str = r#"[\[\]{}()'",: \n\t0-9a-zA-Z_.+\-\\/éu😀#*]{0,48}"#;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            #[test]
            fn arbitrary_strings_never_panic(text in any::<String>()) {
                check_no_panic(&text);
            }

            #[test]
            fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
                check_no_panic(&String::from_utf8_lossy(&bytes));
            }

            #[test]
            fn json_like_strings_never_panic(text in JSON_LIKE) {
                check_no_panic(&text);
            }

            #[test]
            fn json_dialect_agrees_with_serde_json(text in JSON_LIKE) {
                let ours = parse_literal(&text, Dialect::Json).ok();
                let theirs = serde_json::from_str::<Value>(&text).ok();
                match (&ours, &theirs) {
                    (Some(a), Some(b)) => prop_assert!(nearly_equal(a, b), "{:?} vs {:?}", a, b),
                    _ => prop_assert_eq!(ours, theirs),
                }
            }

            #[test]
            fn json_results_are_relaxed_results(text in JSON_LIKE) {
                if let Ok(v) = parse_literal(&text, Dialect::Json) {
                    // Only `-0` differs: a float in both, so the values agree.
                    prop_assert_eq!(parse_literal(&text, Dialect::Relaxed), Ok(v));
                }
            }

            #[test]
            fn python_results_are_relaxed_results(text in JSON_LIKE) {
                if let Ok(v) = parse_literal(&text, Dialect::Python) {
                    if !text.contains("-0") && !text.contains("\\/") && !text.contains('\r') {
                        prop_assert_eq!(parse_literal(&text, Dialect::Relaxed), Ok(v));
                    }
                }
            }
        }
    }
}

//! The recursive-descent [`Parser`]: its state, whitespace handling, values
//! and containers (lists, tuples, dicts, sets), and names.
//!
//! String literals are parsed in [`super::strings`], numbers in
//! [`super::numbers`].

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::numbers::limbs_to_decimal;
use super::strings::Prefix;
use super::{Dialect, LiteralError, LiteralErrorKind, MAX_DEPTH};
use crate::python::repr::py_float_repr;

/// Longest identifier echoed back in an error message; keeps messages short
/// when the input contains a long run of letters.
const MAX_NAME_IN_MESSAGE: usize = 32;

/// A parsed value together with what Python type it came from, which decides
/// whether it can be a dict key or set element and how a key is spelt.
pub(super) struct Parsed {
    pub(super) value: Value,
    pub(super) kind: Kind,
    /// Byte offset where the value starts, for errors found later.
    pub(super) start: usize,
}

/// The Python type of a parsed value.
pub(super) enum Kind {
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
pub(super) enum IntRepr {
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
    pub(super) fn into_value(self) -> Result<Value, LiteralError> {
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

pub(super) type PResult<T> = Result<T, LiteralError>;

/// Recursive-descent parser state. `pos` is always on a character boundary.
pub(super) struct Parser<'a> {
    pub(super) text: &'a str,
    pub(super) pos: usize,
    pub(super) dialect: Dialect,
    /// Number of open containers and grouping parentheses.
    depth: usize,
}

impl<'a> Parser<'a> {
    pub(super) fn new(text: &'a str, dialect: Dialect) -> Self {
        Parser {
            text,
            pos: 0,
            dialect,
            depth: 0,
        }
    }

    pub(super) fn error_at(&self, offset: usize, kind: LiteralErrorKind) -> LiteralError {
        LiteralError { offset, kind }
    }

    pub(super) fn end_error(&self) -> LiteralError {
        self.error_at(self.text.len(), LiteralErrorKind::UnexpectedEnd)
    }

    /// The error for whatever is at the current position when it is not what
    /// the grammar needs: end of input or an unexpected character.
    pub(super) fn unexpected_here(&self) -> LiteralError {
        match self.peek_char() {
            None => self.end_error(),
            Some(c) => self.error_at(self.pos, LiteralErrorKind::UnexpectedChar(c)),
        }
    }

    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }

    pub(super) fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    pub(super) fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.text
            .as_bytes()
            .get(self.pos.saturating_add(ahead))
            .copied()
    }

    pub(super) fn peek_char(&self) -> Option<char> {
        self.text.get(self.pos..).and_then(|s| s.chars().next())
    }

    pub(super) fn slice(&self, from: usize, to: usize) -> &'a str {
        self.text.get(from..to).unwrap_or("")
    }

    /// Skips whitespace between tokens. Python only allows line breaks
    /// inside brackets (outside them a line break ends the expression), so
    /// they are skipped there only at depth > 0.
    pub(super) fn skip_ws(&mut self) {
        let newlines = !matches!(self.dialect, Dialect::Python) || self.depth > 0;
        self.skip_ws_inner(newlines);
    }

    /// Skips whitespace including line breaks: used before the value and at
    /// the end of the text, where every dialect allows them.
    pub(super) fn skip_ws_all(&mut self) {
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
    pub(super) fn enter(&mut self, at: usize) -> PResult<()> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error_at(at, LiteralErrorKind::TooDeep));
        }
        self.depth += 1;
        Ok(())
    }

    pub(super) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    pub(super) fn parse_value(&mut self) -> PResult<Parsed> {
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
    pub(super) fn parse_bare_tuple(&mut self, first: Parsed) -> PResult<Value> {
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

    pub(super) fn read_ident(&mut self) -> &'a str {
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
    pub(super) fn is_truncated_constant(&self, name: &str) -> bool {
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

    pub(super) fn name_error(&self, name: &str) -> LiteralErrorKind {
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
}

pub(super) fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

pub(super) fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

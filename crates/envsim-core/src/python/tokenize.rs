//! The part of CPython 3.11's tokenizer (`Parser/tokenizer.c`) and literal
//! decoding (`Parser/string_parser.c`, the `unicode_escape` codec,
//! `bytes` escapes, `\N{...}` lookup) that [`super::literal_eval`] needs.
//!
//! The lexer reads the whole source the way CPython does — indentation at
//! the start of each logical line, comments, explicit (`\` + newline) and
//! implicit (inside brackets) line joining, the 200-bracket nesting limit —
//! but only produces the tokens a literal can be made of. Any other token
//! (a name other than `True`/`False`/`None`/`set`, an operator other than
//! brackets, `,`, `:`, `+`, `-`, an f-string, an indent) can never be part
//! of a value `ast.literal_eval` returns, so it is reported as an error as
//! soon as it is seen; whether CPython would have raised a `SyntaxError` or
//! a `ValueError` for it makes no difference to the outcome.
//!
//! Numbers and strings are converted here, exactly as the CPython compiler
//! converts them (digit limit for decimal integers, correctly rounded
//! floats, every escape sequence).

use super::int::{PyInt, MAX_STR_DIGITS};
use super::literal::LiteralEvalError;
use super::text;
use super::unicode_names::lookup_name;
use super::value::PyValue;

/// CPython's `MAXLEVEL`: at most this many brackets may be open at once.
pub(crate) const MAX_LEVEL: usize = 200;

/// CPython's `TABSIZE` for indentation columns.
const TAB_SIZE: usize = 8;

type Result<T> = std::result::Result<T, LiteralEvalError>;

fn error(offset: usize, message: &str) -> LiteralEvalError {
    LiteralEvalError {
        offset,
        message: message.to_owned(),
    }
}

/// A token that can occur in a literal.
#[derive(Debug)]
pub(crate) enum Token {
    /// A NUMBER, converted (`int`, `float` or imaginary `complex`).
    Number(PyValue),
    /// A STRING other than an f-string, decoded.
    Str(StrLit),
    /// `True`, `False`, `None` or `...`.
    Constant(PyValue),
    /// The name `set` (or one that NFKC-normalizes to it).
    Set,
    /// `(`, `[` or `{`.
    Open(u8),
    /// `)`, `]` or `}` (the lexer has checked it matches its opener).
    Close,
    /// `,`.
    Comma,
    /// `:`.
    Colon,
    /// `+`.
    Plus,
    /// `-`.
    Minus,
    /// NEWLINE: the end of a logical line outside brackets.
    Newline,
    /// ENDMARKER.
    End,
}

/// A decoded string literal.
#[derive(Debug)]
pub(crate) enum StrLit {
    /// A `str`, in generalized UTF-8.
    Str(Vec<u8>),
    /// A `bytes`.
    Bytes(Vec<u8>),
}

/// A string prefix.
#[derive(Clone, Copy, Default)]
struct Prefix {
    raw: bool,
    bytes: bool,
    format: bool,
}

/// The prefixes CPython accepts before a quote, in any case: `r`, `u`, `b`,
/// `br`, `rb`, `f`, `fr`, `rf`.
fn string_prefix(word: &[u8]) -> Option<Prefix> {
    let lower: Vec<u8> = word.iter().map(u8::to_ascii_lowercase).collect();
    let (raw, bytes, format) = match lower.as_slice() {
        b"r" => (true, false, false),
        b"u" => (false, false, false),
        b"b" => (false, true, false),
        b"br" | b"rb" => (true, true, false),
        b"f" => (false, false, true),
        b"fr" | b"rf" => (true, false, true),
        _ => return None,
    };
    Some(Prefix { raw, bytes, format })
}

/// `is_potential_identifier_char`: ASCII letters, digits, `_` and every byte
/// of a non-ASCII character.
fn is_identifier_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// The lexer over a source that has had its newlines translated (`\r\n` and
/// `\r` to `\n`) and its leading spaces and tabs stripped.
pub(crate) struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
    /// At the beginning of a line (indentation still to be measured).
    at_line_start: bool,
    /// The open brackets.
    parens: Vec<u8>,
}

impl<'a> Lexer<'a> {
    pub(crate) fn new(src: &'a [u8]) -> Lexer<'a> {
        Lexer {
            src,
            pos: 0,
            at_line_start: true,
            parens: Vec::new(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.src.get(self.pos + ahead).copied()
    }

    fn peek_digit(&self) -> bool {
        self.peek().is_some_and(|b| b.is_ascii_digit())
    }

    /// The next token and the offset where it starts.
    pub(crate) fn next_token(&mut self) -> Result<(usize, Token)> {
        loop {
            let blank = if self.at_line_start {
                self.at_line_start = false;
                self.indentation()?
            } else {
                false
            };
            if let Some(token) = self.token(blank)? {
                return Ok(token);
            }
        }
    }

    /// Measures the indentation of a new line; returns whether the line is
    /// blank (only whitespace and maybe a comment before its newline).
    ///
    /// The indentation stack never grows in a literal (an INDENT is a syntax
    /// error), so a line with content outside brackets must start in column
    /// 0. A backslash continuation inside the indentation fixes the column
    /// at the first backslash, as CPython 3.11 does.
    fn indentation(&mut self) -> Result<bool> {
        let mut col = 0usize;
        let mut continuation_col = 0usize;
        loop {
            match self.peek() {
                Some(b' ') => col = col.saturating_add(1),
                Some(b'\t') => col = (col / TAB_SIZE).saturating_add(1).saturating_mul(TAB_SIZE),
                Some(0x0C) => col = 0,
                Some(b'\\') => {
                    if continuation_col == 0 {
                        continuation_col = col;
                    }
                    self.pos += 1;
                    self.continuation()?;
                    continue;
                }
                _ => break,
            }
            self.pos += 1;
        }
        let blank = matches!(self.peek(), Some(b'#' | b'\n'));
        if !blank && self.parens.is_empty() {
            let col = if continuation_col != 0 {
                continuation_col
            } else {
                col
            };
            if col != 0 {
                return Err(error(self.pos, "unexpected indent"));
            }
        }
        Ok(blank)
    }

    /// After a backslash: it must end the line, and the source must go on.
    fn continuation(&mut self) -> Result<()> {
        if self.peek() != Some(b'\n') {
            return Err(error(
                self.pos,
                "unexpected character after line continuation character",
            ));
        }
        self.pos += 1;
        if self.peek().is_none() {
            return Err(error(self.pos, "unexpected EOF while parsing"));
        }
        Ok(())
    }

    /// The rest of `tok_get` after the indentation: `None` when a newline
    /// that produces no token (blank line, inside brackets) was consumed.
    fn token(&mut self, blank: bool) -> Result<Option<(usize, Token)>> {
        loop {
            while matches!(self.peek(), Some(b' ' | b'\t' | 0x0C)) {
                self.pos += 1;
            }
            let start = self.pos;
            if self.peek() == Some(b'#') {
                while !matches!(self.peek(), None | Some(b'\n')) {
                    self.pos += 1;
                }
            }
            let Some(c) = self.peek() else {
                if self.parens.is_empty() {
                    return Ok(Some((start, Token::End)));
                }
                return Err(error(start, "unexpected EOF in multi-line statement"));
            };
            let token = match c {
                b'\n' => {
                    self.pos += 1;
                    self.at_line_start = true;
                    if blank || !self.parens.is_empty() {
                        return Ok(None);
                    }
                    Token::Newline
                }
                b'\\' => {
                    self.pos += 1;
                    self.continuation()?;
                    continue;
                }
                b'\'' | b'"' => self.string(Prefix::default())?,
                b'0'..=b'9' => self.number(start)?,
                b'.' => match (self.peek_at(1), self.peek_at(2)) {
                    (Some(b'0'..=b'9'), _) => self.number(start)?,
                    (Some(b'.'), Some(b'.')) => {
                        self.pos += 3;
                        Token::Constant(PyValue::Ellipsis)
                    }
                    _ => return Err(error(start, "attribute access is not a literal")),
                },
                c if is_identifier_byte(c) => self.word(start)?,
                b'(' | b'[' | b'{' => {
                    if self.parens.len() >= MAX_LEVEL {
                        return Err(error(start, "too many nested parentheses"));
                    }
                    self.parens.push(c);
                    self.pos += 1;
                    Token::Open(c)
                }
                b')' | b']' | b'}' => {
                    let opener = match c {
                        b')' => b'(',
                        b']' => b'[',
                        _ => b'{',
                    };
                    if self.parens.pop() != Some(opener) {
                        return Err(error(start, "unmatched or mismatched closing bracket"));
                    }
                    self.pos += 1;
                    Token::Close
                }
                b',' | b':' | b'+' | b'-' => {
                    self.pos += 1;
                    match c {
                        b',' => Token::Comma,
                        b':' => Token::Colon,
                        b'+' => Token::Plus,
                        _ => Token::Minus,
                    }
                }
                _ => return Err(error(start, "invalid syntax for a literal")),
            };
            return Ok(Some((start, token)));
        }
    }

    /// A name, or the prefix of a string literal.
    fn word(&mut self, start: usize) -> Result<Token> {
        while self.peek().is_some_and(is_identifier_byte) {
            self.pos += 1;
        }
        let word = self.src.get(start..self.pos).unwrap_or_default();
        if matches!(self.peek(), Some(b'\'' | b'"')) {
            if let Some(prefix) = string_prefix(word) {
                return self.string(prefix);
            }
        }
        match word {
            b"True" => Ok(Token::Constant(PyValue::Bool(true))),
            b"False" => Ok(Token::Constant(PyValue::Bool(false))),
            b"None" => Ok(Token::Constant(PyValue::None)),
            _ if is_set_name(word) => Ok(Token::Set),
            _ => Err(error(start, "a name is not a literal")),
        }
    }

    /// A NUMBER token starting at `start` (a digit, or `.` then a digit).
    fn number(&mut self, start: usize) -> Result<Token> {
        let kind = if self.peek() == Some(b'.') {
            self.pos += 1;
            self.fraction()?
        } else if self.peek() == Some(b'0') {
            self.pos += 1;
            match self.peek() {
                Some(b'x' | b'X') => self.radix_digits(16)?,
                Some(b'o' | b'O') => self.radix_digits(8)?,
                Some(b'b' | b'B') => self.radix_digits(2)?,
                _ => {
                    loop {
                        if self.peek() == Some(b'_') {
                            self.pos += 1;
                            if !self.peek_digit() {
                                return Err(error(self.pos, "invalid decimal literal"));
                            }
                        }
                        if self.peek() != Some(b'0') {
                            break;
                        }
                        self.pos += 1;
                    }
                    let nonzero = self.peek_digit();
                    if nonzero {
                        self.decimal_tail()?;
                    }
                    match self.peek() {
                        Some(b'.') => {
                            self.pos += 1;
                            self.fraction()?
                        }
                        Some(b'e' | b'E' | b'j' | b'J') => self.exponent_and_suffix(true)?,
                        _ if nonzero => {
                            return Err(error(
                                start,
                                "leading zeros in decimal integer literals are not permitted",
                            ))
                        }
                        _ => NumberKind::Decimal,
                    }
                }
            }
        } else {
            self.decimal_tail()?;
            if self.peek() == Some(b'.') {
                self.pos += 1;
                self.fraction()?
            } else {
                self.exponent_and_suffix(false)?
            }
        };
        // `verify_end_of_number`: a literal directly followed by a name
        // character is an error (or, before a keyword, a deprecated
        // spelling of a non-literal expression).
        if self.peek().is_some_and(is_identifier_byte) {
            return Err(error(self.pos, "invalid numeric literal"));
        }
        let text: Vec<u8> = self
            .src
            .get(start..self.pos)
            .unwrap_or_default()
            .iter()
            .copied()
            .filter(|&b| b != b'_')
            .collect();
        convert_number(&text, kind)
            .map(Token::Number)
            .ok_or_else(|| error(start, "integer literal too large"))
    }

    /// `tok_decimal_tail`: digits, with single underscores between them.
    fn decimal_tail(&mut self) -> Result<()> {
        loop {
            while self.peek_digit() {
                self.pos += 1;
            }
            if self.peek() != Some(b'_') {
                return Ok(());
            }
            self.pos += 1;
            if !self.peek_digit() {
                return Err(error(self.pos, "invalid decimal literal"));
            }
        }
    }

    /// After the `.` of a float.
    fn fraction(&mut self) -> Result<NumberKind> {
        if self.peek_digit() {
            self.decimal_tail()?;
        }
        self.exponent_and_suffix(true)
    }

    /// An optional exponent, then an optional `j`.
    fn exponent_and_suffix(&mut self, mut float: bool) -> Result<NumberKind> {
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            float = true;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !self.peek_digit() {
                return Err(error(self.pos, "invalid decimal literal"));
            }
            self.decimal_tail()?;
        }
        if matches!(self.peek(), Some(b'j' | b'J')) {
            self.pos += 1;
            return Ok(NumberKind::Imaginary);
        }
        Ok(if float {
            NumberKind::Float
        } else {
            NumberKind::Decimal
        })
    }

    /// The digits after `0x`, `0o` or `0b` (the prefix letter is next).
    fn radix_digits(&mut self, radix: u32) -> Result<NumberKind> {
        self.pos += 1;
        let is_digit = |b: Option<u8>| b.is_some_and(|b| char::from(b).is_digit(radix));
        loop {
            if self.peek() == Some(b'_') {
                self.pos += 1;
            }
            if !is_digit(self.peek()) {
                return Err(error(self.pos, "invalid integer literal"));
            }
            while is_digit(self.peek()) {
                self.pos += 1;
            }
            if self.peek() != Some(b'_') {
                return Ok(NumberKind::Radix(radix));
            }
        }
    }

    /// A string literal; `self.pos` is at its opening quote.
    fn string(&mut self, prefix: Prefix) -> Result<Token> {
        let open = self.pos;
        let quote = self.peek();
        self.pos += 1;
        let mut quote_size = 1;
        let mut end_quote_size = 0;
        if self.peek() == quote {
            self.pos += 1;
            if self.peek() == quote {
                self.pos += 1;
                quote_size = 3;
            } else {
                end_quote_size = 1;
            }
        }
        let body_start = self.pos;
        while end_quote_size != quote_size {
            let Some(c) = self.peek() else {
                return Err(error(open, "unterminated string literal"));
            };
            if quote_size == 1 && c == b'\n' {
                return Err(error(open, "unterminated string literal"));
            }
            self.pos += 1;
            if Some(c) == quote {
                end_quote_size += 1;
            } else {
                end_quote_size = 0;
                if c == b'\\' && self.peek().is_some() {
                    self.pos += 1;
                }
            }
        }
        if prefix.format {
            return Err(error(open, "an f-string is not a literal"));
        }
        let body = self
            .src
            .get(body_start..self.pos.saturating_sub(quote_size))
            .unwrap_or_default();
        if prefix.bytes {
            if body.iter().any(|&b| b >= 0x80) {
                return Err(error(
                    body_start,
                    "bytes can only contain ASCII literal characters",
                ));
            }
            let value = if prefix.raw {
                body.to_vec()
            } else {
                decode_bytes_escapes(body).ok_or_else(|| error(body_start, "invalid \\x escape"))?
            };
            Ok(Token::Str(StrLit::Bytes(value)))
        } else {
            let value = if prefix.raw {
                body.to_vec()
            } else {
                decode_str_escapes(body)
                    .map_err(|at| error(body_start + at, "(unicode error) invalid escape"))?
            };
            Ok(Token::Str(StrLit::Str(value)))
        }
    }
}

/// What a NUMBER token is.
#[derive(Clone, Copy)]
enum NumberKind {
    /// A decimal integer.
    Decimal,
    /// `0x`, `0o` or `0b` integer.
    Radix(u32),
    /// A float.
    Float,
    /// An imaginary literal (`j` suffix).
    Imaginary,
}

/// `parsenumber`: the value of a NUMBER token, underscores removed. `None`
/// where CPython raises: a decimal integer of more than
/// [`MAX_STR_DIGITS`] digits.
fn convert_number(text: &[u8], kind: NumberKind) -> Option<PyValue> {
    let parse_float = |digits: &[u8]| {
        std::str::from_utf8(digits)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
    };
    match kind {
        NumberKind::Radix(radix) => PyInt::parse_radix(text.get(2..)?, radix).map(PyValue::Int),
        // Only zeros can start with `0` (`00`, `0_0`): `strtoul` reads them
        // without the digit limit.
        NumberKind::Decimal if text.first() == Some(&b'0') => Some(PyValue::int(0)),
        NumberKind::Decimal if text.len() > MAX_STR_DIGITS => None,
        NumberKind::Decimal => PyInt::parse_radix(text, 10).map(PyValue::Int),
        NumberKind::Float => parse_float(text).map(PyValue::Float),
        NumberKind::Imaginary => {
            let im = parse_float(text.get(..text.len().checked_sub(1)?)?)?;
            Some(PyValue::Complex { re: 0.0, im })
        }
    }
}

/// `bytes` escapes (`_PyBytes_DecodeEscape`); `None` on a bad `\x`.
fn decode_bytes_escapes(body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while let Some(&b) = body.get(i) {
        i += 1;
        if b != b'\\' {
            out.push(b);
            continue;
        }
        let Some(&c) = body.get(i) else {
            // Cannot happen: the tokenizer never ends a body on a lone `\`.
            return None;
        };
        i += 1;
        match c {
            b'\n' => {}
            b'\\' | b'\'' | b'"' => out.push(c),
            b'0'..=b'7' => {
                // CPython stores the value in a `char`: `b'\777'` is 0xFF.
                out.push((octal_escape(body, &mut i, c) & 0xFF) as u8);
            }
            b'x' => {
                let hi = body.get(i).and_then(|&d| char::from(d).to_digit(16))?;
                let lo = body.get(i + 1).and_then(|&d| char::from(d).to_digit(16))?;
                i += 2;
                out.push(u8::try_from(hi * 16 + lo).ok()?);
            }
            _ => match simple_escape(c) {
                Some(e) => out.push(e),
                None => {
                    // Unknown escape: the backslash stays, the character is
                    // read again as an ordinary one.
                    out.push(b'\\');
                    i = i.saturating_sub(1);
                }
            },
        }
    }
    Some(out)
}

/// An octal escape: `first` and up to two more octal digits from `body[*i..]`.
fn octal_escape(body: &[u8], i: &mut usize, first: u8) -> u32 {
    let mut value = u32::from(first.saturating_sub(b'0'));
    for _ in 0..2 {
        match body.get(*i) {
            Some(&d @ b'0'..=b'7') => {
                value = (value << 3) + u32::from(d - b'0');
                *i += 1;
            }
            _ => break,
        }
    }
    value
}

/// The one-letter escapes both codecs share.
fn simple_escape(c: u8) -> Option<u8> {
    Some(match c {
        b'a' => 0x07,
        b'b' => 0x08,
        b'f' => 0x0C,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'v' => 0x0B,
        _ => return None,
    })
}

/// `str` escapes (`decode_unicode_with_escapes`, then the `unicode_escape`
/// codec). `Err` holds the offset in `body` of the failing escape.
fn decode_str_escapes(body: &[u8]) -> std::result::Result<Vec<u8>, usize> {
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while let Some(&b) = body.get(i) {
        let escape_at = i;
        i += 1;
        if b != b'\\' {
            // Non-ASCII characters are copied byte by byte (the body is
            // valid UTF-8).
            out.push(b);
            continue;
        }
        let Some(&c) = body.get(i) else {
            return Err(escape_at);
        };
        if c >= 0x80 {
            // A backslash before a non-ASCII character is kept as is (the
            // compiler turns it into `\u005c`).
            out.push(b'\\');
            continue;
        }
        i += 1;
        let code_point = match c {
            b'\n' => continue,
            b'\\' | b'\'' | b'"' => u32::from(c),
            b'0'..=b'7' => octal_escape(body, &mut i, c),
            b'x' | b'u' | b'U' => {
                let count = match c {
                    b'x' => 2,
                    b'u' => 4,
                    _ => 8,
                };
                let mut value = 0u32;
                for _ in 0..count {
                    let digit = body
                        .get(i)
                        .and_then(|&d| char::from(d).to_digit(16))
                        .ok_or(escape_at)?;
                    value = (value << 4) | digit;
                    i += 1;
                }
                if value > 0x10_FFFF {
                    return Err(escape_at);
                }
                value
            }
            b'N' => {
                if body.get(i) != Some(&b'{') {
                    return Err(escape_at);
                }
                let name_start = i + 1;
                let name_len = body
                    .get(name_start..)
                    .and_then(|rest| rest.iter().position(|&d| d == b'}'))
                    .ok_or(escape_at)?;
                let name = body
                    .get(name_start..name_start + name_len)
                    .ok_or(escape_at)?;
                i = name_start + name_len + 1;
                lookup_name(name).ok_or(escape_at)?
            }
            _ => match simple_escape(c) {
                Some(e) => u32::from(e),
                None => {
                    out.push(b'\\');
                    u32::from(c)
                }
            },
        };
        text::encode(code_point, &mut out);
    }
    Ok(out)
}

/// Whether an identifier normalizes (NFKC, as the parser does with
/// non-ASCII identifiers) to `set`: each of its three characters is one
/// whose NFKC form is the corresponding letter and which is a valid
/// identifier character (no others exist in Unicode 14.0: fullwidth,
/// mathematical, modifier and subscript letters, `ſ`, `ℯ`, `ⅇ`).
fn is_set_name(word: &[u8]) -> bool {
    const S: &[u32] = &[
        0x73, 0x17F, 0x2E2, 0x209B, 0xFF53, 0x1D42C, 0x1D460, 0x1D494, 0x1D4C8, 0x1D4FC, 0x1D530,
        0x1D564, 0x1D598, 0x1D5CC, 0x1D600, 0x1D634, 0x1D668, 0x1D69C,
    ];
    const E: &[u32] = &[
        0x65, 0x1D49, 0x2091, 0x212F, 0x2147, 0xFF45, 0x1D41E, 0x1D452, 0x1D486, 0x1D4EE, 0x1D522,
        0x1D556, 0x1D58A, 0x1D5BE, 0x1D5F2, 0x1D626, 0x1D65A, 0x1D68E,
    ];
    const T: &[u32] = &[
        0x74, 0x1D57, 0x209C, 0xFF54, 0x1D42D, 0x1D461, 0x1D495, 0x1D4C9, 0x1D4FD, 0x1D531,
        0x1D565, 0x1D599, 0x1D5CD, 0x1D601, 0x1D635, 0x1D669, 0x1D69D,
    ];
    let mut chars = text::code_points(word);
    [S, E, T]
        .iter()
        .all(|set| chars.next().is_some_and(|cp| set.contains(&cp)))
        && chars.next().is_none()
}

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

/// The code point `\N{name}` stands for in CPython 3.11 (Unicode 14.0), or
/// `None` where it raises.
///
/// CPython matches the names of its table and the formal aliases ignoring
/// ASCII case but otherwise exactly (no loose matching: spaces, hyphens and
/// underscores must be as in the name). The algorithmic names are matched
/// case-sensitively: `CJK UNIFIED IDEOGRAPH-` followed by 4 or 5 upper-case
/// hex digits, `HANGUL SYLLABLE ` followed by jamo short names.
///
/// The names themselves come from `unicode_names2`, whose Unicode version is
/// newer than CPython 3.11's 14.0; the characters named since 14.0 are
/// excluded with [`NAMED_AFTER_14`] (names never change once assigned), and
/// the aliases are CPython's own list, [`NAME_ALIASES`]. Named sequences are
/// not accepted by `\N{...}`, and `unicode_names2` has none.
fn lookup_name(name: &[u8]) -> Option<u32> {
    if let Some(rest) = name.strip_prefix(b"HANGUL SYLLABLE ") {
        return hangul_syllable(rest);
    }
    if let Some(rest) = name.strip_prefix(b"CJK UNIFIED IDEOGRAPH-") {
        if !(4..=5).contains(&rest.len()) {
            return None;
        }
        let mut value = 0u32;
        for &d in rest {
            let digit = match d {
                b'0'..=b'9' => d - b'0',
                b'A'..=b'F' => d - b'A' + 10,
                _ => return None,
            };
            value = (value << 4) | u32::from(digit);
        }
        return CJK_UNIFIED_14
            .iter()
            .any(|&(lo, hi)| (lo..=hi).contains(&value))
            .then_some(value);
    }
    let upper = std::str::from_utf8(name).ok()?.to_ascii_uppercase();
    // The algorithmic names are not in CPython's name table, so spelled in
    // another case they match nothing.
    if upper.starts_with("HANGUL SYLLABLE ") || upper.starts_with("CJK UNIFIED IDEOGRAPH-") {
        return None;
    }
    // Every Unicode name and alias is made of these characters and starts
    // with a letter or digit (`unicode_names2::character` must not be given
    // a leading hyphen).
    let well_formed = upper
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric())
        && upper
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b' ' || b == b'-');
    if !well_formed {
        return None;
    }
    if let Some(c) = unicode_names2::character(&upper) {
        let cp = u32::from(c);
        let exact = unicode_names2::name(c).is_some_and(|n| n.to_string() == upper);
        // The ranges are sorted and disjoint.
        let after_14 = NAMED_AFTER_14
            .get(NAMED_AFTER_14.partition_point(|&(_, hi)| hi < cp))
            .is_some_and(|&(lo, _)| lo <= cp);
        if exact && !after_14 {
            return Some(cp);
        }
    }
    NAME_ALIASES
        .binary_search_by(|&(alias, _)| alias.cmp(upper.as_str()))
        .ok()
        .and_then(|i| NAME_ALIASES.get(i))
        .map(|&(_, cp)| cp)
}

/// Jamo short names of the leading consonants, vowels and trailing
/// consonants, in Unicode order.
const JAMO_L: [&str; 19] = [
    "G", "GG", "N", "D", "DD", "R", "M", "B", "BB", "S", "SS", "", "J", "JJ", "C", "K", "T", "P",
    "H",
];
const JAMO_V: [&str; 21] = [
    "A", "AE", "YA", "YAE", "EO", "E", "YEO", "YE", "O", "WA", "WAE", "OE", "YO", "U", "WEO", "WE",
    "WI", "YU", "EU", "YI", "I",
];
const JAMO_T: [&str; 28] = [
    "", "G", "GG", "GS", "N", "NJ", "NH", "D", "L", "LG", "LM", "LB", "LS", "LT", "LP", "LH", "M",
    "B", "BS", "S", "SS", "NG", "J", "C", "K", "T", "P", "H",
];

/// `HANGUL SYLLABLE <L><V><T>`: each part is the longest matching short name
/// (case-sensitive), and the three must use up the whole name.
fn hangul_syllable(mut rest: &[u8]) -> Option<u32> {
    let mut indices = [0u32; 3];
    for (slot, table) in indices
        .iter_mut()
        .zip([&JAMO_L[..], &JAMO_V[..], &JAMO_T[..]])
    {
        let mut best: Option<(usize, usize)> = None;
        for (i, short) in table.iter().enumerate() {
            if best.is_some_and(|(len, _)| short.len() <= len) {
                continue;
            }
            if rest.starts_with(short.as_bytes()) {
                best = Some((short.len(), i));
            }
        }
        let (len, index) = best?;
        rest = rest.get(len..)?;
        *slot = u32::try_from(index).ok()?;
    }
    let [l, v, t] = indices;
    rest.is_empty().then_some(0xAC00 + (l * 21 + v) * 28 + t)
}

/// The CJK unified ideograph blocks of Unicode 14.0 (`is_unified_ideograph`
/// in CPython 3.11's `unicodedata`).
const CJK_UNIFIED_14: [(u32, u32); 8] = [
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B738),
    (0x2B740, 0x2B81D),
    (0x2B820, 0x2CEA1),
    (0x2CEB0, 0x2EBE0),
    (0x30000, 0x3134A),
];

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

/// Code points that have a name in the Unicode version `unicode_names2` was
/// built from but not in Unicode 14.0, CPython 3.11's version (inclusive
/// ranges; CJK unified ideographs and Hangul syllables are handled apart).
const NAMED_AFTER_14: &[(u32, u32)] = &[
    (0x88F, 0x88F),
    (0x897, 0x897),
    (0xC5C, 0xC5C),
    (0xCDC, 0xCDC),
    (0xCF3, 0xCF3),
    (0xECE, 0xECE),
    (0x1ACF, 0x1ADD),
    (0x1AE0, 0x1AEB),
    (0x1B4E, 0x1B4F),
    (0x1B7F, 0x1B7F),
    (0x1C89, 0x1C8A),
    (0x20C1, 0x20C1),
    (0x2427, 0x2429),
    (0x2B96, 0x2B96),
    (0x2FFC, 0x2FFF),
    (0x31E4, 0x31E5),
    (0x31EF, 0x31EF),
    (0xA7CB, 0xA7CF),
    (0xA7D2, 0xA7D2),
    (0xA7D4, 0xA7D4),
    (0xA7DA, 0xA7DC),
    (0xA7F1, 0xA7F1),
    (0xFBC3, 0xFBD2),
    (0xFD90, 0xFD91),
    (0xFDC8, 0xFDCE),
    (0x105C0, 0x105F3),
    (0x10940, 0x10959),
    (0x10D40, 0x10D65),
    (0x10D69, 0x10D85),
    (0x10D8E, 0x10D8F),
    (0x10EC2, 0x10EC7),
    (0x10ED0, 0x10ED8),
    (0x10EFA, 0x10EFF),
    (0x1123F, 0x11241),
    (0x11380, 0x11389),
    (0x1138B, 0x1138B),
    (0x1138E, 0x1138E),
    (0x11390, 0x113B5),
    (0x113B7, 0x113C0),
    (0x113C2, 0x113C2),
    (0x113C5, 0x113C5),
    (0x113C7, 0x113CA),
    (0x113CC, 0x113D5),
    (0x113D7, 0x113D8),
    (0x113E1, 0x113E2),
    (0x116D0, 0x116E3),
    (0x11B00, 0x11B09),
    (0x11B60, 0x11B67),
    (0x11BC0, 0x11BE1),
    (0x11BF0, 0x11BF9),
    (0x11DB0, 0x11DDB),
    (0x11DE0, 0x11DE9),
    (0x11F00, 0x11F10),
    (0x11F12, 0x11F3A),
    (0x11F3E, 0x11F5A),
    (0x1342F, 0x1342F),
    (0x13439, 0x13455),
    (0x13460, 0x143FA),
    (0x16100, 0x16139),
    (0x16D40, 0x16D79),
    (0x16EA0, 0x16EB8),
    (0x16EBB, 0x16ED3),
    (0x16FF2, 0x16FF6),
    (0x18CFF, 0x18CFF),
    (0x18D80, 0x18DF2),
    (0x1B132, 0x1B132),
    (0x1B155, 0x1B155),
    (0x1CC00, 0x1CCFC),
    (0x1CD00, 0x1CEB3),
    (0x1CEBA, 0x1CED0),
    (0x1CEE0, 0x1CEF0),
    (0x1D2C0, 0x1D2D3),
    (0x1DF25, 0x1DF2A),
    (0x1E030, 0x1E06D),
    (0x1E08F, 0x1E08F),
    (0x1E4D0, 0x1E4F9),
    (0x1E5D0, 0x1E5FA),
    (0x1E5FF, 0x1E5FF),
    (0x1E6C0, 0x1E6DE),
    (0x1E6E0, 0x1E6F5),
    (0x1E6FE, 0x1E6FF),
    (0x1F6D8, 0x1F6D8),
    (0x1F6DC, 0x1F6DC),
    (0x1F774, 0x1F77F),
    (0x1F7D9, 0x1F7D9),
    (0x1F8B2, 0x1F8BB),
    (0x1F8C0, 0x1F8C1),
    (0x1F8D0, 0x1F8D8),
    (0x1FA54, 0x1FA57),
    (0x1FA75, 0x1FA77),
    (0x1FA87, 0x1FA8A),
    (0x1FA8E, 0x1FA8F),
    (0x1FAAD, 0x1FAAF),
    (0x1FABB, 0x1FABF),
    (0x1FAC6, 0x1FAC6),
    (0x1FAC8, 0x1FAC8),
    (0x1FACD, 0x1FACF),
    (0x1FADA, 0x1FADC),
    (0x1FADF, 0x1FADF),
    (0x1FAE8, 0x1FAEA),
    (0x1FAEF, 0x1FAEF),
    (0x1FAF7, 0x1FAF8),
    (0x1FBCB, 0x1FBEF),
    (0x1FBFA, 0x1FBFA),
];

/// The formal name aliases CPython 3.11 accepts in `\N{...}` (those of
/// Unicode 14.0's `NameAliases.txt`), sorted by name.
const NAME_ALIASES: &[(&str, u32)] = &[
    ("ACK", 0x6),
    ("ACKNOWLEDGE", 0x6),
    ("ALERT", 0x7),
    ("ALM", 0x61C),
    ("APC", 0x9F),
    ("APPLICATION PROGRAM COMMAND", 0x9F),
    ("BACKSPACE", 0x8),
    ("BEL", 0x7),
    ("BOM", 0xFEFF),
    ("BPH", 0x82),
    ("BREAK PERMITTED HERE", 0x82),
    ("BS", 0x8),
    ("BYTE ORDER MARK", 0xFEFF),
    (
        "BYZANTINE MUSICAL SYMBOL FTHORA SKLIRON CHROMA VASIS",
        0x1D0C5,
    ),
    ("CAN", 0x18),
    ("CANCEL", 0x18),
    ("CANCEL CHARACTER", 0x94),
    ("CARRIAGE RETURN", 0xD),
    ("CCH", 0x94),
    ("CGJ", 0x34F),
    ("CHARACTER TABULATION", 0x9),
    ("CHARACTER TABULATION SET", 0x88),
    ("CHARACTER TABULATION WITH JUSTIFICATION", 0x89),
    ("CONTROL SEQUENCE INTRODUCER", 0x9B),
    ("CR", 0xD),
    ("CSI", 0x9B),
    ("CUNEIFORM SIGN NU11 OVER NU11 BUR OVER BUR", 0x122D5),
    ("CUNEIFORM SIGN NU11 TENU", 0x122D4),
    ("DATA LINK ESCAPE", 0x10),
    ("DC1", 0x11),
    ("DC2", 0x12),
    ("DC3", 0x13),
    ("DC4", 0x14),
    ("DCS", 0x90),
    ("DEL", 0x7F),
    ("DELETE", 0x7F),
    ("DEVICE CONTROL FOUR", 0x14),
    ("DEVICE CONTROL ONE", 0x11),
    ("DEVICE CONTROL STRING", 0x90),
    ("DEVICE CONTROL THREE", 0x13),
    ("DEVICE CONTROL TWO", 0x12),
    ("DLE", 0x10),
    ("END OF GUARDED AREA", 0x97),
    ("END OF LINE", 0xA),
    ("END OF MEDIUM", 0x19),
    ("END OF PROTECTED AREA", 0x97),
    ("END OF SELECTED AREA", 0x87),
    ("END OF TEXT", 0x3),
    ("END OF TRANSMISSION", 0x4),
    ("END OF TRANSMISSION BLOCK", 0x17),
    ("ENQ", 0x5),
    ("ENQUIRY", 0x5),
    ("EOL", 0xA),
    ("EOM", 0x19),
    ("EOT", 0x4),
    ("EPA", 0x97),
    ("ESA", 0x87),
    ("ESC", 0x1B),
    ("ESCAPE", 0x1B),
    ("ETB", 0x17),
    ("ETX", 0x3),
    ("FF", 0xC),
    ("FILE SEPARATOR", 0x1C),
    ("FORM FEED", 0xC),
    ("FS", 0x1C),
    ("FSI", 0x2068),
    ("FVS1", 0x180B),
    ("FVS2", 0x180C),
    ("FVS3", 0x180D),
    ("FVS4", 0x180F),
    ("GROUP SEPARATOR", 0x1D),
    ("GS", 0x1D),
    ("HANGUL JONGSEONG SSANGYESIEUNG", 0x11EE),
    ("HANGUL JONGSEONG YESIEUNG-KHIEUKH", 0x11EF),
    ("HANGUL JONGSEONG YESIEUNG-KIYEOK", 0x11EC),
    ("HANGUL JONGSEONG YESIEUNG-SSANGKIYEOK", 0x11ED),
    ("HENTAIGANA LETTER E-1", 0x1B001),
    ("HIGH OCTET PRESET", 0x81),
    ("HOP", 0x81),
    ("HORIZONTAL TABULATION", 0x9),
    ("HORIZONTAL TABULATION SET", 0x88),
    ("HORIZONTAL TABULATION WITH JUSTIFICATION", 0x89),
    ("HT", 0x9),
    ("HTJ", 0x89),
    ("HTS", 0x88),
    ("IND", 0x84),
    ("INDEX", 0x84),
    ("INFORMATION SEPARATOR FOUR", 0x1C),
    ("INFORMATION SEPARATOR ONE", 0x1F),
    ("INFORMATION SEPARATOR THREE", 0x1D),
    ("INFORMATION SEPARATOR TWO", 0x1E),
    ("KANNADA LETTER LLLA", 0xCDE),
    ("LAO LETTER FO FAY", 0xE9F),
    ("LAO LETTER FO FON", 0xE9D),
    ("LAO LETTER LO", 0xEA5),
    ("LAO LETTER RO", 0xEA3),
    ("LATIN CAPITAL LETTER GHA", 0x1A2),
    ("LATIN SMALL LETTER GHA", 0x1A3),
    (
        "LEFTWARDS TRIANGLE-HEADED ARROW WITH DOUBLE VERTICAL STROKE",
        0x2B7A,
    ),
    ("LF", 0xA),
    ("LINE FEED", 0xA),
    ("LINE TABULATION", 0xB),
    ("LINE TABULATION SET", 0x8A),
    ("LOCKING-SHIFT ONE", 0xE),
    ("LOCKING-SHIFT ZERO", 0xF),
    ("LRE", 0x202A),
    ("LRI", 0x2066),
    ("LRM", 0x200E),
    ("LRO", 0x202D),
    ("MEDEFAIDRIN CAPITAL LETTER H", 0x16E56),
    ("MEDEFAIDRIN CAPITAL LETTER NG", 0x16E57),
    ("MEDEFAIDRIN SMALL LETTER H", 0x16E76),
    ("MEDEFAIDRIN SMALL LETTER NG", 0x16E77),
    ("MESSAGE WAITING", 0x95),
    ("MICR DASH SYMBOL", 0x2449),
    ("MICR ON US SYMBOL", 0x2448),
    ("MMSP", 0x205F),
    ("MVS", 0x180E),
    ("MW", 0x95),
    ("MYANMAR LETTER KHAMTI LLA", 0xAA6E),
    ("NAK", 0x15),
    ("NBH", 0x83),
    ("NBSP", 0xA0),
    ("NEGATIVE ACKNOWLEDGE", 0x15),
    ("NEL", 0x85),
    ("NEW LINE", 0xA),
    ("NEXT LINE", 0x85),
    ("NL", 0xA),
    ("NNBSP", 0x202F),
    ("NO BREAK HERE", 0x83),
    ("NUL", 0x0),
    ("NULL", 0x0),
    ("OPERATING SYSTEM COMMAND", 0x9D),
    ("OSC", 0x9D),
    ("PAD", 0x80),
    ("PADDING CHARACTER", 0x80),
    ("PARTIAL LINE BACKWARD", 0x8C),
    ("PARTIAL LINE DOWN", 0x8B),
    ("PARTIAL LINE FORWARD", 0x8B),
    ("PARTIAL LINE UP", 0x8C),
    ("PDF", 0x202C),
    ("PDI", 0x2069),
    ("PLD", 0x8B),
    ("PLU", 0x8C),
    ("PM", 0x9E),
    (
        "PRESENTATION FORM FOR VERTICAL RIGHT WHITE LENTICULAR BRACKET",
        0xFE18,
    ),
    ("PRIVACY MESSAGE", 0x9E),
    ("PRIVATE USE ONE", 0x91),
    ("PRIVATE USE TWO", 0x92),
    ("PRIVATE USE-1", 0x91),
    ("PRIVATE USE-2", 0x92),
    ("PU1", 0x91),
    ("PU2", 0x92),
    ("RECORD SEPARATOR", 0x1E),
    ("REVERSE INDEX", 0x8D),
    ("REVERSE LINE FEED", 0x8D),
    ("RI", 0x8D),
    (
        "RIGHTWARDS TRIANGLE-HEADED ARROW WITH DOUBLE VERTICAL STROKE",
        0x2B7C,
    ),
    ("RLE", 0x202B),
    ("RLI", 0x2067),
    ("RLM", 0x200F),
    ("RLO", 0x202E),
    ("RS", 0x1E),
    ("SCI", 0x9A),
    ("SET TRANSMIT STATE", 0x93),
    ("SGC", 0x99),
    ("SHIFT IN", 0xF),
    ("SHIFT OUT", 0xE),
    ("SHY", 0xAD),
    ("SI", 0xF),
    ("SINGLE CHARACTER INTRODUCER", 0x9A),
    ("SINGLE GRAPHIC CHARACTER INTRODUCER", 0x99),
    ("SINGLE SHIFT THREE", 0x8F),
    ("SINGLE SHIFT TWO", 0x8E),
    ("SINGLE-SHIFT-2", 0x8E),
    ("SINGLE-SHIFT-3", 0x8F),
    ("SO", 0xE),
    ("SOH", 0x1),
    ("SOS", 0x98),
    ("SP", 0x20),
    ("SPA", 0x96),
    ("SS2", 0x8E),
    ("SS3", 0x8F),
    ("SSA", 0x86),
    ("ST", 0x9C),
    ("START OF GUARDED AREA", 0x96),
    ("START OF HEADING", 0x1),
    ("START OF PROTECTED AREA", 0x96),
    ("START OF SELECTED AREA", 0x86),
    ("START OF STRING", 0x98),
    ("START OF TEXT", 0x2),
    ("STRING TERMINATOR", 0x9C),
    ("STS", 0x93),
    ("STX", 0x2),
    ("SUB", 0x1A),
    ("SUBSTITUTE", 0x1A),
    ("SYN", 0x16),
    ("SYNCHRONOUS IDLE", 0x16),
    ("SYRIAC SUBLINEAR COLON SKEWED LEFT", 0x709),
    ("TAB", 0x9),
    ("TIBETAN MARK BKA- SHOG GI MGO RGYAN", 0xFD0),
    ("UNIT SEPARATOR", 0x1F),
    ("US", 0x1F),
    ("VERTICAL TABULATION", 0xB),
    ("VERTICAL TABULATION SET", 0x8A),
    ("VS1", 0xFE00),
    ("VS10", 0xFE09),
    ("VS100", 0xE0153),
    ("VS101", 0xE0154),
    ("VS102", 0xE0155),
    ("VS103", 0xE0156),
    ("VS104", 0xE0157),
    ("VS105", 0xE0158),
    ("VS106", 0xE0159),
    ("VS107", 0xE015A),
    ("VS108", 0xE015B),
    ("VS109", 0xE015C),
    ("VS11", 0xFE0A),
    ("VS110", 0xE015D),
    ("VS111", 0xE015E),
    ("VS112", 0xE015F),
    ("VS113", 0xE0160),
    ("VS114", 0xE0161),
    ("VS115", 0xE0162),
    ("VS116", 0xE0163),
    ("VS117", 0xE0164),
    ("VS118", 0xE0165),
    ("VS119", 0xE0166),
    ("VS12", 0xFE0B),
    ("VS120", 0xE0167),
    ("VS121", 0xE0168),
    ("VS122", 0xE0169),
    ("VS123", 0xE016A),
    ("VS124", 0xE016B),
    ("VS125", 0xE016C),
    ("VS126", 0xE016D),
    ("VS127", 0xE016E),
    ("VS128", 0xE016F),
    ("VS129", 0xE0170),
    ("VS13", 0xFE0C),
    ("VS130", 0xE0171),
    ("VS131", 0xE0172),
    ("VS132", 0xE0173),
    ("VS133", 0xE0174),
    ("VS134", 0xE0175),
    ("VS135", 0xE0176),
    ("VS136", 0xE0177),
    ("VS137", 0xE0178),
    ("VS138", 0xE0179),
    ("VS139", 0xE017A),
    ("VS14", 0xFE0D),
    ("VS140", 0xE017B),
    ("VS141", 0xE017C),
    ("VS142", 0xE017D),
    ("VS143", 0xE017E),
    ("VS144", 0xE017F),
    ("VS145", 0xE0180),
    ("VS146", 0xE0181),
    ("VS147", 0xE0182),
    ("VS148", 0xE0183),
    ("VS149", 0xE0184),
    ("VS15", 0xFE0E),
    ("VS150", 0xE0185),
    ("VS151", 0xE0186),
    ("VS152", 0xE0187),
    ("VS153", 0xE0188),
    ("VS154", 0xE0189),
    ("VS155", 0xE018A),
    ("VS156", 0xE018B),
    ("VS157", 0xE018C),
    ("VS158", 0xE018D),
    ("VS159", 0xE018E),
    ("VS16", 0xFE0F),
    ("VS160", 0xE018F),
    ("VS161", 0xE0190),
    ("VS162", 0xE0191),
    ("VS163", 0xE0192),
    ("VS164", 0xE0193),
    ("VS165", 0xE0194),
    ("VS166", 0xE0195),
    ("VS167", 0xE0196),
    ("VS168", 0xE0197),
    ("VS169", 0xE0198),
    ("VS17", 0xE0100),
    ("VS170", 0xE0199),
    ("VS171", 0xE019A),
    ("VS172", 0xE019B),
    ("VS173", 0xE019C),
    ("VS174", 0xE019D),
    ("VS175", 0xE019E),
    ("VS176", 0xE019F),
    ("VS177", 0xE01A0),
    ("VS178", 0xE01A1),
    ("VS179", 0xE01A2),
    ("VS18", 0xE0101),
    ("VS180", 0xE01A3),
    ("VS181", 0xE01A4),
    ("VS182", 0xE01A5),
    ("VS183", 0xE01A6),
    ("VS184", 0xE01A7),
    ("VS185", 0xE01A8),
    ("VS186", 0xE01A9),
    ("VS187", 0xE01AA),
    ("VS188", 0xE01AB),
    ("VS189", 0xE01AC),
    ("VS19", 0xE0102),
    ("VS190", 0xE01AD),
    ("VS191", 0xE01AE),
    ("VS192", 0xE01AF),
    ("VS193", 0xE01B0),
    ("VS194", 0xE01B1),
    ("VS195", 0xE01B2),
    ("VS196", 0xE01B3),
    ("VS197", 0xE01B4),
    ("VS198", 0xE01B5),
    ("VS199", 0xE01B6),
    ("VS2", 0xFE01),
    ("VS20", 0xE0103),
    ("VS200", 0xE01B7),
    ("VS201", 0xE01B8),
    ("VS202", 0xE01B9),
    ("VS203", 0xE01BA),
    ("VS204", 0xE01BB),
    ("VS205", 0xE01BC),
    ("VS206", 0xE01BD),
    ("VS207", 0xE01BE),
    ("VS208", 0xE01BF),
    ("VS209", 0xE01C0),
    ("VS21", 0xE0104),
    ("VS210", 0xE01C1),
    ("VS211", 0xE01C2),
    ("VS212", 0xE01C3),
    ("VS213", 0xE01C4),
    ("VS214", 0xE01C5),
    ("VS215", 0xE01C6),
    ("VS216", 0xE01C7),
    ("VS217", 0xE01C8),
    ("VS218", 0xE01C9),
    ("VS219", 0xE01CA),
    ("VS22", 0xE0105),
    ("VS220", 0xE01CB),
    ("VS221", 0xE01CC),
    ("VS222", 0xE01CD),
    ("VS223", 0xE01CE),
    ("VS224", 0xE01CF),
    ("VS225", 0xE01D0),
    ("VS226", 0xE01D1),
    ("VS227", 0xE01D2),
    ("VS228", 0xE01D3),
    ("VS229", 0xE01D4),
    ("VS23", 0xE0106),
    ("VS230", 0xE01D5),
    ("VS231", 0xE01D6),
    ("VS232", 0xE01D7),
    ("VS233", 0xE01D8),
    ("VS234", 0xE01D9),
    ("VS235", 0xE01DA),
    ("VS236", 0xE01DB),
    ("VS237", 0xE01DC),
    ("VS238", 0xE01DD),
    ("VS239", 0xE01DE),
    ("VS24", 0xE0107),
    ("VS240", 0xE01DF),
    ("VS241", 0xE01E0),
    ("VS242", 0xE01E1),
    ("VS243", 0xE01E2),
    ("VS244", 0xE01E3),
    ("VS245", 0xE01E4),
    ("VS246", 0xE01E5),
    ("VS247", 0xE01E6),
    ("VS248", 0xE01E7),
    ("VS249", 0xE01E8),
    ("VS25", 0xE0108),
    ("VS250", 0xE01E9),
    ("VS251", 0xE01EA),
    ("VS252", 0xE01EB),
    ("VS253", 0xE01EC),
    ("VS254", 0xE01ED),
    ("VS255", 0xE01EE),
    ("VS256", 0xE01EF),
    ("VS26", 0xE0109),
    ("VS27", 0xE010A),
    ("VS28", 0xE010B),
    ("VS29", 0xE010C),
    ("VS3", 0xFE02),
    ("VS30", 0xE010D),
    ("VS31", 0xE010E),
    ("VS32", 0xE010F),
    ("VS33", 0xE0110),
    ("VS34", 0xE0111),
    ("VS35", 0xE0112),
    ("VS36", 0xE0113),
    ("VS37", 0xE0114),
    ("VS38", 0xE0115),
    ("VS39", 0xE0116),
    ("VS4", 0xFE03),
    ("VS40", 0xE0117),
    ("VS41", 0xE0118),
    ("VS42", 0xE0119),
    ("VS43", 0xE011A),
    ("VS44", 0xE011B),
    ("VS45", 0xE011C),
    ("VS46", 0xE011D),
    ("VS47", 0xE011E),
    ("VS48", 0xE011F),
    ("VS49", 0xE0120),
    ("VS5", 0xFE04),
    ("VS50", 0xE0121),
    ("VS51", 0xE0122),
    ("VS52", 0xE0123),
    ("VS53", 0xE0124),
    ("VS54", 0xE0125),
    ("VS55", 0xE0126),
    ("VS56", 0xE0127),
    ("VS57", 0xE0128),
    ("VS58", 0xE0129),
    ("VS59", 0xE012A),
    ("VS6", 0xFE05),
    ("VS60", 0xE012B),
    ("VS61", 0xE012C),
    ("VS62", 0xE012D),
    ("VS63", 0xE012E),
    ("VS64", 0xE012F),
    ("VS65", 0xE0130),
    ("VS66", 0xE0131),
    ("VS67", 0xE0132),
    ("VS68", 0xE0133),
    ("VS69", 0xE0134),
    ("VS7", 0xFE06),
    ("VS70", 0xE0135),
    ("VS71", 0xE0136),
    ("VS72", 0xE0137),
    ("VS73", 0xE0138),
    ("VS74", 0xE0139),
    ("VS75", 0xE013A),
    ("VS76", 0xE013B),
    ("VS77", 0xE013C),
    ("VS78", 0xE013D),
    ("VS79", 0xE013E),
    ("VS8", 0xFE07),
    ("VS80", 0xE013F),
    ("VS81", 0xE0140),
    ("VS82", 0xE0141),
    ("VS83", 0xE0142),
    ("VS84", 0xE0143),
    ("VS85", 0xE0144),
    ("VS86", 0xE0145),
    ("VS87", 0xE0146),
    ("VS88", 0xE0147),
    ("VS89", 0xE0148),
    ("VS9", 0xFE08),
    ("VS90", 0xE0149),
    ("VS91", 0xE014A),
    ("VS92", 0xE014B),
    ("VS93", 0xE014C),
    ("VS94", 0xE014D),
    ("VS95", 0xE014E),
    ("VS96", 0xE014F),
    ("VS97", 0xE0150),
    ("VS98", 0xE0151),
    ("VS99", 0xE0152),
    ("VT", 0xB),
    ("VTS", 0x8A),
    ("WEIERSTRASS ELLIPTIC FUNCTION", 0x2118),
    ("WJ", 0x2060),
    ("YI SYLLABLE ITERATION MARK", 0xA015),
    ("ZWJ", 0x200D),
    ("ZWNBSP", 0xFEFF),
    ("ZWNJ", 0x200C),
    ("ZWSP", 0x200B),
];

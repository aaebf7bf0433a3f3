//! String literals: prefixes, quotes, escapes, and the joining of adjacent
//! literals in the Python dialects, as methods of [`Parser`].

use std::borrow::Cow;

use serde_json::Value;

use super::parser::{Kind, PResult, Parsed, Parser};
use super::{Dialect, LiteralErrorKind};

/// Whether a string literal denotes `str` or `bytes`, and whether escapes
/// are processed; derived from its prefix letters.
#[derive(Clone, Copy)]
pub(super) struct Prefix {
    pub(super) raw: bool,
    pub(super) bytes: bool,
    pub(super) format: bool,
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

impl Parser<'_> {
    /// Recognises a Python string prefix (`r`, `b`, `rb`, `u`, `f`, ...)
    /// directly followed by a quote at the current position. Returns the
    /// prefix and its length in bytes.
    pub(super) fn string_prefix(&self) -> Option<(Prefix, usize)> {
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
    pub(super) fn parse_string_value(&mut self, first: Prefix) -> PResult<Parsed> {
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
}

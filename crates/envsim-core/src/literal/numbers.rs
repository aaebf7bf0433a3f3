//! Numbers: JSON numbers, Python numbers (integers in any base, floats),
//! and the big-integer helpers for integers too large for `i64`/`u64`,
//! which are kept as base-2^32 limbs.

use std::borrow::Cow;

use serde_json::{Number, Value};

use super::parser::{is_ident_continue, is_ident_start, IntRepr, Kind, PResult, Parsed, Parser};
use super::{Dialect, LiteralErrorKind};

/// CPython 3.11 refuses to convert decimal integers with more digits than this
/// (`sys.get_int_max_str_digits()`), so longer decimal literals are rejected
/// as out of range.
const PY_INT_MAX_STR_DIGITS: usize = 4300;

/// Upper bound on the bit length of integers written in base 2, 8 or 16. It
/// is slightly above what [`PY_INT_MAX_STR_DIGITS`] decimal digits can hold,
/// so no integer that Python could turn into a dictionary key is rejected,
/// while the cost of converting a huge literal stays bounded.
const MAX_INT_BITS: usize = 14_400;

/// Result of lexing a Python number token.
enum PyNumber {
    Int { digits: String, radix: u32 },
    Float(f64),
}

impl Parser<'_> {
    /// Parses a number, with the sign rules of the dialect.
    pub(super) fn parse_number_value(&mut self) -> PResult<Parsed> {
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
pub(super) fn limbs_to_decimal(limbs: &[u32]) -> String {
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

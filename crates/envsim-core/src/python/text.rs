//! Python `str` text as bytes: generalized UTF-8.
//!
//! A Python `str` is a sequence of code points and may hold lone surrogates
//! (`json.loads('"\\ud800"')` returns one), which a Rust `String` cannot.
//! envsim stores Python text as *generalized UTF-8*: every code point,
//! surrogates included, encoded on its own with the UTF-8 scheme (a surrogate
//! takes three bytes `ED A0 80`–`ED BF BF`). Text without surrogates is plain
//! UTF-8, so a `&str` is valid input everywhere. The encoding is a bijection
//! with code point sequences, so byte equality is `str` equality.

/// Decodes the code point starting at `bytes[at]`, with its length in bytes.
/// Malformed input (impossible for text built by this module) decodes byte by
/// byte as U+FFFD, so callers never loop forever.
pub fn decode(bytes: &[u8], at: usize) -> Option<(u32, usize)> {
    let first = *bytes.get(at)?;
    let cont = |i: usize| -> Option<u32> {
        let b = *bytes.get(at + i)?;
        (b & 0xC0 == 0x80).then_some(u32::from(b & 0x3F))
    };
    let decoded = match first {
        0x00..=0x7F => Some((u32::from(first), 1)),
        0xC2..=0xDF => cont(1).map(|b1| ((u32::from(first & 0x1F) << 6) | b1, 2)),
        0xE0..=0xEF => cont(1).zip(cont(2)).and_then(|(b1, b2)| {
            let cp = (u32::from(first & 0x0F) << 12) | (b1 << 6) | b2;
            (cp >= 0x800).then_some((cp, 3))
        }),
        0xF0..=0xF4 => cont(1)
            .zip(cont(2))
            .zip(cont(3))
            .and_then(|((b1, b2), b3)| {
                let cp = (u32::from(first & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3;
                (0x1_0000..=0x10_FFFF).contains(&cp).then_some((cp, 4))
            }),
        _ => None,
    };
    Some(decoded.unwrap_or((0xFFFD, 1)))
}

/// Appends code point `cp` (surrogates allowed) in generalized UTF-8.
pub fn encode(cp: u32, out: &mut Vec<u8>) {
    // The shifted values are masked to at most 8 bits, so the casts are exact.
    match cp {
        0..=0x7F => out.push(cp as u8),
        0x80..=0x7FF => out.extend_from_slice(&[0xC0 | (cp >> 6) as u8, 0x80 | (cp & 0x3F) as u8]),
        0x800..=0xFFFF => out.extend_from_slice(&[
            0xE0 | (cp >> 12) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]),
        _ => out.extend_from_slice(&[
            0xF0 | ((cp >> 18) & 0x07) as u8,
            0x80 | ((cp >> 12) & 0x3F) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]),
    }
}

/// The code points of generalized UTF-8 text.
pub fn code_points(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        let (cp, len) = decode(bytes, at)?;
        at += len;
        Some(cp)
    })
}

/// Whether `cp` is a surrogate code point.
pub fn is_surrogate(cp: u32) -> bool {
    (0xD800..=0xDFFF).contains(&cp)
}

/// Python's `str.isspace()` for one code point, which is also what `\s`
/// matches in a `re` pattern and what `str.strip()` removes: the Unicode
/// White_Space characters plus the ASCII information separators
/// U+001C–U+001F (bidirectional class B or S).
pub fn is_space(cp: u32) -> bool {
    matches!(
        cp,
        0x09..=0x0D
            | 0x1C..=0x20
            | 0x85
            | 0xA0
            | 0x1680
            | 0x2000..=0x200A
            | 0x2028
            | 0x2029
            | 0x202F
            | 0x205F
            | 0x3000
    )
}

/// Python's `str.strip()` with no argument.
pub fn strip(bytes: &[u8]) -> &[u8] {
    let mut start = 0;
    while let Some((cp, len)) = decode(bytes, start) {
        if !is_space(cp) {
            break;
        }
        start += len;
    }
    let mut end = bytes.len();
    while end > start {
        // Step back to the start of the last code point.
        let mut at = end - 1;
        while at > start && bytes.get(at).is_some_and(|b| b & 0xC0 == 0x80) {
            at -= 1;
        }
        match decode(bytes, at) {
            Some((cp, _)) if is_space(cp) => end = at,
            _ => break,
        }
    }
    bytes.get(start..end).unwrap_or_default()
}

/// The decimal value of `cp` if it is a Unicode decimal digit (category Nd),
/// as `unicodedata.decimal` gives it in CPython 3.11 (Unicode 14.0). Every
/// such digit belongs to a run of ten consecutive code points, zero first;
/// the table lists where each run starts.
pub fn decimal_value(cp: u32) -> Option<u32> {
    const ZEROS: [u32; 66] = [
        0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66,
        0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90,
        0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0,
        0xFF10, 0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0,
        0x11650, 0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0,
        0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
    ];
    let run = ZEROS.partition_point(|&zero| zero <= cp).checked_sub(1)?;
    let offset = cp - ZEROS.get(run)?;
    (offset < 10).then_some(offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_code_point_class() {
        for cp in [
            0, 0x41, 0x7F, 0x80, 0x7FF, 0x800, 0xD800, 0xDFFF, 0xFFFF, 0x1_0000, 0x10_FFFF,
        ] {
            let mut bytes = Vec::new();
            encode(cp, &mut bytes);
            assert_eq!(decode(&bytes, 0), Some((cp, bytes.len())), "{cp:#x}");
        }
        let text = "a\u{e9}\u{20ac}\u{1f600}";
        assert_eq!(
            code_points(text.as_bytes()).collect::<Vec<_>>(),
            text.chars().map(u32::from).collect::<Vec<_>>()
        );
    }

    #[test]
    fn malformed_bytes_decode_as_replacement() {
        assert_eq!(decode(&[0xFF, 0x41], 0), Some((0xFFFD, 1)));
        assert_eq!(decode(&[0xE2, 0x82], 0), Some((0xFFFD, 1)));
        assert_eq!(decode(&[0xC0, 0x80], 0), Some((0xFFFD, 1)));
    }

    #[test]
    fn strip_uses_python_whitespace() {
        assert_eq!(strip(b" \x1c a b \x1f\n"), b"a b");
        assert_eq!(strip("\u{3000}x\u{a0}".as_bytes()), b"x");
        assert_eq!(strip("\u{200b}x".as_bytes()), "\u{200b}x".as_bytes());
        assert_eq!(strip(b"   "), b"");
    }

    #[test]
    fn decimal_digits() {
        assert_eq!(decimal_value(u32::from('7')), Some(7));
        assert_eq!(decimal_value(0x663), Some(3));
        assert_eq!(decimal_value(0xFF19), Some(9));
        assert_eq!(decimal_value(0xFF1A), None);
        assert_eq!(decimal_value(u32::from('a')), None);
        assert_eq!(decimal_value(0x2F), None);
    }
}

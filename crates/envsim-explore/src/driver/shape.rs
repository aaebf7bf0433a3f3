//! The shapes of text a parameter asks for by its name or its schema's `format` (a date, a
//! date-time, an address, an absolute path, a page): how to tell them, make one up, and find
//! one in a text; and the words a name splits into.

use envsim_core::rng::Rng;
use serde_json::Value;

/// The words of a name, lowercase: split at `_`, `-` and where a lowercase letter or digit
/// meets an uppercase one (`pedalPosition` → `pedal`, `position`).
pub fn name_words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if c == '_' || c == '-' || c == ' ' {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// The shapes of text a parameter's name or format asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `2024-06-17`.
    Date,
    /// `2024-06-17T09:30` (with or without seconds and zone).
    DateTime,
    /// `ann@example.com`.
    Email,
    /// `/home/ann/notes.txt`.
    AbsolutePath,
    /// `https://…`.
    Url,
}

/// The length of a date or date-time whose format the parameter's description spells out:
/// 10 for `YYYY-MM-DD`, 16 for `YYYY-MM-DDTHH:MM`, 19 with `:SS`.
pub(crate) fn described_length(schema: &Value) -> Option<usize> {
    spelled_length(schema.get("description").and_then(Value::as_str)?)
}

/// The length of the date or date-time whose format `text` spells out (as
/// [`described_length`] reads a description).
pub(crate) fn spelled_length(text: &str) -> Option<usize> {
    let upper = text.to_uppercase();
    let at = upper.find("YYYY-MM-DD")?;
    let rest = &upper[at + 10..];
    Some(
        if rest.starts_with("THH:MM:SS") || rest.starts_with(" HH:MM:SS") {
            19
        } else if rest.starts_with("THH:MM") || rest.starts_with(" HH:MM") {
            16
        } else {
            10
        },
    )
}

/// A date-time text made `length` characters long (`length` of 10, 16 or 19): cut, or with
/// seconds added. Other lengths and shorter texts are kept as they are.
pub(crate) fn sized(text: &str, length: Option<usize>) -> String {
    match length {
        Some(10) if text.len() > 10 && text.is_char_boundary(10) => text[..10].to_owned(),
        Some(19) if text.len() == 16 => format!("{text}:00"),
        Some(16) if text.len() > 16 && text.is_char_boundary(16) => text[..16].to_owned(),
        _ => text.to_owned(),
    }
}

impl Shape {
    /// The shape a parameter named `name` with `schema` asks for, if any: its `format`, else
    /// its name's words.
    pub(crate) fn of(name: &str, schema: &Value) -> Option<Shape> {
        match schema.get("format").and_then(Value::as_str) {
            Some("date") => return Some(Shape::Date),
            Some("date-time") => return Some(Shape::DateTime),
            Some("email" | "idn-email") => return Some(Shape::Email),
            Some("uri" | "url" | "iri") => return Some(Shape::Url),
            _ => {}
        }
        // A format the description spells out ("Timestamp YYYY-MM-DDTHH:MM:SS", "First day
        // of validity YYYY-MM-DD") is what the code parses, whatever the name suggests.
        if let Some(length) = described_length(schema) {
            return Some(if length == 10 {
                Shape::Date
            } else {
                Shape::DateTime
            });
        }
        let words = name_words(name);
        let has = |w: &str| words.iter().any(|x| x == w);
        // `from` and `until` are times only where the name says validity (`valid_from`); a
        // `travel_from` is a place.
        let validity = has("valid") || has("effective") || has("available");
        if has("email") || has("mail") {
            Some(Shape::Email)
        } else if has("date") || has("day") || has("on") && words.len() > 1 {
            Some(Shape::Date)
        } else if has("time")
            || has("at") && words.len() > 1
            || has("start")
            || has("end")
            || validity && (has("from") || has("until") || has("to"))
            || has("since")
            || has("datetime")
            || has("timestamp")
        {
            Some(Shape::DateTime)
        } else if has("path")
            || has("dir")
            || has("directory")
            || has("folder")
            || has("source")
            || has("destination")
            || has("src")
            || has("dst")
        {
            Some(Shape::AbsolutePath)
        } else if has("url") || has("uri") || has("link") || has("website") {
            Some(Shape::Url)
        } else {
            None
        }
    }

    /// The shape a parameter asks for ([`Shape::of`]) when it is a date or a date-time.
    pub(crate) fn dated(name: &str, schema: &Value) -> Option<Shape> {
        Shape::of(name, schema).filter(|s| matches!(s, Shape::Date | Shape::DateTime))
    }

    /// A new text of this shape (an address, a date, a path, a page) when the state offers
    /// none.
    pub(crate) fn example(self, rng: &mut Rng) -> String {
        let n = 100 + rng.below(900);
        match self {
            Shape::Date => format!("2025-{:02}-{:02}", 1 + rng.below(12), 1 + rng.below(28)),
            Shape::DateTime => format!(
                "2025-{:02}-{:02}T{:02}:{:02}",
                1 + rng.below(12),
                1 + rng.below(28),
                8 + rng.below(10),
                15 * rng.below(4)
            ),
            Shape::Email => format!("explorer{n}@example.com"),
            Shape::AbsolutePath => format!("/tmp/explorer-{n}"),
            Shape::Url => format!("https://example.com/explorer-{n}"),
        }
    }

    /// The part of `text` of this shape, when it has one (a date-time's date for a date).
    pub(crate) fn fit(self, text: &str) -> Option<String> {
        let b = text.as_bytes();
        let digits =
            |r: std::ops::Range<usize>| r.end <= b.len() && b[r].iter().all(u8::is_ascii_digit);
        let date = digits(0..4)
            && b.get(4) == Some(&b'-')
            && digits(5..7)
            && b.get(7) == Some(&b'-')
            && digits(8..10);
        match self {
            Shape::Date => date.then(|| text[..10].to_owned()),
            Shape::DateTime => (date
                && matches!(b.get(10), Some(b'T' | b' '))
                && digits(11..13)
                && b.get(13) == Some(&b':')
                && digits(14..16))
            .then(|| text.to_owned()),
            Shape::Email => {
                let (user, host) = text.split_once('@')?;
                (!user.is_empty() && host.contains('.') && !text.contains(' '))
                    .then(|| text.to_owned())
            }
            Shape::AbsolutePath => {
                (text.starts_with('/') && !text.contains(' ')).then(|| text.to_owned())
            }
            Shape::Url => (text.starts_with("http://") || text.starts_with("https://"))
                .then(|| text.to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_split_into_words_and_shapes() {
        assert_eq!(name_words("pedalPosition"), ["pedal", "position"]);
        assert_eq!(name_words("new_end_date"), ["new", "end", "date"]);
        assert_eq!(name_words("HTTPServer2Port"), ["httpserver2", "port"]);
        assert_eq!(name_words("__x__"), ["x"]);
        let none = json!({});
        assert_eq!(Shape::of("read_date", &none), Some(Shape::Date));
        assert_eq!(Shape::of("startTime", &none), Some(Shape::DateTime));
        assert_eq!(Shape::of("valid_from", &none), Some(Shape::DateTime));
        assert_eq!(Shape::of("travel_from", &none), None);
        assert_eq!(Shape::of("to_email", &none), Some(Shape::Email));
        assert_eq!(Shape::of("source", &none), Some(Shape::AbsolutePath));
        assert_eq!(
            Shape::of("x", &json!({"format": "date-time"})),
            Some(Shape::DateTime)
        );
        assert_eq!(
            Shape::Date.fit("2025-03-01T09:00"),
            Some("2025-03-01".into())
        );
        assert_eq!(Shape::DateTime.fit("2025-03-01"), None);
        let described = |d: &str| json!({"type": "string", "description": d});
        // The description's format wins over the name's words.
        assert_eq!(
            Shape::of("valid_from", &described("First day YYYY-MM-DD, today on")),
            Some(Shape::Date)
        );
        let timestamp = described("Timestamp YYYY-MM-DDTHH:MM:SS");
        assert_eq!(Shape::of("as_of", &timestamp), Some(Shape::DateTime));
        assert_eq!(described_length(&timestamp), Some(19));
        assert_eq!(
            described_length(&described("When, YYYY-MM-DD HH:MM")),
            Some(16)
        );
        assert_eq!(described_length(&described("A date")), None);
        assert_eq!(sized("2025-03-01T09:30", Some(19)), "2025-03-01T09:30:00");
        assert_eq!(sized("2025-03-01T09:30:15", Some(16)), "2025-03-01T09:30");
        assert_eq!(sized("2025-03-01", Some(19)), "2025-03-01");
        assert_eq!(sized("2025-03-01T09:30", Some(10)), "2025-03-01");
        assert_eq!(Shape::Email.fit("a b@c.d"), None);
        assert_eq!(
            Shape::AbsolutePath.fit("/home/ann"),
            Some("/home/ann".into())
        );
    }
}

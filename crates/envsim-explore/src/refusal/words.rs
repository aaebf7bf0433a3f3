//! Reading an answer's text: its words as compared (inflections and compounds alike), whether
//! it says a value or names a field, and what it offers for an argument: quoted values and
//! lists, numbers, the shape of text it asks for, dates around those it gives, a variant of a
//! value it says is taken.

use crate::driver::{concrete, name_words, of_type, quoted_values, schema_type, Shape};
use serde_json::Value;

/// Phrases that say a named thing does not exist.
pub(super) const NOT_FOUND: [&str; 9] = [
    "not found",
    "does not exist",
    "doesn't exist",
    "no such",
    "unknown",
    "not exist",
    "cannot find",
    "could not find",
    "no record",
];

/// Words too common in answers to point at a field.
const FILLER: [&str; 12] = [
    "is", "has", "the", "and", "not", "for", "with", "this", "that", "are", "was", "its",
];

/// The text of an answer that says why: the string values of an answer object (its `error`,
/// its `message`; not its keys, which every answer repeats) — also of an object embedded in a
/// text answer (`Response status code is 401: {"message": "…"}`, the text before it kept) —
/// a string answer itself, else the rendered answer.
pub fn answer_text(answer: &Value, rendered: &str) -> String {
    if let Value::String(text) = answer {
        let read = envsim_core::answer::read_answer_text(text);
        if read.value.is_object() {
            let inner = answer_text(&read.value, text);
            let before = text.find(['{', '[']).map_or("", |at| text[..at].trim());
            return if before.is_empty() || status_line(before) {
                inner
            } else {
                format!("{before} {inner}")
            };
        }
    }
    fn collect(value: &Value, depth: usize, out: &mut Vec<String>) {
        match value {
            Value::String(s) => out.push(s.clone()),
            Value::Object(map) if depth < 3 => {
                for v in map.values() {
                    collect(v, depth + 1, out);
                }
            }
            Value::Array(items) if depth < 3 => {
                for v in items.iter().take(8) {
                    collect(v, depth + 1, out);
                }
            }
            _ => {}
        }
    }
    let mut parts = Vec::new();
    collect(answer, 0, &mut parts);
    if parts.is_empty() {
        rendered.to_owned()
    } else {
        parts.join("; ")
    }
}

/// Whether a text only states an HTTP status (`Response status code is 422:`, `HTTP 409`):
/// its number is the protocol's, no value of the call's (an id 422 tried after it never is).
fn status_line(text: &str) -> bool {
    const WORDS: [&str; 6] = ["response", "status", "code", "is", "http", "error"];
    let mut number = false;
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        match word.parse::<u16>() {
            Ok(n) if (100..600).contains(&n) && !number => number = true,
            _ if WORDS.contains(&word.to_lowercase().as_str()) => {}
            _ => return false,
        }
    }
    number
}

/// A word as compared: lowercase, `-` as `_` (`checked-in` is the value `checked_in`).
pub(super) fn norm(word: &str) -> String {
    word.to_lowercase().replace('-', "_")
}

/// The words of a text as compared ([`norm`]; letters, digits, `_`, `-`, `.`, `@` inside a
/// word).
pub(super) fn words(text: &str) -> Vec<String> {
    tokens(text).map(norm).collect()
}

/// The tokens of a text as written: runs of letters, digits, `_`, `-`, `.`, `@`, without a
/// trailing or leading `.`.
pub(super) fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || "_-.@".contains(c)))
        .map(|w| w.trim_matches('.'))
        .filter(|w| !w.is_empty())
}

/// The words of `answer` written the way `value` is — digits for digits, letters for letters,
/// the same punctuation in the same places — and not `value` itself, each once: what the
/// answer says the value should be (`only be opened for the current period 2024-05` for a
/// period `2024-03`). Only for values with a digit: a word of letters alone is as likely a
/// status or a name as the value asked for.
pub(super) fn shaped_like<'t>(answer: &'t str, value: &str) -> Vec<&'t str> {
    fn pattern(text: &str) -> Vec<char> {
        text.chars()
            .map(|c| match c {
                '0'..='9' => '9',
                c if c.is_alphabetic() => 'a',
                c => c,
            })
            .collect()
    }
    if !value.chars().any(|c| c.is_ascii_digit()) {
        return Vec::new();
    }
    let wanted = pattern(value);
    let mut out: Vec<&str> = Vec::new();
    for word in tokens(answer) {
        if word != value && pattern(word) == wanted && !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

/// Whether two compared words name the same thing: equal, one a short inflection of the
/// other (`arrive` and `arrived`, `ship` and `shipped`, `order` and `orders`), or one a part of
/// the other's compound (`pending` in `non-pending`).
pub(super) fn same_word(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    // A part of a compound, as it is or inflected (`lock` in `transfer-locked`).
    let part_of = |part: &str, whole: &str| {
        part.len() >= 4
            && whole.contains('_')
            && whole.split('_').any(|p| p == part || inflected(part, p))
    };
    if part_of(a, b) || part_of(b, a) {
        return true;
    }
    inflected(a, b)
}

/// Whether one word is a short inflection of the other (`ship`, `shipped`; `order`, `orders`).
fn inflected(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short.len() >= 4 && long.len() - short.len() <= 3 && long.starts_with(short)
        // A long stem and a suffix of several letters (`confirm`, `confirmation`).
        || short.len() >= 6 && long.len() - short.len() <= 6 && long.starts_with(short)
        || short.len() >= 3
            && long.len() == short.len() + 1
            && long.ends_with('s')
            && long.starts_with(short)
}

/// The first words of parameter names that say a role, not what the value is (`new_reserve`
/// is a reserve, `from_section_id` a section).
const ROLE_WORDS: [&str; 9] = [
    "new",
    "old",
    "from",
    "to",
    "target",
    "current",
    "source",
    "dest",
    "destination",
];

/// Whether the answer's words hold `value` (a string of one or more words, or a number),
/// word for word or inflected ([`same_word`]).
pub(super) fn says(answer_words: &[String], value: &Value) -> bool {
    saying(answer_words, value) < 2
}

/// How the answer's words hold `value`: 0 word for word, 1 inflected (`ship` for `shipped`),
/// 2 not at all.
pub(super) fn saying(answer_words: &[String], value: &Value) -> u8 {
    let holds = |same: &dyn Fn(&str, &str) -> bool| match value {
        Value::String(s) => {
            let needle = words(s);
            !needle.is_empty()
                && answer_words
                    .windows(needle.len())
                    .any(|w| w.iter().zip(&needle).all(|(a, b)| same(a, b)))
        }
        Value::Number(n) => answer_words.iter().any(|w| *w == n.to_string()),
        _ => false,
    };
    if holds(&|a, b| a == b) {
        0
    } else if holds(&same_word) {
        1
    } else {
        2
    }
}

/// Whether the answer names a field (`is_draft` by "draft", `due_date` by "due date").
/// A name's words may be abbreviated (`exp_year` by "expiry year"); a first word that says a
/// role is not needed (`new_reserve` by "reserve"); a name of short words only is named as a
/// whole (`as_of`).
pub(super) fn names_field(answer_words: &[String], field: &str) -> bool {
    let mut words = name_words(field);
    if words.len() > 1 && ROLE_WORDS.contains(&words[0].as_str()) {
        words.remove(0);
    }
    let parts: Vec<String> = words
        .into_iter()
        .filter(|p| p.len() > 2 && !FILLER.contains(&p.as_str()))
        .collect();
    if parts.is_empty() {
        let whole = norm(field);
        return whole.len() > 2 && answer_words.contains(&whole);
    }
    // Three or four letters that begin a longer word of the answer abbreviate it (`exp` for
    // "expiry", `auth` for "authorization").
    let abbreviates = |part: &str, word: &str| {
        (3..=4).contains(&part.len())
            && word.len() > part.len()
            && word.len() <= 14
            && !word.contains('_')
            && word.starts_with(part)
    };
    // A compound of the answer names the parts it joins (`buy-now` in `buy_now_price`).
    let field = format!("_{}_", norm(field));
    let compounded = |part: &str| {
        answer_words.iter().any(|w| {
            w.contains('_') && field.contains(&format!("_{w}_")) && w.split('_').any(|p| p == part)
        })
    };
    parts.iter().all(|p| {
        compounded(p)
            || answer_words
                .iter()
                .any(|w| same_word(w, p) || abbreviates(p, w))
    })
}

/// The values an answer offers for an argument: the texts it quotes, and the single words of
/// a list after "one of", "allowed", "valid", "must be", "expected" or "options" (not "either":
/// answers say "either not authorized or expired").
pub(super) fn offered_values(answer: &str) -> Vec<String> {
    let mut out = quoted_values(answer);
    let lower = answer.to_lowercase();
    for cue in [
        "one of", "allowed", "valid", "must be", "expected", "options",
    ] {
        // The cue as a word of its own ("valid", not the end of "invalid").
        let Some(at) = lower.match_indices(cue).map(|(at, _)| at).find(|&at| {
            let before = lower[..at].chars().next_back();
            let after = lower[at + cue.len()..].chars().next();
            !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
        }) else {
            continue;
        };
        // Read from `lower`: its byte offsets are the ones found.
        let rest = &lower[at + cue.len()..];
        let rest = rest.trim_start_matches([':', ' ', '[', '(', '{']);
        let end = rest
            .find(['.', ';', '(', ')', ']', '}', '\n'])
            .unwrap_or(rest.len());
        for item in rest[..end].split([',', '|', '/']) {
            for part in item.split(" or ") {
                let part = part.trim().trim_matches(['\'', '"', '`']).trim();
                let single =
                    !part.is_empty() && part.len() <= 40 && !part.contains(' ') && part != "be";
                if single && !out.iter().any(|o| o.eq_ignore_ascii_case(part)) {
                    out.push(part.to_owned());
                }
            }
        }
    }
    out
}

/// The numbers an answer gives.
pub(super) fn numbers(answer: &str) -> Vec<f64> {
    let mut out: Vec<f64> = Vec::new();
    for w in answer.split(|c: char| !(c.is_ascii_digit() || c == '.')) {
        if let Ok(n) = w.trim_matches('.').parse::<f64>() {
            if n.is_finite() && !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// The values a tool's description offers for a parameter: what [`offered_values`] reads in
/// the parts of it (split at `;` and at the ends of sentences) that name the parameter as a
/// word ("Rules: …; disposition must be one of home, transferred, deceased (which …); …").
pub(super) fn ruled_values(description: &str, param: &str) -> Vec<String> {
    let text = description.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: Vec<String> = Vec::new();
    for part in text.split(';').flat_map(|p| p.split(". ")) {
        if !tokens(part).any(|t| t == param) {
            continue;
        }
        for value in offered_values(part) {
            if value != param && !out.contains(&value) {
                out.push(value);
            }
        }
    }
    out
}

/// The numbers an answer gives with a unit after them (`at most 31.5 kg`, `up to 120 cm`):
/// each with its unit, lowercase (a word of one to five letters).
pub(super) fn measures(answer: &str) -> Vec<(f64, String)> {
    let mut out: Vec<(f64, String)> = Vec::new();
    let words: Vec<&str> = answer.split_whitespace().collect();
    for pair in words.windows(2) {
        let number = pair[0].trim_matches(|c: char| !(c.is_ascii_digit() || c == '.'));
        let unit = pair[1].trim_end_matches(['.', ',', ';', ')']);
        let (Ok(n), true) = (
            number.parse::<f64>(),
            (1..=5).contains(&unit.len()) && unit.chars().all(|c| c.is_ascii_alphabetic()),
        ) else {
            continue;
        };
        if n.is_finite() && pair[0].starts_with(|c: char| c.is_ascii_digit()) {
            out.push((n, unit.to_lowercase()));
        }
    }
    out
}

/// The least number of characters an answer asks a text to have (`reason must be at least 10
/// characters`, `justification needs 15 characters or more`): the largest number it gives
/// when it speaks of characters.
pub(super) fn least_characters(answer: &str) -> Option<usize> {
    let lower = answer.to_lowercase();
    if !(lower.contains("character") || lower.contains("chars")) {
        return None;
    }
    numbers(answer)
        .into_iter()
        .filter(|n| n.fract() == 0.0 && *n >= 1.0 && *n <= 10_000.0)
        .map(|n| n as usize)
        .max()
}

/// `text`, made at least `least` characters long with words of its own kind (a reason that
/// says what was seen), the given text first.
pub(crate) fn lengthened(text: &str, least: usize) -> String {
    const MORE: &str = "as reported on site and confirmed in writing";
    let mut out = text.trim().to_owned();
    while out.chars().count() < least {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(MORE);
    }
    out
}

/// The shape of text an answer asks for: a template (`YYYY-MM-DD`, `YYYY-MM-DDTHH:MM`), or an
/// example of one (`times must look like 2024-06-17T09:30`), with the example.
pub(super) fn asked_shape(answer: &str) -> Option<(Shape, Option<String>)> {
    let upper = answer.to_uppercase();
    if upper.contains("YYYY-MM-DD") {
        let time = upper.contains("HH:MM") || upper.contains("YYYY-MM-DDT");
        return Some((if time { Shape::DateTime } else { Shape::Date }, None));
    }
    // "must be ISO dates", "an ISO date-time".
    if let Some(at) = upper.find("ISO") {
        let rest = upper[at + 3..]
            .trim_start_matches([' ', '-'])
            .trim_start_matches("8601 ");
        if rest.starts_with("DATETIME")
            || rest.starts_with("DATE-TIME")
            || rest.starts_with("TIMESTAMP")
        {
            return Some((Shape::DateTime, None));
        }
        if rest.starts_with("DATE") {
            return Some((Shape::Date, None));
        }
    }
    for token in answer.split(|c: char| c.is_whitespace() || ",;()'\"".contains(c)) {
        let token = token.trim_end_matches('.');
        if let Some(fit) = Shape::DateTime.fit(token) {
            return Some((Shape::DateTime, Some(fit)));
        }
    }
    None
}

/// Phrases that say a value is taken.
pub(super) const TAKEN: [&str; 9] = [
    "already exists",
    "already registered",
    "already taken",
    "already in use",
    "in use",
    "duplicate",
    "exists",
    "not available",
    "already used",
];

/// A variant of a taken value: an address's local part, a domain's or file's name before its
/// last dot, else the whole text, with `-n` added (`ann-123@x.io`, `harbor-123.org`).
pub(super) fn variant(text: &str, n: usize) -> String {
    if let Some((user, host)) = text.split_once('@') {
        return format!("{user}-{n}@{host}");
    }
    match text.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && !ext.contains(' ') && !ext.contains('/') => {
            format!("{stem}-{n}.{ext}")
        }
        _ => format!("{text}-{n}"),
    }
}

/// Times to try for a date an answer constrains: a day after, a day before and a month after
/// each date or date-time it gives, then the call's day, the next, and a week after.
pub(super) fn dated(answer: &str, clock: f64) -> Vec<f64> {
    const DAY: f64 = 86_400.0;
    let mut out = Vec::new();
    for token in answer.split(|c: char| c.is_whitespace() || ",;()'\"[]".contains(c)) {
        let token = token.trim_end_matches('.');
        if let Some(t) = envsim_core::clock::parse_time(token) {
            out.extend([t + DAY, t - DAY, t + 30.0 * DAY]);
        }
    }
    let today = (clock / DAY).floor() * DAY;
    out.extend([today, today + DAY, today + 7.0 * DAY]);
    out
}

/// A time written in a date's or date-time's shape, as long as `like` (the value it replaces)
/// where that is a date or date-time too.
pub(super) fn date_like(seconds: f64, shape: Shape, like: &str) -> String {
    let full = envsim_core::clock::format_time(seconds);
    let length = match shape {
        Shape::Date => 10,
        _ if Shape::DateTime.fit(like).is_some() => like.len().min(full.len()),
        _ => 16,
    };
    full.chars().take(length).collect()
}

/// A value for a parameter of this schema from a text the answer offered (a truth value in
/// any case: answers write `True`).
pub(super) fn typed(schema: &Value, text: &str) -> Option<Value> {
    let text = if schema_type(concrete(schema)) == "boolean" {
        text.to_ascii_lowercase()
    } else {
        text.to_owned()
    };
    of_type(schema, Value::String(text))
}

/// A scalar's text as an answer would say it.
pub(super) fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn words_shaped_like_the_value_are_what_the_answer_asks_for() {
        let answer = "Payroll can only be opened for the current period 2024-05 (not 2024-03)";
        assert_eq!(shaped_like(answer, "2024-03"), ["2024-05"]);
        assert_eq!(
            shaped_like("use ORD-1002 or ORD-1003, not ORD-1001", "ORD-1001"),
            ["ORD-1002", "ORD-1003"]
        );
        // Letters alone say nothing of the value's shape.
        assert!(shaped_like("order is pending, not shipped", "draft").is_empty());
        assert!(shaped_like("period must be YYYY-MM", "2024-3").is_empty());
    }

    #[test]
    fn answers_are_read_word_by_word() {
        let w = words("Mailbox ann@x.io is suspended; msg-5 is not a draft.");
        assert_eq!(
            w,
            [
                "mailbox",
                "ann@x.io",
                "is",
                "suspended",
                "msg_5",
                "is",
                "not",
                "a",
                "draft"
            ]
        );
        assert!(same_word("arrive", "arrived") && same_word("orders", "order"));
        assert!(same_word("pending", "non_pending") && !same_word("non", "non_pending"));
        assert!(!same_word("ship", "shipment") && !same_word("cat", "cats_"));
        assert!(same_word("confirm", "confirmation") && !same_word("account", "accountability"));
        assert!(names_field(&w, "is_draft"));
        assert!(names_field(&w, "mailbox"));
        assert!(!names_field(&w, "is_not"));
        // Abbreviated, with a role word before it, short words only, inflected in a compound.
        let n = words("Invalid expiry month/year; as_of is wrong; reserve too low; x-locked");
        assert!(names_field(&n, "exp_year") && names_field(&n, "exp_month"));
        assert!(names_field(&n, "new_reserve") && names_field(&n, "as_of"));
        assert!(names_field(&n, "x_lock") && same_word("transfer_locked", "lock"));
        assert!(!names_field(&n, "new_price") && !names_field(&n, "as_at"));
        assert!(!names_field(&n, "expected_date") && !names_field(&n, "to"));
        let n = words("Listing L-1 has no buy-now price; authorization code does not match");
        assert!(names_field(&n, "buy_now_price") && names_field(&n, "auth_code"));
        assert!(!names_field(&n, "now_price") && !names_field(&n, "buy_price"));
        assert!(says(&w, &json!("suspended")));
        assert!(!says(&w, &json!("active")));
        assert_eq!(
            offered_values("status must be one of ['open', 'closed'] or 'held'"),
            ["open", "closed", "held"]
        );
        assert_eq!(
            answer_text(
                &json!("Response status code is 401:\n{\"message\":\"Invalid credentials\"}"),
                ""
            ),
            "Invalid credentials"
        );
        // A text before the object that says more than a status is kept.
        assert_eq!(
            answer_text(&json!("Order 422 refused: {\"message\": \"closed\"}"), ""),
            "Order 422 refused: closed"
        );
        assert!(status_line("HTTP 409") && status_line("Response status code is 422:"));
        assert!(!status_line("Response status code is") && !status_line("Error 42"));
        assert_eq!(
            answer_text(&json!({"success": false, "error": "no"}), "x"),
            "no"
        );
        assert!(offered_values("your access token is missing, invalid or expired").is_empty());
        assert_eq!(numbers("at most 3 items, 2.5 kg"), [3.0, 2.5]);
        let rules = "Discharge a patient. Rules: the encounter must be open; disposition must be \
            one of home,\n home_care, deceased (which marks the patient); the summary must be \
            at least 20 characters.";
        assert_eq!(
            ruled_values(rules, "disposition"),
            ["home", "home_care", "deceased"]
        );
        assert!(ruled_values(rules, "summary_text").is_empty());
        assert_eq!(
            measures("accepts at most 31.5 kg, up to 120 cm on the longest side; 3 parcels"),
            [(31.5, "kg".to_owned()), (120.0, "cm".to_owned())]
        );
    }
}

//! The reference evaluator's `extract_json` and `parse_to_obj`, over
//! [`PyValue`]s.
//!
//! `extract_json(text)` tries, in order, and returns at the first step that
//! produces a value (Python's `None` included, which the caller then reads as
//! "nothing found"):
//!
//! 1. The first match of `` ```(?:json)?\s*([\s\S]*?)``` `` (case-insensitive):
//!    the text between the first triple backtick and the next one, after an
//!    optional `json` tag and whitespace, stripped; parsed with `json.loads`,
//!    else `ast.literal_eval`. If both fail, it goes on.
//! 2. The whole text with `json.loads`.
//! 3. The first match of `\{[\s\S]*?\}`: from the first `{` to the first `}`
//!    after it (non-greedy, so a nested object is cut at its first closing
//!    brace); `json.loads`, else `ast.literal_eval`, else nothing.
//!
//! `parse_to_obj(value)` returns dicts, lists, `None` and non-strings as they
//! are; a string goes through `extract_json`, then `ast.literal_eval`, then,
//! if the stripped string is wrapped in one pair of matching quotes, both
//! again on the inside; otherwise the string itself is the result.
//!
//! Details that are easy to get wrong, all reproduced: the fence pattern
//! matches any triple backtick (```` ```python ```` yields `python\n…`, which
//! fails to parse, and the search goes on); `json` is matched
//! case-insensitively, where `ſ` (U+017F) counts as `s`; `\s` and `strip()`
//! use Python's notion of whitespace; the brace match ignores strings, so a
//! `}` inside a string ends it; `json.loads` accepts `NaN`; `literal_eval`
//! accepts trailing commas but not `true`/`false`/`null`, and fails on text
//! that starts with a line break followed by indentation.

use crate::python::text::{decode, is_space, strip};
use crate::python::{json_loads, literal_eval, PyStr, PyValue};

/// How deep `json.loads` can nest when `extract_json` is called directly
/// from the reference's `evaluate_sample`: Python's recursion limit (1000)
/// minus the frames already on the stack of an evaluation worker thread
/// (measured with CPython 3.11: 988 nested containers parse, 989 raise).
pub const JSON_DEPTH_IN_EVALUATE: usize = 988;

/// The same limit one frame deeper, when `parse_to_obj` calls
/// `extract_json` (987 nested containers parse).
pub const JSON_DEPTH_IN_PARSE_TO_OBJ: usize = 987;

const FENCE: &[u8] = b"```";

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|at| at + from)
}

/// Length of a case-insensitive `json` at `at` (`ſ` matches `s`), if any.
fn json_tag_len(text: &[u8], at: usize) -> Option<usize> {
    let mut pos = at;
    for expected in [b'j', b's', b'o', b'n'] {
        let (cp, len) = decode(text, pos)?;
        let ok = cp == u32::from(expected)
            || cp == u32::from(expected.to_ascii_uppercase())
            || (expected == b's' && cp == 0x17F);
        if !ok {
            return None;
        }
        pos += len;
    }
    Some(pos - at)
}

/// The text the reference's fence regex captures, if it matches.
fn fenced(text: &[u8]) -> Option<&[u8]> {
    let open = find(text, FENCE, 0)?;
    let mut start = open + FENCE.len();
    start += json_tag_len(text, start).unwrap_or(0);
    while let Some((cp, len)) = decode(text, start) {
        if !is_space(cp) {
            break;
        }
        start += len;
    }
    let close = find(text, FENCE, start)?;
    text.get(start..close)
}

/// The text the reference's non-greedy brace regex captures, if it matches.
fn first_braces(text: &[u8]) -> Option<&[u8]> {
    let open = text.iter().position(|&b| b == b'{')?;
    let close = text.get(open..)?.iter().position(|&b| b == b'}')? + open;
    text.get(open..=close)
}

fn json_then_literal(text: &[u8], depth: usize) -> Option<PyValue> {
    json_loads(text, depth)
        .ok()
        .or_else(|| literal_eval(text).ok())
}

/// The reference's `extract_json` on a string; [`PyValue::None`] where it
/// returns `None`. `json_depth` is the nesting `json.loads` allows at the
/// call site ([`JSON_DEPTH_IN_EVALUATE`] or [`JSON_DEPTH_IN_PARSE_TO_OBJ`]).
pub fn extract_json(text: &[u8], json_depth: usize) -> PyValue {
    if let Some(inner) = fenced(text) {
        if let Some(value) = json_then_literal(strip(inner), json_depth) {
            return value;
        }
    }
    if let Ok(value) = json_loads(text, json_depth) {
        return value;
    }
    first_braces(text)
        .and_then(|braces| json_then_literal(braces, json_depth))
        .unwrap_or(PyValue::None)
}

/// The reference's `parse_to_obj`.
pub fn parse_to_obj(value: &PyValue) -> PyValue {
    let PyValue::Str(s) = value else {
        return value.clone();
    };
    let text = s.as_bytes();
    let found = extract_json(text, JSON_DEPTH_IN_PARSE_TO_OBJ);
    if !matches!(found, PyValue::None) {
        return found;
    }
    if let Ok(found) = literal_eval(text) {
        return found;
    }
    let stripped = strip(text);
    let quoted = |q: u8| stripped.first() == Some(&q) && stripped.last() == Some(&q);
    if quoted(b'"') || quoted(b'\'') {
        // `s[1:-1]`: empty when `s` is a single quote character.
        let inner = stripped
            .get(1..stripped.len().saturating_sub(1))
            .unwrap_or_default();
        let found = extract_json(inner, JSON_DEPTH_IN_PARSE_TO_OBJ);
        if !matches!(found, PyValue::None) {
            return found;
        }
        if let Ok(found) = literal_eval(inner) {
            return found;
        }
    }
    PyValue::Str(PyStr::clone(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::repr;

    fn extract(text: &str) -> String {
        repr(&extract_json(text.as_bytes(), JSON_DEPTH_IN_EVALUATE))
    }

    #[test]
    fn fence_rules() {
        assert_eq!(fenced(b"x ```json\n{}\n``` y"), Some(b"{}\n".as_slice()));
        assert_eq!(
            fenced("```J\u{17f}ON {} ```".as_bytes()),
            Some(b"{} ".as_slice())
        );
        assert_eq!(fenced(b"```python\n{}```"), Some(b"python\n{}".as_slice()));
        assert_eq!(fenced(b"``````"), Some(b"".as_slice()));
        assert_eq!(fenced(b"```json {}"), None);
        assert_eq!(
            first_braces(b"a {\"x\": {\"y\": 1}} b"),
            Some(b"{\"x\": {\"y\": 1}".as_slice())
        );
        assert_eq!(first_braces(b"} {"), None);
    }

    #[test]
    fn extraction_order() {
        assert_eq!(extract("```json\n{\"a\": 1}\n```"), "{'a': 1}");
        assert_eq!(extract("```\n{'a': (1, 2)}\n```"), "{'a': (1, 2)}");
        // A fence that does not parse falls through to the brace match.
        assert_eq!(extract("```python\n{'a': 1}\n```"), "{'a': 1}");
        assert_eq!(extract(" [1, 2] "), "[1, 2]");
        assert_eq!(extract("null"), "None");
        assert_eq!(extract("text {\"a\": 1} text"), "{'a': 1}");
        assert_eq!(extract("x {\"a\": {\"b\": 1}} y"), "None");
        assert_eq!(extract("{\"a\": NaN}"), "{'a': nan}");
        assert_eq!(extract("no json"), "None");
    }

    #[test]
    fn parse_to_obj_quirks() {
        let p = |s: &str| repr(&parse_to_obj(&PyValue::str(s)));
        assert_eq!(p("Created {'id': 5}"), p("Deleted {'id': 5} failed"));
        assert_eq!(p("plain text"), "'plain text'");
        assert_eq!(p("'quoted'"), "'quoted'");
        assert_eq!(p("None"), "None");
        assert_eq!(p("'"), "\"'\"");
        assert_eq!(repr(&parse_to_obj(&PyValue::int(5))), "5");
    }
}

//! Paths as models write them, resolved to [`JsonPointer`]s against the actual state.
//!
//! Models name state locations in three syntaxes, all accepted:
//! - a JSON Pointer string (`"/orders/O1/status"`), recognised by its leading `/`;
//! - a key list (`["orders", "O1", "status"]`, integers allowed for list indices);
//! - a dotted string (`"orders.O1.status"`, `"items.0.qty"`, `"items[0].qty"`).
//!
//! Dotted strings are ambiguous when keys contain dots (file names, e-mails, decimal ids).
//! They are resolved against the state: every way of grouping the segments into existing keys
//! is tried. Exactly one full match is used; several are reported as [`PathError::Ambiguous`].
//! When no grouping reaches an existing location, the deepest existing prefix is taken and the
//! rest must be a single new key; a longer rest is reported ([`PathError::MissingIntermediate`])
//! instead of guessing whether it is one dotted key or several nested ones.

use crate::pointer::{parse_index, JsonPointer, PointerError};
use serde_json::Value;

/// A path exactly as it appeared in model output.
#[derive(Clone, Debug, PartialEq)]
pub enum RawPath {
    /// `"/a/b"`.
    Pointer(String),
    /// `"a.b"`, `"a[0].b"`.
    Dotted(String),
    /// `["a", 0, "b"]`, already split into tokens.
    Keys(Vec<String>),
}

/// Why a path could not be turned into a pointer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PathError {
    /// The path is missing, `""` or `[]`.
    #[error("empty path")]
    Empty,
    /// The path is neither a string nor a list of keys.
    #[error("a path must be a string or a list of keys, found {0}")]
    WrongType(&'static str),
    /// An element of a key list is not a string or a non-negative integer.
    #[error("key {index} of the key list is {found}, expected a string or a non-negative integer")]
    BadKey {
        /// Position in the key list.
        index: usize,
        /// JSON type found.
        found: &'static str,
    },
    /// The JSON Pointer text is invalid.
    #[error(transparent)]
    Pointer(#[from] PointerError),
    /// Several groupings of a dotted path address existing locations.
    #[error("dotted path {path:?} is ambiguous: it matches {}", list(.candidates))]
    Ambiguous {
        /// The dotted text.
        path: String,
        /// The candidate pointers (at least two).
        candidates: Vec<JsonPointer>,
    },
    /// A dotted path continues past a location that does not exist.
    #[error("dotted path {path:?}: {existing} exists but has no key {missing:?}; if the rest is one key containing dots, write the path as a JSON Pointer or a key list")]
    MissingIntermediate {
        /// The dotted text.
        path: String,
        /// Deepest existing location.
        existing: JsonPointer,
        /// First segment that is not there.
        missing: String,
    },
}

fn list(candidates: &[JsonPointer]) -> String {
    candidates
        .iter()
        .map(|c| format!("'{c}'"))
        .collect::<Vec<_>>()
        .join(" and ")
}

/// Upper bound on groupings explored for one dotted path, so a hostile path with thousands of
/// dots cannot make resolution exponential.
const MAX_EXPLORED: usize = 4096;

impl RawPath {
    /// Reads a path from a JSON value found in model output.
    pub fn from_value(value: &Value) -> Result<Self, PathError> {
        match value {
            Value::String(s) if s.is_empty() => Err(PathError::Empty),
            Value::String(s) if s.starts_with('/') => Ok(RawPath::Pointer(s.clone())),
            Value::String(s) => Ok(RawPath::Dotted(s.clone())),
            Value::Array(items) if items.is_empty() => Err(PathError::Empty),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(index, item)| match item {
                    Value::String(s) => Ok(s.clone()),
                    Value::Number(n) if n.is_u64() => Ok(n.to_string()),
                    other => Err(PathError::BadKey {
                        index,
                        found: type_name(other),
                    }),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(RawPath::Keys),
            Value::Null => Err(PathError::Empty),
            other => Err(PathError::WrongType(type_name(other))),
        }
    }

    /// The path as the model wrote it, for messages.
    pub fn display(&self) -> String {
        match self {
            RawPath::Pointer(s) | RawPath::Dotted(s) => s.clone(),
            RawPath::Keys(keys) => serde_json::to_string(keys).unwrap_or_default(),
        }
    }

    /// Resolves the path against `state` (see the module docs for the dotted rules).
    pub fn resolve(&self, state: &Value) -> Result<JsonPointer, PathError> {
        match self {
            RawPath::Pointer(text) => Ok(JsonPointer::parse(text)?),
            RawPath::Keys(keys) => Ok(JsonPointer::from_tokens(keys.iter().cloned())),
            RawPath::Dotted(text) => resolve_dotted(state, text),
        }
    }
}

/// The JSON type name of a value, for messages.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn resolve_dotted(state: &Value, text: &str) -> Result<JsonPointer, PathError> {
    let plain: Vec<&str> = text.split('.').collect();
    let result = resolve_segments(state, text, &plain);
    // `items[0].qty`: only when the literal reading finds nothing, read `[n]` as an index.
    if text.contains('[') && !matches!(result, Ok((_, true)) | Err(PathError::Ambiguous { .. })) {
        if let Some(normalised) = brackets_to_dots(text) {
            let segments: Vec<&str> = normalised.split('.').collect();
            if let Ok((pointer, true)) = resolve_segments(state, text, &segments) {
                return Ok(pointer);
            }
        }
    }
    result.map(|(pointer, _)| pointer)
}

/// Returns the pointer and whether it addresses an existing location.
fn resolve_segments(
    state: &Value,
    text: &str,
    segments: &[&str],
) -> Result<(JsonPointer, bool), PathError> {
    let mut search = Search {
        full: Vec::new(),
        frontier: Vec::new(),
        explored: 0,
    };
    search.walk(state, segments, 0, &mut Vec::new());
    if search.full.len() == 1 {
        let tokens = search.full.pop().unwrap_or_default();
        return Ok((JsonPointer::from_tokens(tokens), true));
    }
    if search.full.len() > 1 {
        search.full.sort();
        return Err(PathError::Ambiguous {
            path: text.to_owned(),
            candidates: search
                .full
                .into_iter()
                .map(JsonPointer::from_tokens)
                .collect(),
        });
    }
    // No full match: continue from the deepest existing prefix.
    let deepest = search
        .frontier
        .iter()
        .map(|f| f.consumed)
        .max()
        .unwrap_or(0);
    let mut best: Vec<&Frontier> = search
        .frontier
        .iter()
        .filter(|f| f.consumed == deepest)
        .collect();
    best.sort_by(|a, b| a.tokens.cmp(&b.tokens));
    best.dedup_by(|a, b| a.tokens == b.tokens);
    let rest = &segments[deepest..];
    match (best.as_slice(), rest) {
        ([only], [last]) => {
            let mut tokens = only.tokens.clone();
            tokens.push((*last).to_owned());
            Ok((JsonPointer::from_tokens(tokens), false))
        }
        ([only], [first, ..]) => Err(PathError::MissingIntermediate {
            path: text.to_owned(),
            existing: JsonPointer::from_tokens(only.tokens.clone()),
            missing: (*first).to_owned(),
        }),
        _ => Err(PathError::Ambiguous {
            path: text.to_owned(),
            candidates: best
                .iter()
                .map(|f| {
                    let mut tokens = f.tokens.clone();
                    tokens.push(rest.join("."));
                    JsonPointer::from_tokens(tokens)
                })
                .collect(),
        }),
    }
}

struct Frontier {
    tokens: Vec<String>,
    consumed: usize,
}

struct Search {
    full: Vec<Vec<String>>,
    frontier: Vec<Frontier>,
    explored: usize,
}

impl Search {
    fn walk(&mut self, node: &Value, segments: &[&str], consumed: usize, tokens: &mut Vec<String>) {
        self.explored += 1;
        if self.explored > MAX_EXPLORED || self.full.len() > 1 {
            return;
        }
        let rest = &segments[consumed..];
        if rest.is_empty() {
            self.full.push(tokens.clone());
            return;
        }
        let mut matched = false;
        let mut key = String::new();
        for take in 1..=rest.len() {
            if take > 1 {
                key.push('.');
            }
            key.push_str(rest[take - 1]);
            let child = match node {
                Value::Object(map) => map.get(&key),
                Value::Array(items) if take == 1 => parse_index(&key).and_then(|i| items.get(i)),
                Value::Array(_) => break,
                _ => None,
            };
            if let Some(child) = child {
                matched = true;
                tokens.push(key.clone());
                self.walk(child, segments, consumed + take, tokens);
                tokens.pop();
            }
        }
        if !matched {
            self.frontier.push(Frontier {
                tokens: tokens.clone(),
                consumed,
            });
        }
    }
}

/// `a[0][1].b` → `a.0.1.b`; `None` when brackets hold something other than an index.
fn brackets_to_dots(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 4);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '[' {
            out.push(c);
            continue;
        }
        let mut digits = String::new();
        for d in chars.by_ref() {
            if d == ']' {
                break;
            }
            digits.push(d);
        }
        parse_index(&digits)?;
        out.push('.');
        out.push_str(&digits);
        if chars.peek().is_some_and(|&n| n != '.' && n != '[') {
            return None;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resolve(state: &Value, path: Value) -> Result<String, PathError> {
        RawPath::from_value(&path)?
            .resolve(state)
            .map(|p| p.to_string())
    }

    #[test]
    fn three_syntaxes_agree() {
        let state = json!({"orders": {"O1": {"status": "new"}}, "items": [{"qty": 1}]});
        for path in [
            json!("/orders/O1/status"),
            json!("orders.O1.status"),
            json!(["orders", "O1", "status"]),
        ] {
            assert_eq!(resolve(&state, path).unwrap(), "/orders/O1/status");
        }
        assert_eq!(
            resolve(&state, json!("items.0.qty")).unwrap(),
            "/items/0/qty"
        );
        assert_eq!(
            resolve(&state, json!(["items", 0, "qty"])).unwrap(),
            "/items/0/qty"
        );
        assert_eq!(
            resolve(&state, json!("items[0].qty")).unwrap(),
            "/items/0/qty"
        );
    }

    #[test]
    fn keys_with_dots_resolve_when_unambiguous() {
        let state = json!({"files": {"report.txt": {"size": 3}}, "users": {"a@b.com": {}}});
        assert_eq!(
            resolve(&state, json!("files.report.txt.size")).unwrap(),
            "/files/report.txt/size"
        );
        assert_eq!(
            resolve(&state, json!("users.a@b.com")).unwrap(),
            "/users/a@b.com"
        );
        // A new key under an existing parent: one segment left, unambiguous.
        assert_eq!(
            resolve(&state, json!("files.notes")).unwrap(),
            "/files/notes"
        );
    }

    #[test]
    fn ambiguity_is_reported_not_guessed() {
        let state = json!({"a": {"b": 1}, "a.b": 2});
        match resolve(&state, json!("a.b")) {
            Err(PathError::Ambiguous { candidates, .. }) => {
                let c: Vec<String> = candidates.iter().map(|c| c.to_string()).collect();
                assert_eq!(c, vec!["/a/b", "/a.b"]);
            }
            other => panic!("expected ambiguity, got {other:?}"),
        }
    }

    #[test]
    fn missing_intermediate_is_reported() {
        let state = json!({"files": {}});
        let err = resolve(&state, json!("files.report.txt")).unwrap_err();
        assert_eq!(
            err,
            PathError::MissingIntermediate {
                path: "files.report.txt".into(),
                existing: JsonPointer::from_tokens(["files"]),
                missing: "report".into()
            }
        );
        assert!(err.to_string().contains("JSON Pointer"));
    }

    #[test]
    fn bad_paths() {
        let state = json!({});
        assert_eq!(resolve(&state, json!("")), Err(PathError::Empty));
        assert_eq!(resolve(&state, json!([])), Err(PathError::Empty));
        assert_eq!(resolve(&state, json!(null)), Err(PathError::Empty));
        assert_eq!(
            resolve(&state, json!(3)),
            Err(PathError::WrongType("a number"))
        );
        assert_eq!(
            resolve(&state, json!(["a", -1])),
            Err(PathError::BadKey {
                index: 1,
                found: "a number"
            })
        );
        assert!(matches!(
            resolve(&state, json!("/a~2")),
            Err(PathError::Pointer(_))
        ));
    }

    #[test]
    fn hostile_dotted_path_is_bounded() {
        let mut state = json!({});
        let key = "k.".repeat(40);
        state["x"] = json!(1);
        // Thousands of dots must neither hang nor panic.
        let path = format!("{key}{}", ".".repeat(5000));
        let _ = resolve(&state, json!(path));
    }
}

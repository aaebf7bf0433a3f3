//! Canonical state paths: RFC 6901 JSON Pointers.
//!
//! Every location envsim reports (a change, a problem, a field score) is a [`JsonPointer`].
//! Model output may name places in other syntaxes (dotted strings, key lists); those are
//! turned into pointers by [`crate::path`] against the actual state.

use serde_json::Value;
use std::fmt;

/// A parsed RFC 6901 JSON Pointer: a list of unescaped reference tokens.
///
/// The empty pointer addresses the whole document. Tokens are kept as strings; whether a token
/// indexes an array is decided when the pointer is used against a value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JsonPointer {
    tokens: Vec<String>,
}

/// Why a string is not a valid JSON Pointer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PointerError {
    /// A non-empty pointer must start with `/`.
    #[error("a JSON Pointer must be empty or start with '/', got {0:?}")]
    MissingLeadingSlash(String),
    /// `~` may only be followed by `0` or `1`.
    #[error("invalid escape '~' at byte {offset} of {pointer:?} (only ~0 and ~1 are allowed)")]
    BadEscape {
        /// The pointer text.
        pointer: String,
        /// Byte offset of the `~`.
        offset: usize,
    },
}

impl JsonPointer {
    /// The pointer to the whole document.
    pub fn root() -> Self {
        Self::default()
    }

    /// Builds a pointer from already-unescaped tokens.
    pub fn from_tokens<I, S>(tokens: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            tokens: tokens.into_iter().map(Into::into).collect(),
        }
    }

    /// Parses RFC 6901 text (`""`, `"/a/b~1c"`).
    pub fn parse(text: &str) -> Result<Self, PointerError> {
        if text.is_empty() {
            return Ok(Self::root());
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(PointerError::MissingLeadingSlash(text.to_owned()));
        };
        let mut tokens = Vec::new();
        let mut offset = 1;
        for raw in rest.split('/') {
            tokens.push(unescape(raw).map_err(|at| PointerError::BadEscape {
                pointer: text.to_owned(),
                offset: offset + at,
            })?);
            offset += raw.len() + 1;
        }
        Ok(Self { tokens })
    }

    /// The unescaped tokens.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// True for the root pointer.
    pub fn is_root(&self) -> bool {
        self.tokens.is_empty()
    }

    /// A new pointer with one more token.
    pub fn child(&self, token: impl Into<String>) -> Self {
        let mut tokens = Vec::with_capacity(self.tokens.len() + 1);
        tokens.extend(self.tokens.iter().cloned());
        tokens.push(token.into());
        Self { tokens }
    }

    /// Appends a token in place.
    pub fn push(&mut self, token: impl Into<String>) {
        self.tokens.push(token.into());
    }

    /// Removes and returns the last token.
    pub fn pop(&mut self) -> Option<String> {
        self.tokens.pop()
    }

    /// The parent pointer and the last token, or `None` for the root.
    pub fn split_last(&self) -> Option<(JsonPointer, &str)> {
        let (last, init) = self.tokens.split_last()?;
        Some((
            JsonPointer {
                tokens: init.to_vec(),
            },
            last.as_str(),
        ))
    }

    /// True when `self` equals `other` or lies inside it.
    pub fn starts_with(&self, other: &JsonPointer) -> bool {
        self.tokens.starts_with(&other.tokens)
    }

    /// The value this pointer addresses, if present.
    pub fn get<'v>(&self, root: &'v Value) -> Option<&'v Value> {
        self.tokens
            .iter()
            .try_fold(root, |node, token| step(node, token))
    }

    /// Mutable access to the addressed value, if present.
    pub fn get_mut<'v>(&self, root: &'v mut Value) -> Option<&'v mut Value> {
        self.tokens
            .iter()
            .try_fold(root, |node, token| step_mut(node, token))
    }

    /// The dot-joined form the reference benchmark uses (`a.b.c`, dots inside keys not escaped).
    pub fn to_dotted(&self) -> String {
        self.tokens.join(".")
    }
}

/// Follows one token from `node`: an object key, or a canonical array index.
pub fn step<'v>(node: &'v Value, token: &str) -> Option<&'v Value> {
    match node {
        Value::Object(map) => map.get(token),
        Value::Array(items) => items.get(parse_index(token)?),
        _ => None,
    }
}

fn step_mut<'v>(node: &'v mut Value, token: &str) -> Option<&'v mut Value> {
    match node {
        Value::Object(map) => map.get_mut(token),
        Value::Array(items) => items.get_mut(parse_index(token)?),
        _ => None,
    }
}

/// Parses an RFC 6901 array index: decimal digits without leading zeros (except `0` itself).
pub fn parse_index(token: &str) -> Option<usize> {
    let bytes = token.as_bytes();
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if bytes.len() > 1 && bytes[0] == b'0' {
        return None;
    }
    token.parse().ok()
}

fn unescape(raw: &str) -> Result<String, usize> {
    if !raw.contains('~') {
        return Ok(raw.to_owned());
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.char_indices();
    while let Some((at, c)) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some((_, '0')) => out.push('~'),
                Some((_, '1')) => out.push('/'),
                _ => return Err(at),
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

fn escape_into(token: &str, out: &mut String) {
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

impl fmt::Display for JsonPointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        for token in &self.tokens {
            out.push('/');
            escape_into(token, &mut out);
        }
        f.write_str(&out)
    }
}

impl serde::Serialize for JsonPointer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Reduces a set of pointers to the minimal ones: any pointer inside another one is dropped.
/// The result is sorted and free of duplicates.
pub fn minimal_roots(mut pointers: Vec<JsonPointer>) -> Vec<JsonPointer> {
    // Sorting by tokens puts every ancestor directly before its descendants.
    pointers.sort();
    pointers.dedup();
    let mut roots: Vec<JsonPointer> = Vec::with_capacity(pointers.len());
    for p in pointers {
        if roots.last().is_some_and(|r| p.starts_with(r)) {
            continue;
        }
        roots.push(p);
    }
    roots
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_and_prints_rfc6901_examples() {
        let doc = json!({"foo": ["bar", "baz"], "": 0, "a/b": 1, "m~n": 8, " ": 7});
        for (text, expected) in [
            ("", doc.clone()),
            ("/foo", json!(["bar", "baz"])),
            ("/foo/0", json!("bar")),
            ("/", json!(0)),
            ("/a~1b", json!(1)),
            ("/m~0n", json!(8)),
            ("/ ", json!(7)),
        ] {
            let p = JsonPointer::parse(text).unwrap();
            assert_eq!(p.get(&doc), Some(&expected), "{text}");
            assert_eq!(p.to_string(), text);
        }
    }

    #[test]
    fn rejects_bad_pointers() {
        assert_eq!(
            JsonPointer::parse("a/b"),
            Err(PointerError::MissingLeadingSlash("a/b".into()))
        );
        assert_eq!(
            JsonPointer::parse("/a/x~2"),
            Err(PointerError::BadEscape {
                pointer: "/a/x~2".into(),
                offset: 4
            })
        );
        assert!(JsonPointer::parse("/a~").is_err());
    }

    #[test]
    fn array_indices_are_canonical() {
        let doc = json!([10, 20]);
        assert_eq!(
            JsonPointer::parse("/1").unwrap().get(&doc),
            Some(&json!(20))
        );
        assert_eq!(JsonPointer::parse("/01").unwrap().get(&doc), None);
        assert_eq!(JsonPointer::parse("/-").unwrap().get(&doc), None);
        assert_eq!(JsonPointer::parse("/2").unwrap().get(&doc), None);
        assert_eq!(parse_index("0"), Some(0));
        assert_eq!(parse_index("+1"), None);
    }

    #[test]
    fn minimal_roots_drop_descendants() {
        let p = |s: &str| JsonPointer::parse(s).unwrap();
        let roots = minimal_roots(vec![p("/a/b"), p("/a"), p("/c/d"), p("/a/b/c"), p("/c/d")]);
        assert_eq!(roots, vec![p("/a"), p("/c/d")]);
        // "/ab" is not inside "/a".
        assert_eq!(
            minimal_roots(vec![p("/a"), p("/ab")]),
            vec![p("/a"), p("/ab")]
        );
    }
}

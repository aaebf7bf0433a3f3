//! How a package's harness shows the agent what the executor reports as an error: many suites
//! never let an exception or a malformed call reach the agent as such. τ-bench answers
//! `"Error: <message>"` for any exception a tool raises and a text for an unknown action;
//! envsim's executor reports an exception record and refuses an invalid call. A manifest's
//! `errors` says which the suite does, so that replays and benchmarks of that suite's
//! trajectories see the answers its agents saw.

use serde::{Deserialize, Serialize};

/// Templates for the answers a harness gives in place of an exception or an invalid call.
/// In a template, `{message}` is the exception's own message (Python's `str(exc)`), `{type}` its
/// class name and `{detail}` both as the executor reports them (`ValueError: no such user`); for
/// an invalid call `{message}` and `{detail}` are the executor's reason and `{type}` is
/// `InvalidCall`. Any other text, braces included, is kept as written.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields)]
pub struct ErrorRendering {
    /// The answer to a call whose tool raised (the changes it made before raising stay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exception: Option<String>,
    /// The answer to a call that does not fit the environment (an unknown tool, arguments its
    /// signature refuses); the state stays as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_call: Option<String>,
}

impl ErrorRendering {
    /// Whether nothing is rendered (the executor's own reports stand).
    pub fn is_empty(&self) -> bool {
        self.exception.is_none() && self.invalid_call.is_none()
    }

    /// The answer to an exception the executor reported as `detail` (`Type: message`), or
    /// `None` when exceptions are not rendered.
    pub fn exception(&self, detail: &str) -> Option<String> {
        let template = self.exception.as_deref()?;
        let (kind, message) = match detail.split_once(": ") {
            Some((kind, message)) if is_type_name(kind) => (kind, message),
            _ if is_type_name(detail) => (detail, ""),
            _ => ("Exception", detail),
        };
        Some(fill(template, kind, message, detail))
    }

    /// The answer to an invalid call the executor refused for `reason`, or `None` when
    /// invalid calls are not rendered.
    pub fn invalid_call(&self, reason: &str) -> Option<String> {
        let template = self.invalid_call.as_deref()?;
        Some(fill(template, "InvalidCall", reason, reason))
    }
}

/// A Python class name, possibly dotted (`json.decoder.JSONDecodeError`).
fn is_type_name(text: &str) -> bool {
    !text.is_empty()
        && text.split('.').all(|part| {
            part.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_alphanumeric() || c == '_')
        })
}

fn fill(template: &str, kind: &str, message: &str, detail: &str) -> String {
    // One pass, so that a message holding `{type}` is not expanded again.
    let mut out = String::with_capacity(template.len() + detail.len());
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let (value, len) = if tail.starts_with("{message}") {
            (message, "{message}".len())
        } else if tail.starts_with("{type}") {
            (kind, "{type}".len())
        } else if tail.starts_with("{detail}") {
            (detail, "{detail}".len())
        } else {
            ("{", 1)
        };
        out.push_str(value);
        rest = &tail[len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendering(exception: &str, invalid: &str) -> ErrorRendering {
        ErrorRendering {
            exception: Some(exception.into()),
            invalid_call: Some(invalid.into()),
        }
    }

    #[test]
    fn exceptions_fill_message_type_and_detail() {
        let r = rendering("Error: {message}", "Error: {message}");
        assert_eq!(
            r.exception("ValueError: no such user").as_deref(),
            Some("Error: no such user")
        );
        let r = rendering("{type} raised ({detail}) {message}", "");
        assert_eq!(
            r.exception("KeyError: 'u1'").as_deref(),
            Some("KeyError raised (KeyError: 'u1') 'u1'")
        );
        // A dotted class, a bare class, and text that is not a class before the colon.
        assert_eq!(
            r.exception("json.decoder.JSONDecodeError: bad").as_deref(),
            Some("json.decoder.JSONDecodeError raised (json.decoder.JSONDecodeError: bad) bad")
        );
        assert_eq!(
            r.exception("StopIteration").as_deref(),
            Some("StopIteration raised (StopIteration) ")
        );
        assert_eq!(
            r.exception("cannot read the result: x").as_deref(),
            Some("Exception raised (cannot read the result: x) cannot read the result: x")
        );
    }

    #[test]
    fn placeholders_in_the_message_are_not_expanded_and_other_braces_stay() {
        let r = rendering("{\"error\": \"{message}\"} {unknown}", "");
        assert_eq!(
            r.exception("ValueError: {type} {detail}").as_deref(),
            Some("{\"error\": \"{type} {detail}\"} {unknown}")
        );
    }

    #[test]
    fn invalid_calls_fill_the_reason_and_nothing_renders_when_absent() {
        let r = rendering("", "Unknown action: {message}");
        assert_eq!(
            r.invalid_call("unknown tool 'fly'").as_deref(),
            Some("Unknown action: unknown tool 'fly'")
        );
        let none = ErrorRendering::default();
        assert!(none.is_empty());
        assert_eq!(none.exception("ValueError: x"), None);
        assert_eq!(none.invalid_call("x"), None);
    }

    #[test]
    fn the_manifest_form_refuses_unknown_keys() {
        let parsed: ErrorRendering =
            serde_json::from_str(r#"{"exception": "Error: {message}"}"#).unwrap();
        assert_eq!(parsed.exception.as_deref(), Some("Error: {message}"));
        let error = serde_json::from_str::<ErrorRendering>(r#"{"exceptions": "x"}"#).unwrap_err();
        assert!(
            error.to_string().contains("unknown field `exceptions`"),
            "{error}"
        );
    }
}

//! Outcome rules: how an environment package's observations say success or failure.
//!
//! Environments report the outcome of a tool call in different ways: EnvScaler-style classes
//! return a dict with a boolean `success`; tools written as functions over one JSON database
//! return strings such as `"Error: product not found"`; other APIs use an `error` key or a
//! `status` field. A package names its rule in its manifest (`"outcome"`), or gets the default
//! of its convention. [`OutcomeRule::classify`] reads an observation (the tool's return value as
//! JSON) as success (`Some(true)`), failure (`Some(false)`) or undetermined (`None`).
//!
//! A raised exception is a failure under every rule ([`OutcomeRule::classify_raised`]); it has
//! no observation to classify.
//!
//! Manifest syntax (`rule` selects the variant; unknown fields are refused):
//!
//! ```json
//! {"rule": "success_key"}
//! {"rule": "error_key", "key": "error"}
//! {"rule": "error_prefix", "prefix": "Error"}
//! {"rule": "pattern", "failure": "(?i)not found|invalid"}
//! {"rule": "status_field", "field": "status", "success": ["ok", 200]}
//! ```

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use std::fmt;

/// How an observation is classified as success, failure or undetermined.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(tag = "rule", rename_all = "snake_case", deny_unknown_fields)]
pub enum OutcomeRule {
    /// A dict observation with a boolean `success` says it; anything else is undetermined.
    /// The default of the `class` convention.
    SuccessKey {},
    /// A dict observation holding `key` (whatever its value) is a failure; every other
    /// observation is a success.
    ErrorKey {
        /// The key whose presence means failure.
        key: String,
    },
    /// A string observation starting with `prefix` is a failure; every other observation is a
    /// success. The default of the `database` convention, with prefix `Error`.
    ErrorPrefix {
        /// The prefix that means failure (case-sensitive).
        prefix: String,
    },
    /// The observation's text matching the regular expression anywhere (a search, as Python's
    /// `re.search`) is a failure; otherwise a success. The text of a string observation is the
    /// string itself; of any other observation its compact JSON.
    Pattern {
        /// The failure pattern (Rust `regex` syntax, Unicode-aware).
        failure: FailurePattern,
    },
    /// A dict observation whose `field` holds one of the `success` values is a success; any
    /// other value of the field is a failure; no field (or no dict) is undetermined. Values
    /// compare as JSON values (`1` and `1.0` differ, `"200"` and `200` differ).
    StatusField {
        /// The status field.
        field: String,
        /// The values that mean success.
        success: Vec<Value>,
    },
}

impl OutcomeRule {
    /// The default rule of the `class` convention: `{"rule": "success_key"}`.
    pub fn success_key() -> OutcomeRule {
        OutcomeRule::SuccessKey {}
    }

    /// The default rule of the `database` convention: `{"rule": "error_prefix", "prefix":
    /// "Error"}`.
    pub fn error_prefix() -> OutcomeRule {
        OutcomeRule::ErrorPrefix {
            prefix: "Error".to_owned(),
        }
    }

    /// Success (`Some(true)`), failure (`Some(false)`) or undetermined (`None`) for an
    /// observation, the tool's return value as JSON.
    pub fn classify(&self, observation_json: &Value) -> Option<bool> {
        match self {
            OutcomeRule::SuccessKey {} => observation_json
                .as_object()
                .and_then(|map| map.get("success"))
                .and_then(Value::as_bool),
            OutcomeRule::ErrorKey { key } => Some(
                !observation_json
                    .as_object()
                    .is_some_and(|map| map.contains_key(key)),
            ),
            OutcomeRule::ErrorPrefix { prefix } => Some(
                !observation_json
                    .as_str()
                    .is_some_and(|text| text.starts_with(prefix.as_str())),
            ),
            OutcomeRule::Pattern { failure } => Some(!match observation_json {
                Value::String(text) => failure.regex.is_match(text),
                other => failure.regex.is_match(&other.to_string()),
            }),
            OutcomeRule::StatusField { field, success } => observation_json
                .as_object()
                .and_then(|map| map.get(field))
                .map(|status| success.contains(status)),
        }
    }

    /// An observation this rule reads as a failure, saying `message` (`None` when the rule
    /// cannot be made to: a pattern the message does not match). For planting faults.
    pub fn failure_example(&self, message: &str) -> Option<Value> {
        let candidate = match self {
            OutcomeRule::SuccessKey {} => serde_json::json!({"success": false, "error": message}),
            OutcomeRule::ErrorKey { key } => serde_json::json!({ key.as_str(): message }),
            OutcomeRule::ErrorPrefix { prefix } => Value::String(format!("{prefix}: {message}")),
            OutcomeRule::Pattern { .. } => Value::String(message.to_owned()),
            OutcomeRule::StatusField { field, .. } => {
                serde_json::json!({ field.as_str(): "error", "message": message })
            }
        };
        (self.classify(&candidate) == Some(false)).then_some(candidate)
    }

    /// An observation this rule reads as a success, returning `data` (`None` when the rule
    /// cannot be made to). For planting faults.
    pub fn success_example(&self, data: Value) -> Option<Value> {
        let candidate = match self {
            OutcomeRule::SuccessKey {} => serde_json::json!({"success": true, "data": data}),
            OutcomeRule::StatusField { field, success } => {
                serde_json::json!({ field.as_str(): success.first()?.clone(), "data": data })
            }
            _ => data,
        };
        (self.classify(&candidate) == Some(true)).then_some(candidate)
    }

    /// The outcome of a call that raised an exception: a failure, under every rule.
    pub fn classify_raised(&self) -> Option<bool> {
        Some(false)
    }

    /// A short description for messages (`boolean `success` key`, `error prefix "Error"`, ...).
    pub fn describe(&self) -> String {
        match self {
            OutcomeRule::SuccessKey {} => "boolean `success` key".to_owned(),
            OutcomeRule::ErrorKey { key } => format!("error key {key:?}"),
            OutcomeRule::ErrorPrefix { prefix } => format!("error prefix {prefix:?}"),
            OutcomeRule::Pattern { failure } => format!("failure pattern {:?}", failure.source),
            OutcomeRule::StatusField { field, success } => format!(
                "status field {field:?} in {}",
                Value::Array(success.clone())
            ),
        }
    }
}

impl Default for OutcomeRule {
    /// `success_key`, the rule of the class convention.
    fn default() -> Self {
        OutcomeRule::success_key()
    }
}

/// A compiled failure pattern, read from and written as its source text. A pattern that does
/// not compile is refused when the manifest is read (a deserialization error with the regex
/// error's message).
#[derive(Clone)]
pub struct FailurePattern {
    source: String,
    regex: regex::Regex,
}

impl FailurePattern {
    /// Compiles `source`; the error says what is wrong with it.
    pub fn new(source: &str) -> Result<FailurePattern, String> {
        regex::Regex::new(source)
            .map(|regex| FailurePattern {
                source: source.to_owned(),
                regex,
            })
            .map_err(|e| format!("invalid failure pattern {source:?}: {e}"))
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

impl fmt::Debug for FailurePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("FailurePattern").field(&self.source).finish()
    }
}

impl PartialEq for FailurePattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Serialize for FailurePattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.source)
    }
}

impl<'de> Deserialize<'de> for FailurePattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let source = String::deserialize(deserializer)?;
        FailurePattern::new(&source).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(v: Value) -> OutcomeRule {
        serde_json::from_value(v).unwrap()
    }

    fn all(rule: &OutcomeRule, observations: &[Value]) -> Vec<Option<bool>> {
        observations.iter().map(|o| rule.classify(o)).collect()
    }

    /// The same observations through every rule.
    fn observations() -> Vec<Value> {
        vec![
            json!({"success": true, "data": 1}),
            json!({"success": false, "error": "no such order"}),
            json!({"success": "yes"}),
            json!("Error: product not found"),
            json!("Order O1 cancelled"),
            json!({"status": "ok"}),
            json!({"status": 404, "error": null}),
            json!(null),
            json!(["Error: in a list"]),
            json!(3),
        ]
    }

    #[test]
    fn success_key_reads_a_boolean_success_only() {
        assert_eq!(
            all(&rule(json!({"rule": "success_key"})), &observations()),
            [
                Some(true),
                Some(false),
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None
            ]
        );
        assert_eq!(OutcomeRule::default(), OutcomeRule::success_key());
    }

    #[test]
    fn error_key_fails_a_dict_holding_the_key_whatever_its_value() {
        assert_eq!(
            all(
                &rule(json!({"rule": "error_key", "key": "error"})),
                &observations()
            ),
            [
                Some(true),
                Some(false),
                Some(true),
                Some(true),
                Some(true),
                Some(true),
                Some(false),
                Some(true),
                Some(true),
                Some(true)
            ]
        );
    }

    #[test]
    fn error_prefix_fails_strings_that_start_with_it() {
        let r = rule(json!({"rule": "error_prefix", "prefix": "Error"}));
        assert_eq!(r, OutcomeRule::error_prefix());
        assert_eq!(
            all(&r, &observations()),
            [
                Some(true),
                Some(true),
                Some(true),
                Some(false),
                Some(true),
                Some(true),
                Some(true),
                Some(true),
                Some(true),
                Some(true)
            ]
        );
        // Case-sensitive, and a prefix, not a substring.
        assert_eq!(r.classify(&json!("error: lower case")), Some(true));
        assert_eq!(r.classify(&json!("An Error: inside")), Some(true));
        assert_eq!(r.classify(&json!("Error")), Some(false));
    }

    #[test]
    fn pattern_searches_the_string_or_the_compact_json() {
        let r = rule(json!({"rule": "pattern", "failure": "(?i)not found|^Error"}));
        assert_eq!(
            all(&r, &observations()),
            [
                Some(true),
                Some(true),
                Some(true),
                Some(false),
                Some(true),
                Some(true),
                Some(true),
                Some(true),
                // `["Error: in a list"]`: the JSON text starts with `[`, so `^Error` does not
                // match.
                Some(true),
                Some(true)
            ]
        );
        assert_eq!(r.classify(&json!("Product NOT FOUND")), Some(false));
        assert_eq!(r.classify(&json!({"msg": "not found"})), Some(false));
        // The compact JSON text: `{"a":1}` has no space after the colon.
        let compact = rule(json!({"rule": "pattern", "failure": "\"a\":1"}));
        assert_eq!(compact.classify(&json!({"a": 1})), Some(false));
        assert_eq!(compact.classify(&json!({"a": 12})), Some(false));
        assert_eq!(compact.classify(&json!({"a": 2})), Some(true));
        // Unicode-aware classes, as Python's `re` on str.
        let digits = rule(json!({"rule": "pattern", "failure": "^\\d+$"}));
        assert_eq!(digits.classify(&json!("٣٤")), Some(false));
        assert_eq!(digits.classify(&json!(34)), Some(false));
        assert_eq!(digits.classify(&json!("34a")), Some(true));
    }

    #[test]
    fn status_field_reads_the_field_and_is_undetermined_without_it() {
        let r = rule(json!({"rule": "status_field", "field": "status", "success": ["ok", 200]}));
        assert_eq!(
            all(&r, &observations()),
            [
                None,
                None,
                None,
                None,
                None,
                Some(true),
                Some(false),
                None,
                None,
                None
            ]
        );
        assert_eq!(r.classify(&json!({"status": 200})), Some(true));
        // JSON equality: 200.0 and "200" are not 200.
        assert_eq!(r.classify(&json!({"status": 200.0})), Some(false));
        assert_eq!(r.classify(&json!({"status": "200"})), Some(false));
        assert_eq!(r.classify(&json!({"status": null})), Some(false));
        let empty = rule(json!({"rule": "status_field", "field": "s", "success": []}));
        assert_eq!(empty.classify(&json!({"s": "ok"})), Some(false));
        assert_eq!(empty.classify(&json!({"t": "ok"})), None);
    }

    #[test]
    fn an_exception_is_a_failure_under_every_rule() {
        for r in [
            OutcomeRule::success_key(),
            OutcomeRule::error_prefix(),
            rule(json!({"rule": "error_key", "key": "error"})),
            rule(json!({"rule": "pattern", "failure": "x"})),
            rule(json!({"rule": "status_field", "field": "s", "success": [1]})),
        ] {
            assert_eq!(r.classify_raised(), Some(false), "{r:?}");
        }
    }

    #[test]
    fn rules_round_trip_through_json() {
        for text in [
            json!({"rule": "success_key"}),
            json!({"rule": "error_key", "key": "err"}),
            json!({"rule": "error_prefix", "prefix": "Error"}),
            json!({"rule": "pattern", "failure": "(?i)fail"}),
            json!({"rule": "status_field", "field": "status", "success": ["ok", 1, true]}),
        ] {
            let parsed = rule(text.clone());
            assert_eq!(serde_json::to_value(&parsed).unwrap(), text);
        }
    }

    #[test]
    fn malformed_rules_are_refused_with_the_reason() {
        let error = |v: Value| {
            serde_json::from_value::<OutcomeRule>(v)
                .unwrap_err()
                .to_string()
        };
        let bad_regex = error(json!({"rule": "pattern", "failure": "(unclosed"}));
        assert!(
            bad_regex.starts_with("invalid failure pattern \"(unclosed\": regex parse error"),
            "{bad_regex}"
        );
        assert_eq!(
            error(json!({"rule": "first_word"})),
            "unknown variant `first_word`, expected one of `success_key`, `error_key`, \
             `error_prefix`, `pattern`, `status_field`"
        );
        assert_eq!(error(json!({"rule": "error_key"})), "missing field `key`");
        assert_eq!(
            error(json!({"rule": "error_prefix", "prefix": "E", "case": false})),
            "unknown field `case`, expected `prefix`"
        );
        assert_eq!(
            error(json!({"rule": "success_key", "key": "ok"})),
            "unknown field `key`, there are no fields"
        );
        assert_eq!(error(json!({"prefix": "E"})), "missing field `rule`");
        assert_eq!(
            error(json!({"rule": "status_field", "field": "s", "success": "ok"})),
            "invalid type: string \"ok\", expected a sequence"
        );
    }

    #[test]
    fn descriptions_name_the_rule() {
        assert_eq!(
            OutcomeRule::success_key().describe(),
            "boolean `success` key"
        );
        assert_eq!(
            OutcomeRule::error_prefix().describe(),
            "error prefix \"Error\""
        );
        assert_eq!(
            rule(json!({"rule": "status_field", "field": "status", "success": ["ok", 1]}))
                .describe(),
            "status field \"status\" in [\"ok\",1]"
        );
        assert_eq!(
            rule(json!({"rule": "pattern", "failure": "no.*"})).describe(),
            "failure pattern \"no.*\""
        );
    }
}

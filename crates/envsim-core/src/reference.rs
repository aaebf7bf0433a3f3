//! The reference lane: the reference evaluator (EnvSimBench's
//! `10.eval_model.py`) reproduced byte for byte from the raw model text, so
//! published tables can be reproduced next to envsim's strict metrics.
//!
//! Per sample the reference does, in Python:
//!
//! 1. `parsed = extract_json(text)`; `None` → `{"error": "failed_parse"}`,
//!    which counts in the denominators as wrong on both metrics.
//! 2. `parsed.get("feedback")`, `parsed.get("config_changes", [])`: a parsed
//!    value that is not a dict raises.
//! 3. `feedback = parse_to_obj(feedback)`.
//! 4. On a deep copy of `config_before`, every change is applied with
//!    `apply_change(path, value if "value" in change else change.get("after"),
//!    type)`. Iterating `config_changes` raises for `null` or a number, walks
//!    the keys of a dict and the characters of a string; a change that is not
//!    a dict raises.
//! 5. CM: for every change of the truth diff (`diff_dicts`: Python equality,
//!    lists atomic, dotted paths), walking `path.split(".")` through dicts
//!    must find a value `==` the truth's `after` (`None` for a removal, so a
//!    correct delete fails).
//! 6. FM: `feedback == parse_to_obj(observation)`.
//!
//! Where Python raises inside this function, the reference's thread pool
//! prints the exception and the sample vanishes from every count. envsim
//! counts such a sample as wrong on both lanes and reports it as a
//! [`ReferenceOutcome::Crash`] with the exception, so reports can show both
//! envsim's figure and the one the reference would have printed.
//!
//! Parsing and comparison run on [`PyValue`]s through CPython's own
//! semantics ([`crate::python`]): `json.loads`, `ast.literal_eval`, Python
//! `==` and hashing, `int()`, `str()`. Submodules: [`extract`]
//! (`extract_json`, `parse_to_obj`) and [`apply`] (`apply_change`).

pub mod apply;
pub mod extract;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::diff::{reference_diff, ReferenceEquality};
use crate::python::{py_eq, PyStr, PyValue};
use apply::{apply_change, split_dots, Crash, UndoLog};
use extract::{extract_json, parse_to_obj, JSON_DEPTH_IN_EVALUATE};

/// How the reference evaluator ends on one sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReferenceOutcome {
    /// Scored; FM-ref and CM-ref are its verdicts.
    Scored,
    /// `extract_json` found nothing: counted, wrong on both metrics.
    FailedParse,
    /// Python raised: the reference drops the sample from every count.
    Crash,
    /// The request failed: the reference records the error and counts the
    /// sample as wrong.
    RequestFailed,
    /// No prediction was supplied, so the reference never scored the sample
    /// (for a reference result file: a sample it dropped).
    Missing,
}

impl ReferenceOutcome {
    /// Whether the reference counts the sample in its denominators.
    pub fn counted_by_reference(self) -> bool {
        matches!(
            self,
            ReferenceOutcome::Scored
                | ReferenceOutcome::FailedParse
                | ReferenceOutcome::RequestFailed
        )
    }
}

/// The reference lane's result for one sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReferenceVerdict {
    /// How the evaluation ended.
    pub outcome: ReferenceOutcome,
    /// Feedback match (false unless scored).
    pub fm: bool,
    /// Config match (false unless scored).
    pub cm: bool,
    /// The exception, for [`ReferenceOutcome::Crash`].
    pub crash: Option<String>,
}

impl ReferenceVerdict {
    fn unscored(outcome: ReferenceOutcome) -> Self {
        ReferenceVerdict {
            outcome,
            fm: false,
            cm: false,
            crash: None,
        }
    }

    fn crash(Crash(message): Crash) -> Self {
        ReferenceVerdict {
            crash: Some(message),
            ..ReferenceVerdict::unscored(ReferenceOutcome::Crash)
        }
    }
}

/// One ground-truth change as the reference checks it.
#[derive(Clone, Debug)]
struct TruthChange {
    /// `path.split(".")`.
    parts: Vec<PyValue>,
    /// The truth's `after` (`None` for a removal).
    after: PyValue,
}

/// Everything the reference lane needs about one transition, computed once:
/// `config_before` as Python objects (changes are applied to it in place and
/// undone), the truth diff and the normalised true feedback.
#[derive(Clone, Debug)]
pub struct ReferenceTruth {
    state: PyValue,
    changes: Vec<TruthChange>,
    feedback: PyValue,
}

fn crash_attribute(value: &PyValue) -> Crash {
    Crash(format!(
        "AttributeError: '{}' object has no attribute 'get'",
        value.type_name()
    ))
}

/// The items `for ch in value` visits, or the `TypeError` Python raises. Lists and tuples are
/// borrowed; the other iterables can only yield non-dicts, on which the reference crashes.
fn iterate(value: &PyValue) -> Result<Cow<'_, [PyValue]>, Crash> {
    Ok(Cow::Owned(match value {
        PyValue::List(items) | PyValue::Tuple(items) => return Ok(Cow::Borrowed(items)),
        PyValue::Dict(dict) => dict.iter().map(|(k, _)| k.clone()).collect(),
        PyValue::Set(set) => set.iter().cloned().collect(),
        PyValue::Str(s) => {
            let mut chars = Vec::new();
            for cp in crate::python::text::code_points(s.as_bytes()) {
                let mut one = Vec::new();
                crate::python::text::encode(cp, &mut one);
                chars.push(PyValue::Str(PyStr::from_wtf(one)));
            }
            chars
        }
        PyValue::Bytes(bytes) => bytes.iter().map(|&b| PyValue::int(i64::from(b))).collect(),
        other => {
            return Err(Crash(format!(
                "TypeError: '{}' object is not iterable",
                other.type_name()
            )))
        }
    }))
}

impl ReferenceTruth {
    /// Prepares a transition: `config_before`, `config_after` and the
    /// observation content (normally the `str()` of the tool's return).
    pub fn new(before: &Value, after: &Value, observation: &Value) -> ReferenceTruth {
        let empty = Value::Object(serde_json::Map::new());
        // `step.get('config_before') or {}`: a falsy state becomes `{}`.
        let falsy = |v: &Value| match v {
            Value::Null => true,
            Value::Object(m) => m.is_empty(),
            _ => false,
        };
        let before = if falsy(before) { &empty } else { before };
        let after = if falsy(after) { &empty } else { after };
        let changes = reference_diff(before, after, ReferenceEquality::Python)
            .iter()
            .map(|change| TruthChange {
                parts: split_dots(&PyStr::from(change.pointer.to_dotted())),
                after: change.after.map_or(PyValue::None, PyValue::from_json),
            })
            .collect();
        ReferenceTruth {
            state: PyValue::from_json(before),
            changes,
            feedback: parse_to_obj(&PyValue::from_json(observation)),
        }
    }

    /// `config_before` as the reference's Python objects; scoring applies changes to it and
    /// undoes them, so it is the same before and after every call.
    pub fn state(&self) -> &PyValue {
        &self.state
    }

    /// The true feedback as the reference normalises it.
    pub fn feedback(&self) -> &PyValue {
        &self.feedback
    }

    /// Scores raw model text.
    pub fn score_text(&mut self, text: &str) -> ReferenceVerdict {
        let parsed = extract_json(text.as_bytes(), JSON_DEPTH_IN_EVALUATE);
        self.score_parsed(&parsed)
    }

    /// Scores what `extract_json` returned (`None` is a failed parse), or an
    /// output object read from a reference result file.
    pub fn score_parsed(&mut self, parsed: &PyValue) -> ReferenceVerdict {
        let mut undo = UndoLog::default();
        let verdict = self.evaluate(parsed, &mut undo);
        undo.undo(&mut self.state);
        verdict
    }

    fn evaluate(&mut self, parsed: &PyValue, undo: &mut UndoLog) -> ReferenceVerdict {
        let object = match parsed {
            PyValue::None => return ReferenceVerdict::unscored(ReferenceOutcome::FailedParse),
            PyValue::Dict(object) => object,
            other => return ReferenceVerdict::crash(crash_attribute(other)),
        };
        let feedback = parse_to_obj(object.get_str("feedback").unwrap_or(&PyValue::None));
        let empty = PyValue::List(Vec::new());
        let changes = match iterate(object.get_str("config_changes").unwrap_or(&empty)) {
            Ok(changes) => changes,
            Err(crash) => return ReferenceVerdict::crash(crash),
        };
        for change in changes.iter() {
            let PyValue::Dict(change) = change else {
                return ReferenceVerdict::crash(crash_attribute(change));
            };
            let delete = matches!(
                change.get_str("type"),
                Some(PyValue::Str(t)) if matches!(t.as_str(), Some("delete" | "removed"))
            );
            let path = change.get_str("path").unwrap_or(&PyValue::None);
            let value = change
                .get_str("value")
                .or_else(|| change.get_str("after"))
                .cloned()
                .unwrap_or(PyValue::None);
            if let Err(crash) = apply_change(&mut self.state, path, value, delete, undo) {
                return ReferenceVerdict::crash(crash);
            }
        }
        let cm = self.changes.iter().all(|truth| {
            let mut node = &self.state;
            for part in &truth.parts {
                match node {
                    PyValue::Dict(dict) => match dict.get(part) {
                        Some(next) => node = next,
                        None => return false,
                    },
                    _ => return false,
                }
            }
            py_eq(node, &truth.after)
        });
        ReferenceVerdict {
            outcome: ReferenceOutcome::Scored,
            fm: py_eq(&feedback, &self.feedback),
            cm,
            crash: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn truth() -> ReferenceTruth {
        ReferenceTruth::new(
            &json!({"a": {"x": 1}, "b": 2}),
            &json!({"a": {"x": 1}}),
            &json!("{'success': True}"),
        )
    }

    #[test]
    fn delete_must_leave_null_behind() {
        let mut t = truth();
        let correct = t.score_text(r#"{"feedback": "{'success': True}", "config_changes": [{"type": "delete", "path": "b"}]}"#);
        assert_eq!(correct.outcome, ReferenceOutcome::Scored);
        assert!(correct.fm && !correct.cm);
        let nulled = t.score_text(r#"{"feedback": "x", "config_changes": [{"type": "modify", "path": "b", "value": null}]}"#);
        assert!(!nulled.fm && nulled.cm);
    }

    #[test]
    fn crashes_and_failed_parses() {
        let mut t = truth();
        let cases = [
            (
                r#"{"config_changes": null}"#,
                "TypeError: 'NoneType' object is not iterable",
            ),
            (
                r#"{"config_changes": ["x"]}"#,
                "AttributeError: 'str' object has no attribute 'get'",
            ),
            (
                r#"{"config_changes": {"b": null}}"#,
                "AttributeError: 'str' object has no attribute 'get'",
            ),
            (
                "[1, 2]",
                "AttributeError: 'list' object has no attribute 'get'",
            ),
        ];
        for (text, message) in cases {
            let v = t.score_text(text);
            assert_eq!(v.outcome, ReferenceOutcome::Crash, "{text}");
            assert_eq!(v.crash.as_deref(), Some(message), "{text}");
        }
        assert_eq!(
            t.score_text("no json here").outcome,
            ReferenceOutcome::FailedParse
        );
        // "" and {} iterate zero times: a no-change prediction.
        for text in [r#"{"config_changes": ""}"#, r#"{"config_changes": {}}"#] {
            let v = t.score_text(text);
            assert_eq!(v.outcome, ReferenceOutcome::Scored);
            assert!(!v.cm);
        }
    }

    #[test]
    fn state_is_restored_after_each_sample() {
        let mut t = truth();
        let before = crate::python::repr(&t.state);
        t.score_text(r#"{"config_changes": [{"type": "add", "path": "z.y", "value": [1]}, {"path": "a.x", "value": 5}, {"type": "delete", "path": "b"}]}"#);
        assert_eq!(crate::python::repr(&t.state), before);
    }
}

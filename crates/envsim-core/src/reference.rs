//! Bug-compatible reproduction of the reference benchmark's Config Match, so published tables
//! can be reproduced next to envsim's strict metric.
//!
//! The reference applies each predicted change with `apply_change` and then checks, for every
//! ground-truth change (its Python-equality diff, dotted paths), that walking the predicted
//! state by `path.split(".")` through dicts finds a value Python-equal to the truth's `after`.
//! Consequences reproduced on purpose: spurious writes elsewhere pass; a removed key must be
//! *present with `null`* (a correct delete fails); keys containing dots are split; JSON Pointer
//! paths create odd keys instead of failing loudly.
//!
//! `apply_change`, as reconstructed: the path is a string split on `.`, a key list, or anything
//! else through `str()`; an empty path is ignored; missing intermediate dict keys are created as
//! `{}`; numeric parts index lists, padding short lists with `{}` (intermediate) or `None` (leaf);
//! `delete`/`removed` delete (lists pop in-range indices only); any other type, including a
//! missing one, sets the value (`value`, else `after`, else `None`).
//!
//! Where the Python code would raise (a change that is not a dict, a non-numeric part on a list,
//! a part on a scalar), the reference loses the sample from its denominator. envsim reports a
//! [`ReferenceApplyError`] instead and the sample counts as wrong.

use crate::apply::{Undo, UndoLog};
use crate::diff::Change;
use crate::equality::py_eq;
use crate::path::type_name;
use crate::pointer::JsonPointer;
use serde_json::Value;

/// A change the reference scorer would have crashed on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("change {index}: {message} (the reference scorer would raise here and drop the sample)")]
pub struct ReferenceApplyError {
    /// Index of the change entry.
    pub index: usize,
    /// What Python would have raised on.
    pub message: String,
}

/// Applies a change list with the reference's `apply_change` semantics, in place.
/// On error the state may be partly modified; undo the returned log either way.
pub fn reference_apply_in_place(
    state: &mut Value,
    changes: &Value,
    undo: &mut UndoLog,
) -> Result<(), ReferenceApplyError> {
    let entries = match changes {
        Value::Array(entries) => entries,
        other => {
            return Err(ReferenceApplyError {
                index: 0,
                message: format!("config_changes is {}, not a list", type_name(other)),
            })
        }
    };
    for (index, entry) in entries.iter().enumerate() {
        let fail = |message: String| ReferenceApplyError { index, message };
        let Value::Object(map) = entry else {
            return Err(fail(format!(
                "the change is {}, not a dict",
                type_name(entry)
            )));
        };
        let parts: Vec<Part> = match map.get("path") {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) if s.is_empty() => continue,
            Some(Value::String(s)) => s.split('.').map(|p| Part::Text(p.to_owned())).collect(),
            Some(Value::Array(items)) if items.is_empty() => continue,
            Some(Value::Array(items)) => items.iter().map(Part::from_value).collect(),
            Some(other) => python_str(other)
                .split('.')
                .map(|p| Part::Text(p.to_owned()))
                .collect(),
        };
        let delete = matches!(
            map.get("type"),
            Some(Value::String(t)) if t == "delete" || t == "removed"
        );
        let value = map
            .get("value")
            .or_else(|| map.get("after"))
            .cloned()
            .unwrap_or(Value::Null);
        apply_change(state, &parts, delete, value, undo).map_err(fail)?;
    }
    Ok(())
}

/// A path part: list paths may hold integers, which index lists directly.
enum Part {
    Text(String),
    Int(i64),
}

impl Part {
    fn from_value(v: &Value) -> Part {
        match v {
            Value::Number(n) if n.is_i64() => Part::Int(n.as_i64().unwrap_or_default()),
            Value::String(s) => Part::Text(s.clone()),
            other => Part::Text(python_str(other)),
        }
    }

    /// The dict key Python would use (integer keys serialise to their decimal text).
    fn key(&self) -> String {
        match self {
            Part::Text(s) => s.clone(),
            Part::Int(i) => i.to_string(),
        }
    }

    /// The list index, when the part is numeric (`str.isdigit()` or an int); negative ints and
    /// non-digit text are not indices.
    fn index(&self) -> Option<usize> {
        match self {
            Part::Int(i) => usize::try_from(*i).ok(),
            Part::Text(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
                s.parse().ok()
            }
            Part::Text(_) => None,
        }
    }
}

fn python_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => crate::pyrepr::to_python_repr(other),
    }
}

fn apply_change(
    state: &mut Value,
    parts: &[Part],
    delete: bool,
    value: Value,
    undo: &mut UndoLog,
) -> Result<(), String> {
    let Some((last, init)) = parts.split_last() else {
        return Ok(());
    };
    let mut at = JsonPointer::root();
    let mut node = state;
    for part in init {
        node = match node {
            Value::Array(items) => {
                let index = part
                    .index()
                    .ok_or_else(|| format!("list index {:?} is not a number", part.key()))?;
                while items.len() <= index {
                    undo.push(Undo::ListInserted {
                        parent: at.clone(),
                        index: items.len(),
                    });
                    items.push(Value::Object(Default::default()));
                }
                at.push(index.to_string());
                &mut items[index]
            }
            Value::Object(map) => {
                let key = part.key();
                if !map.contains_key(&key) {
                    undo.push(Undo::Object {
                        parent: at.clone(),
                        key: key.clone(),
                        old: None,
                        index: None,
                    });
                    map.insert(key.clone(), Value::Object(Default::default()));
                }
                at.push(key.clone());
                map.get_mut(&key).ok_or("key vanished")?
            }
            other => return Err(format!("cannot index into {} at '{at}'", type_name(other))),
        };
    }
    match node {
        Value::Array(items) => {
            let index = last
                .index()
                .ok_or_else(|| format!("list index {:?} is not a number", last.key()))?;
            if delete {
                if index < items.len() {
                    let old = items.remove(index);
                    undo.push(Undo::ListRemoved {
                        parent: at,
                        index,
                        old,
                    });
                }
                return Ok(());
            }
            while items.len() <= index {
                undo.push(Undo::ListInserted {
                    parent: at.clone(),
                    index: items.len(),
                });
                items.push(Value::Null);
            }
            let old = std::mem::replace(&mut items[index], value);
            undo.push(Undo::ListSet {
                parent: at,
                index,
                old,
            });
        }
        Value::Object(map) => {
            let key = last.key();
            if delete {
                if let Some(index) = map.keys().position(|k| *k == key) {
                    let old = map.shift_remove(&key);
                    undo.push(Undo::Object {
                        parent: at,
                        key,
                        old,
                        index: Some(index),
                    });
                }
                return Ok(());
            }
            let old = map.insert(key.clone(), value);
            undo.push(Undo::Object {
                parent: at,
                key,
                old,
                index: None,
            });
        }
        other => {
            return Err(format!(
                "cannot set a key on {} at '{at}'",
                type_name(other)
            ))
        }
    }
    Ok(())
}

/// One ground-truth change as the reference checks it: a dotted path and the value expected
/// there (`None` for a removal, which the reference checks as "present with `null`").
#[derive(Clone, Debug, PartialEq)]
pub struct TruthChange {
    /// The dot-joined path.
    pub dotted: String,
    /// The expected value.
    pub after: Option<Value>,
}

impl From<&Change<'_>> for TruthChange {
    fn from(change: &Change<'_>) -> Self {
        TruthChange {
            dotted: change.pointer.to_dotted(),
            after: change.after.cloned(),
        }
    }
}

/// The reference's CM check: every truth change's dotted path, walked through dicts only,
/// exists in `predicted` and holds a value Python-equal to the truth's `after` (`null` for a
/// removal).
pub fn reference_config_match(predicted: &Value, truth: &[TruthChange]) -> bool {
    truth.iter().all(|change| {
        let mut node = predicted;
        for part in change.dotted.split('.') {
            match node {
                Value::Object(map) => match map.get(part) {
                    Some(next) => node = next,
                    None => return false,
                },
                _ => return false,
            }
        }
        py_eq(node, change.after.as_ref().unwrap_or(&Value::Null))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::{reference_diff, ReferenceEquality};
    use serde_json::json;

    fn applied(state: Value, changes: Value) -> Result<Value, ReferenceApplyError> {
        let mut working = state.clone();
        let mut undo = UndoLog::default();
        let result = reference_apply_in_place(&mut working, &changes, &mut undo);
        let after = working.clone();
        undo.undo(&mut working);
        assert_eq!(working, state);
        result.map(|()| after)
    }

    #[test]
    fn apply_change_semantics() {
        let out = applied(
            json!({"a": {"l": [1]}}),
            json!([
                {"type": "modify", "path": "a.x.y", "value": 1},
                {"type": "whatever", "path": ["a", "l", 3], "after": 9},
                {"type": "add", "path": "a.l.5.k", "value": 2},
                {"type": "delete", "path": "a.l.0"},
                {"type": "delete", "path": "a.l.99"},
                {"type": "removed", "path": "a.nope"},
                {"path": "", "value": 1},
                {"type": null, "path": "/p/q", "value": 3},
                {"type": "add", "path": "n"},
            ]),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({
                "a": {"l": [null, null, 9, {}, {"k": 2}], "x": {"y": 1}},
                "/p/q": 3,
                "n": null
            })
        );
    }

    #[test]
    fn crashes_are_errors() {
        assert!(applied(json!({}), json!(["x"])).is_err());
        assert!(applied(json!({"l": []}), json!([{"path": "l.x", "value": 1}])).is_err());
        assert!(applied(json!({"s": 5}), json!([{"path": "s.t", "value": 1}])).is_err());
        assert!(applied(json!({}), json!("nope")).is_err());
        assert!(applied(json!({}), json!(null)).is_err());
    }

    #[test]
    fn delete_must_leave_null_behind() {
        let before = json!({"a": {"x": 1}, "b": 2});
        let after = json!({"a": {"x": 1}});
        let truth: Vec<TruthChange> = reference_diff(&before, &after, ReferenceEquality::Python)
            .iter()
            .map(TruthChange::from)
            .collect();
        let correct = applied(before.clone(), json!([{"type": "delete", "path": "b"}])).unwrap();
        assert_eq!(correct, after);
        assert!(!reference_config_match(&correct, &truth));
        let nulled = applied(
            before,
            json!([{"type": "modify", "path": "b", "value": null}]),
        )
        .unwrap();
        assert!(reference_config_match(&nulled, &truth));
    }
}

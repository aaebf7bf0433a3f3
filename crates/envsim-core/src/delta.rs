//! State deltas: the change lists a simulator predicts, read from model output.
//!
//! Two entry shapes are accepted in one list:
//! - envsim / reference vocabulary: `{"type": "add"|"modify"|"delete"|"set", "path": …,
//!   "value": …}`, with the reference's `added`/`modified`/`removed` and `before`/`after`
//!   (`value` wins over `after` when both are present), and common synonyms
//!   (`create`, `insert`, `update`, `replace`, `change`, `remove`, …);
//! - RFC 6902 JSON Patch: `{"op": "add"|"remove"|"replace"|"move"|"copy"|"test", "path": …,
//!   "from": …, "value": …}`.
//!
//! Reading never fails as a whole: an entry that cannot be understood becomes a located
//! [`Problem`] and the rest of the list is still read, so one bad entry does not hide the others.

use crate::path::{type_name, RawPath};
use crate::problem::{Problem, ProblemKind};
use serde_json::Value;

/// What an operation does to its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// Create (or, for an existing object key, overwrite); inserts into lists.
    Add,
    /// Replace an existing value (a missing object key is added, with a warning).
    Modify,
    /// Write whether or not the target exists; never inserts into lists.
    Set,
    /// Remove the target, which must exist.
    Delete,
    /// JSON Patch `move`: remove at `from`, add at `path`.
    Move,
    /// JSON Patch `copy`: add a copy of `from` at `path`.
    Copy,
    /// JSON Patch `test`: the target must equal `value`.
    Test,
}

/// One operation of a delta, with its path not yet resolved against a state.
#[derive(Clone, Debug, PartialEq)]
pub struct DeltaOp {
    /// What to do.
    pub kind: OpKind,
    /// Where.
    pub path: RawPath,
    /// Source of `move`/`copy`.
    pub from: Option<RawPath>,
    /// The new value (absent for deletes).
    pub value: Option<Value>,
}

/// A parsed delta: its operations in order, plus problems met while reading the entries.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Delta {
    /// Operations that were understood, in model order, each with its entry index.
    pub ops: Vec<(usize, DeltaOp)>,
    /// Entries that could not be understood (always error severity).
    pub problems: Vec<Problem>,
}

impl Delta {
    /// Builds a delta from already-made operations (numbered in order).
    pub fn from_ops(ops: impl IntoIterator<Item = DeltaOp>) -> Self {
        Delta {
            ops: ops.into_iter().enumerate().collect(),
            problems: Vec::new(),
        }
    }

    /// Reads a change list (the value of `config_changes` in model output).
    ///
    /// Anything but a list (including `null`) is a [`ProblemKind::MalformedDelta`].
    pub fn from_value(changes: &Value) -> Delta {
        let mut delta = Delta::default();
        let Value::Array(entries) = changes else {
            delta.problems.push(Problem::error(
                None,
                None,
                ProblemKind::MalformedDelta,
                format!(
                    "the change list must be a list, found {}",
                    type_name(changes)
                ),
            ));
            return delta;
        };
        for (index, entry) in entries.iter().enumerate() {
            match read_entry(entry) {
                Ok(op) => delta.ops.push((index, op)),
                Err((path, message)) => delta.problems.push(Problem::error(
                    Some(index),
                    path,
                    ProblemKind::MalformedOp,
                    message,
                )),
            }
        }
        delta
    }
}

type EntryError = (Option<String>, String);

fn read_entry(entry: &Value) -> Result<DeltaOp, EntryError> {
    let Value::Object(map) = entry else {
        return Err((
            None,
            format!("a change must be an object, found {}", type_name(entry)),
        ));
    };
    let path_value = map.get("path").unwrap_or(&Value::Null);
    let shown = path_value.as_str().map(str::to_owned);
    let path =
        RawPath::from_value(path_value).map_err(|e| (shown.clone(), format!("path: {e}")))?;
    let (kind, patch_style) = match (map.get("op"), map.get("type")) {
        (Some(Value::String(op)), _) => (
            patch_kind(op)
                .ok_or_else(|| (shown.clone(), format!("unknown JSON Patch op {op:?}")))?,
            true,
        ),
        (Some(other), _) => {
            return Err((
                shown,
                format!("op must be a string, found {}", type_name(other)),
            ))
        }
        (None, Some(Value::String(t))) => (
            vocabulary_kind(t).ok_or_else(|| {
                (
                    shown.clone(),
                    format!("unknown change type {t:?} (expected add, modify or delete)"),
                )
            })?,
            false,
        ),
        (None, Some(Value::Null) | None) => {
            return Err((
                shown,
                "the change has no \"type\" (add, modify or delete)".to_owned(),
            ))
        }
        (None, Some(other)) => {
            return Err((
                shown,
                format!("type must be a string, found {}", type_name(other)),
            ))
        }
    };
    let value = if patch_style {
        map.get("value").cloned()
    } else {
        map.get("value").or_else(|| map.get("after")).cloned()
    };
    let needs_value = matches!(
        kind,
        OpKind::Add | OpKind::Modify | OpKind::Set | OpKind::Test
    );
    if needs_value && value.is_none() {
        return Err((shown, "the change has no \"value\"".to_owned()));
    }
    let from = if matches!(kind, OpKind::Move | OpKind::Copy) {
        let raw = map.get("from").unwrap_or(&Value::Null);
        Some(RawPath::from_value(raw).map_err(|e| (shown.clone(), format!("from: {e}")))?)
    } else {
        None
    };
    Ok(DeltaOp {
        kind,
        path,
        from,
        value: if kind == OpKind::Delete { None } else { value },
    })
}

fn patch_kind(op: &str) -> Option<OpKind> {
    Some(match op {
        "add" => OpKind::Add,
        "remove" => OpKind::Delete,
        "replace" => OpKind::Modify,
        "move" => OpKind::Move,
        "copy" => OpKind::Copy,
        "test" => OpKind::Test,
        _ => return None,
    })
}

/// Maps the change-type words models use onto operations (case-insensitive).
pub fn vocabulary_kind(word: &str) -> Option<OpKind> {
    Some(match word.trim().to_ascii_lowercase().as_str() {
        "add" | "added" | "create" | "created" | "insert" | "inserted" | "new" => OpKind::Add,
        "modify" | "modified" | "update" | "updated" | "replace" | "replaced" | "change"
        | "changed" | "edit" | "edited" => OpKind::Modify,
        "set" => OpKind::Set,
        "delete" | "deleted" | "remove" | "removed" | "del" => OpKind::Delete,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_both_vocabularies_and_patch() {
        let delta = Delta::from_value(&json!([
            {"type": "add", "path": "a.b", "value": 1},
            {"type": "modified", "path": ["x"], "before": 1, "after": 2},
            {"type": "removed", "path": "/y", "before": 3, "after": null},
            {"op": "replace", "path": "/z", "value": true},
            {"op": "move", "from": "/m", "path": "/n"},
            {"type": "Update", "path": "q", "value": 5, "after": 6},
        ]));
        assert!(delta.problems.is_empty(), "{:?}", delta.problems);
        let kinds: Vec<OpKind> = delta.ops.iter().map(|(_, op)| op.kind).collect();
        assert_eq!(
            kinds,
            [
                OpKind::Add,
                OpKind::Modify,
                OpKind::Delete,
                OpKind::Modify,
                OpKind::Move,
                OpKind::Modify
            ]
        );
        assert_eq!(delta.ops[1].1.value, Some(json!(2)));
        assert_eq!(delta.ops[2].1.value, None);
        assert_eq!(
            delta.ops[5].1.value,
            Some(json!(5)),
            "value wins over after"
        );
        assert_eq!(delta.ops[4].1.from, Some(RawPath::Pointer("/m".into())));
    }

    #[test]
    fn bad_entries_become_located_problems() {
        let delta = Delta::from_value(&json!([
            "add a.b",
            {"type": "add", "path": "ok", "value": 1},
            {"type": "frobnicate", "path": "a"},
            {"type": "modify", "path": "a"},
            {"path": "a", "value": 1},
            {"type": "add", "value": 1},
            {"op": "move", "path": "/a"},
        ]));
        assert_eq!(delta.ops.len(), 1);
        assert_eq!(delta.ops[0].0, 1);
        let located: Vec<Option<usize>> = delta.problems.iter().map(|p| p.op).collect();
        assert_eq!(
            located,
            [Some(0), Some(2), Some(3), Some(4), Some(5), Some(6)]
        );
        assert!(delta.problems[1].message.contains("frobnicate"));
        assert!(delta.problems[2].message.contains("no \"value\""));
        assert!(delta.problems[4].message.contains("empty path"));
    }

    #[test]
    fn non_list_change_lists_are_malformed() {
        for bad in [json!(null), json!("none"), json!({"a": 1})] {
            let delta = Delta::from_value(&bad);
            assert_eq!(delta.problems.len(), 1);
            assert_eq!(delta.problems[0].kind, ProblemKind::MalformedDelta);
        }
    }
}

//! Applying a [`Delta`] to a state, strictly, with located problems and exact undo.
//!
//! Scoring needs "the state after the predicted delta" for states of up to hundreds of KB, once
//! per prediction. Cloning the whole state each time would dominate scoring time, so the delta is
//! applied **in place** while an [`UndoLog`] records how to restore every touched location; the
//! caller inspects the result and then undoes it. [`apply`] is the simple cloning form.
//!
//! Semantics per operation (after resolving its path against the current state):
//! - the parent must exist and be an object or a list, else `missing_parent` /
//!   `parent_not_container`;
//! - objects: `add`/`set` write the key, `modify` of a missing key writes it with a
//!   `modify_absent` warning, `delete` of a missing key is `delete_absent`;
//! - lists: `add` inserts at an index `0..=len` (or `-` to append), `set` replaces or appends at
//!   `len`, `modify`/`delete` need an existing index, else `bad_list_index`;
//! - `move`, `copy`, `test` follow RFC 6902.
//!
//! An operation with an error is skipped; the rest still apply.

use crate::delta::{Delta, DeltaOp, OpKind};
use crate::path::RawPath;
use crate::pointer::{parse_index, JsonPointer};
use crate::problem::{Problem, ProblemKind};
use serde_json::Value;

/// One reversible edit.
#[derive(Clone, Debug)]
pub(crate) enum Undo {
    /// Object key written or removed: restore `old` (at `index` if it was removed).
    Object {
        parent: JsonPointer,
        key: String,
        old: Option<Value>,
        index: Option<usize>,
    },
    /// List element replaced.
    ListSet {
        parent: JsonPointer,
        index: usize,
        old: Value,
    },
    /// List element inserted.
    ListInserted { parent: JsonPointer, index: usize },
    /// List element removed.
    ListRemoved {
        parent: JsonPointer,
        index: usize,
        old: Value,
    },
    /// Whole state replaced.
    Root { old: Value },
}

/// Edits made by an in-place application, newest last, with the locations they touched.
#[derive(Clone, Debug, Default)]
pub struct UndoLog {
    edits: Vec<Undo>,
}

impl UndoLog {
    pub(crate) fn push(&mut self, edit: Undo) {
        self.edits.push(edit);
    }

    /// The locations whose content may differ from the original state: written keys and
    /// elements, and whole lists whose indices shifted.
    pub fn touched(&self) -> Vec<JsonPointer> {
        self.edits
            .iter()
            .map(|edit| match edit {
                Undo::Object { parent, key, .. } => parent.child(key.clone()),
                Undo::ListSet { parent, index, .. } => parent.child(index.to_string()),
                Undo::ListInserted { parent, .. } | Undo::ListRemoved { parent, .. } => {
                    parent.clone()
                }
                Undo::Root { .. } => JsonPointer::root(),
            })
            .collect()
    }

    /// Restores `state` to what it was before the logged edits.
    pub fn undo(self, state: &mut Value) {
        for edit in self.edits.into_iter().rev() {
            match edit {
                Undo::Root { old } => *state = old,
                Undo::Object {
                    parent,
                    key,
                    old,
                    index,
                } => {
                    if let Some(Value::Object(map)) = parent.get_mut(state) {
                        match (old, index) {
                            (Some(old), Some(index)) => {
                                map.shift_insert(index.min(map.len()), key, old);
                            }
                            (Some(old), None) => {
                                map.insert(key, old);
                            }
                            (None, _) => {
                                map.shift_remove(&key);
                            }
                        }
                    }
                }
                Undo::ListSet { parent, index, old } => {
                    if let Some(slot) = parent.child(index.to_string()).get_mut(state) {
                        *slot = old;
                    }
                }
                Undo::ListInserted { parent, index } => {
                    if let Some(Value::Array(items)) = parent.get_mut(state) {
                        if index < items.len() {
                            items.remove(index);
                        }
                    }
                }
                Undo::ListRemoved { parent, index, old } => {
                    if let Some(Value::Array(items)) = parent.get_mut(state) {
                        items.insert(index.min(items.len()), old);
                    }
                }
            }
        }
    }
}

/// The outcome of an in-place application.
#[derive(Debug, Default)]
pub struct Applied {
    /// Problems of reading and applying, in change order.
    pub problems: Vec<Problem>,
    /// How to restore the original state.
    pub undo: UndoLog,
}

impl Applied {
    /// True when no operation failed (warnings allowed).
    pub fn is_clean(&self) -> bool {
        !self.problems.iter().any(Problem::is_error)
    }
}

/// Applies `delta` to a copy of `state`; returns the new state and the problems.
pub fn apply(state: &Value, delta: &Delta) -> (Value, Vec<Problem>) {
    let mut next = state.clone();
    let applied = apply_in_place(&mut next, delta);
    (next, applied.problems)
}

/// Applies `delta` to `state` in place. Call [`UndoLog::undo`] to restore it.
pub fn apply_in_place(state: &mut Value, delta: &Delta) -> Applied {
    let mut applied = Applied {
        problems: delta.problems.clone(),
        undo: UndoLog::default(),
    };
    for (index, op) in &delta.ops {
        if let Err((kind, message)) =
            apply_op(state, op, &mut applied.undo, &mut applied.problems, *index)
        {
            applied.problems.push(Problem::error(
                Some(*index),
                Some(op.path.display()),
                kind,
                message,
            ));
        }
    }
    // Problems of reading come first in `delta.problems`; keep all of them in change order.
    applied.problems.sort_by_key(|p| p.op);
    applied
}

type OpError = (ProblemKind, String);

fn resolve(state: &Value, path: &RawPath) -> Result<JsonPointer, OpError> {
    path.resolve(state)
        .map_err(|e| (ProblemKind::BadPath, e.to_string()))
}

fn apply_op(
    state: &mut Value,
    op: &DeltaOp,
    undo: &mut UndoLog,
    problems: &mut Vec<Problem>,
    index: usize,
) -> Result<(), OpError> {
    let target = resolve(state, &op.path)?;
    match op.kind {
        OpKind::Add | OpKind::Modify | OpKind::Set => {
            let value = op.value.clone().unwrap_or(Value::Null);
            let warned = write(state, &target, value, op.kind, undo)?;
            if warned {
                problems.push(Problem::warning(
                    Some(index),
                    Some(op.path.display()),
                    ProblemKind::ModifyAbsent,
                    format!("modify of '{target}', which does not exist; applied as an add"),
                ));
            }
            Ok(())
        }
        OpKind::Delete => remove(state, &target, undo).map(drop),
        OpKind::Test => {
            let expected = op.value.as_ref().unwrap_or(&Value::Null);
            match target.get(state) {
                Some(actual) if actual == expected => Ok(()),
                Some(actual) => Err((
                    ProblemKind::TestFailed,
                    format!("test of '{target}': expected {expected}, found {actual}"),
                )),
                None => Err((
                    ProblemKind::TestFailed,
                    format!("test of '{target}': nothing there"),
                )),
            }
        }
        OpKind::Move | OpKind::Copy => {
            let from_raw = op.from.as_ref().ok_or_else(|| {
                (
                    ProblemKind::MalformedOp,
                    "move/copy without \"from\"".to_owned(),
                )
            })?;
            let from = resolve(state, from_raw)?;
            if op.kind == OpKind::Move && target.starts_with(&from) && target != from {
                return Err((
                    ProblemKind::MoveIntoSelf,
                    format!("cannot move '{from}' into its own child '{target}'"),
                ));
            }
            let value = if op.kind == OpKind::Move {
                if target == from {
                    return Ok(());
                }
                remove(state, &from, undo)?
            } else {
                from.get(state).cloned().ok_or_else(|| {
                    (
                        ProblemKind::DeleteAbsent,
                        format!("copy source '{from}' does not exist"),
                    )
                })?
            };
            // The target is resolved before the source is removed, as RFC 6902 evaluates
            // `path` against the document after removal; re-resolve to follow that rule.
            let target = resolve(state, &op.path)?;
            write(state, &target, value, OpKind::Add, undo).map(drop)
        }
    }
}

/// Writes `value` at `target`; returns true when a `modify` hit a missing object key.
pub(crate) fn write(
    state: &mut Value,
    target: &JsonPointer,
    value: Value,
    kind: OpKind,
    undo: &mut UndoLog,
) -> Result<bool, OpError> {
    let Some((parent_ptr, key)) = target.split_last() else {
        let old = std::mem::replace(state, value);
        undo.push(Undo::Root { old });
        return Ok(false);
    };
    let parent = container(state, &parent_ptr, target)?;
    match parent {
        Value::Object(map) => {
            let existed = map.contains_key(key);
            let old = map.insert(key.to_owned(), value);
            undo.push(Undo::Object {
                parent: parent_ptr,
                key: key.to_owned(),
                old,
                index: None,
            });
            Ok(kind == OpKind::Modify && !existed)
        }
        Value::Array(items) => {
            let len = items.len();
            let index = if key == "-" {
                Some(len)
            } else {
                parse_index(key)
            };
            match (kind, index) {
                (OpKind::Add, Some(i)) if i <= len => {
                    items.insert(i, value);
                    undo.push(Undo::ListInserted {
                        parent: parent_ptr,
                        index: i,
                    });
                }
                (OpKind::Set, Some(i)) if i == len => {
                    items.push(value);
                    undo.push(Undo::ListInserted {
                        parent: parent_ptr,
                        index: i,
                    });
                }
                (OpKind::Modify | OpKind::Set, Some(i)) if i < len => {
                    let old = std::mem::replace(&mut items[i], value);
                    undo.push(Undo::ListSet {
                        parent: parent_ptr,
                        index: i,
                        old,
                    });
                }
                _ => return Err(bad_index(target, key, len)),
            }
            Ok(false)
        }
        _ => unreachable_container(target),
    }
}

/// Removes the value at `target` and returns it.
pub(crate) fn remove(
    state: &mut Value,
    target: &JsonPointer,
    undo: &mut UndoLog,
) -> Result<Value, OpError> {
    let Some((parent_ptr, key)) = target.split_last() else {
        return Err((
            ProblemKind::RootTarget,
            "cannot delete the whole state".to_owned(),
        ));
    };
    let parent = container(state, &parent_ptr, target)?;
    match parent {
        Value::Object(map) => {
            let index = map.keys().position(|k| k == key);
            let old = map.shift_remove(key).ok_or_else(|| {
                (
                    ProblemKind::DeleteAbsent,
                    format!("'{target}' does not exist"),
                )
            })?;
            undo.push(Undo::Object {
                parent: parent_ptr,
                key: key.to_owned(),
                old: Some(old.clone()),
                index,
            });
            Ok(old)
        }
        Value::Array(items) => match parse_index(key) {
            Some(i) if i < items.len() => {
                let old = items.remove(i);
                undo.push(Undo::ListRemoved {
                    parent: parent_ptr,
                    index: i,
                    old: old.clone(),
                });
                Ok(old)
            }
            _ => Err(bad_index(target, key, items.len())),
        },
        _ => unreachable_container(target),
    }
}

fn container<'v>(
    state: &'v mut Value,
    parent: &JsonPointer,
    target: &JsonPointer,
) -> Result<&'v mut Value, OpError> {
    match parent.get_mut(state) {
        None => Err((
            ProblemKind::MissingParent,
            format!("parent '{parent}' of '{target}' does not exist"),
        )),
        Some(node @ (Value::Object(_) | Value::Array(_))) => Ok(node),
        Some(_) => Err((
            ProblemKind::ParentNotContainer,
            format!("parent '{parent}' of '{target}' is not an object or a list"),
        )),
    }
}

fn bad_index(target: &JsonPointer, key: &str, len: usize) -> OpError {
    (
        ProblemKind::BadListIndex,
        format!("'{key}' is not a usable index for '{target}' (list length {len})"),
    )
}

fn unreachable_container<T>(target: &JsonPointer) -> Result<T, OpError> {
    // `container` only returns objects and lists; kept as an error, not a panic.
    Err((
        ProblemKind::ParentNotContainer,
        format!("parent of '{target}' is not an object or a list"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// (change index, problem code, is error)
    type Located = (Option<usize>, &'static str, bool);

    fn run(state: Value, changes: Value) -> (Value, Vec<Located>) {
        let delta = Delta::from_value(&changes);
        let mut working = state.clone();
        let applied = apply_in_place(&mut working, &delta);
        let problems = applied
            .problems
            .iter()
            .map(|p| (p.op, p.kind.code(), p.is_error()))
            .collect();
        let after = working.clone();
        applied.undo.undo(&mut working);
        assert_eq!(working, state, "undo must restore the original");
        assert_eq!(
            serde_json::to_string(&working).unwrap(),
            serde_json::to_string(&state).unwrap(),
            "undo must restore key order too"
        );
        (after, problems)
    }

    #[test]
    fn object_edits() {
        let (after, problems) = run(
            json!({"a": {"x": 1, "y": 2, "z": 3}}),
            json!([
                {"type": "modify", "path": "a.x", "value": 10},
                {"type": "delete", "path": "/a/y"},
                {"type": "add", "path": ["a", "w"], "value": {"k": []}},
            ]),
        );
        assert_eq!(after, json!({"a": {"x": 10, "z": 3, "w": {"k": []}}}));
        assert!(problems.is_empty());
    }

    #[test]
    fn list_edits_follow_rfc6902() {
        let (after, problems) = run(
            json!({"l": [1, 2, 3]}),
            json!([
                {"op": "add", "path": "/l/0", "value": 0},
                {"op": "remove", "path": "/l/3"},
                {"op": "add", "path": "/l/-", "value": 9},
                {"type": "modify", "path": "l.1", "value": 7},
                {"type": "set", "path": "/l/4", "value": 8},
            ]),
        );
        assert_eq!(after, json!({"l": [0, 7, 2, 9, 8]}));
        assert!(problems.is_empty());
    }

    #[test]
    fn located_problems() {
        let (after, problems) = run(
            json!({"a": {"x": 1}, "l": [1], "s": 5}),
            json!([
                {"type": "delete", "path": "a.nope"},
                {"type": "add", "path": "/b/c", "value": 1},
                {"type": "add", "path": "/s/t", "value": 1},
                {"type": "modify", "path": "/l/3", "value": 1},
                {"type": "delete", "path": "/l/x"},
                {"type": "modify", "path": "/a/new", "value": 2},
                {"op": "test", "path": "/a/x", "value": 2},
                {"op": "move", "from": "/a", "path": "/a/x/deeper"},
                {"type": "delete", "path": "/"},
            ]),
        );
        assert_eq!(
            problems,
            vec![
                (Some(0), "delete_absent", true),
                (Some(1), "missing_parent", true),
                (Some(2), "parent_not_container", true),
                (Some(3), "bad_list_index", true),
                (Some(4), "bad_list_index", true),
                (Some(5), "modify_absent", false),
                (Some(6), "test_failed", true),
                (Some(7), "move_into_self", true),
                (Some(8), "delete_absent", true),
            ]
        );
        assert_eq!(after, json!({"a": {"x": 1, "new": 2}, "l": [1], "s": 5}));
    }

    #[test]
    fn move_copy_and_root() {
        let (after, _) = run(
            json!({"a": {"x": 1}, "b": {}}),
            json!([
                {"op": "move", "from": "/a/x", "path": "/b/x"},
                {"op": "copy", "from": "/b", "path": "/c"},
            ]),
        );
        assert_eq!(after, json!({"a": {}, "b": {"x": 1}, "c": {"x": 1}}));
        let (after, problems) = run(
            json!({"a": 1}),
            json!([{"op": "replace", "path": "", "value": [1]}]),
        );
        assert_eq!(problems, vec![(Some(0), "malformed_op", true)]);
        assert_eq!(after, json!({"a": 1}));
        let (after, _) = run(
            json!({"a": 1}),
            json!([{"op": "replace", "path": ["a"], "value": [1]}]),
        );
        assert_eq!(after, json!({"a": [1]}));
    }

    #[test]
    fn touched_locations() {
        let mut state = json!({"a": {"x": 1}, "l": [1, 2]});
        let delta = Delta::from_value(&json!([
            {"type": "modify", "path": "/a/x", "value": 2},
            {"type": "modify", "path": "/l/0", "value": 5},
            {"type": "delete", "path": "/l/1"},
        ]));
        let applied = apply_in_place(&mut state, &delta);
        let touched: Vec<String> = applied
            .undo
            .touched()
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(touched, ["/a/x", "/l/0", "/l"]);
    }
}

//! The reference evaluator's `apply_change`, on a [`PyValue`] state, in
//! place, with an exact undo log.
//!
//! For one change `(path, value, type)`:
//!
//! - A falsy path (`None`, `""`, `[]`, `0`, `{}`, ...) is skipped. A list path
//!   is used element by element, as the objects they are (an integer stays
//!   an integer, so it never finds the string key `"2"`); a string is split
//!   on `.`; anything else becomes the one part `str(path)`.
//! - Every part but the last walks down: in a dict, a missing key is created
//!   as `{}`; in a list, the part goes through `int()` (a part `int()`
//!   rejects skips the whole change), the list is padded with `{}` up to that
//!   index, and negative indices count from the end; below anything else
//!   (a string, a number, a tuple) the change is skipped.
//! - The last part: `delete`/`removed` deletes the key (a missing key is
//!   fine) or pops the list index if `0 <= i < len`; any other type sets the
//!   value, padding a list with `None`.
//!
//! Where Python raises instead of skipping, the reference loses the whole
//! sample ([`Crash`]): an unhashable part (`["x"]`, `{}`) used on a dict, a
//! negative index beyond the start of a list. A huge index would make Python
//! pad a list until memory runs out; envsim stops at [`MAX_PADDING`]
//! elements and reports the crash Python would meet.

use crate::python::int::{int_of, PyInt};
use crate::python::value::{PyDict, PyKey};
use crate::python::{str_of, PyStr, PyValue};

/// The most elements one change may append to a list when padding it. The
/// reference appends one object per missing index; far beyond this it would
/// exhaust memory (`MemoryError`) or run for minutes, so envsim reports a
/// crash instead of allocating.
pub const MAX_PADDING: usize = 1 << 20;

/// Python raised while applying a change: the reference drops the sample.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Crash(pub String);

/// What to undo, innermost state first. Containers are located by the
/// positions of the entries leading to them (dict entry index or list
/// index), which stay valid because entries are undone in reverse order.
#[derive(Debug)]
enum Undo {
    /// A new key was appended to the dict.
    DictInserted { at: Vec<usize> },
    /// The value at `index` was replaced.
    DictSet {
        at: Vec<usize>,
        index: usize,
        old: PyValue,
    },
    /// The entry at `index` was swap-removed.
    DictRemoved {
        at: Vec<usize>,
        index: usize,
        key: PyKey,
        old: PyValue,
    },
    /// The list was padded from `len` elements.
    ListPadded { at: Vec<usize>, len: usize },
    /// The element at `index` was replaced.
    ListSet {
        at: Vec<usize>,
        index: usize,
        old: PyValue,
    },
    /// The element at `index` was popped.
    ListPopped {
        at: Vec<usize>,
        index: usize,
        old: PyValue,
    },
}

/// Undo log of [`apply_change`].
#[derive(Debug, Default)]
pub struct UndoLog(Vec<Undo>);

fn node_at<'a>(root: &'a mut PyValue, at: &[usize]) -> Option<&'a mut PyValue> {
    let mut node = root;
    for &index in at {
        node = match node {
            PyValue::Dict(dict) => dict.get_index_mut(index)?,
            PyValue::List(items) => items.get_mut(index)?,
            _ => return None,
        };
    }
    Some(node)
}

impl UndoLog {
    /// Restores `root` to the state before the logged changes.
    pub fn undo(&mut self, root: &mut PyValue) {
        while let Some(entry) = self.0.pop() {
            let at = match &entry {
                Undo::DictInserted { at }
                | Undo::DictSet { at, .. }
                | Undo::DictRemoved { at, .. }
                | Undo::ListPadded { at, .. }
                | Undo::ListSet { at, .. }
                | Undo::ListPopped { at, .. } => at.clone(),
            };
            let Some(node) = node_at(root, &at) else {
                continue;
            };
            match (entry, node) {
                (Undo::DictInserted { .. }, PyValue::Dict(dict)) => {
                    dict.pop();
                }
                (Undo::DictSet { index, old, .. }, PyValue::Dict(dict)) => {
                    if let Some(slot) = dict.get_index_mut(index) {
                        *slot = old;
                    }
                }
                (
                    Undo::DictRemoved {
                        index, key, old, ..
                    },
                    PyValue::Dict(dict),
                ) => {
                    dict.restore_swapped(index, key, old);
                }
                (Undo::ListPadded { len, .. }, PyValue::List(items)) => items.truncate(len),
                (Undo::ListSet { index, old, .. }, PyValue::List(items)) => {
                    if let Some(slot) = items.get_mut(index) {
                        *slot = old;
                    }
                }
                (Undo::ListPopped { index, old, .. }, PyValue::List(items))
                    if index <= items.len() =>
                {
                    items.insert(index, old);
                }
                _ => {}
            }
        }
    }
}

/// Splits a change's `path` the way the reference does; `None` when the path
/// is falsy and the change is skipped.
fn path_parts(path: &PyValue) -> Option<Vec<PyValue>> {
    if !path.is_truthy() {
        return None;
    }
    Some(match path {
        PyValue::List(items) => items.clone(),
        PyValue::Str(s) => split_dots(s),
        other => vec![PyValue::Str(str_of(other))],
    })
}

/// `s.split('.')`.
pub(crate) fn split_dots(s: &PyStr) -> Vec<PyValue> {
    s.as_bytes()
        .split(|&b| b == b'.')
        .map(|part| PyValue::Str(PyStr::from_wtf(part.to_vec())))
        .collect()
}

fn crash_unhashable(part: &PyValue) -> Crash {
    Crash(format!(
        "TypeError: unhashable type: '{}'",
        part.type_name()
    ))
}

/// Resolves a Python index into a list of `len` after padding; `None` when
/// Python raises `IndexError`.
fn resolve_index(index: &PyInt, len: usize) -> Option<usize> {
    let i = index.as_i64()?;
    if i >= 0 {
        usize::try_from(i).ok().filter(|&u| u < len)
    } else {
        let back = usize::try_from(i.unsigned_abs()).ok()?;
        len.checked_sub(back)
    }
}

/// Pads `items` so that `index` exists (`while idx >= len(cur): append`).
fn pad(
    items: &mut Vec<PyValue>,
    index: &PyInt,
    filler: fn() -> PyValue,
    at: &[usize],
    undo: &mut UndoLog,
) -> Result<(), Crash> {
    if index.is_negative() {
        return Ok(());
    }
    let wanted = index
        .as_i64()
        .and_then(|i| usize::try_from(i).ok())
        .and_then(|i| i.checked_add(1))
        .filter(|&n| n.saturating_sub(items.len()) <= MAX_PADDING)
        .ok_or_else(|| {
            Crash(format!(
                "MemoryError: the reference would pad a list of {} elements up to index {index}",
                items.len()
            ))
        })?;
    if wanted > items.len() {
        undo.0.push(Undo::ListPadded {
            at: at.to_vec(),
            len: items.len(),
        });
        items.resize_with(wanted, filler);
    }
    Ok(())
}

fn empty_dict() -> PyValue {
    PyValue::Dict(Box::new(PyDict::new()))
}

fn index_error() -> Crash {
    Crash("IndexError: list index out of range".into())
}

/// Applies one change with the reference's `apply_change`, in place. `Ok`
/// also when the reference returns `False` and skips the change.
///
/// # Errors
///
/// [`Crash`] where Python raises; the state may then be partly modified, so
/// undo the log either way.
pub fn apply_change(
    root: &mut PyValue,
    path: &PyValue,
    value: PyValue,
    delete: bool,
    undo: &mut UndoLog,
) -> Result<(), Crash> {
    let Some(parts) = path_parts(path) else {
        return Ok(());
    };
    let Some((last, init)) = parts.split_last() else {
        return Ok(());
    };
    let mut at: Vec<usize> = Vec::new();
    let mut node = root;
    for part in init {
        node = match node {
            PyValue::Dict(dict) => {
                let index = match dict.lookup(part).map_err(|_| crash_unhashable(part))? {
                    Some(index) => index,
                    None => {
                        dict.insert(part.clone(), empty_dict())
                            .map_err(|_| crash_unhashable(part))?;
                        undo.0.push(Undo::DictInserted { at: at.clone() });
                        dict.len() - 1
                    }
                };
                at.push(index);
                match dict.get_index_mut(index) {
                    Some(next) => next,
                    None => return Ok(()),
                }
            }
            PyValue::List(items) => {
                let Some(index) = int_of(part) else {
                    return Ok(());
                };
                pad(items, &index, empty_dict, &at, undo)?;
                let position = resolve_index(&index, items.len()).ok_or_else(index_error)?;
                at.push(position);
                match items.get_mut(position) {
                    Some(next) => next,
                    None => return Ok(()),
                }
            }
            _ => return Ok(()),
        };
    }
    match node {
        PyValue::Dict(dict) => {
            let found = dict.lookup(last).map_err(|_| crash_unhashable(last))?;
            match (delete, found) {
                (true, Some(index)) => {
                    if let Some((key, old)) = dict.swap_remove_index(index) {
                        undo.0.push(Undo::DictRemoved {
                            at,
                            index,
                            key,
                            old,
                        });
                    }
                }
                (true, None) => {}
                (false, Some(index)) => {
                    if let Some(slot) = dict.get_index_mut(index) {
                        let old = std::mem::replace(slot, value);
                        undo.0.push(Undo::DictSet { at, index, old });
                    }
                }
                (false, None) => {
                    dict.insert(last.clone(), value)
                        .map_err(|_| crash_unhashable(last))?;
                    undo.0.push(Undo::DictInserted { at });
                }
            }
        }
        PyValue::List(items) => {
            let Some(index) = int_of(last) else {
                return Ok(());
            };
            if delete {
                if let Some(position) = index
                    .as_i64()
                    .and_then(|i| usize::try_from(i).ok())
                    .filter(|&i| i < items.len())
                {
                    let old = items.remove(position);
                    undo.0.push(Undo::ListPopped {
                        at,
                        index: position,
                        old,
                    });
                }
                return Ok(());
            }
            pad(items, &index, || PyValue::None, &at, undo)?;
            let position = resolve_index(&index, items.len()).ok_or_else(index_error)?;
            if let Some(slot) = items.get_mut(position) {
                let old = std::mem::replace(slot, value);
                undo.0.push(Undo::ListSet {
                    at,
                    index: position,
                    old,
                });
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::repr;
    use serde_json::json;

    fn run(
        state: serde_json::Value,
        changes: Vec<(PyValue, PyValue, bool)>,
    ) -> Result<String, Crash> {
        let mut root = PyValue::from_json(&state);
        let before = repr(&root);
        let mut undo = UndoLog::default();
        let mut result = Ok(());
        for (path, value, delete) in changes {
            result = apply_change(&mut root, &path, value, delete, &mut undo);
            if result.is_err() {
                break;
            }
        }
        let after = repr(&root);
        undo.undo(&mut root);
        assert_eq!(repr(&root), before, "undo restores the state");
        result.map(|()| after)
    }

    fn s(text: &str) -> PyValue {
        PyValue::str(text)
    }

    #[test]
    fn sets_pads_and_creates() {
        let out = run(
            json!({"a": {"l": [1]}}),
            vec![
                (s("a.x.y"), PyValue::int(1), false),
                (
                    PyValue::List(vec![s("a"), s("l"), PyValue::int(3)]),
                    PyValue::int(9),
                    false,
                ),
                (s("a.l.5.k"), PyValue::int(2), false),
                (s("a.l.0"), PyValue::None, true),
                (s("a.l.99"), PyValue::None, true),
                (s("a.nope"), PyValue::None, true),
                (s(""), PyValue::int(1), false),
                (s("/p/q"), PyValue::int(3), false),
            ],
        )
        .unwrap();
        assert_eq!(
            out,
            "{'a': {'l': [None, None, 9, {}, {'k': 2}], 'x': {'y': 1}}, '/p/q': 3}"
        );
    }

    #[test]
    fn skips_where_python_returns_false() {
        let state = json!({"bills": {"B": {"allergies": ["x"]}}, "t": {"T": {"type": "a"}}});
        let out = run(
            state.clone(),
            vec![
                (s("bills.B.allergies.x"), PyValue::int(1), false),
                (s("t.T.type.sub"), PyValue::int(1), false),
                (s("t.T.type.sub.deeper"), PyValue::int(1), false),
            ],
        )
        .unwrap();
        assert_eq!(out, repr(&PyValue::from_json(&state)));
    }

    #[test]
    fn negative_indices_work_as_in_python() {
        let out = run(
            json!({"seat_ids": [1, 2, 3]}),
            vec![(s("seat_ids.-1"), PyValue::int(9), false)],
        )
        .unwrap();
        assert_eq!(out, "{'seat_ids': [1, 2, 9]}");
        // Deleting a negative index is refused (no crash).
        let out = run(
            json!({"seat_ids": [1]}),
            vec![(s("seat_ids.-1"), PyValue::None, true)],
        )
        .unwrap();
        assert_eq!(out, "{'seat_ids': [1]}");
        assert!(run(json!({"l": [1]}), vec![(s("l.-5"), PyValue::int(9), false)]).is_err());
        assert!(run(
            json!({"l": [{}]}),
            vec![(s("l.-5.x"), PyValue::int(9), false)]
        )
        .is_err());
    }

    #[test]
    fn integer_parts_stay_integers() {
        let out = run(
            json!({"lines": {"2": {"qty": 1}}}),
            vec![(
                PyValue::List(vec![s("lines"), PyValue::int(2), s("qty")]),
                PyValue::int(5),
                false,
            )],
        )
        .unwrap();
        assert_eq!(out, "{'lines': {'2': {'qty': 1}, 2: {'qty': 5}}}");
    }

    #[test]
    fn unhashable_parts_crash() {
        let err = run(
            json!({"a": {}}),
            vec![(
                PyValue::List(vec![s("a"), PyValue::List(vec![s("x")])]),
                PyValue::int(1),
                false,
            )],
        )
        .unwrap_err();
        assert_eq!(err, Crash("TypeError: unhashable type: 'list'".into()));
    }

    #[test]
    fn huge_padding_is_a_crash_not_an_allocation() {
        let err = run(
            json!({"l": []}),
            vec![(s("l.99999999999"), PyValue::int(1), false)],
        );
        assert!(err.unwrap_err().0.starts_with("MemoryError"));
    }

    #[test]
    fn non_string_paths_use_str() {
        let out = run(
            json!({}),
            vec![
                (PyValue::int(5), PyValue::int(1), false),
                (
                    PyValue::Tuple(vec![s("a"), PyValue::int(1)]),
                    PyValue::int(2),
                    false,
                ),
                (PyValue::Float(1.5), PyValue::int(3), false),
                (PyValue::int(0), PyValue::int(4), false),
            ],
        )
        .unwrap();
        assert_eq!(out, "{'5': 1, \"('a', 1)\": 2, '1.5': 3}");
    }
}

//! State diffs in two counting modes.
//!
//! - [`reference_diff`] counts |Δ| exactly as the reference benchmark does, so strata match the
//!   published ones: objects are recursed, **lists are atomic** (any change to a list is one
//!   modification of the whole list), an added or removed key counts 1 whatever its size, and paths
//!   are dot-joined without escaping.
//! - [`fine_diff`] descends into lists too (index by index; a longer or shorter list adds or
//!   removes elements at the end), and its changes applied in order turn `before` into `after`.
//!   [`facts`] expands a fine diff into leaf-level facts for field precision and recall.

use crate::delta::{Delta, DeltaOp, OpKind};
use crate::equality::{is_scalar, numeric_delta, py_eq};
use crate::path::RawPath;
use crate::pointer::JsonPointer;
use serde::Serialize;
use serde_json::{Map, Value};

/// What happened at a location.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// The location did not exist before.
    Added,
    /// The location no longer exists.
    Removed,
    /// The value changed.
    Modified,
}

impl ChangeKind {
    /// The reference's word for it.
    pub fn reference_word(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Removed => "removed",
            ChangeKind::Modified => "modified",
        }
    }
}

/// One located change, borrowing the values from the two states.
#[derive(Clone, Debug, PartialEq)]
pub struct Change<'a> {
    /// Where.
    pub pointer: JsonPointer,
    /// What happened.
    pub kind: ChangeKind,
    /// Value before (`None` when added).
    pub before: Option<&'a Value>,
    /// Value after (`None` when removed).
    pub after: Option<&'a Value>,
}

/// How the reference compares two values when deciding whether a key changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReferenceEquality {
    /// The scorer's `diff_dicts` (scripts 10, 11, 13): Python `==` everywhere, so
    /// `1 == 1.0 == True` records no change. Used for the CM-reference ground truth.
    Python,
    /// The labelling script 3 (stored `change_count`, strata): Python `==` when both values are
    /// scalars, JSON text comparison otherwise, so `[1]` and `[1.0]` differ there.
    Labelling,
}

/// Reference-style diff: see the module docs. Changes come in the reference's order (the keys
/// of every object visited sorted), so they match its files.
pub fn reference_diff<'a>(
    before: &'a Value,
    after: &'a Value,
    equality: ReferenceEquality,
) -> Vec<Change<'a>> {
    let mut out = Vec::new();
    match (before, after) {
        (Value::Object(_), Value::Object(_)) => {
            let root = JsonPointer::root();
            let mut trail = Trail::new(&root);
            reference_walk(
                before,
                after,
                &mut trail,
                equality,
                &mut |at, kind, b, a| {
                    out.push(Change {
                        pointer: at.pointer(),
                        kind,
                        before: b,
                        after: a,
                    })
                },
            );
            // The walk follows the states' own key order; the reference visits the keys of
            // every object sorted, which puts the changes in the order of their token lists.
            out.sort_unstable_by(|x, y| x.pointer.cmp(&y.pointer));
        }
        // The reference emits one change with path "" for a non-object state.
        _ if !reference_equal(before, after, equality) => out.push(Change {
            pointer: JsonPointer::root(),
            kind: ChangeKind::Modified,
            before: Some(before),
            after: Some(after),
        }),
        _ => {}
    }
    out
}

fn reference_equal(a: &Value, b: &Value, equality: ReferenceEquality) -> bool {
    match equality {
        ReferenceEquality::Python => py_eq(a, b),
        ReferenceEquality::Labelling if is_scalar(a) && is_scalar(b) => py_eq(a, b),
        // json.dumps(sort_keys=True) text equality is canonical equality on JSON values.
        ReferenceEquality::Labelling => a == b,
    }
}

/// One step of a walk's location, borrowed from the states.
#[derive(Clone, Copy)]
enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// Where a walk is: a starting pointer and the steps below it, turned into a [`JsonPointer`]
/// only when a change is recorded there (most of a state is unchanged).
struct Trail<'p, 'a> {
    base: &'p JsonPointer,
    segs: Vec<Seg<'a>>,
}

impl<'p, 'a> Trail<'p, 'a> {
    fn new(base: &'p JsonPointer) -> Self {
        Trail {
            base,
            segs: Vec::new(),
        }
    }

    fn pointer(&self) -> JsonPointer {
        let mut tokens = Vec::with_capacity(self.base.tokens().len() + self.segs.len());
        tokens.extend(self.base.tokens().iter().cloned());
        tokens.extend(self.segs.iter().map(|seg| match seg {
            Seg::Key(key) => (*key).to_owned(),
            Seg::Index(i) => i.to_string(),
        }));
        JsonPointer::from_tokens(tokens)
    }

    /// The pointer one step further down.
    fn child(&mut self, seg: Seg<'a>) -> JsonPointer {
        self.segs.push(seg);
        let pointer = self.pointer();
        self.segs.pop();
        pointer
    }
}

/// Visits the entries of `b` with the value under the same key in `a` (if any), in `b`'s order,
/// and returns whether `a` may hold keys `b` lacks. While both objects list the same keys in the
/// same order (the usual case for two states of one environment) the values are paired by
/// position, without hashing, and the answer is `false`.
fn pair_entries<'a>(
    b: &'a Map<String, Value>,
    a: &'a Map<String, Value>,
    mut visit: impl FnMut(&'a String, &'a Value, Option<&'a Value>),
) -> bool {
    let mut aligned = b.len() == a.len();
    let mut a_entries = a.iter();
    for (key, old) in b {
        let new = if aligned {
            match a_entries.next() {
                Some((a_key, new)) if a_key == key => Some(new),
                _ => {
                    aligned = false;
                    a.get(key)
                }
            }
        } else {
            a.get(key)
        };
        visit(key, old, new);
    }
    // Equal lengths and every key of `b` matched in place: the key sets are equal.
    !aligned
}

type Visit<'v, 'a> =
    dyn FnMut(&Trail<'_, 'a>, ChangeKind, Option<&'a Value>, Option<&'a Value>) + 'v;

fn reference_walk<'a>(
    before: &'a Value,
    after: &'a Value,
    at: &mut Trail<'_, 'a>,
    equality: ReferenceEquality,
    visit: &mut Visit<'_, 'a>,
) {
    let (Value::Object(b), Value::Object(a)) = (before, after) else {
        return;
    };
    let may_add = pair_entries(b, a, |key, old, new| {
        at.segs.push(Seg::Key(key));
        match (old, new) {
            (_, None) => visit(at, ChangeKind::Removed, Some(old), None),
            (Value::Object(_), Some(new @ Value::Object(_))) => {
                reference_walk(old, new, at, equality, visit)
            }
            (_, Some(new)) => {
                if !reference_equal(old, new, equality) {
                    visit(at, ChangeKind::Modified, Some(old), Some(new))
                }
            }
        }
        at.segs.pop();
    });
    if may_add {
        for (key, new) in a {
            if !b.contains_key(key) {
                at.segs.push(Seg::Key(key));
                visit(at, ChangeKind::Added, None, Some(new));
                at.segs.pop();
            }
        }
    }
}

/// |Δ| as the reference's labelling script counts it (used for strata).
pub fn reference_change_count(before: &Value, after: &Value) -> usize {
    match (before, after) {
        (Value::Object(_), Value::Object(_)) => {
            let root = JsonPointer::root();
            let mut count = 0;
            reference_walk(
                before,
                after,
                &mut Trail::new(&root),
                ReferenceEquality::Labelling,
                &mut |_, _, _, _| count += 1,
            );
            count
        }
        _ => reference_diff(before, after, ReferenceEquality::Labelling).len(),
    }
}

/// The reference's `note` for a modification: `"increased by X"` / `"decreased by X"` when both
/// values are numbers (bools count as numbers, as in Python), else `None`.
pub fn reference_note(change: &Change<'_>) -> Option<String> {
    let (before, after) = (change.before?, change.after?);
    if !is_scalar(before) || !is_scalar(after) {
        return None;
    }
    let (increased, amount) = numeric_delta(before, after)?;
    Some(format!(
        "{} by {amount}",
        if increased { "increased" } else { "decreased" }
    ))
}

/// A change in the reference's JSON shape:
/// `{"path": "a.b", "type": "modified", "before": …, "after": …[, "note": …]}`.
pub fn reference_change_json(change: &Change<'_>, with_note: bool) -> Value {
    let mut entry = serde_json::Map::new();
    entry.insert("path".into(), Value::String(change.pointer.to_dotted()));
    entry.insert("type".into(), change.kind.reference_word().into());
    entry.insert(
        "before".into(),
        change.before.cloned().unwrap_or(Value::Null),
    );
    entry.insert("after".into(), change.after.cloned().unwrap_or(Value::Null));
    if with_note && change.kind == ChangeKind::Modified {
        if let (Some(b), Some(a)) = (change.before, change.after) {
            if is_scalar(b) && is_scalar(a) {
                entry.insert(
                    "note".into(),
                    reference_note(change).map_or(Value::Null, Value::String),
                );
            }
        }
    }
    Value::Object(entry)
}

/// Leaf-level diff that descends into lists; applying its changes in order (see
/// [`changes_to_delta`]) turns `before` into `after`.
pub fn fine_diff<'a>(before: &'a Value, after: &'a Value) -> Vec<Change<'a>> {
    let mut out = Vec::new();
    let root = JsonPointer::root();
    fine_walk(before, after, &mut Trail::new(&root), &mut out);
    out
}

/// Appends the fine diff of two subtrees located at `at`.
pub fn fine_diff_at<'a>(
    before: &'a Value,
    after: &'a Value,
    at: &mut JsonPointer,
    out: &mut Vec<Change<'a>>,
) {
    fine_walk(before, after, &mut Trail::new(at), out)
}

fn fine_walk<'a>(
    before: &'a Value,
    after: &'a Value,
    at: &mut Trail<'_, 'a>,
    out: &mut Vec<Change<'a>>,
) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let may_add = pair_entries(b, a, |key, old, new| {
                at.segs.push(Seg::Key(key));
                match new {
                    Some(new) => fine_walk(old, new, at, out),
                    None => out.push(Change {
                        pointer: at.pointer(),
                        kind: ChangeKind::Removed,
                        before: Some(old),
                        after: None,
                    }),
                }
                at.segs.pop();
            });
            if may_add {
                for (key, new) in a {
                    if !b.contains_key(key) {
                        out.push(Change {
                            pointer: at.child(Seg::Key(key)),
                            kind: ChangeKind::Added,
                            before: None,
                            after: Some(new),
                        });
                    }
                }
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            let common = b.len().min(a.len());
            for i in 0..common {
                at.segs.push(Seg::Index(i));
                fine_walk(&b[i], &a[i], at, out);
                at.segs.pop();
            }
            for (i, new) in a.iter().enumerate().skip(common) {
                out.push(Change {
                    pointer: at.child(Seg::Index(i)),
                    kind: ChangeKind::Added,
                    before: None,
                    after: Some(new),
                });
            }
            // Highest index first, so each removal leaves the lower indices in place.
            for i in (common..b.len()).rev() {
                out.push(Change {
                    pointer: at.child(Seg::Index(i)),
                    kind: ChangeKind::Removed,
                    before: Some(&b[i]),
                    after: None,
                });
            }
        }
        _ => {
            if before != after {
                out.push(Change {
                    pointer: at.pointer(),
                    kind: ChangeKind::Modified,
                    before: Some(before),
                    after: Some(after),
                })
            }
        }
    }
}

/// Turns located changes into a delta with pointer paths (`add`/`modify`/`delete`).
pub fn changes_to_delta(changes: &[Change<'_>]) -> Delta {
    Delta::from_ops(changes.iter().map(|c| DeltaOp {
        kind: match c.kind {
            ChangeKind::Added => OpKind::Add,
            ChangeKind::Removed => OpKind::Delete,
            ChangeKind::Modified => OpKind::Modify,
        },
        path: RawPath::Keys(c.pointer.tokens().to_vec()),
        from: None,
        value: c.after.cloned(),
    }))
}

/// How [`changes_to_json`] writes paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathStyle {
    /// RFC 6901 strings: `"/a/b"`.
    Pointer,
    /// Key lists: `["a", "b"]` (also read by the reference scorer, unlike pointers).
    Keys,
    /// Dot-joined keys: `"a.b"`, the reference's own style (ambiguous when keys contain dots).
    Dotted,
}

/// Changes as the change-list JSON a simulator is asked to produce:
/// `[{"type": "add"|"modify"|"delete", "path": …, "value": …}]`.
pub fn changes_to_json(changes: &[Change<'_>], style: PathStyle) -> Value {
    Value::Array(
        changes
            .iter()
            .map(|c| {
                let mut entry = serde_json::Map::new();
                let word = match c.kind {
                    ChangeKind::Added => "add",
                    ChangeKind::Removed => "delete",
                    ChangeKind::Modified => "modify",
                };
                entry.insert("type".into(), word.into());
                let path = match style {
                    PathStyle::Pointer => Value::String(c.pointer.to_string()),
                    PathStyle::Keys => c
                        .pointer
                        .tokens()
                        .iter()
                        .cloned()
                        .map(Value::String)
                        .collect(),
                    PathStyle::Dotted => Value::String(c.pointer.to_dotted()),
                };
                entry.insert("path".into(), path);
                if let Some(after) = c.after {
                    entry.insert("value".into(), after.clone());
                }
                Value::Object(entry)
            })
            .collect(),
    )
}

/// A leaf-level fact of a diff: the value written at a location, or its removal.
#[derive(Clone, Debug, PartialEq)]
pub enum Fact<'a> {
    /// A scalar or an empty container now stands here.
    Set(&'a Value),
    /// Nothing stands here any more.
    Removed,
}

/// Expands changes into leaf facts, sorted by pointer: an added or modified container becomes
/// one fact per leaf (empty containers are leaves); a removal stays one fact.
pub fn facts<'a>(changes: &[Change<'a>]) -> Vec<(JsonPointer, Fact<'a>)> {
    let mut out = Vec::with_capacity(changes.len());
    for change in changes {
        match change.after {
            None => out.push((change.pointer.clone(), Fact::Removed)),
            Some(value) => leaves(value, &mut change.pointer.clone(), &mut out),
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn leaves<'a>(value: &'a Value, at: &mut JsonPointer, out: &mut Vec<(JsonPointer, Fact<'a>)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                at.push(key.clone());
                leaves(child, at, out);
                at.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, child) in items.iter().enumerate() {
                at.push(i.to_string());
                leaves(child, at, out);
                at.pop();
            }
        }
        leaf => out.push((at.clone(), Fact::Set(leaf))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::apply;
    use serde_json::json;

    fn paths(changes: &[Change<'_>]) -> Vec<String> {
        changes.iter().map(|c| c.pointer.to_dotted()).collect()
    }

    #[test]
    fn reference_counting_rules() {
        let before = json!({
            "orders": {"O1": {"status": "new", "items": [1, 2]}},
            "flag": 1, "gone": {"big": {"x": 1}}
        });
        let after = json!({
            "orders": {"O1": {"status": "paid", "items": [1, 2, 3]}, "O2": {"a": 1, "b": 2}},
            "flag": 1.0, "created": 5
        });
        let d = reference_diff(&before, &after, ReferenceEquality::Labelling);
        assert_eq!(
            paths(&d),
            [
                "created",
                "gone",
                "orders.O1.items",
                "orders.O1.status",
                "orders.O2"
            ]
        );
        assert_eq!(reference_change_count(&before, &after), 5);
        // Dots inside keys are not escaped.
        let (b, a) = (json!({"f": {"a.txt": 1}}), json!({"f": {"a.txt": 2}}));
        let d = reference_diff(&b, &a, ReferenceEquality::Python);
        assert_eq!(paths(&d), ["f.a.txt"]);
    }

    #[test]
    fn labelling_and_python_equality_differ_on_lists() {
        let (b, a) = (json!({"l": [1], "n": 1}), json!({"l": [1.0], "n": true}));
        assert_eq!(
            reference_diff(&b, &a, ReferenceEquality::Labelling).len(),
            1
        );
        assert_eq!(reference_diff(&b, &a, ReferenceEquality::Python).len(), 0);
    }

    #[test]
    fn reference_json_shape_and_notes() {
        let (b, a) = (
            json!({"n": 3, "s": "x", "f": true}),
            json!({"n": 5, "s": "y", "f": false}),
        );
        let d = reference_diff(&b, &a, ReferenceEquality::Labelling);
        let shaped: Vec<Value> = d.iter().map(|c| reference_change_json(c, true)).collect();
        assert_eq!(
            shaped,
            vec![
                json!({"path": "f", "type": "modified", "before": true, "after": false, "note": "decreased by 1"}),
                json!({"path": "n", "type": "modified", "before": 3, "after": 5, "note": "increased by 2"}),
                json!({"path": "s", "type": "modified", "before": "x", "after": "y", "note": null}),
            ]
        );
    }

    #[test]
    fn non_object_states() {
        assert_eq!(reference_change_count(&json!([1]), &json!([2])), 1);
        assert_eq!(
            reference_diff(&json!(1), &json!(1), ReferenceEquality::Python).len(),
            0
        );
    }

    #[test]
    fn fine_diff_descends_lists_and_round_trips() {
        let before = json!({"l": [{"q": 1}, {"q": 2}, 3, 4], "o": {"a": 1}});
        let after = json!({"l": [{"q": 1}, {"q": 5}], "o": {"a": [1], "b": {}}});
        let d = fine_diff(&before, &after);
        assert_eq!(
            d.iter().map(|c| c.pointer.to_string()).collect::<Vec<_>>(),
            ["/l/1/q", "/l/3", "/l/2", "/o/a", "/o/b"]
        );
        let (rebuilt, problems) = apply(&before, &changes_to_delta(&d));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(rebuilt, after);
    }

    #[test]
    fn facts_expand_added_containers() {
        let before = json!({"u": {}});
        let after =
            json!({"u": {"U1": {"name": "a", "tags": [], "addr": {"c": "x"}}}, "gone": null});
        let b2 = json!({"u": {}, "x": 1});
        let d = fine_diff(&before, &after);
        let f: Vec<(String, Fact<'_>)> = facts(&d)
            .into_iter()
            .map(|(p, f)| (p.to_string(), f))
            .collect();
        assert_eq!(
            f,
            vec![
                ("/gone".to_string(), Fact::Set(&Value::Null)),
                ("/u/U1/addr/c".to_string(), Fact::Set(&json!("x"))),
                ("/u/U1/name".to_string(), Fact::Set(&json!("a"))),
                ("/u/U1/tags".to_string(), Fact::Set(&json!([]))),
            ]
        );
        let removed = fine_diff(&b2, &before);
        assert_eq!(
            facts(&removed),
            vec![(JsonPointer::from_tokens(["x"]), Fact::Removed)]
        );
    }
}

/// The walks as they were first written (a pointer cloned at every key, keys sorted per
/// object), kept as the oracle for the faster ones above.
#[cfg(test)]
mod oracle {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn reference_diff_naive<'a>(
        before: &'a Value,
        after: &'a Value,
        equality: ReferenceEquality,
    ) -> Vec<Change<'a>> {
        let mut out = Vec::new();
        match (before, after) {
            (Value::Object(_), Value::Object(_)) => {
                reference_walk_naive(before, after, &mut JsonPointer::root(), equality, &mut out)
            }
            _ if !reference_equal(before, after, equality) => out.push(Change {
                pointer: JsonPointer::root(),
                kind: ChangeKind::Modified,
                before: Some(before),
                after: Some(after),
            }),
            _ => {}
        }
        out
    }

    fn reference_walk_naive<'a>(
        before: &'a Value,
        after: &'a Value,
        at: &mut JsonPointer,
        equality: ReferenceEquality,
        out: &mut Vec<Change<'a>>,
    ) {
        let (Value::Object(b), Value::Object(a)) = (before, after) else {
            return;
        };
        let mut keys: Vec<&String> = b
            .keys()
            .chain(a.keys().filter(|k| !b.contains_key(*k)))
            .collect();
        keys.sort();
        for key in keys {
            at.push(key.clone());
            match (b.get(key), a.get(key)) {
                (None, Some(new)) => out.push(Change {
                    pointer: at.clone(),
                    kind: ChangeKind::Added,
                    before: None,
                    after: Some(new),
                }),
                (Some(old), None) => out.push(Change {
                    pointer: at.clone(),
                    kind: ChangeKind::Removed,
                    before: Some(old),
                    after: None,
                }),
                (Some(old @ Value::Object(_)), Some(new @ Value::Object(_))) => {
                    reference_walk_naive(old, new, at, equality, out)
                }
                (Some(old), Some(new)) => {
                    if !reference_equal(old, new, equality) {
                        out.push(Change {
                            pointer: at.clone(),
                            kind: ChangeKind::Modified,
                            before: Some(old),
                            after: Some(new),
                        })
                    }
                }
                (None, None) => {}
            }
            at.pop();
        }
    }

    fn fine_walk_naive<'a>(
        before: &'a Value,
        after: &'a Value,
        at: &mut JsonPointer,
        out: &mut Vec<Change<'a>>,
    ) {
        match (before, after) {
            (Value::Object(b), Value::Object(a)) => {
                for (key, old) in b {
                    at.push(key.clone());
                    match a.get(key) {
                        Some(new) => fine_walk_naive(old, new, at, out),
                        None => out.push(Change {
                            pointer: at.clone(),
                            kind: ChangeKind::Removed,
                            before: Some(old),
                            after: None,
                        }),
                    }
                    at.pop();
                }
                for (key, new) in a {
                    if !b.contains_key(key) {
                        out.push(Change {
                            pointer: at.child(key.clone()),
                            kind: ChangeKind::Added,
                            before: None,
                            after: Some(new),
                        });
                    }
                }
            }
            (Value::Array(b), Value::Array(a)) => {
                let common = b.len().min(a.len());
                for i in 0..common {
                    at.push(i.to_string());
                    fine_walk_naive(&b[i], &a[i], at, out);
                    at.pop();
                }
                for (i, new) in a.iter().enumerate().skip(common) {
                    out.push(Change {
                        pointer: at.child(i.to_string()),
                        kind: ChangeKind::Added,
                        before: None,
                        after: Some(new),
                    });
                }
                for i in (common..b.len()).rev() {
                    out.push(Change {
                        pointer: at.child(i.to_string()),
                        kind: ChangeKind::Removed,
                        before: Some(&b[i]),
                        after: None,
                    });
                }
            }
            _ => {
                if before != after {
                    out.push(Change {
                        pointer: at.clone(),
                        kind: ChangeKind::Modified,
                        before: Some(before),
                        after: Some(after),
                    })
                }
            }
        }
    }

    const KEYS: [&str; 8] = ["a", "b", "c.d", "0", "1", "x/y", "", "zz"];

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-2i64..3).prop_map(Value::from),
            prop_oneof![Just(1.0f64), Just(0.5)].prop_map(Value::from),
            prop::sample::select(vec!["", "x", "a.b"]).prop_map(Value::from),
        ]
    }

    fn json_value() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(4, 64, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((prop::sample::select(KEYS.to_vec()), inner), 0..6).prop_map(
                    |pairs| {
                        Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                    }
                ),
            ]
        })
    }

    /// A copy of `value` with some entries changed, removed, added or moved, chosen by `edits`
    /// (so the two states mostly share their keys and key order, as real ones do).
    fn pick(edits: &mut dyn Iterator<Item = u8>) -> u8 {
        edits.next().unwrap_or(3)
    }

    /// A copy of `value` with some entries changed, removed, added or moved, chosen by `edits`
    /// (so the two states mostly share their keys and key order, as real ones do).
    fn mutate(value: &Value, edits: &mut dyn Iterator<Item = u8>) -> Value {
        match value {
            Value::Object(map) => {
                let mut out = Map::new();
                for (k, v) in map {
                    match pick(edits) % 8 {
                        0 => {}
                        1 => {
                            out.insert(k.clone(), json!(pick(edits)));
                        }
                        2 => {
                            out.insert(k.clone(), json!(f64::from(pick(edits) % 3)));
                        }
                        _ => {
                            out.insert(k.clone(), mutate(v, edits));
                        }
                    }
                }
                match pick(edits) % 6 {
                    0 => {
                        out.insert(format!("new{}", pick(edits) % 3), json!({"n": [1, 2]}));
                    }
                    1 => {
                        // Move the first entry to the end.
                        if let Some(k) = out.keys().next().cloned() {
                            if let Some(v) = out.shift_remove(&k) {
                                out.insert(k, v);
                            }
                        }
                    }
                    _ => {}
                }
                Value::Object(out)
            }
            Value::Array(items) => {
                let mut out: Vec<Value> = items.iter().map(|v| mutate(v, edits)).collect();
                match pick(edits) % 5 {
                    0 => out.push(json!(true)),
                    1 => {
                        out.pop();
                    }
                    _ => {}
                }
                Value::Array(out)
            }
            leaf => leaf.clone(),
        }
    }

    fn check(before: &Value, after: &Value) -> Result<(), TestCaseError> {
        for equality in [ReferenceEquality::Labelling, ReferenceEquality::Python] {
            let naive = reference_diff_naive(before, after, equality);
            prop_assert_eq!(&reference_diff(before, after, equality), &naive);
            if equality == ReferenceEquality::Labelling {
                prop_assert_eq!(reference_change_count(before, after), naive.len());
            }
        }
        let mut naive = Vec::new();
        fine_walk_naive(before, after, &mut JsonPointer::root(), &mut naive);
        prop_assert_eq!(&fine_diff(before, after), &naive);
        let mut at = JsonPointer::from_tokens(["p", "q"]);
        let mut fast = Vec::new();
        fine_diff_at(before, after, &mut at, &mut fast);
        prop_assert_eq!(&at, &JsonPointer::from_tokens(["p", "q"]));
        let mut naive = Vec::new();
        fine_walk_naive(before, after, &mut at, &mut naive);
        prop_assert_eq!(fast, naive);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn walks_match_the_naive_ones(
            before in json_value(),
            edits in prop::collection::vec(any::<u8>(), 0..64),
            other in json_value(),
        ) {
            let after = mutate(&before, &mut edits.iter().copied());
            check(&before, &after)?;
            check(&after, &before)?;
            check(&before, &other)?;
        }
    }
}

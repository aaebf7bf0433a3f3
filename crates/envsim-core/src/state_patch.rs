//! State patches: a state written as the changes from a base state, so a benchmark of samples
//! from one multi-megabyte database stores the database once and each sample's states as small
//! patches (see the compact records of `formats`).
//!
//! A patch is the change list of [`fine_diff`] in key-list form (`[{"type": "add"|"modify"|
//! "delete", "path": ["orders", "O7", "status"], "value": …}]`): applied in order to the base it
//! gives the state back exactly (lists are descended index by index; key lists never need
//! escaping or guessing).

use crate::apply::apply_in_place;
use crate::delta::Delta;
use crate::diff::{changes_to_json, fine_diff, PathStyle};
use serde_json::Value;

/// The patch that turns `base` into `state`.
pub fn diff_patch(base: &Value, state: &Value) -> Value {
    changes_to_json(&fine_diff(base, state), PathStyle::Keys)
}

/// Applies a patch made by [`diff_patch`] to `state` in place. A patch that is not a change
/// list, or that does not apply cleanly (a path that does not exist, an add over an existing
/// key), is an error naming the first problem; `state` is then left as it was.
pub fn apply_patch(state: &mut Value, patch: &Value) -> Result<(), String> {
    let delta = Delta::from_value(patch);
    let applied = apply_in_place(state, &delta);
    if let Some(problem) = applied.problems.first() {
        let text = match (&problem.op, &problem.path) {
            (Some(op), Some(path)) => format!("change {op} at {path}: {}", problem.message),
            (Some(op), None) => format!("change {op}: {}", problem.message),
            _ => problem.message.clone(),
        };
        applied.undo.undo(state);
        return Err(text);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn patches_round_trip_and_bad_ones_are_named() {
        let base = json!({"orders": {"O1": {"status": "new", "lines": [1, 2, 3]}}, "n": 1});
        let state =
            json!({"orders": {"O1": {"status": "paid", "lines": [1]}, "O2": {}}, "m": [true]});
        let patch = diff_patch(&base, &state);
        let mut rebuilt = base.clone();
        apply_patch(&mut rebuilt, &patch).unwrap();
        assert_eq!(rebuilt, state);
        assert_eq!(diff_patch(&state, &state), json!([]));
        let mut untouched = base.clone();
        let bad = json!([{"type": "modify", "path": ["n"], "value": 2},
                         {"type": "delete", "path": ["nope", "x"]}]);
        let err = apply_patch(&mut untouched, &bad).unwrap_err();
        assert!(err.starts_with("change 1"), "{err}");
        assert_eq!(untouched, base, "a failed patch leaves the state as it was");
        assert!(apply_patch(&mut untouched, &json!({"x": 1})).is_err());
    }

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (-5i64..5).prop_map(Value::from),
            "[a-c/~.]{0,3}".prop_map(Value::from),
        ]
    }

    fn tree() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map("[a-c/~.]{0,3}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn object() -> impl Strategy<Value = Value> {
        prop::collection::btree_map("[a-d]{1,2}", tree(), 0..5)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    proptest! {
        #[test]
        fn any_state_is_its_base_plus_its_patch(base in object(), state in object()) {
            let patch = diff_patch(&base, &state);
            let text = serde_json::to_string(&patch).unwrap();
            let mut rebuilt = base.clone();
            apply_patch(&mut rebuilt, &serde_json::from_str(&text).unwrap()).unwrap();
            prop_assert_eq!(rebuilt, state);
        }
    }
}

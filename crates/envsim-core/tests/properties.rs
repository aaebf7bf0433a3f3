//! Algebraic properties of diff, apply and scoring, over random JSON.

use envsim_core::apply::apply;
use envsim_core::delta::{Delta, DeltaOp, OpKind};
use envsim_core::diff::{
    changes_to_delta, fine_diff, reference_diff, ChangeKind, ReferenceEquality,
};
use envsim_core::equality::py_eq;
use envsim_core::path::RawPath;
use envsim_core::pointer::JsonPointer;
use envsim_core::prelude::*;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// Keys chosen to collide often and to contain the characters paths care about.
const KEYS: [&str; 9] = ["a", "b", "c.d", "0", "1", "x/y", "~t", "", "e.f"];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..4).prop_map(Value::from),
        prop_oneof![Just(1.0f64), Just(0.5), Just(-2.0)].prop_map(Value::from),
        prop::sample::select(vec!["", "x", "a.b", "ü"]).prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS.to_vec()), inner), 0..5).prop_map(
                |pairs| {
                    Value::Object(
                        pairs
                            .into_iter()
                            .map(|(k, v)| (k.to_owned(), v))
                            .collect::<Map<_, _>>(),
                    )
                }
            ),
        ]
    })
}

fn state() -> impl Strategy<Value = Value> {
    prop::collection::vec((prop::sample::select(KEYS.to_vec()), json_value()), 0..5).prop_map(
        |pairs| Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()),
    )
}

fn transition(before: Value, after: Value) -> Transition {
    envsim_testkit::transition(before, after, json!("{'success': True}"))
}

fn random_ops() -> impl Strategy<Value = Vec<Value>> {
    let kind = prop::sample::select(vec!["add", "modify", "delete", "set"]);
    let path = prop::collection::vec(
        prop_oneof![
            prop::sample::select(KEYS.to_vec()).prop_map(str::to_owned),
            Just("-".to_owned())
        ],
        1..4,
    );
    prop::collection::vec((kind, path, json_value()), 0..5).prop_map(|ops| {
        ops.into_iter()
            .map(|(kind, path, value)| json!({"type": kind, "path": path, "value": value}))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn fine_diff_applied_to_before_gives_after(before in state(), after in state()) {
        let changes = fine_diff(&before, &after);
        let (rebuilt, problems) = apply(&before, &changes_to_delta(&changes));
        prop_assert!(problems.is_empty(), "{problems:?}");
        prop_assert_eq!(rebuilt, after);
    }

    #[test]
    fn reference_changes_applied_to_before_give_after(before in state(), after in state()) {
        for equality in [ReferenceEquality::Labelling, ReferenceEquality::Python] {
            let changes = reference_diff(&before, &after, equality);
            let delta = Delta::from_ops(changes.iter().map(|c| DeltaOp {
                kind: match c.kind {
                    ChangeKind::Added => OpKind::Add,
                    ChangeKind::Removed => OpKind::Delete,
                    ChangeKind::Modified => OpKind::Modify,
                },
                path: RawPath::Keys(c.pointer.tokens().to_vec()),
                from: None,
                value: c.after.cloned(),
            }));
            let (rebuilt, problems) = apply(&before, &delta);
            prop_assert!(problems.is_empty(), "{problems:?}");
            // Unrecorded differences are exactly those Python equality ignores (1 vs 1.0).
            prop_assert!(py_eq(&rebuilt, &after), "{rebuilt} vs {after}");
        }
    }

    #[test]
    fn scoring_in_place_equals_naive_application(before in state(), after in state(), ops in random_ops()) {
        let mut sample = PreparedSample::new(transition(before.clone(), after.clone()));
        let prediction = Prediction::Parsed(json!({"feedback": "{'success': True}", "config_changes": ops}));
        let score = sample.score(&prediction, None);
        prop_assert_eq!(&sample.transition().config_before, &before, "state restored");
        let delta = Delta::from_value(&json!(ops));
        let (predicted, problems) = apply(&before, &delta);
        let clean = !problems.iter().any(|p| p.is_error());
        prop_assert_eq!(score.cm_strict, clean && predicted == after);
        // The field score sees the same predicted state.
        let predicted_changes = fine_diff(&before, &predicted);
        prop_assert_eq!(score.field.predicted, envsim_core::diff::facts(&predicted_changes).len());
        if score.cm_strict {
            prop_assert_eq!(score.field.f1, 1.0);
        }
    }

    #[test]
    fn oracle_is_always_right_on_strict_metrics(before in state(), after in state()) {
        let mut sample = PreparedSample::new(transition(before, after));
        let prediction = Baseline::Oracle.predict(sample.transition());
        let score = sample.score(&prediction, None);
        prop_assert!(score.cm_strict && score.fm_ref && score.fm_strict);
        prop_assert_eq!(score.field.f1, 1.0);
        prop_assert!(score.errors.is_empty(), "{:?}", score.errors);
    }

    #[test]
    fn pointers_round_trip(tokens in prop::collection::vec(prop::sample::select(KEYS.to_vec()), 0..5)) {
        let pointer = JsonPointer::from_tokens(tokens);
        prop_assert_eq!(JsonPointer::parse(&pointer.to_string()).unwrap(), pointer);
    }
}

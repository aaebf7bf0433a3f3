//! One hand-made sample per flaw of the reference scorer (reference document §4.4), each
//! asserting both the reference-compatible and the strict outcome.

use envsim_core::prelude::*;
use envsim_core::score::ErrorTag;
use serde_json::{json, Value};

fn transition(before: Value, after: Value, observation: &str, args: Value) -> Transition {
    let mut t = envsim_testkit::transition(before, after, json!(observation));
    t.action.arguments = args.as_object().cloned().unwrap_or_default();
    t
}

fn score(before: Value, after: Value, output: &str) -> SampleScore {
    let t = transition(before.clone(), after, "{'success': True}", json!({"id": 1}));
    let mut sample = PreparedSample::new(t);
    let result = sample.score(&Prediction::Raw(output.to_owned()), None);
    assert_eq!(
        sample.transition().config_before,
        before,
        "scoring must leave the sample unchanged"
    );
    result
}

fn output(changes: Value) -> String {
    json!({"feedback": "{'success': True}", "config_changes": changes}).to_string()
}

fn orders() -> (Value, Value) {
    (
        json!({"orders": {"O1": {"status": "new", "total": 5}, "O2": {"status": "new", "total": 7}}}),
        json!({"orders": {"O1": {"status": "paid", "total": 5}, "O2": {"status": "new", "total": 7}}}),
    )
}

#[test]
fn flaw1_spurious_writes_pass_reference_fail_strict() {
    let (b, a) = orders();
    let s = score(
        b.clone(),
        a.clone(),
        &output(json!([
            {"type": "modify", "path": "orders.O1.status", "value": "paid"},
            {"type": "modify", "path": "orders.O2.status", "value": "lost"},
        ])),
    );
    assert!(s.cm_ref);
    assert!(!s.cm_strict);
    assert_eq!(s.errors, [ErrorTag::Spurious]);
    assert_eq!(
        (s.field.correct, s.field.predicted, s.field.truth),
        (1, 2, 1)
    );

    // Replacing a whole entity by a partial dict holding only the changed leaf.
    let s = score(
        b,
        a,
        &output(json!([{"type": "modify", "path": "orders.O1", "value": {"status": "paid"}}])),
    );
    assert!(s.cm_ref);
    assert!(!s.cm_strict);
    assert_eq!(
        s.errors,
        [ErrorTag::Spurious],
        "the dropped `total` is a spurious removal"
    );
    assert_eq!((s.field.correct, s.field.predicted), (1, 2));
}

#[test]
fn flaw2_no_change_cm_is_vacuous_in_reference_only() {
    let (b, _) = orders();
    let s = score(
        b.clone(),
        b.clone(),
        &output(json!([{"type": "add", "path": "orders.O9", "value": {}}])),
    );
    assert!(s.cm_ref, "reference passes any change list on |Δ| = 0");
    assert!(!s.cm_strict);
    let s = score(b.clone(), b, "{}");
    assert!(
        s.cm_ref && s.cm_strict,
        "predicting no change is right on both"
    );
    assert!(
        !s.fm_ref && !s.fm_strict,
        "but an empty object has no feedback"
    );
}

#[test]
fn flaw3_correct_delete_fails_reference() {
    let b = json!({"orders": {"O1": {"status": "new"}, "O2": {"status": "new"}}});
    let a = json!({"orders": {"O1": {"status": "new"}}});
    let s = score(
        b.clone(),
        a.clone(),
        &output(json!([{"type": "delete", "path": "orders.O2"}])),
    );
    assert!(s.cm_strict);
    assert!(!s.cm_ref);
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    let s = score(
        b,
        a,
        &output(json!([{"type": "modify", "path": "orders.O2", "value": null}])),
    );
    assert!(s.cm_ref, "a null left behind passes the reference");
    assert!(!s.cm_strict);
    assert_eq!(s.errors, [ErrorTag::WrongValue]);
}

#[test]
fn flaw4_path_syntax() {
    let (b, a) = orders();
    let pointer = score(
        b.clone(),
        a.clone(),
        &output(json!([{"type": "modify", "path": "/orders/O1/status", "value": "paid"}])),
    );
    assert!(pointer.cm_strict);
    assert!(!pointer.cm_ref, "the reference cannot read JSON Pointers");
    let keys = score(
        b,
        a,
        &output(json!([{"type": "modify", "path": ["orders", "O1", "status"], "value": "paid"}])),
    );
    assert!(keys.cm_strict && keys.cm_ref);
}

#[test]
fn flaw5_keys_with_dots() {
    let b = json!({"files": {"report.txt": {"size": 1}, "a": {}}});
    let a = json!({"files": {"report.txt": {"size": 2}, "a": {}}});
    let keys = score(
        b.clone(),
        a.clone(),
        &output(json!([{"type": "modify", "path": ["files", "report.txt", "size"], "value": 2}])),
    );
    assert!(keys.cm_strict);
    assert!(
        !keys.cm_ref,
        "a semantically exact key list fails the reference"
    );
    let dotted = score(
        b,
        a,
        &output(json!([{"type": "modify", "path": "files.report.txt.size", "value": 2}])),
    );
    assert!(
        dotted.cm_strict,
        "envsim resolves the dotted key against the state"
    );
    assert!(
        dotted.cm_ref,
        "the reference passes it by splitting both sides the same wrong way"
    );
}

#[test]
fn flaw6_lists() {
    let b = json!({"u": {"tags": ["a"]}, "items": [{"qty": 1}, {"qty": 2}]});
    let a = json!({"u": {"tags": ["a", "vip"]}, "items": [{"qty": 1}, {"qty": 3}]});
    let s = score(
        b.clone(),
        a.clone(),
        &output(json!([
            {"type": "add", "path": "u.tags.-", "value": "vip"},
            {"type": "modify", "path": "items.1.qty", "value": 3},
        ])),
    );
    assert!(s.cm_strict, "`-` appends, as in JSON Pointer");
    assert!(
        !s.cm_ref,
        "the reference raises on a non-numeric list index"
    );
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    let s = score(
        b.clone(),
        a.clone(),
        &output(json!([
            {"type": "modify", "path": "u.tags", "value": ["a", "vip"]},
            {"type": "modify", "path": "items.1.qty", "value": 3},
        ])),
    );
    assert!(s.cm_strict && s.cm_ref);
    // A reordered list is wrong on both.
    let s = score(
        b,
        a,
        &output(json!([
            {"type": "modify", "path": "u.tags", "value": ["vip", "a"]},
            {"type": "modify", "path": "items.1.qty", "value": 3},
        ])),
    );
    assert!(!s.cm_strict && !s.cm_ref);
    // Index-wise: /u/tags/0 became "vip" (spurious), /u/tags/1 is "a" instead of "vip".
    assert_eq!(s.errors, [ErrorTag::Spurious, ErrorTag::WrongValue]);
}

#[test]
fn flaw7_malformed_outputs_stay_in_the_denominator() {
    let (b, a) = orders();
    for (text, tag) in [
        (
            json!({"feedback": "x", "config_changes": null}).to_string(),
            ErrorTag::MalformedDelta,
        ),
        (
            json!({"feedback": "x", "config_changes": "none"}).to_string(),
            ErrorTag::MalformedDelta,
        ),
        (
            json!({"feedback": "x", "config_changes": ["orders.O1.status=paid"]}).to_string(),
            ErrorTag::MalformedDelta,
        ),
        ("[{\"feedback\": \"x\"}]".to_owned(), ErrorTag::ParseFailure),
        (
            "{\"feedback\": \"x\", \"config_changes\": [{\"type\": \"modify\"".to_owned(),
            ErrorTag::ParseFailure,
        ),
    ] {
        let s = score(b.clone(), a.clone(), &text);
        assert!(!s.cm_strict && !s.cm_ref, "{text}");
        assert!(s.errors.contains(&tag), "{text}: {:?}", s.errors);
    }
    let scores: Vec<SampleScore> = [
        "",
        "no json here",
        "{\"feedback\": \"{'success': True}\", \"config_changes\": []}",
    ]
    .iter()
    .map(|t| score(b.clone(), a.clone(), t))
    .collect();
    let report = Report::new("m", scores);
    assert_eq!(report.overall.n, 3);
    assert_eq!(report.overall.parse_failure_rate, Some(2.0 / 3.0));
    assert_eq!(report.overall.cm_ref, Some(0.0));
}

#[test]
fn flaw10_feedback_leniency() {
    let mk = |obs: &str, fb: Value| {
        let (b, _) = orders();
        let mut sample = PreparedSample::new(transition(b.clone(), b, obs, json!({})));
        sample.score(
            &Prediction::Parsed(json!({"feedback": fb, "config_changes": []})),
            None,
        )
    };
    let s = mk("Created {'id': 5}", json!("Deleted {'id': 5} failed"));
    assert!(
        s.fm_ref,
        "the reference reduces both texts to the brace fragment"
    );
    assert!(!s.fm_strict);
    let s = mk(
        "{'success': True, 'count': 1}",
        json!("{\"success\": true, \"count\": 1.0}"),
    );
    assert!(s.fm_ref, "1 == 1.0 in Python");
    assert!(!s.fm_strict);
    let s = mk(
        "{'success': True, 'count': 1}",
        json!({"count": 1, "success": true}),
    );
    assert!(
        s.fm_ref && s.fm_strict,
        "key order, quote style and a structured feedback are fine"
    );
    let s = mk(
        "{'success': False, 'error': 'Order not found'}",
        json!("{'success': False, 'error': 'order not found'}"),
    );
    assert!(!s.fm_ref && !s.fm_strict, "wording is strict on both");
}

#[test]
fn type_switches_and_numeric_types() {
    let b = json!({"x": {"a": 1}, "n": 1, "f": true});
    let a = json!({"x": null, "n": 1, "f": true});
    let s = score(
        b.clone(),
        a.clone(),
        &output(json!([{"type": "modify", "path": "x", "value": null}])),
    );
    assert!(s.cm_strict && s.cm_ref);
    let s = score(
        b.clone(),
        a,
        &output(json!([{"type": "delete", "path": "x"}])),
    );
    assert!(!s.cm_strict && !s.cm_ref);

    let a = json!({"x": {"a": 1}, "n": 2, "f": true});
    let s = score(
        b.clone(),
        a.clone(),
        &output(json!([{"type": "modify", "path": "n", "value": 2.0}])),
    );
    assert!(s.cm_ref, "2.0 == 2 in Python");
    assert!(!s.cm_strict, "2.0 is not 2");
    let a2 = json!({"x": {"a": 1}, "n": 1, "f": false});
    let s = score(
        b,
        a2,
        &output(json!([{"type": "modify", "path": "f", "value": 0}])),
    );
    assert!(s.cm_ref, "0 == False in Python");
    assert!(!s.cm_strict);
    assert_eq!(s.errors, [ErrorTag::WrongValue]);
}

#[test]
fn api_errors_and_missing_predictions_count_as_wrong() {
    let (b, a) = orders();
    let mut sample = PreparedSample::new(transition(b, a, "{'success': True}", json!({})));
    let e = sample.score(&Prediction::ApiError("HTTP 500".into()), None);
    let m = sample.score(&Prediction::Missing, None);
    for s in [&e, &m] {
        assert!(!s.fm_ref && !s.cm_strict && !s.cm_ref);
        assert_eq!(s.field.f1, 0.0);
    }
    assert_eq!(e.errors, [ErrorTag::ApiError]);
    assert_eq!(m.errors, [ErrorTag::MissingPrediction]);
    assert_eq!(Report::new("x", vec![e, m]).overall.n, 2);
}

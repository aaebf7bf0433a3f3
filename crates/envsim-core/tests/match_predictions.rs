//! Pairing predictions with a benchmark's transitions (`match_predictions`, and
//! `PredictionMatcher`, which does it one transition at a time for a benchmark read as a
//! stream): by id or by the reference evaluator's record and step indices, in benchmark order,
//! with located errors for a prediction that names no transition or a transition that already
//! has one, and for transitions without a prediction.

use envsim_core::formats::{
    match_predictions, parse_benchmark, FormatError, Location, PredictionKey, PredictionMatcher,
    PredictionRecord,
};
use envsim_core::sample::{Prediction, Transition, Usage};
use serde_json::{json, Value};

fn step(n: i64) -> Value {
    json!({
        "action": {"name": "set", "arguments": {"x": n}},
        "observation": "{'success': True}",
        "config_before": {"x": 0},
        "config_after": {"x": n},
    })
}

/// Record 0 (`a`, one step), record 1 (`t`, three steps), record 2 (`b`, one step).
fn transitions() -> Vec<Transition> {
    let lines = [
        json!({"sample_id": "a", "step_detail": step(1)}),
        json!({"sample_id": "t", "trajectory": [step(2), step(3), step(4)]}),
        json!({"sample_id": "b", "step_detail": step(5)}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    parse_benchmark(text.as_bytes(), "b.jsonl").expect("valid")
}

fn by_id(id: &str, line: usize) -> PredictionRecord {
    PredictionRecord {
        key: PredictionKey::Id(id.into()),
        prediction: Prediction::Raw(format!("line {line}")),
        usage: Some(Usage {
            prompt_tokens: line as u64,
            completion_tokens: 1,
        }),
        location: Location::Line(line),
    }
}

fn by_index(sample_index: usize, step_index: Option<usize>, record: usize) -> PredictionRecord {
    PredictionRecord {
        key: PredictionKey::Reference {
            sample_index,
            step_index,
        },
        prediction: Prediction::Raw(format!("record {record}")),
        usage: None,
        location: Location::Record(record),
    }
}

fn raw(text: &str) -> Prediction {
    Prediction::Raw(text.into())
}

/// `match_predictions`, and the matcher fed one transition at a time, agree.
fn matched(
    records: Vec<PredictionRecord>,
    allow_missing: bool,
) -> Result<Vec<(Prediction, Option<Usage>)>, FormatError> {
    let transitions = transitions();
    let whole = match_predictions(&transitions, records.clone(), allow_missing, "p");
    let mut matcher = PredictionMatcher::new(records, "p");
    let mut streamed = Vec::new();
    for t in &transitions {
        streamed.push(matcher.take(t));
    }
    let streamed = matcher.finish(allow_missing).map(|()| streamed);
    assert_eq!(streamed, whole);
    whole
}

fn error(records: Vec<PredictionRecord>, allow_missing: bool) -> String {
    matched(records, allow_missing)
        .expect_err("an error")
        .to_string()
}

#[test]
fn predictions_pair_by_id_and_by_record_and_step_in_benchmark_order() {
    let ids: Vec<String> = transitions().into_iter().map(|t| t.id).collect();
    assert_eq!(ids, ["a", "t:0", "t:1", "t:2", "b"]);
    // By id, in any file order.
    let out = matched(
        vec![
            by_id("b", 1),
            by_id("t:1", 2),
            by_id("a", 3),
            by_id("t:0", 4),
            by_id("t:2", 5),
        ],
        false,
    )
    .expect("all matched");
    let texts: Vec<&Prediction> = out.iter().map(|(p, _)| p).collect();
    assert_eq!(
        texts,
        [
            &raw("line 3"),
            &raw("line 4"),
            &raw("line 2"),
            &raw("line 5"),
            &raw("line 1")
        ]
    );
    assert_eq!(out[0].1.map(|u| u.prompt_tokens), Some(3));
    // By record and step: a one-step record ignores the step index, a trajectory step without
    // one is step 0; the rest are missing.
    let out = matched(
        vec![
            by_index(2, Some(7), 0),
            by_index(1, None, 1),
            by_index(1, Some(2), 2),
        ],
        true,
    )
    .expect("allowed");
    let texts: Vec<&Prediction> = out.iter().map(|(p, _)| p).collect();
    assert_eq!(
        texts,
        [
            &Prediction::Missing,
            &raw("record 1"),
            &Prediction::Missing,
            &raw("record 2"),
            &raw("record 0")
        ]
    );
}

#[test]
fn unknown_second_and_missing_predictions_are_located_errors() {
    assert_eq!(
        error(vec![by_id("a", 1), by_id("zz", 2)], true),
        "p: line 2: sample_id \"zz\" is not in the benchmark"
    );
    assert_eq!(
        error(vec![by_index(1, Some(3), 0)], true),
        "p: record 0: sample_index 1, step_index Some(3) is not in the benchmark"
    );
    assert_eq!(
        error(vec![by_index(5, None, 0)], true),
        "p: record 0: sample_index 5, step_index None is not in the benchmark"
    );
    // Two for one transition: the later one in the file is the error.
    assert_eq!(
        error(vec![by_id("t:1", 1), by_id("a", 2), by_id("t:1", 3)], true),
        "p: line 3: a second prediction for sample \"t:1\""
    );
    assert_eq!(
        error(
            vec![
                by_index(1, Some(0), 0),
                by_index(0, None, 1),
                by_index(1, None, 2)
            ],
            true
        ),
        "p: record 2: a second prediction for sample \"t:0\""
    );
    assert_eq!(
        error(vec![by_index(0, Some(1), 0), by_index(0, Some(4), 1)], true),
        "p: record 1: a second prediction for sample \"a\""
    );
    // By id and by index for the same transition.
    assert_eq!(
        error(vec![by_index(2, None, 4), by_id("b", 9)], true),
        "p: line 9: a second prediction for sample \"b\""
    );
    // The first bad prediction in file order is the one named, whatever the transitions'
    // order.
    assert_eq!(
        error(vec![by_id("b", 1), by_id("b", 2), by_id("zz", 3)], true),
        "p: line 2: a second prediction for sample \"b\""
    );
    assert_eq!(
        error(vec![by_id("zz", 1), by_id("a", 2), by_id("a", 3)], true),
        "p: line 1: sample_id \"zz\" is not in the benchmark"
    );
    // Missing ones: an error unless allowed, after the bad ones.
    assert_eq!(
        error(vec![by_id("t:1", 1)], false),
        "p: 4 of 5 samples have no prediction (first: a, t:0, t:2, b); pass --allow-missing to score them as wrong"
    );
    assert_eq!(
        error(vec![by_id("t:1", 1), by_id("zz", 2)], false),
        "p: line 2: sample_id \"zz\" is not in the benchmark"
    );
    assert_eq!(
        error(Vec::new(), false),
        "p: 5 of 5 samples have no prediction (first: a, t:0, t:1, t:2, b); pass --allow-missing to score them as wrong"
    );
    let none = matched(Vec::new(), true).expect("allowed");
    assert!(none
        .iter()
        .all(|(p, u)| *p == Prediction::Missing && u.is_none()));
}

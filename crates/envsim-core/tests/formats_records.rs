//! Reading a benchmark record by record (`parse_benchmark_with`, `record_spans`) gives exactly
//! what the whole-file reader gives: the same transitions, and the same located error for every
//! bad input.

use envsim_core::formats::{
    parse_benchmark, parse_benchmark_with, record_spans, records, FormatError, Location,
};
use envsim_core::sample::Transition;
use envsim_testkit::{to_json_array, BenchOptions, SyntheticBench};
use proptest::prelude::*;
use serde_json::{json, Value};

type Results = Vec<Option<Vec<Transition>>>;

/// Runs the record readers in order.
fn in_order(n: usize, read: &(dyn Fn(usize) -> Option<Vec<Transition>> + Sync)) -> Results {
    (0..n).map(read).collect()
}

/// Runs the record readers last to first, as threads may.
fn reversed(n: usize, read: &(dyn Fn(usize) -> Option<Vec<Transition>> + Sync)) -> Results {
    let mut out: Results = (0..n).rev().map(read).collect();
    out.reverse();
    out
}

fn both(bytes: &[u8]) -> Result<Vec<Transition>, FormatError> {
    let whole = parse_benchmark(bytes, "f.json");
    assert_eq!(parse_benchmark_with(bytes, "f.json", in_order), whole);
    assert_eq!(parse_benchmark_with(bytes, "f.json", reversed), whole);
    whole
}

fn step(n: i64) -> Value {
    json!({
        "action": {"name": "set", "arguments": {"x": n}},
        "observation": {"type": "tool", "content": "{'success': True}"},
        "config_before": {"x": 0, "s": "a \"quoted\" ] } , [ { string \\"},
        "config_after": {"x": n, "s": "a \"quoted\" ] } , [ { string \\"},
        "config_change": {"change_count": 1}
    })
}

fn fixture() -> String {
    let records = vec![
        json!({"sample_id": "a", "task_info": {"env_id": "e", "task_id": "t"}, "env_code": "class E: pass", "step_detail": step(1)}),
        json!({"id": 7, "env": "e2", "trajectory": [step(2), step(3)], "env_code": "class F: pass"}),
        {
            let mut flat = step(4);
            flat["sample_id"] = json!("flat");
            flat
        },
        json!({"step_detail": step(5), "nested": [[[{"a": [1, {"b": "]"}]}]]]}),
    ];
    to_json_array(&records)
}

#[test]
fn spans_are_the_records() {
    let text = fixture();
    let spans = record_spans(text.as_bytes()).expect("well-formed array");
    let whole = records(text.as_bytes(), "f").expect("parses");
    assert_eq!(spans.len(), whole.len());
    for (span, record) in spans.iter().zip(&whole) {
        let value: Value = serde_json::from_slice(&text.as_bytes()[span.range.clone()]).unwrap();
        assert_eq!(value, record.value);
        assert_eq!(span.location, record.location);
        assert_eq!(span.index, record.index);
    }
    let transitions = both(text.as_bytes()).expect("valid");
    let ids: Vec<&str> = transitions.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["a", "7:0", "7:1", "flat", "3"]);
    assert_eq!(transitions[2].env_code, "class F: pass");
    assert_eq!(transitions[1].env_code, "class F: pass");
    assert_eq!(transitions[0].config_after["x"], json!(1));
    assert_eq!(transitions[0].observation, json!("{'success': True}"));
}

#[test]
fn json_lines_spans_follow_lines() {
    let lines: Vec<String> = serde_json::from_str::<Vec<Value>>(&fixture())
        .unwrap()
        .iter()
        .map(Value::to_string)
        .collect();
    let text = format!(
        "\u{feff}\n{}\n \t\n{}\n\n{}\r\n{}",
        lines[0], lines[1], lines[2], lines[3]
    );
    let spans = record_spans(text.as_bytes()).expect("lines");
    let locations: Vec<Location> = spans.iter().map(|s| s.location.clone()).collect();
    assert_eq!(
        locations,
        [
            Location::Line(2),
            Location::Line(4),
            Location::Line(6),
            Location::Line(7)
        ]
    );
    assert_eq!(both(text.as_bytes()).expect("valid").len(), 5);
}

#[test]
fn synthetic_benchmark_reads_alike() {
    let records = SyntheticBench::records(3, 2, &BenchOptions::default());
    let text = to_json_array(&records);
    let whole = both(text.as_bytes()).expect("fixture parses");
    assert_eq!(whole.len(), records.len());
}

#[test]
fn bad_files_give_the_whole_file_error() {
    let good = fixture();
    let deep = format!("[{}1{}]", "[".repeat(130), "]".repeat(130));
    let dup = to_json_array(&[
        json!({"sample_id": "a", "step_detail": step(1)}),
        json!({"sample_id": "a", "step_detail": step(2)}),
        json!({"sample_id": "b", "step_detail": {"action": 1}}),
    ]);
    let field_then_dup = to_json_array(&[
        json!({"sample_id": "a", "step_detail": step(1)}),
        json!({"sample_id": "b", "step_detail": {"action": {"name": 1}}}),
        json!({"sample_id": "a", "step_detail": step(2)}),
    ]);
    let cases: Vec<String> = vec![
        String::new(),
        "  \n".into(),
        "[]".into(),
        "[ ]".into(),
        "[1,]".into(),
        "[,1]".into(),
        "[1 2]".into(),
        "[{}}".into(),
        "[{]}".into(),
        "[\"unterminated]".into(),
        "[\"escape at end\\".into(),
        format!("{good} x"),
        format!("{good},"),
        format!("\u{c}{good}"),
        format!("\u{feff}{good}"),
        good.replacen("\"config_after\"", "\"config_aftr\"", 1),
        good.replacen("\"action\"", "\"act\"", 2),
        good.replacen("\"sample_id\":\"a\"", "\"sample_id\":\"flat\"", 1),
        good.replacen(":", "", 1),
        good.replacen("}", "", 1),
        deep,
        dup,
        field_then_dup,
        "{\"step_detail\": 5}\n{".into(),
        "{\"sample_id\": 1, \"step_detail\": {}}".into(),
    ];
    for case in &cases {
        let whole = both(case.as_bytes());
        if case != &format!("\u{feff}{good}") {
            assert!(whole.is_err(), "{case:?} should not parse");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any one-byte deletion, insertion or replacement in a valid file reads alike both ways.
    #[test]
    fn mutated_files_read_alike(at in 0usize..4000, byte in prop::sample::select(
        b"[]{},:\"\\ \n0a".to_vec()), op in 0u8..3) {
        let mut bytes = fixture().into_bytes();
        let at = at % bytes.len();
        match op {
            0 => { bytes.remove(at); }
            1 => bytes.insert(at, byte),
            _ => bytes[at] = byte,
        }
        both(&bytes).ok();
    }
}

#[test]
fn compact_records_store_states_once_and_read_as_full_ones() {
    use envsim_core::state_patch::diff_patch;
    let base = json!({"orders": {"O1": {"status": "new"}, "O2": {"status": "paid"}}, "n": 1});
    let before = json!({"orders": {"O1": {"status": "paid"}, "O2": {"status": "paid"}}, "n": 1});
    let after = json!({"orders": {"O1": {"status": "paid"}}, "n": 2});
    let sample = |id: &str| {
        json!({"sample_id": id, "env": "shop", "action": {"name": "drop", "arguments": {}},
               "observation": "ok"})
    };
    let mut full = sample("a");
    full["config_before"] = before.clone();
    full["config_after"] = after.clone();
    let mut compact = sample("a");
    compact["config_before_ref"] = json!({"state": "s1", "patch": diff_patch(&base, &before)});
    compact["config_after_ref"] = json!({"patch": diff_patch(&before, &after)});
    let state_line = json!({"state_id": "s1", "state": base});
    let full_text = format!("{full}\n");
    let compact_text = format!("{state_line}\n{compact}\n");
    let read_full = both(full_text.as_bytes()).unwrap();
    let read_compact = both(compact_text.as_bytes()).unwrap();
    assert_eq!(read_compact.len(), 1);
    assert_eq!(read_compact[0].config_before, read_full[0].config_before);
    assert_eq!(read_compact[0].config_after, read_full[0].config_after);
    assert_eq!(read_compact[0].id, "a");

    // Located errors: an unknown state, a patch that does not apply, a state stored twice.
    let mut unknown = compact.clone();
    unknown["config_before_ref"]["state"] = json!("s9");
    let text = format!("{state_line}\n{unknown}\n");
    assert_eq!(
        both(text.as_bytes()).unwrap_err().to_string(),
        "f.json: line 2: field `config_before_ref.state`: no state record \"s9\" before this record"
    );
    let mut bad = compact.clone();
    bad["config_after_ref"]["patch"] = json!([{"type": "delete", "path": ["missing"]}]);
    let text = format!("{state_line}\n{bad}\n");
    let err = both(text.as_bytes()).unwrap_err().to_string();
    assert!(
        err.starts_with("f.json: line 2: field `config_after_ref.patch`: change 0"),
        "{err}"
    );
    let text = format!("{state_line}\n{state_line}\n{compact}\n");
    assert_eq!(
        both(text.as_bytes()).unwrap_err().to_string(),
        "f.json: line 2: field `state_id`: state \"s1\" is stored twice"
    );
    let text = format!("{state_line}\n");
    assert_eq!(
        both(text.as_bytes()).unwrap_err().to_string(),
        "f.json: the benchmark holds no samples"
    );
}

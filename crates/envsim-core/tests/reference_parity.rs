//! Reference-lane parity: a corpus of named behaviours of the reference evaluator, each with the
//! outcome CPython gives, checked two ways:
//!
//! 1. envsim's reference lane (`PreparedSample::score` → `fm_ref`, `cm_ref`, outcome) must give
//!    the expected outcome;
//! 2. the expected outcome must be what CPython itself gives: `reference_parity/evaluate.py`
//!    replays the documented procedure with `json`, `ast`, `re` and `==` (run with `python3`).
//!
//! A second test generates thousands of messy outputs over synthetic transitions and compares
//! envsim with CPython on every one of them.

use std::io::Write as _;
use std::process::{Command, Stdio};

use envsim_core::prelude::*;
use envsim_core::reference::ReferenceOutcome;
use envsim_core::score::ErrorTag;
use envsim_testkit::{BenchOptions, SyntheticBench};
use serde_json::{json, Value};

/// What the reference ends with on one sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Scored { fm: bool, cm: bool },
    FailedParse,
    Crash,
}

use Expect::{Crash, FailedParse, Scored};

struct Case {
    name: &'static str,
    before: Value,
    after: Value,
    observation: String,
    output: Value,
    expect: Expect,
}

/// The standard transition: `orders.O1.status` new → paid.
fn modify() -> (Value, Value, &'static str) {
    (
        json!({"orders": {"O1": {"status": "new", "items": ["a", "b"], "total": 10}}, "users": {"U1": {"name": "Ann"}}}),
        json!({"orders": {"O1": {"status": "paid", "items": ["a", "b"], "total": 10}}, "users": {"U1": {"name": "Ann"}}}),
        "{'success': True, 'message': 'Order O1 paid'}",
    )
}

const OK_FEEDBACK: &str = "{'success': True, 'message': 'Order O1 paid'}";

fn good_change() -> Value {
    json!([{"type": "modify", "path": "orders.O1.status", "value": "paid"}])
}

/// A case on the standard transition with raw output text.
fn text(name: &'static str, output: &str, expect: Expect) -> Case {
    let (before, after, observation) = modify();
    Case {
        name,
        before,
        after,
        observation: observation.to_owned(),
        output: Value::String(output.to_owned()),
        expect,
    }
}

/// A case on its own transition, with the output object serialised as JSON.
fn on(name: &'static str, before: Value, after: Value, changes: Value, expect: Expect) -> Case {
    Case {
        name,
        before,
        after,
        observation: "{'success': True}".to_owned(),
        output: Value::String(
            json!({"feedback": "{'success': True}", "config_changes": changes}).to_string(),
        ),
        expect,
    }
}

/// A feedback case: the standard transition, no change, and this observation and feedback.
fn feedback(name: &'static str, observation: &str, predicted: Value, fm: bool) -> Case {
    let (before, _, _) = modify();
    Case {
        name,
        before: before.clone(),
        after: before,
        observation: observation.to_owned(),
        output: Value::String(json!({"feedback": predicted, "config_changes": []}).to_string()),
        expect: Scored { fm, cm: true },
    }
}

/// `((1,),)` nested `depth` deep (only `ast.literal_eval` reads it), with `space` inside the
/// brackets so two spellings of the same value differ as text.
fn tuples(depth: usize, space: &str) -> String {
    format!(
        "{}1{}",
        format!("({space}").repeat(depth),
        format!("{space},)").repeat(depth)
    )
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

fn corpus() -> Vec<Case> {
    let good = json!({"feedback": OK_FEEDBACK, "config_changes": good_change()});
    let good_json = good.to_string();
    let good_pretty = serde_json::to_string_pretty(&good).unwrap_or_default();
    let good_python = envsim_core::python::repr::to_python_repr(&good);
    let flat = json!({"feedback": "ok", "config_changes": []}).to_string();
    vec![
        // --- Extraction: what parses.
        text("clean_json_object", &good_json, Scored { fm: true, cm: true }),
        text("json_fence", &format!("```json\n{good_pretty}\n```"), Scored { fm: true, cm: true }),
        text("bare_fence", &format!("```\n{good_json}\n```"), Scored { fm: true, cm: true }),
        text("uppercase_json_fence_tag", &format!("```JSON\n{good_json}\n```"), Scored { fm: true, cm: true }),
        text("long_s_matches_s_in_fence_tag", &format!("```j\u{17f}on\n{good_json}\n```"), Scored { fm: true, cm: true }),
        text("fence_with_prose_around", &format!("Here you go:\n```json\n{good_json}\n```\nDone."), Scored { fm: true, cm: true }),
        text("unclosed_think_then_json_fence", &format!("<think>Let me see {{\"draft\": 1}}\n```json\n{good_json}\n```"), Scored { fm: true, cm: true }),
        text("python_literal_in_fence", &format!("```\n{good_python}\n```"), Scored { fm: true, cm: true }),
        text("trailing_commas_without_json_literals_in_fence", &format!("```json\n{{'feedback': '{OK_FEEDBACK_ESCAPED}', 'config_changes': [{{'type': 'modify', 'path': 'orders.O1.status', 'value': 'paid'}},],}}\n```"), Scored { fm: true, cm: true }),
        text("trailing_commas_with_true_fail_both_parsers", "```json\n{\"feedback\": true, \"config_changes\": [],}\n```", FailedParse),
        text("nan_value_accepted_by_json_loads", &json!({"feedback": OK_FEEDBACK, "config_changes": [{"type": "modify", "path": "orders.O1.total", "value": 1}]}).to_string().replace("1}]", "NaN}]"), Scored { fm: true, cm: false }),
        text("prose_around_flat_object", &format!("Sure! {flat} Hope it helps."), Scored { fm: false, cm: false }),
        text("whole_text_json_with_whitespace", &format!("\n\n  {good_json}  \n"), Scored { fm: true, cm: true }),
        text("flat_python_literal_found_by_brace_match", "Result: {'feedback': 'ok', 'config_changes': []} end", Scored { fm: false, cm: false }),
        // --- Extraction: what fails or mis-scores.
        text("prose_around_nested_object_fails", &format!("Answer: {good_json} Thanks"), FailedParse),
        text("bare_nested_python_literal_fails", &good_python, FailedParse),
        text("python_fence_tag_is_captured_and_fails", &format!("```python\n{good_json}\n```"), FailedParse),
        text("python_fence_with_flat_json_found_by_braces", &format!("```python\n{flat}\n```"), Scored { fm: false, cm: false }),
        text("python_fence_with_nested_python_literal_fails", &format!("```python\n{good_python}\n```"), FailedParse),
        text("raw_newline_inside_string_fails", &format!("```json\n{{\"feedback\": \"line one\nline two\", \"config_changes\": {}}}\n```", good_change()), FailedParse),
        text("think_draft_fragment_is_scored", &format!("<think>Maybe {{\"draft\": true}} first.</think>\n{good_json}"), Scored { fm: false, cm: false }),
        text("closed_think_json_fence_wins", &format!("<think>Maybe {{\"draft\": true}}</think>\n```json\n{good_json}\n```"), Scored { fm: true, cm: true }),
        text("fence_inside_json_string_with_escaped_newlines_parses_whole_document", &json!({"feedback": "```\n{'success': False}\n```", "config_changes": good_change()}).to_string(), Scored { fm: false, cm: true }),
        text("parseable_fence_inside_json_string_wins", &json!({"feedback": "```{'success': False}```", "config_changes": good_change()}).to_string(), Scored { fm: false, cm: false }),
        text("json_null_is_a_failed_parse", "null", FailedParse),
        text("empty_output_is_a_failed_parse", "", FailedParse),
        text("no_object_at_all", "I cannot do that.", FailedParse),
        text("unclosed_fence_falls_back_to_whole_text", &format!("```json\n{good_json}"), FailedParse),
        text("bom_before_json_falls_back_to_braces", &format!("\u{feff}{flat}"), Scored { fm: false, cm: false }),
        text("top_level_list_crashes", &format!("[{good_json}]"), Crash),
        text("top_level_string_crashes", "\"just text\"", Crash),
        text("top_level_number_crashes", "42", Crash),
        text("json_fence_holding_a_list_crashes", "```json\n[1, 2]\n```", Crash),
        text("empty_fence_falls_through", &format!("``````\n{flat}"), Scored { fm: false, cm: false }),
        text("single_brace_pair_python_set_crashes", "note {1, 2} here", Crash),
        text("json_depth_988_parses", &format!("```json\n{}\n```", nested(988)), Crash),
        text("json_depth_989_raises_and_falls_through", &format!("```json\n{}\n```", nested(989)), FailedParse),
        // --- Feedback normalisation (FM-ref).
        feedback("feedback_fence_any_case", "{'success': True}", json!("```JSON\n{\"success\": true}\n```"), true),
        feedback("feedback_bare_fence", "{'success': True}", json!("```\n{'success': True}\n```"), true),
        feedback("feedback_leading_newline_space_flat_found_by_braces", "{'success': True}", json!("\n {'success': True}  \n"), true),
        feedback("feedback_leading_newline_space_nested_raises", "{'success': True, 'data': {'a': 1}}", json!("\n {'success': True, 'data': {'a': 1}}  \n"), false),
        feedback("feedback_json_notation_equals_python_repr", "{'success': True, 'data': {'a': 1}}", json!("{\"success\": true, \"data\": {\"a\": 1}}"), true),
        feedback("feedback_flat_json_and_python_agree", "{'success': True, 'count': 1}", json!("{\"success\": true, \"count\": 1.0}"), true),
        feedback("feedback_object_instead_of_string", "{'success': True, 'data': {'a': 1}}", json!({"success": true, "data": {"a": 1}}), true),
        feedback("feedback_brace_fragment_leniency", "Created {'id': 5}", json!("Deleted {'id': 5} failed"), true),
        feedback("feedback_wording_is_strict", "{'success': False, 'error': 'Order not found'}", json!("{'success': False, 'error': 'order not found'}"), false),
        feedback("feedback_quoted_inside", "{'success': True}", json!("'{\"success\": true}'"), true),
        feedback("feedback_tuple_is_not_list", "{'success': True, 'data': [1, 2]}", json!("{'success': True, 'data': (1, 2)}"), false),
        feedback("feedback_one_equals_true", "{'success': True, 'n': 1}", json!("{'success': 1, 'n': True}"), true),
        feedback("feedback_missing_is_none", "None", Value::Null, true),
        feedback("feedback_top_level_nan_never_equal", "NaN", json!("NaN"), false),
        feedback("feedback_nan_in_list_is_identical_object", "[NaN]", json!("[NaN]"), true),
        feedback("feedback_plain_text_equal", "Task finished", json!("Task finished"), true),
        feedback("feedback_plain_text_strip_not_applied", "Task finished", json!(" Task finished"), false),
        feedback("feedback_set_equality", "{'tags': {'a', 'b'}}", json!("{'tags': {'b', 'a'}}"), true),
        feedback("feedback_bytes_not_str", "{'v': b'a'}", json!("{'v': 'a'}"), false),
        feedback("feedback_int_keys_not_str_keys", "{1: 'a'}", json!("{'1': 'a'}"), false),
        feedback("feedback_complex_equals_real", "{'v': 1}", json!("{'v': 1+0j}"), true),
        feedback("feedback_literal_depth_200_parses", &tuples(200, ""), json!(tuples(200, " ")), true),
        feedback("feedback_literal_depth_201_raises", &tuples(201, ""), json!(tuples(201, " ")), false),
        // --- apply_change.
        on("non_numeric_part_into_list_is_skipped", json!({"bills": {"BL-7006": {"allergies": ["x"], "paid": false}}}), json!({"bills": {"BL-7006": {"allergies": ["x"], "paid": true}}}), json!([{"type": "add", "path": "bills.BL-7006.allergies.x", "value": 1}, {"type": "modify", "path": "bills.BL-7006.paid", "value": true}]), Scored { fm: true, cm: true }),
        on("part_below_scalar_is_skipped", json!({"transactions": {"TX70016": {"type": "debit", "ok": false}}}), json!({"transactions": {"TX70016": {"type": "debit", "ok": true}}}), json!([{"type": "modify", "path": "transactions.TX70016.type.sub", "value": 1}, {"path": "transactions.TX70016.ok", "value": true}]), Scored { fm: true, cm: true }),
        on("negative_list_index_sets", json!({"seats": {"seat_ids": [1, 2, 3]}}), json!({"seats": {"seat_ids": [1, 2, 9]}}), json!([{"type": "modify", "path": "seats.seat_ids.-1", "value": 9}]), Scored { fm: true, cm: true }),
        on("negative_index_beyond_start_crashes", json!({"seats": {"seat_ids": [1]}}), json!({"seats": {"seat_ids": [9]}}), json!([{"type": "modify", "path": "seats.seat_ids.-5", "value": 9}]), Crash),
        on("negative_index_delete_is_refused", json!({"s": {"ids": [1, 2]}}), json!({"s": {"ids": [1]}}), json!([{"type": "delete", "path": "s.ids.-1"}]), Scored { fm: true, cm: false }),
        on("integer_part_in_key_list_stays_integer", json!({"lines": {"2": {"qty": 1}}}), json!({"lines": {"2": {"qty": 5}}}), json!([{"type": "modify", "path": ["lines", 2, "qty"], "value": 5}]), Scored { fm: true, cm: false }),
        on("string_part_in_key_list_matches", json!({"lines": {"2": {"qty": 1}}}), json!({"lines": {"2": {"qty": 5}}}), json!([{"type": "modify", "path": ["lines", "2", "qty"], "value": 5}]), Scored { fm: true, cm: true }),
        on("config_changes_empty_string_is_no_change", json!({"a": 1}), json!({"a": 1}), json!(""), Scored { fm: true, cm: true }),
        on("config_changes_empty_dict_is_no_change", json!({"a": 1}), json!({"a": 2}), json!({}), Scored { fm: true, cm: false }),
        on("config_changes_null_crashes", json!({"a": 1}), json!({"a": 1}), Value::Null, Crash),
        on("config_changes_list_of_strings_crashes", json!({"a": 1}), json!({"a": 2}), json!(["a=2"]), Crash),
        on("config_changes_path_to_value_dict_crashes", json!({"a": 1}), json!({"a": 2}), json!({"a": 2}), Crash),
        on("config_changes_number_crashes", json!({"a": 1}), json!({"a": 1}), json!(3), Crash),
        on("config_changes_nonempty_string_crashes", json!({"a": 1}), json!({"a": 1}), json!("none"), Crash),
        on("change_entry_number_crashes", json!({"a": 1}), json!({"a": 2}), json!([{"path": "a", "value": 2}, 7]), Crash),
        on("unhashable_list_part_crashes", json!({"a": {}}), json!({"a": {"x": 1}}), json!([{"type": "add", "path": ["a", ["x"]], "value": 1}]), Crash),
        on("unhashable_dict_part_crashes", json!({"a": {}}), json!({"a": {"x": 1}}), json!([{"type": "add", "path": ["a", {"k": 1}], "value": 1}]), Crash),
        on("unhashable_last_part_on_delete_crashes", json!({"a": {"x": 1}}), json!({"a": {}}), json!([{"type": "delete", "path": ["a", ["x"]]}]), Crash),
        on("correct_delete_fails", json!({"users": {"U1": {"n": 1}, "U2": {"n": 2}}}), json!({"users": {"U1": {"n": 1}}}), json!([{"type": "delete", "path": "users.U2"}]), Scored { fm: true, cm: false }),
        on("removed_type_deletes_too", json!({"users": {"U1": {"n": 1}, "U2": {"n": 2}}}), json!({"users": {"U1": {"n": 1}}}), json!([{"type": "removed", "path": "users.U2"}]), Scored { fm: true, cm: false }),
        on("null_left_behind_passes_a_removal", json!({"users": {"U1": {"n": 1}, "U2": {"n": 2}}}), json!({"users": {"U1": {"n": 1}}}), json!([{"type": "modify", "path": "users.U2", "value": null}]), Scored { fm: true, cm: true }),
        on("unknown_type_without_value_sets_none", json!({"users": {"U1": {"n": 1}, "U2": {"n": 2}}}), json!({"users": {"U1": {"n": 1}}}), json!([{"type": "remove", "path": "users.U2"}]), Scored { fm: true, cm: true }),
        on("after_used_when_value_absent", json!({"a": 1}), json!({"a": 2}), json!([{"type": "modified", "path": "a", "before": 1, "after": 2}]), Scored { fm: true, cm: true }),
        on("value_null_wins_over_after", json!({"a": 1}), json!({"a": 2}), json!([{"path": "a", "value": null, "after": 2}]), Scored { fm: true, cm: false }),
        on("json_pointer_path_fails", json!({"a": {"b": 1}}), json!({"a": {"b": 2}}), json!([{"type": "modify", "path": "/a/b", "value": 2}]), Scored { fm: true, cm: false }),
        on("key_list_path_passes", json!({"a": {"b": 1}}), json!({"a": {"b": 2}}), json!([{"type": "modify", "path": ["a", "b"], "value": 2}]), Scored { fm: true, cm: true }),
        on("dotted_key_correct_key_list_fails", json!({"files": {"a.txt": 1}}), json!({"files": {"a.txt": 2}}), json!([{"type": "modify", "path": ["files", "a.txt"], "value": 2}]), Scored { fm: true, cm: false }),
        on("dotted_key_split_path_passes", json!({"files": {"a.txt": 1}}), json!({"files": {"a.txt": 2}}), json!([{"type": "modify", "path": "files.a.txt", "value": 2}]), Scored { fm: true, cm: true }),
        on("spurious_writes_are_ignored", json!({"a": 1, "b": 1}), json!({"a": 2, "b": 1}), json!([{"path": "a", "value": 2}, {"path": "b", "value": 99}, {"path": "z", "value": 0}]), Scored { fm: true, cm: true }),
        on("no_change_is_vacuously_correct", json!({"a": 1}), json!({"a": 1}), json!([{"path": "a", "value": 42}]), Scored { fm: true, cm: true }),
        on("list_wrong_order_fails", json!({"l": {"items": [1, 2]}}), json!({"l": {"items": [1, 2, 3]}}), json!([{"type": "modify", "path": "l.items", "value": [2, 1, 3]}]), Scored { fm: true, cm: false }),
        on("list_element_index_write_matches_whole_list", json!({"l": {"items": [1, 2]}}), json!({"l": {"items": [1, 2, 3]}}), json!([{"type": "add", "path": "l.items.2", "value": 3}]), Scored { fm: true, cm: true }),
        on("list_padding_with_none", json!({"l": {"items": [1]}}), json!({"l": {"items": [1, null, 3]}}), json!([{"type": "add", "path": "l.items.2", "value": 3}]), Scored { fm: true, cm: true }),
        on("intermediate_list_padding_with_dicts", json!({"l": {"items": []}}), json!({"l": {"items": [{}, {"k": 1}]}}), json!([{"type": "add", "path": "l.items.1.k", "value": 1}]), Scored { fm: true, cm: true }),
        on("moderate_padding_is_reproduced", json!({"l": {"items": []}}), json!({"l": {"items": [null]}}), json!([{"type": "add", "path": "l.items.100000", "value": 1}]), Scored { fm: true, cm: false }),
        on("number_path_becomes_str_key", json!({"5": 0}), json!({"5": 1}), json!([{"path": 5, "value": 1}]), Scored { fm: true, cm: true }),
        on("float_path_uses_python_repr", json!({"1.0": 0}), json!({"1.0": 1}), json!([{"path": 1.0, "value": 1}]), Scored { fm: true, cm: false }),
        on("zero_path_is_falsy_and_skipped", json!({"0": 0}), json!({"0": 1}), json!([{"path": 0, "value": 1}]), Scored { fm: true, cm: false }),
        on("empty_key_list_is_skipped", json!({"a": 0}), json!({"a": 0}), json!([{"path": [], "value": 1}]), Scored { fm: true, cm: true }),
        on("type_null_sets_value", json!({"a": 0}), json!({"a": 1}), json!([{"type": null, "path": "a", "value": 1}]), Scored { fm: true, cm: true }),
        on("unicode_digit_list_index", json!({"l": {"v": [0, 0, 0, 0]}}), json!({"l": {"v": [0, 0, 0, 7]}}), json!([{"path": "l.v.\u{663}", "value": 7}]), Scored { fm: true, cm: true }),
        on("whitespace_and_underscore_list_index", json!({"l": {"v": [0, 0]}}), json!({"l": {"v": [0, 5]}}), json!([{"path": ["l", "v", " 1 "], "value": 5}, {"path": "l.v.0_0", "value": 0}]), Scored { fm: true, cm: true }),
        on("bool_part_indexes_a_list", json!({"l": {"v": [0, 0]}}), json!({"l": {"v": [0, 4]}}), json!([{"path": ["l", "v", true], "value": 4}]), Scored { fm: true, cm: true }),
        on("float_value_equals_int_truth", json!({"a": 1}), json!({"a": 2}), json!([{"path": "a", "value": 2.0}]), Scored { fm: true, cm: true }),
        on("true_equals_one", json!({"a": 0}), json!({"a": 1}), json!([{"path": "a", "value": true}]), Scored { fm: true, cm: true }),
        on("delete_of_missing_key_is_fine", json!({"a": 0}), json!({"a": 1}), json!([{"type": "delete", "path": "zz"}, {"path": "a", "value": 1}]), Scored { fm: true, cm: true }),
        on("later_change_writes_into_inserted_value", json!({"a": {}}), json!({"a": {"x": {"y": 2}}}), json!([{"path": "a.x", "value": {"y": 1}}, {"path": "a.x.y", "value": 2}]), Scored { fm: true, cm: true }),
        on("list_delete_pops_in_range", json!({"l": {"v": [1, 2, 3]}}), json!({"l": {"v": [1, 3]}}), json!([{"type": "delete", "path": "l.v.1"}]), Scored { fm: true, cm: true }),
    ]
}

const OK_FEEDBACK_ESCAPED: &str = "{\\'success\\': True, \\'message\\': \\'Order O1 paid\\'}";

fn transition(before: &Value, after: &Value, observation: &str) -> Transition {
    envsim_testkit::transition(before.clone(), after.clone(), json!(observation))
}

fn envsim_outcome(case: &Case) -> Expect {
    let mut sample = PreparedSample::new(transition(&case.before, &case.after, &case.observation));
    let prediction = match &case.output {
        Value::String(text) => Prediction::Raw(text.clone()),
        other => Prediction::Parsed(other["parsed"].clone()),
    };
    let score = sample.score(&prediction, None);
    assert_eq!(
        score.errors.contains(&ErrorTag::ReferenceCrash),
        score.reference_outcome == ReferenceOutcome::Crash,
        "{}: the crash tag follows the outcome",
        case.name
    );
    match score.reference_outcome {
        ReferenceOutcome::Scored => Scored {
            fm: score.fm_ref,
            cm: score.cm_ref,
        },
        ReferenceOutcome::FailedParse => FailedParse,
        ReferenceOutcome::Crash => Crash,
        other => panic!("{}: unexpected outcome {other:?}", case.name),
    }
}

/// Runs the CPython oracle over the cases; one outcome per case.
fn python_outcomes(cases: &[(Value, Value, String, Value)]) -> Vec<(Expect, Option<String>)> {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/reference_parity/evaluate.py"
    );
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect(
            "python3 must be on PATH for the reference parity tests (CPython 3.11 is the oracle)",
        );
    let mut input = String::new();
    for (before, after, observation, output) in cases {
        let line =
            json!({"before": before, "after": after, "observation": observation, "output": output});
        input.push_str(&line.to_string());
        input.push('\n');
    }
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().expect("python3 runs");
    writer.join().expect("writer thread").expect("write cases");
    assert!(
        output.status.success(),
        "python3 failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("oracle line is JSON");
            let outcome = match v["outcome"].as_str() {
                Some("scored") => Scored {
                    fm: v["fm"] == true,
                    cm: v["cm"] == true,
                },
                Some("failed_parse") => FailedParse,
                _ => Crash,
            };
            (outcome, v["crash"].as_str().map(str::to_owned))
        })
        .collect()
}

#[test]
fn corpus_has_distinct_names_and_enough_behaviours() {
    let cases = corpus();
    let mut names: Vec<&str> = cases.iter().map(|c| c.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), cases.len(), "case names are unique");
    assert!(cases.len() >= 60, "{} cases", cases.len());
}

#[test]
fn envsim_reference_lane_matches_the_corpus() {
    let failures: Vec<String> = corpus()
        .iter()
        .filter_map(|case| {
            let got = envsim_outcome(case);
            (got != case.expect).then(|| {
                format!(
                    "{}: expected {:?}, envsim {:?}",
                    case.name, case.expect, got
                )
            })
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn corpus_expectations_are_what_cpython_gives() {
    let cases = corpus();
    let inputs: Vec<(Value, Value, String, Value)> = cases
        .iter()
        .map(|c| {
            (
                c.before.clone(),
                c.after.clone(),
                c.observation.clone(),
                c.output.clone(),
            )
        })
        .collect();
    let outcomes = python_outcomes(&inputs);
    assert_eq!(outcomes.len(), cases.len());
    let failures: Vec<String> = cases
        .iter()
        .zip(&outcomes)
        .filter(|(case, (got, _))| *got != case.expect)
        .map(|(case, (got, crash))| {
            format!(
                "{}: expected {:?}, CPython {:?} {:?}",
                case.name, case.expect, got, crash
            )
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn generated_outputs_agree_with_cpython() {
    // Small states keep the oracle fast; the shapes (nested dicts, lists, dotted keys,
    // removals) are those of the default fixture.
    let options = BenchOptions {
        users: 10,
        ..BenchOptions::default()
    };
    let records = SyntheticBench::records(7, 3, &options);
    let mut inputs = Vec::new();
    let mut owners = Vec::new();
    for (index, record) in records.iter().enumerate() {
        let step = &record["step_detail"];
        let observation = step["observation"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        for output in envsim_testkit::messy_outputs(record, 1000 + index as u64) {
            inputs.push((
                step["config_before"].clone(),
                step["config_after"].clone(),
                observation.clone(),
                Value::String(output),
            ));
            owners.push(index);
        }
    }
    assert!(inputs.len() >= 2000, "{} generated outputs", inputs.len());
    let outcomes = python_outcomes(&inputs);
    assert_eq!(outcomes.len(), inputs.len());
    // One prepared sample per record, scored against all of its outputs (as `envsim score` does).
    let mut samples: Vec<PreparedSample> = records
        .iter()
        .map(|record| {
            let step = &record["step_detail"];
            PreparedSample::new(transition(
                &step["config_before"],
                &step["config_after"],
                step["observation"]["content"].as_str().unwrap_or_default(),
            ))
        })
        .collect();
    let mut disagreements = Vec::new();
    let mut by_outcome = std::collections::BTreeMap::new();
    for (((_, _, _, output), (expected, crash)), &owner) in
        inputs.iter().zip(&outcomes).zip(&owners)
    {
        let Value::String(text) = output else {
            continue;
        };
        let score = samples[owner].score(&Prediction::Raw(text.clone()), None);
        let got = match score.reference_outcome {
            ReferenceOutcome::Scored => Scored {
                fm: score.fm_ref,
                cm: score.cm_ref,
            },
            ReferenceOutcome::FailedParse => FailedParse,
            _ => Crash,
        };
        *by_outcome.entry(format!("{expected:?}")).or_insert(0usize) += 1;
        if got != *expected {
            disagreements.push(format!(
                "output {text}\n  CPython {expected:?} {crash:?}, envsim {got:?} {:?}",
                score.reference_crash
            ));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {} disagree:\n{}",
        disagreements.len(),
        inputs.len(),
        disagreements
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The generator must exercise every outcome and both verdicts, or the test proves little.
    assert!(by_outcome.len() >= 5, "{by_outcome:?}");
}

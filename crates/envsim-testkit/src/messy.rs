//! Messy simulator outputs for differential tests of the two scoring lanes: every way of
//! writing an answer (and of getting it wrong) that the reference evaluator's parsing and change
//! application treat specially, combined at random.

use envsim_core::diff::{changes_to_json, fine_diff, reference_diff, PathStyle, ReferenceEquality};
use envsim_core::python::repr::to_python_repr;
use serde_json::{json, Value};

use crate::Rng;

/// `count` raw outputs for a reference-format record (`step_detail` form), seeded: bodies right
/// and wrong (path styles, change vocabularies, deletes written as `null`, spurious, missing and
/// wrong changes, malformed change lists, odd feedback) in wrappers (fences with various tags,
/// prose, `<think>` drafts, Python literals, trailing commas, `NaN`, raw newlines, truncation).
pub fn messy_outputs(record: &Value, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    (0..64).map(|_| messy_output(record, &mut rng)).collect()
}

fn body(record: &Value, rng: &mut Rng) -> Value {
    let step = &record["step_detail"];
    let (before, after) = (&step["config_before"], &step["config_after"]);
    let truth = step["observation"]["content"].clone();
    let style = [
        PathStyle::Dotted,
        PathStyle::Dotted,
        PathStyle::Keys,
        PathStyle::Pointer,
    ][rng.below(4)];
    let mut changes = if rng.chance(0.3) {
        // The reference's own vocabulary and whole-subtree granularity.
        Value::Array(
            reference_diff(before, after, ReferenceEquality::Python)
                .iter()
                .map(|c| {
                    json!({"path": c.pointer.to_dotted(), "type": c.kind.reference_word(),
                           "before": c.before, "after": c.after})
                })
                .collect(),
        )
    } else {
        changes_to_json(&fine_diff(before, after), style)
    };
    if let Some(items) = changes.as_array_mut() {
        match rng.below(12) {
            0 => {
                items.pop();
            }
            1 => items.push(json!({"type": "modify", "path": "users.U0000.balance", "value": 0})),
            2 => {
                if let Some(first) = items.first_mut() {
                    first["value"] = json!("???");
                }
            }
            3 => {
                // Deletes written as a write of null.
                for item in items.iter_mut() {
                    if item["type"] == "delete" || item["type"] == "removed" {
                        item["type"] = json!("modify");
                        item["value"] = Value::Null;
                    }
                }
            }
            4 => items.push(json!({"type": "add", "path": ["orders", 2, "x"], "value": 1})),
            5 => {
                items.push(json!({"type": "modify", "path": "users.U0001.tags.-1", "value": "vip"}))
            }
            6 => items.push(json!({"type": "modify", "path": "users.U0001.tags.x", "value": 1})),
            7 => {
                items.push(json!({"type": "modify", "path": "users.U0001.name.first", "value": 1}))
            }
            8 => items.push(json!({"path": 5, "value": 1})),
            _ => {}
        }
    }
    let changes = match rng.below(40) {
        0 => Value::Null,
        1 => json!(""),
        2 => json!({}),
        3 => json!({"users.U0000.balance": 1}),
        4 => json!(["users.U0000.balance = 1"]),
        5 => json!([{"type": "add", "path": ["users", ["x"]], "value": 1}]),
        6 => json!([{"type": "modify", "path": "users.U0001.tags.-9", "value": 1}]),
        _ => changes,
    };
    let feedback = match rng.below(10) {
        0 => Value::Null,
        1 => json!("{'success': True}"),
        2 => match truth.as_str().map(envsim_core::python::PyValue::str) {
            // The same value in JSON notation.
            Some(v) => Value::String(
                envsim_core::reference::extract::parse_to_obj(&v)
                    .to_json_lossy()
                    .to_string(),
            ),
            None => truth.clone(),
        },
        3 => Value::String(format!("Result: {}", truth.as_str().unwrap_or_default())),
        4 => Value::String(format!("```\n{}\n```", truth.as_str().unwrap_or_default())),
        5 => Value::String(format!("\n {}  \n", truth.as_str().unwrap_or_default())),
        _ => truth,
    };
    json!({"feedback": feedback, "config_changes": changes})
}

fn messy_output(record: &Value, rng: &mut Rng) -> String {
    let body = body(record, rng);
    let compact = body.to_string();
    let pretty = serde_json::to_string_pretty(&body).unwrap_or_default();
    let python = to_python_repr(&body);
    match rng.below(22) {
        0 | 1 => compact,
        2 => pretty,
        3 => format!("```json\n{pretty}\n```"),
        4 => format!("```JSON\n{compact}\n```"),
        5 => format!("```\n{python}\n```"),
        6 => format!("```python\n{python}\n```"),
        7 => format!("Here is the result:\n{compact}\nLet me know."),
        8 => format!("<think>Start from {{\"draft\": true}} and check.</think>\n{compact}"),
        9 => format!("<think>Start from {{\"draft\": true}}\n```json\n{compact}\n```"),
        10 => python,
        11 => format!("```json\n{}\n```", python.replace("]}", ",],}")),
        12 => compact.replace("]}", ",]}"),
        13 => compact
            .replacen(":0", ":NaN", 1)
            .replacen(": 0", ": NaN", 1),
        14 => format!("```json\n{}\n```", compact.replacen("\\n", "\n", 1)),
        15 => format!("\u{feff}{compact}"),
        16 => compact
            .get(..compact.len() / 2)
            .unwrap_or_default()
            .to_owned(),
        17 => format!("Answer: {{\"feedback\": \"ok\", \"config_changes\": []}} then {compact}"),
        18 => format!("```json\n{compact}"),
        19 => format!("[{compact}]"),
        20 => body["feedback"].to_string(),
        _ => format!("{compact}\n\n```json\n{{}}\n```"),
    }
}

//! The reference lane must never panic, whatever the model wrote, and must leave its prepared
//! state exactly as it found it.
//!
//! The input is raw model output. It is scored against transitions of different shapes through
//! the whole reference lane (extraction, `parse_to_obj`, `apply_change`, the config check), and
//! the raw bytes also go straight into the Python parsers, which read generalized UTF-8 and must
//! cope with any byte sequence.
#![no_main]

use envsim_core::python::{json_loads, literal_eval, repr};
use envsim_core::reference::extract::{extract_json, parse_to_obj, JSON_DEPTH_IN_EVALUATE};
use envsim_core::reference::{ReferenceOutcome, ReferenceTruth};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let _ = json_loads(data, JSON_DEPTH_IN_EVALUATE);
    let _ = literal_eval(data);
    let parsed = extract_json(data, JSON_DEPTH_IN_EVALUATE);
    let _ = parse_to_obj(&parsed);

    let text = String::from_utf8_lossy(data);
    let transitions = [
        (
            json!({"orders": {"O1": {"status": "new", "items": ["a", {"k": 1}]}}, "n": 1}),
            json!({"orders": {"O1": {"status": "paid", "items": ["a", {"k": 2}]}}}),
            json!("{'success': True, 'data': {'id': (1, 2)}}"),
        ),
        (json!({}), json!({"a.b": [1, 2]}), json!("Task finished")),
        (json!({"l": [[1], {"2": null}]}), json!({"l": [[1], {"2": null}]}), json!("NaN")),
    ];
    for (before, after, observation) in &transitions {
        let mut truth = ReferenceTruth::new(before, after, observation);
        let state = repr(truth.state());
        let verdict = truth.score_text(&text);
        assert_eq!(repr(truth.state()), state, "the state is restored");
        if verdict.outcome != ReferenceOutcome::Scored {
            assert!(!verdict.fm && !verdict.cm);
        }
        assert_eq!(verdict.crash.is_some(), verdict.outcome == ReferenceOutcome::Crash);
    }
});

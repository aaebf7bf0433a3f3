//! Applying any change list to any state must never panic, and undo must restore the state.
//!
//! Input: `STATE \n---\n CHANGES [\n---\n AFTER]`, each part JSON.
#![no_main]

use envsim_core::apply::apply_in_place;
use envsim_core::delta::Delta;
use envsim_core::prelude::*;
use envsim_core::python::{repr, PyValue};
use envsim_core::reference::ReferenceTruth;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut parts = text.splitn(3, "\n---\n");
    let (Some(state), Some(changes)) = (parts.next(), parts.next()) else { return };
    let (Ok(mut state), Ok(changes)) = (serde_json::from_str::<Value>(state), serde_json::from_str::<Value>(changes)) else {
        return;
    };
    let original = state.clone();
    let applied = apply_in_place(&mut state, &Delta::from_value(&changes));
    applied.undo.undo(&mut state);
    assert_eq!(state, original);

    // The reference lane applies the same list with the reference's `apply_change` on Python
    // objects and must restore its state too.
    let mut truth = ReferenceTruth::new(&original, &original, &json!("{'success': True}"));
    let before = repr(truth.state());
    let output = PyValue::from_json(&json!({"feedback": "", "config_changes": changes}));
    let _ = truth.score_parsed(&output);
    assert_eq!(repr(truth.state()), before);

    let after = parts.next().and_then(|a| serde_json::from_str::<Value>(a).ok()).unwrap_or_else(|| original.clone());
    let transition = Transition {
        id: "fuzz".into(),
        origin: Origin { record: 0, step: None },
        env_id: None,
        task_id: None,
        action: Action { name: "f".into(), arguments: Default::default() },
        observation: json!("{'success': True}"),
        config_before: original.clone(),
        config_after: after,
        stored_change_count: None,
        env_code: String::new(),
    };
    let mut sample = PreparedSample::new(transition);
    let _ = sample.score(&Prediction::Parsed(json!({"feedback": "", "config_changes": changes})), None);
    assert_eq!(sample.transition().config_before, original);
});

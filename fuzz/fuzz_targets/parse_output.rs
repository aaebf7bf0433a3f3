//! Model-output parsing must never panic, whatever the text.
#![no_main]

use envsim_core::extract::extract_object;
use envsim_core::literal::{parse_literal, Dialect};
use envsim_core::score::OUTPUT_KEYS;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(found) = extract_object(&text, &OUTPUT_KEYS) {
        // The span must point into the original text.
        assert!(found.span.end <= text.len());
    }
    for dialect in [Dialect::Json, Dialect::Python, Dialect::Relaxed] {
        let _ = parse_literal(&text, dialect);
    }
    let _ = envsim_core::reference::extract::parse_to_obj(&envsim_core::python::PyValue::str(&text));
});

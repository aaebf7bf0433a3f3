//! Slicing any environment source must never panic, and the footprint slice must cover the
//! reads it was cut for.
//!
//! The input is the environment's Python source (bytes, read as lossy UTF-8). It is sliced for
//! every method or function name it defines (at most eight) and one it does not, in both
//! conventions (class, database); a state is made up from
//! the instance attributes the slicer found (objects with a few entries, a list, a scalar) and
//! arguments from the tool parameters that key them, so `slice_state` cuts real objects. Then
//! `footprint`, `slice_with_reads` and `slice_covers` run on reads drawn from that state.
#![no_main]

use envsim_core::pointer::JsonPointer;
use envsim_core::slice::{
    footprint, slice_code_as, slice_covers, slice_state, slice_with_reads, AttrUse, Convention,
    KeyPart,
};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

/// Names after `def ` in the text (a cheap scan; the slicer decides what they are).
fn def_names(text: &str) -> Vec<&str> {
    let mut names = Vec::new();
    for piece in text.split("def ").skip(1) {
        let end = piece
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(piece.len());
        if end > 0 && !names.contains(&&piece[..end]) {
            names.push(&piece[..end]);
        }
        if names.len() == 8 {
            break;
        }
    }
    names
}

/// Every path of `value` down to depth 3, plus a missing key under each object.
fn paths(value: &Value, at: &JsonPointer, depth: usize, out: &mut Vec<JsonPointer>) {
    if depth == 3 {
        return;
    }
    match value {
        Value::Object(map) => {
            out.push(at.child("__missing__"));
            for (k, v) in map {
                let p = at.child(k.as_str());
                out.push(p.clone());
                paths(v, &p, depth + 1, out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let p = at.child(i.to_string());
                out.push(p.clone());
                paths(v, &p, depth + 1, out);
            }
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut tools = def_names(&text);
    tools.push("no_such_tool");
    let calls = tools
        .iter()
        .flat_map(|&tool| [(tool, Convention::Class), (tool, Convention::Database)]);
    for (tool, convention) in calls {
        let code = slice_code_as(&text, tool, convention);
        if code.fallback.is_some() {
            assert!(code.full, "a fallback shows the whole code");
            assert_eq!(code.source, text, "a fallback shows the code as it is");
        }
        // A state with every attribute the slice names, and arguments for the keyed ones.
        let mut state = Map::new();
        let mut args = Map::new();
        for (i, (attr, usage)) in code.attributes.iter().enumerate() {
            let value = match i % 3 {
                0 => json!({"k1": {"v": 1}, "7": [1, 2], "k2": "x"}),
                1 => json!([{"k1": 1}]),
                _ => json!(i),
            };
            state.insert(attr.clone(), value);
            if let AttrUse::Keys(params) = usage {
                for (j, p) in params.iter().enumerate() {
                    let arg = if j % 2 == 0 { json!("k1") } else { json!(7) };
                    args.insert(p.clone(), arg);
                }
            }
            if let AttrUse::Entries(keys) = usage {
                for part in keys.iter().flatten() {
                    if let KeyPart::Arg(p)
                    | KeyPart::Lower(p)
                    | KeyPart::Upper(p)
                    | KeyPart::Strip(p) = part
                    {
                        args.insert(p.clone(), json!("K1"));
                    }
                }
            }
        }
        state.insert("unused_by_the_tool".into(), json!({"k1": 0}));
        let state = Value::Object(state);
        let sliced = slice_state(&code, &args, &state);
        // Every table kept whole says why.
        let whole: Vec<_> = sliced
            .kept
            .iter()
            .filter(|p| p.tokens().len() <= 1)
            .collect();
        let explained: Vec<_> = sliced.reasons.iter().map(|r| &r.table).collect();
        assert_eq!(whole, explained, "a reason per table kept whole");
        // The slice is a subtree of the state: every kept pointer resolves to the same value.
        for kept in &sliced.kept {
            assert_eq!(kept.get(&sliced.state), kept.get(&state), "kept {kept}");
        }
        let mut reads = Vec::new();
        paths(&state, &JsonPointer::root(), 0, &mut reads);
        // Reads drawn from the state (every other one, and all of them): the footprint slice
        // holds each of them as the full state has it.
        for reads in [reads.iter().step_by(2).cloned().collect::<Vec<_>>(), reads] {
            let _ = footprint(&state, &reads);
            let slice = slice_with_reads(&state, &reads);
            assert_eq!(
                slice_covers(&state, &slice, &reads),
                Ok(()),
                "footprint slice of {reads:?}"
            );
            let _ = slice_covers(&state, &sliced.state, &reads);
        }
    }
});

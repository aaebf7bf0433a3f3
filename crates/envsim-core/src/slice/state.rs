//! The state slice: the part of the state a code slice can read or write for given arguments.

use super::*;
/// The state one call can read or write, given the code slice for its tool and its
/// arguments: see the module docs for the rule. Never fails.
pub fn slice_state(code: &CodeSlice, args: &Map<String, Value>, state: &Value) -> StateSlice {
    let whole = |state: &Value, reason: &str| {
        let tables: Vec<JsonPointer> = state
            .as_object()
            .map(|m| {
                m.keys()
                    .map(|k| JsonPointer::from_tokens([k.as_str()]))
                    .collect()
            })
            .unwrap_or_else(|| vec![JsonPointer::root()]);
        StateSlice {
            state: state.clone(),
            reasons: tables
                .iter()
                .map(|table| TableReason {
                    table: table.clone(),
                    reason: reason.to_owned(),
                })
                .collect(),
            kept: tables,
            partial: Vec::new(),
            full: true,
        }
    };
    let Some(map) = state.as_object() else {
        return whole(state, "the state is not a JSON object");
    };
    if let Some(reason) = &code.fallback {
        return whole(state, &format!("the code slicer fell back: {reason}"));
    }
    if let Some(reason) = &code.database_whole {
        return whole(state, &format!("the database is used whole: {reason}"));
    }
    let mut out = Map::new();
    let (mut kept, mut partial, mut reasons) = (Vec::new(), Vec::new(), Vec::new());
    for (key, value) in map {
        let Some(usage) = code.attributes.get(key) else {
            continue;
        };
        let root = JsonPointer::from_tokens([key.as_str()]);
        let wanted: Result<BTreeSet<String>, String> = match usage {
            AttrUse::Whole => Err(code
                .whole_reasons
                .get(key)
                .cloned()
                .unwrap_or_else(|| "used whole".to_owned())),
            AttrUse::Keys(params) => params
                .iter()
                .map(|p| entry_key(&[KeyPart::Arg(p.clone())], args))
                .collect(),
            AttrUse::Entries(keys) => keys.iter().map(|k| entry_key(k, args)).collect(),
        };
        let cut = match (wanted, value) {
            (Ok(wanted), Value::Object(entries)) => Ok(entries
                .iter()
                .filter(|(k, _)| wanted.contains(*k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<Map<String, Value>>()),
            (Ok(_), other) => Err(format!(
                "looked up by key, but the value is {} (only objects are cut)",
                json_kind(other)
            )),
            (Err(reason), _) => Err(reason),
        };
        match cut {
            Ok(cut) => {
                kept.extend(cut.keys().map(|k| root.child(k.as_str())));
                partial.push(root);
                out.insert(key.clone(), Value::Object(cut));
            }
            Err(reason) => {
                reasons.push(TableReason {
                    table: root.clone(),
                    reason,
                });
                kept.push(root);
                out.insert(key.clone(), value.clone());
            }
        }
    }
    kept.sort();
    partial.sort();
    reasons.sort_by(|a, b| a.table.cmp(&b.table));
    let full = partial.is_empty() && out.len() == map.len();
    StateSlice {
        state: Value::Object(out),
        kept,
        partial,
        full,
        reasons,
    }
}

pub(super) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The key `parts` compute from the call's arguments, or why they cannot be computed.
pub(super) fn entry_key(parts: &[KeyPart], args: &Map<String, Value>) -> Result<String, String> {
    let text = |p: &str| match args.get(p) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(n.to_string()),
        Some(_) => Err(format!("the argument {p} is not a string or an integer")),
        None => Err(format!("the argument {p} is not given")),
    };
    let ascii = |p: &str, op: &str| match args.get(p) {
        Some(Value::String(s)) if s.is_ascii() => Ok(s.clone()),
        _ => Err(format!(
            "the argument {p} is not ASCII text ({p}.{op}() is computed for ASCII text only)"
        )),
    };
    let mut out = String::new();
    for part in parts {
        match part {
            KeyPart::Text(t) => out.push_str(t),
            KeyPart::Arg(p) => out.push_str(&text(p)?),
            KeyPart::Lower(p) => out.push_str(&ascii(p, "lower")?.to_ascii_lowercase()),
            KeyPart::Upper(p) => out.push_str(&ascii(p, "upper")?.to_ascii_uppercase()),
            // Python's str.strip() on ASCII text strips these.
            KeyPart::Strip(p) => out.push_str(ascii(p, "strip")?.trim_matches([
                ' ', '\t', '\n', '\r', '\x0b', '\x0c', '\x1c', '\x1d', '\x1e', '\x1f',
            ])),
        }
    }
    Ok(out)
}

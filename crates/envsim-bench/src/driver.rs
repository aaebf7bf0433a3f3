//! The scenario driver: realistic tool calls without an LLM.
//!
//! From each tool's JSON schema and the *current* state it picks a tool and arguments. Calls
//! meant to succeed draw ids and values from the state (an `order_id` parameter gets a key of
//! the `orders` collection, or a value that some record stores under `order_id`; a `status`
//! parameter gets a status that occurs in the state; enums get one of their values). Calls meant
//! to fail corrupt one argument: an absent id, a wrong type, an out-of-range number, a value
//! outside the enum.

use envsim_core::rng::Rng;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// How many distinct values per field name the index keeps.
const VALUES_PER_FIELD: usize = 64;

/// One tool parameter from the schema.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Parameter name.
    pub name: String,
    /// Its JSON schema.
    pub schema: Value,
    /// Listed in `required`.
    pub required: bool,
}

/// A tool as the driver sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// Parameters in schema order.
    pub params: Vec<Param>,
}

impl ToolSpec {
    /// Reads an OpenAI function schema; `None` when it has no name.
    pub fn from_schema(tool: &Value) -> Option<ToolSpec> {
        let f = tool.get("function")?;
        let name = f.get("name")?.as_str()?.to_owned();
        let required: Vec<&str> = f
            .pointer("/parameters/required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let params = f
            .pointer("/parameters/properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(k, v)| Param {
                        name: k.clone(),
                        schema: v.clone(),
                        required: required.contains(&k.as_str()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(ToolSpec { name, params })
    }
}

/// What the state offers as argument values.
#[derive(Clone, Debug, Default)]
pub struct StateIndex {
    /// Keys of collections (objects whose values are objects), by collection name.
    collections: BTreeMap<String, Vec<String>>,
    /// Scalar values found under each field name.
    values: BTreeMap<String, Vec<Value>>,
}

impl StateIndex {
    /// Indexes a state.
    pub fn new(state: &Value) -> StateIndex {
        let mut index = StateIndex::default();
        index.visit(None, state, 0);
        index
    }

    fn visit(&mut self, name: Option<&str>, value: &Value, depth: usize) {
        if depth > 6 {
            return;
        }
        match value {
            Value::Object(map) => {
                let records = map.values().filter(|v| v.is_object()).count();
                if let Some(name) = name {
                    if records > 0 && records * 2 >= map.len() {
                        self.collections
                            .entry(name.to_owned())
                            .or_default()
                            .extend(map.keys().cloned());
                    }
                }
                for (k, v) in map {
                    self.visit(Some(k), v, depth + 1);
                }
            }
            Value::Array(items) => {
                for item in items.iter().take(32) {
                    self.visit(name, item, depth + 1);
                }
            }
            scalar => {
                if let Some(name) = name {
                    let seen = self.values.entry(name.to_owned()).or_default();
                    if seen.len() < VALUES_PER_FIELD && !seen.contains(scalar) {
                        seen.push(scalar.clone());
                    }
                }
            }
        }
    }

    /// Existing ids that fit a parameter name (`order_id` → keys of `orders`, values stored
    /// under `order_id`).
    fn ids_for(&self, param: &str) -> Vec<Value> {
        let mut out: Vec<Value> = self
            .values
            .get(param)
            .map(|v| v.iter().filter(|x| x.is_string()).cloned().collect())
            .unwrap_or_default();
        let stem = param
            .trim_end_matches("_ids")
            .trim_end_matches("_id")
            .trim_end_matches("_code")
            .trim_end_matches("_number")
            .to_ascii_lowercase();
        if !stem.is_empty() {
            for (name, keys) in &self.collections {
                let lower = name.to_ascii_lowercase();
                if lower == stem
                    || lower.starts_with(&stem)
                    || stem.starts_with(lower.trim_end_matches('s'))
                {
                    out.extend(keys.iter().map(|k| Value::String(k.clone())));
                }
            }
        }
        out
    }
}

/// Whether a generated call is meant to pass validation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Intent {
    /// Arguments drawn from the state.
    Valid,
    /// One argument corrupted.
    Invalid,
}

/// Generates arguments for `tool` against the indexed state.
pub fn arguments(
    tool: &ToolSpec,
    index: &StateIndex,
    rng: &mut Rng,
    intent: Intent,
) -> Map<String, Value> {
    let mut args = Map::new();
    for param in &tool.params {
        if param.required || rng.chance(0.4) {
            args.insert(
                param.name.clone(),
                valid_value(&param.name, &param.schema, index, rng, 0),
            );
        }
    }
    if intent == Intent::Invalid && !args.is_empty() {
        let keys: Vec<String> = args.keys().cloned().collect();
        if let Some(key) = rng.pick(&keys).cloned() {
            let schema = tool
                .params
                .iter()
                .find(|p| p.name == key)
                .map(|p| p.schema.clone())
                .unwrap_or(Value::Null);
            args.insert(key.clone(), invalid_value(&key, &schema, rng));
        }
    }
    args
}

fn schema_type(schema: &Value) -> &str {
    match schema.get("type") {
        Some(Value::String(t)) => t,
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("string"),
        _ => "string",
    }
}

/// The schema a value is drawn from: for a union (`anyOf`/`oneOf` without a `type` of its
/// own, as pydantic writes `list[Passenger | dict]`), its first variant that is not `null`, so
/// that a passenger is drawn as the object it declares rather than as a string.
fn concrete(schema: &Value) -> &Value {
    if schema.get("type").is_some() {
        return schema;
    }
    let variants = ["anyOf", "oneOf", "allOf"]
        .iter()
        .find_map(|key| schema.get(*key).and_then(Value::as_array));
    match variants.and_then(|v| v.iter().find(|s| s.get("type").is_none_or(|t| t != "null"))) {
        Some(variant) => concrete(variant),
        None => schema,
    }
}

fn valid_value(
    name: &str,
    schema: &Value,
    index: &StateIndex,
    rng: &mut Rng,
    depth: usize,
) -> Value {
    let schema = concrete(schema);
    if let Some(Value::Array(choices)) = schema.get("enum") {
        if let Some(choice) = rng.pick(choices) {
            return choice.clone();
        }
    }
    let seen: Vec<Value> = index.values.get(name).cloned().unwrap_or_default();
    match schema_type(schema) {
        "integer" => {
            let ints: Vec<&Value> = seen.iter().filter(|v| v.is_i64() || v.is_u64()).collect();
            match rng.pick(&ints) {
                Some(v) if rng.chance(0.6) => (*v).clone(),
                _ => {
                    let lo = schema.get("minimum").and_then(Value::as_i64).unwrap_or(1);
                    Value::from(lo + rng.below(5) as i64)
                }
            }
        }
        "number" => {
            let nums: Vec<&Value> = seen.iter().filter(|v| v.is_number()).collect();
            match rng.pick(&nums) {
                Some(v) if rng.chance(0.6) => (*v).clone(),
                _ => Value::from((1 + rng.below(20_000)) as f64 / 100.0),
            }
        }
        "boolean" => Value::Bool(rng.chance(0.5)),
        "array" => {
            if depth > 2 {
                return Value::Array(Vec::new());
            }
            let item_schema = schema.get("items").cloned().unwrap_or(Value::Null);
            let singular = name.trim_end_matches('s');
            let item_name =
                if index.values.contains_key(singular) || !index.ids_for(singular).is_empty() {
                    singular
                } else {
                    name
                };
            (0..1 + rng.below(3))
                .map(|_| valid_value(item_name, &item_schema, index, rng, depth + 1))
                .collect()
        }
        "object" => {
            if depth > 2 {
                return Value::Object(Map::new());
            }
            match schema.get("properties").and_then(Value::as_object) {
                Some(props) => props
                    .iter()
                    .map(|(k, v)| (k.clone(), valid_value(k, v, index, rng, depth + 1)))
                    .collect(),
                None => Value::Object(Map::new()),
            }
        }
        _ => {
            let ids = index.ids_for(name);
            if let Some(id) = rng.pick(&ids) {
                return id.clone();
            }
            let strings: Vec<&Value> = seen.iter().filter(|v| v.is_string()).collect();
            if let Some(v) = rng.pick(&strings) {
                return (*v).clone();
            }
            // Identifiers with unguessable names (`sku`, `path`) are usually keys of some
            // collection.
            let keys: Vec<&String> = index.collections.values().flatten().collect();
            match rng.pick(&keys) {
                Some(k) if rng.chance(0.8) => Value::String((*k).clone()),
                _ => Value::String(format!("{name} {}", 1 + rng.below(99))),
            }
        }
    }
}

fn invalid_value(name: &str, schema: &Value, rng: &mut Rng) -> Value {
    let schema = concrete(schema);
    if schema.get("enum").is_some() {
        return Value::String("not-a-valid-choice".into());
    }
    match (schema_type(schema), rng.below(3)) {
        ("integer", 0) | ("number", 0) => Value::from(-1_000_000),
        ("integer", 1) | ("number", 1) => Value::from(1_000_000_000u64),
        ("integer" | "number" | "boolean", _) => Value::String("abc".into()),
        ("array", 0) => Value::String("not-a-list".into()),
        ("array", _) => Value::Array(vec![Value::String(format!("missing-{name}"))]),
        ("object", _) => Value::from(5),
        (_, 0) => Value::from(12345),
        (_, 1) => Value::String(String::new()),
        _ => Value::String(format!("{}-404", name.to_ascii_uppercase())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool() -> ToolSpec {
        ToolSpec::from_schema(&json!({"type": "function", "function": {"name": "ship", "parameters": {"type": "object",
            "properties": {"order_id": {"type": "string"}, "carrier": {"type": "string", "enum": ["ups", "dhl"]},
                           "qty": {"type": "integer"}, "note": {"type": "string"}},
            "required": ["order_id", "carrier", "qty"]}}}))
        .unwrap()
    }

    #[test]
    fn valid_arguments_come_from_the_state() {
        let state = json!({"orders": {"O1": {"status": "new", "qty": 3}, "O2": {"status": "paid", "qty": 7}}, "users": {"U1": {"order_id": "O2"}}});
        let index = StateIndex::new(&state);
        let spec = tool();
        assert_eq!(spec.params.iter().filter(|p| p.required).count(), 3);
        for seed in 0..50 {
            let args = arguments(&spec, &index, &mut Rng::new(seed), Intent::Valid);
            assert!(
                ["O1", "O2"].contains(&args["order_id"].as_str().unwrap()),
                "{args:?}"
            );
            assert!(["ups", "dhl"].contains(&args["carrier"].as_str().unwrap()));
            assert!(args["qty"].is_i64() || args["qty"].is_u64());
        }
    }

    #[test]
    fn invalid_arguments_corrupt_one_value() {
        let state = json!({"orders": {"O1": {"status": "new"}}});
        let index = StateIndex::new(&state);
        let spec = tool();
        let mut corrupted = 0;
        for seed in 0..50 {
            let valid = arguments(&spec, &index, &mut Rng::new(seed), Intent::Valid);
            let invalid = arguments(&spec, &index, &mut Rng::new(seed), Intent::Invalid);
            let differing = valid
                .iter()
                .filter(|(k, v)| invalid.get(*k) != Some(v))
                .count();
            assert!(differing <= 1, "{valid:?} vs {invalid:?}");
            corrupted += differing;
        }
        assert!(
            corrupted >= 45,
            "almost every invalid call differs: {corrupted}"
        );
    }

    #[test]
    fn a_union_is_drawn_as_its_first_non_null_variant() {
        let spec = ToolSpec::from_schema(&json!({"type": "function", "function": {"name": "fly",
            "parameters": {"type": "object", "properties": {
                "passengers": {"type": "array", "items": {"anyOf": [
                    {"type": "object", "properties": {"first_name": {"type": "string"}, "dob": {"type": "string"}},
                     "required": ["first_name", "dob"]},
                    {"type": "object", "additionalProperties": true}]}},
                "seats": {"anyOf": [{"type": "null"}, {"type": "integer"}]}},
            "required": ["passengers", "seats"]}}}))
        .unwrap();
        let index = StateIndex::new(&json!({}));
        for seed in 0..20 {
            let args = arguments(&spec, &index, &mut Rng::new(seed), Intent::Valid);
            let passengers = args["passengers"].as_array().unwrap();
            assert!(!passengers.is_empty());
            for p in passengers {
                assert!(
                    p["first_name"].is_string() && p["dob"].is_string(),
                    "{args:?}"
                );
            }
            assert!(args["seats"].is_i64(), "{args:?}");
        }
    }
}

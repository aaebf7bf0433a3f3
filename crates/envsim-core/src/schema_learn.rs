//! JSON Schemas learned from examples: what a tool's responses look like, written as the
//! schema an API description would declare for them (`envsim env openapi` puts them in the
//! OpenAPI documents it generates).
//!
//! Rules, per position in the examples:
//! - `type` lists every JSON type seen (`integer` folds into `number` when both are seen,
//!   since every integer is a number); `null` is kept when seen;
//! - objects list `properties`, and `required` names the properties present in every object
//!   seen there;
//! - an object whose keys name things rather than fields (a key with a digit, or in capitals
//!   only: `TCK-5001`, `U46`, `2024-06-25`) and whose values are all of one kind (all records,
//!   all lists — a user's messages keyed by user id —, all numbers — prices keyed by ticker —,
//!   all texts or all booleans) is a map: one `additionalProperties` schema learned from all
//!   its values, no `properties`;
//! - arrays have one `items` schema learned from every element;
//! - below [`MAX_DEPTH`] levels the schema is `{}` (anything), so a deep or recursive answer
//!   yields a small schema.
//!
//! A learned schema accepts every example it was learned from (a property test proves it).

use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Levels of nesting described; deeper values are `{}`.
pub const MAX_DEPTH: usize = 6;

/// A schema being learned from examples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchemaLearner {
    /// Examples added here.
    seen: usize,
    /// JSON types seen.
    types: BTreeSet<&'static str>,
    /// Objects seen (with fields), and per property how many had it and what it held.
    objects: usize,
    properties: BTreeMap<String, (usize, SchemaLearner)>,
    /// Values of map-like objects.
    map_values: Option<Box<SchemaLearner>>,
    /// Elements of arrays.
    items: Option<Box<SchemaLearner>>,
}

/// Whether a key names a thing (an id, a date) rather than a field.
fn names_a_thing(key: &str) -> bool {
    key.chars().any(|c| c.is_ascii_digit())
        || (key.chars().any(char::is_uppercase) && !key.chars().any(char::is_lowercase))
}

/// Whether `values` are all of one kind (numbers of either form one kind), `null` being none.
fn one_kind<'a>(mut values: impl Iterator<Item = &'a Value>) -> bool {
    let kind = |v: &Value| match type_of(v) {
        "integer" => "number",
        other => other,
    };
    let Some(first) = values.next() else {
        return false;
    };
    let first = kind(first);
    first != "null" && values.all(|v| kind(v) == first)
}

fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl SchemaLearner {
    /// Learns from one more example.
    pub fn add(&mut self, value: &Value) {
        self.add_at(value, 0);
    }

    /// Examples learned from.
    pub fn examples(&self) -> usize {
        self.seen
    }

    fn add_at(&mut self, value: &Value, depth: usize) {
        self.seen += 1;
        self.types.insert(type_of(value));
        if depth >= MAX_DEPTH {
            return;
        }
        match value {
            Value::Object(map) => {
                let is_map = !map.is_empty()
                    && map.keys().all(|k| names_a_thing(k))
                    && one_kind(map.values());
                if is_map {
                    let values = self.map_values.get_or_insert_with(Box::default);
                    for child in map.values() {
                        values.add_at(child, depth + 1);
                    }
                } else {
                    self.objects += 1;
                    for (key, child) in map {
                        let entry = self.properties.entry(key.clone()).or_default();
                        entry.0 += 1;
                        entry.1.add_at(child, depth + 1);
                    }
                }
            }
            Value::Array(elements) => {
                let items = self.items.get_or_insert_with(Box::default);
                for element in elements {
                    items.add_at(element, depth + 1);
                }
            }
            _ => {}
        }
    }

    /// The schema learned so far (`{}` before any example).
    pub fn schema(&self) -> Value {
        self.schema_with(1)
    }

    /// The schema learned so far, declaring a property required only where at least
    /// `evidence` objects were seen (and all had it): a field every one of two examples had
    /// may still be optional.
    pub fn schema_with(&self, evidence: usize) -> Value {
        self.schema_at(0, evidence)
    }

    fn schema_at(&self, depth: usize, evidence: usize) -> Value {
        if self.seen == 0 || depth >= MAX_DEPTH {
            return json!({});
        }
        let mut types: Vec<&str> = self.types.iter().copied().collect();
        if self.types.contains("number") {
            types.retain(|t| *t != "integer");
        }
        let mut out = Map::new();
        out.insert(
            "type".into(),
            match types.as_slice() {
                [one] => json!(one),
                many => json!(many),
            },
        );
        if self.types.contains("object") {
            // Objects seen both as records and as maps accept both: the record's properties
            // and any further entry of the map's value schema.
            if self.objects > 0 {
                let properties: Map<String, Value> = self
                    .properties
                    .iter()
                    .map(|(k, (_, learner))| (k.clone(), learner.schema_at(depth + 1, evidence)))
                    .collect();
                let required: Vec<&String> = self
                    .properties
                    .iter()
                    .filter(|(_, (count, _))| *count == self.objects && self.objects >= evidence)
                    .map(|(k, _)| k)
                    .collect();
                out.insert("properties".into(), Value::Object(properties));
                if !required.is_empty() {
                    out.insert("required".into(), json!(required));
                }
            }
            if let Some(values) = &self.map_values {
                out.insert(
                    "additionalProperties".into(),
                    values.schema_at(depth + 1, evidence),
                );
                if self.objects > 0 {
                    // A key the records all had may be missing from a map.
                    out.remove("required");
                }
            }
        }
        if let Some(items) = &self.items {
            out.insert("items".into(), items.schema_at(depth + 1, evidence));
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learned(examples: &[Value]) -> Value {
        let mut learner = SchemaLearner::default();
        for e in examples {
            learner.add(e);
        }
        learner.schema()
    }

    #[test]
    fn learns_types_properties_and_required() {
        let schema = learned(&[
            json!({"id": "T1", "qty": 2, "note": null, "tags": ["a"]}),
            json!({"id": "T2", "qty": 2.5, "tags": []}),
        ]);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "qty": {"type": "number"},
                    "note": {"type": "null"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["id", "qty", "tags"],
            })
        );
        assert_eq!(learned(&[]), json!({}));
        // Two objects are not enough evidence at 3.
        let mut learner = SchemaLearner::default();
        learner.add(&json!({"id": 1}));
        learner.add(&json!({"id": 2}));
        assert_eq!(learner.schema_with(3).get("required"), None);
        learner.add(&json!({"id": 3}));
        assert_eq!(learner.schema_with(3)["required"], json!(["id"]));
        assert_eq!(
            learned(&[json!("x"), json!(1)]),
            json!({"type": ["integer", "string"]})
        );
    }

    #[test]
    fn objects_keyed_by_ids_are_maps() {
        let schema = learned(&[json!({"tickets": {
            "TCK-1": {"status": "open"},
            "TCK-2": {"status": "closed", "agent": "a"},
        }})]);
        assert_eq!(
            schema["properties"]["tickets"],
            json!({
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {"status": {"type": "string"}, "agent": {"type": "string"}},
                    "required": ["status"],
                },
            })
        );
        // Fields whose values are objects but whose names are words stay fields.
        let schema = learned(&[json!({"ticket": {"id": 1}, "customer": {"id": 2}})]);
        assert_eq!(schema["required"], json!(["customer", "ticket"]));
        // Lists and numbers keyed by ids are maps too: a user seen in no example is fine, and
        // every value is judged by what all of them held (BFCL's messages per user).
        let schema = learned(&[
            json!({"messages": {"USR001": ["hi"], "USR002": ["a", "b"]}}),
            json!({"messages": {"USR002": [{"USR003": ["c"]}]}}),
            json!({"prices": {"AAPL": 150.5, "NVDA": 220}}),
        ]);
        assert_eq!(
            schema["properties"]["messages"],
            json!({
                "type": "object",
                "additionalProperties": {
                    "type": "array",
                    "items": {
                        "type": ["object", "string"],
                        "additionalProperties": {"type": "array", "items": {"type": "string"}},
                    },
                },
            })
        );
        assert_eq!(
            schema["properties"]["prices"],
            json!({"type": "object", "additionalProperties": {"type": "number"}})
        );
        // Values of mixed kinds keyed by ids stay a record (the keys may be fields after all).
        let schema = learned(&[json!({"A1": 1, "B2": "x"})]);
        assert_eq!(schema["required"], json!(["A1", "B2"]));
    }

    #[test]
    fn depth_is_bounded() {
        let mut deep = json!(1);
        for _ in 0..20 {
            deep = json!({ "next": deep });
        }
        let schema = learned(&[deep]);
        let mut at = &schema;
        let mut levels = 0;
        while let Some(next) = at.get("properties").and_then(|p| p.get("next")) {
            at = next;
            levels += 1;
        }
        assert_eq!(levels, MAX_DEPTH);
        assert_eq!(*at, json!({}));
    }

    #[test]
    fn a_learned_schema_accepts_its_examples() {
        // Property: over seeded random values, the schema holds every example (checked with a
        // small validator of the keywords learned schemas use).
        fn holds(schema: &Value, value: &Value) -> bool {
            if let Some(t) = schema.get("type") {
                let name = type_of(value);
                let ok = |t: &Value| t == name || (t == "number" && name == "integer");
                let fits = match t {
                    Value::Array(ts) => ts.iter().any(ok),
                    one => ok(one),
                };
                if !fits {
                    return false;
                }
            }
            if let Value::Object(map) = value {
                let props = schema.get("properties").and_then(Value::as_object);
                for r in schema
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if !map.contains_key(r.as_str().unwrap_or_default()) {
                        return false;
                    }
                }
                for (k, v) in map {
                    let sub = props
                        .and_then(|p| p.get(k))
                        .or_else(|| schema.get("additionalProperties"));
                    if let Some(sub) = sub {
                        if !holds(sub, v) {
                            return false;
                        }
                    } else if props.is_some() {
                        return false;
                    }
                }
            }
            if let (Value::Array(xs), Some(items)) = (value, schema.get("items")) {
                return xs.iter().all(|x| holds(items, x));
            }
            true
        }
        fn random(rng: &mut crate::rng::Rng, depth: usize) -> Value {
            let pick = rng.below(if depth > 3 { 5 } else { 8 });
            match pick {
                0 => Value::Null,
                1 => json!(rng.below(2) == 0),
                2 => json!(rng.below(100)),
                3 => json!(rng.below(100) as f64 / 7.0),
                4 => json!(format!("s{}", rng.below(5))),
                5 => Value::Array((0..rng.below(3)).map(|_| random(rng, depth + 1)).collect()),
                6 => {
                    let mut map = Map::new();
                    for k in ["a", "b", "c", "d"] {
                        if rng.below(2) == 0 {
                            map.insert(k.to_owned(), random(rng, depth + 1));
                        }
                    }
                    Value::Object(map)
                }
                _ => Value::Object(
                    (0..1 + rng.below(3))
                        .map(|i| (format!("ID-{i}"), json!({"v": random(rng, depth + 1)})))
                        .collect(),
                ),
            }
        }
        let mut rng = crate::rng::Rng::new(7);
        for round in 0..300 {
            let examples: Vec<Value> = (0..1 + rng.below(4)).map(|_| random(&mut rng, 0)).collect();
            let schema = learned(&examples);
            for e in &examples {
                assert!(holds(&schema, e), "round {round}: {schema} rejects {e}");
            }
        }
    }
}

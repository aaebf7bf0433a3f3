//! The scenario driver: realistic tool calls without an LLM.
//!
//! From each tool's JSON schema and the *current* state it picks a tool and arguments. Calls
//! meant to succeed draw ids and values from the state (an `order_id` parameter gets a key of
//! the `orders` collection, or a value that some record stores under `order_id`; a `status`
//! parameter gets a status that occurs in the state; enums get one of their values). Calls meant
//! to fail corrupt one argument: an absent id, a wrong type, an out-of-range number, a value
//! outside the enum.
//!
//! A walk may also ask for *coherent* calls ([`StateIndex::focus`]): the arguments of one call
//! are then drawn together from one record that fits the tool (an order for
//! `return_items(order_id, item_ids, payment_method_id)`) and the records it references (the
//! order's user, whose payment methods those are), so that calls whose preconditions tie their
//! arguments to each other succeed as an agent's would, not by chance.

mod index;
mod shape;

pub use index::{kind_of, likeness, Focus, RecordRef, StateIndex};
pub use shape::name_words;
pub(crate) use shape::{described_length, sized, spelled_length, Shape};

use envsim_core::rng::Rng;
use serde_json::{Map, Value};

/// Whether a record holds one of `words` as a string value of its own (not nested deeper
/// than its direct fields).
fn holds_any(record: &Value, words: &[&str]) -> bool {
    record.as_object().is_some_and(|fields| {
        fields
            .values()
            .filter_map(Value::as_str)
            .any(|v| words.iter().any(|w| v.eq_ignore_ascii_case(w)))
    })
}

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
    /// What the tool's description says (its rules: "disposition must be one of home, …").
    pub description: String,
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
        let description = f
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        Some(ToolSpec {
            name,
            params,
            description,
        })
    }
}

/// Whether a parameter names an id (`order_id`, `item_ids`, `flight_number`, `id`).
pub(crate) fn names_an_id(name: &str) -> bool {
    name.eq_ignore_ascii_case("id") || id_stem(name).len() < name.len()
}

/// The noun an id-like name stands for: `order_id` → `order`, `flight_number` → `flight`.
pub(crate) fn id_stem(name: &str) -> String {
    name.trim_end_matches("_ids")
        .trim_end_matches("_id")
        .trim_end_matches("_code")
        .trim_end_matches("_number")
        .to_ascii_lowercase()
}

/// Whether the collection `collection` holds what the stem names (`orders` for `order`,
/// `payment_methods` for `payment`).
pub(crate) fn stem_names(stem: &str, collection: &str) -> bool {
    if stem.is_empty() {
        return false;
    }
    let lower = collection.to_ascii_lowercase();
    lower == stem || lower.starts_with(stem) || stem.starts_with(lower.trim_end_matches('s'))
}

/// A qualified id name without its qualifier (`new_item_ids` → `item_ids`), when it has one.
fn unqualified(name: &str) -> Option<&str> {
    let (_, rest) = name.split_once('_')?;
    let id_like = ["_id", "_ids", "_code", "_number"]
        .iter()
        .any(|s| rest.ends_with(s));
    (id_like && rest.contains('_')).then_some(rest)
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
    arguments_with(tool, index, None, rng, intent)
}

/// [`arguments`], drawing each value first from `focus` (a record and what it references,
/// [`StateIndex::focus`]) where it offers one for the parameter.
pub fn arguments_with(
    tool: &ToolSpec,
    index: &StateIndex,
    focus: Option<&Focus>,
    rng: &mut Rng,
    intent: Intent,
) -> Map<String, Value> {
    draw_arguments(tool, index, focus, rng, intent, false)
}

/// [`arguments_with`] as the explorer draws them: a parameter the state has no value of its
/// own name for also takes the values of related fields (`new_end_date` those of `end_date`,
/// `to_email` those of `email`) and values of the shape its name or its schema's `format`
/// asks for (a date for `read_date`, a date-time for `start`, an address for `email`, an
/// absolute path for `source`), before made-up text.
pub fn arguments_explored(
    tool: &ToolSpec,
    index: &StateIndex,
    focus: Option<&Focus>,
    rng: &mut Rng,
    intent: Intent,
) -> Map<String, Value> {
    draw_arguments(tool, index, focus, rng, intent, true)
}

fn draw_arguments(
    tool: &ToolSpec,
    index: &StateIndex,
    focus: Option<&Focus>,
    rng: &mut Rng,
    intent: Intent,
    inferred: bool,
) -> Map<String, Value> {
    let mut args = Map::new();
    let length = std::cell::Cell::new(None);
    let draw = Draw {
        index,
        focus,
        length: &length,
        inferred,
    };
    for param in &tool.params {
        if param.required || rng.chance(0.4) {
            args.insert(
                param.name.clone(),
                valid_value(&param.name, &param.schema, draw, rng, 0),
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

pub(crate) fn schema_type(schema: &Value) -> &str {
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
pub(crate) fn concrete(schema: &Value) -> &Value {
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

/// Where values are drawn from: the whole state, and a focus record first where there is one.
#[derive(Clone, Copy)]
struct Draw<'a> {
    index: &'a StateIndex,
    focus: Option<&'a Focus>,
    /// A coherent call's list length: its lists run in parallel (`item_ids` and the
    /// `new_item_ids` they are exchanged for), so all take the first one's length.
    length: &'a std::cell::Cell<Option<usize>>,
    /// Values of related fields and of the shape a name asks for ([`arguments_explored`]).
    inferred: bool,
}

fn valid_value(name: &str, schema: &Value, draw: Draw<'_>, rng: &mut Rng, depth: usize) -> Value {
    let schema = concrete(schema);
    let index = draw.index;
    let offered = draw
        .focus
        .map(|f| f.offered(name, rng))
        .filter(|o| !o.is_empty());
    if let Some(Value::Array(choices)) = schema.get("enum") {
        // The focus's own value where the enum allows it (the reservation's cabin).
        let fitting: Vec<&Value> = offered
            .iter()
            .flatten()
            .filter(|v| choices.contains(v))
            .collect();
        if let Some(v) = rng.pick(&fitting) {
            return (*v).clone();
        }
        if let Some(choice) = rng.pick(choices) {
            return choice.clone();
        }
    }
    // A text whose description names a field of the focus record ("Your account email." for
    // `username`) takes that field's value before what the name alone offers (the user's key).
    if let (true, Some(focus), "string") = (draw.inferred, draw.focus, schema_type(schema)) {
        let named = described_field(schema, |word| focus.own_field(word));
        let texts: Vec<&Value> = named.iter().filter(|v| v.is_string()).collect();
        if let Some(v) = rng.pick(&texts) {
            return (*v).clone();
        }
    }
    if let Some(offered) = &offered {
        let fitting: Vec<&Value> = offered
            .iter()
            .filter(|v| match schema_type(schema) {
                "integer" => v.is_i64() || v.is_u64(),
                "number" => v.is_number(),
                "boolean" => v.is_boolean(),
                "array" | "object" => false,
                _ => v.is_string(),
            })
            .collect();
        if let Some(v) = rng.pick(&fitting) {
            return (*v).clone();
        }
    }
    let unknown_here = || {
        index.values_named(name).is_empty()
            && index.ids_for(name).is_empty()
            && index.shaped(name, schema).is_empty()
    };
    if draw.inferred && !names_an_id(name) && unknown_here() {
        // Now and then what the description gives as values or examples ("e.g. 2027",
        // "One of \"late_report\", …", an object `e.g. {"temp_day": 23.5}`), where the state
        // holds no value of the parameter's own name or shape: what is drawn from related
        // fields may not be its values. (An example path may name no file of this state.)
        let described = described_values(schema);
        let share = if schema_type(schema) == "object" {
            0.5
        } else {
            DESCRIBED_SHARE
        };
        if !described.is_empty() && rng.chance(share) {
            if let Some(v) = rng.pick(&described) {
                return v.clone();
            }
        }
    }
    let mut seen: Vec<Value> = index.values_named(name).to_vec();
    if seen.is_empty() && draw.inferred {
        seen = index.related(name);
    }
    if seen.is_empty() && draw.inferred {
        seen = described(schema, draw, rng);
    }
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
        "array" => valid_list(name, schema, draw, rng, depth),
        "object" => {
            if depth > 2 {
                return Value::Object(Map::new());
            }
            match schema.get("properties").and_then(Value::as_object) {
                Some(props) => props
                    .iter()
                    .map(|(k, v)| (k.clone(), valid_value(k, v, draw, rng, depth + 1)))
                    .collect(),
                // An object of no declared shape: the focus record's own of that name (a
                // meter's `registers`), for the explorer.
                None if draw.inferred => draw
                    .focus
                    .and_then(|f| f.object(name))
                    .cloned()
                    .unwrap_or_else(|| Value::Object(Map::new())),
                None => Value::Object(Map::new()),
            }
        }
        _ => valid_text(name, schema, draw, &seen, rng),
    }
}

/// A list for a parameter of an `array` schema: its items drawn as its singular where the
/// state or the focus offers values of that name (`item_ids` → `item_id`).
fn valid_list(name: &str, schema: &Value, draw: Draw<'_>, rng: &mut Rng, depth: usize) -> Value {
    let index = draw.index;
    if depth > 2 {
        return Value::Array(Vec::new());
    }
    let item_schema = schema.get("items").cloned().unwrap_or(Value::Null);
    let singular = name.trim_end_matches('s');
    let in_focus = draw.focus.is_some_and(|f| f.offers(singular));
    let item_name =
        if in_focus || index.values.contains_key(singular) || !index.ids_for(singular).is_empty() {
            singular
        } else {
            name
        };
    let length = match draw.focus {
        Some(_) => {
            let n = draw.length.get().unwrap_or_else(|| 1 + rng.below(2));
            draw.length.set(Some(n));
            n
        }
        None => 1 + rng.below(3),
    };
    (0..length)
        .map(|_| valid_value(item_name, &item_schema, draw, rng, depth + 1))
        .collect()
}

/// A text for a parameter: an id, a value seen under its name (`seen`), one of the shape it
/// asks for, one its description quotes, a key of some collection, or made-up text.
fn valid_text(name: &str, schema: &Value, draw: Draw<'_>, seen: &[Value], rng: &mut Rng) -> Value {
    let index = draw.index;
    // The explorer takes a collection's keys only for a name that names an id: the
    // `issues` are no values for `issue_type`.
    let ids = if draw.inferred && !names_an_id(name) {
        Vec::new()
    } else {
        index.ids_for(name)
    };
    if let Some(id) = rng.pick(&ids) {
        return id.clone();
    }
    let strings: Vec<&Value> = seen.iter().filter(|v| v.is_string()).collect();
    if let Some(v) = rng.pick(&strings) {
        return (*v).clone();
    }
    if draw.inferred {
        // In the length the description spells out (seconds or none).
        let length = described_length(schema);
        let shaped = index.shaped(name, schema);
        if let Some(v) = rng.pick(&shaped) {
            // Now and then a new one of the shape: what the state holds may be taken
            // (an address already registered).
            if !rng.chance(0.25) {
                return Value::String(sized(v, length));
            }
        }
        if let Some(made) = Shape::of(name, schema).map(|s| s.example(rng)) {
            return Value::String(sized(&made, length));
        }
    }
    // A coherent call takes what the parameter's description quotes as its values
    // ("either 'no longer needed' or 'ordered by mistake'", "such as '2 + 2'").
    if draw.focus.is_some() {
        let quoted = quoted_values(
            schema
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or(""),
        );
        if let Some(v) = rng.pick(&quoted) {
            return Value::String(v.clone());
        }
    }
    // Identifiers with unguessable names (`sku`, `path`) are usually keys of some
    // collection.
    let keys: Vec<&String> = index.collections.values().flatten().collect();
    match rng.pick(&keys) {
        Some(k) if rng.chance(0.8) => Value::String((*k).clone()),
        _ => Value::String(format!("{name} {}", 1 + rng.below(99))),
    }
}

/// The values `field_values` gives for the first field name a parameter's description names:
/// at each word, the word and the next joined as one name (`User ID of the user` names
/// `user_id`), then the word alone; names of four letters or more, the first for which it
/// gives any.
pub(crate) fn described_field(
    schema: &Value,
    mut field_values: impl FnMut(&str) -> Vec<Value>,
) -> Vec<Value> {
    let description = schema
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    let words: Vec<String> = description
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    for (i, word) in words.iter().enumerate() {
        let joined = words.get(i + 1).map(|next| format!("{word}_{next}"));
        for name in joined.iter().chain([word]) {
            if name.len() < 4 {
                continue;
            }
            let values = field_values(name);
            if !values.is_empty() {
                return values;
            }
        }
    }
    Vec::new()
}

/// The values of the field a parameter's description names ("Your account email." for
/// `username`, "User ID of the user to send the message to." for `receiver_id`): the first
/// name in the description ([`described_field`]) that names a field of the focus record, of
/// the state or of recent answers.
fn described(schema: &Value, draw: Draw<'_>, rng: &mut Rng) -> Vec<Value> {
    described_field(schema, |word| {
        let offered = draw.focus.map(|f| f.offered(word, rng)).unwrap_or_default();
        if !offered.is_empty() {
            return offered;
        }
        draw.index.values.get(word).cloned().unwrap_or_default()
    })
}

/// How often a parameter the state offers no value of its own for is drawn, by the explorer,
/// from what its description gives (objects: half the time).
const DESCRIBED_SHARE: f64 = 0.25;

/// The values a parameter's description gives — those it quotes ("One of \"new_policy\",
/// \"late_report\"") and its examples (`e.g. 2027`, `e.g. {"temp_day": 23.5}`) — each as a
/// value of the parameter's type (a number for an integer, an object only for an object).
pub(crate) fn described_values(schema: &Value) -> Vec<Value> {
    let schema = concrete(schema);
    let description = schema
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut out: Vec<Value> = Vec::new();
    let given = quoted_values(description)
        .into_iter()
        .chain(listed(description))
        .map(Value::String)
        .chain(examples(description));
    for value in given {
        if let Some(v) = of_type(schema, value) {
            if !out.contains(&v) {
                out.push(v);
            }
        }
    }
    out
}

/// The examples a description gives after "e.g.", "for example", "such as" or "example:": a
/// JSON object or list written out, else the word that follows (a quoted one is read by
/// [`quoted_values`]).
fn examples(description: &str) -> Vec<Value> {
    // ASCII lowercase keeps the byte offsets of `description`.
    let lower = description.to_ascii_lowercase();
    let mut out = Vec::new();
    for cue in ["e.g.", "for example", "such as", "example:"] {
        for (at, _) in lower.match_indices(cue) {
            let rest = description[at + cue.len()..].trim_start_matches([' ', ',', ':']);
            if rest.starts_with(['{', '[']) {
                let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
                if let Some(Ok(v)) = values.next() {
                    out.push(v);
                }
            } else if !rest.starts_with(['"', '\'']) {
                let word = rest
                    .split(|c: char| c.is_whitespace() || ",;()".contains(c))
                    .next()
                    .unwrap_or("")
                    .trim_end_matches('.');
                if !word.is_empty() {
                    out.push(Value::String(word.to_owned()));
                }
            }
        }
    }
    out
}

/// The values a description lists after a colon ("Range: 1.4.2, ^1.4.0, ~1.4.0 or *"): two
/// or more single words, separated by commas or "or", and nothing else.
fn listed(description: &str) -> Vec<String> {
    let Some((_, rest)) = description.split_once(':') else {
        return Vec::new();
    };
    let rest = rest.trim().trim_end_matches('.');
    let items: Vec<&str> = rest
        .split(',')
        .flat_map(|item| item.split(" or "))
        .map(|item| item.trim().trim_matches(['\'', '"', '`']))
        .collect();
    let single = items
        .iter()
        .all(|i| !i.is_empty() && i.len() <= 40 && !i.contains(char::is_whitespace));
    if items.len() < 2 || !single {
        return Vec::new();
    }
    items.into_iter().map(str::to_owned).collect()
}

/// `value` as a value of `schema`'s type, when it reads as one (a text read as a number or a
/// truth value, wrapped as a list's one item).
pub(crate) fn of_type(schema: &Value, value: Value) -> Option<Value> {
    let text = value.as_str();
    match schema_type(concrete(schema)) {
        "integer" => match text {
            Some(t) => t.parse::<i64>().ok().map(Value::from),
            None => value.as_i64().map(Value::from),
        },
        "number" => match text {
            Some(t) => t.parse::<f64>().ok().map(Value::from),
            None => value.is_number().then_some(value),
        },
        "boolean" => match text {
            Some("true") => Some(Value::Bool(true)),
            Some("false") => Some(Value::Bool(false)),
            _ => value.is_boolean().then_some(value),
        },
        "object" => value.is_object().then_some(value),
        "array" => match value {
            Value::Array(_) => Some(value),
            Value::String(_) => Some(Value::Array(vec![value])),
            _ => None,
        },
        _ => text.is_some().then_some(value),
    }
}

/// The values a description quotes: text between single or double quotes that open after a
/// non-word character and close before one (an apostrophe inside a word opens nothing), 1 to
/// 40 characters long.
pub(crate) fn quoted_values(description: &str) -> Vec<String> {
    let chars: Vec<char> = description.chars().collect();
    let word = |i: usize| chars.get(i).is_some_and(|c| c.is_alphanumeric());
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let quote = chars[i];
        if (quote == '\'' || quote == '"') && (i == 0 || !word(i - 1)) {
            let close = (i + 1..chars.len()).find(|&j| chars[j] == quote && !word(j + 1));
            if let Some(j) = close {
                let text: String = chars[i + 1..j].iter().collect();
                if (1..=40).contains(&(j - i - 1)) && !out.contains(&text) {
                    out.push(text);
                }
                i = j + 1;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// A call with one argument changed, as a fuzzer mutates an input that reached new code: the
/// argument drawn again from the state, corrupted, left out or added (when optional), or
/// pushed to an edge (0, -1, a bound of its schema, twice or half its number; an empty or
/// repeated text; the other truth value; an empty list). Returns the arguments and whether
/// they are still drawn to succeed.
pub fn mutate(
    tool: &ToolSpec,
    args: &Map<String, Value>,
    index: &StateIndex,
    rng: &mut Rng,
) -> (Map<String, Value>, Intent) {
    let mut out = args.clone();
    let Some(param) = rng.pick(&tool.params) else {
        return (out, Intent::Valid);
    };
    let length = std::cell::Cell::new(None);
    let draw = Draw {
        index,
        focus: None,
        length: &length,
        inferred: true,
    };
    let name = param.name.clone();
    match rng.below(4) {
        0 => {
            let value = valid_value(&name, &param.schema, draw, rng, 0);
            out.insert(name, value);
            (out, Intent::Valid)
        }
        1 => {
            let value = invalid_value(&name, &param.schema, rng);
            out.insert(name, value);
            (out, Intent::Invalid)
        }
        2 if !param.required => {
            if out.remove(&name).is_none() {
                let value = valid_value(&name, &param.schema, draw, rng, 0);
                out.insert(name, value);
            }
            (out, Intent::Valid)
        }
        _ => {
            let schema = concrete(&param.schema);
            let current = out.get(&name).cloned().unwrap_or(Value::Null);
            let edge = match (schema_type(schema), current) {
                ("integer", v) => {
                    let n = v.as_i64().unwrap_or(1);
                    let bound = |key: &str| schema.get(key).and_then(Value::as_i64);
                    let edges = [
                        Some(0),
                        Some(-1),
                        bound("minimum"),
                        bound("maximum"),
                        Some(n.saturating_mul(2)),
                        Some(n / 2),
                        Some(n.saturating_add(1)),
                    ];
                    let edges: Vec<i64> = edges.into_iter().flatten().collect();
                    Value::from(*rng.pick(&edges).unwrap_or(&0))
                }
                ("number", v) => {
                    let n = v.as_f64().unwrap_or(1.0);
                    let edges = [0.0, -1.0, n * 2.0, n / 2.0, n + 0.01];
                    Value::from(*rng.pick(&edges).unwrap_or(&0.0))
                }
                ("boolean", v) => Value::Bool(!v.as_bool().unwrap_or(false)),
                ("array", Value::Array(items)) if !items.is_empty() && rng.chance(0.5) => {
                    let mut twice = items.clone();
                    twice.extend(items);
                    Value::Array(twice)
                }
                ("array", _) => Value::Array(Vec::new()),
                ("object", _) => Value::Object(Map::new()),
                (_, Value::String(s)) if !s.is_empty() && rng.chance(0.5) => {
                    Value::String(format!("{s}{s}"))
                }
                _ => Value::String(String::new()),
            };
            out.insert(name, edge);
            (out, Intent::Valid)
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
    use std::collections::BTreeMap;

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

    #[test]
    fn descriptions_quote_values_but_apostrophes_quote_nothing() {
        assert_eq!(
            quoted_values("Either 'no longer needed' or 'ordered by mistake'."),
            ["no longer needed", "ordered by mistake"]
        );
        assert_eq!(quoted_values("such as \"2 + 2\" (see 'x')"), ["2 + 2", "x"]);
        assert!(quoted_values("the user's order, the agent's words").is_empty());
        assert!(quoted_values("an unclosed 'quote").is_empty());
        assert!(quoted_values("").is_empty());
    }

    #[test]
    fn descriptions_give_values_and_examples_of_the_parameters_type() {
        let of = |schema: Value| described_values(&schema);
        assert_eq!(
            of(json!({"type": "integer", "description": "Expiry year, e.g. 2027"})),
            [json!(2027)]
        );
        assert_eq!(
            of(json!({"type": "object",
                "description": "Setpoints to change, e.g. {\"temp_day\": 23.5, \"humidity_max\": 78}."})),
            [json!({"temp_day": 23.5, "humidity_max": 78})]
        );
        assert_eq!(
            of(json!({"type": "string", "description": "One of \"new_policy\", \"late_report\"."})),
            [json!("new_policy"), json!("late_report")]
        );
        assert_eq!(
            of(
                json!({"type": "string", "description": "Return id, e.g. R3002. Or for example: R3003"})
            ),
            [json!("R3002"), json!("R3003")]
        );
        assert_eq!(
            of(json!({"type": "string", "description": "Range: 1.4.2, ^1.4.0, ~1.4.0 or *."})),
            [json!("1.4.2"), json!("^1.4.0"), json!("~1.4.0"), json!("*")]
        );
        // A colon before words that are no list, another type, or no example: nothing.
        assert!(
            of(json!({"type": "string", "description": "Note: the name of the owner"})).is_empty()
        );
        assert!(of(json!({"type": "string", "description": "Format: YYYY-MM-DD"})).is_empty());
        assert!(of(json!({"type": "integer", "description": "Name, e.g. ann"})).is_empty());
        assert!(of(json!({"type": "object", "description": "e.g. {broken"})).is_empty());
        assert!(of(json!({"type": "string", "description": "Whatever fits."})).is_empty());
        assert!(of(json!({"type": "string"})).is_empty());
    }

    #[test]
    fn a_text_whose_description_names_a_field_takes_the_focus_records_own() {
        let spec = ToolSpec::from_schema(&json!({"type": "function", "function": {"name": "login",
            "parameters": {"type": "object", "properties": {
                "username": {"type": "string", "description": "Your account email."},
                "password": {"type": "string", "description": "Your account password."}},
            "required": ["username", "password"]}}}))
        .unwrap();
        let state = json!({"users": {
            "1": {"email": "ann@example.com", "password": "pw-ann"},
            "2": {"email": "bo@example.com", "password": "pw-bo"}}});
        let index = StateIndex::new(&state);
        for seed in 0..50 {
            let mut rng = Rng::new(seed);
            let focus = index.focus(&spec, &state, &mut rng).with_own_values();
            let args = arguments_explored(&spec, &index, Some(&focus), &mut rng, Intent::Valid);
            let pair = (args["username"].as_str(), args["password"].as_str());
            assert!(
                [
                    (Some("ann@example.com"), Some("pw-ann")),
                    (Some("bo@example.com"), Some("pw-bo"))
                ]
                .contains(&pair),
                "{args:?}"
            );
        }
    }

    #[test]
    fn a_description_naming_a_field_in_two_words_takes_that_fields_values() {
        let schema =
            json!({"type": "string", "description": "User ID of the user to send the message to."});
        let fields = BTreeMap::from([
            ("user_id", json!("USR002")),
            ("user", json!("Jane")),
            ("message", json!("Contact added.")),
        ]);
        let mut asked = Vec::new();
        let found = described_field(&schema, |name| {
            asked.push(name.to_owned());
            fields.get(name).cloned().into_iter().collect()
        });
        // `user_id` comes before the word `user` alone and before `message`.
        assert_eq!(found, vec![json!("USR002")]);
        assert_eq!(asked, ["user_id"]);
        // Without it, the first single word of four letters or more that names a field.
        let found = described_field(&schema, |name| {
            (name != "user_id")
                .then(|| fields.get(name).cloned())
                .flatten()
                .into_iter()
                .collect()
        });
        assert_eq!(found, vec![json!("Jane")]);
    }

    #[test]
    fn the_explorer_draws_what_descriptions_give_and_objects_from_the_focus() {
        let spec = ToolSpec::from_schema(&json!({"type": "function", "function": {"name": "set",
            "parameters": {"type": "object", "properties": {
                "meter_id": {"type": "string"},
                "registers": {"type": "object", "description": "e.g. {\"peak\": 1.5}"},
                "exp_year": {"type": "integer", "description": "Expiry year, e.g. 2027"}},
            "required": ["meter_id", "registers", "exp_year"]}}}))
        .unwrap();
        let state = json!({"meters": {"M1": {"meter_id": "M1", "registers": {"standard": 10.5}}}});
        let index = StateIndex::new(&state);
        let (mut years, mut copied, mut described) = (0, 0, 0);
        for seed in 0..200 {
            let mut rng = Rng::new(seed);
            let focus = index.focus(&spec, &state, &mut rng);
            let args = arguments_explored(&spec, &index, Some(&focus), &mut rng, Intent::Valid);
            years += usize::from(args["exp_year"] == json!(2027));
            copied += usize::from(args["registers"] == json!({"standard": 10.5}));
            described += usize::from(args["registers"] == json!({"peak": 1.5}));
        }
        assert!((20..=90).contains(&years), "{years}");
        assert!(copied >= 50 && described >= 50, "{copied} {described}");
        // Plain drawing (the random walks) is as it was: no description, no copies.
        for seed in 0..50 {
            let args = arguments(&spec, &index, &mut Rng::new(seed), Intent::Valid);
            assert_ne!(args["exp_year"], json!(2027));
            assert_eq!(args["registers"], json!({}));
        }
    }

    #[test]
    fn qualified_id_names_fall_back_to_their_noun() {
        assert_eq!(unqualified("new_item_ids"), Some("item_ids"));
        assert_eq!(unqualified("source_account_id"), Some("account_id"));
        assert_eq!(unqualified("item_ids"), None);
        assert_eq!(unqualified("first_name"), None);
    }
}

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

use envsim_core::rng::Rng;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// How many distinct values per field name the index keeps.
const VALUES_PER_FIELD: usize = 64;

/// How many places of one collection name (`variants` inside each product) the index keeps.
const PLACES_PER_NAME: usize = 256;

/// How many records of a collection a focus draws to find one in the state its tool names.
const RECORDS_TRIED: usize = 8;

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

/// How many referenced records a focus follows from its record.
const FOCUS_HOPS: usize = 8;

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
    /// Where each collection lies in the state (JSON pointers), by name.
    places: BTreeMap<String, Vec<String>>,
    /// The keys of every object, by its name (a door's name in `doorStatus`), at most
    /// [`VALUES_PER_FIELD`] per name.
    object_keys: BTreeMap<String, Vec<String>>,
}

/// What a coherent call draws its arguments from first ([`StateIndex::focus`]): one record,
/// and the records it references.
#[derive(Clone, Debug, Default)]
pub struct Focus {
    /// The record itself (its key as the one entry of its collection).
    own: StateIndex,
    /// The records its id fields reference (an order's user, its items' products).
    near: StateIndex,
    /// The call takes the field values of the record and its neighbours too: a tool that
    /// only reads (by its name) always does; a changing tool only in a [`RESTATE_SHARE`] of
    /// its calls, which set what is there again (an address saved unchanged, as agents do),
    /// so that walks show whether such a call still succeeds and changes nothing. Otherwise a
    /// changing tool takes only ids, since the record's own `status` set again would be most
    /// of its calls, and a neighbour's `name` is no name for a new disk.
    own_values: bool,
    /// The record itself, when there is one.
    pub record: Option<RecordRef>,
}

/// The kind of a record, as a tool's preconditions tell records apart: the values of its
/// category fields (`status`, `type`, `role`, … and every truth value) and which of its fields
/// are empty. Two pending orders are of one kind; a pending and a paid one are not.
pub fn kind_of(record: &Value) -> String {
    const CATEGORY: [&str; 14] = [
        "status", "state", "stage", "type", "kind", "category", "role", "tier", "plan", "level",
        "mode", "class", "phase", "active",
    ];
    let Some(fields) = record.as_object() else {
        return String::new();
    };
    let mut out = String::new();
    for (field, value) in fields {
        let lower = field.to_ascii_lowercase();
        let category = lower
            .split('_')
            .any(|w| CATEGORY.contains(&w) || w == "is" || w == "has");
        let shown = match value {
            Value::Bool(b) => Some(b.to_string()),
            Value::Null => Some("null".to_owned()),
            Value::String(s) if category && s.len() <= 32 => Some(s.clone()),
            Value::Array(items) if items.is_empty() => Some("[]".to_owned()),
            Value::Object(map) if map.is_empty() => Some("{}".to_owned()),
            _ => None,
        };
        if let Some(shown) = shown {
            out.push_str(field);
            out.push('=');
            out.push_str(&shown);
            out.push(';');
        }
    }
    out
}

/// Whether a parameter names an id (`order_id`, `item_ids`, `flight_number`, `id`).
pub(crate) fn names_an_id(name: &str) -> bool {
    name.eq_ignore_ascii_case("id") || id_stem(name).len() < name.len()
}

/// How often a coherent call of a changing tool sets the record's own values again.
const RESTATE_SHARE: f64 = 0.15;

/// How often a focus offers the record's own values alone, where it has some: an order's items
/// are what `return_items(order_id, item_ids)` takes, while its referenced products' variants
/// are what `exchange(..., new_item_ids)` takes; the user's payment methods, not only the one
/// the order was paid with.
const OWN_SHARE: f64 = 0.6;

impl Focus {
    /// Values for a parameter: the record's own, or those of the record and what it
    /// references together.
    fn offered(&self, name: &str, rng: &mut Rng) -> Vec<Value> {
        // A changing tool's other values (a name, a size) are the state's at large: those of
        // the record or its neighbours would set again what is there, or name the wrong thing.
        if !self.own_values && !names_an_id(name) {
            return Vec::new();
        }
        let own = self.own.offered(name);
        if !own.is_empty() && rng.chance(OWN_SHARE) {
            return own;
        }
        let mut all = own;
        all.extend(self.near.offered(name));
        all
    }

    /// Whether the focus offers anything for the parameter.
    fn offers(&self, name: &str) -> bool {
        !self.own.offered(name).is_empty() || !self.near.offered(name).is_empty()
    }
}

/// One step of the path to a value while indexing.
#[derive(Clone, Copy)]
enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

/// The JSON pointer of a path.
fn pointer(path: &[Segment<'_>]) -> String {
    let mut out = String::new();
    for segment in path {
        out.push('/');
        match segment {
            Segment::Key(k) => out.push_str(&k.replace('~', "~0").replace('/', "~1")),
            Segment::Index(i) => out.push_str(&i.to_string()),
        }
    }
    out
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

impl StateIndex {
    /// Indexes a state.
    pub fn new(state: &Value) -> StateIndex {
        let mut index = StateIndex::default();
        index.visit(None, state, 0, &mut Vec::new());
        index
    }

    fn visit<'a>(
        &mut self,
        name: Option<&str>,
        value: &'a Value,
        depth: usize,
        path: &mut Vec<Segment<'a>>,
    ) {
        if depth > 6 {
            return;
        }
        match value {
            Value::Object(map) => {
                let records = map.values().filter(|v| v.is_object()).count();
                if let Some(name) = name {
                    let keys = self.object_keys.entry(name.to_owned()).or_default();
                    for key in map.keys() {
                        if keys.len() < VALUES_PER_FIELD && !keys.contains(key) {
                            keys.push(key.clone());
                        }
                    }
                    if records > 0 && records * 2 >= map.len() {
                        self.collections
                            .entry(name.to_owned())
                            .or_default()
                            .extend(map.keys().cloned());
                        let places = self.places.entry(name.to_owned()).or_default();
                        if places.len() < PLACES_PER_NAME {
                            places.push(pointer(path));
                        }
                    }
                }
                for (k, v) in map {
                    path.push(Segment::Key(k));
                    self.visit(Some(k), v, depth + 1, path);
                    path.pop();
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().take(32).enumerate() {
                    path.push(Segment::Index(i));
                    self.visit(name, item, depth + 1, path);
                    path.pop();
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
        let stem = id_stem(param);
        for (name, keys) in &self.collections {
            if stem_names(&stem, name) {
                out.extend(keys.iter().map(|k| Value::String(k.clone())));
            }
        }
        out
    }

    /// Indexes one entry of a collection as [`StateIndex::new`] would index the collection
    /// holding it alone: its key as the collection's one key, its fields as values.
    fn visit_entry(&mut self, collection: &str, key: &str, record: &Value) {
        if record.is_object() {
            self.collections
                .entry(collection.to_owned())
                .or_default()
                .push(key.to_owned());
        }
        self.visit(Some(key), record, 1, &mut vec![Segment::Key(key)]);
    }

    /// Values a focus offers for a parameter: ids that fit its name, else values stored under
    /// it, else the same for a list's singular (`item_ids` → `item_id`) and for the name
    /// without its qualifier (`new_item_ids` → `item_ids`).
    fn offered(&self, name: &str) -> Vec<Value> {
        let ids = self.ids_for(name);
        if !ids.is_empty() {
            return ids;
        }
        if let Some(seen) = self.values.get(name).filter(|v| !v.is_empty()) {
            return seen.clone();
        }
        // A list parameter takes what its singular names (`item_ids` → `item_id`).
        if let Some(one) = name.strip_suffix('s').filter(|one| one.ends_with("_id")) {
            let found = self.offered(one);
            if !found.is_empty() {
                return found;
            }
        }
        unqualified(name).map_or_else(Vec::new, |bare| self.offered(bare))
    }

    /// A record of `state` (which this index was built from) that the arguments of a call to
    /// `tool` can be drawn from together, as the index of that record and of the records it
    /// references by id (`user_id` → the user; one step, at most [`FOCUS_HOPS`]). The record
    /// is drawn from the collection that fits most parameters: one whose noun a parameter's id
    /// names counts twice, a field a parameter is named after once (one record of each
    /// collection is read to tell). Empty when no collection fits any parameter: the call is
    /// still drawn as a coherent one (values its descriptions quote).
    pub fn focus(&self, tool: &ToolSpec, state: &Value, rng: &mut Rng) -> Focus {
        self.focus_preferring(tool, state, rng, &|_, _, _| false)
    }

    /// [`StateIndex::focus`], taking among the records drawn of a collection one that
    /// `prefer(collection, key, record)` accepts before any other (the explorer prefers a
    /// record of a kind the tool has not been called on: a `checked_in` appointment after
    /// `booked` and `completed` ones).
    pub fn focus_preferring(
        &self,
        tool: &ToolSpec,
        state: &Value,
        rng: &mut Rng,
        prefer: &dyn Fn(&str, &str, &Value) -> bool,
    ) -> Focus {
        let words: Vec<&str> = tool.name.split('_').filter(|w| w.len() > 3).collect();
        // The collections that fit best, each with its drawn record and that record's index.
        let mut best: Vec<(&str, &String, &Value, StateIndex, &String)> = Vec::new();
        let mut best_score = 0;
        for (name, places) in &self.places {
            let Some((place, collection)) = rng
                .pick(places)
                .and_then(|p| state.pointer(p).and_then(Value::as_object).map(|c| (p, c)))
            else {
                continue;
            };
            let keys: Vec<&String> = collection.keys().collect();
            // Among a few records, one the caller prefers, else one that holds a word of the
            // tool's name as a value (a pending order for `cancel_pending_order`), else the
            // first drawn.
            let drawn: Vec<&String> = (0..RECORDS_TRIED)
                .filter_map(|_| rng.pick(&keys).copied())
                .collect();
            let Some(key) = drawn
                .iter()
                .find(|k| prefer(name, k, &collection[k.as_str()]))
                .or_else(|| {
                    drawn
                        .iter()
                        .find(|k| holds_any(&collection[k.as_str()], &words))
                })
                .or(drawn.first())
                .copied()
            else {
                continue;
            };
            let sample = StateIndex::new(&collection[key]);
            let score: usize = tool
                .params
                .iter()
                .map(|p| {
                    if stem_names(&id_stem(&p.name), name) {
                        2
                    } else {
                        usize::from(!sample.offered(&p.name).is_empty())
                    }
                })
                .sum();
            if score > best_score {
                best_score = score;
                best.clear();
            }
            if score == best_score && score > 0 {
                best.push((name, key, &collection[key], sample, place));
            }
        }
        let mut focus = Focus {
            own_values: envsim_core::audit::ToolEffects::guess(&tool.name).read_only
                || rng.chance(RESTATE_SHARE),
            ..Focus::default()
        };
        if best.is_empty() {
            return focus;
        }
        // As `rng.pick` would draw it, taken rather than copied.
        let (name, key, record, record_index, place) = best.swap_remove(rng.below(best.len()));
        self.surround(&mut focus, name, key, record, &record_index, state);
        focus.record = Some(RecordRef {
            collection: name.to_owned(),
            place: place.clone(),
            key: key.clone(),
        });
        focus
    }

    /// A focus on one given record: `key` of the collection `name` at `place` (a JSON pointer
    /// into `state`, which this index was built from), and the records it references. `None`
    /// when no such record is there.
    pub fn focus_on(
        &self,
        tool: &ToolSpec,
        state: &Value,
        record: &RecordRef,
        rng: &mut Rng,
    ) -> Option<Focus> {
        let found = state.pointer(&record.place)?.get(&record.key)?;
        let mut focus = Focus {
            own_values: envsim_core::audit::ToolEffects::guess(&tool.name).read_only
                || rng.chance(RESTATE_SHARE),
            ..Focus::default()
        };
        let record_index = StateIndex::new(found);
        self.surround(
            &mut focus,
            &record.collection,
            &record.key,
            found,
            &record_index,
            state,
        );
        focus.record = Some(record.clone());
        Some(focus)
    }

    /// Where a record whose key is `key` lies: the first collection (in name order, then
    /// place order) that holds an object under that key.
    pub fn locate(&self, state: &Value, key: &str) -> Option<RecordRef> {
        self.places.iter().find_map(|(name, places)| {
            places.iter().find_map(|p| {
                state
                    .pointer(p)?
                    .get(key)
                    .filter(|v| v.is_object())
                    .map(|_| RecordRef {
                        collection: name.clone(),
                        place: p.clone(),
                        key: key.to_owned(),
                    })
            })
        })
    }

    /// The records of the collection at `place` (keys in the state's order).
    pub fn records_at<'s>(&self, state: &'s Value, place: &str) -> Vec<(&'s String, &'s Value)> {
        state
            .pointer(place)
            .and_then(Value::as_object)
            .map(|m| m.iter().filter(|(_, v)| v.is_object()).collect())
            .unwrap_or_default()
    }

    /// The keys of the collections named `collection`, at every place it lies.
    pub fn keys_of(&self, collection: &str) -> &[String] {
        self.collections.get(collection).map_or(&[], Vec::as_slice)
    }

    /// The keys of the objects whose names share a word with `name` (`doorStatus`'s for
    /// `door`).
    pub fn keys_named_like(&self, name: &str) -> Vec<String> {
        let words = name_words(name);
        let mut out: Vec<String> = Vec::new();
        for (object, keys) in &self.object_keys {
            let shares = name_words(object).iter().any(|w| {
                w.len() > 2
                    && words
                        .iter()
                        .any(|n| n.trim_end_matches('s') == w.trim_end_matches('s'))
            });
            if shares {
                for key in keys {
                    if !out.contains(key) {
                        out.push(key.clone());
                    }
                }
            }
        }
        out
    }

    /// Every collection's places, by name.
    pub fn places(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.places.iter().map(|(k, v)| (k.as_str(), v.as_slice()))
    }

    /// Offers, beside the state's, the scalar values of `answer` (an earlier call's answer)
    /// under their field names: a token a login returned, the id a creation answered with.
    pub fn absorb(&mut self, answer: &Value) {
        let mut found = StateIndex::default();
        found.visit(None, answer, 1, &mut Vec::new());
        for (name, values) in found.values {
            let seen = self.values.entry(name).or_default();
            for value in values {
                if seen.len() < VALUES_PER_FIELD && !seen.contains(&value) {
                    seen.push(value);
                }
            }
        }
    }

    /// The values offered for a parameter named `name`, from the state and absorbed answers
    /// (ids that fit the name first).
    pub fn offered_for(&self, name: &str) -> Vec<Value> {
        self.offered(name)
    }

    /// Adds to `focus` the record `key` of collection `name` and the records its id fields
    /// reference (at most [`FOCUS_HOPS`]).
    fn surround(
        &self,
        focus: &mut Focus,
        name: &str,
        key: &str,
        record: &Value,
        record_index: &StateIndex,
        state: &Value,
    ) {
        focus.own.visit_entry(name, key, record);
        let mut hops = 0;
        'fields: for (field, values) in &record_index.values {
            let stem = id_stem(field);
            for value in values.iter().filter_map(Value::as_str) {
                let target = self
                    .places
                    .iter()
                    .filter(|(other, _)| other.as_str() != name && stem_names(&stem, other))
                    .find_map(|(other, places)| {
                        places.iter().find_map(|p| {
                            let found = state.pointer(p)?.get(value)?;
                            found.is_object().then_some((other, found))
                        })
                    });
                if let Some((other, found)) = target {
                    focus.near.visit_entry(other, value, found);
                    hops += 1;
                    if hops == FOCUS_HOPS {
                        break 'fields;
                    }
                }
            }
        }
    }
}

/// The words of a name, lowercase: split at `_`, `-` and where a lowercase letter or digit
/// meets an uppercase one (`pedalPosition` → `pedal`, `position`).
pub fn name_words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if c == '_' || c == '-' || c == ' ' {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// The shapes of text a parameter's name or format asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `2024-06-17`.
    Date,
    /// `2024-06-17T09:30` (with or without seconds and zone).
    DateTime,
    /// `ann@example.com`.
    Email,
    /// `/home/ann/notes.txt`.
    AbsolutePath,
    /// `https://…`.
    Url,
}

impl Shape {
    /// The shape a parameter named `name` with `schema` asks for, if any: its `format`, else
    /// its name's words.
    pub(crate) fn of(name: &str, schema: &Value) -> Option<Shape> {
        match schema.get("format").and_then(Value::as_str) {
            Some("date") => return Some(Shape::Date),
            Some("date-time") => return Some(Shape::DateTime),
            Some("email" | "idn-email") => return Some(Shape::Email),
            Some("uri" | "url" | "iri") => return Some(Shape::Url),
            _ => {}
        }
        let words = name_words(name);
        let has = |w: &str| words.iter().any(|x| x == w);
        // `from` and `until` are times only where the name says validity (`valid_from`); a
        // `travel_from` is a place.
        let validity = has("valid") || has("effective") || has("available");
        if has("email") || has("mail") {
            Some(Shape::Email)
        } else if has("date") || has("day") || has("on") && words.len() > 1 {
            Some(Shape::Date)
        } else if has("time")
            || has("at") && words.len() > 1
            || has("start")
            || has("end")
            || validity && (has("from") || has("until") || has("to"))
            || has("since")
            || has("datetime")
            || has("timestamp")
        {
            Some(Shape::DateTime)
        } else if has("path")
            || has("dir")
            || has("directory")
            || has("folder")
            || has("source")
            || has("destination")
            || has("src")
            || has("dst")
        {
            Some(Shape::AbsolutePath)
        } else if has("url") || has("uri") || has("link") || has("website") {
            Some(Shape::Url)
        } else {
            None
        }
    }

    /// A new text of this shape (an address, a date, a path, a page) when the state offers
    /// none.
    pub(crate) fn example(self, rng: &mut Rng) -> String {
        let n = 100 + rng.below(900);
        match self {
            Shape::Date => format!("2025-{:02}-{:02}", 1 + rng.below(12), 1 + rng.below(28)),
            Shape::DateTime => format!(
                "2025-{:02}-{:02}T{:02}:{:02}",
                1 + rng.below(12),
                1 + rng.below(28),
                8 + rng.below(10),
                15 * rng.below(4)
            ),
            Shape::Email => format!("explorer{n}@example.com"),
            Shape::AbsolutePath => format!("/tmp/explorer-{n}"),
            Shape::Url => format!("https://example.com/explorer-{n}"),
        }
    }

    /// The part of `text` of this shape, when it has one (a date-time's date for a date).
    pub(crate) fn fit(self, text: &str) -> Option<String> {
        let b = text.as_bytes();
        let digits =
            |r: std::ops::Range<usize>| r.end <= b.len() && b[r].iter().all(u8::is_ascii_digit);
        let date = digits(0..4)
            && b.get(4) == Some(&b'-')
            && digits(5..7)
            && b.get(7) == Some(&b'-')
            && digits(8..10);
        match self {
            Shape::Date => date.then(|| text[..10].to_owned()),
            Shape::DateTime => (date
                && matches!(b.get(10), Some(b'T' | b' '))
                && digits(11..13)
                && b.get(13) == Some(&b':')
                && digits(14..16))
            .then(|| text.to_owned()),
            Shape::Email => {
                let (user, host) = text.split_once('@')?;
                (!user.is_empty() && host.contains('.') && !text.contains(' '))
                    .then(|| text.to_owned())
            }
            Shape::AbsolutePath => {
                (text.starts_with('/') && !text.contains(' ')).then(|| text.to_owned())
            }
            Shape::Url => (text.starts_with("http://") || text.starts_with("https://"))
                .then(|| text.to_owned()),
        }
    }
}

impl StateIndex {
    /// Values of the fields related to a parameter by name: fields named after its last word
    /// (`date` for `read_date`) or ending in it (`end_date` for `new_end_date`), and the field
    /// its name ends in (`email` for `to_email`). Not for ids: those follow their nouns.
    pub(crate) fn related(&self, name: &str) -> Vec<Value> {
        let words = name_words(name);
        let [.., last] = words.as_slice() else {
            return Vec::new();
        };
        let last = last.as_str();
        if words.len() < 2 || last.len() < 3 || names_an_id(name) {
            return Vec::new();
        }
        let mut out: Vec<Value> = Vec::new();
        for (field, values) in &self.values {
            let related = field != name
                && (field == last
                    || field.ends_with(&format!("_{last}"))
                    || name.ends_with(&format!("_{field}")));
            if related {
                for v in values {
                    if out.len() < VALUES_PER_FIELD && !out.contains(v) {
                        out.push(v.clone());
                    }
                }
            }
        }
        out
    }

    /// Texts of the state (and absorbed answers) of the shape the parameter asks for.
    pub(crate) fn shaped(&self, name: &str, schema: &Value) -> Vec<String> {
        match Shape::of(name, schema) {
            Some(shape) => self.shaped_as(shape),
            None => Vec::new(),
        }
    }

    /// Texts of the state (and absorbed answers) of a shape.
    /// Texts of the state (values, and keys: an address that keys its customer) and of
    /// absorbed answers of a shape.
    pub(crate) fn shaped_as(&self, shape: Shape) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let values = self.values.values().flatten().filter_map(Value::as_str);
        let keys = self.collections.values().flatten().map(String::as_str);
        for v in values.chain(keys) {
            if let Some(fit) = shape.fit(v) {
                if out.len() < VALUES_PER_FIELD && !out.contains(&fit) {
                    out.push(fit);
                }
            }
        }
        out
    }
}

/// One record of the state: its collection's name, where that collection lies, and its key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecordRef {
    /// The collection's name (`orders`).
    pub collection: String,
    /// The collection's JSON pointer in the state.
    pub place: String,
    /// The record's key.
    pub key: String,
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
    let mut seen: Vec<Value> = index.values.get(name).cloned().unwrap_or_default();
    if seen.is_empty() && draw.inferred {
        seen = index.related(name);
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
        "array" => {
            if depth > 2 {
                return Value::Array(Vec::new());
            }
            let item_schema = schema.get("items").cloned().unwrap_or(Value::Null);
            let singular = name.trim_end_matches('s');
            let in_focus = draw.focus.is_some_and(|f| f.offers(singular));
            let item_name = if in_focus
                || index.values.contains_key(singular)
                || !index.ids_for(singular).is_empty()
            {
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
        "object" => {
            if depth > 2 {
                return Value::Object(Map::new());
            }
            match schema.get("properties").and_then(Value::as_object) {
                Some(props) => props
                    .iter()
                    .map(|(k, v)| (k.clone(), valid_value(k, v, draw, rng, depth + 1)))
                    .collect(),
                None => Value::Object(Map::new()),
            }
        }
        _ => {
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
                let shaped = index.shaped(name, schema);
                if let Some(v) = rng.pick(&shaped) {
                    // Now and then a new one of the shape: what the state holds may be taken
                    // (an address already registered).
                    if !rng.chance(0.25) {
                        return Value::String(v.clone());
                    }
                }
                if let Some(made) = Shape::of(name, schema).map(|s| s.example(rng)) {
                    return Value::String(made);
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

    fn returns() -> ToolSpec {
        ToolSpec::from_schema(&json!({"type": "function", "function": {"name": "return_delivered_items",
            "parameters": {"type": "object", "properties": {
                "order_id": {"type": "string"},
                "item_ids": {"type": "array", "items": {"type": "string"}},
                "new_item_ids": {"type": "array", "items": {"type": "string"}},
                "payment_method_id": {"type": "string"},
                "reason": {"type": "string", "description": "Either 'no longer needed' or 'ordered by mistake'; the user's words."}},
            "required": ["order_id", "item_ids", "new_item_ids", "payment_method_id", "reason"]}}}))
        .unwrap()
    }

    fn shop() -> Value {
        json!({
            "orders": {
                "O1": {"user_id": "U1", "status": "pending", "items": [{"item_id": "I1", "product_id": "P1"}]},
                "O2": {"user_id": "U2", "status": "delivered", "items": [{"item_id": "I2", "product_id": "P2"}]}},
            "users": {
                "U1": {"payment_methods": {"card_1": {"kind": "card"}}},
                "U2": {"payment_methods": {"card_2": {"kind": "card"}}}},
            "products": {
                "P1": {"variants": {"I1": {"item_id": "I1"}, "I3": {"item_id": "I3"}}},
                "P2": {"variants": {"I2": {"item_id": "I2"}, "I4": {"item_id": "I4"}}}}
        })
    }

    #[test]
    fn a_coherent_call_draws_from_one_record_and_what_it_references() {
        let state = shop();
        let index = StateIndex::new(&state);
        let spec = returns();
        let (mut first, mut second) = (0, 0);
        for seed in 0..60 {
            let mut rng = Rng::new(seed);
            let focus = index.focus(&spec, &state, &mut rng);
            let args = arguments_with(&spec, &index, Some(&focus), &mut rng, Intent::Valid);
            let ids = |key: &str| -> Vec<&str> {
                args[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect()
            };
            // The order's own items, its user's payment method, its products' variants.
            let (items, card, variants) = match args["order_id"].as_str().unwrap() {
                "O1" => (["I1"], "card_1", ["I1", "I3"]),
                "O2" => (["I2"], "card_2", ["I2", "I4"]),
                other => panic!("no such order {other}"),
            };
            match items[0] {
                "I1" => first += 1,
                _ => second += 1,
            }
            assert_eq!(args["payment_method_id"], card, "{args:?}");
            assert!(
                ids("item_ids").iter().all(|i| variants.contains(i)),
                "{args:?}"
            );
            assert!(
                ids("new_item_ids").iter().all(|i| variants.contains(i)),
                "{args:?}"
            );
            // Parallel lists run to one length.
            assert_eq!(ids("item_ids").len(), ids("new_item_ids").len(), "{args:?}");
            assert!(
                ["no longer needed", "ordered by mistake"]
                    .contains(&args["reason"].as_str().unwrap()),
                "{args:?}"
            );
        }
        // Of the eight records drawn each time, the delivered order the tool names is taken
        // whenever it is among them (all but 1 in 256 draws).
        assert!(second >= 58, "{first} pending vs {second} delivered");
        // Without a focus the same call mixes records.
        let mixed = (0..60).any(|seed| {
            let args = arguments(&spec, &index, &mut Rng::new(seed), Intent::Valid);
            let card = if args["order_id"] == "O1" {
                "card_1"
            } else {
                "card_2"
            };
            args["payment_method_id"] != card
        });
        assert!(mixed);
    }

    #[test]
    fn a_tool_no_collection_fits_gets_an_empty_focus() {
        let state = shop();
        let index = StateIndex::new(&state);
        let spec = ToolSpec::from_schema(
            &json!({"type": "function", "function": {"name": "calculate",
            "parameters": {"type": "object", "properties": {"expression": {"type": "string",
                "description": "An expression, such as '2 + 2'."}}, "required": ["expression"]}}}),
        )
        .unwrap();
        let mut rng = Rng::new(3);
        let focus = index.focus(&spec, &state, &mut rng);
        assert!(!focus.offers("expression"));
        let args = arguments_with(&spec, &index, Some(&focus), &mut rng, Intent::Valid);
        assert_eq!(args["expression"], "2 + 2");
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
    fn names_split_into_words_and_shapes() {
        assert_eq!(name_words("pedalPosition"), ["pedal", "position"]);
        assert_eq!(name_words("new_end_date"), ["new", "end", "date"]);
        assert_eq!(name_words("HTTPServer2Port"), ["httpserver2", "port"]);
        assert_eq!(name_words("__x__"), ["x"]);
        let none = json!({});
        assert_eq!(Shape::of("read_date", &none), Some(Shape::Date));
        assert_eq!(Shape::of("startTime", &none), Some(Shape::DateTime));
        assert_eq!(Shape::of("valid_from", &none), Some(Shape::DateTime));
        assert_eq!(Shape::of("travel_from", &none), None);
        assert_eq!(Shape::of("to_email", &none), Some(Shape::Email));
        assert_eq!(Shape::of("source", &none), Some(Shape::AbsolutePath));
        assert_eq!(
            Shape::of("x", &json!({"format": "date-time"})),
            Some(Shape::DateTime)
        );
        assert_eq!(
            Shape::Date.fit("2025-03-01T09:00"),
            Some("2025-03-01".into())
        );
        assert_eq!(Shape::DateTime.fit("2025-03-01"), None);
        assert_eq!(Shape::Email.fit("a b@c.d"), None);
        assert_eq!(
            Shape::AbsolutePath.fit("/home/ann"),
            Some("/home/ann".into())
        );
    }

    #[test]
    fn qualified_id_names_fall_back_to_their_noun() {
        assert_eq!(unqualified("new_item_ids"), Some("item_ids"));
        assert_eq!(unqualified("source_account_id"), Some("account_id"));
        assert_eq!(unqualified("item_ids"), None);
        assert_eq!(unqualified("first_name"), None);
    }

    #[test]
    fn a_changing_tool_sets_the_records_own_values_again_only_sometimes() {
        let state = json!({"orders": {"O1": {"status": "new", "zip": "123"}}});
        let index = StateIndex::new(&state);
        let tool = |name: &str| {
            ToolSpec::from_schema(&json!({"type": "function", "function": {"name": name,
                "parameters": {"type": "object", "properties": {
                    "order_id": {"type": "string"}, "status": {"type": "string"}},
                "required": ["order_id", "status"]}}}))
            .unwrap()
        };
        let mut restated = 0;
        for seed in 0..400 {
            let mut rng = Rng::new(seed);
            let setter = index.focus(&tool("set_order_status"), &state, &mut rng);
            assert_eq!(setter.offered("order_id", &mut rng), [json!("O1")]);
            // Setting the status it has is a change that changes nothing: a few calls do it,
            // so that walks show what the tool answers then.
            restated += usize::from(!setter.offered("status", &mut rng).is_empty());
            let finder = index.focus(&tool("find_orders"), &state, &mut rng);
            assert_eq!(finder.offered("status", &mut rng), [json!("new")]);
        }
        assert!((30..=90).contains(&restated), "{restated} of 400");
        assert!(names_an_id("flight_number") && names_an_id("item_ids") && names_an_id("id"));
        assert!(!names_an_id("status") && !names_an_id("zip"));
    }
}

//! The state's index: what a state offers as argument values ([`StateIndex`]), by field
//! name, collection and shape, and the records a coherent call draws its arguments from
//! together ([`Focus`]: one record and the records it references).

use super::{
    holds_any, id_stem, name_words, names_an_id, stem_names, unqualified, Shape, ToolSpec,
};
use envsim_core::rng::Rng;
use serde_json::Value;
use std::collections::BTreeMap;

/// How many distinct values per field name the index keeps.
const VALUES_PER_FIELD: usize = 64;

/// How many places of one collection name (`variants` inside each product) the index keeps.
const PLACES_PER_NAME: usize = 256;

/// How many records of a collection a focus draws to find one in the state its tool names.
const RECORDS_TRIED: usize = 8;

/// How many referenced records a focus follows from its record.
const FOCUS_HOPS: usize = 8;

/// How often a coherent call of a changing tool sets the record's own values again.
const RESTATE_SHARE: f64 = 0.15;

/// How often a focus offers the record's own values alone, where it has some: an order's items
/// are what `return_items(order_id, item_ids)` takes, while its referenced products' variants
/// are what `exchange(..., new_item_ids)` takes; the user's payment methods, not only the one
/// the order was paid with.
const OWN_SHARE: f64 = 0.6;

/// What the state offers as argument values.
#[derive(Clone, Debug, Default)]
pub struct StateIndex {
    /// Keys of collections (objects whose values are objects), by collection name.
    pub(super) collections: BTreeMap<String, Vec<String>>,
    /// Scalar values found under each field name.
    pub(super) values: BTreeMap<String, Vec<Value>>,
    /// Where each collection lies in the state (JSON pointers), by name.
    places: BTreeMap<String, Vec<String>>,
    /// The keys of every object, by its name (a door's name in `doorStatus`), at most
    /// [`VALUES_PER_FIELD`] per name.
    object_keys: BTreeMap<String, Vec<String>>,
    /// Values earlier answers gave under names the state holds nothing of
    /// ([`StateIndex::absorb_unheld`]): offered for a parameter of that very name only, never
    /// as values of a shape or of a related name (a card id is no airport code).
    answered: BTreeMap<String, Vec<Value>>,
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
    /// The record's own fields that hold non-empty objects (a meter's `registers`), by name:
    /// what an object parameter of that name starts from.
    objects: BTreeMap<String, Value>,
}

impl Focus {
    /// The same focus, its record's own values taken whatever the tool (a login's address
    /// and password of one user: a call made for what it answers, not to change the record).
    pub fn with_own_values(self) -> Focus {
        Focus {
            own_values: true,
            ..self
        }
    }

    /// Values for a parameter: the record's own, or those of the record and what it
    /// references together.
    pub(super) fn offered(&self, name: &str, rng: &mut Rng) -> Vec<Value> {
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

    /// The values the record itself holds under the field `field` (its own, not its
    /// neighbours'), when the call takes its values.
    pub(super) fn own_field(&self, field: &str) -> Vec<Value> {
        if !self.own_values {
            return Vec::new();
        }
        self.own.values.get(field).cloned().unwrap_or_default()
    }

    /// The record's own object field named `name`, when it has a non-empty one.
    pub(super) fn object(&self, name: &str) -> Option<&Value> {
        self.objects.get(name)
    }

    /// Whether the focus offers anything for the parameter.
    pub(super) fn offers(&self, name: &str) -> bool {
        !self.own.offered(name).is_empty() || !self.near.offered(name).is_empty()
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

/// The names under which a tool's arguments hold objects of no declared shape, at any depth
/// (a list's items under its name and its singular, as lists are drawn): those a focus
/// record's own object of that name may fill ([`Focus::object`]).
fn shapeless_objects(tool: &ToolSpec) -> std::collections::BTreeSet<&str> {
    fn visit<'t>(name: &'t str, schema: &'t Value, out: &mut std::collections::BTreeSet<&'t str>) {
        let schema = super::concrete(schema);
        match super::schema_type(schema) {
            "object" => match schema.get("properties").and_then(Value::as_object) {
                Some(properties) => {
                    for (k, v) in properties {
                        visit(k, v, out);
                    }
                }
                None => {
                    out.insert(name);
                }
            },
            "array" => {
                if let Some(items) = schema.get("items") {
                    visit(name, items, out);
                    visit(name.trim_end_matches('s'), items, out);
                }
            }
            _ => {}
        }
    }
    let mut out = std::collections::BTreeSet::new();
    for param in &tool.params {
        visit(&param.name, &param.schema, &mut out);
    }
    out
}

impl RecordRef {
    /// The record in `state`, when it is there.
    pub fn in_state<'s>(&self, state: &'s Value) -> Option<&'s Value> {
        state.pointer(&self.place)?.get(&self.key)
    }

    /// The record's fields in `state`, when it is there as an object.
    pub fn fields_in<'s>(&self, state: &'s Value) -> Option<&'s serde_json::Map<String, Value>> {
        self.in_state(state)?.as_object()
    }
}

/// The kind of a record, as a tool's preconditions tell records apart: the values of its
/// category fields (`status`, `type`, `role`, … and every truth value) and which of its fields
/// are empty. Two pending orders are of one kind; a pending and a paid one are not.
pub fn kind_of(record: &Value) -> String {
    let mut out = String::new();
    for (field, shown) in kind_parts(record) {
        out.push_str(field);
        out.push('=');
        out.push_str(&shown);
        out.push(';');
    }
    out
}

/// How many of the parts of `record`'s kind (but `except`'s) `other` shares: a record like
/// another but for one field.
pub fn likeness(record: &Value, other: &Value, except: &str) -> usize {
    let theirs = kind_parts(other);
    kind_parts(record)
        .iter()
        .filter(|part| part.0 != except && theirs.contains(part))
        .count()
}

/// The fields of a record's kind ([`kind_of`]), each with its value as shown there.
fn kind_parts(record: &Value) -> Vec<(&str, String)> {
    const CATEGORY: [&str; 14] = [
        "status", "state", "stage", "type", "kind", "category", "role", "tier", "plan", "level",
        "mode", "class", "phase", "active",
    ];
    let Some(fields) = record.as_object() else {
        return Vec::new();
    };
    let mut out = Vec::new();
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
            out.push((field.as_str(), shown));
        }
    }
    out
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
    pub(super) fn ids_for(&self, param: &str) -> Vec<Value> {
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
        let seen = self.values_named(name);
        if !seen.is_empty() {
            return seen.to_vec();
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
        self.surround(tool, &mut focus, name, key, record, &record_index, state);
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
        let found = record.in_state(state)?;
        let mut focus = Focus {
            own_values: envsim_core::audit::ToolEffects::guess(&tool.name).read_only
                || rng.chance(RESTATE_SHARE),
            ..Focus::default()
        };
        let record_index = StateIndex::new(found);
        self.surround(
            tool,
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
        for (name, values) in StateIndex::answer_values(answer) {
            let seen = self.values.entry(name).or_default();
            for value in values {
                if seen.len() < VALUES_PER_FIELD && !seen.contains(&value) {
                    seen.push(value);
                }
            }
        }
    }

    /// The scalar values of an answer under their field names, as [`StateIndex::absorb`]
    /// offers them.
    pub fn answer_values(answer: &Value) -> BTreeMap<String, Vec<Value>> {
        let mut found = StateIndex::default();
        found.visit(None, answer, 1, &mut Vec::new());
        found.values
    }

    /// Offers `kept` (values earlier answers gave, by field name) under the names this index
    /// offers nothing for: a token only a login's answer holds, whichever answers came since.
    pub fn absorb_unheld(&mut self, kept: &BTreeMap<String, Vec<Value>>) {
        for (name, values) in kept {
            if self.offered(name).is_empty() {
                self.answered.insert(name.clone(), values.clone());
            }
        }
    }

    /// The values found under a field name: the state's and recent answers', else those kept
    /// from earlier answers for a name the state holds nothing of.
    pub(super) fn values_named(&self, name: &str) -> &[Value] {
        match self.values.get(name) {
            Some(values) if !values.is_empty() => values,
            _ => self.answered.get(name).map_or(&[], Vec::as_slice),
        }
    }

    /// The values offered for a parameter named `name`, from the state and absorbed answers
    /// (ids that fit the name first).
    pub fn offered_for(&self, name: &str) -> Vec<Value> {
        self.offered(name)
    }

    /// Adds to `focus` the record `key` of collection `name` and the records its id fields
    /// reference (at most [`FOCUS_HOPS`]).
    #[allow(clippy::too_many_arguments)]
    fn surround(
        &self,
        tool: &ToolSpec,
        focus: &mut Focus,
        name: &str,
        key: &str,
        record: &Value,
        record_index: &StateIndex,
        state: &Value,
    ) {
        focus.own.visit_entry(name, key, record);
        if let Some(fields) = record.as_object() {
            // Only what an object parameter of the tool can take: records may hold large
            // objects (a train's coaches and seats), and a focus is drawn for every call.
            let wanted = shapeless_objects(tool);
            focus.objects = fields
                .iter()
                .filter(|(f, v)| {
                    wanted.contains(f.as_str()) && v.as_object().is_some_and(|o| !o.is_empty())
                })
                .map(|(f, v)| (f.clone(), v.clone()))
                .collect();
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{arguments, arguments_with, Intent};
    use serde_json::json;

    #[test]
    fn values_kept_from_answers_are_offered_only_under_names_the_state_has_nothing_for() {
        let state = json!({"users": {"1": {"email": "ann@example.com", "status": "active"}}});
        let answer = json!({"access_token": "tok-1", "token_type": "Bearer",
            "status": "logged in", "items": [{"email": "old@example.com"}]});
        let kept = StateIndex::answer_values(&answer);
        assert_eq!(kept["access_token"], [json!("tok-1")]);
        assert_eq!(kept["email"], [json!("old@example.com")]);
        let mut index = StateIndex::new(&state);
        index.absorb_unheld(&kept);
        assert_eq!(index.offered_for("access_token"), [json!("tok-1")]);
        assert_eq!(index.offered_for("token_type"), [json!("Bearer")]);
        // What the state holds is offered as it is.
        assert_eq!(index.offered_for("status"), [json!("active")]);
        assert_eq!(index.offered_for("email"), [json!("ann@example.com")]);
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

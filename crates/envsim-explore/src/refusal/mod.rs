//! Reading refusals: what a refused call's answer and the state say to try next.
//!
//! A call drawn to succeed that the environment refused says why in words: a record that is
//! not found, a record in the wrong condition ("order O2 is pending", "msg-5 is not a draft"),
//! an argument out of bounds or outside a list of allowed values. [`read`] matches those words
//! against the call's arguments, the records they name and those records' fields, and proposes
//! what to try next ([`Next`]): the same tool on another record whose field has the value the
//! words ask for, a call that was seen setting that field (or creating such a record) before
//! the refused call is tried again, or the argument the words name drawn anew — from the values
//! they quote, the numbers they give, or the state. What tools do comes from the exploration
//! itself ([`Seen`]), so the explorer learns preconditions as it goes.

mod seen;
mod words;

pub use seen::{Creation, Seen, Touched, Write};
pub use words::answer_text;

use crate::driver::{
    arguments_explored, concrete, described_field, described_length, described_values, id_stem,
    likeness, name_words, names_an_id, schema_type, sized, spelled_length, stem_names, Intent,
    Param, RecordRef, Shape, StateIndex, ToolSpec,
};
use envsim_core::rng::Rng;
use seen::strings;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
pub(crate) use words::lengthened;
use words::{
    asked_shape, date_like, dated, least_characters, measures, names_field, norm, numbers,
    offered_values, ruled_values, same_word, saying, says, shaped_like, tokens, typed, value_text,
    variant, words, NOT_FOUND, TAKEN,
};

/// A call drawn to succeed that the environment refused.
#[derive(Clone, Copy, Debug)]
pub struct Refused<'a> {
    /// The tool.
    pub tool: &'a ToolSpec,
    /// Its arguments.
    pub args: &'a Map<String, Value>,
    /// The answer's text.
    pub answer: &'a str,
    /// The state it was refused in.
    pub state: &'a Value,
    /// The call's clock (seconds since the epoch): "today" for answers that say "in the
    /// future" or "30 days ahead".
    pub clock: f64,
}

/// What to try after a refusal.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// The refused tool again, with these arguments.
    Retry(Map<String, Value>),
    /// `tool(args)` first, then the refused tool as `then` says.
    Prepare {
        /// The preparing tool.
        tool: String,
        /// Its arguments.
        args: Map<String, Value>,
        /// The refused call's next try.
        then: Then,
    },
}

/// The refused call's try after a preparing call.
#[derive(Clone, Debug, PartialEq)]
pub enum Then {
    /// With these arguments.
    Same(Map<String, Value>),
    /// With these arguments and `param` set to the key of the record the preparing call
    /// creates.
    Created {
        /// The arguments.
        args: Map<String, Value>,
        /// The parameter that takes the new record's key.
        param: String,
    },
    /// With these arguments and `param` set to the field of that name in the preparing call's
    /// answer (the `access_token` a `login` answers with).
    Answered {
        /// The arguments.
        args: Map<String, Value>,
        /// The parameter that takes the answer's field.
        param: String,
    },
}

/// How many other records of a collection are read for the values a field takes.
const SIBLINGS_READ: usize = 64;

/// Most proposals [`read`] makes.
const MOST: usize = 6;

/// `key` as the value of an argument that held `like` (a list argument takes a list of it).
fn as_argument(like: Option<&Value>, key: &str) -> Value {
    match like {
        Some(Value::Array(_)) => Value::Array(vec![Value::String(key.to_owned())]),
        _ => Value::String(key.to_owned()),
    }
}

/// A record a refusal points at: one an argument names (with that argument), or one the
/// answer names by its key.
struct Pointed<'a> {
    param: Option<&'a String>,
    record: RecordRef,
}

/// Proposals for what to try after `refused`, most promising first (at most [`MOST`], none
/// equal to the refused call): `index` indexes the refused call's state, `seen` is what tools
/// were seen doing, `tools` are the package's tools. `refused.answer` is the answer's text as
/// [`answer_text`] reads it.
pub fn read(
    refused: &Refused<'_>,
    index: &StateIndex,
    seen: &Seen,
    tools: &[ToolSpec],
    rng: &mut Rng,
) -> Vec<Next> {
    let reading = Reading::new(refused, index, seen, tools);
    let mut out = Proposals {
        refused: refused.args,
        list: Vec::new(),
    };
    // The rules in the order their proposals rank (and draw from `rng`).
    reading.taken_values(&mut out, rng);
    reading.producers(&mut out, rng);
    reading.as_the_owner(&mut out);
    reading.held_by_named_records(&mut out);
    let unanswered = reading.named_arguments(&mut out, rng);
    reading.another_record(&mut out, rng);
    reading.records_the_answer_names(&mut out);
    reading.members_of_named_records(&mut out);
    reading.unknown_ids(&mut out, rng);
    reading.wrong_conditions(&mut out, rng);
    reading.writes_through_arguments(&mut out, rng);
    reading.missed_keys(&mut out);
    reading.state_values(&unanswered, &mut out);
    out.list
}

/// The proposals made so far, most promising first.
struct Proposals<'a> {
    /// The refused call's arguments, which no proposal repeats.
    refused: &'a Map<String, Value>,
    list: Vec<Next>,
}

impl Proposals<'_> {
    /// Adds `next` while there are fewer than [`MOST`], when it is new: not the refused call,
    /// and not a proposal already made (a preparing call counts as made when the same tool
    /// prepares the same try).
    fn push(&mut self, next: Next) {
        let fresh = match &next {
            Next::Retry(args) => args != self.refused && !self.list.contains(&next),
            Next::Prepare { tool, then, .. } => !self.list.iter().any(
                |o| matches!(o, Next::Prepare { tool: t, then: n, .. } if t == tool && n == then),
            ),
        };
        if fresh && self.list.len() < MOST {
            self.list.push(next);
        }
    }

    /// Adds the refused call again with each of `values` set.
    fn retry_all(&mut self, values: Vec<(String, Value)>) {
        let mut args = self.refused.clone();
        args.extend(values);
        self.push(Next::Retry(args));
    }

    /// Adds the refused call again with `param` set to `value`.
    fn retry_with(&mut self, param: &str, value: Value) {
        let mut args = self.refused.clone();
        args.insert(param.to_owned(), value);
        self.push(Next::Retry(args));
    }
}

/// A refusal as [`read`] reads it: the call, what the exploration knows, the answer's words
/// and the records the call and the answer name. Each rule is a method that adds its proposals.
struct Reading<'a> {
    refused: &'a Refused<'a>,
    index: &'a StateIndex,
    seen: &'a Seen,
    tools: &'a [ToolSpec],
    /// The answer's words as compared.
    answer_words: Vec<String>,
    /// The answer's text, lowercase.
    lower: String,
    /// Whether the answer says a named thing does not exist.
    not_found: bool,
    /// The records the arguments name, then those the answer names by key.
    named: Vec<Pointed<'a>>,
}

impl<'a> Reading<'a> {
    fn new(
        refused: &'a Refused<'a>,
        index: &'a StateIndex,
        seen: &'a Seen,
        tools: &'a [ToolSpec],
    ) -> Self {
        let lower = refused.answer.to_lowercase();
        Reading {
            refused,
            index,
            seen,
            tools,
            answer_words: words(refused.answer),
            not_found: NOT_FOUND.iter().any(|p| lower.contains(p)),
            lower,
            named: named_records(refused, index),
        }
    }

    /// A value that is taken: a variant of it, for every argument the answer quotes or names.
    fn taken_values(&self, out: &mut Proposals<'_>, rng: &mut Rng) {
        if !TAKEN.iter().any(|p| self.lower.contains(p)) {
            return;
        }
        for (name, value) in self.refused.args {
            let Some(text) = value.as_str() else {
                continue;
            };
            if self.lower.contains(&text.to_lowercase()) || names_field(&self.answer_words, name) {
                let variant = variant(text, rng.below(900) + 100);
                out.retry_with(name, Value::String(variant));
            }
        }
    }

    /// An argument the answer names: the numbers it gives, the shape of text it asks for, the
    /// values it offers, what the parameter's description or the tool's rules give, the
    /// field of that name of a record the call names, or another value from the state. When
    /// it names none but asks for a shape, the arguments whose names ask for that shape.
    /// Tried first, several arguments at once: those in the unit of a measure the answer gives
    /// set within it, named optional ones left out, named dates set in order (`start` before
    /// `end`), an object keyed by the records the answer lists; then one argument at a time, a
    /// first value for each before a second for any. Returns those it names without offering a
    /// value for them.
    fn named_arguments(&self, out: &mut Proposals<'_>, rng: &mut Rng) -> Vec<&'a String> {
        let refused = self.refused;
        let offered = offered_values(refused.answer);
        let given = numbers(refused.answer);
        let shape = asked_shape(refused.answer);
        let dates = dated(refused.answer, refused.clock);
        // The length of date-times the answer asks for: the format it spells out, or its
        // example's (`times must look like 2024-06-17T09:30`).
        let asked_length = spelled_length(refused.answer).or(match &shape {
            Some((_, Some(example))) => Some(example.len()),
            Some((Shape::Date, None)) => Some(10),
            _ => None,
        });
        let mut unanswered: Vec<&String> = Vec::new();
        let mut tries: Vec<(&String, Vec<Value>)> = Vec::new();
        for param in self.named_params(shape.as_ref().map(|(s, _)| *s)) {
            let name = &param.name;
            let numeric = matches!(schema_type(concrete(&param.schema)), "integer" | "number");
            let mut candidates: Vec<Value> = Vec::new();
            if let Some(shape) = Shape::dated(name, &param.schema).filter(|_| !numeric) {
                // Dates the answer gives (a day after, a day before, a month after) and today.
                let like = refused.args.get(name).and_then(Value::as_str).unwrap_or("");
                for seconds in &dates {
                    let text = date_like(*seconds, shape, like);
                    let length = asked_length.or_else(|| described_length(&param.schema));
                    candidates.push(Value::String(sized(&text, length)));
                }
            }
            if numeric {
                candidates.extend(
                    given
                        .iter()
                        .flat_map(|&n| [n, (n - 1.0).max(0.0), 1.0])
                        .filter_map(|n| typed(&param.schema, &format!("{}", n.trunc() as i64))),
                );
            } else if let Some(least) = least_characters(refused.answer) {
                // `reason must be at least 10 characters`: the text given, made long enough.
                let given = refused.args.get(name).and_then(Value::as_str).unwrap_or("");
                candidates.extend(typed(&param.schema, &lengthened(given, least)));
            } else if let Some((shape, example)) = &shape {
                let mut texts = self.index.shaped_as(*shape);
                rng.shuffle(&mut texts);
                candidates.extend(
                    example
                        .iter()
                        .chain(&texts)
                        .filter_map(|t| typed(&param.schema, t)),
                );
            } else {
                candidates.extend(offered.iter().filter_map(|t| typed(&param.schema, t)));
            }
            // What the description gives ("e.g. 2027", "One of …", an object written out),
            // what the tool's description says of it, and the schema's own values.
            candidates.extend(described_values(&param.schema));
            candidates.extend(
                ruled_values(&refused.tool.description, name)
                    .iter()
                    .filter_map(|t| typed(&param.schema, t)),
            );
            if let Some(Value::Array(choices)) = concrete(&param.schema).get("enum") {
                let mut choices = choices.clone();
                rng.shuffle(&mut choices);
                candidates.extend(choices);
            }
            if self.not_found {
                // A name said to name nothing: the entries of a lookup table named like the
                // parameter (`user` → the keys of `user_map: {"Jane": "USR002"}`).
                let looked_up: Vec<Value> = lookup_keys(refused.state, name)
                    .into_iter()
                    .filter_map(|k| typed(&param.schema, &k))
                    .collect();
                candidates.splice(0..0, looked_up);
                // A text of a shape (an address) said to name nothing: those of that shape
                // calls that succeeded took (the address a login took exists here; one drawn
                // from the state may be another app's account).
                if let Some(shape) = Shape::of(name, &param.schema) {
                    let worked: Vec<Value> = self
                        .seen
                        .succeeded_texts()
                        .filter_map(|t| shape.fit(t))
                        .filter_map(|t| typed(&param.schema, &t))
                        .collect();
                    candidates.splice(0..0, worked);
                }
            }
            // First, the field of that name of a record another argument names ("authorization
            // code does not match": the domain's `auth_code`) — and before it, a value the answer
            // writes the way the refused one is written (`only be opened for the current period
            // 2024-05` when 2024-03 was given).
            candidates.splice(0..0, self.fields_of_named_records(name));
            if let Some(Value::String(given)) = refused.args.get(name) {
                let said = shaped_like(refused.answer, given);
                candidates.splice(
                    0..0,
                    said.into_iter().filter_map(|t| typed(&param.schema, t)),
                );
            }
            candidates.retain(|v| Some(v) != refused.args.get(name));
            candidates.dedup();
            if candidates.is_empty() {
                unanswered.push(name);
            } else {
                candidates.truncate(3);
                tries.push((name, candidates));
            }
        }
        // Numbers bound by a measure the answer gives ("up to 120 cm on the longest side"):
        // every parameter in that unit (`length_cm`, `width_cm`) set within it at once.
        for (bound, unit) in measures(refused.answer) {
            let within: Vec<(String, Value)> = refused
                .tool
                .params
                .iter()
                .filter(|p| refused.args.contains_key(&p.name) && in_unit(&p.name, &unit))
                .filter_map(|p| {
                    let value = typed(&p.schema, &format!("{}", (bound - 1.0).max(1.0).trunc()))?;
                    Some((p.name.clone(), value))
                })
                .collect();
            if !within.is_empty() {
                out.retry_all(within);
            }
        }
        let keyed = self.objects_of_listed_keys(&tries);
        // Optional arguments the answer names ("brightness and color_temp can only be set when
        // switching on", "give both coach and seat, or neither"): the call without them.
        let optional: Vec<&String> = refused
            .tool
            .params
            .iter()
            .filter(|p| !p.required && refused.args.contains_key(&p.name))
            .filter(|p| names_field(&self.answer_words, &p.name))
            .map(|p| &p.name)
            .collect();
        if !optional.is_empty() {
            let mut args = refused.args.clone();
            args.retain(|k, _| !optional.contains(&k));
            out.push(Next::Retry(args));
        }
        if let Some(together) = dates_in_order(refused.tool, &tries, asked_length) {
            out.retry_all(together);
        }
        for (name, object) in keyed {
            out.retry_with(name, object);
        }
        for round in 0..3 {
            for (name, candidates) in &tries {
                if let Some(candidate) = candidates.get(round) {
                    out.retry_with(name, candidate.clone());
                }
            }
        }
        unanswered
    }

    /// An object argument of no declared shape, when the answer lists records no argument
    /// names ("Unanswered questions: Q3-1, Q3-2"): an object keyed by them, each value the
    /// first of the description's example (`e.g. {"Q3-1": "B"}`), else of the object given.
    /// Not for an argument already tried otherwise (`tried`).
    fn objects_of_listed_keys(&self, tried: &[(&String, Vec<Value>)]) -> Vec<(&'a String, Value)> {
        let refused = self.refused;
        let given: BTreeSet<&str> = refused.args.values().flat_map(strings).collect();
        let listed: Vec<&str> = tokens(refused.answer)
            .filter(|t| !given.contains(t) && self.index.locate(refused.state, t).is_some())
            .collect();
        if listed.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for param in &refused.tool.params {
            let schema = concrete(&param.schema);
            let shapeless = schema_type(schema) == "object" && schema.get("properties").is_none();
            let Some(current) = refused.args.get(&param.name) else {
                continue;
            };
            if !shapeless || tried.iter().any(|(n, _)| **n == param.name) {
                continue;
            }
            let example = described_values(schema)
                .into_iter()
                .find_map(|v| v.as_object().and_then(|o| o.values().next().cloned()));
            let value = example
                .or_else(|| current.as_object().and_then(|o| o.values().next().cloned()))
                .unwrap_or(Value::from(1));
            let object: Map<String, Value> = listed
                .iter()
                .map(|k| ((*k).to_owned(), value.clone()))
                .collect();
            out.push((&param.name, Value::Object(object)));
        }
        out
    }

    /// The values of the field named `param` of the records other arguments name, then of
    /// the fields the answer names of the records the call or the answer names
    /// ("confirmation does not match the number of L-2": L-2's `number`).
    fn fields_of_named_records(&self, param: &str) -> Vec<Value> {
        let state = self.refused.state;
        let mut out: Vec<Value> = Vec::new();
        for n in &self.named {
            if n.param.is_some_and(|p| p == param) {
                continue;
            }
            let Some(record) = n.record.fields_in(state) else {
                continue;
            };
            // Its field of the argument's name where an argument names it, then any scalar
            // field the answer names.
            let own = record
                .iter()
                .filter(|(field, _)| n.param.is_some() && field.as_str() == param);
            let said = record.iter().filter(|(field, value)| {
                field.as_str() != param
                    && !value.is_object()
                    && !value.is_array()
                    && names_field(&self.answer_words, field)
            });
            let fields = own.chain(said).filter(|(_, value)| !value.is_null());
            for (_, value) in fields {
                if !out.contains(value) {
                    out.push(value.clone());
                }
            }
        }
        out
    }

    /// An argument the answer names whose description names the tool that gives it ("Access
    /// token obtained from venmo app login."): that tool first, then the refused call with the
    /// argument taken from its answer.
    fn producers(&self, out: &mut Proposals<'_>, rng: &mut Rng) {
        let refused = self.refused;
        for param in &refused.tool.params {
            let name = &param.name;
            if !refused.args.contains_key(name) || !names_field(&self.answer_words, name) {
                continue;
            }
            if let Some(tool) = self.producer_of(param) {
                // The producer's latest call that succeeded, made again for its answer; else
                // one drawn around one record with its own values (a login's address and
                // password of one user).
                let args = match self.seen.succeeded_with(&tool.name) {
                    Some(args) => args.clone(),
                    None => {
                        let focus = self.index.focus(tool, refused.state, rng).with_own_values();
                        arguments_explored(tool, self.index, Some(&focus), rng, Intent::Valid)
                    }
                };
                out.push(Next::Prepare {
                    tool: tool.name.clone(),
                    args,
                    then: Then::Answered {
                        args: refused.args.clone(),
                        param: name.clone(),
                    },
                });
            }
        }
    }

    /// The tool a parameter's description names as giving it ("Access token obtained from
    /// venmo app login." → `login`).
    fn producer_of(&self, param: &Param) -> Option<&'a ToolSpec> {
        let description = param
            .schema
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        let described = words(description);
        let refused = self.refused.tool;
        self.tools.iter().find(|t| {
            t.name != refused.name
                && crate::driver::name_words(&t.name)
                    .iter()
                    .all(|w| described.iter().any(|d| same_word(d, w)))
        })
    }

    /// A record that is not the caller's ("The given email thread does not belong to you",
    /// "you are not a member of this group") where an argument is what a producer gives (the
    /// token of a login): the producer made as the record's owner — the account its `user_id`
    /// (or other id field) references, the producer's arguments that account's own fields or
    /// those their descriptions name — then the refused call with its answer.
    fn as_the_owner(&self, out: &mut Proposals<'_>) {
        const NOT_YOURS: [&str; 5] = [
            "belong",
            "not a member",
            "not a collaborator",
            "not the owner",
            "neither the",
        ];
        if !NOT_YOURS.iter().any(|p| self.lower.contains(p)) {
            return;
        }
        let refused = self.refused;
        let produced: Vec<(&Param, &ToolSpec)> = refused
            .tool
            .params
            .iter()
            .filter(|p| refused.args.contains_key(&p.name))
            .filter_map(|p| self.producer_of(p).map(|t| (p, t)))
            .collect();
        if produced.is_empty() {
            return;
        }
        for (param, value) in refused.args {
            if !names_an_id(param) || produced.iter().any(|(p, _)| p.name == *param) {
                continue;
            }
            let Some(key) = key_text(value) else {
                continue;
            };
            for (place, record) in self.records_named(&id_stem(param), &key) {
                for owner in self.owners(place, record) {
                    for (produced, producer) in &produced {
                        if let Some(args) = arguments_from(producer, owner) {
                            out.push(Next::Prepare {
                                tool: producer.name.clone(),
                                args,
                                then: Then::Answered {
                                    args: refused.args.clone(),
                                    param: produced.name.clone(),
                                },
                            });
                        }
                    }
                }
            }
        }
    }

    /// An id said not found, where the record another argument names, or a record it
    /// references (the order's user), holds a collection the id's name names
    /// (`payment_method_id` → the user's `payment_methods`): that collection's keys, where the
    /// code looks the id up. "Payment method not found" for a card of another user than the
    /// order's: the order's user's cards.
    fn held_by_named_records(&self, out: &mut Proposals<'_>) {
        if !self.not_found {
            return;
        }
        let refused = self.refused;
        for (param, value) in refused.args {
            if !names_an_id(param) {
                continue;
            }
            // A list of ids is asked for by one of them (`item_ids: ["7602931732"]`).
            let first = value.as_array().and_then(|a| a.first()).unwrap_or(value);
            let Some(key) = key_text(first) else {
                continue;
            };
            let stem = id_stem(param);
            let field_of_one = format!("{stem}_id");
            let mut tried = 0;
            for n in self
                .named
                .iter()
                .filter(|n| n.param.is_some_and(|p| p != param))
            {
                let Some(record) = n.record.fields_in(refused.state) else {
                    continue;
                };
                let holders = std::iter::once(record).chain(self.owners(&n.record.place, record));
                for holder in holders {
                    // Keys of an object the name names (`payment_methods`), or the ids of the
                    // records of a list it names (`items: [{"item_id": …}]`).
                    let mut held: Vec<String> = Vec::new();
                    for (_, v) in holder.iter().filter(|(f, _)| stem_names(&stem, f)) {
                        match v {
                            Value::Object(keyed) => held.extend(keyed.keys().cloned()),
                            Value::Array(items) => held.extend(
                                (items.iter())
                                    .filter_map(|i| i.get(&field_of_one))
                                    .filter_map(key_text),
                            ),
                            _ => {}
                        }
                    }
                    for other in held.iter().filter(|k| **k != key) {
                        if tried < 2 {
                            out.retry_with(param, as_argument(Some(value), other));
                            tried += 1;
                        }
                    }
                }
            }
        }
    }

    /// The records keyed `key` of the collections a stem names (`email_thread` →
    /// `user_email_threads`, `global_email_threads`), with their places.
    fn records_named(&self, stem: &str, key: &str) -> Vec<(&'a str, &'a Map<String, Value>)> {
        let state = self.refused.state;
        let mut out = Vec::new();
        for (name, places) in self.index.places() {
            let lower = name.to_ascii_lowercase();
            let names = stem_names(stem, name)
                || lower.trim_end_matches('s').ends_with(&format!("_{stem}"));
            if !names {
                continue;
            }
            for place in places {
                if let Some(record) = record_at(state, place, key) {
                    out.push((place.as_str(), record));
                }
            }
        }
        out
    }

    /// The records `record` (of the collection at `place`) references by its id fields
    /// (`user_id` → a user), each looked up in the collection beside `place` first (an app's
    /// own `users` before another app's).
    fn owners(&self, place: &str, record: &Map<String, Value>) -> Vec<&'a Map<String, Value>> {
        let state = self.refused.state;
        let beside = format!("{}/", place.rsplit_once('/').map_or("", |(p, _)| p));
        let mut out = Vec::new();
        for (field, value) in record {
            if field == "id" || !names_an_id(field) {
                continue;
            }
            let Some(key) = key_text(value) else {
                continue;
            };
            let stem = id_stem(field);
            // Beside the record first, and there the collection the id names exactly (`users`
            // for `user_id`) before those whose names only begin with it
            // (`user_artist_followings`, which has a record 1 too).
            let beside = beside.as_str();
            let mut places: Vec<(bool, bool, &String)> = (self.index.places())
                .filter(|(name, _)| stem_names(&stem, name))
                .flat_map(|(name, places)| {
                    let exact = name.to_ascii_lowercase().trim_end_matches('s') == stem;
                    places
                        .iter()
                        .map(move |p| (!p.starts_with(beside), !exact, p))
                })
                .collect();
            places.sort();
            if let Some(owner) = places
                .iter()
                .find_map(|(_, _, p)| record_at(state, p, &key))
            {
                out.push(owner);
            }
        }
        out
    }

    /// Whether the answer says a value argument's value is already so ("agent AG-3 is already
    /// available" for `status="available"`): another value is wanted.
    fn already_so(&self, name: &str, value: &Value) -> bool {
        !names_an_id(name)
            && self.lower.contains("already")
            && value
                .as_str()
                .is_some_and(|v| v.len() > 2 && self.answer_words.contains(&norm(v)))
    }

    /// The parameters the answer names (not an id whose value names a record: the rules on
    /// records read that one), else, when the answer asks for `shape`, those whose names ask
    /// for it.
    fn named_params(&self, shape: Option<Shape>) -> Vec<&'a Param> {
        let refused = self.refused;
        let mut named_params: Vec<&Param> = refused
            .tool
            .params
            .iter()
            .filter(|p| {
                refused.args.get(&p.name).is_some_and(|v| {
                    names_field(&self.answer_words, &p.name)
                        || quotes(refused.answer, v)
                        || self.already_so(&p.name, v)
                })
            })
            .filter(|p| {
                !(names_an_id(&p.name) && self.named.iter().any(|n| n.param == Some(&p.name)))
            })
            .collect();
        // A date the answer puts before or after now ("a lease cannot start in the past")
        // by one word of its name.
        const NOW_WORDS: [&str; 5] = ["past", "future", "today", "ahead", "ago"];
        if NOW_WORDS
            .iter()
            .any(|w| self.answer_words.iter().any(|a| a == w))
        {
            for p in &refused.tool.params {
                let dated = Shape::dated(&p.name, &p.schema).is_some();
                let partly = crate::driver::name_words(&p.name)
                    .iter()
                    .any(|w| w.len() > 3 && self.answer_words.iter().any(|a| same_word(a, w)));
                if dated
                    && partly
                    && refused.args.contains_key(&p.name)
                    && !named_params.contains(&p)
                {
                    named_params.push(p);
                }
            }
        }
        if named_params.is_empty() {
            if let Some(shape) = shape {
                named_params = refused
                    .tool
                    .params
                    .iter()
                    .filter(|p| Shape::of(&p.name, &p.schema) == Some(shape))
                    .collect();
            }
        }
        named_params
    }

    /// The answer wants another value than the one given ("should be different from the
    /// current one"): another record beside the one an argument named (the user's other
    /// payment method).
    fn another_record(&self, out: &mut Proposals<'_>, rng: &mut Rng) {
        let another = ["different", "same as", "already", "current one"]
            .iter()
            .any(|p| self.lower.contains(p));
        if !another {
            return;
        }
        for pointed in self.named.iter().filter(|n| n.param.is_some()) {
            let Some(param) = pointed.param else { continue };
            if !names_field(&self.answer_words, param) {
                continue;
            }
            let others: Vec<&String> = self
                .index
                .records_at(self.refused.state, &pointed.record.place)
                .into_iter()
                .map(|(k, _)| k)
                .filter(|k| **k != pointed.record.key)
                .collect();
            for _ in 0..2 {
                if let Some(key) = rng.pick(&others) {
                    let value = as_argument(self.refused.args.get(param.as_str()), key);
                    out.retry_with(param, value);
                }
            }
        }
    }

    /// A record the answer names where an argument named another of its kind ("only the
    /// organizer (u-ben) can change evt-2"): the call again with that record.
    fn records_the_answer_names(&self, out: &mut Proposals<'_>) {
        for pointed in self.named.iter().filter(|n| n.param.is_none()) {
            for other in self.named.iter().filter(|n| n.param.is_some()) {
                if other.record.collection == pointed.record.collection {
                    if let Some(param) = other.param {
                        let value =
                            as_argument(self.refused.args.get(param.as_str()), &pointed.record.key);
                        out.retry_with(param, value);
                    }
                }
            }
        }
    }

    /// An argument's record refused by another record the call or the answer names ("tomas
    /// is not a maintainer of leftpad", "u-dara has no write access to calendar cal-ben", "A
    /// member cannot create scenes" for a user who is a `member` of the home): the records of
    /// its kind that the other record holds — in a field (the calendar's `owner`), a list, or
    /// as keys of an object (`maintainers: {"lena": "owner"}`), keys whose value the answer
    /// says and the argument's record does not have first (`only owners …; tomas is a
    /// maintainer`: an owner).
    fn members_of_named_records(&self, out: &mut Proposals<'_>) {
        if self.not_found {
            return;
        }
        let (refused, index) = (self.refused, self.index);
        let said: BTreeSet<String> = tokens(refused.answer).map(str::to_lowercase).collect();
        for holder in &self.named {
            let Some(fields) = holder.record.fields_in(refused.state) else {
                continue;
            };
            for (param, value) in refused.args {
                let Some(key) = value.as_str() else { continue };
                if holder.param == Some(param) || key == holder.record.key {
                    continue;
                }
                let Some(kind) = index.locate(refused.state, key).map(|r| r.collection) else {
                    continue;
                };
                let of_kind = |k: &str| {
                    k != key
                        && index
                            .locate(refused.state, k)
                            .is_some_and(|r| r.collection == kind)
                };
                // (rank, key): 0 a key whose value the answer says and this one's differs
                // from, 1 any other holder, 2 a key whose value is this one's.
                let mut found: Vec<(u8, &str)> = Vec::new();
                let mut refused_here = said.contains(&key.to_lowercase());
                for field in fields.values() {
                    match field {
                        Value::String(k) if of_kind(k) => found.push((1, k)),
                        Value::Array(items) => found.extend(
                            items
                                .iter()
                                .filter_map(Value::as_str)
                                .filter(|k| of_kind(k))
                                .map(|k| (1, k)),
                        ),
                        Value::Object(members) => {
                            let own = members.get(key);
                            // Its value in the record is what the answer says of it.
                            refused_here |= own.is_some_and(|v| says(&self.answer_words, v));
                            for (k, v) in members.iter().filter(|(k, _)| of_kind(k)) {
                                let rank = if Some(v) == own {
                                    2
                                } else if says(&self.answer_words, v) {
                                    0
                                } else {
                                    1
                                };
                                found.push((rank, k));
                            }
                        }
                        _ => {}
                    }
                }
                if !refused_here {
                    continue;
                }
                found.sort();
                found.dedup_by_key(|(_, k)| *k);
                for (_, other) in found.into_iter().take(2) {
                    out.retry_with(param, as_argument(Some(value), other));
                }
            }
        }
    }

    /// An id the answer says is not found: another one, or, when none of its kind exists, a
    /// call seen creating one and then the refused call on the new record.
    /// (An argument of any name whose value the answer quotes: `actor` takes users.)
    fn unknown_ids(&self, out: &mut Proposals<'_>, rng: &mut Rng) {
        let (refused, index, lower) = (self.refused, self.index, &self.lower);
        for (param, value) in refused.args.iter().filter(|(p, v)| {
            names_an_id(p) || strings(v).iter().any(|s| lower.contains(&s.to_lowercase()))
        }) {
            let ids = strings(value);
            let unknown = ids.iter().any(|s| index.locate(refused.state, s).is_none());
            let mentioned = ids.iter().any(|s| lower.contains(&s.to_lowercase()));
            if !(self.not_found && (unknown || mentioned)) {
                continue;
            }
            let others = self.known_instead(param, value);
            for _ in 0..2 {
                if let Some(other) = rng.pick(&others).and_then(Value::as_str) {
                    out.retry_with(param, as_argument(Some(value), other));
                }
            }
            if others.is_empty() {
                if let Some(creation) = self.seen.creation_for(&id_stem(param)) {
                    out.push(Next::Prepare {
                        tool: creation.tool.clone(),
                        args: creation.args.clone(),
                        then: Then::Created {
                            args: refused.args.clone(),
                            param: param.clone(),
                        },
                    });
                }
            }
        }
    }

    /// Keys of records there are to try for `param` instead of its `value`: those offered for
    /// it, and those of the collection the answer names — or, when the answer names the record
    /// by a field ("the user with phone_number 6 does not exist"), that field's values of the
    /// collection's records, and only those.
    fn known_instead(&self, param: &str, value: &Value) -> Vec<Value> {
        let (refused, index) = (self.refused, self.index);
        let by_field = self.values_of_named_field(param, value);
        if !by_field.is_empty() {
            return by_field;
        }
        let mut others: Vec<Value> = index
            .offered_for(param)
            .into_iter()
            .filter(|v| {
                v != value
                    && v.as_str()
                        .is_some_and(|s| index.locate(refused.state, s).is_some())
            })
            .collect();
        // The answer names what was not found ("user PAY-S14 not found"): keys of the
        // collection of that name, whatever the argument is called (`reporter_id`).
        for (name, _) in index.places() {
            let noun = name.trim_end_matches('s');
            if self
                .answer_words
                .iter()
                .any(|w| same_word(w, noun) || same_word(w, name))
            {
                others.extend(
                    index
                        .keys_of(name)
                        .iter()
                        .filter(|k| Some(k.as_str()) != value.as_str())
                        .map(|k| Value::String(k.clone())),
                );
            }
        }
        others
    }

    /// The values, in the records of a collection the answer names, of a field the answer
    /// names too and the parameter's name shares a word with: how the answer identified the
    /// record it did not find (`users`' `phone_number` for "the user with phone_number 6 does
    /// not exist", their `email` for `receiver_email`). Strings only, as ids are tried; not
    /// `value` itself.
    fn values_of_named_field(&self, param: &str, value: &Value) -> Vec<Value> {
        let (refused, index) = (self.refused, self.index);
        let param_words: Vec<String> = name_words(param)
            .iter()
            .map(|w| w.trim_end_matches('s').to_owned())
            .collect();
        let shares_a_word = |field: &str| {
            name_words(field)
                .iter()
                .any(|w| w.len() > 2 && param_words.contains(&w.trim_end_matches('s').to_owned()))
        };
        let mut out: Vec<Value> = Vec::new();
        for (name, places) in index.places() {
            let noun = name.trim_end_matches('s');
            if !(self.answer_words.iter()).any(|w| same_word(w, noun) || same_word(w, name)) {
                continue;
            }
            for place in places {
                for (_, record) in index
                    .records_at(refused.state, place)
                    .into_iter()
                    .take(SIBLINGS_READ)
                {
                    let Some(fields) = record.as_object() else {
                        continue;
                    };
                    let named = fields.iter().filter(|(field, v)| {
                        v.is_string()
                            && *v != value
                            && !same_word(field, noun)
                            && shares_a_word(field)
                            && names_field(&self.answer_words, field)
                    });
                    for (_, v) in named {
                        if !out.contains(v) {
                            out.push(v.clone());
                        }
                    }
                }
            }
        }
        out
    }

    /// A named record in the wrong condition: the fields the answer points at, those whose
    /// value it says first.
    fn wrong_conditions(&self, out: &mut Proposals<'_>, rng: &mut Rng) {
        let answer_words = &self.answer_words;
        for named in &self.named {
            let record = &named.record;
            let Some(fields) = record.fields_in(self.refused.state) else {
                continue;
            };
            let siblings = self.index.records_at(self.refused.state, &record.place);
            // A field is pointed at when the answer says its value, names it, or says a value it
            // has in another record ("non-pending order": the status another order has).
            let said_elsewhere = |field: &str, current: &Value| {
                siblings.iter().take(SIBLINGS_READ).any(|(_, s)| {
                    s.get(field)
                        .is_some_and(|v| v != current && !v.is_object() && says(answer_words, v))
                })
            };
            let mut pointed: Vec<(&String, &Value)> = fields
                .iter()
                .filter(|(_, v)| !v.is_object() && !v.is_array())
                // The record's own key is no condition of it.
                .filter(|(_, v)| v.as_str() != Some(record.key.as_str()))
                .filter(|(f, v)| {
                    says(answer_words, v) || names_field(answer_words, f) || said_elsewhere(f, v)
                })
                .collect();
            pointed.sort_by_key(|(f, v)| !says(answer_words, v) && !said_elsewhere(f, v));
            for (field, current) in pointed {
                self.field_condition(named, &siblings, field, current, out, rng);
            }
        }
    }

    /// What meets the condition of `field` (now `current`) of the `named` record, whose
    /// collection's records are `siblings`.
    fn field_condition(
        &self,
        named: &Pointed<'_>,
        siblings: &[(&String, &Value)],
        field: &str,
        current: &Value,
        out: &mut Proposals<'_>,
        rng: &mut Rng,
    ) {
        let (refused, index, seen, tools) = (self.refused, self.index, self.seen, self.tools);
        let answer_words = &self.answer_words;
        let Pointed { param, record } = named;
        // Values of the field elsewhere in the collection, those the answer says first.
        // Each distinct value with how many records have it, in the order first met (counted
        // by its text: a collection may hold tens of thousands of records).
        let mut counted: Vec<(&Value, usize)> = Vec::new();
        let mut at: std::collections::HashMap<String, usize> = Default::default();
        for (_, sibling) in siblings {
            if let Some(v) = sibling.get(field).filter(|v| *v != current) {
                let slot = *at.entry(v.to_string()).or_insert_with(|| {
                    counted.push((v, 0));
                    counted.len() - 1
                });
                counted[slot].1 += 1;
            }
        }
        // Those the answer says first; when it says none, which is wanted is a guess: the
        // most common first (open slots before blocked ones).
        let none_said = !counted.iter().any(|(v, _)| says(answer_words, v));
        let when = |v: &Value| v.as_str().and_then(envsim_core::clock::parse_time);
        if let (true, Some(_)) = (none_said, when(current)) {
            // A date the answer quotes ("starts on 2025-07-19", "arrival date is …"): the
            // call is tied to the day, and the records nearest the call's clock come first.
            let clock = refused.clock;
            counted.sort_by(|(a, _), (b, _)| {
                let distance = |v: &Value| when(v).map_or(f64::INFINITY, |t| (t - clock).abs());
                distance(a).total_cmp(&distance(b))
            });
        } else if none_said {
            counted.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        } else {
            counted.sort_by_key(|(v, _)| saying(answer_words, v));
        }
        let wanted: Vec<&Value> = counted.into_iter().map(|(v, _)| v).collect();
        // Where the writes seen lead from the current value to one the answer says, the
        // first of them on this record (placed → paid → shipped → delivered: pay first).
        let toward = seen.first_step(&record.collection, field, current, |v| {
            says(answer_words, v)
        });
        if let Some(write) = toward {
            if let Some(next) = prepare(refused, index, tools, write, record, rng) {
                out.push(next);
            }
        }
        // The same call on a record that has such a value: two that have values the answer
        // says; when it says none, one guess — unless it says a value the field was seen
        // taking, which no record has now (a guess would only repeat the refusal).
        let said = wanted.iter().filter(|v| says(answer_words, v)).count();
        let known_elsewhere = seen
            .writes_on(&record.collection)
            .filter(|w| w.field == field)
            .any(|w| w.to != *current && says(answer_words, &w.to));
        let tries = if said > 0 {
            said.min(2)
        } else if known_elsewhere {
            0
        } else {
            2
        };
        if let Some(param) = param {
            // Of the records with the value wanted, those most like this one in the rest of
            // their kind: the record passed the other conditions, which a record like it passes
            // too (a booked reservation arriving today, not a checked-out one).
            let this = record.in_state(refused.state).unwrap_or(&Value::Null);
            for want in wanted.iter().take(tries) {
                let with: Vec<(&String, usize)> = siblings
                    .iter()
                    .filter(|(_, s)| s.get(field) == Some(*want))
                    .map(|(k, s)| (*k, likeness(this, s, field)))
                    .collect();
                let most = with.iter().map(|(_, n)| *n).max().unwrap_or(0);
                let alternatives: Vec<&String> = with
                    .iter()
                    .filter(|(_, n)| *n == most)
                    .map(|(k, _)| *k)
                    .collect();
                if let Some(key) = rng.pick(&alternatives) {
                    let value = as_argument(refused.args.get(param.as_str()), key);
                    out.retry_with(param, value);
                }
            }
        }
        // Else a call seen setting the field to another value, on this record first: one
        // that sets a value the answer says, else one seen moving it on from the value it
        // has (the next step of a lifecycle: requested → matched → arrived).
        if toward.is_none() {
            let mut writes: Vec<&Write> = seen
                .writes_on(&record.collection)
                .filter(|w| w.field == field && w.to != *current)
                .collect();
            writes.sort_by_key(|w| (saying(answer_words, &w.to), w.from != *current));
            if let Some(write) = writes.first() {
                if let Some(next) = prepare(refused, index, tools, write, record, rng) {
                    out.push(next);
                }
            }
        }
        self.created_with_value(named, field, current, out);
    }

    /// No record has a value the answer asks for: a call seen creating a record that
    /// starts with it, then the call on the new record.
    fn created_with_value(
        &self,
        named: &Pointed<'_>,
        field: &str,
        current: &Value,
        out: &mut Proposals<'_>,
    ) {
        let answer_words = &self.answer_words;
        let Pointed { param, record } = named;
        let current_words = words(&value_text(current));
        let asked = |v: &Value| {
            let text = norm(&value_text(v));
            !current_words.contains(&text) && answer_words.contains(&text)
        };
        // The answer says the value the record has ("CC-1004 is already posted"): a new
        // record, which starts with another value, is where the call may go.
        let says_current = says(answer_words, current);
        if let Some(param) = param {
            let creation = self
                .seen
                .creation_where(&record.collection, field, asked)
                .or_else(|| {
                    says_current
                        .then(|| {
                            self.seen
                                .creation_where(&record.collection, field, |v| v != current)
                        })
                        .flatten()
                });
            if let Some(creation) = creation {
                out.push(Next::Prepare {
                    tool: creation.tool.clone(),
                    args: creation.args.clone(),
                    then: Then::Created {
                        args: self.refused.args.clone(),
                        param: (*param).clone(),
                    },
                });
            }
        }
    }

    /// What other tools were seen changing through the same argument (`add_to_cart(customer_id)`
    /// filling the cart `checkout(customer_id)` finds empty): such a call on this value first,
    /// those whose changed collection or field the answer names first.
    fn writes_through_arguments(&self, out: &mut Proposals<'_>, rng: &mut Rng) {
        if self.not_found {
            return;
        }
        let (refused, index, answer_words) = (self.refused, self.index, &self.answer_words);
        for (param, value) in refused.args {
            let Some(key) = value.as_str() else {
                continue;
            };
            let mut writes: Vec<&Write> = self
                .seen
                .writes
                .iter()
                .filter(|w| &w.param == param && w.tool != refused.tool.name)
                .collect();
            writes.sort_by_key(|w| {
                !(names_field(answer_words, &w.collection) || names_field(answer_words, &w.field))
            });
            let mut tools_tried: Vec<&str> = Vec::new();
            for write in writes {
                if tools_tried.contains(&write.tool.as_str()) || tools_tried.len() == 2 {
                    continue;
                }
                tools_tried.push(&write.tool);
                let record = index.locate(refused.state, key);
                if let Some(next) =
                    prepare_on(refused, index, self.tools, write, key, record.as_ref(), rng)
                {
                    out.push(next);
                }
            }
        }
    }

    /// A key the code looked up and missed (`KeyError: 'door 72'`): keys of the objects named
    /// like the argument that held it.
    fn missed_keys(&self, out: &mut Proposals<'_>) {
        if !(self.lower.contains("keyerror") || self.lower.contains("key error")) {
            return;
        }
        for (name, value) in self.refused.args {
            let missed = strings(value)
                .iter()
                .any(|s| self.refused.answer.contains(&format!("'{s}'")));
            if !missed {
                continue;
            }
            for key in self.index.keys_named_like(name).into_iter().take(3) {
                out.retry_with(name, as_argument(Some(value), &key));
            }
        }
    }

    /// Last, an argument the answer names without saying what it wants: another value from
    /// the state.
    fn state_values(&self, unanswered: &[&String], out: &mut Proposals<'_>) {
        for name in unanswered {
            let candidates: Vec<Value> = self
                .index
                .offered_for(name)
                .into_iter()
                .filter(|v| Some(v) != self.refused.args.get(*name))
                .collect();
            for candidate in candidates.into_iter().take(2) {
                out.retry_with(name, candidate);
            }
        }
    }
}

/// Whether a parameter's name ends in `unit` (`weight_kg`, `lengthCm`).
fn in_unit(name: &str, unit: &str) -> bool {
    crate::driver::name_words(name)
        .last()
        .is_some_and(|w| w.len() < name.len() && w == unit)
}

/// Whether the answer quotes `value` (`Unknown fraud indicator 'water_damage'`).
fn quotes(answer: &str, value: &Value) -> bool {
    value.as_str().is_some_and(|v| {
        !v.is_empty()
            && (answer.contains(&format!("'{v}'")) || answer.contains(&format!("\"{v}\"")))
    })
}

/// The dates of `tries` (each parameter's first candidate) set together, when two or more
/// date parameters are named: the first date the first of them (in the tool's order) was
/// offered, each later one an hour later (a day for a date), so that a window's end follows
/// its start on the same day. A date-time at midnight is moved to 09:00.
fn dates_in_order(
    tool: &ToolSpec,
    tries: &[(&String, Vec<Value>)],
    asked_length: Option<usize>,
) -> Option<Vec<(String, Value)>> {
    const HOUR: f64 = 3_600.0;
    let dated: Vec<(&Param, Shape, &str)> = tool
        .params
        .iter()
        .filter_map(|p| {
            let (_, candidates) = tries.iter().find(|(n, _)| **n == p.name)?;
            let shape = Shape::dated(&p.name, &p.schema)?;
            // Dates the answer asks for, whatever the name suggests (`period_start`).
            let shape = if asked_length == Some(10) {
                Shape::Date
            } else {
                shape
            };
            Some((p, shape, candidates.first()?.as_str()?))
        })
        .collect();
    if dated.len() < 2 {
        return None;
    }
    let mut start = envsim_core::clock::parse_time(dated[0].2)?;
    if dated[0].1 == Shape::DateTime && start.rem_euclid(24.0 * HOUR) == 0.0 {
        start += 9.0 * HOUR;
    }
    Some(
        dated
            .iter()
            .enumerate()
            .map(|(i, (param, shape, like))| {
                let step = if *shape == Shape::Date {
                    24.0 * HOUR
                } else {
                    HOUR
                };
                let text = date_like(start + step * i as f64, *shape, like);
                let length = asked_length.or_else(|| described_length(&param.schema));
                let text = sized(&text, length);
                (param.name.clone(), Value::String(text))
            })
            .collect(),
    )
}

/// The records a refused call points at: those its arguments name, then those its answer names
/// by key.
fn named_records<'a>(refused: &'a Refused<'a>, index: &StateIndex) -> Vec<Pointed<'a>> {
    let mut named: Vec<Pointed<'_>> = refused
        .args
        .iter()
        .flat_map(|(param, value)| {
            strings(value)
                .into_iter()
                .filter_map(|s| index.locate(refused.state, s))
                .map(move |record| Pointed {
                    param: Some(param),
                    record,
                })
        })
        .collect();
    let argument_values: BTreeSet<&str> = refused.args.values().flat_map(strings).collect();
    for token in tokens(refused.answer) {
        if argument_values.contains(token) || named.iter().any(|n| n.record.key == token) {
            continue;
        }
        if let Some(record) = index.locate(refused.state, token) {
            named.push(Pointed {
                param: None,
                record,
            });
        }
    }
    named
}

/// The most keys of lookup tables one not-found refusal tries.
const LOOKUP_KEYS: usize = 32;

/// The keys of the state's lookup tables named like `param` (named as a collection of its
/// records would be, and holding no records: `user_map: {"Jane": "USR002"}` for `user`),
/// within three levels of the root, at most [`LOOKUP_KEYS`].
fn lookup_keys(state: &Value, param: &str) -> Vec<String> {
    fn walk(value: &Value, stem: &str, depth: usize, out: &mut Vec<String>) {
        let Some(map) = value.as_object() else {
            return;
        };
        for (name, inner) in map {
            match inner.as_object() {
                Some(table)
                    if !table.is_empty()
                        && stem_names(stem, name)
                        && table.values().all(|v| !v.is_object() && !v.is_array()) =>
                {
                    let room = LOOKUP_KEYS.saturating_sub(out.len());
                    out.extend(table.keys().take(room).cloned());
                }
                Some(_) if depth < 3 => walk(inner, stem, depth + 1, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(state, &id_stem(param), 1, &mut out);
    out
}

/// The record keyed `key` of the collection at `place` (a JSON pointer), as an object.
fn record_at<'s>(state: &'s Value, place: &str, key: &str) -> Option<&'s Map<String, Value>> {
    state.pointer(place)?.get(key)?.as_object()
}

/// A string or a number as the key of the record it names (`7` for `email_thread_id: 7`).
fn key_text(value: &Value) -> Option<String> {
    matches!(value, Value::String(_) | Value::Number(_)).then(|| value_text(value))
}

/// Arguments for `tool` from one record's own fields: each parameter the field of its name,
/// else the field its description names first ("Your account email." → `email`); `None` when
/// a required one has neither.
fn arguments_from(tool: &ToolSpec, record: &Map<String, Value>) -> Option<Map<String, Value>> {
    let mut args = Map::new();
    let field = |name: &str| record.get(name).filter(|v| !v.is_null()).cloned();
    for param in &tool.params {
        let found = field(&param.name).or_else(|| {
            described_field(&param.schema, |word| field(word).into_iter().collect())
                .into_iter()
                .next()
        });
        match found {
            Some(v) if !v.is_object() && !v.is_array() => {
                args.insert(param.name.clone(), v);
            }
            _ if param.required => return None,
            _ => {}
        }
    }
    Some(args)
}

/// `write`'s tool on `record` (its argument naming the record set to the record's key, the
/// value it was seen setting where it takes the field by name, the rest drawn around the
/// record), then the refused call again.
fn prepare(
    refused: &Refused<'_>,
    index: &StateIndex,
    tools: &[ToolSpec],
    write: &Write,
    record: &RecordRef,
    rng: &mut Rng,
) -> Option<Next> {
    prepare_on(refused, index, tools, write, &record.key, Some(record), rng)
}

/// `write`'s tool with its argument naming the record set to `key` (the rest drawn around
/// `record` when there is one), then the refused call again.
fn prepare_on(
    refused: &Refused<'_>,
    index: &StateIndex,
    tools: &[ToolSpec],
    write: &Write,
    key: &str,
    record: Option<&RecordRef>,
    rng: &mut Rng,
) -> Option<Next> {
    let tool = tools.iter().find(|t| t.name == write.tool)?;
    let focus = record.and_then(|r| index.focus_on(tool, refused.state, r, rng));
    let mut args = arguments_explored(tool, index, focus.as_ref(), rng, Intent::Valid);
    args.insert(write.param.clone(), Value::String(key.to_owned()));
    if tool.params.iter().any(|p| p.name == write.field) {
        args.insert(write.field.clone(), write.to.clone());
    }
    Some(Next::Prepare {
        tool: tool.name.clone(),
        args,
        then: Then::Same(refused.args.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, params: &[(&str, Value)]) -> ToolSpec {
        let properties: Map<String, Value> = params
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        let required: Vec<&str> = params.iter().map(|(k, _)| *k).collect();
        ToolSpec::from_schema(&json!({"type": "function", "function": {"name": name,
            "parameters": {"type": "object", "properties": properties, "required": required}}}))
        .unwrap()
    }

    fn shop() -> Value {
        json!({"orders": {
            "O1": {"status": "pending", "user_id": "U1", "total": 10},
            "O2": {"status": "paid", "user_id": "U1", "total": 20},
            "O3": {"status": "pending", "user_id": "U2", "total": 30}},
            "users": {"U1": {"name": "Ann"}, "U2": {"name": "Bo"}}})
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_record_in_the_wrong_condition_is_swapped_for_one_in_the_condition_asked() {
        let state = shop();
        let index = StateIndex::new(&state);
        let ship = tool("ship_order", &[("order_id", json!({"type": "string"}))]);
        let called = args(json!({"order_id": "O1"}));
        let refused = Refused {
            tool: &ship,
            args: &called,
            answer: "{'success': False, 'error': 'order O1 is pending; only paid orders ship'}",
            state: &state,
            clock: 1_735_689_600.0,
        };
        let next = read(
            &refused,
            &index,
            &Seen::default(),
            std::slice::from_ref(&ship),
            &mut Rng::new(1),
        );
        assert_eq!(next, [Next::Retry(args(json!({"order_id": "O2"})))]);
    }

    #[test]
    fn a_token_is_asked_of_its_producer_drawn_from_one_account_then_as_it_last_succeeded() {
        let state = json!({"users": {
            "1": {"email": "ann@example.com", "password": "pw-ann", "name": "Ann"},
            "2": {"email": "bo@example.com", "password": "pw-bo", "name": "Bo"}}});
        let index = StateIndex::new(&state);
        let login = tool(
            "login",
            &[
                (
                    "username",
                    json!({"type": "string", "description": "Your account email."}),
                ),
                (
                    "password",
                    json!({"type": "string", "description": "Your account password."}),
                ),
            ],
        );
        let show = tool(
            "show_account",
            &[(
                "access_token",
                json!({"type": "string", "description": "Access token obtained from login."}),
            )],
        );
        let called = args(json!({"access_token": "x"}));
        let refused = Refused {
            tool: &show,
            args: &called,
            answer: "401: your access token is missing, invalid or expired",
            state: &state,
            clock: 1_735_689_600.0,
        };
        let tools = [show.clone(), login];
        let then = Then::Answered {
            args: called.clone(),
            param: "access_token".into(),
        };
        // Nothing seen yet: the login's address and password are those of one account.
        for seed in 0..20 {
            let next = read(
                &refused,
                &index,
                &Seen::default(),
                &tools,
                &mut Rng::new(seed),
            );
            let Some(Next::Prepare {
                tool,
                args: drawn,
                then: after,
            }) = next.first()
            else {
                panic!("{next:?}");
            };
            assert_eq!((tool.as_str(), after), ("login", &then));
            let account = [("ann@example.com", "pw-ann"), ("bo@example.com", "pw-bo")]
                .iter()
                .any(|(email, password)| {
                    drawn["username"] == json!(email) && drawn["password"] == json!(password)
                });
            assert!(account, "{drawn:?}");
        }
        // Once a login has succeeded, the token is asked of that login again.
        let mut seen = Seen::default();
        let good = args(json!({"username": "bo@example.com", "password": "pw-bo"}));
        seen.learn_arguments("login", &good, &state, &index);
        assert_eq!(seen.succeeded_with("login"), Some(&good));
        let next = read(&refused, &index, &seen, &tools, &mut Rng::new(3));
        assert_eq!(
            next.first(),
            Some(&Next::Prepare {
                tool: "login".into(),
                args: good,
                then
            })
        );
    }

    #[test]
    fn a_record_not_the_callers_is_asked_for_with_its_owners_token() {
        // Two apps' accounts share keys; the thread belongs to mail's user 2. Beside mail's
        // `users` lie tables whose names begin with `user` and that have a record 2 too: the
        // owner is looked up in `users`.
        let state = json!({
            "files": {"users": {"2": {"email": "cy@example.com", "password": "pw-files"}}},
            "mail": {
                "user_contacts": {"2": {"id": 2, "user_id": 1, "name": "Cy"}},
                "users": {
                    "1": {"email": "ann@example.com", "password": "pw-ann"},
                    "2": {"email": "bo@example.com", "password": "pw-bo"}},
                "user_email_threads": {"7": {"id": 7, "user_id": 2, "subject": "hi"}}}});
        let index = StateIndex::new(&state);
        let login = tool(
            "login",
            &[
                (
                    "username",
                    json!({"type": "string", "description": "Your account email."}),
                ),
                ("password", json!({"type": "string"})),
            ],
        );
        let show = tool(
            "show_thread",
            &[
                ("email_thread_id", json!({"type": "integer"})),
                (
                    "access_token",
                    json!({"type": "string", "description": "Access token obtained from login."}),
                ),
            ],
        );
        let called = args(json!({"email_thread_id": 7, "access_token": "tok-ann"}));
        let mut refused = Refused {
            tool: &show,
            args: &called,
            answer: "The given email thread does not belong to you, so you cannot access it.",
            state: &state,
            clock: 1_735_689_600.0,
        };
        let tools = [show.clone(), login];
        let next = read(&refused, &index, &Seen::default(), &tools, &mut Rng::new(1));
        assert_eq!(
            next.first(),
            Some(&Next::Prepare {
                tool: "login".into(),
                args: args(json!({"username": "bo@example.com", "password": "pw-bo"})),
                then: Then::Answered {
                    args: called.clone(),
                    param: "access_token".into()
                }
            })
        );
        // Without such words, nothing is asked of the owner.
        refused.answer = "The email thread with id 7 is archived.";
        let next = read(&refused, &index, &Seen::default(), &tools, &mut Rng::new(1));
        assert!(
            !next
                .iter()
                .any(|n| matches!(n, Next::Prepare { tool, .. } if tool == "login")),
            "{next:?}"
        );
    }

    #[test]
    fn a_name_said_to_name_nothing_takes_the_keys_of_the_lookup_table_named_like_it() {
        let lookup = tool("get_user_id", &[("user", json!({"type": "string"}))]);
        let state = json!({"workspace": {"user_map": {"John": "USR001", "Jane": "USR002"},
            "users": {"U1": {"name": "Ann"}}}, "user_count": 2});
        let next = proposals(
            &lookup,
            json!({"user": "user 5"}),
            "{'error': \"User 'user 5' not found in the workspace.\"}",
            &state,
        );
        let tried = tried_for(&next, "user");
        // The table's keys first (not its ids, not the records' keys of `users`).
        assert_eq!(tried[..2], [&json!("John"), &json!("Jane")], "{next:?}");
        assert_eq!(lookup_keys(&state, "user"), ["John", "Jane"]);
        assert!(lookup_keys(&state, "order").is_empty());
    }

    #[test]
    fn a_record_said_to_be_named_by_a_field_is_asked_for_by_that_fields_values() {
        let send = tool(
            "send_text_message",
            &[
                ("phone_number", json!({"type": "string"})),
                ("message", json!({"type": "string"})),
            ],
        );
        // Tables of an app, as AppWorld's states hold them: records keyed by row id.
        let state = json!({"phone": {
            "users": {"1": {"phone_number": "2125550101", "first_name": "Ann"},
                      "2": {"phone_number": "2125550102", "first_name": "Bo"}},
            "alarms": {"1": {"label": "wake", "user_id": 1}},
            "sqlite_sequence": {"users": 2, "alarms": 1}}});
        let next = proposals(
            &send,
            json!({"phone_number": "alarms", "message": "hi"}),
            r#"Response status code is 409: {"message":["The user with phone_number alarms does not exist."]}"#,
            &state,
        );
        // Of the retries that change the number (others change the message)...
        let tried: Vec<&Value> = (tried_for(&next, "phone_number").into_iter())
            .filter(|v| **v != json!("alarms"))
            .collect();
        assert!(!tried.is_empty(), "{next:?}");
        // ...the users' numbers, never their row keys or the names of tables.
        for value in &tried {
            assert!(
                [json!("2125550101"), json!("2125550102")].contains(value),
                "{tried:?}"
            );
        }
        // A field the answer names but the parameter does not (`first_name`) is no way in.
        let named_by_name = proposals(
            &send,
            json!({"phone_number": "alarms", "message": "hi"}),
            "The user with first_name alarms does not exist.",
            &state,
        );
        let tried = tried_for(&named_by_name, "phone_number");
        assert!(
            !tried.contains(&&json!("Ann")) && !tried.contains(&&json!("Bo")),
            "{tried:?}"
        );
    }

    #[test]
    fn an_id_held_by_another_record_is_swapped_for_one_held_by_the_record_the_call_names() {
        let refund = tool(
            "return_delivered_order_items",
            &[
                ("order_id", json!({"type": "string"})),
                ("payment_method_id", json!({"type": "string"})),
            ],
        );
        // The card is Bo's; the order is Ann's.
        let state = json!({
            "users": {
                "ann": {"user_id": "ann", "payment_methods": {
                    "paypal_1": {"source": "paypal"}, "card_2": {"source": "credit_card"}}},
                "bo": {"user_id": "bo", "payment_methods": {"card_9": {"source": "credit_card"}}}},
            "orders": {"#W1": {"order_id": "#W1", "user_id": "ann", "status": "delivered",
                "items": [{"item_id": "i-10", "price": 5.0}, {"item_id": "i-11", "price": 7.0}]}}});
        let next = proposals(
            &refund,
            json!({"order_id": "#W1", "payment_method_id": "card_9"}),
            "Error: Payment method not found",
            &state,
        );
        let tried = tried_for(&next, "payment_method_id");
        // Ann's methods first, through the order's `user_id`.
        assert_eq!(
            tried[..2],
            [&json!("paypal_1"), &json!("card_2")],
            "{next:?}"
        );
        // The items, as a list of the order's own, the same way.
        let refund_items = tool(
            "return_delivered_order_items",
            &[
                ("order_id", json!({"type": "string"})),
                (
                    "item_ids",
                    json!({"type": "array", "items": {"type": "string"}}),
                ),
            ],
        );
        let next = proposals(
            &refund_items,
            json!({"order_id": "#W1", "item_ids": ["i-99"]}),
            "Error: Some item not found",
            &state,
        );
        let tried = tried_for(&next, "item_ids");
        assert_eq!(tried[..2], [&json!(["i-10"]), &json!(["i-11"])], "{next:?}");
        // Said otherwise than not found, nothing of Ann's is proposed for it.
        let next = proposals(
            &refund,
            json!({"order_id": "#W1", "payment_method_id": "card_9"}),
            "Error: Payment method is expired",
            &state,
        );
        assert!(
            !retried(&next)
                .iter()
                .any(|a| a["payment_method_id"] == json!("paypal_1")),
            "{next:?}"
        );
    }

    #[test]
    fn an_address_said_to_name_no_account_is_swapped_for_one_a_call_that_succeeded_took() {
        // The account the login took is this app's (its own table is not in the state).
        let state = json!({
            "mail": {"users": {"1": {"email": "ann@example.com"}}},
            "notes": {"users": {"1": {"email": "cy@example.com"}}}});
        let index = StateIndex::new(&state);
        let verify = tool(
            "send_verification_code",
            &[("email", json!({"type": "string", "format": "email"}))],
        );
        let called = args(json!({"email": "ann@example.com"}));
        let refused = Refused {
            tool: &verify,
            args: &called,
            answer: "Account for this email does not exist.",
            state: &state,
            clock: 1_735_689_600.0,
        };
        let mut seen = Seen::default();
        seen.learn_arguments(
            "login",
            &args(json!({"username": "dee@example.com", "password": "pw"})),
            &state,
            &index,
        );
        let tools = [verify.clone()];
        let next = read(&refused, &index, &seen, &tools, &mut Rng::new(1));
        let dee = Next::Retry(args(json!({"email": "dee@example.com"})));
        assert_eq!(next.first(), Some(&dee));
        // Nothing learned: only the state's addresses.
        let next = read(&refused, &index, &Seen::default(), &tools, &mut Rng::new(1));
        assert!(!next.is_empty() && !next.contains(&dee), "{next:?}");
    }

    #[test]
    fn a_write_seen_before_meets_the_precondition_then_the_call_is_tried_again() {
        let state = json!({"orders": {
            "O1": {"status": "pending", "user_id": "U1"},
            "O3": {"status": "pending", "user_id": "U2"}},
            "users": {"U1": {"name": "Ann"}, "U2": {"name": "Bo"}}});
        let index = StateIndex::new(&state);
        let ship = tool("ship_order", &[("order_id", json!({"type": "string"}))]);
        let pay = tool(
            "pay_order",
            &[
                ("order_id", json!({"type": "string"})),
                ("amount", json!({"type": "integer"})),
            ],
        );
        // `pay_order` was seen moving O3 to paid.
        let mut seen = Seen::default();
        let paid = json!({"orders": {
            "O1": {"status": "pending", "user_id": "U1"},
            "O3": {"status": "paid", "user_id": "U2"}},
            "users": {"U1": {"name": "Ann"}, "U2": {"name": "Bo"}}});
        let created = seen.learn(
            "pay_order",
            &args(json!({"order_id": "O3", "amount": 5})),
            &state,
            &paid,
        );
        assert_eq!(
            created,
            Touched {
                created: Vec::new(),
                changed: vec![RecordRef {
                    collection: "orders".into(),
                    place: "/orders".into(),
                    key: "O3".into()
                }]
            }
        );
        assert_eq!(
            seen.writes_on("orders").collect::<Vec<_>>(),
            [&Write {
                tool: "pay_order".into(),
                collection: "orders".into(),
                field: "status".into(),
                param: "order_id".into(),
                from: json!("pending"),
                to: json!("paid")
            }]
        );
        let called = args(json!({"order_id": "O1"}));
        let refused = Refused {
            tool: &ship,
            args: &called,
            answer: "order O1 is pending, not paid",
            state: &state,
            clock: 1_735_689_600.0,
        };
        let next = read(
            &refused,
            &index,
            &seen,
            &[ship.clone(), pay],
            &mut Rng::new(2),
        );
        assert_eq!(next.len(), 1, "{next:?}");
        let Next::Prepare {
            tool,
            args: first,
            then,
        } = &next[0]
        else {
            panic!("{next:?}")
        };
        assert_eq!(
            (tool.as_str(), &first["order_id"]),
            ("pay_order", &json!("O1"))
        );
        assert_eq!(then, &Then::Same(called.clone()));
    }

    #[test]
    fn an_unknown_id_is_replaced_and_nothing_of_its_kind_calls_for_a_creation() {
        let state = shop();
        let index = StateIndex::new(&state);
        let cancel = tool("cancel_order", &[("order_id", json!({"type": "string"}))]);
        let called = args(json!({"order_id": "O404"}));
        let refused = Refused {
            tool: &cancel,
            args: &called,
            answer: "Order O404 not found",
            state: &state,
            clock: 1_735_689_600.0,
        };
        let next = read(
            &refused,
            &index,
            &Seen::default(),
            std::slice::from_ref(&cancel),
            &mut Rng::new(3),
        );
        assert!(!next.is_empty());
        for n in &next {
            let Next::Retry(a) = n else { panic!("{n:?}") };
            assert!(["O1", "O2", "O3"].contains(&a["order_id"].as_str().unwrap()));
        }
        // No draft exists: the tool seen creating drafts, then the call on the new one.
        let empty = json!({"drafts": {}, "users": {"U1": {"name": "Ann"}}});
        let with_one = json!({"drafts": {"D1": {"to": []}}, "users": {"U1": {"name": "Ann"}}});
        let mut seen = Seen::default();
        let made = args(json!({"user_id": "U1"}));
        let created = seen.learn("create_draft", &made, &empty, &with_one);
        assert_eq!(
            created.created,
            [RecordRef {
                collection: "drafts".into(),
                place: "/drafts".into(),
                key: "D1".into()
            }]
        );
        let send = tool("send_draft", &[("draft_id", json!({"type": "string"}))]);
        let called = args(json!({"draft_id": "D9"}));
        let refused = Refused {
            tool: &send,
            args: &called,
            answer: "draft D9 not found",
            state: &empty,
            clock: 1_735_689_600.0,
        };
        let next = read(
            &refused,
            &StateIndex::new(&empty),
            &seen,
            std::slice::from_ref(&send),
            &mut Rng::new(4),
        );
        assert_eq!(
            next,
            [Next::Prepare {
                tool: "create_draft".into(),
                args: made,
                then: Then::Created {
                    args: called,
                    param: "draft_id".into()
                }
            }]
        );
    }

    /// What reading `answer`, a refusal of `tool` called with `called` in the shop, proposes.
    fn proposed(
        tool: &ToolSpec,
        called: &Map<String, Value>,
        answer: &str,
        seed: u64,
    ) -> Vec<Next> {
        let state = shop();
        let index = StateIndex::new(&state);
        let refused = Refused {
            tool,
            args: called,
            answer,
            state: &state,
            clock: 1_735_689_600.0,
        };
        read(
            &refused,
            &index,
            &Seen::default(),
            std::slice::from_ref(tool),
            &mut Rng::new(seed),
        )
    }

    #[test]
    fn an_argument_the_answer_names_takes_what_the_answer_offers() {
        let set = tool(
            "set_priority",
            &[
                ("order_id", json!({"type": "string"})),
                ("priority", json!({"type": "string"})),
            ],
        );
        let called = args(json!({"order_id": "O1", "priority": "urgent-ish"}));
        let next = proposed(
            &set,
            &called,
            "priority must be one of: low, normal, high",
            5,
        );
        let tried: Vec<&Value> = next
            .iter()
            .map(|n| match n {
                Next::Retry(a) => &a["priority"],
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(tried, [&json!("low"), &json!("normal"), &json!("high")]);
        // A bound in numbers.
        let limit = tool(
            "set_limit",
            &[
                ("order_id", json!({"type": "string"})),
                ("limit", json!({"type": "integer"})),
            ],
        );
        let called = args(json!({"order_id": "O1", "limit": 5000}));
        let next = proposed(&limit, &called, "limit must be at most 500", 6);
        assert_eq!(
            next[0],
            Next::Retry(args(json!({"order_id": "O1", "limit": 500})))
        );
    }

    #[test]
    fn a_text_too_short_is_made_as_long_as_the_answer_asks() {
        let reject = tool(
            "reject_order",
            &[
                ("order_id", json!({"type": "string"})),
                ("reason", json!({"type": "string"})),
            ],
        );
        let called = args(json!({"order_id": "O1", "reason": "damaged"}));
        let next = proposed(&reject, &called, "reason must be at least 12 characters", 5);
        let Next::Retry(retried) = &next[0] else {
            panic!("{next:?}");
        };
        let reason = retried["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("damaged ") && reason.chars().count() >= 12,
            "{reason}"
        );
        assert_eq!(retried["order_id"], "O1");
        assert_eq!(least_characters("at most 5 items"), None);
        assert_eq!(least_characters("2 to 40 characters"), Some(40));
    }

    /// What `tool` refused with `answer` in `state` proposes (clock 2025-01-01, seed 1).
    fn proposals(tool: &ToolSpec, called: Value, answer: &str, state: &Value) -> Vec<Next> {
        let called = args(called);
        let refused = Refused {
            tool,
            args: &called,
            answer,
            state,
            clock: 1_735_689_600.0,
        };
        read(
            &refused,
            &StateIndex::new(state),
            &Seen::default(),
            std::slice::from_ref(tool),
            &mut Rng::new(1),
        )
    }

    fn retried(next: &[Next]) -> Vec<&Map<String, Value>> {
        next.iter()
            .map(|n| match n {
                Next::Retry(a) => a,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// The values the retries in `next` give `param`.
    fn tried_for<'n>(next: &'n [Next], param: &str) -> Vec<&'n Value> {
        retried(next).into_iter().map(|a| &a[param]).collect()
    }

    #[test]
    fn dates_named_together_are_set_together_in_order() {
        let state = json!({"users": {"u1": {"name": "Ann"}}});
        let window = tool(
            "check_conflicts",
            &[
                ("user_id", json!({"type": "string"})),
                ("start", json!({"type": "string"})),
                ("end", json!({"type": "string"})),
            ],
        );
        let next = proposals(
            &window,
            json!({"user_id": "u1", "start": "2024-06-17 09:00:00", "end": "x"}),
            "start and end must be YYYY-MM-DDTHH:MM with end after start",
            &state,
        );
        let tries = retried(&next);
        // First both, an hour apart on the clock's day; then one at a time, `start` and `end`
        // taking turns (not three tries of `start` first).
        assert_eq!(tries[0]["start"], "2025-01-01T09:00");
        assert_eq!(tries[0]["end"], "2025-01-01T10:00");
        assert_eq!(tries[1]["end"], "x");
        assert_ne!(tries[1]["start"], "2024-06-17 09:00:00");
        assert_eq!(tries[2]["start"], "2024-06-17 09:00:00");
        assert_ne!(tries[2]["end"], "x");
    }

    #[test]
    fn a_quoted_value_names_its_argument_and_the_description_offers_others() {
        let state = json!({"claims": {"CL1": {"status": "open"}}});
        let flag = tool(
            "flag_fraud",
            &[
                ("claim_id", json!({"type": "string"})),
                (
                    "indicator",
                    json!({"type": "string", "description": "One of \"late_report\", \"near_limit\"."}),
                ),
                (
                    "year",
                    json!({"type": "integer", "description": "Year, e.g. 2027"}),
                ),
            ],
        );
        let next = proposals(
            &flag,
            json!({"claim_id": "CL1", "indicator": "water_damage", "year": 27}),
            "Unknown fraud indicator 'water_damage'",
            &state,
        );
        let indicators: Vec<&Value> = retried(&next).iter().map(|a| &a["indicator"]).collect();
        assert_eq!(
            indicators[..2],
            [&json!("late_report"), &json!("near_limit")]
        );
        // Not quoted, not named: the year stays.
        assert!(retried(&next).iter().all(|a| a["year"] == 27));
        let next = proposals(
            &flag,
            json!({"claim_id": "CL1", "indicator": "late_report", "year": 27}),
            "Invalid expiry year",
            &state,
        );
        assert_eq!(retried(&next)[0]["year"], 2027);
        // Water damage said without quotes names nothing.
        let next = proposals(
            &flag,
            json!({"claim_id": "CL1", "indicator": "water_damage", "year": 27}),
            "Claim CL1 cannot be flagged for water_damage",
            &state,
        );
        assert!(retried(&next)
            .iter()
            .all(|a| a["indicator"] == "water_damage"));
    }

    #[test]
    fn a_record_the_answer_names_offers_its_members_of_the_refused_kind() {
        let state = json!({
            "users": {"tomas": {"active": true}, "lena": {"active": true},
                      "raj": {"active": true}, "mia": {"active": true}},
            "packages": {
                "kit": {"maintainers": {"tomas": "maintainer", "lena": "owner", "raj": "maintainer"}},
                "other": {"maintainers": {"mia": "owner"}}},
            "calendars": {"cal-ben": {"owner": "mia", "shared_with": ["raj"]}}});
        let deprecate = tool(
            "deprecate_package",
            &[
                ("name", json!({"type": "string"})),
                ("actor", json!({"type": "string"})),
            ],
        );
        // The owner, not another maintainer like tomas.
        let next = proposals(
            &deprecate,
            json!({"name": "kit", "actor": "tomas"}),
            "only owners of kit can do this; tomas is a maintainer",
            &state,
        );
        assert_eq!(retried(&next)[0]["actor"], "lena");
        // Not a maintainer at all: any of them, those the answer's words fit first.
        let next = proposals(
            &deprecate,
            json!({"name": "kit", "actor": "mia"}),
            "mia is not a maintainer of kit",
            &state,
        );
        let actors: Vec<&Value> = retried(&next).iter().map(|a| &a["actor"]).collect();
        assert_eq!(actors[..2], [&json!("raj"), &json!("tomas")]);
        // A field and a list of the record hold users too.
        let book = tool(
            "create_event",
            &[
                ("calendar_id", json!({"type": "string"})),
                ("organizer", json!({"type": "string"})),
            ],
        );
        let next = proposals(
            &book,
            json!({"calendar_id": "cal-ben", "organizer": "lena"}),
            "lena has no write access to calendar cal-ben",
            &state,
        );
        let organizers: Vec<&Value> = retried(&next).iter().map(|a| &a["organizer"]).collect();
        assert_eq!(organizers[..2], [&json!("mia"), &json!("raj")]);
        // The refused user said by its value in the record, not by its key.
        let next = proposals(
            &deprecate,
            json!({"name": "kit", "actor": "raj"}),
            "A maintainer cannot deprecate; owner role is required",
            &state,
        );
        assert_eq!(retried(&next)[0]["actor"], "lena");
        // An answer that says nothing of the user proposes none of these.
        let next = proposals(
            &deprecate,
            json!({"name": "kit", "actor": "raj"}),
            "kit is already deprecated",
            &state,
        );
        assert!(retried(&next).iter().all(|a| a["actor"] == "raj"));
    }

    #[test]
    fn a_record_said_to_be_done_already_calls_for_a_new_one() {
        let state = json!({"counts": {
            "CC-1": {"status": "posted", "bin": "A1"},
            "CC-2": {"status": "cancelled", "bin": "A2"}},
            "bins": {"A1": {"zone": "x"}, "A2": {"zone": "y"}}});
        let post = tool("post_count", &[("count_id", json!({"type": "string"}))]);
        let start = tool("start_count", &[("bin_id", json!({"type": "string"}))]);
        let mut seen = Seen::default();
        let mut after = state.clone();
        after["counts"]["CC-3"] = json!({"status": "open", "bin": "A1"});
        seen.learn(
            "start_count",
            &args(json!({"bin_id": "A1"})),
            &state,
            &after,
        );
        let called = args(json!({"count_id": "CC-1"}));
        let refused = |answer| Refused {
            tool: &post,
            args: &called,
            answer,
            state: &state,
            clock: 1_735_689_600.0,
        };
        let tools = [post.clone(), start.clone()];
        let read_it = |answer| {
            read(
                &refused(answer),
                &StateIndex::new(&state),
                &seen,
                &tools,
                &mut Rng::new(1),
            )
        };
        let next = read_it("Cycle count CC-1 is already posted");
        let created = Next::Prepare {
            tool: "start_count".into(),
            args: args(json!({"bin_id": "A1"})),
            then: Then::Created {
                args: called.clone(),
                param: "count_id".into(),
            },
        };
        assert!(next.contains(&created), "{next:?}");
        // An answer that does not say the record's value calls for no new record.
        let next = read_it("Cycle count CC-1 needs an approver");
        assert!(!next.contains(&created), "{next:?}");
    }

    #[test]
    fn a_field_of_a_named_record_and_a_date_put_in_the_past_are_tried() {
        let state = json!({
            "domains": {"a.io": {"auth_code": "k1"}, "b.io": {"auth_code": "k2"}},
            "units": {"U1": {"status": "vacant"}}});
        let transfer = tool(
            "request_transfer",
            &[
                ("domain", json!({"type": "string"})),
                ("auth_code", json!({"type": "string"})),
            ],
        );
        let next = proposals(
            &transfer,
            json!({"domain": "a.io", "auth_code": "k2"}),
            "authorization code does not match",
            &state,
        );
        assert_eq!(retried(&next)[0]["auth_code"], "k1");
        let lease = tool(
            "create_lease",
            &[
                ("unit_id", json!({"type": "string"})),
                ("start_date", json!({"type": "string"})),
            ],
        );
        let next = proposals(
            &lease,
            json!({"unit_id": "U1", "start_date": "2024-03-01"}),
            "Error: a lease cannot start in the past",
            &state,
        );
        // The clock's day (2025-01-01), the next, a week on.
        let dates: Vec<&Value> = retried(&next).iter().map(|a| &a["start_date"]).collect();
        assert_eq!(dates, ["2025-01-01", "2025-01-02", "2025-01-08"]);
        // The past of something else names no date.
        let next = proposals(
            &lease,
            json!({"unit_id": "U1", "start_date": "2024-03-01"}),
            "Error: the unit was vacated in the past",
            &state,
        );
        assert!(retried(&next)
            .iter()
            .all(|a| a["start_date"] == "2024-03-01"));
    }

    #[test]
    fn a_value_the_answer_writes_like_the_refused_one_comes_before_the_records_fields() {
        // Timesheets hold periods too; the answer's own period is the one to try first.
        let state = json!({"company": {"current_period": "2024-05"},
            "timesheets": {"T1": {"period": "2024-01"}, "T2": {"period": "2024-02"},
                           "T3": {"period": "2024-03"}}});
        let open = tool("open_payroll_run", &[("period", json!({"type": "string"}))]);
        let next = proposals(
            &open,
            json!({"period": "2024-03"}),
            "Payroll can only be opened for the current period 2024-05",
            &state,
        );
        assert_eq!(retried(&next)[0]["period"], "2024-05");
        // An answer that says no such value leaves the rest as they were.
        let next = proposals(
            &open,
            json!({"period": "2024-03"}),
            "Payroll can only be opened for the current period",
            &state,
        );
        assert!(retried(&next).iter().all(|a| a["period"] != "2024-05"));
    }

    #[test]
    fn an_object_takes_the_records_the_answer_lists_as_keys() {
        let state = json!({
            "exams": {"QZ": {"status": "open"}},
            "questions": {"QZ-1": {"exam_id": "QZ"}, "QZ-2": {"exam_id": "QZ"}},
            "meters": {"M1": {"registers": {"standard": 10.5}}}});
        let submit = tool(
            "submit_exam",
            &[
                ("exam_id", json!({"type": "string"})),
                (
                    "answers",
                    json!({"type": "object", "description": "e.g. {\"QZ-1\": \"B\"}"}),
                ),
            ],
        );
        let next = proposals(
            &submit,
            json!({"exam_id": "QZ", "answers": {}}),
            "Unanswered questions: QZ-1, QZ-2",
            &state,
        );
        assert_eq!(
            retried(&next)[0]["answers"],
            json!({"QZ-1": "B", "QZ-2": "B"})
        );
        // An object the answer names takes the named record's own.
        let read_meter = tool(
            "submit_reading",
            &[
                ("meter_id", json!({"type": "string"})),
                ("registers", json!({"type": "object"})),
            ],
        );
        let next = proposals(
            &read_meter,
            json!({"meter_id": "M1", "registers": {}}),
            "registers must be exactly ['standard']",
            &state,
        );
        assert_eq!(retried(&next)[0]["registers"], json!({"standard": 10.5}));
    }

    #[test]
    fn optional_arguments_named_are_left_out_and_a_value_already_so_is_changed() {
        let state = json!({"devices": {"D1": {"type": "light"}},
            "lines": {"L-2": {"number": "555-0101"}},
            "agents": {"AG-3": {"status": "available"}}});
        let mut light = tool(
            "set_light",
            &[
                ("device_id", json!({"type": "string"})),
                ("power", json!({"type": "string"})),
                ("brightness", json!({"type": "integer"})),
                ("color_temp", json!({"type": "integer"})),
            ],
        );
        light.params[2].required = false;
        light.params[3].required = false;
        let next = proposals(
            &light,
            json!({"device_id": "D1", "power": "off", "brightness": 5, "color_temp": 3000}),
            "brightness and color_temp can only be set when switching on",
            &state,
        );
        assert_eq!(
            *retried(&next)[0],
            args(json!({"device_id": "D1", "power": "off"}))
        );
        let port = tool(
            "port_out_line",
            &[
                ("line_id", json!({"type": "string"})),
                ("confirmation", json!({"type": "string"})),
            ],
        );
        let next = proposals(
            &port,
            json!({"line_id": "L-2", "confirmation": "x"}),
            "Error: confirmation does not match the number of L-2",
            &state,
        );
        assert_eq!(retried(&next)[0]["confirmation"], "555-0101");
        let status = tool(
            "set_agent_status",
            &[
                ("agent_id", json!({"type": "string"})),
                (
                    "status",
                    json!({"type": "string", "enum": ["available", "away"]}),
                ),
            ],
        );
        let next = proposals(
            &status,
            json!({"agent_id": "AG-3", "status": "available"}),
            "agent AG-3 is already available",
            &state,
        );
        assert!(
            retried(&next).iter().any(|a| a["status"] == "away"),
            "{next:?}"
        );
    }

    #[test]
    fn numbers_in_a_unit_are_set_within_the_measure_given() {
        let state = json!({"services": {"STD": {"max_weight_kg": 31.5}}});
        let quote = tool(
            "quote_shipment",
            &[
                ("service", json!({"type": "string"})),
                ("weight_kg", json!({"type": "number"})),
                ("length_cm", json!({"type": "integer"})),
                ("width_cm", json!({"type": "integer"})),
            ],
        );
        let next = proposals(
            &quote,
            json!({"service": "STD", "weight_kg": 2.0, "length_cm": 300, "width_cm": 150}),
            "Standard Parcel accepts parcels up to 120 cm on the longest side",
            &state,
        );
        assert_eq!(retried(&next)[0]["length_cm"], 119);
        assert_eq!(retried(&next)[0]["width_cm"], 119);
        assert_eq!(retried(&next)[0]["weight_kg"], 2.0);
        assert!(!in_unit("cm", "cm") && in_unit("lengthCm", "cm"));
    }

    #[test]
    fn a_date_quoted_of_a_record_leads_to_the_record_nearest_the_clock() {
        // The clock is 2025-01-01.
        let state = json!({"reservations": {
            "R1": {"start": "2025-03-01", "status": "booked"},
            "R2": {"start": "2024-06-01", "status": "booked"},
            "R3": {"start": "2025-01-01", "status": "booked"},
            "R4": {"start": "2024-06-01", "status": "booked"}}});
        let pick_up = tool("pick_up", &[("reservation_id", json!({"type": "string"}))]);
        let next = proposals(
            &pick_up,
            json!({"reservation_id": "R1"}),
            "Reservation R1 starts on 2025-03-01",
            &state,
        );
        assert_eq!(retried(&next)[0]["reservation_id"], "R3");
        // A tool whose description says what a parameter takes.
        let mut discharge = tool(
            "discharge",
            &[
                ("patient_id", json!({"type": "string"})),
                ("disposition", json!({"type": "string"})),
            ],
        );
        discharge.description = "Rules: disposition must be one of home, rehab; the rest.".into();
        let next = proposals(
            &discharge,
            json!({"patient_id": "R1", "disposition": "x-1"}),
            "Unknown disposition 'x-1'",
            &state,
        );
        let given: Vec<&Value> = retried(&next).iter().map(|a| &a["disposition"]).collect();
        assert_eq!(given, ["home", "rehab"]);
        // Dates the answer asks for as ISO dates, for parameters named like times.
        let statement = tool(
            "generate_statement",
            &[
                ("account_id", json!({"type": "string"})),
                ("period_start", json!({"type": "string"})),
                ("period_end", json!({"type": "string"})),
            ],
        );
        let next = proposals(
            &statement,
            json!({"account_id": "A1", "period_start": "x", "period_end": "y"}),
            "period_start and period_end must be ISO dates",
            &state,
        );
        assert_eq!(retried(&next)[0]["period_start"], "2025-01-01");
        assert_eq!(retried(&next)[0]["period_end"], "2025-01-02");
    }

    #[test]
    fn the_record_taken_instead_is_like_the_refused_one_but_for_the_condition() {
        // The clock is 2025-01-01; R1 arrives later. R2 arrives today but is checked out; R3
        // arrives today and is booked like R1.
        let state = json!({"reservations": {
            "R1": {"arrival": "2025-03-01", "status": "booked"},
            "R2": {"arrival": "2025-01-01", "status": "checked_out"},
            "R3": {"arrival": "2025-01-01", "status": "booked"},
            "R4": {"arrival": "2025-01-01", "status": "checked_out"},
            "R5": {"arrival": "2025-01-01", "status": "checked_out"},
            "R6": {"arrival": "2025-01-01", "status": "checked_out"}}});
        let check_in = tool("check_in", &[("reservation_id", json!({"type": "string"}))]);
        let next = proposals(
            &check_in,
            json!({"reservation_id": "R1"}),
            "Arrival date is 2025-03-01; check-in is only possible on the arrival date",
            &state,
        );
        assert_eq!(retried(&next)[0]["reservation_id"], "R3");
        assert_eq!(
            likeness(
                &state["reservations"]["R1"],
                &state["reservations"]["R3"],
                "arrival"
            ),
            1
        );
        assert_eq!(
            likeness(
                &state["reservations"]["R1"],
                &state["reservations"]["R2"],
                "arrival"
            ),
            0
        );
    }
}

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

use crate::driver::{
    arguments_explored, concrete, id_stem, name_words, names_an_id, quoted_values, schema_type,
    stem_names, Intent, RecordRef, Shape, StateIndex, ToolSpec,
};
use envsim_core::diff::fine_diff;
use envsim_core::rng::Rng;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

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

/// A change a tool was seen making to one field of a record its argument named.
#[derive(Clone, Debug, PartialEq)]
pub struct Write {
    /// The tool.
    pub tool: String,
    /// The record's collection.
    pub collection: String,
    /// The field set.
    pub field: String,
    /// The argument that named the record.
    pub param: String,
    /// The value it replaced (`null` when the field was new).
    pub from: Value,
    /// The value it set.
    pub to: Value,
}

/// A record a tool was seen creating.
#[derive(Clone, Debug, PartialEq)]
pub struct Creation {
    /// The tool.
    pub tool: String,
    /// The new record's collection.
    pub collection: String,
    /// The arguments that created it.
    pub args: Map<String, Value>,
    /// The new record's own scalar fields (what such a record starts as: an order `placed`).
    pub fields: Map<String, Value>,
}

/// How many writes and creations [`Seen`] keeps (the latest, distinct).
const SEEN_CAP: usize = 256;

/// What tools were seen doing in the exploration so far.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    writes: Vec<Write>,
    creations: Vec<Creation>,
    /// For an argument name, the collection whose key it held in a call that succeeded
    /// (`reporter_id` → `users`): what the argument takes, whatever it is called.
    takes: std::collections::BTreeMap<String, String>,
}

impl Seen {
    /// Learns from a call of `tool` with `args` that succeeded and turned `before` into
    /// `after`: each field it set on a record an argument names, and
    /// each record it created (a new key of a collection). Returns the records it created and
    /// those it changed that an argument names ([`Touched`]).
    pub fn learn(
        &mut self,
        tool: &str,
        args: &Map<String, Value>,
        before: &Value,
        after: &Value,
    ) -> Touched {
        let named: Vec<(&String, &str)> = args
            .iter()
            .flat_map(|(k, v)| strings(v).into_iter().map(move |s| (k, s)))
            .collect();
        let mut created: BTreeSet<RecordRef> = BTreeSet::new();
        let mut changed: BTreeSet<RecordRef> = BTreeSet::new();
        for change in fine_diff(before, after) {
            let tokens: Vec<&str> = change.pointer.tokens().iter().map(String::as_str).collect();
            // A field of a record an argument names: .../<collection>/<key>/<field>...
            for i in 1..tokens.len().saturating_sub(1) {
                if let Some((param, _)) = named.iter().find(|(_, v)| *v == tokens[i]) {
                    let field = pointer(&tokens[..i + 2]);
                    let write = Write {
                        tool: tool.to_owned(),
                        collection: tokens[i - 1].to_owned(),
                        field: tokens[i + 1].to_owned(),
                        param: (*param).clone(),
                        from: before.pointer(&field).cloned().unwrap_or(Value::Null),
                        to: after.pointer(&field).cloned().unwrap_or(Value::Null),
                    };
                    changed.insert(RecordRef {
                        collection: write.collection.clone(),
                        place: pointer(&tokens[..i]),
                        key: tokens[i].to_owned(),
                    });
                    push_distinct(&mut self.writes, write);
                    break;
                }
            }
            // A new record: a key that was not there, of a collection the index knows.
            let Some((key, parent)) = tokens.split_last() else {
                continue;
            };
            let at = pointer(&tokens);
            let added =
                before.pointer(&at).is_none() && after.pointer(&at).is_some_and(Value::is_object);
            if !added {
                continue;
            }
            // A collection is an object holding records under keys: the added record's parent,
            // named by its own key (the state's root holds no records).
            let Some(collection) = parent.last() else {
                continue;
            };
            {
                let record = RecordRef {
                    collection: (*collection).to_owned(),
                    place: pointer(parent),
                    key: (*key).to_owned(),
                };
                if created.insert(record) {
                    push_distinct(
                        &mut self.creations,
                        Creation {
                            tool: tool.to_owned(),
                            collection: (*collection).to_owned(),
                            args: args.clone(),
                            fields: after
                                .pointer(&at)
                                .and_then(Value::as_object)
                                .map(|m| {
                                    m.iter()
                                        .filter(|(_, v)| !v.is_object() && !v.is_array())
                                        .map(|(k, v)| (k.clone(), v.clone()))
                                        .collect()
                                })
                                .unwrap_or_default(),
                        },
                    );
                }
            }
        }
        Touched {
            created: created.into_iter().collect(),
            changed: changed.into_iter().collect(),
        }
    }

    /// Learns what a call that succeeded shows its arguments take: an argument that held the
    /// key of a record of a collection takes that collection's keys.
    pub fn learn_arguments(
        &mut self,
        args: &Map<String, Value>,
        state: &Value,
        index: &StateIndex,
    ) {
        for (param, value) in args {
            if let Some(record) = strings(value).first().and_then(|s| index.locate(state, s)) {
                self.takes.insert(param.clone(), record.collection);
            }
        }
    }

    /// The collection whose keys an argument was seen taking in a call that succeeded.
    pub fn takes(&self, param: &str) -> Option<&str> {
        self.takes.get(param).map(String::as_str)
    }

    /// The first write of a shortest chain of writes seen on `collection`'s `field` that
    /// leads from `from` to a value `goal` accepts (`None` when no chain does).
    pub fn first_step<'s>(
        &'s self,
        collection: &str,
        field: &str,
        from: &'s Value,
        goal: impl Fn(&Value) -> bool,
    ) -> Option<&'s Write> {
        let edges: Vec<&Write> = self
            .writes
            .iter()
            .filter(|w| w.collection == collection && w.field == field && w.from != w.to)
            .collect();
        // Breadth first over values, remembering the first write of the path to each.
        let mut reached: Vec<(&Value, &Write)> = Vec::new();
        let mut frontier: Vec<(&Value, Option<&Write>)> = vec![(from, None)];
        while !frontier.is_empty() {
            let mut next = Vec::new();
            for (value, first) in frontier {
                for edge in edges.iter().filter(|e| e.from == *value) {
                    if edge.to == *from || reached.iter().any(|(v, _)| **v == edge.to) {
                        continue;
                    }
                    let first = first.unwrap_or(edge);
                    if goal(&edge.to) {
                        return Some(first);
                    }
                    reached.push((&edge.to, first));
                    next.push((&edge.to, Some(first)));
                }
            }
            frontier = next;
        }
        None
    }

    /// Writes seen on `collection`.
    pub fn writes_on<'a>(&'a self, collection: &'a str) -> impl Iterator<Item = &'a Write> {
        self.writes
            .iter()
            .filter(move |w| w.collection == collection)
    }

    /// The latest creation seen of a record of `collection` whose `field` started as a value
    /// `wanted` accepts.
    pub fn creation_where(
        &self,
        collection: &str,
        field: &str,
        wanted: impl Fn(&Value) -> bool,
    ) -> Option<&Creation> {
        self.creations
            .iter()
            .rev()
            .find(|c| c.collection == collection && c.fields.get(field).is_some_and(&wanted))
    }

    /// The latest creation seen of a record of the collection an id's stem names (`draft` for
    /// `draft_id`): found by name, since a collection with no record left is no collection
    /// the state's index knows.
    pub fn creation_for(&self, stem: &str) -> Option<&Creation> {
        self.creations
            .iter()
            .rev()
            .find(|c| stem_names(stem, &c.collection))
    }
}

/// The records a call created and changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Touched {
    /// New records.
    pub created: Vec<RecordRef>,
    /// Records an argument named whose fields it set.
    pub changed: Vec<RecordRef>,
}

/// Keeps the latest [`SEEN_CAP`] distinct entries.
fn push_distinct<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if list.contains(&item) {
        return;
    }
    if list.len() == SEEN_CAP {
        list.remove(0);
    }
    list.push(item);
}

/// The strings of a value: itself, or the strings of a list.
fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// The JSON pointer of unescaped tokens.
fn pointer(tokens: &[&str]) -> String {
    tokens
        .iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
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
}

/// Phrases that say a named thing does not exist.
const NOT_FOUND: [&str; 9] = [
    "not found",
    "does not exist",
    "doesn't exist",
    "no such",
    "unknown",
    "not exist",
    "cannot find",
    "could not find",
    "no record",
];

/// Words too common in answers to point at a field.
const FILLER: [&str; 12] = [
    "is", "has", "the", "and", "not", "for", "with", "this", "that", "are", "was", "its",
];

/// How many other records of a collection are read for the values a field takes.
const SIBLINGS_READ: usize = 64;

/// Most proposals [`read`] makes.
const MOST: usize = 6;

/// The text of an answer that says why: the string values of an answer object (its `error`,
/// its `message`; not its keys, which every answer repeats), a string answer itself, else the
/// rendered answer.
pub fn answer_text(answer: &Value, rendered: &str) -> String {
    fn collect(value: &Value, depth: usize, out: &mut Vec<String>) {
        match value {
            Value::String(s) => out.push(s.clone()),
            Value::Object(map) if depth < 3 => {
                for v in map.values() {
                    collect(v, depth + 1, out);
                }
            }
            Value::Array(items) if depth < 3 => {
                for v in items.iter().take(8) {
                    collect(v, depth + 1, out);
                }
            }
            _ => {}
        }
    }
    let mut parts = Vec::new();
    collect(answer, 0, &mut parts);
    if parts.is_empty() {
        rendered.to_owned()
    } else {
        parts.join("; ")
    }
}

/// A word as compared: lowercase, `-` as `_` (`checked-in` is the value `checked_in`).
fn norm(word: &str) -> String {
    word.to_lowercase().replace('-', "_")
}

/// The words of a text as compared ([`norm`]; letters, digits, `_`, `-`, `.`, `@` inside a
/// word).
fn words(text: &str) -> Vec<String> {
    tokens(text).map(norm).collect()
}

/// The tokens of a text as written: runs of letters, digits, `_`, `-`, `.`, `@`, without a
/// trailing or leading `.`.
fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || "_-.@".contains(c)))
        .map(|w| w.trim_matches('.'))
        .filter(|w| !w.is_empty())
}

/// Whether two compared words name the same thing: equal, one a short inflection of the
/// other (`arrive` and `arrived`, `ship` and `shipped`, `order` and `orders`), or one a part of
/// the other's compound (`pending` in `non-pending`).
fn same_word(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let part_of = |part: &str, whole: &str| {
        part.len() >= 4 && whole.contains('_') && whole.split('_').any(|p| p == part)
    };
    if part_of(a, b) || part_of(b, a) {
        return true;
    }
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short.len() >= 4 && long.len() - short.len() <= 3 && long.starts_with(short)
        || short.len() >= 3
            && long.len() == short.len() + 1
            && long.ends_with('s')
            && long.starts_with(short)
}

/// Whether the answer's words hold `value` (a string of one or more words, or a number),
/// word for word or inflected ([`same_word`]).
fn says(answer_words: &[String], value: &Value) -> bool {
    saying(answer_words, value) < 2
}

/// How the answer's words hold `value`: 0 word for word, 1 inflected (`ship` for `shipped`),
/// 2 not at all.
fn saying(answer_words: &[String], value: &Value) -> u8 {
    let holds = |same: &dyn Fn(&str, &str) -> bool| match value {
        Value::String(s) => {
            let needle = words(s);
            !needle.is_empty()
                && answer_words
                    .windows(needle.len())
                    .any(|w| w.iter().zip(&needle).all(|(a, b)| same(a, b)))
        }
        Value::Number(n) => answer_words.iter().any(|w| *w == n.to_string()),
        _ => false,
    };
    if holds(&|a, b| a == b) {
        0
    } else if holds(&same_word) {
        1
    } else {
        2
    }
}

/// Whether the answer names a field (`is_draft` by "draft", `due_date` by "due date").
fn names_field(answer_words: &[String], field: &str) -> bool {
    let parts: Vec<String> = name_words(field)
        .into_iter()
        .filter(|p| p.len() > 2 && !FILLER.contains(&p.as_str()))
        .collect();
    !parts.is_empty()
        && parts
            .iter()
            .all(|p| answer_words.iter().any(|w| same_word(w, p)))
}

/// The values an answer offers for an argument: the texts it quotes, and the single words of
/// a list after "one of", "allowed", "valid", "must be", "expected", "either" or "options".
fn offered_values(answer: &str) -> Vec<String> {
    let mut out = quoted_values(answer);
    let lower = answer.to_lowercase();
    for cue in [
        "one of", "allowed", "valid", "must be", "expected", "either", "options",
    ] {
        let Some(at) = lower.find(cue) else {
            continue;
        };
        // Read from `lower`: its byte offsets are the ones found.
        let rest = &lower[at + cue.len()..];
        let rest = rest.trim_start_matches([':', ' ', '[', '(', '{']);
        let end = rest
            .find(['.', ';', ')', ']', '}', '\n'])
            .unwrap_or(rest.len());
        for item in rest[..end].split([',', '|', '/']) {
            for part in item.split(" or ") {
                let part = part.trim().trim_matches(['\'', '"', '`']).trim();
                let single =
                    !part.is_empty() && part.len() <= 40 && !part.contains(' ') && part != "be";
                if single && !out.iter().any(|o| o.eq_ignore_ascii_case(part)) {
                    out.push(part.to_owned());
                }
            }
        }
    }
    out
}

/// The numbers an answer gives.
fn numbers(answer: &str) -> Vec<f64> {
    let mut out: Vec<f64> = Vec::new();
    for w in answer.split(|c: char| !(c.is_ascii_digit() || c == '.')) {
        if let Ok(n) = w.trim_matches('.').parse::<f64>() {
            if n.is_finite() && !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// The shape of text an answer asks for: a template (`YYYY-MM-DD`, `YYYY-MM-DDTHH:MM`), or an
/// example of one (`times must look like 2024-06-17T09:30`), with the example.
fn asked_shape(answer: &str) -> Option<(Shape, Option<String>)> {
    let upper = answer.to_uppercase();
    if upper.contains("YYYY-MM-DD") {
        let time = upper.contains("HH:MM") || upper.contains("YYYY-MM-DDT");
        return Some((if time { Shape::DateTime } else { Shape::Date }, None));
    }
    for token in answer.split(|c: char| c.is_whitespace() || ",;()'\"".contains(c)) {
        let token = token.trim_end_matches('.');
        if let Some(fit) = Shape::DateTime.fit(token) {
            return Some((Shape::DateTime, Some(fit)));
        }
    }
    None
}

/// Phrases that say a value is taken.
const TAKEN: [&str; 9] = [
    "already exists",
    "already registered",
    "already taken",
    "already in use",
    "in use",
    "duplicate",
    "exists",
    "not available",
    "already used",
];

/// A variant of a taken value: an address's local part, a domain's or file's name before its
/// last dot, else the whole text, with `-n` added (`ann-123@x.io`, `harbor-123.org`).
fn variant(text: &str, n: usize) -> String {
    if let Some((user, host)) = text.split_once('@') {
        return format!("{user}-{n}@{host}");
    }
    match text.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && !ext.contains(' ') && !ext.contains('/') => {
            format!("{stem}-{n}.{ext}")
        }
        _ => format!("{text}-{n}"),
    }
}

/// Times to try for a date an answer constrains: a day after, a day before and a month after
/// each date or date-time it gives, then the call's day, the next, and a week after.
fn dated(answer: &str, clock: f64) -> Vec<f64> {
    const DAY: f64 = 86_400.0;
    let mut out = Vec::new();
    for token in answer.split(|c: char| c.is_whitespace() || ",;()'\"[]".contains(c)) {
        let token = token.trim_end_matches('.');
        if let Some(t) = envsim_core::clock::parse_time(token) {
            out.extend([t + DAY, t - DAY, t + 30.0 * DAY]);
        }
    }
    let today = (clock / DAY).floor() * DAY;
    out.extend([today, today + DAY, today + 7.0 * DAY]);
    out
}

/// A time written in a date's or date-time's shape, as long as `like` (the value it replaces)
/// where that is a date or date-time too.
fn date_like(seconds: f64, shape: Shape, like: &str) -> String {
    let full = envsim_core::clock::format_time(seconds);
    let length = match shape {
        Shape::Date => 10,
        _ if Shape::DateTime.fit(like).is_some() => like.len().min(full.len()),
        _ => 16,
    };
    full.chars().take(length).collect()
}

/// A value for a parameter of this schema from a text the answer offered.
fn typed(schema: &Value, text: &str) -> Option<Value> {
    match schema_type(concrete(schema)) {
        "integer" => text.parse::<i64>().ok().map(Value::from),
        "number" => text.parse::<f64>().ok().map(Value::from),
        "boolean" => match text.to_ascii_lowercase().as_str() {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        "array" => Some(Value::Array(vec![Value::String(text.to_owned())])),
        "object" => None,
        _ => Some(Value::String(text.to_owned())),
    }
}

/// A scalar's text as an answer would say it.
fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

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
    let answer_words = words(refused.answer);
    let lower = refused.answer.to_lowercase();
    let not_found = NOT_FOUND.iter().any(|p| lower.contains(p));
    let mut out: Vec<Next> = Vec::new();
    // A proposal is new when it is not the refused call, and not a proposal already made (a
    // preparing call counts as made when the same tool prepares the same try).
    let push = |next: Next, out: &mut Vec<Next>| {
        let fresh = match &next {
            Next::Retry(args) => args != refused.args && !out.contains(&next),
            Next::Prepare { tool, then, .. } => !out.iter().any(
                |o| matches!(o, Next::Prepare { tool: t, then: n, .. } if t == tool && n == then),
            ),
        };
        if fresh && out.len() < MOST {
            out.push(next);
        }
    };
    let retry_with = |param: &String, value: Value| {
        let mut args = refused.args.clone();
        args.insert(param.clone(), value);
        Next::Retry(args)
    };
    // The records the arguments name, then those the answer names by key.
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
    // An argument the answer names: the numbers it gives, the shape of text it asks for, the
    // values it offers, or another value from the state. When it names none but asks for a
    // shape, the arguments whose names ask for that shape.
    let offered = offered_values(refused.answer);
    let given = numbers(refused.answer);
    let shape = asked_shape(refused.answer);
    let mut named_params: Vec<&crate::driver::Param> = refused
        .tool
        .params
        .iter()
        .filter(|p| refused.args.contains_key(&p.name) && names_field(&answer_words, &p.name))
        .filter(|p| !(names_an_id(&p.name) && named.iter().any(|n| n.param == Some(&p.name))))
        .collect();
    if named_params.is_empty() {
        if let Some((shape, _)) = shape {
            named_params = refused
                .tool
                .params
                .iter()
                .filter(|p| Shape::of(&p.name, &p.schema) == Some(shape))
                .collect();
        }
    }
    let taken = TAKEN.iter().any(|p| lower.contains(p));
    // A value that is taken: a variant of it, for every argument the answer quotes or names.
    if taken {
        for (name, value) in refused.args {
            let Some(text) = value.as_str() else {
                continue;
            };
            if lower.contains(&text.to_lowercase()) || names_field(&answer_words, name) {
                let variant = variant(text, rng.below(900) + 100);
                push(retry_with(name, Value::String(variant)), &mut out);
            }
        }
    }
    let dates = dated(refused.answer, refused.clock);
    let mut unanswered: Vec<&String> = Vec::new();
    for param in named_params {
        let name = &param.name;
        let numeric = matches!(schema_type(concrete(&param.schema)), "integer" | "number");
        let mut candidates: Vec<Value> = Vec::new();
        if let Some(shape) = Shape::of(name, &param.schema)
            .filter(|s| matches!(s, Shape::Date | Shape::DateTime) && !numeric)
        {
            // Dates the answer gives (a day after, a day before, a month after) and today.
            let like = refused.args.get(name).and_then(Value::as_str).unwrap_or("");
            for seconds in &dates {
                candidates.push(Value::String(date_like(*seconds, shape, like)));
            }
        }
        if numeric {
            candidates.extend(
                given
                    .iter()
                    .flat_map(|&n| [n, (n - 1.0).max(0.0), 1.0])
                    .filter_map(|n| typed(&param.schema, &format!("{}", n.trunc() as i64))),
            );
        } else if let Some((shape, example)) = &shape {
            let mut texts = index.shaped_as(*shape);
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
        candidates.retain(|v| Some(v) != refused.args.get(name));
        if candidates.is_empty() {
            unanswered.push(name);
        }
        for candidate in candidates.into_iter().take(3) {
            push(retry_with(name, candidate), &mut out);
        }
    }
    // The answer wants another value than the one given ("should be different from the
    // current one"): another record beside the one an argument named (the user's other
    // payment method).
    let another = ["different", "same as", "already", "current one"]
        .iter()
        .any(|p| lower.contains(p));
    if another {
        for pointed in named.iter().filter(|n| n.param.is_some()) {
            let Some(param) = pointed.param else { continue };
            if !names_field(&answer_words, param) {
                continue;
            }
            let others: Vec<&String> = index
                .records_at(refused.state, &pointed.record.place)
                .into_iter()
                .map(|(k, _)| k)
                .filter(|k| **k != pointed.record.key)
                .collect();
            for _ in 0..2 {
                if let Some(key) = rng.pick(&others) {
                    let value = as_argument(refused.args.get(param.as_str()), key);
                    push(retry_with(param, value), &mut out);
                }
            }
        }
    }
    // A record the answer names where an argument named another of its kind ("only the
    // organizer (u-ben) can change evt-2"): the call again with that record.
    for pointed in named.iter().filter(|n| n.param.is_none()) {
        for other in named.iter().filter(|n| n.param.is_some()) {
            if other.record.collection == pointed.record.collection {
                if let Some(param) = other.param {
                    let value = as_argument(refused.args.get(param.as_str()), &pointed.record.key);
                    push(retry_with(param, value), &mut out);
                }
            }
        }
    }
    // An id the answer says is not found: another one, or, when none of its kind exists, a
    // call seen creating one and then the refused call on the new record.
    // (An argument of any name whose value the answer quotes: `actor` takes users.)
    for (param, value) in refused.args.iter().filter(|(p, v)| {
        names_an_id(p) || strings(v).iter().any(|s| lower.contains(&s.to_lowercase()))
    }) {
        let ids = strings(value);
        let unknown = ids.iter().any(|s| index.locate(refused.state, s).is_none());
        let mentioned = ids.iter().any(|s| lower.contains(&s.to_lowercase()));
        if !(not_found && (unknown || mentioned)) {
            continue;
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
            if answer_words
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
        for _ in 0..2 {
            if let Some(other) = rng.pick(&others).and_then(Value::as_str) {
                push(retry_with(param, as_argument(Some(value), other)), &mut out);
            }
        }
        if others.is_empty() {
            if let Some(creation) = seen.creation_for(&id_stem(param)) {
                push(
                    Next::Prepare {
                        tool: creation.tool.clone(),
                        args: creation.args.clone(),
                        then: Then::Created {
                            args: refused.args.clone(),
                            param: param.clone(),
                        },
                    },
                    &mut out,
                );
            }
        }
    }
    // A named record in the wrong condition: the fields the answer points at, those whose
    // value it says first.
    for Pointed { param, record } in &named {
        let Some(fields) = refused
            .state
            .pointer(&record.place)
            .and_then(|c| c.get(&record.key))
            .and_then(Value::as_object)
        else {
            continue;
        };
        let siblings = index.records_at(refused.state, &record.place);
        // A field is pointed at when the answer says its value, names it, or says a value it
        // has in another record ("non-pending order": the status another order has).
        let said_elsewhere = |field: &str, current: &Value| {
            siblings.iter().take(SIBLINGS_READ).any(|(_, s)| {
                s.get(field)
                    .is_some_and(|v| v != current && !v.is_object() && says(&answer_words, v))
            })
        };
        let mut pointed: Vec<(&String, &Value)> = fields
            .iter()
            .filter(|(_, v)| !v.is_object() && !v.is_array())
            // The record's own key is no condition of it.
            .filter(|(_, v)| v.as_str() != Some(record.key.as_str()))
            .filter(|(f, v)| {
                says(&answer_words, v) || names_field(&answer_words, f) || said_elsewhere(f, v)
            })
            .collect();
        pointed.sort_by_key(|(f, v)| !says(&answer_words, v) && !said_elsewhere(f, v));
        for (field, current) in &pointed {
            // Values of the field elsewhere in the collection, those the answer says first.
            let mut wanted: Vec<&Value> = Vec::new();
            for (_, sibling) in &siblings {
                if let Some(v) = sibling.get(field.as_str()) {
                    if v != *current && !wanted.contains(&v) {
                        wanted.push(v);
                    }
                }
            }
            wanted.sort_by_key(|v| saying(&answer_words, v));
            // Where the writes seen lead from the current value to one the answer says, the
            // first of them on this record (placed → paid → shipped → delivered: pay first).
            let toward = seen.first_step(&record.collection, field, current, |v| {
                says(&answer_words, v)
            });
            if let Some(write) = toward {
                if let Some(next) = prepare(refused, index, tools, write, record, rng) {
                    push(next, &mut out);
                }
            }
            // The same call on a record that has such a value: two that have values the answer
            // says; when it says none, one guess — unless it says a value the field was seen
            // taking, which no record has now (a guess would only repeat the refusal).
            let said = wanted.iter().filter(|v| says(&answer_words, v)).count();
            let known_elsewhere = seen
                .writes_on(&record.collection)
                .filter(|w| &w.field == *field)
                .any(|w| w.to != **current && says(&answer_words, &w.to));
            let tries = if said > 0 {
                said.min(2)
            } else if known_elsewhere {
                0
            } else {
                1
            };
            if let Some(param) = param {
                for want in wanted.iter().take(tries) {
                    let alternatives: Vec<&String> = siblings
                        .iter()
                        .filter(|(_, s)| s.get(field.as_str()) == Some(*want))
                        .map(|(k, _)| *k)
                        .collect();
                    if let Some(key) = rng.pick(&alternatives) {
                        let value = as_argument(refused.args.get(param.as_str()), key);
                        push(retry_with(param, value), &mut out);
                    }
                }
            }
            // Else a call seen setting the field to another value, on this record first: one
            // that sets a value the answer says, else one seen moving it on from the value it
            // has (the next step of a lifecycle: requested → matched → arrived).
            if toward.is_none() {
                let mut writes: Vec<&Write> = seen
                    .writes_on(&record.collection)
                    .filter(|w| &w.field == *field && w.to != **current)
                    .collect();
                writes.sort_by_key(|w| (saying(&answer_words, &w.to), w.from != **current));
                if let Some(write) = writes.first() {
                    if let Some(next) = prepare(refused, index, tools, write, record, rng) {
                        push(next, &mut out);
                    }
                }
            }
            // No record has a value the answer asks for: a call seen creating a record that
            // starts with it, then the call on the new record.
            let current_words = words(&value_text(current));
            let asked = |v: &Value| {
                let text = norm(&value_text(v));
                !current_words.contains(&text) && answer_words.contains(&text)
            };
            if let Some(param) = param {
                if let Some(creation) = seen.creation_where(&record.collection, field, asked) {
                    push(
                        Next::Prepare {
                            tool: creation.tool.clone(),
                            args: creation.args.clone(),
                            then: Then::Created {
                                args: refused.args.clone(),
                                param: (*param).clone(),
                            },
                        },
                        &mut out,
                    );
                }
            }
        }
    }
    // What other tools were seen changing through the same argument (`add_to_cart(customer_id)`
    // filling the cart `checkout(customer_id)` finds empty): such a call on this value first,
    // those whose changed collection or field the answer names first.
    if !not_found {
        for (param, value) in refused.args {
            let Some(key) = value.as_str() else {
                continue;
            };
            let mut writes: Vec<&Write> = seen
                .writes
                .iter()
                .filter(|w| &w.param == param && w.tool != refused.tool.name)
                .collect();
            writes.sort_by_key(|w| {
                !(names_field(&answer_words, &w.collection) || names_field(&answer_words, &w.field))
            });
            let mut tools_tried: Vec<&str> = Vec::new();
            for write in writes {
                if tools_tried.contains(&write.tool.as_str()) || tools_tried.len() == 2 {
                    continue;
                }
                tools_tried.push(&write.tool);
                let record = index.locate(refused.state, key);
                if let Some(next) =
                    prepare_on(refused, index, tools, write, key, record.as_ref(), rng)
                {
                    push(next, &mut out);
                }
            }
        }
    }
    // A key the code looked up and missed (`KeyError: 'door 72'`): keys of the objects named
    // like the argument that held it.
    if lower.contains("keyerror") || lower.contains("key error") {
        for (name, value) in refused.args {
            let missed = strings(value)
                .iter()
                .any(|s| refused.answer.contains(&format!("'{s}'")));
            if !missed {
                continue;
            }
            for key in index.keys_named_like(name).into_iter().take(3) {
                push(retry_with(name, as_argument(Some(value), &key)), &mut out);
            }
        }
    }
    // Last, an argument the answer names without saying what it wants: another value from
    // the state.
    for name in unanswered {
        let candidates: Vec<Value> = index
            .offered_for(name)
            .into_iter()
            .filter(|v| Some(v) != refused.args.get(name))
            .collect();
        for candidate in candidates.into_iter().take(2) {
            push(retry_with(name, candidate), &mut out);
        }
    }
    out
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

    #[test]
    fn an_argument_the_answer_names_takes_what_the_answer_offers() {
        let state = shop();
        let index = StateIndex::new(&state);
        let set = tool(
            "set_priority",
            &[
                ("order_id", json!({"type": "string"})),
                ("priority", json!({"type": "string"})),
            ],
        );
        let called = args(json!({"order_id": "O1", "priority": "urgent-ish"}));
        let refused = Refused {
            tool: &set,
            args: &called,
            answer: "priority must be one of: low, normal, high",
            state: &state,
            clock: 1_735_689_600.0,
        };
        let next = read(
            &refused,
            &index,
            &Seen::default(),
            std::slice::from_ref(&set),
            &mut Rng::new(5),
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
        let refused = Refused {
            tool: &limit,
            args: &called,
            answer: "limit must be at most 500",
            state: &state,
            clock: 1_735_689_600.0,
        };
        let next = read(
            &refused,
            &index,
            &Seen::default(),
            std::slice::from_ref(&limit),
            &mut Rng::new(6),
        );
        assert_eq!(
            next[0],
            Next::Retry(args(json!({"order_id": "O1", "limit": 500})))
        );
    }

    #[test]
    fn answers_are_read_word_by_word() {
        let w = words("Mailbox ann@x.io is suspended; msg-5 is not a draft.");
        assert_eq!(
            w,
            [
                "mailbox",
                "ann@x.io",
                "is",
                "suspended",
                "msg_5",
                "is",
                "not",
                "a",
                "draft"
            ]
        );
        assert!(same_word("arrive", "arrived") && same_word("orders", "order"));
        assert!(same_word("pending", "non_pending") && !same_word("non", "non_pending"));
        assert!(!same_word("ship", "shipment") && !same_word("cat", "cats_"));
        assert!(names_field(&w, "is_draft"));
        assert!(names_field(&w, "mailbox"));
        assert!(!names_field(&w, "is_not"));
        assert!(says(&w, &json!("suspended")));
        assert!(!says(&w, &json!("active")));
        assert_eq!(
            offered_values("status must be one of ['open', 'closed'] or 'held'"),
            ["open", "closed", "held"]
        );
        assert_eq!(numbers("at most 3 items, 2.5 kg"), [3.0, 2.5]);
    }
}

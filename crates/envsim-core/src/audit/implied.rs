//! The state a transcript implies: a field-level model of resources built from calls and
//! answers alone (the state constraint graph of the SIMCON-DATA proposal, made explicit).
//!
//! A transcript without states still says a great deal about the state: which resources exist
//! (created, returned, listed, or there from the start when the initial state is known), which
//! are gone (deleted, reported not found), what their fields hold (returned by reads and
//! listings), and what successful changes *set* (an update's arguments that name fields, a
//! cancel that moves a status). [`ImpliedState`] keeps those facts, each with the step that
//! established it, so a later answer that contradicts one is a violation that names the step
//! it conflicts with.
//!
//! What a change does to fields ([`Writes`]) comes from the best source there is, always said:
//! learned from the package's executed walks ([`learn_writes`]: which argument names the
//! changed resource, which fields take an argument's value or a fixed value, which fields a
//! call always moves, whether anything else changes, and the field values or argument sizes
//! under which the tool always failed), else from the manifest's or OpenAPI description's
//! effects (the argument naming the resource), else from names ([`Writes::guess`]: arguments
//! named like fields set them; a `cancel_`/`close_`/… verb moves the status).

use super::{resources, AuditTrajectory, EffectSource, ResourceKey, MIN_EVIDENCE};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// A resource of a transcript: its type (a noun: `ticket`, `student/*/course`) and its id.
pub type Key = (String, String);

/// The failures a guard would explain: the resources they named and what they said.
#[derive(Default)]
struct Failures {
    /// Each failure: the resource it named and its answer's [`gist`].
    each: Vec<(String, String)>,
    /// One of them was given the value as an argument.
    echoed: bool,
}

impl Failures {
    fn note(&mut self, target: &str, observation: &Value) {
        self.each.push((target.to_owned(), gist(observation)));
    }

    /// What they said, each once.
    fn reasons(&self) -> BTreeSet<&str> {
        self.each
            .iter()
            .map(|(_, reason)| reason.as_str())
            .collect()
    }

    /// Those whose answers said none of `elsewhere`.
    fn saying_none_of(&self, elsewhere: &BTreeSet<&str>) -> Failures {
        Failures {
            each: (self.each.iter())
                .filter(|(_, reason)| !elsewhere.contains(reason.as_str()))
                .cloned()
                .collect(),
            echoed: self.echoed,
        }
    }

    /// Whether they could share one cause: on at least [`MIN_GUARD_TARGETS`] resources (walks
    /// that keep returning to one record meet its own cause of failure again and again), and
    /// saying one thing (a precondition refuses in one message, while failures that only
    /// happened together — a reading outside the sensor's range, an unknown zone — say
    /// different things).
    fn alike(&self) -> bool {
        let targets: BTreeSet<&str> = self.each.iter().map(|(t, _)| t.as_str()).collect();
        targets.len() >= MIN_GUARD_TARGETS && self.reasons().len() == 1
    }
}

/// An answer without what varies between calls that fail for one reason: every word with a
/// digit in it (ids, amounts, dates) is `#`.
fn gist(observation: &Value) -> String {
    let text = match observation {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let word_char = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.');
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if word_char(c) {
            word.push(c);
            continue;
        }
        if word.chars().any(|w| w.is_ascii_digit()) {
            out.push('#');
        } else {
            out.push_str(&word);
        }
        word.clear();
        out.push(c);
    }
    out.pop();
    out
}

/// How unlikely the failures a guard explains must be by chance alone.
const GUARD_CHANCE: f64 = 0.05;

/// Whether `failures` in a row, none succeeding, are beyond chance for a tool that succeeds
/// `ok` of `ok + failed` times otherwise: a tool that fails half its calls for reasons of its
/// own (a reading outside a sensor's range) fails three in a row one time in eight, which
/// teaches nothing about the field they shared.
fn beyond_chance(failures: usize, ok: usize, failed: usize) -> bool {
    let success = ok as f64 / (ok + failed).max(1) as f64;
    (1.0 - success).powi(failures as i32) < GUARD_CHANCE
}

/// How many failures that name the value they refused under make a guard
/// ([`names_value`]).
const MIN_QUOTED: usize = 2;

/// Whether a failure's reason names a field's value as a word of its own (`Order # is filled`
/// names `filled`), a value of three characters or more.
fn names_value(reason: &str, value: &Value) -> bool {
    let Value::String(value) = value else {
        return false;
    };
    if value.chars().count() < 3 {
        return false;
    }
    let value = value.to_lowercase();
    reason
        .to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .any(|word| word == value)
}

/// How many distinct resources a guard's failures must have named.
const MIN_GUARD_TARGETS: usize = 2;

/// A precondition of a tool, learned from executed walks: a state of its target under which
/// it always failed.
#[derive(Clone, Debug, PartialEq)]
pub enum Guard {
    /// It fails while the target's field holds this value (cancelling what is cancelled).
    FieldIs {
        /// The field of the target.
        field: String,
        /// The value under which every call failed.
        value: Value,
    },
    /// It fails when the argument's number exceeds the target's field (a withdrawal above
    /// the balance).
    ExceedsField {
        /// The numeric argument.
        argument: String,
        /// The numeric field of the target.
        field: String,
    },
}

/// What a successful call does to the fields of the resource it names.
#[derive(Clone, Debug, PartialEq)]
pub struct Writes {
    /// The argument that names the resource it changes, when one always does.
    pub target: Option<String>,
    /// The collection of the resource it changes (`carts`, where the same id also keys a
    /// customer), learned with the target.
    pub target_collection: Option<String>,
    /// Fields set to the value of an argument (field → argument).
    pub from_arguments: BTreeMap<String, String>,
    /// Fields set to a fixed value (`status` → `"cancelled"`).
    pub constants: BTreeMap<String, Value>,
    /// Fields every successful call moves to a value not known in advance (away from the
    /// one they held).
    pub moves: BTreeSet<String>,
    /// Other records its arguments name whose fields every success that named one moved
    /// (argument → the records' collection and those fields): `checkout(copy_id, member_id)`
    /// changes the copy, and the member's `active_loans` each time.
    pub side_moves: BTreeMap<String, (String, BTreeSet<String>)>,
    /// Nothing but the target changes, so what is known of other resources still holds.
    pub only_target: bool,
    /// States of the target under which it always failed.
    pub guards: Vec<Guard>,
    /// Fields its answers report with another value than the one it stores (an order
    /// answered `Pending` and stored `Open`): what its answer says of them is no fact.
    pub reported_differs: BTreeSet<String>,
    /// How many of its successes changed the state in the walks it was learned from.
    pub changes_seen: usize,
    /// Per field it sets (from an argument or to a constant), how many successes showed it.
    pub write_evidence: BTreeMap<String, usize>,
    /// Every field of its target any of its successes changed, rule or not: what its answer
    /// may show otherwise than known before.
    pub touches: BTreeSet<String>,
    /// A listing's arguments: the field of the listed records each selects on (argument →
    /// field; [`super::argument_fields`]).
    pub filters: BTreeMap<String, String>,
    /// A creation's arguments: the field of the created record each is stored in (field →
    /// argument).
    pub created_from: BTreeMap<String, String>,
    /// Where this came from.
    pub source: EffectSource,
}

impl Default for Writes {
    fn default() -> Self {
        Writes {
            target: None,
            target_collection: None,
            from_arguments: BTreeMap::new(),
            constants: BTreeMap::new(),
            moves: BTreeSet::new(),
            side_moves: BTreeMap::new(),
            only_target: false,
            guards: Vec::new(),
            reported_differs: BTreeSet::new(),
            changes_seen: 0,
            write_evidence: BTreeMap::new(),
            touches: BTreeSet::new(),
            filters: BTreeMap::new(),
            created_from: BTreeMap::new(),
            source: EffectSource::Guessed,
        }
    }
}

/// First words of tools that move a resource's status (`cancel_reservation`).
const STATUS_VERBS: &[&str] = &[
    "cancel",
    "close",
    "suspend",
    "archive",
    "approve",
    "reject",
    "complete",
    "resolve",
    "reopen",
    "confirm",
    "activate",
    "deactivate",
    "lock",
    "unlock",
    "block",
    "unblock",
    "enable",
    "disable",
    "publish",
    "unpublish",
    "ship",
    "deliver",
    "pay",
    "refund",
    "return",
    "escalate",
    "start",
    "stop",
    "pause",
    "resume",
    "finish",
    "void",
    "expire",
    "restore",
    "mark",
    "checkin",
    "checkout",
    "fulfill",
    "dispatch",
    "decline",
    "accept",
    "revoke",
    "terminate",
    "freeze",
    "unfreeze",
    "release",
    "hold",
];

/// Whether a field name reads as a status (`status`, `state`, `order_status`).
pub fn is_status_field(field: &str) -> bool {
    let f = field.to_lowercase();
    f == "status" || f == "state" || f.ends_with("_status") || f.ends_with("_state")
}

impl Writes {
    /// The guess from a tool's name: a status verb (`cancel_`, `close_`, …) moves the status
    /// of what it names. Arguments named like fields are matched when the call is read
    /// ([`Writes::fields_set`]).
    pub fn guess(tool: &str) -> Writes {
        let first = super::observed::words(tool)
            .into_iter()
            .next()
            .unwrap_or_default();
        let mut writes = Writes::default();
        if STATUS_VERBS.contains(&first.as_str()) {
            writes.moves.insert("status".to_owned());
        }
        writes
    }

    /// The fields a successful call with `arguments` sets, and to what: the learned or
    /// declared ones; for guessed writes, every argument (not the target's id) whose name is
    /// a field `known` of the target (`body` → `body`, `new_status` → `status`).
    pub fn fields_set(
        &self,
        arguments: &Map<String, Value>,
        known: Option<&BTreeMap<String, Fact>>,
        target_argument: Option<&str>,
    ) -> BTreeMap<String, Value> {
        let mut out: BTreeMap<String, Value> = self
            .constants
            .iter()
            .map(|(f, v)| (f.clone(), v.clone()))
            .collect();
        for (field, argument) in &self.from_arguments {
            if let Some(v) = arguments.get(argument).filter(|v| is_scalar(v)) {
                out.insert(field.clone(), v.clone());
            }
        }
        if self.source == EffectSource::Observed {
            return out;
        }
        let Some(known) = known else { return out };
        for (argument, value) in arguments {
            if Some(argument.as_str()) == target_argument || !is_scalar(value) {
                continue;
            }
            let field = argument
                .strip_prefix("new_")
                .or_else(|| argument.strip_suffix("_value"))
                .unwrap_or(argument);
            if known.contains_key(field) && !out.contains_key(field) {
                out.insert(field.to_owned(), value.clone());
            }
        }
        out
    }
}

/// Equal values, numbers by their value (`5` and `5.0`).
pub(crate) fn same(a: &Value, b: &Value) -> bool {
    a == b
        || matches!((a.as_f64(), b.as_f64()), (Some(x), Some(y)) if a.is_number() && b.is_number() && x == y)
}

fn is_scalar(value: &Value) -> bool {
    !(value.is_object() || value.is_array())
}

/// An id value as text: a string or an integer.
pub(crate) fn id_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.is_empty() && s.len() <= 128 => Some(s.clone()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// Every id-like text of a value at any depth (strings and whole numbers, as [`id_text`]
/// reads them); with `keys`, the keys of its objects too (records keyed by id).
pub(crate) fn id_texts(value: &Value, keys: bool, out: &mut HashSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                if keys {
                    out.insert(key.clone());
                }
                id_texts(v, keys, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| id_texts(v, keys, out)),
        other => {
            if let Some(id) = id_text(other) {
                out.insert(id);
            }
        }
    }
}

/// The argument of a call naming a top-level resource of `state`, with that resource: an
/// id-named argument first (`ticket_id`), else any argument whose value is a resource's id.
fn named_resource(
    arguments: &Map<String, Value>,
    state: &BTreeMap<ResourceKey, &Value>,
    changes: &BTreeMap<ResourceKey, super::ResourceChange>,
) -> Option<(String, ResourceKey)> {
    let find = |want_id_name: bool| {
        arguments.iter().find_map(|(name, value)| {
            let noun = super::observed::id_noun(name);
            if want_id_name && noun.is_none() {
                return None;
            }
            let id = id_text(value)?;
            // The same id may key resources of several collections (a customer and their
            // cart): the one the call changed, else the one the argument's noun names, else
            // the first.
            let candidates = keyed(state, &id);
            let by_noun = |k: &&&ResourceKey| of_noun(k, noun.as_deref());
            let chosen = candidates
                .iter()
                .find(|k| changes.contains_key(**k))
                .or_else(|| candidates.iter().find(by_noun))
                .or(candidates.first())?;
            Some((name.clone(), (*chosen).clone()))
        })
    };
    find(true).or_else(|| find(false))
}

/// The top-level records of `state` keyed `id`, in any collection.
fn keyed<'s>(state: &'s BTreeMap<ResourceKey, &Value>, id: &str) -> Vec<&'s ResourceKey> {
    (state.keys())
        .filter(|k| !k.0.contains('*') && k.1 == id)
        .collect()
}

/// Whether `key`'s collection holds records of the type `noun` names (none when it is empty).
fn of_noun(key: &ResourceKey, noun: Option<&str>) -> bool {
    noun.is_some_and(|n| !n.is_empty() && super::observed::singular(&key.0) == n)
}

/// Every argument of a call naming exactly one top-level record of `state` (by its id, the
/// argument's noun choosing among collections that share it), with that record.
fn named_records(
    arguments: &Map<String, Value>,
    state: &BTreeMap<ResourceKey, &Value>,
) -> Vec<(String, ResourceKey)> {
    arguments
        .iter()
        .filter_map(|(name, value)| {
            let id = id_text(value)?;
            let candidates = keyed(state, &id);
            let noun = super::observed::id_noun(name);
            let chosen = match candidates.as_slice() {
                [one] => *one,
                many => {
                    let mut by_noun = many.iter().filter(|k| of_noun(k, noun.as_deref()));
                    match (by_noun.next(), by_noun.next()) {
                        (Some(one), None) => *one,
                        _ => return None,
                    }
                }
            };
            Some((name.clone(), chosen.clone()))
        })
        .collect()
}

/// Changes a tool must have made before a change elsewhere is flagged as a spurious write
/// (another resource than the one it names): side effects that happen under
/// some conditions only are rare, so flagging needs more evidence than keeping what is known
/// of other resources across the change does (two changes).
pub const ONLY_TARGET_EVIDENCE: usize = 5;

/// The most distinct values a field may hold to be a guard's field (a status, not a name).
const MAX_GUARD_VALUES: usize = 6;

/// Learns each tool's field-level writes and guards from executed trajectories (consistent by
/// construction: the executor's ground truth).
pub fn learn_writes(trajectories: &[AuditTrajectory]) -> BTreeMap<String, Writes> {
    #[derive(Default)]
    struct FieldSeen {
        times: usize,
        values: BTreeSet<String>,
        last: Value,
        /// The ids of the records it changed the field of.
        targets: BTreeSet<String>,
        /// The values it changed the field from (as JSON).
        before: BTreeSet<String>,
        from_argument: BTreeMap<String, usize>,
    }
    #[derive(Default)]
    struct Seen {
        successes: usize,
        changed: usize,
        target_votes: BTreeMap<String, usize>,
        target_collections: BTreeMap<String, usize>,
        off_target: bool,
        fields: BTreeMap<String, FieldSeen>,
        /// (field, value as JSON) → (successes, failures, the value).
        by_value: BTreeMap<(String, String), (usize, usize, Value)>,
        /// (field, value as JSON) → the failures on it.
        failed: BTreeMap<(String, String), Failures>,
        /// (argument, field) → (successes over, failures over, successes within, failures
        /// within).
        exceeds: BTreeMap<(String, String), (usize, usize, usize, usize)>,
        /// (argument, field) → the failures over.
        exceeded: BTreeMap<(String, String), Failures>,
        /// Fields its answers reported with another value than the one stored.
        reported_differs: BTreeSet<String>,
        /// Every success whose arguments name a resource: its arguments, the naming
        /// argument, and that resource before and after (what a claimed write is held to).
        named_successes: Vec<(Map<String, Value>, String, Value, Value)>,
        /// Per argument: the other records it named in successes ([`SideSeen`]).
        side: BTreeMap<String, SideSeen>,
    }
    /// What the successes did to the records one argument named.
    #[derive(Default)]
    struct SideSeen {
        /// Successes that named a record with it, one that still exists after.
        named: usize,
        /// Those records' collections, with how many of them.
        collections: BTreeMap<String, usize>,
        /// Per scalar field: how many of them it changed.
        changed: BTreeMap<String, usize>,
    }
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    for t in trajectories {
        let mut before_state = &t.initial_state;
        for step in &t.steps {
            let after_state = &step.state_after;
            let s = seen.entry(step.tool.clone()).or_default();
            let ok = match step.success {
                Some(ok) => ok,
                None => {
                    before_state = after_state;
                    continue;
                }
            };
            let changed = before_state != after_state;
            let before = resources(before_state);
            let changes = if changed && ok {
                super::resource_changes(before_state, after_state)
            } else {
                BTreeMap::new()
            };
            let named = named_resource(&step.arguments, &before, &changes);
            // Preconditions: the target's fields and the call's numbers, by outcome.
            if let Some((_, key)) = &named {
                if let Some(Value::Object(fields)) = before.get(key) {
                    for (field, value) in fields {
                        let usable = match value {
                            Value::String(s) => s.len() <= 40,
                            Value::Bool(_) => true,
                            _ => false,
                        };
                        if usable {
                            let slot = s
                                .by_value
                                .entry((field.clone(), value.to_string()))
                                .or_insert((0, 0, value.clone()));
                            if ok {
                                slot.0 += 1;
                            } else {
                                slot.1 += 1;
                                let failures = s
                                    .failed
                                    .entry((field.clone(), value.to_string()))
                                    .or_default();
                                failures.note(&key.1, &step.observation);
                                // Refused for an argument equal to what the record holds
                                // (`change_plan` to the plan it is on), not for the value.
                                failures.echoed |= step.arguments.values().any(|a| a == value);
                            }
                        }
                    }
                    for (argument, a) in &step.arguments {
                        let Some(a) = a.as_f64() else { continue };
                        for (field, f) in fields {
                            let Some(f) = f.as_f64().filter(|_| f.is_number()) else {
                                continue;
                            };
                            let slot = s
                                .exceeds
                                .entry((argument.clone(), field.clone()))
                                .or_default();
                            match (a > f, ok) {
                                (true, true) => slot.0 += 1,
                                (true, false) => {
                                    slot.1 += 1;
                                    s.exceeded
                                        .entry((argument.clone(), field.clone()))
                                        .or_default()
                                        .note(&key.1, &step.observation);
                                }
                                (false, true) => slot.2 += 1,
                                (false, false) => slot.3 += 1,
                            }
                        }
                    }
                }
            }
            if !ok {
                before_state = after_state;
                continue;
            }
            s.successes += 1;
            // The records after it, read once (the same as before when nothing changed).
            let after_changed;
            let after = if changed {
                after_changed = resources(after_state);
                &after_changed
            } else {
                &before
            };
            for (argument, key) in named_records(&step.arguments, &before) {
                let (Some(Value::Object(old)), Some(Value::Object(new))) =
                    (before.get(&key), after.get(&key))
                else {
                    continue;
                };
                let side = s.side.entry(argument).or_default();
                side.named += 1;
                *side.collections.entry(key.0.clone()).or_default() += 1;
                for (field, value) in new {
                    if is_scalar(value) && old.get(field) != Some(value) {
                        *side.changed.entry(field.clone()).or_default() += 1;
                    }
                }
            }
            if let Some((argument, key)) = &named {
                if let (Some(b), Some(a)) = (before.get(key), after.get(key)) {
                    s.named_successes.push((
                        step.arguments.clone(),
                        argument.clone(),
                        (*b).clone(),
                        (*a).clone(),
                    ));
                }
            }
            if changed {
                s.changed += 1;
                let target = named.as_ref().map(|(_, k)| k);
                let target_updated = target.is_some_and(|k| changes.contains_key(k));
                // What the answer reports of the resource it made or changed, against what
                // was stored.
                let created: Vec<&ResourceKey> = changes
                    .iter()
                    .filter(|(k, c)| **c == super::ResourceChange::Created && !k.0.contains('*'))
                    .map(|(k, _)| k)
                    .collect();
                let reported = match (created.as_slice(), target) {
                    ([one], _) => Some(*one),
                    ([], Some(key)) if target_updated => Some(key),
                    _ => None,
                };
                if let (Some(key), Some(answer)) =
                    (reported, super::observed::unwrapped(&step.observation))
                {
                    if let Some(Value::Object(stored)) = after.get(key) {
                        for (field, value) in answer {
                            if is_scalar(value)
                                && stored
                                    .get(field)
                                    .is_some_and(|v| is_scalar(v) && v != value)
                            {
                                s.reported_differs.insert(field.clone());
                            }
                        }
                    }
                }
                for (key, change) in &changes {
                    let on_target = Some(key) == target
                        || (key.0.contains('*') && target_updated)
                        || (*change == super::ResourceChange::Deleted && Some(key) == target);
                    s.off_target |= !on_target;
                }
                if let (Some((argument, key)), true) = (&named, target_updated) {
                    *s.target_votes.entry(argument.clone()).or_default() += 1;
                    *s.target_collections.entry(key.0.clone()).or_default() += 1;
                    if let (Some(Value::Object(old)), Some(Value::Object(new))) =
                        (before.get(key), after.get(key))
                    {
                        for (field, value) in new {
                            if !is_scalar(value) || old.get(field) == Some(value) {
                                continue;
                            }
                            let f = s.fields.entry(field.clone()).or_default();
                            f.times += 1;
                            f.values.insert(value.to_string());
                            f.targets.insert(key.1.clone());
                            f.before
                                .insert(old.get(field).unwrap_or(&Value::Null).to_string());
                            f.last = value.clone();
                            for (name, given) in &step.arguments {
                                if name != argument && same(given, value) {
                                    *f.from_argument.entry(name.clone()).or_default() += 1;
                                }
                            }
                        }
                    }
                }
            }
            before_state = after_state;
        }
    }
    let mut argument_fields = super::argument_fields::learn(trajectories);
    seen.into_iter()
        .map(|(tool, s)| {
            let fields = argument_fields.remove(&tool).unwrap_or_default();
            let mut writes = Writes {
                source: EffectSource::Observed,
                filters: fields.filters,
                created_from: fields.created_from,
                ..Writes::default()
            };
            let target = s
                .target_votes
                .iter()
                .find(|(_, n)| **n == s.changed && s.changed > 0)
                .map(|(a, _)| a.clone());
            writes.target_collection = s
                .target_collections
                .iter()
                .max_by_key(|(_, n)| **n)
                .map(|(c, _)| c.clone())
                .filter(|_| target.is_some());
            writes.only_target = target.is_some() && !s.off_target && s.changed >= 2;
            writes.changes_seen = s.changed;
            writes.reported_differs = s.reported_differs;
            writes.touches = s.fields.keys().cloned().collect();
            writes.side_moves = s
                .side
                .iter()
                .filter(|(argument, _)| Some(*argument) != target.as_ref())
                .filter(|(_, side)| side.named >= MIN_EVIDENCE && side.collections.len() == 1)
                .filter_map(|(argument, side)| {
                    let fields: BTreeSet<String> = (side.changed.iter())
                        .filter(|(_, n)| **n == side.named)
                        .map(|(f, _)| f.clone())
                        .collect();
                    let collection = side.collections.keys().next()?;
                    (!fields.is_empty()).then(|| (argument.clone(), (collection.clone(), fields)))
                })
                .collect();
            writes.target = target;
            if writes.target.is_some() {
                for (field, f) in &s.fields {
                    let related = |argument: &str| {
                        argument == field
                            || argument.ends_with(field.as_str())
                            || field.ends_with(argument)
                    };
                    if let Some((argument, _)) = f
                        .from_argument
                        .iter()
                        .find(|(a, n)| **n == f.times && (f.times >= 2 || related(a)))
                    {
                        writes
                            .from_arguments
                            .insert(field.clone(), argument.clone());
                    } else if f.values.len() == 1
                        && f.times >= 2
                        && f.targets.len() >= 2
                        && (!f.last.is_number() || f.before.len() >= 2)
                    {
                        // Seen on two records at least: one record bought twice from the
                        // same state shows its price, not a constant; and a number from two
                        // values at least: a count moved from 0 to 1 each time may be one
                        // more than it was.
                        writes.constants.insert(field.clone(), f.last.clone());
                    } else if f.times == s.changed && f.times >= 2 {
                        writes.moves.insert(field.clone());
                    }
                }
                // A claim holds for every success that named its target, not only for those
                // that changed the field: a write an argument's value does not always make, a
                // constant not always set, a field not always moved is no rule.
                let target = writes.target.clone().unwrap_or_default();
                for (arguments, argument, before, after) in &s.named_successes {
                    if *argument != target {
                        continue;
                    }
                    writes.from_arguments.retain(|field, from| {
                        arguments.get(from).is_none_or(|given| {
                            !is_scalar(given) || after.get(field).is_some_and(|v| same(v, given))
                        })
                    });
                    writes
                        .constants
                        .retain(|field, value| after.get(field).is_some_and(|v| same(v, value)));
                    writes
                        .moves
                        .retain(|field| before.get(field) != after.get(field));
                }
                writes.write_evidence = writes
                    .from_arguments
                    .keys()
                    .chain(writes.constants.keys())
                    .filter_map(|f| Some((f.clone(), s.fields.get(f)?.times)))
                    .collect();
            }
            // A guard explains failures: the tool fails on that value every time, and mostly
            // succeeds on the field's other values (a tool that mostly fails for another
            // reason, an unauthenticated caller say, teaches nothing about the field). Fields
            // of many values name things rather than states.
            // A failure that says what a failure under another value of the field says too,
            // where the tool also succeeds under one of them, has a cause of its own (a reason
            // outside the allowed ones, refused whatever the line's status): it counts under
            // no value.
            let mut said_under: BTreeMap<(&str, &str), (usize, bool)> = BTreeMap::new();
            for (k, failures) in &s.failed {
                let succeeds = s.by_value.get(k).is_some_and(|v| v.0 > 0);
                for reason in failures.reasons() {
                    let slot = said_under.entry((&k.0, reason)).or_default();
                    slot.0 += 1;
                    slot.1 |= succeeds;
                }
            }
            let own_failures: BTreeMap<&(String, String), Failures> = (s.failed.iter())
                .map(|(k, failures)| {
                    let elsewhere: BTreeSet<&str> = (said_under.iter())
                        .filter(|((field, _), (values, succeeds))| {
                            *field == k.0 && *values >= 2 && *succeeds
                        })
                        .map(|((_, reason), _)| *reason)
                        .collect();
                    (k, failures.saying_none_of(&elsewhere))
                })
                .collect();
            let mut per_field: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
            for (k, (ok, _, _)) in &s.by_value {
                let slot = per_field.entry(k.0.as_str()).or_default();
                slot.0 += ok;
                slot.1 += own_failures.get(k).map_or(0, |f| f.each.len());
                slot.2 += 1;
            }
            // And its failures are alike (`Failures::alike`) and beyond chance.
            for (k, (ok, _, value)) in &s.by_value {
                let field = &k.0;
                let failures = own_failures.get(k);
                let fail = failures.map_or(0, |f| f.each.len());
                let (all_ok, all_fail, values) = per_field[field.as_str()];
                let (other_ok, other_fail) = (all_ok - ok, all_fail - fail);
                let explains = other_ok >= MIN_EVIDENCE
                    && other_ok >= other_fail
                    && values <= MAX_GUARD_VALUES
                    && failures.is_some_and(Failures::alike)
                    && beyond_chance(fail, other_ok, other_fail);
                // Or they say so themselves: every one gives one reason, which names the status
                // (`Order # is filled`, `Hold # is purchased`), and the tool succeeds under
                // other values: twice is enough, on one record or more.
                // A status only: `agent # does not work queue general` names the queue, and
                // is about the agent.
                let say_so = other_ok >= MIN_EVIDENCE
                    && values <= MAX_GUARD_VALUES
                    && is_status_field(field)
                    && failures.is_some_and(|f| {
                        !f.echoed
                            && f.reasons().len() == 1
                            && f.reasons().iter().all(|r| names_value(r, value))
                    });
                if *ok == 0
                    && ((fail >= MIN_EVIDENCE && explains) || (fail >= MIN_QUOTED && say_so))
                {
                    writes.guards.push(Guard::FieldIs {
                        field: field.clone(),
                        value: value.clone(),
                    });
                }
            }
            for (k, (over_ok, over_fail, within_ok, within_fail)) in &s.exceeds {
                let (argument, field) = k;
                if *over_ok == 0
                    && *over_fail >= 2
                    && *within_ok >= 1
                    && s.exceeded.get(k).is_some_and(Failures::alike)
                    && beyond_chance(*over_fail, *within_ok, *within_fail)
                {
                    writes.guards.push(Guard::ExceedsField {
                        argument: argument.clone(),
                        field: field.clone(),
                    });
                }
            }
            (tool, writes)
        })
        .collect()
}

/// Where a field's known value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FactSource {
    /// The initial state (known from the package and the record's state name).
    Initial,
    /// Returned by the answer of this step.
    Returned(usize),
    /// Set by the successful change of this step.
    Set(usize),
}

impl FactSource {
    /// The step, when a step established it.
    pub fn step(self) -> Option<usize> {
        match self {
            FactSource::Initial => None,
            FactSource::Returned(k) | FactSource::Set(k) => Some(k),
        }
    }
}

/// A field's known value.
#[derive(Clone, Debug, PartialEq)]
pub struct Fact {
    /// The value.
    pub value: Value,
    /// Where it came from.
    pub source: FactSource,
}

/// Whether a resource exists, as far as the transcript says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existence {
    /// Known to exist since this step (`None`: the initial state).
    Exists(Option<usize>),
    /// Deleted at this step.
    Gone(usize),
    /// Reported not found at this step.
    Missing(usize),
}

/// What made the ids of a type known complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompleteSource {
    /// The complete (unfiltered) listing of this step.
    Listing(usize),
    /// The trajectory's initial state.
    Initial,
    /// Every initial state of the package (this many), the trajectory naming none.
    AnyInitial(usize),
}

impl CompleteSource {
    /// The step, when a step's listing made them known.
    pub fn step(self) -> Option<usize> {
        match self {
            CompleteSource::Listing(j) => Some(j),
            CompleteSource::Initial | CompleteSource::AnyInitial(_) => None,
        }
    }

    /// The clause an explanation says of an id it did not hold (`which the initial state did
    /// not hold`).
    pub fn not_held(self) -> String {
        match self {
            CompleteSource::Listing(j) => {
                format!("which the complete listing of step {j} did not hold")
            }
            CompleteSource::Initial => "which the initial state did not hold".to_owned(),
            CompleteSource::AnyInitial(1) => {
                "which the package's initial state does not hold".to_owned()
            }
            CompleteSource::AnyInitial(n) => {
                format!("which none of the package's {n} initial states holds")
            }
        }
    }
}

/// A value a change replaced: what a field held before a successful change moved it.
#[derive(Clone, Debug, PartialEq)]
pub struct Replaced {
    /// The value before.
    pub value: Value,
    /// The change.
    pub step: usize,
    /// The field is a status the change moved (a read showing the old value again is a
    /// reverted status, not only a stale value).
    pub status: bool,
}

/// The state a transcript implies, up to a step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImpliedState {
    /// Whether each resource exists.
    pub existence: HashMap<Key, Existence>,
    /// Field values known of each resource.
    pub fields: HashMap<Key, BTreeMap<String, Fact>>,
    /// Values successful changes replaced, per resource and field, until something moves
    /// the field again.
    pub replaced: HashMap<Key, BTreeMap<String, Replaced>>,
    /// Per type: the ids a complete listing (or the initial state) held, and what made them
    /// known; creates add to it, deletes take from it.
    pub complete: HashMap<String, (CompleteSource, BTreeSet<String>)>,
    /// The last successful change not pinned to one resource.
    pub last_untargeted_change: Option<usize>,
    /// Per type, the last step that deleted one of its resources.
    pub last_delete: HashMap<String, usize>,
    /// The scalar fields each resource created in the trajectory was created with (what a
    /// listing's filters select it by, when nothing changed it since).
    pub created_with: HashMap<Key, BTreeMap<String, Value>>,
    /// Nouns the initial states use for one of their collections (`seller` → `user`, where
    /// every `seller_id` a record holds is a user's id): an argument `seller_id` names a user.
    pub aliases: HashMap<String, String>,
    /// Fields not named like ids whose values, in the initial states, are all keys of one
    /// collection (`symbol` → `instrument`, `category` → `category`): an argument of that
    /// name names a record of it.
    pub keyed_by: HashMap<String, String>,
}

/// The top-level resources of a state, each keyed by the singular noun of its collection
/// (`tickets` → `ticket`), as the calls name them, and its id.
fn typed_resources(state: &Value) -> impl Iterator<Item = (Key, &Value)> {
    resources(state)
        .into_iter()
        .filter(|((collection, _), _)| !collection.contains('*'))
        .map(|((collection, id), value)| ((super::observed::singular(&collection), id), value))
}

/// Nouns the states' records use for one of their collections: a `<noun>_id` field whose
/// values, two or more distinct ones, are all ids of exactly one collection, and whose noun is
/// no collection's own (`seller_id` on listings holding users' ids: `seller` → `user`).
fn reference_aliases(
    states: &[&Value],
    complete: &HashMap<String, (CompleteSource, BTreeSet<String>)>,
) -> HashMap<String, String> {
    let mut values: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for state in states {
        for (_, record) in typed_resources(state) {
            let Value::Object(record) = record else {
                continue;
            };
            for (field, value) in record {
                let Some(noun) = super::nouns::id_noun(field).filter(|n| !n.is_empty()) else {
                    continue;
                };
                if complete.contains_key(&noun) {
                    continue;
                }
                if let Some(id) = id_text(value) {
                    values.entry(noun).or_default().insert(id);
                }
            }
        }
    }
    only_holders(values, 2, complete)
}

/// Per name, the one collection whose ids hold all its values (at least `least` distinct
/// ones), or of several that do, the one of its own name; names whose values no collection
/// holds, or several others, are left out.
fn only_holders(
    values: BTreeMap<String, BTreeSet<String>>,
    least: usize,
    complete: &HashMap<String, (CompleteSource, BTreeSet<String>)>,
) -> HashMap<String, String> {
    values
        .into_iter()
        .filter(|(_, ids)| ids.len() >= least)
        .filter_map(|(name, ids)| {
            let holding: Vec<&String> = complete
                .iter()
                .filter(|(_, (_, known))| ids.is_subset(known))
                .map(|(collection, _)| collection)
                .collect();
            // Of several keyed alike (`domains` and their `zones`), the one the name names.
            let chosen = match holding.as_slice() {
                [one] => Some(*one),
                many => many
                    .iter()
                    .find(|collection| **collection == &name)
                    .copied(),
            };
            chosen.map(|one| (name.clone(), one.clone()))
        })
        .collect()
}

/// Fields not named like ids whose text values, three distinct ones or more, are all keys of
/// exactly one collection (`"symbol": "ORCV"` on orders, where instruments are keyed by
/// symbol): [`ImpliedState::keyed_by`].
fn key_fields(
    states: &[&Value],
    complete: &HashMap<String, (CompleteSource, BTreeSet<String>)>,
) -> HashMap<String, String> {
    let mut values: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut other: BTreeSet<String> = BTreeSet::new();
    for state in states {
        for (_, record) in typed_resources(state) {
            let Value::Object(record) = record else {
                continue;
            };
            for (field, value) in record {
                if field == "id" || super::nouns::id_noun(field).is_some() {
                    continue;
                }
                match value {
                    Value::String(text) => {
                        values
                            .entry(field.clone())
                            .or_default()
                            .insert(text.clone());
                    }
                    Value::Null => {}
                    _ => {
                        other.insert(field.clone());
                    }
                }
            }
        }
    }
    values.retain(|field, _| !other.contains(field));
    only_holders(values, 3, complete)
}

impl ImpliedState {
    /// The state a known initial state implies: every top-level resource exists with its
    /// scalar fields, and each collection is a complete listing of its type. Collections are
    /// typed by their singular noun (`tickets` → `ticket`), as the calls name them.
    pub fn from_initial(state: &Value) -> ImpliedState {
        let mut out = ImpliedState::default();
        for (key, value) in typed_resources(state) {
            out.existence.insert(key.clone(), Existence::Exists(None));
            if let Value::Object(map) = value {
                let facts = out.fields.entry(key.clone()).or_default();
                for (field, v) in map {
                    if is_scalar(v) {
                        facts.insert(
                            field.clone(),
                            Fact {
                                value: v.clone(),
                                source: FactSource::Initial,
                            },
                        );
                    }
                }
            }
            out.complete
                .entry(key.0)
                .or_insert_with(|| (CompleteSource::Initial, BTreeSet::new()))
                .1
                .insert(key.1);
        }
        out.aliases = reference_aliases(&[state], &out.complete);
        out.keyed_by = key_fields(&[state], &out.complete);
        out
    }

    /// The complete listing of `noun`'s type, or of the collection it stands for
    /// ([`ImpliedState::aliases`]).
    pub fn complete_of(&self, noun: &str) -> Option<&(CompleteSource, BTreeSet<String>)> {
        self.complete.get(noun).or_else(|| {
            self.aliases
                .get(noun)
                .and_then(|collection| self.complete.get(collection))
        })
    }

    /// What a trajectory that names none of its package's initial `states` starts from: per
    /// type, the ids of every one of them — a record of that type in none of them, that
    /// nothing in the trajectory created, is a phantom. Nothing is known of fields or of which
    /// records exist.
    pub fn from_any_initial(states: &[&Value]) -> Self {
        let mut out = ImpliedState::default();
        let source = CompleteSource::AnyInitial(states.len());
        for state in states {
            for (key, _) in typed_resources(state) {
                out.complete
                    .entry(key.0)
                    .or_insert_with(|| (source, BTreeSet::new()))
                    .1
                    .insert(key.1);
            }
        }
        out.aliases = reference_aliases(states, &out.complete);
        out.keyed_by = key_fields(states, &out.complete);
        out
    }

    /// Forgets every field value (after a change of unknown reach); what changes replaced
    /// stays, since nothing moved those fields back.
    pub fn forget_fields(&mut self) {
        self.fields.clear();
    }

    /// Records that a successful change at `step` set `values` on `key`, and moved the fields
    /// `writes` moves away from what they held: the old values are kept as replaced.
    pub fn set_fields(
        &mut self,
        key: &Key,
        step: usize,
        values: BTreeMap<String, Value>,
        writes: &Writes,
        old: &BTreeMap<String, Fact>,
    ) {
        let replaced = self.replaced.entry(key.clone()).or_default();
        replaced.clear();
        for field in writes.moves.iter().chain(values.keys()) {
            if let Some(before) = old.get(field) {
                if values.get(field) != Some(&before.value) {
                    replaced.insert(
                        field.clone(),
                        Replaced {
                            value: before.value.clone(),
                            step,
                            status: writes.moves.contains(field)
                                || writes.constants.contains_key(field)
                                || is_status_field(field),
                        },
                    );
                }
            }
        }
        let facts = self.fields.entry(key.clone()).or_default();
        for field in &writes.moves {
            facts.remove(field);
        }
        for (field, value) in values {
            facts.insert(
                field,
                Fact {
                    value,
                    source: FactSource::Set(step),
                },
            );
        }
    }

    /// The same record known under another type the states use for it (`rx` for a
    /// prescription, [`ImpliedState::aliases`]): what a change does to `key` it does to these.
    pub fn twins(&self, key: &Key) -> Vec<Key> {
        let alike = |a: &str, b: &str| {
            self.aliases.get(a).is_some_and(|c| c == b)
                || self.aliases.get(b).is_some_and(|c| c == a)
        };
        self.fields
            .keys()
            .filter(|other| other.1 == key.1 && other.0 != key.0 && alike(&other.0, &key.0))
            .cloned()
            .collect()
    }

    /// Records that a successful change at `step` moved `fields` of `key`, a record it names
    /// besides its target, away from what they held (`old`): those values are kept as
    /// replaced, and the fields are no longer known.
    pub fn move_fields(
        &mut self,
        key: &Key,
        step: usize,
        fields: &BTreeSet<String>,
        old: &BTreeMap<String, Fact>,
    ) {
        let replaced = self.replaced.entry(key.clone()).or_default();
        for field in fields {
            match old.get(field) {
                Some(before) => {
                    replaced.insert(
                        field.clone(),
                        Replaced {
                            value: before.value.clone(),
                            step,
                            status: is_status_field(field),
                        },
                    );
                }
                None => {
                    replaced.remove(field);
                }
            }
        }
        if let Some(facts) = self.fields.get_mut(key) {
            for field in fields {
                facts.remove(field);
            }
        }
    }

    /// Whether the trajectory made or showed `key`'s id under another type: a draft created as
    /// `draft_id` is the message `open_message(message_id=…)` opens, so that id is no phantom.
    pub fn seen_as_another_type(&self, key: &Key) -> bool {
        self.existence
            .iter()
            .any(|(k, e)| k.1 == key.1 && k.0 != key.0 && matches!(e, Existence::Exists(Some(_))))
    }

    /// Whether `key` is expected in a listing of its type made with `arguments` at this point:
    /// it was created in this trajectory, every argument is a field of it — the field it was
    /// learned to select on (`filters`), else the field of its name — with the same known
    /// value, and nothing since its creation could have removed it (a delete of its type, a
    /// change of unknown reach). Returns the step it was created at.
    pub fn expected_in_listing(
        &self,
        key: &Key,
        arguments: &Map<String, Value>,
        filters: &BTreeMap<String, String>,
    ) -> Option<usize> {
        let Existence::Exists(Some(created)) = self.existence.get(key)? else {
            return None;
        };
        if self.last_untargeted_change.is_some_and(|c| c > *created)
            || self.last_delete.get(&key.0).is_some_and(|d| d >= created)
        {
            return None;
        }
        let facts = self.fields.get(key);
        let born = self.created_with.get(key);
        let known = |name: &str| {
            facts
                .and_then(|f| f.get(name))
                .map(|fact| &fact.value)
                .or_else(|| born.and_then(|b| b.get(name)))
        };
        let matches = arguments.iter().all(|(argument, value)| {
            // The field the argument was learned to select on where the record's value of it
            // is known, else the field it names.
            let held = filters
                .get(argument)
                .and_then(|field| known(field))
                .or_else(|| known(argument));
            held.is_some_and(|held| super::argument_fields::selects(held, value))
        });
        matches.then_some(*created)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditStep;
    use serde_json::json;
    use std::sync::Arc;

    fn step(tool: &str, args: Value, ok: bool, after: &Value) -> AuditStep {
        AuditStep {
            tool: tool.into(),
            arguments: args.as_object().cloned().unwrap(),
            observation: json!({"success": ok}),
            success: Some(ok),
            state_after: Arc::new(after.clone()),
        }
    }

    /// Notes updated and reservations cancelled, executed (consistent by construction).
    fn walks() -> Vec<AuditTrajectory> {
        let s0 = json!({
            "notes": {"N1": {"body": "milk", "owner": "u"}, "N2": {"body": "tea", "owner": "u"}},
            "reservations": {"R1": {"status": "confirmed", "seats": 2}, "R2": {"status": "confirmed", "seats": 1}, "R3": {"status": "confirmed", "seats": 1}},
            "accounts": {"A1": {"balance": 10}, "A2": {"balance": 5}}
        });
        let mut s1 = s0.clone();
        s1["notes"]["N1"]["body"] = json!("milk, eggs");
        let mut s2 = s1.clone();
        s2["notes"]["N2"]["body"] = json!("green tea");
        let mut s3 = s2.clone();
        s3["reservations"]["R1"]["status"] = json!("cancelled");
        let mut s4 = s3.clone();
        s4["reservations"]["R2"]["status"] = json!("cancelled");
        let s4_two = s4.clone();
        let mut s4b = s4.clone();
        s4b["reservations"]["R3"]["status"] = json!("cancelled");
        let s4 = s4b;
        let mut s5 = s4.clone();
        s5["accounts"]["A1"]["balance"] = json!(7);
        vec![AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0),
            steps: vec![
                step(
                    "update_note",
                    json!({"note_id": "N1", "body": "milk, eggs"}),
                    true,
                    &s1,
                ),
                step(
                    "update_note",
                    json!({"note_id": "N2", "body": "green tea"}),
                    true,
                    &s2,
                ),
                step(
                    "cancel_reservation",
                    json!({"reservation_id": "R1"}),
                    true,
                    &s3,
                ),
                step(
                    "cancel_reservation",
                    json!({"reservation_id": "R2"}),
                    true,
                    &s4_two,
                ),
                step(
                    "cancel_reservation",
                    json!({"reservation_id": "R3"}),
                    true,
                    &s4,
                ),
                step(
                    "cancel_reservation",
                    json!({"reservation_id": "R1"}),
                    false,
                    &s4,
                ),
                step(
                    "cancel_reservation",
                    json!({"reservation_id": "R2"}),
                    false,
                    &s4,
                ),
                step(
                    "cancel_reservation",
                    json!({"reservation_id": "R1"}),
                    false,
                    &s4,
                ),
                step(
                    "withdraw",
                    json!({"account_id": "A1", "amount": 3}),
                    true,
                    &s5,
                ),
                step(
                    "withdraw",
                    json!({"account_id": "A1", "amount": 50}),
                    false,
                    &s5,
                ),
                step(
                    "withdraw",
                    json!({"account_id": "A1", "amount": 8}),
                    false,
                    &s5,
                ),
                step(
                    "withdraw",
                    json!({"account_id": "A2", "amount": 20}),
                    false,
                    &s5,
                ),
            ],
        }]
    }

    #[test]
    fn a_guard_explains_failures_beyond_chance_only() {
        // A tool that fails half its other calls fails three in a row one time in eight.
        assert!(!beyond_chance(3, 5, 5));
        assert!(beyond_chance(5, 5, 5));
        // One that otherwise succeeds nine times in ten does so once in a thousand.
        assert!(beyond_chance(3, 9, 1));
        assert!(beyond_chance(2, 4, 0));
        assert!(!beyond_chance(1, 1, 1));
    }

    #[test]
    fn a_guard_explains_failures_that_give_one_reason() {
        assert_eq!(
            gist(&json!(
                "Error: reservation R-1042 is already cancelled (since 2024-05-01)"
            )),
            "Error: reservation # is already cancelled (since #)"
        );
        assert_eq!(
            gist(&json!({"error": "no such id 42"})),
            r#"{"error":"no such id #"}"#
        );
        // The same walks, where the failures on cancelled reservations said different things
        // (one of them about seats): what they shared was chance, not the status.
        let mut walks = walks();
        let failure = walks[0]
            .steps
            .iter_mut()
            .find(|s| s.tool == "cancel_reservation" && s.success == Some(false))
            .unwrap();
        failure.observation = json!({"success": false, "error": "too many seats"});
        let learned = learn_writes(&walks);
        assert_eq!(learned["cancel_reservation"].guards, []);
        assert_eq!(
            learn_writes(&self::walks())["cancel_reservation"]
                .guards
                .len(),
            1
        );
    }

    /// A step of `tool` with `args`, answering `observation`, leaving `after`.
    fn said(tool: &str, args: Value, ok: bool, observation: &str, after: &Value) -> AuditStep {
        AuditStep {
            observation: json!({"success": ok, "message": observation}),
            ..step(tool, args, ok, after)
        }
    }

    #[test]
    fn failures_that_name_the_value_teach_a_guard_twice() {
        // Three lines suspended; suspending L1 and L2 again is refused in words that name the
        // status. A reason outside the allowed ones is refused under both statuses, and the
        // tool succeeds while active: that refusal says nothing of the status.
        let s0 = json!({"lines": {"L1": {"status": "active"}, "L2": {"status": "active"},
                                  "L3": {"status": "active"}, "L4": {"status": "active"}}});
        let mut s = vec![s0.clone()];
        for id in ["L1", "L2", "L3"] {
            let mut next = s.last().unwrap().clone();
            next["lines"][id]["status"] = json!("suspended");
            s.push(next);
        }
        let suspend = |id: &str, reason: &str| json!({"line_id": id, "reason": reason});
        let bad_reason = "reason must be one of fraud, lost";
        let mut steps = vec![
            said(
                "suspend_line",
                suspend("L1", "fraud"),
                true,
                "L1 suspended",
                &s[1],
            ),
            said(
                "suspend_line",
                suspend("L2", "fraud"),
                true,
                "L2 suspended",
                &s[2],
            ),
            said(
                "suspend_line",
                suspend("L3", "lost"),
                true,
                "L3 suspended",
                &s[3],
            ),
            said("suspend_line", suspend("L4", "x"), false, bad_reason, &s[3]),
            said("suspend_line", suspend("L3", "x"), false, bad_reason, &s[3]),
            said(
                "suspend_line",
                suspend("L1", "fraud"),
                false,
                "line L1 is already suspended",
                &s[3],
            ),
        ];
        let walk = |steps: &[AuditStep]| {
            vec![AuditTrajectory {
                id: "w".into(),
                initial_state: Arc::new(s0.clone()),
                steps: steps.to_vec(),
            }]
        };
        // Once is not enough.
        assert_eq!(learn_writes(&walk(&steps))["suspend_line"].guards, []);
        steps.push(said(
            "suspend_line",
            suspend("L2", "lost"),
            false,
            "line L2 is already suspended",
            &s[3],
        ));
        assert_eq!(
            learn_writes(&walk(&steps))["suspend_line"].guards,
            [Guard::FieldIs {
                field: "status".into(),
                value: json!("suspended")
            }]
        );
        // Refused in words that do not name it, twice is too few.
        for step in steps.iter_mut().filter(|s| s.success == Some(false)) {
            if step.observation.to_string().contains("already") {
                step.observation = json!({"success": false, "message": "cannot do that now"});
            }
        }
        assert_eq!(learn_writes(&walk(&steps))["suspend_line"].guards, []);
    }

    #[test]
    fn a_refusal_of_an_argument_equal_to_the_value_is_no_guard() {
        // change_plan to the plan a subscription is on is refused, naming the plan: the
        // argument is refused, not the plan the record holds.
        let s0 = json!({"subscriptions": {"S1": {"plan_id": "basic"}, "S2": {"plan_id": "basic"},
                                          "S3": {"plan_id": "basic"}}});
        let mut s = vec![s0.clone()];
        for (id, plan) in [("S1", "pro"), ("S2", "pro"), ("S3", "team")] {
            let mut next = s.last().unwrap().clone();
            next["subscriptions"][id]["plan_id"] = json!(plan);
            s.push(next);
        }
        let change = |id: &str, plan: &str| json!({"subscription_id": id, "plan": plan});
        let steps = vec![
            said(
                "change_plan",
                change("S1", "pro"),
                true,
                "moved to pro",
                &s[1],
            ),
            said(
                "change_plan",
                change("S2", "pro"),
                true,
                "moved to pro",
                &s[2],
            ),
            said(
                "change_plan",
                change("S3", "team"),
                true,
                "moved to team",
                &s[3],
            ),
            said(
                "change_plan",
                change("S1", "pro"),
                false,
                "S1 is already on pro",
                &s[3],
            ),
            said(
                "change_plan",
                change("S2", "pro"),
                false,
                "S2 is already on pro",
                &s[3],
            ),
        ];
        let learned = learn_writes(&[AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0),
            steps,
        }]);
        assert_eq!(learned["change_plan"].guards, []);
    }

    #[test]
    fn a_count_moved_from_one_value_is_no_constant_and_numbers_match_by_value() {
        // add_comment took both issues' counts from 0 to 1: one more each time, as far as the
        // walks tell. set_limit stores its `limit` as a float.
        let s0 = json!({"issues": {"I1": {"comment_count": 0}, "I2": {"comment_count": 0}},
                        "cards": {"K1": {"limit": 500.0}, "K2": {"limit": 900.0}}});
        let mut s1 = s0.clone();
        s1["issues"]["I1"]["comment_count"] = json!(1);
        let mut s2 = s1.clone();
        s2["issues"]["I2"]["comment_count"] = json!(1);
        let mut s3 = s2.clone();
        s3["cards"]["K1"]["limit"] = json!(3000.0);
        let mut s4 = s3.clone();
        s4["cards"]["K2"]["limit"] = json!(3000.0);
        let learned = learn_writes(&[AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0),
            steps: vec![
                step(
                    "add_comment",
                    json!({"issue_id": "I1", "body": "a"}),
                    true,
                    &s1,
                ),
                step(
                    "add_comment",
                    json!({"issue_id": "I2", "body": "b"}),
                    true,
                    &s2,
                ),
                step(
                    "set_limit",
                    json!({"card_id": "K1", "limit": 3000}),
                    true,
                    &s3,
                ),
                step(
                    "set_limit",
                    json!({"card_id": "K2", "limit": 3000}),
                    true,
                    &s4,
                ),
            ],
        }]);
        let comment = &learned["add_comment"];
        assert_eq!(comment.constants, BTreeMap::new());
        assert_eq!(comment.moves, BTreeSet::from(["comment_count".to_owned()]));
        let limit = &learned["set_limit"];
        assert_eq!(limit.constants, BTreeMap::new());
        assert_eq!(
            limit.from_arguments,
            BTreeMap::from([("limit".to_owned(), "limit".to_owned())])
        );
    }

    #[test]
    fn what_a_call_always_moves_on_another_record_it_names_is_learned() {
        // checkout(copy_id, member_id) lends the copy and counts the member's loans; the
        // third member-naming call is the evidence.
        let s0 = json!({"copies": {"C1": {"status": "available"}, "C2": {"status": "available"},
                                   "C3": {"status": "available"}},
                        "members": {"M1": {"active_loans": 0, "name": "Ann"},
                                    "M2": {"active_loans": 1, "name": "Bo"}}});
        let mut s = vec![s0.clone()];
        for (copy, member) in [("C1", "M1"), ("C2", "M2"), ("C3", "M1")] {
            let mut next = s.last().unwrap().clone();
            next["copies"][copy]["status"] = json!("on_loan");
            let loans = next["members"][member]["active_loans"].as_i64().unwrap();
            next["members"][member]["active_loans"] = json!(loans + 1);
            s.push(next);
        }
        let checkout = |copy: &str, member: &str| json!({"copy_id": copy, "member_id": member});
        let steps = vec![
            step("checkout", checkout("C1", "M1"), true, &s[1]),
            step("checkout", checkout("C2", "M2"), true, &s[2]),
            step("checkout", checkout("C3", "M1"), true, &s[3]),
        ];
        let walk = |steps: Vec<AuditStep>| {
            learn_writes(&[AuditTrajectory {
                id: "w".into(),
                initial_state: Arc::new(s0.clone()),
                steps,
            }])
        };
        let learned = walk(steps.clone());
        let writes = &learned["checkout"];
        assert_eq!(writes.target.as_deref(), Some("copy_id"));
        assert_eq!(
            writes.side_moves,
            BTreeMap::from([(
                "member_id".to_owned(),
                (
                    "members".to_owned(),
                    BTreeSet::from(["active_loans".to_owned()])
                )
            )])
        );
        // Two are too few.
        assert_eq!(
            walk(steps[..2].to_vec())["checkout"].side_moves,
            BTreeMap::new()
        );
    }

    #[test]
    fn failures_on_one_resource_alone_teach_no_guard() {
        // The same walks without the failure on A2: every failed withdrawal named A1, whose
        // failures may have a cause of its own (a frozen account); and R2's failure replaced
        // by a third on R1.
        let mut walks = walks();
        let steps = &mut walks[0].steps;
        steps.retain(|s| {
            s.arguments.get("account_id") != Some(&json!("A2"))
                && !(s.tool == "cancel_reservation"
                    && s.success == Some(false)
                    && s.arguments["reservation_id"] == "R2")
        });
        // R1 failed three times while cancelled: evidence enough, but on one reservation.
        let r1_failure = steps
            .iter()
            .find(|s| s.tool == "cancel_reservation" && s.success == Some(false))
            .cloned()
            .unwrap();
        steps.push(r1_failure);
        assert_eq!(
            steps
                .iter()
                .filter(|s| s.success == Some(false) && s.tool == "cancel_reservation")
                .count(),
            3
        );
        let learned = learn_writes(&walks);
        assert_eq!(learned["withdraw"].guards, []);
        assert_eq!(learned["cancel_reservation"].guards, []);
    }

    #[test]
    fn writes_are_learned_from_executed_walks() {
        let learned = learn_writes(&walks());
        let update = &learned["update_note"];
        assert_eq!(update.target.as_deref(), Some("note_id"));
        assert_eq!(
            update.from_arguments,
            BTreeMap::from([("body".to_owned(), "body".to_owned())])
        );
        // Two changes are enough to keep what is known of other notes across it, too few to
        // call a change elsewhere spurious.
        assert!(update.only_target);
        assert_eq!(update.changes_seen, 2);
        assert_eq!(update.target_collection.as_deref(), Some("notes"));
        let cancel = &learned["cancel_reservation"];
        assert_eq!(cancel.target.as_deref(), Some("reservation_id"));
        assert_eq!(
            cancel.constants,
            BTreeMap::from([("status".to_owned(), json!("cancelled"))])
        );
        assert_eq!(
            cancel.guards,
            [Guard::FieldIs {
                field: "status".into(),
                value: json!("cancelled")
            }]
        );
        let withdraw = &learned["withdraw"];
        assert_eq!(
            withdraw.guards,
            [Guard::ExceedsField {
                argument: "amount".into(),
                field: "balance".into()
            }]
        );
        // One change is not evidence that nothing else changes.
        assert!(!withdraw.only_target);
    }

    #[test]
    fn guessed_writes_match_arguments_to_known_fields() {
        let known = BTreeMap::from([
            (
                "body".to_owned(),
                Fact {
                    value: json!("milk"),
                    source: FactSource::Returned(1),
                },
            ),
            (
                "status".to_owned(),
                Fact {
                    value: json!("open"),
                    source: FactSource::Returned(1),
                },
            ),
        ]);
        let args = json!({"note_id": "N1", "body": "milk, eggs", "new_status": "done", "tag": "x"});
        let set = Writes::guess("edit_note").fields_set(
            args.as_object().unwrap(),
            Some(&known),
            Some("note_id"),
        );
        assert_eq!(
            set,
            BTreeMap::from([
                ("body".to_owned(), json!("milk, eggs")),
                ("status".to_owned(), json!("done"))
            ])
        );
        assert_eq!(
            Writes::guess("cancel_booking").moves,
            BTreeSet::from(["status".to_owned()])
        );
        assert!(Writes::guess("get_booking").moves.is_empty());
    }

    #[test]
    fn the_initial_state_is_a_complete_listing() {
        let state =
            ImpliedState::from_initial(&json!({"tickets": {"T1": {"status": "open", "tags": []}}}));
        let key = ("ticket".to_owned(), "T1".to_owned());
        assert_eq!(state.existence[&key], Existence::Exists(None));
        assert_eq!(state.fields[&key]["status"].value, json!("open"));
        assert!(!state.fields[&key].contains_key("tags"));
        assert_eq!(
            state.complete["ticket"],
            (CompleteSource::Initial, BTreeSet::from(["T1".to_owned()]))
        );
    }
}

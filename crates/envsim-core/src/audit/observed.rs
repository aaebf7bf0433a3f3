//! The audit of trajectories that carry no states: function-calling transcripts (OpenAI chat,
//! ShareGPT/Hermes) and any call log with observations. What a state would say has to be read
//! from what the calls name and what their observations return, so the state constraint graph
//! is built from the calls alone.
//!
//! **Resources.** A resource is named by a type and an id:
//! - an argument that names an id (`id`, `*_id`, `*Id`) with a string or integer value: the type
//!   is the argument's noun (`ticket_id` → `ticket`), or for a bare `id` the tool's noun
//!   ([`tool_noun`]: `get_ticket_details` → `ticket`);
//! - a record in an observation: an object with an `id` field, or with a `<noun>_id` field
//!   where `<noun>` is what the object is (the tool's noun at the top, the key it sits under
//!   below: `{"tickets": [{"ticket_id": …}]}`). Ids of other things an object quotes (foreign
//!   keys) are not records.
//!
//! **Timeline.** Per resource: whether it is known to exist (created, returned, listed), known
//! gone (deleted), or known missing (a failure said it was not found), with the step that made
//! it so; and the field values last returned or written. A successful change of unknown reach
//! forgets the field values, the lists and the repeated calls it may have changed.
//!
//! **Checks** (each a [`ViolationKind`]):
//! - `read_after_delete`: a successful call names a resource that an earlier successful delete
//!   removed (no create since), or a list returns it;
//! - `vanished_without_delete`: a call fails with "not found" for a resource known to exist
//!   (no delete since);
//! - `phantom_id`: a call succeeds on an id an earlier failure reported missing (no create
//!   since), or one that a complete earlier listing of its type did not hold;
//! - `stale_read`: a record returns a field with a value other than the one last returned or
//!   written for it, with no change of unknown reach between;
//! - `list_inconsistent`: the same listing, repeated with no change between, returns other
//!   ids; an unfiltered listing misses a resource created since a complete listing; a record's
//!   list (an order's `items`) lacks an entry a later call names with it ([`super::nested`]);
//! - `contradictory_repeat`: the same call, repeated with no successful change between, gets
//!   another outcome or another answer.

mod checks;

use super::implied::{Existence, Fact, FactSource, Guard, ImpliedState, Key};
use super::{EffectSource, Effects, ToolEffects, TrajectoryAudit, ViolationKind};
use checks::{
    keyed_arguments, learn_success, listing, named_resources, not_found, preconditions,
    repeated_call, repeated_read, response_shape, returned_records, CallCheck, CallsHistory,
};
use serde_json::{Map, Value};
use std::collections::{BTreeSet, HashMap};

/// One call of a trajectory without states.
#[derive(Clone, Debug, PartialEq)]
pub struct CallStep {
    /// Tool name.
    pub tool: String,
    /// Arguments.
    pub arguments: Map<String, Value>,
    /// The observation, parsed when it is JSON or a Python literal, else as text (`Null`:
    /// never answered).
    pub observation: Value,
    /// Success or failure, when known.
    pub success: Option<bool>,
}

/// A trajectory of calls without states.
#[derive(Clone, Debug, PartialEq)]
pub struct CallTrajectory {
    /// Identifier (for reports).
    pub id: String,
    /// The calls.
    pub steps: Vec<CallStep>,
}

impl From<&super::AuditTrajectory> for CallTrajectory {
    /// The calls of a trajectory with states, its states dropped.
    fn from(t: &super::AuditTrajectory) -> CallTrajectory {
        CallTrajectory {
            id: t.id.clone(),
            steps: t
                .steps
                .iter()
                .map(|s| CallStep {
                    tool: s.tool.clone(),
                    arguments: s.arguments.clone(),
                    observation: s.observation.clone(),
                    success: s.success,
                })
                .collect(),
        }
    }
}

use super::implied::id_text;
pub(crate) use super::nouns::words;
pub use super::nouns::{id_noun, singular, tool_noun};
pub use super::timeline::{Timeline, TimelineEvent};

pub(crate) fn show(key: &Key) -> String {
    format!("{}/{}", key.0, key.1)
}

/// The resources a call's arguments name, in argument order.
pub(crate) fn named(noun: &str, arguments: &Map<String, Value>) -> Vec<(String, Key)> {
    arguments
        .iter()
        .filter_map(|(arg, value)| {
            let of = id_noun(arg)?;
            let id = id_text(value)?;
            let kind = if of.is_empty() { noun.to_owned() } else { of };
            Some((arg.clone(), (kind, id)))
        })
        .collect()
}

/// Keys that wrap a response's payload without saying what it is.
const WRAPPERS: &[&str] = &[
    "data", "result", "results", "items", "records", "response", "payload", "value",
];

/// The records in an observation: (resource, its object, whether it sits in an array). A
/// record inside another record is that record's part: its type and id are qualified by the
/// parent's (`student/*/course`, `S1/CS101`), since the same course in two students'
/// transcripts is two things. `subject` is the resource the call names as what it is about:
/// an answer that is (or wraps, `{"success": true, "data": {...}}`) one object without an id
/// of its own is that resource's record, as environments that return the entity without its
/// key answer a read.
pub(crate) fn records<'v>(
    observation: &'v Value,
    noun: &str,
    subject: Option<&Key>,
) -> Vec<(Key, &'v Map<String, Value>, bool)> {
    let mut out = Vec::new();
    walk_records(observation, noun, false, None, &mut out);
    if let (Some(key), Some(map)) = (subject, unwrapped(observation)) {
        // The answer's own object is the record the read names when nothing else in it is,
        // or when it quotes that record's id beside the lists it holds
        // (`get_member_account(member_id)` answering the member with its loans).
        let own = out
            .iter()
            .any(|(k, m, _)| std::ptr::eq(*m, map) || k == key);
        let quotes = || {
            map.values()
                .any(|v| id_text(v).is_some_and(|id| id == key.1))
        };
        if out.is_empty() || (!own && quotes()) {
            out.push((key.clone(), map, false));
        }
    }
    out
}

/// The records of a successful step's answer ([`records`]); for a create whose answer holds
/// no record of its own, also the resource it answers the id of: the first id-naming key of
/// its answer whose value the call did not give (`book_flight` answering `{'booking_id':
/// '3426812', 'transaction_id': ...}` created booking 3426812).
pub(crate) fn step_records<'v>(
    observation: &'v Value,
    noun: &str,
    names: &[(String, Key)],
    role: Role,
    arguments: &Map<String, Value>,
) -> Vec<(Key, &'v Map<String, Value>, bool)> {
    let mut found = records(observation, noun, subject(noun, names, role));
    if role == Role::Create && !found.iter().any(|(_, _, in_array)| !in_array) {
        if let Some(map) = payload(observation) {
            let given: Vec<String> = arguments.values().filter_map(id_text).collect();
            let created = map.iter().find_map(|(k, v)| {
                let of = id_noun(k)?;
                let id = id_text(v).filter(|id| !given.contains(id))?;
                Some((if of.is_empty() { noun.to_owned() } else { of }, id))
            });
            if let Some(key) = created {
                found.push((key, map, false));
            }
        }
    }
    found
}

/// The object an answer is about: itself, or what a wrapper key holds (the rest of the
/// envelope being a status: `success`, `message`, ...). `None` when it holds collections.
pub(crate) fn unwrapped(observation: &Value) -> Option<&Map<String, Value>> {
    let object = payload(observation)?;
    const ENVELOPE: &[&str] = &["success", "ok", "message", "msg", "error", "status_code"];
    let scalars = object
        .iter()
        .filter(|(k, v)| !v.is_object() && !v.is_array() && !ENVELOPE.contains(&k.as_str()))
        .count();
    (scalars >= 2 && !object.values().all(Value::is_object)).then_some(object)
}

/// What an answer says a call made: each `<noun>_id` of its payload (not a bare `id`) whose
/// value is none of the ids the call's arguments give, as (noun, id) (`add_comment` answering
/// `comment_id`, `cancel_appointment` the `new_appointment_id` it promoted).
pub(crate) fn ids_answered(
    observation: &Value,
    arguments: &Map<String, Value>,
) -> Vec<(String, String)> {
    let Some(map) = payload(observation) else {
        return Vec::new();
    };
    let mut given = std::collections::HashSet::new();
    arguments
        .values()
        .for_each(|v| super::implied::id_texts(v, false, &mut given));
    map.iter()
        .filter_map(|(field, value)| {
            let noun = id_noun(field).filter(|noun| !noun.is_empty())?;
            let id = id_text(value)?;
            (!given.contains(&id)).then_some((noun, id))
        })
        .collect()
}

/// An object answer's payload: what its first wrapper key (`data`, `result`, ...) holds when
/// that is an object, else the answer itself.
pub(crate) fn payload(observation: &Value) -> Option<&Map<String, Value>> {
    let map = observation.as_object()?;
    Some(
        WRAPPERS
            .iter()
            .find_map(|w| map.get(*w))
            .and_then(Value::as_object)
            .unwrap_or(map),
    )
}

fn walk_records<'v>(
    value: &'v Value,
    noun: &str,
    in_array: bool,
    parent: Option<&Key>,
    out: &mut Vec<(Key, &'v Map<String, Value>, bool)>,
) {
    match value {
        Value::Object(map) => {
            let own = format!("{noun}_id");
            let id = map
                .get("id")
                .and_then(id_text)
                .or_else(|| map.get(&own).and_then(id_text));
            let mine = match (id, noun.is_empty()) {
                (Some(id), false) => {
                    let key = match parent {
                        Some((ptype, pid)) => (format!("{ptype}/*/{noun}"), format!("{pid}/{id}")),
                        None => (noun.to_owned(), id),
                    };
                    out.push((key.clone(), map, in_array));
                    Some(key)
                }
                _ => None,
            };
            // What the parts below belong to: this record, else the first thing the object
            // names by id (a transcript that quotes its student is the student's).
            let context = mine.clone().or_else(|| {
                map.iter().find_map(|(k, v)| {
                    let of = id_noun(k).filter(|n| !n.is_empty())?;
                    Some((of, id_text(v)?))
                })
            });
            let parent = context.as_ref().or(parent);
            for (key, child) in map {
                if !(child.is_object() || child.is_array()) {
                    continue;
                }
                let inner = if WRAPPERS.contains(&key.to_lowercase().as_str()) {
                    noun.to_owned()
                } else {
                    tool_noun(&format!("x_{key}"))
                };
                walk_records(child, &inner, false, parent, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                walk_records(item, noun, true, parent, out);
            }
        }
        _ => {}
    }
}

/// Whether a failure's text says something was not found.
pub(crate) fn says_not_found(observation: &Value) -> bool {
    let text = match observation {
        Value::String(s) => s.to_lowercase(),
        other => other.to_string().to_lowercase(),
    };
    [
        "not found",
        "does not exist",
        "doesn't exist",
        "no such",
        "not exist",
        "unknown",
        "no record",
        "invalid id",
    ]
    .iter()
    .any(|p| text.contains(p))
}

/// Whether `text` quotes `id` as a word of its own (`O5` is not quoted by `O50`).
pub(crate) fn mentions(text: &str, id: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    text.match_indices(id).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + id.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// Whether `text` quotes the value of an argument other than the one holding `id` ("sprint
/// C-0036 not found" is about `carry_over_to`, not the named sprint).
fn quotes_other_argument(text: &str, arguments: &Map<String, Value>, id: &str) -> bool {
    arguments.values().any(|v| {
        v.as_str()
            .is_some_and(|s| s.len() >= 2 && s != id && mentions(text, s))
    })
}

/// What a call does, for the audit without states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Only reads.
    Read,
    /// Makes resources.
    Create,
    /// Removes the resource its arguments name.
    Delete,
    /// Changes the state in ways not pinned to one resource.
    Change,
}

/// What a tool with effects `fx` does: read-only; deletes only (what its arguments name, or
/// by its name's guess); creates only; else a change.
pub fn role(fx: &ToolEffects) -> Role {
    if fx.read_only {
        Role::Read
    } else if !fx.deletes.is_empty()
        && (fx.deletes_named_only || fx.source == EffectSource::Guessed)
        && fx.creates.is_empty()
    {
        Role::Delete
    } else if !fx.creates.is_empty() && fx.deletes.is_empty() && !fx.never_seen_creating {
        Role::Create
    } else {
        Role::Change
    }
}

/// The resource a delete (or a change) is about among those it names: the one whose type is
/// the tool's noun, else the only one.
pub(crate) fn target(noun: &str, named: &[(String, Key)]) -> Option<Key> {
    named
        .iter()
        .find(|(_, key)| key.0 == noun || noun.ends_with(&key.0))
        .or(if named.len() == 1 {
            named.first()
        } else {
            None
        })
        .map(|(_, key)| key.clone())
}

/// Audits one trajectory without states, from what it implies alone (`initial`: the state
/// before it, when the package and the record's state name say it).
pub fn audit_calls(
    trajectory: &CallTrajectory,
    effects: &Effects,
    initial: Option<&Value>,
) -> TrajectoryAudit {
    let mut h = CallsHistory {
        st: match initial {
            Some(state) => ImpliedState::from_initial(state),
            None => effects.any_initial_state(),
        },
        listings: HashMap::new(),
        calls: HashMap::new(),
        reads: HashMap::new(),
        changed: HashMap::new(),
    };
    let mut violations = Vec::new();
    let mut checked = 0usize;
    for (k, step) in trajectory.steps.iter().enumerate() {
        let mut c = CallCheck::new(&trajectory.id, k, step, effects);
        c.settle_aim(&h.st);
        repeated_call(&mut c, &h);
        response_shape(&mut c);
        match step.success {
            Some(true) => {
                named_resources(&mut c, &h.st);
                keyed_arguments(&mut c, &h.st);
                preconditions(&mut c, &h.st);
                let found = step_records(
                    &step.observation,
                    &c.noun,
                    &c.names,
                    c.role,
                    &step.arguments,
                );
                let stale_here = returned_records(&mut c, &h.st, &found);
                if c.role == Role::Read {
                    repeated_read(&mut c, &mut h, &stale_here);
                }
                listing(&mut c, &mut h, &found);
                learn_success(&c, &mut h, &found);
            }
            Some(false) => not_found(&mut c, &mut h.st),
            None => {
                if c.role != Role::Read {
                    h.st.forget_fields();
                    h.listings.clear();
                    h.calls.clear();
                }
            }
        }
        // Only calls that changed nothing are expected to repeat the same way.
        if c.role == Role::Read || step.success == Some(false) {
            h.calls.insert(
                c.signature.clone(),
                (k, step.success, step.observation.clone()),
            );
        }
        checked += c.out.checked;
        violations.extend(c.out.violations);
    }
    // Entries of the lists records hold, named by later calls.
    let (nested_checked, nested) = super::nested::nested_list_checks(trajectory, effects, initial);
    checked += nested_checked;
    violations.extend(nested);
    // Things made under a name an argument gives, reported missing later.
    let (named_checked, named) = super::named::named_creation_checks(trajectory, effects);
    checked += named_checked;
    violations.extend(named);
    violations.sort_by_key(|v| v.step);
    TrajectoryAudit {
        trajectory: trajectory.id.clone(),
        steps: trajectory.steps.len(),
        checked,
        violations,
        transitions: Vec::new(),
    }
}

/// The resource a read is about, for an answer that does not name it: the one its arguments
/// name whose type is the tool's noun, else the only one. Only reads: what a change answers
/// is a report on the change more often than the record.
pub(crate) fn subject<'n>(noun: &str, names: &'n [(String, Key)], role: Role) -> Option<&'n Key> {
    if role != Role::Read {
        return None;
    }
    names
        .iter()
        .find(|(_, key)| key.0 == noun || noun.ends_with(&key.0))
        .or(if names.len() == 1 {
            names.first()
        } else {
            None
        })
        .map(|(_, key)| key)
}

/// Whether an answer is a listing of `noun`s, empty ones included: an array, or an object
/// that is no record itself and holds an array under the noun's plural or a wrapper key
/// (`{"notes": []}`, `{"success": true, "data": []}`).
fn is_listing(observation: &Value, noun: &str) -> bool {
    match observation {
        Value::Array(_) => true,
        Value::Object(map) => {
            let own = format!("{noun}_id");
            if map.contains_key("id") || map.contains_key(&own) {
                return false;
            }
            map.iter().any(|(key, value)| {
                let key = key.to_lowercase();
                let named = WRAPPERS.contains(&key.as_str()) || singular(&key) == noun;
                named && (value.is_array() || (value.is_object() && is_listing(value, noun)))
            })
        }
        _ => false,
    }
}

/// Whether `value` holds `wanted` anywhere (as a value, or inside a text), `text` being its
/// JSON text.
fn contains_value(value: &Value, wanted: &Value, text: &str) -> bool {
    match wanted {
        Value::String(s) if !s.is_empty() => text.contains(s.as_str()),
        other => {
            let mut stack = vec![value];
            while let Some(v) = stack.pop() {
                if v == other {
                    return true;
                }
                match v {
                    Value::Object(map) => stack.extend(map.values()),
                    Value::Array(items) => stack.extend(items.iter()),
                    _ => {}
                }
            }
            false
        }
    }
}

/// The outcome of an observation from an API nobody described: a boolean `success` says it;
/// an `error`/`errors` entry that is not empty, a `status`/`status_code` of 400 or more, or
/// `"error"`/`"failed"` as the status, or text that starts with `error`/`failed` or says
/// "not found" is a failure; anything else answered is a success; no answer is unknown.
pub fn guess_outcome(observation: &Value) -> Option<bool> {
    match observation {
        Value::Null => None,
        Value::Object(map) => {
            if let Some(success) = map.get("success").and_then(Value::as_bool) {
                return Some(success);
            }
            let empty = |v: &Value| match v {
                Value::Null | Value::Bool(false) => true,
                Value::String(s) => s.is_empty(),
                Value::Array(a) => a.is_empty(),
                Value::Object(o) => o.is_empty(),
                Value::Number(_) | Value::Bool(true) => false,
            };
            if ["error", "errors", "error_message"]
                .iter()
                .any(|k| map.get(*k).is_some_and(|v| !empty(v)))
            {
                return Some(false);
            }
            for key in ["status_code", "status", "code"] {
                match map.get(key) {
                    Some(Value::Number(n))
                        if n.as_u64().is_some_and(|s| (400..600).contains(&s)) =>
                    {
                        return Some(false)
                    }
                    Some(Value::String(s))
                        if ["error", "failed", "failure"].contains(&s.to_lowercase().as_str()) =>
                    {
                        return Some(false)
                    }
                    _ => {}
                }
            }
            Some(true)
        }
        Value::String(text) => {
            let lower = text.trim_start().to_lowercase();
            Some(
                !(lower.starts_with("error")
                    || lower.starts_with("failed")
                    || lower.starts_with("exception")
                    || says_not_found(observation)),
            )
        }
        _ => Some(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(steps: &[(&str, Value, Value)]) -> CallTrajectory {
        CallTrajectory {
            id: "t".into(),
            steps: steps
                .iter()
                .map(|(tool, args, obs)| CallStep {
                    tool: (*tool).into(),
                    arguments: args.as_object().cloned().unwrap_or_default(),
                    success: guess_outcome(obs),
                    observation: obs.clone(),
                })
                .collect(),
        }
    }

    /// (step, kind) of each violation the audit of `steps` with `fx` finds, from `initial`.
    fn flagged(
        steps: &[(&str, Value, Value)],
        fx: &Effects,
        initial: Option<&Value>,
    ) -> Vec<(usize, &'static str)> {
        (audit_calls(&t(steps), fx, initial).violations.iter())
            .map(|v| (v.step, v.kind.name()))
            .collect()
    }

    /// (step, kind, resource, conflicting step) of each violation.
    fn found(
        steps: &[(&str, Value, Value)],
    ) -> Vec<(usize, &'static str, Option<String>, Option<usize>)> {
        audit_calls(&t(steps), &Effects::default(), None)
            .violations
            .into_iter()
            .map(|v| (v.step, v.kind.name(), v.resource, v.conflicting_step))
            .collect()
    }

    #[test]
    fn nouns() {
        assert_eq!(tool_noun("get_order_by_id"), "order");
        assert_eq!(tool_noun("list_open_tickets"), "open_ticket");
        assert_eq!(tool_noun("getTicketDetails"), "ticket");
        assert_eq!(tool_noun("search"), "search");
        assert_eq!(id_noun("ticket_id").as_deref(), Some("ticket"));
        assert_eq!(id_noun("userId").as_deref(), Some("user"));
        assert_eq!(id_noun("policies_id").as_deref(), Some("policy"));
        assert_eq!(id_noun("id").as_deref(), Some(""));
        assert_eq!(id_noun("idea"), None);
        assert_eq!(singular("addresses"), "address");
        assert_eq!(singular("status"), "status");
        assert_eq!(singular("boxes"), "box");
    }

    #[test]
    fn outcomes_of_undescribed_apis() {
        assert_eq!(
            guess_outcome(&json!({"success": false, "data": 1})),
            Some(false)
        );
        assert_eq!(guess_outcome(&json!({"error": "boom"})), Some(false));
        assert_eq!(guess_outcome(&json!({"error": null, "id": 1})), Some(true));
        assert_eq!(guess_outcome(&json!({"status": 404})), Some(false));
        assert_eq!(guess_outcome(&json!({"status": "failed"})), Some(false));
        assert_eq!(guess_outcome(&json!("Error: no such order")), Some(false));
        assert_eq!(guess_outcome(&json!("Order O1 not found")), Some(false));
        assert_eq!(guess_outcome(&json!("Shipped O1")), Some(true));
        assert_eq!(guess_outcome(&json!([1, 2])), Some(true));
        assert_eq!(guess_outcome(&Value::Null), None);
    }

    #[test]
    fn deleted_things_stay_deleted() {
        let steps = [
            (
                "create_ticket",
                json!({"title": "x"}),
                json!({"ticket_id": "T1", "status": "open"}),
            ),
            (
                "delete_ticket",
                json!({"ticket_id": "T1"}),
                json!({"deleted": true}),
            ),
            (
                "get_ticket",
                json!({"ticket_id": "T1"}),
                json!({"ticket_id": "T1", "status": "open"}),
            ),
            (
                "list_tickets",
                json!({}),
                json!({"tickets": [{"ticket_id": "T1"}, {"ticket_id": "T2"}]}),
            ),
        ];
        assert_eq!(
            found(&steps),
            [
                (2, "read_after_delete", Some("ticket/T1".into()), Some(1)),
                (3, "read_after_delete", Some("ticket/T1".into()), Some(1)),
            ]
        );
        // Created again in between: nothing to say.
        let recreated = [
            steps[0].clone(),
            steps[1].clone(),
            (
                "create_ticket",
                json!({"title": "y"}),
                json!({"ticket_id": "T1", "status": "open"}),
            ),
            steps[2].clone(),
        ];
        assert_eq!(found(&recreated), []);
    }

    #[test]
    fn created_things_do_not_vanish_and_missing_ones_do_not_appear() {
        let steps = [
            (
                "create_order",
                json!({"sku": "A"}),
                json!({"order_id": "O7"}),
            ),
            (
                "ship_order",
                json!({"order_id": "O7"}),
                json!({"error": "Order O7 not found"}),
            ),
            (
                "get_customer",
                json!({"customer_id": "C9"}),
                json!("Error: customer C9 does not exist"),
            ),
            (
                "get_customer",
                json!({"customer_id": "C9"}),
                json!({"id": "C9", "name": "Ann"}),
            ),
        ];
        assert_eq!(
            found(&steps),
            [
                (
                    1,
                    "vanished_without_delete",
                    Some("order/O7".into()),
                    Some(0)
                ),
                (3, "contradictory_repeat", None, Some(2)),
                (3, "phantom_id", Some("customer/C9".into()), Some(2)),
            ]
        );
        // A failure about something else the call names is not about the named resource.
        let other = [
            (
                "get_order",
                json!({"order_id": "O7"}),
                json!({"order_id": "O7", "status": "placed"}),
            ),
            (
                "apply_coupon",
                json!({"order_id": "O7", "code": "SPRING"}),
                json!({"error": "Coupon SPRING does not exist"}),
            ),
            (
                "ship_order",
                json!({"order_id": "O7", "carrier": "Zap"}),
                json!({"error": "order carrier Zap not found"}),
            ),
        ];
        assert_eq!(found(&other), []);
    }

    #[test]
    fn reads_agree_until_something_changes() {
        let get = |status: &str| {
            (
                "get_ticket",
                json!({"ticket_id": "T1"}),
                json!({"data": {"ticket_id": "T1", "status": status}}),
            )
        };
        let steps = [
            get("open"),
            ("list_users", json!({}), json!([])),
            get("closed"),
        ];
        assert_eq!(
            found(&steps),
            [
                (2, "contradictory_repeat", None, Some(0)),
                (2, "stale_read", Some("ticket/T1".into()), Some(0)),
            ]
        );
        // A change between: the new value is expected.
        let changed = [
            get("open"),
            (
                "close_ticket",
                json!({"ticket_id": "T1"}),
                json!({"ok": true}),
            ),
            get("closed"),
        ];
        assert_eq!(found(&changed), []);
        // The same course in two students' transcripts is two things.
        let transcripts = [
            (
                "get_transcript",
                json!({"student_id": "S1"}),
                json!({"student_id": "S1", "courses": [{"course_id": "C1", "grade": "A"}]}),
            ),
            (
                "get_transcript",
                json!({"student_id": "S2"}),
                json!({"student_id": "S2", "courses": [{"course_id": "C1", "grade": "B"}]}),
            ),
        ];
        assert_eq!(found(&transcripts), []);
    }

    #[test]
    fn listings_agree_with_the_timeline() {
        let list = |ids: &[&str]| {
            let items: Vec<Value> = ids.iter().map(|id| json!({"id": id})).collect();
            ("list_rooms", json!({}), json!({"rooms": items}))
        };
        let steps = [list(&["R1", "R2"]), list(&["R1"])];
        assert_eq!(
            found(&steps),
            [
                (1, "contradictory_repeat", None, Some(0)),
                (1, "list_inconsistent", None, Some(0)),
            ]
        );
        // Created after a complete listing, missing from the next one.
        let created = [
            list(&["R1"]),
            ("create_room", json!({"name": "x"}), json!({"id": "R2"})),
            list(&["R1"]),
            (
                "get_room",
                json!({"room_id": "R3"}),
                json!({"id": "R3", "name": "y"}),
            ),
        ];
        assert_eq!(
            found(&created),
            [
                (2, "list_inconsistent", Some("room/R2".into()), Some(1)),
                (3, "phantom_id", Some("room/R3".into()), Some(2)),
            ]
        );
    }

    #[test]
    fn an_update_replaces_what_reads_showed() {
        // The canonical case: a read after a successful update shows the old body.
        let get = |body: &str| {
            (
                "get_note",
                json!({"note_id": "N1"}),
                json!({"success": true, "data": {"note_id": "N1", "body": body}}),
            )
        };
        let create = (
            "create_note",
            json!({"body": "milk"}),
            json!({"success": true, "data": {"note_id": "N1", "body": "milk"}}),
        );
        let update = (
            "update_note",
            json!({"note_id": "N1", "body": "milk, eggs"}),
            json!({"success": true}),
        );
        let steps = [create.clone(), get("milk"), update.clone(), get("milk")];
        assert_eq!(
            found(&steps),
            [(3, "stale_read", Some("note/N1".into()), Some(2))]
        );
        // The new body is what a read after the update must show.
        assert_eq!(
            found(&[
                create.clone(),
                get("milk"),
                update.clone(),
                get("milk, eggs")
            ]),
            []
        );
        // A field the read does not name the same way: the word-for-word repeat of the
        // pre-change answer gives it away.
        let edit = (
            "edit_note",
            json!({"note_id": "N1", "text": "milk, eggs"}),
            json!("Note updated"),
        );
        let repeated = [create, get("milk"), edit, get("milk")];
        assert_eq!(
            found(&repeated),
            [(3, "stale_read", Some("note/N1".into()), Some(2))]
        );
    }

    #[test]
    fn a_read_showing_none_of_the_fields_a_change_sets_may_repeat() {
        use crate::audit::{AuditStep, AuditTrajectory};
        use std::sync::Arc;
        // Walks: delay_flight moves a flight's status to "delayed", nothing else.
        let s0 = json!({"flights": {"F1": {"status": "on_time", "seats": 3},
                                    "F2": {"status": "on_time", "seats": 4},
                                    "F3": {"status": "on_time", "seats": 5}}});
        let mut s1 = s0.clone();
        s1["flights"]["F1"]["status"] = json!("delayed");
        let mut s2 = s1.clone();
        s2["flights"]["F2"]["status"] = json!("delayed");
        let mut s3 = s2.clone();
        s3["flights"]["F3"]["status"] = json!("delayed");
        let step = |id: &str, after: &Value| AuditStep {
            tool: "delay_flight".into(),
            arguments: json!({"flight_id": id}).as_object().cloned().unwrap(),
            observation: json!({"success": true}),
            success: Some(true),
            state_after: Arc::new(after.clone()),
        };
        let fx = Effects::learn(&[AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0),
            steps: vec![step("F1", &s1), step("F2", &s2), step("F3", &s3)],
        }]);
        assert_eq!(
            fx.writes_of("delay_flight").constants,
            std::collections::BTreeMap::from([("status".to_owned(), json!("delayed"))])
        );
        let delay = (
            "delay_flight",
            json!({"flight_id": "F1"}),
            json!({"success": true}),
        );
        let seat_map = (
            "get_seat_map",
            json!({"flight_id": "F1"}),
            json!({"rows": [{"row": 1, "free": ["A", "C"]}]}),
        );
        let findings = |steps: &[(&str, Value, Value)]| flagged(steps, &fx, None);
        // The seat map never shows a status: the same map after the delay is no stale read.
        assert_eq!(
            findings(&[seat_map.clone(), delay.clone(), seat_map.clone()]),
            []
        );
        // A view that shows the status, repeated word for word, is.
        let board = (
            "get_flight_board",
            json!({"flight_id": "F1"}),
            json!({"lines": [{"status": "on_time"}]}),
        );
        assert_eq!(
            findings(&[board.clone(), delay, board]),
            [(2, "stale_read")]
        );
    }

    #[test]
    fn a_change_typed_by_its_collection_aims_at_the_record_the_reads_returned() {
        use crate::audit::{AuditStep, AuditTrajectory};
        use std::sync::Arc;
        // Walks: put_on_hold(rx_id) moves a prescription's status; reads answer the record by
        // `rx_id`, so the transcript types it `rx`, the walks `prescription`.
        // Dispenses name prescriptions by `rx_id`: the states, too, give them that type.
        let s0 = json!({"prescriptions": {"R1": {"status": "active"}, "R2": {"status": "active"},
                                          "R3": {"status": "active"}},
                        "dispenses": {"D1": {"rx_id": "R1"}, "D2": {"rx_id": "R2"}}});
        let (mut s1, mut s2, mut s3) = (s0.clone(), s0.clone(), s0.clone());
        s1["prescriptions"]["R1"]["status"] = json!("on_hold");
        s2["prescriptions"] = s1["prescriptions"].clone();
        s2["prescriptions"]["R2"]["status"] = json!("on_hold");
        s3["prescriptions"] = s2["prescriptions"].clone();
        s3["prescriptions"]["R3"]["status"] = json!("on_hold");
        let step = |id: &str, after: &Value| AuditStep {
            tool: "put_on_hold".into(),
            arguments: json!({"rx_id": id}).as_object().cloned().unwrap(),
            observation: json!({"success": true}),
            success: Some(true),
            state_after: Arc::new(after.clone()),
        };
        let fx = Effects::learn(&[AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0.clone()),
            steps: vec![step("R1", &s1), step("R2", &s2), step("R3", &s3)],
        }]);
        assert_eq!(
            fx.writes_of("put_on_hold").target_collection.as_deref(),
            Some("prescriptions")
        );
        let get = |status: &str| {
            (
                "get_prescription",
                json!({"rx_id": "R1"}),
                json!({"rx_id": "R1", "status": status}),
            )
        };
        let hold = (
            "put_on_hold",
            json!({"rx_id": "R1"}),
            json!({"success": true}),
        );
        let findings = |steps: &[(&str, Value, Value)]| flagged(steps, &fx, None);
        // The hold is read back: no stale read of the status the hold moved.
        assert_eq!(findings(&[get("active"), hold.clone(), get("on_hold")]), []);
        // Read back at the old status, it is caught as moved back.
        assert_eq!(
            findings(&[get("active"), hold.clone(), get("active")]),
            [(2, "status_reverted")]
        );
        // With the initial state known the record is known as a prescription and, read, as
        // an `rx`: the hold reaches both.
        let known = |steps: &[(&str, Value, Value)]| flagged(steps, &fx, Some(&s0));
        assert_eq!(known(&[get("active"), hold.clone(), get("on_hold")]), []);
        assert_eq!(
            known(&[get("active"), hold, get("active")]),
            [(2, "status_reverted")]
        );
    }

    #[test]
    fn a_creation_sets_what_it_always_changes_on_the_records_it_names() {
        use crate::audit::{AuditStep, AuditTrajectory};
        use std::sync::Arc;
        // Walks: checkout(copy_id, member_id) makes a loan, lends the copy and counts the
        // member's loans.
        let s0 = json!({"copies": {"C1": {"status": "available"}, "C2": {"status": "available"},
                                   "C3": {"status": "available"}, "C4": {"status": "available"}},
                        "members": {"M1": {"active_loans": 0, "name": "Ann"},
                                    "M2": {"active_loans": 1, "name": "Bo"}},
                        "loans": {}});
        let mut states = vec![s0.clone()];
        let mut steps = Vec::new();
        for (n, (copy, member)) in [("C1", "M1"), ("C2", "M2"), ("C3", "M1")]
            .iter()
            .enumerate()
        {
            let mut next = states.last().unwrap().clone();
            next["copies"][copy]["status"] = json!("on_loan");
            let loans = next["members"][member]["active_loans"].as_i64().unwrap();
            next["members"][member]["active_loans"] = json!(loans + 1);
            let loan = format!("L{}", n + 1);
            next["loans"][&loan] = json!({"copy": copy, "member": member});
            steps.push(AuditStep {
                tool: "checkout".into(),
                arguments: json!({"copy_id": copy, "member_id": member})
                    .as_object()
                    .cloned()
                    .unwrap(),
                observation: json!({"success": true, "loan_id": loan}),
                success: Some(true),
                state_after: Arc::new(next.clone()),
            });
            states.push(next);
        }
        let fx = Effects::learn(&[AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0.clone()),
            steps,
        }]);
        assert_eq!(role(&fx.of("checkout")), Role::Create);
        let checkout = (
            "checkout",
            json!({"copy_id": "C4", "member_id": "M2"}),
            json!({"success": true, "loan_id": "L9"}),
        );
        // The member, answered with the loans it holds by a tool named for another noun.
        let member = |count: u64| {
            (
                "get_member_account",
                json!({"member_id": "M2"}),
                json!({"success": true, "data": {"member_id": "M2", "name": "Bo",
                       "active_loans": count, "loans": [{"loan_id": "L9", "copy_id": "C4"}]}}),
            )
        };
        let copy = |status: &str| {
            (
                "get_copy",
                json!({"copy_id": "C4"}),
                json!({"copy_id": "C4", "status": status}),
            )
        };
        let findings = |steps: &[(&str, Value, Value)]| flagged(steps, &fx, Some(&s0));
        assert_eq!(
            findings(&[checkout.clone(), member(2), copy("on_loan")]),
            []
        );
        // The member's count as it was, the copy back on the shelf.
        assert_eq!(
            findings(&[checkout.clone(), member(1)]),
            [(1, "stale_read")]
        );
        assert_eq!(
            findings(&[checkout, copy("available")]),
            [(1, "status_reverted")]
        );
    }

    #[test]
    fn a_read_of_a_record_by_its_key_is_held_to_the_states() {
        // Domains are keyed by name, and so are their zones; ledger entries name domains.
        let state = json!({
            "domains": {"a.com": {"status": "active"}, "b.org": {"status": "active"},
                        "c.net": {"status": "expired"}},
            "zones": {"a.com": {"serial": 1}, "b.org": {"serial": 2}, "c.net": {"serial": 3}},
            "ledger": {"E1": {"domain": "a.com"}, "E2": {"domain": "b.org"},
                       "E3": {"domain": "c.net"}}
        });
        let fx = Effects::default();
        let findings = |steps: &[(&str, Value, Value)]| flagged(steps, &fx, Some(&state));
        let get = |domain: &str| {
            (
                "get_domain",
                json!({"domain": domain}),
                json!({"success": true, "data": {"status": "active", "auto_renew": true}}),
            )
        };
        assert_eq!(findings(&[get("a.com")]), []);
        assert_eq!(findings(&[get("a.com-2")]), [(0, "phantom_id")]);
        // A listing's filter by the same name is no claim that the record exists.
        let records = (
            "list_records",
            json!({"domain": "zz.io"}),
            json!({"success": true, "data": []}),
        );
        assert_eq!(findings(&[records]), []);
    }

    #[test]
    fn a_creation_is_held_to_the_other_things_it_names() {
        use crate::audit::{AuditStep, AuditTrajectory};
        use std::sync::Arc;
        // Walks: report_damage makes a damage report about an existing reservation.
        let s0 = json!({"reservations": {"R1": {"status": "active"}, "R2": {"status": "active"}},
                        "damage_reports": {}});
        let mut s1 = s0.clone();
        s1["damage_reports"]["D1"] = json!({"reservation": "R1"});
        let mut s2 = s1.clone();
        s2["damage_reports"]["D2"] = json!({"reservation": "R2"});
        let step = |id: &str, report: &str, after: &Value| AuditStep {
            tool: "report_damage".into(),
            arguments: json!({"reservation_id": id}).as_object().cloned().unwrap(),
            observation: json!({"success": true, "report_id": report}),
            success: Some(true),
            state_after: Arc::new(after.clone()),
        };
        let fx = Effects::learn(&[AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0.clone()),
            steps: vec![step("R1", "D1", &s1), step("R2", "D2", &s2)],
        }])
        .with_initial_states([&s0]);
        assert_eq!(role(&fx.of("report_damage")), Role::Create);
        let report = |id: &str, report: &str| {
            (
                "report_damage",
                json!({"reservation_id": id}),
                json!({"success": true, "report_id": report}),
            )
        };
        // A report about R9, which no state holds, is a success on a phantom; one about R1 is
        // not, and the report it makes is its own.
        let audit = audit_calls(&t(&[report("R1", "D7"), report("R9", "D8")]), &fx, None);
        let seen: Vec<_> = (audit.violations.iter())
            .map(|v| (v.step, v.kind.name(), v.resource.clone()))
            .collect();
        assert_eq!(seen, [(1, "phantom_id", Some("reservation/R9".to_owned()))]);
    }

    #[test]
    fn an_argument_named_for_a_role_names_the_collection_the_states_use_it_for() {
        use crate::audit::{AuditStep, AuditTrajectory};
        use std::sync::Arc;
        // Every `seller_id` a listing holds is a user's id: a seller is a user.
        let s0 = json!({"users": {"U1": {"name": "a"}, "U2": {"name": "b"}},
                        "listings": {"L1": {"seller_id": "U1"}, "L2": {"seller_id": "U2"}}});
        let mut s1 = s0.clone();
        s1["listings"]["L3"] = json!({"seller_id": "U1"});
        let fx = Effects::learn(&[AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0.clone()),
            steps: vec![AuditStep {
                tool: "create_listing".into(),
                arguments: json!({"seller_id": "U1"}).as_object().cloned().unwrap(),
                observation: json!({"success": true, "listing_id": "L3"}),
                success: Some(true),
                state_after: Arc::new(s1),
            }],
        }])
        .with_initial_states([&s0]);
        assert_eq!(
            fx.any_initial_state().aliases,
            HashMap::from([("seller".to_owned(), "user".to_owned())])
        );
        let create = |seller: &str, id: &str| {
            (
                "create_listing",
                json!({"seller_id": seller}),
                json!({"success": true, "listing_id": id}),
            )
        };
        let audit = audit_calls(
            &t(&[create("U2", "L7"), create("U-10050", "L8")]),
            &fx,
            None,
        );
        let seen: Vec<_> = (audit.violations.iter())
            .map(|v| (v.step, v.kind.name(), v.resource.clone()))
            .collect();
        assert_eq!(seen, [(1, "phantom_id", Some("seller/U-10050".to_owned()))]);
    }

    #[test]
    fn a_creation_leaves_unknown_the_ids_of_what_else_it_made_unnamed() {
        use crate::audit::{AuditStep, AuditTrajectory};
        use std::sync::Arc;
        // Walks: create_instance makes an instance and its boot disk; create_snapshot makes a
        // snapshot of a disk.
        let s0 = json!({"instances": {"vm-1": {}}, "disks": {"d-1": {}}, "snapshots": {}});
        let mut s1 = s0.clone();
        s1["instances"]["vm-2"] = json!({});
        s1["disks"]["d-2"] = json!({});
        let mut s2 = s1.clone();
        s2["snapshots"]["sn-1"] = json!({"disk": "d-2"});
        let step = |tool: &str, args: Value, answer: Value, after: &Value| AuditStep {
            tool: tool.into(),
            arguments: args.as_object().cloned().unwrap(),
            observation: answer,
            success: Some(true),
            state_after: Arc::new(after.clone()),
        };
        let fx = Effects::learn(&[AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0.clone()),
            steps: vec![
                step(
                    "create_instance",
                    json!({"name": "a"}),
                    json!({"instance_id": "vm-2", "boot_disk": "d-2"}),
                    &s1,
                ),
                step(
                    "create_snapshot",
                    json!({"disk_id": "d-2"}),
                    json!({"snapshot_id": "sn-1"}),
                    &s2,
                ),
            ],
        }])
        .with_initial_states([&s0]);
        let snapshot = |disk: &str| {
            (
                "create_snapshot",
                json!({"disk_id": disk}),
                json!({"snapshot_id": "sn-9"}),
            )
        };
        let instance = (
            "create_instance",
            json!({"name": "b"}),
            json!({"instance_id": "vm-7", "boot_disk": "d-7"}),
        );
        let found = |steps: &[(&str, Value, Value)]| flagged(steps, &fx, None);
        // A snapshot of a disk no state holds is of a phantom, until an instance made a disk
        // its answer did not name as one.
        assert_eq!(found(&[snapshot("d-7")]), [(0, "phantom_id")]);
        assert_eq!(found(&[instance, snapshot("d-7")]), []);
    }

    #[test]
    fn an_argument_holding_a_key_of_a_collection_names_its_record() {
        // Orders hold instruments' keys under `symbol`: a symbol names an instrument.
        let states = [json!({
            "instruments": {"ORCV": {"price": 3}, "CRVX": {"price": 480}, "ABC": {"price": 9}},
            "orders": {"O1": {"symbol": "ORCV"}, "O2": {"symbol": "CRVX"}, "O3": {"symbol": "ABC"}}
        })];
        let fx = Effects::default().with_initial_states(&states);
        assert_eq!(
            fx.any_initial_state().keyed_by,
            HashMap::from([("symbol".to_owned(), "instrument".to_owned())])
        );
        let price = |symbol: &str| {
            (
                "update_price",
                json!({"symbol": symbol, "last_price": 480}),
                json!({"success": true}),
            )
        };
        // (Each first: a guessed change may create anything, after it nothing is known whole.)
        assert_eq!(audit_calls(&t(&[price("CRVX")]), &fx, None).violations, []);
        // A read's argument may be a filter's sentinel: not held to the keys.
        let search = (
            "search_orders",
            json!({"symbol": "any"}),
            json!({"success": true, "data": []}),
        );
        assert_eq!(audit_calls(&t(&[search]), &fx, None).violations, []);
        let report = audit_calls(&t(&[price("CRVX-2")]), &fx, None);
        let seen: Vec<_> = (report.violations.iter())
            .map(|v| (v.step, v.kind.name(), v.explanation.clone()))
            .collect();
        assert_eq!(
            seen,
            [(
                0,
                "phantom_id",
                "update_price succeeds on symbol = \"CRVX-2\", naming instrument/CRVX-2, which the package's initial state does not hold; nothing created it since".to_owned()
            )]
        );
    }

    #[test]
    fn what_a_change_answers_by_a_new_id_exists() {
        use crate::audit::{AuditStep, AuditTrajectory};
        use std::sync::Arc;
        // Walks: cancel_appointment cancelled, and never promoted anyone (so never created).
        let s0 = json!({"appointments": {"A1": {"status": "booked"}, "A5": {"status": "booked"}}});
        let mut s1 = s0.clone();
        s1["appointments"]["A5"]["status"] = json!("cancelled");
        let fx = Effects::learn(&[AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0.clone()),
            steps: vec![AuditStep {
                tool: "cancel_appointment".into(),
                arguments: json!({"appointment_id": "A5"})
                    .as_object()
                    .cloned()
                    .unwrap(),
                observation: json!({"success": true}),
                success: Some(true),
                state_after: Arc::new(s1),
            }],
        }])
        .with_initial_states([&s0]);
        let get = |id: &str| {
            (
                "get_appointment",
                json!({"appointment_id": id}),
                json!({"appointment_id": id, "status": "booked"}),
            )
        };
        // Cancelling A1 promotes the waitlist into A2, which its answer names.
        let cancel = (
            "cancel_appointment",
            json!({"appointment_id": "A1"}),
            json!({"success": true, "new_appointment_id": "A2"}),
        );
        let report = audit_calls(&t(&[cancel, get("A2"), get("A3")]), &fx, None);
        let seen: Vec<_> = (report.violations.iter())
            .map(|v| (v.step, v.kind.name(), v.resource.clone()))
            .collect();
        assert_eq!(seen, [(2, "phantom_id", Some("appointment/A3".to_owned()))]);
    }

    #[test]
    fn a_status_a_change_moved_does_not_come_back() {
        let get = |status: &str| {
            (
                "get_reservation",
                json!({"reservation_id": "R1"}),
                json!({"reservation_id": "R1", "status": status, "seats": 2}),
            )
        };
        let cancel = (
            "cancel_reservation",
            json!({"reservation_id": "R1"}),
            json!({"success": true, "message": "Reservation cancelled"}),
        );
        // An unrelated change between does not excuse it.
        let other = ("add_note", json!({"text": "hi"}), json!({"success": true}));
        let steps = [get("confirmed"), cancel.clone(), other, get("confirmed")];
        assert_eq!(
            found(&steps),
            [(3, "status_reverted", Some("reservation/R1".into()), Some(1))]
        );
        assert_eq!(found(&[get("confirmed"), cancel, get("cancelled")]), []);
    }

    #[test]
    fn learned_writes_and_guards_judge_calls() {
        use crate::audit::{AuditStep, AuditTrajectory};
        use std::sync::Arc;
        // Walks where cancelling a cancelled reservation fails, and cancelling sets the status.
        let s0 = json!({"reservations": {"R1": {"status": "confirmed"}, "R2": {"status": "confirmed"}, "R3": {"status": "confirmed"}}});
        let mut s1 = s0.clone();
        s1["reservations"]["R1"]["status"] = json!("cancelled");
        let mut s1b = s1.clone();
        s1b["reservations"]["R3"]["status"] = json!("cancelled");
        let mut s2 = s1b.clone();
        s2["reservations"]["R2"]["status"] = json!("cancelled");
        let step = |args: Value, ok: bool, after: &Value| AuditStep {
            tool: "cancel_reservation".into(),
            arguments: args.as_object().cloned().unwrap(),
            observation: json!({"success": ok}),
            success: Some(ok),
            state_after: Arc::new(after.clone()),
        };
        let walks = [AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0.clone()),
            steps: vec![
                step(json!({"reservation_id": "R1"}), true, &s1),
                step(json!({"reservation_id": "R3"}), true, &s1b),
                step(json!({"reservation_id": "R2"}), true, &s2),
                step(json!({"reservation_id": "R1"}), false, &s2),
                step(json!({"reservation_id": "R2"}), false, &s2),
                step(json!({"reservation_id": "R1"}), false, &s2),
            ],
        }];
        let fx = Effects::learn(&walks);
        let call = |tool: &str, args: Value, obs: Value| CallStep {
            tool: tool.into(),
            arguments: args.as_object().cloned().unwrap(),
            success: guess_outcome(&obs),
            observation: obs,
        };
        let t = CallTrajectory {
            id: "t".into(),
            steps: vec![
                call(
                    "get_reservation",
                    json!({"reservation_id": "R1"}),
                    json!({"reservation_id": "R1", "status": "cancelled"}),
                ),
                // A happy-path flip: the walks always failed here.
                call(
                    "cancel_reservation",
                    json!({"reservation_id": "R1"}),
                    json!({"success": true}),
                ),
                call(
                    "cancel_reservation",
                    json!({"reservation_id": "R2"}),
                    json!({"success": true}),
                ),
                // The learned constant: R2 is cancelled now.
                call(
                    "get_reservation",
                    json!({"reservation_id": "R2"}),
                    json!({"reservation_id": "R2", "status": "confirmed"}),
                ),
            ],
        };
        let got: Vec<_> = audit_calls(&t, &fx, None)
            .violations
            .into_iter()
            .map(|v| (v.step, v.kind.name(), v.conflicting_step))
            .collect();
        assert_eq!(
            got,
            [
                (1, "precondition_failed", Some(0)),
                (3, "stale_read", Some(2))
            ]
        );
        // With the initial state known, a phantom id is seen, and the guard reads the status
        // there (the walks showed the cancel touches nothing but what it names, so what is
        // known of R1 holds across the cancel of R9).
        let t = CallTrajectory {
            id: "t".into(),
            steps: vec![
                call(
                    "cancel_reservation",
                    json!({"reservation_id": "R9"}),
                    json!({"success": true}),
                ),
                call(
                    "cancel_reservation",
                    json!({"reservation_id": "R1"}),
                    json!({"success": true}),
                ),
            ],
        };
        let cancelled = json!({"reservations": {"R1": {"status": "cancelled"}}});
        let got: Vec<_> = audit_calls(&t, &fx, Some(&cancelled))
            .violations
            .into_iter()
            .map(|v| (v.step, v.kind.name(), v.conflicting_step))
            .collect();
        assert_eq!(
            got,
            [(0, "phantom_id", None), (1, "precondition_failed", None)]
        );
    }

    #[test]
    fn a_change_pinned_to_its_target_keeps_what_is_known_of_others() {
        use crate::audit::{AuditStep, AuditTrajectory};
        use std::sync::Arc;
        // Walks: update_note sets the body from its argument and stamps the note; nothing else.
        let s0 = json!({"notes": {"N1": {"body": "a", "at": 0}, "N2": {"body": "b", "at": 0}}});
        let mut s1 = s0.clone();
        s1["notes"]["N1"] = json!({"body": "c", "at": 1});
        let mut s2 = s1.clone();
        s2["notes"]["N2"] = json!({"body": "d", "at": 2});
        let step = |id: &str, body: &str, after: &Value| AuditStep {
            tool: "update_note".into(),
            arguments: json!({"note_id": id, "body": body})
                .as_object()
                .cloned()
                .unwrap(),
            observation: json!({"success": true}),
            success: Some(true),
            state_after: Arc::new(after.clone()),
        };
        let fx = Effects::learn(&[AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0),
            steps: vec![step("N1", "c", &s1), step("N2", "d", &s2)],
        }]);
        assert!(fx.writes_of("update_note").only_target);
        let get = |id: &str, body: &str, at: u64| {
            (
                "get_note",
                json!({"note_id": id}),
                json!({"note_id": id, "body": body, "at": at}),
            )
        };
        let update = (
            "update_note",
            json!({"note_id": "N1", "body": "x"}),
            json!({"success": true}),
        );
        // The target's stamp moved (no flag); the other note is still what it was, so a read
        // showing another body is stale.
        let steps = [
            get("N1", "a", 0),
            get("N2", "b", 0),
            update,
            get("N1", "x", 5),
            get("N2", "zzz", 0),
        ];
        let found: Vec<_> = audit_calls(&t(&steps), &fx, None)
            .violations
            .into_iter()
            .map(|v| (v.step, v.kind.name(), v.resource, v.conflicting_step))
            .collect();
        assert_eq!(found, [(4, "stale_read", Some("note/N2".into()), Some(1))]);
    }

    #[test]
    fn a_change_that_cannot_create_a_type_leaves_its_ids_known() {
        use crate::audit::{AuditStep, AuditTrajectory};
        use std::sync::Arc;
        // Walks: bid_on_listing makes a bid and raises its listing's price and the bidder's
        // count (two records changed: not pinned to its target).
        let s0 = json!({"listings": {"L1": {"price": 5}, "L2": {"price": 7}},
                        "users": {"U1": {"bids": 0}}, "bids": {}});
        let mut s1 = s0.clone();
        s1["listings"]["L1"]["price"] = json!(6);
        s1["users"]["U1"]["bids"] = json!(1);
        s1["bids"]["B1"] = json!({"listing": "L1"});
        let mut s2 = s1.clone();
        s2["listings"]["L2"]["price"] = json!(8);
        s2["users"]["U1"]["bids"] = json!(2);
        s2["bids"]["B2"] = json!({"listing": "L2"});
        let step = |id: &str, after: &Value| AuditStep {
            tool: "bid_on_listing".into(),
            arguments: json!({"listing_id": id, "user_id": "U1"})
                .as_object()
                .cloned()
                .unwrap(),
            observation: json!({"success": true}),
            success: Some(true),
            state_after: Arc::new(after.clone()),
        };
        let fx = Effects::learn(&[AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0.clone()),
            steps: vec![step("L1", &s1), step("L2", &s2)],
        }])
        .with_initial_states([&s0]);
        let listing = |ids: &[&str]| {
            let items: Vec<Value> = ids.iter().map(|id| json!({"listing_id": id})).collect();
            ("browse_listings", json!({}), json!({"listings": items}))
        };
        let bid = (
            "bid_on_listing",
            json!({"listing_id": "L1", "user_id": "U1"}),
            json!({"success": true}),
        );
        // L9 is in no initial state, and a bid makes no listing.
        let report = audit_calls(&t(&[bid, listing(&["L1", "L2", "L9"])]), &fx, None);
        let seen: Vec<_> = (report.violations.iter())
            .map(|v| (v.step, v.kind.name(), v.resource.clone()))
            .collect();
        assert_eq!(seen, [(1, "phantom_id", Some("listing/L9".to_owned()))]);
    }

    #[test]
    fn created_things_are_in_the_listings_that_select_them() {
        let create = |id: &str, owner: &str| {
            (
                "create_note",
                json!({"owner": owner}),
                json!({"note_id": id, "owner": owner}),
            )
        };
        let list = |owner: &str, ids: &[&str]| {
            let items: Vec<Value> = ids
                .iter()
                .map(|id| json!({"note_id": id, "owner": owner}))
                .collect();
            (
                "list_notes",
                json!({"owner": owner}),
                json!({"notes": items}),
            )
        };
        let steps = [
            create("N1", "ann"),
            create("N2", "bob"),
            list("ann", &[]),
            list("bob", &["N2"]),
        ];
        assert_eq!(
            found(&steps),
            [(2, "list_inconsistent", Some("note/N1".into()), Some(0))]
        );
        // Deleted since: not expected.
        let deleted = [
            create("N1", "ann"),
            (
                "delete_note",
                json!({"note_id": "N1"}),
                json!({"success": true}),
            ),
            list("ann", &[]),
        ];
        assert_eq!(found(&deleted), []);
    }

    /// Executed walks of an issue tracker whose search takes `project_key` for the issues'
    /// `project` and whose creation stores `project_key` there without answering it.
    fn tracker_walks() -> Vec<super::super::AuditTrajectory> {
        use std::sync::Arc;
        let s0 = json!({"issues": {
            "I1": {"issue_id": "I1", "project": "OPS", "title": "disk"},
            "I2": {"issue_id": "I2", "project": "OPS", "title": "cpu"},
            "I3": {"issue_id": "I3", "project": "WEB", "title": "css"},
            "I4": {"issue_id": "I4", "project": "WEB", "title": "js"}}});
        let mut s1 = s0.clone();
        s1["issues"]["I5"] = json!({"issue_id": "I5", "project": "OPS", "title": "net"});
        let mut s2 = s1.clone();
        s2["issues"]["I6"] = json!({"issue_id": "I6", "project": "WEB", "title": "font"});
        let listing = |ids: &[&str], state: &Value| -> Value {
            let items: Vec<Value> = ids.iter().map(|i| state["issues"][*i].clone()).collect();
            json!({"issues": items})
        };
        let step =
            |tool: &str, args: Value, observation: Value, after: &Value| super::super::AuditStep {
                tool: tool.into(),
                arguments: args.as_object().cloned().unwrap(),
                observation,
                success: Some(true),
                state_after: Arc::new(after.clone()),
            };
        vec![super::super::AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0.clone()),
            steps: vec![
                step(
                    "search_issues",
                    json!({"project_key": "OPS"}),
                    listing(&["I1", "I2"], &s0),
                    &s0,
                ),
                step(
                    "search_issues",
                    json!({"project_key": "WEB"}),
                    listing(&["I3", "I4"], &s0),
                    &s0,
                ),
                step(
                    "create_issue",
                    json!({"project_key": "OPS", "title": "net"}),
                    json!({"issue_id": "I5", "title": "net"}),
                    &s1,
                ),
                step(
                    "create_issue",
                    json!({"project_key": "WEB", "title": "font"}),
                    json!({"issue_id": "I6", "title": "font"}),
                    &s2,
                ),
                step(
                    "search_issues",
                    json!({"project_key": "OPS"}),
                    listing(&["I1", "I2", "I5"], &s2),
                    &s2,
                ),
            ],
        }]
    }

    #[test]
    fn a_filtered_listing_holds_what_was_created_under_its_filter() {
        let fx = Effects::learn(&tracker_walks());
        assert_eq!(
            fx.writes_of("search_issues").filters,
            std::collections::BTreeMap::from([("project_key".to_owned(), "project".to_owned())])
        );
        let created = (
            "create_issue",
            json!({"project_key": "OPS", "title": "dns"}),
            json!({"issue_id": "I9", "title": "dns"}),
        );
        let search = |ids: &[&str]| {
            let items: Vec<Value> = ids
                .iter()
                .map(|i| json!({"issue_id": i, "project": "OPS"}))
                .collect();
            (
                "search_issues",
                json!({"project_key": "OPS"}),
                json!({"issues": items}),
            )
        };
        let omitted = t(&[created.clone(), search(&["I1", "I2"])]);
        let report = audit_calls(&omitted, &fx, None);
        let seen: Vec<_> = report
            .violations
            .iter()
            .map(|v| {
                (
                    v.step,
                    v.kind.name(),
                    v.resource.clone(),
                    v.conflicting_step,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [(1, "list_inconsistent", Some("issue/I9".to_owned()), Some(0))]
        );
        // Listed: nothing to say; another project's search: not expected there.
        assert_eq!(
            audit_calls(
                &t(&[created.clone(), search(&["I1", "I2", "I9"])]),
                &fx,
                None
            )
            .violations,
            []
        );
        let web = (
            "search_issues",
            json!({"project_key": "WEB"}),
            json!({"issues": [{"issue_id": "I3", "project": "WEB"}]}),
        );
        assert_eq!(
            audit_calls(&t(&[created.clone(), web]), &fx, None).violations,
            []
        );
        // Without what the walks taught, `project_key` is no field of an issue: no claim.
        assert_eq!(
            audit_calls(&omitted, &Effects::default(), None).violations,
            []
        );
    }

    /// The canonical stale read: a draft updated through `draft_id` is a message, and
    /// the next `open_message` of it — a change, since it marks the message read — shows the
    /// subject the update replaced, a field the walks never saw `open_message` write.
    #[test]
    fn an_update_through_another_noun_is_held_against_the_next_read() {
        use std::sync::Arc;
        let message = |subject: &str, read: bool| json!({"subject": subject, "read": read});
        let s0 = json!({"messages": {
            "m1": message("a", false), "m2": message("c", false), "m3": message("e", false)}});
        let mut walk = Vec::new();
        let mut state = s0.clone();
        for (id, subject) in [("m1", "b"), ("m2", "d")] {
            state["messages"][id]["subject"] = json!(subject);
            walk.push(super::super::AuditStep {
                tool: "update_draft".into(),
                arguments: json!({"draft_id": id, "subject": subject})
                    .as_object()
                    .cloned()
                    .unwrap(),
                observation: json!({"success": true, "changed": ["subject"]}),
                success: Some(true),
                state_after: Arc::new(state.clone()),
            });
        }
        for id in ["m1", "m2", "m3"] {
            state["messages"][id]["read"] = json!(true);
            let mut data = state["messages"][id].clone();
            data["message_id"] = json!(id);
            walk.push(super::super::AuditStep {
                tool: "open_message".into(),
                arguments: json!({"message_id": id}).as_object().cloned().unwrap(),
                observation: json!({"success": true, "data": data}),
                success: Some(true),
                state_after: Arc::new(state.clone()),
            });
        }
        let fx = Effects::learn(&[super::super::AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0),
            steps: walk,
        }]);
        assert_eq!(
            fx.writes_of("open_message").touches,
            BTreeSet::from(["read".to_owned()])
        );
        let open = |subject: &str| {
            (
                "open_message",
                json!({"message_id": "m1"}),
                json!({"success": true, "data": {"message_id": "m1", "subject": subject, "read": true}}),
            )
        };
        let update = (
            "update_draft",
            json!({"draft_id": "m1", "subject": "z"}),
            json!({"success": true, "changed": ["subject"]}),
        );
        let stale = t(&[open("a"), update.clone(), open("a")]);
        let seen: Vec<_> = audit_calls(&stale, &fx, None)
            .violations
            .into_iter()
            .map(|v| (v.step, v.kind.name(), v.resource, v.conflicting_step))
            .collect();
        assert_eq!(
            seen,
            [(2, "stale_read", Some("message/m1".to_owned()), Some(1))]
        );
        assert_eq!(
            audit_calls(&t(&[open("a"), update, open("z")]), &fx, None).violations,
            []
        );
        // What the change writes may differ: a message read again is no stale read.
        let unread = (
            "open_message",
            json!({"message_id": "m1"}),
            json!({"success": true, "data": {"message_id": "m1", "subject": "a", "read": false}}),
        );
        assert_eq!(
            audit_calls(&t(&[unread, open("a")]), &fx, None).violations,
            []
        );
    }

    #[test]
    fn a_record_in_no_initial_state_of_the_package_is_a_phantom() {
        let states = [
            json!({"issues": {"I1": {"title": "disk"}, "I2": {"title": "cpu"}}}),
            json!({"issues": {"I3": {"title": "css"}}}),
        ];
        let fx = Effects::default().with_initial_states(&states);
        let get = |id: &str| {
            (
                "get_issue",
                json!({"issue_id": id}),
                json!({"issue_id": id}),
            )
        };
        let steps = [
            get("I3"),
            get("I9"),
            (
                "create_issue",
                json!({"title": "new"}),
                json!({"issue_id": "I10", "title": "new"}),
            ),
            get("I10"),
        ];
        let report = audit_calls(&t(&steps), &fx, None);
        let seen: Vec<_> = report
            .violations
            .iter()
            .map(|v| {
                (
                    v.step,
                    v.kind.name(),
                    v.resource.clone(),
                    v.explanation.clone(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [(
                1,
                "phantom_id",
                Some("issue/I9".to_owned()),
                "get_issue succeeds on issue/I9, which none of the package's 2 initial states holds; nothing created it since".to_owned()
            )]
        );
        // Without the package's states nothing is known to be missing; with the trajectory's
        // own state the claim is the narrower one.
        assert_eq!(
            audit_calls(&t(&steps), &Effects::default(), None).violations,
            []
        );
        let own = audit_calls(&t(&steps), &fx, Some(&states[1]));
        assert_eq!(
            own.violations
                .iter()
                .map(|v| (v.step, v.kind.name()))
                .collect::<Vec<_>>(),
            [(1, "phantom_id")]
        );
    }

    #[test]
    fn an_id_created_under_another_name_is_no_phantom() {
        let states = [json!({"messages": {"msg-1": {"subject": "hi"}}})];
        let fx = Effects::default().with_initial_states(&states);
        let get = |id: &str| {
            (
                "get_message",
                json!({"message_id": id}),
                json!({"id": id, "subject": "x"}),
            )
        };
        // A draft is a message: the id `create_draft` answered as `draft_id` is the one a
        // later `get_message` opens; an id nothing made stays a phantom.
        let steps = [
            (
                "create_draft",
                json!({"subject": "x"}),
                json!({"success": true, "draft_id": "msg-2"}),
            ),
            get("msg-2"),
            get("msg-7"),
        ];
        let report = audit_calls(&t(&steps), &fx, None);
        let seen: Vec<_> = (report.violations.iter())
            .map(|v| (v.step, v.kind.name(), v.resource.clone()))
            .collect();
        assert_eq!(seen, [(2, "phantom_id", Some("message/msg-7".to_owned()))]);
    }

    fn truth() -> super::super::AuditTrajectory {
        use super::super::{AuditStep, AuditTrajectory};
        let s = |tool: &str, args: Value, obs: Value, ok: bool, after: Value| AuditStep {
            tool: tool.into(),
            arguments: args.as_object().cloned().unwrap(),
            observation: obs,
            success: Some(ok),
            state_after: std::sync::Arc::new(after),
        };
        let one = json!({"rooms": {"R1": {"name": "a"}}});
        let two = json!({"rooms": {"R1": {"name": "a"}, "R2": {"name": "b"}}});
        AuditTrajectory {
            id: "truth".into(),
            initial_state: one.clone().into(),
            steps: vec![
                s(
                    "get_room",
                    json!({"room_id": "R9"}),
                    json!({"success": false, "error": "Room R9 not found"}),
                    false,
                    one.clone(),
                ),
                s(
                    "create_room",
                    json!({"name": "b"}),
                    json!({"success": true, "data": {"id": "R2"}}),
                    true,
                    two.clone(),
                ),
                s(
                    "get_room",
                    json!({"room_id": "R2"}),
                    json!({"success": true, "data": {"id": "R2", "name": "b"}}),
                    true,
                    two.clone(),
                ),
                s(
                    "list_rooms",
                    json!({}),
                    json!({"success": true, "data": [{"id": "R1"}, {"id": "R2"}]}),
                    true,
                    two.clone(),
                ),
                s(
                    "delete_room",
                    json!({"room_id": "R2"}),
                    json!({"success": true}),
                    true,
                    one.clone(),
                ),
                s(
                    "get_room",
                    json!({"room_id": "R2"}),
                    json!({"success": false, "error": "Room R2 not found"}),
                    false,
                    one,
                ),
            ],
        }
    }

    #[test]
    fn planted_faults_are_labelled_where_they_show() {
        use super::super::FaultKind;
        let rule = crate::outcome::OutcomeRule::success_key();
        let truth = truth();
        let plant = |kind| {
            let mut rng = crate::rng::Rng::new(7);
            super::super::inject_calls(&truth, kind, &rule, &mut rng)
                .map(|(t, l)| (t, l.step, l.resource))
        };
        let (t, step, resource) = plant(FaultKind::VanishedCreate).unwrap();
        assert_eq!((step, resource.as_deref()), (2, Some("rooms/R2")));
        assert_eq!(
            t.steps[2].observation,
            json!({"success": false, "error": "room R2 not found"})
        );
        let (t, step, _) = plant(FaultKind::ResurrectedDelete).unwrap();
        assert_eq!((step, t.steps[5].success), (5, Some(true)));
        assert_eq!(
            t.steps[5].observation,
            json!({"success": true, "data": {"name": "b"}})
        );
        let (t, step, resource) = plant(FaultKind::PhantomEntity).unwrap();
        assert_eq!(
            (step, resource.as_deref(), t.steps[0].success),
            (0, Some("R9"), Some(true))
        );
        let (t, step, _) = plant(FaultKind::ListOmission).unwrap();
        assert_eq!(step, 3);
        assert_eq!(
            t.steps[3].observation["data"].as_array().map(Vec::len),
            Some(1)
        );
        assert!(plant(FaultKind::DroppedUpdate).is_none());
        // No status to revert here; a phantom copy joins the listing under a fresh id.
        assert!(plant(FaultKind::RevertedStatus).is_none());
        let (t, step, resource) = plant(FaultKind::PhantomCopy).unwrap();
        assert_eq!(step, 3);
        let listed = t.steps[3].observation["data"].as_array().unwrap();
        assert_eq!(listed.len(), 3);
        let fresh = resource.unwrap();
        assert!(fresh == "R1-2" || fresh == "R2-2", "{fresh}");
        // Seen against the initial state, which is a complete listing of the rooms.
        let found: Vec<_> = audit_calls(&t, &Effects::default(), Some(&truth.initial_state))
            .violations
            .into_iter()
            .map(|v| (v.step, v.kind.name(), v.resource))
            .collect();
        assert_eq!(found, [(3, "phantom_id", Some(format!("room/{fresh}")))]);
        // The audit of the calls finds the vanished create and the resurrected delete at their
        // steps (and nothing in the clean calls).
        let fx = Effects::default();
        assert_eq!(
            audit_calls(&CallTrajectory::from(&truth), &fx, None).violations,
            []
        );
        for kind in [FaultKind::VanishedCreate, FaultKind::ResurrectedDelete] {
            let (t, step, _) = plant(kind).unwrap();
            let report = audit_calls(&t, &fx, None);
            assert!(
                report
                    .violations
                    .iter()
                    .any(|v| v.step == step && kind.found_by().contains(&v.kind)),
                "{kind:?}: {:?}",
                report.violations
            );
        }
    }
}

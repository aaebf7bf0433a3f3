//! The lists a record holds (an order's `items`, a user's `reservations`), read against later
//! calls: a successful call that names the record and an entry its last answer did not list
//! shows that the answer omitted the entry. τ²-bench's answers keep such lists inside one
//! record rather than as listings of their own, so the listing checks of
//! [`super::observed`] never see them.
//!
//! An entry is typed by the singular of its list's field (`items` → `item`) and named by
//! `<noun>_id` or `<noun>_number` in an object (`{"item_id": "7363354090"}`), or is the
//! string itself in a list of strings (`"reservations": ["ZFA04Y"]`); in a list of flat
//! objects none of which has an id (a reservation's `passengers`), an entry is named by its
//! content, and since a changed entry is then another name, only a list that grew (or, read
//! again, shrank) shows an omission. A later call names the
//! record with `<record noun>_id` and an entry with `<noun>_id`, `<noun>_ids`, `<noun>_number`
//! or `<noun>_numbers` (a string, an integer or a list of them). Tools that may create (by
//! their effects or their name: `add_item_to_order`) are not held to the list, since they may
//! be what adds the entry; a change that names the record, or one whose reach is unknown,
//! forgets what was listed.
//!
//! With the initial state known, an answer's reference to a collection of that state
//! (`"payment_method_id": "gift_card_7"` where the state has `payment_methods`, at any depth)
//! must name one of its entries, a value the state's own references hold (a sentinel such as
//! `"grader_id": "auto"`), or an id an earlier step or the call itself showed, until a
//! call that may create succeeds (what it made need not have been shown): a simulator that
//! copies a record under a new id (`gift_card_7-2`) invents what it refers to.

use super::implied::{id_text, id_texts};
use super::nouns::{id_noun, singular, tool_noun, words};
use super::observed::CallTrajectory;
use super::{resource_refs, Effects, Site, ToolEffects, Violation, ViolationKind};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// A record known from an answer: (its noun, its id).
type Record = (String, String);

/// What a record's answer listed: the step, and per entry noun the entries.
type Listed = (usize, BTreeMap<String, Entries>);

/// The entries of one list of a record.
#[derive(Clone, Debug, PartialEq)]
struct Entries {
    /// Each entry's id, or its content where entries have no id.
    names: BTreeSet<String>,
    /// How many entries the list held (entries named by their content may repeat).
    count: usize,
    /// Whether entries are named by their content (`passengers`, objects of names and a date
    /// of birth with no `passenger_id`): a changed entry is then another name, so only a list
    /// that grew or shrank tells an omission from a change.
    by_content: bool,
}

/// The checks of the module doc on one trajectory: the constraints checked and the
/// violations (`list_inconsistent`, at the later call, naming the answer's step as the one it
/// conflicts with).
pub(crate) fn nested_list_checks(
    trajectory: &CallTrajectory,
    effects: &Effects,
    initial: Option<&Value>,
) -> (usize, Vec<Violation>) {
    let mut checked = 0;
    let mut violations = Vec::new();
    let mut shown: HashMap<Record, Listed> = HashMap::new();
    let known = initial.map(known_ids).unwrap_or_default();
    // Values the initial state itself gives references (`"grader_id": "auto"` for what no
    // grader graded): a sentinel the environment uses is no invented id.
    let mut state_refs: HashSet<String> = HashSet::new();
    if let Some(state) = initial.filter(|_| !known.is_empty()) {
        let mut refs = Vec::new();
        references(state, &known, 0, &mut refs);
        state_refs.extend(refs.into_iter().map(|(_, _, id)| id));
    }
    // Every id-like value the trajectory has shown so far.
    let mut seen: HashSet<String> = HashSet::new();
    // Whether a call that may have created something succeeded: ids it made need not have
    // been shown (`submit_exam` answering only "Submitted"), so references are judged no more.
    let mut created = false;
    // Per record, the entries calls that may create made under it (`add_comment(issue_id=…)`
    // answering `comment_id`): (step, entry noun, id).
    let mut made: HashMap<Record, Vec<(usize, String, String)>> = HashMap::new();
    for (k, step) in trajectory.steps.iter().enumerate() {
        let fx = effects.of(&step.tool);
        let adds = may_create(&fx, &step.tool);
        let named = records_named(&step.arguments);
        let site = Site {
            trajectory: &trajectory.id,
            step: k,
            tool: &step.tool,
            effects: fx.source,
        };
        // An entry a record's answer lists, against the answer of step `j`.
        let list_inconsistent =
            |record: &(String, String), noun: &str, j: usize, explanation: String| {
                site.violation(
                    ViolationKind::ListInconsistent,
                    Some(format!("{}/{}", record.0, record.1)),
                    Some(noun.to_owned()),
                    Some(j),
                    explanation,
                )
            };
        if !known.is_empty() {
            step.arguments.values().for_each(|v| scalars(v, &mut seen));
        }
        if step.success == Some(true) && fx.read_only && !known.is_empty() && !created {
            let mut refs = Vec::new();
            references(&step.observation, &known, 0, &mut refs);
            for (field, noun, id) in refs {
                checked += 1;
                if !known[&noun].contains(&id) && !seen.contains(&id) && !state_refs.contains(&id) {
                    let explanation = format!(
                        "{} answers {field} = {id:?}, which no {noun} of the initial state holds and no earlier step showed",
                        step.tool
                    );
                    violations.push(site.violation(
                        ViolationKind::PhantomId,
                        Some(format!("{noun}/{id}")),
                        Some(field.clone()),
                        None,
                        explanation,
                    ));
                }
            }
        }
        if !known.is_empty() {
            scalars(&step.observation, &mut seen);
        }
        // A creation the walks saw make one thing at most, whose answer names what it made,
        // made nothing unshown: references stay judged, with its ids known.
        let answered = super::observed::ids_answered(&step.observation, &step.arguments);
        let made_all_shown = fx.max_created <= 1 && !answered.is_empty();
        if step.success == Some(true) && made_all_shown {
            seen.extend(answered.iter().map(|(_, id)| id.clone()));
        }
        created |= step.success == Some(true)
            && !fx.read_only
            && (!fx.creates.is_empty() || !fx.creates_known)
            && !made_all_shown;
        if step.success == Some(true) && !adds {
            for record in &named {
                let Some((j, lists)) = shown.get(record) else {
                    continue;
                };
                for (noun, ids) in entries_named(&step.arguments) {
                    let Some(listed) = lists.get(&noun).filter(|l| !l.by_content) else {
                        continue;
                    };
                    for id in ids {
                        checked += 1;
                        if !listed.names.contains(&id) {
                            let explanation = format!(
                                "{} succeeds on {noun} {id} of {} {}, which the answer of step {j} listed without it; nothing changed {} {} since",
                                step.tool, record.0, record.1, record.0, record.1
                            );
                            violations.push(list_inconsistent(record, &noun, *j, explanation));
                        }
                    }
                }
            }
        }
        // The answer is the record again (a read, or a change answering with the record it
        // changed): an entry it lists that the earlier answer lacked, and that the call does
        // not name (a replaced item's new id), was left out of the earlier answer.
        let again = (step.success == Some(true))
            .then(|| record_lists_any(&step.observation, &shown))
            .flatten();
        if let Some((record, lists)) = &again {
            if !adds {
                let (j, before) = &shown[record];
                let mut in_call = HashSet::new();
                step.arguments
                    .values()
                    .for_each(|v| scalars(v, &mut in_call));
                for (noun, now) in lists {
                    let Some(listed) = before.get(noun) else {
                        continue;
                    };
                    checked += 1;
                    // An entry named by its content is named by the call when the call holds
                    // every value of it (`update_reservation_passengers` giving the names).
                    let named_by_call = |name: &String| {
                        if now.by_content {
                            content_values(name).iter().all(|v| in_call.contains(v))
                        } else {
                            in_call.contains(name)
                        }
                    };
                    let grew = !now.by_content || now.count > listed.count;
                    let shrank = !now.by_content || now.count < listed.count;
                    let omitted = now
                        .names
                        .iter()
                        .find(|id| !listed.names.contains(*id) && !named_by_call(id))
                        .filter(|_| grew);
                    // A later read with no change between lists what the earlier one did.
                    let dropped = fx
                        .read_only
                        .then(|| listed.names.iter().find(|id| !now.names.contains(*id)))
                        .flatten()
                        .filter(|_| shrank);
                    let what = match (omitted, dropped) {
                        (Some(id), _) => {
                            format!("lists {noun} {id}, which the answer of step {j} left out")
                        }
                        (None, Some(id)) => {
                            format!("leaves out {noun} {id}, which the answer of step {j} listed")
                        }
                        (None, None) => continue,
                    };
                    let explanation = format!(
                        "{} answers {} {} and {what}; nothing that adds {noun}s to it ran between",
                        step.tool, record.0, record.1
                    );
                    violations.push(list_inconsistent(record, noun, *j, explanation));
                }
            }
        }
        // The record answered after a call made an entry under it lists the entry, in the
        // list of its noun (`comments` for a comment) or in one whose entries are named like
        // it (`lines` keyed `K-20115`, `K-20116` for a ticket `K-20210`).
        if step.success == Some(true) && fx.read_only {
            if let Some(answer) = super::observed::payload(&step.observation) {
                for (record, entries) in &made {
                    if !is_record(answer, record) {
                        continue;
                    }
                    for (j, noun, id) in entries {
                        let Some((field, listed)) = entry_list(answer, noun, id) else {
                            continue;
                        };
                        checked += 1;
                        if !listed.contains(id) {
                            let explanation = format!(
                                "{} answers {} {} with {field} without {noun} {id}, which step {j} made under it; nothing changed {} {} since",
                                step.tool, record.0, record.1, record.0, record.1
                            );
                            violations.push(list_inconsistent(record, noun, *j, explanation));
                        }
                    }
                }
            }
        }
        if step.success != Some(false) && !fx.read_only {
            if named.is_empty() {
                shown.clear();
                made.clear();
            } else {
                let mut in_call = HashSet::new();
                step.arguments
                    .values()
                    .for_each(|v| scalars(v, &mut in_call));
                for record in &named {
                    shown.remove(record);
                    made.remove(record);
                }
                // A call naming a made entry may remove or move it.
                for entries in made.values_mut() {
                    entries.retain(|(_, _, id)| !in_call.contains(id));
                }
                if adds && step.success == Some(true) {
                    for (noun, id) in &answered {
                        for record in &named {
                            made.entry(record.clone()).or_default().push((
                                k,
                                noun.clone(),
                                id.clone(),
                            ));
                        }
                    }
                }
            }
        }
        if step.success == Some(true) {
            let answered = if fx.read_only {
                record_lists(&step.tool, &step.observation)
            } else {
                None
            };
            if let Some((record, lists)) = answered.or(again) {
                shown.insert(record, (k, lists));
            }
        }
    }
    (checked, violations)
}

/// Whether an answer is `record` itself: its `<noun>_id`, or its bare `id`, is the record's.
fn is_record(answer: &Map<String, Value>, record: &Record) -> bool {
    let (noun, id) = record;
    [format!("{noun}_id"), "id".to_owned()]
        .iter()
        .any(|key| answer.get(key).and_then(id_text).as_deref() == Some(id.as_str()))
}

/// The list of a record's answer a made entry belongs in, and the ids it holds: the field whose
/// singular is the entry's noun (`comments`), else one whose entries' ids all have the entry
/// id's shape (`K-20115` for `K-20210`). Entries are a list of ids, of objects with
/// `<noun>_id` or `id`, or a map keyed by ids.
fn entry_list<'a>(
    answer: &'a Map<String, Value>,
    noun: &str,
    id: &str,
) -> Option<(&'a str, HashSet<String>)> {
    let ids_of = |value: &Value| -> Option<HashSet<String>> {
        match value {
            Value::Array(items) => items
                .iter()
                .map(|item| match item {
                    Value::Object(fields) => [format!("{noun}_id"), "id".to_owned()]
                        .iter()
                        .find_map(|key| fields.get(key))
                        .and_then(id_text),
                    other => id_text(other),
                })
                .collect(),
            Value::Object(map) => Some(map.keys().cloned().collect()),
            _ => None,
        }
    };
    let named = answer
        .iter()
        .find(|(field, value)| singular(field) == noun && **field != noun && !value.is_string());
    if let Some((field, value)) = named {
        return Some((field.as_str(), ids_of(value)?));
    }
    answer.iter().find_map(|(field, value)| {
        let ids = ids_of(value)?;
        (!ids.is_empty() && ids.iter().all(|other| shape(other) == shape(id)))
            .then_some((field.as_str(), ids))
    })
}

/// An id's shape: its characters with every digit as `9` (`K-20115` → `K-99999`).
fn shape(id: &str) -> String {
    id.chars()
        .map(|c| if c.is_ascii_digit() { '9' } else { c })
        .collect()
}

/// The ids of every collection of a state (its resources, [`super::resources`]), by the
/// singular of the collection's name (`users/*/payment_methods` → `payment_method`).
fn known_ids(state: &Value) -> HashMap<String, HashSet<String>> {
    let mut out: HashMap<String, HashSet<String>> = HashMap::new();
    for (kind, id) in resource_refs(state).into_keys() {
        let name = kind.rsplit('/').next().unwrap_or_default();
        out.entry(singular(name)).or_default().insert(id.to_owned());
    }
    out
}

/// Every string and whole number of a value, as ids are compared.
fn scalars(value: &Value, out: &mut HashSet<String>) {
    id_texts(value, false, out);
}

/// The references of an answer to known collections: (field, noun, id) for each
/// `<noun>_id` field, at any depth, whose noun is a collection of the known state.
fn references(
    value: &Value,
    known: &HashMap<String, HashSet<String>>,
    depth: usize,
    out: &mut Vec<(String, String, String)>,
) {
    if depth > 6 {
        return;
    }
    match value {
        Value::Object(map) => {
            for (field, child) in map {
                if let (Some(noun), Some(id)) = (record_noun(field), id_text(child)) {
                    if known.contains_key(&noun) {
                        out.push((field.clone(), noun, id));
                    }
                }
                references(child, known, depth + 1, out);
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|item| references(item, known, depth + 1, out)),
        _ => {}
    }
}

/// Whether a tool may add entries: its effects create something, or its name says it
/// creates.
fn may_create(fx: &ToolEffects, tool: &str) -> bool {
    !fx.creates.is_empty() || !ToolEffects::guess(tool).creates.is_empty()
}

/// The records a call's arguments name: `<noun>_id` with a string or integer.
fn records_named(arguments: &Map<String, Value>) -> Vec<Record> {
    arguments
        .iter()
        .filter_map(|(name, value)| {
            let noun = record_noun(name)?;
            Some((noun, id_text(value)?))
        })
        .collect()
}

/// The entries a call's arguments name, by noun: `<noun>_id(s)`, `<noun>_number(s)`.
fn entries_named(arguments: &Map<String, Value>) -> Vec<(String, Vec<String>)> {
    arguments
        .iter()
        .filter_map(|(name, value)| {
            let noun = entry_noun(name)?;
            let ids: Vec<String> = match value {
                Value::Array(items) => items.iter().filter_map(id_text).collect(),
                other => vec![id_text(other)?],
            };
            Some((noun, ids))
        })
        .collect()
}

/// The noun of a key naming one record (`order_id` → `order`); `None` for a bare `id` or
/// another key.
fn record_noun(key: &str) -> Option<String> {
    id_noun(key).filter(|noun| !noun.is_empty())
}

/// The noun of a key naming entries (`item_ids` → `item`, `flight_number` → `flight`): its last
/// word `id`, `ids`, `number` or `numbers`; `None` for a bare `id` or another key.
fn entry_noun(key: &str) -> Option<String> {
    let w = words(key);
    let (end, stem) = w.split_last()?;
    if stem.is_empty() || !["id", "ids", "number", "numbers"].contains(&end.as_str()) {
        return None;
    }
    let mut stem = stem.to_vec();
    if let Some(noun) = stem.last_mut() {
        *noun = singular(noun);
    }
    Some(stem.join("_"))
}

/// The record an answer is (an object with the tool's `<noun>_id`), with the entries of each
/// of its lists whose entries are named (module doc).
fn record_lists(tool: &str, observation: &Value) -> Option<(Record, BTreeMap<String, Entries>)> {
    let map = observation.as_object()?;
    let noun = tool_noun(tool);
    let id = id_text(map.get(&format!("{noun}_id"))?)?;
    let lists = lists_of(map);
    (!lists.is_empty()).then_some(((noun, id), lists))
}

/// [`record_lists`] of an answer that is a record already shown, found by any `<noun>_id`
/// field of it (a change's answer: `return_delivered_order_items` answers the order).
fn record_lists_any(
    observation: &Value,
    shown: &HashMap<Record, Listed>,
) -> Option<(Record, BTreeMap<String, Entries>)> {
    let map = observation.as_object()?;
    let record = map.iter().find_map(|(field, value)| {
        let record = (record_noun(field)?, id_text(value)?);
        shown.contains_key(&record).then_some(record)
    })?;
    let lists = lists_of(map);
    (!lists.is_empty()).then_some((record, lists))
}

/// The entries of each list of a record whose entries are named (module doc), or, for a
/// list of objects none of which has an id, named by their content.
fn lists_of(map: &Map<String, Value>) -> BTreeMap<String, Entries> {
    let mut lists = BTreeMap::new();
    for (field, value) in map {
        let Value::Array(items) = value else {
            continue;
        };
        let entry = singular(field);
        if entry == *field {
            continue;
        }
        let ids: Option<BTreeSet<String>> = items
            .iter()
            .map(|item| match item {
                Value::Object(fields) => ["id", "number"]
                    .iter()
                    .find_map(|suffix| fields.get(&format!("{entry}_{suffix}")))
                    .and_then(id_text),
                Value::String(_) => id_text(item),
                _ => None,
            })
            .collect();
        let entries = match ids {
            Some(names) => Entries {
                names,
                count: items.len(),
                by_content: false,
            },
            None => match by_content(items) {
                Some(names) => Entries {
                    names,
                    count: items.len(),
                    by_content: true,
                },
                None => continue,
            },
        };
        lists.insert(entry, entries);
    }
    lists
}

/// Entries named by their content: every entry an object of scalar fields only (strings,
/// numbers, booleans, null), none with an id field (`*_id`, `id`); each named by its fields
/// in key order. `None` for any other list.
fn by_content(items: &[Value]) -> Option<BTreeSet<String>> {
    items
        .iter()
        .map(|item| {
            let fields = item.as_object().filter(|f| !f.is_empty())?;
            let mut named: Vec<(&String, &Value)> = fields.iter().collect();
            if named.iter().any(|(k, v)| {
                v.is_object() || v.is_array() || k.as_str() == "id" || id_noun(k).is_some()
            }) {
                return None;
            }
            named.sort_by(|a, b| a.0.cmp(b.0));
            serde_json::to_string(&named).ok()
        })
        .collect()
}

/// The values of an entry named by its content, as ids are compared ([`scalars`]).
fn content_values(name: &str) -> Vec<String> {
    let fields: Vec<(String, Value)> = serde_json::from_str(name).unwrap_or_default();
    let mut out = HashSet::new();
    for (_, v) in &fields {
        scalars(v, &mut out);
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::observed::CallStep;
    use serde_json::json;

    fn call(tool: &str, arguments: Value, observation: Value) -> CallStep {
        CallStep {
            tool: tool.into(),
            arguments: arguments.as_object().cloned().unwrap_or_default(),
            observation,
            success: Some(true),
        }
    }

    fn order(items: &[&str]) -> Value {
        json!({"order_id": "#W1", "status": "delivered",
               "items": items.iter().map(|i| json!({"item_id": i, "price": 10})).collect::<Vec<_>>(),
               "payment_history": [{"payment_method_id": "card_1", "amount": 20}]})
    }

    /// `get_order_details` of order #W1 listing `items`.
    fn read_order(items: &[&str]) -> CallStep {
        call(
            "get_order_details",
            json!({"order_id": "#W1"}),
            order(items),
        )
    }

    /// A flag as the tests compare it: (step, conflicting step, resource).
    type Flag = (usize, Option<usize>, Option<String>);

    fn checks(steps: Vec<CallStep>) -> (usize, Vec<Flag>) {
        let t = CallTrajectory {
            id: "t".into(),
            steps,
        };
        let (checked, violations) = nested_list_checks(&t, &Effects::default(), None);
        (
            checked,
            violations
                .iter()
                .map(|v| (v.step, v.conflicting_step, v.resource.clone()))
                .collect(),
        )
    }

    #[test]
    fn an_entry_a_call_made_under_a_record_is_in_its_list() {
        let issue = |comments: Value| json!({"success": true, "data": {"id": "PAY-2", "title": "x", "comments": comments}});
        let get =
            |comments: Value| call("get_issue", json!({"issue_id": "PAY-2"}), issue(comments));
        let add = call(
            "add_comment",
            json!({"issue_id": "PAY-2", "body": "fixed"}),
            json!({"success": true, "comment_id": "C-3"}),
        );
        // Read back without the comment: flagged at the read, against the addition.
        assert_eq!(
            checks(vec![add.clone(), get(json!([{"comment_id": "C-1"}]))]),
            (1, vec![(1, Some(0), Some("issue/PAY-2".to_owned()))])
        );
        assert_eq!(
            checks(vec![
                add.clone(),
                get(json!([{"comment_id": "C-1"}, {"comment_id": "C-3"}]))
            ])
            .1,
            vec![]
        );
        // Deleted since (a call naming it): not expected.
        let delete = call(
            "delete_comment",
            json!({"comment_id": "C-3"}),
            json!({"success": true}),
        );
        assert_eq!(checks(vec![add, delete, get(json!([]))]).1, vec![]);
        // A map keyed by ids of the made entry's shape (`lines` of a bill, a ticket made).
        let order = call(
            "place_order",
            json!({"bill_id": "B1", "item_id": "SOUP"}),
            json!({"success": true, "ticket_id": "K-20210"}),
        );
        let bill = |lines: Value| {
            call(
                "get_bill",
                json!({"bill_id": "B1"}),
                json!({"success": true, "data": {"bill_id": "B1", "lines": lines}}),
            )
        };
        assert_eq!(
            checks(vec![order.clone(), bill(json!({"K-20115": {"qty": 1}}))]).1,
            vec![(1, Some(0), Some("bill/B1".to_owned()))]
        );
        assert_eq!(
            checks(vec![
                order,
                bill(json!({"K-20115": {"qty": 1}, "K-20210": {"qty": 1}}))
            ])
            .1,
            vec![]
        );
    }

    #[test]
    fn an_entry_named_later_was_omitted_from_the_list() {
        let returned = json!({"order_id": "#W1", "status": "return requested"});
        // The answer of step 0 lists one of the two items that step 1 returns.
        let (checked, found) = checks(vec![
            read_order(&["A"]),
            call(
                "return_delivered_order_items",
                json!({"order_id": "#W1", "item_ids": ["A", "B"], "payment_method_id": "card_1"}),
                returned.clone(),
            ),
        ]);
        assert_eq!(checked, 2);
        assert_eq!(found, [(1, Some(0), Some("order/#W1".to_owned()))]);
        // Both listed: nothing to flag; `new_item_ids` name other things.
        let (_, found) = checks(vec![
            read_order(&["A", "B"]),
            call(
                "exchange_delivered_order_items",
                json!({"order_id": "#W1", "item_ids": ["A"], "new_item_ids": ["Z"]}),
                returned.clone(),
            ),
        ]);
        assert_eq!(found, []);
        // A change of the order between may have added the item.
        let (_, found) = checks(vec![
            read_order(&["A"]),
            call(
                "modify_pending_order_items",
                json!({"order_id": "#W1", "item_ids": ["A"], "new_item_ids": ["B"]}),
                returned.clone(),
            ),
            call(
                "return_delivered_order_items",
                json!({"order_id": "#W1", "item_ids": ["B"]}),
                returned.clone(),
            ),
        ]);
        assert_eq!(found, []);
        // A tool that adds is not held to the list.
        let (checked, found) = checks(vec![
            read_order(&["A"]),
            call(
                "add_item_to_order",
                json!({"order_id": "#W1", "item_id": "B"}),
                returned.clone(),
            ),
        ]);
        assert_eq!((checked, found), (0, vec![]));
        // A failed call says nothing.
        let mut failed = call(
            "return_delivered_order_items",
            json!({"order_id": "#W1", "item_ids": ["B"]}),
            json!("Error: item not found"),
        );
        failed.success = Some(false);
        let (_, found) = checks(vec![read_order(&["A"]), failed]);
        assert_eq!(found, []);
    }

    #[test]
    fn the_record_answered_again_shows_what_an_answer_left_out() {
        // The return answers the order with item B, which step 0 left out.
        let (_, found) = checks(vec![
            read_order(&["A"]),
            call(
                "return_delivered_order_items",
                json!({"order_id": "#W1", "item_ids": ["A"]}),
                order(&["A", "B"]),
            ),
        ]);
        assert_eq!(found, [(1, Some(0), Some("order/#W1".to_owned()))]);
        // A replaced item's new id is named by the call: no omission.
        let (_, found) = checks(vec![
            read_order(&["A"]),
            call(
                "modify_pending_order_items",
                json!({"order_id": "#W1", "item_ids": ["A"], "new_item_ids": ["B"]}),
                order(&["B"]),
            ),
            // The change's answer is what the order holds now.
            read_order(&["B"]),
        ]);
        assert_eq!(found, []);
        // A read with nothing changed between leaves out what the earlier one listed.
        let (_, found) = checks(vec![read_order(&["A", "B"]), read_order(&["A"])]);
        assert_eq!(found, [(1, Some(0), Some("order/#W1".to_owned()))]);
    }

    /// A reservation as τ²-bench's airline answers it: passengers without ids.
    fn reservation(passengers: &[(&str, &str)]) -> Value {
        let passengers: Vec<Value> = (passengers.iter())
            .map(|(first, dob)| json!({"first_name": first, "last_name": "Lee", "dob": dob}))
            .collect();
        json!({"reservation_id": "R1", "status": null, "passengers": passengers,
               "flights": [{"flight_number": "HAT1", "date": "2024-05-20"}]})
    }

    #[test]
    fn entries_without_ids_are_named_by_their_content() {
        let read = |p: &[(&str, &str)]| {
            call(
                "get_reservation_details",
                json!({"reservation_id": "R1"}),
                reservation(p),
            )
        };
        let ann = ("Ann", "1990-01-01");
        let bob = ("Bob", "1985-02-03");
        // The cancellation answers the reservation with Bob, whom step 0 left out.
        let (_, found) = checks(vec![
            read(&[ann]),
            call(
                "cancel_reservation",
                json!({"reservation_id": "R1"}),
                reservation(&[ann, bob]),
            ),
        ]);
        assert_eq!(found, [(1, Some(0), Some("reservation/R1".to_owned()))]);
        // A change that gives the passengers names them: no omission.
        let (_, found) = checks(vec![
            read(&[ann]),
            call(
                "update_reservation_passengers",
                json!({"reservation_id": "R1", "passengers": [
                    {"first_name": "Ann", "last_name": "Lee", "dob": "1990-01-01"},
                    {"first_name": "Bob", "last_name": "Lee", "dob": "1985-02-03"}]}),
                reservation(&[ann, bob]),
            ),
        ]);
        assert_eq!(found, []);
        // A passenger changed in place is another content, but the list did not grow.
        let (_, found) = checks(vec![
            read(&[ann]),
            call(
                "fix_passenger_dob",
                json!({"reservation_id": "R1"}),
                reservation(&[("Ann", "1990-01-02")]),
            ),
        ]);
        assert_eq!(found, []);
        // Two reads with nothing between: the second leaves out a passenger.
        let (_, found) = checks(vec![read(&[ann, bob]), read(&[ann])]);
        assert_eq!(found, [(1, Some(0), Some("reservation/R1".to_owned()))]);
        // Entries with nested values are not named by content.
        let nested = json!([{"tracking_id": ["T1"], "item_ids": ["A"]}]);
        assert_eq!(by_content(nested.as_array().unwrap()), None);
        let with_id = json!([{"payment_id": "card_1", "amount": 10}]);
        assert_eq!(by_content(with_id.as_array().unwrap()), None);
    }

    #[test]
    fn lists_of_ids_and_numbered_entries_are_read() {
        let user = json!({"user_id": "u1", "reservations": ["R1", "R2"]});
        let (checked, found) = checks(vec![
            call("get_user_details", json!({"user_id": "u1"}), user),
            call(
                "send_certificate",
                json!({"user_id": "u1", "reservation_id": "R3"}),
                json!("sent"),
            ),
        ]);
        assert_eq!((checked, found.len()), (1, 1));
        let reservation = json!({"reservation_id": "Z1", "flights": [{"flight_number": "HAT1"}]});
        let (_, found) = checks(vec![
            call(
                "get_reservation_details",
                json!({"reservation_id": "Z1"}),
                reservation,
            ),
            call(
                "get_flight_status",
                json!({"reservation_id": "Z1", "flight_number": "HAT9"}),
                json!("on time"),
            ),
        ]);
        assert_eq!(found.len(), 1);
        // Keys naming entries, and keys that do not: `entry_noun`.
        assert_eq!(entry_noun("item_ids").as_deref(), Some("item"));
        assert_eq!(entry_noun("new_item_ids").as_deref(), Some("new_item"));
        assert_eq!(entry_noun("id"), None);
        assert_eq!(entry_noun("reservations"), None);
    }

    #[test]
    fn a_reference_the_initial_state_never_held_is_a_phantom() {
        let initial = json!({"users": {"u1": {"payment_methods": {"card_1": {"brand": "visa"}}}},
                             "orders": {"#W1": {"user_id": "u1"}}});
        let answer = |method: &str| {
            json!({"order_id": "#W1", "user_id": "u1",
                   "payment_history": [{"payment_method_id": "card_1", "amount": 5},
                                       {"payment_method_id": method, "amount": 5}]})
        };
        let run = |steps: Vec<CallStep>| {
            let t = CallTrajectory {
                id: "t".into(),
                steps,
            };
            nested_list_checks(&t, &Effects::default(), Some(&initial))
        };
        let (checked, found) = run(vec![call(
            "get_order_details",
            json!({"order_id": "#W1"}),
            answer("card_1-2"),
        )]);
        assert_eq!(checked, 4);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind, ViolationKind::PhantomId);
        assert_eq!(
            found[0].resource.as_deref(),
            Some("payment_method/card_1-2")
        );
        // An id an earlier step showed (a method added by a call) is no phantom.
        let (_, found) = run(vec![
            call(
                "add_payment_method",
                json!({"user_id": "u1"}),
                json!({"id": "card_9"}),
            ),
            call(
                "get_order_details",
                json!({"order_id": "#W1"}),
                answer("card_9"),
            ),
        ]);
        assert_eq!(found, []);
        // A value the state's own references use is no phantom.
        let with_sentinel = json!({"users": {"u1": {"payment_methods": {"card_1": {}}}},
                                   "orders": {"#W1": {"user_id": "u1", "payment_method_id": "cash"}}});
        let t = CallTrajectory {
            id: "t".into(),
            steps: vec![call(
                "get_order_details",
                json!({"order_id": "#W1"}),
                answer("cash"),
            )],
        };
        assert_eq!(
            nested_list_checks(&t, &Effects::default(), Some(&with_sentinel)).1,
            []
        );
        // After a call that may create, an unseen id may be what it made.
        let (_, found) = run(vec![
            call(
                "add_payment_method",
                json!({"user_id": "u1"}),
                json!("added"),
            ),
            call(
                "get_order_details",
                json!({"order_id": "#W1"}),
                answer("card_9"),
            ),
        ]);
        assert_eq!(found, []);
        // A creation the walks saw make one thing, answering its id: what it made is known,
        // and a copy under another id is still a phantom (a guessed one may have made more).
        let s0 = initial.clone();
        let mut s1 = s0.clone();
        s1["users"]["u1"]["payment_methods"]["card_5"] = json!({"brand": "amex"});
        let learned = Effects::learn(&[crate::audit::AuditTrajectory {
            id: "w".into(),
            initial_state: std::sync::Arc::new(s0),
            steps: vec![crate::audit::AuditStep {
                tool: "add_payment_method".into(),
                arguments: json!({"user_id": "u1"}).as_object().cloned().unwrap(),
                observation: json!({"payment_method_id": "card_5"}),
                success: Some(true),
                state_after: std::sync::Arc::new(s1),
            }],
        }]);
        assert_eq!(learned.of("add_payment_method").max_created, 1);
        let steps = |copy: &str| CallTrajectory {
            id: "t".into(),
            steps: vec![
                call(
                    "add_payment_method",
                    json!({"user_id": "u1"}),
                    json!({"success": true, "payment_method_id": "card_9"}),
                ),
                call(
                    "get_order_details",
                    json!({"order_id": "#W1"}),
                    answer(copy),
                ),
            ],
        };
        let phantoms = |t: &CallTrajectory, fx: &Effects| -> Vec<Option<String>> {
            (nested_list_checks(t, fx, Some(&initial)).1.into_iter())
                .map(|v| v.resource)
                .collect()
        };
        assert_eq!(
            phantoms(&steps("card_9"), &learned),
            Vec::<Option<String>>::new()
        );
        assert_eq!(
            phantoms(&steps("card_9-2"), &learned),
            [Some("payment_method/card_9-2".to_owned())]
        );
        assert_eq!(
            phantoms(&steps("card_9-2"), &Effects::default()),
            Vec::<Option<String>>::new()
        );
        // Without the initial state nothing is compared.
        let t = CallTrajectory {
            id: "t".into(),
            steps: vec![call(
                "get_order_details",
                json!({"order_id": "#W1"}),
                answer("x"),
            )],
        };
        assert_eq!(nested_list_checks(&t, &Effects::default(), None).0, 0);
    }
}

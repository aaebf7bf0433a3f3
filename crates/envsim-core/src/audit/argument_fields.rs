//! Which field of a record an argument stands for, learned from executed walks: the field a
//! listing's argument filters on (`search_issues(project_key="OPS")` lists the issues whose
//! `project` is `OPS`), and the field a creation stores an argument's value in
//! (`create_issue(project_key="OPS")` makes an issue whose `project` is `OPS`).
//!
//! Together they say which listings must hold a record the transcript created: a complete
//! filtered listing that leaves out a created record its filter selects is a list omission,
//! even where the argument's name is not the field's and the creation's answer did not show
//! the field.

use super::{resources, AuditTrajectory};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Calls that must show a filter or a stored argument before it is believed, with no call
/// against it.
pub const ARGUMENT_FIELD_EVIDENCE: usize = 2;

/// What a tool's arguments stand for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArgumentFields {
    /// Argument → the field of the listed records it selects on (every record of the kind
    /// whose field holds the argument's value is listed, and no other).
    pub filters: BTreeMap<String, String>,
    /// Field of the record a success creates → the argument whose value it holds.
    pub created_from: BTreeMap<String, String>,
}

/// A collection's records: id and fields.
type Records<'a> = Vec<(&'a str, &'a serde_json::Map<String, Value>)>;

/// Votes for and against one (argument, field) pairing.
#[derive(Default)]
struct Votes {
    for_: usize,
    against: usize,
}

/// Per tool, what its arguments stand for, from the walks' successes (states known).
pub fn learn(trajectories: &[AuditTrajectory]) -> BTreeMap<String, ArgumentFields> {
    let mut filters: BTreeMap<String, BTreeMap<(String, String), Votes>> = BTreeMap::new();
    let mut stored: BTreeMap<String, BTreeMap<(String, String), Votes>> = BTreeMap::new();
    for t in trajectories {
        let mut before = &t.initial_state;
        for step in &t.steps {
            let after = &step.state_after;
            if step.success == Some(true) {
                if before == after {
                    listing_votes(
                        before,
                        &step.arguments,
                        &step.observation,
                        filters.entry(step.tool.clone()).or_default(),
                    );
                } else {
                    creation_votes(
                        before,
                        after,
                        &step.arguments,
                        stored.entry(step.tool.clone()).or_default(),
                    );
                }
            }
            before = after;
        }
    }
    let tools: BTreeSet<&String> = filters.keys().chain(stored.keys()).collect();
    tools
        .into_iter()
        .map(|tool| {
            let fields = ArgumentFields {
                filters: filters.get(tool).map(chosen).unwrap_or_default(),
                created_from: stored
                    .get(tool)
                    .map(|votes| {
                        // Kept as (argument, field): turned to field → argument.
                        chosen(votes).into_iter().map(|(a, f)| (f, a)).collect()
                    })
                    .unwrap_or_default(),
            };
            (tool.clone(), fields)
        })
        .filter(|(_, f)| !f.filters.is_empty() || !f.created_from.is_empty())
        .collect()
}

/// A value an argument can select or store by: a text of two characters or more, or an
/// integer (a truth value or a one-letter text matches too many fields by chance).
fn usable(value: &Value) -> bool {
    match value {
        Value::String(s) => s.chars().count() >= 2,
        Value::Number(n) => n.is_i64() || n.is_u64(),
        _ => false,
    }
}

/// Whether a record's field holds an argument's value: equal to it, or a list holding it (a
/// label filter lists the issues whose `labels` hold the label).
pub fn selects(held: &Value, value: &Value) -> bool {
    held == value || held.as_array().is_some_and(|items| items.contains(value))
}

/// A listing that changed nothing: per collection whose records it names, each argument
/// whose value a field of every listed record holds — for, when the listed records are
/// exactly those holding it, or exactly those it and another argument's field both select;
/// against, when a listed record holds another value.
fn listing_votes(
    state: &Value,
    arguments: &serde_json::Map<String, Value>,
    observation: &Value,
    votes: &mut BTreeMap<(String, String), Votes>,
) {
    // The ids the answer names, as values or as the keys of records keyed by id.
    let mut said = std::collections::HashSet::new();
    super::implied::id_texts(observation, true, &mut said);
    let mut by_collection: BTreeMap<&str, Records<'_>> = BTreeMap::new();
    let all = resources(state);
    for ((collection, id), record) in &all {
        if collection.contains('*') {
            continue;
        }
        if let Value::Object(record) = record {
            by_collection
                .entry(collection.as_str())
                .or_default()
                .push((id.as_str(), record));
        }
    }
    for records in by_collection.values() {
        let listed: BTreeSet<&str> = records
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| said.contains(*id))
            .collect();
        // One record named is a read of it, or a reference: no listing to learn from.
        if listed.len() < 2 {
            continue;
        }
        let fields: BTreeSet<&String> = records
            .iter()
            .filter(|(id, _)| listed.contains(id))
            .flat_map(|(_, r)| r.keys())
            .collect();
        // Per (argument, field) whose value some record holds, the records holding it.
        let mut selections: Vec<((&String, &String), BTreeSet<&str>)> = Vec::new();
        for (argument, value) in arguments.iter().filter(|(_, v)| usable(v)) {
            for field in &fields {
                let holding: BTreeSet<&str> = records
                    .iter()
                    .filter(|(_, r)| r.get(field.as_str()).is_some_and(|h| selects(h, value)))
                    .map(|(id, _)| *id)
                    .collect();
                if !holding.is_empty() {
                    selections.push(((argument, *field), holding));
                }
            }
        }
        for ((argument, field), holding) in &selections {
            let slot = votes
                .entry(((*argument).clone(), (*field).clone()))
                .or_default();
            if *holding == listed {
                slot.for_ += 1;
            } else if !listed.is_subset(holding) {
                slot.against += 1;
            } else if selections.iter().any(|((other, _), also)| {
                // A listing narrowed by a second filter (`project_key` and `status`) shows
                // the first one too: exactly the records both select are listed.
                other != argument
                    && listed.is_subset(also)
                    && holding.intersection(also).count() == listed.len()
            }) {
                slot.for_ += 1;
            }
        }
    }
}

/// A success that created exactly one record: each field holding an argument's value is a
/// vote for that argument being stored there; a field holding another value, one against.
fn creation_votes(
    before: &Value,
    after: &Value,
    arguments: &serde_json::Map<String, Value>,
    votes: &mut BTreeMap<(String, String), Votes>,
) {
    let old = resources(before);
    let new = resources(after);
    let created: Vec<&Value> = new
        .iter()
        .filter(|(key, _)| !key.0.contains('*') && !old.contains_key(*key))
        .map(|(_, record)| *record)
        .collect();
    let [Value::Object(record)] = created.as_slice() else {
        return;
    };
    for (argument, value) in arguments.iter().filter(|(_, v)| usable(v)) {
        for (field, held) in record {
            if !matches!(held, Value::String(_) | Value::Number(_)) {
                continue;
            }
            let slot = votes.entry((argument.clone(), field.clone())).or_default();
            if held == value {
                slot.for_ += 1;
            } else {
                slot.against += 1;
            }
        }
    }
}

/// Pairings with enough evidence and none against, one field per argument: where several
/// fields qualify, the one named like the argument (`project_key` → `project`), else none
/// (a value two fields always share tells nothing of which one the argument means).
fn chosen(votes: &BTreeMap<(String, String), Votes>) -> BTreeMap<String, String> {
    let mut per_argument: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for ((argument, field), v) in votes {
        if v.for_ >= ARGUMENT_FIELD_EVIDENCE && v.against == 0 {
            per_argument.entry(argument).or_default().push(field);
        }
    }
    per_argument
        .into_iter()
        .filter_map(|(argument, fields)| {
            let field = match fields.as_slice() {
                [one] => *one,
                many => {
                    let named: Vec<&&str> = many.iter().filter(|f| related(argument, f)).collect();
                    match named.as_slice() {
                        [one] => **one,
                        _ => return None,
                    }
                }
            };
            Some((argument.to_owned(), field.to_owned()))
        })
        .collect()
}

/// Whether an argument's name and a field's name are the same word (`project_key` and
/// `project`, `ownerId` and `owner`, `status` and `status`): their words, less a last word that
/// says how a thing is named, are the same.
pub(crate) fn related(argument: &str, field: &str) -> bool {
    let stem = |name: &str| {
        let mut w = super::nouns::words(name);
        if w.len() > 1
            && matches!(
                w.last().map(String::as_str),
                Some("key" | "id" | "name" | "code")
            )
        {
            w.pop();
        }
        w
    };
    stem(argument) == stem(field)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditStep;
    use serde_json::json;
    use std::sync::Arc;

    fn step(tool: &str, args: Value, observation: Value, after: &Value) -> AuditStep {
        AuditStep {
            tool: tool.into(),
            arguments: args.as_object().cloned().unwrap(),
            observation,
            success: Some(true),
            state_after: Arc::new(after.clone()),
        }
    }

    /// An issue tracker whose search takes `project_key` for the issues' `project`, and whose
    /// creation stores `project_key` there; `limit` caps a listing and filters nothing.
    fn walks() -> Vec<AuditTrajectory> {
        let s0 = json!({
            "projects": {"OPS": {"name": "Operations"}, "WEB": {"name": "Website"}},
            "issues": {
                "I1": {"project": "OPS", "title": "disk", "status": "open"},
                "I2": {"project": "OPS", "title": "cpu", "status": "closed"},
                "I3": {"project": "WEB", "title": "css", "status": "open"},
                "I4": {"project": "WEB", "title": "js", "status": "open"}
            }
        });
        let mut s1 = s0.clone();
        s1["issues"]["I5"] = json!({"project": "OPS", "title": "net", "status": "open"});
        let mut s2 = s1.clone();
        s2["issues"]["I6"] = json!({"project": "WEB", "title": "font", "status": "open"});
        let list = |ids: &[&str]| json!({"issues": ids.iter().map(|i| json!({"id": i})).collect::<Vec<_>>()});
        vec![AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s0.clone()),
            steps: vec![
                step(
                    "search_issues",
                    json!({"project_key": "OPS"}),
                    list(&["I1", "I2"]),
                    &s0,
                ),
                step(
                    "search_issues",
                    json!({"project_key": "WEB", "limit": 5}),
                    list(&["I3", "I4"]),
                    &s0,
                ),
                step(
                    "create_issue",
                    json!({"project_key": "OPS", "title": "net"}),
                    json!({"id": "I5"}),
                    &s1,
                ),
                step(
                    "search_issues",
                    json!({"project_key": "OPS"}),
                    list(&["I1", "I2", "I5"]),
                    &s1,
                ),
                step(
                    "create_issue",
                    json!({"project_key": "WEB", "title": "font"}),
                    json!({"id": "I6"}),
                    &s2,
                ),
                step("list_open", json!({"limit": 2}), list(&["I1", "I3"]), &s2),
            ],
        }]
    }

    #[test]
    fn filters_and_stored_arguments_are_learned_from_walks() {
        let learned = learn(&walks());
        assert_eq!(
            learned["search_issues"],
            ArgumentFields {
                filters: BTreeMap::from([("project_key".into(), "project".into())]),
                created_from: BTreeMap::new(),
            }
        );
        assert_eq!(
            learned["create_issue"],
            ArgumentFields {
                filters: BTreeMap::new(),
                created_from: BTreeMap::from([
                    ("project".into(), "project_key".into()),
                    ("title".into(), "title".into()),
                ]),
            }
        );
        // `limit` matched no field, and a listing capped by it is no filter of anything.
        assert!(!learned.contains_key("list_open"));
    }

    #[test]
    fn one_call_or_a_call_against_is_no_evidence() {
        let mut walks = walks();
        walks[0].steps.truncate(1);
        assert!(!learn(&walks).contains_key("search_issues"));
        // A listing of OPS that holds a WEB issue: project_key filters nothing.
        let mut walks = self::walks();
        let last = walks[0].steps.last().unwrap().state_after.as_ref().clone();
        walks[0].steps.push(step(
            "search_issues",
            json!({"project_key": "OPS"}),
            json!({"issues": [{"id": "I1"}, {"id": "I3"}]}),
            &last,
        ));
        assert!(learn(&walks)
            .get("search_issues")
            .is_none_or(|f| !f.filters.contains_key("project_key")));
    }

    #[test]
    fn a_listing_narrowed_by_a_second_filter_shows_both() {
        let s0 = walks()[0].initial_state.as_ref().clone();
        let list = |ids: &[&str]| json!({"issues": ids.iter().map(|i| json!({"id": i})).collect::<Vec<_>>()});
        // Two listings of OPS's open issues: a strict subset of OPS's issues and of the open
        // ones, exactly those both select — each argument is shown to select its field.
        let mut s1 = s0.clone();
        s1["issues"]["I7"] = json!({"project": "OPS", "title": "db", "status": "open"});
        let learned = learn(&[AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s1.clone()),
            steps: vec![
                step(
                    "search_issues",
                    json!({"project_key": "OPS", "status": "open"}),
                    list(&["I1", "I7"]),
                    &s1,
                ),
                step(
                    "search_issues",
                    json!({"project_key": "OPS", "status": "open"}),
                    list(&["I1", "I7"]),
                    &s1,
                ),
            ],
        }]);
        assert_eq!(
            learned["search_issues"].filters,
            BTreeMap::from([
                ("project_key".into(), "project".into()),
                ("status".into(), "status".into())
            ]),
        );
        // A listing that leaves out a record both filters select shows neither.
        let learned = learn(&[AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s1.clone()),
            steps: vec![
                step(
                    "search_issues",
                    json!({"project_key": "OPS", "status": "open"}),
                    list(&["I1", "I2"]),
                    &s1,
                ),
                step(
                    "search_issues",
                    json!({"project_key": "OPS", "status": "open"}),
                    list(&["I1", "I2"]),
                    &s1,
                ),
            ],
        }]);
        assert!(!learned.contains_key("search_issues"), "{learned:?}");
    }

    #[test]
    fn a_label_filter_selects_the_records_whose_list_holds_it() {
        let s = json!({"issues": {
            "I1": {"project": "OPS", "labels": ["db", "ops"]},
            "I2": {"project": "OPS", "labels": ["db"]},
            "I3": {"project": "OPS", "labels": []},
            "I4": {"project": "WEB", "labels": ["db"]}
        }});
        let list = json!({"data": [{"id": "I1"}, {"id": "I2"}]});
        let call = || {
            step(
                "search_issues",
                json!({"project_key": "OPS", "label": "db"}),
                list.clone(),
                &s,
            )
        };
        let learned = learn(&[AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(s.clone()),
            steps: vec![call(), call()],
        }]);
        assert_eq!(
            learned["search_issues"].filters,
            BTreeMap::from([
                ("label".into(), "labels".into()),
                ("project_key".into(), "project".into())
            ]),
        );
        assert!(selects(&json!(["db", "ops"]), &json!("ops")));
        assert!(!selects(&json!(["db"]), &json!("ops")));
        assert!(!selects(&json!("dbx"), &json!("db")));
    }

    #[test]
    fn names_are_related_by_their_stem() {
        assert!(related("project_key", "project"));
        assert!(related("ownerId", "owner"));
        assert!(related("status", "status"));
        assert!(!related("paid", "pa"));
        assert!(!related("project_key", "title"));
    }
}

//! What many call-only transcripts of one environment show of the writes of the tools its
//! walks never saw succeed: the evidence that exploration cannot supply, read from the data.
//!
//! A successful change names a record (`update_draft(draft_id="msg-5", subject="Q3")`); the
//! next read of that record, with no other change of it between, shows what the change left:
//! a field named like one of its arguments holding that argument's value (the argument sets
//! it), a status field at another value than the record had before (the call moves it there).
//! Most transcripts of a file are right, so what the majority of them show is taken as the
//! tool's writes — below executed evidence: only for tools without writes learned from walks,
//! marked [`EffectSource::Transcripts`], and each rule needs [`TRANSCRIPT_EVIDENCE`] calls
//! read back with at most a fifth of them against it (the faulty transcripts a file holds).

use super::argument_fields::related;
use super::implied::Writes;
use super::observed::{named, records, role, subject, tool_noun, CallTrajectory, Role};
use super::{EffectSource, Effects};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};

/// Transcripts of one environment a file must hold before its calls are evidence of effects:
/// with fewer, one faulty transcript is too large a share.
pub const MIN_TRANSCRIPTS: usize = 20;

/// Calls read back that must show a write before it is believed.
pub const TRANSCRIPT_EVIDENCE: usize = 3;

/// What a file's transcripts showed one tool write.
#[derive(Clone, Debug, PartialEq)]
pub struct TranscriptWrites {
    /// Its successes whose target a later read showed.
    pub read_back: usize,
    /// The writes, [`EffectSource::Transcripts`].
    pub writes: Writes,
}

/// Votes for one rule.
#[derive(Default)]
struct Tally {
    for_: usize,
    against: usize,
}

impl Tally {
    fn believed(&self) -> bool {
        self.for_ >= TRANSCRIPT_EVIDENCE && self.against * 5 <= self.for_
    }
}

/// What one tool's successes read back showed.
#[derive(Default)]
struct ToolTally<'t> {
    read_back: usize,
    /// (field, argument) → whether the field showed the argument's value.
    from_arguments: BTreeMap<(String, &'t str), Tally>,
    /// Field → the values it showed after the call, and how often the record had another one
    /// just before.
    after: BTreeMap<String, (BTreeMap<String, usize>, usize)>,
    /// The argument that named the record read back, and the type it was read as.
    targets: BTreeMap<(String, String), usize>,
}

/// A change waiting for the next read of what it named.
struct Pending<'t> {
    tool: &'t str,
    argument: String,
    arguments: &'t Map<String, Value>,
    before: Option<Map<String, Value>>,
}

/// Per tool without writes learned from walks (`effects`), what the transcripts' successes
/// showed it write; tools with no rule believed are left out.
pub fn learn(
    trajectories: &[CallTrajectory],
    effects: &Effects,
) -> BTreeMap<String, TranscriptWrites> {
    let mut tallies: BTreeMap<&str, ToolTally<'_>> = BTreeMap::new();
    let mut learnable: HashMap<&str, bool> = HashMap::new();
    for t in trajectories {
        // The last fields each record (by id) was shown with, and the changes not yet read back.
        let mut seen: HashMap<String, Map<String, Value>> = HashMap::new();
        let mut pending: HashMap<String, Pending<'_>> = HashMap::new();
        for step in &t.steps {
            if step.success != Some(true) {
                continue;
            }
            let tool_role = role(&effects.of(&step.tool));
            let noun = tool_noun(&step.tool);
            let names = named(&noun, &step.arguments);
            // What the answer shows reads back a change not yet read back, whatever the
            // tool (`open_message` marks a message read and answers it). A change's own
            // answer may show what it moved itself, so only a read's answer is evidence of
            // the status a change left.
            let is_read = tool_role == Role::Read;
            let about = subject(&noun, &names, Role::Read);
            for (key, record, _) in records(&step.observation, &noun, about) {
                if let Some(p) = pending.remove(&key.1) {
                    let tally = tallies.entry(p.tool).or_default();
                    tally.read_back += 1;
                    *tally
                        .targets
                        .entry((p.argument.clone(), key.0.clone()))
                        .or_default() += 1;
                    vote(tally, &p, record, is_read);
                }
                if is_read {
                    seen.insert(key.1.clone(), record.clone());
                }
            }
            if is_read {
                continue;
            }
            // A change: what it names is no longer what was seen, and an earlier change of it
            // not read back yet can no longer be told from this one.
            for (_, key) in &names {
                pending.remove(&key.1);
            }
            let can_learn = *learnable.entry(&step.tool).or_insert_with(|| {
                tool_role == Role::Change
                    && effects.writes_of(&step.tool).source != EffectSource::Observed
            });
            let target = super::observed::target(&noun, &names);
            let argument = target
                .as_ref()
                .and_then(|key| names.iter().find(|(_, k)| k == key).map(|(a, _)| a.clone()));
            for (_, key) in &names {
                let before = seen.remove(&key.1);
                if can_learn && Some(key) == target.as_ref() {
                    if let Some(argument) = argument.clone() {
                        pending.insert(
                            key.1.clone(),
                            Pending {
                                tool: &step.tool,
                                argument,
                                arguments: &step.arguments,
                                before,
                            },
                        );
                    }
                }
            }
        }
    }
    tallies
        .into_iter()
        .filter_map(|(tool, tally)| {
            let writes = believed(&tally)?;
            Some((
                tool.to_owned(),
                TranscriptWrites {
                    read_back: tally.read_back,
                    writes,
                },
            ))
        })
        .collect()
}

/// A change read back: each argument against the field named like it, each field against
/// what it held before.
fn vote<'t>(
    tally: &mut ToolTally<'t>,
    p: &Pending<'t>,
    after: &Map<String, Value>,
    statuses: bool,
) {
    for (argument, value) in p.arguments {
        if *argument == p.argument || !is_scalar(value) {
            continue;
        }
        for (field, shown) in after {
            let named_so = field == argument
                || argument.strip_prefix("new_") == Some(field.as_str())
                || related(argument, field);
            if named_so && is_scalar(shown) {
                let slot = tally
                    .from_arguments
                    .entry((field.clone(), argument.as_str()))
                    .or_default();
                if shown == value {
                    slot.for_ += 1;
                } else {
                    slot.against += 1;
                }
            }
        }
    }
    for (field, shown) in after.iter().filter(|_| statuses) {
        let (Value::String(text), true) = (shown, super::implied::is_status_field(field)) else {
            continue;
        };
        // A value the call gave is the argument's, not a constant.
        if p.arguments.values().any(|v| v == shown) {
            continue;
        }
        let (values, moved) = tally.after.entry(field.clone()).or_default();
        *values.entry(text.clone()).or_default() += 1;
        if p.before
            .as_ref()
            .and_then(|b| b.get(field))
            .is_some_and(|old| old != shown)
        {
            *moved += 1;
        }
    }
}

fn is_scalar(value: &Value) -> bool {
    matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

/// The rules a tool's tally supports, as writes; `None` when none is.
fn believed(tally: &ToolTally<'_>) -> Option<Writes> {
    let mut writes = Writes {
        source: EffectSource::Transcripts,
        changes_seen: tally.read_back,
        ..Writes::default()
    };
    for ((field, argument), votes) in &tally.from_arguments {
        // One argument per field: the first believed (arguments in name order).
        if votes.believed() && !writes.from_arguments.contains_key(field) {
            writes
                .from_arguments
                .insert(field.clone(), (*argument).to_owned());
            writes.write_evidence.insert(field.clone(), votes.for_);
        }
    }
    for (field, (values, moved)) in &tally.after {
        let total: usize = values.values().sum();
        let Some((value, count)) = values.iter().max_by_key(|(_, n)| **n) else {
            continue;
        };
        let votes = Tally {
            for_: *count,
            against: total - count,
        };
        // A value every read shows but no call was seen to move it to is the record's own.
        if votes.believed() && *moved > 0 && !writes.from_arguments.contains_key(field) {
            writes
                .constants
                .insert(field.clone(), Value::String(value.clone()));
            writes.write_evidence.insert(field.clone(), *count);
        }
    }
    if writes.from_arguments.is_empty() && writes.constants.is_empty() {
        return None;
    }
    writes.touches = writes.write_evidence.keys().cloned().collect();
    let ((argument, read_as), _) = tally.targets.iter().max_by_key(|(_, n)| **n)?;
    writes.target = Some(argument.clone());
    // The type reads return it as (`update_draft(draft_id)` changes what `open_message`
    // returns as a message).
    writes.target_collection = Some(read_as.clone());
    Some(writes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::observed::CallStep;
    use serde_json::json;

    fn call(tool: &str, arguments: Value, observation: Value) -> CallStep {
        CallStep {
            tool: tool.into(),
            arguments: arguments.as_object().cloned().unwrap(),
            observation,
            success: Some(true),
        }
    }

    /// A draft opened, updated, opened again; a ticket read, closed, read again.
    fn transcript(n: usize, subject_shown: &str, status_shown: &str) -> CallTrajectory {
        let draft = format!("msg-{n}");
        let ticket = format!("T{n}");
        CallTrajectory {
            id: format!("t{n}"),
            steps: vec![
                call(
                    "open_message",
                    json!({"message_id": draft}),
                    json!({"id": draft, "subject": "old", "status": "draft"}),
                ),
                call(
                    "update_draft",
                    json!({"draft_id": draft, "subject": format!("new {n}")}),
                    json!({"success": true, "changed": ["subject"]}),
                ),
                call(
                    "open_message",
                    json!({"message_id": draft}),
                    json!({"id": draft, "subject": subject_shown.replace("{n}", &n.to_string()), "status": "draft"}),
                ),
                call(
                    "get_ticket",
                    json!({"ticket_id": ticket}),
                    json!({"ticket_id": ticket, "status": "open"}),
                ),
                call(
                    "close_ticket",
                    json!({"ticket_id": ticket}),
                    json!({"success": true}),
                ),
                call(
                    "get_ticket",
                    json!({"ticket_id": ticket}),
                    json!({"ticket_id": ticket, "status": status_shown}),
                ),
            ],
        }
    }

    #[test]
    fn the_majority_of_transcripts_shows_what_a_change_writes() {
        let mut runs: Vec<CallTrajectory> =
            (0..5).map(|n| transcript(n, "new {n}", "closed")).collect();
        // One faulty transcript: the update not shown, the ticket still open.
        runs.push(transcript(9, "old", "open"));
        let learned = learn(&runs, &Effects::default());
        let update = &learned["update_draft"];
        assert_eq!(update.read_back, 6);
        assert_eq!(update.writes.source, EffectSource::Transcripts);
        assert_eq!(update.writes.target.as_deref(), Some("draft_id"));
        assert_eq!(update.writes.target_collection.as_deref(), Some("message"));
        assert_eq!(
            update.writes.from_arguments,
            BTreeMap::from([("subject".to_owned(), "subject".to_owned())])
        );
        assert!(update.writes.constants.is_empty());
        let close = &learned["close_ticket"];
        assert_eq!(
            close.writes.constants,
            BTreeMap::from([("status".to_owned(), json!("closed"))])
        );
        assert_eq!(close.writes.write_evidence["status"], 5);
        assert!(close.writes.from_arguments.is_empty());
    }

    #[test]
    fn too_few_or_split_transcripts_show_nothing() {
        let few: Vec<CallTrajectory> = (0..2).map(|n| transcript(n, "new {n}", "closed")).collect();
        assert!(learn(&few, &Effects::default()).is_empty());
        // Half of them against: neither rule holds.
        let split: Vec<CallTrajectory> = (0..8)
            .map(|n| {
                if n % 2 == 0 {
                    transcript(n, "new {n}", "closed")
                } else {
                    transcript(n, "old", "archived")
                }
            })
            .collect();
        assert!(learn(&split, &Effects::default()).is_empty());
    }

    #[test]
    fn a_change_between_leaves_the_read_unattributed() {
        let runs: Vec<CallTrajectory> = (0..5)
            .map(|n| {
                let mut t = transcript(n, "new {n}", "closed");
                // Another change of the ticket before it is read back.
                t.steps.insert(
                    5,
                    call(
                        "reopen_ticket",
                        json!({"ticket_id": format!("T{n}")}),
                        json!({"success": true}),
                    ),
                );
                t
            })
            .collect();
        let learned = learn(&runs, &Effects::default());
        assert!(!learned.contains_key("close_ticket"), "{learned:?}");
        assert!(learned.contains_key("update_draft"));
    }
}

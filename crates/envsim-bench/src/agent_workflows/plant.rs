//! Planting one fault in an executed workflow, at a step where the workflow's own earlier steps
//! make it visible, and labelling a whole set. Pure: every answer a fault needs (a not-found
//! answer, a success of a refused call) was probed when the workflow was executed.

use super::{
    render, AnswerStyle, FaultKind, Label, LabelledFault, LabelledSet, Purpose, RecordRef, Workflow,
};
use envsim_core::rng::Rng;
use serde_json::{Map, Value};

/// One planted fault: where, what, and the faulty answer that replaces the true one.
#[derive(Clone, Debug, PartialEq)]
pub struct PlantedFault {
    /// Its kind.
    pub kind: FaultKind,
    /// The step whose answer it replaces (0-based).
    pub step: usize,
    /// That step's tool.
    pub tool: String,
    /// The record concerned, when one is (`issues/PAY-104`).
    pub resource: Option<String>,
    /// What changed, in words.
    pub detail: String,
    /// The faulty answer.
    pub answer: Value,
}

impl PlantedFault {
    /// The fault as the labels give it.
    pub fn label(&self) -> LabelledFault {
        LabelledFault {
            kind: self.kind,
            step: self.step,
            tool: self.tool.clone(),
            resource: self.resource.clone(),
            detail: self.detail.clone(),
        }
    }
}

/// A step inside a JSON value.
#[derive(Clone, Debug, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn at<'a>(value: &'a Value, path: &[Seg]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, seg| match seg {
        Seg::Key(k) => v.get(k),
        Seg::Index(i) => v.get(*i),
    })
}

fn at_mut<'a>(value: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    path.iter().try_fold(value, |v, seg| match seg {
        Seg::Key(k) => v.get_mut(k),
        Seg::Index(i) => v.get_mut(*i),
    })
}

/// The singular of a collection's name (`issues` → `issue`, `categories` → `category`).
pub(crate) fn singular(collection: &str) -> String {
    if let Some(stem) = collection.strip_suffix("ies") {
        format!("{stem}y")
    } else if let Some(stem) = ["sses", "xes", "ches", "shes"]
        .iter()
        .find_map(|s| collection.strip_suffix(s).map(|stem| (stem, s)))
        .map(|(stem, s)| format!("{stem}{}", &s[..s.len() - 2]))
    {
        stem
    } else if let Some(stem) = collection.strip_suffix('s') {
        stem.to_owned()
    } else {
        collection.to_owned()
    }
}

/// Whether `key` is how an answer names the id of a record of a collection whose singular is
/// `singular`: `id`, `key`, `issue_id`, `issueId`, `issue_number`, or `lot_id` for `point_lot`.
fn is_own_id_key(key: &str, singular: &str) -> bool {
    if matches!(key, "id" | "key" | "code" | "number") {
        return true;
    }
    let camel = format!("{singular}Id");
    if key == camel {
        return true;
    }
    ["_id", "_key", "_number", "_code"].iter().any(|suffix| {
        key.strip_suffix(suffix)
            .is_some_and(|noun| singular == noun || singular.ends_with(&format!("_{noun}")))
    })
}

/// Whether a key names some id (`id`, `*_id`, `*Id`).
pub(super) fn is_id_key(key: &str) -> bool {
    key == "id" || key.ends_with("_id") || (key.ends_with("Id") && key.len() > 2)
}

fn same_id(value: &Value, id: &str) -> bool {
    match value {
        Value::String(s) => s == id,
        Value::Number(n) => n.to_string() == id,
        _ => false,
    }
}

/// Where `answer` holds `record`: objects whose own id key holds its id, and objects under
/// its id as a key. When there is none and the call named the record (`named`), the answer's
/// one object (its `data` when it has one): the record returned without its key.
fn record_paths(answer: &Value, record: &RecordRef, named: bool) -> Vec<Vec<Seg>> {
    let singular = singular(&record.collection);
    let mut found = Vec::new();
    let mut path = Vec::new();
    walk_records(answer, record, &singular, &mut path, &mut found);
    if found.is_empty() && named {
        let data = match answer.get("data") {
            Some(d @ Value::Object(_)) => Some((d, vec![Seg::Key("data".into())])),
            _ => answer.is_object().then(|| (answer, Vec::new())),
        };
        if let Some((Value::Object(map), path)) = data {
            let other_id = map
                .iter()
                .any(|(k, v)| is_own_id_key(k, &singular) && !same_id(v, &record.id));
            if !other_id {
                found.push(path);
            }
        }
    }
    found
}

fn walk_records(
    value: &Value,
    record: &RecordRef,
    singular: &str,
    path: &mut Vec<Seg>,
    found: &mut Vec<Vec<Seg>>,
) {
    match value {
        Value::Object(map) => {
            if map
                .iter()
                .any(|(k, v)| is_own_id_key(k, singular) && same_id(v, &record.id))
            {
                found.push(path.clone());
            }
            for (k, v) in map {
                path.push(Seg::Key(k.clone()));
                if k == &record.id && v.is_object() && !found.contains(path) {
                    found.push(path.clone());
                }
                walk_records(v, record, singular, path, found);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                walk_records(v, record, singular, path, found);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Whether a field holds a status (`status`, `order_status`, `state`).
pub(crate) fn is_status_field(field: &str) -> bool {
    field == "status" || field.ends_with("_status") || field == "state" || field.ends_with("_state")
}

fn is_scalar(v: &Value) -> bool {
    matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_))
}

/// Whether the text of `value` mentions `id` (a create's answer that tells the new id).
fn mentions(value: &Value, id: &str) -> bool {
    match value {
        Value::String(s) => s.contains(id),
        Value::Number(n) => n.to_string() == id,
        Value::Array(items) => items.iter().any(|v| mentions(v, id)),
        Value::Object(map) => map.iter().any(|(k, v)| k == id || mentions(v, id)),
        _ => false,
    }
}

/// A candidate fault: the step and the answer it would have.
struct Candidate {
    step: usize,
    resource: Option<String>,
    detail: String,
    answer: Value,
}

/// Plants one fault of `kind` in `workflow`, at a step chosen by `rng` among those where the
/// workflow makes it visible; `None` when there is none. `in_initial_states` says whether a
/// text is the id of a record in any of the package's initial states (a phantom's id must not
/// be, nor any id the workflow's calls and answers mention).
pub fn plant(
    workflow: &Workflow,
    kind: FaultKind,
    in_initial_states: &dyn Fn(&str) -> bool,
    rng: &mut Rng,
) -> Option<PlantedFault> {
    let candidates = match kind {
        FaultKind::StaleRead => stale_reads(workflow, false),
        FaultKind::ResurrectionByStatus => stale_reads(workflow, true),
        FaultKind::VanishedCreate => vanished_creates(workflow),
        FaultKind::ListOmission => list_omissions(workflow),
        FaultKind::PhantomCopy => phantom_copies(workflow, in_initial_states),
        FaultKind::HappyPathFlip => flips(workflow),
        FaultKind::SchemaDrift => drifts(workflow, rng),
    };
    let chosen = rng.pick(&candidates)?;
    Some(PlantedFault {
        kind,
        step: chosen.step,
        tool: workflow.steps[chosen.step].tool.clone(),
        resource: chosen.resource.clone(),
        detail: chosen.detail.clone(),
        answer: chosen.answer.clone(),
    })
}

/// Reads (successful calls that changed nothing, made to look something up or list) after a
/// successful change of a record's field that show the new value: the answer shows the old
/// one instead. Status fields for a resurrection, other fields for a stale read.
fn stale_reads(workflow: &Workflow, status: bool) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (j, change_step) in workflow.steps.iter().enumerate() {
        if !change_step.success {
            continue;
        }
        for change in &change_step.effect.changed {
            if is_status_field(&change.field) != status
                || !is_scalar(&change.before)
                || !is_scalar(&change.after)
                || change.before == change.after
            {
                continue;
            }
            for (k, read) in workflow.steps.iter().enumerate().skip(j + 1) {
                if !is_read(read) {
                    continue;
                }
                let named = read.names.as_ref() == Some(&change.record);
                for path in record_paths(&read.answer, &change.record, named) {
                    let mut answer = read.answer.clone();
                    let Some(Value::Object(object)) = at_mut(&mut answer, &path) else {
                        continue;
                    };
                    match object.get_mut(&change.field) {
                        Some(v) if *v == change.after => *v = change.before.clone(),
                        _ => continue,
                    }
                    out.push(Candidate {
                        step: k,
                        resource: Some(change.record.to_string()),
                        detail: format!(
                            "{} shown as {} (step {j}, {}, set it to {})",
                            change.field, change.before, change_step.tool, change.after
                        ),
                        answer,
                    });
                }
            }
        }
    }
    out
}

fn is_read(step: &super::ExecutedStep) -> bool {
    step.success
        && step.effect.is_empty()
        && matches!(step.purpose, Purpose::Lookup | Purpose::Listing)
}

/// Records created earlier whose id the create's answer told, each with the steps after it.
fn created_records(workflow: &Workflow) -> Vec<(usize, &RecordRef)> {
    let mut out = Vec::new();
    for (j, step) in workflow.steps.iter().enumerate() {
        if !step.success {
            continue;
        }
        for record in &step.effect.created {
            if mentions(&step.answer, &record.id) {
                out.push((j, record));
            }
        }
    }
    out
}

/// A getter on a created record answers not found (the getter's own not-found answer, probed
/// on the same state with a missing id); or a listing with no arguments (all of its kind)
/// lacks it.
fn vanished_creates(workflow: &Workflow) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (j, record) in created_records(workflow) {
        for (k, read) in workflow.steps.iter().enumerate().skip(j + 1) {
            if !is_read(read) {
                continue;
            }
            if read.purpose == Purpose::Lookup && read.names.as_ref() == Some(record) {
                if let Some(counterpart) = &read.counterpart {
                    out.push(Candidate {
                        step: k,
                        resource: Some(record.to_string()),
                        detail: format!(
                            "created at step {j}, answered not found ({})",
                            workflow.steps[j].tool
                        ),
                        answer: counterpart.retargeted(),
                    });
                }
            } else if read.purpose == Purpose::Listing && read.arguments.is_empty() {
                if let Some(answer) = without_record(&read.answer, record) {
                    out.push(Candidate {
                        step: k,
                        resource: Some(record.to_string()),
                        detail: format!("created at step {j}, missing from the complete listing"),
                        answer,
                    });
                }
            }
        }
    }
    out
}

/// A listing after a create, filtered by an argument the create was given with the same
/// value, holds the created record: the answer omits it.
fn list_omissions(workflow: &Workflow) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (j, record) in created_records(workflow) {
        let created_with = &workflow.steps[j].arguments;
        for (k, read) in workflow.steps.iter().enumerate().skip(j + 1) {
            if !is_read(read) || read.purpose != Purpose::Listing {
                continue;
            }
            let Some((name, value)) = read
                .arguments
                .iter()
                .find(|(name, value)| created_with.get(*name) == Some(*value))
            else {
                continue;
            };
            if let Some(answer) = without_record(&read.answer, record) {
                out.push(Candidate {
                    step: k,
                    resource: Some(record.to_string()),
                    detail: format!(
                        "created at step {j} with {name}={value}, omitted from the listing filtered on it"
                    ),
                    answer,
                });
            }
        }
    }
    out
}

/// Keys that count the entries of a list beside it.
const COUNT_KEYS: [&str; 4] = ["count", "total", "total_count", "num_results"];

/// `answer` without `record` where a list (or an object keyed by ids) holds it, a count beside
/// the list that counted it lowered; `None` when no list holds it.
fn without_record(answer: &Value, record: &RecordRef) -> Option<Value> {
    let paths = record_paths(answer, record, false);
    let path =
        paths.iter().find(
            |p| match (p.last(), at(answer, &p[..p.len().saturating_sub(1)])) {
                (Some(Seg::Index(_)), Some(Value::Array(_))) => true,
                (Some(Seg::Key(k)), Some(Value::Object(_))) => k == &record.id,
                _ => false,
            },
        )?;
    let mut out = answer.clone();
    let (last, parent_path) = path.split_last()?;
    let parent = at_mut(&mut out, parent_path)?;
    let before = match (parent, last) {
        (Value::Array(items), Seg::Index(i)) => {
            let n = items.len();
            items.remove(*i);
            n
        }
        (Value::Object(map), Seg::Key(k)) => {
            let n = map.len();
            map.shift_remove(k);
            n
        }
        _ => return None,
    };
    // A count beside the list said how many it held.
    if let Some((_, holder_path)) = parent_path.split_last() {
        if let Some(Value::Object(holder)) = at_mut(&mut out, holder_path) {
            for key in COUNT_KEYS {
                if let Some(v) = holder.get_mut(key) {
                    if v.as_u64() == Some(before as u64) {
                        *v = Value::from(before - 1);
                    }
                }
            }
        }
    }
    Some(out)
}

/// A listing or a read whose answer holds a list of records with ids (or an object keyed by
/// ids) gets a copy of one of them under a fresh id: in no initial state, and nowhere in the
/// workflow.
fn phantom_copies(workflow: &Workflow, in_initial_states: &dyn Fn(&str) -> bool) -> Vec<Candidate> {
    let created: Vec<&str> = workflow
        .steps
        .iter()
        .flat_map(|s| s.effect.created.iter().map(|r| r.id.as_str()))
        .collect();
    let known = |id: &str| in_initial_states(id) || created.contains(&id);
    let text: String = workflow
        .steps
        .iter()
        .map(|s| format!("{} {}\n", Value::Object(s.arguments.clone()), s.answer))
        .collect();
    let fresh_ok = |id: &str| !in_initial_states(id) && !text.contains(id);
    let mut out = Vec::new();
    for (k, read) in workflow.steps.iter().enumerate() {
        if !is_read(read) {
            continue;
        }
        let mut lists = Vec::new();
        record_lists(&read.answer, &known, &mut Vec::new(), &mut lists);
        for (path, key) in lists {
            let mut answer = read.answer.clone();
            let Some(container) = at_mut(&mut answer, &path) else {
                continue;
            };
            let detail;
            match (container, &key) {
                (Value::Array(items), ListKey::Field(index, field)) => {
                    let mut copy = items[*index].clone();
                    let Some(original) = copy.get(field).and_then(Value::as_str).map(str::to_owned)
                    else {
                        continue;
                    };
                    let Some(fresh) = fresh_id(&original, &fresh_ok) else {
                        continue;
                    };
                    copy[field.as_str()] = Value::String(fresh.clone());
                    items.push(copy);
                    detail = format!("a copy of {original} listed as {fresh}");
                }
                (Value::Object(map), ListKey::MapKey(original)) => {
                    let Some(fresh) = fresh_id(original, &fresh_ok) else {
                        continue;
                    };
                    let copy = map[original.as_str()].clone();
                    map.insert(fresh.clone(), copy);
                    detail = format!("a copy of {original} listed as {fresh}");
                }
                _ => continue,
            }
            out.push(Candidate {
                step: k,
                resource: None,
                detail,
                answer,
            });
        }
    }
    out
}

/// Which entry of a list of records a phantom copies: an array element and its id field, or
/// an id key of an object keyed by ids.
enum ListKey {
    Field(usize, String),
    MapKey(String),
}

/// Lists of records in `value`: arrays whose first object element has an id field holding a
/// known id, and objects with a key that is a known id holding an object.
fn record_lists(
    value: &Value,
    known: &dyn Fn(&str) -> bool,
    path: &mut Vec<Seg>,
    out: &mut Vec<(Vec<Seg>, ListKey)>,
) {
    match value {
        Value::Array(items) => {
            let entry = items.iter().enumerate().find_map(|(i, item)| {
                let map = item.as_object()?;
                map.iter()
                    .find(|(k, v)| is_id_key(k) && v.as_str().is_some_and(known))
                    .map(|(k, _)| ListKey::Field(i, k.clone()))
            });
            if let Some(entry) = entry {
                out.push((path.clone(), entry));
            }
            for (i, v) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                record_lists(v, known, path, out);
                path.pop();
            }
        }
        Value::Object(map) => {
            if let Some((k, _)) = map.iter().find(|(k, v)| v.is_object() && known(k)) {
                out.push((path.clone(), ListKey::MapKey(k.clone())));
            }
            for (k, v) in map {
                path.push(Seg::Key(k.clone()));
                record_lists(v, known, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// An id in the form of `original` that `ok` accepts: its trailing number moved up (`PAY-104`
/// → `PAY-7104`, the same width or more), or a suffix (`-2`) for an id without digits.
pub(super) fn fresh_id(original: &str, ok: &dyn Fn(&str) -> bool) -> Option<String> {
    let digits = original.len()
        - original
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .len();
    let (stem, number) = original.split_at(original.len() - digits);
    let candidates: Vec<String> = match number.parse::<u64>() {
        Ok(n) if digits > 0 => (0..50)
            .map(|i| {
                let bumped = n + 7000 + i;
                format!("{stem}{bumped:0digits$}")
            })
            .collect(),
        _ => (2..52).map(|i| format!("{original}-{i}")).collect(),
    };
    candidates.into_iter().find(|c| ok(c))
}

/// Refused calls whose refusal the workflow makes visible (aimed at a missing record, or
/// repeating a status move): answered with a real success of the same tool.
fn flips(workflow: &Workflow) -> Vec<Candidate> {
    workflow
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            !s.success && matches!(s.purpose, Purpose::RefusedMissing | Purpose::RefusedRepeat)
        })
        .filter_map(|(k, s)| {
            let counterpart = s.counterpart.as_ref()?;
            Some(Candidate {
                step: k,
                resource: s.names.as_ref().map(ToString::to_string),
                detail: format!(
                    "refused ({}) answered as a success",
                    if s.purpose == Purpose::RefusedMissing {
                        "no such record"
                    } else {
                        "already moved"
                    }
                ),
                answer: counterpart.retargeted(),
            })
        })
        .collect()
}

/// `snake_case` → `snakeCase`.
fn camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = !out.is_empty();
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A successful answer with a field renamed (`ticket_id` → `ticketId`, in place) or a number
/// turned into text: one change per step, which of the two drawn by `rng`.
fn drifts(workflow: &Workflow, rng: &mut Rng) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (k, step) in workflow.steps.iter().enumerate() {
        if !step.success || !step.answer.is_object() {
            continue;
        }
        let mut fields = Vec::new();
        drift_fields(&step.answer, &mut Vec::new(), &mut fields);
        let renames: Vec<&(Vec<Seg>, String, bool)> =
            fields.iter().filter(|(_, _, number)| !number).collect();
        let retypes: Vec<&(Vec<Seg>, String, bool)> =
            fields.iter().filter(|(_, _, number)| *number).collect();
        let pool = match (renames.is_empty(), retypes.is_empty()) {
            (true, true) => continue,
            (false, true) => renames,
            (true, false) => retypes,
            (false, false) if rng.chance(0.5) => renames,
            _ => retypes,
        };
        let Some((path, key, number)) = rng.pick(&pool).copied() else {
            continue;
        };
        let mut answer = step.answer.clone();
        let Some(Value::Object(map)) = at_mut(&mut answer, path) else {
            continue;
        };
        let detail = if *number {
            let v = map[key.as_str()].clone();
            map[key.as_str()] = Value::String(v.to_string());
            format!("{key} answered as the text \"{v}\"")
        } else {
            let renamed: Map<String, Value> = std::mem::take(map)
                .into_iter()
                .map(|(k, v)| if &k == key { (camel(&k), v) } else { (k, v) })
                .collect();
            *map = renamed;
            format!("{key} renamed {}", camel(key))
        };
        out.push(Candidate {
            step: k,
            resource: None,
            detail,
            answer,
        });
    }
    out
}

/// Fields a drift can change: `(object path, key, true for a number to retype)`; keys with an
/// underscore whose camelCase form the object lacks are renamed. Booleans and the outcome's
/// own keys are left alone (a flipped outcome is another fault).
fn drift_fields(value: &Value, path: &mut Vec<Seg>, out: &mut Vec<(Vec<Seg>, String, bool)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if v.is_number() {
                    out.push((path.clone(), k.clone(), true));
                }
                if k.contains('_') && !k.starts_with('_') && !map.contains_key(&camel(k)) {
                    out.push((path.clone(), k.clone(), false));
                }
                path.push(Seg::Key(k.clone()));
                drift_fields(v, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            // The first entry stands for the list: a drift in one entry is a drift.
            if let Some(first) = items.first() {
                path.push(Seg::Index(0));
                drift_fields(first, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Plants faults in a `rate` share of `workflows` (a seeded draw per workflow) and renders
/// every one as a transcript. A faulty workflow gets, of the kinds it can show, the one planted
/// least so far (ties in [`FaultKind::ALL`] order), so that kinds few workflows can show are
/// not crowded out by those most can; one that can show none stays clean. Each transcript's
/// answers take one [`AnswerStyle`], drawn per workflow. Line `i + 1` of the transcript file
/// is workflow `i`.
pub fn plant_set(
    workflows: &[Workflow],
    rate: f64,
    seed: u64,
    in_initial_states: &dyn Fn(&str, &str) -> bool,
) -> LabelledSet {
    let mut rng = Rng::derive(seed, "agent_workflows/plant");
    let mut planted_so_far = [0usize; FaultKind::ALL.len()];
    let mut set = LabelledSet::default();
    for (i, workflow) in workflows.iter().enumerate() {
        let style = AnswerStyle::ALL[rng.below(AnswerStyle::ALL.len())];
        let faulty = rng.chance(rate);
        let mut planted = None;
        if faulty {
            let known = |id: &str| in_initial_states(&workflow.env, id);
            let mut order: Vec<usize> = (0..FaultKind::ALL.len()).collect();
            order.sort_by_key(|k| planted_so_far[*k]);
            for at in order {
                if let Some(fault) = plant(workflow, FaultKind::ALL[at], &known, &mut rng) {
                    planted_so_far[at] += 1;
                    planted = Some(fault);
                    break;
                }
            }
        }
        set.transcripts
            .push(render::transcript(workflow, style, planted.as_ref()));
        set.labels.push(Label {
            trajectory: workflow.task_id.clone(),
            line: i + 1,
            env: workflow.env.clone(),
            state: workflow.state.clone(),
            style,
            steps: workflow.steps.len(),
            fault: planted.as_ref().map(PlantedFault::label),
        });
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_workflows::{Counterpart, Effect, ExecutedStep, FieldChange};
    use serde_json::json;

    fn rec(c: &str, id: &str) -> RecordRef {
        RecordRef {
            collection: c.into(),
            id: id.into(),
        }
    }

    fn step(tool: &str, args: Value, answer: Value, purpose: Purpose) -> ExecutedStep {
        ExecutedStep {
            tool: tool.into(),
            arguments: args.as_object().cloned().unwrap_or_default(),
            success: answer["success"] == json!(true),
            answer,
            effect: Effect::default(),
            purpose,
            names: None,
            counterpart: None,
        }
    }

    fn workflow(steps: Vec<ExecutedStep>) -> Workflow {
        Workflow {
            env: "tracker".into(),
            state: "00.json".into(),
            task_id: "tracker-000".into(),
            request: "r".into(),
            steps,
        }
    }

    /// get, create OPS-9 (project OPS), search OPS, update its title, close it, get it.
    fn tracker() -> Workflow {
        let issue = |title: &str, status: &str| json!({"id": "OPS-9", "project": "OPS", "title": title, "status": status, "story_points": 3});
        let mut get0 = step(
            "get_issue",
            json!({"issue_id": "OPS-1"}),
            json!({"success": true, "data": {"id": "OPS-1", "title": "Old", "status": "open"}}),
            Purpose::Lookup,
        );
        get0.names = Some(rec("issues", "OPS-1"));
        let mut create = step(
            "create_issue",
            json!({"project_key": "OPS", "title": "Disk"}),
            json!({"success": true, "issue_id": "OPS-9"}),
            Purpose::Create,
        );
        create.effect.created = vec![rec("issues", "OPS-9")];
        let search = step(
            "search_issues",
            json!({"project_key": "OPS"}),
            json!({"success": true, "count": 2, "data": [{"id": "OPS-1", "title": "Old"}, issue("Disk", "open")]}),
            Purpose::Listing,
        );
        let mut update = step(
            "update_issue",
            json!({"issue_id": "OPS-9", "title": "Disk full"}),
            json!({"success": true}),
            Purpose::Update,
        );
        update.effect.changed = vec![FieldChange {
            record: rec("issues", "OPS-9"),
            field: "title".into(),
            before: json!("Disk"),
            after: json!("Disk full"),
        }];
        let mut close = step(
            "close_issue",
            json!({"issue_id": "OPS-9"}),
            json!({"success": true}),
            Purpose::StatusChange,
        );
        close.effect.changed = vec![FieldChange {
            record: rec("issues", "OPS-9"),
            field: "status".into(),
            before: json!("open"),
            after: json!("closed"),
        }];
        let mut get = step(
            "get_issue",
            json!({"issue_id": "OPS-9"}),
            json!({"success": true, "data": {"title": "Disk full", "status": "closed", "story_points": 3}}),
            Purpose::Lookup,
        );
        get.names = Some(rec("issues", "OPS-9"));
        get.counterpart = Some(Counterpart {
            answer: json!({"success": false, "error": "issue ZZ-0 not found"}),
            from: "ZZ-0".into(),
            to: "OPS-9".into(),
        });
        let mut again = step(
            "close_issue",
            json!({"issue_id": "OPS-9"}),
            json!({"success": false, "error": "already closed"}),
            Purpose::RefusedRepeat,
        );
        again.names = Some(rec("issues", "OPS-9"));
        again.counterpart = Some(Counterpart {
            answer: json!({"success": true}),
            from: "OPS-9".into(),
            to: "OPS-9".into(),
        });
        workflow(vec![get0, create, search, update, close, get, again])
    }

    fn only(kind: FaultKind) -> PlantedFault {
        let w = tracker();
        let initial = |id: &str| id == "OPS-1";
        plant(&w, kind, &initial, &mut Rng::new(1)).expect("plantable")
    }

    #[test]
    fn a_stale_read_shows_the_value_before_the_update_where_the_record_is_read() {
        let f = only(FaultKind::StaleRead);
        assert_eq!((f.step, f.resource.as_deref()), (5, Some("issues/OPS-9")));
        assert_eq!(
            f.answer,
            json!({"success": true, "data": {"title": "Disk", "status": "closed", "story_points": 3}})
        );
        assert_eq!(
            f.detail,
            "title shown as \"Disk\" (step 3, update_issue, set it to \"Disk full\")"
        );
    }

    #[test]
    fn a_resurrection_shows_the_old_status() {
        let f = only(FaultKind::ResurrectionByStatus);
        assert_eq!(f.step, 5);
        assert_eq!(f.answer["data"]["status"], json!("open"));
        assert_eq!(f.answer["data"]["title"], json!("Disk full"));
    }

    #[test]
    fn a_vanished_create_is_the_getters_own_not_found_for_the_created_id() {
        let f = only(FaultKind::VanishedCreate);
        assert_eq!(f.step, 5);
        assert_eq!(
            f.answer,
            json!({"success": false, "error": "issue OPS-9 not found"})
        );
    }

    #[test]
    fn a_list_omission_drops_the_created_record_and_lowers_the_count() {
        let f = only(FaultKind::ListOmission);
        assert_eq!(f.step, 2);
        assert_eq!(
            f.answer,
            json!({"success": true, "count": 1, "data": [{"id": "OPS-1", "title": "Old"}]})
        );
        assert_eq!(
            f.detail,
            "created at step 1 with project_key=\"OPS\", omitted from the listing filtered on it"
        );
    }

    #[test]
    fn a_phantom_is_a_copy_under_an_id_no_state_holds() {
        let f = only(FaultKind::PhantomCopy);
        assert_eq!(f.step, 2);
        let listed: Vec<&Value> = f.answer["data"].as_array().unwrap().iter().collect();
        assert_eq!(listed.len(), 3);
        assert_eq!(listed[2], &json!({"id": "OPS-7001", "title": "Old"}));
        assert_eq!(f.detail, "a copy of OPS-1 listed as OPS-7001");
    }

    #[test]
    fn a_flip_answers_the_refused_repeat_with_its_earlier_success() {
        let f = only(FaultKind::HappyPathFlip);
        assert_eq!((f.step, f.answer.clone()), (6, json!({"success": true})));
    }

    #[test]
    fn a_drift_renames_or_retypes_one_field_in_place() {
        let w = tracker();
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..40 {
            let f = plant(&w, FaultKind::SchemaDrift, &|_| false, &mut Rng::new(seed)).unwrap();
            seen.insert((f.step, f.detail.clone()));
            if f.step == 1 {
                // The key keeps its place.
                assert_eq!(
                    f.answer.as_object().unwrap().keys().collect::<Vec<_>>(),
                    ["success", "issueId"]
                );
            }
        }
        assert!(seen.contains(&(1, "issue_id renamed issueId".to_owned())));
        assert!(seen.contains(&(2, "count answered as the text \"2\"".to_owned())));
        assert!(seen.contains(&(5, "story_points renamed storyPoints".to_owned())));
    }

    #[test]
    fn nothing_is_planted_where_the_workflow_cannot_show_it() {
        // Only reads of a record in the initial state: nothing updated, created or refused.
        let mut get = step(
            "get_issue",
            json!({"issue_id": "OPS-1"}),
            json!({"success": true, "data": {"title": "Old", "status": "open"}}),
            Purpose::Lookup,
        );
        get.names = Some(rec("issues", "OPS-1"));
        let w = workflow(vec![get.clone(), get]);
        for kind in [
            FaultKind::StaleRead,
            FaultKind::ResurrectionByStatus,
            FaultKind::VanishedCreate,
            FaultKind::ListOmission,
            FaultKind::PhantomCopy,
            FaultKind::HappyPathFlip,
            FaultKind::SchemaDrift,
        ] {
            assert_eq!(
                plant(&w, kind, &|_| true, &mut Rng::new(3)),
                None,
                "{kind:?}"
            );
        }
        // A read before the update cannot be stale; a listing whose filter the create was not
        // given cannot omit it.
        let mut w = tracker();
        w.steps.swap(3, 5);
        w.steps[2].arguments = json!({"status": "open"}).as_object().unwrap().clone();
        assert_eq!(
            plant(&w, FaultKind::StaleRead, &|_| false, &mut Rng::new(1)),
            None
        );
        assert_eq!(
            plant(&w, FaultKind::ListOmission, &|_| false, &mut Rng::new(1)),
            None
        );
    }

    #[test]
    fn ids_and_names() {
        assert_eq!(
            (
                singular("issues"),
                singular("categories"),
                singular("boxes"),
                singular("staff")
            ),
            (
                "issue".into(),
                "category".into(),
                "box".into(),
                "staff".into()
            )
        );
        assert!(is_own_id_key("lot_id", "point_lot"));
        assert!(!is_own_id_key("customer_id", "order"));
        assert_eq!(camel("total_charged_eur"), "totalChargedEur");
        let taken = |id: &str| id == "A-7005";
        assert_eq!(fresh_id("A-5", &|id| !taken(id)), Some("A-7006".into()));
        assert_eq!(fresh_id("C-0042", &|_| true), Some("C-7042".into()));
        assert_eq!(fresh_id("alpha", &|_| true), Some("alpha-2".into()));
    }

    #[test]
    fn a_set_labels_every_trajectory_and_plants_in_about_the_rate() {
        let workflows: Vec<Workflow> = (0..20)
            .map(|i| {
                let mut w = tracker();
                w.task_id = format!("tracker-{i:03}");
                w
            })
            .collect();
        let set = plant_set(&workflows, 0.5, 7, &|_, id| id == "OPS-1");
        assert_eq!((set.transcripts.len(), set.labels.len()), (20, 20));
        let faulty: Vec<FaultKind> = set
            .labels
            .iter()
            .filter_map(|l| l.fault.as_ref().map(|f| f.kind))
            .collect();
        // Each kind once before any twice (every kind can be shown here).
        assert_eq!(&faulty[..7], &FaultKind::ALL);
        assert_eq!(
            set.labels.iter().map(|l| l.line).collect::<Vec<_>>(),
            (1..=20).collect::<Vec<_>>()
        );
        // Rate 0: all clean; the same seed: the same set.
        assert!(plant_set(&workflows, 0.0, 7, &|_, _| false)
            .labels
            .iter()
            .all(|l| l.fault.is_none()));
        let again = plant_set(&workflows, 0.5, 7, &|_, id| id == "OPS-1");
        assert_eq!(again.labels, set.labels);
        assert_eq!(again.transcripts, set.transcripts);
    }
}

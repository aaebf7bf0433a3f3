//! The fault injector: plants known faults in consistent, executed trajectories — in their
//! states and observations ([`inject`]) or, for trajectories without states, in their
//! observations only ([`inject_calls`](super::inject_calls)) — so that the checks can be scored on
//! ground truth ([`FaultPlan`] takes the kinds in turn).

use super::observed::{id_noun, named, singular, CallTrajectory};
use super::{
    bias, implied, label, observed, resources, scalars, AuditTrajectory, ResourceKey, ViolationKind,
};
use implied::id_text;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// Faults the injector ([`inject`]) plants in a consistent trajectory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A successful change is lost: its step leaves the state as it was (the trajectory ends
    /// there, since what followed relied on the change).
    DroppedUpdate,
    /// A created resource disappears at a later step that does not delete it.
    VanishedCreate,
    /// A deleted resource is back at a later step.
    ResurrectedDelete,
    /// A resource nobody created appears at some step.
    PhantomEntity,
    /// A read returns a value the resource had earlier.
    StaleRead,
    /// A failed call is reported as a success, changing nothing.
    HappyPathFlip,
    /// A listing loses one of its records (planted in observations only).
    ListOmission,
    /// A read shows a status back at the value a successful change moved it from (a
    /// cancelled reservation read back as confirmed; planted in observations only).
    RevertedStatus,
    /// A listing or read returns a copy of a record under an id no state ever held
    /// (planted in observations only).
    PhantomCopy,
    /// A successful response renames one of its fields (`ticket_id` → `ticketId`) or changes
    /// its type (a number sent as a string).
    SchemaDrift,
    /// A failure says another kind of error than the real one (not found for a conflict, ...).
    WrongError,
}

impl FaultKind {
    /// Every kind, in report order.
    pub const ALL: [FaultKind; 8] = [
        FaultKind::DroppedUpdate,
        FaultKind::VanishedCreate,
        FaultKind::ResurrectedDelete,
        FaultKind::PhantomEntity,
        FaultKind::StaleRead,
        FaultKind::HappyPathFlip,
        FaultKind::SchemaDrift,
        FaultKind::WrongError,
    ];

    /// The kinds planted in trajectories without states ([`inject_calls`](super::inject_calls)): a
    /// dropped update shows in calls only as a later stale read, which has its own kind.
    pub const CALLS: [FaultKind; 10] = [
        FaultKind::VanishedCreate,
        FaultKind::ResurrectedDelete,
        FaultKind::PhantomEntity,
        FaultKind::StaleRead,
        FaultKind::HappyPathFlip,
        FaultKind::ListOmission,
        FaultKind::SchemaDrift,
        FaultKind::WrongError,
        FaultKind::RevertedStatus,
        FaultKind::PhantomCopy,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::DroppedUpdate => "dropped_update",
            FaultKind::VanishedCreate => "vanished_create",
            FaultKind::ResurrectedDelete => "resurrected_delete",
            FaultKind::PhantomEntity => "phantom_entity",
            FaultKind::StaleRead => "stale_read",
            FaultKind::HappyPathFlip => "happy_path_flip",
            FaultKind::ListOmission => "list_omission",
            FaultKind::RevertedStatus => "reverted_status",
            FaultKind::PhantomCopy => "phantom_copy",
            FaultKind::SchemaDrift => "schema_drift",
            FaultKind::WrongError => "wrong_error",
        }
    }

    /// The violation kinds that find this fault at its step.
    pub fn found_by(self) -> &'static [ViolationKind] {
        match self {
            FaultKind::DroppedUpdate => &[
                ViolationKind::SuccessWithoutChange,
                ViolationKind::WriteNotApplied,
            ],
            FaultKind::VanishedCreate => &[ViolationKind::VanishedWithoutDelete],
            FaultKind::ResurrectedDelete => &[
                ViolationKind::AppearedWithoutCreate,
                ViolationKind::ReadAfterDelete,
            ],
            FaultKind::PhantomEntity => &[
                ViolationKind::AppearedWithoutCreate,
                ViolationKind::PhantomId,
            ],
            FaultKind::StaleRead => &[ViolationKind::StaleRead, ViolationKind::StatusReverted],
            FaultKind::HappyPathFlip => &[
                ViolationKind::PreconditionFailed,
                ViolationKind::SuccessWithoutChange,
                ViolationKind::PhantomId,
                ViolationKind::ReadAfterDelete,
                ViolationKind::ContradictoryRepeat,
            ],
            FaultKind::ListOmission => &[ViolationKind::ListInconsistent],
            FaultKind::RevertedStatus => &[ViolationKind::StatusReverted, ViolationKind::StaleRead],
            FaultKind::PhantomCopy => &[
                ViolationKind::PhantomId,
                ViolationKind::ListInconsistent,
                ViolationKind::AppearedWithoutCreate,
            ],
            FaultKind::SchemaDrift => &[ViolationKind::ResponseShape],
            FaultKind::WrongError => &[
                ViolationKind::ErrorContradictsState,
                ViolationKind::VanishedWithoutDelete,
                ViolationKind::ContradictoryRepeat,
            ],
        }
    }
}

/// Where a fault was planted.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FaultLabel {
    /// The trajectory.
    pub trajectory: String,
    /// The step.
    pub step: usize,
    /// What kind.
    pub kind: FaultKind,
    /// The resource, when one is involved.
    pub resource: Option<String>,
}

/// Plants one fault in a share of the trajectories it is given, the kinds in turn (a
/// trajectory without a place for its kind stays clean).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultPlan {
    turn: usize,
}

impl FaultPlan {
    /// With probability `rate`, the next kind's fault in a copy of `t` and its label.
    pub fn plant(
        &mut self,
        t: &AuditTrajectory,
        rate: f64,
        rng: &mut crate::rng::Rng,
    ) -> Option<(AuditTrajectory, FaultLabel)> {
        if !rng.chance(rate) {
            return None;
        }
        let kind = FaultKind::ALL[self.turn % FaultKind::ALL.len()];
        self.turn += 1;
        inject(t, kind, rng)
    }

    /// The same for trajectories without states: with probability `rate`, the next of
    /// [`FaultKind::CALLS`] that has a place, planted in the calls of `t`
    /// ([`inject_calls`](super::inject_calls)).
    pub fn plant_calls(
        &mut self,
        t: &AuditTrajectory,
        rate: f64,
        rule: &crate::outcome::OutcomeRule,
        rng: &mut crate::rng::Rng,
    ) -> Option<(observed::CallTrajectory, FaultLabel)> {
        if !rng.chance(rate) {
            return None;
        }
        // The next kind in turn that has a place in the trajectory: agent workflows rarely
        // have one for every kind (no failure to flip, no delete to undo), and a trajectory
        // chosen for a fault should get one when any kind fits.
        let n = FaultKind::CALLS.len();
        for _ in 0..n {
            let kind = FaultKind::CALLS[self.turn % n];
            self.turn += 1;
            if let Some(planted) = inject_calls(t, kind, rule, rng) {
                return Some(planted);
            }
        }
        None
    }
}

/// The state before step `k`.
pub(crate) fn state_before(t: &AuditTrajectory, k: usize) -> &std::sync::Arc<Value> {
    if k == 0 {
        &t.initial_state
    } else {
        &t.steps[k - 1].state_after
    }
}

/// Every (later step, resource) where a top-level resource an earlier step created is still
/// there, in step order.
pub(crate) fn created_then_present(t: &AuditTrajectory) -> Vec<(usize, ResourceKey)> {
    let n = t.steps.len();
    let mut out = Vec::new();
    for k in 0..n {
        let (a, b) = (
            resources(state_before(t, k)),
            resources(&t.steps[k].state_after),
        );
        for key in b
            .keys()
            .filter(|key| !a.contains_key(*key) && !key.0.contains('*'))
        {
            for m in k + 1..n {
                if !resources(&t.steps[m].state_after).contains_key(key) {
                    break;
                }
                out.push((m, key.clone()));
            }
        }
    }
    out
}

/// Every (later step, resource, its value before removal) where a top-level resource an
/// earlier step removed is still gone, in step order.
pub(crate) fn removed_then_absent(t: &AuditTrajectory) -> Vec<(usize, ResourceKey, Value)> {
    let n = t.steps.len();
    let mut out = Vec::new();
    for d in 0..n {
        let (a, b) = (
            resources(state_before(t, d)),
            resources(&t.steps[d].state_after),
        );
        for (key, value) in a
            .iter()
            .filter(|(key, _)| !b.contains_key(*key) && !key.0.contains('*'))
        {
            for m in d + 1..n {
                if resources(&t.steps[m].state_after).contains_key(key) {
                    break;
                }
                out.push((m, key.clone(), (*value).clone()));
            }
        }
    }
    out
}

/// Sets `(kind, id)` to `value` (`None`: removes it) in `state`, creating the collection path
/// as needed. Only resource types without `*` (top-level collections) are written.
pub(crate) fn put_resource(state: &mut Value, kind: &str, id: &str, value: Option<&Value>) -> bool {
    if kind.contains('*') || kind.is_empty() {
        return false;
    }
    let mut node = state;
    for part in kind.split('/') {
        let Some(map) = node.as_object_mut() else {
            return false;
        };
        node = map
            .entry(part.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    let Some(map) = node.as_object_mut() else {
        return false;
    };
    match value {
        Some(v) => {
            map.insert(id.to_owned(), v.clone());
        }
        None => {
            map.shift_remove(id);
        }
    }
    true
}

/// Where a read can show a value its resource had earlier: (step, object path in the
/// observation, field, earlier value), for successful reads that change nothing and return a
/// field of a resource their arguments name with its current value.
pub(crate) type StaleCandidate = (usize, ResourceKey, Vec<String>, String, Value);

/// Every [`StaleCandidate`] of a trajectory, in step order.
pub(crate) fn stale_candidates(t: &AuditTrajectory) -> Vec<StaleCandidate> {
    let n = t.steps.len();
    let mut candidates = Vec::new();
    for m in 0..n {
        let step = &t.steps[m];
        if step.success != Some(true) || *state_before(t, m) != step.state_after {
            continue;
        }
        let current = resources(&step.state_after);
        let mut paths = Vec::new();
        object_paths(&step.observation, &mut Vec::new(), &mut paths);
        for value in step.arguments.values() {
            let Some(id) = implied::id_text(value) else {
                continue;
            };
            for (key, resource) in current.iter().filter(|(k, _)| k.1 == id) {
                let truth = scalars(resource);
                for (path, object) in &paths {
                    for (field, seen) in scalars(object) {
                        if truth.get(field) != Some(&seen) {
                            continue;
                        }
                        // An earlier, different value of the field.
                        let old = (0..m).rev().find_map(|j| {
                            let r = resources(state_before(t, j));
                            let v = r.get(key)?.get(field)?.clone();
                            (v != *seen && !v.is_object() && !v.is_array()).then_some(v)
                        });
                        if let Some(old) = old {
                            candidates.push((m, key.clone(), path.clone(), field.to_owned(), old));
                        }
                    }
                }
            }
        }
    }
    candidates
}

/// Plants a stale read: the candidate's field set back to its earlier value.
pub(crate) fn plant_stale(
    mut out: AuditTrajectory,
    (m, key, path, field, old): StaleCandidate,
    kind: FaultKind,
) -> Option<(AuditTrajectory, FaultLabel)> {
    let node = at_path_mut(&mut out.steps[m].observation, &path)?;
    node.as_object_mut()?.insert(field, old);
    let label = FaultLabel {
        trajectory: out.id.clone(),
        step: m,
        kind,
        resource: Some(label(&key)),
    };
    Some((out, label))
}

/// Plants one fault of `kind` in a copy of `t` (a consistent, executed trajectory), at a place
/// chosen with `rng` among those where it can go; `None` when there is none.
pub fn inject(
    t: &AuditTrajectory,
    kind: FaultKind,
    rng: &mut crate::rng::Rng,
) -> Option<(AuditTrajectory, FaultLabel)> {
    let n = t.steps.len();
    let mut out = t.clone();
    let mark = |step: usize, resource: Option<String>| FaultLabel {
        trajectory: t.id.clone(),
        step,
        kind,
        resource,
    };
    match kind {
        FaultKind::DroppedUpdate => {
            let candidates: Vec<usize> = (0..n)
                .filter(|&k| {
                    t.steps[k].success == Some(true)
                        && *state_before(t, k) != t.steps[k].state_after
                })
                .collect();
            let &k = rng.pick(&candidates)?;
            out.steps[k].state_after = state_before(t, k).clone();
            out.steps.truncate(k + 1);
            Some((out, mark(k, None)))
        }
        FaultKind::VanishedCreate => {
            // (vanishes at, resource): a later step keeps it in the truth.
            let candidates = created_then_present(t);
            let (m, key) = rng.pick(&candidates)?.clone();
            for step in &mut out.steps[m..] {
                if !resources(&step.state_after).contains_key(&key) {
                    break;
                }
                put_resource(
                    std::sync::Arc::make_mut(&mut step.state_after),
                    &key.0,
                    &key.1,
                    None,
                );
            }
            Some((out, mark(m, Some(label(&key)))))
        }
        FaultKind::ResurrectedDelete => {
            let candidates = removed_then_absent(t);
            let (m, key, value) = rng.pick(&candidates)?.clone();
            for step in &mut out.steps[m..] {
                if resources(&step.state_after).contains_key(&key) {
                    break;
                }
                put_resource(
                    std::sync::Arc::make_mut(&mut step.state_after),
                    &key.0,
                    &key.1,
                    Some(&value),
                );
            }
            Some((out, mark(m, Some(label(&key)))))
        }
        FaultKind::PhantomEntity => {
            // A copy of an existing resource under a new id, at any step.
            let mut candidates = Vec::new();
            for m in 0..n {
                for (key, value) in resources(&t.steps[m].state_after) {
                    if !key.0.contains('*') {
                        candidates.push((m, key, value.clone()));
                    }
                }
            }
            let (m, key, value) = rng.pick(&candidates)?.clone();
            let id = format!("PHANTOM-{:04}", rng.below(10_000));
            let phantom = (key.0.clone(), id.clone());
            for step in &mut out.steps[m..] {
                put_resource(
                    std::sync::Arc::make_mut(&mut step.state_after),
                    &key.0,
                    &id,
                    Some(&value),
                );
            }
            Some((out, mark(m, Some(label(&phantom)))))
        }
        FaultKind::StaleRead => {
            let candidates = stale_candidates(t);
            let candidate = rng.pick(&candidates)?.clone();
            plant_stale(out, candidate, kind)
        }
        FaultKind::ListOmission | FaultKind::RevertedStatus | FaultKind::PhantomCopy => None,
        FaultKind::WrongError => {
            // A failure whose text says something: replaced by the text of another kind.
            let candidates: Vec<usize> = (0..n)
                .filter(|&k| {
                    t.steps[k].success == Some(false) && has_error_text(&t.steps[k].observation)
                })
                .collect();
            let &k = rng.pick(&candidates)?;
            let now = bias::outcome_class(&t.steps[k].observation, Some(false));
            let others: Vec<&str> = ["not_found", "invalid_argument", "conflict", "permission"]
                .into_iter()
                .filter(|c| *c != now)
                .collect();
            // A "not found" quotes the id the call names, as simulators write it.
            let named = t.steps[k].arguments.iter().find_map(|(arg, v)| {
                observed::id_noun(arg)?;
                v.as_str().map(|id| format!("{arg} {id}"))
            });
            let text = match *rng.pick(&others)? {
                "not_found" => match named {
                    Some(what) => format!("{what} not found"),
                    None => "the requested record was not found".to_owned(),
                },
                "invalid_argument" => "invalid argument: the request must be corrected".to_owned(),
                "conflict" => "the operation is not allowed in the current state".to_owned(),
                _ => "permission denied for this operation".to_owned(),
            };
            let slot = error_text(&mut out.steps[k].observation)?;
            // Keep a prefix the outcome rule reads (`Error: ...`).
            let prefix = slot
                .split_once(':')
                .filter(|(head, _)| head.len() <= 12 && !head.contains(' '))
                .map(|(head, _)| format!("{head}: "))
                .unwrap_or_default();
            *slot = format!("{prefix}{text}");
            Some((out, mark(k, None)))
        }
        FaultKind::SchemaDrift => {
            // (step, object path in the observation, field) of a successful response; the keys
            // that carry the outcome stay.
            let mut candidates = Vec::new();
            for m in 0..n {
                if t.steps[m].success != Some(true) {
                    continue;
                }
                let mut paths = Vec::new();
                object_paths(&t.steps[m].observation, &mut Vec::new(), &mut paths);
                for (path, object) in paths {
                    for (field, value) in object.as_object().into_iter().flatten() {
                        if !value.is_null()
                            && !["success", "error", "status"].contains(&field.as_str())
                        {
                            candidates.push((m, path.clone(), field.clone()));
                        }
                    }
                }
            }
            let (m, path, field) = rng.pick(&candidates)?.clone();
            let rename = rng.chance(0.5);
            let node = at_path_mut(&mut out.steps[m].observation, &path)?;
            let object = node.as_object_mut()?;
            if rename {
                let value = object.shift_remove(&field)?;
                object.insert(drifted_name(&field), value);
            } else {
                let value = object.get_mut(&field)?;
                *value = match value.take() {
                    Value::Number(n) => Value::String(n.to_string()),
                    Value::String(text) => Value::Array(vec![Value::String(text)]),
                    Value::Bool(b) => Value::String(b.to_string()),
                    Value::Array(items) => Value::Object(
                        items
                            .into_iter()
                            .enumerate()
                            .map(|(i, v)| (i.to_string(), v))
                            .collect(),
                    ),
                    Value::Object(map) => Value::Array(map.into_iter().map(|(_, v)| v).collect()),
                    Value::Null => Value::Null,
                };
            }
            Some((out, mark(m, None)))
        }
        FaultKind::HappyPathFlip => {
            let candidates: Vec<usize> = (0..n)
                .filter(|&k| {
                    t.steps[k].success == Some(false)
                        && *state_before(t, k) == t.steps[k].state_after
                })
                .collect();
            let &k = rng.pick(&candidates)?;
            out.steps[k].success = Some(true);
            out.steps[k].observation = serde_json::json!({"success": true, "message": "done"});
            Some((out, mark(k, None)))
        }
    }
}

/// Keys under which an observation object keeps its error text.
const ERROR_KEYS: [&str; 3] = ["error", "message", "detail"];

/// Whether a failure's observation has an error text: it is text, or has an `error` /
/// `message` / `detail` string.
fn has_error_text(observation: &Value) -> bool {
    observation.is_string()
        || ERROR_KEYS
            .iter()
            .any(|k| observation.get(k).is_some_and(Value::is_string))
}

/// The error text of a failure's observation (see [`has_error_text`]), to rewrite.
fn error_text(observation: &mut Value) -> Option<&mut String> {
    match observation {
        Value::String(s) => Some(s),
        Value::Object(map) => {
            let key = ERROR_KEYS
                .into_iter()
                .find(|k| map.get(*k).is_some_and(Value::is_string))?;
            match map.get_mut(key) {
                Some(Value::String(s)) => Some(s),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A field name as another API version might spell it: snake case to camel case
/// (`ticket_id` → `ticketId`), camel case to snake case, else with a suffix.
fn drifted_name(field: &str) -> String {
    if field.contains('_') {
        let mut out = String::new();
        let mut upper = false;
        for c in field.chars() {
            if c == '_' {
                upper = true;
            } else if upper {
                out.extend(c.to_uppercase());
                upper = false;
            } else {
                out.push(c);
            }
        }
        out
    } else if field.chars().any(char::is_uppercase) {
        let mut out = String::new();
        for c in field.chars() {
            if c.is_uppercase() {
                out.push('_');
                out.extend(c.to_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    } else {
        format!("{field}_value")
    }
}

/// The objects inside a value with their paths.
fn object_paths<'v>(
    value: &'v Value,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, &'v Value)>,
) {
    match value {
        Value::Object(map) => {
            out.push((path.clone(), value));
            for (k, v) in map {
                path.push(k.clone());
                object_paths(v, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                path.push(i.to_string());
                object_paths(v, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Plants one fault of `kind` in the calls of `truth` (a consistent, executed trajectory with
/// its states), as a simulator that got it wrong would show it in its observations: the states
/// say where each kind can go, `rule` writes observations the environment's outcome rule reads
/// as intended. `None` when the kind has no place in the trajectory.
///
/// - stale read: a read returns a value the resource had earlier (as [`super::inject`]);
/// - vanished create: a later successful call on a created resource fails with "not found";
/// - resurrected delete: a later failed call on a deleted resource succeeds with its old
///   record;
/// - phantom entity: a failed call naming an id no state holds succeeds with a record;
/// - happy-path flip: a failed call succeeds;
/// - list omission: a successful read's listing loses one record.
pub fn inject_calls(
    truth: &super::AuditTrajectory,
    kind: super::FaultKind,
    rule: &crate::outcome::OutcomeRule,
    rng: &mut crate::rng::Rng,
) -> Option<(CallTrajectory, super::FaultLabel)> {
    let n = truth.steps.len();
    let mark = |step: usize, resource: Option<String>| FaultLabel {
        trajectory: truth.id.clone(),
        step,
        kind,
        resource,
    };
    let names_id = |k: usize, id: &str| {
        truth.steps[k]
            .arguments
            .values()
            .any(|v| id_text(v).as_deref() == Some(id))
    };
    let mut out = CallTrajectory::from(truth);
    match kind {
        FaultKind::StaleRead | FaultKind::SchemaDrift | FaultKind::WrongError => {
            let (faulty, label) = super::inject(truth, kind, rng)?;
            Some((CallTrajectory::from(&faulty), label))
        }
        FaultKind::VanishedCreate => {
            let candidates: Vec<(usize, ResourceKey)> = created_then_present(truth)
                .into_iter()
                .filter(|(m, key)| truth.steps[*m].success == Some(true) && names_id(*m, &key.1))
                .collect();
            let (m, key) = rng.pick(&candidates)?.clone();
            let noun = singular(key.0.rsplit('/').next().unwrap_or_default());
            out.steps[m].observation =
                rule.failure_example(&format!("{noun} {} not found", key.1))?;
            out.steps[m].success = Some(false);
            Some((out, mark(m, Some(super::label(&key)))))
        }
        FaultKind::ResurrectedDelete => {
            let candidates: Vec<(usize, ResourceKey, Value)> = removed_then_absent(truth)
                .into_iter()
                .filter(|(m, key, _)| {
                    truth.steps[*m].success == Some(false) && names_id(*m, &key.1)
                })
                .collect();
            let (m, key, value) = rng.pick(&candidates)?.clone();
            out.steps[m].observation = rule.success_example(value)?;
            out.steps[m].success = Some(true);
            Some((out, mark(m, Some(super::label(&key)))))
        }
        FaultKind::PhantomEntity => {
            let held = ids_ever_held(truth);
            let candidates: Vec<(usize, String)> = (0..n)
                .filter(|&m| truth.steps[m].success == Some(false))
                .flat_map(|m| {
                    named(
                        &observed::tool_noun(&truth.steps[m].tool),
                        &truth.steps[m].arguments,
                    )
                    .into_iter()
                    .filter(|(_, key)| !held.contains(&key.1))
                    .map(move |(_, key)| (m, key.1))
                })
                .collect();
            let (m, id) = rng.pick(&candidates)?.clone();
            let pool: Vec<Value> = resources(state_before(truth, m))
                .into_iter()
                .filter(|(key, _)| !key.0.contains('*'))
                .map(|(_, v)| v.clone())
                .collect();
            let mut record = rng.pick(&pool)?.clone();
            if let Value::Object(map) = &mut record {
                map.insert("id".into(), Value::String(id.clone()));
            }
            out.steps[m].observation = rule.success_example(record)?;
            out.steps[m].success = Some(true);
            Some((out, mark(m, Some(id))))
        }
        FaultKind::HappyPathFlip => {
            let candidates: Vec<usize> = (0..n)
                .filter(|&k| truth.steps[k].success == Some(false))
                .collect();
            let &k = rng.pick(&candidates)?;
            out.steps[k].observation = rule.success_example(Value::String("done".into()))?;
            out.steps[k].success = Some(true);
            Some((out, mark(k, None)))
        }
        FaultKind::ListOmission => {
            let candidates: Vec<(usize, Vec<String>)> = (0..n)
                .filter(|&k| {
                    truth.steps[k].success == Some(true)
                        && *state_before(truth, k) == truth.steps[k].state_after
                })
                .flat_map(|k| {
                    let mut lists = Vec::new();
                    array_paths(&truth.steps[k].observation, 2, &mut Vec::new(), &mut lists);
                    lists.into_iter().map(move |p| (k, p))
                })
                .collect();
            let (k, path) = rng.pick(&candidates)?.clone();
            let node = at_path_mut(&mut out.steps[k].observation, &path)?;
            let items = node.as_array_mut()?;
            let gone = rng.below(items.len());
            items.remove(gone);
            Some((out, mark(k, None)))
        }
        FaultKind::RevertedStatus => {
            let candidates: Vec<StaleCandidate> = stale_candidates(truth)
                .into_iter()
                .filter(|(_, _, _, field, _)| super::implied::is_status_field(field))
                .collect();
            let candidate = rng.pick(&candidates)?.clone();
            let (faulty, label) = plant_stale(truth.clone(), candidate, kind)?;
            Some((CallTrajectory::from(&faulty), label))
        }
        FaultKind::PhantomCopy => {
            let held = ids_ever_held(truth);
            // Records of successful reads that change nothing, in an array: (step, array
            // path, index, the key holding the record's id).
            let mut candidates: Vec<(usize, Vec<String>, usize, String)> = Vec::new();
            for m in 0..n {
                let step = &truth.steps[m];
                if step.success != Some(true) || *state_before(truth, m) != step.state_after {
                    continue;
                }
                let mut lists = Vec::new();
                array_paths(&step.observation, 1, &mut Vec::new(), &mut lists);
                for path in lists {
                    let Some(Value::Array(items)) = at_path(&step.observation, &path) else {
                        continue;
                    };
                    for (i, item) in items.iter().enumerate() {
                        let Some(map) = item.as_object() else {
                            continue;
                        };
                        let id_key = map.iter().find_map(|(k, v)| {
                            (id_noun(k).is_some()
                                && id_text(v).is_some_and(|id| held.contains(&id)))
                            .then(|| k.clone())
                        });
                        if let Some(id_key) = id_key {
                            candidates.push((m, path.clone(), i, id_key));
                        }
                    }
                }
            }
            let (m, path, i, id_key) = rng.pick(&candidates)?.clone();
            let node = at_path_mut(&mut out.steps[m].observation, &path)?;
            let items = node.as_array_mut()?;
            let mut copy = items.get(i)?.clone();
            let fresh = match copy.get(&id_key)? {
                Value::Number(n) => {
                    let base = n.as_i64()?;
                    let id = (1..)
                        .map(|d| base + 7919 * d)
                        .find(|id| !held.contains(&id.to_string()))?;
                    Value::from(id)
                }
                other => {
                    let base = id_text(other)?;
                    let id = (2..)
                        .map(|d| format!("{base}-{d}"))
                        .find(|id| !held.contains(id))?;
                    Value::String(id)
                }
            };
            let id = id_text(&fresh)?;
            copy.as_object_mut()?.insert(id_key, fresh);
            items.push(copy);
            Some((out, mark(m, Some(id))))
        }
        FaultKind::DroppedUpdate => None,
    }
}

/// Every resource id any state of a trajectory holds.
fn ids_ever_held(t: &AuditTrajectory) -> BTreeSet<String> {
    std::iter::once(&t.initial_state)
        .chain(t.steps.iter().map(|s| &s.state_after))
        .flat_map(|state| resources(state).into_keys().map(|key| key.1))
        .collect()
}

/// The value at a path of keys and indices, to change.
fn at_path_mut<'v>(value: &'v mut Value, path: &[String]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |node, part| match node {
        Value::Object(map) => map.get_mut(part),
        Value::Array(items) => items.get_mut(part.parse::<usize>().ok()?),
        _ => None,
    })
}

/// The value at a path of keys and indices.
fn at_path<'v>(value: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(value, |node, part| match node {
        Value::Object(map) => map.get(part),
        Value::Array(items) => items.get(part.parse::<usize>().ok()?),
        _ => None,
    })
}

/// Paths of the arrays of at least `min` objects, and only objects, inside a value.
fn array_paths(value: &Value, min: usize, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                path.push(k.clone());
                array_paths(v, min, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            if items.len() >= min.max(1) && items.iter().all(Value::is_object) {
                out.push(path.clone());
            }
            for (i, v) in items.iter().enumerate() {
                path.push(i.to_string());
                array_paths(v, min, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::drifted_name;

    #[test]
    fn drifted_names_are_another_spelling() {
        assert_eq!(drifted_name("ticket_id"), "ticketId");
        assert_eq!(drifted_name("ticketId"), "ticket_id");
        assert_eq!(drifted_name("status"), "status_value");
    }
}

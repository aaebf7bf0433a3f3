//! A test double: a simulator with known error rates by kind. It runs the executor (so it needs
//! the code) and, at a seeded rate, spoils the true answer in one of the ways LLM simulators
//! are known to fail. Every attempt draws anew (seeded by the session seed, step and attempt),
//! as a model sampled again would, so a regeneration can repair a spoiled step. It stands in
//! for a model in measurements of anchoring, where the truth and the error rates must be known;
//! it is never a simulator of its own.
//!
//! How often it errs is its [`FaultProfile`]: a uniform share of the steps, or a profile
//! calibrated on the published EnvSimBench table, where frontier models are nearly perfect on
//! failures and on steps that change nothing and collapse as the number of changed fields
//! |Δ| grows ([`FaultProfile::EnvSimBench`] says how the rates were fitted).

use crate::backend::{
    BoxFuture, ExecutorSimulator, PredictError, Prediction, Simulator, StepRequest,
};
use envsim_core::audit::resources;
use envsim_core::diff::fine_diff;
use envsim_core::pointer::JsonPointer;
use envsim_core::rng::Rng;
use serde::Serialize;
use serde_json::{json, Value};

/// How the double spoils a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SimFault {
    /// A successful change is answered as done, but the state stays as it was.
    DroppedUpdate,
    /// A resource the call did not touch disappears from the state.
    VanishedResource,
    /// A copy of a resource appears under a new id.
    PhantomResource,
    /// A field of the answer is renamed.
    SchemaDrift,
    /// A failure is answered as a success, changing nothing.
    HappyPathFlip,
    /// Some of the changed fields keep their old values (a partial update).
    MissedFields,
    /// One changed field gets another value than the true one.
    WrongValue,
    /// A field the call did not change is changed too.
    SpuriousWrite,
    /// A created resource is stored under another id than the true one.
    InventedId,
    /// The state is right, but the answer reports the fields it changed with their old
    /// values (a stale observation).
    StaleObservation,
}

impl SimFault {
    /// Every kind.
    pub const ALL: [SimFault; 5] = [
        SimFault::DroppedUpdate,
        SimFault::VanishedResource,
        SimFault::PhantomResource,
        SimFault::SchemaDrift,
        SimFault::HappyPathFlip,
    ];

    /// The kinds of [`FaultProfile::EnvSimBench`] on a step that changes the state, with their
    /// weights: what a model that loses track of a large change gets wrong (missed fields
    /// first, then wrong values, answers that report the old values, spurious writes, invented
    /// ids, the whole change dropped).
    pub const STATE_CHANGE: [(SimFault, u32); 6] = [
        (SimFault::MissedFields, 35),
        (SimFault::WrongValue, 25),
        (SimFault::StaleObservation, 15),
        (SimFault::SpuriousWrite, 10),
        (SimFault::InventedId, 10),
        (SimFault::DroppedUpdate, 5),
    ];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            SimFault::DroppedUpdate => "dropped_update",
            SimFault::VanishedResource => "vanished_resource",
            SimFault::PhantomResource => "phantom_resource",
            SimFault::SchemaDrift => "schema_drift",
            SimFault::HappyPathFlip => "happy_path_flip",
            SimFault::MissedFields => "missed_fields",
            SimFault::WrongValue => "wrong_value",
            SimFault::SpuriousWrite => "spurious_write",
            SimFault::InventedId => "invented_id",
            SimFault::StaleObservation => "stale_observation",
        }
    }
}

/// How often the double errs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FaultProfile {
    /// This share of the steps, each spoiled in one of the [`SimFault::ALL`] ways that
    /// applies, drawn evenly.
    Uniform(f64),
    /// Calibrated on the published EnvSimBench table (seven frontier models, 400 samples):
    /// Config Match 99–100% on failures and steps that change nothing, 10–23% on steps that
    /// change the state, near 0 from |Δ| ≥ 5. The error rate per step is 0.5% when nothing
    /// changes and, by |Δ| (changed leaf fields), 25% at 1, 45% at 2, 70% at 3, 88% at 4 and
    /// 98% from 5. On the benchmark's composition (100 unchanged; 25 each at |Δ| 1 and 2; 50
    /// each at 3 to 6; 50 from 7) that gives 18.8% right on state changes and 39.0% overall,
    /// inside the published ranges (10.0–23.0% and 32.5–42.3%). A state-changing step errs in
    /// one of [`SimFault::STATE_CHANGE`]'s ways, by weight; an unchanged one as
    /// [`FaultProfile::Uniform`] would.
    EnvSimBench,
}

impl FaultProfile {
    /// The chance that a step with `delta` changed fields is spoiled.
    pub fn error_rate(self, delta: usize) -> f64 {
        match self {
            FaultProfile::Uniform(rate) => rate,
            FaultProfile::EnvSimBench => match delta {
                0 => 0.005,
                1 => 0.25,
                2 => 0.45,
                3 => 0.70,
                4 => 0.88,
                _ => 0.98,
            },
        }
    }

    /// Its name in reports (`uniform 0.3`, `envsimbench`).
    pub fn describe(self) -> String {
        match self {
            FaultProfile::Uniform(rate) => format!("uniform {rate}"),
            FaultProfile::EnvSimBench => "envsimbench".to_owned(),
        }
    }
}

/// The faulty simulator test double.
pub struct FaultySimulator {
    truth: ExecutorSimulator,
    profile: FaultProfile,
    seed: u64,
    label: String,
}

impl FaultySimulator {
    /// Spoils a `rate` share of the steps it can spoil, with faults drawn from `seed`; `label`
    /// tells two doubles apart in provenance.
    pub fn new(truth: ExecutorSimulator, rate: f64, seed: u64, label: &str) -> Self {
        FaultySimulator::with_profile(truth, FaultProfile::Uniform(rate), seed, label)
    }

    /// A double that errs as `profile` says.
    pub fn with_profile(
        truth: ExecutorSimulator,
        profile: FaultProfile,
        seed: u64,
        label: &str,
    ) -> Self {
        FaultySimulator {
            truth,
            profile,
            seed,
            label: label.to_owned(),
        }
    }
}

impl Simulator for FaultySimulator {
    fn name(&self) -> String {
        format!("faulty:{}", self.label)
    }

    fn predict<'a>(
        &'a self,
        r: &'a StepRequest<'a>,
    ) -> BoxFuture<'a, Result<Prediction, PredictError>> {
        Box::pin(async move {
            let mut p = self.truth.predict(r).await?;
            let mut rng = Rng::derive(
                self.seed,
                &format!("{}/{}/{}/{}", r.seed, r.step, r.attempt, r.tool),
            );
            let delta = match self.profile {
                FaultProfile::Uniform(_) => 0,
                FaultProfile::EnvSimBench => fine_diff(r.state, &p.state_after).len(),
            };
            if rng.chance(self.profile.error_rate(delta)) {
                let success = self.truth.outcome(r.env, &p.observation);
                let fault = if delta > 0 {
                    let weighted: Vec<(SimFault, u32)> = SimFault::STATE_CHANGE
                        .into_iter()
                        .filter(|(f, _)| applies(*f, r.state, &p, success))
                        .collect();
                    pick_weighted(&weighted, &mut rng)
                } else {
                    let applicable: Vec<SimFault> = SimFault::ALL
                        .into_iter()
                        .filter(|f| applies(*f, r.state, &p, success))
                        .collect();
                    rng.pick(&applicable).copied()
                };
                if let Some(fault) = fault {
                    spoil(fault, r, &mut p, &mut rng);
                }
            }
            Ok(p)
        })
    }
}

/// One of `weighted`, drawn by weight (`None` when empty).
fn pick_weighted(weighted: &[(SimFault, u32)], rng: &mut Rng) -> Option<SimFault> {
    let total: u32 = weighted.iter().map(|(_, w)| w).sum();
    if total == 0 {
        return None;
    }
    let mut at = rng.below(total as usize) as u32;
    for (fault, weight) in weighted {
        if at < *weight {
            return Some(*fault);
        }
        at -= weight;
    }
    None
}

/// The scalar leaf changes between two states that can be undone or altered in place (a
/// field of an object, or an element of an array that both states have).
fn leaf_changes(before: &Value, after: &Value) -> Vec<(JsonPointer, Option<Value>, Value)> {
    fine_diff(before, after)
        .into_iter()
        .filter_map(|c| {
            let now = c.after?;
            (!now.is_object() && !now.is_array())
                .then(|| (c.pointer.clone(), c.before.cloned(), now.clone()))
        })
        .collect()
}

/// Sets (or, with `None`, removes) the value at `pointer` inside `root`; false when the
/// place is not there.
fn put(root: &mut Value, pointer: &JsonPointer, value: Option<Value>) -> bool {
    let tokens = pointer.tokens();
    let Some((last, parents)) = tokens.split_last() else {
        return false;
    };
    let mut node = root;
    for t in parents {
        node = match node {
            Value::Object(map) => match map.get_mut(t) {
                Some(next) => next,
                None => return false,
            },
            Value::Array(items) => match t.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                Some(next) => next,
                None => return false,
            },
            _ => return false,
        };
    }
    match (node, value) {
        (Value::Object(map), Some(v)) => {
            map.insert(last.clone(), v);
            true
        }
        (Value::Object(map), None) => map.remove(last).is_some(),
        (Value::Array(items), Some(v)) => {
            match last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                Some(slot) => {
                    *slot = v;
                    true
                }
                None => false,
            }
        }
        _ => false,
    }
}

/// A value like `value` but not equal to it (a wrong value a model might write).
fn another(value: &Value, rng: &mut Rng) -> Value {
    match value {
        Value::Bool(b) => Value::Bool(!b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Value::from(i + 1 + rng.below(9) as i64),
            None => Value::from(n.as_f64().unwrap_or(0.0) * 1.1 + 1.0),
        },
        Value::String(s) if s.is_empty() => Value::String("none".into()),
        Value::String(s) => Value::String(format!("{s} (updated)")),
        _ => Value::String("unknown".into()),
    }
}

fn applies(fault: SimFault, before: &Value, p: &Prediction, success: Option<bool>) -> bool {
    match fault {
        SimFault::MissedFields | SimFault::WrongValue => {
            !leaf_changes(before, &p.state_after).is_empty()
        }
        SimFault::SpuriousWrite => !resources(&p.state_after).is_empty(),
        SimFault::InventedId => {
            let old = resources(before);
            resources(&p.state_after)
                .keys()
                .any(|k| !old.contains_key(k) && !k.0.contains('*'))
        }
        SimFault::StaleObservation => {
            let mut stale = p.observation.clone();
            stale_observation(&mut stale, before, &p.state_after)
        }
        SimFault::DroppedUpdate => success == Some(true) && *before != p.state_after,
        SimFault::VanishedResource | SimFault::PhantomResource => {
            !resources(&p.state_after).is_empty()
        }
        SimFault::SchemaDrift => p
            .observation
            .as_object()
            .is_some_and(|o| o.keys().any(|k| k.chars().any(|c| c.is_ascii_lowercase()))),
        SimFault::HappyPathFlip => success == Some(false),
    }
}

fn spoil(fault: SimFault, r: &StepRequest<'_>, p: &mut Prediction, rng: &mut Rng) {
    match fault {
        SimFault::DroppedUpdate => p.state_after = r.state.clone(),
        SimFault::VanishedResource => {
            let before = resources(r.state);
            let held: Vec<(String, String)> = resources(&p.state_after)
                .into_keys()
                .filter(|k| before.contains_key(k) && !k.0.contains('*'))
                .collect();
            if let Some((kind, id)) = rng.pick(&held).cloned() {
                if let Some(map) = p.state_after.get_mut(&kind).and_then(Value::as_object_mut) {
                    map.remove(&id);
                }
            }
        }
        SimFault::PhantomResource => {
            let held: Vec<((String, String), Value)> = resources(&p.state_after)
                .into_iter()
                .filter(|(k, _)| !k.0.contains('*'))
                .map(|(k, v)| (k, v.clone()))
                .collect();
            if let Some(((kind, id), value)) = rng.pick(&held).cloned() {
                if let Some(map) = p.state_after.get_mut(&kind).and_then(Value::as_object_mut) {
                    map.insert(format!("{id}-X{}", rng.below(90) + 10), value);
                }
            }
        }
        SimFault::SchemaDrift => {
            if let Some(map) = p.observation.as_object_mut() {
                let keys: Vec<String> = map
                    .keys()
                    .filter(|k| k.chars().any(|c| c.is_ascii_lowercase()))
                    .cloned()
                    .collect();
                if let Some(key) = rng.pick(&keys).cloned() {
                    if let Some(value) = map.remove(&key) {
                        map.insert(camel(&key), value);
                    }
                }
            }
        }
        SimFault::HappyPathFlip => {
            p.state_after = r.state.clone();
            p.observation = r
                .env
                .rule
                .as_ref()
                .and_then(|rule| rule.success_example(json!({})))
                .unwrap_or_else(|| json!({"success": true}));
        }
        SimFault::MissedFields => {
            // At least one, at most all but one (a whole change lost is a dropped update).
            let changes = leaf_changes(r.state, &p.state_after);
            let keep = if changes.len() > 1 {
                1 + rng.below(changes.len() - 1)
            } else {
                0
            };
            let mut order: Vec<usize> = (0..changes.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
            for &i in order.iter().skip(keep) {
                let (pointer, old, _) = &changes[i];
                put(&mut p.state_after, pointer, old.clone());
            }
        }
        SimFault::WrongValue => {
            let changes = leaf_changes(r.state, &p.state_after);
            if let Some((pointer, _, now)) = rng.pick(&changes).cloned() {
                let wrong = another(&now, rng);
                put(&mut p.state_after, &pointer, Some(wrong));
            }
        }
        SimFault::SpuriousWrite => {
            let fields: Vec<(JsonPointer, Value)> = resources(&p.state_after)
                .into_iter()
                .filter(|(k, _)| !k.0.contains('*'))
                .flat_map(|((kind, id), v)| {
                    v.as_object()
                        .into_iter()
                        .flatten()
                        .filter(|(_, f)| !f.is_object() && !f.is_array())
                        .map(move |(f, value)| {
                            (
                                JsonPointer::from_tokens([kind.clone(), id.clone(), f.clone()]),
                                value.clone(),
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            if let Some((pointer, value)) = rng.pick(&fields).cloned() {
                let wrong = another(&value, rng);
                put(&mut p.state_after, &pointer, Some(wrong));
            }
        }
        SimFault::InventedId => {
            let old = resources(r.state);
            let created: Vec<(String, String)> = resources(&p.state_after)
                .into_keys()
                .filter(|k| !old.contains_key(k) && !k.0.contains('*'))
                .collect();
            if let Some((kind, id)) = rng.pick(&created).cloned() {
                if let Some(map) = p.state_after.get_mut(&kind).and_then(Value::as_object_mut) {
                    if let Some(value) = map.remove(&id) {
                        map.insert(format!("{id}-{}", rng.below(900) + 100), value);
                    }
                }
            }
        }
        SimFault::StaleObservation => {
            stale_observation(&mut p.observation, r.state, &p.state_after);
        }
    }
}

/// Writes into an answer the old values of the fields the step changed, wherever the answer
/// shows a changed field with its new value; false when it shows none.
fn stale_observation(observation: &mut Value, before: &Value, after: &Value) -> bool {
    let olds: Vec<(String, Value, Value)> = leaf_changes(before, after)
        .into_iter()
        .filter_map(|(pointer, old, now)| Some((pointer.tokens().last()?.clone(), old?, now)))
        .collect();
    let mut changed = false;
    let mut stack = vec![observation];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                for (key, value) in map.iter_mut() {
                    if let Some((_, old, _)) =
                        olds.iter().find(|(f, _, now)| f == key && now == value)
                    {
                        *value = old.clone();
                        changed = true;
                    } else {
                        stack.push(value);
                    }
                }
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            _ => {}
        }
    }
    changed
}

/// `ticket_id` → `ticketId`; a key without `_` gets its first letter in capitals.
fn camel(key: &str) -> String {
    if key.contains('_') {
        let mut out = String::new();
        for (i, part) in key.split('_').enumerate() {
            let mut chars = part.chars();
            match (i, chars.next()) {
                (0, Some(c)) => {
                    out.push(c);
                    out.extend(chars);
                }
                (_, Some(c)) => {
                    out.extend(c.to_uppercase());
                    out.extend(chars);
                }
                _ => {}
            }
        }
        out
    } else {
        let mut chars = key.chars();
        chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envsimbench_profile_reproduces_the_published_table() {
        let p = FaultProfile::EnvSimBench;
        // The benchmark's composition: 100 unchanged; |Δ| 1 and 2, 25 each; 3 to 6, 50 each;
        // 50 from 7.
        let changed: Vec<(usize, f64)> = vec![
            (1, 25.0),
            (2, 25.0),
            (3, 50.0),
            (4, 50.0),
            (5, 50.0),
            (6, 50.0),
            (9, 50.0),
        ];
        let right_changed: f64 = changed
            .iter()
            .map(|(d, n)| n * (1.0 - p.error_rate(*d)))
            .sum();
        let share_changed = right_changed / 300.0;
        let overall = (100.0 * (1.0 - p.error_rate(0)) + right_changed) / 400.0;
        assert!((share_changed - 0.188).abs() < 0.001, "{share_changed}");
        assert!((overall - 0.390).abs() < 0.001, "{overall}");
        // Inside the published ranges: 10.0-23.0% on state changes, 32.5-42.3% overall, and
        // near 0 from |Δ| 5.
        assert!((0.10..=0.23).contains(&share_changed));
        assert!((0.325..=0.423).contains(&overall));
        assert!(1.0 - p.error_rate(5) < 0.021);
        assert_eq!(FaultProfile::Uniform(0.3).error_rate(7), 0.3);
    }

    #[test]
    fn spoiling_helpers_change_what_they_say() {
        let before = serde_json::json!({"notes": {"N1": {"body": "milk", "n": 1}}});
        let after =
            serde_json::json!({"notes": {"N1": {"body": "milk, eggs", "n": 2, "tag": "x"}}});
        let changes = leaf_changes(&before, &after);
        assert_eq!(changes.len(), 3);
        // Undo one change, remove an added field.
        let mut state = after.clone();
        let body = changes
            .iter()
            .find(|c| c.0.tokens().last().map(String::as_str) == Some("body"))
            .unwrap();
        assert!(put(&mut state, &body.0, body.1.clone()));
        assert_eq!(state["notes"]["N1"]["body"], "milk");
        let tag = changes.iter().find(|c| c.1.is_none()).unwrap();
        assert!(put(&mut state, &tag.0, None));
        assert!(state["notes"]["N1"].get("tag").is_none());
        assert!(!put(
            &mut state,
            &JsonPointer::from_tokens(["nope", "x"]),
            None
        ));
        // Another value is never the same one.
        let mut rng = Rng::new(3);
        for v in [
            serde_json::json!(true),
            serde_json::json!(4),
            serde_json::json!(2.5),
            serde_json::json!("a"),
            serde_json::json!(""),
        ] {
            assert_ne!(another(&v, &mut rng), v);
        }
        // A stale observation reports the old values of what changed, wherever it shows them.
        let mut answer = serde_json::json!({"success": true, "data": {"body": "milk, eggs", "n": 2, "other": "milk, eggs"}});
        assert!(stale_observation(&mut answer, &before, &after));
        assert_eq!(
            answer["data"],
            serde_json::json!({"body": "milk", "n": 1, "other": "milk, eggs"})
        );
        let mut unrelated = serde_json::json!({"success": true});
        assert!(!stale_observation(&mut unrelated, &before, &after));
    }

    #[test]
    fn weights_are_honoured() {
        let mut rng = Rng::new(11);
        let mut counts = [0usize; 2];
        for _ in 0..4000 {
            match pick_weighted(
                &[(SimFault::MissedFields, 3), (SimFault::WrongValue, 1)],
                &mut rng,
            ) {
                Some(SimFault::MissedFields) => counts[0] += 1,
                Some(SimFault::WrongValue) => counts[1] += 1,
                _ => unreachable!(),
            }
        }
        assert!((2850..3150).contains(&counts[0]), "{counts:?}");
        assert_eq!(pick_weighted(&[], &mut rng), None);
    }

    #[test]
    fn renames_fields() {
        assert_eq!(camel("ticket_id"), "ticketId");
        assert_eq!(camel("status"), "Status");
        assert_eq!(camel("a__b"), "aB");
    }
}

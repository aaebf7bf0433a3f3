//! A test double: a simulator with known error rates by kind. It runs the executor (so it needs
//! the code) and, at a seeded rate, spoils the true answer in one of the ways LLM simulators
//! are known to fail. Every attempt draws anew (seeded by the session seed, step and attempt),
//! as a model sampled again would, so a regeneration can repair a spoiled step. It stands in
//! for a model in measurements of anchoring, where the truth and the error rates must be known;
//! it is never a simulator of its own.

use crate::backend::{
    BoxFuture, ExecutorSimulator, PredictError, Prediction, Simulator, StepRequest,
};
use envsim_core::audit::resources;
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

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            SimFault::DroppedUpdate => "dropped_update",
            SimFault::VanishedResource => "vanished_resource",
            SimFault::PhantomResource => "phantom_resource",
            SimFault::SchemaDrift => "schema_drift",
            SimFault::HappyPathFlip => "happy_path_flip",
        }
    }
}

/// The faulty simulator test double.
pub struct FaultySimulator {
    truth: ExecutorSimulator,
    rate: f64,
    seed: u64,
    label: String,
}

impl FaultySimulator {
    /// Spoils a `rate` share of the steps it can spoil, with faults drawn from `seed`; `label`
    /// tells two doubles apart in provenance.
    pub fn new(truth: ExecutorSimulator, rate: f64, seed: u64, label: &str) -> Self {
        FaultySimulator {
            truth,
            rate,
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
            if rng.chance(self.rate) {
                let success = r.env.outcome(&p.observation);
                let applicable: Vec<SimFault> = SimFault::ALL
                    .into_iter()
                    .filter(|f| applies(*f, r.state, &p, success))
                    .collect();
                if let Some(fault) = rng.pick(&applicable).copied() {
                    spoil(fault, r, &mut p, &mut rng);
                }
            }
            Ok(p)
        })
    }
}

fn applies(fault: SimFault, before: &Value, p: &Prediction, success: Option<bool>) -> bool {
    match fault {
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
    }
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
    use super::camel;

    #[test]
    fn renames_fields() {
        assert_eq!(camel("ticket_id"), "ticketId");
        assert_eq!(camel("status"), "Status");
        assert_eq!(camel("a__b"), "aB");
    }
}

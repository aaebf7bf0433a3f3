//! Anchoring measured where the truth is known (`envsim sim measure`): call sequences (walks
//! of a package, executed) are simulated by sessions in one configuration of anchoring, and
//! every step is compared with the executor run on the same state (same seed and clock). A
//! step is right when its observation and state equal the executor's; a trajectory is
//! consistent when every step is right. The CLI chooses environments, learns them, walks
//! them and builds the simulators; [`measure_config`] runs one configuration over the walks
//! and adds to its [`AnchoringTotals`].

use crate::backend::{ExecutorSimulator, PredictError, Simulator, StepRequest};
use crate::environment::Environment;
use crate::session::{AnchorMode, Backends, Session, SessionConfig};
use crate::verify::VerifyPolicy;
use envsim_core::audit::{resources, AuditTrajectory};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One configuration of anchoring to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasureConfig {
    /// Its name in reports (`off`, `validate`, `full`, `verify`, `verify-always`).
    pub name: String,
    /// How much each session checks and repairs.
    pub mode: AnchorMode,
    /// Cross-model verification, when on.
    pub verify: Option<VerifyPolicy>,
}

impl MeasureConfig {
    /// The configuration a name stands for: `off`, `validate`, `full`, `verify` (full
    /// anchoring with `adaptive` verification) or `verify-always` (every step verified).
    pub fn named(name: &str, adaptive: VerifyPolicy) -> Option<MeasureConfig> {
        let always = VerifyPolicy {
            floor: 1.0,
            ceiling: 1.0,
            warmup: 0,
        };
        let (mode, verify) = match name {
            "off" => (AnchorMode::Off, None),
            "validate" => (AnchorMode::Validate, None),
            "full" => (AnchorMode::Full, None),
            "verify" => (AnchorMode::Full, Some(adaptive)),
            "verify-always" => (AnchorMode::Full, Some(always)),
            _ => return None,
        };
        Some(MeasureConfig {
            name: name.to_owned(),
            mode,
            verify,
        })
    }
}

/// The totals of one configuration over everything measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AnchoringTotals {
    /// The configuration's name.
    pub config: String,
    /// Trajectories simulated.
    pub trajectories: usize,
    /// Trajectories whose every step was right.
    pub consistent_trajectories: usize,
    /// Trajectories whose final state equals the executor's replay of the same calls.
    pub final_state_right: usize,
    /// Steps simulated.
    pub steps: usize,
    /// Steps whose observation and state equal the executor's.
    pub right_steps: usize,
    /// Steps anchoring marked uncertain.
    pub uncertain_steps: usize,
    /// Of those, the wrong ones.
    pub uncertain_and_wrong: usize,
    /// Wrong steps anchoring kept without a mark.
    pub wrong_and_not_uncertain: usize,
    /// What was wrong in those ([`miss_kind`]), by kind.
    pub misses: BTreeMap<String, usize>,
    /// Regenerations asked for.
    pub regenerations: usize,
    /// Steps escalated to the executor.
    pub escalations: usize,
    /// Steps verified by the second simulator.
    pub verifications: usize,
    /// Of those, the ones it disagreed with.
    pub disagreements: usize,
    /// Simulator calls in all.
    pub simulator_calls: usize,
    /// Tokens in all.
    pub tokens: u64,
    /// Simulator time in all, milliseconds.
    pub wall_ms: f64,
}

/// Why a measurement stopped.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// A session could not take a step (a simulator that cannot be reached).
    #[error("{tool}: {message}")]
    Session {
        /// The tool of the step.
        tool: String,
        /// What went wrong.
        message: String,
    },
    /// The executor could not give the truth.
    #[error("the executor: {0}")]
    Truth(#[from] PredictError),
}

/// What one measurement runs on.
pub struct Measured<'a> {
    /// The environment the sessions simulate (without its code in environment-free mode).
    pub env: Arc<Environment>,
    /// The environment with its code: what the truth runs.
    pub truth_env: &'a Environment,
    /// The executor giving the truth.
    pub executor: &'a ExecutorSimulator,
    /// The executor the sessions may escalate to (none without code).
    pub escalation: Option<ExecutorSimulator>,
    /// The call sequences, with their initial states.
    pub runs: &'a [AuditTrajectory],
    /// Regenerations a step may take.
    pub max_regenerations: usize,
    /// Seed of the sessions (run `w` gets `seed + w`) and of the truth's calls.
    pub seed: u64,
}

/// Simulates every run of `on` in configuration `config` with the `primary` simulator (and
/// the `secondary` one, for verification), comparing each step with the executor, and adds
/// what it finds to `totals`.
pub async fn measure_config(
    on: &Measured<'_>,
    config: &MeasureConfig,
    primary: Arc<dyn Simulator>,
    secondary: Option<Arc<dyn Simulator>>,
    totals: &mut AnchoringTotals,
) -> Result<(), MeasureError> {
    let t = totals;
    // Sessions of one configuration share their running agreement per tool.
    let shared = config.verify.map(Session::shared_verifier);
    for (w, run) in on.runs.iter().enumerate() {
        let seed = on.seed.wrapping_add(w as u64);
        let mut session = Session::new(
            Arc::clone(&on.env),
            Backends {
                primary: Arc::clone(&primary),
                secondary: secondary.clone(),
                executor: on
                    .escalation
                    .clone()
                    .map(|e| Arc::new(e) as Arc<dyn Simulator>),
            },
            SessionConfig {
                mode: config.mode,
                max_regenerations: on.max_regenerations,
                verify: config.verify,
                seed,
            },
            (*run.initial_state).clone(),
        );
        if let Some(shared) = &shared {
            session.share_verifier(Arc::clone(shared));
        }
        let mut all_right = true;
        let mut replay = (*run.initial_state).clone();
        for (k, step) in run.steps.iter().enumerate() {
            let before = Arc::clone(session.state());
            let record = session
                .step(&step.tool, &step.arguments)
                .await
                .map_err(|e| MeasureError::Session {
                    tool: step.tool.clone(),
                    message: e.to_string(),
                })?;
            let request = |state| StepRequest {
                env: on.truth_env,
                state,
                tool: &step.tool,
                arguments: &step.arguments,
                seed,
                step: k,
                attempt: 0,
                feedback: &[],
            };
            let truth = on.executor.predict(&request(&before)).await?;
            let right =
                truth.observation == record.observation && truth.state_after == *record.state_after;
            replay = on.executor.predict(&request(&replay)).await?.state_after;
            all_right &= right;
            let p = &record.provenance;
            t.steps += 1;
            t.right_steps += usize::from(right);
            t.uncertain_steps += usize::from(p.uncertain);
            t.uncertain_and_wrong += usize::from(p.uncertain && !right);
            t.wrong_and_not_uncertain += usize::from(!p.uncertain && !right);
            if !p.uncertain && !right {
                let kind = miss_kind(
                    &before,
                    &truth.observation,
                    &truth.state_after,
                    &record.observation,
                    &record.state_after,
                );
                *t.misses.entry(kind.to_owned()).or_default() += 1;
            }
            t.regenerations += p.regenerations;
            t.escalations += usize::from(p.escalated_to.is_some());
            t.verifications += usize::from(p.verified_by.is_some());
            t.disagreements += usize::from(p.agreed == Some(false));
            t.simulator_calls += p.simulator_calls;
            t.tokens += p.tokens;
            t.wall_ms += p.wall_ms;
        }
        t.trajectories += 1;
        t.consistent_trajectories += usize::from(all_right);
        t.final_state_right += usize::from(**session.state() == replay);
    }
    Ok(())
}

/// What is wrong in a kept answer, against the truth: nothing; only the observation; a change
/// left out (the state stayed while the truth changed it); resources that should not be
/// there, or that are missing; or other state values.
pub fn miss_kind(
    before: &Value,
    truth_obs: &Value,
    truth_state: &Value,
    obs: &Value,
    state: &Value,
) -> &'static str {
    if state == truth_state {
        return if obs == truth_obs {
            "none"
        } else {
            "observation"
        };
    }
    if state == before && truth_state != before {
        return "dropped_update";
    }
    let (kept, truth) = (resources(state), resources(truth_state));
    if kept.keys().any(|k| !truth.contains_key(k)) {
        "phantom_resource"
    } else if truth.keys().any(|k| !kept.contains_key(k)) {
        "vanished_resource"
    } else {
        "wrong_values"
    }
}

/// A measurement's results: what was simulated how, and the totals per configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasureSummary {
    /// The environments measured.
    pub environments: Vec<String>,
    /// The primary simulator's kind.
    pub primary: String,
    /// The secondary simulator's kind, when there is one.
    pub secondary: Option<String>,
    /// The faulty double's error rate (when it is a simulator).
    pub fault_rate: f64,
    /// The faulty double's error profile, described.
    pub fault_profile: String,
    /// Code mode, or environment-free.
    pub mode: String,
    /// The totals, in the order the configurations were asked for.
    pub configs: Vec<AnchoringTotals>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn misses_are_named_by_what_differs() {
        let before = json!({"tickets": {"T1": {"status": "open"}}});
        let closed = json!({"tickets": {"T1": {"status": "closed"}}});
        let obs = json!({"ok": true});
        assert_eq!(miss_kind(&before, &obs, &closed, &obs, &closed), "none");
        assert_eq!(
            miss_kind(&before, &obs, &closed, &json!({"ok": false}), &closed),
            "observation"
        );
        assert_eq!(
            miss_kind(&before, &obs, &closed, &obs, &before),
            "dropped_update"
        );
        let extra = json!({"tickets": {"T1": {"status": "closed"}, "T9": {"status": "open"}}});
        assert_eq!(
            miss_kind(&before, &obs, &closed, &obs, &extra),
            "phantom_resource"
        );
        assert_eq!(
            miss_kind(&before, &obs, &extra, &obs, &closed),
            "vanished_resource"
        );
        let other = json!({"tickets": {"T1": {"status": "pending"}}});
        assert_eq!(
            miss_kind(&before, &obs, &closed, &obs, &other),
            "wrong_values"
        );
    }

    #[test]
    fn configurations_are_named() {
        let adaptive = VerifyPolicy {
            floor: 0.1,
            ceiling: 0.5,
            warmup: 3,
        };
        let full = MeasureConfig::named("full", adaptive).unwrap();
        assert_eq!((full.mode, full.verify), (AnchorMode::Full, None));
        let verify = MeasureConfig::named("verify", adaptive).unwrap();
        assert_eq!(verify.verify, Some(adaptive));
        let always = MeasureConfig::named("verify-always", adaptive).unwrap();
        assert_eq!(always.verify.map(|v| v.floor), Some(1.0));
        assert_eq!(MeasureConfig::named("sometimes", adaptive), None);
    }
}

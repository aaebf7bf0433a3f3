//! A simulated environment with explicit state: [`Session::step`] predicts a call's
//! observation and next state, validates it, anchors and escalates what fails, verifies a share
//! of steps with a second model, and records each step with its provenance.
//!
//! **A step**, in [`AnchorMode::Full`]:
//! 1. *Predict* with the primary simulator.
//! 2. *Validate* ([`crate::check::validate`]): the answer reads as a step (an output object
//!    whose changes apply to the state), conforms to the specification, and keeps the state
//!    constraint graph of the history.
//! 3. *Anchor*: on problems, ask again with the problems stated and the facts of the state they
//!    concern, at most `max_regenerations` times.
//! 4. *Escalate* what still fails: to the executor when the code is there (a real call), else
//!    to the secondary simulator (its answer validated in turn), else keep the last answer and
//!    mark the step *uncertain* (curation leaves it out).
//! 5. *Verify* an accepted answer of the primary with the secondary simulator at the adaptive
//!    probability of its tool ([`crate::verify`]); a disagreement escalates as in 4 (to the
//!    executor, else the step is uncertain).
//! 6. *Apply*: the state becomes the answer's; the step is recorded with its provenance.
//!
//! [`AnchorMode::Validate`] validates and marks failures uncertain, changing nothing;
//! [`AnchorMode::Off`] takes the primary's answer as it is. A primary that is the ground truth
//! (the executor) is never second-guessed.
//!
//! **Snapshots, forks, rollbacks** are cheap: steps are shared (`Arc`) and every state is an
//! `Arc` shared with the steps that did not change it, so a fork copies one pointer per step
//! and a rollback drops the steps after the mark.

use crate::backend::{PredictError, Prediction, Simulator, StepRequest};
use crate::check::{state_facts, validate, Problem};
use crate::environment::Environment;
use crate::verify::{AdaptiveVerifier, VerifyPolicy};
use envsim_core::audit::AuditStep;
use envsim_core::rng::Rng;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// How much a session checks and repairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnchorMode {
    /// The primary's answers as they are.
    Off,
    /// Validated; a step that fails is kept but marked uncertain.
    Validate,
    /// Validated, regenerated, escalated (the module doc).
    Full,
}

impl AnchorMode {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            AnchorMode::Off => "off",
            AnchorMode::Validate => "validate",
            AnchorMode::Full => "full",
        }
    }
}

/// A session's settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionConfig {
    /// How much it checks and repairs.
    pub mode: AnchorMode,
    /// Regenerations after a rejected answer (full anchoring).
    pub max_regenerations: usize,
    /// Cross-model verification of accepted answers (needs a secondary simulator); `None`: off.
    pub verify: Option<VerifyPolicy>,
    /// Seed of the executor's calls and of the verification draws.
    pub seed: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            mode: AnchorMode::Full,
            max_regenerations: 2,
            verify: None,
            seed: 0,
        }
    }
}

/// The simulators of a session.
#[derive(Clone)]
pub struct Backends {
    /// Answers every step first.
    pub primary: Arc<dyn Simulator>,
    /// Verifies, and takes escalations when there is no executor.
    pub secondary: Option<Arc<dyn Simulator>>,
    /// The ground truth, in code mode: takes escalations.
    pub executor: Option<Arc<dyn Simulator>>,
}

/// Where a step's answer came from and what was done to get it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Provenance {
    /// The simulator whose answer was kept.
    pub simulator: String,
    /// Answers asked of the primary.
    pub attempts: usize,
    /// Of those, regenerations after a rejection.
    pub regenerations: usize,
    /// Why answers were rejected (every attempt's problems, in order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<Problem>,
    /// Where the step went when the primary's answers failed or were disputed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalated_to: Option<String>,
    /// The probability this step had of being verified, when verification is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_probability: Option<f64>,
    /// The simulator that verified it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_by: Option<String>,
    /// Whether the verifier's answer agreed (observation and state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreed: Option<bool>,
    /// Not trusted: problems nothing could repair (curated data leaves it out).
    pub uncertain: bool,
    /// Simulator calls made for this step (every backend).
    pub simulator_calls: usize,
    /// Tokens spent by models on this step (prompt and completion).
    pub tokens: u64,
    /// Of those, completion tokens.
    #[serde(default)]
    pub completion_tokens: u64,
    /// Wall time of the step, milliseconds.
    pub wall_ms: f64,
    /// Of that, time spent waiting for simulators, milliseconds.
    pub simulator_ms: f64,
}

/// A recorded step.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct StepRecord {
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// The observation.
    pub observation: Value,
    /// Success or failure, as the environment's rule (or the answer) says.
    pub success: Option<bool>,
    /// The state after the step (shared with the state before when unchanged).
    #[serde(skip)]
    pub state_after: Arc<Value>,
    /// How it was obtained.
    pub provenance: Provenance,
    /// The idempotency key of the request that took it (a server's client names its
    /// requests so that a retry finds the step instead of taking another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_key: Option<String>,
}

impl StepRecord {
    /// Whether it is the step `tool` with `arguments` asks for.
    pub fn is_call(&self, tool: &str, arguments: &Map<String, Value>) -> bool {
        self.tool == tool && self.arguments == *arguments
    }
}

/// Why a step could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A backend could not answer at all (connection, sandbox).
    #[error("{0}")]
    Backend(String),
    /// No snapshot of that name.
    #[error("no snapshot named {0:?}")]
    NoSnapshot(String),
    /// A rollback past the session's length.
    #[error("cannot roll back to step {0}: the session has {1} steps")]
    NoSuchStep(usize, usize),
}

/// One question to a simulator, counted in the step's provenance (a call, its time, its
/// tokens).
struct Ask<'a> {
    env: &'a Environment,
    state: &'a Value,
    tool: &'a str,
    arguments: &'a Map<String, Value>,
    seed: u64,
    step: usize,
}

impl Ask<'_> {
    async fn to(
        &self,
        simulator: &dyn Simulator,
        attempt: usize,
        feedback: &[String],
        prov: &mut Provenance,
    ) -> Result<Prediction, PredictError> {
        let request = StepRequest {
            env: self.env,
            state: self.state,
            tool: self.tool,
            arguments: self.arguments,
            seed: self.seed,
            step: self.step,
            attempt,
            feedback,
        };
        prov.simulator_calls += 1;
        let asked = Instant::now();
        let answer = simulator.predict(&request).await;
        prov.simulator_ms += asked.elapsed().as_secs_f64() * 1000.0;
        match &answer {
            Ok(Prediction { usage, .. }) | Err(PredictError::Unreadable { usage, .. }) => {
                prov.tokens += usage.prompt_tokens + usage.completion_tokens;
                prov.completion_tokens += usage.completion_tokens;
            }
            Err(PredictError::Failed(_)) => {}
        }
        answer
    }
}

/// A simulated environment session.
#[derive(Clone)]
pub struct Session {
    env: Arc<Environment>,
    backends: Backends,
    config: SessionConfig,
    initial: Arc<Value>,
    steps: Vec<Arc<StepRecord>>,
    snapshots: BTreeMap<String, usize>,
    /// The running agreement per tool: the session's own, or shared with other sessions of
    /// the same simulators and environment ([`Session::share_verifier`]).
    verifier: Arc<std::sync::Mutex<AdaptiveVerifier>>,
}

impl Session {
    /// A session at `initial` state.
    pub fn new(
        env: Arc<Environment>,
        backends: Backends,
        config: SessionConfig,
        initial: Value,
    ) -> Self {
        let policy = config.verify.unwrap_or_default();
        Session {
            env,
            backends,
            config,
            initial: Arc::new(initial),
            steps: Vec::new(),
            snapshots: BTreeMap::new(),
            verifier: Arc::new(std::sync::Mutex::new(AdaptiveVerifier::new(policy))),
        }
    }

    /// A session rebuilt from what was stored of it: its steps (in order) and marks. The
    /// running agreement per tool is read back from the steps' provenance.
    pub fn restore(
        env: Arc<Environment>,
        backends: Backends,
        config: SessionConfig,
        initial: Value,
        steps: Vec<StepRecord>,
        snapshots: BTreeMap<String, usize>,
    ) -> Self {
        let mut session = Session::new(env, backends, config, initial);
        for step in steps {
            if let Some(agreed) = step.provenance.agreed {
                session.verifier_mut().record(&step.tool, agreed);
            }
            session.steps.push(Arc::new(step));
        }
        let len = session.steps.len();
        session.snapshots = snapshots.into_iter().filter(|(_, at)| *at <= len).collect();
        session
    }

    /// The environment.
    pub fn env(&self) -> &Environment {
        &self.env
    }

    /// The environment, shared.
    pub fn env_arc(&self) -> &Arc<Environment> {
        &self.env
    }

    /// The settings.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// The current state.
    pub fn state(&self) -> &Arc<Value> {
        self.steps.last().map_or(&self.initial, |s| &s.state_after)
    }

    /// The initial state.
    pub fn initial_state(&self) -> &Arc<Value> {
        &self.initial
    }

    /// The steps so far.
    pub fn steps(&self) -> &[Arc<StepRecord>] {
        &self.steps
    }

    /// The running agreement per tool.
    pub fn verifier(&self) -> AdaptiveVerifier {
        self.verifier_mut().clone()
    }

    /// Makes this session keep its running agreement in `shared`, with the other sessions that
    /// hold it: agreement is a property of the simulators on an environment's tools, so
    /// sessions of the same ones learn it together.
    pub fn share_verifier(&mut self, shared: Arc<std::sync::Mutex<AdaptiveVerifier>>) {
        self.verifier = shared;
    }

    /// The verifier of a new session, to share ([`Session::share_verifier`]).
    pub fn shared_verifier(policy: VerifyPolicy) -> Arc<std::sync::Mutex<AdaptiveVerifier>> {
        Arc::new(std::sync::Mutex::new(AdaptiveVerifier::new(policy)))
    }

    fn verifier_mut(&self) -> std::sync::MutexGuard<'_, AdaptiveVerifier> {
        // The verifier is a pair of counters per tool: a panic cannot leave it torn.
        self.verifier.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks the present as `name` (replacing an older mark of that name).
    pub fn snapshot(&mut self, name: &str) -> usize {
        self.snapshots.insert(name.to_owned(), self.steps.len());
        self.steps.len()
    }

    /// The marks, by name: the step count at each.
    pub fn snapshots(&self) -> &BTreeMap<String, usize> {
        &self.snapshots
    }

    /// Goes back to the mark `name`: the steps after it are dropped, and so are the marks
    /// past it.
    pub fn rollback(&mut self, name: &str) -> Result<usize, SessionError> {
        let at = *self
            .snapshots
            .get(name)
            .ok_or_else(|| SessionError::NoSnapshot(name.to_owned()))?;
        self.rollback_to(at)
    }

    /// Goes back to the state after `steps` steps.
    pub fn rollback_to(&mut self, steps: usize) -> Result<usize, SessionError> {
        if steps > self.steps.len() {
            return Err(SessionError::NoSuchStep(steps, self.steps.len()));
        }
        self.steps.truncate(steps);
        self.snapshots.retain(|_, at| *at <= steps);
        Ok(steps)
    }

    /// An independent copy sharing the history (one pointer per step) and the running
    /// agreement.
    pub fn fork(&self) -> Session {
        self.clone()
    }

    /// The session as the audit reads it (what scoring a finished session needs).
    pub fn audit_trajectory(&self, id: &str) -> envsim_core::audit::AuditTrajectory {
        envsim_core::audit::AuditTrajectory {
            id: id.to_owned(),
            initial_state: Arc::clone(&self.initial),
            steps: self.history(),
        }
    }

    fn history(&self) -> Vec<AuditStep> {
        self.steps
            .iter()
            .map(|s| AuditStep {
                tool: s.tool.clone(),
                arguments: s.arguments.clone(),
                observation: s.observation.clone(),
                success: s.success,
                state_after: Arc::clone(&s.state_after),
            })
            .collect()
    }

    /// An answer as an audit step (the state shared with the state before when unchanged).
    fn as_step(&self, tool: &str, arguments: &Map<String, Value>, p: &Prediction) -> AuditStep {
        let before = self.state();
        let state_after = if p.state_after == **before {
            Arc::clone(before)
        } else {
            Arc::new(p.state_after.clone())
        };
        AuditStep {
            tool: tool.to_owned(),
            arguments: arguments.clone(),
            success: self.env.outcome(&p.observation),
            observation: p.observation.clone(),
            state_after,
        }
    }

    /// Takes one step (the module doc says how).
    pub async fn step(
        &mut self,
        tool: &str,
        arguments: &Map<String, Value>,
    ) -> Result<Arc<StepRecord>, SessionError> {
        self.step_keyed(tool, arguments, None).await
    }

    /// [`Session::step`] for a request that carries an idempotency key, kept with the record.
    pub async fn step_keyed(
        &mut self,
        tool: &str,
        arguments: &Map<String, Value>,
        request_key: Option<String>,
    ) -> Result<Arc<StepRecord>, SessionError> {
        let started = Instant::now();
        let index = self.steps.len();
        let state = Arc::clone(self.state());
        let primary = Arc::clone(&self.backends.primary);
        let trusted = primary.is_ground_truth();
        let checks = self.config.mode != AnchorMode::Off && !trusted;
        // The history as the audit reads it, only where answers are checked (its copy of each
        // step's call and answer is the one cost of a step that grows with the session).
        let mut history = if checks { self.history() } else { Vec::new() };
        let tries = if self.config.mode == AnchorMode::Full && !trusted {
            1 + self.config.max_regenerations
        } else {
            1
        };
        let mut prov = Provenance {
            simulator: primary.name(),
            ..Provenance::default()
        };
        let env = Arc::clone(&self.env);
        let ask = Ask {
            env: &env,
            state: &state,
            tool,
            arguments,
            seed: self.config.seed,
            step: index,
        };
        let mut feedback: Vec<String> = Vec::new();
        // The answer taken, and else the last readable answer rejected (kept, uncertain, when
        // nothing better comes).
        let mut accepted: Option<AuditStep> = None;
        let mut rejected: Option<AuditStep> = None;
        // What the last unreadable answer said (its feedback when it had one, else its text).
        let mut unread: Option<Value> = None;
        for attempt in 0..tries {
            prov.attempts += 1;
            prov.regenerations = attempt;
            let answer = ask
                .to(primary.as_ref(), attempt, &feedback, &mut prov)
                .await;
            let (step, problems) = match answer {
                Ok(p) => {
                    let step = self.as_step(tool, arguments, &p);
                    let problems = if checks {
                        validate(&self.env, &self.initial, &mut history, &step)
                    } else {
                        Vec::new()
                    };
                    (Some(step), problems)
                }
                Err(PredictError::Unreadable {
                    why, raw, feedback, ..
                }) => {
                    unread = Some(feedback.map_or(Value::String(raw), |f| *f));
                    let problem = Problem {
                        kind: "unreadable".into(),
                        explanation: why,
                        resource: None,
                    };
                    (None, vec![problem])
                }
                Err(PredictError::Failed(e)) => return Err(SessionError::Backend(e)),
            };
            if problems.is_empty() {
                accepted = step;
                break;
            }
            prov.problems.extend(problems.iter().cloned());
            feedback = problems.iter().map(|p| p.explanation.clone()).collect();
            feedback.extend(state_facts(&state, &problems, 600));
            // An unreadable answer does not replace a readable one.
            if step.is_some() {
                rejected = step;
            }
        }
        // Verification of an accepted answer of the primary.
        if let (Some(answer), Some(_), Some(secondary), false) = (
            &accepted,
            self.config.verify,
            self.backends.secondary.clone(),
            trusted,
        ) {
            let p = self.verifier_mut().probability(tool);
            prov.verify_probability = Some(p);
            let mut rng = Rng::derive(self.config.seed, &format!("verify/{index}"));
            if rng.chance(p) {
                prov.verified_by = Some(secondary.name());
                let agreed = match ask.to(secondary.as_ref(), 0, &[], &mut prov).await {
                    Ok(other) => {
                        answer.observation == other.observation
                            && *answer.state_after == other.state_after
                    }
                    Err(PredictError::Unreadable { .. }) => false,
                    Err(PredictError::Failed(e)) => return Err(SessionError::Backend(e)),
                };
                prov.agreed = Some(agreed);
                self.verifier_mut().record(tool, agreed);
                if !agreed {
                    // Disputed: kept only if nothing settles it.
                    rejected = accepted.take();
                }
            }
        }
        if accepted.is_none() && self.config.mode == AnchorMode::Full && !trusted {
            // Escalation: the executor, else the secondary (unless it just disagreed).
            let disputed = prov.agreed == Some(false);
            let target = match (&self.backends.executor, &self.backends.secondary) {
                (Some(executor), _) => Some(Arc::clone(executor)),
                (None, Some(secondary)) if !disputed => Some(Arc::clone(secondary)),
                _ => None,
            };
            if let Some(target) = target {
                let answer = ask.to(target.as_ref(), 0, &feedback, &mut prov).await;
                match answer {
                    Ok(p) => {
                        let step = self.as_step(tool, arguments, &p);
                        let problems = if target.is_ground_truth() {
                            Vec::new()
                        } else {
                            validate(&self.env, &self.initial, &mut history, &step)
                        };
                        if problems.is_empty() {
                            prov.escalated_to = Some(target.name());
                            prov.simulator = target.name();
                            accepted = Some(step);
                        } else {
                            prov.problems.extend(problems);
                        }
                    }
                    Err(PredictError::Unreadable { why, .. }) => prov.problems.push(Problem {
                        kind: "unreadable".into(),
                        explanation: why,
                        resource: None,
                    }),
                    Err(PredictError::Failed(e)) => return Err(SessionError::Backend(e)),
                }
            }
        }
        let step = match accepted {
            Some(step) => step,
            None => {
                prov.uncertain = true;
                match rejected {
                    Some(step) => step,
                    // Nothing readable: the state stays; the observation is the answer's
                    // feedback when it has one (its change list was what failed), else the raw
                    // answer.
                    None => AuditStep {
                        tool: tool.to_owned(),
                        arguments: arguments.clone(),
                        observation: unread.unwrap_or_else(|| Value::String(String::new())),
                        success: None,
                        state_after: Arc::clone(&state),
                    },
                }
            }
        };
        prov.wall_ms = started.elapsed().as_secs_f64() * 1000.0;
        let record = Arc::new(StepRecord {
            tool: step.tool,
            arguments: step.arguments,
            observation: step.observation,
            success: step.success,
            state_after: step.state_after,
            provenance: prov,
            request_key,
        });
        self.steps.push(Arc::clone(&record));
        Ok(record)
    }

    /// The session as an envsim trajectory record (what `envsim audit` reads): the initial
    /// state, and every step's call, observation, state after and provenance.
    pub fn trajectory(&self, id: &str) -> Value {
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|s| {
                json!({
                    "action": {"name": s.tool, "arguments": s.arguments},
                    "observation": s.observation,
                    "success": s.success,
                    "state_after": s.state_after.as_ref(),
                    "provenance": s.provenance,
                })
            })
            .collect();
        json!({
            "env": self.env.name,
            "task_id": id,
            "initial_state": self.initial.as_ref(),
            "anchoring": self.config,
            "steps": steps,
        })
    }
}

//! The simulator as a quality gate for environment packages (the EnvScaler pipeline's check,
//! which the EnvSimBench seed reports): calls are sampled on the package's states by seeded
//! walks (valid calls and deliberately invalid ones), each call is executed (the truth) and
//! predicted by a simulator that is given the package's description, rules and state but not
//! its code, and the share of calls where the two agree — the same outcome and the same state
//! after — is the package's quality score. A package is accepted at or above a threshold
//! (0.85 by default, the seed's). Where they disagree, the code does something the description
//! does not say (a bug), or the description is too vague to say it: both are listed per tool.
//!
//! The prediction runs through an `envsim-sim` session in environment-free mode, so `sim`'s
//! anchoring (validation, regeneration) and verification by a second simulator apply to it.
//! Nothing is printed here; `progress(done, total)` hears of each call.

pub mod curve;

use envsim_core::diff::fine_diff;
use envsim_exec::package::EnvPackage;
use envsim_exec::{ExecError, Executor};
use envsim_explore::plan::{ExplorePlan, Strategy};
use envsim_explore::record::{StateText, TransitionRecord};
use envsim_sim::backend::{ExecutorSimulator, Simulator, StepRequest};
use envsim_sim::environment::Environment;
use envsim_sim::session::{AnchorMode, Backends, Session, SessionConfig};
use envsim_sim::verify::VerifyPolicy;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The seed's acceptance threshold: a package passes when at least this share of its sampled
/// calls agree.
pub const DEFAULT_THRESHOLD: f64 = 0.85;

/// How a package is gated.
#[derive(Clone, Debug)]
pub struct GateConfig {
    /// Accept at or above this agreement (0 to 1).
    pub threshold: f64,
    /// The sampling's budget: this many walks of `steps` calls per initial state.
    pub walks: usize,
    /// Calls per walk.
    pub steps: usize,
    /// How the calls are explored (guided, or the random walks earlier gates sampled).
    pub strategy: Strategy,
    /// Start from the package's scripted tests and its tasks' planned calls (guided).
    pub scripted: bool,
    /// Share of sampled calls drawn valid (the rest are deliberately invalid: a tool must also
    /// refuse bad input the way its description says).
    pub valid_share: f64,
    /// Seed of the walks and of the simulated steps.
    pub seed: u64,
    /// Concurrent walks.
    pub workers: usize,
    /// How the session checks and repairs the simulator's answers.
    pub mode: AnchorMode,
    /// Regenerations after a rejected answer.
    pub max_regenerations: usize,
    /// Verification by a second simulator, when one is given.
    pub verify: Option<VerifyPolicy>,
    /// Disagreements kept as examples per tool.
    pub examples_per_tool: usize,
    /// What must reach the threshold.
    pub rule: GateRule,
}

/// What a package must show to pass.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GateRule {
    /// The share of all sampled calls that agree reaches the threshold (EnvScaler's rule).
    Overall,
    /// That, and the share of every tool's calls, for tools sampled at least `min_calls`
    /// times: one broken tool among many sinks its package.
    EveryTool {
        /// Tools with fewer sampled calls are not judged on their own.
        min_calls: usize,
    },
    /// No more disagreements than the simulator's own error rate explains: a package fails
    /// when its disagreements overall, or those of a tool sampled at least `min_calls` times,
    /// would come from a simulator erring at `error_rate` with probability below `alpha`
    /// (a one-sided binomial test). The threshold is not used: the simulator's measured error
    /// (on known-good packages, `env gate-curve`) is.
    Calibrated {
        /// The simulator's error rate on good packages.
        error_rate: f64,
        /// Tools with fewer sampled calls are not judged on their own.
        min_calls: usize,
        /// The least probability of the disagreements under the simulator's own error.
        alpha: f64,
    },
}

/// The counts a verdict is made from: all sampled calls, and per tool.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Counts {
    /// Calls judged.
    pub calls: usize,
    /// Calls that agree.
    pub agreeing: usize,
    /// Per tool: its name, calls and agreeing calls.
    pub tools: Vec<(String, usize, usize)>,
}

impl Counts {
    /// The share that agree (0 without calls).
    pub fn score(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.agreeing as f64 / self.calls as f64
        }
    }
}

impl GateRule {
    /// Whether a package with these counts passes at `threshold`.
    pub fn passes(self, threshold: f64, counts: &Counts) -> bool {
        match self {
            GateRule::Overall => counts.score() >= threshold,
            GateRule::EveryTool { min_calls } => {
                counts.score() >= threshold
                    && (counts.tools.iter())
                        .filter(|(_, n, _)| *n >= min_calls.max(1))
                        .all(|(_, n, a)| *a as f64 / *n as f64 >= threshold)
            }
            GateRule::Calibrated {
                error_rate,
                min_calls,
                alpha,
            } => {
                let plausible = |n: usize, agreeing: usize| {
                    disagreement_tail(n, n - agreeing, error_rate) >= alpha
                };
                plausible(counts.calls, counts.agreeing)
                    && (counts.tools.iter())
                        .filter(|(_, n, _)| *n >= min_calls.max(1))
                        .all(|(_, n, a)| plausible(*n, *a))
            }
        }
    }

    /// The tool the rule finds worst among those it judges: the lowest share that agree (the
    /// least probable disagreements under the calibrated rule); ties go to the first.
    pub fn worst_tool(self, counts: &Counts) -> Option<ToolScore> {
        let (least, badness): (usize, Box<dyn Fn(usize, usize) -> f64>) = match self {
            GateRule::Overall => (1, Box::new(|n, a| 1.0 - a as f64 / n as f64)),
            GateRule::EveryTool { min_calls } => {
                (min_calls.max(1), Box::new(|n, a| 1.0 - a as f64 / n as f64))
            }
            GateRule::Calibrated {
                error_rate,
                min_calls,
                ..
            } => (
                min_calls.max(1),
                Box::new(move |n, a| 1.0 - disagreement_tail(n, n - a, error_rate)),
            ),
        };
        let mut worst: Option<(f64, ToolScore)> = None;
        for (tool, n, a) in counts.tools.iter().filter(|(_, n, _)| *n >= least) {
            let bad = badness(*n, *a);
            if worst.as_ref().is_none_or(|(b, _)| bad > *b) {
                let score = ToolScore {
                    tool: tool.clone(),
                    calls: *n,
                    score: *a as f64 / *n as f64,
                };
                worst = Some((bad, score));
            }
        }
        worst.map(|(_, t)| t)
    }

    /// Its name.
    pub fn describe(self) -> String {
        match self {
            GateRule::Overall => "overall".to_owned(),
            GateRule::EveryTool { min_calls } => {
                format!("overall and every tool with at least {min_calls} calls")
            }
            GateRule::Calibrated {
                error_rate,
                min_calls,
                alpha,
            } => format!(
                "calibrated to a simulator error of {error_rate}: disagreements overall and in every tool with at least {min_calls} calls no less probable than {alpha}"
            ),
        }
    }
}

/// The probability that a simulator erring on each call at `rate` errs on at least `d` of `n`
/// calls (the upper tail of the binomial distribution).
pub fn disagreement_tail(n: usize, d: usize, rate: f64) -> f64 {
    if d == 0 {
        return 1.0;
    }
    if d > n || rate <= 0.0 {
        return 0.0;
    }
    if rate >= 1.0 {
        return 1.0;
    }
    // P(X = i), from P(X = 0) = (1 - rate)^n upwards, summed from d on; in logs so that large n
    // do not underflow before the terms that matter.
    let (ln_p, ln_q) = (rate.ln(), (1.0 - rate).ln());
    let mut ln_pmf = n as f64 * ln_q;
    let mut tail = 0.0;
    for i in 0..=n {
        if i >= d {
            tail += ln_pmf.exp();
        }
        if i < n {
            ln_pmf += ((n - i) as f64).ln() - ((i + 1) as f64).ln() + ln_p - ln_q;
        }
    }
    tail.min(1.0)
}

/// A tool's agreement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolScore {
    /// The tool.
    pub tool: String,
    /// Its sampled calls.
    pub calls: usize,
    /// The share that agree.
    pub score: f64,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            threshold: DEFAULT_THRESHOLD,
            walks: 3,
            steps: 12,
            strategy: Strategy::Guided,
            scripted: true,
            valid_share: 0.75,
            seed: 7,
            workers: 2,
            mode: AnchorMode::Full,
            max_regenerations: 2,
            verify: None,
            examples_per_tool: 2,
            rule: GateRule::Overall,
        }
    }
}

/// Why a package could not be gated.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The threshold is not a share.
    #[error("the acceptance threshold must be between 0 and 1, got {0}")]
    Threshold(f64),
    /// The sandbox failed (not the package's code: that is what is judged).
    #[error("the executor: {0}")]
    Executor(#[from] ExecError),
    /// The package's description does not read (a generator fault).
    #[error("{package}: its description does not read back, at {pointer}: {message}")]
    Description {
        /// The package.
        package: String,
        /// Where in the description.
        pointer: String,
        /// What is wrong.
        message: String,
    },
    /// The walks made no call (no tools with usable schemas).
    #[error("{0}: the walks made no call to judge (no tools with usable schemas?)")]
    NothingSampled(String),
    /// A simulator could not answer at all (connection, sandbox).
    #[error("{package}: {tool}: the simulator: {message}")]
    Simulator {
        /// The package.
        package: String,
        /// The tool of the call.
        tool: String,
        /// What went wrong.
        message: String,
    },
}

/// One sampled call the simulator got wrong.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Disagreement {
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// The initial state the walk started from.
    pub initial_state: String,
    /// Whether the executed call succeeded (the package's outcome rule).
    pub executed_success: Option<bool>,
    /// Whether the predicted answer says success (the same rule).
    pub predicted_success: Option<bool>,
    /// The executed observation.
    pub executed_observation: Value,
    /// The predicted observation.
    pub predicted_observation: Value,
    /// State paths where the predicted state after differs from the executed one.
    pub state_differs_at: Vec<String>,
}

/// How a tool's sampled calls went.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ToolAgreement {
    /// The tool.
    pub tool: String,
    /// Calls sampled.
    pub calls: usize,
    /// Calls the simulator got right (outcome and state after).
    pub agreeing: usize,
    /// Executed calls that succeeded.
    pub executed_successes: usize,
    /// Calls whose outcome the simulator got wrong.
    pub outcome_disagreements: usize,
    /// Calls whose state after the simulator got wrong.
    pub state_disagreements: usize,
    /// Calls whose observation differs from the executed one (reported, not scored: wording
    /// differs between a model and the code without being wrong).
    pub observation_differences: usize,
    /// Calls the simulator could not answer at all (counted as disagreements).
    pub unanswered: usize,
    /// The first disagreements.
    pub examples: Vec<Disagreement>,
}

/// A package's verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GateReport {
    /// The package.
    pub package: String,
    /// The simulator that predicted (and the verifier, when one was given).
    pub simulator: String,
    /// Calls sampled and judged.
    pub calls: usize,
    /// Calls where prediction and execution agree (outcome and state after).
    pub agreeing: usize,
    /// `agreeing / calls`: the quality score.
    pub score: f64,
    /// The acceptance threshold.
    pub threshold: f64,
    /// The rule the verdict applies.
    pub rule: GateRule,
    /// Whether the package passes: `score >= threshold`, and with [`GateRule::EveryTool`] the
    /// worst tool's too.
    pub accepted: bool,
    /// The tool with the lowest agreement among those sampled at least as often as the
    /// every-tool rule asks (all tools under the overall rule); ties go to the first in
    /// manifest order.
    pub worst_tool: Option<ToolScore>,
    /// Per tool, in manifest order (tools the walks never called are left out here).
    pub tools: Vec<ToolAgreement>,
    /// Tools of the manifest the walks never called (the gate says nothing of them).
    pub unsampled: Vec<String>,
    /// Tools called but never succeeding when executed (their effects were never judged).
    pub never_succeeded: Vec<String>,
    /// Simulator calls made (with regenerations and verifications).
    pub simulator_calls: usize,
    /// Tokens the simulator spent.
    pub tokens: u64,
    /// Calls the simulator could not answer (counted as disagreements).
    pub unanswered: usize,
    /// Why the first unanswered call was not answered.
    pub unanswered_because: Option<String>,
}

impl GateReport {
    /// The counts its verdict was made from.
    pub fn counts(&self) -> Counts {
        Counts {
            calls: self.calls,
            agreeing: self.agreeing,
            tools: (self.tools.iter())
                .map(|t| (t.tool.clone(), t.calls, t.agreeing))
                .collect(),
        }
    }
}

/// The environment a package is simulated as without its code (its description generated
/// from the manifest, its rules as notes), and the same with its code (what the truth runs).
pub fn environments(package: &EnvPackage) -> Result<(Environment, Environment), GateError> {
    let effects = envsim_bench::learn::learned_from(package, Vec::new()).effects;
    let with_code =
        Environment::from_package(package, &[], effects).map_err(|e| GateError::Description {
            package: package.manifest.name.clone(),
            pointer: e.pointer,
            message: e.message,
        })?;
    let described = with_code.without_code();
    Ok((with_code, described))
}

/// The calls the gate judges: `package` explored as the configuration says (by default guided,
/// its scripted tests and tasks' planned calls first) with a budget of `walks` walks of `steps`
/// calls per initial state.
pub async fn sample_calls(
    executor: Arc<Executor>,
    package: &EnvPackage,
    config: &GateConfig,
) -> Result<Vec<TransitionRecord>, GateError> {
    let plan = ExplorePlan {
        strategy: config.strategy,
        walks: config.walks,
        steps: config.steps,
        valid_share: config.valid_share,
        seed: config.seed,
        seeds: config.scripted,
        ..ExplorePlan::default()
    };
    let explored = envsim_explore::explore(
        executor,
        Arc::new(vec![package.clone()]),
        plan,
        config.workers,
        |_, _| {},
    )
    .await?;
    let records = explored.into_records();
    if records.is_empty() {
        return Err(GateError::NothingSampled(package.manifest.name.clone()));
    }
    Ok(records)
}

/// Gates `package`: its sampled calls executed and predicted by `simulator` (verified by
/// `verifier` when given and the configuration asks), compared call by call.
pub async fn gate(
    executor: Arc<Executor>,
    package: &EnvPackage,
    simulator: Arc<dyn Simulator>,
    verifier: Option<Arc<dyn Simulator>>,
    config: &GateConfig,
    progress: impl Fn(usize, usize),
) -> Result<GateReport, GateError> {
    if !(0.0..=1.0).contains(&config.threshold) {
        return Err(GateError::Threshold(config.threshold));
    }
    let calls = sample_calls(Arc::clone(&executor), package, config).await?;
    judge(
        executor, package, &calls, simulator, verifier, config, progress,
    )
    .await
}

/// Judges already sampled `calls` of `package` (walks of it, or of the package it was derived
/// from: a mutant is judged on the good package's calls).
pub async fn judge(
    executor: Arc<Executor>,
    package: &EnvPackage,
    calls: &[TransitionRecord],
    simulator: Arc<dyn Simulator>,
    verifier: Option<Arc<dyn Simulator>>,
    config: &GateConfig,
    progress: impl Fn(usize, usize),
) -> Result<GateReport, GateError> {
    let truth = execute(executor, package, calls, config).await?;
    compare(package, &truth, simulator, verifier, config, progress).await
}

/// A sampled call executed: what the simulator is compared with.
#[derive(Clone, Debug)]
pub struct ExecutedCall {
    /// The initial state its walk started from.
    pub initial_state: String,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// The state before, as the walk keeps it (a patch of the initial state: a call on a
    /// multi-megabyte database costs its changes, not the database).
    pub before: StateText,
    /// The frozen clock it ran under.
    pub clock: f64,
    /// The seed of the call (the simulated step gets the same).
    pub seed: u64,
    /// The observation.
    pub observation: Value,
    /// What the call changed: the patch from the state before to the state after
    /// (`envsim_core::state_patch`).
    pub change: Value,
}

impl ExecutedCall {
    /// The state before and the state after, whole.
    pub fn states(&self) -> (Value, Value) {
        let before = self.before.value();
        let mut after = before.clone();
        // The patch was made from this very state, so it applies.
        let _ = envsim_core::state_patch::apply_patch(&mut after, &self.change);
        (before, after)
    }
}

/// Executes `package`'s code on every sampled call (once, whatever simulators are compared
/// with it). The walks ran each call already, but under the walk's seed: the truth runs again
/// with the seed the simulated step gets, so that a simulator that runs code (the test double)
/// draws the same randomness.
pub async fn execute(
    executor: Arc<Executor>,
    package: &EnvPackage,
    calls: &[TransitionRecord],
    config: &GateConfig,
) -> Result<Vec<ExecutedCall>, GateError> {
    let name = package.manifest.name.clone();
    let (with_code, _) = environments(package)?;
    let truth = ExecutorSimulator::new(executor);
    let mut out = Vec::with_capacity(calls.len());
    let mut env = Environment {
        clock: f64::NAN,
        ..with_code
    };
    for (i, call) in calls.iter().enumerate() {
        let tool = call.action["name"].as_str().unwrap_or_default().to_owned();
        let arguments = call.action["arguments"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let before = call.config_before.value();
        let seed = config.seed.wrapping_add(i as u64);
        env.clock = call.clock;
        let executed = truth
            .predict(&StepRequest {
                env: &env,
                state: &before,
                tool: &tool,
                arguments: &arguments,
                seed,
                step: 0,
                attempt: 0,
                feedback: &[],
            })
            .await
            .map_err(|e| GateError::Simulator {
                package: name.clone(),
                tool: tool.clone(),
                message: format!("the executor: {e}"),
            })?;
        let change = envsim_core::state_patch::diff_patch(&before, &executed.state_after);
        out.push(ExecutedCall {
            initial_state: call.initial_state.clone(),
            tool,
            arguments,
            before: call.config_before.clone(),
            clock: call.clock,
            seed,
            observation: executed.observation,
            change,
        });
    }
    Ok(out)
}

/// Compares `simulator`'s answers (through a session without the code) with the executed
/// calls of `package`.
pub async fn compare(
    package: &EnvPackage,
    calls: &[ExecutedCall],
    simulator: Arc<dyn Simulator>,
    verifier: Option<Arc<dyn Simulator>>,
    config: &GateConfig,
    progress: impl Fn(usize, usize),
) -> Result<GateReport, GateError> {
    let name = package.manifest.name.clone();
    let (_, described) = environments(package)?;
    // One environment per frozen clock the walks ran under (the simulated step runs at the
    // walk's clock, with the executed call's seed).
    let mut at_clock: BTreeMap<u64, Arc<Environment>> = BTreeMap::new();
    let tools = package.manifest.tool_names();
    let mut per_tool: BTreeMap<String, ToolAgreement> = BTreeMap::new();
    let (mut agreeing, mut simulator_calls, mut tokens) = (0usize, 0usize, 0u64);
    let (mut unanswered, mut first_unanswered) = (0usize, None::<String>);
    let verify = config.verify.filter(|_| verifier.is_some());
    for (i, call) in calls.iter().enumerate() {
        let free = Arc::clone(at_clock.entry(call.clock.to_bits()).or_insert_with(|| {
            Arc::new(Environment {
                clock: call.clock,
                ..described.clone()
            })
        }));
        let (tool, arguments) = (&call.tool, &call.arguments);
        let (before, state_after) = call.states();
        let mut session = Session::new(
            free,
            Backends {
                primary: Arc::clone(&simulator),
                secondary: verifier.clone(),
                executor: None,
            },
            SessionConfig {
                mode: config.mode,
                max_regenerations: config.max_regenerations,
                verify,
                seed: call.seed,
            },
            before,
        );
        let rule = &package.outcome;
        let executed_success = rule.classify(&call.observation);
        let t = per_tool
            .entry(tool.clone())
            .or_insert_with(|| ToolAgreement {
                tool: tool.clone(),
                ..ToolAgreement::default()
            });
        t.calls += 1;
        t.executed_successes += usize::from(executed_success == Some(true));
        let record = match session.step(tool, arguments).await {
            Ok(record) => record,
            // A call the simulator cannot answer (a prompt over its context, an answer that
            // never reads) is a disagreement, counted apart; only a simulator that answers
            // nothing at all stops the gate (below).
            Err(e) => {
                t.unanswered += 1;
                unanswered += 1;
                first_unanswered.get_or_insert_with(|| format!("{tool}: {e}"));
                progress(i + 1, calls.len());
                continue;
            }
        };
        simulator_calls += record.provenance.simulator_calls;
        tokens += record.provenance.tokens;
        let predicted_success = rule.classify(&record.observation);
        let outcome_agrees = executed_success == predicted_success;
        let state_agrees = state_after == *record.state_after;
        t.observation_differences += usize::from(call.observation != record.observation);
        if outcome_agrees && state_agrees {
            t.agreeing += 1;
            agreeing += 1;
        } else {
            t.outcome_disagreements += usize::from(!outcome_agrees);
            t.state_disagreements += usize::from(!state_agrees);
            if t.examples.len() < config.examples_per_tool {
                let differs = fine_diff(&state_after, &record.state_after);
                t.examples.push(Disagreement {
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                    initial_state: call.initial_state.clone(),
                    executed_success,
                    predicted_success,
                    executed_observation: call.observation.clone(),
                    predicted_observation: record.observation.clone(),
                    state_differs_at: differs.iter().map(|c| c.pointer.to_string()).collect(),
                });
            }
        }
        progress(i + 1, calls.len());
    }
    if !calls.is_empty() && unanswered == calls.len() {
        return Err(GateError::Simulator {
            package: name,
            tool: "every sampled call".to_owned(),
            message: format!(
                "answered none of {} calls; the first: {}",
                calls.len(),
                first_unanswered.unwrap_or_default()
            ),
        });
    }
    let unsampled = (tools.iter())
        .filter(|t| !per_tool.contains_key(*t))
        .cloned()
        .collect();
    let mut ordered = Vec::with_capacity(per_tool.len());
    for tool in &tools {
        if let Some(t) = per_tool.remove(tool) {
            ordered.push(t);
        }
    }
    // Calls of tools the manifest does not list (none from walks; kept for completeness).
    ordered.extend(per_tool.into_values());
    let counts = Counts {
        calls: calls.len(),
        agreeing,
        tools: (ordered.iter())
            .map(|t| (t.tool.clone(), t.calls, t.agreeing))
            .collect(),
    };
    let score = counts.score();
    let worst_tool = config.rule.worst_tool(&counts);
    let never_succeeded = (ordered.iter())
        .filter(|t| t.executed_successes == 0)
        .map(|t| t.tool.clone())
        .collect();
    let simulator_name = match &verifier {
        Some(v) if verify.is_some() => format!("{} (verified by {})", simulator.name(), v.name()),
        _ => simulator.name(),
    };
    Ok(GateReport {
        package: name,
        simulator: simulator_name,
        calls: calls.len(),
        agreeing,
        score,
        threshold: config.threshold,
        rule: config.rule,
        accepted: config.rule.passes(config.threshold, &counts),
        worst_tool,
        tools: ordered,
        unsampled,
        never_succeeded,
        simulator_calls,
        tokens,
        unanswered,
        unanswered_because: first_unanswered,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts of 100 calls, `worst` the agreeing calls of tool `t` out of 5, the other tools
    /// agreeing on all of theirs.
    fn counts(agreeing: usize, worst: usize, worst_calls: usize) -> Counts {
        Counts {
            calls: 100,
            agreeing,
            tools: vec![
                ("a".into(), 95 - worst_calls + (100 - 95), 0),
                ("t".into(), worst_calls, worst),
            ]
            .into_iter()
            .map(|(n, c, a)| if n == "a" { (n, c, c) } else { (n, c, a) })
            .collect(),
        }
    }

    #[test]
    fn the_rules_judge_the_overall_share_and_the_tools() {
        let every = GateRule::EveryTool { min_calls: 4 };
        // Overall: only the share of all calls.
        assert!(GateRule::Overall.passes(0.85, &counts(90, 1, 5)));
        assert!(!GateRule::Overall.passes(0.85, &counts(84, 5, 5)));
        assert!(GateRule::Overall.passes(0.85, &counts(85, 5, 5)));
        // Every tool: a tool sampled often enough sinks the package...
        assert!(!every.passes(0.85, &counts(90, 3, 5)));
        assert!(every.passes(0.85, &counts(99, 5, 5)));
        // ...one sampled too rarely does not, and the overall share still counts.
        assert!(every.passes(0.85, &counts(97, 0, 3)));
        assert!(!every.passes(0.85, &counts(80, 5, 5)));
        assert_eq!(
            every.worst_tool(&counts(90, 3, 5)),
            Some(ToolScore {
                tool: "t".into(),
                calls: 5,
                score: 0.6
            })
        );
        assert_eq!(
            every.worst_tool(&counts(97, 0, 3)).map(|t| t.tool),
            Some("a".into())
        );
        assert_eq!(
            every.describe(),
            "overall and every tool with at least 4 calls"
        );
    }

    #[test]
    fn the_binomial_tail_is_exact_on_small_cases() {
        // P(X >= 1), X ~ B(2, 0.5) = 3/4; P(X >= 2) = 1/4.
        assert!((disagreement_tail(2, 1, 0.5) - 0.75).abs() < 1e-12);
        assert!((disagreement_tail(2, 2, 0.5) - 0.25).abs() < 1e-12);
        // P(X >= 3), X ~ B(10, 0.1) = 1 - (0.9^10 + 10·0.1·0.9^9 + 45·0.01·0.9^8).
        let expected = 1.0 - (0.9f64.powi(10) + 0.9f64.powi(9) + 0.45 * 0.9f64.powi(8));
        assert!((disagreement_tail(10, 3, 0.1) - expected).abs() < 1e-12);
        assert_eq!(disagreement_tail(10, 0, 0.1), 1.0);
        assert_eq!(disagreement_tail(10, 1, 0.0), 0.0);
        assert_eq!(disagreement_tail(10, 11, 0.5), 0.0);
        assert_eq!(disagreement_tail(10, 10, 1.0), 1.0);
        // Large n does not underflow: the mean of B(2000, 0.3) is 600.
        let around_mean = disagreement_tail(2000, 600, 0.3);
        assert!((0.4..0.6).contains(&around_mean), "{around_mean}");
    }

    #[test]
    fn the_calibrated_rule_tolerates_the_simulators_own_error_and_no_more() {
        let rule = GateRule::Calibrated {
            error_rate: 0.1,
            min_calls: 4,
            alpha: 0.01,
        };
        // 10 of 100 disagreements, spread: what a 10% simulator does.
        let spread = Counts {
            calls: 100,
            agreeing: 90,
            tools: (0..10).map(|i| (format!("t{i}"), 10, 9)).collect(),
        };
        assert!(rule.passes(0.85, &spread));
        // The same total, all on one tool of 10 calls: B(10, 0.1) >= 10 is 1e-10.
        let mut piled = spread.clone();
        piled.tools = (0..10)
            .map(|i| (format!("t{i}"), 10, if i == 3 { 0 } else { 10 }))
            .collect();
        assert!(!rule.passes(0.85, &piled));
        assert_eq!(rule.worst_tool(&piled).map(|t| t.tool), Some("t3".into()));
        // A perfect simulator: any disagreement fails.
        let perfect = GateRule::Calibrated {
            error_rate: 0.0,
            min_calls: 4,
            alpha: 0.01,
        };
        let mut one = spread.clone();
        one.agreeing = 99;
        one.tools = (0..10)
            .map(|i| (format!("t{i}"), 10, if i == 0 { 9 } else { 10 }))
            .collect();
        assert!(!perfect.passes(0.85, &one));
    }
}

//! Checkers made from a task's reference calls that reward every correct episode.
//!
//! The calls are executed from the task's initial state several times, each under another
//! seed or clock ([`Variation`]; the seeds and clocks an episode's calls get depend on the
//! episode's seed and on how many calls came before), and
//! [`envsim_core::checker::StateChecker::from_runs`] keeps what every run left alike by value
//! and checks the rest by kind and relation. A value the task determines but that a run
//! happens to draw the same in every run would still be demanded: more runs make that less
//! likely ([`Variation::standard`] is four).

use crate::backend::{Simulator, StepRequest};
use crate::environment::Environment;
use envsim_core::checker::{Run, StateChecker};
use serde_json::{Map, Value};

/// One execution's seed and clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Variation {
    /// The session seed the calls' seeds derive from.
    pub seed: u64,
    /// How far the environment's clock is moved (seconds).
    pub clock_shift: f64,
}

impl Variation {
    /// Four executions from the session seed `seed`: as given, under two other seeds, and
    /// with the clock moved as far as seven calls move it (an episode's calls come later than
    /// the reference's when the agent looks around first).
    pub fn standard(seed: u64) -> Vec<Variation> {
        let step = envsim_core::clock::DEFAULT_CLOCK_STEP;
        vec![
            Variation {
                seed,
                clock_shift: 0.0,
            },
            Variation {
                seed: seed ^ 0x5eed_0001,
                clock_shift: 0.0,
            },
            Variation {
                seed,
                clock_shift: 7.0 * step,
            },
            Variation {
                seed: seed ^ 0x5eed_0002,
                clock_shift: 3.0 * step,
            },
        ]
    }
}

/// A reference call: a tool and its arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceCall {
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
}

impl ReferenceCall {
    /// The calls of a package's scripted test case, in order.
    pub fn of_case(case: &envsim_exec::package::TestCase) -> Vec<ReferenceCall> {
        case.steps
            .iter()
            .map(|s| ReferenceCall {
                tool: s.tool.clone(),
                arguments: s.args.clone(),
            })
            .collect()
    }
}

/// Why the reference calls could not be executed.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    /// The environment has no code (nothing can execute the calls).
    #[error("{0}: the environment has no code to execute the reference calls")]
    NoCode(String),
    /// A call the executor could not run (the sandbox, not the environment, failed).
    #[error("reference call {index} ({tool}), seed {seed}, clock +{clock_shift}s: {message}")]
    Call {
        /// 1-based.
        index: usize,
        /// The tool.
        tool: String,
        /// The run's seed.
        seed: u64,
        /// The run's clock shift.
        clock_shift: f64,
        /// What failed.
        message: String,
    },
    /// No variation to run.
    #[error("no run to make a checker from")]
    NoRuns,
}

/// The final state of `calls` executed from `initial` by `executor` under `variation`.
pub async fn execute(
    env: &Environment,
    executor: &dyn Simulator,
    initial: &Value,
    calls: &[ReferenceCall],
    variation: Variation,
) -> Result<Value, ReferenceError> {
    if env.code.is_none() {
        return Err(ReferenceError::NoCode(env.name.clone()));
    }
    let mut shifted = env.clone();
    shifted.clock += variation.clock_shift;
    let mut state = initial.clone();
    for (k, call) in calls.iter().enumerate() {
        let request = StepRequest {
            env: &shifted,
            state: &state,
            tool: &call.tool,
            arguments: &call.arguments,
            seed: variation.seed,
            step: k,
            attempt: 0,
            feedback: &[],
        };
        let prediction = executor
            .predict(&request)
            .await
            .map_err(|e| ReferenceError::Call {
                index: k + 1,
                tool: call.tool.clone(),
                seed: variation.seed,
                clock_shift: variation.clock_shift,
                message: e.to_string(),
            })?;
        state = prediction.state_after;
    }
    Ok(state)
}

/// The checker of `calls` from `initial`: executed under every variation, what they left
/// alike checked by value, the rest by kind and relation.
pub async fn checker(
    env: &Environment,
    executor: &dyn Simulator,
    initial: &Value,
    calls: &[ReferenceCall],
    variations: &[Variation],
) -> Result<StateChecker, ReferenceError> {
    let finals = execute_all(env, executor, initial, calls, variations).await?;
    checker_of_runs(initial, variations, &finals)
}

/// The final state of `calls` under each of `variations`, in order.
async fn execute_all(
    env: &Environment,
    executor: &dyn Simulator,
    initial: &Value,
    calls: &[ReferenceCall],
    variations: &[Variation],
) -> Result<Vec<Value>, ReferenceError> {
    let mut finals = Vec::with_capacity(variations.len());
    for variation in variations {
        finals.push(execute(env, executor, initial, calls, *variation).await?);
    }
    Ok(finals)
}

fn checker_of_runs(
    initial: &Value,
    variations: &[Variation],
    finals: &[Value],
) -> Result<StateChecker, ReferenceError> {
    let runs: Vec<Run<'_>> = variations
        .iter()
        .zip(finals)
        .map(|(v, state)| Run {
            seed: v.seed,
            clock_shift: v.clock_shift,
            state,
        })
        .collect();
    StateChecker::from_runs(initial, &runs).map_err(|_| ReferenceError::NoRuns)
}

/// Replays that check a checker: seeds and clocks none of [`Variation::standard`]'s runs
/// had, with the clock as far moved as two and nine calls move it.
pub fn replays() -> Vec<Variation> {
    let step = envsim_core::clock::DEFAULT_CLOCK_STEP;
    vec![
        Variation {
            seed: 11,
            clock_shift: 0.0,
        },
        Variation {
            seed: 12,
            clock_shift: 2.0 * step,
        },
        Variation {
            seed: 13,
            clock_shift: 9.0 * step,
        },
    ]
}

/// A checker made from reference calls, tried on their replays under other seeds and
/// clocks, and on the initial state (doing nothing).
#[derive(Clone, Debug)]
pub struct RewardCheck {
    /// The checker.
    pub checker: StateChecker,
    /// The final state of each run it was made from.
    pub finals: Vec<Value>,
    /// The final state of each replay.
    pub replay_finals: Vec<Value>,
    /// Each replay and its verdict.
    pub replays: Vec<(Variation, envsim_core::checker::Verdict)>,
    /// The verdict on the initial state.
    pub nothing_done: envsim_core::checker::Verdict,
}

impl RewardCheck {
    /// Whether every replay earns reward 1.
    pub fn replays_pass(&self) -> bool {
        self.replays.iter().all(|(_, v)| v.failures.is_empty())
    }

    /// Whether doing nothing earns reward 1 though the calls change the state.
    pub fn nothing_done_passes(&self) -> bool {
        self.checker.checks() > 0 && self.nothing_done.failures.is_empty()
    }
}

/// Makes the checker of `calls` under `made_under` and checks it on their replays under
/// `replayed` (a correct agent's episodes) and on the initial state.
pub async fn check_rewards(
    env: &Environment,
    executor: &dyn Simulator,
    initial: &Value,
    calls: &[ReferenceCall],
    made_under: &[Variation],
    replayed: &[Variation],
) -> Result<RewardCheck, ReferenceError> {
    let finals = execute_all(env, executor, initial, calls, made_under).await?;
    let checker = checker_of_runs(initial, made_under, &finals)?;
    let replay_finals = execute_all(env, executor, initial, calls, replayed).await?;
    let replays = replayed
        .iter()
        .zip(&replay_finals)
        .map(|(v, done)| (*v, checker.check(initial, done)))
        .collect();
    let nothing_done = checker.check(initial, initial);
    Ok(RewardCheck {
        checker,
        finals,
        replay_finals,
        replays,
        nothing_done,
    })
}

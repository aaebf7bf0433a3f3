//! Learning what an environment's tools do, in one place (the audit, `sim`, `serve`, `synth`
//! and `env openapi` all learn this way): the package explored through the executor
//! ([`envsim_explore`], guided: preconditions met, new branches of its code sought, its
//! scripted tests as the first sequences), with a budget of at least
//! [`LEARNING_CALLS_PER_TOOL`] calls per tool; then [`Effects::learn`] from the walks, the
//! manifest's declared effects for what the walks never showed, and the code's reach as the
//! bound.
//!
//! Nothing is printed here: [`LearningPlan`] says what will be explored (to announce it), and
//! [`Learned`] which tools never succeeded and what the exploration reached.

use crate::audit_check::trajectories_from_walks;
use envsim_core::audit::{AuditTrajectory, Effects};
use envsim_exec::package::EnvPackage;
use envsim_exec::{ExecError, Executor};
use envsim_explore::plan::{learning_walks, ExplorePlan, Strategy, LEARNING_FOCUS_SHARE};
use envsim_explore::report::CoverageReport;
use std::sync::Arc;

/// How a package is walked to learn from it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LearningPlan {
    /// Walks per initial state: the least asked for, raised to make
    /// [`LEARNING_CALLS_PER_TOOL`] calls per tool in all.
    pub walks: usize,
    /// Calls per walk.
    pub steps: usize,
    /// The package's tools.
    pub tools: usize,
    /// Its initial states.
    pub states: usize,
    /// Seed of the walks.
    pub seed: u64,
    /// Seconds the clock advances between steps.
    pub clock_step: f64,
}

impl LearningPlan {
    /// The plan for `package`: at least `least_walks` walks of `steps` calls per state (0: no
    /// walks, effects from the manifest and the code only).
    pub fn new(package: &EnvPackage, least_walks: usize, steps: usize, seed: u64) -> Self {
        let tools = package.manifest.tool_names().len();
        let states = package.states.len();
        LearningPlan {
            walks: learning_walks(least_walks, steps, tools, states),
            steps,
            tools,
            states,
            seed,
            clock_step: envsim_core::clock::DEFAULT_CLOCK_STEP,
        }
    }

    /// The exploration: guided, a budget of `walks` walks of `steps` calls per state.
    pub fn explore_plan(&self) -> ExplorePlan {
        ExplorePlan {
            strategy: Strategy::Guided,
            walks: self.walks,
            steps: self.steps,
            seed: self.seed,
            clock_step: self.clock_step,
            focus_share: LEARNING_FOCUS_SHARE,
            twin: false,
            ..ExplorePlan::default()
        }
    }
}

/// What learning found.
#[derive(Clone, Debug)]
pub struct Learned {
    /// The walks, as trajectories with their states.
    pub runs: Vec<AuditTrajectory>,
    /// What the tools do.
    pub effects: Effects,
    /// Tools that never succeeded in the walks (what they do is bounded by their code and
    /// names only, and their answers' shapes are not known), in manifest order.
    pub unproven: Vec<String>,
    /// What the exploration reached (`None` when nothing was explored).
    pub coverage: Option<CoverageReport>,
}

/// Learns what `package`'s tools do by exploring it as `plan` says on `executor`;
/// `progress(done, total)` hears of the calls spent.
pub async fn learn(
    executor: Arc<Executor>,
    package: &EnvPackage,
    plan: &LearningPlan,
    progress: impl Fn(usize, usize) + Send + Sync + 'static,
) -> Result<Learned, ExecError> {
    if plan.walks == 0 {
        return Ok(learned_from(package, Vec::new()));
    }
    let explored = envsim_explore::explore(
        executor,
        Arc::new(vec![package.clone()]),
        plan.explore_plan(),
        1,
        progress,
    )
    .await?;
    let Some(explored) = explored.packages.into_iter().next() else {
        return Ok(learned_from(package, Vec::new()));
    };
    let records: Vec<_> = explored.records().cloned().collect();
    let runs = trajectories_from_walks(&records)
        .into_values()
        .next()
        .unwrap_or_default();
    Ok(Learned {
        coverage: Some(explored.report),
        ..learned_from(package, runs)
    })
}

/// What `runs` (walks of `package`) show its tools do, with the manifest's declarations and
/// the code's reach.
pub fn learned_from(package: &EnvPackage, runs: Vec<AuditTrajectory>) -> Learned {
    let tools = package.manifest.tool_names();
    let effects = Effects::learn(&runs)
        .with_initial_states(package.states.iter().map(|(_, state)| state))
        .with_annotations(&package.manifest.effects)
        .with_code(
            &package.code.code,
            package.code.convention,
            tools.iter().map(String::as_str),
        );
    let unproven = tools
        .iter()
        .filter(|t| effects.successes(t) == 0)
        .cloned()
        .collect();
    Learned {
        runs,
        effects,
        unproven,
        coverage: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envsim_explore::plan::LEARNING_CALLS_PER_TOOL;

    #[test]
    fn the_plan_makes_enough_calls_per_tool() {
        let dir = tempfile::tempdir().unwrap();
        let package = EnvPackage::load(&envsim_testkit::desk::write(dir.path()).unwrap()).unwrap();
        let tools = package.manifest.tool_names().len();
        let states = package.states.len();
        let plan = LearningPlan::new(&package, 1, 4, 7);
        assert_eq!((plan.tools, plan.states, plan.seed), (tools, states, 7));
        assert!(plan.walks * plan.steps * states >= LEARNING_CALLS_PER_TOOL * tools);
        assert!((plan.walks - 1) * plan.steps * states < LEARNING_CALLS_PER_TOOL * tools);
        // None asked for, none walked.
        assert_eq!(LearningPlan::new(&package, 0, 4, 7).walks, 0);
    }
}

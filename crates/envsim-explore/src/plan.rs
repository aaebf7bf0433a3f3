//! What an exploration is asked to do: its strategy, its budget of calls, and what each call
//! records.

use serde::Serialize;

/// How the explorer chooses its calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// State-aware and coverage-guided: arguments from the state, from what earlier answers
    /// returned or created, and from schema enums; refusals read and their preconditions met;
    /// the call sequences that reached new branches of the environment's code kept and
    /// extended; the package's scripted tests and tasks' planned calls as the first seeds.
    #[default]
    Guided,
    /// Seeded random walks: `walks` walks of `steps` calls from every initial state, each tool
    /// drawn uniformly, arguments drawn from the current state by the driver. What envsim
    /// walked before the explorer; kept as the baseline the explorer is measured against.
    Random,
}

impl Strategy {
    /// The name `--strategy` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Guided => "guided",
            Strategy::Random => "random",
        }
    }
}

/// The focus share of learning: the share of calls whose arguments are drawn together from one
/// record of the state and what it references ([`crate::driver::StateIndex::focus`]).
pub const LEARNING_FOCUS_SHARE: f64 = 0.8;

/// Calls per tool that learning makes in all, at the least: about half of a tool's calls fail
/// (arguments a precondition refuses), and its effects are claimed only after three successes
/// ([`envsim_core::audit::Effects::learn`]), so a few walks over one large database (τ²-bench's
/// retail: 15 tools, one state) would leave most changes unproven.
pub const LEARNING_CALLS_PER_TOOL: usize = 16;

/// Walks per initial state for learning: at least `min_walks` (0: no walks at all), and enough
/// that walks of `steps` steps over all `states` make [`LEARNING_CALLS_PER_TOOL`] calls per tool
/// of `tools`.
pub fn learning_walks(min_walks: usize, steps: usize, tools: usize, states: usize) -> usize {
    if min_walks == 0 || steps == 0 || states == 0 {
        return min_walks;
    }
    let calls = LEARNING_CALLS_PER_TOOL * tools;
    min_walks.max(calls.div_ceil(steps * states))
}

/// One exploration's plan. Its budget is what `walks` walks of `steps` calls from every initial
/// state cost: the random strategy makes exactly those walks, the guided one spends the same
/// number of calls as it sees fit (and stops sooner at a plateau when asked).
#[derive(Clone, Debug, PartialEq)]
pub struct ExplorePlan {
    /// How calls are chosen.
    pub strategy: Strategy,
    /// Walks per initial state (the budget's unit).
    pub walks: usize,
    /// Calls per walk; the guided strategy's longest extension of a kept sequence.
    pub steps: usize,
    /// Share of calls drawn to succeed (the rest corrupt one argument, to see refusals).
    pub valid_share: f64,
    /// Master seed: the same plan and packages always give the same exploration.
    pub seed: u64,
    /// Record the state paths each call reads (footprints).
    pub trace: bool,
    /// Seconds the clock advances per call (step `k` of a path from an initial state runs at
    /// the state's clock + `k` × this).
    pub clock_step: f64,
    /// Share of calls drawn coherently from one record and what it references. Zero keeps
    /// random walks as `bench build` published them; the guided strategy draws most calls so.
    pub focus_share: f64,
    /// Run every call again in a twin process to flag unpredictable output fields
    /// (benchmarks and training data need them; learning does not).
    pub twin: bool,
    /// Guided: start from the package's scripted tests and its tasks' planned calls.
    pub seeds: bool,
    /// Guided: stop after this many calls in a row that reached nothing new (`None`: spend the
    /// whole budget).
    pub plateau: Option<usize>,
}

impl Default for ExplorePlan {
    fn default() -> Self {
        ExplorePlan {
            strategy: Strategy::Guided,
            walks: 10,
            steps: 16,
            valid_share: 0.75,
            seed: 42,
            trace: false,
            clock_step: envsim_core::clock::DEFAULT_CLOCK_STEP,
            focus_share: LEARNING_FOCUS_SHARE,
            twin: false,
            seeds: true,
            plateau: None,
        }
    }
}

impl ExplorePlan {
    /// Calls the plan may spend on a package with `states` initial states.
    pub fn budget(&self, states: usize) -> usize {
        self.walks * self.steps * states
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One large state with many tools gets enough walks for 16 calls per tool; many states
    /// keep the minimum; no learning stays none.
    #[test]
    fn learning_walks_cover_every_tool() {
        // τ²-bench retail: 15 tools, one state, walks of 16 steps → 240 calls.
        assert_eq!(learning_walks(6, 16, 15, 1), 15);
        // A corpus environment: 8 tools over 3 states: 6 walks each are more than enough.
        assert_eq!(learning_walks(6, 16, 8, 3), 6);
        // 17 tools over 2 states: 272 calls → 9 walks of 16 steps per state (288 calls).
        assert_eq!(learning_walks(6, 16, 17, 2), 9);
        assert_eq!(learning_walks(0, 16, 15, 1), 0);
        assert_eq!(learning_walks(6, 16, 15, 0), 6);
    }

    #[test]
    fn the_budget_is_what_the_walks_cost() {
        let plan = ExplorePlan {
            walks: 3,
            steps: 5,
            ..ExplorePlan::default()
        };
        assert_eq!(plan.budget(2), 30);
        assert_eq!(plan.budget(0), 0);
    }
}

//! What the command modules share, so that none imports another: where packages come from
//! ([`Corpus`]), the executor's runtime and limits, the walk options, collecting walks with a
//! progress bar, learning what an environment's tools do ([`learn`], [`learn_environment`]:
//! the library's [`envsim_bench::learn`], announced on standard error), replaying recorded runs
//! under a progress bar, the trajectory format option and the replay summary.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use envsim_bench::learn::{Learned, LearningPlan};
use envsim_bench::replay::{Comparison, ReplayChoice, ReplayCounts, ReplayedRun};
use envsim_bench::trajectories::{RecordedRun, TrajectoryFormat};
use envsim_exec::package::EnvPackage;
use envsim_exec::{Executor, Limits};
use envsim_explore::plan::{ExplorePlan, Strategy};
use envsim_explore::Exploration;
use envsim_sim::environment::Environment;
use std::path::PathBuf;
use std::sync::Arc;

/// Where environment packages come from: a folder (`--envs DIR`, else `$ENVSIM_ENVS`), else the
/// corpus embedded in the binary (the workspace's `envs/` at build time).
#[derive(Clone, Debug)]
pub enum Corpus {
    /// A folder of packages.
    Dir(PathBuf),
    /// The bundled corpus.
    Bundled,
}

impl Corpus {
    /// `--envs DIR` when given, else `$ENVSIM_ENVS` when set, else the bundled corpus.
    pub fn choose(envs: Option<PathBuf>) -> Corpus {
        match envs.or_else(|| std::env::var_os("ENVSIM_ENVS").map(PathBuf::from)) {
            Some(dir) => Corpus::Dir(dir),
            None => Corpus::Bundled,
        }
    }

    /// The folder (as given), or "the bundled corpus": for messages.
    pub fn display(&self) -> impl std::fmt::Display + '_ {
        struct Shown<'a>(&'a Corpus);
        impl std::fmt::Display for Shown<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self.0 {
                    Corpus::Dir(dir) => write!(f, "{}", dir.display()),
                    Corpus::Bundled => f.write_str("the bundled corpus"),
                }
            }
        }
        Shown(self)
    }

    /// Whether there is anything to read: the folder exists (the bundled corpus always does).
    pub fn exists(&self) -> bool {
        match self {
            Corpus::Dir(dir) => dir.is_dir(),
            Corpus::Bundled => true,
        }
    }

    /// Every package, by name.
    pub fn load_all(&self) -> Result<Vec<EnvPackage>> {
        match self {
            Corpus::Dir(dir) => EnvPackage::load_all(dir),
            Corpus::Bundled => crate::bundled::corpus()?.load_all(),
        }
        .map_err(|e| anyhow!("{e}"))
    }

    /// Whether the corpus has a package of this name (loadable or not).
    pub fn has(&self, name: &str) -> Result<bool> {
        Ok(match self {
            Corpus::Dir(dir) => dir.join(name).join("manifest.json").is_file(),
            Corpus::Bundled => crate::bundled::corpus()?
                .package_names()
                .iter()
                .any(|n| n == name),
        })
    }

    /// The package `name`; when there is none, an error listing those there are.
    pub fn load(&self, name: &str) -> Result<EnvPackage> {
        if !self.has(name)? {
            let names: Vec<String> = self
                .load_all()?
                .into_iter()
                .map(|p| p.manifest.name)
                .collect();
            bail!(
                "no environment {name:?} in {} (have: {})",
                self.display(),
                names.join(", ")
            );
        }
        match self {
            Corpus::Dir(dir) => EnvPackage::load(&dir.join(name)),
            Corpus::Bundled => crate::bundled::corpus()?.load(name),
        }
        .map_err(|e| anyhow!("{e}"))
    }
}

/// The runtime the commands that drive the executor run on: two threads (the work is in the
/// Python workers).
pub fn exec_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// The executor's limits: the defaults, with the reply cap from `ENVSIM_REPLY_CAP_MB`.
pub fn exec_limits() -> Result<Limits> {
    Limits::from_env().map_err(anyhow::Error::msg)
}

/// A clock given on the command line: a date or date-time (ISO 8601), or seconds since 1970.
pub fn parse_clock(text: &str) -> std::result::Result<f64, String> {
    if let Ok(seconds) = text.parse::<f64>() {
        if seconds.is_finite() {
            return Ok(seconds);
        }
    }
    envsim_core::clock::parse_time(text).ok_or_else(|| {
        format!("{text:?} is not a date-time like 2025-06-10T09:00:00Z nor seconds since 1970")
    })
}

/// Seconds between steps: a finite number, not negative.
pub fn parse_clock_step(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds >= 0.0 => Ok(seconds),
        _ => Err(format!("{text:?} is not a number of seconds (0 or more)")),
    }
}

/// How an exploration chooses its calls (`--strategy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum StrategyArg {
    /// State-aware and coverage-guided (arguments from the state and earlier answers,
    /// refusals read, sequences that reach new branches extended, scripted tests first).
    #[default]
    Guided,
    /// Seeded random walks, each tool drawn uniformly: the baseline the explorer is measured
    /// against, and the walks earlier benchmarks were built from.
    Random,
}

impl StrategyArg {
    /// The library's strategy.
    pub fn strategy(self) -> Strategy {
        match self {
            StrategyArg::Guided => Strategy::Guided,
            StrategyArg::Random => Strategy::Random,
        }
    }
}

/// How environments are explored (shared by `bench build`, `export sft`, `env explore` and the
/// verbs that walk packages).
#[derive(Clone, Debug, Args)]
pub struct WalkArgs {
    /// Walks per initial state: the budget is this many walks of --steps calls per state.
    #[arg(long, default_value_t = 10)]
    pub walks: usize,
    /// Calls per walk (the guided strategy's longest extension of a kept sequence).
    #[arg(long, default_value_t = 16)]
    pub steps: usize,
    /// Worker processes.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Record the state paths each call reads (footprints) in benchmark.jsonl.
    #[arg(long)]
    pub trace: bool,
    /// Seconds the clock advances between the calls of a walk; every walk starts at its initial
    /// state's own clock (the manifest's `clocks`, else derived from the state).
    #[arg(long, value_name = "SECONDS", default_value_t = envsim_core::clock::DEFAULT_CLOCK_STEP, value_parser = parse_clock_step)]
    pub clock_step: f64,
    /// How calls are chosen.
    #[arg(long, value_enum, default_value_t = StrategyArg::Guided)]
    pub strategy: StrategyArg,
}

impl WalkArgs {
    /// The exploration these options ask for, seeded with `seed`; `twin` runs every call again
    /// to flag unpredictable fields (benchmarks and training data).
    pub fn plan(&self, seed: u64, twin: bool) -> ExplorePlan {
        let strategy = self.strategy.strategy();
        ExplorePlan {
            strategy,
            walks: self.walks,
            steps: self.steps,
            seed,
            trace: self.trace,
            clock_step: self.clock_step,
            // Random walks stay as `bench build` published them; the explorer draws most calls
            // around one record.
            focus_share: match strategy {
                Strategy::Random => 0.0,
                Strategy::Guided => envsim_explore::plan::LEARNING_FOCUS_SHARE,
            },
            twin,
            ..ExplorePlan::default()
        }
    }
}

/// Explores the packages as `plan` says with `workers` workers, under a progress bar of calls.
pub fn explore(
    packages: Vec<EnvPackage>,
    plan: ExplorePlan,
    workers: usize,
) -> Result<Exploration> {
    let runtime = exec_runtime()?;
    let limits = exec_limits()?;
    let (progress, advance) = progress_bar(CALLS_BAR);
    let explored = runtime.block_on(async {
        let executor = Arc::new(Executor::new(workers, limits).await?);
        envsim_explore::explore(executor, Arc::new(packages), plan, workers, advance).await
    })?;
    progress.finish_and_clear();
    Ok(explored)
}

/// Explores the packages as `walk` says with `seed` (every call run twice to flag
/// unpredictable fields), under a progress bar.
pub fn walk_transitions(
    packages: Vec<EnvPackage>,
    walk: &WalkArgs,
    seed: u64,
) -> Result<Exploration> {
    explore(packages, walk.plan(seed, true), walk.workers)
}

/// How many times the calls of the walks asked for an exploration spends when walks of a
/// given shape are chosen from its paths ([`envsim_explore::Exploration::longest_paths`]):
/// guided paths have lengths of their own, and a larger pool holds long ones.
pub const PATH_POOL: usize = 4;

/// Walks of `steps` calls per initial state, as `bench build` explores.
pub fn walk_args(walks: usize, steps: usize, workers: usize) -> WalkArgs {
    WalkArgs {
        walks,
        steps,
        workers,
        trace: false,
        clock_step: envsim_core::clock::DEFAULT_CLOCK_STEP,
        strategy: StrategyArg::Guided,
    }
}

/// What `package`'s tools do, learned from at least `least_walks` walks of `steps` calls per
/// state with `seed` on `workers` workers ([`envsim_bench::learn`]), announced on standard
/// error with the tools that never succeeded.
pub fn learn(
    package: &EnvPackage,
    least_walks: usize,
    steps: usize,
    workers: usize,
    seed: u64,
) -> Result<Learned> {
    learn_planned(
        package,
        &LearningPlan::new(package, least_walks, steps, seed),
        workers,
    )
}

/// Learns what `package`'s tools do as `plan` says, with `workers` concurrent walks, telling
/// the user what is walked (under a progress bar) and which tools never succeeded.
pub fn learn_planned(package: &EnvPackage, plan: &LearningPlan, workers: usize) -> Result<Learned> {
    let name = &package.manifest.name;
    if plan.walks > 0 {
        eprintln!(
            "{name}: learning what its tools do by exploring it: {} calls ({} tools, {} state{})",
            plan.explore_plan().budget(plan.states),
            plan.tools,
            plan.states,
            if plan.states == 1 { "" } else { "s" }
        );
    }
    let (progress, advance) = progress_bar(CALLS_BAR);
    let learned = exec_runtime()?.block_on(async {
        let executor = Arc::new(Executor::new(workers, exec_limits()?).await?);
        envsim_bench::learn::learn(executor, package, plan, advance)
            .await
            .map_err(anyhow::Error::from)
    })?;
    progress.finish_and_clear();
    if let Some(coverage) = &learned.coverage {
        eprintln!("{name}: {}", coverage_line(coverage));
    }
    if !learned.unproven.is_empty() {
        eprintln!(
            "{name}: {} of {} tools never succeeded in the learning walks ({}): what they do is bounded by their code and names only, and their answers' shapes are not known",
            learned.unproven.len(),
            plan.tools,
            learned.unproven.join(", ")
        );
    }
    Ok(learned)
}

/// One line of what an exploration reached: tools that succeeded, branch outcomes of the
/// environment's code, calls spent.
pub fn coverage_line(report: &envsim_explore::report::CoverageReport) -> String {
    let branches = match report.branch_share() {
        Some(share) => format!(
            "{} of {} branch outcomes ({:.0}%)",
            report.branches_reached,
            report.branches,
            100.0 * share
        ),
        None => "no branches mapped".to_owned(),
    };
    format!(
        "{} of {} tools succeeded, {branches}, {} calls",
        report.tools_succeeding(),
        report.tools.len(),
        report.calls
    )
}

/// An environment for simulation, its effects and description learned from 6 walks of 16
/// calls per state (seed 1).
pub fn learn_environment(package: &EnvPackage) -> Result<Environment> {
    let learned = learn(package, 6, 16, 2, 1)?;
    Environment::from_package(package, &learned.runs, learned.effects).map_err(|e| {
        anyhow!(
            "{}: the generated description does not read back, at {}: {}",
            package.manifest.name,
            e.pointer,
            e.message
        )
    })
}

/// The bar of an exploration, over the calls of its budget.
const CALLS_BAR: &str = "exploring {bar:30} {pos}/{len} calls ({elapsed}, eta {eta})";

/// A progress bar drawn with `template`, and the `(done, total)` callback the libraries'
/// workflows call to move it (from any thread).
pub fn progress_bar(
    template: &str,
) -> (
    indicatif::ProgressBar,
    impl Fn(usize, usize) + Send + Sync + 'static,
) {
    let progress = indicatif::ProgressBar::new(0);
    progress.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let bar = progress.clone();
    (progress, move |done: usize, total: usize| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })
}

/// Replays `runs` ([`envsim_bench::replay::replay_runs`]) under a progress bar.
pub async fn replay_runs(
    executor: Arc<Executor>,
    packages: &[EnvPackage],
    runs: &[RecordedRun],
    source: &str,
    choice: ReplayChoice<'_>,
) -> Result<Vec<ReplayedRun>> {
    let (progress, advance) = progress_bar("replaying {bar:30} {pos}/{len} runs ({elapsed})");
    let replayed =
        envsim_bench::replay::replay_runs(executor, packages, runs, source, choice, advance).await;
    progress.finish_and_clear();
    Ok(replayed?)
}

/// A trajectory file's format (`auto`: detected per record).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Detect each record's format from its shape.
    Auto,
    /// The reference's (EnvScaler's) run records.
    Reference,
    /// envsim trajectory JSONL.
    Envsim,
    /// OpenAI chat transcripts (assistant `tool_calls` + `tool` messages).
    Openai,
}

impl FormatArg {
    /// The library's format, `None` for auto.
    pub fn format(self) -> Option<TrajectoryFormat> {
        match self {
            FormatArg::Auto => None,
            FormatArg::Reference => Some(TrajectoryFormat::Reference),
            FormatArg::Envsim => Some(TrajectoryFormat::Envsim),
            FormatArg::Openai => Some(TrajectoryFormat::OpenAi),
        }
    }
}

/// What a replay's summary needs of each run, gathered as the runs are written (and then
/// dropped): a line per run, the differing steps, the totals.
#[derive(Default)]
pub struct ReplaySummary {
    lines: Vec<String>,
    differing: Vec<String>,
    runs: usize,
    total: ReplayCounts,
}

impl ReplaySummary {
    /// Adds a run.
    pub fn add(&mut self, run: &ReplayedRun) {
        let c = run.counts();
        self.lines.push(format!(
            "{} task {} on {} from {}: {} steps: {} exact, {} normalised, {} differ, {} not recorded",
            run.location,
            run.task_id,
            run.env,
            run.initial_state_name,
            c.total(),
            c.exact,
            c.normalised,
            c.differs,
            c.not_recorded
        ));
        self.total.merge(c);
        self.runs += 1;
        for (k, s) in run.steps.iter().enumerate() {
            if matches!(s.comparison, Comparison::Differs(_)) {
                self.differing.push(format!(
                    "  {} task {} step {} {}: {}",
                    run.location,
                    run.task_id,
                    k + 1,
                    envsim_explore::record::action_key(&s.transition.action),
                    s.comparison.why().unwrap_or_default()
                ));
            }
        }
    }

    /// Prints the per-run lines, the totals and the first differing steps; returns the totals.
    pub fn print(&self, source: &str) -> ReplayCounts {
        for line in &self.lines {
            eprintln!("{line}");
        }
        if !self.differing.is_empty() {
            eprintln!("steps that differ from the recording:");
            for line in self.differing.iter().take(10) {
                eprintln!("{line}");
            }
            if self.differing.len() > 10 {
                eprintln!(
                    "  ... and {} more (see the comparison of each step)",
                    self.differing.len() - 10
                );
            }
        }
        let total = self.total;
        eprintln!(
            "{source}: {} runs, {} steps: {} exact, {} normalised, {} differ, {} not recorded",
            self.runs,
            total.total(),
            total.exact,
            total.normalised,
            total.differs,
            total.not_recorded
        );
        total
    }
}

/// Prints the per-run lines, the totals and the first differing steps; returns the totals.
pub fn print_summary(source: &str, replayed: &[ReplayedRun]) -> ReplayCounts {
    let mut summary = ReplaySummary::default();
    for run in replayed {
        summary.add(run);
    }
    summary.print(source)
}

/// The price `--price-input USD --price-output USD` give (USD per million prompt and
/// completion tokens): both or neither.
pub fn price_of(
    input: Option<f64>,
    output: Option<f64>,
) -> Result<Option<envsim_core::sample::Price>> {
    match (input, output) {
        (None, None) => Ok(None),
        (Some(i), Some(o)) if i >= 0.0 && o >= 0.0 => Ok(Some(envsim_core::sample::Price {
            input_per_mtok: i,
            output_per_mtok: o,
        })),
        (Some(_), Some(_)) => bail!("prices must be ≥ 0"),
        _ => bail!("give both --price-input and --price-output (USD per million tokens)"),
    }
}

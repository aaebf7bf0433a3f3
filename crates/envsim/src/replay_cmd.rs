//! `envsim env replay` and the call-only runs of `bench build --trajectories`: recorded calls
//! re-executed in the sandbox ([`envsim_bench::replay`]).

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use envsim_bench::replay::{replay_run, Comparison, ReplayCounts, ReplayedRun};
use envsim_bench::trajectories::{read_runs, RecordedRun, TrajectoryFormat};
use envsim_exec::package::EnvPackage;
use envsim_exec::Executor;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Recorded runs: envsim trajectory JSONL, reference/EnvScaler run records, or OpenAI chat
    /// transcripts (JSONL, a JSON array of records, or one transcript as a list of messages).
    file: PathBuf,
    /// The record format.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    format: FormatArg,
    /// The environment (package name); default: the one each record names.
    #[arg(long, value_name = "NAME")]
    env: Option<String>,
    /// The initial state for every run: an index of the package's states, a state file name
    /// (with or without `.json`, or the task id an imported state is named after), or a JSON
    /// file. Default: the record's own initial state, else the package state named after the
    /// record's task id.
    #[arg(long, value_name = "N|NAME|FILE")]
    state: Option<String>,
    /// Run seed: step k of a run without recorded seeds gets a seed derived from (seed, k).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Clock of the first step of runs that record no clocks (a date-time like
    /// 2025-06-10T09:00:00Z, or seconds since 1970). Default: the initial state's own clock (the
    /// manifest's `clocks` for a package state, else derived from the state).
    #[arg(long, value_name = "TIME", value_parser = crate::env_cmd::parse_clock)]
    clock: Option<f64>,
    /// Seconds the clock advances between such steps.
    #[arg(long, value_name = "SECONDS", default_value_t = envsim_core::clock::DEFAULT_CLOCK_STEP, value_parser = crate::env_cmd::parse_clock_step)]
    clock_step: f64,
    /// Worker processes (runs replay in parallel; the steps of a run in order).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Write the replayed trajectories (envsim trajectory JSONL) here instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Exit 0 even when some replayed observations differ from the recorded ones.
    #[arg(long)]
    allow_differences: bool,
}

/// The package a run replays on: `--env`, else the record's environment by name, else by the
/// name `import-envscaler` gives an EnvScaler id.
pub fn package_for<'a>(
    packages: &'a [EnvPackage],
    chosen: Option<&str>,
    run: &RecordedRun,
    source: &str,
) -> Result<&'a EnvPackage> {
    let wanted = match (chosen, run.env.as_deref()) {
        (Some(name), _) => name.to_owned(),
        (None, Some(env)) => env.to_owned(),
        (None, None) => bail!(
            "{source}: {}: the record names no environment (an `env` field; `env replay` takes --env NAME)",
            run.location
        ),
    };
    let sanitized = envsim_exec::envscaler::sanitize(&wanted);
    packages
        .iter()
        .find(|p| p.manifest.name == wanted)
        .or_else(|| packages.iter().find(|p| p.manifest.name == sanitized))
        .ok_or_else(|| {
            let names: Vec<&str> = packages.iter().map(|p| p.manifest.name.as_str()).collect();
            anyhow!(
                "{source}: {}: no environment {wanted:?} (have: {})",
                run.location,
                names.join(", ")
            )
        })
}

/// A package state by index, file name, file stem, or the task id an imported state file is
/// named after (`003_<task>.json`).
pub fn package_state<'a>(package: &'a EnvPackage, key: &str) -> Option<(&'a str, &'a Value)> {
    if let Ok(index) = key.parse::<usize>() {
        return package.states.get(index).map(|(n, s)| (n.as_str(), s));
    }
    state_named(package, key)
}

/// A package state by file name, file stem, or the task id it is named after.
fn state_named<'a>(package: &'a EnvPackage, key: &str) -> Option<(&'a str, &'a Value)> {
    let sanitized = envsim_exec::envscaler::sanitize(key);
    package
        .states
        .iter()
        .find(|(name, _)| {
            let stem = name.strip_suffix(".json").unwrap_or(name);
            let task = stem
                .split_once('_')
                .filter(|(n, _)| n.chars().all(|c| c.is_ascii_digit()))
                .map(|(_, t)| t);
            name == key || stem == key || task == Some(key) || task == Some(sanitized.as_str())
        })
        .map(|(n, s)| (n.as_str(), s))
}

/// Where a run's first state is: one of its package's states (by index: the package holds it,
/// so a run from a 3 MB database needs no copy), or a state of its own.
enum Start {
    Package(usize),
    Given(Value),
}

impl Start {
    /// The package state named `name` (a name [`package_state`] or [`state_named`] returned).
    fn of_package(package: &EnvPackage, name: &str) -> Start {
        Start::Package(
            package
                .states
                .iter()
                .position(|(n, _)| n == name)
                .unwrap_or_default(),
        )
    }

    /// The state itself.
    fn state<'a>(&'a self, package: &'a EnvPackage) -> &'a Value {
        match self {
            Start::Package(i) => &package.states[*i].1,
            Start::Given(state) => state,
        }
    }
}

/// The state a run starts from, and its name.
fn start_state(
    package: &EnvPackage,
    chosen: Option<&str>,
    run: &RecordedRun,
    source: &str,
) -> Result<(String, Start)> {
    if let Some(key) = chosen {
        if let Some((name, _)) = package_state(package, key) {
            return Ok((name.to_owned(), Start::of_package(package, name)));
        }
        let path = Path::new(key);
        if path.is_file() {
            let bytes =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            let value: Value = serde_json::from_slice(&bytes)
                .map_err(|e| anyhow!("{}:{}:{}: {e}", path.display(), e.line(), e.column()))?;
            if !value.is_object() {
                bail!("{}: the state must be a JSON object", path.display());
            }
            return Ok((path.display().to_string(), Start::Given(value)));
        }
        bail!(
            "--state {key:?}: not an index of {}'s {} states, not one of its state names, and not a file",
            package.manifest.name,
            package.states.len()
        );
    }
    if let Some(state) = &run.initial_state {
        return Ok((
            format!("{source} {}", run.location),
            Start::Given(state.clone()),
        ));
    }
    if let Some(key) = &run.state {
        return match package_state(package, key) {
            Some((name, _)) => Ok((name.to_owned(), Start::of_package(package, name))),
            None => bail!(
                "{source}: {}: the record starts from the state {key:?}, which {} does not have (its states: {})",
                run.location,
                package.manifest.name,
                package
                    .states
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
    }
    // By name only: a record without a task id is numbered by position, which is no state.
    if let Some((name, _)) = state_named(package, &run.task_id) {
        return Ok((name.to_owned(), Start::of_package(package, name)));
    }
    bail!(
        "{source}: {}: the record holds no initial state and {} has no state named after task {:?} (`env replay` takes --state N|NAME|FILE)",
        run.location,
        package.manifest.name,
        run.task_id
    )
}

/// What a replay starts from, beyond the records.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReplayChoice<'a> {
    /// The package for every run (else each record's own).
    pub env: Option<&'a str>,
    /// The initial state for every run (else each record's own, else the task's).
    pub state: Option<&'a str>,
    /// Run seed.
    pub seed: u64,
    /// Runs replayed at a time.
    pub workers: usize,
    /// Clock of the first step of runs that record none (else the initial state's clock).
    pub clock: Option<f64>,
    /// Seconds between such steps (else the default, five minutes).
    pub clock_step: Option<f64>,
}

/// The clock a run starts at when its steps record none: the package state's own clock when
/// it starts from one, else the clock derived from the state it starts from.
fn start_clock(package: &EnvPackage, name: &str, state: &Value) -> f64 {
    match package.states.iter().position(|(n, _)| n == name) {
        Some(index) => package.clock(index).seconds,
        None => {
            envsim_exec::package::StateClock::of_state(state, envsim_exec::DEFAULT_CLOCK).seconds
        }
    }
}

/// Replays `runs` on the executor's workers (runs in parallel, each run's steps in order); the
/// result keeps the runs' order.
pub async fn replay_runs(
    executor: Arc<Executor>,
    packages: &[EnvPackage],
    runs: &[RecordedRun],
    source: &str,
    choice: ReplayChoice<'_>,
) -> Result<Vec<ReplayedRun>> {
    let workers = choice.workers;
    // One shared copy of each package, whose states the runs start from: a job per run must
    // not hold its own copy of a 3 MB database (parsed, about ten times that).
    let shared: Vec<Arc<EnvPackage>> = packages.iter().cloned().map(Arc::new).collect();
    // Everything that can be wrong with the input is found before anything runs.
    let mut jobs = Vec::with_capacity(runs.len());
    for run in runs {
        let package = package_for(packages, choice.env, run, source)?;
        let at = packages
            .iter()
            .position(|p| std::ptr::eq(p, package))
            .unwrap_or_default();
        let (name, start) = start_state(package, choice.state, run, source)?;
        let state = start.state(package);
        let defaults = envsim_bench::replay::StepDefaults {
            seed: choice.seed,
            clock_start: choice
                .clock
                .unwrap_or_else(|| start_clock(package, &name, state)),
            clock_step: choice
                .clock_step
                .unwrap_or(envsim_core::clock::DEFAULT_CLOCK_STEP),
        };
        jobs.push((Arc::clone(&shared[at]), run.clone(), name, start, defaults));
    }
    let distinct = Arc::new(envsim_bench::replay::SharedStates::default());
    let progress = indicatif::ProgressBar::new(jobs.len() as u64);
    progress.set_style(
        indicatif::ProgressStyle::with_template("replaying {bar:30} {pos}/{len} runs ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let semaphore = Arc::new(tokio::sync::Semaphore::new(workers.max(1)));
    let mut handles = Vec::with_capacity(jobs.len());
    for (walk, (package, run, name, start, defaults)) in jobs.into_iter().enumerate() {
        let (executor, semaphore, bar, distinct) = (
            Arc::clone(&executor),
            Arc::clone(&semaphore),
            progress.clone(),
            Arc::clone(&distinct),
        );
        handles.push(tokio::spawn(async move {
            let _permit = semaphore
                .acquire()
                .await
                .map_err(|_| envsim_exec::ExecError::Spawn("the replay was stopped".into()))?;
            let state = start.state(&package);
            let result = replay_run(&executor, &package, &run, state, &name, defaults, walk)
                .await
                .map(|mut replayed| {
                    distinct.share(&mut replayed);
                    replayed
                });
            bar.inc(1);
            result
        }));
    }
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(
            handle
                .await
                .map_err(|e| anyhow!("a replay task failed: {e}"))??,
        );
    }
    progress.finish_and_clear();
    Ok(out)
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
                    envsim_bench::collect::action_key(&s.transition.action),
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

/// Writes each run as a JSON line and drops it, gathering the summary: the replayed states are
/// never held as one text (a τ² airline replay writes 326 MB).
fn write_runs(
    out: &mut impl std::io::Write,
    replayed: Vec<ReplayedRun>,
    summary: &mut ReplaySummary,
) -> Result<()> {
    for run in replayed {
        serde_json::to_writer(&mut *out, &run.to_json())?;
        out.write_all(b"\n")?;
        summary.add(&run);
    }
    out.flush()?;
    Ok(())
}

/// `envsim env replay`.
pub async fn run(root: &crate::env_cmd::Corpus, a: ReplayArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.file)
        .with_context(|| format!("cannot read {}", a.file.display()))?;
    let source = a.file.display().to_string();
    let runs = read_runs(&text, &source, a.format.format())?;
    if runs.is_empty() {
        bail!("{source}: no recorded runs");
    }
    let packages = match &a.env {
        Some(name) => vec![root.load(name)?],
        None => root.load_all()?,
    };
    let executor = Arc::new(Executor::new(a.workers, crate::env_cmd::exec_limits()?).await?);
    let replayed = replay_runs(
        executor,
        &packages,
        &runs,
        &source,
        ReplayChoice {
            env: a.env.as_deref(),
            state: a.state.as_deref(),
            seed: a.seed,
            workers: a.workers,
            clock: a.clock,
            clock_step: Some(a.clock_step),
        },
    )
    .await?;
    let mut summary = ReplaySummary::default();
    let runs = replayed.len();
    match &a.out {
        Some(path) => {
            let file = envsim_fs::AtomicFile::create(path)?;
            write_runs(
                &mut std::io::BufWriter::new(file.as_file()),
                replayed,
                &mut summary,
            )
            .with_context(|| format!("cannot write {}", path.display()))?;
            file.commit()?;
        }
        None => write_runs(
            &mut std::io::BufWriter::new(std::io::stdout().lock()),
            replayed,
            &mut summary,
        )?,
    }
    let total = summary.print(&source);
    if let Some(path) = &a.out {
        eprintln!("wrote {runs} replayed runs to {}", path.display());
    }
    if total.differs > 0 && !a.allow_differences {
        bail!(
            "{} of {} replayed steps differ from the recording (listed above; the trajectories were written; --allow-differences exits 0)",
            total.differs,
            total.total()
        );
    }
    Ok(())
}

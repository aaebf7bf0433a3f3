//! Replaying many recorded runs at once (`env replay`, `bench build --trajectories`, the
//! audit's `--replay` and its validation on workflows): each run's package and initial state
//! found from the choices and the record, then the runs replayed in parallel on the executor.

use super::{replay_run, ReplayedRun, SharedStates, StepDefaults};
use crate::trajectories::RecordedRun;
use envsim_exec::package::EnvPackage;
use envsim_exec::{ExecError, Executor};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// Why runs cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The input (a record, a choice, a state file), with its place.
    #[error("{0}")]
    Input(String),
    /// The sandbox.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// A replay task stopped without an answer.
    #[error("a replay task failed: {0}")]
    Task(String),
}

/// The package a run replays on: `--env`, else the record's environment by name, else by the
/// name `import-envscaler` gives an EnvScaler id.
pub fn package_for<'a>(
    packages: &'a [EnvPackage],
    chosen: Option<&str>,
    run: &RecordedRun,
    source: &str,
) -> Result<&'a EnvPackage, ReplayError> {
    let wanted = match (chosen, run.env.as_deref()) {
        (Some(name), _) => name.to_owned(),
        (None, Some(env)) => env.to_owned(),
        (None, None) => {
            return Err(ReplayError::Input(format!(
                "{source}: {}: the record names no environment (an `env` field; `env replay` takes --env NAME)",
                run.location
            )))
        }
    };
    let sanitized = envsim_exec::envscaler::sanitize(&wanted);
    packages
        .iter()
        .find(|p| p.manifest.name == wanted)
        .or_else(|| packages.iter().find(|p| p.manifest.name == sanitized))
        .ok_or_else(|| {
            let names: Vec<&str> = packages.iter().map(|p| p.manifest.name.as_str()).collect();
            ReplayError::Input(format!(
                "{source}: {}: no environment {wanted:?} (have: {})",
                run.location,
                names.join(", ")
            ))
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
) -> Result<(String, Start), ReplayError> {
    if let Some(key) = chosen {
        if let Some((name, _)) = package_state(package, key) {
            return Ok((name.to_owned(), Start::of_package(package, name)));
        }
        let path = Path::new(key);
        if path.is_file() {
            let bytes = std::fs::read(path)
                .map_err(|e| ReplayError::Input(format!("cannot read {}: {e}", path.display())))?;
            let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
                ReplayError::Input(format!(
                    "{}:{}:{}: {e}",
                    path.display(),
                    e.line(),
                    e.column()
                ))
            })?;
            if !value.is_object() {
                return Err(ReplayError::Input(format!(
                    "{}: the state must be a JSON object",
                    path.display()
                )));
            }
            return Ok((path.display().to_string(), Start::Given(value)));
        }
        return Err(ReplayError::Input(format!(
            "--state {key:?}: not an index of {}'s {} states, not one of its state names, and not a file",
            package.manifest.name,
            package.states.len()
        )));
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
            None => Err(ReplayError::Input(format!(
                "{source}: {}: the record starts from the state {key:?}, which {} does not have (its states: {})",
                run.location,
                package.manifest.name,
                package
                    .states
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        };
    }
    // By name only: a record without a task id is numbered by position, which is no state.
    if let Some((name, _)) = state_named(package, &run.task_id) {
        return Ok((name.to_owned(), Start::of_package(package, name)));
    }
    Err(ReplayError::Input(format!(
        "{source}: {}: the record holds no initial state and {} has no state named after task {:?} (`env replay` takes --state N|NAME|FILE)",
        run.location,
        package.manifest.name,
        run.task_id
    )))
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
/// result keeps the runs' order. Every input is checked before anything runs;
/// `progress(done, total)` hears of each run replayed.
pub async fn replay_runs(
    executor: Arc<Executor>,
    packages: &[EnvPackage],
    runs: &[RecordedRun],
    source: &str,
    choice: ReplayChoice<'_>,
    progress: impl Fn(usize, usize) + Send + Sync + 'static,
) -> Result<Vec<ReplayedRun>, ReplayError> {
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
        let defaults = StepDefaults {
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
    let distinct = Arc::new(SharedStates::default());
    let total = jobs.len();
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let progress = Arc::new(progress);
    progress(0, total);
    let semaphore = Arc::new(tokio::sync::Semaphore::new(workers.max(1)));
    let mut handles = Vec::with_capacity(jobs.len());
    for (walk, (package, run, name, start, defaults)) in jobs.into_iter().enumerate() {
        let (executor, semaphore, progress, done, distinct) = (
            Arc::clone(&executor),
            Arc::clone(&semaphore),
            Arc::clone(&progress),
            Arc::clone(&done),
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
            progress(
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
                total,
            );
            result
        }));
    }
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(
            handle
                .await
                .map_err(|e| ReplayError::Task(e.to_string()))??,
        );
    }
    Ok(out)
}

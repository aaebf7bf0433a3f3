//! # envsim-explore
//!
//! The one way envsim explores an environment: everything that learns from or samples a
//! package's behaviour — the audit's learned effects, the gate's sampled calls, `env check`'s
//! coverage, `bench build`'s collection, `synth`'s walk tasks — runs [`explore`].
//!
//! Random arguments rarely meet a tool's preconditions, so random walks see the cheap calls and
//! miss the ones that matter. The guided strategy ([`plan::Strategy::Guided`]) draws arguments
//! from the state's records and what they reference, from what earlier answers returned or
//! created, and from schema enums ([`driver`]); reads a refusal's words against the state to
//! meet its precondition and try again ([`refusal`]); and keeps the call sequences that reached
//! new branches of the environment's code (reported by the sandbox, [`envsim_exec::coverage`])
//! as seeds to extend, as a fuzzer keeps inputs — on calls instead of bytes — until the budget
//! is spent or nothing new comes. The package's scripted tests and its tasks' planned calls are
//! the first seeds. Same plan, same packages: same exploration.
//!
//! - [`record`]: executed calls ([`record::TransitionRecord`], states as shared text);
//! - [`driver`]: arguments from schemas and state;
//! - [`plan`]: strategy and budget; [`report`]: what was reached ([`report::CoverageReport`]).

mod boundary;
pub mod driver;
mod guided;
pub mod plan;
mod random;
pub mod record;
pub mod refusal;
pub mod report;

use crate::driver::ToolSpec;
use crate::plan::{ExplorePlan, Strategy};
use crate::record::{Probes, StateForm, StateText, TransitionRecord};
use crate::report::{CoverageReport, Stop, Tally};
use envsim_exec::package::EnvPackage;
use envsim_exec::{ExecError, Executor};
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Where a walk continues from: the first `steps` calls of another walk's whole path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The walk (its index in [`PackageExploration::walks`]).
    pub walk: usize,
    /// How many calls of that walk's whole path come before this walk's first call.
    pub steps: usize,
}

/// One sequence of executed calls, each from the state the one before left.
#[derive(Clone, Debug)]
pub struct Walk {
    /// The initial state it comes from (index into the package's states).
    pub state: usize,
    /// Its number, as its records' `walk` field names it.
    pub id: usize,
    /// `None`: it starts at the initial state; else the path it continues (its records'
    /// `step`s count from that path's start).
    pub from: Option<Origin>,
    /// Its own calls, in order.
    pub records: Vec<TransitionRecord>,
}

/// One package explored.
#[derive(Clone, Debug)]
pub struct PackageExploration {
    /// The package.
    pub package: String,
    /// Its walks, in the order they were made.
    pub walks: Vec<Walk>,
    /// What they reached.
    pub report: CoverageReport,
}

impl PackageExploration {
    /// Every executed call once, walk by walk.
    pub fn records(&self) -> impl Iterator<Item = &TransitionRecord> {
        self.walks.iter().flat_map(|w| &w.records)
    }

    /// The whole path of walk `walk` (its index) from its initial state: the calls of the
    /// paths it continues, then its own.
    pub fn path(&self, walk: usize) -> Vec<&TransitionRecord> {
        let Some(this) = self.walks.get(walk) else {
            return Vec::new();
        };
        let mut out = match this.from {
            Some(origin) if origin.walk < walk => {
                let mut before = self.path(origin.walk);
                before.truncate(origin.steps);
                before
            }
            _ => Vec::new(),
        };
        out.extend(&this.records);
        out
    }
}

/// An exploration of several packages.
#[derive(Clone, Debug, Default)]
pub struct Exploration {
    /// In the order the packages were given.
    pub packages: Vec<PackageExploration>,
}

impl Exploration {
    /// Every executed call once: package by package, walk by walk, step by step.
    pub fn into_records(self) -> Vec<TransitionRecord> {
        self.packages
            .into_iter()
            .flat_map(|p| p.walks)
            .flat_map(|w| w.records)
            .collect()
    }

    /// Every walk as its whole path from its initial state (the calls of the paths it
    /// continues repeated before its own), its records' `step`s counting from 0: what needs a
    /// walk to start at a named initial state (tasks made of walks, replays, validations).
    pub fn into_paths(self) -> Vec<TransitionRecord> {
        let mut out = Vec::new();
        for package in &self.packages {
            for (w, walk) in package.walks.iter().enumerate() {
                for (step, record) in package.path(w).into_iter().enumerate() {
                    out.push(TransitionRecord {
                        walk: walk.id,
                        step,
                        ..record.clone()
                    });
                }
            }
        }
        out
    }

    /// At most `per_state` whole paths from each initial state, each cut at `steps` calls:
    /// what needs walks of a given shape (a simulator measured on N walks of M calls). The
    /// guided strategy spends its budget on paths of its own lengths, so the longest are
    /// chosen — ties in the order they were made — and none is the beginning of one already
    /// chosen (it would be the same walk, shorter). A state whose paths are all shorter gives
    /// shorter walks: the caller reports the steps it got, not the steps it asked for.
    pub fn longest_paths(self, per_state: usize, steps: usize) -> Vec<TransitionRecord> {
        let same = |a: &TransitionRecord, b: &TransitionRecord| {
            a.action == b.action && a.observation == b.observation
        };
        let mut out = Vec::new();
        for package in &self.packages {
            let paths: Vec<Vec<&TransitionRecord>> =
                (0..package.walks.len()).map(|w| package.path(w)).collect();
            let states: std::collections::BTreeSet<usize> =
                package.walks.iter().map(|w| w.state).collect();
            for state in states {
                let mut here: Vec<usize> = (0..paths.len())
                    .filter(|w| package.walks[*w].state == state)
                    .collect();
                // Stable: equal lengths stay in the order they were made.
                here.sort_by_key(|w| std::cmp::Reverse(paths[*w].len().min(steps)));
                let mut chosen: Vec<&[&TransitionRecord]> = Vec::new();
                for w in here {
                    if chosen.len() >= per_state {
                        break;
                    }
                    let cut = &paths[w][..paths[w].len().min(steps)];
                    let repeated = chosen.iter().any(|c| {
                        c.len() >= cut.len() && c.iter().zip(cut).all(|(a, b)| same(a, b))
                    });
                    if repeated {
                        continue;
                    }
                    for (step, record) in cut.iter().enumerate() {
                        out.push(TransitionRecord {
                            walk: package.walks[w].id,
                            step,
                            ..(*record).clone()
                        });
                    }
                    chosen.push(cut);
                }
            }
        }
        out
    }

    /// The coverage reports, in package order.
    pub fn reports(&self) -> Vec<&CoverageReport> {
        self.packages.iter().map(|p| &p.report).collect()
    }
}

/// An initial state a package's walks start from.
pub(crate) struct Start {
    pub(crate) name: String,
    /// Its clock: every path from it starts there.
    pub(crate) clock: f64,
    pub(crate) value: Arc<Value>,
    pub(crate) form: StateForm,
    pub(crate) text: StateText,
}

/// What exploring one package works with.
pub(crate) struct Context<'a> {
    pub(crate) executor: &'a Executor,
    pub(crate) package: &'a EnvPackage,
    pub(crate) plan: &'a ExplorePlan,
    /// The tools with their schemas, in manifest order.
    pub(crate) tools: Vec<(ToolSpec, Value)>,
    pub(crate) starts: Vec<Start>,
    pub(crate) tally: Tally,
    /// Told of every call spent.
    pub(crate) tick: &'a (dyn Fn() + Send + Sync),
}

impl Context<'_> {
    /// What every call records beside itself.
    pub(crate) fn probes(&self) -> Probes {
        Probes {
            twin: self.plan.twin,
            coverage: true,
        }
    }
}

/// The initial states of `package`, constructed: walks start from the instance's state, not
/// the raw file (which may lack attributes the constructor creates). When the constructor
/// fails on a state, every call fails the same way: its walks record those failures from the
/// file.
async fn starts(executor: &Executor, package: &EnvPackage) -> Result<Vec<Start>, ExecError> {
    let mut out = Vec::with_capacity(package.states.len());
    for (index, (name, raw)) in package.states.iter().enumerate() {
        // Every walk of a state starts at the state's own clock, so what the tools stamp comes
        // after what the state already records.
        let clock = package.clock(index).seconds;
        let value = match executor.construct(&package.code, raw, 0, clock).await {
            Ok(state) => state,
            Err(e @ (ExecError::Spawn(_) | ExecError::Protocol(_))) => return Err(e),
            Err(_) => raw.clone(),
        };
        let value = Arc::new(value);
        let form = StateForm::for_initial(&value);
        let text = form.text(&value);
        out.push(Start {
            name: name.clone(),
            clock,
            value,
            form,
            text,
        });
    }
    Ok(out)
}

/// Explores one package as `plan` says; `tick` hears of every call spent.
pub async fn explore_package(
    executor: &Executor,
    package: &EnvPackage,
    plan: &ExplorePlan,
    tick: &(dyn Fn() + Send + Sync),
) -> Result<PackageExploration, ExecError> {
    let started = std::time::Instant::now();
    let names = package.manifest.tool_names();
    let budget = plan.budget(package.states.len());
    // A package whose code does not load explores without coverage (its calls fail alike).
    let map = match executor.code_map(&package.code).await {
        Ok(map) => Some(map),
        Err(e @ (ExecError::Spawn(_) | ExecError::Protocol(_))) => return Err(e),
        Err(_) => None,
    };
    let mut cx = Context {
        executor,
        package,
        plan,
        tools: package
            .manifest
            .tools
            .iter()
            .filter_map(|t| ToolSpec::from_schema(t).map(|s| (s, t.clone())))
            .collect(),
        starts: starts(executor, package).await?,
        tally: Tally::new(&names, map, budget),
        tick,
    };
    let (walks, stop) = match plan.strategy {
        Strategy::Random => (random::walk(&mut cx).await?, Stop::Budget),
        Strategy::Guided => guided::explore(&mut cx, budget).await?,
    };
    let report = cx.tally.finish(
        &package.manifest.name,
        plan.strategy,
        budget,
        stop,
        started.elapsed().as_secs_f64(),
    );
    Ok(PackageExploration {
        package: package.manifest.name.clone(),
        walks,
        report,
    })
}

/// Explores every package, `concurrency` packages at a time. The result is in package order
/// whatever the concurrency, and the same inputs always give the same exploration.
/// `progress(done, total)` hears of the calls spent against the budget of them all.
pub async fn explore(
    executor: Arc<Executor>,
    packages: Arc<Vec<EnvPackage>>,
    plan: ExplorePlan,
    concurrency: usize,
    progress: impl Fn(usize, usize) + Send + Sync + 'static,
) -> Result<Exploration, ExecError> {
    let total: usize = packages.iter().map(|p| plan.budget(p.states.len())).sum();
    let semaphore = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let plan = Arc::new(plan);
    let progress = Arc::new(progress);
    let done = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(packages.len());
    for p in 0..packages.len() {
        let (executor, packages, plan, semaphore, progress, done) = (
            Arc::clone(&executor),
            Arc::clone(&packages),
            Arc::clone(&plan),
            Arc::clone(&semaphore),
            Arc::clone(&progress),
            Arc::clone(&done),
        );
        handles.push(tokio::spawn(async move {
            let _permit = semaphore
                .acquire()
                .await
                .map_err(|_| ExecError::Spawn("stopped".into()))?;
            let tick = move || progress(done.fetch_add(1, Ordering::SeqCst) + 1, total);
            explore_package(&executor, &packages[p], &plan, &tick).await
        }));
    }
    let mut out = Exploration::default();
    for handle in handles {
        let explored = handle
            .await
            .map_err(|e| ExecError::Spawn(format!("an exploration task failed: {e}")))??;
        out.packages.push(explored);
    }
    Ok(out)
}

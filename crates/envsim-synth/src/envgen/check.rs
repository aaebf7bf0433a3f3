//! The checks a written package must pass in the sandbox before a simulator judges it, each
//! failure a [`Finding`] in words the writer can act on: it loads; its manifest and code agree;
//! its scripted tests pass; the same call gives the same answer (no randomness the sandbox does
//! not seed, no answer that depends on the order of a set); its clocks are sane; seeded walks
//! reach every tool, each tool succeeds at least once and refuses deliberately bad input; it
//! has three initial states and tasks for agents.

use crate::task::read_tasks;
use envsim_exec::package::EnvPackage;
use envsim_exec::{Call, ExecError, Executor};
use envsim_explore::driver::Intent;
use envsim_explore::plan::ExplorePlan;
use envsim_explore::record::Outcome;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Which check a finding comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckKind {
    /// The writer's answer is not a set of package files.
    Files,
    /// The package does not load (manifest, states, code).
    Loads,
    /// The manifest's tool schemas and the code's signatures disagree.
    ManifestCode,
    /// Scripted tests fail, or there are none.
    Tests,
    /// Fewer initial states than asked for.
    States,
    /// The same call answers differently.
    Determinism,
    /// A state's clock is not sane.
    Clocks,
    /// Walks do not reach a tool, it never succeeds, or it accepts bad input.
    Coverage,
    /// `tasks.jsonl` is missing or does not read.
    Tasks,
    /// The simulator gate rejected the package.
    Gate,
}

impl CheckKind {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            CheckKind::Files => "files",
            CheckKind::Loads => "loads",
            CheckKind::ManifestCode => "manifest_code",
            CheckKind::Tests => "tests",
            CheckKind::States => "states",
            CheckKind::Determinism => "determinism",
            CheckKind::Clocks => "clocks",
            CheckKind::Coverage => "coverage",
            CheckKind::Tasks => "tasks",
            CheckKind::Gate => "gate",
        }
    }
}

/// One failed check, in words for the writer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The check.
    pub check: CheckKind,
    /// What is wrong (and where).
    pub message: String,
}

impl Finding {
    fn new(check: CheckKind, message: impl Into<String>) -> Self {
        Finding {
            check,
            message: message.into(),
        }
    }
}

/// How a tool fared in the checking walks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ToolCoverage {
    /// The tool.
    pub tool: String,
    /// Calls made.
    pub calls: usize,
    /// Calls that succeeded.
    pub successes: usize,
    /// Deliberately invalid calls made.
    pub invalid_calls: usize,
    /// Of those, the ones refused (a failure, or a raised exception).
    pub invalid_refused: usize,
    /// Calls that raised.
    pub raised: usize,
}

/// What checking a package found.
#[derive(Clone, Debug, Default)]
pub struct PackageCheck {
    /// Every failed check (none: the package passes).
    pub findings: Vec<Finding>,
    /// The walks per tool, in manifest order (empty when the walks did not run).
    pub coverage: Vec<ToolCoverage>,
    /// What the exploration reached (branch outcomes of the code among it), when it ran.
    pub explored: Option<envsim_explore::report::CoverageReport>,
    /// The package, when it loads.
    pub package: Option<EnvPackage>,
}

impl PackageCheck {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.findings.is_empty()
    }
}

/// How a package is checked.
#[derive(Clone, Debug)]
pub struct CheckPlan {
    /// Walks per initial state.
    pub walks: usize,
    /// Calls per walk (raised to two per tool).
    pub steps: usize,
    /// How the coverage check explores.
    pub strategy: envsim_explore::plan::Strategy,
    /// Seed of the walks.
    pub seed: u64,
    /// Concurrent walks.
    pub workers: usize,
    /// Initial states asked for.
    pub min_states: usize,
    /// Calls repeated to check that the same call gives the same answer (scripted steps
    /// first, then walk calls).
    pub repeated_calls: usize,
    /// Whether `tasks.jsonl` is required (a written package must have tasks; one written by
    /// hand for the corpus need not).
    pub require_tasks: bool,
}

impl Default for CheckPlan {
    fn default() -> Self {
        CheckPlan {
            walks: 3,
            steps: 16,
            strategy: envsim_explore::plan::Strategy::Guided,
            seed: 11,
            workers: 2,
            min_states: 3,
            repeated_calls: 24,
            require_tasks: true,
        }
    }
}

/// Checks the package in `dir`. Only a failure of the sandbox itself is an error; everything
/// the package gets wrong is a finding.
pub async fn check_package(
    executor: Arc<Executor>,
    dir: &Path,
    plan: &CheckPlan,
) -> Result<PackageCheck, ExecError> {
    match EnvPackage::load(dir) {
        Ok(package) => check_loaded(executor, package, plan).await,
        Err(e) => Ok(PackageCheck {
            findings: vec![Finding::new(CheckKind::Loads, e.to_string())],
            ..PackageCheck::default()
        }),
    }
}

/// Checks a package that loaded (every check after loading).
pub async fn check_loaded(
    executor: Arc<Executor>,
    package: EnvPackage,
    plan: &CheckPlan,
) -> Result<PackageCheck, ExecError> {
    let mut out = PackageCheck::default();
    let findings = &mut out.findings;
    if package.states.len() < plan.min_states {
        findings.push(Finding::new(
            CheckKind::States,
            format!(
                "{} initial state{}; {} are asked for (small, medium, large)",
                package.states.len(),
                if package.states.len() == 1 { "" } else { "s" },
                plan.min_states
            ),
        ));
    }
    match package.check(&executor).await {
        Ok(problems) => findings.extend(
            problems
                .into_iter()
                .map(|p| Finding::new(CheckKind::ManifestCode, p)),
        ),
        Err(e @ (ExecError::Spawn(_) | ExecError::Protocol(_))) => return Err(e),
        Err(e) => {
            findings.push(Finding::new(
                CheckKind::Loads,
                format!("the code does not load: {e}"),
            ));
            out.package = Some(package);
            return Ok(out);
        }
    }
    findings.extend(
        package
            .clock_warnings()
            .into_iter()
            .map(|w| Finding::new(CheckKind::Clocks, w)),
    );
    if package.tests.is_empty() {
        findings.push(Finding::new(
            CheckKind::Tests,
            "tests.json has no cases: script at least one success and one refusal per tool",
        ));
    } else {
        findings.extend(
            package
                .run_tests(&executor)
                .await
                .into_iter()
                .map(|e| Finding::new(CheckKind::Tests, e)),
        );
    }
    match &package.tasks_jsonl {
        None if !plan.require_tasks => {}
        None => findings.push(Finding::new(
            CheckKind::Tasks,
            "tasks.jsonl is missing: write tasks for agents (one JSON object per line with `instruction`)",
        )),
        Some(text) => match read_tasks(text, "tasks.jsonl", Some(&package.manifest.name), "task") {
            Err(e) => findings.push(Finding::new(CheckKind::Tasks, e.to_string())),
            Ok(tasks) if tasks.is_empty() => {
                findings.push(Finding::new(CheckKind::Tasks, "tasks.jsonl holds no task"))
            }
            Ok(tasks) => {
                let tools = package.manifest.tool_names();
                for task in &tasks {
                    for tool in task.tools.iter().filter(|t| !tools.contains(t)) {
                        findings.push(Finding::new(
                            CheckKind::Tasks,
                            format!("task {}: `tools` names {tool:?}, which is not a tool", task.id),
                        ));
                    }
                }
            }
        },
    }
    // Walks: coverage, and calls to repeat.
    let tools = package.manifest.tool_names();
    let walk = ExplorePlan {
        strategy: plan.strategy,
        walks: plan.walks,
        steps: plan.steps.max(2 * tools.len()),
        seed: plan.seed,
        ..ExplorePlan::default()
    };
    let explored = envsim_explore::explore_package(&executor, &package, &walk, &|| {}).await?;
    let records: Vec<_> = explored.records().cloned().collect();
    out.explored = Some(explored.report);
    let mut coverage: BTreeMap<&str, ToolCoverage> = BTreeMap::new();
    for r in &records {
        let tool = r.action["name"].as_str().unwrap_or_default();
        let c = coverage.entry(tool).or_insert_with(|| ToolCoverage {
            tool: tool.to_owned(),
            ..ToolCoverage::default()
        });
        c.calls += 1;
        c.successes += usize::from(r.outcome == Outcome::Success);
        c.raised += usize::from(r.outcome == Outcome::Exception);
        if r.intent == Intent::Invalid {
            c.invalid_calls += 1;
            c.invalid_refused +=
                usize::from(matches!(r.outcome, Outcome::Failure | Outcome::Exception));
        }
    }
    // What the scripted tests show of each tool (they passed, or their failures are findings
    // already): a step expecting success, a step expecting a refusal.
    let mut scripted: BTreeMap<&str, (bool, bool)> = BTreeMap::new();
    for step in package.tests.iter().flat_map(|c| &c.steps) {
        let shown = scripted.entry(step.tool.as_str()).or_default();
        match step.expect.success {
            Some(true) => shown.0 = true,
            Some(false) => shown.1 = true,
            None => {}
        }
    }
    // Tools with required parameters are the ones that can be given bad input (a listing with
    // optional filters answers an empty list, rightly).
    let takes_input: std::collections::BTreeSet<String> = (package.manifest.tools.iter())
        .filter(|t| {
            t.pointer("/function/parameters/required")
                .and_then(serde_json::Value::as_array)
                .is_some_and(|r| !r.is_empty())
        })
        .filter_map(|t| {
            t.pointer("/function/name")
                .and_then(serde_json::Value::as_str)
        })
        .map(str::to_owned)
        .collect();
    // Raising is a fault only where nothing turns the exception into an answer: a package whose
    // harness renders exceptions (BFCL's imports) answers them like any failure.
    let raising_is_a_fault = package.code.convention == envsim_exec::Convention::Class
        && package.code.errors.exception.is_none();
    for tool in &tools {
        let (scripted_success, scripted_refusal) =
            scripted.get(tool.as_str()).copied().unwrap_or_default();
        let Some(c) = coverage.remove(tool.as_str()) else {
            if !scripted_success {
                findings.push(Finding::new(
                    CheckKind::Coverage,
                    format!("{tool}: the walks never called it and no scripted test shows it succeed (do its parameters' schemas say what values to give?)"),
                ));
            }
            continue;
        };
        if c.successes == 0 && !scripted_success {
            findings.push(Finding::new(
                CheckKind::Coverage,
                format!("{tool}: none of {} calls in the walks succeeded and no scripted test shows it succeed (do the states hold what its preconditions need?)", c.calls),
            ));
        }
        if takes_input.contains(tool)
            && c.invalid_calls >= 2
            && c.invalid_refused == 0
            && !scripted_refusal
        {
            findings.push(Finding::new(
                CheckKind::Coverage,
                format!("{tool}: accepted all {} deliberately invalid calls (unknown ids, wrong values) and no scripted test shows it refuse: it must refuse bad input with a failure", c.invalid_calls),
            ));
        }
        if raising_is_a_fault && c.raised > 0 {
            findings.push(Finding::new(
                CheckKind::Coverage,
                format!("{tool}: raised on {} of {} calls: tools of the class convention validate and answer {{\"success\": false, \"error\": ...}} instead", c.raised, c.calls),
            ));
        }
        out.coverage.push(c);
    }
    // The same call twice, same seed and clock: the same answer.
    let mut repeated = Vec::new();
    for case in &package.tests {
        let Some((_, state)) = package.states.get(case.state) else {
            continue;
        };
        for step in case.steps.iter().take(1) {
            repeated.push((
                step.tool.clone(),
                step.args.clone(),
                state.clone(),
                1u64,
                package.clock(case.state).seconds,
            ));
        }
    }
    for r in &records {
        let args = r.action["arguments"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let tool = r.action["name"].as_str().unwrap_or_default().to_owned();
        repeated.push((tool, args, r.config_before.value(), r.seed, r.clock));
    }
    let mut flagged = std::collections::BTreeSet::new();
    for (tool, args, state, seed, clock) in repeated.into_iter().take(plan.repeated_calls) {
        if flagged.contains(&tool) {
            continue;
        }
        let call = Call {
            seed,
            clock,
            ..Call::new(&package.code, &tool, &args, &state)
        };
        let (Ok(first), Ok(second)) = (executor.call(&call).await, executor.call(&call).await)
        else {
            continue;
        };
        let differs = first.differences(&second);
        if !differs.is_empty() {
            findings.push(Finding::new(
                CheckKind::Determinism,
                format!("{tool}: the same call (same state, arguments, seed and clock) answered differently at {}: use only time, datetime, random and uuid, which the sandbox freezes and seeds", differs.join(", ")),
            ));
            flagged.insert(tool);
        }
    }
    out.package = Some(package);
    Ok(out)
}

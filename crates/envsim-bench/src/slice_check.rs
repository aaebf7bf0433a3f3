//! The prompt-slicing oracle and prompt sizes on a benchmark (`envsim bench slice-check`).
//!
//! For every sample the call is executed on the full state with footprint tracing
//! ([`check`]); then
//! - the **oracle**: the static state slice ([`envsim_core::slice`]) must hold every traced read
//!   with the full state's value or absence ([`slice_covers`]), and executing the call on the
//!   slice must give the same observation and the same changes (the tracer cannot tell
//!   `self.x` from `len(self.x)`; re-execution catches what that hides when it matters);
//! - **reproduction**: the traced run must give the sample's stored observation and state
//!   after; a sample that does not is reported as not reproducible, not as a slice failure;
//! - **sizes**: the `envsim` prompt, the `envsim-sliced` prompt and the same layout over the
//!   footprint slice (the static code slice with [`slice_with_reads`]'s state), in characters
//!   and in tokens ([`prompt_tokens`] with a pluggable counter; [`estimate_tokens`] by default);
//! - **why tables stay whole**: for each table (top-level key) the static slice keeps whole, the
//!   slicer's reason (`iterated at line 42 (for o in orders.values())`, see
//!   [`envsim_core::slice::TableReason`]).
//!
//! The slicer reads each sample's code in its convention ([`SliceJob::convention`]).
//!
//! [`report`] aggregates the per-sample [`SampleCheck`]s into a [`SliceReport`] (the JSON the
//! CLI prints). Reading files, loading a tokenizer and rendering stay in the CLI.

use envsim_core::diff::{changes_to_json, fine_diff, PathStyle};
use envsim_core::formats::Record;
use envsim_core::prompt::{envsim_sliced_prompt, sliced_prompt, Prompt, Template};
use envsim_core::sample::Transition;
use envsim_core::slice::{
    slice_code_as, slice_covers, slice_state, slice_with_reads, Convention, TableReason,
};
use envsim_core::stats::{mean, percentile};
use envsim_exec::package::EnvPackage;
use envsim_exec::{Call, CallOutcome, EnvCode, ExecError, Executor};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Context budgets (prompt tokens) the report counts prompts within.
pub const BUDGETS: [usize; 4] = [4096, 8192, 16384, 32768];

/// Why the samples of a benchmark cannot be checked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SliceCheckError {
    /// A sample carries no code and no package of its environment was given.
    #[error("sample {sample}: no code in the benchmark and no package {env:?}")]
    NoCode {
        /// Sample id.
        sample: String,
        /// Its environment id ("" when unknown).
        env: String,
    },
    /// A sample carries code but neither it nor a package names the class to instantiate.
    #[error("sample {sample}: the class name is unknown")]
    UnknownClass {
        /// Sample id.
        sample: String,
    },
    /// A sample's `convention` field is not `class` or `database`.
    #[error("sample {sample}: field convention is {value}, expected \"class\" or \"database\"")]
    BadConvention {
        /// Sample id.
        sample: String,
        /// The field's value, as JSON.
        value: String,
    },
    /// A check task ended without a result (it panicked or was cancelled).
    #[error("a check task failed: {0}")]
    TaskFailed(String),
}

/// One sample to check: the transition and how to execute it.
#[derive(Clone, Debug)]
pub struct SliceJob {
    /// The sample.
    pub transition: Transition,
    /// The environment code and class to run it with.
    pub code: EnvCode,
    /// Seed of the call (the record's `seed`, else 0).
    pub seed: u64,
    /// Frozen clock of the call (the record's `clock`, else the executor's default).
    pub clock: f64,
    /// How the code is written, for the slicer (the record's `convention`, else
    /// [`Convention::Class`], under which a tool that only a module-level function defines is
    /// read in the database convention).
    pub convention: Convention,
}

/// The jobs for a benchmark's transitions: the code comes from the sample (`env_code`, with
/// the record's `class_name` or the package's class) or else from the package named by its
/// `env_id`; `seed`, `clock` and `convention` from the step or its record. `records` are the
/// file's records ([`envsim_core::formats::records`]) that the transitions were read from.
pub fn jobs(
    transitions: Vec<Transition>,
    records: &[Record],
    packages: &HashMap<String, EnvPackage>,
) -> Result<Vec<SliceJob>, SliceCheckError> {
    let mut codes = HashMap::new();
    transitions
        .into_iter()
        .map(|t| {
            let record = records
                .get(t.origin.record)
                .map(|r| &r.value)
                .unwrap_or(&Value::Null);
            job(t, record, packages, &mut codes)
        })
        .collect()
}

/// The job of one transition read from `record` (the file's record it came from; its states
/// are not needed). `codes` shares one [`EnvCode`] per (code, class, convention) between jobs.
pub fn job(
    t: Transition,
    record: &Value,
    packages: &HashMap<String, EnvPackage>,
    codes: &mut HashMap<(String, String, Convention), EnvCode>,
) -> Result<SliceJob, SliceCheckError> {
    let step = match t.origin.step {
        Some(k) => &record["trajectory"][k],
        None => record,
    };
    let field = |key: &str| step.get(key).or_else(|| record.get(key));
    let env = t.env_id.clone().unwrap_or_default();
    let package = packages.get(&env);
    // How the code is written: the record says so (`convention`, written for the database
    // convention only), else the package, else the reference's class convention.
    let convention = match field("convention") {
        None => package.map(|p| p.manifest.convention).unwrap_or_default(),
        Some(v) => v.as_str().and_then(Convention::parse).ok_or_else(|| {
            SliceCheckError::BadConvention {
                sample: t.id.clone(),
                value: v.to_string(),
            }
        })?,
    };
    let (source, class_name) = if t.env_code.is_empty() {
        let p = package.ok_or_else(|| SliceCheckError::NoCode {
            sample: t.id.clone(),
            env: env.clone(),
        })?;
        (p.code.code.to_string(), p.manifest.class_name.clone())
    } else {
        let class = field("class_name")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| package.map(|p| p.manifest.class_name.clone()))
            .or_else(|| (convention == Convention::Database).then(String::new))
            .ok_or_else(|| SliceCheckError::UnknownClass {
                sample: t.id.clone(),
            })?;
        (t.env_code.clone(), class)
    };
    let code = codes
        .entry((source.clone(), class_name.clone(), convention))
        .or_insert_with(|| EnvCode::with_convention(source, class_name, convention))
        .clone();
    Ok(SliceJob {
        convention,
        seed: field("seed").and_then(Value::as_u64).unwrap_or(0),
        clock: field("clock")
            .and_then(Value::as_f64)
            .unwrap_or(envsim_exec::DEFAULT_CLOCK),
        transition: t,
        code,
    })
}

/// The token estimate used when no tokenizer is plugged in: characters / 4, rounded up.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// Tokens of a prompt's two messages under `count` (a real tokenizer can be plugged in here).
pub fn prompt_tokens(prompt: &Prompt, count: &dyn Fn(&str) -> usize) -> usize {
    count(&prompt.system) + count(&prompt.user)
}

/// Characters of a prompt's two messages.
pub fn prompt_chars(prompt: &Prompt) -> usize {
    prompt.system.chars().count() + prompt.user.chars().count()
}

/// One value per prompt variant: the whole code and state (`envsim`), the static slice
/// (`envsim-sliced`) and the footprint slice (static code slice, traced state).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Variants<T> {
    /// The `envsim` prompt: whole code, whole state.
    pub full: T,
    /// The `envsim-sliced` prompt: static code and state slices.
    pub sliced: T,
    /// The static code slice with the state cut down to what the call read.
    pub footprint: T,
}

impl<T> Variants<T> {
    /// Applies `f` to each variant.
    pub fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> Variants<U> {
        Variants {
            full: f(&self.full),
            sliced: f(&self.sliced),
            footprint: f(&self.footprint),
        }
    }
}

/// Characters of the two varying parts of a prompt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Parts {
    /// Characters of the code shown.
    pub code: usize,
    /// Characters of the state shown, as indented JSON.
    pub state: usize,
}

/// Which sample a report entry is about.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SampleRef {
    /// Sample id.
    pub id: String,
    /// Environment id ("" when unknown).
    pub env: String,
    /// Tool called.
    pub tool: String,
}

/// What part of a stored sample its re-execution does not reproduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Differs {
    /// The observation (`str()` of the return value).
    #[serde(rename = "observation")]
    Observation,
    /// The state after the call.
    #[serde(rename = "state after")]
    StateAfter,
}

impl Differs {
    /// The name in the report (`observation`, `state after`).
    pub fn as_str(self) -> &'static str {
        match self {
            Differs::Observation => "observation",
            Differs::StateAfter => "state after",
        }
    }
}

/// Which part of the oracle a slice failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OracleCheck {
    /// The static slice misses (or changes) a path the traced call read.
    Reads,
    /// Executing the call on the static slice gives another observation or other changes.
    Outcome,
}

impl OracleCheck {
    /// The name in the report (`reads`, `outcome`).
    pub fn as_str(self) -> &'static str {
        match self {
            OracleCheck::Reads => "reads",
            OracleCheck::Outcome => "outcome",
        }
    }
}

/// What checking one sample found ([`check`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SampleCheck {
    /// The sample.
    pub sample: SampleRef,
    /// Why the call could not be executed on the full state (nothing else is then filled in).
    pub error: Option<String>,
    /// What the traced re-execution does not reproduce of the stored sample.
    pub not_reproducible: Option<Differs>,
    /// How the static slice fails the oracle, and the details.
    pub violation: Option<(OracleCheck, String)>,
    /// How executing the call on the footprint slice differs from the full run (informative:
    /// the tracer cannot see every use, see the module docs).
    pub footprint_mismatch: Option<String>,
    /// Why the code slicer fell back to the whole code, when it did.
    pub code_fallback: Option<String>,
    /// The code slice is the whole code.
    pub code_full: bool,
    /// The state slice is the whole state.
    pub state_full: bool,
    /// Why each table the state slice keeps whole is kept whole.
    pub whole_tables: Vec<TableReason>,
    /// The three prompts (`None` when the call could not be executed).
    pub prompts: Option<Variants<Prompt>>,
    /// Characters of code and state in each prompt (`None` likewise).
    pub parts: Option<Variants<Parts>>,
}

impl SampleCheck {
    /// A check of `sample` that found nothing yet.
    pub fn new(sample: SampleRef) -> SampleCheck {
        SampleCheck {
            sample,
            error: None,
            not_reproducible: None,
            violation: None,
            footprint_mismatch: None,
            code_fallback: None,
            code_full: false,
            state_full: false,
            whole_tables: Vec::new(),
            prompts: None,
            parts: None,
        }
    }
}

/// Executes a job's call on `state` (its stored `config_before`, or a slice of it) with the
/// job's seed and clock.
pub async fn execute(
    executor: &Executor,
    job: &SliceJob,
    state: &Value,
    trace: bool,
) -> Result<CallOutcome, ExecError> {
    let t = &job.transition;
    let call = Call {
        seed: job.seed,
        clock: job.clock,
        trace,
        ..Call::new(&job.code, &t.action.name, &t.action.arguments, state)
    };
    executor.call(&call).await
}

/// The changes from `before` to `after`, leaving out those under the top-level keys `skip`.
fn changes(before: &Value, after: &Value, skip: &[&String]) -> Value {
    let kept: Vec<_> = fine_diff(before, after)
        .into_iter()
        .filter(|c| {
            c.pointer
                .tokens()
                .first()
                .is_none_or(|k| !skip.contains(&k))
        })
        .collect();
    changes_to_json(&kept, PathStyle::Pointer)
}

/// How the outcome of a call on a slice differs from the full run's outcome `full` (from the
/// full state `before`), if it does. Keys of `before` that the slice leaves out come back with
/// `__init__`'s defaults after the sliced run and are not compared; the full run must not
/// change them.
pub fn outcome_difference(
    before: &Value,
    full: &CallOutcome,
    slice: &Value,
    on_slice: Result<&CallOutcome, &ExecError>,
) -> Option<String> {
    match on_slice {
        Err(e) => Some(format!("the call fails on the slice: {e}")),
        Ok(o) if o.observation != full.observation => Some(format!(
            "observation {:?} on the slice, {:?} on the full state",
            o.observation, full.observation
        )),
        Ok(o) => {
            let dropped: Vec<&String> = match (before, slice) {
                (Value::Object(b), Value::Object(s)) => {
                    b.keys().filter(|k| !s.contains_key(*k)).collect()
                }
                _ => Vec::new(),
            };
            let (sliced, whole) = (
                changes(slice, &o.state_after, &dropped),
                changes(before, &full.state_after, &[]),
            );
            (sliced != whole)
                .then(|| format!("changes {sliced} on the slice, {whole} on the full state"))
        }
    }
}

/// Executes the call on `slice` and compares with the full run ([`outcome_difference`]).
async fn slice_difference(
    executor: &Executor,
    job: &SliceJob,
    full: &CallOutcome,
    slice: &Value,
) -> Option<String> {
    let on_slice = execute(executor, job, slice, false).await;
    outcome_difference(
        &job.transition.config_before,
        full,
        slice,
        on_slice.as_ref(),
    )
}

/// Checks one sample (see the module docs).
pub async fn check(executor: &Executor, job: &SliceJob) -> SampleCheck {
    let t = &job.transition;
    let mut out = SampleCheck::new(SampleRef {
        id: t.id.clone(),
        env: t.env_id.clone().unwrap_or_default(),
        tool: t.action.name.clone(),
    });
    let full = match execute(executor, job, &t.config_before, true).await {
        Ok(o) => o,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    let stored_observation = match &t.observation {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    out.not_reproducible = if full.observation != stored_observation {
        Some(Differs::Observation)
    } else if full.state_after != t.config_after {
        Some(Differs::StateAfter)
    } else {
        None
    };
    let reads = full.reads.clone().unwrap_or_default();
    let code = slice_code_as(&job.code.code, &t.action.name, job.convention);
    let state = slice_state(&code, &t.action.arguments, &t.config_before);
    out.whole_tables = state.reasons.clone();
    let footprint = slice_with_reads(&t.config_before, &reads);
    out.code_fallback = code.fallback.clone();
    out.code_full = code.full;
    out.state_full = state.full;
    if let Err(path) = slice_covers(&t.config_before, &state.state, &reads) {
        out.violation = Some((OracleCheck::Reads, format!("{path} is not covered")));
    } else if !state.full {
        if let Some(d) = slice_difference(executor, job, &full, &state.state).await {
            out.violation = Some((OracleCheck::Outcome, d));
        }
    }
    out.footprint_mismatch = slice_difference(executor, job, &full, &footprint).await;
    let pretty = |v: &Value| serde_json::to_string_pretty(v).map_or(0, |s| s.chars().count());
    let code_chars = |s: &str| s.chars().count();
    out.parts = Some(Variants {
        full: Parts {
            code: code_chars(&job.code.code),
            state: pretty(&t.config_before),
        },
        sliced: Parts {
            code: code_chars(&code.source),
            state: pretty(&state.state),
        },
        footprint: Parts {
            code: code_chars(&code.source),
            state: pretty(&footprint),
        },
    });
    out.prompts = Some(Variants {
        full: Template::Envsim.render(&job.code.code, &t.config_before, &t.action),
        sliced: envsim_sliced_prompt(&job.code.code, &t.config_before, &t.action, job.convention),
        footprint: sliced_prompt(&code.source, &footprint, &t.action),
    });
    out
}

/// Checks every job on the executor's workers, concurrently; the results come back in job
/// order.
pub async fn check_all(
    executor: Arc<Executor>,
    jobs: Vec<SliceJob>,
) -> Result<Vec<SampleCheck>, SliceCheckError> {
    let handles: Vec<_> = jobs
        .into_iter()
        .map(|job| {
            let executor = Arc::clone(&executor);
            tokio::spawn(async move { check(&executor, &job).await })
        })
        .collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(
            handle
                .await
                .map_err(|e| SliceCheckError::TaskFailed(e.to_string()))?,
        );
    }
    Ok(out)
}

// ------------------------------------------------------------------------------ report

/// Summary statistics of one series (`null` where the series is empty).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    /// Mean, rounded to one decimal.
    pub mean: Option<f64>,
    /// Median (linear interpolation, as NumPy).
    pub median: Option<f64>,
    /// 90th percentile (linear interpolation).
    pub p90: Option<f64>,
    /// Largest value.
    pub max: Option<f64>,
    /// Sum (0 for an empty series).
    pub total: f64,
}

impl Stats {
    /// The statistics of `values`.
    pub fn of(values: &[f64]) -> Stats {
        Stats {
            mean: mean(values).map(|m| (m * 10.0).round() / 10.0),
            median: percentile(values, 50.0),
            p90: percentile(values, 90.0),
            max: values.iter().copied().reduce(f64::max),
            total: values.iter().sum(),
        }
    }
}

/// A sample whose call could not be executed on the full state.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SampleError {
    /// The sample.
    #[serde(flatten)]
    pub sample: SampleRef,
    /// The executor's error.
    pub error: String,
}

/// A sample whose re-execution does not give what the benchmark stores.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NotReproducible {
    /// The sample.
    #[serde(flatten)]
    pub sample: SampleRef,
    /// What differs (the observation is compared first).
    pub differs: Differs,
}

/// A sample whose static slice fails the oracle.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Violation {
    /// The sample.
    #[serde(flatten)]
    pub sample: SampleRef,
    /// Which check failed.
    pub check: OracleCheck,
    /// The uncovered path, or how the outcome differs.
    pub detail: String,
}

/// A sample whose call gives another outcome on the footprint slice than on the full state.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FootprintMismatch {
    /// The sample.
    #[serde(flatten)]
    pub sample: SampleRef,
    /// How the outcome differs.
    pub detail: String,
}

/// Why a sample's state slice keeps some tables whole.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WholeTables {
    /// The sample.
    #[serde(flatten)]
    pub sample: SampleRef,
    /// Each table kept whole and why, sorted by table.
    pub tables: Vec<TableReason>,
}

/// How often the slicers fell back to showing everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Fallbacks {
    /// Samples whose code slicer gave up (whole code and whole state shown).
    pub code: usize,
    /// Executed samples whose code slice is the whole code (a fallback, or everything reachable).
    pub code_whole: usize,
    /// Executed samples whose state slice is the whole state.
    pub state_whole: usize,
    /// Number of code fallbacks per reason.
    pub reasons: BTreeMap<String, usize>,
}

/// Full prompt size over a sliced one, from the totals over all executed samples (two
/// decimals; `null` when the sliced total is 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Ratios {
    /// Full / `envsim-sliced`.
    pub sliced: Option<f64>,
    /// Full / footprint slice.
    pub footprint: Option<f64>,
}

/// The report of `envsim bench slice-check` (its JSON output).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SliceReport {
    /// The benchmark's name (file path or the bundled benchmark's name).
    pub benchmark: String,
    /// Samples checked.
    pub samples: usize,
    /// Samples whose call could be executed (all statistics below are over these).
    pub executed: usize,
    /// Samples that could not be executed.
    pub errors: Vec<SampleError>,
    /// Samples the executor does not reproduce.
    pub not_reproducible: Vec<NotReproducible>,
    /// Oracle violations of the static slice.
    pub violations: Vec<Violation>,
    /// Samples whose footprint slice changes the outcome (informative).
    pub footprint_outcome_mismatches: Vec<FootprintMismatch>,
    /// Fallbacks to the whole code or state.
    pub fallbacks: Fallbacks,
    /// Per executed sample whose state slice keeps some table whole: which, and why.
    pub whole_tables: Vec<WholeTables>,
    /// How tokens were counted (a tokenizer's name, or the estimate).
    pub token_counter: String,
    /// Prompt characters (system and user) per variant.
    pub prompt_chars: Variants<Stats>,
    /// Prompt tokens per variant.
    pub prompt_tokens: Variants<Stats>,
    /// Per context budget ([`BUDGETS`], in tokens): how many prompts of each variant fit.
    pub prompts_within_tokens: BTreeMap<usize, Variants<usize>>,
    /// Characters of the code shown, per variant.
    pub code_chars: Variants<Stats>,
    /// Characters of the state shown (indented JSON), per variant.
    pub state_chars: Variants<Stats>,
    /// Characters of each sliced prompt beyond the prefix its system prompt shares with every
    /// sliced system prompt of the same environment: what a prefix cache cannot save.
    pub sliced_chars_after_shared_prefix: Stats,
    /// Full over sliced prompt characters.
    pub ratio_full_to: Ratios,
}

/// One number per variant from a sample's prompts and parts.
type PerSample<'a> = dyn Fn(&Variants<Prompt>, &Variants<Parts>) -> Variants<f64> + 'a;

fn ratio(full: f64, other: f64) -> Option<f64> {
    (other > 0.0).then(|| ((full / other) * 100.0).round() / 100.0)
}

/// The longest common prefix of `a` and `b`, at a character boundary.
fn common_prefix<'a>(a: &'a str, b: &str) -> &'a str {
    let end = a
        .char_indices()
        .zip(b.chars())
        .find(|((_, x), y)| x != y)
        .map_or(a.len().min(b.len()), |((i, _), _)| i);
    &a[..end]
}

/// The report over the checked samples, with prompt tokens counted by `count`, which
/// `counter_name` describes.
pub fn report(
    name: &str,
    checked: &[SampleCheck],
    count: &dyn Fn(&str) -> usize,
    counter_name: &str,
) -> SliceReport {
    let errors = checked
        .iter()
        .filter_map(|c| {
            Some(SampleError {
                sample: c.sample.clone(),
                error: c.error.clone()?,
            })
        })
        .collect();
    let not_reproducible = checked
        .iter()
        .filter_map(|c| {
            Some(NotReproducible {
                sample: c.sample.clone(),
                differs: c.not_reproducible?,
            })
        })
        .collect();
    let violations = checked
        .iter()
        .filter_map(|c| {
            let (check, detail) = c.violation.clone()?;
            Some(Violation {
                sample: c.sample.clone(),
                check,
                detail,
            })
        })
        .collect();
    let footprint_outcome_mismatches = checked
        .iter()
        .filter_map(|c| {
            Some(FootprintMismatch {
                sample: c.sample.clone(),
                detail: c.footprint_mismatch.clone()?,
            })
        })
        .collect();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for c in checked {
        if let Some(r) = &c.code_fallback {
            *reasons.entry(r.clone()).or_default() += 1;
        }
    }
    // The executed samples with their prompts and parts.
    let done: Vec<(&SampleCheck, &Variants<Prompt>, &Variants<Parts>)> = checked
        .iter()
        .filter_map(|c| Some((c, c.prompts.as_ref()?, c.parts.as_ref()?)))
        .collect();
    let per_variant = |f: &PerSample| {
        let values: Vec<Variants<f64>> = done.iter().map(|(_, p, s)| f(p, s)).collect();
        Variants {
            full: values.iter().map(|v| v.full).collect::<Vec<f64>>(),
            sliced: values.iter().map(|v| v.sliced).collect(),
            footprint: values.iter().map(|v| v.footprint).collect(),
        }
    };
    let chars = per_variant(&|p, _| p.map(|p| prompt_chars(p) as f64));
    let tokens = per_variant(&|p, _| p.map(|p| prompt_tokens(p, count) as f64));
    let code = per_variant(&|_, s| s.map(|s| s.code as f64));
    let state = per_variant(&|_, s| s.map(|s| s.state as f64));
    let prompts_within_tokens = BUDGETS
        .iter()
        .map(|&budget| {
            let fit = |t: &Vec<f64>| t.iter().filter(|&&n| n <= budget as f64).count();
            (budget, tokens.map(fit))
        })
        .collect();
    // What a prefix cache saves: the sliced system prompts of one environment share a prefix
    // (rules, module code, class header, __init__); only the rest must be computed per sample.
    let mut prefix: HashMap<&str, &str> = HashMap::new();
    for (c, p, _) in &done {
        let system = p.sliced.system.as_str();
        let entry = prefix.entry(c.sample.env.as_str()).or_insert(system);
        *entry = common_prefix(entry, system);
    }
    let uncached: Vec<f64> = done
        .iter()
        .map(|(c, p, _)| {
            let shared = prefix
                .get(c.sample.env.as_str())
                .map_or(0, |s| s.chars().count());
            prompt_chars(&p.sliced).saturating_sub(shared) as f64
        })
        .collect();
    let totals = chars.map(|c| c.iter().sum::<f64>());
    SliceReport {
        benchmark: name.to_owned(),
        samples: checked.len(),
        executed: done.len(),
        errors,
        not_reproducible,
        violations,
        footprint_outcome_mismatches,
        fallbacks: Fallbacks {
            code: checked.iter().filter(|c| c.code_fallback.is_some()).count(),
            code_whole: done.iter().filter(|(c, _, _)| c.code_full).count(),
            state_whole: done.iter().filter(|(c, _, _)| c.state_full).count(),
            reasons,
        },
        whole_tables: done
            .iter()
            .filter(|(c, _, _)| !c.whole_tables.is_empty())
            .map(|(c, _, _)| WholeTables {
                sample: c.sample.clone(),
                tables: c.whole_tables.clone(),
            })
            .collect(),
        token_counter: counter_name.to_owned(),
        prompt_chars: chars.map(|v| Stats::of(v)),
        prompt_tokens: tokens.map(|v| Stats::of(v)),
        prompts_within_tokens,
        code_chars: code.map(|v| Stats::of(v)),
        state_chars: state.map(|v| Stats::of(v)),
        sliced_chars_after_shared_prefix: Stats::of(&uncached),
        ratio_full_to: Ratios {
            sliced: ratio(totals.full, totals.sliced),
            footprint: ratio(totals.full, totals.footprint),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envsim_core::formats::{parse_benchmark, records};
    use serde_json::json;

    fn prompt(system: &str, user: &str) -> Prompt {
        Prompt {
            system: system.into(),
            user: user.into(),
        }
    }

    fn sample(id: &str, env: &str) -> SampleRef {
        SampleRef {
            id: id.into(),
            env: env.into(),
            tool: "t".into(),
        }
    }

    /// An executed sample with prompts of the given (system, user) texts.
    fn executed(id: &str, env: &str, prompts: [(&str, &str); 3]) -> SampleCheck {
        let [f, s, p] = prompts.map(|(a, b)| prompt(a, b));
        SampleCheck {
            prompts: Some(Variants {
                full: f,
                sliced: s,
                footprint: p,
            }),
            parts: Some(Variants {
                full: Parts { code: 40, state: 8 },
                sliced: Parts { code: 10, state: 4 },
                footprint: Parts { code: 10, state: 2 },
            }),
            ..SampleCheck::new(sample(id, env))
        }
    }

    #[test]
    fn token_estimate_is_characters_over_four() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens("éééé"), 1);
        let p = prompt("abcd", "ab");
        assert_eq!(prompt_tokens(&p, &estimate_tokens), 2);
        assert_eq!(prompt_tokens(&p, &|s: &str| s.len()), 6);
        assert_eq!(prompt_chars(&prompt("é", "ab")), 3);
    }

    #[test]
    fn stats_of_a_series_and_of_nothing() {
        let s = Stats::of(&[1.0, 2.0, 4.0, 10.0]);
        assert_eq!(s.mean, Some(4.3)); // 4.25, rounded to one decimal
        assert_eq!(s.median, Some(3.0));
        assert_eq!(s.max, Some(10.0));
        assert_eq!(s.total, 17.0);
        let p90 = s.p90.unwrap();
        assert!((p90 - 8.2).abs() < 1e-9, "{p90}");
        assert_eq!(
            serde_json::to_value(Stats::of(&[])).unwrap(),
            json!({"mean": null, "median": null, "p90": null, "max": null, "total": 0.0})
        );
    }

    #[test]
    fn report_aggregates_findings_sizes_and_budgets() {
        let long = "x".repeat(20_000);
        let checked = vec![
            executed(
                "a",
                "shop",
                [
                    ("RULES shop A", "12345678"),
                    ("RULES shop", "1234"),
                    ("RU", "12"),
                ],
            ),
            SampleCheck {
                not_reproducible: Some(Differs::StateAfter),
                violation: Some((OracleCheck::Reads, "/x is not covered".into())),
                footprint_mismatch: Some("changes [] on the slice".into()),
                code_fallback: Some("eval found".into()),
                code_full: true,
                state_full: true,
                ..executed(
                    "b",
                    "shop",
                    [(&long, ""), ("RULES shop B", "1234"), ("RU", "12")],
                )
            },
            SampleCheck {
                error: Some("timeout".into()),
                code_fallback: Some("eval found".into()),
                ..SampleCheck::new(sample("c", "bank"))
            },
        ];
        let r = report("b.json", &checked, &estimate_tokens, "estimate");
        assert_eq!((r.samples, r.executed), (3, 2));
        assert_eq!(r.errors.len(), 1);
        assert_eq!(r.errors[0].sample.id, "c");
        assert_eq!(r.not_reproducible[0].differs, Differs::StateAfter);
        assert_eq!(r.violations[0].check, OracleCheck::Reads);
        assert_eq!(r.footprint_outcome_mismatches.len(), 1);
        assert_eq!(
            r.fallbacks,
            Fallbacks {
                code: 2,
                code_whole: 1,
                state_whole: 1,
                reasons: BTreeMap::from([("eval found".to_owned(), 2)]),
            }
        );
        assert_eq!(r.prompt_chars.full.total, 20.0 + 20_000.0);
        assert_eq!(r.prompt_chars.sliced.max, Some(16.0));
        assert_eq!(r.code_chars.full.total, 80.0);
        assert_eq!(r.state_chars.footprint.mean, Some(2.0));
        // 20 characters are 5 tokens; 20,000 are 5,000: over the two smallest budgets.
        assert_eq!(r.prompt_tokens.full.max, Some(5000.0));
        assert_eq!(
            r.prompts_within_tokens[&4096],
            Variants {
                full: 1,
                sliced: 2,
                footprint: 2
            }
        );
        assert_eq!(r.prompts_within_tokens[&32768].full, 2);
        // The sliced system prompts of `shop` share "RULES shop"; "A"/" B" and the user part
        // remain.
        assert_eq!(
            r.sliced_chars_after_shared_prefix.total,
            (0.0 + 4.0) + (2.0 + 4.0)
        );
        assert_eq!(
            r.ratio_full_to.sliced,
            Some(((20_020.0 / 30.0) * 100.0f64).round() / 100.0)
        );
        assert_eq!(r.ratio_full_to.footprint, Some(20_020.0 / 8.0));
    }

    #[test]
    fn report_json_has_the_cli_shape() {
        let checked = vec![
            SampleCheck {
                violation: Some((OracleCheck::Outcome, "observation differs".into())),
                not_reproducible: Some(Differs::Observation),
                whole_tables: vec![TableReason {
                    table: envsim_core::pointer::JsonPointer::from_tokens(["orders"]),
                    reason: "iterated at line 4 (for o in orders.values():)".into(),
                }],
                ..executed("a", "shop", [("ab", "cd"), ("a", "c"), ("", "")])
            },
            // Not executed: its reasons (none here) would not count.
            SampleCheck::new(sample("b", "shop")),
        ];
        let r = serde_json::to_value(report("f", &checked, &estimate_tokens, "n")).unwrap();
        let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "benchmark",
                "samples",
                "executed",
                "errors",
                "not_reproducible",
                "violations",
                "footprint_outcome_mismatches",
                "fallbacks",
                "whole_tables",
                "token_counter",
                "prompt_chars",
                "prompt_tokens",
                "prompts_within_tokens",
                "code_chars",
                "state_chars",
                "sliced_chars_after_shared_prefix",
                "ratio_full_to",
            ]
        );
        assert_eq!(
            r["violations"],
            json!([{"id": "a", "env": "shop", "tool": "t", "check": "outcome", "detail": "observation differs"}])
        );
        assert_eq!(
            r["not_reproducible"],
            json!([{"id": "a", "env": "shop", "tool": "t", "differs": "observation"}])
        );
        assert_eq!(
            r["whole_tables"],
            json!([{"id": "a", "env": "shop", "tool": "t", "tables": [
                {"table": "/orders", "reason": "iterated at line 4 (for o in orders.values():)"}
            ]}])
        );
        let budgets: Vec<&str> = r["prompts_within_tokens"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(budgets, ["4096", "8192", "16384", "32768"]);
        assert_eq!(
            r["prompts_within_tokens"]["4096"],
            json!({"full": 1, "sliced": 1, "footprint": 1})
        );
        assert_eq!(
            r["ratio_full_to"],
            json!({"sliced": 2.0, "footprint": null})
        );
        assert_eq!(r["fallbacks"]["reasons"], json!({}));
        for d in [Differs::Observation, Differs::StateAfter] {
            assert_eq!(serde_json::to_value(d).unwrap(), json!(d.as_str()));
        }
        for c in [OracleCheck::Reads, OracleCheck::Outcome] {
            assert_eq!(serde_json::to_value(c).unwrap(), json!(c.as_str()));
        }
    }

    #[test]
    fn the_shared_prefix_stops_at_a_character_boundary() {
        assert_eq!(common_prefix("abé", "abè"), "ab");
        assert_eq!(common_prefix("abc", "ab"), "ab");
        assert_eq!(common_prefix("", "ab"), "");
    }

    #[test]
    fn jobs_take_code_from_the_sample_or_its_package() {
        let code = "class Shop:\n    def __init__(self, init_config):\n        pass\n    def t(self):\n        return {'success': True}\n";
        let bench = json!([
            {"sample_id": "with_code", "env_id": "shop", "class_name": "Shop", "env_code": code,
             "seed": 7, "clock": 12.5,
             "action": {"name": "t", "arguments": {}}, "observation": "{'success': True}",
             "config_before": {}, "config_after": {}},
            {"sample_id": "no_class", "env_id": "other", "env_code": code,
             "action": {"name": "t", "arguments": {}}, "observation": "{'success': True}",
             "config_before": {}, "config_after": {}},
            {"sample_id": "no_code", "env_id": "missing",
             "action": {"name": "t", "arguments": {}}, "observation": "{'success': True}",
             "config_before": {}, "config_after": {}},
            {"sample_id": "db", "env_id": "shop", "class_name": "Shop", "env_code": code,
             "convention": "database",
             "action": {"name": "t", "arguments": {}}, "observation": "ok",
             "config_before": {}, "config_after": {}},
            {"sample_id": "bad_convention", "env_id": "shop", "class_name": "Shop",
             "env_code": code, "convention": "tables",
             "action": {"name": "t", "arguments": {}}, "observation": "ok",
             "config_before": {}, "config_after": {}},
        ]);
        let bytes = serde_json::to_vec(&bench).unwrap();
        let transitions = parse_benchmark(&bytes, "b.json").unwrap();
        let raw = records(&bytes, "b.json").unwrap();
        let none = HashMap::new();
        let one = |i: usize| vec![transitions[i].clone()];
        let jobs_of = |i: usize| jobs(one(i), &raw, &none);
        let first = jobs_of(0).unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].seed, first[0].clock), (7, 12.5));
        assert_eq!(&*first[0].code.class_name, "Shop");
        assert_eq!(&*first[0].code.code, code);
        assert_eq!(first[0].convention, Convention::Class);
        assert_eq!(jobs_of(3).unwrap()[0].convention, Convention::Database);
        assert_eq!(
            jobs_of(4).unwrap_err().to_string(),
            "sample bad_convention: field convention is \"tables\", expected \"class\" or \"database\""
        );
        assert_eq!(
            jobs_of(1).unwrap_err(),
            SliceCheckError::UnknownClass {
                sample: "no_class".into()
            }
        );
        let missing = jobs_of(2).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "sample no_code: no code in the benchmark and no package \"missing\""
        );
        // Every job of one environment shares the code.
        let both = jobs(
            vec![transitions[0].clone(), transitions[0].clone()],
            &raw,
            &none,
        )
        .unwrap();
        assert_eq!(both[1].clock, 12.5);
        assert!(Arc::ptr_eq(&both[0].code.code, &both[1].code.code));
    }
}

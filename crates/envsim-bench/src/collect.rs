//! Collecting transitions: seeded random walks from every initial state of every environment,
//! executed in the sandbox, each call also re-run under another seed and clock to flag the
//! fields that state, code and arguments cannot predict.

use crate::driver::{arguments, Intent, StateIndex, ToolSpec};
use envsim_core::diff::{fine_diff, reference_change_count};
use envsim_core::rng::Rng;
use envsim_exec::package::{Convention, EnvPackage};
use envsim_exec::{Call, ExecError, Executor, DEFAULT_CLOCK};
use serde::Serialize;
use serde_json::{Map, Value};
use std::sync::Arc;

/// How a call ended, under the package's outcome rule (`EnvPackage::outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The rule reads a success.
    Success,
    /// The rule reads a failure: a business-rule failure (the reference's failure stratum).
    Failure,
    /// The tool raised, or the call did not fit its signature (the reference drops these).
    Exception,
    /// The rule cannot tell (e.g. no boolean `success` under the `success_key` rule).
    Undetermined,
}

impl Outcome {
    /// The outcome of an observation the rule classified as `verdict`.
    pub fn from_verdict(verdict: Option<bool>) -> Outcome {
        match verdict {
            Some(true) => Outcome::Success,
            Some(false) => Outcome::Failure,
            None => Outcome::Undetermined,
        }
    }
}

/// A state kept as compact JSON text, shared (`Arc`) between the transitions that hold it.
///
/// States are the bulk of a collection (tens of thousands of 10–100 KB states) and as parsed
/// values take about 25 times their text size; consecutive steps share the state between them,
/// and calls that change nothing share one state for before and after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateText(Arc<str>);

impl StateText {
    /// Serialises a state.
    pub fn from_value(value: &Value) -> StateText {
        StateText(Arc::from(serde_json::to_string(value).unwrap_or_default()))
    }

    /// The compact JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The state as a value (the text is envsim's own serialisation, so it always parses).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

impl Serialize for StateText {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(serializer)
    }
}

/// One executed call with everything benchmark construction needs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TransitionRecord {
    /// Environment (package) name.
    pub env: String,
    /// Environment class name (empty for the database convention).
    pub class_name: String,
    /// How the environment's code is written (left out of records when `class`).
    #[serde(skip_serializing_if = "Convention::is_class")]
    pub convention: Convention,
    /// The called tool's schema.
    pub tool_schema: Value,
    /// Initial state file the walk started from.
    pub initial_state: String,
    /// Walk number and step number within the walk.
    pub walk: usize,
    /// Step within the walk (0-based).
    pub step: usize,
    /// What the driver intended.
    pub intent: Intent,
    /// The call.
    pub action: Value,
    /// State before.
    pub config_before: StateText,
    /// State after (for an exception: the state as the code left it when it raised).
    pub config_after: StateText,
    /// `str()` of the return value (or the reference's `Error: ...` text for exceptions).
    pub observation: String,
    /// The return value as JSON (null for exceptions).
    pub observation_json: Value,
    /// How the call ended.
    pub outcome: Outcome,
    /// |Δ| as the reference counts it.
    pub change_count: usize,
    /// Leaf-level |Δ| (lists descended).
    pub fine_change_count: usize,
    /// Number of arguments.
    pub args_count: usize,
    /// Output fields that depend on the clock or the seed (`/observation/...`, `/state/...`).
    pub unpredictable: Vec<String>,
    /// State paths the call read, when the walk was traced (its writes are the diff).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reads: Option<Vec<String>>,
    /// The seed and clock the call ran with.
    pub seed: u64,
    /// Frozen clock of the call.
    pub clock: f64,
}

/// Walk parameters.
#[derive(Clone, Debug)]
pub struct WalkPlan {
    /// Walks per initial state.
    pub walks: usize,
    /// Steps per walk.
    pub steps: usize,
    /// Share of calls meant to succeed.
    pub valid_share: f64,
    /// Master seed.
    pub seed: u64,
    /// Record the state paths each call reads (footprints).
    pub trace: bool,
}

impl Default for WalkPlan {
    fn default() -> Self {
        WalkPlan {
            walks: 10,
            steps: 16,
            valid_share: 0.75,
            seed: 42,
            trace: false,
        }
    }
}

/// Runs all walks of one (package, initial state) pair, in order.
async fn walk_state(
    executor: &Executor,
    package: &EnvPackage,
    state_index: usize,
    plan: &WalkPlan,
) -> Result<Vec<TransitionRecord>, ExecError> {
    let tools: Vec<(ToolSpec, &Value)> = package
        .manifest
        .tools
        .iter()
        .filter_map(|t| ToolSpec::from_schema(t).map(|s| (s, t)))
        .collect();
    let (state_name, raw) = &package.states[state_index];
    // Transitions start from the constructed instance's state, not the raw file (which may
    // lack attributes the constructor creates). When the constructor itself fails on this
    // state, every call fails the same way: the walk records those failures from the file.
    let initial = match executor
        .construct(&package.code, raw, 0, DEFAULT_CLOCK)
        .await
    {
        Ok(state) => state,
        Err(e @ (ExecError::Spawn(_) | ExecError::Protocol(_))) => return Err(e),
        Err(_) => raw.clone(),
    };
    let initial = &initial;
    let mut out = Vec::new();
    for walk in 0..plan.walks {
        let label = format!("{}/{state_name}/{walk}", package.manifest.name);
        let mut rng = Rng::derive(plan.seed, &label);
        let mut state = initial.clone();
        let mut state_text = StateText::from_value(&state);
        for step in 0..plan.steps {
            let Some((tool, schema)) = rng.pick(&tools) else {
                break;
            };
            let intent = if rng.chance(plan.valid_share) {
                Intent::Valid
            } else {
                Intent::Invalid
            };
            let index = StateIndex::new(&state);
            let args = arguments(tool, &index, &mut rng, intent);
            let seed = rng.next_u64() >> 16;
            let clock = DEFAULT_CLOCK + (step as f64) * 3600.0;
            let call = Call {
                seed,
                clock,
                trace: plan.trace,
                ..Call::new(&package.code, &tool.name, &args, &state)
            };
            let (record, after) = execute(
                executor,
                package,
                &call,
                &state_text,
                (*schema).clone(),
                state_name,
                walk,
                step,
                intent,
            )
            .await?;
            if let Some(after) = after {
                state = after;
            }
            state_text = record.config_after.clone();
            out.push(record);
        }
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
/// Executes one call; returns the record and, when the state changed, the new state.
async fn execute(
    executor: &Executor,
    package: &EnvPackage,
    call: &Call<'_>,
    before: &StateText,
    tool_schema: Value,
    state_name: &str,
    walk: usize,
    step: usize,
    intent: Intent,
) -> Result<(TransitionRecord, Option<Value>), ExecError> {
    let action =
        serde_json::json!({"name": call.tool, "arguments": Value::Object(call.args.clone())});
    let base = TransitionRecord {
        env: package.manifest.name.clone(),
        class_name: package.manifest.class_name.clone(),
        convention: package.manifest.convention,
        tool_schema,
        initial_state: state_name.to_owned(),
        walk,
        step,
        intent,
        action,
        config_before: before.clone(),
        config_after: before.clone(),
        observation: String::new(),
        observation_json: Value::Null,
        outcome: Outcome::Exception,
        change_count: 0,
        fine_change_count: 0,
        args_count: call.args.len(),
        unpredictable: Vec::new(),
        reads: None,
        seed: call.seed,
        clock: call.clock,
    };
    // |Δ| as the reference counts it, the fine |Δ|, and the state after as text.
    let changes_to = |after: &Value| {
        (
            reference_change_count(call.state, after),
            fine_diff(call.state, after).len(),
            StateText::from_value(after),
        )
    };
    match executor.call(call).await {
        Ok(outcome) => {
            let twin = executor
                .call(&Call {
                    seed: call.seed ^ 0x00C0_FFEE,
                    trace: false,
                    clock: call.clock + 86_400.0 * 41.0 + 1_234.5,
                    ..call.clone()
                })
                .await;
            let unpredictable = twin.map(|t| outcome.differences(&t)).unwrap_or_default();
            let verdict =
                Outcome::from_verdict(package.outcome.classify(&outcome.observation_json));
            let changed = outcome.state_after != *call.state;
            let (change_count, fine_change_count, config_after) = if changed {
                changes_to(&outcome.state_after)
            } else {
                (0, 0, before.clone())
            };
            let record = TransitionRecord {
                change_count,
                fine_change_count,
                config_after,
                observation: outcome.observation,
                observation_json: outcome.observation_json,
                outcome: verdict,
                unpredictable,
                reads: outcome
                    .reads
                    .map(|paths| paths.iter().map(ToString::to_string).collect()),
                ..base
            };
            Ok((record, changed.then_some(outcome.state_after)))
        }
        // Infrastructure failures stop the collection; everything the environment did is data.
        Err(e @ (ExecError::Spawn(_) | ExecError::Protocol(_))) => Err(e),
        // A tool that raised keeps the changes it made before the exception.
        Err(e) => {
            let mut record = TransitionRecord {
                observation: format!("Error: {e}"),
                ..base
            };
            let after = e
                .state_after()
                .filter(|after| *after != call.state)
                .cloned();
            if let Some(after) = &after {
                (
                    record.change_count,
                    record.fine_change_count,
                    record.config_after,
                ) = changes_to(after);
            }
            Ok((record, after))
        }
    }
}

/// Collects transitions from every initial state of every package, `concurrency` walks at a
/// time. The result is ordered by (package, state, walk, step) whatever the concurrency, so the
/// same inputs always give the same records. `progress` is called after each finished state.
pub async fn collect(
    executor: Arc<Executor>,
    packages: Arc<Vec<EnvPackage>>,
    plan: WalkPlan,
    concurrency: usize,
    progress: impl Fn(usize, usize) + Send + Sync + 'static,
) -> Result<Vec<TransitionRecord>, ExecError> {
    let jobs: Vec<(usize, usize)> = packages
        .iter()
        .enumerate()
        .flat_map(|(p, pkg)| (0..pkg.states.len()).map(move |s| (p, s)))
        .collect();
    let total = jobs.len();
    let semaphore = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let plan = Arc::new(plan);
    let progress = Arc::new(progress);
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(total);
    for (p, s) in jobs {
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
            let records = walk_state(&executor, &packages[p], s, &plan).await;
            progress(
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1,
                total,
            );
            records
        }));
    }
    let mut out = Vec::new();
    for handle in handles {
        let records = handle
            .await
            .map_err(|e| ExecError::Spawn(format!("a collection task failed: {e}")))??;
        out.extend(records);
    }
    Ok(out)
}

/// The action as the reference renders it, for dedup keys and ids.
pub fn action_key(action: &Value) -> String {
    let name = action
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let args = action
        .get("arguments")
        .cloned()
        .unwrap_or(Value::Object(Map::new()));
    format!("{name}({args})")
}

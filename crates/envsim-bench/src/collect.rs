//! Collecting transitions: seeded random walks from every initial state of every environment,
//! executed in the sandbox, each call also re-run under another seed and clock to flag the
//! fields that state, code and arguments cannot predict.

use crate::driver::{arguments_with, Intent, StateIndex, ToolSpec};
use envsim_core::diff::{fine_diff, reference_change_count};
use envsim_core::rng::Rng;
use envsim_exec::package::{Convention, EnvPackage};
use envsim_exec::{Call, ExecError, Executor};
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
/// and calls that change nothing share one state for before and after. A state that grew from a
/// large initial state ([`LARGE_STATE_BYTES`]) is kept as that base, shared, plus the patch
/// from it (`envsim_core::state_patch`): a walk over a multi-megabyte database then costs the
/// database once, not once per step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateText(Repr);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Repr {
    Full(Arc<str>),
    Patched {
        base: Arc<BaseState>,
        patch: Arc<str>,
    },
}

/// A large initial state that the states of its walks are patches of.
#[derive(Debug, PartialEq, Eq)]
pub struct BaseState {
    /// `SHA-256` of the text, first 16 hex digits: how compact benchmark files name it.
    pub id: String,
    /// Compact JSON text.
    pub text: Arc<str>,
}

impl BaseState {
    /// The base with this id: the one still held elsewhere (every walk or replayed run from the
    /// same 3 MB database shares one text), else a new one.
    fn interned(id: String, text: String) -> Arc<BaseState> {
        static LIVE: std::sync::Mutex<Vec<std::sync::Weak<BaseState>>> =
            std::sync::Mutex::new(Vec::new());
        let Ok(mut live) = LIVE.lock() else {
            return Arc::new(BaseState {
                id,
                text: Arc::from(text),
            });
        };
        live.retain(|w| w.strong_count() > 0);
        if let Some(found) = live
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .find(|b| b.id == id)
        {
            return found;
        }
        let base = Arc::new(BaseState {
            id,
            text: Arc::from(text),
        });
        live.push(Arc::downgrade(&base));
        base
    }
}

/// From this size of an initial state's text on, the states of its walks are kept (and written
/// to compact benchmark files) as patches of it.
pub const LARGE_STATE_BYTES: usize = 256 * 1024;

/// How the states of one walk are kept: whole, or as patches of its initial state.
#[derive(Clone, Debug)]
pub enum StateForm {
    /// Whole texts.
    Full,
    /// Patches of the base, whose value is kept parsed to diff against.
    Patched(Arc<BaseState>, Arc<Value>),
}

impl StateForm {
    /// The form for a walk from `initial`: patches when it is large.
    pub fn for_initial(initial: &Arc<Value>) -> StateForm {
        let text = serde_json::to_string(initial.as_ref()).unwrap_or_default();
        if text.len() < LARGE_STATE_BYTES {
            return StateForm::Full;
        }
        let id = envsim_core::hex::encode(&<sha2::Sha256 as sha2::Digest>::digest(text.as_bytes()))
            [..16]
            .to_owned();
        StateForm::Patched(BaseState::interned(id, text), Arc::clone(initial))
    }

    /// `state` in this form.
    pub fn text(&self, state: &Value) -> StateText {
        match self {
            StateForm::Full => StateText::from_value(state),
            StateForm::Patched(base, base_value) => StateText(Repr::Patched {
                base: Arc::clone(base),
                patch: Arc::from(
                    serde_json::to_string(&envsim_core::state_patch::diff_patch(base_value, state))
                        .unwrap_or_default(),
                ),
            }),
        }
    }
}

impl StateText {
    /// Serialises a state (whole).
    pub fn from_value(value: &Value) -> StateText {
        StateText(Repr::Full(Arc::from(
            serde_json::to_string(value).unwrap_or_default(),
        )))
    }

    /// A text that identifies the state among those of its form: the compact JSON of a whole
    /// state, the base id and the patch of a patched one (patches are canonical: one state,
    /// one patch from its base).
    pub fn identity(&self) -> std::borrow::Cow<'_, str> {
        match &self.0 {
            Repr::Full(text) => std::borrow::Cow::Borrowed(text),
            Repr::Patched { base, patch } => {
                std::borrow::Cow::Owned(patched_identity(&base.id, patch))
            }
        }
    }

    /// The length of the whole state's text (a patched state: its base's).
    pub fn approximate_len(&self) -> usize {
        match &self.0 {
            Repr::Full(text) => text.len(),
            Repr::Patched { base, patch } => base.text.len() + patch.len(),
        }
    }

    /// The base and the patch, for a patched state.
    pub fn as_patch(&self) -> Option<(&Arc<BaseState>, &str)> {
        match &self.0 {
            Repr::Full(_) => None,
            Repr::Patched { base, patch } => Some((base, patch)),
        }
    }

    /// The state as a value (the texts are envsim's own serialisation, so they always parse
    /// and patches always apply).
    pub fn value(&self) -> Value {
        match &self.0 {
            Repr::Full(text) => serde_json::from_str(text).unwrap_or(Value::Null),
            Repr::Patched { base, patch } => patched(
                serde_json::from_str(&base.text).unwrap_or(Value::Null),
                patch,
            ),
        }
    }
}

/// `base` with the patch text applied (envsim's own patches: they always apply).
fn patched(mut base: Value, patch: &str) -> Value {
    let patch: Value = serde_json::from_str(patch).unwrap_or(Value::Null);
    match envsim_core::state_patch::apply_patch(&mut base, &patch) {
        Ok(()) => base,
        Err(_) => Value::Null,
    }
}

/// The identity ([`StateText::identity`]) of the state that `patch` (its compact JSON text)
/// makes of the base state `base_id`; compact benchmark records give the same two parts.
pub fn patched_identity(base_id: &str, patch: &str) -> String {
    format!("{base_id}+{patch}")
}

/// Parsed base states, so that materialising many patched states parses each base once.
#[derive(Debug, Default)]
pub struct StateCache {
    bases: std::collections::HashMap<String, Arc<Value>>,
}

impl StateCache {
    /// The state as a value.
    pub fn value(&mut self, state: &StateText) -> Value {
        match &state.0 {
            Repr::Full(_) => state.value(),
            Repr::Patched { base, patch } => {
                let parsed = self.bases.entry(base.id.clone()).or_insert_with(|| {
                    Arc::new(serde_json::from_str(&base.text).unwrap_or(Value::Null))
                });
                patched((**parsed).clone(), patch)
            }
        }
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
    /// Seconds the clock advances between the steps of a walk (step `k` runs at the initial
    /// state's clock + `k` × this).
    pub clock_step: f64,
    /// Share of calls whose arguments are drawn together from one record of the state and
    /// what it references ([`StateIndex::focus`]). Zero for benchmark walks (their samples stay
    /// as published); learning walks raise it so that tools whose preconditions tie their
    /// arguments together (an order's items with its user's payment method) succeed.
    pub focus_share: f64,
}

/// The focus share of walks that learn what an environment's tools do (the audit's effects,
/// shapes and writes).
pub const LEARNING_FOCUS_SHARE: f64 = 0.8;

/// Calls per tool that learning walks make in all, at the least: about half of a tool's
/// calls fail (arguments a precondition refuses), and its effects are claimed only after
/// three successes ([`envsim_core::audit::Effects::learn`]), so a few walks over one large
/// database (τ²-bench's retail: 15 tools, one state) would leave most changes unproven.
pub const LEARNING_CALLS_PER_TOOL: usize = 16;

/// Learning walks per initial state: at least `min_walks` (0: no learning walks at all), and
/// enough that the walks of `steps` steps over all `states` make [`LEARNING_CALLS_PER_TOOL`]
/// calls per tool of `tools`.
pub fn learning_walks(min_walks: usize, steps: usize, tools: usize, states: usize) -> usize {
    if min_walks == 0 || steps == 0 || states == 0 {
        return min_walks;
    }
    let calls = LEARNING_CALLS_PER_TOOL * tools;
    min_walks.max(calls.div_ceil(steps * states))
}

impl Default for WalkPlan {
    fn default() -> Self {
        WalkPlan {
            walks: 10,
            steps: 16,
            valid_share: 0.75,
            seed: 42,
            trace: false,
            clock_step: envsim_core::clock::DEFAULT_CLOCK_STEP,
            focus_share: 0.0,
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
    // Every walk of a state starts at the state's own clock, so what the tools stamp comes
    // after what the state already records.
    let start_clock = package.clock(state_index).seconds;
    // Transitions start from the constructed instance's state, not the raw file (which may
    // lack attributes the constructor creates). When the constructor itself fails on this
    // state, every call fails the same way: the walk records those failures from the file.
    let initial = match executor.construct(&package.code, raw, 0, start_clock).await {
        Ok(state) => state,
        Err(e @ (ExecError::Spawn(_) | ExecError::Protocol(_))) => return Err(e),
        Err(_) => raw.clone(),
    };
    let initial = Arc::new(initial);
    let form = StateForm::for_initial(&initial);
    let initial_text = form.text(&initial);
    let initial = initial.as_ref();
    let mut out = Vec::new();
    for walk in 0..plan.walks {
        let label = format!("{}/{state_name}/{walk}", package.manifest.name);
        let mut rng = Rng::derive(plan.seed, &label);
        let mut state = initial.clone();
        let mut state_text = initial_text.clone();
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
            // Drawn only when asked for, so that benchmark walks keep their random stream.
            let focus = if plan.focus_share > 0.0 && rng.chance(plan.focus_share) {
                Some(index.focus(tool, &state, &mut rng))
            } else {
                None
            };
            let args = arguments_with(tool, &index, focus.as_ref(), &mut rng, intent);
            let seed = rng.next_u64() >> 16;
            let clock = start_clock + (step as f64) * plan.clock_step;
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
                &form,
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
pub(crate) async fn execute(
    executor: &Executor,
    package: &EnvPackage,
    call: &Call<'_>,
    before: &StateText,
    form: &StateForm,
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
            form.text(after),
        )
    };
    match executor.call(call).await {
        Ok(outcome) => {
            // The twin runs in another process, with another string hash seed as well as
            // another seed and clock: a field built from a set of strings differs there too.
            let twin = executor
                .call_in_twin_process(&Call {
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

#[cfg(test)]
mod tests {
    use super::learning_walks;

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
}

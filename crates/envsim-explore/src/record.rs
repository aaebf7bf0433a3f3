//! Executed calls as records: how a call ended ([`Outcome`]), states kept as shared compact text
//! ([`StateText`], patches of a large initial state), and the [`TransitionRecord`] every walk
//! of the explorer produces, executed by [`execute`] (with a twin run under another seed, clock
//! and string hash seed when asked, to flag the fields that state, code and arguments cannot
//! predict).

use crate::driver::Intent;
use envsim_core::diff::{fine_diff, reference_change_count};
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

/// Where a call stands in its walk, as its record names it.
#[derive(Clone, Debug)]
pub struct Position<'a> {
    /// The called tool's schema (from the manifest).
    pub tool_schema: Value,
    /// The initial state file the walk started from.
    pub state_name: &'a str,
    /// The walk.
    pub walk: usize,
    /// The step within the walk's whole path from its initial state (0-based).
    pub step: usize,
    /// What the call was drawn to do.
    pub intent: Intent,
}

/// What [`execute`] does beside the call itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Probes {
    /// Run the call again in a twin process (another seed, clock and string hash seed) to flag
    /// the output fields that state, code and arguments cannot predict
    /// ([`TransitionRecord::unpredictable`]): what benchmarks and training data need.
    pub twin: bool,
    /// Report the lines and arcs of the environment's code the call ran.
    pub coverage: bool,
}

/// One executed call.
#[derive(Clone, Debug)]
pub struct Executed {
    /// Its record.
    pub record: TransitionRecord,
    /// The state after, when the call changed it.
    pub after: Option<Value>,
    /// The environment code it ran, when asked for and the tool ran.
    pub coverage: Option<envsim_exec::coverage::CallCoverage>,
}

/// Executes one call from the state `before` (whose value is the call's state), kept in `form`.
pub async fn execute(
    executor: &Executor,
    package: &EnvPackage,
    call: &Call<'_>,
    before: &StateText,
    form: &StateForm,
    at: Position<'_>,
    probes: Probes,
) -> Result<Executed, ExecError> {
    let action =
        serde_json::json!({"name": call.tool, "arguments": Value::Object(call.args.clone())});
    let base = TransitionRecord {
        env: package.manifest.name.clone(),
        class_name: package.manifest.class_name.clone(),
        convention: package.manifest.convention,
        tool_schema: at.tool_schema,
        initial_state: at.state_name.to_owned(),
        walk: at.walk,
        step: at.step,
        intent: at.intent,
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
    let (result, coverage) = if probes.coverage {
        let covered = executor.call_covered(call).await;
        (covered.result, covered.coverage)
    } else {
        (executor.call(call).await, None)
    };
    match result {
        Ok(outcome) => {
            // The twin runs in another process, with another string hash seed as well as
            // another seed and clock: a field built from a set of strings differs there too.
            let unpredictable = if probes.twin {
                let twin = executor
                    .call_in_twin_process(&Call {
                        seed: call.seed ^ 0x00C0_FFEE,
                        trace: false,
                        coverage: false,
                        clock: call.clock + 86_400.0 * 41.0 + 1_234.5,
                        ..call.clone()
                    })
                    .await;
                twin.map(|t| outcome.differences(&t)).unwrap_or_default()
            } else {
                Vec::new()
            };
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
            Ok(Executed {
                record,
                after: changed.then_some(outcome.state_after),
                coverage,
            })
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
            Ok(Executed {
                record,
                after,
                coverage,
            })
        }
    }
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

//! A second, independent validation set for the audit (`envsim audit workflows` and `envsim
//! audit score`): agent-style workflows over the environment corpus, executed for their truth,
//! with one planted fault in about half of them, rendered as call-only OpenAI chat transcripts,
//! and a scorer that reads the audit's violations against the labels.
//!
//! Why a second set: `audit validate` plants its faults with the project's own injector, which
//! was written next to the checks and shares their view of what a fault looks like. This module
//! was written from the fault descriptions alone, without reading the audit's checks or its
//! injector, so the faults it plants are the ones an outsider would plant.
//!
//! The data flow:
//! - [`generate`]: per package, goal-directed sequences an agent would make (look a record up,
//!   create then read it back, update then verify, move a status then check it, search after
//!   creating, act on something missing and be refused), their arguments taken from the
//!   package's initial state, its scripted tests (values an agent would know) and earlier
//!   answers; every call executed from the initial state, each step's effect read from the true
//!   state change ([`Effect`]);
//! - [`plant`]: one fault of a [`FaultKind`] at a step where the workflow's own earlier steps
//!   make it visible (pure);
//! - [`render`]: the answers as JSON text, a Python literal or a sentence embedding the value,
//!   one form per trajectory, in OpenAI chat records that name the package state they start
//!   from and hold no states (pure);
//! - [`score`]: recall per kind and the clean trajectories flagged (pure).

mod generate;
mod plant;
mod render;
mod score;

pub use generate::{workflows_of, GenerateConfig};
pub use plant::{plant, plant_set, PlantedFault};
pub use render::{python_literal, render_answer, transcript};
pub use score::{read_flags, read_labels, score, CleanScore, Flag, KindScore, Score};

use envsim_exec::package::EnvPackage;
use envsim_exec::Executor;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashSet};

/// The kinds of fault planted, as the descriptions they were written from name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A read after a successful update shows a field's value from before the update.
    StaleRead,
    /// A read after a successful status move shows the old status back.
    ResurrectionByStatus,
    /// A record created earlier is missing later: a getter answers not found.
    VanishedCreate,
    /// A filtered listing after a matching create omits the created record.
    ListOmission,
    /// An answer holds a copy of a real record under an id never created and in no initial
    /// state.
    PhantomCopy,
    /// A refused call is answered as a success.
    HappyPathFlip,
    /// A successful answer renames a field or changes a field's type.
    SchemaDrift,
}

impl FaultKind {
    /// Every kind, in the order faulty trajectories take them in turn.
    pub const ALL: [FaultKind; 7] = [
        FaultKind::StaleRead,
        FaultKind::ResurrectionByStatus,
        FaultKind::VanishedCreate,
        FaultKind::ListOmission,
        FaultKind::PhantomCopy,
        FaultKind::HappyPathFlip,
        FaultKind::SchemaDrift,
    ];

    /// The snake_case name (as in the labels).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::StaleRead => "stale_read",
            FaultKind::ResurrectionByStatus => "resurrection_by_status",
            FaultKind::VanishedCreate => "vanished_create",
            FaultKind::ListOmission => "list_omission",
            FaultKind::PhantomCopy => "phantom_copy",
            FaultKind::HappyPathFlip => "happy_path_flip",
            FaultKind::SchemaDrift => "schema_drift",
        }
    }
}

/// How a trajectory's tool answers are written (one form per trajectory).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerStyle {
    /// The value as JSON text.
    Json,
    /// The value as a Python literal (single quotes, `True`/`False`/`None`), as `str()` of a
    /// dict prints it.
    PythonLiteral,
    /// A plain-text sentence with the JSON value embedded.
    Sentence,
}

impl AnswerStyle {
    /// Every style, in the order a seed picks from.
    pub const ALL: [AnswerStyle; 3] = [
        AnswerStyle::Json,
        AnswerStyle::PythonLiteral,
        AnswerStyle::Sentence,
    ];
}

/// A record of one of the state's collections (a top-level object of objects keyed by id).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RecordRef {
    /// The collection (`issues`).
    pub collection: String,
    /// The record's key in it (`PAY-104`).
    pub id: String,
}

impl std::fmt::Display for RecordRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.collection, self.id)
    }
}

/// A top-level field of a record that a call changed.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldChange {
    /// The record.
    pub record: RecordRef,
    /// The field.
    pub field: String,
    /// Its value before the call.
    pub before: Value,
    /// Its value after.
    pub after: Value,
}

/// What a call did to the state's collections, read from the true state before and after.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Effect {
    /// Records that appeared.
    pub created: Vec<RecordRef>,
    /// Records that disappeared.
    pub removed: Vec<RecordRef>,
    /// Fields that changed in records present before and after.
    pub changed: Vec<FieldChange>,
}

impl Effect {
    /// Whether the call changed no record.
    pub fn is_empty(&self) -> bool {
        self.created.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// What the goal wanted of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// Read one record by its id.
    Lookup,
    /// A listing or search.
    Listing,
    /// Create a record.
    Create,
    /// Change fields of a record.
    Update,
    /// Move a record's status.
    StatusChange,
    /// A change aimed at a record that does not exist: refused.
    RefusedMissing,
    /// A status move repeated on the record an earlier step moved: refused.
    RefusedRepeat,
}

/// A real answer with the outcome opposite to the step's, probed on the same state but not
/// made part of the workflow: what a fault that flips the outcome answers. The text `from` in
/// its strings is replaced by `to` (the probe named another id than the step).
#[derive(Clone, Debug, PartialEq)]
pub struct Counterpart {
    /// The probed answer.
    pub answer: Value,
    /// The id the probe named.
    pub from: String,
    /// The id the step names.
    pub to: String,
}

impl Counterpart {
    /// The answer retargeted at the step's id.
    pub fn retargeted(&self) -> Value {
        replace_text(&self.answer, &self.from, &self.to)
    }
}

/// Every string of `value` (keys too) with `from` replaced by `to`.
fn replace_text(value: &Value, from: &str, to: &str) -> Value {
    if from.is_empty() {
        return value.clone();
    }
    match value {
        Value::String(s) => Value::String(s.replace(from, to)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| replace_text(v, from, to)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.replace(from, to), replace_text(v, from, to)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// One executed call of a workflow.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecutedStep {
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// The true answer (the tool's return value as JSON).
    pub answer: Value,
    /// Whether the package's outcome rule reads the answer as a success.
    pub success: bool,
    /// What the call did to the state.
    pub effect: Effect,
    /// Why the agent made it.
    pub purpose: Purpose,
    /// The record the call names by its id argument, when it names one.
    pub names: Option<RecordRef>,
    /// The answer of the opposite outcome, when one was probed.
    pub counterpart: Option<Counterpart>,
}

/// One executed workflow: the truth the faults are planted in.
#[derive(Clone, Debug, PartialEq)]
pub struct Workflow {
    /// The package.
    pub env: String,
    /// The package state file it starts from (`00_small.json`).
    pub state: String,
    /// Its id (`issue_tracker-007`).
    pub task_id: String,
    /// What the user asked, in words (the goals in order).
    pub request: String,
    /// The calls.
    pub steps: Vec<ExecutedStep>,
}

/// One fault as the labels give it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabelledFault {
    /// Its kind.
    pub kind: FaultKind,
    /// The step (0-based call index) whose answer was changed.
    pub step: usize,
    /// That step's tool.
    pub tool: String,
    /// The record concerned (`issues/PAY-104`), when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// What was changed, in words.
    pub detail: String,
}

/// The label of one trajectory of the set, faulty or clean.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Label {
    /// The transcript's id (`task_id` and `id` of its record).
    pub trajectory: String,
    /// Its line in the transcript file (1-based).
    pub line: usize,
    /// The package.
    pub env: String,
    /// The package state it starts from.
    pub state: String,
    /// How its answers are written.
    pub style: AnswerStyle,
    /// Its number of calls.
    pub steps: usize,
    /// The planted fault; `None` for a clean trajectory.
    pub fault: Option<LabelledFault>,
}

/// The set: transcripts (one JSON record per line) and their labels, in the same order.
#[derive(Clone, Debug, Default)]
pub struct LabelledSet {
    /// OpenAI chat records.
    pub transcripts: Vec<Value>,
    /// One label per transcript.
    pub labels: Vec<Label>,
}

/// What goes wrong building or scoring the set, with the place named.
#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    /// The executor could not run a call (no worker, protocol): not the environment's answer.
    #[error("{env}: {state}: the executor failed: {source}")]
    Exec {
        /// The package.
        env: String,
        /// Its state file.
        state: String,
        /// Why.
        #[source]
        source: envsim_exec::ExecError,
    },
    /// A package that cannot be used (no states).
    #[error("{env}: {message}")]
    Package {
        /// The package.
        env: String,
        /// What is wrong.
        message: String,
    },
    /// A line of a labels or violations file that does not read.
    #[error("{file}: line {line}: {message}")]
    Input {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A setting out of range.
    #[error("{0}")]
    Config(String),
}

/// The workflows of every package, `config.per_env` each (fewer where a package's tools cannot
/// make them), in package order; two packages at a time (the executor's workers run them side
/// by side; give it two). `progress` gets (workflows tried, workflows asked) as packages finish.
pub async fn generate(
    executor: &Executor,
    packages: &[EnvPackage],
    config: &GenerateConfig,
    progress: impl Fn(usize, usize),
) -> Result<Vec<Workflow>, WorkflowError> {
    let total = packages.len() * config.per_env;
    let mut out = Vec::new();
    progress(0, total);
    let mut done = 0;
    for pair in packages.chunks(2) {
        let second = async {
            match pair.get(1) {
                Some(p) => workflows_of(executor, p, config).await,
                None => Ok(Vec::new()),
            }
        };
        let (first, second) = tokio::join!(workflows_of(executor, &pair[0], config), second);
        out.extend(first?);
        out.extend(second?);
        done += pair.len() * config.per_env;
        progress(done, total);
    }
    Ok(out)
}

/// The ids the packages' initial states hold, for telling a phantom's id fresh: per package,
/// the keys of every collection of every state, and every value records give under an id
/// field (`customer_id`: a reference is an id too).
#[derive(Clone, Debug, Default)]
pub struct InitialIds {
    by_env: BTreeMap<String, HashSet<String>>,
}

impl InitialIds {
    /// From the packages.
    pub fn of(packages: &[EnvPackage]) -> InitialIds {
        let by_env = packages
            .iter()
            .map(|p| {
                let mut ids = HashSet::new();
                for (_, state) in &p.states {
                    for collection in state.as_object().into_iter().flat_map(|m| m.values()) {
                        let Some(records) = collection.as_object() else {
                            continue;
                        };
                        if !records.values().all(Value::is_object) {
                            continue;
                        }
                        for (key, record) in records {
                            ids.insert(key.clone());
                            for (field, v) in record.as_object().into_iter().flatten() {
                                if let (true, Some(id)) = (plant::is_id_key(field), v.as_str()) {
                                    ids.insert(id.to_owned());
                                }
                            }
                        }
                    }
                }
                (p.manifest.name.clone(), ids)
            })
            .collect();
        InitialIds { by_env }
    }

    /// Whether `id` is in an initial state of `env` (an unknown package holds nothing).
    pub fn holds(&self, env: &str, id: &str) -> bool {
        self.by_env.get(env).is_some_and(|ids| ids.contains(id))
    }
}

/// The labelled set of `workflows`: faults planted in a `rate` share, every transcript
/// rendered ([`plant_set`]).
pub fn label_set(
    workflows: &[Workflow],
    initial: &InitialIds,
    rate: f64,
    seed: u64,
) -> Result<LabelledSet, WorkflowError> {
    if !(0.0..=1.0).contains(&rate) {
        return Err(WorkflowError::Config(format!(
            "the share of faulty trajectories must be between 0 and 1, got {rate}"
        )));
    }
    Ok(plant_set(workflows, rate, seed, &|env, id| {
        initial.holds(env, id)
    }))
}

//! The data model of one benchmark transition and of one prediction for it.

use serde::Serialize;
use serde_json::{Map, Value};

/// A tool call.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Action {
    /// Tool (method) name.
    pub name: String,
    /// Keyword arguments.
    pub arguments: Map<String, Value>,
}

impl Action {
    /// The call as the reference prompt renders it: `name({"arg": 1})`.
    pub fn render(&self) -> String {
        format!(
            "{}({})",
            self.name,
            serde_json::to_string(&self.arguments).unwrap_or_default()
        )
    }
}

/// Where a transition came from in its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Origin {
    /// 0-based index of the record (array element or JSONL line) in the file.
    pub record: usize,
    /// 0-based position in a multi-step `trajectory` record; `None` for single-step records.
    pub step: Option<usize>,
}

/// One scorable transition `(s_t, a_t, code) → (o_t, s_{t+1})`.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    /// Stable id: the record's own `sample_id`/`id`, else its index (`"17"`), with `:k` appended
    /// for step `k` of a trajectory record (`"17:2"`).
    pub id: String,
    /// Position in the source file.
    pub origin: Origin,
    /// Environment id, when known.
    pub env_id: Option<String>,
    /// Task id, when known.
    pub task_id: Option<String>,
    /// The call.
    pub action: Action,
    /// The observation content: normally the `str()` of the tool's return value.
    pub observation: Value,
    /// State before the call.
    pub config_before: Value,
    /// State after the call.
    pub config_after: Value,
    /// `config_change.change_count` stored in the file, if any (the reference stratifies by it).
    pub stored_change_count: Option<usize>,
    /// The environment's source code ("" when absent).
    pub env_code: String,
}

/// What a simulator produced for one transition.
#[derive(Clone, Debug, PartialEq)]
pub enum Prediction {
    /// Raw model text, to be parsed.
    Raw(String),
    /// An already-parsed output object (`{"feedback": …, "config_changes": […]}`).
    Parsed(Value),
    /// The request failed after all retries; counts as wrong.
    ApiError(String),
    /// No prediction was supplied for this transition; counts as wrong.
    Missing,
}

/// Token usage reported with a prediction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub completion_tokens: u64,
}

impl Usage {
    /// Both counts added up.
    pub fn add(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
    }

    /// Prompt and completion tokens together.
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// What a model's tokens cost, in USD per million.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Price {
    /// USD per million prompt tokens.
    pub input_per_mtok: f64,
    /// USD per million completion tokens.
    pub output_per_mtok: f64,
}

impl Price {
    /// USD for `usage`: (prompt, completion).
    pub fn cost(&self, usage: Usage) -> (f64, f64) {
        (
            usage.prompt_tokens as f64 * self.input_per_mtok / 1e6,
            usage.completion_tokens as f64 * self.output_per_mtok / 1e6,
        )
    }
}

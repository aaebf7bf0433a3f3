//! OpenEnv-compatible endpoints: every task set the server is given is an OpenEnv environment
//! at `/openenv/{set}`, as the OpenEnv client (`openenv-core`'s `GenericEnvClient`, TRL's
//! environment loop) and `openenv validate` expect it: a WebSocket at `/ws` (one episode per
//! `reset`, `type`/`data` messages), `POST /reset`, `POST /step`, `GET /state`, `GET /health`,
//! `GET /metadata`, `GET /schema`, `GET /openapi.json` and `POST /mcp`.
//!
//! An episode is an ordinary session (the same simulators, anchoring, store, trajectory) made
//! from a task — its initial state and instruction — with a tool-call budget; it ends with a
//! final answer (`{"answer": …}`), a terminal tool, or the budget spent. Its reward comes from
//! the task's checker of the final state (built from the executed truth of the task's
//! reference calls; when a task has reference calls but no checker, they are executed once
//! to make one): the binary reward (every checked value right) or, per task set, the share of
//! checked values right; both are reported with the failures. Rewards are recorded with the
//! session, so its trajectory carries them.
//!
//! Unlike the reference server, whose HTTP `reset`/`step`/`state` act on a throwaway
//! environment, these act on the episode the request names (`episode_id`): an RL trainer
//! stepping over plain HTTP keeps its episodes.

use crate::{body_json, lock, ApiError, AppState};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use envsim_core::checker::{StateChecker, Verdict};
use envsim_sim::reference::{ReferenceCall, Variation};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// One task of a task set: what an episode starts from and how it is checked (the RL episode
/// records `envsim export --format rl` writes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Its id (unique in the set).
    pub id: String,
    /// What the agent is asked.
    #[serde(default)]
    pub instruction: String,
    /// The initial state (absent: the environment's first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_state: Option<Value>,
    /// The calls that do the task, in order (`{"name", "arguments"}`; `null` reads as none).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub reference_calls: Vec<Value>,
    /// The checker of the final state (`{"type": "state_values", "expect", "absent", …}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checker: Option<StateChecker>,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Value>, D::Error> {
    Ok(Option::<Vec<Value>>::deserialize(d)?.unwrap_or_default())
}

/// Reads a task file: JSON Lines of [`Task`]s (RL episode records; their other fields are
/// ignored). An error names the line and the field.
pub fn read_tasks(text: &str, source: &str) -> Result<Vec<Task>, String> {
    let mut out: Vec<Task> = Vec::new();
    for (k, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |e: &dyn std::fmt::Display| format!("{source}: line {}: {e}", k + 1);
        let mut fields: Map<String, Value> = serde_json::from_str(line).map_err(|e| at(&e))?;
        // The checker first, so that its faults name it.
        let checker = match fields.remove("checker") {
            None | Some(Value::Null) => None,
            Some(c) => {
                Some(StateChecker::parse(&c).map_err(|e| at(&format_args!("`checker`: {e}")))?)
            }
        };
        let mut task: Task = serde_json::from_value(Value::Object(fields)).map_err(|e| at(&e))?;
        task.checker = checker;
        if task.id.is_empty() {
            return Err(format!("{source}: line {}: `id` is empty", k + 1));
        }
        if out.iter().any(|t| t.id == task.id) {
            return Err(format!(
                "{source}: line {}: the task id {:?} is used twice",
                k + 1,
                task.id
            ));
        }
        out.push(task);
    }
    Ok(out)
}

/// What the reward is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RewardKind {
    /// 1 when every checked value is right, else 0.
    #[default]
    Binary,
    /// The share of checked values that are right.
    Partial,
}

/// A task set served as one OpenEnv environment.
#[derive(Clone, Debug)]
pub struct TaskSet {
    /// Its route name (`/openenv/{name}`).
    pub name: String,
    /// The environment its episodes run in.
    pub env: String,
    /// Creation fields of every episode's session beside `env` and `state` (`primary`,
    /// `anchor`, …; empty: the server's defaults).
    pub session: Map<String, Value>,
    /// Its tasks (none: every episode starts from the environment's first state, with no
    /// instruction and no reward).
    pub tasks: Vec<Task>,
    /// Tool calls an episode may make.
    pub max_tool_calls: usize,
    /// Tools whose call ends the episode.
    pub terminal_tools: Vec<String>,
    /// The reward the steps report.
    pub reward: RewardKind,
}

/// One task set as a file of task sets describes it (`envsim serve --openenv-sets FILE`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskSetSpec {
    name: String,
    env: String,
    #[serde(default)]
    tasks: Option<String>,
    #[serde(default)]
    session: Map<String, Value>,
    #[serde(default = "default_max_tool_calls")]
    max_tool_calls: usize,
    #[serde(default)]
    terminal_tools: Vec<String>,
    #[serde(default)]
    reward: RewardKind,
}

fn default_max_tool_calls() -> usize {
    30
}

/// Whether `name` may name a task set (it is a path segment).
pub fn valid_set_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Reads a file of task sets: a JSON array of `{"name", "env", "tasks" (a task file, relative
/// to this one), "session" (creation fields of every episode's session: `primary`, `anchor`,
/// `no_code`, …), "max_tool_calls" (30), "terminal_tools", "reward" ("binary" or
/// "partial")}`. Every set is checked (its session fields as `POST /sessions` checks them);
/// an error names the file, the set and the field.
pub fn read_task_sets(path: &std::path::Path) -> Result<Vec<TaskSet>, String> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
    let specs: Vec<TaskSetSpec> = serde_json::from_str(&text)
        .map_err(|e| format!("{shown}: line {}, column {}: {e}", e.line(), e.column()))?;
    let base = path.parent().unwrap_or(std::path::Path::new("."));
    let mut sets: Vec<TaskSet> = Vec::new();
    for spec in specs {
        let at = |message: String| format!("{shown}: task set {:?}: {message}", spec.name);
        if !valid_set_name(&spec.name) {
            return Err(at(
                "`name` must be 1 to 64 letters, digits, '_' or '-'".into()
            ));
        }
        if sets.iter().any(|s| s.name == spec.name) {
            return Err(at("the name is used twice".into()));
        }
        if spec.max_tool_calls == 0 {
            return Err(at("`max_tool_calls` must be at least 1".into()));
        }
        if let Some(field) = ["env", "state"]
            .iter()
            .find(|f| spec.session.contains_key(**f))
        {
            return Err(at(format!(
                "`session` may not set `{field}` (the set's `env` and each task's initial state do)"
            )));
        }
        let mut request = spec.session.clone();
        request.insert("env".into(), Value::String(spec.env.clone()));
        crate::SessionRequest::parse(&Value::Object(request))
            .map_err(|e| at(format!("`session`: {e}")))?;
        let tasks = match &spec.tasks {
            None => Vec::new(),
            Some(file) => {
                let file = base.join(file);
                let text = std::fs::read_to_string(&file)
                    .map_err(|e| at(format!("`tasks`: cannot read {}: {e}", file.display())))?;
                let tasks = read_tasks(&text, &file.display().to_string()).map_err(at)?;
                if tasks.is_empty() {
                    return Err(at(format!("`tasks`: {} holds no task", file.display())));
                }
                tasks
            }
        };
        sets.push(TaskSet {
            name: spec.name,
            env: spec.env,
            session: spec.session,
            tasks,
            max_tool_calls: spec.max_tool_calls,
            terminal_tools: spec.terminal_tools,
            reward: spec.reward,
        });
    }
    Ok(sets)
}

/// The reward of a final state against a checker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reward {
    /// 1 when every checked value is right, else 0.
    pub binary: f64,
    /// The share of checked values that are right (1 when nothing is checked).
    pub partial: f64,
    /// Values checked.
    pub checks: usize,
    /// What is wrong, one line per value.
    pub failures: Vec<String>,
}

/// The reward of `state`, reached from `initial`, against `checker`.
pub fn reward(checker: &StateChecker, initial: &Value, state: &Value) -> Reward {
    let Verdict { checks, failures } = checker.check(initial, state);
    let right = checks.saturating_sub(failures.len());
    Reward {
        binary: if failures.is_empty() { 1.0 } else { 0.0 },
        partial: if checks == 0 {
            1.0
        } else {
            right as f64 / checks as f64
        },
        checks,
        failures,
    }
}

/// How an episode ended, in the words of envsim's trajectories (`envsim synth`'s `finish`),
/// so that `curate` reads RL rollouts as it reads synthesized conversations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// The agent gave its final answer.
    FinalAnswer,
    /// A terminal tool was called.
    TerminalTool,
    /// The tool-call budget is spent.
    StepBudget,
}

/// An episode's bookkeeping beside its session (stored with it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    /// The task set.
    pub set: String,
    /// The task (`None`: a set without tasks).
    pub task_id: Option<String>,
    /// The instruction.
    pub instruction: String,
    /// The checker (`None`: no reward).
    pub checker: Option<StateChecker>,
    /// Why there is no checker, when there is none.
    pub checker_missing_because: Option<String>,
    /// The seed `reset` was given.
    pub seed: Option<u64>,
    /// Tool calls made.
    pub tool_calls: usize,
    /// The reward reported with each step (`None` where there is no checker).
    pub rewards: Vec<Option<f64>>,
    /// How it ended (`None`: it goes on).
    pub finish: Option<Finish>,
    /// The final answer.
    pub answer: Option<String>,
    /// The final reward.
    pub reward: Option<Reward>,
    /// The replies of steps whose requests carried an idempotency key, by key.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub replies: std::collections::BTreeMap<String, KeptReply>,
    /// The last step's action and reply (a retry by `expected_step` is answered with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<KeptReply>,
}

impl Episode {
    /// Whether it has ended.
    pub fn done(&self) -> bool {
        self.finish.is_some()
    }
}

/// A task set's live part: the set, checkers made from reference calls, the next task drawn.
pub struct SetState {
    /// The set.
    pub set: TaskSet,
    checkers: std::sync::Mutex<std::collections::HashMap<String, Result<StateChecker, String>>>,
    next: AtomicUsize,
}

impl SetState {
    /// The live part of `set`.
    pub fn new(set: TaskSet) -> SetState {
        SetState {
            set,
            checkers: std::sync::Mutex::new(std::collections::HashMap::new()),
            next: AtomicUsize::new(0),
        }
    }
}

/// The error an OpenEnv client reads: over HTTP a status with `{"detail": …}` (422 for what
/// the request got wrong, as the reference server's validation does), over the WebSocket
/// `{"type": "error", "data": {"message", "code"}}`.
#[derive(Debug)]
pub struct EnvError {
    status: StatusCode,
    code: &'static str,
    message: String,
    location: Vec<&'static str>,
}

impl EnvError {
    fn invalid(location: &[&'static str], message: impl Into<String>) -> EnvError {
        EnvError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: "VALIDATION_ERROR",
            message: message.into(),
            location: location.to_vec(),
        }
    }

    fn execution(status: StatusCode, message: impl Into<String>) -> EnvError {
        EnvError {
            status,
            code: "EXECUTION_ERROR",
            message: message.into(),
            location: Vec::new(),
        }
    }

    /// The WebSocket message.
    fn message(&self) -> Value {
        json!({"type": "error", "data": {"message": self.message, "code": self.code}})
    }
}

impl From<ApiError> for EnvError {
    fn from(e: ApiError) -> Self {
        let code = if e.0.is_client_error() {
            "VALIDATION_ERROR"
        } else {
            "EXECUTION_ERROR"
        };
        EnvError {
            status: e.0,
            code,
            message: e.1,
            location: Vec::new(),
        }
    }
}

impl IntoResponse for EnvError {
    fn into_response(self) -> Response {
        let body = if self.status == StatusCode::UNPROCESSABLE_ENTITY {
            json!({"detail": [{"type": "value_error", "loc": self.location, "msg": self.message}]})
        } else {
            json!({"detail": self.message})
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert("retry-after", crate::RETRY_AFTER_S.into());
        }
        response
    }
}

type EnvResult<T> = Result<T, EnvError>;

/// What `reset` may say.
#[derive(Debug, Default)]
struct ResetArgs {
    seed: Option<u64>,
    episode_id: Option<String>,
    task_id: Option<String>,
}

fn reset_args(data: &Value) -> EnvResult<ResetArgs> {
    let Value::Object(fields) = data else {
        return Err(EnvError::invalid(&["body"], "must be a JSON object"));
    };
    let mut args = ResetArgs::default();
    for (key, value) in fields {
        match (key.as_str(), value) {
            (_, Value::Null) => {}
            ("seed", v) => {
                args.seed = Some(v.as_u64().ok_or_else(|| {
                    EnvError::invalid(&["body", "seed"], "must be an integer ≥ 0")
                })?)
            }
            ("episode_id", Value::String(id)) if valid_id(id) => args.episode_id = Some(id.clone()),
            ("episode_id", _) => {
                return Err(EnvError::invalid(
                    &["body", "episode_id"],
                    "must be 1 to 128 letters, digits, '-', '_' or '.'",
                ))
            }
            ("task_id", Value::String(id)) => args.task_id = Some(id.clone()),
            ("task_id", _) => {
                return Err(EnvError::invalid(&["body", "task_id"], "must be a string"))
            }
            (other, _) => {
                return Err(EnvError::invalid(
                    &["body"],
                    format!("unknown field {other:?} (reset takes seed, episode_id, task_id)"),
                ))
            }
        }
    }
    Ok(args)
}

fn valid_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// An action: a tool call or the final answer.
#[derive(Debug, PartialEq)]
enum Action {
    Call(String, Map<String, Value>),
    Answer(String),
}

impl Action {
    /// As the client gave it (without metadata): what a retry must repeat.
    fn to_json(&self) -> Value {
        match self {
            Action::Call(tool, arguments) => json!({"tool": tool, "arguments": arguments}),
            Action::Answer(answer) => json!({"answer": answer}),
        }
    }
}

/// How a step request names itself for retries: the action's `metadata.idempotency_key` (or
/// the `Idempotency-Key` header over HTTP) and `metadata.expected_step` (the episode's
/// `step_count` the client believes it is at).
#[derive(Debug, Default, PartialEq)]
struct Retry {
    key: Option<String>,
    expected_step: Option<usize>,
}

fn retry_of(data: &Value, at: &'static str, header: Option<String>) -> EnvResult<Retry> {
    let metadata = data.get("metadata").filter(|m| !m.is_null());
    let metadata = match metadata {
        None => None,
        Some(Value::Object(m)) => Some(m),
        Some(_) => return Err(EnvError::invalid(&[at, "metadata"], "must be an object")),
    };
    let field = |name: &str| metadata.and_then(|m| m.get(name)).filter(|v| !v.is_null());
    let key = match field("idempotency_key") {
        None => header,
        Some(Value::String(k)) => Some(k.clone()),
        Some(_) => {
            return Err(EnvError::invalid(
                &[at, "metadata", "idempotency_key"],
                "must be a string",
            ))
        }
    };
    let expected_step = match field("expected_step") {
        None => None,
        Some(v) => Some(v.as_u64().map(|n| n as usize).ok_or_else(|| {
            EnvError::invalid(
                &[at, "metadata", "expected_step"],
                "must be an integer ≥ 0 (the episode's step_count)",
            )
        })?),
    };
    let checked = crate::StepGuard::new(key.as_deref(), None)
        .map_err(|e| EnvError::invalid(&[at, "metadata", "idempotency_key"], e.to_string()))?;
    Ok(Retry {
        key: checked.key,
        expected_step,
    })
}

/// A step's reply kept for a retry of its request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeptReply {
    /// The action (`{"tool", "arguments"}` or `{"answer"}`).
    pub action: Value,
    /// The reply.
    pub reply: Value,
}

fn action_of(data: &Value, at: &'static str) -> EnvResult<Action> {
    let Value::Object(fields) = data else {
        return Err(EnvError::invalid(&[at], "the action must be a JSON object"));
    };
    if let Some(other) = fields
        .keys()
        .find(|k| !matches!(k.as_str(), "tool" | "arguments" | "answer" | "metadata"))
    {
        return Err(EnvError::invalid(
            &[at],
            format!("unknown field {other:?} (an action is {{\"tool\", \"arguments\"}} or {{\"answer\"}})"),
        ));
    }
    match (fields.get("tool"), fields.get("answer")) {
        (Some(Value::String(tool)), None) => {
            let arguments = envsim_core::transcript::call_arguments(fields.get("arguments"))
                .map_err(|e| EnvError::invalid(&[at, "arguments"], e))?;
            Ok(Action::Call(tool.clone(), arguments))
        }
        (None, Some(Value::String(answer))) => Ok(Action::Answer(answer.clone())),
        (Some(_), Some(_)) => Err(EnvError::invalid(
            &[at],
            "give either `tool` (with `arguments`) or `answer`, not both",
        )),
        (Some(_), None) => Err(EnvError::invalid(&[at, "tool"], "must be a string")),
        (None, Some(_)) => Err(EnvError::invalid(&[at, "answer"], "must be a string")),
        (None, None) => Err(EnvError::invalid(
            &[at],
            "give `tool` (with `arguments`) or `answer`",
        )),
    }
}

/// The reply to `reset` and `step`.
fn step_result(observation: Value, reward: Option<f64>, done: bool) -> Value {
    json!({"observation": observation, "reward": reward, "done": done})
}

impl AppState {
    fn task_set(&self, name: &str) -> EnvResult<Arc<SetState>> {
        self.openenv.get(name).cloned().ok_or_else(|| EnvError {
            status: StatusCode::NOT_FOUND,
            code: "SESSION_ERROR",
            message: format!(
                "no task set {name:?} (served: {})",
                self.openenv.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
            location: Vec::new(),
        })
    }

    /// The checker of `task`: its own, or one made by executing its reference calls (once).
    async fn checker(&self, set: &SetState, task: &Task) -> Result<StateChecker, String> {
        if let Some(checker) = &task.checker {
            return Ok(checker.clone());
        }
        if task.reference_calls.is_empty() {
            return Err("the task has neither a checker nor reference calls".into());
        }
        if let Some(known) = lock(&set.checkers).get(&task.id) {
            return known.clone();
        }
        let made = self.executed_checker(&set.set, task).await;
        lock(&set.checkers).insert(task.id.clone(), made.clone());
        made
    }

    /// Executes `task`'s reference calls with the environment's code under several seeds and
    /// clocks (sessions of their own, not stored) and makes the checker of what they
    /// determine.
    async fn executed_checker(&self, set: &TaskSet, task: &Task) -> Result<StateChecker, String> {
        let request =
            crate::SessionRequest::parse(&json!({"env": set.env, "primary": "executor"}))?;
        let (env, default_state) = self.environment(&request).await.map_err(|e| e.1)?;
        let backends = self.host.backends(&request, &env)?;
        let initial = task.initial_state.clone().unwrap_or(default_state);
        let mut calls = Vec::with_capacity(task.reference_calls.len());
        for (k, call) in task.reference_calls.iter().enumerate() {
            let name = call["name"].as_str().ok_or_else(|| {
                format!(
                    "reference call {}: `name` is missing or not a string",
                    k + 1
                )
            })?;
            let arguments = envsim_core::transcript::call_arguments(call.get("arguments"))
                .map_err(|e| format!("reference call {} ({name}): {e}", k + 1))?;
            calls.push(ReferenceCall {
                tool: name.to_owned(),
                arguments,
            });
        }
        envsim_sim::reference::checker(
            &env,
            backends.primary.as_ref(),
            &initial,
            &calls,
            &Variation::standard(0),
        )
        .await
        .map_err(|e| e.to_string())
    }

    /// Starts an episode of `set`: a task chosen (by id, by seed, or in turn), its session
    /// made, its bookkeeping stored.
    async fn reset_episode(&self, set_name: &str, args: ResetArgs) -> EnvResult<(String, Value)> {
        let set = self.task_set(set_name)?;
        let tasks = &set.set.tasks;
        let task = match (&args.task_id, args.seed) {
            (Some(id), _) => Some(tasks.iter().find(|t| &t.id == id).ok_or_else(|| {
                EnvError::invalid(
                    &["body", "task_id"],
                    format!("no task {id:?} in {set_name}"),
                )
            })?),
            (None, _) if tasks.is_empty() => None,
            (None, Some(seed)) => Some(&tasks[(seed % tasks.len() as u64) as usize]),
            (None, None) => Some(&tasks[set.next.fetch_add(1, Ordering::Relaxed) % tasks.len()]),
        };
        let mut request = set.set.session.clone();
        request.insert("env".into(), Value::String(set.set.env.clone()));
        if let Some(state) = task.and_then(|t| t.initial_state.clone()) {
            request.insert("state".into(), state);
        }
        if let Some(seed) = args.seed {
            request.insert("seed".into(), json!(seed));
        }
        let (checker, checker_missing_because) = match task {
            None => (None, Some("the task set has no tasks".to_owned())),
            Some(task) => match self.checker(&set, task).await {
                Ok(c) => (Some(c), None),
                Err(why) => (None, Some(why)),
            },
        };
        let (id, _) = self
            .create_session(Value::Object(request), args.episode_id)
            .await?;
        let episode = Episode {
            set: set_name.to_owned(),
            task_id: task.map(|t| t.id.clone()),
            instruction: task.map(|t| t.instruction.clone()).unwrap_or_default(),
            checker,
            checker_missing_because,
            seed: args.seed,
            tool_calls: 0,
            rewards: Vec::new(),
            finish: None,
            answer: None,
            reward: None,
            replies: Default::default(),
            last: None,
        };
        self.store
            .put_episode(&id, &json!(episode))
            .await
            .map_err(|e| ApiError::store(e, format!("starting episode {id:?}")))?;
        let tools = self.entry(&id).await?.env.tools.clone();
        let observation = json!({
            "episode_id": id,
            "task_id": episode.task_id,
            "instruction": episode.instruction,
            "tools": tools,
            "result": null,
            "success": null,
            "tool_calls": 0,
            "max_tool_calls": set.set.max_tool_calls,
        });
        lock(&self.episodes).insert(id.clone(), Arc::new(tokio::sync::Mutex::new(episode)));
        Ok((id, step_result(observation, None, false)))
    }

    async fn episode(&self, id: &str) -> EnvResult<Arc<tokio::sync::Mutex<Episode>>> {
        if let Some(held) = lock(&self.episodes).get(id).cloned() {
            return Ok(held);
        }
        // An episode another server started: its session and bookkeeping from the shared
        // store (a store that cannot be read now is said so, not taken for "no episode").
        if self.store.is_shared() {
            match self.entry(id).await {
                Ok(_) => {
                    if let Some(held) = lock(&self.episodes).get(id).cloned() {
                        return Ok(held);
                    }
                }
                Err(e) if e.0 == StatusCode::NOT_FOUND => {}
                Err(e) => return Err(e.into()),
            }
        }
        Err(EnvError::invalid(
            &["body", "episode_id"],
            format!("no episode {id:?}: reset first"),
        ))
    }

    /// Episode `id`'s bookkeeping, as the shared store has it when it is shared (another
    /// server may have stepped it), else as held.
    async fn current_episode(&self, id: &str) -> EnvResult<Episode> {
        let held = self.episode(id).await?;
        let mut episode = held.lock().await;
        self.refresh_episode(id, &mut episode).await?;
        Ok(episode.clone())
    }

    /// `episode` (held, locked) as a shared store has it: another server may have stepped it.
    async fn refresh_episode(&self, id: &str, episode: &mut Episode) -> Result<(), ApiError> {
        let stored = self
            .store
            .load_episode(id)
            .await
            .map_err(|e| ApiError::store(e, format!("reading episode {id:?}")))?;
        if let Some(info) = stored {
            *episode = parse_episode(id, info)?;
        }
        Ok(())
    }

    /// Holds the stored bookkeeping `info` of episode `id` unless one is held already.
    pub(crate) fn hold_episode(&self, id: &str, info: Value) -> Result<(), ApiError> {
        let episode = parse_episode(id, info)?;
        lock(&self.episodes)
            .entry(id.to_owned())
            .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(episode)));
        Ok(())
    }

    /// One action of episode `id` (of `set_name`); a retried request (its key, or its
    /// expected step one behind with the same action) is answered with its first reply.
    async fn step_episode(
        &self,
        set_name: &str,
        id: &str,
        action: Action,
        retry: Retry,
    ) -> EnvResult<Value> {
        let set = self.task_set(set_name)?;
        let episode = self.episode(id).await?;
        let mut episode = episode.lock().await;
        self.refresh_episode(id, &mut episode).await?;
        if episode.set != set_name {
            return Err(EnvError::invalid(
                &["body", "episode_id"],
                format!("episode {id:?} belongs to the task set {:?}", episode.set),
            ));
        }
        let asked = action.to_json();
        if let Some(kept) = retry.key.as_ref().and_then(|k| episode.replies.get(k)) {
            if kept.action != asked {
                return Err(EnvError::invalid(
                    &["action", "metadata", "idempotency_key"],
                    format!(
                        "episode {id:?}: the idempotency key {:?} was used for the action {}, not {asked}: a key names one request",
                        retry.key.as_deref().unwrap_or_default(),
                        kept.action
                    ),
                ));
            }
            return Ok(kept.reply.clone());
        }
        if let Some(expected) = retry.expected_step {
            let at = episode.rewards.len();
            let last = episode.last.as_ref().filter(|l| l.action == asked);
            match (at == expected, at == expected + 1, last) {
                (true, _, _) => {}
                (false, true, Some(kept)) => return Ok(kept.reply.clone()),
                _ => {
                    return Err(EnvError {
                        status: StatusCode::CONFLICT,
                        code: "VALIDATION_ERROR",
                        message: format!(
                            "episode {id:?} is at step {at}, and the action expected {expected}: it was not taken; read the episode's state and step from where it is"
                        ),
                        location: vec!["action", "metadata", "expected_step"],
                    })
                }
            }
        }
        if episode.done() {
            return Err(EnvError::invalid(
                &["body", "episode_id"],
                format!("episode {id:?} is over: reset to start another"),
            ));
        }
        // What is stored, to go back to when storing this step's bookkeeping fails.
        let before = episode.clone();
        let mut observation = json!({"episode_id": id, "result": null, "success": null});
        match action {
            Action::Answer(answer) => {
                episode.finish = Some(Finish::FinalAnswer);
                episode.answer = Some(answer);
            }
            Action::Call(tool, arguments) => {
                let guard = crate::StepGuard {
                    key: retry.key.clone(),
                    expected_step: None,
                };
                // A step the session took for this key before the episode's bookkeeping
                // was stored (the server stopped between the two) is counted now.
                let crate::Stepped { record, .. } =
                    self.step(id, &tool, &arguments, &guard).await?;
                episode.tool_calls += 1;
                observation["result"] = record.observation.clone();
                observation["success"] = json!(record.success);
                if set.set.terminal_tools.contains(&tool) {
                    episode.finish = Some(Finish::TerminalTool);
                } else if episode.tool_calls >= set.set.max_tool_calls {
                    episode.finish = Some(Finish::StepBudget);
                }
            }
        }
        observation["tool_calls"] = json!(episode.tool_calls);
        let done = episode.done();
        let reward = match (&episode.checker, done) {
            (None, _) => None,
            (Some(_), false) => Some(0.0),
            (Some(checker), true) => {
                let entry = self.entry(id).await?;
                // Another server may have stepped the session last: the state as stored.
                let session = self.fresh(id, &entry).await?;
                let (initial, state) = (session.initial_state().clone(), session.state().clone());
                drop(session);
                let r = reward(checker, &initial, &state);
                let value = match set.set.reward {
                    RewardKind::Binary => r.binary,
                    RewardKind::Partial => r.partial,
                };
                observation["reward_detail"] = json!(r);
                episode.reward = Some(r);
                Some(value)
            }
        };
        if done {
            observation["finish"] = json!(episode.finish);
        }
        episode.rewards.push(reward);
        let reply = step_result(observation, reward, done);
        let kept = KeptReply {
            action: asked,
            reply: reply.clone(),
        };
        if let Some(key) = retry.key {
            episode.replies.insert(key, kept.clone());
        }
        episode.last = Some(kept);
        if let Err(e) = self.store.put_episode(id, &json!(*episode)).await {
            // As stored: a retry with the same key counts the step (taken, or found taken).
            *episode = before;
            let what = format!(
                "step {} of episode {id:?} (its bookkeeping)",
                episode.rewards.len() + 1
            );
            return Err(ApiError::store(e, what).into());
        }
        Ok(reply)
    }

    /// The OpenEnv state of episode `id`: its id and step count, the task, the session's state.
    async fn episode_state(&self, id: &str) -> EnvResult<Value> {
        let episode = self.current_episode(id).await?;
        let entry = self.entry(id).await?;
        let session = self.fresh(id, &entry).await?;
        Ok(json!({
            "episode_id": id,
            "step_count": episode.rewards.len(),
            "task_id": episode.task_id,
            "tool_calls": episode.tool_calls,
            "done": episode.done(),
            "finish": episode.finish,
            "reward": episode.reward,
            "state": session.state().as_ref(),
        }))
    }

    /// The rewards of session `id`'s trajectory, when it is an episode: each step's reward
    /// beside it, the task and the final reward at the top.
    pub(crate) async fn add_rewards(&self, id: &str, trajectory: &mut Value) {
        if !lock(&self.episodes).contains_key(id) {
            return;
        }
        // A step in flight holds the episode: its trajectory waits for it, as the session's
        // own does.
        let Ok(episode) = self.current_episode(id).await else {
            return;
        };
        // Answers are steps of the episode but not of the session: rewards of tool calls go
        // beside their steps, in order.
        if let Some(steps) = trajectory["steps"].as_array_mut() {
            for (step, reward) in steps.iter_mut().zip(&episode.rewards) {
                step["reward"] = json!(reward);
            }
        }
        trajectory["task"] =
            json!({"id": episode.task_id, "instruction": episode.instruction, "set": episode.set});
        trajectory["finish"] = json!(episode.finish);
        trajectory["answer"] = json!(episode.answer);
        trajectory["reward"] = json!(episode.reward);
        trajectory["rewards"] = json!(episode.rewards);
    }

    /// Episodes read back at start (their sessions restored already).
    pub(crate) async fn restore_episodes(&self) -> Result<(), String> {
        let stored = self
            .store
            .load_episodes()
            .await
            .map_err(|e| e.to_string())?;
        let mut episodes = lock(&self.episodes);
        for (id, info) in stored {
            let episode = parse_episode(&id, info).map_err(|e| e.1)?;
            episodes.insert(id, Arc::new(tokio::sync::Mutex::new(episode)));
        }
        Ok(())
    }
}

/// An episode's stored bookkeeping read back.
fn parse_episode(id: &str, info: Value) -> Result<Episode, ApiError> {
    serde_json::from_value(info).map_err(|e| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the stored episode {id}: {e}"),
        )
    })
}

/// `GET /openenv/{set}/health`.
pub async fn health(
    State(state): State<Arc<AppState>>,
    Path(set): Path<String>,
) -> EnvResult<Json<Value>> {
    state.task_set(&set)?;
    Ok(Json(json!({"status": "healthy"})))
}

/// `GET /openenv/{set}/metadata`.
pub async fn metadata(
    State(state): State<Arc<AppState>>,
    Path(set): Path<String>,
) -> EnvResult<Json<Value>> {
    let live = state.task_set(&set)?;
    let s = &live.set;
    Ok(Json(json!({
        "name": s.name,
        "description": format!(
            "envsim environment {} ({} tasks, at most {} tool calls per episode, {} reward)",
            s.env,
            s.tasks.len(),
            s.max_tool_calls,
            match s.reward { RewardKind::Binary => "binary", RewardKind::Partial => "partial" }
        ),
        "readme_content": null,
        "version": env!("CARGO_PKG_VERSION"),
        "author": null,
        "documentation_url": null,
    })))
}

/// The JSON schemas of actions, observations and states of `set`.
pub fn schemas(tools: &[Value]) -> Value {
    let names: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    json!({
        "action": {
            "title": "EnvsimAction",
            "description": "A tool call ({\"tool\", \"arguments\"}) or the final answer ({\"answer\"}), which ends the episode.",
            "type": "object",
            "properties": {
                "tool": {"type": "string", "enum": names, "description": "The tool to call."},
                "arguments": {"type": "object", "description": "Its arguments, as its schema in the observation's `tools` says."},
                "answer": {"type": "string", "description": "The final answer: ends the episode."},
                "metadata": {"type": "object"}
            },
            "additionalProperties": false
        },
        "observation": {
            "title": "EnvsimObservation",
            "type": "object",
            "properties": {
                "episode_id": {"type": "string"},
                "task_id": {"type": ["string", "null"]},
                "instruction": {"type": "string", "description": "The task (on reset)."},
                "tools": {"type": "array", "description": "OpenAI tool schemas (on reset)."},
                "result": {"description": "The tool's answer."},
                "success": {"type": ["boolean", "null"]},
                "tool_calls": {"type": "integer"},
                "max_tool_calls": {"type": "integer"},
                "finish": {"type": "string", "enum": ["final_answer", "terminal_tool", "step_budget"]},
                "reward_detail": {"type": "object", "description": "binary, partial, checks, failures"}
            }
        },
        "state": {
            "title": "State",
            "type": "object",
            "properties": {
                "episode_id": {"type": ["string", "null"]},
                "step_count": {"type": "integer", "minimum": 0}
            },
            "additionalProperties": true
        }
    })
}

/// `GET /openenv/{set}/schema`.
pub async fn schema(
    State(state): State<Arc<AppState>>,
    Path(set): Path<String>,
) -> EnvResult<Json<Value>> {
    let live = state.task_set(&set)?;
    let request = crate::SessionRequest::parse(&json!({"env": live.set.env}))
        .map_err(|e| EnvError::execution(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    let (env, _) = state.environment(&request).await?;
    Ok(Json(schemas(&env.tools)))
}

/// `GET /openenv/{set}/openapi.json`: the paths `openenv validate` reads.
pub async fn openapi(
    State(state): State<Arc<AppState>>,
    Path(set): Path<String>,
) -> EnvResult<Json<Value>> {
    state.task_set(&set)?;
    let op = |method: &str, id: &str| json!({method: {"operationId": id, "responses": {"200": {"description": "OK"}}}});
    Ok(Json(json!({
        "openapi": "3.1.0",
        "info": {"title": format!("envsim OpenEnv: {set}"), "version": "1.0.0"},
        "paths": {
            "/reset": op("post", "reset"),
            "/step": op("post", "step"),
            "/state": op("get", "state"),
            "/health": op("get", "health"),
            "/metadata": op("get", "metadata"),
            "/schema": op("get", "schema"),
            "/mcp": op("post", "mcp"),
            "/tasks": op("get", "tasks"),
        }
    })))
}

/// `GET /openenv/{set}/tasks`: the set's tasks (`{"tasks": [{"id", "instruction"}]}`), for
/// clients that choose them (the generated verifiers package, [`crate::verifiers`]).
pub async fn tasks(
    State(state): State<Arc<AppState>>,
    Path(set): Path<String>,
) -> EnvResult<Json<Value>> {
    let live = state.task_set(&set)?;
    let tasks: Vec<Value> = live
        .set
        .tasks
        .iter()
        .map(|t| json!({"id": t.id, "instruction": t.instruction}))
        .collect();
    Ok(Json(json!({ "tasks": tasks })))
}

/// `POST /openenv/{set}/reset`.
pub async fn reset(
    State(state): State<Arc<AppState>>,
    Path(set): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> EnvResult<Json<Value>> {
    let data = body_json(&body)?;
    let args = reset_args(&data)?;
    let (_, result) = state.reset_episode(&set, args).await?;
    Ok(Json(result))
}

/// `POST /openenv/{set}/step`: `{"action": {…}, "episode_id": …}`.
pub async fn step(
    State(state): State<Arc<AppState>>,
    Path(set): Path<String>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> EnvResult<Json<Value>> {
    let data = body_json(&body)?;
    let Value::Object(fields) = &data else {
        return Err(EnvError::invalid(&["body"], "must be a JSON object"));
    };
    let id = match fields.get("episode_id") {
        Some(Value::String(id)) => id.clone(),
        _ => {
            return Err(EnvError::invalid(
                &["body", "episode_id"],
                "the episode to step (the `episode_id` of its reset) is required",
            ))
        }
    };
    let data = fields
        .get("action")
        .ok_or_else(|| EnvError::invalid(&["body", "action"], "Field required"))?;
    let action = action_of(data, "action")?;
    let retry = retry_of(data, "action", crate::idempotency_key(&headers)?)?;
    // On a task of its own, as `AppState::step_detached` says why: a client that gives up
    // must not cut a step between its change and its commit.
    let shown = id.clone();
    let reply = tokio::spawn(async move { state.step_episode(&set, &id, action, retry).await })
        .await
        .map_err(|e| {
            EnvError::execution(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("a step of episode {shown:?} failed in the server: {e} (a server fault: report it)"),
            )
        })??;
    Ok(Json(reply))
}

/// The query of `GET /openenv/{set}/state`.
#[derive(Deserialize)]
pub struct StateQuery {
    episode_id: Option<String>,
}

/// `GET /openenv/{set}/state?episode_id=…`.
pub async fn state_of(
    State(state): State<Arc<AppState>>,
    Path(set): Path<String>,
    Query(query): Query<StateQuery>,
) -> EnvResult<Json<Value>> {
    state.task_set(&set)?;
    match query.episode_id {
        Some(id) => Ok(Json(state.episode_state(&id).await?)),
        None => Ok(Json(json!({"episode_id": null, "step_count": 0}))),
    }
}

/// `POST /openenv/{set}/mcp`: a JSON-RPC error; tools are served over MCP per session.
pub async fn mcp(
    State(state): State<Arc<AppState>>,
    Path(set): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> EnvResult<Json<Value>> {
    state.task_set(&set)?;
    let id = body_json(&body)
        .ok()
        .and_then(|b| b.get("id").cloned())
        .unwrap_or(Value::Null);
    Ok(Json(json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32603, "message": "this OpenEnv environment takes tool calls as step actions; each episode's tools are also served over MCP at /sessions/{episode_id}/mcp", "data": null}
    })))
}

/// `GET /openenv/{set}/ws`: one connection, episode after episode.
pub async fn ws(
    State(state): State<Arc<AppState>>,
    Path(set): Path<String>,
    upgrade: WebSocketUpgrade,
) -> EnvResult<Response> {
    state.task_set(&set)?;
    Ok(upgrade
        .max_message_size(state.config.max_body_bytes)
        .on_upgrade(move |socket| talk(state, set, socket)))
}

/// The WebSocket conversation: every message answered in turn until `close`.
async fn talk(state: Arc<AppState>, set: String, mut socket: WebSocket) {
    let mut current: Option<String> = None;
    while let Some(Ok(message)) = socket.recv().await {
        let text = match message {
            Message::Text(text) => text,
            Message::Close(_) => break,
            // Pings are answered by the library; binary frames are not messages of the protocol.
            _ => continue,
        };
        let reply = match serde_json::from_str::<Value>(text.as_str()) {
            Err(e) => {
                json!({"type": "error", "data": {"message": format!("Invalid JSON: {e}"), "code": "INVALID_JSON"}})
            }
            Ok(message) => match message["type"].as_str() {
                Some("close") => break,
                Some(kind) => answer(&state, &set, &mut current, kind, message.get("data"))
                    .await
                    .unwrap_or_else(|e| e.message()),
                None => {
                    json!({"type": "error", "data": {"message": "the message has no `type`", "code": "VALIDATION_ERROR"}})
                }
            },
        };
        if socket
            .send(Message::Text(reply.to_string().into()))
            .await
            .is_err()
        {
            break;
        }
    }
}

async fn answer(
    state: &AppState,
    set: &str,
    current: &mut Option<String>,
    kind: &str,
    data: Option<&Value>,
) -> EnvResult<Value> {
    match kind {
        "reset" => {
            let args = reset_args(data.unwrap_or(&json!({})))?;
            let (id, result) = state.reset_episode(set, args).await?;
            *current = Some(id);
            Ok(json!({"type": "observation", "data": result}))
        }
        "step" => {
            let id = current
                .clone()
                .ok_or_else(|| EnvError::invalid(&["data"], "no episode: send reset first"))?;
            let data = data.ok_or_else(|| EnvError::invalid(&["data"], "Field required"))?;
            let action = action_of(data, "data")?;
            let retry = retry_of(data, "data", None)?;
            let result = state.step_episode(set, &id, action, retry).await?;
            Ok(json!({"type": "observation", "data": result}))
        }
        "state" => {
            let data = match current {
                Some(id) => state.episode_state(id).await?,
                None => json!({"episode_id": null, "step_count": 0}),
            };
            Ok(json!({"type": "state", "data": data}))
        }
        "mcp" => Ok(json!({"type": "mcp", "data": {
            "jsonrpc": "2.0",
            "id": data.and_then(|d| d.get("id")).cloned().unwrap_or(Value::Null),
            "error": {"code": -32603, "message": "this OpenEnv environment takes tool calls as step actions", "data": null}
        }})),
        other => Ok(
            json!({"type": "error", "data": {"message": format!("Unknown message type: {other}"), "code": "UNKNOWN_TYPE"}}),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reward_counts_checked_values_binary_and_partial() {
        let checker = StateChecker::parse(&json!({"type": "state_values",
            "expect": {"/tickets/T1/status": "closed", "/tickets/T1/owner": "ana"},
            "absent": ["/tickets/T2"]}))
        .unwrap();
        let initial = json!({"tickets": {}});
        let right = json!({"tickets": {"T1": {"status": "closed", "owner": "ana"}}});
        let r = reward(&checker, &initial, &right);
        assert_eq!((r.binary, r.partial, r.checks), (1.0, 1.0, 3));
        assert!(r.failures.is_empty());
        let half = json!({"tickets": {"T1": {"status": "open", "owner": "ana"}, "T2": {}}});
        let r = reward(&checker, &initial, &half);
        assert_eq!((r.binary, r.checks), (0.0, 3));
        assert!((r.partial - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(r.failures.len(), 2);
    }

    #[test]
    fn actions_are_a_call_or_an_answer_and_nothing_else() {
        assert_eq!(
            action_of(&json!({"tool": "close", "arguments": {"id": "T1"}}), "data").unwrap(),
            Action::Call(
                "close".into(),
                json!({"id": "T1"}).as_object().unwrap().clone()
            )
        );
        assert_eq!(
            action_of(&json!({"answer": "done"}), "data").unwrap(),
            Action::Answer("done".into())
        );
        for (bad, says) in [
            (json!({"tool": "a", "answer": "b"}), "not both"),
            (json!({}), "give `tool`"),
            (json!({"tool": 3}), "must be a string"),
            (json!({"tool": "a", "args": {}}), "unknown field \"args\""),
            (json!([1]), "must be a JSON object"),
        ] {
            let e = action_of(&bad, "data").unwrap_err();
            assert!(e.message.contains(says), "{bad}: {}", e.message);
            assert_eq!(e.code, "VALIDATION_ERROR");
        }
    }

    #[test]
    fn task_set_files_are_read_and_checked_by_set_and_field() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("t.jsonl"),
            "{\"id\": \"a\", \"instruction\": \"Do a.\"}\n",
        )
        .unwrap();
        let file = dir.path().join("sets.json");
        std::fs::write(
            &file,
            r#"[{"name": "desk-llm", "env": "desk", "tasks": "t.jsonl",
                 "session": {"primary": "faulty", "anchor": "full"}, "max_tool_calls": 4,
                 "terminal_tools": ["close_ticket"], "reward": "partial"},
                {"name": "desk", "env": "desk"}]"#,
        )
        .unwrap();
        let sets = read_task_sets(&file).unwrap();
        assert_eq!(sets.len(), 2);
        assert_eq!(sets[0].tasks[0].id, "a");
        assert_eq!(sets[0].session["primary"], "faulty");
        assert_eq!(
            (sets[0].max_tool_calls, sets[0].reward),
            (4, RewardKind::Partial)
        );
        assert_eq!(
            (sets[1].max_tool_calls, sets[1].reward),
            (30, RewardKind::Binary)
        );
        assert!(sets[1].tasks.is_empty());
        for (text, says) in [
            (
                r#"[{"name": "x", "env": "desk", "rewards": "binary"}]"#,
                "unknown field `rewards`",
            ),
            (
                r#"[{"name": "x", "env": "desk", "session": {"anchor": "maybe"}}]"#,
                "task set \"x\": `session`: field `anchor`",
            ),
            (
                r#"[{"name": "x", "env": "desk", "session": {"state": {}}}]"#,
                "may not set `state`",
            ),
            (r#"[{"name": "x y", "env": "desk"}]"#, "`name` must be"),
            (
                r#"[{"name": "x", "env": "desk"}, {"name": "x", "env": "desk"}]"#,
                "used twice",
            ),
            (
                r#"[{"name": "x", "env": "desk", "max_tool_calls": 0}]"#,
                "at least 1",
            ),
            (
                r#"[{"name": "x", "env": "desk", "tasks": "none.jsonl"}]"#,
                "`tasks`: cannot read",
            ),
        ] {
            std::fs::write(&file, text).unwrap();
            let e = read_task_sets(&file).unwrap_err();
            assert!(
                e.starts_with(&file.display().to_string()) && e.contains(says),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn reset_arguments_are_checked_by_field() {
        let a = reset_args(&json!({"seed": 7, "episode_id": "ep-1", "task_id": "t2"})).unwrap();
        assert_eq!(
            (a.seed, a.episode_id.as_deref(), a.task_id.as_deref()),
            (Some(7), Some("ep-1"), Some("t2"))
        );
        for (bad, at) in [
            (json!({"seed": -1}), "seed"),
            (json!({"episode_id": "a b"}), "episode_id"),
            (json!({"start": 2}), "body"),
        ] {
            let e = reset_args(&bad).unwrap_err();
            assert_eq!(e.location.last().copied(), Some(at), "{bad}");
        }
    }

    #[test]
    fn task_files_are_read_with_the_line_of_a_fault() {
        let text = "{\"id\": \"t1\", \"instruction\": \"Close T1\", \"reference_calls\": [{\"name\": \"close\", \"arguments\": {}}]}\n\n{\"id\": \"t1\"}\n";
        assert_eq!(
            read_tasks(text, "tasks.jsonl").unwrap_err(),
            "tasks.jsonl: line 3: the task id \"t1\" is used twice"
        );
        let bad_checker = "{\"id\": \"t1\", \"checker\": {\"type\": \"x\"}}";
        assert!(read_tasks(bad_checker, "f")
            .unwrap_err()
            .starts_with("f: line 1: `checker`:"));
        let tasks = read_tasks(&text[..text.find('\n').unwrap()], "f").unwrap();
        assert_eq!(tasks[0].reference_calls.len(), 1);
        // An RL episode record as `envsim curate --formats rl` writes it, without steps.
        let episode = json!({"id": "t9", "env": "desk", "environment": {"package": "desk", "state": null},
            "instruction": "Close T1", "turns": [], "initial_state": {"tickets": {}}, "tools": [],
            "reference_calls": null, "checker": null,
            "checker_missing_because": "synthesized without the environment's code"});
        let tasks = read_tasks(&episode.to_string(), "rl_episodes.jsonl").unwrap();
        assert_eq!(tasks[0].id, "t9");
        assert!(tasks[0].reference_calls.is_empty() && tasks[0].checker.is_none());
        assert_eq!(tasks[0].initial_state, Some(json!({"tickets": {}})));
    }
}

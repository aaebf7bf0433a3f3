//! Recorded agent trajectories: reading them, and turning the runs that hold states into
//! transitions, so a benchmark can be built from real rollouts instead of (or besides) the
//! scenario driver. Runs that hold only calls are re-executed by [`crate::replay`].
//!
//! Three input formats, JSON Lines or a JSON array of records:
//! - **reference run records**: `{"task_info": {"env_id", "task_id", ...}, "trajectory": [step0,
//!   step1, ...]}` where step 0 holds the initial `config` and every later step holds `action`,
//!   `observation` (`{"type", "content"}`) and `config` (the state after the step); a step without
//!   `config` changed nothing (as the reference's own conversion assumes), and a run in which no
//!   step has one is call-only;
//! - **envsim trajectories**: `{"env", "task_id", "initial_state": {...}, "steps": [{"action":
//!   {"name", "arguments"}, "observation": str, "state_after": {...}, "seed", "clock"}]}`
//!   (`state_after` absent: unchanged; `seed`/`clock` optional);
//! - **OpenAI chat transcripts**: `{"messages": [...], "env"?, "initial_state"?}` or a bare list
//!   of messages, the calls in assistant `tool_calls` (or legacy `function_call`), their
//!   observations in the `tool` (or `function`) messages that answer them.
//!
//! Recorded transitions cannot be re-run under another clock, so their `unpredictable` list is
//! empty; environment code and tool schemas come from the package of the same name when given.

use envsim_core::diff::{fine_diff, reference_change_count};
use envsim_core::python::PyValue;
use envsim_core::reference::extract::parse_to_obj;
use envsim_core::score::observation_success;
use envsim_exec::package::{Convention, EnvPackage};
use envsim_explore::driver::Intent;
use envsim_explore::record::{Outcome, StateText, TransitionRecord};
use serde_json::{json, Map, Value};

/// Which trajectory format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrajectoryFormat {
    /// The reference's (EnvScaler's) agent run records.
    Reference,
    /// envsim trajectory JSONL.
    Envsim,
    /// OpenAI chat transcripts: assistant `tool_calls` answered by `tool` messages.
    OpenAi,
}

impl TrajectoryFormat {
    /// The format a record is in, from its shape: `task_info` + `trajectory` (reference),
    /// `steps` (envsim), `messages` or a list of messages (OpenAI).
    pub fn detect(record: &Value) -> Option<TrajectoryFormat> {
        match record {
            Value::Object(o) if o.contains_key("trajectory") => Some(TrajectoryFormat::Reference),
            Value::Object(o) if o.contains_key("steps") => Some(TrajectoryFormat::Envsim),
            Value::Object(o) if o.contains_key("messages") => Some(TrajectoryFormat::OpenAi),
            Value::Array(items) if items.iter().all(|m| m.get("role").is_some()) => {
                Some(TrajectoryFormat::OpenAi)
            }
            _ => None,
        }
    }
}

/// A located import error.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{source_name}: {location}: {message}")]
pub struct TrajectoryError {
    /// The file.
    pub source_name: String,
    /// Record (and step, field).
    pub location: String,
    /// What is wrong.
    pub message: String,
}

/// One recorded call.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedStep {
    /// Tool name.
    pub tool: String,
    /// Arguments.
    pub arguments: Map<String, Value>,
    /// The observation as recorded (usually text), when the record has one.
    pub observation: Option<Value>,
    /// The state after, when the record has one.
    pub state_after: Option<Value>,
    /// Seed and clock the step ran with, when the record says (envsim's own files do).
    pub seed: Option<u64>,
    /// Frozen clock, seconds since the epoch.
    pub clock: Option<f64>,
}

/// One recorded run: where it starts and the calls it made.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRun {
    /// Where the record is (`line 3`, `record 0`).
    pub location: String,
    /// Its format.
    pub format: TrajectoryFormat,
    /// Environment named by the record, if any.
    pub env: Option<String>,
    /// Task id (the record's, else its position).
    pub task_id: String,
    /// Initial state, if the record holds one.
    pub initial_state: Option<Value>,
    /// The package state the record names as its start (`"state": "db.json"`), when it holds
    /// none itself: how records over large databases avoid repeating them.
    pub state: Option<String>,
    /// The calls, in order.
    pub steps: Vec<RecordedStep>,
}

impl RecordedRun {
    /// True when no step records a state after: the transitions must come from re-executing
    /// the calls (a record that holds states for some steps means "unchanged" where one is
    /// missing, as the reference's own conversion assumes).
    pub fn is_call_only(&self) -> bool {
        self.initial_state.is_none() || self.steps.iter().all(|s| s.state_after.is_none())
    }
}

/// Reads recorded runs; `format` `None` detects it per record.
pub fn read_runs(
    text: &str,
    source: &str,
    format: Option<TrajectoryFormat>,
) -> Result<Vec<RecordedRun>, TrajectoryError> {
    let records =
        envsim_core::formats::records(text.as_bytes(), source).map_err(|e| TrajectoryError {
            source_name: source.to_owned(),
            location: e.location.to_string(),
            message: e.message,
        })?;
    // A file that is one JSON array of chat messages is one transcript, not one record per
    // message.
    let whole_transcript = text.trim_start().starts_with('[')
        && format.is_none_or(|f| f == TrajectoryFormat::OpenAi)
        && !records.is_empty()
        && records
            .iter()
            .all(|r| r.value.get("role").is_some_and(Value::is_string));
    if whole_transcript {
        let messages = Value::Array(records.into_iter().map(|r| r.value).collect());
        return Ok(vec![read_run(
            &messages,
            "the transcript",
            0,
            TrajectoryFormat::OpenAi,
            source,
        )?]);
    }
    records
        .into_iter()
        .map(|r| {
            let location = r.location.to_string();
            let format = match format.or_else(|| TrajectoryFormat::detect(&r.value)) {
                Some(format) => format,
                None => {
                    return Err(TrajectoryError {
                        source_name: source.to_owned(),
                        location,
                        message: "not a trajectory record: expected `task_info` + `trajectory` (reference), `steps` (envsim) or `messages` (OpenAI chat)".into(),
                    })
                }
            };
            read_run(&r.value, &location, r.index, format, source)
        })
        .collect()
}

/// One record (already parsed) in `format`, as a run; `location` and `index` say where it is.
pub fn read_run(
    record: &Value,
    location: &str,
    index: usize,
    format: TrajectoryFormat,
    source: &str,
) -> Result<RecordedRun, TrajectoryError> {
    let err = |field: &str, message: &str| TrajectoryError {
        source_name: source.to_owned(),
        location: format!("{location}, field `{field}`"),
        message: message.to_owned(),
    };
    let object_or_absent = |v: Option<&Value>, field: &str| match v {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Object(_)) => Ok(Some(v.clone())),
        Some(_) => Err(err(field, "expected an object")),
    };
    let mut run = RecordedRun {
        location: location.to_owned(),
        format,
        env: None,
        task_id: index.to_string(),
        initial_state: None,
        state: None,
        steps: Vec::new(),
    };
    match format {
        TrajectoryFormat::Reference => {
            let info = record
                .get("task_info")
                .ok_or_else(|| err("task_info", "missing"))?;
            run.env = Some(
                id(info.get("env_id"))
                    .ok_or_else(|| err("task_info.env_id", "missing or not a string"))?,
            );
            if let Some(task) = id(info.get("task_id")) {
                run.task_id = task;
            }
            let trajectory = record
                .get("trajectory")
                .and_then(Value::as_array)
                .ok_or_else(|| err("trajectory", "missing or not a list"))?;
            run.initial_state = object_or_absent(
                trajectory.first().and_then(|s| s.get("config")),
                "trajectory.0.config",
            )?;
            for (i, step) in trajectory.iter().enumerate().skip(1) {
                let field = format!("trajectory.{i}");
                let observation = step
                    .pointer("/observation/content")
                    .or_else(|| step.get("observation"))
                    .cloned();
                let (tool, arguments) = action(step.get("action"), &field, &err)?;
                run.steps.push(RecordedStep {
                    tool,
                    arguments,
                    observation,
                    state_after: object_or_absent(step.get("config"), &format!("{field}.config"))?,
                    seed: None,
                    clock: None,
                });
            }
        }
        TrajectoryFormat::Envsim => {
            run.env =
                Some(id(record.get("env")).ok_or_else(|| err("env", "missing or not a string"))?);
            if let Some(task) = id(record.get("task_id")) {
                run.task_id = task;
            }
            run.initial_state = object_or_absent(record.get("initial_state"), "initial_state")?;
            run.state = match record.get("state") {
                None | Some(Value::Null) => None,
                Some(Value::String(name)) => Some(name.clone()),
                Some(_) => return Err(err("state", "expected the name of a package state")),
            };
            let steps = record
                .get("steps")
                .and_then(Value::as_array)
                .ok_or_else(|| err("steps", "missing or not a list"))?;
            for (i, step) in steps.iter().enumerate() {
                let field = format!("step {}", i + 1);
                let (tool, arguments) = action(step.get("action"), &field, &err)?;
                let seed = match step.get("seed") {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(v.as_u64().ok_or_else(|| {
                        err(&format!("{field}: seed"), "expected a non-negative integer")
                    })?),
                };
                let clock = match step.get("clock") {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(v.as_f64().ok_or_else(|| {
                        err(
                            &format!("{field}: clock"),
                            "expected seconds since the epoch",
                        )
                    })?),
                };
                run.steps.push(RecordedStep {
                    tool,
                    arguments,
                    observation: step.get("observation").filter(|v| !v.is_null()).cloned(),
                    state_after: object_or_absent(
                        step.get("state_after"),
                        &format!("{field}: state after"),
                    )?,
                    seed,
                    clock,
                });
            }
        }
        TrajectoryFormat::OpenAi => {
            let messages = match record {
                Value::Array(items) => items,
                other => {
                    run.env = id(other.get("env"));
                    if let Some(task) = id(other.get("task_id")).or_else(|| id(other.get("id"))) {
                        run.task_id = task;
                    }
                    run.initial_state =
                        object_or_absent(other.get("initial_state"), "initial_state")?;
                    other
                        .get("messages")
                        .and_then(Value::as_array)
                        .ok_or_else(|| err("messages", "missing or not a list"))?
                }
            };
            run.steps = chat_calls(messages, &err)?;
        }
    }
    Ok(run)
}

/// The tool calls of a chat transcript, each with the `tool` (or legacy `function`) message
/// that answered it: by `tool_call_id` when the messages carry ids, else in order.
fn chat_calls(
    messages: &[Value],
    err: &dyn Fn(&str, &str) -> TrajectoryError,
) -> Result<Vec<RecordedStep>, TrajectoryError> {
    let mut steps: Vec<RecordedStep> = Vec::new();
    let mut ids: Vec<Option<String>> = Vec::new();
    let mut unanswered: std::collections::VecDeque<usize> = Default::default();
    for (m, message) in messages.iter().enumerate() {
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match role {
            "assistant" => {
                let calls: Vec<(String, &Value)> = match message.get("tool_calls") {
                    Some(Value::Array(calls)) => calls
                        .iter()
                        .enumerate()
                        .map(|(c, call)| (format!("messages.{m}.tool_calls.{c}"), call))
                        .collect(),
                    None | Some(Value::Null) => match message.get("function_call") {
                        Some(call @ Value::Object(_)) => {
                            vec![(format!("messages.{m}.function_call"), call)]
                        }
                        _ => Vec::new(),
                    },
                    Some(_) => {
                        return Err(err(&format!("messages.{m}.tool_calls"), "expected a list"))
                    }
                };
                for (field, call) in calls {
                    let function = call.get("function").unwrap_or(call);
                    let (tool, arguments) = action(Some(function), &field, err)?;
                    ids.push(id(call.get("id")));
                    unanswered.push_back(steps.len());
                    steps.push(RecordedStep {
                        tool,
                        arguments,
                        observation: None,
                        state_after: None,
                        seed: None,
                        clock: None,
                    });
                }
            }
            "tool" | "function" => {
                let content = match message.get("content") {
                    Some(Value::Array(parts)) => Value::String(
                        parts
                            .iter()
                            .filter_map(|p| p.get("text").and_then(Value::as_str))
                            .collect(),
                    ),
                    Some(v) => v.clone(),
                    None => Value::Null,
                };
                let answered = match id(message.get("tool_call_id")) {
                    Some(call_id) => unanswered
                        .iter()
                        .position(|&s| ids[s].as_deref() == Some(call_id.as_str())),
                    None => (!unanswered.is_empty()).then_some(0),
                };
                let Some(position) = answered else {
                    return Err(err(
                        &format!("messages.{m}"),
                        "a tool message that answers no earlier tool call",
                    ));
                };
                if let Some(step) = unanswered.remove(position) {
                    steps[step].observation = Some(content);
                }
            }
            _ => {}
        }
    }
    Ok(steps)
}

/// `{"name", "arguments"}` where the arguments are an object or a string holding one.
fn action(
    action: Option<&Value>,
    field: &str,
    err: &dyn Fn(&str, &str) -> TrajectoryError,
) -> Result<(String, Map<String, Value>), TrajectoryError> {
    let name = action
        .and_then(|a| a.get("name"))
        .and_then(Value::as_str)
        .ok_or_else(|| err(&format!("{field}: action.name"), "missing or not a string"))?;
    let arguments = match action.and_then(|a| a.get("arguments")) {
        Some(Value::Object(a)) => a.clone(),
        Some(Value::String(s)) if s.trim().is_empty() => Map::new(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(a)) => a,
            _ => {
                return Err(err(
                    &format!("{field}: action.arguments"),
                    "a string here must hold a JSON object",
                ))
            }
        },
        None | Some(Value::Null) => Map::new(),
        Some(_) => {
            return Err(err(
                &format!("{field}: action.arguments"),
                "expected an object",
            ))
        }
    };
    Ok((name.to_owned(), arguments))
}

/// Trajectories read for a benchmark: transitions of the runs that hold states, and the
/// call-only runs, which the caller re-executes ([`crate::replay`]).
#[derive(Debug, Default)]
pub struct Imported {
    /// Transitions taken from recorded states.
    pub transitions: Vec<TransitionRecord>,
    /// Runs without states.
    pub call_only: Vec<RecordedRun>,
}

/// Reads trajectories: every step of a run that holds states becomes a transition; call-only
/// runs are returned for re-execution.
pub fn import(
    text: &str,
    source: &str,
    format: Option<TrajectoryFormat>,
    packages: &[EnvPackage],
) -> Result<Imported, TrajectoryError> {
    let mut out = Imported::default();
    for (walk, run) in read_runs(text, source, format)?.into_iter().enumerate() {
        if run.is_call_only() {
            out.call_only.push(run);
            continue;
        }
        let env = run.env.clone().unwrap_or_default();
        let package = packages.iter().find(|p| p.manifest.name == env);
        let mut state = run.initial_state.clone().unwrap_or_default();
        for (step, recorded) in run.steps.into_iter().enumerate() {
            let observation = match recorded.observation {
                Some(Value::String(s)) => s,
                None | Some(Value::Null) => String::new(),
                Some(other) => other.to_string(),
            };
            let after = recorded.state_after.unwrap_or_else(|| state.clone());
            let observation_json = parse_to_obj(&PyValue::str(&observation)).to_json_lossy();
            // With the package known, its outcome rule reads the observation. For the database
            // convention an `Error: ...` string is a business failure, not the reference's
            // rendering of an exception.
            let outcome = match package {
                Some(p) if p.manifest.convention == Convention::Database => {
                    Outcome::from_verdict(p.outcome.classify(&observation_json))
                }
                _ if observation.starts_with("Error:") => Outcome::Exception,
                Some(p) => Outcome::from_verdict(p.outcome.classify(&observation_json)),
                None => {
                    Outcome::from_verdict(observation_success(&Value::String(observation.clone())))
                }
            };
            let tool_schema = package
                .and_then(|p| {
                    p.manifest.tools.iter().find(|t| {
                        t.pointer("/function/name").and_then(Value::as_str)
                            == Some(recorded.tool.as_str())
                    })
                })
                .cloned()
                .unwrap_or(Value::Null);
            out.transitions.push(TransitionRecord {
                env: env.clone(),
                class_name: package
                    .map(|p| p.manifest.class_name.clone())
                    .unwrap_or_default(),
                convention: package.map(|p| p.manifest.convention).unwrap_or_default(),
                tool_schema,
                initial_state: run.task_id.clone(),
                walk,
                step,
                intent: Intent::Valid,
                args_count: recorded.arguments.len(),
                action: json!({"name": recorded.tool, "arguments": recorded.arguments}),
                change_count: reference_change_count(&state, &after),
                fine_change_count: fine_diff(&state, &after).len(),
                observation_json,
                observation,
                outcome,
                unpredictable: Vec::new(),
                reads: None,
                seed: recorded.seed.unwrap_or(0),
                clock: recorded.clock.unwrap_or(0.0),
                config_before: StateText::from_value(&state),
                config_after: StateText::from_value(&after),
            });
            state = after;
        }
    }
    Ok(out)
}

fn id(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_run_records_become_transitions() {
        let run = json!({
            "task_info": {"env_id": "env_3", "task_id": "0412-101500", "task": "pay"},
            "trajectory": [
                {"step": 0, "observation": "pay the order", "config": {"orders": {"O1": {"status": "new"}}}},
                {"step": 1, "action": {"name": "get_order", "arguments": "{\"order_id\": \"O1\"}"},
                 "observation": {"type": "tool", "content": "{'success': True, 'data': {'status': 'new'}}"}},
                {"step": 2, "action": {"name": "pay", "arguments": {"order_id": "O1"}},
                 "observation": {"type": "tool", "content": "{'success': True, 'message': 'paid'}"},
                 "config": {"orders": {"O1": {"status": "paid"}}}},
                {"step": 3, "action": {"name": "pay", "arguments": {"order_id": 5}},
                 "observation": {"type": "user", "content": "Error: TypeError: bad id"}, "config": {"orders": {"O1": {"status": "paid"}}}}
            ]
        });
        let ts = import(
            &run.to_string(),
            "runs.jsonl",
            Some(TrajectoryFormat::Reference),
            &[],
        )
        .unwrap()
        .transitions;
        assert_eq!(ts.len(), 3);
        assert_eq!(
            (ts[0].outcome, ts[0].change_count, ts[0].args_count),
            (Outcome::Success, 0, 1)
        );
        assert_eq!((ts[1].outcome, ts[1].change_count), (Outcome::Success, 1));
        assert_eq!(
            ts[1].config_before.value(),
            json!({"orders": {"O1": {"status": "new"}}})
        );
        assert_eq!(ts[2].outcome, Outcome::Exception);
        assert_eq!(
            ts[1].observation_json,
            json!({"success": true, "message": "paid"})
        );
        assert_eq!(ts[0].initial_state, "0412-101500");
    }

    #[test]
    fn a_database_package_classifies_its_string_observations() {
        let mut corpus = envsim_exec::package::MemoryCorpus::new("<test>");
        corpus.insert(
            "shop/manifest.json",
            br#"{"name": "shop", "domain": "d", "description": "d", "convention": "database",
                 "tools": [{"type": "function", "function": {"name": "inc"}}]}"#
                .to_vec(),
        );
        corpus.insert("shop/env.py", b"def inc(data):\n    return 'ok'\n".to_vec());
        corpus.insert("shop/states/0.json", b"{}".to_vec());
        let package = corpus.load("shop").unwrap();
        let line = json!({"env": "shop", "initial_state": {"n": 1}, "steps": [
            {"action": {"name": "inc", "arguments": {}}, "observation": "Error: closed"},
            {"action": {"name": "inc", "arguments": {}}, "observation": "Incremented", "state_after": {"n": 2}},
            {"action": {"name": "inc", "arguments": {}}, "observation": "{'success': False}"}
        ]});
        let text = format!("{line}\n");
        let ts = import(&text, "t.jsonl", Some(TrajectoryFormat::Envsim), &[package])
            .unwrap()
            .transitions;
        // `Error:` is the package's failure (not the reference's exception rendering), a plain
        // string a success, and a `success` key means nothing to this rule.
        assert_eq!(
            ts.iter()
                .map(|t| (t.outcome, t.change_count, t.convention))
                .collect::<Vec<_>>(),
            [
                (Outcome::Failure, 0, Convention::Database),
                (Outcome::Success, 1, Convention::Database),
                (Outcome::Success, 0, Convention::Database)
            ]
        );
        // Without the package, the reference's reading.
        let ts = import(&text, "t.jsonl", Some(TrajectoryFormat::Envsim), &[])
            .unwrap()
            .transitions;
        assert_eq!(
            ts.iter().map(|t| t.outcome).collect::<Vec<_>>(),
            [Outcome::Exception, Outcome::Undetermined, Outcome::Failure]
        );
    }

    #[test]
    fn envsim_trajectories_and_errors() {
        let line = json!({"env": "shop", "initial_state": {"n": 1}, "steps": [
            {"action": {"name": "inc", "arguments": {}}, "observation": "{'success': False, 'error': 'no'}"},
            {"action": {"name": "inc", "arguments": {}}, "observation": "{'success': True}", "state_after": {"n": 2}}
        ]});
        let ts = import(
            &format!("{line}\n"),
            "t.jsonl",
            Some(TrajectoryFormat::Envsim),
            &[],
        )
        .unwrap()
        .transitions;
        assert_eq!(
            ts.iter()
                .map(|t| (t.outcome, t.change_count))
                .collect::<Vec<_>>(),
            [(Outcome::Failure, 0), (Outcome::Success, 1)]
        );
        let bad =
            json!({"env": "shop", "initial_state": {}, "steps": [{"action": {"arguments": {}}}]});
        let e = import(
            &bad.to_string(),
            "t.jsonl",
            Some(TrajectoryFormat::Envsim),
            &[],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.jsonl: line 1, field `step 1: action.name`: missing or not a string"
        );
        let e = import(
            "{\"env\": true}",
            "t.jsonl",
            Some(TrajectoryFormat::Envsim),
            &[],
        )
        .unwrap_err();
        assert!(e.to_string().contains("field `env`"));
    }

    #[test]
    fn call_only_runs_are_set_aside_for_replay() {
        let text = [
            json!({"env": "shop", "initial_state": {"n": 1}, "steps": [
                {"action": {"name": "inc", "arguments": {}}, "observation": "ok", "seed": 7, "clock": 5.5}
            ]}),
            json!({"task_info": {"env_id": "env_3", "task_id": "t9"}, "trajectory": [
                {"config": {"n": 1}},
                {"action": {"name": "inc", "arguments": "{}"}, "observation": {"type": "tool", "content": "ok"}}
            ]}),
        ]
        .map(|v| v.to_string())
        .join("\n");
        let imported = import(&text, "mixed.jsonl", None, &[]).unwrap();
        assert!(imported.transitions.is_empty());
        let runs = &imported.call_only;
        assert_eq!(
            runs.iter()
                .map(|r| (
                    r.format,
                    r.env.as_deref(),
                    r.task_id.as_str(),
                    r.location.as_str()
                ))
                .collect::<Vec<_>>(),
            [
                (TrajectoryFormat::Envsim, Some("shop"), "0", "line 1"),
                (TrajectoryFormat::Reference, Some("env_3"), "t9", "line 2"),
            ]
        );
        assert_eq!(
            (runs[0].steps[0].seed, runs[0].steps[0].clock),
            (Some(7), Some(5.5))
        );
        assert_eq!(runs[1].steps[0].observation, Some(json!("ok")));
    }

    #[test]
    fn openai_transcripts_pair_calls_with_answers() {
        let record = json!({"env": "shop", "initial_state": {"n": 1}, "task_id": "chat-1", "messages": [
            {"role": "system", "content": "be helpful"},
            {"role": "user", "content": "do two things"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "inc", "arguments": "{\"by\": 2}"}},
                {"id": "b", "type": "function", "function": {"name": "get", "arguments": ""}}
            ]},
            {"role": "tool", "tool_call_id": "b", "content": "{\"n\": 3}"},
            {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "done"}]},
            {"role": "assistant", "function_call": {"name": "get", "arguments": "{}"}},
            {"role": "function", "name": "get", "content": "3"},
            {"role": "assistant", "content": "n is 3"}
        ]});
        let runs = read_runs(&record.to_string(), "chat.jsonl", None).unwrap();
        let steps: Vec<(&str, Value, Option<Value>)> = runs[0]
            .steps
            .iter()
            .map(|s| {
                (
                    s.tool.as_str(),
                    Value::Object(s.arguments.clone()),
                    s.observation.clone(),
                )
            })
            .collect();
        assert_eq!(
            steps,
            [
                ("inc", json!({"by": 2}), Some(json!("done"))),
                ("get", json!({}), Some(json!("{\"n\": 3}"))),
                ("get", json!({}), Some(json!("3"))),
            ]
        );
        assert_eq!(
            (runs[0].task_id.as_str(), runs[0].initial_state.clone()),
            ("chat-1", Some(json!({"n": 1})))
        );
        // A bare list of messages is one transcript.
        let bare = json!([
            {"role": "assistant", "tool_calls": [{"id": "x", "function": {"name": "get", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "x", "content": "1"}
        ]);
        let runs = read_runs(&bare.to_string(), "chat.json", None).unwrap();
        assert_eq!(
            (runs.len(), runs[0].steps.len(), runs[0].env.clone()),
            (1, 1, None)
        );
        assert!(runs[0].is_call_only());
        // Located errors.
        let orphan = json!({"messages": [{"role": "tool", "tool_call_id": "zz", "content": "1"}]});
        assert_eq!(
            read_runs(&orphan.to_string(), "chat.jsonl", None).unwrap_err().to_string(),
            "chat.jsonl: line 1, field `messages.0`: a tool message that answers no earlier tool call"
        );
        let bad_args = json!({"messages": [{"role": "assistant", "tool_calls": [
            {"id": "x", "function": {"name": "get", "arguments": "[1]"}}]}]});
        assert_eq!(
            read_runs(&bad_args.to_string(), "chat.jsonl", None).unwrap_err().to_string(),
            "chat.jsonl: line 1, field `messages.0.tool_calls.0: action.arguments`: a string here must hold a JSON object"
        );
        assert_eq!(
            read_runs("{\"x\": 1}", "what.jsonl", None).unwrap_err().to_string(),
            "what.jsonl: line 1: not a trajectory record: expected `task_info` + `trajectory` (reference), `steps` (envsim) or `messages` (OpenAI chat)"
        );
    }
}

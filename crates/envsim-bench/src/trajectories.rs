//! Importing recorded agent trajectories as transitions, so a benchmark can be built from real
//! rollouts instead of (or besides) the scenario driver.
//!
//! Two input formats, both JSON Lines or a JSON array of trajectories:
//! - **reference run records**: `{"task_info": {"env_id", "task_id", ...}, "trajectory": [step0,
//!   step1, ...]}` where step 0 holds the initial `config` and every later step holds `action`,
//!   `observation` (`{"type", "content"}`) and `config` (the state after the step); a step without
//!   `config` changed nothing (as the reference's own conversion assumes);
//! - **envsim trajectories**: `{"env", "task_id", "initial_state": {...}, "steps": [{"action":
//!   {"name", "arguments"}, "observation": str, "state_after": {...}}]}`.
//!
//! Recorded transitions cannot be re-run under another clock, so their `unpredictable` list is
//! empty; environment code and tool schemas come from the package of the same name when given.

use crate::collect::{Outcome, StateText, TransitionRecord};
use crate::driver::Intent;
use envsim_core::diff::{fine_diff, reference_change_count};
use envsim_core::python::PyValue;
use envsim_core::reference::extract::parse_to_obj;
use envsim_core::score::observation_success;
use envsim_exec::package::{Convention, EnvPackage};
use serde_json::{json, Value};

/// One recorded step: action, observation, state after (absent: unchanged).
type RecordedStep = (Value, Value, Option<Value>);

/// Which trajectory format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrajectoryFormat {
    /// The reference's agent run records.
    Reference,
    /// envsim trajectory JSONL.
    Envsim,
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

fn records(text: &str, source: &str) -> Result<Vec<(String, Value)>, TrajectoryError> {
    let records =
        envsim_core::formats::records(text.as_bytes(), source).map_err(|e| TrajectoryError {
            source_name: source.to_owned(),
            location: e.location.to_string(),
            message: e.message,
        })?;
    Ok(records
        .into_iter()
        .map(|r| (r.location.to_string(), r.value))
        .collect())
}

/// Reads trajectories and turns every step into a transition.
pub fn import(
    text: &str,
    source: &str,
    format: TrajectoryFormat,
    packages: &[EnvPackage],
) -> Result<Vec<TransitionRecord>, TrajectoryError> {
    let mut out = Vec::new();
    for (walk, (location, record)) in records(text, source)?.into_iter().enumerate() {
        let err = |field: &str, message: &str| TrajectoryError {
            source_name: source.to_owned(),
            location: format!("{location}, field `{field}`"),
            message: message.to_owned(),
        };
        let (env, task, initial, steps): (String, String, Value, Vec<RecordedStep>) = match format {
            TrajectoryFormat::Reference => {
                let info = record
                    .get("task_info")
                    .ok_or_else(|| err("task_info", "missing"))?;
                let env = id(info.get("env_id"))
                    .ok_or_else(|| err("task_info.env_id", "missing or not a string"))?;
                let task = id(info.get("task_id")).unwrap_or_else(|| walk.to_string());
                let trajectory = record
                    .get("trajectory")
                    .and_then(Value::as_array)
                    .ok_or_else(|| err("trajectory", "missing or not a list"))?;
                let initial = trajectory
                    .first()
                    .and_then(|s| s.get("config"))
                    .filter(|c| c.is_object())
                    .cloned()
                    .ok_or_else(|| {
                        err("trajectory.0.config", "step 0 must hold the initial state")
                    })?;
                let steps = trajectory
                    .iter()
                    .skip(1)
                    .map(|s| {
                        let content = s
                            .pointer("/observation/content")
                            .or_else(|| s.get("observation"))
                            .cloned()
                            .unwrap_or(Value::Null);
                        (
                            s.get("action").cloned().unwrap_or(Value::Null),
                            content,
                            s.get("config").cloned(),
                        )
                    })
                    .collect();
                (env, task, initial, steps)
            }
            TrajectoryFormat::Envsim => {
                let env =
                    id(record.get("env")).ok_or_else(|| err("env", "missing or not a string"))?;
                let task = id(record.get("task_id")).unwrap_or_else(|| walk.to_string());
                let initial = record
                    .get("initial_state")
                    .filter(|s| s.is_object())
                    .cloned()
                    .ok_or_else(|| err("initial_state", "missing or not an object"))?;
                let steps = record
                    .get("steps")
                    .and_then(Value::as_array)
                    .ok_or_else(|| err("steps", "missing or not a list"))?
                    .iter()
                    .map(|s| {
                        (
                            s.get("action").cloned().unwrap_or(Value::Null),
                            s.get("observation").cloned().unwrap_or(Value::Null),
                            s.get("state_after").cloned(),
                        )
                    })
                    .collect();
                (env, task, initial, steps)
            }
        };
        let package = packages.iter().find(|p| p.manifest.name == env);
        let mut state = initial;
        for (step, (action, observation, after)) in steps.into_iter().enumerate() {
            let name = action.get("name").and_then(Value::as_str).ok_or_else(|| {
                err(
                    &format!("step {}: action.name", step + 1),
                    "missing or not a string",
                )
            })?;
            let arguments = match action.get("arguments") {
                Some(Value::Object(a)) => a.clone(),
                Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
                    Ok(Value::Object(a)) => a,
                    _ => {
                        return Err(err(
                            &format!("step {}: action.arguments", step + 1),
                            "a string here must hold a JSON object",
                        ))
                    }
                },
                None | Some(Value::Null) => Default::default(),
                Some(_) => {
                    return Err(err(
                        &format!("step {}: action.arguments", step + 1),
                        "expected an object",
                    ))
                }
            };
            let observation = match observation {
                Value::String(s) => s,
                Value::Null => String::new(),
                other => other.to_string(),
            };
            let after = match after {
                Some(a @ Value::Object(_)) => a,
                None | Some(Value::Null) => state.clone(),
                Some(_) => {
                    return Err(err(
                        &format!("step {}: state after", step + 1),
                        "expected an object",
                    ))
                }
            };
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
                    p.manifest
                        .tools
                        .iter()
                        .find(|t| t.pointer("/function/name").and_then(Value::as_str) == Some(name))
                })
                .cloned()
                .unwrap_or(Value::Null);
            out.push(TransitionRecord {
                env: env.clone(),
                class_name: package
                    .map(|p| p.manifest.class_name.clone())
                    .unwrap_or_default(),
                convention: package.map(|p| p.manifest.convention).unwrap_or_default(),
                tool_schema,
                initial_state: task.clone(),
                walk,
                step,
                intent: Intent::Valid,
                action: json!({"name": name, "arguments": arguments}),
                change_count: reference_change_count(&state, &after),
                fine_change_count: fine_diff(&state, &after).len(),
                args_count: arguments.len(),
                observation_json,
                observation,
                outcome,
                unpredictable: Vec::new(),
                reads: None,
                seed: 0,
                clock: 0.0,
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
            TrajectoryFormat::Reference,
            &[],
        )
        .unwrap();
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
        let ts = import(&text, "t.jsonl", TrajectoryFormat::Envsim, &[package]).unwrap();
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
        let ts = import(&text, "t.jsonl", TrajectoryFormat::Envsim, &[]).unwrap();
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
            TrajectoryFormat::Envsim,
            &[],
        )
        .unwrap();
        assert_eq!(
            ts.iter()
                .map(|t| (t.outcome, t.change_count))
                .collect::<Vec<_>>(),
            [(Outcome::Failure, 0), (Outcome::Success, 1)]
        );
        let bad =
            json!({"env": "shop", "initial_state": {}, "steps": [{"action": {"arguments": {}}}]});
        let e = import(&bad.to_string(), "t.jsonl", TrajectoryFormat::Envsim, &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.jsonl: line 1, field `step 1: action.name`: missing or not a string"
        );
        let e = import("{\"env\": true}", "t.jsonl", TrajectoryFormat::Envsim, &[]).unwrap_err();
        assert!(e.to_string().contains("field `env`"));
    }
}

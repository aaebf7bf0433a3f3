//! Importing EnvScaler environments into envsim packages.
//!
//! Inputs: the environment metadata file (a JSON object keyed by env id; each entry holds
//! `env_class_name`, `env_class_code`, `tools` and optionally `environment_summary`,
//! `environment_introduction`, `constraints_rules`) and, optionally, task items (a JSON array or
//! JSON Lines of `{env_id, env_class_name, init_config, task, ...}`) whose `init_config`s become
//! the package's initial states.

use crate::package::{Convention, Manifest};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A located import problem.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{source_name}: {location}: {message}")]
pub struct ImportError {
    /// The input file.
    pub source_name: String,
    /// Env id or record and field.
    pub location: String,
    /// What is wrong.
    pub message: String,
}

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ImportSummary {
    /// The packages written.
    pub envs: Vec<ImportedEnv>,
    /// Distinct task states whose env id is not in the metadata, per env id (not imported).
    pub unmatched_tasks: BTreeMap<String, usize>,
    /// State files of earlier imports removed from the packages written.
    pub stale_states_removed: usize,
}

/// What the import wrote.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ImportedEnv {
    /// Package folder name.
    pub name: String,
    /// Number of tools.
    pub tools: usize,
    /// Number of initial states written.
    pub states: usize,
}

/// The task field that holds the initial state by default.
pub const DEFAULT_STATE_FIELD: &str = "init_config";

/// Finds the field `path` of a task item: a JSON Pointer (`/states/initial`) or a dotted
/// path (`init_config`, `states.initial`).
fn task_field<'a>(item: &'a Value, path: &str) -> Option<&'a Value> {
    if path.starts_with('/') {
        return item.pointer(path);
    }
    path.split('.').try_fold(item, |value, key| value.get(key))
}

/// Reads task items and groups their initial states (the field `state_field`, see
/// [`DEFAULT_STATE_FIELD`]) by env id, duplicates dropped. `into` may already hold the groups
/// of other task files: states are added to them (several `--tasks` files).
pub fn read_tasks_into(
    bytes: &[u8],
    source: &str,
    state_field: &str,
    into: &mut BTreeMap<String, Vec<(String, Value)>>,
) -> Result<(), ImportError> {
    let error = |location: String, message: String| ImportError {
        source_name: source.to_owned(),
        location,
        message,
    };
    let items: Vec<(String, Value)> = envsim_core::formats::records(bytes, source)
        .map_err(|e| error(e.location.to_string(), e.message))?
        .into_iter()
        .map(|r| (r.location.to_string(), r.value))
        .collect();
    let by_env = into;
    for (location, item) in items {
        let env_id = item.get("env_id").and_then(Value::as_str).ok_or_else(|| {
            error(
                location.clone(),
                "field `env_id` is missing or not a string".into(),
            )
        })?;
        let config = task_field(&item, state_field)
            .filter(|c| c.is_object())
            .ok_or_else(|| {
                error(
                    location.clone(),
                    format!("field `{state_field}` is missing or not an object"),
                )
            })?;
        let task_id = match item.get("task_id") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => location.replace(' ', "_"),
        };
        let states = by_env.entry(env_id.to_owned()).or_default();
        if !states.iter().any(|(_, existing)| existing == config) {
            states.push((task_id, config.clone()));
        }
    }
    Ok(())
}

/// [`read_tasks_into`] for one file with the default state field.
pub fn read_tasks(
    bytes: &[u8],
    source: &str,
) -> Result<BTreeMap<String, Vec<(String, Value)>>, ImportError> {
    let mut by_env = BTreeMap::new();
    read_tasks_into(bytes, source, DEFAULT_STATE_FIELD, &mut by_env)?;
    Ok(by_env)
}

/// The package name (and state-file part) made of an EnvScaler id: characters other than ASCII
/// letters, digits, `_` and `-` become `_`.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Converts metadata (and grouped task states) into package folders under `out`. A package
/// folder that exists is rewritten: its state files become exactly the new ones (stale states
/// of an earlier import are removed, so they never mix with these). Refusing a non-empty
/// `out` is the caller's decision (the CLI's `--force`).
pub fn import(
    metadata: &[u8],
    source: &str,
    tasks: &BTreeMap<String, Vec<(String, Value)>>,
    out: &Path,
) -> Result<ImportSummary, ImportError> {
    let error = |location: String, message: String| ImportError {
        source_name: source.to_owned(),
        location,
        message,
    };
    let root: Map<String, Value> = match serde_json::from_slice(metadata) {
        Ok(Value::Object(map)) => map,
        Ok(_) => {
            return Err(error(
                "file".into(),
                "expected a JSON object keyed by env id".into(),
            ))
        }
        Err(e) => {
            return Err(error(
                format!("line {} column {}", e.line(), e.column()),
                e.to_string(),
            ))
        }
    };
    // Validate everything before writing anything.
    let mut planned = Vec::new();
    for (env_id, entry) in &root {
        let field = |key: &str| entry.get(key);
        let text = |key: &str| -> Result<String, ImportError> {
            field(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| error(format!("{env_id}.{key}"), "missing or not a string".into()))
        };
        let class_name = text("env_class_name")?;
        let code = text("env_class_code")?;
        let tools = match field("tools") {
            Some(Value::Array(tools)) => tools.clone(),
            _ => {
                return Err(error(
                    format!("{env_id}.tools"),
                    "missing or not a list".into(),
                ))
            }
        };
        for (i, tool) in tools.iter().enumerate() {
            if tool
                .pointer("/function/name")
                .and_then(Value::as_str)
                .is_none()
            {
                return Err(error(
                    format!("{env_id}.tools.{i}"),
                    "not an OpenAI function schema (no function.name)".into(),
                ));
            }
        }
        let description = ["environment_summary", "environment_introduction"]
            .iter()
            .find_map(|k| field(k).and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned();
        let rules = match field("constraints_rules") {
            Some(Value::Array(rules)) => rules
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        };
        let name = sanitize(env_id);
        let manifest = Manifest {
            name: name.clone(),
            domain: "envscaler".into(),
            description,
            class_name,
            convention: Convention::Class,
            outcome: None,
            clocks: Default::default(),
            effects: Default::default(),
            rules,
            errors: Default::default(),
            tools,
        };
        let states = tasks.get(env_id).cloned().unwrap_or_default();
        planned.push((name, manifest, code, states));
    }
    // Each file is written whole or not at all: a package is never left with a torn manifest
    // or state.
    let write = |name: &str, path: &Path, text: &str| {
        envsim_fs::write_atomic(path, text).map_err(|e| error(name.to_owned(), e.to_string()))
    };
    let mut summary = ImportSummary {
        unmatched_tasks: tasks
            .iter()
            .filter(|(env_id, _)| !root.contains_key(*env_id))
            .map(|(env_id, states)| (env_id.clone(), states.len()))
            .collect(),
        ..ImportSummary::default()
    };
    for (name, manifest, code, states) in planned {
        let dir: PathBuf = out.join(&name);
        write(&name, &dir.join("env.py"), &code)?;
        let manifest_text = serde_json::to_string_pretty(&manifest).unwrap_or_default();
        write(&name, &dir.join("manifest.json"), &(manifest_text + "\n"))?;
        let states = if states.is_empty() {
            // A package needs a state; an empty one lets the class's own defaults apply.
            vec![("empty".to_owned(), Value::Object(Map::new()))]
        } else {
            states
        };
        let mut fresh = std::collections::BTreeSet::new();
        for (i, (task, state)) in states.iter().enumerate() {
            let file = format!("{i:03}_{}.json", sanitize(task));
            write(
                &name,
                &dir.join("states").join(&file),
                &(serde_json::to_string_pretty(state).unwrap_or_default() + "\n"),
            )?;
            fresh.insert(file);
        }
        // Every state of the package is one written now.
        let listing = std::fs::read_dir(dir.join("states"))
            .map_err(|e| error(name.clone(), format!("cannot list its states: {e}")))?;
        for entry in listing.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            if !fresh.contains(&file) && entry.path().is_file() {
                std::fs::remove_file(entry.path()).map_err(|e| {
                    error(
                        name.clone(),
                        format!("cannot remove the stale state {file}: {e}"),
                    )
                })?;
                summary.stale_states_removed += 1;
            }
        }
        summary.envs.push(ImportedEnv {
            name,
            tools: manifest.tools.len(),
            states: states.len(),
        });
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn imports_metadata_and_task_states() {
        let metadata = json!({
            "env_7": {
                "env_class_name": "Garage",
                "env_class_code": "class Garage:\n    def __init__(self, init_config):\n        self.spots = {}\n    def get_spot(self, spot_id: str):\n        return {'success': True, 'data': self.spots.get(spot_id)}\n",
                "tools": [{"type": "function", "function": {"name": "get_spot", "parameters": {"type": "object", "properties": {"spot_id": {"type": "string"}}, "required": ["spot_id"]}}}],
                "environment_summary": "A parking garage.",
                "constraints_rules": ["A spot holds one vehicle."]
            }
        });
        let tasks = "{\"env_id\": \"env_7\", \"task_id\": \"0412-1\", \"init_config\": {\"spots\": {\"B2\": {\"status\": \"free\"}}}, \"task\": \"x\"}\n\
                     {\"env_id\": \"env_7\", \"task_id\": \"0412-2\", \"init_config\": {\"spots\": {\"B2\": {\"status\": \"free\"}}}, \"task\": \"y\"}\n";
        let grouped = read_tasks(tasks.as_bytes(), "tasks.jsonl").unwrap();
        assert_eq!(grouped["env_7"].len(), 1, "identical configs are kept once");
        let out = tempfile::tempdir().unwrap();
        let written = import(
            metadata.to_string().as_bytes(),
            "meta.json",
            &grouped,
            out.path(),
        )
        .unwrap();
        assert_eq!(
            written.envs,
            [ImportedEnv {
                name: "env_7".into(),
                tools: 1,
                states: 1
            }]
        );
        assert!(written.unmatched_tasks.is_empty());
        let package = crate::package::EnvPackage::load(&out.path().join("env_7")).unwrap();
        assert_eq!(package.manifest.class_name, "Garage");
        assert_eq!(package.manifest.rules, ["A spot holds one vehicle."]);
        assert_eq!(
            package.states[0].1,
            json!({"spots": {"B2": {"status": "free"}}})
        );
    }

    #[test]
    fn state_fields_several_task_files_unmatched_ids_and_stale_states() {
        let metadata = json!({"env_1": {"env_class_name": "A", "env_class_code": "class A:\n    pass\n", "tools": []}});
        // Two files; the state sits under `states.initial`; one item names an unknown env.
        let first = "{\"env_id\": \"env_1\", \"task_id\": \"t1\", \"init_config\": {\"x\": 0}, \"states\": {\"initial\": {\"x\": 1}}}\n\
                     {\"env_id\": \"env_9\", \"task_id\": \"t9\", \"states\": {\"initial\": {\"y\": 1}}}\n";
        let second = "[{\"env_id\": \"env_1\", \"task_id\": \"t2\", \"states\": {\"initial\": {\"x\": 2}}},\
                      {\"env_id\": \"env_1\", \"task_id\": \"t3\", \"states\": {\"initial\": {\"x\": 1}}}]";
        let mut grouped = BTreeMap::new();
        read_tasks_into(first.as_bytes(), "a.jsonl", "states.initial", &mut grouped).unwrap();
        read_tasks_into(second.as_bytes(), "b.json", "/states/initial", &mut grouped).unwrap();
        let states: Vec<&Value> = grouped["env_1"].iter().map(|(_, s)| s).collect();
        assert_eq!(
            states,
            [&json!({"x": 1}), &json!({"x": 2})],
            "t3 repeats t1"
        );
        // A missing field is named.
        let err = read_tasks_into(
            b"{\"env_id\": \"env_1\"}",
            "c.jsonl",
            "states.initial",
            &mut grouped,
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "field `states.initial` is missing or not an object"
        );

        let out = tempfile::tempdir().unwrap();
        // A state file of an earlier import, which must not survive.
        let old = out.path().join("env_1/states/007_old.json");
        std::fs::create_dir_all(old.parent().unwrap()).unwrap();
        std::fs::write(&old, "{}").unwrap();
        let summary = import(
            metadata.to_string().as_bytes(),
            "meta.json",
            &grouped,
            out.path(),
        )
        .unwrap();
        assert_eq!(summary.envs[0].states, 2);
        assert_eq!(
            summary.unmatched_tasks,
            BTreeMap::from([("env_9".to_owned(), 1)])
        );
        assert_eq!(summary.stale_states_removed, 1);
        assert!(!old.exists());
        let package = crate::package::EnvPackage::load(&out.path().join("env_1")).unwrap();
        assert_eq!(package.states.len(), 2);
    }

    #[test]
    fn bad_metadata_is_located_and_nothing_is_written() {
        let out = tempfile::tempdir().unwrap();
        let metadata = json!({"env_1": {"env_class_name": "A", "env_class_code": "class A: pass", "tools": []},
                              "env_2": {"env_class_name": "B", "tools": []}});
        let err = import(
            metadata.to_string().as_bytes(),
            "meta.json",
            &BTreeMap::new(),
            out.path(),
        )
        .unwrap_err();
        assert_eq!(err.location, "env_2.env_class_code");
        assert!(std::fs::read_dir(out.path()).unwrap().next().is_none());
        let err = read_tasks(b"{\"env_id\": 3}\n", "t.jsonl").unwrap_err();
        assert_eq!(err.location, "line 1");
    }

    #[test]
    fn a_failed_write_names_the_package_and_the_file() {
        let out = tempfile::tempdir().unwrap();
        // A file where the package folder should go.
        std::fs::write(out.path().join("env_1"), "x").unwrap();
        let metadata = json!({"env_1": {"env_class_name": "A", "env_class_code": "class A:\n    pass\n", "tools": []}});
        let err = import(
            metadata.to_string().as_bytes(),
            "meta.json",
            &BTreeMap::new(),
            out.path(),
        )
        .unwrap_err();
        assert_eq!(err.location, "env_1");
        assert!(err.message.starts_with("cannot create "), "{err}");
        assert!(err.message.contains("env_1"), "{err}");
    }
}

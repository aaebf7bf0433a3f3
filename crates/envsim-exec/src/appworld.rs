//! Importing AppWorld's apps (amazon, file_system, gmail, phone, simple_note, splitwise,
//! spotify, todoist, venmo) as envsim packages, with every scripted call executed by AppWorld
//! itself.
//!
//! The source is an installed `appworld` package (PyPI `appworld==0.1.3.post1`, then
//! `appworld install`, which unpacks the apps; [`PIP_HINT`]). AppWorld pins pydantic 1, so it
//! usually lives in a virtual environment of its own: point `ENVSIM_PYTHON` at that
//! environment's interpreter for the import *and* for running the packages, since the
//! generated code imports the installed package at run time (nothing of AppWorld's code is
//! copied into a package).
//!
//! A stdlib helper (`python/appworld_import.py`) builds worlds of three sizes reproducibly with
//! AppWorld's own record factories (the same people in every app, the apps' notification
//! accounts, every table filled in the order of its references; AppWorld's task data cannot be
//! downloaded offline), runs call sessions on AppWorld itself (a login, then every
//! agent-visible API of the app with arguments drawn from the world), and runs every step
//! again through the generated class, each from a fresh instance built from the JSON of the
//! state before it: an import with any difference is refused.
//!
//! One package per app (`appworld_<app>`): the state is the tables of the app and of every app
//! its calls touched (gmail for notification mail, admin for payment cards, ...), each table a
//! map from primary key to row (booleans as booleans, JSON columns decoded), plus each app's
//! full-text search indexes (`<table>_fts`), its autoincrement counters (`sqlite_sequence`)
//! and the tokens logged out (`logged_out_tokens`), so that Δ is rows changed. Every call runs
//! at one AppWorld time ([`FROZEN_TIME`]) with Python's `random` seeded before it, so a call
//! on a state always gives the same answer. Answers are the response's JSON; a failed call is
//! the text of the exception AppWorld raises for it (`Response status code is 422:\n{...}`),
//! which is the outcome rule. Files: `manifest.json`, `env.py`, `openapi.json` (the app's
//! APIs as envsim's tools take them, for environment-free mode), `states/{1_small,2_medium,
//! 3_large}.json`, `tests.json` and `trajectories.jsonl` (the sessions), `NOTICE.md`.
//!
//! AppWorld's licence allows redistributing what is derived from its code only in encrypted
//! form: the packages are generated on the user's machine and must not be published as they
//! are (the notice says so).

use crate::bfcl::{
    import_error, package_folder, pretty, run_helper_source, unimportable, write_package, Files,
};
use crate::envscaler::ImportError;
use crate::package::{Convention, Manifest};
use envsim_core::outcome::OutcomeRule;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The import helper, run with the interpreter that imports `appworld`.
pub const HELPER_SOURCE: &str = include_str!("../python/appworld_import.py");
/// What to install when `appworld` is missing.
pub const PIP_HINT: &str = "pip install appworld==0.1.3.post1 && appworld install (AppWorld pins pydantic 1: use a virtual environment of its own and point ENVSIM_PYTHON at its python)";
/// The apps envsim imports.
pub const APPS: [&str; 9] = [
    "amazon",
    "file_system",
    "gmail",
    "phone",
    "simple_note",
    "splitwise",
    "spotify",
    "todoist",
    "venmo",
];
/// World sizes: (people, records of each other table per person).
pub const SIZES: [(&str, usize, usize); 3] = [("small", 3, 2), ("medium", 6, 4), ("large", 12, 8)];
/// The AppWorld time every call runs at.
pub const FROZEN_TIME: &str = "2023-05-18T12:00:00";
/// The start of every failed call's answer: the text of the exception AppWorld raises.
pub const FAILURE_PREFIX: &str = "Response status code is";

/// What the import needs.
#[derive(Clone, Debug)]
pub struct AppWorldImport {
    /// Apps to import.
    pub apps: Vec<String>,
    /// World sizes to build (names of [`SIZES`]).
    pub sizes: Vec<String>,
    /// The interpreter that imports `appworld` and runs the helper.
    pub python: PathBuf,
    /// The output folder.
    pub out: PathBuf,
}

/// What an import wrote.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct AppWorldSummary {
    /// The appworld version the helper found.
    pub version: Option<String>,
    /// The packages written, in app order.
    pub envs: Vec<AppWorldEnv>,
    /// Tables the world builder could not fill completely (`size app.Model: made of wanted:
    /// the first refusal`), e.g. a one-per-user table asked for more rows than people.
    pub underfilled: Vec<String>,
    /// Modules the generated code imports that the executor's interpreter cannot.
    pub missing_modules: Vec<String>,
}

/// One package written.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AppWorldEnv {
    /// Package name (`appworld_<app>`).
    pub name: String,
    /// AppWorld's app.
    pub app: String,
    /// Tools (the app's agent-visible APIs).
    pub tools: usize,
    /// The apps whose tables the state holds.
    pub state_apps: Vec<String>,
    /// Rows in each state (size → rows).
    pub rows: BTreeMap<String, usize>,
    /// Sessions scripted.
    pub sessions: usize,
    /// Calls scripted.
    pub steps: usize,
    /// Of them, answered with a failure by AppWorld.
    pub failing_steps: usize,
    /// Of them, raising an exception inside AppWorld.
    pub raising_steps: usize,
}

/// The helper's reply (its `ok` and `error` are read by the shared helper runner).
#[derive(Debug, Deserialize)]
struct Reply {
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    apps: BTreeMap<String, AppReply>,
    /// The worlds' tables, as filled: size → "app.Model" → [made, wanted, first error or null].
    build_report: BTreeMap<String, BTreeMap<String, TableFill>>,
}

/// One app as the helper generated and executed it.
#[derive(Debug, Deserialize)]
struct AppReply {
    class_name: String,
    description: String,
    code: String,
    state_apps: Vec<String>,
    tools: Vec<Value>,
    openapi: Value,
    states: BTreeMap<String, Value>,
    sessions: Vec<SessionReply>,
    divergences: Vec<String>,
}

/// Rows made of a table, rows wanted, and the first refusal when fewer were made.
type TableFill = (usize, usize, Option<String>);

#[derive(Debug, Deserialize)]
struct SessionReply {
    id: String,
    size: String,
    steps: Vec<StepReply>,
}

/// One call as AppWorld executed it.
#[derive(Debug, Deserialize)]
struct StepReply {
    tool: String,
    args: Map<String, Value>,
    /// The answer (null when the call raised).
    answer: Value,
    /// `Type: message` of an exception raised inside AppWorld.
    raised: Option<String>,
    changes: Map<String, Value>,
    absent: Vec<String>,
}

/// The outcome rule of every AppWorld package: a failed call's answer is the text of the
/// exception AppWorld raises for it.
pub fn outcome_rule() -> OutcomeRule {
    OutcomeRule::ErrorPrefix {
        prefix: FAILURE_PREFIX.into(),
    }
}

/// The folder of the `appworld` package that `python` imports. The error names what to
/// install.
pub fn locate(python: &Path) -> Result<PathBuf, ImportError> {
    package_folder(python, "appworld", &format!("install it ({PIP_HINT})"))
}

fn run_helper(
    options: &AppWorldImport,
    progress: &mut dyn FnMut(&str),
) -> Result<Reply, ImportError> {
    let request = json!({"apps": options.apps, "sizes": options.sizes});
    run_helper_source(
        &options.python,
        "appworld_import.py",
        HELPER_SOURCE,
        &request,
        progress,
    )
}

/// Rows of a state: the entries of every table (a map of maps) of every app.
fn rows(state: &Value) -> usize {
    state
        .as_object()
        .into_iter()
        .flat_map(|apps| apps.values())
        .filter_map(Value::as_object)
        .flat_map(|tables| tables.iter())
        .filter(|(name, _)| name.as_str() != "sqlite_sequence")
        .filter_map(|(_, table)| table.as_object())
        .map(Map::len)
        .sum()
}

/// A world's state file, numbered so that file-name order is size order (`1_small.json`): the
/// first state, which many commands take by default, is the smallest.
fn state_file(size: &str) -> String {
    match SIZES.iter().position(|(s, _, _)| *s == size) {
        Some(i) => format!("{}_{size}.json", i + 1),
        None => format!("{size}.json"),
    }
}

fn notice(app: &str) -> String {
    format!(
        "# AppWorld {app}: not for publication as it is\n\n\
         This package was generated by `envsim env import-appworld` from the installed `appworld`\n\
         package: its states were built by AppWorld's record factories and its answers come from\n\
         AppWorld's own code. AppWorld's licence allows redistributing what is derived from its\n\
         code only in encrypted form: keep this folder on the machine that generated it (or\n\
         share it encrypted), and never commit it to a public repository. Regenerate it anywhere\n\
         with `envsim env import-appworld`.\n"
    )
}

/// One package's files from the helper's account of an app; refuses an app whose generated
/// class answered or changed anything otherwise than AppWorld did.
fn package(app: &str, reply: &AppReply) -> Result<(Files, AppWorldEnv), ImportError> {
    let name = format!("appworld_{app}");
    let place = format!("appworld app {app}");
    if !reply.divergences.is_empty() {
        let shown: Vec<&str> = reply
            .divergences
            .iter()
            .take(5)
            .map(String::as_str)
            .collect();
        return Err(import_error(
            &place,
            "ground truth",
            format!(
                "the generated package differs from AppWorld's own execution in {} places (this version of appworld is not supported as it is): {}",
                reply.divergences.len(),
                shown.join("; ")
            ),
        ));
    }
    let protocol = |what: String| import_error(&place, "reply", what);
    let rule = outcome_rule();
    let others: Vec<&str> = reply
        .state_apps
        .iter()
        .map(String::as_str)
        .filter(|a| *a != app)
        .collect();
    let description = format!(
        "AppWorld's {app} app: {}. The state holds the tables of {} as maps from primary key to row (`<table>_fts`: the app's full-text search index; `sqlite_sequence`: its id counters; `logged_out_tokens`: access tokens logged out); every call runs at AppWorld time {FROZEN_TIME}.",
        reply.description.trim_end_matches('.'),
        if others.is_empty() {
            format!("the {app} app")
        } else {
            format!("the {app} app and of {} (which its calls read or write)", others.join(", "))
        }
    );
    let manifest = Manifest {
        name: name.clone(),
        domain: "appworld".into(),
        description,
        class_name: reply.class_name.clone(),
        convention: Convention::Class,
        outcome: Some(rule.clone()),
        clocks: reply
            .states
            .keys()
            .map(|size| (state_file(size), format!("{FROZEN_TIME}Z")))
            .collect(),
        effects: Default::default(),
        rules: vec![
            format!("Most APIs need the access_token that the {app} app's login API returns for an account's username (its email, or phone number for the phone app) and password."),
            "A failed call answers `Response status code is <code>:` and AppWorld's JSON message, as AppWorld raises it.".into(),
        ],
        errors: Default::default(),
        tools: reply.tools.clone(),
    };
    // Cases name their state by index in file-name order, which is size order.
    let mut files_in_order: Vec<String> = reply.states.keys().map(|s| state_file(s)).collect();
    files_in_order.sort();
    let index_of = |size: &str| files_in_order.iter().position(|f| *f == state_file(size));
    let mut cases = Vec::new();
    let mut trajectories = String::new();
    let (mut steps_total, mut failing, mut raising) = (0, 0, 0);
    for session in &reply.sessions {
        let state = index_of(&session.size)
            .ok_or_else(|| protocol(format!("session {} names no state", session.id)))?;
        let mut steps = Vec::new();
        let mut recorded = Vec::new();
        for (k, step) in session.steps.iter().enumerate() {
            let mut expect = Map::new();
            let observation = match &step.raised {
                Some(raised) => {
                    raising += 1;
                    expect.insert("success".into(), Value::Bool(false));
                    // As a failure's text: what the agent is shown of an exception.
                    format!("Error: {raised}")
                }
                None => {
                    let success = rule.classify(&step.answer).ok_or_else(|| {
                        protocol(format!(
                            "session {} step {} {}: the answer has no outcome",
                            session.id,
                            k + 1,
                            step.tool
                        ))
                    })?;
                    failing += usize::from(!success);
                    expect.insert("success".into(), Value::Bool(success));
                    expect.insert("observation".into(), step.answer.clone());
                    match &step.answer {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    }
                }
            };
            if !step.changes.is_empty() {
                expect.insert("state".into(), Value::Object(step.changes.clone()));
            }
            if !step.absent.is_empty() {
                expect.insert("absent".into(), json!(step.absent));
            }
            steps.push(json!({"tool": step.tool, "args": step.args, "expect": expect}));
            recorded.push(json!({"action": {"name": step.tool, "arguments": step.args}, "observation": observation}));
        }
        steps_total += steps.len();
        cases.push(json!({"name": session.id, "state": state, "steps": steps}));
        let line = json!({"env": name, "task_id": session.id, "state": state_file(&session.size), "steps": recorded});
        trajectories.push_str(&line.to_string());
        trajectories.push('\n');
    }
    let mut files = Files::new();
    files.insert("env.py".into(), reply.code.clone());
    let manifest_value = serde_json::to_value(&manifest).map_err(|e| protocol(e.to_string()))?;
    files.insert("manifest.json".into(), pretty(&manifest_value));
    files.insert("openapi.json".into(), pretty(&reply.openapi));
    files.insert("NOTICE.md".into(), notice(app));
    let mut state_rows = BTreeMap::new();
    for (size, state) in &reply.states {
        state_rows.insert(size.clone(), rows(state));
        files.insert(format!("states/{}", state_file(size)), format!("{state}\n"));
    }
    files.insert("tests.json".into(), pretty(&json!({"cases": cases})));
    files.insert("trajectories.jsonl".into(), trajectories);
    let env = AppWorldEnv {
        name,
        app: app.to_owned(),
        tools: reply.tools.len(),
        state_apps: reply.state_apps.clone(),
        rows: state_rows,
        sessions: reply.sessions.len(),
        steps: steps_total,
        failing_steps: failing,
        raising_steps: raising,
    };
    Ok((files, env))
}

/// Imports the apps: runs the helper (which builds the worlds, executes every session on
/// AppWorld and on the generated class) and writes one package per app into `options.out`
/// (each package folder replaced whole). `progress` receives the helper's progress lines.
pub fn import(
    options: &AppWorldImport,
    progress: &mut dyn FnMut(&str),
) -> Result<AppWorldSummary, ImportError> {
    for app in &options.apps {
        if !APPS.contains(&app.as_str()) {
            return Err(import_error(
                "appworld",
                format!("app {app:?}"),
                format!("not an app envsim imports (known: {})", APPS.join(", ")),
            ));
        }
    }
    for size in &options.sizes {
        if !SIZES.iter().any(|(s, _, _)| s == size) {
            return Err(import_error(
                "appworld",
                format!("size {size:?}"),
                format!(
                    "not a world size (known: {})",
                    SIZES.map(|(s, _, _)| s).join(", ")
                ),
            ));
        }
    }
    if options.apps.is_empty() || options.sizes.is_empty() {
        return Err(import_error(
            "appworld",
            "request",
            "give at least one app and one size",
        ));
    }
    let reply = run_helper(options, progress)?;
    let mut summary = AppWorldSummary {
        version: reply.version.clone(),
        ..AppWorldSummary::default()
    };
    let mut packages = Vec::new();
    for app in &options.apps {
        let Some(app_reply) = reply.apps.get(app) else {
            return Err(import_error(
                "appworld_import.py",
                "reply",
                format!("the app {app} is missing"),
            ));
        };
        let (files, env) = package(app, app_reply)?;
        packages.push((env.name.clone(), files));
        summary.envs.push(env);
    }
    for (size, models) in &reply.build_report {
        for (model, (made, wanted, error)) in models {
            if made < wanted {
                summary.underfilled.push(format!(
                    "{size} {model}: {made} of {wanted} rows: {}",
                    error.as_deref().unwrap_or("no reason given")
                ));
            }
        }
    }
    for (name, files) in &packages {
        write_package(&options.out, name, files)?;
    }
    summary.missing_modules = unimportable(&options.python, BTreeSet::from(["appworld".into()]));
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(sessions: Value, divergences: Value) -> AppReply {
        serde_json::from_value(json!({
            "class_name": "EnvsimAppWorldSimpleNote",
            "description": "A note-taking app to create and manage notes",
            "code": "class EnvsimAppWorldSimpleNote: pass\n",
            "state_apps": ["gmail", "simple_note"],
            "tools": [{"type": "function", "function": {"name": "show_note", "parameters": {"type": "object"}}}],
            "openapi": {"openapi": "3.1.0", "paths": {}},
            "states": {
                "small": {"simple_note": {"notes": {"1": {"id": 1}, "2": {"id": 2}}, "sqlite_sequence": {"notes": 2}}, "gmail": {"users": {"1": {"id": 1}}}},
                "medium": {"simple_note": {"notes": {}}, "gmail": {}}
            },
            "sessions": sessions,
            "divergences": divergences
        }))
        .unwrap()
    }

    #[test]
    fn sessions_become_cases_and_trajectories_naming_their_state() {
        let sessions = json!([{"id": "simple_note-small-1", "size": "small", "steps": [
            {"tool": "show_note", "args": {"note_id": 1}, "answer": {"title": "milk"}, "raised": null, "changes": {}, "absent": []},
            {"tool": "delete_note", "args": {"note_id": 9}, "answer": "Response status code is 422:\n{\"message\":\"no\"}", "raised": null, "changes": {}, "absent": []},
            {"tool": "delete_note", "args": {"note_id": 2}, "answer": {"message": "Note deleted."}, "raised": null, "changes": {}, "absent": ["/simple_note/notes/2"]},
            {"tool": "download", "args": {}, "answer": null, "raised": "Exception: no user", "changes": {"/gmail/users/2": {"id": 2}}, "absent": []}
        ]}]);
        let (files, env) = package("simple_note", &reply(sessions, json!([]))).unwrap();
        assert_eq!(env.name, "appworld_simple_note");
        assert_eq!((env.steps, env.failing_steps, env.raising_steps), (4, 1, 1));
        assert_eq!(
            env.rows["small"], 3,
            "two notes and a gmail user; counters are not rows"
        );
        let tests: Value = serde_json::from_str(&files["tests.json"]).unwrap();
        // 1_small.json sorts before 2_medium.json: the small world is state 0.
        assert_eq!(tests["cases"][0]["state"], 0);
        let steps = &tests["cases"][0]["steps"];
        assert_eq!(
            steps[0]["expect"],
            json!({"success": true, "observation": {"title": "milk"}})
        );
        assert_eq!(steps[1]["expect"]["success"], false);
        assert_eq!(
            steps[2]["expect"],
            json!({"success": true, "observation": {"message": "Note deleted."}, "absent": ["/simple_note/notes/2"]})
        );
        assert_eq!(
            steps[3]["expect"],
            json!({"success": false, "state": {"/gmail/users/2": {"id": 2}}})
        );
        let line: Value =
            serde_json::from_str(files["trajectories.jsonl"].lines().next().unwrap()).unwrap();
        assert_eq!(line["state"], "1_small.json");
        assert_eq!(line["steps"][0]["observation"], "{\"title\":\"milk\"}");
        assert_eq!(line["steps"][3]["observation"], "Error: Exception: no user");
        let manifest: Value = serde_json::from_str(&files["manifest.json"]).unwrap();
        assert_eq!(
            manifest["outcome"],
            json!({"rule": "error_prefix", "prefix": "Response status code is"})
        );
        assert!(manifest["description"]
            .as_str()
            .unwrap()
            .contains("of gmail (which its calls read or write)"));
        assert!(files.contains_key("states/1_small.json"));
        assert!(files.contains_key("states/2_medium.json"));
        assert_eq!(manifest["clocks"]["2_medium.json"], "2023-05-18T12:00:00Z");
        assert!(files["NOTICE.md"].contains("encrypted"));
    }

    #[test]
    fn a_generated_class_that_differs_from_appworld_is_refused_with_the_places() {
        let error = package(
            "simple_note",
            &reply(
                json!([]),
                json!([
                    "simple_note-small-1 step 2 show_note: AppWorld answered 1, envsim's class 2"
                ]),
            ),
        )
        .unwrap_err();
        assert!(error
            .message
            .contains("differs from AppWorld's own execution in 1 places"));
        assert!(error.message.contains("step 2 show_note"));
    }

    #[test]
    fn failures_are_answers_with_the_exception_text_and_every_other_answer_succeeds() {
        let rule = outcome_rule();
        assert_eq!(
            rule.classify(&json!("Response status code is 401:\n{}")),
            Some(false)
        );
        assert_eq!(rule.classify(&json!({"message": "ok"})), Some(true));
        assert_eq!(rule.classify(&json!([])), Some(true));
        assert_eq!(rule.classify(&json!("a note's text")), Some(true));
    }

    #[test]
    fn unknown_apps_and_sizes_are_refused_before_anything_runs() {
        let options = |apps: &[&str], sizes: &[&str]| AppWorldImport {
            apps: apps.iter().map(|s| s.to_string()).collect(),
            sizes: sizes.iter().map(|s| s.to_string()).collect(),
            python: PathBuf::from("/nonexistent/python"),
            out: PathBuf::from("/nonexistent/out"),
        };
        let error = import(&options(&["slack"], &["small"]), &mut |_| {}).unwrap_err();
        assert!(
            error.message.contains("known: amazon, file_system"),
            "{}",
            error.message
        );
        let error = import(&options(&["gmail"], &["huge"]), &mut |_| {}).unwrap_err();
        assert!(
            error.message.contains("known: small, medium, large"),
            "{}",
            error.message
        );
    }

    #[test]
    fn a_python_without_appworld_names_the_pip_command() {
        let dir = tempfile::tempdir().unwrap();
        let python = crate::bfcl::tests::python_without_site(dir.path());
        let error = locate(&python).unwrap_err();
        assert!(
            error.message.contains("appworld install"),
            "{}",
            error.message
        );
    }
}

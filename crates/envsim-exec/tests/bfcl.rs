//! BFCL v4 multi-turn import against the installed bfcl-eval package: every ground-truth step of
//! the base category replays through the executor, and from the JSON state the live BFCL object
//! had before it gives the observation and the state after that the live object gave (round
//! trip). Skips with a message when bfcl-eval is not importable; `ENVSIM_REQUIRE_BFCL=1` makes
//! that a failure (CI).

use envsim_exec::bfcl::{self, BfclImport, PIP_HINT};
use envsim_exec::package::EnvPackage;
use envsim_exec::{default_seed, Call, ExecError, Executor, Limits};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The interpreter and the bfcl_eval folder, or None (skipped) when it is not installed.
fn installed() -> Option<(PathBuf, PathBuf)> {
    let python =
        std::env::var_os("ENVSIM_PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    match bfcl::locate_source(&python) {
        Ok(source) => Some((python, source)),
        Err(e) if std::env::var("ENVSIM_REQUIRE_BFCL").as_deref() == Ok("1") => {
            panic!("ENVSIM_REQUIRE_BFCL=1 but bfcl-eval is not importable: {e}")
        }
        Err(_) => {
            eprintln!(
                "SKIPPED: bfcl-eval is not importable by {}; to run these tests: {PIP_HINT} (ENVSIM_REQUIRE_BFCL=1 makes this a failure)",
                python.display()
            );
            None
        }
    }
}

#[derive(Default)]
struct Counts {
    steps: usize,
    without_error: usize,
    identical: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_ground_truth_replays_identically_from_json_states() {
    let Some((python, source)) = installed() else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let summary = bfcl::import(&BfclImport {
        source,
        category: "base".into(),
        python,
        out: out.path().to_owned(),
    })
    .expect("the import succeeds");
    assert_eq!(summary.tasks, 200);
    assert_eq!(summary.steps, 1142);
    assert_eq!(summary.skipped, Vec::<String>::new());
    let mut names: Vec<&str> = summary.envs.iter().map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "bfcl_gorilla_file_system",
            "bfcl_math_api",
            "bfcl_message_api",
            "bfcl_posting_api",
            "bfcl_ticket_api",
            "bfcl_trading_bot",
            "bfcl_travel_booking",
            "bfcl_vehicle_control",
        ]
    );
    let states: usize = summary.envs.iter().map(|e| e.states).sum();
    // Tasks per class in the base category (a task involves one to three classes).
    let per_class: BTreeMap<&str, usize> = summary
        .envs
        .iter()
        .map(|e| (e.class.as_str(), e.states))
        .collect();
    assert_eq!(
        per_class,
        BTreeMap::from([
            ("GorillaFileSystem", 50),
            ("MathAPI", 25),
            ("MessageAPI", 40),
            ("TicketAPI", 31),
            ("TradingBot", 50),
            ("TravelAPI", 50),
            ("TwitterAPI", 39),
            ("VehicleControlAPI", 50),
        ])
    );
    assert_eq!(states, 335);
    assert_eq!(summary.envs.iter().map(|e| e.steps).sum::<usize>(), 1142);

    let executor = Executor::new(2, Limits::default()).await.expect("python3");
    let mut counts = BTreeMap::<String, Counts>::new();
    let mut problems = Vec::new();
    for env in &summary.envs {
        let package = EnvPackage::load(&out.path().join(&env.name)).expect("the package loads");
        // The code map speaks of BFCL's code alone: envsim's adapter, marked, is left out.
        let marked = envsim_exec::coverage::adapter_lines(&package.code.code);
        assert!(
            marked.last() == Some(&true),
            "{}: the adapter is marked",
            env.name
        );
        let map = executor.code_map(&package.code).await.unwrap();
        assert!(
            !map.lines.is_empty()
                && (map.lines.iter())
                    .all(|&l| !marked.get(l as usize - 1).copied().unwrap_or(true)),
            "{}: the code map holds lines of the adapter",
            env.name
        );
        let cases: BTreeMap<&str, _> = package.tests.iter().map(|c| (c.name.as_str(), c)).collect();
        let text = std::fs::read_to_string(package.dir.join("trajectories.jsonl")).unwrap();
        let count = counts.entry(env.name.clone()).or_default();
        for line in text.lines() {
            let trajectory: Value = serde_json::from_str(line).unwrap();
            let task = trajectory["task_id"].as_str().unwrap();
            assert_eq!(trajectory["env"], Value::String(env.name.clone()));
            let case = cases[task];
            let initial = &trajectory["initial_state"];
            assert_eq!(
                &package.states[case.state].1, initial,
                "{task}: the state file is the trajectory's"
            );
            // The JSON state is what the constructor builds from it.
            let constructed = executor
                .construct(&package.code, initial, 0, envsim_exec::DEFAULT_CLOCK)
                .await
                .unwrap();
            if &constructed != initial {
                problems.push(format!(
                    "{}/{task}: the constructed state differs from the file",
                    env.name
                ));
            }
            let steps = trajectory["steps"].as_array().unwrap();
            assert_eq!(steps.len(), case.steps.len());
            // Each step starts from the JSON state the live BFCL object had before it.
            let mut before = initial.clone();
            for (k, (step, scripted)) in steps.iter().zip(&case.steps).enumerate() {
                count.steps += 1;
                let at = format!("{}/{task}/step {k} ({})", env.name, scripted.tool);
                let args: &Map<String, Value> = step["action"]["arguments"].as_object().unwrap();
                assert_eq!(
                    step["action"]["name"].as_str(),
                    Some(scripted.tool.as_str())
                );
                let expected_after = &scripted.expect.state[""];
                let call = Call {
                    seed: default_seed(&before, &scripted.tool, args),
                    ..Call::new(&package.code, &scripted.tool, args, &before)
                };
                match executor.call(&call).await {
                    Ok(outcome) => {
                        count.without_error += 1;
                        let observation_ok =
                            outcome.observation == step["observation"].as_str().unwrap();
                        let state_ok = &outcome.state_after == expected_after;
                        if observation_ok && state_ok {
                            count.identical += 1;
                        } else {
                            problems.push(format!(
                                "{at}: observation {} (recorded {}), state after {}",
                                outcome.observation,
                                step["observation"],
                                if state_ok { "identical" } else { "differs" }
                            ));
                        }
                    }
                    Err(ExecError::Exception { message, .. }) => {
                        problems.push(format!("{at}: raised {message}"))
                    }
                    Err(e) => problems.push(format!("{at}: {e}")),
                }
                before = expected_after.clone();
            }
        }
    }
    for (name, c) in &counts {
        eprintln!(
            "{name}: {} steps, {} without error, {} identical to the live BFCL object",
            c.steps, c.without_error, c.identical
        );
    }
    let total: usize = counts.values().map(|c| c.steps).sum();
    let identical: usize = counts.values().map(|c| c.identical).sum();
    eprintln!("base category: {total} ground-truth steps, {identical} replay identically from their JSON state");
    assert_eq!(total, 1142);
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Writes `files` (relative path, text) under `root`.
fn write_tree(root: &std::path::Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// A small hand-written package in bfcl_eval's layout (no BFCL needed): an API class with a
/// set, integer keys and a seeded generator, an aliased import of a helper module (inlined as
/// a module object), a tool that fails by an `error` key, one that raises, a call no class
/// has and positional arguments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_written_bfcl_layout_imports_end_to_end() {
    let root = tempfile::tempdir().unwrap();
    let source = root.path().join("bfcl_eval");
    write_tree(
        &source,
        &[
            ("__init__.py", ""),
            ("constants/__init__.py", ""),
            (
                "constants/executable_backend_config.py",
                "CLASS_FILE_PATH_MAPPING = {'CounterAPI': 'bfcl_eval.apis.counter'}\n\
                 MULTI_TURN_FUNC_DOC_FILE_MAPPING = {'CounterAPI': 'counter.json'}\n\
                 STATELESS_CLASSES = []\n",
            ),
            ("apis/__init__.py", ""),
            ("apis/helpers.py", "import os\nSTART = 5\n"),
            (
                "apis/counter.py",
                "import random\n\
                 from bfcl_eval.apis.helpers import START as BEGIN\n\
                 \n\
                 class CounterAPI:\n\
                 \x20   def __init__(self):\n\
                 \x20       self._api_description = 'Counts.'\n\
                 \n\
                 \x20   def _load_scenario(self, scenario, long_context=False):\n\
                 \x20       self.count = scenario.get('count', BEGIN)\n\
                 \x20       self.seen = set()\n\
                 \x20       self.by_count = {}\n\
                 \x20       self._random = random.Random(scenario.get('seed', 7))\n\
                 \n\
                 \x20   def add(self, n: int = 1) -> dict:\n\
                 \x20       self.count += n\n\
                 \x20       self.seen.add(n)\n\
                 \x20       self.by_count[self.count] = n\n\
                 \x20       return {'count': self.count}\n\
                 \n\
                 \x20   def roll(self) -> dict:\n\
                 \x20       return {'roll': self._random.randint(1, 6)}\n\
                 \n\
                 \x20   def fail(self) -> dict:\n\
                 \x20       return {'error': 'nope'}\n\
                 \n\
                 \x20   def boom(self) -> dict:\n\
                 \x20       raise ValueError('boom')\n",
            ),
            (
                "data/BFCL_v4_multi_turn_base.json",
                "{\"id\": \"multi_turn_base_0\", \"question\": [[{\"role\": \"user\", \"content\": \"Add two.\"}], [], [{\"role\": \"user\", \"content\": \"Now roll.\"}]], \"initial_config\": {\"CounterAPI\": {\"count\": 1, \"seed\": 3}}, \"involved_classes\": [\"CounterAPI\"]}\n\
                 {\"id\": \"multi_turn_base_1\", \"question\": [], \"initial_config\": {}, \"involved_classes\": [\"CounterAPI\"]}\n",
            ),
            (
                "data/possible_answer/BFCL_v4_multi_turn_base.json",
                "{\"id\": \"multi_turn_base_0\", \"ground_truth\": [[\"add(2)\", \"roll()\"], [\"fail()\", \"add(n=3)\", \"nowhere(x=1)\"]]}\n\
                 {\"id\": \"multi_turn_base_1\", \"ground_truth\": [[\"roll()\", \"boom()\", \"add()\"]]}\n",
            ),
            (
                "data/multi_turn_func_doc/counter.json",
                "{\"name\": \"add\", \"description\": \"Add n.\", \"parameters\": {\"type\": \"dict\", \"properties\": {\"n\": {\"type\": \"integer\", \"description\": \"How much.\", \"default\": 1}}, \"required\": []}}\n\
                 {\"name\": \"roll\", \"description\": \"Roll a die.\", \"parameters\": {\"type\": \"dict\", \"properties\": {}, \"required\": []}}\n\
                 {\"name\": \"fail\", \"description\": \"Fail.\", \"parameters\": {\"type\": \"dict\", \"properties\": {}, \"required\": []}}\n\
                 {\"name\": \"boom\", \"description\": \"Raise.\", \"parameters\": {\"type\": \"dict\", \"properties\": {}, \"required\": []}}\n",
            ),
        ],
    );
    let python =
        std::env::var_os("ENVSIM_PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    let out = root.path().join("out");
    let summary = bfcl::import(&BfclImport {
        source: source.clone(),
        category: "base".into(),
        python,
        out: out.clone(),
    })
    .expect("the import succeeds");
    assert_eq!((summary.tasks, summary.steps), (2, 8));
    assert_eq!(summary.envs.len(), 1);
    let env = &summary.envs[0];
    assert_eq!(
        (
            env.name.as_str(),
            env.class.as_str(),
            env.tools,
            env.states,
            env.steps
        ),
        ("bfcl_counter", "CounterAPI", 4, 2, 5)
    );
    assert_eq!(
        summary.skipped,
        [
            "multi_turn_base_1: boom(): BFCL raised ValueError: boom (this and the class's later calls in the task are not scripted)",
            "multi_turn_base_0: nowhere(x=1): no involved class has the function 'nowhere'",
        ]
    );
    let package = EnvPackage::load(&out.join("bfcl_counter")).unwrap();
    assert_eq!(package.manifest.class_name, "EnvsimCounterAPI");
    assert_eq!(package.manifest.description, "Counts.");
    assert_eq!(
        serde_json::to_value(&package.outcome).unwrap(),
        serde_json::json!({"rule": "error_key", "key": "error"})
    );
    assert!(
        package
            .code
            .code
            .contains("_envsim_modules['bfcl_eval.apis.helpers']"),
        "an aliased import keeps its module"
    );
    let states: Vec<(&str, &Value)> = package
        .states
        .iter()
        .map(|(n, s)| (n.as_str(), s))
        .collect();
    assert_eq!(
        states,
        [
            (
                "multi_turn_base_0.json",
                &serde_json::json!({"count": 1, "seen": [], "by_count": {},
                    "private_random": {"seed": 3, "words_drawn": 0},
                    "json_types": {"/private_random": "random", "/seen": "set"}})
            ),
            (
                "multi_turn_base_1.json",
                &serde_json::json!({"count": 5, "seen": [], "by_count": {},
                    "private_random": {"seed": 7, "words_drawn": 0},
                    "json_types": {"/private_random": "random", "/seen": "set"}})
            ),
        ]
    );
    let trajectories =
        std::fs::read_to_string(out.join("bfcl_counter/trajectories.jsonl")).unwrap();
    let lines: Vec<Value> = trajectories
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let steps: Vec<(String, String)> = lines[0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["action"].to_string(),
                s["observation"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            (
                r#"{"name":"add","arguments":{"n":2}}"#.to_owned(),
                "{'count': 3}".to_owned()
            ),
            (
                r#"{"name":"roll","arguments":{}}"#.to_owned(),
                "{'roll': 2}".to_owned()
            ),
            (
                r#"{"name":"fail","arguments":{}}"#.to_owned(),
                "{'error': 'nope'}".to_owned()
            ),
            (
                r#"{"name":"add","arguments":{"n":3}}"#.to_owned(),
                "{'count': 6}".to_owned()
            ),
        ]
    );
    assert_eq!(
        lines[1]["steps"].as_array().unwrap().len(),
        1,
        "the case stops at the raising call"
    );
    // The user's words become the package's task list (empty turns left out; a task with no
    // question has no entry).
    let tasks: Vec<Value> = package
        .tasks_jsonl
        .as_deref()
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        tasks,
        [
            serde_json::json!({"id": "multi_turn_base_0", "env": "bfcl_counter",
            "instruction": "Add two.", "turns": ["Now roll."],
            "state": "multi_turn_base_0.json", "source": "bfcl"})
        ]
    );
    let last = &package.tests[0].steps[3].expect;
    assert_eq!(last.success, Some(true));
    assert_eq!(package.tests[0].steps[2].expect.success, Some(false));
    assert_eq!(
        last.state[""],
        serde_json::json!({"count": 6, "seen": [2, 3], "by_count": {"3": 2, "6": 3},
            "private_random": {"seed": 3, "words_drawn": 1},
            "json_types": {"/by_count": "int_keys", "/private_random": "random", "/seen": "set"}})
    );
    // The scripted tests pass through the executor (observations, outcomes, whole states).
    let executor = Executor::new(1, Limits::default()).await.expect("python3");
    assert_eq!(
        package.check(&executor).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(package.run_tests(&executor).await, Vec::<String>::new());

    // A class the package does not map is named with its task, by the helper.
    write_tree(
        &source,
        &[
            (
                "data/BFCL_v4_multi_turn_odd.json",
                "{\"id\": \"odd_0\", \"initial_config\": {}, \"involved_classes\": [\"NopeAPI\"]}\n",
            ),
            (
                "data/possible_answer/BFCL_v4_multi_turn_odd.json",
                "{\"id\": \"odd_0\", \"ground_truth\": [[\"add()\"]]}\n",
            ),
        ],
    );
    let import = |category: &str| {
        bfcl::import(&BfclImport {
            source: source.clone(),
            category: category.into(),
            python: PathBuf::from("python3"),
            out: out.clone(),
        })
        .unwrap_err()
        .to_string()
    };
    assert_eq!(
        import("odd"),
        "bfcl_import.py: helper: task odd_0: involved class 'NopeAPI' is not in bfcl_eval's CLASS_FILE_PATH_MAPPING"
    );
    // A missing category names the ones there.
    assert_eq!(
        import("miss_param"),
        format!(
            "{}: category \"miss_param\": no data/BFCL_v4_multi_turn_miss_param.json with data/possible_answer/BFCL_v4_multi_turn_miss_param.json; categories found: base, odd",
            source.display()
        )
    );
}

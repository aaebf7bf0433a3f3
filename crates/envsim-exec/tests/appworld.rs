//! AppWorld import against the installed appworld package (PyPI `appworld==0.1.3.post1`, then
//! `appworld install`): the helper builds a world with AppWorld's record factories, runs call
//! sessions on AppWorld itself and again through the generated class (refusing any
//! difference); here the written package loads, its states are what the constructor builds,
//! every scripted step passes through the sandboxed executor, and a call on a state answers the
//! same in two fresh workers.
//!
//! AppWorld pins pydantic 1, so it usually has a virtual environment of its own:
//! `ENVSIM_APPWORLD_PYTHON` names that interpreter (else `ENVSIM_PYTHON`, else `python3`), and
//! this test binary runs the executor with it. Skips with a message when appworld is not
//! importable; `ENVSIM_REQUIRE_APPWORLD=1` makes that a failure (CI).

use envsim_exec::appworld::{self, AppWorldImport, PIP_HINT};
use envsim_exec::package::EnvPackage;
use envsim_exec::{Call, Executor, Limits};
use serde_json::{json, Value};
use std::path::PathBuf;

/// The executor's limits with a wall clock of 60 s: a worker's first AppWorld call imports
/// AppWorld and builds its world, which a loaded test machine can stretch past the default
/// 10 s (seen with other test binaries building beside this one).
fn appworld_limits() -> Limits {
    Limits::from_vars(None, Some("60")).expect("a valid wall-clock limit")
}

/// The interpreter, or None (skipped) when appworld is not importable.
fn installed() -> Option<PathBuf> {
    let python = std::env::var_os("ENVSIM_APPWORLD_PYTHON")
        .or_else(|| std::env::var_os("ENVSIM_PYTHON"))
        .map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    match appworld::locate(&python) {
        Ok(_) => Some(python),
        Err(e) if std::env::var("ENVSIM_REQUIRE_APPWORLD").as_deref() == Ok("1") => {
            panic!("ENVSIM_REQUIRE_APPWORLD=1 but appworld is not importable: {e}")
        }
        Err(_) => {
            eprintln!(
                "SKIPPED: appworld is not importable by {}; to run this test: {PIP_HINT}, then ENVSIM_APPWORLD_PYTHON=<its python> (ENVSIM_REQUIRE_APPWORLD=1 makes this a failure)",
                python.display()
            );
            None
        }
    }
}

// One test in this binary: it points the executor at AppWorld's interpreter for the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_apps_import_and_every_scripted_call_passes_in_shared_workers() {
    let Some(python) = installed() else { return };
    std::env::set_var("ENVSIM_PYTHON", &python);
    let out = tempfile::tempdir().unwrap();
    let mut progress = Vec::new();
    let summary = appworld::import(
        &AppWorldImport {
            apps: vec!["phone".into(), "simple_note".into()],
            sizes: vec!["small".into()],
            python: python.clone(),
            out: out.path().to_owned(),
        },
        &mut |line| progress.push(line.to_owned()),
    )
    .expect("the import succeeds");
    assert_eq!(summary.version.as_deref(), Some("0.1.3.post1"));
    assert_eq!(summary.missing_modules, Vec::<String>::new());
    let env = summary.envs[1].clone();
    assert_eq!(env.name, "appworld_simple_note");
    let phone = summary.envs[0].clone();
    assert_eq!(phone.name, "appworld_phone");
    assert_eq!(phone.state_apps, vec!["phone"]);
    assert_eq!(env.tools, 17, "simple_note's agent-visible APIs");
    // Sign-up and password-reset mail goes to gmail: its tables are part of the state.
    assert_eq!(env.state_apps, vec!["gmail", "simple_note"]);
    assert_eq!(env.sessions, 2);
    assert!(
        env.failing_steps > 0 && env.failing_steps < env.steps,
        "{env:?}"
    );
    assert!(
        progress
            .iter()
            .any(|l| l.starts_with("simple_note: 17 APIs")),
        "{progress:?}"
    );

    let folder = out.path().join(&env.name);
    let package = EnvPackage::load(&folder).expect("the package loads");
    assert_eq!(package.tests.len(), 2);
    assert_eq!(package.states.len(), 1);
    for file in ["openapi.json", "NOTICE.md", "trajectories.jsonl", "env.py"] {
        assert!(folder.join(file).is_file(), "{file} is written");
    }
    let spec: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("openapi.json")).unwrap())
            .unwrap();
    // AppWorld's own path and method, the app's prefix as the server.
    assert_eq!(
        spec.pointer("/paths/~1notes~1{note_id}/delete/operationId"),
        Some(&json!("delete_note"))
    );
    assert_eq!(spec.pointer("/servers/0/url"), Some(&json!("/simple_note")));

    let executor = Executor::new(2, appworld_limits())
        .await
        .expect("the executor starts with AppWorld's interpreter");
    let problems = package.check(&executor).await.expect("the code loads");
    assert_eq!(problems, Vec::<String>::new());
    let (name, state) = &package.states[0];
    let constructed = executor
        .construct(&package.code, state, 0, envsim_exec::DEFAULT_CLOCK)
        .await
        .unwrap();
    assert!(
        &constructed == state,
        "{name}: the constructed state differs"
    );
    let failures = package.run_tests(&executor).await;
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Another app's package in the same workers: AppWorld keeps one world per process, the
    // apps outside each package's state emptied before its calls, so neither sees the other's.
    let phone_package = EnvPackage::load(&out.path().join(&phone.name)).unwrap();
    let failures = phone_package.run_tests(&executor).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let failures = package.run_tests(&executor).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // The state is the tables: a note of the world, read through the API after a login.
    let notes = state
        .pointer("/simple_note/notes")
        .and_then(Value::as_object)
        .unwrap();
    let (note_id, note) = notes.iter().next().unwrap();
    let owner = note["user_id"].clone();
    let user = &state["simple_note"]["users"][owner.to_string()];
    let credentials = json!({"username": user["email"], "password": user["password"]});
    let login = executor
        .call(&Call::new(
            &package.code,
            "login",
            credentials.as_object().unwrap(),
            state,
        ))
        .await
        .unwrap();
    let token = login.observation_json["access_token"].clone();
    assert!(token.is_string(), "{:?}", login.observation_json);
    let show = |state: Value| {
        let code = package.code.clone();
        let token = token.clone();
        let note_id: i64 = note_id.parse().unwrap();
        async move {
            let executor = Executor::new(1, appworld_limits()).await.unwrap();
            let args = json!({"note_id": note_id, "access_token": token});
            executor
                .call(&Call::new(
                    &code,
                    "show_note",
                    args.as_object().unwrap(),
                    &state,
                ))
                .await
                .unwrap()
        }
    };
    let first = show(login.state_after.clone()).await;
    assert_eq!(first.observation_json["title"], note["title"]);
    // The same call on the same state in another fresh worker: the same answer and state.
    let second = show(login.state_after.clone()).await;
    assert_eq!(first.observation_json, second.observation_json);
    assert_eq!(first.state_after, second.state_after);
}

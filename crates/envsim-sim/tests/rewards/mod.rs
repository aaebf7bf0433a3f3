//! What the suite reward tests share: every scripted case of a folder of packages tried as a
//! task whose calls are the reference.

use envsim_core::audit::Effects;
use envsim_exec::package::EnvPackage;
use envsim_exec::Executor;
use envsim_sim::backend::ExecutorSimulator;
use envsim_sim::environment::Environment;
use envsim_sim::reference::{check_rewards, replays, ReferenceCall, Variation};
use std::path::Path;
use std::sync::Arc;

/// Every case of every package under `root`: (cases, cases whose replays all earn 1, cases
/// that change the state, failures in words).
pub async fn rewards_of(
    root: &Path,
    executor: Arc<Executor>,
) -> (usize, usize, usize, Vec<String>) {
    let simulator = ExecutorSimulator::new(executor);
    let (mut cases, mut pass, mut changing, mut failures) = (0, 0, 0, Vec::new());
    for package in EnvPackage::load_all(root).expect("the packages load") {
        let env = Environment::from_package(&package, &[], Effects::default()).expect("env");
        for case in &package.tests {
            let initial = &package.states[case.state].1;
            let calls = ReferenceCall::of_case(case);
            let check = check_rewards(
                &env,
                &simulator,
                initial,
                &calls,
                &Variation::standard(0),
                &replays(),
            )
            .await
            .unwrap_or_else(|e| panic!("{}: {}: {e}", package.manifest.name, case.name));
            cases += 1;
            changing += usize::from(check.checker.checks() > 0);
            if check.replays_pass() {
                pass += 1;
            } else {
                failures.push(format!(
                    "{}/{}: {:?}",
                    package.manifest.name, case.name, check.replays
                ));
            }
            if check.nothing_done_passes() {
                failures.push(format!(
                    "{}/{}: doing nothing passes",
                    package.manifest.name, case.name
                ));
            }
        }
    }
    (cases, pass, changing, failures)
}

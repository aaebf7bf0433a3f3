//! Measures reference checkers on packages: every scripted test case (`tests.json`) is a task
//! whose calls are the reference; its checker is made under the standard variations and
//! tried on replays under other seeds and clocks, and on the initial state.
//!
//! `reference_rewards DIR…` (package folders); prints one line per package and the cases
//! that fail.

use envsim_core::audit::Effects;
use envsim_exec::package::EnvPackage;
use envsim_exec::{Executor, Limits};
use envsim_sim::backend::ExecutorSimulator;
use envsim_sim::environment::Environment;
use envsim_sim::reference::{check_rewards, replays, ReferenceCall, Variation};
use std::sync::Arc;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dirs: Vec<String> = std::env::args().skip(1).collect();
    let limits = Limits::from_env().expect("limits");
    let executor = Arc::new(Executor::new(2, limits).await.expect("python3"));
    let simulator = ExecutorSimulator::new(Arc::clone(&executor));
    for dir in dirs {
        let package = EnvPackage::load(std::path::Path::new(&dir)).expect("loads");
        let env = Environment::from_package(&package, &[], Effects::default()).expect("env");
        let started = std::time::Instant::now();
        let (mut cases, mut pass, mut one_run_pass, mut nothing) = (0, 0, 0, 0);
        let (mut by_value, mut by_kind, mut created, mut dropped, mut changing) = (0, 0, 0, 0, 0);
        let mut failing = Vec::new();
        let limit: usize = std::env::var("CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(usize::MAX);
        for case in package.tests.iter().take(limit) {
            let initial = &package.states[case.state].1;
            let calls = ReferenceCall::of_case(case);
            let check = match check_rewards(
                &env,
                &simulator,
                initial,
                &calls,
                &Variation::standard(0),
                &replays(),
            )
            .await
            {
                Ok(c) => c,
                Err(e) => {
                    failing.push(format!("{}: {e}", case.name));
                    continue;
                }
            };
            let one_run = envsim_core::checker::StateChecker::from_final(initial, &check.finals[0]);
            cases += 1;
            changing += usize::from(check.checker.checks() > 0);
            by_value += check.checker.expect.len() + check.checker.absent.len();
            by_kind += check.checker.vary.len();
            created += check.checker.created.len();
            dropped += check.checker.dropped.len();
            nothing += usize::from(check.nothing_done_passes());
            if check.replays_pass() {
                pass += 1;
            } else {
                let (v, verdict) = check
                    .replays
                    .iter()
                    .find(|(_, v)| !v.failures.is_empty())
                    .unwrap();
                failing.push(format!(
                    "{} (seed {}, clock +{}s): {:?}",
                    case.name, v.seed, v.clock_shift, verdict.failures
                ));
            }
            let all = check
                .replay_finals
                .iter()
                .all(|done| one_run.check(initial, done).failures.is_empty());
            one_run_pass += usize::from(all);
            if !check.checker.dropped.is_empty() {
                eprintln!("{}: dropped {:?}", case.name, check.checker.dropped);
            }
        }
        println!(
            "{}: {pass} of {cases} cases earn reward 1 on every replay (one-run checkers: {one_run_pass}); {changing} change the state; doing nothing passes {nothing}; checks by value {by_value}, by kind {by_kind}, created {created}, dropped {dropped}; {:.1}s",
            package.manifest.name,
            started.elapsed().as_secs_f64()
        );
        for line in failing.iter().take(10) {
            println!("  {}", line.chars().take(600).collect::<String>());
        }
    }
}

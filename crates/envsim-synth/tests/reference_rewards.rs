//! A correct agent earns reward 1: the reference calls of walk tasks of every corpus
//! environment, replayed under seeds and clocks other than those their checker was made under
//! (as an episode gets them), meet their checker. A checker made from one run does not: the
//! test also counts those failures, so that it shows what it guards against.

use envsim_core::audit::Effects;
use envsim_exec::package::EnvPackage;
use envsim_exec::{Executor, Limits};
use envsim_explore::plan::ExplorePlan;
use envsim_sim::backend::ExecutorSimulator;
use envsim_sim::environment::Environment;
use envsim_sim::reference::{self, ReferenceCall, Variation};
use std::path::Path;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_solutions_of_walk_tasks_earn_reward_one_under_other_seeds_and_clocks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../envs");
    let packages = EnvPackage::load_all(&root).expect("the corpus loads");
    assert!(packages.len() >= 40, "{} packages", packages.len());
    let executor = Arc::new(Executor::new(2, Limits::default()).await.expect("python3"));
    let plan = ExplorePlan {
        walks: 1,
        steps: 10,
        seed: 3,
        ..ExplorePlan::default()
    };
    let paths = envsim_explore::explore(
        Arc::clone(&executor),
        Arc::new(packages.clone()),
        plan,
        2,
        |_, _| {},
    )
    .await
    .expect("explores")
    .into_paths();
    let runs = envsim_bench::audit_check::trajectories_from_walks(&paths);
    let simulator = ExecutorSimulator::new(Arc::clone(&executor));
    let (mut tasks, mut changing, mut failures, mut one_run_failures) = (0, 0, Vec::new(), 0);
    // What the checkers leave unchecked, and whether they still tell undone work apart.
    let (mut by_value, mut by_kind, mut created, mut dropped) = (0, 0, 0, 0);
    let mut nothing_done_passes = Vec::new();
    for package in &packages {
        let name = &package.manifest.name;
        let env = Environment::from_package(package, &[], Effects::default()).expect("env");
        for run in runs.get(name).into_iter().flatten() {
            let mut parts = run.id.splitn(3, '/').skip(1);
            let (state, walk) = (parts.next().unwrap(), parts.next().unwrap());
            // The walk without its harmless refusals where it has some, else the whole walk
            // (one task per walk keeps the test short; their prefixes change less).
            let walk_tasks = envsim_synth::task::walk_tasks(name, state, walk, run);
            let cleaned = walk_tasks
                .iter()
                .filter(|t| t.id.contains("-ok-"))
                .max_by_key(|t| t.plan.len());
            let whole = walk_tasks
                .iter()
                .filter(|t| !t.id.contains("-ok-"))
                .max_by_key(|t| t.plan.len());
            for task in cleaned.or(whole).into_iter() {
                let calls: Vec<ReferenceCall> = task
                    .plan
                    .iter()
                    .map(|c| ReferenceCall {
                        tool: c.name.clone(),
                        arguments: c.arguments.clone(),
                    })
                    .collect();
                let initial = run.initial_state.as_ref();
                let check = reference::check_rewards(
                    &env,
                    &simulator,
                    initial,
                    &calls,
                    &Variation::standard(0),
                    &reference::replays(),
                )
                .await
                .expect("the reference calls execute");
                let checker = &check.checker;
                let one_run =
                    envsim_core::checker::StateChecker::from_final(initial, &check.finals[0]);
                tasks += 1;
                changing += usize::from(checker.checks() > 0);
                by_value += checker.expect.len() + checker.absent.len();
                by_kind += checker.vary.len();
                created += checker.created.len();
                dropped += checker.dropped.len();
                if check.nothing_done_passes() {
                    nothing_done_passes.push(task.id.clone());
                }
                for (variation, verdict) in &check.replays {
                    if !verdict.failures.is_empty() {
                        failures.push(format!(
                            "{} (seed {}, clock +{}s): {:?}",
                            task.id, variation.seed, variation.clock_shift, verdict.failures
                        ));
                    }
                }
                let one_run_failed = check
                    .replay_finals
                    .iter()
                    .any(|done| !one_run.check(initial, done).failures.is_empty());
                one_run_failures += usize::from(one_run_failed);
            }
        }
    }
    eprintln!(
        "{tasks} walk tasks ({changing} change the state): {} replays fail their checker, \
         {one_run_failures} tasks fail a checker made from one run; checks by value \
         {by_value}, by kind {by_kind}, created records {created}, dropped {dropped}; \
         doing nothing passes {} checkers: {nothing_done_passes:?}",
        failures.len(),
        nothing_done_passes.len()
    );
    assert!(tasks >= 80, "{tasks} tasks");
    assert!(
        changing * 10 >= tasks * 7,
        "{changing} of {tasks} change the state"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Checking less by value never lets the initial state pass a task that changes it.
    assert!(nothing_done_passes.is_empty(), "{nothing_done_passes:?}");
    // What the checker guards against happens in the corpus: a checker of one run fails
    // correct replays.
    assert!(one_run_failures >= 5, "{one_run_failures}");
}

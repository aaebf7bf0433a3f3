//! The bundled corpus (`envs/`): every package loads, its manifest matches its code, and its
//! scripted tests pass through the sandboxed executor; plus the corpus-wide requirements.

use envsim_exec::package::EnvPackage;
use envsim_exec::{Call, Executor, Limits};
use std::collections::BTreeSet;
use std::path::Path;

fn corpus() -> Vec<EnvPackage> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../envs");
    EnvPackage::load_all(&root).expect("the corpus loads")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_package_matches_its_code_and_passes_its_tests() {
    let executor = Executor::new(2, Limits::default()).await.expect("python3");
    let mut failures = Vec::new();
    for package in corpus() {
        let name = &package.manifest.name;
        match package.check(&executor).await {
            Ok(problems) => failures.extend(problems.into_iter().map(|p| format!("{name}: {p}"))),
            Err(e) => failures.push(format!("{name}: cannot describe: {e}")),
        }
        if package.tests.len() < 4 {
            failures.push(format!(
                "{name}: {} test cases, at least 4 expected",
                package.tests.len()
            ));
        }
        let tested: BTreeSet<&str> = package
            .tests
            .iter()
            .flat_map(|c| c.steps.iter().map(|s| s.tool.as_str()))
            .collect();
        for tool in package.manifest.tool_names() {
            if !tested.contains(tool.as_str()) {
                failures.push(format!(
                    "{name}: tool `{tool}` is not exercised by tests.json"
                ));
            }
        }
        failures.extend(package.run_tests(&executor).await);
    }
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn corpus_meets_the_size_requirements() {
    let packages = corpus();
    let tools: usize = packages.iter().map(|p| p.manifest.tools.len()).sum();
    let domains: BTreeSet<&str> = packages
        .iter()
        .map(|p| p.manifest.domain.as_str())
        .collect();
    assert!(packages.len() >= 40, "{} environments", packages.len());
    assert!(tools >= 400, "{tools} tools");
    assert!(domains.len() >= 10, "{} domains", domains.len());
    for p in &packages {
        assert!(
            p.states.len() >= 3,
            "{}: {} states",
            p.manifest.name,
            p.states.len()
        );
    }
    let large = packages
        .iter()
        .filter(|p| p.states.iter().any(|(_, s)| s.to_string().len() >= 60_000))
        .count();
    assert!(
        large >= 10,
        "{large} environments have a state of 60 KB or more"
    );
}

/// At least 10 environments have a scripted successful step with 7–12 changes, and the
/// determinism probe finds clock- or seed-dependent fields in at least 5 environments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_exercises_big_changes_and_nondeterminism() {
    let executor = Executor::new(2, Limits::default()).await.expect("python3");
    let mut big = BTreeSet::new();
    let mut nondeterministic = BTreeSet::new();
    for package in corpus() {
        for case in &package.tests {
            let mut state = package.states[case.state].1.clone();
            for step in &case.steps {
                let call = Call::new(&package.code, &step.tool, &step.args, &state);
                let Ok(outcome) = executor.call(&call).await else {
                    break;
                };
                let count = envsim_core::diff::reference_change_count(&state, &outcome.state_after);
                if step.expect.success == Some(true) && (7..=12).contains(&count) {
                    big.insert(package.manifest.name.clone());
                }
                if step.expect.success == Some(true)
                    && count > 0
                    && !nondeterministic.contains(&package.manifest.name)
                {
                    if let Ok(report) = executor.probe(&call).await {
                        if !report.is_deterministic() {
                            nondeterministic.insert(package.manifest.name.clone());
                        }
                    }
                }
                state = outcome.state_after;
            }
        }
    }
    assert!(
        big.len() >= 10,
        "environments with a 7–12 change step: {big:?}"
    );
    assert!(
        nondeterministic.len() >= 5,
        "environments with clock/seed-dependent output: {nondeterministic:?}"
    );
}

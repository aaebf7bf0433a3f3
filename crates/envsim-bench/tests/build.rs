//! End to end over three corpus environments: explore, sample, render — twice, byte-identical —
//! and the oracle scores 100% on the strict metrics of the result.

use envsim_bench::composition::{sample, Bucket, BucketOutcome, Composition, SampleOptions};
use envsim_bench::output::{render, write_reference_json};
use envsim_core::formats::parse_benchmark;
use envsim_core::prelude::*;
use envsim_exec::package::EnvPackage;
use envsim_exec::{Executor, Limits};
use envsim_explore::plan::ExplorePlan;
use envsim_explore::record::Outcome;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

fn packages() -> Vec<EnvPackage> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../envs");
    ["online_shop", "retail_banking", "file_system"]
        .iter()
        .map(|n| EnvPackage::load(&root.join(n)).expect("package"))
        .collect()
}

fn composition() -> Composition {
    let b = |name: &str, outcome, delta, count| Bucket {
        name: name.into(),
        outcome,
        delta,
        args: None,
        count,
    };
    Composition {
        buckets: vec![
            b("failure", BucketOutcome::Failure, Some([0, 0]), 4),
            b("no_change", BucketOutcome::Success, Some([0, 0]), 4),
            b("changed", BucketOutcome::Success, Some([1, 12]), 6),
        ],
    }
}

/// The rendered files, the reference JSON, and the number of transitions collected.
async fn build(seed: u64) -> (envsim_bench::output::BenchmarkFiles, String, usize) {
    let packages = packages();
    let codes: BTreeMap<String, String> = packages
        .iter()
        .map(|p| (p.manifest.name.clone(), p.code.code.to_string()))
        .collect();
    let executor = Arc::new(Executor::new(2, Limits::default()).await.expect("python3"));
    let plan = ExplorePlan {
        walks: 2,
        steps: 10,
        seed,
        twin: true,
        ..ExplorePlan::default()
    };
    let transitions = envsim_explore::explore(executor, Arc::new(packages), plan, 2, |_, _| {})
        .await
        .expect("explores")
        .into_records();
    assert_eq!(transitions.len(), 3 * 3 * 2 * 10);
    assert!(transitions.iter().any(|t| t.outcome == Outcome::Failure));
    assert!(transitions
        .iter()
        .any(|t| t.outcome == Outcome::Success && t.change_count > 0));
    let options = SampleOptions {
        seed,
        allow_unpredictable: false,
        allow_underfill: false,
        max_env_share: 1.0,
    };
    let sampled = sample(&transitions, &composition(), &options).expect("fills");
    let mut reference = Vec::new();
    write_reference_json(&mut reference, &transitions, &sampled, &codes).expect("writes");
    (
        render(&transitions, &sampled, &composition(), seed),
        String::from_utf8(reference).expect("UTF-8"),
        transitions.len(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builds_are_reproducible_and_the_oracle_is_exact() {
    let (first, first_reference, _) = build(7).await;
    let (second, second_reference, _) = build(7).await;
    assert_eq!(first.fingerprint, second.fingerprint);
    assert!(first.envsim_jsonl == second.envsim_jsonl);
    assert!(first_reference == second_reference);
    assert_eq!(first.datasheet_json["samples"], 14);
    // Every sample is counted under its intent; valid-intent calls fit their schemas.
    let intents = &first.datasheet_json["intents"];
    assert_eq!(
        intents["valid"]["samples"].as_u64().unwrap()
            + intents["invalid"]["samples"].as_u64().unwrap(),
        14
    );
    assert_eq!(intents["valid"]["schema_mismatch"], 0, "{intents}");
    assert!(first.datasheet_md.contains("## Calls"));
    assert_eq!(
        first.datasheet_json["environments"], 3,
        "coverage comes first"
    );

    let transitions = parse_benchmark(first_reference.as_bytes(), "benchmark.json")
        .expect("reference format parses");
    let jsonl = parse_benchmark(first.envsim_jsonl.as_bytes(), "benchmark.jsonl")
        .expect("envsim format parses");
    assert_eq!(transitions.len(), 14);
    assert_eq!(jsonl.len(), 14);
    let mut scores = Vec::new();
    for t in transitions {
        let mut sample = PreparedSample::new(t);
        let prediction = Baseline::Oracle.predict(sample.transition());
        scores.push(sample.score(&prediction, None));
    }
    let report = Report::new("oracle", scores);
    assert_eq!(report.overall.cm_strict, Some(1.0));
    assert_eq!(report.overall.fm_strict, Some(1.0));
    assert_eq!(report.overall.field_f1, Some(1.0));
    let failures = report
        .strata
        .iter()
        .find(|(k, _)| *k == "failure")
        .map(|(_, s)| s.n);
    assert_eq!(
        failures,
        Some(4),
        "the scorer's strata agree with the sampler's buckets"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traced_walks_record_footprints() {
    let packages: Vec<EnvPackage> = packages().into_iter().take(1).collect();
    let executor = Arc::new(Executor::new(1, Limits::default()).await.expect("python3"));
    let plan = ExplorePlan {
        walks: 1,
        steps: 6,
        seed: 3,
        trace: true,
        ..ExplorePlan::default()
    };
    let transitions = envsim_explore::explore(executor, Arc::new(packages), plan, 1, |_, _| {})
        .await
        .expect("explores")
        .into_records();
    let traced: Vec<&Vec<String>> = transitions
        .iter()
        .filter_map(|t| t.reads.as_ref())
        .collect();
    assert!(!traced.is_empty());
    // Every call that got past its argument checks read some state.
    assert!(
        traced
            .iter()
            .any(|reads| reads.iter().any(|p| p.starts_with('/'))),
        "{traced:?}"
    );
}

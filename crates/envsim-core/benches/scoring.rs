//! Scoring throughput on a 400-sample synthetic benchmark with realistic states (10–200 KB).
//!
//! `cargo bench -p envsim-core --bench scoring`; numbers go to docs/benchmarks.md.

use divan::counter::ItemsCount;
use envsim_core::formats::parse_benchmark;
use envsim_core::prelude::*;
use envsim_core::reference::ReferenceTruth;
use envsim_testkit::{to_json_array, BenchOptions, NoisySimulator, SyntheticBench};
use serde_json::Value;

fn main() {
    let (records, _) = fixture();
    let mut sizes: Vec<usize> = records
        .iter()
        .map(|r| r["step_detail"]["config_before"].to_string().len())
        .collect();
    sizes.sort_unstable();
    println!(
        "fixture: {} samples, config_before min {} KB, median {} KB, max {} KB",
        sizes.len(),
        sizes[0] / 1024,
        sizes[sizes.len() / 2] / 1024,
        sizes[sizes.len() - 1] / 1024
    );
    divan::main();
}

/// 400 records: 15 strata buckets × 27 rounds over four state sizes, trimmed to 400.
fn fixture() -> (Vec<Value>, Vec<Prediction>) {
    let mut records = Vec::new();
    for (seed, users) in [(1, 25), (2, 90), (3, 200), (4, 420)] {
        let options = BenchOptions {
            users,
            ..BenchOptions::default()
        };
        records.extend(SyntheticBench::records(seed, 7, &options));
    }
    records.truncate(400);
    let mut simulator = NoisySimulator::new(7);
    let predictions = records
        .iter()
        .map(|r| Prediction::Raw(simulator.output(r)))
        .collect();
    (records, predictions)
}

fn prepared() -> (Vec<PreparedSample>, Vec<Prediction>) {
    let (records, predictions) = fixture();
    let transitions =
        parse_benchmark(to_json_array(&records).as_bytes(), "fixture").expect("fixture parses");
    (
        transitions.into_iter().map(PreparedSample::new).collect(),
        predictions,
    )
}

/// Scoring prepared samples: what `envsim score` does per prediction file.
#[divan::bench(sample_count = 20)]
fn score_400(bencher: divan::Bencher) {
    let (mut samples, predictions) = prepared();
    bencher
        .counter(ItemsCount::new(samples.len()))
        .bench_local(|| {
            for (sample, prediction) in samples.iter_mut().zip(&predictions) {
                divan::black_box(sample.score(prediction, None));
            }
        });
}

/// The reference lane alone (the reference evaluator's extraction, `parse_to_obj`,
/// `apply_change` and checks on Python objects), to show its share of `score_400`.
#[divan::bench(sample_count = 20)]
fn reference_lane_400(bencher: divan::Bencher) {
    let (records, predictions) = fixture();
    let transitions =
        parse_benchmark(to_json_array(&records).as_bytes(), "fixture").expect("fixture parses");
    let mut truths: Vec<ReferenceTruth> = transitions
        .iter()
        .map(|t| ReferenceTruth::new(&t.config_before, &t.config_after, &t.observation))
        .collect();
    bencher
        .counter(ItemsCount::new(truths.len()))
        .bench_local(|| {
            for (truth, prediction) in truths.iter_mut().zip(&predictions) {
                if let Prediction::Raw(text) = prediction {
                    divan::black_box(truth.score_text(text));
                }
            }
        });
}

/// One-time preparation per benchmark sample (truth diffs, normal forms, stratum).
#[divan::bench(sample_count = 10)]
fn prepare_400(bencher: divan::Bencher) {
    let (records, _) = fixture();
    let transitions =
        parse_benchmark(to_json_array(&records).as_bytes(), "fixture").expect("fixture parses");
    bencher
        .counter(ItemsCount::new(transitions.len()))
        .with_inputs(|| transitions.clone())
        .bench_local_values(|owned| {
            owned
                .into_iter()
                .map(PreparedSample::new)
                .collect::<Vec<_>>()
        });
}

/// Parsing the benchmark file itself.
#[divan::bench(sample_count = 10)]
fn parse_file_400(bencher: divan::Bencher) {
    let (records, _) = fixture();
    let text = to_json_array(&records);
    bencher
        .counter(ItemsCount::new(records.len()))
        .bench_local(|| {
            parse_benchmark(divan::black_box(text.as_bytes()), "fixture").expect("parses")
        });
}

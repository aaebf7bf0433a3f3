//! The committed demo data must be exactly what the generator produces.

#[test]
fn committed_demo_matches_generator() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/demo");
    let (bench, predictions) = envsim_testkit::demo_files();
    let committed_bench = std::fs::read_to_string(format!("{root}/benchmark.json"))
        .expect("data/demo/benchmark.json");
    let committed_predictions = std::fs::read_to_string(format!("{root}/predictions.jsonl"))
        .expect("data/demo/predictions.jsonl");
    assert!(
        committed_bench == bench,
        "data/demo/benchmark.json is stale: rerun the make_demo example"
    );
    assert!(
        committed_predictions == predictions,
        "data/demo/predictions.jsonl is stale: rerun the make_demo example"
    );
}

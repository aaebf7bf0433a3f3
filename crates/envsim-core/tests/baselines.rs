//! The built-in baselines on a synthetic fixture benchmark.

use envsim_core::formats::parse_benchmark;
use envsim_core::prelude::*;
use envsim_testkit::{to_json_array, BenchOptions, SyntheticBench};

fn prepared(options: &BenchOptions) -> Vec<PreparedSample> {
    let records = SyntheticBench::records(11, 3, options);
    parse_benchmark(to_json_array(&records).as_bytes(), "fixture")
        .expect("fixture parses")
        .into_iter()
        .map(PreparedSample::new)
        .collect()
}

fn run(samples: &mut [PreparedSample], baseline: Baseline) -> Report {
    let scores = samples
        .iter_mut()
        .map(|s| {
            let p = baseline.predict(s.transition());
            s.score(&p, None)
        })
        .collect();
    Report::new(baseline.name(), scores)
}

#[test]
fn fixture_covers_every_stratum() {
    let samples = prepared(&BenchOptions::default());
    assert_eq!(samples.len(), 45);
    let report = Report::new("x", Vec::new());
    for (key, _) in report.strata.iter().filter(|(k, _)| *k != "unclassified") {
        let n = samples
            .iter()
            .filter(|s| s.stratum.key() == *key || s.stratum.detail_key() == Some(key))
            .count();
        let expected = match *key {
            "medium_3" | "medium_4" | "medium_5" | "medium_6" => 3,
            "difficult_7_12" => 18,
            _ => 3,
        };
        assert_eq!(n, expected, "{key}");
    }
    // The stored count is absent, so the computed one is used, and they agree by construction.
    assert!(samples
        .iter()
        .all(|s| s.change_count == s.computed_change_count));
}

#[test]
fn oracle_scores_100_percent_everywhere_without_reference_blind_spots() {
    let options = BenchOptions {
        removals: false,
        dotted_keys: false,
        ..BenchOptions::default()
    };
    let mut samples = prepared(&options);
    let report = run(&mut samples, Baseline::Oracle);
    for (name, summary) in std::iter::once(("overall", &report.overall))
        .chain(report.strata.iter().map(|(k, s)| (*k, s)))
    {
        if summary.n == 0 {
            continue;
        }
        for (metric, value) in [
            ("fm_ref", summary.fm_ref),
            ("fm_strict", summary.fm_strict),
            ("cm_strict", summary.cm_strict),
            ("cm_ref", summary.cm_ref),
            ("field_f1", summary.field_f1),
            ("field_precision", summary.field_precision),
            ("field_recall", summary.field_recall),
        ] {
            assert_eq!(value, Some(1.0), "{name} {metric}");
        }
        assert_eq!(summary.parse_failure_rate, Some(0.0));
    }
}

#[test]
fn oracle_exposes_reference_flaws_on_removals_and_dotted_keys() {
    let mut samples = prepared(&BenchOptions::default());
    let blind: Vec<bool> = samples
        .iter()
        .map(|s| {
            let t = s.transition();
            envsim_core::diff::reference_diff(
                &t.config_before,
                &t.config_after,
                envsim_core::diff::ReferenceEquality::Python,
            )
            .iter()
            .any(|c| c.after.is_none() || c.pointer.tokens().iter().any(|k| k.contains('.')))
        })
        .collect();
    let report = run(&mut samples, Baseline::Oracle);
    assert_eq!(report.overall.cm_strict, Some(1.0));
    for (sample, blind) in report.samples.iter().zip(&blind) {
        assert_eq!(sample.cm_ref, !blind, "{}", sample.sample_id);
    }
    assert!(
        blind.iter().any(|b| *b),
        "the fixture must contain such samples"
    );
}

#[test]
fn null_scores_exactly_the_no_change_share() {
    let mut samples = prepared(&BenchOptions::default());
    let unchanged = samples
        .iter()
        .filter(|s| s.transition().config_before == s.transition().config_after)
        .count();
    assert_eq!(unchanged, 9, "failure + two no-change buckets, 3 each");
    let report = run(&mut samples, Baseline::Null);
    let share = unchanged as f64 / samples.len() as f64;
    assert_eq!(report.overall.cm_strict, Some(share));
    assert_eq!(report.overall.cm_ref, Some(share));
    assert_eq!(report.overall.fm_ref, Some(0.0));
    assert_eq!(report.strata[0].1.cm_strict, Some(1.0), "failure stratum");
    assert_eq!(report.strata[3].1.cm_strict, Some(0.0), "simple_1 stratum");
}

#[test]
fn sample_scores_round_trip_through_json() {
    let records = SyntheticBench::records(5, 2, &BenchOptions::default());
    let mut samples: Vec<PreparedSample> = parse_benchmark(to_json_array(&records).as_bytes(), "f")
        .expect("fixture parses")
        .into_iter()
        .map(PreparedSample::new)
        .collect();
    let mut noisy = envsim_testkit::NoisySimulator::new(9);
    let mut kinds = std::collections::BTreeSet::new();
    for (sample, record) in samples.iter_mut().zip(&records) {
        let usage = Some(Usage {
            prompt_tokens: 10,
            completion_tokens: 3,
        });
        for prediction in [
            Prediction::Raw(noisy.output(record)),
            Prediction::ApiError("HTTP 500".into()),
            Prediction::Missing,
        ] {
            let score = sample.score(&prediction, usage);
            kinds.insert(score.stratum.key());
            let text = serde_json::to_string(&score).unwrap();
            let back: SampleScore = serde_json::from_str(&text).unwrap();
            assert_eq!(back, score, "{text}");
        }
    }
    assert!(kinds.contains("difficult_7_12") && kinds.contains("failure"));
    // Schema v1 scores (stored runs, old --out files) still read: `fm` and `cm_reference` are the
    // reference columns, and the outcome follows from the request error.
    let v1 = r#"{"sample_id":"x","stratum":"simple_1","change_count":1,"args_count":0,"fm":true,"fm_strict":false,"cm_strict":false,"cm_reference":true,"field":{"truth":1,"predicted":0,"correct":0,"precision":0.0,"recall":0.0,"f1":0.0},"errors":["missed"],"parse_failure":null,"problems":[],"repairs":[],"api_error":null,"usage":null}"#;
    let old: SampleScore = serde_json::from_str(v1).unwrap();
    assert!(old.fm_ref && old.cm_ref && !old.cm_strict);
    assert_eq!(
        old.reference_outcome,
        envsim_core::reference::ReferenceOutcome::Scored
    );
    let failed = v1.replace(r#""api_error":null"#, r#""api_error":"HTTP 500""#);
    let old: SampleScore = serde_json::from_str(&failed).unwrap();
    assert_eq!(
        old.reference_outcome,
        envsim_core::reference::ReferenceOutcome::RequestFailed
    );
    let bad = r#"{"sample_id":"x","stratum":"nope","change_count":0,"args_count":0,"fm":false,"fm_strict":false,"cm_strict":false,"cm_reference":false,"field":{"truth":0,"predicted":0,"correct":0,"precision":1.0,"recall":1.0,"f1":1.0},"errors":[],"parse_failure":null,"problems":[],"repairs":[],"api_error":null,"usage":null}"#;
    let err = serde_json::from_str::<SampleScore>(bad).unwrap_err();
    assert!(
        err.to_string().contains("unknown stratum key \"nope\""),
        "{err}"
    );
}

//! `envsim score` reading the benchmark as a stream (`envsim_eval::scoring`) gives the reports
//! and the errors of reading it whole, preparing every sample and scoring each system over all
//! of them (the workflow it replaced, kept here as the reference).

use envsim_core::baseline::Baseline;
use envsim_core::formats::{match_predictions, parse_predictions, FormatError};
use envsim_core::report::Report;
use envsim_core::sample::Transition;
use envsim_core::score::PreparedSample;
use envsim_eval::prepare::{parse_benchmark, prepare_samples};
use envsim_eval::scoring::{score_files, ScoreError};
use envsim_testkit::{to_json_array, BenchOptions, NoisySimulator, SyntheticBench};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const BOTH: [Baseline; 2] = [Baseline::Null, Baseline::Oracle];

/// The whole-file workflow `envsim score` had before it streamed.
fn whole_file(
    bench: &Path,
    predictions: &[PathBuf],
    baselines: &[Baseline],
    allow_missing: bool,
) -> Result<Vec<Report>, FormatError> {
    let name = bench.display().to_string();
    let bytes = std::fs::read(bench).expect("readable");
    let mut samples: Vec<PreparedSample> = prepare_samples(parse_benchmark(&bytes, &name)?);
    let mut reports = Vec::new();
    for path in predictions {
        let name = path.display().to_string();
        let records = parse_predictions(&std::fs::read(path).expect("readable"), &name)?;
        let transitions: Vec<&Transition> =
            samples.iter().map(PreparedSample::transition).collect();
        let matched = match_predictions(&transitions, records, allow_missing, &name)?;
        let scores = samples
            .iter_mut()
            .zip(&matched)
            .map(|(sample, (prediction, usage))| sample.score(prediction, *usage))
            .collect();
        reports.push(Report::new(name, scores));
    }
    for baseline in baselines {
        let scores = samples
            .iter_mut()
            .map(|sample| {
                let prediction = baseline.predict(sample.transition());
                sample.score(&prediction, None)
            })
            .collect();
        reports.push(Report::new(baseline.name(), scores));
    }
    Ok(reports)
}

/// Reports as the JSON `envsim score --format json` prints (with per-sample scores), so that
/// equal text means byte-for-byte equal output.
fn text(reports: &[Report]) -> Vec<String> {
    reports
        .iter()
        .map(|r| {
            let mut json = r.to_json();
            json["samples"] = serde_json::to_value(&r.samples).expect("serialises");
            serde_json::to_string(&json).expect("serialises")
        })
        .collect()
}

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("writes");
    path
}

fn lines(records: &[Value]) -> String {
    records.iter().map(|r| format!("{r}\n")).collect()
}

/// A benchmark in both forms and a predictions file for it (a noisy simulator's raw outputs
/// with token usage, one sample left out).
fn fixture(dir: &Path) -> (Vec<Value>, PathBuf, PathBuf, PathBuf) {
    let records = SyntheticBench::records(11, 3, &BenchOptions::default());
    let array = write(dir, "bench.json", to_json_array(&records));
    let jsonl = write(dir, "bench.jsonl", lines(&records));
    let mut sim = NoisySimulator::new(7);
    let predictions: String = records
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 4)
        .map(|(i, r)| {
            json!({"sample_id": i, "output": sim.output(r), "usage": {"prompt_tokens": 10, "completion_tokens": 3}})
                .to_string()
                + "\n"
        })
        .collect();
    let preds = write(dir, "preds.jsonl", predictions);
    (records, array, jsonl, preds)
}

fn message(error: ScoreError) -> String {
    match error {
        ScoreError::Format(error) => error.to_string(),
        ScoreError::Read { path, error } => format!("cannot read {}: {error}", path.display()),
    }
}

#[test]
fn streaming_gives_the_whole_file_reports_with_exact_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (records, array, jsonl, preds) = fixture(dir.path());
    let preds = [preds];
    let streamed = score_files(&array, &preds, &BOTH, true).expect("scores");
    let whole = whole_file(&array, &preds, &BOTH, true).expect("scores");
    assert_eq!(text(&streamed), text(&whole));
    assert_eq!(streamed, whole);

    // The figures themselves, known from the fixture: 45 samples, 9 of which change nothing.
    let n = records.len();
    assert_eq!(n, 45);
    let systems: Vec<&str> = streamed.iter().map(|r| r.system.as_str()).collect();
    assert_eq!(
        systems,
        [preds[0].display().to_string().as_str(), "null", "oracle"]
    );
    let [file, null, oracle] = &streamed[..] else {
        panic!("three reports")
    };
    assert_eq!(file.overall.n, n);
    assert_eq!(file.overall.prompt_tokens, 10 * (n as u64 - 1));
    assert_eq!(file.overall.completion_tokens, 3 * (n as u64 - 1));
    assert_eq!(file.overall.errors["missing_prediction"], json!(1));
    assert_eq!(file.samples[4].sample_id, "4");
    assert_eq!(null.overall.cm_strict, Some(9.0 / 45.0));
    assert_eq!(null.overall.fm_ref, Some(0.0));
    assert_eq!(oracle.overall.fm_strict, Some(1.0));
    assert_eq!(oracle.overall.cm_strict, Some(1.0));
    let ids: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    for report in &streamed {
        let order: Vec<&str> = report
            .samples
            .iter()
            .map(|s| s.sample_id.as_str())
            .collect();
        assert_eq!(order, ids, "benchmark order");
    }

    // The JSON Lines form gives the same reports.
    let from_lines = score_files(&jsonl, &preds, &BOTH, true).expect("scores");
    assert_eq!(text(&from_lines), text(&streamed));
}

#[test]
fn trajectories_compact_files_and_reference_results_stream_alike() {
    let dir = tempfile::tempdir().expect("tempdir");
    let records = SyntheticBench::records(3, 1, &BenchOptions::default());
    let step = |i: usize| records[i]["step_detail"].clone();
    // A single-step record, a three-step trajectory, another single step.
    let trajectory = vec![
        records[0].clone(),
        json!({"sample_id": "t", "trajectory": [step(1), step(2), step(3)], "env_code": ""}),
        records[4].clone(),
    ];
    let array = write(dir.path(), "t.json", to_json_array(&trajectory));
    let jsonl = write(dir.path(), "t.jsonl", lines(&trajectory));
    // A reference result file: record 0 (its step index is ignored), steps 0 (no index) and 2
    // of the trajectory; record 2 and step 1 are missing.
    let results = json!({"model": "m", "results": [
        {"sample_index": 0, "step_index": 3, "result": {"feedback_pred_raw": "x", "changes_pred": []}},
        {"sample_index": 1, "result": {"error": "failed_parse", "raw": "{\"feedback\": "}},
        {"sample_index": 1, "step_index": 2, "result": {"error": "timeout"}},
    ], "summary": {}});
    let preds = [write(dir.path(), "r.json", results.to_string())];
    for bench in [&array, &jsonl] {
        let streamed = score_files(bench, &preds, &BOTH, true).expect("scores");
        let whole = whole_file(bench, &preds, &BOTH, true).expect("scores");
        assert_eq!(text(&streamed), text(&whole));
        let ids: Vec<&str> = streamed[0]
            .samples
            .iter()
            .map(|s| s.sample_id.as_str())
            .collect();
        // Records without an id are named by their index.
        assert_eq!(ids, ["0", "t:0", "t:1", "t:2", "2"]);
        assert_eq!(streamed[0].overall.errors["missing_prediction"], json!(2));
        assert_eq!(streamed[0].overall.errors["api_error"], json!(1));
    }

    // Compact JSON Lines: a stored state and samples that patch it.
    let state = json!({"items": {"a": 1, "b": 2}});
    let compact = [
        json!({"state_id": "s0", "state": state}),
        json!({"sample_id": "x", "action": {"name": "get", "arguments": {}}, "observation": "{'success': True}", "config_before_ref": {"state": "s0", "patch": []}, "config_after_ref": {"patch": []}}),
        json!({"sample_id": "y", "action": {"name": "set", "arguments": {"v": 2}}, "observation": "{'success': True}", "config_before_ref": {"state": "s0", "patch": []}, "config_after_ref": {"patch": [{"op": "replace", "path": "/items/a", "value": 2}]}}),
    ];
    let compact = write(dir.path(), "c.jsonl", lines(&compact));
    let preds = [write(
        dir.path(),
        "c.preds.jsonl",
        "{\"sample_id\": \"y\", \"prediction\": {\"feedback\": \"{'success': True}\", \"config_changes\": [{\"type\": \"modify\", \"path\": [\"items\", \"a\"], \"value\": 2}]}}\n",
    )];
    let streamed = score_files(&compact, &preds, &BOTH, true).expect("scores");
    assert_eq!(
        text(&streamed),
        text(&whole_file(&compact, &preds, &BOTH, true).expect("scores"))
    );
    assert_eq!(streamed[0].samples.len(), 2);
    assert!(
        streamed[0].samples[1].cm_strict,
        "{:?}",
        streamed[0].samples[1]
    );
    assert!(!streamed[0].samples[0].cm_strict, "missing");
}

/// A bad benchmark: the error the whole-file reader gives, naming the file and the record or
/// line; a syntax error anywhere comes before a bad record earlier in the file.
#[test]
fn benchmark_errors_name_the_file_and_the_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let records = SyntheticBench::records(5, 1, &BenchOptions::default());
    let mut missing = records.clone();
    missing[2]["step_detail"]
        .as_object_mut()
        .expect("a step")
        .remove("config_after");
    let mut duplicate = records.clone();
    duplicate[3]["sample_id"] = "0".into();
    let late_syntax = format!("{}\n{{\"sample_id\": ", lines(&missing));
    let cases = [
        (
            "missing.json",
            to_json_array(&missing),
            "missing.json: record 2: field `step_detail.config_after`: missing",
        ),
        (
            "missing.jsonl",
            lines(&missing),
            "missing.jsonl: line 3: field `step_detail.config_after`: missing",
        ),
        (
            "dup.jsonl",
            lines(&duplicate),
            "dup.jsonl: line 4: field `sample_id`: duplicate sample id \"0\" (first seen at Line(1))",
        ),
        (
            "late.jsonl",
            late_syntax,
            "late.jsonl:17:14: EOF while parsing a value",
        ),
        (
            "late.json",
            format!("{} x", to_json_array(&missing)),
            "late.json:1:",
        ),
        ("range.json", "[\n{\"a\": 1e999}\n]".to_owned(), "range.json:2:"),
        ("empty.json", " \n ".to_owned(), "empty.json: the file is empty"),
        (
            "none.json",
            "[]".to_owned(),
            "none.json: the benchmark holds no samples",
        ),
    ];
    for (name, content, expected) in cases {
        let bench = write(dir.path(), name, &content);
        let streamed = message(score_files(&bench, &[], &BOTH, false).expect_err(name));
        let whole = whole_file(&bench, &[], &BOTH, false)
            .expect_err(name)
            .to_string();
        assert_eq!(streamed, whole, "{name}");
        assert!(
            streamed.starts_with(&format!("{}", dir.path().join(expected).display())),
            "{name}: {streamed}"
        );
    }
    let nowhere = dir.path().join("nowhere.json");
    let error = message(score_files(&nowhere, &[], &BOTH, false).expect_err("no file"));
    assert!(
        error.starts_with(&format!("cannot read {}: ", nowhere.display())),
        "{error}"
    );
    let folder = message(score_files(dir.path(), &[], &BOTH, false).expect_err("a folder"));
    assert!(
        folder.starts_with(&format!("cannot read {}: ", dir.path().display())),
        "{folder}"
    );
}

/// Prediction files: an unknown id, a second prediction for a sample and missing predictions
/// fail as before, and errors keep their order (benchmark, then each file in turn).
#[test]
fn prediction_errors_are_those_of_matching_the_whole_benchmark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (records, array, _, preds) = fixture(dir.path());
    let n = records.len();
    let unknown = write(
        dir.path(),
        "unknown.jsonl",
        "{\"sample_id\": 0, \"output\": \"{}\"}\n{\"sample_id\": \"zz\", \"output\": \"{}\"}\n",
    );
    let second = write(
        dir.path(),
        "second.json",
        json!({"results": [
            {"sample_index": 1, "result": {"error": "x"}},
            {"sample_index": 1, "step_index": 0, "result": {"error": "y"}},
        ]})
        .to_string(),
    );
    let duplicate = write(
        dir.path(),
        "dup.jsonl",
        "{\"sample_id\": 0, \"output\": \"{}\"}\n{\"sample_id\": 0, \"output\": \"{}\"}\n",
    );
    let nowhere = dir.path().join("nowhere.jsonl");
    let name = |p: &Path| p.display().to_string();
    let cases: Vec<(Vec<PathBuf>, bool, String)> = vec![
        (
            vec![unknown.clone()],
            true,
            format!(
                "{}: line 2: sample_id \"zz\" is not in the benchmark",
                name(&unknown)
            ),
        ),
        (
            vec![second.clone()],
            true,
            format!(
                "{}: record 1: a second prediction for sample \"1\"",
                name(&second)
            ),
        ),
        (
            vec![duplicate.clone()],
            true,
            format!(
                "{}: line 2: field `sample_id`: duplicate sample id \"0\" (first on line 1)",
                name(&duplicate)
            ),
        ),
        (
            vec![preds.clone()],
            false,
            format!(
                "{}: 1 of {n} samples have no prediction (first: 4); pass --allow-missing to score them as wrong",
                name(&preds)
            ),
        ),
        (
            vec![second.clone(), unknown.clone()],
            true,
            format!(
                "{}: record 1: a second prediction for sample \"1\"",
                name(&second)
            ),
        ),
        // The first file's mismatch comes before the second file's reading.
        (
            vec![unknown.clone(), nowhere.clone()],
            true,
            format!(
                "{}: line 2: sample_id \"zz\" is not in the benchmark",
                name(&unknown)
            ),
        ),
        (
            vec![preds.clone(), nowhere.clone()],
            true,
            format!("cannot read {}: No such file or directory (os error 2)", name(&nowhere)),
        ),
        (
            vec![nowhere.clone(), unknown.clone()],
            true,
            format!("cannot read {}: No such file or directory (os error 2)", name(&nowhere)),
        ),
    ];
    for (files, allow_missing, expected) in cases {
        let streamed =
            message(score_files(&array, &files, &BOTH, allow_missing).expect_err(&expected));
        assert_eq!(streamed, expected);
        if !files.contains(&nowhere) {
            let whole = whole_file(&array, &files, &BOTH, allow_missing).expect_err(&expected);
            assert_eq!(streamed, whole.to_string());
        }
    }
    // A bad benchmark comes before every prediction file's error.
    let bad = write(dir.path(), "bad.json", "[{\"a\": 1},\n {\"b\": }]");
    let error = message(score_files(&bad, &[nowhere, unknown], &BOTH, true).expect_err("bad"));
    assert_eq!(
        error,
        format!("{}:2:8: expected value", bad.display()),
        "{error}"
    );
}

//! End-to-end tests of `envsim score` through the real binary.

use envsim_testkit::{to_json_array, BenchOptions, NoisySimulator, SyntheticBench};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn envsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write fixture");
    path
}

fn small_bench() -> Vec<Value> {
    SyntheticBench::records(
        5,
        1,
        &BenchOptions {
            users: 10,
            ..BenchOptions::default()
        },
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn json_report_has_the_documented_schema() {
    let dir = tempfile::tempdir().unwrap();
    let records = small_bench();
    let bench = write(dir.path(), "bench.json", to_json_array(&records).as_bytes());
    let mut sim = NoisySimulator::new(1);
    let lines: String = records
        .iter()
        .enumerate()
        .map(|(i, r)| json!({"sample_id": i, "output": sim.output(r), "usage": {"prompt_tokens": 10, "completion_tokens": 2}}).to_string() + "\n")
        .collect();
    let preds = write(dir.path(), "preds.jsonl", lines.as_bytes());
    let out_file = dir.path().join("results.jsonl");
    let out = envsim(&[
        "score",
        "--bench",
        bench.to_str().unwrap(),
        "--predictions",
        preds.to_str().unwrap(),
        "--format",
        "json",
        "--out",
        out_file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["schema"], "envsim.score.v2");
    assert_eq!(report["overall"]["n"], 15);
    assert_eq!(report["overall"]["prompt_tokens"], 150);
    let strata = report["strata"].as_object().unwrap();
    let keys: Vec<&str> = strata.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "failure",
            "no_change_args0",
            "no_change_args1",
            "simple_1",
            "simple_2",
            "medium_3",
            "medium_4",
            "medium_5",
            "medium_6",
            "difficult_7_12",
            "difficult_7",
            "difficult_8",
            "difficult_9",
            "difficult_10",
            "difficult_11",
            "difficult_12",
            "unclassified"
        ]
    );
    for key in [
        "n",
        "fm_ref",
        "cm_ref",
        "fm_strict",
        "cm_strict",
        "reference_n",
        "reference_dropped",
        "fm_ref_printed",
        "cm_ref_printed",
        "field_f1",
        "field_precision",
        "field_recall",
        "errors",
    ] {
        assert!(report["overall"].get(key).is_some(), "{key}");
    }
    assert_eq!(report["strata"]["difficult_7_12"]["n"], 6);
    assert_eq!(report["strata"]["unclassified"]["fm_ref"], Value::Null);
    let samples = report["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 15);
    let results = std::fs::read_to_string(&out_file).unwrap();
    assert_eq!(results.lines().count(), 15);
    let first: Value = serde_json::from_str(results.lines().next().unwrap()).unwrap();
    assert_eq!(first["sample_id"], "0");
    assert_eq!(first["stratum"], "failure");
}

#[test]
fn baselines_print_a_table_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let bench = write(
        dir.path(),
        "bench.json",
        to_json_array(&small_bench()).as_bytes(),
    );
    let out = envsim(&[
        "score",
        "--bench",
        bench.to_str().unwrap(),
        "--baseline",
        "null",
        "--baseline",
        "oracle",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("[overall]") && text.contains("null") && text.contains("oracle"),
        "{text}"
    );
    let md = envsim(&[
        "score",
        "--bench",
        bench.to_str().unwrap(),
        "--baseline",
        "oracle",
        "--format",
        "markdown",
    ]);
    let md = String::from_utf8(md.stdout).unwrap();
    assert!(md.starts_with("| stratum"), "{md}");
    assert!(md.contains("| [overall]"), "{md}");
}

#[test]
fn reference_crashes_are_wrong_here_and_the_reference_figure_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let records = small_bench();
    let bench = write(dir.path(), "bench.json", to_json_array(&records).as_bytes());
    // Sample 0: a correct answer (the oracle's own feedback, no change on a failure sample is
    // not guaranteed, so only FM matters); sample 1: `config_changes: null`, on which the
    // reference evaluator raises and drops the sample; the rest: nothing parseable.
    let mut lines = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let output = match i {
            0 => json!({"feedback": record["step_detail"]["observation"]["content"], "config_changes": []}).to_string(),
            1 => json!({"feedback": "x", "config_changes": null}).to_string(),
            _ => "no answer".to_owned(),
        };
        lines.push(json!({"sample_id": i.to_string(), "output": output}).to_string());
    }
    let preds = write(dir.path(), "preds.jsonl", lines.join("\n").as_bytes());
    let args = [
        "score",
        "--bench",
        bench.to_str().unwrap(),
        "--predictions",
        preds.to_str().unwrap(),
    ];
    let out = envsim(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let n = records.len();
    assert!(
        text.contains("FM-ref") && text.contains("CM-strict"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "the reference evaluator drops 1 sample it crashes on (tagged reference_crash; wrong here) and would print FM-ref {:.1}%",
            100.0 / (n - 1) as f64
        )),
        "{text}"
    );
    let out = envsim(&[args.as_slice(), &["--format", "json"]].concat());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let overall = &report["overall"];
    assert_eq!(overall["n"], n);
    assert_eq!(overall["reference_n"], n - 1);
    assert_eq!(overall["reference_dropped"], 1);
    assert_eq!(overall["errors"]["reference_crash"], 1);
    assert_eq!(overall["fm_ref"], 1.0 / n as f64);
    assert_eq!(overall["fm_ref_printed"], 1.0 / (n - 1) as f64);
    let crashed = &report["samples"][1];
    assert_eq!(crashed["reference_outcome"], "crash");
    assert_eq!(
        crashed["reference_crash"],
        "TypeError: 'NoneType' object is not iterable"
    );
    assert_eq!(crashed["fm_ref"], false);
}

#[test]
fn jsonl_benchmark_and_trajectory_records() {
    let dir = tempfile::tempdir().unwrap();
    let records = small_bench();
    let step = |i: usize| records[i]["step_detail"].clone();
    let trajectory = json!({"trajectory": [step(0), step(3)], "env_code": ""});
    let text = format!("{}\n\n{}\n", records[1], trajectory);
    let bench = write(dir.path(), "bench.jsonl", text.as_bytes());
    let preds = write(
        dir.path(),
        "p.jsonl",
        b"{\"sample_id\": \"0\", \"prediction\": {\"feedback\": \"\", \"config_changes\": []}}\n{\"sample_id\": \"1:1\", \"error\": \"HTTP 429\"}\n",
    );
    let out = envsim(&[
        "score",
        "--bench",
        bench.to_str().unwrap(),
        "--predictions",
        preds.to_str().unwrap(),
        "--allow-missing",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = report["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sample_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["0", "1:0", "1:1"]);
    assert_eq!(report["overall"]["errors"]["api_error"], 1);
    assert_eq!(report["overall"]["errors"]["missing_prediction"], 1);
}

#[test]
fn reference_result_files_are_rescored() {
    let dir = tempfile::tempdir().unwrap();
    let records = small_bench();
    let bench = write(
        dir.path(),
        "bench.json",
        to_json_array(&records[..2]).as_bytes(),
    );
    let results = json!({"model": "m", "results": [
        {"sample_index": 0, "step_index": 0, "change_count": 0, "result": {"feedback_pred_raw": records[0]["step_detail"]["observation"]["content"], "changes_pred": []}},
        {"sample_index": 1, "step_index": 0, "change_count": 0, "result": {"error": "failed_parse", "raw": "{\"feedback\": \"x\", \"config_changes\": []"}},
    ], "summary": {}});
    let preds = write(dir.path(), "results.json", results.to_string().as_bytes());
    let out = envsim(&[
        "score",
        "--bench",
        bench.to_str().unwrap(),
        "--predictions",
        preds.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["samples"][0]["fm_ref"], true);
    assert_eq!(report["samples"][0]["reference_outcome"], "scored");
    assert_eq!(report["samples"][0]["cm_strict"], true);
    assert_eq!(report["samples"][1]["parse_failure"]["code"], "truncated");
    assert_eq!(report["samples"][1]["reference_outcome"], "failed_parse");
    assert_eq!(report["overall"]["reference_n"], 2);
}

/// Bad input: a located message, a non-zero exit, and no output file.
#[test]
fn bad_inputs_fail_cleanly_with_locations() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(
        dir.path(),
        "good.json",
        to_json_array(&small_bench()).as_bytes(),
    );
    let deep = format!("[{}{}]", "[".repeat(200), "]".repeat(200));
    let mut missing_field = small_bench();
    missing_field[2]["step_detail"]
        .as_object_mut()
        .unwrap()
        .remove("config_after");
    let mut wrong_type = small_bench();
    wrong_type[4]["step_detail"]["action"]["arguments"] = json!(7);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "syntax.json",
            b"[{\"a\": 1},\n {\"b\": }]".to_vec(),
            "syntax.json:2:",
        ),
        ("empty.json", b"  \n".to_vec(), "the file is empty"),
        ("deep.json", deep.into_bytes(), "recursion limit"),
        (
            "utf8.jsonl",
            b"{\"x\": \"\xff\xfe\"}\n".to_vec(),
            "utf8.jsonl:1:",
        ),
        (
            "missing.json",
            to_json_array(&missing_field).into_bytes(),
            "record 2: field `step_detail.config_after`: missing",
        ),
        (
            "types.json",
            to_json_array(&wrong_type).into_bytes(),
            "record 4: field `step_detail.action.arguments`: expected an object",
        ),
        (
            "scalar.jsonl",
            b"{\"step_detail\": {}}\n3\n".to_vec(),
            "line 1: field `step_detail.action`: missing",
        ),
    ];
    for (name, bytes, expected) in cases {
        let bench = write(dir.path(), name, &bytes);
        let out_file = dir.path().join(format!("{name}.out"));
        let out = envsim(&[
            "score",
            "--bench",
            bench.to_str().unwrap(),
            "--baseline",
            "null",
            "--out",
            out_file.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = stderr(&out);
        assert!(err.contains(expected), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        assert!(out.stdout.is_empty(), "{name}");
        assert!(!out_file.exists(), "{name}: nothing half-written");
    }
    // Prediction files.
    let pcases: Vec<(&str, &[u8], &str)> = vec![
        (
            "dup.jsonl",
            b"{\"sample_id\": 0, \"output\": \"{}\"}\n{\"sample_id\": 0, \"output\": \"{}\"}\n",
            "line 2: field `sample_id`: duplicate",
        ),
        (
            "unknown.jsonl",
            b"{\"sample_id\": \"zz\", \"output\": \"{}\"}\n",
            "line 1: sample_id \"zz\" is not in the benchmark",
        ),
        (
            "noid.jsonl",
            b"{\"output\": \"{}\"}\n",
            "line 1: field `sample_id`: missing",
        ),
        (
            "both.jsonl",
            b"{\"sample_id\": 0, \"output\": \"{}\", \"error\": \"x\"}\n",
            "only one of",
        ),
        (
            "short.jsonl",
            b"{\"sample_id\": 0, \"output\": \"{}\"}\n",
            "14 of 15 samples have no prediction",
        ),
        (
            "outnum.jsonl",
            b"{\"sample_id\": 0, \"output\": 5}\n",
            "field `output`: expected the raw model text",
        ),
    ];
    for (name, bytes, expected) in pcases {
        let preds = write(dir.path(), name, bytes);
        let out = envsim(&[
            "score",
            "--bench",
            good.to_str().unwrap(),
            "--predictions",
            preds.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = stderr(&out);
        assert!(err.contains(expected), "{name}: {err}");
    }
    let out = envsim(&["score", "--bench", good.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("nothing to score"));
    let out = envsim(&[
        "score",
        "--bench",
        "/nonexistent/b.json",
        "--baseline",
        "null",
    ]);
    assert!(stderr(&out).contains("cannot read /nonexistent/b.json"));
    let out = envsim(&[
        "score",
        "--bench",
        good.to_str().unwrap(),
        "--baseline",
        "bogus",
    ]);
    assert_eq!(out.status.code(), Some(2), "usage errors exit with 2");
}

/// A reader that goes away (`envsim ... | head`) ends the process quietly, never with a panic.
#[test]
fn closed_stdout_is_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let bench = write(
        dir.path(),
        "bench.json",
        to_json_array(&small_bench()).as_bytes(),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args([
            "score",
            "--bench",
            bench.to_str().unwrap(),
            "--baseline",
            "null",
            "--baseline",
            "oracle",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

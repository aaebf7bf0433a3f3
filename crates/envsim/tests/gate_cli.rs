//! `envsim env gate` and `envsim env gate-curve` end to end on the desk package, with the
//! faulty test double as the gate's simulator (no model here can read a description well
//! enough to judge code).

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn envsim(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_envsim"))
        .arg("env")
        .arg("--envs")
        .arg(root)
        .args(args)
        .output()
        .expect("runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_perfect_reader_accepts_and_a_broken_simulator_rejects_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    envsim_testkit::desk::write(dir.path()).unwrap();
    let out = envsim(
        dir.path(),
        &[
            "gate",
            "desk",
            "--backend",
            "faulty",
            "--fault-rate",
            "0",
            "--walks",
            "2",
            "--steps",
            "8",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with(
            "desk: accepted — 16/16 calls agree (1.000; threshold 0.85), simulator faulty"
        ),
        "{}",
        text(&out.stdout)
    );

    let out = envsim(
        dir.path(),
        &[
            "gate",
            "desk",
            "--backend",
            "faulty",
            "--fault-rate",
            "1",
            "--anchor",
            "off",
            "--walks",
            "2",
            "--steps",
            "8",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let reports: Value = serde_json::from_slice(&out.stdout).expect("JSON reports");
    assert_eq!(reports[0]["package"], "desk");
    assert_eq!(reports[0]["accepted"], false);
    assert_eq!(reports[0]["calls"], 16);
    assert!(reports[0]["score"].as_f64().unwrap() < 0.85);
    assert!(
        text(&out.stderr).contains("1 of 1 packages rejected (agreement below 0.85): desk"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_gate_refuses_what_cannot_judge() {
    let dir = tempfile::tempdir().unwrap();
    envsim_testkit::desk::write(dir.path()).unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["gate", "desk", "--backend", "executor"],
            "--backend executor runs the code the gate judges",
        ),
        (
            &["gate", "desk", "--backend", "faulty", "--threshold", "1.5"],
            "--threshold must be between 0 and 1, got 1.5",
        ),
        (
            &["gate", "desk", "--backend", "faulty", "--walks", "0"],
            "--walks, --steps and --workers must be at least 1",
        ),
        (&["gate", "nope", "--backend", "faulty"], "nope"),
        (
            &[
                "gate",
                "desk",
                "--backend",
                "faulty",
                "--rule",
                "calibrated",
            ],
            "--rule calibrated needs --simulator-error",
        ),
    ];
    for (args, message) in cases {
        let out = envsim(dir.path(), args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            text(&out.stderr).contains(message),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let out = envsim(
        dir.path(),
        &["gate-curve", "--env", "desk", "--rates", "0,2"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--rates must be shares between 0 and 1"));
}

#[test]
fn the_curve_reports_both_rules_per_rate() {
    let dir = tempfile::tempdir().unwrap();
    envsim_testkit::desk::write(dir.path()).unwrap();
    let out = envsim(
        dir.path(),
        &[
            "gate-curve",
            "--env",
            "desk",
            "--rates",
            "0,1",
            "--anchor",
            "off",
            "--walks",
            "2",
            "--steps",
            "8",
            "--mutants",
            "3",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let curve: Value = serde_json::from_slice(&out.stdout).expect("JSON curve");
    assert_eq!(curve["packages"], serde_json::json!(["desk"]));
    let points = curve["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for point in points {
        let rules: Vec<&Value> = point["rules"].as_array().unwrap().iter().collect();
        assert_eq!(rules[0]["rule"], "overall");
        assert_eq!(rules[1]["rule"]["every_tool"]["min_calls"], 4);
        assert_eq!(rules[2]["rule"]["calibrated"]["min_calls"], 4);
    }
    // A perfect reader accepts the good package; a reader that always errs accepts nothing.
    assert_eq!(points[0]["rules"][0]["good"]["accepted"], 1);
    assert_eq!(points[0]["rules"][0]["good"]["mean_score"], 1.0);
    assert_eq!(points[1]["rules"][0]["good"]["accepted"], 0);
    assert_eq!(points[1]["rules"][0]["exposed"]["accepted"], 0);
    // Calibrated to each rate: 0 at the first point, 1 at the second.
    assert_eq!(
        points[0]["rules"][2]["rule"]["calibrated"]["error_rate"],
        0.0
    );
    assert_eq!(
        points[1]["rules"][2]["rule"]["calibrated"]["error_rate"],
        1.0
    );
    assert_eq!(curve["rules"].as_array().unwrap().len(), 3);
}

/// `env synth` against a writer behind an OpenAI-compatible double that answers with the tally
/// package; the gate is the faulty double reading each draft (rate 0).
#[test]
fn env_synth_writes_the_accepted_package_and_refuses_bad_requests() {
    use envsim_testkit::openai_double::{DoubleConfig, OpenAiDouble};
    let writer = OpenAiDouble::spawn(DoubleConfig {
        default_answer: Some(envsim_testkit::tally::answer(
            envsim_testkit::tally::CODE,
            Some(envsim_testkit::tally::TESTS),
        )),
        ..DoubleConfig::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let manifest: Value = serde_json::from_str(envsim_testkit::tally::MANIFEST).unwrap();
    let tools = dir.path().join("tools.json");
    std::fs::write(&tools, manifest["tools"].to_string()).unwrap();
    let out_dir = dir.path().join("written");
    let base = writer.base_url();
    let synth = |extra: &[&str]| {
        let mut args = vec![
            "synth",
            "--name",
            "tally",
            "--writer-model",
            "writer-m",
            "--writer-base-url",
            &base,
            "--backend",
            "faulty",
            "--fault-rate",
            "0",
            "--walks",
            "1",
            "--steps",
            "8",
            "--out",
            out_dir.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        envsim(dir.path(), &args)
    };
    let out = synth(&["--tools", tools.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("round 1: 0 findings, gate 1.000"),
        "{}",
        text(&out.stdout)
    );
    let written = out_dir.join("tally");
    for file in [
        "env.py",
        "manifest.json",
        "tests.json",
        "tasks.jsonl",
        "states/02_large.json",
    ] {
        assert!(written.join(file).is_file(), "{file}");
    }
    // The writer was asked to implement the tools as given.
    let body = &writer.bodies()[0];
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.starts_with("Write an environment that implements exactly these tools"),
        "{user}"
    );
    assert!(user.contains("add_to_counter"));
    // The package written is one the corpus tools read.
    let listed = envsim(&out_dir, &["check", "tally", "--require-tasks"]);
    assert!(listed.status.success(), "{}", text(&listed.stdout));

    // Again: the package is there.
    let again = synth(&["--description", "Counters."]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("exists (--force replaces it)"),
        "{}",
        text(&again.stderr)
    );
    // Nothing to write from; a name that is not one.
    let none = synth(&["--force"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(text(&none.stderr)
        .contains("say what to write: --description TEXT, --openapi FILE or --tools FILE"));
    let bad = envsim(
        dir.path(),
        &[
            "synth",
            "--name",
            "Bad Name",
            "--description",
            "x",
            "--writer-model",
            "m",
            "--writer-base-url",
            &base,
            "--backend",
            "faulty",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains("\"Bad Name\" is not a package name"),
        "{}",
        text(&bad.stderr)
    );
}

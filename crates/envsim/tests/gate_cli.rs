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
    assert!(text(&none.stderr).contains(
        "say what to write: --description TEXT, --openapi FILE, --tools FILE or --batch FILE"
    ));
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

/// The tally package's tools as an OpenAPI document.
const TALLY_API: &str = r#"{"openapi": "3.0.0", "info": {"title": "Counters", "version": "1"},
  "paths": {
    "/counters/{counter_id}": {"get": {"operationId": "get_counter", "summary": "Read a counter"}},
    "/counters/{counter_id}/add": {"post": {"operationId": "add_to_counter", "summary": "Add 1 to 5, within the limit"}},
    "/counters/{counter_id}/reset": {"post": {"operationId": "reset_counter", "summary": "Back to 0"}}}}"#;

fn tally_writer() -> envsim_testkit::openai_double::OpenAiDouble {
    use envsim_testkit::openai_double::{DoubleConfig, OpenAiDouble};
    OpenAiDouble::spawn(DoubleConfig {
        default_answer: Some(envsim_testkit::tally::answer(
            envsim_testkit::tally::CODE,
            Some(envsim_testkit::tally::TESTS),
        )),
        ..DoubleConfig::default()
    })
    .unwrap()
}

/// `env synth --openapi`: the writer is asked to implement the document's operations.
#[test]
fn env_synth_writes_from_an_openapi_document() {
    let writer = tally_writer();
    let dir = tempfile::tempdir().unwrap();
    let api = dir.path().join("api.json");
    std::fs::write(&api, TALLY_API).unwrap();
    let out_dir = dir.path().join("written");
    let base = writer.base_url();
    let out = envsim(
        dir.path(),
        &[
            "synth",
            "--name",
            "counters",
            "--openapi",
            api.to_str().unwrap(),
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
            "--price-input",
            "1",
            "--price-output",
            "2",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let user = writer.bodies()[0]["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        user.starts_with(
            "Write an environment that implements this OpenAPI document, one tool per operation"
        ),
        "{user}"
    );
    assert!(
        user.contains("\"operationId\": \"reset_counter\""),
        "{user}"
    );
    assert!(user.contains("Package name: counters"));
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("counters/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["name"], "counters");
    // The cost of the writer's tokens at the prices given (the double counts its tokens).
    let stdout = text(&out.stdout);
    assert!(stdout.contains("; cost $0.0"), "{stdout}");
    // An OpenAPI file that is not JSON is refused with its place.
    std::fs::write(&api, "{\n  \"openapi\": 3,,\n}").unwrap();
    let bad = envsim(
        dir.path(),
        &[
            "synth",
            "--name",
            "c2",
            "--openapi",
            api.to_str().unwrap(),
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
        text(&bad.stderr).contains("api.json: line 2, column"),
        "{}",
        text(&bad.stderr)
    );
}

/// `env synth --batch`: a dry run, a batch written two at a time with one request skipped as a
/// duplicate of an earlier one, the cost per accepted package, and a rerun that asks nobody.
#[test]
fn env_synth_batch_writes_skips_and_resumes() {
    let writer = tally_writer();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("api.json"), TALLY_API).unwrap();
    let batch = dir.path().join("batch.txt");
    std::fs::write(
        &batch,
        "# two requests, and a third that asks for the first again\n\
         {\"name\": \"counters\", \"description\": \"Named counters that grow up to a limit.\"}\n\
         {\"name\": \"tallies\", \"openapi\": \"api.json\"}\n\
         Named counters that grow up to a limit, and reset.\n",
    )
    .unwrap();
    let out_dir = dir.path().join("written");
    let store = dir.path().join("store.sqlite");
    let base = writer.base_url();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "synth",
            "--batch",
            batch.to_str().unwrap(),
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
            "--store",
            store.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        envsim(dir.path(), &args)
    };
    let dry = run(&["--dry-run"]);
    assert!(dry.status.success(), "{}", text(&dry.stderr));
    let shown = text(&dry.stdout);
    let lines: Vec<&str> = shown.lines().collect();
    assert!(
        lines[0].starts_with("counters") && lines[0].contains(" write "),
        "{shown}"
    );
    assert!(
        lines[1].starts_with("tallies") && lines[1].contains(" write "),
        "{shown}"
    );
    assert!(
        lines[2].starts_with("named_counter_grow")
            && lines[2].contains(" duplicate  nearest counters ("),
        "{shown}"
    );
    assert_eq!(lines[3], "2 of 3 requests would be written");
    assert!(writer.bodies().is_empty(), "a dry run asks no writer");

    let out = run(&["--jobs", "2", "--price-input", "1", "--price-output", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    // The two written requests got the same package: one is kept, the other is its duplicate.
    assert!(
        table.contains("3 requests: 1 accepted, 0 refused, 2 duplicates, 0 existing, 0 failed (0 from the store)"),
        "{table}"
    );
    assert!(table.contains("per accepted package"), "{table}");
    assert_eq!(writer.bodies().len(), 2);
    let kept: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept[0] == "counters" || kept[0] == "tallies");

    // The rerun reads both from the store and asks nobody.
    let again = run(&["--json"]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(writer.bodies().len(), 2);
    let report: Value = serde_json::from_str(&text(&again.stdout)).unwrap();
    assert_eq!(report["report"]["from_store"], 2);
    assert_eq!(report["report"]["resumed"], true);
    assert!(report["report"]["entries"][0].get("files").is_none());
    assert!(
        report["writer_usage"]["completion_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );

    // A bad batch file is refused with its line, before anything runs.
    std::fs::write(&batch, "{\"name\": \"x\", \"tools\": []}\n").unwrap();
    let bad = run(&[]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr)
            .contains("batch.txt, line 1: \"tools\" must be a non-empty array of tool schemas"),
        "{}",
        text(&bad.stderr)
    );
    // Batch options need --batch.
    let lone = envsim(
        dir.path(),
        &["synth", "--name", "x", "--jobs", "3", "--out", "o"],
    );
    assert_eq!(lone.status.code(), Some(1));
    assert!(
        text(&lone.stderr).contains("--jobs is an option of batches: it needs --batch FILE"),
        "{}",
        text(&lone.stderr)
    );
}

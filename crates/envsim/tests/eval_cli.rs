//! End-to-end tests of `envsim eval`, `report`, `runs`, `compare` and `batch` through the real
//! binary, against the loopback OpenAI-compatible test double.

use envsim_core::formats::parse_benchmark;
use envsim_core::prelude::*;
use envsim_core::prompt::Template;
use envsim_testkit::openai_double::{DoubleConfig, OpenAiDouble};
use envsim_testkit::{to_json_array, BenchOptions, SyntheticBench};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn envsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(args)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ENVSIM_STORE")
        .output()
        .expect("the binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "stderr: {}\nstdout: {}",
        stderr(out),
        stdout(out)
    );
    stdout(out)
}

fn json_of(out: &Output) -> Value {
    serde_json::from_str(&ok(out)).expect("JSON output")
}

struct Fixture {
    _dir: tempfile::TempDir,
    bench: PathBuf,
    store: PathBuf,
    transitions: Vec<Transition>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let records = SyntheticBench::records(
            7,
            1,
            &BenchOptions {
                users: 12,
                ..BenchOptions::default()
            },
        );
        let text = to_json_array(&records);
        let bench = dir.path().join("bench.json");
        std::fs::write(&bench, &text).unwrap();
        let transitions = parse_benchmark(text.as_bytes(), "bench").unwrap();
        Fixture {
            store: dir.path().join("runs.sqlite"),
            bench,
            transitions,
            _dir: dir,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self._dir.path().join(name)
    }

    /// (prompt key, oracle answer) per transition.
    fn oracle_answers(&self) -> Vec<(String, String)> {
        self.transitions
            .iter()
            .map(|t| {
                let key = Template::Envsim
                    .render_eval(&t.env_code, &t.config_before, &t.action)
                    .user;
                let Prediction::Parsed(answer) = Baseline::Oracle.predict(t) else {
                    unreachable!()
                };
                (key, answer.to_string())
            })
            .collect()
    }

    /// A double whose first `failing` samples get one server error each before their answer.
    fn double_failing_first(&self, failing: usize) -> OpenAiDouble {
        let answers = self.oracle_answers();
        let faults = answers
            .iter()
            .take(failing)
            .map(|(key, _)| {
                (
                    key.clone(),
                    vec![envsim_testkit::openai_double::Fault::ServerError],
                )
            })
            .collect();
        OpenAiDouble::spawn(DoubleConfig {
            answers: answers.into_iter().collect(),
            faults,
            ..DoubleConfig::default()
        })
        .unwrap()
    }

    fn double(&self, latency: Duration) -> OpenAiDouble {
        OpenAiDouble::spawn(DoubleConfig {
            latency,
            answers: self.oracle_answers().into_iter().collect(),
            ..DoubleConfig::default()
        })
        .unwrap()
    }

    fn eval_args<'a>(&'a self, url: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![
            "eval",
            "--bench",
            self.bench.to_str().unwrap(),
            "--store",
            self.store.to_str().unwrap(),
            "--backend",
            "openai",
            "--base-url",
            url,
            "--model",
            "sim-model",
            "--no-progress",
        ];
        args.extend_from_slice(extra);
        args
    }

    fn report(&self, run: &str) -> Value {
        json_of(&envsim(&[
            "report",
            run,
            "--store",
            self.store.to_str().unwrap(),
            "--format",
            "json",
        ]))
    }
}

#[test]
fn default_eval_runs_the_bundled_benchmark_with_the_null_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("s.sqlite");
    let chart = dir.path().join("cliff.svg");
    let out = envsim(&[
        "eval",
        "--store",
        store.to_str().unwrap(),
        "--format",
        "json",
        "--chart",
        chart.to_str().unwrap(),
    ]);
    let report = json_of(&out);
    assert_eq!(report["schema"], "envsim.score.v2");
    assert_eq!(report["system"], "oracle");
    assert_eq!(report["overall"]["n"], 400);
    assert_eq!(report["overall"]["cm_strict"], 1.0);
    assert_eq!(report["null_baseline"]["overall"]["cm_strict"], 0.25);
    assert_eq!(report["run"]["complete"], true);
    assert_eq!(report["run"]["bench_path"], "<bundled benchmark>");
    assert_eq!(
        report["intervals"]["rows"]["overall"]["cm_strict"],
        json!({"lo": 1.0, "hi": 1.0})
    );
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("null baseline"),
        "{}",
        &svg[..200]
    );
}

#[test]
fn oracle_through_http_scores_100_and_is_listed_reported_and_charted() {
    let f = Fixture::new();
    let server = f.double(Duration::ZERO);
    let url = server.base_url();
    let report = json_of(&envsim(&f.eval_args(
        &url,
        &[
            "--format",
            "json",
            "--price-input",
            "0.5",
            "--price-output",
            "1.5",
        ],
    )));
    assert_eq!(report["overall"]["n"], f.transitions.len());
    assert_eq!(report["overall"]["cm_strict"], 1.0);
    assert_eq!(report["overall"]["fm_strict"], 1.0);
    assert_eq!(report["run"]["requests"]["attempts"], f.transitions.len());
    assert_eq!(server.requests(), f.transitions.len());
    let run_id = report["run"]["id"].as_str().unwrap().to_owned();
    let prompt = report["overall"]["prompt_tokens"].as_f64().unwrap();
    let completion = report["overall"]["completion_tokens"].as_f64().unwrap();
    let total = report["run"]["cost"]["total_usd"].as_f64().unwrap();
    assert!((total - (prompt * 0.5 + completion * 1.5) / 1e6).abs() < 1e-12);
    assert!(
        report["run"]["latency"]["request"]["p50_ms"]
            .as_f64()
            .unwrap()
            >= 0.0
    );

    // The stored run reads back identically by id prefix and as `latest`.
    let again = f.report(&run_id[..6]);
    assert_eq!(again["overall"], report["overall"]);
    assert_eq!(f.report("latest")["run"]["id"], run_id.as_str());
    let table = ok(&envsim(&[
        "report",
        &run_id,
        "--store",
        f.store.to_str().unwrap(),
    ]));
    assert!(
        table.contains("[overall]")
            && table.contains("95% CI")
            && table.contains("per correct transition"),
        "{table}"
    );
    let runs = ok(&envsim(&["runs", "--store", f.store.to_str().unwrap()]));
    assert!(
        runs.contains(&run_id) && runs.contains("openai:sim-model"),
        "{runs}"
    );
    let chart = f.path("c.svg");
    ok(&envsim(&[
        "report",
        &run_id,
        "--store",
        f.store.to_str().unwrap(),
        "--chart",
        chart.to_str().unwrap(),
    ]));
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.contains("sim-model") && svg.contains("CM-strict (%)"));
    ok(&envsim(&[
        "report",
        &run_id,
        "--store",
        f.store.to_str().unwrap(),
        "--chart",
        chart.to_str().unwrap(),
        "--chart-metric",
        "cm-ref",
    ]));
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(
        svg.contains("Config match (CM-ref)") && svg.contains("CM-ref (%)"),
        "{}",
        &svg[..400.min(svg.len())]
    );
}

fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn finished(f: &Fixture) -> u64 {
    f.report("latest")["run"]["finished"].as_u64().unwrap()
}

fn interrupt_then_resume(signal: i32) {
    let f = Fixture::new();
    // The double answers six requests and holds the rest, so the run is stopped at a fixed
    // point however slow the machine is; it answers again for the rerun.
    let server = f.double(Duration::ZERO);
    server.set_hold_after(Some(6));
    let url = server.base_url();
    let args = f.eval_args(
        &url,
        &["--concurrency", "2", "--limit", "12", "--format", "json"],
    );
    let child = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("six answered requests and two held", || {
        server.requests() >= 8 && f.store.exists() && finished(&f) >= 2
    });
    // SAFETY: sending a signal to our own child process.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let out = child.wait_with_output().unwrap();
    let partial = f.report("latest");
    let done = partial["run"]["finished"].as_u64().unwrap();
    assert!((2..=6).contains(&done), "{done} finished before the stop");
    assert_eq!(partial["run"]["complete"], false);
    assert_eq!(
        partial["overall"]["n"], 12,
        "unfinished samples stay in the denominator"
    );
    assert_eq!(
        partial["overall"]["errors"]["missing_prediction"],
        12 - done
    );
    if signal == libc::SIGINT {
        assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("rerun the same command to resume"),
            "{}",
            stderr(&out)
        );
    } else {
        assert_eq!(out.status.code(), None, "killed by the signal");
    }
    server.set_hold_after(None);
    let before = server.requests();
    let resumed = envsim(&args);
    let report = json_of(&resumed);
    assert_eq!(report["run"]["complete"], true);
    assert_eq!(report["overall"]["cm_strict"], 1.0);
    assert_eq!(report["run"]["id"], partial["run"]["id"]);
    // Only what was not committed is asked again (in-flight requests at the stop are lost).
    let asked_again = server.requests() - before;
    assert!(
        asked_again <= 12 - done as usize,
        "asked {asked_again} again, {done} were done"
    );
    assert!(asked_again >= 1);
}

#[test]
fn kill_9_loses_only_in_flight_requests_and_rerun_resumes() {
    interrupt_then_resume(libc::SIGKILL);
}

#[test]
fn ctrl_c_stops_cleanly_and_rerun_resumes() {
    interrupt_then_resume(libc::SIGINT);
}

#[test]
fn compare_reports_paired_statistics_and_disagreements() {
    let f = Fixture::new();
    let store = f.store.to_str().unwrap();
    let bench = f.bench.to_str().unwrap();
    let run = |backend: &str| {
        json_of(&envsim(&[
            "eval",
            "--bench",
            bench,
            "--store",
            store,
            "--backend",
            backend,
            "--format",
            "json",
            "--no-progress",
        ]))["run"]["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (oracle, null) = (run("oracle"), run("null"));
    assert_ne!(oracle, null);
    let changing = f
        .transitions
        .iter()
        .filter(|t| t.config_before != t.config_after)
        .count();
    let n = f.transitions.len();
    let cmp = json_of(&envsim(&[
        "compare", &oracle, &null, "--store", store, "--format", "json",
    ]));
    assert_eq!(cmp["schema"], "envsim.compare.v1");
    let overall = &cmp["rows"][0];
    assert_eq!(overall["key"], "overall");
    assert_eq!(
        overall["cm_strict"],
        json!([1.0, (n - changing) as f64 / n as f64])
    );
    assert_eq!(overall["mcnemar"][0]["only_a"], changing);
    assert_eq!(overall["mcnemar"][0]["only_b"], 0);
    assert!(overall["mcnemar"][0]["p_value"].as_f64().unwrap() < 0.001);
    let diff = overall["paired"][0]["diff"].as_f64().unwrap();
    assert!((diff + changing as f64 / n as f64).abs() < 1e-12);
    assert_eq!(cmp["disagreements"].as_array().unwrap().len(), changing);
    let table = ok(&envsim(&[
        "compare", &oracle, &null, "--store", store, "--show", "3",
    ]));
    assert!(
        table.contains("p McNemar B")
            && table.contains(&format!("{changing} samples where the runs disagree")),
        "{table}"
    );
    // Different benchmarks cannot be paired.
    let other = f.path("other.json");
    let records = SyntheticBench::records(
        99,
        1,
        &BenchOptions {
            users: 12,
            ..BenchOptions::default()
        },
    );
    std::fs::write(&other, to_json_array(&records)).unwrap();
    let third = json_of(&envsim(&[
        "eval",
        "--bench",
        other.to_str().unwrap(),
        "--store",
        store,
        "--backend",
        "null",
        "--format",
        "json",
        "--no-progress",
    ]))["run"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let err = envsim(&["compare", &oracle, &third, "--store", store]);
    assert!(!err.status.success());
    assert!(
        stderr(&err).contains("different benchmarks"),
        "{}",
        stderr(&err)
    );
}

#[test]
fn batch_export_then_import_scores_like_the_runner() {
    let f = Fixture::new();
    let requests = f.path("requests.jsonl");
    ok(&envsim(&[
        "batch",
        "export",
        "--bench",
        f.bench.to_str().unwrap(),
        "--model",
        "m",
        "--out",
        requests.to_str().unwrap(),
    ]));
    let text = std::fs::read_to_string(&requests).unwrap();
    assert_eq!(text.lines().count(), f.transitions.len());
    // The batch service's answers: the oracle for all but the last sample, which failed.
    let answers: std::collections::HashMap<String, String> =
        f.oracle_answers().into_iter().collect();
    let mut output = String::new();
    for (i, line) in text.lines().enumerate() {
        let request: Value = serde_json::from_str(line).unwrap();
        let id = request["custom_id"].as_str().unwrap();
        let user = request["body"]["messages"][1]["content"].as_str().unwrap();
        let line = if i + 1 == f.transitions.len() {
            json!({"custom_id": id, "response": null, "error": {"code": "batch_expired", "message": "expired"}})
        } else {
            json!({"custom_id": id, "response": {"status_code": 200, "body": {"choices": [{"message": {"role": "assistant", "content": answers[user]}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 100, "completion_tokens": 10}}}, "error": null})
        };
        output.push_str(&(line.to_string() + "\n"));
    }
    let out_file = f.path("output.jsonl");
    std::fs::write(&out_file, output).unwrap();
    let report = json_of(&envsim(&[
        "batch",
        "import",
        "--bench",
        f.bench.to_str().unwrap(),
        "--requests",
        requests.to_str().unwrap(),
        "--output",
        out_file.to_str().unwrap(),
        "--store",
        f.store.to_str().unwrap(),
        "--format",
        "json",
    ]));
    let n = f.transitions.len();
    assert_eq!(report["system"], "batch:m");
    assert_eq!(report["overall"]["n"], n);
    assert_eq!(report["overall"]["errors"]["api_error"], 1);
    assert_eq!(report["overall"]["prompt_tokens"], 100 * (n - 1));
    let last_changes = f.transitions[n - 1].config_before != f.transitions[n - 1].config_after;
    let expected = if last_changes {
        (n - 1) as f64 / n as f64
    } else {
        1.0
    };
    assert_eq!(report["overall"]["cm_strict"], expected);
    // A custom_id the request file does not know is an error naming the line.
    std::fs::write(
        &out_file,
        "{\"custom_id\": \"nope\", \"error\": {\"message\": \"x\"}}\n",
    )
    .unwrap();
    let err = envsim(&[
        "batch",
        "import",
        "--bench",
        f.bench.to_str().unwrap(),
        "--requests",
        requests.to_str().unwrap(),
        "--output",
        out_file.to_str().unwrap(),
        "--store",
        f.store.to_str().unwrap(),
    ]);
    assert!(!err.status.success());
    assert!(
        stderr(&err).contains("output.jsonl:1: custom_id \"nope\" is not in the request file"),
        "{}",
        stderr(&err)
    );
}

#[test]
fn bad_invocations_get_clear_errors() {
    let f = Fixture::new();
    let bench = f.bench.to_str().unwrap();
    let store = f.store.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "eval",
                "--bench",
                bench,
                "--store",
                store,
                "--backend",
                "openai",
                "--base-url",
                "http://127.0.0.1:9/v1",
            ],
            "--backend openai needs --model",
        ),
        (
            vec![
                "eval",
                "--bench",
                bench,
                "--store",
                store,
                "--backend",
                "openai",
                "--model",
                "m",
            ],
            "needs --base-url URL",
        ),
        (
            vec![
                "eval",
                "--bench",
                bench,
                "--store",
                store,
                "--backend",
                "openai",
                "--model",
                "m",
                "--base-url",
                "localhost:8000",
            ],
            "must start with http://",
        ),
        (
            vec![
                "eval",
                "--bench",
                bench,
                "--store",
                store,
                "--backend",
                "replay",
            ],
            "needs --predictions FILE",
        ),
        (
            vec![
                "eval",
                "--bench",
                bench,
                "--store",
                store,
                "--extra-body",
                "[1]",
            ],
            "--extra-body must be a JSON object",
        ),
        (
            vec![
                "eval",
                "--bench",
                bench,
                "--store",
                store,
                "--per-stratum",
                "0",
            ],
            "at least 1",
        ),
        (
            vec!["eval", "--bench", "/nonexistent/b.json", "--store", store],
            "cannot read /nonexistent/b.json",
        ),
        (
            vec![
                "eval",
                "--bench",
                bench,
                "--store",
                store,
                "--price-input",
                "1",
            ],
            "give both --price-input and --price-output",
        ),
        (
            vec!["report", "abcdef", "--store", store],
            "no run store at",
        ),
        (vec!["runs", "--store", store], "no run store at"),
        (
            vec!["compare", "a", "b", "--store", store],
            "no run store at",
        ),
    ];
    for (args, expected) in cases {
        let out = envsim(&args);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // Read-only commands never create a store.
    assert!(!f.store.exists(), "report/runs/compare created {store}");

    // An unreachable server: the run stops at once, says why and what to check, and exits 1.
    let out = envsim(&[
        "eval",
        "--bench",
        bench,
        "--store",
        store,
        "--backend",
        "openai",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--no-progress",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("stopped: the first 4 requests all failed, none succeeded: connection refused at http://127.0.0.1:9/v1/chat/completions"),
        "{err}"
    );
    assert!(
        err.contains("check that the server is running and listening there, and that --base-url (http://127.0.0.1:9/v1) is right"),
        "{err}"
    );
    assert!(
        stdout(&out).is_empty(),
        "no score table for a run that never started"
    );
    // The run is stored, with nothing finished; report reads it back.
    let report = f.report("latest");
    assert_eq!(report["run"]["finished"], 0);
    assert_eq!(report["run"]["complete"], false);
    for (args, expected) in [
        (
            vec!["report", "abcdef", "--store", store],
            "no run \"abcdef\"",
        ),
        (vec!["report", "ab", "--store", store], "too short"),
    ] {
        let out = envsim(&args);
        assert!(
            !out.status.success() && stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn failed_samples_exit_3_and_a_rerun_retries_exactly_them() {
    let f = Fixture::new();
    let n = f.transitions.len();
    // Two samples get server errors on their first request only.
    let server = f.double_failing_first(2);
    let url = server.base_url();
    let out = envsim(&f.eval_args(&url, &["--retries", "0"]));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "2 of {n} samples failed after their retries (2 × HTTP 500); first: HTTP 500: openai-double: the server had an error"
        )),
        "{err}"
    );
    assert!(
        err.contains("rerun the same command to retry exactly these samples"),
        "{err}"
    );
    // The table is still printed, with the failures counted as wrong and the run incomplete.
    let table = stdout(&out);
    assert!(
        table.contains("[overall]") && table.contains("2 samples failed after their retries"),
        "{table}"
    );
    assert_eq!(server.requests(), n);
    let report = f.report("latest");
    assert_eq!(report["run"]["failed"], 2);
    assert_eq!(report["run"]["errors"][0]["cause"], "HTTP 500");
    assert_eq!(report["run"]["complete"], false);

    // The same command again: exactly the two failed samples are asked, and the run completes.
    let out = envsim(&f.eval_args(&url, &["--retries", "0"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(server.requests(), n + 2);
    let report = f.report("latest");
    assert_eq!(report["run"]["complete"], true);
    assert_eq!(report["overall"]["cm_strict"], 1.0);
}

#[test]
fn allow_errors_accepts_a_bounded_number_of_failures() {
    let f = Fixture::new();
    let server = f.double_failing_first(1);
    let url = server.base_url();
    let out = envsim(&f.eval_args(&url, &["--retries", "0", "--allow-errors", "10%"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("allowed by --allow-errors"),
        "{}",
        stderr(&out)
    );
    let out = envsim(&f.eval_args(&url, &["--allow-errors", "many"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("neither a number of samples"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn report_out_replays_to_identical_scores() {
    let f = Fixture::new();
    let server = f.double(Duration::ZERO);
    let url = server.base_url();
    let first = json_of(&envsim(&f.eval_args(&url, &["--format", "json"])));
    let run = first["run"]["id"].as_str().unwrap().to_owned();
    let out = f.path("preds.jsonl");
    ok(&envsim(&[
        "report",
        &run,
        "--store",
        f.store.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]));
    let lines = std::fs::read_to_string(&out).unwrap();
    assert_eq!(lines.lines().count(), f.transitions.len());
    let replay = json_of(&envsim(&[
        "eval",
        "--bench",
        f.bench.to_str().unwrap(),
        "--store",
        f.store.to_str().unwrap(),
        "--backend",
        "replay",
        "--predictions",
        out.to_str().unwrap(),
        "--format",
        "json",
        "--no-progress",
    ]));
    assert_eq!(replay["samples"], first["samples"]);
    assert_eq!(replay["overall"], first["overall"]);
}

#[test]
fn a_bench_file_with_a_late_error_is_refused_after_its_first_requests_and_stores_no_run() {
    let f = Fixture::new();
    let server = f.double(Duration::ZERO);
    let url = server.base_url();
    let mut records: Vec<Value> =
        serde_json::from_slice(&std::fs::read(&f.bench).unwrap()).unwrap();
    let last = records.len() - 1;
    records[last]["step_detail"]
        .as_object_mut()
        .unwrap()
        .remove("action");
    let text = to_json_array(&records);
    std::fs::write(&f.bench, &text).unwrap();
    let want = parse_benchmark(text.as_bytes(), f.bench.to_str().unwrap())
        .expect_err("invalid")
        .to_string();
    let out = envsim(&f.eval_args(&url, &["--format", "json"]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&want), "{err}\nwant: {want}");
    assert!(
        err.contains(
            "samples had been sent; the run was stopped and not stored (fix the file and rerun)"
        ),
        "{err}"
    );
    assert!(stdout(&out).is_empty());
    let runs = json_of(&envsim(&[
        "runs",
        "--store",
        f.store.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(runs, json!([]));
    // A subset selection reads the whole file first: the same error, no request sent.
    let before = server.requests();
    let out = envsim(&f.eval_args(&url, &["--limit", "3"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(&want), "{}", stderr(&out));
    assert_eq!(server.requests(), before);
}

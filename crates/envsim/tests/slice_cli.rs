//! `envsim bench slice-check` on the bundled benchmark: the static slice holds every path each
//! call reads and reproduces every outcome, and the sliced prompts are much shorter.

use serde_json::Value;
use std::process::Command;

#[test]
fn slice_check_on_the_bundled_benchmark() {
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(["bench", "slice-check", "--format", "json", "--workers", "2"])
        .current_dir(std::env::temp_dir())
        .output()
        .expect("runs envsim");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        stdout.chars().take(4000).collect::<String>(),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&stdout).expect("JSON report");
    assert_eq!(report["samples"], 400);
    assert_eq!(report["executed"], 400);
    for key in ["violations", "errors", "not_reproducible"] {
        assert_eq!(report[key], Value::Array(vec![]), "{key}");
    }
    assert_eq!(report["fallbacks"]["code"], 0);
    assert_eq!(report["token_counter"], "characters / 4 (estimate)");
    // Measured: 3.00x (totals) and 72.7k → 24.2k characters per prompt on average; the
    // footprint slice 7.14x.
    let ratio = report["ratio_full_to"]["sliced"].as_f64().unwrap();
    assert!(ratio >= 2.9, "full / sliced = {ratio}");
    // Every table kept whole comes with its reason; a use in the code names its line.
    let whole = report["whole_tables"].as_array().unwrap();
    assert!(
        whole.len() >= 300,
        "{} samples keep a table whole",
        whole.len()
    );
    for sample in whole {
        let tables = sample["tables"].as_array().unwrap();
        assert!(!tables.is_empty(), "{sample}");
        for t in tables {
            let table = t["table"].as_str().unwrap();
            let reason = t["reason"].as_str().unwrap();
            assert!(table.starts_with('/'), "{sample}");
            assert!(
                reason.contains(" at line ") || reason.starts_with("the argument "),
                "{sample}"
            );
        }
    }
    let footprint = report["ratio_full_to"]["footprint"].as_f64().unwrap();
    assert!(footprint >= ratio, "full / footprint = {footprint}");
    let mean = |variant: &str| report["prompt_chars"][variant]["mean"].as_f64().unwrap();
    assert!(mean("full") >= 2.5 * mean("sliced"));
    let code = |variant: &str| report["code_chars"][variant]["mean"].as_f64().unwrap();
    assert!(code("full") >= 5.0 * code("sliced"));
    // Every sliced prompt is at most as long as its full prompt.
    let max = |variant: &str| report["prompt_chars"][variant]["max"].as_f64().unwrap();
    assert!(max("sliced") <= max("full"));
    eprintln!("slice-check took {:.1} s", started.elapsed().as_secs_f64());
}

#[test]
fn slice_check_reports_a_bad_benchmark_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.jsonl");
    std::fs::write(&path, "{not json}\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(["bench", "slice-check", "--bench"])
        .arg(&path)
        .output()
        .expect("runs envsim");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("b.jsonl"), "{stderr}");
}

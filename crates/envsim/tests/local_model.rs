//! The whole path with a real model: prompt → the embedded local model (the default
//! Qwen2.5-Coder-0.5B GGUF on the compiled-in engine) → messy output → parsing → scoring →
//! store, on a handful of samples of the bundled benchmark.
//!
//! Opt-in, like every test that needs the 491 MB model: `ENVSIM_MODEL_TESTS=1` (`.ci/run` fetches
//! the model once into the cache and sets it). Without it the test says it was skipped and
//! passes, so the default test run is hermetic. `ENVSIM_CACHE_DIR` relocates the cache.
#![cfg(feature = "local")]

use serde_json::Value;
use std::process::{Command, Output};

fn envsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "stderr: {}\nstdout: {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn local_model_end_to_end_on_a_few_samples() {
    if !matches!(
        std::env::var("ENVSIM_MODEL_TESTS").ok().as_deref(),
        Some("1" | "all")
    ) {
        eprintln!(
            "skipped local_model_end_to_end_on_a_few_samples: set ENVSIM_MODEL_TESTS=1 to run it \
             (it uses the 491 MB default model; `envsim model fetch` puts it in the cache)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runs.sqlite");
    let store = store.to_str().unwrap();
    let common = [
        "--backend",
        "local",
        "--template",
        "envsim-sliced",
        "--max-prompt-chars",
        "4000",
        "--per-stratum",
        "1",
        "--limit",
        "2",
        "--max-tokens",
        "96",
        "--store",
        store,
        "--no-progress",
    ];
    let mut args = vec!["eval"];
    args.extend_from_slice(&common);
    args.extend_from_slice(&["--format", "json"]);
    let report: Value = serde_json::from_str(&ok(&envsim(&args))).expect("JSON report");
    assert_eq!(report["overall"]["n"], 2);
    assert_eq!(report["run"]["complete"], true);
    assert_eq!(report["run"]["config"]["backend"]["kind"], "local");
    let samples = report["samples"].as_array().unwrap();
    for s in samples {
        // The model ran (no API error: every sliced prompt fits the context) and its output was
        // either read or classified as a parse failure with a code.
        assert!(s["api_error"].is_null(), "{s}");
        let usage = &s["usage"];
        assert!(usage["prompt_tokens"].as_u64().unwrap() > 100, "{s}");
        assert!(usage["completion_tokens"].as_u64().unwrap() >= 1, "{s}");
        assert!(usage["completion_tokens"].as_u64().unwrap() <= 96, "{s}");
        if !s["parse_failure"].is_null() {
            assert!(s["parse_failure"]["code"].is_string(), "{s}");
            assert_eq!(s["cm_strict"], false);
        }
    }
    // Scores are consistent with the stored raw outputs: replaying them scores identically.
    let run = report["run"]["id"].as_str().unwrap().to_owned();
    let preds = dir.path().join("preds.jsonl");
    ok(&envsim(&[
        "report",
        &run,
        "--store",
        store,
        "--out",
        preds.to_str().unwrap(),
    ]));
    let replay: Value = serde_json::from_str(&ok(&envsim(&[
        "eval",
        "--backend",
        "replay",
        "--predictions",
        preds.to_str().unwrap(),
        "--template",
        "envsim-sliced",
        "--max-prompt-chars",
        "4000",
        "--per-stratum",
        "1",
        "--limit",
        "2",
        "--store",
        store,
        "--no-progress",
        "--format",
        "json",
    ])))
    .unwrap();
    assert_eq!(replay["samples"], report["samples"]);
    // The same command again answers from the run store without touching the model.
    let mut again = vec!["eval"];
    again.extend_from_slice(&common);
    again.extend_from_slice(&["--format", "json"]);
    let second: Value = serde_json::from_str(&ok(&envsim(&again))).unwrap();
    assert_eq!(second["samples"], report["samples"]);
    assert_eq!(second["run"]["id"], report["run"]["id"]);
}

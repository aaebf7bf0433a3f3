//! BFCL v4 end to end through the CLI, on data nobody here wrote: `env import-bfcl`, then every
//! package's recorded ground truth (call-only trajectories whose observations BFCL's own
//! classes produced) re-executed by `env replay` and by `bench build --trajectories`. Skips with
//! a message when bfcl-eval is not importable; `ENVSIM_REQUIRE_BFCL=1` makes that a failure (CI).

use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

fn envsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(args)
        .output()
        .expect("runs")
}

fn installed() -> bool {
    let found = Command::new("python3")
        .args(["-c", "import bfcl_eval"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("ENVSIM_REQUIRE_BFCL").as_deref() != Ok("1"),
            "ENVSIM_REQUIRE_BFCL=1 but python3 cannot import bfcl_eval"
        );
        eprintln!(
            "SKIPPED: python3 cannot import bfcl_eval; to run this test: {} (ENVSIM_REQUIRE_BFCL=1 makes this a failure)",
            envsim_exec::bfcl::PIP_HINT
        );
    }
    found
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bfcl_ground_truth_replays_exactly_and_builds_a_benchmark() {
    if !installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("bfcl");
    let imported = envsim(&["env", "import-bfcl", "--out", packages.to_str().unwrap()]);
    assert!(imported.status.success(), "{}", stderr(&imported));

    // Every package's trajectories replay, each step compared with what BFCL recorded.
    let mut all = String::new();
    let mut steps = 0;
    let mut names: Vec<_> = std::fs::read_dir(&packages)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    assert_eq!(names.len(), 8);
    for package in &names {
        let trajectories = std::fs::read_to_string(package.join("trajectories.jsonl")).unwrap();
        all.push_str(&trajectories);
        let out = envsim(&[
            "env",
            "--envs",
            packages.to_str().unwrap(),
            "replay",
            package.join("trajectories.jsonl").to_str().unwrap(),
            "--workers",
            "2",
        ]);
        assert!(
            out.status.success(),
            "{}: {}",
            package.display(),
            stderr(&out)
        );
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let run: Value = serde_json::from_str(line).unwrap();
            let summary = &run["summary"];
            assert_eq!(summary["differs"], 0, "{}", run["task_id"]);
            assert_eq!(summary["not_recorded"], 0, "{}", run["task_id"]);
            assert_eq!(summary["exact"], run["steps"].as_array().unwrap().len());
            steps += summary["exact"].as_u64().unwrap();
        }
    }
    assert_eq!(steps, 1142, "the base category's ground-truth steps");

    // The same call-only records build a benchmark that replays from its own file.
    let file = dir.path().join("all.jsonl");
    std::fs::write(&file, all).unwrap();
    let composition = dir.path().join("c.json");
    std::fs::write(
        &composition,
        json!({"buckets": [
            {"name": "query", "outcome": "success", "delta": [0, 0], "count": 30},
            {"name": "changed", "outcome": "success", "delta": [1, 3], "count": 30}
        ]})
        .to_string(),
    )
    .unwrap();
    let out = dir.path().join("bench");
    let built = envsim(&[
        "bench",
        "build",
        "--envs",
        packages.to_str().unwrap(),
        "--trajectories",
        file.to_str().unwrap(),
        "--composition",
        composition.to_str().unwrap(),
        "--max-env-share",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = stderr(&built);
    assert!(built.status.success(), "{text}");
    assert!(text.contains("335 call-only runs re-executed"), "{text}");
    assert!(
        text.contains("1142 steps: 1142 exact, 0 normalised, 0 differ"),
        "{text}"
    );
    assert!(text.contains("60 of 60 samples replay exactly"), "{text}");
    assert!(Path::new(&out.join("benchmark.json")).is_file());
}

//! The binary on its own, as `cargo install` leaves it: run from an empty folder with no
//! `--envs`, no `$ENVSIM_ENVS` and no other hint, it finds the environment corpus and the
//! benchmark it carries, never names the folder it was built in, and `--envs DIR` /
//! `$ENVSIM_ENVS` still take over.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The workspace this binary was built from: no output may mention it.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace")
}

/// Runs the binary in `cwd` with no environment variable envsim reads.
fn envsim_in(cwd: &Path, args: &[&str], extra_env: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_envsim"));
    command
        .args(args)
        .current_dir(cwd)
        .env_remove("ENVSIM_ENVS")
        .env_remove("ENVSIM_STORE")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY");
    for (key, value) in extra_env {
        command.env(key, value);
    }
    let out = command.output().expect("the binary runs");
    let workspace = workspace();
    let workspace = workspace.to_str().expect("UTF-8 path");
    for (stream, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let text = String::from_utf8_lossy(text);
        assert!(
            !text.contains(workspace) && !text.contains("CARGO_MANIFEST_DIR"),
            "envsim {args:?}: {stream} names the build tree:\n{text}"
        );
    }
    out
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "stderr: {}\nstdout: {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8")
}

fn write_package(root: &Path, name: &str) {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("states")).unwrap();
    std::fs::write(
        dir.join("env.py"),
        "class Lamp:\n    def __init__(self, init_config: dict):\n        self.on = False\n\n    \
         def toggle(self) -> dict:\n        \"\"\"Flip the lamp.\"\"\"\n        self.on = not self.on\n        \
         return {\"success\": True, \"on\": self.on}\n",
    )
    .unwrap();
    let manifest = json!({"name": name, "domain": "test", "description": "A lamp.",
        "class_name": "Lamp", "tools": [{"type": "function", "function": {"name": "toggle",
        "description": "Flip.", "parameters": {"type": "object", "properties": {}, "required": []}}}]});
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
    std::fs::write(dir.join("states/00.json"), r#"{"on": false}"#).unwrap();
}

#[test]
fn env_commands_use_the_bundled_corpus_from_anywhere() {
    let cwd = tempfile::tempdir().unwrap();
    let cwd = cwd.path();
    let list: Value =
        serde_json::from_str(&ok(&envsim_in(cwd, &["env", "list", "--json"], &[]))).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 42, "{names:?}");
    assert!(names.contains(&"online_shop"));

    let show = ok(&envsim_in(cwd, &["env", "show", "online_shop"], &[]));
    assert!(show.contains("checkout(customer_id: string)"), "{show}");

    let call: Value = serde_json::from_str(&ok(&envsim_in(
        cwd,
        &[
            "env",
            "call",
            "online_shop",
            "checkout",
            "--state-index",
            "1",
            "--args",
            r#"{"customer_id": "C2002"}"#,
            "--json",
        ],
        &[],
    )))
    .unwrap();
    assert_eq!(call["error"], Value::Null, "{call}");
    assert_eq!(call["observation_json"]["success"], true, "{call}");
    assert!(call["delta_count"].as_u64().unwrap() > 0, "{call}");

    let test = ok(&envsim_in(cwd, &["env", "test"], &[]));
    // Every environment passes; six warn about states that record events after their own
    // clock (corpus data to fix, see docs/formats.md on clocks).
    assert_eq!(test.lines().filter(|l| l.starts_with("ok ")).count(), 36);
    let warned: Vec<&str> = test
        .lines()
        .filter_map(|l| l.strip_prefix("warn  "))
        .map(|l| l.split_whitespace().next().unwrap_or_default())
        .collect();
    assert_eq!(
        warned,
        [
            "car_rental",
            "course_registration",
            "library_loans",
            "retail_banking",
            "smart_home",
            "telecom_carrier"
        ]
    );

    let missing = envsim_in(cwd, &["env", "show", "no_such_env"], &[]);
    assert!(!missing.status.success());
    let message = String::from_utf8_lossy(&missing.stderr);
    assert!(
        message.contains("no environment \"no_such_env\" in the bundled corpus (have: "),
        "{message}"
    );
    // The build machine's paths never show.
    let source = workspace();
    assert!(!message.contains(source.to_str().unwrap()), "{message}");
    assert!(!show.contains(source.to_str().unwrap()), "{show}");
    // Nothing was written where it ran.
    assert_eq!(std::fs::read_dir(cwd).unwrap().count(), 0);
}

#[test]
fn a_folder_overrides_the_bundled_corpus() {
    let cwd = tempfile::tempdir().unwrap();
    let envs = tempfile::tempdir().unwrap();
    write_package(envs.path(), "lamp");
    let dir = envs.path().to_str().unwrap();
    let names = |out: &Output| -> Vec<String> {
        let list: Value = serde_json::from_str(&ok(out)).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let by_flag = envsim_in(cwd.path(), &["env", "--envs", dir, "list", "--json"], &[]);
    assert_eq!(names(&by_flag), ["lamp"]);
    let by_variable = envsim_in(
        cwd.path(),
        &["env", "list", "--json"],
        &[("ENVSIM_ENVS", envs.path())],
    );
    assert_eq!(names(&by_variable), ["lamp"]);
    // --envs names the folder in messages.
    let missing = envsim_in(
        cwd.path(),
        &["env", "show", "online_shop", "--envs", dir],
        &[],
    );
    let message = String::from_utf8_lossy(&missing.stderr);
    assert!(
        message.contains(&format!(
            "no environment \"online_shop\" in {dir} (have: lamp)"
        )),
        "{message}"
    );
}

#[test]
fn eval_and_bench_build_work_from_anywhere() {
    let cwd = tempfile::tempdir().unwrap();
    let cwd = cwd.path();
    let out = ok(&envsim_in(
        cwd,
        &[
            "eval",
            "--backend",
            "oracle",
            "--per-stratum",
            "1",
            "--store",
            "runs.sqlite",
            "--format",
            "json",
        ],
        &[],
    ));
    let report: Value = serde_json::from_str(&out).expect("a JSON report");
    assert_eq!(report["run"]["bench_path"], "<bundled benchmark>");

    // A small benchmark from the bundled corpus (a default build takes minutes in a debug
    // build; the bundled benchmark was built from the 40 environments its datasheet lists,
    // before the two database-convention environments joined the corpus).
    std::fs::write(
        cwd.join("composition.json"),
        json!({"buckets": [
            {"name": "failure", "outcome": "failure", "delta": [0, 0], "count": 3},
            {"name": "changed", "outcome": "success", "delta": [1, 20], "count": 3}
        ]})
        .to_string(),
    )
    .unwrap();
    let fingerprint = ok(&envsim_in(
        cwd,
        &[
            "bench",
            "build",
            "--composition",
            "composition.json",
            "--walks",
            "1",
            "--steps",
            "3",
            "--out",
            "b",
        ],
        &[],
    ));
    assert_eq!(fingerprint.trim().len(), 64, "{fingerprint}");
    let bench: Value =
        serde_json::from_slice(&std::fs::read(cwd.join("b/benchmark.json")).unwrap()).unwrap();
    assert_eq!(bench.as_array().unwrap().len(), 6);
}

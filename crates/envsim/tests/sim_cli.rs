//! `envsim sim` end to end on a small package written by the test.

use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn write_desk(root: &Path) {
    envsim_testkit::desk::write(root).unwrap();
}

fn sim(root: &Path, args: &[&str], stdin: &str) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .arg("sim")
        .args(["--envs", root.to_str().unwrap(), "--env", "desk"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

const CALLS: &str = r#"{"name": "create_ticket", "arguments": {"title": "b"}}
{"name": "get_ticket", "arguments": "{\"ticket_id\": \"T2\"}"}
{"name": "close_ticket", "arguments": {"ticket_id": "T2"}}
{"name": "get_ticket", "arguments": {"ticket_id": "T2"}}
"#;

#[test]
fn a_session_from_standard_input_is_written_for_the_audit() {
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    let out = dir.path().join("session.jsonl");
    let input = format!("{CALLS}:snapshot after\n:state\n{{\"name\": \"close_ticket\", \"arguments\": {{\"ticket_id\": \"T1\"}}}}\n:rollback after\n");
    let run = sim(
        dir.path(),
        &["--backend", "executor", "--out", out.to_str().unwrap()],
        &input,
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["observation"]["ticket_id"], "T2");
    assert_eq!(lines[1]["observation"]["data"]["title"], "b");
    assert_eq!(lines[3]["observation"]["data"]["status"], "closed");
    assert_eq!(lines[4], json!({"snapshot": "after", "steps": 4}));
    assert_eq!(lines[5]["tickets"]["T2"]["status"], "closed");
    assert_eq!(lines[6]["step"], 5);
    assert_eq!(lines[7], json!({"rollback": "after", "steps": 4}));
    // The file holds the session after the rollback: four steps, and the audit reads it.
    let record: Value =
        serde_json::from_str(std::fs::read_to_string(&out).unwrap().trim()).unwrap();
    assert_eq!(record["steps"].as_array().unwrap().len(), 4);
    assert_eq!(record["steps"][3]["provenance"]["simulator"], "executor");
    let audit = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args([
            "audit",
            out.to_str().unwrap(),
            "--json",
            "--learn-walks",
            "2",
        ])
        .args(["--envs", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        audit.status.success(),
        "{}",
        String::from_utf8_lossy(&audit.stderr)
    );
    let summary: Value = serde_json::from_slice(&audit.stdout).unwrap();
    assert_eq!(
        (summary["trajectories"].clone(), summary["steps"].clone()),
        (json!(1), json!(4))
    );
}

#[test]
fn full_anchoring_repairs_the_faulty_double_and_bad_lines_are_located() {
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    // A double that spoils every attempt: each step it can spoil is caught, regenerated (and
    // spoiled again), then escalated to the executor.
    let run = sim(
        dir.path(),
        &[
            "--backend",
            "faulty",
            "--fault-rate",
            "1",
            "--anchor",
            "full",
        ],
        CALLS,
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["observation"]["ticket_id"], "T2");
    assert_eq!(lines[3]["observation"]["data"]["status"], "closed");
    assert!(lines
        .iter()
        .any(|l| l["provenance"]["escalated_to"] == "executor"));
    // A call line that is not a call is an error naming its line.
    let run = sim(
        dir.path(),
        &["--backend", "executor"],
        "{\"name\": \"get_ticket\", \"arguments\": {\"ticket_id\": \"T1\"}}\n{\"arguments\": {}}\n",
    );
    assert_eq!(run.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("stdin:2: field `name` (the tool) is missing or not a string"),
        "{stderr}"
    );
    // The executor needs code; a description-only session says so.
    let run = sim(dir.path(), &["--backend", "executor", "--no-code"], CALLS);
    assert_eq!(run.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stderr).contains("has only a description"));
}

/// `envsim sim measure` on the desk: the executor as the primary is right at every step; the
/// faulty double that always errs is not, every kept wrong step is named, and full anchoring
/// (escalating to the code) repairs steps at the cost of more simulator calls. Unknown
/// configurations and verification without a second simulator are refused.
#[test]
fn anchoring_is_measured_on_walks_of_the_desk() {
    let dir = tempfile::tempdir().unwrap();
    write_desk(dir.path());
    let measure = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_envsim"))
            .args(["sim", "measure", "--envs", dir.path().to_str().unwrap()])
            .args(["--env", "desk", "--walks", "2", "--steps", "6", "--json"])
            .args(args)
            .output()
            .unwrap()
    };
    let o = measure(&["--backend", "executor", "--configs", "off"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let exact: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(exact["environments"], json!(["desk"]));
    assert_eq!(exact["mode"], "code");
    let off = &exact["configs"][0];
    assert_eq!(off["config"], "off");
    assert_eq!(off["steps"], off["right_steps"]);
    assert_eq!(off["trajectories"], off["consistent_trajectories"]);
    assert!(off["steps"].as_u64().unwrap() > 0);
    let o = measure(&[
        "--backend",
        "faulty",
        "--fault-rate",
        "1",
        "--configs",
        "off,full",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let spoiled: Value = serde_json::from_slice(&o.stdout).unwrap();
    let (off, full) = (&spoiled["configs"][0], &spoiled["configs"][1]);
    assert_eq!(
        (off["config"].as_str(), full["config"].as_str()),
        (Some("off"), Some("full"))
    );
    assert!(off["right_steps"].as_u64() < off["steps"].as_u64(), "{off}");
    let missed: u64 = off["misses"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(json!(missed), off["wrong_and_not_uncertain"]);
    assert!(
        full["right_steps"].as_u64() > off["right_steps"].as_u64(),
        "{full}"
    );
    assert!(full["simulator_calls"].as_u64() > off["simulator_calls"].as_u64());
    let o = measure(&["--configs", "sometimes"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("unknown configuration \"sometimes\""),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = measure(&["--configs", "verify"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs --secondary"));
}

//! `envsim curate` end to end: trajectories synthesized on the test desk with a faulty
//! simulator and no anchoring (so some are inconsistent), then gated, selected and exported.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn envsim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(args)
        .output()
        .unwrap()
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn synthesized_trajectories_are_gated_selected_and_exported() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    envsim_testkit::desk::write(root).unwrap();
    let synth_out = root.join("synth.jsonl");
    let o = envsim(&[
        "synth",
        "--envs",
        root.to_str().unwrap(),
        "--env",
        "desk",
        "--tasks",
        "walks",
        "--count",
        "12",
        "--agent",
        "scripted",
        "--backend",
        "faulty",
        "--fault-rate",
        "0.4",
        "--anchor",
        "off",
        "--max-tool-calls",
        "8",
        "--store",
        root.join("s.sqlite").to_str().unwrap(),
        "--out",
        synth_out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let records = lines(&synth_out);
    assert_eq!(records.len(), 12);
    let inconsistent = records
        .iter()
        .filter(|r| {
            r["truth"]["final_state_equal"] == false || r["scores"]["scs"].as_f64().unwrap() < 1.0
        })
        .count();
    assert!(inconsistent > 0, "the faulty simulator spoiled nothing");
    // The calls an error-path task made to fail are marked: exactly its steps answered as
    // failures, each with the assistant message that made it (system, user, then an
    // assistant call and its answer per step: step k's call is message 2 + 2k).
    let mut marked_calls = 0;
    for r in &records {
        let expected: Vec<Value> = if r["family"] == "error_path" {
            r["steps"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
                .filter(|(_, s)| s["success"] == false)
                .map(|(k, s)| {
                    serde_json::json!({"message": 2 + 2 * k, "tool": s["action"]["name"],
                        "call_id": r["messages"][2 + 2 * k]["tool_calls"][0]["id"]})
                })
                .collect()
        } else {
            Vec::new()
        };
        assert_eq!(
            r["deliberate_errors"],
            Value::Array(expected),
            "{}",
            r["id"]
        );
        marked_calls += r["deliberate_errors"].as_array().unwrap().len();
    }
    assert!(marked_calls > 0, "no error-path task failed a call");
    let error_path_ids: Vec<&Value> = records
        .iter()
        .filter(|r| !r["deliberate_errors"].as_array().unwrap().is_empty())
        .map(|r| &r["id"])
        .collect();
    // Kept by default and counted; dropped with their trajectories; or weighted 0 in the
    // OpenAI lines (only those turns).
    for (handling, kept_marked) in [("keep", true), ("drop", false), ("mask", true)] {
        let to = root.join(format!("errors-{handling}"));
        let o = envsim(&[
            "curate",
            synth_out.to_str().unwrap(),
            "--out",
            to.to_str().unwrap(),
            "--keep-unfinished",
            "--error-paths",
            handling,
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let sheet: Value = serde_json::from_slice(&o.stdout).unwrap();
        let e = &sheet["deliberate_errors"];
        assert_eq!(e["handling"], handling);
        assert_eq!(e["calls_read"], marked_calls);
        assert_eq!(e["trajectories_read"], error_path_ids.len());
        let selected = if kept_marked { marked_calls } else { 0 };
        assert_eq!(e["calls_selected"], selected, "{handling}");
        assert_eq!(
            sheet["counts"]["selected"],
            if kept_marked {
                12
            } else {
                12 - error_path_ids.len()
            },
            "{handling}"
        );
        let weighted: usize = lines(&to.join("openai.jsonl"))
            .iter()
            .flat_map(|l| l["messages"].as_array().unwrap().clone())
            .filter(|m| m.get("weight").is_some())
            .inspect(|m| {
                assert_eq!(m["weight"], 0);
                assert_eq!(m["role"], "assistant");
            })
            .count();
        assert_eq!(weighted, if handling == "mask" { marked_calls } else { 0 });
        let md = std::fs::read_to_string(to.join("datasheet.md")).unwrap();
        assert!(
            md.contains(&format!(
                "Calls error-path tasks made to fail: {marked_calls} in {} trajectories read, {selected} in",
                error_path_ids.len()
            )),
            "{md}"
        );
    }
    // Gate on a perfect SCS and DCS: only consistent trajectories are kept, and each export
    // has one line per kept trajectory.
    let out = root.join("curated");
    let o = envsim(&[
        "curate",
        synth_out.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--min-scs",
        "1",
        "--min-dcs",
        "1",
        "--curriculum",
        "0,1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sheet: Value = serde_json::from_slice(&o.stdout).unwrap();
    let kept = sheet["counts"]["selected"].as_u64().unwrap() as usize;
    assert_eq!(
        kept,
        sheet["counts"]["passing_gate"].as_u64().unwrap() as usize
    );
    assert!(kept > 0 && kept < 12, "{kept}");
    let expected_kept = records
        .iter()
        .filter(|r| r["scores"]["scs"] == 1.0 && r["scores"]["dcs"] == 1.0)
        .count();
    assert_eq!(kept, expected_kept);
    let dropped: u64 = sheet["gate_would_throw_away"]["trajectories"]
        .as_u64()
        .unwrap();
    assert_eq!(dropped as usize, 12 - kept);
    for file in [
        "openai.jsonl",
        "sharegpt.jsonl",
        "hermes.jsonl",
        "rl_episodes.jsonl",
    ] {
        assert_eq!(lines(&out.join(file)).len(), kept, "{file}");
    }
    assert_eq!(lines(&out.join("curriculum/stage-1.jsonl")).len(), kept);
    let openai = lines(&out.join("openai.jsonl"));
    assert_eq!(openai[0]["messages"][0]["role"], "system");
    assert_eq!(openai[0]["tools"].as_array().unwrap().len(), 4);
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("dataset_info.json")).unwrap())
            .unwrap();
    assert_eq!(info["envsim_synth"]["file_name"], "sharegpt.jsonl");
    // Every episode's checker accepts the final state of the trajectory it came from (they
    // are consistent ones, so the simulated and executed final states agree).
    for episode in &lines(&out.join("rl_episodes.jsonl")) {
        let record = records.iter().find(|r| r["id"] == episode["id"]).unwrap();
        let checker = envsim_core::checker::StateChecker::parse(&episode["checker"]).unwrap();
        // Made from the executor's runs under several seeds and clocks.
        assert_eq!(checker.runs, 4);
        let verdict = checker.check(&record["initial_state"], &record["final_state"]);
        assert!(verdict.failures.is_empty(), "{:?}", verdict.failures);
        if record["final_state"] != record["initial_state"] {
            assert!(checker.checks() > 0);
            // Doing nothing does not pass.
            let undone = checker.check(&record["initial_state"], &record["initial_state"]);
            assert!(!undone.failures.is_empty());
        }
    }
    // The same inputs and settings give the same fingerprint.
    let again = root.join("again");
    let o2 = envsim(&[
        "curate",
        synth_out.to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
        "--min-scs",
        "1",
        "--min-dcs",
        "1",
        "--curriculum",
        "0,1",
        "--json",
    ]);
    let sheet2: Value = serde_json::from_slice(&o2.stdout).unwrap();
    assert_eq!(sheet["fingerprint"], sheet2["fingerprint"]);
    assert_eq!(
        std::fs::read(out.join("openai.jsonl")).unwrap(),
        std::fs::read(again.join("openai.jsonl")).unwrap()
    );
    // Pareto selection over everything finished: it may take trajectories the gate drops, and
    // says so.
    let pareto = root.join("pareto");
    let o = envsim(&[
        "curate",
        synth_out.to_str().unwrap(),
        "--out",
        pareto.to_str().unwrap(),
        "--min-scs",
        "1",
        "--select",
        "pareto",
        "--count",
        "6",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sheet: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(sheet["counts"]["selected"], 6);
    assert_eq!(lines(&pareto.join("openai.jsonl")).len(), 6);
    let md = std::fs::read_to_string(pareto.join("datasheet.md")).unwrap();
    assert!(md.contains("6 selected (pareto)"), "{md}");
}

#[test]
fn bad_input_and_impossible_requests_are_refused_with_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let out = dir.path().join("out");
    let step = r#"{"action": {"name": "get", "arguments": {}}, "observation": {"success": true}, "state_after": {}}"#;
    std::fs::write(
        &input,
        format!("{{\"id\": \"a\", \"env\": \"e\", \"initial_state\": {{}}, \"steps\": [{step}]}}\nnot json\n"),
    )
    .unwrap();
    let o = envsim(&[
        "curate",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("in.jsonl line 2: not JSON"),
        "{}",
        stderr(&o)
    );
    std::fs::write(
        &input,
        format!("{{\"id\": \"a\", \"steps\": [{step}]}}\n{{\"id\": \"a\", \"steps\": []}}\n"),
    )
    .unwrap();
    let o = envsim(&[
        "curate",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        stderr(&o).contains("in.jsonl line 2: the id \"a\" was already used at"),
        "{}",
        stderr(&o)
    );
    std::fs::write(&input, format!("{{\"id\": \"a\", \"steps\": [{step}]}}\n")).unwrap();
    let o = envsim(&[
        "curate",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--select",
        "pareto",
    ]);
    assert!(stderr(&o).contains("needs --count"), "{}", stderr(&o));
    let o = envsim(&[
        "curate",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--weights",
        "scs=x",
    ]);
    assert!(stderr(&o).contains("is not a weight"), "{}", stderr(&o));
    let o = envsim(&[
        "curate",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--batch-size",
        "4",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no batch of 4 can be filled"),
        "{}",
        stderr(&o)
    );
    let o = envsim(&[
        "curate",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--min-consistency",
        "2",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no trajectory was selected"),
        "{}",
        stderr(&o)
    );
    let o = envsim(&[
        "curate",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--select",
        "pareto",
        "--count",
        "1",
        "--floor",
        "1.5",
    ]);
    assert!(
        stderr(&o).contains("no trajectory was selected"),
        "{}",
        stderr(&o)
    );
    // A record without scores passes a minimum it cannot be judged by, unless scores are
    // required.
    let o = envsim(&[
        "curate",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--min-dcs",
        "0.5",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = envsim(&[
        "curate",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--min-dcs",
        "0.5",
        "--require-scores",
    ]);
    assert!(stderr(&o).contains("no DCS 1"), "{}", stderr(&o));
}

//! `envsim synth` end to end on the test desk package: walk tasks replayed by the scripted
//! agent, a function-calling agent served by the OpenAI test double, resuming a stored run,
//! and failures that must be loud.

use envsim_testkit::openai_double::{DoubleConfig, Fault, OpenAiDouble};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

fn synth(root: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_envsim"))
        .arg("synth")
        .args(["--envs", root.to_str().unwrap(), "--env", "desk"])
        .args(["--store", root.join("synth.sqlite").to_str().unwrap()])
        .args(args)
        .output()
        .unwrap()
}

fn records(path: &Path) -> Vec<Value> {
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
fn walk_tasks_replayed_through_the_executor_are_consistent_and_resume_to_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    envsim_testkit::desk::write(dir.path()).unwrap();
    let out = dir.path().join("out.jsonl");
    let args = [
        "--tasks",
        "walks",
        "--count",
        "4",
        "--agent",
        "scripted",
        "--backend",
        "executor",
        "--max-tool-calls",
        "6",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ];
    let first = synth(dir.path(), &args);
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(
        stderr(&first).contains("(new), 4 tasks, 4 to do"),
        "{}",
        stderr(&first)
    );
    let summary: Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(summary["trajectories"], 4);
    assert_eq!(summary["truth"]["final_state_equal"], 4);
    assert_eq!(summary["truth"]["right_steps"], summary["truth"]["steps"]);
    assert_eq!(summary["mean_scs"], 1.0);
    assert_eq!(summary["mean_dcs"], 1.0);
    let written = records(&out);
    assert_eq!(written.len(), 4);
    for r in &written {
        assert_eq!(r["agent"], "scripted");
        assert_eq!(r["simulator"]["primary"], "executor");
        assert_eq!(r["finish"], "final_answer");
        let plan = r["task"]["plan"].as_array().unwrap();
        assert_eq!(r["steps"].as_array().unwrap().len(), plan.len());
        assert_eq!(r["tool_calls"], plan.len());
        // The conversation: system, user, then a call and its result per planned step, then
        // the answer.
        let roles: Vec<&str> = r["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles.len(), 2 + 2 * plan.len() + 1);
        assert_eq!(&roles[..3], ["system", "user", "assistant"]);
        assert_eq!(roles[3], "tool");
        assert_eq!(
            r["final_state"],
            *r["steps"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .get("state_after")
                .unwrap()
        );
        assert_eq!(r["truth"]["final_state_equal"], true);
    }
    // The records are trajectories the audit reads.
    let audit = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(["audit", out.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(audit.status.success(), "{}", stderr(&audit));
    let report: Value = serde_json::from_slice(&audit.stdout).unwrap();
    assert_eq!(report["trajectories"], 4, "{report}");
    // The same command again: the stored run is complete, nothing is redone, the file is the
    // same.
    let before = std::fs::read(&out).unwrap();
    let again = synth(dir.path(), &args);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("(resumed), 4 tasks, 0 to do"),
        "{}",
        stderr(&again)
    );
    assert_eq!(std::fs::read(&out).unwrap(), before);
}

#[test]
fn a_function_calling_agent_talks_to_the_session_and_a_failed_run_resumes() {
    let dir = tempfile::tempdir().unwrap();
    envsim_testkit::desk::write(dir.path()).unwrap();
    let tasks = dir.path().join("tasks.jsonl");
    std::fs::write(
        &tasks,
        "{\"id\": \"close\", \"instruction\": \"Close ticket T1, then check it.\", \"turns\": [\"Now open a ticket titled x.\"]}\n",
    )
    .unwrap();
    let call = |id: &str, name: &str, args: Value| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}});
    let scripted = |faults: Vec<Fault>| DoubleConfig {
        answers: HashMap::from([
            (
                "Close ticket T1, then check it.".to_string(),
                "T1 is closed.".to_string(),
            ),
            (
                "Now open a ticket titled x.".to_string(),
                "Opened T2.".to_string(),
            ),
        ]),
        tool_calls: HashMap::from([
            (
                "Close ticket T1, then check it.".to_string(),
                vec![
                    vec![call("c0", "close_ticket", json!({"ticket_id": "T1"}))],
                    vec![
                        call("c1", "get_ticket", json!({"ticket_id": "T1"})),
                        call("c2", "no_such_tool", json!({})),
                    ],
                ],
            ),
            (
                "Now open a ticket titled x.".to_string(),
                vec![
                    vec![json!({"id": "c3", "type": "function",
                    "function": {"name": "create_ticket", "arguments": "{\"title\": "}})],
                    vec![call("c4", "create_ticket", json!({"title": "x"}))],
                ],
            ),
        ]),
        faults: HashMap::from([("Close ticket T1, then check it.".to_string(), faults)]),
        ..DoubleConfig::default()
    };
    let out = dir.path().join("out.jsonl");
    // The agent's server fails: the task fails, the command says so and exits non-zero.
    let broken = OpenAiDouble::spawn(scripted(vec![Fault::ServerError])).unwrap();
    let url = broken.base_url();
    let args = |url: &str| {
        vec![
            "--tasks".to_string(),
            tasks.to_str().unwrap().to_string(),
            "--agent".into(),
            "openai".into(),
            "--agent-model".into(),
            "m".into(),
            "--agent-base-url".into(),
            url.to_string(),
            "--backend".into(),
            "executor".into(),
            "--out".into(),
            out.to_str().unwrap().to_string(),
        ]
    };
    let failed = synth(
        dir.path(),
        &args(&url).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(!failed.status.success());
    let e = stderr(&failed);
    assert!(
        e.contains("1 of 1 tasks failed") && e.contains("HTTP 500"),
        "{e}"
    );
    assert!(e.contains("rerun the same command"), "{e}");
    broken.shutdown();
    // A working server: the rerun continues the stored run and does the failed task.
    let double = OpenAiDouble::spawn(scripted(Vec::new())).unwrap();
    let url = double.base_url();
    let run = synth(
        dir.path(),
        &args(&url).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(
        stderr(&run).contains("(resumed), 1 tasks, 1 to do"),
        "{}",
        stderr(&run)
    );
    let r = &records(&out)[0];
    assert_eq!(r["agent"], "openai:m");
    assert_eq!(r["finish"], "final_answer");
    // close, get, create: three real steps; the unknown tool and the unreadable arguments
    // were refused without a step.
    let tools: Vec<&str> = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["action"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["close_ticket", "get_ticket", "create_ticket"]);
    assert_eq!(r["refused_calls"], 2);
    assert_eq!(r["final_state"]["tickets"]["T1"]["status"], "closed");
    assert_eq!(r["final_state"]["tickets"]["T2"]["title"], "x");
    let messages = r["messages"].as_array().unwrap();
    let tool_results: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(tool_results.len(), 5);
    assert!(
        tool_results[2].contains("no tool named \"no_such_tool\""),
        "{tool_results:?}"
    );
    assert!(
        tool_results[3].starts_with("Error: the arguments are not JSON"),
        "{tool_results:?}"
    );
    // The scripted user's second turn came after the first answer.
    let said: Vec<&str> = messages
        .iter()
        .filter(|m| {
            m["role"] == "user" || (m["role"] == "assistant" && m.get("tool_calls").is_none())
        })
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        said,
        [
            "Close ticket T1, then check it.",
            "T1 is closed.",
            "Now open a ticket titled x.",
            "Opened T2."
        ]
    );
    assert!(r["usage"]["agent_tokens"].as_u64().unwrap() > 0);
    // The agent was sent the environment's tools.
    let bodies = double.bodies();
    assert_eq!(bodies[0]["tools"].as_array().unwrap().len(), 4);
    assert_eq!(bodies[0]["messages"][0]["role"], "system");
    double.shutdown();
}

#[test]
fn bad_input_is_refused_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    envsim_testkit::desk::write(dir.path()).unwrap();
    let out = dir.path().join("out.jsonl");
    let tasks = dir.path().join("tasks.jsonl");
    std::fs::write(&tasks, "{\"instruction\": \"a\"}\n{\"instruction\": 5}\n").unwrap();
    let o = synth(
        dir.path(),
        &[
            "--tasks",
            tasks.to_str().unwrap(),
            "--agent",
            "scripted",
            "--backend",
            "executor",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("tasks.jsonl line 2"), "{}", stderr(&o));
    // The scripted agent needs plans.
    std::fs::write(&tasks, "{\"instruction\": \"a\"}\n").unwrap();
    let o = synth(
        dir.path(),
        &[
            "--tasks",
            tasks.to_str().unwrap(),
            "--agent",
            "scripted",
            "--backend",
            "executor",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("has no `plan`"), "{}", stderr(&o));
    // A task for a state the package does not have fails loudly.
    std::fs::write(
        &tasks,
        "{\"instruction\": \"a\", \"state\": \"nope.json\", \"plan\": [{\"name\": \"get_ticket\", \"arguments\": {\"ticket_id\": \"T1\"}}]}\n",
    )
    .unwrap();
    let o = synth(
        dir.path(),
        &[
            "--tasks",
            tasks.to_str().unwrap(),
            "--agent",
            "scripted",
            "--backend",
            "executor",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("the task's state \"nope.json\" is not a state of desk (00.json)"),
        "{}",
        stderr(&o)
    );
    // The package has no task list.
    let o = synth(
        dir.path(),
        &[
            "--tasks",
            "package",
            "--agent",
            "scripted",
            "--backend",
            "executor",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("has no task list"), "{}", stderr(&o));
}

#[test]
fn a_killed_run_continues_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    envsim_testkit::desk::write(dir.path()).unwrap();
    let tasks = dir.path().join("tasks.jsonl");
    let mut text = String::new();
    for i in 0..3 {
        text.push_str(&format!(
            "{{\"id\": \"t{i}\", \"instruction\": \"Look at T1 ({i}).\"}}\n"
        ));
    }
    std::fs::write(&tasks, text).unwrap();
    let config = |hold: Option<usize>| {
        let mut c = DoubleConfig {
            default_answer: Some("T1 is open.".into()),
            hold_after: hold,
            ..DoubleConfig::default()
        };
        for i in 0..3 {
            c.tool_calls.insert(
                format!("Look at T1 ({i})."),
                vec![vec![json!({"id": "c0", "type": "function",
                    "function": {"name": "get_ticket", "arguments": "{\"ticket_id\": \"T1\"}"}})]],
            );
        }
        c
    };
    // Each task takes two requests (the call, the answer): after the third request the
    // server stops answering, in the middle of the second task.
    let stuck = OpenAiDouble::spawn(config(Some(3))).unwrap();
    let store = dir.path().join("synth.sqlite");
    let out = dir.path().join("out.jsonl");
    let args = |url: &str| {
        vec![
            "synth".to_string(),
            "--envs".into(),
            dir.path().to_str().unwrap().into(),
            "--env".into(),
            "desk".into(),
            "--tasks".into(),
            tasks.to_str().unwrap().into(),
            "--agent".into(),
            "openai".into(),
            "--agent-model".into(),
            "m".into(),
            "--agent-base-url".into(),
            url.into(),
            "--backend".into(),
            "executor".into(),
            "--concurrency".into(),
            "1".into(),
            "--store".into(),
            store.to_str().unwrap().into(),
            "--out".into(),
            out.to_str().unwrap().into(),
        ]
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(args(&stuck.base_url()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the second task's answer request hangs: with one task at a time, the first
    // task was committed before the second one's first request. Then kill.
    let started = std::time::Instant::now();
    while stuck.requests() < 4 {
        assert!(
            started.elapsed().as_secs() < 120,
            "the run never reached the stuck request"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    stuck.shutdown();
    let double = OpenAiDouble::spawn(config(None)).unwrap();
    let again = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(args(&double.base_url()))
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("(resumed), 3 tasks, 2 to do"),
        "{}",
        stderr(&again)
    );
    let written = records(&out);
    assert_eq!(written.len(), 3);
    for (i, r) in written.iter().enumerate() {
        assert_eq!(r["id"], format!("t{i}"));
        assert_eq!(r["finish"], "final_answer");
    }
    // Only the two unfinished tasks asked the new server: two requests each.
    assert_eq!(double.requests(), 4);
    double.shutdown();
}

#[test]
fn generated_tasks_are_asked_with_a_schema_and_duplicates_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    envsim_testkit::desk::write(dir.path()).unwrap();
    // Every request gets the same answer: the task writer writes one task four times (three
    // are duplicates), and the agent answers it with that text.
    let task = json!({"instruction": "Close ticket T1.", "tools": ["close_ticket"], "resources": ["tickets/T1"]});
    let double = OpenAiDouble::spawn(DoubleConfig {
        default_answer: Some(task.to_string()),
        ..DoubleConfig::default()
    })
    .unwrap();
    let out = dir.path().join("out.jsonl");
    let o = synth(
        dir.path(),
        &[
            "--tasks",
            "generate",
            "--count",
            "2",
            "--adversarial-share",
            "0.5",
            "--agent",
            "openai",
            "--agent-model",
            "m",
            "--agent-base-url",
            &double.base_url(),
            "--backend",
            "executor",
            "--out",
            out.to_str().unwrap(),
            "--json",
            "--agent-price-input",
            "2",
            "--agent-price-output",
            "8",
            "--price-input",
            "1",
            "--price-output",
            "1",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(summary["trajectories"], 1);
    // Tokens per role, split, and their cost at the given prices (USD per million).
    let u = &summary["usage"];
    let cost = |role: &Value, input: f64, output: f64| {
        (role["prompt_tokens"].as_f64().unwrap() * input
            + role["completion_tokens"].as_f64().unwrap() * output)
            / 1e6
    };
    assert!(u["task_writer"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(u["task_writer"]["completion_tokens"].as_u64().unwrap() > 0);
    assert_eq!(
        u["task_writer"]["cost_usd"].as_f64().unwrap(),
        cost(&u["task_writer"], 2.0, 8.0)
    );
    assert_eq!(
        u["agent_and_user"]["cost_usd"].as_f64().unwrap(),
        cost(&u["agent_and_user"], 2.0, 8.0)
    );
    // The executor spends no tokens.
    assert_eq!(u["simulator"]["cost_usd"], 0.0);
    let total = u["total_cost_usd"].as_f64().unwrap();
    let parts = u["task_writer"]["cost_usd"].as_f64().unwrap()
        + u["agent_and_user"]["cost_usd"].as_f64().unwrap();
    assert!((total - parts).abs() < 1e-12 && total > 0.0);
    assert_eq!(summary["mix"]["desk"]["requested"], 2);
    let r = &records(&out)[0];
    assert_eq!(r["task"]["source"], "generated:openai:m");
    assert_eq!(r["task"]["instruction"], "Close ticket T1.");
    assert_eq!(r["task"]["resources"], json!(["tickets/T1"]));
    // The first generated task was asked for an adversarial family, and kept it.
    assert_eq!(r["family"], "long_chain");
    let bodies = double.bodies();
    // Four task requests (twice the count), then the agent's one turn.
    assert_eq!(bodies.len(), 5);
    for b in &bodies[..4] {
        assert_eq!(b["response_format"]["type"], "json_schema");
        assert_eq!(
            b["response_format"]["json_schema"]["schema"]["required"],
            json!(["instruction", "tools", "resources"])
        );
    }
    assert!(bodies[0]["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("long chain of changes"));
    assert!(bodies[4].get("tools").is_some());
    double.shutdown();
}

//! `envsim env ...` end to end, on a small package written by the test.

use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

const CODE: &str = r#"
import time

class Counter:
    """Named counters with a global limit."""

    def __init__(self, init_config: dict):
        self.counters = {}
        self.limit = 10

    def get(self, name: str) -> dict:
        """Read a counter."""
        if name not in self.counters:
            return {"success": False, "error": f"no counter {name}"}
        return {"success": True, "data": self.counters[name]}

    def bump(self, name: str, by: int = 1) -> dict:
        """Add to a counter, creating it; stamps the time."""
        value = self.counters.get(name, {"value": 0})["value"] + by
        if value > self.limit:
            return {"success": False, "error": "over the limit"}
        self.counters[name] = {"value": value, "at": time.time()}
        return {"success": True, "message": f"{name} = {value}"}

    def spin(self) -> dict:
        """Never returns."""
        while True:
            pass
"#;

fn manifest() -> Value {
    let tool = |name: &str, props: Value, required: Value| {
        json!({"type": "function", "function": {"name": name, "description": name,
               "parameters": {"type": "object", "properties": props, "required": required}}})
    };
    json!({
        "name": "counter", "domain": "test", "description": "Counters.", "class_name": "Counter",
        "rules": ["A counter never exceeds the limit."],
        "tools": [
            tool("get", json!({"name": {"type": "string"}}), json!(["name"])),
            tool("bump", json!({"name": {"type": "string"}, "by": {"type": "integer"}}), json!(["name"])),
            tool("spin", json!({}), json!([])),
        ]
    })
}

fn write_package(root: &Path) {
    let dir = root.join("counter");
    std::fs::create_dir_all(dir.join("states")).unwrap();
    std::fs::write(dir.join("env.py"), CODE).unwrap();
    std::fs::write(dir.join("manifest.json"), manifest().to_string()).unwrap();
    std::fs::write(
        dir.join("states/00.json"),
        json!({"counters": {"a": {"value": 1, "at": 0}}, "limit": 10}).to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("states/01.json"),
        json!({"counters": {}, "limit": 3}).to_string(),
    )
    .unwrap();
    let tests = json!({"cases": [{"name": "bump then read", "state": 0, "steps": [
        {"tool": "bump", "args": {"name": "a", "by": 2}, "expect": {"success": true, "observation": {"success": true, "message": "a = 3"}, "state": {"/counters/a/value": 3}, "delta_count": 2}},
        {"tool": "get", "args": {"name": "zz"}, "expect": {"success": false}}
    ]}]});
    std::fs::write(dir.join("tests.json"), tests.to_string()).unwrap();
}

fn envsim(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_envsim"))
        .arg("env")
        .arg("--envs")
        .arg(root)
        .args(args)
        .output()
        .expect("runs")
}

fn json_out(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

#[test]
fn list_show_call_test() {
    let dir = tempfile::tempdir().unwrap();
    write_package(dir.path());
    let list = json_out(&envsim(dir.path(), &["list", "--json"]));
    assert_eq!(
        list,
        json!([{"name": "counter", "domain": "test", "description": "Counters.", "tools": ["get", "bump", "spin"], "states": 2, "tests": 1}])
    );

    let show = envsim(dir.path(), &["show", "counter"]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains("bump(name: string, by?: integer)"), "{text}");
    assert!(
        text.contains("A counter never exceeds the limit."),
        "{text}"
    );

    let call = json_out(&envsim(
        dir.path(),
        &[
            "call",
            "counter",
            "bump",
            "--args",
            r#"{"name": "b"}"#,
            "--json",
        ],
    ));
    assert_eq!(call["observation"], "{'success': True, 'message': 'b = 1'}");
    assert_eq!(call["delta_count"], 1);
    assert_eq!(
        call["delta"],
        json!([{"path": "counters.b", "type": "added", "before": null, "after": {"value": 1, "at": 1735689600.0}}])
    );
    assert_eq!(call["error"], Value::Null);
    assert_eq!(call["state_after"]["counters"]["b"]["value"], 1);
    // --no-states: the same answer and delta, no states (keys absent, text without them).
    let lean = json_out(&envsim(
        dir.path(),
        &[
            "call",
            "counter",
            "bump",
            "--args",
            r#"{"name": "b"}"#,
            "--json",
            "--no-states",
        ],
    ));
    assert_eq!(lean["delta"], call["delta"]);
    assert_eq!(lean["observation"], call["observation"]);
    assert!(lean.get("state_before").is_none() && lean.get("state_after").is_none());
    let text = envsim(
        dir.path(),
        &[
            "call",
            "counter",
            "bump",
            "--args",
            r#"{"name": "b"}"#,
            "--no-states",
        ],
    );
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("|Δ| = 1") && !text.contains("state after"),
        "{text}"
    );

    let over = json_out(&envsim(
        dir.path(),
        &[
            "call",
            "counter",
            "bump",
            "--state-index",
            "1",
            "--args",
            r#"{"name": "x", "by": 5}"#,
            "--json",
        ],
    ));
    assert_eq!(
        over["observation"],
        "{'success': False, 'error': 'over the limit'}"
    );
    assert_eq!(over["delta_count"], 0);

    // An invalid call is a usage error (exit 2); with --json its JSON still comes first.
    let usage_error = |out: Output| {
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).expect("JSON output")
    };
    let bad = usage_error(envsim(
        dir.path(),
        &[
            "call",
            "counter",
            "bump",
            "--args",
            r#"{"nme": "b"}"#,
            "--json",
        ],
    ));
    assert_eq!(bad["error"]["kind"], "invalid_call");
    let missing = usage_error(envsim(
        dir.path(),
        &["call", "counter", "nothing", "--json"],
    ));
    assert_eq!(missing["error"]["kind"], "invalid_call");
    let plain = envsim(dir.path(), &["call", "counter", "nothing"]);
    assert_eq!(plain.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&plain.stderr).trim(),
        "error: invalid call: unknown tool 'nothing'"
    );

    let tested = envsim(dir.path(), &["test"]);
    assert!(
        tested.status.success(),
        "{}",
        String::from_utf8_lossy(&tested.stdout)
    );
    assert!(String::from_utf8_lossy(&tested.stdout).contains("ok    counter (1 cases, 2 steps)"));

    let probe = envsim(dir.path(), &["probe", "counter"]);
    let text = String::from_utf8_lossy(&probe.stdout);
    assert!(
        text.contains("bump:") && text.contains("clock  /state/counters/a/at"),
        "{text}"
    );
}

#[test]
fn errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    write_package(dir.path());
    let out = envsim(dir.path(), &["show", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no environment \"nope\""));
    let out = envsim(dir.path(), &["call", "counter", "get", "--args", "[1]"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--args must be a JSON object"));
    let out = envsim(
        dir.path(),
        &["call", "counter", "get", "--state-index", "7"],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("counter has 2 states"));
    std::fs::write(dir.path().join("counter/states/02.json"), "[1, 2]").unwrap();
    let out = envsim(dir.path(), &["list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("02.json: a state must be a JSON object"));
}

#[test]
fn import_envscaler_writes_loadable_packages() {
    let dir = tempfile::tempdir().unwrap();
    let meta = json!({"env_3": {"env_class_name": "Counter", "env_class_code": CODE, "tools": manifest()["tools"], "environment_summary": "Counters."}});
    let meta_path = dir.path().join("meta.json");
    std::fs::write(&meta_path, meta.to_string()).unwrap();
    let tasks_path = dir.path().join("tasks.json");
    std::fs::write(&tasks_path, json!([{"env_id": "env_3", "task_id": "t1", "init_config": {"counters": {}}, "task": "count"}]).to_string()).unwrap();
    let out_dir = dir.path().join("imported");
    let out = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(["env", "import-envscaler"])
        .arg(&meta_path)
        .arg("--tasks")
        .arg(&tasks_path)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let call = json_out(&envsim(
        &out_dir,
        &[
            "call",
            "env_3",
            "bump",
            "--args",
            r#"{"name": "q"}"#,
            "--json",
        ],
    ));
    assert_eq!(call["observation"], "{'success': True, 'message': 'q = 1'}");

    // The folder is not empty now: refused without --force, and nothing changes.
    let more_tasks = dir.path().join("more.jsonl");
    std::fs::write(
        &more_tasks,
        [
            json!({"env_id": "env_3", "task_id": "t2", "start": {"counters": {"z": {"value": 2, "at": 0}}}}),
            json!({"env_id": "env_404", "task_id": "t3", "start": {"counters": {}}}),
        ]
        .iter()
        .map(|v| format!("{v}\n"))
        .collect::<String>(),
    )
    .unwrap();
    let again = |force: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_envsim"));
        cmd.args(["env", "import-envscaler"])
            .arg(&meta_path)
            .arg("--tasks")
            .arg(&more_tasks)
            .args(["--state-field", "start", "--out"])
            .arg(&out_dir);
        if force {
            cmd.arg("--force");
        }
        cmd.output().unwrap()
    };
    let refused = again(false);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr)
        .contains("is not empty: choose an empty folder, or --force"));
    // With --force the package's states are exactly the new ones; unknown env ids are counted.
    let forced = again(true);
    assert!(
        forced.status.success(),
        "{}",
        String::from_utf8_lossy(&forced.stderr)
    );
    let stderr = String::from_utf8_lossy(&forced.stderr);
    assert!(
        stderr.contains("warning: 1 task states name 1 env ids that are not in"),
        "{stderr}"
    );
    assert!(stderr.contains("env_404 (1)"), "{stderr}");
    assert!(
        stderr.contains("removed 1 state files of an earlier import"),
        "{stderr}"
    );
    let states: Vec<String> = std::fs::read_dir(out_dir.join("env_3/states"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(states, ["000_t2.json"]);
}

#[test]
fn schema_disagreements_warn_and_failures_fail() {
    let dir = tempfile::tempdir().unwrap();
    write_package(dir.path());
    let mut m = manifest();
    m["tools"][1]["function"]["parameters"]["properties"]["by"]["type"] = json!("string");
    m["tools"][0]["function"]["parameters"]["required"] = json!([]);
    std::fs::write(dir.path().join("counter/manifest.json"), m.to_string()).unwrap();
    // Schema and code disagree: warnings, and the scripted tests still pass, so exit 0...
    let out = envsim(dir.path(), &["test"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("warn  counter (1 cases, 2 steps)"),
        "{text}"
    );
    assert!(text.contains("warning: tool `bump`: parameter `by` is annotated \"int\" in the code but typed \"string\" in the schema"), "{text}");
    assert!(
        text.contains(
            "warning: tool `get`: parameter `name` is required in the code but optional in the schema"
        ),
        "{text}"
    );
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("1 of 1 environments have schema/code warnings (--strict makes them errors)"));
    // ...unless --strict.
    let strict = envsim(dir.path(), &["test", "--strict"]);
    assert_eq!(strict.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&strict.stdout).starts_with("FAIL  counter"));

    // A failing scripted step is an error.
    let tests = json!({"cases": [{"name": "wrong", "state": 0, "steps": [
        {"tool": "get", "args": {"name": "a"}, "expect": {"success": false}}
    ]}]});
    std::fs::write(dir.path().join("counter/tests.json"), tests.to_string()).unwrap();
    let out = envsim(dir.path(), &["test"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "error: counter / case \"wrong\" / step 0 (get): outcome is success under the boolean `success` key, expected failure"
        ),
        "{text}"
    );

    // Code that does not load is an error too, reported per environment.
    std::fs::write(dir.path().join("counter/env.py"), "class Counter(:\n").unwrap();
    let out = envsim(dir.path(), &["test"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("error: the code does not load: "), "{text}");
}

#[test]
fn sandbox_reports_every_layer() {
    let dir = tempfile::tempdir().unwrap();
    let facts = json_out(&envsim(dir.path(), &["sandbox", "--json"]));
    assert!(
        facts["python"].as_str().unwrap().starts_with("3."),
        "{facts}"
    );
    let sandbox = &facts["sandbox"];
    if cfg!(target_os = "linux") {
        assert_eq!(sandbox["no_new_privs"], true, "{facts}");
        for layer in [
            "seccomp",
            "landlock",
            "filesystem",
            "network",
            "user_namespace",
        ] {
            assert!(sandbox[layer].is_string(), "{layer} missing: {facts}");
        }
        if cfg!(target_arch = "x86_64") {
            assert!(
                sandbox["seccomp"].as_str().unwrap().starts_with("on"),
                "{facts}"
            );
        }
        assert_eq!(sandbox["memory_bytes"], 1u64 << 30, "{facts}");
        assert_eq!(sandbox["core_bytes"], 0, "{facts}");
    }
    let text = envsim(dir.path(), &["sandbox"]);
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("seccomp"), "{text}");
    assert!(text.contains("docs/executor.md"), "{text}");
}

const TICKETS: &str = r#"
import uuid

class Tickets:
    def __init__(self, init_config: dict):
        self.tickets = {}
        self.log = []

    def open_ticket(self, title: str) -> dict:
        """Open a ticket under a generated id."""
        tid = uuid.uuid4().hex[:8]
        self.tickets[tid] = title
        return {"success": True, "id": tid}

    def count(self) -> dict:
        """How many tickets are open."""
        return {"success": True, "data": len(self.tickets)}
"#;

#[test]
fn chained_calls_draw_distinct_seeds_and_start_from_the_constructed_state() {
    let dir = tempfile::tempdir().unwrap();
    // The state file lacks `log`, which the constructor creates.
    write_tickets(dir.path());
    let pkg = dir.path().join("tickets");

    // A read-only call changes nothing: the constructor's `log` is part of the state before.
    let count = json_out(&envsim(dir.path(), &["call", "tickets", "count", "--json"]));
    assert_eq!(
        count["state_before"],
        json!({"tickets": {}, "log": []}),
        "{count}"
    );
    assert_eq!(count["delta_count"], 0, "{count}");

    // Two creations in a chain get two ids (each step its own seed)...
    let mut state_file = pkg.join("states/00_first.json");
    let mut ids = Vec::new();
    let mut seeds = Vec::new();
    for step in 0..2 {
        let out = json_out(&envsim(
            dir.path(),
            &[
                "call",
                "tickets",
                "open_ticket",
                "--state",
                state_file.to_str().unwrap(),
                "--args",
                r#"{"title": "same title"}"#,
                "--json",
            ],
        ));
        ids.push(out["observation_json"]["id"].as_str().unwrap().to_owned());
        seeds.push(out["seed"].as_u64().unwrap());
        state_file = dir.path().join(format!("after_{step}.json"));
        std::fs::write(&state_file, out["state_after"].to_string()).unwrap();
    }
    assert_ne!(ids[0], ids[1]);
    assert_ne!(seeds[0], seeds[1]);
    let last: Value = serde_json::from_str(&std::fs::read_to_string(&state_file).unwrap()).unwrap();
    assert_eq!(last["tickets"].as_object().unwrap().len(), 2, "{last}");

    // ...while the same call on the same state is reproducible, and --seed still decides.
    let again = json_out(&envsim(
        dir.path(),
        &[
            "call",
            "tickets",
            "open_ticket",
            "--args",
            r#"{"title": "same title"}"#,
            "--json",
        ],
    ));
    assert_eq!(again["observation_json"]["id"], ids[0].as_str());
    assert_eq!(again["seed"], seeds[0]);
    let fixed = json_out(&envsim(
        dir.path(),
        &[
            "call",
            "tickets",
            "open_ticket",
            "--args",
            r#"{"title": "same title"}"#,
            "--seed",
            "7",
            "--json",
        ],
    ));
    assert_eq!(fixed["seed"], 7);

    // Probing: no scripted steps is nothing to check, said as such (not "all deterministic")...
    let nothing = envsim(dir.path(), &["probe", "tickets"]);
    assert!(nothing.status.success());
    let text = String::from_utf8_lossy(&nothing.stdout);
    assert!(
        text.contains("tickets: nothing to check: the package has no scripted steps"),
        "{text}"
    );
    assert!(text.contains("--walk 20"), "{text}");
    // ...and a seeded walk finds the generated id.
    let walked = envsim(dir.path(), &["probe", "tickets", "--walk", "6"]);
    assert!(walked.status.success());
    let text = String::from_utf8_lossy(&walked.stdout);
    assert!(text.contains("open_ticket:\n  seed   "), "{text}");
    assert!(text.contains("(6 walked calls probed)"), "{text}");
}

#[test]
fn the_reply_cap_is_configurable() {
    let dir = tempfile::tempdir().unwrap();
    write_package(dir.path());
    // A 2 MB state: every reply carries the state after.
    let big = dir.path().join("big.json");
    let padding = "x".repeat(2 << 20);
    std::fs::write(
        &big,
        json!({"counters": {"a": {"value": 1, "at": 0, "pad": padding}}, "limit": 10}).to_string(),
    )
    .unwrap();
    let call = |cap: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_envsim"));
        cmd.args(["env", "--envs"])
            .arg(dir.path())
            .args(["call", "counter", "get", "--state"])
            .arg(&big)
            .args(["--args", r#"{"name": "a"}"#, "--json"]);
        if let Some(cap) = cap {
            cmd.env("ENVSIM_REPLY_CAP_MB", cap);
        }
        cmd.output().unwrap()
    };
    let fits = json_out(&call(None));
    assert_eq!(fits["error"], Value::Null, "{}", fits["error"]);
    let capped = json_out(&call(Some("1")));
    assert_eq!(capped["error"]["kind"], "output_too_large");
    assert!(
        capped["error"]["message"]
            .as_str()
            .unwrap()
            .contains("over the 1048576-byte cap (ENVSIM_REPLY_CAP_MB raises it)"),
        "{}",
        capped["error"]
    );
    let bad = call(Some("lots"));
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr)
        .contains("ENVSIM_REPLY_CAP_MB=\"lots\": expected a whole number of MiB from 1 to 65536"));
}

fn write_tickets(root: &Path) {
    let pkg = root.join("tickets");
    std::fs::create_dir_all(pkg.join("states")).unwrap();
    std::fs::write(pkg.join("env.py"), TICKETS).unwrap();
    let tool = |name: &str, props: Value, required: Value| {
        json!({"type": "function", "function": {"name": name, "description": name,
               "parameters": {"type": "object", "properties": props, "required": required}}})
    };
    let manifest = json!({"name": "tickets", "domain": "test", "description": "Tickets.",
    "class_name": "Tickets", "tools": [
        tool("open_ticket", json!({"title": {"type": "string"}}), json!(["title"])),
        tool("count", json!({}), json!([])),
    ]});
    std::fs::write(pkg.join("manifest.json"), manifest.to_string()).unwrap();
    std::fs::write(pkg.join("states/00_first.json"), r#"{"tickets": {}}"#).unwrap();
}

/// The steps of a replay output without what depends on the recording it was compared with.
fn replayed_steps(line: &str) -> Vec<Value> {
    let run: Value = serde_json::from_str(line).unwrap();
    run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let mut s = s.clone();
            let o = s.as_object_mut().unwrap();
            o.remove("recorded_observation");
            o.remove("comparison");
            s
        })
        .collect()
}

#[test]
fn replay_reexecutes_recorded_calls_and_compares_each_observation() {
    let dir = tempfile::tempdir().unwrap();
    write_tickets(dir.path());
    let call = |id: &str, name: &str, args: &str| {
        json!({"role": "assistant", "tool_calls": [{"id": id, "type": "function",
               "function": {"name": name, "arguments": args}}]})
    };
    let answer =
        |id: &str, content: &str| json!({"role": "tool", "tool_call_id": id, "content": content});
    let transcript = json!({"task_id": "chat-7", "messages": [
        {"role": "user", "content": "open a ticket and count"},
        call("a", "open_ticket", r#"{"title": "printer"}"#),
        answer("a", r#"{"success": true, "id": "deadbeef"}"#),
        call("b", "count", "{}"),
        answer("b", "{'success': True, 'data': 1}"),
        call("c", "count", "{}"),
        answer("c", "{'success': True, 'data': 5}"),
    ]});
    let file = dir.path().join("chat.jsonl");
    std::fs::write(&file, format!("{transcript}\n")).unwrap();
    let out_file = dir.path().join("replayed.jsonl");
    let args = |extra: &[&'static str]| {
        let mut a: Vec<&str> = vec![
            "replay",
            file.to_str().unwrap(),
            "--env",
            "tickets",
            "--state",
            "first",
            "--out",
            out_file.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        a
    };
    let out = envsim(dir.path(), &args(&[]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("line 1 task chat-7 on tickets from 00_first.json: 3 steps: 1 exact, 1 normalised, 1 differ, 0 not recorded"),
        "{stderr}"
    );
    assert!(
        stderr.contains("step 3 count({}): the observation differs: /data: recorded 5, replayed 1"),
        "{stderr}"
    );
    assert!(
        stderr.contains("1 of 3 replayed steps differ from the recording"),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&out_file).unwrap();
    let run: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(run["initial_state"], json!({"tickets": {}, "log": []}));
    let steps = run["steps"].as_array().unwrap();
    let comparisons: Vec<&str> = steps
        .iter()
        .map(|s| s["comparison"]["result"].as_str().unwrap())
        .collect();
    assert_eq!(comparisons, ["normalised", "exact", "differs"]);
    assert_eq!(
        steps[0]["comparison"]["why"],
        "differs only where the output depends on the clock or the seed: /id"
    );
    let id = steps[0]["observation_json"]["id"].as_str().unwrap();
    assert_eq!(
        steps[0]["state_after"],
        json!({"tickets": {id: "printer"}, "log": []})
    );
    assert_eq!(steps[0]["delta_count"], 1);
    assert!(
        steps[1].get("state_after").is_none(),
        "unchanged: not repeated"
    );
    assert_ne!(steps[1]["seed"], steps[2]["seed"]);
    assert_eq!(
        run["summary"],
        json!({"exact": 1, "normalised": 1, "differs": 1, "not_recorded": 0})
    );

    // The differences are data when asked: exit 0, same file.
    let allowed = envsim(dir.path(), &args(&["--allow-differences"]));
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), text);

    // A replay's own output replays exactly: same seeds, clocks, observations and states.
    let again = envsim(dir.path(), &["replay", out_file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert!(
        stderr.contains("3 steps: 3 exact, 0 normalised, 0 differ"),
        "{stderr}"
    );
    let second = String::from_utf8(again.stdout).unwrap();
    assert_eq!(
        replayed_steps(&second),
        replayed_steps(text.lines().next().unwrap())
    );

    // A reference run record without states starts from the package state named after its
    // task; the environment is the record's own.
    let record = json!({"task_info": {"env_id": "tickets", "task_id": "first"}, "trajectory": [
        {"step": 0, "observation": "count them"},
        {"step": 1, "action": {"name": "count", "arguments": "{}"},
         "observation": {"type": "tool", "content": "{'success': True, 'data': 0}"}}
    ]});
    let runs = dir.path().join("runs.jsonl");
    std::fs::write(&runs, format!("{record}\n")).unwrap();
    let out = envsim(dir.path(), &["replay", runs.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("from 00_first.json: 1 steps: 1 exact"),
        "{stderr}"
    );

    // Located errors before anything runs.
    let bare = dir.path().join("bare.json");
    std::fs::write(&bare, json!([call("a", "count", "{}")]).to_string()).unwrap();
    let out = envsim(dir.path(), &["replay", bare.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the record names no environment"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = envsim(
        dir.path(),
        &["replay", bare.to_str().unwrap(), "--env", "tickets"],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the record holds no initial state"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = envsim(
        dir.path(),
        &[
            "replay",
            bare.to_str().unwrap(),
            "--env",
            "tickets",
            "--state",
            "9",
        ],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--state \"9\": not an index of tickets's 1 states"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn import_bfcl_refuses_a_non_empty_out_and_names_a_missing_category() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::write(out_dir.join("keep.txt"), "mine").unwrap();
    let source = dir.path().join("bfcl_eval");
    std::fs::create_dir_all(source.join("data/possible_answer")).unwrap();
    let run = |force: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_envsim"));
        cmd.args(["env", "import-bfcl", "--source"])
            .arg(&source)
            .arg("--out")
            .arg(&out_dir);
        if force {
            cmd.arg("--force");
        }
        cmd.output().unwrap()
    };
    let refused = run(false);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr).trim(),
        format!(
            "error: {} is not empty: choose an empty folder, or --force to replace the packages it shares with this import (each package folder is replaced whole)",
            out_dir.display()
        )
    );
    let missing = run(true);
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr).trim(),
        format!(
            "error: {}: category \"base\": no data/BFCL_v4_multi_turn_base.json with data/possible_answer/BFCL_v4_multi_turn_base.json; categories found: none",
            source.display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(out_dir.join("keep.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn an_exception_in_the_environment_is_data_not_a_cli_failure() {
    let dir = tempfile::tempdir().unwrap();
    let pkg = dir.path().join("raiser");
    std::fs::create_dir_all(pkg.join("states")).unwrap();
    std::fs::write(
        pkg.join("env.py"),
        "class Raiser:\n    def __init__(self, init_config):\n        self.n = 0\n\n    def boom(self) -> dict:\n        \"\"\"Count, then fail.\"\"\"\n        self.n += 1\n        raise KeyError('gone')\n",
    )
    .unwrap();
    let manifest = json!({"name": "raiser", "domain": "test", "description": "Raises.",
        "class_name": "Raiser", "tools": [{"type": "function", "function": {"name": "boom",
        "description": "boom", "parameters": {"type": "object", "properties": {}, "required": []}}}]});
    std::fs::write(pkg.join("manifest.json"), manifest.to_string()).unwrap();
    std::fs::write(pkg.join("states/00.json"), r#"{"n": 0}"#).unwrap();
    let out = envsim(dir.path(), &["call", "raiser", "boom"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with(
            "clock: 2025-01-01T00:00:00Z (the default: the state records no time)\nexception: KeyError: 'gone'\n|Δ| = 1\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("\"n\": 1"),
        "the change before the exception stays: {text}"
    );
    let json = json_out(&envsim(dir.path(), &["call", "raiser", "boom", "--json"]));
    assert_eq!(json["error"]["kind"], "exception");
    assert_eq!(json["state_after"], json!({"n": 1}));
    assert_eq!(json["outcome"], "failure");
}

#[test]
fn arguments_are_checked_against_the_tool_schema() {
    let dir = tempfile::tempdir().unwrap();
    write_package(dir.path());
    let args = ["call", "counter", "bump", "--args", r#"{"name": 7}"#];
    // Reported, and the call runs as the environment would receive it.
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let out = json_out(&envsim(dir.path(), &with_json));
    assert_eq!(
        out["schema_warnings"],
        json!(["name: 7 is not of type \"string\""])
    );
    assert_eq!(out["error"], Value::Null, "{out}");
    let text = envsim(dir.path(), &args);
    assert!(text.status.success());
    assert_eq!(
        String::from_utf8_lossy(&text.stderr).trim(),
        "schema: bump(): name: 7 is not of type \"string\""
    );
    // --strict-args refuses it: a usage error, nothing executed.
    let mut strict = args.to_vec();
    strict.push("--strict-args");
    let refused = envsim(dir.path(), &strict);
    assert_eq!(refused.status.code(), Some(2));
    assert!(refused.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr).trim(),
        "error: invalid call: bump() arguments do not match its schema: name: 7 is not of type \"string\" (--strict-args)"
    );
    // Fitting arguments pass silently.
    let fine = json_out(&envsim(
        dir.path(),
        &[
            "call",
            "counter",
            "bump",
            "--args",
            r#"{"name": "a"}"#,
            "--json",
            "--strict-args",
        ],
    ));
    assert_eq!(fine["schema_warnings"], json!([]));
}

/// The counter package plus a third state that says what time it is.
fn write_package_with_a_clocked_state(root: &Path) {
    write_package(root);
    std::fs::write(
        root.join("counter/states/02.json"),
        json!({"counters": {}, "limit": 10, "settings": {"now": "2024-07-01T08:30:00"}})
            .to_string(),
    )
    .unwrap();
}

#[test]
fn a_call_runs_at_its_states_own_clock_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    write_package_with_a_clocked_state(dir.path());
    let bump = |extra: &[&str]| {
        let mut args = vec![
            "call",
            "counter",
            "bump",
            "--state-index",
            "2",
            "--args",
            r#"{"name": "b"}"#,
            "--json",
        ];
        args.extend_from_slice(extra);
        json_out(&envsim(dir.path(), &args))
    };
    // time.time() reads the state's own now.
    let out = bump(&[]);
    assert_eq!(out["clock"], json!(1_719_822_600.0));
    assert_eq!(out["clock_time"], "2024-07-01T08:30:00Z");
    assert_eq!(
        out["clock_origin"],
        "2024-07-01T08:30:00Z (the state's /settings/now 2024-07-01T08:30:00)"
    );
    assert_eq!(
        out["state_after"]["counters"]["b"]["at"],
        json!(1_719_822_600.0)
    );
    // --clock as a date-time or as seconds.
    let out = bump(&["--clock", "2030-01-01T00:00:00Z"]);
    assert_eq!(
        out["state_after"]["counters"]["b"]["at"],
        json!(1_893_456_000.0)
    );
    assert_eq!(out["clock_origin"], "2030-01-01T00:00:00Z (--clock)");
    let out = bump(&["--clock", "12.5"]);
    assert_eq!(out["state_after"]["counters"]["b"]["at"], json!(12.5));
    // A state without any time runs at the default, and says so.
    let out = envsim(
        dir.path(),
        &["call", "counter", "get", "--args", r#"{"name": "a"}"#],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("clock: 2025-01-01T00:00:00Z (the default: the state records no time)"),
        "{text}"
    );
    // `env show` lists each state's clock.
    let out = envsim(dir.path(), &["show", "counter"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[2] 02.json (")
            && text.contains(
                "clock 2024-07-01T08:30:00Z (the state's /settings/now 2024-07-01T08:30:00)"
            ),
        "{text}"
    );
    // A clock that is neither: a usage error.
    let out = envsim(
        dir.path(),
        &["call", "counter", "get", "--clock", "tomorrow"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "\"tomorrow\" is not a date-time like 2025-06-10T09:00:00Z nor seconds since 1970"
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_replay_without_recorded_clocks_starts_at_the_states_clock_and_steps_evenly() {
    let dir = tempfile::tempdir().unwrap();
    write_package_with_a_clocked_state(dir.path());
    let call = |id: &str, args: &str| {
        json!({"role": "assistant", "tool_calls": [{"id": id, "type": "function",
               "function": {"name": "bump", "arguments": args}}]})
    };
    let transcript = json!({"task_id": "t", "messages": [
        {"role": "user", "content": "bump twice"},
        call("a", r#"{"name": "x"}"#),
        call("b", r#"{"name": "y"}"#),
    ]});
    let file = dir.path().join("chat.jsonl");
    std::fs::write(&file, format!("{transcript}\n")).unwrap();
    let replay = |extra: &[&str]| {
        let out_file = dir.path().join("replayed.jsonl");
        let mut args = vec![
            "replay",
            file.to_str().unwrap(),
            "--env",
            "counter",
            "--state",
            "02",
            "--allow-differences",
            "--out",
            out_file.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = envsim(dir.path(), &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&out_file).unwrap();
        let run: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        run["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["clock"].as_f64().unwrap())
            .collect::<Vec<f64>>()
    };
    let start = 1_719_822_600.0;
    assert_eq!(replay(&[]), [start, start + 300.0]);
    assert_eq!(replay(&["--clock-step", "60"]), [start, start + 60.0]);
    assert_eq!(
        replay(&["--clock", "2030-01-01T00:00:00Z", "--clock-step", "1"]),
        [1_893_456_000.0, 1_893_456_001.0]
    );
}

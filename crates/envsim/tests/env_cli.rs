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

    let bad = json_out(&envsim(
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
    let missing = json_out(&envsim(
        dir.path(),
        &["call", "counter", "nothing", "--json"],
    ));
    assert_eq!(missing["error"]["kind"], "invalid_call");

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
}

#[test]
fn manifest_types_are_checked_against_annotations() {
    let dir = tempfile::tempdir().unwrap();
    write_package(dir.path());
    let mut m = manifest();
    m["tools"][1]["function"]["parameters"]["properties"]["by"]["type"] = json!("string");
    m["tools"][0]["function"]["parameters"]["required"] = json!([]);
    std::fs::write(dir.path().join("counter/manifest.json"), m.to_string()).unwrap();
    let out = envsim(dir.path(), &["test"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("tool `bump`: parameter `by` is annotated \"int\" in the code but typed \"string\" in the schema"), "{text}");
    assert!(
        text.contains(
            "tool `get`: parameter `name` is required in the code but optional in the schema"
        ),
        "{text}"
    );
}

//! A small environment package, `tally` (counters with a limit), as a writer model would answer
//! with it: every file under a line `=== FILE: path ===`, three states, scripted tests and
//! tasks. It passes every check of `envsim env check`; tests of the writing loop and of
//! `envsim env synth` use it as the good writer's answer.

use serde_json::{json, Map, Value};

/// The package's code (class convention).
pub const CODE: &str = r#"
class Tally:
    def __init__(self, init_config: dict):
        self.counters = {}
        self.limit = 0

    def get_counter(self, counter_id: str) -> dict:
        if counter_id not in self.counters:
            return {"success": False, "error": f"no counter {counter_id}"}
        return {"success": True, "data": dict(self.counters[counter_id])}

    def add_to_counter(self, counter_id: str, amount: int) -> dict:
        if counter_id not in self.counters:
            return {"success": False, "error": f"no counter {counter_id}"}
        if not isinstance(amount, int) or amount <= 0:
            return {"success": False, "error": "amount must be a positive integer"}
        counter = self.counters[counter_id]
        if counter["value"] + amount > self.limit:
            return {"success": False, "error": f"over the limit of {self.limit}"}
        counter["value"] += amount
        return {"success": True, "message": f"{counter_id} is now {counter['value']}"}

    def reset_counter(self, counter_id: str) -> dict:
        if counter_id not in self.counters:
            return {"success": False, "error": f"no counter {counter_id}"}
        self.counters[counter_id]["value"] = 0
        return {"success": True, "message": f"{counter_id} reset"}
"#;

/// Its manifest.
pub const MANIFEST: &str = r#"{
  "name": "tally",
  "domain": "test",
  "description": "Named counters that only grow, up to a shared limit, and can be reset.",
  "class_name": "Tally",
  "rules": ["Amounts must be positive.", "A counter may not exceed the limit.", "Unknown counters are refused."],
  "tools": [
    {"type": "function", "function": {"name": "get_counter", "description": "Read a counter.",
      "parameters": {"type": "object", "properties": {"counter_id": {"type": "string", "description": "Counter id, e.g. C1"}}, "required": ["counter_id"]}}},
    {"type": "function", "function": {"name": "add_to_counter", "description": "Add a positive amount to a counter, within the limit.",
      "parameters": {"type": "object", "properties": {"counter_id": {"type": "string", "description": "Counter id"}, "amount": {"type": "integer", "description": "How much to add, 1 to 5"}}, "required": ["counter_id", "amount"]}}},
    {"type": "function", "function": {"name": "reset_counter", "description": "Set a counter's value back to 0.",
      "parameters": {"type": "object", "properties": {"counter_id": {"type": "string", "description": "Counter id"}}, "required": ["counter_id"]}}}
  ]
}"#;

/// Its scripted tests: a success and a refusal per tool.
pub const TESTS: &str = r#"{"cases": [
  {"name": "read, add, refuse, reset", "state": 0, "steps": [
    {"tool": "get_counter", "args": {"counter_id": "C1"}, "expect": {"success": true}},
    {"tool": "get_counter", "args": {"counter_id": "C9"}, "expect": {"success": false}},
    {"tool": "add_to_counter", "args": {"counter_id": "C1", "amount": 2}, "expect": {"success": true, "state": {"/counters/C1/value": 3}}},
    {"tool": "add_to_counter", "args": {"counter_id": "C1", "amount": -1}, "expect": {"success": false}},
    {"tool": "reset_counter", "args": {"counter_id": "C1"}, "expect": {"success": true, "state": {"/counters/C1/value": 0}}},
    {"tool": "reset_counter", "args": {"counter_id": "C9"}, "expect": {"success": false}}
  ]}
]}"#;

/// Its tasks for agents.
pub const TASKS: &str = r#"{"id": "t1", "instruction": "How much is on counter C1?", "state": "00_small", "tools": ["get_counter"]}
{"id": "t2", "instruction": "Add two to C1.", "state": "00_small", "tools": ["add_to_counter"]}
{"id": "t3", "instruction": "Reset C2.", "state": "01_medium", "tools": ["reset_counter"]}
{"id": "t4", "instruction": "Add 3 to C3, then read it.", "state": "02_large", "tools": ["add_to_counter", "get_counter"]}
{"id": "t5", "instruction": "Reset C1 and add one.", "state": "01_medium", "tools": ["reset_counter", "add_to_counter"]}
"#;

/// A state of `n` counters, `C1` … `Cn` with values 1 … n, limit 100.
pub fn state(n: usize) -> String {
    let counters: Map<String, Value> = (1..=n)
        .map(|i| {
            let id = format!("C{i}");
            let counter = json!({"counter_id": id, "label": format!("counter {i}"), "value": i});
            (id, counter)
        })
        .collect();
    json!({"counters": counters, "limit": 100}).to_string()
}

/// The package as a writer's answer, with `code` as its env.py and `tests` as its tests.json
/// (none: no tests file), files in path order, ending with `=== END ===`.
pub fn answer(code: &str, tests: Option<&str>) -> String {
    let mut files: Vec<(String, String)> = vec![
        ("env.py".into(), code.into()),
        ("manifest.json".into(), MANIFEST.into()),
        ("tasks.jsonl".into(), TASKS.into()),
    ];
    for (name, n) in [("00_small", 1), ("01_medium", 3), ("02_large", 8)] {
        files.push((format!("states/{name}.json"), state(n)));
    }
    if let Some(tests) = tests {
        files.push(("tests.json".into(), tests.into()));
    }
    files.sort();
    let mut out = String::from("Here it is.\n");
    for (path, content) in files {
        out.push_str(&format!("=== FILE: {path} ===\n{}\n", content.trim_end()));
    }
    out.push_str("=== END ===\n");
    out
}

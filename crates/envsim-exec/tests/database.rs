//! The database convention: tool functions `tool(data, **kwargs)` over one JSON database,
//! through the executor and as environment packages.

use envsim_exec::package::{Convention, EnvPackage};
use envsim_exec::{Call, EnvCode, ExecError, Executor, Limits};
use serde_json::{json, Map, Value};
use std::time::Duration;

const CODE: &str = r#"
import json
from json import dumps

LIMIT = 3

def add_user(data, user_id: str, name: str = "anon"):
    """Adds a user."""
    if user_id in data["users"]:
        return "Error: user %s exists" % user_id
    data["users"][user_id] = {"name": name, "orders": []}
    return "Added user %s" % user_id

def rename(data, user_id: str, name: str):
    data["users"][user_id]["name"] = name
    return {"user_id": user_id, "name": name}

def archive(data, table: str):
    data["archive"] = {table: data.pop(table)}
    return "Archived %s" % table

def half_done(data, user_id: str):
    data["users"][user_id]["name"] = "changed"
    data["audit"] = ["renamed " + user_id]
    raise KeyError("the second half failed")

def count_named(data, prefix: str):
    n = 0
    for user_id, user in data["users"].items():
        if user["name"].startswith(prefix):
            n += 1
    return "%d users" % n

def get_user(data, user_id: str):
    user = data["users"].get(user_id)
    if user is None:
        return "Error: no user %s" % user_id
    return json.dumps(user)

def _helper(data):
    return len(data)
"#;

fn env() -> EnvCode {
    EnvCode::database(CODE)
}

async fn executor() -> Executor {
    let limits = Limits {
        wall: Duration::from_secs(5),
        ..Limits::default()
    };
    Executor::new(1, limits)
        .await
        .expect("python3 is available")
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn state() -> Value {
    json!({"users": {"U1": {"name": "Ada", "orders": []}, "U2": {"name": "Bo", "orders": [1]}},
           "orders": {"1": {"user": "U2"}}})
}

async fn call(
    ex: &Executor,
    tool: &str,
    a: Value,
    state: &Value,
) -> Result<envsim_exec::CallOutcome, ExecError> {
    let (env, a) = (env(), args(a));
    ex.call(&Call::new(&env, tool, &a, state)).await
}

#[tokio::test]
async fn a_call_mutates_the_database_in_place_and_returns_its_string() {
    let ex = executor().await;
    let before = state();
    let out = call(
        &ex,
        "add_user",
        json!({"user_id": "U3", "name": "Cy"}),
        &before,
    )
    .await
    .unwrap();
    assert_eq!(out.observation, "Added user U3");
    assert_eq!(out.observation_json, json!("Added user U3"));
    let mut expected = state();
    expected["users"]["U3"] = json!({"name": "Cy", "orders": []});
    assert_eq!(out.state_after, expected);
    // A rule violation is an ordinary string and changes nothing.
    let out = call(&ex, "add_user", json!({"user_id": "U1"}), &before)
        .await
        .unwrap();
    assert_eq!(out.observation, "Error: user U1 exists");
    assert_eq!(out.state_after, before);
    // A dict return value is the observation as JSON and as str().
    let out = call(
        &ex,
        "rename",
        json!({"user_id": "U1", "name": "Al"}),
        &before,
    )
    .await
    .unwrap();
    assert_eq!(out.observation, "{'user_id': 'U1', 'name': 'Al'}");
    assert_eq!(out.state_after["users"]["U1"]["name"], "Al");
}

#[tokio::test]
async fn top_level_keys_added_and_removed_are_part_of_the_state_after() {
    let ex = executor().await;
    let out = call(&ex, "archive", json!({"table": "orders"}), &state())
        .await
        .unwrap();
    assert_eq!(out.observation, "Archived orders");
    assert_eq!(
        out.state_after,
        json!({"users": state()["users"], "archive": {"orders": {"1": {"user": "U2"}}}})
    );
    assert_eq!(out.state_after.get("orders"), None);
}

#[tokio::test]
async fn a_chain_on_the_live_database_gives_what_fresh_calls_give() {
    let ex = executor().await;
    // Step by step through one worker (its live database is reused when the state sent is the
    // one it left), and each step again on a fresh worker pool from the same state.
    let steps = [
        ("add_user", json!({"user_id": "U3"})),
        ("rename", json!({"user_id": "U3", "name": "Di"})),
        ("archive", json!({"table": "orders"})),
        ("count_named", json!({"prefix": "D"})),
        ("add_user", json!({"user_id": "U3"})),
    ];
    let mut state = state();
    let mut observations = Vec::new();
    for (tool, a) in &steps {
        let chained = call(&ex, tool, a.clone(), &state).await.unwrap();
        let fresh = call(&executor().await, tool, a.clone(), &state)
            .await
            .unwrap();
        // The same outcome but for the time measured.
        let fresh = envsim_exec::CallOutcome {
            tool_time: chained.tool_time,
            ..fresh
        };
        assert_eq!(chained, fresh, "{tool}");
        observations.push(chained.observation.clone());
        state = chained.state_after;
    }
    assert_eq!(
        observations,
        [
            "Added user U3",
            "{'user_id': 'U3', 'name': 'Di'}",
            "Archived orders",
            "1 users",
            "Error: user U3 exists"
        ]
    );
}

#[tokio::test]
async fn the_next_step_of_a_chain_reuses_the_decoded_database() {
    // The function remembers the dict it was given last (in a global named as envsim's own
    // adapters name theirs, which calls leave as they are; any other global is put back before
    // each call): "same" means the worker passed the very dict the previous call left, without
    // decoding the state again.
    let code = "_envsim_last = []\n\ndef touch(data, n: int):\n    same = bool(_envsim_last) and _envsim_last[0] is data\n    _envsim_last[:] = [data]\n    data['n'] = data.get('n', 0) + n\n    return 'same' if same else 'new'\n";
    let env = EnvCode::database(code);
    let ex = executor().await;
    let one = args(json!({"n": 1}));
    let mut state = json!({"n": 0, "name": "é"});
    let mut seen = Vec::new();
    for _ in 0..3 {
        let out = ex
            .call(&Call::new(&env, "touch", &one, &state))
            .await
            .unwrap();
        seen.push(out.observation);
        state = out.state_after;
    }
    assert_eq!(state, json!({"n": 3, "name": "é"}));
    // Another state than the one the worker left: decoded afresh.
    let other = json!({"n": 10});
    let out = ex
        .call(&Call::new(&env, "touch", &one, &other))
        .await
        .unwrap();
    seen.push(out.observation);
    // A traced call never continues a live database.
    let mut traced = Call::new(&env, "touch", &one, &out.state_after);
    traced.trace = true;
    seen.push(ex.call(&traced).await.unwrap().observation);
    assert_eq!(seen, ["new", "same", "same", "new", "new"]);
}

#[tokio::test]
async fn an_exception_after_a_change_keeps_the_change() {
    let ex = executor().await;
    let error = call(&ex, "half_done", json!({"user_id": "U1"}), &state())
        .await
        .expect_err("it raises");
    assert_eq!(error.kind(), "exception");
    assert_eq!(
        error.to_string(),
        "exception: KeyError: 'the second half failed'"
    );
    let mut expected = state();
    expected["users"]["U1"]["name"] = json!("changed");
    expected["audit"] = json!(["renamed U1"]);
    assert_eq!(error.state_after(), Some(&expected));
    // An exception before any change reports the database as it was.
    let error = call(
        &ex,
        "rename",
        json!({"user_id": "U9", "name": "x"}),
        &state(),
    )
    .await
    .expect_err("no such user");
    assert_eq!(error.to_string(), "exception: KeyError: 'U9'");
    assert_eq!(error.state_after(), Some(&state()));
    // The next call on the original state does not see the changes.
    let out = call(&ex, "get_user", json!({"user_id": "U1"}), &state())
        .await
        .unwrap();
    assert_eq!(out.observation, r#"{"name": "Ada", "orders": []}"#);
}

#[tokio::test]
async fn tracing_records_the_paths_read_under_the_database() {
    let ex = executor().await;
    let (env, a, state) = (env(), args(json!({"user_id": "U2"})), state());
    let mut traced = Call::new(&env, "get_user", &a, &state);
    traced.trace = true;
    let out = ex.call(&traced).await.unwrap();
    let reads: Vec<String> = out.reads.unwrap().iter().map(|p| p.to_string()).collect();
    // json.dumps of the record reads it whole, its list included.
    assert_eq!(reads, ["/users", "/users/U2", "/users/U2/orders"]);
    assert_eq!(out.observation, r#"{"name": "Bo", "orders": [1]}"#);
    let a = args(json!({"prefix": "A"}));
    let mut traced = Call::new(&env, "count_named", &a, &state);
    traced.trace = true;
    let out = ex.call(&traced).await.unwrap();
    let reads: Vec<String> = out.reads.unwrap().iter().map(|p| p.to_string()).collect();
    assert_eq!(reads, ["/users", "/users/U1/name", "/users/U2/name"]);
    assert_eq!(out.observation, "1 users");
    // A traced call that changes the database returns plain JSON.
    let a = args(json!({"user_id": "U4", "name": "Ed"}));
    let mut traced = Call::new(&env, "add_user", &a, &state);
    traced.trace = true;
    let out = ex.call(&traced).await.unwrap();
    assert_eq!(
        out.state_after["users"]["U4"],
        json!({"name": "Ed", "orders": []})
    );
    let reads: Vec<String> = out.reads.unwrap().iter().map(|p| p.to_string()).collect();
    assert_eq!(reads, ["/users", "/users/U4"]);
}

#[tokio::test]
async fn describe_lists_the_functions_without_the_database_parameter() {
    let ex = executor().await;
    let described = ex.describe(&env()).await.unwrap();
    let names: Vec<&str> = described
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    // Sorted; `_helper` is private, `dumps` imported, `LIMIT` no function.
    assert_eq!(
        names,
        [
            "add_user",
            "archive",
            "count_named",
            "get_user",
            "half_done",
            "rename"
        ]
    );
    assert_eq!(
        described[0],
        json!({"name": "add_user", "doc": "Adds a user.", "params": [
            {"name": "user_id", "required": true, "annotation": "str"},
            {"name": "name", "required": false, "annotation": "str"}]})
    );
}

#[tokio::test]
async fn invalid_calls_are_refused_before_the_function_runs() {
    let ex = executor().await;
    let cases = [
        (
            "add_user",
            json!({"id": "U3"}),
            "add_user(): missing a required argument: 'user_id'",
        ),
        (
            "add_user",
            json!({"user_id": "U3", "data": {}}),
            "add_user(): multiple values for argument 'data'",
        ),
        (
            "add_user",
            json!({"user_id": "U3", "extra": 1}),
            "add_user(): got an unexpected keyword argument 'extra'",
        ),
        ("dumps", json!({}), "unknown tool 'dumps'"),
        ("_helper", json!({}), "unknown tool '_helper'"),
        ("LIMIT", json!({}), "unknown tool 'LIMIT'"),
    ];
    for (tool, a, message) in cases {
        let error = call(&ex, tool, a, &state()).await.expect_err(tool);
        assert_eq!(error, ExecError::InvalidCall(message.into()), "{tool}");
    }
    let error = call(&ex, "get_user", json!({"user_id": "U1"}), &json!([1]))
        .await
        .expect_err("not an object");
    assert_eq!(
        error,
        ExecError::InvalidCall("the state must be an object".into())
    );
}

#[tokio::test]
async fn code_without_tool_functions_is_a_load_error() {
    let ex = executor().await;
    for (code, message) in [
        (
            "def ping():\n    return 'pong'\n",
            "load error: tool function ping() takes no database parameter: a tool of the \
             database convention is def ping(data, ...); private helpers start with _",
        ),
        (
            "from json import dumps\nX = 1\n",
            "load error: the code defines no public function (the database convention's tools)",
        ),
    ] {
        let error = ex.describe(&EnvCode::database(code)).await.unwrap_err();
        assert_eq!(error.to_string(), message);
    }
    // Constructing gives the database as it is (there is no constructor).
    let constructed = ex
        .construct(&env(), &state(), 0, envsim_exec::DEFAULT_CLOCK)
        .await
        .unwrap();
    assert_eq!(constructed, state());
}

/// Writes a database-convention package into a temporary folder.
fn package(manifest_tools: Value, tests: Value) -> (tempfile::TempDir, EnvPackage) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("users_db");
    std::fs::create_dir_all(root.join("states")).unwrap();
    std::fs::write(root.join("env.py"), CODE).unwrap();
    std::fs::write(root.join("states/0.json"), state().to_string()).unwrap();
    let manifest = json!({"name": "users_db", "domain": "test", "description": "Users.",
                          "convention": "database", "tools": manifest_tools});
    std::fs::write(root.join("manifest.json"), manifest.to_string()).unwrap();
    std::fs::write(root.join("tests.json"), tests.to_string()).unwrap();
    let package = EnvPackage::load(&root).unwrap();
    (dir, package)
}

fn tool(name: &str, props: Value, required: &[&str]) -> Value {
    json!({"type": "function", "function": {"name": name, "description": name,
           "parameters": {"type": "object", "properties": props, "required": required}}})
}

fn all_tools() -> Vec<Value> {
    let s = json!({"type": "string"});
    vec![
        tool("add_user", json!({"user_id": s, "name": s}), &["user_id"]),
        tool(
            "rename",
            json!({"user_id": s, "name": s}),
            &["user_id", "name"],
        ),
        tool("archive", json!({"table": s}), &["table"]),
        tool("half_done", json!({"user_id": s}), &["user_id"]),
        tool("count_named", json!({"prefix": s}), &["prefix"]),
        tool("get_user", json!({"user_id": s}), &["user_id"]),
    ]
}

#[tokio::test]
async fn a_package_of_functions_checks_against_its_manifest() {
    let ex = executor().await;
    let (_dir, p) = package(Value::Array(all_tools()), json!({"cases": []}));
    assert_eq!(p.manifest.convention, Convention::Database);
    assert_eq!(p.check(&ex).await.unwrap(), Vec::<String>::new());
    // A schema that lists the database parameter, marks an optional one required, misses a
    // function and names one the code lacks.
    let mut tools = all_tools();
    tools[0] = tool(
        "add_user",
        json!({"data": {"type": "object"}, "user_id": {"type": "string"}, "name": {"type": "integer"}}),
        &["user_id", "name"],
    );
    tools.pop();
    tools.push(tool("delete_user", json!({}), &[]));
    let (_dir, p) = package(Value::Array(tools), json!({"cases": []}));
    assert_eq!(
        p.check(&ex).await.unwrap(),
        [
            "tool `add_user`: parameter `name` is optional in the code but required in the schema",
            "tool `add_user`: parameter `name` is annotated \"str\" in the code but typed \"integer\" in the schema",
            "tool `add_user`: schema parameter `data` is not in the code",
            "function `get_user` has no tool in the manifest",
            "tool `delete_user` has no public function in the code",
        ]
    );
}

#[tokio::test]
async fn scripted_tests_check_success_with_the_packages_rule_and_may_leave_it_out() {
    let ex = executor().await;
    let tests = json!({"cases": [
        {"name": "chain", "state": 0, "steps": [
            {"tool": "add_user", "args": {"user_id": "U3"},
             "expect": {"success": true, "observation": "Added user U3", "delta_count": 1}},
            {"tool": "add_user", "args": {"user_id": "U3"},
             "expect": {"success": false, "delta_count": 0}},
            {"tool": "count_named", "args": {"prefix": "a"}, "expect": {}},
            {"tool": "half_done", "args": {"user_id": "U3"},
             "expect": {"success": false, "state": {"/users/U3/name": "changed", "/audit/0": "renamed U3"}}},
            {"tool": "get_user", "args": {"user_id": "U3"},
             "expect": {"observation": "{\"name\": \"changed\", \"orders\": []}"}}
        ]}
    ]});
    let (_dir, p) = package(Value::Array(all_tools()), tests);
    assert_eq!(p.tests[0].steps[2].expect.success, None);
    assert_eq!(p.run_tests(&ex).await, Vec::<String>::new());

    let wrong = json!({"cases": [
        {"name": "wrong", "state": 0, "steps": [
            {"tool": "get_user", "args": {"user_id": "U9"}, "expect": {"success": true}},
            {"tool": "half_done", "args": {"user_id": "U1"}, "expect": {"success": false, "observation": "x"}},
            {"tool": "half_done", "args": {"user_id": "U1"}, "expect": {}},
            {"tool": "get_user", "args": {"user_id": "U1"}, "expect": {}}
        ]}
    ]});
    let (_dir, p) = package(Value::Array(all_tools()), wrong);
    assert_eq!(
        p.run_tests(&ex).await,
        [
            "users_db / case \"wrong\" / step 0 (get_user): outcome is failure under the error \
             prefix \"Error\", expected success: Error: no user U9",
            "users_db / case \"wrong\" / step 1 (half_done): the tool raised, so there is no \
             observation to be \"x\"",
            // Without `"success": false` an exception ends the case.
            "users_db / case \"wrong\" / step 2 (half_done): exception: KeyError: 'the second \
             half failed'",
        ]
    );
}

#[tokio::test]
async fn a_top_level_key_that_is_not_a_string_is_converted_and_reported() {
    let ex = executor().await;
    let env = EnvCode::database(
        "def tag_year(data, year: int):\n    data[year] = 'tagged'\n    return 'tagged %d' % year\n\ndef get(data):\n    return len(data)\n",
    );
    let before = state();
    let a = args(json!({"year": 2025}));
    let out = ex
        .call(&Call::new(&env, "tag_year", &a, &before))
        .await
        .unwrap();
    assert_eq!(out.observation, "tagged 2025");
    assert_eq!(out.state_after["2025"], "tagged");
    assert_eq!(out.converted.len(), 1, "{:?}", out.converted);
    // The next step of the chain runs from the converted state, decoded afresh.
    let none = Map::new();
    let next = ex
        .call(&Call::new(&env, "get", &none, &out.state_after))
        .await
        .unwrap();
    assert_eq!(next.observation, "3");
    assert_eq!(next.state_after, out.state_after);
}

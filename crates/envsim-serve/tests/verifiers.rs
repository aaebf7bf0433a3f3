//! The verifiers package `envsim export verifiers` generates, driven by the real `verifiers`
//! (0.4) against a live server with the desk package, without a model: tasks loaded through
//! its loaders and CLI parser, a rollout's setup, tools called through an MCP server with the
//! rollout's state channel, finalize, scoring, and the episode's trajectory on the server.

mod common;

use common::Server;
use envsim_serve::openenv::{read_tasks, RewardKind, TaskSet};
use envsim_serve::ServerConfig;
use serde_json::{json, Value};
use std::path::Path;

const TASKS: &str = r#"{"id": "close", "instruction": "Close ticket T1.", "reference_calls": [{"name": "close_ticket", "arguments": {"ticket_id": "T1"}}]}
{"id": "new", "instruction": "Open a ticket titled b.", "checker": {"type": "state_values", "expect": {"/tickets/T2/title": "b", "/tickets/T2/status": "open"}, "absent": []}}
"#;

const TOKEN: &str = "s3cret";

fn config() -> ServerConfig {
    let tasks = read_tasks(TASKS, "tasks.jsonl").unwrap();
    let set = |name: &str, max_tool_calls, terminal_tools: &[&str], reward| TaskSet {
        name: name.into(),
        env: "desk".into(),
        session: serde_json::Map::new(),
        tasks: tasks.clone(),
        max_tool_calls,
        terminal_tools: terminal_tools.iter().map(|t| t.to_string()).collect(),
        reward,
    };
    ServerConfig {
        task_sets: vec![
            set("desk", 5, &[], RewardKind::Binary),
            set("desk-short", 2, &["create_ticket"], RewardKind::Partial),
        ],
        token: Some(TOKEN.into()),
        ..ServerConfig::default()
    }
}

/// Writes the package of `set` under `dir`.
fn write(dir: &Path, set: &str, tools: &[Value], server_url: &str) {
    let package = envsim_serve::verifiers::package(set, tools, server_url).unwrap();
    for (path, text) in &package.files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verifiers_plays_an_episode_through_the_generated_package() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), config()).await;
    let c = reqwest::Client::new();

    // The route the package loads its tasks from.
    let tasks: Value = c
        .get(format!("{}/openenv/desk/tasks", server.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        tasks,
        json!({"tasks": [{"id": "close", "instruction": "Close ticket T1."},
                         {"id": "new", "instruction": "Open a ticket titled b."}]})
    );
    let r = c
        .get(format!("{}/openenv/nowhere/tasks", server.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .starts_with("no task set \"nowhere\""),
        "{body}"
    );

    // The packages: desk's tools as its manifest declares them, as `envsim export verifiers`
    // reads them; desk's default URL where nothing listens, to be overridden.
    let tools = common::desk(&dir.path().join("corpus")).manifest.tools;
    let packages = dir.path().join("packages");
    write(&packages.join("desk"), "desk", &tools, "http://127.0.0.1:9");
    write(&packages.join("short"), "desk-short", &tools, &server.url);
    let odd = [
        json!({"type": "function", "function": {"name": "class", "description": "Say \"hi\"\nthen \"\"\" and ''' and \\.",
            "parameters": {"type": "object", "properties": {"from": {"type": "string", "description": "Who."},
                "n": {"type": "integer"}}, "required": ["from"]}}}),
        json!({"type": "function", "function": {"name": "get ticket", "description": "",
            "parameters": {"type": "object", "properties": {}}}}),
    ];
    write(&packages.join("odd"), "odd", &odd, &server.url);

    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../envsim/tests/data/verifiers_driver.py"
    );
    let python = std::env::var("ENVSIM_VERIFIERS_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut command = tokio::process::Command::new(&python);
    command
        .current_dir(dir.path())
        .arg(script)
        .arg(packages.join("desk"))
        .arg(packages.join("short"))
        .arg(packages.join("odd"))
        .arg(format!("{}/openenv/desk", server.url))
        .arg(TOKEN)
        .env_remove("ENVSIM_TOKEN");
    let Some(seen) = common::python_client(command, "verifiers", "ENVSIM_REQUIRE_VERIFIERS").await
    else {
        server.stop().await;
        return;
    };

    // Loading: the default URL fails loudly, the one given on the command line works; the
    // taskset is found by its plugin id, and its agent runs the tool-only harness.
    assert_eq!(
        seen["default_url_error"],
        "EnvsimError: envsim: cannot load the tasks of the task set 'desk': cannot reach \
         http://127.0.0.1:9/openenv/desk/tasks: [Errno 111] Connection refused. Serve them \
         (`envsim serve --openenv desk=TASKS`) or point --env.taskset.task.base-url at the \
         server's /openenv/desk."
    );
    let base_url = format!("{}/openenv/desk", server.url);
    assert_eq!(
        (&seen["env"], &seen["harness"], &seen["base_url"]),
        (
            &json!("SingleAgentEnv"),
            &json!("NullHarness"),
            &json!(base_url)
        )
    );
    assert_eq!(
        seen["tasks"],
        json!([{"id": "close", "prompt": "Close ticket T1.", "key": "close"},
               {"id": "new", "prompt": "Open a ticket titled b.", "key": "new"}])
    );
    assert_eq!(
        seen["dry_run"],
        json!({"code": 0, "err": "", "taskset": {"id": "envsim-desk", "base_url": base_url}})
    );

    // The tools as the model sees them: envsim's names, descriptions and typed arguments.
    let tool = |name: &str, arg: &str, title: &str, kind: &str| {
        json!({"name": name, "description": format!("{name}."), "input": {
            "type": "object", "title": format!("{name}Arguments"),
            "properties": {arg: {"title": title, "type": kind}}, "required": [arg]}})
    };
    assert_eq!(
        seen["tools"],
        json!([
            tool("close_ticket", "ticket_id", "Ticket Id", "string"),
            tool("create_ticket", "title", "Title", "string"),
            tool("get_ticket", "ticket_id", "Ticket Id", "string"),
            tool("grow", "size", "Size", "integer"),
        ])
    );
    // Their calls: steps of the episode, answered with the tool's result as JSON text.
    let text = |t: &str| json!({"error": false, "text": [t]});
    assert_eq!(
        seen["results"],
        json!([
            text(r#"{"success": true}"#),
            text(r#"{"success": true, "data": {"title": "a", "status": "closed"}}"#),
            text(r#"{"success": false, "error": "no ticket T9"}"#),
        ])
    );
    // The answer ends the episode; the server's reward is the rollout's.
    assert_eq!(
        (&seen["stop_before"], &seen["stop_after"]),
        (&json!(false), &json!(true))
    );
    let episode = seen["episode_id"].as_str().unwrap().to_owned();
    assert_eq!(episode.len(), 32, "a uuid4 in hex");
    assert_eq!(
        seen["info"],
        json!({"episode_id": episode, "task_id": "close", "finish": "final_answer", "reward": 1.0,
               "reward_detail": {"binary": 1.0, "partial": 1.0, "checks": 1, "failures": []}})
    );
    assert_eq!(seen["rewards"], json!({"envsim_reward": 1.0}));
    assert_eq!(seen["reward"], 1.0);
    assert_eq!(
        seen["metrics"],
        json!({"reward_binary": 1.0, "reward_partial": 1.0, "reward_checks": 1.0, "reward_failures": 0.0})
    );
    assert_eq!(
        seen["after_end"],
        text(&format!(
            "Error: episode \"{episode}\" is over: reset to start another"
        ))
    );
    // The server's record of the episode: the calls with their rewards, the answer, the reward.
    let trajectory = |id: String| {
        let c = c.clone();
        let url = format!("{}/sessions/{id}/trajectory", server.url);
        async move {
            let t: Value = c
                .get(url)
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            t
        }
    };
    let t = trajectory(episode.clone()).await;
    let steps: Vec<(&Value, &Value, &Value)> = t["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                &s["action"]["name"],
                &s["action"]["arguments"],
                &s["reward"],
            )
        })
        .collect();
    let (close, get) = (json!("close_ticket"), json!("get_ticket"));
    let (t1, t9, zero) = (
        json!({"ticket_id": "T1"}),
        json!({"ticket_id": "T9"}),
        json!(0.0),
    );
    assert_eq!(
        steps,
        [(&close, &t1, &zero), (&get, &t1, &zero), (&get, &t9, &zero)]
    );
    assert_eq!(t["rewards"], json!([0.0, 0.0, 0.0, 1.0]));
    assert_eq!(
        (
            &t["task"]["id"],
            &t["answer"],
            &t["finish"],
            &t["reward"]["binary"]
        ),
        (
            &json!("close"),
            &json!("T1 is closed."),
            &json!("final_answer"),
            &json!(1.0)
        )
    );

    // A terminal tool ends the episode: no answer is sent; the reward is its step's (partial).
    assert_eq!(
        seen["no_token_error"],
        format!(
            "EnvsimError: envsim: cannot load the tasks of the task set 'desk-short': \
             {}/openenv/desk-short/tasks answered HTTP 401: missing or wrong bearer token \
             (Authorization: Bearer TOKEN) (give it in $ENVSIM_TOKEN or --env.taskset.task.token)",
            server.url
        )
    );
    let short = &seen["short"];
    assert_eq!(
        short["result"],
        text(r#"{"success": true, "ticket_id": "T2"}"#)
    );
    assert_eq!(
        (&short["stop"], &short["reward"]),
        (&json!(true), &json!(0.5))
    );
    assert_eq!(short["info"]["finish"], "terminal_tool");
    assert_eq!(
        short["info"]["reward_detail"]["failures"],
        json!(["/tickets/T2/title: \"c\", expected \"b\""])
    );
    assert_eq!(
        short["metrics"],
        json!({"reward_binary": 0.0, "reward_partial": 0.5, "reward_checks": 2.0, "reward_failures": 1.0})
    );
    let t = trajectory(short["episode_id"].as_str().unwrap().to_owned()).await;
    assert_eq!(
        (
            &t["rewards"],
            &t["answer"],
            &t["steps"][0]["action"]["name"]
        ),
        (&json!([0.5]), &Value::Null, &json!("create_ticket"))
    );

    // Names and a description Python cannot take as they are: the model sees envsim's name
    // where it is a valid tool name, and the description as it was written.
    assert_eq!(seen["odd"]["taskset"], "EnvsimTaskset");
    assert_eq!(
        seen["odd"]["tools"],
        json!([
            {"name": "get_ticket", "description": "", "input": {
                "type": "object", "title": "get_ticketArguments", "properties": {}}},
            {"name": "class",
             "description": "Say \"hi\"\nthen \"\"\" and ''' and \\.\n\nArguments:\n- from_: Who.",
             "input": {"type": "object", "title": "tool_classArguments",
                "properties": {"from_": {"title": "From", "type": "string"},
                    "n": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null, "title": "N"}},
                "required": ["from_"]}},
        ])
    );
    server.stop().await;
}

//! The OpenEnv endpoints end to end on loopback with the desk package: HTTP reset/step/state,
//! rewards from an executed checker and a given one, budgets and terminal tools, rewards in
//! the trajectory, episodes kept across a restart, the WebSocket protocol, and the real
//! OpenEnv client (`openenv-core`) driving an episode.

mod common;

use common::Server;
use envsim_serve::openenv::{read_tasks, RewardKind, TaskSet};
use envsim_serve::ServerConfig;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

const TASKS: &str = r#"{"id": "close", "instruction": "Close ticket T1.", "reference_calls": [{"name": "close_ticket", "arguments": {"ticket_id": "T1"}}]}
{"id": "new", "instruction": "Open a ticket titled b.", "checker": {"type": "state_values", "expect": {"/tickets/T2/title": "b", "/tickets/T2/status": "open"}, "absent": []}}
{"id": "free", "instruction": "Look around."}
"#;

fn config() -> ServerConfig {
    let tasks = read_tasks(TASKS, "tasks.jsonl").unwrap();
    ServerConfig {
        task_sets: vec![
            TaskSet {
                name: "desk".into(),
                env: "desk".into(),
                session: serde_json::Map::new(),
                tasks: tasks.clone(),
                max_tool_calls: 5,
                terminal_tools: Vec::new(),
                reward: RewardKind::Binary,
            },
            TaskSet {
                name: "desk-short".into(),
                env: "desk".into(),
                session: serde_json::Map::new(),
                tasks,
                max_tool_calls: 2,
                terminal_tools: vec!["create_ticket".into()],
                reward: RewardKind::Partial,
            },
        ],
        ..ServerConfig::default()
    }
}

async fn post(c: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let r = c.post(url).body(body.to_string()).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn get(c: &reqwest::Client, url: &str) -> (u16, Value) {
    let r = c.get(url).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn episodes_over_http_are_rewarded_by_their_checkers_and_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), config()).await;
    let c = reqwest::Client::new();
    let u = |path: &str| format!("{}/openenv/desk{path}", server.url);

    let (status, health) = get(&c, &u("/health")).await;
    assert_eq!((status, health), (200, json!({"status": "healthy"})));
    let (_, meta) = get(&c, &u("/metadata")).await;
    assert_eq!(meta["name"], "desk");
    for key in [
        "description",
        "readme_content",
        "version",
        "author",
        "documentation_url",
    ] {
        assert!(meta.get(key).is_some(), "{key}");
    }
    let (_, schema) = get(&c, &u("/schema")).await;
    assert_eq!(schema["action"]["title"], "EnvsimAction");
    assert_eq!(
        schema["action"]["properties"]["tool"]["enum"],
        json!(["close_ticket", "create_ticket", "get_ticket", "grow"])
    );
    assert_eq!(schema["state"]["additionalProperties"], true);
    let (_, api) = get(&c, &u("/openapi.json")).await;
    for path in ["/reset", "/step", "/state"] {
        assert!(api["paths"].get(path).is_some(), "{path}");
    }

    // An episode of the task whose checker is made by executing its reference calls.
    let (status, reset) = post(
        &c,
        &u("/reset"),
        json!({"task_id": "close", "episode_id": "ep1"}),
    )
    .await;
    assert_eq!(status, 200, "{reset}");
    assert_eq!(
        (reset["reward"].clone(), reset["done"].clone()),
        (Value::Null, json!(false))
    );
    let obs = &reset["observation"];
    assert_eq!(obs["episode_id"], "ep1");
    assert_eq!(obs["instruction"], "Close ticket T1.");
    assert_eq!(obs["tools"].as_array().unwrap().len(), 4);
    let step_url = u("/step");
    let step = |action: Value| {
        post(
            &c,
            &step_url,
            json!({"episode_id": "ep1", "action": action}),
        )
    };
    let (status, r) = step(json!({"tool": "get_ticket", "arguments": {"ticket_id": "T1"}})).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        (r["reward"].clone(), r["done"].clone()),
        (json!(0.0), json!(false))
    );
    assert_eq!(r["observation"]["result"]["data"]["status"], "open");
    assert_eq!(r["observation"]["success"], true);
    let (_, r) = step(json!({"tool": "close_ticket", "arguments": {"ticket_id": "T1"}})).await;
    assert_eq!(r["done"], false);
    let (_, r) = step(json!({"answer": "T1 is closed."})).await;
    assert_eq!(
        (r["reward"].clone(), r["done"].clone()),
        (json!(1.0), json!(true))
    );
    assert_eq!(r["observation"]["finish"], "final_answer");
    assert_eq!(
        r["observation"]["reward_detail"],
        json!({"binary": 1.0, "partial": 1.0, "checks": 1, "failures": []})
    );
    let (status, r) = step(json!({"tool": "get_ticket", "arguments": {"ticket_id": "T1"}})).await;
    assert_eq!(status, 422);
    assert!(
        r["detail"][0]["msg"].as_str().unwrap().contains("is over"),
        "{r}"
    );
    let (_, state) = get(&c, &u("/state?episode_id=ep1")).await;
    assert_eq!(state["episode_id"], "ep1");
    assert_eq!(state["step_count"], 3);
    assert_eq!(state["tool_calls"], 2);
    assert_eq!(state["finish"], "final_answer");
    assert_eq!(state["state"]["tickets"]["T1"]["status"], "closed");
    // The session's trajectory carries the rewards, for audit and curate.
    let (_, t) = get(&c, &format!("{}/sessions/ep1/trajectory", server.url)).await;
    assert_eq!(t["steps"].as_array().unwrap().len(), 2);
    assert_eq!(t["steps"][1]["reward"], 0.0);
    assert_eq!(t["rewards"], json!([0.0, 0.0, 1.0]));
    assert_eq!(t["reward"]["binary"], 1.0);
    assert_eq!(t["task"]["id"], "close");
    assert_eq!(t["answer"], "T1 is closed.");

    // The same task answered without doing it: no reward, and what is wrong.
    let (_, _) = post(
        &c,
        &u("/reset"),
        json!({"task_id": "close", "episode_id": "ep2"}),
    )
    .await;
    let (_, r) = post(
        &c,
        &u("/step"),
        json!({"episode_id": "ep2", "action": {"answer": "done"}}),
    )
    .await;
    assert_eq!(r["reward"], 0.0);
    assert_eq!(
        r["observation"]["reward_detail"]["failures"],
        json!(["/tickets/T1/status: \"open\", expected \"closed\""])
    );
    // A task without checker or reference calls: no reward, said why in the trajectory.
    let (_, r) = post(&c, &u("/reset"), json!({"task_id": "free"})).await;
    let free = r["observation"]["episode_id"].as_str().unwrap().to_owned();
    let (_, r) = post(
        &c,
        &u("/step"),
        json!({"episode_id": free, "action": {"answer": "ok"}}),
    )
    .await;
    assert_eq!(
        (r["reward"].clone(), r["done"].clone()),
        (Value::Null, json!(true))
    );

    // Mistakes, each with its place.
    for (body, at) in [
        (json!({"action": {"answer": "x"}}), "episode_id"),
        (json!({"episode_id": "ep1"}), "action"),
        (
            json!({"episode_id": "nope", "action": {"answer": "x"}}),
            "episode_id",
        ),
        (
            json!({"episode_id": "ep2", "action": {"tool": "get_ticket", "args": {}}}),
            "action",
        ),
    ] {
        let (status, r) = post(&c, &u("/step"), body.clone()).await;
        assert_eq!(status, 422, "{body}: {r}");
        let loc = r["detail"][0]["loc"].as_array().unwrap();
        assert_eq!(loc.last().unwrap(), at, "{body}: {r}");
    }
    let (status, r) = post(&c, &u("/reset"), json!({"seed": -1})).await;
    assert_eq!(
        (status, r["detail"][0]["loc"].clone()),
        (422, json!(["body", "seed"]))
    );
    let (status, _) = post(&c, &u("/reset"), json!({"episode_id": "ep1"})).await;
    assert_eq!(status, 409, "an episode id in use is refused");
    let (status, _) = get(&c, &format!("{}/openenv/nowhere/health", server.url)).await;
    assert_eq!(status, 404);

    // A restart keeps the episodes and their rewards.
    server.stop().await;
    let server = Server::start(dir.path(), config()).await;
    let (_, state) = get(
        &c,
        &format!("{}/openenv/desk/state?episode_id=ep1", server.url),
    )
    .await;
    assert_eq!(state["reward"]["binary"], 1.0, "{state}");
    assert_eq!(state["done"], true);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_and_terminal_tools_end_episodes_with_partial_rewards() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), config()).await;
    let c = reqwest::Client::new();
    let u = |path: &str| format!("{}/openenv/desk-short{path}", server.url);
    // The terminal tool ends the episode; the checker of `new` checks two values.
    let (_, r) = post(
        &c,
        &u("/reset"),
        json!({"task_id": "new", "episode_id": "a"}),
    )
    .await;
    assert_eq!(r["observation"]["max_tool_calls"], 2);
    let (_, r) = post(
        &c,
        &u("/step"),
        json!({"episode_id": "a", "action": {"tool": "create_ticket", "arguments": {"title": "c"}}}),
    )
    .await;
    assert_eq!(r["done"], true);
    assert_eq!(r["observation"]["finish"], "terminal_tool");
    // Partial: the status is right, the title is not.
    assert_eq!(r["reward"], 0.5);
    assert_eq!(r["observation"]["reward_detail"]["binary"], 0.0);
    // The budget: two calls, then the episode is over.
    let (_, _) = post(
        &c,
        &u("/reset"),
        json!({"task_id": "close", "episode_id": "b"}),
    )
    .await;
    let call = json!({"episode_id": "b", "action": {"tool": "get_ticket", "arguments": {"ticket_id": "T1"}}});
    let (_, r) = post(&c, &u("/step"), call.clone()).await;
    assert_eq!(r["done"], false);
    let (_, r) = post(&c, &u("/step"), call.clone()).await;
    assert_eq!(
        (r["done"].clone(), r["observation"]["finish"].clone()),
        (json!(true), json!("step_budget"))
    );
    assert_eq!(r["reward"], 0.0);
    // Seeds choose tasks: the same seed, the same task.
    let (_, one) = post(&c, &u("/reset"), json!({"seed": 4})).await;
    let (_, two) = post(&c, &u("/reset"), json!({"seed": 4})).await;
    assert_eq!(one["observation"]["task_id"], two["observation"]["task_id"]);
    assert_eq!(one["observation"]["task_id"], "new");
    server.stop().await;
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Sends `text` and reads the reply.
async fn send(ws: &mut Socket, text: &str) -> Value {
    ws.send(Message::Text(text.to_owned().into()))
        .await
        .unwrap();
    loop {
        if let Message::Text(reply) = ws.next().await.unwrap().unwrap() {
            return serde_json::from_str(reply.as_str()).unwrap();
        }
    }
}

async fn ask(ws: &mut Socket, message: Value) -> Value {
    send(ws, &message.to_string()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_websocket_speaks_openenvs_messages() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), config()).await;
    let url = format!("{}/openenv/desk/ws", server.url.replacen("http", "ws", 1));
    let (mut ws, _) = tokio_tungstenite::connect_async(&url).await.unwrap();
    let r = ask(&mut ws, json!({"type": "state"})).await;
    assert_eq!(
        r,
        json!({"type": "state", "data": {"episode_id": null, "step_count": 0}})
    );
    let r = ask(&mut ws, json!({"type": "step", "data": {"answer": "x"}})).await;
    assert_eq!(r["type"], "error");
    assert_eq!(r["data"]["code"], "VALIDATION_ERROR");
    let r = ask(
        &mut ws,
        json!({"type": "reset", "data": {"task_id": "close"}}),
    )
    .await;
    assert_eq!(r["type"], "observation");
    assert_eq!(r["data"]["observation"]["instruction"], "Close ticket T1.");
    let r = ask(
        &mut ws,
        json!({"type": "step", "data": {"tool": "close_ticket", "arguments": {"ticket_id": "T1"}}}),
    )
    .await;
    assert_eq!(
        (r["data"]["reward"].clone(), r["data"]["done"].clone()),
        (json!(0.0), json!(false))
    );
    let r = ask(
        &mut ws,
        json!({"type": "step", "data": {"answer": "closed"}}),
    )
    .await;
    assert_eq!(
        (r["data"]["reward"].clone(), r["data"]["done"].clone()),
        (json!(1.0), json!(true))
    );
    let r = ask(&mut ws, json!({"type": "state"})).await;
    assert_eq!(r["type"], "state");
    assert_eq!(r["data"]["step_count"], 2);
    let r = ask(&mut ws, json!({"type": "frobnicate"})).await;
    assert_eq!(r["data"]["code"], "UNKNOWN_TYPE");
    let r = send(&mut ws, "{not json").await;
    assert_eq!(r["data"]["code"], "INVALID_JSON");
    // A second episode on the same connection.
    let r = ask(
        &mut ws,
        json!({"type": "reset", "data": {"task_id": "new"}}),
    )
    .await;
    assert_eq!(r["data"]["observation"]["task_id"], "new");
    ws.send(Message::Text(json!({"type": "close"}).to_string().into()))
        .await
        .unwrap();
    server.stop().await;
}

/// The real OpenEnv client (`openenv-core`'s `GenericEnvClient`, over its WebSocket) plays an
/// episode: skipped without the package unless ENVSIM_REQUIRE_OPENENV is set (CI installs it
/// in a virtual environment named by ENVSIM_OPENENV_PYTHON).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openenv_client_plays_an_episode() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), config()).await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../envsim/tests/data/openenv_client.py"
    );
    let python = std::env::var("ENVSIM_OPENENV_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut command = tokio::process::Command::new(&python);
    command
        .arg(script)
        .arg(format!("{}/openenv/desk", server.url));
    let Some(seen) = common::python_client(command, "openenv-core", "ENVSIM_REQUIRE_OPENENV").await
    else {
        server.stop().await;
        return;
    };
    assert_eq!(seen["reset"]["instruction"], "Close ticket T1.");
    assert_eq!(seen["steps"], json!([[0.0, false], [1.0, true]]));
    assert_eq!(seen["state"]["step_count"], 2);
    assert_eq!(seen["state"]["state"]["tickets"]["T1"]["status"], "closed");
    assert_eq!(seen["health"], json!({"status": "healthy"}));
    // `openenv validate --url` (the CLI of the same installation) passes every check.
    let cli = std::path::Path::new(&python).with_file_name("openenv");
    if cli.is_file() {
        let out = tokio::process::Command::new(&cli)
            .args(["validate", "--url", &format!("{}/openenv/desk", server.url)])
            .output()
            .await
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        assert_eq!(report["passed"], true, "{report}");
        assert_eq!(report["summary"]["passed_count"], 6, "{report}");
    } else {
        assert!(
            std::env::var_os("ENVSIM_REQUIRE_OPENENV").is_none(),
            "ENVSIM_REQUIRE_OPENENV is set and {} is missing",
            cli.display()
        );
    }
    server.stop().await;
}

//! Sessions in PostgreSQL: a server on a real PostgreSQL database (ENVSIM_POSTGRES_URL;
//! `.ci/postgres` starts one; skipped without it unless ENVSIM_REQUIRE_POSTGRES is set) keeps
//! sessions, steps, states, marks, forks and OpenEnv episodes across a restart, and servers
//! started together on one database make its tables once.

mod common;

use common::{fresh_postgres, Server};
use envsim_serve::openenv::{read_tasks, RewardKind, TaskSet};
use envsim_serve::store::Store;
use envsim_serve::ServerConfig;
use serde_json::{json, Value};

async fn post(c: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let r = c.post(url).body(body.to_string()).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn get(c: &reqwest::Client, url: &str) -> (u16, Value) {
    let r = c.get(url).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

fn config() -> ServerConfig {
    ServerConfig {
        task_sets: vec![TaskSet {
            name: "desk".into(),
            env: "desk".into(),
            session: serde_json::Map::new(),
            tasks: read_tasks(
                r#"{"id": "close", "instruction": "Close T1.", "reference_calls": [{"name": "close_ticket", "arguments": {"ticket_id": "T1"}}]}"#,
                "tasks",
            )
            .unwrap(),
            max_tool_calls: 5,
            terminal_tools: Vec::new(),
            reward: RewardKind::Binary,
        }],
        ..ServerConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_in_postgres_survive_a_restart() {
    let Some(url) = fresh_postgres().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_any(&url).await.unwrap();
    let server = Server::start_on(dir.path(), store, config(), 2).await;
    let c = reqwest::Client::new();
    let u = |path: &str| format!("{}{path}", server.url);
    let (status, created) = post(&c, &u("/sessions"), json!({"env": "desk"})).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let steps_url = format!("{}/sessions/{id}/steps", server.url);
    let step = |call: Value| post(&c, &steps_url, call);
    let (status, _) = step(json!({"name": "create_ticket", "arguments": {"title": "b"}})).await;
    assert_eq!(status, 200);
    let (_, _) = post(
        &c,
        &u(&format!("/sessions/{id}/snapshots")),
        json!({"name": "two"}),
    )
    .await;
    let (_, _) = step(json!({"name": "close_ticket", "arguments": {"ticket_id": "T1"}})).await;
    let (_, _) = step(json!({"name": "get_ticket", "arguments": {"ticket_id": "T1"}})).await;
    let (status, forked) = post(&c, &u(&format!("/sessions/{id}/fork")), json!({})).await;
    assert_eq!(status, 201);
    let fork = forked["id"].as_str().unwrap().to_owned();
    // A rollback in the fork truncates its own steps only.
    let (status, _) = post(
        &c,
        &u(&format!("/sessions/{fork}/rollback")),
        json!({"name": "two"}),
    )
    .await;
    assert_eq!(status, 200);
    // An OpenEnv episode, rewarded.
    let (_, _) = post(
        &c,
        &u("/openenv/desk/reset"),
        json!({"task_id": "close", "episode_id": "ep"}),
    )
    .await;
    let (_, _) = post(&c, &u("/openenv/desk/step"), json!({"episode_id": "ep", "action": {"tool": "close_ticket", "arguments": {"ticket_id": "T1"}}})).await;
    let (_, r) = post(
        &c,
        &u("/openenv/desk/step"),
        json!({"episode_id": "ep", "action": {"answer": "done"}}),
    )
    .await;
    assert_eq!(r["reward"], 1.0, "{r}");
    let (_, before) = get(&c, &u(&format!("/sessions/{id}/trajectory"))).await;
    server.stop().await;

    // Another server on the same database finds everything.
    let store = Store::open_any(&url).await.unwrap();
    let server = Server::start_on(dir.path(), store, config(), 2).await;
    let u = |path: &str| format!("{}{path}", server.url);
    let (status, after) = get(&c, &u(&format!("/sessions/{id}/trajectory"))).await;
    assert_eq!(status, 200);
    assert_eq!(after, before);
    assert_eq!(after["steps"].as_array().unwrap().len(), 3);
    let (_, state) = get(&c, &u(&format!("/sessions/{id}/state"))).await;
    assert_eq!(state["tickets"]["T1"]["status"], "closed");
    assert_eq!(state["tickets"]["T2"]["title"], "b");
    let (_, forked) = get(&c, &u(&format!("/sessions/{fork}/state"))).await;
    assert_eq!(
        forked["tickets"]["T1"]["status"], "open",
        "the fork was rolled back to `two`"
    );
    // The mark is kept: rolling the original back to it works after the restart.
    let (status, r) = post(
        &c,
        &u(&format!("/sessions/{id}/rollback")),
        json!({"name": "two"}),
    )
    .await;
    assert_eq!((status, r["steps"].clone()), (200, json!(1)));
    let (_, episode) = get(&c, &u("/openenv/desk/state?episode_id=ep")).await;
    assert_eq!(episode["reward"]["binary"], 1.0, "{episode}");
    // Deleting removes the session and its steps.
    let r = c
        .delete(u(&format!("/sessions/{fork}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    server.stop().await;
    let store = Store::open_any(&url).await.unwrap();
    let ids: Vec<String> = store
        .load_all()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert!(
        ids.contains(&id) && !ids.contains(&fork) && ids.contains(&"ep".to_owned()),
        "{ids:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_started_together_make_the_tables_once() {
    let Some(url) = fresh_postgres().await else {
        return;
    };
    let opened = futures_util::future::join_all((0..4).map(|_| Store::open_any(&url))).await;
    for store in opened {
        assert!(store.unwrap().load_all().await.unwrap().is_empty());
    }
    // A database that is not there is an error naming it, without the password.
    let missing = url
        .replace("envsim@", "envsim:secret@")
        .replace("/envsim_test_", "/nowhere_");
    let error = match Store::open_any(&missing).await {
        Ok(_) => panic!("a missing database opened"),
        Err(e) => e.to_string(),
    };
    assert!(
        error.contains("cannot connect to") && error.contains("envsim:***@"),
        "{error}"
    );
    assert!(!error.contains("secret"), "{error}");
}

//! Idempotent steps end to end on loopback: a request retried with its `Idempotency-Key` (or
//! its `expected_step`) is answered with the step the session took for it, never taken again —
//! also after a restart — and a key reused for another call is refused; the same over OpenEnv
//! (the action's `metadata`), for tool calls and the final answer.

mod common;

use common::Server;
use envsim_serve::openenv::{read_tasks, RewardKind, TaskSet};
use envsim_serve::ServerConfig;
use serde_json::{json, Value};

/// A step request: the status, the `Idempotent-Replayed` header, the body.
async fn step(
    c: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    body: Value,
) -> (u16, Option<String>, Value) {
    let mut request = c.post(url).body(body.to_string());
    if let Some(key) = key {
        request = request.header("Idempotency-Key", key);
    }
    let r = request.send().await.unwrap();
    let replayed = r
        .headers()
        .get("idempotent-replayed")
        .map(|v| v.to_str().unwrap().to_owned());
    (r.status().as_u16(), replayed, r.json().await.unwrap())
}

async fn tickets(c: &reqwest::Client, url: &str) -> usize {
    let state: Value = c.get(url).send().await.unwrap().json().await.unwrap();
    state["tickets"].as_object().unwrap().len()
}

/// The body without the server's time (which differs between a step and its replay).
fn timeless(mut body: Value) -> Value {
    body.as_object_mut().unwrap().remove("server_ms");
    body.as_object_mut().unwrap().remove("replayed");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_step_is_answered_with_the_step_taken_never_taken_twice() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), ServerConfig::default()).await;
    let c = reqwest::Client::new();
    let created: Value = c
        .post(format!("{}/sessions", server.url))
        .body(json!({"env": "desk"}).to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let steps = format!("{}/sessions/{id}/steps", server.url);
    let state = format!("{}/sessions/{id}/state", server.url);
    let create_b = json!({"name": "create_ticket", "arguments": {"title": "b"}});
    assert_eq!(tickets(&c, &state).await, 1);

    let (status, replayed, first) = step(&c, &steps, Some("k-1"), create_b.clone()).await;
    assert_eq!(
        (status, replayed.as_deref()),
        (200, Some("false")),
        "{first}"
    );
    assert_eq!(
        (
            first["step"].clone(),
            first["observation"]["ticket_id"].clone()
        ),
        (json!(1), json!("T2"))
    );
    // The answer was lost; the client sends it again.
    let (status, replayed, again) = step(&c, &steps, Some("k-1"), create_b.clone()).await;
    assert_eq!((status, replayed.as_deref()), (200, Some("true")));
    assert_eq!(again["replayed"], true);
    assert_eq!(timeless(again), timeless(first.clone()));
    assert_eq!(tickets(&c, &state).await, 2, "one ticket created, not two");
    // Without a key the same call is another request.
    let (_, _, other) = step(&c, &steps, None, create_b.clone()).await;
    assert_eq!(other["observation"]["ticket_id"], "T3");
    // A key names one request.
    let (status, _, refused) = step(
        &c,
        &steps,
        Some("k-1"),
        json!({"name": "create_ticket", "arguments": {"title": "c"}}),
    )
    .await;
    assert_eq!(status, 422);
    let message = refused["error"].as_str().unwrap();
    assert!(
        message.contains("the idempotency key \"k-1\" was used for step 1 (create_ticket with {\"title\":\"b\"})"),
        "{message}"
    );
    for bad in ["", &"x".repeat(256), "with space"] {
        let (status, _, body) = step(&c, &steps, Some(bad), create_b.clone()).await;
        assert_eq!(status, 422, "{bad:?}: {body}");
    }
    assert_eq!(tickets(&c, &state).await, 3);

    // The expected step: taken only there; one past it with the same call, answered.
    let close =
        json!({"name": "close_ticket", "arguments": {"ticket_id": "T2"}, "expected_step": 2});
    let (status, replayed, closed) = step(&c, &steps, None, close.clone()).await;
    assert_eq!(
        (status, replayed.as_deref()),
        (200, Some("false")),
        "{closed}"
    );
    assert_eq!(closed["step"], 3);
    let (status, replayed, again) = step(&c, &steps, None, close.clone()).await;
    assert_eq!((status, replayed.as_deref()), (200, Some("true")));
    assert_eq!(timeless(again), timeless(closed));
    let (status, _, behind) = step(
        &c,
        &steps,
        None,
        json!({"name": "get_ticket", "arguments": {"ticket_id": "T2"}, "expected_step": 1}),
    )
    .await;
    assert_eq!(status, 409);
    assert!(
        behind["error"]
            .as_str()
            .unwrap()
            .contains("has taken 3 steps, and the request expected 1: it was not taken"),
        "{behind}"
    );
    let (status, _, _) = step(
        &c,
        &steps,
        None,
        json!({"name": "get_ticket", "arguments": {}, "expected_step": "4"}),
    )
    .await;
    assert_eq!(status, 422);

    // Across a restart: the key is kept with the step.
    server.stop().await;
    let server = Server::start(dir.path(), ServerConfig::default()).await;
    let steps = format!("{}/sessions/{id}/steps", server.url);
    let state = format!("{}/sessions/{id}/state", server.url);
    let (status, replayed, after) = step(&c, &steps, Some("k-1"), create_b.clone()).await;
    assert_eq!(
        (status, replayed.as_deref()),
        (200, Some("true")),
        "{after}"
    );
    assert_eq!(timeless(after), timeless(first));
    assert_eq!(tickets(&c, &state).await, 3);
    // A rollback drops the steps and their keys: the key is free again.
    let r = c
        .post(format!("{}/sessions/{id}/rollback", server.url))
        .body(json!({"steps": 0}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    let (status, replayed, taken) = step(&c, &steps, Some("k-1"), create_b).await;
    assert_eq!((status, replayed.as_deref()), (200, Some("false")));
    assert_eq!(taken["step"], 1);
    assert_eq!(tickets(&c, &state).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openenv_steps_and_answers_retried_with_a_key_are_answered_once() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = read_tasks(
        r#"{"id": "new", "instruction": "Open a ticket titled b.", "reference_calls": [{"name": "create_ticket", "arguments": {"title": "b"}}]}"#,
        "tasks.jsonl",
    )
    .unwrap();
    let config = ServerConfig {
        task_sets: vec![TaskSet {
            name: "desk".into(),
            env: "desk".into(),
            session: serde_json::Map::new(),
            tasks,
            max_tool_calls: 5,
            terminal_tools: Vec::new(),
            reward: RewardKind::Binary,
        }],
        ..ServerConfig::default()
    };
    let server = Server::start(dir.path(), config).await;
    let c = reqwest::Client::new();
    let u = |path: &str| format!("{}/openenv/desk{path}", server.url);
    let (status, _, _) = step(&c, &u("/reset"), None, json!({"episode_id": "e1"})).await;
    assert_eq!(status, 200);
    let call = |key: Option<&str>| {
        let mut action = json!({"tool": "create_ticket", "arguments": {"title": "b"}});
        if let Some(k) = key {
            action["metadata"] = json!({"idempotency_key": k});
        }
        json!({"episode_id": "e1", "action": action})
    };
    let (status, _, first) = step(&c, &u("/step"), None, call(Some("a-1"))).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["observation"]["tool_calls"], 1);
    // Retried in the metadata, and in the header: the same reply, one call counted.
    let (_, _, again) = step(&c, &u("/step"), None, call(Some("a-1"))).await;
    assert_eq!(again, first);
    let (_, _, by_header) = step(&c, &u("/step"), Some("a-1"), call(None)).await;
    assert_eq!(by_header, first);
    let state: Value = c
        .get(u("/state?episode_id=e1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(state["tool_calls"], 1, "{state}");
    assert_eq!(state["state"]["tickets"].as_object().unwrap().len(), 2);
    // A key names one action.
    let mut other = call(Some("a-1"));
    other["action"]["arguments"]["title"] = json!("c");
    let (status, _, refused) = step(&c, &u("/step"), None, other).await;
    assert_eq!(status, 422);
    assert!(
        refused["detail"][0]["msg"]
            .as_str()
            .unwrap()
            .contains("was used for the action"),
        "{refused}"
    );
    // The answer, retried after the episode ended: its reply, not "the episode is over".
    let answer = json!({"episode_id": "e1", "action": {"answer": "Done.", "metadata": {"idempotency_key": "a-2"}}});
    let (status, _, ended) = step(&c, &u("/step"), None, answer.clone()).await;
    assert_eq!(
        (status, ended["done"].clone(), ended["reward"].clone()),
        (200, json!(true), json!(1.0))
    );
    let (status, _, again) = step(&c, &u("/step"), None, answer).await;
    assert_eq!((status, again), (200, ended.clone()));
    // By expected step: one past it with the same action is the reply; elsewhere a 409.
    let by_step = json!({"episode_id": "e1", "action": {"answer": "Done.", "metadata": {"expected_step": 1}}});
    let (status, _, again) = step(&c, &u("/step"), None, by_step).await;
    assert_eq!((status, again), (200, ended));
    let stale = json!({"episode_id": "e1", "action": {"answer": "Done.", "metadata": {"expected_step": 0}}});
    let (status, _, conflict) = step(&c, &u("/step"), None, stale).await;
    assert_eq!(status, 409, "{conflict}");
    server.stop().await;
}

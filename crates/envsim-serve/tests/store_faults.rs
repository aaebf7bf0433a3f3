//! The store failing under the server: SQLite on a full disk (a database file capped with
//! `Store::open_capped`, as a full disk refuses writes). The step that cannot be stored is
//! answered 503 with `Retry-After`, naming the step and the session and what to do; the
//! session is as before it; other sessions are still served; once there is room, steps are
//! stored again, and a restart finds exactly what was answered.

mod common;

use common::Server;
use envsim_serve::store::Store;
use envsim_serve::ServerConfig;
use serde_json::{json, Value};

async fn send(
    c: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> (u16, Option<String>, Value) {
    let mut request = c.request(method, url);
    if let Some(body) = body {
        request = request.body(body.to_string());
    }
    let r = request.send().await.unwrap();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        retry,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_the_step_with_503_and_leaves_the_session_as_before() {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sessions.sqlite");
    let config = ServerConfig {
        max_state_bytes: 1_000_000,
        ..ServerConfig::default()
    };
    let store = Store::open_capped(&file, 400_000).unwrap();
    let server = Server::start_on(dir.path(), store, config.clone(), 2).await;
    let c = reqwest::Client::new();
    let u = |path: &str| format!("{}{path}", server.url);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (status, _, created) = send(
            &c,
            Method::POST,
            &u("/sessions"),
            Some(json!({"env": "desk"})),
        )
        .await;
        assert_eq!(status, 201, "{created}");
        ids.push(created["id"].as_str().unwrap().to_owned());
    }
    let (a, b) = (ids[0].clone(), ids[1].clone());
    // Session a grows its state until the file is full: each changed state is stored.
    let mut stored = Vec::new();
    let mut refusal = None;
    for k in 0..40 {
        let size = 60_000 + k;
        let (status, retry, body) = send(
            &c,
            Method::POST,
            &u(&format!("/sessions/{a}/steps")),
            Some(json!({"name": "grow", "arguments": {"size": size}})),
        )
        .await;
        match status {
            200 => stored.push(size),
            503 => {
                refusal = Some((retry, body, stored.len() + 1));
                break;
            }
            other => panic!("step {k}: {other} {body}"),
        }
    }
    let (retry, body, step) = refusal.expect("the capped file filled up");
    assert!(!stored.is_empty());
    assert_eq!(retry.as_deref(), Some("2"));
    let message = body["error"].as_str().unwrap();
    for part in [
        &format!("step {step} (grow) of session {a:?}"),
        "session store unavailable",
        "full",
        "nothing was stored: send the same request again",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    // The session is as before the refused step.
    let (_, _, trajectory) = send(
        &c,
        Method::GET,
        &u(&format!("/sessions/{a}/trajectory")),
        None,
    )
    .await;
    assert_eq!(trajectory["steps"].as_array().unwrap().len(), stored.len());
    let (_, _, state) = send(&c, Method::GET, &u(&format!("/sessions/{a}/state")), None).await;
    assert_eq!(
        state["tickets"]["BIG"]["title"].as_str().unwrap().len(),
        *stored.last().unwrap()
    );
    // The other session is still served.
    let (status, _, state) = send(&c, Method::GET, &u(&format!("/sessions/{b}/state")), None).await;
    assert_eq!(status, 200);
    assert_eq!(state["tickets"].as_object().unwrap().len(), 1);
    // Room made (the big session deleted): steps are stored again.
    let room = std::time::Instant::now();
    let (status, _, body) = send(&c, Method::DELETE, &u(&format!("/sessions/{a}")), None).await;
    assert!(status == 200 || status == 204, "{status} {body}");
    let (status, _, body) = send(
        &c,
        Method::POST,
        &u(&format!("/sessions/{b}/steps")),
        Some(json!({"name": "create_ticket", "arguments": {"title": "after"}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    eprintln!(
        "room made and the next step stored in {:.0} ms",
        room.elapsed().as_secs_f64() * 1000.0
    );
    server.stop().await;
    // A restart finds what was answered: b's step, and no a.
    let server = Server::start_on(dir.path(), Store::open(&file).unwrap(), config, 2).await;
    let (_, _, listed) = send(&c, Method::GET, &format!("{}/sessions", server.url), None).await;
    let listed: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [b.as_str()]);
    let (_, _, trajectory) = send(
        &c,
        Method::GET,
        &format!("{}/sessions/{b}/trajectory", server.url),
        None,
    )
    .await;
    assert_eq!(trajectory["steps"].as_array().unwrap().len(), 1);
    server.stop().await;
}

//! The server end to end on loopback: HTTP routes, errors, auth, limits, persistence across a
//! restart, expiry, and MCP driven by the official Python client.

mod common;

use common::Server;
use envsim_serve::{AppState, Host, ServerConfig, ServerEvent};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = client.request(method, url);
    if let Some(body) = body {
        request = request.body(body.to_string());
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_over_http_survive_a_restart() {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        max_state_bytes: 4_000,
        ..ServerConfig::default()
    };
    let server = Server::start(dir.path(), config.clone()).await;
    let c = reqwest::Client::new();
    let u = |path: &str| format!("{}{path}", server.url);
    let (status, body) = call(&c, Method::GET, &u("/openapi.json"), None).await;
    assert_eq!((status, body["openapi"].as_str()), (200, Some("3.1.0")));
    // Creation: errors first.
    let (status, body) = call(
        &c,
        Method::POST,
        &u("/sessions"),
        Some(json!({"env": "nowhere"})),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("no environment \"nowhere\""))
    );
    let (status, body) = call(
        &c,
        Method::POST,
        &u("/sessions"),
        Some(json!({"env": "desk", "anchor": "maybe"})),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        body["error"].as_str().unwrap().contains("`anchor`"),
        "{body}"
    );
    // Every field is checked and unknown ones refused, each by name (what real clients
    // sent, and got 201 for, before).
    for (body, field) in [
        (json!({"env": "desk", "fault_rate": "high"}), "`fault_rate`"),
        (json!({"env": "desk", "no_code": "true"}), "`no_code`"),
        (json!({"env": "desk", "primery": "faulty"}), "`primery`"),
        (json!({"env": "desk", "seed": -1}), "`seed`"),
        (
            json!({"env": "desk", "max_regenerations": 99}),
            "`max_regenerations`",
        ),
    ] {
        let (status, answer) = call(&c, Method::POST, &u("/sessions"), Some(body.clone())).await;
        assert_eq!(status, 400, "{body}: {answer}");
        let message = answer["error"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{body}: {message}");
    }
    let (_, listed) = call(&c, Method::GET, &u("/sessions"), None).await;
    assert_eq!(
        listed["sessions"],
        json!([]),
        "no refused request made a session"
    );
    let big = json!({"tickets": {"T1": {"title": "x".repeat(5_000)}}});
    let (status, _) = call(
        &c,
        Method::POST,
        &u("/sessions"),
        Some(json!({"env": "desk", "state": big})),
    )
    .await;
    assert_eq!(status, 413);
    let (status, created) = call(
        &c,
        Method::POST,
        &u("/sessions"),
        Some(json!({"env": "desk"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(
        created["tools"],
        json!(["close_ticket", "create_ticket", "get_ticket", "grow"])
    );
    let s = |path: &str| u(&format!("/sessions/{id}{path}"));
    // Steps.
    let (status, step) = call(
        &c,
        Method::POST,
        &s("/steps"),
        Some(json!({"name": "create_ticket", "arguments": {"title": "b"}})),
    )
    .await;
    assert_eq!(status, 200, "{step}");
    assert_eq!(
        (
            step["step"].clone(),
            step["observation"]["ticket_id"].clone(),
            step["success"].clone()
        ),
        (json!(1), json!("T2"), json!(true))
    );
    assert_eq!(step["provenance"]["simulator"], "executor");
    let (status, body) = call(
        &c,
        Method::POST,
        &s("/steps"),
        Some(json!({"name": "reopen"})),
    )
    .await;
    assert_eq!(status, 404);
    assert!(body["error"]
        .as_str()
        .unwrap()
        .contains("its tools: close_ticket, create_ticket, get_ticket, grow"));
    let (status, body) = call(
        &c,
        Method::POST,
        &s("/steps"),
        Some(json!({"arguments": {}})),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (
            400,
            Some("field `name` (the tool) is missing or not a string")
        )
    );
    let (status, _) = call(
        &c,
        Method::POST,
        &u("/sessions/nothing/steps"),
        Some(json!({"name": "get_ticket"})),
    )
    .await;
    assert_eq!(status, 404);
    // A step past the state limit is undone.
    let (status, body) = call(
        &c,
        Method::POST,
        &s("/steps"),
        Some(json!({"name": "grow", "arguments": {"size": 10_000}})),
    )
    .await;
    assert_eq!(status, 413, "{body}");
    let (_, state) = call(&c, Method::GET, &s("/state"), None).await;
    assert!(state["tickets"].get("BIG").is_none());
    // Marks, rollback, fork.
    let (status, _) = call(
        &c,
        Method::POST,
        &s("/snapshots"),
        Some(json!({"name": "one"})),
    )
    .await;
    assert_eq!(status, 200);
    call(
        &c,
        Method::POST,
        &s("/steps"),
        Some(json!({"name": "create_ticket", "arguments": {"title": "c"}})),
    )
    .await;
    let (status, forked) = call(&c, Method::POST, &s("/fork"), None).await;
    assert_eq!(status, 201);
    let fork_id = forked["id"].as_str().unwrap().to_owned();
    assert_eq!(forked["steps"], 2);
    let (status, back) = call(
        &c,
        Method::POST,
        &s("/rollback"),
        Some(json!({"name": "one"})),
    )
    .await;
    assert_eq!((status, back["steps"].clone()), (200, json!(1)));
    assert!(back["state"]["tickets"].get("T3").is_none());
    let (status, _) = call(
        &c,
        Method::POST,
        &s("/rollback"),
        Some(json!({"name": "two"})),
    )
    .await;
    assert_eq!(status, 404);
    let (_, tools) = call(&c, Method::GET, &s("/tools"), None).await;
    assert_eq!(tools["tools"][2]["function"]["name"], "get_ticket");
    let (_, trajectory) = call(&c, Method::GET, &s("/trajectory"), None).await;
    assert_eq!(trajectory["steps"].as_array().unwrap().len(), 1);
    // A restart on the same file loses nothing.
    server.stop().await;
    let server = Server::start(dir.path(), config.clone()).await;
    let u = |path: &str| format!("{}{path}", server.url);
    let (status, shown) = call(&c, Method::GET, &u(&format!("/sessions/{id}")), None).await;
    assert_eq!(status, 200);
    assert_eq!(
        (shown["steps"].clone(), shown["snapshots"].clone()),
        (json!(1), json!({"one": 1}))
    );
    assert_eq!(shown["state"]["tickets"]["T2"]["title"], "b");
    let (_, fork) = call(&c, Method::GET, &u(&format!("/sessions/{fork_id}")), None).await;
    assert_eq!(fork["state"]["tickets"]["T3"]["title"], "c");
    let (status, step) = call(
        &c,
        Method::POST,
        &u(&format!("/sessions/{id}/steps")),
        Some(json!({"name": "create_ticket", "arguments": {"title": "d"}})),
    )
    .await;
    assert_eq!(
        (status, step["observation"]["ticket_id"].clone()),
        (200, json!("T3"))
    );
    let (status, _) = call(
        &c,
        Method::DELETE,
        &u(&format!("/sessions/{fork_id}")),
        None,
    )
    .await;
    assert_eq!(status, 204);
    let (_, listed) = call(&c, Method::GET, &u("/sessions"), None).await;
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1);
    server.stop().await;
    // Started by a host that no longer has the environment, the session is not restored, the
    // host hears why (the library prints nothing), and the store keeps it.
    let host = Arc::new(GoneHost::default());
    let store = envsim_serve::store::Store::open(&dir.path().join("sessions.sqlite")).unwrap();
    let state = AppState::start(host.clone(), store, config.clone())
        .await
        .unwrap();
    assert_eq!(state.len().await, 0);
    let notices = host.notices.lock().unwrap().clone();
    assert_eq!(
        notices,
        [ServerEvent::NotRestored {
            id: id.clone(),
            error: "the desk is gone".into()
        }]
    );
    assert_eq!(
        notices[0].to_string(),
        format!("session {id}: not restored: the desk is gone")
    );
    let store = envsim_serve::store::Store::open(&dir.path().join("sessions.sqlite")).unwrap();
    assert_eq!(store.load_all().await.unwrap().len(), 1);
}

/// A host whose environments are all gone, keeping what the server tells it.
#[derive(Default)]
struct GoneHost {
    notices: std::sync::Mutex<Vec<ServerEvent>>,
}

impl Host for GoneHost {
    fn environment(
        &self,
        _name: &str,
        _no_code: bool,
    ) -> Result<(Arc<envsim_sim::environment::Environment>, Value), String> {
        Err("the desk is gone".into())
    }

    fn backends(
        &self,
        _request: &envsim_serve::SessionRequest,
        _env: &envsim_sim::environment::Environment,
    ) -> Result<envsim_sim::session::Backends, String> {
        Err("the desk is gone".into())
    }

    fn notice(&self, event: ServerEvent) {
        self.notices.lock().unwrap().push(event);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_required_and_idle_sessions_expire() {
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        ServerConfig {
            token: Some("s3cret".into()),
            idle_ttl: Duration::from_secs(1),
            max_body_bytes: 1_000,
            ..ServerConfig::default()
        },
    )
    .await;
    let c = reqwest::Client::new();
    let (status, body) = call(&c, Method::GET, &format!("{}/sessions", server.url), None).await;
    assert_eq!(status, 401);
    assert!(body["error"].as_str().unwrap().contains("bearer token"));
    // A body past the limit is a JSON 413 that says so.
    let big = c
        .post(format!("{}/sessions", server.url))
        .bearer_auth("s3cret")
        .body(format!("{{\"env\": \"{}\"}}", "x".repeat(5_000)))
        .send()
        .await
        .unwrap();
    assert_eq!(big.status().as_u16(), 413);
    let body: Value = big.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("length limit exceeded"),
        "{body}"
    );
    let wrong = c
        .get(format!("{}/sessions", server.url))
        .bearer_auth("s3crex")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    let (status, _) = call(&c, Method::GET, &format!("{}/health", server.url), None).await;
    assert_eq!(status, 200);
    let created = c
        .post(format!("{}/sessions", server.url))
        .bearer_auth("s3cret")
        .body(json!({"env": "desk"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    assert_eq!(server.state.len().await, 1);
    // The sweeper (every second here) deletes it once it has been idle past the limit.
    let mut waited = 0;
    while !server.state.is_empty().await && waited < 50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    assert!(server.state.is_empty().await, "not expired after 5 s");
    assert!(
        waited >= 5,
        "expired after {} ms, well before its second of idleness",
        waited * 100
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_mcp_client_lists_and_calls_a_sessions_tools() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), ServerConfig::default()).await;
    let c = reqwest::Client::new();
    let (created, url) = desk_session(&c, &server.url, None).await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../envsim/tests/data/mcp_client.py"
    );
    let python = std::env::var("ENVSIM_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = tokio::process::Command::new(python)
        .arg(script)
        .arg(&url)
        .output()
        .await
        .unwrap();
    if out.status.code() == Some(3) {
        assert!(
            std::env::var_os("ENVSIM_REQUIRE_MCP").is_none(),
            "ENVSIM_REQUIRE_MCP is set and the Python mcp package is missing: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("skipped: the Python mcp package is not installed (pip install mcp)");
        server.stop().await;
        return;
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        seen["tools"],
        json!(["close_ticket", "create_ticket", "get_ticket", "grow"])
    );
    assert_eq!(seen["schema"]["required"], json!(["ticket_id"]));
    let text =
        |k: &str| serde_json::from_str::<Value>(seen[k]["text"][0].as_str().unwrap()).unwrap();
    assert_eq!(text("found")["data"]["title"], "a");
    assert_eq!(seen["found"]["is_error"], false);
    assert_eq!(text("missing")["error"], "no ticket T9");
    assert_eq!(seen["missing"]["is_error"], true);
    assert_eq!(text("created")["ticket_id"], "T2");
    // The client ended its MCP session without a complaint (a 202 made it log "Session
    // termination failed").
    assert_eq!(seen["warnings"], json!([]), "{seen}");
    // The MCP calls were steps of the session.
    let state: Value = c
        .get(format!(
            "{}/sessions/{}/state",
            server.url,
            created["id"].as_str().unwrap()
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(state["tickets"]["T2"]["title"], "from mcp");
    server.stop().await;
}

/// The edges MCP clients hit: the server's body limit, JSON-RPC errors for bodies that are no
/// JSON or no JSON-RPC, a session ended with 200, and a 401 that names its scheme (which is
/// case-insensitive).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_endpoint_answers_json_rpc_errors_and_ends_sessions_with_200() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path(),
        ServerConfig {
            token: Some("s3cret".into()),
            max_body_bytes: 2_000,
            ..ServerConfig::default()
        },
    )
    .await;
    let c = reqwest::Client::new();
    // No token: 401 with the challenge; `bearer` in lower case is accepted.
    let denied = c
        .get(format!("{}/sessions", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status().as_u16(), 401);
    assert_eq!(
        denied.headers()["www-authenticate"].to_str().unwrap(),
        "Bearer realm=\"envsim\""
    );
    let (_, url) = desk_session(&c, &server.url, Some("bearer s3cret")).await;
    let post = |body: String| {
        c.post(&url)
            .bearer_auth("s3cret")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body)
    };
    let rpc = |r: reqwest::Response| async move {
        let status = r.status().as_u16();
        let body: Value = r.json().await.expect("a JSON-RPC error body");
        (
            status,
            body["error"]["code"].clone(),
            body["jsonrpc"].clone(),
        )
    };
    // Not JSON: the JSON-RPC parse error.
    let (status, code, version) = rpc(post("{not json".into()).send().await.unwrap()).await;
    assert_eq!((status, code, version), (400, json!(-32700), json!("2.0")));
    // JSON, but no JSON-RPC message.
    let (status, code, _) = rpc(post("[1, 2]".into()).send().await.unwrap()).await;
    assert_eq!((status, code), (400, json!(-32600)));
    // Over the server's own limit (the SDK's 4 MiB is not the limit).
    let big = format!(
        "{{\"jsonrpc\": \"2.0\", \"pad\": \"{}\"}}",
        "x".repeat(3_000)
    );
    let (status, code, _) = rpc(post(big).send().await.unwrap()).await;
    assert_eq!((status, code), (413, json!(-32600)));
    // A session: initialize, then end it.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    let opened = post(init.to_string()).send().await.unwrap();
    assert_eq!(opened.status().as_u16(), 200);
    let mcp_session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    drop(opened);
    let ended = c
        .delete(&url)
        .bearer_auth("s3cret")
        .header("mcp-session-id", &mcp_session)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status().as_u16(), 200);
    server.stop().await;
}

/// Creates a session of the desk (with `authorization` as that header, when given): the
/// creation's answer and the session's MCP URL.
async fn desk_session(
    c: &reqwest::Client,
    base: &str,
    authorization: Option<&str>,
) -> (Value, String) {
    let mut request = c
        .post(format!("{base}/sessions"))
        .body(json!({"env": "desk"}).to_string());
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let created: Value = request.send().await.unwrap().json().await.unwrap();
    let url = format!("{base}{}", created["mcp"].as_str().unwrap());
    (created, url)
}

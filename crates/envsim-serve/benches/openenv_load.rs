//! Episodes through the OpenEnv endpoints against sessions through the native routes, in one
//! run on one server: for each path, ENVSIM_LOAD_SESSIONS episodes (1000) all in flight, each
//! started (`POST /sessions`, or OpenEnv `reset`), stepped ENVSIM_LOAD_STEPS times (5) with
//! the executor as simulator, and — for OpenEnv — ended with an answer that the task's checker
//! rewards. Prints, per path, episodes and tool calls per second and the latency of a tool
//! call as the client sees it; the difference between paths is what the OpenEnv layer adds
//! (episode bookkeeping and its store write, the reward, the WebSocket or HTTP framing).
//! ENVSIM_LOAD_PACE_MS (0) spaces a session's calls by a uniform 0–2×pace think time.
//!
//! `cargo bench -p envsim-serve --bench openenv_load`

#[path = "../tests/common/mod.rs"]
mod common;

use envsim_serve::openenv::{read_tasks, RewardKind, TaskSet};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use common::{knob, percentile};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Path {
    Native,
    OpenEnvHttp,
    OpenEnvWs,
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Native => "native HTTP (/sessions)",
            Path::OpenEnvHttp => "OpenEnv HTTP (reset/step)",
            Path::OpenEnvWs => "OpenEnv WebSocket (/ws)",
        }
    }
}

/// The k-th tool call of session s: alternately a write and a read.
fn call(s: usize, k: usize) -> (String, Value) {
    if k % 2 == 0 {
        (
            "create_ticket".into(),
            json!({"title": format!("t{s}-{k}")}),
        )
    } else {
        ("get_ticket".into(), json!({"ticket_id": "T1"}))
    }
}

/// One episode: its tool calls' latencies (ms) and errors.
async fn episode(
    path: Path,
    client: reqwest::Client,
    url: Arc<String>,
    s: usize,
    steps: usize,
    pace: usize,
) -> (Vec<f64>, Vec<String>) {
    let mut latencies = Vec::new();
    let mut errors = Vec::new();
    let mut rng = envsim_core::rng::Rng::new(s as u64);
    let think = async |rng: &mut envsim_core::rng::Rng| {
        if pace > 0 {
            let wait = rng.below(2 * pace);
            tokio::time::sleep(std::time::Duration::from_millis(wait as u64)).await;
        }
    };
    match path {
        Path::Native | Path::OpenEnvHttp => {
            let id = format!("e{s}");
            let (start, body) = match path {
                Path::Native => (format!("{url}/sessions"), json!({"env": "desk", "seed": s})),
                _ => (
                    format!("{url}/openenv/desk/reset"),
                    json!({"episode_id": id, "task_id": "close"}),
                ),
            };
            let started = client.post(start).body(body.to_string()).send().await;
            let session = match started {
                Ok(r) if r.status().is_success() => {
                    let body: Value = r.json().await.unwrap_or_default();
                    body["id"].as_str().map_or(id.clone(), str::to_owned)
                }
                Ok(r) => return (latencies, vec![format!("start: HTTP {}", r.status())]),
                Err(e) => return (latencies, vec![format!("start: {e}")]),
            };
            for k in 0..=steps {
                think(&mut rng).await;
                let (tool, arguments) = call(s, k);
                let (target, body) = match (path, k == steps) {
                    (Path::Native, true) => break,
                    (Path::Native, false) => (
                        format!("{url}/sessions/{session}/steps"),
                        json!({"name": tool, "arguments": arguments}),
                    ),
                    (_, true) => (
                        format!("{url}/openenv/desk/step"),
                        json!({"episode_id": session, "action": {"answer": "done"}}),
                    ),
                    (_, false) => (
                        format!("{url}/openenv/desk/step"),
                        json!({"episode_id": session, "action": {"tool": tool, "arguments": arguments}}),
                    ),
                };
                let t = Instant::now();
                match client.post(target).body(body.to_string()).send().await {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                        if k < steps {
                            latencies.push(t.elapsed().as_secs_f64() * 1000.0);
                        }
                    }
                    Ok(r) => errors.push(format!("step: HTTP {}", r.status())),
                    Err(e) => errors.push(format!("step: {e}")),
                }
            }
        }
        Path::OpenEnvWs => {
            let ws_url = format!("{}/openenv/desk/ws", url.replacen("http", "ws", 1));
            let Ok((mut ws, _)) = tokio_tungstenite::connect_async(&ws_url).await else {
                return (latencies, vec!["connect".into()]);
            };
            let ask = async |ws: &mut tokio_tungstenite::WebSocketStream<_>,
                             m: Value|
                   -> Result<Value, String> {
                ws.send(Message::Text(m.to_string().into()))
                    .await
                    .map_err(|e| e.to_string())?;
                while let Some(message) = ws.next().await {
                    if let Message::Text(text) = message.map_err(|e| e.to_string())? {
                        return serde_json::from_str(text.as_str()).map_err(|e| e.to_string());
                    }
                }
                Err("closed".into())
            };
            if let Err(e) = ask(
                &mut ws,
                json!({"type": "reset", "data": {"task_id": "close"}}),
            )
            .await
            {
                return (latencies, vec![format!("reset: {e}")]);
            }
            for k in 0..=steps {
                think(&mut rng).await;
                let (tool, arguments) = call(s, k);
                let data = if k == steps {
                    json!({"answer": "done"})
                } else {
                    json!({"tool": tool, "arguments": arguments})
                };
                let t = Instant::now();
                match ask(&mut ws, json!({"type": "step", "data": data})).await {
                    Ok(reply) if reply["type"] == "observation" => {
                        if k < steps {
                            latencies.push(t.elapsed().as_secs_f64() * 1000.0);
                        }
                    }
                    Ok(reply) => errors.push(format!("step: {}", reply["data"]["message"])),
                    Err(e) => errors.push(format!("step: {e}")),
                }
            }
            let _ = ws
                .send(Message::Text(json!({"type": "close"}).to_string().into()))
                .await;
        }
    }
    (latencies, errors)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let sessions = knob("ENVSIM_LOAD_SESSIONS", 1000);
    let steps = knob("ENVSIM_LOAD_STEPS", 5);
    let workers = knob("ENVSIM_LOAD_WORKERS", 2);
    let pace = knob("ENVSIM_LOAD_PACE_MS", 0);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let tasks = read_tasks(
        r#"{"id": "close", "instruction": "Close T1.", "checker": {"type": "state_values", "expect": {"/tickets/T1/status": "closed"}, "absent": []}}"#,
        "bench",
    )
    .expect("the bench's task");
    let config = envsim_serve::ServerConfig {
        task_sets: vec![TaskSet {
            name: "desk".into(),
            env: "desk".into(),
            session: serde_json::Map::new(),
            tasks,
            max_tool_calls: steps + 1,
            terminal_tools: Vec::new(),
            reward: RewardKind::Binary,
        }],
        ..envsim_serve::ServerConfig::default()
    };
    let server = common::Server::start_with(dir.path(), config, workers).await;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(sessions)
        .build()
        .expect("a client");
    let url = Arc::new(server.url.clone());
    println!("| path | episodes | tool calls | errors | episodes/s | tool calls/s | tool call latency p50 / p90 / p99 (ms) |");
    println!("|---|---|---|---|---|---|---|");
    for path in [Path::Native, Path::OpenEnvHttp, Path::OpenEnvWs] {
        let started = Instant::now();
        let runs: Vec<_> = (0..sessions)
            .map(|s| {
                tokio::spawn(episode(
                    path,
                    client.clone(),
                    Arc::clone(&url),
                    s + sessions * path as usize,
                    steps,
                    pace,
                ))
            })
            .collect();
        let mut latencies = Vec::new();
        let mut errors = Vec::new();
        for run in runs {
            let (l, e) = run.await.expect("an episode task");
            latencies.extend(l);
            errors.extend(e);
        }
        let wall = started.elapsed().as_secs_f64();
        latencies.sort_by(f64::total_cmp);
        println!(
            "| {} | {sessions} | {} | {} | {:.0} | {:.0} | {:.1} / {:.1} / {:.1} |",
            path.name(),
            latencies.len(),
            errors.len(),
            sessions as f64 / wall,
            latencies.len() as f64 / wall,
            percentile(&latencies, 50.0),
            percentile(&latencies, 90.0),
            percentile(&latencies, 99.0),
        );
        for e in errors.iter().take(3) {
            eprintln!("{}: error: {e}", path.name());
        }
    }
    server.stop().await;
}

//! Load test of `envsim serve` on loopback: many concurrent sessions stepping with the executor
//! as simulator. For every step, the latency the client sees minus the time the session spent
//! waiting for its simulator (`provenance.simulator_ms`) is the added latency: HTTP, JSON,
//! queueing for a CPU (the client runs in the same process, on the same cores), the session
//! lock, validation bookkeeping and the SQLite write. The server's own time on the step
//! (`server_ms`) minus the simulator's is the added latency inside the server. Prints
//! percentiles of each and the errors, as a Markdown row for docs/benchmarks.md.
//!
//! Knobs (environment): ENVSIM_LOAD_SESSIONS (1000), ENVSIM_LOAD_STEPS (steps per session, 5),
//! ENVSIM_LOAD_WORKERS (executor workers, 2), ENVSIM_LOAD_PACE_MS (mean think time between a
//! session's steps, 0: none, every session steps as soon as its answer comes).
//!
//! `cargo bench -p envsim-serve --bench load`

#[path = "../tests/common/mod.rs"]
mod common;

use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

use common::{knob, percentile};

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let sessions = knob("ENVSIM_LOAD_SESSIONS", 1000);
    let steps = knob("ENVSIM_LOAD_STEPS", 5);
    let workers = knob("ENVSIM_LOAD_WORKERS", 2);
    // Think time between a session's steps, milliseconds (0: as fast as answers come).
    let pace = knob("ENVSIM_LOAD_PACE_MS", 0);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let server =
        common::Server::start_with(dir.path(), envsim_serve::ServerConfig::default(), workers)
            .await;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(sessions)
        .build()
        .expect("a client");
    let url = Arc::new(server.url.clone());
    let started = Instant::now();
    // Every session is created, then steps `steps` times, each session in its own task: all
    // sessions are live and stepping at once.
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let client = client.clone();
        let url = Arc::clone(&url);
        tasks.push(tokio::spawn(async move {
            let mut samples: Vec<(f64, f64, f64)> = Vec::new();
            let mut errors: Vec<String> = Vec::new();
            let created = client
                .post(format!("{url}/sessions"))
                .body(json!({"env": "desk", "seed": s}).to_string())
                .send()
                .await;
            let id = match created {
                Ok(r) if r.status().as_u16() == 201 => {
                    let body: Value = r.json().await.unwrap_or_default();
                    body["id"].as_str().unwrap_or_default().to_owned()
                }
                Ok(r) => {
                    errors.push(format!("create: HTTP {}", r.status()));
                    return (samples, errors);
                }
                Err(e) => {
                    errors.push(format!("create: {e}"));
                    return (samples, errors);
                }
            };
            let mut rng = envsim_core::rng::Rng::new(s as u64);
            for k in 0..steps {
                if pace > 0 {
                    // Uniform in [0, 2 × pace): the sessions drift apart, as agents thinking
                    // between calls do.
                    let wait = rng.below(2 * pace);
                    tokio::time::sleep(std::time::Duration::from_millis(wait as u64)).await;
                }
                let call = if k % 2 == 0 {
                    json!({"name": "create_ticket", "arguments": {"title": format!("t{s}-{k}")}})
                } else {
                    json!({"name": "get_ticket", "arguments": {"ticket_id": "T1"}})
                };
                let t = Instant::now();
                let response = client
                    .post(format!("{url}/sessions/{id}/steps"))
                    .body(call.to_string())
                    .send()
                    .await;
                match response {
                    Ok(r) if r.status().is_success() => {
                        let body: Value = r.json().await.unwrap_or_default();
                        let total = t.elapsed().as_secs_f64() * 1000.0;
                        let simulator = body["provenance"]["simulator_ms"].as_f64().unwrap_or(0.0);
                        let server = body["server_ms"].as_f64().unwrap_or(0.0);
                        samples.push((total, simulator, server));
                    }
                    Ok(r) => errors.push(format!("step: HTTP {}", r.status())),
                    Err(e) => errors.push(format!("step: {e}")),
                }
            }
            (samples, errors)
        }));
    }
    let mut totals = Vec::new();
    let mut added = Vec::new();
    let mut server_added = Vec::new();
    let mut errors = Vec::new();
    for task in tasks {
        let (samples, errs) = task.await.expect("a session task");
        for (total, simulator, server) in samples {
            totals.push(total);
            added.push((total - simulator).max(0.0));
            server_added.push((server - simulator).max(0.0));
        }
        errors.extend(errs);
    }
    let wall = started.elapsed().as_secs_f64();
    totals.sort_by(f64::total_cmp);
    added.sort_by(f64::total_cmp);
    server_added.sort_by(f64::total_cmp);
    println!(
        "| sessions | think time (ms) | steps | executor workers | errors | steps/s | step latency p50 / p99 (ms) | added, seen by the client, p50 / p90 / p99 (ms) | added in the server p50 / p90 / p99 (ms) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {sessions} | {pace} | {} | {workers} | {} | {:.0} | {:.1} / {:.1} | {:.2} / {:.2} / {:.2} | {:.2} / {:.2} / {:.2} |",
        totals.len(),
        errors.len(),
        totals.len() as f64 / wall,
        percentile(&totals, 50.0),
        percentile(&totals, 99.0),
        percentile(&added, 50.0),
        percentile(&added, 90.0),
        percentile(&added, 99.0),
        percentile(&server_added, 50.0),
        percentile(&server_added, 90.0),
        percentile(&server_added, 99.0),
    );
    for e in errors.iter().take(5) {
        eprintln!("error: {e}");
    }
    server.stop().await;
}

//! Replicas of `envsim serve` sharing one PostgreSQL database (ENVSIM_POSTGRES_URL; `.ci/postgres`
//! starts one), as behind a load balancer: ENVSIM_LOAD_REPLICAS servers (3) in this process,
//! each on a runtime of its own, ENVSIM_LOAD_SESSIONS sessions (1000) all in flight, each made
//! on one replica and stepped ENVSIM_LOAD_STEPS times (5), every request sent to the next
//! replica in turn (a request that cannot reach its replica goes to the next one, as a
//! balancer retries). With ENVSIM_LOAD_KILL=1 one replica is killed (its runtime shut down:
//! everything in flight dropped where it stands) when half the steps are answered. Each step
//! writes a ticket titled after the session and step, so the check at the end is exact: for
//! every session, the steps the database holds are exactly the steps answered 200 (none
//! lost), each once (none twice), plus at most the steps whose answer was lost with the killed
//! replica. Prints a Markdown row for docs/benchmarks.md; exits 1 when the check fails.
//!
//! `ENVSIM_POSTGRES_URL=$(.ci/postgres) cargo bench -p envsim-serve --bench replicas`

#[path = "../tests/common/mod.rs"]
mod common;

use common::{knob, percentile};
use envsim_serve::store::Store;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let replicas = knob("ENVSIM_LOAD_REPLICAS", 3).max(1);
    let sessions = knob("ENVSIM_LOAD_SESSIONS", 1000);
    let steps = knob("ENVSIM_LOAD_STEPS", 5);
    let kill = knob("ENVSIM_LOAD_KILL", 0) == 1 && replicas > 1;
    let Some(url) = common::fresh_postgres().await else {
        eprintln!("replicas: set ENVSIM_POSTGRES_URL (.ci/postgres starts a server)");
        return;
    };
    let dirs: Vec<_> = (0..replicas)
        .map(|_| tempfile::tempdir().expect("a temporary folder"))
        .collect();
    let mut servers = Vec::new();
    for dir in &dirs {
        servers.push(Replica::start(dir.path().to_path_buf(), url.clone()).await);
    }
    let urls: Arc<Vec<String>> = Arc::new(servers.iter().map(|s| s.url.clone()).collect());
    let dead: Arc<Vec<AtomicBool>> =
        Arc::new((0..replicas).map(|_| AtomicBool::new(false)).collect());
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(sessions)
        .build()
        .expect("a client");
    let answered = Arc::new(AtomicUsize::new(0));
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    // Sends `body` to the next live replica in turn, trying the others when one cannot
    // answer (connection refused or dropped); the status and body, or why none answered.
    let send = {
        let (client, urls, dead, next) = (
            client.clone(),
            Arc::clone(&urls),
            Arc::clone(&dead),
            Arc::clone(&next),
        );
        move |path: String, body: Value| {
            let (client, urls, dead, next) = (
                client.clone(),
                Arc::clone(&urls),
                Arc::clone(&dead),
                Arc::clone(&next),
            );
            async move {
                let mut last = String::new();
                for _ in 0..urls.len() {
                    let k = next.fetch_add(1, Ordering::Relaxed) % urls.len();
                    if dead[k].load(Ordering::Relaxed) {
                        continue;
                    }
                    match client
                        .post(format!("{}{path}", urls[k]))
                        .body(body.to_string())
                        .send()
                        .await
                    {
                        Ok(r) => {
                            let status = r.status().as_u16();
                            let body: Value = r.json().await.unwrap_or(Value::Null);
                            return Ok((status, body));
                        }
                        // Nothing reached the replica: the next one gets the request, as a
                        // balancer retries. A request sent whose answer was lost is not sent
                        // again (a step is not idempotent): its fate is checked at the end.
                        Err(e) if e.is_connect() => last = e.to_string(),
                        Err(e) => return Err(e.to_string()),
                    }
                }
                Err(last)
            }
        }
    };
    let mut tasks = Vec::new();
    for s in 0..sessions {
        let (send, answered) = (send.clone(), Arc::clone(&answered));
        tasks.push(tokio::spawn(async move {
            let mut ok: Vec<String> = Vec::new();
            let mut lost: Vec<String> = Vec::new();
            let mut conflicts = 0usize;
            let mut latencies = Vec::new();
            let id = match send("/sessions".into(), json!({"env": "desk", "seed": s})).await {
                Ok((201, body)) => body["id"].as_str().unwrap_or_default().to_owned(),
                other => {
                    return (
                        String::new(),
                        ok,
                        lost,
                        conflicts,
                        latencies,
                        format!("create: {other:?}"),
                    )
                }
            };
            for k in 0..steps {
                let title = format!("s{s}-{k}");
                let call = json!({"name": "create_ticket", "arguments": {"title": title}});
                let t = Instant::now();
                match send(format!("/sessions/{id}/steps"), call).await {
                    Ok((200, _)) => {
                        latencies.push(t.elapsed().as_secs_f64() * 1000.0);
                        ok.push(title);
                    }
                    Ok((409, _)) => conflicts += 1,
                    // The answer died with its replica: the step may or may not be stored.
                    Ok((status, _)) if status >= 500 => lost.push(title),
                    Ok((status, body)) => {
                        return (
                            id,
                            ok,
                            lost,
                            conflicts,
                            latencies,
                            format!("step: HTTP {status} {body}"),
                        )
                    }
                    Err(_) => lost.push(title),
                }
                answered.fetch_add(1, Ordering::Relaxed);
            }
            (id, ok, lost, conflicts, latencies, String::new())
        }));
    }
    if kill {
        let half = sessions * steps / 2;
        while answered.load(Ordering::Relaxed) < half {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let victim = servers.pop().expect("a replica");
        dead[replicas - 1].store(true, Ordering::Relaxed);
        victim.kill();
        eprintln!(
            "replicas: killed replica {} after {half} answered steps",
            replicas
        );
    }
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.expect("a session task"));
    }
    let wall = started.elapsed().as_secs_f64();
    // The check, from the database itself.
    let store = Store::open_any(&url).await.expect("the database");
    let stored: BTreeMap<String, Vec<String>> = store
        .load_all()
        .await
        .expect("the sessions")
        .into_iter()
        .map(|s| {
            let titles = s
                .steps
                .iter()
                .filter_map(|r| {
                    r.arguments
                        .get("title")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect();
            (s.id, titles)
        })
        .collect();
    let (mut missing, mut doubled, mut unexplained, mut errors) = (0usize, 0usize, 0usize, 0usize);
    let (mut answered_ok, mut lost_answers, mut conflicts) = (0usize, 0usize, 0usize);
    let mut latencies = Vec::new();
    for (id, ok, lost, c, l, error) in &results {
        if !error.is_empty() {
            errors += 1;
            eprintln!("replicas: {error}");
            continue;
        }
        answered_ok += ok.len();
        lost_answers += lost.len();
        conflicts += c;
        latencies.extend(l);
        let held = stored.get(id).cloned().unwrap_or_default();
        let distinct: BTreeSet<&String> = held.iter().collect();
        doubled += held.len() - distinct.len();
        missing += ok.iter().filter(|t| !distinct.contains(t)).count();
        unexplained += distinct
            .iter()
            .filter(|t| !ok.contains(t) && !lost.contains(t))
            .count();
    }
    latencies.sort_by(f64::total_cmp);
    println!("| replicas | killed | sessions | steps answered 200 | answers lost with the replica | 409 | lost | doubled | unexplained | errors | steps/s | step p50 / p99 (ms) |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {replicas} | {} | {sessions} | {answered_ok} | {lost_answers} | {conflicts} | {missing} | {doubled} | {unexplained} | {errors} | {:.0} | {:.1} / {:.1} |",
        if kill { 1 } else { 0 },
        answered_ok as f64 / wall,
        percentile(&latencies, 50.0),
        percentile(&latencies, 99.0),
    );
    for server in servers {
        server.kill();
    }
    if missing + doubled + unexplained + errors > 0 {
        std::process::exit(1);
    }
}

/// A replica: a server on a runtime of its own, so that killing it drops everything it was
/// doing — connections, handlers, transactions in flight — as a crashed process would.
struct Replica {
    url: String,
    runtime: tokio::runtime::Runtime,
}

impl Replica {
    async fn start(dir: std::path::PathBuf, db: String) -> Replica {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let (tx, rx) = tokio::sync::oneshot::channel();
        runtime.spawn(async move {
            let executor = envsim_sim::backend::ExecutorSimulator::new(Arc::new(
                envsim_exec::Executor::new(2, envsim_exec::Limits::default())
                    .await
                    .expect("python3"),
            ));
            let host = Arc::new(common::DeskHost {
                package: common::desk(&dir),
                executor,
            });
            let store = Store::open_any(&db).await.expect("the database");
            let state =
                envsim_serve::AppState::start(host, store, envsim_serve::ServerConfig::default())
                    .await
                    .expect("a server");
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("a port");
            let _ = tx.send(format!(
                "http://{}",
                listener.local_addr().expect("an address")
            ));
            let _ = envsim_serve::serve(listener, state, std::future::pending()).await;
        });
        let url = rx.await.expect("the replica started");
        Replica { url, runtime }
    }

    /// Kills it: every task of its runtime dropped where it stands.
    fn kill(self) {
        self.runtime.shutdown_background();
    }
}

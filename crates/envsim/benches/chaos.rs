//! Chaos under load: replicas of `envsim serve` (separate processes) sharing one PostgreSQL
//! database, SIGKILLed at random moments and started again, PostgreSQL restarted mid-run,
//! while clients step their sessions, each step under an `Idempotency-Key`, retrying through
//! any live replica until answered (the retry rule of docs/simulation.md).
//!
//! Each step creates a ticket titled after its session and step, so the check at the end is
//! exact: every session's trajectory holds each of its steps exactly once, in order (0 lost,
//! 0 doubled), and every session finished. Also counted: answers by status (a 500 is a
//! failure: every error must have a cause a client can act on), 503s carrying `Retry-After`,
//! and recovery times (a killed replica until it answers again; the database's restart until
//! the next step is stored). Prints a Markdown row for docs/benchmarks.md; exits 1 when a
//! check fails.
//!
//! ```sh
//! ENVSIM_POSTGRES_URL=$(.ci/postgres) \
//! ENVSIM_PG_STOP="su postgres -s /bin/sh -c 'pg_ctl -D $PWD/target/pgdata -m fast -w stop'" \
//! ENVSIM_PG_START="su postgres -s /bin/sh -c 'pg_ctl -D $PWD/target/pgdata -w start'" \
//! cargo bench -p envsim --bench chaos
//! ```
//!
//! `ENVSIM_CHAOS_LOGS=DIR` keeps each replica's standard error in `DIR/replica-PORT.log`.
//! With `ENVSIM_CHAOS_OPENENV=1` the clients play OpenEnv episodes instead (reset before the
//! chaos, each tool call keyed in the action's metadata, a keyed final answer at the end), and
//! the check also reads each episode's bookkeeping: every call counted once, ended by its
//! answer.
//!
//! Knobs: `ENVSIM_CHAOS_REPLICAS` (3), `ENVSIM_CHAOS_SESSIONS` (40), `ENVSIM_CHAOS_STEPS` (25),
//! `ENVSIM_CHAOS_KILLS` (20), `ENVSIM_CHAOS_KILL_EVERY_MS` (400), `ENVSIM_CHAOS_ABANDON_EVERY`
//! (20: one keyed request in 20 is abandoned by its client as soon as it is sent — its answer
//! lost, the step taken or not — and sent again). Without
//! `ENVSIM_POSTGRES_URL` it says so and does nothing; with `ENVSIM_PG_STOP` and
//! `ENVSIM_PG_START` (shell commands) the database is stopped half-way for
//! `ENVSIM_CHAOS_OUTAGE_MS` (2000) and started again; the recovery time runs from its start to
//! the next step stored.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One HTTP/1.1 request (`Connection: close`): status, headers (lower-case names), body.
fn http(
    port: u16,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: Option<&Value>,
    abandon: bool,
) -> std::io::Result<(u16, BTreeMap<String, String>, Value)> {
    let mut stream = std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(2),
    )?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let key = key
        .map(|k| format!("Idempotency-Key: {k}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{key}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    if abandon {
        // A client that gives up at once: the connection closed before the answer.
        let _ = stream.shutdown(std::net::Shutdown::Both);
        return Err(std::io::Error::other("abandoned by the client"));
    }
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let (head, text) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no complete answer"))?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok((
        status,
        headers,
        serde_json::from_str(text).unwrap_or(Value::String(text.into())),
    ))
}

struct Replica {
    port: u16,
    child: Option<Child>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spawn(port: u16, url: &str, envs: &std::path::Path, extra: &[String]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--db", url])
        .arg("--envs")
        .arg(envs)
        .args(["--workers", "1"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(
            std::env::var_os("ENVSIM_CHAOS_LOGS")
                .and_then(|dir| {
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(std::path::Path::new(&dir).join(format!("replica-{port}.log")))
                        .ok()
                })
                .map_or_else(Stdio::null, Stdio::from),
        )
        .spawn()
        .expect("the envsim binary runs")
}

/// Waits until the replica on `port` answers `/health`; how long it took.
fn wait_healthy(port: u16, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if matches!(
            http(port, "GET", "/health", None, None, false),
            Ok((200, _, _))
        ) {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[derive(Default)]
struct Tally {
    by_status: BTreeMap<u16, usize>,
    unreachable: usize,
    with_retry_after: usize,
    five_hundreds: Vec<String>,
    replayed: usize,
    /// The last failure to get any answer.
    last_unreachable: String,
    /// Keyed requests the client gave up on as soon as they were sent.
    abandoned: usize,
}

fn main() {
    let Ok(url) = std::env::var("ENVSIM_POSTGRES_URL") else {
        eprintln!("chaos: set ENVSIM_POSTGRES_URL (.ci/postgres starts a server)");
        return;
    };
    // The database's outage: stopped, down for a while, started again.
    let restart = match (
        std::env::var("ENVSIM_PG_STOP"),
        std::env::var("ENVSIM_PG_START"),
    ) {
        (Ok(stop), Ok(start)) => Some((stop, start)),
        _ => None,
    };
    let outage = Duration::from_millis(knob("ENVSIM_CHAOS_OUTAGE_MS", 2000));
    let replicas = knob("ENVSIM_CHAOS_REPLICAS", 3).max(2) as usize;
    let sessions = knob("ENVSIM_CHAOS_SESSIONS", 40) as usize;
    let steps = knob("ENVSIM_CHAOS_STEPS", 25) as usize;
    let kills = knob("ENVSIM_CHAOS_KILLS", 20) as usize;
    let every = Duration::from_millis(knob("ENVSIM_CHAOS_KILL_EVERY_MS", 400));
    // One keyed request in this many is abandoned by its client right after sending (0: none).
    let abandon_every = knob("ENVSIM_CHAOS_ABANDON_EVERY", 20) as usize;
    let dir = tempfile::tempdir().expect("a temporary folder");
    envsim_testkit::desk::write(dir.path()).expect("the desk package");
    // OpenEnv episodes instead of plain sessions: one task, no reward, a budget no run meets.
    let openenv = knob("ENVSIM_CHAOS_OPENENV", 0) == 1;
    let extra: Vec<String> = if openenv {
        let tasks = dir.path().join("tasks.jsonl");
        std::fs::write(
            &tasks,
            "{\"id\": \"t\", \"instruction\": \"Open tickets.\"}\n",
        )
        .expect("the task file");
        vec![
            "--openenv".into(),
            format!("desk={}", tasks.display()),
            "--max-tool-calls".into(),
            "1000000".into(),
        ]
    } else {
        Vec::new()
    };
    let servers: Arc<Vec<Mutex<Replica>>> = Arc::new(
        (0..replicas)
            .map(|_| {
                let port = free_port();
                Mutex::new(Replica {
                    port,
                    child: Some(spawn(port, &url, dir.path(), &extra)),
                })
            })
            .collect(),
    );
    let ports: Vec<u16> = servers.iter().map(|r| r.lock().unwrap().port).collect();
    for &port in &ports {
        wait_healthy(port, Duration::from_secs(120)).expect("a replica came up");
    }
    let tally = Arc::new(Mutex::new(Tally::default()));
    let next = Arc::new(AtomicUsize::new(0));
    // Sends a request to the next replica in turn until one answers with anything but a
    // connection failure or a status a client retries (502, 503, 504).
    let send = {
        let (ports, tally, next) = (ports.clone(), Arc::clone(&tally), Arc::clone(&next));
        move |method: &str, path: &str, key: Option<&str>, body: Option<&Value>| {
            let started = Instant::now();
            let mut wait = Duration::from_millis(20);
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let port = ports[n % ports.len()];
                // Every `abandon_every`-th keyed request is abandoned as soon as it is sent.
                let abandon =
                    key.is_some() && abandon_every > 0 && n % abandon_every == abandon_every / 2;
                if abandon {
                    tally.lock().unwrap().abandoned += 1;
                }
                match http(port, method, path, key, body, abandon) {
                    Ok((status, headers, answer)) => {
                        let mut t = tally.lock().unwrap();
                        *t.by_status.entry(status).or_default() += 1;
                        if status == 503 && headers.contains_key("retry-after") {
                            t.with_retry_after += 1;
                        }
                        if status >= 500 && status != 503 && status != 502 && status != 504 {
                            t.five_hundreds.push(format!("{status} {path}: {answer}"));
                        }
                        if headers.get("idempotent-replayed").map(String::as_str) == Some("true") {
                            t.replayed += 1;
                        }
                        if !matches!(status, 502..=504) {
                            return Ok((status, answer));
                        }
                    }
                    Err(e) => {
                        let mut t = tally.lock().unwrap();
                        t.unreachable += 1;
                        t.last_unreachable = format!("{method} {path} on {port}: {e}");
                    }
                }
                if started.elapsed() > Duration::from_secs(120) {
                    return Err(format!("{method} {path}: no answer in 120 s"));
                }
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_millis(500));
            }
        }
    };
    let stepped = Arc::new(AtomicUsize::new(0));
    // Clients step until the chaos is over (and at least `steps` times each).
    let over = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    // The sessions, made before the chaos (every replica has learned the environment once
    // it has made one: a replica started again learns it on its first request).
    let mut made = Vec::with_capacity(sessions);
    for s in 0..sessions {
        let (path, body) = if openenv {
            (
                "/openenv/desk/reset",
                json!({"episode_id": format!("e{s}"), "task_id": "t"}),
            )
        } else {
            ("/sessions", json!({"env": "desk"}))
        };
        let (status, created) =
            send("POST", path, None, Some(&body)).unwrap_or_else(|e| panic!("session {s}: {e}"));
        assert!(status == 200 || status == 201, "session {s}: {created}");
        made.push(if openenv {
            format!("e{s}")
        } else {
            created["id"].as_str().unwrap_or_default().to_owned()
        });
    }
    let clients: Vec<_> = made
        .into_iter()
        .enumerate()
        .map(|(s, id)| {
            let (send, stepped, over) = (send.clone(), Arc::clone(&stepped), Arc::clone(&over));
            std::thread::spawn(move || -> Result<(String, usize), String> {
                let mut k = 0;
                while k < steps || !over.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                    let key = format!("s{s}-k{k}");
                    let (path, body) = if openenv {
                        (
                            "/openenv/desk/step".to_owned(),
                            json!({"episode_id": id, "action":
                            {"tool": "create_ticket", "arguments": {"title": key},
                             "metadata": {"idempotency_key": key}}}),
                        )
                    } else {
                        (
                            format!("/sessions/{id}/steps"),
                            json!({"name": "create_ticket", "arguments": {"title": key}}),
                        )
                    };
                    let (status, answer) = send("POST", &path, Some(&key), Some(&body))?;
                    if status != 200 {
                        return Err(format!("session {s} step {k}: {status} {answer}"));
                    }
                    stepped.fetch_add(1, Ordering::Relaxed);
                    k += 1;
                }
                if openenv {
                    // The final answer, keyed too: a retry gets its reply, not "it is over".
                    let key = format!("s{s}-answer");
                    let body = json!({"episode_id": id, "action": {"answer": "done",
                                      "metadata": {"idempotency_key": key}}});
                    let (status, answer) =
                        send("POST", "/openenv/desk/step", Some(&key), Some(&body))?;
                    if status != 200 || answer["done"] != true {
                        return Err(format!("episode {s}: the answer got {status} {answer}"));
                    }
                }
                Ok((id, k))
            })
        })
        .collect();
    // The killer: a random live replica SIGKILLed and started again, `kills` times; the
    // database restarted once, half-way.
    let mut rng = envsim_core::rng::Rng::new(7);
    let mut recoveries = Vec::new();
    let mut db_recovery = None;
    for k in 0..kills {
        std::thread::sleep(
            every / 2 + Duration::from_millis(rng.below(every.as_millis() as usize) as u64),
        );
        let victim = rng.below(replicas);
        let port = {
            let mut r = servers[victim].lock().unwrap();
            if let Some(mut child) = r.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
            r.child = Some(spawn(r.port, &url, dir.path(), &extra));
            r.port
        };
        if let Some(up) = wait_healthy(port, Duration::from_secs(60)) {
            recoveries.push(up.as_secs_f64());
        }
        if k == kills / 2 {
            if let Some((stop, start)) = &restart {
                let run = |command: &str, what: &str| {
                    let status = Command::new("sh").args(["-c", command]).status();
                    assert!(status.is_ok_and(|s| s.success()), "{what} failed");
                };
                run(stop, "ENVSIM_PG_STOP");
                let down = Instant::now();
                let failed_before = tally
                    .lock()
                    .unwrap()
                    .by_status
                    .get(&503)
                    .copied()
                    .unwrap_or(0);
                std::thread::sleep(outage);
                run(start, "ENVSIM_PG_START");
                let before = stepped.load(Ordering::Relaxed);
                let at = Instant::now();
                eprintln!(
                    "the database was down {:.2} s: {} answers 503 meanwhile",
                    down.elapsed().as_secs_f64(),
                    tally
                        .lock()
                        .unwrap()
                        .by_status
                        .get(&503)
                        .copied()
                        .unwrap_or(0)
                        - failed_before
                );
                while stepped.load(Ordering::Relaxed) == before
                    && at.elapsed() < Duration::from_secs(60)
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                db_recovery = Some(at.elapsed().as_secs_f64());
            }
        }
    }
    over.store(true, Ordering::Relaxed);
    let ids: Vec<Result<(String, usize), String>> = clients
        .into_iter()
        .map(|c| c.join().unwrap_or_else(|_| Err("a client panicked".into())))
        .collect();
    let wall = started.elapsed().as_secs_f64();
    // The check: each session's trajectory, read through any replica.
    let (mut lost, mut doubled, mut unexplained, mut unfinished) = (0, 0, 0, 0);
    let mut problems = Vec::new();
    for (s, id) in ids.iter().enumerate() {
        let (id, steps) = match id {
            Ok((id, n)) => (id, *n),
            Err(e) => {
                unfinished += 1;
                problems.push(e.clone());
                continue;
            }
        };
        let Ok((200, trajectory)) = send("GET", &format!("/sessions/{id}/trajectory"), None, None)
        else {
            problems.push(format!("session {s}: its trajectory could not be read"));
            unfinished += 1;
            continue;
        };
        let titles: Vec<String> = trajectory["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|step| {
                step["action"]["arguments"]["title"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect();
        let expected: Vec<String> = (0..steps).map(|k| format!("s{s}-k{k}")).collect();
        for e in &expected {
            match titles.iter().filter(|t| *t == e).count() {
                0 => lost += 1,
                1 => {}
                n => doubled += n - 1,
            }
        }
        unexplained += titles.iter().filter(|t| !expected.contains(t)).count();
        if openenv {
            // The episode's bookkeeping: every call counted once, ended by its answer.
            let state = send(
                "GET",
                &format!("/openenv/desk/state?episode_id={id}"),
                None,
                None,
            );
            match state {
                Ok((200, e)) if e["tool_calls"] == steps && e["finish"] == "final_answer" => {}
                other => {
                    unfinished += 1;
                    problems.push(format!("episode {s}: {other:?}"));
                }
            }
        }
        if titles != expected && problems.len() < 5 {
            problems.push(format!("session {s}: {titles:?}"));
        }
    }
    for r in servers.iter() {
        if let Some(mut child) = r.lock().unwrap().child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    let t = tally.lock().unwrap();
    recoveries.sort_by(f64::total_cmp);
    let p = |q: f64| {
        recoveries
            .get(((recoveries.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    let statuses: Vec<String> = t
        .by_status
        .iter()
        .map(|(s, n)| format!("{s}: {n}"))
        .collect();
    println!(
        "| {replicas} | {sessions} | {} | {} kills | {} | {} | {lost} | {doubled} | {unexplained} | {unfinished} | {} | {} | {} ({} with Retry-After) | {} | {:.2} / {:.2} | {} | {wall:.1} |",
        stepped.load(Ordering::Relaxed),
        recoveries.len(),
        t.abandoned,
        if restart.is_some() { "yes" } else { "no" },
        t.replayed,
        t.unreachable,
        t.by_status.get(&503).copied().unwrap_or(0),
        t.with_retry_after,
        t.five_hundreds.len(),
        p(0.5),
        p(1.0),
        db_recovery.map_or("-".to_owned(), |d| format!("{d:.2}")),
    );
    eprintln!(
        "answers by status: {}; last request without an answer: {}",
        statuses.join(", "),
        t.last_unreachable
    );
    for problem in problems.iter().chain(t.five_hundreds.iter()).take(10) {
        eprintln!("  {}", problem.chars().take(400).collect::<String>());
    }
    let failed = lost + doubled + unexplained + unfinished + t.five_hundreds.len() > 0
        || t.by_status.get(&503).copied().unwrap_or(0) != t.with_retry_after;
    if failed {
        eprintln!("chaos: FAILED");
        std::process::exit(1);
    }
}

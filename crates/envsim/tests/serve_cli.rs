//! `envsim serve` with OpenEnv task sets from a file, end to end with the binary: a task set
//! over a corpus package, its episodes' sessions anchored as the file says, a reward from the
//! checker made by executing the task's reference call; and the file's mistakes refused.

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One HTTP/1.1 request with `Connection: close`: the status and the JSON body.
fn http(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> std::io::Result<(u16, Value)> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let text = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((
        status,
        serde_json::from_str(text).unwrap_or(Value::String(text.into())),
    ))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(dir: &std::path::Path, port: u16, sets: &std::path::Path) -> Served {
    Served(
        Command::new(env!("CARGO_BIN_EXE_envsim"))
            .args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--db"])
            .arg(dir.join("sessions.sqlite"))
            .arg("--openenv-sets")
            .arg(sets)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("runs"),
    )
}

#[test]
fn task_sets_from_a_file_serve_rewarded_episodes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tasks.jsonl"),
        r#"{"id": "assign", "instruction": "Assign TCK-5002 to AG-05.", "reference_calls": [{"name": "assign_ticket", "arguments": {"ticket_id": "TCK-5002", "agent_id": "AG-05"}}]}"#,
    )
    .unwrap();
    let sets = dir.path().join("sets.json");
    std::fs::write(
        &sets,
        json!([{"name": "desk", "env": "helpdesk_tickets", "tasks": "tasks.jsonl",
                "session": {"anchor": "full"}, "max_tool_calls": 3, "reward": "partial"}])
        .to_string(),
    )
    .unwrap();
    let port = free_port();
    let _server = serve(dir.path(), port, &sets);
    let started = Instant::now();
    loop {
        match http(port, "GET", "/openenv/desk/health", None) {
            Ok((200, body)) => {
                assert_eq!(body, json!({"status": "healthy"}));
                break;
            }
            _ if started.elapsed() < Duration::from_secs(60) => {
                std::thread::sleep(Duration::from_millis(200))
            }
            other => panic!("the server did not come up: {other:?}"),
        }
    }
    let (status, reset) = http(
        port,
        "POST",
        "/openenv/desk/reset",
        Some(&json!({"task_id": "assign", "episode_id": "e1"})),
    )
    .unwrap();
    assert_eq!(status, 200, "{reset}");
    assert_eq!(
        reset["observation"]["instruction"],
        "Assign TCK-5002 to AG-05."
    );
    assert_eq!(reset["observation"]["max_tool_calls"], 3);
    let step = |action: Value| {
        http(
            port,
            "POST",
            "/openenv/desk/step",
            Some(&json!({"episode_id": "e1", "action": action})),
        )
        .unwrap()
    };
    let (_, r) = step(
        json!({"tool": "assign_ticket", "arguments": {"ticket_id": "TCK-5002", "agent_id": "AG-05"}}),
    );
    assert_eq!(
        (r["reward"].clone(), r["done"].clone()),
        (json!(0.0), json!(false)),
        "{r}"
    );
    assert_eq!(r["observation"]["success"], true);
    let (_, r) = step(json!({"answer": "Assigned."}));
    assert_eq!(
        (r["reward"].clone(), r["done"].clone()),
        (json!(1.0), json!(true)),
        "{r}"
    );
    let detail = &r["observation"]["reward_detail"];
    assert_eq!(detail["checks"], 3, "{detail}");
    assert_eq!(detail["failures"], json!([]));
    // The episode's session is anchored as the file says.
    let (_, session) = http(port, "GET", "/sessions/e1", None).unwrap();
    assert_eq!(session["anchoring"]["mode"], "full", "{session}");
    // Its trajectory is an RL rollout that `audit` and `curate` read like any trajectory.
    let (_, trajectory) = http(port, "GET", "/sessions/e1/trajectory", None).unwrap();
    assert_eq!(trajectory["finish"], "final_answer");
    assert_eq!(trajectory["rewards"], json!([0.0, 1.0]));
    let rollouts = dir.path().join("rollouts.jsonl");
    std::fs::write(&rollouts, format!("{trajectory}\n")).unwrap();
    let audit = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .arg("audit")
        .arg(&rollouts)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&audit.stdout);
    assert!(
        audit.status.success(),
        "{}",
        String::from_utf8_lossy(&audit.stderr)
    );
    assert!(
        shown.contains("0 of 1 calls break their tool's schema"),
        "{shown}"
    );
    let curated = dir.path().join("curated");
    let curate = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .arg("curate")
        .arg(&rollouts)
        .arg("--out")
        .arg(&curated)
        .output()
        .unwrap();
    assert!(
        curate.status.success(),
        "{}",
        String::from_utf8_lossy(&curate.stderr)
    );
    let lines = std::fs::read_to_string(curated.join("openai.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 1, "{lines}");
}

#[test]
fn a_bad_task_set_file_is_refused_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let sets = dir.path().join("sets.json");
    for (text, says) in [
        (
            r#"[{"name": "x", "env": "nowhere"}]"#.to_owned(),
            "task set x: no environment \"nowhere\"".to_owned(),
        ),
        (
            "[{\"name\": \"x\",\n \"env\": 3}]".to_owned(),
            format!("{}: line 2, column", sets.display()),
        ),
        (
            r#"[{"name": "x", "env": "helpdesk_tickets", "session": {"primery": "local"}}]"#
                .to_owned(),
            "unknown field `primery`".to_owned(),
        ),
    ] {
        std::fs::write(&sets, &text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_envsim"))
            .args(["serve", "--addr", "127.0.0.1:0", "--db"])
            .arg(dir.path().join("s.sqlite"))
            .arg("--openenv-sets")
            .arg(&sets)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{text}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&says), "{text}: {stderr}");
    }
}

/// The issue's case, as a new user meets it: walk tasks of `online_shop` synthesized with the
/// executor, exported as RL episodes, served over OpenEnv; each task's reference calls
/// replayed under a seed other than synthesis's earn reward 1 (its checkout draws another
/// payment reference and stamps another time than the checker's runs did).
#[test]
fn reference_calls_replayed_over_openenv_earn_reward_one_under_any_seed() {
    let dir = tempfile::tempdir().unwrap();
    let synth_out = dir.path().join("synth.jsonl");
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_envsim"))
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    run(&[
        "synth",
        "--env",
        "online_shop",
        "--tasks",
        "walks",
        "--count",
        "12",
        "--agent",
        "scripted",
        "--backend",
        "executor",
        "--max-tool-calls",
        "10",
        "--store",
        dir.path().join("s.sqlite").to_str().unwrap(),
        "--out",
        synth_out.to_str().unwrap(),
    ]);
    let curated = dir.path().join("curated");
    run(&[
        "curate",
        synth_out.to_str().unwrap(),
        "--formats",
        "rl",
        "--out",
        curated.to_str().unwrap(),
    ]);
    let episodes: Vec<Value> = std::fs::read_to_string(curated.join("rl_episodes.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(episodes.len(), 12);
    let sets = dir.path().join("sets.json");
    std::fs::write(
        &sets,
        json!([{"name": "shop", "env": "online_shop", "tasks": curated.join("rl_episodes.jsonl"),
                "max_tool_calls": 30}])
        .to_string(),
    )
    .unwrap();
    let port = free_port();
    let _server = serve(dir.path(), port, &sets);
    let started = Instant::now();
    while !matches!(
        http(port, "GET", "/openenv/shop/health", None),
        Ok((200, _))
    ) {
        assert!(started.elapsed() < Duration::from_secs(60), "no server");
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut rewards = Vec::new();
    for (k, episode) in episodes.iter().enumerate() {
        for seed in [7, 8] {
            let id = format!("e{k}-{seed}");
            let (status, reset) = http(
                port,
                "POST",
                "/openenv/shop/reset",
                Some(&json!({"task_id": episode["id"], "episode_id": id, "seed": seed})),
            )
            .unwrap();
            assert_eq!(status, 200, "{reset}");
            let step = |action: Value| {
                http(
                    port,
                    "POST",
                    "/openenv/shop/step",
                    Some(&json!({"episode_id": id, "action": action})),
                )
                .unwrap()
                .1
            };
            // A look around first, as agents do: every later call runs at another step.
            step(json!({"tool": "list_products", "arguments": {}}));
            for call in episode["reference_calls"].as_array().unwrap() {
                step(json!({"tool": call["name"], "arguments": call["arguments"]}));
            }
            let last = step(json!({"answer": "Done."}));
            rewards.push((
                format!("{} seed {seed}", episode["id"]),
                last["reward"].clone(),
                last["observation"]["reward_detail"]["failures"].clone(),
            ));
        }
    }
    let missed: Vec<_> = rewards.iter().filter(|r| r.1 != json!(1.0)).collect();
    assert!(
        missed.is_empty(),
        "{} of {}: {missed:?}",
        missed.len(),
        rewards.len()
    );
    // The checkout's payment reference is drawn from the seed: some checker must say so.
    assert!(
        episodes.iter().any(|e| e["checker"]["vary"]
            .as_object()
            .is_some_and(|v| v.keys().any(|k| k.ends_with("/reference")))),
        "no checkout among the tasks"
    );
}

/// A simulator endpoint that answers garbage or hangs, behind sessions without the code to
/// escalate to: garbage is regenerated a bounded number of times and the step taken as
/// uncertain with the state unchanged; a hang fails the step within the request timeout (one
/// request) with a 502 naming the model and the timeout, and nothing is taken.
#[test]
fn a_simulator_endpoint_answering_garbage_or_hanging_is_bounded_and_named() {
    use envsim_testkit::openai_double::{DoubleConfig, OpenAiDouble};
    let dir = tempfile::tempdir().unwrap();
    envsim_testkit::desk::write(dir.path()).unwrap();
    let double = OpenAiDouble::spawn(DoubleConfig {
        default_answer: Some("<html>this is not an answer</html>".into()),
        ..DoubleConfig::default()
    })
    .unwrap();
    let port = free_port();
    let _server = Served(
        Command::new(env!("CARGO_BIN_EXE_envsim"))
            .args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--db"])
            .arg(dir.path().join("sessions.sqlite"))
            .arg("--envs")
            .arg(dir.path())
            .args(["--base-url", &double.base_url(), "--model", "sim"])
            .args(["--request-timeout", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("runs"),
    );
    let started = Instant::now();
    while !matches!(http(port, "GET", "/health", None), Ok((200, _))) {
        assert!(started.elapsed() < Duration::from_secs(60), "no server");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, created) = http(
        port,
        "POST",
        "/sessions",
        Some(&json!({"env": "desk", "no_code": true, "primary": "openai"})),
    )
    .unwrap();
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let call = json!({"name": "create_ticket", "arguments": {"title": "b"}});
    let steps = format!("/sessions/{id}/steps");
    // Garbage: one try and two regenerations, then the step is taken as uncertain.
    let (status, step) = http(port, "POST", &steps, Some(&call)).unwrap();
    assert_eq!(status, 200, "{step}");
    assert_eq!(double.requests(), 3, "{step}");
    assert_eq!(step["provenance"]["uncertain"], true, "{step}");
    let (_, state) = http(port, "GET", &format!("/sessions/{id}/state"), None).unwrap();
    assert_eq!(state["tickets"].as_object().unwrap().len(), 1, "{state}");
    // A hang: every request from now on waits forever.
    double.set_hold_after(Some(double.requests()));
    let asked = Instant::now();
    let (status, failed) = http(port, "POST", &steps, Some(&call)).unwrap();
    let waited = asked.elapsed();
    eprintln!(
        "a hung endpoint failed the step in {:.2} s",
        waited.as_secs_f64()
    );
    assert_eq!(status, 502, "{failed}");
    let message = failed["error"].as_str().unwrap_or_default();
    assert!(message.contains("sim"), "{message}");
    assert!(message.contains("no answer within"), "{message}");
    assert!(waited < Duration::from_secs(15), "{waited:?}");
    // One request: a backend that does not answer is not asked again.
    assert_eq!(double.requests(), 3 + 1);
    let (_, trajectory) = http(port, "GET", &format!("/sessions/{id}/trajectory"), None).unwrap();
    assert_eq!(trajectory["steps"].as_array().unwrap().len(), 1);
}

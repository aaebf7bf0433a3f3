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

/// Two servers on one database serve any session: a session made on one is stepped on the
/// other, each sees the other's steps, marks and rollbacks, concurrent steps of one session
/// from both are each taken once or refused (409) — none lost, none twice — and an OpenEnv
/// episode moves between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_on_one_database_serve_any_session() {
    let Some(url) = fresh_postgres().await else {
        return;
    };
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Server::start_on(da.path(), Store::open_any(&url).await.unwrap(), config(), 2).await;
    let b = Server::start_on(db.path(), Store::open_any(&url).await.unwrap(), config(), 2).await;
    let c = reqwest::Client::new();
    let (status, created) = post(&c, &format!("{}/sessions", a.url), json!({"env": "desk"})).await;
    assert_eq!(status, 201);
    let id = created["id"].as_str().unwrap().to_owned();
    let on = |server: &Server, path: &str| format!("{}/sessions/{id}{path}", server.url);
    let create = |title: String| json!({"name": "create_ticket", "arguments": {"title": title}});
    // Made on A, stepped on B, then on A again (which must read B's step first).
    let (status, r) = post(&c, &on(&b, "/steps"), create("from-b".into())).await;
    assert_eq!((status, r["step"].clone()), (200, json!(1)), "{r}");
    let (status, r) = post(&c, &on(&a, "/steps"), create("from-a".into())).await;
    assert_eq!((status, r["step"].clone()), (200, json!(2)), "{r}");
    let (_, ta) = get(&c, &on(&a, "/trajectory")).await;
    let (_, tb) = get(&c, &on(&b, "/trajectory")).await;
    assert_eq!(ta, tb);
    assert_eq!(ta["steps"].as_array().unwrap().len(), 2);
    // A mark made on B, a rollback to it on A, seen on B.
    let (status, _) = post(&c, &on(&b, "/snapshots"), json!({"name": "one"})).await;
    assert_eq!(status, 200);
    let (_, _) = post(&c, &on(&a, "/steps"), create("gone".into())).await;
    let (status, r) = post(&c, &on(&a, "/rollback"), json!({"name": "one"})).await;
    assert_eq!((status, r["steps"].clone()), (200, json!(2)), "{r}");
    let (_, state) = get(&c, &on(&b, "/state")).await;
    assert!(
        state["tickets"]
            .as_object()
            .unwrap()
            .values()
            .all(|t| t["title"] != "gone"),
        "{state}"
    );

    // Concurrent steps from both servers: each taken once or refused.
    let calls: Vec<_> = (0..24)
        .map(|k| {
            let url = on(if k % 2 == 0 { &a } else { &b }, "/steps");
            let c = c.clone();
            tokio::spawn(async move {
                let title = format!("c{k}");
                let r = c
                    .post(url)
                    .body(
                        json!({"name": "create_ticket", "arguments": {"title": title}}).to_string(),
                    )
                    .send()
                    .await
                    .unwrap();
                (title, r.status().as_u16())
            })
        })
        .collect();
    let mut taken = Vec::new();
    for call in calls {
        let (title, status) = call.await.unwrap();
        assert!(status == 200 || status == 409, "{title}: {status}");
        if status == 200 {
            taken.push(title);
        }
    }
    assert!(!taken.is_empty());
    let (_, ta) = get(&c, &on(&a, "/trajectory")).await;
    let (_, tb) = get(&c, &on(&b, "/trajectory")).await;
    assert_eq!(ta, tb);
    let mut stepped: Vec<String> = ta["steps"].as_array().unwrap()[2..]
        .iter()
        .map(|s| {
            s["action"]["arguments"]["title"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    stepped.sort();
    taken.sort();
    assert_eq!(
        stepped, taken,
        "every step answered 200 is stored once, and no other"
    );

    // An OpenEnv episode reset on A, stepped on B, answered on A.
    let (_, _) = post(
        &c,
        &format!("{}/openenv/desk/reset", a.url),
        json!({"task_id": "close", "episode_id": "shared"}),
    )
    .await;
    let (status, r) = post(&c, &format!("{}/openenv/desk/step", b.url), json!({"episode_id": "shared", "action": {"tool": "close_ticket", "arguments": {"ticket_id": "T1"}}})).await;
    assert_eq!(status, 200, "{r}");
    let (_, r) = post(
        &c,
        &format!("{}/openenv/desk/step", a.url),
        json!({"episode_id": "shared", "action": {"answer": "done"}}),
    )
    .await;
    assert_eq!(
        (r["reward"].clone(), r["observation"]["tool_calls"].clone()),
        (json!(1.0), json!(1)),
        "{r}"
    );
    let (_, s) = get(
        &c,
        &format!("{}/openenv/desk/state?episode_id=shared", b.url),
    )
    .await;
    assert_eq!(
        (s["done"].clone(), s["step_count"].clone()),
        (json!(true), json!(2)),
        "{s}"
    );

    // Deleted on B: gone on A too.
    let r = c.delete(on(&b, "")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let (status, _) = get(&c, &on(&a, "/state")).await;
    assert_eq!(status, 404);
    a.stop().await;
    b.stop().await;
}

/// A server's idle sweep drops a session it has not used, but leaves it in the database when
/// another server used it meanwhile; the first serves it again from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_idle_on_one_server_but_used_on_another_is_kept() {
    let Some(url) = fresh_postgres().await else {
        return;
    };
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let short = ServerConfig {
        idle_ttl: std::time::Duration::from_secs(1),
        ..config()
    };
    let a = Server::start_on(da.path(), Store::open_any(&url).await.unwrap(), short, 2).await;
    let b = Server::start_on(db.path(), Store::open_any(&url).await.unwrap(), config(), 2).await;
    let c = reqwest::Client::new();
    let (_, created) = post(&c, &format!("{}/sessions", a.url), json!({"env": "desk"})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    // B uses the session every 300 ms for 2.4 s while A (idle time 1 s, swept every second)
    // does not.
    let step = json!({"name": "get_ticket", "arguments": {"ticket_id": "T1"}});
    for _ in 0..8 {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let (status, _) = post(&c, &format!("{}/sessions/{id}/steps", b.url), step.clone()).await;
        assert_eq!(status, 200);
    }
    a.state.expire().await;
    assert!(a.state.is_empty().await, "A dropped it");
    let (status, r) = post(&c, &format!("{}/sessions/{id}/steps", a.url), step).await;
    assert_eq!((status, r["step"].clone()), (200, json!(9)), "{r}");
    a.stop().await;
    b.stop().await;
}

/// A step retried under its idempotency key through the other server, one after the other
/// and at the same moment: answered with the step taken, taken once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_step_retried_through_another_server_is_taken_once() {
    let Some(url) = fresh_postgres().await else {
        return;
    };
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Server::start_on(da.path(), Store::open_any(&url).await.unwrap(), config(), 2).await;
    let b = Server::start_on(db.path(), Store::open_any(&url).await.unwrap(), config(), 2).await;
    let c = reqwest::Client::new();
    let (_, created) = post(&c, &format!("{}/sessions", a.url), json!({"env": "desk"})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let keyed = |server: &Server, key: &str, title: &str| {
        c.post(format!("{}/sessions/{id}/steps", server.url))
            .header("Idempotency-Key", key)
            .body(json!({"name": "create_ticket", "arguments": {"title": title}}).to_string())
            .send()
    };
    let first: Value = keyed(&a, "k1", "x").await.unwrap().json().await.unwrap();
    let retried = keyed(&b, "k1", "x").await.unwrap();
    assert_eq!(retried.headers()["idempotent-replayed"], "true");
    let retried: Value = retried.json().await.unwrap();
    assert_eq!(
        (retried["step"].clone(), retried["observation"].clone()),
        (first["step"].clone(), first["observation"].clone())
    );
    // The same request sent to both at once (a client that gave up on one too early).
    let (ra, rb) = tokio::join!(keyed(&a, "k2", "y"), keyed(&b, "k2", "y"));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    let statuses = (ra.status().as_u16(), rb.status().as_u16());
    let (ra, rb): (Value, Value) = (ra.json().await.unwrap(), rb.json().await.unwrap());
    // Both answered with step 2: one took it; the other found it taken, before it stepped or
    // when its commit lost the race and it read the session again.
    assert_eq!(statuses, (200, 200), "{ra} {rb}");
    assert_eq!(
        (ra["step"].clone(), rb["step"].clone()),
        (json!(2), json!(2))
    );
    assert_eq!(ra["observation"], rb["observation"]);
    let (_, trajectory) = get(&c, &format!("{}/sessions/{id}/trajectory", b.url)).await;
    let titles: Vec<&str> = trajectory["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["action"]["arguments"]["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["x", "y"]);
    a.stop().await;
    b.stop().await;
}

/// An episode's bookkeeping never goes back: a server finishing a step from an older copy (a
/// request its client gave up on) does not overwrite the steps counted since.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_copy_of_an_episode_does_not_overwrite_a_newer_one() {
    let Some(url) = fresh_postgres().await else {
        return;
    };
    let store = Store::open_any(&url).await.unwrap();
    store
        .create("ep", &json!({"env": "desk"}), &json!({}), 0.0)
        .await
        .unwrap();
    let at = |n: usize| json!({"set": "desk", "tool_calls": n, "rewards": vec![0.0; n]});
    store.put_episode("ep", &at(2)).await.unwrap();
    store.put_episode("ep", &at(1)).await.unwrap();
    assert_eq!(store.load_episode("ep").await.unwrap(), Some(at(2)));
    store.put_episode("ep", &at(3)).await.unwrap();
    assert_eq!(store.load_episode("ep").await.unwrap(), Some(at(3)));
}

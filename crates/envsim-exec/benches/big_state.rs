//! Per-call cost on a multi-MB state: a chain of calls through the sandboxed executor (one
//! worker, the instance kept warm between steps) against plain in-process Python loops doing
//! the same calls, in one run: `cargo bench -p envsim-exec --bench big_state` (knobs:
//! `ENVSIM_BENCH_STATE_MB`, default 3; `ENVSIM_BENCH_CALLS`, default 40). Numbers go to
//! docs/benchmarks.md.
//!
//! Baselines, both one plain Python process without sandbox or IPC:
//! - *cold loop*: per call, decode the state text, construct, call, encode the state after
//!   (what a fresh `env call` has to do);
//! - *warm loop*: one live instance; per call, call and encode the state after (the least any
//!   tool that hands back the state as JSON can do).

use envsim_exec::{Call, EnvCode, Executor, Limits};
use serde_json::{json, Map, Value};
use std::time::Instant;

const CODE: &str = r#"
class Ledger:
    def __init__(self, init_config):
        self.users = {}
        self.orders = {}
        self.settings = {}

    def get_user(self, user_id: str):
        if user_id not in self.users:
            return {"success": False, "error": f"no user {user_id}"}
        return {"success": True, "data": self.users[user_id]}

    def update_email(self, user_id: str, email: str):
        if user_id not in self.users:
            return {"success": False, "error": f"no user {user_id}"}
        self.users[user_id]["email"] = email
        return {"success": True, "message": "updated"}

    def add_order(self, user_id: str, amount: float):
        oid = "O%06d" % (len(self.orders) + 1)
        self.orders[oid] = {"user_id": user_id, "amount": amount, "status": "new", "lines": []}
        return {"success": True, "order_id": oid}

    def total_for(self, user_id: str):
        total = sum(o["amount"] for o in self.orders.values() if o["user_id"] == user_id)
        return {"success": True, "data": round(total, 2)}
"#;

const BASELINE: &str = r#"
import json, sys, time
jobs = json.load(open(sys.argv[1]))
ns = {}
exec(compile(jobs["code"], "ledger", "exec"), ns)
cls = ns["Ledger"]
calls = jobs["calls"]

def construct(text):
    config = json.loads(text)
    inst = cls(config)
    for k, v in config.items():
        setattr(inst, k, v)
    return inst

def public(inst):
    return {k: v for k, v in vars(inst).items() if not k.startswith("_")}

state_text = jobs["state"]
started = time.perf_counter()
for tool, args in calls:
    inst = construct(state_text)
    result = getattr(inst, tool)(**args)
    state_text = json.dumps(public(inst))
    str(result); json.dumps(result)
cold = time.perf_counter() - started

inst = construct(jobs["state"])
started = time.perf_counter()
for tool, args in calls:
    result = getattr(inst, tool)(**args)
    json.dumps(public(inst))
    str(result); json.dumps(result)
warm = time.perf_counter() - started
print(json.dumps({"calls": len(calls), "cold": cold, "warm": warm}))
"#;

fn state(megabytes: usize) -> Value {
    let mut users = Map::new();
    let mut orders = Map::new();
    let mut i = 0usize;
    let target = megabytes * 1024 * 1024;
    let mut size = 0usize;
    while size < target {
        let uid = format!("U{i:06}");
        let tier = ["basic", "gold", "platinum"][i % 3];
        let user = json!({"name": format!("User number {i}"), "email": format!("user{i}@example.com"),
                          "tier": tier, "tags": ["a", "b"]});
        let order = json!({"user_id": uid, "amount": (i % 997) as f64 + 0.5, "status": "paid",
                           "lines": [{"sku": format!("SKU-{}", i % 50), "qty": 1 + i % 4}]});
        size += user.to_string().len() + order.to_string().len() + 40;
        users.insert(uid, user);
        orders.insert(format!("O{:06}", i + 1), order);
        i += 1;
    }
    json!({"users": users, "orders": orders, "settings": {"currency": "EUR"}})
}

fn main() {
    let megabytes: usize = std::env::var("ENVSIM_BENCH_STATE_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let count: usize = std::env::var("ENVSIM_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let initial = state(megabytes);
    let text = initial.to_string();
    let calls: Vec<(String, Map<String, Value>)> = (0..count)
        .map(|k| {
            let args = match k % 4 {
                0 => json!({"user_id": format!("U{:06}", k * 7)}),
                1 => json!({"user_id": format!("U{:06}", k * 7), "email": format!("new{k}@example.com")}),
                2 => json!({"user_id": format!("U{:06}", k * 3), "amount": k as f64}),
                _ => json!({"user_id": format!("U{:06}", k)}),
            };
            let tool = ["get_user", "update_email", "add_order", "total_for"][k % 4];
            (tool.to_owned(), args.as_object().cloned().unwrap_or_default())
        })
        .collect();
    println!(
        "state: {:.2} MB, {} users, {count} chained calls",
        text.len() as f64 / 1e6,
        initial["users"].as_object().map_or(0, Map::len)
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let envsim_seconds = runtime.block_on(async {
        let executor = Executor::new(1, Limits::default()).await.expect("python3");
        let code = EnvCode::new(CODE, "Ledger");
        // Warm-up: start the worker, load the code.
        let mut state = initial.clone();
        let first = Call::new(&code, "get_user", &calls[0].1, &state);
        executor.call(&first).await.expect("warm-up call");
        let started = Instant::now();
        for (tool, args) in &calls {
            let outcome = executor
                .call(&Call::new(&code, tool, args, &state))
                .await
                .expect("call");
            state = outcome.state_after;
        }
        started.elapsed().as_secs_f64()
    });
    let jobs = json!({"code": CODE, "state": text, "calls": calls.iter().map(|(t, a)| json!([t, a])).collect::<Vec<_>>()});
    let dir = tempfile::tempdir().expect("tempdir");
    let (jobs_path, script_path) = (dir.path().join("jobs.json"), dir.path().join("baseline.py"));
    std::fs::write(&jobs_path, jobs.to_string()).expect("write jobs");
    std::fs::write(&script_path, BASELINE).expect("write script");
    let python = runtime
        .block_on(envsim_exec::resolve_python())
        .expect("python3");
    let output = std::process::Command::new(python)
        .arg(&script_path)
        .arg(&jobs_path)
        .output()
        .expect("baseline runs");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "baseline failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let per_call = |seconds: f64| seconds * 1000.0 / count as f64;
    let (cold, warm) = (
        report["cold"].as_f64().unwrap_or(0.0),
        report["warm"].as_f64().unwrap_or(0.0),
    );
    println!(
        "envsim (sandboxed, 1 worker, warm instance): {:.1} ms/call",
        per_call(envsim_seconds)
    );
    println!(
        "cold in-process loop (decode, construct, call, encode): {:.1} ms/call",
        per_call(cold)
    );
    println!(
        "warm in-process loop (call, encode): {:.1} ms/call",
        per_call(warm)
    );
    println!(
        "throughput ratio envsim / cold loop: {:.2}; envsim / warm loop: {:.2}",
        cold / envsim_seconds,
        warm / envsim_seconds
    );
}

//! The executor against hostile and tricky environment code.

use envsim_exec::{Call, EnvCode, ExecError, Executor, Limits};
use serde_json::{json, Map, Value};
use std::time::Duration;

const HOSTILE: &str = r#"
import os, time, uuid, random, datetime

class Hostile:
    def __init__(self, init_config):
        self.items = {}
        self.log = []

    def ok(self, key: str = "a"):
        self.items[key] = self.items.get(key, 0) + 1
        return {"success": True, "data": self.items[key]}

    def spin(self):
        while True:
            pass

    def sleep(self):
        time.sleep(3600)

    def fork_bomb(self):
        pids = []
        for _ in range(1000):
            pids.append(os.fork())
        return {"success": True}

    def allocate(self):
        block = bytearray(10 * 1024 ** 3)
        return {"success": True, "n": len(block)}

    def hard_exit(self):
        os._exit(3)

    def shout(self):
        return {"success": True, "data": "x" * (64 * 1024 * 1024)}

    def chatty(self):
        print("noise on stdout must not break the protocol")
        return {"success": True}

    def boom(self, n: int):
        return {"success": True, "v": 10 // n}

    def stamp(self):
        self.items["at"] = time.time()
        self.items["id"] = str(uuid.uuid4())
        self.items["pick"] = random.randint(1, 10 ** 9)
        self.items["day"] = datetime.datetime.now().isoformat()
        return {"success": True, "id": self.items["id"]}

    def allowed(self):
        # A set of strings joined into a text, as foreign environments print "Allowed: ..." in
        # their errors: its order follows the process's string hash seed.
        kinds = {"operational", "out of order", "requires maintenance", "closed", "retired"}
        return {"success": False, "error": "Allowed: " + ", ".join(kinds), "h": hash("abc")}

    def odd_values(self):
        self.log = (1, 2)
        self.items = {1: {"tags": {"b", "a"}}}
        return {"success": True, "t": (1, 2)}

    def write_file(self):
        with open("junk.txt", "w") as f:
            f.write("x")
        return {"success": True, "data": sorted(os.listdir("."))}

    def list_cwd(self):
        return {"success": True, "data": sorted(os.listdir("."))}

    def read_some(self, key: str):
        return {"success": True, "data": self.items.get(key)}

    def half_done(self, key: str):
        self.items[key] = 99
        self.log.append("half")
        raise KeyError("the second half failed")
"#;

fn env() -> EnvCode {
    EnvCode::new(HOSTILE, "Hostile")
}

async fn executor() -> Executor {
    let limits = Limits {
        wall: Duration::from_secs(3),
        cpu_seconds: 2,
        memory_bytes: 512 << 20,
        output_bytes: 8 << 20,
    };
    Executor::new(2, limits)
        .await
        .expect("python3 is available")
}

async fn run(
    ex: &Executor,
    tool: &str,
    args: Value,
) -> Result<envsim_exec::CallOutcome, ExecError> {
    let args: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
    let state = json!({"items": {"a": 1}});
    let env = env();
    ex.call(&Call::new(&env, tool, &args, &state)).await
}

#[tokio::test]
async fn normal_call_returns_observation_and_state() {
    let ex = executor().await;
    let out = run(&ex, "ok", json!({"key": "a"})).await.unwrap();
    assert_eq!(out.observation, "{'success': True, 'data': 2}");
    assert_eq!(out.observation_json, json!({"success": true, "data": 2}));
    assert_eq!(out.state_after, json!({"items": {"a": 2}, "log": []}));
    assert!(out.converted.is_empty());
}

#[tokio::test]
async fn hostile_calls_get_typed_errors_and_the_pool_keeps_serving() {
    let ex = executor().await;
    let cases: [(&str, Value, &str); 9] = [
        ("spin", json!({}), "timeout"),
        ("sleep", json!({}), "timeout"),
        ("fork_bomb", json!({}), "exception"),
        ("allocate", json!({}), "memory"),
        ("hard_exit", json!({}), "crash"),
        ("shout", json!({}), "output_too_large"),
        ("boom", json!({"n": 0}), "exception"),
        ("boom", json!({"m": 1}), "invalid_call"),
        ("nope", json!({}), "invalid_call"),
    ];
    for (tool, args, kind) in cases {
        let (bad, good) = tokio::join!(run(&ex, tool, args), run(&ex, "ok", json!({})));
        let error = bad.expect_err(tool);
        assert_eq!(error.kind(), kind, "{tool}: {error}");
        assert_eq!(
            good.expect("a concurrent call is unharmed")
                .observation_json["data"],
            2,
            "{tool}"
        );
    }
    let out = run(&ex, "chatty", json!({})).await.unwrap();
    assert_eq!(out.observation_json, json!({"success": true}));
}

#[tokio::test]
async fn a_tool_that_raises_keeps_the_changes_it_made_before() {
    let ex = executor().await;
    let error = run(&ex, "half_done", json!({"key": "b"}))
        .await
        .expect_err("it raises");
    assert_eq!(error.kind(), "exception");
    assert_eq!(
        error.to_string(),
        "exception: KeyError: 'the second half failed'"
    );
    assert_eq!(
        error.state_after(),
        Some(&json!({"items": {"a": 1, "b": 99}, "log": ["half"]}))
    );
    // The worker carries nothing over: the next call starts from the state it is given.
    let out = run(&ex, "read_some", json!({"key": "b"})).await.unwrap();
    assert_eq!(out.observation_json["data"], Value::Null);
    // An exception before any change reports the state as it was; one in the constructor
    // (no instance yet) reports none.
    let error = run(&ex, "boom", json!({"n": 0})).await.expect_err("raises");
    assert_eq!(
        error.state_after(),
        Some(&json!({"items": {"a": 1}, "log": []}))
    );
    let raising = EnvCode::new(
        "class R:\n    def __init__(self, init_config):\n        raise ValueError('no')\n    def t(self):\n        return 1\n",
        "R",
    );
    let (args, state) = (Map::new(), json!({}));
    let error = ex
        .call(&Call::new(&raising, "t", &args, &state))
        .await
        .expect_err("the constructor raises");
    assert_eq!(error.kind(), "exception");
    assert_eq!(error.state_after(), None);
}

#[tokio::test]
async fn a_package_that_renders_errors_answers_them_as_its_harness_does() {
    let ex = executor().await;
    let code = "class Shop:\n    def buy(self, item):\n        self.log.append(item)\n        if item == 'x':\n            raise ValueError('out of stock: ' + item)\n        return {'ok': True}\n";
    let plain = EnvCode::new(code, "Shop");
    let rendering = envsim_exec::rendering::ErrorRendering {
        exception: Some("Error: {message}".into()),
        invalid_call: Some("Error: {type}: {message}".into()),
    };
    let rendered = plain.clone().with_errors(rendering);
    let state = json!({"log": []});
    let args = json!({"item": "x"});
    let args = args.as_object().unwrap();
    // The executor's own report: an exception record with the change made before it.
    let error = ex
        .call(&Call::new(&plain, "buy", args, &state))
        .await
        .expect_err("raises");
    assert_eq!(error.kind(), "exception");
    // τ-bench's harness: the message as the answer, the change kept.
    let outcome = ex
        .call(&Call::new(&rendered, "buy", args, &state))
        .await
        .expect("rendered");
    assert_eq!(outcome.observation_json, json!("Error: out of stock: x"));
    assert_eq!(outcome.observation, "Error: out of stock: x");
    assert_eq!(outcome.state_after, json!({"log": ["x"]}));
    // An argument the signature refuses: refused, or answered with the state unchanged.
    let bad = json!({"item": "a", "colour": "red"});
    let bad = bad.as_object().unwrap();
    let error = ex
        .call(&Call::new(&plain, "buy", bad, &state))
        .await
        .expect_err("invalid");
    assert_eq!(error.kind(), "invalid_call");
    let outcome = ex
        .call(&Call::new(&rendered, "buy", bad, &state))
        .await
        .expect("rendered");
    let text = outcome.observation_json.as_str().unwrap().to_owned();
    assert!(text.starts_with("Error: InvalidCall: "), "{text}");
    assert!(text.contains("colour"), "{text}");
    assert_eq!(outcome.state_after, state);
    // A success is untouched.
    let good = json!({"item": "a"});
    let outcome = ex
        .call(&Call::new(
            &rendered,
            "buy",
            good.as_object().unwrap(),
            &state,
        ))
        .await
        .unwrap();
    assert_eq!(outcome.observation_json, json!({"ok": true}));
}

#[tokio::test]
async fn missing_module_is_a_load_error() {
    let ex = executor().await;
    let broken = EnvCode::new("import not_a_real_module_xyz\nclass A:\n    pass\n", "A");
    let state = json!({});
    let err = ex
        .call(&Call::new(&broken, "f", &Map::new(), &state))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "load_error");
    assert!(err.to_string().contains("not_a_real_module_xyz"), "{err}");
    let wrong_class = EnvCode::new("class A:\n    pass\n", "B");
    let err = ex
        .call(&Call::new(&wrong_class, "f", &Map::new(), &state))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "load_error");
}

#[tokio::test]
async fn same_state_and_call_give_the_same_result_and_probe_finds_dependencies() {
    let ex = executor().await;
    let env = env();
    let args = Map::new();
    let state = json!({"items": {}});
    let call = Call::new(&env, "stamp", &args, &state);
    let a = ex.call(&call).await.unwrap();
    let b = ex.call(&call).await.unwrap();
    assert_eq!(
        (&a.observation, &a.state_after),
        (&b.observation, &b.state_after)
    );
    assert_eq!(
        a.state_after["items"]["at"],
        json!(envsim_exec::DEFAULT_CLOCK)
    );
    assert_eq!(a.state_after["items"]["day"], json!("2025-01-01T00:00:00"));
    let report = ex.probe(&call).await.unwrap();
    assert_eq!(
        report.clock_dependent,
        ["/state/items/at", "/state/items/day"]
    );
    assert_eq!(
        report.seed_dependent,
        ["/observation/id", "/state/items/id", "/state/items/pick"]
    );
    let plain = ex
        .probe(&Call::new(&env, "ok", &args, &state))
        .await
        .unwrap();
    assert!(plain.is_deterministic());
}

/// Every worker hashes strings with one fixed seed, so a text built from a set of strings is
/// the same in every process; the twin process of the double execution hashes with another, so
/// the probe reports such a field as hash-dependent.
#[tokio::test]
async fn string_hashing_is_fixed_across_processes_and_the_probe_names_what_depends_on_it() {
    let mut answers = Vec::new();
    for _ in 0..3 {
        // A fresh executor each time: a new worker process.
        let ex = executor().await;
        assert_eq!(ex.info().await.unwrap().sandbox["hash_seed"], json!(0));
        answers.push(
            run(&ex, "allowed", json!({}))
                .await
                .unwrap()
                .observation_json,
        );
    }
    // hash("abc") as the same interpreter computes it with PYTHONHASHSEED=0 outside envsim.
    let python = envsim_exec::resolve_python().await.unwrap();
    let plain = std::process::Command::new(python)
        .args(["-c", "print(hash('abc'))"])
        .env("PYTHONHASHSEED", "0")
        .output()
        .unwrap();
    let expected: i64 = String::from_utf8_lossy(&plain.stdout)
        .trim()
        .parse()
        .unwrap();
    assert_eq!(answers[0]["h"], json!(expected));
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
    let ex = executor().await;
    let env = env();
    let state = json!({"items": {}});
    let args = Map::new();
    let report = ex
        .probe(&Call::new(&env, "allowed", &args, &state))
        .await
        .unwrap();
    assert_eq!(
        report.hash_dependent,
        ["/observation/error", "/observation/h"]
    );
    assert!(report.seed_dependent.is_empty() && report.clock_dependent.is_empty());
    assert!(!report.is_deterministic());
}

#[tokio::test]
async fn non_json_values_are_converted_and_reported() {
    let ex = executor().await;
    let out = run(&ex, "odd_values", json!({})).await.unwrap();
    assert_eq!(
        out.state_after,
        json!({"items": {"1": {"tags": ["a", "b"]}}, "log": [1, 2]})
    );
    let mut report: Vec<(String, String)> = out
        .converted
        .iter()
        .map(|c| (c.path.clone(), c.from.clone()))
        .collect();
    report.sort();
    assert_eq!(
        report,
        [
            ("#observation/t".to_string(), "tuple".to_string()),
            ("/items/1".to_string(), "key:int".to_string()),
            ("/items/1/tags".to_string(), "set".to_string()),
            ("/log".to_string(), "tuple".to_string()),
        ]
    );
}

#[tokio::test]
async fn tracing_records_reads() {
    let ex = executor().await;
    let env = env();
    let args: Map<String, Value> = json!({"key": "b"}).as_object().cloned().unwrap();
    let state = json!({"items": {"a": 1, "b": 2}, "log": []});
    let mut call = Call::new(&env, "read_some", &args, &state);
    call.trace = true;
    let out = ex.call(&call).await.unwrap();
    let reads: Vec<String> = out.reads.unwrap().iter().map(|p| p.to_string()).collect();
    assert_eq!(reads, ["/items", "/items/b"]);
}

#[tokio::test]
async fn init_config_aliasing_is_an_explicit_option() {
    let ex = executor().await;
    let code = EnvCode::new(
        "class S:\n    def __init__(self, init_config):\n        self.init_config = init_config\n        self.orders = {}\n    def pay(self):\n        self.orders['O1']['status'] = 'paid'\n        return {'success': True}\n",
        "S",
    );
    let state = json!({"orders": {"O1": {"status": "new"}}, "init_config": {"orders": {"O1": {"status": "new"}}}});
    let args = Map::new();
    let mut call = Call::new(&code, "pay", &args, &state);
    let plain = ex.call(&call).await.unwrap();
    assert_eq!(
        envsim_core::diff::reference_change_count(&state, &plain.state_after),
        1
    );
    call.alias_init_config = true;
    let aliased = ex.call(&call).await.unwrap();
    // The constructor's config is the object the attributes come from: every change shows twice.
    assert_eq!(
        aliased.state_after["init_config"]["orders"]["O1"]["status"],
        "paid"
    );
    assert_eq!(
        envsim_core::diff::reference_change_count(&state, &aliased.state_after),
        2
    );
}

#[tokio::test]
async fn every_call_starts_in_an_empty_private_directory() {
    let ex = Executor::new(1, Limits::default()).await.unwrap();
    let env = env();
    let (args, state) = (Map::new(), json!({}));
    let wrote = ex
        .call(&Call::new(&env, "write_file", &args, &state))
        .await
        .unwrap();
    assert_eq!(wrote.observation_json["data"], json!(["junk.txt"]));
    let next = ex
        .call(&Call::new(&env, "list_cwd", &args, &state))
        .await
        .unwrap();
    assert_eq!(next.observation_json["data"], json!([]));
}

/// The runner empties only the directory the executor hands it: importing it elsewhere (or a
/// missing or foreign ENVSIM_WORKDIR) must never delete files.
#[test]
fn the_runner_never_empties_a_directory_it_was_not_given() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("envsim_runner.py"),
        envsim_exec::RUNNER_SOURCE,
    )
    .unwrap();
    std::fs::write(dir.path().join("precious.txt"), "keep").unwrap();
    for workdir in [None, Some(dir.path().to_str().unwrap())] {
        let mut command = std::process::Command::new("python3");
        command
            .current_dir(dir.path())
            .args(["-c", "import envsim_runner as r; r._reset_workdir()"]);
        command.env_remove("ENVSIM_WORKDIR");
        if let Some(w) = workdir {
            command.env("ENVSIM_WORKDIR", w);
        }
        let status = command.status().unwrap();
        assert!(status.success());
        assert!(dir.path().join("precious.txt").exists(), "{workdir:?}");
    }
}

/// What one call leaves in the module's globals or on the class (a counter, a cache, a new
/// attribute) does not reach the next: the same call on the same state answers the same in a
/// worker that served others before as in a fresh one (a benchmark sample replays from its
/// stored state whatever ran before it).
#[tokio::test]
async fn a_call_answers_the_same_whatever_the_worker_ran_before() {
    const LEAKY: &str = r#"
SEEN = {"calls": 0}
LIMIT = 3

class Leaky:
    made = 0
    labels = ["a"]

    def __init__(self, config):
        self.items = {}

    def bump(self):
        global LIMIT, ADDED
        Leaky.made += 1
        Leaky.labels.append("b")
        Leaky.extra = "set by a call"
        SEEN["calls"] += 1
        LIMIT -= 1
        ADDED = True
        return {"success": True, "made": Leaky.made, "labels": len(Leaky.labels),
                "seen": SEEN["calls"], "limit": LIMIT,
                "leftovers": [hasattr(Leaky, "extra_before"), "ADDED_BEFORE" in globals()]}

    def peek(self):
        return {"success": True, "extra": hasattr(Leaky, "extra"), "added": "ADDED" in globals()}
"#;
    let exec = Executor::new(1, Limits::default()).await.expect("python3");
    let env = EnvCode::new(LEAKY, "Leaky");
    let state = json!({"items": {}});
    let none = Map::new();
    let mut answers = Vec::new();
    for _ in 0..3 {
        let out = exec
            .call(&Call::new(&env, "bump", &none, &state))
            .await
            .unwrap();
        answers.push(out.observation_json);
    }
    assert_eq!(
        answers[0],
        json!({"success": true, "made": 1, "labels": 2, "seen": 1, "limit": 2,
               "leftovers": [false, false]})
    );
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
    let peek = exec
        .call(&Call::new(&env, "peek", &none, &state))
        .await
        .unwrap();
    assert_eq!(
        peek.observation_json,
        json!({"success": true, "extra": false, "added": false})
    );
}

//! `envsim bench build|info` and `envsim export sft` end to end on small packages written by
//! the test.

use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

const CODE: &str = r#"
class Stock:
    def __init__(self, init_config: dict):
        self.items = {}

    def list_all(self) -> dict:
        """All SKUs."""
        return {"success": True, "data": sorted(self.items)}

    def get(self, sku: str) -> dict:
        """One SKU."""
        if sku not in self.items:
            return {"success": False, "error": f"unknown sku {sku}"}
        return {"success": True, "data": self.items[sku]}

    def restock(self, sku: str, qty: int) -> dict:
        """Add stock; qty must be a positive integer."""
        if sku not in self.items:
            return {"success": False, "error": f"unknown sku {sku}"}
        if not isinstance(qty, int) or qty <= 0:
            return {"success": False, "error": "qty must be a positive integer"}
        self.items[sku]["qty"] += qty
        self.items[sku]["restocks"] += 1
        return {"success": True, "message": f"{sku} now {self.items[sku]['qty']}"}
"#;

fn write_package(root: &Path, name: &str) {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("states")).unwrap();
    std::fs::write(dir.join("env.py"), CODE).unwrap();
    let tool = |n: &str, props: Value, required: Value| json!({"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object", "properties": props, "required": required}}});
    let manifest = json!({"name": name, "domain": "test", "description": "Stock.", "class_name": "Stock", "tools": [
        tool("list_all", json!({}), json!([])),
        tool("get", json!({"sku": {"type": "string"}}), json!(["sku"])),
        tool("restock", json!({"sku": {"type": "string"}, "qty": {"type": "integer"}}), json!(["sku", "qty"])),
    ]});
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
    for (i, skus) in [["A", "B"], ["C", "D"], ["E", "F"]].iter().enumerate() {
        let items: serde_json::Map<String, Value> = skus
            .iter()
            .map(|s| (s.to_string(), json!({"qty": 1, "restocks": 0})))
            .collect();
        std::fs::write(
            dir.join(format!("states/{i:02}.json")),
            json!({"items": items}).to_string(),
        )
        .unwrap();
    }
}

/// `envsim bench build --envs ENVS --composition COMPOSITION [extra...] --out OUT`.
fn bench_build(envs: &Path, composition: &Path, extra: &[&str], out: &Path) -> Output {
    let mut args = vec![
        "bench",
        "build",
        "--envs",
        envs.to_str().unwrap(),
        "--composition",
        composition.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    envsim(&args)
}

fn envsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(args)
        .output()
        .expect("runs")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn build_is_reproducible_and_export_holds_out_benchmark_environments() {
    let dir = tempfile::tempdir().unwrap();
    let bench_envs = dir.path().join("bench_envs");
    let all_envs = dir.path().join("all_envs");
    write_package(&bench_envs, "stock_a");
    write_package(&all_envs, "stock_a");
    write_package(&all_envs, "stock_b");
    let composition = dir.path().join("composition.json");
    std::fs::write(
        &composition,
        json!({"buckets": [
            {"name": "failure", "outcome": "failure", "delta": [0, 0], "count": 2},
            {"name": "no_change", "outcome": "success", "delta": [0, 0], "count": 2},
            {"name": "changed", "outcome": "success", "delta": [2, 2], "count": 2}
        ]})
        .to_string(),
    )
    .unwrap();
    let build = |out: &str| {
        envsim(&[
            "bench",
            "build",
            "--envs",
            bench_envs.to_str().unwrap(),
            "--composition",
            composition.to_str().unwrap(),
            "--walks",
            "2",
            "--steps",
            "8",
            // One environment fills every bucket here.
            "--max-env-share",
            "1",
            "--out",
            dir.path().join(out).to_str().unwrap(),
        ])
    };
    let first = ok(&build("b1"));
    let second = ok(&build("b2"));
    assert_eq!(first, second, "same inputs, same fingerprint");
    assert_eq!(first.trim().len(), 64);
    let jsonl = std::fs::read(dir.path().join("b1/benchmark.jsonl")).unwrap();
    assert_eq!(
        jsonl,
        std::fs::read(dir.path().join("b2/benchmark.jsonl")).unwrap()
    );
    let sheet: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("b1/datasheet.json")).unwrap())
            .unwrap();
    assert_eq!(sheet["fingerprint_sha256"], first.trim());
    assert_eq!(sheet["samples"], 6);
    assert!(std::fs::read_to_string(dir.path().join("b1/datasheet.md"))
        .unwrap()
        .contains("| changed | 2 | 2 |"));

    let info = ok(&envsim(&[
        "bench",
        "info",
        dir.path().join("b1/benchmark.jsonl").to_str().unwrap(),
        "--json",
    ]));
    let info: Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["samples"], 6);
    assert_eq!(
        info["sha256"],
        first.trim(),
        "info fingerprints the file it reads"
    );
    assert_eq!(info["strata"]["failure"], 2);
    assert_eq!(info["strata"]["simple_2"], 2);
    assert_eq!(info["environments"]["stock_a"], 6);

    let oracle = ok(&envsim(&[
        "score",
        "--bench",
        dir.path().join("b1/benchmark.json").to_str().unwrap(),
        "--baseline",
        "oracle",
        "--format",
        "json",
    ]));
    let oracle: Value = serde_json::from_str(&oracle).unwrap();
    assert_eq!(oracle["overall"]["cm_strict"], 1.0);
    assert_eq!(oracle["overall"]["cm_ref"], 1.0);

    // Too few candidates: a located error, nothing written.
    std::fs::write(
        &composition,
        json!({"buckets": [{"name": "huge", "outcome": "success", "delta": [7, 12], "count": 5}]})
            .to_string(),
    )
    .unwrap();
    let short = build("b3");
    assert_eq!(short.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&short.stderr)
        .contains("bucket \"huge\" lacks 5 of 5 (0 available)"));
    assert!(!dir.path().join("b3/benchmark.json").exists());

    // Export: environment hold-out trains on stock_b only.
    let out = dir.path().join("sft");
    let export = envsim(&[
        "export",
        "sft",
        "--bench",
        dir.path().join("b1/benchmark.jsonl").to_str().unwrap(),
        "--envs",
        all_envs.to_str().unwrap(),
        "--walks",
        "2",
        "--steps",
        "8",
        "--out",
        out.to_str().unwrap(),
    ]);
    ok(&export);
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out.join("export.json")).unwrap()).unwrap();
    assert_eq!(summary["holdout"]["training_envs"], json!(["stock_b"]));
    assert_eq!(summary["holdout"]["shared_envs"], json!([]));
    let alpaca: Value =
        serde_json::from_slice(&std::fs::read(out.join("train_alpaca.json")).unwrap()).unwrap();
    assert_eq!(
        alpaca.as_array().unwrap().len(),
        summary["examples"].as_u64().unwrap() as usize
    );
    assert!(
        std::fs::read_to_string(out.join("train_openai.jsonl"))
            .unwrap()
            .lines()
            .count()
            > 0
    );
    let info: Value =
        serde_json::from_slice(&std::fs::read(out.join("dataset_info.json")).unwrap()).unwrap();
    assert_eq!(info["envsim_sft_alpaca"]["file_name"], "train_alpaca.json");

    // Environment hold-out with nothing left to train on.
    let none = envsim(&[
        "export",
        "sft",
        "--bench",
        dir.path().join("b1/benchmark.jsonl").to_str().unwrap(),
        "--envs",
        bench_envs.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(none.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&none.stderr).contains("--holdout task"));
}

/// A composition of one failure, one read with one argument and one change of |Δ| 2, written
/// under `dir`.
fn one_of_each(dir: &Path) -> std::path::PathBuf {
    let composition = dir.join("c.json");
    std::fs::write(
        &composition,
        json!({"buckets": [
            {"name": "failure", "outcome": "failure", "count": 1},
            {"name": "query", "outcome": "success", "delta": [0, 0], "args": 1, "count": 1},
            {"name": "restock", "outcome": "success", "delta": [2, 2], "count": 1}
        ]})
        .to_string(),
    )
    .unwrap();
    composition
}

#[test]
fn build_from_recorded_trajectories() {
    let dir = tempfile::tempdir().unwrap();
    let envs = dir.path().join("envs");
    write_package(&envs, "stock_a");
    let trajectory = json!({"env": "stock_a", "task_id": "t1", "initial_state": {"items": {"A": {"qty": 1, "restocks": 0}}}, "steps": [
        {"action": {"name": "get", "arguments": {"sku": "Z"}}, "observation": "{'success': False, 'error': 'unknown sku Z'}"},
        {"action": {"name": "get", "arguments": {"sku": "A"}}, "observation": "{'success': True, 'data': {'qty': 1, 'restocks': 0}}"},
        {"action": {"name": "restock", "arguments": {"sku": "A", "qty": 2}}, "observation": "{'success': True, 'message': 'A now 3'}",
         "state_after": {"items": {"A": {"qty": 3, "restocks": 1}}}}
    ]});
    let file = dir.path().join("runs.jsonl");
    std::fs::write(&file, format!("{trajectory}\n")).unwrap();
    let composition = one_of_each(dir.path());
    let out = dir.path().join("bench");
    ok(&envsim(&[
        "bench",
        "build",
        "--envs",
        envs.to_str().unwrap(),
        "--trajectories",
        file.to_str().unwrap(),
        "--composition",
        composition.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]));
    let report = ok(&envsim(&[
        "score",
        "--bench",
        out.join("benchmark.json").to_str().unwrap(),
        "--baseline",
        "oracle",
        "--format",
        "json",
    ]));
    let report: Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["overall"]["n"], 3);
    assert_eq!(report["overall"]["cm_strict"], 1.0);
    let reference: Value =
        serde_json::from_slice(&std::fs::read(out.join("benchmark.json")).unwrap()).unwrap();
    assert!(
        reference[2]["env_code"]
            .as_str()
            .unwrap()
            .contains("class Stock"),
        "code comes from the package"
    );
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"env\": \"stock_a\", \"initial_state\": 5, \"steps\": []}\n",
    )
    .unwrap();
    let failed = envsim(&[
        "bench",
        "build",
        "--envs",
        envs.to_str().unwrap(),
        "--trajectories",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(failed.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&failed.stderr)
        .contains("bad.jsonl: line 1, field `initial_state`"));
}

#[test]
fn build_from_call_only_transcripts_reexecutes_the_calls() {
    let dir = tempfile::tempdir().unwrap();
    let envs = dir.path().join("envs");
    write_package(&envs, "stock_a");
    let call = |id: &str, name: &str, args: Value| {
        json!({"role": "assistant", "tool_calls": [{"id": id, "type": "function",
               "function": {"name": name, "arguments": args.to_string()}}]})
    };
    // The recorded answers are wrong on purpose: a benchmark holds what really happens.
    let answer = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "recorded"});
    let transcript = json!({"env": "stock_a", "task_id": "t1",
        "initial_state": {"items": {"A": {"qty": 1, "restocks": 0}}}, "messages": [
        call("1", "get", json!({"sku": "Z"})), answer("1"),
        call("2", "get", json!({"sku": "A"})), answer("2"),
        call("3", "restock", json!({"sku": "A", "qty": 2})), answer("3"),
    ]});
    let file = dir.path().join("chats.jsonl");
    std::fs::write(&file, format!("{transcript}\n")).unwrap();
    let composition = one_of_each(dir.path());
    let out = dir.path().join("bench");
    let built = bench_build(
        &envs,
        &composition,
        &["--trajectories", file.to_str().unwrap()],
        &out,
    );
    let stderr = String::from_utf8_lossy(&built.stderr);
    assert!(built.status.success(), "{stderr}");
    assert!(stderr.contains("1 call-only runs re-executed"), "{stderr}");
    assert!(
        stderr.contains("3 steps: 0 exact, 0 normalised, 3 differ"),
        "{stderr}"
    );
    let samples: Vec<Value> = std::fs::read_to_string(out.join("benchmark.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut observations: Vec<String> = samples
        .iter()
        .map(|s| s["observation"].as_str().unwrap().to_owned())
        .collect();
    observations.sort();
    assert_eq!(
        observations,
        [
            "{'success': False, 'error': 'unknown sku Z'}",
            "{'success': True, 'data': {'qty': 1, 'restocks': 0}}",
            "{'success': True, 'message': 'A now 3'}",
        ]
    );
}

/// The stock environment with attributes its state files lack (the constructor creates them),
/// as environments written for EnvScaler by others often are.
fn write_constructed_package(root: &Path) {
    write_package(root, "stock_c");
    let dir = root.join("stock_c");
    let code = CODE.replace(
        "        self.items = {}\n",
        "        self.items = {}\n        self.requests = {}\n        self.audit = []\n",
    );
    std::fs::write(dir.join("env.py"), code).unwrap();
}

#[test]
fn transitions_start_from_the_constructed_state_and_a_benchmark_replays_from_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let envs = dir.path().join("envs");
    write_constructed_package(&envs);
    let composition = dir.path().join("composition.json");
    std::fs::write(
        &composition,
        json!({"buckets": [
            {"name": "no_change", "outcome": "success", "delta": [0, 0], "count": 4},
            {"name": "changed", "outcome": "success", "delta": [2, 2], "count": 2}
        ]})
        .to_string(),
    )
    .unwrap();
    let out = dir.path().join("b");
    let build = bench_build(&envs, &composition, &["--walks", "2", "--steps", "8"], &out);
    // One environment cannot fill more than a fifth of a bucket by default (said before
    // anything is collected)...
    assert_eq!(build.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&build.stderr).contains(
        "no collection can fill this composition from 1 environment: bucket no_change needs 4 samples, but 1 environment may give it at most 1 each"
    ));
    assert!(!out.join("benchmark.json").exists());
    // ...so a one-environment benchmark lifts the cap.
    let build = bench_build(
        &envs,
        &composition,
        &["--walks", "2", "--steps", "8", "--max-env-share", "1"],
        &out,
    );
    ok(&build);
    let stderr = String::from_utf8_lossy(&build.stderr);
    assert!(
        stderr.contains("benchmark.jsonl: 6 of 6 samples replay exactly from their stored state"),
        "{stderr}"
    );
    let jsonl = std::fs::read_to_string(out.join("benchmark.jsonl")).unwrap();
    let records: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for r in &records {
        // The constructor's attributes are part of every state before...
        assert_eq!(r["config_before"]["requests"], json!({}), "{r}");
        assert_eq!(r["config_before"]["audit"], json!([]), "{r}");
        // ...so read-only calls change nothing.
        let tool = r["action"]["name"].as_str().unwrap();
        if tool != "restock" {
            assert_eq!(r["change_count"], 0, "{r}");
        }
    }

    // The per-environment cap is a share in (0, 1].
    let bad = envsim(&[
        "bench",
        "build",
        "--envs",
        envs.to_str().unwrap(),
        "--max-env-share",
        "0",
        "--out",
        dir.path().join("never").to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("\"0\" is not a share in (0, 1]"));
    let sheet: Value =
        serde_json::from_slice(&std::fs::read(out.join("datasheet.json")).unwrap()).unwrap();
    assert_eq!(sheet["max_env_share"], 1.0);
    assert_eq!(
        sheet["buckets"]["changed"]["largest_env"],
        json!({"env": "stock_c", "samples": 2, "share": 1.0})
    );

    // Both files replay; the reference JSON takes the class from the package.
    for file in ["benchmark.jsonl", "benchmark.json"] {
        let verify = envsim(&[
            "bench",
            "verify",
            out.join(file).to_str().unwrap(),
            "--envs",
            envs.to_str().unwrap(),
        ]);
        ok(&verify);
    }

    // A tampered record is named, with what differs, and the command fails.
    let mut tampered = records.clone();
    tampered[5]["config_after"]["items"] = json!({"ZZ": {"qty": 9, "restocks": 0}});
    let id = tampered[5]["sample_id"].as_str().unwrap().to_owned();
    let text: String = tampered.iter().map(|r| format!("{r}\n")).collect();
    let bad = dir.path().join("tampered.jsonl");
    std::fs::write(&bad, text).unwrap();
    let verify = envsim(&[
        "bench",
        "verify",
        bad.to_str().unwrap(),
        "--envs",
        envs.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(verify.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(report["checked"], 6);
    assert_eq!(report["identical"], 5);
    assert_eq!(report["findings"][0]["sample"], id.as_str());
    assert_eq!(report["findings"][0]["mismatch"], "state");
    let stderr = String::from_utf8_lossy(&verify.stderr);
    assert!(
        stderr.contains(&format!("sample {id} (stock_c ")),
        "{stderr}"
    );
    assert!(stderr.contains("/items/ZZ: stored"), "{stderr}");
    assert!(
        stderr.contains("1 of 6 samples do not replay from their stored state"),
        "{stderr}"
    );
}

#[test]
fn the_bundled_benchmark_replays_from_its_file() {
    let verify = envsim(&["bench", "verify"]);
    let stderr = String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success(), "{stderr}");
    assert!(
        stderr.contains("400 of 400 samples replay exactly from their stored state"),
        "{stderr}"
    );
}

#[test]
fn short_buckets_collect_further_rounds_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let envs = dir.path().join("envs");
    write_package(&envs, "stock_a");
    let composition = dir.path().join("composition.json");
    std::fs::write(
        &composition,
        json!({"buckets": [{"name": "changed", "outcome": "success", "delta": [2, 2], "count": 8}]})
            .to_string(),
    )
    .unwrap();
    let build = |out: &str, budget: &str| {
        let extra = [
            "--walks",
            "1",
            "--steps",
            "2",
            "--max-env-share",
            "1",
            "--max-transitions",
            budget,
        ];
        bench_build(&envs, &composition, &extra, &dir.path().join(out))
    };
    // 6 transitions in the first round cannot give 8 samples: rounds of longer walks follow.
    let first = build("a", "10000");
    let fingerprint = ok(&first);
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(
        stderr.contains("round 1: collecting 1 more walks of 4 steps per initial state"),
        "{stderr}"
    );
    let sheet: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("a/datasheet.json")).unwrap())
            .unwrap();
    assert_eq!(sheet["samples"], 8);
    // The same inputs take the same rounds.
    assert_eq!(ok(&build("b", "10000")), fingerprint);
    // A budget that allows no further round: the shortfall, the count and the budget.
    let short = build("c", "10");
    assert_eq!(short.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&short.stderr);
    assert!(stderr.contains("bucket \"changed\" lacks"), "{stderr}");
    assert!(
        stderr.contains("6 transitions collected in 1 rounds, and another round of 12 would pass --max-transitions 10"),
        "{stderr}"
    );
}

/// The stock package with one initial state of about 400 KB (past the size from which walk
/// states are kept, and benchmark files written, as patches of their initial state).
fn write_large_package(root: &Path) {
    write_package(root, "stock_big");
    let items: serde_json::Map<String, Value> = (0..9000)
        .map(|i| (format!("SKU{i:05}"), json!({"qty": i % 7, "restocks": 0})))
        .collect();
    std::fs::write(
        root.join("stock_big/states/00.json"),
        json!({"items": items}).to_string(),
    )
    .unwrap();
}

#[test]
fn large_states_are_stored_once_and_the_reference_json_is_an_export() {
    let dir = tempfile::tempdir().unwrap();
    let envs = dir.path().join("envs");
    write_large_package(&envs);
    let composition = dir.path().join("c.json");
    std::fs::write(
        &composition,
        json!({"buckets": [
            {"name": "failure", "outcome": "failure", "delta": [0, 0], "count": 3},
            {"name": "no_change", "outcome": "success", "delta": [0, 0], "count": 3},
            {"name": "changed", "outcome": "success", "delta": [2, 2], "count": 3}
        ]})
        .to_string(),
    )
    .unwrap();
    let walk = ["--walks", "3", "--steps", "8", "--max-env-share", "1"];
    let out = dir.path().join("b");
    let mut extra = walk.to_vec();
    extra.extend(["--reference-json", "always"]);
    let fingerprint = ok(&bench_build(&envs, &composition, &extra, &out));
    let jsonl = std::fs::read_to_string(out.join("benchmark.jsonl")).unwrap();
    let lines: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stored: Vec<&Value> = lines
        .iter()
        .filter(|l| l.get("state_id").is_some())
        .collect();
    let compact = lines
        .iter()
        .filter(|l| l.get("config_before_ref").is_some())
        .count();
    assert_eq!(stored.len(), 1, "the large initial state is stored once");
    assert!((1..=9).contains(&compact), "{compact}");
    assert_eq!(lines.len() - stored.len(), 9);
    // Small states stay whole, as before.
    assert!(lines
        .iter()
        .filter(|l| l.get("config_before").is_some())
        .all(|l| l["config_before"].to_string().len() < 1000));
    let reference = std::fs::read(out.join("benchmark.json")).unwrap();
    assert!(
        jsonl.len() * 2 < reference.len(),
        "{} vs {}",
        jsonl.len(),
        reference.len()
    );

    // The compact file replays, scores and exports to exactly the reference JSON.
    ok(&envsim(&[
        "bench",
        "verify",
        out.join("benchmark.jsonl").to_str().unwrap(),
        "--envs",
        envs.to_str().unwrap(),
    ]));
    let report: Value = serde_json::from_str(&ok(&envsim(&[
        "score",
        "--bench",
        out.join("benchmark.jsonl").to_str().unwrap(),
        "--baseline",
        "oracle",
        "--format",
        "json",
    ])))
    .unwrap();
    assert_eq!(report["overall"]["n"], 9);
    assert_eq!(report["overall"]["cm_strict"], 1.0);
    let exported = dir.path().join("exported.json");
    ok(&envsim(&[
        "bench",
        "export-reference",
        out.join("benchmark.jsonl").to_str().unwrap(),
        "--envs",
        envs.to_str().unwrap(),
        "--out",
        exported.to_str().unwrap(),
    ]));
    assert!(
        std::fs::read(&exported).unwrap() == reference,
        "byte for byte"
    );

    // --reference-json never: no reference file (a stale one is removed), and how to get it.
    let mut extra = walk.to_vec();
    extra.extend(["--reference-json", "never"]);
    let skipped = bench_build(&envs, &composition, &extra, &out);
    assert_eq!(
        ok(&skipped),
        fingerprint,
        "the benchmark itself is the same"
    );
    assert!(!out.join("benchmark.json").exists());
    assert!(String::from_utf8_lossy(&skipped.stderr).contains("bench export-reference"));
}

#[test]
fn a_bucket_no_walk_can_fill_stops_after_two_empty_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let envs = dir.path().join("envs");
    write_package(&envs, "stock_a");
    // No call of the stock package changes five fields.
    let composition = dir.path().join("composition.json");
    std::fs::write(
        &composition,
        json!({"buckets": [{"name": "five", "outcome": "success", "delta": [5, 5], "count": 1}]})
            .to_string(),
    )
    .unwrap();
    let extra = [
        "--walks",
        "1",
        "--steps",
        "2",
        "--max-transitions",
        "100000",
    ];
    let out = bench_build(&envs, &composition, &extra, &dir.path().join("out"));
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bucket \"five\" lacks 1 of 1 (0 available)")
            && stderr.contains("36 transitions collected in 3 rounds, and the last two rounds added no usable candidates"),
        "{stderr}"
    );
}

/// Two environments under the default cap (a fifth of a bucket each) can never fill the
/// reference composition: the build says so at once, naming the buckets and what would help,
/// instead of collecting round after round.
#[test]
fn a_composition_the_cap_makes_impossible_is_refused_before_collecting() {
    let dir = tempfile::tempdir().unwrap();
    let envs = dir.path().join("envs");
    write_package(&envs, "stock_a");
    write_package(&envs, "stock_b");
    let out = dir.path().join("bench");
    let failed = envsim(&[
        "bench",
        "build",
        "--envs",
        envs.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(failed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(
        stderr.contains("no collection can fill this composition from 2 environments: bucket ")
            && stderr.contains("(--max-env-share 0.2)")
            && stderr.contains("raise --max-env-share to 0.50 or more"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("round 1"),
        "nothing was collected: {stderr}"
    );
    assert!(!out.exists());
}

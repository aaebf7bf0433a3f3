//! Sandboxed steps/s over the bundled corpus vs a plain in-process Python loop doing the same
//! calls, in one run: `cargo bench -p envsim-exec --bench steps`. Numbers go to
//! docs/benchmarks.md.
//!
//! The calls are every scripted step of every package's tests (each on the state its
//! predecessor left), repeated until about `ROUNDS` passes over the corpus have been made.

use envsim_exec::package::EnvPackage;
use envsim_exec::{Call, Executor, Limits};
use serde_json::{json, Map, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

const ROUNDS: usize = 5;

/// The same work in one plain Python process: decode the state twice (config and attributes,
/// as the worker does), construct, call, encode the state and the observation.
const BASELINE: &str = r#"
import json, sys, time
jobs = json.load(open(sys.argv[1]))
classes = {}
for name, env in jobs["envs"].items():
    ns = {}
    exec(compile(env["code"], name, "exec"), ns)
    classes[name] = ns[env["class_name"]]
steps = jobs["steps"]
started = time.perf_counter()
for _ in range(jobs["rounds"]):
    for env, tool, args, state_text in steps:
        cls = classes[env]
        config = json.loads(state_text)
        attributes = json.loads(state_text)
        inst = cls(config)
        for k, v in attributes.items():
            setattr(inst, k, v)
        try:
            result = getattr(inst, tool)(**args)
        except Exception as exc:
            result = {"error": str(exc)}
        out = json.dumps({k: v for k, v in vars(inst).items() if not k.startswith("_")})
        obs = str(result)
        json.dumps(result, default=str)
elapsed = time.perf_counter() - started
print(json.dumps({"steps": len(steps) * jobs["rounds"], "seconds": elapsed}))
"#;

struct Step {
    env: usize,
    tool: String,
    args: Map<String, Value>,
    state: Value,
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run());
}

async fn run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../envs");
    let packages = EnvPackage::load_all(&root).expect("corpus");
    let executor = Arc::new(Executor::new(2, Limits::default()).await.expect("python3"));

    // Collect the scripted steps with the states they run on.
    let mut steps = Vec::new();
    for (env, package) in packages.iter().enumerate() {
        for case in &package.tests {
            let mut state = package.states[case.state].1.clone();
            for step in &case.steps {
                let call = Call::new(&package.code, &step.tool, &step.args, &state);
                let next = executor.call(&call).await;
                steps.push(Step {
                    env,
                    tool: step.tool.clone(),
                    args: step.args.clone(),
                    state: state.clone(),
                });
                match next {
                    Ok(outcome) => state = outcome.state_after,
                    Err(_) => break,
                }
            }
        }
    }
    let state_bytes: usize = steps.iter().map(|s| s.state.to_string().len()).sum();
    println!(
        "corpus: {} environments, {} distinct steps, mean state {} KB",
        packages.len(),
        steps.len(),
        state_bytes / steps.len().max(1) / 1024
    );

    // Sandboxed: two workers, two calls in flight.
    let steps = Arc::new(steps);
    let codes: Arc<Vec<_>> = Arc::new(packages.iter().map(|p| p.code.clone()).collect());
    let started = Instant::now();
    let mut handles = Vec::new();
    for lane in 0..2 {
        let (executor, steps, codes) = (
            Arc::clone(&executor),
            Arc::clone(&steps),
            Arc::clone(&codes),
        );
        handles.push(tokio::spawn(async move {
            let mut done = 0usize;
            for _ in 0..ROUNDS {
                // Each lane takes a contiguous half, so chained steps stay together.
                let half = steps.len().div_ceil(2);
                for step in steps.iter().skip(lane * half).take(half) {
                    let call = Call::new(&codes[step.env], &step.tool, &step.args, &step.state);
                    let _ = executor.call(&call).await;
                    done += 1;
                }
            }
            done
        }));
    }
    let mut done = 0;
    for handle in handles {
        done += handle.await.expect("lane");
    }
    let sandboxed = done as f64 / started.elapsed().as_secs_f64();

    // Baseline: one plain Python process.
    let envs: Map<String, Value> = packages
        .iter()
        .map(|p| {
            (
                p.manifest.name.clone(),
                json!({"code": p.code.code.as_ref(), "class_name": p.manifest.class_name}),
            )
        })
        .collect();
    let jobs = json!({
        "envs": envs,
        "rounds": ROUNDS,
        "steps": steps.iter().map(|s| json!([packages[s.env].manifest.name, s.tool, s.args, s.state.to_string()])).collect::<Vec<_>>(),
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let jobs_path = dir.path().join("jobs.json");
    let script_path = dir.path().join("baseline.py");
    std::fs::write(&jobs_path, jobs.to_string()).expect("write jobs");
    std::fs::write(&script_path, BASELINE).expect("write script");
    let python = envsim_exec::resolve_python().await.expect("python3");
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
    let baseline =
        report["steps"].as_f64().unwrap_or(0.0) / report["seconds"].as_f64().unwrap_or(1.0);
    println!("sandboxed (2 workers): {sandboxed:.0} steps/s");
    println!("in-process Python loop (1 process): {baseline:.0} steps/s");
    println!("ratio sandboxed / in-process: {:.2}", sandboxed / baseline);
}

//! Measures exploration on a folder of packages: per strategy and seed, tools that succeed and
//! branch outcomes reached at the same budget.
//!
//! `cargo run --release -p envsim-explore --example explore_corpus -- envs [SEEDS] [--no-seeds] [--walks N] [--steps N] [--random] [--missing] [--dump FILE] [--from N]`
//!
//! Plan seeds run from 1000 (`--from N`: from 1000 + N).
//!
//! `--dump FILE` writes every call of the last run as a line of JSON (package, walk, step, tool,
//! arguments, outcome, the answer's first 300 characters): what to read when a tool never
//! succeeds.

use envsim_exec::package::EnvPackage;
use envsim_exec::{Executor, Limits};
use envsim_explore::plan::{ExplorePlan, Strategy, LEARNING_FOCUS_SHARE};
use std::sync::Arc;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let root = std::path::PathBuf::from(&args[1]);
    let seeds: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let flag = |f: &str| args.iter().any(|a| a == f);
    let value = |f: &str| {
        args.iter()
            .position(|a| a == f)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<usize>().ok())
    };
    let packages = EnvPackage::load_all(&root).expect("packages");
    let exec = Arc::new(Executor::new(2, Limits::default()).await.expect("executor"));
    let mut strategies = vec![Strategy::Guided];
    if flag("--random") {
        strategies.push(Strategy::Random);
    }
    let from = value("--from").unwrap_or(0) as u64;
    for strategy in strategies {
        for seed in from..from + seeds {
            let plan = ExplorePlan {
                strategy,
                seed: 1000 + seed,
                seeds: !flag("--no-seeds"),
                walks: value("--walks").unwrap_or(10),
                steps: value("--steps").unwrap_or(16),
                focus_share: if strategy == Strategy::Random && !flag("--focus") {
                    0.0
                } else {
                    LEARNING_FOCUS_SHARE
                },
                ..ExplorePlan::default()
            };
            let started = std::time::Instant::now();
            let out = envsim_explore::explore(
                Arc::clone(&exec),
                Arc::new(packages.clone()),
                plan,
                2,
                |_, _| {},
            )
            .await
            .expect("explore");
            let reports = out.reports();
            if let Some(path) = args
                .iter()
                .position(|a| a == "--dump")
                .and_then(|i| args.get(i + 1))
            {
                let mut lines = String::new();
                for w in out.packages.iter().flat_map(|p| &p.walks) {
                    let from = w.from.map(|o| (o.walk, o.steps));
                    for r in &w.records {
                        let answer: String = r.observation.chars().take(300).collect();
                        let line = serde_json::json!({
                            "package": r.env, "state": r.initial_state, "walk": r.walk, "step": r.step,
                            "tool": r.action["name"], "arguments": r.action["arguments"],
                            "outcome": r.outcome, "answer": answer, "continues": from,
                        });
                        lines.push_str(&line.to_string());
                        lines.push('\n');
                    }
                }
                std::fs::write(path, lines).expect("the dump file");
            }
            let tools: usize = reports.iter().map(|r| r.tools.len()).sum();
            let ok: usize = reports.iter().map(|r| r.tools_succeeding()).sum();
            let branches: usize = reports.iter().map(|r| r.branches).sum();
            let reached: usize = reports.iter().map(|r| r.branches_reached).sum();
            let calls: usize = reports.iter().map(|r| r.calls).sum();
            println!(
                "{} seed {seed}: tools {ok}/{tools} ({:.3}) branches {reached}/{branches} ({:.3}) calls {calls} {:.1}s",
                strategy.as_str(),
                ok as f64 / tools as f64,
                reached as f64 / branches as f64,
                started.elapsed().as_secs_f64()
            );
            if flag("--missing") {
                for r in &reports {
                    for t in r.tools.iter().filter(|t| t.successes == 0) {
                        println!("  {} {} {:?}", r.package, t.tool, t.refusals_seen.first());
                    }
                }
            }
        }
    }
}

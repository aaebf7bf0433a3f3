//! Measures exploration on a folder of packages: per strategy and seed, tools that succeed and
//! branch outcomes reached at the same budget.
//!
//! `cargo run --release -p envsim-explore --example explore_corpus -- envs [SEEDS] [--no-seeds] [--walks N] [--steps N] [--random]`

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
    for strategy in strategies {
        for seed in 0..seeds {
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

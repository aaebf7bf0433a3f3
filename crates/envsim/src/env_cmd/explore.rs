//! `envsim env explore`: what an exploration of each package reaches — tools that succeed and
//! refuse, branch outcomes of the environment's code, calls and time spent — optionally beside
//! the random walks of the same budget.

use crate::context::{Corpus, StrategyArg, WalkArgs};
use anyhow::{bail, Result};
use clap::Args;
use envsim_explore::plan::Strategy;
use envsim_explore::report::CoverageReport;

#[derive(Debug, Args)]
pub struct ExploreArgs {
    /// Packages to explore (default: every package).
    names: Vec<String>,
    #[command(flatten)]
    walk: WalkArgs,
    /// Seed of the exploration.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Stop a package's guided exploration after this many calls in a row that reached
    /// nothing new (default: spend the whole budget).
    #[arg(long, value_name = "CALLS")]
    plateau: Option<usize>,
    /// Leave out the package's scripted tests and tasks as first sequences.
    #[arg(long)]
    no_seeds: bool,
    /// Also make the random walks of the same budget and compare.
    #[arg(long)]
    compare: bool,
    /// Per package, the reports as JSON (with every tool, the unreached branch outcomes and
    /// the coverage curve).
    #[arg(long)]
    json: bool,
}

pub fn run(root: &Corpus, a: ExploreArgs) -> Result<()> {
    let packages = if a.names.is_empty() {
        root.load_all()?
    } else {
        a.names
            .iter()
            .map(|n| root.load(n))
            .collect::<Result<Vec<_>>>()?
    };
    if packages.is_empty() {
        bail!("no environment packages to explore in {}", root.display());
    }
    let mut strategies = vec![a.walk.strategy];
    if a.compare {
        let other = match a.walk.strategy {
            StrategyArg::Guided => StrategyArg::Random,
            StrategyArg::Random => StrategyArg::Guided,
        };
        strategies.push(other);
    }
    let mut runs: Vec<Vec<CoverageReport>> = Vec::new();
    for strategy in strategies {
        let walk = WalkArgs {
            strategy,
            ..a.walk.clone()
        };
        let mut plan = walk.plan(a.seed, false);
        plan.plateau = a.plateau;
        plan.seeds = !a.no_seeds;
        let explored = crate::context::explore(packages.clone(), plan, walk.workers)?;
        runs.push(explored.packages.into_iter().map(|p| p.report).collect());
    }
    if a.json {
        let all: Vec<&CoverageReport> = runs.iter().flatten().collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    print_table(&runs);
    Ok(())
}

fn print_table(runs: &[Vec<CoverageReport>]) {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header([
        "package",
        "strategy",
        "calls",
        "tools succeeding",
        "tools refused",
        "branch outcomes",
        "lines",
        "seconds",
    ]);
    let packages = runs.first().map_or(0, Vec::len);
    for p in 0..packages {
        for run in runs {
            let r = &run[p];
            table.add_row([
                r.package.clone(),
                r.strategy.as_str().to_owned(),
                format!(
                    "{}{}",
                    r.calls,
                    if r.seed_calls > 0 {
                        format!(" ({} scripted)", r.seed_calls)
                    } else {
                        String::new()
                    }
                ),
                format!("{}/{}", r.tools_succeeding(), r.tools.len()),
                format!("{}/{}", r.tools_refused(), r.tools.len()),
                share(r.branches_reached, r.branches),
                share(r.lines_reached, r.lines),
                format!("{:.1}", r.seconds),
            ]);
        }
    }
    println!("{table}");
    for run in runs {
        let Some(first) = run.first() else {
            continue;
        };
        let total = |f: fn(&CoverageReport) -> usize| run.iter().map(f).sum::<usize>();
        let branches = total(|r| r.branches);
        let reached = if branches == 0 {
            // All adapter (AppWorld's packages), or no map: nothing to count, said so.
            "no branch outcomes in the code map".to_owned()
        } else {
            format!(
                "{} branch outcomes reached",
                share(total(|r| r.branches_reached), branches)
            )
        };
        println!(
            "{}: {} of {} tools succeeded, {reached}, {} calls, {:.1} s",
            first.strategy.as_str(),
            total(CoverageReport::tools_succeeding),
            total(|r| r.tools.len()),
            total(|r| r.calls),
            run.iter().map(|r| r.seconds).sum::<f64>()
        );
        for r in run {
            let missing = r.never_succeeded();
            if !missing.is_empty() && first.strategy == Strategy::Guided {
                println!("  {}: never succeeded: {}", r.package, missing.join(", "));
            }
        }
    }
}

/// `part/whole (n%)`; `none mapped` when there is nothing to count (a package whose code is
/// all adapter, or whose code map could not be read).
fn share(part: usize, whole: usize) -> String {
    if whole == 0 {
        return "none mapped".to_owned();
    }
    format!(
        "{part}/{whole} ({:.0}%)",
        100.0 * part as f64 / whole as f64
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn shares_say_their_percentage_and_an_empty_map_says_so() {
        assert_eq!(super::share(3, 4), "3/4 (75%)");
        assert_eq!(super::share(0, 0), "none mapped");
    }
}

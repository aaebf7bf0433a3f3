//! `envsim audit workflows` and `envsim audit score`: the audit's second validation set
//! (`envsim_bench::agent_workflows`), written and scored. The set is built and scored by the
//! library; this module parses the arguments, drives the executor and prints.

use anyhow::{bail, Context, Result};
use clap::Args;
use envsim_bench::agent_workflows::{self, FaultKind, GenerateConfig, InitialIds, Score};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct WorkflowsArgs {
    /// Where the transcripts go: OpenAI chat records (JSON Lines) without states, each naming
    /// its environment (`env`) and the package state it starts from (`state`).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Where the labels go: one line per transcript, in the same order (its line, style, and
    /// the planted fault or none).
    #[arg(long, value_name = "FILE")]
    labels: PathBuf,
    /// Folder of environment packages (default: the bundled corpus, or $ENVSIM_ENVS).
    #[arg(long, value_name = "DIR")]
    envs: Option<PathBuf>,
    /// Only this environment (repeatable); default: every package of the corpus.
    #[arg(long, value_name = "NAME")]
    env: Vec<String>,
    /// Workflows per environment (fewer where its tools cannot make them).
    #[arg(long, default_value_t = 20)]
    per_env: usize,
    /// Seed of the workflows, the faults and the answer forms.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Share of trajectories that get a fault.
    #[arg(long, default_value_t = 0.5)]
    rate: f64,
}

#[derive(Debug, Args)]
pub struct ScoreArgs {
    /// The violations of the audit of the transcripts (`envsim audit TRANSCRIPTS --out FILE`).
    violations: PathBuf,
    /// The labels written with the transcripts (`envsim audit workflows --labels FILE`).
    #[arg(long, value_name = "FILE")]
    labels: PathBuf,
    /// Print the score as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run_workflows(a: WorkflowsArgs) -> Result<()> {
    if !(0.0..=1.0).contains(&a.rate) {
        bail!("--rate must be between 0 and 1, got {}", a.rate);
    }
    if a.per_env == 0 {
        bail!("--per-env must be at least 1");
    }
    let started = std::time::Instant::now();
    let corpus = crate::context::Corpus::choose(a.envs.clone());
    let mut packages = corpus.load_all()?;
    if !a.env.is_empty() {
        for name in &a.env {
            if !packages.iter().any(|p| &p.manifest.name == name) {
                let names: Vec<&str> = packages.iter().map(|p| p.manifest.name.as_str()).collect();
                bail!(
                    "--env {name:?}: no such environment in {} (have: {})",
                    corpus.display(),
                    names.join(", ")
                );
            }
        }
        packages.retain(|p| a.env.contains(&p.manifest.name));
    }
    let config = GenerateConfig {
        per_env: a.per_env,
        seed: a.seed,
    };
    let runtime = crate::context::exec_runtime()?;
    let (progress, advance) =
        crate::context::progress_bar("workflows {bar:30} {pos}/{len} ({elapsed}, eta {eta})");
    let workflows = runtime.block_on(async {
        let executor = envsim_exec::Executor::new(2, crate::context::exec_limits()?).await?;
        anyhow::Ok(agent_workflows::generate(&executor, &packages, &config, advance).await?)
    })?;
    progress.finish_and_clear();
    let set = agent_workflows::label_set(&workflows, &InitialIds::of(&packages), a.rate, a.seed)?;
    let lines = |values: Vec<String>| -> String { values.into_iter().map(|l| l + "\n").collect() };
    let transcripts = lines(set.transcripts.iter().map(|t| t.to_string()).collect());
    let labels = lines(
        set.labels
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<_, _>>()?,
    );
    crate::output::write_atomic(&a.out, &transcripts)
        .with_context(|| format!("cannot write {}", a.out.display()))?;
    crate::output::write_atomic(&a.labels, &labels)
        .with_context(|| format!("cannot write {}", a.labels.display()))?;
    let mut planted: BTreeMap<FaultKind, usize> = BTreeMap::new();
    for fault in set.labels.iter().filter_map(|l| l.fault.as_ref()) {
        *planted.entry(fault.kind).or_default() += 1;
    }
    let faults: Vec<String> = planted
        .iter()
        .map(|(k, n)| format!("{} {n}", k.name()))
        .collect();
    let steps: usize = set.labels.iter().map(|l| l.steps).sum();
    eprintln!(
        "{} workflows of {} environments ({steps} calls), {} with a planted fault ({}) -> {}, labels -> {} ({:.1}s)",
        set.labels.len(),
        packages.len(),
        planted.values().sum::<usize>(),
        faults.join(", "),
        a.out.display(),
        a.labels.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

pub fn run_score(a: ScoreArgs) -> Result<()> {
    let read = |path: &PathBuf| {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
    };
    let labels_source = a.labels.display().to_string();
    let labels = agent_workflows::read_labels(&read(&a.labels)?, &labels_source)?;
    let source = a.violations.display().to_string();
    let flags = agent_workflows::read_flags(&read(&a.violations)?, &source)?;
    let score = agent_workflows::score(&labels, &flags, &source)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&score)?);
    } else {
        print!("{}", table(&score));
    }
    Ok(())
}

fn share(x: Option<f64>) -> String {
    x.map_or_else(|| "—".to_owned(), |x| format!("{x:.3}"))
}

/// The score as a table: a row per kind and one for all, then the clean trajectories.
fn table(score: &Score) -> String {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header([
        "fault",
        "planted",
        "found",
        "recall",
        "at the step",
        "recall at the step",
        "found by",
    ]);
    let rows = score
        .per_kind
        .iter()
        .map(|(k, s)| (k.name(), s))
        .chain([("all", &score.overall)]);
    for (name, s) in rows {
        let checks: Vec<String> = s.checks.iter().map(|(c, n)| format!("{c} {n}")).collect();
        table.add_row([
            name.to_owned(),
            s.planted.to_string(),
            s.found.to_string(),
            share(s.recall),
            s.found_at_step.to_string(),
            share(s.recall_at_step),
            checks.join(", "),
        ]);
    }
    let clean: Vec<String> = score
        .clean
        .checks
        .iter()
        .map(|(c, n)| format!("{c} {n}"))
        .collect();
    format!(
        "{} trajectories\n{table}\nclean trajectories flagged: {} of {} ({}){}\n",
        score.trajectories,
        score.clean.flagged,
        score.clean.total,
        share(score.clean.rate),
        if clean.is_empty() {
            String::new()
        } else {
            format!(", by {}", clean.join(", "))
        }
    )
}

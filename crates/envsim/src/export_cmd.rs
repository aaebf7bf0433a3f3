//! `envsim export sft`: training data for simulator models, held out from a benchmark.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use envsim_bench::collect::TransitionRecord;
use envsim_bench::composition::Composition;
use envsim_bench::export::{
    dataset_info, hold_out, mix, reference_best_mix, render, BenchmarkIndex, Holdout, SftFormat,
};
use envsim_core::prompt::Template;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(subcommand)]
    command: ExportCommand,
}

#[derive(Debug, Subcommand)]
enum ExportCommand {
    /// Supervised fine-tuning data (Alpaca, ShareGPT, OpenAI chat) held out from a benchmark.
    Sft(SftArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum HoldoutArg {
    Env,
    Task,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum FormatArg {
    Alpaca,
    Sharegpt,
    Openai,
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum TemplateArg {
    Envsim,
    Reference,
}

#[derive(Debug, Args)]
struct SftArgs {
    /// The benchmark to hold out (envsim `benchmark.jsonl` written by `envsim bench build`).
    #[arg(long, value_name = "FILE")]
    bench: PathBuf,
    /// Folder of environment packages (default: the bundled corpus, or $ENVSIM_ENVS).
    #[arg(long, value_name = "DIR")]
    envs: Option<PathBuf>,
    /// What may not appear in training: benchmark environments, or benchmark tasks and
    /// (state, call) pairs.
    #[arg(long, value_enum, default_value_t = HoldoutArg::Env)]
    holdout: HoldoutArg,
    /// Mixture: `reference-best` (1K failure, 1K no-change, 2K |Δ| 1–2, all |Δ| ≥ 3) or a
    /// composition JSON file.
    #[arg(long, value_name = "PRESET|FILE", default_value = "reference-best")]
    mix: String,
    /// Prompt template.
    #[arg(long, value_enum, default_value_t = TemplateArg::Envsim)]
    template: TemplateArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::All)]
    format: FormatArg,
    /// Seed of the walks and of the mixture (use another seed than the benchmark's).
    #[arg(long, default_value_t = 7)]
    seed: u64,
    #[command(flatten)]
    walk: crate::context::WalkArgs,
    /// Output folder.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

pub fn run(args: ExportArgs) -> Result<()> {
    match args.command {
        ExportCommand::Sft(sft) => sft_cmd(sft),
    }
}

fn sft_cmd(a: SftArgs) -> Result<()> {
    let bench_text = std::fs::read_to_string(&a.bench)
        .with_context(|| format!("cannot read {}", a.bench.display()))?;
    let bench = BenchmarkIndex::from_jsonl(&bench_text, &a.bench.display().to_string())
        .map_err(|e| anyhow!(e))?;
    let mixture = match a.mix.as_str() {
        "reference-best" => reference_best_mix(),
        path => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
            Composition::from_json(&text).map_err(|e| anyhow!("{path}: {e}"))?
        }
    };
    let holdout = match a.holdout {
        HoldoutArg::Env => Holdout::Env,
        HoldoutArg::Task => Holdout::Task,
    };
    let root = crate::context::Corpus::choose(a.envs.clone());
    let mut packages = root.load_all()?;
    // With an environment hold-out, benchmark environments are not even run.
    if holdout == Holdout::Env {
        packages.retain(|p| !bench.envs().contains(&p.manifest.name));
        if packages.is_empty() {
            bail!(
                "every environment in {} is in the benchmark, so an environment hold-out leaves nothing to train on; \
                 build the benchmark from a subset (`envsim bench build --envs DIR`) or use --holdout task",
                root.display()
            );
        }
    }
    let env_codes: BTreeMap<String, String> = packages
        .iter()
        .map(|p| (p.manifest.name.clone(), p.code.code.to_string()))
        .collect();
    let pool: Vec<TransitionRecord> = crate::context::walk_transitions(packages, &a.walk, a.seed)?;
    let (kept, leakage) = hold_out(&pool, &bench, holdout);
    let (chosen, sampled) = mix(&pool, &kept, &mixture, a.seed);
    if chosen.is_empty() {
        bail!(
            "no training examples survive the hold-out and the mixture ({} collected, {} held out)",
            pool.len(),
            leakage.removed
        );
    }
    let template = match a.template {
        TemplateArg::Envsim => Template::Envsim,
        TemplateArg::Reference => Template::Reference,
    };
    let formats: Vec<SftFormat> = match a.format {
        FormatArg::Alpaca => vec![SftFormat::Alpaca],
        FormatArg::Sharegpt => vec![SftFormat::ShareGpt],
        FormatArg::Openai => vec![SftFormat::OpenAi],
        FormatArg::All => vec![SftFormat::Alpaca, SftFormat::ShareGpt, SftFormat::OpenAi],
    };
    let records: Vec<&TransitionRecord> = chosen.iter().map(|i| &pool[*i]).collect();
    let groups: BTreeMap<String, usize> =
        sampled.picks.iter().fold(BTreeMap::new(), |mut m, (g, _)| {
            *m.entry(g.clone()).or_default() += 1;
            m
        });
    let summary = json!({
        "examples": records.len(),
        "template": template.name(),
        "holdout": leakage,
        "groups": groups,
        "collected": pool.len(),
        "seed": a.seed,
    });
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let mut outputs: Vec<(String, String)> = formats
        .iter()
        .map(|f| {
            (
                f.file_name().to_owned(),
                render(&records, &env_codes, template, *f),
            )
        })
        .collect();
    outputs.push((
        "dataset_info.json".into(),
        serde_json::to_string_pretty(&dataset_info(&formats, template))? + "\n",
    ));
    outputs.push((
        "export.json".into(),
        serde_json::to_string_pretty(&summary)? + "\n",
    ));
    for (name, text) in &outputs {
        crate::output::write_atomic(&a.out.join(name), text)?;
    }
    eprintln!(
        "{} examples ({}) from {} training environments; leakage: {} shared environments, {} shared tasks, {} shared (state, call) pairs",
        records.len(),
        groups.iter().map(|(g, n)| format!("{g} {n}")).collect::<Vec<_>>().join(", "),
        summary["holdout"]["training_envs"].as_array().map_or(0, Vec::len),
        summary["holdout"]["shared_envs"].as_array().map_or(0, Vec::len),
        summary["holdout"]["shared_tasks"],
        summary["holdout"]["shared_state_call_pairs"],
    );
    Ok(())
}

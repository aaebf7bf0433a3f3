//! `envsim export sft`: training data for simulator models, held out from a benchmark.
//! `envsim export verifiers`: a verifiers environment playing a task set `envsim serve` serves.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use envsim_bench::composition::Composition;
use envsim_bench::export::{
    dataset_info, hold_out, mix, reference_best_mix, render, BenchmarkIndex, Holdout, SftFormat,
};
use envsim_core::prompt::Template;
use envsim_explore::record::TransitionRecord;
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
    /// A verifiers environment (a pip-installable Python package) playing a task set that
    /// `envsim serve --openenv` serves: its tasks, one episode per rollout, the environment's
    /// tools, the server's reward.
    Verifiers(VerifiersArgs),
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

#[derive(Debug, Args)]
struct VerifiersArgs {
    /// The task set: its name in `envsim serve --openenv NAME=TASKS` (the package is
    /// `envsim-NAME`).
    #[arg(long, value_name = "NAME")]
    set: String,
    /// The environment whose tools the set's episodes call (default: the set's name, as
    /// `--openenv` names it).
    #[arg(long, value_name = "ENV")]
    env: Option<String>,
    /// Folder of environment packages (default: the bundled corpus, or $ENVSIM_ENVS).
    #[arg(long, value_name = "DIR")]
    envs: Option<PathBuf>,
    /// The envsim server: the package's default (`--env.taskset.task.base-url` of verifiers
    /// overrides it).
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8700")]
    url: String,
    /// Output folder: the package's root.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Write into a folder that is not empty (the package's files are replaced, others kept).
    #[arg(long)]
    force: bool,
}

pub fn run(args: ExportArgs) -> Result<()> {
    match args.command {
        ExportCommand::Sft(sft) => sft_cmd(sft),
        ExportCommand::Verifiers(verifiers) => verifiers_cmd(verifiers),
    }
}

fn verifiers_cmd(a: VerifiersArgs) -> Result<()> {
    let env_name = a.env.as_deref().unwrap_or(&a.set);
    let env = crate::context::Corpus::choose(a.envs.clone()).load(env_name)?;
    let package = envsim_serve::verifiers::package(&a.set, &env.manifest.tools, &a.url)
        .map_err(|e| anyhow!("{e}"))?;
    if a.out.exists() {
        let mut entries = std::fs::read_dir(&a.out)
            .with_context(|| format!("--out {}: cannot read it as a folder", a.out.display()))?;
        if entries.next().is_some() && !a.force {
            bail!(
                "--out {} is not empty: give an empty or new folder, or --force to write the package's files into it",
                a.out.display()
            );
        }
    }
    for (path, text) in &package.files {
        crate::output::write_atomic(&a.out.join(path), text)?;
    }
    eprintln!(
        "{}: the verifiers environment {} ({} tools of {env_name}) for the task set {} at {}/openenv/{}\n  \
         pip install -e {}\n  vf-eval {} -m MODEL -n 5 --env.agent.runtime.type subprocess",
        a.out.display(),
        package.name,
        env.manifest.tools.len(),
        a.set,
        a.url.trim_end_matches('/'),
        a.set,
        a.out.display(),
        package.name,
    );
    Ok(())
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
    let pool: Vec<TransitionRecord> =
        crate::context::walk_transitions(packages, &a.walk, a.seed)?.into_records();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifiers_writes_the_package_and_refuses_a_folder_in_use_without_force() {
        let dir = tempfile::tempdir().unwrap();
        envsim_testkit::desk::write(dir.path()).unwrap();
        let out = dir.path().join("out");
        let args = |force: bool, env: Option<&str>| VerifiersArgs {
            set: "desk-short".into(),
            env: env.map(str::to_owned),
            envs: Some(dir.path().to_owned()),
            url: "http://127.0.0.1:8700/".into(),
            out: out.clone(),
            force,
        };
        // The set's name is no environment: `--env` names it.
        let e = verifiers_cmd(args(false, None)).unwrap_err().to_string();
        assert!(e.starts_with("no environment \"desk-short\""), "{e}");
        verifiers_cmd(args(false, Some("desk"))).unwrap();
        let tools = std::fs::read_to_string(out.join("envsim_desk_short/tools.py")).unwrap();
        assert!(tools.contains("    async def close_ticket(self, ticket_id: str) -> str:\n"));
        let taskset = std::fs::read_to_string(out.join("envsim_desk_short/taskset.py")).unwrap();
        assert!(
            taskset.contains("DEFAULT_BASE_URL = \"http://127.0.0.1:8700/openenv/desk-short\"\n")
        );
        let e = verifiers_cmd(args(false, Some("desk")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not empty"), "{e}");
        std::fs::write(out.join("notes.txt"), "mine").unwrap();
        verifiers_cmd(args(true, Some("desk"))).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join("notes.txt")).unwrap(),
            "mine"
        );
    }
}

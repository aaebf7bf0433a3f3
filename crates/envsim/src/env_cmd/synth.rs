//! `envsim env synth` (a writer model writes a package, the sandbox checks it, a simulator
//! gates it, failures go back for repair: [`envsim_synth::envgen`]) and `envsim env check`
//! (the same checks on packages written by hand).

use crate::context::Corpus;
use crate::simulators::{build_pair, AnchorArgs, BackendArgs, BackendKind};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use envsim_exec::package::EnvPackage;
use envsim_exec::{Convention, Executor};
use envsim_llm::TextModel;
use envsim_sim::backend::{ExecutorSimulator, Simulator};
use envsim_sim::faulty::FaultySimulator;
use envsim_synth::envgen::check::{check_loaded, CheckPlan, PackageCheck};
use envsim_synth::envgen::{synthesize, EnvRequest, EnvSource, RoundEvent, SynthPlan};
use envsim_synth::gate::environments;
use std::path::PathBuf;
use std::sync::Arc;

/// `envsim env check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Packages to check (names in the corpus).
    #[arg(required = true)]
    names: Vec<String>,
    /// Walks per initial state of the coverage check.
    #[arg(long, default_value_t = 3)]
    walks: usize,
    /// Require tasks for agents (`tasks.jsonl`), as `env synth` does of its drafts.
    #[arg(long)]
    require_tasks: bool,
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
}

/// Checks packages as `env synth` checks its drafts; exits 1 when one has findings.
pub async fn check(root: &Corpus, a: CheckArgs) -> Result<()> {
    let executor = Arc::new(Executor::new(2, crate::context::exec_limits()?).await?);
    let plan = CheckPlan {
        walks: a.walks.max(1),
        require_tasks: a.require_tasks,
        ..CheckPlan::default()
    };
    let mut failed = Vec::new();
    let mut all = Vec::new();
    for name in &a.names {
        let package = root.load(name)?;
        let checked = check_loaded(Arc::clone(&executor), package, &plan).await?;
        if !checked.passed() {
            failed.push(name.clone());
        }
        if a.json {
            all.push(serde_json::json!({
                "package": name,
                "findings": checked.findings,
                "coverage": checked.coverage,
            }));
        } else {
            print!("{}", render_check(name, &checked));
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    }
    if !failed.is_empty() {
        bail!(
            "{} of {} packages have findings: {}",
            failed.len(),
            a.names.len(),
            failed.join(", ")
        );
    }
    Ok(())
}

fn render_check(name: &str, checked: &PackageCheck) -> String {
    let mut out = format!(
        "{name}: {}\n",
        if checked.passed() {
            "passes every check".to_owned()
        } else {
            format!("{} findings", checked.findings.len())
        }
    );
    for f in &checked.findings {
        out.push_str(&format!("  [{}] {}\n", f.check.name(), f.message));
    }
    out
}

/// `envsim env synth`.
#[derive(Debug, Args)]
pub struct SynthEnvArgs {
    /// The package name (lower case, digits, underscores).
    #[arg(long)]
    name: String,
    /// The domain, in words (a line or a paragraph).
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["openapi", "tools"])]
    description: Option<String>,
    /// An OpenAPI document (JSON) whose operations become the tools.
    #[arg(long, value_name = "FILE", conflicts_with = "tools")]
    openapi: Option<PathBuf>,
    /// OpenAI tool schemas (a JSON array) to implement as they are.
    #[arg(long, value_name = "FILE")]
    tools: Option<PathBuf>,
    /// How the package's code is written.
    #[arg(long, value_enum, default_value_t = ConventionArg::Class)]
    convention: ConventionArg,
    /// Folder the accepted package is written to (as OUT/NAME).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Replace a package of the same name in --out.
    #[arg(long)]
    force: bool,
    /// The writer model: an OpenAI-compatible endpoint, or the embedded local model (for smoke
    /// runs: a model of its size does not write working packages).
    #[arg(long, value_enum, default_value_t = WriterKind::Openai)]
    writer: WriterKind,
    /// The writer's model name (default: --model).
    #[arg(long, value_name = "NAME")]
    writer_model: Option<String>,
    /// The writer's endpoint (default: --base-url).
    #[arg(long, value_name = "URL")]
    writer_base_url: Option<String>,
    /// Completion token limit of the writer's answers.
    #[arg(long, default_value_t = 16_384)]
    writer_max_tokens: u64,
    /// Sampling temperature of the writer.
    #[arg(long, default_value_t = 0.2)]
    writer_temperature: f64,
    /// Writer rounds at most: the first draft and its repairs.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// No simulator gate: a package that passes the sandbox checks is accepted.
    #[arg(long)]
    no_gate: bool,
    /// Keep the drafts here (default: a temporary folder, removed at the end).
    #[arg(long, value_name = "DIR")]
    drafts: Option<PathBuf>,
    #[command(flatten)]
    sampling: super::gate::SamplingArgs,
    #[command(flatten)]
    anchoring: AnchorArgs,
    /// The gate's simulator (--backend; `faulty` reads each draft's own code, for trying the
    /// loop without a model).
    #[command(flatten)]
    backends: BackendArgs,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

/// Conventions of package code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ConventionArg {
    Class,
    Database,
}

/// Writer models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum WriterKind {
    Openai,
    Local,
}

/// Writes one package; exits 1 when no draft was accepted.
pub async fn synth(a: SynthEnvArgs) -> Result<()> {
    let source = match (&a.description, &a.openapi, &a.tools) {
        (Some(text), _, _) if !text.trim().is_empty() => EnvSource::Description(text.clone()),
        (Some(_), _, _) => bail!("--description is empty"),
        (None, Some(path), _) => EnvSource::OpenApi(read_json(path)?),
        (None, None, Some(path)) => match read_json(path)? {
            serde_json::Value::Array(tools) if !tools.is_empty() => EnvSource::Tools(tools),
            _ => bail!(
                "{}: expected a non-empty JSON array of tool schemas",
                path.display()
            ),
        },
        (None, None, None) => {
            bail!("say what to write: --description TEXT, --openapi FILE or --tools FILE")
        }
    };
    if a.backends.backend == BackendKind::Executor && !a.no_gate {
        bail!("--backend executor runs the code the gate judges: every draft would pass (use local, openai or faulty, or --no-gate)");
    }
    let target = a.out.join(&a.name);
    if target.exists() && !a.force {
        bail!("{} exists (--force replaces it)", target.display());
    }
    let config = (a.sampling).config(a.anchoring.max_regenerations, a.anchoring.policy()?)?;
    let plan = SynthPlan {
        rounds: a.rounds.max(1),
        check: CheckPlan::default(),
        gate: (!a.no_gate).then_some(config),
        seed: a.sampling.seed,
    };
    let request = EnvRequest {
        name: a.name.clone(),
        source,
        convention: match a.convention {
            ConventionArg::Class => Convention::Class,
            ConventionArg::Database => Convention::Database,
        },
    };
    let writer = writer_model(&a)?;
    let executor = Arc::new(Executor::new(2, crate::context::exec_limits()?).await?);
    // The gate's simulator: one model for every draft, built before anything is written; the
    // faulty double reads each draft's own code (spoiled at --fault-rate).
    if !(0.0..=1.0).contains(&a.backends.fault_rate) {
        bail!("--fault-rate must be between 0 and 1");
    }
    let gate_model: Option<Arc<dyn Simulator>> =
        if a.no_gate || a.backends.backend == BackendKind::Faulty {
            None
        } else {
            Some(build_pair(&a.backends, &ExecutorSimulator::new(Arc::clone(&executor)))?.0)
        };
    let exec_for_gate = Arc::clone(&executor);
    let profile = a.backends.fault_profile();
    let simulator = move |package: &EnvPackage| -> Arc<dyn Simulator> {
        if let Some(model) = &gate_model {
            return Arc::clone(model);
        }
        let reader = ExecutorSimulator::new(Arc::clone(&exec_for_gate));
        let reader = match environments(package) {
            Ok((with_code, _)) => reader.knowing(&with_code),
            Err(_) => reader,
        };
        Arc::new(FaultySimulator::with_profile(reader, profile, 1, "primary"))
    };
    let scratch = match &a.drafts {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            None
        }
        None => Some(tempfile::tempdir().context("cannot create a folder for the drafts")?),
    };
    let drafts = a
        .drafts
        .clone()
        .or_else(|| scratch.as_ref().map(|d| d.path().to_path_buf()))
        .ok_or_else(|| anyhow!("no folder for the drafts"))?;
    eprintln!(
        "{}: writing with {} (at most {} rounds), checking in the sandbox{}",
        a.name,
        writer.name(),
        plan.rounds,
        if a.no_gate {
            String::new()
        } else {
            format!(", gating with --backend {:?}", a.backends.backend).to_lowercase()
        }
    );
    let progress = |e: RoundEvent| {
        eprintln!(
            "{}: round {}: {}{}",
            e.name,
            e.round,
            if e.findings == 0 {
                "passed".to_owned()
            } else {
                format!("{} findings", e.findings)
            },
            e.gate_score
                .map_or(String::new(), |s| format!(" (gate {s:.3})"))
        );
    };
    let outcome = synthesize(
        writer.as_ref(),
        executor,
        &simulator,
        &request,
        &plan,
        &drafts,
        &progress,
    )
    .await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    } else {
        for round in &outcome.rounds {
            println!(
                "round {}: {} findings{}",
                round.number,
                round.findings.len(),
                round.gate.as_ref().map_or(String::new(), |g| format!(
                    ", gate {:.3} ({}/{} calls agree)",
                    g.score, g.agreeing, g.calls
                ))
            );
            for f in &round.findings {
                println!("  [{}] {}", f.check.name(), f.message);
            }
        }
        println!(
            "writer tokens: {} prompt, {} completion; gate tokens: {}",
            outcome.writer_usage.prompt_tokens,
            outcome.writer_usage.completion_tokens,
            outcome.gate_tokens
        );
    }
    if !outcome.accepted {
        bail!(
            "{}: no draft passed in {} rounds (drafts in {})",
            a.name,
            outcome.rounds.len(),
            if a.drafts.is_some() {
                drafts.display().to_string()
            } else {
                "a temporary folder, removed; keep them with --drafts DIR".to_owned()
            }
        );
    }
    let files = outcome
        .files
        .as_ref()
        .ok_or_else(|| anyhow!("the accepted draft has no files"))?;
    // Whole or not at all: the package is written beside its place, then moved there.
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let partial = tempfile::Builder::new()
        .prefix(&format!(".{}-", a.name))
        .tempdir_in(&a.out)
        .with_context(|| format!("cannot write into {}", a.out.display()))?;
    files
        .write(partial.path())
        .with_context(|| format!("cannot write {}", partial.path().display()))?;
    if target.exists() {
        std::fs::remove_dir_all(&target)
            .with_context(|| format!("cannot replace {}", target.display()))?;
    }
    let written = partial.keep();
    if let Err(error) = std::fs::rename(&written, &target) {
        let _ = std::fs::remove_dir_all(&written);
        return Err(error).with_context(|| format!("cannot write {}", target.display()));
    }
    eprintln!(
        "{}: accepted after {} rounds -> {}",
        a.name,
        outcome.rounds.len(),
        target.display()
    );
    Ok(())
}

fn read_json(path: &std::path::Path) -> Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "{}: line {}, column {}: {e}",
            path.display(),
            e.line(),
            e.column()
        )
    })
}

/// The writer model the arguments ask for.
fn writer_model(a: &SynthEnvArgs) -> Result<Arc<dyn TextModel>> {
    let decoding = envsim_llm::Decoding {
        temperature: Some(a.writer_temperature),
        max_tokens: Some(a.writer_max_tokens),
        stop: Vec::new(),
        extra_body: serde_json::Map::new(),
    };
    match a.writer {
        WriterKind::Openai => {
            let model = (a.writer_model.clone())
                .or_else(|| a.backends.model.clone())
                .ok_or_else(|| anyhow!("--writer openai needs --writer-model (or --model)"))?;
            let base_url = crate::simulators::endpoint_url(
                &[a.writer_base_url.as_ref(), a.backends.base_url.as_ref()],
                a.backends.api_key.as_ref(),
                "--writer openai needs --writer-base-url or --base-url (or OPENAI_BASE_URL)",
            )?;
            let client =
                envsim_llm::openai::OpenAiClient::new(&envsim_llm::openai::ClientSettings {
                    base_url,
                    api_key: a.backends.api_key.clone(),
                    timeout: std::time::Duration::from_secs(600),
                    max_connections: 2,
                })
                .map_err(anyhow::Error::msg)?;
            Ok(Arc::new(envsim_llm::OpenAiText::new(
                client, model, decoding, false,
            )))
        }
        WriterKind::Local => local_writer(a),
    }
}

#[cfg(feature = "local")]
fn local_writer(a: &SynthEnvArgs) -> Result<Arc<dyn TextModel>> {
    let (engine, mut generation, model) = crate::simulators::shared_local_engine(&a.backends)?;
    generation.max_tokens = u32::try_from(a.writer_max_tokens).unwrap_or(u32::MAX);
    generation.temperature = a.writer_temperature as f32;
    generation.stop_after_object = false;
    Ok(Arc::new(envsim_llm::LocalText::new(
        engine, generation, model,
    )))
}

#[cfg(not(feature = "local"))]
fn local_writer(_: &SynthEnvArgs) -> Result<Arc<dyn TextModel>> {
    bail!("this build has no local model (build with the `local` feature)")
}

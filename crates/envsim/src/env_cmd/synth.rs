//! `envsim env synth` (a writer model writes a package, the sandbox checks it, a simulator
//! gates it, failures go back for repair: [`envsim_synth::envgen`]) and `envsim env check`
//! (the same checks on packages written by hand).

use crate::context::Corpus;
use crate::simulators::{build_pair, AnchorArgs, BackendArgs, BackendKind};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use envsim_core::sample::Price;
use envsim_exec::package::EnvPackage;
use envsim_exec::{Convention, Executor};
use envsim_llm::TextModel;
use envsim_sim::backend::{ExecutorSimulator, Simulator};
use envsim_sim::faulty::FaultySimulator;
use envsim_synth::envgen::batch::{
    known_packages, read_requests, synthesize_batch, triage, BatchCost, BatchEntry, BatchEvent,
    BatchPlan, BatchReport, EntryStatus, Triage,
};
use envsim_synth::envgen::check::{check_loaded, CheckPlan, PackageCheck};
use envsim_synth::envgen::dedup::{Known, Profile};
use envsim_synth::envgen::{synthesize, EnvRequest, EnvSource, RoundEvent, SynthPlan};
use envsim_synth::gate::environments;
use envsim_synth::store::SynthStore;
use std::path::PathBuf;
use std::sync::Arc;

/// `envsim env check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Packages to check (names in the corpus).
    #[arg(required = true)]
    names: Vec<String>,
    /// Walks per initial state of the coverage check (its budget of calls).
    #[arg(long, default_value_t = 3)]
    walks: usize,
    /// How the coverage check explores (`random`: the walks of earlier checks).
    #[arg(long, value_enum, default_value_t = crate::context::StrategyArg::Guided)]
    strategy: crate::context::StrategyArg,
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
        strategy: a.strategy.strategy(),
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
                "explored": checked.explored,
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
    if let Some(explored) = &checked.explored {
        out.push_str(&format!(
            "  explored: {}\n",
            crate::context::coverage_line(explored)
        ));
    }
    out
}

/// `envsim env synth`.
#[derive(Debug, Args)]
pub struct SynthEnvArgs {
    /// The package name (lower case, digits, underscores).
    #[arg(long, required_unless_present = "batch")]
    name: Option<String>,
    /// The domain, in words (a line or a paragraph).
    #[arg(long, value_name = "TEXT", conflicts_with_all = ["openapi", "tools", "batch"])]
    description: Option<String>,
    /// An OpenAPI document (JSON) whose operations become the tools.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["tools", "batch"])]
    openapi: Option<PathBuf>,
    /// OpenAI tool schemas (a JSON array) to implement as they are.
    #[arg(long, value_name = "FILE", conflicts_with = "batch")]
    tools: Option<PathBuf>,
    /// Write many packages: a file with one request per line, a description in words or a
    /// JSON object {"name", "description" | "openapi" | "tools", "convention"}; see
    /// docs/envsynth.md.
    #[arg(long, value_name = "FILE", conflicts_with = "name")]
    batch: Option<PathBuf>,
    /// Requests written at once (--batch; default 2).
    #[arg(long)]
    jobs: Option<usize>,
    /// The batch's store (SQLite; created when missing; default env-synth.sqlite): a rerun of
    /// the same batch continues with the requests not done.
    #[arg(long, value_name = "FILE")]
    store: Option<PathBuf>,
    /// Skip a request (and refuse an accepted package) at least this similar to a known
    /// package or an earlier request (TF-IDF cosine of their words, 0 to 1; --batch; default
    /// 0.5, calibrated in docs/envsynth.md).
    #[arg(long, value_name = "SIMILARITY", conflicts_with = "no_dedup")]
    dedup_threshold: Option<f64>,
    /// Do not skip repeats of known packages or of earlier requests.
    #[arg(long)]
    no_dedup: bool,
    /// More folders of known packages for deduplication (the corpus and --out always count).
    #[arg(long = "known", value_name = "DIR")]
    known: Vec<PathBuf>,
    /// Print what the batch would write and skip, and stop (no writer is asked).
    #[arg(long)]
    dry_run: bool,
    /// USD per million prompt tokens of the writer (with --price-output: cost columns).
    #[arg(long, value_name = "USD")]
    price_input: Option<f64>,
    /// USD per million completion tokens of the writer.
    #[arg(long, value_name = "USD")]
    price_output: Option<f64>,
    /// USD per million tokens of the gate's simulator (default 0: a local simulator).
    #[arg(long, value_name = "USD", default_value_t = 0.0)]
    gate_price: f64,
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

impl From<ConventionArg> for Convention {
    fn from(c: ConventionArg) -> Convention {
        match c {
            ConventionArg::Class => Convention::Class,
            ConventionArg::Database => Convention::Database,
        }
    }
}

/// Writer models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum WriterKind {
    Openai,
    Local,
}

/// The gate's simulator for a draft package.
type SimulatorFor = dyn Fn(&EnvPackage) -> Arc<dyn Simulator> + Send + Sync;

/// What every writing loop needs: the writer, the sandbox, the gate's simulator, the plan and
/// a folder for drafts.
struct Loop {
    writer: Arc<dyn TextModel>,
    executor: Arc<Executor>,
    simulator: Box<SimulatorFor>,
    /// Which simulator gates, in words (part of a batch's key).
    gate_name: String,
    plan: SynthPlan,
    drafts: PathBuf,
    /// The temporary drafts folder, removed when the loop is dropped.
    _scratch: Option<tempfile::TempDir>,
}

impl Loop {
    async fn new(a: &SynthEnvArgs) -> Result<Loop> {
        if a.backends.backend == BackendKind::Executor && !a.no_gate {
            bail!("--backend executor runs the code the gate judges: every draft would pass (use local, openai or faulty, or --no-gate)");
        }
        if !(0.0..=1.0).contains(&a.backends.fault_rate) {
            bail!("--fault-rate must be between 0 and 1");
        }
        let config = (a.sampling).config(a.anchoring.max_regenerations, a.anchoring.policy()?)?;
        let plan = SynthPlan {
            rounds: a.rounds.max(1),
            check: CheckPlan::default(),
            gate: (!a.no_gate).then_some(config),
            seed: a.sampling.seed,
        };
        let writer = writer_model(a)?;
        let executor = Arc::new(Executor::new(2, crate::context::exec_limits()?).await?);
        // The gate's simulator: one model for every draft, built before anything is written;
        // the faulty double reads each draft's own code (spoiled at --fault-rate).
        let gate_model: Option<Arc<dyn Simulator>> =
            if a.no_gate || a.backends.backend == BackendKind::Faulty {
                None
            } else {
                Some(build_pair(&a.backends, &ExecutorSimulator::new(Arc::clone(&executor)))?.0)
            };
        let gate_name = if a.no_gate {
            "none".to_owned()
        } else {
            serde_json::json!({
                "backend": a.backends.backend.name(),
                "model": a.backends.model,
                "fault_rate": a.backends.fault_rate,
                "fault_profile": a.backends.fault_profile().describe(),
            })
            .to_string()
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
        let (drafts, scratch) = match &a.drafts {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                (dir.clone(), None)
            }
            None => {
                let scratch =
                    tempfile::tempdir().context("cannot create a folder for the drafts")?;
                (scratch.path().to_path_buf(), Some(scratch))
            }
        };
        Ok(Loop {
            writer,
            executor,
            simulator: Box::new(simulator),
            gate_name,
            plan,
            drafts,
            _scratch: scratch,
        })
    }

    /// Where the drafts are, for messages.
    fn drafts_shown(&self) -> String {
        if self._scratch.is_some() {
            "a temporary folder, removed; keep them with --drafts DIR".to_owned()
        } else {
            self.drafts.display().to_string()
        }
    }

    fn announce(&self, what: &str, a: &SynthEnvArgs) {
        eprintln!(
            "{what}: writing with {} (at most {} rounds), checking in the sandbox{}",
            self.writer.name(),
            self.plan.rounds,
            if a.no_gate {
                String::new()
            } else {
                format!(", gating with --backend {}", a.backends.backend.name())
            }
        );
    }
}

fn round_line(e: &RoundEvent) -> String {
    format!(
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
    )
}

/// Writes one package, or a batch (`--batch`); exits 1 when no draft was accepted.
pub async fn synth(root: &Corpus, a: SynthEnvArgs) -> Result<()> {
    let price = crate::context::price_of(a.price_input, a.price_output)?;
    if a.gate_price.is_nan() || a.gate_price < 0.0 {
        bail!("--gate-price must be ≥ 0");
    }
    if let Some(batch) = &a.batch {
        return synth_batch(root, &a, batch, price).await;
    }
    let batch_only = [
        ("--jobs", a.jobs.is_some()),
        ("--store", a.store.is_some()),
        ("--dedup-threshold", a.dedup_threshold.is_some()),
        ("--no-dedup", a.no_dedup),
        ("--known", !a.known.is_empty()),
        ("--dry-run", a.dry_run),
    ];
    if let Some((option, _)) = batch_only.iter().find(|(_, given)| *given) {
        bail!("{option} is an option of batches: it needs --batch FILE");
    }
    let name = a
        .name
        .clone()
        .ok_or_else(|| anyhow!("--name is needed (or --batch FILE)"))?;
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
            bail!("say what to write: --description TEXT, --openapi FILE, --tools FILE or --batch FILE")
        }
    };
    let target = a.out.join(&name);
    if target.exists() && !a.force {
        bail!("{} exists (--force replaces it)", target.display());
    }
    let request = EnvRequest {
        name: name.clone(),
        source,
        convention: a.convention.into(),
    };
    let run = Loop::new(&a).await?;
    run.announce(&name, &a);
    let progress = |e: RoundEvent| eprintln!("{}", round_line(&e));
    let outcome = synthesize(
        run.writer.as_ref(),
        Arc::clone(&run.executor),
        run.simulator.as_ref(),
        &request,
        &run.plan,
        &run.drafts,
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
        let cost = price.map_or(String::new(), |p| {
            let (i, o) = p.cost(outcome.writer_usage);
            format!(
                "; cost ${:.4}",
                i + o + outcome.gate_tokens as f64 * a.gate_price / 1e6
            )
        });
        println!(
            "writer tokens: {} prompt, {} completion; gate tokens: {}{cost}",
            outcome.writer_usage.prompt_tokens,
            outcome.writer_usage.completion_tokens,
            outcome.gate_tokens
        );
    }
    if !outcome.accepted {
        bail!(
            "{name}: no draft passed in {} rounds (drafts in {})",
            outcome.rounds.len(),
            run.drafts_shown()
        );
    }
    let files = outcome
        .files
        .as_ref()
        .ok_or_else(|| anyhow!("the accepted draft has no files"))?;
    files
        .install(&a.out, &name)
        .with_context(|| format!("cannot write {}", target.display()))?;
    eprintln!(
        "{name}: accepted after {} rounds -> {}",
        outcome.rounds.len(),
        target.display()
    );
    Ok(())
}

/// The packages a batch must not write again: the corpus, `--out` (less the requests' own
/// names with --force) and `--known` folders.
fn known_environments(root: &Corpus, a: &SynthEnvArgs, requests: &[EnvRequest]) -> Result<Known> {
    let mut profiles = match root {
        Corpus::Dir(dir) => known_packages(&[dir.as_path()], &[])?,
        Corpus::Bundled => root
            .load_all()?
            .iter()
            .map(|p| Profile::of_manifest(&p.manifest))
            .collect(),
    };
    let replaced: Vec<&str> = if a.force {
        requests.iter().map(|r| r.name.as_str()).collect()
    } else {
        Vec::new()
    };
    profiles.extend(known_packages(&[a.out.as_path()], &replaced)?);
    let extra: Vec<&std::path::Path> = a.known.iter().map(PathBuf::as_path).collect();
    for dir in &extra {
        if !dir.is_dir() {
            bail!("--known {}: no such folder", dir.display());
        }
    }
    profiles.extend(known_packages(&extra, &[])?);
    Ok(Known::new(profiles))
}

/// `env synth --batch FILE`.
async fn synth_batch(
    root: &Corpus,
    a: &SynthEnvArgs,
    file: &std::path::Path,
    price: Option<Price>,
) -> Result<()> {
    let threshold = a
        .dedup_threshold
        .unwrap_or(envsim_synth::envgen::dedup::DEFAULT_THRESHOLD);
    if !(0.0..=1.0).contains(&threshold) {
        bail!("--dedup-threshold must be between 0 and 1");
    }
    let store_path = a
        .store
        .clone()
        .unwrap_or_else(|| PathBuf::from("env-synth.sqlite"));
    let requests = read_requests(file, a.convention.into())?;
    let known = known_environments(root, a, &requests)?;
    let plan = BatchPlan {
        synth: SynthPlan::default(),
        jobs: a.jobs.unwrap_or(2).max(1),
        dedup_threshold: (!a.no_dedup).then_some(threshold),
        force: a.force,
    };
    if a.dry_run {
        print!(
            "{}",
            render_triage(&requests, &triage(&requests, &known, &a.out, &plan))
        );
        return Ok(());
    }
    let run = Loop::new(a).await?;
    let plan = BatchPlan {
        synth: run.plan.clone(),
        ..plan
    };
    run.announce(
        &format!("{}: {} requests", file.display(), requests.len()),
        a,
    );
    let mut store = SynthStore::open(&store_path)?;
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "writing {bar:30} {pos}/{len} environments ({elapsed}, eta {eta}) {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    // Lines above the bar on a terminal; plain lines on standard error otherwise.
    let say = |line: String| {
        if bar.is_hidden() {
            eprintln!("{line}");
        } else {
            bar.println(line);
        }
    };
    let progress = |event: BatchEvent| match event {
        BatchEvent::Started {
            run,
            resumed,
            requests,
            to_write,
        } => {
            say(format!(
                "run {} ({}): {requests} requests, {to_write} to write",
                &run[..12.min(run.len())],
                if resumed { "resumed" } else { "new" }
            ));
            bar.set_length(to_write as u64);
        }
        BatchEvent::Round(e) => bar.set_message(round_line(&e)),
        BatchEvent::Finished { name, entry, error } => {
            let line = match (&entry, &error) {
                (Some(e), _) => format!("{name}: {}", entry_summary(e)),
                (None, Some(error)) => format!("{name}: failed: {error}"),
                (None, None) => format!("{name}: failed"),
            };
            say(line);
            if entry.as_ref().is_none_or(|e| e.rounds > 0) {
                bar.inc(1);
            }
        }
    };
    let report = synthesize_batch(
        run.writer.as_ref(),
        Arc::clone(&run.executor),
        run.simulator.as_ref(),
        &run.gate_name,
        &requests,
        &plan,
        known,
        &mut store,
        &a.out,
        &run.drafts,
        &progress,
    )
    .await?;
    bar.finish_and_clear();
    let cost = report.cost(
        price.unwrap_or(Price {
            input_per_mtok: 0.0,
            output_per_mtok: 0.0,
        }),
        a.gate_price,
    );
    if a.json {
        let mut shown = report.clone();
        for entry in &mut shown.entries {
            entry.files = None;
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "report": shown,
                "cost": (price.is_some() || a.gate_price > 0.0).then_some(cost),
                "writer_usage": cost.writer_usage,
                "gate_tokens": cost.gate_tokens,
            }))?
        );
    } else {
        print!(
            "{}",
            render_batch(
                &report,
                (price.is_some() || a.gate_price > 0.0).then_some(&cost)
            )
        );
    }
    if !report.failures.is_empty() {
        bail!(
            "{} of {} requests failed ({}); rerun the same command to retry them (the store {} keeps the rest)",
            report.failures.len(),
            requests.len(),
            report
                .failures
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            store_path.display()
        );
    }
    let written = report.entries.iter().filter(|e| e.rounds > 0).count();
    if written > 0 && report.count(EntryStatus::Accepted) == 0 {
        bail!(
            "no package of the {written} written was accepted (drafts in {})",
            run.drafts_shown()
        );
    }
    Ok(())
}

fn entry_summary(e: &BatchEntry) -> String {
    let mut line = e.status.name().to_owned();
    match e.status {
        EntryStatus::Duplicate => {
            if let Some(n) = &e.nearest {
                line.push_str(&format!(" of {} (similarity {:.2})", n.name, n.similarity));
            }
        }
        EntryStatus::Exists => line.push_str(" in --out (--force replaces it)"),
        _ => {}
    }
    if e.rounds > 0 {
        line.push_str(&format!(
            ", {} round{}",
            e.rounds,
            if e.rounds == 1 { "" } else { "s" }
        ));
    }
    if let Some(score) = e.gate_score {
        line.push_str(&format!(", gate {score:.3}"));
    }
    match e.status {
        EntryStatus::Refused => {
            if let Some(f) = e.findings.first() {
                line.push_str(&format!(": [{}] {}", f.check.name(), f.message));
                if e.findings.len() > 1 {
                    line.push_str(&format!(" (+{} more)", e.findings.len() - 1));
                }
            }
        }
        EntryStatus::Accepted => {
            if let Some(path) = &e.path {
                line.push_str(&format!(" -> {path}"));
            }
        }
        _ => {}
    }
    line
}

/// The table of a batch: one row per request, then the totals.
fn render_batch(report: &BatchReport, cost: Option<&BatchCost>) -> String {
    let mut out = String::from(
        "package                          status     rounds  gate   writer tokens (prompt/completion)  gate tokens\n",
    );
    for e in &report.entries {
        out.push_str(&format!(
            "{:<32} {:<10} {:>6}  {:<5}  {:>33}  {:>11}\n",
            e.name,
            e.status.name(),
            e.rounds,
            e.gate_score.map_or("-".to_owned(), |s| format!("{s:.3}")),
            format!(
                "{}/{}",
                e.writer_usage.prompt_tokens, e.writer_usage.completion_tokens
            ),
            e.gate_tokens
        ));
        if e.status != EntryStatus::Accepted || e.rounds == 0 {
            out.push_str(&format!("    {}\n", entry_summary(e)));
        }
    }
    for f in &report.failures {
        out.push_str(&format!("{:<32} failed     {}\n", f.name, f.error));
    }
    out.push_str(&format!(
        "{} requests: {} accepted, {} refused, {} duplicates, {} existing, {} failed ({} from the store)\n",
        report.entries.len() + report.failures.len(),
        report.count(EntryStatus::Accepted),
        report.count(EntryStatus::Refused),
        report.count(EntryStatus::Duplicate),
        report.count(EntryStatus::Exists),
        report.failures.len(),
        report.from_store
    ));
    if let Some(cost) = cost {
        out.push_str(&format!(
            "cost: ${:.4} (writer ${:.4}, gate ${:.4}){}\n",
            cost.total_usd,
            cost.writer_usd,
            cost.gate_usd,
            cost.per_accepted_usd
                .map_or(String::new(), |c| format!("; ${c:.4} per accepted package"))
        ));
    }
    out
}

/// What a batch would do, without writing.
fn render_triage(requests: &[EnvRequest], decisions: &[Triage]) -> String {
    let mut out = String::new();
    let mut writes = 0;
    for (request, decision) in requests.iter().zip(decisions) {
        let (what, nearest) = match decision {
            Triage::Write { nearest } => {
                writes += 1;
                ("write", nearest.as_ref())
            }
            Triage::Skip(entry) => (entry.status.name(), entry.nearest.as_ref()),
        };
        out.push_str(&format!(
            "{:<32} {:<10} {}\n",
            request.name,
            what,
            nearest.map_or(String::new(), |n| format!(
                "nearest {} ({:.2})",
                n.name, n.similarity
            ))
        ));
    }
    out.push_str(&format!(
        "{writes} of {} requests would be written\n",
        requests.len()
    ));
    out
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

//! `envsim audit ...`: consistency diagnostics for trajectories, and the check that proves
//! them on executed ground truth.

mod agree;
mod html;
mod report;
#[cfg(feature = "local")]
mod simulate;
mod workflows;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use envsim_bench::audit_check::trajectories_from_walks;
use envsim_bench::file_audit::{
    audit_trajectory, AuditHost, AuditNotice, Drawing, FileAudit, FileAuditConfig, FileAuditError,
    FileAuditReport, HostError,
};
use envsim_bench::trajectories::{read_runs, TrajectoryFormat};
use envsim_core::audit::AuditTrajectory;
use envsim_core::outcome::OutcomeRule;
use envsim_exec::package::EnvPackage;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: Option<AuditCommand>,
    #[command(flatten)]
    check: CheckArgs,
}

/// `envsim audit TRAJECTORIES`.
#[derive(Debug, Args)]
struct CheckArgs {
    /// Trajectories: envsim trajectory JSONL with states (as `env replay` and simulations write
    /// them), or transcripts without states (OpenAI chat with `tool_calls`, ShareGPT/Hermes
    /// `<tool_call>`/`<tool_response>`, LLaMA-Factory `function_call`/`observation`), one
    /// record per line.
    trajectories: Option<PathBuf>,
    /// Folder of environment packages (default: the bundled corpus, or $ENVSIM_ENVS): the
    /// environment a record names is walked to learn what its tools do, and its outcome rule
    /// reads the observations. Environments it does not hold get effects guessed from tool
    /// names, reported as guesses.
    #[arg(long, value_name = "DIR")]
    envs: Option<PathBuf>,
    /// The environment of every record (else each record's own `env`).
    #[arg(long, value_name = "NAME")]
    env: Option<String>,
    /// The initial state of every record without states: a state file of the environment's
    /// package (`00_small.json`, or without `.json`), else each record's own `state`. What it
    /// holds is known from the first step: ids it lacks are phantoms, field values it holds
    /// are what reads must show until something changes them.
    #[arg(long, value_name = "NAME")]
    state: Option<String>,
    /// An API description the calls and responses are checked against: OpenAPI 3.0/3.1 (JSON,
    /// or YAML when the name ends in .yaml/.yml) or OpenAI tool schemas. Its paths also say
    /// what each operation does to resources (POST /things creates, DELETE /things/{id}
    /// deletes ...) where no package was run to learn it.
    #[arg(long, value_name = "FILE")]
    spec: Option<PathBuf>,
    /// A reference dataset (any form this command reads) whose outcome distribution per tool
    /// is the one expected of the audited trajectories (distribution bias, SDBI). Without it,
    /// the executor's outcomes on the same calls are expected where the corpus holds the
    /// environment and the records carry initial states, else the statuses `--spec` declares.
    #[arg(long, value_name = "FILE")]
    reference_distribution: Option<PathBuf>,
    /// Do not re-execute the calls to learn the expected outcome distribution.
    #[arg(long)]
    no_replay: bool,
    /// Do not read a file of many transcripts of one environment (20 or more, without
    /// states) for what its calls show of the writes of tools the learning walks never saw
    /// succeed (an argument a later read shows in the field it names, a status the call
    /// moves, shown by most of them): such writes are weaker than executed evidence, and
    /// reported as taken from the transcripts.
    #[arg(long)]
    no_transcript_evidence: bool,
    /// Walks per initial state that effects are learned from, at the least: a package with
    /// many tools for its states gets enough for 16 calls per tool in all (0: none).
    #[arg(long, default_value_t = 6)]
    learn_walks: usize,
    /// Write every violation here as JSON Lines.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// How the summary is printed: a plain table, Markdown, JSON, or a self-contained HTML
    /// report (the state constraint graph of one trajectory drawn as a timeline, the drift
    /// curve, the SCS distribution).
    #[arg(long, value_enum, default_value_t = SummaryFormat::Table)]
    format: SummaryFormat,
    /// Print the summary as JSON (the same as `--format json`).
    #[arg(long)]
    json: bool,
    /// The trajectory the HTML report draws: the first whose id contains this text (ids are
    /// `line N TASK`). Default: the one with the most violations.
    #[arg(long, value_name = "TEXT")]
    draw: Option<String>,
    /// Exit 1 when the mean state consistency score is below this (0 to 1).
    #[arg(long, value_name = "SCS")]
    fail_under: Option<f64>,
    /// Refuse a file (exit 1, with the counts per answer form) when less than this share of
    /// its tool answers could be read: a structured value (JSON, a Python literal, a value
    /// embedded in text), or text whose outcome the rule decides. 0 accepts anything.
    #[arg(long, value_name = "SHARE", default_value_t = 0.5)]
    min_read: f64,
}

/// Output formats of the summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum SummaryFormat {
    Table,
    Markdown,
    Json,
    Html,
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Prove the detectors on executed ground truth: seeded walks of every environment become
    /// clean trajectories, a share of them get one planted fault each (dropped update, vanished
    /// create, resurrected delete, phantom entity, stale read, happy-path flip, schema drift,
    /// wrong error; as calls only, list omission instead of dropped update), and every check is
    /// scored against the labels (recall per fault, precision and clean-trajectory flag rate per
    /// check), three times: with the states; with the calls only; and with the calls and only
    /// an OpenAPI description generated from the package (effects from its paths, outcomes read
    /// from the answers, its schemas checked). Effects and the description are learned from
    /// other walks (another seed) of the same environments.
    Validate(ValidateArgs),
    /// Cross-consistency (CCR) of K simulations of the same steps: agreement per step on the
    /// observation and the state change (exact and field by field), per tool; with `--bench`,
    /// K prediction files scored against the truth: how well agreement predicts correctness
    /// (reliability table, AUROC).
    Agree(agree::AgreeArgs),
    /// Run the embedded local model as a multi-step simulator of corpus walks (its own state
    /// carried from step to step), execute every step on that same state, and compare the
    /// audit's SCS and flags with the steps' true correctness.
    #[cfg(feature = "local")]
    Simulate(simulate::SimulateArgs),
    /// Plant known faults in trajectories that are consistent (executed: `env replay` output or
    /// walks), one per trajectory in a `--rate` share of them, kinds in turn; write the faulty
    /// trajectories and the labels (trajectory, step, kind, resource).
    Inject(InjectArgs),
    /// The second validation set, written independently of the injector: agent-style
    /// workflows over the corpus (look up, create then read back, update then verify, cancel
    /// then check, search after creating, act on something missing), executed for the truth,
    /// one fault planted in a `--rate` share of them at a step where the workflow shows it,
    /// written as call-only OpenAI chat transcripts (answers as JSON, Python literals or
    /// sentences) with their labels. Audit them with `--out`, then `envsim audit score`.
    Workflows(workflows::WorkflowsArgs),
    /// Score the audit's violations (`--out`) of a set `envsim audit workflows` wrote against
    /// its labels: recall per fault kind (found: flagged at the planted step or later in the
    /// same trajectory; at the step itself beside it) and the clean trajectories flagged.
    Score(workflows::ScoreArgs),
}

#[derive(Debug, Args)]
struct InjectArgs {
    /// Trajectories with their states (envsim trajectory JSONL).
    trajectories: PathBuf,
    /// Where the trajectories go, faulty and clean, in input order.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Where the labels go (JSON Lines, one per planted fault).
    #[arg(long, value_name = "FILE")]
    labels: PathBuf,
    /// Share of trajectories that get a fault.
    #[arg(long, default_value_t = 0.5)]
    rate: f64,
    /// Seed of the choices.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

#[derive(Debug, Args)]
struct ValidateArgs {
    /// Folder of environment packages (default: the bundled corpus, or $ENVSIM_ENVS).
    #[arg(long, value_name = "DIR")]
    envs: Option<PathBuf>,
    /// Audited walks per initial state.
    #[arg(long, default_value_t = 17)]
    walks: usize,
    /// Walks per initial state that the effects are learned from (seed + 1), at the least: a
    /// package with many tools for its states gets enough for 16 calls per tool in all.
    #[arg(long, default_value_t = 10)]
    learn_walks: usize,
    /// Steps per walk.
    #[arg(long, default_value_t = 16)]
    steps: usize,
    /// Worker processes.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Seed of the audited walks and of the faults.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Share of trajectories that get a fault.
    #[arg(long, default_value_t = 0.5)]
    rate: f64,
    /// Print the counts as JSON instead of Markdown tables.
    #[arg(long)]
    json: bool,
    /// Plant the faults in these agent workflows instead of seeded walks: call-only runs of
    /// environments the corpus holds (envsim trajectory JSONL with `env` and
    /// `initial_state`, such as the ground truth `env import-bfcl` writes to each package's
    /// `trajectories.jsonl`), each replayed through the executor from its initial state for
    /// the truth. Effects are still learned from seeded walks.
    #[arg(long, value_name = "FILE")]
    workflows: Option<PathBuf>,
    /// Write every planted fault here as JSON Lines, per input form: its trajectory, step,
    /// kind and resource, whether it was found, every flag raised on its trajectory (with the
    /// state checks' explanations), and the planted step's tool and faulty observation; then
    /// every clean trajectory a check flagged, with its flags and explanations and no `kind`
    /// (to read what was missed, and what fired falsely, and why).
    #[arg(long, value_name = "FILE")]
    faults: Option<PathBuf>,
}

pub fn run(args: AuditArgs) -> Result<()> {
    match args.command {
        Some(AuditCommand::Validate(a)) => validate_cmd(a),
        Some(AuditCommand::Inject(a)) => inject_cmd(a),
        Some(AuditCommand::Agree(a)) => agree::run(a),
        Some(AuditCommand::Workflows(a)) => workflows::run_workflows(a),
        Some(AuditCommand::Score(a)) => workflows::run_score(a),
        #[cfg(feature = "local")]
        Some(AuditCommand::Simulate(a)) => simulate::run(a),
        None => check_cmd(args.check),
    }
}

fn inject_cmd(a: InjectArgs) -> Result<()> {
    if !(0.0..=1.0).contains(&a.rate) {
        bail!("--rate must be between 0 and 1, got {}", a.rate);
    }
    let path = &a.trajectories;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let source = path.display().to_string();
    let runs = read_runs(&text, &source, None)?;
    let rule = OutcomeRule::success_key();
    let mut rng = envsim_core::rng::Rng::new(a.seed);
    let (mut out, mut labels) = (String::new(), String::new());
    let mut plan = envsim_core::audit::FaultPlan::default();
    let mut planted = 0usize;
    for run in &runs {
        let mut written = audit_trajectory(run.clone(), &source, |o| rule.classify(&o.value))?;
        if let Some((faulty, label)) = plan.plant(&written, a.rate, &mut rng) {
            written = faulty;
            labels.push_str(&serde_json::to_string(&label)?);
            labels.push('\n');
            planted += 1;
        }
        let steps: Vec<Value> = written
            .steps
            .iter()
            .map(|s| {
                json!({"action": {"name": s.tool, "arguments": s.arguments},
                       "observation": match &s.observation { Value::String(t) => t.clone(), other => other.to_string() },
                       "state_after": s.state_after.as_ref()})
            })
            .collect();
        let record = json!({"env": run.env, "task_id": run.task_id, "initial_state": written.initial_state.as_ref(), "steps": steps});
        out.push_str(&record.to_string());
        out.push('\n');
    }
    crate::output::write_atomic(&a.out, &out)?;
    crate::output::write_atomic(&a.labels, &labels)?;
    eprintln!(
        "{} trajectories: {planted} with a planted fault -> {}, labels -> {}",
        runs.len(),
        a.out.display(),
        a.labels.display()
    );
    Ok(())
}

fn check_cmd(a: CheckArgs) -> Result<()> {
    let Some(path) = &a.trajectories else {
        bail!("give a trajectory file (`envsim audit FILE`), or a subcommand (`envsim audit validate`)");
    };
    if let Some(x) = a.fail_under {
        if !(0.0..=1.0).contains(&x) {
            bail!("--fail-under must be between 0 and 1, got {x}");
        }
    }
    if !(0.0..=1.0).contains(&a.min_read) {
        bail!("--min-read must be between 0 and 1, got {}", a.min_read);
    }
    let spec = a
        .spec
        .as_deref()
        .map(crate::spec_files::spec_from_file)
        .transpose()?;
    let format = if a.json {
        SummaryFormat::Json
    } else {
        a.format
    };
    let config = FileAuditConfig {
        env: a.env.clone(),
        state: a.state.clone(),
        spec,
        learn_walks: a.learn_walks,
        replay: !a.no_replay,
        transcript_evidence: !a.no_transcript_evidence,
        drawing: match (&a.draw, format) {
            (_, f) if f != SummaryFormat::Html => Drawing::Nothing,
            (Some(text), _) => Drawing::Containing(text.clone()),
            (None, _) => Drawing::MostViolations,
        },
        min_read: a.min_read,
    };
    let mut host = CorpusHost {
        corpus: crate::context::Corpus::choose(a.envs.clone()),
    };
    // Violations go to a file that appears only at the end, complete.
    let mut out = match &a.out {
        Some(path) => Some(std::io::BufWriter::new(
            envsim_fs::AtomicFile::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => None,
    };
    let mut audit = FileAudit::new(config, &mut host);
    if let Some(out) = &mut out {
        audit = audit.with_violations(out);
    }
    let report = (|| {
        // The reference dataset first: only its outcome classes are counted.
        if let Some(reference) = &a.reference_distribution {
            audit.read_reference(reference)?;
        }
        audit.audit_file(path)?;
        audit.finish()
    })()
    .map_err(cli_error)?;
    if let (Some(file), Some(path)) = (out, &a.out) {
        file.into_inner()
            .map_err(|e| anyhow!("cannot write {}: {}", path.display(), e.error()))?
            .commit()
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let FileAuditReport { summary, drawn } = report;
    match format {
        SummaryFormat::Json => println!("{}", serde_json::to_string_pretty(&summary)?),
        SummaryFormat::Table => report::print_summary(&summary),
        SummaryFormat::Markdown => print!("{}", report::markdown_summary(&summary)),
        SummaryFormat::Html => {
            if a.draw.is_some() && drawn.is_none() {
                bail!(
                    "--draw {:?}: no trajectory id contains it",
                    a.draw.as_deref().unwrap_or_default()
                );
            }
            print!("{}", html::render(&summary, drawn.as_ref()));
        }
    }
    let mean = summary.scs.mean;
    if let Some(limit) = a.fail_under {
        if mean < limit {
            bail!("mean SCS {mean:.4} is below --fail-under {limit}");
        }
    }
    Ok(())
}

/// The audit's errors as the command words them (the share read names `--min-read`).
fn cli_error(error: FileAuditError) -> anyhow::Error {
    match error {
        FileAuditError::Unread {
            file,
            share,
            min_read,
            answers,
        } => anyhow!(
            "{file}: only {:.1}% of the tool answers could be read (below --min-read {min_read}): {answers}. The checks would see almost nothing. Answers are read as JSON, Python literals or values embedded in text, and plain text by the environment's outcome rule (give --env when the records name none)",
            100.0 * share
        ),
        other => other.into(),
    }
}

/// The audit's environments: the corpus, learned and replayed through the executor under
/// progress bars, with notices on standard error.
struct CorpusHost {
    corpus: crate::context::Corpus,
}

impl AuditHost for CorpusHost {
    fn package(&mut self, env: &str) -> Result<Option<EnvPackage>, HostError> {
        if self.corpus.has(env)? {
            Ok(Some(self.corpus.load(env)?))
        } else {
            Ok(None)
        }
    }

    fn learn(
        &mut self,
        package: &EnvPackage,
        plan: &envsim_bench::learn::LearningPlan,
    ) -> Result<envsim_bench::learn::Learned, HostError> {
        Ok(crate::context::learn_planned(package, plan, 2)?)
    }

    fn replay(
        &mut self,
        packages: &[EnvPackage],
        runs: &[envsim_bench::trajectories::RecordedRun],
        source: &str,
        choice: envsim_bench::replay::ReplayChoice<'_>,
    ) -> Result<Vec<envsim_bench::replay::ReplayedRun>, HostError> {
        let runtime = crate::context::exec_runtime()?;
        let limits = crate::context::exec_limits()?;
        let replayed = runtime.block_on(async {
            let executor =
                std::sync::Arc::new(envsim_exec::Executor::new(choice.workers, limits).await?);
            crate::context::replay_runs(executor, packages, runs, source, choice).await
        })?;
        Ok(replayed)
    }

    fn notice(&mut self, notice: AuditNotice) {
        match notice {
            AuditNotice::Guessed { env, from_spec } => {
                let from = if from_spec {
                    "taken from the --spec paths, else guessed from tool names"
                } else {
                    "guessed from tool names"
                };
                match env {
                    None => eprintln!("records without an environment: effects are {from}"),
                    Some(env) => eprintln!(
                        "{env:?}: not in {}; effects are {from}",
                        self.corpus.display()
                    ),
                }
            }
            AuditNotice::FromTranscripts {
                env,
                transcripts,
                tools,
            } => {
                let tools: Vec<String> = (tools.iter())
                    .map(|(tool, read_back)| format!("{tool} ({read_back} read back)"))
                    .collect();
                eprintln!(
                    "{env}: writes of {} taken from what the file's {transcripts} transcripts show (no executed success of them was seen; weaker evidence than executed calls; --no-transcript-evidence leaves them out)",
                    tools.join(", ")
                );
            }
            AuditNotice::Replaying { runs } => eprintln!(
                "re-executing the calls of {runs} runs for the expected outcomes (--no-replay skips this)"
            ),
        }
    }
}

/// Workflows replayed at a time by [`replay_workflows`]: a replayed run holds each state it
/// changed whole (τ²'s airline database is 3 MB as JSON), so memory holds a chunk of runs, not
/// the file.
const WORKFLOW_CHUNK: usize = 8;

/// The workflows of one package replayed through the executor from their initial states: the
/// trajectories, with their states, that the faults are planted in, handed to `each` a chunk
/// at a time, in order.
fn replay_workflows(
    package: &envsim_exec::package::EnvPackage,
    runs: &[envsim_bench::trajectories::RecordedRun],
    source: &str,
    a: &ValidateArgs,
    mut each: impl FnMut(Vec<AuditTrajectory>),
) -> Result<()> {
    let runtime = crate::context::exec_runtime()?;
    runtime.block_on(async {
        let executor = std::sync::Arc::new(
            envsim_exec::Executor::new(a.workers, crate::context::exec_limits()?).await?,
        );
        for chunk in runs.chunks(WORKFLOW_CHUNK) {
            let replayed = crate::context::replay_runs(
                std::sync::Arc::clone(&executor),
                std::slice::from_ref(package),
                chunk,
                source,
                envsim_bench::replay::ReplayChoice {
                    env: Some(&package.manifest.name),
                    state: None,
                    seed: a.seed,
                    workers: a.workers,
                    clock: None,
                    clock_step: None,
                },
            )
            .await?;
            each(
                replayed
                    .iter()
                    .filter(|run| !run.steps.is_empty())
                    .map(|run| {
                        let steps: Vec<&envsim_explore::record::TransitionRecord> =
                            run.steps.iter().map(|s| &s.transition).collect();
                        envsim_bench::audit_check::trajectory_from(
                            format!("{}/{}", run.env, run.task_id),
                            std::sync::Arc::clone(&run.initial_state),
                            &steps,
                        )
                    })
                    .collect(),
            );
        }
        anyhow::Ok(())
    })
}

fn validate_cmd(a: ValidateArgs) -> Result<()> {
    if !(0.0..=1.0).contains(&a.rate) {
        anyhow::bail!("--rate must be between 0 and 1, got {}", a.rate);
    }
    let mut packages = crate::context::Corpus::choose(a.envs.clone()).load_all()?;
    let walk = |walks: usize| crate::context::walk_args(walks, a.steps, a.workers);
    // The workflows, by environment, when they stand in for the walks.
    let workflows = match &a.workflows {
        Some(path) => {
            let source = path.display().to_string();
            let text =
                std::fs::read_to_string(path).with_context(|| format!("cannot read {source}"))?;
            let runs = read_runs(&text, &source, Some(TrajectoryFormat::Envsim))?;
            let mut by_env: BTreeMap<String, Vec<envsim_bench::trajectories::RecordedRun>> =
                BTreeMap::new();
            for run in runs {
                let Some(env) = run.env.clone() else {
                    bail!(
                        "{source}: {}: the run names no environment (`env`)",
                        run.location
                    );
                };
                if !packages.iter().any(|p| p.manifest.name == env) {
                    bail!(
                        "{source}: {}: environment {env:?} is not in the corpus (give --envs)",
                        run.location
                    );
                }
                by_env.entry(env).or_default().push(run);
            }
            packages.retain(|p| by_env.contains_key(&p.manifest.name));
            Some((source, by_env))
        }
        None => None,
    };
    // One environment at a time: a trajectory holds every changed state whole, so memory holds
    // one environment's walks (or a chunk of its workflows). Seeded walks of environments with states past the large-state
    // size (database dumps of megabytes) are left out: most of their steps change the state, and
    // their walks would not fit whole. Workflows the user gives are audited whatever the size
    // (agent workflows read more than they write, and runs from one database share it).
    use envsim_bench::audit_check::{InputForm, Validation};
    let mut results = [
        Validation::new(InputForm::States),
        Validation::new(InputForm::Calls),
        Validation::new(InputForm::CallsInitial),
        Validation::new(InputForm::OpenApi),
    ];
    for package in packages {
        let name = package.manifest.name.clone();
        let largest = package
            .states
            .iter()
            .map(|(_, s)| s.to_string().len())
            .max()
            .unwrap_or(0);
        if largest >= envsim_explore::record::LARGE_STATE_BYTES && workflows.is_none() {
            eprintln!(
                "{name}: left out (a state of {largest} bytes; trajectories hold states whole)"
            );
            continue;
        }
        let envsim_bench::learn::Learned {
            runs: learned,
            effects,
            ..
        } = crate::context::learn(
            &package,
            a.learn_walks,
            a.steps,
            a.workers,
            a.seed.wrapping_add(1),
        )?;
        // The OpenAPI form's description, generated from the same learning walks.
        let doc = envsim_spec::openapi::describe(&package.manifest.outline(), &learned, &effects);
        drop(learned);
        let spec = envsim_core::apispec::parse_spec(&doc).map_err(|e| {
            anyhow::anyhow!(
                "{name}: the generated description at {}: {}",
                e.pointer,
                e.message
            )
        })?;
        let spec = envsim_spec::checks::SpecChecks::from_spec(&spec, format!("{name} (generated)"));
        let rule = package.outcome.clone();
        let known = envsim_bench::audit_check::Known {
            effects: &effects,
            rule: &rule,
            spec: Some(&spec),
        };
        let mut add = |env: &str, runs: &[AuditTrajectory]| {
            for result in &mut results {
                result.add(env, runs, &known, a.rate, a.seed);
            }
        };
        match &workflows {
            Some((source, by_env)) => {
                replay_workflows(&package, &by_env[&name], source, &a, |runs| {
                    add(&name, &runs)
                })?;
            }
            None => {
                let walked = trajectories_from_walks(
                    &crate::context::explore(
                        vec![package],
                        walk(a.walks).plan(a.seed, false),
                        a.workers,
                    )?
                    .into_paths(),
                );
                for (env, runs) in walked {
                    add(&env, &runs);
                }
            }
        }
        eprintln!("{name}: {} trajectories so far", results[0].trajectories);
    }
    if let Some(path) = &a.faults {
        let file = envsim_fs::AtomicFile::create(path)?;
        let mut out = std::io::BufWriter::new(file.as_file());
        for fault in results.iter().flat_map(|r| r.planted()) {
            serde_json::to_writer(&mut out, fault)?;
            out.write_all(b"\n")?;
        }
        // Then every clean trajectory a check flagged (no `kind`: nothing was planted there).
        for alarm in results.iter().flat_map(|r| r.false_alarms()) {
            serde_json::to_writer(&mut out, alarm)?;
            out.write_all(b"\n")?;
        }
        out.flush()
            .with_context(|| format!("cannot write {}", path.display()))?;
        drop(out);
        file.commit()?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        for (i, result) in results.iter().enumerate() {
            if i > 0 {
                println!();
            }
            print!("{}", result.markdown());
        }
    }
    Ok(())
}

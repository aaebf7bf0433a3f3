//! `envsim audit ...`: consistency diagnostics for trajectories, and the check that proves
//! them on executed ground truth.

mod agree;
mod html;
mod report;
#[cfg(feature = "local")]
mod simulate;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use envsim_bench::audit_check::trajectories_from_walks;
use envsim_bench::trajectories::{read_run, read_runs, TrajectoryFormat};
use envsim_core::answer::observation_value;
use envsim_core::answer::{Answer, AnswerForm, AnswerTally};
use envsim_core::audit::bias::{
    call_transition_kind, declared_classes, outcome_class, OutcomeCounts,
};
use envsim_core::audit::observed::{
    audit_calls, guess_outcome, CallStep, CallTrajectory, Timeline,
};
use envsim_core::audit::{
    audit, AnswerSummary, AuditStep, AuditTrajectory, BiasSummary, Effects, EffectsOrigin,
    EnvironmentEffects, SpecViolation, SummaryTally, TrajectoryAudit,
};
use envsim_core::outcome::OutcomeRule;
use envsim_core::transcript::{is_transcript, read_transcript};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

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
        #[cfg(feature = "local")]
        Some(AuditCommand::Simulate(a)) => simulate::run(a),
        None => check_cmd(args.check),
    }
}

/// A recorded run as an audit trajectory (states carried forward where a step records none),
/// with `classify` reading each observation's outcome.
fn audit_trajectory(
    run: envsim_bench::trajectories::RecordedRun,
    source: &str,
    mut classify: impl FnMut(&Answer) -> Option<bool>,
) -> Result<AuditTrajectory> {
    let envsim_bench::trajectories::RecordedRun {
        location,
        task_id,
        initial_state,
        steps,
        ..
    } = run;
    let Some(initial) = initial_state else {
        bail!(
            "{source}: {location}: no initial state; the audit needs a trajectory's states (`envsim env replay` writes them for recorded calls)"
        );
    };
    // States are moved, not copied; a step that records none shares the state before it.
    let initial = std::sync::Arc::new(initial);
    let mut out: Vec<AuditStep> = Vec::with_capacity(steps.len());
    for s in steps {
        let state_after = match s.state_after {
            Some(after) => std::sync::Arc::new(after),
            None => std::sync::Arc::clone(out.last().map_or(&initial, |p| &p.state_after)),
        };
        let answer = Answer::of_value(s.observation.as_ref());
        out.push(AuditStep {
            tool: s.tool,
            arguments: s.arguments,
            success: classify(&answer),
            observation: answer.value,
            state_after,
        });
    }
    Ok(AuditTrajectory {
        id: format!("{location} {task_id}"),
        initial_state: initial,
        steps: out,
    })
}

/// [`read_run`] on a record it may take apart: its states are moved into the run instead of
/// copied (the rest of the record is read as `read_run` reads it, with the same errors).
fn run_of(
    mut value: Value,
    location: &str,
    index: usize,
    format: TrajectoryFormat,
    source: &str,
) -> Result<envsim_bench::trajectories::RecordedRun> {
    if format != TrajectoryFormat::Envsim {
        return Ok(read_run(&value, location, index, format, source)?);
    }
    let take = |slot: Option<&mut Value>| match slot {
        Some(v @ Value::Object(_)) => Some(v.take()),
        _ => None,
    };
    let initial = take(value.get_mut("initial_state"));
    let afters: Vec<Option<Value>> = match value.get_mut("steps").and_then(Value::as_array_mut) {
        Some(steps) => steps
            .iter_mut()
            .map(|s| take(s.get_mut("state_after")))
            .collect(),
        None => Vec::new(),
    };
    let mut run = read_run(&value, location, index, format, source)?;
    if initial.is_some() {
        run.initial_state = initial;
    }
    for (step, after) in run.steps.iter_mut().zip(afters) {
        if after.is_some() {
            step.state_after = after;
        }
    }
    Ok(run)
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
    let source = path.display().to_string();
    let corpus = crate::context::Corpus::choose(a.envs.clone());
    let mut audit = Auditor {
        args: &a,
        corpus,
        spec,
        known: BTreeMap::new(),
        declared: HashMap::new(),
        tally: SummaryTally::default(),
        out: None,
        current: (String::new(), None),
        counting_done: false,
        outcomes: OutcomeCounts::default(),
        reference: None,
        to_replay: Vec::new(),
        drawn: None,
    };
    // The reference dataset first: only its outcome classes are counted.
    if let Some(reference) = &a.reference_distribution {
        audit.reference = Some(OutcomeCounts::default());
        let name = reference.display().to_string();
        for_each_record_in(reference, |value, location, index| {
            audit.record(value, location, index, &name)
        })?;
        refuse_unread(&name, audit.tally.answers_of(&name), a.min_read)?;
        audit.tally.forget_inputs();
    }
    // From now on records are audited (the reference's counts stay aside).
    audit.counting_done = true;
    if let Some(out) = &a.out {
        audit.out = Some(std::io::BufWriter::new(
            envsim_fs::AtomicFile::create(out)
                .with_context(|| format!("cannot create {}", out.display()))?,
        ));
    }
    // One record at a time: only its audit (violations, flags) is kept.
    for_each_record_in(path, |value, location, index| {
        audit.record(value, location, index, &source)
    })?;
    if audit.tally.trajectories() == 0 {
        bail!("{source}: no trajectories");
    }
    refuse_unread(&source, audit.tally.answers_of(&source), a.min_read)?;
    let bias = audit.bias(&source)?;
    let Auditor {
        tally,
        known,
        drawn,
        out: writer,
        ..
    } = audit;
    if let (Some(file), Some(out)) = (writer, &a.out) {
        // Whole or not at all: the file appears only now, complete.
        file.into_inner()
            .map_err(|e| anyhow!("cannot write {}: {}", out.display(), e.error()))?
            .commit()
            .with_context(|| format!("cannot write {}", out.display()))?;
    }
    let environments = (known.iter())
        .map(|(env, k)| EnvironmentEffects {
            env: env.clone(),
            effects: if k.package.is_some() {
                EffectsOrigin::Learned
            } else {
                EffectsOrigin::Guessed
            },
        })
        .collect();
    let summary = tally.finish(environments, bias);
    let format = if a.json {
        SummaryFormat::Json
    } else {
        a.format
    };
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

/// Refuses a file when less than `min_read` of its answers could be read: a clean bill of
/// health for a file whose answers were never read would be a lie.
fn refuse_unread(source: &str, tally: Option<&AnswerTally>, min_read: f64) -> Result<()> {
    let Some(t) = tally else { return Ok(()) };
    if t.answers > 0 && t.read_share() < min_read {
        bail!(
            "{source}: only {:.1}% of the tool answers could be read (below --min-read {min_read}): {}. The checks would see almost nothing. Answers are read as JSON, Python literals or values embedded in text, and plain text by the environment's outcome rule (give --env when the records name none)",
            100.0 * t.read_share(),
            AnswerSummary::of(t).describe()
        );
    }
    Ok(())
}

/// Every record of a file, one at a time, read as it goes: JSON Lines are read line by line, so
/// memory holds one record, however long the file (a JSON array is read whole).
pub fn for_each_record_in(
    path: &Path,
    mut each: impl FnMut(Value, &str, usize) -> Result<()>,
) -> Result<()> {
    use std::io::{BufRead, Read};
    let source = path.display().to_string();
    let file = std::fs::File::open(path).with_context(|| format!("cannot read {source}"))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let first = {
        let buffer = reader
            .fill_buf()
            .with_context(|| format!("cannot read {source}"))?;
        let buffer = buffer
            .strip_prefix(b"\xEF\xBB\xBF".as_slice())
            .unwrap_or(buffer);
        buffer.iter().copied().find(|b| !b.is_ascii_whitespace())
    };
    match first {
        None => bail!("{source}: the file is empty"),
        Some(b'[') => {
            let mut text = String::new();
            reader
                .read_to_string(&mut text)
                .with_context(|| format!("cannot read {source}"))?;
            return for_each_record(&text, &source, each);
        }
        Some(_) => {}
    }
    let (mut line, mut number, mut index) = (Vec::new(), 0usize, 0usize);
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .with_context(|| format!("cannot read {source}"))?;
        if n == 0 {
            break;
        }
        number += 1;
        let mut text = line.trim_ascii();
        if number == 1 {
            text = text
                .strip_prefix(b"\xEF\xBB\xBF".as_slice())
                .unwrap_or(text);
        }
        if text.is_empty() {
            continue;
        }
        let value: Value = serde_json::from_slice(text).map_err(|e| {
            anyhow!(
                "{source}: line {number}, column {}: not valid JSON: {e}",
                e.column()
            )
        })?;
        each(value, &format!("line {number}"), index)?;
        index += 1;
    }
    Ok(())
}

/// Every record of a text, one at a time: `each` gets the parsed value, where it is, and its
/// position.
pub fn for_each_record(
    text: &str,
    source: &str,
    mut each: impl FnMut(Value, &str, usize) -> Result<()>,
) -> Result<()> {
    let bytes = text.as_bytes();
    match envsim_core::formats::record_spans(bytes) {
        Some(spans) => {
            for span in spans {
                let location = span.location.to_string();
                let value: Value = match serde_json::from_slice(&bytes[span.range.clone()]) {
                    Ok(v) => v,
                    // The whole-file reader gives the located syntax error.
                    Err(_) => match envsim_core::formats::records(bytes, source) {
                        Err(e) => bail!("{e}"),
                        Ok(_) => bail!("{source}: {location}: not valid JSON"),
                    },
                };
                each(value, &location, span.index)?;
            }
        }
        None => {
            for r in envsim_core::formats::records(bytes, source).map_err(|e| anyhow!("{e}"))? {
                each(r.value, &r.location.to_string(), r.index)?;
            }
        }
    }
    Ok(())
}

/// One record read in the first form that fits it.
pub(crate) enum AuditRecord {
    /// A function-calling transcript without states.
    Transcript(envsim_core::transcript::Transcript),
    /// An envsim or reference run (with states when it has an initial state).
    Run(envsim_bench::trajectories::RecordedRun),
}

/// Reads one record: a transcript (`messages` / `conversations`, no initial state), else a
/// trajectory record; errors name the file, the record and the field.
pub(crate) fn read_record(
    value: Value,
    location: &str,
    index: usize,
    source: &str,
) -> Result<AuditRecord> {
    if is_transcript(&value) && value.get("initial_state").is_none() {
        return read_transcript(&value)
            .map(AuditRecord::Transcript)
            .map_err(|e| {
                anyhow!(
                    "{source}: {location}: at {}: {}",
                    if e.pointer.is_empty() {
                        "the record"
                    } else {
                        &e.pointer
                    },
                    e.message
                )
            });
    }
    let format = TrajectoryFormat::detect(&value).ok_or_else(|| {
        anyhow!("{source}: {location}: not a trajectory record: expected `steps` (envsim), `task_info` + `trajectory` (reference), `messages` (OpenAI chat) or `conversations` (ShareGPT/Hermes)")
    })?;
    Ok(AuditRecord::Run(run_of(
        value, location, index, format, source,
    )?))
}

/// A step as the outcome counts and the specification checks read it, borrowed from a
/// trajectory with or without states (nothing is copied).
struct StepView<'a> {
    tool: &'a str,
    arguments: &'a serde_json::Map<String, Value>,
    observation: &'a Value,
    success: Option<bool>,
}

fn views_of_calls(t: &CallTrajectory) -> Vec<StepView<'_>> {
    t.steps
        .iter()
        .map(|s| StepView {
            tool: &s.tool,
            arguments: &s.arguments,
            observation: &s.observation,
            success: s.success,
        })
        .collect()
}

fn views_of_states(t: &AuditTrajectory) -> Vec<StepView<'_>> {
    t.steps
        .iter()
        .map(|s| StepView {
            tool: &s.tool,
            arguments: &s.arguments,
            observation: &s.observation,
            success: s.success,
        })
        .collect()
}

/// What is expected of each tool's outcome classes (`None`: nothing is).
type Expectation = Box<dyn Fn(&str) -> Option<BTreeMap<String, f64>>>;

/// The audit of a file, record by record.
struct Auditor<'a> {
    args: &'a CheckArgs,
    corpus: crate::context::Corpus,
    /// The `--spec` description.
    spec: Option<envsim_spec::checks::SpecChecks>,
    /// Per environment: its effects and outcome rule (learned once).
    known: BTreeMap<String, Known>,
    /// Tool lists transcripts declare, compiled once each (by their JSON text).
    declared: HashMap<String, std::rc::Rc<envsim_spec::checks::SpecChecks>>,
    /// Running totals of the audits (nothing per trajectory is kept): violations, SCS,
    /// specification conformance, input forms, answers per file, transitions.
    tally: SummaryTally,
    /// Where violations go as they are found (`--out`).
    out: Option<std::io::BufWriter<envsim_fs::AtomicFile>>,
    /// The record being audited: where it is (`line 3`) and its own id, which every
    /// violation carries in fields of their own.
    current: (String, Option<String>),
    /// Whether the reference dataset has been read (records now go to the audit).
    counting_done: bool,
    /// Outcome classes per tool of the audited steps.
    outcomes: OutcomeCounts,
    /// Outcome classes of the reference dataset, when one is read.
    reference: Option<OutcomeCounts>,
    /// Runs with initial states of environments the corpus holds (states after dropped), to
    /// re-execute for the expected outcomes.
    to_replay: Vec<envsim_bench::trajectories::RecordedRun>,
    /// The trajectory the HTML report draws.
    drawn: Option<html::Drawn>,
}

impl Auditor<'_> {
    /// What is known of `env`: learned from its package when the corpus holds it, else guessed
    /// (with what `--spec` declares).
    fn known(&mut self, env: &str) -> Result<&Known> {
        if !self.known.contains_key(env) {
            let declared = self
                .spec
                .as_ref()
                .map(|s| s.effects.clone())
                .unwrap_or_default();
            // A package that is there but does not load is an error, not a guess.
            let entry = if !env.is_empty() && self.corpus.has(env)? {
                let package = self.corpus.load(env)?;
                Known {
                    effects: crate::context::learn(&package, self.args.learn_walks, 16, 2, 1)?
                        .effects
                        .with_annotations(&declared),
                    rule: Some(package.outcome.clone()),
                    package: Some(package),
                }
            } else {
                let from = if declared.is_empty() {
                    "guessed from tool names".to_owned()
                } else {
                    "taken from the --spec paths, else guessed from tool names".to_owned()
                };
                if env.is_empty() {
                    eprintln!("records without an environment: effects are {from}");
                } else {
                    eprintln!(
                        "{env:?}: not in {}; effects are {from}",
                        self.corpus.display()
                    );
                }
                Known {
                    effects: Effects::default().with_annotations(&declared),
                    rule: None,
                    package: None,
                }
            };
            self.known.insert(env.to_owned(), entry);
        }
        Ok(&self.known[env])
    }

    /// Counts the outcome class of every step of a trajectory (into the reference's counts
    /// while the reference dataset is read).
    fn count_outcomes(&mut self, steps: &[StepView<'_>]) {
        let counts = match (&mut self.reference, self.counting_done) {
            (Some(reference), false) => reference,
            _ => &mut self.outcomes,
        };
        for step in steps {
            counts.add(step.tool, outcome_class(step.observation, step.success));
        }
    }

    /// Whether the HTML report should draw `report`'s trajectory: the one asked for
    /// (`--draw`), or one with more violations than the one kept.
    fn wants_drawing(&self, report: &TrajectoryAudit) -> bool {
        if self.args.format != SummaryFormat::Html || self.args.json {
            return false;
        }
        match &self.args.draw {
            Some(text) => self.drawn.is_none() && report.trajectory.contains(text.as_str()),
            None => self
                .drawn
                .as_ref()
                .is_none_or(|d| report.violations.len() > d.violations.len()),
        }
    }

    /// Keeps a trajectory's timeline and violations for the HTML report.
    fn keep_drawing(
        &mut self,
        report: &TrajectoryAudit,
        spec: &[SpecViolation],
        timeline: Timeline,
    ) {
        self.drawn = Some(html::Drawn {
            timeline,
            violations: report.violations.clone(),
            spec: spec.to_vec(),
        });
    }

    /// Whether records go to the reference's counts only.
    fn counting_reference(&self) -> bool {
        self.reference.is_some() && !self.counting_done
    }

    /// Distribution bias of the audited steps against what is expected of them.
    fn bias(&mut self, source: &str) -> Result<BiasSummary> {
        let (from, expected): (String, Expectation) =
            if let Some(reference) = self.reference.clone() {
                let name = self
                    .args
                    .reference_distribution
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                (
                    format!("reference dataset {name}"),
                    Box::new(move |tool: &str| {
                        (reference.steps(tool) > 0).then(|| reference.distribution(tool))
                    }),
                )
            } else if !self.args.no_replay && !self.to_replay.is_empty() {
                let executed = self.replay(source)?;
                (
                    "the executor, on the same calls".to_owned(),
                    Box::new(move |tool: &str| {
                        (executed.steps(tool) > 0).then(|| executed.distribution(tool))
                    }),
                )
            } else if let Some(declared) = self.spec.as_ref().map(|s| s.declared_statuses()) {
                (
                    "the statuses --spec declares, each equally likely".to_owned(),
                    Box::new(move |tool: &str| {
                        declared
                            .get(tool)
                            .map(|statuses| declared_classes(statuses.iter().map(String::as_str)))
                    }),
                )
            } else {
                return Ok(BiasSummary::of(&self.outcomes, None));
            };
        Ok(BiasSummary::of(&self.outcomes, Some((from, &*expected))))
    }

    /// The outcome classes the executor gives on the calls of the runs kept for replay.
    fn replay(&mut self, source: &str) -> Result<OutcomeCounts> {
        let runs = std::mem::take(&mut self.to_replay);
        let packages: Vec<envsim_exec::package::EnvPackage> = self
            .known
            .values()
            .filter_map(|k| k.package.clone())
            .collect();
        eprintln!(
            "re-executing the calls of {} runs for the expected outcomes (--no-replay skips this)",
            runs.len()
        );
        let runtime = crate::context::exec_runtime()?;
        let limits = crate::context::exec_limits()?;
        let env = self.args.env.clone();
        let replayed = runtime.block_on(async {
            let executor = std::sync::Arc::new(envsim_exec::Executor::new(2, limits).await?);
            let choice = envsim_bench::replay::ReplayChoice {
                env: env.as_deref(),
                workers: 2,
                ..Default::default()
            };
            crate::context::replay_runs(executor, &packages, &runs, source, choice).await
        })?;
        let mut counts = OutcomeCounts::default();
        for run in &replayed {
            for step in &run.steps {
                let t = &step.transition;
                let observation = observation_value(&t.observation_json, &t.observation);
                let success = match t.outcome {
                    envsim_bench::collect::Outcome::Success => Some(true),
                    envsim_bench::collect::Outcome::Failure
                    | envsim_bench::collect::Outcome::Exception => Some(false),
                    envsim_bench::collect::Outcome::Undetermined => None,
                };
                let tool = t.action["name"].as_str().unwrap_or_default();
                counts.add(tool, outcome_class(&observation, success));
            }
        }
        Ok(counts)
    }

    /// Audits one record.
    fn record(&mut self, value: Value, location: &str, index: usize, source: &str) -> Result<()> {
        let env = self
            .args
            .env
            .clone()
            .or_else(|| value.get("env").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        let state_name = self.args.state.clone().or_else(|| {
            value
                .get("state")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        let run = match read_record(value, location, index, source)? {
            AuditRecord::Transcript(t) => {
                self.current = (location.to_owned(), t.id.clone());
                self.tally.add_input(t.form.name());
                let declared = if t.tools.is_empty() || self.spec.is_some() {
                    None
                } else {
                    let key = serde_json::to_string(&t.tools)?;
                    if !self.declared.contains_key(&key) {
                        let name = format!("the tools {source} {location} declares");
                        let checks = envsim_spec::checks::SpecChecks::from_tools(&t.tools, name)
                            .map_err(|e| {
                                anyhow::anyhow!(
                                    "{source} {location}: tools at {}: {}",
                                    e.pointer,
                                    e.message
                                )
                            })?;
                        self.declared.insert(key.clone(), std::rc::Rc::new(checks));
                    }
                    Some(std::rc::Rc::clone(&self.declared[&key]))
                };
                let initial = self.initial_state(&env, state_name.as_deref(), source, location)?;
                let known = self.known(&env)?;
                let steps: Vec<(CallStep, AnswerForm)> = t
                    .calls
                    .into_iter()
                    .map(|mut c| {
                        let answer = c.take_answer();
                        known.call_step(c.tool, c.arguments, answer)
                    })
                    .collect();
                let steps = self.tally_answers(source, steps);
                let id = format!("{location} {}", t.id.unwrap_or_else(|| index.to_string()));
                return self.audit_calls(
                    env,
                    CallTrajectory { id, steps },
                    declared.as_deref(),
                    initial.as_ref(),
                );
            }
            AuditRecord::Run(run) => run,
        };
        self.current = (location.to_owned(), Some(run.task_id.clone()));
        let form = if run.initial_state.is_none() {
            "calls"
        } else {
            "states"
        };
        self.tally.add_input(form);
        self.known(&env)?;
        let known = &self.known[&env];
        if run.initial_state.is_none() {
            let initial = self.initial_state(&env, state_name.as_deref(), source, location)?;
            let known = &self.known[&env];
            let id = format!("{} {}", run.location, run.task_id);
            let steps: Vec<(CallStep, AnswerForm)> = run
                .steps
                .into_iter()
                .map(|s| {
                    known.call_step(
                        s.tool,
                        s.arguments,
                        Answer::of_value(s.observation.as_ref()),
                    )
                })
                .collect();
            let steps = self.tally_answers(source, steps);
            return self.audit_calls(env, CallTrajectory { id, steps }, None, initial.as_ref());
        }
        if known.package.is_some()
            && !self.args.no_replay
            && self.args.reference_distribution.is_none()
        {
            self.to_replay.push(calls_of(&run));
        }
        let mut forms = Vec::with_capacity(run.steps.len());
        let trajectory = audit_trajectory(run, source, |answer| {
            let success = known.classify_answer(answer);
            forms.push((answer.form, success.is_some()));
            success
        })?;
        for (form, read) in forms {
            self.tally.add_answer(source, form, read);
        }
        let steps = views_of_states(&trajectory);
        self.count_outcomes(&steps);
        if self.counting_reference() {
            return Ok(());
        }
        let report = audit(&trajectory, &self.known[&env].effects);
        self.tally.add_transitions(&report.transitions);
        let spec = self.check_spec(&env, &trajectory.id, &steps, None);
        if self.wants_drawing(&report) {
            self.keep_drawing(&report, &spec, Timeline::of_states(&trajectory));
        }
        self.finish(report, spec)
    }

    /// Counts the answers of a trajectory's steps by form, under the file they came from.
    fn tally_answers(&mut self, source: &str, steps: Vec<(CallStep, AnswerForm)>) -> Vec<CallStep> {
        steps
            .into_iter()
            .map(|(step, form)| {
                self.tally.add_answer(source, form, step.success.is_some());
                step
            })
            .collect()
    }

    /// The initial state a record without states names (`--state`, else its own `state`): a
    /// state file of its environment's package. Naming one the package lacks, or naming one
    /// for an environment the corpus does not hold, is an error.
    fn initial_state(
        &mut self,
        env: &str,
        name: Option<&str>,
        source: &str,
        location: &str,
    ) -> Result<Option<Value>> {
        let Some(name) = name else { return Ok(None) };
        let known = self.known(env)?;
        let Some(package) = &known.package else {
            bail!("{source}: {location}: the record names the initial state {name:?}, but its environment {env:?} is not in the corpus (give --envs, or --env)");
        };
        let found = package
            .states
            .iter()
            .find(|(file, _)| file == name || file.strip_suffix(".json") == Some(name));
        match found {
            Some((_, state)) => Ok(Some(state.clone())),
            None => {
                let names: Vec<&str> = package.states.iter().map(|(f, _)| f.as_str()).collect();
                bail!(
                    "{source}: {location}: {env} has no state {name:?} (its states: {})",
                    names.join(", ")
                )
            }
        }
    }

    fn audit_calls(
        &mut self,
        env: String,
        trajectory: CallTrajectory,
        declared: Option<&envsim_spec::checks::SpecChecks>,
        initial: Option<&Value>,
    ) -> Result<()> {
        let steps = views_of_calls(&trajectory);
        self.count_outcomes(&steps);
        if self.counting_reference() {
            return Ok(());
        }
        let effects = &self.known[&env].effects;
        let kinds: Vec<&'static str> = trajectory
            .steps
            .iter()
            .map(|s| call_transition_kind(&effects.of(&s.tool), s.success))
            .collect();
        let report = audit_calls(&trajectory, effects, initial);
        self.tally.add_transitions(&kinds);
        let spec = self.check_spec(&env, &trajectory.id, &steps, declared);
        if self.wants_drawing(&report) {
            let timeline = Timeline::of_calls(&trajectory, &self.known[&env].effects);
            self.keep_drawing(&report, &spec, timeline);
        }
        self.finish(report, spec)
    }

    /// Adds a trajectory's audit to the totals and writes its violations (state checks, then
    /// specification) to `--out`.
    fn finish(&mut self, report: TrajectoryAudit, spec: Vec<SpecViolation>) -> Result<()> {
        self.tally.add_audit(&report);
        if let Some(file) = &mut self.out {
            let (location, record) = &self.current;
            let line = location
                .strip_prefix("line ")
                .and_then(|n| n.parse::<usize>().ok());
            let violations = report.violations.iter().map(serde_json::to_value);
            for v in violations.chain(spec.iter().map(serde_json::to_value)) {
                let mut v = v?;
                if let Value::Object(map) = &mut v {
                    map.insert("record".into(), json!(record));
                    map.insert("line".into(), json!(line));
                    map.insert("location".into(), json!(location));
                }
                serde_json::to_writer(&mut *file, &v)?;
                file.write_all(b"\n")?;
            }
        }
        Ok(())
    }

    /// Every step against the specification: `--spec`, else the tools the record declares,
    /// else the environment package's manifest. A trajectory with none is not checked.
    fn check_spec(
        &mut self,
        env: &str,
        id: &str,
        steps: &[StepView<'_>],
        declared: Option<&envsim_spec::checks::SpecChecks>,
    ) -> Vec<SpecViolation> {
        let mut found = Vec::new();
        let package = self.known.get(env).and_then(|k| k.package.as_ref());
        let spec = self.spec.as_ref().or(declared);
        if spec.is_none() && package.is_none() {
            return found;
        }
        let tools = package.map(|p| p.manifest.tool_names()).unwrap_or_default();
        let mut flags = Vec::with_capacity(steps.len());
        for (k, step) in steps.iter().enumerate() {
            let (tool, arguments) = (step.tool, step.arguments);
            let problems: Vec<(&str, String)> = match (spec, package) {
                (Some(spec), _) => spec
                    .check(tool, arguments, step.observation, step.success)
                    .into_iter()
                    .map(|p| (p.kind, p.explanation))
                    .collect(),
                // A refused call fits (as `SpecChecks::check` says).
                (None, Some(_)) if step.success == Some(false) => Vec::new(),
                (None, Some(package)) => {
                    if tools.iter().any(|t| t == tool) {
                        let problems = package.arguments.check(tool, arguments);
                        if problems.is_empty() {
                            Vec::new()
                        } else {
                            vec![("argument_schema", problems.join("; "))]
                        }
                    } else {
                        vec![("unknown_tool", format!("{tool} is not a tool of {env}"))]
                    }
                }
                (None, None) => Vec::new(),
            };
            flags.push(!problems.is_empty());
            for (kind, explanation) in problems {
                found.push(SpecViolation {
                    trajectory: id.to_owned(),
                    step: k,
                    tool: tool.to_owned(),
                    kind: kind.to_owned(),
                    explanation,
                });
            }
        }
        self.tally.add_spec_flags(&flags);
        found
    }
}

/// The calls of a run, without its states after (a replay starts from its initial state).
fn calls_of(
    run: &envsim_bench::trajectories::RecordedRun,
) -> envsim_bench::trajectories::RecordedRun {
    envsim_bench::trajectories::RecordedRun {
        location: run.location.clone(),
        format: run.format,
        env: run.env.clone(),
        task_id: run.task_id.clone(),
        initial_state: run.initial_state.clone(),
        state: run.state.clone(),
        steps: run
            .steps
            .iter()
            .map(|s| envsim_bench::trajectories::RecordedStep {
                state_after: None,
                tool: s.tool.clone(),
                arguments: s.arguments.clone(),
                observation: s.observation.clone(),
                seed: s.seed,
                clock: s.clock,
            })
            .collect(),
    }
}

/// A recorded observation as a value: text read in any answer form (JSON, a Python literal,
/// a value embedded in text), else kept as text.
pub(crate) fn step_observation(observation: Option<&Value>) -> Value {
    Answer::of_value(observation).value
}

/// What is known of an environment the trajectories name.
struct Known {
    effects: Effects,
    /// Its outcome rule, when the corpus holds it.
    rule: Option<OutcomeRule>,
    /// The package, when the corpus holds it.
    package: Option<envsim_exec::package::EnvPackage>,
}

impl Known {
    /// A call of a trajectory without states, its outcome read from its answer, with the
    /// form the answer was written in.
    fn call_step(
        &self,
        tool: String,
        arguments: serde_json::Map<String, Value>,
        answer: Answer,
    ) -> (CallStep, AnswerForm) {
        let step = CallStep {
            tool,
            arguments,
            success: self.classify_answer(&answer),
            observation: answer.value,
        };
        (step, answer.form)
    }

    /// Success or failure of an observation: the environment's outcome rule, else the guess
    /// for APIs nobody described.
    fn classify(&self, observation: &Value) -> Option<bool> {
        match &self.rule {
            Some(rule) => rule.classify(observation),
            None => guess_outcome(observation),
        }
    }

    /// [`Known::classify`] of an answer, on its value and on the whole text of an embedded
    /// one (a rule written for the text, such as an error prefix, reads it there).
    fn classify_answer(&self, answer: &Answer) -> Option<bool> {
        answer.outcome(|value| self.classify(value))
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
                        let steps: Vec<&envsim_bench::collect::TransitionRecord> =
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
        if largest >= envsim_bench::collect::LARGE_STATE_BYTES && workflows.is_none() {
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
                let walked = trajectories_from_walks(&crate::context::walk_transitions(
                    vec![package],
                    &walk(a.walks),
                    a.seed,
                )?);
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

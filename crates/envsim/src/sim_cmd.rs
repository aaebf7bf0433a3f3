//! `envsim sim`: a simulated environment session driven from the command line. Calls come from
//! a JSON Lines file, or from standard input one line at a time (an interactive session); each
//! step's record is printed, and the session is written as trajectory JSONL that `envsim audit`
//! reads. `envsim sim measure` runs the corpus's walks through sessions with anchoring off,
//! validation only and full anchoring, and compares every step with the executor.

mod measure;

use crate::simulators::{build_backend, AnchorArg, AnchorArgs, BackendArgs};
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use envsim_sim::backend::{ExecutorSimulator, Simulator};
use envsim_sim::environment::Environment;
use envsim_sim::session::{Backends, Session, SessionConfig};
use serde_json::{json, Map, Value};
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;

/// `envsim sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(subcommand)]
    command: Option<SimCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum SimCommand {
    /// Measure anchoring on corpus walks: the same call sequences simulated with anchoring
    /// off, validation only and full anchoring (and with cross-model verification), every step
    /// compared with the executor on the same state; the share of right steps and trajectories,
    /// what was marked uncertain, and the cost in simulator calls, tokens and time.
    Measure(measure::MeasureArgs),
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Folder of environment packages (default: the bundled corpus, or $ENVSIM_ENVS).
    #[arg(long, value_name = "DIR")]
    envs: Option<PathBuf>,
    /// The environment package to simulate (code mode, or with --no-code its generated
    /// description).
    #[arg(long, value_name = "NAME")]
    env: Option<String>,
    /// Simulate from an API description instead of a package (OpenAPI 3.x or OpenAI tool
    /// schemas, JSON or YAML): environment-free mode.
    #[arg(long, value_name = "FILE", conflicts_with = "env")]
    spec: Option<PathBuf>,
    /// Notes in plain language for an environment-free simulation (a file).
    #[arg(long, value_name = "FILE", requires = "spec")]
    notes: Option<PathBuf>,
    /// Withhold the package's code: the simulator gets the description generated from it.
    #[arg(long, requires = "env")]
    no_code: bool,
    /// The initial state: a state file name of the package (default: its first), or a JSON
    /// file.
    #[arg(long, value_name = "NAME|FILE")]
    state: Option<String>,
    /// Calls as JSON Lines ({"name", "arguments"}); `-` (the default) reads standard input
    /// line by line, where `:state`, `:snapshot NAME`, `:rollback NAME` and `:quit` also work.
    #[arg(long, value_name = "FILE", default_value = "-")]
    calls: String,
    /// Where the session's trajectory goes (JSON Lines, one record).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// How much each step is checked and repaired.
    #[arg(long, value_enum, default_value_t = AnchorArg::Full)]
    anchor: AnchorArg,
    #[command(flatten)]
    anchoring: AnchorArgs,
    #[command(flatten)]
    backends: BackendArgs,
    /// Seed of the executor's calls and the verification draws.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

pub fn run(args: SimArgs) -> Result<()> {
    match args.command {
        Some(SimCommand::Measure(a)) => measure::run(a),
        None => run_session(args.run),
    }
}

/// One call of a calls file: `{"name", "arguments"}` (or `tool` for `name`; `arguments` may be
/// a JSON string, as OpenAI tool calls carry it).
fn parse_call(line: &str, at: &str) -> Result<(String, Map<String, Value>)> {
    let value: Value =
        serde_json::from_str(line).with_context(|| format!("{at}: not a JSON object"))?;
    let name = value
        .get("name")
        .or_else(|| value.get("tool"))
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("{at}: field `name` (the tool) is missing or not a string"))?;
    let arguments = envsim_core::transcript::call_arguments(value.get("arguments"))
        .map_err(|e| anyhow!("{at}: field `arguments`: {e}"))?;
    Ok((name.to_owned(), arguments))
}

fn run_session(a: RunArgs) -> Result<()> {
    let corpus = crate::context::Corpus::choose(a.envs.clone());
    let (env, package) = match (&a.env, &a.spec) {
        (Some(name), None) => {
            let package = corpus.load(name)?;
            eprintln!("{name}: learning its tools' effects and description from walks");
            let env = crate::context::learn_environment(&package)?;
            let env = if a.no_code { env.without_code() } else { env };
            (env, Some(package))
        }
        (None, Some(path)) => {
            let doc = crate::spec_files::read_document(path)?;
            let notes = match &a.notes {
                Some(p) => std::fs::read_to_string(p)
                    .with_context(|| format!("cannot read {}", p.display()))?,
                None => String::new(),
            };
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("spec")
                .to_owned();
            let env = Environment::from_description(&name, doc, notes, envsim_exec::DEFAULT_CLOCK)
                .map_err(|e| anyhow!("{}: at {}: {}", path.display(), e.pointer, e.message))?;
            (env, None)
        }
        _ => bail!("give --env NAME (a package) or --spec FILE (an API description)"),
    };
    let initial = match (&a.state, &package) {
        (Some(s), Some(p)) if p.states.iter().any(|(n, _)| n == s) => p
            .states
            .iter()
            .find(|(n, _)| n == s)
            .map(|(_, v)| v.clone())
            .unwrap_or_default(),
        (Some(file), _) => {
            let text = std::fs::read_to_string(file).with_context(|| {
                format!("--state {file}: not a state of the package, and not a readable file")
            })?;
            serde_json::from_str(&text).with_context(|| format!("{file}: not valid JSON"))?
        }
        (None, Some(p)) => p
            .states
            .first()
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| json!({})),
        (None, None) => json!({}),
    };
    let runtime = crate::context::exec_runtime()?;
    runtime.block_on(async move {
        let executor = match env.code {
            Some(_) => Some(ExecutorSimulator::new(Arc::new(
                envsim_exec::Executor::new(1, crate::context::exec_limits()?).await?,
            ))),
            None => None,
        };
        let primary = build_backend(a.backends.backend, &a.backends, &executor, "primary")?;
        let secondary = match a.backends.secondary {
            Some(kind) => Some(build_backend(kind, &a.backends, &executor, "secondary")?),
            None => None,
        };
        let backends = Backends {
            primary,
            secondary,
            executor: executor.map(|e| Arc::new(e) as Arc<dyn Simulator>),
        };
        let config = SessionConfig {
            mode: a.anchor.mode(),
            max_regenerations: a.anchoring.max_regenerations,
            verify: a.anchoring.policy()?,
            seed: a.seed,
        };
        let mut session = Session::new(Arc::new(env), backends, config, initial);
        let reader: Box<dyn BufRead> = if a.calls == "-" {
            Box::new(std::io::BufReader::new(std::io::stdin()))
        } else {
            Box::new(std::io::BufReader::new(
                std::fs::File::open(&a.calls).with_context(|| format!("cannot read {}", a.calls))?,
            ))
        };
        let source = if a.calls == "-" { "stdin".to_owned() } else { a.calls.clone() };
        for (n, line) in reader.lines().enumerate() {
            let line = line.with_context(|| format!("{source}: cannot read line {}", n + 1))?;
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let at = format!("{source}:{}", n + 1);
            if let Some(command) = line.strip_prefix(':') {
                let mut words = command.split_whitespace();
                match (words.next(), words.next()) {
                    (Some("quit"), _) => break,
                    (Some("state"), _) => println!("{}", session.state()),
                    (Some("snapshot"), Some(name)) => {
                        let at = session.snapshot(name);
                        println!("{}", json!({"snapshot": name, "steps": at}));
                    }
                    (Some("rollback"), Some(name)) => {
                        let at = session.rollback(name).map_err(|e| anyhow!("{at}: {e}"))?;
                        println!("{}", json!({"rollback": name, "steps": at}));
                    }
                    _ => bail!("{at}: unknown command {line:?} (:state, :snapshot NAME, :rollback NAME, :quit)"),
                }
                continue;
            }
            let (tool, arguments) = parse_call(line, &at)?;
            let record = session
                .step(&tool, &arguments)
                .await
                .map_err(|e| anyhow!("{at}: {tool}: {e}"))?;
            println!(
                "{}",
                json!({"step": session.steps().len(), "tool": record.tool,
                       "observation": record.observation, "success": record.success,
                       "provenance": record.provenance})
            );
        }
        if let Some(out) = &a.out {
            let record = session.trajectory("session");
            crate::output::write_atomic(out, format!("{record}\n"))?;
            eprintln!("{} steps written to {}", session.steps().len(), out.display());
        }
        Ok(())
    })
}

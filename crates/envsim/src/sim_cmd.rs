//! `envsim sim`: a simulated environment session driven from the command line. Calls come from
//! a JSON Lines file, or from standard input one line at a time (an interactive session); each
//! step's record is printed, and the session is written as trajectory JSONL that `envsim audit`
//! reads. `envsim sim measure` runs the corpus's walks through sessions with anchoring off,
//! validation only and full anchoring, and compares every step with the executor.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use envsim_core::prompt::Template;
use envsim_sim::backend::{ExecutorSimulator, OpenAiSimulator, Simulator};
use envsim_sim::environment::Environment;
use envsim_sim::faulty::{FaultProfile, FaultySimulator};
use envsim_sim::session::{AnchorMode, Backends, Session, SessionConfig};
use envsim_sim::verify::VerifyPolicy;
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
    Measure(crate::sim_measure::MeasureArgs),
}

/// Which simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// Run the environment's code (the ground truth; needs the code).
    Executor,
    /// The embedded local model.
    Local,
    /// An OpenAI-compatible endpoint (--base-url, --model).
    Openai,
    /// A test double with known error rates: the executor's answers, spoiled at --fault-rate
    /// (for measuring anchoring; needs the code).
    Faulty,
}

/// How much a session checks and repairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AnchorArg {
    /// Take the simulator's answers as they are.
    Off,
    /// Check every answer; mark failures uncertain.
    Validate,
    /// Check, regenerate with the problems stated, escalate.
    Full,
}

impl AnchorArg {
    pub fn mode(self) -> AnchorMode {
        match self {
            AnchorArg::Off => AnchorMode::Off,
            AnchorArg::Validate => AnchorMode::Validate,
            AnchorArg::Full => AnchorMode::Full,
        }
    }
}

/// The faulty test double's error profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FaultProfileArg {
    Uniform,
    Envsimbench,
}

impl BackendArgs {
    /// The faulty double's profile these arguments ask for.
    pub fn fault_profile(&self) -> FaultProfile {
        match self.fault_profile {
            FaultProfileArg::Uniform => FaultProfile::Uniform(self.fault_rate),
            FaultProfileArg::Envsimbench => FaultProfile::EnvSimBench,
        }
    }
}

/// How sessions get their simulators (shared by `sim`, `sim measure` and `serve`).
#[derive(Clone, Debug, Args)]
pub struct BackendArgs {
    /// The primary simulator.
    #[arg(long, value_enum, default_value_t = BackendKind::Local)]
    pub backend: BackendKind,
    /// A second simulator: verifies answers (--verify) and takes escalations when there is no
    /// code to run.
    #[arg(long, value_enum)]
    pub secondary: Option<BackendKind>,
    /// The share of steps the faulty test double spoils (its uniform profile).
    #[arg(long, default_value_t = 0.3)]
    pub fault_rate: f64,
    /// How the faulty test double errs: `uniform` spoils --fault-rate of the steps evenly;
    /// `envsimbench` errs like the frontier models of the published EnvSimBench table (0.5%
    /// of unchanged steps, then by the number of changed fields: 25% at 1, 45% at 2, 70% at 3,
    /// 88% at 4, 98% from 5), with missed fields, wrong values, stale observations, spurious
    /// writes and invented ids.
    #[arg(long, value_enum, default_value_t = FaultProfileArg::Uniform)]
    pub fault_profile: FaultProfileArg,
    /// Base URL of the OpenAI-compatible endpoint (up to and including /v1).
    #[arg(long, env = "OPENAI_BASE_URL")]
    pub base_url: Option<String>,
    /// Model name for --backend openai.
    #[arg(long)]
    pub model: Option<String>,
    /// Bearer token for the endpoint.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Completion token limit of model answers.
    #[arg(long, default_value_t = 768)]
    pub max_tokens: u64,
    /// Let the model write free text: no `response_format` (JSON-Schema-constrained answers)
    /// sent to an OpenAI-compatible endpoint (for servers that refuse it), no schema-constrained
    /// decoding by the local model.
    #[arg(long, alias = "unconstrained")]
    pub no_response_format: bool,
    #[command(flatten)]
    pub local: crate::eval_cmd::LocalArgs,
}

/// Anchoring settings (shared by `sim` and `sim measure`).
#[derive(Debug, Args)]
pub struct AnchorArgs {
    /// Regenerations after a rejected answer, with full anchoring.
    #[arg(long, default_value_t = 2)]
    pub max_regenerations: usize,
    /// Verify accepted answers with the secondary simulator at an adaptive rate per tool.
    #[arg(long, requires = "secondary")]
    pub verify: bool,
    /// The least verification probability.
    #[arg(long, default_value_t = 0.1)]
    pub verify_floor: f64,
    /// The greatest verification probability (and the probability while a tool warms up).
    #[arg(long, default_value_t = 1.0)]
    pub verify_ceiling: f64,
}

impl AnchorArgs {
    pub fn policy(&self) -> Result<Option<VerifyPolicy>> {
        if !(0.0..=1.0).contains(&self.verify_floor)
            || !(0.0..=1.0).contains(&self.verify_ceiling)
            || self.verify_floor > self.verify_ceiling
        {
            bail!("--verify-floor and --verify-ceiling must be probabilities, floor ≤ ceiling");
        }
        Ok(self.verify.then_some(VerifyPolicy {
            floor: self.verify_floor,
            ceiling: self.verify_ceiling,
            warmup: 3,
        }))
    }
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
        Some(SimCommand::Measure(a)) => crate::sim_measure::run(a),
        None => run_session(args.run),
    }
}

/// The walks a package's effects and description are learned from.
pub fn learn_environment(package: &envsim_exec::package::EnvPackage) -> Result<Environment> {
    let walk = crate::audit_cmd::walk_args(6, 16, 2);
    let (runs, effects) = crate::audit_cmd::learn_runs(package, &walk, 1)?;
    Environment::from_package(package, &runs, effects).map_err(|e| {
        anyhow!(
            "{}: the generated description does not read back, at {}: {}",
            package.manifest.name,
            e.pointer,
            e.message
        )
    })
}

/// A primary simulator and, when asked for, a secondary one.
pub type SimulatorPair = (Arc<dyn Simulator>, Option<Arc<dyn Simulator>>);

/// The primary simulator and the secondary one (when asked for), both allowed to run the code
/// through `executor` (the faulty double does) whatever the session itself is told.
pub fn build_pair(args: &BackendArgs, executor: &ExecutorSimulator) -> Result<SimulatorPair> {
    let executor = Some(executor.clone());
    let primary = build_backend(args.backend, args, &executor, "primary")?;
    let secondary = match args.secondary {
        Some(kind) => Some(build_backend(kind, args, &executor, "secondary")?),
        None => None,
    };
    Ok((primary, secondary))
}

/// Builds one simulator.
pub fn build_backend(
    kind: BackendKind,
    args: &BackendArgs,
    executor: &Option<ExecutorSimulator>,
    label: &str,
) -> Result<Arc<dyn Simulator>> {
    let needs_code = || {
        executor.clone().ok_or_else(|| {
            anyhow!("--backend {kind:?} runs the environment's code, and this session has only a description")
        })
    };
    Ok(match kind {
        BackendKind::Executor => Arc::new(needs_code()?),
        BackendKind::Faulty => {
            if !(0.0..=1.0).contains(&args.fault_rate) {
                bail!("--fault-rate must be between 0 and 1");
            }
            Arc::new(FaultySimulator::with_profile(
                needs_code()?,
                args.fault_profile(),
                if label == "primary" { 1 } else { 2 },
                label,
            ))
        }
        BackendKind::Openai => {
            let model = args
                .model
                .clone()
                .ok_or_else(|| anyhow!("--backend openai needs --model"))?;
            let base_url = match (&args.base_url, &args.api_key) {
                (Some(url), _) => url.clone(),
                (None, Some(_)) => "https://api.openai.com/v1".to_owned(),
                (None, None) => bail!("--backend openai needs --base-url URL (or OPENAI_BASE_URL)"),
            };
            let client =
                envsim_eval::openai::OpenAiClient::new(&envsim_eval::openai::ClientSettings {
                    base_url,
                    api_key: args.api_key.clone(),
                    timeout: std::time::Duration::from_secs(120),
                    max_connections: 4,
                })
                .map_err(anyhow::Error::msg)?;
            Arc::new(
                OpenAiSimulator::new(
                    client,
                    model,
                    Template::EnvsimSliced,
                    envsim_eval::config::Decoding {
                        temperature: Some(0.0),
                        max_tokens: Some(args.max_tokens),
                        stop: Vec::new(),
                        extra_body: Map::new(),
                    },
                )
                .with_structured_output(!args.no_response_format),
            )
        }
        BackendKind::Local => local_backend(args)?,
    })
}

#[cfg(feature = "local")]
fn local_backend(args: &BackendArgs) -> Result<Arc<dyn Simulator>> {
    let (engine, generation, model) = shared_local_engine(args)?;
    Ok(Arc::new(
        envsim_sim::backend::LocalSimulator::new(engine, generation, model, Template::EnvsimSliced)
            .with_constrained_output(!args.no_response_format),
    ))
}

/// The embedded model's engine, started once per process (the simulator, a second simulator,
/// and `envsim synth`'s agent, user and task writer all share it: one model in memory, one
/// request at a time), with its generation settings and the model's name.
#[cfg(feature = "local")]
pub fn shared_local_engine(
    args: &BackendArgs,
) -> Result<(
    Arc<envsim_eval::local::LocalEngine>,
    envsim_eval::local::Generation,
    String,
)> {
    type Started = (
        Arc<envsim_eval::local::LocalEngine>,
        envsim_eval::local::Generation,
        String,
    );
    static ENGINE: std::sync::Mutex<Option<Started>> = std::sync::Mutex::new(None);
    let mut slot = ENGINE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(started) = slot.as_ref() {
        return Ok(started.clone());
    }
    let decoding = envsim_eval::config::Decoding {
        temperature: Some(0.0),
        max_tokens: Some(args.max_tokens),
        stop: Vec::new(),
        extra_body: Map::new(),
    };
    let (_, simulator, model) =
        crate::eval_cmd::local_backend(&args.local, &decoding, Template::EnvsimSliced)?;
    let envsim_eval::runner::Simulator::Local {
        engine, generation, ..
    } = simulator
    else {
        bail!("the local backend did not start");
    };
    let started = (engine, generation, model);
    *slot = Some(started.clone());
    Ok(started)
}

#[cfg(not(feature = "local"))]
fn local_backend(_: &BackendArgs) -> Result<Arc<dyn Simulator>> {
    bail!("this build has no local model (build with the `local` feature)")
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
    let corpus = crate::env_cmd::Corpus::choose(a.envs.clone());
    let (env, package) = match (&a.env, &a.spec) {
        (Some(name), None) => {
            let package = corpus.load(name)?;
            eprintln!("{name}: learning its tools' effects and description from walks");
            let env = learn_environment(&package)?;
            let env = if a.no_code { env.without_code() } else { env };
            (env, Some(package))
        }
        (None, Some(path)) => {
            let doc = crate::audit_spec::read_document(path)?;
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
    let runtime = crate::env_cmd::exec_runtime()?;
    runtime.block_on(async move {
        let executor = match env.code {
            Some(_) => Some(ExecutorSimulator::new(Arc::new(
                envsim_exec::Executor::new(1, crate::env_cmd::exec_limits()?).await?,
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

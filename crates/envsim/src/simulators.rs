//! What the commands that build simulators share, so that none imports another: the prompt
//! template and local-model options (`eval`, `audit simulate`), the backend and anchoring
//! options of sessions (`sim`, `sim measure`, `serve`, `synth`), and building the simulators
//! they name.

use anyhow::{anyhow, bail, Result};
use clap::{Args, ValueEnum};
use envsim_core::prompt::Template;
#[cfg(feature = "local")]
use envsim_eval::config::{BackendConfig, Decoding};
#[cfg(feature = "local")]
use envsim_eval::runner::Predictor;
use envsim_sim::backend::{ExecutorSimulator, OpenAiSimulator, Simulator};
use envsim_sim::faulty::{FaultProfile, FaultySimulator};
use envsim_sim::session::AnchorMode;
use envsim_sim::verify::VerifyPolicy;
use serde_json::Map;
use std::path::PathBuf;
use std::sync::Arc;

/// Prompt templates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TemplateArg {
    /// envsim's prompt: states the path syntax, change vocabulary and output schema.
    Envsim,
    /// The reference evaluator's exact prompt (for parity with published tables).
    Reference,
    /// envsim's prompt with only the called method's code and the state the call can read
    /// (for small local models; see docs/evaluation.md).
    EnvsimSliced,
}

impl TemplateArg {
    pub fn template(self) -> Template {
        match self {
            TemplateArg::Envsim => Template::Envsim,
            TemplateArg::Reference => Template::Reference,
            TemplateArg::EnvsimSliced => Template::EnvsimSliced,
        }
    }
}

/// Options of the local model backend.
#[derive(Clone, Debug, Args)]
pub struct LocalArgs {
    /// GGUF model file for --backend local (default: the documented default model, fetched
    /// into the cache on first use).
    #[arg(long, env = "ENVSIM_MODEL_PATH", value_name = "FILE.gguf")]
    model_path: Option<PathBuf>,
    /// CPU threads for the local model (default: the cores available to envsim).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Context length of the local model in tokens.
    #[arg(long, default_value_t = 8192, value_name = "TOKENS")]
    ctx: u32,
    /// Never download the default model; fail if it is not in the cache.
    #[arg(long)]
    no_fetch: bool,
}

/// Completion tokens the local model may write when --max-tokens is not given.
pub const LOCAL_DEFAULT_MAX_TOKENS: u64 = 768;

#[cfg(feature = "local")]
pub fn local_backend(
    args: &LocalArgs,
    decoding: &Decoding,
    template: Template,
) -> Result<(BackendConfig, Predictor, String)> {
    use envsim_model::local::{default_threads, Generation, LocalEngine, LocalSettings};
    use envsim_model::model;
    if args.ctx < 512 {
        bail!("--ctx must be at least 512 tokens");
    }
    let python =
        std::env::var_os("ENVSIM_PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from);
    let path = model::resolve(
        args.model_path.as_deref(),
        !args.no_fetch,
        &python,
        &mut |line| eprintln!("model: {line}"),
    )?;
    let model_id = match &args.model_path {
        None => model::DEFAULT_MODEL.sha256.to_owned(),
        Some(p) => model::sha256_cached(p)?,
    };
    let threads = args.threads.unwrap_or_else(default_threads);
    if threads == 0 {
        bail!("--threads must be at least 1");
    }
    let engine = LocalEngine::start(LocalSettings {
        model_path: path.clone(),
        n_ctx: args.ctx,
        threads,
    })
    .map_err(anyhow::Error::msg)?;
    eprintln!(
        "model: {} ({}) loaded in {:.1} s · engine {} · {} threads · {}-token context",
        engine.info.name,
        path.display(),
        engine.info.load_seconds,
        engine.info.engine.name(),
        engine.info.threads,
        engine.info.n_ctx
    );
    if let Some(warning) = &engine.info.warning {
        eprintln!("warning: {warning}");
    }
    let name = engine.info.name.clone();
    let generation = Generation {
        max_tokens: u32::try_from(decoding.max_tokens.unwrap_or(LOCAL_DEFAULT_MAX_TOKENS))
            .unwrap_or(u32::MAX),
        temperature: decoding.temperature.unwrap_or(0.0) as f32,
        seed: 0,
        stop: decoding.stop.clone(),
        stop_after_object: true,
        json_schema: None,
    };
    Ok((
        BackendConfig::Local {
            model: name.clone(),
            model_id: model_id.clone(),
            n_ctx: engine.info.n_ctx,
        },
        Predictor::Local {
            model: envsim_llm::LocalText::new(
                std::sync::Arc::new(engine),
                generation,
                name.clone(),
            ),
            model_key: model_id,
            template,
        },
        name,
    ))
}

/// OpenAI's own endpoint, asked when a key is given and no URL.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// The OpenAI-compatible endpoint to ask: the first URL given, else OpenAI's own when there is
/// a key; `missing` is the error when there is neither.
pub fn endpoint_url(
    urls: &[Option<&String>],
    api_key: Option<&String>,
    missing: &str,
) -> Result<String> {
    match (urls.iter().flatten().next(), api_key) {
        (Some(url), _) => Ok((*url).clone()),
        (None, Some(_)) => Ok(OPENAI_BASE_URL.to_owned()),
        (None, None) => bail!("{missing}"),
    }
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
    /// Seconds an OpenAI-compatible endpoint may take to answer one request before it counts
    /// as not answering (a hung endpoint fails the step instead of holding it).
    #[arg(long, value_name = "SECONDS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout: u64,
    /// Let the model write free text: no `response_format` (JSON-Schema-constrained answers)
    /// sent to an OpenAI-compatible endpoint (for servers that refuse it), no schema-constrained
    /// decoding by the local model.
    #[arg(long, alias = "unconstrained")]
    pub no_response_format: bool,
    #[command(flatten)]
    pub local: LocalArgs,
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
            let base_url = endpoint_url(
                &[args.base_url.as_ref()],
                args.api_key.as_ref(),
                "--backend openai needs --base-url URL (or OPENAI_BASE_URL)",
            )?;
            let client =
                envsim_llm::openai::OpenAiClient::new(&envsim_llm::openai::ClientSettings {
                    base_url,
                    api_key: args.api_key.clone(),
                    timeout: std::time::Duration::from_secs(args.request_timeout),
                    max_connections: 4,
                })
                .map_err(anyhow::Error::msg)?;
            Arc::new(
                OpenAiSimulator::new(
                    client,
                    model,
                    Template::EnvsimSliced,
                    envsim_llm::Decoding {
                        temperature: Some(0.0),
                        max_tokens: Some(args.max_tokens),
                        stop: Vec::new(),
                        extra_body: Map::new(),
                    },
                )
                .with_structured_output(!args.no_response_format),
            )
        }
        BackendKind::Local => local_simulator(args)?,
    })
}

#[cfg(feature = "local")]
fn local_simulator(args: &BackendArgs) -> Result<Arc<dyn Simulator>> {
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
    Arc<envsim_model::local::LocalEngine>,
    envsim_model::local::Generation,
    String,
)> {
    type Started = (
        Arc<envsim_model::local::LocalEngine>,
        envsim_model::local::Generation,
        String,
    );
    static ENGINE: std::sync::Mutex<Option<Started>> = std::sync::Mutex::new(None);
    let mut slot = ENGINE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(started) = slot.as_ref() {
        return Ok(started.clone());
    }
    let decoding = envsim_llm::Decoding {
        temperature: Some(0.0),
        max_tokens: Some(args.max_tokens),
        stop: Vec::new(),
        extra_body: Map::new(),
    };
    let (_, simulator, model) = local_backend(&args.local, &decoding, Template::EnvsimSliced)?;
    let envsim_eval::runner::Predictor::Local { model: text, .. } = simulator else {
        bail!("the local backend did not start");
    };
    let started = (Arc::clone(text.engine()), text.generation().clone(), model);
    *slot = Some(started.clone());
    Ok(started)
}

#[cfg(not(feature = "local"))]
fn local_simulator(_: &BackendArgs) -> Result<Arc<dyn Simulator>> {
    bail!("this build has no local model (build with the `local` feature)")
}

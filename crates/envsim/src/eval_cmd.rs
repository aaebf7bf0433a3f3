//! `envsim eval`, `envsim report`, `envsim runs`, `envsim compare` and `envsim batch`: the
//! evaluation harness's command line (the work happens in `envsim-eval`).

use crate::bundled;
use crate::output::write_atomic;
use crate::render::OutputFormat;
use crate::run_render::{render_compare, render_run, render_runs};
#[cfg(feature = "local")]
use crate::simulators::local_backend;
use crate::simulators::{LocalArgs, TemplateArg, LOCAL_DEFAULT_MAX_TOKENS};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use envsim_core::formats::{match_predictions, parse_predictions};
use envsim_core::prelude::*;
use envsim_core::prompt::Template;
use envsim_core::score::stratum_of;
use envsim_eval::batch;
use envsim_eval::chart::{cliff_svg, CliffMetric};
use envsim_eval::config::{sha256_hex, BackendConfig, Decoding, RunConfig, Subset};
use envsim_eval::report::{compare, Price, RunReport};
use envsim_eval::runner::{self, Predictor, RunRequest, RunnerOptions, SampleSource};
use envsim_eval::store::{SampleStatus, Store};
use envsim_llm::openai::{ClientSettings, OpenAiClient};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The process was stopped by Ctrl-C; finished samples are stored.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// The run finished but more samples than allowed ended in request errors (stored as failed;
/// rerunning the same command retries them). Exit status 3.
#[derive(Debug)]
pub struct SamplesFailed(pub String);

impl std::fmt::Display for SamplesFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SamplesFailed {}

/// How many failed samples a run may end with and still succeed (`--allow-errors`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ErrorAllowance {
    /// At most this many samples.
    Count(usize),
    /// At most this share of the run's samples, in percent.
    Percent(f64),
}

impl ErrorAllowance {
    fn allows(self, failed: usize, samples: usize) -> bool {
        match self {
            ErrorAllowance::Count(n) => failed <= n,
            ErrorAllowance::Percent(p) => failed as f64 * 100.0 <= p * samples as f64,
        }
    }
}

fn parse_allowance(text: &str) -> std::result::Result<ErrorAllowance, String> {
    let text = text.trim();
    if let Some(percent) = text.strip_suffix('%') {
        let p: f64 = percent
            .trim()
            .parse()
            .map_err(|_| format!("{text:?} is not a percentage (e.g. 2%)"))?;
        if !(0.0..=100.0).contains(&p) {
            return Err(format!("{text:?}: a percentage from 0% to 100%"));
        }
        return Ok(ErrorAllowance::Percent(p));
    }
    text.parse().map(ErrorAllowance::Count).map_err(|_| {
        format!("{text:?} is neither a number of samples (e.g. 5) nor a percentage (e.g. 2%)")
    })
}
/// Simulators `envsim eval` can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// An OpenAI-compatible /v1/chat/completions endpoint (vLLM, llama.cpp server, SGLang, hosted APIs).
    Openai,
    /// The benchmark's own labels: the ceiling line.
    Oracle,
    /// "No change" with an empty feedback: the floor line.
    Null,
    /// Predictions from a file (--predictions).
    Replay,
    /// The embedded local model (in-process on the CPU; default model fetched on first use).
    #[cfg(feature = "local")]
    Local,
}

#[derive(Debug, Args)]
pub struct StoreArg {
    /// The run store (SQLite).
    #[arg(
        long,
        env = "ENVSIM_STORE",
        default_value = ".envsim/runs.sqlite",
        value_name = "FILE"
    )]
    store: PathBuf,
}

#[derive(Debug, Args)]
pub struct BenchSelection {
    /// Benchmark file (reference JSON array or JSON Lines); default: the bundled benchmark.
    #[arg(long, value_name = "FILE")]
    bench: Option<PathBuf>,
    /// Evaluate only the first N samples of each stratum (benchmark order).
    #[arg(long, value_name = "N")]
    per_stratum: Option<usize>,
    /// Evaluate at most N samples, taken across the strata in turn (the first of every
    /// stratum, then the second, ...; after --per-stratum), kept in benchmark order.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Evaluate only samples whose prompt (with the run's template) has at most N characters
    /// (applied before --per-stratum; for small local models).
    #[arg(long, value_name = "N")]
    max_prompt_chars: Option<usize>,
}

#[derive(Debug, Args)]
pub struct DecodingArgs {
    /// Model name sent to the server.
    #[arg(long, env = "ENVSIM_MODEL")]
    model: Option<String>,
    /// Prompt template (part of the run's identity); default envsim, or envsim-sliced for the
    /// local backend.
    #[arg(long, value_enum)]
    template: Option<TemplateArg>,
    /// Sampling temperature.
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    /// Completion token limit (default: the server's).
    #[arg(long, value_name = "N")]
    max_tokens: Option<u64>,
    /// Stop sequence (repeatable).
    #[arg(long, value_name = "TEXT")]
    stop: Vec<String>,
    /// Extra JSON object merged into every request body, e.g. '{"repetition_penalty": 1.15}'.
    #[arg(long, value_name = "JSON")]
    extra_body: Option<String>,
}

impl DecodingArgs {
    fn decoding(&self) -> Result<Decoding> {
        let extra_body = match &self.extra_body {
            None => serde_json::Map::new(),
            Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
                Ok(serde_json::Value::Object(map)) => map,
                Ok(_) => bail!("--extra-body must be a JSON object, got {text}"),
                Err(e) => bail!("--extra-body is not JSON: {e}"),
            },
        };
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            bail!(
                "--temperature must be a number ≥ 0, got {}",
                self.temperature
            );
        }
        Ok(Decoding {
            temperature: Some(self.temperature),
            max_tokens: self.max_tokens,
            stop: self.stop.clone(),
            extra_body,
        })
    }
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    #[command(flatten)]
    selection: BenchSelection,
    /// The simulator.
    #[arg(long, value_enum, default_value_t = BackendArg::Oracle)]
    backend: BackendArg,
    /// Server base URL up to /v1 (openai backend); default https://api.openai.com/v1.
    #[arg(long, env = "OPENAI_BASE_URL", value_name = "URL")]
    base_url: Option<String>,
    /// API key (openai backend).
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    #[command(flatten)]
    decoding: DecodingArgs,
    /// Prediction file for --backend replay (envsim JSONL or a reference result file).
    #[arg(long, value_name = "FILE")]
    predictions: Option<PathBuf>,
    #[command(flatten)]
    local: LocalArgs,
    /// Requests in flight at most.
    #[arg(long, default_value_t = 64, value_name = "N")]
    concurrency: usize,
    /// Requests per minute at most.
    #[arg(long, value_name = "N")]
    rpm: Option<u32>,
    /// Estimated tokens per minute at most (prompt characters / 4 + max tokens).
    #[arg(long, value_name = "N")]
    tpm: Option<u32>,
    /// Request timeout in seconds.
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    timeout: f64,
    /// Retries after a failed attempt (429, 5xx, timeouts, connection errors, garbled bodies).
    #[arg(long, default_value_t = 4, value_name = "N")]
    retries: u32,
    /// Do not answer from (or fill) the response cache.
    #[arg(long)]
    no_cache: bool,
    /// Delete this run's stored results and start over.
    #[arg(long)]
    fresh: bool,
    #[command(flatten)]
    store: StoreArg,
    /// USD per million prompt tokens (for cost columns).
    #[arg(long, value_name = "USD")]
    price_input: Option<f64>,
    /// USD per million completion tokens.
    #[arg(long, value_name = "USD")]
    price_output: Option<f64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
    #[command(flatten)]
    chart: ChartArgs,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    /// Succeed even if up to N samples (or P% of them, e.g. 2%) end in request errors after
    /// their retries. Without it any failed sample makes the command exit with status 3; failed
    /// samples are stored as failed and retried by the next run of the same command.
    #[arg(long, value_name = "N|P%", value_parser = parse_allowance)]
    allow_errors: Option<ErrorAllowance>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run id (or unique prefix of it), or `latest`.
    #[arg(default_value = "latest")]
    run: String,
    #[command(flatten)]
    store: StoreArg,
    /// Price table: JSON object {"<model>": {"input_per_mtok": x, "output_per_mtok": y}}.
    #[arg(long, value_name = "FILE")]
    prices: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
    #[command(flatten)]
    chart: ChartArgs,
    /// Write the run's predictions and scores as JSON Lines (envsim prediction format, so the
    /// file can be re-scored with `envsim score` or replayed with `--backend replay`).
    #[arg(long, value_name = "FILE.jsonl")]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunsArgs {
    #[command(flatten)]
    store: StoreArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Two or more run ids; each later run is compared with the first.
    #[arg(required = true, num_args = 2..)]
    runs: Vec<String>,
    #[command(flatten)]
    store: StoreArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
    /// Disagreeing samples to list in table/Markdown output (JSON lists all).
    #[arg(long, default_value_t = 20, value_name = "N")]
    show: usize,
    #[command(flatten)]
    chart: ChartArgs,
}

/// The cliff chart: where to write it and which lane it plots.
#[derive(Debug, Args)]
pub struct ChartArgs {
    /// Write the cliff chart (config match vs |Δ|, one curve per run, null baseline dashed) as
    /// SVG.
    #[arg(long = "chart", value_name = "FILE.svg")]
    path: Option<PathBuf>,
    /// The config-match metric the chart plots: envsim's strict lane, or the reference
    /// evaluator's own CM-ref (as in published EnvSimBench figures).
    #[arg(long, value_enum, default_value_t = ChartMetric::CmStrict)]
    chart_metric: ChartMetric,
}

/// `--chart-metric` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ChartMetric {
    /// CM-strict.
    CmStrict,
    /// CM-ref.
    CmRef,
}

impl ChartArgs {
    fn metric(&self) -> CliffMetric {
        match self.chart_metric {
            ChartMetric::CmStrict => CliffMetric::CmStrict,
            ChartMetric::CmRef => CliffMetric::CmRef,
        }
    }
}

#[derive(Debug, Args)]
pub struct BatchArgs {
    #[command(subcommand)]
    command: BatchCommand,
}

#[derive(Debug, Subcommand)]
enum BatchCommand {
    /// Write the evaluation requests as an OpenAI Batch input file (JSONL).
    Export(BatchExportArgs),
    /// Score a Batch output file (and error file) and store it as a run.
    Import(BatchImportArgs),
}

#[derive(Debug, Args)]
pub struct BatchExportArgs {
    #[command(flatten)]
    selection: BenchSelection,
    #[command(flatten)]
    decoding: DecodingArgs,
    /// Output file.
    #[arg(long, value_name = "FILE.jsonl")]
    out: PathBuf,
}

#[derive(Debug, Args)]
pub struct BatchImportArgs {
    #[command(flatten)]
    selection: BenchSelection,
    /// The request file given to the Batch API (written by `envsim batch export`).
    #[arg(long, value_name = "FILE.jsonl")]
    requests: PathBuf,
    /// Batch output and error files (repeatable).
    #[arg(long = "output", value_name = "FILE.jsonl", required = true)]
    outputs: Vec<PathBuf>,
    #[command(flatten)]
    store: StoreArg,
    /// Replace a previous import of the same files.
    #[arg(long)]
    fresh: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// A loaded benchmark, after subset selection.
struct LoadedBench {
    display: String,
    sha256: String,
    subset: Option<Subset>,
    samples: BenchSamples,
}

/// The samples of a [`LoadedBench`].
enum BenchSamples {
    /// Read, in order.
    Parsed(Vec<Transition>),
    /// The file itself, to be read while the run starts (see [`SampleSource::Stream`]).
    Unread(Vec<u8>),
}

impl LoadedBench {
    /// The samples for the runner: prepared now, or read and prepared while the run starts.
    fn source(self) -> Result<SampleSource> {
        match self.samples {
            BenchSamples::Parsed(transitions) => {
                Ok(envsim_eval::prepare::prepare_samples(transitions).into())
            }
            BenchSamples::Unread(bytes) => Ok(SampleSource::Stream(
                envsim_eval::prepare::stream_samples(bytes, self.display)
                    .context("cannot start reading the benchmark")?,
            )),
        }
    }

    /// The transitions, for commands that need them all up front (they load the benchmark
    /// with `stream` off, so it has been read).
    fn transitions(&self) -> Result<&[Transition]> {
        match &self.samples {
            BenchSamples::Parsed(transitions) => Ok(transitions),
            BenchSamples::Unread(_) => bail!(
                "internal error: {} is needed whole but was left to be read while the run starts",
                self.display
            ),
        }
    }
}

/// Loads the selected benchmark. With `stream` and no subset to select, the file is left unread
/// ([`BenchSamples::Unread`]): the run reads it while it sends the first requests.
fn load_bench(selection: &BenchSelection, template: Template, stream: bool) -> Result<LoadedBench> {
    // The bundled benchmark's SHA-256 was checked while unpacking it: no second hash.
    let (bytes, display, sha256) = match &selection.bench {
        Some(path) => {
            let bytes = read(path)?;
            let sha256 = sha256_hex(&bytes);
            (bytes, path.display().to_string(), sha256)
        }
        None => (
            bundled::benchmark()?,
            bundled::NAME.to_owned(),
            bundled::fingerprint()?,
        ),
    };
    let subset = Subset::new(
        selection.per_stratum,
        selection.limit,
        selection.max_prompt_chars,
    );
    if stream && subset.is_none() {
        return Ok(LoadedBench {
            display,
            sha256,
            subset,
            samples: BenchSamples::Unread(bytes),
        });
    }
    let mut transitions = envsim_eval::prepare::parse_benchmark(&bytes, &display)?;
    if let Some(subset) = &subset {
        if subset.per_stratum == Some(0)
            || subset.limit == Some(0)
            || subset.max_prompt_chars == Some(0)
        {
            bail!("--per-stratum, --limit and --max-prompt-chars must be at least 1");
        }
        let strata: Vec<Stratum> = transitions.iter().map(stratum_of).collect();
        let keys: Vec<&str> = strata.iter().map(|s| s.key()).collect();
        let chars: Vec<usize> = if subset.max_prompt_chars.is_some() {
            transitions
                .iter()
                .map(|t| {
                    let p = template.render_eval(&t.env_code, &t.config_before, &t.action);
                    p.system.chars().count() + p.user.chars().count()
                })
                .collect()
        } else {
            Vec::new()
        };
        let keep = subset.select(&keys, &chars);
        let mut all: Vec<Option<Transition>> = transitions.into_iter().map(Some).collect();
        transitions = keep.into_iter().filter_map(|i| all[i].take()).collect();
    }
    if transitions.is_empty() {
        bail!("{display}: no samples to evaluate");
    }
    Ok(LoadedBench {
        display,
        sha256,
        subset,
        samples: BenchSamples::Parsed(transitions),
    })
}

fn print(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

impl DecodingArgs {
    fn template_for(&self, backend: BackendArg) -> TemplateArg {
        self.template.unwrap_or(match backend {
            #[cfg(feature = "local")]
            BackendArg::Local => TemplateArg::EnvsimSliced,
            _ => TemplateArg::Envsim,
        })
    }
}

pub fn eval(args: EvalArgs) -> Result<()> {
    let template = args.decoding.template_for(args.backend);
    // Backends that need every sample before the first request (replayed predictions are
    // matched to them; the local model orders them) get the file read up front.
    let stream = matches!(
        args.backend,
        BackendArg::Openai | BackendArg::Null | BackendArg::Oracle
    );
    let mut bench = load_bench(&args.selection, template.template(), stream)?;
    let decoding = args.decoding.decoding()?;
    if args.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    let (backend, simulator, system) = match args.backend {
        BackendArg::Oracle => (
            BackendConfig::Oracle,
            Predictor::Baseline(Baseline::Oracle),
            "oracle".to_owned(),
        ),
        BackendArg::Null => (
            BackendConfig::Null,
            Predictor::Baseline(Baseline::Null),
            "null".to_owned(),
        ),
        BackendArg::Replay => {
            let path = args
                .predictions
                .as_ref()
                .context("--backend replay needs --predictions FILE")?;
            let bytes = read(path)?;
            let name = path.display().to_string();
            let records = parse_predictions(&bytes, &name)?;
            let matched = match_predictions(bench.transitions()?, records, true, &name)?;
            let missing = matched
                .iter()
                .filter(|(p, _)| *p == Prediction::Missing)
                .count();
            if missing > 0 {
                eprintln!("warning: {name} has no prediction for {missing} of {} samples; they count as wrong", matched.len());
            }
            (
                BackendConfig::Replay {
                    file_sha256: sha256_hex(&bytes),
                },
                Predictor::Replay(matched),
                name,
            )
        }
        #[cfg(feature = "local")]
        BackendArg::Local => local_backend(&args.local, &decoding, template.template())?,
        BackendArg::Openai => {
            let model = args
                .decoding
                .model
                .clone()
                .context("--backend openai needs --model (the name the server serves, e.g. Qwen/Qwen2.5-7B-Instruct)")?;
            let base_url = match &args.base_url {
                Some(url) => url.clone(),
                None if args.api_key.is_some() => crate::simulators::OPENAI_BASE_URL.to_owned(),
                None => bail!("--backend openai needs --base-url URL (or OPENAI_BASE_URL), e.g. http://localhost:8000/v1 for vLLM; for api.openai.com set OPENAI_API_KEY"),
            };
            if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                bail!("--base-url must start with http:// or https://, got {base_url:?}");
            }
            let client = OpenAiClient::new(&ClientSettings {
                base_url: base_url.clone(),
                api_key: args.api_key.clone(),
                timeout: Duration::from_secs_f64(args.timeout),
                max_connections: args.concurrency,
            })
            .map_err(anyhow::Error::msg)?;
            (
                BackendConfig::Openai {
                    base_url,
                    model: model.clone(),
                },
                Predictor::OpenAi {
                    model: envsim_llm::OpenAiText::new(
                        client,
                        model.clone(),
                        decoding.clone(),
                        false,
                    ),
                    template: template.template(),
                },
                model,
            )
        }
    };
    // The local backend's default token limit is part of its identity like an explicit one.
    let decoding = match &backend {
        BackendConfig::Local { .. } => Decoding {
            max_tokens: decoding.max_tokens.or(Some(LOCAL_DEFAULT_MAX_TOKENS)),
            ..decoding
        },
        _ => decoding,
    };
    let mut config = RunConfig::new(
        bench.sha256.clone(),
        backend,
        template.template().name(),
        decoding,
    );
    config.subset = bench.subset.take();
    let price = crate::context::price_of(args.price_input, args.price_output)?;
    let bench_path = bench.display.clone();
    let request = RunRequest {
        store: args.store.store.clone(),
        system,
        config,
        bench_path,
        samples: bench.source()?,
        simulator,
        options: RunnerOptions {
            concurrency: args.concurrency,
            requests_per_minute: args.rpm,
            tokens_per_minute: args.tpm,
            max_retries: args.retries,
            use_cache: !args.no_cache,
            ..RunnerOptions::default()
        },
        fresh: args.fresh,
        prices: price.map(|p| serde_json::to_value(p).unwrap_or_default()),
        stop: None,
        events: None,
    };
    let report = execute(
        request,
        &args.store.store,
        !args.no_progress,
        &base_url_of(&args),
    )?;
    finish_report(&report, args.format, Some(&args.chart))?;
    check_failures(&report, args.allow_errors, &args.store.store)
}

fn base_url_of(args: &EvalArgs) -> String {
    args.base_url.clone().unwrap_or_default()
}

/// Runs a request with Ctrl-C handling and progress on stderr, and loads the stored result.
/// Errors say what happened and what to do: an endpoint that failed every request, a store
/// that stopped accepting writes, an interruption (exit 130).
fn execute(
    mut request: RunRequest,
    store_path: &Path,
    show_progress: bool,
    base_url: &str,
) -> Result<RunReport> {
    let progress = std::sync::Arc::new(std::sync::Mutex::new(crate::progress::Progress::new(
        show_progress,
    )));
    let sink = std::sync::Arc::clone(&progress);
    request.events = Some(Box::new(move |event| {
        sink.lock().unwrap_or_else(|p| p.into_inner()).show(event);
    }));
    request.stop = Some(Box::pin(async {
        if tokio::signal::ctrl_c().await.is_err() {
            // No signal handling available: never stop on our own.
            std::future::pending::<()>().await;
        }
    }));
    let runtime = runtime()?;
    let result = runtime.block_on(runner::run(request));
    // Every task of the run has ended; idle connections and threads need no orderly goodbye.
    runtime.shutdown_background();
    progress.lock().unwrap_or_else(|p| p.into_inner()).finish();
    let outcome = result.map_err(|e| match e {
        runner::RunError::Store(store) => anyhow::anyhow!(
            "{store}\nthe run stopped sending requests; every sample committed before the failure is kept: fix the store (disk space, permissions) and rerun the same command to resume"
        ),
        runner::RunError::Benchmark { message, started } => anyhow::anyhow!(
            "{message}\nthe file is read while the first requests run: this error was found after {started} samples had been sent; the run was stopped and not stored (fix the file and rerun)"
        ),
        other => other.into(),
    })?;
    let store = Store::open_existing(store_path)?;
    if outcome.resumed && outcome.already_done > 0 && show_progress {
        eprintln!(
            "resumed run {}: {} samples were already stored, {} run now",
            outcome.record.run_id, outcome.already_done, outcome.processed
        );
    }
    let report = RunReport::load(&store, outcome.record, None)?;
    match &outcome.stopped {
        Some(runner::Stopped::Interrupted) => {
            eprintln!(
                "interrupted: {} of {} samples are stored in run {} ({}); rerun the same command to resume",
                report.finished,
                report.report.samples.len(),
                report.record.run_id,
                store_path.display()
            );
            Err(Interrupted.into())
        }
        Some(runner::Stopped::EndpointFailing {
            cause,
            first_error,
            attempts,
        }) => bail!(
            "stopped: the first {attempts} requests all failed, none succeeded: {first_error}\n{}\nnothing else was sent; run {} is stored (no sample finished in this attempt) and rerunning the same command resumes it",
            hint_for(cause, first_error, base_url),
            report.record.run_id
        ),
        None => Ok(report),
    }
}

/// What to check for a cause of failure, given the first error's text: a hint the server's
/// own words support, not a guess (a 400 for a bad key is no context-length problem).
fn hint_for(cause: &str, first_error: &str, base_url: &str) -> String {
    let url = if base_url.is_empty() {
        "--base-url".to_owned()
    } else {
        format!("--base-url ({base_url})")
    };
    let said = first_error.to_lowercase();
    let says = |words: &[&str]| words.iter().any(|w| said.contains(w));
    match cause {
        "connection refused" => format!("check that the server is running and listening there, and that {url} is right"),
        "DNS lookup failed" => format!("check the host name in {url}"),
        "HTTP 401" | "HTTP 403" => "check the API key (--api-key or OPENAI_API_KEY) and its permissions".to_owned(),
        "HTTP 404" => format!("check --model (the name the server serves: GET {}/models lists them) and that {url} ends in /v1", base_url.trim_end_matches('/')),
        "HTTP 400" | "HTTP 422" if says(&["api key", "api_key", "apikey", "unauthorized", "authentication", "credential", "permission"]) => {
            "the server refuses the credentials: check the API key (--api-key or OPENAI_API_KEY)".to_owned()
        }
        "HTTP 400" | "HTTP 422" if says(&["context length", "context_length", "maximum context", "too long", "too many tokens", "max_tokens", "prompt is too", "token limit"]) => {
            "the prompts do not fit: raise the server's context length, or use --max-prompt-chars or --template envsim-sliced, or lower --max-tokens".to_owned()
        }
        "HTTP 400" | "HTTP 422" if says(&["model"]) => {
            "the server's message names the model: check --model (GET /models lists what it serves)".to_owned()
        }
        "HTTP 400" | "HTTP 422" => "the server rejects the requests as sent; its message (above) says why: check --extra-body, --max-tokens and --model against it".to_owned(),
        other => format!("check the server and {url} ({other})"),
    }
}

/// Exit status 3 when more samples failed than `--allow-errors` allows, with the errors grouped
/// by cause on stderr.
fn check_failures(
    report: &RunReport,
    allowance: Option<ErrorAllowance>,
    store_path: &Path,
) -> Result<()> {
    if report.failed == 0 {
        return Ok(());
    }
    let samples = report.report.samples.len();
    let groups: Vec<String> = report
        .errors
        .iter()
        .map(|g| format!("{} × {}", g.count, g.cause))
        .collect();
    let first = report.errors.first().map_or("", |g| g.first.as_str());
    let summary = format!(
        "{} of {samples} samples failed after their retries ({}); first: {first}",
        report.failed,
        groups.join(", ")
    );
    let allowed = allowance.is_some_and(|a| a.allows(report.failed, samples));
    if allowed {
        eprintln!("warning: {summary} (allowed by --allow-errors; they count as wrong)");
        return Ok(());
    }
    Err(SamplesFailed(format!(
        "{summary}\nthey count as wrong in the table above, and run {} is incomplete: rerun the same command to retry exactly these samples (store {}), or pass --allow-errors N|P% to accept them",
        report.record.run_id,
        store_path.display()
    ))
    .into())
}

fn finish_report(
    report: &RunReport,
    format: OutputFormat,
    chart: Option<&ChartArgs>,
) -> Result<()> {
    let rendered = render_run(report, format)?;
    if let Some((path, metric)) = chart.and_then(|c| Some((c.path.as_ref()?, c.metric()))) {
        let svg = cliff_svg(
            &format!(
                "Config match ({}) vs |Δ| — {}",
                metric.label(),
                report.record.system
            ),
            metric,
            &[report.cliff(&report.record.system, metric)],
            Some(&report.null_cliff(metric)),
        );
        write_atomic(path, &svg)?;
    }
    print(&rendered)
}

fn load_price_table(path: &Path, model: Option<&str>) -> Result<Option<Price>> {
    let bytes = read(path)?;
    let table: std::collections::BTreeMap<String, Price> = serde_json::from_slice(&bytes)
        .with_context(|| {
            format!(
                "{}: expected {{\"<model>\": {{\"input_per_mtok\": x, \"output_per_mtok\": y}}}}",
                path.display()
            )
        })?;
    Ok(model.and_then(|m| table.get(m).copied()))
}

fn model_of(config: &RunConfig) -> Option<&str> {
    match &config.backend {
        BackendConfig::Openai { model, .. } | BackendConfig::Batch { model, .. } => Some(model),
        _ => None,
    }
}

pub fn report(args: ReportArgs) -> Result<()> {
    let store = Store::open_existing(&args.store.store)?;
    let record = store.find_run(&args.run)?;
    let price = match &args.prices {
        Some(path) => {
            let price = load_price_table(path, model_of(&record.config))?;
            if price.is_none() {
                eprintln!(
                    "warning: {} has no entry for this run's model; cost not shown",
                    path.display()
                );
            }
            price
        }
        None => None,
    };
    let hash = record.hash.clone();
    let report = RunReport::load(&store, record, price)?;
    if let Some(path) = &args.out {
        write_predictions(&store, &hash, &report, path)?;
    }
    finish_report(&report, args.format, Some(&args.chart))
}

/// One line per finished sample: `sample_id`, the prediction (`output` raw text, `prediction`
/// parsed object, or `error`), `usage`, `latency_ms` and the `score`.
fn write_predictions(store: &Store, hash: &str, report: &RunReport, path: &Path) -> Result<()> {
    let mut text = String::new();
    for (row, score) in store.results(hash)?.iter().zip(&report.report.samples) {
        if row.status != SampleStatus::Done || row.prediction_kind.as_deref() == Some("missing") {
            continue;
        }
        let mut line = serde_json::Map::new();
        line.insert("sample_id".into(), row.sample_id.clone().into());
        let prediction = row.prediction.clone().unwrap_or_default();
        match row.prediction_kind.as_deref() {
            Some("raw") => {
                line.insert("output".into(), prediction.into());
            }
            Some("parsed") => {
                let value: serde_json::Value =
                    serde_json::from_str(&prediction).with_context(|| {
                        format!("stored prediction of sample {} is not JSON", row.sample_id)
                    })?;
                line.insert("prediction".into(), value);
            }
            _ => {
                line.insert("error".into(), prediction.into());
            }
        }
        if let Some(usage) = score.usage {
            line.insert("usage".into(), serde_json::to_value(usage)?);
        }
        line.insert("latency_ms".into(), row.latency_ms.into());
        line.insert("score".into(), serde_json::to_value(score)?);
        text.push_str(&serde_json::Value::Object(line).to_string());
        text.push('\n');
    }
    Ok(write_atomic(path, &text)?)
}

pub fn runs(args: RunsArgs) -> Result<()> {
    let store = Store::open_existing(&args.store.store)?;
    let mut reports = Vec::new();
    for record in store.list_runs()? {
        reports.push(RunReport::load(&store, record, None)?);
    }
    print(&render_runs(&reports, args.format)?)
}

pub fn compare_cmd(args: CompareArgs) -> Result<()> {
    let store = Store::open_existing(&args.store.store)?;
    let mut reports = Vec::new();
    for key in &args.runs {
        reports.push(RunReport::load(&store, store.find_run(key)?, None)?);
    }
    let comparison = compare(&reports).map_err(anyhow::Error::msg)?;
    if let Some(path) = &args.chart.path {
        let metric = args.chart.metric();
        let series: Vec<_> = reports
            .iter()
            .map(|r| {
                r.cliff(
                    &format!("{} {}", r.record.system, &r.record.run_id[..6]),
                    metric,
                )
            })
            .collect();
        let svg = cliff_svg(
            &format!("Config match ({}) vs |Δ|", metric.label()),
            metric,
            &series,
            Some(&reports[0].null_cliff(metric)),
        );
        write_atomic(path, &svg)?;
    }
    print(&render_compare(
        &reports,
        &comparison,
        args.format,
        args.show,
    )?)
}

pub fn batch(args: BatchArgs) -> Result<()> {
    match args.command {
        BatchCommand::Export(args) => {
            let template = args
                .decoding
                .template
                .unwrap_or(TemplateArg::Envsim)
                .template();
            let bench = load_bench(&args.selection, template, false)?;
            let model = args
                .decoding
                .model
                .clone()
                .context("batch export needs --model (the model named in every request)")?;
            let text = batch::export_requests(
                bench.transitions()?,
                &model,
                template,
                &args.decoding.decoding()?,
            )
            .map_err(anyhow::Error::msg)?;
            write_atomic(&args.out, &text)?;
            eprintln!(
                "wrote {} requests to {} (model {model}, template {})",
                bench.transitions()?.len(),
                args.out.display(),
                template.name()
            );
            Ok(())
        }
        BatchCommand::Import(args) => {
            // Prompt-size selection uses envsim's template here; import with the same selection
            // flags (and template) as the export.
            let bench = load_bench(&args.selection, Template::Envsim, false)?;
            let request_name = args.requests.display().to_string();
            let requests = batch::parse_requests(&read(&args.requests)?, &request_name)
                .map_err(anyhow::Error::msg)?;
            let mut answers = std::collections::HashMap::new();
            for path in &args.outputs {
                batch::parse_output(
                    &read(path)?,
                    &path.display().to_string(),
                    &requests,
                    &mut answers,
                )
                .map_err(anyhow::Error::msg)?;
            }
            let transitions = bench.transitions()?;
            let unknown: Vec<&String> = requests
                .bodies
                .keys()
                .filter(|id| !transitions.iter().any(|t| &t.id == *id))
                .collect();
            if let Some(id) = unknown.first() {
                bail!("{request_name}: custom_id {id:?} is not a sample of {} ({} such ids); import with the benchmark and selection used for the export", bench.display, unknown.len());
            }
            let bodies: Vec<Option<String>> = transitions
                .iter()
                .map(|t| requests.bodies.get(&t.id).cloned())
                .collect();
            let ordered = batch::answers_in_order(transitions, answers);
            let missing = ordered.iter().filter(|a| a.is_none()).count();
            if missing > 0 {
                eprintln!("warning: the batch output has no answer for {missing} of {} samples; they count as wrong", ordered.len());
            }
            let mut config = RunConfig::new(
                bench.sha256.clone(),
                BackendConfig::Batch {
                    model: requests.model.clone(),
                    requests_sha256: requests.sha256.clone(),
                },
                "",
                Decoding::default(),
            );
            config.subset = bench.subset;
            let request = RunRequest {
                store: args.store.store.clone(),
                system: format!("batch:{}", requests.model),
                config,
                bench_path: bench.display.clone(),
                samples: bench.source()?,
                simulator: Predictor::Batch(ordered.into_iter().zip(bodies).collect()),
                options: RunnerOptions::default(),
                fresh: args.fresh,
                prices: None,
                stop: None,
                events: None,
            };
            let report = execute(request, &args.store.store, false, "")?;
            finish_report(&report, args.format, None)
        }
    }
}

#[cfg(test)]
mod hint_tests {
    use super::hint_for;

    /// A 400 gets the hint its text supports, and only that one.
    #[test]
    fn a_400_is_hinted_by_what_the_server_said() {
        let url = "http://gw:4000/v1";
        let key = hint_for(
            "HTTP 400",
            "HTTP 400: {\"error\": {\"message\": \"Invalid API key provided\"}}",
            url,
        );
        assert!(
            key.contains("API key") && !key.contains("context length"),
            "{key}"
        );
        let long = hint_for(
            "HTTP 400",
            "HTTP 400: This model's maximum context length is 4096 tokens",
            url,
        );
        assert!(long.contains("context length"), "{long}");
        let other = hint_for(
            "HTTP 422",
            "HTTP 422: field `temperature` must be at most 2",
            url,
        );
        assert!(
            !other.contains("context length") && other.contains("its message"),
            "{other}"
        );
        let model = hint_for("HTTP 400", "HTTP 400: model `gpt-9` does not exist", url);
        assert!(model.contains("--model"), "{model}");
        assert!(hint_for("connection refused", "", url).contains("http://gw:4000/v1"));
    }
}

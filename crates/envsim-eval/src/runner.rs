//! The evaluation runner: runs a simulator over a benchmark with bounded concurrency, rate
//! limits, retries, a response cache and crash-safe storage, scoring each sample as it finishes.

use crate::batch::BatchAnswer;
use crate::config::{sha256_hex, Decoding, RunConfig};
use crate::openai::{elapsed_ms, parse_completion, AttemptError, Completion, OpenAiClient};
use crate::store::{
    AttemptRow, CacheReader, ResultRow, RunRecord, Store, StoreError, StoreWriter, WriteOp,
};
use envsim_core::prelude::*;
use envsim_core::prompt::Template;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// What produces the predictions.
pub enum Simulator {
    /// An OpenAI-compatible endpoint.
    OpenAi {
        /// The client.
        client: OpenAiClient,
        /// Model name sent in requests.
        model: String,
        /// Prompt template.
        template: Template,
        /// Sampling parameters.
        decoding: Decoding,
    },
    /// A built-in baseline (oracle from the benchmark labels, or null).
    Baseline(Baseline),
    /// Stored predictions, one per sample in benchmark order.
    Replay(Vec<(Prediction, Option<Usage>)>),
    /// The embedded local model (one request at a time, ordered by environment and tool so that
    /// prompt prefixes are reused).
    #[cfg(feature = "local")]
    Local {
        /// The engine.
        engine: Arc<crate::local::LocalEngine>,
        /// Identity of the model for cache keys (its SHA-256 or name and size).
        model_key: String,
        /// Prompt template.
        template: Template,
        /// Generation parameters.
        generation: crate::local::Generation,
    },
    /// Imported batch answers, one per sample in benchmark order (`None`: not answered), with
    /// the request bodies for the audit log.
    Batch(Vec<(Option<BatchAnswer>, Option<String>)>),
}

/// Scheduling and retry settings (not part of the run's identity).
#[derive(Clone, Debug)]
pub struct RunnerOptions {
    /// Requests in flight at most.
    pub concurrency: usize,
    /// Requests per minute, if limited.
    pub requests_per_minute: Option<u32>,
    /// Estimated tokens per minute, if limited (prompt characters / 4 + `max_tokens`).
    pub tokens_per_minute: Option<u32>,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First backoff delay; doubles per retry, with jitter.
    pub backoff_base: Duration,
    /// Longest wait between attempts (also caps `Retry-After`).
    pub backoff_cap: Duration,
    /// Answer from (and fill) the response cache.
    pub use_cache: bool,
    /// Show a progress bar (or, without a terminal, periodic progress lines) on stderr.
    pub progress: bool,
    /// Stop on Ctrl-C, keeping what finished.
    pub handle_ctrl_c: bool,
}

impl Default for RunnerOptions {
    fn default() -> Self {
        RunnerOptions {
            concurrency: 64,
            requests_per_minute: None,
            tokens_per_minute: None,
            max_retries: 4,
            backoff_base: Duration::from_millis(500),
            backoff_cap: Duration::from_secs(60),
            use_cache: true,
            progress: false,
            handle_ctrl_c: false,
        }
    }
}

/// One run to execute.
pub struct RunRequest {
    /// The store file.
    pub store: PathBuf,
    /// Display name of the simulator.
    pub system: String,
    /// The run's identity.
    pub config: RunConfig,
    /// Benchmark path (for the record).
    pub bench_path: String,
    /// The benchmark's samples, in order.
    pub samples: Vec<PreparedSample>,
    /// The simulator.
    pub simulator: Simulator,
    /// Scheduling.
    pub options: RunnerOptions,
    /// Delete any stored results of this run first.
    pub fresh: bool,
    /// Price entry stored with the run (`{"input_per_mtok": x, "output_per_mtok": y}`).
    pub prices: Option<serde_json::Value>,
}

/// What a run did.
#[derive(Debug)]
pub struct RunOutcome {
    /// The stored run.
    pub record: RunRecord,
    /// The run existed and was resumed.
    pub resumed: bool,
    /// Samples processed in this invocation.
    pub processed: usize,
    /// Samples already finished before this invocation.
    pub already_done: usize,
    /// Stopped by Ctrl-C before finishing.
    pub interrupted: bool,
    /// Harness wall time.
    pub wall: Duration,
}

/// A runner failure.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A worker task failed unexpectedly.
    #[error("evaluation task failed: {0}")]
    Task(String),
}

struct Shared {
    run_hash: String,
    simulator: Simulator,
    options: RunnerOptions,
    writes: std::sync::Mutex<Sender<WriteOp>>,
    cache: Option<CacheReader>,
    rpm: Option<DefaultDirectRateLimiter>,
    tpm: Option<(DefaultDirectRateLimiter, u32)>,
    permits: Semaphore,
}

impl Shared {
    /// An audit row for one attempt of sample `idx` whose request body has content key `key`.
    fn attempt_row(
        &self,
        idx: usize,
        key: &str,
        attempt: u32,
        latency_ms: f64,
        outcome: &str,
    ) -> AttemptRow {
        AttemptRow {
            run_hash: self.run_hash.clone(),
            idx,
            attempt,
            latency_ms,
            status: None,
            outcome: outcome.to_owned(),
            error: None,
            body_key: Some(key.to_owned()),
            response: None,
            prompt_tokens: None,
            completion_tokens: None,
        }
    }

    /// The cached completion for a request key, if the cache is on and has one (recorded in
    /// the audit log as attempt 0).
    fn cached_completion(&self, idx: usize, key: &str, status: Option<u16>) -> Option<Completion> {
        let response = self.cache.as_ref()?.get(key).ok()??;
        let completion = parse_completion(&response).ok()?;
        let mut row = self.attempt_row(idx, key, 0, 0.0, "cache");
        row.status = status;
        row.prompt_tokens = completion.usage.map(|u| u.prompt_tokens);
        row.completion_tokens = completion.usage.map(|u| u.completion_tokens);
        self.send(WriteOp::Attempt(row));
        Some(completion)
    }

    fn send(&self, op: WriteOp) {
        // The writer only goes away after every task has finished; a failed send means the
        // writer thread died, which `finish` reports.
        let _ = self
            .writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(op);
    }
}

struct Finished {
    cm_strict: bool,
    api_error: bool,
    parse_failure: bool,
}

/// Runs (or resumes) a run and commits every sample as it finishes.
pub async fn run(request: RunRequest) -> Result<RunOutcome, RunError> {
    let started = Instant::now();
    let RunRequest {
        store: store_path,
        system,
        config,
        bench_path,
        mut samples,
        simulator,
        options,
        fresh,
        prices,
    } = request;
    let mut store = Store::open(&store_path)?;
    let hash = config.hash();
    if fresh {
        store.delete_run(&hash)?;
    }
    let (record, resumed) = match store.run_by_hash(&hash)? {
        // Resuming: the run's rows exist, so nothing needs scoring before the first request.
        Some(existing) => {
            if existing.samples != samples.len() {
                return Err(StoreError::Corrupt {
                    path: store_path.clone(),
                    message: format!(
                        "run {} has {} samples stored but the benchmark has {}",
                        existing.run_id,
                        existing.samples,
                        samples.len()
                    ),
                }
                .into());
            }
            if let Some(prices) = &prices {
                store.set_prices(&hash, prices)?;
            }
            rescore_legacy(&mut store, &hash, &mut samples)?;
            (existing, true)
        }
        None => {
            let null_scores = baseline_scores(&mut samples, Baseline::Null);
            let oracle_scores = baseline_scores(&mut samples, Baseline::Oracle);
            let pending: Vec<(String, String)> = samples
                .iter_mut()
                .map(|s| {
                    let score = s.score(&Prediction::Missing, None);
                    (
                        s.transition().id.clone(),
                        serde_json::to_string(&score).unwrap_or_default(),
                    )
                })
                .collect();
            let created = store.create_run(
                &system,
                &config,
                &bench_path,
                prices.as_ref(),
                (&null_scores, &oracle_scores),
                &pending,
            )?;
            (created, false)
        }
    };
    let done: std::collections::HashSet<usize> = store
        .results(&hash)?
        .into_iter()
        .filter(|r| r.done)
        .map(|r| r.idx)
        .collect();
    let already_done = done.len();

    let writer = StoreWriter::spawn(&store_path)?;
    let cache = if options.use_cache
        && (matches!(simulator, Simulator::OpenAi { .. }) || is_local(&simulator))
    {
        Some(CacheReader::open(&store_path)?)
    } else {
        None
    };
    let limiter = |per_minute: Option<u32>| {
        per_minute
            .and_then(NonZeroU32::new)
            .map(|n| RateLimiter::direct(Quota::per_minute(n)))
    };
    let local = is_local(&simulator);
    let shared = Arc::new(Shared {
        run_hash: hash.clone(),
        simulator,
        rpm: limiter(options.requests_per_minute),
        tpm: limiter(options.tokens_per_minute)
            .map(|l| (l, options.tokens_per_minute.unwrap_or(1))),
        permits: Semaphore::new(if local { 1 } else { options.concurrency.max(1) }),
        writes: std::sync::Mutex::new(writer.sender()),
        cache,
        options,
    });

    let todo = samples.len() - already_done;
    let progress = Progress::new(shared.options.progress, todo as u64);
    let mut tasks = JoinSet::new();
    let mut pending_samples: Vec<(usize, PreparedSample)> = samples
        .into_iter()
        .enumerate()
        .filter(|(idx, _)| !done.contains(idx))
        .collect();
    if is_local(&shared.simulator) {
        // One request at a time: group samples of one environment and tool so consecutive
        // prompts share long prefixes (the engine reuses their KV cache).
        pending_samples.sort_by(|(ia, a), (ib, b)| {
            let key = |s: &PreparedSample| {
                let t = s.transition();
                (
                    t.env_id.clone().unwrap_or_default(),
                    t.env_code.len(),
                    t.action.name.clone(),
                )
            };
            key(a).cmp(&key(b)).then(ia.cmp(ib))
        });
    }
    for (idx, sample) in pending_samples {
        let shared = Arc::clone(&shared);
        tasks.spawn(async move {
            let _permit = shared.permits.acquire().await;
            run_sample(&shared, idx, sample).await
        });
    }

    let mut processed = 0usize;
    let (mut correct, mut api_errors, mut parse_failures) = (0usize, 0usize, 0usize);
    let mut interrupted = false;
    let handle_ctrl_c = shared.options.handle_ctrl_c;
    let ctrl_c = async move {
        if handle_ctrl_c {
            let _ = tokio::signal::ctrl_c().await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            next = tasks.join_next() => {
                let Some(joined) = next else { break };
                let finished = joined.map_err(|e| RunError::Task(e.to_string()))?;
                processed += 1;
                correct += usize::from(finished.cm_strict);
                api_errors += usize::from(finished.api_error);
                parse_failures += usize::from(finished.parse_failure);
                progress.tick(processed, correct, api_errors, parse_failures);
            }
            _ = &mut ctrl_c => {
                interrupted = true;
                tasks.abort_all();
                while tasks.join_next().await.is_some() {}
                break;
            }
        }
    }
    progress.finish(processed, correct, api_errors, parse_failures, interrupted);
    drop(shared);
    writer.finish()?;
    let record = Store::open(&store_path)?
        .run_by_hash(&hash)?
        .unwrap_or(record);
    Ok(RunOutcome {
        record,
        resumed,
        processed,
        already_done,
        interrupted,
        wall: started.elapsed(),
    })
}

async fn run_sample(shared: &Shared, idx: usize, mut sample: PreparedSample) -> Finished {
    let start = Instant::now();
    let (prediction, usage, attempts, cached, kind, text) = match &shared.simulator {
        Simulator::Baseline(baseline) => {
            let p = baseline.predict(sample.transition());
            let text = match &p {
                Prediction::Parsed(v) => v.to_string(),
                _ => String::new(),
            };
            (p, None, 0, false, "parsed", text)
        }
        Simulator::Replay(predictions) => {
            let (p, usage) = predictions
                .get(idx)
                .cloned()
                .unwrap_or((Prediction::Missing, None));
            let (kind, text) = prediction_text(&p);
            (p, usage, 0, false, kind, text)
        }
        Simulator::Batch(items) => {
            let (answer, body) = items.get(idx).cloned().unwrap_or((None, None));
            let key = body
                .as_ref()
                .map(|b| sha256_hex(format!("batch\n{b}").as_bytes()));
            if let (Some(key), Some(body)) = (&key, body) {
                shared.send(WriteOp::Body {
                    key: key.clone(),
                    body,
                });
            }
            match answer {
                Some(answer) => {
                    let ok = matches!(answer.prediction, Prediction::Raw(_));
                    shared.send(WriteOp::Attempt(AttemptRow {
                        run_hash: shared.run_hash.clone(),
                        idx,
                        attempt: 1,
                        latency_ms: 0.0,
                        status: answer.status,
                        outcome: if ok { "batch" } else { "batch_error" }.to_owned(),
                        error: match &answer.prediction {
                            Prediction::ApiError(e) => Some(e.clone()),
                            _ => None,
                        },
                        body_key: key,
                        response: Some(answer.raw.clone()),
                        prompt_tokens: answer.usage.map(|u| u.prompt_tokens),
                        completion_tokens: answer.usage.map(|u| u.completion_tokens),
                    }));
                    let (kind, text) = prediction_text(&answer.prediction);
                    (answer.prediction, answer.usage, 1, false, kind, text)
                }
                None => (
                    Prediction::Missing,
                    None,
                    0,
                    false,
                    "missing",
                    String::new(),
                ),
            }
        }
        #[cfg(feature = "local")]
        Simulator::Local {
            engine,
            model_key,
            template,
            generation,
        } => {
            let t = sample.transition();
            let prompt = template.render_eval(&t.env_code, &t.config_before, &t.action);
            let (result, attempts, cached) =
                complete_local(shared, idx, engine, model_key, prompt, generation).await;
            prediction_of(result, attempts, cached)
        }
        Simulator::OpenAi {
            client,
            model,
            template,
            decoding,
        } => {
            let t = sample.transition();
            let prompt = template.render_eval(&t.env_code, &t.config_before, &t.action);
            let body =
                serde_json::to_string(&crate::openai::request_body(model, &prompt, decoding))
                    .unwrap_or_default();
            let key = sha256_hex(format!("{}\n{}", client.url(), body).as_bytes());
            let estimate = body.len() / 4 + decoding.max_tokens.unwrap_or(0) as usize;
            let (result, attempts, cached) =
                complete(shared, idx, client, &body, &key, estimate).await;
            let result = result.map_err(|e| format!("{e} (after {attempts} attempts)"));
            prediction_of(result, attempts, cached)
        }
    };
    let score = sample.score(&prediction, usage);
    // The sample is dropped here, in its task, so freeing large states is spread over the
    // runtime's threads instead of the thread driving the run.
    drop(sample);
    let finished = Finished {
        cm_strict: score.cm_strict,
        api_error: score.api_error.is_some(),
        parse_failure: score.parse_failure.is_some(),
    };
    shared.send(WriteOp::Result {
        run_hash: shared.run_hash.clone(),
        row: ResultRow {
            idx,
            sample_id: score.sample_id.clone(),
            done: true,
            prediction_kind: Some(kind.to_owned()),
            prediction: Some(text),
            latency_ms: Some(elapsed_ms(start)),
            attempts,
            cached,
            score: serde_json::to_string(&score).unwrap_or_default(),
        },
    });
    finished
}

/// A baseline's per-sample scores as the JSON array stored with a run.
fn baseline_scores(samples: &mut [PreparedSample], baseline: Baseline) -> String {
    let scores: Vec<SampleScore> = samples
        .iter_mut()
        .map(|s| {
            let p = baseline.predict(s.transition());
            s.score(&p, None)
        })
        .collect();
    serde_json::to_string(&scores).unwrap_or_default()
}

/// Whether a stored score was written before the reference lane was exact (schema v1): such
/// scores lack `reference_outcome`, and their reference columns came from envsim's lenient
/// extraction.
pub fn is_legacy_score(score_json: &str) -> bool {
    !score_json.contains("\"reference_outcome\"")
}

/// The prediction a stored result row recorded (`prediction_kind` and `prediction`).
pub fn stored_prediction(kind: Option<&str>, text: Option<&str>) -> Prediction {
    match (kind, text) {
        (Some("raw"), Some(text)) => Prediction::Raw(text.to_owned()),
        (Some("parsed"), Some(text)) => serde_json::from_str(text)
            .map(Prediction::Parsed)
            .unwrap_or_else(|e| {
                Prediction::ApiError(format!("stored prediction is not JSON: {e}"))
            }),
        (Some("api_error"), Some(text)) => Prediction::ApiError(text.to_owned()),
        _ => Prediction::Missing,
    }
}

/// Rescores, from the stored outputs, every score of a resumed run that an older envsim wrote
/// (see [`is_legacy_score`]), baselines included, so that no column of a run mixes scorers.
fn rescore_legacy(
    store: &mut Store,
    hash: &str,
    samples: &mut [PreparedSample],
) -> Result<(), StoreError> {
    let mut scores = Vec::new();
    for row in store.results(hash)? {
        if !is_legacy_score(&row.score) {
            continue;
        }
        let Some(sample) = samples.get_mut(row.idx) else {
            continue;
        };
        let usage = serde_json::from_str::<SampleScore>(&row.score)
            .ok()
            .and_then(|old| old.usage);
        let prediction = if row.done {
            stored_prediction(row.prediction_kind.as_deref(), row.prediction.as_deref())
        } else {
            Prediction::Missing
        };
        let score = sample.score(&prediction, usage);
        scores.push((row.idx, serde_json::to_string(&score).unwrap_or_default()));
    }
    let (null, oracle) = store.baselines(hash)?;
    let baselines = if is_legacy_score(&null) || is_legacy_score(&oracle) {
        Some((
            baseline_scores(samples, Baseline::Null),
            baseline_scores(samples, Baseline::Oracle),
        ))
    } else {
        None
    };
    if scores.is_empty() && baselines.is_none() {
        return Ok(());
    }
    store.replace_scores(
        hash,
        &scores,
        baselines.as_ref().map(|(n, o)| (n.as_str(), o.as_str())),
    )
}

/// A model answer (or the request's final error) as what `run_sample` records: prediction,
/// usage, attempts, cache flag, stored kind and stored text.
fn prediction_of(
    result: Result<Completion, String>,
    attempts: u32,
    cached: bool,
) -> (Prediction, Option<Usage>, u32, bool, &'static str, String) {
    match result {
        Ok(c) => {
            let text = c.content.clone();
            (
                Prediction::Raw(c.content),
                c.usage,
                attempts,
                cached,
                "raw",
                text,
            )
        }
        Err(e) => (
            Prediction::ApiError(e.clone()),
            None,
            attempts,
            false,
            "api_error",
            e,
        ),
    }
}

fn is_local(simulator: &Simulator) -> bool {
    #[cfg(feature = "local")]
    if let Simulator::Local { .. } = simulator {
        return true;
    }
    let _ = simulator;
    false
}

/// One sample on the local model, with the response cache and the audit log.
#[cfg(feature = "local")]
async fn complete_local(
    shared: &Shared,
    idx: usize,
    engine: &crate::local::LocalEngine,
    model_key: &str,
    prompt: envsim_core::prompt::Prompt,
    generation: &crate::local::Generation,
) -> (Result<Completion, String>, u32, bool) {
    let body = serde_json::json!({
        "model": model_key,
        "messages": [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}],
        "max_tokens": generation.max_tokens,
        "temperature": generation.temperature,
        "seed": generation.seed,
        "stop": generation.stop,
        "stop_after_object": generation.stop_after_object,
    })
    .to_string();
    let key = sha256_hex(format!("local\n{body}").as_bytes());
    shared.send(WriteOp::Body {
        key: key.clone(),
        body,
    });
    let audit = |attempt: u32, latency_ms: f64, outcome: &str| {
        shared.attempt_row(idx, &key, attempt, latency_ms, outcome)
    };
    if let Some(completion) = shared.cached_completion(idx, &key, None) {
        return (Ok(completion), 0, true);
    }
    let start = Instant::now();
    match engine.generate(prompt, generation.clone()).await {
        Ok(local) => {
            let raw = local.to_response_json(model_key);
            let mut row = audit(1, elapsed_ms(start), "ok");
            row.prompt_tokens = local.completion.usage.map(|u| u.prompt_tokens);
            row.completion_tokens = local.completion.usage.map(|u| u.completion_tokens);
            row.response = Some(raw.clone());
            shared.send(WriteOp::Attempt(row));
            if shared.cache.is_some() {
                shared.send(WriteOp::Cache { key, response: raw });
            }
            (Ok(local.completion), 1, false)
        }
        Err(error) => {
            let mut row = audit(1, elapsed_ms(start), "local_error");
            row.error = Some(error.clone());
            shared.send(WriteOp::Attempt(row));
            (Err(error), 1, false)
        }
    }
}

fn prediction_text(p: &Prediction) -> (&'static str, String) {
    match p {
        Prediction::Raw(s) => ("raw", s.clone()),
        Prediction::Parsed(v) => ("parsed", v.to_string()),
        Prediction::ApiError(e) => ("api_error", e.clone()),
        Prediction::Missing => ("missing", String::new()),
    }
}

/// One sample's request with cache, rate limits and retries. Returns the completion (or the
/// last error), the number of HTTP attempts and whether the cache answered.
async fn complete(
    shared: &Shared,
    idx: usize,
    client: &OpenAiClient,
    body: &str,
    key: &str,
    token_estimate: usize,
) -> (Result<Completion, AttemptError>, u32, bool) {
    let audit = |attempt: u32, latency_ms: f64, outcome: &str| {
        shared.attempt_row(idx, key, attempt, latency_ms, outcome)
    };
    shared.send(WriteOp::Body {
        key: key.to_owned(),
        body: body.to_owned(),
    });
    if let Some(completion) = shared.cached_completion(idx, key, Some(200)) {
        return (Ok(completion), 0, true);
    }
    let options = &shared.options;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        if let Some(rpm) = &shared.rpm {
            rpm.until_ready().await;
        }
        if let Some((tpm, burst)) = &shared.tpm {
            let cells = NonZeroU32::new((token_estimate as u32).clamp(1, *burst))
                .unwrap_or(NonZeroU32::MIN);
            let _ = tpm.until_n_ready(cells).await;
        }
        let start = Instant::now();
        let result = client.attempt(body).await;
        let latency = elapsed_ms(start);
        match result {
            Ok((completion, raw)) => {
                let mut row = audit(attempt, latency, "ok");
                row.status = Some(200);
                row.prompt_tokens = completion.usage.map(|u| u.prompt_tokens);
                row.completion_tokens = completion.usage.map(|u| u.completion_tokens);
                row.response = Some(raw.clone());
                shared.send(WriteOp::Attempt(row));
                if shared.cache.is_some() {
                    shared.send(WriteOp::Cache {
                        key: key.to_owned(),
                        response: raw,
                    });
                }
                return (Ok(completion), attempt, false);
            }
            Err(error) => {
                let mut row = audit(attempt, latency, error.outcome());
                row.status = error.status;
                row.error = Some(error.message.clone());
                row.response = error.body.clone();
                shared.send(WriteOp::Attempt(row));
                if !error.retryable() || attempt > options.max_retries {
                    return (Err(error), attempt, false);
                }
                tokio::time::sleep(retry_delay(options, attempt, error.retry_after)).await;
            }
        }
    }
}

/// Delay before retry number `attempt` (1-based): the server's `Retry-After` when given,
/// else exponential backoff with "equal jitter" (half fixed, half random), both capped.
pub fn retry_delay(
    options: &RunnerOptions,
    attempt: u32,
    retry_after: Option<Duration>,
) -> Duration {
    if let Some(wait) = retry_after {
        return wait.min(options.backoff_cap);
    }
    let exp = options
        .backoff_base
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(20))
        .min(options.backoff_cap);
    let half = exp / 2;
    half + half.mul_f64(fastrand::f64())
}

struct Progress {
    bar: Option<ProgressBar>,
    total: u64,
    lines: bool,
    started: Instant,
    last_line: std::sync::Mutex<Instant>,
}

impl Progress {
    fn new(enabled: bool, total: u64) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let bar = (enabled && terminal).then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} samples · {per_sec} · ETA {eta} · {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar
        });
        Progress {
            bar,
            total,
            lines: enabled && !terminal,
            started: Instant::now(),
            last_line: std::sync::Mutex::new(Instant::now()),
        }
    }

    fn message(done: usize, correct: usize, api_errors: usize, parse_failures: usize) -> String {
        format!(
            "CM-strict {:.1}% · API errors {api_errors} · parse failures {parse_failures}",
            if done == 0 {
                0.0
            } else {
                correct as f64 * 100.0 / done as f64
            }
        )
    }

    fn tick(&self, done: usize, correct: usize, api_errors: usize, parse_failures: usize) {
        if let Some(bar) = &self.bar {
            bar.set_position(done as u64);
            bar.set_message(Self::message(done, correct, api_errors, parse_failures));
        } else if self.lines {
            let mut last = self.last_line.lock().unwrap_or_else(|p| p.into_inner());
            if last.elapsed() >= Duration::from_secs(10) {
                *last = Instant::now();
                eprintln!(
                    "eval: {done}/{} samples, {:.0} s, {}",
                    self.total,
                    self.started.elapsed().as_secs_f64(),
                    Self::message(done, correct, api_errors, parse_failures)
                );
            }
        }
    }

    fn finish(
        &self,
        done: usize,
        correct: usize,
        api_errors: usize,
        parse_failures: usize,
        interrupted: bool,
    ) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        if self.bar.is_some() || self.lines {
            eprintln!(
                "eval: {}{done}/{} samples in {:.1} s, {}",
                if interrupted {
                    "interrupted after "
                } else {
                    ""
                },
                self.total,
                self.started.elapsed().as_secs_f64(),
                Self::message(done, correct, api_errors, parse_failures)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_jittered_and_capped() {
        let options = RunnerOptions {
            backoff_base: Duration::from_millis(100),
            backoff_cap: Duration::from_secs(1),
            ..RunnerOptions::default()
        };
        for _ in 0..200 {
            let d1 = retry_delay(&options, 1, None);
            assert!(
                d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100),
                "{d1:?}"
            );
            let d3 = retry_delay(&options, 3, None);
            assert!(
                d3 >= Duration::from_millis(200) && d3 <= Duration::from_millis(400),
                "{d3:?}"
            );
            let d30 = retry_delay(&options, 30, None);
            assert!(
                d30 >= Duration::from_millis(500) && d30 <= Duration::from_secs(1),
                "{d30:?}"
            );
        }
        assert_eq!(
            retry_delay(&options, 1, Some(Duration::from_millis(700))),
            Duration::from_millis(700)
        );
        assert_eq!(
            retry_delay(&options, 1, Some(Duration::from_secs(90))),
            Duration::from_secs(1)
        );
    }
}

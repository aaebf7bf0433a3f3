//! The evaluation runner: runs a simulator over a benchmark with bounded concurrency, rate
//! limits, retries, a response cache and crash-safe storage, scoring each sample as it finishes.
//!
//! What a run guarantees:
//! - **Nothing is lost.** Every finished sample is committed at once through the store's single
//!   writer; a sample whose request failed after its retries is stored as `failed` (scored
//!   wrong, never leaving the denominator) and is retried by the next run of the same command.
//! - **Failure is loud and early.** When every request so far has failed with the same
//!   configuration error (connection refused, unknown host, HTTP 400/401/403/404), the run stops
//!   after [`RunnerOptions::fail_fast_after`] attempts with [`Stopped::EndpointFailing`] instead
//!   of walking the whole benchmark. If the store's writer fails, the run stops sending
//!   requests and returns the store error once everything that could be committed is.
//! - **The caller owns the terminal.** Progress comes out as [`RunEvent`]s and stopping (Ctrl-C)
//!   comes in as a future; the library prints and draws nothing.
//!
//! Each sample's task renders its request (while it waits for a slot), sends it, scores the
//! null and oracle baselines on its sample while the request is in flight (for simulators
//! without HTTP requests: after the answer), then scores the answer and hands the rows to the
//! writer. Nothing but the request itself stands between a free slot and the next request.
//!
//! A new run can start before its benchmark is read ([`SampleSource::Stream`]): requests start
//! with the first samples, the writer holds their rows until the last sample is read and the
//! run is stored, and a file that turns out to be invalid stops the run with nothing stored.

use crate::batch::BatchAnswer;
use crate::config::{sha256_hex, RunConfig};
use crate::openai::{elapsed_ms, parse_completion, AttemptError, Completion};
use crate::prepare::{SampleStream, StreamItem};
use crate::store::{
    AttemptRow, CacheReader, NewRun, ResultRow, RunRecord, SampleStatus, Store, StoreError,
    StoreWriter, WriteOp,
};
use envsim_core::prelude::*;
use envsim_core::prompt::Template;
use envsim_llm::OpenAiText;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use std::future::Future;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch, Notify, Semaphore};
use tokio::task::JoinSet;

/// What produces the predictions.
// One value per run, shared by reference: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Predictor {
    /// A model behind an OpenAI-compatible endpoint (its name, decoding settings and client),
    /// asked one attempt at a time so that retries, rate limits, the cache and the audit log
    /// are the runner's.
    OpenAi {
        /// The model.
        model: OpenAiText,
        /// Prompt template.
        template: Template,
    },
    /// A built-in baseline (oracle from the benchmark labels, or null).
    Baseline(Baseline),
    /// Stored predictions, one per sample in benchmark order.
    Replay(Vec<(Prediction, Option<Usage>)>),
    /// The embedded local model (one request at a time, ordered by environment and tool so that
    /// prompt prefixes are reused).
    #[cfg(feature = "local")]
    Local {
        /// The model (engine and generation settings).
        model: envsim_llm::LocalText,
        /// Identity of the model for cache keys (its SHA-256 or name and size).
        model_key: String,
        /// Prompt template.
        template: Template,
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
    /// Stop the run when this many attempts have failed with the same configuration error
    /// before any succeeded (see [`AttemptError::is_configuration_error`]); 0 never stops.
    pub fail_fast_after: usize,
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
            fail_fast_after: 4,
        }
    }
}

/// A future that resolves when the caller wants the run to stop (for example on Ctrl-C).
pub type StopSignal = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A receiver of progress events, called on the thread driving the run.
pub type EventSink = Box<dyn FnMut(&RunEvent) + Send>;

/// Progress of a run, for whoever shows it.
#[derive(Clone, Debug, PartialEq)]
pub enum RunEvent {
    /// The run is set up; `todo` samples will be sent now.
    Started {
        /// Samples to run in this invocation.
        todo: usize,
        /// Samples already finished before it.
        already_done: usize,
        /// The run existed (a resume).
        resumed: bool,
    },
    /// A sample finished or failed.
    Progress {
        /// Samples of this invocation handled so far.
        handled: usize,
        /// Samples to run in this invocation.
        todo: usize,
        /// Of those, CM-strict correct.
        correct: usize,
        /// Of those, failed requests.
        failed: usize,
        /// Of those, unparseable answers.
        parse_failures: usize,
    },
    /// The run is stopping early; in-flight requests are abandoned.
    Stopping {
        /// Why, in words.
        reason: String,
    },
}

/// Why a run stopped before handling every sample.
#[derive(Clone, Debug, PartialEq)]
pub enum Stopped {
    /// The caller's stop signal fired (Ctrl-C).
    Interrupted,
    /// Every attempt so far failed with the same configuration error.
    EndpointFailing {
        /// The cause, as [`crate::openai::cause_of`] labels it (`connection refused`, `HTTP 401`).
        cause: String,
        /// The first error, verbatim.
        first_error: String,
        /// Attempts made, all failed.
        attempts: usize,
    },
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
    pub samples: SampleSource,
    /// The simulator.
    pub simulator: Predictor,
    /// Scheduling.
    pub options: RunnerOptions,
    /// Delete any stored results of this run first.
    pub fresh: bool,
    /// Price entry stored with the run (`{"input_per_mtok": x, "output_per_mtok": y}`).
    pub prices: Option<serde_json::Value>,
    /// Stops the run when it resolves: in-flight requests are abandoned, finished samples kept.
    pub stop: Option<StopSignal>,
    /// Receives progress events.
    pub events: Option<EventSink>,
}

/// What a run did.
#[derive(Debug)]
pub struct RunOutcome {
    /// The stored run.
    pub record: RunRecord,
    /// The run existed and was resumed.
    pub resumed: bool,
    /// Samples handled in this invocation (finished or failed).
    pub processed: usize,
    /// Of those, samples whose request failed after its retries.
    pub failed: usize,
    /// Samples already finished before this invocation.
    pub already_done: usize,
    /// Why the run stopped early, if it did.
    pub stopped: Option<Stopped>,
    /// Harness wall time.
    pub wall: Duration,
}

impl RunOutcome {
    /// Whether the caller's stop signal ended the run.
    pub fn interrupted(&self) -> bool {
        self.stopped == Some(Stopped::Interrupted)
    }
}

/// A runner failure.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The store failed (the run stopped sending requests; what could be committed is).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A worker task failed unexpectedly.
    #[error("evaluation task failed: {0}")]
    Task(String),
    /// The benchmark file turned out to be invalid after the run had started sending requests
    /// for its first samples ([`SampleSource::Stream`]); nothing of the run is stored.
    #[error("{message}")]
    Benchmark {
        /// The file's located error.
        message: String,
        /// Samples whose requests had been started.
        started: usize,
    },
}

/// The benchmark's samples for a run.
pub enum SampleSource {
    /// All samples, read and prepared, in order.
    Ready(Vec<PreparedSample>),
    /// Samples still being read, in order: a new run sends the first requests at once.
    Stream(SampleStream),
}

impl From<Vec<PreparedSample>> for SampleSource {
    fn from(samples: Vec<PreparedSample>) -> Self {
        SampleSource::Ready(samples)
    }
}

/// The fail-fast monitor: attempts failed with a configuration error while none succeeded.
#[derive(Default)]
struct Health {
    succeeded: bool,
    cause: String,
    first_error: String,
    streak: usize,
    tripped: Option<Stopped>,
}

struct Shared {
    run_hash: String,
    simulator: Predictor,
    options: RunnerOptions,
    writes: mpsc::Sender<WriteOp>,
    cache: Option<CacheReader>,
    rpm: Option<DefaultDirectRateLimiter>,
    tpm: Option<(DefaultDirectRateLimiter, u32)>,
    permits: Semaphore,
    /// Requests rendered ahead of their slot, at most.
    ahead: Semaphore,
    /// Set once the run must stop; tasks watch it.
    stop: watch::Sender<bool>,
    /// The store's writer is gone: no write can be committed any more.
    store_failed: AtomicBool,
    /// Wakes the driving loop when a task decides the run must stop.
    wake: Notify,
    health: Mutex<Health>,
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
    async fn cached_completion(
        &self,
        idx: usize,
        key: &str,
        status: Option<u16>,
    ) -> Option<Completion> {
        let response = self.cache.as_ref()?.get(key).ok()??;
        let completion = parse_completion(&response).ok()?;
        let mut row = self.attempt_row(idx, key, 0, 0.0, "cache");
        row.status = status;
        row.prompt_tokens = completion.usage.map(|u| u.prompt_tokens);
        row.completion_tokens = completion.usage.map(|u| u.completion_tokens);
        self.send(WriteOp::Attempt(row)).await;
        Some(completion)
    }

    /// Hands a write to the store's writer, waiting while its queue is full. If the writer is
    /// gone, the run stops: nothing sent from now on could be stored.
    async fn send(&self, op: WriteOp) {
        if self.writes.send(op).await.is_err() && !self.store_failed.swap(true, Ordering::SeqCst) {
            self.request_stop();
        }
    }

    fn request_stop(&self) {
        self.stop.send_replace(true);
        self.wake.notify_one();
    }

    fn is_stopping(&self) -> bool {
        *self.stop.borrow()
    }

    /// Resolves once the run must stop.
    async fn stopping(&self) {
        let mut watch = self.stop.subscribe();
        let _ = watch.wait_for(|stop| *stop).await;
    }

    fn health_ok(&self) {
        self.health
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .succeeded = true;
    }

    fn health_failed(&self, error: &AttemptError) {
        let limit = self.options.fail_fast_after;
        let mut health = self.health.lock().unwrap_or_else(|p| p.into_inner());
        if limit == 0 || health.succeeded || health.tripped.is_some() {
            return;
        }
        if !error.is_configuration_error() {
            health.streak = 0;
            return;
        }
        let cause = crate::openai::cause_of(&error.message);
        if health.streak == 0 || health.cause != cause {
            health.cause = cause;
            health.first_error = error.message.clone();
            health.streak = 0;
        }
        health.streak += 1;
        if health.streak >= limit {
            health.tripped = Some(Stopped::EndpointFailing {
                cause: health.cause.clone(),
                first_error: health.first_error.clone(),
                attempts: health.streak,
            });
            drop(health);
            self.request_stop();
        }
    }
}

/// How a sample's task ended.
enum TaskEnd {
    Handled {
        cm_strict: bool,
        failed: bool,
        parse_failure: bool,
    },
    /// Stopped before its answer was stored.
    Abandoned,
}

/// Reads a whole [`SampleStream`]: the samples, or the file's located error.
async fn read_stream(stream: SampleStream) -> Result<Vec<PreparedSample>, RunError> {
    let SampleStream { mut items } = stream;
    let mut samples = Vec::new();
    while let Some(item) = items.recv().await {
        match item {
            StreamItem::Sample { sample, .. } => samples.push(*sample),
            StreamItem::Failed(error) => {
                return Err(RunError::Benchmark {
                    message: error.to_string(),
                    started: 0,
                })
            }
        }
    }
    if samples.is_empty() {
        return Err(RunError::Task(
            "reading the benchmark stopped before its first sample".into(),
        ));
    }
    Ok(samples)
}

/// Runs (or resumes) a run and commits every sample as it finishes or fails.
///
/// With [`SampleSource::Stream`] and no stored run, requests start with the first samples read;
/// the run is stored once the last sample is read (the writer holds the rows of samples that
/// finish earlier). If the file turns out to be invalid, the run stops, nothing of it is stored
/// and the result is [`RunError::Benchmark`]. A resumed run reads the whole stream first.
pub async fn run(request: RunRequest) -> Result<RunOutcome, RunError> {
    let started = Instant::now();
    let RunRequest {
        store: store_path,
        system,
        config,
        bench_path,
        samples,
        simulator,
        options,
        fresh,
        prices,
        stop,
        mut events,
    } = request;
    let mut emit = |event: RunEvent| {
        if let Some(sink) = events.as_mut() {
            sink(&event);
        }
    };
    let mut store = Store::open(&store_path)?;
    let hash = config.hash();
    if fresh {
        store.delete_run(&hash)?;
    }
    let existing = store.run_by_hash(&hash)?;
    // Only a new run can start before its samples are all read.
    let samples = match (samples, existing.is_some()) {
        (SampleSource::Stream(stream), true) => SampleSource::Ready(read_stream(stream).await?),
        (samples, _) => samples,
    };
    let mut record = None;
    let mut resumed = false;
    let mut done = std::collections::HashSet::new();
    let (mut pending_samples, mut stream) = match samples {
        SampleSource::Ready(mut samples) => {
            let created = match existing {
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
                    resumed = true;
                    existing
                }
                None => {
                    // Only the score of a missing prediction up front (it needs no work);
                    // baselines are scored by the sample tasks.
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
                    store.create_run(&system, &config, &bench_path, prices.as_ref(), &pending)?
                }
            };
            record = Some(created);
            done = store
                .results(&hash)?
                .into_iter()
                .filter(|r| r.status == SampleStatus::Done)
                .map(|r| r.idx)
                .collect();
            let pending: Vec<(usize, PreparedSample)> = samples
                .into_iter()
                .enumerate()
                .filter(|(idx, _)| !done.contains(idx))
                .collect();
            (pending, None)
        }
        SampleSource::Stream(stream) => (Vec::new(), Some(stream)),
    };
    let already_done = done.len();
    drop(store);

    let writer = StoreWriter::spawn(&store_path)?;
    let cache = if options.use_cache
        && (matches!(simulator, Predictor::OpenAi { .. }) || is_local(&simulator))
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
    let Some(writes) = writer.sender() else {
        return Err(RunError::Task("the store writer has no queue".into()));
    };
    if stream.is_some() {
        // Sent before any task exists, so every row of the run is held until it is created.
        let _ = writes
            .send(WriteOp::HoldRun {
                run_hash: hash.clone(),
            })
            .await;
    }
    let shared = Arc::new(Shared {
        run_hash: hash.clone(),
        simulator,
        rpm: limiter(options.requests_per_minute),
        tpm: limiter(options.tokens_per_minute)
            .map(|l| (l, options.tokens_per_minute.unwrap_or(1))),
        permits: Semaphore::new(if local { 1 } else { options.concurrency.max(1) }),
        ahead: Semaphore::new(if local {
            1
        } else {
            options.concurrency.max(1) * 2
        }),
        writes,
        cache,
        options,
        stop: watch::Sender::new(false),
        store_failed: AtomicBool::new(false),
        wake: Notify::new(),
        health: Mutex::new(Health::default()),
    });

    let mut todo = pending_samples.len();
    if stream.is_none() {
        emit(RunEvent::Started {
            todo,
            already_done,
            resumed,
        });
    }
    if local {
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
    let mut tasks = JoinSet::new();
    for (idx, sample) in pending_samples {
        let shared = Arc::clone(&shared);
        tasks.spawn(async move { run_sample(&shared, idx, sample).await });
    }

    let (mut handled, mut correct, mut failed, mut parse_failures) = (0usize, 0, 0, 0);
    let mut interrupted = false;
    let mut stop_signal: StopSignal = stop.unwrap_or_else(|| Box::pin(std::future::pending()));
    let mut stopping = false;
    // Streaming: the rows of the samples read so far, and the file's error if it has one.
    let mut streamed: Vec<(String, String)> = Vec::new();
    let mut invalid: Option<String> = None;
    let mut spawned = 0usize;
    loop {
        tokio::select! {
            item = async { stream.as_mut()?.items.recv().await }, if stream.is_some() => {
                match item {
                    Some(StreamItem::Sample { sample, missing_score }) => {
                        let idx = streamed.len();
                        streamed.push((sample.transition().id.clone(), missing_score));
                        // A stopping run reads on (the run is stored with every sample) but
                        // sends nothing more.
                        if !stopping {
                            spawned += 1;
                            let shared = Arc::clone(&shared);
                            tasks.spawn(async move { run_sample(&shared, idx, *sample).await });
                        }
                    }
                    Some(StreamItem::Failed(error)) => {
                        invalid = Some(error.to_string());
                        stream = None;
                        stopping = true;
                        shared.request_stop();
                        emit(RunEvent::Stopping { reason: "the benchmark file is not valid".into() });
                    }
                    None => {
                        stream = None;
                        if streamed.is_empty() {
                            invalid = Some("reading the benchmark stopped before its first sample".into());
                            stopping = true;
                            shared.request_stop();
                        } else {
                            todo = spawned;
                            shared.send(WriteOp::CreateRun(Box::new(NewRun {
                                system: system.clone(),
                                config: config.clone(),
                                bench_path: bench_path.clone(),
                                prices: prices.clone(),
                                pending: std::mem::take(&mut streamed),
                            }))).await;
                            emit(RunEvent::Started { todo, already_done, resumed });
                            emit(RunEvent::Progress { handled, todo, correct, failed, parse_failures });
                        }
                    }
                }
            }
            next = tasks.join_next(), if !(stream.is_some() && tasks.is_empty()) => {
                let Some(joined) = next else { break };
                let end = joined.map_err(|e| RunError::Task(e.to_string()))?;
                if let TaskEnd::Handled { cm_strict, failed: f, parse_failure } = end {
                    handled += 1;
                    correct += usize::from(cm_strict);
                    failed += usize::from(f);
                    parse_failures += usize::from(parse_failure);
                    // Until the last sample is read, the number to do is not known.
                    if stream.is_none() {
                        emit(RunEvent::Progress { handled, todo, correct, failed, parse_failures });
                    }
                }
            }
            _ = &mut stop_signal, if !stopping => {
                interrupted = true;
                stopping = true;
                shared.request_stop();
                emit(RunEvent::Stopping { reason: "interrupted".into() });
            }
            // The writer closes its queue when it fails: stop even if no task is sending.
            () = shared.writes.closed(), if !stopping => {
                stopping = true;
                shared.store_failed.store(true, Ordering::SeqCst);
                shared.request_stop();
                emit(RunEvent::Stopping { reason: "the run store stopped accepting writes".into() });
            }
            _ = shared.wake.notified(), if !stopping => {
                stopping = true;
                let reason = if shared.store_failed.load(Ordering::SeqCst) {
                    "the run store stopped accepting writes".to_owned()
                } else {
                    match &shared.health.lock().unwrap_or_else(|p| p.into_inner()).tripped {
                        Some(Stopped::EndpointFailing { cause, attempts, .. }) => {
                            format!("the first {attempts} requests all failed: {cause}")
                        }
                        _ => "stopping".to_owned(),
                    }
                };
                emit(RunEvent::Stopping { reason });
            }
        }
    }
    let tripped = shared
        .health
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .tripped
        .clone();
    drop(shared);
    // Everything handed to the writer is committed (or, if the writer failed, as much as
    // could be): its error wins over any other outcome. The rows of a run never created are
    // dropped with the writer.
    writer.finish()?;
    if let Some(message) = invalid {
        return Err(RunError::Benchmark {
            message,
            started: spawned,
        });
    }
    let record = match Store::open(&store_path)?.run_by_hash(&hash)? {
        Some(stored) => stored,
        None => record.ok_or_else(|| StoreError::Corrupt {
            path: store_path.clone(),
            message: format!("run {hash} is missing after it was created"),
        })?,
    };
    let stopped = if interrupted {
        Some(Stopped::Interrupted)
    } else {
        tripped
    };
    Ok(RunOutcome {
        record,
        resumed,
        processed: handled,
        failed,
        already_done,
        stopped,
        wall: started.elapsed(),
    })
}

/// Scores the null and oracle baselines on a sample and stores them.
async fn store_baselines(shared: &Shared, idx: usize, sample: &mut PreparedSample) {
    let mut score = |baseline: Baseline| {
        let prediction = baseline.predict(sample.transition());
        serde_json::to_string(&sample.score(&prediction, None)).unwrap_or_default()
    };
    let null = score(Baseline::Null);
    let oracle = score(Baseline::Oracle);
    shared
        .send(WriteOp::Baselines {
            run_hash: shared.run_hash.clone(),
            idx,
            null,
            oracle,
        })
        .await;
}

async fn run_sample(shared: &Shared, idx: usize, mut sample: PreparedSample) -> TaskEnd {
    if shared.is_stopping() {
        return TaskEnd::Abandoned;
    }
    let answer = tokio::select! {
        biased;
        () = shared.stopping() => return TaskEnd::Abandoned,
        answer = async {
            // Render the request while waiting for a slot (at most twice the concurrency
            // ahead, which bounds the bodies held in memory), so a freed slot sends at once.
            let _ahead = shared.ahead.acquire().await;
            let request = http_request(shared, &sample);
            let _permit = shared.permits.acquire().await;
            if shared.is_stopping() {
                return None;
            }
            let start = Instant::now();
            let answer = match (&shared.simulator, request) {
                (Predictor::OpenAi { model, .. }, Some(request)) => {
                    let sample = &mut sample;
                    let (answer, ()) = tokio::join!(
                        predict_http(shared, idx, model, request),
                        async {
                            // Yield first, so the request leaves before this CPU work.
                            tokio::task::yield_now().await;
                            store_baselines(shared, idx, sample).await;
                        }
                    );
                    (answer, true)
                }
                (_, request) => (predict(shared, idx, &sample, request).await, false),
            };
            Some((answer, start))
        } => answer,
    };
    let Some((((prediction, usage, attempts, cached, kind, text), baselines_stored), start)) =
        answer
    else {
        return TaskEnd::Abandoned;
    };
    // A request that ended in an error is a failed sample, also when the run is stopping
    // (its last attempt failed on its own); only requests cut short by the stop are abandoned.
    let failed = matches!(prediction, Prediction::ApiError(_));
    // The slot is free: let the task waiting for it send its request before this one scores
    // (scoring and the baselines are CPU work that can wait; a request that waits for a slot
    // costs wall time).
    tokio::task::yield_now().await;
    let score = sample.score(&prediction, usage);
    // The baselines are scored while the request is in flight (HTTP) or else here, after it,
    // never before it: the first requests of a run leave at once.
    if !baselines_stored {
        store_baselines(shared, idx, &mut sample).await;
    }
    // The sample is dropped here, in its task, so freeing large states is spread over the
    // runtime's threads instead of the thread driving the run.
    drop(sample);
    let end = TaskEnd::Handled {
        cm_strict: score.cm_strict,
        failed,
        parse_failure: score.parse_failure.is_some(),
    };
    shared
        .send(WriteOp::Result {
            run_hash: shared.run_hash.clone(),
            row: ResultRow {
                idx,
                sample_id: score.sample_id.clone(),
                status: if failed {
                    SampleStatus::Failed
                } else {
                    SampleStatus::Done
                },
                prediction_kind: Some(kind.to_owned()),
                prediction: Some(text),
                latency_ms: Some(elapsed_ms(start)),
                attempts,
                cached,
                score: serde_json::to_string(&score).unwrap_or_default(),
            },
        })
        .await;
    end
}

/// A rendered chat-completions request: body, content key (cache and audit), token estimate.
#[derive(Default)]
struct HttpRequest {
    body: String,
    key: String,
    estimate: usize,
}

/// Renders the HTTP request of a sample (`None` for simulators that send none).
fn http_request(shared: &Shared, sample: &PreparedSample) -> Option<HttpRequest> {
    let Predictor::OpenAi { model, template } = &shared.simulator else {
        return None;
    };
    let t = sample.transition();
    let prompt = template.render_eval(&t.env_code, &t.config_before, &t.action);
    let body = model.body(&prompt, None, None).to_string();
    let key = sha256_hex(format!("{}\n{}", model.url(), body).as_bytes());
    let estimate = body.len() / 4 + model.decoding().max_tokens.unwrap_or(0) as usize;
    Some(HttpRequest {
        body,
        key,
        estimate,
    })
}

/// The simulator's answer for one sample: prediction, usage, attempts, cache flag, stored kind
/// and stored text.
async fn predict(
    shared: &Shared,
    idx: usize,
    sample: &PreparedSample,
    request: Option<HttpRequest>,
) -> (Prediction, Option<Usage>, u32, bool, &'static str, String) {
    match &shared.simulator {
        Predictor::Baseline(baseline) => {
            let p = baseline.predict(sample.transition());
            let text = match &p {
                Prediction::Parsed(v) => v.to_string(),
                _ => String::new(),
            };
            (p, None, 0, false, "parsed", text)
        }
        Predictor::Replay(predictions) => {
            let (p, usage) = predictions
                .get(idx)
                .cloned()
                .unwrap_or((Prediction::Missing, None));
            let (kind, text) = prediction_text(&p);
            (p, usage, 0, false, kind, text)
        }
        Predictor::Batch(items) => {
            let (answer, body) = items.get(idx).cloned().unwrap_or((None, None));
            let key = body
                .as_ref()
                .map(|b| sha256_hex(format!("batch\n{b}").as_bytes()));
            if let (Some(key), Some(body)) = (&key, body) {
                shared
                    .send(WriteOp::Body {
                        key: key.clone(),
                        body,
                    })
                    .await;
            }
            match answer {
                Some(answer) => {
                    let ok = matches!(answer.prediction, Prediction::Raw(_));
                    shared
                        .send(WriteOp::Attempt(AttemptRow {
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
                        }))
                        .await;
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
        Predictor::Local {
            model,
            model_key,
            template,
        } => {
            let t = sample.transition();
            let prompt = template.render_eval(&t.env_code, &t.config_before, &t.action);
            let (result, attempts, cached) =
                complete_local(shared, idx, model, model_key, prompt).await;
            prediction_of(result, attempts, cached)
        }
        Predictor::OpenAi { model, .. } => {
            let request = match request {
                Some(request) => request,
                None => http_request(shared, sample).unwrap_or_default(),
            };
            predict_http(shared, idx, model, request).await
        }
    }
}

/// The answer to a rendered HTTP request (see [`predict`]).
async fn predict_http(
    shared: &Shared,
    idx: usize,
    model: &OpenAiText,
    request: HttpRequest,
) -> (Prediction, Option<Usage>, u32, bool, &'static str, String) {
    let HttpRequest {
        body,
        key,
        estimate,
    } = request;
    let (result, attempts, cached) = complete(shared, idx, model, &body, &key, estimate).await;
    let result = result.map_err(|e| {
        let plural = if attempts == 1 { "" } else { "s" };
        format!("{e} (after {attempts} attempt{plural})")
    });
    prediction_of(result, attempts, cached)
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
        let prediction = if row.status != SampleStatus::Pending {
            stored_prediction(row.prediction_kind.as_deref(), row.prediction.as_deref())
        } else {
            Prediction::Missing
        };
        let score = sample.score(&prediction, usage);
        scores.push((
            row.idx,
            serde_json::to_string(&score).unwrap_or_default(),
            None,
        ));
    }
    // Baselines stored by an older envsim are rescored too, per sample.
    for (idx, stored) in store.baselines(hash)?.into_iter().enumerate() {
        let Some((null, oracle)) = stored else {
            continue;
        };
        if !(is_legacy_score(&null) || is_legacy_score(&oracle)) {
            continue;
        }
        let Some(sample) = samples.get_mut(idx) else {
            continue;
        };
        let mut score = |baseline: Baseline| {
            let prediction = baseline.predict(sample.transition());
            serde_json::to_string(&sample.score(&prediction, None)).unwrap_or_default()
        };
        let fresh = Some((score(Baseline::Null), score(Baseline::Oracle)));
        match scores.iter_mut().find(|(i, _, _)| *i == idx) {
            Some(entry) => entry.2 = fresh,
            None => {
                let current = store
                    .results(hash)?
                    .into_iter()
                    .find(|r| r.idx == idx)
                    .map(|r| r.score)
                    .unwrap_or_default();
                scores.push((idx, current, fresh));
            }
        }
    }
    if scores.is_empty() {
        return Ok(());
    }
    store.replace_scores(hash, &scores)
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

fn is_local(simulator: &Predictor) -> bool {
    #[cfg(feature = "local")]
    if let Predictor::Local { .. } = simulator {
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
    model: &envsim_llm::LocalText,
    model_key: &str,
    prompt: envsim_core::prompt::Prompt,
) -> (Result<Completion, String>, u32, bool) {
    let generation = model.generation();
    // The engine is part of the request: the two engines' outputs differ in the last digits
    // of the logits, so a response cached from one never answers for the other.
    let body = serde_json::json!({
        "model": model_key,
        "engine": model.engine_name(),
        "messages": [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}],
        "max_tokens": generation.max_tokens,
        "temperature": generation.temperature,
        "seed": generation.seed,
        "stop": generation.stop,
        "stop_after_object": generation.stop_after_object,
    })
    .to_string();
    let key = sha256_hex(format!("local\n{body}").as_bytes());
    shared
        .send(WriteOp::Body {
            key: key.clone(),
            body,
        })
        .await;
    let audit = |attempt: u32, latency_ms: f64, outcome: &str| {
        shared.attempt_row(idx, &key, attempt, latency_ms, outcome)
    };
    if let Some(completion) = shared.cached_completion(idx, &key, None).await {
        return (Ok(completion), 0, true);
    }
    let start = Instant::now();
    match model.generate(prompt, generation.clone()).await {
        Ok(local) => {
            let raw = local.to_response_json(model_key);
            let mut row = audit(1, elapsed_ms(start), "ok");
            row.prompt_tokens = Some(local.usage.prompt_tokens);
            row.completion_tokens = Some(local.usage.completion_tokens);
            row.response = Some(raw.clone());
            shared.send(WriteOp::Attempt(row)).await;
            if shared.cache.is_some() {
                shared.send(WriteOp::Cache { key, response: raw }).await;
            }
            let completion = Completion {
                content: local.content,
                usage: Some(local.usage),
                finish_reason: Some(local.finish_reason),
            };
            (Ok(completion), 1, false)
        }
        Err(error) => {
            let error = format!("local model: {}", error.message);
            let mut row = audit(1, elapsed_ms(start), "local_error");
            row.error = Some(error.clone());
            shared.send(WriteOp::Attempt(row)).await;
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
    model: &OpenAiText,
    body: &str,
    key: &str,
    token_estimate: usize,
) -> (Result<Completion, AttemptError>, u32, bool) {
    let audit = |attempt: u32, latency_ms: f64, outcome: &str| {
        shared.attempt_row(idx, key, attempt, latency_ms, outcome)
    };
    shared
        .send(WriteOp::Body {
            key: key.to_owned(),
            body: body.to_owned(),
        })
        .await;
    if let Some(completion) = shared.cached_completion(idx, key, Some(200)).await {
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
        let result = model.attempt(body).await;
        let latency = elapsed_ms(start);
        match result {
            Ok((completion, raw)) => {
                let mut row = audit(attempt, latency, "ok");
                row.status = Some(200);
                row.prompt_tokens = completion.usage.map(|u| u.prompt_tokens);
                row.completion_tokens = completion.usage.map(|u| u.completion_tokens);
                row.response = Some(raw.clone());
                shared.send(WriteOp::Attempt(row)).await;
                shared.health_ok();
                if shared.cache.is_some() {
                    shared
                        .send(WriteOp::Cache {
                            key: key.to_owned(),
                            response: raw,
                        })
                        .await;
                }
                return (Ok(completion), attempt, false);
            }
            Err(error) => {
                let mut row = audit(attempt, latency, error.outcome());
                row.status = error.status;
                row.error = Some(error.message.clone());
                row.response = error.body.clone();
                shared.send(WriteOp::Attempt(row)).await;
                shared.health_failed(&error);
                if !error.retryable() || attempt > options.max_retries || shared.is_stopping() {
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

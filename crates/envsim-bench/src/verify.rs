//! `envsim bench verify`: a benchmark must be replayable from its own file. Every sample's call
//! is executed again from its stored `config_before` (with the record's seed and clock) and
//! must give the stored observation and `config_after`. A sample that does not names what
//! differs — the usual cause is a before-state that is not the state of the constructed
//! instance (a raw state file lacking attributes the constructor creates), which turns
//! read-only calls into changes.

use crate::slice_check::{execute, job, SliceCheckError, SliceJob};
use envsim_core::diff::fine_diff;
use envsim_core::formats::{FormatError, Record, RecordReader};
use envsim_exec::package::EnvPackage;
use envsim_exec::{ExecError, Executor};
use serde::Serialize;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Why a benchmark could not be verified (as opposed to: it was, and some samples differ).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The file cannot be read as a benchmark.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A sample cannot be executed (no code, no class).
    #[error(transparent)]
    Job(#[from] SliceCheckError),
    /// The executor failed (no worker, protocol).
    #[error(transparent)]
    Exec(#[from] ExecError),
}

/// How a replayed sample differs from its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mismatch {
    /// The observation differs.
    Observation,
    /// The observation agrees, the state after differs.
    State,
}

/// One sample that does not replay.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// Sample id.
    pub sample: String,
    /// Environment id ("" when unknown).
    pub env: String,
    /// The tool called.
    pub tool: String,
    /// What differs.
    pub mismatch: Mismatch,
    /// How: both observations, or the first changes between the stored and the replayed state.
    pub detail: String,
}

/// The result of replaying a benchmark.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VerifyReport {
    /// Samples replayed.
    pub checked: usize,
    /// Samples that gave their stored observation and state after.
    pub identical: usize,
    /// The others, in sample order.
    pub findings: Vec<Finding>,
}

impl VerifyReport {
    /// True when every sample replayed exactly.
    pub fn passed(&self) -> bool {
        self.findings.is_empty()
    }
}

/// How many state differences a finding quotes.
const QUOTED_CHANGES: usize = 3;

/// The observation text a record stores (the `str()` of the return value, or the executor's
/// `Error: …` for a call that raised).
fn stored_observation(observation: &Value) -> String {
    match observation {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Replays one sample; `Ok(None)` when it reproduces its record. Infrastructure failures (the
/// worker cannot start or speaks nonsense) are errors: they say nothing about the sample.
pub async fn verify_one(executor: &Executor, job: &SliceJob) -> Result<Option<Finding>, ExecError> {
    let t = &job.transition;
    let (observation, state_after) = match execute(executor, job, &t.config_before, false).await {
        Ok(outcome) => (outcome.observation, outcome.state_after),
        Err(e @ (ExecError::Spawn(_) | ExecError::Protocol(_))) => return Err(e),
        // A call that raised leaves the state as the code left it (as `bench build` records).
        Err(e) => {
            let after = e
                .state_after()
                .cloned()
                .unwrap_or_else(|| t.config_before.clone());
            (format!("Error: {e}"), after)
        }
    };
    let finding = |mismatch, detail| Finding {
        sample: t.id.clone(),
        env: t.env_id.clone().unwrap_or_default(),
        tool: t.action.name.clone(),
        mismatch,
        detail,
    };
    let expected = stored_observation(&t.observation);
    if observation != expected {
        return Ok(Some(finding(
            Mismatch::Observation,
            format!("stored {expected:?}, replayed {observation:?}"),
        )));
    }
    if state_after != t.config_after {
        let changes = fine_diff(&t.config_after, &state_after);
        let quoted: Vec<String> = changes
            .iter()
            .take(QUOTED_CHANGES)
            .map(|c| {
                format!(
                    "{}: stored {}, replayed {}",
                    c.pointer,
                    c.before.map_or_else(|| "(absent)".into(), Value::to_string),
                    c.after.map_or_else(|| "(absent)".into(), Value::to_string)
                )
            })
            .collect();
        let more = changes.len().saturating_sub(QUOTED_CHANGES);
        let mut detail = quoted.join("; ");
        if more > 0 {
            detail.push_str(&format!("; and {more} more"));
        }
        return Ok(Some(finding(Mismatch::State, detail)));
    }
    Ok(None)
}

/// Replays a benchmark's records, at most `window` samples in flight ([`verify_stream`] over
/// records already read).
pub async fn verify_records(
    executor: Arc<Executor>,
    source: &str,
    records: Vec<Record>,
    packages: &HashMap<String, EnvPackage>,
    window: usize,
) -> Result<VerifyReport, VerifyError> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Record, std::convert::Infallible>>(1);
    let feed = tokio::spawn(async move {
        for record in records {
            if tx.send(Ok(record)).await.is_err() {
                break;
            }
        }
    });
    let result = verify_stream(executor, source, &mut rx, packages, window).await;
    drop(rx);
    let _ = feed.await;
    match result {
        Ok(result) => result,
        Err(never) => match never {},
    }
}

/// Replays a benchmark's records as they arrive from `records` (a file read as a stream), at
/// most `window` samples in flight: only those samples' states are held parsed, however large
/// the states and the file (a compact file stores each large state once; its samples are
/// materialised one at a time). The verdicts are kept, the samples dropped.
///
/// The outer error is the stream's own (the file cannot be read or is not valid JSON): it comes
/// first, as it would from a reader of the whole file, even when a sample before it failed (the
/// rest of the stream is read to find it). Samples in flight when the stream fails are waited
/// for and their verdicts dropped. The inner result is the replay's.
pub async fn verify_stream<E>(
    executor: Arc<Executor>,
    source: &str,
    records: &mut tokio::sync::mpsc::Receiver<Result<Record, E>>,
    packages: &HashMap<String, EnvPackage>,
    window: usize,
) -> Result<Result<VerifyReport, VerifyError>, E> {
    let mut in_flight = VecDeque::new();
    let replayed = replay(
        executor,
        source,
        records,
        packages,
        window.max(1),
        &mut in_flight,
    )
    .await;
    match replayed {
        Ok(report) => Ok(Ok(report)),
        Err(Stop::Stream(error)) => {
            // Nothing more to report; the samples started still finish, so no call is cut off.
            while let Some(handle) = in_flight.pop_front() {
                let _ = handle.await;
            }
            Err(error)
        }
        // A file error further on is what the whole-file reader would have reported.
        Err(Stop::Replay(error)) => match rest_error(records).await {
            Some(error) => Err(error),
            None => Ok(Err(error)),
        },
    }
}

/// The error a stream of records holds further on, if any (the records are dropped).
async fn rest_error<E>(records: &mut tokio::sync::mpsc::Receiver<Result<Record, E>>) -> Option<E> {
    while let Some(item) = records.recv().await {
        if let Err(error) = item {
            return Some(error);
        }
    }
    None
}

/// Why [`replay`] stopped early.
enum Stop<E> {
    /// The stream of records failed.
    Stream(E),
    /// A record or a replay failed.
    Replay(VerifyError),
}

type Replay = tokio::task::JoinHandle<Result<Option<Finding>, ExecError>>;

async fn replay<E>(
    executor: Arc<Executor>,
    source: &str,
    records: &mut tokio::sync::mpsc::Receiver<Result<Record, E>>,
    packages: &HashMap<String, EnvPackage>,
    window: usize,
    in_flight: &mut VecDeque<Replay>,
) -> Result<VerifyReport, Stop<E>> {
    let mut reader = RecordReader::new(source);
    let mut codes = HashMap::new();
    let mut report = VerifyReport::default();
    async fn settle(handle: Replay, report: &mut VerifyReport) -> Result<(), VerifyError> {
        let result = handle
            .await
            .map_err(|e| ExecError::Protocol(format!("a replay task failed: {e}")))?;
        report.checked += 1;
        match result? {
            None => report.identical += 1,
            Some(finding) => report.findings.push(finding),
        }
        Ok(())
    }
    let fail = |e: VerifyError| Stop::Replay(e);
    while let Some(record) = records.recv().await {
        let record = record.map_err(Stop::Stream)?;
        // What a job reads besides the states (class name, seed, clock); the states are moved
        // into the transitions.
        let meta = without_states(&record.value);
        for t in reader.read(record).map_err(|e| fail(e.into()))? {
            let job = job(t, &meta, packages, &mut codes).map_err(|e| fail(e.into()))?;
            if in_flight.len() >= window {
                if let Some(handle) = in_flight.pop_front() {
                    settle(handle, &mut report).await.map_err(fail)?;
                }
            }
            let executor = Arc::clone(&executor);
            in_flight.push_back(tokio::spawn(
                async move { verify_one(&executor, &job).await },
            ));
        }
    }
    while let Some(handle) = in_flight.pop_front() {
        settle(handle, &mut report).await.map_err(fail)?;
    }
    reader.finish().map_err(|e| fail(e.into()))?;
    Ok(report)
}

/// A record without its (possibly large) states: top level and trajectory steps.
fn without_states(record: &Value) -> Value {
    const STATES: [&str; 4] = [
        "config_before",
        "config_after",
        "config_before_ref",
        "config_after_ref",
    ];
    let strip = |map: &serde_json::Map<String, Value>| -> serde_json::Map<String, Value> {
        map.iter()
            .filter(|(k, _)| !STATES.contains(&k.as_str()) && k.as_str() != "step_detail")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    match record {
        Value::Object(map) => {
            let mut out = strip(map);
            if let Some(Value::Array(steps)) = map.get("trajectory") {
                let steps = steps
                    .iter()
                    .map(|s| match s {
                        Value::Object(step) => Value::Object(strip(step)),
                        other => other.clone(),
                    })
                    .collect();
                out.insert("trajectory".into(), Value::Array(steps));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

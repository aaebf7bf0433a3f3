//! The run store: one SQLite file (WAL) holding runs, per-sample results, an audit log of every
//! request, request bodies (content-addressed) and the response cache.
//!
//! Crash safety: every finished sample is committed by the writer thread as soon as it arrives
//! (WAL, `synchronous=NORMAL`: a committed transaction survives the process being killed), so
//! `kill -9` loses only requests that were in flight. A run's rows are created up front with
//! status `pending` and the score of a missing prediction, so a partial run still reports over
//! the whole benchmark (unfinished samples count as wrong). A sample whose request failed after
//! its retries is stored as `failed` (scored wrong, with the error) and is not finished: a rerun
//! resumes exactly the `pending` and `failed` ones. The null and oracle baselines are stored per
//! sample (`sample_baselines`), written by the sample's task before its request.
//!
//! Read-only commands open the store with [`Store::open_existing`], which never creates a file.

use crate::config::RunConfig;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use tokio::sync::mpsc;

/// A store error, naming the database file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("run store {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The cause.
        source: rusqlite::Error,
    },
    /// Stored data does not read back (written by an incompatible version, or edited).
    #[error("run store {path}: {message}")]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// No run matches.
    #[error("{0}")]
    NotFound(String),
    /// A read-only command was pointed at a store that does not exist.
    #[error("no run store at {0}: run `envsim eval` first, or point --store (ENVSIM_STORE) at an existing store")]
    Missing(PathBuf),
    /// The database directory could not be created.
    #[error("cannot create {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// 2: per-sample baselines (`sample_baselines`) and the `failed` status.
const SCHEMA_VERSION: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runs (
    hash TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    system TEXT NOT NULL,
    config TEXT NOT NULL,
    bench_path TEXT NOT NULL,
    samples INTEGER NOT NULL,
    prices TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS runs_by_id ON runs(run_id);
CREATE TABLE IF NOT EXISTS run_baselines (
    run_hash TEXT PRIMARY KEY,
    null_scores TEXT NOT NULL,
    oracle_scores TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sample_baselines (
    run_hash TEXT NOT NULL,
    idx INTEGER NOT NULL,
    null_score TEXT NOT NULL,
    oracle_score TEXT NOT NULL,
    PRIMARY KEY (run_hash, idx)
);
CREATE TABLE IF NOT EXISTS results (
    run_hash TEXT NOT NULL,
    idx INTEGER NOT NULL,
    sample_id TEXT NOT NULL,
    status TEXT NOT NULL,
    prediction_kind TEXT,
    prediction TEXT,
    latency_ms REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    cached INTEGER NOT NULL DEFAULT 0,
    score TEXT NOT NULL,
    finished_at TEXT,
    PRIMARY KEY (run_hash, idx)
);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    run_hash TEXT NOT NULL,
    idx INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    latency_ms REAL NOT NULL,
    status INTEGER,
    outcome TEXT NOT NULL,
    error TEXT,
    body_key TEXT,
    response TEXT,
    prompt_tokens INTEGER,
    completion_tokens INTEGER
);
CREATE INDEX IF NOT EXISTS requests_by_run ON requests(run_hash, idx);
CREATE TABLE IF NOT EXISTS bodies (key TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cache (
    key TEXT PRIMARY KEY,
    response TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
";

/// A run as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    /// Full hash of the config.
    pub hash: String,
    /// Short id (12 hex digits).
    pub run_id: String,
    /// Display name of the simulator.
    pub system: String,
    /// The configuration.
    pub config: RunConfig,
    /// Benchmark path as given when the run was created.
    pub bench_path: String,
    /// Number of samples.
    pub samples: usize,
    /// Price table entry used for cost (`{"input_per_mtok": x, "output_per_mtok": y}`).
    pub prices: Option<Value>,
    /// Creation time (UTC, RFC 3339).
    pub created_at: String,
    /// Last update (UTC, RFC 3339).
    pub updated_at: String,
}

/// A rescored sample for [`Store::replace_scores`]: position, score JSON, and the null and
/// oracle score JSON when they are replaced too.
pub type Rescored = (usize, String, Option<(String, String)>);

/// Where a sample stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleStatus {
    /// Not run yet (or interrupted).
    Pending,
    /// Finished: the simulator answered (the answer may still be wrong or unparseable).
    Done,
    /// The request failed after its retries: scored wrong, retried by the next run.
    Failed,
}

impl SampleStatus {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            SampleStatus::Pending => "pending",
            SampleStatus::Done => "done",
            SampleStatus::Failed => "failed",
        }
    }

    fn parse(text: &str) -> SampleStatus {
        match text {
            "done" => SampleStatus::Done,
            "failed" => SampleStatus::Failed,
            _ => SampleStatus::Pending,
        }
    }
}

/// One sample's row.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultRow {
    /// Position in the benchmark.
    pub idx: usize,
    /// The sample id.
    pub sample_id: String,
    /// Pending, done or failed.
    pub status: SampleStatus,
    /// `raw`, `parsed`, `api_error` or `missing`.
    pub prediction_kind: Option<String>,
    /// Raw model text, parsed JSON, or the error message.
    pub prediction: Option<String>,
    /// Wall time of the sample including retries, in ms.
    pub latency_ms: Option<f64>,
    /// Requests made (0 for cache hits and built-in backends).
    pub attempts: u32,
    /// Answered from the response cache.
    pub cached: bool,
    /// The score as JSON (`SampleScore`).
    pub score: String,
}

/// One request attempt, for the audit log.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptRow {
    /// Run hash.
    pub run_hash: String,
    /// Sample position.
    pub idx: usize,
    /// 1-based attempt number (0 for a cache hit).
    pub attempt: u32,
    /// Latency in ms.
    pub latency_ms: f64,
    /// HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// `ok`, `cache`, `http_error`, `timeout`, `connect`, `decode`, `rate_limited`.
    pub outcome: String,
    /// Error detail.
    pub error: Option<String>,
    /// Key of the request body in `bodies`.
    pub body_key: Option<String>,
    /// Raw response body text.
    pub response: Option<String>,
    /// Prompt tokens reported.
    pub prompt_tokens: Option<u64>,
    /// Completion tokens reported.
    pub completion_tokens: Option<u64>,
}

/// Writes that go through the writer thread.
#[derive(Debug)]
pub enum WriteOp {
    /// A request body (stored once per key).
    Body {
        /// Content key.
        key: String,
        /// Body text.
        body: String,
    },
    /// One attempt.
    Attempt(AttemptRow),
    /// A finished or failed sample.
    Result {
        /// Run hash.
        run_hash: String,
        /// The row (status done or failed).
        row: ResultRow,
    },
    /// A sample's null and oracle baseline scores.
    Baselines {
        /// Run hash.
        run_hash: String,
        /// Sample position.
        idx: usize,
        /// Score JSON of the null baseline.
        null: String,
        /// Score JSON of the oracle.
        oracle: String,
    },
    /// A cacheable response.
    Cache {
        /// Content key of the request.
        key: String,
        /// Response body text.
        response: String,
    },
    /// The run with this hash is not stored yet (its samples are still being read): the
    /// writer keeps its attempts, results and baselines in memory until [`WriteOp::CreateRun`]
    /// stores the run, and drops them if its queue closes first (the run is never stored).
    HoldRun {
        /// Run hash.
        run_hash: String,
    },
    /// Stores a new run and its samples' rows, then the writes held for it.
    CreateRun(Box<NewRun>),
}

/// What [`WriteOp::CreateRun`] stores (the arguments of [`Store::create_run`]).
#[derive(Debug)]
pub struct NewRun {
    /// Display name of the simulator.
    pub system: String,
    /// The run's identity.
    pub config: RunConfig,
    /// Benchmark path (for the record).
    pub bench_path: String,
    /// Price entry.
    pub prices: Option<Value>,
    /// Per sample in order: (sample id, score JSON of a missing prediction).
    pub pending: Vec<(String, String)>,
}

impl WriteOp {
    /// The run an attempt, result or baseline row belongs to.
    fn run_hash(&self) -> Option<&str> {
        match self {
            WriteOp::Attempt(row) => Some(&row.run_hash),
            WriteOp::Result { run_hash, .. } | WriteOp::Baselines { run_hash, .. } => {
                Some(run_hash)
            }
            _ => None,
        }
    }
}

/// The store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sqlite {
        path: path.to_owned(),
        source,
    }
}

fn open_connection(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(sqlite(path))?;
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .map_err(sqlite(path))?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(sqlite(path))?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(sqlite(path))?;
    Ok(conn)
}

/// Refuses a store written by a newer envsim.
fn check_version(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(sqlite(path))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::Corrupt {
            path: path.to_owned(),
            message: format!(
                "written by a newer envsim (schema {version}, this one reads {SCHEMA_VERSION})"
            ),
        });
    }
    Ok(())
}

impl Store {
    /// Opens (creating if needed) the store at `path`, for commands that write.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.to_owned(),
                source,
            })?;
        }
        let conn = open_connection(path)?;
        check_version(&conn, path)?;
        conn.execute_batch(SCHEMA).map_err(sqlite(path))?;
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(sqlite(path))?;
        Ok(Store {
            conn,
            path: path.to_owned(),
        })
    }

    /// Opens an existing store read-only (`report`, `runs`, `compare`): nothing is created or
    /// changed, and a missing file is [`StoreError::Missing`].
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        if !path.is_file() {
            return Err(StoreError::Missing(path.to_owned()));
        }
        let conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sqlite(path))?;
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(sqlite(path))?;
        check_version(&conn, path)?;
        let is_store: bool = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'runs'",
                [],
                |r| r.get::<_, i64>(0).map(|n| n > 0),
            )
            .map_err(sqlite(path))?;
        if !is_store {
            return Err(StoreError::Corrupt {
                path: path.to_owned(),
                message: "not an envsim run store (no runs table)".into(),
            });
        }
        Ok(Store {
            conn,
            path: path.to_owned(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn corrupt(&self, message: String) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            message,
        }
    }

    fn run_from_row(&self, row: &rusqlite::Row<'_>) -> rusqlite::Result<(RunRecordRaw,)> {
        Ok((RunRecordRaw {
            hash: row.get(0)?,
            run_id: row.get(1)?,
            system: row.get(2)?,
            config: row.get(3)?,
            bench_path: row.get(4)?,
            samples: row.get(5)?,
            prices: row.get(6)?,
            created_at: row.get(7)?,
            updated_at: row.get(8)?,
        },))
    }

    fn finish_record(&self, raw: RunRecordRaw) -> Result<RunRecord, StoreError> {
        let config = serde_json::from_str(&raw.config)
            .map_err(|e| self.corrupt(format!("run {}: config: {e}", raw.run_id)))?;
        let prices = match raw.prices {
            Some(text) => Some(
                serde_json::from_str(&text)
                    .map_err(|e| self.corrupt(format!("run {}: prices: {e}", raw.run_id)))?,
            ),
            None => None,
        };
        Ok(RunRecord {
            hash: raw.hash,
            run_id: raw.run_id,
            system: raw.system,
            config,
            bench_path: raw.bench_path,
            samples: usize::try_from(raw.samples).unwrap_or(0),
            prices,
            created_at: raw.created_at,
            updated_at: raw.updated_at,
        })
    }

    const RUN_COLUMNS: &'static str =
        "hash, run_id, system, config, bench_path, samples, prices, created_at, updated_at";

    /// The run with this full hash, if stored.
    pub fn run_by_hash(&self, hash: &str) -> Result<Option<RunRecord>, StoreError> {
        let raw = self
            .conn
            .query_row(
                &format!("SELECT {} FROM runs WHERE hash = ?1", Self::RUN_COLUMNS),
                params![hash],
                |r| self.run_from_row(r),
            )
            .optional()
            .map_err(sqlite(&self.path))?;
        raw.map(|(raw,)| self.finish_record(raw)).transpose()
    }

    /// Finds a run by id or unique hash prefix (at least 4 hex digits), or `latest`.
    pub fn find_run(&self, key: &str) -> Result<RunRecord, StoreError> {
        let runs = self.list_runs()?;
        if key == "latest" {
            return runs
                .into_iter()
                .max_by(|a, b| a.updated_at.cmp(&b.updated_at))
                .ok_or_else(|| {
                    StoreError::NotFound(format!("no runs in {}", self.path.display()))
                });
        }
        if key.len() < 4 {
            return Err(StoreError::NotFound(format!(
                "run id {key:?} is too short: give at least 4 characters of the id (see `envsim runs`)"
            )));
        }
        let mut matching: Vec<RunRecord> = runs
            .into_iter()
            .filter(|r| r.hash.starts_with(key))
            .collect();
        match matching.len() {
            1 => Ok(matching.remove(0)),
            0 => Err(StoreError::NotFound(format!(
                "no run {key:?} in {} (see `envsim runs`)",
                self.path.display()
            ))),
            n => Err(StoreError::NotFound(format!(
                "run id {key:?} is ambiguous ({n} runs match); give more characters"
            ))),
        }
    }

    /// All runs, oldest first.
    pub fn list_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {} FROM runs ORDER BY created_at, hash",
                Self::RUN_COLUMNS
            ))
            .map_err(sqlite(&self.path))?;
        let raws: Vec<(RunRecordRaw,)> = stmt
            .query_map([], |r| self.run_from_row(r))
            .map_err(sqlite(&self.path))?
            .collect::<Result<_, _>>()
            .map_err(sqlite(&self.path))?;
        raws.into_iter()
            .map(|(raw,)| self.finish_record(raw))
            .collect()
    }

    /// Creates a new run with all samples pending (resuming is the caller's: see
    /// [`Store::run_by_hash`]). `pending` holds `(sample_id, score JSON of a missing
    /// prediction)` per sample in benchmark order. Baselines come later, per sample
    /// ([`WriteOp::Baselines`]).
    pub fn create_run(
        &mut self,
        system: &str,
        config: &RunConfig,
        bench_path: &str,
        prices: Option<&Value>,
        pending: &[(String, String)],
    ) -> Result<RunRecord, StoreError> {
        let hash = config.hash();
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(sqlite(&path))?;
        insert_run(&tx, system, config, bench_path, prices, pending).map_err(sqlite(&path))?;
        tx.commit().map_err(sqlite(&path))?;
        let record = self
            .run_by_hash(&hash)?
            .ok_or_else(|| self.corrupt(format!("run {hash} vanished after creation")))?;
        Ok(record)
    }

    /// Replaces stored scores, per sample `(idx, score JSON, baselines)` with the null and
    /// oracle score JSON when given, in one transaction, leaving predictions and statuses as
    /// they are. Used to rescore runs written by an older scorer from their stored outputs;
    /// baselines given here replace any run-level arrays of older stores.
    pub fn replace_scores(&mut self, hash: &str, scores: &[Rescored]) -> Result<(), StoreError> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(sqlite(&path))?;
        {
            let mut update = tx
                .prepare("UPDATE results SET score = ?3 WHERE run_hash = ?1 AND idx = ?2")
                .map_err(sqlite(&path))?;
            let mut baseline = tx
                .prepare("INSERT OR REPLACE INTO sample_baselines (run_hash, idx, null_score, oracle_score) VALUES (?1, ?2, ?3, ?4)")
                .map_err(sqlite(&path))?;
            for (idx, score, baselines) in scores {
                update
                    .execute(params![hash, *idx as i64, score])
                    .map_err(sqlite(&path))?;
                if let Some((null, oracle)) = baselines {
                    baseline
                        .execute(params![hash, *idx as i64, null, oracle])
                        .map_err(sqlite(&path))?;
                }
            }
        }
        if scores.iter().any(|(_, _, b)| b.is_some()) {
            tx.execute(
                "DELETE FROM run_baselines WHERE run_hash = ?1",
                params![hash],
            )
            .map_err(sqlite(&path))?;
        }
        tx.commit().map_err(sqlite(&path))
    }

    /// Deletes a run with its results and audit rows (`--fresh`). Cached responses stay.
    pub fn delete_run(&mut self, hash: &str) -> Result<(), StoreError> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(sqlite(&path))?;
        for table in ["requests", "results", "run_baselines", "sample_baselines"] {
            tx.execute(
                &format!("DELETE FROM {table} WHERE run_hash = ?1"),
                params![hash],
            )
            .map_err(sqlite(&path))?;
        }
        tx.execute("DELETE FROM runs WHERE hash = ?1", params![hash])
            .map_err(sqlite(&path))?;
        tx.commit().map_err(sqlite(&path))
    }

    /// The null and oracle score JSON of every sample of a run (`None` where not computed yet),
    /// indexed by sample position. Runs written before per-sample baselines keep them as two
    /// JSON arrays (`run_baselines`); those are split here.
    pub fn baselines(&self, hash: &str) -> Result<Vec<Option<(String, String)>>, StoreError> {
        let samples: i64 = self
            .conn
            .query_row(
                "SELECT samples FROM runs WHERE hash = ?1",
                params![hash],
                |r| r.get(0),
            )
            .optional()
            .map_err(sqlite(&self.path))?
            .ok_or_else(|| StoreError::NotFound(format!("no run with hash {hash}")))?;
        let mut out: Vec<Option<(String, String)>> =
            vec![None; usize::try_from(samples).unwrap_or(0)];
        let legacy: Option<(String, String)> = self
            .conn
            .query_row(
                "SELECT null_scores, oracle_scores FROM run_baselines WHERE run_hash = ?1",
                params![hash],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(sqlite(&self.path))?;
        if let Some((null, oracle)) = legacy {
            let split = |text: &str, which: &str| -> Result<Vec<String>, StoreError> {
                let items: Vec<Value> = serde_json::from_str(text).map_err(|e| {
                    self.corrupt(format!("run {hash}: {which} baseline scores: {e}"))
                })?;
                Ok(items.iter().map(Value::to_string).collect())
            };
            for (slot, pair) in out.iter_mut().zip(
                split(&null, "null")?
                    .into_iter()
                    .zip(split(&oracle, "oracle")?),
            ) {
                *slot = Some(pair);
            }
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT idx, null_score, oracle_score FROM sample_baselines WHERE run_hash = ?1",
            )
            .map_err(sqlite(&self.path))?;
        let rows = stmt
            .query_map(params![hash], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(sqlite(&self.path))?;
        for row in rows {
            let (idx, null, oracle) = row.map_err(sqlite(&self.path))?;
            if let Some(slot) = usize::try_from(idx).ok().and_then(|i| out.get_mut(i)) {
                *slot = Some((null, oracle));
            }
        }
        Ok(out)
    }

    /// Updates the price stored with a run.
    pub fn set_prices(&mut self, hash: &str, prices: &Value) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE runs SET prices = ?2 WHERE hash = ?1",
                params![hash, prices.to_string()],
            )
            .map_err(sqlite(&self.path))?;
        Ok(())
    }

    /// All result rows of a run, in benchmark order.
    pub fn results(&self, hash: &str) -> Result<Vec<ResultRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT idx, sample_id, status, prediction_kind, prediction, latency_ms, attempts, cached, score FROM results WHERE run_hash = ?1 ORDER BY idx")
            .map_err(sqlite(&self.path))?;
        let rows = stmt
            .query_map(params![hash], |r| {
                Ok(ResultRow {
                    idx: usize::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
                    sample_id: r.get(1)?,
                    status: SampleStatus::parse(&r.get::<_, String>(2)?),
                    prediction_kind: r.get(3)?,
                    prediction: r.get(4)?,
                    latency_ms: r.get(5)?,
                    attempts: u32::try_from(r.get::<_, i64>(6)?).unwrap_or(0),
                    cached: r.get::<_, i64>(7)? != 0,
                    score: r.get(8)?,
                })
            })
            .map_err(sqlite(&self.path))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(sqlite(&self.path))?;
        Ok(rows)
    }

    /// The audit log of a run, in the order attempts were recorded.
    pub fn attempts(&self, hash: &str) -> Result<Vec<AttemptRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT idx, attempt, latency_ms, status, outcome, error, body_key, response, prompt_tokens, completion_tokens FROM requests WHERE run_hash = ?1 ORDER BY id")
            .map_err(sqlite(&self.path))?;
        let rows = stmt
            .query_map(params![hash], |r| {
                Ok(AttemptRow {
                    run_hash: hash.to_owned(),
                    idx: usize::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
                    attempt: u32::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                    latency_ms: r.get(2)?,
                    status: r
                        .get::<_, Option<i64>>(3)?
                        .and_then(|s| u16::try_from(s).ok()),
                    outcome: r.get(4)?,
                    error: r.get(5)?,
                    body_key: r.get(6)?,
                    response: r.get(7)?,
                    prompt_tokens: r
                        .get::<_, Option<i64>>(8)?
                        .and_then(|t| u64::try_from(t).ok()),
                    completion_tokens: r
                        .get::<_, Option<i64>>(9)?
                        .and_then(|t| u64::try_from(t).ok()),
                })
            })
            .map_err(sqlite(&self.path))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(sqlite(&self.path))?;
        Ok(rows)
    }

    /// A stored request body.
    pub fn body(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row(
                "SELECT body FROM bodies WHERE key = ?1",
                params![key],
                |r| r.get(0),
            )
            .optional()
            .map_err(sqlite(&self.path))
    }
}

struct RunRecordRaw {
    hash: String,
    run_id: String,
    system: String,
    config: String,
    bench_path: String,
    samples: i64,
    prices: Option<String>,
    created_at: String,
    updated_at: String,
}

/// Read access to the response cache from many tasks (one connection behind a mutex; lookups
/// take microseconds).
pub struct CacheReader {
    conn: std::sync::Mutex<Connection>,
    path: PathBuf,
}

impl CacheReader {
    /// Opens a read connection.
    pub fn open(path: &Path) -> Result<CacheReader, StoreError> {
        Ok(CacheReader {
            conn: std::sync::Mutex::new(open_connection(path)?),
            path: path.to_owned(),
        })
    }

    /// The cached response for a request key.
    pub fn get(&self, key: &str) -> Result<Option<String>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.query_row(
            "SELECT response FROM cache WHERE key = ?1",
            params![key],
            |r| r.get(0),
        )
        .optional()
        .map_err(sqlite(&self.path))
    }
}

/// Writes queued at most before senders wait (bounded, so a stalled writer slows the run
/// down instead of buffering without limit).
pub const WRITE_QUEUE: usize = 4096;

/// The single writer: a thread that owns a connection and commits everything it receives,
/// batching whatever is queued into one transaction.
///
/// If a commit fails, the writes of that batch are retried one by one (so everything that can
/// be committed is), then the writer stops: its queue closes, so every later send fails, and
/// [`StoreWriter::finish`] returns the first error.
pub struct StoreWriter {
    tx: Option<mpsc::Sender<WriteOp>>,
    handle: Option<JoinHandle<Result<u64, StoreError>>>,
}

impl StoreWriter {
    /// Starts the writer thread on the store at `path`.
    pub fn spawn(path: &Path) -> Result<StoreWriter, StoreError> {
        let conn = open_connection(path)?;
        let path = path.to_owned();
        let (tx, rx) = mpsc::channel::<WriteOp>(WRITE_QUEUE);
        let handle = std::thread::Builder::new()
            .name("envsim-store".into())
            .spawn(move || writer_loop(conn, &path, rx))
            .map_err(|source| StoreError::Io {
                path: PathBuf::from("<store writer thread>"),
                source,
            })?;
        Ok(StoreWriter {
            tx: Some(tx),
            handle: Some(handle),
        })
    }

    /// A handle for sending writes from any task.
    pub fn sender(&self) -> Option<mpsc::Sender<WriteOp>> {
        self.tx.clone()
    }

    /// Waits until everything sent has been committed; returns the number of writes, or the
    /// error that stopped the writer.
    pub fn finish(mut self) -> Result<u64, StoreError> {
        self.tx.take();
        match self.handle.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(StoreError::NotFound(
                "the store writer thread panicked".into(),
            )),
            None => Ok(0),
        }
    }
}

impl Drop for StoreWriter {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// Inserts a run and its samples' rows (status `pending`, `pending[idx]` = (sample id, score
/// JSON of a missing prediction)).
fn insert_run(
    tx: &rusqlite::Transaction<'_>,
    system: &str,
    config: &RunConfig,
    bench_path: &str,
    prices: Option<&Value>,
    pending: &[(String, String)],
) -> rusqlite::Result<()> {
    let hash = config.hash();
    tx.execute(
        "INSERT INTO runs (hash, run_id, system, config, bench_path, samples, prices) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            hash,
            config.run_id(),
            system,
            serde_json::to_string(config).unwrap_or_default(),
            bench_path,
            pending.len() as i64,
            prices.map(Value::to_string)
        ],
    )?;
    let mut insert = tx.prepare(
        "INSERT INTO results (run_hash, idx, sample_id, status, score) VALUES (?1, ?2, ?3, 'pending', ?4)",
    )?;
    for (idx, (sample_id, score)) in pending.iter().enumerate() {
        insert.execute(params![hash, idx as i64, sample_id, score])?;
    }
    Ok(())
}

/// Commits one batch in a transaction.
fn commit_batch(conn: &mut Connection, batch: &[WriteOp]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    let mut touched_runs: Vec<&str> = Vec::new();
    for op in batch {
        if let WriteOp::Result { run_hash, .. } = op {
            if !touched_runs.contains(&run_hash.as_str()) {
                touched_runs.push(run_hash);
            }
        }
        apply_write(&tx, op)?;
    }
    // Once per transaction, not per result: keeps the per-sample cost flat.
    for hash in touched_runs {
        tx.prepare_cached(
            "UPDATE runs SET updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE hash = ?1",
        )?
        .execute(params![hash])?;
    }
    tx.commit()
}

fn writer_loop(
    mut conn: Connection,
    path: &Path,
    mut rx: mpsc::Receiver<WriteOp>,
) -> Result<u64, StoreError> {
    let mut written = 0u64;
    let mut batch = Vec::new();
    let mut held: Option<(String, Vec<WriteOp>)> = None;
    while let Some(first) = rx.blocking_recv() {
        batch.clear();
        let mut queued = vec![first];
        // Bounded batches keep each commit short; whatever is already queued goes in.
        while queued.len() < 512 {
            match rx.try_recv() {
                Ok(op) => queued.push(op),
                Err(_) => break,
            }
        }
        for op in queued {
            hold_or_queue(op, &mut held, &mut batch);
        }
        if batch.is_empty() {
            continue;
        }
        if commit_batch(&mut conn, &batch).is_ok() {
            written += batch.len() as u64;
            continue;
        }
        // Commit what can be committed, one write at a time, then stop with the first error.
        let mut first_error = None;
        for op in batch.drain(..) {
            match commit_batch(&mut conn, std::slice::from_ref(&op)) {
                Ok(()) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        rx.close();
        return Err(first_error.map_or_else(
            || StoreError::Corrupt {
                path: path.to_owned(),
                message: "a transaction failed and then succeeded write by write".into(),
            },
            |e| sqlite(path)(e),
        ));
    }
    Ok(written)
}

/// Routes one received write: held while its run waits to be created, released after the run
/// on [`WriteOp::CreateRun`], else queued for this batch.
fn hold_or_queue(op: WriteOp, held: &mut Option<(String, Vec<WriteOp>)>, batch: &mut Vec<WriteOp>) {
    match op {
        WriteOp::HoldRun { run_hash } => *held = Some((run_hash, Vec::new())),
        WriteOp::CreateRun(run) => {
            let hash = run.config.hash();
            batch.push(WriteOp::CreateRun(run));
            if held.as_ref().is_some_and(|(h, _)| *h == hash) {
                if let Some((_, ops)) = held.take() {
                    batch.extend(ops);
                }
            }
        }
        op => match held {
            Some((hash, ops)) if op.run_hash() == Some(hash.as_str()) => ops.push(op),
            _ => batch.push(op),
        },
    }
}

fn apply_write(tx: &rusqlite::Transaction<'_>, op: &WriteOp) -> rusqlite::Result<()> {
    match op {
        WriteOp::CreateRun(run) => insert_run(
            tx,
            &run.system,
            &run.config,
            &run.bench_path,
            run.prices.as_ref(),
            &run.pending,
        )?,
        // Routed by `hold_or_queue`, never applied.
        WriteOp::HoldRun { .. } => {}
        WriteOp::Body { key, body } => {
            tx.prepare_cached("INSERT OR IGNORE INTO bodies (key, body) VALUES (?1, ?2)")?
                .execute(params![key, body])?;
        }
        WriteOp::Attempt(a) => {
            tx.prepare_cached("INSERT INTO requests (run_hash, idx, attempt, latency_ms, status, outcome, error, body_key, response, prompt_tokens, completion_tokens) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)")?
                .execute(params![
                    a.run_hash,
                    a.idx as i64,
                    a.attempt,
                    a.latency_ms,
                    a.status,
                    a.outcome,
                    a.error,
                    a.body_key,
                    a.response,
                    a.prompt_tokens.map(|t| t as i64),
                    a.completion_tokens.map(|t| t as i64)
                ])?;
        }
        WriteOp::Result { run_hash, row } => {
            tx.prepare_cached("UPDATE results SET status = ?9, prediction_kind = ?3, prediction = ?4, latency_ms = ?5, attempts = ?6, cached = ?7, score = ?8, finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE run_hash = ?1 AND idx = ?2")?
                .execute(params![
                    run_hash,
                    row.idx as i64,
                    row.prediction_kind,
                    row.prediction,
                    row.latency_ms,
                    row.attempts,
                    row.cached as i64,
                    row.score,
                    row.status.as_str()
                ])?;
        }
        WriteOp::Baselines {
            run_hash,
            idx,
            null,
            oracle,
        } => {
            tx.prepare_cached("INSERT OR REPLACE INTO sample_baselines (run_hash, idx, null_score, oracle_score) VALUES (?1, ?2, ?3, ?4)")?
                .execute(params![run_hash, *idx as i64, null, oracle])?;
        }
        WriteOp::Cache { key, response } => {
            tx.prepare_cached("INSERT OR REPLACE INTO cache (key, response) VALUES (?1, ?2)")?
                .execute(params![key, response])?;
        }
    }
    Ok(())
}

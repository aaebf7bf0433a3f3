//! The run store: one SQLite file (WAL) holding runs, per-sample results, an audit log of every
//! request, request bodies (content-addressed) and the response cache.
//!
//! Crash safety: every finished sample is committed by the writer thread as soon as it arrives
//! (WAL, `synchronous=NORMAL`: a committed transaction survives the process being killed), so
//! `kill -9` loses only requests that were in flight. A run's rows are created up front with
//! status `pending` and the score of a missing prediction, so a partial run still reports over
//! the whole benchmark (unfinished samples count as wrong) and a rerun resumes exactly the
//! pending ones.

use crate::config::RunConfig;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

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
    /// The database directory could not be created.
    #[error("cannot create {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

const SCHEMA_VERSION: i64 = 1;

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

/// One sample's row.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultRow {
    /// Position in the benchmark.
    pub idx: usize,
    /// The sample id.
    pub sample_id: String,
    /// `pending` or `done`.
    pub done: bool,
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
    /// A finished sample.
    Result {
        /// Run hash.
        run_hash: String,
        /// The row (with `done` true).
        row: ResultRow,
    },
    /// A cacheable response.
    Cache {
        /// Content key of the request.
        key: String,
        /// Response body text.
        response: String,
    },
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

impl Store {
    /// Opens (creating if needed) the store at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.to_owned(),
                source,
            })?;
        }
        let conn = open_connection(path)?;
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
        conn.execute_batch(SCHEMA).map_err(sqlite(path))?;
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(sqlite(path))?;
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
    /// [`Store::run_by_hash`]). `baselines` are the null and oracle per-sample scores (JSON
    /// arrays); `pending` holds `(sample_id, score JSON of a missing prediction)` per sample in
    /// benchmark order.
    pub fn create_run(
        &mut self,
        system: &str,
        config: &RunConfig,
        bench_path: &str,
        prices: Option<&Value>,
        baselines: (&str, &str),
        pending: &[(String, String)],
    ) -> Result<RunRecord, StoreError> {
        let hash = config.hash();
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(sqlite(&path))?;
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
        )
        .map_err(sqlite(&path))?;
        tx.execute(
            "INSERT OR REPLACE INTO run_baselines (run_hash, null_scores, oracle_scores) VALUES (?1, ?2, ?3)",
            params![hash, baselines.0, baselines.1],
        )
        .map_err(sqlite(&path))?;
        {
            let mut insert = tx
                .prepare("INSERT INTO results (run_hash, idx, sample_id, status, score) VALUES (?1, ?2, ?3, 'pending', ?4)")
                .map_err(sqlite(&path))?;
            for (idx, (sample_id, score)) in pending.iter().enumerate() {
                insert
                    .execute(params![hash, idx as i64, sample_id, score])
                    .map_err(sqlite(&path))?;
            }
        }
        tx.commit().map_err(sqlite(&path))?;
        let record = self
            .run_by_hash(&hash)?
            .ok_or_else(|| self.corrupt(format!("run {hash} vanished after creation")))?;
        Ok(record)
    }

    /// Replaces stored scores (per-sample `(idx, score JSON)` and, when given, the null and
    /// oracle baselines) in one transaction, leaving predictions and statuses as they are. Used
    /// to rescore runs written by an older scorer from their stored outputs.
    pub fn replace_scores(
        &mut self,
        hash: &str,
        scores: &[(usize, String)],
        baselines: Option<(&str, &str)>,
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(sqlite(&path))?;
        {
            let mut update = tx
                .prepare("UPDATE results SET score = ?3 WHERE run_hash = ?1 AND idx = ?2")
                .map_err(sqlite(&path))?;
            for (idx, score) in scores {
                update
                    .execute(params![hash, *idx as i64, score])
                    .map_err(sqlite(&path))?;
            }
        }
        if let Some((null, oracle)) = baselines {
            tx.execute(
                "UPDATE run_baselines SET null_scores = ?2, oracle_scores = ?3 WHERE run_hash = ?1",
                params![hash, null, oracle],
            )
            .map_err(sqlite(&path))?;
        }
        tx.commit().map_err(sqlite(&path))
    }

    /// Deletes a run with its results and audit rows (`--fresh`). Cached responses stay.
    pub fn delete_run(&mut self, hash: &str) -> Result<(), StoreError> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(sqlite(&path))?;
        for table in ["requests", "results", "run_baselines"] {
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

    /// The null and oracle per-sample scores stored with a run (JSON arrays).
    pub fn baselines(&self, hash: &str) -> Result<(String, String), StoreError> {
        self.conn
            .query_row(
                "SELECT null_scores, oracle_scores FROM run_baselines WHERE run_hash = ?1",
                params![hash],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(sqlite(&self.path))?
            .ok_or_else(|| self.corrupt(format!("run {hash} has no baseline scores")))
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
                    done: r.get::<_, String>(2)? == "done",
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

/// The single writer: a thread that owns a connection and commits everything it receives,
/// batching whatever is queued into one transaction.
pub struct StoreWriter {
    tx: Option<mpsc::Sender<WriteOp>>,
    handle: Option<JoinHandle<Result<u64, StoreError>>>,
}

impl StoreWriter {
    /// Starts the writer thread on the store at `path`.
    pub fn spawn(path: &Path) -> Result<StoreWriter, StoreError> {
        let conn = open_connection(path)?;
        let path = path.to_owned();
        let (tx, rx) = mpsc::channel::<WriteOp>();
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

    /// A handle for sending writes from any thread.
    pub fn sender(&self) -> mpsc::Sender<WriteOp> {
        self.tx.clone().expect("sender taken only by finish")
    }

    /// Waits until everything sent has been committed; returns the number of writes.
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

fn writer_loop(
    mut conn: Connection,
    path: &Path,
    rx: mpsc::Receiver<WriteOp>,
) -> Result<u64, StoreError> {
    let mut written = 0u64;
    while let Ok(first) = rx.recv() {
        let tx = conn.transaction().map_err(sqlite(path))?;
        let mut op = Some(first);
        let mut in_batch = 0;
        let mut touched_runs: Vec<String> = Vec::new();
        while let Some(current) = op.take() {
            if let WriteOp::Result { run_hash, .. } = &current {
                if !touched_runs.contains(run_hash) {
                    touched_runs.push(run_hash.clone());
                }
            }
            apply_write(&tx, current).map_err(sqlite(path))?;
            written += 1;
            in_batch += 1;
            // Bounded batches keep each commit short; whatever is already queued goes in.
            if in_batch < 512 {
                op = rx.try_recv().ok();
            }
        }
        // Once per transaction, not per result: keeps the per-sample cost flat.
        for hash in &touched_runs {
            tx.prepare_cached("UPDATE runs SET updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE hash = ?1")
                .and_then(|mut stmt| stmt.execute(params![hash]))
                .map_err(sqlite(path))?;
        }
        tx.commit().map_err(sqlite(path))?;
    }
    Ok(written)
}

fn apply_write(tx: &rusqlite::Transaction<'_>, op: WriteOp) -> rusqlite::Result<()> {
    match op {
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
            tx.prepare_cached("UPDATE results SET status = 'done', prediction_kind = ?3, prediction = ?4, latency_ms = ?5, attempts = ?6, cached = ?7, score = ?8, finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE run_hash = ?1 AND idx = ?2")?
                .execute(params![
                    run_hash,
                    row.idx as i64,
                    row.prediction_kind,
                    row.prediction,
                    row.latency_ms,
                    row.attempts,
                    row.cached as i64,
                    row.score
                ])?;
        }
        WriteOp::Cache { key, response } => {
            tx.prepare_cached("INSERT OR REPLACE INTO cache (key, response) VALUES (?1, ?2)")?
                .execute(params![key, response])?;
        }
    }
    Ok(())
}

//! Sessions persisted in SQLite (or PostgreSQL: [`postgres`]): a restart loses nothing
//! committed. Each session row holds
//! how it was created and its initial state; each step row its record and, when the step
//! changed the state, the state after it (an unchanged state is the one before). Snapshots are
//! rows of (session, name, step count).
//!
//! Writes go to one writer thread that commits them in groups: it takes every write waiting
//! and commits them in one transaction (each in a savepoint of its own, so one failing write
//! does not undo the others), and answers each only once its group is committed — concurrent
//! sessions share commits instead of queueing for one each. Reads use a connection of their
//! own (WAL mode lets them run beside the writer).

pub mod postgres;

use envsim_sim::session::StepRecord;
use rusqlite::{params, Connection};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A stored session, as read back at start.
pub struct StoredSession {
    /// Its id.
    pub id: String,
    /// The request that created it.
    pub request: Value,
    /// The initial state.
    pub initial: Value,
    /// Its steps, states resolved.
    pub steps: Vec<StepRecord>,
    /// Its marks.
    pub snapshots: BTreeMap<String, usize>,
    /// Seconds since the epoch of its last use.
    pub touched: f64,
}

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused a statement.
    #[error("session store: {0}")]
    Sql(rusqlite::Error),
    /// The store cannot be read or written now (a full disk, the database down or
    /// restarting, the file locked): nothing was written; the same request may succeed later.
    #[error("session store unavailable: {0}")]
    Unavailable(String),
    /// A stored value that does not read back.
    #[error("session store: session {0}: {1}")]
    Corrupt(String, String),
    /// The writer thread is gone, or its group's commit failed.
    #[error("session store: {0}")]
    Writer(String),
    /// PostgreSQL.
    #[error("session store (PostgreSQL): {0}")]
    Postgres(String),
    /// Another server changed the session since this one read it.
    #[error("session {0} was changed by another request meanwhile")]
    Conflict(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode::*;
        match e.sqlite_error_code() {
            Some(
                DiskFull | SystemIoFailure | DatabaseBusy | DatabaseLocked | CannotOpen | ReadOnly
                | OutOfMemory,
            ) => StoreError::Unavailable(format!("SQLite: {e}")),
            _ => StoreError::Sql(e),
        }
    }
}

impl StoreError {
    /// Whether the same request may succeed later (the store is away or full, not the
    /// request wrong): a 503 with `Retry-After`.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// The session store: a SQLite file, or a PostgreSQL database.
#[derive(Clone)]
pub struct Store(Backend);

#[derive(Clone)]
enum Backend {
    Sqlite(SqliteStore),
    Postgres(postgres::PgStore),
}

/// Runs `$call` on whichever store it is.
macro_rules! on_backend {
    ($store:expr, $s:ident => $call:expr) => {
        match &$store.0 {
            Backend::Sqlite($s) => $call,
            Backend::Postgres($s) => $call,
        }
    };
}

impl Store {
    /// Opens (creating when absent) the SQLite store at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Ok(Store(Backend::Sqlite(SqliteStore::open(path, None)?)))
    }

    /// Opens the SQLite store at `path`, its database file capped at about `max_bytes`: a
    /// write that would grow it past the cap fails as on a full disk (503, nothing written).
    pub fn open_capped(path: &Path, max_bytes: u64) -> Result<Store, StoreError> {
        Ok(Store(Backend::Sqlite(SqliteStore::open(
            path,
            Some(max_bytes),
        )?)))
    }

    /// Opens the store `db` names: a `postgres://` or `postgresql://` URL, else a SQLite file.
    pub async fn open_any(db: &str) -> Result<Store, StoreError> {
        if db.starts_with("postgres://") || db.starts_with("postgresql://") {
            Ok(Store(Backend::Postgres(
                postgres::PgStore::connect(db).await?,
            )))
        } else {
            Store::open(Path::new(db))
        }
    }

    /// Records a new session.
    pub async fn create(
        &self,
        id: &str,
        request: &Value,
        initial: &Value,
        now: f64,
    ) -> Result<(), StoreError> {
        on_backend!(self, s => s.create(id, request, initial, now).await)
    }

    /// Every session of a shared store: id, environment, last use (empty from SQLite, whose
    /// sessions the server holds).
    pub async fn list(&self) -> Result<Vec<(String, Value, f64)>, StoreError> {
        match &self.0 {
            Backend::Sqlite(_) => Ok(Vec::new()),
            Backend::Postgres(s) => s.list().await,
        }
    }

    /// Whether other servers may share it (then sessions carry versions: [`postgres`]).
    pub fn is_shared(&self) -> bool {
        matches!(self.0, Backend::Postgres(_))
    }

    /// The session's version in a shared store (`None`: not shared, or no such session).
    pub async fn version(&self, id: &str) -> Result<Option<u64>, StoreError> {
        match &self.0 {
            Backend::Sqlite(_) => Ok(None),
            Backend::Postgres(s) => s.version(id).await,
        }
    }

    /// One session and its version, from a shared store (`None` from SQLite, whose sessions
    /// are all loaded at start, or when there is no such session).
    pub async fn load(&self, id: &str) -> Result<Option<(StoredSession, u64)>, StoreError> {
        match &self.0 {
            Backend::Sqlite(_) => Ok(None),
            Backend::Postgres(s) => s.load(id).await,
        }
    }

    /// Records step `idx` (dropping any stored step from `idx` on, as after a rollback), and
    /// the state after it when it changed; in a shared store only if the session is still at
    /// version `expected` ([`StoreError::Conflict`] otherwise). Returns its new version (0 in
    /// SQLite).
    pub async fn append(
        &self,
        id: &str,
        idx: usize,
        record: &StepRecord,
        changed: bool,
        now: f64,
        expected: Option<u64>,
    ) -> Result<u64, StoreError> {
        match &self.0 {
            Backend::Sqlite(s) => s.append(id, idx, record, changed, now).await.map(|()| 0),
            Backend::Postgres(s) => s.append(id, idx, record, changed, now, expected).await,
        }
    }

    /// Keeps the first `steps` steps and the marks at or before them; returns the session's
    /// new version (0 in SQLite).
    pub async fn truncate(&self, id: &str, steps: usize, now: f64) -> Result<u64, StoreError> {
        match &self.0 {
            Backend::Sqlite(s) => s.truncate(id, steps).await.map(|()| 0),
            Backend::Postgres(s) => s.truncate(id, steps, now).await,
        }
    }

    /// Records a mark; returns the session's new version (0 in SQLite).
    pub async fn snapshot(
        &self,
        id: &str,
        name: &str,
        steps: usize,
        now: f64,
    ) -> Result<u64, StoreError> {
        match &self.0 {
            Backend::Sqlite(s) => s.snapshot(id, name, steps).await.map(|()| 0),
            Backend::Postgres(s) => s.snapshot(id, name, steps, now).await,
        }
    }

    /// What [`Store::put_episode`] recorded of session `id`, from a shared store (`None` from
    /// SQLite, whose episodes are all loaded at start).
    pub async fn load_episode(&self, id: &str) -> Result<Option<Value>, StoreError> {
        match &self.0 {
            Backend::Sqlite(_) => Ok(None),
            Backend::Postgres(s) => s.load_episode(id).await,
        }
    }

    /// Removes a session and everything of it.
    pub async fn delete(&self, id: &str) -> Result<(), StoreError> {
        on_backend!(self, s => s.delete(id).await)
    }

    /// Copies a session under a new id (a fork).
    pub async fn fork(&self, from: &str, to: &str, now: f64) -> Result<(), StoreError> {
        on_backend!(self, s => s.fork(from, to, now).await)
    }

    /// Removes a session unused since `before` (seconds since the epoch) as the store knows
    /// it: in a shared store another server may have used it since this one did.
    pub async fn delete_if_idle(&self, id: &str, before: f64) -> Result<(), StoreError> {
        match &self.0 {
            Backend::Sqlite(s) => s.delete(id).await,
            Backend::Postgres(s) => s.delete_if_idle(id, before).await,
        }
    }

    /// Records (replacing) what an RL episode's session is: its task, budget, rewards.
    pub async fn put_episode(&self, id: &str, info: &Value) -> Result<(), StoreError> {
        on_backend!(self, s => s.put_episode(id, info).await)
    }

    /// Every stored episode: session id → what [`Store::put_episode`] recorded.
    pub async fn load_episodes(&self) -> Result<BTreeMap<String, Value>, StoreError> {
        match &self.0 {
            Backend::Sqlite(s) => s.load_episodes(),
            Backend::Postgres(s) => s.load_episodes().await,
        }
    }

    /// Every stored session, steps and states resolved.
    pub async fn load_all(&self) -> Result<Vec<StoredSession>, StoreError> {
        match &self.0 {
            Backend::Sqlite(s) => s.load_all(),
            Backend::Postgres(s) => s.load_all().await,
        }
    }
}

/// A write: a statement group run in a savepoint of the writer's transaction.
type Job = Box<dyn FnOnce(&Connection) -> Result<(), StoreError> + Send>;

/// The SQLite store, shared.
#[derive(Clone)]
pub struct SqliteStore {
    writer: std::sync::mpsc::Sender<(Job, tokio::sync::oneshot::Sender<Result<(), StoreError>>)>,
    reader: Arc<Mutex<Connection>>,
}

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
PRAGMA foreign_keys = ON;
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    request TEXT NOT NULL,
    initial TEXT NOT NULL,
    touched REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS steps (
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    record TEXT NOT NULL,
    state TEXT,
    PRIMARY KEY (session, idx)
);
CREATE TABLE IF NOT EXISTS snapshots (
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    steps INTEGER NOT NULL,
    PRIMARY KEY (session, name)
);
CREATE TABLE IF NOT EXISTS episodes (
    session TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    info TEXT NOT NULL
);
";

/// Writes committed in one transaction at most.
const GROUP: usize = 512;

/// The writer thread: waits for a write, takes every other one waiting (up to [`GROUP`]),
/// commits them together and answers each.
fn write_loop(
    mut conn: Connection,
    jobs: std::sync::mpsc::Receiver<(Job, tokio::sync::oneshot::Sender<Result<(), StoreError>>)>,
) {
    while let Ok(first) = jobs.recv() {
        let mut group = vec![first];
        while group.len() < GROUP {
            match jobs.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let mut answers = Vec::with_capacity(group.len());
        let mut jobs = group.into_iter();
        // Every job is answered, also when the transaction fails before running it (a full
        // disk may refuse a savepoint): its answer is the failure.
        let committed = (|| -> Result<(), StoreError> {
            let mut tx = conn.transaction()?;
            for (job, answer) in jobs.by_ref() {
                let mut point = match tx.savepoint() {
                    Ok(point) => point,
                    Err(e) => {
                        answers.push((answer, Ok(())));
                        return Err(e.into());
                    }
                };
                let result = job(&point);
                let ended = match &result {
                    Ok(()) => point.commit(),
                    Err(_) => point.rollback(),
                };
                answers.push((answer, result));
                ended?;
            }
            tx.commit()?;
            Ok(())
        })();
        answers.extend(jobs.map(|(_, answer)| (answer, Ok(()))));
        // SQLite may roll the whole transaction back when a statement finds the disk full,
        // so that ending its savepoint fails: the group failed for want of room.
        let full = answers
            .iter()
            .find_map(|(_, r)| r.as_ref().err().filter(|e| e.is_unavailable()))
            .map(ToString::to_string);
        for (answer, result) in answers {
            let result = match (&committed, result) {
                (Err(e), _) if e.is_unavailable() => {
                    Err(StoreError::Unavailable(format!("the commit failed: {e}")))
                }
                (Err(_), _) if full.is_some() => Err(StoreError::Unavailable(format!(
                    "the commit failed: {}",
                    full.as_deref().unwrap_or_default()
                ))),
                (Err(e), _) => Err(StoreError::Writer(format!("the commit failed: {e}"))),
                (Ok(()), r) => r,
            };
            let _ = answer.send(result);
        }
    }
}

impl SqliteStore {
    /// Opens (creating when absent) the store at `path`.
    pub fn open(path: &Path, max_bytes: Option<u64>) -> Result<SqliteStore, StoreError> {
        let writer = Connection::open(path)?;
        writer.execute_batch(SCHEMA)?;
        if let Some(max) = max_bytes {
            let page: i64 = writer.query_row("PRAGMA page_size", [], |r| r.get(0))?;
            // At least the pages the file has: a cap below them would refuse every write.
            let pages: i64 = writer.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            let cap = (i64::try_from(max).unwrap_or(i64::MAX) / page.max(1)).max(pages);
            let _: i64 =
                writer.query_row(&format!("PRAGMA max_page_count = {cap}"), [], |r| r.get(0))?;
        }
        let reader = Connection::open(path)?;
        SqliteStore::with(writer, reader)
    }

    fn with(writer: Connection, reader: Connection) -> Result<SqliteStore, StoreError> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("envsim-store".into())
            .spawn(move || write_loop(writer, rx))
            .map_err(|e| StoreError::Writer(format!("the writer thread did not start: {e}")))?;
        Ok(SqliteStore {
            writer: tx,
            reader: Arc::new(Mutex::new(reader)),
        })
    }

    /// Runs a write on the writer thread and waits for its group's commit.
    async fn write(&self, job: Job) -> Result<(), StoreError> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.writer
            .send((job, answer))
            .map_err(|_| StoreError::Writer("the writer thread is gone".into()))?;
        answered
            .await
            .map_err(|_| StoreError::Writer("the writer thread is gone".into()))?
    }

    fn read<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        // A panic while holding the lock cannot leave a read half done: the lock stays usable.
        let mut conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut conn)
    }

    /// Records (replacing) what an RL episode's session is: its task, budget, rewards.
    pub async fn put_episode(&self, id: &str, info: &Value) -> Result<(), StoreError> {
        let (id, info) = (id.to_owned(), info.to_string());
        self.write(Box::new(move |c| {
            c.execute(
                "INSERT INTO episodes (session, info) VALUES (?1, ?2)
                 ON CONFLICT (session) DO UPDATE SET info = excluded.info",
                params![id, info],
            )?;
            Ok(())
        }))
        .await
    }

    /// Every stored episode: session id → what [`SqliteStore::put_episode`] recorded.
    pub fn load_episodes(&self) -> Result<BTreeMap<String, Value>, StoreError> {
        self.read(|c| {
            let mut statement = c.prepare("SELECT session, info FROM episodes")?;
            let rows = statement
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
            let mut out = BTreeMap::new();
            for row in rows {
                let (id, info) = row?;
                let value = serde_json::from_str(&info)
                    .map_err(|e| StoreError::Corrupt(id.clone(), format!("its episode: {e}")))?;
                out.insert(id, value);
            }
            Ok(out)
        })
    }

    /// Records a new session.
    pub async fn create(
        &self,
        id: &str,
        request: &Value,
        initial: &Value,
        now: f64,
    ) -> Result<(), StoreError> {
        let (id, request, initial) = (id.to_owned(), request.to_string(), initial.to_string());
        self.write(Box::new(move |c| {
            c.execute(
                "INSERT INTO sessions (id, request, initial, touched) VALUES (?1, ?2, ?3, ?4)",
                params![id, request, initial, now],
            )?;
            Ok(())
        }))
        .await
    }

    /// Records step `idx` (dropping any stored step from `idx` on, as after a rollback), and
    /// the state after it when it changed.
    pub async fn append(
        &self,
        id: &str,
        idx: usize,
        record: &StepRecord,
        changed: bool,
        now: f64,
    ) -> Result<(), StoreError> {
        let text = serde_json::to_string(record)
            .map_err(|e| StoreError::Corrupt(id.to_owned(), e.to_string()))?;
        let state = changed.then(|| record.state_after.to_string());
        let id = id.to_owned();
        self.write(Box::new(move |c| {
            c.execute(
                "DELETE FROM steps WHERE session = ?1 AND idx >= ?2",
                params![id, idx as i64],
            )?;
            c.execute(
                "INSERT INTO steps (session, idx, record, state) VALUES (?1, ?2, ?3, ?4)",
                params![id, idx as i64, text, state],
            )?;
            c.execute(
                "UPDATE sessions SET touched = ?2 WHERE id = ?1",
                params![id, now],
            )?;
            Ok(())
        }))
        .await
    }

    /// Keeps the first `steps` steps and the marks at or before them.
    pub async fn truncate(&self, id: &str, steps: usize) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(Box::new(move |c| {
            c.execute(
                "DELETE FROM steps WHERE session = ?1 AND idx >= ?2",
                params![id, steps as i64],
            )?;
            c.execute(
                "DELETE FROM snapshots WHERE session = ?1 AND steps > ?2",
                params![id, steps as i64],
            )?;
            Ok(())
        }))
        .await
    }

    /// Records a mark.
    pub async fn snapshot(&self, id: &str, name: &str, steps: usize) -> Result<(), StoreError> {
        let (id, name) = (id.to_owned(), name.to_owned());
        self.write(Box::new(move |c| {
            c.execute(
                "INSERT OR REPLACE INTO snapshots (session, name, steps) VALUES (?1, ?2, ?3)",
                params![id, name, steps as i64],
            )?;
            Ok(())
        }))
        .await
    }

    /// Removes a session and everything of it.
    pub async fn delete(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(Box::new(move |c| {
            c.execute("DELETE FROM sessions WHERE id = ?1", params![id])?;
            Ok(())
        }))
        .await
    }

    /// Copies a session under a new id (a fork).
    pub async fn fork(&self, from: &str, to: &str, now: f64) -> Result<(), StoreError> {
        let (from, to) = (from.to_owned(), to.to_owned());
        self.write(Box::new(move |c| {
            c.execute(
                "INSERT INTO sessions (id, request, initial, touched) SELECT ?2, request, initial, ?3 FROM sessions WHERE id = ?1",
                params![from, to, now],
            )?;
            c.execute(
                "INSERT INTO steps (session, idx, record, state) SELECT ?2, idx, record, state FROM steps WHERE session = ?1",
                params![from, to],
            )?;
            c.execute(
                "INSERT INTO snapshots (session, name, steps) SELECT ?2, name, steps FROM snapshots WHERE session = ?1",
                params![from, to],
            )?;
            Ok(())
        }))
        .await
    }

    /// Every stored session, steps and states resolved.
    pub fn load_all(&self) -> Result<Vec<StoredSession>, StoreError> {
        self.read(|c| {
            let mut out = Vec::new();
            let mut sessions =
                c.prepare("SELECT id, request, initial, touched FROM sessions ORDER BY id")?;
            let rows: Vec<(String, String, String, f64)> = sessions
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                .collect::<Result<_, _>>()?;
            for (id, request, initial, touched) in rows {
                let mut stmt =
                    c.prepare("SELECT record, state FROM steps WHERE session = ?1 ORDER BY idx")?;
                let steps: Vec<(String, Option<String>)> = stmt
                    .query_map(params![id], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()?;
                let mut stmt = c.prepare("SELECT name, steps FROM snapshots WHERE session = ?1")?;
                let snapshots: BTreeMap<String, usize> = stmt
                    .query_map(params![id], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as usize))
                    })?
                    .collect::<Result<_, _>>()?;
                out.push(stored_session(
                    id, &request, &initial, touched, steps, snapshots,
                )?);
            }
            Ok(out)
        })
    }
}

/// A stored session from its rows: the steps' states resolved (a step without a state left
/// the one before it).
pub(crate) fn stored_session(
    id: String,
    request: &str,
    initial: &str,
    touched: f64,
    steps: Vec<(String, Option<String>)>,
    snapshots: BTreeMap<String, usize>,
) -> Result<StoredSession, StoreError> {
    let corrupt =
        |what: &str, e: serde_json::Error| StoreError::Corrupt(id.clone(), format!("{what}: {e}"));
    let request: Value = serde_json::from_str(request).map_err(|e| corrupt("request", e))?;
    let initial: Value = serde_json::from_str(initial).map_err(|e| corrupt("initial state", e))?;
    let mut state = Arc::new(initial.clone());
    let mut records = Vec::new();
    for (k, (record, after)) in steps.into_iter().enumerate() {
        let mut record: StepRecord =
            serde_json::from_str(&record).map_err(|e| corrupt(&format!("step {k}"), e))?;
        if let Some(after) = after {
            state = Arc::new(
                serde_json::from_str(&after)
                    .map_err(|e| corrupt(&format!("state after step {k}"), e))?,
            );
        }
        record.state_after = Arc::clone(&state);
        records.push(record);
    }
    Ok(StoredSession {
        id,
        request,
        initial,
        steps: records,
        snapshots,
        touched,
    })
}

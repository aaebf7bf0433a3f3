//! Sessions persisted in SQLite: a restart loses nothing committed. Each session row holds
//! how it was created and its initial state; each step row its record and, when the step
//! changed the state, the state after it (an unchanged state is the one before). Snapshots are
//! rows of (session, name, step count). Writes go through one connection in WAL mode.

use envsim_sim::session::StepRecord;
use rusqlite::{params, Connection, OptionalExtension};
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
    /// SQLite.
    #[error("session store: {0}")]
    Sql(#[from] rusqlite::Error),
    /// A stored value that does not read back.
    #[error("session store: session {0}: {1}")]
    Corrupt(String, String),
}

/// The SQLite store, shared.
#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
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
";

impl Store {
    /// Opens (creating when absent) the store at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let conn = Connection::open(path)?;
        conn.execute_batch(SCHEMA)?;
        Ok(Store {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// A store in memory (nothing survives the process).
    pub fn in_memory() -> Result<Store, StoreError> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(SCHEMA)?;
        Ok(Store {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        // A panic while holding the lock cannot leave SQLite half-written (each write is one
        // statement or one transaction), so a poisoned lock is still usable.
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut conn)
    }

    /// Records a new session.
    pub fn create(
        &self,
        id: &str,
        request: &Value,
        initial: &Value,
        now: f64,
    ) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO sessions (id, request, initial, touched) VALUES (?1, ?2, ?3, ?4)",
                params![id, request.to_string(), initial.to_string(), now],
            )?;
            Ok(())
        })
    }

    /// Records step `idx` (dropping any stored step from `idx` on, as after a rollback), and
    /// the state after it when it changed.
    pub fn append(
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
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute(
                "DELETE FROM steps WHERE session = ?1 AND idx >= ?2",
                params![id, idx as i64],
            )?;
            tx.execute(
                "INSERT INTO steps (session, idx, record, state) VALUES (?1, ?2, ?3, ?4)",
                params![id, idx as i64, text, state],
            )?;
            tx.execute(
                "UPDATE sessions SET touched = ?2 WHERE id = ?1",
                params![id, now],
            )?;
            tx.commit()?;
            Ok(())
        })
    }

    /// Keeps the first `steps` steps and the marks at or before them.
    pub fn truncate(&self, id: &str, steps: usize) -> Result<(), StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute(
                "DELETE FROM steps WHERE session = ?1 AND idx >= ?2",
                params![id, steps as i64],
            )?;
            tx.execute(
                "DELETE FROM snapshots WHERE session = ?1 AND steps > ?2",
                params![id, steps as i64],
            )?;
            tx.commit()?;
            Ok(())
        })
    }

    /// Records a mark.
    pub fn snapshot(&self, id: &str, name: &str, steps: usize) -> Result<(), StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT OR REPLACE INTO snapshots (session, name, steps) VALUES (?1, ?2, ?3)",
                params![id, name, steps as i64],
            )?;
            Ok(())
        })
    }

    /// Removes a session and everything of it.
    pub fn delete(&self, id: &str) -> Result<bool, StoreError> {
        self.with(|c| Ok(c.execute("DELETE FROM sessions WHERE id = ?1", params![id])? > 0))
    }

    /// Copies a session under a new id (a fork).
    pub fn fork(&self, from: &str, to: &str, now: f64) -> Result<(), StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute(
                "INSERT INTO sessions (id, request, initial, touched) SELECT ?2, request, initial, ?3 FROM sessions WHERE id = ?1",
                params![from, to, now],
            )?;
            tx.execute(
                "INSERT INTO steps (session, idx, record, state) SELECT ?2, idx, record, state FROM steps WHERE session = ?1",
                params![from, to],
            )?;
            tx.execute(
                "INSERT INTO snapshots (session, name, steps) SELECT ?2, name, steps FROM snapshots WHERE session = ?1",
                params![from, to],
            )?;
            tx.commit()?;
            Ok(())
        })
    }

    /// Every stored session, steps and states resolved.
    pub fn load_all(&self) -> Result<Vec<StoredSession>, StoreError> {
        self.with(|c| {
            let mut out = Vec::new();
            let mut sessions =
                c.prepare("SELECT id, request, initial, touched FROM sessions ORDER BY id")?;
            let rows: Vec<(String, String, String, f64)> = sessions
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                .collect::<Result<_, _>>()?;
            for (id, request, initial, touched) in rows {
                let corrupt = |what: &str, e: serde_json::Error| {
                    StoreError::Corrupt(id.clone(), format!("{what}: {e}"))
                };
                let request: Value =
                    serde_json::from_str(&request).map_err(|e| corrupt("request", e))?;
                let initial: Value =
                    serde_json::from_str(&initial).map_err(|e| corrupt("initial state", e))?;
                let mut stmt =
                    c.prepare("SELECT record, state FROM steps WHERE session = ?1 ORDER BY idx")?;
                let steps: Vec<(String, Option<String>)> = stmt
                    .query_map(params![id], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()?;
                let mut state = Arc::new(initial.clone());
                let mut records = Vec::new();
                for (k, (record, after)) in steps.into_iter().enumerate() {
                    let mut record: StepRecord = serde_json::from_str(&record)
                        .map_err(|e| corrupt(&format!("step {k}"), e))?;
                    if let Some(after) = after {
                        state = Arc::new(
                            serde_json::from_str(&after)
                                .map_err(|e| corrupt(&format!("state after step {k}"), e))?,
                        );
                    }
                    record.state_after = Arc::clone(&state);
                    records.push(record);
                }
                let mut stmt = c.prepare("SELECT name, steps FROM snapshots WHERE session = ?1")?;
                let snapshots: BTreeMap<String, usize> = stmt
                    .query_map(params![id], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as usize))
                    })?
                    .collect::<Result<_, _>>()?;
                out.push(StoredSession {
                    id: id.clone(),
                    request,
                    initial,
                    steps: records,
                    snapshots,
                    touched,
                });
            }
            Ok(out)
        })
    }

    /// Whether a session is stored.
    pub fn has(&self, id: &str) -> Result<bool, StoreError> {
        self.with(|c| {
            Ok(
                c.query_row("SELECT 1 FROM sessions WHERE id = ?1", params![id], |_| {
                    Ok(())
                })
                .optional()?
                .is_some(),
            )
        })
    }
}

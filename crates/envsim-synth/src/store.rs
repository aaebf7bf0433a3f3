//! The synthesis store: one SQLite file (WAL) holding runs and their tasks, the same design as
//! the evaluation store. A run is keyed by the fingerprint of its configuration and tasks; its
//! tasks are stored up front as `pending`, and each finished trajectory is committed as it
//! arrives (`done`, with its record) or `failed` (with the error), so a killed run loses only
//! what was in flight and a rerun with the same settings continues with the tasks that are not
//! done.

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::Path;

/// A store error, with the file.
#[derive(Debug, thiserror::Error)]
#[error("synthesis store {path}: {message}")]
pub struct StoreError {
    /// The file.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

/// The synthesis store.
pub struct SynthStore {
    connection: Connection,
    path: String,
}

/// A task's state in the store.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredTask {
    /// Position in the run.
    pub index: usize,
    /// The task (JSON).
    pub task: Value,
    /// `pending`, `done` or `failed`.
    pub status: String,
    /// The trajectory record, when done.
    pub record: Option<Value>,
    /// The error, when failed.
    pub error: Option<String>,
}

/// The fingerprint of a run: SHA-256 of its configuration and tasks (canonical JSON).
pub fn fingerprint(config: &Value, tasks: &[Value]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(config.to_string().as_bytes());
    for t in tasks {
        hasher.update(b"\n");
        hasher.update(t.to_string().as_bytes());
    }
    envsim_core::hex::encode(&hasher.finalize())
}

impl SynthStore {
    /// Opens (creating) the store.
    pub fn open(path: &Path) -> Result<SynthStore, StoreError> {
        let name = path.display().to_string();
        let err = |e: rusqlite::Error| StoreError {
            path: name.clone(),
            message: e.to_string(),
        };
        let connection = Connection::open(path).map_err(err)?;
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL;
                 PRAGMA synchronous = NORMAL;
                 CREATE TABLE IF NOT EXISTS synth_runs (
                     hash TEXT PRIMARY KEY, config TEXT NOT NULL, created TEXT NOT NULL);
                 CREATE TABLE IF NOT EXISTS synth_tasks (
                     run TEXT NOT NULL, idx INTEGER NOT NULL, task TEXT NOT NULL,
                     status TEXT NOT NULL, record TEXT, error TEXT,
                     PRIMARY KEY (run, idx));",
            )
            .map_err(err)?;
        Ok(SynthStore {
            connection,
            path: name,
        })
    }

    fn error(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError {
            path: self.path.clone(),
            message: e.to_string(),
        }
    }

    /// Creates the run `hash` with its tasks as pending, unless it exists; returns whether it
    /// existed (a resumed run).
    pub fn begin(
        &mut self,
        hash: &str,
        config: &Value,
        tasks: &[Value],
    ) -> Result<bool, StoreError> {
        let exists: Option<String> = self
            .connection
            .query_row("SELECT hash FROM synth_runs WHERE hash = ?1", [hash], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| self.error(e))?;
        if exists.is_some() {
            return Ok(true);
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let tx = self.connection.transaction().map_err(|e| StoreError {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        tx.execute(
            "INSERT INTO synth_runs (hash, config, created) VALUES (?1, ?2, ?3)",
            params![hash, config.to_string(), now.to_string()],
        )
        .map_err(|e| StoreError {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        for (i, task) in tasks.iter().enumerate() {
            tx.execute(
                "INSERT INTO synth_tasks (run, idx, task, status) VALUES (?1, ?2, ?3, 'pending')",
                params![hash, i as i64, task.to_string()],
            )
            .map_err(|e| StoreError {
                path: self.path.clone(),
                message: e.to_string(),
            })?;
        }
        tx.commit().map_err(|e| self.error(e))?;
        Ok(false)
    }

    /// The run's tasks in order.
    pub fn tasks(&self, hash: &str) -> Result<Vec<StoredTask>, StoreError> {
        let mut statement = self
            .connection
            .prepare(
                "SELECT idx, task, status, record, error FROM synth_tasks WHERE run = ?1 ORDER BY idx",
            )
            .map_err(|e| self.error(e))?;
        let rows = statement
            .query_map([hash], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, Option<String>>(4)?,
                ))
            })
            .map_err(|e| self.error(e))?;
        let mut out = Vec::new();
        for row in rows {
            let (idx, task, status, record, error) = row.map_err(|e| self.error(e))?;
            let parse = |text: &str, what: &str| {
                serde_json::from_str::<Value>(text).map_err(|e| {
                    self.error(format!("task {idx}: the stored {what} is not JSON: {e}"))
                })
            };
            out.push(StoredTask {
                index: idx as usize,
                task: parse(&task, "task")?,
                status,
                record: record.as_deref().map(|r| parse(r, "record")).transpose()?,
                error,
            });
        }
        Ok(out)
    }

    /// Commits a finished task.
    pub fn done(&self, hash: &str, index: usize, record: &Value) -> Result<(), StoreError> {
        self.connection
            .execute(
                "UPDATE synth_tasks SET status = 'done', record = ?3, error = NULL WHERE run = ?1 AND idx = ?2",
                params![hash, index as i64, record.to_string()],
            )
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// Commits a failed task.
    pub fn failed(&self, hash: &str, index: usize, error: &str) -> Result<(), StoreError> {
        self.connection
            .execute(
                "UPDATE synth_tasks SET status = 'failed', error = ?3 WHERE run = ?1 AND idx = ?2",
                params![hash, index as i64, error],
            )
            .map_err(|e| self.error(e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_run_resumes_with_what_is_not_done() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite");
        let tasks = vec![json!({"id": "a"}), json!({"id": "b"}), json!({"id": "c"})];
        let config = json!({"agent": "scripted"});
        let hash = fingerprint(&config, &tasks);
        assert_ne!(hash, fingerprint(&json!({"agent": "other"}), &tasks));
        assert_ne!(hash, fingerprint(&config, &tasks[..2]));
        {
            let mut store = SynthStore::open(&path).unwrap();
            assert!(!store.begin(&hash, &config, &tasks).unwrap());
            store
                .done(&hash, 0, &json!({"id": "a", "steps": []}))
                .unwrap();
            store.failed(&hash, 1, "connection refused").unwrap();
        }
        let mut store = SynthStore::open(&path).unwrap();
        assert!(store.begin(&hash, &config, &tasks).unwrap());
        let stored = store.tasks(&hash).unwrap();
        let statuses: Vec<&str> = stored.iter().map(|t| t.status.as_str()).collect();
        assert_eq!(statuses, ["done", "failed", "pending"]);
        assert_eq!(stored[0].record.as_ref().unwrap()["id"], "a");
        assert_eq!(stored[1].error.as_deref(), Some("connection refused"));
        assert_eq!(stored[2].task, json!({"id": "c"}));
        store.done(&hash, 1, &json!({"id": "b"})).unwrap();
        assert_eq!(store.tasks(&hash).unwrap()[1].error, None);
    }

    #[test]
    fn an_unwritable_store_is_named() {
        let e = SynthStore::open(Path::new("/nonexistent-dir/x.sqlite"))
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .starts_with("synthesis store /nonexistent-dir/x.sqlite:"),
            "{e}"
        );
    }
}

//! Sessions persisted in PostgreSQL (`envsim serve --db postgres://…`): the same tables and
//! operations as the SQLite store, through a small pool of connections; a write that takes
//! several statements (a step replacing the ones after it, a fork) is one transaction. The
//! tables are made at connection under an advisory lock, so servers started together against
//! one database do not race to make them.
//!
//! Several servers may share the database: every change of a session (a step, a rollback, a
//! mark) raises its `version`, and a step is committed only if the version is still the one
//! its server stepped from — otherwise another server changed the session first, and the step
//! is refused ([`StoreError::Conflict`]) instead of overwriting it. A server that finds the
//! version moved reloads the session before it steps ([`PgStore::load`]).

use super::{stored_session, StoreError, StoredSession};
use deadpool_postgres::{Pool, Runtime};
use envsim_sim::session::StepRecord;
use serde_json::Value;
use std::collections::BTreeMap;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    request TEXT NOT NULL,
    initial TEXT NOT NULL,
    touched DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS steps (
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    idx BIGINT NOT NULL,
    record TEXT NOT NULL,
    state TEXT,
    PRIMARY KEY (session, idx)
);
CREATE TABLE IF NOT EXISTS snapshots (
    session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    steps BIGINT NOT NULL,
    PRIMARY KEY (session, name)
);
CREATE TABLE IF NOT EXISTS episodes (
    session TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    info TEXT NOT NULL
);
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS version BIGINT NOT NULL DEFAULT 0;
";

/// The key of the advisory lock the schema is made under (any constant of this program's).
const SCHEMA_LOCK: i64 = 0x656e_7673_696d;

/// Connections a server keeps open at most.
const POOL_SIZE: usize = 16;

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        // A refusal of the database names an SQLSTATE; losing the server does not. Of the
        // refusals, those of a server going away or out of room pass (08: connection, 53:
        // resources such as a full disk, 57P: shutting down or starting).
        let passing = match e.as_db_error() {
            None => true,
            Some(db) => {
                let code = db.code().code();
                code.starts_with("08") || code.starts_with("53") || code.starts_with("57P")
            }
        };
        if passing {
            StoreError::Unavailable(format!("PostgreSQL: {e}"))
        } else {
            StoreError::Postgres(e.to_string())
        }
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        // No connection to be had (the server down, restarting, or every connection busy
        // past the wait).
        StoreError::Unavailable(format!("PostgreSQL: {e}"))
    }
}

/// The PostgreSQL store, shared.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`) and
    /// makes the tables when they are missing.
    pub async fn connect(url: &str) -> Result<PgStore, StoreError> {
        let mut config = deadpool_postgres::Config::new();
        config.url = Some(url.to_owned());
        // Bounded waits: while the database is away a request fails within seconds (503)
        // instead of hanging, and the pool connects again once it is back.
        let mut pool = deadpool_postgres::PoolConfig::new(POOL_SIZE);
        pool.timeouts = deadpool_postgres::Timeouts {
            wait: Some(std::time::Duration::from_secs(10)),
            create: Some(std::time::Duration::from_secs(5)),
            recycle: Some(std::time::Duration::from_secs(5)),
        };
        config.pool = Some(pool);
        config.connect_timeout = Some(std::time::Duration::from_secs(5));
        let pool = config
            .create_pool(Some(Runtime::Tokio1), tokio_postgres::NoTls)
            .map_err(|e| StoreError::Postgres(format!("{}: {e}", shown(url))))?;
        let mut client = pool
            .get()
            .await
            .map_err(|e| StoreError::Postgres(format!("cannot connect to {}: {e}", shown(url))))?;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
            .await?;
        tx.batch_execute(SCHEMA).await?;
        tx.commit().await?;
        Ok(PgStore { pool })
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        Ok(self.pool.get().await?)
    }

    /// Records a new session.
    pub async fn create(
        &self,
        id: &str,
        request: &Value,
        initial: &Value,
        now: f64,
    ) -> Result<(), StoreError> {
        self.client()
            .await?
            .execute(
                "INSERT INTO sessions (id, request, initial, touched) VALUES ($1, $2, $3, $4)",
                &[&id, &request.to_string(), &initial.to_string(), &now],
            )
            .await?;
        Ok(())
    }

    /// The session's version (`None`: no such session).
    pub async fn version(&self, id: &str) -> Result<Option<u64>, StoreError> {
        let row = self
            .client()
            .await?
            .query_opt("SELECT version FROM sessions WHERE id = $1", &[&id])
            .await?;
        Ok(row.map(|r| r.get::<_, i64>(0) as u64))
    }

    /// One session and its version (`None`: no such session).
    pub async fn load(&self, id: &str) -> Result<Option<(StoredSession, u64)>, StoreError> {
        let mut client = self.client().await?;
        // One snapshot of the session: its row, steps and marks read in one transaction.
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let Some(row) = tx
            .query_opt(
                "SELECT request, initial, touched, version FROM sessions WHERE id = $1",
                &[&id],
            )
            .await?
        else {
            return Ok(None);
        };
        let steps = tx
            .query(
                "SELECT record, state FROM steps WHERE session = $1 ORDER BY idx",
                &[&id],
            )
            .await?
            .into_iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let marks = tx
            .query(
                "SELECT name, steps FROM snapshots WHERE session = $1",
                &[&id],
            )
            .await?
            .into_iter()
            .map(|r| (r.get(0), r.get::<_, i64>(1) as usize))
            .collect();
        tx.commit().await?;
        let (request, initial): (String, String) = (row.get(0), row.get(1));
        let session = stored_session(id.to_owned(), &request, &initial, row.get(2), steps, marks)?;
        Ok(Some((session, row.get::<_, i64>(3) as u64)))
    }

    /// Raises the session's version if it is still `expected` (any version when `None`), in
    /// `tx`; returns the new one, or [`StoreError::Conflict`].
    async fn bump(
        tx: &deadpool_postgres::Transaction<'_>,
        id: &str,
        expected: Option<u64>,
        now: f64,
    ) -> Result<u64, StoreError> {
        let row = tx
            .query_opt(
                "UPDATE sessions SET version = version + 1, touched = $3
                 WHERE id = $1 AND ($2::BIGINT IS NULL OR version = $2)
                 RETURNING version",
                &[&id, &expected.map(|v| v as i64), &now],
            )
            .await?;
        match row {
            Some(row) => Ok(row.get::<_, i64>(0) as u64),
            None => Err(StoreError::Conflict(id.to_owned())),
        }
    }

    /// Records step `idx` (dropping any stored step from `idx` on), and the state after it
    /// when it changed, if the session is still at version `expected`; returns its new
    /// version.
    pub async fn append(
        &self,
        id: &str,
        idx: usize,
        record: &StepRecord,
        changed: bool,
        now: f64,
        expected: Option<u64>,
    ) -> Result<u64, StoreError> {
        let text = serde_json::to_string(record)
            .map_err(|e| StoreError::Corrupt(id.to_owned(), e.to_string()))?;
        let state = changed.then(|| record.state_after.to_string());
        let idx = idx as i64;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // The version first: a step of a session another server changed meanwhile writes
        // nothing.
        let version = PgStore::bump(&tx, id, expected, now).await?;
        tx.execute(
            "DELETE FROM steps WHERE session = $1 AND idx >= $2",
            &[&id, &idx],
        )
        .await?;
        tx.execute(
            "INSERT INTO steps (session, idx, record, state) VALUES ($1, $2, $3, $4)",
            &[&id, &idx, &text, &state],
        )
        .await?;
        tx.commit().await?;
        Ok(version)
    }

    /// Keeps the first `steps` steps and the marks at or before them; returns the session's
    /// new version.
    pub async fn truncate(&self, id: &str, steps: usize, now: f64) -> Result<u64, StoreError> {
        let steps = steps as i64;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let version = PgStore::bump(&tx, id, None, now).await?;
        tx.execute(
            "DELETE FROM steps WHERE session = $1 AND idx >= $2",
            &[&id, &steps],
        )
        .await?;
        tx.execute(
            "DELETE FROM snapshots WHERE session = $1 AND steps > $2",
            &[&id, &steps],
        )
        .await?;
        tx.commit().await?;
        Ok(version)
    }

    /// Records a mark; returns the session's new version.
    pub async fn snapshot(
        &self,
        id: &str,
        name: &str,
        steps: usize,
        now: f64,
    ) -> Result<u64, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let version = PgStore::bump(&tx, id, None, now).await?;
        tx.execute(
            "INSERT INTO snapshots (session, name, steps) VALUES ($1, $2, $3)
             ON CONFLICT (session, name) DO UPDATE SET steps = excluded.steps",
            &[&id, &name, &(steps as i64)],
        )
        .await?;
        tx.commit().await?;
        Ok(version)
    }

    /// Removes a session and everything of it.
    pub async fn delete(&self, id: &str) -> Result<(), StoreError> {
        self.client()
            .await?
            .execute("DELETE FROM sessions WHERE id = $1", &[&id])
            .await?;
        Ok(())
    }

    /// Removes a session unused since `before` (seconds since the epoch).
    pub async fn delete_if_idle(&self, id: &str, before: f64) -> Result<(), StoreError> {
        self.client()
            .await?
            .execute(
                "DELETE FROM sessions WHERE id = $1 AND touched < $2",
                &[&id, &before],
            )
            .await?;
        Ok(())
    }

    /// Copies a session under a new id (a fork).
    pub async fn fork(&self, from: &str, to: &str, now: f64) -> Result<(), StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute(
            "INSERT INTO sessions (id, request, initial, touched) SELECT $2, request, initial, $3 FROM sessions WHERE id = $1",
            &[&from, &to, &now],
        )
        .await?;
        tx.execute(
            "INSERT INTO steps (session, idx, record, state) SELECT $2, idx, record, state FROM steps WHERE session = $1",
            &[&from, &to],
        )
        .await?;
        tx.execute(
            "INSERT INTO snapshots (session, name, steps) SELECT $2, name, steps FROM snapshots WHERE session = $1",
            &[&from, &to],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records (replacing) what an RL episode's session is.
    pub async fn put_episode(&self, id: &str, info: &Value) -> Result<(), StoreError> {
        self.client()
            .await?
            .execute(
                // Never back: a server that stepped the episode from an older copy (a request
                // its client gave up on, finished late) does not overwrite the steps counted
                // since.
                "INSERT INTO episodes (session, info) VALUES ($1, $2)
                 ON CONFLICT (session) DO UPDATE SET info = excluded.info
                 WHERE json_array_length((episodes.info::json) -> 'rewards')
                    <= json_array_length((excluded.info::json) -> 'rewards')",
                &[&id, &info.to_string()],
            )
            .await?;
        Ok(())
    }

    /// What [`PgStore::put_episode`] recorded of session `id`, when anything.
    pub async fn load_episode(&self, id: &str) -> Result<Option<Value>, StoreError> {
        let row = self
            .client()
            .await?
            .query_opt("SELECT info FROM episodes WHERE session = $1", &[&id])
            .await?;
        row.map(|r| {
            serde_json::from_str(&r.get::<_, String>(0))
                .map_err(|e| StoreError::Corrupt(id.to_owned(), format!("its episode: {e}")))
        })
        .transpose()
    }

    /// Every stored episode: session id → what [`PgStore::put_episode`] recorded.
    pub async fn load_episodes(&self) -> Result<BTreeMap<String, Value>, StoreError> {
        let rows = self
            .client()
            .await?
            .query("SELECT session, info FROM episodes", &[])
            .await?;
        let mut out = BTreeMap::new();
        for row in rows {
            let (id, info): (String, String) = (row.get(0), row.get(1));
            let value = serde_json::from_str(&info)
                .map_err(|e| StoreError::Corrupt(id.clone(), format!("its episode: {e}")))?;
            out.insert(id, value);
        }
        Ok(out)
    }

    /// Every session: id, environment, last use, by id.
    pub async fn list(&self) -> Result<Vec<(String, Value, f64)>, StoreError> {
        let rows = self
            .client()
            .await?
            .query("SELECT id, request, touched FROM sessions ORDER BY id", &[])
            .await?;
        rows.into_iter()
            .map(|row| {
                let id: String = row.get(0);
                let request: Value = serde_json::from_str(&row.get::<_, String>(1))
                    .map_err(|e| StoreError::Corrupt(id.clone(), format!("request: {e}")))?;
                Ok((id, request["env"].clone(), row.get(2)))
            })
            .collect()
    }

    /// Every stored session, steps and states resolved.
    pub async fn load_all(&self) -> Result<Vec<StoredSession>, StoreError> {
        let client = self.client().await?;
        let sessions = client
            .query(
                "SELECT id, request, initial, touched FROM sessions ORDER BY id",
                &[],
            )
            .await?;
        let mut steps: BTreeMap<String, Vec<(String, Option<String>)>> = BTreeMap::new();
        for row in client
            .query(
                "SELECT session, record, state FROM steps ORDER BY session, idx",
                &[],
            )
            .await?
        {
            steps
                .entry(row.get(0))
                .or_default()
                .push((row.get(1), row.get(2)));
        }
        let mut marks: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
        for row in client
            .query("SELECT session, name, steps FROM snapshots", &[])
            .await?
        {
            marks
                .entry(row.get(0))
                .or_default()
                .insert(row.get(1), row.get::<_, i64>(2) as usize);
        }
        let mut out = Vec::with_capacity(sessions.len());
        for row in sessions {
            let id: String = row.get(0);
            let (request, initial): (String, String) = (row.get(1), row.get(2));
            out.push(stored_session(
                id.clone(),
                &request,
                &initial,
                row.get(3),
                steps.remove(&id).unwrap_or_default(),
                marks.remove(&id).unwrap_or_default(),
            )?);
        }
        Ok(out)
    }
}

/// A database URL for messages: without its password.
pub fn shown(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            super::shown("postgres://envsim:secret@db:5432/envsim"),
            "postgres://envsim:***@db:5432/envsim"
        );
        assert_eq!(
            super::shown("postgres://envsim@db/envsim"),
            "postgres://envsim@db/envsim"
        );
    }
}

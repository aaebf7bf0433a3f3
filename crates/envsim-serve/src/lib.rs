//! # envsim-serve
//!
//! Simulated environment sessions over HTTP (axum) and MCP (the official Rust SDK, Streamable
//! HTTP): create a session (environment, simulators, anchoring, seed, initial state), step it,
//! read its state, tools and trajectory, mark, fork and roll it back, delete it. Every session's
//! tools are served over MCP at `/sessions/{id}/mcp` and as OpenAI tool schemas at
//! `/sessions/{id}/tools`; the server's own OpenAPI document is `/openapi.json`.
//!
//! Sessions persist in SQLite ([`store`]); a restart loads them back. Steps of one session run
//! one at a time (a lock per session); sessions step concurrently. Requests need
//! `Authorization: Bearer TOKEN` when a token is set (required unless bound to loopback);
//! bodies and states have size limits with clear 4xx errors; idle sessions expire.
//!
//! The server knows no corpus and no model: its [`Host`] (the CLI) resolves environment names
//! and builds simulators.

pub mod mcp;
pub mod openenv;
pub mod request;
pub mod store;
pub mod verifiers;

pub use request::SessionRequest;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use envsim_sim::environment::Environment;
use envsim_sim::session::{Backends, Session, SessionConfig, StepRecord};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use store::Store;
use tokio::sync::{Mutex, RwLock};

/// What the server asks of its host.
pub trait Host: Send + Sync + 'static {
    /// The environment `name` (without its code when `no_code`), and its default initial
    /// state. May take seconds (learning walks); called off the async threads.
    fn environment(&self, name: &str, no_code: bool) -> Result<(Arc<Environment>, Value), String>;
    /// The simulators a session asks for (`request`: the creation body, checked) over `env`.
    fn backends(&self, request: &SessionRequest, env: &Environment) -> Result<Backends, String>;
    /// Something the operator should hear of that no request is waiting for (the library
    /// prints nothing itself). The default drops it.
    fn notice(&self, _event: ServerEvent) {}
}

/// What the server tells its host beside the requests it answers.
#[derive(Clone, Debug, PartialEq)]
pub enum ServerEvent {
    /// A stored session could not be made again at start (its environment is gone, say); it
    /// stays in the store.
    NotRestored {
        /// The session.
        id: String,
        /// Why.
        error: String,
    },
    /// An idle session was dropped from memory but its deletion from the store failed.
    ExpiredNotDeleted {
        /// The session.
        id: String,
        /// Why.
        error: String,
    },
}

impl std::fmt::Display for ServerEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerEvent::NotRestored { id, error } => {
                write!(f, "session {id}: not restored: {error}")
            }
            ServerEvent::ExpiredNotDeleted { id, error } => {
                write!(
                    f,
                    "session {id}: expired, but not deleted from the store: {error}"
                )
            }
        }
    }
}

/// The server's limits and settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Bearer token every request but `/health` and `/openapi.json` needs (`None`: none).
    pub token: Option<String>,
    /// The largest request body.
    pub max_body_bytes: usize,
    /// The largest state a session may hold (its JSON text).
    pub max_state_bytes: usize,
    /// Sessions unused this long are deleted.
    pub idle_ttl: Duration,
    /// The host names the MCP endpoint accepts (`None`: any; set for loopback binds, against
    /// DNS rebinding).
    pub mcp_allowed_hosts: Option<Vec<String>>,
    /// Task sets served as OpenEnv environments at `/openenv/{name}` ([`openenv`]).
    pub task_sets: Vec<openenv::TaskSet>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            token: None,
            max_body_bytes: 8 << 20,
            max_state_bytes: 16 << 20,
            idle_ttl: Duration::from_secs(24 * 3600),
            mcp_allowed_hosts: Some(vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]),
            task_sets: Vec::new(),
        }
    }
}

/// One live session.
pub struct Entry {
    /// The session (a step holds the lock: steps of one session run one at a time).
    pub session: Mutex<Session>,
    /// The request that created it.
    pub request: Value,
    /// Its environment (read without the session's lock: its tools).
    pub env: Arc<Environment>,
    /// Seconds since the epoch of its last use.
    touched: AtomicU64,
    /// The version of the session in a shared store this copy is at (changed under the
    /// session's lock).
    version: AtomicU64,
}

impl Entry {
    fn new(session: Session, request: Value) -> Arc<Entry> {
        Arc::new(Entry {
            env: Arc::clone(session.env_arc()),
            session: Mutex::new(session),
            request,
            touched: AtomicU64::new(now() as u64),
            version: AtomicU64::new(0),
        })
    }

    fn touch(&self) {
        self.touched.store(now() as u64, Ordering::Relaxed);
    }
}

/// How a client names a step request, so that a retry of it is answered with the step it
/// took instead of taking another (a lost answer, a load balancer's retry, a replica that
/// died after committing).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepGuard {
    /// The request's idempotency key (`Idempotency-Key`): a step the session took for this
    /// key answers the request; the same key with another call is a 422.
    pub key: Option<String>,
    /// The number of steps the client believes the session has taken: the request is taken
    /// only at that step; one past it with this very call as the last step answers with that
    /// step; anything else is a 409 naming where the session is.
    pub expected_step: Option<usize>,
}

/// The longest idempotency key taken.
pub const MAX_KEY_LEN: usize = 255;

/// An idempotency key that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the idempotency key must be 1 to {MAX_KEY_LEN} visible ASCII characters (got {len} bytes)"
)]
pub struct BadKey {
    /// Its length in bytes.
    pub len: usize,
}

impl StepGuard {
    /// A guard of `key` (checked: 1 to [`MAX_KEY_LEN`] visible ASCII characters) and
    /// `expected_step`.
    pub fn new(key: Option<&str>, expected_step: Option<usize>) -> Result<StepGuard, BadKey> {
        if let Some(k) = key {
            if k.is_empty() || k.len() > MAX_KEY_LEN || !k.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(BadKey { len: k.len() });
            }
        }
        Ok(StepGuard {
            key: key.map(str::to_owned),
            expected_step,
        })
    }

    /// The step `session` (locked) already took for this request, when it took one; an error
    /// when the key was used for another call or the session is not where the client expects.
    fn taken(
        &self,
        id: &str,
        session: &Session,
        tool: &str,
        arguments: &Map<String, Value>,
    ) -> ApiResult<Option<Stepped>> {
        let steps = session.steps();
        if let Some(key) = &self.key {
            if let Some(k) = steps
                .iter()
                .position(|s| s.request_key.as_deref() == Some(key))
            {
                let record = &steps[k];
                if !record.is_call(tool, arguments) {
                    return Err(ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        format!(
                            "session {id:?}: the idempotency key {key:?} was used for step {} ({} with {}), not for {tool} with {}: a key names one request",
                            k + 1,
                            record.tool,
                            Value::Object(record.arguments.clone()),
                            Value::Object(arguments.clone())
                        ),
                    ));
                }
                return Ok(Some(Stepped {
                    record: Arc::clone(record),
                    steps: k + 1,
                    replayed: true,
                }));
            }
        }
        if let Some(expected) = self.expected_step {
            let at = steps.len();
            if at == expected {
                return Ok(None);
            }
            let last = steps.last().filter(|s| s.is_call(tool, arguments));
            // The same key, or none: a step taken under another key is another request.
            let same_request =
                last.is_some_and(|s| self.key.is_none() || s.request_key == self.key);
            if at == expected + 1 && same_request {
                return Ok(last.map(|record| Stepped {
                    record: Arc::clone(record),
                    steps: at,
                    replayed: true,
                }));
            }
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "session {id:?} has taken {at} steps, and the request expected {expected}: it was not taken; read the session's trajectory and step from where it is"
                ),
            ));
        }
        Ok(None)
    }
}

/// A step answered: taken now, or found taken for the same request before.
#[derive(Clone, Debug)]
pub struct Stepped {
    /// Its record.
    pub record: Arc<StepRecord>,
    /// The session's steps after it (its index plus one).
    pub steps: usize,
    /// Whether it was taken before, for an earlier try of this request.
    pub replayed: bool,
}

/// The server's state.
pub struct AppState {
    host: Arc<dyn Host>,
    store: Store,
    config: ServerConfig,
    sessions: RwLock<HashMap<String, Arc<Entry>>>,
    /// The MCP service of each session, made on first use.
    mcp: std::sync::Mutex<HashMap<String, mcp::McpService>>,
    /// The task sets served over OpenEnv, by name.
    openenv: HashMap<String, Arc<openenv::SetState>>,
    /// The bookkeeping of sessions that are OpenEnv episodes (a step holds its lock).
    episodes: std::sync::Mutex<HashMap<String, Arc<Mutex<openenv::Episode>>>>,
}

/// A standard mutex's guard, also after a panic elsewhere poisoned it (what it guards, maps of
/// held things, stays consistent: every change is one call).
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// An error answer: a status and a message, as `{"error": message}`.
#[derive(Debug)]
pub struct ApiError(StatusCode, String);

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError(status, message.into())
    }
}

/// Seconds a client is asked to wait before retrying a request the store could not take.
pub const RETRY_AFTER_S: u64 = 2;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.0, Json(json!({"error": self.1}))).into_response();
        if self.0 == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert("retry-after", RETRY_AFTER_S.into());
        }
        response
    }
}

impl ApiError {
    /// The store failed while doing `what` (the request and its session, in words): the
    /// status says whose fault it is, the message what the client should do.
    fn store(e: store::StoreError, what: impl std::fmt::Display) -> ApiError {
        use store::StoreError;
        match &e {
            StoreError::Unavailable(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{what}: {e}; nothing was stored: send the same request again in a few seconds (a step with the same Idempotency-Key)"),
            ),
            StoreError::Conflict(_) => ApiError::new(
                StatusCode::CONFLICT,
                format!("{what}: {e}; nothing was stored: read the session and decide"),
            ),
            StoreError::Corrupt(..) => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("{what}: {e}; the stored session does not read back and cannot be served (a server fault: report it)"),
            ),
            _ => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("{what}: {e}; nothing was stored (a server fault, not the request's: report it)"),
            ),
        }
    }
}

impl From<store::StoreError> for ApiError {
    fn from(e: store::StoreError) -> Self {
        ApiError::store(e, "the session store")
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// A JSON body read with its error located (line and column); a body past the size limit is
/// a 413 saying so.
fn body_json(body: &Result<Bytes, BytesRejection>) -> ApiResult<Value> {
    let bytes = match body {
        Ok(bytes) => bytes,
        Err(rejection) => {
            return Err(ApiError::new(
                rejection.status(),
                format!(
                    "the request body could not be read: {}",
                    rejection.body_text()
                ),
            ))
        }
    };
    if bytes.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("the request body is not valid JSON: {e}"),
        )
    })
}

impl AppState {
    /// A server over `store`, loading the sessions it holds (their environments and simulators
    /// made again by `host`; a session whose environment is gone is reported and skipped).
    pub async fn start(
        host: Arc<dyn Host>,
        store: Store,
        config: ServerConfig,
    ) -> Result<Arc<AppState>, String> {
        let mut openenv = HashMap::new();
        for set in &config.task_sets {
            if openenv
                .insert(
                    set.name.clone(),
                    Arc::new(openenv::SetState::new(set.clone())),
                )
                .is_some()
            {
                return Err(format!("two task sets are named {:?}", set.name));
            }
        }
        let state = Arc::new(AppState {
            host,
            store,
            config,
            sessions: RwLock::new(HashMap::new()),
            mcp: std::sync::Mutex::new(HashMap::new()),
            openenv,
            episodes: std::sync::Mutex::new(HashMap::new()),
        });
        // A shared store's sessions are loaded when asked for (a replica restarted under load
        // answers at once, however many sessions the database holds); a file's, all now.
        if state.store.is_shared() {
            return Ok(state);
        }
        let stored = state.store.load_all().await.map_err(|e| e.to_string())?;
        for s in stored {
            match state
                .rebuild(&s.request, s.initial, s.steps, s.snapshots)
                .await
            {
                Ok(entry) => {
                    entry.touched.store(s.touched as u64, Ordering::Relaxed);
                    state.sessions.write().await.insert(s.id, entry);
                }
                Err(e) => state.host.notice(ServerEvent::NotRestored {
                    id: s.id.clone(),
                    error: e.1,
                }),
            }
        }
        state.restore_episodes().await?;
        Ok(state)
    }

    /// Sessions held.
    pub async fn len(&self) -> usize {
        self.sessions.read().await.len()
    }

    /// Whether no session is held.
    pub async fn is_empty(&self) -> bool {
        self.len().await == 0
    }

    async fn environment(&self, request: &SessionRequest) -> ApiResult<(Arc<Environment>, Value)> {
        let (name, no_code) = (request.env.clone(), request.no_code);
        let host = Arc::clone(&self.host);
        // Learning an environment runs walks on a runtime of its own: a thread of its own.
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let _ = tx.send(host.environment(&name, no_code));
        });
        rx.await
            .map_err(|_| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the environment could not be loaded",
                )
            })?
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))
    }

    /// A session's entry from its creation request, stored steps and marks.
    async fn rebuild(
        &self,
        request: &Value,
        initial: Value,
        steps: Vec<StepRecord>,
        snapshots: std::collections::BTreeMap<String, usize>,
    ) -> ApiResult<Arc<Entry>> {
        let session = self.restore(request, initial, steps, snapshots).await?;
        Ok(Entry::new(session, request.clone()))
    }

    /// A session made again from its creation request, stored steps and marks.
    async fn restore(
        &self,
        request: &Value,
        initial: Value,
        steps: Vec<StepRecord>,
        snapshots: std::collections::BTreeMap<String, usize>,
    ) -> ApiResult<Session> {
        let parsed = SessionRequest::parse(request).map_err(|e| {
            ApiError::new(StatusCode::BAD_REQUEST, format!("the stored request: {e}"))
        })?;
        let (env, _) = self.environment(&parsed).await?;
        let backends = self
            .host
            .backends(&parsed, &env)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))?;
        let config = session_config(&parsed);
        Ok(Session::restore(
            env, backends, config, initial, steps, snapshots,
        ))
    }

    async fn entry(&self, id: &str) -> ApiResult<Arc<Entry>> {
        let held = self.sessions.read().await.get(id).cloned();
        let entry = match held {
            Some(entry) => entry,
            // A session another server made: loaded from the shared store.
            None => self.load_shared(id).await?.ok_or_else(|| {
                ApiError::new(StatusCode::NOT_FOUND, format!("no session {id:?}"))
            })?,
        };
        entry.touch();
        Ok(entry)
    }

    /// Session `id` as a shared store holds it — the session made again, its creation request
    /// and its version — with its episode's bookkeeping held (`None`: no such session).
    async fn read_shared(&self, id: &str) -> ApiResult<Option<(Session, Value, u64)>> {
        let Some((stored, version)) = self
            .store
            .load(id)
            .await
            .map_err(|e| ApiError::store(e, format!("reading session {id:?}")))?
        else {
            return Ok(None);
        };
        let session = self
            .restore(
                &stored.request,
                stored.initial,
                stored.steps,
                stored.snapshots,
            )
            .await?;
        let episode =
            self.store.load_episode(id).await.map_err(|e| {
                ApiError::store(e, format!("reading the episode of session {id:?}"))
            })?;
        if let Some(info) = episode {
            self.hold_episode(id, info)?;
        }
        Ok(Some((session, stored.request, version)))
    }

    /// Session `id` from a shared store, held from now on (`None`: there is none).
    async fn load_shared(&self, id: &str) -> ApiResult<Option<Arc<Entry>>> {
        let Some((session, request, version)) = self.read_shared(id).await? else {
            return Ok(None);
        };
        let entry = Entry::new(session, request);
        entry.version.store(version, Ordering::SeqCst);
        // Two requests may load it at once: the first one held wins.
        let mut sessions = self.sessions.write().await;
        Ok(Some(Arc::clone(
            sessions.entry(id.to_owned()).or_insert(entry),
        )))
    }

    /// Session `id`'s entry locked, as the shared store has it now ([`AppState::refresh`]).
    async fn fresh<'a>(
        &self,
        id: &str,
        entry: &'a Entry,
    ) -> ApiResult<tokio::sync::MutexGuard<'a, Session>> {
        let mut session = entry.session.lock().await;
        self.refresh(id, entry, &mut session).await?;
        Ok(session)
    }

    /// Makes `session` (of `entry`, locked) the shared store's version of session `id` when
    /// another server changed it; a session deleted there is dropped here (404).
    async fn refresh(&self, id: &str, entry: &Entry, session: &mut Session) -> ApiResult<()> {
        if !self.store.is_shared() {
            return Ok(());
        }
        let version = self
            .store
            .version(id)
            .await
            .map_err(|e| ApiError::store(e, format!("reading session {id:?}'s version")))?;
        match version {
            Some(v) if v == entry.version.load(Ordering::SeqCst) => Ok(()),
            _ => self.reload(id, entry, session).await,
        }
    }

    /// Reads session `id` again from the shared store into `session`.
    async fn reload(&self, id: &str, entry: &Entry, session: &mut Session) -> ApiResult<()> {
        let Some((read, _, version)) = self.read_shared(id).await? else {
            self.forget(id).await;
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no session {id:?} (deleted by another server)"),
            ));
        };
        *session = read;
        entry.version.store(version, Ordering::SeqCst);
        Ok(())
    }

    /// Drops session `id` from what this server holds (the session, its MCP service, its
    /// episode); returns its entry when it was held.
    async fn forget(&self, id: &str) -> Option<Arc<Entry>> {
        let removed = self.sessions.write().await.remove(id);
        self.mcp_services().remove(id);
        lock(&self.episodes).remove(id);
        removed
    }

    /// One step of session `id`: the tool must be one of the session's; the resulting state
    /// must fit the state limit (else the step is undone and the answer is 413). A request
    /// `guard`ed by a key the session has already stepped for, or by an expected step the
    /// session is one past with this very call, is answered with that step, not applied again
    /// ([`StepGuard`]).
    pub async fn step(
        &self,
        id: &str,
        tool: &str,
        arguments: &Map<String, Value>,
        guard: &StepGuard,
    ) -> ApiResult<Stepped> {
        let entry = self.entry(id).await?;
        if !entry
            .env
            .tools
            .iter()
            .any(|t| t["function"]["name"] == tool)
        {
            let names: Vec<&str> = entry
                .env
                .tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str())
                .collect();
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!(
                    "{tool:?} is not a tool of this session; its tools: {}",
                    names.join(", ")
                ),
            ));
        }
        let mut session = self.fresh(id, &entry).await?;
        if let Some(done) = guard.taken(id, &session, tool, arguments)? {
            return Ok(done);
        }
        let before = Arc::clone(session.state());
        let record = session
            .step_keyed(tool, arguments, guard.key.clone())
            .await
            .map_err(|e| ApiError::new(StatusCode::BAD_GATEWAY, e.to_string()))?;
        let changed = !Arc::ptr_eq(&before, &record.state_after);
        if changed {
            let size = record.state_after.to_string().len();
            if size > self.config.max_state_bytes {
                let n = session.steps().len() - 1;
                let _ = session.rollback_to(n);
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the step would make the state {size} bytes, over the limit of {}; it was undone",
                        self.config.max_state_bytes
                    ),
                ));
            }
        }
        let index = session.steps().len() - 1;
        // The session stays locked until its step is committed, so its steps are stored in
        // order; in a shared store, only if no other server stepped it meanwhile.
        let expected = Some(entry.version.load(Ordering::SeqCst));
        match self
            .store
            .append(id, index, &record, changed, now(), expected)
            .await
        {
            Ok(version) => entry.version.store(version, Ordering::SeqCst),
            Err(store::StoreError::Conflict(_)) => {
                self.reload(id, &entry, &mut session).await?;
                // The same request retried through another server, which took it first.
                if let Some(done) = guard.taken(id, &session, tool, arguments)? {
                    return Ok(done);
                }
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    format!("session {id:?} was stepped by another request meanwhile: this step was not taken; the session is as that request left it, step again"),
                ));
            }
            Err(e) => {
                // Not committed: the step is undone here too, so that a retry takes it.
                let _ = session.rollback_to(index);
                return Err(ApiError::store(
                    e,
                    format!("step {} ({tool}) of session {id:?}", index + 1),
                ));
            }
        }
        Ok(Stepped {
            record,
            steps: index + 1,
            replayed: false,
        })
    }

    /// [`AppState::step`] on a task of its own. A client that gives up closes its connection,
    /// and the server drops the request's future: a step cut between its change and its
    /// commit would be held here but not stored, and the client's retry would be answered
    /// from it. Spawned, the step runs to its end whatever the client does.
    pub async fn step_detached(
        self: &Arc<Self>,
        id: String,
        tool: String,
        arguments: Map<String, Value>,
        guard: StepGuard,
    ) -> ApiResult<Stepped> {
        let state = Arc::clone(self);
        let shown = id.clone();
        tokio::spawn(async move { state.step(&id, &tool, &arguments, &guard).await })
            .await
            .map_err(|e| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("a step of session {shown:?} failed in the server: {e} (a server fault: report it)"),
                )
            })?
    }

    /// Deletes the sessions idle longer than the limit; returns how many.
    pub async fn expire(&self) -> usize {
        let limit = now() as u64 - self.config.idle_ttl.as_secs().min(now() as u64);
        let mut idle: Vec<String> = self
            .sessions
            .read()
            .await
            .iter()
            .filter(|(_, e)| e.touched.load(Ordering::Relaxed) < limit)
            .map(|(id, _)| id.clone())
            .collect();
        // A shared store's sessions no server holds (none has loaded them since it started).
        if self.store.is_shared() {
            if let Ok(listed) = self.store.list().await {
                let held = self.sessions.read().await;
                idle.extend(
                    listed
                        .into_iter()
                        .filter(|(id, _, touched)| {
                            *touched < limit as f64 && !held.contains_key(id)
                        })
                        .map(|(id, _, _)| id),
                );
            }
        }
        for id in &idle {
            self.forget(id).await;
            // In a shared store another server may have used it since: it is deleted only if
            // it has been idle there too.
            if let Err(e) = self.store.delete_if_idle(id, limit as f64).await {
                self.host.notice(ServerEvent::ExpiredNotDeleted {
                    id: id.clone(),
                    error: e.to_string(),
                });
            }
        }
        idle.len()
    }

    fn mcp_services(&self) -> std::sync::MutexGuard<'_, HashMap<String, mcp::McpService>> {
        lock(&self.mcp)
    }
}

/// The anchoring settings of a creation request.
fn session_config(request: &SessionRequest) -> SessionConfig {
    SessionConfig {
        mode: request.anchor,
        max_regenerations: request.max_regenerations,
        verify: request.verify,
        seed: request.seed,
    }
}

/// The router: routes, limits and auth.
pub fn router(state: Arc<AppState>) -> Router {
    let api = Router::new()
        .route("/sessions", post(create).get(list))
        .route("/sessions/{id}", get(show).delete(delete))
        .route("/sessions/{id}/steps", post(step))
        .route("/sessions/{id}/state", get(state_of))
        .route("/sessions/{id}/tools", get(tools))
        .route("/sessions/{id}/trajectory", get(trajectory))
        .route("/sessions/{id}/snapshots", post(snapshot))
        .route("/sessions/{id}/rollback", post(rollback))
        .route("/sessions/{id}/fork", post(fork))
        .route("/sessions/{id}/mcp", any(mcp::serve))
        .route("/openenv/{set}/health", get(openenv::health))
        .route("/openenv/{set}/metadata", get(openenv::metadata))
        .route("/openenv/{set}/schema", get(openenv::schema))
        .route("/openenv/{set}/openapi.json", get(openenv::openapi))
        .route("/openenv/{set}/reset", post(openenv::reset))
        .route("/openenv/{set}/step", post(openenv::step))
        .route("/openenv/{set}/state", get(openenv::state_of))
        .route("/openenv/{set}/tasks", get(openenv::tasks))
        .route("/openenv/{set}/mcp", post(openenv::mcp))
        .route("/openenv/{set}/ws", get(openenv::ws))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            auth,
        ));
    Router::new()
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/openapi.json", get(|| async { Json(openapi()) }))
        .merge(api)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .with_state(state)
}

/// Checks the bearer token (in constant time).
async fn auth(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &state.config.token {
        // The scheme is case-insensitive (RFC 9110): `bearer TOKEN` is as good.
        let given = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map_or("", |(_, token)| token.trim());
        let same = given.len() == token.len()
            && given
                .bytes()
                .zip(token.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
        if !same {
            // The challenge says which scheme to use (RFC 6750); without it, MCP clients take
            // the 401 for the start of an OAuth flow.
            let mut response = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token (Authorization: Bearer TOKEN)",
            )
            .into_response();
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer realm=\"envsim\""),
            );
            return response;
        }
    }
    next.run(request).await
}

async fn create(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let request = body_json(&body)?;
    let (_, body) = state.create_session(request, None).await?;
    Ok((StatusCode::CREATED, Json(body)))
}

impl AppState {
    /// Creates a session from a creation body (checked), under `id` when given (else a new
    /// one); returns its id and its description.
    pub async fn create_session(
        &self,
        request: Value,
        id: Option<String>,
    ) -> ApiResult<(String, Value)> {
        let parsed = SessionRequest::parse(&request)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))?;
        let (env, default_state) = self.environment(&parsed).await?;
        let initial = match &parsed.state {
            Some(given) => Value::Object(given.clone()),
            None => default_state,
        };
        let size = initial.to_string().len();
        if size > self.config.max_state_bytes {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the initial state is {size} bytes, over the limit of {}",
                    self.config.max_state_bytes
                ),
            ));
        }
        let backends = self
            .host
            .backends(&parsed, &env)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))?;
        let config = session_config(&parsed);
        let id = id.unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        if self.sessions.read().await.contains_key(&id) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("a session {id:?} exists"),
            ));
        }
        self.store
            .create(&id, &request, &initial, now())
            .await
            .map_err(|e| ApiError::store(e, format!("creating session {id:?}")))?;
        let session = Session::new(env, backends, config, initial);
        let body = describe(&id, &session);
        let entry = Entry::new(session, request);
        self.sessions.write().await.insert(id.clone(), entry);
        Ok((id, body))
    }
}

fn describe(id: &str, session: &Session) -> Value {
    json!({
        "id": id,
        "env": session.env().name,
        "mode": if session.env().code.is_some() { "code" } else { "description" },
        "anchoring": session.config(),
        "steps": session.steps().len(),
        "snapshots": session.snapshots(),
        "tools": session.env().tools.iter().filter_map(|t| t["function"]["name"].as_str()).collect::<Vec<_>>(),
        "mcp": format!("/sessions/{id}/mcp"),
    })
}

async fn list(State(state): State<Arc<AppState>>) -> ApiResult<Json<Value>> {
    // A shared store: every session of the database, held here or not.
    if state.store.is_shared() {
        let listed = state
            .store
            .list()
            .await
            .map_err(|e| ApiError::store(e, "listing the sessions"))?;
        let out: Vec<Value> = listed
            .into_iter()
            .map(|(id, env, touched)| json!({"id": id, "env": env, "touched": touched as u64}))
            .collect();
        return Ok(Json(json!({"sessions": out})));
    }
    let sessions = state.sessions.read().await;
    let mut out: Vec<Value> = Vec::new();
    for (id, entry) in sessions.iter() {
        out.push(json!({"id": id, "env": entry.request["env"], "touched": entry.touched.load(Ordering::Relaxed)}));
    }
    out.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    Ok(Json(json!({"sessions": out})))
}

async fn show(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let entry = state.entry(&id).await?;
    let session = state.fresh(&id, &entry).await?;
    let mut body = describe(&id, &session);
    body["state"] = session.state().as_ref().clone();
    Ok(Json(body))
}

async fn delete(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    match state.forget(&id).await {
        Some(_) => {
            state
                .store
                .delete(&id)
                .await
                .map_err(|e| ApiError::store(e, format!("deleting session {id:?}")))?;
            Ok(StatusCode::NO_CONTENT)
        }
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no session {id:?}"),
        )),
    }
}

async fn step(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<impl IntoResponse> {
    let request = body_json(&body)?;
    let tool = request["name"]
        .as_str()
        .or_else(|| request["tool"].as_str())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "field `name` (the tool) is missing or not a string",
            )
        })?
        .to_owned();
    let arguments = envsim_core::transcript::call_arguments(request.get("arguments"))
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("field `arguments`: {e}")))?;
    let expected_step = match request.get("expected_step") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().map(|n| n as usize).ok_or_else(|| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "field `expected_step`: must be an integer ≥ 0 (the steps the session has taken)",
            )
        })?),
    };
    let guard = StepGuard::new(idempotency_key(&headers)?.as_deref(), expected_step)
        .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
    let started = std::time::Instant::now();
    let Stepped {
        record,
        steps,
        replayed,
    } = state.step_detached(id, tool, arguments, guard).await?;
    let body = Json(json!({
        "step": steps,
        "tool": record.tool,
        "observation": record.observation,
        "success": record.success,
        "provenance": record.provenance,
        "replayed": replayed,
        // The server's time on the step, the session lock and the store write included.
        "server_ms": started.elapsed().as_secs_f64() * 1000.0,
    }));
    Ok((
        [(REPLAYED_HEADER, if replayed { "true" } else { "false" })],
        body,
    ))
}

/// The header that says whether a step's answer is of a step taken before (`true`) or now.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// The `Idempotency-Key` header, when there is one; 422 when it is not text.
pub(crate) fn idempotency_key(headers: &HeaderMap) -> ApiResult<Option<String>> {
    match headers.get("idempotency-key") {
        None => Ok(None),
        Some(v) => v.to_str().map(|s| Some(s.to_owned())).map_err(|_| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "the Idempotency-Key header must be visible ASCII",
            )
        }),
    }
}

async fn state_of(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let entry = state.entry(&id).await?;
    let session = state.fresh(&id, &entry).await?;
    Ok(Json(session.state().as_ref().clone()))
}

async fn tools(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let entry = state.entry(&id).await?;
    Ok(Json(json!({"tools": entry.env.tools})))
}

async fn trajectory(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let entry = state.entry(&id).await?;
    let session = state.fresh(&id, &entry).await?;
    let mut trajectory = session.trajectory(&id);
    drop(session);
    state.add_rewards(&id, &mut trajectory).await;
    Ok(Json(trajectory))
}

async fn snapshot(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let request = body_json(&body)?;
    let name = request["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "field `name` (the snapshot's name) is missing or empty",
            )
        })?;
    let entry = state.entry(&id).await?;
    let mut session = state.fresh(&id, &entry).await?;
    let steps = session.snapshot(name);
    let version = state
        .store
        .snapshot(&id, name, steps, now())
        .await
        .map_err(|e| ApiError::store(e, format!("marking session {id:?} as {name:?}")))?;
    entry.version.store(version, Ordering::SeqCst);
    Ok(Json(json!({"snapshot": name, "steps": steps})))
}

async fn rollback(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let request = body_json(&body)?;
    let entry = state.entry(&id).await?;
    let mut session = state.fresh(&id, &entry).await?;
    let result = match (&request["name"], &request["steps"]) {
        (Value::String(name), Value::Null) => session.rollback(name),
        (Value::Null, Value::Number(n)) => match n.as_u64() {
            Some(n) => session.rollback_to(n as usize),
            None => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "field `steps` must be a count",
                ))
            }
        },
        _ => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "give either `name` (a snapshot) or `steps` (a step count)",
            ))
        }
    };
    let steps = result.map_err(|e| ApiError::new(StatusCode::NOT_FOUND, e.to_string()))?;
    let version = state
        .store
        .truncate(&id, steps, now())
        .await
        .map_err(|e| {
            ApiError::store(
                e,
                format!("rolling session {id:?} back to {steps} steps (rolled back here, not stored: roll back again)"),
            )
        })?;
    entry.version.store(version, Ordering::SeqCst);
    Ok(Json(
        json!({"steps": steps, "state": session.state().as_ref()}),
    ))
}

async fn fork(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let entry = state.entry(&id).await?;
    let session = state.fresh(&id, &entry).await?;
    let copy = session.fork();
    drop(session);
    let new_id = uuid::Uuid::new_v4().simple().to_string();
    state
        .store
        .fork(&id, &new_id, now())
        .await
        .map_err(|e| ApiError::store(e, format!("forking session {id:?} as {new_id:?}")))?;
    let body = describe(&new_id, &copy);
    let forked = Entry::new(copy, entry.request.clone());
    state.sessions.write().await.insert(new_id, forked);
    Ok((StatusCode::CREATED, Json(body)))
}

/// Serves until `shutdown` resolves, expiring idle sessions on the way.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let sweeper = Arc::clone(&state);
    let every = (state.config.idle_ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
    let sweep = tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            sweeper.expire().await;
        }
    });
    let result = axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await;
    sweep.abort();
    result
}

/// The server's own OpenAPI document.
pub fn openapi() -> Value {
    let error = json!({"description": "An error, in words.", "content": {"application/json": {"schema": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]}}}});
    let id = json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}]);
    let ok = |description: &str| json!({"description": description, "content": {"application/json": {"schema": {"type": "object"}}}});
    let body = |schema: Value| json!({"required": true, "content": {"application/json": {"schema": schema}}});
    json!({
        "openapi": "3.1.0",
        "info": {"title": "envsim sessions", "version": env!("CARGO_PKG_VERSION"),
                 "description": "Simulated environments with explicit state: every step predicted, validated against the specification and the session's history, regenerated, escalated and verified. Every route but /health and /openapi.json needs `Authorization: Bearer TOKEN` when the server has a token."},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": {
            "/sessions": {
                "post": {"operationId": "create_session", "requestBody": body(json!({"type": "object", "required": ["env"], "additionalProperties": false, "properties": {
                    "env": {"type": "string", "description": "The environment's name."},
                    "no_code": {"type": "boolean", "description": "Simulate from the generated description only."},
                    "state": {"type": "object", "description": "The initial state (default: the environment's first)."},
                    "primary": {"type": "string", "enum": ["executor", "faulty", "local", "openai"]},
                    "secondary": {"type": "string", "enum": ["executor", "faulty", "local", "openai"]},
                    "fault_rate": {"type": "number", "minimum": 0, "maximum": 1},
                    "anchor": {"type": "string", "enum": ["off", "validate", "full"]},
                    "max_regenerations": {"type": "integer", "minimum": 0, "maximum": 10},
                    "verify": {"oneOf": [{"type": "boolean"}, {"type": "object", "additionalProperties": false, "properties": {"floor": {"type": "number", "minimum": 0, "maximum": 1}, "ceiling": {"type": "number", "minimum": 0, "maximum": 1}, "warmup": {"type": "integer", "minimum": 0}}}]},
                    "seed": {"type": "integer", "minimum": 0}}})),
                    "responses": {"201": ok("The session."), "400": error.clone(), "401": error.clone(), "413": error.clone()}},
                "get": {"operationId": "list_sessions", "responses": {"200": ok("Every session."), "401": error.clone()}}
            },
            "/sessions/{id}": {
                "parameters": id.clone(),
                "get": {"operationId": "get_session", "responses": {"200": ok("The session and its state."), "404": error.clone()}},
                "delete": {"operationId": "delete_session", "responses": {"204": {"description": "Deleted."}, "404": error.clone()}}
            },
            "/sessions/{id}/steps": {"parameters": id.clone(), "post": {"operationId": "step",
                "requestBody": body(json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}}})),
                "responses": {"200": ok("The step: observation, success, provenance."), "400": error.clone(), "404": error.clone(), "413": error.clone(), "502": error.clone()}}},
            "/sessions/{id}/state": {"parameters": id.clone(), "get": {"operationId": "get_state", "responses": {"200": ok("The current state."), "404": error.clone()}}},
            "/sessions/{id}/tools": {"parameters": id.clone(), "get": {"operationId": "get_tools", "responses": {"200": ok("The session's tools as OpenAI tool schemas."), "404": error.clone()}}},
            "/sessions/{id}/trajectory": {"parameters": id.clone(), "get": {"operationId": "get_trajectory", "responses": {"200": ok("The session as an envsim trajectory record."), "404": error.clone()}}},
            "/sessions/{id}/snapshots": {"parameters": id.clone(), "post": {"operationId": "snapshot",
                "requestBody": body(json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}})),
                "responses": {"200": ok("The mark."), "404": error.clone()}}},
            "/sessions/{id}/rollback": {"parameters": id.clone(), "post": {"operationId": "rollback",
                "requestBody": body(json!({"type": "object", "properties": {"name": {"type": "string"}, "steps": {"type": "integer", "minimum": 0}}})),
                "responses": {"200": ok("The state after the rollback."), "400": error.clone(), "404": error.clone()}}},
            "/sessions/{id}/fork": {"parameters": id.clone(), "post": {"operationId": "fork", "responses": {"201": ok("The new session."), "404": error.clone()}}},
            "/sessions/{id}/mcp": {"parameters": id, "post": {"operationId": "mcp", "description": "The session's tools over MCP (Streamable HTTP).", "responses": {"200": {"description": "MCP messages."}}}}
        }
    })
}

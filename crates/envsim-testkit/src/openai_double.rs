//! A loopback OpenAI-compatible chat-completions server: a **test double** for envsim's
//! evaluation-runner tests and throughput benchmark. It is not a model and not a proxy; it
//! answers `POST /v1/chat/completions` from a table of canned answers, with controllable
//! latency and injected faults, and counts what it received.
//!
//! The answer for a request is chosen by its *key*: the `content` of the last message whose
//! `role` is `"user"`. Per key, the k-th request (0-based) gets `faults[key][k]` when that
//! exists, and the normal answer otherwise.
//!
//! ```no_run
//! use envsim_testkit::openai_double::{DoubleConfig, Fault, OpenAiDouble};
//! use std::collections::HashMap;
//!
//! let config = DoubleConfig {
//!     answers: HashMap::from([("ping".to_string(), "pong".to_string())]),
//!     faults: HashMap::from([("ping".to_string(), vec![Fault::ServerError])]),
//!     ..DoubleConfig::default()
//! };
//! let double = OpenAiDouble::spawn(config).unwrap();
//! // point the client under test at double.base_url(): first "ping" → 500, then "pong"
//! # drop(double);
//! ```
//!
//! Everything else on the server answers 404 (405 for another method on the completions
//! path). Responses are never streamed; a request with `"stream": true` gets a 400.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::serve::ListenerExt;
use axum::Router;
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpSocket};

/// How long a [`Fault::Hang`] request waits before giving up (it is meant never to answer).
const HANG: Duration = Duration::from_secs(3600);
/// Listen backlog of the sockets bound by [`bind_loopback`] (the kernel may cap it).
const BACKLOG: u32 = 4096;

/// What the double answers and how.
#[derive(Clone, Debug)]
pub struct DoubleConfig {
    /// Delay before every answer on the completions path: normal answers, error answers (400,
    /// 401) and fault answers, except [`Fault::Hang`]. Not a global lock: concurrent requests
    /// wait concurrently.
    pub latency: Duration,
    /// Completion content per key; key = the `content` of the LAST message with role `"user"`
    /// in the request.
    pub answers: HashMap<String, String>,
    /// Answer used for keys not in `answers`; `None` → HTTP 400 with an OpenAI-style error
    /// body naming the unknown key.
    pub default_answer: Option<String>,
    /// Per key: the k-th request (0-based) for that key gets `faults[k]`; once the list is used
    /// up, the normal answer (or the unknown-key 400).
    pub faults: HashMap<String, Vec<Fault>>,
    /// When `Some`, requests must carry `Authorization: Bearer <key>` (else 401 with an
    /// OpenAI-style error body). Checked before the body is looked at.
    pub api_key: Option<String>,
    /// Include the `usage` object: `prompt_tokens` = ⌈chars of all message contents / 4⌉,
    /// `completion_tokens` = ⌈chars of the answer / 4⌉, `total_tokens` = their sum (chars are
    /// Unicode scalar values).
    pub usage: bool,
    /// Keep every request body for [`OpenAiDouble::bodies`]. Turn off for long benchmark runs,
    /// where the log would only grow.
    pub record_bodies: bool,
    /// When `Some`, the models served: a request for any other model gets 404 with an
    /// OpenAI-style `model_not_found` error body.
    pub models: Option<Vec<String>>,
    /// When `Some(n)`, every request after the n-th (counting all requests) hangs like
    /// [`Fault::Hang`]: a fixed point in a run at which progress stops, for tests that must
    /// act while requests are in flight without relying on timing. Changed at run time with
    /// [`OpenAiDouble::set_hold_after`].
    pub hold_after: Option<usize>,
    /// Per key: the k-th request (0-based; a fault for the same k wins) gets an assistant
    /// message carrying these OpenAI `tool_calls` (empty content, `finish_reason`
    /// `tool_calls`): a scripted function-calling agent. Once the list is used up, the normal
    /// answer.
    pub tool_calls: HashMap<String, Vec<Vec<Value>>>,
}

impl Default for DoubleConfig {
    fn default() -> Self {
        DoubleConfig {
            latency: Duration::ZERO,
            answers: HashMap::new(),
            default_answer: None,
            faults: HashMap::new(),
            api_key: None,
            usage: true,
            record_bodies: true,
            models: None,
            hold_after: None,
            tool_calls: HashMap::new(),
        }
    }
}

/// A fault injected in place of one answer (see [`DoubleConfig::faults`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// 429 with an OpenAI-style error body (code `rate_limit_exceeded`), plus a `Retry-After`
    /// header (seconds) when given.
    RateLimited { retry_after_secs: Option<u64> },
    /// 500 with an OpenAI-style error body (type `server_error`).
    ServerError,
    /// Never answers (waits about an hour, or until the double shuts down): the client must
    /// time out. Not preceded by the latency.
    Hang,
    /// 200 with `Content-Type: application/json`, but the body is not JSON (`<html>oops</html>`).
    MalformedBody,
    /// 200 with `Content-Type: application/json`, and the body is the first half (in bytes,
    /// on a char boundary) of the normal completion JSON. The HTTP response itself is
    /// complete: its `Content-Length` matches the truncated body.
    TruncatedBody,
    /// 200, a normal completion but with this content (e.g. prose-wrapped or cut-off JSON) and
    /// `finish_reason` `"length"`.
    Content(String),
}

/// What a running double has observed. Shared between the server and whoever inspects it;
/// [`OpenAiDouble`] exposes the same numbers.
#[derive(Debug)]
pub struct DoubleStats {
    /// Requests after this many hang (`usize::MAX`: none do).
    hold_after: AtomicUsize,
    requests: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    per_key: Mutex<HashMap<String, usize>>,
    bodies: Mutex<Vec<Value>>,
}

impl Default for DoubleStats {
    fn default() -> Self {
        DoubleStats {
            hold_after: AtomicUsize::new(usize::MAX),
            requests: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            per_key: Mutex::new(HashMap::new()),
            bodies: Mutex::new(Vec::new()),
        }
    }
}

impl DoubleStats {
    /// Fresh statistics for a double serving `config` (which sets where requests start to
    /// hang); pass them to [`serve`].
    pub fn for_config(config: &DoubleConfig) -> DoubleStats {
        let stats = DoubleStats::default();
        stats
            .hold_after
            .store(config.hold_after.unwrap_or(usize::MAX), Ordering::SeqCst);
        stats
    }

    /// Total requests received on the completions path (including rejected ones).
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Requests received for this key (only requests valid enough to have a key count).
    pub fn requests_for(&self, key: &str) -> usize {
        lock(&self.per_key).get(key).copied().unwrap_or(0)
    }

    /// Requests on the completions path that are open right now (including hanging ones).
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Highest number of concurrently open requests observed.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::SeqCst)
    }

    /// Every received request body, in arrival order (when [`DoubleConfig::record_bodies`]).
    /// A body that is not JSON is recorded as a JSON string holding its (lossy UTF-8) text.
    pub fn bodies(&self) -> Vec<Value> {
        lock(&self.bodies).clone()
    }
}

/// Counts a request as open for as long as it lives.
struct InFlight<'a>(&'a DoubleStats);

impl<'a> InFlight<'a> {
    fn enter(stats: &'a DoubleStats) -> Self {
        let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(stats)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A double serving on a background thread; stops when shut down or dropped.
#[derive(Debug)]
pub struct OpenAiDouble {
    addr: SocketAddr,
    stats: Arc<DoubleStats>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl OpenAiDouble {
    /// Binds `127.0.0.1:0` and serves on a dedicated background thread with its own tokio
    /// runtime (so it works from sync tests and from async tests alike); returns once
    /// listening.
    pub fn spawn(config: DoubleConfig) -> io::Result<OpenAiDouble> {
        let stats = Arc::new(DoubleStats::for_config(&config));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<SocketAddr>>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server_stats = Arc::clone(&stats);
        let workers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .clamp(1, 4);
        let thread = std::thread::Builder::new()
            .name("openai-double".to_string())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(workers)
                    .thread_name("openai-double-worker")
                    .enable_io()
                    .enable_time()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let listener = match bind_loopback(0).await {
                        Ok(listener) => listener,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    match listener.local_addr() {
                        Ok(addr) => {
                            let _ = ready_tx.send(Ok(addr));
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    }
                    tokio::select! {
                        _ = serve(listener, config, server_stats) => {}
                        _ = stop_rx => {}
                    }
                });
                // Dropping the runtime cancels the connection tasks, hanging ones included.
                drop(runtime);
            })?;
        match ready_rx.recv() {
            Ok(Ok(addr)) => Ok(OpenAiDouble {
                addr,
                stats,
                stop: Some(stop_tx),
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(io::Error::other(
                    "openai-double: server thread exited before listening",
                ))
            }
        }
    }

    /// From now on, requests after the n-th (counting all so far) hang; `None` answers every
    /// new request again (requests already hanging stay so).
    pub fn set_hold_after(&self, n: Option<usize>) {
        self.stats
            .hold_after
            .store(n.unwrap_or(usize::MAX), Ordering::SeqCst);
    }

    /// The OpenAI base URL of the double, e.g. `http://127.0.0.1:41234/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The address the double listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The live counters (shared with the server).
    pub fn stats(&self) -> &Arc<DoubleStats> {
        &self.stats
    }

    /// Total chat-completion requests received (including rejected ones).
    pub fn requests(&self) -> usize {
        self.stats.requests()
    }

    /// Chat-completion requests received for this key.
    pub fn requests_for(&self, key: &str) -> usize {
        self.stats.requests_for(key)
    }

    /// Highest number of concurrently open requests observed.
    pub fn max_in_flight(&self) -> usize {
        self.stats.max_in_flight()
    }

    /// Every received request body, in arrival order (see [`DoubleStats::bodies`]).
    pub fn bodies(&self) -> Vec<Value> {
        self.stats.bodies()
    }

    /// Stops the server (open requests are dropped) and joins its thread; dropping the double
    /// does the same.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for OpenAiDouble {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Binds `127.0.0.1:port` (0 = any free port) with a deep listen backlog, so that a burst of a
/// thousand connections is not refused. Must be called inside a tokio runtime.
pub async fn bind_loopback(port: u16) -> io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from(([127, 0, 0, 1], port)))?;
    socket.listen(BACKLOG)
}

/// Serves the double on an existing listener until the returned future is dropped (for running
/// it in its own process; [`OpenAiDouble::spawn`] uses it too). Connections run as tasks on the
/// current runtime, so requests already accepted keep running until they finish or the runtime
/// shuts down. Only returns on a fatal error.
pub async fn serve(
    listener: TcpListener,
    config: DoubleConfig,
    stats: Arc<DoubleStats>,
) -> io::Result<()> {
    let app = Arc::new(App { config, stats });
    let router = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .fallback(not_found)
        .layer(DefaultBodyLimit::disable())
        .with_state(app);
    let listener = listener.tap_io(|stream| {
        let _ = stream.set_nodelay(true);
    });
    axum::serve(listener, router).await
}

struct App {
    config: DoubleConfig,
    stats: Arc<DoubleStats>,
}

async fn not_found() -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        "openai-double: only POST /v1/chat/completions is served",
        "invalid_request_error",
        Some("unknown_url"),
    )
}

async fn chat_completions(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let stats = &*app.stats;
    let _open = InFlight::enter(stats);
    let seq = stats.requests.fetch_add(1, Ordering::SeqCst) + 1;
    let parsed: Result<Value, _> = serde_json::from_slice(&body);
    if app.config.record_bodies {
        let recorded = match &parsed {
            Ok(value) => value.clone(),
            Err(_) => Value::String(String::from_utf8_lossy(&body).into_owned()),
        };
        lock(&stats.bodies).push(recorded);
    }
    let response = answer(&app, &headers, parsed, seq);
    match response {
        Answer::Hang => {
            tokio::time::sleep(HANG).await;
            error_response(
                StatusCode::GATEWAY_TIMEOUT,
                "openai-double: hung request gave up",
                "server_error",
                None,
            )
        }
        Answer::Now(response) => {
            if !app.config.latency.is_zero() {
                tokio::time::sleep(app.config.latency).await;
            }
            response
        }
    }
}

enum Answer {
    Hang,
    Now(Response),
}

/// Decides the answer without waiting (the latency is applied by the caller, outside locks).
fn answer(
    app: &App,
    headers: &HeaderMap,
    parsed: Result<Value, serde_json::Error>,
    seq: usize,
) -> Answer {
    let config = &app.config;
    if let Some(expected) = &config.api_key {
        if !authorized(headers, expected) {
            return Answer::Now(error_response(
                StatusCode::UNAUTHORIZED,
                "openai-double: missing or incorrect API key (expected `Authorization: Bearer <key>`)",
                "invalid_request_error",
                Some("invalid_api_key"),
            ));
        }
    }
    let request = match parsed {
        Ok(value) => value,
        Err(e) => return Answer::Now(bad_request(&format!("request body is not JSON: {e}"))),
    };
    let checked = match check_request(&request) {
        Ok(checked) => checked,
        Err(message) => return Answer::Now(bad_request(&message)),
    };
    if config
        .models
        .as_ref()
        .is_some_and(|models| !models.iter().any(|m| m == checked.model))
    {
        return Answer::Now(error_response(
            StatusCode::NOT_FOUND,
            &format!(
                "The model `{}` does not exist or you do not have access to it.",
                checked.model
            ),
            "invalid_request_error",
            Some("model_not_found"),
        ));
    }
    if seq > app.stats.hold_after.load(Ordering::SeqCst) {
        return Answer::Hang;
    }
    let k = {
        let mut per_key = lock(&app.stats.per_key);
        let count = per_key.entry(checked.key.to_string()).or_insert(0);
        *count += 1;
        *count - 1
    };
    let fault = config
        .faults
        .get(checked.key)
        .and_then(|faults| faults.get(k));
    let normal = || {
        config
            .answers
            .get(checked.key)
            .or(config.default_answer.as_ref())
    };
    let completion = |content: &str, finish_reason: &str| {
        completion_json(config, &checked, seq, content, finish_reason)
    };
    let response = match fault {
        Some(Fault::Hang) => return Answer::Hang,
        Some(Fault::RateLimited { retry_after_secs }) => {
            let mut response = error_response(
                StatusCode::TOO_MANY_REQUESTS,
                "openai-double: rate limit reached (injected fault)",
                "requests",
                Some("rate_limit_exceeded"),
            );
            if let Some(secs) = retry_after_secs {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(*secs));
            }
            response
        }
        Some(Fault::ServerError) => error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "openai-double: the server had an error while processing your request (injected fault)",
            "server_error",
            None,
        ),
        Some(Fault::MalformedBody) => json_response(StatusCode::OK, "<html>oops</html>".into()),
        Some(Fault::TruncatedBody) => {
            let full = completion(normal().map_or("", String::as_str), "stop").to_string();
            let mut cut = full.len() / 2;
            while !full.is_char_boundary(cut) {
                cut -= 1;
            }
            json_response(StatusCode::OK, full[..cut].to_string())
        }
        Some(Fault::Content(content)) => {
            json_response(StatusCode::OK, completion(content, "length").to_string())
        }
        None if config
            .tool_calls
            .get(checked.key)
            .is_some_and(|script| k < script.len()) =>
        {
            let mut body = completion("", "tool_calls");
            body["choices"][0]["message"]["tool_calls"] =
                Value::Array(config.tool_calls[checked.key][k].clone());
            json_response(StatusCode::OK, body.to_string())
        }
        None => match normal() {
            Some(content) => json_response(StatusCode::OK, completion(content, "stop").to_string()),
            None => bad_request(&format!(
                "openai-double: no canned answer for the last user message {:?} and no default_answer configured",
                checked.key
            )),
        },
    };
    Answer::Now(response)
}

fn authorized(headers: &HeaderMap, expected: &str) -> bool {
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    match value.split_once(' ') {
        Some((scheme, token)) => scheme.eq_ignore_ascii_case("bearer") && token.trim() == expected,
        None => false,
    }
}

/// The parts of a valid request the answer depends on.
struct Checked<'a> {
    model: &'a str,
    key: &'a str,
    prompt_chars: usize,
}

fn check_request(request: &Value) -> Result<Checked<'_>, String> {
    let Some(object) = request.as_object() else {
        return Err("request body must be a JSON object".to_string());
    };
    let model = match object.get("model") {
        Some(Value::String(model)) => model.as_str(),
        Some(_) => return Err("`model` must be a string".to_string()),
        None => return Err("missing required parameter `model`".to_string()),
    };
    let messages = match object.get("messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        Some(Value::Array(_)) => return Err("`messages` must not be empty".to_string()),
        Some(_) => return Err("`messages` must be an array".to_string()),
        None => return Err("missing required parameter `messages`".to_string()),
    };
    if object.get("stream") == Some(&Value::Bool(true)) {
        return Err("openai-double does not support `stream: true`".to_string());
    }
    let mut key = None;
    let mut prompt_chars = 0;
    for (i, message) in messages.iter().enumerate() {
        let Some(message) = message.as_object() else {
            return Err(format!("`messages[{i}]` must be an object"));
        };
        let role = match message.get("role") {
            Some(Value::String(role)) => role.as_str(),
            _ => return Err(format!("`messages[{i}].role` must be a string")),
        };
        let content = match message.get("content") {
            Some(Value::String(content)) => content.as_str(),
            _ => return Err(format!("`messages[{i}].content` must be a string")),
        };
        prompt_chars += content.chars().count();
        if role == "user" {
            key = Some(content);
        }
    }
    let Some(key) = key else {
        return Err("`messages` has no message with role \"user\"".to_string());
    };
    Ok(Checked {
        model,
        key,
        prompt_chars,
    })
}

fn completion_json(
    config: &DoubleConfig,
    request: &Checked<'_>,
    seq: usize,
    content: &str,
    finish_reason: &str,
) -> Value {
    let mut body = json!({
        "id": format!("chatcmpl-double-{seq}"),
        "object": "chat.completion",
        "created": 0,
        "model": request.model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": finish_reason,
        }],
    });
    if config.usage {
        let prompt_tokens = request.prompt_chars.div_ceil(4);
        let completion_tokens = content.chars().count().div_ceil(4);
        body["usage"] = json!({
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        });
    }
    body
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn error_response(status: StatusCode, message: &str, kind: &str, code: Option<&str>) -> Response {
    let body = json!({
        "error": {"message": message, "type": kind, "param": null, "code": code},
    });
    json_response(status, body.to_string())
}

fn bad_request(message: &str) -> Response {
    error_response(
        StatusCode::BAD_REQUEST,
        message,
        "invalid_request_error",
        None,
    )
}

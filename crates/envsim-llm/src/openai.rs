//! A small client for OpenAI-compatible `/v1/chat/completions` endpoints (vLLM, llama.cpp
//! server, SGLang, hosted APIs): request bodies, one attempt, and response parsing.
//!
//! Written against raw JSON rather than a typed SDK because every server adds its own fields
//! (`repetition_penalty`, `chat_template_kwargs`, `reasoning_content`, …) and the runner needs
//! the raw text, status, `Retry-After` and usage of every attempt for its audit log.

use crate::Decoding;
use envsim_core::prompt::Prompt;
use envsim_core::sample::Usage;
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant, SystemTime};

/// How one attempt failed.
#[derive(Clone, Debug, PartialEq)]
pub enum AttemptErrorKind {
    /// HTTP 429.
    RateLimited,
    /// Any other non-2xx status.
    Http(u16),
    /// No answer within the request timeout.
    Timeout,
    /// Nothing listens at the endpoint's host and port.
    ConnectionRefused,
    /// The endpoint's host name does not resolve.
    Dns,
    /// Could not connect otherwise, or the connection broke.
    Connect,
    /// A 2xx answer whose body is not a chat completion.
    Decode,
}

/// A failed attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptError {
    /// Category.
    pub kind: AttemptErrorKind,
    /// Human-readable detail.
    pub message: String,
    /// HTTP status, if a response arrived.
    pub status: Option<u16>,
    /// The server's `Retry-After`, if any.
    pub retry_after: Option<Duration>,
    /// The raw response body, if any.
    pub body: Option<String>,
}

impl AttemptError {
    /// Whether retrying can help: rate limits, server errors, timeouts, broken connections and
    /// garbled bodies are transient; other 4xx are the caller's fault and fail at once.
    pub fn retryable(&self) -> bool {
        match self.kind {
            AttemptErrorKind::RateLimited
            | AttemptErrorKind::Timeout
            | AttemptErrorKind::ConnectionRefused
            | AttemptErrorKind::Dns
            | AttemptErrorKind::Connect
            | AttemptErrorKind::Decode => true,
            AttemptErrorKind::Http(status) => matches!(status, 408 | 409 | 425 | 500..=599),
        }
    }

    /// Audit-log outcome code.
    pub fn outcome(&self) -> &'static str {
        match self.kind {
            AttemptErrorKind::RateLimited => "rate_limited",
            AttemptErrorKind::Http(_) => "http_error",
            AttemptErrorKind::Timeout => "timeout",
            AttemptErrorKind::ConnectionRefused
            | AttemptErrorKind::Dns
            | AttemptErrorKind::Connect => "connect",
            AttemptErrorKind::Decode => "decode",
        }
    }

    /// Whether this error, when every request so far has failed with it, means the endpoint
    /// cannot be used as configured (nothing listening, unknown host, bad key, unknown model or
    /// URL, a request the server rejects), so the run should stop instead of walking the whole
    /// benchmark. Timeouts, rate limits and server errors are transient and never stop a run.
    pub fn is_configuration_error(&self) -> bool {
        match self.kind {
            AttemptErrorKind::ConnectionRefused | AttemptErrorKind::Dns => true,
            AttemptErrorKind::Http(status) => matches!(status, 400 | 401 | 403 | 404 | 405 | 422),
            _ => false,
        }
    }
}

/// The cause of an error message written by this client (or by the local model or a batch
/// import), as a short label for grouping failures: `connection refused`, `DNS lookup failed`,
/// `connection failed`, `timeout`, `HTTP 401`, `unreadable response`, or `other`.
pub fn cause_of(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("HTTP ") {
        let status: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !status.is_empty() {
            return format!("HTTP {status}");
        }
    }
    let prefixes = [
        ("connection refused", "connection refused"),
        ("cannot resolve", "DNS lookup failed"),
        ("cannot connect", "connection failed"),
        ("no answer within", "timeout"),
        ("unreadable response", "unreadable response"),
        ("local model", "local model error"),
        ("batch", "batch error"),
    ];
    prefixes
        .iter()
        .find(|(prefix, _)| message.starts_with(prefix))
        .map_or_else(|| "other".to_owned(), |(_, label)| (*label).to_owned())
}

impl std::fmt::Display for AttemptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A successful completion.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    /// The assistant message text.
    pub content: String,
    /// Token usage, when the server reports it.
    pub usage: Option<Usage>,
    /// `finish_reason` (`stop`, `length`, …).
    pub finish_reason: Option<String>,
}

/// Connection settings.
#[derive(Clone, Debug)]
pub struct ClientSettings {
    /// Base URL up to and including `/v1`.
    pub base_url: String,
    /// Bearer token, if any.
    pub api_key: Option<String>,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Upper bound on concurrent requests (sizes the connection pool).
    pub max_connections: usize,
}

/// The HTTP client.
#[derive(Clone, Debug)]
pub struct OpenAiClient {
    http: reqwest::Client,
    url: String,
    api_key: Option<String>,
    timeout: Duration,
}

impl OpenAiClient {
    /// Builds a client; fails only if the TLS backend cannot initialise.
    pub fn new(settings: &ClientSettings) -> Result<OpenAiClient, String> {
        let http = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(Duration::from_secs(10).min(settings.timeout))
            .pool_max_idle_per_host(settings.max_connections)
            .tcp_nodelay(true)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(OpenAiClient {
            http,
            url: format!(
                "{}/chat/completions",
                settings.base_url.trim_end_matches('/')
            ),
            api_key: settings.api_key.clone(),
            timeout: settings.timeout,
        })
    }

    /// The endpoint URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends one request body; returns the completion and the raw response text.
    pub async fn attempt(&self, body: &str) -> Result<(Completion, String), AttemptError> {
        let mut request = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_owned());
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| self.transport_error(e))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        let text = response.text().await.map_err(|e| self.transport_error(e))?;
        if !(200..300).contains(&status) {
            let kind = if status == 429 {
                AttemptErrorKind::RateLimited
            } else {
                AttemptErrorKind::Http(status)
            };
            return Err(AttemptError {
                kind,
                message: format!("HTTP {status}: {}", error_message(&text)),
                status: Some(status),
                retry_after,
                body: Some(text),
            });
        }
        match parse_completion(&text) {
            Ok(completion) => Ok((completion, text)),
            Err(message) => Err(AttemptError {
                kind: AttemptErrorKind::Decode,
                message: format!("unreadable response from {}: {message}", self.url),
                status: Some(status),
                retry_after: None,
                body: Some(text),
            }),
        }
    }
}

impl OpenAiClient {
    /// A transport failure as an error whose message leads with the cause and the URL
    /// (`connection refused at http://127.0.0.1:9/v1/chat/completions`), details after.
    fn transport_error(&self, e: reqwest::Error) -> AttemptError {
        let mut chain = e.to_string();
        let mut refused = false;
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            if let Some(io) = cause.downcast_ref::<std::io::Error>() {
                refused |= io.kind() == std::io::ErrorKind::ConnectionRefused;
            }
            chain.push_str(": ");
            chain.push_str(&cause.to_string());
            source = cause.source();
        }
        let lower = chain.to_lowercase();
        let (kind, message) = if e.is_timeout() {
            (
                AttemptErrorKind::Timeout,
                format!(
                    "no answer within {:.0} s from {} (timeout; raise --timeout for slow servers)",
                    self.timeout.as_secs_f64(),
                    self.url
                ),
            )
        } else if e.is_decode() || e.is_body() {
            (
                AttemptErrorKind::Decode,
                format!("unreadable response from {}: {chain}", self.url),
            )
        } else if refused || lower.contains("connection refused") {
            (
                AttemptErrorKind::ConnectionRefused,
                format!("connection refused at {}", self.url),
            )
        } else if lower.contains("dns error") || lower.contains("failed to lookup address") {
            (
                AttemptErrorKind::Dns,
                format!("cannot resolve the host of {} ({chain})", self.url),
            )
        } else {
            (
                AttemptErrorKind::Connect,
                format!("cannot connect to {}: {chain}", self.url),
            )
        };
        AttemptError {
            kind,
            message,
            status: None,
            retry_after: None,
            body: None,
        }
    }
}

/// The error message inside an OpenAI-style error body, else the body's start.
fn error_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| body.chars().take(200).collect())
}

/// Builds the request body for a prompt.
pub fn request_body(model: &str, prompt: &Prompt, decoding: &Decoding) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), model.into());
    body.insert(
        "messages".into(),
        json!([
            {"role": "system", "content": prompt.system},
            {"role": "user", "content": prompt.user},
        ]),
    );
    if let Some(t) = decoding.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(m) = decoding.max_tokens {
        body.insert("max_tokens".into(), json!(m));
    }
    if !decoding.stop.is_empty() {
        body.insert("stop".into(), json!(decoding.stop));
    }
    for (k, v) in &decoding.extra_body {
        body.insert(k.clone(), v.clone());
    }
    Value::Object(body)
}

/// Reads a chat-completion body: `choices[0].message.content` (a string, or content parts
/// whose text is joined), `finish_reason` and `usage`.
pub fn parse_completion(text: &str) -> Result<Completion, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "response body is not JSON ({e}); it starts with {:?}",
            text.chars().take(80).collect::<String>()
        )
    })?;
    let choice = value
        .pointer("/choices/0")
        .ok_or("response has no choices[0]")?;
    let message = choice
        .get("message")
        .ok_or("response choices[0] has no message")?;
    let content = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        Some(Value::Null) | None => match message.get("refusal").and_then(Value::as_str) {
            Some(refusal) => refusal.to_owned(),
            None => String::new(),
        },
        Some(other) => return Err(format!("choices[0].message.content is not text: {other}")),
    };
    let usage = value.get("usage").and_then(|u| {
        let prompt = u.get("prompt_tokens").and_then(Value::as_u64);
        let completion = u.get("completion_tokens").and_then(Value::as_u64);
        (prompt.is_some() || completion.is_some()).then(|| Usage {
            prompt_tokens: prompt.unwrap_or(0),
            completion_tokens: completion.unwrap_or(0),
        })
    });
    Ok(Completion {
        content,
        usage,
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// `Retry-After` as a delay: delta-seconds, or an HTTP date relative to `now`.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Milliseconds since `start`.
pub fn elapsed_ms(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_parsing() {
        let c = parse_completion(r#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2}}"#).unwrap();
        assert_eq!(c.content, "hi");
        assert_eq!(c.finish_reason.as_deref(), Some("stop"));
        assert_eq!(
            c.usage,
            Some(Usage {
                prompt_tokens: 7,
                completion_tokens: 2
            })
        );
        let parts = parse_completion(r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}"#).unwrap();
        assert_eq!(parts.content, "ab");
        assert_eq!(parts.usage, None);
        assert!(parse_completion("<html>").unwrap_err().contains("not JSON"));
        assert_eq!(
            parse_completion(r#"{"choices":[]}"#).unwrap_err(),
            "response has no choices[0]"
        );
        assert!(
            parse_completion(r#"{"choices":[{"message":{"content":5}}]}"#)
                .unwrap_err()
                .contains("not text")
        );
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_retry_after(" 0.5 ", now),
            Some(Duration::from_millis(500))
        );
        assert_eq!(parse_retry_after("-1", now), None);
        // 784111777 is Sun, 06 Nov 1994 08:49:37 GMT.
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:27 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn body_layout() {
        let prompt = Prompt {
            system: "S".into(),
            user: "U".into(),
        };
        let decoding = Decoding {
            temperature: Some(0.0),
            max_tokens: Some(64),
            stop: vec!["\n\n\n\n".into()],
            extra_body: serde_json::json!({"repetition_penalty": 1.15})
                .as_object()
                .cloned()
                .unwrap(),
        };
        assert_eq!(
            serde_json::to_string(&request_body("m", &prompt, &decoding)).unwrap(),
            r#"{"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":"U"}],"temperature":0.0,"max_tokens":64,"stop":["\n\n\n\n"],"repetition_penalty":1.15}"#
        );
    }

    #[test]
    fn retryability() {
        let e = |kind| AttemptError {
            kind,
            message: String::new(),
            status: None,
            retry_after: None,
            body: None,
        };
        assert!(e(AttemptErrorKind::RateLimited).retryable());
        assert!(e(AttemptErrorKind::Http(503)).retryable());
        assert!(e(AttemptErrorKind::Timeout).retryable());
        assert!(!e(AttemptErrorKind::Http(400)).retryable());
        assert!(!e(AttemptErrorKind::Http(401)).retryable());
        for (kind, fatal) in [
            (AttemptErrorKind::ConnectionRefused, true),
            (AttemptErrorKind::Dns, true),
            (AttemptErrorKind::Http(401), true),
            (AttemptErrorKind::Http(404), true),
            (AttemptErrorKind::Http(400), true),
            (AttemptErrorKind::Http(500), false),
            (AttemptErrorKind::RateLimited, false),
            (AttemptErrorKind::Timeout, false),
            (AttemptErrorKind::Connect, false),
        ] {
            assert_eq!(e(kind.clone()).is_configuration_error(), fatal, "{kind:?}");
        }
    }

    #[test]
    fn causes_group_messages() {
        for (message, cause) in [
            ("connection refused at http://127.0.0.1:9/v1/chat/completions (after 5 attempts)", "connection refused"),
            ("HTTP 401: Incorrect API key provided", "HTTP 401"),
            ("HTTP 404: The model `x` does not exist", "HTTP 404"),
            ("no answer within 30 s from http://h/v1/chat/completions (timeout; raise --timeout for slow servers)", "timeout"),
            ("cannot resolve the host of http://nowhere.invalid/v1/chat/completions (dns error)", "DNS lookup failed"),
            ("unreadable response from http://h/v1/chat/completions: response has no choices[0]", "unreadable response"),
            ("something else", "other"),
        ] {
            assert_eq!(cause_of(message), cause, "{message}");
        }
    }
}

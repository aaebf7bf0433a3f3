//! Typed execution errors.

use serde_json::Value;

/// Why a call produced no observation.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ExecError {
    /// Wall-clock or CPU-time limit reached; the worker was killed and replaced.
    #[error("timeout: {detail}")]
    Timeout {
        /// The wall-clock limit in seconds (0 for the CPU limit).
        seconds: f64,
        /// What happened.
        detail: String,
    },
    /// The environment ran out of its memory allowance.
    #[error("memory: {0}")]
    Memory(String),
    /// The worker died (exit, signal, closed pipe); it was replaced.
    #[error("crash: {0}")]
    Crash(String),
    /// The tool raised an exception (the reference would show "Error: ..." here).
    #[error("exception: {message}")]
    Exception {
        /// Exception type and message.
        message: String,
        /// Python traceback, when available.
        traceback: Option<String>,
        /// The state as the code left it when it raised: changes made before the exception
        /// stay, as in the real environment (`None` when no instance existed yet, e.g. the
        /// constructor raised, or the state could not be read).
        state_after: Option<Box<Value>>,
    },
    /// Unknown tool, arguments that do not fit the signature, or a malformed state.
    #[error("invalid call: {0}")]
    InvalidCall(String),
    /// The environment code could not be loaded.
    #[error("load error: {0}")]
    LoadError(String),
    /// The reply would exceed the output cap.
    #[error("output too large: {0}")]
    OutputTooLarge(String),
    /// The worker could not be started.
    #[error("cannot start a worker: {0}")]
    Spawn(String),
    /// The worker said something that breaks the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl ExecError {
    /// Stable snake_case kind, as printed by `envsim env call --json`.
    pub fn kind(&self) -> &'static str {
        match self {
            ExecError::Timeout { .. } => "timeout",
            ExecError::Memory(_) => "memory",
            ExecError::Crash(_) => "crash",
            ExecError::Exception { .. } => "exception",
            ExecError::InvalidCall(_) => "invalid_call",
            ExecError::LoadError(_) => "load_error",
            ExecError::OutputTooLarge(_) => "output_too_large",
            ExecError::Spawn(_) => "spawn",
            ExecError::Protocol(_) => "protocol",
        }
    }

    /// True when the worker that produced this error must be discarded.
    pub(crate) fn kills_worker(&self) -> bool {
        matches!(
            self,
            ExecError::Timeout { .. }
                | ExecError::Crash(_)
                | ExecError::OutputTooLarge(_)
                | ExecError::Protocol(_)
                | ExecError::Spawn(_)
        )
    }

    pub(crate) fn from_reply(error: Option<&Value>, state_after: Option<Value>) -> ExecError {
        let field = |k: &str| {
            error
                .and_then(|e| e.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let message = field("message");
        match field("kind").as_str() {
            "memory" => ExecError::Memory(message),
            "exception" => ExecError::Exception {
                message,
                traceback: Some(field("traceback")).filter(|t| !t.is_empty()),
                state_after: state_after.filter(Value::is_object).map(Box::new),
            },
            "invalid_call" => ExecError::InvalidCall(message),
            "load_error" => ExecError::LoadError(message),
            "output_too_large" => ExecError::OutputTooLarge(message),
            other => ExecError::Protocol(format!("{other}: {message}")),
        }
    }

    /// The state the environment was left in, for an exception raised after the instance
    /// existed (see [`ExecError::Exception`]).
    pub fn state_after(&self) -> Option<&Value> {
        match self {
            ExecError::Exception { state_after, .. } => state_after.as_deref(),
            _ => None,
        }
    }

    /// `{"kind", "message"}` for JSON output.
    pub fn to_json(&self) -> Value {
        let message = match self {
            ExecError::Timeout { detail, .. } => detail.clone(),
            ExecError::Exception { message, .. } => message.clone(),
            ExecError::Memory(m)
            | ExecError::Crash(m)
            | ExecError::InvalidCall(m)
            | ExecError::LoadError(m)
            | ExecError::OutputTooLarge(m)
            | ExecError::Spawn(m)
            | ExecError::Protocol(m) => m.clone(),
        };
        serde_json::json!({"kind": self.kind(), "message": message})
    }
}

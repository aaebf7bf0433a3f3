//! One Python worker process and its line protocol.

use crate::error::ExecError;
use crate::Limits;
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How much of a dead worker's stderr is kept for the error message.
const STDERR_TAIL: usize = 4096;

/// A running worker. Dropping it kills its whole process group.
pub(crate) struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr_tail: Arc<Mutex<Vec<u8>>>,
    pgid: i32,
    next_id: u64,
    /// Environments (by key) this process has loaded.
    pub(crate) loaded: HashSet<u64>,
    /// Fingerprint of the state the worker's live instance holds (see the runner's `_LIVE`).
    pub(crate) live_state: Option<u64>,
    _workdir: tempfile::TempDir,
}

impl Worker {
    /// Starts a worker running `runner` with `python`, in a fresh empty working directory.
    pub(crate) async fn spawn(
        python: &Path,
        runner: &Path,
        limits: &Limits,
    ) -> Result<Worker, ExecError> {
        let workdir = tempfile::Builder::new()
            .prefix("envsim-worker-")
            .tempdir()
            .map_err(|e| ExecError::Spawn(format!("cannot create a working directory: {e}")))?;
        let mut command = Command::new(python);
        command
            .arg("-I") // isolated: ignore PYTHON* variables and the user site directory
            .arg(runner)
            .current_dir(workdir.path())
            .env_clear()
            .env("TZ", "UTC")
            .env("LANG", "C.UTF-8")
            .env("PYTHONHASHSEED", "0")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("ENVSIM_OUTPUT_CAP", limits.output_bytes.to_string())
            .env("ENVSIM_CPU_SECONDS", limits.cpu_seconds.to_string())
            .env("ENVSIM_MEMORY_BYTES", limits.memory_bytes.to_string())
            .env("ENVSIM_WORKDIR", workdir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        let mut child = command
            .spawn()
            .map_err(|e| ExecError::Spawn(format!("cannot start {}: {e}", python.display())))?;
        let pgid = child.id().map(|id| id as i32).unwrap_or(0);
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ExecError::Spawn("the worker's pipes are missing".into()));
        };
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        let tail = Arc::clone(&stderr_tail);
        tokio::spawn(async move {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                if let Ok(mut buf) = tail.lock() {
                    buf.extend_from_slice(&chunk[..n]);
                    let excess = buf.len().saturating_sub(STDERR_TAIL);
                    buf.drain(..excess);
                }
            }
        });
        Ok(Worker {
            child,
            stdin,
            stdout: BufReader::with_capacity(1 << 16, stdout),
            stderr_tail,
            pgid,
            next_id: 0,
            loaded: HashSet::new(),
            live_state: None,
            _workdir: workdir,
        })
    }

    /// Sends one request (and, for calls, the state line) and reads the reply.
    ///
    /// Any failure other than an error reply leaves the worker unusable; the caller must drop it.
    pub(crate) async fn request(
        &mut self,
        mut header: serde_json::Map<String, Value>,
        state_line: Option<&str>,
        timeout: Duration,
        limits: &Limits,
    ) -> Result<Value, ExecError> {
        self.next_id += 1;
        let id = self.next_id;
        header.insert("id".into(), id.into());
        let mut text = serde_json::to_string(&Value::Object(header))
            .map_err(|e| ExecError::Protocol(format!("cannot encode the request: {e}")))?;
        text.push('\n');
        if let Some(state) = state_line {
            text.push_str(state);
            text.push('\n');
        }
        let exchange = async {
            self.stdin.write_all(text.as_bytes()).await?;
            self.stdin.flush().await?;
            let mut line = Vec::new();
            let mut limited = (&mut self.stdout).take(limits.output_bytes as u64 + 64);
            limited.read_until(b'\n', &mut line).await?;
            Ok::<Vec<u8>, std::io::Error>(line)
        };
        let line = match tokio::time::timeout(timeout, exchange).await {
            Err(_) => {
                self.kill();
                return Err(ExecError::Timeout {
                    seconds: timeout.as_secs_f64(),
                    detail: "wall-clock limit reached; the worker was killed".into(),
                });
            }
            Ok(Err(_)) => return Err(self.death().await),
            Ok(Ok(line)) if line.is_empty() => return Err(self.death().await),
            Ok(Ok(line)) if line.last() != Some(&b'\n') => {
                self.kill();
                return Err(ExecError::OutputTooLarge(format!(
                    "the worker's reply exceeds {} bytes",
                    limits.output_bytes
                )));
            }
            Ok(Ok(line)) => line,
        };
        let reply: Value = serde_json::from_slice(&line)
            .map_err(|e| ExecError::Protocol(format!("unreadable reply from the worker: {e}")))?;
        if reply.get("id").and_then(Value::as_u64) != Some(id) {
            return Err(ExecError::Protocol(
                "the worker answered another request".into(),
            ));
        }
        match reply.get("ok") {
            Some(Value::Bool(true)) => Ok(reply),
            _ => Err(ExecError::from_reply(reply.get("error"))),
        }
    }

    fn kill(&mut self) {
        if self.pgid > 0 {
            // SAFETY: killpg only sends a signal; a stale pgid at worst signals nothing.
            unsafe {
                libc::killpg(self.pgid, libc::SIGKILL);
            }
        }
        let _ = self.child.start_kill();
    }

    /// Explains why the worker stopped answering.
    async fn death(&mut self) -> ExecError {
        let status = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
        self.kill();
        // Give the stderr reader a moment to collect the last words.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let stderr = self
            .stderr_tail
            .lock()
            .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
            .unwrap_or_default();
        use std::os::unix::process::ExitStatusExt;
        match status {
            Ok(Ok(status)) => match status.signal() {
                Some(libc::SIGXCPU) => ExecError::Timeout {
                    seconds: 0.0,
                    detail: "CPU-time limit reached (SIGXCPU)".into(),
                },
                Some(signal) => ExecError::Crash(format!(
                    "the worker was killed by signal {signal}; stderr: {stderr}"
                )),
                None => ExecError::Crash(format!(
                    "the worker exited with status {}; stderr: {stderr}",
                    status.code().unwrap_or(-1)
                )),
            },
            _ => ExecError::Crash(format!("the worker closed its output; stderr: {stderr}")),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

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

/// Largest file a worker may write (`RLIMIT_FSIZE`); past it writes fail with `EFBIG`.
const FILE_SIZE_BYTES: u64 = 64 << 20;
/// Open file descriptors of a worker (`RLIMIT_NOFILE`).
const OPEN_FILES: u64 = 256;
/// A worker's CPU time over its whole life (the `RLIMIT_CPU` hard limit, which only grows with
/// privileges the worker lacks) in per-call budgets; a worker close to it is retired.
const LIFETIME_CALL_BUDGETS: u64 = 60;

/// A running worker. Dropping it kills its whole process group.
pub(crate) struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr_tail: Arc<Mutex<Vec<u8>>>,
    /// `RLIMIT_CPU` hard limit (seconds of CPU time over the worker's life).
    cpu_lifetime: u64,
    /// CPU seconds the worker had used when its limit was last armed (`u64::MAX`: unknown).
    cpu_used: u64,
    cpu_clock: limits::CpuClock,
    next_id: u64,
    /// Environments (by key) this process has loaded.
    pub(crate) loaded: HashSet<u64>,
    /// Fingerprint of the state the worker's live instance holds (see the runner's `_LIVE`).
    pub(crate) live_state: Option<u64>,
    /// The process's string hash seed (`PYTHONHASHSEED`): the order of a set of strings, and so
    /// any text built from one, depends on it.
    pub(crate) hash_seed: u32,
    /// The `coverage` object of the last reply, success or failure (a call asked for it).
    pub(crate) last_coverage: Option<Value>,
    _workdir: tempfile::TempDir,
}

impl Worker {
    /// Starts a worker running `runner` with `python`, in a fresh empty working directory, with
    /// string hashing seeded by `hash_seed`.
    pub(crate) async fn spawn(
        python: &Path,
        runner: &Path,
        limits: &Limits,
        hash_seed: u32,
    ) -> Result<Worker, ExecError> {
        let workdir = tempfile::Builder::new()
            .prefix("envsim-worker-")
            .tempdir()
            .map_err(|e| ExecError::Spawn(format!("cannot create a working directory: {e}")))?;
        let mut command = Command::new(python);
        // Not `-I`: its `-E` would ignore PYTHONHASHSEED too, and every process would hash
        // strings with a random seed (a set's order, and any text built from it, would differ
        // between runs). The environment is cleared instead, so the only PYTHON* variables are
        // the ones set here; `-s` leaves out the user site directory, PYTHONSAFEPATH (3.11+)
        // the script's directory on `sys.path` (the runner also drops it itself, for older
        // interpreters).
        command
            .arg("-s")
            .arg(runner)
            .current_dir(workdir.path())
            .env_clear()
            .env("TZ", "UTC")
            .env("LANG", "C.UTF-8")
            .env("PYTHONHASHSEED", hash_seed.to_string())
            .env("PYTHONSAFEPATH", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("ENVSIM_OUTPUT_CAP", limits.output_bytes.to_string())
            .env("ENVSIM_CPU_SECONDS", limits.cpu_seconds.to_string())
            .env("ENVSIM_WORKDIR", workdir.path())
            .env("TMPDIR", workdir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        let mut child = command
            .spawn()
            .map_err(|e| ExecError::Spawn(format!("cannot start {}: {e}", python.display())))?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ExecError::Spawn("the worker's pipes are missing".into()));
        };
        // The limits are set from here, before the first request: the worker's own start-up
        // (trusted code) may run before them, environment code never does. Its seccomp filter
        // forbids changing any of them.
        let budget = limits.cpu_seconds.saturating_add(1);
        let cpu_lifetime = budget.saturating_mul(LIFETIME_CALL_BUDGETS);
        let pid = child.id().map(|id| id as i32);
        let cpu_clock = limits::CpuClock::open(pid);
        if let Some(pid) = pid {
            let applied = limits::set(
                pid,
                limits::Resource::AddressSpace,
                limits.memory_bytes,
                limits.memory_bytes,
            )
            .and_then(|()| limits::set(pid, limits::Resource::Core, 0, 0))
            .and_then(|()| {
                limits::set(
                    pid,
                    limits::Resource::FileSize,
                    FILE_SIZE_BYTES,
                    FILE_SIZE_BYTES,
                )
            })
            .and_then(|()| limits::set(pid, limits::Resource::OpenFiles, OPEN_FILES, OPEN_FILES))
            .and_then(|()| limits::set(pid, limits::Resource::Cpu, budget, cpu_lifetime));
            match applied {
                // Gone already (its sandbox set-up failed): the first request reports why.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => {
                    let _ = child.start_kill();
                    return Err(ExecError::Spawn(format!(
                        "cannot limit the worker's resources: {e}"
                    )));
                }
                Ok(()) => {}
            }
        }
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
            cpu_lifetime,
            cpu_used: 0,
            cpu_clock,
            next_id: 0,
            loaded: HashSet::new(),
            live_state: None,
            hash_seed,
            last_coverage: None,
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
        self.arm_cpu(limits);
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
        let mut reply: Value = serde_json::from_slice(&line)
            .map_err(|e| ExecError::Protocol(format!("unreadable reply from the worker: {e}")))?;
        if reply.get("id").and_then(Value::as_u64) != Some(id) {
            return Err(ExecError::Protocol(
                "the worker answered another request".into(),
            ));
        }
        self.last_coverage = reply.get_mut("coverage").map(Value::take);
        match reply.get("ok") {
            Some(Value::Bool(true)) => Ok(reply),
            _ => {
                let state_after = reply.get_mut("state_after").map(Value::take);
                Err(ExecError::from_reply(reply.get("error"), state_after))
            }
        }
    }

    /// Lets the coming request use `cpu_seconds` more CPU time: the `RLIMIT_CPU` soft limit is
    /// set from here to the time used so far plus the budget (SIGXCPU past it). Without
    /// `/proc` the soft limit stays at the lifetime limit and the wall clock bounds the call.
    fn arm_cpu(&mut self, limits: &Limits) {
        // `id()` is `None` once the child is reaped: its pid is never used after that.
        let Some(pid) = self.child.id() else {
            return;
        };
        let pid = pid as i32;
        let used = self.cpu_clock.seconds_used();
        self.cpu_used = used.unwrap_or(u64::MAX);
        let soft = match used {
            Some(used) => used
                .saturating_add(limits.cpu_seconds.saturating_add(1))
                .min(self.cpu_lifetime),
            None => self.cpu_lifetime,
        };
        // A failure means the worker is gone; the request reports it.
        let _ = limits::set(pid, limits::Resource::Cpu, soft, self.cpu_lifetime);
    }

    /// True when the worker may have used so much of its lifetime CPU allowance that a load and
    /// a call would not get their full budgets (counting the last request as having used all of
    /// its budget): the pool retires it instead of reusing it.
    pub(crate) fn worn_out(&self, limits: &Limits) -> bool {
        let budget = limits.cpu_seconds.saturating_add(1);
        self.cpu_used != u64::MAX
            && self.cpu_used.saturating_add(budget.saturating_mul(3)) > self.cpu_lifetime
    }

    /// Kills the worker's process group. Only while the worker is unreaped: a reaped worker's
    /// pid (its process group id) may already belong to an unrelated process.
    fn kill(&mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: killpg only sends a signal. The group leader is our unreaped child, so the
            // id still names its group (a pid is not reused before its zombie is reaped).
            unsafe {
                libc::killpg(pid as i32, libc::SIGKILL);
            }
        }
        let _ = self.child.start_kill();
    }

    /// Explains why the worker stopped answering.
    async fn death(&mut self) -> ExecError {
        // Wait for the exit without reaping, kill what is left of the group while its id is
        // still ours, then reap.
        let exited = self.exited_unreaped(Duration::from_secs(2)).await;
        self.kill();
        let status = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
        // Give the stderr reader a moment to collect the last words.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let stderr = self
            .stderr_tail
            .lock()
            .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
            .unwrap_or_default();
        use std::os::unix::process::ExitStatusExt;
        match status {
            Ok(Ok(status)) if exited => match status.signal() {
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

    /// Waits up to `limit` for the worker to exit, leaving it unreaped (a zombie keeps its pid).
    async fn exited_unreaped(&self, limit: Duration) -> bool {
        let Some(pid) = self.child.id() else {
            return true;
        };
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match limits::has_exited(pid) {
                Some(false) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Some(false) => return false,
                _ => return true,
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Another process's resource limits and state: prlimit(2), `/proc/PID/stat` and waitid(2).
mod limits {
    /// The limits the executor sets on its workers.
    #[derive(Clone, Copy, Debug)]
    pub(super) enum Resource {
        AddressSpace,
        Core,
        FileSize,
        OpenFiles,
        Cpu,
    }

    /// Sets a limit of process `pid` (a child of ours that has not been reaped).
    #[cfg(target_os = "linux")]
    pub(super) fn set(pid: i32, resource: Resource, soft: u64, hard: u64) -> std::io::Result<()> {
        let resource = match resource {
            Resource::AddressSpace => libc::RLIMIT_AS,
            Resource::Core => libc::RLIMIT_CORE,
            Resource::FileSize => libc::RLIMIT_FSIZE,
            Resource::OpenFiles => libc::RLIMIT_NOFILE,
            Resource::Cpu => libc::RLIMIT_CPU,
        };
        let new = libc::rlimit {
            rlim_cur: soft as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: prlimit reads `new`; with a null `old_limit` it writes nothing.
        let rc = unsafe { libc::prlimit(pid, resource, &new, std::ptr::null_mut()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Elsewhere the limits are not set (the sandbox is Linux-only; see docs/executor.md).
    #[cfg(not(target_os = "linux"))]
    pub(super) fn set(_: i32, _: Resource, _: u64, _: u64) -> std::io::Result<()> {
        Ok(())
    }

    /// Reads the CPU time a process has used, from its `/proc/PID/stat` kept open (one `pread`
    /// per reading; the open file stays bound to that process, whatever happens to its pid).
    pub(super) struct CpuClock(Option<std::fs::File>);

    impl CpuClock {
        #[cfg(target_os = "linux")]
        pub(super) fn open(pid: Option<i32>) -> CpuClock {
            CpuClock(pid.and_then(|pid| std::fs::File::open(format!("/proc/{pid}/stat")).ok()))
        }

        #[cfg(not(target_os = "linux"))]
        pub(super) fn open(_: Option<i32>) -> CpuClock {
            CpuClock(None)
        }

        /// Whole seconds of CPU time (user + system, all threads) used so far.
        #[cfg(target_os = "linux")]
        pub(super) fn seconds_used(&self) -> Option<u64> {
            use std::os::unix::fs::FileExt;
            static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
            let ticks = *TICKS.get_or_init(|| {
                // SAFETY: sysconf only reads a configuration value.
                let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
                u64::try_from(t).ok().filter(|&t| t > 0).unwrap_or(100)
            });
            let mut buf = [0u8; 1024];
            let n = self.0.as_ref()?.read_at(&mut buf, 0).ok()?;
            let line = buf.get(..n)?;
            // The fields after the command name (which the process chooses, parentheses and all)
            // end at the last ')': state is the 3rd field, utime and stime the 14th and 15th.
            let rest = line.get(line.iter().rposition(|&b| b == b')')? + 1..)?;
            let mut fields = rest
                .split(|b| b.is_ascii_whitespace())
                .filter(|f| !f.is_empty())
                .skip(11)
                .map(|f| std::str::from_utf8(f).ok()?.parse::<u64>().ok());
            let utime = fields.next()??;
            let stime = fields.next()??;
            Some(utime.saturating_add(stime) / ticks)
        }

        #[cfg(not(target_os = "linux"))]
        pub(super) fn seconds_used(&self) -> Option<u64> {
            None
        }
    }

    /// Whether our child `pid` has exited, without reaping it; `None` when that cannot be told.
    #[cfg(target_os = "linux")]
    pub(super) fn has_exited(pid: u32) -> Option<bool> {
        // SAFETY: siginfo_t is plain data; all zeroes is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid with WNOWAIT only reports the child's state into `info`; the child
        // stays waitable (unreaped).
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if rc != 0 {
            return None;
        }
        // SAFETY: waitid filled `info` (si_pid stays 0 when no child has changed state).
        Some(unsafe { info.si_pid() } != 0)
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn has_exited(_: u32) -> Option<bool> {
        None
    }
}

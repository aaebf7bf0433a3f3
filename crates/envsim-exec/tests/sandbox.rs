//! The sandbox against hostile environment code (`tests/hostile/env.py`): every attack is
//! refused or contained with exactly the documented outcome, the pool keeps serving (a worker
//! that died is replaced, one that refused an attack is kept), and the process running the
//! tests — and a sentinel process of the same user — are unharmed.
//!
//! These tests hold as root too: nothing here relies on file permissions or on being
//! unprivileged (Landlock, seccomp and namespaces restrict root as well). Wall-clock limits are
//! generous; nothing asserts how fast anything is.
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use envsim_exec::{Call, EnvCode, ExecError, Executor, Limits};
use serde_json::{json, Map, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const HOSTILE: &str = include_str!("hostile/env.py");
const ORDINARY: &str = include_str!("hostile/ordinary.py");

const MEMORY: u64 = 512 << 20;

fn limits(cpu_seconds: u64, wall: Duration) -> Limits {
    Limits {
        wall,
        cpu_seconds,
        memory_bytes: MEMORY,
        output_bytes: 8 << 20,
    }
}

/// One worker, so a kept worker answers `whoami` with the same pid.
async fn pool(limits: Limits) -> Executor {
    Executor::new(1, limits)
        .await
        .expect("python3 is available")
}

async fn default_pool() -> Executor {
    pool(limits(5, Duration::from_secs(60))).await
}

async fn call(ex: &Executor, tool: &str, args: Value) -> Result<Value, ExecError> {
    let env = EnvCode::new(HOSTILE, "Hostile");
    let args: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
    let state = json!({});
    ex.call(&Call::new(&env, tool, &args, &state))
        .await
        .map(|o| o.observation_json)
}

async fn worker_pid(ex: &Executor) -> u64 {
    let out = call(ex, "whoami", json!({})).await.expect("whoami");
    out["pid"].as_u64().expect("a pid")
}

#[derive(Debug, PartialEq)]
enum Worker {
    Kept,
    Replaced,
}

/// Runs an attack and tells whether the worker survived it (and that the pool still serves).
async fn attack(ex: &Executor, tool: &str, args: Value) -> (Result<Value, ExecError>, Worker) {
    let before = worker_pid(ex).await;
    let result = call(ex, tool, args).await;
    let after = worker_pid(ex).await;
    let fate = if before == after {
        Worker::Kept
    } else {
        Worker::Replaced
    };
    (result, fate)
}

/// The attack must fail with an `exception` whose message starts with `prefix`, and the worker
/// must be kept.
async fn refused(ex: &Executor, tool: &str, args: Value, prefix: &str) {
    refused_with_any(ex, tool, args, &[prefix]).await
}

async fn refused_with_any(ex: &Executor, tool: &str, args: Value, prefixes: &[&str]) {
    let (result, fate) = attack(ex, tool, args.clone()).await;
    match result {
        Err(ExecError::Exception { message, .. }) => assert!(
            prefixes.iter().any(|p| message.starts_with(p)),
            "{tool}({args}): `{message}` does not start with any of {prefixes:?}"
        ),
        other => panic!("{tool}({args}): expected an exception {prefixes:?}, got {other:?}"),
    }
    assert_eq!(fate, Worker::Kept, "{tool}");
}

/// The attack's tool must return normally (each attempt reported inside), worker kept.
async fn reported(ex: &Executor, tool: &str, args: Value) -> Value {
    let (result, fate) = attack(ex, tool, args).await;
    assert_eq!(fate, Worker::Kept, "{tool}");
    result.unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// How files are confined on this machine, as the worker reports it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Confinement {
    Landlock,
    PrivateRoot,
}

async fn confinement(ex: &Executor) -> Confinement {
    let info = ex.info().await.expect("hello");
    let fs = info.sandbox["filesystem"].as_str().unwrap_or_default();
    if fs.starts_with("landlock") {
        Confinement::Landlock
    } else if fs.starts_with("private root") {
        Confinement::PrivateRoot
    } else {
        panic!(
            "no file-system confinement on this machine: {}",
            info.sandbox
        )
    }
}

fn unique(dir: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    Path::new(dir).join(format!("envsim-hostile-{}-{nanos}", std::process::id()))
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_dir())
        .unwrap_or_else(|| PathBuf::from("/root"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_reports_every_layer() {
    let ex = default_pool().await;
    let sandbox = ex.info().await.expect("hello").sandbox;
    eprintln!("sandbox: {sandbox:#}");
    assert_eq!(sandbox["no_new_privs"], true);
    let seccomp = sandbox["seccomp"].as_str().unwrap_or_default();
    assert!(seccomp.starts_with("on: allow-list"), "{seccomp}");
    let network = sandbox["network"].as_str().unwrap_or_default();
    assert!(network.contains("no sockets"), "{network}");
    assert_eq!(sandbox["memory_bytes"], MEMORY);
    assert_eq!(sandbox["core_bytes"], 0);
    assert_eq!(sandbox["file_size_bytes"], 64 << 20);
    assert_eq!(sandbox["open_files"], 256);
    assert_eq!(sandbox["cpu_seconds_lifetime"], (5 + 1) * 60);
    let landlock = sandbox["landlock"].as_str().unwrap_or_default();
    match confinement(&ex).await {
        Confinement::Landlock => assert!(landlock.starts_with("ABI "), "{landlock}"),
        Confinement::PrivateRoot => assert!(landlock.starts_with("unavailable"), "{landlock}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinary_code_still_works() {
    let ex = default_pool().await;
    let env = EnvCode::new(ORDINARY, "Ordinary");
    let state = json!({});
    let out = ex
        .call(&Call::new(&env, "run", &Map::new(), &state))
        .await
        .expect("ordinary code runs")
        .observation_json;
    let zone = if Path::new("/usr/share/zoneinfo/Europe/Paris").exists() {
        "2025-01-01 00:00:00+01:00"
    } else {
        "no time-zone data"
    };
    assert_eq!(
        out,
        json!({
            "thread": 499500, "pool": [0, 2, 4, 6, 8], "tmp": "hello", "files": ["b", "e.txt"],
            "dec": "3.3", "hash": "2d711642", "urandom": 16, "cpu": true, "zone": zone, "sql": 2,
            "gz": 24, "pickle": {"a": 1}, "et": "a", "q": 1, "async": 1, "locale": "UTF-8",
            "uname": "Linux", "pid": true, "stat": true, "isatty": false, "tb": true,
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_outside_the_working_directory_are_out_of_reach() {
    let ex = default_pool().await;
    let mode = confinement(&ex).await;
    // Landlock refuses (EACCES); in the private root the place is read-only or does not exist.
    let (no_write, no_read): (&[&str], &str) = match mode {
        Confinement::Landlock => (
            &["PermissionError: [Errno 13]"],
            "PermissionError: [Errno 13]",
        ),
        Confinement::PrivateRoot => (
            &["OSError: [Errno 30]", "FileNotFoundError: [Errno 2]"],
            "FileNotFoundError: [Errno 2]",
        ),
    };

    // Writes: shared temporary directories, shared memory, the home directory.
    let home_dir = home().to_string_lossy().to_string();
    for dir in ["/tmp", "/var/tmp", "/dev/shm", home_dir.as_str()] {
        let target = unique(dir);
        let path = target.to_string_lossy().to_string();
        refused_with_any(&ex, "write_file", json!({ "path": path }), no_write).await;
        let leaked = target.exists();
        let _ = std::fs::remove_file(&target);
        assert!(!leaked, "{path} was written");
    }

    // Reads: a secret the test leaves outside the allowed paths, the home directory, /etc.
    let secret_dir = tempfile::tempdir().expect("tempdir");
    let secret = secret_dir.path().join("secret.txt");
    std::fs::write(&secret, "the secret").expect("secret");
    let secret_path = secret.to_string_lossy().to_string();
    refused(&ex, "read_file", json!({ "path": secret_path }), no_read).await;
    let dir = secret_dir.path().to_string_lossy().to_string();
    refused(&ex, "list_dir", json!({ "path": dir }), no_read).await;
    refused(&ex, "read_file", json!({"path": "/etc/passwd"}), no_read).await;
    if mode == Confinement::Landlock {
        refused(&ex, "list_dir", json!({ "path": home_dir }), no_read).await;
    }

    // Metadata by path is not confined by Landlock, so seccomp refuses chmod by path.
    use std::os::unix::fs::PermissionsExt;
    let mode_before = std::fs::metadata(&secret)
        .expect("meta")
        .permissions()
        .mode();
    refused(
        &ex,
        "chmod",
        json!({ "path": secret_path }),
        "PermissionError: [Errno 1]",
    )
    .await;
    let mode_after = std::fs::metadata(&secret)
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode_before, mode_after);

    // Links made in the working directory do not lend their target the directory's rights.
    let links = reported(&ex, "link_tricks", json!({ "path": secret_path })).await;
    let expected = match mode {
        Confinement::Landlock => json!({
            "symlink": "PermissionError 13",
            "hardlink": "OSError 18",
            "hardlink_read": "FileNotFoundError 2",
        }),
        Confinement::PrivateRoot => json!({
            "symlink": "FileNotFoundError 2",
            "hardlink": "FileNotFoundError 2",
            "hardlink_read": "FileNotFoundError 2",
        }),
    };
    assert_eq!(links, expected);

    // /proc: not this process's memory, not other processes.
    let proc = reported(&ex, "proc_writes", json!({})).await;
    let denied = match mode {
        Confinement::Landlock => "PermissionError 13",
        Confinement::PrivateRoot => "FileNotFoundError 2",
    };
    assert_eq!(
        proc,
        json!({"mem": denied, "oom_score_adj": denied, "parent_cmdline": denied, "pid1_environ": denied})
    );

    // The working directory itself is writable.
    let inside = call(&ex, "write_file", json!({"path": "inside.txt"})).await;
    assert_eq!(inside.expect("inside"), json!({"written": "inside.txt"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_cannot_be_raised_and_hold() {
    let ex = default_pool().await;
    let out = reported(&ex, "raise_limits", json!({})).await;
    for name in [
        "RLIMIT_CPU",
        "RLIMIT_AS",
        "RLIMIT_FSIZE",
        "RLIMIT_NOFILE",
        "RLIMIT_CORE",
    ] {
        assert_eq!(
            out[format!("{name} setrlimit")],
            "ValueError: not allowed to raise maximum limit",
            "{out}"
        );
        assert_eq!(out[format!("{name} prlimit")], "PermissionError 1", "{out}");
        assert_eq!(out[format!("{name} unchanged")], true, "{out}");
    }
    assert_eq!(
        out["limits"],
        json!({"cpu_hard": (5 + 1) * 60, "as": MEMORY, "core": 0})
    );
    // The CPU limit must stay fatal: no handler for SIGXCPU.
    refused(
        &ex,
        "ignore_sigxcpu",
        json!({}),
        "PermissionError: [Errno 1]",
    )
    .await;
    refused(
        &ex,
        "big_file",
        json!({}),
        "OSError: [Errno 27] File too large",
    )
    .await;
    refused(
        &ex,
        "many_files",
        json!({}),
        "OSError: [Errno 24] Too many open files",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_memory_and_stack_bombs_are_contained() {
    // A busy loop dies of SIGXCPU after its 1-second budget, long before the wall clock.
    let ex = pool(limits(1, Duration::from_secs(120))).await;
    let (result, fate) = attack(&ex, "spin", json!({})).await;
    match result {
        Err(ExecError::Timeout { detail, .. }) => assert!(detail.contains("SIGXCPU"), "{detail}"),
        other => panic!("spin: {other:?}"),
    }
    assert_eq!(fate, Worker::Replaced);

    // Blocking SIGXCPU does not buy more time: the wall clock ends the call.
    let ex = pool(limits(1, Duration::from_secs(4))).await;
    let (result, fate) = attack(&ex, "spin_with_sigxcpu_blocked", json!({})).await;
    match result {
        Err(ExecError::Timeout { detail, .. }) => {
            assert!(detail.contains("wall-clock"), "{detail}")
        }
        other => panic!("spin_with_sigxcpu_blocked: {other:?}"),
    }
    assert_eq!(fate, Worker::Replaced);

    let ex = default_pool().await;
    for tool in ["allocate", "allocate_slowly"] {
        let (result, fate) = attack(&ex, tool, json!({})).await;
        assert_eq!(result.expect_err(tool).kind(), "memory");
        assert_eq!(fate, Worker::Kept, "{tool}");
    }
    refused(
        &ex,
        "recurse",
        json!({}),
        "RecursionError: maximum recursion depth exceeded",
    )
    .await;
    // With the recursion limit lifted the recursion runs into a limit of the process: in
    // CPython 3.11 the frames live on the heap and allocation fails under RLIMIT_AS (an
    // exception, the worker is kept); where a C stack overflows, SIGSEGV ends the worker (no
    // core file); a slow machine may reach the CPU budget first. Either way the pool keeps
    // serving.
    let ex = pool(Limits {
        memory_bytes: 256 << 20,
        ..limits(10, Duration::from_secs(120))
    })
    .await;
    let (result, fate) = attack(&ex, "recurse", json!({"limit": 10_000_000})).await;
    match result {
        Err(ExecError::Crash(message)) => {
            assert!(message.contains("signal 11"), "{message}");
            assert_eq!(fate, Worker::Replaced);
        }
        Err(ExecError::Timeout { detail, .. }) => {
            assert!(detail.contains("SIGXCPU"), "{detail}");
            assert_eq!(fate, Worker::Replaced);
        }
        Err(e @ (ExecError::Exception { .. } | ExecError::Memory(_))) => {
            assert_eq!(fate, Worker::Kept, "{e}")
        }
        other => panic!("deep recursion: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_call_fails_the_call_with_the_cause_and_is_replaced() {
    let ex = std::sync::Arc::new(default_pool().await);
    let pid = worker_pid(&ex).await;
    let calling = tokio::spawn({
        let ex = std::sync::Arc::clone(&ex);
        async move { call(&ex, "nap", json!({"seconds": 30})).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Killed from outside (the OOM killer, an operator): not by anything the call did.
    let killed = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    match calling.await.expect("the call's task") {
        Err(ExecError::Crash(message)) => {
            assert!(message.contains("signal 9"), "{message}")
        }
        other => panic!("a killed worker's call: {other:?}"),
    }
    // The pool replaced the worker: the next call runs, in another process.
    let replaced = std::time::Instant::now();
    assert_ne!(worker_pid(&ex).await, pid);
    eprintln!(
        "the next call after the kill ran in {:.0} ms",
        replaced.elapsed().as_secs_f64() * 1000.0
    );
    assert_eq!(
        call(&ex, "nap", json!({"seconds": 0})).await.unwrap(),
        json!({"slept": 0})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_processes_no_signals_to_others_no_tracing() {
    let ex = default_pool().await;
    refused(&ex, "fork_bomb", json!({}), "PermissionError: [Errno 1]").await;
    let spawn = reported(&ex, "spawn", json!({})).await;
    assert_eq!(
        spawn,
        json!({
            "subprocess": "PermissionError 1",
            "execv": "PermissionError 1",
            "posix_spawn": "PermissionError 1",
            // system(3) could not start the shell: exit status 127
            "system": "succeeded 32512",
            "vfork": "errno 1",
            "clone_process": "errno 1",
            "clone_newuser_thread": "errno 1",
        })
    );
    // Threads still work.
    let threads = reported(&ex, "threads", json!({})).await;
    assert_eq!(threads, json!({"thread_result": 4950}));

    // kill(-1, SIGKILL) must reach nobody: a sentinel of the same user survives it.
    let mut sentinel = Command::new("sleep")
        .arg("600")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sleep");
    let everyone = reported(&ex, "kill_everyone", json!({})).await;
    let parent = reported(&ex, "kill_parent", json!({})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let alive = sentinel.try_wait().expect("try_wait").is_none();
    let _ = sentinel.kill();
    let _ = sentinel.wait();
    assert!(alive, "the sentinel was killed");
    assert_eq!(
        everyone,
        json!({"probe": "PermissionError 1", "sent": true, "kill": "PermissionError 1"})
    );
    assert_eq!(
        parent,
        json!({
            "probe": "PermissionError 1",
            "sent": true,
            "kill": "PermissionError 1",
            "killpg_own_group": "PermissionError 1",
            "tgkill": "errno 1",
            "pidfd_open": "errno 1",
        })
    );

    // Nor through the kernel's I/O signals.
    let sigio = reported(&ex, "sigio_parent", json!({})).await;
    assert_eq!(
        sigio,
        json!({"F_SETOWN": "PermissionError 1", "F_SETSIG": "PermissionError 1", "F_SETFL": "succeeded 0"})
    );

    let ptrace = reported(&ex, "ptrace", json!({})).await;
    assert_eq!(
        ptrace,
        json!({"attach_parent": "errno 1", "traceme": "errno 1", "process_vm_readv": "errno 1"})
    );
    refused(&ex, "setuid", json!({}), "PermissionError: [Errno 1]").await;

    // Killing itself is allowed and ends only the worker.
    let (result, fate) = attack(&ex, "kill_self", json!({})).await;
    match result {
        Err(ExecError::Crash(message)) => assert!(message.contains("signal 9"), "{message}"),
        other => panic!("kill_self: {other:?}"),
    }
    assert_eq!(fate, Worker::Replaced);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_network() {
    let ex = default_pool().await;
    let sockets = reported(&ex, "sockets", json!({})).await;
    assert_eq!(
        sockets,
        json!({
            "AF_INET": "PermissionError 1",
            "AF_INET_UDP": "PermissionError 1",
            "AF_INET6": "PermissionError 1",
            "AF_UNIX": "PermissionError 1",
            "AF_NETLINK": "PermissionError 1",
            "AF_PACKET": "PermissionError 1",
            "socketpair_inet": "PermissionError 1",
            "connect_localhost": "PermissionError 1",
            "socketpair_unix": "ping",
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_interfaces_and_other_abis_are_refused() {
    let ex = default_pool().await;
    let escape = reported(&ex, "escape", json!({})).await;
    let Value::Object(attempts) = &escape else {
        panic!("escape: {escape}")
    };
    assert_eq!(attempts.len(), 18, "{escape}");
    for (name, outcome) in attempts {
        assert!(
            outcome == "errno 1" || outcome == "PermissionError 1",
            "{name}: {outcome}"
        );
    }
    // x32 system call numbers (bit 30) are refused, the native number works.
    let x32 = reported(&ex, "x32", json!({})).await;
    assert!(
        x32["native"]
            .as_str()
            .unwrap_or_default()
            .starts_with("ok "),
        "{x32}"
    );
    assert_eq!(x32["x32"], "errno 1");
    assert_eq!(x32["x32_openat"], "errno 1");
    // A system call through the i386 ABI (int 0x80) kills the worker (SIGSYS), which is
    // replaced. A kernel booted with IA-32 emulation off answers int 0x80 with SIGSEGV instead.
    let (result, fate) = attack(&ex, "i386", json!({})).await;
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    let expected = if cmdline.contains("ia32_emulation=0") {
        "signal 11"
    } else {
        "signal 31"
    };
    match result {
        Err(ExecError::Crash(message)) => assert!(message.contains(expected), "{message}"),
        other => panic!("i386: {other:?}"),
    }
    assert_eq!(fate, Worker::Replaced);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_output_is_cut_and_noise_is_harmless() {
    let ex = default_pool().await;
    let (result, fate) = attack(&ex, "shout", json!({})).await;
    assert_eq!(result.expect_err("shout").kind(), "output_too_large");
    assert_eq!(fate, Worker::Replaced);
    let noisy = reported(&ex, "noise", json!({})).await;
    assert_eq!(noisy, json!({"noisy": true}));
}

/// The runner started by hand, to test the confinement used where Landlock is missing
/// (`ENVSIM_SANDBOX_NO_LANDLOCK=1` makes the runner behave as on such a kernel).
struct Runner {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Runner {
    fn start(python: &Path, script: &Path, workdir: &Path) -> Runner {
        let mut child = Command::new(python)
            .arg("-I")
            .arg(script)
            .current_dir(workdir)
            .env_clear()
            .env("TZ", "UTC")
            .env("LANG", "C.UTF-8")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("ENVSIM_WORKDIR", workdir)
            .env("ENVSIM_SANDBOX_NO_LANDLOCK", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Runner {
            child,
            stdin,
            stdout,
            next: 0,
        }
    }

    fn request(&mut self, mut header: Value, state: bool) -> Value {
        self.next += 1;
        header["id"] = self.next.into();
        let mut text = header.to_string() + "\n";
        if state {
            text.push_str("{}\n");
        }
        self.stdin.write_all(text.as_bytes()).expect("write");
        self.stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("reply `{line}`: {e}"))
    }

    fn call(&mut self, tool: &str, args: Value) -> Value {
        self.request(
            json!({"op": "call", "env": "h", "tool": tool, "args": args, "seed": 0, "clock": 0.0}),
            true,
        )
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn message(reply: &Value) -> String {
    reply["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn without_landlock_a_private_root_confines_files() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let python = runtime
        .block_on(envsim_exec::resolve_python())
        .expect("python3");
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("envsim_runner.py");
    std::fs::write(&script, envsim_exec::RUNNER_SOURCE).expect("runner");
    let workdir = tempfile::Builder::new()
        .prefix("envsim-worker-")
        .tempdir()
        .expect("workdir");
    let mut runner = Runner::start(&python, &script, workdir.path());

    let hello = runner.request(json!({"op": "hello"}), false);
    let sandbox = &hello["sandbox"];
    eprintln!("fallback sandbox: {sandbox:#}");
    let fs = sandbox["filesystem"].as_str().unwrap_or_default();
    assert_eq!(
        sandbox["landlock"],
        "unavailable: disabled by ENVSIM_SANDBOX_NO_LANDLOCK"
    );
    if fs.starts_with("none") {
        // No user namespace and no privileges here: the fallback is reported, not silent.
        assert!(sandbox["user_namespace"]
            .as_str()
            .unwrap_or_default()
            .starts_with("unavailable"));
        return;
    }
    assert!(fs.starts_with("private root"), "{fs}");
    let load = runner.request(
        json!({"op": "load", "env": "h", "code": HOSTILE, "class_name": "Hostile"}),
        false,
    );
    assert_eq!(load["ok"], true, "{load}");

    // Read-only (a directory kept for the working directory or the Python installation) or
    // absent.
    let home_dir = home().to_string_lossy().to_string();
    for dir in ["/tmp", "/var/tmp", "/dev/shm", home_dir.as_str()] {
        let target = unique(dir);
        let reply = runner.call("write_file", json!({"path": target.to_string_lossy()}));
        let leaked = target.exists();
        let _ = std::fs::remove_file(&target);
        let text = message(&reply);
        assert!(
            text.starts_with("OSError: [Errno 30]")
                || text.starts_with("FileNotFoundError: [Errno 2]"),
            "{dir}: {reply}"
        );
        assert!(!leaked, "{} was written", target.display());
    }
    let secret_dir = tempfile::tempdir().expect("tempdir");
    let secret = secret_dir.path().join("secret.txt");
    std::fs::write(&secret, "the secret").expect("secret");
    let reply = runner.call("read_file", json!({"path": secret.to_string_lossy()}));
    assert!(
        message(&reply).starts_with("FileNotFoundError: [Errno 2]"),
        "{reply}"
    );
    let reply = runner.call("read_file", json!({"path": "/etc/passwd"}));
    assert!(
        message(&reply).starts_with("FileNotFoundError: [Errno 2]"),
        "{reply}"
    );
    let reply = runner.call("proc_writes", json!({}));
    assert_eq!(
        reply["observation_json"]["mem"], "FileNotFoundError 2",
        "{reply}"
    );
    // The rest of the sandbox is the same: no sockets, no processes.
    let reply = runner.call("sockets", json!({}));
    assert_eq!(
        reply["observation_json"]["AF_INET"], "PermissionError 1",
        "{reply}"
    );
    let reply = runner.call("fork_bomb", json!({}));
    assert!(
        message(&reply).starts_with("PermissionError: [Errno 1]"),
        "{reply}"
    );
    // The working directory is writable, and the standard library still imports.
    let reply = runner.call("write_file", json!({"path": "inside.txt"}));
    assert_eq!(reply["ok"], true, "{reply}");
    assert!(workdir.path().join("inside.txt").exists());
    let reply = runner.call("threads", json!({}));
    assert_eq!(reply["observation_json"]["thread_result"], 4950, "{reply}");
}

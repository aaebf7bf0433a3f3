//! # envsim-exec
//!
//! Executes Python environment code — the source of envsim's ground truth — in a pool of
//! sandboxed, deterministic worker processes driven over JSON lines.
//!
//! - **Conventions** ([`Convention`]): `class` (EnvScaler-compatible): the code defines a class;
//!   a call constructs it from the state (`Class(config)`, then every top-level key set as an
//!   attribute), calls the tool method with keyword arguments, and returns the observation
//!   (`str()` of the return value and its JSON form) and the state after (public instance
//!   attributes). `database`: the tools are the module's public functions `tool(data, **args)`;
//!   a call decodes the state into one dict, passes it as `data`, and returns the dict as the
//!   function left it (mutated in place) as the state after. Non-JSON values (sets, tuples,
//!   non-string keys, objects) are converted and every conversion is reported.
//! - **Isolation** (Linux; docs/executor.md says exactly what holds and on which kernel
//!   features): each worker runs in its own process group, user and network namespace and empty
//!   working directory, with limits it cannot raise (address space, a per-call CPU-time budget
//!   re-armed by the executor before every request, file size, open files, no core dumps), a
//!   wall-clock limit (the process group is killed), an output cap, Landlock (reads only the
//!   Python installation and system libraries, writes only the working directory; a private
//!   root in a mount namespace where Landlock is missing), and on x86-64 a seccomp allow-list
//!   (no new processes, no sockets, no signals to other processes, no limit changes, no mounts
//!   or namespaces, no x32 or i386 system calls). A worker that hangs, crashes or overruns is
//!   killed and replaced; the call gets a typed [`ExecError`] and the pool keeps serving.
//!   [`Executor::info`] reports which layers are active.
//! - **Determinism**: `time`, `datetime`, `random` and `uuid` are frozen per call from the
//!   request's `clock` and `seed`, so a `(state, call)` pair always gives the same result;
//!   [`Executor::probe`] reruns a call under other clocks and seeds and reports which output
//!   fields depend on them.
//! - **Footprints** (optional): the paths a call read, recorded by tracing containers.

mod error;
// The worker pool controls its processes through libc (signalling process groups, resource
// limits, wait status): the crate's only unsafe code, each call with a SAFETY comment.
#[allow(unsafe_code)]
mod worker;

pub mod appworld;
pub mod bfcl;
pub mod coverage;
pub mod envscaler;
pub mod package;
pub mod rendering;
pub mod tau2;

pub use error::ExecError;

use envsim_core::diff::fine_diff;
use envsim_core::pointer::JsonPointer;
use serde_json::{Map, Value};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use worker::Worker;

/// The worker script, shipped inside the binary.
pub const RUNNER_SOURCE: &str = include_str!("../python/envsim_runner.py");

/// How much later the second run of a call is clocked to find what depends on the clock
/// ([`Executor::probe`], `env test`'s stamp check): 37 days, 1 hour, 1 minute, 1.25 seconds, so
/// that no calendar field (day, hour, minute, second) stays the same.
pub const PROBE_CLOCK_SHIFT: f64 = 86_400.0 * 37.0 + 3_661.25;

/// The clock every call sees unless told otherwise: 2025-01-01T00:00:00Z.
pub const DEFAULT_CLOCK: f64 = 1_735_689_600.0;

/// Resource limits of every worker.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Wall-clock limit of one call.
    pub wall: Duration,
    /// CPU-time limit of one call, in whole seconds.
    pub cpu_seconds: u64,
    /// Address-space limit of a worker.
    pub memory_bytes: u64,
    /// Largest reply accepted from a worker.
    pub output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            wall: Duration::from_secs(10),
            cpu_seconds: 10,
            memory_bytes: 1 << 30,
            output_bytes: 16 << 20,
        }
    }
}

/// The environment variable that raises (or lowers) the reply cap, in MiB.
pub const REPLY_CAP_VAR: &str = "ENVSIM_REPLY_CAP_MB";

/// The environment variable that sets the wall-clock limit of one call, in seconds (a worker's
/// first AppWorld call imports AppWorld and builds its world: seconds of work that a loaded
/// machine can stretch past the default 10).
pub const CALL_WALL_VAR: &str = "ENVSIM_CALL_WALL_S";

impl Limits {
    /// The defaults, with the reply cap from `ENVSIM_REPLY_CAP_MB` and the wall-clock limit
    /// from `ENVSIM_CALL_WALL_S` when set (a state of 20 MB needs a cap above the default
    /// 16 MiB: each reply carries the state after).
    pub fn from_env() -> Result<Limits, String> {
        Limits::from_vars(
            std::env::var(REPLY_CAP_VAR).ok().as_deref(),
            std::env::var(CALL_WALL_VAR).ok().as_deref(),
        )
    }

    /// [`Limits::from_env`] on the variables' values.
    pub fn from_vars(
        reply_cap_mb: Option<&str>,
        call_wall_s: Option<&str>,
    ) -> Result<Limits, String> {
        let mut limits = Limits::default();
        if let Some(text) = reply_cap_mb {
            let mb: usize = text
                .trim()
                .parse()
                .ok()
                .filter(|&mb| (1..=64 * 1024).contains(&mb))
                .ok_or_else(|| {
                    format!(
                        "{REPLY_CAP_VAR}={text:?}: expected a whole number of MiB from 1 to 65536"
                    )
                })?;
            limits.output_bytes = mb << 20;
        }
        if let Some(text) = call_wall_s {
            let seconds: u64 = text
                .trim()
                .parse()
                .ok()
                .filter(|&s| (1..=3600).contains(&s))
                .ok_or_else(|| {
                    format!(
                        "{CALL_WALL_VAR}={text:?}: expected a whole number of seconds from 1 to 3600"
                    )
                })?;
            limits.wall = Duration::from_secs(seconds);
            // The CPU limit follows: a call may use the time it is given.
            limits.cpu_seconds = limits.cpu_seconds.max(seconds);
        }
        Ok(limits)
    }
}

/// How an environment's code is written (`envs/README.md`, "Conventions").
pub use envsim_core::convention::Convention;

/// Environment code, identified by a hash of its source, class name and convention.
#[derive(Clone, Debug)]
pub struct EnvCode {
    key: u64,
    /// Python source.
    pub code: Arc<str>,
    /// Name of the environment class (empty for the database convention).
    pub class_name: Arc<str>,
    /// How the code is written.
    pub convention: Convention,
    /// The answers the package's harness gives in place of an exception or an invalid call
    /// (none: the executor's reports stand).
    pub errors: Arc<rendering::ErrorRendering>,
}

impl EnvCode {
    /// Wraps source code and the class to instantiate (the class convention).
    pub fn new(code: impl Into<Arc<str>>, class_name: impl Into<Arc<str>>) -> Self {
        Self::with_convention(code, class_name, Convention::Class)
    }

    /// Wraps source code whose tools are module-level functions over one JSON database.
    pub fn database(code: impl Into<Arc<str>>) -> Self {
        Self::with_convention(code, "", Convention::Database)
    }

    /// Wraps source code of either convention (`class_name` is ignored for `database`).
    pub fn with_convention(
        code: impl Into<Arc<str>>,
        class_name: impl Into<Arc<str>>,
        convention: Convention,
    ) -> Self {
        let (code, class_name) = (code.into(), class_name.into());
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        code.hash(&mut hasher);
        class_name.hash(&mut hasher);
        convention.hash(&mut hasher);
        EnvCode {
            key: hasher.finish(),
            code,
            class_name,
            convention,
            errors: Arc::default(),
        }
    }

    /// The same code, with exceptions and invalid calls answered as `errors` says.
    pub fn with_errors(mut self, errors: rendering::ErrorRendering) -> Self {
        self.errors = Arc::new(errors);
        self
    }
}

/// One tool call to execute.
#[derive(Clone, Debug)]
pub struct Call<'a> {
    /// The environment.
    pub env: &'a EnvCode,
    /// Tool (method) name.
    pub tool: &'a str,
    /// Keyword arguments.
    pub args: &'a Map<String, Value>,
    /// The state to construct the instance from.
    pub state: &'a Value,
    /// Seed of `random` and `uuid`.
    pub seed: u64,
    /// Frozen clock (seconds since the epoch).
    pub clock: f64,
    /// Reproduce the reference's `init_config` aliasing (see the crate docs of the runner).
    pub alias_init_config: bool,
    /// Record the paths the call reads.
    pub trace: bool,
    /// Report the lines and arcs of the environment's code the call ran
    /// ([`Executor::call_covered`]).
    pub coverage: bool,
}

impl<'a> Call<'a> {
    /// A call with the default seed (0) and clock, no aliasing, no tracing.
    pub fn new(
        env: &'a EnvCode,
        tool: &'a str,
        args: &'a Map<String, Value>,
        state: &'a Value,
    ) -> Self {
        Call {
            env,
            tool,
            args,
            state,
            seed: 0,
            clock: DEFAULT_CLOCK,
            alias_init_config: false,
            trace: false,
            coverage: false,
        }
    }
}

/// The seed a call gets when none is given: a function of the state, the tool and the
/// arguments — the same call always draws the same `random`/`uuid` values, and the steps of a
/// chain (whose states differ) draw different ones, so two creations in a row never get the
/// same generated id. SHA-256 of the canonical JSON (object keys sorted) of
/// `[state, tool, arguments]`, first 8 bytes big-endian, shifted right by 16 (48 bits, the
/// range the walks of `bench build` use). Walks and replays derive their seeds from (run seed,
/// step) instead.
pub fn default_seed(state: &Value, tool: &str, args: &Map<String, Value>) -> u64 {
    use sha2::{Digest, Sha256};
    let mut text = Vec::with_capacity(256);
    text.push(b'[');
    canonical_json(state, &mut text);
    text.push(b',');
    canonical_json(&Value::String(tool.to_owned()), &mut text);
    text.push(b',');
    canonical_json(&Value::Object(args.clone()), &mut text);
    text.push(b']');
    let digest = Sha256::digest(&text);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first) >> 16
}

/// The seed of step `step` (0-based) of a replayed run with seed `run_seed`: distinct across the
/// steps of a run and across runs, the same on every replay. SplitMix64 over `run_seed` and the
/// step index (the SplitMix64 output function is a bijection, so two steps of a run never
/// share a seed before the shift), shifted right by 16 (48 bits, like [`default_seed`]).
pub fn step_seed(run_seed: u64, step: usize) -> u64 {
    use envsim_core::rng::Rng;
    let base = Rng::new(run_seed).next_u64();
    Rng::new(base ^ step as u64).next_u64() >> 16
}

/// Compact JSON with every object's keys in sorted order (whatever order the file had).
fn canonical_json(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical_json(&Value::String(key.clone()), out);
                out.push(b':');
                canonical_json(&map[key], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical_json(item, out);
            }
            out.push(b']');
        }
        // Scalars and strings have one compact form; writing into a Vec cannot fail.
        scalar => {
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
}

/// A value that was not plain JSON and how it was converted.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Conversion {
    /// JSON Pointer into the state (`#observation...` for the observation).
    pub path: String,
    /// The Python type found.
    pub from: String,
    /// What it became.
    pub to: String,
}

/// What a call produced.
#[derive(Clone, Debug, PartialEq)]
pub struct CallOutcome {
    /// `str()` of the return value, as the reference renders observations.
    pub observation: String,
    /// The return value as JSON.
    pub observation_json: Value,
    /// Public instance attributes after the call.
    pub state_after: Value,
    /// Non-JSON values met and how they were converted.
    pub converted: Vec<Conversion>,
    /// Time spent inside the tool (construction and call), measured by the worker.
    pub tool_time: Duration,
    /// Paths read by the call, when traced.
    pub reads: Option<Vec<JsonPointer>>,
}

impl CallOutcome {
    /// Locations where two outcomes of the same call differ, prefixed `/observation` or
    /// `/state`: the fields that depend on whatever differed between the runs.
    pub fn differences(&self, other: &CallOutcome) -> Vec<String> {
        let mut out = Vec::new();
        for (prefix, x, y) in [
            (
                "/observation",
                &self.observation_json,
                &other.observation_json,
            ),
            ("/state", &self.state_after, &other.state_after),
        ] {
            out.extend(
                fine_diff(x, y)
                    .iter()
                    .map(|c| format!("{prefix}{}", c.pointer)),
            );
        }
        out
    }
}

/// A call's result with the coverage of the environment's code it ran.
#[derive(Clone, Debug)]
pub struct Covered {
    /// What the call produced, as [`Executor::call`] gives it.
    pub result: Result<CallOutcome, ExecError>,
    /// The lines and arcs it ran (`None` when the tool never ran).
    pub coverage: Option<coverage::CallCoverage>,
}

/// Which output fields depend on the clock or on the random seed.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ProbeReport {
    /// Locations (`/observation/...`, `/state/...`) that change with the clock.
    pub clock_dependent: Vec<String>,
    /// Locations that change with the seed (random, uuid).
    pub seed_dependent: Vec<String>,
    /// Locations that change with the process's string hash seed: the order of a set of
    /// strings, e.g. an error text that joins a set of allowed values.
    pub hash_dependent: Vec<String>,
}

impl ProbeReport {
    /// True when the call is fully determined by state, code and arguments.
    pub fn is_deterministic(&self) -> bool {
        self.clock_dependent.is_empty()
            && self.seed_dependent.is_empty()
            && self.hash_dependent.is_empty()
    }
}

/// Interpreter facts reported by a worker.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct WorkerInfo {
    /// Python version.
    pub python: String,
    /// Interpreter path.
    pub executable: String,
    /// Sandbox facts: each layer's status (`seccomp`, `landlock`, `filesystem`, `network`,
    /// `user_namespace`, `no_new_privs`) and the limits in force.
    pub sandbox: Value,
}

/// The string hash seed (`PYTHONHASHSEED`) of every worker that executes calls: one fixed
/// seed, so that the order of a set of strings is the same in every process and on every run.
pub const HASH_SEED: u32 = 0;
/// The hash seed of the twin processes that the double execution runs in
/// ([`Executor::call_in_twin_process`]).
pub const TWIN_HASH_SEED: u32 = 1;

/// A pool of sandboxed Python workers.
pub struct Executor {
    python: PathBuf,
    runner: tempfile::NamedTempFile,
    limits: Limits,
    idle: Mutex<Vec<Worker>>,
    slots: Semaphore,
}

impl Executor {
    /// Starts an executor with up to `workers` processes (started lazily).
    ///
    /// The interpreter is `$ENVSIM_PYTHON` or `python3` on `PATH`, resolved once to its real
    /// path (not a version-manager shim).
    pub async fn new(workers: usize, limits: Limits) -> Result<Executor, ExecError> {
        let python = resolve_python().await?;
        let mut runner = tempfile::Builder::new()
            .prefix("envsim_runner_")
            .suffix(".py")
            .tempfile()
            .map_err(|e| ExecError::Spawn(format!("cannot write the runner script: {e}")))?;
        std::io::Write::write_all(&mut runner, RUNNER_SOURCE.as_bytes())
            .map_err(|e| ExecError::Spawn(format!("cannot write the runner script: {e}")))?;
        Ok(Executor {
            python,
            runner,
            limits,
            idle: Mutex::new(Vec::new()),
            slots: Semaphore::new(workers.max(1)),
        })
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// An idle worker hashing strings with `hash_seed` (preferring one whose live instance
    /// holds `state`), or a new one.
    async fn checkout(&self, state: Option<u64>, hash_seed: u32) -> Result<Worker, ExecError> {
        let reused = self.idle.lock().ok().and_then(|mut idle| {
            let preferred = state.and_then(|s| {
                idle.iter()
                    .position(|w| w.hash_seed == hash_seed && w.live_state == Some(s))
            });
            preferred
                .or_else(|| idle.iter().rposition(|w| w.hash_seed == hash_seed))
                .map(|i| idle.swap_remove(i))
        });
        match reused {
            // A worker near the end of its lifetime CPU allowance is dropped (killed) here.
            Some(worker) if !worker.worn_out(&self.limits) => Ok(worker),
            _ => Worker::spawn(&self.python, self.runner.path(), &self.limits, hash_seed).await,
        }
    }

    fn checkin(&self, worker: Worker) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(worker);
        }
    }

    /// Runs `work` on a worker; a worker that failed fatally is dropped (killed), others return
    /// to the pool.
    async fn with_worker<T>(
        &self,
        state: Option<u64>,
        work: impl AsyncFnOnce(&mut Worker) -> Result<T, ExecError>,
    ) -> Result<T, ExecError> {
        self.with_worker_hashing(state, HASH_SEED, work).await
    }

    /// [`Executor::with_worker`] on a worker whose string hash seed is `hash_seed`.
    async fn with_worker_hashing<T>(
        &self,
        state: Option<u64>,
        hash_seed: u32,
        work: impl AsyncFnOnce(&mut Worker) -> Result<T, ExecError>,
    ) -> Result<T, ExecError> {
        let _permit = self
            .slots
            .acquire()
            .await
            .map_err(|_| ExecError::Spawn("the executor is shut down".into()))?;
        let mut worker = self.checkout(state, hash_seed).await?;
        let result = work(&mut worker).await;
        match &result {
            Err(e) if e.kills_worker() => drop(worker),
            _ => self.checkin(worker),
        }
        result
    }

    /// Interpreter and sandbox facts.
    pub async fn info(&self) -> Result<WorkerInfo, ExecError> {
        let limits = self.limits.clone();
        self.with_worker(None, async |w| {
            let reply = w.request(op("hello"), None, limits.wall, &limits).await?;
            Ok(WorkerInfo {
                python: str_field(&reply, "python"),
                executable: str_field(&reply, "executable"),
                sandbox: reply.get("sandbox").cloned().unwrap_or(Value::Null),
            })
        })
        .await
    }

    async fn ensure_loaded(
        w: &mut Worker,
        env: &EnvCode,
        limits: &Limits,
    ) -> Result<(), ExecError> {
        if w.loaded.contains(&env.key) {
            return Ok(());
        }
        let mut header = op("load");
        header.insert("env".into(), env.key.to_string().into());
        header.insert("code".into(), Value::String(env.code.to_string()));
        header.insert(
            "class_name".into(),
            Value::String(env.class_name.to_string()),
        );
        header.insert("convention".into(), env.convention.as_str().into());
        w.request(header, None, limits.wall, limits).await?;
        w.loaded.insert(env.key);
        Ok(())
    }

    /// Loads the environment (if needed) and lists its public methods with their parameters.
    pub async fn describe(&self, env: &EnvCode) -> Result<Value, ExecError> {
        let limits = self.limits.clone();
        self.with_worker(None, async |w| {
            Self::ensure_loaded(w, env, &limits).await?;
            let mut header = op("describe");
            header.insert("env".into(), env.key.to_string().into());
            let reply = w.request(header, None, limits.wall, &limits).await?;
            Ok(reply.get("methods").cloned().unwrap_or(Value::Null))
        })
        .await
    }

    /// Executes one call (in a process hashing strings with [`HASH_SEED`], like every call).
    pub async fn call(&self, call: &Call<'_>) -> Result<CallOutcome, ExecError> {
        self.call_hashing(call, HASH_SEED).await
    }

    /// Executes one call in another process than [`Executor::call`] uses, one that hashes
    /// strings with [`TWIN_HASH_SEED`]: what differs from the same call there depends on the
    /// process (the order of a set of strings), not on the state, code and arguments.
    pub async fn call_in_twin_process(&self, call: &Call<'_>) -> Result<CallOutcome, ExecError> {
        self.call_hashing(call, TWIN_HASH_SEED).await
    }

    async fn call_hashing(
        &self,
        call: &Call<'_>,
        hash_seed: u32,
    ) -> Result<CallOutcome, ExecError> {
        self.call_reporting(call, hash_seed).await.result
    }

    /// Executes one call and reports the lines and arcs of the environment's code it ran,
    /// whether it succeeded or not (an exception's path is coverage too). The coverage is
    /// `None` when the call never reached the tool (an invalid call, a crash).
    pub async fn call_covered(&self, call: &Call<'_>) -> Covered {
        self.call_reporting(
            &Call {
                coverage: true,
                ..call.clone()
            },
            HASH_SEED,
        )
        .await
    }

    /// The environment's executable lines and branch outcomes ([`coverage::CodeMap`]).
    pub async fn code_map(&self, env: &EnvCode) -> Result<coverage::CodeMap, ExecError> {
        let limits = self.limits.clone();
        self.with_worker(None, async |w| {
            Self::ensure_loaded(w, env, &limits).await?;
            let mut header = op("code_map");
            header.insert("env".into(), env.key.to_string().into());
            let reply = w.request(header, None, limits.wall, &limits).await?;
            coverage::CodeMap::from_reply(&reply)
                .ok_or_else(|| ExecError::Protocol("the code map reply does not read".into()))
        })
        .await
    }

    async fn call_reporting(&self, call: &Call<'_>, hash_seed: u32) -> Covered {
        let mut covered = None;
        let result = self.call_hashing_into(call, hash_seed, &mut covered).await;
        Covered {
            result,
            coverage: covered,
        }
    }

    async fn call_hashing_into(
        &self,
        call: &Call<'_>,
        hash_seed: u32,
        covered: &mut Option<coverage::CallCoverage>,
    ) -> Result<CallOutcome, ExecError> {
        let limits = self.limits.clone();
        let state_line = serde_json::to_string(call.state)
            .map_err(|e| ExecError::InvalidCall(format!("cannot encode the state: {e}")))?;
        let sent = fingerprint(&state_line);
        let started = Instant::now();
        let result = self
            .with_worker_hashing(Some(sent), hash_seed, async |w| {
                Self::ensure_loaded(w, call.env, &limits).await?;
                let mut header = op("call");
                header.insert("env".into(), call.env.key.to_string().into());
                header.insert("tool".into(), call.tool.into());
                header.insert("args".into(), Value::Object(call.args.clone()));
                header.insert("seed".into(), call.seed.into());
                header.insert("clock".into(), call.clock.into());
                header.insert("alias_init_config".into(), call.alias_init_config.into());
                header.insert("trace".into(), call.trace.into());
                if call.coverage {
                    header.insert("coverage".into(), true.into());
                }
                let started = Instant::now();
                w.live_state = None;
                w.last_coverage = None;
                let reply = w
                    .request(header, Some(&state_line), limits.wall, &limits)
                    .await;
                *covered = w
                    .last_coverage
                    .take()
                    .and_then(|c| coverage::CallCoverage::from_reply(&c));
                let outcome = outcome(reply?, started)?;
                if !call.alias_init_config && !call.trace {
                    // What the next step of a chain will send; the worker keeps that instance live.
                    w.live_state = serde_json::to_string(&outcome.state_after)
                        .ok()
                        .map(|t| fingerprint(&t));
                }
                Ok(outcome)
            })
            .await;
        render_errors(call, result, started)
    }

    /// The state of the instance that `state` constructs, with no call: the keys the file has
    /// plus the attributes the constructor adds. A transition's state before is this state
    /// (the file is only the constructor's input), so that a read-only call never shows the
    /// constructor's attributes as its own changes. `seed` and `clock` freeze what the
    /// constructor may draw.
    pub async fn construct(
        &self,
        env: &EnvCode,
        state: &Value,
        seed: u64,
        clock: f64,
    ) -> Result<Value, ExecError> {
        let limits = self.limits.clone();
        let state_line = serde_json::to_string(state)
            .map_err(|e| ExecError::InvalidCall(format!("cannot encode the state: {e}")))?;
        self.with_worker(None, async |w| {
            Self::ensure_loaded(w, env, &limits).await?;
            let mut header = op("construct");
            header.insert("env".into(), env.key.to_string().into());
            header.insert("seed".into(), seed.into());
            header.insert("clock".into(), clock.into());
            // The worker's live instance (of the last call) is left as it is.
            let mut reply = w
                .request(header, Some(&state_line), limits.wall, &limits)
                .await?;
            match reply.get_mut("state").map(Value::take) {
                Some(state @ Value::Object(_)) => Ok(state),
                _ => Err(ExecError::Protocol(
                    "the construct reply has no state object".into(),
                )),
            }
        })
        .await
    }

    /// Runs a call four times — as given, with another seed, with another clock, in a process
    /// with another string hash seed — and reports which observation and state fields differ,
    /// i.e. cannot be predicted from state, code and arguments alone.
    pub async fn probe(&self, call: &Call<'_>) -> Result<ProbeReport, ExecError> {
        let base = self.call(call).await?;
        let reseeded = self
            .call(&Call {
                seed: call.seed.wrapping_add(0x9E37_79B9),
                ..call.clone()
            })
            .await?;
        let reclocked = self
            .call(&Call {
                clock: call.clock + PROBE_CLOCK_SHIFT,
                ..call.clone()
            })
            .await?;
        let rehashed = self.call_in_twin_process(call).await?;
        Ok(ProbeReport {
            seed_dependent: base.differences(&reseeded),
            clock_dependent: base.differences(&reclocked),
            hash_dependent: base.differences(&rehashed),
        })
    }
}

fn fingerprint(text: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

fn op(name: &str) -> Map<String, Value> {
    let mut header = Map::new();
    header.insert("op".into(), name.into());
    header
}

fn str_field(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A call's result as the package's harness shows it: an exception or an invalid call the
/// package renders becomes an answer (the rendered text) with the state as the code left it
/// (unchanged for an invalid call); everything else stands.
fn render_errors(
    call: &Call<'_>,
    result: Result<CallOutcome, ExecError>,
    started: Instant,
) -> Result<CallOutcome, ExecError> {
    let rendered = |text: String, state_after: Value| CallOutcome {
        observation: text.clone(),
        observation_json: Value::String(text),
        state_after,
        converted: Vec::new(),
        tool_time: started.elapsed(),
        reads: None,
    };
    match result {
        Err(ExecError::Exception {
            message,
            traceback,
            state_after,
        }) => match call.env.errors.exception(&message) {
            Some(text) => Ok(rendered(
                text,
                state_after.map_or_else(|| call.state.clone(), |s| *s),
            )),
            None => Err(ExecError::Exception {
                message,
                traceback,
                state_after,
            }),
        },
        Err(ExecError::InvalidCall(reason)) => match call.env.errors.invalid_call(&reason) {
            Some(text) => Ok(rendered(text, call.state.clone())),
            None => Err(ExecError::InvalidCall(reason)),
        },
        other => other,
    }
}

fn outcome(mut reply: Value, started: Instant) -> Result<CallOutcome, ExecError> {
    let take = |reply: &mut Value, key: &str| reply.get_mut(key).map(Value::take);
    let observation = match take(&mut reply, "observation") {
        Some(Value::String(s)) => s,
        _ => return Err(ExecError::Protocol("the reply has no observation".into())),
    };
    let converted = take(&mut reply, "converted")
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    let reads = take(&mut reply, "reads").and_then(|v| {
        v.as_array().map(|paths| {
            paths
                .iter()
                .filter_map(Value::as_str)
                .filter_map(|p| JsonPointer::parse(p).ok())
                .collect()
        })
    });
    let tool_ms = reply
        .get("duration_ms")
        .and_then(Value::as_f64)
        .unwrap_or_else(|| started.elapsed().as_secs_f64() * 1000.0);
    Ok(CallOutcome {
        observation,
        observation_json: take(&mut reply, "observation_json").unwrap_or(Value::Null),
        state_after: take(&mut reply, "state_after").unwrap_or(Value::Null),
        converted,
        tool_time: Duration::from_secs_f64(tool_ms.max(0.0) / 1000.0),
        reads,
    })
}

/// Finds the Python interpreter and returns its real path.
pub async fn resolve_python() -> Result<PathBuf, ExecError> {
    let candidate = std::env::var_os("ENVSIM_PYTHON").unwrap_or_else(|| "python3".into());
    let output = tokio::process::Command::new(&candidate)
        .args([
            "-I",
            "-c",
            "import sys; print(sys.executable); print(sys.version_info >= (3, 8))",
        ])
        .output()
        .await
        .map_err(|e| {
            ExecError::Spawn(format!(
                "cannot run {}: {e} (install CPython 3.8+ or set ENVSIM_PYTHON)",
                Path::new(&candidate).display()
            ))
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    let mut lines = text.lines();
    match (lines.next(), lines.next()) {
        (Some(path), Some("True")) if !path.is_empty() => Ok(PathBuf::from(path)),
        (Some(_), Some(_)) => Err(ExecError::Spawn("Python 3.8 or newer is required".into())),
        _ => Err(ExecError::Spawn(format!(
            "{} did not report its path: {}",
            Path::new(&candidate).display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn limits_from_the_variables() {
        let defaults = Limits::from_vars(None, None).unwrap();
        assert_eq!(
            (defaults.wall, defaults.cpu_seconds),
            (Duration::from_secs(10), 10)
        );
        let raised = Limits::from_vars(Some("64"), Some("45")).unwrap();
        assert_eq!(raised.output_bytes, 64 << 20);
        assert_eq!(
            (raised.wall, raised.cpu_seconds),
            (Duration::from_secs(45), 45)
        );
        // A shorter wall clock keeps the CPU budget (the wall clock stops the call first).
        let short = Limits::from_vars(None, Some(" 3 ")).unwrap();
        assert_eq!(
            (short.wall, short.cpu_seconds),
            (Duration::from_secs(3), 10)
        );
        for bad in ["0", "3601", "ten", "-5", ""] {
            let e = Limits::from_vars(None, Some(bad)).unwrap_err();
            assert!(e.starts_with("ENVSIM_CALL_WALL_S="), "{e}");
        }
        assert!(Limits::from_vars(Some("0"), None)
            .unwrap_err()
            .starts_with("ENVSIM_REPLY_CAP_MB="));
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn the_default_seed_is_stable_per_call_and_distinct_across_a_chain() {
        let state = json!({"orders": {"O1": {"qty": 1}}, "counter": 3});
        let a = args(json!({"sku": "A", "qty": 2}));
        let seed = default_seed(&state, "create_order", &a);
        // Pinned (computed independently with Python's hashlib over the canonical text): the
        // seed must not change between builds, as benchmarks and replays record it.
        assert_eq!(seed, 103_499_323_941_968);
        assert_eq!(seed, default_seed(&state, "create_order", &a));
        assert!(seed < 1 << 48);
        // Key order is not part of the call.
        let reordered = json!({"counter": 3, "orders": {"O1": {"qty": 1}}});
        let swapped = args(json!({"qty": 2, "sku": "A"}));
        assert_eq!(seed, default_seed(&reordered, "create_order", &swapped));
        // The next step of a chain (another state), another tool or other arguments: another
        // seed.
        let next = json!({"orders": {"O1": {"qty": 1}, "O2": {"qty": 2}}, "counter": 4});
        let others = [
            default_seed(&next, "create_order", &a),
            default_seed(&state, "cancel_order", &a),
            default_seed(&state, "create_order", &args(json!({"sku": "A", "qty": 3}))),
            // A string that looks like a number is not the number.
            default_seed(
                &state,
                "create_order",
                &args(json!({"sku": "A", "qty": "2"})),
            ),
        ];
        for other in others {
            assert_ne!(seed, other);
        }
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let mut out = Vec::new();
        canonical_json(
            &json!({"b": [{"y": 1, "x": "é"}, null], "a": 1.5}),
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":1.5,"b":[{"x":"é","y":1},null]}"#
        );
    }
}

//! `envsim serve`: simulated environment sessions over HTTP and MCP (`envsim-serve`), with the
//! corpus's environments and the simulators this build has.

use crate::context::learn_environment;
use crate::simulators::{build_backend, BackendArgs, BackendKind};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use envsim_serve::store::Store;
use envsim_serve::{AppState, Host, ServerConfig, SessionRequest};
use envsim_sim::backend::{ExecutorSimulator, Simulator};
use envsim_sim::environment::Environment;
use envsim_sim::session::Backends;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `envsim serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. Anything but a loopback address needs --token.
    #[arg(long, default_value = "127.0.0.1:8700")]
    addr: SocketAddr,
    /// Folder of environment packages (default: the bundled corpus, or $ENVSIM_ENVS).
    #[arg(long, value_name = "DIR")]
    envs: Option<PathBuf>,
    /// Where sessions persist: a SQLite file (created when absent), or a PostgreSQL database
    /// (`postgres://user:password@host:port/database`; the tables are made when missing), which
    /// any number of servers may share: each serves any session, steps of one session are
    /// serialised across them.
    #[arg(
        long,
        value_name = "FILE|URL",
        default_value = "envsim-sessions.sqlite"
    )]
    db: String,
    /// Cap the SQLite store's file at this many MiB: a step that would grow it past the cap
    /// is answered 503 (as on a full disk) and the session stays as it was.
    #[arg(long, value_name = "MIB")]
    db_max_mib: Option<u64>,
    /// Bearer token every request must carry (Authorization: Bearer TOKEN).
    #[arg(long, env = "ENVSIM_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Sandboxed workers of the executor.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// The largest request body, bytes.
    #[arg(long, default_value_t = 8 << 20)]
    max_body_bytes: usize,
    /// The largest state a session may hold (its JSON text), bytes.
    #[arg(long, default_value_t = 16 << 20)]
    max_state_bytes: usize,
    /// Sessions unused this many seconds are deleted.
    #[arg(long, default_value_t = 86_400)]
    idle_ttl: u64,
    /// The primary simulator of sessions that name none.
    #[arg(long, value_enum, default_value_t = DefaultBackend::Executor)]
    default_backend: DefaultBackend,
    /// Serve an environment over OpenEnv at /openenv/ENV (reset, step, state, /ws, /schema,
    /// /metadata, /health): `ENV` (episodes from its first state, no reward) or `ENV=TASKS`
    /// (tasks from a JSON Lines file of RL episodes, as `envsim curate --formats rl` writes
    /// them: each reset starts one, its checker gives the reward). Repeatable.
    #[arg(long = "openenv", value_name = "ENV[=TASKS]")]
    openenv: Vec<String>,
    /// Task sets served over OpenEnv, from a JSON file: an array of {"name", "env", "tasks",
    /// "session" (the episodes' simulators and anchoring: `primary`, `anchor`, `no_code`, …),
    /// "max_tool_calls", "terminal_tools", "reward"}, each set at /openenv/NAME. See
    /// docs/simulation.md.
    #[arg(long, value_name = "FILE")]
    openenv_sets: Option<PathBuf>,
    /// Tool calls an OpenEnv episode may make before it ends.
    #[arg(long, default_value_t = 30)]
    max_tool_calls: usize,
    /// A tool whose call ends an OpenEnv episode (repeatable).
    #[arg(long = "terminal-tool", value_name = "TOOL")]
    terminal_tools: Vec<String>,
    /// The reward OpenEnv steps report: `binary` (every checked value right) or `partial` (the
    /// share right); both are in the final observation's `reward_detail`.
    #[arg(long, value_enum, default_value_t = RewardArg::Binary)]
    reward: RewardArg,
    #[command(flatten)]
    backends: BackendArgs,
}

/// The reward of OpenEnv episodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum RewardArg {
    Binary,
    Partial,
}

/// The task sets `--openenv` names.
fn task_sets(a: &ServeArgs) -> Result<Vec<envsim_serve::openenv::TaskSet>> {
    if a.max_tool_calls == 0 {
        bail!("--max-tool-calls must be at least 1");
    }
    let mut sets = Vec::new();
    for spec in &a.openenv {
        let (env, tasks) = match spec.split_once('=') {
            Some((env, file)) => {
                let text = std::fs::read_to_string(file)
                    .with_context(|| format!("--openenv {spec}: cannot read {file}"))?;
                let tasks = envsim_serve::openenv::read_tasks(&text, file)
                    .map_err(|e| anyhow::anyhow!("--openenv {spec}: {e}"))?;
                if tasks.is_empty() {
                    bail!("--openenv {spec}: {file} holds no task");
                }
                (env, tasks)
            }
            None => (spec.as_str(), Vec::new()),
        };
        if !envsim_serve::openenv::valid_set_name(env) {
            bail!("--openenv {spec}: {env:?} is not an environment name");
        }
        if sets
            .iter()
            .any(|s: &envsim_serve::openenv::TaskSet| s.name == env)
        {
            bail!("--openenv {env} is given twice");
        }
        sets.push(envsim_serve::openenv::TaskSet {
            name: env.to_owned(),
            env: env.to_owned(),
            session: serde_json::Map::new(),
            tasks,
            max_tool_calls: a.max_tool_calls,
            terminal_tools: a.terminal_tools.clone(),
            reward: match a.reward {
                RewardArg::Binary => envsim_serve::openenv::RewardKind::Binary,
                RewardArg::Partial => envsim_serve::openenv::RewardKind::Partial,
            },
        });
    }
    if let Some(file) = &a.openenv_sets {
        for set in envsim_serve::openenv::read_task_sets(file).map_err(anyhow::Error::msg)? {
            if sets.iter().any(|s| s.name == set.name) {
                bail!(
                    "{}: the task set {:?} is also given by --openenv",
                    file.display(),
                    set.name
                );
            }
            sets.push(set);
        }
    }
    Ok(sets)
}

/// The primary simulator of a session that names none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum DefaultBackend {
    Executor,
    Local,
    Openai,
}

/// An environment learned once, with its default initial state.
type Learned = (Arc<Environment>, Value);

/// An environment's learning, once: empty until the first request that asks for it has
/// learned it (the others wait on its lock).
type LearnedOnce = Arc<Mutex<Option<Learned>>>;

/// The CLI as the server's host: environments from the corpus (learned once each), simulators
/// built once per kind.
struct CliHost {
    corpus: crate::context::Corpus,
    envs: Mutex<HashMap<(String, bool), LearnedOnce>>,
    executor: ExecutorSimulator,
    args: BackendArgs,
    default: BackendKind,
    built: Mutex<HashMap<String, Arc<dyn Simulator>>>,
}

impl CliHost {
    fn simulator(
        &self,
        kind: BackendKind,
        label: &str,
        rate: f64,
        code: bool,
    ) -> Result<Arc<dyn Simulator>, String> {
        if !code && matches!(kind, BackendKind::Executor | BackendKind::Faulty) {
            return Err(format!(
                "{kind:?} runs the environment's code, and this session has only its description"
            )
            .to_lowercase());
        }
        let key = match kind {
            BackendKind::Faulty => format!("{kind:?}/{label}/{rate}"),
            _ => format!("{kind:?}/{label}"),
        };
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = built.get(&key) {
            return Ok(Arc::clone(s));
        }
        let mut args = self.args.clone();
        args.fault_rate = rate;
        let simulator = build_backend(kind, &args, &Some(self.executor.clone()), label)
            .map_err(|e| format!("{e:#}"))?;
        built.insert(key, Arc::clone(&simulator));
        Ok(simulator)
    }
}

fn kind_of(value: Option<&str>, field: &str) -> Result<Option<BackendKind>, String> {
    match value {
        None => Ok(None),
        Some(s) => BackendKind::from_str(s, true).map(Some).map_err(|_| {
            format!("field `{field}`: {s:?} is not executor, faulty, local or openai")
        }),
    }
}

impl Host for CliHost {
    fn environment(&self, name: &str, no_code: bool) -> Result<(Arc<Environment>, Value), String> {
        let key = (name.to_owned(), no_code);
        // One learning per environment: requests that come while it runs (a fresh replica
        // under load gets many at once) wait for it instead of each learning again.
        let slot = Arc::clone(
            self.envs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(key)
                .or_default(),
        );
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = slot.as_ref() {
            return Ok(found.clone());
        }
        let package = self.corpus.load(name).map_err(|e| format!("{e:#}"))?;
        let env = learn_environment(&package).map_err(|e| format!("{name}: {e:#}"))?;
        let env = Arc::new(if no_code { env.without_code() } else { env });
        let state = package
            .states
            .first()
            .map(|(_, s)| s.clone())
            .unwrap_or_else(|| json!({}));
        *slot = Some((Arc::clone(&env), state.clone()));
        Ok((env, state))
    }

    fn backends(&self, request: &SessionRequest, env: &Environment) -> Result<Backends, String> {
        let code = env.code.is_some();
        let rate = request.fault_rate.unwrap_or(self.args.fault_rate);
        let primary = kind_of(request.primary.as_deref(), "primary")?.unwrap_or(self.default);
        let primary = self.simulator(primary, "primary", rate, code)?;
        let secondary = match kind_of(request.secondary.as_deref(), "secondary")? {
            Some(kind) => Some(self.simulator(kind, "secondary", rate, code)?),
            None => None,
        };
        Ok(Backends {
            primary,
            secondary,
            executor: code.then(|| Arc::new(self.executor.clone()) as Arc<dyn Simulator>),
        })
    }

    fn notice(&self, event: envsim_serve::ServerEvent) {
        eprintln!("envsim serve: {event}");
    }
}

pub fn run(a: ServeArgs) -> Result<()> {
    let loopback = a.addr.ip().is_loopback();
    if !loopback && a.token.is_none() {
        bail!("{} is not a loopback address: give --token (or ENVSIM_TOKEN) so that requests must carry it", a.addr);
    }
    if a.workers == 0 {
        bail!("--workers must be at least 1");
    }
    let sets = task_sets(&a)?;
    let names: Vec<String> = sets.iter().map(|s| s.name.clone()).collect();
    let corpus = crate::context::Corpus::choose(a.envs.clone());
    for set in &sets {
        if !corpus.has(&set.env)? {
            bail!(
                "task set {}: no environment {:?} in {}",
                set.name,
                set.env,
                corpus.display()
            );
        }
    }
    let shown_db = envsim_serve::store::postgres::shown(&a.db);
    let runtime = crate::context::exec_runtime()?;
    runtime.block_on(async move {
        let store = match a.db_max_mib {
            None => Store::open_any(&a.db).await,
            Some(_) if a.db.starts_with("postgres://") || a.db.starts_with("postgresql://") => {
                anyhow::bail!("--db-max-mib caps a SQLite file; PostgreSQL's room is the database server's")
            }
            Some(mib) => Store::open_capped(std::path::Path::new(&a.db), mib << 20),
        }
        .with_context(|| format!("cannot open the session store {shown_db}"))?;
        let executor = ExecutorSimulator::new(Arc::new(
            envsim_exec::Executor::new(a.workers, crate::context::exec_limits()?).await?,
        ));
        let host = Arc::new(CliHost {
            corpus: crate::context::Corpus::choose(a.envs.clone()),
            envs: Mutex::new(HashMap::new()),
            executor,
            default: match a.default_backend {
                DefaultBackend::Executor => BackendKind::Executor,
                DefaultBackend::Local => BackendKind::Local,
                DefaultBackend::Openai => BackendKind::Openai,
            },
            args: a.backends,
            built: Mutex::new(HashMap::new()),
        });
        let config = ServerConfig {
            token: a.token.clone(),
            max_body_bytes: a.max_body_bytes,
            max_state_bytes: a.max_state_bytes,
            idle_ttl: Duration::from_secs(a.idle_ttl.max(1)),
            mcp_allowed_hosts: loopback.then(|| vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]),
            task_sets: sets,
        };
        let state = AppState::start(host, store, config).await.map_err(anyhow::Error::msg)?;
        let listener = tokio::net::TcpListener::bind(a.addr)
            .await
            .with_context(|| format!("cannot listen on {}", a.addr))?;
        let bound = listener.local_addr()?;
        eprintln!(
            "envsim serve: listening on http://{bound} ({} sessions restored from {}); the API is described at /openapi.json",
            state.len().await,
            shown_db
        );
        for name in &names {
            eprintln!("envsim serve: OpenEnv environment at http://{bound}/openenv/{name}");
        }
        envsim_serve::serve(listener, state, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("the server stopped")?;
        anyhow::Ok(())
    })
}

//! What the server's tests and its load benchmark share: a small package written to a folder,
//! a test host serving it (the executor, or the faulty double), and a server on loopback.
#![allow(dead_code)]

use envsim_core::audit::Effects;
use envsim_exec::package::EnvPackage;
use envsim_exec::{Executor, Limits};
use envsim_serve::store::Store;
use envsim_serve::{AppState, Host, ServerConfig};
use envsim_sim::backend::{ExecutorSimulator, Simulator};
use envsim_sim::environment::Environment;
use envsim_sim::faulty::FaultySimulator;
use envsim_sim::session::Backends;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

pub fn desk(dir: &Path) -> EnvPackage {
    EnvPackage::load(&envsim_testkit::desk::write(dir).unwrap()).unwrap()
}

/// A test host: the desk package only, the executor or the faulty double.
pub struct DeskHost {
    pub package: EnvPackage,
    pub executor: ExecutorSimulator,
}

impl Host for DeskHost {
    fn environment(&self, name: &str, no_code: bool) -> Result<(Arc<Environment>, Value), String> {
        if name != "desk" {
            return Err(format!("no environment {name:?}"));
        }
        let env = Environment::from_package(&self.package, &[], Effects::default())
            .map_err(|e| e.message)?;
        let env = if no_code { env.without_code() } else { env };
        Ok((Arc::new(env), self.package.states[0].1.clone()))
    }

    fn backends(
        &self,
        request: &envsim_serve::SessionRequest,
        env: &Environment,
    ) -> Result<Backends, String> {
        let primary: Arc<dyn Simulator> = match request.primary.as_deref() {
            None | Some("executor") => Arc::new(self.executor.clone()),
            Some("faulty") => Arc::new(FaultySimulator::new(self.executor.clone(), 1.0, 1, "test")),
            Some(other) => return Err(format!("no simulator {other:?} here")),
        };
        Ok(Backends {
            primary,
            secondary: None,
            executor: env
                .code
                .as_ref()
                .map(|_| Arc::new(self.executor.clone()) as Arc<dyn Simulator>),
        })
    }
}

pub struct Server {
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    pub state: Arc<AppState>,
}

impl Server {
    /// Starts a server on a free loopback port, its store in `dir`, `workers` executor workers.
    pub async fn start_with(dir: &Path, config: ServerConfig, workers: usize) -> Server {
        let store = Store::open(&dir.join("sessions.sqlite")).unwrap();
        Server::start_on(dir, store, config, workers).await
    }

    /// Starts a server on a free loopback port over `store` (the desk package written to
    /// `dir`), `workers` executor workers.
    pub async fn start_on(
        dir: &Path,
        store: Store,
        config: ServerConfig,
        workers: usize,
    ) -> Server {
        let executor = ExecutorSimulator::new(Arc::new(
            Executor::new(workers, Limits::default())
                .await
                .expect("python3"),
        ));
        let host = Arc::new(DeskHost {
            package: desk(dir),
            executor,
        });
        let state = AppState::start(host, store, config).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = Arc::clone(&state);
        let task = tokio::spawn(async move {
            envsim_serve::serve(listener, serving, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        Server {
            url,
            stop: Some(stop),
            task,
            state,
        }
    }

    /// Starts a server with two executor workers.
    pub async fn start(dir: &Path, config: ServerConfig) -> Server {
        Server::start_with(dir, config, 2).await
    }

    /// Stops it and waits for it.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.task.await;
    }
}

/// What a Python client script printed (its standard output as JSON), or `None` when the
/// script exited 3 — its package is not installed — and `require` (an environment variable)
/// is unset; with `require` set, a missing package fails the test. `command` is the script's
/// interpreter with its arguments.
pub async fn python_client(
    mut command: tokio::process::Command,
    package: &str,
    require: &str,
) -> Option<Value> {
    let out = command.output().await.expect("the interpreter runs");
    if out.status.code() == Some(3) {
        assert!(
            std::env::var_os(require).is_none(),
            "{require} is set and the {package} package is missing: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("skipped: the {package} package is not installed");
        return None;
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout))),
    )
}

/// A whole-number setting of a benchmark from the environment, else `default`.
pub fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `p`-th percentile of `sorted` (nearest rank; NaN when empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// A database of its own on the PostgreSQL server `ENVSIM_POSTGRES_URL` names (`.ci/postgres`
/// starts one), as a URL; `None` when the variable is unset, unless ENVSIM_REQUIRE_POSTGRES is
/// set (then the test fails).
pub async fn fresh_postgres() -> Option<String> {
    let Ok(url) = std::env::var("ENVSIM_POSTGRES_URL") else {
        assert!(
            std::env::var_os("ENVSIM_REQUIRE_POSTGRES").is_none(),
            "ENVSIM_REQUIRE_POSTGRES is set and ENVSIM_POSTGRES_URL is not (.ci/postgres starts a server)"
        );
        eprintln!("skipped: no PostgreSQL (set ENVSIM_POSTGRES_URL; .ci/postgres starts one)");
        return None;
    };
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    tokio::spawn(connection);
    let name = format!("envsim_test_{}", uuid::Uuid::new_v4().simple());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let base = url.rsplit_once('/').map_or(url.as_str(), |(base, _)| base);
    Some(format!("{base}/{name}"))
}

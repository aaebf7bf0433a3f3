//! `envsim synth`: agent trajectories synthesized against simulated environments. Tasks (a
//! file, the package's `tasks.jsonl`, executed walks, or written by a model) × an agent (an
//! OpenAI-compatible endpoint, the embedded model, or the scripted double) × a simulated
//! session per task (`envsim sim`'s simulators and anchoring) → trajectory JSONL with
//! provenance and SCS / SpecCS / DCS per trajectory (and, in code mode, the truth). Runs are
//! stored and resumable: rerunning the same command continues with the tasks not done.

use crate::simulators::{build_pair, AnchorArg, AnchorArgs, BackendArgs, BackendKind};
use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use envsim_sim::backend::{ExecutorSimulator, Simulator};
use envsim_sim::environment::Environment;
use envsim_sim::session::{Backends, Session, SessionConfig};
use envsim_synth::agent::{Agent, OpenAiAgent, PromptedAgent, ScriptedAgent, TextModel, User};
use envsim_synth::run::{Budgets, EnvContext, Participants};
use envsim_synth::task::{self, Task};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

/// Where tasks come from.
#[derive(Clone, Debug, PartialEq, Eq)]
enum TaskSource {
    /// The package's `tasks.jsonl`.
    Package,
    /// Executed walks of the environment (plans the scripted agent replays).
    Walks,
    /// Written by a model from the environment's description.
    Generate,
    /// A JSON Lines file.
    File(PathBuf),
}

fn parse_source(text: &str) -> Result<TaskSource, String> {
    Ok(match text {
        "package" => TaskSource::Package,
        "walks" => TaskSource::Walks,
        "generate" => TaskSource::Generate,
        path => TaskSource::File(PathBuf::from(path)),
    })
}

/// Which agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AgentKind {
    /// The embedded local model, prompted, its turns constrained to tool-call JSON.
    Local,
    /// An OpenAI-compatible endpoint with function calling (--agent-model, --agent-base-url).
    Openai,
    /// A test double replaying each task's planned calls (walk tasks).
    Scripted,
}

/// Who plays the user after the agent's answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum UserKind {
    /// The task's later turns, in order.
    Scripted,
    /// The agent's model plays the user toward the task's goal.
    Model,
}

/// `envsim synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Folder of environment packages (default: the bundled corpus, or $ENVSIM_ENVS).
    #[arg(long, value_name = "DIR")]
    envs: Option<PathBuf>,
    /// An environment to synthesize for (repeat for several).
    #[arg(long = "env", value_name = "NAME", required = true)]
    env: Vec<String>,
    /// Tasks: `package` (its tasks.jsonl), `walks` (executed walks as plans), `generate` (a model
    /// writes them), or a JSON Lines file. Default: `package` when every environment has a task
    /// list, else `walks`.
    #[arg(long, value_name = "SOURCE", value_parser = parse_source)]
    tasks: Option<TaskSource>,
    /// Tasks per environment (all of a file's tasks when --tasks is a file).
    #[arg(long, default_value_t = 10)]
    count: usize,
    /// Share of tasks from the adversarial families (long chains, cross-resource changes,
    /// repeated modifications, error paths).
    #[arg(long, default_value_t = 0.4)]
    adversarial_share: f64,
    /// The agent.
    #[arg(long, value_enum, default_value_t = AgentKind::Local)]
    agent: AgentKind,
    /// Model of an OpenAI-compatible agent (and task writer, and model user).
    #[arg(long, value_name = "MODEL")]
    agent_model: Option<String>,
    /// Base URL of the agent's endpoint (default: --base-url).
    #[arg(long, value_name = "URL")]
    agent_base_url: Option<String>,
    /// The agent's sampling temperature.
    #[arg(long, default_value_t = 0.0)]
    agent_temperature: f64,
    /// Completion token limit of the agent's turns.
    #[arg(long, default_value_t = 512)]
    agent_max_tokens: u64,
    /// Who plays the user after the agent answers.
    #[arg(long, value_enum, default_value_t = UserKind::Scripted)]
    user: UserKind,
    /// Most extra user turns a model user takes.
    #[arg(long, default_value_t = 2)]
    user_turns: usize,
    /// Tool calls per task.
    #[arg(long, default_value_t = 12)]
    max_tool_calls: usize,
    /// Agent turns per task (default: tool calls + user turns + 2).
    #[arg(long)]
    max_turns: Option<usize>,
    /// Withhold the packages' code from the simulator (environment-free mode).
    #[arg(long)]
    no_code: bool,
    /// How much each step is checked and repaired.
    #[arg(long, value_enum, default_value_t = AnchorArg::Full)]
    anchor: AnchorArg,
    #[command(flatten)]
    anchoring: AnchorArgs,
    #[command(flatten)]
    backends: BackendArgs,
    /// Tasks in flight at once.
    #[arg(long, default_value_t = 2)]
    concurrency: usize,
    /// The run store (SQLite; created when missing).
    #[arg(long, value_name = "FILE", default_value = "synth.sqlite")]
    store: PathBuf,
    /// Where the trajectories go (JSON Lines, one record per task, in task order).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// USD per million prompt tokens of the simulator's model (with --price-output: the run's
    /// simulator cost).
    #[arg(long, value_name = "USD", requires = "price_output")]
    price_input: Option<f64>,
    /// USD per million completion tokens of the simulator's model.
    #[arg(long, value_name = "USD", requires = "price_input")]
    price_output: Option<f64>,
    /// USD per million prompt tokens of the agent's model (the agent, a model user, the task
    /// writer).
    #[arg(long, value_name = "USD", requires = "agent_price_output")]
    agent_price_input: Option<f64>,
    /// USD per million completion tokens of the agent's model.
    #[arg(long, value_name = "USD", requires = "agent_price_input")]
    agent_price_output: Option<f64>,
    /// Seed of walks, task choice, sessions and the agent.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// The summary as JSON.
    #[arg(long)]
    json: bool,
}

/// What one environment needs for a run.
struct Prepared {
    package: envsim_exec::package::EnvPackage,
    env: Arc<Environment>,
}

pub fn run(a: SynthArgs) -> Result<()> {
    if a.count == 0 || a.max_tool_calls == 0 || a.concurrency == 0 {
        bail!("--count, --max-tool-calls and --concurrency must be at least 1");
    }
    if !(0.0..=1.0).contains(&a.adversarial_share) {
        bail!("--adversarial-share must be between 0 and 1");
    }
    for price in [
        a.price_input,
        a.price_output,
        a.agent_price_input,
        a.agent_price_output,
    ]
    .into_iter()
    .flatten()
    {
        if !(price.is_finite() && price >= 0.0) {
            bail!("prices are USD per million tokens, ≥ 0 (got {price})");
        }
    }
    let policy = a.anchoring.policy()?;
    let corpus = crate::context::Corpus::choose(a.envs.clone());
    let mut prepared: BTreeMap<String, Prepared> = BTreeMap::new();
    for name in &a.env {
        let package = corpus.load(name)?;
        eprintln!("{name}: learning the environment");
        let env = crate::context::learn_environment(&package)?;
        let env = Arc::new(if a.no_code { env.without_code() } else { env });
        prepared.insert(name.clone(), Prepared { package, env });
    }
    let source = match &a.tasks {
        Some(s) => s.clone(),
        None if prepared.values().all(|p| p.package.tasks_jsonl.is_some()) => TaskSource::Package,
        None => TaskSource::Walks,
    };
    let runtime = crate::context::exec_runtime()?;
    let executor = runtime.block_on(async {
        anyhow::Ok(ExecutorSimulator::new(Arc::new(
            envsim_exec::Executor::new(2, crate::context::exec_limits()?).await?,
        )))
    })?;
    // One client for the agent's endpoint (the agent, the model user, the task writer).
    let openai = match a.agent {
        AgentKind::Openai => Some(agent_client(&a)?),
        _ => None,
    };
    let text_model = text_model(&a, openai.clone())?;
    // Tasks.
    let mut tasks: Vec<Task> = Vec::new();
    let mut mix_reports = BTreeMap::new();
    let mut generation_failures = Vec::new();
    let mut writer = envsim_core::sample::Usage::default();
    match &source {
        TaskSource::File(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the task file {}", path.display()))?;
            let default_env = (a.env.len() == 1).then(|| a.env[0].as_str());
            let read = task::read_tasks(&text, &path.display().to_string(), default_env, "file")?;
            for t in &read {
                if !prepared.contains_key(&t.env) {
                    bail!(
                        "{}: task {:?} is for {:?}, which is not among --env ({})",
                        path.display(),
                        t.id,
                        t.env,
                        a.env.join(", ")
                    );
                }
            }
            tasks = read;
        }
        TaskSource::Package => {
            for (name, p) in &prepared {
                let text = p.package.tasks_jsonl.as_deref().ok_or_else(|| {
                    anyhow!("{name} has no task list (tasks.jsonl); use --tasks walks, generate or a file")
                })?;
                let read =
                    task::read_tasks(text, &format!("{name}/tasks.jsonl"), Some(name), "package")?;
                let (chosen, report) = task::choose_mix(read, a.count, a.adversarial_share);
                mix_reports.insert(name.clone(), report);
                tasks.extend(chosen);
            }
        }
        TaskSource::Walks => {
            for (name, p) in &prepared {
                // A pool several times the count, so the mix has families to choose from.
                let walk = crate::context::walk_args(a.count * 4, a.max_tool_calls.min(10), 2);
                // Whole paths: a task's session starts at the walk's named initial state.
                let records = crate::context::explore(
                    vec![p.package.clone()],
                    walk.plan(a.seed, false),
                    walk.workers,
                )?
                .into_paths();
                let mut pool = Vec::new();
                let longest = a.max_tool_calls.min(10);
                for runs in envsim_bench::audit_check::trajectories_from_walks(&records).values() {
                    for run in runs {
                        // A whole path may run past the calls a task may make.
                        let mut run = run.clone();
                        run.steps.truncate(longest);
                        let run = &run;
                        // Walk ids are `<env>/<state>/<walk>`.
                        let mut parts = run.id.splitn(3, '/').skip(1);
                        let (Some(state), Some(walk)) = (parts.next(), parts.next()) else {
                            bail!("{name}: a walk's id {:?} does not name its state", run.id);
                        };
                        pool.extend(task::walk_tasks(name, state, walk, run));
                    }
                }
                let (chosen, report) = task::choose_mix(pool, a.count, a.adversarial_share);
                mix_reports.insert(name.clone(), report);
                tasks.extend(chosen);
            }
        }
        TaskSource::Generate => {
            let model = text_model.clone().ok_or_else(|| {
                anyhow!(
                    "--tasks generate needs a model to write them: --agent local or --agent openai"
                )
            })?;
            for (name, p) in &prepared {
                let tool_names: Vec<String> = p
                    .env
                    .tools
                    .iter()
                    .filter_map(|t| Some(t.get("function")?.get("name")?.as_str()?.to_owned()))
                    .collect();
                // Twice the count is asked for: duplicates are removed before the mix.
                let targets = task::targets(&tool_names, a.count * 2, a.adversarial_share, 2);
                let state = p
                    .package
                    .states
                    .first()
                    .map(|(_, s)| s.clone())
                    .unwrap_or_default();
                let about = p.package.manifest.description.clone();
                let mut pool = Vec::new();
                for (i, target) in targets.iter().enumerate() {
                    eprint!("\r{name}: writing task {}/{}", i + 1, targets.len());
                    let prompt =
                        task::generation_prompt(name, &about, &p.env.tools, &state, target);
                    let (text, used) = runtime
                        .block_on(model.complete(
                            prompt,
                            Some(task::generated_task_schema()),
                            a.seed.wrapping_add(i as u64),
                        ))
                        .map_err(|e| anyhow!("writing tasks for {name}: {e}"))?;
                    writer.prompt_tokens += used.prompt_tokens;
                    writer.completion_tokens += used.completion_tokens;
                    match task::read_generated(
                        &text,
                        name,
                        format!("{name}/gen-{i}"),
                        target,
                        &model.name(),
                        &tool_names,
                    ) {
                        Ok(t) => pool.push(t),
                        Err(why) => generation_failures.push(format!("{name}/gen-{i}: {why}")),
                    }
                }
                eprintln!();
                if pool.is_empty() {
                    bail!(
                        "{name}: the model wrote no readable task ({} tried); first problem: {}",
                        targets.len(),
                        generation_failures.first().map_or("none", String::as_str)
                    );
                }
                let (chosen, report) = task::choose_mix(pool, a.count, a.adversarial_share);
                mix_reports.insert(name.clone(), report);
                tasks.extend(chosen);
            }
        }
    }
    if tasks.is_empty() {
        bail!("no tasks to synthesize");
    }
    if a.agent == AgentKind::Scripted {
        if let Some(t) = tasks.iter().find(|t| t.plan.is_empty()) {
            bail!(
                "--agent scripted replays planned calls, and task {:?} has no `plan`",
                t.id
            );
        }
    }
    // Participants.
    let agent: Arc<dyn Agent> = match a.agent {
        AgentKind::Scripted => Arc::new(ScriptedAgent),
        AgentKind::Local => Arc::new(PromptedAgent::new(
            text_model
                .clone()
                .ok_or_else(|| anyhow!("the local agent did not start"))?,
        )),
        AgentKind::Openai => {
            let (client, model) =
                openai.ok_or_else(|| anyhow!("the agent's client did not start"))?;
            Arc::new(OpenAiAgent::new(client, model, agent_decoding(&a)))
        }
    };
    let user = match a.user {
        UserKind::Scripted => User::Scripted,
        UserKind::Model => User::Model(
            text_model.clone().ok_or_else(|| {
                anyhow!("--user model needs a model: --agent local or --agent openai")
            })?,
            a.user_turns,
        ),
    };
    let who = Participants { agent, user };
    let budgets = Budgets {
        tool_calls: a.max_tool_calls,
        agent_turns: a.max_turns.unwrap_or(a.max_tool_calls + a.user_turns + 2),
    };
    // Environments' sessions.
    let session = SessionConfig {
        mode: a.anchor.mode(),
        max_regenerations: a.anchoring.max_regenerations,
        verify: policy,
        seed: a.seed,
    };
    let mut contexts: BTreeMap<String, Arc<EnvContext>> = BTreeMap::new();
    for (name, p) in &prepared {
        let (primary, secondary) = build_pair(&a.backends, &executor)?;
        let code = p.env.code.is_some();
        contexts.insert(
            name.clone(),
            Arc::new(EnvContext {
                env: Arc::clone(&p.env),
                backends: Backends {
                    primary,
                    secondary,
                    executor: code.then(|| Arc::new(executor.clone()) as Arc<dyn Simulator>),
                },
                session: session.clone(),
                // The truth knows the code even when the simulator does not.
                truth: Some((executor.clone(), Arc::new(p.env.with_code_of(&p.package)))),
                system_prompt: envsim_synth::run::system_prompt(&p.env),
                states: p.package.states.clone(),
                verifier: policy.map(Session::shared_verifier),
            }),
        );
    }
    // The store.
    let config = json!({
        "agent": who.agent.name(),
        "user": who.user.name(),
        "primary": a.backends.backend.name(),
        "secondary": a.backends.secondary.map(BackendKind::name),
        "fault_rate": a.backends.fault_rate,
        "fault_profile": a.backends.fault_profile().describe(),
        "model": a.backends.model,
        "agent_model": a.agent_model,
        "agent_temperature": a.agent_temperature,
        "anchor": a.anchor.mode().name(),
        "max_regenerations": a.anchoring.max_regenerations,
        "verify": policy.map(|p| json!({"floor": p.floor, "ceiling": p.ceiling})),
        "no_code": a.no_code,
        "budgets": {"tool_calls": budgets.tool_calls, "agent_turns": budgets.agent_turns},
        "seed": a.seed,
    });
    let task_values: Vec<Value> = tasks.iter().map(|t| json!(t)).collect();
    let hash = envsim_synth::store::fingerprint(&config, &task_values);
    let mut store = envsim_synth::store::SynthStore::open(&a.store)?;
    let resumed = store.begin(&hash, &config, &task_values)?;
    let stored = store.tasks(&hash)?;
    let todo: Vec<usize> = stored
        .iter()
        .filter(|t| t.status != "done")
        .map(|t| t.index)
        .collect();
    eprintln!(
        "synth: run {} ({}), {} tasks, {} to do",
        &hash[..12],
        if resumed { "resumed" } else { "new" },
        tasks.len(),
        todo.len()
    );
    // Run.
    let store = std::sync::Mutex::new(store);
    let failures = runtime.block_on(run_tasks(
        &tasks,
        &todo,
        &contexts,
        &who,
        budgets,
        a.seed,
        a.concurrency,
        &store,
        &hash,
    ))?;
    let store = store.into_inner().unwrap_or_else(|p| p.into_inner());
    let stored = store.tasks(&hash)?;
    // The output.
    let mut out = std::io::BufWriter::new(
        envsim_fs::AtomicFile::create(&a.out)
            .with_context(|| format!("cannot write {}", a.out.display()))?,
    );
    let records: Vec<&Value> = stored.iter().filter_map(|t| t.record.as_ref()).collect();
    for r in &records {
        writeln!(out, "{r}").with_context(|| format!("cannot write {}", a.out.display()))?;
    }
    out.into_inner()
        .map_err(|e| anyhow!("cannot write {}: {}", a.out.display(), e.error()))?
        .commit()
        .with_context(|| format!("cannot write {}", a.out.display()))?;
    let mut summary = summarize(
        &records,
        &mix_reports,
        &generation_failures,
        &failures,
        &hash,
    );
    summary["usage"] = usage_and_cost(&records, writer, &a);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", render(&summary));
    }
    eprintln!(
        "synth: {} trajectories written to {}",
        records.len(),
        a.out.display()
    );
    if !failures.is_empty() {
        bail!(
            "{} of {} tasks failed (first: {}); rerun the same command to retry them",
            failures.len(),
            tasks.len(),
            failures[0]
        );
    }
    Ok(())
}

/// The model for the local or prompted agent, the task writer and the model user: the
/// embedded model (shared with a local simulator) or the agent's endpoint.
fn text_model(
    a: &SynthArgs,
    openai: Option<(envsim_llm::openai::OpenAiClient, String)>,
) -> Result<Option<Arc<dyn TextModel>>> {
    Ok(match (a.agent, openai) {
        (AgentKind::Openai, Some((client, model))) => {
            Some(Arc::new(envsim_synth::agent::OpenAiText::new(
                client,
                model,
                agent_decoding(a),
                !a.backends.no_response_format,
            )))
        }
        (AgentKind::Local, _) => local_text(a)?,
        _ => None,
    })
}

/// How the agent's model decodes (the agent, a model user, the task writer).
fn agent_decoding(a: &SynthArgs) -> envsim_llm::Decoding {
    envsim_llm::Decoding {
        temperature: Some(a.agent_temperature),
        max_tokens: Some(a.agent_max_tokens),
        stop: Vec::new(),
        extra_body: Map::new(),
    }
}

#[cfg(feature = "local")]
fn local_text(a: &SynthArgs) -> Result<Option<Arc<dyn TextModel>>> {
    let (engine, mut generation, model) = crate::simulators::shared_local_engine(&a.backends)?;
    generation.max_tokens = u32::try_from(a.agent_max_tokens).unwrap_or(u32::MAX);
    generation.temperature = a.agent_temperature as f32;
    Ok(Some(Arc::new(envsim_synth::agent::LocalText::new(
        engine, generation, model,
    ))))
}

#[cfg(not(feature = "local"))]
fn local_text(_: &SynthArgs) -> Result<Option<Arc<dyn TextModel>>> {
    bail!("this build has no local model (build with the `local` feature)")
}

fn agent_client(a: &SynthArgs) -> Result<(envsim_llm::openai::OpenAiClient, String)> {
    let model = a
        .agent_model
        .clone()
        .or_else(|| a.backends.model.clone())
        .ok_or_else(|| anyhow!("--agent openai needs --agent-model (or --model)"))?;
    let base_url = crate::simulators::endpoint_url(
        &[a.agent_base_url.as_ref(), a.backends.base_url.as_ref()],
        a.backends.api_key.as_ref(),
        "--agent openai needs --agent-base-url or --base-url (or OPENAI_BASE_URL)",
    )?;
    let client = envsim_llm::openai::OpenAiClient::new(&envsim_llm::openai::ClientSettings {
        base_url,
        api_key: a.backends.api_key.clone(),
        timeout: std::time::Duration::from_secs(180),
        max_connections: a.concurrency.max(1),
    })
    .map_err(anyhow::Error::msg)?;
    Ok((client, model))
}

#[allow(clippy::too_many_arguments)]
async fn run_tasks(
    tasks: &[Task],
    todo: &[usize],
    contexts: &BTreeMap<String, Arc<EnvContext>>,
    who: &Participants,
    budgets: Budgets,
    seed: u64,
    concurrency: usize,
    store: &std::sync::Mutex<envsim_synth::store::SynthStore>,
    hash: &str,
) -> Result<Vec<String>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    let tokens = std::sync::Mutex::new((0u64, 0u64));
    let worker = || async {
        loop {
            let k = next.fetch_add(1, Ordering::SeqCst);
            let Some(&index) = todo.get(k) else {
                return anyhow::Ok(());
            };
            let task = &tasks[index];
            let ctx = contexts
                .get(&task.env)
                .ok_or_else(|| anyhow!("no environment {}", task.env))?;
            let result = envsim_synth::run::synthesize(task, ctx, who, budgets, seed).await;
            {
                let store = store.lock().unwrap_or_else(|p| p.into_inner());
                match &result {
                    Ok(record) => {
                        store.done(hash, index, record)?;
                        let mut t = tokens.lock().unwrap_or_else(|p| p.into_inner());
                        t.0 += record["usage"]["agent_tokens"].as_u64().unwrap_or(0)
                            + record["usage"]["user_tokens"].as_u64().unwrap_or(0);
                        t.1 += record["usage"]["simulator_tokens"].as_u64().unwrap_or(0);
                    }
                    Err(e) => {
                        store.failed(hash, index, &e.to_string())?;
                        failures
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(format!("{}: {e}", task.id));
                    }
                }
            }
            let finished = done.fetch_add(1, Ordering::SeqCst) + 1;
            let (agent_tokens, sim_tokens) = *tokens.lock().unwrap_or_else(|p| p.into_inner());
            let failed = failures.lock().unwrap_or_else(|p| p.into_inner()).len();
            eprintln!(
                "synth: {finished}/{} · {} {} · {failed} failed · agent {agent_tokens} tokens · simulator {sim_tokens} tokens",
                todo.len(),
                task.id,
                match &result {
                    Ok(r) => r["finish"].as_str().unwrap_or("").to_owned(),
                    Err(_) => "failed".to_owned(),
                }
            );
        }
    };
    let workers: Vec<_> = (0..concurrency.min(todo.len().max(1)))
        .map(|_| worker())
        .collect();
    for result in futures_util::future::join_all(workers).await {
        result?;
    }
    Ok(failures.into_inner().unwrap_or_else(|p| p.into_inner()))
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The run's summary: counts by finish and family, mean scores, the truth, tokens.
fn summarize(
    records: &[&Value],
    mixes: &BTreeMap<String, task::MixReport>,
    generation_failures: &[String],
    failures: &[String],
    hash: &str,
) -> Value {
    let mut by_finish: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_family: BTreeMap<String, usize> = BTreeMap::new();
    let (mut scs, mut spec, mut dcs) = (Vec::new(), Vec::new(), Vec::new());
    let (mut final_equal, mut with_truth, mut steps, mut right_steps) = (0, 0, 0, 0);
    let (mut agent_tokens, mut sim_tokens, mut uncertain) = (0u64, 0u64, 0u64);
    for r in records {
        *by_finish
            .entry(r["finish"].as_str().unwrap_or("?").to_owned())
            .or_default() += 1;
        *by_family
            .entry(r["family"].as_str().unwrap_or("?").to_owned())
            .or_default() += 1;
        if let Some(x) = r["scores"]["scs"].as_f64() {
            scs.push(x);
        }
        if let Some(x) = r["scores"]["spec_cs"].as_f64() {
            spec.push(x);
        }
        if let Some(x) = r["scores"]["dcs"].as_f64() {
            dcs.push(x);
        }
        if let Some(t) = r["truth"].as_object() {
            with_truth += 1;
            final_equal += usize::from(t["final_state_equal"] == true);
            steps += t["steps"].as_u64().unwrap_or(0);
            right_steps += t["right_steps"].as_u64().unwrap_or(0);
        }
        agent_tokens += r["usage"]["agent_tokens"].as_u64().unwrap_or(0)
            + r["usage"]["user_tokens"].as_u64().unwrap_or(0);
        sim_tokens += r["usage"]["simulator_tokens"].as_u64().unwrap_or(0);
        uncertain += r["usage"]["uncertain_steps"].as_u64().unwrap_or(0);
    }
    json!({
        "run": hash,
        "trajectories": records.len(),
        "failed_tasks": failures,
        "by_finish": by_finish,
        "by_family": by_family,
        "mix": mixes,
        "task_generation_failures": generation_failures,
        "mean_scs": mean(&scs),
        "mean_spec_cs": mean(&spec),
        "mean_dcs": mean(&dcs),
        "truth": {
            "trajectories": with_truth,
            "final_state_equal": final_equal,
            "steps": steps,
            "right_steps": right_steps,
        },
        "uncertain_steps": uncertain,
        "agent_tokens": agent_tokens,
        "simulator_tokens": sim_tokens,
    })
}

/// Tokens per role (prompt and completion) and, where prices are given, their cost in USD.
fn usage_and_cost(records: &[&Value], writer: envsim_core::sample::Usage, a: &SynthArgs) -> Value {
    let sum = |key: &str| -> u64 {
        records
            .iter()
            .map(|r| r["usage"][key].as_u64().unwrap_or(0))
            .sum()
    };
    let role = |total: u64, completion: u64, prices: (Option<f64>, Option<f64>)| {
        let prompt = total - completion.min(total);
        let cost = match prices {
            (Some(i), Some(o)) => json!((prompt as f64 * i + completion as f64 * o) / 1e6),
            _ => Value::Null,
        };
        json!({"prompt_tokens": prompt, "completion_tokens": completion, "cost_usd": cost})
    };
    let agent_prices = (a.agent_price_input, a.agent_price_output);
    let agent = role(
        sum("agent_tokens") + sum("user_tokens"),
        sum("agent_completion_tokens") + sum("user_completion_tokens"),
        agent_prices,
    );
    let writer = role(
        writer.prompt_tokens + writer.completion_tokens,
        writer.completion_tokens,
        agent_prices,
    );
    let simulator = role(
        sum("simulator_tokens"),
        sum("simulator_completion_tokens"),
        (a.price_input, a.price_output),
    );
    let costs: Vec<Option<f64>> = [&agent, &writer, &simulator]
        .iter()
        .map(|r| r["cost_usd"].as_f64())
        .collect();
    let total = if costs.iter().all(Option::is_some) {
        json!(costs.iter().flatten().sum::<f64>())
    } else {
        Value::Null
    };
    json!({"agent_and_user": agent, "task_writer": writer, "simulator": simulator, "total_cost_usd": total})
}

fn render(s: &Value) -> String {
    let f = |v: &Value| v.as_f64().map_or("—".to_owned(), |x| format!("{x:.3}"));
    let counts = |v: &Value| {
        v.as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    let t = &s["truth"];
    let mut out = format!(
        "run {}: {} trajectories ({}); families: {}\nmean SCS {} · SpecCS {} · DCS {}\n",
        &s["run"].as_str().unwrap_or("")[..12.min(s["run"].as_str().unwrap_or("").len())],
        s["trajectories"],
        counts(&s["by_finish"]),
        counts(&s["by_family"]),
        f(&s["mean_scs"]),
        f(&s["mean_spec_cs"]),
        f(&s["mean_dcs"]),
    );
    if t["trajectories"].as_u64().unwrap_or(0) > 0 {
        out.push_str(&format!(
            "truth: final state equals the executor's replay in {} of {} trajectories; {} of {} steps right\n",
            t["final_state_equal"], t["trajectories"], t["right_steps"], t["steps"]
        ));
    }
    out.push_str(&format!(
        "uncertain steps {} · agent tokens {} · simulator tokens {}\n",
        s["uncertain_steps"], s["agent_tokens"], s["simulator_tokens"]
    ));
    let u = &s["usage"];
    let cost = |v: &Value| v.as_f64().map(|c| format!("${c:.4}"));
    let parts: Vec<String> = [
        ("agent and user", &u["agent_and_user"]["cost_usd"]),
        ("task writer", &u["task_writer"]["cost_usd"]),
        ("simulator", &u["simulator"]["cost_usd"]),
        ("total", &u["total_cost_usd"]),
    ]
    .iter()
    .filter_map(|(name, v)| cost(v).map(|c| format!("{name} {c}")))
    .collect();
    if !parts.is_empty() {
        out.push_str(&format!("cost: {}\n", parts.join(" · ")));
    }
    if let Some(mixes) = s["mix"].as_object() {
        for (env, m) in mixes {
            if m["adversarial_shortfall"].as_u64().unwrap_or(0) > 0 {
                out.push_str(&format!(
                    "{env}: {} adversarial tasks asked for, {} short (filled with ordinary ones)\n",
                    m["adversarial_requested"], m["adversarial_shortfall"]
                ));
            }
            if m["ordinary_shortfall"].as_u64().unwrap_or(0) > 0 {
                out.push_str(&format!(
                    "{env}: {} ordinary tasks short (filled with adversarial ones)\n",
                    m["ordinary_shortfall"]
                ));
            }
        }
    }
    if let Some(fails) = s["task_generation_failures"].as_array() {
        if !fails.is_empty() {
            out.push_str(&format!(
                "{} generated tasks did not read (first: {})\n",
                fails.len(),
                fails[0].as_str().unwrap_or("")
            ));
        }
    }
    out
}

impl BackendKind {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Executor => "executor",
            BackendKind::Local => "local",
            BackendKind::Openai => "openai",
            BackendKind::Faulty => "faulty",
        }
    }
}

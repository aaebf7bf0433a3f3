//! `envsim sim measure`: anchoring measured where the truth is known. Seeded walks of corpus
//! environments give call sequences; each is simulated by sessions in several configurations
//! (anchoring off, validation only, full anchoring, full anchoring with cross-model
//! verification), and every step is compared with the executor run on the same state (same
//! seed and clock). A step is right when its observation and state equal the executor's; a
//! trajectory is consistent when every step is right.

use crate::context::learn_environment;
use crate::simulators::{build_pair, AnchorArgs, BackendArgs};
use anyhow::{bail, Result};
use clap::Args;
use envsim_bench::audit_check::trajectories_from_walks;
use envsim_sim::backend::{ExecutorSimulator, Simulator, StepRequest};
use envsim_sim::session::{AnchorMode, Backends, Session, SessionConfig};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// `envsim sim measure`.
#[derive(Debug, Args)]
pub struct MeasureArgs {
    /// Folder of environment packages (default: the bundled corpus, or $ENVSIM_ENVS).
    #[arg(long, value_name = "DIR")]
    envs: Option<PathBuf>,
    /// Environments (repeatable; default: every package, in name order, up to --max-envs).
    #[arg(long = "env", value_name = "NAME")]
    env: Vec<String>,
    /// Environments taken when none is named.
    #[arg(long, default_value_t = 8)]
    max_envs: usize,
    /// Initial states per environment (its first N).
    #[arg(long, default_value_t = 1)]
    states: usize,
    /// Walks per initial state.
    #[arg(long, default_value_t = 3)]
    walks: usize,
    /// Calls per walk.
    #[arg(long, default_value_t = 12)]
    steps: usize,
    /// Seed of the walks (the environment is learned from walks with seed 1).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Withhold the code from the simulator: it gets the description generated from the
    /// package (environment-free mode; the executor still gives the truth, and takes no
    /// escalations).
    #[arg(long)]
    no_code: bool,
    /// Configurations to run (comma-separated): off, validate, full, verify (full anchoring
    /// with cross-model verification at the adaptive rate; needs --secondary), verify-always
    /// (every step verified).
    #[arg(long, default_value = "off,validate,full", value_delimiter = ',')]
    configs: Vec<String>,
    #[command(flatten)]
    anchoring: AnchorArgs,
    #[command(flatten)]
    backends: BackendArgs,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// The totals of one configuration.
#[derive(Clone, Debug, Default, Serialize)]
struct Totals {
    config: String,
    trajectories: usize,
    consistent_trajectories: usize,
    final_state_right: usize,
    steps: usize,
    right_steps: usize,
    uncertain_steps: usize,
    uncertain_and_wrong: usize,
    wrong_and_not_uncertain: usize,
    /// What was wrong in the wrong steps not marked uncertain.
    misses: BTreeMap<&'static str, usize>,
    regenerations: usize,
    escalations: usize,
    verifications: usize,
    disagreements: usize,
    simulator_calls: usize,
    tokens: u64,
    wall_ms: f64,
}

pub fn run(a: MeasureArgs) -> Result<()> {
    let adaptive = a
        .anchoring
        .policy()?
        .unwrap_or(envsim_sim::verify::VerifyPolicy {
            floor: a.anchoring.verify_floor,
            ceiling: a.anchoring.verify_ceiling,
            warmup: 3,
        });
    let always = envsim_sim::verify::VerifyPolicy {
        floor: 1.0,
        ceiling: 1.0,
        warmup: 0,
    };
    type Config = (String, AnchorMode, Option<envsim_sim::verify::VerifyPolicy>);
    let mut configs: Vec<Config> = Vec::new();
    for c in &a.configs {
        let verifies = c == "verify" || c == "verify-always";
        if verifies && a.backends.secondary.is_none() {
            bail!("--configs {c} needs --secondary");
        }
        configs.push(match c.as_str() {
            "off" => (c.clone(), AnchorMode::Off, None),
            "validate" => (c.clone(), AnchorMode::Validate, None),
            "full" => (c.clone(), AnchorMode::Full, None),
            "verify" => (c.clone(), AnchorMode::Full, Some(adaptive)),
            "verify-always" => (c.clone(), AnchorMode::Full, Some(always)),
            other => {
                bail!("unknown configuration {other:?}: off, validate, full, verify, verify-always")
            }
        });
    }
    if a.walks == 0 || a.steps == 0 || a.states == 0 {
        bail!("--states, --walks and --steps must be at least 1");
    }
    let corpus = crate::context::Corpus::choose(a.envs.clone());
    let names: Vec<String> = if a.env.is_empty() {
        let mut all: Vec<String> = corpus
            .load_all()?
            .into_iter()
            .filter(|p| {
                // Walks hold states whole: the database dumps of megabytes are left out.
                p.states
                    .iter()
                    .all(|(_, s)| s.to_string().len() < envsim_bench::collect::LARGE_STATE_BYTES)
            })
            .map(|p| p.manifest.name)
            .collect();
        all.sort();
        all.truncate(a.max_envs);
        all
    } else {
        a.env.clone()
    };
    let mut totals: BTreeMap<String, Totals> = configs
        .iter()
        .map(|(name, _, _)| {
            (
                name.clone(),
                Totals {
                    config: name.clone(),
                    ..Totals::default()
                },
            )
        })
        .collect();
    for name in &names {
        let mut package = corpus.load(name)?;
        package.states.truncate(a.states);
        package.clocks.truncate(a.states);
        eprintln!("{name}: learning the environment, then walking");
        let env = learn_environment(&package)?;
        let env = Arc::new(if a.no_code { env.without_code() } else { env });
        let walks = crate::context::walk_transitions(
            vec![package.clone()],
            &crate::context::walk_args(a.walks, a.steps, 2),
            a.seed,
        )?;
        let runs: Vec<_> = trajectories_from_walks(&walks)
            .into_values()
            .flatten()
            .collect();
        let runtime = crate::context::exec_runtime()?;
        runtime.block_on(async {
            let executor = ExecutorSimulator::new(Arc::new(
                envsim_exec::Executor::new(1, crate::context::exec_limits()?).await?,
            ));
            // The truth knows the code even when the simulator does not.
            let truth_env = env.with_code_of(&package);
            let code_executor = if a.no_code {
                None
            } else {
                Some(executor.clone())
            };
            for (config, mode, verify) in &configs {
                // The simulators may run the code (the faulty double does) whatever the
                // session is told; only escalation is withheld without code.
                // Without code the faulty double still answers from the code (a perfect
                // reader of the description, then spoiled); the session cannot escalate.
                let (primary, secondary) =
                    build_pair(&a.backends, &executor.clone().knowing(&truth_env))?;
                let t = totals
                    .get_mut(config)
                    .ok_or_else(|| anyhow::anyhow!("no totals"))?;
                // Sessions of one configuration share their running agreement per tool.
                let shared = verify.map(Session::shared_verifier);
                for (w, run) in runs.iter().enumerate() {
                    let mut session = Session::new(
                        Arc::clone(&env),
                        Backends {
                            primary: Arc::clone(&primary),
                            secondary: secondary.clone(),
                            executor: code_executor
                                .clone()
                                .map(|e| Arc::new(e) as Arc<dyn Simulator>),
                        },
                        SessionConfig {
                            mode: *mode,
                            max_regenerations: a.anchoring.max_regenerations,
                            verify: *verify,
                            seed: a.seed.wrapping_add(w as u64),
                        },
                        (*run.initial_state).clone(),
                    );
                    if let Some(shared) = &shared {
                        session.share_verifier(Arc::clone(shared));
                    }
                    let mut all_right = true;
                    let mut replay = (*run.initial_state).clone();
                    for (k, step) in run.steps.iter().enumerate() {
                        let before = Arc::clone(session.state());
                        let record = session
                            .step(&step.tool, &step.arguments)
                            .await
                            .map_err(|e| anyhow::anyhow!("{name}: {}: {e}", step.tool))?;
                        let request = |state| StepRequest {
                            env: &truth_env,
                            state,
                            tool: &step.tool,
                            arguments: &step.arguments,
                            seed: a.seed.wrapping_add(w as u64),
                            step: k,
                            attempt: 0,
                            feedback: &[],
                        };
                        let truth = executor.predict(&request(&before)).await?;
                        let right = truth.observation == record.observation
                            && truth.state_after == *record.state_after;
                        replay = executor.predict(&request(&replay)).await?.state_after;
                        all_right &= right;
                        let p = &record.provenance;
                        t.steps += 1;
                        t.right_steps += usize::from(right);
                        t.uncertain_steps += usize::from(p.uncertain);
                        t.uncertain_and_wrong += usize::from(p.uncertain && !right);
                        t.wrong_and_not_uncertain += usize::from(!p.uncertain && !right);
                        if !p.uncertain && !right {
                            let kind = miss_kind(
                                &before,
                                &truth.observation,
                                &truth.state_after,
                                &record.observation,
                                &record.state_after,
                            );
                            *t.misses.entry(kind).or_default() += 1;
                        }
                        t.regenerations += p.regenerations;
                        t.escalations += usize::from(p.escalated_to.is_some());
                        t.verifications += usize::from(p.verified_by.is_some());
                        t.disagreements += usize::from(p.agreed == Some(false));
                        t.simulator_calls += p.simulator_calls;
                        t.tokens += p.tokens;
                        t.wall_ms += p.wall_ms;
                    }
                    t.trajectories += 1;
                    t.consistent_trajectories += usize::from(all_right);
                    t.final_state_right += usize::from(**session.state() == replay);
                }
                eprintln!("{name}: {config} done");
            }
            anyhow::Ok(())
        })?;
    }
    let totals: Vec<Totals> = configs
        .iter()
        .filter_map(|(c, _, _)| totals.remove(c))
        .collect();
    let summary = json!({
        "environments": names,
        "primary": format!("{:?}", a.backends.backend).to_lowercase(),
        "secondary": a.backends.secondary.map(|s| format!("{s:?}").to_lowercase()),
        "fault_rate": a.backends.fault_rate,
        "fault_profile": a.backends.fault_profile().describe(),
        "mode": if a.no_code { "environment-free (generated description)" } else { "code" },
        "configs": totals,
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", markdown(&summary));
    }
    Ok(())
}

/// What is wrong in a kept answer, against the truth: only the observation; a change left out
/// (the state stayed while the truth changed it); resources that should not be there, or that
/// are missing; or other state values.
fn miss_kind(
    before: &Value,
    truth_obs: &Value,
    truth_state: &Value,
    obs: &Value,
    state: &Value,
) -> &'static str {
    use envsim_core::audit::resources;
    if state == truth_state {
        return if obs == truth_obs {
            "none"
        } else {
            "observation"
        };
    }
    if state == before && truth_state != before {
        return "dropped_update";
    }
    let (kept, truth) = (resources(state), resources(truth_state));
    if kept.keys().any(|k| !truth.contains_key(k)) {
        "phantom_resource"
    } else if truth.keys().any(|k| !kept.contains_key(k)) {
        "vanished_resource"
    } else {
        "wrong_values"
    }
}

fn markdown(summary: &Value) -> String {
    let pct = |a: f64, b: f64| {
        if b == 0.0 {
            "—".to_owned()
        } else {
            format!("{:.1}%", 100.0 * a / b)
        }
    };
    let configs = summary["configs"].as_array().cloned().unwrap_or_default();
    let base = configs.first().cloned().unwrap_or(Value::Null);
    let mut out = format!(
        "{} environments, primary {}, secondary {}, {} mode.\n\n| config | right steps | consistent trajectories | final state right | uncertain steps (wrong) | wrong and not uncertain | regenerations | escalations | verified (disagreed) | simulator calls per step | tokens per step | wall per step | extra calls vs {} |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        summary["environments"].as_array().map_or(0, Vec::len),
        summary["primary"].as_str().unwrap_or_default(),
        summary["secondary"].as_str().unwrap_or("none"),
        summary["mode"].as_str().unwrap_or_default(),
        base["config"].as_str().unwrap_or("the first"),
    );
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    for c in &configs {
        let steps = f(c, "steps");
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} ({}) | {} | {} | {} | {} ({}) | {:.2} | {:.0} | {:.1} ms | {} |\n",
            c["config"].as_str().unwrap_or_default(),
            pct(f(c, "right_steps"), steps),
            pct(f(c, "consistent_trajectories"), f(c, "trajectories")),
            pct(f(c, "final_state_right"), f(c, "trajectories")),
            c["uncertain_steps"],
            c["uncertain_and_wrong"],
            c["wrong_and_not_uncertain"],
            c["regenerations"],
            c["escalations"],
            c["verifications"],
            c["disagreements"],
            f(c, "simulator_calls") / steps.max(1.0),
            f(c, "tokens") / steps.max(1.0),
            f(c, "wall_ms") / steps.max(1.0),
            pct(f(c, "simulator_calls") - f(&base, "simulator_calls"), f(&base, "simulator_calls")),
        ));
    }
    out
}

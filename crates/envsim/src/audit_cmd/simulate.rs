//! `envsim audit simulate`: the embedded local model as a multi-step simulator of corpus walks,
//! audited. It carries its own state from step to step (each predicted Δ applied to the state it
//! predicted before), and every step is also executed on that same state, so each step's
//! correctness is known on its own, not only whether the trajectory went astray. The output
//! says how the audit's SCS and flags compare with that truth.

use crate::simulators::{local_backend, LocalArgs, TemplateArg};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use envsim_bench::audit_check::trajectories_from_walks;
use envsim_core::apply::apply;
use envsim_core::audit::{audit, AuditStep, AuditTrajectory};
use envsim_core::delta::Delta;
use envsim_core::extract::extract_object;
use envsim_core::sample::Action;
use envsim_core::score::{strict_feedback, OUTPUT_KEYS};
use envsim_core::stats::{mean, pearson};
use envsim_eval::config::Decoding;
use envsim_eval::runner::Predictor;
use envsim_exec::{Call, ExecError, Executor};
use serde_json::{json, Value};
use std::path::PathBuf;

/// `envsim audit simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Folder of environment packages (default: the bundled corpus, or $ENVSIM_ENVS).
    #[arg(long, value_name = "DIR")]
    envs: Option<PathBuf>,
    /// Environments whose walks are simulated (repeatable).
    #[arg(long = "env", value_name = "NAME", required = true)]
    env: Vec<String>,
    /// Initial states per environment (the first N of its package).
    #[arg(long, default_value_t = 1)]
    states: usize,
    /// Walks per initial state.
    #[arg(long, default_value_t = 2)]
    walks: usize,
    /// Steps per walk.
    #[arg(long, default_value_t = 6)]
    steps: usize,
    /// Seed of the walks (effects are learned from walks with seed + 1).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Prompt template.
    #[arg(long, value_enum, default_value_t = TemplateArg::EnvsimSliced)]
    template: TemplateArg,
    /// Completion token limit per step.
    #[arg(long, default_value_t = 768)]
    max_tokens: u64,
    #[command(flatten)]
    local: LocalArgs,
    /// Where the simulated trajectories go (envsim trajectory JSONL with states, for `envsim
    /// audit`); each step also records `correct`, whether it matched the executor.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

/// One simulated step, with the truth.
struct Simulated {
    step: AuditStep,
    correct: bool,
}

pub fn run(a: SimulateArgs) -> Result<()> {
    if a.states == 0 || a.walks == 0 || a.steps == 0 {
        bail!("--states, --walks and --steps must be at least 1");
    }
    let decoding = Decoding {
        temperature: Some(0.0),
        max_tokens: Some(a.max_tokens),
        stop: Vec::new(),
        extra_body: serde_json::Map::new(),
    };
    let template = a.template.template();
    let (_, simulator, model) = local_backend(&a.local, &decoding, template)?;
    let Predictor::Local { model: text, .. } = simulator else {
        bail!("the local backend did not start");
    };
    let (engine, generation) = (
        std::sync::Arc::clone(text.engine()),
        text.generation().clone(),
    );
    let corpus = crate::context::Corpus::choose(a.envs.clone());
    let runtime = crate::context::exec_runtime()?;
    let executor = runtime.block_on(Executor::new(1, crate::context::exec_limits()?))?;
    let mut out = String::new();
    let mut rows: Vec<Value> = Vec::new();
    // Per step: (flagged by the audit, right).
    let mut steps: Vec<(bool, bool)> = Vec::new();
    for env in &a.env {
        let mut package = corpus.load(env)?;
        package.states.truncate(a.states);
        let effects = crate::context::learn(&package, 10, 16, 2, a.seed.wrapping_add(1))?.effects;
        let walks = crate::context::explore(
            vec![package.clone()],
            // Exploration makes paths of its own lengths: a larger budget, then the longest.
            crate::context::walk_args(a.walks * crate::context::PATH_POOL, a.steps, 2)
                .plan(a.seed, false),
            2,
        )?
        .longest_paths(a.walks, a.steps);
        for truth in trajectories_from_walks(&walks).into_values().flatten() {
            let clock = package.clock(0).seconds;
            let mut state = (*truth.initial_state).clone();
            let mut simulated: Vec<Simulated> = Vec::new();
            for (k, call) in truth.steps.iter().enumerate() {
                let action = Action {
                    name: call.tool.clone(),
                    arguments: call.arguments.clone(),
                };
                let prompt = template.render(&package.code.code, &state, &action);
                let answer = engine
                    .generate_blocking(prompt, generation.clone())
                    .map_err(|e| anyhow!("{env}: the local model failed: {e}"))?;
                let executed = runtime.block_on(executor.call(&Call {
                    seed: k as u64,
                    clock: clock + k as f64 * envsim_core::clock::DEFAULT_CLOCK_STEP,
                    ..Call::new(&package.code, &call.tool, &call.arguments, &state)
                }));
                // A tool that raised is an answer too (exploration tries ill-typed calls):
                // its text as the explorer records it, and the changes made before it raised.
                let (truth_observation, truth_after) = match executed {
                    Ok(done) => (done.observation, done.state_after),
                    Err(e @ (ExecError::Spawn(_) | ExecError::Protocol(_))) => return Err(e.into()),
                    Err(e) => {
                        let after = e.state_after().cloned().unwrap_or_else(|| state.clone());
                        (format!("Error: {e}"), after)
                    }
                };
                let truth_feedback = strict_feedback(&Value::String(truth_observation));
                let (observation, after, correct) =
                    match extract_object(&answer.content, &OUTPUT_KEYS) {
                        Ok(found) => {
                            let object = Value::Object(found.object);
                            let feedback = object.get("feedback").cloned().unwrap_or(Value::Null);
                            let changes =
                                object.get("config_changes").cloned().unwrap_or(json!([]));
                            let (after, _) = apply(&state, &Delta::from_value(&changes));
                            let correct = strict_feedback(&feedback) == truth_feedback
                                && after == truth_after;
                            (feedback, after, correct)
                        }
                        // An answer that cannot be read changes nothing and is wrong.
                        Err(_) => (Value::String(answer.content.clone()), state.clone(), false),
                    };
                let observation = match observation {
                    Value::String(text) => {
                        envsim_core::answer::observation_value(&Value::Null, &text)
                    }
                    other => other,
                };
                simulated.push(Simulated {
                    step: AuditStep {
                        tool: call.tool.clone(),
                        arguments: call.arguments.clone(),
                        success: package.outcome.classify(&observation),
                        observation,
                        state_after: std::sync::Arc::new(after.clone()),
                    },
                    correct,
                });
                state = after;
                eprintln!(
                    "{} step {}: {} ({})",
                    truth.id,
                    k + 1,
                    call.tool,
                    if correct { "right" } else { "wrong" }
                );
            }
            let trajectory = AuditTrajectory {
                id: truth.id.clone(),
                initial_state: truth.initial_state.clone(),
                steps: simulated.iter().map(|s| s.step.clone()).collect(),
            };
            let report = audit(&trajectory, &effects);
            for (k, s) in simulated.iter().enumerate() {
                let flagged = report.violations.iter().any(|v| v.step == k);
                steps.push((flagged, s.correct));
            }
            let right = simulated.iter().filter(|s| s.correct).count();
            rows.push(json!({
                "trajectory": truth.id,
                "steps": simulated.len(),
                "right": right,
                "accuracy": right as f64 / simulated.len().max(1) as f64,
                "scs": report.scs(),
                "violations": report.violations.len(),
            }));
            let record = json!({
                "env": env, "task_id": truth.id, "initial_state": truth.initial_state.as_ref(),
                "simulator": model,
                "steps": simulated.iter().map(|s| json!({
                    "action": {"name": s.step.tool, "arguments": s.step.arguments},
                    "observation": s.step.observation,
                    "state_after": s.step.state_after.as_ref(),
                    "correct": s.correct,
                })).collect::<Vec<_>>(),
            });
            out.push_str(&record.to_string());
            out.push('\n');
        }
    }
    crate::output::write_atomic(&a.out, &out)?;
    let summary = summarize(&rows, &steps, &model);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print(&summary);
    }
    Ok(())
}

fn summarize(rows: &[Value], steps: &[(bool, bool)], model: &str) -> Value {
    let column = |key: &str| -> Vec<f64> {
        rows.iter()
            .map(|r| r[key].as_f64().unwrap_or(0.0))
            .collect()
    };
    let count = |flagged: bool, right: bool| {
        steps
            .iter()
            .filter(|(f, r)| *f == flagged && *r == right)
            .count()
    };
    let (fw, fr, uw, ur) = (
        count(true, false),
        count(true, true),
        count(false, false),
        count(false, true),
    );
    json!({
        "simulator": model,
        "trajectories": rows,
        "steps": steps.len(),
        "right_steps": fr + ur,
        "mean_scs": mean(&column("scs")).unwrap_or(0.0),
        "mean_accuracy": mean(&column("accuracy")).unwrap_or(0.0),
        "pearson_scs_accuracy": pearson(&column("scs"), &column("accuracy")),
        "flags": {
            "flagged_wrong": fw, "flagged_right": fr, "unflagged_wrong": uw, "unflagged_right": ur,
            "precision": (fw + fr > 0).then(|| fw as f64 / (fw + fr) as f64),
            "recall_of_wrong_steps": (fw + uw > 0).then(|| fw as f64 / (fw + uw) as f64),
        },
    })
}

fn print(summary: &Value) {
    println!("| trajectory | steps | right | SCS | violations |\n|---|---|---|---|---|");
    for r in summary["trajectories"].as_array().into_iter().flatten() {
        println!(
            "| {} | {} | {} | {:.3} | {} |",
            r["trajectory"].as_str().unwrap_or_default(),
            r["steps"],
            r["right"],
            r["scs"].as_f64().unwrap_or(0.0),
            r["violations"]
        );
    }
    let f = &summary["flags"];
    let pct = |v: &Value| {
        v.as_f64()
            .map_or("—".to_owned(), |x| format!("{:.1}%", 100.0 * x))
    };
    println!(
        "\n{}: {} of {} steps right; mean SCS {:.3}, mean accuracy {:.3}, Pearson r {}",
        summary["simulator"].as_str().unwrap_or_default(),
        summary["right_steps"],
        summary["steps"],
        summary["mean_scs"].as_f64().unwrap_or(0.0),
        summary["mean_accuracy"].as_f64().unwrap_or(0.0),
        summary["pearson_scs_accuracy"]
            .as_f64()
            .map_or("undefined".to_owned(), |r| format!("{r:.3}")),
    );
    println!(
        "steps the audit flags: {} wrong, {} right (precision {}); wrong steps flagged: {} of {} (recall {})",
        f["flagged_wrong"],
        f["flagged_right"],
        pct(&f["precision"]),
        f["flagged_wrong"],
        f["flagged_wrong"].as_u64().unwrap_or(0) + f["unflagged_wrong"].as_u64().unwrap_or(0),
        pct(&f["recall_of_wrong_steps"]),
    );
}

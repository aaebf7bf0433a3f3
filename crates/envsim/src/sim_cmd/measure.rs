//! `envsim sim measure`: anchoring measured where the truth is known. Seeded walks of corpus
//! environments give call sequences; each is simulated by sessions in several configurations
//! (anchoring off, validation only, full anchoring, full anchoring with cross-model
//! verification) by [`envsim_sim::measure`], which compares every step with the executor;
//! here the arguments, the environments, their learning and walks, and the table.

use crate::context::learn_environment;
use crate::simulators::{build_pair, AnchorArgs, BackendArgs};
use anyhow::{anyhow, bail, Result};
use clap::Args;
use envsim_bench::audit_check::trajectories_from_walks;
use envsim_sim::backend::ExecutorSimulator;
use envsim_sim::measure::{
    measure_config, AnchoringTotals, MeasureConfig, MeasureSummary, Measured,
};
use envsim_sim::verify::VerifyPolicy;
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

pub fn run(a: MeasureArgs) -> Result<()> {
    let adaptive = a.anchoring.policy()?.unwrap_or(VerifyPolicy {
        floor: a.anchoring.verify_floor,
        ceiling: a.anchoring.verify_ceiling,
        warmup: 3,
    });
    let mut configs: Vec<MeasureConfig> = Vec::new();
    for c in &a.configs {
        let verifies = c == "verify" || c == "verify-always";
        if verifies && a.backends.secondary.is_none() {
            bail!("--configs {c} needs --secondary");
        }
        configs.push(MeasureConfig::named(c, adaptive).ok_or_else(|| {
            anyhow!("unknown configuration {c:?}: off, validate, full, verify, verify-always")
        })?);
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
                    .all(|(_, s)| s.to_string().len() < envsim_explore::record::LARGE_STATE_BYTES)
            })
            .map(|p| p.manifest.name)
            .collect();
        all.sort();
        all.truncate(a.max_envs);
        all
    } else {
        a.env.clone()
    };
    let mut totals: Vec<AnchoringTotals> = configs
        .iter()
        .map(|c| AnchoringTotals {
            config: c.name.clone(),
            ..AnchoringTotals::default()
        })
        .collect();
    for name in &names {
        let mut package = corpus.load(name)?;
        package.states.truncate(a.states);
        package.clocks.truncate(a.states);
        eprintln!("{name}: learning the environment, then walking");
        let env = learn_environment(&package)?;
        let env = Arc::new(if a.no_code { env.without_code() } else { env });
        let walks = crate::context::explore(
            vec![package.clone()],
            // Exploration makes paths of its own lengths: a larger budget, then the longest.
            crate::context::walk_args(a.walks * crate::context::PATH_POOL, a.steps, 2)
                .plan(a.seed, false),
            2,
        )?
        .longest_paths(a.walks, a.steps);
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
            let on = Measured {
                env: Arc::clone(&env),
                truth_env: &truth_env,
                executor: &executor,
                escalation: (!a.no_code).then(|| executor.clone()),
                runs: &runs,
                max_regenerations: a.anchoring.max_regenerations,
                seed: a.seed,
            };
            for (config, t) in configs.iter().zip(totals.iter_mut()) {
                // The simulators may run the code (the faulty double does) whatever the
                // session is told; only escalation is withheld without code. Without code the
                // faulty double still answers from the code (a perfect reader of the
                // description, then spoiled); the session cannot escalate.
                let (primary, secondary) =
                    build_pair(&a.backends, &executor.clone().knowing(&truth_env))?;
                measure_config(&on, config, primary, secondary, t)
                    .await
                    .map_err(|e| anyhow!("{name}: {e}"))?;
                eprintln!("{name}: {} done", config.name);
            }
            anyhow::Ok(())
        })?;
    }
    let summary = MeasureSummary {
        environments: names,
        primary: format!("{:?}", a.backends.backend).to_lowercase(),
        secondary: a
            .backends
            .secondary
            .map(|s| format!("{s:?}").to_lowercase()),
        fault_rate: a.backends.fault_rate,
        fault_profile: a.backends.fault_profile().describe(),
        mode: if a.no_code {
            "environment-free (generated description)"
        } else {
            "code"
        }
        .to_owned(),
        configs: totals,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", markdown(&summary));
    }
    Ok(())
}

fn markdown(summary: &MeasureSummary) -> String {
    let pct = |a: f64, b: f64| {
        if b == 0.0 {
            "—".to_owned()
        } else {
            format!("{:.1}%", 100.0 * a / b)
        }
    };
    let base = summary.configs.first().cloned().unwrap_or_default();
    let mut out = format!(
        "{} environments, primary {}, secondary {}, {} mode.\n\n| config | right steps | consistent trajectories | final state right | uncertain steps (wrong) | wrong and not uncertain | regenerations | escalations | verified (disagreed) | simulator calls per step | tokens per step | wall per step | extra calls vs {} |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        summary.environments.len(),
        summary.primary,
        summary.secondary.as_deref().unwrap_or("none"),
        summary.mode,
        if summary.configs.is_empty() { "the first" } else { base.config.as_str() },
    );
    for c in &summary.configs {
        let steps = c.steps as f64;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} ({}) | {} | {} | {} | {} ({}) | {:.2} | {:.0} | {:.1} ms | {} |\n",
            c.config,
            pct(c.right_steps as f64, steps),
            pct(c.consistent_trajectories as f64, c.trajectories as f64),
            pct(c.final_state_right as f64, c.trajectories as f64),
            c.uncertain_steps,
            c.uncertain_and_wrong,
            c.wrong_and_not_uncertain,
            c.regenerations,
            c.escalations,
            c.verifications,
            c.disagreements,
            c.simulator_calls as f64 / steps.max(1.0),
            c.tokens as f64 / steps.max(1.0),
            c.wall_ms / steps.max(1.0),
            pct(
                c.simulator_calls as f64 - base.simulator_calls as f64,
                base.simulator_calls as f64
            ),
        ));
    }
    out
}

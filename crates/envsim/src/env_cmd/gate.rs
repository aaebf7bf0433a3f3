//! `envsim env gate` and `envsim env gate-curve`: the simulator as quality gate of packages
//! ([`envsim_synth::gate`]), and the measurement of how well it separates good packages from
//! broken ones as its simulator gets worse ([`envsim_synth::gate::curve`]).

use crate::context::Corpus;
use crate::simulators::{build_pair, AnchorArg, AnchorArgs, BackendArgs, BackendKind};
use anyhow::{bail, Result};
use clap::Args;
use envsim_exec::package::EnvPackage;
use envsim_exec::Executor;
use envsim_sim::backend::ExecutorSimulator;
use envsim_synth::gate::curve::{gate_curve, CurvePlan, CurveRule};
use envsim_synth::gate::{environments, gate, GateConfig, GateReport, GateRule, DEFAULT_THRESHOLD};
use envsim_synth::mutants::MutantKind;
use std::sync::Arc;

/// How calls are sampled and judged (shared by both commands).
#[derive(Debug, Args)]
pub struct SamplingArgs {
    /// Accept a package when at least this share of its sampled calls agree (0 to 1).
    #[arg(long, default_value_t = DEFAULT_THRESHOLD)]
    threshold: f64,
    /// The sampling's budget: this many walks of --steps calls per initial state.
    #[arg(long, default_value_t = 3)]
    walks: usize,
    /// Calls per walk.
    #[arg(long, default_value_t = 12)]
    steps: usize,
    /// How the sampled calls are explored (`random`: the walks of earlier gates).
    #[arg(long, value_enum, default_value_t = crate::context::StrategyArg::Guided)]
    strategy: crate::context::StrategyArg,
    /// Leave out the package's scripted tests and tasks as the first sampled sequences (a
    /// package written with its tests gets sampled as one without them would be).
    #[arg(long)]
    no_scripted: bool,
    /// Share of sampled calls drawn valid (the rest deliberately invalid).
    #[arg(long, default_value_t = 0.75)]
    valid_share: f64,
    /// Seed of the walks and of the simulated steps.
    #[arg(long, default_value_t = 7)]
    pub(super) seed: u64,
    /// Worker processes.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// How the session checks and repairs the simulator's answers.
    #[arg(long, value_enum, default_value_t = AnchorArg::Full)]
    anchor: AnchorArg,
    /// What must reach the threshold: the share of all calls (`overall`, EnvScaler's rule), or
    /// that and the share of every tool sampled at least --min-tool-calls times (`every-tool`).
    #[arg(long, value_enum, default_value_t = RuleArg::Overall)]
    rule: RuleArg,
    /// Tools sampled fewer times are not judged on their own (the every-tool and calibrated
    /// rules).
    #[arg(long, default_value_t = 4)]
    min_tool_calls: usize,
    /// The simulator's error rate on good packages, for `--rule calibrated` (measure it with
    /// `env gate-curve`'s good packages, or by gating packages known to be right).
    #[arg(long, value_name = "SHARE")]
    simulator_error: Option<f64>,
    /// The least probability of a package's disagreements under the simulator's own error
    /// (`--rule calibrated`).
    #[arg(long, default_value_t = 0.01)]
    alpha: f64,
}

/// The gate's rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum RuleArg {
    Overall,
    EveryTool,
    /// No more disagreements, overall or in a tool, than the simulator's own error rate
    /// (--simulator-error) explains (a binomial test at --alpha).
    Calibrated,
}

impl SamplingArgs {
    pub(super) fn config(
        &self,
        max_regenerations: usize,
        verify: Option<envsim_sim::verify::VerifyPolicy>,
    ) -> Result<GateConfig> {
        if !(0.0..=1.0).contains(&self.threshold) {
            bail!(
                "--threshold must be between 0 and 1, got {}",
                self.threshold
            );
        }
        if !(0.0..=1.0).contains(&self.valid_share) {
            bail!(
                "--valid-share must be between 0 and 1, got {}",
                self.valid_share
            );
        }
        if self.walks == 0 || self.steps == 0 || self.workers == 0 {
            bail!("--walks, --steps and --workers must be at least 1");
        }
        Ok(GateConfig {
            threshold: self.threshold,
            walks: self.walks,
            steps: self.steps,
            strategy: self.strategy.strategy(),
            scripted: !self.no_scripted,
            valid_share: self.valid_share,
            seed: self.seed,
            workers: self.workers,
            mode: self.anchor.mode(),
            max_regenerations,
            verify,
            rule: match self.rule {
                RuleArg::Overall => GateRule::Overall,
                RuleArg::EveryTool => GateRule::EveryTool {
                    min_calls: self.min_tool_calls,
                },
                RuleArg::Calibrated => {
                    let Some(error_rate) = self.simulator_error else {
                        bail!("--rule calibrated needs --simulator-error (the simulator's error rate on good packages)");
                    };
                    if !(0.0..=1.0).contains(&error_rate) || !(0.0..1.0).contains(&self.alpha) {
                        bail!("--simulator-error must be between 0 and 1, and --alpha between 0 and 1 (exclusive)");
                    }
                    GateRule::Calibrated {
                        error_rate,
                        min_calls: self.min_tool_calls,
                        alpha: self.alpha,
                    }
                }
            },
            ..GateConfig::default()
        })
    }
}

/// `envsim env gate`.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// Packages to gate (names in the corpus).
    #[arg(required = true)]
    names: Vec<String>,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    anchoring: AnchorArgs,
    #[command(flatten)]
    backends: BackendArgs,
    /// Print the reports as JSON (one array).
    #[arg(long)]
    json: bool,
}

/// Gates every named package; exits 1 when one is rejected.
pub async fn run(root: &Corpus, a: GateArgs) -> Result<()> {
    if a.backends.backend == BackendKind::Executor
        || a.backends.secondary == Some(BackendKind::Executor)
    {
        bail!("--backend executor runs the code the gate judges: every package would pass. Gate with a model (local, openai), or with the faulty test double (faulty: the package's own code spoiled at --fault-rate, to see what the threshold does with a simulator of known error)");
    }
    let config = (a.sampling).config(a.anchoring.max_regenerations, a.anchoring.policy()?)?;
    let packages: Vec<EnvPackage> = a
        .names
        .iter()
        .map(|n| root.load(n))
        .collect::<Result<_>>()?;
    let executor = Arc::new(Executor::new(config.workers, crate::context::exec_limits()?).await?);
    let mut reports = Vec::new();
    for package in &packages {
        let (with_code, _) = environments(package)?;
        // Only the faulty double runs code: the package's own, as a perfect reader of it.
        let reader = ExecutorSimulator::new(Arc::clone(&executor)).knowing(&with_code);
        let (primary, secondary) = build_pair(&a.backends, &reader)?;
        let name = &package.manifest.name;
        let (bar, advance) = crate::context::progress_bar(&format!(
            "{name}: judging {{bar:30}} {{pos}}/{{len}} calls ({{elapsed}})"
        ));
        let report = gate(
            Arc::clone(&executor),
            package,
            primary,
            secondary,
            &config,
            advance,
        )
        .await;
        bar.finish_and_clear();
        let report = report?;
        if !a.json {
            print!("{}", render(&report));
        }
        reports.push(report);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    }
    let rejected: Vec<&str> = (reports.iter())
        .filter(|r| !r.accepted)
        .map(|r| r.package.as_str())
        .collect();
    if !rejected.is_empty() {
        bail!(
            "{} of {} packages rejected (agreement below {}): {}",
            rejected.len(),
            reports.len(),
            config.threshold,
            rejected.join(", ")
        );
    }
    Ok(())
}

/// A report as text: the verdict, then the tools with disagreements and an example each.
fn render(r: &GateReport) -> String {
    use std::fmt::Write;
    let mut out = format!(
        "{}: {} — {}/{} calls agree ({:.3}; threshold {}), simulator {}\n",
        r.package,
        if r.accepted { "accepted" } else { "REJECTED" },
        r.agreeing,
        r.calls,
        r.score,
        r.threshold,
        r.simulator
    );
    if let (GateRule::EveryTool { .. } | GateRule::Calibrated { .. }, Some(w)) =
        (r.rule, &r.worst_tool)
    {
        let _ = writeln!(
            out,
            "  worst tool: {} ({}/{} calls agree, {:.3})",
            w.tool,
            (w.score * w.calls as f64).round(),
            w.calls,
            w.score
        );
    }
    if let Some(why) = &r.unanswered_because {
        let _ = writeln!(
            out,
            "  {} calls the simulator could not answer (counted as disagreements); the first: {why}",
            r.unanswered
        );
    }
    for t in r.tools.iter().filter(|t| t.agreeing < t.calls) {
        let _ = writeln!(
            out,
            "  {}: {}/{} agree ({} outcome, {} state disagreements, {} unanswered)",
            t.tool,
            t.agreeing,
            t.calls,
            t.outcome_disagreements,
            t.state_disagreements,
            t.unanswered
        );
        if let Some(e) = t.examples.first() {
            let _ = writeln!(
                out,
                "    e.g. {} on {}: executed {} -> {}; predicted {} -> {}{}",
                serde_json::Value::Object(e.arguments.clone()),
                e.initial_state,
                verdict(e.executed_success),
                short(&e.executed_observation),
                verdict(e.predicted_success),
                short(&e.predicted_observation),
                if e.state_differs_at.is_empty() {
                    String::new()
                } else {
                    format!("; state differs at {}", e.state_differs_at.join(", "))
                }
            );
        }
    }
    if !r.unsampled.is_empty() {
        let _ = writeln!(
            out,
            "  never sampled (not judged): {}",
            r.unsampled.join(", ")
        );
    }
    if !r.never_succeeded.is_empty() {
        let _ = writeln!(
            out,
            "  never succeeded when executed (their effects not judged): {}",
            r.never_succeeded.join(", ")
        );
    }
    out
}

fn verdict(success: Option<bool>) -> &'static str {
    match success {
        Some(true) => "success",
        Some(false) => "failure",
        None => "undetermined",
    }
}

/// A value shortened to one line of at most 100 characters.
fn short(value: &serde_json::Value) -> String {
    let text = match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let line = text.replace('\n', " ");
    match line.char_indices().nth(100) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// `envsim env gate-curve`.
#[derive(Debug, Args)]
pub struct GateCurveArgs {
    /// Good packages (names in the corpus; default: every package whose states are small, in
    /// name order, up to --max-envs).
    #[arg(long = "env", value_name = "NAME")]
    env: Vec<String>,
    /// Packages taken when none is named.
    #[arg(long, default_value_t = 8)]
    max_envs: usize,
    /// Error rates of the double (comma-separated shares).
    #[arg(long, default_value = "0,0.05,0.1,0.2,0.3,0.4", value_delimiter = ',')]
    rates: Vec<f64>,
    /// Mutants per kind and package.
    #[arg(long, default_value_t = 1)]
    mutants: usize,
    /// Also run `env synth`'s sandbox checks on every package and mutant (without requiring
    /// tasks), to count what they catch before the gate.
    #[arg(long)]
    with_checks: bool,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// Regenerations after a rejected answer, with full anchoring.
    #[arg(long, default_value_t = 2)]
    max_regenerations: usize,
    /// Print the curve as JSON.
    #[arg(long)]
    json: bool,
}

/// Measures the curve with the description-reading double.
pub async fn curve(root: &Corpus, a: GateCurveArgs) -> Result<()> {
    let config = a.sampling.config(a.max_regenerations, None)?;
    if a.rates.is_empty() || a.rates.iter().any(|r| !(0.0..=1.0).contains(r)) {
        bail!("--rates must be shares between 0 and 1");
    }
    let packages: Vec<EnvPackage> = if a.env.is_empty() {
        let mut all: Vec<EnvPackage> = (root.load_all()?.into_iter())
            .filter(|p| {
                (p.states.iter())
                    .all(|(_, s)| s.to_string().len() < envsim_explore::record::LARGE_STATE_BYTES)
            })
            .collect();
        all.sort_by(|x, y| x.manifest.name.cmp(&y.manifest.name));
        all.truncate(a.max_envs);
        all
    } else {
        a.env.iter().map(|n| root.load(n)).collect::<Result<_>>()?
    };
    let executor = Arc::new(Executor::new(config.workers, crate::context::exec_limits()?).await?);
    let plan = CurvePlan {
        rates: a.rates.clone(),
        kinds: MutantKind::ALL.to_vec(),
        mutants_per_kind: a.mutants,
        seed: a.sampling.seed,
        // Every rule, whatever --rule says: the curve compares them.
        rules: vec![
            CurveRule::Fixed(GateRule::Overall),
            CurveRule::Fixed(GateRule::EveryTool {
                min_calls: a.sampling.min_tool_calls,
            }),
            CurveRule::CalibratedToRate {
                min_calls: a.sampling.min_tool_calls,
                alpha: a.sampling.alpha,
            },
        ],
        checks: a
            .with_checks
            .then(|| envsim_synth::envgen::check::CheckPlan {
                require_tasks: false,
                ..Default::default()
            }),
        config,
    };
    let total = packages.len();
    let curve = gate_curve(executor, &packages, &plan, |name, done, _| {
        eprintln!("{name}: gated with its mutants ({done}/{total})");
    })
    .await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&curve)?);
    } else {
        print!("{}", curve.markdown());
    }
    Ok(())
}

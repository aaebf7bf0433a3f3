//! How well the gate separates good packages from broken ones as its simulator gets worse: the
//! measurement a user needs to choose a simulator good enough to gate with.
//!
//! No model here reads a description well enough to judge code, so the simulator is a test
//! double named as one: it answers from the *good* package's code (a perfect reader of the
//! description, which mutants leave as it was) and spoils a known share of its answers
//! ([`FaultySimulator`]: uniform over its fault kinds, or the EnvSimBench-calibrated profile).
//! For each error rate, good packages and their mutants ([`crate::mutants`]) are gated on their
//! own sampled calls; the curve is their scores, the share accepted, and the precision and
//! recall of rejection at the threshold.

use super::{
    compare, environments, execute, sample_calls, Counts, ExecutedCall, GateConfig, GateError,
    GateRule,
};
use crate::mutants::{mutants, Edit, MutantKind};
use envsim_exec::package::EnvPackage;
use envsim_exec::Executor;
use envsim_sim::backend::{ExecutorSimulator, Simulator};
use envsim_sim::faulty::{FaultProfile, FaultySimulator};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What the curve is measured on.
#[derive(Clone, Debug)]
pub struct CurvePlan {
    /// Error rates of the double (each a uniform profile).
    pub rates: Vec<f64>,
    /// Mutant kinds.
    pub kinds: Vec<MutantKind>,
    /// Mutants per kind and package (fewer where the code has fewer sites).
    pub mutants_per_kind: usize,
    /// How every package is gated (threshold, sampling, anchoring).
    pub config: GateConfig,
    /// Seed of the mutation sites and of the double's draws.
    pub seed: u64,
    /// The rules whose verdicts are compared (each gets its own verdicts at every rate).
    pub rules: Vec<CurveRule>,
    /// Run `env synth`'s sandbox checks on every good package and mutant too (`None`: the
    /// gate alone), to count what they catch before a simulator is asked.
    pub checks: Option<crate::envgen::check::CheckPlan>,
}

/// A rule as the curve applies it at each error rate.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CurveRule {
    /// The same rule at every rate.
    Fixed(GateRule),
    /// [`GateRule::Calibrated`] to the double's error rate at each point (what a user does
    /// after measuring the simulator's error on good packages).
    CalibratedToRate {
        /// Tools with fewer sampled calls are not judged on their own.
        min_calls: usize,
        /// The least probability of the disagreements under the simulator's own error.
        alpha: f64,
    },
}

impl CurveRule {
    /// The rule at error rate `rate`.
    pub fn at(self, rate: f64) -> GateRule {
        match self {
            CurveRule::Fixed(rule) => rule,
            CurveRule::CalibratedToRate { min_calls, alpha } => GateRule::Calibrated {
                error_rate: rate,
                min_calls,
                alpha,
            },
        }
    }

    /// Its name.
    pub fn describe(self) -> String {
        match self {
            CurveRule::Fixed(rule) => rule.describe(),
            CurveRule::CalibratedToRate { min_calls, alpha } => format!(
                "calibrated to the simulator's error rate: disagreements overall and in every tool with at least {min_calls} calls no less probable than {alpha}"
            ),
        }
    }
}

/// Verdicts on a group of packages at one error rate.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Verdicts {
    /// Packages gated.
    pub packages: usize,
    /// Packages accepted.
    pub accepted: usize,
    /// Mean quality score.
    pub mean_score: f64,
    /// Lowest score.
    pub min_score: f64,
    /// Highest score.
    pub max_score: f64,
}

impl Verdicts {
    fn under(rule: GateRule, threshold: f64, judged: &[&Counts]) -> Verdicts {
        let scores: Vec<(f64, bool)> = (judged.iter())
            .map(|c| (c.score(), rule.passes(threshold, c)))
            .collect();
        Verdicts::of(&scores)
    }

    fn of(scores: &[(f64, bool)]) -> Verdicts {
        if scores.is_empty() {
            return Verdicts::default();
        }
        let n = scores.len();
        Verdicts {
            packages: n,
            accepted: scores.iter().filter(|(_, a)| *a).count(),
            mean_score: scores.iter().map(|(s, _)| s).sum::<f64>() / n as f64,
            min_score: scores.iter().map(|(s, _)| *s).fold(f64::INFINITY, f64::min),
            max_score: scores
                .iter()
                .map(|(s, _)| *s)
                .fold(f64::NEG_INFINITY, f64::max),
        }
    }

    /// Packages rejected.
    pub fn rejected(&self) -> usize {
        self.packages - self.accepted
    }
}

/// The gate at one error rate of its simulator.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CurvePoint {
    /// The double's error rate.
    pub rate: f64,
    /// The verdicts under each rule of the plan, in its order.
    pub rules: Vec<RuleVerdicts>,
}

/// The verdicts at one error rate under one rule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RuleVerdicts {
    /// The rule, as applied at this rate.
    pub rule: GateRule,
    /// Verdicts on the good packages.
    pub good: Verdicts,
    /// Verdicts on the mutants, per kind.
    pub mutants: BTreeMap<MutantKind, Verdicts>,
    /// Verdicts on the mutants the sampled calls expose (score below 1 with a perfect reader).
    pub exposed: Verdicts,
    /// Of the packages rejected, the share that are mutants (`None`: none rejected).
    pub rejection_precision: Option<f64>,
    /// Of the exposed mutants, the share rejected (`None`: none exposed).
    pub rejection_recall: Option<f64>,
}

/// A mutant gated for the curve.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GatedMutant {
    /// The package it was made from.
    pub package: String,
    /// The edit.
    pub edit: Edit,
    /// Calls sampled on it.
    pub calls: usize,
    /// Its score with a perfect reader (rate 0): below 1 when the sampled calls expose it.
    pub score_at_zero: f64,
    /// The sandbox checks that failed on it (when they ran; empty: none caught it).
    pub caught_by_checks: Option<Vec<crate::envgen::check::CheckKind>>,
}

/// The whole measurement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GateCurve {
    /// The acceptance threshold.
    pub threshold: f64,
    /// The anchoring the simulated steps ran under.
    pub mode: String,
    /// The double's seed.
    pub seed: u64,
    /// The rules compared, described, in the order of each point's verdicts.
    pub rules: Vec<String>,
    /// Good packages the sandbox checks found fault with (when they ran), with the checks.
    pub good_caught_by_checks: Option<Vec<(String, Vec<crate::envgen::check::CheckKind>)>>,
    /// The good packages.
    pub packages: Vec<String>,
    /// Calls judged per package (mean over good packages and mutants).
    pub mean_calls: f64,
    /// The mutants.
    pub mutants: Vec<GatedMutant>,
    /// One point per error rate, in the plan's order.
    pub points: Vec<CurvePoint>,
}

/// The kinds of check that fail on `package` (its coverage and determinism included).
async fn checked_kinds(
    executor: &Arc<Executor>,
    package: &EnvPackage,
    plan: &crate::envgen::check::CheckPlan,
) -> Result<Vec<crate::envgen::check::CheckKind>, GateError> {
    let checked =
        crate::envgen::check::check_loaded(Arc::clone(executor), package.clone(), plan).await?;
    let mut kinds: Vec<_> = checked.findings.iter().map(|f| f.check).collect();
    kinds.sort();
    kinds.dedup();
    Ok(kinds)
}

/// The double: `good`'s code read as the description, spoiled at `rate`.
pub fn reading_double(
    executor: &Arc<Executor>,
    good: &EnvPackage,
    profile: FaultProfile,
    seed: u64,
) -> Result<Arc<dyn Simulator>, GateError> {
    let (with_code, _) = environments(good)?;
    let reader = ExecutorSimulator::new(Arc::clone(executor)).knowing(&with_code);
    Ok(Arc::new(FaultySimulator::with_profile(
        reader,
        profile,
        seed,
        "description reader",
    )))
}

/// Measures the curve on `packages` (each assumed good) and their mutants; `progress` hears of
/// each package done with its name.
pub async fn gate_curve(
    executor: Arc<Executor>,
    packages: &[EnvPackage],
    plan: &CurvePlan,
    mut progress: impl FnMut(&str, usize, usize),
) -> Result<GateCurve, GateError> {
    if !(0.0..=1.0).contains(&plan.config.threshold) {
        return Err(GateError::Threshold(plan.config.threshold));
    }
    let threshold = plan.config.threshold;
    // Scores per rate: good packages, and mutants with their kind and index.
    let mut good: Vec<Vec<Counts>> = vec![Vec::new(); plan.rates.len()];
    let mut bad: Vec<Vec<(MutantKind, usize, Counts)>> = vec![Vec::new(); plan.rates.len()];
    let mut gated = Vec::new();
    let mut good_caught = plan.checks.as_ref().map(|_| Vec::new());
    let mut calls_judged = Vec::new();
    for (p, package) in packages.iter().enumerate() {
        let name = package.manifest.name.clone();
        let calls = sample_calls(Arc::clone(&executor), package, &plan.config).await?;
        let truth = execute(Arc::clone(&executor), package, &calls, &plan.config).await?;
        calls_judged.push(truth.len());
        if let (Some(check), Some(caught)) = (&plan.checks, &mut good_caught) {
            let kinds = checked_kinds(&executor, package, check).await?;
            if !kinds.is_empty() {
                caught.push((name.clone(), kinds));
            }
        }
        let mut broken: Vec<(MutantKind, EnvPackage, Vec<ExecutedCall>, Edit)> = Vec::new();
        for &kind in &plan.kinds {
            for m in mutants(package, kind, plan.mutants_per_kind, plan.seed) {
                let calls = sample_calls(Arc::clone(&executor), &m.package, &plan.config).await?;
                let truth =
                    execute(Arc::clone(&executor), &m.package, &calls, &plan.config).await?;
                calls_judged.push(truth.len());
                broken.push((kind, m.package, truth, m.edit));
            }
        }
        let mut at_zero = vec![1.0; broken.len()];
        // Exposure is measured with a perfect reader whatever rates the plan asks for.
        if !plan.rates.contains(&0.0) {
            let perfect =
                reading_double(&executor, package, FaultProfile::Uniform(0.0), plan.seed)?;
            for (b, (_, mutant, truth, _)) in broken.iter().enumerate() {
                let report = compare(
                    mutant,
                    truth,
                    Arc::clone(&perfect),
                    None,
                    &plan.config,
                    |_, _| {},
                )
                .await?;
                at_zero[b] = report.score;
            }
        }
        for (r, &rate) in plan.rates.iter().enumerate() {
            let double =
                reading_double(&executor, package, FaultProfile::Uniform(rate), plan.seed)?;
            let report = compare(
                package,
                &truth,
                Arc::clone(&double),
                None,
                &plan.config,
                |_, _| {},
            )
            .await?;
            good[r].push(report.counts());
            for (b, (kind, mutant, truth, _)) in broken.iter().enumerate() {
                let report = compare(
                    mutant,
                    truth,
                    Arc::clone(&double),
                    None,
                    &plan.config,
                    |_, _| {},
                )
                .await?;
                if rate == 0.0 {
                    at_zero[b] = report.score;
                }
                let index = gated.len() + b;
                bad[r].push((*kind, index, report.counts()));
            }
        }
        for (b, (_, mutant, truth, edit)) in broken.into_iter().enumerate() {
            let caught_by_checks = match &plan.checks {
                Some(check) => Some(checked_kinds(&executor, &mutant, check).await?),
                None => None,
            };
            gated.push(GatedMutant {
                package: name.clone(),
                edit,
                calls: truth.len(),
                score_at_zero: at_zero[b],
                caught_by_checks,
            });
        }
        progress(&name, p + 1, packages.len());
    }
    let exposed = |index: usize| gated[index].score_at_zero < 1.0;
    let points = (plan.rates.iter().enumerate())
        .map(|(r, &rate)| CurvePoint {
            rate,
            rules: (plan.rules.iter())
                .map(|&rule| {
                    let rule = rule.at(rate);
                    let verdicts = |judged: Vec<&Counts>| Verdicts::under(rule, threshold, &judged);
                    let mut by_kind: BTreeMap<MutantKind, Vec<&Counts>> = BTreeMap::new();
                    for (kind, _, judged) in &bad[r] {
                        by_kind.entry(*kind).or_default().push(judged);
                    }
                    let good_v = verdicts(good[r].iter().collect());
                    let all_bad = verdicts(bad[r].iter().map(|(_, _, j)| j).collect());
                    let exposed_v = verdicts(
                        (bad[r].iter())
                            .filter(|(_, i, _)| exposed(*i))
                            .map(|(_, _, j)| j)
                            .collect(),
                    );
                    let rejected = good_v.rejected() + all_bad.rejected();
                    RuleVerdicts {
                        rule,
                        rejection_precision: (rejected > 0)
                            .then(|| all_bad.rejected() as f64 / rejected as f64),
                        rejection_recall: (exposed_v.packages > 0)
                            .then(|| exposed_v.rejected() as f64 / exposed_v.packages as f64),
                        good: good_v,
                        mutants: (by_kind.into_iter())
                            .map(|(k, j)| (k, verdicts(j)))
                            .collect(),
                        exposed: exposed_v,
                    }
                })
                .collect(),
        })
        .collect();
    let mean_calls = if calls_judged.is_empty() {
        0.0
    } else {
        calls_judged.iter().sum::<usize>() as f64 / calls_judged.len() as f64
    };
    Ok(GateCurve {
        threshold,
        mode: plan.config.mode.name().to_owned(),
        seed: plan.seed,
        rules: plan.rules.iter().map(|r| r.describe()).collect(),
        good_caught_by_checks: good_caught,
        packages: packages.iter().map(|p| p.manifest.name.clone()).collect(),
        mean_calls,
        mutants: gated,
        points,
    })
}

impl GateCurve {
    /// The curve as Markdown: one table per rule, one row per error rate.
    pub fn markdown(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let exposed = self
            .mutants
            .iter()
            .filter(|m| m.score_at_zero < 1.0)
            .count();
        let _ = writeln!(
            out,
            "{} good packages, {} mutants ({} exposed by the sampled calls: below 1 with a perfect reader), {:.0} calls judged per package; threshold {}, anchoring {}.",
            self.packages.len(),
            self.mutants.len(),
            exposed,
            self.mean_calls,
            self.threshold,
            self.mode
        );
        if let Some(good) = &self.good_caught_by_checks {
            let caught: Vec<&GatedMutant> = (self.mutants.iter())
                .filter(|m| m.caught_by_checks.as_ref().is_some_and(|k| !k.is_empty()))
                .collect();
            let exposed_uncaught = (self.mutants.iter())
                .filter(|m| m.score_at_zero < 1.0)
                .filter(|m| m.caught_by_checks.as_ref().is_some_and(|k| k.is_empty()))
                .count();
            let mut per_kind: BTreeMap<MutantKind, (usize, usize)> = BTreeMap::new();
            for m in &self.mutants {
                let entry = per_kind.entry(m.edit.kind).or_default();
                entry.1 += 1;
                entry.0 += usize::from(m.caught_by_checks.as_ref().is_some_and(|k| !k.is_empty()));
            }
            let kinds: Vec<String> = (per_kind.iter())
                .map(|(k, (c, n))| format!("{} {c}/{n}", k.name()))
                .collect();
            let _ = writeln!(
                out,
                "Sandbox checks before the gate: {} of {} mutants caught ({}); {} exposed mutants left for the gate; {} of {} good packages with findings.",
                caught.len(),
                self.mutants.len(),
                kinds.join(", "),
                exposed_uncaught,
                good.len(),
                self.packages.len()
            );
        }
        let rules = self.points.first().map_or(0, |p| p.rules.len());
        for k in 0..rules {
            let first = &self.points[0].rules[k];
            let kinds: Vec<MutantKind> = first.mutants.keys().copied().collect();
            let described = self.rules.get(k).cloned().unwrap_or_default();
            let _ = writeln!(out, "\nRule: {described}.\n");
            let mut header = "| error rate | good: mean score | good accepted |".to_owned();
            let mut line = "|---|---|---|".to_owned();
            for kind in &kinds {
                let _ = write!(header, " {}: mean / rejected |", kind.name());
                line.push_str("---|");
            }
            header.push_str(" exposed mutants rejected | precision of rejection |");
            line.push_str("---|---|");
            let _ = writeln!(out, "{header}\n{line}");
            for p in &self.points {
                let v = &p.rules[k];
                let mut row = format!(
                    "| {:.0}% | {:.3} | {} |",
                    100.0 * p.rate,
                    v.good.mean_score,
                    share(v.good.accepted, v.good.packages)
                );
                for kind in &kinds {
                    match v.mutants.get(kind) {
                        Some(m) => {
                            let _ = write!(
                                row,
                                " {:.3} / {} |",
                                m.mean_score,
                                share(m.rejected(), m.packages)
                            );
                        }
                        None => row.push_str(" – |"),
                    }
                }
                let _ = write!(
                    row,
                    " {} | {} |",
                    share(v.exposed.rejected(), v.exposed.packages),
                    v.rejection_precision
                        .map_or("–".to_owned(), |x| format!("{x:.2}"))
                );
                let _ = writeln!(out, "{row}");
            }
        }
        out
    }
}

/// `n/of (p%)`, or a dash of nothing.
fn share(n: usize, of: usize) -> String {
    if of == 0 {
        "–".to_owned()
    } else {
        format!("{n}/{of} ({:.0}%)", 100.0 * n as f64 / of as f64)
    }
}

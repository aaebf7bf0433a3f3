//! The summary of an audit: running totals over the audited trajectories ([`SummaryTally`],
//! which keeps no trajectory), and the typed summary that the command line, the Markdown
//! table and the HTML report render ([`AuditSummary`]). Its JSON form is what `envsim audit
//! --json` prints; it reads back into the same value.

use super::bias::{bias, BiasReport, OutcomeCounts};
use super::{DriftTally, TrajectoryAudit, ViolationKind};
use crate::answer::{AnswerForm, AnswerTally};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Bootstrap resamples of the drift interval, and their seed: fixed, so that a summary depends
/// on its input alone.
const DRIFT_RESAMPLES: usize = 1000;
const DRIFT_SEED: u64 = 42;

/// The audit of a file of trajectories, summarized.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditSummary {
    /// Trajectories audited.
    pub trajectories: usize,
    /// Their steps.
    pub steps: usize,
    /// Constraints checked.
    pub checked: usize,
    /// Constraints violated.
    pub violations: usize,
    /// Violations that rest on a tool effect guessed from the tool's name.
    pub violations_on_guessed_effects: usize,
    /// Violations per kind, every kind named (0 for those never seen), by name.
    pub by_kind: BTreeMap<String, usize>,
    /// The distribution of the trajectories' state consistency scores.
    pub scs: ScsSummary,
    /// Each environment the records named, and where its effects came from.
    pub environments: Vec<EnvironmentEffects>,
    /// Records per input form (`openai_chat`, `states`, `calls`, ...).
    pub inputs: BTreeMap<String, usize>,
    /// Per input file: its tool answers by form, and how many could be read.
    pub answers: BTreeMap<String, AnswerSummary>,
    /// Specification conformance, over the trajectories a specification applied to.
    pub spec: Option<SpecSummary>,
    /// The outcome distribution against what is expected of it.
    pub bias: BiasSummary,
    /// Steps per transition kind (create, read, update, delete, failure).
    pub coverage: BTreeMap<String, usize>,
}

/// The distribution of state consistency scores (SCS, the share of a trajectory's checked
/// constraints that hold).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScsSummary {
    /// Mean over the trajectories (1 when there are none).
    pub mean: f64,
    /// The lowest.
    pub min: f64,
    /// The 10th percentile (the value at rank ⌊n/10⌋ of the sorted scores).
    pub p10: f64,
    /// Trajectories that hold every checked constraint.
    pub consistent_trajectories: usize,
    /// Counts in ten bins: [0, 0.1), …, [0.9, 1.0].
    pub histogram: Vec<usize>,
}

/// Where an environment's tool effects came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EffectsOrigin {
    /// Learned from executed walks of its package.
    Learned,
    /// Guessed from tool names (and declared by a specification, when one was given).
    Guessed,
}

/// An environment the records named.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentEffects {
    /// Its name (empty for records that name none).
    pub env: String,
    /// Where its effects came from.
    pub effects: EffectsOrigin,
    /// Tools whose writes were taken from what the audited file's transcripts show, the
    /// walks having seen none succeed (weaker evidence than executed calls).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes_from_transcripts: Vec<String>,
}

/// The tool answers of one input file, by the form they were written in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnswerSummary {
    /// All answers.
    pub answers: usize,
    /// Answers read: a structured value, or text whose outcome was read.
    pub read: usize,
    /// Answers whose outcome (success or failure) could be read.
    pub outcome_read: usize,
    /// `read / answers` (1 when there were none).
    pub read_share: f64,
    /// Answers per form, by the form's name.
    pub forms: BTreeMap<String, usize>,
}

impl AnswerSummary {
    /// The summary of a file's answer counts.
    pub fn of(t: &AnswerTally) -> AnswerSummary {
        AnswerSummary {
            answers: t.answers,
            read: t.read,
            outcome_read: t.outcome_read,
            read_share: t.read_share(),
            forms: (t.forms.iter())
                .map(|(f, n)| (f.name().to_owned(), *n))
                .collect(),
        }
    }

    /// The counts in words: `12 tool answers (10 json, 2 text); 11 read (91.7%), 11 with a
    /// known outcome`.
    pub fn describe(&self) -> String {
        let forms: Vec<String> = (self.forms.iter())
            .map(|(form, n)| format!("{n} {form}"))
            .collect();
        format!(
            "{} tool answers ({}); {} read ({:.1}%), {} with a known outcome",
            self.answers,
            forms.join(", "),
            self.read,
            100.0 * self.read_share,
            self.outcome_read
        )
    }
}

/// Specification conformance (SpecCS: the mean share of a trajectory's steps whose call fits
/// its tool's schema) and drift, over the trajectories with a specification.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpecSummary {
    /// Trajectories checked against a specification.
    pub trajectories: usize,
    /// Their steps.
    pub steps: usize,
    /// Steps that break the specification.
    pub violating_steps: usize,
    /// Mean over those trajectories of the share of their steps that fit.
    pub spec_cs_mean: f64,
    /// How the violation rate changes with the step index.
    pub drift: DriftSummary,
}

/// Specification drift: the least-squares slope of the violation indicator on the step index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DriftSummary {
    /// Violations per step per step of trajectory length (0 without drift).
    pub slope: f64,
    /// 95% bootstrap interval of the slope, `[lo, hi]`, resampling whole trajectories.
    pub interval: Option<[f64; 2]>,
    /// Per step index: (steps, steps that break the specification).
    pub by_index: Vec<(usize, usize)>,
}

/// The expected outcome distribution of a tool (`None`: nothing is expected of it).
pub type Expected<'a> = &'a dyn Fn(&str) -> Option<BTreeMap<String, f64>>;

/// The outcome distribution of the audited steps (success, not found, invalid, ...) against
/// what is expected of it: SDBI of the SIMCON-DATA proposal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BiasSummary {
    /// The comparison, per tool and overall, when there was an expectation.
    #[serde(flatten)]
    pub report: Option<BiasReport>,
    /// Where the expectation came from, in words (none: nothing to compare with).
    pub expected_from: Option<String>,
    /// The observed share of each outcome class over all steps.
    pub observed: BTreeMap<String, f64>,
}

impl BiasSummary {
    /// The bias of `observed` against `expected` (per tool; `None` where nothing is expected
    /// of a tool), which came from `from`; without an expectation, only what was observed.
    pub fn of(
        observed: &OutcomeCounts,
        expectation: Option<(String, Expected<'_>)>,
    ) -> BiasSummary {
        let (report, expected_from) = match expectation {
            Some((from, expected)) => (Some(bias(observed, expected)), Some(from)),
            None => (None, None),
        };
        BiasSummary {
            report,
            expected_from,
            observed: observed.overall(),
        }
    }
}

/// A call that breaks its tool's specification (its argument or response schema, or a tool
/// the specification does not have).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpecViolation {
    /// The trajectory.
    pub trajectory: String,
    /// The step (0-based).
    pub step: usize,
    /// The tool called.
    pub tool: String,
    /// What breaks: `argument_schema`, `response_schema`, `unknown_tool`, ...
    pub kind: String,
    /// One line.
    pub explanation: String,
}

/// Running totals of an audit: what its summary reports, without keeping any trajectory.
#[derive(Clone, Default)]
pub struct SummaryTally {
    /// Each trajectory's SCS (for its distribution).
    scs: Vec<f64>,
    steps: usize,
    checked: usize,
    violations: usize,
    guessed: usize,
    by_kind: BTreeMap<ViolationKind, usize>,
    spec: SpecTally,
    inputs: BTreeMap<&'static str, usize>,
    answers: BTreeMap<String, AnswerTally>,
    coverage: BTreeMap<&'static str, usize>,
}

/// Running totals of the specification checks.
#[derive(Clone, Default)]
struct SpecTally {
    steps: usize,
    violating_steps: usize,
    /// Sum over trajectories with steps of the share of their steps that fit.
    share_sum: f64,
    with_steps: usize,
    drift: DriftTally,
}

impl SummaryTally {
    /// Adds one trajectory's audit.
    pub fn add_audit(&mut self, report: &TrajectoryAudit) {
        self.scs.push(report.scs());
        self.steps += report.steps;
        self.checked += report.checked;
        self.violations += report.violations.len();
        for v in &report.violations {
            *self.by_kind.entry(v.kind).or_default() += 1;
            self.guessed += usize::from(v.guessed);
        }
    }

    /// Adds one trajectory's specification flags: per step, whether it breaks the
    /// specification.
    pub fn add_spec_flags(&mut self, flags: &[bool]) {
        let spec = &mut self.spec;
        let bad = flags.iter().filter(|b| **b).count();
        spec.steps += flags.len();
        spec.violating_steps += bad;
        if !flags.is_empty() {
            spec.share_sum += (flags.len() - bad) as f64 / flags.len() as f64;
            spec.with_steps += 1;
        }
        spec.drift.add(flags);
    }

    /// Counts a record of an input form.
    pub fn add_input(&mut self, form: &'static str) {
        *self.inputs.entry(form).or_default() += 1;
    }

    /// Forgets the input forms counted so far (those of a reference dataset, which is not
    /// audited).
    pub fn forget_inputs(&mut self) {
        self.inputs.clear();
    }

    /// Counts a tool answer of `file`: its form, and whether its outcome was read.
    pub fn add_answer(&mut self, file: &str, form: AnswerForm, outcome_read: bool) {
        if !self.answers.contains_key(file) {
            self.answers.insert(file.to_owned(), AnswerTally::default());
        }
        if let Some(t) = self.answers.get_mut(file) {
            t.add(form, outcome_read);
        }
    }

    /// The answers of `file` counted so far.
    pub fn answers_of(&self, file: &str) -> Option<&AnswerTally> {
        self.answers.get(file)
    }

    /// Counts the transition kinds of a trajectory's steps.
    pub fn add_transitions(&mut self, kinds: &[&'static str]) {
        for kind in kinds {
            *self.coverage.entry(kind).or_default() += 1;
        }
    }

    /// Trajectories audited so far.
    pub fn trajectories(&self) -> usize {
        self.scs.len()
    }

    /// The summary, with the environments met and the outcome bias (which the tally does not
    /// see: they need the packages and the expectation).
    pub fn finish(self, environments: Vec<EnvironmentEffects>, bias: BiasSummary) -> AuditSummary {
        let SummaryTally {
            mut scs,
            steps,
            checked,
            violations,
            guessed,
            by_kind: counted,
            spec,
            inputs,
            answers,
            coverage,
        } = self;
        scs.sort_by(f64::total_cmp);
        let mut by_kind: BTreeMap<String, usize> = (ViolationKind::ALL.iter())
            .map(|k| (k.name().to_owned(), 0))
            .collect();
        for (kind, count) in counted {
            by_kind.insert(kind.name().to_owned(), count);
        }
        let trajectories = scs.len();
        let scs = ScsSummary {
            mean: if trajectories == 0 {
                1.0
            } else {
                scs.iter().sum::<f64>() / trajectories as f64
            },
            min: scs.first().copied().unwrap_or(1.0),
            p10: scs.get(scs.len() / 10).copied().unwrap_or(1.0),
            consistent_trajectories: scs.iter().filter(|x| **x >= 1.0).count(),
            histogram: histogram(&scs),
        };
        AuditSummary {
            trajectories,
            steps,
            checked,
            violations,
            violations_on_guessed_effects: guessed,
            by_kind,
            scs,
            environments,
            inputs: (inputs.into_iter())
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            answers: (answers.iter())
                .map(|(file, t)| (file.clone(), AnswerSummary::of(t)))
                .collect(),
            spec: spec.finish(),
            bias,
            coverage: (coverage.into_iter())
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        }
    }
}

impl SpecTally {
    /// The specification summary; none when no trajectory was checked against one.
    fn finish(self) -> Option<SpecSummary> {
        let trajectories = self.drift.trajectories();
        if trajectories == 0 {
            return None;
        }
        let drift = self.drift.finish(DRIFT_RESAMPLES, DRIFT_SEED);
        Some(SpecSummary {
            trajectories,
            steps: self.steps,
            violating_steps: self.violating_steps,
            spec_cs_mean: self.share_sum / self.with_steps.max(1) as f64,
            drift: DriftSummary {
                slope: drift.slope,
                interval: drift.interval.map(|i| [i.lo, i.hi]),
                by_index: drift.by_index,
            },
        })
    }
}

/// Counts of SCS values in ten bins, [0, 0.1) … [0.9, 1.0].
fn histogram(scs: &[f64]) -> Vec<usize> {
    let mut bins = vec![0usize; 10];
    for x in scs {
        bins[((x * 10.0).floor() as usize).min(9)] += 1;
    }
    bins
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{EffectSource, Violation};
    use serde_json::json;

    /// An audit of `checked` constraints with one violation of each of `kinds`.
    fn audited(
        id: &str,
        steps: usize,
        checked: usize,
        kinds: &[(ViolationKind, bool)],
    ) -> TrajectoryAudit {
        let violations = (kinds.iter().enumerate())
            .map(|(step, &(kind, guessed))| Violation {
                trajectory: id.to_owned(),
                step,
                kind,
                tool: "get_note".to_owned(),
                resource: None,
                field: None,
                conflicting_step: None,
                guessed,
                effects: if guessed {
                    EffectSource::Guessed
                } else {
                    EffectSource::Observed
                },
                explanation: String::new(),
            })
            .collect();
        TrajectoryAudit {
            trajectory: id.to_owned(),
            steps,
            checked,
            violations,
            transitions: Vec::new(),
        }
    }

    fn tally() -> SummaryTally {
        let mut t = SummaryTally::default();
        t.add_audit(&audited("a", 3, 4, &[]));
        t.add_audit(&audited(
            "b",
            5,
            4,
            &[
                (ViolationKind::StaleRead, false),
                (ViolationKind::PhantomId, true),
            ],
        ));
        t.add_audit(&audited("c", 2, 0, &[]));
        t.add_input("openai_chat");
        t.add_input("openai_chat");
        t.add_input("states");
        t.add_answer("x.jsonl", AnswerForm::Json, true);
        t.add_answer("x.jsonl", AnswerForm::Text, false);
        t.add_transitions(&["create", "read", "read"]);
        t
    }

    /// Every total is what the audits added up to; the SCS scores are 1, 0.5 and 1 (a
    /// trajectory with nothing checked scores 1).
    #[test]
    fn totals_and_scs_distribution_are_exact() {
        let s = tally().finish(Vec::new(), BiasSummary::of(&OutcomeCounts::default(), None));
        assert_eq!((s.trajectories, s.steps, s.checked), (3, 10, 8));
        assert_eq!((s.violations, s.violations_on_guessed_effects), (2, 1));
        assert_eq!(s.by_kind.len(), ViolationKind::ALL.len());
        assert_eq!(s.by_kind["stale_read"], 1);
        assert_eq!(s.by_kind["phantom_id"], 1);
        assert_eq!(s.by_kind["read_after_delete"], 0);
        assert_eq!(s.scs.mean, 2.5 / 3.0);
        assert_eq!((s.scs.min, s.scs.p10), (0.5, 0.5));
        assert_eq!(s.scs.consistent_trajectories, 2);
        assert_eq!(s.scs.histogram, vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 2]);
        assert_eq!(
            s.inputs,
            BTreeMap::from([("openai_chat".into(), 2), ("states".into(), 1)])
        );
        let answers = &s.answers["x.jsonl"];
        assert_eq!(
            (answers.answers, answers.read, answers.outcome_read),
            (2, 1, 1)
        );
        assert_eq!(
            answers.describe(),
            "2 tool answers (1 json, 1 text); 1 read (50.0%), 1 with a known outcome"
        );
        assert_eq!(
            s.coverage,
            BTreeMap::from([("create".into(), 1), ("read".into(), 2)])
        );
        assert_eq!(s.spec, None);
    }

    /// An empty audit reports every score as perfect rather than dividing by zero.
    #[test]
    fn an_empty_tally_summarizes_to_ones() {
        let s = SummaryTally::default()
            .finish(Vec::new(), BiasSummary::of(&OutcomeCounts::default(), None));
        assert_eq!(s.trajectories, 0);
        assert_eq!((s.scs.mean, s.scs.min, s.scs.p10), (1.0, 1.0, 1.0));
        assert_eq!(s.scs.histogram, vec![0; 10]);
    }

    /// SpecCS is the mean per-trajectory share of steps that fit, not the pooled share; an
    /// empty trajectory counts for the drift but not for the mean.
    #[test]
    fn spec_conformance_is_a_mean_of_shares() {
        let mut t = SummaryTally::default();
        t.add_spec_flags(&[false, true]);
        t.add_spec_flags(&[false, false, false, false]);
        t.add_spec_flags(&[]);
        let spec = t
            .finish(Vec::new(), BiasSummary::of(&OutcomeCounts::default(), None))
            .spec
            .expect("three trajectories were checked");
        assert_eq!(
            (spec.trajectories, spec.steps, spec.violating_steps),
            (3, 6, 1)
        );
        assert_eq!(spec.spec_cs_mean, 0.75);
        assert_eq!(spec.drift.by_index, vec![(2, 0), (2, 1), (1, 0), (1, 0)]);
    }

    /// The JSON form reads back into the same summary, with and without an expectation, and
    /// keeps the field names reports and scripts read (`bias.overall.jsd` beside
    /// `bias.expected_from`).
    #[test]
    fn summary_round_trips_through_json() {
        let mut observed = OutcomeCounts::default();
        observed.add("get_note", "success");
        observed.add("get_note", "not_found");
        let expected = |tool: &str| {
            (tool == "get_note").then(|| BTreeMap::from([("success".to_owned(), 1.0)]))
        };
        for expectation in [
            None,
            Some(("the executor".to_owned(), &expected as Expected<'_>)),
        ] {
            let with = expectation.is_some();
            let mut t = tally();
            t.add_spec_flags(&[true, false]);
            let envs = vec![EnvironmentEffects {
                env: "notes".into(),
                effects: EffectsOrigin::Learned,
                writes_from_transcripts: Vec::new(),
            }];
            let s = t.finish(envs, BiasSummary::of(&observed, expectation));
            let value = serde_json::to_value(&s).unwrap();
            assert_eq!(
                value["environments"],
                json!([{"env": "notes", "effects": "learned"}])
            );
            assert_eq!(
                value["bias"]["observed"],
                json!({"not_found": 0.5, "success": 0.5})
            );
            if with {
                assert_eq!(value["bias"]["expected_from"], "the executor");
                assert_eq!(value["bias"]["overall"]["happy_path_excess"], -0.5);
            } else {
                assert_eq!(value["bias"]["expected_from"], json!(null));
                assert!(value["bias"].get("overall").is_none());
            }
            let back: AuditSummary = serde_json::from_value(value).unwrap();
            assert_eq!(back, s);
        }
    }
}

//! Aggregating sample scores into the per-stratum report (`envsim score --format json`).
//!
//! Schema `envsim.score.v2` (rates are fractions in [0, 1], `null` when a cell has no samples):
//! ```text
//! { "schema": "envsim.score.v2", "system": str,
//!   "overall": Summary,
//!   "groups":  { "fail_no_change": Summary, "state_change": Summary },
//!   "strata":  { "failure", "no_change_args0", "no_change_args1", "simple_1", "simple_2",
//!                "medium_3", "medium_4", "medium_5", "medium_6", "difficult_7_12",
//!                "difficult_7" … "difficult_12", "unclassified": Summary },
//!   "samples": [SampleScore, …] }
//! Summary = { "n", "fm_ref", "cm_ref", "fm_strict", "cm_strict", "field_precision",
//!             "field_recall", "field_f1", "parse_failure_rate",
//!             "errors": { "missed": n, "spurious": n, …, "reference_crash": n },
//!             "prompt_tokens", "completion_tokens",
//!             "reference_n", "reference_dropped", "fm_ref_printed", "cm_ref_printed" }
//! ```
//! Field scores are macro averages over samples (each sample weighs the same, like the rates).
//!
//! `fm_ref`/`cm_ref` are over all `n` samples, a sample the reference evaluator would crash on
//! counting as wrong. The reference itself drops such samples from every count: `reference_n`
//! is its denominator (samples it scored, failed to parse, or got a request error for),
//! `reference_dropped` the samples it crashes on, and `fm_ref_printed`/`cm_ref_printed` the
//! figures it would print (correct / `reference_n`).
//!
//! Version 1 differed in the reference columns: `fm` and `cm_reference` were computed from
//! envsim's lenient extraction rather than the raw text, and there was no reference
//! denominator. Sample scores written by v1 still read ([`SampleScore`]).

use crate::reference::ReferenceOutcome;
use crate::score::{ErrorTag, SampleScore};
use crate::strata::{Group, Stratum};
use serde::Serialize;
use serde_json::{Map, Value};

/// The schema id written into every JSON report.
pub const SCHEMA: &str = "envsim.score.v2";

/// Aggregate metrics of a set of samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Feedback match of the reference lane, over all samples.
    pub fm_ref: Option<f64>,
    /// Config match of the reference lane, over all samples.
    pub cm_ref: Option<f64>,
    /// Feedback match, strict lane.
    pub fm_strict: Option<f64>,
    /// Config match, strict lane.
    pub cm_strict: Option<f64>,
    /// Mean field precision.
    pub field_precision: Option<f64>,
    /// Mean field recall.
    pub field_recall: Option<f64>,
    /// Mean field F1.
    pub field_f1: Option<f64>,
    /// Share of outputs that could not be parsed.
    pub parse_failure_rate: Option<f64>,
    /// Samples per error tag.
    pub errors: Map<String, Value>,
    /// Prompt tokens over all samples with usage.
    pub prompt_tokens: u64,
    /// Completion tokens over all samples with usage.
    pub completion_tokens: u64,
    /// Samples the reference evaluator counts: its denominator.
    pub reference_n: usize,
    /// Samples the reference evaluator crashes on and drops from every count.
    pub reference_dropped: usize,
    /// FM-ref as the reference would print it: over `reference_n`.
    pub fm_ref_printed: Option<f64>,
    /// CM-ref as the reference would print it: over `reference_n`.
    pub cm_ref_printed: Option<f64>,
}

impl Summary {
    /// Aggregates the given samples.
    pub fn of<'a>(samples: impl IntoIterator<Item = &'a SampleScore>) -> Summary {
        let mut n = 0usize;
        let mut counts = [0usize; 4];
        let mut sums = [0f64; 3];
        let mut tags = [0usize; ErrorTag::ALL.len()];
        let (mut prompt_tokens, mut completion_tokens) = (0, 0);
        let mut parse_failures = 0;
        let (mut reference_n, mut reference_dropped) = (0, 0);
        for s in samples {
            n += 1;
            for (count, hit) in
                counts
                    .iter_mut()
                    .zip([s.fm_ref, s.fm_strict, s.cm_strict, s.cm_ref])
            {
                *count += usize::from(hit);
            }
            reference_n += usize::from(s.reference_outcome.counted_by_reference());
            reference_dropped += usize::from(s.reference_outcome == ReferenceOutcome::Crash);
            sums[0] += s.field.precision;
            sums[1] += s.field.recall;
            sums[2] += s.field.f1;
            for tag in &s.errors {
                if let Some(i) = ErrorTag::ALL.iter().position(|t| t == tag) {
                    tags[i] += 1;
                }
            }
            parse_failures += usize::from(s.parse_failure.is_some());
            if let Some(usage) = s.usage {
                prompt_tokens += usage.prompt_tokens;
                completion_tokens += usage.completion_tokens;
            }
        }
        let rate = |x: f64| (n > 0).then(|| x / n as f64);
        // Samples the reference does not count are wrong in every lane, so the correct counts
        // over all samples are also its correct counts.
        let printed = |x: usize| (reference_n > 0).then(|| x as f64 / reference_n as f64);
        Summary {
            n,
            fm_ref: rate(counts[0] as f64),
            cm_ref: rate(counts[3] as f64),
            fm_strict: rate(counts[1] as f64),
            cm_strict: rate(counts[2] as f64),
            field_precision: rate(sums[0]),
            field_recall: rate(sums[1]),
            field_f1: rate(sums[2]),
            parse_failure_rate: rate(parse_failures as f64),
            errors: ErrorTag::ALL
                .iter()
                .zip(tags)
                .map(|(t, c)| (t.code().to_owned(), Value::from(c)))
                .collect(),
            prompt_tokens,
            completion_tokens,
            reference_n,
            reference_dropped,
            fm_ref_printed: printed(counts[0]),
            cm_ref_printed: printed(counts[3]),
        }
    }
}

/// A full report for one system over one benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The simulator's name (`null`, `oracle`, a predictions file, a model).
    pub system: String,
    /// All samples.
    pub overall: Summary,
    /// The two big groups, in order `fail_no_change`, `state_change`.
    pub groups: Vec<(Group, Summary)>,
    /// Strata rows in report order, keyed as in the schema (always all of them).
    pub strata: Vec<(&'static str, Summary)>,
    /// Per-sample scores in benchmark order.
    pub samples: Vec<SampleScore>,
}

impl Report {
    /// Aggregates sample scores.
    pub fn new(system: impl Into<String>, samples: Vec<SampleScore>) -> Report {
        let overall = Summary::of(&samples);
        let groups = [Group::FailNoChange, Group::StateChange]
            .into_iter()
            .map(|g| {
                (
                    g,
                    Summary::of(samples.iter().filter(|s| s.stratum.group() == Some(g))),
                )
            })
            .collect();
        let mut strata: Vec<(&'static str, Summary)> = Stratum::primary()
            .into_iter()
            .map(|st| {
                (
                    st.key(),
                    Summary::of(samples.iter().filter(|s| s.stratum.key() == st.key())),
                )
            })
            .collect();
        for n in 7..=12u8 {
            let detail = Stratum::Difficult(n);
            let key = detail.detail_key().unwrap_or("difficult");
            strata.push((
                key,
                Summary::of(samples.iter().filter(|s| s.stratum == detail)),
            ));
        }
        strata.push((
            "unclassified",
            Summary::of(
                samples
                    .iter()
                    .filter(|s| s.stratum == Stratum::Unclassified),
            ),
        ));
        Report {
            system: system.into(),
            overall,
            groups,
            strata,
            samples,
        }
    }

    /// The report as the documented JSON schema.
    pub fn to_json(&self) -> Value {
        let summary = |s: &Summary| serde_json::to_value(s).unwrap_or(Value::Null);
        let mut root = Map::new();
        root.insert("schema".into(), SCHEMA.into());
        root.insert("system".into(), self.system.clone().into());
        root.insert("overall".into(), summary(&self.overall));
        root.insert(
            "groups".into(),
            Value::Object(
                self.groups
                    .iter()
                    .map(|(g, s)| (g.key().to_owned(), summary(s)))
                    .collect(),
            ),
        );
        root.insert(
            "strata".into(),
            Value::Object(
                self.strata
                    .iter()
                    .map(|(k, s)| ((*k).to_owned(), summary(s)))
                    .collect(),
            ),
        );
        root.insert(
            "samples".into(),
            Value::Array(
                self.samples
                    .iter()
                    .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
                    .collect(),
            ),
        );
        Value::Object(root)
    }
}

//! Scoring one prediction against one transition.
//!
//! Two lanes are computed side by side for every sample and never mixed:
//!
//! - The **reference lane** ([`crate::reference`]) is the reference evaluator byte for byte,
//!   from the raw text: its own extraction, normalisation, change application and checks.
//!   - **FM-ref**: both feedbacks normalised by the reference's `parse_to_obj`, compared with
//!     Python `==`.
//!   - **CM-ref**: the reference's config check, flaws included.
//!
//!   Where the reference would crash and drop the sample, envsim counts it wrong and records
//!   the outcome ([`ReferenceOutcome::Crash`]), so reports can also show the reference's own
//!   figure over its smaller denominator.
//! - The **strict lane** is envsim's own reading: the output object found by the lenient
//!   [`extract_object`](crate::extract::extract_object), then
//!   - **FM-strict**: each feedback string read whole as JSON or a Python literal (no fragment
//!     extraction) or kept as trimmed text, compared with canonical equality (`1`, `1.0` and
//!     `true` differ);
//!   - **CM-strict**: the delta applies without errors and the resulting state equals
//!     `config_after` exactly (canonical equality);
//!   - **field score**: precision / recall / F1 over leaf facts of the fine diff (before →
//!     predicted state vs before → true state), so partial credit is independent of how the
//!     model spelled its paths.
//!
//! A parse failure, API error or missing prediction is a sample that scores 0 everywhere; it
//! never leaves envsim's denominators.

use crate::apply::apply_in_place;
use crate::delta::Delta;
use crate::diff::{
    facts, fine_diff, fine_diff_at, reference_change_count, Change, ChangeKind, Fact,
};
use crate::extract::extract_object;
use crate::literal::{parse_literal, Dialect};
use crate::pointer::{minimal_roots, JsonPointer};
use crate::problem::Problem;
use crate::python::PyValue;
use crate::reference::extract::parse_to_obj;
use crate::reference::{ReferenceOutcome, ReferenceTruth, ReferenceVerdict};
use crate::sample::{Prediction, Transition, Usage};
use crate::strata::Stratum;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Keys a simulator's output object is expected to have.
pub const OUTPUT_KEYS: [&str; 2] = ["feedback", "config_changes"];

/// A transition with everything scoring needs precomputed (truth diffs, normalised feedback,
/// stratum), so each prediction is scored without re-walking the whole state.
#[derive(Clone, Debug)]
pub struct PreparedSample {
    transition: Transition,
    /// `success` read from the observation (`None` when it has no boolean `success`).
    pub success: Option<bool>,
    /// |Δ| used for the stratum: the stored `change_count` if the file has one, else computed.
    pub change_count: usize,
    /// |Δ| recomputed from the two states with the reference's labelling rules.
    pub computed_change_count: usize,
    /// Number of call arguments.
    pub args_count: usize,
    /// The reference stratum.
    pub stratum: Stratum,
    truth_pointers: Vec<JsonPointer>,
    truth_facts: Vec<(JsonPointer, Option<Value>)>,
    /// The reference lane's prepared truth, built on the first prediction that needs it: it
    /// holds a second copy of `config_before` (as Python objects), which samples that are
    /// only listed, stratified or scored as missing never pay for.
    reference: Option<ReferenceTruth>,
    truth_feedback_strict: Value,
}

/// Why a prediction could not be read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParseFailureInfo {
    /// Stable code (`truncated`, `no_object`, …).
    pub code: String,
    /// Human-readable detail.
    pub message: String,
}

/// Error categories of one sample (several may apply).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorTag {
    /// A true change the prediction does not make.
    Missed,
    /// A predicted change that did not happen.
    Spurious,
    /// Right location, wrong value.
    WrongValue,
    /// The output could not be parsed.
    ParseFailure,
    /// The change list, or a change in it, could not be applied.
    MalformedDelta,
    /// The predicted feedback does not match (strict).
    WrongFeedback,
    /// The request failed.
    ApiError,
    /// No prediction was supplied.
    MissingPrediction,
    /// The reference evaluator would crash on this output and drop the sample.
    ReferenceCrash,
}

impl ErrorTag {
    /// All tags in report order.
    pub const ALL: [ErrorTag; 9] = [
        ErrorTag::Missed,
        ErrorTag::Spurious,
        ErrorTag::WrongValue,
        ErrorTag::ParseFailure,
        ErrorTag::MalformedDelta,
        ErrorTag::WrongFeedback,
        ErrorTag::ApiError,
        ErrorTag::MissingPrediction,
        ErrorTag::ReferenceCrash,
    ];

    /// Stable snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            ErrorTag::Missed => "missed",
            ErrorTag::Spurious => "spurious",
            ErrorTag::WrongValue => "wrong_value",
            ErrorTag::ParseFailure => "parse_failure",
            ErrorTag::MalformedDelta => "malformed_delta",
            ErrorTag::WrongFeedback => "wrong_feedback",
            ErrorTag::ApiError => "api_error",
            ErrorTag::MissingPrediction => "missing_prediction",
            ErrorTag::ReferenceCrash => "reference_crash",
        }
    }
}

/// Field-level agreement between predicted and true leaf facts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FieldScore {
    /// True facts.
    pub truth: usize,
    /// Predicted facts.
    pub predicted: usize,
    /// Predicted facts that are true (same location, same value).
    pub correct: usize,
    /// correct / predicted (1 when both sides are empty).
    pub precision: f64,
    /// correct / truth (1 when both sides are empty).
    pub recall: f64,
    /// Harmonic mean of precision and recall.
    pub f1: f64,
}

impl FieldScore {
    fn new(truth: usize, predicted: usize, correct: usize) -> Self {
        let ratio = |n: usize, d: usize, other_empty: bool| match d {
            0 if other_empty => 1.0,
            0 => 0.0,
            d => n as f64 / d as f64,
        };
        let precision = ratio(correct, predicted, truth == 0);
        let recall = ratio(correct, truth, predicted == 0);
        let f1 = if precision + recall > 0.0 {
            2.0 * precision * recall / (precision + recall)
        } else {
            0.0
        };
        FieldScore {
            truth,
            predicted,
            correct,
            precision,
            recall,
            f1,
        }
    }
}

/// The score of one prediction (one line of envsim's result JSONL). Deserialising reads the
/// same JSON back (the stratum from its key and `change_count`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SampleScoreWire")]
pub struct SampleScore {
    /// The transition's id.
    pub sample_id: String,
    /// Stratum key.
    #[serde(serialize_with = "serialize_stratum")]
    pub stratum: Stratum,
    /// |Δ| used for the stratum.
    pub change_count: usize,
    /// Number of call arguments.
    pub args_count: usize,
    /// Feedback match of the reference lane (false when the reference did not score it).
    pub fm_ref: bool,
    /// Feedback match, strict lane.
    pub fm_strict: bool,
    /// Config match, strict lane.
    pub cm_strict: bool,
    /// Config match of the reference lane (false when the reference did not score it).
    pub cm_ref: bool,
    /// How the reference evaluator ended on this sample.
    pub reference_outcome: ReferenceOutcome,
    /// The exception the reference would raise ([`ReferenceOutcome::Crash`]).
    pub reference_crash: Option<String>,
    /// Field-level scores.
    pub field: FieldScore,
    /// Error categories (empty when fully correct).
    pub errors: Vec<ErrorTag>,
    /// Why the output could not be parsed, if it could not.
    pub parse_failure: Option<ParseFailureInfo>,
    /// Problems reading or applying the delta.
    pub problems: Vec<Problem>,
    /// Leniencies the parser needed (`fenced`, `python_literals`, …).
    pub repairs: Vec<String>,
    /// The request error, for API failures.
    pub api_error: Option<String>,
    /// Token usage, when known.
    pub usage: Option<Usage>,
}

fn serialize_stratum<S: serde::Serializer>(s: &Stratum, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(s.key())
}

/// The serialised form of [`SampleScore`]: the stratum is a key there, and the difficult
/// stratum's exact |Δ| comes back from `change_count`. Scores written by schema v1 (`fm`,
/// `cm_reference`, no reference outcome) read as well; their reference columns were computed
/// from envsim's lenient extraction, not from the raw text.
#[derive(Deserialize)]
struct SampleScoreWire {
    sample_id: String,
    stratum: String,
    change_count: usize,
    args_count: usize,
    #[serde(alias = "fm")]
    fm_ref: bool,
    fm_strict: bool,
    cm_strict: bool,
    #[serde(alias = "cm_reference")]
    cm_ref: bool,
    #[serde(default)]
    reference_outcome: Option<ReferenceOutcome>,
    #[serde(default)]
    reference_crash: Option<String>,
    field: FieldScore,
    errors: Vec<ErrorTag>,
    parse_failure: Option<ParseFailureInfo>,
    problems: Vec<Problem>,
    repairs: Vec<String>,
    api_error: Option<String>,
    usage: Option<Usage>,
}

impl TryFrom<SampleScoreWire> for SampleScore {
    type Error = String;

    fn try_from(w: SampleScoreWire) -> Result<Self, String> {
        let stratum = Stratum::from_key(&w.stratum, w.change_count)
            .ok_or_else(|| format!("unknown stratum key {:?}", w.stratum))?;
        let reference_outcome = w.reference_outcome.unwrap_or_else(|| {
            if w.errors.contains(&ErrorTag::MissingPrediction) {
                ReferenceOutcome::Missing
            } else if w.api_error.is_some() {
                ReferenceOutcome::RequestFailed
            } else {
                ReferenceOutcome::Scored
            }
        });
        Ok(SampleScore {
            sample_id: w.sample_id,
            stratum,
            change_count: w.change_count,
            args_count: w.args_count,
            fm_ref: w.fm_ref,
            fm_strict: w.fm_strict,
            cm_strict: w.cm_strict,
            cm_ref: w.cm_ref,
            reference_outcome,
            reference_crash: w.reference_crash,
            field: w.field,
            errors: w.errors,
            parse_failure: w.parse_failure,
            problems: w.problems,
            repairs: w.repairs,
            api_error: w.api_error,
            usage: w.usage,
        })
    }
}

impl PreparedSample {
    /// Precomputes truth diffs, feedback normal forms and the stratum of a transition.
    pub fn new(transition: Transition) -> Self {
        let computed_change_count =
            reference_change_count(&transition.config_before, &transition.config_after);
        let change_count = transition
            .stored_change_count
            .unwrap_or(computed_change_count);
        let success = observation_success(&transition.observation);
        let args_count = transition.action.arguments.len();
        let stratum = Stratum::classify(success, change_count, args_count);
        let fine = fine_diff(&transition.config_before, &transition.config_after);
        let truth_pointers = fine.iter().map(|c| c.pointer.clone()).collect();
        let truth_facts = facts(&fine)
            .into_iter()
            .map(|(p, f)| (p, owned_fact(&f)))
            .collect();
        let truth_feedback_strict = strict_feedback(&transition.observation);
        PreparedSample {
            transition,
            success,
            change_count,
            computed_change_count,
            args_count,
            stratum,
            truth_pointers,
            truth_facts,
            reference: None,
            truth_feedback_strict,
        }
    }

    /// The transition.
    pub fn transition(&self) -> &Transition {
        &self.transition
    }

    /// The reference lane's truth, prepared on first use.
    fn reference_truth(&mut self) -> &mut ReferenceTruth {
        let t = &self.transition;
        self.reference.get_or_insert_with(|| {
            ReferenceTruth::new(&t.config_before, &t.config_after, &t.observation)
        })
    }

    /// Scores one prediction.
    ///
    /// Takes `&mut self` because the predicted delta is applied to the stored `config_before`
    /// in place and undone before returning (see [`crate::apply`]); the sample is unchanged
    /// afterwards.
    pub fn score(&mut self, prediction: &Prediction, usage: Option<Usage>) -> SampleScore {
        let mut score = self.blank(usage);
        let reference = match prediction {
            Prediction::Raw(text) => self.reference_truth().score_text(text),
            Prediction::Parsed(value) => self
                .reference_truth()
                .score_parsed(&PyValue::from_json(value)),
            Prediction::ApiError(_) => ReferenceVerdict {
                outcome: ReferenceOutcome::RequestFailed,
                fm: false,
                cm: false,
                crash: None,
            },
            Prediction::Missing => ReferenceVerdict {
                outcome: ReferenceOutcome::Missing,
                fm: false,
                cm: false,
                crash: None,
            },
        };
        score.fm_ref = reference.fm;
        score.cm_ref = reference.cm;
        score.reference_outcome = reference.outcome;
        score.reference_crash = reference.crash;
        if reference.outcome == ReferenceOutcome::Crash {
            score.errors.push(ErrorTag::ReferenceCrash);
        }
        self.score_strict(prediction, score)
    }

    /// The strict lane: envsim's extraction, FM-strict, CM-strict, field scores, error tags.
    fn score_strict(&mut self, prediction: &Prediction, mut score: SampleScore) -> SampleScore {
        let (object, repairs) = match prediction {
            Prediction::Missing => {
                score.errors.push(ErrorTag::MissingPrediction);
                score.errors.sort();
                return score;
            }
            Prediction::ApiError(message) => {
                score.errors.push(ErrorTag::ApiError);
                score.api_error = Some(message.clone());
                score.errors.sort();
                return score;
            }
            Prediction::Raw(text) => match extract_object(text, &OUTPUT_KEYS) {
                Ok(found) => (
                    Value::Object(found.object),
                    found.repairs.iter().map(|r| r.code().to_owned()).collect(),
                ),
                Err(failure) => {
                    return self.parse_failed(score, failure.code(), failure.to_string())
                }
            },
            Prediction::Parsed(value @ Value::Object(_)) => (value.clone(), Vec::new()),
            Prediction::Parsed(other) => {
                let message = format!(
                    "the prediction must be an object, found {}",
                    crate::path::type_name(other)
                );
                return self.parse_failed(score, "not_an_object", message);
            }
        };
        score.repairs = repairs;
        let feedback = object.get("feedback").unwrap_or(&Value::Null);
        score.fm_strict = strict_feedback(feedback) == self.truth_feedback_strict;
        let empty = Value::Array(Vec::new());
        let changes = object.get("config_changes").unwrap_or(&empty);

        let (cm_strict, cmp, problems) = self.strict_part(changes);
        score.cm_strict = cm_strict;
        score.problems = problems;
        score.field = FieldScore::new(self.truth_facts.len(), cmp.predicted, cmp.correct);

        if score.problems.iter().any(Problem::is_error) {
            score.errors.push(ErrorTag::MalformedDelta);
        }
        if cmp.missed > 0 {
            score.errors.push(ErrorTag::Missed);
        }
        if cmp.spurious > 0 {
            score.errors.push(ErrorTag::Spurious);
        }
        if cmp.wrong_value > 0 {
            score.errors.push(ErrorTag::WrongValue);
        }
        if !score.fm_strict {
            score.errors.push(ErrorTag::WrongFeedback);
        }
        score.errors.sort();
        score
    }

    fn blank(&self, usage: Option<Usage>) -> SampleScore {
        SampleScore {
            sample_id: self.transition.id.clone(),
            stratum: self.stratum,
            change_count: self.change_count,
            args_count: self.args_count,
            fm_ref: false,
            fm_strict: false,
            cm_strict: false,
            cm_ref: false,
            reference_outcome: ReferenceOutcome::Scored,
            reference_crash: None,
            field: FieldScore {
                truth: self.truth_facts.len(),
                ..FieldScore::default()
            },
            errors: Vec::new(),
            parse_failure: None,
            problems: Vec::new(),
            repairs: Vec::new(),
            api_error: None,
            usage,
        }
    }

    fn parse_failed(
        &self,
        mut score: SampleScore,
        code: &'static str,
        message: String,
    ) -> SampleScore {
        score.errors.push(ErrorTag::ParseFailure);
        score.errors.sort();
        score.parse_failure = Some(ParseFailureInfo {
            code: code.to_owned(),
            message,
        });
        score
    }

    /// Applies the strict delta in place, compares, collects predicted facts, undoes.
    fn strict_part(&mut self, changes: &Value) -> (bool, FactComparison, Vec<Problem>) {
        let delta = Delta::from_value(changes);
        let state = &mut self.transition.config_before;
        let applied = apply_in_place(state, &delta);
        let written = minimal_roots(applied.undo.touched());
        // Outside `dirty`, the predicted state equals `before` (nothing written there) and the
        // true state equals `before` (no true change there), so comparing the dirty roots
        // decides equality of the whole states.
        let mut dirty = written.clone();
        dirty.extend(self.truth_pointers.iter().cloned());
        let dirty = minimal_roots(dirty);
        let after = &self.transition.config_after;
        let states_equal = dirty.iter().all(|root| root.get(state) == root.get(after));
        let predicted: Vec<(JsonPointer, Option<Value>)> = written
            .iter()
            .map(|root| (root.clone(), root.get(state).cloned()))
            .collect();
        let clean = applied.is_clean();
        let problems = applied.problems;
        applied.undo.undo(state);

        let before = &self.transition.config_before;
        let mut changes: Vec<Change<'_>> = Vec::new();
        for (root, value) in &predicted {
            match (root.get(before), value) {
                (Some(old), Some(new)) => fine_diff_at(old, new, &mut root.clone(), &mut changes),
                (None, Some(new)) => changes.push(Change {
                    pointer: root.clone(),
                    kind: ChangeKind::Added,
                    before: None,
                    after: Some(new),
                }),
                (Some(old), None) => changes.push(Change {
                    pointer: root.clone(),
                    kind: ChangeKind::Removed,
                    before: Some(old),
                    after: None,
                }),
                (None, None) => {}
            }
        }
        let comparison = compare_facts(&self.truth_facts, &facts(&changes));
        (clean && states_equal, comparison, problems)
    }
}

fn owned_fact(fact: &Fact<'_>) -> Option<Value> {
    match fact {
        Fact::Set(v) => Some((*v).clone()),
        Fact::Removed => None,
    }
}

#[derive(Debug, Default)]
struct FactComparison {
    predicted: usize,
    correct: usize,
    missed: usize,
    spurious: usize,
    wrong_value: usize,
}

/// Merge-joins two fact lists sorted by pointer.
fn compare_facts(
    truth: &[(JsonPointer, Option<Value>)],
    predicted: &[(JsonPointer, Fact<'_>)],
) -> FactComparison {
    let mut out = FactComparison {
        predicted: predicted.len(),
        ..FactComparison::default()
    };
    let (mut t, mut p) = (0, 0);
    while t < truth.len() || p < predicted.len() {
        match (truth.get(t), predicted.get(p)) {
            (Some((tp, tv)), Some((pp, pv))) if tp == pp => {
                let same = match (tv, pv) {
                    (Some(a), Fact::Set(b)) => a == *b,
                    (None, Fact::Removed) => true,
                    _ => false,
                };
                if same {
                    out.correct += 1;
                } else {
                    out.wrong_value += 1;
                }
                t += 1;
                p += 1;
            }
            (Some((tp, _)), Some((pp, _))) if tp < pp => {
                out.missed += 1;
                t += 1;
            }
            (Some(_), None) => {
                out.missed += 1;
                t += 1;
            }
            _ => {
                out.spurious += 1;
                p += 1;
            }
        }
    }
    out
}

/// The reference stratum of a transition, without the rest of [`PreparedSample::new`].
pub fn stratum_of(transition: &Transition) -> Stratum {
    let change_count = transition.stored_change_count.unwrap_or_else(|| {
        reference_change_count(&transition.config_before, &transition.config_after)
    });
    Stratum::classify(
        observation_success(&transition.observation),
        change_count,
        transition.action.arguments.len(),
    )
}

/// Reads `success` from an observation the way the reference's sampler and evaluator do: the
/// observation normalised by `parse_to_obj` must be a dict whose `success` is `True` or `False`
/// itself (`success is True`), not merely truthy.
pub fn observation_success(observation: &Value) -> Option<bool> {
    match parse_to_obj(&PyValue::from_json(observation)) {
        PyValue::Dict(dict) => match dict.get_str("success") {
            Some(PyValue::Bool(b)) => Some(*b),
            _ => None,
        },
        _ => None,
    }
}

/// The strict normal form of a feedback: a string is read whole as JSON, else as a Python
/// literal, else kept as trimmed text; any other value is used as it is.
pub fn strict_feedback(feedback: &Value) -> Value {
    match feedback {
        Value::String(text) => {
            let trimmed = text.trim();
            parse_literal(trimmed, Dialect::Json)
                .or_else(|_| parse_literal(trimmed, Dialect::Python))
                .unwrap_or_else(|_| Value::String(trimmed.to_owned()))
        }
        other => other.clone(),
    }
}

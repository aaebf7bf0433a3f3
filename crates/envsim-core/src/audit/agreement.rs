//! Cross-consistency (CCR): K simulations of the same step (several models, or several samples
//! of one) — do they agree, and does their agreement say when they are right? An answer is an
//! observation and a state change (a map from changed location to new value); answers agree
//! exactly when both are equal, and field by field on each changed location.
//!
//! On a benchmark with truth, agreement is a confidence score: [`auroc`] says how well it ranks
//! right answers above wrong ones, [`reliability`] how often answers with each agreement level
//! are right — the "externally verifiable uncertainty" the SIMCON-DATA proposal asks for.

use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// One simulator's answer for one step.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The observation (normalised by the caller: parsed, whitespace-trimmed text).
    pub observation: Value,
    /// The state change: changed location (JSON pointer) → new value (`null` for a removal is
    /// written as [`removed`]).
    pub changes: BTreeMap<String, Value>,
}

/// The value a removed location gets in [`Answer::changes`].
pub fn removed() -> Value {
    serde_json::json!({"$removed": true})
}

impl Answer {
    /// The answer whose change is the difference between two states.
    pub fn from_states(observation: Value, before: &Value, after: &Value) -> Answer {
        let changes = crate::diff::fine_diff(before, after)
            .into_iter()
            .map(|c| {
                (
                    c.pointer.to_string(),
                    c.after.cloned().unwrap_or_else(removed),
                )
            })
            .collect();
        Answer {
            observation,
            changes,
        }
    }
}

/// How K answers to one step agree. A missing answer (`None`: no prediction, or one that could
/// not be read) agrees with nothing.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Agreement {
    /// Answers given (K).
    pub k: usize,
    /// Index of an answer of the largest group of identical answers (the first such), when
    /// any answer was given.
    pub majority: Option<usize>,
    /// Share of the K answers identical to the majority answer (observation and change).
    pub exact: f64,
    /// Share agreeing with the most common observation.
    pub observation: f64,
    /// Share agreeing with the most common change.
    pub change: f64,
    /// Mean, over every location any answer changes, of the share agreeing with the most
    /// common value there (not changing it is a value); 1 when no answer changes anything.
    pub field: f64,
    /// Per answer: the share of the other K − 1 answers identical to it (its confidence).
    pub with_others: Vec<f64>,
}

/// The size of the largest group of equal items and the index of its first member.
fn largest_group<T: PartialEq>(items: &[Option<T>]) -> (usize, Option<usize>) {
    let mut best = (0, None);
    for (i, item) in items.iter().enumerate() {
        let Some(item) = item else { continue };
        let n = items.iter().filter(|o| o.as_ref() == Some(item)).count();
        if n > best.0 {
            best = (n, Some(i));
        }
    }
    best
}

/// The agreement of `answers`.
pub fn agreement(answers: &[Option<Answer>]) -> Agreement {
    let k = answers.len();
    let share = |n: usize| if k == 0 { 0.0 } else { n as f64 / k as f64 };
    let (exact, majority) = largest_group(answers);
    let observations: Vec<Option<&Value>> = answers
        .iter()
        .map(|a| a.as_ref().map(|a| &a.observation))
        .collect();
    let changes: Vec<Option<&BTreeMap<String, Value>>> = answers
        .iter()
        .map(|a| a.as_ref().map(|a| &a.changes))
        .collect();
    let locations: BTreeSet<&String> = answers
        .iter()
        .flatten()
        .flat_map(|a| a.changes.keys())
        .collect();
    let field = if locations.is_empty() {
        1.0
    } else {
        locations
            .iter()
            .map(|at| {
                let values: Vec<Option<Option<&Value>>> = answers
                    .iter()
                    .map(|a| a.as_ref().map(|a| a.changes.get(*at)))
                    .collect();
                share(largest_group(&values).0)
            })
            .sum::<f64>()
            / locations.len() as f64
    };
    let with_others = answers
        .iter()
        .enumerate()
        .map(|(i, a)| match a {
            None => 0.0,
            Some(a) if k > 1 => {
                answers
                    .iter()
                    .enumerate()
                    .filter(|(j, b)| *j != i && b.as_ref() == Some(a))
                    .count() as f64
                    / (k - 1) as f64
            }
            Some(_) => 1.0,
        })
        .collect();
    Agreement {
        k,
        majority,
        exact: share(exact),
        observation: share(largest_group(&observations).0),
        change: share(largest_group(&changes).0),
        field,
        with_others,
    }
}

/// The area under the ROC curve of `score` as a predictor of `correct`: the probability that a
/// right answer scores above a wrong one (ties count half). `None` without both kinds.
pub fn auroc(scored: &[(f64, bool)]) -> Option<f64> {
    let mut sorted: Vec<(f64, bool)> = scored.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let positives = sorted.iter().filter(|(_, c)| *c).count();
    let negatives = sorted.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    // Mann–Whitney: sum of the positives' mid-ranks.
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j < sorted.len() && sorted[j].0 == sorted[i].0 {
            j += 1;
        }
        let mid_rank = (i + j + 1) as f64 / 2.0;
        rank_sum += mid_rank * sorted[i..j].iter().filter(|(_, c)| *c).count() as f64;
        i = j;
    }
    let p = positives as f64;
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * negatives as f64))
}

/// One row of a reliability table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReliabilityRow {
    /// The agreement level.
    pub agreement: f64,
    /// Answers at that level.
    pub answers: usize,
    /// Of those, right.
    pub correct: usize,
}

/// Answers grouped by agreement level (each distinct value; with K answers per step they are
/// multiples of 1/(K − 1)), with how many of each are right.
pub fn reliability(scored: &[(f64, bool)]) -> Vec<ReliabilityRow> {
    let mut rows: BTreeMap<u64, ReliabilityRow> = BTreeMap::new();
    for (score, correct) in scored {
        // Levels are j/(K − 1): rounding to 1e-9 groups equal ones.
        let key = (score * 1e9).round() as u64;
        let row = rows.entry(key).or_insert(ReliabilityRow {
            agreement: *score,
            answers: 0,
            correct: 0,
        });
        row.answers += 1;
        row.correct += usize::from(*correct);
    }
    rows.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(obs: Value, changes: &[(&str, Value)]) -> Option<Answer> {
        Some(Answer {
            observation: obs,
            changes: changes
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        })
    }

    #[test]
    fn agreement_of_three_answers() {
        let a = answer(json!("ok"), &[("/o/status", json!("paid"))]);
        let b = answer(
            json!("ok"),
            &[("/o/status", json!("paid")), ("/o/n", json!(2))],
        );
        let answers = [a.clone(), a.clone(), b, None];
        let g = agreement(&answers);
        assert_eq!(g.k, 4);
        assert_eq!(g.majority, Some(0));
        assert_eq!(g.exact, 0.5);
        assert_eq!(g.observation, 0.75);
        assert_eq!(g.change, 0.5);
        // /o/status: 3 of 4 say paid; /o/n: 2 of 4 leave it (1 says 2, the missing one says
        // nothing readable).
        assert_eq!(g.field, (0.75 + 0.5) / 2.0);
        assert_eq!(g.with_others, [1.0 / 3.0, 1.0 / 3.0, 0.0, 0.0]);
        let states = Answer::from_states(
            json!("ok"),
            &json!({"o": {"status": "new", "tmp": 1}}),
            &json!({"o": {"status": "paid"}}),
        );
        assert_eq!(
            states.changes,
            BTreeMap::from([
                ("/o/status".to_owned(), json!("paid")),
                ("/o/tmp".to_owned(), removed())
            ])
        );
    }

    #[test]
    fn auroc_and_reliability() {
        assert_eq!(auroc(&[(1.0, true), (0.0, false)]), Some(1.0));
        assert_eq!(auroc(&[(0.0, true), (1.0, false)]), Some(0.0));
        assert_eq!(auroc(&[(0.5, true), (0.5, false)]), Some(0.5));
        assert_eq!(auroc(&[(0.5, true)]), None);
        // 3 right and 1 wrong at 1.0; 1 right and 2 wrong at 0.5.
        let scored = [
            (1.0, true),
            (1.0, true),
            (1.0, true),
            (1.0, false),
            (0.5, true),
            (0.5, false),
            (0.5, false),
        ];
        // Pairs (right, wrong): 4 right × 3 wrong = 12. Right at 1.0 vs wrong at 0.5: 3 × 2 = 6
        // wins; right at 1.0 vs wrong at 1.0: 3 ties; right at 0.5 vs wrong at 0.5: 2 ties;
        // right at 0.5 vs wrong at 1.0: 1 loss. (6 + 2.5) / 12.
        assert_eq!(auroc(&scored), Some(8.5 / 12.0));
        assert_eq!(
            reliability(&scored),
            [
                ReliabilityRow {
                    agreement: 0.5,
                    answers: 3,
                    correct: 1
                },
                ReliabilityRow {
                    agreement: 1.0,
                    answers: 4,
                    correct: 3
                },
            ]
        );
    }
}

//! Scoring the audit's violations against the labels of the set.
//!
//! **Found.** A planted fault is found when the audit flagged its trajectory at the planted
//! step or at a later step of the same trajectory, by any check. At or after, because a fault
//! in one answer can be caught where a later, true answer contradicts it (a stale value is
//! taken in as known, and the next true read of the record conflicts with it; a vanished
//! record is missed where a later call succeeds on it), and that is a detection an auditor
//! would act on. Not before: every answer before the planted step is true, so a flag there has
//! nothing to do with the fault (it is a false flag, which the clean trajectories measure).
//! The stricter count, flagged at the planted step itself, is reported beside it
//! (`found_at_step`), so the two can be told apart.

use super::{FaultKind, Label, WorkflowError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One violation of the audit's `--out` file, as far as the score needs it. The audit writes
/// the record's id (`record`: the transcript's `id`), its line in the audited file, the step
/// (0-based call index) and the check (`kind`); other fields are ignored.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Flag {
    /// The id of the audited record.
    #[serde(default)]
    pub record: Option<String>,
    /// Its line in the audited file.
    #[serde(default)]
    pub line: Option<usize>,
    /// The flagged step.
    pub step: usize,
    /// The check that flagged it.
    pub kind: String,
    /// Where the violation is in the violations file (1-based line), for messages.
    #[serde(skip)]
    pub at: usize,
}

/// The counts of one fault kind (or of all of them).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KindScore {
    /// Faults planted.
    pub planted: usize,
    /// Found: flagged at the planted step or later in the same trajectory.
    pub found: usize,
    /// Flagged at the planted step itself.
    pub found_at_step: usize,
    /// `found / planted` (`None` when nothing was planted).
    pub recall: Option<f64>,
    /// `found_at_step / planted`.
    pub recall_at_step: Option<f64>,
    /// The checks that flagged the found faults (at or after the step), each counted once per
    /// fault.
    pub checks: BTreeMap<String, usize>,
}

impl KindScore {
    fn finish(&mut self) {
        let share = |n: usize| (self.planted > 0).then(|| n as f64 / self.planted as f64);
        self.recall = share(self.found);
        self.recall_at_step = share(self.found_at_step);
    }
}

/// The clean trajectories: how many the audit flagged at all.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CleanScore {
    /// Clean trajectories.
    pub total: usize,
    /// Flagged by any check.
    pub flagged: usize,
    /// `flagged / total` (`None` when there are none).
    pub rate: Option<f64>,
    /// The checks that flagged them, each counted once per trajectory.
    pub checks: BTreeMap<String, usize>,
}

/// The score of a labelled set.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Score {
    /// Trajectories labelled.
    pub trajectories: usize,
    /// Per kind, every kind listed (planted 0 where none was).
    pub per_kind: BTreeMap<FaultKind, KindScore>,
    /// All kinds together.
    pub overall: KindScore,
    /// The clean trajectories.
    pub clean: CleanScore,
}

/// Reads JSON Lines of `T`, each error naming `source` and the line.
fn read_lines<T: serde::de::DeserializeOwned>(
    text: &str,
    source: &str,
) -> Result<Vec<(usize, T)>, WorkflowError> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line)
                .map(|v| (i + 1, v))
                .map_err(|e| WorkflowError::Input {
                    file: source.to_owned(),
                    line: i + 1,
                    message: e.to_string(),
                })
        })
        .collect()
}

/// The labels written by `envsim audit workflows`.
pub fn read_labels(text: &str, source: &str) -> Result<Vec<Label>, WorkflowError> {
    let labels: Vec<Label> = read_lines(text, source)?
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    if labels.is_empty() {
        return Err(WorkflowError::Input {
            file: source.to_owned(),
            line: 1,
            message: "no labels".into(),
        });
    }
    Ok(labels)
}

/// The violations written by `envsim audit FILE --out`.
pub fn read_flags(text: &str, source: &str) -> Result<Vec<Flag>, WorkflowError> {
    Ok(read_lines::<Flag>(text, source)?
        .into_iter()
        .map(|(at, mut flag)| {
            flag.at = at;
            flag
        })
        .collect())
}

/// Scores `flags` (the audit's violations on the set's transcripts) against `labels`. A
/// violation is joined to its trajectory by the record id, else by the line; one that joins
/// none is an error (the violations come from another file), named by its line in `source`.
pub fn score(labels: &[Label], flags: &[Flag], source: &str) -> Result<Score, WorkflowError> {
    let by_id: HashMap<&str, usize> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| (l.trajectory.as_str(), i))
        .collect();
    let by_line: HashMap<usize, usize> = labels
        .iter()
        .enumerate()
        .map(|(i, l)| (l.line, i))
        .collect();
    let mut flagged: Vec<Vec<&Flag>> = vec![Vec::new(); labels.len()];
    for flag in flags {
        let index = match (&flag.record, flag.line) {
            (Some(id), _) => by_id.get(id.as_str()).copied(),
            (None, Some(line)) => by_line.get(&line).copied(),
            (None, None) => None,
        };
        let Some(index) = index else {
            return Err(WorkflowError::Input {
                file: source.to_owned(),
                line: flag.at,
                message: format!(
                    "the violation names record {:?} at line {:?}, which no label names: score the violations of the transcripts these labels were written with",
                    flag.record, flag.line
                ),
            });
        };
        if flag.step >= labels[index].steps {
            return Err(WorkflowError::Input {
                file: source.to_owned(),
                line: flag.at,
                message: format!(
                    "step {} of {}, which has {} steps",
                    flag.step, labels[index].trajectory, labels[index].steps
                ),
            });
        }
        flagged[index].push(flag);
    }
    let mut out = Score {
        trajectories: labels.len(),
        per_kind: FaultKind::ALL
            .iter()
            .map(|k| (*k, KindScore::default()))
            .collect(),
        ..Score::default()
    };
    for (label, flags) in labels.iter().zip(&flagged) {
        match &label.fault {
            Some(fault) => {
                let after: Vec<&&Flag> = flags.iter().filter(|f| f.step >= fault.step).collect();
                let checks: BTreeSet<&str> = after.iter().map(|f| f.kind.as_str()).collect();
                for entry in [
                    out.per_kind.entry(fault.kind).or_default(),
                    &mut out.overall,
                ] {
                    entry.planted += 1;
                    if !after.is_empty() {
                        entry.found += 1;
                    }
                    if after.iter().any(|f| f.step == fault.step) {
                        entry.found_at_step += 1;
                    }
                    for check in &checks {
                        *entry.checks.entry((*check).to_owned()).or_default() += 1;
                    }
                }
            }
            None => {
                out.clean.total += 1;
                if !flags.is_empty() {
                    out.clean.flagged += 1;
                }
                let checks: BTreeSet<&str> = flags.iter().map(|f| f.kind.as_str()).collect();
                for check in checks {
                    *out.clean.checks.entry(check.to_owned()).or_default() += 1;
                }
            }
        }
    }
    for entry in out.per_kind.values_mut() {
        entry.finish();
    }
    out.overall.finish();
    out.clean.rate =
        (out.clean.total > 0).then(|| out.clean.flagged as f64 / out.clean.total as f64);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_workflows::{AnswerStyle, LabelledFault};

    fn label(id: &str, line: usize, fault: Option<(FaultKind, usize)>) -> Label {
        Label {
            trajectory: id.into(),
            line,
            env: "e".into(),
            state: "00.json".into(),
            style: AnswerStyle::Json,
            steps: 6,
            fault: fault.map(|(kind, step)| LabelledFault {
                kind,
                step,
                tool: "t".into(),
                resource: None,
                detail: String::new(),
            }),
        }
    }

    fn flags(text: &str) -> Vec<Flag> {
        read_flags(text, "v.jsonl").unwrap()
    }

    #[test]
    fn found_means_flagged_at_the_step_or_later_and_clean_flags_are_counted() {
        let labels = [
            label("a", 1, Some((FaultKind::StaleRead, 3))),
            label("b", 2, Some((FaultKind::StaleRead, 2))),
            label("c", 3, Some((FaultKind::StaleRead, 4))),
            label("d", 4, Some((FaultKind::HappyPathFlip, 1))),
            label("e", 5, None),
            label("f", 6, None),
            label("g", 7, None),
        ];
        let v = flags(concat!(
            // a: at its step, and again later by another check.
            r#"{"record": "a", "line": 1, "step": 3, "kind": "stale_read", "trajectory": "line 1 a"}"#,
            "\n",
            r#"{"record": "a", "line": 1, "step": 5, "kind": "phantom_id"}"#,
            "\n",
            // b: only later.
            r#"{"record": "b", "line": 2, "step": 4, "kind": "stale_read"}"#,
            "\n",
            "\n",
            // c: only before its step (not found).
            r#"{"record": "c", "line": 3, "step": 1, "kind": "response_shape"}"#,
            "\n",
            // e: a clean one flagged twice; joined by its line (no record id).
            r#"{"line": 5, "step": 0, "kind": "response_shape"}"#,
            "\n",
            r#"{"line": 5, "step": 2, "kind": "response_shape"}"#,
            "\n",
        ));
        let s = score(&labels, &v, "v.jsonl").unwrap();
        let stale = &s.per_kind[&FaultKind::StaleRead];
        assert_eq!((stale.planted, stale.found, stale.found_at_step), (3, 2, 1));
        assert_eq!(stale.recall, Some(2.0 / 3.0));
        assert_eq!(stale.recall_at_step, Some(1.0 / 3.0));
        assert_eq!(
            stale.checks,
            BTreeMap::from([("phantom_id".to_owned(), 1), ("stale_read".to_owned(), 2)])
        );
        let flip = &s.per_kind[&FaultKind::HappyPathFlip];
        assert_eq!((flip.planted, flip.found, flip.recall), (1, 0, Some(0.0)));
        assert_eq!(s.per_kind[&FaultKind::SchemaDrift].recall, None);
        assert_eq!(
            (s.overall.planted, s.overall.found, s.overall.found_at_step),
            (4, 2, 1)
        );
        assert_eq!(s.overall.recall, Some(0.5));
        assert_eq!((s.clean.total, s.clean.flagged), (3, 1));
        assert_eq!(s.clean.rate, Some(1.0 / 3.0));
        assert_eq!(
            s.clean.checks,
            BTreeMap::from([("response_shape".to_owned(), 1)])
        );
        assert_eq!(s.trajectories, 7);
        // The JSON names the kinds.
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["per_kind"]["stale_read"]["found"], 2);
    }

    #[test]
    fn violations_of_another_file_and_bad_lines_are_refused_with_their_place() {
        let labels = [label("a", 1, None)];
        let v = flags(concat!(
            r#"{"record": "a", "step": 0, "kind": "x"}"#,
            "\n",
            r#"{"record": "zz", "line": 9, "step": 0, "kind": "x"}"#,
            "\n"
        ));
        assert_eq!(
            score(&labels, &v, "v.jsonl").unwrap_err().to_string(),
            "v.jsonl: line 2: the violation names record Some(\"zz\") at line Some(9), which no label names: score the violations of the transcripts these labels were written with"
        );
        let v = flags(r#"{"record": "a", "step": 6, "kind": "x"}"#);
        assert_eq!(
            score(&labels, &v, "v.jsonl").unwrap_err().to_string(),
            "v.jsonl: line 1: step 6 of a, which has 6 steps"
        );
        assert_eq!(
            read_flags("{\"record\": \"a\", \"kind\": \"x\"}\n", "v.jsonl")
                .unwrap_err()
                .to_string(),
            "v.jsonl: line 1: missing field `step` at line 1 column 28"
        );
        assert_eq!(
            read_labels("\n", "l.jsonl").unwrap_err().to_string(),
            "l.jsonl: line 1: no labels"
        );
        assert!(read_labels("{\"trajectory\": 1}", "l.jsonl")
            .unwrap_err()
            .to_string()
            .starts_with("l.jsonl: line 1: invalid type: integer `1`, expected a string"));
    }
}

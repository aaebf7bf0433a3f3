//! Curation as one workflow (`envsim curate` parses its arguments, calls [`curate`] and writes
//! what comes back): synthesis records are read ([`Records`]), gated, sampled or selected on
//! the consistency–diversity Pareto front ([`envsim_core::curate`] holds the pure parts), mixed
//! into batches by consistency tier, staged as a strictness curriculum, rendered in the
//! training formats of [`crate::export`], and described by a typed [`Datasheet`].
//!
//! Calls an error-path task made to fail (a record's `deliberate_errors`) are counted, and by
//! [`ErrorPaths`] kept, dropped with their trajectories, or kept with their assistant turns
//! weighted 0 in the OpenAI chat lines (the one format with per-turn weights).

use crate::export;
use envsim_core::curate::{self, Diversity, Gate, Item, Tier, Weights};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// How trajectories are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Selection {
    /// Every trajectory that passes the gate.
    Gate,
    /// `count` drawn among those passing the gate, each with probability ∝
    /// consistency^power.
    Weighted,
    /// `count` from the consistency–diversity Pareto front of the finished trajectories
    /// without uncertain steps whose consistency reaches `floor` (the gate's minimums are
    /// reported against, not applied).
    Pareto,
}

/// A training format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    /// OpenAI chat fine-tuning lines (`openai.jsonl`).
    Openai,
    /// LLaMA-Factory ShareGPT function calling (`sharegpt.jsonl` and `dataset_info.json`).
    Sharegpt,
    /// Hermes function calling (`hermes.jsonl`).
    Hermes,
    /// RL episodes with final-state checkers (`rl_episodes.jsonl`).
    Rl,
}

/// What becomes of the calls an error-path task made to fail.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorPaths {
    /// Kept as training targets (counted in the datasheet).
    #[default]
    Keep,
    /// Their trajectories are dropped (a gate reason).
    Drop,
    /// Kept, with the assistant turns that made them weighted 0 in the OpenAI chat lines
    /// (ShareGPT and Hermes have no per-turn weight and carry them as they are).
    Mask,
}

/// Why curation cannot be done.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CurationError {
    /// A record that does not read, at its place (`FILE line N`).
    #[error("{at}: {message}")]
    Record {
        /// Where.
        at: String,
        /// What is wrong.
        message: String,
    },
    /// Settings that contradict each other or are out of range.
    #[error("{0}")]
    Settings(String),
    /// Nothing to curate.
    #[error("the inputs hold no trajectories")]
    NoRecords,
    /// The gate or the selection left nothing.
    #[error("no trajectory was selected ({read} read; the gate dropped {dropped}: {reasons})")]
    NothingSelected {
        /// Trajectories read.
        read: usize,
        /// Dropped by the gate.
        dropped: usize,
        /// The gate's reasons with their counts.
        reasons: String,
    },
    /// Batches were asked for and none can be filled.
    #[error("no batch of {size} can be filled in the --mix ratios from the {selected} selected trajectories (per tier: {per_tier}); change --mix or --batch-size")]
    NoBatch {
        /// The batch size.
        size: usize,
        /// Trajectories selected.
        selected: usize,
        /// Selected trajectories per tier.
        per_tier: String,
    },
}

/// Synthesis records and what curation sees of each, in reading order.
#[derive(Clone, Debug, Default)]
pub struct Records {
    /// The records as read.
    pub records: Vec<Value>,
    /// What curation sees of each (same order).
    pub items: Vec<Item>,
    /// Where each id was first read.
    places: BTreeMap<String, String>,
}

impl Records {
    /// Reads the JSON Lines `text` of `source` (a file name, for the errors' places); an id
    /// already read (here or in an earlier source) is refused.
    pub fn add(&mut self, source: &str, text: &str) -> Result<(), CurationError> {
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = format!("{source} line {}", i + 1);
            let fail = |message: String| CurationError::Record {
                at: at.clone(),
                message,
            };
            let record: Value =
                serde_json::from_str(line).map_err(|e| fail(format!("not JSON ({e})")))?;
            let item = Item::from_record(&record).map_err(|e| fail(e.to_string()))?;
            if let Some(first) = self.places.get(&item.id) {
                return Err(fail(format!(
                    "the id {:?} was already used at {first}",
                    item.id
                )));
            }
            self.places.insert(item.id.clone(), at.clone());
            self.records.push(record);
            self.items.push(item);
        }
        Ok(())
    }
}

/// The settings of a curation (all of them go into the datasheet and its fingerprint).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The input files, as named to the user.
    pub inputs: Vec<String>,
    /// How trajectories are chosen.
    pub select: Selection,
    /// How many to choose (weighted and Pareto).
    pub count: Option<usize>,
    /// Least consistency of a trajectory the Pareto selection ranks.
    pub floor: f64,
    /// Minimums per score.
    pub gate: Gate,
    /// Keep trajectories that did not end with the agent's answer.
    pub keep_unfinished: bool,
    /// Weights of the scores in the consistency.
    pub weights: Weights,
    /// Exponent of the consistency in weighted sampling.
    pub power: f64,
    /// Seed of sampling and batching.
    pub seed: u64,
    /// Consistency tiers and their shares of a batch.
    pub mix: Vec<Tier>,
    /// Training batches of this size.
    pub batch_size: Option<usize>,
    /// Minimum consistency per curriculum stage, loose to strict.
    pub curriculum: Vec<f64>,
    /// The formats written.
    pub formats: Vec<ExportFormat>,
    /// What becomes of calls an error-path task made to fail.
    pub error_paths: ErrorPaths,
}

impl Settings {
    /// Refuses settings that cannot be honoured, naming the setting.
    pub fn check(&self) -> Result<(), CurationError> {
        let fail = |m: String| Err(CurationError::Settings(m));
        for (k, t) in self.curriculum.iter().enumerate() {
            if !(0.0..=1.0).contains(t) {
                return fail(format!(
                    "--curriculum: stage {} minimum {t} is not between 0 and 1",
                    k + 1
                ));
            }
        }
        if matches!(self.select, Selection::Weighted | Selection::Pareto) && self.count.is_none() {
            let name = match self.select {
                Selection::Weighted => "weighted",
                _ => "pareto",
            };
            return fail(format!("--select {name} needs --count"));
        }
        if self.batch_size == Some(0) {
            return fail("--batch-size must be at least 1".into());
        }
        if self.mix.is_empty() {
            return fail("--mix names no tier".into());
        }
        Ok(())
    }
}

/// The histograms (tenths of [0, 1]) of a set's scores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoreHistograms {
    /// SCS.
    pub scs: [usize; 10],
    /// SpecCS.
    pub spec_cs: [usize; 10],
    /// DCS.
    pub dcs: [usize; 10],
    /// Consistency under the settings' weights.
    pub consistency: [usize; 10],
    /// Trajectories whose final state equals the executor's replay.
    pub final_state_equal: usize,
    /// Trajectories with the truth (code mode).
    pub with_truth: usize,
}

/// How many trajectories were read, passed and chosen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    /// Read.
    pub read: usize,
    /// Passing the gate.
    pub passing_gate: usize,
    /// Selected.
    pub selected: usize,
    /// Selected per task family.
    pub selected_by_family: BTreeMap<String, usize>,
    /// Selected per environment.
    pub selected_by_env: BTreeMap<String, usize>,
}

/// What was not taken, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dropped {
    /// Read and not selected.
    pub not_selected: usize,
    /// Per reason, the trajectories the gate drops for it (one may have several).
    pub gate_reasons: BTreeMap<String, usize>,
}

/// What the gate would lose.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateLoss {
    /// Trajectories the gate drops.
    pub trajectories: usize,
    /// Of them, those selected anyway (Pareto selection ranks without the gate).
    pub selected_anyway: Vec<String>,
    /// Features (tools, tool pairs, state transitions) only they have.
    pub features_only_they_have: usize,
    /// Up to 12 of those features.
    pub examples: Vec<String>,
}

/// Scores of what was read and what was selected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoreSets {
    /// Everything read.
    pub read: ScoreHistograms,
    /// The selection.
    pub selected: ScoreHistograms,
}

/// Diversity of what was read, passed and selected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiversitySets {
    /// Everything read.
    pub read: Diversity,
    /// What passes the gate.
    pub passing_gate: Diversity,
    /// The selection.
    pub selected: Diversity,
}

/// Calls an error-path task made to fail, counted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeliberateErrors {
    /// What became of them.
    pub handling: ErrorPaths,
    /// Trajectories read that hold at least one.
    pub trajectories_read: usize,
    /// Such calls in what was read.
    pub calls_read: usize,
    /// Selected trajectories that hold at least one.
    pub trajectories_selected: usize,
    /// Such calls in the selection (weighted 0 in the OpenAI lines when masked).
    pub calls_selected: usize,
}

/// The batches written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchReport {
    /// Trajectories per batch.
    pub size: usize,
    /// Batches filled.
    pub batches: usize,
    /// The tiers mixed.
    pub tiers: Vec<Tier>,
    /// Selected trajectories per tier left out of every batch.
    pub left_over: BTreeMap<String, usize>,
}

/// One curriculum stage written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// Its number, from 1.
    pub stage: usize,
    /// Its minimum consistency.
    pub min_consistency: f64,
    /// Trajectories in it.
    pub trajectories: usize,
}

/// What a curation did, written beside its files (`datasheet.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Datasheet {
    /// SHA-256 of the settings and of every file written (names and contents): equal
    /// fingerprints, equal data.
    pub fingerprint: String,
    /// The settings.
    pub config: Settings,
    /// Counts.
    pub counts: Counts,
    /// What was not taken.
    pub dropped: Dropped,
    /// What the gate would lose.
    pub gate_would_throw_away: GateLoss,
    /// Calls an error-path task made to fail.
    pub deliberate_errors: DeliberateErrors,
    /// Score histograms.
    pub scores: ScoreSets,
    /// Diversity measures.
    pub diversity: DiversitySets,
    /// The batches, when asked for.
    pub batches: Option<BatchReport>,
    /// The curriculum stages, when asked for.
    pub curriculum: Vec<Stage>,
    /// The files written besides the datasheet, by name relative to the output folder.
    pub files: Vec<String>,
}

/// What a curation produced: the files to write (by name relative to the output folder,
/// the datasheet not among them) and the datasheet.
#[derive(Clone, Debug)]
pub struct Curated {
    /// Files by relative name.
    pub files: BTreeMap<String, Vec<u8>>,
    /// What was done.
    pub datasheet: Datasheet,
}

/// The gate reason of a trajectory dropped for its error-path calls.
pub const DROPPED_ERROR_PATHS: &str = "error-path calls (dropped)";

/// Curates `records` under `settings`.
pub fn curate(records: &Records, settings: &Settings) -> Result<Curated, CurationError> {
    settings.check()?;
    let items = &records.items;
    if items.is_empty() {
        return Err(CurationError::NoRecords);
    }
    let weights = &settings.weights;
    // Records without a `finish` are not synthesized conversations: they count as finished; an
    // RL episode ended by its terminal tool (`envsim serve --openenv`) is finished too.
    let finished = |it: &Item| {
        settings.keep_unfinished
            || matches!(it.finish.as_str(), "final_answer" | "terminal_tool" | "")
    };
    let dropping_errors = settings.error_paths == ErrorPaths::Drop;
    let reasons: Vec<Vec<String>> = items
        .iter()
        .map(|it| {
            let mut r = Vec::new();
            if !finished(it) {
                r.push(format!("ended with {}", it.finish));
            }
            if dropping_errors && it.deliberate_errors > 0 {
                r.push(DROPPED_ERROR_PATHS.to_owned());
            }
            r.extend(settings.gate.reasons(it, weights));
            r
        })
        .collect();
    let all: Vec<usize> = (0..items.len()).collect();
    let passing: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&i| reasons[i].is_empty())
        .collect();
    let count = settings.count.unwrap_or(0);
    let selected: Vec<usize> = match settings.select {
        Selection::Gate => passing.clone(),
        Selection::Weighted => {
            let pool: Vec<Item> = passing.iter().map(|&i| items[i].clone()).collect();
            curate::weighted_sample(&pool, weights, settings.power, count, settings.seed)
                .into_iter()
                .map(|k| passing[k])
                .collect()
        }
        Selection::Pareto => {
            // Pareto ranks everything finished and certain: the gate's score minimums are
            // what it is compared with.
            let eligible: Vec<usize> = all
                .iter()
                .copied()
                .filter(|&i| {
                    let it = &items[i];
                    finished(it)
                        && (settings.gate.allow_uncertain || it.uncertain_steps == 0)
                        && !(dropping_errors && it.deliberate_errors > 0)
                        && it.consistency(weights) >= settings.floor
                })
                .collect();
            let pool: Vec<Item> = eligible.iter().map(|&i| items[i].clone()).collect();
            curate::pareto_select(&pool, weights, count)
                .into_iter()
                .map(|k| eligible[k])
                .collect()
        }
    };
    if selected.is_empty() {
        return Err(CurationError::NothingSelected {
            read: items.len(),
            dropped: items.len() - passing.len(),
            reasons: reason_counts(&reasons, &all)
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let chosen: Vec<&Value> = selected.iter().map(|&i| &records.records[i]).collect();
    let openai: fn(&Value) -> Value = if settings.error_paths == ErrorPaths::Mask {
        export::openai_chat_masking_deliberate_errors
    } else {
        export::openai_chat
    };
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut formats = settings.formats.clone();
    formats.sort();
    formats.dedup();
    for format in formats {
        match format {
            ExportFormat::Openai => {
                files.insert("openai.jsonl".into(), lines(openai, &chosen));
            }
            ExportFormat::Sharegpt => {
                files.insert("sharegpt.jsonl".into(), lines(export::sharegpt, &chosen));
                let info = export::dataset_info("envsim_synth", "sharegpt.jsonl");
                files.insert("dataset_info.json".into(), pretty(&info));
            }
            ExportFormat::Hermes => {
                files.insert("hermes.jsonl".into(), lines(export::hermes, &chosen));
            }
            ExportFormat::Rl => {
                files.insert(
                    "rl_episodes.jsonl".into(),
                    lines(export::rl_episode, &chosen),
                );
            }
        }
    }
    let chosen_items: Vec<Item> = selected.iter().map(|&i| items[i].clone()).collect();
    let mut batches = None;
    if let Some(size) = settings.batch_size {
        let (filled, left) =
            curate::batches(&chosen_items, weights, &settings.mix, size, settings.seed);
        if filled.is_empty() {
            return Err(CurationError::NoBatch {
                size,
                selected: chosen_items.len(),
                per_tier: left
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let mut text = String::new();
        for (k, b) in filled.iter().enumerate() {
            let ids: Vec<&str> = b.iter().map(|&i| chosen_items[i].id.as_str()).collect();
            text.push_str(&serde_json::json!({"batch": k, "ids": ids}).to_string());
            text.push('\n');
        }
        files.insert("batches.jsonl".into(), text.into_bytes());
        batches = Some(BatchReport {
            size,
            batches: filled.len(),
            tiers: settings.mix.clone(),
            left_over: left,
        });
    }
    let mut curriculum = Vec::new();
    if !settings.curriculum.is_empty() {
        let stages = curate::curriculum(&chosen_items, weights, &settings.curriculum);
        for (k, stage) in stages.iter().enumerate() {
            let from: Vec<&Value> = stage.iter().map(|&i| chosen[i]).collect();
            files.insert(
                format!("curriculum/stage-{}.jsonl", k + 1),
                lines(openai, &from),
            );
            curriculum.push(Stage {
                stage: k + 1,
                min_consistency: settings.curriculum[k],
                trajectories: stage.len(),
            });
        }
    }
    let gate_dropped: Vec<&Item> = all
        .iter()
        .filter(|&&i| !reasons[i].is_empty())
        .map(|&i| &items[i])
        .collect();
    let passing_items: Vec<&Item> = passing.iter().map(|&i| &items[i]).collect();
    let lost = curate::lost_features(&passing_items, &gate_dropped);
    let scores = |idx: &[usize]| ScoreHistograms {
        scs: curate::histogram(idx.iter().filter_map(|&i| items[i].scs)),
        spec_cs: curate::histogram(idx.iter().filter_map(|&i| items[i].spec_cs)),
        dcs: curate::histogram(idx.iter().filter_map(|&i| items[i].dcs)),
        consistency: curate::histogram(idx.iter().map(|&i| items[i].consistency(weights))),
        final_state_equal: idx
            .iter()
            .filter(|&&i| items[i].final_state_equal == Some(true))
            .count(),
        with_truth: idx
            .iter()
            .filter(|&&i| items[i].final_state_equal.is_some())
            .count(),
    };
    let count_by = |key: fn(&Item) -> &str| {
        let mut m: BTreeMap<String, usize> = BTreeMap::new();
        for &i in &selected {
            *m.entry(key(&items[i]).to_owned()).or_default() += 1;
        }
        m
    };
    // (trajectories holding such calls, calls) among `idx`.
    let with_errors = |idx: &[usize]| {
        idx.iter()
            .map(|&i| items[i].deliberate_errors)
            .filter(|&n| n > 0)
            .fold((0, 0), |(t, c), n| (t + 1, c + n))
    };
    let (trajectories_read, calls_read) = with_errors(&all);
    let (trajectories_selected, calls_selected) = with_errors(&selected);
    let datasheet = Datasheet {
        fingerprint: fingerprint(settings, &files),
        config: settings.clone(),
        counts: Counts {
            read: items.len(),
            passing_gate: passing.len(),
            selected: selected.len(),
            selected_by_family: count_by(|it| &it.family),
            selected_by_env: count_by(|it| &it.env),
        },
        dropped: Dropped {
            not_selected: items.len() - selected.len(),
            gate_reasons: reason_counts(&reasons, &all),
        },
        gate_would_throw_away: GateLoss {
            trajectories: gate_dropped.len(),
            selected_anyway: selected
                .iter()
                .filter(|&&i| !reasons[i].is_empty())
                .map(|&i| items[i].id.clone())
                .collect(),
            features_only_they_have: lost.len(),
            examples: lost.iter().take(12).map(|s| (*s).to_owned()).collect(),
        },
        deliberate_errors: DeliberateErrors {
            handling: settings.error_paths,
            trajectories_read,
            calls_read,
            trajectories_selected,
            calls_selected,
        },
        scores: ScoreSets {
            read: scores(&all),
            selected: scores(&selected),
        },
        diversity: DiversitySets {
            read: Diversity::of(items),
            passing_gate: Diversity::of(passing_items.iter().copied()),
            selected: Diversity::of(selected.iter().map(|&i| &items[i])),
        },
        batches,
        curriculum,
        files: files.keys().cloned().collect(),
    };
    Ok(Curated { files, datasheet })
}

fn lines(render: fn(&Value) -> Value, from: &[&Value]) -> Vec<u8> {
    let mut text = String::new();
    for r in from {
        text.push_str(&render(r).to_string());
        text.push('\n');
    }
    text.into_bytes()
}

fn pretty(value: &Value) -> Vec<u8> {
    // A `Value` always serializes.
    serde_json::to_vec_pretty(value).unwrap_or_default()
}

/// SHA-256 over the settings (as JSON, keys sorted) and each file's name and digest.
fn fingerprint(settings: &Settings, files: &BTreeMap<String, Vec<u8>>) -> String {
    let config = serde_json::to_value(settings).unwrap_or(Value::Null);
    let mut hasher = Sha256::new();
    hasher.update(config.to_string().as_bytes());
    for (name, bytes) in files {
        hasher.update(name.as_bytes());
        hasher.update(Sha256::digest(bytes));
    }
    envsim_core::hex::encode(&hasher.finalize())
}

fn reason_counts(reasons: &[Vec<String>], idx: &[usize]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for &i in idx {
        let distinct: BTreeSet<&String> = reasons[i].iter().collect();
        for r in distinct {
            *m.entry(r.clone()).or_default() += 1;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A finished record of two steps, the second a failure an error-path task made.
    fn record(id: &str, error_path: bool) -> Value {
        let step = |ok: bool| {
            json!({"action": {"name": "close", "arguments": {"id": 1}},
            "observation": {"success": ok}, "success": ok, "state_after": {}})
        };
        json!({
            "id": id, "env": "desk", "family": if error_path { "error_path" } else { "ordinary" },
            "initial_state": {}, "steps": [step(true), step(false)], "finish": "final_answer",
            "scores": {"scs": 1.0, "spec_cs": 1.0, "dcs": 1.0},
            "messages": [
                {"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "c0", "type": "function",
                    "function": {"name": "close", "arguments": "{\"id\": 1}"}}]},
                {"role": "tool", "tool_call_id": "c0", "content": "ok"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "close", "arguments": "{\"id\": 1}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "Error"},
                {"role": "assistant", "content": "done"},
            ],
            "deliberate_errors": if error_path {
                json!([{"message": 4, "call_id": "c1", "tool": "close"}])
            } else {
                json!([])
            },
        })
    }

    fn settings(error_paths: ErrorPaths) -> Settings {
        Settings {
            inputs: vec!["in.jsonl".into()],
            select: Selection::Gate,
            count: None,
            floor: 0.0,
            gate: Gate::default(),
            keep_unfinished: false,
            weights: Weights::default(),
            power: 2.0,
            seed: 1,
            mix: vec![Tier {
                name: "all".into(),
                min: 0.0,
                share: 1.0,
            }],
            batch_size: None,
            curriculum: vec![],
            formats: vec![ExportFormat::Openai],
            error_paths,
        }
    }

    fn records() -> Records {
        let mut r = Records::default();
        let text = [record("a", false), record("b", true), record("c", true)]
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        r.add("in.jsonl", &text).unwrap();
        r
    }

    #[test]
    fn episodes_ended_by_an_answer_or_a_terminal_tool_are_finished_and_budgets_are_not() {
        let mut r = Records::default();
        let text = [
            ("a", "final_answer"),
            ("b", "terminal_tool"),
            ("c", "step_budget"),
        ]
        .iter()
        .map(|(id, finish)| {
            let mut rec = record(id, false);
            rec["finish"] = json!(finish);
            rec.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n");
        r.add("in.jsonl", &text).unwrap();
        let curated = curate(&r, &settings(ErrorPaths::Keep)).unwrap();
        assert_eq!(curated.datasheet.counts.selected, 2);
        assert_eq!(
            curated.datasheet.dropped.gate_reasons,
            BTreeMap::from([("ended with step_budget".to_owned(), 1)])
        );
    }

    #[test]
    fn error_path_calls_are_counted_kept_dropped_or_masked() {
        let keep = curate(&records(), &settings(ErrorPaths::Keep)).unwrap();
        let e = &keep.datasheet.deliberate_errors;
        assert_eq!(
            (e.trajectories_read, e.calls_read),
            (2, 2),
            "{:?}",
            keep.datasheet
        );
        assert_eq!((e.trajectories_selected, e.calls_selected), (2, 2));
        assert_eq!(keep.datasheet.counts.selected, 3);
        assert!(!String::from_utf8_lossy(&keep.files["openai.jsonl"]).contains("weight"));

        let drop = curate(&records(), &settings(ErrorPaths::Drop)).unwrap();
        assert_eq!(drop.datasheet.counts.selected, 1);
        assert_eq!(
            drop.datasheet.dropped.gate_reasons,
            BTreeMap::from([(DROPPED_ERROR_PATHS.to_owned(), 2)])
        );
        assert_eq!(drop.datasheet.deliberate_errors.calls_selected, 0);

        let mask = curate(&records(), &settings(ErrorPaths::Mask)).unwrap();
        let lines: Vec<Value> = String::from_utf8_lossy(&mask.files["openai.jsonl"])
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let weights: Vec<Vec<Option<&Value>>> = lines
            .iter()
            .map(|l| {
                l["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m.get("weight"))
                    .collect()
            })
            .collect();
        let zero = json!(0);
        assert_eq!(weights[0], vec![None; 7]);
        let marked = vec![None, None, None, None, Some(&zero), None, None];
        assert_eq!(weights[1], marked);
        assert_eq!(weights[2], marked);
        // Different settings, different data: different fingerprints.
        assert_ne!(keep.datasheet.fingerprint, mask.datasheet.fingerprint);
    }

    #[test]
    fn the_datasheet_round_trips_through_json() {
        let mut s = settings(ErrorPaths::Keep);
        s.batch_size = Some(1);
        s.curriculum = vec![0.0, 0.5];
        let curated = curate(&records(), &s).unwrap();
        let text = serde_json::to_string(&curated.datasheet).unwrap();
        let back: Datasheet = serde_json::from_str(&text).unwrap();
        assert_eq!(back, curated.datasheet);
        assert_eq!(back.batches.as_ref().map(|b| b.batches), Some(3));
        assert_eq!(back.curriculum.len(), 2);
        assert_eq!(
            back.files,
            [
                "batches.jsonl",
                "curriculum/stage-1.jsonl",
                "curriculum/stage-2.jsonl",
                "openai.jsonl"
            ]
        );
        // The fingerprint is the settings' and the files', nothing else: the same again.
        assert_eq!(
            curate(&records(), &s).unwrap().datasheet.fingerprint,
            back.fingerprint
        );
    }

    #[test]
    fn bad_records_and_settings_are_refused_with_their_place() {
        let mut r = Records::default();
        let err = r.add("in.jsonl", "{}\n").unwrap_err();
        assert_eq!(err.to_string(), "in.jsonl line 1: no `id`");
        let mut bad = record("x", true);
        bad["deliberate_errors"] = json!("c1");
        let err = r
            .add("in.jsonl", &format!("\n{bad}"))
            .unwrap_err()
            .to_string();
        assert_eq!(err, "in.jsonl line 2: x: `deliberate_errors` is not a list");
        r.add("a.jsonl", &record("y", false).to_string()).unwrap();
        let err = r
            .add("b.jsonl", &record("y", false).to_string())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "b.jsonl line 1: the id \"y\" was already used at a.jsonl line 1"
        );
        let mut s = settings(ErrorPaths::Keep);
        s.select = Selection::Pareto;
        assert_eq!(
            curate(&r, &s).unwrap_err(),
            CurationError::Settings("--select pareto needs --count".into())
        );
        assert_eq!(
            curate(&Records::default(), &settings(ErrorPaths::Keep)).unwrap_err(),
            CurationError::NoRecords
        );
    }
}

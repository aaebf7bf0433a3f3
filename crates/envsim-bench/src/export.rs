//! Training data for simulator models: hold-out against a benchmark, mixtures, and the
//! LLaMA-Factory (Alpaca, ShareGPT) and OpenAI chat formats.

use crate::composition::{sample, Bucket, BucketOutcome, Composition, SampleOptions, Sampled};
use envsim_core::prompt::{target, Template};
use envsim_core::sample::Action;
use envsim_explore::record::{action_key, Outcome, TransitionRecord};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// What must not leak from the benchmark into training data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Holdout {
    /// No benchmark environment appears in training.
    Env,
    /// No benchmark task (environment, initial state, walk) and no benchmark (state, call) pair
    /// appears in training; environments are shared.
    Task,
}

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SftFormat {
    /// LLaMA-Factory Alpaca JSON (`instruction`, `input`, `output`, `system`).
    Alpaca,
    /// LLaMA-Factory ShareGPT JSON (`conversations`, `system`).
    ShareGpt,
    /// OpenAI chat fine-tuning JSONL (`messages`).
    OpenAi,
}

impl SftFormat {
    /// File name of the data file.
    pub fn file_name(self) -> &'static str {
        match self {
            SftFormat::Alpaca => "train_alpaca.json",
            SftFormat::ShareGpt => "train_sharegpt.json",
            SftFormat::OpenAi => "train_openai.jsonl",
        }
    }
}

/// The reference's best training mix: 1,000 failures, 1,000 no-change, 2,000 with |Δ| 1–2, and
/// every transition with |Δ| ≥ 3.
pub fn reference_best_mix() -> Composition {
    let b = |name: &str, outcome, delta, count| Bucket {
        name: name.into(),
        outcome,
        delta,
        args: None,
        count,
    };
    Composition {
        buckets: vec![
            b("failure", BucketOutcome::Failure, None, 1000),
            b("no_change", BucketOutcome::Success, Some([0, 0]), 1000),
            b("simple", BucketOutcome::Success, Some([1, 2]), 2000),
            b(
                "complex",
                BucketOutcome::Success,
                Some([3, usize::MAX]),
                usize::MAX,
            ),
        ],
    }
}

/// The benchmark facts hold-out needs, read from envsim's `benchmark.jsonl`.
#[derive(Clone, Debug, Default)]
pub struct BenchmarkIndex {
    envs: BTreeSet<String>,
    tasks: HashSet<(String, String, u64)>,
    pairs: HashSet<(String, String)>,
}

impl BenchmarkIndex {
    /// Environments in the benchmark.
    pub fn envs(&self) -> &BTreeSet<String> {
        &self.envs
    }

    /// Reads envsim benchmark JSONL (`env`, `initial_state`, `walk`, `config_before`, `action`).
    pub fn from_jsonl(text: &str, source: &str) -> Result<BenchmarkIndex, String> {
        let mut index = BenchmarkIndex::default();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let record: Value =
                serde_json::from_str(line).map_err(|e| format!("{source}: line {}: {e}", i + 1))?;
            // A state stored once for the compact samples that follow.
            if record.get("state_id").is_some() && record.get("action").is_none() {
                continue;
            }
            let field = |k: &str| {
                record.get(k).ok_or_else(|| format!("{source}: line {}: field `{k}`: missing (an envsim benchmark.jsonl is needed)", i + 1))
            };
            let env = field("env")?.as_str().unwrap_or_default().to_owned();
            let state = field("initial_state")?
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let walk = field("walk")?.as_u64().unwrap_or_default();
            // The state's identity as `StateText::identity` gives it: the compact JSON of a
            // whole state, or the stored base's id and the patch from it.
            let before = match record.get("config_before_ref") {
                Some(r) => envsim_explore::record::patched_identity(
                    r.get("state").and_then(Value::as_str).unwrap_or_default(),
                    &r.get("patch").unwrap_or(&Value::Null).to_string(),
                ),
                None => field("config_before")?.to_string(),
            };
            let pair = (before, action_key(field("action")?));
            index.tasks.insert((env.clone(), state, walk));
            index
                .pairs
                .insert((env.clone() + "\u{0}" + &pair.0, pair.1));
            index.envs.insert(env);
        }
        if index.envs.is_empty() {
            return Err(format!("{source}: the benchmark is empty"));
        }
        Ok(index)
    }
}

/// Proof that training data does not overlap the benchmark.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LeakageReport {
    /// Hold-out mode.
    pub holdout: Holdout,
    /// Environments in the benchmark.
    pub benchmark_envs: Vec<String>,
    /// Environments in the training data.
    pub training_envs: Vec<String>,
    /// Environments in both (empty for `env` hold-out).
    pub shared_envs: Vec<String>,
    /// Training transitions from benchmark tasks (always 0).
    pub shared_tasks: usize,
    /// Training transitions whose (state, call) pair is a benchmark sample (always 0).
    pub shared_state_call_pairs: usize,
    /// Collected transitions removed by the hold-out.
    pub removed: usize,
}

/// Removes everything the hold-out forbids; returns the kept indices and the report, which is
/// computed from the kept data itself.
pub fn hold_out(
    pool: &[TransitionRecord],
    bench: &BenchmarkIndex,
    holdout: Holdout,
) -> (Vec<usize>, LeakageReport) {
    let pair_of = |t: &TransitionRecord| {
        (
            t.env.clone() + "\u{0}" + &t.config_before.identity(),
            action_key(&t.action),
        )
    };
    let task_of = |t: &TransitionRecord| (t.env.clone(), t.initial_state.clone(), t.walk as u64);
    let kept: Vec<usize> = pool
        .iter()
        .enumerate()
        .filter(|(_, t)| match holdout {
            Holdout::Env => !bench.envs.contains(&t.env),
            Holdout::Task => {
                !bench.tasks.contains(&task_of(t)) && !bench.pairs.contains(&pair_of(t))
            }
        })
        .map(|(i, _)| i)
        .collect();
    let training_envs: BTreeSet<String> = kept.iter().map(|i| pool[*i].env.clone()).collect();
    let report = LeakageReport {
        holdout,
        benchmark_envs: bench.envs.iter().cloned().collect(),
        shared_envs: training_envs.intersection(&bench.envs).cloned().collect(),
        training_envs: training_envs.into_iter().collect(),
        shared_tasks: kept
            .iter()
            .filter(|i| bench.tasks.contains(&task_of(&pool[**i])))
            .count(),
        shared_state_call_pairs: kept
            .iter()
            .filter(|i| bench.pairs.contains(&pair_of(&pool[**i])))
            .count(),
        removed: pool.len() - kept.len(),
    };
    (kept, report)
}

/// Picks the mixture from the kept transitions (exceptions never enter training data).
pub fn mix(
    pool: &[TransitionRecord],
    kept: &[usize],
    mixture: &Composition,
    seed: u64,
) -> (Vec<usize>, Sampled) {
    let usable: Vec<usize> = kept
        .iter()
        .copied()
        .filter(|i| pool[*i].outcome != Outcome::Exception)
        .collect();
    let subset: Vec<TransitionRecord> = usable.iter().map(|i| pool[*i].clone()).collect();
    let options = SampleOptions {
        seed,
        allow_unpredictable: false,
        allow_underfill: true,
        // Training mixes take what there is; coverage is the hold-out's business.
        max_env_share: 1.0,
    };
    // Under-filling is normal for training mixes: a group takes what there is.
    let sampled = sample(&subset, mixture, &options).unwrap_or_else(|e| Sampled {
        picks: Vec::new(),
        shortfalls: e.0,
        duplicates: 0,
        unpredictable: 0,
        max_env_share: 1.0,
    });
    let chosen = sampled.picks.iter().map(|(_, i)| usable[*i]).collect();
    (chosen, sampled)
}

fn action_of(t: &TransitionRecord) -> Action {
    Action {
        name: t
            .action
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        arguments: t
            .action
            .get("arguments")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    }
}

/// Renders training examples; returns the data file's text.
pub fn render(
    records: &[&TransitionRecord],
    env_codes: &BTreeMap<String, String>,
    template: Template,
    format: SftFormat,
) -> String {
    let examples = records.iter().map(|t| {
        let code = env_codes
            .get(&t.env)
            .map(String::as_str)
            .unwrap_or_default();
        let (before, after) = (t.config_before.value(), t.config_after.value());
        let prompt = template.render(code, &before, &action_of(t));
        let answer = serde_json::to_string_pretty(&target(&t.observation, &before, &after))
            .unwrap_or_default();
        (prompt, answer)
    });
    match format {
        SftFormat::Alpaca => {
            let items: Vec<Value> = examples
                .map(|(p, a)| match template {
                    Template::Reference => json!({"instruction": p.system, "input": p.user, "output": a}),
                    Template::Envsim | Template::EnvsimSliced => json!({"system": p.system, "instruction": p.user, "input": "", "output": a}),
                })
                .collect();
            serde_json::to_string_pretty(&items).unwrap_or_default() + "\n"
        }
        SftFormat::ShareGpt => {
            let items: Vec<Value> = examples
                .map(|(p, a)| json!({"system": p.system, "conversations": [{"from": "human", "value": p.user}, {"from": "gpt", "value": a}]}))
                .collect();
            serde_json::to_string_pretty(&items).unwrap_or_default() + "\n"
        }
        SftFormat::OpenAi => examples
            .map(|(p, a)| {
                json!({"messages": [{"role": "system", "content": p.system}, {"role": "user", "content": p.user}, {"role": "assistant", "content": a}]})
                    .to_string()
                    + "\n"
            })
            .collect(),
    }
}

/// LLaMA-Factory's `dataset_info.json` entries for the written files.
pub fn dataset_info(formats: &[SftFormat], template: Template) -> Value {
    let mut info = Map::new();
    for format in formats {
        match format {
            SftFormat::Alpaca => {
                let mut columns =
                    json!({"prompt": "instruction", "query": "input", "response": "output"});
                if template != Template::Reference {
                    columns["system"] = json!("system");
                }
                info.insert(
                    "envsim_sft_alpaca".into(),
                    json!({"file_name": format.file_name(), "columns": columns}),
                );
            }
            SftFormat::ShareGpt => {
                info.insert(
                    "envsim_sft_sharegpt".into(),
                    json!({"file_name": format.file_name(), "formatting": "sharegpt", "columns": {"messages": "conversations", "system": "system"}}),
                );
            }
            SftFormat::OpenAi => {}
        }
    }
    Value::Object(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use envsim_explore::driver::Intent;
    use envsim_explore::record::StateText;

    fn record(
        env: &str,
        walk: usize,
        n: i64,
        outcome: Outcome,
        change_count: usize,
    ) -> TransitionRecord {
        TransitionRecord {
            env: env.into(),
            class_name: "C".into(),
            convention: envsim_exec::Convention::Class,
            tool_schema: json!({}),
            initial_state: "00.json".into(),
            walk,
            step: 0,
            intent: Intent::Valid,
            action: json!({"name": "set", "arguments": {"n": n}}),
            config_before: StateText::from_value(&json!({"n": 0})),
            config_after: StateText::from_value(&json!({"n": n})),
            observation: "{'success': True}".into(),
            observation_json: json!({"success": true}),
            outcome,
            change_count,
            fine_change_count: change_count,
            args_count: 1,
            unpredictable: Vec::new(),
            reads: None,
            seed: 0,
            clock: 0.0,
        }
    }

    fn bench(records: &[TransitionRecord]) -> BenchmarkIndex {
        let text: String = records
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect();
        BenchmarkIndex::from_jsonl(&text, "benchmark.jsonl").unwrap()
    }

    #[test]
    fn env_holdout_removes_benchmark_environments() {
        let pool = vec![
            record("a", 0, 1, Outcome::Success, 1),
            record("b", 0, 2, Outcome::Success, 1),
            record("c", 1, 3, Outcome::Failure, 0),
        ];
        let (kept, report) = hold_out(
            &pool,
            &bench(&[record("a", 9, 9, Outcome::Success, 1)]),
            Holdout::Env,
        );
        assert_eq!(kept, [1, 2]);
        assert_eq!(report.training_envs, ["b", "c"]);
        assert!(report.shared_envs.is_empty());
        assert_eq!(report.removed, 1);
    }

    #[test]
    fn task_holdout_removes_tasks_and_identical_pairs() {
        let pool = vec![
            record("a", 0, 1, Outcome::Success, 1), // same task as the benchmark sample
            record("a", 1, 2, Outcome::Success, 1), // same (state, call) pair
            record("a", 2, 3, Outcome::Success, 1),
        ];
        let b = bench(&[
            record("a", 0, 7, Outcome::Success, 1),
            record("a", 5, 2, Outcome::Success, 1),
        ]);
        let (kept, report) = hold_out(&pool, &b, Holdout::Task);
        assert_eq!(kept, [2]);
        assert_eq!(
            (
                report.shared_tasks,
                report.shared_state_call_pairs,
                report.removed
            ),
            (0, 0, 2)
        );
        assert_eq!(report.shared_envs, ["a"]);
    }

    #[test]
    fn formats_and_mix() {
        let pool: Vec<TransitionRecord> = (0..6)
            .map(|n| {
                record(
                    "a",
                    n as usize,
                    n,
                    if n == 0 {
                        Outcome::Failure
                    } else {
                        Outcome::Success
                    },
                    if n < 2 { 0 } else { 1 },
                )
            })
            .collect();
        let kept: Vec<usize> = (0..6).collect();
        let (chosen, sampled) = mix(&pool, &kept, &reference_best_mix(), 1);
        assert_eq!(chosen.len(), 6, "every group takes what there is");
        assert!(sampled.shortfalls.iter().any(|s| s.bucket == "failure"));
        let records: Vec<&TransitionRecord> = chosen.iter().map(|i| &pool[*i]).collect();
        let codes = BTreeMap::from([("a".to_string(), "class C: pass".to_string())]);
        let alpaca: Value = serde_json::from_str(&render(
            &records,
            &codes,
            Template::Reference,
            SftFormat::Alpaca,
        ))
        .unwrap();
        assert_eq!(alpaca.as_array().unwrap().len(), 6);
        let output: Value = serde_json::from_str(alpaca[0]["output"].as_str().unwrap()).unwrap();
        assert!(output.get("feedback").is_some() && output.get("config_changes").is_some());
        let openai = render(&records, &codes, Template::Envsim, SftFormat::OpenAi);
        assert_eq!(openai.lines().count(), 6);
        let line: Value = serde_json::from_str(openai.lines().next().unwrap()).unwrap();
        assert_eq!(line["messages"][2]["role"], "assistant");
        let info = dataset_info(&[SftFormat::Alpaca, SftFormat::ShareGpt], Template::Envsim);
        assert_eq!(info["envsim_sft_alpaca"]["columns"]["system"], "system");
        assert_eq!(info["envsim_sft_sharegpt"]["formatting"], "sharegpt");
    }
}

//! `envsim audit agree`: cross-consistency (CCR) of K simulations of the same steps, and on a
//! benchmark with truth, how well agreement predicts correctness.

use anyhow::{bail, Context, Result};
use clap::Args;
use envsim_bench::records::{for_each_record_in, read_record, AuditRecord};
use envsim_core::audit::agreement::{agreement, auroc, reliability, Agreement, Answer};
use envsim_core::sample::Prediction;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `envsim audit agree`.
#[derive(Debug, Args)]
pub struct AgreeArgs {
    /// K files of simulations of the same steps: trajectory files (records matched by their
    /// task id or transcript id, steps by position), or with `--bench` prediction files (envsim
    /// prediction JSONL or reference result files).
    #[arg(required = true, num_args = 2..)]
    files: Vec<PathBuf>,
    /// A benchmark with truth: the files are predictions for its samples, and agreement is
    /// scored as a predictor of correctness (reliability table, AUROC).
    #[arg(long, value_name = "FILE")]
    bench: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(a: AgreeArgs) -> Result<()> {
    let summary = match &a.bench {
        Some(bench) => with_truth(bench, &a.files)?,
        None => across_trajectories(&a.files)?,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print(&summary);
    }
    Ok(())
}

/// Per step: its tool and the K answers.
struct Step {
    tool: String,
    answers: Vec<Option<Answer>>,
}

/// The mean agreement, per tool and overall, of the steps.
fn summarize(steps: &[(String, Agreement)], k: usize) -> Value {
    let n = steps.len().max(1) as f64;
    let mean = |f: fn(&Agreement) -> f64| steps.iter().map(|(_, g)| f(g)).sum::<f64>() / n;
    let mut tools: BTreeMap<&str, (usize, f64)> = BTreeMap::new();
    for (tool, g) in steps {
        let e = tools.entry(tool).or_default();
        e.0 += 1;
        e.1 += g.exact;
    }
    json!({
        "steps": steps.len(),
        "k": k,
        "ccr": {
            "exact": mean(|g| g.exact),
            "observation": mean(|g| g.observation),
            "change": mean(|g| g.change),
            "field": mean(|g| g.field),
        },
        "unanimous_steps": steps.iter().filter(|(_, g)| g.exact >= 1.0).count(),
        "tools": tools.into_iter().map(|(t, (n, sum))| (t.to_owned(), json!({"steps": n, "ccr": sum / n as f64}))).collect::<serde_json::Map<_, _>>(),
    })
}

/// The steps of one trajectory file, by record key: each step's tool, arguments and answer.
type FileSteps = BTreeMap<String, (String, Vec<(String, Value, Answer)>)>;

/// Reads a trajectory file's records into answers per step (the change is the difference of
/// the states where the record has them; transcripts have none, so only observations compare).
fn read_answers(path: &std::path::Path) -> Result<(FileSteps, bool)> {
    let source = path.display().to_string();
    let mut out: FileSteps = BTreeMap::new();
    let mut all_states = true;
    for_each_record_in(path, |value, location, index| {
        let (key, steps) = match read_record(value, location, index, &source)? {
            AuditRecord::Transcript(t) => {
                all_states = false;
                let steps = t
                    .calls
                    .into_iter()
                    .map(|c| {
                        let observation = normalized(c.observation.unwrap_or(Value::Null));
                        (
                            c.tool,
                            Value::Object(c.arguments),
                            Answer {
                                observation,
                                changes: BTreeMap::new(),
                            },
                        )
                    })
                    .collect();
                (t.id.unwrap_or_else(|| index.to_string()), steps)
            }
            AuditRecord::Run(run) => {
                let mut state = run.initial_state.clone();
                all_states &= state.is_some();
                let steps = run
                    .steps
                    .iter()
                    .map(|s| {
                        let observation = normalized(
                            envsim_core::answer::Answer::of_value(s.observation.as_ref()).value,
                        );
                        let answer = match &state {
                            Some(before) => {
                                let after = s.state_after.clone().unwrap_or_else(|| before.clone());
                                let answer = Answer::from_states(observation, before, &after);
                                state = Some(after);
                                answer
                            }
                            None => Answer {
                                observation,
                                changes: BTreeMap::new(),
                            },
                        };
                        (s.tool.clone(), Value::Object(s.arguments.clone()), answer)
                    })
                    .collect();
                let key = match &run.env {
                    Some(env) => format!("{env}/{}", run.task_id),
                    None => run.task_id.clone(),
                };
                (key, steps)
            }
        };
        if out.contains_key(&key) {
            bail!("{source}: {location}: a second record for {key:?}; records are matched across files by their id");
        }
        out.insert(key, (location.to_owned(), steps));
        Ok(())
    })?;
    Ok((out, all_states))
}

/// Text observations compare without their surrounding whitespace.
fn normalized(observation: Value) -> Value {
    match observation {
        Value::String(s) => Value::String(s.trim().to_owned()),
        other => other,
    }
}

fn across_trajectories(files: &[PathBuf]) -> Result<Value> {
    let mut read = Vec::with_capacity(files.len());
    let mut states = true;
    for f in files {
        let (steps, all) = read_answers(f)?;
        states &= all;
        read.push(steps);
    }
    let first = &files[0];
    let mut steps: Vec<Step> = Vec::new();
    let mut missing = 0usize;
    for (key, (location, calls)) in &read[0] {
        for (i, (tool, arguments, answer)) in calls.iter().enumerate() {
            let mut answers = vec![Some(answer.clone())];
            for (f, other) in read.iter().enumerate().skip(1) {
                let Some((at, theirs)) = other.get(key) else {
                    missing += 1;
                    answers.push(None);
                    continue;
                };
                match theirs.get(i) {
                    Some((t, args, a)) if t == tool && args == arguments => {
                        answers.push(Some(a.clone()))
                    }
                    Some((t, _, _)) => bail!(
                        "{}: {at}: step {} calls {t} (or other arguments) where {} {location} calls {tool}: the files do not simulate the same steps",
                        files[f].display(),
                        i + 1,
                        first.display()
                    ),
                    None => answers.push(None),
                }
            }
            steps.push(Step {
                tool: tool.clone(),
                answers,
            });
        }
    }
    if steps.is_empty() {
        bail!("{}: no steps", first.display());
    }
    if missing > 0 {
        eprintln!(
            "warning: {missing} times a record of {} has no record with its id in another file; those answers count as missing (agreeing with nothing)",
            first.display()
        );
    }
    let agreements: Vec<(String, Agreement)> = steps
        .into_iter()
        .map(|s| (s.tool, agreement(&s.answers)))
        .collect();
    let mut summary = summarize(&agreements, files.len());
    summary["states"] = json!(states);
    summary["records_missing_from_other_files"] = json!(missing);
    if !states {
        summary["note"] = json!("some records carry no states: changes were not compared for them (their change agreement is 1)");
    }
    Ok(summary)
}

/// The answer a prediction gives for a benchmark sample: its feedback (as the strict scorer
/// normalises it) and the change its delta makes when applied to the state before.
fn predicted_answer(prediction: &Prediction, before: &Value) -> Option<Answer> {
    let object = match prediction {
        Prediction::Raw(text) => Value::Object(
            envsim_core::extract::extract_object(text, &envsim_core::score::OUTPUT_KEYS)
                .ok()?
                .object,
        ),
        Prediction::Parsed(value @ Value::Object(_)) => value.clone(),
        _ => return None,
    };
    let feedback =
        envsim_core::score::strict_feedback(object.get("feedback").unwrap_or(&Value::Null));
    let changes = object.get("config_changes").cloned().unwrap_or(json!([]));
    let (after, _) =
        envsim_core::apply::apply(before, &envsim_core::delta::Delta::from_value(&changes));
    Some(Answer::from_states(feedback, before, &after))
}

fn with_truth(bench: &std::path::Path, files: &[PathBuf]) -> Result<Value> {
    let bench_name = bench.display().to_string();
    let bytes = std::fs::read(bench).with_context(|| format!("cannot read {bench_name}"))?;
    let transitions = envsim_eval::prepare::parse_benchmark(&bytes, &bench_name)?;
    let mut samples = envsim_eval::prepare::prepare_samples(transitions.clone());
    let mut predictions = Vec::with_capacity(files.len());
    for f in files {
        let name = f.display().to_string();
        let bytes = std::fs::read(f).with_context(|| format!("cannot read {name}"))?;
        let records = envsim_core::formats::parse_predictions(&bytes, &name)?;
        predictions.push(envsim_core::formats::match_predictions(
            &transitions,
            records,
            true,
            &name,
        )?);
    }
    let mut agreements = Vec::with_capacity(samples.len());
    // (confidence, right) for every prediction; per file, how many are right; the majority's.
    let mut scored: Vec<(f64, bool)> = Vec::new();
    let mut right = vec![0usize; files.len()];
    let mut majority_right = 0usize;
    for (i, sample) in samples.iter_mut().enumerate() {
        let before = sample.transition().config_before.clone();
        let answers: Vec<Option<Answer>> = predictions
            .iter()
            .map(|p| predicted_answer(&p[i].0, &before))
            .collect();
        let g = agreement(&answers);
        let correct: Vec<bool> = predictions
            .iter()
            .map(|p| {
                let s = sample.score(&p[i].0, None);
                s.fm_strict && s.cm_strict
            })
            .collect();
        for (k, c) in correct.iter().enumerate() {
            right[k] += usize::from(*c);
            scored.push((g.with_others[k], *c));
        }
        majority_right += usize::from(g.majority.is_some_and(|m| correct[m]));
        agreements.push((sample.transition().action.name.clone(), g));
    }
    let n = samples.len().max(1) as f64;
    let mut summary = summarize(&agreements, files.len());
    summary["truth"] = json!({
        "bench": bench_name,
        "auroc": auroc(&scored),
        "reliability": reliability(&scored),
        "accuracy": files.iter().zip(&right).map(|(f, r)| (f.display().to_string(), json!(*r as f64 / n))).collect::<serde_json::Map<_, _>>(),
        "majority_accuracy": majority_right as f64 / n,
    });
    Ok(summary)
}

fn print(summary: &Value) {
    let ccr = &summary["ccr"];
    println!(
        "{} steps, K = {}: CCR exact {:.4}, observation {:.4}, change {:.4}, field {:.4}; {} steps unanimous",
        summary["steps"],
        summary["k"],
        ccr["exact"].as_f64().unwrap_or(0.0),
        ccr["observation"].as_f64().unwrap_or(0.0),
        ccr["change"].as_f64().unwrap_or(0.0),
        ccr["field"].as_f64().unwrap_or(0.0),
        summary["unanimous_steps"],
    );
    if let Some(note) = summary["note"].as_str() {
        println!("note: {note}");
    }
    if let Some(tools) = summary["tools"].as_object() {
        let mut low: Vec<(&String, f64)> = tools
            .iter()
            .map(|(t, v)| (t, v["ccr"].as_f64().unwrap_or(0.0)))
            .collect();
        low.sort_by(|a, b| a.1.total_cmp(&b.1));
        for (tool, ccr) in low.iter().take(5) {
            println!("  {tool:<24} CCR {ccr:.4}");
        }
    }
    let truth = &summary["truth"];
    if truth.is_object() {
        match truth["auroc"].as_f64() {
            Some(a) => println!("agreement as a predictor of correctness: AUROC {a:.4}"),
            None => println!(
                "agreement as a predictor of correctness: AUROC undefined (all right or all wrong)"
            ),
        }
        println!("| agreement with the others | answers | right | accuracy |\n|---|---|---|---|");
        for row in truth["reliability"].as_array().into_iter().flatten() {
            let (n, c) = (
                row["answers"].as_u64().unwrap_or(0),
                row["correct"].as_u64().unwrap_or(0),
            );
            println!(
                "| {:.3} | {n} | {c} | {:.1}% |",
                row["agreement"].as_f64().unwrap_or(0.0),
                100.0 * c as f64 / n.max(1) as f64
            );
        }
        println!(
            "majority answer right: {:.1}%",
            100.0 * truth["majority_accuracy"].as_f64().unwrap_or(0.0)
        );
    }
}

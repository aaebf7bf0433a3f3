//! `envsim curate`: synthesized trajectories (`envsim synth` records) gated, sampled or
//! selected on the consistency–diversity Pareto front, mixed into batches by consistency tier,
//! staged as a strictness curriculum, and exported for training (OpenAI chat, LLaMA-Factory
//! ShareGPT with its `dataset_info.json`, Hermes, RL episodes) with a datasheet.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use envsim_core::curate::{self, Diversity, Gate, Item, Tier, Weights};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// How trajectories are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Selection {
    /// Every trajectory that passes the gate.
    Gate,
    /// --count drawn among those passing the gate, each with probability ∝
    /// consistency^--power.
    Weighted,
    /// --count from the consistency–diversity Pareto front of the finished trajectories without
    /// uncertain steps whose consistency reaches --floor (the gate's minimums are reported
    /// against, not applied).
    Pareto,
}

/// An export format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Format {
    /// OpenAI chat fine-tuning lines (`openai.jsonl`).
    Openai,
    /// LLaMA-Factory ShareGPT function calling (`sharegpt.jsonl` and `dataset_info.json`).
    Sharegpt,
    /// Hermes function calling (`hermes.jsonl`).
    Hermes,
    /// RL episodes with final-state checkers (`rl_episodes.jsonl`).
    Rl,
}

/// `envsim curate`.
#[derive(Debug, Args)]
pub struct CurateArgs {
    /// Trajectory files (`envsim synth --out`), JSON Lines.
    #[arg(required = true, value_name = "FILE")]
    inputs: Vec<PathBuf>,
    /// Output folder (created; files in it are replaced).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// How trajectories are chosen.
    #[arg(long, value_enum, default_value_t = Selection::Gate)]
    select: Selection,
    /// How many to choose (weighted and pareto).
    #[arg(long)]
    count: Option<usize>,
    /// Least consistency of a trajectory the Pareto selection ranks.
    #[arg(long, default_value_t = 0.0, value_name = "X")]
    floor: f64,
    /// Least SCS.
    #[arg(long, value_name = "X")]
    min_scs: Option<f64>,
    /// Least SpecCS.
    #[arg(long, value_name = "X")]
    min_spec_cs: Option<f64>,
    /// Least DCS.
    #[arg(long, value_name = "X")]
    min_dcs: Option<f64>,
    /// Least consistency (the weighted mean of the scores, times the share of certain steps).
    #[arg(long, value_name = "X")]
    min_consistency: Option<f64>,
    /// A trajectory without a gated score fails that minimum (default: it passes).
    #[arg(long)]
    require_scores: bool,
    /// Keep trajectories with steps anchoring marked uncertain.
    #[arg(long)]
    allow_uncertain: bool,
    /// Keep trajectories that did not end with the agent's answer (a spent budget, an
    /// unreadable turn).
    #[arg(long)]
    keep_unfinished: bool,
    /// Weights of the scores in the consistency: `scs=1,spec_cs=1,dcs=1`.
    #[arg(long, default_value = "scs=1,spec_cs=1,dcs=1")]
    weights: String,
    /// Exponent of the consistency in weighted sampling.
    #[arg(long, default_value_t = 2.0)]
    power: f64,
    /// Formats to write.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = vec![Format::Openai, Format::Sharegpt, Format::Hermes, Format::Rl])]
    formats: Vec<Format>,
    /// Training batches of this size, mixing the tiers of --mix (`batches.jsonl`).
    #[arg(long)]
    batch_size: Option<usize>,
    /// Consistency tiers and their shares of a batch: `NAME=MIN:SHARE,...`.
    #[arg(long, default_value = "high=0.99:0.7,mid=0.9:0.2,low=0:0.1")]
    mix: String,
    /// A strictness curriculum: minimum consistency per stage, loose to strict
    /// (`curriculum/stage-N.jsonl`, OpenAI chat lines).
    #[arg(long, value_delimiter = ',', value_name = "MIN,...")]
    curriculum: Vec<f64>,
    /// Seed of sampling and batching.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Print the datasheet as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_weights(text: &str) -> Result<Weights> {
    let mut w = Weights {
        scs: 0.0,
        spec_cs: 0.0,
        dcs: 0.0,
    };
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| anyhow!("--weights: {part:?} is not NAME=WEIGHT"))?;
        let value: f64 = value
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| anyhow!("--weights: {value:?} is not a weight (a number ≥ 0)"))?;
        match name.trim() {
            "scs" => w.scs = value,
            "spec_cs" => w.spec_cs = value,
            "dcs" => w.dcs = value,
            other => bail!("--weights: {other:?} is not a score (scs, spec_cs, dcs)"),
        }
    }
    Ok(w)
}

fn parse_mix(text: &str) -> Result<Vec<Tier>> {
    let mut tiers = Vec::new();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let parsed = part.split_once('=').and_then(|(name, rest)| {
            let (min, share) = rest.split_once(':')?;
            Some((
                name.trim().to_owned(),
                min.trim().parse::<f64>().ok()?,
                share.trim().parse::<f64>().ok()?,
            ))
        });
        let Some((name, min, share)) = parsed else {
            bail!("--mix: {part:?} is not NAME=MIN:SHARE");
        };
        if !(0.0..=1.0).contains(&min) || !(0.0..=1.0).contains(&share) {
            bail!("--mix: {part:?}: the minimum and the share are between 0 and 1");
        }
        tiers.push(Tier { name, min, share });
    }
    if tiers.is_empty() {
        bail!("--mix names no tier");
    }
    Ok(tiers)
}

/// Reads the records and what curation sees of each (same order), located errors for what
/// does not read.
fn read_records(inputs: &[PathBuf]) -> Result<(Vec<Value>, Vec<Item>)> {
    let (mut records, mut items) = (Vec::new(), Vec::new());
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    for path in inputs {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = format!("{} line {}", path.display(), i + 1);
            let record: Value =
                serde_json::from_str(line).with_context(|| format!("{at}: not JSON"))?;
            let item = Item::from_record(&record).map_err(|e| anyhow!("{at}: {e}"))?;
            if let Some(first) = ids.insert(item.id.clone(), at.clone()) {
                bail!("{at}: the id {:?} was already used at {first}", item.id);
            }
            records.push(record);
            items.push(item);
        }
    }
    Ok((records, items))
}

pub fn run(a: CurateArgs) -> Result<()> {
    let weights = parse_weights(&a.weights)?;
    let tiers = parse_mix(&a.mix)?;
    for (k, t) in a.curriculum.iter().enumerate() {
        if !(0.0..=1.0).contains(t) {
            bail!(
                "--curriculum: stage {} minimum {t} is not between 0 and 1",
                k + 1
            );
        }
    }
    if matches!(a.select, Selection::Weighted | Selection::Pareto) && a.count.is_none() {
        bail!("--select {:?} needs --count", a.select);
    }
    let (records, items) = read_records(&a.inputs)?;
    if records.is_empty() {
        bail!("the inputs hold no trajectories");
    }
    let gate = Gate {
        min_scs: a.min_scs,
        min_spec_cs: a.min_spec_cs,
        min_dcs: a.min_dcs,
        min_consistency: a.min_consistency,
        allow_uncertain: a.allow_uncertain,
        require_scores: a.require_scores,
    };
    // Whether a trajectory's ending keeps it (records without a `finish` are not synthesized
    // conversations: they count as finished).
    let finished =
        |it: &Item| a.keep_unfinished || it.finish == "final_answer" || it.finish.is_empty();
    // Why each trajectory would be dropped by the gate (and by its ending).
    let reasons: Vec<Vec<String>> = items
        .iter()
        .map(|it| {
            let mut r = Vec::new();
            if !finished(it) {
                r.push(format!("ended with {}", it.finish));
            }
            r.extend(gate.reasons(it, &weights));
            r
        })
        .collect();
    let passing: Vec<usize> = (0..items.len())
        .filter(|&i| reasons[i].is_empty())
        .collect();
    let selected: Vec<usize> = match a.select {
        Selection::Gate => passing.clone(),
        Selection::Weighted => {
            let pool: Vec<Item> = passing.iter().map(|&i| items[i].clone()).collect();
            curate::weighted_sample(&pool, &weights, a.power, a.count.unwrap_or(0), a.seed)
                .into_iter()
                .map(|k| passing[k])
                .collect()
        }
        Selection::Pareto => {
            // Pareto ranks everything finished and certain: the gate's score minimums are
            // what it is compared with.
            let eligible: Vec<usize> = (0..items.len())
                .filter(|&i| {
                    finished(&items[i])
                        && (a.allow_uncertain || items[i].uncertain_steps == 0)
                        && items[i].consistency(&weights) >= a.floor
                })
                .collect();
            let pool: Vec<Item> = eligible.iter().map(|&i| items[i].clone()).collect();
            curate::pareto_select(&pool, &weights, a.count.unwrap_or(0))
                .into_iter()
                .map(|k| eligible[k])
                .collect()
        }
    };
    if selected.is_empty() {
        bail!(
            "no trajectory was selected ({} read; the gate dropped {}: {})",
            items.len(),
            items.len() - passing.len(),
            reason_counts(&reasons, &(0..items.len()).collect::<Vec<_>>())
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let mut written: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let chosen: Vec<&Value> = selected.iter().map(|&i| &records[i]).collect();
    let lines = |render: fn(&Value) -> Value, from: &[&Value]| -> Vec<u8> {
        let mut text = String::new();
        for r in from {
            text.push_str(&render(r).to_string());
            text.push('\n');
        }
        text.into_bytes()
    };
    let mut formats = a.formats.clone();
    formats.sort();
    formats.dedup();
    for f in &formats {
        match f {
            Format::Openai => {
                written.insert(
                    "openai.jsonl".into(),
                    lines(envsim_synth::export::openai_chat, &chosen),
                );
            }
            Format::Sharegpt => {
                written.insert(
                    "sharegpt.jsonl".into(),
                    lines(envsim_synth::export::sharegpt, &chosen),
                );
                let info = envsim_synth::export::dataset_info("envsim_synth", "sharegpt.jsonl");
                written.insert(
                    "dataset_info.json".into(),
                    serde_json::to_vec_pretty(&info)?,
                );
            }
            Format::Hermes => {
                written.insert(
                    "hermes.jsonl".into(),
                    lines(envsim_synth::export::hermes, &chosen),
                );
            }
            Format::Rl => {
                written.insert(
                    "rl_episodes.jsonl".into(),
                    lines(envsim_synth::export::rl_episode, &chosen),
                );
            }
        }
    }
    let chosen_items: Vec<Item> = selected.iter().map(|&i| items[i].clone()).collect();
    let mut batch_report = Value::Null;
    if let Some(size) = a.batch_size {
        if size == 0 {
            bail!("--batch-size must be at least 1");
        }
        let (batches, left) = curate::batches(&chosen_items, &weights, &tiers, size, a.seed);
        if batches.is_empty() {
            bail!(
                "no batch of {size} can be filled in the --mix ratios from the {} selected trajectories (per tier: {}); change --mix or --batch-size",
                chosen_items.len(),
                left.iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let mut text = String::new();
        for (k, b) in batches.iter().enumerate() {
            let ids: Vec<&str> = b.iter().map(|&i| chosen_items[i].id.as_str()).collect();
            text.push_str(&json!({"batch": k, "ids": ids}).to_string());
            text.push('\n');
        }
        written.insert("batches.jsonl".into(), text.into_bytes());
        batch_report =
            json!({"size": size, "batches": batches.len(), "tiers": tiers, "left_over": left});
    }
    let mut stages_report = Vec::new();
    if !a.curriculum.is_empty() {
        let stages = curate::curriculum(&chosen_items, &weights, &a.curriculum);
        for (k, stage) in stages.iter().enumerate() {
            let from: Vec<&Value> = stage.iter().map(|&i| chosen[i]).collect();
            written.insert(
                format!("curriculum/stage-{}.jsonl", k + 1),
                lines(envsim_synth::export::openai_chat, &from),
            );
            stages_report.push(json!({"stage": k + 1, "min_consistency": a.curriculum[k], "trajectories": stage.len()}));
        }
    }
    // The datasheet.
    let all_idx: Vec<usize> = (0..items.len()).collect();
    let chosen_set: BTreeSet<usize> = selected.iter().copied().collect();
    let not_selected: Vec<usize> = all_idx
        .iter()
        .copied()
        .filter(|i| !chosen_set.contains(i))
        .collect();
    let gate_dropped: Vec<usize> = all_idx
        .iter()
        .copied()
        .filter(|&i| !reasons[i].is_empty())
        .collect();
    let selected_refs: Vec<&Item> = selected.iter().map(|&i| &items[i]).collect();
    let passing_refs: Vec<&Item> = passing.iter().map(|&i| &items[i]).collect();
    let dropped_by_gate: Vec<&Item> = gate_dropped.iter().map(|&i| &items[i]).collect();
    let gate_loses = curate::lost_features(&passing_refs, &dropped_by_gate);
    let selected_despite_gate: Vec<&str> = selected
        .iter()
        .filter(|&&i| !reasons[i].is_empty())
        .map(|&i| items[i].id.as_str())
        .collect();
    let config = json!({
        "inputs": a.inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "select": format!("{:?}", a.select).to_lowercase(),
        "count": a.count,
        "floor": a.floor,
        "gate": gate,
        "keep_unfinished": a.keep_unfinished,
        "weights": weights,
        "power": a.power,
        "seed": a.seed,
        "mix": tiers,
        "batch_size": a.batch_size,
        "curriculum": a.curriculum,
    });
    let mut hasher = Sha256::new();
    hasher.update(config.to_string().as_bytes());
    for (name, bytes) in &written {
        hasher.update(name.as_bytes());
        hasher.update(Sha256::digest(bytes));
    }
    let fingerprint: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let scores = |idx: &[usize]| {
        json!({
            "scs": curate::histogram(idx.iter().filter_map(|&i| items[i].scs)),
            "spec_cs": curate::histogram(idx.iter().filter_map(|&i| items[i].spec_cs)),
            "dcs": curate::histogram(idx.iter().filter_map(|&i| items[i].dcs)),
            "consistency": curate::histogram(idx.iter().map(|&i| items[i].consistency(&weights))),
            "final_state_equal": idx.iter().filter(|&&i| items[i].final_state_equal == Some(true)).count(),
            "with_truth": idx.iter().filter(|&&i| items[i].final_state_equal.is_some()).count(),
        })
    };
    let count_by = |idx: &[usize], key: fn(&Item) -> &str| {
        let mut m: BTreeMap<&str, usize> = BTreeMap::new();
        for &i in idx {
            *m.entry(key(&items[i])).or_default() += 1;
        }
        json!(m)
    };
    let datasheet = json!({
        "fingerprint": fingerprint,
        "config": config,
        "counts": {
            "read": items.len(),
            "passing_gate": passing.len(),
            "selected": selected.len(),
            "selected_by_family": count_by(&selected, |it| &it.family),
            "selected_by_env": count_by(&selected, |it| &it.env),
        },
        "dropped": {
            "not_selected": not_selected.len(),
            "gate_reasons": reason_counts(&reasons, &all_idx),
        },
        "gate_would_throw_away": {
            "trajectories": gate_dropped.len(),
            "selected_anyway": selected_despite_gate,
            "features_only_they_have": gate_loses.len(),
            "examples": gate_loses.iter().take(12).collect::<Vec<_>>(),
        },
        "scores": {"read": scores(&all_idx), "selected": scores(&selected)},
        "diversity": {
            "read": Diversity::of(&items),
            "passing_gate": Diversity::of(passing_refs.iter().copied()),
            "selected": Diversity::of(selected_refs.iter().copied()),
        },
        "batches": batch_report,
        "curriculum": stages_report,
        "files": written.keys().collect::<Vec<_>>(),
    });
    written.insert(
        "datasheet.json".into(),
        serde_json::to_vec_pretty(&datasheet)?,
    );
    written.insert("datasheet.md".into(), markdown(&datasheet).into_bytes());
    for (name, bytes) in &written {
        let path = a.out.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        write_file(&path, bytes)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&datasheet)?);
    } else {
        print!("{}", markdown(&datasheet));
    }
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
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

fn markdown(d: &Value) -> String {
    let c = &d["counts"];
    let mut out = format!(
        "# Curated trajectories\n\nFingerprint `{}`.\n\n{} read, {} pass the gate, {} selected ({}).\n",
        d["fingerprint"].as_str().unwrap_or(""),
        c["read"],
        c["passing_gate"],
        c["selected"],
        d["config"]["select"].as_str().unwrap_or("")
    );
    let reasons = d["dropped"]["gate_reasons"].as_object();
    if let Some(r) = reasons.filter(|r| !r.is_empty()) {
        out.push_str("\nWhy the gate drops trajectories (a trajectory may have several reasons):\n\n| reason | trajectories |\n|---|---|\n");
        for (k, v) in r {
            out.push_str(&format!("| {k} | {v} |\n"));
        }
    }
    let g = &d["gate_would_throw_away"];
    out.push_str(&format!(
        "\nThe gate would throw away {} trajectories; {} features (tools, tool pairs, state transitions) appear only in them; {} of them are selected anyway.\n",
        g["trajectories"],
        g["features_only_they_have"],
        g["selected_anyway"].as_array().map_or(0, Vec::len)
    ));
    out.push_str("\n| set | trajectories | tools | tool pairs | edge kinds | argument entropy (bits) | failed steps |\n|---|---|---|---|---|---|---|\n");
    for set in ["read", "passing_gate", "selected"] {
        let v = &d["diversity"][set];
        out.push_str(&format!(
            "| {set} | {} | {} | {} | {} | {:.2} | {:.1}% |\n",
            v["items"],
            v["tools"],
            v["bigrams"],
            v["edge_kinds"],
            v["argument_entropy"].as_f64().unwrap_or(0.0),
            100.0 * v["failure_share"].as_f64().unwrap_or(0.0)
        ));
    }
    let s = &d["scores"]["selected"];
    out.push_str(&format!(
        "\nSelected: final state equal to the executor's replay in {} of {} with the truth.\nConsistency histogram (tenths, selected): {}\n",
        s["final_state_equal"], s["with_truth"], s["consistency"]
    ));
    if let Some(b) = d["batches"].as_object() {
        out.push_str(&format!(
            "\nBatches: {} of {} (left over per tier: {}).\n",
            b["batches"], b["size"], b["left_over"]
        ));
    }
    if let Some(stages) = d["curriculum"].as_array().filter(|s| !s.is_empty()) {
        out.push_str("\nCurriculum:");
        for st in stages {
            out.push_str(&format!(
                " stage {} (≥ {}): {};",
                st["stage"], st["min_consistency"], st["trajectories"]
            ));
        }
        out.push('\n');
    }
    out.push_str(&format!("\nFiles: {}\n", d["files"]));
    out
}

//! `envsim curate`: synthesized trajectories (`envsim synth` records) gated, sampled or
//! selected on the consistency–diversity Pareto front, mixed into batches by consistency tier,
//! staged as a strictness curriculum, and exported for training (OpenAI chat, LLaMA-Factory
//! ShareGPT with its `dataset_info.json`, Hermes, RL episodes) with a datasheet.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use envsim_core::curate::{Gate, Tier, Weights};
use envsim_synth::curation::{
    self, Datasheet, ErrorPaths, ExportFormat as Format, Records, Selection, Settings,
};
use std::path::PathBuf;

/// How trajectories are chosen (`--select`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum SelectArg {
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

/// An export format (`--formats`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
enum FormatArg {
    /// OpenAI chat fine-tuning lines (`openai.jsonl`).
    Openai,
    /// LLaMA-Factory ShareGPT function calling (`sharegpt.jsonl` and `dataset_info.json`).
    Sharegpt,
    /// Hermes function calling (`hermes.jsonl`).
    Hermes,
    /// RL episodes with final-state checkers (`rl_episodes.jsonl`).
    Rl,
}

/// What becomes of calls an error-path task made to fail (`--error-paths`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ErrorPathsArg {
    /// Kept as training targets (counted in the datasheet).
    Keep,
    /// Their trajectories are dropped.
    Drop,
    /// Kept, with the assistant turns that made them weighted 0 in the OpenAI chat lines
    /// (ShareGPT and Hermes have no per-turn weight and carry them as they are).
    Mask,
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
    #[arg(long, value_enum, default_value_t = SelectArg::Gate)]
    select: SelectArg,
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
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = vec![FormatArg::Openai, FormatArg::Sharegpt, FormatArg::Hermes, FormatArg::Rl])]
    formats: Vec<FormatArg>,
    /// What becomes of the calls an error-path task made to fail (answered as failures):
    /// as training targets they teach the failing call. Counted in the datasheet either way.
    #[arg(long, value_enum, default_value_t = ErrorPathsArg::Keep)]
    error_paths: ErrorPathsArg,
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

/// The settings the arguments say, checked.
fn settings(a: &CurateArgs) -> Result<Settings> {
    let settings = Settings {
        inputs: a.inputs.iter().map(|p| p.display().to_string()).collect(),
        select: match a.select {
            SelectArg::Gate => Selection::Gate,
            SelectArg::Weighted => Selection::Weighted,
            SelectArg::Pareto => Selection::Pareto,
        },
        count: a.count,
        floor: a.floor,
        gate: Gate {
            min_scs: a.min_scs,
            min_spec_cs: a.min_spec_cs,
            min_dcs: a.min_dcs,
            min_consistency: a.min_consistency,
            allow_uncertain: a.allow_uncertain,
            require_scores: a.require_scores,
        },
        keep_unfinished: a.keep_unfinished,
        weights: parse_weights(&a.weights)?,
        power: a.power,
        seed: a.seed,
        mix: parse_mix(&a.mix)?,
        batch_size: a.batch_size,
        curriculum: a.curriculum.clone(),
        formats: a
            .formats
            .iter()
            .map(|f| match f {
                FormatArg::Openai => Format::Openai,
                FormatArg::Sharegpt => Format::Sharegpt,
                FormatArg::Hermes => Format::Hermes,
                FormatArg::Rl => Format::Rl,
            })
            .collect(),
        error_paths: match a.error_paths {
            ErrorPathsArg::Keep => ErrorPaths::Keep,
            ErrorPathsArg::Drop => ErrorPaths::Drop,
            ErrorPathsArg::Mask => ErrorPaths::Mask,
        },
    };
    settings.check()?;
    Ok(settings)
}

pub fn run(a: CurateArgs) -> Result<()> {
    let settings = settings(&a)?;
    let mut records = Records::default();
    for path in &a.inputs {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        records.add(&path.display().to_string(), &text)?;
    }
    let curated = curation::curate(&records, &settings)?;
    let mut files = curated.files;
    files.insert(
        "datasheet.json".into(),
        serde_json::to_vec_pretty(&curated.datasheet)?,
    );
    files.insert(
        "datasheet.md".into(),
        markdown(&curated.datasheet).into_bytes(),
    );
    for (name, bytes) in &files {
        let path = a.out.join(name);
        crate::output::write_atomic(&path, bytes)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&curated.datasheet)?);
    } else {
        print!("{}", markdown(&curated.datasheet));
    }
    Ok(())
}

fn markdown(d: &Datasheet) -> String {
    let c = &d.counts;
    let select = match d.config.select {
        Selection::Gate => "gate",
        Selection::Weighted => "weighted",
        Selection::Pareto => "pareto",
    };
    let mut out = format!(
        "# Curated trajectories\n\nFingerprint `{}`.\n\n{} read, {} pass the gate, {} selected ({select}).\n",
        d.fingerprint, c.read, c.passing_gate, c.selected,
    );
    if !d.dropped.gate_reasons.is_empty() {
        out.push_str("\nWhy the gate drops trajectories (a trajectory may have several reasons):\n\n| reason | trajectories |\n|---|---|\n");
        for (k, v) in &d.dropped.gate_reasons {
            out.push_str(&format!("| {k} | {v} |\n"));
        }
    }
    let g = &d.gate_would_throw_away;
    out.push_str(&format!(
        "\nThe gate would throw away {} trajectories; {} features (tools, tool pairs, state transitions) appear only in them; {} of them are selected anyway.\n",
        g.trajectories,
        g.features_only_they_have,
        g.selected_anyway.len()
    ));
    let e = &d.deliberate_errors;
    if e.calls_read > 0 {
        let handling = match e.handling {
            ErrorPaths::Keep => "kept as training targets",
            ErrorPaths::Drop => "their trajectories dropped",
            ErrorPaths::Mask => "weighted 0 in the OpenAI chat lines",
        };
        out.push_str(&format!(
            "\nCalls error-path tasks made to fail: {} in {} trajectories read, {} in {} selected ({handling}).\n",
            e.calls_read, e.trajectories_read, e.calls_selected, e.trajectories_selected
        ));
    }
    out.push_str("\n| set | trajectories | tools | tool pairs | edge kinds | argument entropy (bits) | failed steps |\n|---|---|---|---|---|---|---|\n");
    for (set, v) in [
        ("read", &d.diversity.read),
        ("passing_gate", &d.diversity.passing_gate),
        ("selected", &d.diversity.selected),
    ] {
        out.push_str(&format!(
            "| {set} | {} | {} | {} | {} | {:.2} | {:.1}% |\n",
            v.items,
            v.tools,
            v.bigrams,
            v.edge_kinds,
            v.argument_entropy,
            100.0 * v.failure_share
        ));
    }
    let s = &d.scores.selected;
    out.push_str(&format!(
        "\nSelected: final state equal to the executor's replay in {} of {} with the truth.\nConsistency histogram (tenths, selected): {}\n",
        s.final_state_equal,
        s.with_truth,
        serde_json::to_string(&s.consistency).unwrap_or_default()
    ));
    if let Some(b) = &d.batches {
        out.push_str(&format!(
            "\nBatches: {} of {} (left over per tier: {}).\n",
            b.batches,
            b.size,
            serde_json::to_string(&b.left_over).unwrap_or_default()
        ));
    }
    if !d.curriculum.is_empty() {
        out.push_str("\nCurriculum:");
        for st in &d.curriculum {
            out.push_str(&format!(
                " stage {} (≥ {}): {};",
                st.stage, st.min_consistency, st.trajectories
            ));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "\nFiles: {}\n",
        serde_json::to_string(&d.files).unwrap_or_default()
    ));
    out
}

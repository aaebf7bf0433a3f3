//! `envsim bench build|info|slice-check`.

mod slice;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use envsim_bench::composition::{sample, Composition, SampleOptions};
use envsim_bench::output::{
    export_reference_json, reference_json_estimate, render, write_reference_json,
};
use envsim_bench::slice_check::SliceCheckError;
use envsim_bench::trajectories::import as import_trajectories;
use envsim_bench::verify::{verify_stream, Mismatch, VerifyError, VerifyReport};
use envsim_core::formats::parse_benchmark;
use envsim_core::score::stratum_of;
use envsim_eval::records::{open_benchmark, ReadError, RecordStream, Source};
use envsim_exec::package::EnvPackage;
use envsim_exec::Executor;
use slice::by_name;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Collect transitions from environments and sample a stratified benchmark.
    Build(BuildArgs),
    /// Counts per stratum and environment of a benchmark file, and its fingerprint.
    Info {
        /// Benchmark file (reference JSON or JSONL).
        file: PathBuf,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Check prompt slicing on a benchmark (the footprint oracle) and compare prompt sizes.
    SliceCheck(slice::SliceCheckArgs),
    /// Replay a benchmark from its own file: every sample's call, executed again from its
    /// stored state before (with its seed and clock), must give the stored observation and
    /// state after. Exits 1 naming each sample that does not.
    Verify {
        /// Benchmark file (reference JSON or JSONL; default: the bundled benchmark).
        file: Option<PathBuf>,
        /// Environment packages, for samples that do not carry their code or class (default:
        /// the bundled corpus, or $ENVSIM_ENVS).
        #[arg(long, value_name = "DIR")]
        envs: Option<PathBuf>,
        /// Worker processes.
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// JSON report on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Write an envsim benchmark JSONL (compact or not) as reference-format JSON, whole states
    /// in every sample, one sample at a time: what `bench build --reference-json always`
    /// writes as `benchmark.json`.
    ExportReference {
        /// The envsim benchmark (`benchmark.jsonl`).
        file: PathBuf,
        /// Environment packages, for each sample's `env_code` (default: the bundled corpus, or
        /// $ENVSIM_ENVS); environments not found there get an empty code.
        #[arg(long, value_name = "DIR")]
        envs: Option<PathBuf>,
        /// Where to write the reference JSON.
        #[arg(long, value_name = "FILE.json")]
        out: PathBuf,
    },
    /// Write the bundled benchmark (the default of `envsim eval`) as a reference-format JSON
    /// file, e.g. to run another evaluator on exactly the same samples.
    Bundled {
        /// Where to write it.
        #[arg(long, value_name = "FILE.json")]
        out: PathBuf,
    },
}

#[derive(Debug, Args)]
struct BuildArgs {
    /// Folder of environment packages (default: the bundled corpus, or $ENVSIM_ENVS).
    #[arg(long, value_name = "DIR")]
    envs: Option<PathBuf>,
    /// Composition file (JSON); default: the reference composition (400 samples).
    #[arg(long, value_name = "FILE")]
    composition: Option<PathBuf>,
    /// Seed of the walks and of the sampling.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[command(flatten)]
    walk: crate::context::WalkArgs,
    /// Build from recorded agent trajectories instead of random walks (JSONL or JSON array).
    #[arg(long, value_name = "FILE")]
    trajectories: Option<PathBuf>,
    /// Format of --trajectories (auto: detected per record). Runs that record states are used
    /// as recorded; call-only runs (no state after any step, e.g. chat transcripts) are
    /// re-executed from their initial state on the package they name, as `env replay` does.
    #[arg(long, value_enum, default_value_t = crate::context::FormatArg::Auto)]
    trajectory_format: crate::context::FormatArg,
    /// Keep transitions whose output depends on the clock or the random seed.
    #[arg(long)]
    allow_unpredictable: bool,
    /// Write a benchmark even when some bucket cannot be filled.
    #[arg(long)]
    allow_underfill: bool,
    /// Budget of transitions for walk builds: while a bucket is short, envsim collects further
    /// rounds of longer walks until it fills or the next round would pass this many.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    max_transitions: usize,
    /// The largest share of one bucket a single environment may fill (rounded up to whole
    /// samples); 1 lifts the cap.
    #[arg(long, default_value_t = envsim_bench::composition::DEFAULT_MAX_ENV_SHARE, value_parser = share)]
    max_env_share: f64,
    /// Write a benchmark even when some samples do not replay from their stored state before
    /// (e.g. recorded trajectories of nondeterministic code); they are listed either way.
    #[arg(long)]
    allow_unreplayable: bool,
    /// Also write `benchmark.json` in the reference format (whole states in every sample):
    /// auto writes it unless it would pass 512 MB (`bench export-reference` writes it later).
    #[arg(long, value_enum, default_value_t = ReferenceJson::Auto)]
    reference_json: ReferenceJson,
    /// Output folder.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// Whether `bench build` writes the reference-format `benchmark.json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ReferenceJson {
    /// Unless it would pass 512 MB.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// The size up to which `--reference-json auto` writes `benchmark.json`.
const REFERENCE_JSON_AUTO_LIMIT: u64 = 512 * 1024 * 1024;

pub fn run(args: BenchArgs) -> Result<()> {
    match args.command {
        BenchCommand::Build(build) => build_cmd(build),
        BenchCommand::Info { file, json } => info(&file, json),
        BenchCommand::SliceCheck(check) => slice::run(check),
        BenchCommand::Verify {
            file,
            envs,
            workers,
            json,
        } => {
            // Read as a stream: a few samples are held at a time, not the file.
            let (reader, name): (Box<dyn Source>, String) = match &file {
                Some(path) => (
                    Box::new(
                        open_benchmark(path)
                            .with_context(|| format!("cannot read {}", path.display()))?,
                    ),
                    path.display().to_string(),
                ),
                None => (
                    Box::new(std::io::Cursor::new(crate::bundled::benchmark()?)),
                    crate::bundled::NAME.to_owned(),
                ),
            };
            let root = crate::context::Corpus::choose(envs);
            let packages = by_name(root.load_all()?);
            let report = verify_benchmark(reader, &name, &packages, workers)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            }
            print_verify(&name, &report);
            if !report.passed() {
                bail!(
                    "{name}: {} of {} samples do not replay from their stored state",
                    report.findings.len(),
                    report.checked
                );
            }
            Ok(())
        }
        BenchCommand::ExportReference { file, envs, out } => export_reference(&file, envs, &out),
        BenchCommand::Bundled { out } => {
            let bytes = crate::bundled::benchmark()?;
            crate::output::write_atomic(&out, &bytes)?;
            eprintln!(
                "wrote the bundled benchmark to {} ({} bytes, SHA-256 {})",
                out.display(),
                bytes.len(),
                crate::bundled::fingerprint()?
            );
            Ok(())
        }
    }
}

fn build_cmd(a: BuildArgs) -> Result<()> {
    let root = crate::context::Corpus::choose(a.envs.clone());
    let composition = match &a.composition {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            Composition::from_json(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?
        }
        None => Composition::reference(),
    };
    let packages = root.load_all()?;
    if packages.is_empty() && a.trajectories.is_none() {
        bail!("no environment packages in {}", root.display());
    }
    let packages_for_verify = by_name(packages.clone());
    let env_codes: BTreeMap<String, String> = packages
        .iter()
        .map(|p| (p.manifest.name.clone(), p.code.code.to_string()))
        .collect();
    let options = SampleOptions {
        seed: a.seed,
        allow_unpredictable: a.allow_unpredictable,
        allow_underfill: false,
        max_env_share: a.max_env_share,
    };
    // A bucket that the per-environment cap makes impossible is refused before anything is
    // collected: more rounds of walks could never fill it.
    if a.trajectories.is_none() && !a.allow_underfill {
        let impossible =
            envsim_bench::composition::unfillable(&composition, &options, packages.len());
        if !impossible.is_empty() {
            bail!(
                "no collection can fill this composition from {} environment{}: {} (or --allow-underfill to write a short benchmark)",
                packages.len(),
                if packages.len() == 1 { "" } else { "s" },
                impossible.join("; ")
            );
        }
    }
    let started = std::time::Instant::now();
    let transitions = match &a.trajectories {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let source = path.display().to_string();
            let imported =
                import_trajectories(&text, &source, a.trajectory_format.format(), &packages)?;
            let mut transitions = imported.transitions;
            if !imported.call_only.is_empty() {
                let replayed = replay_call_only(&packages, &imported.call_only, &source, &a)?;
                let walk_offset = transitions.iter().map(|t| t.walk + 1).max().unwrap_or(0);
                for run in replayed {
                    transitions.extend(run.steps.into_iter().map(|s| {
                        let mut t = s.transition;
                        t.walk += walk_offset;
                        t
                    }));
                }
            }
            transitions
        }
        None => crate::context::walk_transitions(packages.clone(), &a.walk, a.seed)?.into_records(),
    };
    // Walk builds keep collecting — more walks, each round longer — while some bucket is short
    // and the budget allows: round r (1, 2, ...) adds `--walks` walks of `--steps × (r + 1)`
    // steps per initial state, seeded from (seed, r). Same inputs, same rounds, same benchmark.
    let mut transitions = transitions;
    let mut round = 0usize;
    let mut usable_before: Option<usize> = None;
    let mut empty_rounds = 0;
    let sampled = loop {
        let short = match sample(&transitions, &composition, &options) {
            Ok(sampled) => break sampled,
            Err(short) => short,
        };
        // Candidates the short buckets could use. Two rounds in a row that add none mean more
        // rounds cannot help (e.g. the per-environment cap binds and no other environment
        // produces such transitions); one empty round of short walks can be bad luck.
        let usable: usize = short.0.iter().map(|s| s.available - s.capped).sum();
        if usable_before.is_some_and(|before| usable <= before) {
            empty_rounds += 1;
        } else {
            empty_rounds = 0;
        }
        let stalled = empty_rounds >= 2;
        usable_before = Some(usable);
        let next_steps = a.walk.steps * (round + 2);
        let next_size = packages
            .iter()
            .map(|p| p.states.len() * a.walk.walks * next_steps)
            .sum::<usize>();
        if a.trajectories.is_some() || stalled || transitions.len() + next_size > a.max_transitions
        {
            if a.allow_underfill {
                break sample(
                    &transitions,
                    &composition,
                    &SampleOptions {
                        allow_underfill: true,
                        ..options.clone()
                    },
                )?;
            }
            if a.trajectories.is_none() {
                let why = if stalled {
                    "the last two rounds added no usable candidates".to_owned()
                } else {
                    format!(
                        "another round of {next_size} would pass --max-transitions {}",
                        a.max_transitions
                    )
                };
                bail!(
                    "{short}; {} transitions collected in {} rounds, and {why}",
                    transitions.len(),
                    round + 1
                );
            }
            return Err(short.into());
        }
        round += 1;
        eprintln!("round {round}: {short}");
        eprintln!(
            "round {round}: collecting {} more walks of {next_steps} steps per initial state",
            a.walk.walks
        );
        let walk = crate::context::WalkArgs {
            steps: next_steps,
            ..a.walk.clone()
        };
        let seed = envsim_core::rng::Rng::derive(a.seed, &format!("round {round}")).next_u64();
        // A round's walks are numbered after every walk before it.
        let offset = transitions.iter().map(|t| t.walk + 1).max().unwrap_or(0);
        let mut more =
            crate::context::walk_transitions(packages.clone(), &walk, seed)?.into_records();
        for t in &mut more {
            t.walk += offset;
        }
        transitions.extend(more);
    };
    let collected = started.elapsed();
    let files = render(&transitions, &sampled, &composition, a.seed);
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let outputs = [
        ("benchmark.jsonl", files.envsim_jsonl.clone()),
        (
            "datasheet.json",
            serde_json::to_string_pretty(&files.datasheet_json)? + "\n",
        ),
        ("datasheet.md", files.datasheet_md.clone()),
    ];
    // A benchmark must replay from its own file; checked before anything is written.
    let replay = verify_benchmark(
        std::io::Cursor::new(files.envsim_jsonl.clone().into_bytes()),
        "benchmark.jsonl",
        &packages_for_verify,
        a.walk.workers,
    )?;
    print_verify("benchmark.jsonl", &replay);
    if !replay.passed() && !a.allow_unreplayable {
        bail!(
            "{} of {} sampled transitions do not replay from their stored state before; nothing was written (see above; --allow-unreplayable writes it anyway)",
            replay.findings.len(),
            replay.checked
        );
    }
    for (name, text) in &outputs {
        crate::output::write_atomic(&a.out.join(name), text)?;
    }
    let estimate = reference_json_estimate(&transitions, &sampled);
    let reference_path = a.out.join("benchmark.json");
    let write_reference = match a.reference_json {
        ReferenceJson::Always => true,
        ReferenceJson::Never => false,
        ReferenceJson::Auto => estimate <= REFERENCE_JSON_AUTO_LIMIT,
    };
    if write_reference {
        let mut file = envsim_fs::AtomicFile::create(&reference_path)
            .with_context(|| format!("cannot write {}", reference_path.display()))?;
        {
            let mut out = std::io::BufWriter::new(&mut file);
            write_reference_json(&mut out, &transitions, &sampled, &env_codes)
                .and_then(|()| std::io::Write::flush(&mut out))
                .with_context(|| format!("cannot write {}", reference_path.display()))?;
        }
        file.commit()
            .with_context(|| format!("cannot write {}", reference_path.display()))?;
    } else {
        // A stale reference file from an earlier build must not pass for this one.
        if reference_path.exists() {
            std::fs::remove_file(&reference_path)
                .with_context(|| format!("cannot remove the stale {}", reference_path.display()))?;
        }
        eprintln!(
            "benchmark.json not written: the reference format repeats both whole states in every sample (about {} MB here); write it with `envsim bench export-reference {} --out FILE.json`",
            estimate / 1_000_000,
            a.out.join("benchmark.jsonl").display()
        );
    }
    eprintln!(
        "collected {} transitions in {:.1} s; sampled {} from {} environments into {}",
        transitions.len(),
        collected.as_secs_f64(),
        sampled.picks.len(),
        files.datasheet_json["environments"],
        a.out.display()
    );
    for s in &sampled.shortfalls {
        eprintln!("warning: {}", shortfall_warning(s));
    }
    println!("{}", files.fingerprint);
    Ok(())
}

/// Re-executes the call-only runs of `--trajectories` (seeded with `--seed`) and says how
/// their observations compare with the recorded ones.
fn replay_call_only(
    packages: &[EnvPackage],
    runs: &[envsim_bench::trajectories::RecordedRun],
    source: &str,
    a: &BuildArgs,
) -> Result<Vec<envsim_bench::replay::ReplayedRun>> {
    let runtime = crate::context::exec_runtime()?;
    let limits = crate::context::exec_limits()?;
    let workers = a.walk.workers;
    let replayed = runtime.block_on(async {
        let executor = Arc::new(Executor::new(workers, limits).await?);
        let choice = envsim_bench::replay::ReplayChoice {
            seed: a.seed,
            workers,
            clock_step: Some(a.walk.clock_step),
            ..Default::default()
        };
        crate::context::replay_runs(executor, packages, runs, source, choice).await
    })?;
    eprintln!("{source}: {} call-only runs re-executed", replayed.len());
    crate::context::print_summary(source, &replayed);
    Ok(replayed)
}

/// A share in (0, 1].
fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(format!("{text:?} is not a share in (0, 1]")),
    }
}

/// Replays every sample of a benchmark file ([`envsim_bench::verify`]) on `workers` worker
/// processes, reading it as a stream; code and class come from the samples or else from
/// `packages`. A file that is not valid JSON fails before anything else does, as when the file
/// was read whole first.
fn verify_benchmark(
    reader: impl Source + 'static,
    name: &str,
    packages: &HashMap<String, EnvPackage>,
    workers: usize,
) -> Result<VerifyReport> {
    let mut stream =
        RecordStream::start(reader, name).with_context(|| format!("cannot read {name}"))?;
    let read_error = |error: ReadError| match error {
        ReadError::Io(error) => anyhow::Error::new(error).context(format!("cannot read {name}")),
        ReadError::Format(error) => error.into(),
    };
    let runtime = match crate::context::exec_runtime() {
        Ok(runtime) => runtime,
        Err(error) => return Err(stream.blocking_rest_error().map_or(error, read_error)),
    };
    let workers = workers.max(1);
    runtime.block_on(async move {
        let executor = match crate::context::exec_limits() {
            Ok(limits) => Executor::new(workers, limits).await.map_err(Into::into),
            Err(error) => Err(error),
        };
        let executor = match executor {
            Ok(executor) => Arc::new(executor),
            Err(error) => return Err(stream.rest_error().await.map_or(error, read_error)),
        };
        verify_stream(executor, name, &mut stream.items, packages, workers * 2)
            .await
            .map_err(read_error)?
            .map_err(|e| match e {
                VerifyError::Job(SliceCheckError::NoCode { .. }) => {
                    anyhow!("{name}: {e} (pass --envs DIR)")
                }
                other => anyhow!("{name}: {other}"),
            })
    })
}

/// `envsim bench export-reference`.
fn export_reference(file: &Path, envs: Option<PathBuf>, out: &Path) -> Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let root = crate::context::Corpus::choose(envs);
    let packages = if root.exists() {
        by_name(root.load_all()?)
    } else {
        HashMap::new()
    };
    let code = |env: &str| {
        packages
            .get(env)
            .map(|p| p.code.code.to_string())
            .unwrap_or_default()
    };
    let mut target = envsim_fs::AtomicFile::create(out)
        .with_context(|| format!("cannot write {}", out.display()))?;
    let written = {
        let mut writer = std::io::BufWriter::new(&mut target);
        let n = export_reference_json(&bytes, &file.display().to_string(), &code, &mut writer)?;
        std::io::Write::flush(&mut writer)
            .with_context(|| format!("cannot write {}", out.display()))?;
        n
    };
    target
        .commit()
        .with_context(|| format!("cannot write {}", out.display()))?;
    eprintln!("wrote {written} samples to {}", out.display());
    Ok(())
}

/// One line per sample that does not replay, then the count.
fn print_verify(name: &str, report: &VerifyReport) {
    for f in &report.findings {
        let what = match f.mismatch {
            Mismatch::Observation => "observation",
            Mismatch::State => "state after",
        };
        eprintln!(
            "{name}: sample {} ({} {}): {what} differs: {}",
            f.sample, f.env, f.tool, f.detail
        );
    }
    eprintln!(
        "{name}: {} of {} samples replay exactly from their stored state",
        report.identical, report.checked
    );
}

fn info(file: &Path, as_json: bool) -> Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let transitions = parse_benchmark(&bytes, &file.display().to_string())?;
    let mut strata: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut envs: BTreeMap<String, usize> = BTreeMap::new();
    for t in &transitions {
        *strata.entry(stratum_of(t).key()).or_default() += 1;
        *envs
            .entry(t.env_id.clone().unwrap_or_else(|| "(unknown)".into()))
            .or_default() += 1;
    }
    let fingerprint = envsim_bench::output::fingerprint(&bytes);
    if as_json {
        let out = serde_json::json!({"file": file.display().to_string(), "samples": transitions.len(), "sha256": fingerprint, "strata": strata, "environments": envs});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "{}: {} samples, sha256 {fingerprint}",
        file.display(),
        transitions.len()
    );
    println!("strata:");
    for (k, v) in &strata {
        println!("  {k:<16} {v}");
    }
    println!("environments ({}):", envs.len());
    for (k, v) in &envs {
        println!("  {k:<24} {v}");
    }
    Ok(())
}

/// What a bucket left short holds: the samples taken (the available ones the per-environment
/// cap did not hold back), of those wanted.
fn shortfall_warning(s: &envsim_bench::composition::Shortfall) -> String {
    let held_back = if s.capped > 0 {
        format!(
            " ({} more held back by the per-environment cap, --max-env-share)",
            s.capped
        )
    } else {
        String::new()
    };
    format!(
        "bucket {:?} holds {} of {}{held_back}",
        s.bucket,
        s.available.saturating_sub(s.capped),
        s.wanted
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shortfall_says_what_the_bucket_holds_not_what_was_available() {
        let shortfall = |available, capped| envsim_bench::composition::Shortfall {
            bucket: "simple_2".into(),
            wanted: 25,
            available,
            capped,
        };
        assert_eq!(
            shortfall_warning(&shortfall(32, 17)),
            "bucket \"simple_2\" holds 15 of 25 (17 more held back by the per-environment cap, --max-env-share)"
        );
        assert_eq!(
            shortfall_warning(&shortfall(0, 0)),
            "bucket \"simple_2\" holds 0 of 25"
        );
    }
}

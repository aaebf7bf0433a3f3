//! `envsim bench slice-check`: the prompt-slicing oracle and prompt sizes on a benchmark.
//!
//! The checks, statistics and the report live in [`envsim_bench::slice_check`]; this module
//! reads the benchmark and the packages, runs the checks on an executor, plugs in the token
//! counter and renders the report.
//!
//! Exit status 1 when any sample violates the oracle or cannot be executed.

use anyhow::{anyhow, bail, Result};
use clap::{Args, ValueEnum};
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use envsim_bench::slice_check::{
    check_all, estimate_tokens, jobs, report, SampleRef, SliceCheckError, SliceJob, SliceReport,
    Stats, Variants, BUDGETS,
};
use envsim_core::formats::{parse_benchmark, records};
use envsim_exec::package::EnvPackage;
use envsim_exec::Executor;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned tables for the terminal.
    Table,
    /// One JSON object.
    Json,
}

#[derive(Debug, Args)]
pub struct SliceCheckArgs {
    /// Benchmark file (reference JSON or JSONL; default: the bundled benchmark).
    #[arg(long, value_name = "FILE")]
    bench: Option<PathBuf>,
    /// Environment packages, for samples that do not carry their code (default: the bundled
    /// corpus, or $ENVSIM_ENVS).
    #[arg(long, value_name = "DIR")]
    envs: Option<PathBuf>,
    /// Worker processes.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Count tokens with this GGUF model's tokenizer (`default`: the default local model,
    /// fetched if needed) instead of estimating characters / 4.
    #[cfg(feature = "local")]
    #[arg(long, value_name = "FILE.gguf|default")]
    tokenizer: Option<PathBuf>,
}

/// Packages by name, for [`benchmark_jobs`].
pub fn by_name(packages: Vec<EnvPackage>) -> HashMap<String, EnvPackage> {
    packages
        .into_iter()
        .map(|p| (p.manifest.name.clone(), p))
        .collect()
}

/// Reads a benchmark file into jobs (each sample with its code, class, seed and clock; see
/// [`jobs`]); `job_error` words a sample whose code or class cannot be found.
pub fn benchmark_jobs(
    bytes: &[u8],
    name: &str,
    packages: &HashMap<String, EnvPackage>,
    job_error: impl FnOnce(SliceCheckError) -> anyhow::Error,
) -> Result<Vec<SliceJob>> {
    let transitions = parse_benchmark(bytes, name)?;
    // The raw records (parsed states, ~25× their text) are dropped once the jobs hold what
    // they need.
    let raw = records(bytes, name)?;
    jobs(transitions, &raw, packages).map_err(job_error)
}

pub fn run(args: SliceCheckArgs) -> Result<()> {
    let (bytes, name) = crate::bundled::read_or_bundled(args.bench.as_deref())?;
    let root = crate::context::Corpus::choose(args.envs.clone());
    let packages = if root.exists() {
        by_name(root.load_all()?)
    } else {
        HashMap::new()
    };
    let jobs = benchmark_jobs(&bytes, &name, &packages, |e| match e {
        SliceCheckError::NoCode { .. } => anyhow!("{e} in {}", root.display()),
        other => anyhow!(other),
    })?;
    let runtime = crate::context::exec_runtime()?;
    let workers = args.workers.max(1);
    let checked = runtime.block_on(async move {
        let executor = Arc::new(Executor::new(workers, crate::context::exec_limits()?).await?);
        anyhow::Ok(check_all(executor, jobs).await?)
    })?;
    #[cfg(feature = "local")]
    let tokenizer = match &args.tokenizer {
        None => None,
        Some(path) => {
            let explicit = (path.as_os_str() != "default").then_some(path.as_path());
            let python = std::env::var_os("ENVSIM_PYTHON")
                .map_or_else(|| PathBuf::from("python3"), PathBuf::from);
            let resolved = envsim_model::model::resolve(explicit, true, &python, &mut |line| {
                eprintln!("model: {line}")
            })?;
            let tokenizer =
                envsim_model::local::Tokenizer::load(&resolved).map_err(anyhow::Error::msg)?;
            let label = format!(
                "tokenizer of {}",
                resolved.file_name().unwrap_or_default().to_string_lossy()
            );
            Some((tokenizer, label))
        }
    };
    #[cfg(feature = "local")]
    let report = match &tokenizer {
        Some((tokenizer, label)) => {
            report(&name, &checked, &|text: &str| tokenizer.count(text), label)
        }
        None => report(
            &name,
            &checked,
            &estimate_tokens,
            "characters / 4 (estimate)",
        ),
    };
    #[cfg(not(feature = "local"))]
    let report = report(
        &name,
        &checked,
        &estimate_tokens,
        "characters / 4 (estimate)",
    );
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Table => print!("{}", table(&report)),
    }
    let (violations, errors) = (report.violations.len(), report.errors.len());
    if violations > 0 || errors > 0 {
        bail!("{violations} slice violation(s), {errors} sample(s) could not be executed");
    }
    Ok(())
}

/// A JSON-like rendering of an optional number (`null` when absent), as the report shows it.
fn number(value: Option<f64>) -> String {
    value.map_or_else(|| "null".to_owned(), |v| serde_json::json!(v).to_string())
}

/// Why tables stay whole, grouped by environment, table and reason, most samples first.
fn whole_tables(report: &SliceReport) -> String {
    let mut groups: BTreeMap<(&str, String, &str), usize> = BTreeMap::new();
    for sample in &report.whole_tables {
        for t in &sample.tables {
            *groups
                .entry((
                    sample.sample.env.as_str(),
                    t.table.to_string(),
                    t.reason.as_str(),
                ))
                .or_default() += 1;
        }
    }
    let mut out = format!(
        "tables kept whole: in {} of {} executed samples ({} reasons)\n",
        report.whole_tables.len(),
        report.executed,
        groups.len()
    );
    let mut sorted: Vec<_> = groups.into_iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    for ((env, table, reason), n) in sorted.iter().take(20) {
        out.push_str(&format!("  {n} x {env} {table}: {reason}\n"));
    }
    if sorted.len() > 20 {
        out.push_str(&format!(
            "  … {} more; --format json lists every sample's tables (whole_tables)\n",
            sorted.len() - 20
        ));
    }
    out
}

fn table(report: &SliceReport) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{}: {} samples, {} executed; {} slice violations, {} not reproducible, {} execution errors\n",
        report.benchmark,
        report.samples,
        report.executed,
        report.violations.len(),
        report.not_reproducible.len(),
        report.errors.len(),
    ));
    let f = &report.fallbacks;
    out.push_str(&format!(
        "fallbacks: {} to the whole code and state; code shown whole {}, state shown whole {}\n",
        f.code, f.code_whole, f.state_whole
    ));
    for (reason, n) in &f.reasons {
        out.push_str(&format!("  {n} x {reason}\n"));
    }
    out.push_str(&whole_tables(report));
    let tokens_title = format!("prompt tokens ({})", report.token_counter);
    let tables: [(&str, &Variants<Stats>); 4] = [
        ("prompt characters", &report.prompt_chars),
        (&tokens_title, &report.prompt_tokens),
        ("code characters", &report.code_chars),
        ("state characters (indented JSON)", &report.state_chars),
    ];
    for (title, stats) in tables {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_header(vec![title, "mean", "median", "p90", "max", "total"]);
        for (label, s) in [
            ("full", &stats.full),
            ("sliced", &stats.sliced),
            ("footprint", &stats.footprint),
        ] {
            let cell = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
            t.add_row(vec![
                label.to_owned(),
                cell(s.mean),
                cell(s.median),
                cell(s.p90),
                cell(s.max),
                cell(Some(s.total)),
            ]);
        }
        for column in t.column_iter_mut().skip(1) {
            column.set_cell_alignment(CellAlignment::Right);
        }
        out.push_str(&format!("{t}\n"));
    }
    out.push_str(&format!(
        "full / sliced: {}x; full / footprint: {}x (totals)\n",
        number(report.ratio_full_to.sliced),
        number(report.ratio_full_to.footprint)
    ));
    for budget in BUDGETS {
        if let Some(w) = report.prompts_within_tokens.get(&budget) {
            out.push_str(&format!(
                "prompts within {budget} tokens: full {}, sliced {}, footprint {}\n",
                w.full, w.sliced, w.footprint
            ));
        }
    }
    let u = &report.sliced_chars_after_shared_prefix;
    out.push_str(&format!(
        "sliced prompt characters after the environment's shared prefix: mean {}, median {}\n",
        number(u.mean),
        number(u.median)
    ));
    // (sample, "detail: parts") per finding, by kind.
    let findings: [(&str, Vec<(&SampleRef, String)>); 4] = [
        (
            "violation",
            report
                .violations
                .iter()
                .map(|v| (&v.sample, format!("{}: {}", v.check.as_str(), v.detail)))
                .collect(),
        ),
        (
            "error",
            report
                .errors
                .iter()
                .map(|e| (&e.sample, e.error.clone()))
                .collect(),
        ),
        (
            "not reproducible",
            report
                .not_reproducible
                .iter()
                .map(|n| (&n.sample, n.differs.as_str().to_owned()))
                .collect(),
        ),
        (
            "footprint slice changes the outcome",
            report
                .footprint_outcome_mismatches
                .iter()
                .map(|m| (&m.sample, m.detail.clone()))
                .collect(),
        ),
    ];
    for (what, all) in findings {
        for (sample, detail) in all.iter().take(20) {
            let short: String = detail.chars().take(300).collect();
            let more = if short.len() < detail.len() {
                " …"
            } else {
                ""
            };
            out.push_str(&format!(
                "{what}: sample {} ({} {}): {short}{more}\n",
                sample.id, sample.env, sample.tool,
            ));
        }
        if all.len() > 20 {
            out.push_str(&format!(
                "… {} more ({what}); --format json lists all\n",
                all.len() - 20
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use envsim_bench::slice_check::{estimate_tokens, Parts, SampleCheck};
    use envsim_core::pointer::JsonPointer;
    use envsim_core::prompt::Prompt;
    use envsim_core::slice::TableReason;

    fn executed(id: &str, env: &str, tables: &[(&str, &str)]) -> SampleCheck {
        let prompt = Prompt {
            system: "s".into(),
            user: "u".into(),
        };
        SampleCheck {
            prompts: Some(Variants {
                full: prompt.clone(),
                sliced: prompt.clone(),
                footprint: prompt,
            }),
            parts: Some(Variants {
                full: Parts::default(),
                sliced: Parts::default(),
                footprint: Parts::default(),
            }),
            whole_tables: tables
                .iter()
                .map(|(table, reason)| TableReason {
                    table: JsonPointer::from_tokens([*table]),
                    reason: (*reason).into(),
                })
                .collect(),
            ..SampleCheck::new(SampleRef {
                id: id.into(),
                env: env.into(),
                tool: "t".into(),
            })
        }
    }

    #[test]
    fn whole_tables_are_grouped_by_environment_table_and_reason() {
        let iterated = "iterated at line 4 (for o in orders.values():)";
        let checked = vec![
            executed(
                "a",
                "shop",
                &[("orders", iterated), ("log", "used whole at line 9 (x)")],
            ),
            executed("b", "shop", &[("orders", iterated)]),
            executed("c", "bank", &[]),
        ];
        let r = report("b.json", &checked, &estimate_tokens, "estimate");
        assert_eq!(
            whole_tables(&r),
            "tables kept whole: in 2 of 3 executed samples (2 reasons)\n  \
             2 x shop /orders: iterated at line 4 (for o in orders.values():)\n  \
             1 x shop /log: used whole at line 9 (x)\n"
        );
        // More than twenty reasons: the rest is counted, not listed.
        let many: Vec<SampleCheck> = (0..25)
            .map(|i| {
                executed(
                    &format!("s{i}"),
                    "shop",
                    &[("t", &format!("reason {i:02}"))],
                )
            })
            .collect();
        let text = whole_tables(&report("b.json", &many, &estimate_tokens, "estimate"));
        assert_eq!(text.lines().count(), 22, "{text}");
        assert!(text.contains("  1 x shop /t: reason 00\n"), "{text}");
        assert!(!text.contains("reason 20"), "{text}");
        assert!(text
            .ends_with("  … 5 more; --format json lists every sample's tables (whole_tables)\n"));
    }
}

//! `envsim bench slice-check`: the prompt-slicing oracle and prompt sizes on a benchmark.
//!
//! For every sample the call is executed on the full state with footprint tracing; then
//! - the **oracle**: the static state slice ([`envsim_core::slice`]) must hold every traced read
//!   with the full state's value or absence ([`slice_covers`]), and executing the call on the
//!   slice must give the same observation and the same changes (the tracer cannot tell
//!   `self.x` from `len(self.x)`; re-execution catches what that hides when it matters);
//! - **reproduction**: the traced run must give the sample's stored observation and state
//!   after; a sample that does not is reported as not reproducible, not as a slice failure;
//! - **sizes**: the `envsim` prompt, the `envsim-sliced` prompt and the same layout over the
//!   footprint slice (the static code slice with [`slice_with_reads`]'s state), in characters
//!   and in tokens ([`prompt_tokens`] with a pluggable counter; characters / 4 by default).
//!
//! Exit status 1 when any sample violates the oracle or cannot be executed.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use envsim_core::diff::{changes_to_json, fine_diff, PathStyle};
use envsim_core::formats::{parse_benchmark, records};
use envsim_core::prompt::{sliced_prompt, Prompt, Template};
use envsim_core::sample::Transition;
use envsim_core::slice::{slice_code, slice_covers, slice_state, slice_with_reads};
use envsim_core::stats::{mean, percentile};
use envsim_exec::package::EnvPackage;
use envsim_exec::{Call, CallOutcome, EnvCode, Executor, Limits};
use serde_json::{json, Map, Value};
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

/// The token estimate used when no tokenizer is plugged in: characters / 4, rounded up.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// Tokens of a prompt's two messages under `count` (a real tokenizer can be plugged in here).
pub fn prompt_tokens(prompt: &Prompt, count: &dyn Fn(&str) -> usize) -> usize {
    count(&prompt.system) + count(&prompt.user)
}

fn prompt_chars(prompt: &Prompt) -> usize {
    prompt.system.chars().count() + prompt.user.chars().count()
}

/// One sample to check: the transition and how to execute it.
struct Job {
    t: Transition,
    code: EnvCode,
    seed: u64,
    clock: f64,
}

/// What checking one sample found.
struct Checked {
    id: String,
    env: String,
    tool: String,
    error: Option<String>,
    not_reproducible: Option<&'static str>,
    violation: Option<(String, String)>,
    footprint_mismatch: Option<String>,
    code_fallback: Option<String>,
    code_full: bool,
    state_full: bool,
    /// `envsim`, `envsim-sliced`, footprint-sliced.
    prompts: Option<[Prompt; 3]>,
    /// Characters of code and state: full, sliced, footprint.
    parts: Option<[(usize, usize); 3]>,
}

pub fn run(args: SliceCheckArgs) -> Result<()> {
    let (bytes, name) = match &args.bench {
        Some(path) => (
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?,
            path.display().to_string(),
        ),
        None => (
            crate::bundled::benchmark()?,
            crate::bundled::NAME.to_owned(),
        ),
    };
    let transitions = parse_benchmark(&bytes, &name)?;
    let raw = records(&bytes, &name)?;
    let root = args
        .envs
        .clone()
        .unwrap_or_else(crate::env_cmd::default_envs);
    let packages: HashMap<String, EnvPackage> = if root.is_dir() {
        EnvPackage::load_all(&root)
            .map_err(|e| anyhow!("{e}"))?
            .into_iter()
            .map(|p| (p.manifest.name.clone(), p))
            .collect()
    } else {
        HashMap::new()
    };
    let mut codes: HashMap<(String, String), EnvCode> = HashMap::new();
    let mut jobs = Vec::with_capacity(transitions.len());
    for t in transitions {
        let record = raw
            .get(t.origin.record)
            .map(|r| &r.value)
            .unwrap_or(&Value::Null);
        let step = match t.origin.step {
            Some(k) => &record["trajectory"][k],
            None => record,
        };
        let field = |key: &str| step.get(key).or_else(|| record.get(key));
        let env = t.env_id.clone().unwrap_or_default();
        let package = packages.get(&env);
        let (source, class_name) = if t.env_code.is_empty() {
            let p = package.with_context(|| {
                format!(
                    "sample {}: no code in the benchmark and no package {env:?} in {}",
                    t.id,
                    root.display()
                )
            })?;
            (p.code.code.to_string(), p.manifest.class_name.clone())
        } else {
            let class = field("class_name")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| package.map(|p| p.manifest.class_name.clone()))
                .with_context(|| format!("sample {}: the class name is unknown", t.id))?;
            (t.env_code.clone(), class)
        };
        let code = codes
            .entry((source.clone(), class_name.clone()))
            .or_insert_with(|| EnvCode::new(source, class_name))
            .clone();
        jobs.push(Job {
            seed: field("seed").and_then(Value::as_u64).unwrap_or(0),
            clock: field("clock")
                .and_then(Value::as_f64)
                .unwrap_or(envsim_exec::DEFAULT_CLOCK),
            t,
            code,
        });
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let workers = args.workers.max(1);
    let checked = runtime.block_on(async move {
        let executor = Arc::new(Executor::new(workers, Limits::default()).await?);
        let mut set = tokio::task::JoinSet::new();
        for (index, job) in jobs.into_iter().enumerate() {
            let executor = executor.clone();
            set.spawn(async move { (index, check(&executor, job).await) });
        }
        let mut out = Vec::new();
        while let Some(done) = set.join_next().await {
            out.push(done.context("a check task failed")?);
        }
        out.sort_by_key(|(index, _)| *index);
        anyhow::Ok(out.into_iter().map(|(_, c)| c).collect::<Vec<_>>())
    })?;
    #[cfg(feature = "local")]
    let tokenizer = match &args.tokenizer {
        None => None,
        Some(path) => {
            let explicit = (path.as_os_str() != "default").then_some(path.as_path());
            let python = std::env::var_os("ENVSIM_PYTHON")
                .map_or_else(|| PathBuf::from("python3"), PathBuf::from);
            let resolved = envsim_eval::model::resolve(explicit, true, &python, &mut |line| {
                eprintln!("model: {line}")
            })?;
            let tokenizer =
                envsim_eval::local::Tokenizer::load(&resolved).map_err(anyhow::Error::msg)?;
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
    let violations = report["violations"].as_array().map_or(0, Vec::len);
    let errors = report["errors"].as_array().map_or(0, Vec::len);
    if violations > 0 || errors > 0 {
        bail!("{violations} slice violation(s), {errors} sample(s) could not be executed");
    }
    Ok(())
}

async fn execute(
    executor: &Executor,
    job: &Job,
    state: &Value,
    trace: bool,
) -> Result<CallOutcome> {
    let call = Call {
        seed: job.seed,
        clock: job.clock,
        trace,
        ..Call::new(
            &job.code,
            &job.t.action.name,
            &job.t.action.arguments,
            state,
        )
    };
    executor.call(&call).await.map_err(|e| anyhow!("{e}"))
}

/// The changes from `before` to `after`, leaving out those under the top-level keys `skip`.
fn changes(before: &Value, after: &Value, skip: &[&String]) -> Value {
    let kept: Vec<_> = fine_diff(before, after)
        .into_iter()
        .filter(|c| {
            c.pointer
                .tokens()
                .first()
                .is_none_or(|k| !skip.contains(&k))
        })
        .collect();
    changes_to_json(&kept, PathStyle::Pointer)
}

/// Executes the call on a slice and says how its outcome differs from the full run's, if it
/// does. Keys of the state that the slice leaves out come back with `__init__`'s defaults
/// after the sliced run and are not compared; the full run must not change them.
async fn outcome_difference(
    executor: &Executor,
    job: &Job,
    full: &CallOutcome,
    slice: &Value,
) -> Option<String> {
    let before = &job.t.config_before;
    match execute(executor, job, slice, false).await {
        Err(e) => Some(format!("the call fails on the slice: {e}")),
        Ok(o) if o.observation != full.observation => Some(format!(
            "observation {:?} on the slice, {:?} on the full state",
            o.observation, full.observation
        )),
        Ok(o) => {
            let dropped: Vec<&String> = match (before, slice) {
                (Value::Object(b), Value::Object(s)) => {
                    b.keys().filter(|k| !s.contains_key(*k)).collect()
                }
                _ => Vec::new(),
            };
            let (sliced, whole) = (
                changes(slice, &o.state_after, &dropped),
                changes(before, &full.state_after, &[]),
            );
            (sliced != whole)
                .then(|| format!("changes {sliced} on the slice, {whole} on the full state"))
        }
    }
}

async fn check(executor: &Executor, job: Job) -> Checked {
    let t = &job.t;
    let mut out = Checked {
        id: t.id.clone(),
        env: t.env_id.clone().unwrap_or_default(),
        tool: t.action.name.clone(),
        error: None,
        not_reproducible: None,
        violation: None,
        footprint_mismatch: None,
        code_fallback: None,
        code_full: false,
        state_full: false,
        prompts: None,
        parts: None,
    };
    let full = match execute(executor, &job, &t.config_before, true).await {
        Ok(o) => o,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    let stored_observation = match &t.observation {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    out.not_reproducible = if full.observation != stored_observation {
        Some("observation")
    } else if full.state_after != t.config_after {
        Some("state after")
    } else {
        None
    };
    let reads = full.reads.clone().unwrap_or_default();
    let code = slice_code(&job.code.code, &t.action.name);
    let state = slice_state(&code, &t.action.arguments, &t.config_before);
    let footprint = slice_with_reads(&t.config_before, &reads);
    out.code_fallback = code.fallback.clone();
    out.code_full = code.full;
    out.state_full = state.full;
    if let Err(path) = slice_covers(&t.config_before, &state.state, &reads) {
        out.violation = Some(("reads".into(), format!("{path} is not covered")));
    } else if !state.full {
        if let Some(d) = outcome_difference(executor, &job, &full, &state.state).await {
            out.violation = Some(("outcome".into(), d));
        }
    }
    out.footprint_mismatch = outcome_difference(executor, &job, &full, &footprint).await;
    let pretty = |v: &Value| serde_json::to_string_pretty(v).map_or(0, |s| s.chars().count());
    let code_chars = |s: &str| s.chars().count();
    out.parts = Some([
        (code_chars(&job.code.code), pretty(&t.config_before)),
        (code_chars(&code.source), pretty(&state.state)),
        (code_chars(&code.source), pretty(&footprint)),
    ]);
    out.prompts = Some([
        Template::Envsim.render(&job.code.code, &t.config_before, &t.action),
        Template::EnvsimSliced.render(&job.code.code, &t.config_before, &t.action),
        sliced_prompt(&code.source, &footprint, &t.action),
    ]);
    out
}

/// Context budgets (prompt tokens) the report counts prompts within.
const BUDGETS: [usize; 4] = [4096, 8192, 16384, 32768];

fn stats(values: &[f64]) -> Value {
    let total: f64 = values.iter().sum();
    json!({
        "mean": mean(values).map(|m| (m * 10.0).round() / 10.0),
        "median": percentile(values, 50.0),
        "p90": percentile(values, 90.0),
        "max": values.iter().copied().fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v)))),
        "total": total,
    })
}

fn ratio(full: f64, other: f64) -> Value {
    if other > 0.0 {
        json!(((full / other) * 100.0).round() / 100.0)
    } else {
        Value::Null
    }
}

/// The report (JSON) over the checked samples, with prompt tokens counted by `count`.
fn report(
    name: &str,
    checked: &[Checked],
    count: &dyn Fn(&str) -> usize,
    counter_name: &str,
) -> Value {
    let sample = |c: &Checked| json!({"id": c.id, "env": c.env, "tool": c.tool});
    let with = |c: &Checked, key: &str, value: Value| {
        let mut v = sample(c);
        v[key] = value;
        v
    };
    let errors: Vec<Value> = checked
        .iter()
        .filter_map(|c| c.error.as_ref().map(|e| with(c, "error", json!(e))))
        .collect();
    let not_reproducible: Vec<Value> = checked
        .iter()
        .filter_map(|c| c.not_reproducible.map(|w| with(c, "differs", json!(w))))
        .collect();
    let violations: Vec<Value> = checked
        .iter()
        .filter_map(|c| {
            c.violation.as_ref().map(|(check, detail)| {
                let mut v = with(c, "check", json!(check));
                v["detail"] = json!(detail);
                v
            })
        })
        .collect();
    let footprint_mismatches: Vec<Value> = checked
        .iter()
        .filter_map(|c| {
            c.footprint_mismatch
                .as_ref()
                .map(|d| with(c, "detail", json!(d)))
        })
        .collect();
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for c in checked {
        if let Some(r) = &c.code_fallback {
            *reasons.entry(r.as_str()).or_default() += 1;
        }
    }
    let done: Vec<&Checked> = checked.iter().filter(|c| c.prompts.is_some()).collect();
    let series = |f: &dyn Fn(&Checked) -> Option<f64>| -> Vec<f64> {
        done.iter().filter_map(|c| f(c)).collect()
    };
    let names = ["full", "sliced", "footprint"];
    let mut chars = Map::new();
    let mut tokens = Map::new();
    let mut code = Map::new();
    let mut state = Map::new();
    let mut totals = [0.0f64; 3];
    let mut within: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    for (k, label) in names.iter().enumerate() {
        let c = series(&|c| c.prompts.as_ref().map(|p| prompt_chars(&p[k]) as f64));
        totals[k] = c.iter().sum();
        chars.insert((*label).into(), stats(&c));
        let t = series(&|c| {
            c.prompts
                .as_ref()
                .map(|p| prompt_tokens(&p[k], count) as f64)
        });
        for budget in BUDGETS {
            let n = t.iter().filter(|&&n| n <= budget as f64).count();
            within
                .entry(budget.to_string())
                .or_default()
                .insert((*label).into(), json!(n));
        }
        tokens.insert((*label).into(), stats(&t));
        code.insert(
            (*label).into(),
            stats(&series(&|c| c.parts.map(|p| p[k].0 as f64))),
        );
        state.insert(
            (*label).into(),
            stats(&series(&|c| c.parts.map(|p| p[k].1 as f64))),
        );
    }
    // What a prefix cache saves: the sliced system prompts of one environment share a prefix
    // (rules, module code, class header, __init__); only the rest must be computed per sample.
    let mut prefix: HashMap<&str, &str> = HashMap::new();
    for c in &done {
        let Some(p) = &c.prompts else { continue };
        let system = p[1].system.as_str();
        let entry = prefix.entry(c.env.as_str()).or_insert(system);
        let common = entry
            .char_indices()
            .zip(system.chars())
            .find(|((_, a), b)| a != b)
            .map_or(entry.len().min(system.len()), |((i, _), _)| i);
        *entry = &entry[..common];
    }
    let uncached = series(&|c| {
        let p = c.prompts.as_ref()?;
        let shared = prefix.get(c.env.as_str()).map_or(0, |s| s.chars().count());
        Some((prompt_chars(&p[1]) - shared) as f64)
    });
    json!({
        "benchmark": name,
        "samples": checked.len(),
        "executed": done.len(),
        "errors": errors,
        "not_reproducible": not_reproducible,
        "violations": violations,
        "footprint_outcome_mismatches": footprint_mismatches,
        "fallbacks": {
            "code": checked.iter().filter(|c| c.code_fallback.is_some()).count(),
            "code_whole": done.iter().filter(|c| c.code_full).count(),
            "state_whole": done.iter().filter(|c| c.state_full).count(),
            "reasons": reasons,
        },
        "token_counter": counter_name,
        "prompt_chars": chars,
        "prompt_tokens": tokens,
        "prompts_within_tokens": within,
        "code_chars": code,
        "state_chars": state,
        "sliced_chars_after_shared_prefix": stats(&uncached),
        "ratio_full_to": {"sliced": ratio(totals[0], totals[1]), "footprint": ratio(totals[0], totals[2])},
    })
}

fn table(report: &Value) -> String {
    let mut out = String::new();
    let count = |key: &str| report[key].as_array().map_or(0, Vec::len);
    out.push_str(&format!(
        "{}: {} samples, {} executed; {} slice violations, {} not reproducible, {} execution errors\n",
        report["benchmark"].as_str().unwrap_or(""),
        report["samples"],
        report["executed"],
        count("violations"),
        count("not_reproducible"),
        count("errors"),
    ));
    let f = &report["fallbacks"];
    out.push_str(&format!(
        "fallbacks: {} to the whole code and state; code shown whole {}, state shown whole {}\n",
        f["code"], f["code_whole"], f["state_whole"]
    ));
    if let Some(reasons) = f["reasons"].as_object() {
        for (reason, n) in reasons {
            out.push_str(&format!("  {n} x {reason}\n"));
        }
    }
    for (title, key) in [
        ("prompt characters", "prompt_chars"),
        (
            &*format!(
                "prompt tokens ({})",
                report["token_counter"].as_str().unwrap_or("")
            ),
            "prompt_tokens",
        ),
        ("code characters", "code_chars"),
        ("state characters (indented JSON)", "state_chars"),
    ] {
        let mut t = Table::new();
        t.load_preset(UTF8_FULL_CONDENSED);
        t.set_header(vec![title, "mean", "median", "p90", "max", "total"]);
        for label in ["full", "sliced", "footprint"] {
            let s = &report[key][label];
            let cell = |k: &str| s[k].as_f64().map_or("-".into(), |v| format!("{v:.0}"));
            t.add_row(vec![
                label.to_owned(),
                cell("mean"),
                cell("median"),
                cell("p90"),
                cell("max"),
                cell("total"),
            ]);
        }
        for column in t.column_iter_mut().skip(1) {
            column.set_cell_alignment(CellAlignment::Right);
        }
        out.push_str(&format!("{t}\n"));
    }
    out.push_str(&format!(
        "full / sliced: {}x; full / footprint: {}x (totals)\n",
        report["ratio_full_to"]["sliced"], report["ratio_full_to"]["footprint"]
    ));
    for budget in BUDGETS {
        let w = &report["prompts_within_tokens"][budget.to_string()];
        out.push_str(&format!(
            "prompts within {budget} tokens: full {}, sliced {}, footprint {}\n",
            w["full"], w["sliced"], w["footprint"]
        ));
    }
    let u = &report["sliced_chars_after_shared_prefix"];
    out.push_str(&format!(
        "sliced prompt characters after the environment's shared prefix: mean {}, median {}\n",
        u["mean"], u["median"]
    ));
    for (key, what) in [
        ("violations", "violation"),
        ("errors", "error"),
        ("not_reproducible", "not reproducible"),
        (
            "footprint_outcome_mismatches",
            "footprint slice changes the outcome",
        ),
    ] {
        let all = report[key].as_array().map_or(&[][..], Vec::as_slice);
        for v in all.iter().take(20) {
            let detail = [&v["check"], &v["detail"], &v["error"], &v["differs"]]
                .iter()
                .filter_map(|x| x.as_str())
                .collect::<Vec<_>>()
                .join(": ");
            let short: String = detail.chars().take(300).collect();
            let more = if short.len() < detail.len() {
                " …"
            } else {
                ""
            };
            out.push_str(&format!(
                "{what}: sample {} ({} {}): {short}{more}\n",
                v["id"].as_str().unwrap_or(""),
                v["env"].as_str().unwrap_or(""),
                v["tool"].as_str().unwrap_or(""),
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

    #[test]
    fn token_estimate_is_characters_over_four() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens("éééé"), 1);
        let p = Prompt {
            system: "abcd".into(),
            user: "ab".into(),
        };
        assert_eq!(prompt_tokens(&p, &estimate_tokens), 2);
        assert_eq!(prompt_tokens(&p, &|s: &str| s.len()), 6);
    }
}

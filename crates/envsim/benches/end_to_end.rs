//! End to end: the whole `envsim eval` command on the bundled benchmark (400 samples,
//! `--template reference`, `--concurrency 64`, no cache, a fresh run each time) against an
//! OpenAI-compatible test double that answers every request after a fixed latency (default
//! 250 ms). Wall time of the command from start to exit, against the ideal 400 / 64 × latency.
//!
//! `cargo bench -p envsim --bench end_to_end`. Knobs: `ENVSIM_E2E_LATENCY_MS` (250),
//! `ENVSIM_E2E_CONCURRENCY` (64), `ENVSIM_E2E_RUNS` (5).
//!
//! Baseline: with `ENVSIM_REFERENCE_EVAL=/path/to/10.eval_model.py` (the reference evaluator's
//! script, not part of this repository) and `ENVSIM_REFERENCE_PYTHON` (a Python with the
//! `openai` package; default `python3`), the same double also serves the reference evaluator,
//! run on the same benchmark file with `--max_workers` from `ENVSIM_REFERENCE_WORKERS`
//! (default `64,5`), once each, in the same run. Numbers go to docs/benchmarks.md.

use envsim_testkit::openai_double::{DoubleConfig, OpenAiDouble};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn knob<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn seconds(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// One timed run: wall time, and the set-up (start → first request at the double) and tail
/// (last request answered → exit) parts of it.
struct Timing {
    wall: Duration,
    setup: Duration,
    tail: Duration,
}

fn run_envsim(double: &OpenAiDouble, store: &Path, concurrency: usize, samples: usize) -> Timing {
    let url = double.base_url();
    let before = double.requests();
    let start = Instant::now();
    // Watch the double's request counter to split the wall time.
    let stats = std::sync::Arc::clone(double.stats());
    let watcher = std::thread::spawn(move || {
        let mut first = None;
        loop {
            let seen = stats.requests() - before;
            if seen >= 1 && first.is_none() {
                first = Some(start.elapsed());
            }
            if seen >= samples {
                return (first.unwrap_or_default(), start.elapsed());
            }
            if start.elapsed() > Duration::from_secs(600) {
                return (first.unwrap_or_default(), start.elapsed());
            }
            std::thread::sleep(Duration::from_micros(500));
        }
    });
    let out = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args([
            "eval",
            "--backend",
            "openai",
            "--base-url",
            &url,
            "--model",
            "bench-model",
        ])
        .args([
            "--template",
            "reference",
            "--concurrency",
            &concurrency.to_string(),
        ])
        .args([
            "--no-cache",
            "--fresh",
            "--no-progress",
            "--format",
            "json",
            "--store",
        ])
        .arg(store)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("envsim runs");
    let wall = start.elapsed();
    assert!(
        out.status.success(),
        "envsim eval failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (first, last_sent) = watcher.join().unwrap_or_default();
    Timing {
        wall,
        setup: first,
        // The last request was sent at `last_sent` and answered one latency later.
        tail: wall.saturating_sub(last_sent + double_latency()),
    }
}

fn double_latency() -> Duration {
    Duration::from_millis(knob("ENVSIM_E2E_LATENCY_MS", 250))
}

fn run_reference(
    python: &str,
    script: &str,
    bench: &Path,
    dir: &Path,
    url: &str,
    workers: usize,
) -> Option<Duration> {
    let output = dir.join(format!("reference-{workers}.json"));
    let checkpoint = dir.join(format!("checkpoint-{workers}.json"));
    let start = Instant::now();
    let out = Command::new(python)
        .arg(script)
        .arg("--input")
        .arg(bench)
        .args([
            "--model",
            "bench-model",
            "--max_workers",
            &workers.to_string(),
        ])
        .arg("--output")
        .arg(&output)
        .arg("--checkpoint")
        .arg(&checkpoint)
        .env("OPENAI_API_KEY", "bench")
        .env("OPENAI_BASE_URL", url)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .ok()?;
    let elapsed = start.elapsed();
    if !out.status.success() || !output.exists() {
        eprintln!(
            "reference evaluator failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(elapsed)
}

fn main() {
    let latency = Duration::from_millis(knob("ENVSIM_E2E_LATENCY_MS", 250));
    let concurrency: usize = knob("ENVSIM_E2E_CONCURRENCY", 64);
    let runs: usize = knob("ENVSIM_E2E_RUNS", 5);
    let dir = tempfile::tempdir().expect("temp dir");
    let bench = dir.path().join("bundled.json");
    let status = Command::new(env!("CARGO_BIN_EXE_envsim"))
        .args(["bench", "bundled", "--out"])
        .arg(&bench)
        .stderr(Stdio::null())
        .status()
        .expect("envsim runs");
    assert!(status.success(), "cannot write the bundled benchmark");
    let samples = 400usize;
    // Every prompt gets the same well-formed answer: the harness is measured, not the model.
    let double = OpenAiDouble::spawn(DoubleConfig {
        latency,
        default_answer: Some(r#"{"feedback": "{'success': True}", "config_changes": []}"#.into()),
        record_bodies: false,
        ..DoubleConfig::default()
    })
    .expect("double starts");
    let url = double.base_url();
    let ideal = latency.mul_f64(samples as f64 / concurrency as f64);
    let waves = latency * (samples.div_ceil(concurrency) as u32);

    // Warm the page cache and the binary once.
    run_envsim(
        &double,
        &dir.path().join("warm.sqlite"),
        concurrency,
        samples,
    );
    let mut timings: Vec<Timing> = (0..runs)
        .map(|i| {
            let store = dir.path().join(format!("run{i}.sqlite"));
            run_envsim(&double, &store, concurrency, samples)
        })
        .collect();
    timings.sort_by_key(|t| t.wall);
    let best = &timings[0];
    let median = &timings[timings.len() / 2];
    println!(
        "end to end: {samples} samples, {concurrency} in flight, {} per request",
        seconds(latency)
    );
    println!(
        "ideal 400/{concurrency} × latency = {} ({} whole waves of {concurrency})",
        seconds(ideal),
        seconds(waves)
    );
    println!("| command | runs | best | median | best / ideal | set-up / tail (best run) |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| envsim eval, {concurrency} in flight | {runs} | {} | {} | {:.2}× | {} / {} |",
        seconds(best.wall),
        seconds(median.wall),
        best.wall.as_secs_f64() / ideal.as_secs_f64(),
        seconds(best.setup),
        seconds(best.tail)
    );
    if let Ok(script) = std::env::var("ENVSIM_REFERENCE_EVAL") {
        let python = std::env::var("ENVSIM_REFERENCE_PYTHON").unwrap_or_else(|_| "python3".into());
        let workers: Vec<usize> = std::env::var("ENVSIM_REFERENCE_WORKERS")
            .unwrap_or_else(|_| "64,5".into())
            .split(',')
            .filter_map(|w| w.trim().parse().ok())
            .collect();
        for w in workers {
            match run_reference(&python, &script, &bench, dir.path(), &url, w) {
                Some(t) => println!(
                    "| reference evaluator, {w} workers | 1 | {} | | {:.2}× of its ideal ({}) |",
                    seconds(t),
                    t.as_secs_f64() / latency.mul_f64(samples as f64 / w as f64).as_secs_f64(),
                    seconds(latency.mul_f64(samples as f64 / w as f64))
                ),
                None => println!("| reference evaluator, {w} workers | failed | | | |"),
            }
        }
    }
}

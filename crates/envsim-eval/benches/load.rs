//! Loading the bundled benchmark: unpack (zstd + SHA-256 check), parse, prepare, as
//! `envsim eval` does before its first request, next to CPython's `json.load` of the same
//! uncompressed file.
//!
//! `cargo bench -p envsim-eval --bench load` (knob: `ENVSIM_BENCH_RUNS`, default 7). Every step
//! is timed on its own, best and median of the runs; dropping the results is not timed. The
//! one-core rows are the sequential functions of `envsim_core` (what the parallel ones must
//! equal, and what `envsim eval` used before). `python3` must be on `PATH` for the baseline row.

use std::process::Command;
use std::time::{Duration, Instant};

use envsim_core::formats;
use envsim_core::score::PreparedSample;
use envsim_eval::prepare::{parse_benchmark, prepare_samples, unpack_benchmark};

const COMPRESSED: &[u8] = include_bytes!("../../../data/bench/benchmark.json.zst");
const CHECKSUM: &str = include_str!("../../../data/bench/benchmark.json.sha256");

/// Best and median of `runs` timings of `f`; the value of each run is dropped untimed.
fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, Duration) {
    time_from(runs, &(), |()| f())
}

/// [`time`] of `f` on a copy of `input` made (untimed) before each run.
fn time_from<I: Clone, T>(
    runs: usize,
    input: &I,
    mut f: impl FnMut(I) -> T,
) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let input = input.clone();
            let start = Instant::now();
            let value = f(input);
            let elapsed = start.elapsed();
            drop(value);
            elapsed
        })
        .collect();
    times.sort();
    (times[0], times[times.len() / 2])
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn rate(bytes: usize, d: Duration) -> String {
    format!("{:.0} MB/s", bytes as f64 / 1e6 / d.as_secs_f64())
}

/// Times `json.load` inside one python3 process (interpreter start-up excluded), best and
/// median of `runs`, and the whole `python3 -c "import json; json.load(open(PATH))"` command
/// once; `None` when python3 cannot be run.
fn python_baseline(path: &std::path::Path, runs: usize) -> Option<(Duration, Duration, Duration)> {
    let script = format!(
        "import json, sys, time\n\
         ts = []\n\
         for _ in range({runs}):\n\
         \x20   t = time.perf_counter(); json.load(open(sys.argv[1])); ts.append(time.perf_counter() - t)\n\
         ts.sort()\n\
         print(ts[0], ts[len(ts) // 2])\n"
    );
    let out = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .arg(path)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let mut numbers = text.split_whitespace().map(str::parse::<f64>);
    let best = Duration::from_secs_f64(numbers.next()?.ok()?);
    let median = Duration::from_secs_f64(numbers.next()?.ok()?);
    let start = Instant::now();
    let status = Command::new("python3")
        .arg("-c")
        .arg("import json, sys; json.load(open(sys.argv[1]))")
        .arg(path)
        .status()
        .ok()?;
    let command = start.elapsed();
    status.success().then_some((best, median, command))
}

fn main() {
    let runs: usize = std::env::var("ENVSIM_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
        .max(1);
    let expected = CHECKSUM.split_whitespace().next().expect("a SHA-256");
    let source = "<bundled benchmark>";
    let bytes = unpack_benchmark(COMPRESSED, expected).expect("the bundled benchmark unpacks");
    let size = bytes.len();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());

    // The parallel reader must give what the sequential one gives.
    let sequential = formats::parse_benchmark(&bytes, source).expect("parses");
    assert_eq!(parse_benchmark(&bytes, source).expect("parses"), sequential);
    let samples = sequential.len();

    let unpack = time(runs, || {
        unpack_benchmark(COMPRESSED, expected).expect("unpacks")
    });
    let parse = time(runs, || parse_benchmark(&bytes, source).expect("parses"));
    let prepare = time_from(runs, &sequential, prepare_samples);
    let total = time(runs, || {
        let bytes = unpack_benchmark(COMPRESSED, expected).expect("unpacks");
        prepare_samples(parse_benchmark(&bytes, source).expect("parses"))
    });
    let parse_one_core = time(runs, || {
        formats::parse_benchmark(&bytes, source).expect("parses")
    });
    let prepare_one_core = time_from(runs, &sequential, |transitions| {
        transitions
            .into_iter()
            .map(PreparedSample::new)
            .collect::<Vec<_>>()
    });

    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("benchmark.json");
    std::fs::write(&path, &bytes).expect("writes the benchmark");
    let python = python_baseline(&path, runs);

    println!(
        "bundled benchmark: {samples} samples, {size} bytes ({} compressed), {cores} cores, \
         best / median of {runs} runs",
        COMPRESSED.len()
    );
    println!();
    println!("| step | best | median | throughput (best) |");
    println!("|---|---|---|---|");
    let row = |name: &str, (best, median): (Duration, Duration)| {
        println!(
            "| {name} | {} | {} | {} |",
            ms(best),
            ms(median),
            rate(size, best)
        );
    };
    row("unpack (zstd + SHA-256 check)", unpack);
    row("parse (parallel)", parse);
    row("prepare (parallel)", prepare);
    row("**total** (unpack + parse + prepare)", total);
    row(
        "parse, one core (`formats::parse_benchmark`)",
        parse_one_core,
    );
    row(
        "prepare, one core (`PreparedSample::new`)",
        prepare_one_core,
    );
    match python {
        Some((best, median, command)) => {
            row("python3 `json.load` (same file)", (best, median));
            println!(
                "| python3 -c \"import json; json.load(open(PATH))\" (whole command, once) | {} | | |",
                ms(command)
            );
        }
        None => println!("| python3 `json.load` | not run (no python3) | | |"),
    }
}

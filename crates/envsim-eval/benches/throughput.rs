//! Evaluation-runner throughput against a loopback OpenAI-compatible endpoint with 100 ms
//! latency: `cargo bench -p envsim-eval --bench throughput`. Numbers go to docs/benchmarks.md.
//!
//! What it measures. [`envsim_eval::runner::run`] with the OpenAI simulator (envsim prompt
//! template, no response cache, a fresh store per run, 30 s timeout) over synthetic samples, at
//! several in-flight limits. The endpoint answers every request after exactly 100 ms, so with N
//! requests in flight the ideal rate is N / 0.1 s; the bench reports the achieved rate against
//! that ideal, and the harness's CPU time per request (`getrusage(RUSAGE_SELF)`, user + system,
//! split by thread: the thread driving `run`, the tokio runtime threads, and the store writer).
//! A run with the null baseline over the same samples shows what scoring and storing cost
//! without HTTP.
//!
//! Why the endpoint runs in its own process. On a machine with few cores the test double's CPU
//! (accepting connections, parsing request bodies, building answers) would otherwise be counted
//! as harness CPU, and its threads would share the harness's runtime. The bench re-executes
//! itself with `ENVSIM_BENCH_ROLE=double`; in that role it serves
//! `envsim_testkit::openai_double` on a loopback port, prints the port, and answers two
//! commands on stdin: `start` opens a measurement window and `stop` closes it and reports the
//! double's view (requests received, first and last arrival times, most requests seen open at
//! once, its own CPU time). The double exits when its stdin closes, so it never outlives the
//! bench. From the arrival times the bench splits the wall time into set-up before the first
//! request, the request phase, and the tail after the last answer (waiting for the store).
//!
//! Each measured run sends `ROUNDS × in-flight` requests (40 rounds: about 4 s at the ideal
//! rate). A warm-up run at the highest in-flight limit opens the connections first; the client
//! (and its connection pool) is shared by all runs, and the warm-up is not in the results.
//!
//! Knobs (environment variables): `ENVSIM_BENCH_ROUNDS` (default 40) and
//! `ENVSIM_BENCH_IN_FLIGHT` (comma-separated, default `64,128,256,512`). With the defaults the
//! bench prepares 20,480 samples (about 30 s on 2 cores, not measured) and peaks at about 8 GB
//! of memory (the samples, and the copy handed to the current run).

use envsim_core::formats::parse_benchmark;
use envsim_core::prelude::*;
use envsim_core::prompt::Template;
use envsim_eval::config::{BackendConfig, Decoding, RunConfig};
use envsim_eval::runner::{run, Predictor, RunRequest, RunnerOptions};
use envsim_eval::store::Store;
use envsim_llm::openai::{ClientSettings, OpenAiClient};
use envsim_testkit::openai_double::{bind_loopback, serve, DoubleConfig, DoubleStats};
use envsim_testkit::{to_json_array, BenchOptions, SyntheticBench};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Environment variable selecting the role of a re-executed bench process.
const ROLE_VAR: &str = "ENVSIM_BENCH_ROLE";
/// Latency of every answer of the double.
const LATENCY: Duration = Duration::from_millis(100);
/// The double's answer to every request: a valid envsim output ("no change").
const ANSWER: &str = r#"{"feedback": "", "config_changes": []}"#;
/// Per-request timeout of the client.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Users per synthetic state (envsim prompts of about 13 KB).
const USERS: usize = 12;

fn main() -> ExitCode {
    if std::env::var(ROLE_VAR).as_deref() == Ok("double") {
        return double_main();
    }
    match bench_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("throughput bench: {message}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The double's process.

/// Serves the double until stdin closes, answering `start` / `stop` commands.
fn double_main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("double")
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("double: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let listener = match runtime.block_on(bind_loopback(0)) {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("double: cannot listen on 127.0.0.1: {e}");
            return ExitCode::FAILURE;
        }
    };
    let port = match listener.local_addr() {
        Ok(addr) => addr.port(),
        Err(e) => {
            eprintln!("double: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = DoubleConfig {
        latency: LATENCY,
        default_answer: Some(ANSWER.to_owned()),
        record_bodies: false,
        usage: true,
        ..DoubleConfig::default()
    };
    let stats = Arc::new(DoubleStats::default());
    let server_stats = Arc::clone(&stats);
    runtime.spawn(async move {
        if let Err(e) = serve(listener, config, server_stats).await {
            eprintln!("double: server failed: {e}");
            std::process::exit(1);
        }
    });
    if reply(&format!("port {port}")).is_err() {
        return ExitCode::FAILURE;
    }
    let mut window: Option<Window> = None;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let answer = match line.trim() {
            "start" => {
                window = Some(Window::open(Arc::clone(&stats)));
                "started".to_owned()
            }
            "stop" => match window.take() {
                Some(open) => open.close(),
                None => "error: no window open".to_owned(),
            },
            other => format!("error: unknown command {other:?}"),
        };
        if reply(&answer).is_err() {
            break;
        }
    }
    // Stdin closed: the bench is gone (or done). Dropping the runtime stops the server.
    ExitCode::SUCCESS
}

fn reply(line: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()
}

/// A measurement window in the double: a thread polls the counters every millisecond.
struct Window {
    stop: Arc<AtomicBool>,
    poller: std::thread::JoinHandle<(usize, u64, u64, usize)>,
    cpu: Cpu,
}

impl Window {
    fn open(stats: Arc<DoubleStats>) -> Window {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let base = stats.requests();
        let poller = std::thread::spawn(move || {
            let (mut seen, mut first, mut last, mut most_open) = (base, 0u64, 0u64, 0usize);
            while !flag.load(Ordering::Relaxed) {
                let now = monotonic_ns();
                let received = stats.requests();
                if received != seen {
                    if first == 0 {
                        first = now;
                    }
                    last = now;
                    seen = received;
                }
                most_open = most_open.max(stats.in_flight());
                std::thread::sleep(Duration::from_millis(1));
            }
            (stats.requests() - base, first, last, most_open)
        });
        Window {
            stop,
            poller,
            cpu: Cpu::now(),
        }
    }

    /// Closes the window; the report line is `key=value` pairs.
    fn close(self) -> String {
        self.stop.store(true, Ordering::Relaxed);
        let Ok((requests, first, last, most_open)) = self.poller.join() else {
            return "error: poller panicked".to_owned();
        };
        let cpu = Cpu::now().since(&self.cpu);
        format!(
            "requests={requests} first_ns={first} last_ns={last} max_in_flight={most_open} user_us={} sys_us={}",
            cpu.user.as_micros(),
            cpu.sys.as_micros()
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Process and thread CPU time.

/// User and system CPU time of this process (all threads, live and exited).
#[derive(Clone, Copy, Debug, Default)]
struct Cpu {
    user: Duration,
    sys: Duration,
}

impl Cpu {
    #[allow(unsafe_code)] // libc: see the SAFETY comments
    fn now() -> Cpu {
        // SAFETY: getrusage only writes the struct it is given.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer to a rusage struct; RUSAGE_SELF is always accepted.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
        let time = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        Cpu {
            user: time(usage.ru_utime),
            sys: time(usage.ru_stime),
        }
    }

    fn since(&self, earlier: &Cpu) -> Cpu {
        Cpu {
            user: self.user.saturating_sub(earlier.user),
            sys: self.sys.saturating_sub(earlier.sys),
        }
    }

    fn total(&self) -> Duration {
        self.user + self.sys
    }
}

/// Peak resident memory of this process, in MiB.
#[allow(unsafe_code)] // libc: see the SAFETY comments
fn peak_rss_mib() -> f64 {
    // SAFETY: as in `Cpu::now`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as in `Cpu::now`.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_maxrss as f64 / 1024.0
}

/// `CLOCK_MONOTONIC` in nanoseconds: the same clock in both processes.
#[allow(unsafe_code)] // libc: see the SAFETY comments
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer; CLOCK_MONOTONIC is always available on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time (user + system) per live thread of this process, from `/proc/self/task/*/stat`
/// (clock-tick resolution, 10 ms): tid → time.
#[allow(unsafe_code)] // libc: see the SAFETY comments
fn thread_cpu() -> HashMap<u32, Duration> {
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let mut out = HashMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // "tid (name) state ppid …": fields 14 and 15 (utime, stime) come after the name,
        // which may itself contain spaces and parentheses.
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks: u64 = fields
            .get(11..13)
            .map(|f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum())
            .unwrap_or(0);
        out.insert(tid, Duration::from_micros(ticks * 1_000_000 / ticks_per_s));
    }
    out
}

/// A run's CPU split by thread.
#[derive(Clone, Copy, Debug, Default)]
struct ThreadSplit {
    /// The thread that drives `run` (set-up, scoring the pending rows, collecting results).
    main: Duration,
    /// The tokio runtime's threads (request tasks: prompt, HTTP, parsing, scoring).
    runtime: Duration,
    /// Threads that ended during the run: the store writer.
    exited: Duration,
}

impl ThreadSplit {
    fn between(
        before: &HashMap<u32, Duration>,
        after: &HashMap<u32, Duration>,
        total: Duration,
    ) -> ThreadSplit {
        let main_tid = std::process::id();
        let mut split = ThreadSplit::default();
        let mut live = Duration::ZERO;
        for (tid, time) in after {
            let used = time.saturating_sub(before.get(tid).copied().unwrap_or_default());
            live += used;
            // During a run the only live threads besides the main one are the runtime's
            // ("bench-rt": workers and the blocking pool).
            if *tid == main_tid {
                split.main += used;
            } else {
                split.runtime += used;
            }
        }
        split.exited = total.saturating_sub(live);
        split
    }
}

// ---------------------------------------------------------------------------------------------
// The bench process.

/// The double's process; killed (and reaped) when dropped, panics included.
struct DoubleProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    port: u16,
}

impl DoubleProcess {
    fn spawn() -> Result<DoubleProcess, String> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find this executable to start the double: {e}"))?;
        let mut child = Command::new(exe)
            .env(ROLE_VAR, "double")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start the double process: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the double process has no stdin/stdout pipes".to_owned());
        };
        let mut double = DoubleProcess {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            port: 0,
        };
        let line = double.read_line()?;
        double.port = line
            .strip_prefix("port ")
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("the double did not start: it said {line:?}"))?;
        Ok(double)
    }

    fn read_line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err("the double process exited (see its message above)".to_owned()),
            Ok(_) => Ok(line.trim_end().to_owned()),
            Err(e) => Err(format!("cannot read from the double process: {e}")),
        }
    }

    fn command(&mut self, command: &str) -> Result<String, String> {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("cannot talk to the double process: {e}"))?;
        let line = self.read_line()?;
        if line.starts_with("error") {
            return Err(format!("double: {line}"));
        }
        Ok(line)
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for DoubleProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the double saw during one run.
#[derive(Clone, Copy, Debug)]
struct DoubleView {
    requests: usize,
    first_ns: u64,
    last_ns: u64,
    max_in_flight: usize,
    cpu: Duration,
}

impl DoubleView {
    fn parse(line: &str) -> Result<DoubleView, String> {
        let fields: HashMap<&str, u64> = line
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
            .collect();
        let get = |key: &str| {
            fields
                .get(key)
                .copied()
                .ok_or_else(|| format!("double report {line:?} lacks {key}"))
        };
        Ok(DoubleView {
            requests: get("requests")? as usize,
            first_ns: get("first_ns")?,
            last_ns: get("last_ns")?,
            max_in_flight: get("max_in_flight")? as usize,
            cpu: Duration::from_micros(get("user_us")? + get("sys_us")?),
        })
    }
}

/// One measured run.
struct Measured {
    label: String,
    in_flight: usize,
    requests: usize,
    wall: Duration,
    cpu: Cpu,
    threads: ThreadSplit,
    /// Set-up before the first request, request phase, tail after the last answer.
    phases: Option<(Duration, Duration, Duration)>,
    /// Mean time of one HTTP attempt as the client saw it (ms), from the audit log.
    http_ms: Option<f64>,
    /// Mean time of one sample, from taking its slot to scoring it (ms), from the results.
    sample_ms: f64,
    double: Option<DoubleView>,
}

impl Measured {
    fn per_request(&self, d: Duration) -> f64 {
        d.as_secs_f64() * 1e6 / self.requests as f64
    }

    fn rate(&self) -> f64 {
        self.requests as f64 / self.wall.as_secs_f64()
    }

    fn ideal(&self) -> f64 {
        self.in_flight as f64 / LATENCY.as_secs_f64()
    }
}

/// One run to measure.
struct Job<'a> {
    label: &'a str,
    in_flight: usize,
    samples: Vec<PreparedSample>,
    /// `None`: the null baseline (no HTTP).
    client: Option<&'a OpenAiClient>,
}

fn bench_main() -> Result<(), String> {
    let rounds: usize = env_or("ENVSIM_BENCH_ROUNDS", "40")
        .parse()
        .map_err(|_| "ENVSIM_BENCH_ROUNDS must be a whole number".to_owned())?;
    let mut in_flight: Vec<usize> = env_or("ENVSIM_BENCH_IN_FLIGHT", "64,128,256,512")
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| "ENVSIM_BENCH_IN_FLIGHT must be comma-separated whole numbers".to_owned())?;
    in_flight.retain(|&n| n > 0);
    let max_in_flight = *in_flight
        .iter()
        .max()
        .ok_or("ENVSIM_BENCH_IN_FLIGHT names no limit")?;
    if rounds == 0 {
        return Err("ENVSIM_BENCH_ROUNDS must be at least 1".to_owned());
    }

    raise_open_files_limit(2 * max_in_flight + 256);

    let mut double = DoubleProcess::spawn()?;
    println!(
        "double: pid {}, {} (latency {} ms), own process",
        double.child.id(),
        double.base_url(),
        LATENCY.as_millis()
    );

    let started = Instant::now();
    let samples = make_samples(rounds * max_in_flight);
    let prompt_bytes = samples
        .first()
        .map(|s| {
            let t = s.transition();
            let p = Template::Envsim.render_eval(&t.env_code, &t.config_before, &t.action);
            p.system.len() + p.user.len()
        })
        .unwrap_or(0);
    println!(
        "samples: {} distinct synthetic transitions ({USERS} users per state, prompt ≈ {:.1} KB), prepared in {:.1} s (not measured)",
        samples.len(),
        prompt_bytes as f64 / 1024.0,
        started.elapsed().as_secs_f64()
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("bench-rt")
        .build()
        .map_err(|e| format!("cannot start the tokio runtime: {e}"))?;
    let client = OpenAiClient::new(&ClientSettings {
        base_url: double.base_url(),
        api_key: None,
        timeout: TIMEOUT,
        max_connections: max_in_flight,
    })?;
    let dir = tempfile::tempdir().map_err(|e| format!("cannot create a temporary dir: {e}"))?;
    println!(
        "runtime: tokio multi-thread, {} worker threads (CPU cores); stores in {}",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        dir.path().display()
    );

    let warm = measure(
        &runtime,
        &mut double,
        dir.path(),
        Job {
            label: "warm-up",
            in_flight: max_in_flight,
            samples: samples[..max_in_flight].to_vec(),
            client: Some(&client),
        },
    )?;
    println!(
        "warm-up (excluded): {} requests at {} in flight in {:.2} s (opens the connections)",
        warm.requests,
        warm.in_flight,
        warm.wall.as_secs_f64()
    );

    let mut results = Vec::new();
    for &n in &in_flight {
        let label = format!("openai, {n} in flight");
        let job = Job {
            label: &label,
            in_flight: n,
            samples: samples[..rounds * n].to_vec(),
            client: Some(&client),
        };
        results.push(measure(&runtime, &mut double, dir.path(), job)?);
    }
    let label = format!("null baseline, {max_in_flight} in flight");
    results.push(measure(
        &runtime,
        &mut double,
        dir.path(),
        Job {
            label: &label,
            in_flight: max_in_flight,
            samples,
            client: None,
        },
    )?);

    print_results(&results);
    println!("peak memory: {:.0} MiB", peak_rss_mib());
    Ok(())
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// Raises the soft limit on open files to the hard limit when it is below `needed` (each
/// request in flight holds a socket in this process and one in the double's).
#[allow(unsafe_code)] // libc: see the SAFETY comments
fn raise_open_files_limit(needed: usize) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid pointer to an rlimit struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        println!("open files: cannot read RLIMIT_NOFILE; leaving it as it is");
        return;
    }
    let (soft, hard) = (limit.rlim_cur, limit.rlim_max);
    let floor = 2048.max(needed) as libc::rlim_t;
    if soft >= floor {
        println!("open files: soft limit {soft} (hard {hard}), enough");
        return;
    }
    limit.rlim_cur = hard;
    // SAFETY: valid pointer to an rlimit struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0 {
        println!("open files: raised the soft limit from {soft} to the hard limit {hard}");
    } else {
        println!("open files: soft limit {soft} is low and could not be raised (hard {hard})");
    }
    if hard < floor {
        println!("open files: hard limit {hard} is below {floor}; expect connection errors");
    }
}

/// `count` distinct prepared samples (every one a different state, so every prompt differs),
/// generated in chunks of 960 (one seed each, to keep the intermediate benchmark text small) on
/// all cores.
fn make_samples(count: usize) -> Vec<PreparedSample> {
    const ROUNDS_PER_CHUNK: usize = 64;
    const PER_CHUNK: usize = ROUNDS_PER_CHUNK * 15;
    let options = BenchOptions {
        users: USERS,
        ..BenchOptions::default()
    };
    let chunk = |seed: u64| -> Vec<PreparedSample> {
        let records = SyntheticBench::records(seed, ROUNDS_PER_CHUNK, &options);
        parse_benchmark(to_json_array(&records).as_bytes(), "bench")
            .expect("synthetic benchmark parses")
            .into_iter()
            .enumerate()
            .map(|(i, mut t)| {
                // Each chunk numbers its records from 0; ids must be distinct overall.
                t.id = ((seed - 1) as usize * PER_CHUNK + i).to_string();
                PreparedSample::new(t)
            })
            .collect()
    };
    let chunks = count.div_ceil(PER_CHUNK) as u64;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let mut parts: Vec<(u64, Vec<PreparedSample>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|worker| {
                scope.spawn(move || {
                    (1 + worker..=chunks)
                        .step_by(threads as usize)
                        .map(|seed| (seed, chunk(seed)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("sample generation panicked"))
            .collect()
    });
    parts.sort_by_key(|(seed, _)| *seed);
    parts
        .into_iter()
        .flat_map(|(_, part)| part)
        .take(count)
        .collect()
}

fn measure(
    runtime: &tokio::runtime::Runtime,
    double: &mut DoubleProcess,
    dir: &Path,
    job: Job<'_>,
) -> Result<Measured, String> {
    let requests = job.samples.len();
    let store = dir.join(format!("run-{}.sqlite", job.label.replace([' ', ','], "_")));
    let decoding = Decoding {
        temperature: Some(0.0),
        max_tokens: Some(512),
        ..Decoding::default()
    };
    let (backend, simulator) = match job.client {
        Some(client) => (
            BackendConfig::Openai {
                base_url: double.base_url(),
                model: "bench-model".to_owned(),
            },
            Predictor::OpenAi {
                model: envsim_llm::OpenAiText::new(
                    client.clone(),
                    "bench-model".to_owned(),
                    decoding.clone(),
                    false,
                ),
                template: Template::Envsim,
            },
        ),
        None => (BackendConfig::Null, Predictor::Baseline(Baseline::Null)),
    };
    let config = RunConfig::new(
        format!("bench-{}", job.label),
        backend,
        Template::Envsim.name(),
        decoding,
    );
    let request = RunRequest {
        store: store.clone(),
        system: job.label.to_owned(),
        config,
        bench_path: "synthetic".to_owned(),
        samples: job.samples.into(),
        simulator,
        options: RunnerOptions {
            concurrency: job.in_flight,
            use_cache: false,
            ..RunnerOptions::default()
        },
        fresh: true,
        prices: None,
        stop: None,
        events: None,
    };
    let http = job.client.is_some();

    let cpu_before = Cpu::now();
    let threads_before = thread_cpu();
    if http {
        double.command("start")?;
    }
    let t0 = monotonic_ns();
    let clock = Instant::now();
    let outcome = runtime
        .block_on(run(request))
        .map_err(|e| format!("{}: run failed: {e}", job.label))?;
    let wall = clock.elapsed();
    let t_end = monotonic_ns();
    let view = if http {
        Some(DoubleView::parse(&double.command("stop")?)?)
    } else {
        None
    };
    let threads_after = thread_cpu();
    let cpu = Cpu::now().since(&cpu_before);
    let threads = ThreadSplit::between(&threads_before, &threads_after, cpu.total());

    if outcome.processed != requests {
        return Err(format!(
            "{}: {} of {requests} samples processed",
            job.label, outcome.processed
        ));
    }
    // Read back (outside the measurement): failures, and the per-sample and per-attempt times.
    let opened = Store::open(&store).map_err(|e| e.to_string())?;
    let rows = opened
        .results(&outcome.record.hash)
        .map_err(|e| e.to_string())?;
    let attempts = opened
        .attempts(&outcome.record.hash)
        .map_err(|e| e.to_string())?;
    drop(opened);
    let mean = |values: &[f64]| values.iter().sum::<f64>() / values.len().max(1) as f64;
    let sample_ms = mean(&rows.iter().filter_map(|r| r.latency_ms).collect::<Vec<_>>());
    let http_ms = (!attempts.is_empty())
        .then(|| mean(&attempts.iter().map(|a| a.latency_ms).collect::<Vec<_>>()));
    let failed = rows
        .iter()
        .filter(|r| r.prediction_kind.as_deref() == Some("api_error"))
        .count();
    if failed > 0 {
        let example = rows
            .iter()
            .find(|r| r.prediction_kind.as_deref() == Some("api_error"))
            .and_then(|r| r.prediction.clone())
            .unwrap_or_default();
        return Err(format!(
            "{}: {failed} of {requests} requests failed, e.g. {example}",
            job.label
        ));
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut path = store.clone().into_os_string();
        path.push(suffix);
        let _ = std::fs::remove_file(path);
    }

    let phases = view.filter(|v| v.first_ns > 0).map(|v| {
        let ns = |a: u64, b: u64| Duration::from_nanos(b.saturating_sub(a));
        let answered = v.last_ns + LATENCY.as_nanos() as u64;
        (
            ns(t0, v.first_ns),
            ns(v.first_ns, answered),
            ns(answered, t_end),
        )
    });
    if let Some(v) = &view {
        if v.requests != requests {
            return Err(format!(
                "{}: the double saw {} requests, expected {requests}",
                job.label, v.requests
            ));
        }
    }
    Ok(Measured {
        label: job.label.to_owned(),
        in_flight: job.in_flight,
        requests,
        wall,
        cpu,
        threads,
        phases,
        http_ms,
        sample_ms,
        double: view,
    })
}

fn print_results(results: &[Measured]) {
    println!();
    println!("| run | requests | wall | req/s | ideal | % of ideal | set-up / requests / tail | request-phase req/s (% ideal) | mean HTTP / sample / slot cycle | most open at the double |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for m in results {
        let (phases, steady, cycle) = match m.phases {
            Some((setup, active, tail)) => {
                let rate = m.requests as f64 / active.as_secs_f64();
                (
                    format!(
                        "{:.2} / {:.2} / {:.2} s",
                        setup.as_secs_f64(),
                        active.as_secs_f64(),
                        tail.as_secs_f64()
                    ),
                    format!("{rate:.0} ({:.1}%)", rate * 100.0 / m.ideal()),
                    // A slot's cycle: the request phase spread over the slots' requests.
                    format!("{:.1}", m.in_flight as f64 * 1000.0 / rate),
                )
            }
            None => ("—".to_owned(), "—".to_owned(), "—".to_owned()),
        };
        let times = format!(
            "{} / {:.1} / {cycle} ms",
            m.http_ms.map_or("—".to_owned(), |ms| format!("{ms:.1}")),
            m.sample_ms
        );
        let (ideal, share, open) = match &m.double {
            Some(v) => (
                format!("{:.0}", m.ideal()),
                format!("**{:.1}%**", m.rate() * 100.0 / m.ideal()),
                v.max_in_flight.to_string(),
            ),
            None => ("—".to_owned(), "—".to_owned(), "—".to_owned()),
        };
        println!(
            "| {} | {} | {:.2} s | {:.0} | {ideal} | {share} | {phases} | {steady} | {times} | {open} |",
            m.label,
            m.requests,
            m.wall.as_secs_f64(),
            m.rate(),
        );
    }
    println!();
    println!("Harness CPU per request (µs; getrusage of the bench process, the double excluded):");
    println!();
    println!("| run | total | user | sys | run-driving thread | runtime threads | store writer | (double process) |");
    println!("|---|---|---|---|---|---|---|---|");
    for m in results {
        let double = m
            .double
            .map_or("—".to_owned(), |v| format!("{:.0}", m.per_request(v.cpu)));
        println!(
            "| {} | **{:.0}** | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {double} |",
            m.label,
            m.per_request(m.cpu.total()),
            m.per_request(m.cpu.user),
            m.per_request(m.cpu.sys),
            m.per_request(m.threads.main),
            m.per_request(m.threads.runtime),
            m.per_request(m.threads.exited),
        );
    }
    println!();
    for m in results.iter().filter(|m| m.double.is_some()) {
        let share = m.rate() / m.ideal();
        let cpu_ms = m.per_request(m.cpu.total()) / 1000.0;
        println!(
            "goals at {} in flight: throughput {:.1}% of ideal ({}), harness CPU {:.3} ms/request ({})",
            m.in_flight,
            share * 100.0,
            if share >= 0.9 { "met" } else { "NOT met" },
            cpu_ms,
            if cpu_ms < 1.0 { "met" } else { "NOT met" },
        );
    }
}

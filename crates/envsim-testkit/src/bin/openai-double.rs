//! Runs the OpenAI-compatible chat-completions test double
//! (`envsim_testkit::openai_double`) in its own process, until killed.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use envsim_testkit::openai_double::{bind_loopback, serve, DoubleConfig, DoubleStats};

const USAGE: &str = "usage: openai-double [--port N] [--latency-ms N] [--default-answer TEXT] [--answers FILE.jsonl]

A loopback OpenAI-compatible chat-completions server (a test double for envsim's tests and
benchmarks). Answers POST /v1/chat/completions with canned content chosen by the content of the
last user message.

  --port N              port on 127.0.0.1 to listen on (default 0: any free port)
  --latency-ms N        delay before every answer, in milliseconds (default 0)
  --default-answer TEXT content for messages with no canned answer (default: answer 400)
  --answers FILE.jsonl  canned answers, one JSON object a line: {\"key\": ..., \"content\": ...}

Prints `listening on http://127.0.0.1:PORT/v1` once ready, then serves until killed.";

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerLine {
    key: String,
    content: String,
}

struct Args {
    port: u16,
    config: DoubleConfig,
}

enum ArgsError {
    Help,
    Usage(String),
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, ArgsError> {
    let mut port = 0u16;
    let mut config = DoubleConfig {
        // A long-running process would only accumulate the log; nobody can read it.
        record_bodies: false,
        ..DoubleConfig::default()
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_string(), Some(value.to_string()))
            }
            _ => (arg.clone(), None),
        };
        if flag == "-h" || flag == "--help" {
            return Err(ArgsError::Help);
        }
        let mut value = |name: &str| -> Result<String, ArgsError> {
            match inline.clone().or_else(|| args.next()) {
                Some(v) => Ok(v),
                None => Err(ArgsError::Usage(format!("{name} needs a value"))),
            }
        };
        match flag.as_str() {
            "--port" => {
                let v = value("--port")?;
                port = v.parse().map_err(|_| {
                    ArgsError::Usage(format!("--port: {v:?} is not a port number (0..=65535)"))
                })?;
            }
            "--latency-ms" => {
                let v = value("--latency-ms")?;
                let ms: u64 = v.parse().map_err(|_| {
                    ArgsError::Usage(format!(
                        "--latency-ms: {v:?} is not a whole number of milliseconds"
                    ))
                })?;
                config.latency = Duration::from_millis(ms);
            }
            "--default-answer" => config.default_answer = Some(value("--default-answer")?),
            "--answers" => {
                let path = value("--answers")?;
                config.answers = read_answers(&path).map_err(ArgsError::Usage)?;
            }
            other => return Err(ArgsError::Usage(format!("unknown argument {other:?}"))),
        }
    }
    Ok(Args { port, config })
}

fn read_answers(path: &str) -> Result<HashMap<String, String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("--answers {path}: {e}"))?;
    let mut answers = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let entry: AnswerLine = serde_json::from_str(line).map_err(|e| {
            format!("{path}:{line_no}: expected {{\"key\": ..., \"content\": ...}}: {e}")
        })?;
        if answers.contains_key(&entry.key) {
            return Err(format!("{path}:{line_no}: duplicate key {:?}", entry.key));
        }
        answers.insert(entry.key, entry.content);
    }
    Ok(answers)
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(ArgsError::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(ArgsError::Usage(message)) => {
            eprintln!("openai-double: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("openai-double: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let listener = match bind_loopback(args.port).await {
            Ok(listener) => listener,
            Err(e) => {
                eprintln!(
                    "openai-double: cannot listen on 127.0.0.1:{}: {e}",
                    args.port
                );
                return ExitCode::FAILURE;
            }
        };
        let addr = match listener.local_addr() {
            Ok(addr) => addr,
            Err(e) => {
                eprintln!("openai-double: {e}");
                return ExitCode::FAILURE;
            }
        };
        let mut stdout = std::io::stdout().lock();
        if writeln!(stdout, "listening on http://{addr}/v1")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return ExitCode::FAILURE;
        }
        drop(stdout);
        let stats = Arc::new(DoubleStats::for_config(&args.config));
        match serve(listener, args.config, stats).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("openai-double: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

//! Environment synthesis (`envsim env synth`): a writer model writes a package from a domain
//! description, an OpenAPI document or a list of tools, guided by the package format's own
//! documentation; the sandbox checks it ([`check`]) and each failure goes back to the writer
//! for repair, a bounded number of rounds; a package that passes is then judged by a simulator
//! ([`crate::gate`]), whose disagreements also go back for repair. The first package that
//! passes both is the result.
//!
//! Nothing is printed here; the caller hears of each round through `progress`.

pub mod batch;
pub mod check;
pub mod dedup;
pub mod files;

use crate::gate::{gate, GateConfig, GateReport};
use check::{check_package, CheckKind, CheckPlan, Finding, PackageCheck};
use envsim_core::prompt::Prompt;
use envsim_core::sample::Usage;
use envsim_exec::package::EnvPackage;
use envsim_exec::{ExecError, Executor};
use envsim_llm::{BoxFuture, LlmError, TextModel};
use envsim_sim::backend::Simulator;
use files::PackageFiles;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The package format's documentation the writer is given (the corpus README up to its notes
/// on importers).
pub fn format_guide() -> &'static str {
    const README: &str = include_str!("../../../envs/README.md");
    match README.find("## Checking and importing packages") {
        Some(end) => &README[..end],
        None => README,
    }
}

/// What the package is written from.
#[derive(Clone, Debug, PartialEq)]
pub enum EnvSource {
    /// A domain described in words (a line or a paragraph).
    Description(String),
    /// An OpenAPI document whose operations become the tools.
    OpenApi(Value),
    /// OpenAI tool schemas to implement as they are.
    Tools(Vec<Value>),
}

/// One environment to write.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvRequest {
    /// The package name (a Python-friendly identifier, `snake_case`).
    pub name: String,
    /// What it is written from.
    pub source: EnvSource,
    /// `class` or `database`.
    pub convention: envsim_exec::Convention,
}

/// How the loop runs.
#[derive(Clone, Debug)]
pub struct SynthPlan {
    /// Writer rounds at most: the first draft and the repairs.
    pub rounds: usize,
    /// How packages are checked in the sandbox.
    pub check: CheckPlan,
    /// How the simulator judges a package that passes the checks (`None`: no gate).
    pub gate: Option<GateConfig>,
    /// Seed of the writer's requests.
    pub seed: u64,
}

impl Default for SynthPlan {
    fn default() -> Self {
        SynthPlan {
            rounds: 3,
            check: CheckPlan::default(),
            gate: Some(GateConfig::default()),
            seed: 1,
        }
    }
}

/// One writer round.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Round {
    /// 1 for the first draft.
    pub number: usize,
    /// What failed (none: the package passed every check and the gate).
    pub findings: Vec<Finding>,
    /// The gate's verdict, when the package reached it.
    pub gate: Option<GateReport>,
    /// Tokens the writer spent on this round.
    pub writer_usage: Usage,
}

/// The result of writing one environment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SynthOutcome {
    /// The package name.
    pub name: String,
    /// Whether a package passed every check (and the gate, when there is one).
    pub accepted: bool,
    /// Every round, in order.
    pub rounds: Vec<Round>,
    /// The files of the last package that read as files (the accepted one when accepted).
    #[serde(skip)]
    pub files: Option<PackageFiles>,
    /// Tokens the writer spent in all.
    pub writer_usage: Usage,
    /// Tokens the gate's simulator spent in all.
    pub gate_tokens: u64,
}

/// Why the loop could not go on (the writer's own mistakes are findings, not errors).
#[derive(Debug, thiserror::Error)]
pub enum SynthEnvError {
    /// The writer model gave no answer.
    #[error(transparent)]
    Writer(#[from] LlmError),
    /// The sandbox failed.
    #[error("the executor: {0}")]
    Executor(#[from] ExecError),
    /// The scratch folder could not be written.
    #[error("cannot write the draft package to {path}: {error}")]
    Scratch {
        /// Where.
        path: String,
        /// Why.
        error: std::io::Error,
    },
    /// The gate could not judge (its simulator failed, not the package).
    #[error(transparent)]
    Gate(#[from] crate::gate::GateError),
    /// The request is not one.
    #[error("{0}")]
    Request(String),
}

/// What a round did, as it finishes.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundEvent {
    /// The package.
    pub name: String,
    /// Its round.
    pub round: usize,
    /// Findings (empty: passed).
    pub findings: usize,
    /// The gate's score, when it judged.
    pub gate_score: Option<f64>,
}

/// Writes the environment `request` asks for with `writer`, checking each draft in
/// `scratch/NAME` (a package folder is named after its package; rewritten every round) and
/// judging it with the simulator
/// `simulator(package)` gives; `progress` hears of every round.
pub async fn synthesize(
    writer: &dyn TextModel,
    executor: Arc<Executor>,
    simulator: &(dyn Fn(&EnvPackage) -> Arc<dyn Simulator> + Sync),
    request: &EnvRequest,
    plan: &SynthPlan,
    scratch: &Path,
    progress: &(dyn Fn(RoundEvent) + Sync),
) -> Result<SynthOutcome, SynthEnvError> {
    if !is_identifier(&request.name) {
        return Err(SynthEnvError::Request(format!(
            "{:?} is not a package name: use lower-case letters, digits and underscores, starting with a letter",
            request.name
        )));
    }
    let mut outcome = SynthOutcome {
        name: request.name.clone(),
        accepted: false,
        rounds: Vec::new(),
        files: None,
        writer_usage: Usage::default(),
        gate_tokens: 0,
    };
    let draft = scratch.join(&request.name);
    let mut previous: Option<(String, Vec<Finding>)> = None;
    for number in 1..=plan.rounds.max(1) {
        let prompt = match &previous {
            None => writing_prompt(request),
            Some((answer, findings)) => repair_prompt(request, answer, findings),
        };
        let seed = plan.seed.wrapping_add(number as u64);
        let (answer, usage) = writer.complete(prompt, None, seed).await?;
        // Every answer is kept beside the draft, read or not, for whoever debugs a writer.
        let kept = scratch.join(format!("{}.round-{number}.txt", request.name));
        envsim_fs::write_atomic(&kept, answer.as_bytes()).map_err(|e| SynthEnvError::Scratch {
            path: kept.display().to_string(),
            error: std::io::Error::new(e.error.kind(), e.to_string()),
        })?;
        outcome.writer_usage.prompt_tokens += usage.prompt_tokens;
        outcome.writer_usage.completion_tokens += usage.completion_tokens;
        let mut round = Round {
            number,
            findings: Vec::new(),
            gate: None,
            writer_usage: usage,
        };
        match PackageFiles::parse(&answer) {
            Err(e) => round.findings.push(Finding {
                check: CheckKind::Files,
                message: e.to_string(),
            }),
            Ok(files) => {
                let files = with_name(files, &request.name);
                files
                    .write(&draft)
                    .map_err(|error| SynthEnvError::Scratch {
                        path: draft.display().to_string(),
                        error,
                    })?;
                let checked: PackageCheck =
                    check_package(Arc::clone(&executor), &draft, &plan.check).await?;
                round.findings = checked.findings;
                if let (true, Some(package), Some(config)) =
                    (round.findings.is_empty(), &checked.package, &plan.gate)
                {
                    let report = gate(
                        Arc::clone(&executor),
                        package,
                        simulator(package),
                        None,
                        config,
                        |_, _| {},
                    )
                    .await?;
                    outcome.gate_tokens += report.tokens;
                    if !report.accepted {
                        round.findings.extend(gate_findings(&report));
                    }
                    round.gate = Some(report);
                }
                outcome.files = Some(files);
            }
        }
        progress(RoundEvent {
            name: request.name.clone(),
            round: number,
            findings: round.findings.len(),
            gate_score: round.gate.as_ref().map(|g| g.score),
        });
        let passed = round.findings.is_empty();
        previous = Some((answer, round.findings.clone()));
        outcome.rounds.push(round);
        if passed {
            outcome.accepted = true;
            break;
        }
    }
    Ok(outcome)
}

/// Whether `name` is a package name.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 64
}

/// The files with the manifest's `name` set to the one asked for (a writer that names its
/// package otherwise is not refused for it).
fn with_name(mut files: PackageFiles, name: &str) -> PackageFiles {
    if let Some(text) = files.files.get_mut("manifest.json") {
        if let Ok(Value::Object(mut manifest)) = serde_json::from_str::<Value>(text) {
            if manifest.get("name").and_then(Value::as_str) != Some(name) {
                manifest.insert("name".into(), Value::String(name.to_owned()));
                if let Ok(pretty) = serde_json::to_string_pretty(&Value::Object(manifest)) {
                    *text = pretty + "\n";
                }
            }
        }
    }
    files
}

/// The gate's disagreements as findings: per tool, what was executed and what was predicted.
fn gate_findings(report: &GateReport) -> Vec<Finding> {
    let mut out = vec![Finding {
        check: CheckKind::Gate,
        message: format!(
            "a simulator given the description, rules and state (not the code) agreed with the code on {}/{} sampled calls ({:.2}, below {}): where they disagree, the code does what the description does not say, or the description is too vague to say it",
            report.agreeing, report.calls, report.score, report.threshold
        ),
    }];
    for t in report.tools.iter().filter(|t| t.agreeing < t.calls) {
        let example = t.examples.first().map_or(String::new(), |e| {
            format!(
                "; e.g. arguments {}: the code answered {} but the description suggests {}{}",
                Value::Object(e.arguments.clone()),
                e.executed_observation,
                e.predicted_observation,
                if e.state_differs_at.is_empty() {
                    String::new()
                } else {
                    format!(" (the state differs at {})", e.state_differs_at.join(", "))
                }
            )
        });
        out.push(Finding {
            check: CheckKind::Gate,
            message: format!(
                "{}: {}/{} calls agree{example}",
                t.tool, t.agreeing, t.calls
            ),
        });
    }
    out
}

/// The system message of every writer request: the role, the format's documentation, the
/// answer format.
fn system_message() -> String {
    format!(
        "You write executable environment packages for training tool-using agents. A package is \
a small Python 3.11 program (standard library only) that keeps its whole state as JSON and \
exposes tools, with a manifest describing them, initial states, scripted tests and tasks. \
Simulators will be given only the manifest (description, rules, tool schemas) and a state, \
never the code, and must be able to predict every answer and state change from them: so every \
rule the code enforces must be written in the manifest's `rules`, and every tool description \
must say what it changes and when it refuses.\n\n\
The package format:\n\n{guide}\n\
Answer with the files only, each starting on a line of its own `=== FILE: path ===`, and end \
with `=== END ===`. Write: env.py, manifest.json, states/00_small.json, states/01_medium.json, \
states/02_large.json (three sizes of the same world), tests.json (for every tool at least one \
success and one refusal), tasks.jsonl (at least five tasks, one JSON object per line: \
{{\"id\": ..., \"instruction\": what a user asks the agent, \"state\": \"00_small\", \"tools\": [the tools it needs]}}).",
        guide = format_guide()
    )
}

/// The first request.
fn writing_prompt(request: &EnvRequest) -> Prompt {
    Prompt {
        system: system_message(),
        user: format!(
            "{}\n\nPackage name: {}\nConvention: {}",
            source_text(&request.source),
            request.name,
            convention_name(request.convention)
        ),
    }
}

/// A repair request: the draft and what failed. An answer that held no package files is not
/// shown again (there is nothing in it to repair, and it would crowd the writer's context).
fn repair_prompt(request: &EnvRequest, answer: &str, findings: &[Finding]) -> Prompt {
    let listed: String = findings
        .iter()
        .map(|f| format!("- [{}] {}\n", f.check.name(), f.message))
        .collect();
    let previous = if findings.iter().any(|f| f.check == CheckKind::Files) {
        format!("Your previous answer could not be read as package files:\n{listed}\nWrite the whole package, every file under its `=== FILE: path ===` line, ending with `=== END ===`.")
    } else {
        format!("Your previous package:\n\n{answer}\n\nIt failed these checks in the sandbox:\n{listed}\nWrite the whole package again with every problem fixed (all files, in the same answer format).")
    };
    Prompt {
        system: system_message(),
        user: format!(
            "{}\n\nPackage name: {}\nConvention: {}\n\n{previous}",
            source_text(&request.source),
            request.name,
            convention_name(request.convention)
        ),
    }
}

fn convention_name(convention: envsim_exec::Convention) -> &'static str {
    match convention {
        envsim_exec::Convention::Database => "database",
        _ => "class",
    }
}

fn source_text(source: &EnvSource) -> String {
    match source {
        EnvSource::Description(text) => format!("Write an environment for this domain:\n{text}"),
        EnvSource::OpenApi(doc) => format!(
            "Write an environment that implements this OpenAPI document, one tool per operation (named by its operationId, else method and path):\n{}",
            serde_json::to_string_pretty(doc).unwrap_or_default()
        ),
        EnvSource::Tools(tools) => format!(
            "Write an environment that implements exactly these tools (OpenAI function schemas; keep names and parameters):\n{}",
            serde_json::to_string_pretty(tools).unwrap_or_default()
        ),
    }
}

/// A test double of a writer model: it answers from a script, one answer per request in order
/// (the last one again when the script runs out), and records the prompts it got. It stands in
/// for a model in tests of the loop (good, repairable and hopeless writers); it writes nothing
/// of its own.
pub struct ScriptedWriter {
    answers: Vec<String>,
    asked: Mutex<Vec<Prompt>>,
}

impl ScriptedWriter {
    /// A writer answering `answers` in turn.
    pub fn new(answers: Vec<String>) -> Self {
        ScriptedWriter {
            answers,
            asked: Mutex::new(Vec::new()),
        }
    }

    /// The prompts it was given, in order.
    pub fn prompts(&self) -> Vec<Prompt> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

impl TextModel for ScriptedWriter {
    fn name(&self) -> String {
        "scripted-writer".to_owned()
    }

    fn complete<'a>(
        &'a self,
        prompt: Prompt,
        _schema: Option<Value>,
        _seed: u64,
    ) -> BoxFuture<'a, Result<(String, Usage), LlmError>> {
        Box::pin(async move {
            let mut asked = self.asked.lock().map_err(|_| LlmError {
                model: self.name(),
                message: "the script's lock was poisoned".into(),
            })?;
            let k = asked.len();
            let tokens = (prompt.system.len() + prompt.user.len()) as u64 / 4;
            asked.push(prompt);
            let answer = (self.answers.get(k).or(self.answers.last()))
                .cloned()
                .ok_or_else(|| LlmError {
                    model: self.name(),
                    message: "the script holds no answer".into(),
                })?;
            let usage = Usage {
                prompt_tokens: tokens,
                completion_tokens: answer.len() as u64 / 4,
            };
            Ok((answer, usage))
        })
    }
}

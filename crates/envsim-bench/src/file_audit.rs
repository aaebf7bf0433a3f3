//! The audit of a file of trajectories or transcripts (`envsim audit FILE`), record by record:
//! what each environment's tools do is learned once (from its package when the host holds it,
//! else guessed from tool names and what a specification declares), each record is read in the
//! first form that fits it and audited with its states or as calls only, its calls checked
//! against a specification, and only running totals are kept ([`SummaryTally`]); at the end the
//! outcome distribution is compared with what is expected of it (a reference dataset, the
//! executor on the same calls, or the statuses a specification declares) and the totals become
//! a typed [`AuditSummary`].
//!
//! The host ([`AuditHost`]) holds the environments, learns and replays (it owns the executor
//! and shows progress) and hears [`AuditNotice`]s; nothing is printed here.

use crate::learn::{Learned, LearningPlan};
use crate::records::{for_each_record_in, read_record, AuditRecord, RecordError};
use crate::replay::{ReplayChoice, ReplayedRun};
use crate::trajectories::{RecordedRun, RecordedStep};
use envsim_core::answer::{observation_value, Answer, AnswerForm, AnswerTally};
use envsim_core::audit::bias::{
    call_transition_kind, declared_classes, outcome_class, OutcomeCounts,
};
use envsim_core::audit::observed::{
    audit_calls, guess_outcome, CallStep, CallTrajectory, Timeline,
};
use envsim_core::audit::transcript_effects::{self, MIN_TRANSCRIPTS};

use envsim_core::audit::{
    audit, AnswerSummary, AuditStep, AuditSummary, AuditTrajectory, BiasSummary, Effects,
    EffectsOrigin, EnvironmentEffects, SpecViolation, SummaryTally, TrajectoryAudit, Violation,
};
use envsim_core::outcome::OutcomeRule;
use envsim_exec::package::EnvPackage;
use envsim_spec::checks::SpecChecks;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

/// Transcripts of one environment read for the writes they show, at the most (the first of
/// the file): more outvote no better, and memory holds them all while they are read.
const MAX_TRANSCRIPTS: usize = 5_000;

/// Calls per learning walk.
const LEARNING_STEPS: usize = 16;
/// Seed of the learning walks.
const LEARNING_SEED: u64 = 1;
/// Concurrent runs of a replay for the expected outcomes.
const REPLAY_WORKERS: usize = 2;

/// A failure of the host (loading a package, learning, replaying).
pub type HostError = Box<dyn std::error::Error + Send + Sync>;

/// What the audit needs from where it runs.
pub trait AuditHost {
    /// The package of the environment named `env`; `None` when the host holds none of that
    /// name (its effects are then guessed). A package that is there but does not load is an
    /// error, not a guess.
    fn package(&mut self, env: &str) -> Result<Option<EnvPackage>, HostError>;
    /// What `package`'s tools do, learned by walking it as `plan` says.
    fn learn(&mut self, package: &EnvPackage, plan: &LearningPlan) -> Result<Learned, HostError>;
    /// `runs` re-executed from their initial states.
    fn replay(
        &mut self,
        packages: &[EnvPackage],
        runs: &[RecordedRun],
        source: &str,
        choice: ReplayChoice<'_>,
    ) -> Result<Vec<ReplayedRun>, HostError>;
    /// Something the user should know about how the audit reads the records.
    fn notice(&mut self, notice: AuditNotice);
}

/// What the audit tells its host as it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditNotice {
    /// The effects of an environment the host does not hold are guessed from tool names
    /// (`env` is `None` for records that name no environment).
    Guessed {
        /// The environment.
        env: Option<String>,
        /// Whether the specification's paths declare effects the guess starts from.
        from_spec: bool,
    },
    /// Tools of `env` whose writes were taken from what the file's own `transcripts`
    /// transcripts show (tool, successes read back), the walks having seen none succeed:
    /// weaker evidence than executed calls.
    FromTranscripts {
        /// The environment.
        env: String,
        /// Its transcripts without states in the file.
        transcripts: usize,
        /// The tools, with the successes whose target a later answer showed.
        tools: Vec<(String, usize)>,
    },
    /// The calls of `runs` runs are re-executed for the expected outcome distribution.
    Replaying {
        /// How many.
        runs: usize,
    },
}

/// Which trajectory the audit keeps to draw (in the HTML report).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Drawing {
    /// None.
    #[default]
    Nothing,
    /// The one with the most violations (the first of them).
    MostViolations,
    /// The first whose id contains this text.
    Containing(String),
}

/// How a file is audited.
#[derive(Clone)]
pub struct FileAuditConfig {
    /// The environment of every record (else each record's own `env`).
    pub env: Option<String>,
    /// The initial state of every record without states (a state file of the environment's
    /// package, with or without `.json`), else each record's own `state`.
    pub state: Option<String>,
    /// A specification the calls are checked against, whose paths also declare effects.
    pub spec: Option<SpecChecks>,
    /// Walks per initial state that effects are learned from, at the least.
    pub learn_walks: usize,
    /// Whether the calls of runs with states are re-executed for the expected outcomes.
    pub replay: bool,
    /// The trajectory kept to draw.
    pub drawing: Drawing,
    /// The least share of a file's answers that must read (0 accepts anything).
    pub min_read: f64,
    /// Whether a file holding many transcripts without states of one environment is read
    /// once more, first, for what its calls show of the writes of tools the walks never saw
    /// succeed ([`envsim_core::audit::transcript_effects`]).
    pub transcript_evidence: bool,
}

impl Default for FileAuditConfig {
    fn default() -> Self {
        FileAuditConfig {
            env: None,
            state: None,
            spec: None,
            learn_walks: 6,
            replay: true,
            drawing: Drawing::Nothing,
            min_read: 0.5,
            transcript_evidence: true,
        }
    }
}

/// Why an audit stopped.
#[derive(Debug, thiserror::Error)]
pub enum FileAuditError {
    /// A file or record that does not read.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A record that reads but cannot be audited as it is (the message names the place).
    #[error("{0}")]
    Unauditable(String),
    /// Less than the least share of a file's answers could be read: a clean bill of health for
    /// a file whose answers were never read would be a lie.
    #[error("{file}: only {:.1}% of the tool answers could be read (below the least share read, {min_read}): {answers}", 100.0 * share)]
    Unread {
        /// The file.
        file: String,
        /// The share read.
        share: f64,
        /// The least share asked for.
        min_read: f64,
        /// The answers counted per form.
        answers: String,
    },
    /// The audited files hold no trajectory.
    #[error("{0}: no trajectories")]
    Empty(String),
    /// The host failed (loading a package, learning, replaying).
    #[error(transparent)]
    Host(HostError),
    /// The violations could not be written.
    #[error("cannot write the violations: {0}")]
    Write(#[from] std::io::Error),
}

/// The trajectory an HTML report draws: its resource lanes, and its violations (of the state
/// checks, then of the specification).
#[derive(Clone, Debug)]
pub struct Drawn {
    /// Its state constraint graph as lanes of events.
    pub timeline: Timeline,
    /// Its violations of the consistency checks.
    pub violations: Vec<Violation>,
    /// Its calls that break the specification.
    pub spec: Vec<SpecViolation>,
}

/// What an audit found.
#[derive(Clone, Debug)]
pub struct FileAuditReport {
    /// The totals.
    pub summary: AuditSummary,
    /// The trajectory kept to draw, when one was asked for and found.
    pub drawn: Option<Drawn>,
}

/// What is known of an environment the records name.
struct Known {
    effects: Effects,
    /// Tools whose writes the audited file's transcripts showed.
    from_transcripts: Vec<String>,
    /// Its outcome rule, when the host holds it.
    rule: Option<OutcomeRule>,
    /// The package, when the host holds it.
    package: Option<EnvPackage>,
}

impl Known {
    /// A call of a trajectory without states, its outcome read from its answer, with the
    /// form the answer was written in.
    fn call_step(
        &self,
        tool: String,
        arguments: serde_json::Map<String, Value>,
        answer: Answer,
    ) -> (CallStep, AnswerForm) {
        let step = CallStep {
            tool,
            arguments,
            success: self.classify_answer(&answer),
            observation: answer.value,
        };
        (step, answer.form)
    }

    /// Success or failure of an observation: the environment's outcome rule, else the guess
    /// for APIs nobody described.
    fn classify(&self, observation: &Value) -> Option<bool> {
        match &self.rule {
            Some(rule) => rule.classify(observation),
            None => guess_outcome(observation),
        }
    }

    /// [`Known::classify`] of an answer, on its value and on the whole text of an embedded
    /// one (a rule written for the text, such as an error prefix, reads it there).
    fn classify_answer(&self, answer: &Answer) -> Option<bool> {
        answer.outcome(|value| self.classify(value))
    }
}

/// A step as the outcome counts and the specification checks read it, borrowed from a
/// trajectory with or without states (nothing is copied).
struct StepView<'a> {
    tool: &'a str,
    arguments: &'a serde_json::Map<String, Value>,
    observation: &'a Value,
    success: Option<bool>,
}

fn views_of_calls(t: &CallTrajectory) -> Vec<StepView<'_>> {
    t.steps
        .iter()
        .map(|s| StepView {
            tool: &s.tool,
            arguments: &s.arguments,
            observation: &s.observation,
            success: s.success,
        })
        .collect()
}

fn views_of_states(t: &AuditTrajectory) -> Vec<StepView<'_>> {
    t.steps
        .iter()
        .map(|s| StepView {
            tool: &s.tool,
            arguments: &s.arguments,
            observation: &s.observation,
            success: s.success,
        })
        .collect()
}

/// What is expected of each tool's outcome classes (`None`: nothing is).
type Expectation = Box<dyn Fn(&str) -> Option<BTreeMap<String, f64>>>;

/// The audit of one or more files, record by record: [`FileAudit::read_reference`] first when
/// a reference dataset says what outcome distribution to expect, then
/// [`FileAudit::audit_file`], then [`FileAudit::finish`].
pub struct FileAudit<'h> {
    config: FileAuditConfig,
    host: &'h mut dyn AuditHost,
    /// Per environment: its effects and outcome rule (learned once).
    known: BTreeMap<String, Known>,
    /// Tool lists transcripts declare, compiled once each (by their JSON text).
    declared: HashMap<String, Rc<SpecChecks>>,
    /// Running totals of the audits (nothing per trajectory is kept): violations, SCS,
    /// specification conformance, input forms, answers per file, transitions.
    tally: SummaryTally,
    /// Where violations go as they are found.
    out: Option<&'h mut dyn std::io::Write>,
    /// The record being audited: where it is (`line 3`) and its own id, which every
    /// violation carries in fields of their own.
    current: (String, Option<String>),
    /// Outcome classes per tool of the audited steps.
    outcomes: OutcomeCounts,
    /// The reference dataset's name and outcome classes, when one was read.
    reference: Option<(String, OutcomeCounts)>,
    /// Whether records go to the reference's counts (while it is read).
    reading_reference: bool,
    /// The audited files.
    audited: Vec<String>,
    /// Runs with initial states of environments the host holds (states after dropped), to
    /// re-execute for the expected outcomes.
    to_replay: Vec<RecordedRun>,
    /// The trajectory kept to draw.
    drawn: Option<Drawn>,
}

impl<'h> FileAudit<'h> {
    /// An audit as `config` says, its environments from `host`.
    pub fn new(config: FileAuditConfig, host: &'h mut dyn AuditHost) -> Self {
        FileAudit {
            config,
            host,
            known: BTreeMap::new(),
            declared: HashMap::new(),
            tally: SummaryTally::default(),
            out: None,
            current: (String::new(), None),
            outcomes: OutcomeCounts::default(),
            reference: None,
            reading_reference: false,
            audited: Vec::new(),
            to_replay: Vec::new(),
            drawn: None,
        }
    }

    /// Writes every violation to `out` as JSON Lines as it is found (state checks, then
    /// specification), each with the record's id (`record`), line and location.
    pub fn with_violations(mut self, out: &'h mut dyn std::io::Write) -> Self {
        self.out = Some(out);
        self
    }

    /// Reads a reference dataset (any form the audit reads), whose outcome distribution per
    /// tool is the one expected of the audited records; only its outcome classes are counted.
    pub fn read_reference(&mut self, path: &Path) -> Result<(), FileAuditError> {
        let name = path.display().to_string();
        self.reference = Some((name.clone(), OutcomeCounts::default()));
        self.reading_reference = true;
        let read = for_each_record_in(path, |value, location, index| {
            self.record(value, location, index, &name)
        });
        self.reading_reference = false;
        read?;
        self.refuse_unread(&name)?;
        self.tally.forget_inputs();
        Ok(())
    }

    /// Audits every record of the file at `path`, one at a time: only its audit (violations,
    /// flags) is kept.
    pub fn audit_file(&mut self, path: &Path) -> Result<(), FileAuditError> {
        let source = path.display().to_string();
        if self.config.transcript_evidence {
            self.learn_from_transcripts(path, &source)?;
        }
        for_each_record_in(path, |value, location, index| {
            self.record(value, location, index, &source)
        })?;
        self.audited.push(source.clone());
        if self.tally.trajectories() > 0 {
            self.refuse_unread(&source)?;
        }
        Ok(())
    }

    /// Reads the file's records without states once, by environment; where an environment has
    /// [`MIN_TRANSCRIPTS`] of them or more, what their successful calls show is taken as the
    /// writes of its tools that have none learned from walks, and said so to the host.
    fn learn_from_transcripts(&mut self, path: &Path, source: &str) -> Result<(), FileAuditError> {
        let mut by_env: BTreeMap<String, Vec<CallTrajectory>> = BTreeMap::new();
        for_each_record_in(path, |value, location, index| {
            let env = (self.config.env.clone())
                .or_else(|| value.get("env").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default();
            let calls: Vec<(String, serde_json::Map<String, Value>, Answer)> =
                match read_record(value, location, index, source)? {
                    AuditRecord::Transcript(t) => t
                        .calls
                        .into_iter()
                        .map(|mut c| {
                            let answer = c.take_answer();
                            (c.tool, c.arguments, answer)
                        })
                        .collect(),
                    AuditRecord::Run(run) if run.initial_state.is_none() => run
                        .steps
                        .into_iter()
                        .map(|s| {
                            let answer = Answer::of_value(s.observation.as_ref());
                            (s.tool, s.arguments, answer)
                        })
                        .collect(),
                    AuditRecord::Run(_) => return Ok::<(), FileAuditError>(()),
                };
            let known = self.known(&env)?;
            let runs = by_env.entry(env).or_default();
            // Enough to outvote the faulty ones; memory holds no more of a large file.
            if runs.len() >= MAX_TRANSCRIPTS {
                return Ok(());
            }
            let steps = calls
                .into_iter()
                .map(|(tool, arguments, answer)| known.call_step(tool, arguments, answer).0)
                .collect();
            runs.push(CallTrajectory {
                id: location.to_owned(),
                steps,
            });
            Ok(())
        })?;
        for (env, runs) in by_env {
            if runs.len() < MIN_TRANSCRIPTS {
                continue;
            }
            let Some(known) = self.known.get_mut(&env) else {
                continue;
            };
            let learned = transcript_effects::learn(&runs, &known.effects);
            let taken = known.effects.with_transcript_writes(&learned);
            if taken.is_empty() {
                continue;
            }
            let tools = (taken.iter())
                .map(|tool| (tool.clone(), learned[tool].read_back))
                .collect();
            known.from_transcripts.extend(taken);
            self.host.notice(AuditNotice::FromTranscripts {
                env,
                transcripts: runs.len(),
                tools,
            });
        }
        Ok(())
    }

    /// The summary of what was audited: the totals, and the outcome distribution against what
    /// is expected of it (which may re-execute the calls).
    pub fn finish(mut self) -> Result<FileAuditReport, FileAuditError> {
        if self.tally.trajectories() == 0 {
            return Err(FileAuditError::Empty(self.audited.join(", ")));
        }
        let bias = self.bias()?;
        let environments = (self.known.iter())
            .map(|(env, k)| EnvironmentEffects {
                env: env.clone(),
                effects: if k.package.is_some() {
                    EffectsOrigin::Learned
                } else {
                    EffectsOrigin::Guessed
                },
                writes_from_transcripts: k.from_transcripts.clone(),
            })
            .collect();
        Ok(FileAuditReport {
            summary: self.tally.finish(environments, bias),
            drawn: self.drawn,
        })
    }

    /// Refuses a file when less than the least share of its answers could be read.
    fn refuse_unread(&self, source: &str) -> Result<(), FileAuditError> {
        let Some(t) = self.tally.answers_of(source) else {
            return Ok(());
        };
        let unread = |t: &AnswerTally| t.answers > 0 && t.read_share() < self.config.min_read;
        if unread(t) {
            return Err(FileAuditError::Unread {
                file: source.to_owned(),
                share: t.read_share(),
                min_read: self.config.min_read,
                answers: AnswerSummary::of(t).describe(),
            });
        }
        Ok(())
    }

    /// What is known of `env`: learned from its package when the host holds it, else guessed
    /// (with what the specification declares).
    fn known(&mut self, env: &str) -> Result<&Known, FileAuditError> {
        if !self.known.contains_key(env) {
            let declared = (self.config.spec.as_ref())
                .map(|s| s.effects.clone())
                .unwrap_or_default();
            let package = if env.is_empty() {
                None
            } else {
                self.host.package(env).map_err(FileAuditError::Host)?
            };
            let entry = match package {
                Some(package) => {
                    let plan = LearningPlan::new(
                        &package,
                        self.config.learn_walks,
                        LEARNING_STEPS,
                        LEARNING_SEED,
                    );
                    let learned =
                        (self.host.learn(&package, &plan)).map_err(FileAuditError::Host)?;
                    Known {
                        effects: learned.effects.with_annotations(&declared),
                        from_transcripts: Vec::new(),
                        rule: Some(package.outcome.clone()),
                        package: Some(package),
                    }
                }
                None => {
                    self.host.notice(AuditNotice::Guessed {
                        env: (!env.is_empty()).then(|| env.to_owned()),
                        from_spec: !declared.is_empty(),
                    });
                    Known {
                        effects: Effects::default().with_annotations(&declared),
                        from_transcripts: Vec::new(),
                        rule: None,
                        package: None,
                    }
                }
            };
            self.known.insert(env.to_owned(), entry);
        }
        Ok(&self.known[env])
    }

    /// Counts the outcome class of every step of a trajectory (into the reference's counts
    /// while the reference dataset is read).
    fn count_outcomes(&mut self, steps: &[StepView<'_>]) {
        let counts = match (&mut self.reference, self.reading_reference) {
            (Some((_, reference)), true) => reference,
            _ => &mut self.outcomes,
        };
        for step in steps {
            counts.add(step.tool, outcome_class(step.observation, step.success));
        }
    }

    /// Whether to keep `report`'s trajectory to draw: the one asked for, or one with more
    /// violations than the one kept.
    fn wants_drawing(&self, report: &TrajectoryAudit) -> bool {
        match &self.config.drawing {
            Drawing::Nothing => false,
            Drawing::Containing(text) => {
                self.drawn.is_none() && report.trajectory.contains(text.as_str())
            }
            Drawing::MostViolations => self
                .drawn
                .as_ref()
                .is_none_or(|d| report.violations.len() > d.violations.len()),
        }
    }

    /// Keeps a trajectory's timeline and violations to draw.
    fn keep_drawing(
        &mut self,
        report: &TrajectoryAudit,
        spec: &[SpecViolation],
        timeline: Timeline,
    ) {
        self.drawn = Some(Drawn {
            timeline,
            violations: report.violations.clone(),
            spec: spec.to_vec(),
        });
    }

    /// Distribution bias of the audited steps against what is expected of them.
    fn bias(&mut self) -> Result<BiasSummary, FileAuditError> {
        let (from, expected): (String, Expectation) = if let Some((name, reference)) =
            self.reference.clone()
        {
            (
                format!("reference dataset {name}"),
                Box::new(move |tool: &str| {
                    (reference.steps(tool) > 0).then(|| reference.distribution(tool))
                }),
            )
        } else if self.config.replay && !self.to_replay.is_empty() {
            let executed = self.replay()?;
            (
                "the executor, on the same calls".to_owned(),
                Box::new(move |tool: &str| {
                    (executed.steps(tool) > 0).then(|| executed.distribution(tool))
                }),
            )
        } else if let Some(declared) = self.config.spec.as_ref().map(|s| s.declared_statuses()) {
            (
                "the statuses --spec declares, each equally likely".to_owned(),
                Box::new(move |tool: &str| {
                    declared
                        .get(tool)
                        .map(|statuses| declared_classes(statuses.iter().map(String::as_str)))
                }),
            )
        } else {
            return Ok(BiasSummary::of(&self.outcomes, None));
        };
        Ok(BiasSummary::of(&self.outcomes, Some((from, &*expected))))
    }

    /// The outcome classes the executor gives on the calls of the runs kept for replay.
    fn replay(&mut self) -> Result<OutcomeCounts, FileAuditError> {
        let runs = std::mem::take(&mut self.to_replay);
        let packages: Vec<EnvPackage> = (self.known.values())
            .filter_map(|k| k.package.clone())
            .collect();
        self.host
            .notice(AuditNotice::Replaying { runs: runs.len() });
        let choice = ReplayChoice {
            env: self.config.env.as_deref(),
            workers: REPLAY_WORKERS,
            ..Default::default()
        };
        let source = self.audited.join(", ");
        let replayed =
            (self.host.replay(&packages, &runs, &source, choice)).map_err(FileAuditError::Host)?;
        let mut counts = OutcomeCounts::default();
        for run in &replayed {
            for step in &run.steps {
                let t = &step.transition;
                let observation = observation_value(&t.observation_json, &t.observation);
                let success = match t.outcome {
                    envsim_explore::record::Outcome::Success => Some(true),
                    envsim_explore::record::Outcome::Failure
                    | envsim_explore::record::Outcome::Exception => Some(false),
                    envsim_explore::record::Outcome::Undetermined => None,
                };
                let tool = t.action["name"].as_str().unwrap_or_default();
                counts.add(tool, outcome_class(&observation, success));
            }
        }
        Ok(counts)
    }

    /// Audits one record.
    fn record(
        &mut self,
        value: Value,
        location: &str,
        index: usize,
        source: &str,
    ) -> Result<(), FileAuditError> {
        let env = (self.config.env.clone())
            .or_else(|| value.get("env").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        let state_name = self.config.state.clone().or_else(|| {
            value
                .get("state")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        let run = match read_record(value, location, index, source)? {
            AuditRecord::Transcript(t) => {
                self.current = (location.to_owned(), t.id.clone());
                self.tally.add_input(t.form.name());
                let declared = if t.tools.is_empty() || self.config.spec.is_some() {
                    None
                } else {
                    let key = serde_json::to_string(&t.tools)
                        .map_err(|e| FileAuditError::Unauditable(e.to_string()))?;
                    if !self.declared.contains_key(&key) {
                        let name = format!("the tools {source} {location} declares");
                        let checks = SpecChecks::from_tools(&t.tools, name).map_err(|e| {
                            FileAuditError::Unauditable(format!(
                                "{source} {location}: tools at {}: {}",
                                e.pointer, e.message
                            ))
                        })?;
                        self.declared.insert(key.clone(), Rc::new(checks));
                    }
                    Some(Rc::clone(&self.declared[&key]))
                };
                let initial = self.initial_state(&env, state_name.as_deref(), source, location)?;
                let known = self.known(&env)?;
                let steps: Vec<(CallStep, AnswerForm)> = t
                    .calls
                    .into_iter()
                    .map(|mut c| {
                        let answer = c.take_answer();
                        known.call_step(c.tool, c.arguments, answer)
                    })
                    .collect();
                let steps = self.tally_answers(source, steps);
                let id = format!("{location} {}", t.id.unwrap_or_else(|| index.to_string()));
                return self.audit_calls(
                    env,
                    CallTrajectory { id, steps },
                    declared.as_deref(),
                    initial.as_ref(),
                );
            }
            AuditRecord::Run(run) => run,
        };
        self.current = (location.to_owned(), Some(run.task_id.clone()));
        let form = if run.initial_state.is_none() {
            "calls"
        } else {
            "states"
        };
        self.tally.add_input(form);
        self.known(&env)?;
        if run.initial_state.is_none() {
            let initial = self.initial_state(&env, state_name.as_deref(), source, location)?;
            let known = &self.known[&env];
            let id = format!("{} {}", run.location, run.task_id);
            let steps: Vec<(CallStep, AnswerForm)> = run
                .steps
                .into_iter()
                .map(|s| {
                    known.call_step(
                        s.tool,
                        s.arguments,
                        Answer::of_value(s.observation.as_ref()),
                    )
                })
                .collect();
            let steps = self.tally_answers(source, steps);
            return self.audit_calls(env, CallTrajectory { id, steps }, None, initial.as_ref());
        }
        let known = &self.known[&env];
        if known.package.is_some() && self.config.replay && self.reference.is_none() {
            self.to_replay.push(calls_of(&run));
        }
        let mut forms = Vec::with_capacity(run.steps.len());
        let trajectory = audit_trajectory(run, source, |answer| {
            let success = known.classify_answer(answer);
            forms.push((answer.form, success.is_some()));
            success
        })?;
        for (form, read) in forms {
            self.tally.add_answer(source, form, read);
        }
        let steps = views_of_states(&trajectory);
        self.count_outcomes(&steps);
        if self.reading_reference {
            return Ok(());
        }
        let report = audit(&trajectory, &self.known[&env].effects);
        self.tally.add_transitions(&report.transitions);
        let spec = self.check_spec(&env, &trajectory.id, &steps, None);
        if self.wants_drawing(&report) {
            self.keep_drawing(&report, &spec, Timeline::of_states(&trajectory));
        }
        self.finish_trajectory(report, spec)
    }

    /// Counts the answers of a trajectory's steps by form, under the file they came from.
    fn tally_answers(&mut self, source: &str, steps: Vec<(CallStep, AnswerForm)>) -> Vec<CallStep> {
        steps
            .into_iter()
            .map(|(step, form)| {
                self.tally.add_answer(source, form, step.success.is_some());
                step
            })
            .collect()
    }

    /// The initial state a record without states names (the configured state, else its own
    /// `state`): a state file of its environment's package. Naming one the package lacks, or
    /// naming one for an environment the host does not hold, is an error.
    fn initial_state(
        &mut self,
        env: &str,
        name: Option<&str>,
        source: &str,
        location: &str,
    ) -> Result<Option<Value>, FileAuditError> {
        let Some(name) = name else { return Ok(None) };
        let known = self.known(env)?;
        let Some(package) = &known.package else {
            return Err(FileAuditError::Unauditable(format!("{source}: {location}: the record names the initial state {name:?}, but its environment {env:?} is not in the corpus (give --envs, or --env)")));
        };
        let found = (package.states.iter())
            .find(|(file, _)| file == name || file.strip_suffix(".json") == Some(name));
        match found {
            Some((_, state)) => Ok(Some(state.clone())),
            None => {
                let names: Vec<&str> = package.states.iter().map(|(f, _)| f.as_str()).collect();
                Err(FileAuditError::Unauditable(format!(
                    "{source}: {location}: {env} has no state {name:?} (its states: {})",
                    names.join(", ")
                )))
            }
        }
    }

    fn audit_calls(
        &mut self,
        env: String,
        trajectory: CallTrajectory,
        declared: Option<&SpecChecks>,
        initial: Option<&Value>,
    ) -> Result<(), FileAuditError> {
        let steps = views_of_calls(&trajectory);
        self.count_outcomes(&steps);
        if self.reading_reference {
            return Ok(());
        }
        let effects = &self.known[&env].effects;
        let kinds: Vec<&'static str> = (trajectory.steps.iter())
            .map(|s| call_transition_kind(&effects.of(&s.tool), s.success))
            .collect();
        let report = audit_calls(&trajectory, effects, initial);
        self.tally.add_transitions(&kinds);
        let spec = self.check_spec(&env, &trajectory.id, &steps, declared);
        if self.wants_drawing(&report) {
            let timeline = Timeline::of_calls(&trajectory, &self.known[&env].effects);
            self.keep_drawing(&report, &spec, timeline);
        }
        self.finish_trajectory(report, spec)
    }

    /// Adds a trajectory's audit to the totals and writes its violations (state checks, then
    /// specification) out.
    fn finish_trajectory(
        &mut self,
        report: TrajectoryAudit,
        spec: Vec<SpecViolation>,
    ) -> Result<(), FileAuditError> {
        self.tally.add_audit(&report);
        if let Some(file) = &mut self.out {
            let (location, record) = &self.current;
            let line = (location.strip_prefix("line ")).and_then(|n| n.parse::<usize>().ok());
            let violations = report.violations.iter().map(serde_json::to_value);
            for v in violations.chain(spec.iter().map(serde_json::to_value)) {
                let mut v = v.map_err(std::io::Error::other)?;
                if let Value::Object(map) = &mut v {
                    map.insert("record".into(), json!(record));
                    map.insert("line".into(), json!(line));
                    map.insert("location".into(), json!(location));
                }
                serde_json::to_writer(&mut **file, &v).map_err(std::io::Error::other)?;
                file.write_all(b"\n")?;
            }
        }
        Ok(())
    }

    /// Every step against the specification: the configured one, else the tools the record
    /// declares, else the environment package's manifest. A trajectory with none is not
    /// checked.
    fn check_spec(
        &mut self,
        env: &str,
        id: &str,
        steps: &[StepView<'_>],
        declared: Option<&SpecChecks>,
    ) -> Vec<SpecViolation> {
        let mut found = Vec::new();
        let package = self.known.get(env).and_then(|k| k.package.as_ref());
        let spec = self.config.spec.as_ref().or(declared);
        if spec.is_none() && package.is_none() {
            return found;
        }
        let tools = package.map(|p| p.manifest.tool_names()).unwrap_or_default();
        let mut flags = Vec::with_capacity(steps.len());
        for (k, step) in steps.iter().enumerate() {
            let (tool, arguments) = (step.tool, step.arguments);
            let problems: Vec<(&str, String)> = match (spec, package) {
                (Some(spec), _) => spec
                    .check(tool, arguments, step.observation, step.success)
                    .into_iter()
                    .map(|p| (p.kind, p.explanation))
                    .collect(),
                // A refused call fits (as `SpecChecks::check` says).
                (None, Some(_)) if step.success == Some(false) => Vec::new(),
                (None, Some(package)) => {
                    if tools.iter().any(|t| t == tool) {
                        let problems = package.arguments.check(tool, arguments);
                        if problems.is_empty() {
                            Vec::new()
                        } else {
                            vec![("argument_schema", problems.join("; "))]
                        }
                    } else {
                        vec![("unknown_tool", format!("{tool} is not a tool of {env}"))]
                    }
                }
                (None, None) => Vec::new(),
            };
            flags.push(!problems.is_empty());
            for (kind, explanation) in problems {
                found.push(SpecViolation {
                    trajectory: id.to_owned(),
                    step: k,
                    tool: tool.to_owned(),
                    kind: kind.to_owned(),
                    explanation,
                });
            }
        }
        self.tally.add_spec_flags(&flags);
        found
    }
}

/// A recorded run as an audit trajectory (states carried forward where a step records none),
/// with `classify` reading each observation's outcome.
pub fn audit_trajectory(
    run: RecordedRun,
    source: &str,
    mut classify: impl FnMut(&Answer) -> Option<bool>,
) -> Result<AuditTrajectory, FileAuditError> {
    let RecordedRun {
        location,
        task_id,
        initial_state,
        steps,
        ..
    } = run;
    let Some(initial) = initial_state else {
        return Err(FileAuditError::Unauditable(format!(
            "{source}: {location}: no initial state; the audit needs a trajectory's states (`envsim env replay` writes them for recorded calls)"
        )));
    };
    // States are moved, not copied; a step that records none shares the state before it.
    let initial = Arc::new(initial);
    let mut out: Vec<AuditStep> = Vec::with_capacity(steps.len());
    for s in steps {
        let state_after = match s.state_after {
            Some(after) => Arc::new(after),
            None => Arc::clone(out.last().map_or(&initial, |p| &p.state_after)),
        };
        let answer = Answer::of_value(s.observation.as_ref());
        out.push(AuditStep {
            tool: s.tool,
            arguments: s.arguments,
            success: classify(&answer),
            observation: answer.value,
            state_after,
        });
    }
    Ok(AuditTrajectory {
        id: format!("{location} {task_id}"),
        initial_state: initial,
        steps: out,
    })
}

/// The calls of a run, without its states after (a replay starts from its initial state).
fn calls_of(run: &RecordedRun) -> RecordedRun {
    RecordedRun {
        location: run.location.clone(),
        format: run.format,
        env: run.env.clone(),
        task_id: run.task_id.clone(),
        initial_state: run.initial_state.clone(),
        state: run.state.clone(),
        steps: (run.steps.iter())
            .map(|s| RecordedStep {
                state_after: None,
                tool: s.tool.clone(),
                arguments: s.arguments.clone(),
                observation: s.observation.clone(),
                seed: s.seed,
                clock: s.clock,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A host holding loaded packages, learning from their manifests and code only (no walks,
    /// so no executor), counting what it is asked.
    #[derive(Default)]
    struct PackagesHost {
        packages: Vec<EnvPackage>,
        learned: Vec<String>,
        notices: Vec<AuditNotice>,
    }

    impl AuditHost for PackagesHost {
        fn package(&mut self, env: &str) -> Result<Option<EnvPackage>, HostError> {
            Ok(self
                .packages
                .iter()
                .find(|p| p.manifest.name == env)
                .cloned())
        }
        fn learn(
            &mut self,
            package: &EnvPackage,
            plan: &LearningPlan,
        ) -> Result<Learned, HostError> {
            assert_eq!((plan.steps, plan.seed), (LEARNING_STEPS, LEARNING_SEED));
            self.learned.push(package.manifest.name.clone());
            Ok(crate::learn::learned_from(package, Vec::new()))
        }
        fn replay(
            &mut self,
            _: &[EnvPackage],
            _: &[RecordedRun],
            _: &str,
            _: ReplayChoice<'_>,
        ) -> Result<Vec<ReplayedRun>, HostError> {
            Err("this host does not replay".into())
        }
        fn notice(&mut self, notice: AuditNotice) {
            self.notices.push(notice);
        }
    }

    fn desk_host(dir: &Path) -> PackagesHost {
        let package = EnvPackage::load(&envsim_testkit::desk::write(dir).unwrap()).unwrap();
        PackagesHost {
            packages: vec![package],
            ..Default::default()
        }
    }

    fn write_records(dir: &Path, name: &str, records: &[Value]) -> std::path::PathBuf {
        let path = dir.join(name);
        let text: String = records.iter().map(|r| format!("{r}\n")).collect();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn no_replay() -> FileAuditConfig {
        FileAuditConfig {
            replay: false,
            learn_walks: 0,
            ..Default::default()
        }
    }

    /// A desk run with states where a read makes ticket T1 vanish.
    fn vanishing_read(task: &str) -> Value {
        json!({"env": "desk", "task_id": task, "initial_state": envsim_testkit::desk::initial_state(),
        "steps": [
          {"action": {"name": "get_ticket", "arguments": {"ticket_id": "T1"}},
           "observation": "{\"success\": true, \"data\": {\"title\": \"a\", \"status\": \"open\"}}",
           "state_after": {"tickets": {}, "next_id": 2}}
        ]})
    }

    /// A desk run with states and nothing wrong: a ticket read as it is.
    fn clean_read(task: &str) -> Value {
        json!({"env": "desk", "task_id": task, "initial_state": envsim_testkit::desk::initial_state(),
        "steps": [
          {"action": {"name": "get_ticket", "arguments": {"ticket_id": "T1"}},
           "observation": "{\"success\": true, \"data\": {\"title\": \"a\", \"status\": \"open\"}}"}
        ]})
    }

    #[test]
    fn a_held_environment_is_learned_once_and_its_violations_written_with_their_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut host = desk_host(dir.path());
        let path = write_records(
            dir.path(),
            "runs.jsonl",
            &[clean_read("a"), vanishing_read("b"), clean_read("c")],
        );
        let mut out = Vec::new();
        let mut audit = FileAudit::new(no_replay(), &mut host).with_violations(&mut out);
        audit.audit_file(&path).unwrap();
        let report = audit.finish().unwrap();
        let summary = &report.summary;
        assert_eq!((summary.trajectories, summary.steps), (3, 3));
        assert_eq!(summary.inputs, BTreeMap::from([("states".to_owned(), 3)]));
        assert_eq!(
            summary.environments,
            vec![EnvironmentEffects {
                env: "desk".into(),
                effects: EffectsOrigin::Learned,
                writes_from_transcripts: Vec::new(),
            }]
        );
        assert_eq!(summary.scs.consistent_trajectories, 2);
        assert!(report.drawn.is_none(), "nothing was asked to be drawn");
        assert_eq!(host.learned, vec!["desk".to_owned()]);
        assert!(host.notices.is_empty(), "{:?}", host.notices);
        let lines: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), summary.violations);
        assert!(!lines.is_empty());
        for line in &lines {
            assert_eq!(
                (&line["record"], &line["line"], &line["location"]),
                (&json!("b"), &json!(2), &json!("line 2")),
                "{line}"
            );
        }
        let kinds: Vec<&Value> = lines.iter().map(|l| &l["kind"]).collect();
        assert_eq!(
            kinds,
            [
                &json!("vanished_without_delete"),
                &json!("read_after_delete")
            ]
        );
    }

    #[test]
    fn the_trajectory_to_draw_is_the_one_asked_for_or_the_worst() {
        let dir = tempfile::tempdir().unwrap();
        let mut host = desk_host(dir.path());
        let records = [
            clean_read("first"),
            vanishing_read("worst"),
            clean_read("last"),
        ];
        let path = write_records(dir.path(), "runs.jsonl", &records);
        let drawn = |host: &mut PackagesHost, drawing: Drawing| {
            let config = FileAuditConfig {
                drawing,
                ..no_replay()
            };
            let mut audit = FileAudit::new(config, host);
            audit.audit_file(&path).unwrap();
            audit.finish().unwrap().drawn
        };
        let worst = drawn(&mut host, Drawing::MostViolations).unwrap();
        assert!(!worst.violations.is_empty());
        assert!(worst
            .violations
            .iter()
            .all(|v| v.trajectory == "line 2 worst"));
        let asked = drawn(&mut host, Drawing::Containing("last".into())).unwrap();
        assert!(asked.violations.is_empty());
        assert!(drawn(&mut host, Drawing::Containing("nowhere".into())).is_none());
    }

    #[test]
    fn an_environment_nobody_holds_is_guessed_and_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut host = PackagesHost::default();
        let transcript = json!({"id": "t1", "env": "shop", "messages": [
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
              "function": {"name": "create_order", "arguments": "{\"item\": \"pen\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "{\"order_id\": \"O1\"}"},
            {"role": "assistant", "tool_calls": [{"id": "c2", "type": "function",
              "function": {"name": "get_order", "arguments": "{\"order_id\": \"O1\"}"}}]},
            {"role": "tool", "tool_call_id": "c2", "content": "{\"order_id\": \"O1\", \"item\": \"pen\"}"}
        ]});
        let path = write_records(dir.path(), "chat.jsonl", std::slice::from_ref(&transcript));
        let mut audit = FileAudit::new(no_replay(), &mut host);
        audit.audit_file(&path).unwrap();
        let summary = audit.finish().unwrap().summary;
        assert_eq!((summary.trajectories, summary.steps), (1, 2));
        assert_eq!(
            summary.inputs,
            BTreeMap::from([("openai_chat".to_owned(), 1)])
        );
        assert_eq!(summary.environments[0].effects, EffectsOrigin::Guessed);
        assert_eq!(
            host.notices,
            vec![AuditNotice::Guessed {
                env: Some("shop".into()),
                from_spec: false
            }]
        );
        assert!(host.learned.is_empty());
        // A record that names an initial state of an environment nobody holds is refused.
        let mut named = transcript;
        named["state"] = json!("00");
        let path = write_records(dir.path(), "named.jsonl", &[named]);
        let mut audit = FileAudit::new(no_replay(), &mut host);
        let err = audit.audit_file(&path).unwrap_err().to_string();
        assert_eq!(err, format!("{}: line 1: the record names the initial state \"00\", but its environment \"shop\" is not in the corpus (give --envs, or --env)", path.display()));
    }

    #[test]
    fn a_file_whose_answers_do_not_read_is_refused_with_the_counts() {
        let dir = tempfile::tempdir().unwrap();
        let mut host = desk_host(dir.path());
        // Prose the desk's outcome rule cannot decide.
        let transcript = json!({"env": "desk", "messages": [
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
              "function": {"name": "get_ticket", "arguments": "{\"ticket_id\": \"T1\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "The ticket is open."}
        ]});
        let path = write_records(dir.path(), "chat.jsonl", &[transcript]);
        let mut audit = FileAudit::new(no_replay(), &mut host);
        match audit.audit_file(&path).unwrap_err() {
            FileAuditError::Unread {
                file,
                share,
                min_read,
                answers,
            } => {
                assert_eq!(file, path.display().to_string());
                assert_eq!((share, min_read), (0.0, 0.5));
                assert!(answers.starts_with("1 tool answers (1 text)"), "{answers}");
            }
            other => panic!("{other}"),
        }
        // A least share of 0 accepts it.
        let config = FileAuditConfig {
            min_read: 0.0,
            ..no_replay()
        };
        let mut audit = FileAudit::new(config, &mut host);
        audit.audit_file(&path).unwrap();
        assert_eq!(audit.finish().unwrap().summary.trajectories, 1);
    }

    #[test]
    fn states_a_package_lacks_and_empty_audits_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut host = desk_host(dir.path());
        let record = json!({"env": "desk", "task_id": "t", "state": "99_huge", "steps": [
            {"action": {"name": "get_ticket", "arguments": {"ticket_id": "T1"}},
             "observation": "{\"success\": true}"}]});
        let path = write_records(dir.path(), "calls.jsonl", &[record]);
        let mut audit = FileAudit::new(no_replay(), &mut host);
        let err = audit.audit_file(&path).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "{}: line 1: desk has no state \"99_huge\" (its states: 00.json)",
                path.display()
            )
        );
        let audit = FileAudit::new(no_replay(), &mut host);
        assert_eq!(audit.finish().unwrap_err().to_string(), ": no trajectories");
    }

    #[test]
    fn a_reference_dataset_sets_the_expected_outcomes() {
        let dir = tempfile::tempdir().unwrap();
        let mut host = desk_host(dir.path());
        let failing = json!({"env": "desk", "task_id": "r", "initial_state": envsim_testkit::desk::initial_state(),
               "steps": [{"action": {"name": "get_ticket", "arguments": {"ticket_id": "T9"}},
                          "observation": "{\"success\": false, \"error\": \"no ticket T9\"}"}]});
        let reference = write_records(dir.path(), "reference.jsonl", &[failing]);
        let audited = write_records(dir.path(), "runs.jsonl", &[clean_read("a")]);
        let mut audit = FileAudit::new(no_replay(), &mut host);
        audit.read_reference(&reference).unwrap();
        audit.audit_file(&audited).unwrap();
        let summary = audit.finish().unwrap().summary;
        // Only the audited file's records are counted as inputs.
        assert_eq!(summary.trajectories, 1);
        assert_eq!(summary.inputs, BTreeMap::from([("states".to_owned(), 1)]));
        assert_eq!(
            summary.bias.expected_from,
            Some(format!("reference dataset {}", reference.display()))
        );
        assert_eq!(summary.bias.observed.get("success"), Some(&1.0));
    }
}

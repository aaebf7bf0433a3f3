//! Proving the audit's detectors on executed ground truth: walks of the corpus become clean
//! trajectories (every state, observation and outcome really happened), a share of them get one
//! planted fault each ([`envsim_core::audit::inject`]), and every detector is scored against
//! the labels: recall per fault kind, precision per violation kind, and the share of clean
//! trajectories each violation kind flags (the false-positive rate).

use envsim_core::audit::observed::{audit_calls, guess_outcome, CallTrajectory};
use envsim_core::audit::{
    audit, AuditStep, AuditTrajectory, Effects, FaultKind, FaultLabel, FaultPlan, ViolationKind,
};
use envsim_core::outcome::OutcomeRule;
use envsim_core::rng::Rng;
use envsim_explore::record::{Outcome, TransitionRecord};
use envsim_spec::checks::SpecChecks;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// Walk transitions as trajectories: one per (environment, initial state, walk), steps in
/// order, grouped by environment.
pub fn trajectories_from_walks(
    records: &[TransitionRecord],
) -> BTreeMap<String, Vec<AuditTrajectory>> {
    let mut runs: BTreeMap<(String, String, usize), Vec<&TransitionRecord>> = BTreeMap::new();
    for r in records {
        runs.entry((r.env.clone(), r.initial_state.clone(), r.walk))
            .or_default()
            .push(r);
    }
    let mut out: BTreeMap<String, Vec<AuditTrajectory>> = BTreeMap::new();
    for ((env, state, walk), mut steps) in runs {
        steps.sort_by_key(|r| r.step);
        if let Some(trajectory) = trajectory_of(format!("{env}/{state}/{walk}"), &steps) {
            out.entry(env).or_default().push(trajectory);
        }
    }
    out
}

/// The transitions of one run, in step order, as a trajectory with its states (`None` when
/// there are none): the state before the first step is its initial state, and an unchanged
/// state is the state before, shared.
pub fn trajectory_of(id: String, steps: &[&TransitionRecord]) -> Option<AuditTrajectory> {
    let first = steps.first()?;
    let initial = std::sync::Arc::new(first.config_before.value());
    Some(trajectory_from(id, initial, steps))
}

/// [`trajectory_of`] with the state before the first step given: a replayed run's, which runs
/// from the same database share (a 3 MB database parsed once, not once per trajectory).
pub fn trajectory_from(
    id: String,
    initial: std::sync::Arc<Value>,
    steps: &[&TransitionRecord],
) -> AuditTrajectory {
    let mut previous = std::sync::Arc::clone(&initial);
    let steps = steps
        .iter()
        .map(|r| {
            let state_after = if r.config_after == r.config_before {
                std::sync::Arc::clone(&previous)
            } else {
                std::sync::Arc::new(r.config_after.value())
            };
            previous = std::sync::Arc::clone(&state_after);
            AuditStep {
                tool: r.action["name"].as_str().unwrap_or_default().to_owned(),
                arguments: r.action["arguments"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
                observation: envsim_core::answer::observation_value(
                    &r.observation_json,
                    &r.observation,
                ),
                success: match r.outcome {
                    Outcome::Success => Some(true),
                    Outcome::Failure | Outcome::Exception => Some(false),
                    Outcome::Undetermined => None,
                },
                state_after,
            }
        })
        .collect();
    AuditTrajectory {
        id,
        initial_state: initial,
        steps,
    }
}

/// Counts of one fault kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FaultCounts {
    /// Trajectories that got this fault.
    pub planted: usize,
    /// Of those, found at the planted step by one of the kinds that find it.
    pub found: usize,
}

/// One planted fault and what the audit made of it ([`Validation::planted`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlantedFault {
    /// The input form it was audited in.
    pub form: InputForm,
    /// The environment.
    pub env: String,
    /// The trajectory, step, kind and resource of the fault.
    #[serde(flatten)]
    pub label: FaultLabel,
    /// Found at its step by a check that finds its kind.
    pub found: bool,
    /// Every flag raised on the faulty trajectory: (step, kind).
    pub flags: Vec<(usize, &'static str)>,
    /// The explanation of each state check's flag, in step order (the specification's flags
    /// have none).
    pub explanations: Vec<String>,
    /// The tool of the planted step and its observation with the fault in it.
    pub tool: String,
    pub observation: Value,
}

/// A clean trajectory that a check flagged: a false alarm ([`Validation::false_alarms`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FalseAlarm {
    /// The input form it was audited in.
    pub form: InputForm,
    /// The environment.
    pub env: String,
    /// The trajectory's id.
    pub trajectory: String,
    /// Every flag raised on it: (step, kind).
    pub flags: Vec<(usize, &'static str)>,
    /// The explanation of each state check's flag, in step order.
    pub explanations: Vec<String>,
}

/// Counts of one violation kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CheckCounts {
    /// Violations on faulty trajectories at or after the planted step (caused by the fault).
    pub true_positives: usize,
    /// Violations on clean trajectories, or before the planted step.
    pub false_positives: usize,
    /// Clean trajectories with at least one violation of this kind.
    pub clean_flagged: usize,
}

/// What the audit is given of a trajectory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputForm {
    /// Every state (envsim trajectory JSONL): faults planted in states and observations,
    /// audited with [`audit`].
    #[default]
    States,
    /// Calls and observations only (a chat transcript): faults planted in observations,
    /// audited with [`audit_calls`].
    Calls,
    /// Calls and observations, with the initial state known from the package and the
    /// record's state name: the same faults as [`InputForm::Calls`], audited from the state
    /// the calls imply on top of the initial one.
    #[serde(rename = "calls_initial")]
    CallsInitial,
    /// Calls and observations with only an OpenAPI description of the environment: effects
    /// from the description's methods and paths, outcomes read from the observations
    /// ([`guess_outcome`]), and the description's argument and response schemas checked.
    #[serde(rename = "openapi")]
    OpenApi,
}

impl InputForm {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            InputForm::States => "states",
            InputForm::Calls => "calls",
            InputForm::CallsInitial => "calls_initial",
            InputForm::OpenApi => "openapi",
        }
    }
}

/// The specification checks the OpenAPI form adds as detectors, by name (those of
/// [`SpecChecks::check`] that a simulated answer can break; `argument_schema` is about the
/// call, and is counted apart: [`Validation::accepted_invalid_calls`]).
pub const SPEC_KINDS: [&str; 2] = ["unknown_tool", "response_schema"];

/// Whether a flag of `kind` finds a planted `fault`: one of the state checks that find it,
/// or, for a renamed or retyped field, the response schema.
fn finds(fault: FaultKind, kind: &str) -> bool {
    fault.found_by().iter().any(|k| k.name() == kind)
        || (fault == FaultKind::SchemaDrift && kind == "response_schema")
}

/// What an input form is told of an environment.
pub struct Known<'a> {
    /// Its tools' effects, learned from executed walks (states and calls forms).
    pub effects: &'a Effects,
    /// Its outcome rule: how the planted observations are written (every form), and how
    /// outcomes are read (states and calls forms).
    pub rule: &'a OutcomeRule,
    /// Its API description (the OpenAPI form's only knowledge besides the answers).
    pub spec: Option<&'a SpecChecks>,
}

/// The result of validating the audit on one input form.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Validation {
    /// The input form.
    pub form: InputForm,
    /// Environments.
    pub environments: usize,
    /// Trajectories audited.
    pub trajectories: usize,
    /// Of those, clean.
    pub clean: usize,
    /// Clean trajectories with any violation.
    pub clean_flagged: usize,
    /// Steps audited.
    pub steps: usize,
    /// Per fault kind.
    pub faults: BTreeMap<String, FaultCounts>,
    /// Per violation kind.
    pub checks: BTreeMap<String, CheckCounts>,
    /// OpenAPI form: calls of clean trajectories that break their schema and were not
    /// answered as failures (the environment's code accepted them, or its failure is one the
    /// answer does not show).
    pub accepted_invalid_calls: usize,
    /// Mean SCS of clean trajectories.
    pub mean_scs_clean: f64,
    /// Mean SCS of faulty trajectories.
    pub mean_scs_faulty: f64,
    /// Sums behind the means, and the count of faulty trajectories.
    #[serde(skip)]
    scs_sums: (f64, f64, usize),
    /// Which fault kind comes next.
    #[serde(skip)]
    plan: FaultPlan,
    /// The environment being added and its generator: a later [`Validation::add`] of the same
    /// environment continues it, so trajectories added in chunks get the faults they would get
    /// added at once.
    #[serde(skip)]
    current: Option<(String, Rng)>,
    /// Every planted fault, in order.
    #[serde(skip)]
    planted: Vec<PlantedFault>,
    /// Every clean trajectory a check flagged, in order.
    #[serde(skip)]
    false_alarms: Vec<FalseAlarm>,
}

impl Validation {
    /// An empty validation of `form`.
    pub fn new(form: InputForm) -> Validation {
        Validation {
            form,
            ..Validation::default()
        }
    }

    /// Plants one fault in a `rate` share of an environment's trajectories (kinds in turn
    /// across environments, [`FaultPlan`]), audits every trajectory with what the form knows
    /// of the environment (`known`), and adds the scores against the labels. Environments are
    /// added one at a time, and an environment's trajectories may come in chunks (consecutive
    /// calls with the same `env`; the result is that of one call), so memory holds a chunk.
    pub fn add(
        &mut self,
        env: &str,
        runs: &[AuditTrajectory],
        known: &Known<'_>,
        rate: f64,
        seed: u64,
    ) {
        if self.faults.is_empty() {
            let kinds: &[FaultKind] = match self.form {
                InputForm::States => &FaultKind::ALL,
                InputForm::Calls | InputForm::CallsInitial | InputForm::OpenApi => {
                    &FaultKind::CALLS
                }
            };
            for &kind in kinds {
                self.faults
                    .insert(kind.name().into(), FaultCounts::default());
            }
            for kind in ViolationKind::ALL {
                self.checks
                    .insert(kind.name().into(), CheckCounts::default());
            }
            if self.form == InputForm::OpenApi {
                for kind in SPEC_KINDS {
                    self.checks.insert(kind.into(), CheckCounts::default());
                }
            }
        }
        let mut rng = match self.current.take() {
            Some((current, rng)) if current == env => rng,
            _ => {
                self.environments += 1;
                Rng::derive(seed, env)
            }
        };
        let fx = match (self.form, known.spec) {
            (InputForm::OpenApi, Some(spec)) => Effects::default().with_annotations(&spec.effects),
            _ => known.effects.clone(),
        };
        for t in runs {
            let (report, flags, label, spec_explanations) = match self.form {
                InputForm::States => {
                    let (report, label) = match self.plan.plant(t, rate, &mut rng) {
                        Some((faulty, label)) => {
                            let at = faulty
                                .steps
                                .get(label.step)
                                .map(|step| (step.tool.clone(), step.observation.clone()));
                            (audit(&faulty, &fx), Some((label, at)))
                        }
                        None => (audit(t, &fx), None),
                    };
                    (report, Vec::new(), label, Vec::new())
                }
                InputForm::Calls | InputForm::CallsInitial | InputForm::OpenApi => {
                    let (mut calls, label) =
                        match self.plan.plant_calls(t, rate, known.rule, &mut rng) {
                            Some((faulty, label)) => {
                                let at = faulty
                                    .steps
                                    .get(label.step)
                                    .map(|step| (step.tool.clone(), step.observation.clone()));
                                (faulty, Some((label, at)))
                            }
                            None => (CallTrajectory::from(t), None),
                        };
                    let mut flags = Vec::new();
                    let mut spec_explanations = Vec::new();
                    if self.form == InputForm::OpenApi {
                        // Nothing says how this API answers failure but the answers.
                        for step in &mut calls.steps {
                            step.success = guess_outcome(&step.observation);
                        }
                        if let Some(spec) = known.spec {
                            for (k, step) in calls.steps.iter().enumerate() {
                                let problems = spec.check(
                                    &step.tool,
                                    &step.arguments,
                                    &step.observation,
                                    step.success,
                                );
                                for p in problems {
                                    // A call breaking its schema is the caller's doing; that
                                    // the environment accepted it is a fact of the environment
                                    // (its code is lenient), counted, not a detected fault.
                                    if p.kind == "argument_schema" {
                                        if label.is_none() {
                                            self.accepted_invalid_calls += 1;
                                        }
                                    } else {
                                        flags.push((k, None, p.kind));
                                        spec_explanations
                                            .push(format!("step {k}: {}", p.explanation));
                                    }
                                }
                            }
                        }
                    }
                    let initial =
                        (self.form == InputForm::CallsInitial).then_some(t.initial_state.as_ref());
                    let report = audit_calls(&calls, &fx, initial);
                    (report, flags, label, spec_explanations)
                }
            };
            // Every flag: (step, conflicting step, kind).
            let mut flags: Vec<(usize, Option<usize>, &'static str)> = flags;
            flags.extend(
                report
                    .violations
                    .iter()
                    .map(|x| (x.step, x.conflicting_step, x.kind.name())),
            );
            let (label, at) = match label {
                Some((label, at)) => (Some(label), at),
                None => (None, None),
            };
            let label = label.as_ref();
            // What a listed fault or false alarm says of its trajectory.
            let flag_list = || -> Vec<(usize, &'static str)> {
                flags.iter().map(|(step, _, kind)| (*step, *kind)).collect()
            };
            let explanations = || -> Vec<String> {
                (report.violations.iter())
                    .map(|v| format!("step {}: {}", v.step, v.explanation))
                    .chain(spec_explanations.iter().cloned())
                    .collect()
            };
            self.trajectories += 1;
            self.steps += report.steps;
            match label {
                None => {
                    self.clean += 1;
                    self.scs_sums.0 += report.scs();
                    self.clean_flagged += usize::from(!flags.is_empty());
                    if !flags.is_empty() {
                        self.false_alarms.push(FalseAlarm {
                            form: self.form,
                            env: env.to_owned(),
                            trajectory: t.id.clone(),
                            flags: flag_list(),
                            explanations: explanations(),
                        });
                    }
                    let mut kinds: Vec<&str> = flags.iter().map(|x| x.2).collect();
                    for kind in &kinds {
                        if let Some(c) = self.checks.get_mut(*kind) {
                            c.false_positives += 1;
                        }
                    }
                    kinds.sort();
                    kinds.dedup();
                    for kind in kinds {
                        if let Some(c) = self.checks.get_mut(kind) {
                            c.clean_flagged += 1;
                        }
                    }
                }
                Some(label) => {
                    self.scs_sums.2 += 1;
                    self.scs_sums.1 += report.scs();
                    // Found at its step, or by a later step that names it as the step it
                    // conflicts with (a retried call exposing a flip).
                    let found = flags.iter().any(|(step, conflicting, kind)| {
                        (*step == label.step || *conflicting == Some(label.step))
                            && finds(label.kind, kind)
                    });
                    if let Some(f) = self.faults.get_mut(label.kind.name()) {
                        f.planted += 1;
                        f.found += usize::from(found);
                    }
                    let (tool, observation) = at.unwrap_or_default();
                    self.planted.push(PlantedFault {
                        form: self.form,
                        env: env.to_owned(),
                        label: label.clone(),
                        found,
                        flags: flag_list(),
                        explanations: explanations(),
                        tool,
                        observation,
                    });
                    for (step, _, kind) in &flags {
                        if let Some(c) = self.checks.get_mut(*kind) {
                            if *step >= label.step {
                                c.true_positives += 1;
                            } else {
                                c.false_positives += 1;
                            }
                        }
                    }
                }
            }
        }
        self.mean_scs_clean = self.scs_sums.0 / self.clean.max(1) as f64;
        self.mean_scs_faulty = self.scs_sums.1 / self.scs_sums.2.max(1) as f64;
        self.current = Some((env.to_owned(), rng));
    }

    /// Every fault planted so far, in order, with whether it was found.
    pub fn planted(&self) -> &[PlantedFault] {
        &self.planted
    }

    /// Every clean trajectory a check flagged so far, in order, with the flags.
    pub fn false_alarms(&self) -> &[FalseAlarm] {
        &self.false_alarms
    }

    /// Markdown tables: recall per fault kind, precision and clean-trajectory flag rate per
    /// check.
    pub fn markdown(&self) -> String {
        let pct = |a: usize, b: usize| {
            if b == 0 {
                "—".to_owned()
            } else {
                format!("{:.1}%", 100.0 * a as f64 / b as f64)
            }
        };
        let mut out = format!(
            "Input: {}. {} trajectories ({} steps) from {} environments; {} clean, {} with one planted fault. Clean trajectories flagged by any check: {} of {} ({}). Mean SCS: clean {:.4}, faulty {:.4}.{}\n\n| planted fault | planted | found at its step | recall |\n|---|---|---|---|\n",
            match self.form {
                InputForm::States => "trajectories with their states",
                InputForm::Calls => "calls and observations only (states dropped)",
                InputForm::CallsInitial => "calls and observations, with the initial state known from the package and the record's state name (later states dropped)",
                InputForm::OpenApi => "calls and observations with only a generated OpenAPI description (no package: effects from paths, outcomes read from the answers, schemas checked)",
            },
            self.trajectories,
            self.steps,
            self.environments,
            self.clean,
            self.trajectories - self.clean,
            self.clean_flagged,
            self.clean,
            pct(self.clean_flagged, self.clean),
            self.mean_scs_clean,
            self.mean_scs_faulty,
            if self.form == InputForm::OpenApi {
                format!(" Calls of clean trajectories that break their schema and were not answered as failures (the environment accepted them; not counted as flags): {}.", self.accepted_invalid_calls)
            } else {
                String::new()
            },
        );
        for (name, f) in &self.faults {
            out.push_str(&format!(
                "| {name} | {} | {} | {} |\n",
                f.planted,
                f.found,
                pct(f.found, f.planted)
            ));
        }
        out.push_str("\n| check | violations caused by a fault | other violations | precision | clean trajectories flagged |\n|---|---|---|---|---|\n");
        for (name, c) in &self.checks {
            out.push_str(&format!(
                "| {name} | {} | {} | {} | {} ({}) |\n",
                c.true_positives,
                c.false_positives,
                pct(c.true_positives, c.true_positives + c.false_positives),
                c.clean_flagged,
                pct(c.clean_flagged, self.clean)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envsim_core::audit::AuditStep;
    use serde_json::json;
    use std::sync::Arc;

    /// A desk of tickets: `n` runs that create a ticket, read it back and close it.
    fn runs(n: usize) -> Vec<AuditTrajectory> {
        (0..n)
            .map(|i| {
                let id = format!("T{i}");
                let open = json!({"tickets": {&id: {"status": "open", "title": format!("t{i}")}}});
                let closed =
                    json!({"tickets": {&id: {"status": "closed", "title": format!("t{i}")}}});
                let step = |tool: &str, args: Value, obs: Value, after: &Value| AuditStep {
                    tool: tool.into(),
                    arguments: args.as_object().cloned().unwrap_or_default(),
                    observation: obs,
                    success: Some(true),
                    state_after: Arc::new(after.clone()),
                };
                AuditTrajectory {
                    id: format!("run {i}"),
                    initial_state: Arc::new(json!({"tickets": {}})),
                    steps: vec![
                        step(
                            "create_ticket",
                            json!({"title": format!("t{i}")}),
                            json!({"success": true, "ticket_id": &id}),
                            &open,
                        ),
                        step(
                            "get_ticket",
                            json!({"ticket_id": &id}),
                            json!({"success": true, "status": "open", "title": format!("t{i}")}),
                            &open,
                        ),
                        step(
                            "close_ticket",
                            json!({"ticket_id": &id}),
                            json!({"success": true}),
                            &closed,
                        ),
                        step(
                            "get_ticket",
                            json!({"ticket_id": &id}),
                            json!({"success": true, "status": "closed", "title": format!("t{i}")}),
                            &closed,
                        ),
                    ],
                }
            })
            .collect()
    }

    #[test]
    fn an_environment_added_in_chunks_scores_as_added_at_once() {
        let all = runs(12);
        let effects = Effects::learn(&all);
        let rule = OutcomeRule::success_key();
        let known = Known {
            effects: &effects,
            rule: &rule,
            spec: None,
        };
        for form in [InputForm::States, InputForm::Calls] {
            let mut whole = Validation::new(form);
            whole.add("desk", &all, &known, 0.5, 7);
            let mut chunked = Validation::new(form);
            for chunk in all.chunks(5) {
                chunked.add("desk", chunk, &known, 0.5, 7);
            }
            assert_eq!(chunked.environments, 1);
            assert!(whole.trajectories == 12 && whole.clean < 12, "{whole:?}");
            assert_eq!(
                serde_json::to_value(&chunked).unwrap(),
                serde_json::to_value(&whole).unwrap()
            );
            // A second environment starts its own generator.
            chunked.add("other", &all[..2], &known, 0.5, 7);
            assert_eq!(chunked.environments, 2);
        }
    }
}

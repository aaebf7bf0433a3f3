//! Replaying recorded calls: re-executing a run's calls in the sandbox from a known initial
//! state, so that its transitions (state before and after, Δ, observation) are ones that really
//! happened, and comparing every replayed observation with the recorded one.
//!
//! Seeds and clocks: a step that records its own (envsim's files do) runs with them, so a replay
//! of an envsim trajectory is exact; otherwise step `k` of a run with seed `s` gets
//! [`envsim_exec::step_seed`]`(s, k)` and the clock `start + k × step` of [`StepDefaults`]
//! (by default the initial state's own clock and five-minute steps, as in `bench build` walks).

mod runs;
pub use runs::{package_for, package_state, replay_runs, ReplayChoice, ReplayError};

use crate::trajectories::RecordedRun;
use envsim_core::diff::ReferenceEquality;
use envsim_core::diff::{fine_diff, reference_change_json, reference_diff, ChangeKind};
use envsim_core::equality::py_eq;
use envsim_core::python::PyValue;
use envsim_core::reference::extract::parse_to_obj;
use envsim_exec::package::EnvPackage;
use envsim_exec::{step_seed, Call, ExecError, Executor};
use envsim_explore::driver::Intent;
use envsim_explore::record::{execute, Position, Probes, StateForm, TransitionRecord};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// How a replayed observation compares with the recorded one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", content = "why", rename_all = "snake_case")]
pub enum Comparison {
    /// The same text.
    Exact,
    /// Equal after a normalisation, named here (JSON vs Python literal, whitespace, fields
    /// that depend on the clock or the seed).
    Normalised(String),
    /// Different; the first differences.
    Differs(String),
    /// The record holds no observation for this step (and no state to check).
    NotRecorded,
}

impl Comparison {
    /// `exact`, `normalised`, `differs`, `not_recorded`.
    pub fn label(&self) -> &'static str {
        match self {
            Comparison::Exact => "exact",
            Comparison::Normalised(_) => "normalised",
            Comparison::Differs(_) => "differs",
            Comparison::NotRecorded => "not_recorded",
        }
    }

    /// The explanation, if any.
    pub fn why(&self) -> Option<&str> {
        match self {
            Comparison::Normalised(why) | Comparison::Differs(why) => Some(why),
            Comparison::Exact | Comparison::NotRecorded => None,
        }
    }
}

/// One replayed step.
#[derive(Clone, Debug)]
pub struct ReplayedStep {
    /// The transition that happened.
    pub transition: TransitionRecord,
    /// What the record says the call returned.
    pub recorded_observation: Option<Value>,
    /// Replay against record.
    pub comparison: Comparison,
}

/// One replayed run.
#[derive(Clone, Debug)]
pub struct ReplayedRun {
    /// The package.
    pub env: String,
    /// The record's task id.
    pub task_id: String,
    /// Where the record was (`line 3`).
    pub location: String,
    /// Which initial state (a package state's file name, or where the state came from).
    pub initial_state_name: String,
    /// The constructed initial state: the state before the first step. Shared: runs that
    /// start from the same state hold one copy ([`share_initial_states`]), which matters when
    /// the state is a 3 MB database.
    pub initial_state: Arc<Value>,
    /// The run seed step seeds derive from.
    pub seed: u64,
    /// The steps.
    pub steps: Vec<ReplayedStep>,
}

/// Counts of a replay's comparisons.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReplayCounts {
    /// Same text.
    pub exact: usize,
    /// Equal after normalisation.
    pub normalised: usize,
    /// Different.
    pub differs: usize,
    /// Nothing recorded to compare with.
    pub not_recorded: usize,
}

impl ReplayCounts {
    /// Adds one comparison.
    pub fn add(&mut self, comparison: &Comparison) {
        match comparison {
            Comparison::Exact => self.exact += 1,
            Comparison::Normalised(_) => self.normalised += 1,
            Comparison::Differs(_) => self.differs += 1,
            Comparison::NotRecorded => self.not_recorded += 1,
        }
    }

    /// Adds another set of counts.
    pub fn merge(&mut self, other: ReplayCounts) {
        self.exact += other.exact;
        self.normalised += other.normalised;
        self.differs += other.differs;
        self.not_recorded += other.not_recorded;
    }

    /// Steps counted.
    pub fn total(&self) -> usize {
        self.exact + self.normalised + self.differs + self.not_recorded
    }
}

impl ReplayedRun {
    /// The counts of this run.
    pub fn counts(&self) -> ReplayCounts {
        let mut counts = ReplayCounts::default();
        for step in &self.steps {
            counts.add(&step.comparison);
        }
        counts
    }

    /// The run as one envsim trajectory record: the constructed initial state once, then per
    /// step the action, the observation, the state after (only when the step changed it: the
    /// state before step k is the state after step k-1), the Δ as the reference lists it, seed,
    /// clock, outcome, and the comparison with the record. Reading it back with
    /// [`crate::trajectories::read_runs`] and replaying it gives the same transitions.
    pub fn to_json(&self) -> Value {
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|s| {
                let t = &s.transition;
                let mut step = json!({
                    "action": t.action,
                    "observation": t.observation,
                    "observation_json": t.observation_json,
                    "outcome": t.outcome,
                    "seed": t.seed,
                    "clock": t.clock,
                });
                if t.config_after != t.config_before {
                    let (before, after) = (t.config_before.value(), t.config_after.value());
                    let delta: Vec<Value> =
                        reference_diff(&before, &after, ReferenceEquality::Labelling)
                            .iter()
                            .map(|c| reference_change_json(c, false))
                            .collect();
                    step["delta"] = Value::Array(delta);
                    step["state_after"] = after;
                } else {
                    step["delta"] = json!([]);
                }
                step["delta_count"] = t.change_count.into();
                if !t.unpredictable.is_empty() {
                    step["unpredictable"] = json!(t.unpredictable);
                }
                step["recorded_observation"] =
                    s.recorded_observation.clone().unwrap_or(Value::Null);
                step["comparison"] = json!({
                    "result": s.comparison.label(),
                    "why": s.comparison.why(),
                });
                step
            })
            .collect();
        json!({
            "env": self.env,
            "task_id": self.task_id,
            "source": self.location,
            "initial_state_name": self.initial_state_name,
            "seed": self.seed,
            "initial_state": self.initial_state.as_ref(),
            "steps": steps,
            "summary": self.counts(),
        })
    }
}

/// What the steps of a replayed run get when the record does not say: step `k` runs with seed
/// [`step_seed`]`(seed, k)` and clock `clock_start + k × clock_step`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepDefaults {
    /// Run seed.
    pub seed: u64,
    /// Clock of the first step (and of the constructor).
    pub clock_start: f64,
    /// Seconds between steps.
    pub clock_step: f64,
}

impl StepDefaults {
    /// The clock of step `k`.
    pub fn clock(&self, k: usize) -> f64 {
        self.clock_start + (k as f64) * self.clock_step
    }
}

/// Re-executes `run`'s calls on `package` from `start` (a raw initial state: the run starts
/// from the state of the instance constructed from it) with the seeds and clocks of `defaults`
/// where the run records none. `walk` numbers the run among others.
/// Only infrastructure failures (no worker, protocol) are errors: what the environment does with
/// each call — an error observation, an exception, an invalid call — is a step of the replay.
pub async fn replay_run(
    executor: &Executor,
    package: &EnvPackage,
    run: &RecordedRun,
    start: &Value,
    start_name: &str,
    defaults: StepDefaults,
    walk: usize,
) -> Result<ReplayedRun, ExecError> {
    let seed = defaults.seed;
    let first_clock = run
        .steps
        .first()
        .and_then(|s| s.clock)
        .unwrap_or(defaults.clock_start);
    let initial = match executor
        .construct(&package.code, start, 0, first_clock)
        .await
    {
        Ok(state) => state,
        Err(e @ (ExecError::Spawn(_) | ExecError::Protocol(_))) => return Err(e),
        // The constructor fails on this state: every call fails the same way, from the file.
        Err(_) => start.clone(),
    };
    // One copy of the initial state, shared by the run's record and the form's base; the
    // current state borrows it until a step changes it.
    let initial = Arc::new(initial);
    let form = StateForm::for_initial(&initial);
    let mut state: std::borrow::Cow<'_, Value> = std::borrow::Cow::Borrowed(initial.as_ref());
    let mut state_text = form.text(&state);
    let mut steps = Vec::with_capacity(run.steps.len());
    for (index, recorded) in run.steps.iter().enumerate() {
        let schema = package
            .manifest
            .tools
            .iter()
            .find(|t| t.pointer("/function/name").and_then(Value::as_str) == Some(&recorded.tool))
            .cloned()
            .unwrap_or(Value::Null);
        let call = Call {
            seed: recorded.seed.unwrap_or_else(|| step_seed(seed, index)),
            clock: recorded.clock.unwrap_or_else(|| defaults.clock(index)),
            ..Call::new(&package.code, &recorded.tool, &recorded.arguments, &state)
        };
        let executed = execute(
            executor,
            package,
            &call,
            &state_text,
            &form,
            Position {
                tool_schema: schema,
                state_name: start_name,
                walk,
                step: index,
                intent: Intent::Valid,
            },
            // Replayed runs become benchmark samples too: their unpredictable fields flagged.
            Probes {
                twin: true,
                coverage: false,
            },
        )
        .await?;
        let (transition, after) = (executed.record, executed.after);
        let comparison = compare(
            recorded.observation.as_ref(),
            recorded.state_after.as_ref(),
            &transition,
        );
        if let Some(after) = after {
            state = std::borrow::Cow::Owned(after);
        }
        state_text = transition.config_after.clone();
        steps.push(ReplayedStep {
            transition,
            recorded_observation: recorded.observation.clone(),
            comparison,
        });
    }
    Ok(ReplayedRun {
        env: package.manifest.name.clone(),
        task_id: run.task_id.clone(),
        location: run.location.clone(),
        initial_state_name: start_name.to_owned(),
        initial_state: Arc::clone(&initial),
        seed,
        steps,
    })
}

/// The distinct initial states of replayed runs, so that runs starting from equal states hold
/// one copy: every run constructs its own, and fifty runs over a 3 MB database would otherwise
/// hold fifty (parsed, about ten times the text).
#[derive(Debug, Default)]
pub struct SharedStates(std::sync::Mutex<Vec<Arc<Value>>>);

impl SharedStates {
    /// Points `run`'s initial state at an equal one seen before, or remembers it.
    pub fn share(&self, run: &mut ReplayedRun) {
        let Ok(mut distinct) = self.0.lock() else {
            return;
        };
        match distinct
            .iter()
            .find(|d| Arc::ptr_eq(d, &run.initial_state) || ***d == *run.initial_state)
        {
            Some(shared) => run.initial_state = Arc::clone(shared),
            None => distinct.push(Arc::clone(&run.initial_state)),
        }
    }
}

/// Prefixes envsim and recorders put before an error text; two errors that differ only in
/// these are the same error.
const ERROR_PREFIXES: [&str; 4] = ["Error:", "exception:", "invalid call:", "error:"];

fn strip_error_prefixes(text: &str) -> Option<&str> {
    let mut rest = text.trim();
    let mut stripped = false;
    loop {
        match ERROR_PREFIXES.iter().find(|p| rest.starts_with(**p)) {
            Some(prefix) => {
                rest = rest[prefix.len()..].trim_start();
                stripped = true;
            }
            None => return stripped.then_some(rest),
        }
    }
}

/// Compares a replayed step with what was recorded: the state after first (when recorded), then
/// the observation — exact text, else equal after normalisation (the same value as JSON or a
/// Python literal, the same text up to whitespace, the same error up to its prefix, or
/// differences only in fields the twin run found to depend on the clock or the seed), else
/// different, with the first differences.
pub fn compare(
    recorded: Option<&Value>,
    recorded_after: Option<&Value>,
    replayed: &TransitionRecord,
) -> Comparison {
    if let Some(expected) = recorded_after {
        let actual = replayed.config_after.value();
        let changes = fine_diff(expected, &actual);
        if !changes.is_empty() {
            return Comparison::Differs(format!("the state after differs: {}", describe(&changes)));
        }
    }
    let Some(recorded) = recorded else {
        return Comparison::NotRecorded;
    };
    if recorded.as_str() == Some(replayed.observation.as_str()) {
        return Comparison::Exact;
    }
    let recorded_value = match recorded {
        Value::String(s) => parse_to_obj(&PyValue::str(s)).to_json_lossy(),
        other => other.clone(),
    };
    let replayed_value = if replayed.observation_json.is_null() {
        parse_to_obj(&PyValue::str(&replayed.observation)).to_json_lossy()
    } else {
        replayed.observation_json.clone()
    };
    if let (Value::String(r), Value::String(p)) = (&recorded_value, &replayed_value) {
        let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        if words(r) == words(p) {
            return Comparison::Normalised("the same text up to whitespace".into());
        }
        if let (Some(r), Some(p)) = (strip_error_prefixes(r), strip_error_prefixes(p)) {
            if words(r) == words(p) {
                return Comparison::Normalised("the same error, with another prefix".into());
            }
        }
    }
    if recorded_value == replayed_value || py_eq(&recorded_value, &replayed_value) {
        return Comparison::Normalised(
            "the same value, written differently (JSON, Python literal or key order)".into(),
        );
    }
    let changes = fine_diff(&recorded_value, &replayed_value);
    let unexplained: Vec<_> = changes
        .iter()
        .filter(|c| {
            let at = format!("/observation{}", c.pointer);
            !replayed
                .unpredictable
                .iter()
                .any(|u| at == *u || at.starts_with(&format!("{u}/")))
        })
        .cloned()
        .collect();
    if unexplained.is_empty() && !changes.is_empty() {
        let fields: Vec<String> = changes.iter().map(|c| c.pointer.to_string()).collect();
        return Comparison::Normalised(format!(
            "differs only where the output depends on the clock or the seed: {}",
            fields.join(", ")
        ));
    }
    Comparison::Differs(format!(
        "the observation differs: {}",
        describe(&unexplained)
    ))
}

/// The first three changes, in words (`/balance: recorded 120, replayed 100`).
fn describe(changes: &[envsim_core::diff::Change<'_>]) -> String {
    let shown = |v: Option<&Value>| {
        let text = v.map(Value::to_string).unwrap_or_default();
        if text.chars().count() > 60 {
            format!("{}…", text.chars().take(60).collect::<String>())
        } else {
            text
        }
    };
    let mut parts: Vec<String> = changes
        .iter()
        .take(3)
        .map(|c| {
            let at = match c.pointer.to_string() {
                p if p.is_empty() => "the whole value".to_owned(),
                p => p,
            };
            match c.kind {
                ChangeKind::Modified => format!(
                    "{at}: recorded {}, replayed {}",
                    shown(c.before),
                    shown(c.after)
                ),
                ChangeKind::Added => format!("{at}: only in the replay ({})", shown(c.after)),
                ChangeKind::Removed => {
                    format!("{at}: only in the recording ({})", shown(c.before))
                }
            }
        })
        .collect();
    if changes.len() > 3 {
        parts.push(format!("and {} more", changes.len() - 3));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use envsim_explore::record::{Outcome, StateText};

    fn replayed(
        observation: &str,
        observation_json: Value,
        unpredictable: &[&str],
    ) -> TransitionRecord {
        TransitionRecord {
            env: "shop".into(),
            class_name: "Shop".into(),
            convention: Default::default(),
            tool_schema: Value::Null,
            initial_state: "s".into(),
            walk: 0,
            step: 0,
            intent: Intent::Valid,
            action: json!({"name": "get", "arguments": {}}),
            config_before: StateText::from_value(&json!({"n": 1})),
            config_after: StateText::from_value(&json!({"n": 2})),
            observation: observation.into(),
            observation_json,
            outcome: Outcome::Success,
            change_count: 1,
            fine_change_count: 1,
            args_count: 0,
            unpredictable: unpredictable.iter().map(|s| s.to_string()).collect(),
            reads: None,
            seed: 1,
            clock: 0.0,
        }
    }

    #[test]
    fn runs_from_equal_states_share_one_copy_and_large_bases_one_text() {
        let run = |state: Value| ReplayedRun {
            env: "shop".into(),
            task_id: "t".into(),
            location: "line 1".into(),
            initial_state_name: "db.json".into(),
            initial_state: Arc::new(state),
            seed: 0,
            steps: Vec::new(),
        };
        let shared = SharedStates::default();
        let mut runs = [
            run(json!({"n": 1})),
            run(json!({"n": 2})),
            run(json!({"n": 1})),
        ];
        for r in &mut runs {
            shared.share(r);
        }
        assert!(Arc::ptr_eq(&runs[0].initial_state, &runs[2].initial_state));
        assert!(!Arc::ptr_eq(&runs[0].initial_state, &runs[1].initial_state));
        assert_eq!(*runs[2].initial_state, json!({"n": 1}));

        // Two walks (or runs) from the same large state hold one base text; a different
        // state gets its own.
        let large = |tag: &str| {
            Arc::new(
                json!({"blob": "x".repeat(envsim_explore::record::LARGE_STATE_BYTES), "tag": tag}),
            )
        };
        let (a, b, c) = (large("a"), large("a"), large("c"));
        let base = |form: &StateForm| match form {
            StateForm::Patched(base, _) => Arc::clone(base),
            StateForm::Full => panic!("a large state is patched"),
        };
        let (fa, fb, fc) = (
            StateForm::for_initial(&a),
            StateForm::for_initial(&b),
            StateForm::for_initial(&c),
        );
        assert!(Arc::ptr_eq(&base(&fa), &base(&fb)));
        assert!(!Arc::ptr_eq(&base(&fa), &base(&fc)));
        assert!(matches!(
            StateForm::for_initial(&Arc::new(json!({"n": 1}))),
            StateForm::Full
        ));
    }

    #[test]
    fn comparisons_name_what_was_normalised_or_differs() {
        let t = replayed(
            "{'success': True, 'data': {'id': 'a1', 'n': 2}}",
            json!({"success": true, "data": {"id": "a1", "n": 2}}),
            &["/observation/data/id"],
        );
        let cmp = |recorded: Value| compare(Some(&recorded), None, &t);
        assert_eq!(
            cmp(json!("{'success': True, 'data': {'id': 'a1', 'n': 2}}")),
            Comparison::Exact
        );
        assert_eq!(
            cmp(json!(
                "{\"data\": {\"n\": 2, \"id\": \"a1\"}, \"success\": true}"
            )),
            Comparison::Normalised(
                "the same value, written differently (JSON, Python literal or key order)".into()
            )
        );
        assert_eq!(
            cmp(json!({"success": true, "data": {"id": "zz", "n": 2}})),
            Comparison::Normalised(
                "differs only where the output depends on the clock or the seed: /data/id".into()
            )
        );
        assert_eq!(
            cmp(json!("{'success': True, 'data': {'id': 'zz', 'n': 5, 'x': 1}}")),
            Comparison::Differs(
                "the observation differs: /data/n: recorded 5, replayed 2; /data/x: only in the recording (1)"
                    .into()
            )
        );
        assert_eq!(compare(None, None, &t), Comparison::NotRecorded);
        assert_eq!(
            compare(Some(&json!("x")), Some(&json!({"n": 3})), &t),
            Comparison::Differs("the state after differs: /n: recorded 3, replayed 2".into())
        );
        let text = replayed("Order  O1\nnot found", Value::Null, &[]);
        assert_eq!(
            compare(Some(&json!("Order O1 not found")), None, &text),
            Comparison::Normalised("the same text up to whitespace".into())
        );
        let error = replayed("Error: exception: KeyError: 'O9'", Value::Null, &[]);
        assert_eq!(
            compare(Some(&json!("Error: KeyError: 'O9'")), None, &error),
            Comparison::Normalised("the same error, with another prefix".into())
        );
        assert_eq!(
            compare(Some(&json!("Error: KeyError: 'O8'")), None, &error).label(),
            "differs"
        );
    }

    #[test]
    fn counts_add_up() {
        let mut counts = ReplayCounts::default();
        for c in [
            Comparison::Exact,
            Comparison::Exact,
            Comparison::Differs("x".into()),
            Comparison::NotRecorded,
        ] {
            counts.add(&c);
        }
        assert_eq!(
            counts,
            ReplayCounts {
                exact: 2,
                normalised: 0,
                differs: 1,
                not_recorded: 1
            }
        );
        assert_eq!(counts.total(), 4);
    }

    #[test]
    fn step_seeds_are_distinct_and_stable() {
        let seeds: std::collections::BTreeSet<u64> = (0..1000).map(|k| step_seed(42, k)).collect();
        assert_eq!(seeds.len(), 1000);
        assert_eq!(step_seed(42, 3), step_seed(42, 3));
        assert_ne!(step_seed(42, 3), step_seed(43, 3));
        assert!(seeds.iter().all(|s| *s < 1 << 48));
    }
}

//! Validation of a predicted step against the session (pure: no I/O). A step is checked
//! against the specification (the answer's schema, and — in environment-free mode, where the
//! description is the only truth — the call's arguments; `SpecChecks::check`) and
//! against the state constraint graph of the session's history: the audit of the trajectory
//! so far plus this step ([`envsim_core::audit::audit`]), of which the violations at this step
//! count (a read of a deleted entity, a vanished create, a success that changed nothing from a
//! tool whose successes always change the state, an answer whose shape its tool never had, ...),
//! and the audit of its calls and answers against the state they imply on top of the initial
//! one ([`envsim_core::audit::observed::audit_calls`]: a read showing a value a change
//! replaced, a status moved back, a success where a learned guard says the call fails).
//!
//! The audit reads the whole trajectory again at each step: O(n) per step, which sessions of
//! tens or hundreds of steps afford (states are shared, not copied).

use crate::environment::Environment;
use envsim_core::audit::observed::{audit_calls, CallTrajectory};
use envsim_core::audit::{audit, AuditStep, AuditTrajectory, ViolationKind};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;

/// One reason a predicted step is rejected.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Problem {
    /// The check (`response_schema`, `vanished_without_delete`, `unreadable`, ...).
    pub kind: String,
    /// What is wrong, in words (stated to the model when it regenerates).
    pub explanation: String,
    /// The resource it is about (`tickets/T4`), when one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

/// The problems of `candidate` as the next step after `history` (from `initial`). The history
/// is borrowed for the audit and given back as it was (no copy of it per answer checked).
pub fn validate(
    env: &Environment,
    initial: &Arc<Value>,
    history: &mut Vec<AuditStep>,
    candidate: &AuditStep,
) -> Vec<Problem> {
    let mut problems: Vec<Problem> = env
        .spec
        .check(
            &candidate.tool,
            &candidate.arguments,
            &candidate.observation,
            candidate.success,
        )
        .into_iter()
        // With code, the code decides which calls it accepts (lenient code takes a number for
        // a string, and the truth is that it does); without, the description is the truth.
        .filter(|p| !(p.kind == "argument_schema" && env.code.is_some()))
        .map(|p| Problem {
            kind: p.kind.to_owned(),
            explanation: p.explanation,
            resource: None,
        })
        .collect();
    history.push(candidate.clone());
    let at = history.len() - 1;
    let trajectory = AuditTrajectory {
        id: String::new(),
        initial_state: Arc::clone(initial),
        steps: std::mem::take(history),
    };
    let report = audit(&trajectory, &env.effects);
    // The answers against the state the calls and answers so far imply (on top of the
    // initial state): a wrong observation on a right state (a read showing what a change
    // replaced, a status moved back, a success a guard forbids) shows only there.
    let calls = audit_calls(
        &CallTrajectory::from(&trajectory),
        &env.effects,
        Some(initial.as_ref()),
    );
    *history = trajectory.steps;
    history.pop();
    let mut seen: Vec<(ViolationKind, Option<String>)> = Vec::new();
    for v in report.violations.into_iter().chain(calls.violations) {
        if v.step != at || seen.contains(&(v.kind, v.resource.clone())) {
            continue;
        }
        seen.push((v.kind, v.resource.clone()));
        problems.push(Problem {
            kind: v.kind.name().to_owned(),
            explanation: v.explanation,
            resource: v.resource,
        });
    }
    problems
}

/// The facts of the state a regeneration is reminded of: the current value of every resource
/// a problem names (`tickets/T4` → the state's `tickets.T4`), as JSON, at most `limit`
/// characters each.
pub fn state_facts(state: &Value, problems: &[Problem], limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    for p in problems {
        let Some(resource) = &p.resource else {
            continue;
        };
        let mut at = state;
        let mut found = true;
        for part in resource.split('/') {
            match at.get(part) {
                Some(next) => at = next,
                None => {
                    found = false;
                    break;
                }
            }
        }
        let text = if found {
            let mut json = at.to_string();
            if json.len() > limit {
                let mut cut = limit;
                while !json.is_char_boundary(cut) {
                    cut -= 1;
                }
                json.truncate(cut);
                json.push('…');
            }
            format!("the state holds {resource} = {json}")
        } else {
            format!("the state holds no {resource}")
        };
        if !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn facts_name_what_the_state_holds() {
        let state = json!({"tickets": {"T1": {"status": "open"}}});
        let p = |r: &str| Problem {
            kind: "k".into(),
            explanation: String::new(),
            resource: Some(r.into()),
        };
        assert_eq!(
            state_facts(
                &state,
                &[p("tickets/T1"), p("tickets/T9"), p("tickets/T1")],
                100
            ),
            [
                "the state holds tickets/T1 = {\"status\":\"open\"}",
                "the state holds no tickets/T9"
            ]
        );
        assert_eq!(
            state_facts(&state, &[p("tickets/T1")], 5),
            ["the state holds tickets/T1 = {\"sta…"]
        );
    }
}

//! A trajectory's resources and their events in step order: the state constraint graph the
//! HTML report draws as a timeline, from the states or from the calls as
//! [`super::observed::audit_calls`] reads them.

use super::implied::id_text;
use super::observed::{named, role, says_not_found, show, step_records, target, tool_noun, Role};
use super::Effects;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What happened to one resource at one step, for drawing a trajectory's state constraint
/// graph as a timeline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelineEvent {
    /// The step.
    pub step: usize,
    /// `create`, `read`, `update`, `delete` or `missing` (a failure said it was not found).
    pub kind: &'static str,
}

/// A trajectory's resources, each with its events in step order, and its steps (tool and
/// outcome): the picture the HTML report draws.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Timeline {
    /// The trajectory.
    pub trajectory: String,
    /// Per step: tool and outcome.
    pub steps: Vec<(String, Option<bool>)>,
    /// Per resource (`type/id`): its events.
    pub lanes: BTreeMap<String, Vec<TimelineEvent>>,
}

impl Timeline {
    fn event(&mut self, resource: String, step: usize, kind: &'static str) {
        let lane = self.lanes.entry(resource).or_default();
        if !lane.iter().any(|e| e.step == step && e.kind == kind) {
            lane.push(TimelineEvent { step, kind });
        }
    }

    /// The timeline of a trajectory with states: resources that appear, vanish or change at
    /// each step, and reads (a success that changed nothing and named the resource's id).
    pub fn of_states(t: &super::AuditTrajectory) -> Timeline {
        let mut out = Timeline {
            trajectory: t.id.clone(),
            ..Timeline::default()
        };
        let mut before = super::resources(&t.initial_state);
        for (k, step) in t.steps.iter().enumerate() {
            out.steps.push((step.tool.clone(), step.success));
            let after = super::resources(&step.state_after);
            for (key, value) in &after {
                match before.get(key) {
                    None => out.event(super::label(key), k, "create"),
                    Some(old) if old != value => out.event(super::label(key), k, "update"),
                    Some(_) => {}
                }
            }
            for key in before.keys().filter(|key| !after.contains_key(*key)) {
                out.event(super::label(key), k, "delete");
            }
            let named: BTreeSet<String> = step.arguments.values().filter_map(id_text).collect();
            for key in after.keys().filter(|key| named.contains(&key.1)) {
                let kind = match step.success {
                    Some(false) => continue,
                    _ if before.get(key) == after.get(key) => "read",
                    _ => continue,
                };
                out.event(super::label(key), k, kind);
            }
            for id in &named {
                if step.success == Some(false)
                    && !after.keys().any(|key| &key.1 == id)
                    && says_not_found(&step.observation)
                {
                    out.event(id.clone(), k, "missing");
                }
            }
            before = after;
        }
        out
    }

    /// The timeline of a trajectory without states, as [`audit_calls`](super::observed::audit_calls) reads it: resources
    /// its calls name and its observations return.
    pub fn of_calls(t: &super::observed::CallTrajectory, effects: &Effects) -> Timeline {
        let mut out = Timeline {
            trajectory: t.id.clone(),
            ..Timeline::default()
        };
        for (k, step) in t.steps.iter().enumerate() {
            out.steps.push((step.tool.clone(), step.success));
            let role = role(&effects.of(&step.tool));
            let noun = tool_noun(&step.tool);
            let names = named(&noun, &step.arguments);
            match step.success {
                Some(true) => {
                    for (key, _, in_array) in
                        step_records(&step.observation, &noun, &names, role, &step.arguments)
                    {
                        let kind = if role == Role::Create && !in_array {
                            "create"
                        } else {
                            "read"
                        };
                        out.event(show(&key), k, kind);
                    }
                    let target = target(&noun, &names);
                    for (_, key) in &names {
                        let kind = match role {
                            Role::Delete if target.as_ref() == Some(key) => "delete",
                            Role::Change if target.as_ref() == Some(key) => "update",
                            _ => "read",
                        };
                        out.event(show(key), k, kind);
                    }
                }
                Some(false) if says_not_found(&step.observation) => {
                    for (_, key) in &names {
                        out.event(show(key), k, "missing");
                    }
                }
                _ => {}
            }
        }
        out
    }
}

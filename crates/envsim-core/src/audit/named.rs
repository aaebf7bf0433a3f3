//! Things made under a name an argument gives: `touch(file_name="a.txt")` makes the file
//! `a.txt`, `mkdir(dir_name="Reports")` the folder `Reports`. Their keys are names, not ids,
//! so the id-based checks of [`super::observed`] do not follow them; which argument names what
//! a tool creates is learned from its walks ([`super::ToolEffects::created_named_by`]).
//!
//! The check: a later call that fails with "not found" and quotes a name a successful
//! creation gave is a vanished creation, unless something between may have removed it or
//! changed what names mean. A delete that names it removes it; a delete of unknown target, a
//! change whose target the walks never showed (`cd`, which moves the working directory), or a
//! call of unknown outcome that may change the state forgets every name.

use super::observed::{mentions, role, says_not_found, CallTrajectory, Role};
use super::{Effects, Site, Violation, ViolationKind};
use serde_json::Value;
use std::collections::HashMap;

/// The checks of the module doc on one trajectory: the constraints checked and the
/// violations (`vanished_without_delete`, naming the creating step as the one it conflicts
/// with).
pub(crate) fn named_creation_checks(
    trajectory: &CallTrajectory,
    effects: &Effects,
) -> (usize, Vec<Violation>) {
    let mut checked = 0;
    let mut violations = Vec::new();
    // Name → (the step that created it, the tool's naming argument).
    let mut made: HashMap<String, (usize, String)> = HashMap::new();
    for (k, step) in trajectory.steps.iter().enumerate() {
        let fx = effects.of(&step.tool);
        let role = role(&fx);
        let strings = || {
            step.arguments
                .iter()
                .filter(|(arg, _)| super::observed::id_noun(arg).is_none())
                .filter_map(|(arg, v)| Some((arg, v.as_str()?)))
        };
        match step.success {
            Some(false) if says_not_found(&step.observation) => {
                let text = match &step.observation {
                    Value::String(t) => t.clone(),
                    other => other.to_string(),
                };
                let quoted = strings().find_map(|(_, name)| {
                    let (j, by) = made.get(name)?;
                    mentions(&text, name).then_some((name, *j, by.clone()))
                });
                if let Some((name, j, by)) = quoted {
                    checked += 1;
                    let site = Site {
                        trajectory: &trajectory.id,
                        step: k,
                        tool: &step.tool,
                        effects: fx.source,
                    };
                    let kind = by.strip_suffix("_name").unwrap_or(&by);
                    violations.push(site.violation(
                        ViolationKind::VanishedWithoutDelete,
                        Some(format!("{kind}/{name}")),
                        None,
                        Some(j),
                        format!(
                            "{} reports {name} not found; step {j} created it ({by} = {name:?}) and nothing removed it since",
                            step.tool
                        ),
                    ));
                    made.remove(name);
                }
            }
            Some(false) => {}
            Some(true) if role == Role::Read => {}
            Some(true) => {
                if !fx.deletes.is_empty() {
                    if fx.deletes_named_only {
                        let named: Vec<String> = strings().map(|(_, v)| v.to_owned()).collect();
                        made.retain(|name, _| !named.contains(name));
                    } else {
                        made.clear();
                    }
                }
                let untargeted = role == Role::Change
                    && fx.creates.is_empty()
                    && fx.deletes.is_empty()
                    && effects.writes_of(&step.tool).target.is_none();
                if untargeted {
                    made.clear();
                }
                if role == Role::Create {
                    let name = (fx.created_named_by.as_ref())
                        .and_then(|arg| Some((arg, step.arguments.get(arg)?.as_str()?)));
                    if let Some((arg, name)) = name {
                        made.insert(name.to_owned(), (k, arg.clone()));
                    }
                }
            }
            None => {
                if role != Role::Read {
                    made.clear();
                }
            }
        }
    }
    (checked, violations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::observed::CallStep;
    use crate::audit::{AuditStep, AuditTrajectory};
    use serde_json::json;
    use std::sync::Arc;

    /// Effects learned from a walk of a small file system: `touch` makes the file its
    /// `file_name` names (three times), `rm` removes it, `cd` moves the working directory
    /// (a field, no resource), `cat` reads.
    fn effects() -> Effects {
        let state = |files: &[&str], cwd: &str| {
            let files: serde_json::Map<String, Value> = (files.iter())
                .map(|f| ((*f).to_owned(), json!({"content": ""})))
                .collect();
            Arc::new(json!({"cwd": cwd, "files": files}))
        };
        let step = |tool: &str, arguments: Value, after: &Arc<Value>| AuditStep {
            tool: tool.into(),
            arguments: arguments.as_object().cloned().unwrap_or_default(),
            observation: json!({"ok": true}),
            success: Some(true),
            state_after: Arc::clone(after),
        };
        let s1 = state(&["a"], "/");
        let s2 = state(&["a", "b"], "/");
        let s3 = state(&["a", "b", "c"], "/");
        let s4 = state(&["a", "c"], "/");
        let s5 = state(&["a", "c"], "/docs");
        let s6 = state(&["a", "c", "d"], "/docs");
        let s7 = state(&["a", "d"], "/docs");
        let s8 = state(&["a", "d"], "/");
        let walk = AuditTrajectory {
            id: "w".into(),
            initial_state: state(&["a"], "/"),
            steps: vec![
                step("cat", json!({"file_name": "a"}), &s1),
                step("touch", json!({"file_name": "b"}), &s2),
                step("touch", json!({"file_name": "c"}), &s3),
                step("rm", json!({"file_name": "b"}), &s4),
                step("cd", json!({"folder": "docs"}), &s5),
                step("touch", json!({"file_name": "d"}), &s6),
                step("rm", json!({"file_name": "c"}), &s7),
                step("cd", json!({"folder": "/"}), &s8),
            ],
        };
        Effects::learn(&[walk])
    }

    fn call(tool: &str, file: &str, success: bool) -> CallStep {
        let arg = if tool == "cd" { "folder" } else { "file_name" };
        CallStep {
            tool: tool.into(),
            arguments: json!({ arg: file }).as_object().cloned().unwrap(),
            observation: if success {
                json!({"ok": true})
            } else {
                json!({"error": format!("{file} not found")})
            },
            success: Some(success),
        }
    }

    /// A flag as the tests compare it: (step, conflicting step, resource).
    type Flag = (usize, Option<usize>, Option<String>);

    fn flags(steps: Vec<CallStep>) -> (usize, Vec<Flag>) {
        let t = CallTrajectory {
            id: "t".into(),
            steps,
        };
        let (checked, found) = named_creation_checks(&t, &effects());
        let found = found
            .into_iter()
            .map(|v| (v.step, v.conflicting_step, v.resource))
            .collect();
        (checked, found)
    }

    #[test]
    fn a_name_a_creation_gave_is_not_missing_later() {
        assert_eq!(
            effects().of("touch").created_named_by.as_deref(),
            Some("file_name")
        );
        assert_eq!(effects().of("cd").created_named_by, None);
        // A creation keyed by an id argument is left to the id-based checks.
        let cart = |id: &str, owners: &[&str]| {
            let carts: serde_json::Map<String, Value> = (owners.iter())
                .map(|o| ((*o).to_owned(), json!({"items": []})))
                .collect();
            AuditStep {
                tool: "open_cart".into(),
                arguments: json!({"customer_id": id}).as_object().cloned().unwrap(),
                observation: json!({"ok": true}),
                success: Some(true),
                state_after: Arc::new(json!({"carts": carts})),
            }
        };
        let walk = AuditTrajectory {
            id: "w".into(),
            initial_state: Arc::new(json!({"carts": {}})),
            steps: vec![
                cart("C1", &["C1"]),
                cart("C2", &["C1", "C2"]),
                cart("C3", &["C1", "C2", "C3"]),
            ],
        };
        assert_eq!(
            Effects::learn(&[walk]).of("open_cart").created_named_by,
            None
        );
        // touch x, a read, then "x not found".
        let (checked, found) = flags(vec![
            call("touch", "x", true),
            call("cat", "x", true),
            call("cat", "x", false),
        ]);
        assert_eq!(checked, 1);
        assert_eq!(found, [(2, Some(0), Some("file/x".to_owned()))]);
        // Removed by a delete that names it: missing is right.
        let (_, found) = flags(vec![
            call("touch", "x", true),
            call("rm", "x", true),
            call("cat", "x", false),
        ]);
        assert_eq!(found, []);
        // A delete of another file leaves it known.
        let (_, found) = flags(vec![
            call("touch", "x", true),
            call("rm", "y", true),
            call("cat", "x", false),
        ]);
        assert_eq!(found.len(), 1);
        // A change of unknown target (the working directory moved) forgets every name.
        let (checked, found) = flags(vec![
            call("touch", "x", true),
            call("cd", "docs", true),
            call("cat", "x", false),
        ]);
        assert_eq!((checked, found), (0, vec![]));
        // A failure that quotes another name says nothing of x.
        let (checked, _) = flags(vec![call("touch", "x", true), call("cat", "y", false)]);
        assert_eq!(checked, 0);
    }
}

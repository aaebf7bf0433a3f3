//! One task synthesized: the agent talks to a simulated environment session until it answers
//! (and the user is done), the step budget is spent, or its answer does not read; then the
//! trajectory is scored and recorded.
//!
//! Scores per trajectory (all in [0, 1], higher is more consistent):
//! - **SCS**: the audit's state consistency score over the session's steps (the share of the
//!   state-constraint graph's checked constraints that hold), with the environment's effects;
//! - **SpecCS**: the share of steps whose call and answer fit the environment's specification
//!   (`SpecChecks`: argument and response schemas; a refused call fits when it failed);
//! - **DCS**: distribution consistency, in code mode: 1 − |success share of the simulated
//!   answers − success share the code gives for the same calls on the same states|, so a
//!   simulator drifting to the happy path (or away from it) loses. Without code there is no
//!   expected outcome per call, and DCS is absent (`null`), not guessed.
//!
//! In code mode the record also carries the **truth**: each step compared with the executor on
//! the same state, and the final state compared with the executor's replay of the same calls
//! from the initial state.

use crate::agent::{Agent, AgentContext, User};
use crate::error::SynthError;
use crate::task::{Task, TaskFamily};
use envsim_core::sample::Usage;
use envsim_sim::backend::{ExecutorSimulator, Simulator, StepRequest};
use envsim_sim::environment::Environment;
use envsim_sim::reference::{ReferenceCall, Variation};
use envsim_sim::session::{Backends, Session, SessionConfig};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One environment as synthesis uses it.
pub struct EnvContext {
    /// What the sessions simulate.
    pub env: Arc<Environment>,
    /// The sessions' simulators.
    pub backends: Backends,
    /// The sessions' anchoring.
    pub session: SessionConfig,
    /// The executor and the environment with its code, in code mode: the truth and DCS.
    pub truth: Option<(ExecutorSimulator, Arc<Environment>)>,
    /// The agent's system message.
    pub system_prompt: String,
    /// Named initial states (the first is the default).
    pub states: Vec<(String, Value)>,
    /// The running agreement per tool, shared by the sessions of this environment.
    pub verifier: Option<Arc<Mutex<envsim_sim::verify::AdaptiveVerifier>>>,
}

/// Budgets of one conversation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budgets {
    /// Tool calls per task.
    pub tool_calls: usize,
    /// Agent turns per task (tool-call turns and answers).
    pub agent_turns: usize,
}

/// The agent and the user of a run.
pub struct Participants {
    /// The agent.
    pub agent: Arc<dyn Agent>,
    /// The user side.
    pub user: User,
}

/// The system message of an environment's agent: what the system is, and its rules.
pub fn system_prompt(env: &Environment) -> String {
    let about = env
        .description
        .pointer("/info/description")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut text = format!(
        "You are an assistant that operates the {} system for its users, through the tools you are given. {about}",
        env.name
    );
    // A package's rules are in its generated description already ("Rules:"): only notes the
    // description does not hold are added, so that no rule is said twice (in every export).
    let unsaid: Vec<&str> = (env.notes.lines())
        .map(str::trim)
        .filter(|line| !line.is_empty() && !about.contains(line))
        .collect();
    if !unsaid.is_empty() {
        text.push_str("\n\nRules of the system:\n");
        text.push_str(&unsaid.join("\n"));
    }
    text
}

fn observation_text(observation: &Value) -> String {
    match observation {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A task's seed: the run's seed mixed with the task id (so tasks differ, and a task's seed
/// does not depend on which others run).
pub fn task_seed(seed: u64, task_id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in task_id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    seed ^ h
}

/// Synthesizes one task. An error means it could not be done at all (an unknown state, an
/// agent or simulator that cannot be reached): the store marks it failed and a rerun retries
/// it. A conversation that ends badly (an unreadable agent answer, a spent budget) is a
/// record, with its `finish`.
pub async fn synthesize(
    task: &Task,
    ctx: &EnvContext,
    who: &Participants,
    budgets: Budgets,
    seed: u64,
) -> Result<Value, SynthError> {
    let started = Instant::now();
    let initial =
        match (&task.initial_state, &task.state) {
            (Some(state), _) => state.clone(),
            (None, Some(name)) => ctx
                .states
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, s)| s.clone())
                .ok_or_else(|| {
                    SynthError::Task(format!(
                        "the task's state {name:?} is not a state of {} ({})",
                        ctx.env.name,
                        ctx.states
                            .iter()
                            .map(|(n, _)| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?,
            (None, None) => ctx.states.first().map(|(_, s)| s.clone()).ok_or_else(|| {
                SynthError::Task(format!("{} has no initial state", ctx.env.name))
            })?,
        };
    let seed = task_seed(seed, &task.id);
    let mut config = ctx.session.clone();
    config.seed = seed;
    let mut session = Session::new(
        Arc::clone(&ctx.env),
        ctx.backends.clone(),
        config,
        initial.clone(),
    );
    if let Some(shared) = &ctx.verifier {
        session.share_verifier(Arc::clone(shared));
    }
    let tool_names: Vec<&str> = ctx
        .env
        .tools
        .iter()
        .filter_map(|t| t.get("function").unwrap_or(t).get("name")?.as_str())
        .collect();
    let mut messages = vec![
        json!({"role": "system", "content": ctx.system_prompt}),
        json!({"role": "user", "content": task.instruction}),
    ];
    let (mut agent, mut user) = (Usage::default(), Usage::default());
    let add = |total: &mut Usage, more: Usage| {
        total.prompt_tokens += more.prompt_tokens;
        total.completion_tokens += more.completion_tokens;
    };
    let mut tool_calls = 0usize;
    let mut refused_calls = 0usize;
    // The calls an error-path task is about: answered as failures by the environment. As
    // training targets they teach an agent to make the call that fails, so curation can drop
    // or mask them (`envsim curate --error-paths`).
    let mut deliberate_errors: Vec<Value> = Vec::new();
    let mut finish = "turn_budget";
    let mut finish_detail: Option<String> = None;
    for turn in 0..budgets.agent_turns {
        let context = AgentContext {
            task,
            messages: &messages,
            tools: &ctx.env.tools,
            seed: seed.wrapping_add(turn as u64),
        };
        let answer = who.agent.act(&context).await?;
        add(&mut agent, answer.usage);
        if let Some(why) = &answer.unreadable {
            finish = "agent_unreadable";
            finish_detail = Some(format!("{why}: {}", answer.content));
            break;
        }
        let assistant_message = messages.len();
        messages.push(answer.message());
        if answer.tool_calls.is_empty() {
            let (next, used) = who.user.next(task, &messages, seed).await?;
            add(&mut user, used);
            match next {
                Some(text) => messages.push(json!({"role": "user", "content": text})),
                None => {
                    finish = "final_answer";
                    break;
                }
            }
            continue;
        }
        let mut spent = false;
        for call in &answer.tool_calls {
            // Every call gets an answer (a chat transcript needs one per call); past the
            // budget, that answer says so and the conversation ends after this turn.
            let content = if tool_calls >= budgets.tool_calls {
                spent = true;
                format!(
                    "Error: this task's budget of {} tool calls is spent",
                    budgets.tool_calls
                )
            } else if let Some(error) = &call.arguments_error {
                refused_calls += 1;
                format!("Error: {error}")
            } else if !tool_names.contains(&call.name.as_str()) {
                refused_calls += 1;
                format!("Error: there is no tool named {:?}", call.name)
            } else {
                tool_calls += 1;
                let record = session
                    .step(&call.name, &call.arguments)
                    .await
                    .map_err(|e| SynthError::Session {
                        env: ctx.env.name.clone(),
                        tool: call.name.clone(),
                        message: e.to_string(),
                    })?;
                if task.family == TaskFamily::ErrorPath && record.success == Some(false) {
                    deliberate_errors.push(json!({
                        "message": assistant_message, "call_id": call.id, "tool": call.name,
                    }));
                }
                observation_text(&record.observation)
            };
            messages.push(json!({
                "role": "tool", "tool_call_id": call.id, "name": call.name, "content": content,
            }));
        }
        if spent {
            finish = "step_budget";
            break;
        }
    }
    let scores = score(&session, ctx, &task.id).await?;
    let mut record = session.trajectory(&task.id);
    let steps = session.steps();
    let usage = json!({
        "agent_tokens": agent.prompt_tokens + agent.completion_tokens,
        "agent_completion_tokens": agent.completion_tokens,
        "user_tokens": user.prompt_tokens + user.completion_tokens,
        "user_completion_tokens": user.completion_tokens,
        "simulator_tokens": steps.iter().map(|s| s.provenance.tokens).sum::<u64>(),
        "simulator_completion_tokens": steps.iter().map(|s| s.provenance.completion_tokens).sum::<u64>(),
        "simulator_calls": steps.iter().map(|s| s.provenance.simulator_calls).sum::<usize>(),
        "simulator_ms": steps.iter().map(|s| s.provenance.simulator_ms).sum::<f64>(),
        "regenerations": steps.iter().map(|s| s.provenance.regenerations).sum::<usize>(),
        "escalations": steps.iter().filter(|s| s.provenance.escalated_to.is_some()).count(),
        "verifications": steps.iter().filter(|s| s.provenance.verified_by.is_some()).count(),
        "uncertain_steps": steps.iter().filter(|s| s.provenance.uncertain).count(),
        "wall_ms": started.elapsed().as_secs_f64() * 1000.0,
    });
    let fields = [
        ("id", json!(task.id)),
        ("family", json!(task.family)),
        ("task", json!(task)),
        ("agent", json!(who.agent.name())),
        ("user", json!(who.user.name())),
        (
            "simulator",
            json!({
                "primary": ctx.backends.primary.name(),
                "secondary": ctx.backends.secondary.as_ref().map(|s| s.name()),
                "code": ctx.env.code.is_some(),
            }),
        ),
        ("seed", json!(seed)),
        ("tools", json!(ctx.env.tools)),
        ("messages", json!(messages)),
        ("final_state", session.state().as_ref().clone()),
        ("finish", json!(finish)),
        ("finish_detail", json!(finish_detail)),
        ("tool_calls", json!(tool_calls)),
        ("refused_calls", json!(refused_calls)),
        ("deliberate_errors", json!(deliberate_errors)),
        ("scores", scores.json),
        ("truth", scores.truth),
        ("usage", usage),
    ];
    if let Value::Object(map) = &mut record {
        for (k, v) in fields {
            map.insert(k.to_owned(), v);
        }
    }
    Ok(record)
}

struct Scored {
    json: Value,
    truth: Value,
}

async fn score(session: &Session, ctx: &EnvContext, id: &str) -> Result<Scored, SynthError> {
    let trajectory = session.audit_trajectory(id);
    let audit = envsim_core::audit::audit(&trajectory, &ctx.env.effects);
    let mut violations: Map<String, Value> = Map::new();
    for v in &audit.violations {
        let n = violations
            .entry(v.kind.name().to_owned())
            .or_insert(json!(0));
        *n = json!(n.as_u64().unwrap_or(0) + 1);
    }
    let steps = session.steps();
    let fitting = steps
        .iter()
        .filter(|s| {
            ctx.env
                .spec
                .check(&s.tool, &s.arguments, &s.observation, s.success)
                .is_empty()
        })
        .count();
    let spec_cs = if steps.is_empty() {
        1.0
    } else {
        fitting as f64 / steps.len() as f64
    };
    let uncertain = steps.iter().filter(|s| s.provenance.uncertain).count();
    let (dcs, mut truth) = match &ctx.truth {
        None => (Value::Null, Value::Null),
        Some((executor, truth_env)) => {
            let mut before = Arc::clone(session.initial_state());
            let mut replay = session.initial_state().as_ref().clone();
            let (mut right, mut expected_successes, mut simulated_successes) = (0, 0, 0);
            for (k, step) in steps.iter().enumerate() {
                let request = |state| StepRequest {
                    env: truth_env,
                    state,
                    tool: &step.tool,
                    arguments: &step.arguments,
                    seed: session.config().seed,
                    step: k,
                    attempt: 0,
                    feedback: &[],
                };
                let here =
                    executor
                        .predict(&request(&before))
                        .await
                        .map_err(|e| SynthError::Truth {
                            tool: step.tool.clone(),
                            message: e.to_string(),
                        })?;
                right += usize::from(
                    here.observation == step.observation && here.state_after == *step.state_after,
                );
                expected_successes +=
                    usize::from(truth_env.outcome(&here.observation) == Some(true));
                simulated_successes += usize::from(step.success == Some(true));
                replay = executor
                    .predict(&request(&replay))
                    .await
                    .map_err(|e| SynthError::Truth {
                        tool: step.tool.clone(),
                        message: e.to_string(),
                    })?
                    .state_after;
                before = Arc::clone(&step.state_after);
            }
            let n = steps.len().max(1) as f64;
            let dcs = 1.0 - ((simulated_successes as f64 - expected_successes as f64) / n).abs();
            (json!(if steps.is_empty() { 1.0 } else { dcs }), {
                let equal = **session.state() == replay;
                let mut truth = json!({
                    "steps": steps.len(),
                    "right_steps": right,
                    "final_state_equal": equal,
                    "expected_successes": expected_successes,
                    "simulated_successes": simulated_successes,
                });
                // The executor's final state, where it differs from the simulated one.
                if !equal {
                    truth["replay_final_state"] = replay;
                }
                truth
            })
        }
    };
    // The RL checker of the trajectory's calls: executed under several seeds and clocks, so
    // that it demands only what the calls determine.
    if let (Some((executor, truth_env)), Value::Object(fields)) = (&ctx.truth, &mut truth) {
        let calls: Vec<ReferenceCall> = steps
            .iter()
            .map(|s| ReferenceCall {
                tool: s.tool.clone(),
                arguments: s.arguments.clone(),
            })
            .collect();
        let checker = envsim_sim::reference::checker(
            truth_env,
            executor,
            session.initial_state(),
            &calls,
            &Variation::standard(session.config().seed),
        )
        .await?;
        fields.insert("checker".into(), json!(checker));
    }
    Ok(Scored {
        json: json!({
            "scs": audit.scs(),
            "spec_cs": spec_cs,
            "dcs": dcs,
            "violations": violations,
            "uncertain_steps": uncertain,
        }),
        truth,
    })
}

#[cfg(test)]
mod prompt_tests {
    use super::*;
    use serde_json::json;

    fn env(description: &str, notes: &str) -> Environment {
        let doc = json!({"openapi": "3.1.0", "info": {"title": "desk", "version": "1",
                         "description": description}, "paths": {}});
        Environment::from_description("desk", doc, notes.into(), 0.0).unwrap()
    }

    /// Rules the description states are not repeated; notes it lacks are added once.
    #[test]
    fn rules_are_said_once() {
        let text = system_prompt(&env("Tickets.\n\nRules:\n- Be kind.\n", "Be kind."));
        assert_eq!(text.matches("Be kind.").count(), 1, "{text}");
        assert!(!text.contains("Rules of the system"));
        let text = system_prompt(&env(
            "Tickets.\n\nRules:\n- Be kind.\n",
            "Be kind.\nClose on Fridays.",
        ));
        assert_eq!(text.matches("Be kind.").count(), 1, "{text}");
        assert!(
            text.ends_with("Rules of the system:\nClose on Fridays."),
            "{text}"
        );
        let text = system_prompt(&env("Tickets.", ""));
        assert!(text.ends_with("Tickets."), "{text}");
    }
}

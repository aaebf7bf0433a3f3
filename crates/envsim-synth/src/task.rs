//! Tasks: what an agent is asked to do in a simulated environment, where they come from, and
//! the mix of task families a run asks for.
//!
//! Sources: a JSON Lines file (`--tasks FILE`), a package's own `tasks.jsonl` (the BFCL import
//! writes one from BFCL's multi-turn questions), executed walks of the environment (the calls
//! become a plan, rendered as an instruction, that the scripted agent can replay), or a model
//! writing tasks from the environment's description ([`generation_prompt`], [`read_generated`]).
//!
//! Families: the proposal asks for tasks aimed at what simulators get wrong. A walk's family is
//! read from what running it did ([`classify`]); a generated task is asked for with its family
//! and target tools named ([`Target`]); [`choose_mix`] picks a run's tasks so the adversarial
//! families make up the requested share, coverage of tools first.

use crate::error::SynthError;
use envsim_core::audit::{resource_changes, resources, AuditTrajectory};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// A task family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskFamily {
    /// Ordinary work, mostly reads and single changes.
    Ordinary,
    /// A long chain of state changes (four or more).
    LongChain,
    /// Changes across dependent resources of different kinds.
    CrossResource,
    /// The same entity modified more than once.
    RepeatedModification,
    /// Error paths: missing entities, violated preconditions.
    ErrorPath,
}

impl TaskFamily {
    /// Every family, ordinary first.
    pub const ALL: [TaskFamily; 5] = [
        TaskFamily::Ordinary,
        TaskFamily::LongChain,
        TaskFamily::CrossResource,
        TaskFamily::RepeatedModification,
        TaskFamily::ErrorPath,
    ];

    /// The adversarial families (what simulators get wrong).
    pub const ADVERSARIAL: [TaskFamily; 4] = [
        TaskFamily::LongChain,
        TaskFamily::CrossResource,
        TaskFamily::RepeatedModification,
        TaskFamily::ErrorPath,
    ];

    /// Its name in records.
    pub fn name(self) -> &'static str {
        match self {
            TaskFamily::Ordinary => "ordinary",
            TaskFamily::LongChain => "long_chain",
            TaskFamily::CrossResource => "cross_resource",
            TaskFamily::RepeatedModification => "repeated_modification",
            TaskFamily::ErrorPath => "error_path",
        }
    }

    /// Parses a name.
    pub fn parse(name: &str) -> Option<TaskFamily> {
        TaskFamily::ALL.into_iter().find(|f| f.name() == name)
    }

    /// What a task of this family asks for, in the words a task writer is given.
    pub fn brief(self) -> &'static str {
        match self {
            TaskFamily::Ordinary => "an ordinary request a user of this system would make",
            TaskFamily::LongChain => {
                "a request that needs a long chain of changes (four or more state-changing calls, each building on the last)"
            }
            TaskFamily::CrossResource => {
                "a request that changes several resources of different kinds that depend on each other"
            }
            TaskFamily::RepeatedModification => {
                "a request that modifies the same entity several times (and checks it between changes)"
            }
            TaskFamily::ErrorPath => {
                "a request that runs into an error: an entity that does not exist, or a precondition that does not hold"
            }
        }
    }

    /// Whether it is one of the adversarial families.
    pub fn is_adversarial(self) -> bool {
        self != TaskFamily::Ordinary
    }
}

/// A planned call (a walk's call; what the scripted agent replays).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedCall {
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
}

/// A task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Unique within a run.
    pub id: String,
    /// The environment (package name, or the description's name).
    pub env: String,
    /// The first user message.
    pub instruction: String,
    /// Later user messages of a scripted multi-turn user, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<String>,
    /// The initial state: a state name of the package (default: its first state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// An initial state given inline (wins over `state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_state: Option<Value>,
    /// Its family.
    #[serde(default = "ordinary")]
    pub family: TaskFamily,
    /// Tools it is meant to touch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Resources it is meant to touch (`type/id`, as the state names them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Planned calls (walk tasks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<PlannedCall>,
    /// What a model-simulated user wants (default: the instruction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_goal: Option<String>,
    /// Where it came from: `file`, `package`, `walk`, `generated:<model>`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
}

fn ordinary() -> TaskFamily {
    TaskFamily::Ordinary
}

/// A task file that does not read, with the place.
#[derive(Debug, thiserror::Error)]
#[error("{source_name} line {line}: {message}")]
pub struct TaskFileError {
    /// The file.
    pub source_name: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Reads tasks from JSON Lines (blank lines skipped). A line without `env` gets `default_env`
/// (an error when there is none); a line without `id` gets `<env>/<source>-<line>`.
pub fn read_tasks(
    text: &str,
    source_name: &str,
    default_env: Option<&str>,
    source: &str,
) -> Result<Vec<Task>, TaskFileError> {
    let mut tasks = Vec::new();
    let mut ids = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let at = |message: String| TaskFileError {
            source_name: source_name.to_owned(),
            line: i + 1,
            message,
        };
        if line.trim().is_empty() {
            continue;
        }
        let mut value: Value =
            serde_json::from_str(line).map_err(|e| at(format!("not JSON: {e}")))?;
        let object = value
            .as_object_mut()
            .ok_or_else(|| at("a task must be a JSON object".into()))?;
        if !object.contains_key("env") {
            let env = default_env.ok_or_else(|| {
                at("no `env`, and the run has no single environment to default to".into())
            })?;
            object.insert("env".into(), json!(env));
        }
        if !object.contains_key("id") {
            let env = object["env"].as_str().unwrap_or_default().to_owned();
            object.insert("id".into(), json!(format!("{env}/{source}-{}", i + 1)));
        }
        if let Some(family) = object.get("family").and_then(Value::as_str) {
            if TaskFamily::parse(family).is_none() {
                return Err(at(format!(
                    "`family` {family:?} is not one of {}",
                    TaskFamily::ALL.map(TaskFamily::name).join(", ")
                )));
            }
        }
        let mut task: Task = serde_json::from_value(value).map_err(|e| at(e.to_string()))?;
        if task.instruction.trim().is_empty() {
            return Err(at("`instruction` is empty".into()));
        }
        if !ids.insert(task.id.clone()) {
            return Err(at(format!("the id {:?} is used twice", task.id)));
        }
        if task.source.is_empty() {
            task.source = source.to_owned();
        }
        tasks.push(task);
    }
    Ok(tasks)
}

/// What running a walk did, read as a task family. A walk may have several of the properties;
/// the state-changing ones count first, since they are where simulators drift: repeated
/// modification when one resource changed in two or more steps, else cross-resource when
/// changes touched two or more kinds of resource, else a long chain with four or more
/// state-changing steps, else an error path when a call failed, else ordinary.
pub fn classify(run: &AuditTrajectory) -> TaskFamily {
    let mut changes_per_resource: BTreeMap<String, usize> = BTreeMap::new();
    let mut kinds = BTreeSet::new();
    let mut changing_steps = 0;
    let mut before = run.initial_state.as_ref();
    for step in &run.steps {
        let after = step.state_after.as_ref();
        if after != before {
            changing_steps += 1;
            for key in resource_changes(before, after).into_keys() {
                kinds.insert(key.0.clone());
                *changes_per_resource
                    .entry(format!("{}/{}", key.0, key.1))
                    .or_default() += 1;
            }
        }
        before = after;
    }
    if changes_per_resource.values().any(|&n| n >= 2) {
        TaskFamily::RepeatedModification
    } else if kinds.len() >= 2 {
        TaskFamily::CrossResource
    } else if changing_steps >= 4 {
        TaskFamily::LongChain
    } else if run.steps.iter().any(|s| s.success == Some(false)) {
        TaskFamily::ErrorPath
    } else {
        TaskFamily::Ordinary
    }
}

/// A walk's tasks: the whole walk and its prefixes of 3 and 6 calls (shorter plans are often
/// of another family, which gives the mix more to choose from); and the same of the walk
/// without its refused calls that changed nothing, when it has some (ids end `-ok-N`).
/// Explored walks hold deliberately invalid calls and the refusals the explorer then met, so
/// nearly every one reads as an error path or more: without its harmless refusals it is what
/// an agent that makes no mistakes would do, and the ordinary tasks come from there. Ids are
/// `<env>/walk-<state stem>-<walk>-<calls>`.
pub fn walk_tasks(env: &str, state: &str, walk: &str, run: &AuditTrajectory) -> Vec<Task> {
    let mut out = prefix_tasks(env, state, walk, run);
    if let Some(clean) = without_harmless_refusals(run) {
        out.extend(prefix_tasks(env, state, &format!("{walk}-ok"), &clean));
    }
    out
}

/// The walk's prefixes of 3 and 6 calls and the whole walk, as tasks.
fn prefix_tasks(env: &str, state: &str, walk: &str, run: &AuditTrajectory) -> Vec<Task> {
    let mut lengths: Vec<usize> = [3, 6]
        .into_iter()
        .filter(|&n| n < run.steps.len())
        .collect();
    lengths.push(run.steps.len());
    lengths
        .into_iter()
        .filter(|&n| n > 0)
        .map(|n| {
            let prefix = AuditTrajectory {
                id: run.id.clone(),
                initial_state: std::sync::Arc::clone(&run.initial_state),
                steps: run.steps[..n].to_vec(),
            };
            let stem = state.strip_suffix(".json").unwrap_or(state);
            walk_task(env, state, format!("{env}/walk-{stem}-{walk}-{n}"), &prefix)
        })
        .collect()
}

/// The walk without the failed calls that left the state as it was (each remaining call still
/// starts from the state the one before it left), or `None` when it has none or nothing else.
fn without_harmless_refusals(run: &AuditTrajectory) -> Option<AuditTrajectory> {
    let mut before = run.initial_state.as_ref();
    let mut kept = Vec::new();
    for step in &run.steps {
        let harmless = step.success == Some(false) && step.state_after.as_ref() == before;
        if !harmless {
            kept.push(step.clone());
        }
        before = step.state_after.as_ref();
    }
    (kept.len() < run.steps.len() && !kept.is_empty()).then(|| AuditTrajectory {
        id: run.id.clone(),
        initial_state: std::sync::Arc::clone(&run.initial_state),
        steps: kept,
    })
}

/// A walk as a task: its calls become the plan, and the instruction lists them.
pub fn walk_task(env: &str, state: &str, id: String, run: &AuditTrajectory) -> Task {
    let plan: Vec<PlannedCall> = run
        .steps
        .iter()
        .map(|s| PlannedCall {
            name: s.tool.clone(),
            arguments: s.arguments.clone(),
        })
        .collect();
    let listed: Vec<String> = plan
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let args: Vec<String> = c
                .arguments
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            format!("{}. {}({})", i + 1, c.name, args.join(", "))
        })
        .collect();
    let mut tools: Vec<String> = plan.iter().map(|c| c.name.clone()).collect();
    tools.sort();
    tools.dedup();
    // The resources the walk changed.
    let mut touched = BTreeSet::new();
    let mut before = run.initial_state.as_ref();
    for step in &run.steps {
        let after = step.state_after.as_ref();
        if after != before {
            for key in resource_changes(before, after).into_keys() {
                touched.insert(format!("{}/{}", key.0, key.1));
            }
        }
        before = after;
    }
    Task {
        id,
        env: env.to_owned(),
        instruction: format!(
            "Make these calls in order and report what happened:\n{}",
            listed.join("\n")
        ),
        turns: Vec::new(),
        state: Some(state.to_owned()),
        initial_state: Some(run.initial_state.as_ref().clone()),
        family: classify(run),
        tools,
        resources: touched.into_iter().collect(),
        plan,
        user_goal: None,
        source: "walk".into(),
    }
}

/// What a run's task mix came to.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MixReport {
    /// Tasks asked for.
    pub requested: usize,
    /// Of those, adversarial ones asked for.
    pub adversarial_requested: usize,
    /// Tasks chosen per family.
    pub chosen: BTreeMap<String, usize>,
    /// Adversarial tasks the pool could not supply (filled with ordinary ones).
    pub adversarial_shortfall: usize,
    /// Ordinary tasks the pool could not supply (filled with adversarial ones).
    pub ordinary_shortfall: usize,
}

/// Chooses `count` tasks from `pool` so that `adversarial_share` of them come from the
/// adversarial families (split evenly, a family short of tasks leaving its part to the others,
/// then to ordinary tasks). Within a family, tasks that add tools not yet covered come first,
/// then the pool's order. Duplicate instructions count once.
pub fn choose_mix(pool: Vec<Task>, count: usize, adversarial_share: f64) -> (Vec<Task>, MixReport) {
    let pool = dedupe(pool).0;
    let share = adversarial_share.clamp(0.0, 1.0);
    let adversarial_requested = ((count as f64) * share).round() as usize;
    let mut by_family: BTreeMap<TaskFamily, Vec<Task>> = BTreeMap::new();
    for task in pool {
        by_family.entry(task.family).or_default().push(task);
    }
    let mut covered: BTreeSet<String> = BTreeSet::new();
    let mut chosen: Vec<Task> = Vec::new();
    let mut take = |family: TaskFamily, n: usize, chosen: &mut Vec<Task>| -> usize {
        let tasks = by_family.entry(family).or_default();
        let mut taken = 0;
        while taken < n && !tasks.is_empty() {
            // The task adding the most uncovered tools (the earliest on ties).
            let best = tasks
                .iter()
                .enumerate()
                .max_by_key(|(i, t)| {
                    let new = t.tools.iter().filter(|x| !covered.contains(*x)).count();
                    (new, std::cmp::Reverse(*i))
                })
                .map_or(0, |(i, _)| i);
            let task = tasks.remove(best);
            covered.extend(task.tools.iter().cloned());
            chosen.push(task);
            taken += 1;
        }
        taken
    };
    // Adversarial: round-robin over the families, one task at a time, so a short family
    // leaves its part to the others.
    let mut adversarial = 0;
    let mut exhausted = BTreeSet::new();
    while adversarial < adversarial_requested && exhausted.len() < TaskFamily::ADVERSARIAL.len() {
        for family in TaskFamily::ADVERSARIAL {
            if adversarial == adversarial_requested {
                break;
            }
            if exhausted.contains(&family) {
                continue;
            }
            if take(family, 1, &mut chosen) == 1 {
                adversarial += 1;
            } else {
                exhausted.insert(family);
            }
        }
    }
    let shortfall = adversarial_requested - adversarial;
    let ordinary_wanted = count - adversarial;
    let ordinary = take(TaskFamily::Ordinary, ordinary_wanted, &mut chosen);
    // Too few ordinary tasks: any family left fills the rest.
    let mut missing = ordinary_wanted - ordinary;
    for family in TaskFamily::ADVERSARIAL {
        if missing == 0 {
            break;
        }
        missing -= take(family, missing, &mut chosen);
    }
    let mut report = MixReport {
        requested: count,
        adversarial_requested,
        adversarial_shortfall: shortfall,
        ordinary_shortfall: ordinary_wanted - ordinary,
        ..MixReport::default()
    };
    for t in &chosen {
        *report.chosen.entry(t.family.name().to_owned()).or_default() += 1;
    }
    (chosen, report)
}

/// An instruction as compared for duplicates: lower case, words only.
pub fn normalized(instruction: &str) -> String {
    instruction
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Removes tasks whose normalized instruction (with their environment and turns) was seen
/// before, or whose words overlap an earlier task's by 90% or more (Jaccard); returns the kept
/// tasks and the number removed.
pub fn dedupe(tasks: Vec<Task>) -> (Vec<Task>, usize) {
    let mut kept: Vec<Task> = Vec::new();
    let mut words: Vec<(String, BTreeSet<String>)> = Vec::new();
    let mut removed = 0;
    for task in tasks {
        let text = normalized(&format!("{} {}", task.instruction, task.turns.join(" ")));
        let set: BTreeSet<String> = text.split(' ').map(str::to_owned).collect();
        let duplicate = words.iter().any(|(env, seen)| {
            *env == task.env && {
                let common = seen.intersection(&set).count();
                let union = seen.union(&set).count().max(1);
                common as f64 / union as f64 >= 0.9
            }
        });
        if duplicate {
            removed += 1;
            continue;
        }
        words.push((task.env.clone(), set));
        kept.push(task);
    }
    (kept, removed)
}

/// What a generated task is asked to be: its family and the tools it should use.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The family.
    pub family: TaskFamily,
    /// Tools the task should use.
    pub tools: Vec<String>,
}

/// Targets for `count` generated tasks: families in the requested mix (adversarial ones
/// round-robin), each naming up to `per_task` tools, chosen so every tool is named before any
/// is named twice.
pub fn targets(
    tools: &[String],
    count: usize,
    adversarial_share: f64,
    per_task: usize,
) -> Vec<Target> {
    let adversarial = ((count as f64) * adversarial_share.clamp(0.0, 1.0)).round() as usize;
    let mut next_tool = 0;
    (0..count)
        .map(|i| {
            let family = if i < adversarial {
                TaskFamily::ADVERSARIAL[i % TaskFamily::ADVERSARIAL.len()]
            } else {
                TaskFamily::Ordinary
            };
            let n = per_task.min(tools.len());
            let chosen = (0..n)
                .map(|_| {
                    let t = tools[next_tool % tools.len()].clone();
                    next_tool += 1;
                    t
                })
                .collect();
            Target {
                family,
                tools: chosen,
            }
        })
        .collect()
}

/// The prompt asking a model for one task: the environment's description and tools, the
/// target's family and tools, and example entities from the initial state.
pub fn generation_prompt(
    env_name: &str,
    description: &str,
    tools: &[Value],
    state: &Value,
    target: &Target,
) -> envsim_core::prompt::Prompt {
    let tool_lines: Vec<String> = tools
        .iter()
        .filter_map(|t| {
            let f = t.get("function").unwrap_or(t);
            Some(format!(
                "- {}: {}",
                f.get("name")?.as_str()?,
                f.get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or("")
            ))
        })
        .collect();
    let mut examples = Vec::new();
    for (key, value) in resources(state).into_iter().take(12) {
        let text = value.to_string();
        let short: String = text.chars().take(160).collect();
        examples.push(format!("- {}/{}: {short}", key.0, key.1));
    }
    envsim_core::prompt::Prompt {
        system: "You write tasks for an AI agent that operates a software system through tools. A task is what a user would ask, in their own words: concrete (it names the entities it is about) and achievable with the tools. Answer with one JSON object: {\"instruction\": \"...\", \"tools\": [\"...\"], \"resources\": [\"<type>/<id>\", ...]} naming the tools it uses and the entities it touches.".into(),
        user: format!(
            "System: {env_name}\n{description}\n\nTools:\n{}\n\nSome entities in the current state:\n{}\n\nWrite {}. It should use these tools: {}.",
            tool_lines.join("\n"),
            if examples.is_empty() { "(none)".to_owned() } else { examples.join("\n") },
            target.family.brief(),
            target.tools.join(", ")
        ),
    }
}

/// The JSON Schema of a generated task (what constrained decoding asks for).
pub fn generated_task_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "instruction": {"type": "string"},
            "tools": {"type": "array", "items": {"type": "string"}},
            "resources": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["instruction", "tools", "resources"],
        "additionalProperties": false
    })
}

/// Reads a model's generated task; why not when it does not read.
pub fn read_generated(
    text: &str,
    env: &str,
    id: String,
    target: &Target,
    model: &str,
    known_tools: &[String],
) -> Result<Task, SynthError> {
    let unreadable = |message: String| SynthError::Unreadable {
        model: model.to_owned(),
        message,
    };
    let found = envsim_core::extract::extract_object(text, &["instruction", "tools"])
        .map_err(|e| unreadable(format!("no task object in the answer ({e:?})")))?;
    let instruction = found
        .object
        .get("instruction")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| unreadable("the answer has no instruction".to_owned()))?
        .to_owned();
    let mut tools: Vec<String> = found
        .object
        .get("tools")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .filter(|t| known_tools.iter().any(|k| k == t))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if tools.is_empty() {
        tools = target.tools.clone();
    }
    let resources: Vec<String> = found
        .object
        .get("resources")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Ok(Task {
        id,
        env: env.to_owned(),
        instruction,
        turns: Vec::new(),
        state: None,
        initial_state: None,
        family: target.family,
        tools,
        resources,
        plan: Vec::new(),
        user_goal: None,
        source: format!("generated:{model}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use envsim_core::audit::AuditStep;
    use std::sync::Arc;

    fn step(tool: &str, success: bool, after: Value) -> AuditStep {
        AuditStep {
            tool: tool.into(),
            arguments: Map::new(),
            observation: json!({}),
            success: Some(success),
            state_after: Arc::new(after),
        }
    }

    fn run(initial: Value, steps: Vec<AuditStep>) -> AuditTrajectory {
        AuditTrajectory {
            id: "t".into(),
            initial_state: Arc::new(initial),
            steps,
        }
    }

    #[test]
    fn walks_are_classified_by_what_running_them_did() {
        let s0 = json!({"orders": {"O1": {"status": "new"}}, "carts": {"C1": {"n": 0}}});
        let failed = run(s0.clone(), vec![step("get_order", false, s0.clone())]);
        assert_eq!(classify(&failed), TaskFamily::ErrorPath);
        // A failure inside a walk that changes the state repeatedly counts for the change.
        let s1 = json!({"orders": {"O1": {"status": "paid"}}, "carts": {"C1": {"n": 0}}});
        let s2 = json!({"orders": {"O1": {"status": "sent"}}, "carts": {"C1": {"n": 0}}});
        let mixed = run(
            s0.clone(),
            vec![
                step("pay", true, s1),
                step("get", false, s2.clone()),
                step("ship", true, s2),
            ],
        );
        assert_eq!(classify(&mixed), TaskFamily::RepeatedModification);
        let tasks = walk_tasks("shop", "s.json", "4", &mixed);
        let ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["shop/walk-s-4-3"]);
        assert_eq!(tasks[0].resources, ["orders/O1"]);
        assert_eq!(tasks[0].state.as_deref(), Some("s.json"));
        assert_eq!(tasks[0].plan.len(), 3);
        let s1 = json!({"orders": {"O1": {"status": "paid"}}, "carts": {"C1": {"n": 0}}});
        let s2 = json!({"orders": {"O1": {"status": "sent"}}, "carts": {"C1": {"n": 0}}});
        let twice = run(
            s0.clone(),
            vec![step("pay", true, s1.clone()), step("ship", true, s2)],
        );
        assert_eq!(classify(&twice), TaskFamily::RepeatedModification);
        let s3 = json!({"orders": {"O1": {"status": "paid"}}, "carts": {"C1": {"n": 1}}});
        let across = run(
            s0.clone(),
            vec![step("pay", true, s1), step("add", true, s3)],
        );
        assert_eq!(classify(&across), TaskFamily::CrossResource);
        let mut state = json!({"notes": {}});
        let mut steps = Vec::new();
        for i in 0..4 {
            state["notes"][format!("N{i}")] = json!({"text": i});
            steps.push(step("add_note", true, state.clone()));
        }
        let long = run(json!({"notes": {}}), steps.clone());
        assert_eq!(classify(&long), TaskFamily::LongChain);
        steps.truncate(3);
        assert_eq!(
            classify(&run(json!({"notes": {}}), steps)),
            TaskFamily::Ordinary
        );
        // Prefixes of 3 calls and the whole walk (6 is not shorter than 4).
        let tasks = walk_tasks("n", "a.json", "0", &long);
        let families: Vec<TaskFamily> = tasks.iter().map(|t| t.family).collect();
        assert_eq!(families, [TaskFamily::Ordinary, TaskFamily::LongChain]);
        assert!(tasks[0]
            .instruction
            .contains("1. add_note()\n2. add_note()\n3. add_note()"));
        let reads = run(s0.clone(), vec![step("get_order", true, s0.clone())]);
        assert_eq!(classify(&reads), TaskFamily::Ordinary);
        // A refusal that changed nothing is left out of a second version of the walk: the
        // error path becomes an ordinary task; a refusal that changed the state stays (above).
        let s1 = json!({"orders": {"O1": {"status": "paid"}}, "carts": {"C1": {"n": 0}}});
        let refused = run(
            s0.clone(),
            vec![
                step("pay", true, s1.clone()),
                step("ship", false, s1.clone()),
                step("get_order", true, s1),
            ],
        );
        let tasks = walk_tasks("shop", "s.json", "2", &refused);
        let seen: Vec<(&str, TaskFamily, usize)> = tasks
            .iter()
            .map(|t| (t.id.as_str(), t.family, t.plan.len()))
            .collect();
        assert_eq!(
            seen,
            [
                ("shop/walk-s-2-3", TaskFamily::ErrorPath, 3),
                ("shop/walk-s-2-ok-2", TaskFamily::Ordinary, 2)
            ]
        );
        assert_eq!(
            tasks[1]
                .plan
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
            ["pay", "get_order"]
        );
        let only_refused = run(s0.clone(), vec![step("ship", false, s0)]);
        assert_eq!(walk_tasks("shop", "s.json", "3", &only_refused).len(), 1);
    }

    fn task(id: &str, family: TaskFamily, tools: &[&str], text: &str) -> Task {
        Task {
            id: id.into(),
            env: "e".into(),
            instruction: text.into(),
            turns: Vec::new(),
            state: None,
            initial_state: None,
            family,
            tools: tools.iter().map(|t| t.to_string()).collect(),
            resources: Vec::new(),
            plan: Vec::new(),
            user_goal: None,
            source: "test".into(),
        }
    }

    #[test]
    fn the_mix_meets_the_adversarial_share_and_reports_what_was_short() {
        use TaskFamily::*;
        let mut pool = Vec::new();
        for i in 0..10 {
            pool.push(task(
                &format!("o{i}"),
                Ordinary,
                &["read"],
                &format!("ordinary task number {i}"),
            ));
        }
        pool.push(task("e1", ErrorPath, &["a"], "error one"));
        pool.push(task("e2", ErrorPath, &["b"], "error two"));
        pool.push(task("e3", ErrorPath, &["c"], "error three"));
        pool.push(task("l1", LongChain, &["a"], "long one"));
        let (chosen, report) = choose_mix(pool.clone(), 8, 0.5);
        assert_eq!(chosen.len(), 8);
        assert_eq!(report.adversarial_requested, 4);
        assert_eq!(report.adversarial_shortfall, 0);
        assert_eq!(report.chosen["error_path"], 3);
        assert_eq!(report.chosen["long_chain"], 1);
        assert_eq!(report.chosen["ordinary"], 4);
        // Asking for more adversarial tasks than exist: the shortfall is ordinary and named.
        let (chosen, report) = choose_mix(pool.clone(), 10, 0.8);
        assert_eq!(chosen.len(), 10);
        assert_eq!(report.adversarial_shortfall, 4);
        assert_eq!(report.chosen["ordinary"], 6);
        assert_eq!(report.ordinary_shortfall, 0);
        // Too few ordinary tasks: adversarial ones fill in, and the report says so.
        let (_, report) = choose_mix(pool.clone()[8..].to_vec(), 5, 0.2);
        assert_eq!(report.ordinary_shortfall, 2);
        assert_eq!(report.chosen["long_chain"], 1);
        assert_eq!(report.chosen["error_path"], 2);
        // Too few tasks overall: all of them.
        let (chosen, _) = choose_mix(pool, 40, 0.0);
        assert_eq!(chosen.len(), 14);
    }

    #[test]
    fn coverage_comes_first_within_a_family() {
        use TaskFamily::*;
        let pool = vec![
            task("a", Ordinary, &["x"], "first task here"),
            task("b", Ordinary, &["x"], "second task here"),
            task("c", Ordinary, &["y", "z"], "third task here"),
        ];
        let (chosen, _) = choose_mix(pool, 2, 0.0);
        let ids: Vec<&str> = chosen.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["c", "a"]);
    }

    #[test]
    fn duplicates_and_near_duplicates_are_removed() {
        use TaskFamily::*;
        let tasks = vec![
            task(
                "a",
                Ordinary,
                &[],
                "Cancel order O1 and refund the customer.",
            ),
            task(
                "b",
                Ordinary,
                &[],
                "cancel   order o1, and refund the customer",
            ),
            task(
                "c",
                Ordinary,
                &[],
                "Cancel order O2 and refund the customer.",
            ),
            task("d", Ordinary, &[], "Show the cart of customer C1001."),
        ];
        let (kept, removed) = dedupe(tasks);
        assert_eq!(removed, 1);
        let ids: Vec<&str> = kept.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["a", "c", "d"]);
    }

    #[test]
    fn task_files_are_read_with_defaults_and_located_errors() {
        let text = "{\"instruction\": \"do it\"}\n\n{\"id\": \"x\", \"env\": \"other\", \"instruction\": \"more\", \"turns\": [\"and then\"], \"family\": \"error_path\"}\n";
        let tasks = read_tasks(text, "t.jsonl", Some("shop"), "file").unwrap();
        assert_eq!(tasks[0].id, "shop/file-1");
        assert_eq!(tasks[0].env, "shop");
        assert_eq!(tasks[0].family, TaskFamily::Ordinary);
        assert_eq!(tasks[1].turns, ["and then"]);
        assert_eq!(tasks[1].family, TaskFamily::ErrorPath);
        assert_eq!(tasks[1].source, "file");
        for (bad, expected) in [
            ("{\"instruction\": 3}", "line 1: invalid type"),
            ("[1]", "line 1: a task must be a JSON object"),
            (
                "{\"instruction\": \"a\", \"family\": \"hard\"}",
                "`family` \"hard\" is not one of",
            ),
            ("{\"instruction\": \" \"}", "`instruction` is empty"),
            (
                "{\"id\": \"a\", \"instruction\": \"x\"}\n{\"id\": \"a\", \"instruction\": \"y\"}",
                "line 2: the id \"a\" is used twice",
            ),
            ("nope", "line 1: not JSON"),
        ] {
            let e = read_tasks(bad, "t.jsonl", Some("shop"), "file").unwrap_err();
            assert!(e.to_string().contains(expected), "{e}");
            assert!(e.to_string().starts_with("t.jsonl line"), "{e}");
        }
        let e = read_tasks("{\"instruction\": \"a\"}", "t.jsonl", None, "file").unwrap_err();
        assert!(e.to_string().contains("no `env`"), "{e}");
    }

    #[test]
    fn targets_cover_every_tool_before_repeating_and_follow_the_share() {
        let tools: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let t = targets(&tools, 4, 0.5, 2);
        assert_eq!(t[0].family, TaskFamily::LongChain);
        assert_eq!(t[1].family, TaskFamily::CrossResource);
        assert_eq!(t[2].family, TaskFamily::Ordinary);
        assert_eq!(t[0].tools, ["a", "b"]);
        assert_eq!(t[1].tools, ["c", "a"]);
        let generated = read_generated(
            "Here: {\"instruction\": \"Pay order O1\", \"tools\": [\"pay\", \"nonsense\"], \"resources\": [\"orders/O1\"]}",
            "shop",
            "g1".into(),
            &t[0],
            "m",
            &["pay".to_string()],
        )
        .unwrap();
        assert_eq!(generated.tools, ["pay"]);
        assert_eq!(generated.resources, ["orders/O1"]);
        assert_eq!(generated.family, TaskFamily::LongChain);
        assert_eq!(generated.source, "generated:m");
        assert!(read_generated("{\"tools\": []}", "s", "g".into(), &t[0], "m", &[]).is_err());
    }
}

//! Simulator backends: what predicts a step's observation and next state. The executor runs
//! the environment's code (the ground truth, in code mode); a language model (an
//! OpenAI-compatible endpoint, or the embedded local model) predicts from the code or the
//! description; [`crate::faulty::FaultySimulator`] is a test double with known error rates.

use crate::environment::Environment;
use envsim_core::apply::apply;
use envsim_core::delta::Delta;
use envsim_core::extract::extract_object;
use envsim_core::prompt::{description_prompt, Prompt, Template};
use envsim_core::sample::{Action, Usage};
use envsim_core::score::OUTPUT_KEYS;
use envsim_exec::{step_seed, Call, EnvCode, ExecError, Executor};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// A boxed future that can cross threads (the one `envsim-llm` defines).
pub use envsim_llm::BoxFuture;

/// One step to predict.
pub struct StepRequest<'a> {
    /// The environment.
    pub env: &'a Environment,
    /// The state before the call.
    pub state: &'a Value,
    /// The tool.
    pub tool: &'a str,
    /// Its arguments.
    pub arguments: &'a Map<String, Value>,
    /// The session's seed (the executor's seeds derive from it and the step).
    pub seed: u64,
    /// The step's index in the session (clock and seeds).
    pub step: usize,
    /// Which attempt at this step (0 first; each regeneration counts up).
    pub attempt: usize,
    /// Why the previous attempt was rejected, stated for the model (empty at first).
    pub feedback: &'a [String],
}

/// A predicted step.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// The observation (parsed when it is JSON or a Python literal, else text).
    pub observation: Value,
    /// The state after the call.
    pub state_after: Value,
    /// The model's raw answer, for models.
    pub raw: Option<String>,
    /// Tokens spent, for models.
    pub usage: Usage,
}

/// Why a backend gave no prediction.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PredictError {
    /// It answered, but the answer is not a step: no output object, or a change list that
    /// does not apply to the state. A validation failure: regenerating may help.
    #[error("unreadable answer: {why}")]
    Unreadable {
        /// What is wrong.
        why: String,
        /// The answer.
        raw: String,
        /// Tokens the answer spent (an unreadable answer costs as much as a readable one).
        usage: Usage,
        /// The answer's feedback, when an output object with one was found (its change list
        /// was what failed). Boxed: the error stays small.
        feedback: Option<Box<Value>>,
    },
    /// It could not answer (connection, sandbox, no code in environment-free mode).
    #[error("{0}")]
    Failed(String),
}

/// A simulator backend.
pub trait Simulator: Send + Sync {
    /// Its name in provenance (`executor`, `openai:gpt-4o-mini`, `local:qwen…`).
    fn name(&self) -> String;
    /// Whether its answers are the ground truth (the executor running the code).
    fn is_ground_truth(&self) -> bool {
        false
    }
    /// Predicts one step.
    fn predict<'a>(
        &'a self,
        request: &'a StepRequest<'a>,
    ) -> BoxFuture<'a, Result<Prediction, PredictError>>;
}

/// The executor as a simulator: runs the environment's code on the state (code mode only).
#[derive(Clone)]
pub struct ExecutorSimulator {
    executor: Arc<Executor>,
    /// Code to run when the session has only a description (a test double that reads the
    /// description perfectly: `sim measure --no-code` with the faulty double).
    known_code: Option<EnvCode>,
    /// The package's outcome rule, known with the code.
    known_rule: Option<envsim_core::outcome::OutcomeRule>,
}

impl ExecutorSimulator {
    /// Over a running executor.
    pub fn new(executor: Arc<Executor>) -> Self {
        ExecutorSimulator {
            executor,
            known_code: None,
            known_rule: None,
        }
    }

    /// The same executor, running the code of `truth` (and knowing its outcome rule) for
    /// sessions that have only the environment's description. For measurements only: the
    /// session itself still has no code to escalate to; this simulator is the one that knows
    /// it.
    pub fn knowing(mut self, truth: &Environment) -> Self {
        self.known_code = truth.code.clone();
        self.known_rule = truth.rule.clone();
        self
    }

    /// Success or failure of an observation: by the rule this simulator knows, else as the
    /// session's environment reads it (without a rule, a guess from the answer).
    pub fn outcome(&self, env: &Environment, observation: &Value) -> Option<bool> {
        crate::environment::outcome_by(env.rule.as_ref().or(self.known_rule.as_ref()), observation)
    }
}

/// The frozen clock of a step: the environment's clock plus one clock step per step.
pub fn step_clock(env: &Environment, step: usize) -> f64 {
    env.clock + step as f64 * envsim_core::clock::DEFAULT_CLOCK_STEP
}

impl Simulator for ExecutorSimulator {
    fn name(&self) -> String {
        "executor".to_owned()
    }

    fn is_ground_truth(&self) -> bool {
        true
    }

    fn predict<'a>(
        &'a self,
        r: &'a StepRequest<'a>,
    ) -> BoxFuture<'a, Result<Prediction, PredictError>> {
        Box::pin(async move {
            let Some(code) = r.env.code.as_ref().or(self.known_code.as_ref()) else {
                return Err(PredictError::Failed(format!(
                    "{}: the executor needs the environment's code, and this session has only its description",
                    r.env.name
                )));
            };
            let call = Call {
                seed: step_seed(r.seed, r.step),
                clock: step_clock(r.env, r.step),
                ..Call::new(code, r.tool, r.arguments, r.state)
            };
            let outcome = match self.executor.call(&call).await {
                Ok(outcome) => outcome,
                // The sandbox itself failed: no answer.
                Err(e @ (ExecError::Spawn(_) | ExecError::Protocol(_))) => {
                    return Err(PredictError::Failed(format!("{}: {e}", r.env.name)))
                }
                // Everything the environment did is an answer, as in the walks: a raised
                // exception (with the changes made before it), a call its signature refuses,
                // a timeout.
                Err(e) => {
                    return Ok(Prediction {
                        observation: Value::String(format!("Error: {e}")),
                        state_after: e.state_after().cloned().unwrap_or_else(|| r.state.clone()),
                        raw: None,
                        usage: Usage::default(),
                    })
                }
            };
            Ok(Prediction {
                observation: envsim_core::answer::observation_value(
                    &outcome.observation_json,
                    &outcome.observation,
                ),
                state_after: outcome.state_after,
                raw: None,
                usage: Usage::default(),
            })
        })
    }
}

/// The prompt a model gets for a step: envsim's template over the code in code mode, the
/// description prompt over the called operation ([`operation_of`]) in environment-free mode;
/// with the reasons the previous attempt was rejected, when there are some (anchoring).
pub fn step_prompt(template: Template, r: &StepRequest<'_>) -> Prompt {
    let action = Action {
        name: r.tool.to_owned(),
        arguments: r.arguments.clone(),
    };
    let mut prompt = match &r.env.code {
        Some(code) => template.render(&code.code, r.state, &action),
        None => description_prompt(
            &operation_of(&r.env.description, r.tool),
            &r.env.notes,
            r.state,
            &action,
        ),
    };
    if !r.feedback.is_empty() {
        prompt.user.push_str(
            "\n\nYour previous answer to this call was rejected because it is inconsistent:\n",
        );
        for line in r.feedback {
            prompt.user.push_str("- ");
            prompt.user.push_str(line);
            prompt.user.push('\n');
        }
        prompt
            .user
            .push_str("Answer again, consistent with the state, the description and the history.");
    }
    prompt
}

/// The part of an API description a call needs (the analogue of the sliced code): for an
/// OpenAPI document, its title and description, the called operation (path item, method,
/// parameters, body, responses) and the names of the other operations; for tool schemas, the
/// called tool. The whole description when the tool is not found in it.
pub fn operation_of(description: &Value, tool: &str) -> Value {
    if let Some(paths) = description.get("paths").and_then(Value::as_object) {
        let mut others = Vec::new();
        let mut found = None;
        for (path, item) in paths {
            for (method, op) in item.as_object().into_iter().flatten() {
                match op.get("operationId").and_then(Value::as_str) {
                    Some(id) if id == tool => found = Some((path, method, op)),
                    Some(id) => others.push(id.to_owned()),
                    None => {}
                }
            }
        }
        others.sort();
        if let Some((path, method, op)) = found {
            let mut doc = serde_json::Map::new();
            for key in ["openapi", "info", "components"] {
                if let Some(v) = description.get(key) {
                    doc.insert(key.to_owned(), v.clone());
                }
            }
            doc.insert("paths".into(), json!({ path: { method: op } }));
            doc.insert("x-other-operations".into(), json!(others));
            return Value::Object(doc);
        }
        return description.clone();
    }
    let tools = description
        .as_array()
        .or_else(|| description.get("tools").and_then(Value::as_array));
    let name_of = |t: &Value| {
        t.get("function")
            .unwrap_or(t)
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    match tools.and_then(|ts| ts.iter().find(|t| name_of(t).as_deref() == Some(tool))) {
        Some(t) => json!([t]),
        None => description.clone(),
    }
}

/// Reads a model's answer `text` (which spent `usage`): the output object's `feedback` and
/// `config_changes`, the changes applied to the state.
pub fn read_answer(text: String, usage: Usage, state: &Value) -> Result<Prediction, PredictError> {
    let unreadable = |why: String, feedback: Option<Value>| PredictError::Unreadable {
        why,
        raw: text.clone(),
        usage,
        feedback: feedback.map(Box::new),
    };
    let found = extract_object(&text, &OUTPUT_KEYS)
        .map_err(|e| unreadable(format!("no output object ({e:?})"), None))?;
    let feedback = found.object.get("feedback").cloned().map(|f| match f {
        Value::String(text) => envsim_core::answer::observation_value(&Value::Null, &text),
        other => other,
    });
    let changes = found
        .object
        .get("config_changes")
        .cloned()
        .unwrap_or(json!([]));
    let (after, problems) = apply(state, &Delta::from_value(&changes));
    let errors: Vec<String> = problems
        .iter()
        .filter(|p| p.severity == envsim_core::problem::Severity::Error)
        .map(ToString::to_string)
        .collect();
    if !errors.is_empty() {
        return Err(unreadable(
            format!(
                "the change list does not apply to the state: {}",
                errors.join("; ")
            ),
            feedback,
        ));
    }
    Ok(Prediction {
        observation: feedback.unwrap_or(Value::Null),
        state_after: after,
        raw: Some(text),
        usage,
    })
}

/// The JSON Schema of a simulator's answer: the feedback and the change list (what
/// `response_format` asks an OpenAI-compatible server to constrain its output to, and what the
/// local model's decoding is constrained to).
pub fn answer_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "feedback": {"type": "string"},
            "config_changes": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "type": {"type": "string", "enum": ["add", "modify", "delete"]},
                    "path": {"type": "string"},
                    "value": {}
                },
                "required": ["type", "path"],
                "additionalProperties": false
            }}
        },
        "required": ["feedback", "config_changes"],
        "additionalProperties": false
    })
}

/// A model over an OpenAI-compatible endpoint.
pub struct OpenAiSimulator {
    text: envsim_llm::OpenAiText,
    template: Template,
}

impl OpenAiSimulator {
    /// A simulator asking `model` through `client`, with `template` in code mode.
    pub fn new(
        client: envsim_llm::openai::OpenAiClient,
        model: String,
        template: Template,
        decoding: envsim_llm::Decoding,
    ) -> Self {
        OpenAiSimulator {
            text: envsim_llm::OpenAiText::new(client, model, decoding, true)
                .with_schema_name("simulated_step"),
            template,
        }
    }

    /// Whether to send `response_format` (on by default; servers that refuse it need it off).
    pub fn with_structured_output(mut self, on: bool) -> Self {
        self.text = self.text.with_structured_output(on);
        self
    }
}

impl Simulator for OpenAiSimulator {
    fn name(&self) -> String {
        envsim_llm::TextModel::name(&self.text)
    }

    fn predict<'a>(
        &'a self,
        r: &'a StepRequest<'a>,
    ) -> BoxFuture<'a, Result<Prediction, PredictError>> {
        Box::pin(async move {
            let prompt = step_prompt(self.template, r);
            let body = self.text.body(&prompt, Some(answer_schema()), None);
            let (content, usage) = self
                .text
                .ask(&body)
                .await
                .map_err(|e| PredictError::Failed(e.to_string()))?;
            read_answer(content, usage, r.state)
        })
    }
}

/// The embedded local model.
#[cfg(feature = "local")]
pub struct LocalSimulator {
    text: envsim_llm::LocalText,
    template: Template,
    /// Decode under [`answer_schema`] (on by default).
    constrained: bool,
}

#[cfg(feature = "local")]
impl LocalSimulator {
    /// A simulator over a started engine; its answers are decoded under [`answer_schema`].
    pub fn new(
        engine: Arc<envsim_model::local::LocalEngine>,
        generation: envsim_model::local::Generation,
        model: String,
        template: Template,
    ) -> Self {
        LocalSimulator {
            text: envsim_llm::LocalText::new(engine, generation, model),
            template,
            constrained: true,
        }
    }

    /// Whether decoding is constrained to [`answer_schema`] (off: the model writes free text,
    /// and the reader looks for the answer object in it).
    pub fn with_constrained_output(mut self, on: bool) -> Self {
        self.constrained = on;
        self
    }
}

#[cfg(feature = "local")]
impl Simulator for LocalSimulator {
    fn name(&self) -> String {
        envsim_llm::TextModel::name(&self.text)
    }

    fn predict<'a>(
        &'a self,
        r: &'a StepRequest<'a>,
    ) -> BoxFuture<'a, Result<Prediction, PredictError>> {
        Box::pin(async move {
            let prompt = step_prompt(self.template, r);
            // A regeneration samples (a greedy model would repeat itself).
            let mut generation = self.text.generation().clone();
            if self.constrained {
                generation.json_schema = Some(answer_schema());
            }
            if r.attempt > 0 {
                generation.temperature = generation.temperature.max(0.7);
                generation.seed = generation.seed.wrapping_add(r.attempt as u32);
            }
            let completion = self
                .text
                .generate(prompt, generation)
                .await
                .map_err(|e| PredictError::Failed(e.to_string()))?;
            read_answer(completion.content, completion.usage, r.state)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_called_operation_is_cut_out_of_a_description() {
        let doc = json!({"openapi": "3.1.0", "info": {"title": "t"}, "paths": {
            "/a/{id}": {"get": {"operationId": "get_a"}, "delete": {"operationId": "delete_a"}},
            "/b": {"post": {"operationId": "make_b", "responses": {"200": {}}}}}});
        assert_eq!(
            operation_of(&doc, "make_b"),
            json!({"openapi": "3.1.0", "info": {"title": "t"},
                   "paths": {"/b": {"post": {"operationId": "make_b", "responses": {"200": {}}}}},
                   "x-other-operations": ["delete_a", "get_a"]})
        );
        assert_eq!(operation_of(&doc, "nothing"), doc);
        let tools = json!([{"type": "function", "function": {"name": "f"}}, {"name": "g"}]);
        assert_eq!(operation_of(&tools, "g"), json!([{"name": "g"}]));
        assert_eq!(
            operation_of(&json!({"tools": tools}), "f"),
            json!([{"type": "function", "function": {"name": "f"}}])
        );
    }
}

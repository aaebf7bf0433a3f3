//! Agents and the user side of a synthesized conversation.
//!
//! - [`OpenAiAgent`]: an OpenAI-compatible endpoint with function calling (`tools`,
//!   `tool_calls`).
//! - [`PromptedAgent`]: any [`TextModel`] told the tools in its prompt and asked for one JSON
//!   object per turn, a tool call or a final answer. Over the embedded local model its decoding
//!   is constrained to exactly those objects ([`turn_schema`]), so every turn reads.
//! - [`ScriptedAgent`]: a test double that replays a task's planned calls (walk tasks), for
//!   measuring simulators and anchoring without an agent model.
//!
//! The user: [`User::Scripted`] sends a task's later turns in order; [`User::Model`] asks a
//! model to play the user toward the task's goal.
//!
//! The conversation is kept as OpenAI chat messages (`system`, `user`, `assistant` with
//! `tool_calls`, `tool`), which is also the training format the export writes.

use crate::error::SynthError;
use crate::task::Task;
use envsim_core::prompt::Prompt;
use envsim_core::sample::Usage;
use envsim_sim::backend::BoxFuture;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::sync::Arc;

#[cfg(feature = "local")]
pub use envsim_llm::LocalText;
pub use envsim_llm::OpenAiText;
pub use envsim_llm::TextModel;

/// A tool call an agent made.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCall {
    /// Its id in the conversation.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments, when they are a JSON object.
    pub arguments: Map<String, Value>,
    /// Why the arguments were not a JSON object (the call is answered with this error).
    pub arguments_error: Option<String>,
}

/// One agent turn.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentTurn {
    /// Its text.
    pub content: String,
    /// Its tool calls (none: a final answer).
    pub tool_calls: Vec<ToolCall>,
    /// Tokens spent.
    pub usage: Usage,
    /// Why the answer could not be read as a turn (the conversation ends there).
    pub unreadable: Option<String>,
}

impl AgentTurn {
    /// The turn as an OpenAI assistant message.
    pub fn message(&self) -> Value {
        let mut m = json!({"role": "assistant", "content": self.content});
        if !self.tool_calls.is_empty() {
            m["tool_calls"] = Value::Array(
                self.tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function", "function": {
                            "name": c.name,
                            "arguments": Value::Object(c.arguments.clone()).to_string(),
                        }})
                    })
                    .collect(),
            );
        }
        m
    }
}

/// What an agent sees when it acts.
pub struct AgentContext<'a> {
    /// The task.
    pub task: &'a Task,
    /// The conversation so far (OpenAI chat messages).
    pub messages: &'a [Value],
    /// The tools (OpenAI tool schemas).
    pub tools: &'a [Value],
    /// Seed of this turn.
    pub seed: u64,
}

/// An agent.
pub trait Agent: Send + Sync {
    /// Its name in records.
    fn name(&self) -> String;

    /// Its next turn. An error means the agent could not be asked at all (a connection, a
    /// server error after retries): the task fails and a rerun retries it.
    fn act<'a>(
        &'a self,
        context: &'a AgentContext<'a>,
    ) -> BoxFuture<'a, Result<AgentTurn, SynthError>>;
}

/// An OpenAI-compatible endpoint with function calling.
pub struct OpenAiAgent {
    client: envsim_llm::openai::OpenAiClient,
    model: String,
    decoding: envsim_llm::Decoding,
}

impl OpenAiAgent {
    /// An agent asking `model` through `client`.
    pub fn new(
        client: envsim_llm::openai::OpenAiClient,
        model: String,
        decoding: envsim_llm::Decoding,
    ) -> Self {
        OpenAiAgent {
            client,
            model,
            decoding,
        }
    }
}

impl Agent for OpenAiAgent {
    fn name(&self) -> String {
        format!("openai:{}", self.model)
    }

    fn act<'a>(&'a self, c: &'a AgentContext<'a>) -> BoxFuture<'a, Result<AgentTurn, SynthError>> {
        Box::pin(async move {
            let mut body = json!({
                "model": self.model,
                "messages": c.messages,
                "tools": c.tools,
                "seed": c.seed,
            });
            if let Some(t) = self.decoding.temperature {
                body["temperature"] = json!(t);
            }
            if let Some(m) = self.decoding.max_tokens {
                body["max_tokens"] = json!(m);
            }
            for (k, v) in &self.decoding.extra_body {
                body[k] = v.clone();
            }
            let (_, raw) = self.client.attempt(&body.to_string()).await.map_err(|e| {
                SynthError::Model(envsim_llm::LlmError {
                    model: self.name(),
                    message: e.message,
                })
            })?;
            Ok(read_chat_turn(&raw))
        })
    }
}

/// Reads an OpenAI chat-completion body as an agent turn: `content`, `tool_calls` (each
/// `function.arguments` a JSON text of an object) and `usage`. A body without a message is an
/// unreadable turn.
pub fn read_chat_turn(raw: &str) -> AgentTurn {
    let unreadable = |why: String| AgentTurn {
        unreadable: Some(why),
        ..AgentTurn::default()
    };
    let value: Value = match serde_json::from_str(raw) {
        Ok(v) => v,
        Err(e) => return unreadable(format!("the response is not JSON: {e}")),
    };
    let Some(message) = value.pointer("/choices/0/message") else {
        return unreadable("the response has no choices[0].message".into());
    };
    let content = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    };
    let count = |key: &str| {
        value
            .get("usage")
            .and_then(|u| u.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let usage = Usage {
        prompt_tokens: count("prompt_tokens"),
        completion_tokens: count("completion_tokens"),
    };
    let mut calls = Vec::new();
    for (i, call) in message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let function = call.get("function").unwrap_or(call);
        let Some(name) = function.get("name").and_then(Value::as_str) else {
            return unreadable(format!("tool_calls[{i}] has no function name"));
        };
        let (arguments, arguments_error) = match function.get("arguments") {
            Some(Value::String(text)) => read_arguments(text),
            Some(Value::Object(map)) => (map.clone(), None),
            None | Some(Value::Null) => (Map::new(), None),
            Some(other) => (
                Map::new(),
                Some(format!("the arguments are not a JSON object: {other}")),
            ),
        };
        calls.push(ToolCall {
            id: call
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("call_{i}"), str::to_owned),
            name: name.to_owned(),
            arguments,
            arguments_error,
        });
    }
    AgentTurn {
        content,
        tool_calls: calls,
        usage,
        unreadable: None,
    }
}

/// Arguments as a model wrote them (a JSON text): the object, or why it is not one.
fn read_arguments(text: &str) -> (Map<String, Value>, Option<String>) {
    if text.trim().is_empty() {
        return (Map::new(), None);
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => (map, None),
        Ok(other) => (
            Map::new(),
            Some(format!("the arguments are not a JSON object: {other}")),
        ),
        Err(e) => (
            Map::new(),
            Some(format!("the arguments are not JSON ({e}): {text}")),
        ),
    }
}

/// The JSON Schema of one prompted turn: a call of one of `tools` (its name and its declared
/// parameters, no others unless its schema allows them) or a final answer.
pub fn turn_schema(tools: &[Value]) -> Value {
    let mut calls: Vec<Value> = tools
        .iter()
        .filter_map(|t| {
            let f = t.get("function").unwrap_or(t);
            let name = f.get("name")?.as_str()?;
            let mut parameters = f
                .get("parameters")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            // A function takes its declared parameters only (JSON Schema would allow others
            // unless told not to; a small model then invents some).
            if let Some(map) = parameters.as_object_mut() {
                map.entry("additionalProperties").or_insert(json!(false));
            }
            Some(json!({
                "type": "object",
                "properties": {"tool_call": {
                    "type": "object",
                    "properties": {"name": {"const": name}, "arguments": parameters},
                    "required": ["name", "arguments"],
                    "additionalProperties": false
                }},
                "required": ["tool_call"],
                "additionalProperties": false
            }))
        })
        .collect();
    calls.push(json!({
        "type": "object",
        "properties": {"final_answer": {"type": "string"}},
        "required": ["final_answer"],
        "additionalProperties": false
    }));
    json!({"anyOf": calls})
}

/// Longest tool result a prompted agent is shown (characters); longer ones are cut.
const SHOWN_RESULT_CHARS: usize = 1500;

/// A [`TextModel`] acting as an agent through its prompt.
pub struct PromptedAgent {
    model: Arc<dyn TextModel>,
}

impl PromptedAgent {
    /// An agent over `model`.
    pub fn new(model: Arc<dyn TextModel>) -> Self {
        PromptedAgent { model }
    }
}

/// The prompt of a prompted agent's turn: the tools and the reply format in the system
/// message, the conversation so far in the user message.
pub fn agent_prompt(messages: &[Value], tools: &[Value]) -> Prompt {
    let mut system = String::new();
    let mut transcript = Vec::new();
    for m in messages {
        let content = m.get("content").and_then(Value::as_str).unwrap_or("");
        match m.get("role").and_then(Value::as_str) {
            Some("system") => system = content.to_owned(),
            Some("user") => transcript.push(format!("User: {content}")),
            Some("assistant") => {
                let calls = m.get("tool_calls").and_then(Value::as_array);
                match calls {
                    Some(calls) if !calls.is_empty() => {
                        for c in calls {
                            transcript.push(format!(
                                "You called {}({})",
                                c["function"]["name"].as_str().unwrap_or(""),
                                c["function"]["arguments"].as_str().unwrap_or("{}")
                            ));
                        }
                    }
                    _ => transcript.push(format!("You answered: {content}")),
                }
            }
            Some("tool") => {
                let cut: String = content.chars().take(SHOWN_RESULT_CHARS).collect();
                let more = if cut.len() < content.len() {
                    " …"
                } else {
                    ""
                };
                transcript.push(format!("Result: {cut}{more}"));
            }
            _ => {}
        }
    }
    let tool_lines: Vec<String> = tools
        .iter()
        .map(|t| t.get("function").unwrap_or(t).to_string())
        .collect();
    Prompt {
        system: format!(
            "{system}\n\nTools (JSON Schema of each tool's arguments):\n{}\n\nReply with one JSON object: {{\"tool_call\": {{\"name\": \"<tool>\", \"arguments\": {{...}}}}}} to call a tool, or {{\"final_answer\": \"<your answer to the user>\"}} when the request is done or cannot be done. Each call's result is shown after it: do not repeat a call whose result you already have; use the results to take the next step, or answer.",
            tool_lines.join("\n")
        ),
        user: format!("{}\n\nYour next step:", transcript.join("\n")),
    }
}

/// Reads a prompted turn: a `tool_call` or a `final_answer` object.
pub fn read_prompted_turn(text: &str, usage: Usage, call_id: String) -> AgentTurn {
    let found = match envsim_core::extract::extract_object(text, &["tool_call", "final_answer"]) {
        Ok(found) => found.object,
        Err(e) => {
            return AgentTurn {
                content: text.to_owned(),
                usage,
                unreadable: Some(format!("no turn object in the answer ({e:?})")),
                ..AgentTurn::default()
            }
        }
    };
    if let Some(call) = found.get("tool_call") {
        let name = call.get("name").and_then(Value::as_str);
        let Some(name) = name else {
            return AgentTurn {
                content: text.to_owned(),
                usage,
                unreadable: Some("the tool call has no name".into()),
                ..AgentTurn::default()
            };
        };
        let (arguments, arguments_error) = match call.get("arguments") {
            Some(Value::Object(map)) => (map.clone(), None),
            None | Some(Value::Null) => (Map::new(), None),
            Some(Value::String(s)) => read_arguments(s),
            Some(other) => (
                Map::new(),
                Some(format!("the arguments are not a JSON object: {other}")),
            ),
        };
        return AgentTurn {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: call_id,
                name: name.to_owned(),
                arguments,
                arguments_error,
            }],
            usage,
            unreadable: None,
        };
    }
    match found.get("final_answer") {
        Some(answer) => AgentTurn {
            content: answer
                .as_str()
                .map_or_else(|| answer.to_string(), str::to_owned),
            usage,
            ..AgentTurn::default()
        },
        None => AgentTurn {
            content: text.to_owned(),
            usage,
            unreadable: Some("the answer is neither a tool call nor a final answer".into()),
            ..AgentTurn::default()
        },
    }
}

impl Agent for PromptedAgent {
    fn name(&self) -> String {
        format!("prompted:{}", self.model.name())
    }

    fn act<'a>(&'a self, c: &'a AgentContext<'a>) -> BoxFuture<'a, Result<AgentTurn, SynthError>> {
        Box::pin(async move {
            let prompt = agent_prompt(c.messages, c.tools);
            let (text, usage) = self
                .model
                .complete(prompt, Some(turn_schema(c.tools)), c.seed)
                .await?;
            let calls_so_far = c
                .messages
                .iter()
                .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
                .map(Vec::len)
                .sum::<usize>();
            Ok(read_prompted_turn(
                &text,
                usage,
                format!("call_{calls_so_far}"),
            ))
        })
    }
}

/// A test double: replays the task's planned calls, one per turn, then answers "Done.".
pub struct ScriptedAgent;

impl Agent for ScriptedAgent {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn act<'a>(&'a self, c: &'a AgentContext<'a>) -> BoxFuture<'a, Result<AgentTurn, SynthError>> {
        Box::pin(async move {
            let made = c
                .messages
                .iter()
                .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
                .map(Vec::len)
                .sum::<usize>();
            Ok(match c.task.plan.get(made) {
                Some(call) => AgentTurn {
                    tool_calls: vec![ToolCall {
                        id: format!("call_{made}"),
                        name: call.name.clone(),
                        arguments: call.arguments.clone(),
                        arguments_error: None,
                    }],
                    ..AgentTurn::default()
                },
                None => AgentTurn {
                    content: "Done.".into(),
                    ..AgentTurn::default()
                },
            })
        })
    }
}

/// The user side of a conversation.
#[derive(Clone)]
pub enum User {
    /// The task's later turns, in order; then the conversation ends.
    Scripted,
    /// A model plays the user toward the task's goal, for at most this many more turns.
    Model(Arc<dyn TextModel>, usize),
}

impl User {
    /// Its name in records.
    pub fn name(&self) -> String {
        match self {
            User::Scripted => "scripted".into(),
            User::Model(m, _) => format!("model:{}", m.name()),
        }
    }

    /// The user's next message after the agent's final answer, or `None` when the user is
    /// done; with the tokens spent.
    pub async fn next(
        &self,
        task: &Task,
        messages: &[Value],
        seed: u64,
    ) -> Result<(Option<String>, Usage), SynthError> {
        let user_turns = messages
            .iter()
            .filter(|m| m["role"] == "user")
            .count()
            .max(1);
        match self {
            User::Scripted => Ok((task.turns.get(user_turns - 1).cloned(), Usage::default())),
            User::Model(model, limit) => {
                if user_turns > *limit {
                    return Ok((None, Usage::default()));
                }
                let goal = task.user_goal.as_deref().unwrap_or(&task.instruction);
                let transcript: Vec<String> = messages
                    .iter()
                    .filter_map(|m| match (m["role"].as_str(), m["content"].as_str()) {
                        (Some("user"), Some(c)) => Some(format!("You: {c}")),
                        (Some("assistant"), Some(c)) if !c.is_empty() => {
                            Some(format!("Assistant: {c}"))
                        }
                        _ => None,
                    })
                    .collect();
                let prompt = Prompt {
                    system: "You play the user of a software assistant. You want what your goal says; you reply to the assistant as that user would, briefly. When your goal is met, or the assistant cannot help further, you are done. Answer with one JSON object: {\"done\": true} or {\"done\": false, \"message\": \"...\"}.".into(),
                    user: format!("Your goal: {goal}\n\nThe conversation so far:\n{}\n\nYour reply:", transcript.join("\n")),
                };
                let schema = json!({"type": "object", "properties": {
                    "done": {"type": "boolean"}, "message": {"type": "string"}},
                    "required": ["done"], "additionalProperties": false});
                let (text, usage) = model.complete(prompt, Some(schema), seed).await?;
                let reply = envsim_core::extract::extract_object(&text, &["done", "message"])
                    .map_err(|e| SynthError::Unreadable {
                        model: model.name(),
                        message: format!("the user's reply does not read ({e:?})"),
                    })?
                    .object;
                let done = reply.get("done").and_then(Value::as_bool).unwrap_or(true);
                let message = reply
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                    .map(str::to_owned);
                Ok((if done { None } else { message }, usage))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_turns_are_read_with_their_calls_and_argument_errors() {
        let raw = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "get", "arguments": "{\"id\": \"O1\"}"}},
            {"id": "b", "type": "function", "function": {"name": "put", "arguments": "{not json"}},
            {"type": "function", "function": {"name": "list", "arguments": ""}}
        ]}}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
        .to_string();
        let turn = read_chat_turn(&raw);
        assert_eq!(
            turn.usage,
            Usage {
                prompt_tokens: 10,
                completion_tokens: 5
            }
        );
        assert_eq!(turn.tool_calls.len(), 3);
        assert_eq!(turn.tool_calls[0].arguments["id"], "O1");
        assert!(turn.tool_calls[1]
            .arguments_error
            .as_deref()
            .unwrap()
            .contains("not JSON"));
        assert_eq!(turn.tool_calls[2].id, "call_2");
        assert!(turn.tool_calls[2].arguments.is_empty());
        let m = turn.message();
        assert_eq!(
            m["tool_calls"][0]["function"]["arguments"],
            "{\"id\":\"O1\"}"
        );
        assert!(read_chat_turn("{}")
            .unreadable
            .unwrap()
            .contains("choices[0].message"));
        assert!(read_chat_turn("<html>")
            .unreadable
            .unwrap()
            .contains("not JSON"));
        let text = read_chat_turn(r#"{"choices": [{"message": {"content": "All done."}}]}"#);
        assert_eq!(text.content, "All done.");
        assert!(text.tool_calls.is_empty() && text.unreadable.is_none());
    }

    #[test]
    fn prompted_turns_are_calls_or_final_answers() {
        let used = Usage {
            prompt_tokens: 5,
            completion_tokens: 2,
        };
        let t = read_prompted_turn(
            r#"{"tool_call": {"name": "get", "arguments": {"id": 1}}}"#,
            used,
            "call_3".into(),
        );
        assert_eq!(t.tool_calls[0].name, "get");
        assert_eq!(t.tool_calls[0].id, "call_3");
        assert_eq!(t.usage, used);
        let t = read_prompted_turn(r#"{"final_answer": "It is done."}"#, used, "c".into());
        assert_eq!(t.content, "It is done.");
        assert!(t.tool_calls.is_empty() && t.unreadable.is_none());
        assert!(read_prompted_turn("I think so", used, "c".into())
            .unreadable
            .is_some());
        assert!(read_prompted_turn(r#"{"tool_call": {}}"#, used, "c".into())
            .unreadable
            .unwrap()
            .contains("no name"));
    }

    #[test]
    fn the_turn_schema_offers_each_tool_with_its_parameters_and_a_final_answer() {
        let tools = vec![json!({"type": "function", "function": {"name": "get",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}})];
        let schema = turn_schema(&tools);
        let branches = schema["anyOf"].as_array().unwrap();
        assert_eq!(branches.len(), 2);
        assert_eq!(
            branches[0]["properties"]["tool_call"]["properties"]["name"]["const"],
            "get"
        );
        assert_eq!(
            branches[0]["properties"]["tool_call"]["properties"]["arguments"]["required"],
            json!(["id"])
        );
        assert_eq!(
            branches[0]["properties"]["tool_call"]["properties"]["arguments"]
                ["additionalProperties"],
            json!(false)
        );
        // A schema that allows other parameters keeps allowing them; no schema: no parameters.
        let open = turn_schema(&[
            json!({"name": "f", "parameters": {"type": "object", "additionalProperties": true}}),
            json!({"name": "g"}),
        ]);
        assert_eq!(
            open["anyOf"][0]["properties"]["tool_call"]["properties"]["arguments"]
                ["additionalProperties"],
            json!(true)
        );
        assert_eq!(
            open["anyOf"][1]["properties"]["tool_call"]["properties"]["arguments"],
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        );
        assert_eq!(branches[1]["required"], json!(["final_answer"]));
    }

    #[test]
    fn the_prompt_carries_the_conversation_and_cuts_long_results() {
        let messages = vec![
            json!({"role": "system", "content": "You run a shop."}),
            json!({"role": "user", "content": "Cancel O1."}),
            json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c0", "type": "function",
                "function": {"name": "cancel", "arguments": "{\"id\":\"O1\"}"}}]}),
            json!({"role": "tool", "tool_call_id": "c0", "content": "x".repeat(3000)}),
        ];
        let p = agent_prompt(
            &messages,
            &[json!({"type": "function", "function": {"name": "cancel"}})],
        );
        assert!(p.system.starts_with("You run a shop."));
        assert!(p.system.contains("\"name\":\"cancel\""));
        assert!(p
            .user
            .contains("User: Cancel O1.\nYou called cancel({\"id\":\"O1\"})\nResult: "));
        assert!(p.user.contains(" …"));
        assert!(p.user.len() < 2000);
    }

    /// A test double: answers from a list, in order, and records the prompts.
    struct CannedText {
        answers: std::sync::Mutex<Vec<String>>,
        prompts: std::sync::Mutex<Vec<Prompt>>,
    }

    impl TextModel for CannedText {
        fn name(&self) -> String {
            "canned".into()
        }

        fn complete<'a>(
            &'a self,
            prompt: Prompt,
            schema: Option<Value>,
            _seed: u64,
        ) -> BoxFuture<'a, Result<(String, Usage), envsim_llm::LlmError>> {
            Box::pin(async move {
                assert!(schema.is_some());
                self.prompts.lock().unwrap().push(prompt);
                let mut answers = self.answers.lock().unwrap();
                Ok((
                    answers.remove(0),
                    Usage {
                        prompt_tokens: 2,
                        completion_tokens: 1,
                    },
                ))
            })
        }
    }

    fn task(turns: &[&str]) -> Task {
        Task {
            id: "t".into(),
            env: "e".into(),
            instruction: "Cancel O1.".into(),
            turns: turns.iter().map(|t| t.to_string()).collect(),
            state: None,
            initial_state: None,
            family: crate::task::TaskFamily::Ordinary,
            tools: Vec::new(),
            resources: Vec::new(),
            plan: Vec::new(),
            user_goal: Some("O1 cancelled and refunded".into()),
            source: String::new(),
        }
    }

    #[tokio::test]
    async fn the_user_is_scripted_or_played_by_a_model_within_its_turns() {
        let messages = vec![
            json!({"role": "user", "content": "Cancel O1."}),
            json!({"role": "assistant", "content": "Cancelled."}),
        ];
        let scripted = User::Scripted;
        let t = task(&["Refund it too."]);
        assert_eq!(
            scripted.next(&t, &messages, 0).await.unwrap().0.as_deref(),
            Some("Refund it too.")
        );
        let mut longer = messages.clone();
        longer.push(json!({"role": "user", "content": "Refund it too."}));
        assert_eq!(scripted.next(&t, &longer, 0).await.unwrap().0, None);
        let model = Arc::new(CannedText {
            answers: std::sync::Mutex::new(vec![
                r#"{"done": false, "message": "Please refund it."}"#.into(),
                r#"{"done": true}"#.into(),
            ]),
            prompts: std::sync::Mutex::new(Vec::new()),
        });
        let user = User::Model(model.clone(), 2);
        let (reply, tokens) = user.next(&t, &messages, 0).await.unwrap();
        assert_eq!(reply.as_deref(), Some("Please refund it."));
        assert_eq!(tokens.completion_tokens, 1);
        let prompt = model.prompts.lock().unwrap()[0].clone();
        assert!(prompt.user.contains("Your goal: O1 cancelled and refunded"));
        assert!(prompt
            .user
            .contains("You: Cancel O1.\nAssistant: Cancelled."));
        assert_eq!(user.next(&t, &longer, 0).await.unwrap().0, None);
        // Past its turns the model is not asked.
        let mut three = longer.clone();
        three.push(json!({"role": "user", "content": "again"}));
        assert_eq!(
            user.next(&t, &three, 0).await.unwrap(),
            (None, Usage::default())
        );
        assert_eq!(model.prompts.lock().unwrap().len(), 2);
    }
}

//! Function-calling transcripts (OpenAI chat, ShareGPT/Hermes) read into tool calls.
//!
//! `envsim audit` checks synthetic function-calling datasets, which are chat transcripts with
//! no environment state: all there is to check is which tool was called with what, and what
//! came back. This module turns one already-parsed record (one JSONL line) into that list.
//!
//! Two forms are recognised, by their top-level key:
//!
//! - **OpenAI chat** (`"messages"`): assistant `tool_calls` (arguments as a JSON string or an
//!   object) answered by `tool` messages, or the legacy `function_call` answered by a
//!   `function` message.
//! - **ShareGPT** (`"conversations"`, turns keyed `from`/`value` or `role`/`content`): Hermes
//!   `<tool_call>` blocks in assistant turns answered by `<tool_response>` blocks, or
//!   LLaMA-Factory `function_call` turns answered by `observation` turns.
//!
//! Both forms go through the same turn reader, so a `messages` record whose assistant text
//! carries Hermes blocks is read as well; the form only says which key held the turns. Roles are
//! case-insensitive (`gpt`/`assistant`/`model`, `tool`/`function`/`observation`/`ipython`).
//! `<tool_call>` and `<tools>` blocks may also be written as Python dict reprs (single quotes,
//! `True`/`None`), as generators that print dicts produce; OpenAI `arguments` texts must be
//! JSON, as the API itself requires.
//!
//! # Pairing results with calls
//!
//! Every result (a `tool`/`function`/`observation` turn, or one `<tool_response>` block) answers
//! exactly one call, chosen as follows:
//!
//! 1. A result with an id some call has (`tool_call_id`) answers the oldest *unanswered* call
//!    with that id; when all calls with that id are answered already, the result is a duplicate
//!    and is dropped (the first answer stands).
//! 2. Otherwise (no id, or an id no call has) a result that names a tool (`name`, or the
//!    `name` of a `{"name", "content"}` response block) answers the oldest unanswered call of
//!    that tool, when there is one.
//! 3. Otherwise it answers the oldest unanswered call. This is what makes Hermes responses pair
//!    "in order", and what a `tool` message with an unknown or missing id gets.
//! 4. A result with no unanswered call left is dropped: without a call there is nothing to check
//!    it against.
//!
//! In ShareGPT records one `observation` turn may answer several calls of a LLaMA-Factory turn:
//! when more than one call is unanswered and the observation is a JSON array with exactly one
//! element per unanswered call, the elements answer them in order. Otherwise the whole
//! observation answers one call (rule 3: the first) and the others stay unanswered, so a later
//! result can still answer them, or they end with no observation.
//!
//! # Observations
//!
//! Text is read by [`crate::answer::read_answer_text`]: JSON, else a Python literal (what
//! `str(result)` prints), else a value embedded in prose (`Result: {...}`), else the trimmed
//! text as a string; each call records the form its answer had. Content that is already JSON (an object, a
//! number) is kept as it is, `null` or missing content is [`Value::Null`], and OpenAI content
//! parts (`[{"type": "text", "text": ...}]`) are concatenated first. A `<tool_response>` block
//! holding `{"name": ..., "content": ...}` (Hermes' envelope) observes its `content`, itself
//! parsed when it is a JSON text.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::answer::{read_answer_text, Answer, AnswerForm};
use crate::literal::{parse_literal, Dialect};

/// Which layout a transcript record uses; the audit reports it per file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TranscriptForm {
    /// OpenAI chat: a `messages` array.
    #[serde(rename = "openai_chat")]
    OpenAiChat,
    /// ShareGPT (Hermes, LLaMA-Factory): a `conversations` array.
    #[serde(rename = "sharegpt")]
    ShareGpt,
}

impl TranscriptForm {
    /// The name used in reports, the same as the serialized form.
    pub fn name(self) -> &'static str {
        match self {
            TranscriptForm::OpenAiChat => "openai_chat",
            TranscriptForm::ShareGpt => "sharegpt",
        }
    }
}

/// One record read as a sequence of tool calls.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Transcript {
    /// The layout the record uses.
    pub form: TranscriptForm,
    /// The top-level `id` (a string, or a number as text) when present.
    pub id: Option<String>,
    /// Tool schemas the record declares, normalised to OpenAI form
    /// `{"type":"function","function":{"name","description"?,"parameters"?}}` (bare
    /// `{"name","parameters"}` objects get wrapped). Top-level `tools` and legacy `functions`
    /// come first; only when neither is present is a `<tools>` block of the system prompt read.
    pub tools: Vec<Value>,
    /// The tool calls in the order they were made.
    pub calls: Vec<TranscriptCall>,
}

/// One tool call and what it got back.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TranscriptCall {
    /// The called tool's name, as written.
    pub tool: String,
    /// The call's arguments (`null` or missing arguments read as an empty map).
    pub arguments: Map<String, Value>,
    /// The tool's answer: parsed as JSON when the text is JSON, else the text as a
    /// `Value::String`; `None` when never answered.
    pub observation: Option<Value>,
    /// The form the answer was written in (JSON, a Python literal, embedded in text, ...);
    /// `None` when never answered. Reported by the audit, not serialized here.
    #[serde(skip)]
    pub answer_form: Option<AnswerForm>,
    /// For an answer embedded in text, the whole text (an outcome rule written for the text
    /// reads it there); see [`TranscriptCall::take_answer`].
    #[serde(skip)]
    pub answer_text: Option<String>,
    /// Where the call is in the record, as a JSON pointer (`/messages/3/tool_calls/0`,
    /// `/conversations/2`).
    pub at: String,
    /// The call id, when the form has one.
    pub call_id: Option<String>,
}

/// Why a record could not be read; the caller prefixes the file and line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: {message}")]
pub struct TranscriptError {
    /// JSON pointer to the offending value (empty for the record itself).
    pub pointer: String,
    /// What is wrong there.
    pub message: String,
}

fn error(pointer: impl Into<String>, message: impl Into<String>) -> TranscriptError {
    TranscriptError {
        pointer: pointer.into(),
        message: message.into(),
    }
}

const ACCEPTED: &str = "expected an OpenAI chat record (an object with \"messages\") or a \
                        ShareGPT record (an object with \"conversations\")";

/// Whether a record looks like a transcript (has `messages` or `conversations`) — cheap, for
/// form detection by the caller.
pub fn is_transcript(record: &Value) -> bool {
    record
        .as_object()
        .is_some_and(|o| o.contains_key("messages") || o.contains_key("conversations"))
}

/// Reads one record into its tool calls, each paired with its observation (see the module
/// docs for the pairing rules). A record with both keys is read by `messages`.
///
/// # Errors
///
/// Returns the JSON pointer and reason when the record is neither form, its turns are not an
/// array of objects, a call has no name or arguments that are not a JSON object, a
/// `<tool_call>`, `<tool_response>` or `<tools>` block is unterminated or unreadable, a
/// `function_call` turn is not JSON, or declared tools are not an array of named schemas.
pub fn read_transcript(record: &Value) -> Result<Transcript, TranscriptError> {
    let neither = |what: &str| Err(error("", format!("{what}; {ACCEPTED}")));
    let Some(object) = record.as_object() else {
        return neither("record is not a JSON object");
    };
    let (form, key) = if object.contains_key("messages") {
        (TranscriptForm::OpenAiChat, "messages")
    } else if object.contains_key("conversations") {
        (TranscriptForm::ShareGpt, "conversations")
    } else {
        return neither("not a function-calling transcript");
    };
    let base = format!("/{key}");
    let Some(turns) = object.get(key).and_then(Value::as_array) else {
        return Err(error(base, format!("{key} are not an array")));
    };
    let what = if form == TranscriptForm::OpenAiChat {
        "message"
    } else {
        "turn"
    };

    let mut calls = Calls::default();
    let mut system_tools: Option<(String, String)> = None;
    for (index, turn) in turns.iter().enumerate() {
        let at = format!("{base}/{index}");
        let Some(turn) = turn.as_object() else {
            return Err(error(at, format!("{what} is not an object")));
        };
        let content = content_of(turn, form);
        let content_at = content
            .map(|(key, _)| format!("{at}/{key}"))
            .unwrap_or_default();
        let content = content.map(|(_, value)| value);
        match role_of(turn) {
            Role::System => {
                let text = content.and_then(text_of).filter(|t| t.contains("<tools>"));
                if let (None, Some(text)) = (&system_tools, text) {
                    system_tools = Some((content_at, text));
                }
            }
            Role::Assistant => read_assistant(turn, &at, content, &content_at, &mut calls)?,
            Role::FunctionCall => read_function_call_turn(content, &at, &content_at, &mut calls)?,
            Role::Result => read_result(turn, form, content, &content_at, &mut calls)?,
            Role::Other => {}
        }
    }

    let mut tools = declared_tools(object)?;
    if tools.is_none() {
        if let Some((at, text)) = system_tools {
            tools = Some(tools_block(&text, &at)?);
        } else if let Some(text) = object.get("system").and_then(Value::as_str) {
            if text.contains("<tools>") {
                tools = Some(tools_block(text, "/system")?);
            }
        }
    }

    let id = match object.get("id") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    Ok(Transcript {
        form,
        id,
        tools: tools.unwrap_or_default(),
        calls: calls.0,
    })
}

/// The kinds of turn that matter here; everything else (user turns) is skipped.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    System,
    Assistant,
    FunctionCall,
    Result,
    Other,
}

fn role_of(turn: &Map<String, Value>) -> Role {
    let raw = turn
        .get("role")
        .or_else(|| turn.get("from"))
        .and_then(Value::as_str);
    match raw.unwrap_or("").trim().to_ascii_lowercase().as_str() {
        "system" => Role::System,
        "assistant" | "gpt" | "model" => Role::Assistant,
        "function_call" | "tool_call" => Role::FunctionCall,
        "tool" | "function" | "observation" | "ipython" => Role::Result,
        _ => Role::Other,
    }
}

/// The turn's content and its key: ShareGPT uses `value`, OpenAI `content`, and converted
/// datasets mix them, so the form's own key is tried first and the other second.
fn content_of(turn: &Map<String, Value>, form: TranscriptForm) -> Option<(&'static str, &Value)> {
    let keys = match form {
        TranscriptForm::OpenAiChat => ["content", "value"],
        TranscriptForm::ShareGpt => ["value", "content"],
    };
    keys.into_iter()
        .find_map(|key| turn.get(key).map(|value| (key, value)))
}

/// Content as text: a string, or an array of content parts with their texts concatenated.
fn text_of(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts)
            if !parts.is_empty()
                && parts
                    .iter()
                    .all(|p| p.get("type").is_some_and(Value::is_string)) =>
        {
            Some(
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect(),
            )
        }
        _ => None,
    }
}

/// The calls read so far, with the pairing rules of the module docs.
#[derive(Default)]
struct Calls(Vec<TranscriptCall>);

impl Calls {
    fn push(&mut self, call: NamedCall, at: String) {
        self.0.push(TranscriptCall {
            tool: call.name,
            arguments: call.arguments,
            observation: None,
            answer_form: None,
            answer_text: None,
            at,
            call_id: call.id,
        });
    }

    fn unanswered(&self) -> usize {
        self.0.iter().filter(|c| c.observation.is_none()).count()
    }

    fn answer(&mut self, id: Option<&str>, name: Option<&str>, answer: Answer) {
        let open = |c: &&TranscriptCall| c.observation.is_none();
        let slot = match id.filter(|id| self.0.iter().any(|c| c.call_id.as_deref() == Some(*id))) {
            Some(id) => self
                .0
                .iter()
                .position(|c| c.observation.is_none() && c.call_id.as_deref() == Some(id)),
            None => name
                .and_then(|name| self.0.iter().position(|c| open(&c) && c.tool == name))
                .or_else(|| self.0.iter().position(|c| open(&c))),
        };
        if let Some(call) = slot.and_then(|i| self.0.get_mut(i)) {
            call.observation = Some(answer.value);
            call.answer_form = Some(answer.form);
            call.answer_text = answer.text;
        }
    }
}

impl TranscriptCall {
    /// Takes the answer as it was read: value, form and, for an embedded value, the whole
    /// text (an empty answer when never answered); the call keeps no observation.
    pub fn take_answer(&mut self) -> Answer {
        match (self.observation.take(), self.answer_form.take()) {
            (Some(value), Some(form)) => Answer {
                value,
                form,
                text: self.answer_text.take(),
            },
            (observation, _) => Answer::of_value(observation.as_ref()),
        }
    }
}

/// A call as written, before it gets its place in the record.
struct NamedCall {
    name: String,
    arguments: Map<String, Value>,
    id: Option<String>,
}

/// Why a `{"name", "arguments"}` object could not be read; callers word it for their form.
enum CallFault {
    NotObject,
    NoName,
    Arguments(&'static str, String),
}

/// The error for a fault of the call `what` at `at`. Inside a text (`in_text`) nothing deeper
/// can be pointed at, so the message names the call; otherwise bad arguments get their pointer.
fn call_error(fault: CallFault, what: &str, at: &str, in_text: bool) -> TranscriptError {
    match fault {
        CallFault::NotObject => error(at, format!("{what} is not a JSON object")),
        CallFault::NoName => error(at, format!("{what} has no name")),
        CallFault::Arguments(_, m) if in_text => error(at, format!("{what}: {m}")),
        CallFault::Arguments(key, m) => error(format!("{at}/{key}"), m),
    }
}

/// Reads `{"name", "arguments"}` (or `parameters`, which some generators write), with `id`
/// taken from `id_from` (the OpenAI tool call wraps the function object and holds the id).
fn named_call(body: &Value, id_from: &Value) -> Result<NamedCall, CallFault> {
    let object = body.as_object().ok_or(CallFault::NotObject)?;
    let name = match object.get("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => name.clone(),
        _ => return Err(CallFault::NoName),
    };
    let key = if !object.contains_key("arguments") && object.contains_key("parameters") {
        "parameters"
    } else {
        "arguments"
    };
    let arguments = call_arguments(object.get(key)).map_err(|m| CallFault::Arguments(key, m))?;
    Ok(NamedCall {
        name,
        arguments,
        id: id_from.get("id").and_then(id_text),
    })
}

fn id_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A call's arguments as a map: objects as they are, JSON texts (as OpenAI tool calls carry
/// them) parsed, `null`/missing/blank empty; anything else is an error saying what was found.
pub fn call_arguments(value: Option<&Value>) -> Result<Map<String, Value>, String> {
    let parsed;
    let value = match value {
        None | Some(Value::Null) => return Ok(Map::new()),
        Some(Value::String(text)) if text.trim().is_empty() => return Ok(Map::new()),
        Some(Value::String(text)) => {
            parsed = serde_json::from_str::<Value>(text)
                .map_err(|e| format!("arguments are not a JSON object: {e}"))?;
            &parsed
        }
        Some(other) => other,
    };
    match value {
        Value::Object(map) => Ok(map.clone()),
        other => Err(format!(
            "arguments are not a JSON object: found {}",
            kind(other)
        )),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An assistant turn: OpenAI `tool_calls`, else a legacy `function_call`, else Hermes
/// `<tool_call>` blocks in the text (one of the three per turn, as generators write them).
fn read_assistant(
    turn: &Map<String, Value>,
    at: &str,
    content: Option<&Value>,
    content_at: &str,
    calls: &mut Calls,
) -> Result<(), TranscriptError> {
    match turn.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) if list.is_empty() => {}
        Some(Value::Array(list)) => {
            for (index, call) in list.iter().enumerate() {
                let call_at = format!("{at}/tool_calls/{index}");
                // Some converters drop the `function` wrapper; then the call object holds all.
                let (body, body_at) = match call.get("function") {
                    Some(body @ Value::Object(_)) => (body, format!("{call_at}/function")),
                    None | Some(Value::Null) => (call, call_at.clone()),
                    Some(_) => {
                        return Err(error(
                            format!("{call_at}/function"),
                            "function is not an object",
                        ))
                    }
                };
                let named = named_call(body, call)
                    .map_err(|f| call_error(f, "tool call", &body_at, false))?;
                calls.push(named, call_at);
            }
            return Ok(());
        }
        Some(_) => {
            return Err(error(
                format!("{at}/tool_calls"),
                "tool_calls is not an array",
            ))
        }
    }
    if let Some(body) = turn.get("function_call").filter(|v| !v.is_null()) {
        let call_at = format!("{at}/function_call");
        let named = named_call(body, &Value::Null)
            .map_err(|f| call_error(f, "function_call", &call_at, false))?;
        calls.push(named, call_at);
        return Ok(());
    }
    let Some(text) = content.and_then(text_of) else {
        return Ok(());
    };
    let blocks = tagged_blocks(&text, "tool_call").map_err(|m| error(content_at, m))?;
    for (index, block) in blocks.into_iter().enumerate() {
        let n = index + 1;
        // Hermes data is often written with Python's repr (single quotes), hence the fallback.
        let value = serde_json::from_str::<Value>(block)
            .or_else(|e| parse_literal(block, Dialect::Python).map_err(|_| e))
            .map_err(|e| {
                error(
                    content_at,
                    format!("<tool_call> block {n} is not JSON: {e}"),
                )
            })?;
        let what = format!("<tool_call> block {n}");
        let named =
            named_call(&value, &value).map_err(|f| call_error(f, &what, content_at, true))?;
        calls.push(named, at.to_owned());
    }
    Ok(())
}

/// A LLaMA-Factory `function_call` turn: `{"name", "arguments"}` or an array of them.
fn read_function_call_turn(
    content: Option<&Value>,
    at: &str,
    content_at: &str,
    calls: &mut Calls,
) -> Result<(), TranscriptError> {
    let parsed = match content {
        Some(Value::String(text)) => serde_json::from_str::<Value>(text)
            .map_err(|e| error(content_at, format!("function_call turn is not JSON: {e}")))?,
        Some(value @ (Value::Object(_) | Value::Array(_))) => value.clone(),
        _ => return Err(error(at, "function_call turn has no JSON call")),
    };
    let list = match parsed {
        Value::Array(list) => list,
        other => vec![other],
    };
    for (index, body) in list.iter().enumerate() {
        let what = format!("function call {}", index + 1);
        let named = named_call(body, body).map_err(|f| call_error(f, &what, content_at, true))?;
        calls.push(named, at.to_owned());
    }
    Ok(())
}

/// A result turn: `<tool_response>` blocks answer one call each, else the whole content does.
fn read_result(
    turn: &Map<String, Value>,
    form: TranscriptForm,
    content: Option<&Value>,
    content_at: &str,
    calls: &mut Calls,
) -> Result<(), TranscriptError> {
    let id = turn.get("tool_call_id").and_then(id_text);
    let name = turn.get("name").and_then(Value::as_str);
    let text = content.and_then(text_of);
    if let Some(text) = text.as_deref().filter(|t| t.contains("<tool_response>")) {
        let blocks = tagged_blocks(text, "tool_response").map_err(|m| error(content_at, m))?;
        let single = blocks.len() == 1;
        for block in blocks {
            let (block_id, block_name, observation) = response_block(block);
            let block_id = block_id.or_else(|| id.clone().filter(|_| single));
            calls.answer(block_id.as_deref(), block_name.as_deref(), observation);
        }
        return Ok(());
    }
    let observation = match (text, content) {
        (Some(text), _) => read_answer_text(&text),
        (None, value) => Answer::of_value(value),
    };
    let open = calls.unanswered();
    match observation.value {
        Value::Array(items)
            if form == TranscriptForm::ShareGpt
                && id.is_none()
                && open > 1
                && items.len() == open =>
        {
            for item in items {
                let answer = match item {
                    Value::String(text) => read_answer_text(&text),
                    value => Answer {
                        value,
                        form: observation.form,
                        text: None,
                    },
                };
                calls.answer(None, None, answer);
            }
        }
        value => calls.answer(
            id.as_deref(),
            name,
            Answer {
                value,
                ..observation
            },
        ),
    }
    Ok(())
}

/// One `<tool_response>` block: its id, tool name and observation, unwrapping Hermes'
/// `{"name": ..., "content": ...}` envelope (also with a `tool_call_id`/`id`).
fn response_block(block: &str) -> (Option<String>, Option<String>, Answer) {
    let answer = read_answer_text(block);
    if let Value::Object(map) = &answer.value {
        let envelope = map.contains_key("content")
            && map.get("name").is_some_and(Value::is_string)
            && map
                .keys()
                .all(|k| matches!(k.as_str(), "name" | "content" | "tool_call_id" | "id"));
        if envelope {
            let id = map
                .get("tool_call_id")
                .or_else(|| map.get("id"))
                .and_then(id_text);
            let name = map.get("name").and_then(Value::as_str).map(str::to_owned);
            let observation = match map.get("content") {
                Some(Value::String(text)) => read_answer_text(text),
                Some(Value::Null) | None => Answer::empty(),
                Some(other) => Answer {
                    value: other.clone(),
                    form: answer.form,
                    text: None,
                },
            };
            return (id, name, observation);
        }
    }
    (None, None, answer)
}

/// The trimmed insides of every `<tag>...</tag>` block, in order.
fn tagged_blocks<'t>(text: &'t str, tag: &str) -> Result<Vec<&'t str>, String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let Some(end) = after.find(&close) else {
            return Err(format!("unterminated <{tag}> block (no {close})"));
        };
        blocks.push(after[..end].trim());
        rest = &after[end + close.len()..];
    }
    Ok(blocks)
}

/// Top-level `tools` and legacy `functions`, or `None` when the record declares neither.
fn declared_tools(object: &Map<String, Value>) -> Result<Option<Vec<Value>>, TranscriptError> {
    let mut found: Option<Vec<Value>> = None;
    for key in ["tools", "functions"] {
        let at = format!("/{key}");
        let list = match object.get(key) {
            None | Some(Value::Null) => continue,
            Some(Value::String(text)) if text.trim().is_empty() => Vec::new(),
            // LLaMA-Factory stores the list as a JSON text, where entries have no pointer.
            Some(Value::String(text)) => {
                let parsed = serde_json::from_str::<Value>(text)
                    .map_err(|e| error(&at, format!("{key} are not a JSON array: {e}")))?;
                tool_items(&parsed).map_err(|fault| error(&at, in_text(fault)))?
            }
            Some(value) => tool_items(value).map_err(|(index, m)| match index {
                Some(i) => error(format!("{at}/{i}"), m),
                None => error(&at, m),
            })?,
        };
        found.get_or_insert_with(Vec::new).extend(list);
    }
    Ok(found)
}

/// Normalised schemas of a list (or a single schema); a fault carries the entry's index.
fn tool_items(parsed: &Value) -> Result<Vec<Value>, (Option<usize>, String)> {
    match parsed {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, t)| normalize_tool(t).map_err(|m| (Some(i), m)))
            .collect(),
        Value::Object(_) => normalize_tool(parsed)
            .map(|t| vec![t])
            .map_err(|m| (None, m)),
        other => Err((
            None,
            format!("tools are not an array: found {}", kind(other)),
        )),
    }
}

/// A schema fault inside a text, where no pointer can reach: the message numbers the entry.
fn in_text((index, message): (Option<usize>, String)) -> String {
    match index {
        Some(i) => format!("tool {}: {message}", i + 1),
        None => message,
    }
}

/// The `<tools>` blocks of a system prompt: a JSON (or Python-repr) array or object, or one
/// JSON object per line as the Hermes prompt writes them.
fn tools_block(text: &str, at: &str) -> Result<Vec<Value>, TranscriptError> {
    let mut tools = Vec::new();
    for block in tagged_blocks(text, "tools").map_err(|m| error(at, m))? {
        let whole = serde_json::from_str::<Value>(block)
            .or_else(|e| parse_literal(block, Dialect::Python).map_err(|_| e));
        let parsed = match whole {
            Ok(value) => value,
            Err(e) => {
                let lines: Result<Vec<Value>, _> = block
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(serde_json::from_str::<Value>)
                    .collect();
                Value::Array(lines.map_err(|_| {
                    error(
                        at,
                        format!("<tools> block is neither JSON nor one JSON object per line: {e}"),
                    )
                })?)
            }
        };
        let items = tool_items(&parsed)
            .map_err(|fault| error(at, format!("<tools> block: {}", in_text(fault))))?;
        tools.extend(items);
    }
    Ok(tools)
}

/// One schema in OpenAI form: `{"type": "function", "function": {...}}` keeps its function
/// object, a bare `{"name", ...}` object becomes that function object, a JSON text is parsed.
fn normalize_tool(tool: &Value) -> Result<Value, String> {
    let parsed;
    let tool = match tool {
        Value::String(text) => {
            parsed = serde_json::from_str::<Value>(text)
                .map_err(|e| format!("tool schema is not JSON: {e}"))?;
            &parsed
        }
        other => other,
    };
    let Some(object) = tool.as_object() else {
        return Err(format!(
            "tool schema is not an object: found {}",
            kind(tool)
        ));
    };
    let function = match object.get("function") {
        Some(function @ Value::Object(_)) => function,
        _ => tool,
    };
    match function.get("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => {}
        _ => return Err("tool schema has no name".to_owned()),
    }
    let mut wrapped = Map::new();
    wrapped.insert("type".to_owned(), Value::String("function".to_owned()));
    wrapped.insert("function".to_owned(), function.clone());
    Ok(Value::Object(wrapped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The calls as JSON, compact to compare (`None` and `Some(Null)` both show as `null`, so
    /// tests that need the difference check it separately).
    fn calls_of(record: Value) -> (Transcript, Value) {
        let t = read_transcript(&record).unwrap();
        let calls = serde_json::to_value(&t.calls).unwrap();
        (t, calls)
    }

    #[test]
    fn openai_parallel_calls_answered_out_of_order_by_id() {
        let (t, calls) = calls_of(json!({
            "id": 17,
            "tools": [
                {"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}},
                {"name": "get_time", "parameters": {"type": "object"}}
            ],
            "messages": [
                {"role": "system", "content": "be helpful"},
                {"role": "user", "content": "weather and time?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": {"tz": "CET"}}}
                ]},
                {"role": "tool", "tool_call_id": "c2", "content": [
                    {"type": "text", "text": "{\"time\": "}, {"type": "text", "text": "\"12:00\"}"}
                ]},
                {"role": "Tool", "tool_call_id": "c1", "content": "  sunny \n"},
                {"role": "assistant", "content": "Sunny, noon."}
            ]
        }));
        assert_eq!(t.form, TranscriptForm::OpenAiChat);
        assert_eq!(t.form.name(), "openai_chat");
        assert_eq!(serde_json::to_value(t.form).unwrap(), json!("openai_chat"));
        assert_eq!(t.id.as_deref(), Some("17"));
        assert_eq!(
            Value::Array(t.tools),
            json!([
                {"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}},
                {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
            ])
        );
        assert_eq!(
            calls,
            json!([
                {"tool": "get_weather", "arguments": {"city": "Paris"}, "observation": "sunny", "at": "/messages/2/tool_calls/0", "call_id": "c1"},
                {"tool": "get_time", "arguments": {"tz": "CET"}, "observation": {"time": "12:00"}, "at": "/messages/2/tool_calls/1", "call_id": "c2"}
            ])
        );
    }

    #[test]
    fn openai_legacy_unknown_id_duplicate_and_unanswered() {
        let (t, calls) = calls_of(json!({
            "functions": [{"name": "lookup", "parameters": {}}],
            "messages": [
                {"role": "user", "content": "?"},
                {"role": "assistant", "function_call": {"name": "lookup", "arguments": "{\"q\": 1}"}},
                {"role": "function", "name": "lookup", "content": "42"},
                {"role": "assistant", "tool_calls": [
                    {"id": "a", "function": {"name": "f", "arguments": null}},
                    {"id": "b", "function": {"name": "g"}},
                    {"id": "c", "function": {"name": "h", "arguments": ""}}
                ]},
                {"role": "tool", "tool_call_id": "zzz", "content": null},
                {"role": "tool", "tool_call_id": "a", "content": "again"},
                {"role": "tool", "content": "\"quoted\""}
            ]
        }));
        assert_eq!(t.id, None);
        assert_eq!(
            t.tools,
            vec![json!({"type": "function", "function": {"name": "lookup", "parameters": {}}})]
        );
        // Unknown id: the oldest unanswered call ("a", with a null observation); the second
        // answer to "a" is a duplicate and dropped; the id-less one goes to "b"; "c" never answered.
        assert_eq!(
            calls,
            json!([
                {"tool": "lookup", "arguments": {"q": 1}, "observation": 42, "at": "/messages/1/function_call", "call_id": null},
                {"tool": "f", "arguments": {}, "observation": null, "at": "/messages/3/tool_calls/0", "call_id": "a"},
                {"tool": "g", "arguments": {}, "observation": "quoted", "at": "/messages/3/tool_calls/1", "call_id": "b"},
                {"tool": "h", "arguments": {}, "observation": null, "at": "/messages/3/tool_calls/2", "call_id": "c"}
            ])
        );
        assert_eq!(t.calls[1].observation, Some(Value::Null));
        assert_eq!(t.calls[3].observation, None);
    }

    #[test]
    fn hermes_blocks_pair_in_order() {
        let (t, calls) = calls_of(json!({
            "id": "h-1",
            "conversations": [
                {"from": "system", "value": "You are a function calling AI model. <tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_stock\", \"parameters\": {}}}\n{\"name\": \"get_news\", \"description\": \"News\", \"parameters\": {}}\n</tools> Use them."},
                {"from": "human", "value": "Apple price and tech news?"},
                {"from": "gpt", "value": "<tool_call>\n{\"name\": \"get_stock\", \"arguments\": {\"symbol\": \"AAPL\"}}\n</tool_call>\n<tool_call>\n{'name': 'get_news', 'arguments': {'topic': 'tech'}}\n</tool_call>"},
                {"from": "tool", "value": "<tool_response>\n{\"name\": \"get_stock\", \"content\": {\"price\": 190.5}}\n</tool_response>\n<tool_response>\nNo news today.\n</tool_response>"},
                {"from": "gpt", "value": "AAPL is 190.5; no news."}
            ]
        }));
        assert_eq!(t.form, TranscriptForm::ShareGpt);
        assert_eq!(serde_json::to_value(t.form).unwrap(), json!(t.form.name()));
        assert_eq!(t.id.as_deref(), Some("h-1"));
        assert_eq!(
            Value::Array(t.tools),
            json!([
                {"type": "function", "function": {"name": "get_stock", "parameters": {}}},
                {"type": "function", "function": {"name": "get_news", "description": "News", "parameters": {}}}
            ])
        );
        assert_eq!(
            calls,
            json!([
                {"tool": "get_stock", "arguments": {"symbol": "AAPL"}, "observation": {"price": 190.5}, "at": "/conversations/2", "call_id": null},
                {"tool": "get_news", "arguments": {"topic": "tech"}, "observation": "No news today.", "at": "/conversations/2", "call_id": null}
            ])
        );
    }

    #[test]
    fn llama_factory_turns_with_string_tools() {
        let (t, calls) = calls_of(json!({
            "conversations": [
                {"from": "human", "value": "1+2, then 2*3 and -5"},
                {"from": "function_call", "value": "{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}"},
                {"from": "observation", "value": "{\"sum\": 3}"},
                {"from": "function_call", "value": "[{\"name\": \"mul\", \"arguments\": {\"a\": 2}}, {\"name\": \"neg\", \"arguments\": \"{\\\"a\\\": 5}\"}]"},
                {"from": "observation", "value": "[6, \"-5\"]"},
                {"from": "gpt", "value": "3, 6, -5"}
            ],
            "tools": "[{\"name\": \"add\", \"description\": \"Add\", \"parameters\": {\"type\": \"object\"}}]"
        }));
        assert_eq!(
            t.tools,
            vec![
                json!({"type": "function", "function": {"name": "add", "description": "Add", "parameters": {"type": "object"}}})
            ]
        );
        assert_eq!(
            calls,
            json!([
                {"tool": "add", "arguments": {"a": 1, "b": 2}, "observation": {"sum": 3}, "at": "/conversations/1", "call_id": null},
                {"tool": "mul", "arguments": {"a": 2}, "observation": 6, "at": "/conversations/3", "call_id": null},
                {"tool": "neg", "arguments": {"a": 5}, "observation": -5, "at": "/conversations/3", "call_id": null}
            ])
        );
    }

    #[test]
    fn answers_keep_their_form_and_text() {
        let record = json!({"messages": [
            {"role": "assistant", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
                {"id": "c", "type": "function", "function": {"name": "h", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "{'success': False}"},
            {"role": "tool", "tool_call_id": "b", "content": "Error: {'code': 7}"},
        ]});
        let mut t = read_transcript(&record).unwrap();
        let a = t.calls[0].take_answer();
        assert_eq!(
            (a.value, a.form, a.text),
            (json!({"success": false}), AnswerForm::PythonLiteral, None)
        );
        let b = t.calls[1].take_answer();
        assert_eq!(
            (b.value, b.form, b.text.as_deref()),
            (
                json!({"code": 7}),
                AnswerForm::Embedded,
                Some("Error: {'code': 7}")
            )
        );
        assert_eq!(t.calls[2].take_answer().form, AnswerForm::Empty);
    }

    #[test]
    fn one_observation_for_two_calls_goes_to_the_first() {
        let (t, calls) = calls_of(json!({"conversations": [
            {"role": "user", "content": "go"},
            {"role": "FUNCTION_CALL", "content": [{"name": "a"}, {"name": "b", "arguments": {"x": true}}]},
            {"role": "observation", "content": "ok"},
            {"role": "assistant", "content": "done"}
        ]}));
        assert!(t.tools.is_empty());
        assert_eq!(
            calls,
            json!([
                {"tool": "a", "arguments": {}, "observation": "ok", "at": "/conversations/1", "call_id": null},
                {"tool": "b", "arguments": {"x": true}, "observation": null, "at": "/conversations/1", "call_id": null}
            ])
        );
        assert_eq!(t.calls[1].observation, None);
    }

    #[test]
    fn errors_point_at_the_offending_value() {
        let call = |arguments: Value| {
            json!({"messages": [
                {"role": "user", "content": "?"},
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "?"},
                {"role": "assistant", "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": arguments}}]}
            ]})
        };
        let gpt = |value: &str| json!({"conversations": [{"from": "human", "value": "?"}, {"from": "gpt", "value": value}]});
        let args = "/messages/3/tool_calls/0/function/arguments";
        let block = "/conversations/1/value";
        let cases = [
            (call(json!("{oops")), args, "arguments are not a JSON object: key must be a string at line 1"),
            (call(json!("[1]")), args, "arguments are not a JSON object: found an array"),
            (call(json!(3)), args, "arguments are not a JSON object: found a number"),
            (json!({"messages": [{"role": "assistant", "function_call": {"name": "f", "arguments": "1"}}]}),
             "/messages/0/function_call/arguments", "arguments are not a JSON object: found a number"),
            (json!({"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]}),
             "/messages/0/tool_calls/0/function", "tool call has no name"),
            (gpt("<tool_call>{\"arguments\": {}}</tool_call>"), block, "<tool_call> block 1 has no name"),
            (gpt("<tool_call>\n{\"name\": \"f\", \n</tool_call>"), block, "<tool_call> block 1 is not JSON: "),
            (gpt("<tool_call>{\"name\": \"f\"}</tool_call> <tool_call>\n{\"name\": \"g\"}"), block,
             "unterminated <tool_call> block (no </tool_call>)"),
            (gpt("<tool_call>[1]</tool_call>"), block, "<tool_call> block 1 is not a JSON object"),
            (gpt("<tool_call>{\"name\": \"f\", \"arguments\": \"x\"}</tool_call>"), block,
             "<tool_call> block 1: arguments are not a JSON object: expected value"),
            (json!({"conversations": [{"from": "function_call", "value": "{\"name\": \"\"}"}]}),
             "/conversations/0/value", "function call 1 has no name"),
            (json!({"messages": {"role": "user"}}), "/messages", "messages are not an array"),
            (json!({"conversations": "hi"}), "/conversations", "conversations are not an array"),
            (json!({"messages": [{"role": "user"}, "hi"]}), "/messages/1", "message is not an object"),
            (json!({"conversations": [7]}), "/conversations/0", "turn is not an object"),
            (json!({"tools": [{"description": "x"}], "messages": []}), "/tools/0", "tool schema has no name"),
            (json!({"tools": "[{\"name\": 1}]", "messages": []}), "/tools", "tool 1: tool schema has no name"),
            (json!({"tools": "[{", "messages": []}), "/tools", "tools are not a JSON array: "),
            (json!([1, 2]), "", "record is not a JSON object; expected an OpenAI chat record"),
            (json!({"prompt": "x"}), "", "not a function-calling transcript; expected an OpenAI chat \
              record (an object with \"messages\") or a ShareGPT record (an object with \"conversations\")"),
        ];
        for (record, pointer, message) in cases {
            let e = read_transcript(&record).unwrap_err();
            assert_eq!(e.to_string(), format!("{}: {}", e.pointer, e.message));
            assert_eq!(e.pointer, pointer, "{e}");
            assert!(e.message.starts_with(message), "{e}");
        }
    }

    #[test]
    fn is_transcript_looks_only_at_the_keys() {
        assert!(is_transcript(&json!({"messages": []})));
        assert!(is_transcript(&json!({"conversations": null})));
        assert!(!is_transcript(&json!({"prompt": "x"})));
        assert!(!is_transcript(&json!([{"messages": []}])));
        assert!(!is_transcript(&json!("messages")));
    }
}

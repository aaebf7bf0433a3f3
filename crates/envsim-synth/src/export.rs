//! Training formats of synthesized trajectories (pure renderers; `envsim curate` writes them):
//!
//! - [`openai_chat`]: OpenAI chat fine-tuning lines, `{"messages", "tools"}`, assistant turns
//!   with `tool_calls` (arguments as JSON text) and `tool` answers with their `tool_call_id`;
//!   [`openai_chat_masking_deliberate_errors`] weights 0 the turns that made a call an
//!   error-path task made to fail;
//! - [`sharegpt`]: LLaMA-Factory's ShareGPT function-calling layout: `conversations` of
//!   `human` / `function_call` / `observation` / `gpt` turns, the `system` prompt and the `tools`
//!   as JSON text (parallel calls become consecutive call/answer pairs, which that layout needs);
//! - [`hermes`]: the Hermes function-calling layout: `system` with the tools in `<tools>`,
//!   `gpt` turns with `<tool_call>` blocks, `tool` turns with `<tool_response>` blocks;
//! - [`dataset_info`]: LLaMA-Factory's `dataset_info.json` entry for the ShareGPT file;
//! - [`rl_episode`]: an RL episode: the initial state, the task, the environment reference and,
//!   when the code was there to replay it, a checker of the final state.

use serde_json::{json, Map, Value};

fn messages(record: &Value) -> &[Value] {
    record
        .get("messages")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn tools(record: &Value) -> Value {
    record.get("tools").cloned().unwrap_or_else(|| json!([]))
}

/// The function schemas alone (`{"name", "description", "parameters"}`), as the ShareGPT and
/// Hermes layouts list them.
fn functions(record: &Value) -> Vec<Value> {
    tools(record)
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t.get("function").unwrap_or(t).clone())
        .collect()
}

/// An OpenAI chat fine-tuning line.
pub fn openai_chat(record: &Value) -> Value {
    let messages: Vec<Value> = messages(record)
        .iter()
        .map(|m| {
            let mut m = m.clone();
            if let Some(map) = m.as_object_mut() {
                // Tool answers carry their call id; the tool's name is not part of the format.
                if map.get("role").and_then(Value::as_str) == Some("tool") {
                    map.remove("name");
                }
                if map
                    .get("tool_calls")
                    .is_some_and(|c| c.as_array().is_some_and(Vec::is_empty))
                {
                    map.remove("tool_calls");
                }
            }
            m
        })
        .collect();
    json!({"messages": messages, "tools": tools(record)})
}

/// An OpenAI chat fine-tuning line whose assistant turns that made a deliberate error (the
/// record's `deliberate_errors`: calls an error-path task made to fail) carry `"weight": 0`,
/// so fine-tuning trains on the rest of the conversation but not on making those calls.
pub fn openai_chat_masking_deliberate_errors(record: &Value) -> Value {
    let mut line = openai_chat(record);
    let marked: Vec<usize> = record
        .get("deliberate_errors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("message")?.as_u64())
        .filter_map(|k| usize::try_from(k).ok())
        .collect();
    if let Some(messages) = line.get_mut("messages").and_then(Value::as_array_mut) {
        for k in marked {
            if let Some(Value::Object(m)) = messages.get_mut(k) {
                if m.get("role").and_then(Value::as_str) == Some("assistant") {
                    m.insert("weight".into(), json!(0));
                }
            }
        }
    }
    line
}

fn call_parts(call: &Value) -> (String, Value) {
    let f = call.get("function").unwrap_or(call);
    let name = f
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let arguments = match f.get("arguments") {
        Some(Value::String(text)) => {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
        }
        Some(other) => other.clone(),
        None => json!({}),
    };
    (name, arguments)
}

fn content(m: &Value) -> String {
    m.get("content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// A LLaMA-Factory ShareGPT function-calling line.
pub fn sharegpt(record: &Value) -> Value {
    let mut system = String::new();
    let mut turns: Vec<Value> = Vec::new();
    let all = messages(record);
    let answer_of = |id: &str| {
        all.iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .map(content)
            .unwrap_or_default()
    };
    for m in all {
        match m.get("role").and_then(Value::as_str) {
            Some("system") => system = content(m),
            Some("user") => turns.push(json!({"from": "human", "value": content(m)})),
            Some("assistant") => {
                let calls = m.get("tool_calls").and_then(Value::as_array);
                match calls {
                    Some(calls) if !calls.is_empty() => {
                        for call in calls {
                            let (name, arguments) = call_parts(call);
                            turns.push(json!({"from": "function_call",
                                "value": json!({"name": name, "arguments": arguments}).to_string()}));
                            let id = call.get("id").and_then(Value::as_str).unwrap_or("");
                            turns.push(json!({"from": "observation", "value": answer_of(id)}));
                        }
                    }
                    _ => turns.push(json!({"from": "gpt", "value": content(m)})),
                }
            }
            _ => {}
        }
    }
    json!({
        "conversations": turns,
        "system": system,
        "tools": Value::Array(functions(record)).to_string(),
    })
}

/// A Hermes function-calling line.
pub fn hermes(record: &Value) -> Value {
    let mut turns: Vec<Value> = Vec::new();
    let tool_list = Value::Array(functions(record)).to_string();
    let mut system_seen = false;
    for m in messages(record) {
        match m.get("role").and_then(Value::as_str) {
            Some("system") => {
                system_seen = true;
                turns.push(json!({"from": "system", "value": format!(
                    "{}\n\nYou may call functions. The functions you can call are in <tools></tools> as JSON Schemas:\n<tools>{tool_list}</tools>\nFor each call, write a JSON object with the function's name and arguments in <tool_call></tool_call> tags.",
                    content(m)
                )}));
            }
            Some("user") => turns.push(json!({"from": "human", "value": content(m)})),
            Some("assistant") => {
                let calls = m.get("tool_calls").and_then(Value::as_array);
                let mut text = content(m);
                for call in calls.into_iter().flatten() {
                    let (name, arguments) = call_parts(call);
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&format!(
                        "<tool_call>\n{}\n</tool_call>",
                        json!({"name": name, "arguments": arguments})
                    ));
                }
                turns.push(json!({"from": "gpt", "value": text}));
            }
            Some("tool") => {
                let name = m.get("name").and_then(Value::as_str).unwrap_or("");
                let body = json!({"name": name, "content": content(m)});
                // Consecutive answers of one turn's parallel calls share one tool turn.
                match turns.last_mut() {
                    Some(last) if last["from"] == "tool" => {
                        let joined = format!(
                            "{}\n<tool_response>\n{body}\n</tool_response>",
                            last["value"].as_str().unwrap_or("")
                        );
                        last["value"] = Value::String(joined);
                    }
                    _ => turns.push(json!({"from": "tool",
                        "value": format!("<tool_response>\n{body}\n</tool_response>")})),
                }
            }
            _ => {}
        }
    }
    if !system_seen {
        turns.insert(
            0,
            json!({"from": "system", "value": format!("The functions you can call are in <tools></tools>:\n<tools>{tool_list}</tools>")}),
        );
    }
    json!({"id": record.get("id").cloned().unwrap_or(Value::Null), "conversations": turns})
}

/// LLaMA-Factory's `dataset_info.json` for a ShareGPT function-calling file named `file`
/// registered as `name`.
pub fn dataset_info(name: &str, file: &str) -> Value {
    let mut info = Map::new();
    info.insert(
        name.to_owned(),
        json!({
            "file_name": file,
            "formatting": "sharegpt",
            "columns": {"messages": "conversations", "system": "system", "tools": "tools"},
            "tags": {
                "role_tag": "from", "content_tag": "value",
                "user_tag": "human", "assistant_tag": "gpt",
                "observation_tag": "observation", "function_tag": "function_call",
                "system_tag": "system"
            }
        }),
    );
    Value::Object(info)
}

/// An RL episode: what an agent starts from and how its final state is checked. The checker
/// is the one synthesis made from the executor's runs of the trajectory's calls under several
/// seeds and clocks (`truth.checker`: what they left alike by value, the rest by kind and
/// relation); records synthesized before it was made have only one run, whose every change
/// is checked by value. It exists only for records synthesized where the code was there
/// (`truth`); `checker` is `null` otherwise, with the reason.
pub fn rl_episode(record: &Value) -> Value {
    let initial = record.get("initial_state").cloned().unwrap_or(Value::Null);
    let (checker, why) = match record.get("truth").filter(|t| t.is_object()) {
        Some(truth) if truth.get("checker").is_some_and(Value::is_object) => {
            (truth["checker"].clone(), Value::Null)
        }
        Some(truth) => {
            let expected = truth
                .get("replay_final_state")
                .or_else(|| record.get("final_state"))
                .unwrap_or(&Value::Null);
            (
                json!(envsim_core::checker::StateChecker::from_final(&initial, expected)),
                Value::Null,
            )
        }
        None => (
            Value::Null,
            json!("synthesized without the environment's code: no executed final state to check against"),
        ),
    };
    let task = record.get("task").cloned().unwrap_or(Value::Null);
    json!({
        "id": record.get("id").cloned().unwrap_or(Value::Null),
        "env": record.get("env").cloned().unwrap_or(Value::Null),
        "environment": {
            "package": record.get("env").cloned().unwrap_or(Value::Null),
            "state": task.get("state").cloned().unwrap_or(Value::Null),
        },
        "instruction": task.get("instruction").cloned().unwrap_or(Value::Null),
        "turns": task.get("turns").cloned().unwrap_or_else(|| json!([])),
        "initial_state": initial,
        "tools": tools(record),
        "reference_calls": record.get("steps").and_then(Value::as_array).map(|steps| {
            steps.iter().map(|s| s.get("action").cloned().unwrap_or(Value::Null)).collect::<Vec<_>>()
        }),
        "checker": checker,
        "checker_missing_because": why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Value {
        json!({
            "id": "t1", "env": "desk",
            "task": {"instruction": "Close T1.", "state": "00.json"},
            "tools": [{"type": "function", "function": {"name": "close_ticket", "parameters": {"type": "object"}}},
                      {"type": "function", "function": {"name": "get_ticket", "parameters": {"type": "object"}}}],
            "messages": [
                {"role": "system", "content": "You run a desk."},
                {"role": "user", "content": "Close T1."},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c0", "type": "function", "function": {"name": "close_ticket", "arguments": "{\"ticket_id\":\"T1\"}"}},
                    {"id": "c1", "type": "function", "function": {"name": "get_ticket", "arguments": "{\"ticket_id\":\"T1\"}"}}]},
                {"role": "tool", "tool_call_id": "c0", "name": "close_ticket", "content": "{\"success\":true}"},
                {"role": "tool", "tool_call_id": "c1", "name": "get_ticket", "content": "{\"status\":\"closed\"}"},
                {"role": "assistant", "content": "Closed."}
            ],
            "initial_state": {"tickets": {"T1": {"status": "open"}}},
            "final_state": {"tickets": {"T1": {"status": "closed"}}},
            "steps": [{"action": {"name": "close_ticket", "arguments": {"ticket_id": "T1"}}},
                      {"action": {"name": "get_ticket", "arguments": {"ticket_id": "T1"}}}],
            "truth": {"final_state_equal": true}
        })
    }

    #[test]
    fn openai_lines_keep_calls_and_drop_the_tool_name() {
        let line = openai_chat(&record());
        assert_eq!(
            line["messages"][3],
            json!({"role": "tool", "tool_call_id": "c0", "content": "{\"success\":true}"})
        );
        assert_eq!(
            line["messages"][2]["tool_calls"][1]["function"]["name"],
            "get_ticket"
        );
        assert_eq!(line["tools"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn sharegpt_pairs_each_call_with_its_answer() {
        let line = sharegpt(&record());
        let froms: Vec<&str> = line["conversations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["from"].as_str().unwrap())
            .collect();
        assert_eq!(
            froms,
            [
                "human",
                "function_call",
                "observation",
                "function_call",
                "observation",
                "gpt"
            ]
        );
        assert_eq!(
            line["conversations"][1]["value"],
            "{\"name\":\"close_ticket\",\"arguments\":{\"ticket_id\":\"T1\"}}"
        );
        assert_eq!(line["conversations"][4]["value"], "{\"status\":\"closed\"}");
        assert_eq!(line["system"], "You run a desk.");
        let tools: Value = serde_json::from_str(line["tools"].as_str().unwrap()).unwrap();
        assert_eq!(tools[0]["name"], "close_ticket");
        let info = dataset_info("envsim", "sharegpt.jsonl");
        assert_eq!(info["envsim"]["formatting"], "sharegpt");
        assert_eq!(info["envsim"]["tags"]["function_tag"], "function_call");
    }

    #[test]
    fn hermes_wraps_calls_and_answers_in_tags() {
        let line = hermes(&record());
        let turns = line["conversations"].as_array().unwrap();
        let froms: Vec<&str> = turns.iter().map(|t| t["from"].as_str().unwrap()).collect();
        assert_eq!(froms, ["system", "human", "gpt", "tool", "gpt"]);
        assert!(turns[0]["value"]
            .as_str()
            .unwrap()
            .contains("<tools>[{\"name\":\"close_ticket\""));
        let call = turns[2]["value"].as_str().unwrap();
        assert_eq!(call.matches("<tool_call>").count(), 2);
        let answers = turns[3]["value"].as_str().unwrap();
        assert_eq!(answers.matches("<tool_response>").count(), 2);
        assert!(answers.contains("\"name\":\"get_ticket\""));
    }

    #[test]
    fn rl_episodes_check_the_replayed_final_state() {
        let episode = rl_episode(&record());
        assert_eq!(
            episode["checker"]["expect"],
            json!({"/tickets/T1/status": "closed"})
        );
        assert_eq!(
            episode["environment"],
            json!({"package": "desk", "state": "00.json"})
        );
        assert_eq!(episode["reference_calls"][0]["name"], "close_ticket");
        // When the simulated final state was wrong, the checker follows the executor's.
        let mut r = record();
        r["truth"] = json!({"final_state_equal": false,
            "replay_final_state": {"tickets": {"T1": {"status": "open"}, "T2": {}}}});
        assert_eq!(
            rl_episode(&r)["checker"]["expect"],
            json!({"/tickets/T2": {}})
        );
        let mut r = record();
        r["truth"] = Value::Null;
        let e = rl_episode(&r);
        assert!(e["checker"].is_null());
        assert!(e["checker_missing_because"]
            .as_str()
            .unwrap()
            .contains("without the environment's code"));
    }
}

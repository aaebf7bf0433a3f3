//! OpenAI Batch API files: export the evaluation requests as a batch input JSONL, and read a
//! batch output (or error) JSONL back into per-sample predictions, so users with offline batch
//! inference can score without the runner.
//!
//! Input line: `{"custom_id": <sample id>, "method": "POST", "url": "/v1/chat/completions",
//! "body": <the same body the runner sends>}`. Output line: `{"custom_id": …, "response":
//! {"status_code": 200, "body": <chat completion>}, "error": null}` or with `"error": {"code",
//! "message"}` / a non-200 `status_code`.

use crate::config::{sha256_hex, Decoding};
use crate::openai::{parse_completion, request_body};
use envsim_core::prelude::*;
use envsim_core::prompt::Template;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};

/// The endpoint every exported line targets.
pub const BATCH_URL: &str = "/v1/chat/completions";

/// Renders the batch input file for a benchmark (one line per sample, benchmark order).
/// Fails when two samples share an id (the batch API needs unique `custom_id`s).
pub fn export_requests(
    transitions: &[Transition],
    model: &str,
    template: Template,
    decoding: &Decoding,
) -> Result<String, String> {
    let mut seen = HashSet::new();
    let mut out = String::new();
    for t in transitions {
        if !seen.insert(t.id.as_str()) {
            return Err(format!(
                "sample id {:?} occurs twice in the benchmark; batch custom_ids must be unique",
                t.id
            ));
        }
        let prompt = template.render_eval(&t.env_code, &t.config_before, &t.action);
        let line = json!({
            "custom_id": t.id,
            "method": "POST",
            "url": BATCH_URL,
            "body": request_body(model, &prompt, decoding),
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    Ok(out)
}

/// An exported request file, read back.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchRequests {
    /// The model named in the bodies (all lines must agree).
    pub model: String,
    /// SHA-256 of the file.
    pub sha256: String,
    /// Request body text per custom_id.
    pub bodies: HashMap<String, String>,
}

fn located(source: &str, line: usize, message: impl std::fmt::Display) -> String {
    format!("{source}:{line}: {message}")
}

/// One JSON Lines line with its `custom_id` (`None` for a blank line).
fn line_with_id(line: &str, source: &str, n: usize) -> Result<Option<(Value, String)>, String> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let value: Value =
        serde_json::from_str(line).map_err(|e| located(source, n, format!("not JSON: {e}")))?;
    let id = value
        .get("custom_id")
        .and_then(Value::as_str)
        .ok_or_else(|| located(source, n, "field `custom_id` is missing or not a string"))?
        .to_owned();
    Ok(Some((value, id)))
}

/// Reads a batch input file written by [`export_requests`] (or by hand, same shape).
pub fn parse_requests(bytes: &[u8], source: &str) -> Result<BatchRequests, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("{source}: not UTF-8: {e}"))?;
    let mut model: Option<String> = None;
    let mut bodies = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let Some((value, id)) = line_with_id(line, source, n)? else {
            continue;
        };
        let id = id.as_str();
        let body = value
            .get("body")
            .filter(|b| b.is_object())
            .ok_or_else(|| located(source, n, "field `body` is missing or not an object"))?;
        let line_model = body
            .get("model")
            .and_then(Value::as_str)
            .ok_or_else(|| located(source, n, "field `body.model` is missing or not a string"))?;
        match &model {
            None => model = Some(line_model.to_owned()),
            Some(m) if m != line_model => {
                return Err(located(
                    source,
                    n,
                    format!("model {line_model:?} differs from {m:?} on earlier lines"),
                ))
            }
            Some(_) => {}
        }
        if bodies.insert(id.to_owned(), body.to_string()).is_some() {
            return Err(located(source, n, format!("custom_id {id:?} occurs twice")));
        }
    }
    Ok(BatchRequests {
        model: model.ok_or_else(|| format!("{source}: no requests"))?,
        sha256: sha256_hex(bytes),
        bodies,
    })
}

/// One answered request.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchAnswer {
    /// The prediction (raw completion text, or the API error).
    pub prediction: Prediction,
    /// Usage, when reported.
    pub usage: Option<Usage>,
    /// HTTP status inside the batch line, if any.
    pub status: Option<u16>,
    /// The raw response body (or error object) text, for the audit log.
    pub raw: String,
}

/// Reads batch output/error files into answers per custom_id. Unknown custom_ids (not in
/// `requests`) and duplicates are errors naming the line.
pub fn parse_output(
    bytes: &[u8],
    source: &str,
    requests: &BatchRequests,
    answers: &mut HashMap<String, BatchAnswer>,
) -> Result<(), String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("{source}: not UTF-8: {e}"))?;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let Some((value, id)) = line_with_id(line, source, n)? else {
            continue;
        };
        let id = id.as_str();
        if !requests.bodies.contains_key(id) {
            return Err(located(
                source,
                n,
                format!("custom_id {id:?} is not in the request file"),
            ));
        }
        let answer = match (
            value.get("error").filter(|e| !e.is_null()),
            value.get("response").filter(|r| !r.is_null()),
        ) {
            (Some(error), _) => BatchAnswer {
                prediction: Prediction::ApiError(format!(
                    "batch error: {}",
                    error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("(no message)")
                )),
                usage: None,
                status: None,
                raw: error.to_string(),
            },
            (None, Some(response)) => {
                let status = response
                    .get("status_code")
                    .and_then(Value::as_u64)
                    .and_then(|s| u16::try_from(s).ok());
                let body = response.get("body").cloned().unwrap_or(Value::Null);
                let raw = body.to_string();
                if status.is_some_and(|s| s != 200) {
                    let message = body
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("(no message)");
                    BatchAnswer {
                        prediction: Prediction::ApiError(format!(
                            "HTTP {}: {message}",
                            status.unwrap_or(0)
                        )),
                        usage: None,
                        status,
                        raw,
                    }
                } else {
                    match parse_completion(&raw) {
                        Ok(c) => BatchAnswer {
                            prediction: Prediction::Raw(c.content),
                            usage: c.usage,
                            status,
                            raw,
                        },
                        Err(e) => return Err(located(source, n, format!("response body: {e}"))),
                    }
                }
            }
            (None, None) => {
                return Err(located(
                    source,
                    n,
                    "line has neither `response` nor `error`",
                ))
            }
        };
        if answers.insert(id.to_owned(), answer).is_some() {
            return Err(located(
                source,
                n,
                format!("custom_id {id:?} answered twice"),
            ));
        }
    }
    Ok(())
}

/// Per sample (benchmark order): the answer, or `None` when the batch has none for it.
pub fn answers_in_order(
    transitions: &[Transition],
    mut answers: HashMap<String, BatchAnswer>,
) -> Vec<Option<BatchAnswer>> {
    transitions.iter().map(|t| answers.remove(&t.id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn transition(id: &str) -> Transition {
        Transition {
            id: id.into(),
            origin: Origin {
                record: 0,
                step: None,
            },
            env_id: None,
            task_id: None,
            action: Action {
                name: "pay".into(),
                arguments: json!({"order_id": "O1"}).as_object().cloned().unwrap(),
            },
            observation: json!("ok"),
            config_before: json!({"a": 1}),
            config_after: json!({"a": 2}),
            stored_change_count: None,
            env_code: "class E: pass".into(),
        }
    }

    #[test]
    fn export_then_import_round_trip() {
        let ts = [transition("s1"), transition("s2"), transition("s3")];
        let file = export_requests(&ts, "m", Template::Reference, &Decoding::default()).unwrap();
        assert_eq!(file.lines().count(), 3);
        let first: Value = serde_json::from_str(file.lines().next().unwrap()).unwrap();
        assert_eq!(first["custom_id"], "s1");
        assert_eq!(first["url"], BATCH_URL);
        assert_eq!(first["body"]["model"], "m");
        let requests = parse_requests(file.as_bytes(), "req.jsonl").unwrap();
        assert_eq!(requests.model, "m");
        assert_eq!(requests.bodies.len(), 3);
        let output = [
            json!({"id": "b1", "custom_id": "s2", "response": {"status_code": 200, "body": {"choices": [{"message": {"content": "{\"feedback\": \"ok\"}"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 4}}}, "error": null}),
            json!({"id": "b2", "custom_id": "s1", "response": {"status_code": 500, "body": {"error": {"message": "boom"}}}, "error": null}),
        ]
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
        let errors = json!({"custom_id": "s3", "response": null, "error": {"code": "x", "message": "expired"}}).to_string();
        let mut answers = HashMap::new();
        parse_output(output.as_bytes(), "out.jsonl", &requests, &mut answers).unwrap();
        parse_output(errors.as_bytes(), "err.jsonl", &requests, &mut answers).unwrap();
        let ordered = answers_in_order(&ts, answers);
        assert_eq!(
            ordered[0].as_ref().unwrap().prediction,
            Prediction::ApiError("HTTP 500: boom".into())
        );
        assert_eq!(
            ordered[1].as_ref().unwrap().prediction,
            Prediction::Raw("{\"feedback\": \"ok\"}".into())
        );
        assert_eq!(
            ordered[1].as_ref().unwrap().usage,
            Some(Usage {
                prompt_tokens: 5,
                completion_tokens: 4
            })
        );
        assert_eq!(
            ordered[2].as_ref().unwrap().prediction,
            Prediction::ApiError("batch error: expired".into())
        );
    }

    #[test]
    fn bad_files_name_the_line() {
        let ts = [transition("s1"), transition("s1")];
        assert!(
            export_requests(&ts, "m", Template::Envsim, &Decoding::default())
                .unwrap_err()
                .contains("occurs twice")
        );
        let err = parse_requests(
            b"{\"custom_id\": \"a\", \"body\": {\"model\": \"m\"}}\n{\"custom_id\": 3}\n",
            "r.jsonl",
        )
        .unwrap_err();
        assert_eq!(
            err,
            "r.jsonl:2: field `custom_id` is missing or not a string"
        );
        let err = parse_requests(b"{\"custom_id\": \"a\", \"body\": {\"model\": \"m\"}}\n{\"custom_id\": \"b\", \"body\": {\"model\": \"n\"}}\n", "r.jsonl").unwrap_err();
        assert!(err.starts_with("r.jsonl:2: model \"n\" differs"), "{err}");
        let requests = parse_requests(
            b"{\"custom_id\": \"a\", \"body\": {\"model\": \"m\"}}\n",
            "r.jsonl",
        )
        .unwrap();
        let mut answers = HashMap::new();
        let err = parse_output(
            b"\n{\"custom_id\": \"zz\", \"error\": {\"message\": \"x\"}}\n",
            "o.jsonl",
            &requests,
            &mut answers,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "o.jsonl:2: custom_id \"zz\" is not in the request file"
        );
        let err = parse_output(
            b"{\"custom_id\": \"a\", \"response\": {\"status_code\": 200, \"body\": \"<html>\"}}",
            "o.jsonl",
            &requests,
            &mut answers,
        )
        .unwrap_err();
        assert!(err.starts_with("o.jsonl:1: response body:"), "{err}");
        let err = parse_output(b"not json", "o.jsonl", &requests, &mut answers).unwrap_err();
        assert!(err.starts_with("o.jsonl:1: not JSON"), "{err}");
    }
}

//! `OpenAiText` against the loopback OpenAI-compatible test double: what it sends (the schema
//! as `response_format` only when structured output is on, the seed) and what it answers
//! (the text and tokens, or a typed error naming the model and the server's words).

use envsim_core::prompt::Prompt;
use envsim_llm::openai::{ClientSettings, OpenAiClient};
use envsim_llm::{Decoding, LlmError, OpenAiText, TextModel};
use envsim_testkit::openai_double::{DoubleConfig, Fault, OpenAiDouble};
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;

fn text(double: &OpenAiDouble, structured: bool) -> OpenAiText {
    let client = OpenAiClient::new(&ClientSettings {
        base_url: double.base_url(),
        api_key: None,
        timeout: Duration::from_secs(10),
        max_connections: 2,
    })
    .unwrap();
    let decoding = Decoding {
        temperature: Some(0.0),
        max_tokens: Some(64),
        ..Decoding::default()
    };
    OpenAiText::new(client, "m".into(), decoding, structured)
}

fn prompt(user: &str) -> Prompt {
    Prompt {
        system: "s".into(),
        user: user.into(),
    }
}

#[tokio::test]
async fn it_sends_the_schema_and_seed_and_reads_the_answer() {
    let double = OpenAiDouble::spawn(DoubleConfig {
        answers: HashMap::from([("ping".to_string(), "{\"a\": 1}".to_string())]),
        faults: HashMap::from([("boom".to_string(), vec![Fault::ServerError])]),
        ..DoubleConfig::default()
    })
    .unwrap();
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    let model = text(&double, true).with_schema_name("step");
    assert_eq!(model.name(), "openai:m");
    let (answer, usage) = model
        .complete(prompt("ping"), Some(schema.clone()), 7)
        .await
        .unwrap();
    assert_eq!(answer, "{\"a\": 1}");
    assert!(usage.prompt_tokens > 0, "{usage:?}");
    let body = &double.bodies()[0];
    assert_eq!(body["model"], "m");
    assert_eq!(body["seed"], 7);
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "step", "schema": schema, "strict": false}})
    );
    // Structured output off: the schema is not sent (servers that refuse it), the seed is.
    text(&double, false)
        .complete(prompt("ping"), Some(schema), 8)
        .await
        .unwrap();
    let body = &double.bodies()[1];
    assert!(body.get("response_format").is_none(), "{body}");
    assert_eq!(body["seed"], 8);
    // A body built without a seed carries none.
    assert!(text(&double, false)
        .body(&prompt("x"), None, None)
        .get("seed")
        .is_none());
    // A server error is one typed error naming the model (retrying is the caller's).
    let err: LlmError = text(&double, true)
        .complete(prompt("boom"), None, 0)
        .await
        .unwrap_err();
    assert_eq!(err.model, "openai:m");
    assert!(err.message.contains("500"), "{err}");
    assert_eq!(double.requests_for("boom"), 1);
    assert!(err.to_string().starts_with("openai:m: "), "{err}");
}

//! # envsim-llm
//!
//! envsim's one way to ask a language model, below everything that does (the simulators of
//! `envsim-sim`, the agents, users and task writers of `envsim-synth`, the evaluation harness
//! of `envsim-eval`):
//!
//! - [`TextModel`]: complete a prompt, optionally under a JSON Schema (constrained decoding
//!   where the backend has it, `response_format` where the server takes it), with a seed;
//! - [`OpenAiText`] over [`openai::OpenAiClient`] (any OpenAI-compatible
//!   `/v1/chat/completions` endpoint: the request body, one attempt with its typed error,
//!   the reading of completions and `Retry-After`), and, with the `local` feature,
//!   [`LocalText`] over the embedded engine of `envsim-model`;
//! - [`Decoding`]: the sampling settings a request carries.
//!
//! Retries, rate limits, caching and batch files are the harness's, not here: one request,
//! one answer or one typed error.

pub mod openai;

use envsim_core::prompt::Prompt;
use envsim_core::sample::Usage;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::future::Future;
use std::pin::Pin;

/// A boxed future that can cross threads (the object-safe form of an async method).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Sampling parameters sent with every request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Decoding {
    /// Sampling temperature (`None`: the server's default).
    pub temperature: Option<f64>,
    /// Completion token limit (`None`: the server's default).
    pub max_tokens: Option<u64>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Extra JSON merged into the request body (server-specific fields such as
    /// `repetition_penalty` or `chat_template_kwargs`).
    pub extra_body: Map<String, Value>,
}

/// Why a model gave no text.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{model}: {message}")]
pub struct LlmError {
    /// The model, as [`TextModel::name`] says it.
    pub model: String,
    /// What went wrong (the server's words, or the engine's).
    pub message: String,
}

// Callers whose own errors are still text take this one as its message.
impl From<LlmError> for String {
    fn from(e: LlmError) -> String {
        e.to_string()
    }
}

/// A model that completes text prompts.
pub trait TextModel: Send + Sync {
    /// Its name in records (`openai:<model>`, `local:<model>`).
    fn name(&self) -> String;

    /// Completes `prompt`; with `schema`, asks for output of that JSON Schema (constrained
    /// decoding where the backend has it). Returns the text and the tokens spent.
    fn complete<'a>(
        &'a self,
        prompt: Prompt,
        schema: Option<Value>,
        seed: u64,
    ) -> BoxFuture<'a, Result<(String, Usage), LlmError>>;
}

/// An OpenAI-compatible chat endpoint as a [`TextModel`].
pub struct OpenAiText {
    client: openai::OpenAiClient,
    model: String,
    decoding: Decoding,
    /// Send `response_format` when a schema is asked for.
    structured: bool,
    /// The schema's name in `response_format`.
    schema_name: String,
}

impl OpenAiText {
    /// A text model asking `model` through `client`; a schema asked for is sent as
    /// `response_format` when `structured`.
    pub fn new(
        client: openai::OpenAiClient,
        model: String,
        decoding: Decoding,
        structured: bool,
    ) -> Self {
        OpenAiText {
            client,
            model,
            decoding,
            structured,
            schema_name: "answer".to_owned(),
        }
    }

    /// Whether a schema asked for is sent as `response_format` (servers that refuse it need
    /// it off).
    pub fn with_structured_output(mut self, on: bool) -> Self {
        self.structured = on;
        self
    }

    /// The name `response_format` gives the schema (`answer` by default).
    pub fn with_schema_name(mut self, name: &str) -> Self {
        self.schema_name = name.to_owned();
        self
    }

    /// One attempt at a rendered request body, with the server's typed error (the evaluation
    /// harness retries, rate-limits, caches and logs attempts around this): the completion
    /// and the raw response text.
    pub async fn attempt(
        &self,
        body: &str,
    ) -> Result<(openai::Completion, String), openai::AttemptError> {
        self.client.attempt(body).await
    }

    /// The endpoint's URL (part of a response cache key: the same body sent elsewhere is
    /// another request).
    pub fn url(&self) -> &str {
        self.client.url()
    }

    /// Its decoding settings.
    pub fn decoding(&self) -> &Decoding {
        &self.decoding
    }

    /// The client, to replace (a harness pointing a configured model at another server).
    pub fn client_mut(&mut self) -> &mut openai::OpenAiClient {
        &mut self.client
    }

    /// Sends one request body (one attempt; retrying is the caller's) and returns the text
    /// and the tokens spent.
    pub async fn ask(&self, body: &Value) -> Result<(String, Usage), LlmError> {
        let (completion, _) =
            self.client
                .attempt(&body.to_string())
                .await
                .map_err(|e| LlmError {
                    model: self.name(),
                    message: e.message,
                })?;
        Ok((completion.content, completion.usage.unwrap_or_default()))
    }

    /// The request body of `prompt` (with `schema` when structured output is on, `seed` when
    /// given).
    pub fn body(&self, prompt: &Prompt, schema: Option<Value>, seed: Option<u64>) -> Value {
        let mut body = openai::request_body(&self.model, prompt, &self.decoding);
        if let Some(seed) = seed {
            body["seed"] = json!(seed);
        }
        if let (Some(schema), true) = (schema, self.structured) {
            body["response_format"] = json!({"type": "json_schema", "json_schema": {
                "name": self.schema_name, "schema": schema, "strict": false}});
        }
        body
    }
}

impl TextModel for OpenAiText {
    fn name(&self) -> String {
        format!("openai:{}", self.model)
    }

    fn complete<'a>(
        &'a self,
        prompt: Prompt,
        schema: Option<Value>,
        seed: u64,
    ) -> BoxFuture<'a, Result<(String, Usage), LlmError>> {
        Box::pin(async move { self.ask(&self.body(&prompt, schema, Some(seed))).await })
    }
}

/// The embedded local model as a [`TextModel`] (decoding constrained by the schema).
#[cfg(feature = "local")]
pub struct LocalText {
    engine: std::sync::Arc<envsim_model::local::LocalEngine>,
    generation: envsim_model::local::Generation,
    model: String,
}

#[cfg(feature = "local")]
impl LocalText {
    /// A text model over a started engine.
    pub fn new(
        engine: std::sync::Arc<envsim_model::local::LocalEngine>,
        generation: envsim_model::local::Generation,
        model: String,
    ) -> Self {
        LocalText {
            engine,
            generation,
            model,
        }
    }

    /// Completes `prompt` with `generation` as given (schema, seed, temperature): the whole
    /// completion (text, tokens, why it ended, reused prompt tokens).
    pub async fn generate(
        &self,
        prompt: Prompt,
        generation: envsim_model::local::Generation,
    ) -> Result<envsim_model::local::LocalCompletion, LlmError> {
        self.engine
            .generate(prompt, generation)
            .await
            .map_err(|e| LlmError {
                model: self.name(),
                message: e.to_string(),
            })
    }

    /// The engine's name (`candle`, `llama.cpp`): the two engines' outputs differ in the last
    /// digits of the logits, so a cached answer of one never stands for the other.
    pub fn engine_name(&self) -> &'static str {
        self.engine.info.engine.name()
    }

    /// The started engine (its context length and threads).
    pub fn engine(&self) -> &std::sync::Arc<envsim_model::local::LocalEngine> {
        &self.engine
    }

    /// Its generation settings.
    pub fn generation(&self) -> &envsim_model::local::Generation {
        &self.generation
    }
}

#[cfg(feature = "local")]
impl TextModel for LocalText {
    fn name(&self) -> String {
        format!("local:{}", self.model)
    }

    fn complete<'a>(
        &'a self,
        prompt: Prompt,
        schema: Option<Value>,
        seed: u64,
    ) -> BoxFuture<'a, Result<(String, Usage), LlmError>> {
        Box::pin(async move {
            let mut generation = self.generation.clone();
            generation.json_schema = schema;
            generation.seed = seed as u32;
            let completion = self.generate(prompt, generation).await?;
            Ok((completion.content, completion.usage))
        })
    }
}

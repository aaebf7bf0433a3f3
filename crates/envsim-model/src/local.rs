//! The embedded local simulator: a GGUF chat model run in-process on the CPU, behind one
//! interface whichever engine runs it.
//!
//! Two engines (cargo features of this crate):
//!
//! - **candle** (default): pure Rust. candle-core reads the GGUF and supplies the quantized
//!   matrix-vector kernels; the Qwen2 forward pass, the KV cache, the byte-level BPE tokenizer
//!   and the ChatML chat template are this crate's own code ([`crate::candle`]). Runs
//!   Qwen2-architecture models (the default model and the other Qwen2/2.5 GGUFs).
//! - **llama** (optional): llama.cpp through `llama-cpp-2`; any GGUF chat model llama.cpp runs.
//!   Needs cmake and libclang to build. Preferred when both are compiled in.
//!
//! One engine thread owns the model and its state (llama.cpp contexts are not shareable), and
//! requests reach it over a channel, so the async runner awaits completions like HTTP calls.
//! Decoding is greedy unless a temperature is given (then sampled with a fixed seed).
//! Generation stops at end-of-turn, at a stop sequence, at the token limit, or — by default —
//! as soon as one complete top-level JSON object has been written, since the output contract
//! is exactly one object and small models tend to keep talking after it.
//!
//! Prefix reuse: the KV cache of the previous prompt is kept, and a new prompt only computes the
//! tokens after the longest common prefix. Prompts put what samples of one environment share
//! (rules, code) first, and the runner orders local work by environment and tool, so much of
//! each prompt is reused.

use crate::error::InferenceError;
use envsim_core::prompt::Prompt;
use envsim_core::sample::Usage;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Instant;
use tokio::sync::oneshot;

/// How the engine runs.
#[derive(Clone, Debug)]
pub struct LocalSettings {
    /// The GGUF file.
    pub model_path: PathBuf,
    /// Context length in tokens (prompt + completion).
    pub n_ctx: u32,
    /// CPU threads.
    pub threads: usize,
}

/// Per-request generation parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// Completion token limit.
    pub max_tokens: u32,
    /// 0 or less: greedy; otherwise sampled with this temperature and `seed`.
    pub temperature: f32,
    /// Seed for sampled decoding.
    pub seed: u32,
    /// Stop sequences (the output is cut before them).
    pub stop: Vec<String>,
    /// Stop once a complete top-level JSON object has been written.
    pub stop_after_object: bool,
    /// Constrain the output to this JSON Schema (see [`crate::constrain`]): only tokens that
    /// keep the text a prefix of a value the schema allows are chosen, and generation stops
    /// when the value is complete. `None`: free text.
    pub json_schema: Option<serde_json::Value>,
}

/// The inference engines this build can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// Pure Rust on candle's quantized CPU kernels (feature `candle`).
    Candle,
    /// llama.cpp (feature `llama`).
    Llama,
}

impl EngineKind {
    /// The engine's name (`candle`, `llama.cpp`).
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Candle => "candle",
            EngineKind::Llama => "llama.cpp",
        }
    }

    /// Parses `candle` or `llama`/`llama.cpp`.
    pub fn parse(text: &str) -> Option<EngineKind> {
        match text.trim().to_ascii_lowercase().as_str() {
            "candle" => Some(EngineKind::Candle),
            "llama" | "llama.cpp" | "llamacpp" => Some(EngineKind::Llama),
            _ => None,
        }
    }

    /// Whether this build contains the engine.
    pub fn compiled(self) -> bool {
        match self {
            EngineKind::Candle => cfg!(feature = "candle"),
            EngineKind::Llama => cfg!(feature = "llama"),
        }
    }

    /// The engines this build contains, preferred first.
    pub fn available() -> Vec<EngineKind> {
        [EngineKind::Llama, EngineKind::Candle]
            .into_iter()
            .filter(|k| k.compiled())
            .collect()
    }

    /// The engine [`LocalEngine::start`] uses: `$ENVSIM_ENGINE` (`candle` or `llama`) when set,
    /// else llama.cpp when it is compiled in, else candle.
    pub fn preferred() -> Result<EngineKind, EngineError> {
        match std::env::var("ENVSIM_ENGINE") {
            Ok(value) if !value.trim().is_empty() => {
                let kind = EngineKind::parse(&value).ok_or_else(|| {
                    EngineError::Unavailable(format!(
                        "ENVSIM_ENGINE={value:?}: expected `candle` or `llama`"
                    ))
                })?;
                if !kind.compiled() {
                    return Err(EngineError::Unavailable(format!(
                        "ENVSIM_ENGINE={value}: this build has no {} engine (cargo feature `{}`)",
                        kind.name(),
                        match kind {
                            EngineKind::Candle => "candle",
                            EngineKind::Llama => "llama",
                        }
                    )));
                }
                Ok(kind)
            }
            _ => EngineKind::available().first().copied().ok_or_else(|| {
                EngineError::Unavailable("this build has no local model engine".to_owned())
            }),
        }
    }
}

/// Why the local model gave no completion (or could not start).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The engine asked for is not in this build, or `ENVSIM_ENGINE` names none.
    #[error("{0}")]
    Unavailable(String),
    /// The model or its vocabulary could not be loaded (file, format, architecture, context).
    #[error("{0}")]
    Load(String),
    /// A request the engine refuses before computing: a prompt that does not fit the
    /// context, an output schema it cannot constrain decoding to, a prompt it cannot render.
    #[error("{0}")]
    Request(String),
    /// The model failed while computing.
    #[error("{0}")]
    Generation(String),
    /// The engine thread is gone (shut down, or stopped).
    #[error("{0}")]
    Stopped(String),
}

pub(crate) struct Job {
    pub(crate) prompt: Prompt,
    pub(crate) generation: Generation,
    pub(crate) reply: oneshot::Sender<Result<LocalCompletion, EngineError>>,
}

/// A finished local completion.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalCompletion {
    /// The generated text (cut before a stop sequence).
    pub content: String,
    /// Prompt tokens (the whole chat-templated prompt) and completion tokens.
    pub usage: Usage,
    /// `stop` (end of turn, stop sequence, complete object) or `length` (token limit).
    pub finish_reason: String,
    /// Prompt tokens whose KV entries were reused from the previous request.
    pub reused_tokens: usize,
    /// Milliseconds spent on the prompt.
    pub prefill_ms: f64,
    /// Milliseconds spent generating.
    pub decode_ms: f64,
    /// The generated token ids (end of turn excluded).
    pub tokens: Vec<u32>,
}

impl LocalCompletion {
    /// An OpenAI-style JSON record of this completion, for the audit log.
    pub fn to_response_json(&self, model: &str) -> String {
        json!({
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": self.content}, "finish_reason": self.finish_reason}],
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": self.reused_tokens},
            },
            "timings": {"prefill_ms": self.prefill_ms, "decode_ms": self.decode_ms},
        })
        .to_string()
    }
}

/// The engine handle (cheap to share; requests are served one at a time).
pub struct LocalEngine {
    jobs: std::sync::Mutex<Option<mpsc::Sender<Job>>>,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Facts about the loaded model.
    pub info: ModelInfo,
}

/// Facts about the loaded model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelInfo {
    /// `general.name` from the GGUF, or the file name.
    pub name: String,
    /// Context length used.
    pub n_ctx: u32,
    /// Threads used.
    pub threads: usize,
    /// Seconds to load.
    pub load_seconds: f64,
    /// The engine running it.
    pub engine: EngineKind,
    /// Something the user should know (e.g. a build without SIMD kernels).
    pub warning: Option<String>,
}

/// Threads to use by default: the cores this process may run on.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Where the engine thread reports the loaded model, or why it could not load it
/// ([`LocalEngine::start_with`] returns that as an [`EngineError::Load`] with the same text).
pub(crate) type Ready = mpsc::Sender<Result<ModelInfo, InferenceError>>;

impl LocalEngine {
    /// Loads the model with the preferred engine ([`EngineKind::preferred`]) on a new engine
    /// thread; returns once it is ready (or failed to load).
    pub fn start(settings: LocalSettings) -> Result<LocalEngine, EngineError> {
        LocalEngine::start_with(EngineKind::preferred()?, settings)
    }

    /// Loads the model with the given engine.
    pub fn start_with(
        kind: EngineKind,
        settings: LocalSettings,
    ) -> Result<LocalEngine, EngineError> {
        if !kind.compiled() {
            return Err(EngineError::Unavailable(format!(
                "this build has no {} engine",
                kind.name()
            )));
        }
        let (jobs, inbox) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<ModelInfo, InferenceError>>();
        let thread = std::thread::Builder::new()
            .name("envsim-local-model".into())
            .spawn(move || match kind {
                #[cfg(feature = "candle")]
                EngineKind::Candle => crate::candle::serve(settings, inbox, ready_tx),
                #[cfg(feature = "llama")]
                EngineKind::Llama => crate::llama::serve(settings, inbox, ready_tx),
                #[allow(unreachable_patterns)]
                _ => {
                    let _ = (settings, inbox);
                    let _ = ready_tx.send(Err(InferenceError::Unsupported(format!(
                        "this build has no {} engine",
                        kind.name()
                    ))));
                }
            })
            .map_err(|e| EngineError::Stopped(format!("cannot start the model thread: {e}")))?;
        let info = ready_rx
            .recv()
            .map_err(|_| EngineError::Stopped("the model thread stopped while loading".to_owned()))?
            .map_err(|e| EngineError::Load(e.to_string()))?;
        Ok(LocalEngine {
            jobs: std::sync::Mutex::new(Some(jobs)),
            thread: std::sync::Mutex::new(Some(thread)),
            info,
        })
    }

    /// Hands a job to the engine thread; the receiver gets its completion.
    fn submit(
        &self,
        prompt: Prompt,
        generation: Generation,
    ) -> Result<oneshot::Receiver<Result<LocalCompletion, EngineError>>, EngineError> {
        let (reply, answer) = oneshot::channel();
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let sender = jobs
            .as_ref()
            .ok_or_else(|| EngineError::Stopped("the local model was shut down".to_owned()))?;
        sender
            .send(Job {
                prompt,
                generation,
                reply,
            })
            .map_err(|_| EngineError::Stopped("the local model thread has stopped".to_owned()))?;
        Ok(answer)
    }

    /// Generates a completion for a chat prompt.
    pub async fn generate(
        &self,
        prompt: Prompt,
        generation: Generation,
    ) -> Result<LocalCompletion, EngineError> {
        self.submit(prompt, generation)?.await.map_err(|_| {
            EngineError::Stopped("the local model thread dropped the request".to_owned())
        })?
    }

    /// [`LocalEngine::generate`] for callers without an async runtime.
    pub fn generate_blocking(
        &self,
        prompt: Prompt,
        generation: Generation,
    ) -> Result<LocalCompletion, EngineError> {
        self.submit(prompt, generation)?
            .blocking_recv()
            .map_err(|_| {
                EngineError::Stopped("the local model thread dropped the request".to_owned())
            })?
    }
}

impl Drop for LocalEngine {
    fn drop(&mut self) {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = thread.join();
        }
    }
}

pub(crate) fn model_file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The prompt-length check both engines apply before computing anything.
pub(crate) fn check_fits(
    prompt_tokens: usize,
    budget: usize,
    n_ctx: u32,
) -> Result<(), EngineError> {
    if prompt_tokens == 0 {
        return Err(EngineError::Request(
            "the prompt tokenized to nothing".into(),
        ));
    }
    if prompt_tokens + budget > n_ctx as usize {
        return Err(EngineError::Request(format!(
            "prompt too long for the local model: {prompt_tokens} prompt tokens + {budget} completion tokens exceed the {n_ctx}-token context (use a sliced template, fewer max tokens or a larger --ctx)"
        )));
    }
    Ok(())
}

/// The completion text as it is generated: stop sequences, the object scanner, the schema
/// constraint's matcher and the token count (shared by both engines, so they choose and stop
/// identically).
pub(crate) struct Output<'a> {
    generation: &'a Generation,
    bytes: Vec<u8>,
    scanner: ObjectScanner,
    matcher: Option<crate::constrain::Matcher<'a>>,
    tokens: Vec<u32>,
    finish: &'static str,
}

impl<'a> Output<'a> {
    pub(crate) fn new(generation: &'a Generation, constraint: &'a Constraint) -> Output<'a> {
        Output {
            generation,
            bytes: Vec::new(),
            scanner: ObjectScanner::default(),
            matcher: constraint.matcher(),
            tokens: Vec::new(),
            finish: "length",
        }
    }

    /// The next token: unconstrained, or the one the sampler picks among tokens whose text
    /// (`texts`, indexed by token id; control tokens have none) keeps the output a prefix the
    /// constraint accepts. An [`EngineError::Generation`] when no token does (a schema that
    /// admits nothing further).
    pub(crate) fn next_token(
        &self,
        sampler: &mut crate::constrain::Sampler,
        logits: &[f32],
        texts: &[Vec<u8>],
    ) -> Result<u32, EngineError> {
        match &self.matcher {
            None => Ok(sampler.sample(logits)),
            Some(m) => sampler
                .sample_allowed(logits, |t| {
                    texts.get(t as usize).is_some_and(|text| m.accepts(text))
                })
                .ok_or_else(|| {
                    EngineError::Generation(
                        "no token of the vocabulary continues the output within the output schema"
                            .to_owned(),
                    )
                }),
        }
    }

    /// Whether the token budget allows another token.
    pub(crate) fn wants_more(&self) -> bool {
        self.tokens.len() < self.generation.max_tokens as usize
    }

    /// End of turn: stop without counting the token.
    pub(crate) fn end_of_turn(&mut self) {
        self.finish = "stop";
    }

    /// Appends one generated token and its text; true when generation must stop here (a stop
    /// sequence, the first object's end, or the constrained value complete).
    pub(crate) fn push(&mut self, token: u32, piece: &[u8]) -> bool {
        self.tokens.push(token);
        let before = self.bytes.len();
        self.bytes.extend_from_slice(piece);
        let complete = self.matcher.as_mut().is_some_and(|m| {
            m.advance(piece);
            m.is_complete()
        });
        if let Some(cut) = stop_position(&self.bytes, &self.generation.stop) {
            self.bytes.truncate(cut);
            self.finish = "stop";
            return true;
        }
        if self.generation.stop_after_object && self.scanner.feed(&self.bytes[before..]) {
            self.finish = "stop";
            return true;
        }
        if complete {
            self.finish = "stop";
        }
        complete
    }

    pub(crate) fn finish(
        self,
        prompt_tokens: usize,
        reused_tokens: usize,
        prefill_ms: f64,
        decode_start: Instant,
    ) -> LocalCompletion {
        LocalCompletion {
            content: String::from_utf8_lossy(&self.bytes).into_owned(),
            usage: Usage {
                prompt_tokens: prompt_tokens as u64,
                completion_tokens: self.tokens.len() as u64,
            },
            finish_reason: self.finish.to_owned(),
            reused_tokens,
            prefill_ms,
            decode_ms: decode_start.elapsed().as_secs_f64() * 1000.0,
            tokens: self.tokens,
        }
    }
}

/// The schema constraint of one generation, if it has one: the compiled grammar, from which
/// [`Constraint::matcher`] starts the per-output state.
pub(crate) struct Constraint {
    grammar: Option<crate::constrain::SchemaGrammar>,
}

impl Constraint {
    pub(crate) fn of(generation: &Generation) -> Result<Constraint, EngineError> {
        let grammar = generation
            .json_schema
            .as_ref()
            .map(crate::constrain::SchemaGrammar::compile)
            .transpose()
            .map_err(|e| {
                EngineError::Request(format!("the output schema cannot constrain decoding: {e}"))
            })?;
        Ok(Constraint { grammar })
    }

    pub(crate) fn is_some(&self) -> bool {
        self.grammar.is_some()
    }

    pub(crate) fn matcher(&self) -> Option<crate::constrain::Matcher<'_>> {
        self.grammar.as_ref().map(crate::constrain::Matcher::new)
    }
}

/// Where the earliest stop sequence starts in `text`, if one occurs.
pub(crate) fn stop_position(text: &[u8], stops: &[String]) -> Option<usize> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.windows(s.len()).position(|w| w == s.as_bytes()))
        .min()
}

/// Tracks JSON nesting over streamed bytes to notice when the first top-level object closes.
/// Text before the first `{` (prose, a code fence) is skipped; strings and escapes are honoured.
#[derive(Debug, Default)]
pub struct ObjectScanner {
    depth: usize,
    started: bool,
    in_string: bool,
    escaped: bool,
}

impl ObjectScanner {
    /// Feeds more output; true once the first top-level object is complete.
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        for &b in bytes {
            if self.in_string {
                match (self.escaped, b) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' if self.started => self.in_string = true,
                b'{' => {
                    self.started = true;
                    self.depth += 1;
                }
                b'}' if self.started => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return true;
                    }
                }
                _ => {}
            }
        }
        false
    }
}

/// A GGUF model's tokenizer alone (vocabulary only, no weights), for counting prompt tokens.
/// The pure-Rust byte-level BPE when the `candle` feature is on (Qwen2-style vocabularies),
/// else llama.cpp's.
pub struct Tokenizer {
    inner: TokenizerInner,
}

enum TokenizerInner {
    #[cfg(feature = "candle")]
    // Boxed: the BPE tables' inline part is over a kilobyte.
    Bpe(Box<crate::candle::tokenizer::BpeTokenizer>),
    #[cfg(feature = "llama")]
    Llama(crate::llama::VocabOnly),
}

impl Tokenizer {
    /// Loads the vocabulary of a GGUF file.
    pub fn load(path: &Path) -> Result<Tokenizer, EngineError> {
        Tokenizer::load_with(EngineKind::preferred_tokenizer()?, path)
    }

    /// Loads the vocabulary with a given engine's tokenizer.
    pub fn load_with(kind: EngineKind, path: &Path) -> Result<Tokenizer, EngineError> {
        let inner = match kind {
            #[cfg(feature = "candle")]
            EngineKind::Candle => TokenizerInner::Bpe(Box::new(
                crate::candle::tokenizer::BpeTokenizer::from_gguf_file(path)
                    .map_err(|e| EngineError::Load(e.to_string()))?,
            )),
            #[cfg(feature = "llama")]
            EngineKind::Llama => TokenizerInner::Llama(
                crate::llama::VocabOnly::load(path)
                    .map_err(|e| EngineError::Load(e.to_string()))?,
            ),
            #[allow(unreachable_patterns)]
            _ => {
                return Err(EngineError::Unavailable(format!(
                    "this build has no {} engine",
                    kind.name()
                )))
            }
        };
        Ok(Tokenizer { inner })
    }

    /// Tokens of `text` (no special tokens added or parsed).
    pub fn count(&self, text: &str) -> usize {
        self.encode(text, false).len()
    }

    /// Token ids of `text`; `special`: text like `<|im_start|>` becomes its control token.
    pub fn encode(&self, text: &str, special: bool) -> Vec<u32> {
        match &self.inner {
            #[cfg(feature = "candle")]
            TokenizerInner::Bpe(t) => t.encode(text, special),
            #[cfg(feature = "llama")]
            TokenizerInner::Llama(t) => t.encode(text, special),
        }
    }
}

impl EngineKind {
    /// The tokenizer [`Tokenizer::load`] uses: `$ENVSIM_ENGINE`'s when set, else the pure-Rust
    /// one when compiled in (it reads only the metadata), else llama.cpp's.
    fn preferred_tokenizer() -> Result<EngineKind, EngineError> {
        if std::env::var("ENVSIM_ENGINE").is_ok_and(|v| !v.trim().is_empty()) {
            return EngineKind::preferred();
        }
        EngineKind::available()
            .into_iter()
            .min_by_key(|k| *k != EngineKind::Candle)
            .ok_or_else(|| {
                EngineError::Unavailable("this build has no local model engine".to_owned())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_scanner_finds_the_end_of_the_first_object() {
        let mut s = ObjectScanner::default();
        assert!(!s.feed(b"Sure! ```json\n{\"feedback\": \"{'a': 1}\", "));
        assert!(!s.feed(b"\"config_changes\": [{\"path\": \"/x\\\"}\"}]"));
        assert!(s.feed(b"}\n```"));
        let mut s = ObjectScanner::default();
        assert!(!s.feed(b"} stray { \"a\": \"}\" "));
        assert!(s.feed(b"}"));
    }

    #[test]
    fn stop_sequences_cut_at_the_earliest() {
        assert_eq!(
            stop_position(b"abc}{def", &["}{".into(), "de".into()]),
            Some(3)
        );
        assert_eq!(stop_position(b"abc", &["".into(), "x".into()]), None);
    }

    #[test]
    fn output_stops_on_budget_stop_sequence_and_object() {
        let generation = Generation {
            max_tokens: 3,
            temperature: 0.0,
            seed: 0,
            stop: vec!["END".into()],
            stop_after_object: true,
            json_schema: None,
        };
        let none = Constraint::of(&generation).unwrap();
        let mut out = Output::new(&generation, &none);
        assert!(!out.push(0, b"{\"a\""));
        assert!(out.push(0, b": 1} trailing"));
        let done = out.finish(10, 4, 1.0, Instant::now());
        assert_eq!(done.content, "{\"a\": 1} trailing");
        assert_eq!(done.finish_reason, "stop");
        assert_eq!(done.usage.completion_tokens, 2);
        assert_eq!(done.usage.prompt_tokens, 10);
        let mut out = Output::new(&generation, &none);
        assert!(!out.push(0, b"x"));
        assert!(!out.push(0, b"yEN"));
        assert!(out.push(0, b"D"));
        assert_eq!(out.finish(1, 0, 0.0, Instant::now()).content, "xy");
        let mut out = Output::new(&generation, &none);
        assert!(!out.push(0, b"ab"));
        assert!(out.push(0, b"cENDd"));
        assert_eq!(out.finish(1, 0, 0.0, Instant::now()).content, "abc");
        let mut out = Output::new(&generation, &none);
        for _ in 0..3 {
            assert!(out.wants_more());
            assert!(!out.push(0, b"."));
        }
        assert!(!out.wants_more());
        assert_eq!(
            out.finish(1, 0, 0.0, Instant::now()).finish_reason,
            "length"
        );
    }

    #[test]
    fn engine_names_parse_and_one_is_preferred() {
        assert_eq!(EngineKind::parse("Candle"), Some(EngineKind::Candle));
        assert_eq!(EngineKind::parse("llama.cpp"), Some(EngineKind::Llama));
        assert_eq!(EngineKind::parse("gguf"), None);
        assert!(!EngineKind::available().is_empty());
        assert!(check_fits(0, 1, 512).is_err());
        let err = check_fits(500, 100, 512).unwrap_err();
        assert!(
            matches!(&err, EngineError::Request(m) if m.contains("500 prompt tokens + 100")),
            "{err:?}"
        );
        assert!(check_fits(400, 100, 512).is_ok());
    }
}

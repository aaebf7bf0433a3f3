//! The embedded local simulator: a GGUF model run in-process on the CPU with llama.cpp
//! (`llama-cpp-2`), behind the `local` cargo feature.
//!
//! One engine thread owns the model and its context (llama.cpp contexts are not shareable), and
//! requests reach it over a channel, so the async runner awaits completions like HTTP calls.
//! The chat template and tokenizer come from the GGUF. Decoding is greedy unless a temperature
//! is given. Generation stops at end-of-turn, at a stop sequence, at the token limit, or —
//! by default — as soon as one complete top-level JSON object has been written, since the
//! output contract is exactly one object and small models tend to keep talking after it.
//!
//! Prefix reuse: the KV cache of the previous prompt is kept, and a new prompt only computes the
//! tokens after the longest common prefix. Prompts put what samples of one environment share
//! (rules, code) first, and the runner orders local work by environment and tool, so much of
//! each prompt is reused.

use crate::openai::Completion;
use envsim_core::prompt::Prompt;
use envsim_core::sample::Usage;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use serde_json::json;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, OnceLock};
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
}

struct Job {
    prompt: Prompt,
    generation: Generation,
    reply: oneshot::Sender<Result<LocalCompletion, String>>,
}

/// A finished local completion.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalCompletion {
    /// Text, usage and finish reason, as the HTTP backend reports them.
    pub completion: Completion,
    /// Prompt tokens whose KV entries were reused from the previous request.
    pub reused_tokens: usize,
    /// Milliseconds spent on the prompt.
    pub prefill_ms: f64,
    /// Milliseconds spent generating.
    pub decode_ms: f64,
}

impl LocalCompletion {
    /// An OpenAI-style JSON record of this completion, for the audit log.
    pub fn to_response_json(&self, model: &str) -> String {
        json!({
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": self.completion.content}, "finish_reason": self.completion.finish_reason}],
            "usage": {
                "prompt_tokens": self.completion.usage.map_or(0, |u| u.prompt_tokens),
                "completion_tokens": self.completion.usage.map_or(0, |u| u.completion_tokens),
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
}

fn backend() -> Result<&'static LlamaBackend, String> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let mut backend =
                LlamaBackend::init().map_err(|e| format!("cannot start llama.cpp: {e}"))?;
            backend.void_logs();
            Ok(backend)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Threads to use by default: the cores this process may run on.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl LocalEngine {
    /// Loads the model on a new engine thread; returns once it is ready (or failed to load).
    pub fn start(settings: LocalSettings) -> Result<LocalEngine, String> {
        let (jobs, inbox) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<ModelInfo, String>>();
        let thread = std::thread::Builder::new()
            .name("envsim-local-model".into())
            .spawn(move || engine_thread(settings, inbox, ready_tx))
            .map_err(|e| format!("cannot start the model thread: {e}"))?;
        let info = ready_rx
            .recv()
            .map_err(|_| "the model thread stopped while loading".to_owned())??;
        Ok(LocalEngine {
            jobs: std::sync::Mutex::new(Some(jobs)),
            thread: std::sync::Mutex::new(Some(thread)),
            info,
        })
    }

    /// Generates a completion for a chat prompt.
    pub async fn generate(
        &self,
        prompt: Prompt,
        generation: Generation,
    ) -> Result<LocalCompletion, String> {
        let (reply, answer) = oneshot::channel();
        {
            let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
            let sender = jobs.as_ref().ok_or("the local model was shut down")?;
            sender
                .send(Job {
                    prompt,
                    generation,
                    reply,
                })
                .map_err(|_| "the local model thread has stopped".to_owned())?;
        }
        answer
            .await
            .map_err(|_| "the local model thread dropped the request".to_owned())?
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

fn engine_thread(
    settings: LocalSettings,
    inbox: mpsc::Receiver<Job>,
    ready: mpsc::Sender<Result<ModelInfo, String>>,
) {
    let started = Instant::now();
    let loaded = (|| {
        let backend = backend()?;
        let model =
            LlamaModel::load_from_file(backend, &settings.model_path, &LlamaModelParams::default())
                .map_err(|e| format!("cannot load model {}: {e}", settings.model_path.display()))?;
        Ok::<_, String>((backend, model))
    })();
    let (backend, model) = match loaded {
        Ok(pair) => pair,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let n_ctx = settings.n_ctx.min(model.n_ctx_train().max(512));
    let threads = i32::try_from(settings.threads.max(1)).unwrap_or(1);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(512)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut ctx = match model.new_context(backend, params) {
        Ok(ctx) => ctx,
        Err(e) => {
            let _ = ready.send(Err(format!("cannot create a {n_ctx}-token context: {e}")));
            return;
        }
    };
    let name = model
        .meta_val_str("general.name")
        .ok()
        .unwrap_or_else(|| model_file_name(&settings.model_path));
    let template = model.chat_template(None).ok();
    let _ = ready.send(Ok(ModelInfo {
        name,
        n_ctx,
        threads: settings.threads.max(1),
        load_seconds: started.elapsed().as_secs_f64(),
    }));
    let mut cached: Vec<LlamaToken> = Vec::new();
    while let Ok(job) = inbox.recv() {
        let result = generate_one(
            &model,
            &mut ctx,
            template.as_ref(),
            n_ctx,
            &mut cached,
            &job,
        );
        let _ = job.reply.send(result);
    }
}

fn model_file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn chat_text(
    model: &LlamaModel,
    template: Option<&llama_cpp_2::model::LlamaChatTemplate>,
    prompt: &Prompt,
) -> Result<String, String> {
    let messages = [("system", &prompt.system), ("user", &prompt.user)]
        .into_iter()
        .map(|(role, content)| {
            LlamaChatMessage::new(role.to_owned(), content.clone())
                .map_err(|e| format!("prompt contains a NUL byte: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    match template {
        Some(t) => model
            .apply_chat_template(t, &messages, true)
            .map_err(|e| format!("cannot apply the model's chat template: {e}")),
        // Models without a template get a plain layout.
        None => Ok(format!("{}\n\n{}\n\n", prompt.system, prompt.user)),
    }
}

fn generate_one(
    model: &LlamaModel,
    ctx: &mut llama_cpp_2::context::LlamaContext<'_>,
    template: Option<&llama_cpp_2::model::LlamaChatTemplate>,
    n_ctx: u32,
    cached: &mut Vec<LlamaToken>,
    job: &Job,
) -> Result<LocalCompletion, String> {
    let vocab = model.vocab();
    let text = chat_text(model, template, &job.prompt)?;
    let tokens = vocab.tokenize(text.as_bytes(), vocab.should_add_bos(), true);
    let budget = job.generation.max_tokens as usize;
    if tokens.is_empty() {
        return Err("the prompt tokenized to nothing".into());
    }
    if tokens.len() + budget > n_ctx as usize {
        return Err(format!(
            "prompt too long for the local model: {} prompt tokens + {budget} completion tokens exceed the {n_ctx}-token context (use a sliced template, fewer max tokens or a larger --ctx)",
            tokens.len()
        ));
    }
    // Reuse the common prefix; at least the last prompt token is recomputed for its logits.
    let common = cached
        .iter()
        .zip(&tokens)
        .take_while(|(a, b)| a == b)
        .count()
        .min(tokens.len() - 1);
    if ctx.kv_cache_seq_rm(0, Some(common as u32), None).is_err() {
        ctx.clear_kv_cache();
        cached.clear();
        return generate_fresh(model, ctx, tokens, cached, job, 0);
    }
    cached.truncate(common);
    generate_fresh(model, ctx, tokens, cached, job, common)
}

fn generate_fresh(
    model: &LlamaModel,
    ctx: &mut llama_cpp_2::context::LlamaContext<'_>,
    tokens: Vec<LlamaToken>,
    cached: &mut Vec<LlamaToken>,
    job: &Job,
    reused: usize,
) -> Result<LocalCompletion, String> {
    let vocab = model.vocab();
    let prefill_start = Instant::now();
    let batch_size = 512usize;
    let mut batch = LlamaBatch::new(batch_size, 1);
    let mut pos = reused;
    while pos < tokens.len() {
        batch.clear();
        let end = (pos + batch_size).min(tokens.len());
        for (i, token) in tokens[pos..end].iter().enumerate() {
            let at = pos + i;
            batch
                .add(*token, at as i32, &[0], at + 1 == tokens.len())
                .map_err(|e| format!("batch: {e}"))?;
        }
        if let Err(e) = ctx.decode(&mut batch) {
            cached.clear();
            ctx.clear_kv_cache();
            return Err(format!("llama.cpp decode failed on the prompt: {e}"));
        }
        cached.extend_from_slice(&tokens[pos..end]);
        pos = end;
    }
    let prefill_ms = prefill_start.elapsed().as_secs_f64() * 1000.0;
    let generation = &job.generation;
    let mut sampler = if generation.temperature > 0.0 {
        LlamaSampler::chain_simple([
            LlamaSampler::temp(generation.temperature),
            LlamaSampler::dist(generation.seed),
        ])
    } else {
        LlamaSampler::greedy()
    };
    let decode_start = Instant::now();
    let mut out: Vec<u8> = Vec::new();
    let mut generated = 0usize;
    let mut finish = "length";
    let mut scanner = ObjectScanner::default();
    let mut logits_index = batch.n_tokens() - 1;
    let mut position = tokens.len();
    while generated < generation.max_tokens as usize {
        let token = sampler.sample(ctx, logits_index);
        sampler.accept(token);
        if vocab.is_eog(token) {
            finish = "stop";
            break;
        }
        generated += 1;
        let piece = vocab.token_to_piece(token, false, None);
        let before = out.len();
        out.extend_from_slice(&piece);
        if let Some(cut) = stop_position(&out, &generation.stop) {
            out.truncate(cut);
            finish = "stop";
            break;
        }
        if generation.stop_after_object && scanner.feed(&out[before..]) {
            finish = "stop";
            break;
        }
        batch.clear();
        batch
            .add(token, position as i32, &[0], true)
            .map_err(|e| format!("batch: {e}"))?;
        if let Err(e) = ctx.decode(&mut batch) {
            cached.clear();
            ctx.clear_kv_cache();
            return Err(format!("llama.cpp decode failed while generating: {e}"));
        }
        cached.push(token);
        position += 1;
        logits_index = 0;
    }
    let decode_ms = decode_start.elapsed().as_secs_f64() * 1000.0;
    Ok(LocalCompletion {
        completion: Completion {
            content: String::from_utf8_lossy(&out).into_owned(),
            usage: Some(Usage {
                prompt_tokens: tokens.len() as u64,
                completion_tokens: generated as u64,
            }),
            finish_reason: Some(finish.to_owned()),
        },
        reused_tokens: reused,
        prefill_ms,
        decode_ms,
    })
}

/// Where the earliest stop sequence starts in `text`, if one occurs.
fn stop_position(text: &[u8], stops: &[String]) -> Option<usize> {
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
pub struct Tokenizer {
    model: LlamaModel,
}

impl Tokenizer {
    /// Loads the vocabulary of a GGUF file.
    pub fn load(path: &Path) -> Result<Tokenizer, String> {
        let params = LlamaModelParams::default().with_vocab_only(true);
        let model = LlamaModel::load_from_file(backend()?, path, &params)
            .map_err(|e| format!("cannot load the tokenizer of {}: {e}", path.display()))?;
        Ok(Tokenizer { model })
    }

    /// Tokens of `text` (no special tokens added).
    pub fn count(&self, text: &str) -> usize {
        self.model
            .vocab()
            .tokenize(text.as_bytes(), false, false)
            .len()
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
}

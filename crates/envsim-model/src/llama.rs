//! The llama.cpp engine (cargo feature `llama`, through `llama-cpp-2`): any GGUF chat model
//! llama.cpp runs. Building it needs cmake and libclang (bindgen), and compiles llama.cpp.
//!
//! The chat template and tokenizer come from the GGUF through llama.cpp; the KV cache of the
//! previous prompt is trimmed to the common prefix (`kv_cache_seq_rm`) and reused.

use crate::constrain::Sampler;
use crate::error::InferenceError;
use crate::local::{
    check_fits, model_file_name, Constraint, EngineError, EngineKind, Generation, Job,
    LocalCompletion, LocalSettings, ModelInfo, Output, Ready,
};
use envsim_core::prompt::Prompt;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::{mpsc, OnceLock};
use std::time::Instant;

fn backend() -> Result<&'static LlamaBackend, InferenceError> {
    static BACKEND: OnceLock<Result<LlamaBackend, InferenceError>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let mut backend = LlamaBackend::init()
                .map_err(|e| InferenceError::Backend(format!("cannot start llama.cpp: {e}")))?;
            backend.void_logs();
            Ok(backend)
        })
        .as_ref()
        .map_err(Clone::clone)
}

pub(crate) fn serve(settings: LocalSettings, inbox: mpsc::Receiver<Job>, ready: Ready) {
    let started = Instant::now();
    let loaded = (|| {
        let backend = backend()?;
        let model =
            LlamaModel::load_from_file(backend, &settings.model_path, &LlamaModelParams::default())
                .map_err(|e| {
                    InferenceError::Backend(format!(
                        "cannot load model {}: {e}",
                        settings.model_path.display()
                    ))
                })?;
        Ok::<_, InferenceError>((backend, model))
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
            let _ = ready.send(Err(InferenceError::Backend(format!(
                "cannot create a {n_ctx}-token context: {e}"
            ))));
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
        engine: EngineKind::Llama,
        warning: None,
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

fn chat_text(
    model: &LlamaModel,
    template: Option<&LlamaChatTemplate>,
    prompt: &Prompt,
) -> Result<String, InferenceError> {
    let messages = [("system", &prompt.system), ("user", &prompt.user)]
        .into_iter()
        .map(|(role, content)| {
            LlamaChatMessage::new(role.to_owned(), content.clone())
                .map_err(|e| InferenceError::Input(format!("prompt contains a NUL byte: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    match template {
        Some(t) => model.apply_chat_template(t, &messages, true).map_err(|e| {
            InferenceError::Vocabulary(format!("cannot apply the model's chat template: {e}"))
        }),
        // Models without a template get a plain layout.
        None => Ok(format!("{}\n\n{}\n\n", prompt.system, prompt.user)),
    }
}

fn generate_one(
    model: &LlamaModel,
    ctx: &mut LlamaContext<'_>,
    template: Option<&LlamaChatTemplate>,
    n_ctx: u32,
    cached: &mut Vec<LlamaToken>,
    job: &Job,
) -> Result<LocalCompletion, EngineError> {
    let vocab = model.vocab();
    let text =
        chat_text(model, template, &job.prompt).map_err(|e| EngineError::Request(e.to_string()))?;
    let tokens = vocab.tokenize(text.as_bytes(), vocab.should_add_bos(), true);
    check_fits(tokens.len(), job.generation.max_tokens as usize, n_ctx)?;
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
        return generate_from(model, ctx, tokens, cached, &job.generation, 0);
    }
    cached.truncate(common);
    generate_from(model, ctx, tokens, cached, &job.generation, common)
}

fn generate_from(
    model: &LlamaModel,
    ctx: &mut LlamaContext<'_>,
    tokens: Vec<LlamaToken>,
    cached: &mut Vec<LlamaToken>,
    generation: &Generation,
    reused: usize,
) -> Result<LocalCompletion, EngineError> {
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
                .map_err(|e| EngineError::Generation(format!("batch: {e}")))?;
        }
        if let Err(e) = ctx.decode(&mut batch) {
            cached.clear();
            ctx.clear_kv_cache();
            return Err(EngineError::Generation(format!(
                "llama.cpp decode failed on the prompt: {e}"
            )));
        }
        cached.extend_from_slice(&tokens[pos..end]);
        pos = end;
    }
    let prefill_ms = prefill_start.elapsed().as_secs_f64() * 1000.0;
    let mut sampler = if generation.temperature > 0.0 {
        LlamaSampler::chain_simple([
            LlamaSampler::temp(generation.temperature),
            LlamaSampler::dist(generation.seed),
        ])
    } else {
        LlamaSampler::greedy()
    };
    // A schema constraint picks tokens with envsim's own sampler over llama.cpp's logits.
    let constraint = Constraint::of(generation)?;
    let texts: Vec<Vec<u8>> = if constraint.is_some() {
        (0..vocab.n_tokens())
            .map(|t| {
                let token = LlamaToken(t);
                if vocab.is_eog(token) {
                    Vec::new()
                } else {
                    vocab.token_to_piece(token, false, None)
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut constrained = Sampler::new(generation.temperature, generation.seed);
    let decode_start = Instant::now();
    let mut out = Output::new(generation, &constraint);
    let mut logits_index = batch.n_tokens() - 1;
    let mut position = tokens.len();
    while out.wants_more() {
        let token = if constraint.is_some() {
            LlamaToken(
                out.next_token(&mut constrained, ctx.get_logits_ith(logits_index), &texts)? as i32,
            )
        } else {
            let token = sampler.sample(ctx, logits_index);
            sampler.accept(token);
            token
        };
        if vocab.is_eog(token) {
            out.end_of_turn();
            break;
        }
        let piece = vocab.token_to_piece(token, false, None);
        if out.push(token.0 as u32, &piece) || !out.wants_more() {
            break;
        }
        batch.clear();
        batch
            .add(token, position as i32, &[0], true)
            .map_err(|e| EngineError::Generation(format!("batch: {e}")))?;
        if let Err(e) = ctx.decode(&mut batch) {
            cached.clear();
            ctx.clear_kv_cache();
            return Err(EngineError::Generation(format!(
                "llama.cpp decode failed while generating: {e}"
            )));
        }
        cached.push(token);
        position += 1;
        logits_index = 0;
    }
    Ok(out.finish(tokens.len(), reused, prefill_ms, decode_start))
}

/// A model's vocabulary alone, loaded by llama.cpp.
pub(crate) struct VocabOnly {
    model: LlamaModel,
}

impl VocabOnly {
    pub(crate) fn load(path: &Path) -> Result<VocabOnly, InferenceError> {
        let params = LlamaModelParams::default().with_vocab_only(true);
        let model = LlamaModel::load_from_file(backend()?, path, &params).map_err(|e| {
            InferenceError::Backend(format!(
                "cannot load the tokenizer of {}: {e}",
                path.display()
            ))
        })?;
        Ok(VocabOnly { model })
    }

    pub(crate) fn encode(&self, text: &str, special: bool) -> Vec<u32> {
        self.model
            .vocab()
            .tokenize(text.as_bytes(), false, special)
            .into_iter()
            .map(|t| t.0 as u32)
            .collect()
    }
}

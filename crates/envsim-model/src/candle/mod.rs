//! The pure-Rust engine (cargo feature `candle`): candle-core reads the GGUF and supplies the
//! quantized CPU kernels; the rest is here — the Qwen2 forward pass ([`qwen2`]), the byte-level
//! BPE tokenizer ([`tokenizer`]), the ChatML chat template, sampling and the generation loop.
//!
//! candle's kernels are selected at compile time: on x86-64 they need AVX2 (the repository's
//! `.cargo/config.toml` builds for `x86-64-v3`); without it they fall back to scalar code,
//! several times slower, and loading the model says so.

pub(crate) mod gguf;
pub mod qwen2;
pub mod tokenizer;

use crate::constrain::Sampler;
use crate::error::InferenceError;
use crate::local::{
    check_fits, model_file_name, Constraint, EngineError, EngineKind, Generation, Job,
    LocalCompletion, LocalSettings, ModelInfo, Output, Ready,
};
use envsim_core::prompt::Prompt;
use qwen2::Qwen2;
use std::sync::mpsc;
use std::time::Instant;
use tokenizer::BpeTokenizer;

/// Prompt tokens computed per forward pass (bounds the activations' memory).
const PREFILL_BATCH: usize = 512;

/// Whether this build uses candle's SIMD kernels for the quantized products.
pub fn simd_kernels() -> Option<&'static str> {
    if cfg!(all(target_arch = "x86_64", target_feature = "avx2")) {
        Some("AVX2")
    } else if cfg!(all(target_arch = "aarch64", target_feature = "neon")) {
        Some("NEON")
    } else if cfg!(all(target_arch = "wasm32", target_feature = "simd128")) {
        Some("SIMD128")
    } else {
        None
    }
}

/// How a chat prompt becomes text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChatTemplate {
    /// `<|im_start|>role\ncontent<|im_end|>\n` per message, then `<|im_start|>assistant\n`
    /// (what Qwen's Jinja template renders for a system and a user message, and what
    /// llama.cpp renders for any template that uses `<|im_start|>`).
    ChatMl,
    /// No template in the file: system and user text separated by blank lines.
    Plain,
}

impl ChatTemplate {
    /// Chooses the rendering for the GGUF's `tokenizer.chat_template`.
    pub fn from_gguf(template: Option<&str>) -> Result<ChatTemplate, InferenceError> {
        match template {
            None => Ok(ChatTemplate::Plain),
            Some(t) if t.contains("<|im_start|>") => Ok(ChatTemplate::ChatMl),
            Some(_) => Err(InferenceError::Unsupported("the model's chat template is not ChatML (no <|im_start|>); the candle engine renders only ChatML templates (Qwen and others) — run this model with the llama.cpp engine (cargo feature `llama`)".into())),
        }
    }

    /// The prompt as text (special tokens written out).
    pub fn render(self, prompt: &Prompt) -> String {
        match self {
            ChatTemplate::ChatMl => format!(
                "<|im_start|>system\n{}<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n",
                prompt.system, prompt.user
            ),
            ChatTemplate::Plain => format!("{}\n\n{}\n\n", prompt.system, prompt.user),
        }
    }
}

pub use crate::constrain::argmax;

/// KV caches an engine keeps (the active one and those set aside).
pub const KV_CACHES: usize = 4;
/// A prompt sharing fewer tokens than this with the active cache sets it aside...
const SET_ASIDE_BELOW: usize = 64;
/// ...when the active cache holds at least this many.
const SET_ASIDE_FROM: usize = 256;

/// A loaded model with its tokenizer, template and thread pool.
pub struct CandleEngine {
    model: Qwen2,
    tokenizer: BpeTokenizer,
    template: ChatTemplate,
    pool: rayon::ThreadPool,
    n_ctx: u32,
    /// Tokens whose keys and values are in the cache.
    cached: Vec<u32>,
    /// Caches of earlier prompts set aside, least recently used first, with their tokens.
    parked: Vec<(Vec<u32>, qwen2::KvCache)>,
    /// Every token's text, built at the first constrained generation.
    token_texts: Vec<Vec<u8>>,
}

impl CandleEngine {
    /// Loads a Qwen2 GGUF.
    pub fn load(settings: &LocalSettings) -> Result<(CandleEngine, ModelInfo), InferenceError> {
        let started = Instant::now();
        let path = &settings.model_path;
        let cannot_load = format!("cannot load model {}", path.display());
        let mut file = std::io::BufReader::new(
            std::fs::File::open(path)
                .map_err(|e| InferenceError::Io(format!("{cannot_load}: {e}")))?,
        );
        let content = candle_core::quantized::gguf_file::Content::read(&mut file)
            .map_err(|e| InferenceError::Format(format!("{cannot_load}: {e}")))?;
        let metadata = &content.metadata;
        let config = qwen2::Config::from_metadata(metadata)?;
        let tokenizer = BpeTokenizer::from_metadata(metadata)?;
        let template = ChatTemplate::from_gguf(
            gguf::get_str(metadata, "tokenizer.chat_template")
                .ok()
                .as_deref(),
        )?;
        // As the llama.cpp engine does: never more than the training context, at least 512.
        let n_ctx = settings
            .n_ctx
            .min(u32::try_from(config.n_ctx_train.max(512)).unwrap_or(u32::MAX));
        let model = Qwen2::load(&content, &mut file, n_ctx as usize)
            .map_err(|e| e.context(&cannot_load))?;
        if model.vocab_size() < tokenizer.vocab_size() {
            return Err(InferenceError::Vocabulary(format!(
                "the output head has {} rows for a {}-token vocabulary",
                model.vocab_size(),
                tokenizer.vocab_size()
            )));
        }
        let threads = settings.threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("envsim-candle-{i}"))
            .build()
            .map_err(|e| {
                InferenceError::Io(format!("cannot start {threads} model threads: {e}"))
            })?;
        let name =
            gguf::get_str(metadata, "general.name").unwrap_or_else(|_| model_file_name(path));
        let info = ModelInfo {
            name,
            n_ctx,
            threads,
            load_seconds: started.elapsed().as_secs_f64(),
            engine: EngineKind::Candle,
            warning: simd_kernels().is_none().then(|| {
                "this build of the candle engine has no SIMD kernels for this CPU (on x86-64 they need AVX2: build with RUSTFLAGS=\"-C target-cpu=x86-64-v3\" or native, as the repository's .cargo/config.toml does); inference is several times slower".to_owned()
            }),
        };
        Ok((
            CandleEngine {
                model,
                tokenizer,
                template,
                pool,
                n_ctx,
                cached: Vec::new(),
                parked: Vec::new(),
                token_texts: Vec::new(),
            },
            info,
        ))
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &BpeTokenizer {
        &self.tokenizer
    }

    /// The prompt's tokens as the engine computes them.
    pub fn prompt_tokens(&self, prompt: &Prompt) -> Vec<u32> {
        let text = self.template.render(prompt);
        let mut tokens: Vec<u32> = self.tokenizer.add_bos().into_iter().collect();
        tokens.extend(self.tokenizer.encode(&text, true));
        tokens
    }

    fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, InferenceError> {
        let model = &mut self.model;
        let result = self.pool.install(|| model.forward(tokens));
        match result {
            Ok(logits) => {
                self.cached.extend_from_slice(tokens);
                Ok(logits)
            }
            Err(e) => {
                self.model.truncate(0);
                self.cached.clear();
                Err(e)
            }
        }
    }

    /// Computes `tokens` after the longest prefix already in the KV cache (at least the last
    /// token is recomputed, for its logits); returns the last token's logits and how many
    /// tokens were reused.
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<(Vec<f32>, usize), InferenceError> {
        if tokens.is_empty() {
            return Err(InferenceError::Input(
                "the prompt tokenized to nothing".into(),
            ));
        }
        let common = self.choose_cache(tokens).min(tokens.len() - 1);
        self.cached.truncate(common);
        self.model.truncate(common);
        let mut logits = Vec::new();
        for chunk in tokens[common..].chunks(PREFILL_BATCH) {
            logits = self.forward(chunk)?;
        }
        Ok((logits, common))
    }

    /// Makes the cache sharing the longest prefix with `tokens` the model's, and returns the
    /// length of that prefix. Prompts of different kinds that alternate on one engine (an
    /// agent's and a simulator's, in `envsim synth`) would otherwise each discard the other's
    /// cache: a prompt sharing (almost) nothing with the active cache sets it aside, and a
    /// later prompt continuing it takes it back. At most [`KV_CACHES`] caches are kept, the
    /// least recently used given up first.
    fn choose_cache(&mut self, tokens: &[u32]) -> usize {
        let common = |cached: &[u32]| {
            cached
                .iter()
                .zip(tokens)
                .take_while(|(a, b)| a == b)
                .count()
        };
        let active = common(&self.cached);
        let best = self
            .parked
            .iter()
            .enumerate()
            .map(|(i, (cached, _))| (i, common(cached)))
            .max_by_key(|&(i, n)| (n, i));
        if let Some((i, n)) = best.filter(|&(_, n)| n > active) {
            let (mut cached, mut cache) = self.parked.remove(i);
            self.model.swap_cache(&mut cache);
            std::mem::swap(&mut self.cached, &mut cached);
            self.parked.push((cached, cache));
            return n;
        }
        if KV_CACHES > 1 && active < SET_ASIDE_BELOW && self.cached.len() >= SET_ASIDE_FROM {
            let mut fresh = if self.parked.len() + 1 >= KV_CACHES {
                let (_, mut cache) = self.parked.remove(0);
                cache.clear();
                cache
            } else {
                self.model.new_cache()
            };
            self.model.swap_cache(&mut fresh);
            let cached = std::mem::take(&mut self.cached);
            self.parked.push((cached, fresh));
            return 0;
        }
        active
    }

    /// Appends one token and returns the logits after it.
    pub fn step(&mut self, token: u32) -> Result<Vec<f32>, InferenceError> {
        self.forward(&[token])
    }

    /// Generates a completion, reusing the cached prefix of the previous prompt.
    pub fn generate(
        &mut self,
        prompt: &Prompt,
        generation: &Generation,
    ) -> Result<LocalCompletion, EngineError> {
        let tokens = self.prompt_tokens(prompt);
        check_fits(tokens.len(), generation.max_tokens as usize, self.n_ctx)?;
        let prefill_start = Instant::now();
        let (mut logits, reused) = self
            .prefill(&tokens)
            .map_err(|e| EngineError::Generation(format!("the model failed on the prompt: {e}")))?;
        let prefill_ms = prefill_start.elapsed().as_secs_f64() * 1000.0;
        let decode_start = Instant::now();
        let constraint = Constraint::of(generation)?;
        if constraint.is_some() && self.token_texts.is_empty() {
            self.token_texts = (0..self.tokenizer.vocab_size() as u32)
                .map(|t| self.tokenizer.decode_token(t))
                .collect();
        }
        let mut sampler = Sampler::new(generation.temperature, generation.seed);
        let mut out = Output::new(generation, &constraint);
        while out.wants_more() {
            let token = out.next_token(&mut sampler, &logits, &self.token_texts)?;
            if self.tokenizer.is_end_of_generation(token) {
                out.end_of_turn();
                break;
            }
            if out.push(token, &self.tokenizer.decode_token(token)) || !out.wants_more() {
                break;
            }
            logits = self.step(token).map_err(|e| {
                EngineError::Generation(format!("the model failed while generating: {e}"))
            })?;
        }
        Ok(out.finish(tokens.len(), reused, prefill_ms, decode_start))
    }
}

pub(crate) fn serve(settings: LocalSettings, inbox: mpsc::Receiver<Job>, ready: Ready) {
    let mut engine = match CandleEngine::load(&settings) {
        Ok((engine, info)) => {
            let _ = ready.send(Ok(info));
            engine
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    while let Ok(job) = inbox.recv() {
        let result = engine.generate(&job.prompt, &job.generation);
        let _ = job.reply.send(result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_is_rendered_for_im_start_templates_only() {
        let prompt = Prompt {
            system: "S".into(),
            user: "U".into(),
        };
        let t = ChatTemplate::from_gguf(Some("{% for m in messages %}<|im_start|>...")).unwrap();
        assert_eq!(
            t.render(&prompt),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(
            ChatTemplate::from_gguf(None).unwrap().render(&prompt),
            "S\n\nU\n\n"
        );
        let err = ChatTemplate::from_gguf(Some("{{ bos_token }}[INST]")).unwrap_err();
        assert!(
            matches!(&err, InferenceError::Unsupported(m) if m.contains("ChatML") && m.contains("llama")),
            "{err}"
        );
    }
}

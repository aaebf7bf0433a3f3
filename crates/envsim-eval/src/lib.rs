//! # envsim-eval
//!
//! The evaluation harness (an adapter around the pure core): simulator backends, the
//! concurrent crash-safe runner, the SQLite run store with its response cache and audit log,
//! reports with confidence intervals, comparisons, the cliff chart and OpenAI Batch files.
//!
//! Data flow of `envsim eval`: benchmark → [`runner::run`] (per sample: render the prompt,
//! look up the cache, send with rate limits and retries, score with
//! `envsim_core::score::PreparedSample`, commit through the [`store::StoreWriter`]) →
//! [`report::RunReport::load`] → table/JSON/Markdown.

pub mod batch;
pub mod chart;
pub mod config;
// The OpenAI-compatible client is `envsim-llm`'s; the runner and batch files use it.
pub(crate) use envsim_llm::openai;
pub mod prepare;
pub mod records;
pub mod report;
pub mod runner;
pub mod scoring;
pub mod store;

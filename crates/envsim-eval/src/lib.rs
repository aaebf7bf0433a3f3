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
/// The local engine, now in `envsim-model` (re-exported so that `envsim_eval::local` keeps
/// working).
#[cfg(feature = "local")]
pub use envsim_model::local;
/// Local model files, now in `envsim-model` (re-exported so that `envsim_eval::model` keeps
/// working).
pub use envsim_model::model;
pub mod openai;
pub mod prepare;
pub mod records;
pub mod report;
pub mod runner;
pub mod scoring;
pub mod store;

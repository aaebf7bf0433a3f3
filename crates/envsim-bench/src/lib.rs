//! # envsim-bench
//!
//! Benchmark construction in one reproducible pipeline: a scenario [`driver`] generates calls
//! from tool schemas and the current state, [`collect`] executes seeded random walks in the
//! sandbox (flagging clock- and seed-dependent output), [`composition`] fills a stratified
//! composition with environment coverage first, and [`output`] writes the reference JSON
//! format, envsim's JSONL and a datasheet with the benchmark's fingerprint.
//! [`slice_check`] is the prompt-slicing oracle over a benchmark (`envsim bench slice-check`);
//! [`verify`] replays a benchmark from its own file (`envsim bench verify`, and the last step
//! of `envsim bench build`). [`file_audit`] audits a file of trajectories or transcripts
//! record by record (`envsim audit FILE`), reading them with [`records`]. [`agent_workflows`]
//! is the audit's second validation set, written independently of its injector.

pub mod agent_workflows;
pub mod audit_check;
pub mod composition;
pub mod export;
pub mod file_audit;
pub mod learn;
pub mod output;
pub mod records;
pub mod replay;
pub mod slice_check;
pub mod trajectories;
pub mod verify;

//! # envsim-synth
//!
//! Agent training trajectories synthesized against simulated environments (the SIMCON-DATA
//! proposal's product end): tasks × agent × simulated environment → trajectories, each with
//! its provenance and its consistency scores.
//!
//! - [`task`]: tasks, their sources (files, a package's `tasks.jsonl`, executed walks, a model
//!   writing them) and families, and the adversarial task mix.
//! - [`agent`]: agents (OpenAI-compatible function calling, a prompted text model — the local
//!   model, constrained to tool-call JSON — and the scripted test double) and the user side.
//! - [`run`]: one task's conversation over an `envsim-sim` session, then SCS, SpecCS, DCS and,
//!   in code mode, the truth.
//! - [`store`]: the resumable SQLite store of runs.
//! - [`export`]: the training formats; [`curation`]: `envsim curate`'s workflow (gate,
//!   selection, batches, curriculum, exports, the typed datasheet).
//!
//! The CLI's `envsim synth` schedules tasks concurrently over these pieces.

pub mod agent;
pub mod curation;
pub mod envgen;
pub mod error;
pub mod export;
pub mod gate;
pub mod mutants;
pub mod run;
pub mod store;
pub mod task;

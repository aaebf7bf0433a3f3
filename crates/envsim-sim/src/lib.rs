//! # envsim-sim
//!
//! Consistency-anchored simulated environments: a [`session::Session`] holds an environment
//! (its code, or only its API description), an explicit JSON state, the history and its
//! simulators; each step is predicted, validated against the specification and the state
//! constraint graph ([`check`]), regenerated with the problems stated, escalated to the
//! executor or a second model, verified at an adaptive rate ([`verify`]) and recorded with its
//! provenance. [`backend`] holds the simulators (executor, OpenAI-compatible endpoint, local
//! model); [`faulty`] a test double with known error rates, for measurements.

pub mod backend;
pub mod check;
pub mod environment;
pub mod faulty;
pub mod measure;
pub mod reference;
pub mod session;
pub mod verify;

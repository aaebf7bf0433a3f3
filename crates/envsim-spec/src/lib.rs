//! # envsim-spec
//!
//! API specifications in one pure place (no I/O, no async), below everything that checks or
//! writes them (the executor, benchmarks, sessions, the audit):
//!
//! - [`arguments`]: a tool list's argument schemas (OpenAI function `parameters`), compiled
//!   once, checking a call before any code runs;
//! - [`checks`]: `SpecChecks`, an API description (read by `envsim_core::apispec`) compiled
//!   into argument, response and status checks, the effects its paths declare, and the
//!   vocabulary of its success schemas;
//! - [`openapi`]: the OpenAPI 3.1 document of an environment, generated from its tools and
//!   executed walks (what `envsim env openapi` writes and environment-free sessions are given).

pub mod arguments;
pub mod checks;
pub mod openapi;

//! # envsim-core
//!
//! The pure core of envsim: everything needed to score an LLM environment simulator, with no
//! I/O and no async. Given a transition `(config_before, action, observation, config_after)`
//! and a model's raw output, it computes Feedback Match and Config Match in two lanes — the
//! reference evaluator's own scores reproduced from the raw text ([`reference`](mod@reference),
//! on the Python object model of [`python`]) and envsim's strict reading — plus field-level
//! precision and recall, an error taxonomy, and the reference stratum.
//!
//! ```
//! use envsim_core::prelude::*;
//! use serde_json::json;
//!
//! let transition = Transition {
//!     id: "0".into(),
//!     origin: Origin { record: 0, step: None },
//!     env_id: None,
//!     task_id: None,
//!     action: Action { name: "pay".into(), arguments: json!({"order_id": "O1"}).as_object().unwrap().clone() },
//!     observation: json!("{'success': True, 'message': 'paid'}"),
//!     config_before: json!({"orders": {"O1": {"status": "new"}}}),
//!     config_after: json!({"orders": {"O1": {"status": "paid"}}}),
//!     stored_change_count: None,
//!     env_code: String::new(),
//! };
//! let mut sample = PreparedSample::new(transition);
//! let answer = r#"{"feedback": "{'success': True, 'message': 'paid'}",
//!     "config_changes": [{"type": "modify", "path": "orders.O1.status", "value": "paid"}]}"#;
//! let score = sample.score(&Prediction::Raw(answer.into()), None);
//! assert!(score.fm_ref && score.cm_ref && score.fm_strict && score.cm_strict);
//! assert_eq!(score.stratum, Stratum::Simple1);
//!
//! // The same answer in prose: envsim's strict lane still reads it; the reference evaluator's
//! // parser cuts the nested object at its first `}` and fails, so the reference lane says so.
//! let score = sample.score(&Prediction::Raw(format!("Sure! {answer} Done.")), None);
//! assert!(score.cm_strict && !score.cm_ref);
//! assert_eq!(score.reference_outcome, envsim_core::reference::ReferenceOutcome::FailedParse);
//! ```
//!
//! Module map (every module):
//! - data model: [`sample`] (a transition and a prediction for it), [`pointer`](mod@pointer)
//!   and [`path`] (locations), [`delta`], [`apply`], [`diff`] and [`state_patch`] (state
//!   changes and states written as changes), [`problem`] (located problems of a predicted
//!   delta), [`clock`] (environment time), [`convention`] (how a package's code is written);
//! - reading model output and Python: [`literal`], [`extract`], [`python`] (CPython's
//!   objects, `json.loads`, `ast.literal_eval`, `repr`, `==`; and JSON values spelled as
//!   CPython's `repr` and `json.dumps` spell them), [`answer`] (tool
//!   answers in every form a transcript carries), [`transcript`] (function-calling
//!   transcripts read into calls), [`apispec`] (OpenAPI and OpenAI tool schemas read into tool
//!   specifications), [`schema_learn`] (response schemas learned from examples);
//! - metrics: [`equality`], [`reference`](mod@reference), [`score`], [`strata`], [`report`]
//!   (aggregation), [`stats`] (means, percentiles, bootstrap intervals, paired tests),
//!   [`baseline`] (null and oracle simulators), [`formats`] (benchmark and prediction files),
//!   [`outcome`] (how a package's observations say success or failure);
//! - prompts and slicing: [`prompt`] (templates and the training target), [`slice`](mod@slice) (the code
//!   and state one tool call can use, and the footprint oracle);
//! - consistency: [`audit`] (the state constraint graph with and without states, effects,
//!   checks, fault injection, drift, bias, agreement, the typed summary), [`curate`] (curation
//!   of synthesized trajectories);
//! - utilities: [`rng`] (a seedable generator), [`hex`] (lowercase hex of digests).

// No panics on any input: library code handles every `None` and `Err` (unit tests may unwrap).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod answer;
pub mod apispec;
pub mod apply;
pub mod audit;
pub mod baseline;
pub mod checker;
pub mod clock;
pub mod convention;
pub mod curate;
pub mod delta;
pub mod diff;
pub mod equality;
pub mod extract;
pub mod formats;
pub mod hex;
pub mod literal;
pub mod outcome;
pub mod path;
pub mod pointer;
pub mod problem;
pub mod prompt;
pub mod python;
pub mod reference;
pub mod report;
pub mod rng;
pub mod sample;
pub mod schema_learn;
pub mod score;
pub mod slice;
pub mod state_patch;
pub mod stats;
pub mod strata;
pub mod transcript;

/// The types most callers need.
pub mod prelude {
    pub use crate::baseline::Baseline;
    pub use crate::delta::Delta;
    pub use crate::pointer::JsonPointer;
    pub use crate::report::Report;
    pub use crate::sample::{Action, Origin, Prediction, Transition, Usage};
    pub use crate::score::{PreparedSample, SampleScore};
    pub use crate::strata::Stratum;
}

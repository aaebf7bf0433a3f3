//! Built-in reference lines for every table: the *null* simulator and the *oracle*.

use crate::diff::{changes_to_json, fine_diff, PathStyle};
use crate::sample::{Prediction, Transition};
use serde_json::json;

/// Which built-in simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    /// Predicts "no change" and an empty feedback: the floor every model must beat. Its CM-strict
    /// is exactly the share of transitions whose state does not change.
    Null,
    /// Predicts the ground truth: the observation as feedback and the exact fine diff as the
    /// change list (key-list paths, which both envsim and the reference scorer read). Its
    /// CM-reference falls short of 100% exactly where the reference scorer rejects correct
    /// answers (removals, keys containing dots), which makes those flaws visible.
    Oracle,
}

impl Baseline {
    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Baseline::Null => "null",
            Baseline::Oracle => "oracle",
        }
    }

    /// The prediction this baseline makes for a transition.
    pub fn predict(self, transition: &Transition) -> Prediction {
        match self {
            Baseline::Null => Prediction::Parsed(json!({"feedback": "", "config_changes": []})),
            Baseline::Oracle => {
                let changes = changes_to_json(
                    &fine_diff(&transition.config_before, &transition.config_after),
                    PathStyle::Keys,
                );
                Prediction::Parsed(json!({
                    "feedback": transition.observation,
                    "config_changes": changes,
                }))
            }
        }
    }
}

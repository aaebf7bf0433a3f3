//! Cross-model verification with adaptive frequency (pure): a second simulator answers a step
//! with probability p(tool), and p follows each tool's running agreement — tools the two models
//! agree on are verified less, tools they disagree on more. Every decision is logged in the
//! step's provenance.

use serde::Serialize;
use std::collections::BTreeMap;

/// Bounds of the verification probability.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct VerifyPolicy {
    /// The least probability (however well the models agree).
    pub floor: f64,
    /// The greatest probability, and the probability until `warmup` verifications are known.
    pub ceiling: f64,
    /// Verifications of a tool before its agreement steers its probability.
    pub warmup: usize,
}

impl Default for VerifyPolicy {
    fn default() -> Self {
        VerifyPolicy {
            floor: 0.1,
            ceiling: 1.0,
            warmup: 3,
        }
    }
}

/// Per tool: verifications and agreements so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Agreement {
    /// Steps a second simulator answered.
    pub verified: usize,
    /// Of those, the answers agreed.
    pub agreed: usize,
}

/// The running agreement of every tool, and the probability it implies.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AdaptiveVerifier {
    /// Its bounds.
    pub policy: VerifyPolicy,
    /// Per tool.
    pub tools: BTreeMap<String, Agreement>,
}

impl AdaptiveVerifier {
    /// A verifier with no history.
    pub fn new(policy: VerifyPolicy) -> Self {
        AdaptiveVerifier {
            policy,
            tools: BTreeMap::new(),
        }
    }

    /// The probability of verifying a step of `tool`: the ceiling during warm-up, then the
    /// share of disagreements (with one agreement and one disagreement added, so a perfect
    /// record does not drop to zero at once), clamped to the bounds.
    pub fn probability(&self, tool: &str) -> f64 {
        let p = &self.policy;
        match self.tools.get(tool) {
            Some(a) if a.verified >= p.warmup => {
                let disagreement = (a.verified - a.agreed + 1) as f64 / (a.verified + 2) as f64;
                disagreement.clamp(p.floor, p.ceiling)
            }
            _ => p.ceiling,
        }
    }

    /// Records one verification.
    pub fn record(&mut self, tool: &str, agreed: bool) {
        let a = self.tools.entry(tool.to_owned()).or_default();
        a.verified += 1;
        a.agreed += usize::from(agreed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_lowers_the_probability_and_disagreement_raises_it() {
        let mut v = AdaptiveVerifier::new(VerifyPolicy {
            floor: 0.1,
            ceiling: 0.9,
            warmup: 3,
        });
        assert_eq!(v.probability("get"), 0.9);
        for _ in 0..2 {
            v.record("get", true);
        }
        assert_eq!(v.probability("get"), 0.9, "still warming up");
        v.record("get", true);
        // (0 + 1) / (3 + 2)
        assert!((v.probability("get") - 0.2).abs() < 1e-12);
        for _ in 0..20 {
            v.record("get", true);
        }
        assert_eq!(v.probability("get"), 0.1);
        for _ in 0..3 {
            v.record("pay", false);
        }
        // (3 + 1) / (3 + 2)
        assert!((v.probability("pay") - 0.8).abs() < 1e-12);
        v.record("pay", true);
        // (3 + 1) / (4 + 2)
        assert!((v.probability("pay") - 4.0 / 6.0).abs() < 1e-12);
    }
}

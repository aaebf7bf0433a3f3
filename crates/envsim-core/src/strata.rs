//! The reference benchmark's strata: action outcome × |Δ| × argument count.
//!
//! Classification follows the reference evaluator's `classify_step`: a business failure
//! (`success` is `False`) is `failure` whatever its |Δ|; a success with |Δ| = 0 is
//! `no_change_args0`/`no_change_args1` (two or more arguments fall outside every stratum);
//! |Δ| 1–2 is simple, 3–6 medium, 7–12 difficult; anything else is unclassified and counts only
//! in the overall line.

use serde::Serialize;
use std::fmt;

/// A stratum of the reference layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Stratum {
    /// `success` is false.
    Failure,
    /// Success, |Δ| = 0, no arguments.
    NoChangeArgs0,
    /// Success, |Δ| = 0, one argument.
    NoChangeArgs1,
    /// Success, |Δ| = 1.
    Simple1,
    /// Success, |Δ| = 2.
    Simple2,
    /// Success, |Δ| ∈ 3..=6 (the value).
    Medium(u8),
    /// Success, |Δ| ∈ 7..=12 (the value).
    Difficult(u8),
    /// Outside every reference stratum (undetermined outcome, |Δ| = 0 with ≥ 2 arguments,
    /// |Δ| > 12).
    Unclassified,
}

/// The two big groups of the reference tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Group {
    /// Failure and no-change strata.
    FailNoChange,
    /// Simple, medium and difficult strata.
    StateChange,
}

impl Stratum {
    /// Classifies a transition. `success` is `None` when the observation has no boolean
    /// `success` field.
    pub fn classify(success: Option<bool>, change_count: usize, args_count: usize) -> Stratum {
        match (success, change_count) {
            (Some(false), _) => Stratum::Failure,
            (Some(true), 0) => match args_count {
                0 => Stratum::NoChangeArgs0,
                1 => Stratum::NoChangeArgs1,
                _ => Stratum::Unclassified,
            },
            (Some(true), 1) => Stratum::Simple1,
            (Some(true), 2) => Stratum::Simple2,
            (Some(true), n @ 3..=6) => Stratum::Medium(n as u8),
            (Some(true), n @ 7..=12) => Stratum::Difficult(n as u8),
            _ => Stratum::Unclassified,
        }
    }

    /// The key of the stratum in reports: `failure`, `no_change_args0`, `no_change_args1`,
    /// `simple_1`, `simple_2`, `medium_3`…`medium_6`, `difficult_7_12`, `unclassified`.
    pub fn key(self) -> &'static str {
        match self {
            Stratum::Failure => "failure",
            Stratum::NoChangeArgs0 => "no_change_args0",
            Stratum::NoChangeArgs1 => "no_change_args1",
            Stratum::Simple1 => "simple_1",
            Stratum::Simple2 => "simple_2",
            Stratum::Medium(3) => "medium_3",
            Stratum::Medium(4) => "medium_4",
            Stratum::Medium(5) => "medium_5",
            Stratum::Medium(_) => "medium_6",
            Stratum::Difficult(_) => "difficult_7_12",
            Stratum::Unclassified => "unclassified",
        }
    }

    /// The stratum whose [`Stratum::key`] is `key`; `change_count` gives the exact |Δ| of the
    /// medium and difficult strata (`medium_6` and `difficult_7_12` cover ranges). `None` for an
    /// unknown key.
    pub fn from_key(key: &str, change_count: usize) -> Option<Stratum> {
        let clamp = |lo: usize, hi: usize| change_count.clamp(lo, hi) as u8;
        Some(match key {
            "failure" => Stratum::Failure,
            "no_change_args0" => Stratum::NoChangeArgs0,
            "no_change_args1" => Stratum::NoChangeArgs1,
            "simple_1" => Stratum::Simple1,
            "simple_2" => Stratum::Simple2,
            "medium_3" => Stratum::Medium(3),
            "medium_4" => Stratum::Medium(4),
            "medium_5" => Stratum::Medium(5),
            "medium_6" => Stratum::Medium(6),
            "difficult_7_12" => Stratum::Difficult(clamp(7, 12)),
            "unclassified" => Stratum::Unclassified,
            _ => return None,
        })
    }

    /// For difficult samples, the per-|Δ| sub-stratum key (`difficult_7`…`difficult_12`).
    pub fn detail_key(self) -> Option<&'static str> {
        const KEYS: [&str; 6] = [
            "difficult_7",
            "difficult_8",
            "difficult_9",
            "difficult_10",
            "difficult_11",
            "difficult_12",
        ];
        match self {
            Stratum::Difficult(n) => KEYS.get(usize::from(n).checked_sub(7)?).copied(),
            _ => None,
        }
    }

    /// The big group, if any.
    pub fn group(self) -> Option<Group> {
        match self {
            Stratum::Failure | Stratum::NoChangeArgs0 | Stratum::NoChangeArgs1 => {
                Some(Group::FailNoChange)
            }
            Stratum::Unclassified => None,
            _ => Some(Group::StateChange),
        }
    }

    /// The primary strata in report order.
    pub fn primary() -> [Stratum; 10] {
        [
            Stratum::Failure,
            Stratum::NoChangeArgs0,
            Stratum::NoChangeArgs1,
            Stratum::Simple1,
            Stratum::Simple2,
            Stratum::Medium(3),
            Stratum::Medium(4),
            Stratum::Medium(5),
            Stratum::Medium(6),
            Stratum::Difficult(7),
        ]
    }
}

impl fmt::Display for Stratum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

impl Group {
    /// Report key: `fail_no_change` or `state_change`.
    pub fn key(self) -> &'static str {
        match self {
            Group::FailNoChange => "fail_no_change",
            Group::StateChange => "state_change",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_matches_reference_rules() {
        assert_eq!(Stratum::classify(Some(false), 4, 3), Stratum::Failure);
        assert_eq!(Stratum::classify(Some(true), 0, 0), Stratum::NoChangeArgs0);
        assert_eq!(Stratum::classify(Some(true), 0, 1), Stratum::NoChangeArgs1);
        assert_eq!(Stratum::classify(Some(true), 0, 2), Stratum::Unclassified);
        assert_eq!(Stratum::classify(Some(true), 2, 5), Stratum::Simple2);
        assert_eq!(Stratum::classify(Some(true), 6, 0), Stratum::Medium(6));
        assert_eq!(Stratum::classify(Some(true), 12, 0), Stratum::Difficult(12));
        assert_eq!(Stratum::classify(Some(true), 13, 0), Stratum::Unclassified);
        assert_eq!(Stratum::classify(None, 1, 0), Stratum::Unclassified);
    }

    #[test]
    fn from_key_inverts_key() {
        for success in [Some(true), Some(false), None] {
            for n in 0..15 {
                for args in 0..3 {
                    let s = Stratum::classify(success, n, args);
                    assert_eq!(Stratum::from_key(s.key(), n), Some(s), "{s:?}");
                }
            }
        }
        assert_eq!(
            Stratum::from_key("difficult_7_12", 3),
            Some(Stratum::Difficult(7))
        );
        assert_eq!(Stratum::from_key("nope", 1), None);
    }

    #[test]
    fn keys_and_groups() {
        let keys: Vec<&str> = Stratum::primary().iter().map(|s| s.key()).collect();
        assert_eq!(
            keys,
            [
                "failure",
                "no_change_args0",
                "no_change_args1",
                "simple_1",
                "simple_2",
                "medium_3",
                "medium_4",
                "medium_5",
                "medium_6",
                "difficult_7_12"
            ]
        );
        assert_eq!(Stratum::Difficult(9).detail_key(), Some("difficult_9"));
        assert_eq!(Stratum::Medium(4).detail_key(), None);
        assert_eq!(Stratum::NoChangeArgs1.group(), Some(Group::FailNoChange));
        assert_eq!(Stratum::Difficult(7).group(), Some(Group::StateChange));
        assert_eq!(Stratum::Unclassified.group(), None);
    }
}

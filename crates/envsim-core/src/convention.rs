//! How an environment's code is written: a package manifest's `"convention"` (envs/README.md,
//! "Conventions"). The executor runs, the slicer reads and the outcome rules default by it.

use crate::outcome::OutcomeRule;

/// How an environment's tools are written.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Convention {
    /// An EnvScaler-style class constructed from the state, whose top-level keys become
    /// instance attributes; each public method is a tool; the state is its public attributes.
    #[default]
    Class,
    /// Module-level tool functions `def tool(data, **kwargs)` over one JSON database (the
    /// state), which they mutate in place; they usually return strings.
    Database,
}

impl Convention {
    /// The name used in manifests, benchmark records and the runner protocol.
    pub fn as_str(self) -> &'static str {
        match self {
            Convention::Class => "class",
            Convention::Database => "database",
        }
    }

    /// Parses `class` or `database`.
    pub fn parse(name: &str) -> Option<Convention> {
        match name {
            "class" => Some(Convention::Class),
            "database" => Some(Convention::Database),
            _ => None,
        }
    }

    /// True for [`Convention::Class`] (the default, left out of written manifests and records).
    pub fn is_class(&self) -> bool {
        *self == Convention::Class
    }

    /// The outcome rule of a package of this convention that names none: `success_key` for
    /// `class`, `error_prefix` "Error" for `database`.
    pub fn default_outcome(self) -> OutcomeRule {
        match self {
            Convention::Class => OutcomeRule::success_key(),
            Convention::Database => OutcomeRule::error_prefix(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for c in [Convention::Class, Convention::Database] {
            assert_eq!(Convention::parse(c.as_str()), Some(c));
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
        assert_eq!(Convention::parse("Class"), None);
        assert!(Convention::default().is_class());
    }
}

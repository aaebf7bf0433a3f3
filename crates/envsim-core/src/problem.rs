//! Located problems met while reading or applying a predicted delta.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How bad a problem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The operation was applied, with an interpretation the model did not state exactly
    /// (e.g. `modify` of a key that did not exist was applied as an add).
    Warning,
    /// The operation could not be applied; the prediction counts as a malformed delta.
    Error,
}

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// The change list itself is not a list.
    MalformedDelta,
    /// One change entry cannot be understood (shape, type word, missing value or path).
    MalformedOp,
    /// The path cannot be resolved (syntax, ambiguity, missing intermediate).
    BadPath,
    /// The parent of the target does not exist.
    MissingParent,
    /// The parent of the target is a scalar.
    ParentNotContainer,
    /// A delete (or move source) names something that is not there.
    DeleteAbsent,
    /// A modify names an object key that is not there; applied as an add.
    ModifyAbsent,
    /// A list index is not a number or is out of range.
    BadListIndex,
    /// The root of the state cannot be deleted or moved.
    RootTarget,
    /// A JSON Patch `test` did not hold.
    TestFailed,
    /// A `move` into its own subtree.
    MoveIntoSelf,
}

impl ProblemKind {
    /// Stable snake_case code, as serialised.
    pub fn code(self) -> &'static str {
        match self {
            ProblemKind::MalformedDelta => "malformed_delta",
            ProblemKind::MalformedOp => "malformed_op",
            ProblemKind::BadPath => "bad_path",
            ProblemKind::MissingParent => "missing_parent",
            ProblemKind::ParentNotContainer => "parent_not_container",
            ProblemKind::DeleteAbsent => "delete_absent",
            ProblemKind::ModifyAbsent => "modify_absent",
            ProblemKind::BadListIndex => "bad_list_index",
            ProblemKind::RootTarget => "root_target",
            ProblemKind::TestFailed => "test_failed",
            ProblemKind::MoveIntoSelf => "move_into_self",
        }
    }
}

/// One problem, located by change index and path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// 0-based index of the change entry in the model's list (`None`: the list as a whole).
    pub op: Option<usize>,
    /// The path as the model wrote it, when there is one.
    pub path: Option<String>,
    /// Category.
    pub kind: ProblemKind,
    /// Warning or error.
    pub severity: Severity,
    /// Human-readable explanation.
    pub message: String,
}

impl Problem {
    /// An error-severity problem.
    pub fn error(
        op: Option<usize>,
        path: Option<String>,
        kind: ProblemKind,
        message: String,
    ) -> Self {
        Problem {
            op,
            path,
            kind,
            severity: Severity::Error,
            message,
        }
    }

    /// A warning-severity problem.
    pub fn warning(
        op: Option<usize>,
        path: Option<String>,
        kind: ProblemKind,
        message: String,
    ) -> Self {
        Problem {
            op,
            path,
            kind,
            severity: Severity::Warning,
            message,
        }
    }

    /// True for errors.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(op) = self.op {
            write!(f, "change {op}")?;
        } else {
            write!(f, "change list")?;
        }
        if let Some(path) = &self.path {
            write!(f, " ({path:?})")?;
        }
        write!(f, ": {}", self.message)
    }
}

//! Coverage of environment code: which lines and branches of an environment's own functions a
//! call ran.
//!
//! A branch is measured as coverage.py measures branches, by line arcs: every conditional jump
//! of the environment's functions leaves its line for one line when taken and another when not,
//! and those two arcs are the branch's outcomes ([`CodeMap::branches`]). A call asked for
//! coverage ([`crate::Call::coverage`]) reports the arcs it ran ([`CallCoverage`]); the branch
//! outcomes it reached are the arcs that are also branch outcomes. Only the tool call is traced,
//! never the construction of the instance, so a call always reports the same coverage.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// A move of execution from one source line to another within one function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LineArc {
    /// The line left.
    pub from: u32,
    /// The line reached next.
    pub to: u32,
}

impl std::fmt::Display for LineArc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}→{}", self.from, self.to)
    }
}

/// The line that opens a region of code a package carries that is not the environment's own
/// (an importer's adapter, stand-ins for a framework the environment imports). Coverage,
/// boundary probes and mutants leave such regions out, so that they speak of the environment's
/// code alone.
pub const ADAPTER_BEGIN: &str = "# envsim: adapter begin";
/// The line that closes an adapter region (one left open runs to the end of the code).
pub const ADAPTER_END: &str = "# envsim: adapter end";

/// Whether each line of `code` (index 0 is line 1) lies in an adapter region, markers included
/// ([`ADAPTER_BEGIN`], [`ADAPTER_END`], each a line of its own, spaces around it ignored).
pub fn adapter_lines(code: &str) -> Vec<bool> {
    let mut inside = false;
    code.lines()
        .map(|line| {
            let marker = line.trim();
            if marker == ADAPTER_BEGIN {
                inside = true;
            }
            let this = inside;
            if marker == ADAPTER_END {
                inside = false;
            }
            this
        })
        .collect()
}

/// What an environment's code offers to cover: the executable lines of its functions and the
/// outcomes of their branches (the class convention's constructor left out: it runs before the
/// call, outside the trace), and the numbers its functions compare their parameters with.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CodeMap {
    /// Lines that hold code of a function.
    pub lines: BTreeSet<u32>,
    /// Branch outcomes: for each conditional jump, the arc taken and the arc fallen through.
    pub branches: BTreeSet<LineArc>,
    /// Every comparison of a function's parameter, or of its length, with a number written in
    /// the code, once each, in source order.
    pub comparisons: Vec<Comparison>,
}

/// A comparison of a parameter with a number written in the code, read as `parameter
/// operator number` (`5 <= len(title)` is `len(title) >= 5`): where a value one off changes
/// what the function does, and where a wrong bound hides from calls that stay clear of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The function it is in (a tool, or a helper whose parameter may share a tool's name).
    pub function: String,
    /// The parameter compared.
    pub parameter: String,
    /// Whether the parameter's length is compared (`len(title.strip()) < 5`), not its value.
    pub length: bool,
    /// `<`, `<=`, `>`, `>=`, `==` or `!=`.
    pub operator: String,
    /// The number.
    pub number: f64,
}

/// Reads `[[function, parameter, length, operator, number], ...]`; a reply without the field
/// (an older worker) has none.
fn comparisons_of(value: Option<&Value>) -> Option<Vec<Comparison>> {
    let Some(value) = value else {
        return Some(Vec::new());
    };
    value
        .as_array()?
        .iter()
        .map(|entry| match entry.as_array()?.as_slice() {
            [function, parameter, length, operator, number] => Some(Comparison {
                function: function.as_str()?.to_owned(),
                parameter: parameter.as_str()?.to_owned(),
                length: length.as_bool()?,
                operator: operator.as_str()?.to_owned(),
                number: number.as_f64().filter(|n| n.is_finite())?,
            }),
            _ => None,
        })
        .collect()
}

/// The lines and line arcs one call ran in the environment's functions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallCoverage {
    /// Lines run.
    pub lines: Vec<u32>,
    /// Arcs between consecutive lines of one function's execution.
    pub arcs: Vec<LineArc>,
}

impl CallCoverage {
    /// The branch outcomes of `map` that this call reached.
    pub fn branches<'a>(&'a self, map: &'a CodeMap) -> impl Iterator<Item = LineArc> + 'a {
        self.arcs
            .iter()
            .copied()
            .filter(|arc| map.branches.contains(arc))
    }
}

/// Reads `[[from, to], ...]` as arcs.
fn arcs_of(value: Option<&Value>) -> Option<Vec<LineArc>> {
    value?
        .as_array()?
        .iter()
        .map(|pair| {
            let pair = pair.as_array()?;
            match pair.as_slice() {
                [from, to] => Some(LineArc {
                    from: u32::try_from(from.as_u64()?).ok()?,
                    to: u32::try_from(to.as_u64()?).ok()?,
                }),
                _ => None,
            }
        })
        .collect()
}

/// Reads `[n, ...]` as lines.
fn lines_of(value: Option<&Value>) -> Option<Vec<u32>> {
    value?
        .as_array()?
        .iter()
        .map(|n| u32::try_from(n.as_u64()?).ok())
        .collect()
}

impl CodeMap {
    /// The worker's `code_map` reply; `None` when it does not read.
    pub(crate) fn from_reply(reply: &Value) -> Option<CodeMap> {
        Some(CodeMap {
            lines: lines_of(reply.get("lines"))?.into_iter().collect(),
            branches: arcs_of(reply.get("branches"))?.into_iter().collect(),
            comparisons: comparisons_of(reply.get("comparisons"))?,
        })
    }
}

impl CallCoverage {
    /// A call reply's `coverage` object; `None` when it does not read.
    pub(crate) fn from_reply(value: &Value) -> Option<CallCoverage> {
        Some(CallCoverage {
            lines: lines_of(value.get("lines"))?,
            arcs: arcs_of(value.get("arcs"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn adapter_regions_run_from_their_opening_marker_to_their_closing_one_or_the_end() {
        let code =
            "a\n  # envsim: adapter begin\nb\n# envsim: adapter end\nc\n# envsim: adapter begin\nd";
        assert_eq!(
            adapter_lines(code),
            vec![false, true, true, true, false, true, true]
        );
        // A marker with more words is a comment like any other.
        assert_eq!(
            adapter_lines("# envsim: adapter begins here\nx"),
            vec![false, false]
        );
    }

    #[test]
    fn replies_read_and_bad_ones_do_not() {
        let map =
            CodeMap::from_reply(&json!({"lines": [3, 4], "branches": [[3, 4], [3, 6]]})).unwrap();
        assert_eq!(map.lines.len(), 2);
        assert!(map.comparisons.is_empty());
        let compared = CodeMap::from_reply(&json!({"lines": [], "branches": [],
            "comparisons": [["ship", "weight", false, ">", 31.5]]}))
        .unwrap();
        assert_eq!(
            compared.comparisons,
            [Comparison {
                function: "ship".into(),
                parameter: "weight".into(),
                length: false,
                operator: ">".into(),
                number: 31.5
            }]
        );
        let covered =
            CallCoverage::from_reply(&json!({"lines": [3, 4], "arcs": [[3, 4], [4, 5]]})).unwrap();
        assert_eq!(
            covered.branches(&map).collect::<Vec<_>>(),
            [LineArc { from: 3, to: 4 }]
        );
        for bad in [
            json!({"lines": [3], "branches": [[3]]}),
            json!({"lines": [-1], "branches": []}),
            json!({"lines": [1]}),
            json!({"lines": [1], "branches": [[1, "2"]]}),
            json!({"lines": [1], "branches": [], "comparisons": [["f", "x", false, "<"]]}),
            json!({"lines": [1], "branches": [], "comparisons": [["f", "x", "no", "<", 1]]}),
        ] {
            assert_eq!(CodeMap::from_reply(&bad), None, "{bad}");
        }
    }
}

//! What an exploration reached: tools that succeeded and refused, lines and branch outcomes of
//! the environment's code, and how coverage grew with the calls spent.

use crate::plan::Strategy;
use crate::record::{Outcome, TransitionRecord};
use envsim_exec::coverage::{CallCoverage, CodeMap, LineArc};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// How one tool fared.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ToolTally {
    /// The tool.
    pub tool: String,
    /// Calls made.
    pub calls: usize,
    /// Calls that succeeded under the package's outcome rule.
    pub successes: usize,
    /// Calls the environment refused (a business-rule failure).
    pub failures: usize,
    /// Calls that raised or did not fit the signature.
    pub exceptions: usize,
    /// Calls whose outcome the rule cannot tell.
    pub undetermined: usize,
    /// The first distinct answers of its refused calls drawn to succeed (at most
    /// [`REFUSALS_KEPT`], each cut to [`REFUSAL_CHARS`] characters): why it did not succeed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refusals_seen: Vec<String>,
}

/// How many refusal answers a tool's tally keeps.
pub const REFUSALS_KEPT: usize = 4;
/// How long a kept refusal answer may be.
pub const REFUSAL_CHARS: usize = 160;

impl ToolTally {
    /// Calls refused one way or another (a failure or an exception).
    pub fn refusals(&self) -> usize {
        self.failures + self.exceptions
    }
}

/// A point of the coverage curve: what the first `calls` calls reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CurvePoint {
    /// Calls spent.
    pub calls: usize,
    /// Branch outcomes reached by then.
    pub branches_reached: usize,
    /// Tools seen succeeding by then.
    pub tools_succeeding: usize,
}

/// Why an exploration stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// It spent its budget.
    Budget,
    /// Nothing new in the plan's plateau of calls.
    Plateau,
}

/// What one package's exploration reached.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CoverageReport {
    /// The package.
    pub package: String,
    /// How calls were chosen.
    pub strategy: Strategy,
    /// Calls it could spend.
    pub budget: usize,
    /// Calls spent.
    pub calls: usize,
    /// Of those, calls replayed from the package's scripted tests and tasks.
    pub seed_calls: usize,
    /// Per tool, in manifest order.
    pub tools: Vec<ToolTally>,
    /// Executable lines of the environment's functions (0 when its code could not be mapped).
    pub lines: usize,
    /// Lines run.
    pub lines_reached: usize,
    /// Branch outcomes of the environment's functions.
    pub branches: usize,
    /// Branch outcomes reached.
    pub branches_reached: usize,
    /// Branch outcomes never reached (`from→to` line arcs).
    pub unreached: Vec<LineArc>,
    /// Coverage as the calls were spent (about 20 points and the last).
    pub curve: Vec<CurvePoint>,
    /// Why it stopped.
    pub stop: Stop,
    /// Wall-clock seconds it took (code map, initial states and calls).
    pub seconds: f64,
}

impl CoverageReport {
    /// Tools that succeeded at least once.
    pub fn tools_succeeding(&self) -> usize {
        self.tools.iter().filter(|t| t.successes > 0).count()
    }

    /// Tools refused at least once.
    pub fn tools_refused(&self) -> usize {
        self.tools.iter().filter(|t| t.refusals() > 0).count()
    }

    /// Tools that never succeeded, in manifest order.
    pub fn never_succeeded(&self) -> Vec<&str> {
        self.tools
            .iter()
            .filter(|t| t.successes == 0)
            .map(|t| t.tool.as_str())
            .collect()
    }

    /// Share of branch outcomes reached (`None` without a code map or branches).
    pub fn branch_share(&self) -> Option<f64> {
        (self.branches > 0).then(|| self.branches_reached as f64 / self.branches as f64)
    }
}

/// What one executed call brought that the exploration had not seen.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Novelty {
    /// Branch outcomes reached for the first time.
    pub branches: usize,
    /// Lines run for the first time.
    pub lines: usize,
    /// The tool's first success.
    pub first_success: bool,
    /// A (tool, outcome) pair not seen before.
    pub outcome: bool,
    /// A (tool, size of the change) pair not seen before among successes.
    pub change_size: bool,
}

impl Novelty {
    /// Anything new at all.
    pub fn any(&self) -> bool {
        self.branches > 0
            || self.lines > 0
            || self.first_success
            || self.outcome
            || self.change_size
    }

    /// How much a sequence that brought this is worth extending.
    pub fn score(&self) -> f64 {
        self.branches as f64
            + 0.25 * self.lines as f64
            + if self.first_success { 4.0 } else { 0.0 }
            + if self.outcome { 1.0 } else { 0.0 }
            + if self.change_size { 1.0 } else { 0.0 }
    }
}

/// The bucket of a change's size: none, 1, 2, 3–5, 6 or more (the benchmark strata's edges).
fn size_bucket(changes: usize) -> u8 {
    match changes {
        0 => 0,
        1 => 1,
        2 => 2,
        3..=5 => 3,
        _ => 4,
    }
}

/// The running totals of one package's exploration.
#[derive(Clone, Debug)]
pub(crate) struct Tally {
    map: Option<CodeMap>,
    reached: BTreeSet<LineArc>,
    lines: BTreeSet<u32>,
    tools: Vec<ToolTally>,
    by_name: BTreeMap<String, usize>,
    seen: BTreeSet<(usize, u8, u8)>,
    pub(crate) calls: usize,
    pub(crate) seed_calls: usize,
    curve: Vec<CurvePoint>,
    curve_every: usize,
}

impl Tally {
    /// The numbers the package's code compares its functions' parameters with (none when its
    /// code did not map).
    pub(crate) fn comparisons(&self) -> &[envsim_exec::coverage::Comparison] {
        self.map.as_ref().map_or(&[], |m| m.comparisons.as_slice())
    }

    /// Totals for a package with these tools, whose code maps as `map`, with `budget` calls.
    pub(crate) fn new(tools: &[String], map: Option<CodeMap>, budget: usize) -> Tally {
        Tally {
            map,
            reached: BTreeSet::new(),
            lines: BTreeSet::new(),
            tools: tools
                .iter()
                .map(|t| ToolTally {
                    tool: t.clone(),
                    ..ToolTally::default()
                })
                .collect(),
            by_name: tools
                .iter()
                .enumerate()
                .map(|(i, t)| (t.clone(), i))
                .collect(),
            seen: BTreeSet::new(),
            calls: 0,
            seed_calls: 0,
            curve: Vec::new(),
            curve_every: (budget / 20).max(1),
        }
    }

    /// Counts one executed call; what it brought that was new.
    pub(crate) fn record(
        &mut self,
        record: &TransitionRecord,
        coverage: Option<&CallCoverage>,
    ) -> Novelty {
        let mut novelty = Novelty::default();
        self.calls += 1;
        if let (Some(map), Some(coverage)) = (&self.map, coverage) {
            for arc in coverage.branches(map) {
                novelty.branches += usize::from(self.reached.insert(arc));
            }
            for &line in &coverage.lines {
                novelty.lines += usize::from(map.lines.contains(&line) && self.lines.insert(line));
            }
        }
        let tool = record.action["name"].as_str().unwrap_or_default();
        if let Some(&i) = self.by_name.get(tool) {
            let tally = &mut self.tools[i];
            tally.calls += 1;
            match record.outcome {
                Outcome::Success => {
                    novelty.first_success = tally.successes == 0;
                    tally.successes += 1;
                }
                Outcome::Failure => tally.failures += 1,
                Outcome::Exception => tally.exceptions += 1,
                Outcome::Undetermined => tally.undetermined += 1,
            }
            let refused = matches!(record.outcome, Outcome::Failure | Outcome::Exception);
            if refused
                && record.intent == crate::driver::Intent::Valid
                && tally.refusals_seen.len() < REFUSALS_KEPT
            {
                let text: String = record.observation.chars().take(REFUSAL_CHARS).collect();
                if !tally.refusals_seen.contains(&text) {
                    tally.refusals_seen.push(text);
                }
            }
            let outcome = record.outcome as u8;
            novelty.outcome = self.seen.insert((i, outcome, u8::MAX));
            if record.outcome == Outcome::Success {
                novelty.change_size =
                    self.seen
                        .insert((i, outcome, size_bucket(record.fine_change_count)));
            }
        }
        if self.calls % self.curve_every == 0 {
            self.point();
        }
        novelty
    }

    fn point(&mut self) {
        let point = CurvePoint {
            calls: self.calls,
            branches_reached: self.reached.len(),
            tools_succeeding: self.tools.iter().filter(|t| t.successes > 0).count(),
        };
        if self.curve.last() != Some(&point) {
            self.curve.push(point);
        }
    }

    /// Successes of a tool so far.
    pub(crate) fn successes(&self, tool: &str) -> usize {
        self.by_name
            .get(tool)
            .map_or(0, |&i| self.tools[i].successes)
    }

    /// Calls of a tool so far.
    pub(crate) fn calls_of(&self, tool: &str) -> usize {
        self.by_name.get(tool).map_or(0, |&i| self.tools[i].calls)
    }

    /// The report.
    pub(crate) fn finish(
        mut self,
        package: &str,
        strategy: Strategy,
        budget: usize,
        stop: Stop,
        seconds: f64,
    ) -> CoverageReport {
        self.point();
        let (lines, branches, unreached) = match &self.map {
            Some(map) => (
                map.lines.len(),
                map.branches.len(),
                map.branches.difference(&self.reached).copied().collect(),
            ),
            None => (0, 0, Vec::new()),
        };
        CoverageReport {
            package: package.to_owned(),
            strategy,
            budget,
            calls: self.calls,
            seed_calls: self.seed_calls,
            tools: self.tools,
            lines,
            lines_reached: self.lines.len(),
            branches,
            branches_reached: self.reached.len(),
            unreached,
            curve: self.curve,
            stop,
            seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_sizes_fall_in_the_strata_buckets() {
        let buckets: Vec<u8> = [0, 1, 2, 3, 5, 6, 40]
            .iter()
            .map(|&n| size_bucket(n))
            .collect();
        assert_eq!(buckets, [0, 1, 2, 3, 3, 4, 4]);
    }

    #[test]
    fn novelty_scores_what_is_new() {
        assert!(!Novelty::default().any());
        let first = Novelty {
            first_success: true,
            branches: 2,
            ..Novelty::default()
        };
        assert!(first.any());
        assert_eq!(first.score(), 6.0);
        let lines = Novelty {
            lines: 4,
            ..Novelty::default()
        };
        assert_eq!(lines.score(), 1.0);
    }
}

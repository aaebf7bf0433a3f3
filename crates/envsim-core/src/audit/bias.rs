//! Distribution bias (SDBI): does a simulator answer with the outcomes the real API would give,
//! or does it drift to the happy path? Per tool and overall, the distribution of outcome classes
//! (success and each kind of failure) is compared with an expected one as a Jensen–Shannon
//! divergence, and the happy-path excess (success share − expected success share) is reported
//! on its own, since it is the direction of bias that matters most for training data.
//!
//! The expected distribution comes from outside this module: the executor's outcomes on the same
//! calls, the statuses an API description declares ([`declared_classes`]), or a reference
//! dataset counted the same way.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Outcome classes, in report order.
pub const CLASSES: [&str; 7] = [
    "success",
    "not_found",
    "invalid_argument",
    "conflict",
    "permission",
    "error",
    "unknown",
];

/// The class of an outcome: `success`; for a failure, its kind from an HTTP status the
/// observation carries, else from its words: `not_found` ("not found", "does not exist", "no
/// such"), `permission` ("permission", "denied", "forbidden", "unauthorized"),
/// `invalid_argument` ("invalid", "must be", "required", "expected", "not a valid"), `conflict`
/// ("already", "cannot", "not allowed", "only", "insufficient", "unavailable", …), else
/// `error`; `unknown` when the outcome is.
pub fn outcome_class(observation: &Value, success: Option<bool>) -> &'static str {
    match success {
        None => "unknown",
        Some(true) => "success",
        Some(false) => {
            let status = http_status(observation).filter(|s| (400..600).contains(s));
            if let Some(status) = status {
                return status_class(status as u16);
            }
            let text = match observation {
                Value::String(s) => s.to_lowercase(),
                other => other.to_string().to_lowercase(),
            };
            let any = |words: &[&str]| words.iter().any(|w| text.contains(w));
            if any(&[
                "not found",
                "does not exist",
                "doesn't exist",
                "no such",
                "unknown ",
            ]) {
                "not_found"
            } else if any(&[
                "permission",
                "denied",
                "forbidden",
                "unauthorized",
                "not authorized",
            ]) {
                "permission"
            } else if any(&[
                "invalid",
                "must be",
                "required",
                "expected",
                "not a valid",
                "should be",
                "missing",
            ]) {
                "invalid_argument"
            } else if any(&[
                "already",
                "cannot",
                "can't",
                "not allowed",
                "only ",
                "insufficient",
                "unavailable",
                "exceeds",
                "no longer",
                "full",
                "conflict",
                "not enough",
            ]) {
                "conflict"
            } else {
                "error"
            }
        }
    }
}

/// The HTTP status an observation carries: its first integer `status_code`, `status` or
/// `code`.
pub fn http_status(observation: &Value) -> Option<u64> {
    ["status_code", "status", "code"]
        .iter()
        .find_map(|k| observation.get(k).and_then(Value::as_u64))
}

/// The class an HTTP status stands for.
pub fn status_class(status: u16) -> &'static str {
    match status {
        200..=299 => "success",
        404 | 410 => "not_found",
        400 | 422 => "invalid_argument",
        409 | 412 | 423 | 429 => "conflict",
        401 | 403 => "permission",
        _ => "error",
    }
}

/// The classes an operation's declared responses allow, each equally likely: the prior an API
/// description gives when nothing else says how often each happens (`"4XX"` counts as
/// `error`, `"default"` is left out).
pub fn declared_classes<'a>(statuses: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, f64> {
    let mut classes: BTreeMap<String, f64> = BTreeMap::new();
    for status in statuses {
        let class = match status.parse::<u16>() {
            Ok(code) => status_class(code),
            Err(_) if status.starts_with('2') => "success",
            Err(_) if status.starts_with('4') || status.starts_with('5') => "error",
            Err(_) => continue,
        };
        classes.insert(class.to_owned(), 1.0);
    }
    normalize(classes)
}

/// The kind of state transition a step exercised: `create` (a resource appeared), `delete`
/// (one vanished), `update` (the state changed otherwise), `read` (a success that changed
/// nothing), `failure`, or `unknown`.
pub fn transition_kind(
    changed: bool,
    created: bool,
    deleted: bool,
    success: Option<bool>,
) -> &'static str {
    match (changed, success) {
        (true, _) if created => "create",
        (true, _) if deleted => "delete",
        (true, _) => "update",
        (false, Some(true)) => "read",
        (false, Some(false)) => "failure",
        (false, None) => "unknown",
    }
}

/// The kind of transition a step without states exercised, from what its tool does: `create`,
/// `delete`, `update`, `read` for a success, `failure`, or `unknown`.
pub fn call_transition_kind(effects: &super::ToolEffects, success: Option<bool>) -> &'static str {
    use super::observed::{role, Role};
    match success {
        None => "unknown",
        Some(false) => "failure",
        Some(true) => match role(effects) {
            Role::Read => "read",
            Role::Create => "create",
            Role::Delete => "delete",
            Role::Change => "update",
        },
    }
}

/// Counts of outcome classes per tool.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OutcomeCounts {
    tools: BTreeMap<String, BTreeMap<String, usize>>,
}

impl OutcomeCounts {
    /// Counts one step.
    pub fn add(&mut self, tool: &str, class: &str) {
        *self
            .tools
            .entry(tool.to_owned())
            .or_default()
            .entry(class.to_owned())
            .or_default() += 1;
    }

    /// Adds another set of counts.
    pub fn merge(&mut self, other: &OutcomeCounts) {
        for (tool, classes) in &other.tools {
            for (class, n) in classes {
                *self
                    .tools
                    .entry(tool.clone())
                    .or_default()
                    .entry(class.clone())
                    .or_default() += n;
            }
        }
    }

    /// The tools counted.
    pub fn tools(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// Steps of `tool`.
    pub fn steps(&self, tool: &str) -> usize {
        self.tools.get(tool).map_or(0, |c| c.values().sum())
    }

    /// The distribution of `tool`'s classes (empty when it was never counted).
    pub fn distribution(&self, tool: &str) -> BTreeMap<String, f64> {
        normalize(
            self.tools
                .get(tool)
                .map(|c| c.iter().map(|(k, v)| (k.clone(), *v as f64)).collect())
                .unwrap_or_default(),
        )
    }

    /// The distribution over all steps.
    pub fn overall(&self) -> BTreeMap<String, f64> {
        let mut all: BTreeMap<String, f64> = BTreeMap::new();
        for classes in self.tools.values() {
            for (class, n) in classes {
                *all.entry(class.clone()).or_default() += *n as f64;
            }
        }
        normalize(all)
    }
}

fn normalize(mut d: BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    let total: f64 = d.values().sum();
    if total > 0.0 {
        d.values_mut().for_each(|v| *v /= total);
    }
    d
}

/// Jensen–Shannon divergence of two distributions, base 2 (0: the same; 1: disjoint).
pub fn jensen_shannon(p: &BTreeMap<String, f64>, q: &BTreeMap<String, f64>) -> f64 {
    let keys: std::collections::BTreeSet<&String> = p.keys().chain(q.keys()).collect();
    let mut divergence = 0.0;
    for key in keys {
        let (a, b) = (
            p.get(key).copied().unwrap_or(0.0),
            q.get(key).copied().unwrap_or(0.0),
        );
        let m = (a + b) / 2.0;
        if a > 0.0 {
            divergence += 0.5 * a * (a / m).log2();
        }
        if b > 0.0 {
            divergence += 0.5 * b * (b / m).log2();
        }
    }
    divergence.clamp(0.0, 1.0)
}

/// The bias of one tool, or of all of them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bias {
    /// Steps observed.
    pub steps: usize,
    /// Observed share of each class.
    pub observed: BTreeMap<String, f64>,
    /// Expected share of each class.
    pub expected: BTreeMap<String, f64>,
    /// Jensen–Shannon divergence (base 2) of observed from expected.
    pub jsd: f64,
    /// Observed success share − expected success share (positive: too happy).
    pub happy_path_excess: f64,
}

fn bias_of(steps: usize, observed: BTreeMap<String, f64>, expected: BTreeMap<String, f64>) -> Bias {
    let share = |d: &BTreeMap<String, f64>| d.get("success").copied().unwrap_or(0.0);
    Bias {
        steps,
        jsd: jensen_shannon(&observed, &expected),
        happy_path_excess: share(&observed) - share(&expected),
        observed,
        expected,
    }
}

/// SDBI: per tool with an expectation, and overall, where the overall expectation weighs each
/// tool's expected distribution by how often the observed trajectories call it (the tool mix
/// is the agent's choice, not the simulator's bias). Tools without an expectation are listed
/// apart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BiasReport {
    /// Per tool.
    pub tools: BTreeMap<String, Bias>,
    /// Over the tools with an expectation.
    pub overall: Option<Bias>,
    /// Tools observed with nothing to compare them with.
    pub without_expectation: Vec<String>,
}

/// Compares observed counts with an expected distribution per tool (`expected(tool)`, `None`
/// when nothing is expected of it).
pub fn bias(
    observed: &OutcomeCounts,
    expected: impl Fn(&str) -> Option<BTreeMap<String, f64>>,
) -> BiasReport {
    let mut tools = BTreeMap::new();
    let mut without = Vec::new();
    let (mut seen, mut wanted): (BTreeMap<String, f64>, BTreeMap<String, f64>) = Default::default();
    let mut steps = 0;
    for tool in observed.tools() {
        let n = observed.steps(tool);
        match expected(tool).filter(|e| !e.is_empty()) {
            Some(e) => {
                for (class, share) in &e {
                    *wanted.entry(class.clone()).or_default() += share * n as f64;
                }
                for (class, share) in observed.distribution(tool) {
                    *seen.entry(class).or_default() += share * n as f64;
                }
                steps += n;
                tools.insert(tool.to_owned(), bias_of(n, observed.distribution(tool), e));
            }
            None => without.push(tool.to_owned()),
        }
    }
    BiasReport {
        overall: (steps > 0).then(|| bias_of(steps, normalize(seen), normalize(wanted))),
        tools,
        without_expectation: without,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn d(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn classes_of_outcomes() {
        let c = |o: Value, s| outcome_class(&o, s);
        assert_eq!(c(json!({"x": 1}), Some(true)), "success");
        assert_eq!(
            c(json!({"error": "Order O1 not found"}), Some(false)),
            "not_found"
        );
        assert_eq!(
            c(json!({"status": 409, "error": "x"}), Some(false)),
            "conflict"
        );
        assert_eq!(
            c(json!("Error: qty must be a positive integer"), Some(false)),
            "invalid_argument"
        );
        assert_eq!(
            c(json!("Order O5 is already shipped"), Some(false)),
            "conflict"
        );
        assert_eq!(
            c(json!("permission denied: carol"), Some(false)),
            "permission"
        );
        assert_eq!(c(json!("boom"), Some(false)), "error");
        assert_eq!(c(json!("boom"), None), "unknown");
        assert_eq!(
            declared_classes(["200", "404", "422", "default"]),
            d(&[
                ("invalid_argument", 1.0 / 3.0),
                ("not_found", 1.0 / 3.0),
                ("success", 1.0 / 3.0)
            ])
        );
    }

    #[test]
    fn divergence_and_excess() {
        assert_eq!(jensen_shannon(&d(&[("a", 1.0)]), &d(&[("a", 1.0)])), 0.0);
        assert_eq!(jensen_shannon(&d(&[("a", 1.0)]), &d(&[("b", 1.0)])), 1.0);
        let half = jensen_shannon(&d(&[("a", 1.0)]), &d(&[("a", 0.5), ("b", 0.5)]));
        assert!((half - 0.311_278_124_459_132_8).abs() < 1e-12, "{half}");
        // A simulator that always succeeds where the API fails half the time.
        let mut seen = OutcomeCounts::default();
        for _ in 0..4 {
            seen.add("get", "success");
        }
        seen.add("put", "success");
        seen.add("put", "conflict");
        seen.add("odd", "success");
        let report = bias(&seen, |tool| match tool {
            "get" => Some(d(&[("success", 0.5), ("not_found", 0.5)])),
            "put" => Some(d(&[("success", 0.5), ("conflict", 0.5)])),
            _ => None,
        });
        assert_eq!(report.tools["get"].happy_path_excess, 0.5);
        assert_eq!(report.tools["put"].jsd, 0.0);
        assert_eq!(report.without_expectation, ["odd"]);
        let overall = report.overall.unwrap();
        assert_eq!(overall.steps, 6);
        // Observed 5/6 success; expected 1/2 (both tools expect half).
        assert!((overall.happy_path_excess - (5.0 / 6.0 - 0.5)).abs() < 1e-12);
    }
}

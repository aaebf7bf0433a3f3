//! Curation of synthesized trajectories (the SIMCON-DATA proposal's consistency-anchored
//! curation), without I/O: what a trajectory covers, how consistent it is, which to keep, and
//! how to mix and stage what is kept.
//!
//! - [`Item::from_record`] reads a synthesis record (`envsim synth`'s JSONL) into its scores
//!   and its **features**: tools, tool bigrams, state-constraint-graph edge kinds (create /
//!   delete / update / read / failure per resource type), argument values, outcomes, family.
//! - **Consistency** of an item: the weighted mean of its scores (SCS, SpecCS, DCS; an absent
//!   score is left out of the mean), times the share of its steps not marked uncertain.
//! - **Gate**: minimums per score ([`Gate`]); **weighted sampling** draws without replacement
//!   with probability ∝ consistency^power ([`weighted_sample`]).
//! - **Pareto selection** ([`pareto_select`]): consistency against *richness* (the item's
//!   features weighted by their rarity in the pool, so a long, varied trajectory with rare
//!   tools scores high); fronts are taken in order, the last one by coverage gain, so simple
//!   consistent trajectories do not crowd out hard, diverse ones.
//! - **Diversity measures** of a set ([`Diversity::of`]): tool, bigram and edge-kind coverage,
//!   argument-value entropy, outcome mix, family coverage — no embedding model.
//! - **Tiers and batches** ([`batches`]): training batches mixing consistency tiers in declared
//!   ratios; **curriculum** ([`curriculum`]): ordered stages with rising minimum consistency.

use crate::audit::{resource_changes, ResourceChange};
use crate::rng::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// One trajectory as curation sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Item {
    /// Its id.
    pub id: String,
    /// Its environment.
    pub env: String,
    /// Its task family.
    pub family: String,
    /// State consistency score.
    pub scs: Option<f64>,
    /// Specification consistency score.
    pub spec_cs: Option<f64>,
    /// Distribution consistency score (absent without code).
    pub dcs: Option<f64>,
    /// Steps.
    pub steps: usize,
    /// Steps marked uncertain by anchoring.
    pub uncertain_steps: usize,
    /// How the conversation ended.
    pub finish: String,
    /// Whether the final state equals the executor's replay (absent without code).
    pub final_state_equal: Option<bool>,
    /// Calls an error-path task made to fail, answered as failures (`deliberate_errors` of a
    /// synthesis record; 0 for other records): as training targets they teach the failing
    /// call, so curation counts them and can drop or mask them.
    pub deliberate_errors: usize,
    /// What it covers.
    pub features: Features,
}

/// What one trajectory covers.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Features {
    /// Tools called (`env/tool`).
    pub tools: BTreeSet<String>,
    /// Consecutive tool pairs (`env/a>b`).
    pub bigrams: BTreeSet<String>,
    /// State-constraint-graph edge kinds (`env/create:orders`, `env/read`, `env/failure`).
    pub edges: BTreeSet<String>,
    /// Argument values (`env/tool.arg=value`), with repeats.
    pub arguments: Vec<String>,
    /// Successful and failed steps.
    pub successes: usize,
    /// Failed steps.
    pub failures: usize,
}

impl Features {
    /// The distinct features (tools, bigrams, edges) as one set.
    pub fn distinct(&self) -> BTreeSet<&str> {
        self.tools
            .iter()
            .chain(&self.bigrams)
            .chain(&self.edges)
            .map(String::as_str)
            .collect()
    }
}

/// A record that cannot be curated, and why.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct RecordError(pub String);

fn number(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

impl Item {
    /// Reads a synthesis record (or any envsim trajectory record with `initial_state` and
    /// `steps`; scores absent then).
    pub fn from_record(record: &Value) -> Result<Item, RecordError> {
        let id = record
            .get("id")
            .or_else(|| record.get("task_id"))
            .and_then(Value::as_str)
            .ok_or_else(|| RecordError("no `id`".into()))?
            .to_owned();
        let env = record
            .get("env")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let steps = record
            .get("steps")
            .and_then(Value::as_array)
            .ok_or_else(|| RecordError(format!("{id}: no `steps` list")))?;
        let mut features = Features::default();
        let mut before = record.get("initial_state").unwrap_or(&Value::Null);
        let mut previous: Option<&str> = None;
        let mut uncertain = 0;
        for (k, step) in steps.iter().enumerate() {
            let tool = step
                .pointer("/action/name")
                .and_then(Value::as_str)
                .ok_or_else(|| RecordError(format!("{id}: step {k} has no action name")))?;
            features.tools.insert(format!("{env}/{tool}"));
            if let Some(p) = previous {
                features.bigrams.insert(format!("{env}/{p}>{tool}"));
            }
            previous = Some(tool);
            if let Some(args) = step.pointer("/action/arguments").and_then(Value::as_object) {
                for (name, value) in args {
                    features
                        .arguments
                        .push(format!("{env}/{tool}.{name}={value}"));
                }
            }
            let success = step
                .pointer("/provenance/success")
                .or_else(|| step.get("success"))
                .and_then(Value::as_bool)
                .or_else(|| outcome_of(step.get("observation")));
            match success {
                Some(true) => features.successes += 1,
                Some(false) => features.failures += 1,
                None => {}
            }
            let after = step.get("state_after").unwrap_or(before);
            for edge in edges(before, after, success) {
                features.edges.insert(format!("{env}/{edge}"));
            }
            before = after;
            if step
                .pointer("/provenance/uncertain")
                .and_then(Value::as_bool)
                == Some(true)
            {
                uncertain += 1;
            }
        }
        let deliberate_errors = match record.get("deliberate_errors") {
            None | Some(Value::Null) => 0,
            Some(Value::Array(calls)) => calls.len(),
            Some(_) => {
                return Err(RecordError(format!(
                    "{id}: `deliberate_errors` is not a list"
                )))
            }
        };
        let scores = record.get("scores").unwrap_or(&Value::Null);
        Ok(Item {
            id,
            env,
            family: record
                .get("family")
                .and_then(Value::as_str)
                .unwrap_or("ordinary")
                .to_owned(),
            scs: scores.get("scs").and_then(number),
            spec_cs: scores.get("spec_cs").and_then(number),
            dcs: scores.get("dcs").and_then(number),
            steps: steps.len(),
            uncertain_steps: uncertain,
            finish: record
                .get("finish")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            final_state_equal: record
                .pointer("/truth/final_state_equal")
                .and_then(Value::as_bool),
            deliberate_errors,
            features,
        })
    }

    /// Its consistency under `weights`: the weighted mean of the scores it has (1 when it has
    /// none), times the share of its steps not marked uncertain.
    pub fn consistency(&self, weights: &Weights) -> f64 {
        let parts = [
            (self.scs, weights.scs),
            (self.spec_cs, weights.spec_cs),
            (self.dcs, weights.dcs),
        ];
        let (sum, total) = parts
            .iter()
            .filter_map(|(s, w)| s.map(|s| (s * w, *w)))
            .fold((0.0, 0.0), |(a, b), (x, w)| (a + x, b + w));
        let mean = if total > 0.0 { sum / total } else { 1.0 };
        let certain = if self.steps == 0 {
            1.0
        } else {
            1.0 - self.uncertain_steps as f64 / self.steps as f64
        };
        mean * certain
    }
}

/// Success or failure read from an observation's `success` field, when it has one.
fn outcome_of(observation: Option<&Value>) -> Option<bool> {
    match observation? {
        Value::Object(map) => map.get("success").and_then(Value::as_bool),
        Value::String(s) if s.starts_with("Error: ") => Some(false),
        _ => None,
    }
}

/// The edge kinds of one step: per resource type, whether resources were created, deleted or
/// updated; `read` for a success that changed nothing, `failure` for a failure that did not.
fn edges(before: &Value, after: &Value, success: Option<bool>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if before == after {
        out.insert(
            match success {
                Some(false) => "failure",
                Some(true) => "read",
                None => "unknown",
            }
            .to_owned(),
        );
        return out;
    }
    for ((kind, _), change) in resource_changes(before, after) {
        let verb = match change {
            ResourceChange::Created => "create",
            ResourceChange::Deleted => "delete",
            ResourceChange::Updated => "update",
        };
        out.insert(format!("{verb}:{kind}"));
    }
    if out.is_empty() {
        out.insert("update".into());
    }
    out
}

/// Weights of the scores in an item's consistency.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Weights {
    /// SCS.
    pub scs: f64,
    /// SpecCS.
    pub spec_cs: f64,
    /// DCS.
    pub dcs: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            scs: 1.0,
            spec_cs: 1.0,
            dcs: 1.0,
        }
    }
}

/// Minimums per score; an item without a score passes that minimum (it cannot be judged by
/// it), unless `require_scores` is set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    /// Least SCS.
    pub min_scs: Option<f64>,
    /// Least SpecCS.
    pub min_spec_cs: Option<f64>,
    /// Least DCS.
    pub min_dcs: Option<f64>,
    /// Least consistency (weighted).
    pub min_consistency: Option<f64>,
    /// Keep items with uncertain steps.
    pub allow_uncertain: bool,
    /// An item lacking a gated score fails that minimum.
    pub require_scores: bool,
}

impl Gate {
    /// Why `item` does not pass (empty: it passes).
    pub fn reasons(&self, item: &Item, weights: &Weights) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |name: &str, min: Option<f64>, value: Option<f64>| {
            if let Some(min) = min {
                match value {
                    Some(v) if v < min => out.push(format!("{name} below {min}")),
                    None if self.require_scores => out.push(format!("no {name}")),
                    _ => {}
                }
            }
        };
        check("SCS", self.min_scs, item.scs);
        check("SpecCS", self.min_spec_cs, item.spec_cs);
        check("DCS", self.min_dcs, item.dcs);
        check(
            "consistency",
            self.min_consistency,
            Some(item.consistency(weights)),
        );
        if !self.allow_uncertain && item.uncertain_steps > 0 {
            out.push("uncertain steps".into());
        }
        out
    }
}

/// Draws `count` items without replacement, each draw with probability ∝
/// consistency^`power` among those left (a zero-consistency item is drawn only when nothing
/// else is left); returns indices in draw order.
pub fn weighted_sample(
    items: &[Item],
    weights: &Weights,
    power: f64,
    count: usize,
    seed: u64,
) -> Vec<usize> {
    let mut rng = Rng::derive(seed, "curate/weighted");
    let mut left: Vec<(usize, f64)> = items
        .iter()
        .enumerate()
        .map(|(i, it)| (i, it.consistency(weights).max(0.0).powf(power)))
        .collect();
    let mut out = Vec::new();
    while out.len() < count && !left.is_empty() {
        let total: f64 = left.iter().map(|(_, w)| w).sum();
        let pick = if total > 0.0 {
            let mut target = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
            let mut chosen = left.len() - 1;
            for (k, (_, w)) in left.iter().enumerate() {
                if *w <= 0.0 {
                    continue;
                }
                target -= w;
                if target <= 0.0 {
                    chosen = k;
                    break;
                }
            }
            chosen
        } else {
            0
        };
        out.push(left.remove(pick).0);
    }
    out
}

/// Each item's richness: the sum, over its distinct features, of 1 / (how many items of the
/// pool have that feature), so rare tools, transitions and sequences count most.
pub fn richness(items: &[Item]) -> Vec<f64> {
    let mut frequency: BTreeMap<&str, usize> = BTreeMap::new();
    for it in items {
        for f in it.features.distinct() {
            *frequency.entry(f).or_default() += 1;
        }
    }
    items
        .iter()
        .map(|it| {
            it.features
                .distinct()
                .iter()
                .map(|f| 1.0 / frequency[f] as f64)
                .sum()
        })
        .collect()
}

/// Non-dominated fronts of points (maximizing both coordinates): front 0 holds the points no
/// other point dominates, front 1 those only front 0 dominates, and so on. Returns each
/// point's front.
///
/// In two dimensions this takes one pass over the points sorted by the first coordinate
/// (descending): the members of a front then rise in the second coordinate, so a point is
/// dominated by a front exactly when it is dominated by that front's last member, and it joins
/// the first front whose last member does not dominate it — O(n log n + n·fronts).
pub fn fronts(points: &[(f64, f64)]) -> Vec<usize> {
    let dominates =
        |a: (f64, f64), b: (f64, f64)| a.0 >= b.0 && a.1 >= b.1 && (a.0 > b.0 || a.1 > b.1);
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&i, &j| {
        points[j]
            .0
            .total_cmp(&points[i].0)
            .then(points[j].1.total_cmp(&points[i].1))
    });
    let mut last: Vec<(f64, f64)> = Vec::new();
    let mut front = vec![0; points.len()];
    for i in order {
        let p = points[i];
        let f = last
            .iter()
            .position(|&q| !dominates(q, p))
            .unwrap_or(last.len());
        if f == last.len() {
            last.push(p);
        } else {
            last[f] = p;
        }
        front[i] = f;
    }
    front
}

/// Pareto selection of `count` items on (consistency, richness): whole fronts in order, and
/// from the front that does not fit whole, the items adding the most features not yet
/// covered (ties: higher consistency, then pool order). Returns indices in selection order.
pub fn pareto_select(items: &[Item], weights: &Weights, count: usize) -> Vec<usize> {
    let rich = richness(items);
    let points: Vec<(f64, f64)> = items
        .iter()
        .zip(&rich)
        .map(|(it, r)| (it.consistency(weights), *r))
        .collect();
    let front = fronts(&points);
    let mut selected: Vec<usize> = Vec::new();
    let mut covered: BTreeSet<&str> = BTreeSet::new();
    let levels = front.iter().copied().max().map_or(0, |m| m + 1);
    for level in 0..levels {
        let mut members: Vec<usize> = (0..items.len()).filter(|&i| front[i] == level).collect();
        if selected.len() + members.len() <= count {
            for &i in &members {
                covered.extend(items[i].features.distinct());
            }
            selected.extend(members);
            continue;
        }
        while selected.len() < count && !members.is_empty() {
            let best = members
                .iter()
                .enumerate()
                .max_by(|(ka, &a), (kb, &b)| {
                    let gain = |i: usize| {
                        items[i]
                            .features
                            .distinct()
                            .iter()
                            .filter(|f| !covered.contains(*f))
                            .count()
                    };
                    gain(a)
                        .cmp(&gain(b))
                        .then(points[a].0.total_cmp(&points[b].0))
                        .then(kb.cmp(ka))
                })
                .map_or(0, |(k, _)| k);
            let i = members.remove(best);
            covered.extend(items[i].features.distinct());
            selected.push(i);
        }
        break;
    }
    selected
}

/// Diversity measures of a set of items.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Diversity {
    /// Items.
    pub items: usize,
    /// Distinct tools called.
    pub tools: usize,
    /// Distinct tool bigrams.
    pub bigrams: usize,
    /// Distinct state-graph edge kinds.
    pub edge_kinds: usize,
    /// Shannon entropy (bits) of the argument values used.
    pub argument_entropy: f64,
    /// Share of steps that failed (the outcome mix).
    pub failure_share: f64,
    /// Items per task family.
    pub families: BTreeMap<String, usize>,
}

impl Diversity {
    /// The measures of `items`.
    pub fn of<'a>(items: impl IntoIterator<Item = &'a Item>) -> Diversity {
        let mut d = Diversity::default();
        let (mut tools, mut bigrams, mut edges) =
            (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        let mut values: BTreeMap<&str, usize> = BTreeMap::new();
        let (mut ok, mut failed) = (0usize, 0usize);
        for it in items {
            d.items += 1;
            tools.extend(it.features.tools.iter());
            bigrams.extend(it.features.bigrams.iter());
            edges.extend(it.features.edges.iter());
            for a in &it.features.arguments {
                *values.entry(a).or_default() += 1;
            }
            ok += it.features.successes;
            failed += it.features.failures;
            *d.families.entry(it.family.clone()).or_default() += 1;
        }
        d.tools = tools.len();
        d.bigrams = bigrams.len();
        d.edge_kinds = edges.len();
        let total: usize = values.values().sum();
        d.argument_entropy = values
            .values()
            .map(|&c| {
                let p = c as f64 / total as f64;
                -p * p.log2()
            })
            .sum();
        d.failure_share = if ok + failed == 0 {
            0.0
        } else {
            failed as f64 / (ok + failed) as f64
        };
        d
    }
}

/// Features the `kept` items lack that some `dropped` item has: what a selection loses.
pub fn lost_features<'a>(kept: &[&'a Item], dropped: &[&'a Item]) -> BTreeSet<&'a str> {
    let have: BTreeSet<&str> = kept.iter().flat_map(|it| it.features.distinct()).collect();
    dropped
        .iter()
        .flat_map(|it| it.features.distinct())
        .filter(|f| !have.contains(f))
        .collect()
}

/// A consistency tier and its share of each batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tier {
    /// Its name.
    pub name: String,
    /// Least consistency of its items (the tiers are checked from the highest minimum down).
    pub min: f64,
    /// Its share of a batch.
    pub share: f64,
}

/// Training batches of `size` items mixing the tiers in their shares (largest remainder
/// rounding per batch), items drawn in a seeded order within each tier; batches are built while
/// every tier with a share can fill its part. Returns the batches (item indices) and, per tier,
/// the items left over.
pub fn batches(
    items: &[Item],
    weights: &Weights,
    tiers: &[Tier],
    size: usize,
    seed: u64,
) -> (Vec<Vec<usize>>, BTreeMap<String, usize>) {
    let mut order: Vec<&Tier> = tiers.iter().collect();
    order.sort_by(|a, b| b.min.total_cmp(&a.min));
    let mut pools: BTreeMap<&str, Vec<usize>> = tiers
        .iter()
        .map(|t| (t.name.as_str(), Vec::new()))
        .collect();
    for (i, it) in items.iter().enumerate() {
        let c = it.consistency(weights);
        if let Some(t) = order.iter().find(|t| c >= t.min) {
            pools.entry(t.name.as_str()).or_default().push(i);
        }
    }
    let mut rng = Rng::derive(seed, "curate/batches");
    for pool in pools.values_mut() {
        rng.shuffle(pool);
    }
    // Per-batch counts by largest remainder.
    let total_share: f64 = tiers.iter().map(|t| t.share).sum();
    let mut counts: Vec<(usize, f64)> = tiers
        .iter()
        .map(|t| {
            let exact = if total_share > 0.0 {
                t.share / total_share * size as f64
            } else {
                0.0
            };
            (exact.floor() as usize, exact - exact.floor())
        })
        .collect();
    let mut missing = size.saturating_sub(counts.iter().map(|c| c.0).sum());
    let mut by_remainder: Vec<usize> = (0..counts.len()).collect();
    by_remainder.sort_by(|&a, &b| counts[b].1.total_cmp(&counts[a].1).then(a.cmp(&b)));
    for &k in &by_remainder {
        if missing == 0 {
            break;
        }
        counts[k].0 += 1;
        missing -= 1;
    }
    let mut out = Vec::new();
    if size == 0 {
        return (
            out,
            pools
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.len()))
                .collect(),
        );
    }
    loop {
        let fits = tiers
            .iter()
            .zip(&counts)
            .all(|(t, (n, _))| pools.get(t.name.as_str()).map_or(0, Vec::len) >= *n);
        if !fits {
            break;
        }
        let mut batch = Vec::with_capacity(size);
        for (t, (n, _)) in tiers.iter().zip(&counts) {
            if let Some(pool) = pools.get_mut(t.name.as_str()) {
                let from = pool.len() - n;
                batch.extend(pool.drain(from..).rev());
            }
        }
        out.push(batch);
    }
    let left = pools
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.len()))
        .collect();
    (out, left)
}

/// A curriculum: per stage (thresholds in the order given, loose to strict), the items whose
/// consistency reaches the stage's minimum.
pub fn curriculum(items: &[Item], weights: &Weights, thresholds: &[f64]) -> Vec<Vec<usize>> {
    thresholds
        .iter()
        .map(|&min| {
            (0..items.len())
                .filter(|&i| items[i].consistency(weights) >= min)
                .collect()
        })
        .collect()
}

/// A histogram of values in [0, 1] over ten bins (the last includes 1).
pub fn histogram(values: impl IntoIterator<Item = f64>) -> [usize; 10] {
    let mut bins = [0; 10];
    for v in values {
        let k = ((v.clamp(0.0, 1.0) * 10.0).floor() as usize).min(9);
        bins[k] += 1;
    }
    bins
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(id: &str, tools: &[&str], scs: f64, uncertain: bool) -> Value {
        let mut state = json!({"notes": {}});
        let steps: Vec<Value> = tools
            .iter()
            .enumerate()
            .map(|(k, t)| {
                if t.starts_with("add") {
                    state["notes"][format!("N{k}")] = json!({"k": k});
                }
                json!({"action": {"name": t, "arguments": {"k": k}},
                       "observation": {"success": !t.starts_with("bad")},
                       "state_after": state.clone(),
                       "provenance": {"uncertain": uncertain && k == 0}})
            })
            .collect();
        json!({"id": id, "env": "e", "family": "ordinary", "initial_state": {"notes": {}},
               "steps": steps, "finish": "final_answer",
               "scores": {"scs": scs, "spec_cs": 1.0, "dcs": null},
               "truth": {"final_state_equal": true}})
    }

    #[test]
    fn records_are_read_into_scores_and_features() {
        let it = Item::from_record(&record("a", &["get", "add_note", "bad"], 0.5, true)).unwrap();
        assert_eq!(it.steps, 3);
        assert_eq!(it.uncertain_steps, 1);
        assert_eq!(it.dcs, None);
        assert_eq!(it.final_state_equal, Some(true));
        let edges: Vec<&str> = it.features.edges.iter().map(String::as_str).collect();
        assert_eq!(edges, ["e/create:notes", "e/failure", "e/read"]);
        let bigrams: Vec<&str> = it.features.bigrams.iter().map(String::as_str).collect();
        assert_eq!(bigrams, ["e/add_note>bad", "e/get>add_note"]);
        assert_eq!(it.features.arguments[1], "e/add_note.k=1");
        assert_eq!((it.features.successes, it.features.failures), (2, 1));
        // (0.5 + 1.0) / 2 (no DCS), times 2 of 3 steps certain.
        assert!((it.consistency(&Weights::default()) - 0.5).abs() < 1e-12);
        let w = Weights {
            scs: 3.0,
            spec_cs: 1.0,
            dcs: 1.0,
        };
        assert!((it.consistency(&w) - 0.625 * 2.0 / 3.0).abs() < 1e-12);
        assert!(Item::from_record(&json!({"id": "x"}))
            .unwrap_err()
            .0
            .contains("no `steps`"));
        assert!(Item::from_record(&json!({"steps": []}))
            .unwrap_err()
            .0
            .contains("no `id`"));
    }

    #[test]
    fn the_gate_names_every_reason() {
        let it = Item::from_record(&record("a", &["get"], 0.5, true)).unwrap();
        let gate = Gate {
            min_scs: Some(0.9),
            min_dcs: Some(0.5),
            ..Gate::default()
        };
        assert_eq!(
            gate.reasons(&it, &Weights::default()),
            ["SCS below 0.9", "uncertain steps"]
        );
        let strict = Gate {
            require_scores: true,
            allow_uncertain: true,
            ..gate
        };
        assert_eq!(
            strict.reasons(&it, &Weights::default()),
            ["SCS below 0.9", "no DCS"]
        );
    }

    #[test]
    fn fronts_are_non_dominated_layers() {
        let points = [
            (1.0, 0.0),
            (0.0, 1.0),
            (0.5, 0.5),
            (0.4, 0.4),
            (1.0, 0.0),
            (0.1, 0.1),
        ];
        assert_eq!(fronts(&points), [0, 0, 0, 1, 0, 2]);
    }

    #[test]
    fn pareto_selection_keeps_a_rich_inconsistent_trajectory_a_gate_would_drop() {
        let items: Vec<Item> = [
            record("simple1", &["get"], 1.0, false),
            record("simple2", &["get"], 1.0, false),
            record("simple3", &["get", "get"], 1.0, false),
            record("rich", &["add_note", "update", "bad", "delete"], 0.8, false),
            record("poor", &["get"], 0.5, false),
        ]
        .iter()
        .map(|r| Item::from_record(r).unwrap())
        .collect();
        let w = Weights::default();
        let chosen = pareto_select(&items, &w, 2);
        let ids: Vec<&str> = chosen.iter().map(|&i| items[i].id.as_str()).collect();
        assert!(ids.contains(&"rich"), "{ids:?}");
        assert_eq!(ids.len(), 2);
        // A gate at 0.95 keeps only the simple ones and loses the rich one's features.
        let gate = Gate {
            min_consistency: Some(0.95),
            ..Gate::default()
        };
        let (kept, dropped): (Vec<&Item>, Vec<&Item>) =
            items.iter().partition(|it| gate.reasons(it, &w).is_empty());
        assert_eq!(kept.len(), 3);
        let lost = lost_features(&kept, &dropped);
        assert!(
            lost.contains("e/update") && lost.contains("e/create:notes"),
            "{lost:?}"
        );
        let all = Diversity::of(&items);
        let gated = Diversity::of(kept.iter().copied());
        assert!(all.tools > gated.tools && all.edge_kinds > gated.edge_kinds);
        assert_eq!(gated.failure_share, 0.0);
    }

    #[test]
    fn weighted_sampling_prefers_consistency_and_is_seeded() {
        let items: Vec<Item> = (0..20)
            .map(|i| {
                let scs = if i < 10 { 1.0 } else { 0.1 };
                Item::from_record(&record(&format!("t{i}"), &["get"], scs, false)).unwrap()
            })
            .collect();
        let w = Weights {
            spec_cs: 0.0,
            ..Weights::default()
        };
        let a = weighted_sample(&items, &w, 2.0, 10, 7);
        assert_eq!(a, weighted_sample(&items, &w, 2.0, 10, 7));
        let consistent = a.iter().filter(|&&i| i < 10).count();
        assert!(consistent >= 8, "{a:?}");
        assert_eq!(weighted_sample(&items, &w, 1.0, 50, 1).len(), 20);
    }

    #[test]
    fn batches_mix_tiers_in_their_shares_until_one_runs_out() {
        let items: Vec<Item> = (0..30)
            .map(|i| {
                let scs = if i < 20 {
                    1.0
                } else if i < 26 {
                    0.8
                } else {
                    0.2
                };
                Item::from_record(&record(&format!("t{i}"), &["get"], scs, false)).unwrap()
            })
            .collect();
        let w = Weights {
            spec_cs: 0.0,
            ..Weights::default()
        };
        let tiers = vec![
            Tier {
                name: "high".into(),
                min: 0.95,
                share: 0.7,
            },
            Tier {
                name: "mid".into(),
                min: 0.5,
                share: 0.2,
            },
            Tier {
                name: "low".into(),
                min: 0.0,
                share: 0.1,
            },
        ];
        let (out, left) = batches(&items, &w, &tiers, 10, 3);
        // 7 high + 2 mid + 1 low per batch: the high tier (20 items) allows 2 batches.
        assert_eq!(out.len(), 2);
        for b in &out {
            assert_eq!(b.len(), 10);
            assert_eq!(b.iter().filter(|&&i| i < 20).count(), 7);
            assert_eq!(b.iter().filter(|&&i| (20..26).contains(&i)).count(), 2);
        }
        assert_eq!(left["high"], 6);
        assert_eq!(left["mid"], 2);
        assert_eq!(left["low"], 2);
        // Batches never share an item.
        let all: BTreeSet<usize> = out.iter().flatten().copied().collect();
        assert_eq!(all.len(), 20);
        let stages = curriculum(&items, &w, &[0.1, 0.5, 0.95]);
        assert_eq!(
            stages.iter().map(Vec::len).collect::<Vec<_>>(),
            [30, 26, 20]
        );
        assert_eq!(
            histogram([0.0, 0.05, 0.95, 1.0, 0.5]),
            [2, 0, 0, 0, 0, 1, 0, 0, 0, 2]
        );
    }
}

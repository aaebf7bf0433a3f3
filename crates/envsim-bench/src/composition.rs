//! Stratification and balanced, reproducible sampling.
//!
//! A [`Composition`] lists buckets (outcome, |Δ| range, argument count, size). Sampling fills
//! them in order. Within a bucket it first takes one transition per environment, preferring
//! environments the benchmark does not hold yet, then fills the rest at random; all randomness
//! comes from the seed, and candidates are ordered before shuffling, so the same inputs give the
//! same benchmark. Identical (state, call) pairs count once, and transitions with clock- or
//! seed-dependent output are left out unless allowed. A bucket that cannot be filled is an
//! error naming every short bucket, unless under-filling is accepted.

use envsim_core::rng::Rng;
use envsim_explore::record::{action_key, Outcome, TransitionRecord};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// One bucket of a composition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bucket {
    /// Bucket name (shown in datasheets and errors).
    pub name: String,
    /// `success` or `failure`.
    pub outcome: BucketOutcome,
    /// Inclusive |Δ| range (reference counting); absent = any.
    #[serde(default)]
    pub delta: Option<[usize; 2]>,
    /// Exact argument count; absent = any.
    #[serde(default)]
    pub args: Option<usize>,
    /// How many samples.
    pub count: usize,
}

/// The outcome a bucket takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BucketOutcome {
    /// `success` is true.
    Success,
    /// `success` is false.
    Failure,
}

/// A benchmark composition (JSON file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Composition {
    /// Buckets in fill order.
    pub buckets: Vec<Bucket>,
}

impl Composition {
    /// The reference benchmark's layout: 20 failure, 40 + 40 no-change (0 / 1 argument),
    /// 25 + 25 simple (|Δ| 1, 2), 50 each for |Δ| 3–6, 50 difficult (|Δ| 7–12). Failures are
    /// also required to leave the state unchanged (the reference did not check this).
    pub fn reference() -> Composition {
        let b = |name: &str, outcome, delta: Option<[usize; 2]>, args, count| Bucket {
            name: name.into(),
            outcome,
            delta,
            args,
            count,
        };
        use BucketOutcome::{Failure, Success};
        Composition {
            buckets: vec![
                b("failure", Failure, Some([0, 0]), None, 20),
                b("no_change_args0", Success, Some([0, 0]), Some(0), 40),
                b("no_change_args1", Success, Some([0, 0]), Some(1), 40),
                b("simple_1", Success, Some([1, 1]), None, 25),
                b("simple_2", Success, Some([2, 2]), None, 25),
                b("medium_3", Success, Some([3, 3]), None, 50),
                b("medium_4", Success, Some([4, 4]), None, 50),
                b("medium_5", Success, Some([5, 5]), None, 50),
                b("medium_6", Success, Some([6, 6]), None, 50),
                b("difficult_7_12", Success, Some([7, 12]), None, 50),
            ],
        }
    }

    /// Reads a composition file's JSON.
    pub fn from_json(text: &str) -> Result<Composition, String> {
        let composition: Composition = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if composition.buckets.is_empty() {
            return Err("the composition has no buckets".into());
        }
        for b in &composition.buckets {
            if let Some([lo, hi]) = b.delta {
                if lo > hi {
                    return Err(format!(
                        "bucket {:?}: delta range [{lo}, {hi}] is empty",
                        b.name
                    ));
                }
            }
        }
        Ok(composition)
    }

    /// Total samples.
    pub fn total(&self) -> usize {
        self.buckets.iter().map(|b| b.count).sum()
    }
}

impl Bucket {
    fn accepts(&self, t: &TransitionRecord) -> bool {
        let outcome = match self.outcome {
            BucketOutcome::Success => t.outcome == Outcome::Success,
            BucketOutcome::Failure => t.outcome == Outcome::Failure,
        };
        outcome
            && self
                .delta
                .is_none_or(|[lo, hi]| (lo..=hi).contains(&t.change_count))
            && self.args.is_none_or(|a| a == t.args_count)
    }
}

/// Sampling options.
#[derive(Clone, Debug)]
pub struct SampleOptions {
    /// Seed of the sampling.
    pub seed: u64,
    /// Keep transitions whose output depends on the clock or the seed.
    pub allow_unpredictable: bool,
    /// Accept buckets that cannot be filled.
    pub allow_underfill: bool,
    /// The largest share of one bucket a single environment may fill (rounded up to whole
    /// samples, at least one); 1.0 lifts the cap.
    pub max_env_share: f64,
}

/// The share [`SampleOptions::max_env_share`] defaults to in the CLI.
pub const DEFAULT_MAX_ENV_SHARE: f64 = 0.2;

impl SampleOptions {
    /// Samples one environment may contribute to a bucket of `count`.
    pub fn env_cap(&self, count: usize) -> usize {
        if self.max_env_share >= 1.0 {
            return count;
        }
        ((self.max_env_share.max(0.0) * count as f64).ceil() as usize).max(1)
    }
}

/// The buckets that no amount of collecting can fill from `environments` environments: each
/// may give a bucket of `count` at most [`SampleOptions::env_cap`] samples, so a bucket whose
/// count exceeds `environments` × that cap stays short however long the walks. One message per
/// such bucket, naming what would make it possible.
pub fn unfillable(
    composition: &Composition,
    options: &SampleOptions,
    environments: usize,
) -> Vec<String> {
    composition
        .buckets
        .iter()
        .filter_map(|b| {
            let cap = options.env_cap(b.count);
            let most = cap.saturating_mul(environments);
            (most < b.count).then(|| {
                let needed = b.count.div_ceil(cap.max(1));
                format!(
                    "bucket {} needs {} samples, but {environments} environment{} may give it at most {cap} each (--max-env-share {}): at most {most}; raise --max-env-share to {:.2} or more, or use {needed} environments or more",
                    b.name,
                    b.count,
                    if environments == 1 { "" } else { "s" },
                    options.max_env_share,
                    b.count.div_ceil(environments.max(1)) as f64 / b.count as f64,
                )
            })
        })
        .collect()
}

/// A bucket that lacks candidates.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Shortfall {
    /// Bucket name.
    pub bucket: String,
    /// Wanted.
    pub wanted: usize,
    /// Available.
    pub available: usize,
    /// Of the available, how many the per-environment cap held back.
    pub capped: usize,
}

/// Why sampling failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("cannot fill the composition: {} (collect more transitions, or accept with --allow-underfill)", describe(.0))]
pub struct UnderfillError(pub Vec<Shortfall>);

fn describe(shortfalls: &[Shortfall]) -> String {
    shortfalls
        .iter()
        .map(|s| {
            let usable = s.available - s.capped;
            let mut text = format!(
                "bucket {:?} lacks {} of {} ({} available",
                s.bucket,
                s.wanted.saturating_sub(usable),
                s.wanted,
                s.available
            );
            if s.capped > 0 {
                text.push_str(&format!(
                    ", {} of them held back by the per-environment cap (--max-env-share)",
                    s.capped
                ));
            }
            text.push(')');
            text
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The chosen transitions, bucket by bucket, plus bookkeeping for the datasheet.
#[derive(Clone, Debug)]
pub struct Sampled {
    /// (bucket name, transition index) in benchmark order.
    pub picks: Vec<(String, usize)>,
    /// Buckets that were short (only with `allow_underfill`).
    pub shortfalls: Vec<Shortfall>,
    /// Transitions left out as duplicates.
    pub duplicates: usize,
    /// Transitions left out for unpredictable output.
    pub unpredictable: usize,
    /// The per-environment cap the sampling used ([`SampleOptions::max_env_share`]).
    pub max_env_share: f64,
}

fn text_hash(text: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(text, &mut hasher);
    std::hash::Hasher::finish(&hasher)
}

/// Samples a benchmark from collected transitions.
pub fn sample(
    transitions: &[TransitionRecord],
    composition: &Composition,
    options: &SampleOptions,
) -> Result<Sampled, UnderfillError> {
    // Dedup identical (state, call) pairs, keeping the first in collection order.
    let mut seen = HashSet::new();
    let mut eligible = Vec::new();
    let (mut duplicates, mut unpredictable) = (0, 0);
    for (i, t) in transitions.iter().enumerate() {
        let key = (
            t.env.as_str(),
            text_hash(&t.config_before.identity()),
            action_key(&t.action),
        );
        if !seen.insert(key) {
            duplicates += 1;
            continue;
        }
        if !t.unpredictable.is_empty() && !options.allow_unpredictable {
            unpredictable += 1;
            continue;
        }
        eligible.push(i);
    }
    let mut rng = Rng::new(options.seed);
    let mut used: BTreeSet<usize> = BTreeSet::new();
    let mut envs_used: BTreeSet<&str> = BTreeSet::new();
    let mut picks = Vec::new();
    let mut shortfalls = Vec::new();
    for bucket in &composition.buckets {
        let candidates: Vec<usize> = eligible
            .iter()
            .copied()
            .filter(|i| !used.contains(i) && bucket.accepts(&transitions[*i]))
            .collect();
        let cap = options.env_cap(bucket.count);
        // Group by environment; environments not yet in the benchmark come first.
        let mut by_env: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for i in &candidates {
            by_env
                .entry(transitions[*i].env.as_str())
                .or_default()
                .push(*i);
        }
        let mut fresh: Vec<&str> = by_env
            .keys()
            .copied()
            .filter(|e| !envs_used.contains(e))
            .collect();
        let mut seen_envs: Vec<&str> = by_env
            .keys()
            .copied()
            .filter(|e| envs_used.contains(e))
            .collect();
        rng.shuffle(&mut fresh);
        rng.shuffle(&mut seen_envs);
        let mut chosen: Vec<usize> = Vec::new();
        for env in fresh.iter().chain(&seen_envs) {
            if chosen.len() == bucket.count {
                break;
            }
            let pool = &by_env[env];
            if let Some(pick) = rng.pick(pool) {
                chosen.push(*pick);
            }
        }
        let mut rest: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|i| !chosen.contains(i))
            .collect();
        rng.shuffle(&mut rest);
        // Fill up in the shuffled order, skipping environments that reached the cap.
        let mut per_env: BTreeMap<&str, usize> = BTreeMap::new();
        for i in &chosen {
            *per_env.entry(transitions[*i].env.as_str()).or_default() += 1;
        }
        let mut capped = 0;
        for i in rest {
            if chosen.len() == bucket.count {
                break;
            }
            let n = per_env.entry(transitions[i].env.as_str()).or_default();
            if *n >= cap {
                capped += 1;
                continue;
            }
            *n += 1;
            chosen.push(i);
        }
        if chosen.len() < bucket.count {
            shortfalls.push(Shortfall {
                bucket: bucket.name.clone(),
                wanted: bucket.count,
                available: candidates.len(),
                capped,
            });
        }
        for i in &chosen {
            used.insert(*i);
            envs_used.insert(transitions[*i].env.as_str());
            picks.push((bucket.name.clone(), *i));
        }
    }
    if !shortfalls.is_empty() && !options.allow_underfill {
        return Err(UnderfillError(shortfalls));
    }
    Ok(Sampled {
        picks,
        shortfalls,
        duplicates,
        unpredictable,
        max_env_share: options.max_env_share.min(1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use envsim_explore::driver::Intent;
    use envsim_explore::record::StateText;
    use serde_json::json;

    fn record(
        env: &str,
        n: usize,
        outcome: Outcome,
        change_count: usize,
        args: usize,
    ) -> TransitionRecord {
        TransitionRecord {
            env: env.into(),
            class_name: "C".into(),
            convention: envsim_exec::Convention::Class,
            tool_schema: json!({}),
            initial_state: "00.json".into(),
            walk: 0,
            step: n,
            intent: Intent::Valid,
            action: json!({"name": "t", "arguments": {"n": n}}),
            config_before: StateText::from_value(&json!({"n": n})),
            config_after: StateText::from_value(&json!({"n": n})),
            observation: String::new(),
            observation_json: json!(null),
            outcome,
            change_count,
            fine_change_count: change_count,
            args_count: args,
            unpredictable: Vec::new(),
            reads: None,
            seed: 0,
            clock: 0.0,
        }
    }

    fn options(seed: u64) -> SampleOptions {
        SampleOptions {
            max_env_share: 1.0,
            seed,
            allow_unpredictable: false,
            allow_underfill: false,
        }
    }

    fn composition(buckets: &[(&str, BucketOutcome, Option<[usize; 2]>, usize)]) -> Composition {
        Composition {
            buckets: buckets
                .iter()
                .map(|(name, outcome, delta, count)| Bucket {
                    name: (*name).into(),
                    outcome: *outcome,
                    delta: *delta,
                    args: None,
                    count: *count,
                })
                .collect(),
        }
    }

    #[test]
    fn coverage_first_then_fill() {
        // env a has 10 candidates, b and c one each: a bucket of 3 takes one from each env.
        let mut ts: Vec<TransitionRecord> = (0..10)
            .map(|n| record("a", n, Outcome::Success, 3, 1))
            .collect();
        ts.push(record("b", 100, Outcome::Success, 3, 1));
        ts.push(record("c", 200, Outcome::Success, 3, 1));
        let comp = composition(&[("m3", BucketOutcome::Success, Some([3, 3]), 3)]);
        for seed in 0..20 {
            let s = sample(&ts, &comp, &options(seed)).unwrap();
            let envs: BTreeSet<&str> = s.picks.iter().map(|(_, i)| ts[*i].env.as_str()).collect();
            assert_eq!(envs.len(), 3, "seed {seed}");
        }
        // A second bucket prefers environments the benchmark does not hold yet.
        ts.push(record("d", 300, Outcome::Failure, 0, 1));
        ts.push(record("a", 301, Outcome::Failure, 0, 1));
        let comp = composition(&[
            ("m3", BucketOutcome::Success, Some([3, 3]), 3),
            ("fail", BucketOutcome::Failure, Some([0, 0]), 1),
        ]);
        let s = sample(&ts, &comp, &options(1)).unwrap();
        assert_eq!(ts[s.picks[3].1].env, "d");
    }

    #[test]
    fn buckets_the_cap_makes_impossible_are_named_before_collecting() {
        let comp = composition(&[
            ("small", BucketOutcome::Success, Some([0, 0]), 3),
            ("large", BucketOutcome::Success, Some([1, 1]), 10),
        ]);
        let capped = SampleOptions {
            max_env_share: 0.2,
            ..options(1)
        };
        // Two environments: `small` takes at most 1 + 1 of 3, `large` 2 + 2 of 10.
        let found = unfillable(&comp, &capped, 2);
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[1],
            "bucket large needs 10 samples, but 2 environments may give it at most 2 each (--max-env-share 0.2): at most 4; raise --max-env-share to 0.50 or more, or use 5 environments or more"
        );
        // The suggestions suffice: 0.5 of 10 is 5 each (and 2 of 3); five environments give 2
        // each.
        let raised = SampleOptions {
            max_env_share: 0.5,
            ..options(1)
        };
        assert!(unfillable(&comp, &raised, 2).is_empty());
        assert!(unfillable(&comp, &capped, 5).is_empty());
        // One environment, no cap: anything is possible.
        assert!(unfillable(&comp, &options(1), 1).is_empty());
        assert_eq!(unfillable(&comp, &capped, 0).len(), 2);
    }

    #[test]
    fn one_environment_fills_at_most_its_share_of_a_bucket() {
        // 43 candidates from one environment, 2 from another: without a cap the bucket of 10
        // is mostly `big`; with 0.2 `big` gives at most 2 and the bucket is short.
        let mut ts: Vec<TransitionRecord> = (0..43)
            .map(|n| record("big", n, Outcome::Success, 2, 0))
            .collect();
        ts.extend((43..45).map(|n| record("small", n, Outcome::Success, 2, 0)));
        let comp = composition(&[("medium", BucketOutcome::Success, Some([2, 2]), 10)]);
        let free = sample(&ts, &comp, &options(1)).unwrap();
        assert_eq!(free.picks.len(), 10);
        let capped = SampleOptions {
            max_env_share: 0.2,
            ..options(1)
        };
        assert_eq!(capped.env_cap(10), 2);
        assert_eq!(capped.env_cap(3), 1, "rounded up, at least one");
        let err = sample(&ts, &comp, &capped).unwrap_err();
        assert_eq!(
            err.0,
            [Shortfall {
                bucket: "medium".into(),
                wanted: 10,
                available: 45,
                capped: 41
            }]
        );
        assert!(err
            .to_string()
            .contains("bucket \"medium\" lacks 6 of 10 (45 available, 41 of them held back by the per-environment cap (--max-env-share))"));
        let under = SampleOptions {
            allow_underfill: true,
            ..capped
        };
        let s = sample(&ts, &comp, &under).unwrap();
        let big = s.picks.iter().filter(|(_, i)| ts[*i].env == "big").count();
        assert_eq!((s.picks.len(), big), (4, 2));
    }

    #[test]
    fn reproducible_and_seed_dependent() {
        let ts: Vec<TransitionRecord> = (0..40)
            .map(|n| record(&format!("e{}", n % 7), n, Outcome::Success, 1 + n % 3, 0))
            .collect();
        let comp = composition(&[("any", BucketOutcome::Success, Some([1, 3]), 10)]);
        let a = sample(&ts, &comp, &options(5)).unwrap().picks;
        let b = sample(&ts, &comp, &options(5)).unwrap().picks;
        let c = sample(&ts, &comp, &options(6)).unwrap().picks;
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(
            a.iter().map(|(_, i)| *i).collect::<BTreeSet<_>>().len(),
            10,
            "no sample twice"
        );
    }

    #[test]
    fn duplicates_and_unpredictable_are_left_out() {
        let mut ts = vec![
            record("a", 1, Outcome::Success, 1, 0),
            record("a", 1, Outcome::Success, 1, 0),
        ];
        let mut noisy = record("a", 2, Outcome::Success, 1, 0);
        noisy.unpredictable = vec!["/state/at".into()];
        ts.push(noisy);
        let comp = composition(&[("s1", BucketOutcome::Success, Some([1, 1]), 1)]);
        let s = sample(&ts, &comp, &options(0)).unwrap();
        assert_eq!((s.duplicates, s.unpredictable), (1, 1));
        assert_eq!(s.picks, vec![("s1".to_string(), 0)]);
        let two = composition(&[("s1", BucketOutcome::Success, Some([1, 1]), 2)]);
        assert!(sample(&ts, &two, &options(0)).is_err());
        let allowed = SampleOptions {
            allow_unpredictable: true,
            ..options(0)
        };
        assert_eq!(sample(&ts, &two, &allowed).unwrap().picks.len(), 2);
    }

    #[test]
    fn underfill_names_every_short_bucket() {
        let ts = vec![
            record("a", 1, Outcome::Success, 1, 0),
            record("a", 2, Outcome::Failure, 0, 0),
        ];
        let comp = composition(&[
            ("s1", BucketOutcome::Success, Some([1, 1]), 3),
            ("fail", BucketOutcome::Failure, Some([0, 0]), 1),
            ("big", BucketOutcome::Success, Some([7, 12]), 2),
        ]);
        let err = sample(&ts, &comp, &options(0)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot fill the composition: bucket \"s1\" lacks 2 of 3 (1 available); bucket \"big\" lacks 2 of 2 (0 available) (collect more transitions, or accept with --allow-underfill)"
        );
        let ok = sample(
            &ts,
            &comp,
            &SampleOptions {
                allow_underfill: true,
                ..options(0)
            },
        )
        .unwrap();
        assert_eq!(ok.picks.len(), 2);
        assert_eq!(ok.shortfalls.len(), 2);
    }

    #[test]
    fn compositions_are_validated() {
        assert_eq!(Composition::reference().total(), 400);
        assert!(Composition::from_json(r#"{"buckets": []}"#)
            .unwrap_err()
            .contains("no buckets"));
        assert!(Composition::from_json(
            r#"{"buckets": [{"name": "x", "outcome": "success", "delta": [5, 2], "count": 1}]}"#
        )
        .unwrap_err()
        .contains("empty"));
        assert!(Composition::from_json(
            r#"{"buckets": [{"name": "x", "outcome": "maybe", "count": 1}]}"#
        )
        .is_err());
        let c = Composition::from_json(
            r#"{"buckets": [{"name": "x", "outcome": "failure", "args": 1, "count": 4}]}"#,
        )
        .unwrap();
        assert_eq!(c.buckets[0].args, Some(1));
    }
}

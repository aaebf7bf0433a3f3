//! Reports of stored runs: the per-stratum score table with 95% bootstrap intervals, the null
//! baseline line, tokens, cost and cost per correct transition, latency percentiles, request
//! statistics; comparisons of several runs (paired bootstrap and McNemar per stratum); and the
//! data of the cliff chart.

use crate::chart::{CliffMetric, CliffPoint, CliffSeries};
use crate::openai::cause_of;
use crate::store::{RunRecord, SampleStatus, Store, StoreError};
use envsim_core::report::Report;
use envsim_core::score::SampleScore;
use envsim_core::stats::{
    bootstrap_mean_ci, mcnemar, mean, paired_bootstrap, percentile, Interval, McNemar,
    PairedComparison,
};
use serde::Serialize;
use serde_json::{json, Map, Value};

/// Bootstrap resamples for every interval.
pub const RESAMPLES: usize = 2000;
/// Confidence level of every interval.
pub const LEVEL: f64 = 0.95;
/// Seed of every bootstrap (fixed, so reports are byte-reproducible).
pub const SEED: u64 = 20_261_129;

/// Metrics that get intervals.
pub const INTERVAL_METRICS: [&str; 4] = ["fm_ref", "cm_ref", "cm_strict", "field_f1"];

fn metric(sample: &SampleScore, name: &str) -> f64 {
    match name {
        "fm_ref" => f64::from(u8::from(sample.fm_ref)),
        "fm_strict" => f64::from(u8::from(sample.fm_strict)),
        "cm_strict" => f64::from(u8::from(sample.cm_strict)),
        "cm_ref" => f64::from(u8::from(sample.cm_ref)),
        "field_f1" => sample.field.f1,
        _ => 0.0,
    }
}

/// Intervals of one report row: `(metric, interval)` for each of [`INTERVAL_METRICS`]
/// (`None` for an empty row).
pub type RowIntervals = Vec<(&'static str, Option<Interval>)>;

pub use envsim_core::sample::Price;

/// Money spent.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Cost {
    /// USD for prompt tokens.
    pub input_usd: f64,
    /// USD for completion tokens.
    pub output_usd: f64,
    /// Total USD.
    pub total_usd: f64,
    /// Total divided by the CM-strict-correct samples (`None` when none is correct).
    pub per_correct_usd: Option<f64>,
}

/// Latency percentiles in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Latency {
    /// Samples measured.
    pub n: usize,
    /// Mean.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Maximum.
    pub max_ms: f64,
}

impl Latency {
    fn of(values: &[f64]) -> Option<Latency> {
        Some(Latency {
            n: values.len(),
            mean_ms: mean(values)?,
            p50_ms: percentile(values, 50.0)?,
            p90_ms: percentile(values, 90.0)?,
            p99_ms: percentile(values, 99.0)?,
            max_ms: percentile(values, 100.0)?,
        })
    }
}

/// Request statistics from the audit log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Requests {
    /// HTTP attempts.
    pub attempts: usize,
    /// Attempts after the first of a sample.
    pub retries: usize,
    /// Attempts that failed (any reason).
    pub failed_attempts: usize,
    /// Samples answered from the cache.
    pub cache_hits: usize,
    /// Samples that ended as API errors (counted as wrong).
    pub api_errors: usize,
}

/// Failed samples with one cause.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ErrorGroup {
    /// The cause (`connection refused`, `HTTP 401`, `timeout`, …).
    pub cause: String,
    /// Samples that failed with it.
    pub count: usize,
    /// The first such error, verbatim.
    pub first: String,
}

/// A stored run, scored and summarised.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The run.
    pub record: RunRecord,
    /// Scores over the whole benchmark (unfinished samples count as missing predictions).
    pub report: Report,
    /// The null baseline on the same benchmark.
    pub null: Report,
    /// The oracle on the same benchmark (its CM-ref shows the reference scorer's blind spots).
    pub oracle: Option<Report>,
    /// Finished samples (the simulator answered).
    pub finished: usize,
    /// Samples whose request failed after its retries (scored wrong; a rerun retries them).
    pub failed: usize,
    /// Failed samples grouped by cause, most frequent first.
    pub errors: Vec<ErrorGroup>,
    /// Samples without stored baseline scores (a sample's baselines are scored while its
    /// request is in flight, so these never got one); the null and oracle lines leave them
    /// out.
    pub baselines_missing: usize,
    /// Per-request latency (HTTP attempts only).
    pub request_latency: Option<Latency>,
    /// Per-sample latency including retries and waits (finished samples).
    pub sample_latency: Option<Latency>,
    /// Request statistics.
    pub requests: Requests,
    /// Cost, when a price is known.
    pub cost: Option<Cost>,
    /// The price used.
    pub price: Option<Price>,
    /// Sample scores written by an older envsim (schema v1: reference columns from the lenient
    /// extraction); resuming the run rescores them from the stored outputs.
    pub legacy_scores: usize,
}

impl RunReport {
    /// Loads and summarises a run. `price` overrides the price stored with the run.
    pub fn load(
        store: &Store,
        record: RunRecord,
        price: Option<Price>,
    ) -> Result<RunReport, StoreError> {
        let corrupt = |message: String| StoreError::Corrupt {
            path: store.path().to_owned(),
            message,
        };
        let rows = store.results(&record.hash)?;
        let mut samples = Vec::with_capacity(rows.len());
        let mut sample_latency = Vec::new();
        let mut requests = Requests::default();
        let mut finished = 0;
        let mut errors: Vec<ErrorGroup> = Vec::new();
        let legacy_scores = rows
            .iter()
            .filter(|row| crate::runner::is_legacy_score(&row.score))
            .count();
        for row in &rows {
            let score: SampleScore = serde_json::from_str(&row.score).map_err(|e| {
                corrupt(format!(
                    "run {} sample {}: score: {e}",
                    record.run_id, row.sample_id
                ))
            })?;
            match row.status {
                SampleStatus::Done => {
                    finished += 1;
                    if let Some(ms) = row.latency_ms {
                        sample_latency.push(ms);
                    }
                    requests.cache_hits += usize::from(row.cached);
                }
                SampleStatus::Failed => {
                    requests.api_errors += 1;
                    let message = score.api_error.clone().unwrap_or_default();
                    let cause = cause_of(&message);
                    match errors.iter_mut().find(|g| g.cause == cause) {
                        Some(group) => group.count += 1,
                        None => errors.push(ErrorGroup {
                            cause,
                            count: 1,
                            first: message,
                        }),
                    }
                }
                SampleStatus::Pending => {}
            }
            samples.push(score);
        }
        // Most frequent first; stable, so equal counts keep the order they were met in.
        errors.sort_by_key(|g| std::cmp::Reverse(g.count));
        let failed = errors.iter().map(|g| g.count).sum();
        let mut null_samples = Vec::new();
        let mut oracle_samples = Vec::new();
        let mut baselines_missing = 0;
        for (idx, stored) in store.baselines(&record.hash)?.into_iter().enumerate() {
            let Some((null, oracle)) = stored else {
                baselines_missing += 1;
                continue;
            };
            let read = |text: &str, which: &str| {
                serde_json::from_str::<SampleScore>(text).map_err(|e| {
                    corrupt(format!(
                        "run {} sample {idx}: {which} baseline: {e}",
                        record.run_id
                    ))
                })
            };
            null_samples.push(read(&null, "null")?);
            oracle_samples.push(read(&oracle, "oracle")?);
        }
        let oracle = Some(Report::new("oracle", oracle_samples));
        let mut request_latency = Vec::new();
        for attempt in store.attempts(&record.hash)? {
            if attempt.attempt == 0 {
                continue;
            }
            requests.attempts += 1;
            requests.retries += usize::from(attempt.attempt > 1);
            requests.failed_attempts +=
                usize::from(!matches!(attempt.outcome.as_str(), "ok" | "batch"));
            if !attempt.outcome.starts_with("batch") {
                request_latency.push(attempt.latency_ms);
            }
        }
        let price = price.or_else(|| {
            record
                .prices
                .as_ref()
                .and_then(|p| serde_json::from_value(p.clone()).ok())
        });
        let report = Report::new(record.system.clone(), samples);
        let cost = price.map(|p| {
            let (input_usd, output_usd) = p.cost(envsim_core::sample::Usage {
                prompt_tokens: report.overall.prompt_tokens,
                completion_tokens: report.overall.completion_tokens,
            });
            let correct = report.samples.iter().filter(|s| s.cm_strict).count();
            let total_usd = input_usd + output_usd;
            Cost {
                input_usd,
                output_usd,
                total_usd,
                per_correct_usd: (correct > 0).then(|| total_usd / correct as f64),
            }
        });
        Ok(RunReport {
            null: Report::new("null", null_samples),
            oracle,
            report,
            finished,
            failed,
            errors,
            baselines_missing,
            request_latency: Latency::of(&request_latency),
            sample_latency: Latency::of(&sample_latency),
            requests,
            cost,
            price,
            record,
            legacy_scores,
        })
    }

    /// Whether every sample finished.
    pub fn complete(&self) -> bool {
        self.finished == self.report.samples.len()
    }

    /// Rows of the report as `(key, samples)`: `overall`, the groups, then every stratum.
    pub fn rows(&self) -> Vec<(String, Vec<&SampleScore>)> {
        rows_of(&self.report)
    }

    /// 95% bootstrap intervals per row and metric.
    pub fn intervals(&self) -> Vec<(String, RowIntervals)> {
        let rows = self.rows();
        // Every cell has its own seed, so computing them on every core gives the same numbers.
        let cells: Vec<(usize, &str)> = (0..rows.len())
            .flat_map(|row| INTERVAL_METRICS.iter().map(move |m| (row, *m)))
            .collect();
        let mut intervals = crate::prepare::parallel_map(cells, |(row, m)| {
            let (key, samples) = &rows[row];
            let values: Vec<f64> = samples.iter().map(|s| metric(s, m)).collect();
            (
                m,
                bootstrap_mean_ci(&values, RESAMPLES, LEVEL, seed_for(key, m)),
            )
        })
        .into_iter();
        rows.iter()
            .map(|(key, _)| {
                let row = intervals.by_ref().take(INTERVAL_METRICS.len()).collect();
                (key.clone(), row)
            })
            .collect()
    }

    /// The `envsim.score.v1` report plus `run`, `intervals` and `null_baseline`.
    pub fn to_json(&self) -> Value {
        let mut root = match self.report.to_json() {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let config = serde_json::to_value(&self.record.config).unwrap_or(Value::Null);
        root.insert(
            "run".into(),
            json!({
                "id": self.record.run_id,
                "hash": self.record.hash,
                "config": config,
                "bench_path": self.record.bench_path,
                "created_at": self.record.created_at,
                "updated_at": self.record.updated_at,
                "samples": self.report.samples.len(),
                "finished": self.finished,
                "failed": self.failed,
                "errors": self.errors,
                "complete": self.complete(),
                "legacy_scores": self.legacy_scores,
                "baselines_missing": self.baselines_missing,
                "tokens": {
                    "prompt": self.report.overall.prompt_tokens,
                    "completion": self.report.overall.completion_tokens,
                },
                "price": self.price,
                "cost": self.cost,
                "latency": {"request": self.request_latency, "sample": self.sample_latency},
                "requests": self.requests,
            }),
        );
        let mut intervals = Map::new();
        for (key, cells) in self.intervals() {
            let cells: Map<String, Value> = cells
                .into_iter()
                .map(|(m, ci)| {
                    (
                        m.to_owned(),
                        serde_json::to_value(ci).unwrap_or(Value::Null),
                    )
                })
                .collect();
            intervals.insert(key, Value::Object(cells));
        }
        root.insert(
            "intervals".into(),
            json!({"level": LEVEL, "resamples": RESAMPLES, "method": "percentile bootstrap over samples", "rows": intervals}),
        );
        let mut null = match self.null.to_json() {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        null.remove("samples");
        root.insert("null_baseline".into(), Value::Object(null));
        if let Some(oracle) = &self.oracle {
            let mut oracle = match oracle.to_json() {
                Value::Object(map) => map,
                _ => Map::new(),
            };
            oracle.remove("samples");
            root.insert("oracle_baseline".into(), Value::Object(oracle));
        }
        Value::Object(root)
    }

    /// The run's cliff curve: `metric` per |Δ| with 95% intervals.
    pub fn cliff(&self, name: &str, metric: CliffMetric) -> CliffSeries {
        cliff_series(name, &self.report.samples, metric)
    }

    /// The null baseline's cliff curve.
    pub fn null_cliff(&self, metric: CliffMetric) -> CliffSeries {
        cliff_series("null baseline", &self.null.samples, metric)
    }
}

/// Share of `true`, computed as count / n exactly like the report's rates.
fn rate(verdicts: &[bool]) -> Option<f64> {
    (!verdicts.is_empty())
        .then(|| verdicts.iter().filter(|v| **v).count() as f64 / verdicts.len() as f64)
}

fn seed_for(key: &str, metric: &str) -> u64 {
    // FNV-1a over the row and metric names: independent, stable streams per cell.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ SEED;
    for b in key.bytes().chain([0]).chain(metric.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn rows_of(report: &Report) -> Vec<(String, Vec<&SampleScore>)> {
    let mut rows = vec![("overall".to_owned(), report.samples.iter().collect())];
    for (group, _) in &report.groups {
        rows.push((
            group.key().to_owned(),
            report
                .samples
                .iter()
                .filter(|s| s.stratum.group() == Some(*group))
                .collect(),
        ));
    }
    for (key, _) in &report.strata {
        rows.push((
            (*key).to_owned(),
            report
                .samples
                .iter()
                .filter(|s| s.stratum.key() == *key || s.stratum.detail_key() == Some(key))
                .collect(),
        ));
    }
    rows
}

/// A config-match metric per |Δ| (0 to the largest present), with 95% bootstrap intervals.
pub fn cliff_series(name: &str, samples: &[SampleScore], metric: CliffMetric) -> CliffSeries {
    let max = samples.iter().map(|s| s.change_count).max().unwrap_or(0);
    let points = (0..=max)
        .map(|k| {
            let values: Vec<f64> = samples
                .iter()
                .filter(|s| s.change_count == k)
                .map(|s| {
                    f64::from(u8::from(match metric {
                        CliffMetric::CmStrict => s.cm_strict,
                        CliffMetric::CmRef => s.cm_ref,
                    }))
                })
                .collect();
            let ci = bootstrap_mean_ci(&values, RESAMPLES, LEVEL, seed_for(name, &k.to_string()));
            CliffPoint {
                change_count: k,
                n: values.len(),
                rate: rate(&values.iter().map(|v| *v > 0.5).collect::<Vec<_>>()).unwrap_or(0.0),
                lo: ci.map_or(0.0, |c| c.lo),
                hi: ci.map_or(0.0, |c| c.hi),
            }
        })
        .collect();
    CliffSeries {
        name: name.to_owned(),
        points,
    }
}

/// One row of a comparison: a stratum (or group, or overall) across runs.
#[derive(Clone, Debug, Serialize)]
pub struct CompareRow {
    /// Row key.
    pub key: String,
    /// Samples in the row.
    pub n: usize,
    /// CM-strict per run.
    pub cm_strict: Vec<Option<f64>>,
    /// Per run after the first: paired bootstrap of CM-strict (run − first run).
    pub paired: Vec<Option<PairedComparison>>,
    /// Per run after the first: exact McNemar test on CM-strict.
    pub mcnemar: Vec<Option<McNemar>>,
}

/// A sample on which runs disagree (CM-strict).
#[derive(Clone, Debug, Serialize)]
pub struct Disagreement {
    /// Sample id.
    pub sample_id: String,
    /// Stratum key.
    pub stratum: String,
    /// |Δ|.
    pub change_count: usize,
    /// CM-strict per run.
    pub cm_strict: Vec<bool>,
}

/// Several runs over the same benchmark, side by side.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// Row per overall/group/stratum.
    pub rows: Vec<CompareRow>,
    /// Samples where the runs disagree.
    pub disagreements: Vec<Disagreement>,
}

/// Compares runs; every run must be over the same benchmark (same fingerprint).
pub fn compare(runs: &[RunReport]) -> Result<Comparison, String> {
    let first = runs.first().ok_or("nothing to compare")?;
    for run in &runs[1..] {
        if run.record.config.subset != first.record.config.subset
            || run.report.samples.len() != first.report.samples.len()
        {
            return Err(format!(
                "runs {} and {} evaluate different subsets of the benchmark; paired comparisons need the same samples",
                first.record.run_id, run.record.run_id
            ));
        }
        if run.record.config.bench_sha256 != first.record.config.bench_sha256 {
            return Err(format!(
                "runs {} and {} are over different benchmarks (fingerprints {}… and {}…); paired comparisons need the same samples",
                first.record.run_id,
                run.record.run_id,
                &first.record.config.bench_sha256[..12.min(first.record.config.bench_sha256.len())],
                &run.record.config.bench_sha256[..12.min(run.record.config.bench_sha256.len())]
            ));
        }
    }
    let per_run_rows: Vec<Vec<(String, Vec<&SampleScore>)>> =
        runs.iter().map(|r| r.rows()).collect();
    let mut rows = Vec::new();
    for (i, (key, base)) in per_run_rows[0].iter().enumerate() {
        let base_values: Vec<f64> = base.iter().map(|s| metric(s, "cm_strict")).collect();
        let base_bools: Vec<bool> = base.iter().map(|s| s.cm_strict).collect();
        let mut row = CompareRow {
            key: key.clone(),
            n: base.len(),
            cm_strict: vec![rate(&base_bools)],
            paired: Vec::new(),
            mcnemar: Vec::new(),
        };
        for other in &per_run_rows[1..] {
            let values: Vec<f64> = other[i].1.iter().map(|s| metric(s, "cm_strict")).collect();
            let bools: Vec<bool> = other[i].1.iter().map(|s| s.cm_strict).collect();
            row.cm_strict.push(rate(&bools));
            row.paired.push(paired_bootstrap(
                &base_values,
                &values,
                RESAMPLES,
                LEVEL,
                seed_for(key, "paired"),
            ));
            row.mcnemar.push(mcnemar(&base_bools, &bools));
        }
        rows.push(row);
    }
    let disagreements = (0..first.report.samples.len())
        .filter_map(|i| {
            let verdicts: Vec<bool> = runs.iter().map(|r| r.report.samples[i].cm_strict).collect();
            let s = &first.report.samples[i];
            (verdicts.iter().any(|v| *v != verdicts[0])).then(|| Disagreement {
                sample_id: s.sample_id.clone(),
                stratum: s.stratum.detail_key().unwrap_or(s.stratum.key()).to_owned(),
                change_count: s.change_count,
                cm_strict: verdicts,
            })
        })
        .collect();
    Ok(Comparison {
        rows,
        disagreements,
    })
}

impl Comparison {
    /// JSON form (`envsim.compare.v1`).
    pub fn to_json(&self, runs: &[RunReport]) -> Value {
        json!({
            "schema": "envsim.compare.v1",
            "runs": runs.iter().map(|r| json!({"id": r.record.run_id, "system": r.record.system})).collect::<Vec<_>>(),
            "metric": "cm_strict",
            "rows": self.rows,
            "disagreements": self.disagreements,
        })
    }
}

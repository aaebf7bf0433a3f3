//! Statistics for reports and system comparisons: means, percentiles, bootstrap confidence
//! intervals, a paired bootstrap test and the exact McNemar test.
//!
//! Every random draw comes from [`Rng`] (SplitMix64) seeded by the caller, so an interval or a
//! p-value is byte-reproducible for a given seed on every platform, like the rest of envsim's
//! seeded output. The draws are part of the contract: each resample takes `n` indices, in
//! order, from `Rng::new(seed).below(n)`.
//!
//! Means are computed relative to a pivot (the first value): `pivot + Σ(xᵢ − pivot) / n`. For
//! constant data every deviation is exactly zero, so the mean, and every bootstrap mean, is
//! exactly the constant — a plain `Σxᵢ / n` is not (three copies of `0.1` average to
//! `0.10000000000000002`), which would make intervals of constant data look uncertain.

use crate::rng::{Below, Rng};
use serde::Serialize;

/// A closed interval `[lo, hi]`, e.g. a confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Interval {
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
}

impl Interval {
    /// Whether `x` lies in `[lo, hi]` (bounds included).
    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }
}

/// The arithmetic mean; `None` when `values` is empty.
///
/// A NaN anywhere makes the mean NaN (it is not skipped, unlike in [`percentile`]). Exact for
/// constant data (see the module documentation), and finite whenever all values are finite.
pub fn mean(values: &[f64]) -> Option<f64> {
    Some(CenteredSample::new(values)?.mean_of(0..values.len()))
}

/// Pearson's correlation of two paired series; `None` with fewer than two pairs, series of
/// different lengths, or a constant series.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() < 2 || x.len() != y.len() {
        return None;
    }
    let (mx, my) = (mean(x)?, mean(y)?);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// The `q`-th percentile, `q` in `[0, 100]`, by linear interpolation between the closest ranks
/// (NumPy's default `"linear"` method): with the `n` non-NaN values sorted ascending as
/// `v[0..n]`, the rank is `h = (n − 1) · q / 100` and the result
/// `v[⌊h⌋] + (h − ⌊h⌋) · (v[⌊h⌋ + 1] − v[⌊h⌋])`.
///
/// NaNs are ignored. `None` when no non-NaN value is left or `q` is outside `[0, 100]` (or NaN).
pub fn percentile(values: &[f64], q: f64) -> Option<f64> {
    if !(0.0..=100.0).contains(&q) {
        return None;
    }
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    sorted.sort_by(f64::total_cmp);
    percentile_of_sorted(&sorted, q)
}

/// [`percentile`] of values already sorted ascending, without NaNs.
fn percentile_of_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    // Same operation order as NumPy: the quantile first, then the rank.
    let rank = (q / 100.0) * last as f64;
    let below = (rank.floor() as usize).min(last);
    let above = (below + 1).min(last);
    let weight = rank - below as f64;
    let (lo, hi) = (sorted[below], sorted[above]);
    if weight == 0.0 || lo == hi {
        // Exact ranks need no arithmetic; this also keeps infinities from turning into
        // `inf - inf = NaN`.
        return Some(lo);
    }
    // NumPy's `_lerp`: interpolate from the nearer end, which keeps the result inside
    // `[lo, hi]` and monotone in `q`.
    let span = hi - lo;
    Some(if weight >= 0.5 {
        hi - span * (1.0 - weight)
    } else {
        lo + span * weight
    })
}

/// Percentile bootstrap confidence interval of the mean.
///
/// Draws `resamples` resamples of `values.len()` values with replacement (indices from
/// `Rng::new(seed)`), takes the mean of each, and returns the central `level` share of those
/// means: the [`percentile`]s at `100 · (1 − level) / 2` and `100 · (1 + level) / 2`. With
/// `level = 0.95` that is the 2.5th and 97.5th percentile.
///
/// `None` when `values` is empty, `resamples` is 0, `level` is outside `[0, 1]`, or the
/// resample means cannot be allocated. A NaN in `values` makes both bounds NaN. Costs
/// `resamples · values.len()` draws.
pub fn bootstrap_mean_ci(
    values: &[f64],
    resamples: usize,
    level: f64,
    seed: u64,
) -> Option<Interval> {
    let (lower_q, upper_q) = central_percentiles(level)?;
    if resamples == 0 {
        return None;
    }
    let sample = CenteredSample::new(values)?;
    if values.iter().any(|v| v.is_nan()) {
        return Some(Interval {
            lo: f64::NAN,
            hi: f64::NAN,
        });
    }
    let mut means = Vec::new();
    means.try_reserve_exact(resamples).ok()?;
    let mut rng = Rng::new(seed);
    let mut indices = vec![0; values.len()];
    let below = Below::new(values.len());
    for _ in 0..resamples {
        indices.iter_mut().for_each(|i| *i = rng.below_with(&below));
        means.push(sample.mean_of(indices.iter().copied()));
    }
    interval_of(means, lower_q, upper_q)
}

/// The result of [`paired_bootstrap`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PairedComparison {
    /// Number of paired samples.
    pub n: usize,
    /// Mean score of system A.
    pub mean_a: f64,
    /// Mean score of system B.
    pub mean_b: f64,
    /// `mean_b − mean_a`: positive when B scores higher.
    pub diff: f64,
    /// Percentile bootstrap confidence interval of `diff`.
    pub ci: Interval,
    /// Two-sided bootstrap p-value for "no difference", see [`paired_bootstrap`].
    pub p_value: f64,
}

/// Paired bootstrap comparison of two systems scored on the same samples (`a[i]` and `b[i]`
/// belong to sample `i`).
///
/// Each of the `resamples` resamples draws `n` sample indices with replacement (from
/// `Rng::new(seed)`) and uses the *same* indices for both systems, so per-sample difficulty
/// cancels out; its difference is `mean(b[idx]) − mean(a[idx])`. The interval is the central
/// `level` share of those differences, as in [`bootstrap_mean_ci`].
///
/// `p_value = min(1, 2 · min(#{d ≤ 0}, #{d ≥ 0}) / resamples)` over the resampled differences
/// `d`: twice the share of resamples on the less populated side of zero, capped at 1. Resamples
/// with exactly zero difference count on both sides, so identical systems get 1. The smallest
/// reachable value is 0 (no resample on one side): report it as `< 1 / resamples`.
///
/// `None` when the lengths differ, the slices are empty, `resamples` is 0, `level` is outside
/// `[0, 1]`, or the resampled differences cannot be allocated. A NaN in either slice makes the
/// means, the interval and the p-value NaN.
pub fn paired_bootstrap(
    a: &[f64],
    b: &[f64],
    resamples: usize,
    level: f64,
    seed: u64,
) -> Option<PairedComparison> {
    if a.len() != b.len() || resamples == 0 {
        return None;
    }
    let (lower_q, upper_q) = central_percentiles(level)?;
    let (sample_a, sample_b) = (CenteredSample::new(a)?, CenteredSample::new(b)?);
    let n = a.len();
    let (mean_a, mean_b) = (sample_a.mean_of(0..n), sample_b.mean_of(0..n));
    if a.iter().chain(b).any(|v| v.is_nan()) {
        return Some(PairedComparison {
            n,
            mean_a,
            mean_b,
            diff: f64::NAN,
            ci: Interval {
                lo: f64::NAN,
                hi: f64::NAN,
            },
            p_value: f64::NAN,
        });
    }
    let mut diffs = Vec::new();
    diffs.try_reserve_exact(resamples).ok()?;
    let mut rng = Rng::new(seed);
    let mut indices = vec![0; n];
    let below = Below::new(n);
    for _ in 0..resamples {
        indices.iter_mut().for_each(|i| *i = rng.below_with(&below));
        let resampled_b = sample_b.mean_of(indices.iter().copied());
        diffs.push(resampled_b - sample_a.mean_of(indices.iter().copied()));
    }
    let at_most_zero = diffs.iter().filter(|&&d| d <= 0.0).count();
    let at_least_zero = diffs.iter().filter(|&&d| d >= 0.0).count();
    let p_value = (2.0 * at_most_zero.min(at_least_zero) as f64 / resamples as f64).min(1.0);
    Some(PairedComparison {
        n,
        mean_a,
        mean_b,
        diff: mean_b - mean_a,
        ci: interval_of(diffs, lower_q, upper_q)?,
        p_value,
    })
}

/// The result of [`mcnemar`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct McNemar {
    /// Samples that only system A gets right.
    pub only_a: usize,
    /// Samples that only system B gets right.
    pub only_b: usize,
    /// Exact two-sided p-value for "both systems are equally good".
    pub p_value: f64,
}

/// Exact McNemar test on paired pass/fail outcomes (`a[i]` and `b[i]` belong to sample `i`).
///
/// Only discordant pairs carry information: under the null hypothesis each of the
/// `only_a + only_b` of them is equally likely to favour either system, so the test is a
/// two-sided binomial test with p = 1/2: `p_value = min(1, 2 · P(X ≤ min(only_a, only_b)))`
/// for `X ~ Binomial(only_a + only_b, 1/2)`; 1 when there are no discordant pairs.
///
/// `None` when the lengths differ.
pub fn mcnemar(a: &[bool], b: &[bool]) -> Option<McNemar> {
    if a.len() != b.len() {
        return None;
    }
    let only_a = a.iter().zip(b).filter(|(&x, &y)| x && !y).count();
    let only_b = a.iter().zip(b).filter(|(&x, &y)| !x && y).count();
    let discordant = only_a as u64 + only_b as u64;
    let tail = half_binomial_lower_tail(discordant, only_a.min(only_b) as u64);
    Some(McNemar {
        only_a,
        only_b,
        p_value: (2.0 * tail).min(1.0),
    })
}

/// The largest `n` for which [`half_binomial_lower_tail`] sums exact integer binomial
/// coefficients: `C(120, 60) · 61 < 2¹²³` still fits the `u128` intermediate product.
const EXACT_BINOMIAL_MAX_N: u64 = 120;

/// `P(X ≤ k)` for `X ~ Binomial(n, 1/2)`.
///
/// Small `n` is computed exactly in integers (one rounding at the end); larger `n` in log space,
/// because `0.5ⁿ` underflows and `C(n, k)` overflows long before `n` reaches the sizes of real
/// benchmarks (10,000 pairs).
fn half_binomial_lower_tail(n: u64, k: u64) -> f64 {
    if k >= n {
        return 1.0;
    }
    if k.saturating_mul(2).saturating_add(1) == n {
        // By symmetry, exactly half the mass lies at or below the middle of an odd n.
        return 0.5;
    }
    if n <= EXACT_BINOMIAL_MAX_N {
        half_binomial_lower_tail_exact(n, k)
    } else {
        half_binomial_lower_tail_log(n, k)
    }
}

/// `Σ_{i ≤ k} C(n, i) / 2ⁿ` with exact integer coefficients; `n ≤ EXACT_BINOMIAL_MAX_N`.
fn half_binomial_lower_tail_exact(n: u64, k: u64) -> f64 {
    let mut coefficient: u128 = 1;
    let mut total: u128 = 1;
    for i in 1..=k {
        coefficient = coefficient * u128::from(n - i + 1) / u128::from(i);
        total += coefficient;
    }
    // `0.5ⁿ` is a power of two, exact for these n, so the only rounding is `total as f64`.
    total as f64 * 0.5f64.powi(n as i32)
}

/// `Σ_{i ≤ k} C(n, i) / 2ⁿ` for `k < n`, without underflow or overflow.
///
/// The largest term, `i = k`, is computed in log space; the sum is that term times
/// `1 + r_k + r_k r_{k−1} + …` with the exact term ratios `r_i = i / (n − i + 1)`, accumulated
/// from the largest term down until the remaining terms cannot change the result.
fn half_binomial_lower_tail_log(n: u64, k: u64) -> f64 {
    let n_f = n as f64;
    let log_largest_term = (1..=k)
        .map(|i| ((n - k + i) as f64 / i as f64).ln())
        .sum::<f64>()
        - n_f * std::f64::consts::LN_2;
    let mut relative_sum = 1.0;
    let mut relative_term = 1.0;
    for i in (1..=k).rev() {
        relative_term *= i as f64 / (n - i + 1) as f64;
        relative_sum += relative_term;
        if relative_term < relative_sum * f64::EPSILON * 0.25 {
            break;
        }
    }
    (log_largest_term + relative_sum.ln()).exp().min(1.0)
}

/// The percentiles bounding the central `level` share; `None` unless `level` is in `[0, 1]`.
fn central_percentiles(level: f64) -> Option<(f64, f64)> {
    if !(0.0..=1.0).contains(&level) {
        return None;
    }
    Some((100.0 * (1.0 - level) / 2.0, 100.0 * (1.0 + level) / 2.0))
}

/// The interval between two percentiles of `values`; `None` when all are NaN.
/// The central `level` share of `values` (percentiles as in [`bootstrap_mean_ci`]); `None`
/// when `values` is empty or `level` is outside `[0, 1]`.
pub fn percentile_interval(values: Vec<f64>, level: f64) -> Option<Interval> {
    let (lower_q, upper_q) = central_percentiles(level)?;
    interval_of(values, lower_q, upper_q)
}

fn interval_of(mut values: Vec<f64>, lower_q: f64, upper_q: f64) -> Option<Interval> {
    values.retain(|v| !v.is_nan());
    values.sort_by(f64::total_cmp);
    Some(Interval {
        lo: percentile_of_sorted(&values, lower_q)?,
        hi: percentile_of_sorted(&values, upper_q)?,
    })
}

/// A sample prepared for computing the mean of many resamples cheaply and exactly for constant
/// data: the deviations from a pivot (the first value) are computed once.
struct CenteredSample {
    /// The first value, times `scale`.
    pivot: f64,
    /// `scale · (xᵢ − pivot)`, divided by `n` when `divided` is set.
    deviations: Vec<f64>,
    /// 1, or ½ when deviations of finite values would overflow.
    scale: f64,
    /// Whether each deviation is already divided by `n`.
    divided: bool,
    /// The number of values, as a float.
    count: f64,
}

impl CenteredSample {
    /// `None` for an empty slice.
    fn new(values: &[f64]) -> Option<Self> {
        let first = *values.first()?;
        let count = values.len() as f64;
        let deviations: Vec<f64> = values.iter().map(|v| v - first).collect();
        let max_deviation = deviations.iter().fold(0.0f64, |m, d| m.max(d.abs()));
        // A resample may repeat the largest deviation n times; if that sum can overflow while
        // the data is finite (values near ±f64::MAX), fall back to halved values divided by n
        // before summing, which keeps every partial sum finite.
        if (max_deviation * count).is_finite() || values.iter().any(|v| !v.is_finite()) {
            return Some(CenteredSample {
                pivot: first,
                deviations,
                scale: 1.0,
                divided: false,
                count,
            });
        }
        let half_pivot = first * 0.5;
        Some(CenteredSample {
            pivot: half_pivot,
            deviations: values
                .iter()
                .map(|v| (v * 0.5 - half_pivot) / count)
                .collect(),
            scale: 0.5,
            divided: true,
            count,
        })
    }

    /// The mean of the values at `indices` (which must hold exactly `n` valid indices).
    fn mean_of(&self, indices: impl Iterator<Item = usize>) -> f64 {
        let total: f64 = indices
            .map(|i| self.deviations.get(i).copied().unwrap_or(0.0))
            .sum();
        let offset = if self.divided {
            total
        } else {
            total / self.count
        };
        (self.pivot + offset) / self.scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pearson_of_paired_series() {
        assert_eq!(pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]), Some(1.0));
        assert_eq!(pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
        assert_eq!(pearson(&[1.0, 1.0], &[0.0, 1.0]), None);
        assert_eq!(pearson(&[1.0], &[1.0]), None);
        assert_eq!(pearson(&[1.0, 2.0], &[1.0]), None);
    }

    #[test]
    fn mean_handles_empty_constant_and_extreme_data() {
        assert_eq!(mean(&[]), None);
        assert_eq!(mean(&[1.0, 2.0, 3.0, 4.0]), Some(2.5));
        // A plain sum would give 0.10000000000000002.
        assert_eq!(mean(&[0.1, 0.1, 0.1]), Some(0.1));
        assert_eq!(mean(&[f64::MAX, f64::MAX]), Some(f64::MAX));
        // Deviations from the pivot overflow here; the halved fallback stays finite.
        let extreme = mean(&[f64::MAX, -f64::MAX, f64::MAX]).unwrap();
        assert!(
            (extreme / (f64::MAX / 3.0) - 1.0).abs() < 1e-12,
            "{extreme}"
        );
        assert!(mean(&[1.0, f64::NAN]).is_some_and(f64::is_nan));
    }

    #[test]
    fn percentile_interpolates_like_numpy_linear() {
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 50.0), Some(2.5));
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 0.0), Some(1.0));
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 100.0), Some(3.0));
        // rank = 0.25 · 4 = 1 exactly: the second smallest value.
        assert_eq!(percentile(&[5.0, 1.0, 4.0, 2.0, 3.0], 25.0), Some(2.0));
        // rank = 0.9 · 3 = 2.7: 30 + 0.7 · (40 − 30) = 37, taken from the upper end.
        let p90 = percentile(&[10.0, 20.0, 30.0, 40.0], 90.0).unwrap();
        assert!((p90 - 37.0).abs() < 1e-12, "{p90}");
        assert_eq!(percentile(&[7.0], 33.0), Some(7.0));
        assert_eq!(percentile(&[f64::NAN, 2.0, f64::NAN, 4.0], 50.0), Some(3.0));
        assert_eq!(
            percentile(&[f64::INFINITY, 1.0], 100.0),
            Some(f64::INFINITY)
        );
    }

    #[test]
    fn percentile_rejects_empty_input_and_bad_q() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[f64::NAN], 50.0), None);
        assert_eq!(percentile(&[1.0], -0.1), None);
        assert_eq!(percentile(&[1.0], 100.1), None);
        assert_eq!(percentile(&[1.0], f64::NAN), None);
    }

    #[test]
    fn bootstrap_ci_of_constant_data_is_a_point() {
        let ci = bootstrap_mean_ci(&[0.1; 7], 500, 0.95, 1).unwrap();
        assert_eq!(ci, Interval { lo: 0.1, hi: 0.1 });
    }

    #[test]
    fn bootstrap_ci_contains_the_mean_and_is_reproducible() {
        let mut rng = Rng::new(11);
        let values: Vec<f64> = (0..200).map(|_| (rng.below(1000) as f64) / 10.0).collect();
        let sample_mean = mean(&values).unwrap();
        let ci = bootstrap_mean_ci(&values, 2000, 0.95, 42).unwrap();
        assert!(ci.contains(sample_mean), "{ci:?} vs {sample_mean}");
        assert!(ci.lo < ci.hi);
        // The standard error of the mean of U(0, 100) over 200 values is about 2; a 95%
        // interval spans roughly ±4.
        assert!(ci.hi - ci.lo > 4.0 && ci.hi - ci.lo < 12.0, "{ci:?}");
        let again = bootstrap_mean_ci(&values, 2000, 0.95, 42).unwrap();
        assert_eq!(
            (ci.lo.to_bits(), ci.hi.to_bits()),
            (again.lo.to_bits(), again.hi.to_bits())
        );
        let other_seed = bootstrap_mean_ci(&values, 2000, 0.95, 43).unwrap();
        assert_ne!(ci, other_seed);
        let wider = bootstrap_mean_ci(&values, 2000, 0.99, 42).unwrap();
        assert!(wider.lo <= ci.lo && ci.hi <= wider.hi);
    }

    #[test]
    fn bootstrap_ci_rejects_degenerate_requests() {
        assert_eq!(bootstrap_mean_ci(&[], 100, 0.95, 0), None);
        assert_eq!(bootstrap_mean_ci(&[1.0], 0, 0.95, 0), None);
        assert_eq!(bootstrap_mean_ci(&[1.0], 10, 1.5, 0), None);
        assert_eq!(bootstrap_mean_ci(&[1.0], 10, f64::NAN, 0), None);
        assert_eq!(bootstrap_mean_ci(&[1.0], usize::MAX, 0.95, 0), None);
        let nan = bootstrap_mean_ci(&[1.0, f64::NAN], 10, 0.95, 0).unwrap();
        assert!(nan.lo.is_nan() && nan.hi.is_nan());
        // Level 1 spans the extreme resample means, which lie within the data's range.
        let full = bootstrap_mean_ci(&[0.0, 1.0], 1000, 1.0, 3).unwrap();
        assert!(full.lo >= 0.0 && full.hi <= 1.0 && full.lo < full.hi);
    }

    #[test]
    fn paired_bootstrap_detects_a_consistent_improvement() {
        let a: Vec<f64> = (0..100).map(|i| f64::from(i % 2)).collect();
        let b: Vec<f64> = (0..100)
            .map(|i| if i % 4 == 0 { 1.0 } else { f64::from(i % 2) })
            .collect();
        let cmp = paired_bootstrap(&a, &b, 2000, 0.95, 5).unwrap();
        assert_eq!(
            (cmp.n, cmp.mean_a, cmp.mean_b, cmp.diff),
            (100, 0.5, 0.75, 0.25)
        );
        assert!(cmp.ci.contains(cmp.diff) && cmp.ci.lo > 0.0, "{cmp:?}");
        // B is never worse on any sample, so no resample has a difference ≤ 0.
        assert_eq!(cmp.p_value, 0.0);
        assert_eq!(paired_bootstrap(&a, &b, 2000, 0.95, 5), Some(cmp));
    }

    #[test]
    fn paired_bootstrap_of_identical_systems_has_p_one() {
        let a = [0.2, 0.9, 0.4, 0.4];
        let cmp = paired_bootstrap(&a, &a, 300, 0.9, 8).unwrap();
        assert_eq!(cmp.diff, 0.0);
        assert_eq!(cmp.ci, Interval { lo: 0.0, hi: 0.0 });
        assert_eq!(cmp.p_value, 1.0);
    }

    #[test]
    fn paired_bootstrap_p_value_is_two_sided() {
        let a = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0];
        let b = [0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0];
        let ab = paired_bootstrap(&a, &b, 1000, 0.95, 9).unwrap();
        let ba = paired_bootstrap(&b, &a, 1000, 0.95, 9).unwrap();
        assert_eq!(ab.diff, 0.0);
        // Swapping the systems mirrors every resampled difference, so the p-value is the same.
        assert_eq!(ab.p_value, ba.p_value);
        assert!(ab.p_value > 0.5, "{ab:?}");
        assert!((ab.ci.lo + ba.ci.hi).abs() < 1e-12 && (ab.ci.hi + ba.ci.lo).abs() < 1e-12);
    }

    #[test]
    fn paired_bootstrap_rejects_mismatched_input() {
        assert_eq!(paired_bootstrap(&[1.0, 2.0], &[1.0], 10, 0.95, 0), None);
        assert_eq!(paired_bootstrap(&[], &[], 10, 0.95, 0), None);
        assert_eq!(paired_bootstrap(&[1.0], &[1.0], 0, 0.95, 0), None);
        assert_eq!(paired_bootstrap(&[1.0], &[1.0], 10, -0.5, 0), None);
        let nan = paired_bootstrap(&[1.0, f64::NAN], &[1.0, 2.0], 10, 0.95, 0).unwrap();
        assert!(nan.p_value.is_nan() && nan.ci.lo.is_nan() && nan.diff.is_nan());
    }

    #[test]
    fn mcnemar_counts_discordant_pairs_and_gives_exact_p() {
        // Ten wins for A, none for B: 2 · P(X ≤ 0) = 2 · 0.5¹⁰ = 0.001953125.
        let a = [true; 12];
        let mut b = [false; 12];
        b[10] = true;
        b[11] = true;
        let m = mcnemar(&a, &b).unwrap();
        assert_eq!((m.only_a, m.only_b, m.p_value), (10, 0, 0.001953125));
        // 20 discordant pairs split 17/3: 2 · (1 + 20 + 190 + 1140) / 2²⁰ = 2702 / 1048576
        // = 0.0025768280029296875 (exactly representable).
        let a: Vec<bool> = (0..20).map(|i| i < 17).collect();
        let b: Vec<bool> = (0..20).map(|i| i >= 17).collect();
        let m = mcnemar(&a, &b).unwrap();
        assert_eq!((m.only_a, m.only_b), (17, 3));
        assert_eq!(m.p_value, 0.0025768280029296875);
        assert_eq!(mcnemar(&b, &a).unwrap().p_value, m.p_value);
    }

    #[test]
    fn mcnemar_edge_cases() {
        assert_eq!(
            mcnemar(&[true, false], &[true, false]),
            Some(McNemar {
                only_a: 0,
                only_b: 0,
                p_value: 1.0
            })
        );
        assert_eq!(mcnemar(&[], &[]).unwrap().p_value, 1.0);
        assert_eq!(mcnemar(&[true], &[true, false]), None);
        let balanced = mcnemar(&[true, false, true, false], &[false, true, false, true]).unwrap();
        assert_eq!(
            (balanced.only_a, balanced.only_b, balanced.p_value),
            (2, 2, 1.0)
        );
        // One discordant pair: the two-sided p is 2 · 0.5 = 1.
        assert_eq!(mcnemar(&[true], &[false]).unwrap().p_value, 1.0);
    }

    #[test]
    fn binomial_tail_is_accurate_for_large_n() {
        // Expected values are exact rationals evaluated independently (Python,
        // `2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n` with `fractions.Fraction`).
        let cases = [
            (10_000u64, 4_900u64, 0.04658552770494739),
            (10_000, 4_950, 0.322174199795312),
            (3_000, 1_400, 0.0002785639610392337),
            (200, 80, 0.0056851559967503055),
            (121, 50, 0.06859363812061438),
        ];
        for (n, k, expected) in cases {
            let p = (2.0 * half_binomial_lower_tail(n, k)).min(1.0);
            assert!(
                ((p - expected) / expected).abs() < 1e-11,
                "n={n} k={k}: {p} vs {expected}"
            );
        }
        let a: Vec<bool> = (0..10_000).map(|i| i < 4_900).collect();
        let b: Vec<bool> = (0..10_000).map(|i| i >= 4_900).collect();
        let m = mcnemar(&a, &b).unwrap();
        assert!((m.p_value - 0.04658552770494739).abs() < 1e-12);
        assert_eq!(half_binomial_lower_tail(10_001, 5_000), 0.5);
        assert!(half_binomial_lower_tail(10_000, 5_000) > 0.5);
    }

    #[test]
    fn log_space_tail_agrees_with_exact_integers() {
        for n in [30u64, 61, 100, 120] {
            for k in [0, 1, n / 5, n / 3, n / 2 - 1] {
                let exact = half_binomial_lower_tail_exact(n, k);
                let log = half_binomial_lower_tail_log(n, k);
                assert!(
                    ((exact - log) / exact).abs() < 1e-12,
                    "n={n} k={k}: {exact} vs {log}"
                );
            }
        }
    }
}

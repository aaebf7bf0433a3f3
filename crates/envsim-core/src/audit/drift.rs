//! Specification drift: the least-squares slope of the violation indicator on the step index,
//! with a bootstrap interval over whole trajectories.

use serde::Serialize;

/// Specification drift: how the share of steps that break the specification changes with the
/// step index. Does a simulator drift as its trajectories grow?
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Drift {
    /// Per step index: (steps, steps that break the specification).
    pub by_index: Vec<(usize, usize)>,
    /// Least-squares slope of the violation indicator on the step index (violations per step
    /// per step of trajectory length; 0 without drift).
    pub slope: f64,
    /// 95% bootstrap interval of the slope, resampling whole trajectories.
    pub interval: Option<crate::stats::Interval>,
}

/// Sums behind a least-squares slope: n, Σx, Σy, Σxy, Σx².
#[derive(Clone, Copy, Default)]
struct Sums([f64; 5]);

impl Sums {
    fn of(flags: &[bool]) -> Sums {
        let mut s = [0.0; 5];
        for (k, &bad) in flags.iter().enumerate() {
            let (x, y) = (k as f64, f64::from(u8::from(bad)));
            s[0] += 1.0;
            s[1] += x;
            s[2] += y;
            s[3] += x * y;
            s[4] += x * x;
        }
        Sums(s)
    }

    fn add(&mut self, other: &Sums) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    /// The slope; 0 when every x is the same.
    fn slope(&self) -> f64 {
        let [n, sx, sy, sxy, sxx] = self.0;
        let den = n * sxx - sx * sx;
        if n == 0.0 || den.abs() < 1e-12 {
            0.0
        } else {
            (n * sxy - sx * sy) / den
        }
    }
}

/// The drift of per-step violation flags (`flags[t][k]`: step `k` of trajectory `t` breaks the
/// specification), with `resamples` bootstrap resamples of the trajectories from `seed`.
pub fn drift(flags: &[Vec<bool>], resamples: usize, seed: u64) -> Drift {
    let mut tally = DriftTally::default();
    flags.iter().for_each(|t| tally.add(t));
    tally.finish(resamples, seed)
}

/// [`drift`] one trajectory at a time: it keeps five sums per trajectory and a count per step
/// index, not the flags.
#[derive(Clone, Default)]
pub struct DriftTally {
    by_index: Vec<(usize, usize)>,
    sums: Vec<Sums>,
}

impl DriftTally {
    /// Adds one trajectory's flags.
    pub fn add(&mut self, flags: &[bool]) {
        if self.by_index.len() < flags.len() {
            self.by_index.resize(flags.len(), (0, 0));
        }
        for (k, &bad) in flags.iter().enumerate() {
            self.by_index[k].0 += 1;
            self.by_index[k].1 += usize::from(bad);
        }
        self.sums.push(Sums::of(flags));
    }

    /// Trajectories added.
    pub fn trajectories(&self) -> usize {
        self.sums.len()
    }

    /// The drift, with `resamples` bootstrap resamples of the trajectories from `seed`. Each
    /// resample costs one addition of five sums per trajectory, whatever their length.
    pub fn finish(self, resamples: usize, seed: u64) -> Drift {
        let DriftTally { by_index, sums } = self;
        let mut total = Sums::default();
        sums.iter().for_each(|s| total.add(s));
        let interval = if sums.is_empty() || resamples == 0 {
            None
        } else {
            let mut rng = crate::rng::Rng::new(seed);
            let below = crate::rng::Below::new(sums.len());
            let slopes: Vec<f64> = (0..resamples)
                .map(|_| {
                    let mut resampled = Sums::default();
                    for _ in 0..sums.len() {
                        resampled.add(&sums[rng.below_with(&below)]);
                    }
                    resampled.slope()
                })
                .collect();
            crate::stats::percentile_interval(slopes, 0.95)
        };
        Drift {
            by_index,
            slope: total.slope(),
            interval,
        }
    }
}

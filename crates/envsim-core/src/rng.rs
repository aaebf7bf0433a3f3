//! A small seedable pseudo-random generator (SplitMix64).
//!
//! Benchmark construction must give byte-identical output for the same seed on every platform
//! and release, which general-purpose generators do not promise; this one is fixed forever.

/// SplitMix64 generator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng(u64);

impl Rng {
    /// Seeds the generator.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// A generator for a sub-stream, derived from this seed and a label, independent of how
    /// many numbers other streams drew.
    pub fn derive(seed: u64, label: &str) -> Self {
        // Each byte goes through the full SplitMix64 output function (not only its additive
        // state step, which left different labels colliding: "step 1" … "step 999" fell into
        // 84 streams), and the length closes the label so that no label is a prefix of another.
        let mut h = Rng(seed ^ 0x5851_F42D_4C95_7F2D).next_u64();
        for b in label
            .bytes()
            .map(u64::from)
            .chain([label.len() as u64 | 1 << 63])
        {
            h = Rng(h ^ b).next_u64();
        }
        Rng(h)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.next_u64() % n as u64) as usize
    }

    /// `below(n)` for many draws with the same `n`: the same numbers, without a division per
    /// draw (see [`Below`]).
    pub fn below_with(&mut self, below: &Below) -> usize {
        below.reduce(self.next_u64())
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// An index drawn with probability proportional to its weight (negative, NaN and infinite
    /// weights count as 0); `None` when no weight is positive.
    pub fn weighted(&mut self, weights: &[f64]) -> Option<usize> {
        let usable = |w: f64| if w.is_finite() && w > 0.0 { w } else { 0.0 };
        let total: f64 = weights.iter().map(|&w| usable(w)).sum();
        if total <= 0.0 {
            return None;
        }
        let mut target = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
        let mut last = None;
        for (i, &w) in weights.iter().enumerate() {
            let w = usable(w);
            if w == 0.0 {
                continue;
            }
            if target < w {
                return Some(i);
            }
            target -= w;
            last = Some(i);
        }
        // Rounding left a sliver past the last weight.
        last
    }

    /// A random element, or `None` for an empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len()))
    }

    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// `x % n` for a fixed `n` by multiplication (Lemire, Kaser and Kurz, "Faster remainder by
/// direct computation", 2019): exact for every 64-bit `x` when `n < 2^32`, which covers any
/// sample count; larger `n` use the division. The bootstrap draws millions of indices below the
/// same `n`, and the division was most of its time.
#[derive(Clone, Copy, Debug)]
pub struct Below {
    n: u64,
    /// `⌈2^128 / n⌉` (0 when the division is used instead).
    magic: u128,
}

impl Below {
    /// Prepares draws below `n` (`0` draws `0`, like [`Rng::below`]).
    pub fn new(n: usize) -> Self {
        let n = n as u64;
        let magic = if n > 1 && n < (1 << 32) {
            (u128::MAX / u128::from(n)).wrapping_add(1)
        } else {
            0
        };
        Below { n, magic }
    }

    /// `x % n` (`0` when `n` is 0).
    fn reduce(&self, x: u64) -> usize {
        if self.magic == 0 {
            return x.checked_rem(self.n).unwrap_or(0) as usize;
        }
        // (lowbits · n) >> 128, with lowbits = magic · x mod 2^128, in 64-bit halves.
        let low = self.magic.wrapping_mul(u128::from(x));
        let n = u128::from(self.n);
        let hi = (low >> 64) * n;
        let lo = ((low & u128::from(u64::MAX)) * n) >> 64;
        ((hi + lo) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Rng::derive(42, "step 1").next_u64()`, pinned.
    const PINNED: u64 = 11_345_451_641_821_257_175;

    #[test]
    fn weighted_draws_follow_the_weights() {
        let mut rng = Rng::new(9);
        let mut counts = [0usize; 4];
        for _ in 0..10_000 {
            counts[rng.weighted(&[1.0, 0.0, 3.0, f64::NAN]).unwrap()] += 1;
        }
        assert_eq!((counts[1], counts[3]), (0, 0));
        assert!((2_300..2_700).contains(&counts[0]), "{counts:?}");
        assert_eq!(rng.weighted(&[0.0, -1.0]), None);
        assert_eq!(rng.weighted(&[]), None);
        assert_eq!(rng.weighted(&[0.0, 2.0]), Some(1));
    }

    #[test]
    fn derived_streams_of_different_labels_differ() {
        // Labels of the kinds envsim derives (walks, steps, rounds): every one its own stream.
        let labels: Vec<String> = (0..2000)
            .map(|k| format!("step {k}"))
            .chain((0..500).map(|w| format!("shop/00_small.json/{w}")))
            .chain([
                "".to_owned(),
                "a".to_owned(),
                "ab".to_owned(),
                "a\0".to_owned(),
            ])
            .collect();
        for seed in [0, 42, u64::MAX] {
            let firsts: std::collections::HashSet<u64> = labels
                .iter()
                .map(|l| Rng::derive(seed, l).next_u64())
                .collect();
            assert_eq!(firsts.len(), labels.len(), "seed {seed}");
        }
        // Fixed forever: benchmarks are rebuilt from the same seed byte for byte.
        assert_eq!(Rng::derive(42, "step 1").next_u64(), PINNED);
    }

    #[test]
    fn below_with_draws_exactly_what_below_draws() {
        let mut bits = Rng::new(99);
        for n in [
            0usize,
            1,
            2,
            3,
            7,
            10,
            400,
            1000,
            65_537,
            (1 << 31) + 11,
            (1 << 32) - 1,
        ]
        .into_iter()
        .chain((0..200).map(|_| bits.below(1 << 32)))
        .chain([1 << 32, (1 << 40) + 3, usize::MAX])
        {
            let below = Below::new(n);
            let (mut a, mut b) = (Rng::new(n as u64), Rng::new(n as u64));
            for _ in 0..2000 {
                assert_eq!(a.below(n), b.below_with(&below), "n = {n}");
            }
            for x in [
                0,
                1,
                u64::MAX,
                u64::MAX - 1,
                1 << 63,
                (1 << 32) - 1,
                1 << 32,
            ] {
                assert_eq!(
                    below.reduce(x),
                    x.checked_rem(n as u64).unwrap_or(0) as usize
                );
            }
        }
    }

    #[test]
    fn sequence_is_fixed() {
        // Reference values of SplitMix64 with seed 0.
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        let mut a = Rng::derive(7, "env_1");
        let mut b = Rng::derive(7, "env_2");
        assert_ne!(a.next_u64(), b.next_u64());
        let mut v: Vec<u32> = (0..10).collect();
        Rng::new(3).shuffle(&mut v);
        let mut sorted = v.clone();
        sorted.sort();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        assert_eq!(Rng::new(1).below(0), 0);
    }
}

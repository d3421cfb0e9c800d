//! The statistics behind the table's intervals and paired comparisons: the Wilson score
//! interval of one run's accuracy, a percentile bootstrap over facts and replicates, and
//! McNemar's exact test of two methods answering the same facts. Checked against SciPy
//! (`binomtest(...).proportion_ci(method="wilson")`) and statsmodels (`mcnemar(exact=True)`) on
//! fixed inputs (`tests/fixtures/stats/`, made by `tests/peers/make_stats_fixture.py`).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The normal quantile of a two-sided 95 % interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// Resamples a bootstrap draws (fixed, with a fixed seed: the same records give the same
/// interval every time the table is rendered).
pub const BOOTSTRAP_RESAMPLES: usize = 4000;

/// The bootstrap's seed.
pub const BOOTSTRAP_SEED: u64 = 0x05EE_D0F7_AB1E;

/// An interval around an estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// The estimate (a mean).
    pub mean: f64,
    /// Lower end.
    pub low: f64,
    /// Upper end.
    pub high: f64,
}

/// The Wilson score interval of `correct` successes in `n` trials at normal quantile `z`
/// (SciPy's `binomtest(k, n).proportion_ci(method="wilson")`). `None` for `n = 0`.
pub fn wilson(correct: usize, n: usize, z: f64) -> Option<Interval> {
    if n == 0 {
        return None;
    }
    let (k, n) = (correct as f64, n as f64);
    let p = k / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    Some(Interval {
        mean: p,
        low: (center - half).max(0.0),
        high: (center + half).min(1.0),
    })
}

/// The mean of `runs` (one row of per-fact outcomes, 1.0 correct and 0.0 not, per replicate;
/// every row over the same facts) with a 95 % percentile bootstrap interval that resamples
/// the facts and, independently, the replicates (a two-way bootstrap: both the facts and the
/// training's randomness vary). `None` when there is nothing to average.
pub fn bootstrap(runs: &[Vec<f64>], resamples: usize, seed: u64) -> Option<Interval> {
    let reps = runs.len();
    let facts = runs.first()?.len();
    if facts == 0 || runs.iter().any(|r| r.len() != facts) {
        return None;
    }
    let mean = runs.iter().flatten().sum::<f64>() / (reps * facts) as f64;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut means = Vec::with_capacity(resamples);
    let (mut rows, mut cols) = (vec![0usize; reps], vec![0usize; facts]);
    for _ in 0..resamples {
        rows.iter_mut().for_each(|r| *r = rng.random_range(0..reps));
        cols.iter_mut()
            .for_each(|c| *c = rng.random_range(0..facts));
        let mut sum = 0.0;
        for &r in &rows {
            let run = &runs[r];
            sum += cols.iter().map(|&c| run[c]).sum::<f64>();
        }
        means.push(sum / (reps * facts) as f64);
    }
    means.sort_by(f64::total_cmp);
    Some(Interval {
        mean,
        low: quantile(&means, 0.025),
        high: quantile(&means, 0.975),
    })
}

/// The `q` quantile of sorted `xs`, interpolated linearly (NumPy's default).
fn quantile(xs: &[f64], q: f64) -> f64 {
    let at = q * (xs.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    xs[lo] + (xs[hi] - xs[lo]) * (at - lo as f64)
}

/// McNemar's exact test: `b` pairs where only the first method was right, `c` where only the
/// second was. The two-sided p-value of the binomial test of `min(b, c)` in `b + c` at ½
/// (statsmodels' `mcnemar(table, exact=True)`); 1 when no pair differs.
pub fn mcnemar_exact(b: usize, c: usize) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    // P(X ≤ k) for X ~ Binomial(n, ½), summed in logs (n reaches tens of thousands of facts).
    let ln_half_n = n as f64 * std::f64::consts::LN_2;
    let mut ln_choose = 0.0; // ln C(n, 0)
    let mut cdf = 0.0;
    for i in 0..=k {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        cdf += (ln_choose - ln_half_n).exp();
    }
    (2.0 * cdf).min(1.0)
}

/// Two methods answering the same facts: the difference of their accuracies (first minus
/// second) with a 95 % bootstrap interval over the facts, and McNemar's exact test.
#[derive(Debug, Clone, PartialEq)]
pub struct Paired {
    /// Accuracy difference with its interval.
    pub difference: Interval,
    /// Pairs where only the first was right.
    pub only_first: usize,
    /// Pairs where only the second was right.
    pub only_second: usize,
    /// Pairs compared (facts × replicates both have).
    pub pairs: usize,
    /// McNemar's exact p-value.
    pub p_value: f64,
}

/// Compares `first` and `second`: per replicate (rows, paired by index), per fact (columns,
/// the same facts in the same order) outcomes, 1.0 correct. A method with a single run (long
/// context and RAG answer greedily) is paired with every replicate of the other; otherwise the
/// replicates both have are. The interval resamples facts, the pairs' differences averaged per
/// fact. `None` if either has no run or their facts differ in number.
pub fn paired(first: &[Vec<f64>], second: &[Vec<f64>], seed: u64) -> Option<Paired> {
    let reps = if first.len() == 1 || second.len() == 1 {
        first.len().max(second.len())
    } else {
        first.len().min(second.len())
    };
    let facts = first.first()?.len();
    if second.is_empty() || facts == 0 || second[0].len() != facts {
        return None;
    }
    let run = |runs: &'_ [Vec<f64>], r: usize| -> usize { if runs.len() == 1 { 0 } else { r } };
    let (mut only_first, mut only_second) = (0, 0);
    let mut per_fact = vec![0.0; facts];
    for r in 0..reps {
        let (x, y) = (&first[run(first, r)], &second[run(second, r)]);
        for f in 0..facts {
            let (a, b) = (x[f] > 0.5, y[f] > 0.5);
            only_first += usize::from(a && !b);
            only_second += usize::from(b && !a);
            per_fact[f] += (x[f] - y[f]) / reps as f64;
        }
    }
    let difference = bootstrap(&[per_fact], BOOTSTRAP_RESAMPLES, seed)?;
    Some(Paired {
        difference,
        only_first,
        only_second,
        pairs: reps * facts,
        p_value: mcnemar_exact(only_first, only_second),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_is_centred_and_bounded() {
        let i = wilson(13, 20, Z95).unwrap();
        assert!((i.mean - 0.65).abs() < 1e-12);
        assert!(i.low < 0.65 && i.high > 0.65);
        let all = wilson(20, 20, Z95).unwrap();
        assert_eq!(all.high, 1.0);
        assert!(all.low > 0.8 && all.low < 0.85, "{all:?}");
        assert_eq!(wilson(0, 0, Z95), None);
    }

    #[test]
    fn mcnemar_is_a_two_sided_binomial_test() {
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        assert_eq!(mcnemar_exact(3, 3), 1.0);
        // 0 of 5: 2 · ½⁵.
        assert!((mcnemar_exact(0, 5) - 0.0625).abs() < 1e-12);
        assert!((mcnemar_exact(5, 0) - 0.0625).abs() < 1e-12);
        // Large counts stay finite.
        let p = mcnemar_exact(4000, 6000);
        assert!(p > 0.0 && p < 1e-30, "{p}");
    }

    #[test]
    fn the_bootstrap_is_reproducible_and_covers_the_mean() {
        let run: Vec<f64> = (0..40).map(|i| f64::from(i % 3 != 0)).collect();
        let a = bootstrap(&[run.clone(), run.clone()], 2000, 1).unwrap();
        assert_eq!(a, bootstrap(&[run.clone(), run.clone()], 2000, 1).unwrap());
        assert!(a.low < a.mean && a.mean < a.high);
        // Identical replicates: the facts alone vary, about as Wilson's interval does.
        let w = wilson(26, 40, Z95).unwrap();
        assert!(
            (a.high - a.low - (w.high - w.low)).abs() < 0.06,
            "{a:?} {w:?}"
        );
        // A constant outcome has no spread.
        let ones = bootstrap(&[vec![1.0; 10]], 500, 1).unwrap();
        assert_eq!((ones.low, ones.high), (1.0, 1.0));
        assert_eq!(bootstrap(&[], 10, 1), None);
        assert_eq!(bootstrap(&[vec![1.0], vec![]], 10, 1), None);
    }

    #[test]
    fn paired_counts_the_discordant_pairs() {
        let a = vec![vec![1.0, 1.0, 0.0, 1.0]];
        let b = vec![vec![0.0, 1.0, 0.0, 0.0]];
        let p = paired(&a, &b, 3).unwrap();
        assert_eq!((p.only_first, p.only_second, p.pairs), (2, 0, 4));
        assert!((p.difference.mean - 0.5).abs() < 1e-12);
        assert!((p.p_value - 0.5).abs() < 1e-12);
        assert_eq!(paired(&a, &[vec![1.0]], 3), None);
    }
}

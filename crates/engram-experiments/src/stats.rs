//! The statistics behind the table's intervals and paired comparisons: the Wilson score
//! interval of one run's accuracy, a percentile bootstrap over facts and replicates, and the
//! exact sign test of two methods answering the same facts over the facts each did better on
//! (McNemar's exact test with one run a method). Checked against SciPy
//! (`binomtest(...).proportion_ci(method="wilson")`) and statsmodels (`mcnemar(exact=True)`) on
//! fixed inputs (`tests/fixtures/stats/`, made by `tests/peers/make_stats_fixture.py`).

use std::collections::BTreeMap;

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

/// Two methods answering the same facts, compared over the facts: the difference of their
/// accuracies (first minus second) with a 95 % bootstrap interval over the facts, how many facts
/// each did better on, and the exact sign test on those (McNemar's exact test where each fact
/// has one pair of runs).
#[derive(Debug, Clone, PartialEq)]
pub struct Paired {
    /// Accuracy difference with its interval.
    pub difference: Interval,
    /// Facts the first did better on (its outcome, averaged over the fact's pairs of runs,
    /// higher): with one pair of runs a fact, the facts only the first got right.
    pub first_better: usize,
    /// Facts the second did better on.
    pub second_better: usize,
    /// Facts compared.
    pub facts: usize,
    /// Pairs of runs compared, over all facts (facts × replicates both have).
    pub pairs: usize,
    /// The exact sign test's two-sided p-value over `first_better` against `second_better`.
    pub p_value: f64,
}

/// Compares two methods from `outcomes`, one `(fact id, first's outcome, second's outcome)`
/// per pair of runs that answered the fact (1.0 correct). Runs of the same fact are not
/// independent observations — replicates differ in their training seed, not in what they are
/// asked — so each fact's difference is averaged over its pairs and the fact is the unit: of
/// the interval (facts resampled) and of the test (facts the first did better on against facts
/// the second did better on, ties left out). With one pair a fact that test is McNemar's exact
/// test. `None` without a pair.
pub fn paired<'a>(
    outcomes: impl IntoIterator<Item = (&'a str, f64, f64)>,
    seed: u64,
) -> Option<Paired> {
    let mut by_fact: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    let mut pairs = 0;
    for (fact, a, b) in outcomes {
        let e = by_fact.entry(fact).or_default();
        e.0 += a - b;
        e.1 += 1;
        pairs += 1;
    }
    let per_fact: Vec<f64> = by_fact.values().map(|&(d, n)| d / n as f64).collect();
    let first_better = per_fact.iter().filter(|&&d| d > 0.0).count();
    let second_better = per_fact.iter().filter(|&&d| d < 0.0).count();
    let facts = per_fact.len();
    let difference = bootstrap(&[per_fact], BOOTSTRAP_RESAMPLES, seed)?;
    Some(Paired {
        difference,
        first_better,
        second_better,
        facts,
        pairs,
        p_value: mcnemar_exact(first_better, second_better),
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
    fn paired_counts_the_discordant_facts() {
        let one_run = [
            ("f1", 1.0, 0.0),
            ("f2", 1.0, 1.0),
            ("f3", 0.0, 0.0),
            ("f4", 1.0, 0.0),
        ];
        let p = paired(one_run, 3).unwrap();
        assert_eq!(
            (p.first_better, p.second_better, p.facts, p.pairs),
            (2, 0, 4, 4)
        );
        assert!((p.difference.mean - 0.5).abs() < 1e-12);
        assert!((p.p_value - 0.5).abs() < 1e-12);
        assert_eq!(paired([], 3), None);
    }

    #[test]
    fn replicates_of_one_fact_are_one_observation() {
        // Five replicates that agree, paired with one greedy run: five facts better, not 25
        // independent pairs (McNemar over the pairs said p = 2 · 2⁻²⁵).
        let mut outcomes = Vec::new();
        for _replicate in 0..5 {
            for f in ["a", "b", "c", "d", "e", "x", "y"] {
                outcomes.push((f, 1.0, if f < "x" { 0.0 } else { 1.0 }));
            }
        }
        let p = paired(outcomes.iter().copied(), 3).unwrap();
        assert_eq!(
            (p.first_better, p.second_better, p.facts, p.pairs),
            (5, 0, 7, 35)
        );
        assert!((p.p_value - 0.0625).abs() < 1e-12, "{}", p.p_value);
        // Replicates that split on a fact give it their mean difference: 2 of 4 right against 0
        // is +0.5, still one fact better.
        let split = [
            ("a", 1.0, 0.0),
            ("a", 0.0, 0.0),
            ("a", 1.0, 0.0),
            ("a", 0.0, 0.0),
        ];
        let p = paired(split, 3).unwrap();
        assert_eq!((p.first_better, p.facts), (1, 1));
        assert!((p.difference.mean - 0.5).abs() < 1e-12);
    }
}

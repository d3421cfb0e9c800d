//! Nested, seed-deterministic fact samples (10 ⊂ 100 ⊂ 500 ⊂ …): the facts are shuffled once
//! with the seed, and the sample of size `n` is the first `n` of that order — so every smaller
//! sample is inside every larger one, and the same seed always gives the same facts.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::fact::Fact;

/// Error for a sample larger than the pool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("asked for {wanted} facts, but the pool holds only {available}")]
pub struct TooFewFacts {
    /// Requested size.
    pub wanted: usize,
    /// Pool size.
    pub available: usize,
}

/// The shuffled order of a pool (indices), fixed by `seed`.
pub fn sample_order(len: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    order.shuffle(&mut StdRng::seed_from_u64(seed));
    order
}

/// Nested samples of `sizes` from `pool`, each in the shared shuffled order.
pub fn nested_samples(
    pool: &[Fact],
    sizes: &[usize],
    seed: u64,
) -> Result<Vec<Vec<Fact>>, TooFewFacts> {
    let order = sample_order(pool.len(), seed);
    sizes
        .iter()
        .map(|&n| {
            if n > pool.len() {
                return Err(TooFewFacts {
                    wanted: n,
                    available: pool.len(),
                });
            }
            Ok(order[..n].iter().map(|&i| pool[i].clone()).collect())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(n: usize) -> Vec<Fact> {
        (0..n)
            .map(|i| Fact {
                id: format!("f{i}"),
                question: format!("q{i}"),
                rephrased_question: format!("r{i}"),
                answer: format!("a{i}"),
                source: None,
            })
            .collect()
    }

    #[test]
    fn samples_are_nested_and_deterministic() {
        let p = pool(1000);
        let s = nested_samples(&p, &[10, 100, 500], 7).unwrap();
        for w in s.windows(2) {
            assert!(w[0].iter().all(|f| w[1].contains(f)));
        }
        assert_eq!(s, nested_samples(&p, &[10, 100, 500], 7).unwrap());
        assert_ne!(s[0], nested_samples(&p, &[10], 8).unwrap()[0]);
        let e = nested_samples(&p, &[2000], 7).unwrap_err();
        assert_eq!(
            e.to_string(),
            "asked for 2000 facts, but the pool holds only 1000"
        );
    }
}

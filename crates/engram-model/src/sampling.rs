//! Choosing the next token: greedy argmax, or temperature + top-p sampling as transformers'
//! `TemperatureLogitsWarper` and `TopPLogitsWarper`, drawn from a seeded RNG.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How the next token is chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum Sampling {
    /// Argmax (first maximum on ties, as `torch.argmax`).
    Greedy,
    /// Sample from `softmax(logits / temperature)` restricted to the top-p nucleus.
    TopP {
        /// Softmax temperature (> 0).
        temperature: f32,
        /// Nucleus mass in (0, 1].
        top_p: f32,
        /// RNG seed: the same seed gives the same tokens.
        seed: u64,
    },
}

/// Index of the first maximum.
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best
}

/// A sampler with its RNG state.
pub struct Sampler {
    sampling: Sampling,
    rng: StdRng,
}

impl Sampler {
    /// A sampler for the given strategy.
    pub fn new(sampling: Sampling) -> Self {
        let seed = match sampling {
            Sampling::TopP { seed, .. } => seed,
            Sampling::Greedy => 0,
        };
        Self {
            sampling,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// Whether this sampler is greedy (no logits need to leave the device).
    pub fn is_greedy(&self) -> bool {
        matches!(self.sampling, Sampling::Greedy)
    }

    /// Picks a token from one row of logits.
    pub fn pick(&mut self, logits: &[f32]) -> usize {
        match self.sampling {
            Sampling::Greedy => argmax(logits),
            Sampling::TopP {
                temperature, top_p, ..
            } => {
                let probs = top_p_probs(logits, temperature, top_p);
                let r: f64 = self.rng.random();
                let mut acc = 0.0f64;
                let mut last = 0;
                for (i, p) in probs {
                    acc += p;
                    last = i;
                    if r < acc {
                        return i;
                    }
                }
                last
            }
        }
    }
}

/// The renormalized nucleus: `(token, probability)` pairs, most likely first.
pub fn top_p_probs(logits: &[f32], temperature: f32, top_p: f32) -> Vec<(usize, f64)> {
    let t = temperature.max(1e-6) as f64;
    let scaled: Vec<f64> = logits.iter().map(|&l| l as f64 / t).collect();
    let max = scaled.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let mut probs: Vec<(usize, f64)> = scaled
        .iter()
        .enumerate()
        .map(|(i, &l)| (i, (l - max).exp()))
        .collect();
    let z: f64 = probs.iter().map(|p| p.1).sum();
    for p in &mut probs {
        p.1 /= z;
    }
    probs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    // Keep the smallest prefix whose mass reaches top_p (HF removes tokens whose cumulative mass,
    // summed from the least likely, is <= 1 - top_p; at least one token stays).
    let mut keep = 0;
    let mut acc = 0.0;
    for p in &probs {
        keep += 1;
        acc += p.1;
        if acc >= top_p as f64 {
            break;
        }
    }
    probs.truncate(keep.max(1));
    let z: f64 = probs.iter().map(|p| p.1).sum();
    for p in &mut probs {
        p.1 /= z;
    }
    probs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_first_max() {
        assert_eq!(argmax(&[0.0, 3.0, 3.0, 1.0]), 1);
    }

    #[test]
    fn nucleus_keeps_the_smallest_prefix() {
        // probs ~ [0.643, 0.237, 0.087, 0.032]
        let p = top_p_probs(&[3.0, 2.0, 1.0, 0.0], 1.0, 0.8);
        assert_eq!(p.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1]);
        assert!((p.iter().map(|x| x.1).sum::<f64>() - 1.0).abs() < 1e-12);
        let p = top_p_probs(&[3.0, 2.0, 1.0, 0.0], 1.0, 0.5);
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn same_seed_same_draws() {
        let logits = [0.5f32, 0.4, 0.3, 0.2, 0.1];
        let draw = |seed| {
            let mut s = Sampler::new(Sampling::TopP {
                temperature: 1.0,
                top_p: 1.0,
                seed,
            });
            (0..50).map(|_| s.pick(&logits)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        assert!(
            draw(7)
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                > 2
        );
    }
}

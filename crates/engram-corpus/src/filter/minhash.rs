//! Near-duplicates by MinHash and locality-sensitive hashing (Broder 1997; bands as in
//! Leskovec et al., *Mining of Massive Datasets* §3.4). A document's shingles are its word
//! 5-grams (lower-case words; a shorter document is one shingle), hashed with seeded xxh3.
//! Its signature keeps, for each of `bands × rows` hash functions `(a·x + b) mod (2^61 − 1)`
//! (coefficients drawn from `seed`), the smallest value over its shingles. Two documents whose
//! signatures agree on every row of some band are candidates; a candidate is a near-duplicate
//! when the exact Jaccard similarity of the two shingle sets reaches the threshold, so no pair
//! below it is ever dropped (candidates below it are counted: the false-positive rate of the
//! banding). The earliest document of a group is kept.

use std::collections::HashMap;

use engram_io::Progress;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::Drop;
use crate::document::Document;
use crate::error::{CorpusError, Result};
use crate::normalize::words;

/// The Mersenne prime 2^61 − 1 of the hash family.
const PRIME: u64 = (1 << 61) - 1;

/// Near-duplicate settings (EnronQA: Jaccard ≥ 0.9, 9 bands × 27 rows).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NearDupConfig {
    /// Jaccard similarity at which a document is a near-duplicate.
    pub jaccard: f64,
    /// LSH bands.
    pub bands: usize,
    /// Rows (hash functions) per band.
    pub rows: usize,
    /// Words per shingle.
    pub shingle: usize,
    /// Seed of the hash functions.
    pub seed: u64,
}

impl Default for NearDupConfig {
    fn default() -> Self {
        Self {
            jaccard: 0.9,
            bands: 9,
            rows: 27,
            shingle: 5,
            seed: 0,
        }
    }
}

/// The most hash functions (`bands × rows`) a near-duplicate signature may have: the default's
/// 243 sixteen times over; more would only cost memory (a signature per document).
pub const MAX_HASHES: usize = 4096;

impl NearDupConfig {
    /// Names a setting out of range.
    pub fn validate(&self) -> Result<()> {
        let bad = |key, problem: &str| {
            Err(CorpusError::Setting {
                key,
                problem: problem.into(),
            })
        };
        if !(self.jaccard > 0.0 && self.jaccard <= 1.0) {
            return bad("near.jaccard", "must be in (0, 1]");
        }
        if self.bands == 0 || self.rows == 0 {
            return bad("near.bands/rows", "must be at least 1");
        }
        // Each document's signature holds bands × rows hashes.
        if self
            .bands
            .checked_mul(self.rows)
            .is_none_or(|n| n > MAX_HASHES)
        {
            return bad(
                "near.bands/rows",
                "bands × rows must be at most 4096 hash functions",
            );
        }
        if self.shingle == 0 {
            return bad("near.shingle", "must be at least 1 word");
        }
        Ok(())
    }

    /// The probability that a pair of Jaccard similarity `s` becomes a candidate:
    /// `1 − (1 − s^rows)^bands`.
    pub fn candidate_probability(&self, s: f64) -> f64 {
        1.0 - (1.0 - s.powi(self.rows as i32)).powi(self.bands as i32)
    }
}

/// The sorted, distinct shingle hashes of `text`.
pub fn shingles(text: &str, cfg: &NearDupConfig) -> Vec<u64> {
    let w: Vec<String> = words(text).collect();
    let hash = |ws: &[String]| xxh3_64_with_seed(ws.join(" ").as_bytes(), cfg.seed);
    let mut out: Vec<u64> = if w.len() <= cfg.shingle {
        vec![hash(&w)]
    } else {
        w.windows(cfg.shingle).map(hash).collect()
    };
    out.sort_unstable();
    out.dedup();
    out
}

/// The exact Jaccard similarity of two sorted, distinct sets.
pub fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    let (mut i, mut j, mut both) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                both += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - both;
    if union == 0 {
        1.0
    } else {
        both as f64 / union as f64
    }
}

/// splitmix64: the coefficient stream of the hash family.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// MinHash signatures of shingle sets, `bands × rows` values each.
pub struct Hasher {
    coeffs: Vec<(u64, u64)>,
}

impl Hasher {
    /// The hash family of `cfg`.
    pub fn new(cfg: &NearDupConfig) -> Self {
        let mut s = cfg.seed ^ 0x5eed_0fe1_9aa3;
        let coeffs = (0..cfg.bands * cfg.rows)
            .map(|_| (splitmix(&mut s) % (PRIME - 1) + 1, splitmix(&mut s) % PRIME))
            .collect();
        Self { coeffs }
    }

    /// The signature of a shingle set.
    pub fn signature(&self, shingles: &[u64]) -> Vec<u64> {
        self.coeffs
            .iter()
            .map(|&(a, b)| {
                shingles
                    .iter()
                    .map(|&x| {
                        ((a as u128 * (x % PRIME) as u128 + b as u128) % PRIME as u128) as u64
                    })
                    .min()
                    .unwrap_or(u64::MAX)
            })
            .collect()
    }
}

/// Candidate pairs `(earlier, later)` (positions in `sigs`) that share a band, each once, in
/// order.
pub fn candidates(sigs: &[Vec<u64>], cfg: &NearDupConfig) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    for band in 0..cfg.bands {
        let mut buckets: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, s) in sigs.iter().enumerate() {
            let rows = &s[band * cfg.rows..(band + 1) * cfg.rows];
            let bytes: Vec<u8> = rows.iter().flat_map(|v| v.to_le_bytes()).collect();
            let key = xxh3_64_with_seed(&bytes, band as u64);
            let bucket = buckets.entry(key).or_default();
            pairs.extend(bucket.iter().map(|&j| (j, i)));
            bucket.push(i);
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs
}

/// The documents among `alive` that are near-duplicates of an earlier kept one, reporting a
/// `minhash` task of one step per document.
pub fn near_duplicates(
    docs: &[Document],
    alive: &[usize],
    cfg: &NearDupConfig,
    progress: &dyn Progress,
) -> Vec<(usize, Drop)> {
    progress.begin("near duplicates (MinHash)", Some(alive.len() as u64));
    let hasher = Hasher::new(cfg);
    let sets: Vec<Vec<u64>> = alive
        .par_iter()
        .map(|&i| shingles(&docs[i].text, cfg))
        .collect();
    let sigs: Vec<Vec<u64>> = sets.par_iter().map(|s| hasher.signature(s)).collect();
    progress.advance(alive.len() as u64);
    let mut by_later: HashMap<usize, Vec<usize>> = HashMap::new();
    for (a, b) in candidates(&sigs, cfg) {
        by_later.entry(b).or_default().push(a);
    }
    let mut dropped = vec![false; alive.len()];
    let mut out = Vec::new();
    for b in 0..alive.len() {
        let Some(earlier) = by_later.get(&b) else {
            continue;
        };
        let best = earlier
            .iter()
            .filter(|&&a| !dropped[a])
            .map(|&a| (a, jaccard(&sets[a], &sets[b])))
            .filter(|&(_, j)| j >= cfg.jaccard)
            .max_by(|x, y| x.1.total_cmp(&y.1).then(y.0.cmp(&x.0)));
        if let Some((a, j)) = best {
            dropped[b] = true;
            out.push((
                alive[b],
                (
                    "near-duplicate".to_string(),
                    format!("a near-duplicate of {} (Jaccard {j:.3})", docs[alive[a]].id),
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaccard_and_the_banding_curve() {
        assert_eq!(jaccard(&[1, 2, 3], &[2, 3, 4]), 0.5);
        assert_eq!(jaccard(&[], &[]), 1.0);
        let c = NearDupConfig::default();
        // 1 − (1 − s^27)^9: the S-curve of 9 bands × 27 rows, steepest near 0.92.
        assert!((c.candidate_probability(0.9) - 0.4169).abs() < 1e-3);
        assert!(c.candidate_probability(0.97) > 0.99);
        assert!(c.candidate_probability(0.7) < 1e-3);
    }

    #[test]
    fn signatures_too_large_or_overflowing_are_refused_by_name() {
        assert!(NearDupConfig::default().validate().is_ok());
        for (bands, rows) in [(65, 64), (usize::MAX / 2, 3), (1 << 32, 1 << 32)] {
            let cfg = NearDupConfig {
                bands,
                rows,
                ..NearDupConfig::default()
            };
            let e = cfg.validate().unwrap_err().to_string();
            assert!(e.contains("near.bands/rows") && e.contains("4096"), "{e}");
        }
    }

    #[test]
    fn a_signature_agrees_with_the_jaccard_on_average() {
        let cfg = NearDupConfig {
            bands: 32,
            rows: 16,
            ..NearDupConfig::default()
        };
        let h = Hasher::new(&cfg);
        let a: Vec<u64> = (0..400).collect();
        let b: Vec<u64> = (100..500).collect();
        let (sa, sb) = (h.signature(&a), h.signature(&b));
        let agree = sa.iter().zip(&sb).filter(|(x, y)| x == y).count() as f64 / sa.len() as f64;
        // Jaccard 300/500 = 0.6; 512 functions estimate it within a few hundredths.
        assert!((agree - 0.6).abs() < 0.06, "{agree}");
    }
}

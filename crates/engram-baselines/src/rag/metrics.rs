//! Retrieval quality for the fact a question came from (one relevant document per question):
//! Recall@k = share of questions whose fact is in the top k; NDCG@k = mean of `1 / log2(rank + 1)`
//! over questions whose fact is at rank ≤ k (the ideal DCG is 1).

use serde::{Deserialize, Serialize};

/// Recall and NDCG at one cut-off (as cell records hold them: `{"k", "recall", "ndcg"}`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RetrievalMetrics {
    /// The cut-off.
    pub k: usize,
    /// Recall@k.
    pub recall: f64,
    /// NDCG@k.
    pub ndcg: f64,
}

/// Metrics at each of `ks` for rankings `ranked[q]` (fact indices, best first) and the gold fact
/// of each question.
pub fn retrieval_metrics(
    ranked: &[Vec<usize>],
    gold: &[usize],
    ks: &[usize],
) -> Vec<RetrievalMetrics> {
    let n = ranked.len().max(1) as f64;
    ks.iter()
        .map(|&k| {
            let (mut recall, mut ndcg) = (0.0, 0.0);
            for (r, &g) in ranked.iter().zip(gold) {
                if let Some(pos) = r.iter().take(k).position(|&i| i == g) {
                    recall += 1.0;
                    ndcg += 1.0 / ((pos + 2) as f64).log2();
                }
            }
            RetrievalMetrics {
                k,
                recall: recall / n,
                ndcg: ndcg / n,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed() {
        // Question 0: gold at rank 1; question 1: rank 3; question 2: missing from the top 4.
        let ranked = vec![vec![5, 1, 2, 3], vec![0, 1, 7, 2], vec![0, 1, 2, 3]];
        let gold = [5, 7, 9];
        let m = retrieval_metrics(&ranked, &gold, &[1, 2, 3, 4]);
        assert_eq!(m[0].recall, 1.0 / 3.0);
        assert!((m[0].ndcg - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(m[1].recall, 1.0 / 3.0);
        assert_eq!(m[2].recall, 2.0 / 3.0);
        // (1 + 1/log2(4)) / 3 = (1 + 0.5) / 3
        assert!((m[2].ndcg - 0.5).abs() < 1e-12, "{}", m[2].ndcg);
        assert_eq!(m[3].recall, 2.0 / 3.0);
    }
}

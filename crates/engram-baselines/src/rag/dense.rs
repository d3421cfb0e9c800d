//! The dense retriever: facts (rephrased question + answer) or any texts (documents) embedded
//! once with a BERT sentence encoder, questions ranked by cosine similarity (dot product of unit
//! vectors), ties by index order.

use engram_facts::Fact;

use crate::error::{BaselineError, Result};
use crate::rag::bert::BertEncoder;
use crate::rag::bm25::fact_text;

/// An embedding index of a fact set.
pub struct DenseIndex {
    embeddings: Vec<Vec<f32>>,
}

impl DenseIndex {
    /// Embeds `facts` (at least one).
    pub fn new(encoder: &BertEncoder, facts: &[Fact], batch: usize) -> Result<Self> {
        if facts.is_empty() {
            return Err(BaselineError::Bad(
                "the fact set is empty: nothing to index".into(),
            ));
        }
        let texts: Vec<String> = facts.iter().map(fact_text).collect();
        Self::from_texts(encoder, &texts, batch)
    }

    /// Embeds `texts` (at least one); results are indices into them.
    pub fn from_texts(encoder: &BertEncoder, texts: &[String], batch: usize) -> Result<Self> {
        if texts.is_empty() {
            return Err(BaselineError::Bad("nothing to index".into()));
        }
        Ok(Self {
            embeddings: encoder.encode(texts, batch)?,
        })
    }

    /// Indices of the `k` facts most similar to `query`, best first.
    pub fn search(&self, encoder: &BertEncoder, query: &str, k: usize) -> Result<Vec<usize>> {
        let q = encoder.encode(&[query.to_string()], 1)?.remove(0);
        Ok(self.rank(&q, k))
    }

    /// Indices of the `k` entries most similar to an embedded query, best first.
    pub fn rank(&self, q: &[f32], k: usize) -> Vec<usize> {
        let mut scored: Vec<(usize, f32)> = self
            .embeddings
            .iter()
            .enumerate()
            .map(|(i, e)| (i, e.iter().zip(q).map(|(a, b)| a * b).sum()))
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.into_iter().take(k).map(|(i, _)| i).collect()
    }
}

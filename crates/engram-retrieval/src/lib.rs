//! Lexical retrieval without a tensor library (start here: [`Bm25Index`]). The default
//! retriever: BM25 (the `bm25` crate: English stemming and stop words, k1 1.2,
//! b 0.75, avgdl fitted to the indexed texts) over a fact's `rephrased question + answer`, or
//! over any texts (documents, for the retrieval benchmark and QA generation's specificity
//! check).

use bm25::{Document, Language, SearchEngine, SearchEngineBuilder};
use engram_facts::Fact;

/// Why an index could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Bm25Error {
    /// Nothing to index (what was empty).
    #[error("{0}")]
    Empty(&'static str),
}

/// Result alias of this crate.
pub type Result<T, E = Bm25Error> = std::result::Result<T, E>;

/// A BM25 index of a fact set.
pub struct Bm25Index {
    engine: SearchEngine<u32>,
    len: usize,
}

/// The indexed text of a fact.
pub fn fact_text(f: &Fact) -> String {
    format!("{} {}", f.rephrased_question, f.answer)
}

impl Bm25Index {
    /// Indexes `facts` (at least one).
    pub fn new(facts: &[Fact]) -> Result<Self> {
        if facts.is_empty() {
            return Err(Bm25Error::Empty("the fact set is empty: nothing to index"));
        }
        let texts: Vec<String> = facts.iter().map(fact_text).collect();
        Self::from_texts(&texts)
    }

    /// Indexes `texts` (at least one); results are indices into them.
    pub fn from_texts(texts: &[String]) -> Result<Self> {
        if texts.is_empty() {
            return Err(Bm25Error::Empty("nothing to index"));
        }
        let docs: Vec<Document<u32>> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| Document::new(i as u32, t.clone()))
            .collect();
        let engine = SearchEngineBuilder::<u32>::with_documents(Language::English, docs).build();
        Ok(Self {
            engine,
            len: texts.len(),
        })
    }

    /// The number of indexed texts.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is indexed (never: an index holds at least one text).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Indices of the `k` best facts for `query`, best first (ties by fact order). Facts that
    /// share no term with the query follow in fact order, so that `k` facts always come back.
    pub fn search(&self, query: &str, k: usize) -> Vec<usize> {
        let mut hits: Vec<(usize, f32)> = self
            .engine
            .search(query, self.len)
            .into_iter()
            .map(|r| (r.document.id as usize, r.score))
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut out: Vec<usize> = hits.into_iter().map(|(i, _)| i).collect();
        if out.len() < k.min(self.len) {
            let mut seen = vec![false; self.len];
            for &i in &out {
                seen[i] = true;
            }
            out.extend((0..self.len).filter(|&i| !seen[i]));
        }
        out.truncate(k);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_match_comes_first_and_k_texts_always_come_back() {
        let texts: Vec<String> = [
            "the quarterly gas contract with Dynegy",
            "lunch on Friday",
            "power trading desk meeting",
        ]
        .map(String::from)
        .to_vec();
        let index = Bm25Index::from_texts(&texts).unwrap();
        assert_eq!(index.len(), 3);
        let hits = index.search("gas contract", 3);
        assert_eq!(hits[0], 0);
        // Texts sharing no term with the query follow in their order.
        assert_eq!(hits, [0, 1, 2]);
        assert_eq!(index.search("meeting", 1), [2]);
        assert_eq!(
            Bm25Index::from_texts(&[]).err(),
            Some(Bm25Error::Empty("nothing to index"))
        );
    }
}

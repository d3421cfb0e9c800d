//! The default retriever: BM25 (the `bm25` crate: English stemming and stop words, k1 1.2,
//! b 0.75, avgdl fitted to the indexed texts) over a fact's `rephrased question + answer`, or
//! over any texts (documents, for the retrieval benchmark and QA generation's specificity
//! check).

use bm25::{Document, Language, SearchEngine, SearchEngineBuilder};
use engram_facts::Fact;

use crate::error::{BaselineError, Result};

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
            return Err(BaselineError::Bad(
                "the fact set is empty: nothing to index".into(),
            ));
        }
        let texts: Vec<String> = facts.iter().map(fact_text).collect();
        Self::from_texts(&texts)
    }

    /// Indexes `texts` (at least one); results are indices into them.
    pub fn from_texts(texts: &[String]) -> Result<Self> {
        if texts.is_empty() {
            return Err(BaselineError::Bad("nothing to index".into()));
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

//! `engram rag-bench --real-queries FILE`: the generated questions against real ones — the file
//! read and its documents found in the corpus, both sets and their documents embedded with the
//! dense encoder, and the comparison of `engram_baselines::rag::query_compare` described in
//! lines.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{Result, bail};
use engram_baselines::rag::BertEncoder;
use engram_baselines::rag::benchmark::{BenchDoc, BenchQuery};
use engram_baselines::rag::query_compare::{
    EmbeddedQueries, QueryComparison, Summary, compare_queries,
};
use engram_baselines::rag::real_queries::{RealQuery, read_real_queries};

/// Real queries and the corpus index of each one's document.
pub struct RealSet {
    queries: Vec<RealQuery>,
    documents: Vec<Option<usize>>,
}

impl RealSet {
    /// Those that name a document, as benchmark questions.
    pub fn with_documents(&self) -> Vec<BenchQuery> {
        self.queries
            .iter()
            .zip(&self.documents)
            .filter_map(|(q, d)| {
                d.map(|relevant| BenchQuery {
                    id: q.id.clone(),
                    text: q.text.clone(),
                    relevant,
                })
            })
            .collect()
    }
}

/// Reads `path`; a document id not in the corpus is named.
pub fn load(path: &Path, index: &HashMap<&str, usize>, corpus: &Path) -> Result<RealSet> {
    let queries = read_real_queries(path)?;
    let mut documents = Vec::with_capacity(queries.len());
    for q in &queries {
        documents.push(match &q.document {
            None => None,
            Some(d) => match index.get(d.as_str()) {
                Some(&i) => Some(i),
                None => bail!(
                    "{}: real query {}'s document {d} is not among the {} documents of {}",
                    path.display(),
                    q.id,
                    index.len(),
                    corpus.display()
                ),
            },
        });
    }
    Ok(RealSet { queries, documents })
}

/// Embeds both sets and the documents they name, and compares them.
pub fn compare(
    encoder: &BertEncoder,
    docs: &[BenchDoc],
    generated: &[BenchQuery],
    real: &RealSet,
) -> Result<QueryComparison> {
    // Only the documents some query names are embedded, each once.
    let mut local: BTreeMap<usize, usize> = BTreeMap::new();
    for d in generated
        .iter()
        .map(|q| q.relevant)
        .chain(real.documents.iter().flatten().copied())
    {
        let next = local.len();
        local.entry(d).or_insert(next);
    }
    let mut texts = vec![String::new(); local.len()];
    for (&d, &i) in &local {
        texts[i] = docs[d].indexed();
    }
    let doc_emb = encoder.encode(&texts, 16)?;
    let gen_text: Vec<String> = generated.iter().map(|q| q.text.clone()).collect();
    let real_text: Vec<String> = real.queries.iter().map(|q| q.text.clone()).collect();
    let (gen_emb, real_emb) = (
        encoder.encode(&gen_text, 32)?,
        encoder.encode(&real_text, 32)?,
    );
    let gen_docs: Vec<Option<usize>> = generated.iter().map(|q| Some(local[&q.relevant])).collect();
    let real_docs: Vec<Option<usize>> = real
        .documents
        .iter()
        .map(|d| d.map(|d| local[&d]))
        .collect();
    Ok(compare_queries(
        &doc_emb,
        EmbeddedQueries {
            queries: &gen_emb,
            documents: &gen_docs,
        },
        EmbeddedQueries {
            queries: &real_emb,
            documents: &real_docs,
        },
    ))
}

fn summary(label: &str, s: &Option<Summary>) -> String {
    match s {
        Some(s) => format!(
            "  {label:<44} mean {:.3}  sd {:.3}  median {:.3}  [{:.3}, {:.3}]  n {}",
            s.mean, s.std, s.median, s.min, s.max, s.n
        ),
        None => format!("  {label:<44} n/a"),
    }
}

/// The comparison in lines.
pub fn describe(c: &QueryComparison) -> Vec<String> {
    let figure = |v: Option<f64>| v.map_or("n/a".to_string(), |x| format!("{x:.3}"));
    vec![
        format!(
            "generated ({}) vs real ({}) queries, cosine similarity under the dense encoder:",
            c.generated, c.real
        ),
        summary("query–document, generated", &c.generated_query_document),
        summary("query–document, real", &c.real_query_document),
        summary(
            "generated → nearest real query",
            &c.generated_to_nearest_real,
        ),
        summary(
            "real → nearest other real query (baseline)",
            &c.real_to_nearest_real,
        ),
        summary("generated vs real, same document", &c.same_document),
        format!(
            "  query–document divergence: Jensen–Shannon {} (base 2; 0 alike, 1 disjoint), Kolmogorov–Smirnov {}",
            figure(c.js_divergence),
            figure(c.ks_statistic)
        ),
    ]
}

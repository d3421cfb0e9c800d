//! `engram bench corpus`: how fast a folder becomes a corpus on this machine — documents/s
//! reading a mail folder (default: the 600 shared Enron messages), and documents/s of the
//! MinHash near-duplicate pass over synthetic documents (default 100,000, 5 % of them near
//! copies) with the filter's default settings. Targets (issue 13): the 600 messages in under
//! 2 s, 100k documents dedup'ed in under a minute on 2 cores.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use engram_corpus::ingest;
use engram_corpus::{Document, Kind, Provenance};
use engram_corpus::{NearDupConfig, near_duplicates};
use engram_io::Quiet;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::Out;

/// What `engram bench corpus` reads and deduplicates (its arguments).
#[derive(clap::Args, Debug)]
pub struct CorpusBench {
    /// The folder to read.
    #[arg(long, default_value = "../shared/data/enron-emails/maildir")]
    pub dir: PathBuf,
    /// Synthetic documents for the MinHash pass.
    #[arg(long, default_value_t = 100_000)]
    pub synthetic: usize,
    /// Words per synthetic document (each between half and all of it).
    #[arg(long, default_value_t = 200)]
    pub words: usize,
}

/// `n` documents of random words from a 5,000-word vocabulary; every 20th a copy of an
/// earlier one with a word changed.
fn synthetic(n: usize, words: usize) -> Vec<Document> {
    let mut rng = StdRng::seed_from_u64(7);
    let vocab: Vec<String> = (0..5000).map(|i| format!("w{i:x}")).collect();
    let mut docs: Vec<Document> = Vec::with_capacity(n);
    for i in 0..n {
        let text = if i % 20 == 19 {
            let src = &docs[rng.random_range(0..i)].text;
            let mut w: Vec<&str> = src.split(' ').collect();
            let at = rng.random_range(0..w.len());
            w[at] = "changed";
            w.join(" ")
        } else {
            let len = rng.random_range(words / 2..=words);
            (0..len)
                .map(|_| vocab[rng.random_range(0..vocab.len())].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        };
        docs.push(Document {
            id: format!("s{i}"),
            kind: Kind::Text,
            title: None,
            text,
            provenance: Provenance::default(),
        });
    }
    docs
}

/// Reads the folder and deduplicates the synthetic documents; hands the figures to `out`.
pub fn corpus(a: &CorpusBench, out: Out) -> Result<()> {
    let t0 = Instant::now();
    let got = ingest(std::slice::from_ref(&a.dir), &Quiet)?;
    let s = t0.elapsed().as_secs_f64();
    say!(
        out,
        "ingest {}: {} files → {} documents in {s:.3} s ({:.0} documents/s)",
        a.dir.display(),
        got.files,
        got.documents.len(),
        got.documents.len() as f64 / s
    );
    let docs = synthetic(a.synthetic, a.words);
    let alive: Vec<usize> = (0..docs.len()).collect();
    let cfg = NearDupConfig::default();
    let t1 = Instant::now();
    let dropped = near_duplicates(&docs, &alive, &cfg, &Quiet);
    let s = t1.elapsed().as_secs_f64();
    say!(
        out,
        "MinHash dedup ({} bands × {} rows, {}-word shingles, Jaccard ≥ {}): {} documents in {s:.2} s ({:.0} documents/s, {} threads), {} near-duplicates dropped",
        cfg.bands,
        cfg.rows,
        cfg.shingle,
        cfg.jaccard,
        docs.len(),
        docs.len() as f64 / s,
        rayon::current_num_threads(),
        dropped.len()
    );
    Ok(())
}

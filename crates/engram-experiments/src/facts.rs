//! An experiment's facts: the pool its `[facts]` table names (a JSONL file, an EnronQA split
//! and inbox, or the verified facts built from a corpus — [`crate::corpus_facts`]), and the nested, seed-determined samples of every size (each smaller sample
//! inside every larger one).

use std::collections::BTreeMap;

use engram_facts::{Fact, nested_samples, read_facts};

use crate::error::{ExperimentError, Result};
use crate::experiment::Experiment;
use crate::{corpus_facts, enronqa};

/// The experiment's fact pool and a description of its source.
pub fn load_pool(exp: &Experiment) -> Result<(Vec<Fact>, String)> {
    let f = &exp.facts;
    match f.source.as_str() {
        "jsonl" => {
            let path = exp.relative_to_experiment(f.path.as_deref().unwrap_or_default());
            let facts = read_facts(&path)?;
            Ok((facts, path.display().to_string()))
        }
        "corpus" => {
            let path = corpus_facts::facts_path(exp);
            match engram_qa::read_manifest(&path)? {
                Some(m) if m.complete && path.is_file() => {}
                None if path.is_file() => {
                    return Err(ExperimentError::ForeignFacts {
                        manifest: engram_qa::run_dir(&path).join("manifest.json"),
                        facts: path,
                    });
                }
                _ => {
                    return Err(ExperimentError::FactsNotBuilt {
                        experiment: exp.path.clone(),
                        facts: path,
                    });
                }
            }
            let facts = read_facts(&path)?;
            let desc = format!(
                "{} (verified from corpus {})",
                path.display(),
                corpus_facts::corpus_dir(exp).display()
            );
            Ok((facts, desc))
        }
        _ => {
            let split = f.split.as_deref().unwrap_or("train");
            let root = match &f.dir {
                Some(d) => exp.relative_to_experiment(d),
                None => enronqa::fetch_split(split)?,
            };
            let facts = enronqa::read_split(&root, split, f.inbox.as_deref())?;
            let mut desc = format!("EnronQA {split} split ({})", root.display());
            if let Some(inbox) = &f.inbox {
                desc.push_str(&format!(", inbox {inbox}"));
            }
            Ok((facts, desc))
        }
    }
}

/// The nested fact samples of every size, keyed by size.
pub fn samples(
    exp: &Experiment,
    pool: &[Fact],
    source: &str,
) -> Result<BTreeMap<usize, Vec<Fact>>> {
    let mut sizes = exp.facts.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let sets =
        nested_samples(pool, &sizes, exp.facts.seed).map_err(|e| ExperimentError::TooFewFacts {
            experiment: exp.path.clone(),
            wanted: e.wanted,
            available: e.available,
            source_desc: source.to_string(),
        })?;
    Ok(sizes.into_iter().zip(sets).collect())
}

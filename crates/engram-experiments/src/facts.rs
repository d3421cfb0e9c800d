//! An experiment's facts: the pool its `[facts]` table names (a JSONL file, an EnronQA split
//! and inbox, or the verified facts built from a corpus — [`crate::corpus_facts`]), and the nested, seed-determined samples of every size (each smaller sample
//! inside every larger one).

use std::collections::BTreeMap;

use engram_facts::{Fact, nested_samples, read_facts};

use crate::cells::Cell;
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

/// The fact samples of an experiment: for each draw, the nested samples of every size (each
/// smaller sample inside every larger one). There is one draw (the `[facts]` seed) unless
/// `[methods] resample_facts` gives replicate k a draw of its own (seed + k).
#[derive(Debug, Clone, PartialEq)]
pub struct Samples {
    /// Draw k's samples, keyed by size.
    draws: Vec<BTreeMap<usize, Vec<Fact>>>,
}

impl Samples {
    /// The facts `cell` answers: its size's sample of its replicate's draw.
    pub fn of(&self, cell: &Cell) -> &[Fact] {
        let draw = &self.draws[cell.replicate.min(self.draws.len() - 1)];
        &draw[&cell.facts]
    }

    /// The sizes, smallest first.
    pub fn sizes(&self) -> Vec<usize> {
        self.draws[0].keys().copied().collect()
    }

    /// The number of draws (1 unless facts are resampled per replicate).
    pub fn draws(&self) -> usize {
        self.draws.len()
    }
}

/// The fact samples of every size for every draw `exp` asks for.
pub fn samples(exp: &Experiment, pool: &[Fact], source: &str) -> Result<Samples> {
    let mut sizes = exp.facts.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let draws = if exp.methods.resample_facts {
        exp.methods.replicates
    } else {
        1
    };
    let draws = (0..draws as u64)
        .map(|k| {
            let sets =
                nested_samples(pool, &sizes, exp.facts.seed.wrapping_add(k)).map_err(|e| {
                    ExperimentError::TooFewFacts {
                        experiment: exp.path.clone(),
                        wanted: e.wanted,
                        available: e.available,
                        source_desc: source.to_string(),
                    }
                })?;
            Ok(sizes.iter().copied().zip(sets).collect())
        })
        .collect::<Result<_>>()?;
    Ok(Samples { draws })
}

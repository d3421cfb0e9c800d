//! A corpus directory: `documents.jsonl` (every document read, one per line), `manifest.json`
//! (inputs, counts by kind, every unreadable file with its reason, the filter's settings and
//! counts once filtered), and after filtering `kept.jsonl` (the documents kept, in order) and
//! `decisions.jsonl` (one line per document: kept, or the rule that dropped it and why). Every
//! file is written atomically.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::document::Document;
use crate::error::{CorpusError, Result};
use crate::filter::{Decision, FilterConfig};
use crate::read::{Ingested, Unreadable, count_reasons};

/// The manifest format.
pub const FORMAT: u32 = 1;

/// What a corpus directory says about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: u32,
    /// The engram version that read it.
    pub engram: String,
    /// The paths given to `ingest`.
    pub inputs: Vec<String>,
    /// Files seen under them.
    pub files: usize,
    /// Documents read.
    pub documents: usize,
    /// Documents by kind.
    pub by_kind: BTreeMap<String, usize>,
    /// Files (or messages) that gave no document, by reason.
    pub unreadable_by_reason: BTreeMap<String, usize>,
    /// Each of them, with its reason.
    pub unreadable: Vec<Unreadable>,
    /// The filter's settings and counts, once filtered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<FilterSummary>,
}

/// What the filter did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterSummary {
    /// The settings.
    pub settings: FilterConfig,
    /// Documents kept.
    pub kept: usize,
    /// Documents dropped, by rule (in the order the rules run).
    pub dropped_by_rule: Vec<(String, usize)>,
}

/// A corpus directory.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// Its root.
    pub dir: PathBuf,
}

impl Corpus {
    /// The corpus at `dir` (nothing is read yet).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes what `ingest` read from `inputs` as a new corpus (replacing an earlier one's
    /// documents and dropping its filter results).
    pub fn write_ingested(&self, inputs: &[PathBuf], got: &Ingested) -> Result<Manifest> {
        std::fs::create_dir_all(&self.dir).map_err(CorpusError::io(&self.dir))?;
        // The manifest and an earlier filter's results go first and the manifest comes back
        // last, so that an interrupted write never leaves new documents beside an old
        // manifest, kept list or decisions.
        for stale in ["manifest.json", "kept.jsonl", "decisions.jsonl"] {
            let p = self.path(stale);
            match std::fs::remove_file(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(CorpusError::io(&p)(e));
                }
                _ => {}
            }
        }
        engram_io::write_jsonl(&self.path("documents.jsonl"), &got.documents)?;
        let mut by_kind = BTreeMap::new();
        for d in &got.documents {
            *by_kind.entry(d.kind.name().to_string()).or_default() += 1;
        }
        let unreadable_by_reason = count_reasons(&got.unreadable);
        let m = Manifest {
            format: FORMAT,
            engram: env!("CARGO_PKG_VERSION").into(),
            inputs: inputs.iter().map(|p| p.display().to_string()).collect(),
            files: got.files,
            documents: got.documents.len(),
            by_kind,
            unreadable_by_reason,
            unreadable: got.unreadable.clone(),
            filter: None,
        };
        self.write_manifest(&m)?;
        Ok(m)
    }

    /// Writes the manifest.
    pub fn write_manifest(&self, m: &Manifest) -> Result<()> {
        let json = serde_json::to_vec_pretty(m).expect("manifest serializes");
        Ok(engram_io::write_file(&self.path("manifest.json"), &json)?)
    }

    /// The manifest.
    pub fn manifest(&self) -> Result<Manifest> {
        let p = self.path("manifest.json");
        let bytes = std::fs::read(&p).map_err(|e| CorpusError::Corpus {
            path: p.clone(),
            problem: format!("{e} (is this a corpus directory made by `engram corpus ingest`?)"),
        })?;
        serde_json::from_slice(&bytes).map_err(|e| CorpusError::Corpus {
            path: p,
            problem: format!("corrupt manifest: {e}"),
        })
    }

    /// Every document read.
    pub fn documents(&self) -> Result<Vec<Document>> {
        read_jsonl(&self.path("documents.jsonl"))
    }

    /// The documents the filter kept.
    pub fn kept(&self) -> Result<Vec<Document>> {
        read_jsonl(&self.path("kept.jsonl"))
    }

    /// SHA-256 (hex) of the documents QA generation reads from this corpus — the filter's kept
    /// list where it was filtered, else every document — as their file holds them: another
    /// ingest or filter gives another fingerprint.
    pub fn fingerprint(&self) -> Result<String> {
        use sha2::{Digest, Sha256};
        let name = match self.manifest()?.filter {
            Some(_) => "kept.jsonl",
            None => "documents.jsonl",
        };
        let path = self.path(name);
        let corpus = |e: std::io::Error| CorpusError::Corpus {
            path: path.clone(),
            problem: e.to_string(),
        };
        use std::io::Read;
        let mut file = std::fs::File::open(&path).map_err(corpus)?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => h.update(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(corpus(e)),
            }
        }
        Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The filter's decision on each document.
    pub fn decisions(&self) -> Result<Vec<Decision>> {
        read_jsonl(&self.path("decisions.jsonl"))
    }

    /// Writes the filter's results: the kept documents, the decisions, the manifest's summary.
    pub fn write_filtered(
        &self,
        manifest: &mut Manifest,
        kept: &[&Document],
        decisions: &[Decision],
        summary: FilterSummary,
    ) -> Result<()> {
        // An earlier filter's summary goes first: interrupted between the files, the corpus
        // reads as unfiltered rather than as that filter's with this one's kept list.
        if manifest.filter.take().is_some() {
            self.write_manifest(manifest)?;
        }
        engram_io::write_jsonl(&self.path("kept.jsonl"), kept)?;
        engram_io::write_jsonl(&self.path("decisions.jsonl"), decisions)?;
        manifest.filter = Some(summary);
        self.write_manifest(manifest)
    }
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let text = std::fs::read_to_string(path).map_err(|e| CorpusError::Corpus {
        path: path.to_path_buf(),
        problem: e.to_string(),
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| CorpusError::Corpus {
                path: path.to_path_buf(),
                problem: format!("line {}: {e}", i + 1),
            })
        })
        .collect()
}

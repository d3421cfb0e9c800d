//! The corpus filter (`engram corpus filter`), EnronQA §3.1, rules in this order, each run on
//! what the ones before kept:
//!
//! 1. [`exact`]: the same text (after normalization) as an earlier document;
//! 2. [`minhash`]: a near-duplicate of an earlier kept document — MinHash LSH candidates
//!    (9 bands × 27 rows by default) confirmed by their exact Jaccard similarity (≥ 0.9) over
//!    word 5-gram shingles;
//! 3. [`subset`]: a message quoted in full inside another of its thread (same subject, `Re:`
//!    and `Fw:` aside);
//! 4. [`quality`]: the Gopher quality rules (Rae et al. 2021) on a text's form: word count,
//!    mean word length, symbol-to-word ratio, bullet and ellipsis lines, words with letters;
//! 5. [`language`]: the language identified (whatlang) is the chosen one with enough
//!    confidence;
//! 6. Gopher's stop-word rule (`quality:stop-words`), last and only when English is kept: its
//!    stop words are English, so a message in another language is named as such first.
//!
//! Every document gets a [`Decision`]; a dropped one names its rule and why (the document it
//! duplicates, the value against the limit). Deterministic: the same corpus and settings give
//! the same decisions whatever the number of threads.

pub(crate) mod exact;
pub(crate) mod flags;
pub(crate) mod language;
pub(crate) mod minhash;
pub(crate) mod quality;
pub(crate) mod subset;

use engram_io::Progress;
use serde::{Deserialize, Serialize};

use crate::document::Document;
use crate::error::{CorpusError, Result};

/// The filter's settings; the defaults are EnronQA's (and Gopher's) numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilterConfig {
    /// Drop exact duplicates.
    pub exact: bool,
    /// Near-duplicate detection (`None`: off).
    pub near: Option<minhash::NearDupConfig>,
    /// Drop messages quoted in full by another of their thread.
    pub subset: Option<subset::SubsetConfig>,
    /// The Gopher quality rules (`None`: off).
    pub quality: Option<quality::QualityConfig>,
    /// Language identification (`None`: off).
    pub language: Option<language::LanguageConfig>,
}

impl Default for FilterConfig {
    fn default() -> Self {
        Self {
            exact: true,
            near: Some(minhash::NearDupConfig::default()),
            subset: Some(subset::SubsetConfig::default()),
            quality: Some(quality::QualityConfig::default()),
            language: Some(language::LanguageConfig::default()),
        }
    }
}

impl FilterConfig {
    /// Reads a settings file (TOML, this type's keys, its tables `near`, `subset`, `quality`,
    /// `language`; keys left out keep their defaults, an unknown key is named with the file).
    pub fn from_file(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(CorpusError::io(path))?;
        toml::from_str(&text).map_err(|e| CorpusError::Corpus {
            path: path.to_path_buf(),
            problem: format!("bad filter settings: {}", e.to_string().trim_end()),
        })
    }

    /// Names the first setting out of range.
    pub fn validate(&self) -> Result<()> {
        if let Some(n) = &self.near {
            n.validate()?;
        }
        if let Some(l) = &self.language {
            l.validate()?;
        }
        Ok(())
    }
}

/// What the filter decided about one document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The document.
    pub id: String,
    /// Whether it is kept.
    pub kept: bool,
    /// The rule that dropped it (`exact-duplicate`, `near-duplicate`, `quoted-subset`,
    /// `quality:<rule>`, `language`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Why, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A drop: the rule and why.
pub type Drop = (String, String);

/// The filter's outcome.
#[derive(Debug, Clone)]
pub struct FilterReport {
    /// One decision per document, in the corpus's order.
    pub decisions: Vec<Decision>,
    /// Documents dropped by each rule, in the order the rules ran (rules that dropped
    /// nothing included; a `quality:*` rule listed once it drops something).
    pub dropped_by_rule: Vec<(String, usize)>,
}

impl FilterReport {
    /// Indices of the kept documents.
    pub fn kept(&self) -> Vec<usize> {
        (0..self.decisions.len())
            .filter(|&i| self.decisions[i].kept)
            .collect()
    }

    /// `rule: count` pairs of the rules that dropped something.
    pub fn reasons(&self) -> String {
        self.dropped_by_rule
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{r}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The documents not dropped yet.
fn alive(drops: &[Option<Drop>]) -> Vec<usize> {
    (0..drops.len()).filter(|&i| drops[i].is_none()).collect()
}

/// Records `found`'s drops and counts them under their rules; `rule` is listed even when it
/// dropped nothing.
fn apply(
    counts: &mut Vec<(String, usize)>,
    drops: &mut [Option<Drop>],
    rule: Option<&str>,
    found: Vec<(usize, Drop)>,
) {
    if let Some(r) = rule
        && !counts.iter().any(|(c, _)| c == r)
    {
        counts.push((r.to_string(), 0));
    }
    for (i, d) in found {
        match counts.iter_mut().find(|(r, _)| *r == d.0) {
            Some(c) => c.1 += 1,
            None => counts.push((d.0.clone(), 1)),
        }
        drops[i] = Some(d);
    }
}

/// Runs the rules of `cfg` over `docs` (see the module docs), reporting one task per rule.
/// Errors for a setting out of range, or when nothing is left (with the counts per rule).
pub fn filter(
    docs: &[Document],
    cfg: &FilterConfig,
    progress: &dyn Progress,
) -> Result<FilterReport> {
    cfg.validate()?;
    let mut drops: Vec<Option<Drop>> = vec![None; docs.len()];
    let mut counts: Vec<(String, usize)> = Vec::new();
    if cfg.exact {
        progress.begin("exact duplicates", None);
        let found = exact::duplicates(docs, &alive(&drops));
        apply(&mut counts, &mut drops, Some("exact-duplicate"), found);
    }
    if let Some(near) = &cfg.near {
        let found = minhash::near_duplicates(docs, &alive(&drops), near, progress);
        apply(&mut counts, &mut drops, Some("near-duplicate"), found);
    }
    if let Some(s) = &cfg.subset {
        progress.begin("quoted subsets", None);
        let found = subset::quoted_subsets(docs, &alive(&drops), s);
        apply(&mut counts, &mut drops, Some("quoted-subset"), found);
    }
    if let Some(q) = &cfg.quality {
        progress.begin("quality rules", None);
        let found = alive(&drops)
            .into_iter()
            .filter_map(|i| quality::check_form(&docs[i].text, q).map(|d| (i, d)))
            .collect();
        apply(&mut counts, &mut drops, None, found);
    }
    if let Some(l) = &cfg.language {
        progress.begin("language", None);
        let found = language::off_language(docs, &alive(&drops), l);
        apply(&mut counts, &mut drops, Some("language"), found);
    }
    // Gopher's stop words are English: that rule applies when English is what is kept.
    let english = cfg
        .language
        .as_ref()
        .is_none_or(|l| l.keep.eq_ignore_ascii_case("eng"));
    if let (Some(q), true) = (&cfg.quality, english) {
        let found = alive(&drops)
            .into_iter()
            .filter_map(|i| quality::check_stop_words(&docs[i].text, q).map(|d| (i, d)))
            .collect();
        apply(&mut counts, &mut drops, None, found);
    }
    progress.end();
    let decisions: Vec<Decision> = docs
        .iter()
        .zip(drops)
        .map(|(d, drop)| Decision {
            id: d.id.clone(),
            kept: drop.is_none(),
            rule: drop.as_ref().map(|x| x.0.clone()),
            detail: drop.map(|x| x.1),
        })
        .collect();
    let report = FilterReport {
        decisions,
        dropped_by_rule: counts,
    };
    if report.kept().is_empty() {
        return Err(CorpusError::NothingKept {
            documents: docs.len(),
            reasons: report.reasons(),
        });
    }
    Ok(report)
}

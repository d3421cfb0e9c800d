//! The filter's settings as flags (`engram corpus filter --jaccard 0.8 …`): the defaults, a
//! settings file, then each flag given over it.

use std::path::PathBuf;

use super::FilterConfig;
use super::language::LanguageConfig;
use super::minhash::NearDupConfig;
use crate::error::Result;

/// A settings file and the flags that override its keys (with the `clap` feature,
/// `engram corpus filter`'s flags).
#[derive(Debug, Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct FilterFlags {
    /// Settings from a TOML file (keys: exact, [near], [subset], [quality], [language]);
    /// the flags below override it.
    #[cfg_attr(feature = "clap", arg(long))]
    pub config: Option<PathBuf>,
    /// Jaccard similarity that makes a near-duplicate.
    #[cfg_attr(feature = "clap", arg(long))]
    pub jaccard: Option<f64>,
    /// MinHash LSH bands.
    #[cfg_attr(feature = "clap", arg(long))]
    pub bands: Option<usize>,
    /// MinHash rows per band.
    #[cfg_attr(feature = "clap", arg(long))]
    pub rows: Option<usize>,
    /// Seed of the MinHash functions.
    #[cfg_attr(feature = "clap", arg(long))]
    pub seed: Option<u64>,
    /// The language to keep (ISO 639-3: eng, deu, fra …); `any` turns identification off.
    #[cfg_attr(feature = "clap", arg(long))]
    pub language: Option<String>,
    /// The smallest confidence of the language identification.
    #[cfg_attr(feature = "clap", arg(long))]
    pub min_confidence: Option<f64>,
    /// Fewest words a document may have (Gopher: 50).
    #[cfg_attr(feature = "clap", arg(long))]
    pub min_words: Option<usize>,
}

impl FilterFlags {
    /// The settings: the defaults, the `config` file, then the flags given. A MinHash flag
    /// turns near-duplicate detection on; `language = "any"` turns identification off.
    pub fn settings(&self) -> Result<FilterConfig> {
        let mut cfg = match &self.config {
            Some(p) => FilterConfig::from_file(p)?,
            None => FilterConfig::default(),
        };
        if self.jaccard.is_some()
            || self.bands.is_some()
            || self.rows.is_some()
            || self.seed.is_some()
        {
            let n = cfg.near.get_or_insert_with(NearDupConfig::default);
            n.jaccard = self.jaccard.unwrap_or(n.jaccard);
            n.bands = self.bands.unwrap_or(n.bands);
            n.rows = self.rows.unwrap_or(n.rows);
            n.seed = self.seed.unwrap_or(n.seed);
        }
        match self.language.as_deref() {
            Some("any") => cfg.language = None,
            Some(l) => {
                cfg.language
                    .get_or_insert_with(LanguageConfig::default)
                    .keep = l.into()
            }
            None => {}
        }
        if let (Some(c), Some(l)) = (self.min_confidence, cfg.language.as_mut()) {
            l.min_confidence = c;
        }
        if let (Some(w), Some(q)) = (self.min_words, cfg.quality.as_mut()) {
            q.min_words = w;
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_defaults() {
        assert_eq!(
            FilterFlags::default().settings().unwrap(),
            FilterConfig::default()
        );
        let flags = FilterFlags {
            jaccard: Some(0.5),
            language: Some("any".into()),
            ..Default::default()
        };
        let cfg = flags.settings().unwrap();
        assert_eq!(cfg.near.expect("near on").jaccard, 0.5);
        assert!(cfg.language.is_none());
        let flags = FilterFlags {
            language: Some("deu".into()),
            min_confidence: Some(0.3),
            ..Default::default()
        };
        let lang = flags.settings().unwrap().language.expect("language on");
        assert_eq!((lang.keep.as_str(), lang.min_confidence), ("deu", 0.3));
    }
}

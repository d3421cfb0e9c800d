//! Language identification (whatlang's trigram models): a document is kept when the language
//! identified is the chosen one (ISO 639-3, English by default) with at least the chosen
//! confidence (EnronQA: 0.8).

use serde::{Deserialize, Serialize};
use whatlang::Lang;

use super::Drop;
use crate::document::Document;
use crate::error::{CorpusError, Result};

/// Language settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LanguageConfig {
    /// The language to keep (ISO 639-3: `eng`, `deu`, `fra`, `spa` …).
    pub keep: String,
    /// The smallest confidence of the identification.
    pub min_confidence: f64,
}

impl Default for LanguageConfig {
    fn default() -> Self {
        Self {
            keep: "eng".into(),
            min_confidence: 0.8,
        }
    }
}

impl LanguageConfig {
    /// The language, or a named error.
    pub fn lang(&self) -> Result<Lang> {
        Lang::from_code(self.keep.to_ascii_lowercase()).ok_or_else(|| CorpusError::Setting {
            key: "language.keep",
            problem: format!(
                "{:?} is not an ISO 639-3 code whatlang knows (eng, deu, fra, spa, ita, por, nld, rus, cmn, jpn …)",
                self.keep
            ),
        })
    }

    /// Names a setting out of range.
    pub fn validate(&self) -> Result<()> {
        self.lang()?;
        if !(0.0..=1.0).contains(&self.min_confidence) {
            return Err(CorpusError::Setting {
                key: "language.min_confidence",
                problem: "must be in [0, 1]".into(),
            });
        }
        Ok(())
    }
}

/// What whatlang identifies in `text`: its ISO 639-3 code and confidence.
pub fn identify(text: &str) -> Option<(&'static str, f64)> {
    whatlang::detect(text).map(|i| (i.lang().code(), i.confidence()))
}

/// The documents among `alive` not in the chosen language with enough confidence.
pub fn off_language(
    docs: &[Document],
    alive: &[usize],
    cfg: &LanguageConfig,
) -> Vec<(usize, Drop)> {
    let want = cfg.lang().expect("validated").code();
    alive
        .iter()
        .filter_map(|&i| {
            let why = match identify(&docs[i].text) {
                None => "no language identified".to_string(),
                Some((code, conf)) if code == want && conf >= cfg.min_confidence => return None,
                Some((code, conf)) if code == want => {
                    format!("{code} with confidence {conf:.2} < {}", cfg.min_confidence)
                }
                Some((code, conf)) => format!("{code} (confidence {conf:.2}), not {want}"),
            };
            Some((i, ("language".to_string(), why)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_and_german_told_apart() {
        let en = identify("The trader said that the gas price of the deal would have to move with demand next week.").unwrap();
        assert_eq!(en.0, "eng");
        let de = identify("Der Händler sagte, dass der Gaspreis des Geschäfts sich nächste Woche mit der Nachfrage bewegen müsse.").unwrap();
        assert_eq!(de.0, "deu");
        assert!(
            LanguageConfig {
                keep: "xx".into(),
                ..Default::default()
            }
            .validate()
            .is_err()
        );
    }
}

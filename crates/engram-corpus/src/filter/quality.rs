//! The Gopher quality rules (Rae et al. 2021, *Scaling Language Models*, appendix A.1.1), with
//! their published limits as defaults. A document fails at the first rule it breaks, named
//! `quality:<rule>` with its value and the limit.

use serde::{Deserialize, Serialize};

use super::Drop;

/// Gopher's stop words: a document must hold at least [`QualityConfig::min_stop_words`] of them.
pub const STOP_WORDS: [&str; 8] = ["the", "be", "to", "of", "and", "that", "have", "with"];

/// The limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QualityConfig {
    /// Fewest words.
    pub min_words: usize,
    /// Most words.
    pub max_words: usize,
    /// Shortest mean word length (characters).
    pub min_mean_word_length: f64,
    /// Longest mean word length.
    pub max_mean_word_length: f64,
    /// Most `#` and ellipses per word.
    pub max_symbol_ratio: f64,
    /// Largest share of lines that start with a bullet.
    pub max_bullet_lines: f64,
    /// Largest share of lines that end with an ellipsis.
    pub max_ellipsis_lines: f64,
    /// Smallest share of words with at least one letter.
    pub min_alphabetic_words: f64,
    /// Fewest distinct stop words ([`STOP_WORDS`]).
    pub min_stop_words: usize,
}

impl Default for QualityConfig {
    fn default() -> Self {
        Self {
            min_words: 50,
            max_words: 100_000,
            min_mean_word_length: 3.0,
            max_mean_word_length: 10.0,
            max_symbol_ratio: 0.1,
            max_bullet_lines: 0.9,
            max_ellipsis_lines: 0.3,
            min_alphabetic_words: 0.8,
            min_stop_words: 2,
        }
    }
}

fn fail(rule: &str, detail: String) -> Option<Drop> {
    Some((format!("quality:{rule}"), detail))
}

/// The first rule `text` breaks, if any (form, then stop words): the filter runs the two in
/// separate passes; the tests ask for both at once.
#[cfg(test)]
pub fn check(text: &str, q: &QualityConfig) -> Option<Drop> {
    check_form(text, q).or_else(|| check_stop_words(text, q))
}

/// The first of the rules on a text's form that `text` breaks: every rule but the stop words.
pub fn check_form(text: &str, q: &QualityConfig) -> Option<Drop> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let n = words.len();
    if n < q.min_words {
        return fail("too-few-words", format!("{n} words < {}", q.min_words));
    }
    if n > q.max_words {
        return fail("too-many-words", format!("{n} words > {}", q.max_words));
    }
    let mean = words.iter().map(|w| w.chars().count()).sum::<usize>() as f64 / n as f64;
    if mean < q.min_mean_word_length || mean > q.max_mean_word_length {
        return fail(
            "mean-word-length",
            format!(
                "mean word length {mean:.2} outside [{}, {}]",
                q.min_mean_word_length, q.max_mean_word_length
            ),
        );
    }
    let symbols =
        text.matches('#').count() + text.matches("...").count() + text.matches('…').count();
    let ratio = symbols as f64 / n as f64;
    if ratio > q.max_symbol_ratio {
        return fail(
            "symbol-ratio",
            format!("{ratio:.3} symbols per word > {}", q.max_symbol_ratio),
        );
    }
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let share = |f: &dyn Fn(&str) -> bool| {
        lines.iter().filter(|l| f(l)).count() as f64 / lines.len().max(1) as f64
    };
    let bullets = share(&|l| l.starts_with(['•', '-', '*', '·', '‣', '◦']));
    if bullets > q.max_bullet_lines {
        return fail(
            "bullet-lines",
            format!(
                "{bullets:.2} of lines start with a bullet > {}",
                q.max_bullet_lines
            ),
        );
    }
    let ellipses = share(&|l| l.ends_with("...") || l.ends_with('…'));
    if ellipses > q.max_ellipsis_lines {
        return fail(
            "ellipsis-lines",
            format!(
                "{ellipses:.2} of lines end with an ellipsis > {}",
                q.max_ellipsis_lines
            ),
        );
    }
    let alpha = words
        .iter()
        .filter(|w| w.chars().any(char::is_alphabetic))
        .count() as f64
        / n as f64;
    if alpha < q.min_alphabetic_words {
        return fail(
            "alphabetic-words",
            format!(
                "{alpha:.2} of words have a letter < {}",
                q.min_alphabetic_words
            ),
        );
    }
    None
}

/// Gopher's stop-word rule: fewer than [`QualityConfig::min_stop_words`] of [`STOP_WORDS`].
pub fn check_stop_words(text: &str, q: &QualityConfig) -> Option<Drop> {
    let lower: std::collections::HashSet<String> =
        text.split_whitespace().map(str::to_lowercase).collect();
    let stops = STOP_WORDS.iter().filter(|s| lower.contains(**s)).count();
    if stops < q.min_stop_words {
        return fail(
            "stop-words",
            format!("{stops} of Gopher's stop words < {}", q.min_stop_words),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prose(words: usize) -> String {
        "the trader said that the gas price of the deal would have to move with demand "
            .repeat(words / 16 + 1)
            .split_whitespace()
            .take(words)
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn each_rule_names_itself() {
        let q = QualityConfig::default();
        assert_eq!(check(&prose(60), &q), None);
        let rule = |t: &str| check(t, &q).map(|d| d.0);
        assert_eq!(rule(&prose(20)).as_deref(), Some("quality:too-few-words"));
        assert_eq!(
            rule(&"a b c d e ".repeat(20)).as_deref(),
            Some("quality:mean-word-length")
        );
        assert_eq!(
            rule(&format!("{} {}", prose(60), "### ".repeat(10))).as_deref(),
            Some("quality:symbol-ratio")
        );
        let bulleted: String = (0..60).map(|_| format!("- {}\n", prose(4))).collect();
        assert_eq!(rule(&bulleted).as_deref(), Some("quality:bullet-lines"));
        let numbers = format!("{} {}", prose(20), "12345 67890 ".repeat(30));
        assert_eq!(rule(&numbers).as_deref(), Some("quality:alphabetic-words"));
        let no_stops = "energy trading desk report numbers ".repeat(20);
        assert_eq!(rule(&no_stops).as_deref(), Some("quality:stop-words"));
    }
}

//! Quoted subsets: an email whose whole text appears inside another email of its thread — a
//! reply or forward that quotes it in full — adds nothing the longer one lacks. Threads are
//! emails with the same subject once `Re:`, `Fw:` and `Fwd:` prefixes are stripped; texts are
//! compared with quote markers (`>`), case and whitespace runs set aside.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Drop;
use crate::document::{Document, Kind};

/// Quoted-subset settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SubsetConfig {
    /// Shorter texts (characters, once compared) are never dropped as quoted: a one-line
    /// "Thanks!" is inside too many messages to mean anything.
    pub min_chars: usize,
}

impl Default for SubsetConfig {
    fn default() -> Self {
        Self { min_chars: 100 }
    }
}

/// The thread of a subject: lower case, `Re:`/`Fw:`/`Fwd:` prefixes removed, whitespace
/// collapsed; `None` for an empty subject.
pub fn thread_key(subject: &str) -> Option<String> {
    let mut s = subject.trim().to_lowercase();
    loop {
        let stripped = ["re:", "fw:", "fwd:", "re :", "fw :"]
            .iter()
            .find_map(|p| s.strip_prefix(p).map(|r| r.trim_start().to_string()));
        match stripped {
            Some(r) => s = r,
            None => break,
        }
    }
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    (!s.is_empty()).then_some(s)
}

/// A text as compared: quote markers dropped, lower case, whitespace runs as one space.
pub fn comparable(text: &str) -> String {
    text.lines()
        .map(|l| l.trim_start_matches(|c: char| c == '>' || c.is_whitespace()))
        .flat_map(str::split_whitespace)
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The emails among `alive` quoted in full by a longer email of their thread.
pub fn quoted_subsets(
    docs: &[Document],
    alive: &[usize],
    cfg: &SubsetConfig,
) -> Vec<(usize, Drop)> {
    let mut threads: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for &i in alive {
        let d = &docs[i];
        if d.kind != Kind::Email {
            continue;
        }
        if let Some(k) = d.title.as_deref().and_then(thread_key) {
            threads.entry(k).or_default().push(i);
        }
    }
    let mut out = Vec::new();
    for members in threads.values().filter(|m| m.len() > 1) {
        let texts: Vec<String> = members.iter().map(|&i| comparable(&docs[i].text)).collect();
        for (a, ta) in texts.iter().enumerate() {
            if ta.chars().count() < cfg.min_chars {
                continue;
            }
            let container = texts
                .iter()
                .enumerate()
                .filter(|(b, tb)| *b != a && tb.len() > ta.len() && tb.contains(ta.as_str()))
                .max_by_key(|(_, tb)| tb.len());
            if let Some((b, _)) = container {
                out.push((
                    members[a],
                    (
                        "quoted-subset".to_string(),
                        format!("quoted in full by {}", docs[members[b]].id),
                    ),
                ));
            }
        }
    }
    out.sort_by_key(|(i, _)| *i);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_and_comparable_texts() {
        assert_eq!(
            thread_key("RE: Fw:  Gas  Deal").as_deref(),
            Some("gas deal")
        );
        assert_eq!(thread_key("Re: "), None);
        assert_eq!(comparable("> Hello\n>>  World\n"), "hello world");
    }
}

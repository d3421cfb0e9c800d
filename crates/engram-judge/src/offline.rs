//! Offline judges for tests and the embedded default: normalized exact match, and token F1 at or
//! above a threshold (SQuAD-style normalization: lower case, punctuation and articles removed,
//! whitespace collapsed). They are labelled as such in every verdict.

use crate::error::Result;
use crate::verdict::{Judge, JudgeItem, Verdict};

/// SQuAD-style normalization.
pub fn normalize(s: &str) -> String {
    let lower = s.to_lowercase();
    let no_punct: String = lower
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c.is_whitespace() {
                c
            } else {
                ' '
            }
        })
        .collect();
    no_punct
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn tokens(s: &str) -> Vec<String> {
    normalize(s)
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Tokens shared by `a` and `g`, counted with multiplicity.
fn common_tokens(a: &[String], g: &[String]) -> usize {
    let mut counts = std::collections::HashMap::new();
    for w in g {
        *counts.entry(w.as_str()).or_insert(0i64) += 1;
    }
    let mut common = 0;
    for w in a {
        if let Some(c) = counts.get_mut(w.as_str())
            && *c > 0
        {
            *c -= 1;
            common += 1;
        }
    }
    common
}

/// Token-level F1 between normalized answer and gold.
pub fn token_f1(answer: &str, gold: &str) -> f64 {
    let (a, g) = (tokens(answer), tokens(gold));
    if a.is_empty() || g.is_empty() {
        return if a == g { 1.0 } else { 0.0 };
    }
    let common = common_tokens(&a, &g);
    if common == 0 {
        return 0.0;
    }
    let p = common as f64 / a.len() as f64;
    let r = common as f64 / g.len() as f64;
    2.0 * p * r / (p + r)
}

/// The share of the normalized gold answer's tokens that the answer contains (token recall):
/// 1.0 when a longer, sentence-style answer states the whole gold answer.
pub fn gold_recall(answer: &str, gold: &str) -> f64 {
    let (a, g) = (tokens(answer), tokens(gold));
    if g.is_empty() {
        return if a.is_empty() { 1.0 } else { 0.0 };
    }
    common_tokens(&a, &g) as f64 / g.len() as f64
}

/// Scores every answered item with `score(answer, gold) -> (correct, raw)`; NA items get no
/// verdict.
fn score_each(
    items: &[JudgeItem],
    judge: String,
    score: impl Fn(&str, &str) -> (bool, String),
) -> Vec<Verdict> {
    items
        .iter()
        .map(|it| match &it.answer {
            None => Verdict::na(&it.id, &judge),
            Some(a) => {
                let (ok, raw) = score(a, &it.gold);
                Verdict {
                    id: it.id.clone(),
                    correct: Some(ok),
                    judge: judge.clone(),
                    raw,
                    follow_up: None,
                    rationale: None,
                    cached: false,
                    error: None,
                }
            }
        })
        .collect()
}

/// engram's one exact-match rule: the answers are equal after [`normalize`] (SQuAD's: case,
/// punctuation, articles and spacing ignored). The exact-match judge and `engram train --eval`
/// both use it.
pub fn exact_match(answer: &str, gold: &str) -> bool {
    normalize(answer) == normalize(gold)
}

/// Correct when the normalized answer equals the normalized gold answer ([`exact_match`]).
pub struct ExactMatchJudge;

impl Judge for ExactMatchJudge {
    fn name(&self) -> String {
        "offline:exact-match".into()
    }

    fn judge(&self, items: &[JudgeItem]) -> Result<Vec<Verdict>> {
        Ok(score_each(items, self.name(), |a, gold| {
            let ok = exact_match(a, gold);
            (ok, if ok { "1" } else { "0" }.into())
        }))
    }
}

/// Correct when token F1 ≥ `threshold`.
pub struct TokenF1Judge {
    /// The threshold.
    pub threshold: f64,
}

impl Judge for TokenF1Judge {
    fn name(&self) -> String {
        format!("offline:token-f1>={}", self.threshold)
    }

    fn judge(&self, items: &[JudgeItem]) -> Result<Vec<Verdict>> {
        Ok(score_each(items, self.name(), |a, gold| {
            let f1 = token_f1(a, gold);
            (f1 >= self.threshold, format!("{f1:.4}"))
        }))
    }
}

/// Correct when the answer contains at least `threshold` of the gold answer's tokens: an
/// offline stand-in for an LLM judge that accepts full-sentence answers (token F1 punishes their
/// length).
pub struct GoldRecallJudge {
    /// The threshold (1.0: every gold token).
    pub threshold: f64,
}

impl Judge for GoldRecallJudge {
    fn name(&self) -> String {
        format!("offline:gold-recall>={}", self.threshold)
    }

    fn judge(&self, items: &[JudgeItem]) -> Result<Vec<Verdict>> {
        Ok(score_each(items, self.name(), |a, gold| {
            let r = gold_recall(a, gold);
            (r >= self.threshold, format!("{r:.4}"))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gold_recall_accepts_sentences_that_state_the_gold_answer() {
        let gold = "$708,265";
        let sentence = "Tana Whalby approved a $708,265 budget for the pipeline.";
        assert_eq!(gold_recall(sentence, gold), 1.0);
        assert!(token_f1(sentence, gold) < 0.5);
        assert_eq!(gold_recall("She approved $708,000.", gold), 0.5);
        assert_eq!(
            gold_recall("Project Scarlet Pelican", "Summit Ridge Legal"),
            0.0
        );
        let items = [JudgeItem {
            id: "1".into(),
            question: "q".into(),
            gold: "Project Scarlet Pelican".into(),
            answer: Some("The code name was Project Scarlet Pelican.".into()),
            document: None,
        }];
        let v = GoldRecallJudge { threshold: 1.0 }.judge(&items).unwrap();
        assert_eq!(v[0].correct, Some(true));
        assert_eq!(v[0].judge, "offline:gold-recall>=1");
    }

    #[test]
    fn normalization_and_f1() {
        assert_eq!(
            normalize("The  Copper-Osprey, project!"),
            "copper osprey project"
        );
        assert_eq!(
            token_f1("Project Copper Osprey", "project copper osprey"),
            1.0
        );
        // 2 common of 4 answer tokens and 3 gold tokens: p 0.5, r 2/3, F1 4/7.
        let f = token_f1("It is Copper Osprey", "Project Copper Osprey");
        assert!((f - 4.0 / 7.0).abs() < 1e-12, "{f}");
        assert_eq!(token_f1("", "x"), 0.0);
    }

    #[test]
    fn offline_judges_label_themselves() {
        let items = vec![
            JudgeItem {
                id: "a".into(),
                question: "q".into(),
                gold: "2:45 PM".into(),
                answer: Some("2:45 pm.".into()),
                document: None,
            },
            JudgeItem {
                id: "b".into(),
                question: "q".into(),
                gold: "x".into(),
                answer: None,
                document: None,
            },
        ];
        let v = ExactMatchJudge.judge(&items).unwrap();
        assert_eq!(v[0].correct, Some(true));
        assert_eq!(v[1].correct, None);
        assert_eq!(v[0].judge, "offline:exact-match");
        let v = TokenF1Judge { threshold: 0.5 }.judge(&items).unwrap();
        assert!(v[0].judge.starts_with("offline:token-f1"));
    }
}

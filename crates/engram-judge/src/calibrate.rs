//! How far a judge agrees with human labels (`engram judge --calibrate LABELS.jsonl`), as
//! Chroma's generative-benchmarking report aligns its LLM judge before trusting it: agreement,
//! precision and recall of "correct", Cohen's kappa and the confusion matrix.
//!
//! An answer the judge gave no verdict for counts as "incorrect" in agreement, precision,
//! recall and kappa — as the memorization table counts it (accuracy is correct / all) — and is
//! shown in the matrix's own column.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{JudgeError, Result};
use crate::preset::JudgePreset;
use crate::verdict::{JudgeItem, Verdict};

/// A human label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Label {
    /// The answer gives the gold answer's information.
    Correct,
    /// It does not.
    Incorrect,
}

/// One labelled answer (a line of a labels file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelledAnswer {
    /// Its id.
    pub id: String,
    /// The question.
    pub question: String,
    /// The gold answer.
    pub gold: String,
    /// The answer judged.
    pub answer: String,
    /// The human label.
    pub label: Label,
    /// The source document, for prompts that use it.
    #[serde(default)]
    pub document: Option<String>,
}

impl LabelledAnswer {
    /// What a judge sees of it.
    pub fn item(&self) -> JudgeItem {
        JudgeItem {
            id: self.id.clone(),
            question: self.question.clone(),
            gold: self.gold.clone(),
            answer: Some(self.answer.clone()),
            document: self.document.clone(),
        }
    }
}

/// Reads a labels file (JSONL: `id`, `question`, `gold`, `answer`, `label` =
/// `correct`/`incorrect`, optional `document`); errors name the file and line.
pub fn read_labels(path: &Path) -> Result<Vec<LabelledAnswer>> {
    let text = std::fs::read_to_string(path).map_err(|source| JudgeError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let a: LabelledAnswer = serde_json::from_str(line)
            .map_err(|e| JudgeError::Bad(format!("{}:{}: {e}", path.display(), i + 1)))?;
        out.push(a);
    }
    if out.is_empty() {
        return Err(JudgeError::Bad(format!(
            "{}: no labelled answers",
            path.display()
        )));
    }
    Ok(out)
}

/// Label × verdict counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confusion {
    /// Labelled correct, judged correct.
    pub correct_correct: usize,
    /// Labelled correct, judged incorrect.
    pub correct_incorrect: usize,
    /// Labelled correct, no verdict.
    pub correct_none: usize,
    /// Labelled incorrect, judged correct.
    pub incorrect_correct: usize,
    /// Labelled incorrect, judged incorrect.
    pub incorrect_incorrect: usize,
    /// Labelled incorrect, no verdict.
    pub incorrect_none: usize,
}

/// A judge's agreement with the labels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The judge's name.
    pub judge: String,
    /// Labelled answers.
    pub answers: usize,
    /// Answers the judge gave a verdict for.
    pub verdicts: usize,
    /// Share of answers where judge and label agree (no verdict: a disagreement with
    /// "correct", an agreement with "incorrect").
    pub agreement: f64,
    /// Of the answers judged correct, the share labelled correct (`None`: none judged correct).
    pub precision: Option<f64>,
    /// Of the answers labelled correct, the share judged correct (`None`: none labelled so).
    pub recall: Option<f64>,
    /// Cohen's kappa (`None` when chance agreement is 1: one class only on both sides).
    pub kappa: Option<f64>,
    /// The counts.
    pub confusion: Confusion,
}

/// Scores `verdicts` (in the order of `labels`) against the labels.
pub fn calibrate(judge: &str, labels: &[LabelledAnswer], verdicts: &[Verdict]) -> Calibration {
    let mut c = Confusion::default();
    for (l, v) in labels.iter().zip(verdicts) {
        let cell = match (l.label, v.correct) {
            (Label::Correct, Some(true)) => &mut c.correct_correct,
            (Label::Correct, Some(false)) => &mut c.correct_incorrect,
            (Label::Correct, None) => &mut c.correct_none,
            (Label::Incorrect, Some(true)) => &mut c.incorrect_correct,
            (Label::Incorrect, Some(false)) => &mut c.incorrect_incorrect,
            (Label::Incorrect, None) => &mut c.incorrect_none,
        };
        *cell += 1;
    }
    let n = labels.len().min(verdicts.len());
    let tp = c.correct_correct as f64;
    let fp = c.incorrect_correct as f64;
    let fn_ = (c.correct_incorrect + c.correct_none) as f64;
    let tn = (c.incorrect_incorrect + c.incorrect_none) as f64;
    let total = n as f64;
    let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
    let agreement = ratio(tp + tn, total).unwrap_or(0.0);
    let chance = ((tp + fp) * (tp + fn_) + (fn_ + tn) * (fp + tn)) / (total * total).max(1.0);
    Calibration {
        judge: judge.to_string(),
        answers: n,
        verdicts: verdicts[..n].iter().filter(|v| v.correct.is_some()).count(),
        agreement,
        precision: ratio(tp, tp + fp),
        recall: ratio(tp, tp + fn_),
        kappa: (chance < 1.0).then(|| (agreement - chance) / (1.0 - chance)),
        confusion: c,
    }
}

/// The chosen judge's calibration (`verdicts`, in the order of `labels`, from the judge named
/// `judge`), then the offline judges' at their default thresholds — exact match, token F1, gold
/// recall — each judging the labelled answers itself, so that a report shows how far the
/// chosen judge improves on them. An offline judge that is the chosen one is not repeated.
pub fn calibrate_with_offline(
    judge: &str,
    labels: &[LabelledAnswer],
    verdicts: &[Verdict],
) -> Result<Vec<Calibration>> {
    let items: Vec<JudgeItem> = labels.iter().map(LabelledAnswer::item).collect();
    let mut rows = vec![calibrate(judge, labels, verdicts)];
    for (_, offline) in JudgePreset::offline_defaults() {
        // An offline judge reads no file: the paths `build` takes are not used.
        let j = offline.build(Path::new("."), Path::new("."))?;
        if rows.iter().all(|r| r.judge != j.name()) {
            rows.push(calibrate(&j.name(), labels, &j.judge(&items)?));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::defaults::{DEFAULT_F1_THRESHOLD, DEFAULT_RECALL_THRESHOLD};
    use crate::offline::ExactMatchJudge;
    use crate::verdict::Judge;

    fn labelled(i: usize, label: Label) -> LabelledAnswer {
        LabelledAnswer {
            id: i.to_string(),
            question: "q".into(),
            gold: "g".into(),
            answer: "a".into(),
            label,
            document: None,
        }
    }

    fn verdict(i: usize, correct: Option<bool>) -> Verdict {
        Verdict {
            id: i.to_string(),
            correct,
            judge: "j".into(),
            raw: String::new(),
            follow_up: None,
            rationale: None,
            cached: false,
            error: None,
        }
    }

    #[test]
    fn figures_match_a_hand_computed_example() {
        // Ten answers, six labelled correct. The judge: 4 of those correct, 1 incorrect, 1 no
        // verdict; of the four labelled incorrect, 1 correct and 3 incorrect.
        use Label::{Correct as C, Incorrect as I};
        let rows = [
            (C, Some(true)),
            (C, Some(true)),
            (C, Some(true)),
            (C, Some(true)),
            (C, Some(false)),
            (C, None),
            (I, Some(true)),
            (I, Some(false)),
            (I, Some(false)),
            (I, Some(false)),
        ];
        let labels: Vec<_> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| labelled(i, r.0))
            .collect();
        let verdicts: Vec<_> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| verdict(i, r.1))
            .collect();
        let c = calibrate("j", &labels, &verdicts);
        // By hand: TP 4, FP 1, FN 2 (1 incorrect + 1 none), TN 3.
        // agreement (4 + 3) / 10 = 0.7; precision 4 / 5; recall 4 / 6;
        // chance = (5·6 + 5·4) / 100 = 0.5; kappa = (0.7 − 0.5) / (1 − 0.5) = 0.4.
        assert_eq!((c.answers, c.verdicts), (10, 9));
        assert!((c.agreement - 0.7).abs() < 1e-12);
        assert!((c.precision.unwrap() - 0.8).abs() < 1e-12);
        assert!((c.recall.unwrap() - 4.0 / 6.0).abs() < 1e-12);
        assert!((c.kappa.unwrap() - 0.4).abs() < 1e-12, "{:?}", c.kappa);
        assert_eq!(
            c.confusion,
            Confusion {
                correct_correct: 4,
                correct_incorrect: 1,
                correct_none: 1,
                incorrect_correct: 1,
                incorrect_incorrect: 3,
                incorrect_none: 0,
            }
        );
        // A judge that says "correct" to everything: precision 0.6, recall 1, kappa 0.
        let all: Vec<_> = (0..10).map(|i| verdict(i, Some(true))).collect();
        let c = calibrate("j", &labels, &all);
        assert!((c.precision.unwrap() - 0.6).abs() < 1e-12);
        assert_eq!(c.recall, Some(1.0));
        assert!(c.kappa.unwrap().abs() < 1e-12);
    }

    #[test]
    fn labels_files_are_checked_line_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("labels.jsonl");
        std::fs::write(
            &p,
            "{\"id\":\"1\",\"question\":\"q\",\"gold\":\"g\",\"answer\":\"a\",\"label\":\"correct\"}\n\
             {\"id\":\"2\",\"question\":\"q\",\"gold\":\"g\",\"answer\":\"a\",\"label\":\"maybe\"}\n",
        )
        .unwrap();
        let e = read_labels(&p).unwrap_err().to_string();
        assert!(e.contains("labels.jsonl:2") && e.contains("maybe"), "{e}");
        std::fs::write(&p, "\n").unwrap();
        let e = read_labels(&p).unwrap_err().to_string();
        assert!(e.contains("no labelled answers"), "{e}");
    }

    /// The chosen judge's row comes first, the three offline judges' follow (scored on the
    /// labelled answers themselves), and an offline judge that was the chosen one is not
    /// repeated.
    #[test]
    fn offline_judges_are_calibrated_beside_the_chosen_one() {
        let mut labels = vec![labelled(0, Label::Correct), labelled(1, Label::Incorrect)];
        labels[0].answer = "g".into();
        let chosen = [verdict(0, Some(true)), verdict(1, Some(true))];
        let rows = calibrate_with_offline("openai:m", &labels, &chosen).unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.judge.as_str()).collect();
        assert_eq!(
            names,
            [
                "openai:m",
                "offline:exact-match",
                &format!("offline:token-f1>={DEFAULT_F1_THRESHOLD}"),
                &format!("offline:gold-recall>={DEFAULT_RECALL_THRESHOLD}"),
            ]
        );
        assert_eq!(rows[0].agreement, 0.5);
        // "g" against gold "g" is right, "a" against "g" wrong: every offline judge agrees with
        // both labels.
        assert!(rows[1..].iter().all(|r| r.agreement == 1.0), "{rows:?}");
        let again = ExactMatchJudge
            .judge(&[labels[0].item(), labels[1].item()])
            .unwrap();
        let rows = calibrate_with_offline("offline:exact-match", &labels, &again).unwrap();
        assert_eq!(rows.len(), 3);
    }
}

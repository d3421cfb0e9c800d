//! A cell's answers judged: every question's answer and verdict as the record holds it, the
//! accuracy and the verdict counts; an NA cell's questions without either.

use anyhow::{Context, Result};
use engram_facts::Fact;
use engram_io::Progress;
use engram_judge::{Judge, JudgeItem};

use crate::record::{JudgeCounts, QuestionRecord};

/// A judged cell's questions, accuracy and verdict counts.
pub struct Judged {
    /// Each question with its answer and verdict.
    pub questions: Vec<QuestionRecord>,
    /// Right over asked (`None`: NA).
    pub accuracy: Option<f64>,
    /// Verdict counts (`None`: NA).
    pub counts: Option<JudgeCounts>,
}

/// The questions of an NA cell: none answered, none judged.
pub fn not_applicable(facts: &[Fact]) -> Judged {
    let questions = facts
        .iter()
        .map(|f| QuestionRecord {
            id: f.id.clone(),
            question: f.question.clone(),
            gold: f.answer.clone(),
            answer: None,
            correct: None,
            judge_raw: String::new(),
            judge_follow_up: None,
        })
        .collect();
    Judged {
        questions,
        accuracy: None,
        counts: None,
    }
}

/// Cell `id`'s `answers` to `facts`' questions judged by `judge` (its notes reported).
pub fn judge_answers(
    judge: &dyn Judge,
    id: &str,
    facts: &[Fact],
    answers: &[String],
    progress: &dyn Progress,
) -> Result<Judged> {
    let items: Vec<JudgeItem> = facts
        .iter()
        .zip(answers)
        .map(|(f, a)| JudgeItem {
            id: f.id.clone(),
            question: f.question.clone(),
            gold: f.answer.clone(),
            answer: Some(a.clone()),
            document: f.source.clone(),
        })
        .collect();
    let verdicts = judge
        .judge(&items)
        .with_context(|| format!("judging {id} with {}", judge.name()));
    for n in judge.notes() {
        progress.note(&n);
    }
    let verdicts = verdicts?;
    let correct = verdicts.iter().filter(|v| v.correct == Some(true)).count();
    let judged = verdicts.iter().filter(|v| v.correct.is_some()).count();
    let counts = JudgeCounts {
        correct,
        judged,
        judge: judge.name(),
    };
    let questions = items
        .into_iter()
        .zip(verdicts)
        .map(|(it, v)| QuestionRecord {
            id: it.id,
            question: it.question,
            gold: it.gold,
            answer: it.answer,
            correct: v.correct,
            judge_raw: v.raw,
            judge_follow_up: v.follow_up,
        })
        .collect();
    Ok(Judged {
        questions,
        accuracy: Some(correct as f64 / facts.len() as f64),
        counts: Some(counts),
    })
}

//! The checks a pair must pass (EnronQA §3.2), each asked of the LLM and the judge through a
//! [`Ctx`]:
//!
//! - **specific**: shown the question and its own document among the most similar ones of the
//!   corpus (BM25 over the question), its own at a place fixed by the pair, the generator picks
//!   its own — in each of `specific_trials` listings with its own at a different place (a
//!   small model that always names the first document passes one listing in ten by luck);
//! - **objective**: independent answers from the document (sampled, each its own seed) all match
//!   the gold answer under the judge;
//! - **grounded**: the generator, without the document, does NOT answer correctly — and neither
//!   does the model the table will train, when one is given (beyond the paper: a fact that model
//!   already knows measures nothing);
//! - **quality**: a rubric passes the pair.
//!
//! Checks run in that order and stop at the first failure.

use engram_judge::JudgeItem;

use crate::context::{CallError, Ctx, Doc};
use crate::llm::CachedLlm;
use crate::record::{CheckOutcome, check};
use crate::reply::{parse_choice, parse_grade};

/// A quoted, shortened text for details.
pub fn quote(text: &str) -> String {
    const MAX: usize = 160;
    let t: String = text.chars().take(MAX).collect();
    if text.chars().count() > MAX {
        format!("\"{t}…\"")
    } else {
        format!("\"{t}\"")
    }
}

fn outcome(check: &str, passed: bool, detail: String) -> CheckOutcome {
    CheckOutcome {
        check: check.to_string(),
        passed,
        detail,
    }
}

/// Runs every check on a pair, in order, up to the first failure.
pub fn run_checks(
    ctx: &Ctx,
    doc: &Doc,
    question: &str,
    answer: &str,
) -> Result<Vec<CheckOutcome>, CallError> {
    type Check = fn(&Ctx, &Doc, &str, &str) -> Result<CheckOutcome, CallError>;
    let mut checks: Vec<Check> = vec![specific, objective, grounded];
    if ctx.target.is_some() {
        checks.push(grounded_target);
    }
    checks.push(quality);
    let mut out = Vec::new();
    for c in checks {
        let o = c(ctx, doc, question, answer)?;
        let failed = !o.passed;
        out.push(o);
        if failed {
            break;
        }
    }
    Ok(out)
}

fn specific(ctx: &Ctx, doc: &Doc, question: &str, _: &str) -> Result<CheckOutcome, CallError> {
    let trials = ctx.cfg.specific_trials;
    let mut picks = Vec::with_capacity(trials);
    let mut n = 0;
    for trial in 0..trials {
        let (order, own) = ctx.specific_candidates(doc, question, trial);
        n = order.len();
        let listing: String = order
            .iter()
            .enumerate()
            .map(|(i, &d)| format!("[{}] {}\n\n", i + 1, ctx.excerpt(d)))
            .collect();
        let ids: Vec<&str> = order.iter().map(|&d| ctx.docs[d].id.as_str()).collect();
        let text = ctx.ask(
            &ctx.prompts.specific,
            &[("question", question), ("documents", listing.trim_end())],
            0.0,
            0,
            &ids,
        )?;
        let of = if trials > 1 {
            format!(" (placement {} of {trials})", trial + 1)
        } else {
            String::new()
        };
        match parse_choice(&text) {
            Some(k) if k == own + 1 => picks.push(format!("[{k}]")),
            Some(k) if (1..=n).contains(&k) => {
                return Ok(outcome(
                    check::SPECIFIC,
                    false,
                    format!(
                        "picked document [{k}] ({}) instead of its own, [{}] of {n}{of}: the question does not single out its document",
                        ctx.docs[order[k - 1]].id,
                        own + 1
                    ),
                ));
            }
            _ => {
                return Ok(outcome(
                    check::SPECIFIC,
                    false,
                    format!(
                        "no document number 1 … {n} in the reply {}{of}",
                        quote(&text)
                    ),
                ));
            }
        }
    }
    Ok(outcome(
        check::SPECIFIC,
        true,
        format!("picked its own document, {} of {n}", picks.join(", ")),
    ))
}

/// Judges `answers` against `gold`: `Some(verdict)` each, `None` where the judge gave none.
pub fn judge_answers(
    ctx: &Ctx,
    question: &str,
    gold: &str,
    answers: &[String],
) -> Result<Vec<Option<bool>>, CallError> {
    let items: Vec<JudgeItem> = answers
        .iter()
        .enumerate()
        .map(|(i, a)| JudgeItem {
            id: i.to_string(),
            question: question.to_string(),
            gold: gold.to_string(),
            answer: Some(a.clone()),
            document: None,
        })
        .collect();
    ctx.judge(&items)
}

/// The answer to `question` from the pair's document.
pub fn answer_from_document(
    ctx: &Ctx,
    doc: &Doc,
    question: &str,
    temperature: f64,
    seed: u64,
) -> Result<String, CallError> {
    let text = ctx.ask(
        &ctx.prompts.answer,
        &[("document", &doc.text), ("question", question)],
        temperature,
        seed,
        &[&doc.id],
    )?;
    Ok(text.trim().to_string())
}

fn objective(ctx: &Ctx, doc: &Doc, question: &str, gold: &str) -> Result<CheckOutcome, CallError> {
    let answers = (0..ctx.cfg.objective_answers)
        .map(|i| {
            let seed = ctx.seed(&[&doc.id, question, "objective", &i.to_string()]);
            answer_from_document(ctx, doc, question, ctx.cfg.temperature, seed)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let verdicts = judge_answers(ctx, question, gold, &answers)?;
    let bad = verdicts.iter().position(|v| *v != Some(true));
    Ok(match bad {
        None => outcome(
            check::OBJECTIVE,
            true,
            format!(
                "{} independent answers match the gold answer",
                answers.len()
            ),
        ),
        Some(i) => outcome(
            check::OBJECTIVE,
            false,
            format!(
                "independent answer {} of {}, {}, {} the gold answer {}: the question has no single answer in the document",
                i + 1,
                answers.len(),
                quote(&answers[i]),
                if verdicts[i].is_none() {
                    "got no verdict against"
                } else {
                    "does not match"
                },
                quote(gold)
            ),
        ),
    })
}

/// Asks `question` closed-book of `llm` (greedy, no document) and judges the answer.
fn closed_book(
    ctx: &Ctx,
    llm: &CachedLlm,
    question: &str,
    gold: &str,
) -> Result<(String, Option<bool>), CallError> {
    let prompt = &ctx.prompts.closed_book;
    let text = ctx.ask_of(llm, prompt, &[("question", question)], 0.0, 0, &[])?;
    let text = text.trim().to_string();
    let v = judge_answers(ctx, question, gold, std::slice::from_ref(&text))?;
    Ok((text, v[0]))
}

fn grounded_outcome(name: &str, who: &str, answer: &str, verdict: Option<bool>) -> CheckOutcome {
    match verdict {
        Some(false) => outcome(
            name,
            true,
            format!(
                "{who}, without the document, answered {}: judged incorrect",
                quote(answer)
            ),
        ),
        Some(true) => outcome(
            name,
            false,
            format!(
                "{who} answered it correctly without the document ({}): the fact is not private to it",
                quote(answer)
            ),
        ),
        None => outcome(
            name,
            false,
            format!(
                "the judge gave no verdict on {who}'s answer without the document ({})",
                quote(answer)
            ),
        ),
    }
}

fn grounded(ctx: &Ctx, _: &Doc, question: &str, gold: &str) -> Result<CheckOutcome, CallError> {
    let (answer, v) = closed_book(ctx, ctx.generator, question, gold)?;
    Ok(grounded_outcome(
        check::GROUNDED,
        "the generator",
        &answer,
        v,
    ))
}

fn grounded_target(
    ctx: &Ctx,
    _: &Doc,
    question: &str,
    gold: &str,
) -> Result<CheckOutcome, CallError> {
    let target = ctx.target.expect("run only with a target model");
    let (answer, v) = closed_book(ctx, target, question, gold)?;
    Ok(grounded_outcome(
        check::GROUNDED_TARGET,
        "the model to train",
        &answer,
        v,
    ))
}

fn quality(ctx: &Ctx, doc: &Doc, question: &str, answer: &str) -> Result<CheckOutcome, CallError> {
    let text = ctx.ask(
        &ctx.prompts.quality,
        &[
            ("document", &doc.text),
            ("question", question),
            ("answer", answer),
        ],
        0.0,
        0,
        &[&doc.id],
    )?;
    Ok(match parse_grade(&text) {
        Some((true, reason)) => outcome(check::QUALITY, true, reason),
        Some((false, reason)) => outcome(
            check::QUALITY,
            false,
            format!("the rubric failed it: {reason}"),
        ),
        None => outcome(
            check::QUALITY,
            false,
            format!("no pass/fail grade in the reply {}", quote(&text)),
        ),
    })
}

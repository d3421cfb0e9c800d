//! The two stages of a run, each over its items in parallel (`concurrency` at once, each item's
//! calls in sequence) with its own progress bar, results kept in corpus order:
//!
//! 1. **pairs**: for each document, `questions_per_document` times, the generator writes a pair
//!    (seeing the questions already kept for that document); the pair goes through the checks
//!    ([`crate::checks`]); a failing pair is rewritten with the failure as feedback, up to
//!    `refine_rounds` times (a reply without a usable pair is asked anew), then dropped with the
//!    last failure as its reason;
//! 2. **rephrasing**: each kept question is rephrased (each try its own seed, earlier rejected
//!    rephrasings shown), the rephrasing answered from the document, and the pair kept once the
//!    judge matches that answer with the gold answer, up to `rephrase_tries` times.
//!
//! Finally a question equal (case and spacing aside) to one kept before it is dropped as a
//! duplicate. Calls that fail after their retries count towards a breaker: `breaker_after` in
//! a row stop the run; a stop request ends it between items. Either way the items finished are
//! returned, and every call made is in the cache.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use engram_io::{Progress, Stop};

use crate::checks::{answer_from_document, judge_answers, quote, run_checks};
use crate::context::{CallError, Ctx, Doc};
use crate::error::QaError;
use crate::record::{PairRecord, RephraseTry, Round, Status, reason};
use crate::reply::{parse_pair, parse_rephrase};

/// What a run produced: a record per pair slot of every finished document (in corpus order),
/// the documents left unfinished, and the error that ended the run early.
#[derive(Debug)]
pub struct Produced {
    /// Records, document by document.
    pub records: Vec<PairRecord>,
    /// Documents not finished (their calls so far are cached).
    pub unfinished: usize,
    /// Why the run ended early.
    pub error: Option<QaError>,
}

/// Runs both stages over the context's documents.
pub fn produce(ctx: &Ctx, stop: &Stop, progress: &dyn Progress) -> Produced {
    let n = ctx.generated_from();
    let (pairs, mut error) = parallel(
        ctx,
        n,
        stop,
        progress,
        "QA pairs: generate and check",
        |i| format!("document {}", ctx.docs[i].id),
        |i| pairs_of(ctx, &ctx.docs[i]),
    );
    // The kept pairs of the finished documents, to rephrase.
    let todo: Vec<(usize, usize)> = pairs
        .iter()
        .enumerate()
        .filter_map(|(d, p)| p.as_ref().map(|p| (d, p)))
        .flat_map(|(d, p)| {
            p.iter()
                .enumerate()
                .filter(|(_, r)| r.kept())
                .map(move |(k, _)| (d, k))
        })
        .collect();
    let (rephrased, rephrase_error) = if error.is_none() {
        parallel(
            ctx,
            todo.len(),
            stop,
            progress,
            "QA pairs: rephrase and verify",
            |t| {
                let (d, k) = todo[t];
                format!("the rephrasing of pair {k} of document {}", ctx.docs[d].id)
            },
            |t| {
                let (d, k) = todo[t];
                let rec = pairs[d].as_ref().expect("finished")[k].clone();
                rephrase(ctx, &ctx.docs[d], rec)
            },
        )
    } else {
        (vec![None; todo.len()], None)
    };
    error = error.or(rephrase_error);
    let mut pairs = pairs;
    let mut unfinished_doc = vec![false; n];
    for (&(d, k), r) in todo.iter().zip(rephrased) {
        match r {
            Some(r) => pairs[d].as_mut().expect("finished")[k] = r,
            None => unfinished_doc[d] = true,
        }
    }
    let mut records = Vec::new();
    let mut unfinished = 0;
    for (d, p) in pairs.into_iter().enumerate() {
        match p {
            Some(p) if !unfinished_doc[d] => records.extend(p),
            _ => unfinished += 1,
        }
    }
    drop_duplicates(&mut records);
    Produced {
        records,
        unfinished,
        error,
    }
}

/// Runs `f` over `0..n`, `concurrency` at once: each result in its place (`None` for items not
/// finished), and the error that stopped the run early or left items unfinished (`name`s the
/// item in it).
fn parallel<T: Send>(
    ctx: &Ctx,
    n: usize,
    stop: &Stop,
    progress: &dyn Progress,
    label: &str,
    name: impl Fn(usize) -> String,
    f: impl Fn(usize) -> Result<T, CallError> + Sync,
) -> (Vec<Option<T>>, Option<QaError>) {
    progress.begin(label, Some(n as u64));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failures = AtomicUsize::new(0);
    let halt = AtomicBool::new(false);
    let error: Mutex<Option<QaError>> = Mutex::new(None);
    // Items whose calls failed after their retries: (item, endpoint, message).
    let failed: Mutex<Vec<(usize, String, String)>> = Mutex::new(Vec::new());
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    let set_error = |e: QaError| {
        let mut slot = error.lock().expect("error lock");
        if slot.is_none() {
            *slot = Some(e);
        }
        halt.store(true, Ordering::SeqCst);
    };
    std::thread::scope(|s| {
        for _ in 0..ctx.cfg.concurrency.min(n) {
            s.spawn(|| {
                loop {
                    if halt.load(Ordering::SeqCst) {
                        return;
                    }
                    if let Some(signal) = stop.requested() {
                        set_error(QaError::Stopped {
                            signal,
                            done: done.load(Ordering::SeqCst),
                            total: n,
                        });
                        return;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= n {
                        return;
                    }
                    match f(i) {
                        Ok(r) => {
                            failures.store(0, Ordering::SeqCst);
                            results.lock().expect("results lock")[i] = Some(r);
                            done.fetch_add(1, Ordering::SeqCst);
                            progress.advance(1);
                            let c = ctx.generator.stats.counts();
                            progress.status(&format!("{} calls, {} cached", c.asked, c.cached));
                        }
                        Err(CallError::Fatal(e)) => set_error(e),
                        Err(CallError::Call { endpoint, message }) => {
                            failed.lock().expect("failed lock").push((
                                i,
                                endpoint.clone(),
                                message.clone(),
                            ));
                            let k = failures.fetch_add(1, Ordering::SeqCst) + 1;
                            if k >= ctx.cfg.breaker_after {
                                set_error(QaError::Unreachable {
                                    endpoint,
                                    failures: k,
                                    last: message,
                                    done: done.load(Ordering::SeqCst),
                                    total: n,
                                });
                            }
                        }
                    }
                }
            });
        }
    });
    progress.end();
    let results = results.into_inner().expect("results lock");
    let mut error = error.into_inner().expect("error lock");
    let mut failed = failed.into_inner().expect("failed lock");
    failed.sort();
    if error.is_none() && results.iter().any(Option::is_none) {
        // Items whose calls failed, fewer in a row than the breaker's limit: the first of them
        // named, with its error (one that repeats on every rerun needs a setting changed).
        let (i, endpoint, message) = failed.first().cloned().unwrap_or_else(|| {
            let i = results.iter().position(Option::is_none).expect("one is");
            (
                i,
                ctx.generator.llm().endpoint(),
                "not finished".to_string(),
            )
        });
        error = Some(QaError::CallsFailed {
            failed: failed.len().max(1),
            total: n,
            item: name(i),
            endpoint,
            message,
        });
    }
    (results, error)
}

/// Every pair slot of one document.
fn pairs_of(ctx: &Ctx, doc: &Doc) -> Result<Vec<PairRecord>, CallError> {
    let mut previous: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for q in 0..ctx.cfg.questions_per_document {
        let rec = one_pair(ctx, doc, q, &previous)?;
        if let (true, Some(question)) = (rec.kept(), &rec.question) {
            previous.push(question.clone());
        }
        out.push(rec);
    }
    Ok(out)
}

/// One pair slot: generation, checks and refinement.
fn one_pair(ctx: &Ctx, doc: &Doc, q: usize, previous: &[String]) -> Result<PairRecord, CallError> {
    let listed = bullets(previous);
    let mut rec = PairRecord {
        id: format!("{}/q{q}", doc.id),
        document: doc.id.clone(),
        status: Status::Dropped,
        reason: None,
        question: None,
        answer: None,
        rephrased_question: None,
        truncated: doc.truncated,
        rounds: Vec::new(),
        rephrasings: Vec::new(),
    };
    // The pair to refine and the feedback, after a round whose pair failed a check.
    let mut to_refine: Option<(String, String, String)> = None;
    for round in 0..=ctx.cfg.refine_rounds {
        let qs = q.to_string();
        let rs = round.to_string();
        let text = match &to_refine {
            None => {
                let seed = ctx.seed(&[&doc.id, &qs, "generate", &rs]);
                ctx.ask(
                    &ctx.prompts.generate,
                    &[("document", &doc.text), ("previous", &listed)],
                    ctx.cfg.temperature,
                    seed,
                    &[&doc.id],
                )?
            }
            Some((question, answer, feedback)) => {
                let seed = ctx.seed(&[&doc.id, &qs, "refine", &rs]);
                ctx.ask(
                    &ctx.prompts.refine,
                    &[
                        ("document", &doc.text),
                        ("question", question),
                        ("answer", answer),
                        ("feedback", feedback),
                    ],
                    ctx.cfg.temperature,
                    seed,
                    &[&doc.id],
                )?
            }
        };
        let (question, answer) = match parse_pair(&text) {
            Ok(p) => p,
            Err(why) => {
                rec.rounds.push(Round {
                    question: None,
                    answer: None,
                    malformed: Some(format!("{why}: {}", quote(&text))),
                    checks: Vec::new(),
                });
                // Nothing to refine: the next round asks anew.
                to_refine = None;
                continue;
            }
        };
        let checks = run_checks(ctx, doc, &question, &answer)?;
        let round = Round {
            question: Some(question.clone()),
            answer: Some(answer.clone()),
            malformed: None,
            checks,
        };
        let failed = round.failed().map(|c| c.detail.clone());
        rec.rounds.push(round);
        match failed {
            None => {
                rec.status = Status::Kept;
                rec.question = Some(question);
                rec.answer = Some(answer);
                return Ok(rec);
            }
            Some(feedback) => to_refine = Some((question, answer, feedback)),
        }
    }
    let last = rec.rounds.last().expect("at least one round");
    let why = match last.failed() {
        Some(c) => c.check.clone(),
        None => reason::MALFORMED.to_string(),
    };
    rec.drop_for(&why);
    Ok(rec)
}

/// Earlier questions as a prompt lists them: one `- ` line each, or `(none yet)`.
fn bullets(items: &[String]) -> String {
    if items.is_empty() {
        return "(none yet)".into();
    }
    items
        .iter()
        .map(|i| format!("- {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Case, punctuation and spacing aside.
fn normalized(q: &str) -> String {
    q.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Rephrases a kept pair's question until a rephrasing is verified, or drops the pair.
fn rephrase(ctx: &Ctx, doc: &Doc, mut rec: PairRecord) -> Result<PairRecord, CallError> {
    let question = rec.question.clone().expect("a kept pair has a question");
    let gold = rec.answer.clone().expect("a kept pair has an answer");
    let mut rejected: Vec<String> = Vec::new();
    for t in 0..ctx.cfg.rephrase_tries {
        let listed = bullets(&rejected);
        let seed = ctx.seed(&[&doc.id, &question, "rephrase", &t.to_string()]);
        let text = ctx.ask(
            &ctx.prompts.rephrase,
            &[("question", &question), ("previous", &listed)],
            ctx.cfg.temperature,
            seed,
            &[],
        )?;
        let Some(r) = parse_rephrase(&text) else {
            rec.rephrasings.push(RephraseTry {
                question: None,
                answer: None,
                verified: false,
                detail: Some(format!("no question in the reply {}", quote(&text))),
            });
            continue;
        };
        if normalized(&r) == normalized(&question) || rejected.contains(&r) {
            rec.rephrasings.push(RephraseTry {
                question: Some(r),
                answer: None,
                verified: false,
                detail: Some("the same as the original question or an earlier try".into()),
            });
            continue;
        }
        let answer = answer_from_document(ctx, doc, &r, 0.0, 0)?;
        let v = judge_answers(ctx, &r, &gold, std::slice::from_ref(&answer))?;
        let verified = v[0] == Some(true);
        rec.rephrasings.push(RephraseTry {
            question: Some(r.clone()),
            answer: Some(answer),
            verified,
            detail: (!verified).then(|| match v[0] {
                None => "the judge gave no verdict".to_string(),
                _ => "the answer to it does not match the gold answer".to_string(),
            }),
        });
        if verified {
            rec.rephrased_question = Some(r);
            return Ok(rec);
        }
        rejected.push(r);
    }
    rec.drop_for(reason::REPHRASE_UNVERIFIED);
    Ok(rec)
}

/// Drops each kept pair whose question equals (normalized) one kept before it.
fn drop_duplicates(records: &mut [PairRecord]) {
    let mut seen = std::collections::HashSet::new();
    for r in records.iter_mut().filter(|r| r.kept()) {
        let q = normalized(r.question.as_deref().unwrap_or(""));
        if !seen.insert(q) {
            r.drop_for(reason::DUPLICATE);
        }
    }
}

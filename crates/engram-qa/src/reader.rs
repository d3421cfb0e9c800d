//! Reader accuracy over retrieved documents (EnronQA Table 4's shape): each question answered
//! by an LLM under several conditions — closed-book (no document), a retriever's top-k
//! documents, the oracle (its own source document) — and each answer judged against the gold
//! answer. The retrieval benchmark (`engram rag-bench --reader`) gives it the rankings.
//!
//! Prompts are files: `reader.txt` (`{documents}`, `{question}`) for the conditions with
//! documents, and QA generation's `closed_book.txt` (`{question}`) for closed-book. Every call
//! goes through the persistent cache of [`CachedLlm`] (greedy, temperature 0): a rerun asks
//! nothing again, and an interrupted run goes on where it stopped.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use engram_io::{Progress, Stop};
use engram_judge::JudgeCache;
use engram_judge::{Judge, JudgeItem};
use serde::{Deserialize, Serialize};

use crate::error::{QaError, Result};
use crate::llm::{CachedLlm, CallCounts, ChatRequest, Llm};
use crate::prompts::{CLOSED_BOOK, Prompt, Stage};

/// Answers a question from numbered documents.
pub const READER: Stage = Stage {
    name: "reader",
    file: "reader.txt",
    required: &["documents", "question"],
    optional: &[],
};

/// Default most tokens of an answer.
pub const DEFAULT_MAX_TOKENS: usize = 64;
/// Default characters of each document in the prompt.
pub const DEFAULT_DOCUMENT_CHARS: usize = 4000;
/// Default answers asked at once.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// A question with its gold answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ReaderQuestion {
    /// Its id.
    pub id: String,
    /// The question.
    pub question: String,
    /// The gold answer.
    pub answer: String,
}

/// One way of answering: its name and, per question, the documents shown (indices into the
/// documents, best first); `None`: closed-book.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// `closed-book`, `bm25@5`, `oracle`, ….
    pub name: String,
    /// Per question, the documents shown.
    pub documents: Option<Vec<Vec<usize>>>,
}

/// The prompts of the reader.
#[derive(Debug, Clone, PartialEq)]
pub struct ReaderPrompts {
    /// With documents.
    pub reader: Prompt,
    /// Without.
    pub closed_book: Prompt,
}

impl ReaderPrompts {
    /// Loads `reader.txt` and `closed_book.txt` from `dir`.
    pub fn load(dir: &Path) -> Result<Self> {
        Ok(Self {
            reader: Prompt::load(dir, READER)?,
            closed_book: Prompt::load(dir, CLOSED_BOOK)?,
        })
    }
}

/// Settings of a reader run.
#[derive(Debug, Clone, PartialEq)]
pub struct ReaderSettings {
    /// Most tokens of an answer.
    pub max_tokens: usize,
    /// Characters of each document shown (longer ones are cut).
    pub document_chars: usize,
    /// Answers asked at once.
    pub concurrency: usize,
}

impl Default for ReaderSettings {
    fn default() -> Self {
        Self {
            max_tokens: DEFAULT_MAX_TOKENS,
            document_chars: DEFAULT_DOCUMENT_CHARS,
            concurrency: DEFAULT_CONCURRENCY,
        }
    }
}

/// One condition's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReaderScore {
    /// The condition.
    pub condition: String,
    /// Answers judged correct.
    pub correct: usize,
    /// Answers the judge gave a verdict on.
    pub judged: usize,
    /// Questions.
    pub questions: usize,
    /// `correct / questions` (an answer without a verdict counts as wrong).
    pub accuracy: f64,
}

/// The documents shown to the reader, numbered, each cut to `chars` characters.
fn listing(docs: &[String], shown: &[usize], chars: usize) -> String {
    shown
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            let text: String = docs[d].chars().take(chars).collect();
            format!("[{}] {}", i + 1, text.trim())
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Answers every question under every condition with `llm` (its calls cached in `cache`) and
/// judges the answers with `judge`; also returns the calls asked and answered from the cache. Stops between answers when `stop` is requested (every
/// answer so far is cached).
#[allow(clippy::too_many_arguments)]
pub fn read_and_judge(
    docs: &[String],
    questions: &[ReaderQuestion],
    conditions: &[Condition],
    prompts: &ReaderPrompts,
    settings: &ReaderSettings,
    llm: &dyn Llm,
    cache: &JudgeCache,
    judge: &dyn Judge,
    stop: &Stop,
    progress: &dyn Progress,
) -> Result<(Vec<ReaderScore>, CallCounts)> {
    let cached = CachedLlm::new(llm, cache);
    let mut scores = Vec::with_capacity(conditions.len());
    for c in conditions {
        let answers = answer_all(
            docs, questions, c, prompts, settings, &cached, stop, progress,
        )?;
        let items: Vec<JudgeItem> = questions
            .iter()
            .zip(answers)
            .map(|(q, a)| JudgeItem {
                id: q.id.clone(),
                question: q.question.clone(),
                gold: q.answer.clone(),
                answer: Some(a),
                document: None,
            })
            .collect();
        progress.begin(&format!("judging ({})", c.name), None);
        let verdicts = judge.judge(&items)?;
        progress.end();
        let correct = verdicts.iter().filter(|v| v.correct == Some(true)).count();
        scores.push(ReaderScore {
            condition: c.name.clone(),
            correct,
            judged: verdicts.iter().filter(|v| v.correct.is_some()).count(),
            questions: questions.len(),
            accuracy: correct as f64 / questions.len().max(1) as f64,
        });
    }
    Ok((scores, cached.stats.counts()))
}

/// Every question's answer under condition `c`, `settings.concurrency` at once.
#[allow(clippy::too_many_arguments)]
fn answer_all(
    docs: &[String],
    questions: &[ReaderQuestion],
    c: &Condition,
    prompts: &ReaderPrompts,
    settings: &ReaderSettings,
    llm: &CachedLlm,
    stop: &Stop,
    progress: &dyn Progress,
) -> Result<Vec<String>> {
    let n = questions.len();
    progress.begin(&format!("reading ({})", c.name), Some(n as u64));
    let next = AtomicUsize::new(0);
    let answers: Mutex<Vec<Option<String>>> = Mutex::new(vec![None; n]);
    let error: Mutex<Option<QaError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..settings.concurrency.clamp(1, n.max(1)) {
            s.spawn(|| {
                loop {
                    if error.lock().expect("lock").is_some() {
                        return;
                    }
                    if let Some(signal) = stop.requested() {
                        let done = answers.lock().expect("lock").iter().flatten().count();
                        error.lock().expect("lock").get_or_insert(QaError::Stopped {
                            signal,
                            done,
                            total: n,
                        });
                        return;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= n {
                        return;
                    }
                    let q = &questions[i];
                    let messages = match &c.documents {
                        None => prompts.closed_book.messages(&[("question", &q.question)]),
                        Some(per_question) => {
                            let shown = listing(docs, &per_question[i], settings.document_chars);
                            prompts
                                .reader
                                .messages(&[("documents", &shown), ("question", &q.question)])
                        }
                    };
                    let req = ChatRequest {
                        messages,
                        temperature: 0.0,
                        seed: 0,
                        max_tokens: settings.max_tokens,
                    };
                    match llm.call(&req) {
                        Ok((done, _)) => {
                            answers.lock().expect("lock")[i] = Some(done.text.trim().to_string());
                            progress.advance(1);
                        }
                        Err(message) => {
                            error
                                .lock()
                                .expect("lock")
                                .get_or_insert(QaError::Unreachable {
                                    endpoint: llm.llm().endpoint(),
                                    failures: 1,
                                    last: message,
                                    done: answers.lock().expect("lock").iter().flatten().count(),
                                    total: n,
                                });
                        }
                    }
                }
            });
        }
    });
    progress.end();
    if let Some(e) = error.into_inner().expect("lock") {
        return Err(e);
    }
    Ok(answers
        .into_inner()
        .expect("lock")
        .into_iter()
        .map(|a| a.expect("every question answered"))
        .collect())
}

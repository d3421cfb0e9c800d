//! `engram rag-bench --reader …`: reader accuracy over the retrieved documents (EnronQA Table
//! 4's shape) — each question answered closed-book, from each retriever's top-k documents and
//! from its own source document (the oracle), by an endpoint or a model engram runs itself, and
//! judged; calls cached under [`ReaderBench::cache_dir`].

use std::path::PathBuf;

use anyhow::{Result, bail};
use engram_baselines::rag::benchmark::{BenchDoc, BenchQuery, RetrieverScores};
use engram_io::{Progress, Stop};
use engram_judge::{Judge, JudgeCache};
use engram_qa::Llm;
use engram_qa::{
    Condition, ReaderPrompts, ReaderQuestion, ReaderScore, ReaderSettings, read_and_judge,
};

use crate::Out;

/// The reader side of the benchmark (EnronQA Table 4's shape): who reads and who judges.
pub struct ReaderBench {
    /// The reader: an endpoint or a model engram runs itself.
    pub llm: Box<dyn Llm>,
    /// The judge of its answers against the facts' answers.
    pub judge: Box<dyn Judge>,
    /// Documents shown to the reader, per retriever (each value a condition).
    pub k: Vec<usize>,
    /// Most tokens of a reader's answer.
    pub max_tokens: usize,
    /// The reader's call cache (`calls/` in it; the judge's own cache beside it).
    pub cache_dir: PathBuf,
    /// The prompt directory (reader.txt, closed_book.txt).
    pub prompts: PathBuf,
}

/// Checks each of `reader_k` against the deepest ranking cut-off `deepest`.
pub fn check_reader_k(reader_k: &[usize], deepest: usize) -> Result<()> {
    for &k in reader_k {
        if k == 0 || k > deepest {
            bail!("--reader-k {k}: must be between 1 and the deepest --k ({deepest})");
        }
    }
    Ok(())
}

/// The conditions: closed-book, each retriever at each `--reader-k`, the oracle.
fn conditions(
    reader_k: &[usize],
    deepest: usize,
    scores: &[RetrieverScores],
    queries: &[BenchQuery],
) -> Result<Vec<Condition>> {
    check_reader_k(reader_k, deepest)?;
    let mut out = vec![Condition {
        name: "closed-book".into(),
        documents: None,
    }];
    for s in scores {
        for &k in reader_k {
            out.push(Condition {
                name: format!("{}@{k}", s.retriever),
                documents: Some(
                    s.rankings
                        .iter()
                        .map(|r| r.iter().copied().take(k).collect())
                        .collect(),
                ),
            });
        }
    }
    out.push(Condition {
        name: "oracle".into(),
        documents: Some(queries.iter().map(|q| vec![q.relevant]).collect()),
    });
    Ok(out)
}

impl ReaderBench {
    /// Answers and judges every condition (rankings cut at most at `deepest`); the accuracy
    /// per condition, and the judge's notes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        &self,
        deepest: usize,
        docs: &[BenchDoc],
        queries: &[BenchQuery],
        answers: &[String],
        scores: &[RetrieverScores],
        progress: &dyn Progress,
        stop: &Stop,
        out: Out,
    ) -> Result<(Vec<ReaderScore>, Vec<String>)> {
        let conditions = conditions(&self.k, deepest, scores, queries)?;
        let prompts = ReaderPrompts::load(&self.prompts)?;
        let cache = JudgeCache::open_shared(&self.cache_dir.join("calls"))?;
        let (llm, judge, cache_dir) = (self.llm.as_ref(), self.judge.as_ref(), &self.cache_dir);
        let texts: Vec<String> = docs.iter().map(BenchDoc::indexed).collect();
        let questions: Vec<ReaderQuestion> = queries
            .iter()
            .zip(answers)
            .map(|(q, answer)| ReaderQuestion {
                id: q.id.clone(),
                question: q.text.clone(),
                answer: answer.clone(),
            })
            .collect();
        let settings = ReaderSettings {
            max_tokens: self.max_tokens,
            ..ReaderSettings::default()
        };
        let (scores, calls) = read_and_judge(
            &texts,
            &questions,
            &conditions,
            &prompts,
            &settings,
            llm,
            &cache,
            judge,
            stop,
            progress,
        )?;
        say!(
            out,
            "reader {} on {} questions ({} calls asked, {} from the cache in {}), judged by {}:",
            llm.model(),
            questions.len(),
            calls.asked,
            calls.cached,
            cache_dir.display(),
            judge.name()
        );
        say!(
            out,
            "{:<34} {:>9} {:>9}",
            "condition",
            "accuracy",
            "correct"
        );
        for s in &scores {
            say!(
                out,
                "{:<34} {:>9.3} {:>5}/{:<3}",
                s.condition,
                s.accuracy,
                s.correct,
                s.questions
            );
        }
        Ok((scores, judge.notes()))
    }
}

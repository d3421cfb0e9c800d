//! What every stage of a run shares ([`Ctx`]): the documents (cut to the prompt length), the
//! settings and prompts, the cached LLMs and the judge, the BM25 index of the corpus for the
//! specificity check, per-call seeds, and the log of which documents' text was sent where.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use engram_corpus::Document;
use engram_judge::{Judge, JudgeError, JudgeItem};
use engram_retrieval::Bm25Index;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::QaConfig;
use crate::error::QaError;
use crate::llm::{CachedLlm, ChatRequest};
use crate::prompts::{Prompt, QaPrompts};

/// A document as the prompts show it.
#[derive(Debug, Clone, PartialEq)]
pub struct Doc {
    /// Its place in the corpus (and in [`Ctx::docs`]).
    pub index: usize,
    /// The corpus id.
    pub id: String,
    /// Its text, cut to `max_document_chars`.
    pub text: String,
    /// Whether it was cut.
    pub truncated: bool,
}

/// Why a call got no answer.
#[derive(Debug)]
pub enum CallError {
    /// An endpoint failed after its retries (counts towards the breaker).
    Call {
        /// The endpoint.
        endpoint: String,
        /// What went wrong.
        message: String,
    },
    /// Nothing more can be done in this run.
    Fatal(QaError),
}

/// One line of the send log: a document's text sent to an endpoint in a run, by stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sent {
    /// The endpoint (a URL, or `local:MODEL`).
    pub endpoint: String,
    /// The document's id.
    pub document: String,
    /// The stages whose prompts held its text.
    pub stages: Vec<String>,
    /// Calls that held it.
    pub calls: usize,
}

/// Stages and calls that held a document's text, by (endpoint, document).
type SendLog = BTreeMap<(String, String), (BTreeSet<String>, usize)>;

/// The shared state of a run.
pub struct Ctx<'a> {
    /// The documents, in corpus order.
    pub docs: Vec<Doc>,
    /// The settings.
    pub cfg: &'a QaConfig,
    /// The prompts.
    pub prompts: &'a QaPrompts,
    /// The generator (and checker) behind its cache.
    pub generator: &'a CachedLlm<'a>,
    /// The model the table will train, for the second groundedness check.
    pub target: Option<&'a CachedLlm<'a>>,
    judge: &'a dyn Judge,
    index: Bm25Index,
    sent: Mutex<SendLog>,
    /// Answers judged.
    pub judged: AtomicUsize,
    /// Of them, served from the judge's cache.
    pub judged_cached: AtomicUsize,
}

/// The first `max` characters of `text`, and whether it was cut.
pub fn cut(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((i, _)) => (text[..i].to_string(), true),
        None => (text.to_string(), false),
    }
}

impl<'a> Ctx<'a> {
    /// The context of a run over `documents`.
    pub fn new(
        documents: &[Document],
        cfg: &'a QaConfig,
        prompts: &'a QaPrompts,
        generator: &'a CachedLlm<'a>,
        target: Option<&'a CachedLlm<'a>>,
        judge: &'a dyn Judge,
    ) -> Result<Self, QaError> {
        let docs: Vec<Doc> = documents
            .iter()
            .enumerate()
            .map(|(index, d)| {
                let (text, truncated) = cut(&d.text, cfg.max_document_chars);
                Doc {
                    index,
                    id: d.id.clone(),
                    text,
                    truncated,
                }
            })
            .collect();
        let texts: Vec<String> = docs.iter().map(|d| d.text.clone()).collect();
        let index = Bm25Index::from_texts(&texts).map_err(|e| QaError::Setting {
            key: "corpus".into(),
            problem: e.to_string(),
        })?;
        Ok(Self {
            docs,
            cfg,
            prompts,
            generator,
            target,
            judge,
            index,
            sent: Mutex::new(BTreeMap::new()),
            judged: AtomicUsize::new(0),
            judged_cached: AtomicUsize::new(0),
        })
    }

    /// How many documents pairs are generated from: the first `max_documents`, or all.
    pub fn generated_from(&self) -> usize {
        self.cfg.documents_used(self.docs.len())
    }

    /// A seed for one sampled call, derived from the run's seed and what the call is for, so a
    /// rerun asks the same requests (kept below 2³¹: some servers read it as an `int`).
    pub fn seed(&self, parts: &[&str]) -> u64 {
        let mut h = Sha256::new();
        h.update(self.cfg.seed.to_le_bytes());
        for p in parts {
            h.update(p.as_bytes());
            h.update([0]);
        }
        let d = h.finalize();
        u64::from_le_bytes(d[..8].try_into().expect("8 bytes")) & 0x7fff_ffff
    }

    /// Asks the generator `prompt` with `values`; `documents` are the ids whose text the
    /// prompt holds (for the send log).
    pub fn ask(
        &self,
        prompt: &Prompt,
        values: &[(&str, &str)],
        temperature: f64,
        seed: u64,
        documents: &[&str],
    ) -> Result<String, CallError> {
        self.ask_of(self.generator, prompt, values, temperature, seed, documents)
    }

    /// Asks `llm` (the generator or the target model) as [`Ctx::ask`] asks the generator.
    pub fn ask_of(
        &self,
        llm: &CachedLlm,
        prompt: &Prompt,
        values: &[(&str, &str)],
        temperature: f64,
        seed: u64,
        documents: &[&str],
    ) -> Result<String, CallError> {
        let req = ChatRequest {
            messages: prompt.messages(values),
            temperature,
            seed: if temperature == 0.0 { 0 } else { seed },
            max_tokens: self.cfg.max_tokens,
        };
        let endpoint = llm.llm().endpoint();
        let (c, asked) = llm.call(&req).map_err(|message| CallError::Call {
            endpoint: endpoint.clone(),
            message,
        })?;
        if asked {
            let mut sent = self.sent.lock().expect("sent lock");
            for d in documents {
                let e = sent.entry((endpoint.clone(), d.to_string())).or_default();
                e.0.insert(prompt.stage.name.to_string());
                e.1 += 1;
            }
        }
        Ok(c.text)
    }

    /// Verdicts on `items` (`None` where the judge gave none).
    pub fn judge(&self, items: &[JudgeItem]) -> Result<Vec<Option<bool>>, CallError> {
        let verdicts = self.judge.judge(items).map_err(|e| {
            let message = e.to_string();
            match e {
                JudgeError::Unreachable { url, last, .. } => CallError::Call {
                    endpoint: url,
                    message: last,
                },
                // One document's check refused (its prompt too long for the judge, say): that
                // document's failure, as a call that failed after its retries is.
                JudgeError::Refused { url, .. } => CallError::Call {
                    endpoint: url,
                    message,
                },
                other => CallError::Fatal(other.into()),
            }
        })?;
        self.judged.fetch_add(verdicts.len(), Ordering::SeqCst);
        self.judged_cached.fetch_add(
            verdicts.iter().filter(|v| v.cached).count(),
            Ordering::SeqCst,
        );
        Ok(verdicts.iter().map(|v| v.correct).collect())
    }

    /// The judge's fingerprint ([`engram_judge::Judge::fingerprint`]): what the run's manifest
    /// records.
    pub fn judge_fingerprint(&self) -> String {
        self.judge.fingerprint()
    }

    /// The documents the specificity check lists for a pair (indices into `docs`) and where
    /// its own stands among them: the `similar_documents` most similar to the question by
    /// BM25 (its own left out), its own put at a place fixed by the pair — a different place
    /// in each `trial`, so that a model that always names the same position cannot pass two.
    pub fn specific_candidates(
        &self,
        doc: &Doc,
        question: &str,
        trial: usize,
    ) -> (Vec<usize>, usize) {
        let own = doc.index;
        // Every document, best first (those sharing no term with the question in corpus order).
        let mut similar = self.index.search(question, self.docs.len());
        similar.retain(|&i| i != own && self.docs[i].text != doc.text);
        similar.truncate(self.cfg.similar_documents);
        let places = similar.len() + 1;
        let place = (self.seed(&[&doc.id, question, "place"]) as usize + trial) % places;
        similar.insert(place, own);
        (similar, place)
    }

    /// A document as the specificity check lists it.
    pub fn excerpt(&self, i: usize) -> String {
        let (text, cut_) = cut(&self.docs[i].text, self.cfg.excerpt_chars);
        if cut_ { format!("{text} …") } else { text }
    }

    /// This run's send log, by endpoint and document.
    pub fn sent(&self) -> Vec<Sent> {
        self.sent
            .lock()
            .expect("sent lock")
            .iter()
            .map(|((endpoint, document), (stages, calls))| Sent {
                endpoint: endpoint.clone(),
                document: document.clone(),
                stages: stages.iter().cloned().collect(),
                calls: *calls,
            })
            .collect()
    }
}

//! The LLM judge over an OpenAI-compatible Chat Completions endpoint (vLLM, llama.cpp server,
//! OpenAI) through [`crate::client`] (the API key from the environment, retries with backoff):
//! temperature 0, concurrent requests up to a limit, a circuit breaker after N consecutive
//! failed requests, and the persistent cache.
//!
//! Each answer is one conversation ([`crate::protocol`]): the prompt, asking for a JSON verdict
//! through `response_format` unless the preset's `verdict_format` is `text` (in `auto`, a server
//! that rejects the field — HTTP 400/422 naming it — switches the rest of the run to text, once,
//! with a note); when the answer holds no verdict, one follow-up turn asks for the verdict
//! alone. Every turn is cached, and a verdict keeps both raw outputs.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::cache::JudgeCache;
use crate::client::{AskError, ChatClient, ClientConfig};
use crate::error::{JudgeError, Result};
use crate::parse::{parse_follow_up, parse_verdict};
use crate::protocol::{FOLLOW_UP, Message, VerdictFormat, response_format, turn_key};
use crate::template::JudgePrompt;
use crate::verdict::{Judge, JudgeItem, Verdict};

/// Settings of the LLM judge.
#[derive(Debug, Clone)]
pub struct OpenAiJudgeConfig {
    /// The endpoint: base URL, API key variable, retries, backoff, timeout.
    pub client: ClientConfig,
    /// The judge model (EnronQA: `meta-llama/Llama-3.1-70B-Instruct`).
    pub model: String,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Consecutive failed requests that open the circuit breaker.
    pub breaker_after: usize,
    /// Most tokens the judge may write.
    pub max_tokens: usize,
    /// How the verdict is asked for.
    pub format: VerdictFormat,
}

impl OpenAiJudgeConfig {
    /// Defaults for an endpoint and model: 4 in flight, 5 retries from 1 s, 60 s timeout,
    /// breaker after 5 failed requests in a row, verdicts
    /// asked as JSON where the server allows it.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            client: ClientConfig::new(base_url),
            model: model.into(),
            concurrency: crate::defaults::DEFAULT_CONCURRENCY,
            breaker_after: 5,
            max_tokens: 256,
            format: VerdictFormat::Auto,
        }
    }
}

/// The LLM judge.
pub struct OpenAiJudge {
    cfg: OpenAiJudgeConfig,
    prompt: JudgePrompt,
    cache: JudgeCache,
    client: ChatClient,
    /// Set when the server rejected `response_format` in `auto` mode: text from then on.
    json_rejected: AtomicBool,
    /// What to tell the user, handed out once by [`Judge::notes`].
    notes: Mutex<Vec<String>>,
}

/// Why a turn got no answer.
enum TurnError {
    /// The server rejects `response_format`.
    RejectsFormat(String),
    /// The request failed after its retries (counts towards the circuit breaker).
    Failed(String),
    /// The server refused the request with a client error: asking again would not help.
    Refused(u16),
    /// Another worker stopped the run before this turn got an answer.
    Stopped,
    /// Nothing more may be asked in this run (the cache could not be written, or the server
    /// rejects the format a `json` preset insists on).
    Fatal(JudgeError),
}

impl From<AskError> for TurnError {
    fn from(e: AskError) -> Self {
        match e {
            AskError::RejectsFormat(m) => TurnError::RejectsFormat(m),
            AskError::Failed(m) => TurnError::Failed(m),
            AskError::Refused { status } => TurnError::Refused(status),
            AskError::Stopped => TurnError::Stopped,
        }
    }
}

/// What a refusal's status most likely means, for the error that names it.
fn refusal_hint(status: u16) -> &'static str {
    match status {
        401 | 403 => "check the API key (in the variable the preset's api_key_env names)",
        404 => "check the preset's base_url and model",
        400 | 413 | 422 => {
            "a prompt longer than the judge model's context, or a setting the server does not \
             accept (max_tokens)"
        }
        _ => "the server does not accept this request",
    }
}

/// One answer's conversation: the first turn's raw output, the follow-up's if one was asked,
/// whether every turn came from the cache, and the verdict read from them (with the
/// rationale, when the first turn gave it).
struct Conversation {
    raw: String,
    follow_up: Option<String>,
    cached: bool,
    correct: Option<bool>,
    rationale: Option<String>,
}

impl OpenAiJudge {
    /// A judge with its prompt and cache; reads the key from the environment now.
    pub fn new(cfg: OpenAiJudgeConfig, prompt: JudgePrompt, cache: JudgeCache) -> Result<Self> {
        if cfg.concurrency == 0 {
            return Err(JudgeError::Bad(
                "judge concurrency must be at least 1".into(),
            ));
        }
        let client = ChatClient::new(cfg.client.clone())?;
        let notes = match cache.corrupt_lines {
            0 => Vec::new(),
            n => vec![format!(
                "{}: {n} corrupt lines skipped (they will be asked again)",
                cache.path.display()
            )],
        };
        Ok(Self {
            cfg,
            prompt,
            cache,
            client,
            json_rejected: AtomicBool::new(false),
            notes: Mutex::new(notes),
        })
    }

    /// HTTP requests sent so far (for tests and logs).
    pub fn requests(&self) -> usize {
        self.client.requests.load(Ordering::SeqCst)
    }

    fn url(&self) -> String {
        self.client.url()
    }

    /// Asks one turn (with the client's retries).
    fn ask(
        &self,
        messages: &[Message],
        json: bool,
        stop: &AtomicBool,
    ) -> std::result::Result<String, TurnError> {
        let mut body = json!({
            "model": self.cfg.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": self.cfg.max_tokens,
        });
        if json {
            body["response_format"] = response_format();
        }
        Ok(self.client.ask(&body, stop)?.content)
    }

    /// One turn, from the cache or asked (and cached); `true` when it came from the cache.
    fn turn(
        &self,
        messages: &[Message],
        json: bool,
        stop: &AtomicBool,
    ) -> std::result::Result<(String, bool), TurnError> {
        let key = turn_key(&self.cfg.model, json, messages);
        if let Some(raw) = self.cache.get(&key) {
            return Ok((raw, true));
        }
        let raw = self.ask(messages, json, stop)?;
        self.cache.put(&key, &raw).map_err(TurnError::Fatal)?;
        Ok((raw, false))
    }

    /// The first turn: as JSON unless the preset says text or the server rejected the field,
    /// a text answer cached by an earlier `auto` run serving as well.
    fn first_turn(
        &self,
        messages: &[Message],
        stop: &AtomicBool,
    ) -> std::result::Result<(String, bool), TurnError> {
        let auto = self.cfg.format == VerdictFormat::Auto;
        let json = match self.cfg.format {
            VerdictFormat::Text => false,
            VerdictFormat::Json => true,
            VerdictFormat::Auto => !self.json_rejected.load(Ordering::SeqCst),
        };
        if !json {
            return self.turn(messages, false, stop);
        }
        if auto && let Some(raw) = self.cache.get(&turn_key(&self.cfg.model, false, messages)) {
            return Ok((raw, true));
        }
        match self.turn(messages, true, stop) {
            Err(TurnError::RejectsFormat(m)) if auto => {
                if !self.json_rejected.swap(true, Ordering::SeqCst) {
                    self.notes.lock().expect("lock").push(format!(
                        "{}: the server rejects `response_format` ({m}); judging in text mode for the rest of this run",
                        self.url()
                    ));
                }
                self.turn(messages, false, stop)
            }
            Err(TurnError::RejectsFormat(m)) => Err(TurnError::Fatal(JudgeError::Bad(format!(
                "{}: the server rejects `response_format` ({m}); set the judge preset's verdict_format to \"text\" or \"auto\"",
                self.url()
            )))),
            other => other,
        }
    }

    /// One answer: the first turn, and the follow-up when it holds no verdict.
    fn converse(
        &self,
        item: &JudgeItem,
        stop: &AtomicBool,
    ) -> std::result::Result<Conversation, TurnError> {
        let mut messages = self.prompt.messages(item);
        let (raw, cached) = self.first_turn(&messages, stop)?;
        if let Some((v, rationale)) = parse_verdict(&raw) {
            return Ok(Conversation {
                raw,
                follow_up: None,
                cached,
                correct: Some(v),
                rationale,
            });
        }
        messages.push(Message::new("assistant", raw.clone()));
        messages.push(Message::new("user", FOLLOW_UP));
        let (follow_up, follow_cached) = self.turn(&messages, false, stop)?;
        Ok(Conversation {
            correct: parse_follow_up(&follow_up),
            raw,
            follow_up: Some(follow_up),
            cached: cached && follow_cached,
            rationale: None,
        })
    }

    fn verdict(&self, item: &JudgeItem, c: Conversation) -> Verdict {
        Verdict {
            id: item.id.clone(),
            correct: c.correct,
            judge: self.name(),
            error: c
                .correct
                .is_none()
                .then(|| "no verdict in the judge's answer nor in its follow-up".into()),
            rationale: c.rationale,
            raw: c.raw,
            follow_up: c.follow_up,
            cached: c.cached,
        }
    }
}

impl Judge for OpenAiJudge {
    fn name(&self) -> String {
        format!("openai:{}", self.cfg.model)
    }

    /// The name, and a hash of the prompt file's messages with how the verdict is asked
    /// for: a changed prompt, verdict format or token limit is another judge (the endpoint,
    /// like the judge cache's key, is not part of it).
    fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        for part in [
            self.prompt.system.as_deref().unwrap_or(""),
            &self.prompt.text,
            &self.cfg.format.to_string(),
            &self.cfg.max_tokens.to_string(),
        ] {
            h.update(part.as_bytes());
            h.update(b"\0");
        }
        let hash = crate::cache::hex(&h.finalize()[..6]);
        format!("{} (prompt and format {hash})", self.name())
    }

    fn notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.lock().expect("lock"))
    }

    fn judge(&self, items: &[JudgeItem]) -> Result<Vec<Verdict>> {
        let name = self.name();
        let mut out: Vec<Option<Verdict>> = vec![None; items.len()];
        let mut todo = Vec::new();
        for (i, it) in items.iter().enumerate() {
            match it.answer {
                None => out[i] = Some(Verdict::na(&it.id, &name)),
                Some(_) => todo.push(i),
            }
        }
        let next = AtomicUsize::new(0);
        let consecutive = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let last_error = Mutex::new(String::new());
        let results: Mutex<Vec<(usize, Conversation)>> = Mutex::new(Vec::new());
        let fatal: Mutex<Option<JudgeError>> = Mutex::new(None);
        std::thread::scope(|s| {
            for _ in 0..self.cfg.concurrency.min(todo.len()) {
                s.spawn(|| {
                    loop {
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                        let n = next.fetch_add(1, Ordering::SeqCst);
                        let Some(&i) = todo.get(n) else {
                            return;
                        };
                        match self.converse(&items[i], &stop) {
                            Ok(c) => {
                                consecutive.store(0, Ordering::SeqCst);
                                results.lock().expect("lock").push((i, c));
                            }
                            Err(TurnError::Fatal(e)) => {
                                *fatal.lock().expect("lock") = Some(e);
                                stop.store(true, Ordering::SeqCst);
                            }
                            // Asking again would get the same answer: the run stops, named.
                            Err(TurnError::Refused(status)) => {
                                let e = JudgeError::Refused {
                                    url: self.url(),
                                    model: self.cfg.model.clone(),
                                    item: items[i].id.clone(),
                                    status,
                                    hint: refusal_hint(status),
                                };
                                fatal.lock().expect("lock").get_or_insert(e);
                                stop.store(true, Ordering::SeqCst);
                            }
                            // Stopped by another worker: its cause is already recorded.
                            Err(TurnError::Stopped) => return,
                            Err(TurnError::Failed(e) | TurnError::RejectsFormat(e)) => {
                                *last_error.lock().expect("lock") = e;
                                let c = consecutive.fetch_add(1, Ordering::SeqCst) + 1;
                                if c >= self.cfg.breaker_after {
                                    stop.store(true, Ordering::SeqCst);
                                }
                            }
                        }
                    }
                });
            }
        });
        if let Some(e) = fatal.into_inner().expect("lock") {
            return Err(e);
        }
        for (i, c) in results.into_inner().expect("lock") {
            out[i] = Some(self.verdict(&items[i], c));
        }
        if stop.load(Ordering::SeqCst) || out.iter().any(Option::is_none) {
            return Err(JudgeError::Unreachable {
                url: self.url(),
                model: self.cfg.model.clone(),
                failures: consecutive.load(Ordering::SeqCst),
                last: last_error.into_inner().expect("lock"),
            });
        }
        Ok(out
            .into_iter()
            .map(|v| v.expect("every item judged"))
            .collect())
    }
}

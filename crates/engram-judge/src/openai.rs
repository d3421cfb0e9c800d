//! The LLM judge over an OpenAI-compatible Chat Completions endpoint (vLLM, llama.cpp server,
//! OpenAI): temperature 0, the API key read from an environment variable named in the config
//! (sent only in the `Authorization` header, never logged or stored), concurrent requests up to
//! a limit, retries with exponential backoff on 429 (honouring `Retry-After`), 5xx, timeouts and
//! malformed responses, a circuit breaker after N consecutive failed requests, and the
//! persistent cache.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::cache::{JudgeCache, cache_key};
use crate::error::{JudgeError, Result};
use crate::parse::parse_verdict;
use crate::template::JudgePrompt;
use crate::verdict::{Judge, JudgeItem, Verdict};

/// Settings of the LLM judge.
#[derive(Debug, Clone)]
pub struct OpenAiJudgeConfig {
    /// Base URL (e.g. `http://localhost:8000/v1`); `/chat/completions` is appended.
    pub base_url: String,
    /// The judge model (EnronQA: `meta-llama/Llama-3.1-70B-Instruct`).
    pub model: String,
    /// Name of the environment variable holding the API key (`None`: no key).
    pub api_key_env: Option<String>,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Retries per request after the first attempt.
    pub max_retries: usize,
    /// First backoff; doubles per retry.
    pub backoff: Duration,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Consecutive failed requests that open the circuit breaker.
    pub breaker_after: usize,
    /// Most tokens the judge may write.
    pub max_tokens: usize,
}

impl OpenAiJudgeConfig {
    /// Defaults for an endpoint and model: 4 in flight, 5 retries from 1 s, 60 s timeout,
    /// breaker after 5 failed requests in a row.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            concurrency: crate::preset::DEFAULT_CONCURRENCY,
            max_retries: 5,
            backoff: Duration::from_secs(1),
            timeout: Duration::from_secs(60),
            breaker_after: 5,
            max_tokens: 256,
        }
    }
}

/// The LLM judge.
pub struct OpenAiJudge {
    cfg: OpenAiJudgeConfig,
    prompt: JudgePrompt,
    cache: JudgeCache,
    key: Option<String>,
    agent: ureq::Agent,
    /// HTTP requests sent (for tests and logs).
    pub requests: AtomicUsize,
}

/// One failed attempt: whether to retry, and how long `Retry-After` asks to wait.
struct Failure {
    message: String,
    retry_after: Option<Duration>,
}

impl OpenAiJudge {
    /// A judge with its prompt and cache; reads the key from the environment now.
    pub fn new(cfg: OpenAiJudgeConfig, prompt: JudgePrompt, cache: JudgeCache) -> Result<Self> {
        if cfg.concurrency == 0 {
            return Err(JudgeError::Bad(
                "judge concurrency must be at least 1".into(),
            ));
        }
        let key = match &cfg.api_key_env {
            None => None,
            Some(var) => Some(
                std::env::var(var)
                    .ok()
                    .filter(|k| !k.is_empty())
                    .ok_or_else(|| JudgeError::MissingKey { var: var.clone() })?,
            ),
        };
        let agent = ureq::AgentBuilder::new().timeout(cfg.timeout).build();
        Ok(Self {
            cfg,
            prompt,
            cache,
            key,
            agent,
            requests: AtomicUsize::new(0),
        })
    }

    fn url(&self) -> String {
        format!(
            "{}/chat/completions",
            self.cfg.base_url.trim_end_matches('/')
        )
    }

    /// One HTTP attempt; returns the message content.
    fn attempt(&self, prompt: &str) -> std::result::Result<String, Failure> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        let body = json!({
            "model": self.cfg.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": self.cfg.max_tokens,
        });
        let mut req = self
            .agent
            .post(&self.url())
            .set("Content-Type", "application/json");
        if let Some(k) = &self.key {
            req = req.set("Authorization", &format!("Bearer {k}"));
        }
        let fail = |message: String, retry_after| Failure {
            message,
            retry_after,
        };
        match req.send_string(&body.to_string()) {
            Ok(resp) => {
                let text = resp
                    .into_string()
                    .map_err(|e| fail(format!("reading the response: {e}"), None))?;
                let v: Value = serde_json::from_str(&text)
                    .map_err(|e| fail(format!("malformed JSON response: {e}"), None))?;
                v["choices"][0]["message"]["content"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| fail("response without choices[0].message.content".into(), None))
            }
            Err(ureq::Error::Status(code, resp)) => {
                let retry_after = resp
                    .header("Retry-After")
                    .and_then(|s| s.trim().parse::<f64>().ok())
                    .map(Duration::from_secs_f64);
                Err(fail(format!("HTTP {code}"), retry_after))
            }
            // Transport errors name the URL and the cause, never headers.
            Err(ureq::Error::Transport(t)) => Err(fail(format!("transport: {}", t.kind()), None)),
        }
    }

    /// Asks with retries; `Err` after the last retry.
    fn ask(&self, prompt: &str, stop: &AtomicBool) -> std::result::Result<String, String> {
        let mut wait = self.cfg.backoff;
        let mut last = String::new();
        for attempt in 0..=self.cfg.max_retries {
            if stop.load(Ordering::SeqCst) {
                return Err("circuit breaker open".into());
            }
            match self.attempt(prompt) {
                Ok(content) => return Ok(content),
                Err(f) => {
                    last = f.message;
                    if attempt < self.cfg.max_retries {
                        std::thread::sleep(f.retry_after.unwrap_or(wait));
                        wait *= 2;
                    }
                }
            }
        }
        Err(last)
    }
}

impl Judge for OpenAiJudge {
    fn name(&self) -> String {
        format!("openai:{}", self.cfg.model)
    }

    fn notes(&self) -> Vec<String> {
        match self.cache.corrupt_lines {
            0 => Vec::new(),
            n => vec![format!(
                "{}: {n} corrupt lines skipped (they will be asked again)",
                self.cache.path.display()
            )],
        }
    }

    fn judge(&self, items: &[JudgeItem]) -> Result<Vec<Verdict>> {
        let name = self.name();
        let verdict = |it: &JudgeItem, raw: String, cached: bool| {
            let parsed = parse_verdict(&raw);
            Verdict {
                id: it.id.clone(),
                correct: parsed.as_ref().map(|p| p.0),
                judge: name.clone(),
                error: parsed
                    .is_none()
                    .then(|| "the judge's output holds no verdict".into()),
                rationale: parsed.and_then(|p| p.1),
                raw,
                cached,
            }
        };
        let mut out: Vec<Option<Verdict>> = vec![None; items.len()];
        let mut todo = Vec::new();
        for (i, it) in items.iter().enumerate() {
            if it.answer.is_none() {
                out[i] = Some(Verdict::na(&it.id, &name));
                continue;
            }
            let prompt = self.prompt.render(it);
            let key = cache_key(&self.cfg.model, &prompt);
            match self.cache.get(&key) {
                Some(raw) => out[i] = Some(verdict(it, raw, true)),
                None => todo.push((i, prompt, key)),
            }
        }
        let next = AtomicUsize::new(0);
        let consecutive = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let last_error = Mutex::new(String::new());
        let results: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
        let cache_error: Mutex<Option<JudgeError>> = Mutex::new(None);
        std::thread::scope(|s| {
            for _ in 0..self.cfg.concurrency.min(todo.len()) {
                s.spawn(|| {
                    loop {
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                        let n = next.fetch_add(1, Ordering::SeqCst);
                        let Some((i, prompt, key)) = todo.get(n) else {
                            return;
                        };
                        match self.ask(prompt, &stop) {
                            Ok(raw) => {
                                consecutive.store(0, Ordering::SeqCst);
                                if let Err(e) = self.cache.put(key, &raw) {
                                    *cache_error.lock().expect("lock") = Some(e);
                                    stop.store(true, Ordering::SeqCst);
                                }
                                results.lock().expect("lock").push((*i, raw));
                            }
                            Err(e) => {
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
        if let Some(e) = cache_error.into_inner().expect("lock") {
            return Err(e);
        }
        for (i, raw) in results.into_inner().expect("lock") {
            out[i] = Some(verdict(&items[i], raw, false));
        }
        if stop.load(Ordering::SeqCst) || out.iter().any(Option::is_none) {
            return Err(JudgeError::Unreachable {
                url: self.url(),
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

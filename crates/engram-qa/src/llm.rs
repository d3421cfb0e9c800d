//! The LLMs QA generation talks to: any [`Llm`] — an OpenAI-compatible endpoint
//! ([`OpenAiLlm`]: vLLM, llama.cpp's server, OpenAI), or a checkpoint engram runs itself (the
//! binary implements the trait over its model) — behind [`CachedLlm`], which keys every call by
//! (model, messages, temperature, seed, token limit), answers repeats from a persistent cache
//! and counts calls and tokens.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use engram_judge::Message;
use engram_judge::{ChatClient, ClientConfig};
use engram_judge::{JudgeCache, cache_key};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// One chat call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest {
    /// The conversation (system and user messages).
    pub messages: Vec<Message>,
    /// Sampling temperature (0: greedy).
    pub temperature: f64,
    /// The seed of a sampled call.
    pub seed: u64,
    /// Most tokens in the reply.
    pub max_tokens: usize,
}

/// A reply with its token counts (reported by the server, else estimated at 4 characters a
/// token).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The reply's text.
    pub text: String,
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Tokens of the reply.
    pub completion_tokens: u64,
}

/// Tokens in `text` at 4 characters a token (where a server reports none).
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// Anything that answers a chat call.
pub trait Llm: Send + Sync {
    /// The model's name: part of every cache key.
    fn model(&self) -> String;
    /// Where prompts go: a URL, or `local:MODEL` for a model run in this process.
    fn endpoint(&self) -> String;
    /// Whether prompts stay on this machine (`--local-only` accepts only such LLMs).
    fn is_local(&self) -> bool;
    /// Answers one call, or says why it could not (after any retries).
    fn complete(&self, req: &ChatRequest) -> Result<Completion, String>;
}

/// An OpenAI-compatible Chat Completions endpoint.
pub struct OpenAiLlm {
    client: ChatClient,
    model: String,
}

impl OpenAiLlm {
    /// The model `model` at `cfg`'s endpoint (its API key read from the environment now).
    pub fn new(cfg: ClientConfig, model: impl Into<String>) -> engram_judge::Result<Self> {
        Ok(Self {
            client: ChatClient::new(cfg)?,
            model: model.into(),
        })
    }

    /// HTTP requests sent so far.
    pub fn requests(&self) -> usize {
        self.client.requests.load(Ordering::SeqCst)
    }
}

impl Llm for OpenAiLlm {
    fn model(&self) -> String {
        self.model.clone()
    }

    fn endpoint(&self) -> String {
        self.client.config().base_url.clone()
    }

    fn is_local(&self) -> bool {
        engram_judge::is_loopback(&self.client.config().base_url)
    }

    fn complete(&self, req: &ChatRequest) -> Result<Completion, String> {
        let body = json!({
            "model": self.model,
            "messages": req.messages,
            "temperature": req.temperature,
            "seed": req.seed,
            "max_tokens": req.max_tokens,
        });
        let reply = self
            .client
            .ask(&body, &AtomicBool::new(false))
            .map_err(|e| e.to_string())?;
        let prompt: String = req.messages.iter().map(|m| m.content.as_str()).collect();
        Ok(Completion {
            prompt_tokens: reply
                .prompt_tokens
                .unwrap_or_else(|| estimate_tokens(&prompt)),
            completion_tokens: reply
                .completion_tokens
                .unwrap_or_else(|| estimate_tokens(&reply.content)),
            text: reply.content,
        })
    }
}

/// Calls and tokens of one LLM in a run.
#[derive(Debug, Default)]
pub struct CallStats {
    /// Calls sent to the LLM.
    pub asked: AtomicUsize,
    /// Calls answered from the cache.
    pub cached: AtomicUsize,
    /// Calls that failed after their retries.
    pub failed: AtomicUsize,
    /// Prompt tokens of every call (asked or cached).
    pub prompt_tokens: AtomicU64,
    /// Reply tokens of every call.
    pub completion_tokens: AtomicU64,
}

/// Figures of [`CallStats`], for the manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallCounts {
    /// Calls sent to the LLM in this run.
    pub asked: usize,
    /// Calls answered from the cache.
    pub cached: usize,
    /// Calls that failed after their retries.
    pub failed: usize,
    /// Prompt tokens of every call (asked or cached).
    pub prompt_tokens: u64,
    /// Reply tokens of every call.
    pub completion_tokens: u64,
}

impl CallStats {
    /// The figures now.
    pub fn counts(&self) -> CallCounts {
        CallCounts {
            asked: self.asked.load(Ordering::SeqCst),
            cached: self.cached.load(Ordering::SeqCst),
            failed: self.failed.load(Ordering::SeqCst),
            prompt_tokens: self.prompt_tokens.load(Ordering::SeqCst),
            completion_tokens: self.completion_tokens.load(Ordering::SeqCst),
        }
    }
}

/// An LLM behind the persistent call cache.
pub struct CachedLlm<'a> {
    llm: &'a dyn Llm,
    cache: &'a JudgeCache,
    /// What this run asked and got.
    pub stats: CallStats,
}

impl<'a> CachedLlm<'a> {
    /// `llm` with `cache` (shared by every LLM of a run: keys name the model).
    pub fn new(llm: &'a dyn Llm, cache: &'a JudgeCache) -> Self {
        Self {
            llm,
            cache,
            stats: CallStats::default(),
        }
    }

    /// The LLM behind the cache.
    pub fn llm(&self) -> &dyn Llm {
        self.llm
    }

    /// The cache key of a call to this model.
    pub fn key(&self, req: &ChatRequest) -> String {
        let call = serde_json::to_string(req).expect("requests serialize");
        cache_key(&self.llm.model(), &format!("qa\n{call}"))
    }

    /// The reply to `req`, from the cache or asked (and cached at once); `true` when it was
    /// asked.
    pub fn call(&self, req: &ChatRequest) -> Result<(Completion, bool), String> {
        let key = self.key(req);
        let hit = self
            .cache
            .get(&key)
            .and_then(|raw| serde_json::from_str::<Completion>(&raw).ok());
        let asked = hit.is_none();
        let c = match hit {
            Some(c) => {
                self.stats.cached.fetch_add(1, Ordering::SeqCst);
                c
            }
            None => {
                self.stats.asked.fetch_add(1, Ordering::SeqCst);
                let c = self.llm.complete(req).inspect_err(|_| {
                    self.stats.failed.fetch_add(1, Ordering::SeqCst);
                })?;
                let raw = serde_json::to_string(&c).expect("completions serialize");
                self.cache
                    .put(&key, &raw)
                    .map_err(|e| format!("cannot write the call cache: {e}"))?;
                c
            }
        };
        self.stats
            .prompt_tokens
            .fetch_add(c.prompt_tokens, Ordering::SeqCst);
        self.stats
            .completion_tokens
            .fetch_add(c.completion_tokens, Ordering::SeqCst);
        Ok((c, asked))
    }
}

//! One OpenAI-compatible Chat Completions endpoint (vLLM, llama.cpp's server, OpenAI), shared
//! by the LLM judge and by QA generation: the API key read from an environment variable (sent
//! only in the `Authorization` header, never logged, stored or quoted in an error), a timeout
//! per request, and retries with exponential backoff on 408/429 (honouring `Retry-After`),
//! 5xx, transport errors and malformed responses. A client error (4xx) is not retried; a 400/422
//! that names `response_format` or `json_schema` is told apart, so callers can fall back to
//! text.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::error::{JudgeError, Result};

pub use crate::defaults::{DEFAULT_BACKOFF, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT};

/// Where and how to reach an endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// Base URL (e.g. `http://localhost:8000/v1`); `/chat/completions` is appended.
    pub base_url: String,
    /// Name of the environment variable holding the API key (`None`: no key).
    pub api_key_env: Option<String>,
    /// Retries per request after the first attempt.
    pub max_retries: usize,
    /// First backoff; doubles per retry.
    pub backoff: Duration,
    /// Per-request timeout.
    pub timeout: Duration,
}

impl ClientConfig {
    /// Defaults for an endpoint: no key, 5 retries from 1 s, 60 s timeout.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key_env: None,
            max_retries: DEFAULT_MAX_RETRIES,
            backoff: DEFAULT_BACKOFF,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// What one request got back: the message content and the token usage the server reported.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// `choices[0].message.content`.
    pub content: String,
    /// `usage.prompt_tokens`, when reported.
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens`, when reported.
    pub completion_tokens: Option<u64>,
}

/// Why a request got no reply.
#[derive(Debug, Clone, PartialEq)]
pub enum AskError {
    /// The server rejects the request's `response_format` (HTTP 400/422 naming it).
    RejectsFormat(String),
    /// The request failed after its retries, or at once for a client error.
    Failed(String),
}

/// One failed attempt: whether to retry it, how long `Retry-After` asks to wait, and whether
/// the server rejected the `response_format` field.
struct Failure {
    message: String,
    retry_after: Option<Duration>,
    retry: bool,
    rejects_format: bool,
}

/// A client of one endpoint.
pub struct ChatClient {
    cfg: ClientConfig,
    key: Option<String>,
    agent: ureq::Agent,
    /// HTTP requests sent (for tests and logs).
    pub requests: AtomicUsize,
}

impl ChatClient {
    /// A client; reads the key from the environment now.
    pub fn new(cfg: ClientConfig) -> Result<Self> {
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
            key,
            agent,
            requests: AtomicUsize::new(0),
        })
    }

    /// Its settings.
    pub fn config(&self) -> &ClientConfig {
        &self.cfg
    }

    /// The Chat Completions URL.
    pub fn url(&self) -> String {
        format!(
            "{}/chat/completions",
            self.cfg.base_url.trim_end_matches('/')
        )
    }

    /// One HTTP attempt with the request body `body`.
    fn attempt(&self, body: &Value) -> std::result::Result<Reply, Failure> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        let json = body.get("response_format").is_some();
        let mut req = self
            .agent
            .post(&self.url())
            .set("Content-Type", "application/json");
        if let Some(k) = &self.key {
            req = req.set("Authorization", &format!("Bearer {k}"));
        }
        let fail = |message: String| Failure {
            message,
            retry_after: None,
            retry: true,
            rejects_format: false,
        };
        match req.send_string(&body.to_string()) {
            Ok(resp) => {
                let text = resp
                    .into_string()
                    .map_err(|e| fail(format!("reading the response: {e}")))?;
                let v: Value = serde_json::from_str(&text)
                    .map_err(|e| fail(format!("malformed JSON response: {e}")))?;
                let content = v["choices"][0]["message"]["content"]
                    .as_str()
                    .ok_or_else(|| fail("response without choices[0].message.content".into()))?;
                Ok(Reply {
                    content: content.to_string(),
                    prompt_tokens: v["usage"]["prompt_tokens"].as_u64(),
                    completion_tokens: v["usage"]["completion_tokens"].as_u64(),
                })
            }
            Err(ureq::Error::Status(code, resp)) => {
                let retry_after = resp
                    .header("Retry-After")
                    .and_then(|s| s.trim().parse::<f64>().ok())
                    .map(Duration::from_secs_f64);
                // The body is read only to see whether it names the format field: it may
                // echo the prompt, so it is never quoted.
                let said = resp.into_string().unwrap_or_default().to_lowercase();
                let rejects_format = json
                    && matches!(code, 400 | 422)
                    && (said.contains("response_format") || said.contains("json_schema"));
                Err(Failure {
                    message: format!("HTTP {code}"),
                    retry_after,
                    retry: matches!(code, 408 | 429) || code >= 500,
                    rejects_format,
                })
            }
            // Transport errors name the cause, never headers.
            Err(ureq::Error::Transport(t)) => Err(fail(format!("transport: {}", t.kind()))),
        }
    }

    /// Sends `body` with retries (none for a client error) until it gets a reply, the retries
    /// run out, or `stop` is set.
    pub fn ask(&self, body: &Value, stop: &AtomicBool) -> std::result::Result<Reply, AskError> {
        let mut wait = self.cfg.backoff;
        let mut last = String::new();
        for attempt in 0..=self.cfg.max_retries {
            if stop.load(Ordering::SeqCst) {
                return Err(AskError::Failed("circuit breaker open".into()));
            }
            match self.attempt(body) {
                Ok(reply) => return Ok(reply),
                Err(f) if f.rejects_format => return Err(AskError::RejectsFormat(f.message)),
                Err(f) if !f.retry => return Err(AskError::Failed(f.message)),
                Err(f) => {
                    last = f.message;
                    if attempt < self.cfg.max_retries {
                        std::thread::sleep(f.retry_after.unwrap_or(wait));
                        wait *= 2;
                    }
                }
            }
        }
        Err(AskError::Failed(last))
    }
}

/// Whether `url` names this machine (`localhost`, `127.0.0.0/8`, `::1`): what `--local-only`
/// accepts. A URL that cannot be parsed is not loopback.
pub fn is_loopback(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    // userinfo@host:port
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, _)) => h,
            None => return false,
        }
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_urls_are_told_from_others() {
        for url in [
            "http://localhost:8080/v1",
            "http://127.0.0.1/v1",
            "https://127.3.4.5:9/",
            "http://[::1]:8000/v1",
            "http://user@LOCALHOST:1/v1",
        ] {
            assert!(is_loopback(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "http://10.0.0.2:8000/v1",
            "http://localhost.example.com/v1",
            "http://127.0.0.1.nip.io/v1",
            "http://localhost@evil.example/v1",
            "ftp://127.0.0.1/",
            "127.0.0.1:8000",
        ] {
            assert!(!is_loopback(url), "{url}");
        }
    }
}

//! One OpenAI-compatible Chat Completions endpoint (vLLM, llama.cpp's server, OpenAI), shared
//! by the LLM judge and by QA generation: the API key read from an environment variable (sent
//! only in the `Authorization` header, never logged, stored or quoted in an error), a timeout
//! per request, and retries with exponential backoff on 408/429 (honouring `Retry-After`),
//! 5xx, transport errors and malformed responses. A client error (4xx) is not retried; a 400/422
//! that names `response_format` or `json_schema` is told apart, so callers can fall back to
//! text. `api_key_env` must be a variable's name (a key pasted there is refused without being
//! shown), and `base_url` may carry no credentials (`user:password@`, a `?key=` parameter), since
//! the URL appears in messages and in results.

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
    /// The server refused the request with a client error (4xx other than 408/429): asking again
    /// would get the same answer.
    Refused {
        /// The HTTP status.
        status: u16,
    },
    /// The request failed after its retries (transport errors, 408/429, 5xx, malformed
    /// replies).
    Failed(String),
    /// The caller's `stop` was set before an answer came; nothing is known about the request.
    Stopped,
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskError::RejectsFormat(m) | AskError::Failed(m) => f.write_str(m),
            AskError::Refused { status } => write!(f, "HTTP {status}"),
            AskError::Stopped => f.write_str("stopped before an answer came"),
        }
    }
}

/// One failed attempt: whether to retry it, how long `Retry-After` asks to wait, and whether
/// the server rejected the `response_format` field.
struct Failure {
    message: String,
    retry_after: Option<Duration>,
    retry: bool,
    rejects_format: bool,
    /// The HTTP status, where the server answered.
    status: Option<u16>,
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
        check_base_url(&cfg.base_url)?;
        let key = match &cfg.api_key_env {
            None => None,
            // Never shown: what is not a variable's name may be the key itself.
            Some(var) if !is_variable_name(var) => {
                return Err(JudgeError::Bad(
                    "api_key_env must name the environment variable that holds the API key \
                     (letters, digits and underscores), not hold the key itself (its value is \
                     not shown)"
                        .into(),
                ));
            }
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
            status: None,
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
                let retry_after = resp.header("Retry-After").and_then(retry_after);
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
                    status: Some(code),
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
                return Err(AskError::Stopped);
            }
            match self.attempt(body) {
                Ok(reply) => return Ok(reply),
                Err(f) if f.rejects_format => return Err(AskError::RejectsFormat(f.message)),
                Err(Failure {
                    retry: false,
                    status: Some(status),
                    ..
                }) => return Err(AskError::Refused { status }),
                Err(f) if !f.retry => return Err(AskError::Failed(f.message)),
                Err(f) => {
                    last = f.message;
                    if attempt < self.cfg.max_retries {
                        sleep_unless_stopped(f.retry_after.unwrap_or(wait), stop);
                        wait *= 2;
                    }
                }
            }
        }
        Err(AskError::Failed(last))
    }
}

/// How long a `Retry-After` header (in seconds) asks to wait, at most
/// [`crate::defaults::MAX_RETRY_AFTER`]; `None` for what is not a duration (a negative number,
/// NaN, an HTTP date), which leaves the client's own backoff.
fn retry_after(header: &str) -> Option<Duration> {
    let seconds = header.trim().parse::<f64>().ok()?;
    let most = crate::defaults::MAX_RETRY_AFTER;
    match seconds {
        s if s.is_nan() || s < 0.0 => None,
        s if s >= most.as_secs_f64() => Some(most),
        s => Some(Duration::from_secs_f64(s)),
    }
}

/// Sleeps `wait`, waking early once `stop` is set (another worker opened the circuit breaker).
fn sleep_unless_stopped(wait: Duration, stop: &AtomicBool) {
    let slice = Duration::from_millis(100);
    let end = std::time::Instant::now() + wait;
    while !stop.load(Ordering::SeqCst) {
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(slice));
    }
}

/// Whether `name` can be an environment variable's name: ASCII letters, digits and
/// underscores, not starting with a digit.
fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Query parameters whose names say they hold a credential.
const SECRET_PARAMETERS: [&str; 5] = ["key", "token", "secret", "password", "sig"];

/// Refuses a `base_url` that carries credentials — userinfo (`user:password@host`) or a query
/// parameter named like a key — naming what to do instead, never the credential: the URL is
/// shown in messages and kept in results.
fn check_base_url(url: &str) -> Result<()> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let why = if authority(rest).contains('@') {
        Some("credentials before its host (`user:password@`)".to_string())
    } else {
        url.split_once('?').and_then(|(_, query)| {
            let query = query.split('#').next().unwrap_or("");
            query.split('&').find_map(|pair| {
                let name = pair.split('=').next().unwrap_or("").to_ascii_lowercase();
                SECRET_PARAMETERS
                    .iter()
                    .any(|s| name.contains(s))
                    .then(|| format!("a query parameter that holds a credential (`{name}`)"))
            })
        })
    };
    match why {
        Some(why) => Err(JudgeError::Bad(format!(
            "the endpoint's base_url carries {why}: it is shown in messages and kept in \
             results; put the key in an environment variable and name it in api_key_env (the \
             URL is not shown)"
        ))),
        None => Ok(()),
    }
}

/// The authority of a URL whose scheme is cut off (`[userinfo@]host[:port]`): what comes
/// before its path, query or fragment.
fn authority(after_scheme: &str) -> &str {
    after_scheme.split(['/', '?', '#']).next().unwrap_or("")
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
    // userinfo@host:port
    let host_port = authority(rest).rsplit('@').next().unwrap_or("");
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
    fn retry_after_is_a_bounded_duration_or_nothing() {
        assert_eq!(retry_after(" 2 "), Some(Duration::from_secs(2)));
        assert_eq!(retry_after("0.5"), Some(Duration::from_millis(500)));
        // A day (or more than a Duration holds) is cut to the bound, not waited for.
        for long in ["86400", "1e30", "inf"] {
            assert_eq!(
                retry_after(long),
                Some(crate::defaults::MAX_RETRY_AFTER),
                "{long}"
            );
        }
        // What is not a duration leaves the backoff (it used to panic).
        for bad in ["-1", "NaN", "Wed, 21 Oct 2026 07:28:00 GMT", ""] {
            assert_eq!(retry_after(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_stop_cuts_a_wait_short() {
        let stop = AtomicBool::new(true);
        let t = std::time::Instant::now();
        sleep_unless_stopped(Duration::from_secs(30), &stop);
        assert!(t.elapsed() < Duration::from_secs(1));
        let go = AtomicBool::new(false);
        let t = std::time::Instant::now();
        sleep_unless_stopped(Duration::from_millis(150), &go);
        assert!(t.elapsed() >= Duration::from_millis(150));
    }

    #[test]
    fn a_key_pasted_as_the_variable_or_into_the_url_is_refused_unseen() {
        for name in ["OPENAI_API_KEY", "_K", "judge_key_2"] {
            assert!(is_variable_name(name), "{name}");
        }
        for value in ["sk-live-0123456789", "2KEY", "", "MY KEY", "KEY=1"] {
            assert!(!is_variable_name(value), "{value}");
        }
        let mut cfg = ClientConfig::new("http://localhost:8000/v1");
        cfg.api_key_env = Some("sk-live-0123456789".into());
        let e = ChatClient::new(cfg).err().unwrap().to_string();
        assert!(
            e.contains("api_key_env") && !e.contains("0123456789"),
            "{e}"
        );
        for url in [
            "https://user:hunter2@api.example.com/v1",
            "https://api.example.com/v1?api-key=hunter2",
            "https://api.example.com/v1?x=1&access_token=hunter2#f",
        ] {
            let e = ChatClient::new(ClientConfig::new(url))
                .err()
                .unwrap()
                .to_string();
            assert!(
                e.contains("base_url") && !e.contains("hunter2"),
                "{url}: {e}"
            );
        }
        for url in [
            "http://localhost:8000/v1",
            "https://example.openai.azure.com/openai/deployments/d?api-version=2024-06-01",
        ] {
            assert!(ChatClient::new(ClientConfig::new(url)).is_ok(), "{url}");
        }
    }

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

//! Every default of the judges in one place (presets, the LLM judge, its HTTP client).

use std::time::Duration;

/// Default threshold of the token-F1 judge.
pub const DEFAULT_F1_THRESHOLD: f64 = 0.5;
/// Default threshold of the gold-recall judge (every gold token).
pub const DEFAULT_RECALL_THRESHOLD: f64 = 1.0;
/// Default requests in flight of the LLM judge.
pub const DEFAULT_CONCURRENCY: usize = 4;
/// Default retries after the first attempt.
pub const DEFAULT_MAX_RETRIES: usize = 5;
/// Default first backoff (doubles per retry).
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait a server's `Retry-After` gets (a longer one is cut to it).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);
/// Default timeout of one request.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default OpenAI-compatible endpoint of the LLM judge (and of `engram qa`'s generator).
pub const DEFAULT_BASE_URL: &str = "http://localhost:8000/v1";
/// Default judge model at that endpoint: EnronQA's judge.
pub const DEFAULT_JUDGE_MODEL: &str = "meta-llama/Llama-3.1-70B-Instruct";
/// Default judge prompt file (EnronQA's judge prompt), from the repository root.
pub const DEFAULT_JUDGE_PROMPT: &str = "configs/judges/enronqa-judge.txt";

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
/// Default timeout of one request.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

//! How the LLM judge asks: the verdict format (a JSON object through the request's
//! `response_format`, or free text), the JSON schema, the follow-up turn asked when an answer
//! holds no verdict, and the cache key of each turn.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::cache::cache_key;

/// How the judge is asked for its verdict (a judge preset's `verdict_format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictFormat {
    /// A JSON object through `response_format`, falling back to text for the rest of the run
    /// when the server rejects that field.
    #[default]
    Auto,
    /// A JSON object through `response_format`; a server that rejects it is an error.
    Json,
    /// Free text, parsed ([`crate::parse`]).
    Text,
}

impl FromStr for VerdictFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "json" => Ok(Self::Json),
            "text" => Ok(Self::Text),
            other => Err(format!(
                "unknown verdict format `{other}` (auto, json or text)"
            )),
        }
    }
}

impl fmt::Display for VerdictFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Json => "json",
            Self::Text => "text",
        })
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: &'static str,
    /// Its text.
    pub content: String,
}

impl Message {
    /// A message from `role`.
    pub fn new(role: &'static str, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }
}

/// The follow-up turn, asked once in the same conversation when the judge's first answer
/// holds no verdict; its reply is parsed strictly ([`crate::parse::parse_follow_up`]).
pub const FOLLOW_UP: &str =
    "Give your final verdict alone, as one line: VERDICT: CORRECT or VERDICT: INCORRECT";

/// The `response_format` field asking for `{"reason": …, "verdict": "correct" | "incorrect"}`
/// (OpenAI's structured outputs; vLLM and llama.cpp's server accept the same field). The
/// reason comes first so that the judge explains before it decides.
pub fn response_format() -> Value {
    json!({
        "type": "json_schema",
        "json_schema": {
            "name": "verdict",
            "strict": true,
            "schema": {
                "type": "object",
                "properties": {
                    "reason": {"type": "string"},
                    "verdict": {"type": "string", "enum": ["correct", "incorrect"]}
                },
                "required": ["reason", "verdict"],
                "additionalProperties": false
            }
        }
    })
}

/// The cache key of one turn: the judge model, whether the turn asked for JSON, and the
/// conversation so far. A single user message asked in text mode keeps the key of earlier
/// engram versions (`sha256(model + "\n" + prompt)`), so their caches still serve.
pub fn turn_key(model: &str, json: bool, messages: &[Message]) -> String {
    match messages {
        [only] if !json && only.role == "user" => cache_key(model, &only.content),
        _ => {
            let conversation = serde_json::to_string(messages).expect("messages serialize");
            let mode = if json { "json" } else { "text" };
            cache_key(model, &format!("{mode}\n{conversation}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_and_keys_differ_by_turn_and_mode() {
        assert_eq!("json".parse::<VerdictFormat>(), Ok(VerdictFormat::Json));
        let e = "xml".parse::<VerdictFormat>().unwrap_err();
        assert!(
            e.contains("`xml`") && e.contains("auto, json or text"),
            "{e}"
        );
        let user = [Message::new("user", "p")];
        assert_eq!(turn_key("m", false, &user), cache_key("m", "p"));
        assert_ne!(turn_key("m", true, &user), turn_key("m", false, &user));
        let follow = [
            Message::new("user", "p"),
            Message::new("assistant", "a"),
            Message::new("user", FOLLOW_UP),
        ];
        assert_ne!(turn_key("m", false, &follow), turn_key("m", false, &user));
    }
}

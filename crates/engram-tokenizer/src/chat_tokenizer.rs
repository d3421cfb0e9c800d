//! A checkpoint's tokenizer and chat template together, with the special ids generation and
//! training need (eos ids, end-of-turn, pad).

use std::collections::BTreeMap;

use engram_checkpoint::TokenizerFiles;
use serde_json::Value;
use tokenizers::Tokenizer;

use crate::chat_template::{ChatTemplate, Message};
use crate::error::{Result, TokenizerError};

/// Tokenizer + chat template of one checkpoint.
pub struct ChatTokenizer {
    tokenizer: Tokenizer,
    template: Option<ChatTemplate>,
    origin: String,
    special_tokens: BTreeMap<String, String>,
    add_bos_token: Option<bool>,
}

/// A special token's string from tokenizer_config: a plain string or `{"content": ...}`.
fn token_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(|c| c.as_str()).map(String::from),
        _ => None,
    }
}

impl ChatTokenizer {
    /// Builds from a checkpoint's tokenizer files.
    pub fn from_files(files: &TokenizerFiles) -> Result<Self> {
        let json = files
            .tokenizer_json
            .as_deref()
            .ok_or_else(|| TokenizerError::Missing {
                origin: files.origin.clone(),
            })?;
        let mut tokenizer: Tokenizer =
            json.parse()
                .map_err(|e: tokenizers::Error| TokenizerError::Load {
                    origin: files.origin.clone(),
                    message: e.to_string(),
                })?;
        // Prompts are encoded one by one; padding/truncation baked into tokenizer.json (as in
        // some sentence-embedding repos) would change them.
        tokenizer.with_padding(None);
        let _ = tokenizer.with_truncation(None);
        let cfg = files.tokenizer_config.clone().unwrap_or(Value::Null);
        let mut special_tokens = BTreeMap::new();
        for key in [
            "bos_token",
            "eos_token",
            "unk_token",
            "pad_token",
            "sep_token",
            "cls_token",
            "mask_token",
        ] {
            if let Some(s) = cfg.get(key).and_then(token_string) {
                special_tokens.insert(key.to_string(), s);
            }
        }
        let template = match cfg.get("chat_template") {
            Some(Value::String(src)) => Some(ChatTemplate::new(
                src,
                special_tokens.clone(),
                files.origin.clone(),
            )?),
            // A list of named templates: use "default".
            Some(Value::Array(list)) => list
                .iter()
                .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
                .and_then(|t| t.get("template").and_then(|s| s.as_str()))
                .map(|src| ChatTemplate::new(src, special_tokens.clone(), files.origin.clone()))
                .transpose()?,
            _ => None,
        };
        Ok(Self {
            tokenizer,
            template,
            origin: files.origin.clone(),
            special_tokens,
            add_bos_token: cfg.get("add_bos_token").and_then(|b| b.as_bool()),
        })
    }

    /// Whether a chat template is available.
    pub fn has_chat_template(&self) -> bool {
        self.template.is_some()
    }

    /// Renders a conversation with the checkpoint's chat template.
    pub fn apply_chat_template(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String> {
        self.apply_chat_template_with(messages, add_generation_prompt, &BTreeMap::new())
    }

    /// As [`Self::apply_chat_template`], with extra template variables.
    pub fn apply_chat_template_with(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
        extra: &BTreeMap<String, Value>,
    ) -> Result<String> {
        let t = self
            .template
            .as_ref()
            .ok_or_else(|| TokenizerError::NoChatTemplate {
                origin: self.origin.clone(),
            })?;
        t.render(messages, add_generation_prompt, extra)
    }

    /// Encodes `text`. `add_special_tokens` runs the post-processor (e.g. prepends BOS), as
    /// transformers' `tokenizer(text)` does; rendered chat prompts are encoded without it.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let enc = self
            .tokenizer
            .encode(text, add_special_tokens)
            .map_err(|e| TokenizerError::Codec(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Renders a single user question as a chat prompt (generation header open) and encodes it.
    pub fn encode_chat_prompt(&self, messages: &[Message]) -> Result<Vec<u32>> {
        if messages.iter().all(|m| m.content.trim().is_empty()) {
            return Err(TokenizerError::EmptyPrompt);
        }
        let text = self.apply_chat_template(messages, true)?;
        self.encode(&text, false)
    }

    /// Encodes a plain prompt, with BOS when the tokenizer adds one.
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>> {
        if text.is_empty() {
            return Err(TokenizerError::EmptyPrompt);
        }
        let mut ids = self.encode(text, true)?;
        if self.add_bos_token == Some(true)
            && let Some(bos) = self.bos_id()
            && ids.first() != Some(&bos)
        {
            ids.insert(0, bos);
        }
        Ok(ids)
    }

    /// Decodes ids to text.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String> {
        self.tokenizer
            .decode(ids, skip_special_tokens)
            .map_err(|e| TokenizerError::Codec(e.to_string()))
    }

    /// The id of a token string (special tokens included).
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_to_id(token)
    }

    /// The string of a special token role (`bos_token`, `eos_token`, `pad_token`...).
    pub fn special_token(&self, role: &str) -> Option<&str> {
        self.special_tokens.get(role).map(String::as_str)
    }

    /// BOS id, when defined.
    pub fn bos_id(&self) -> Option<u32> {
        self.special_token("bos_token")
            .and_then(|t| self.token_id(t))
    }

    /// The token that ends an assistant turn: `<|eot_id|>` for Llama 3, else the tokenizer's eos
    /// (e.g. `<|im_end|>` for ChatML).
    pub fn end_of_turn_id(&self) -> Option<u32> {
        self.token_id("<|eot_id|>").or_else(|| {
            self.special_token("eos_token")
                .and_then(|t| self.token_id(t))
        })
    }

    /// The padding id for training batches: `<|finetune_right_pad_id|>` (Llama 3.1), else the
    /// tokenizer's pad token, else its eos.
    pub fn pad_id(&self) -> Option<u32> {
        self.token_id("<|finetune_right_pad_id|>")
            .or_else(|| {
                self.special_token("pad_token")
                    .and_then(|t| self.token_id(t))
            })
            .or_else(|| self.end_of_turn_id())
    }

    /// Ids that end generation: end-of-turn, `<|end_of_text|>`, `<|eom_id|>`, the tokenizer's eos,
    /// and those given by the checkpoint's generation config.
    pub fn stop_ids(&self, generation_eos: &[u32]) -> Vec<u32> {
        let mut ids = Vec::new();
        let mut push = |id: Option<u32>| {
            if let Some(id) = id
                && !ids.contains(&id)
            {
                ids.push(id);
            }
        };
        push(self.end_of_turn_id());
        push(self.token_id("<|end_of_text|>"));
        push(self.token_id("<|eom_id|>"));
        push(
            self.special_token("eos_token")
                .and_then(|t| self.token_id(t)),
        );
        for &id in generation_eos {
            push(Some(id));
        }
        ids
    }

    /// The vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.tokenizer.get_vocab_size(true)
    }

    /// The underlying `tokenizers` tokenizer.
    pub fn inner(&self) -> &Tokenizer {
        &self.tokenizer
    }
}

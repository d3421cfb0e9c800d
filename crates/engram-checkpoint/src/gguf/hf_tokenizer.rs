//! The HF `tokenizer.json` and `tokenizer_config.json` of a llama GGUF file, synthesized from its
//! `tokenizer.ggml.*` metadata: byte-level BPE, control and user-defined tokens as special added
//! tokens (as llama.cpp treats them), the pre-tokenizer `tokenizer.ggml.pre` names.

use serde_json::{Value, json};

use super::file::GgufFile;
use super::hf_config::string_array;
use super::value::GgufValue;
use crate::{CheckpointError, Result};

/// Pre-tokenizer regexes of llama.cpp's `tokenizer.ggml.pre` names (`llama-vocab.cpp`).
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen2's split (`tokenizer.ggml.pre = qwen2`): Llama 3's, but digits one by one.
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

fn pre_tokenizer(pre: &str) -> Value {
    let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
    match pre {
        "llama-bpe" | "llama3" => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX}, "behavior": "Isolated", "invert": false},
            byte_level(false)
        ]}),
        "qwen2" => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": false},
            byte_level(false)
        ]}),
        // SmolLM/StarCoder: single digits, then GPT-2's byte-level regex.
        "smollm" | "starcoder" | "refact" => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true},
            byte_level(true)
        ]}),
        _ => byte_level(true),
    }
}

/// An HF `tokenizer.json` built from the `tokenizer.ggml.*` metadata (gpt2-style byte-level
/// BPE).
pub fn synthesize_tokenizer(file: &GgufFile) -> Result<Value> {
    let model = file
        .meta("tokenizer.ggml.model")?
        .as_str()
        .unwrap_or("")
        .to_string();
    if model != "gpt2" {
        return Err(CheckpointError::BadKey {
            origin: file.path().display().to_string(),
            key: "tokenizer.ggml.model".into(),
            problem: format!("is `{model}`; only byte-level BPE (`gpt2`) tokenizers are supported"),
        });
    }
    let tokens = string_array(file, "tokenizer.ggml.tokens")?;
    let merges = string_array(file, "tokenizer.ggml.merges")?;
    let types: Vec<i64> = match file.metadata.get("tokenizer.ggml.token_type") {
        Some(GgufValue::Array(a)) => a
            .iter()
            .map(|v| match v {
                GgufValue::I64(x) => *x,
                GgufValue::U64(x) => *x as i64,
                _ => 1,
            })
            .collect(),
        _ => vec![1; tokens.len()],
    };
    let pre = file
        .metadata
        .get("tokenizer.ggml.pre")
        .and_then(|v| v.as_str())
        .unwrap_or("default");
    let mut vocab = serde_json::Map::new();
    let mut added = Vec::new();
    for (id, tok) in tokens.iter().enumerate() {
        vocab.insert(tok.clone(), json!(id));
        // llama.cpp token types: 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte.
        let ty = types.get(id).copied().unwrap_or(1);
        if ty == 3 || ty == 4 {
            added.push(json!({
                "id": id, "content": tok, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": ty == 3 || tok.starts_with('<'),
            }));
        }
    }
    let merges: Vec<Value> = merges
        .iter()
        .map(|m| match m.split_once(' ') {
            Some((a, b)) => json!([a, b]),
            None => json!([m, ""]),
        })
        .collect();
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        // Qwen2's tokenizer normalizes to NFC first (transformers' Qwen2 converter does too).
        "normalizer": if pre == "qwen2" { json!({"type": "NFC"}) } else { Value::Null },
        "pre_tokenizer": pre_tokenizer(pre),
        "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": pre == "llama-bpe" || pre == "llama3",
            "vocab": vocab, "merges": merges
        }
    }))
}

/// An HF `tokenizer_config.json` equivalent: chat template, bos/eos/pad tokens.
pub fn tokenizer_config(file: &GgufFile) -> Result<Value> {
    let tokens = string_array(file, "tokenizer.ggml.tokens")?;
    let tok = |key: &str| -> Option<Value> {
        let id = file.metadata.get(key)?.as_u64()? as usize;
        tokens.get(id).map(|s| Value::String(s.clone()))
    };
    let mut cfg = serde_json::Map::new();
    if let Some(t) = file.metadata.get("tokenizer.chat_template") {
        cfg.insert("chat_template".into(), json!(t.as_str().unwrap_or("")));
    }
    for (key, name) in [
        ("tokenizer.ggml.bos_token_id", "bos_token"),
        ("tokenizer.ggml.eos_token_id", "eos_token"),
        ("tokenizer.ggml.padding_token_id", "pad_token"),
        ("tokenizer.ggml.unknown_token_id", "unk_token"),
    ] {
        if let Some(v) = tok(key) {
            cfg.insert(name.into(), v);
        }
    }
    if let Some(GgufValue::Bool(b)) = file.metadata.get("tokenizer.ggml.add_bos_token") {
        cfg.insert("add_bos_token".into(), json!(b));
    }
    Ok(Value::Object(cfg))
}

//! The HF `config.json` and `generation_config.json` of a llama GGUF file, synthesized from its
//! metadata as transformers' GGUF loader does.

use serde_json::{Value, json};

use super::file::GgufFile;
use crate::{CheckpointError, Result};

pub(crate) fn meta_u64(file: &GgufFile, key: &str) -> Result<u64> {
    let v = file.meta(key)?;
    v.as_u64().ok_or_else(|| CheckpointError::BadKey {
        origin: file.path().display().to_string(),
        key: key.into(),
        problem: format!("is a {}, expected an unsigned integer", v.type_name()),
    })
}

pub(crate) fn meta_f64(file: &GgufFile, key: &str) -> Result<f64> {
    let v = file.meta(key)?;
    v.as_f64().ok_or_else(|| CheckpointError::BadKey {
        origin: file.path().display().to_string(),
        key: key.into(),
        problem: format!("is a {}, expected a number", v.type_name()),
    })
}

pub(crate) fn string_array(file: &GgufFile, key: &str) -> Result<Vec<String>> {
    let bad = |problem: &str| CheckpointError::BadKey {
        origin: file.path().display().to_string(),
        key: key.into(),
        problem: problem.into(),
    };
    let arr = file
        .meta(key)?
        .as_array()
        .ok_or_else(|| bad("is not an array"))?;
    arr.iter()
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| bad("holds a non-string"))
        })
        .collect()
}

/// The HF `config.json` transformers builds from the same metadata (tied embeddings when the
/// file has no `output.weight`).
pub fn synthesize_config(file: &GgufFile) -> Result<Value> {
    let heads = meta_u64(file, "llama.attention.head_count")?;
    let hidden = meta_u64(file, "llama.embedding_length")?;
    let kv_heads = match file.metadata.get("llama.attention.head_count_kv") {
        Some(v) => v.as_u64().unwrap_or(heads),
        None => heads,
    };
    let head_dim = match file.metadata.get("llama.rope.dimension_count") {
        Some(v) => v.as_u64().unwrap_or(hidden / heads.max(1)),
        None => hidden / heads.max(1),
    };
    let vocab = match file.metadata.get("llama.vocab_size") {
        Some(v) => v.as_u64().unwrap_or(0),
        None => file
            .metadata
            .get("tokenizer.ggml.tokens")
            .and_then(|t| t.as_array())
            .map(|a| a.len() as u64)
            .unwrap_or(0),
    };
    let theta = match file.metadata.get("llama.rope.freq_base") {
        Some(v) => v.as_f64().unwrap_or(10000.0),
        None => 10000.0,
    };
    let get_u = |k: &str| file.metadata.get(k).and_then(|v| v.as_u64());
    let tied = !file.tensors.contains_key("output.weight");
    let has_bias = file.tensors.contains_key("blk.0.attn_q.bias");
    Ok(json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": meta_u64(file, "llama.feed_forward_length")?,
        "num_hidden_layers": meta_u64(file, "llama.block_count")?,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "max_position_embeddings": meta_u64(file, "llama.context_length")?,
        "rms_norm_eps": meta_f64(file, "llama.attention.layer_norm_rms_epsilon")?,
        "rope_theta": theta,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
        "attention_bias": has_bias,
        "mlp_bias": file.tensors.contains_key("blk.0.ffn_up.bias"),
        "bos_token_id": get_u("tokenizer.ggml.bos_token_id"),
        "eos_token_id": get_u("tokenizer.ggml.eos_token_id"),
        "pad_token_id": get_u("tokenizer.ggml.padding_token_id"),
    }))
}

/// `generation_config.json` equivalent: the eos id(s) the file names.
pub fn generation_config(file: &GgufFile) -> Value {
    let id = |key: &str| file.metadata.get(key).and_then(|v| v.as_u64());
    let (eos, bos) = (
        id("tokenizer.ggml.eos_token_id"),
        id("tokenizer.ggml.bos_token_id"),
    );
    json!({ "eos_token_id": eos, "bos_token_id": bos })
}

//! The HF `config.json` and `generation_config.json` of a `llama`, `qwen2` or `qwen3` GGUF file,
//! synthesized from its metadata (`<architecture>.*` keys) as transformers' GGUF loader does.

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

/// The HF `config.json` transformers builds from the same metadata of a file of `arch` (`llama`,
/// `qwen2` or `qwen3`; tied embeddings when the file has no `output.weight`).
pub fn synthesize_config(file: &GgufFile, arch: &str) -> Result<Value> {
    let key = |k: &str| format!("{arch}.{k}");
    let heads = meta_u64(file, &key("attention.head_count"))?;
    let hidden = meta_u64(file, &key("embedding_length"))?;
    let kv_heads = match file.metadata.get(&key("attention.head_count_kv")) {
        Some(v) => v.as_u64().unwrap_or(heads),
        None => heads,
    };
    // Qwen3 states its head width (`attention.key_length`); llama files give the rotary width.
    let head_dim = match file
        .metadata
        .get(&key("attention.key_length"))
        .or_else(|| file.metadata.get(&key("rope.dimension_count")))
    {
        Some(v) => v.as_u64().unwrap_or(hidden / heads.max(1)),
        None => hidden / heads.max(1),
    };
    let vocab = match file.metadata.get(&key("vocab_size")) {
        Some(v) => v.as_u64().unwrap_or(0),
        None => file
            .metadata
            .get("tokenizer.ggml.tokens")
            .and_then(|t| t.as_array())
            .map(|a| a.len() as u64)
            .unwrap_or(0),
    };
    let theta = match file.metadata.get(&key("rope.freq_base")) {
        Some(v) => v.as_f64().unwrap_or(10000.0),
        None => 10000.0,
    };
    let get_u = |k: &str| file.metadata.get(k).and_then(|v| v.as_u64());
    let tied = !file.tensors.contains_key("output.weight");
    let has_bias = file.tensors.contains_key("blk.0.attn_q.bias");
    let class = match arch {
        "qwen2" => "Qwen2ForCausalLM",
        "qwen3" => "Qwen3ForCausalLM",
        _ => "LlamaForCausalLM",
    };
    let mut config = json!({
        "architectures": [class],
        "model_type": arch,
        "hidden_size": hidden,
        "intermediate_size": meta_u64(file, &key("feed_forward_length"))?,
        "num_hidden_layers": meta_u64(file, &key("block_count"))?,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "max_position_embeddings": meta_u64(file, &key("context_length"))?,
        "rms_norm_eps": meta_f64(file, &key("attention.layer_norm_rms_epsilon"))?,
        "rope_theta": theta,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
        "attention_bias": has_bias,
        "mlp_bias": file.tensors.contains_key("blk.0.ffn_up.bias"),
        "bos_token_id": get_u("tokenizer.ggml.bos_token_id"),
        "eos_token_id": get_u("tokenizer.ggml.eos_token_id"),
        "pad_token_id": get_u("tokenizer.ggml.padding_token_id"),
    });
    if arch != "llama" {
        // llama.cpp runs Qwen2 and Qwen3 with full attention, as engram does; Qwen2's q/k/v
        // biases come with the architecture.
        let c = config.as_object_mut().expect("an object");
        if arch == "qwen2" {
            c.remove("attention_bias");
        }
        c.insert("use_sliding_window".into(), json!(false));
    }
    Ok(config)
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

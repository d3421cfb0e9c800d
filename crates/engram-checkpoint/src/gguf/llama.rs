//! A GGUF file of the `llama` architecture seen as an HF checkpoint: HF tensor names, HF row
//! order for q/k (llama.cpp's permutation undone), and an HF-style `config.json`,
//! `tokenizer.json` and `tokenizer_config.json` synthesized from the metadata.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::dequant::{GgmlType, ggml_type_name};
use super::file::GgufFile;
use super::value::GgufValue;
use crate::tensor_source::{TensorInfo, TensorSource};
use engram_kernels::QuantizedMatrix;

use crate::{CheckpointError, FloatFormat, HostTensor, Result};

/// How a tensor's rows must be reordered from llama.cpp's layout to HF's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowOrder {
    AsIs,
    /// Undo `permute(w, n_head)` of llama.cpp's converter for this many heads.
    Unpermute(usize),
}

/// A llama-architecture GGUF checkpoint.
pub struct GgufLlama {
    file: GgufFile,
    /// HF name -> (GGUF name, row order).
    names: BTreeMap<String, (String, RowOrder)>,
    config: Value,
}

fn hf_name(gguf: &str) -> Option<String> {
    let direct = match gguf {
        "token_embd.weight" => Some("model.embed_tokens.weight"),
        "output_norm.weight" => Some("model.norm.weight"),
        "output.weight" => Some("lm_head.weight"),
        _ => None,
    };
    if let Some(n) = direct {
        return Some(n.to_string());
    }
    let rest = gguf.strip_prefix("blk.")?;
    let (layer, rest) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let (module, suffix) = rest.rsplit_once('.')?;
    let hf = match module {
        "attn_norm" => "input_layernorm",
        "ffn_norm" => "post_attention_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        _ => return None,
    };
    Some(format!("model.layers.{layer}.{hf}.{suffix}"))
}

impl GgufLlama {
    /// Opens `path`; fails with a named error unless `general.architecture` is `llama`.
    pub fn open(path: &Path) -> Result<Self> {
        let file = GgufFile::open(path)?;
        let arch = file.meta("general.architecture")?.as_str().unwrap_or("");
        if arch != "llama" {
            return Err(CheckpointError::BadKey {
                origin: path.display().to_string(),
                key: "general.architecture".into(),
                problem: format!("is `{arch}`; only `llama` GGUF files are supported"),
            });
        }
        let config = synthesize_config(&file)?;
        let heads = config["num_attention_heads"].as_u64().unwrap_or(1) as usize;
        let kv_heads = config["num_key_value_heads"].as_u64().unwrap_or(1) as usize;
        let mut names = BTreeMap::new();
        for g in file.tensors.keys() {
            let Some(hf) = hf_name(g) else { continue };
            let order = if hf.contains("self_attn.q_proj") {
                RowOrder::Unpermute(heads)
            } else if hf.contains("self_attn.k_proj") {
                RowOrder::Unpermute(kv_heads)
            } else {
                RowOrder::AsIs
            };
            names.insert(hf, (g.clone(), order));
        }
        Ok(Self {
            file,
            names,
            config,
        })
    }

    /// The HF-style `config.json` (as transformers builds it from the same metadata). Tied
    /// embeddings when the file has no `output.weight`.
    pub fn config(&self) -> &Value {
        &self.config
    }

    /// Per-frequency rope divisors (`rope_freqs.weight`, written by llama.cpp for llama3 rope
    /// scaling), when present.
    pub fn rope_freq_factors(&self) -> Result<Option<Vec<f32>>> {
        if self.file.tensors.contains_key("rope_freqs.weight") {
            self.file.read_f32("rope_freqs.weight").map(Some)
        } else {
            Ok(None)
        }
    }

    /// The underlying file (metadata access).
    pub fn file(&self) -> &GgufFile {
        &self.file
    }

    /// An HF `tokenizer.json` equivalent built from the `tokenizer.ggml.*` metadata (gpt2-style
    /// byte-level BPE). Control and user-defined tokens become special added tokens, as llama.cpp
    /// treats them; the pre-tokenizer follows `tokenizer.ggml.pre`.
    pub fn tokenizer_json(&self) -> Result<Value> {
        synthesize_tokenizer(&self.file)
    }

    /// An HF `tokenizer_config.json` equivalent: chat template, bos/eos/pad tokens.
    pub fn tokenizer_config(&self) -> Result<Value> {
        let tokens = string_array(&self.file, "tokenizer.ggml.tokens")?;
        let tok = |key: &str| -> Option<Value> {
            let id = self.file.metadata.get(key)?.as_u64()? as usize;
            tokens.get(id).map(|s| Value::String(s.clone()))
        };
        let mut cfg = serde_json::Map::new();
        if let Some(t) = self.file.metadata.get("tokenizer.chat_template") {
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
        if let Some(GgufValue::Bool(b)) = self.file.metadata.get("tokenizer.ggml.add_bos_token") {
            cfg.insert("add_bos_token".into(), json!(b));
        }
        Ok(Value::Object(cfg))
    }

    /// `generation_config.json` equivalent: the eos id(s) the file names.
    pub fn generation_config(&self) -> Value {
        let eos = self
            .file
            .metadata
            .get("tokenizer.ggml.eos_token_id")
            .and_then(|v| v.as_u64());
        let bos = self
            .file
            .metadata
            .get("tokenizer.ggml.bos_token_id")
            .and_then(|v| v.as_u64());
        json!({ "eos_token_id": eos, "bos_token_id": bos })
    }
}

fn meta_u64(file: &GgufFile, key: &str) -> Result<u64> {
    let v = file.meta(key)?;
    v.as_u64().ok_or_else(|| CheckpointError::BadKey {
        origin: file.path().display().to_string(),
        key: key.into(),
        problem: format!("is a {}, expected an unsigned integer", v.type_name()),
    })
}

fn meta_f64(file: &GgufFile, key: &str) -> Result<f64> {
    let v = file.meta(key)?;
    v.as_f64().ok_or_else(|| CheckpointError::BadKey {
        origin: file.path().display().to_string(),
        key: key.into(),
        problem: format!("is a {}, expected a number", v.type_name()),
    })
}

fn string_array(file: &GgufFile, key: &str) -> Result<Vec<String>> {
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

fn synthesize_config(file: &GgufFile) -> Result<Value> {
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

/// Pre-tokenizer regexes of llama.cpp's `tokenizer.ggml.pre` names (`llama-vocab.cpp`).
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

fn pre_tokenizer(pre: &str) -> Value {
    let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
    match pre {
        "llama-bpe" | "llama3" => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX}, "behavior": "Isolated", "invert": false},
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

fn synthesize_tokenizer(file: &GgufFile) -> Result<Value> {
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
        "normalizer": null,
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

/// llama.cpp's converter permutation of q/k rows (`w.reshape(h, 2, d/2, cols).swapaxes(1, 2)`):
/// HF's rotate-half row order to GGUF's interleaved order, for `heads` heads. Needed to write
/// GGUF files that llama.cpp reads.
pub fn permute_rows(values: &[f32], rows: usize, cols: usize, heads: usize) -> Vec<f32> {
    let hd = rows / heads;
    let half = hd / 2;
    let mut out = vec![0f32; values.len()];
    for h in 0..heads {
        for j in 0..2 {
            for i in 0..half {
                let src = h * hd + j * half + i;
                let dst = h * hd + i * 2 + j;
                out[dst * cols..(dst + 1) * cols]
                    .copy_from_slice(&values[src * cols..(src + 1) * cols]);
            }
        }
    }
    out
}

/// The inverse of [`permute_rows`], for rows of `cols` elements of any kind (f32 values, or
/// the bytes of quantized blocks).
fn unpermute_rows<T: Copy + Default>(
    values: &[T],
    rows: usize,
    cols: usize,
    heads: usize,
) -> Vec<T> {
    let hd = rows / heads;
    let half = hd / 2;
    let mut out = vec![T::default(); values.len()];
    for h in 0..heads {
        for i in 0..half {
            for j in 0..2 {
                let src = h * hd + 2 * i + j;
                let dst = h * hd + j * half + i;
                out[dst * cols..(dst + 1) * cols]
                    .copy_from_slice(&values[src * cols..(src + 1) * cols]);
            }
        }
    }
    out
}

impl GgufLlama {
    /// The GGUF name and row order of HF tensor `name`.
    fn entry(&self, name: &str) -> Result<(&str, RowOrder)> {
        let (g, order) = self
            .names
            .get(name)
            .ok_or_else(|| CheckpointError::MissingTensor {
                name: name.to_string(),
                origin: self.origin(),
            })?;
        Ok((g, *order))
    }

    /// `values` (rows of `cols` elements) in HF row order.
    fn hf_rows<T: Copy + Default>(
        &self,
        g: &str,
        order: RowOrder,
        values: Vec<T>,
        rows: usize,
        cols: usize,
    ) -> Result<Vec<T>> {
        let RowOrder::Unpermute(heads) = order else {
            return Ok(values);
        };
        if heads == 0 || !rows.is_multiple_of(heads) || !(rows / heads).is_multiple_of(2) {
            return Err(CheckpointError::BadKey {
                origin: self.origin(),
                key: g.to_string(),
                problem: format!("has {rows} rows, not a multiple of 2 x {heads} heads"),
            });
        }
        Ok(unpermute_rows(&values, rows, cols, heads))
    }
}

impl TensorSource for GgufLlama {
    fn origin(&self) -> String {
        self.file.path().display().to_string()
    }

    fn names(&self) -> Vec<String> {
        self.names.keys().cloned().collect()
    }

    fn info(&self, name: &str) -> Option<TensorInfo> {
        let (g, _) = self.names.get(name)?;
        let t = &self.file.tensors[g];
        Some(TensorInfo {
            shape: t.hf_shape(),
            stored_as: ggml_type_name(t.type_id).to_string(),
        })
    }

    fn read(&self, name: &str) -> Result<HostTensor> {
        let (g, order) = self.entry(name)?;
        let shape = self.file.tensors[g].hf_shape();
        let rows = shape[0];
        let cols: usize = shape[1..].iter().product();
        let values = self.hf_rows(g, order, self.file.read_f32(g)?, rows, cols)?;
        Ok(HostTensor::from_f32(shape, &values))
    }

    fn read_quantized(&self, name: &str) -> Result<Option<QuantizedMatrix>> {
        let (g, order) = self.entry(name)?;
        let shape = self.file.tensors[g].hf_shape();
        let (ty, bytes) = self.file.raw(g)?;
        let (Some(format), &[rows, cols]) = (ty.block_format(), &shape[..]) else {
            return Ok(None);
        };
        let row_bytes = bytes.len() / rows.max(1);
        let bytes = self.hf_rows(g, order, bytes.to_vec(), rows, row_bytes)?;
        QuantizedMatrix::new(format, rows, cols, bytes)
            .map(Some)
            .map_err(|problem| CheckpointError::BadKey {
                origin: self.origin(),
                key: g.to_string(),
                problem,
            })
    }

    fn read_format(&self, name: &str) -> Option<FloatFormat> {
        let (g, _) = self.names.get(name)?;
        GgmlType::from_id(self.file.tensors[g].type_id)
            .ok()
            .map(|_| FloatFormat::F32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_hf() {
        assert_eq!(
            hf_name("blk.3.attn_q.weight").as_deref(),
            Some("model.layers.3.self_attn.q_proj.weight")
        );
        assert_eq!(
            hf_name("blk.12.ffn_down.weight").as_deref(),
            Some("model.layers.12.mlp.down_proj.weight")
        );
        assert_eq!(
            hf_name("token_embd.weight").as_deref(),
            Some("model.embed_tokens.weight")
        );
        assert_eq!(hf_name("rope_freqs.weight"), None);
    }

    #[test]
    fn unpermute_inverts_llama_cpp_permute() {
        let (rows, cols, heads) = (24, 3, 3);
        let hf: Vec<f32> = (0..rows * cols).map(|x| x as f32).collect();
        let gguf = permute_rows(&hf, rows, cols, heads);
        assert_ne!(gguf, hf);
        // Row 1 of head 0 in GGUF order is HF row d/2 = 4 (first element of the second half).
        assert_eq!(gguf[cols], hf[4 * cols]);
        assert_eq!(unpermute_rows(&gguf, rows, cols, heads), hf);
    }
}
